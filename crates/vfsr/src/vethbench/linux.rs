//! The Linux kernel as the router under test (`linux`, and `linux-xdp`, whose `fib_fwd`
//! program looks up the same routes): the router's addresses, forwarding on, a static
//! neighbor for the sink, the table installed with `ip -batch`; and the kernel's counters of
//! what it dropped.

use std::net::Ipv4Addr;
use std::time::Instant;

use serde_json::{json, Value};
use vfsr_lpm::Route;

use super::{if_stat, mac_in, Error, Lab3, ROUTER_A, SINK};

/// Sets the router namespace up as a Linux router with `routes` (all via the sink); returns
/// the seconds `ip -batch` took.
pub(super) fn install_linux_routes(l: &Lab3, routes: &[Route<u32>]) -> Result<f64, Error> {
    l.lab.ip(
        "rtr",
        &["addr", "add", &format!("{ROUTER_A}/24"), "dev", &l.a],
    )?;
    l.lab
        .ip("rtr", &["addr", "add", "10.20.0.1/24", "dev", &l.b])?;
    for c in [
        "net.ipv4.ip_forward=1",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
    ] {
        l.lab.sh("rtr", &["sysctl", "-q", "-w", c])?;
    }
    let smac = mac_in(&l.lab, "sink", &l.s)?;
    let mac = smac
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    l.lab.ip(
        "rtr",
        &[
            "neigh",
            "replace",
            SINK,
            "lladdr",
            &mac,
            "dev",
            &l.b,
            "nud",
            "permanent",
        ],
    )?;
    let batch = std::env::temp_dir().join(format!("vfsr-routes-{}.txt", std::process::id()));
    let mut text = String::with_capacity(routes.len() * 40);
    for r in routes {
        let p = r.prefix;
        let net = Ipv4Addr::from(p.addr());
        if u32::from(net) >> 16 == 0x0a0a || u32::from(net) >> 16 == 0x0a14 {
            continue;
        }
        text.push_str(&format!("route replace {net}/{} via {SINK}\n", p.len()));
    }
    std::fs::write(&batch, text).map_err(|err| Error::File {
        path: batch.clone(),
        err,
    })?;
    let t0 = Instant::now();
    let r = l
        .lab
        .ip("rtr", &["-batch", &batch.display().to_string()])
        .map(|_| t0.elapsed().as_secs_f64());
    let _ = std::fs::remove_file(&batch);
    Ok(r?)
}

/// The kernel's drop counters after a run: the IP layer's non-zero ones and the veths'.
pub(super) fn linux_drops(l: &Lab3) -> Value {
    let read = |ns: &str, i: &str, what: &str| if_stat(l, ns, i, what);
    // The IP layer's own counters (where the kernel dropped what it received).
    let snmp = l
        .lab
        .sh("rtr", &["cat", "/proc/net/snmp"])
        .unwrap_or_default();
    let mut ip = serde_json::Map::new();
    let rows: Vec<&str> = snmp.lines().filter(|x| x.starts_with("Ip: ")).collect();
    if let [names, values] = rows.as_slice() {
        for (k, v) in names
            .split_whitespace()
            .zip(values.split_whitespace())
            .skip(1)
        {
            if let Ok(n) = v.parse::<u64>() {
                if n > 0 && k != "Forwarding" && k != "DefaultTTL" {
                    ip.insert(k.to_string(), json!(n));
                }
            }
        }
    }
    json!({
        "ip": ip,
        "ingress_rx_dropped": read("rtr", &l.a, "rx_dropped"),
        "egress_tx_dropped": read("rtr", &l.b, "tx_dropped"),
        "generator_tx_dropped": read("gen", "gen0", "tx_dropped"),
    })
}
