//! vfsrd as the router under test: its config written for the router's two ports (control
//! plane on the generator's core, one worker on the router's), started in the router's
//! namespace through `vfsrd::harness` (which waits until it says it is ready, and stops it
//! and removes its files when dropped), its stats file and CPU time read.

use std::path::PathBuf;

use serde_json::Value;
use vfsrd::harness::Echo;

use super::{Error, Lab3, GEN_CORE, ROUTER_A, ROUTER_CORE, SINK};

/// A running vfsrd.
pub(super) struct Vfsrd(vfsrd::harness::Vfsrd);

/// The vfsrd binary: `given` (a `--vfsrd` option) when it names a file, else the one built
/// next to vfsr.
pub(crate) fn vfsrd_exe(given: Option<&PathBuf>) -> Result<PathBuf, Error> {
    if let Some(p) = given {
        return if p.is_file() {
            Ok(p.clone())
        } else {
            Err(Error::NoSuchVfsrd(p.clone()))
        };
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("vfsrd")))
        .filter(|p| p.exists())
        .ok_or(Error::NoVfsrd)
}

/// vfsrd's punt classes, in the order of the stats document's `control.rate_limited`.
const PUNT_CLASSES: [&str; 5] = ["arp_nd", "routing", "icmp", "local", "slow_path"];

/// The frames vfsrd's control plane rate-limited between two stats documents, by punt
/// class: `{"arp_nd": n, "routing": n, ...}`.
pub(crate) fn rate_limited_delta(before: &Value, after: &Value) -> Value {
    per_class_delta(before, after, "rate_limited")
}

/// The frames the ports' XDP programs policed between two stats documents, by punt class
/// (`control.policed_xdp`).
pub(crate) fn policed_xdp_delta(before: &Value, after: &Value) -> Value {
    per_class_delta(before, after, "policed_xdp")
}

/// The growth of the per-class array `control.<key>` between two stats documents.
fn per_class_delta(before: &Value, after: &Value, key: &str) -> Value {
    let mut limited = serde_json::Map::new();
    for (i, class) in PUNT_CLASSES.iter().enumerate() {
        let get = |v: &Value| v["control"][key][i].as_u64().unwrap_or(0);
        limited.insert(
            (*class).into(),
            Value::from(get(after).saturating_sub(get(before))),
        );
    }
    Value::Object(limited)
}

/// vfsrd's last stats document (`Null` when unreadable).
pub(super) fn vfsrd_stats(d: &Vfsrd) -> Value {
    d.0.stats()
}

/// Starts vfsrd on the router's ports (`fast`: with the XDP fast path).
pub(super) fn start_vfsrd(l: &Lab3, table: &TableSpec, fast: bool) -> Result<Vfsrd, Error> {
    let exe = vfsrd_exe(None)?;
    let source = match table {
        TableSpec::Synthetic(seed) => format!("synthetic = true\nseed = {seed}"),
        TableSpec::File(p) => format!("file = {:?}", p.display().to_string()),
    };
    let config = format!(
        "[router]\ncontrol_core = {GEN_CORE}\nworkers = [{ROUTER_CORE}]\nfast_path = {fast}\n\n\
         [[interface]]\nname = \"{}\"\nbackend = \"xdp\"\naddresses = [\"{ROUTER_A}/24\"]\n\n\
         [[interface]]\nname = \"{}\"\nbackend = \"xdp\"\naddresses = [\"10.20.0.1/24\"]\n\n\
         [table]\n{source}\nvia4 = [\"{SINK}\"]\n",
        l.a, l.b
    );
    // NetLab::command (under the harness) gives vfsrd SIGTERM if the benchmark dies.
    vfsrd::harness::Vfsrd::start_echo(&l.lab, "rtr", &exe, "vethbench", &config, Echo::Ready)
        .map(Vfsrd)
        .map_err(Error::Vfsrd)
}

/// The table vfsrd is told to load.
pub(super) enum TableSpec {
    Synthetic(u64),
    File(PathBuf),
}

/// vfsrd's CPU time so far (user and system), in seconds.
pub(super) fn vfsrd_cpu(d: &Vfsrd) -> f64 {
    let Some(pid) = d.0.pid() else { return 0.0 };
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(rest) = s.rfind(')').and_then(|i| s.get(i + 2..)) else {
        return 0.0;
    };
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / hz
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rate_limited_counters_are_differenced_by_class() {
        let b = json!({"control": {"rate_limited": [1, 0, 0, 7, 0]}});
        let a = json!({"control": {"rate_limited": [4, 0, 2, 7, 9]}});
        let d = rate_limited_delta(&b, &a);
        assert_eq!(d["arp_nd"], 3);
        assert_eq!(d["routing"], 0);
        assert_eq!(d["icmp"], 2);
        assert_eq!(d["local"], 0);
        assert_eq!(d["slow_path"], 9);
        // A counter that went backwards (a restarted vfsrd) is 0, not a wrap.
        assert_eq!(rate_limited_delta(&a, &b)["slow_path"], 0);
        let b =
            json!({"control": {"policed_xdp": [5, 0, 1, 0, 0], "rate_limited": [9, 9, 9, 9, 9]}});
        let a =
            json!({"control": {"policed_xdp": [8, 0, 6, 0, 0], "rate_limited": [9, 9, 9, 9, 9]}});
        let d = policed_xdp_delta(&b, &a);
        assert_eq!(
            (d["arp_nd"].as_u64(), d["icmp"].as_u64()),
            (Some(3), Some(5))
        );
        assert_eq!(rate_limited_delta(&b, &a)["arp_nd"], 0);
    }
}
