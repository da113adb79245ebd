//! A flood window: the generator's and the sink's counts and the router core's busy time
//! over it (`/proc/stat`, the same measure for every router), and the sustained run at half
//! the maximum with the losses along the path.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::daemon::{vfsrd_stats, Vfsrd};
use super::{if_stat, Generator, Lab3, ROUTER_CORE};

/// Core `c`'s busy and total jiffies from `/proc/stat`.
pub(crate) fn core_jiffies(c: usize) -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let tag = format!("cpu{c} ");
    for l in s.lines() {
        if let Some(rest) = l.strip_prefix(&tag) {
            let v: Vec<u64> = rest
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            let total: u64 = v.iter().take(8).sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            return (total - idle, total);
        }
    }
    (0, 0)
}

/// Runs the flood for `secs` and measures; `during` runs in the middle of the window.
pub(super) fn measure(
    l: &Lab3,
    g: &Generator,
    secs: f64,
    rate: u64,
    during: &mut dyn FnMut() -> (f64, f64, f64, u32),
) -> (f64, f64, f64, (f64, f64, f64, u32)) {
    g.set_rate(rate);
    std::thread::sleep(Duration::from_millis(700));
    let (s0, f0, c0, t0) = (
        g.sent(),
        l.forwarded(),
        core_jiffies(ROUTER_CORE),
        Instant::now(),
    );
    let lat = during();
    let rest = secs - t0.elapsed().as_secs_f64();
    if rest > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(rest));
    }
    let dt = t0.elapsed().as_secs_f64();
    let (s1, f1, c1) = (g.sent(), l.forwarded(), core_jiffies(ROUTER_CORE));
    g.pause();
    let busy = (c1.0 - c0.0) as f64 / ((c1.1 - c0.1).max(1)) as f64;
    ((s1 - s0) as f64 / dt, (f1 - f0) as f64 / dt, busy, lat)
}

/// The veth counters along the path where frames can be lost outside the router's own
/// counters: the generator's egress, the router's ingress and egress, the sink's ingress.
fn path_drops(l: &Lab3) -> [u64; 4] {
    let read = |ns: &str, i: &str, what: &str| if_stat(l, ns, i, what);
    [
        read("gen", "gen0", "tx_dropped"),
        read("rtr", &l.a, "rx_dropped"),
        read("rtr", &l.b, "tx_dropped"),
        read("sink", &l.s, "rx_dropped"),
    ]
}

/// vfsrd under a constant `rate` for `secs`: sent, forwarded, lost and where.
pub(super) fn run_sustain(l: &Lab3, g: &Generator, d: &Vfsrd, rate: f64, secs: u64) -> Value {
    println!(
        "  sustained run: {:.3} Mpps (half the maximum) for {secs} s",
        rate / 1e6
    );
    let before = vfsrd_stats(d);
    let p0 = path_drops(l);
    let (s0, f0) = (g.sent(), l.forwarded());
    g.set_rate(rate as u64);
    std::thread::sleep(Duration::from_secs(secs));
    g.pause();
    std::thread::sleep(Duration::from_millis(500));
    let (s1, f1) = (g.sent(), l.forwarded());
    let p1 = path_drops(l);
    let lost = (s1 - s0).saturating_sub(f1 - f0);
    let path: Vec<u64> = p1
        .iter()
        .zip(p0)
        .map(|(a, b)| a.saturating_sub(b))
        .collect();
    std::thread::sleep(Duration::from_millis(1100));
    let after = vfsrd_stats(d);
    println!(
        "  sent {}, forwarded {}, lost {lost} ({:.6} %); veth drops: generator tx {}, router rx {}, router tx {}, sink rx {}",
        s1 - s0,
        f1 - f0,
        lost as f64 * 100.0 / (s1 - s0).max(1) as f64,
        path.first().unwrap_or(&0),
        path.get(1).unwrap_or(&0),
        path.get(2).unwrap_or(&0),
        path.get(3).unwrap_or(&0),
    );
    json!({
        "rate_pps": rate,
        "seconds": secs,
        "sent": s1 - s0,
        "forwarded": f1 - f0,
        "lost": lost,
        "ring_drops": after["io"]["rx_dropped"].as_u64().unwrap_or(0)
            .saturating_sub(before["io"]["rx_dropped"].as_u64().unwrap_or(0)),
        "veth_drops": {"generator_tx": path.first(), "router_rx": path.get(1),
            "router_tx": path.get(2), "sink_rx": path.get(3)},
    })
}
