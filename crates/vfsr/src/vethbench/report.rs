//! The results: a table of every router's rates, CPU and latency, vfsr's ratios over the
//! kernel's, where each router's bottleneck is, and the JSON document (`--json`).

use serde_json::{json, Value};

use super::{Error, Options, GEN_CORE, ROUTER_CORE};

/// One router's figures.
#[derive(Clone, Debug, Default)]
pub(super) struct Outcome {
    pub(super) router: String,
    pub(super) offered_pps: f64,
    pub(super) forwarded_pps: f64,
    pub(super) cpu_cores_used: f64,
    pub(super) drops: Value,
    /// vfsrd's fast-path counters (frames its XDP programs forwarded), if it is vfsrd.
    pub(super) fast_path: Value,
    pub(super) ping_idle_us: f64,
    pub(super) ping_flood_us: f64,
    pub(super) ping_flood_loss: f64,
    pub(super) tcp_rr_idle_us: f64,
    pub(super) tcp_rr_flood_us: f64,
    /// Requests to the router unanswered within a second under flood (of 200).
    pub(super) tcp_rr_flood_timeouts: u32,
    pub(super) setup_s: f64,
}

impl Outcome {
    pub(super) fn pps_per_core(&self) -> f64 {
        if self.cpu_cores_used > 0.0 {
            self.forwarded_pps / self.cpu_cores_used
        } else {
            0.0
        }
    }
}

/// Prints the results and writes the JSON document if asked.
pub(super) fn report(
    results: &[Outcome],
    idle_cpu: f64,
    sustain: Option<Value>,
    a: &Options,
) -> Result<(), Error> {
    println!(
        "\n{:<10} {:>12} {:>14} {:>10} {:>14} {:>10} {:>10} {:>10} {:>10}",
        "router",
        "offered Mpps",
        "forwarded Mpps",
        "cores",
        "Mpps per core",
        "ping us",
        "ping fl.",
        "tcp_rr us",
        "rr flood"
    );
    for o in results {
        println!(
            "{:<10} {:>12.3} {:>14.3} {:>10.2} {:>14.3} {:>10.0} {:>10.0} {:>10.0} {:>10.0}",
            o.router,
            o.offered_pps / 1e6,
            o.forwarded_pps / 1e6,
            o.cpu_cores_used,
            o.pps_per_core() / 1e6,
            o.ping_idle_us,
            o.ping_flood_us,
            o.tcp_rr_idle_us,
            o.tcp_rr_flood_us
        );
    }
    let get = |n: &str| {
        results
            .iter()
            .find(|o| o.router == n)
            .map(|o| o.pps_per_core())
    };
    let mut ratios = serde_json::Map::new();
    for me in ["vfsr", "vfsr-fast"] {
        let Some(v) = get(me) else { continue };
        for peer in ["linux", "linux-xdp"] {
            if let Some(p) = get(peer).filter(|p| *p > 0.0) {
                println!("{me} / {peer}: {:.2}x packets per second per core", v / p);
                ratios.insert(
                    format!("{}_over_{peer}", me.replace('-', "_")),
                    json!(v / p),
                );
            }
        }
    }
    // Where the bottleneck is: a router whose core is nearly all busy while the generator
    // offers more than it forwards is router-bound; a generator that offers less than asked
    // (or barely more than is forwarded, with the router core idle) is the limit.
    let mut bottleneck = Vec::new();
    for o in results {
        let why = if o.cpu_cores_used >= 0.9 && o.offered_pps > o.forwarded_pps * 1.05 {
            format!(
                "router-bound: core {ROUTER_CORE} {:.0} % busy, {:.0} % of the offered load not forwarded",
                o.cpu_cores_used * 100.0,
                (1.0 - o.forwarded_pps / o.offered_pps.max(1.0)) * 100.0
            )
        } else if o.offered_pps <= o.forwarded_pps * 1.05 {
            format!(
                "generator-bound: everything offered was forwarded, core {ROUTER_CORE} {:.0} % busy",
                o.cpu_cores_used * 100.0
            )
        } else {
            format!(
                "veth/kernel-bound: frames lost with core {ROUTER_CORE} only {:.0} % busy",
                o.cpu_cores_used * 100.0
            )
        };
        println!("{}: {why}", o.router);
        bottleneck.push(json!({"router": o.router, "bottleneck": why}));
    }
    if !idle_cpu.is_nan() {
        println!("vfsrd idle: {idle_cpu:.2} % of a core");
    }
    let lat = |n: &str| results.iter().find(|o| o.router == n);
    let v = lat("vfsr").or(results.first());
    let doc = json!({
        "results": results.iter().map(|o| json!({
            "router": o.router,
            "offered_pps": o.offered_pps,
            "forwarded_pps": o.forwarded_pps,
            "cpu_cores_used": o.cpu_cores_used,
            "pps_per_core": o.pps_per_core(),
            "drops": o.drops,
            "fast_path": o.fast_path,
            "latency_us": {"ping_idle": nan0(o.ping_idle_us), "ping_flood": nan0(o.ping_flood_us),
                "ping_flood_loss_percent": o.ping_flood_loss,
                "tcp_rr_idle": nan0(o.tcp_rr_idle_us), "tcp_rr_flood": nan0(o.tcp_rr_flood_us),
                "tcp_rr_flood_timeouts": o.tcp_rr_flood_timeouts},
            "setup_s": o.setup_s,
        })).collect::<Vec<_>>(),
        "idle_cpu_percent": nan0(idle_cpu),
        "latency_us": {
            "ping_idle": v.map_or(0.0, |o| nan0(o.ping_idle_us)),
            "ping_flood": v.map_or(0.0, |o| nan0(o.ping_flood_us)),
            "tcp_rr_idle": v.map_or(0.0, |o| nan0(o.tcp_rr_idle_us)),
            "tcp_rr_flood": v.map_or(0.0, |o| nan0(o.tcp_rr_flood_us)),
        },
        "ratios": ratios,
        "bottleneck": bottleneck,
        "sustain": sustain.unwrap_or(Value::Null),
        "config": {"seconds": a.seconds, "destinations": a.destinations, "rate_mpps": a.rate, "napi_priority": a.napi_priority,
                   "generator_core": GEN_CORE, "router_core": ROUTER_CORE, "frame_bytes": 64},
    });
    if let Some(p) = &a.json {
        crate::jsonfile::write(p, &doc)?;
    }
    Ok(())
}

fn nan0(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}
