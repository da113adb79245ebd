//! The benchmark's three namespaces and what is set up in them:
//!
//! ```text
//!   gen: gen0 10.10.0.2 ──veth── a [rtr] b ──veth── s 10.20.0.2 :sink
//! ```
//!
//! the veths and addresses, the sink's counting XDP program, the XDP programs attached for
//! a run (detached per namespace), the NAPI threads made and pinned, and the interfaces'
//! MACs, indexes and counters read from inside their namespace.

use vfsr_io::bpf::{self, BpfObject, XdpAttachment, XdpMode};
use vfsrd::netlab::NetLab;

use super::generator::percpu;
use super::{Error, GEN_CORE, ROUTER_A};

/// `SCHED_FIFO` priority of the sink's receive thread: above the generator (ordinary
/// scheduling), below vfsrd's control plane (20), which shares core 0 with both.
const SINK_PRIORITY: i32 = 1;

/// Pins the NAPI threads of interface `ifname` to `core`, with `SCHED_FIFO` priority
/// `priority` when it is not 0; returns how many.
fn pin_napi(ifname: &str, core: usize, priority: i32) -> usize {
    let prefix = format!("napi/{ifname}-");
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if comm.trim_end().starts_with(&prefix) {
                let _ = vfsr_cpu::pin_task(pid, &[core]);
                if priority > 0 {
                    let _ = vfsr_cpu::fifo(pid, priority);
                }
                n += 1;
            }
        }
    }
    n
}

/// Makes interface `ifname`'s receive work (its NAPI context, which exists on a veth once an
/// XDP program is attached) a kernel thread and pins that thread to `core`.
pub(crate) fn threaded_napi(lab: &NetLab, ns: &str, ifname: &str, core: usize, priority: i32) {
    let set = lab.sh(
        ns,
        &[
            "sh",
            "-c",
            &format!("echo 1 > /sys/class/net/{ifname}/threaded"),
        ],
    );
    let n = pin_napi(ifname, core, priority);
    if set.is_err() || n == 0 {
        eprintln!("vfsr: {ifname}: could not pin its NAPI thread to core {core}");
    }
}

/// Interface `ifname`'s MAC address, read in namespace `ns`.
pub(crate) fn mac_in(lab: &NetLab, ns: &str, ifname: &str) -> Result<[u8; 6], Error> {
    let out = lab.sh(ns, &["cat", &format!("/sys/class/net/{ifname}/address")])?;
    let mut m = [0u8; 6];
    let parts: Vec<&str> = out.trim().split(':').collect();
    if parts.len() != 6 {
        return Err(Error::Mac {
            ifname: ifname.to_string(),
            text: out,
        });
    }
    for (b, p) in m.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).map_err(|_| Error::MacDigit {
            ifname: ifname.to_string(),
            text: out.clone(),
        })?;
    }
    Ok(m)
}

/// Interface `ifname`'s index in namespace `ns`.
pub(crate) fn ifindex_in(lab: &NetLab, ns: &str, ifname: &str) -> Result<u32, Error> {
    lab.sh(ns, &["cat", &format!("/sys/class/net/{ifname}/ifindex")])?
        .trim()
        .parse()
        .map_err(|_| Error::Ifindex(ifname.to_string()))
}

/// The three namespaces (`gen`, `rtr`, `sink`) and the router's ports `a` (towards the
/// generator) and `b` (towards the sink, whose end is `s`).
pub(crate) struct Lab3 {
    pub(crate) lab: NetLab,
    pub(crate) a: String,
    pub(crate) b: String,
    pub(super) s: String,
    sink_counts: i32,
    keep: Vec<(String, XdpAttachment)>,
    _sink_obj: BpfObject,
}

impl Lab3 {
    pub(super) fn attach(&mut self, ns: &str, ifname: &str, prog_fd: i32) -> Result<(), Error> {
        let idx = ifindex_in(&self.lab, ns, ifname)?;
        let att = self
            .lab
            .in_ns(ns, move || {
                XdpAttachment::attach(idx, prog_fd, XdpMode::Native)
            })?
            .map_err(|err| Error::Attach {
                ifname: ifname.to_string(),
                err,
            })?;
        self.keep.push((ns.to_string(), att));
        Ok(())
    }

    pub(super) fn detach_all(&mut self, ns: &str) {
        let mut rest = Vec::new();
        for (n, att) in self.keep.drain(..) {
            if n == ns {
                let _ = self.lab.in_ns(ns, move || drop(att));
            } else {
                rest.push((n, att));
            }
        }
        self.keep = rest;
    }

    pub(crate) fn forwarded(&self) -> u64 {
        percpu(self.sink_counts, 0)
    }
}

impl Drop for Lab3 {
    fn drop(&mut self) {
        for (ns, att) in std::mem::take(&mut self.keep) {
            let _ = self.lab.in_ns(&ns, move || drop(att));
        }
    }
}

pub(crate) fn build_lab() -> Result<Lab3, Error> {
    let tag = std::process::id() % 10_000;
    let (a, b, s) = (
        format!("vb{tag}a"),
        format!("vb{tag}b"),
        format!("vb{tag}s"),
    );
    let mut lab = NetLab::new("fb");
    for ns in ["gen", "rtr", "sink"] {
        lab.add_ns(ns)?;
    }
    lab.veth("gen", "gen0", "rtr", &a)?;
    lab.veth("rtr", &b, "sink", &s)?;
    lab.ip("gen", &["addr", "add", "10.10.0.2/24", "dev", "gen0"])?;
    // Both outer ends take frames redirected into their veth by an XDP program (the sink
    // through its own program, gen0 through GRO), as the egress of an XDP fast path needs.
    lab.sh("gen", &["ethtool", "-K", "gen0", "gro", "on"])?;
    lab.ip("gen", &["route", "add", "default", "via", ROUTER_A])?;
    lab.ip("sink", &["addr", "add", "10.20.0.2/24", "dev", &s])?;
    lab.ip("sink", &["route", "add", "default", "via", "10.20.0.1"])?;
    let obj = BpfObject::load("bench", bpf::objects::BENCH)?;
    let sink_counts = obj.map_fd("counts")?;
    let sink_prog = obj.prog_fd("sink")?;
    let mut l = Lab3 {
        lab,
        a,
        b,
        s,
        sink_counts,
        keep: Vec::new(),
        _sink_obj: obj,
    };
    let s = l.s.clone();
    l.attach("sink", &s, sink_prog)?;
    // The sink's receive work stays off the router's core: without its own thread it would
    // run in the softirq of whoever transmits into it, the router. It shares core 0 with the
    // generator, ahead of it, so the sink is never what limits a router.
    threaded_napi(&l.lab, "sink", &s, GEN_CORE, SINK_PRIORITY);
    Ok(l)
}

/// Interface `i`'s counter `what` (`/sys/class/net/<i>/statistics`) in namespace `ns`; 0
/// when unreadable.
pub(crate) fn if_stat(l: &Lab3, ns: &str, i: &str, what: &str) -> u64 {
    l.lab
        .sh(
            ns,
            &["cat", &format!("/sys/class/net/{i}/statistics/{what}")],
        )
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}
