//! `vfsr stress`: vfsrd as a router between network namespaces, put through floods and
//! faults one case at a time, each bounded in time and traffic, with four things measured
//! beside every case:
//!
//! - **the legitimate flow**: 64-byte UDP at 50 kpps from the generator's namespace through
//!   the router to the sink (the XDP generator of `fwd bench --veth`, paced); its delivered
//!   rate under the case ÷ its rate in an idle window measured first, in the same run;
//! - **the control plane's responsiveness**: one-byte TCP transactions every 2 ms from the
//!   generator's namespace to the router's address, through vfsrd's control plane and the
//!   TAP to the host stack; p50 and p99 ÷ the idle window's;
//! - **vfsrd's resident memory**: before, after (`VmRSS`) and the peak sampled every 100 ms;
//! - **the books**: the worker's received frames against forwarded + punted + held + each
//!   named drop (the imbalance is printed), and the control plane's counters.
//!
//! ```text
//!  ns gen                              ns rtr: vfsrd                        ns sink
//!  legit (XDP, paced) ──┐        A ┌─ worker (core 1, FIFO 10) ─┐ B
//!  flood (AF_PACKET) ───┼── gen0 ══╡                            ╞══ sink0 (XDP counts port 9)
//!  TCP RR ──────────────┘          └─ control plane (core 0, FIFO 20) ─ TAP ─ host stack :7000
//! ```
//!
//! **Cases**, floods first (each sends for `--seconds`, as fast as the AF_PACKET ring goes
//! unless said otherwise):
//!
//! - `arp`: ARP requests with random sender MACs and IPs (half on the port's subnet), half of
//!   them for the router's address;
//! - `ns`: Neighbor Solicitations for the router's address from random sources on its /64;
//! - `scan4`: UDP to every address of the connected 10.20.0.0/16 (the ARP table of port B must
//!   stay bounded and keep the legitimate flow's next hop, 10.20.0.2);
//! - `scan6`: UDP to 131,072 addresses of the connected fd00:20::/64, with some traffic
//!   through fd00:20::2 to keep that neighbor active (the ND table must stay bounded and keep
//!   it);
//! - `flows`: UDP with random sources and ports, every frame a new 5-tuple (the flow table
//!   must stay within its capacity, evicting idle entries and leaving new flows uncached
//!   where a bucket's entries are all recent);
//! - `echo`: ICMP echo to the router (echo replies ≤ the `icmp` punt limit × seconds +
//!   burst);
//! - `syn`: TCP SYNs to port 22 of the router's address, the `local` punt class (on AF_XDP
//!   the port's program drops what exceeds the class's limit; the TCP prober's segments,
//!   also local, take their chance in the same bucket);
//! - `ttl1`, `noroute`: TTL 1 transit and destinations without a route, IPv4 and IPv6 (ICMP
//!   errors sent ≤ 1000/s × seconds + 50, the workers' limit);
//! - `malformed`: one frame of each kind `vfsr-wire` rejects, round and round (all dropped by
//!   name, none forwarded);
//! - `punt`: each punt class at its limit and at twice it, in turn (ARP, ND, ICMP to the
//!   router, TCP to port 22, BGP, router alert, and on AF_XDP TCP SYNs to port 22 against
//!   their own bucket): what the control plane took ≤ limit × time + burst, and the excess
//!   counted as rate-limited or policed in XDP.
//!
//! Then faults: `starve` (a busy process at the worker's priority pinned to its core for
//! the window), `linkflap` (port B down for a second and up; traffic must resume),
//! `tapgone` (port A's TAP deleted under vfsrd: it must keep forwarding and say so),
//! `unwritable` (the control socket's and the stats file's directory a read-only mount:
//! a clear error, no crash) and `sigkill` (SIGKILL while forwarding: the ports, XDP
//! programs and sysctls must be as before once the next vfsrd has started and stopped).
//!
//! Targets (verdict): legitimate rate ≥ 0.90 of idle for floods that do not saturate the
//! port (a flood saturates it when frames are lost before vfsrd sees them: the port's ring,
//! the veth) and leave the generator its rate (on two cores it shares core 0 with the flood's
//! sender: when it offers less and vfsrd delivers ≥ 0.90 of what it offered, the shortfall is
//! the generator's, and the verdict says so), TCP p99 ≤ 1.5× idle, no crash, no unbounded
//! growth (tables within their bounds, resident memory up by less than [`RSS_GROWTH_KIB`]),
//! the books balanced, and each case's own checks.

mod error;
mod frames;
mod lab;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};
use vfsr_api::Request;

use crate::vethbench::RrOutcome;
use error::Error;
use frames::Rng;
use lab::{Lab, RssWatch};

/// The share of its idle rate the legitimate flow must keep (and of what was offered that
/// vfsrd must deliver).
const LEGIT_MIN: f64 = 0.90;
/// Resident memory may grow this much over a case (KiB) before it counts as growth.
pub(crate) const RSS_GROWTH_KIB: u64 = 32 * 1024;
/// The neighbor tables' capacity (`vfsr_neigh`'s default).
const NEIGH_MAX: usize = 4096;
/// The workers' ICMP error limit: per second, and burst (`vfsr_fwd::ratelimit`).
const ICMP_RATE: f64 = 1000.0;
const ICMP_BURST: f64 = 50.0;
/// Settling time after a window before the counters are read (the stats file is rewritten
/// every second).
const SETTLE: Duration = Duration::from_millis(1500);

/// Every case, in the order they run.
pub(crate) const CASES: &[&str] = &[
    "arp",
    "ns",
    "scan4",
    "scan6",
    "flows",
    "echo",
    "syn",
    "ttl1",
    "noroute",
    "malformed",
    "punt",
    "starve",
    "linkflap",
    "tapgone",
    "unwritable",
    "sigkill",
];

/// `vfsr stress` arguments.
#[derive(Args)]
pub struct StressArgs {
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Seconds each case floods (and the idle window measures).
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Run only these cases (comma-separated; default: all).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// vfsrd's packet I/O on both ports: xdp or packet.
    #[arg(long, default_value = "xdp")]
    backend: String,
    /// The vfsrd binary (default: the one built next to vfsr).
    #[arg(long)]
    vfsrd: Option<PathBuf>,
    /// Seed of the floods' random addresses.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The core the floods' sender runs on. Over veth the receiving port's work (its XDP
    /// program, the kernel's receive path) runs on the sender's core, so 0 (the default)
    /// puts a flood's receive work beside the control plane; 1 puts it on the worker's
    /// core, where a NIC's receive interrupts for the worker's queue would run.
    #[arg(long, default_value_t = lab::GEN_CORE)]
    flood_core: usize,
    /// The floods' rate in frames per second (0, the default: as fast as the sender's ring
    /// takes them). A fixed rate compares two builds at the same offered load.
    #[arg(long, default_value_t = 0)]
    flood_pps: u64,
}

/// The idle window's figures every case is divided by.
#[derive(Clone, Debug, Default)]
struct Baseline {
    legit_pps: f64,
    rr_p50: f64,
    rr_p99: f64,
}

/// One named check of a case.
#[derive(Clone, Debug)]
struct Check {
    name: String,
    ok: bool,
    detail: String,
}

/// One case's figures and verdict.
#[derive(Clone, Debug, Default)]
struct CaseResult {
    name: String,
    kind: &'static str,
    legit_ratio: Option<f64>,
    /// What vfsrd delivered of what the generator offered in the window.
    legit_share: Option<f64>,
    legit_pps: Option<f64>,
    rr: RrOutcome,
    rr_p50_ratio: Option<f64>,
    rr_p99_ratio: Option<f64>,
    rss: (u64, u64, u64),
    imbalance: Option<i64>,
    saturated: bool,
    /// The case's design excuses it from the legitimate-rate and latency targets (say so).
    excused: Option<&'static str>,
    crashed: bool,
    checks: Vec<Check>,
    extra: Value,
    error: Option<String>,
}

impl CaseResult {
    fn new(name: &str, kind: &'static str) -> CaseResult {
        CaseResult {
            name: name.to_string(),
            kind,
            extra: json!({}),
            ..CaseResult::default()
        }
    }

    fn check(&mut self, name: &str, ok: bool, detail: impl Into<String>) {
        self.checks.push(Check {
            name: name.to_string(),
            ok,
            detail: detail.into(),
        });
    }

    fn note(&mut self, key: &str, v: Value) {
        if let Some(o) = self.extra.as_object_mut() {
            o.insert(key.to_string(), v);
        }
    }

    /// Every target missed, in words (empty: the case passes).
    fn failures(&self) -> Vec<String> {
        let mut f = Vec::new();
        if let Some(e) = &self.error {
            f.push(format!("error: {e}"));
        }
        if self.crashed {
            f.push("vfsrd crashed".into());
        }
        if self.excused.is_none() && !self.saturated && !self.generator_short() {
            if let Some(r) = self.legit_ratio {
                if r < LEGIT_MIN {
                    f.push(format!("legit {r:.2} < {LEGIT_MIN:.2}"));
                }
            }
        }
        if self.excused.is_none() {
            match self.rr_p99_ratio {
                Some(r) if r > 1.5 => f.push(format!("cp p99 {r:.2}x > 1.5x")),
                None if self.legit_ratio.is_some() => f.push("no TCP transactions".into()),
                _ => {}
            }
        }
        if let Some(i) = self.imbalance {
            if i != 0 {
                f.push(format!("books off by {i}"));
            }
        }
        let (before, after, _) = self.rss;
        if before > 0 && after > before + RSS_GROWTH_KIB {
            f.push(format!("RSS grew {} KiB", after - before));
        }
        for c in self.checks.iter().filter(|c| !c.ok) {
            f.push(format!("{}: {}", c.name, c.detail));
        }
        f
    }

    /// The legitimate flow fell short of its idle rate because the generator offered less
    /// (it shares a core with the flood's sender and the control plane), not because vfsrd
    /// lost it: vfsrd delivered at least [`LEGIT_MIN`] of what was offered.
    fn generator_short(&self) -> bool {
        self.legit_ratio.is_some_and(|r| r < LEGIT_MIN)
            && self.legit_share.is_some_and(|s| s >= LEGIT_MIN)
    }

    fn to_json(&self) -> Value {
        let fails = self.failures();
        json!({
            "case": self.name,
            "kind": self.kind,
            "legit_rate_ratio": self.legit_ratio,
            "legit_delivered_share": self.legit_share,
            "legit_pps": self.legit_pps,
            "cp_latency_us": {"p50": self.rr.pct(0.5), "p99": self.rr.pct(0.99),
                              "transactions": self.rr.samples.len(), "lost": self.rr.unanswered,
                              "error": self.rr.error},
            "cp_latency_ratio": {"p50": self.rr_p50_ratio, "p99": self.rr_p99_ratio},
            "rss_kib": {"before": self.rss.0, "after": self.rss.1, "peak": self.rss.2},
            "drops_accounted": self.imbalance.map(|i| i == 0),
            "imbalance": self.imbalance,
            "port_saturated": self.saturated,
            "excused_from_rate_targets": self.excused,
            "crashed": self.crashed,
            "checks": self.checks.iter().map(|c| json!({"check": c.name, "ok": c.ok, "detail": c.detail})).collect::<Vec<_>>(),
            "verdict": if fails.is_empty() { "pass" } else { "FAIL" },
            "failures": fails,
            "details": self.extra,
            "error": self.error,
        })
    }
}

/// The cases `--only` asks for, checked, in run order.
fn selected(only: &[String]) -> Result<Vec<&'static str>, Error> {
    if only.is_empty() {
        return Ok(CASES.to_vec());
    }
    for o in only {
        if !CASES.contains(&o.as_str()) {
            return Err(Error::UnknownCase(o.clone()));
        }
    }
    Ok(CASES
        .iter()
        .copied()
        .filter(|c| only.iter().any(|o| o == c))
        .collect())
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Runs the stress cases.
pub(crate) fn run(a: &StressArgs) -> Result<(), Error> {
    if !(1.0..=120.0).contains(&a.seconds) {
        return Err(Error::Seconds);
    }
    if !matches!(a.backend.as_str(), "xdp" | "packet") {
        return Err(Error::Backend(a.backend.clone()));
    }
    let cases = selected(&a.only)?;
    if let Err(e) = vfsrd::netlab::available() {
        return Err(Error::NoNamespaces(e));
    }
    for tool in ["ethtool", "taskset", "chrt", "timeout", "mount"] {
        if which(tool).is_none() {
            return Err(Error::MissingTool(tool));
        }
    }
    let exe = crate::vethbench::vfsrd_exe(a.vfsrd.as_ref())?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        return Err(Error::TooFewCores);
    }
    let usable = vfsr_cpu::usable_cores();
    if !usable.contains(&a.flood_core) {
        return Err(Error::FloodCore(a.flood_core, usable));
    }
    crate::interrupt::on_interrupt("stopping the stress run", || {
        INTERRUPTED.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs(20));
        crate::interrupt::delete_namespaces(&format!("fb{}-", std::process::id()));
        std::process::exit(130);
    });
    let cpu = crate::machine::cpu_model();
    println!(
        "vfsr stress: {cpu}, {cpus} cores; vfsrd {} backend, control plane core 0, worker core 1, \
         floods sent from core {} at {}; {:.0} s per case; legitimate flow {} kpps; cases: {}",
        a.backend,
        a.flood_core,
        if a.flood_pps == 0 {
            "the highest rate".to_string()
        } else {
            format!("{} kpps", a.flood_pps as f64 / 1e3)
        },
        a.seconds,
        lab::LEGIT_PPS / 1000,
        cases.join(", ")
    );
    // The generator's own bound: the whole run with room to spare.
    let limit = Duration::from_secs_f64(300.0 + cases.len() as f64 * (a.seconds * 4.0 + 60.0));
    let t_run = Instant::now();
    let mut lab = Lab::build(exe, &a.backend, limit)?;
    lab.flood_core = a.flood_core;
    lab.flood_pps = a.flood_pps;
    lab.start_vfsrd()?;
    lab.legit_on();
    // Let the next hop resolve and the flow settle.
    std::thread::sleep(Duration::from_secs(2));
    let (base, base_result) = baseline(&mut lab, a.seconds)?;
    println!(
        "idle: legitimate flow {:.1} kpps delivered; TCP RR p50 {:.0} µs, p99 {:.0} µs ({} transactions)",
        base.legit_pps / 1e3,
        base.rr_p50,
        base.rr_p99,
        base_result.rr.samples.len()
    );
    let mut results = vec![base_result];
    let mut rng = Rng::new(a.seed);
    for name in &cases {
        if INTERRUPTED.load(Ordering::Relaxed) {
            return Err(Error::Interrupted);
        }
        if !lab.running() {
            println!("  (vfsrd is not running: starting it again)");
            lab.start_vfsrd()?;
            std::thread::sleep(Duration::from_secs(1));
        }
        println!("\n== {name}");
        let mut r = match run_case(&mut lab, name, a.seconds, &base, &mut rng) {
            Ok(r) => r,
            Err(e) => {
                let mut r = CaseResult::new(name, "flood");
                r.error = Some(e.to_string());
                r
            }
        };
        if r.kind == "flood" && !lab.running() {
            r.crashed = true;
        }
        print_case(&r);
        results.push(r);
    }
    lab.legit_off();
    lab.finish()?;
    drop(lab);
    let table = render(&results, &base, &cpu, a);
    println!("\n{table}");
    println!("run took {:.0} s", t_run.elapsed().as_secs_f64());
    if let Some(p) = &a.json {
        let doc = json!({
            "cpu": cpu,
            "cores": cpus,
            "pid": std::process::id(),
            "machine": crate::machine::facts(),
            "config": {"seconds": a.seconds, "backend": a.backend, "seed": a.seed,
                       "legit_pps": lab::LEGIT_PPS, "rr_interval_ms": 2,
                       "control_core": 0, "worker_core": 1,
                       "flood_core": a.flood_core, "flood_pps": a.flood_pps,
                       "control_priority": lab::CONTROL_PRIORITY,
                       "worker_priority": lab::WORKER_PRIORITY,
                       "targets": {"legit_ratio_min": LEGIT_MIN, "cp_p99_ratio_max": 1.5,
                                   "rss_growth_kib_max": RSS_GROWTH_KIB,
                                   "icmp_errors_per_s": ICMP_RATE, "icmp_burst": ICMP_BURST,
                                   "neighbor_table_max": NEIGH_MAX}},
            "baseline": {"legit_pps": base.legit_pps, "cp_p50_us": base.rr_p50, "cp_p99_us": base.rr_p99},
            "cases": results.iter().map(CaseResult::to_json).collect::<Vec<_>>(),
            "table": table,
            "run_seconds": t_run.elapsed().as_secs_f64(),
        });
        crate::jsonfile::write(p, &doc)?;
    }
    let failed: Vec<&str> = results
        .iter()
        .filter(|r| !r.failures().is_empty())
        .map(|r| r.name.as_str())
        .collect();
    if failed.is_empty() {
        println!("every case met its targets");
    } else {
        println!("cases that missed a target: {}", failed.join(", "));
    }
    Ok(())
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(tool))
            .find(|f| f.is_file())
    })
}

/// What a measured window saw.
struct Window {
    legit_pps: f64,
    legit_offered_pps: f64,
    rr: RrOutcome,
    rss: (u64, u64, u64),
    stats0: Value,
    stats1: Value,
    counters0: Value,
    counters1: Value,
    /// Seconds between the two counter readings.
    counter_secs: f64,
    sent: lab::FloodSent,
    /// Frames lost on the way into the router before vfsrd saw them (the port's ring, the
    /// veth's transmit side).
    path_drops: u64,
}

fn link_drops(lab: &Lab) -> u64 {
    crate::vethbench::if_stat(&lab.l, "gen", "gen0", "tx_dropped")
        + crate::vethbench::if_stat(&lab.l, "rtr", &lab.l.a, "rx_dropped")
}

/// Measures the legitimate flow, the TCP transactions and vfsrd's memory while `action`
/// runs (it should take about `secs`), then waits [`SETTLE`] and reads the counters.
fn window(
    lab: &Lab,
    secs: f64,
    action: impl FnOnce(&Lab) -> Result<lab::FloodSent, Error>,
) -> Result<Window, Error> {
    let pid = lab.pid();
    let stats0 = lab.stats();
    let counters0 = lab
        .api(&Request::ShowCounters { nonzero: false })
        .unwrap_or(Value::Null);
    let t_c0 = Instant::now();
    let rss0 = pid.and_then(lab::rss_kib).map_or(0, |r| r.0);
    let d0 = link_drops(lab);
    let rr = lab::rr_probe(&lab.l, secs)?;
    let watch = RssWatch::start(pid);
    let (s0, f0) = lab.legit_counts();
    let t0 = Instant::now();
    let sent = action(lab);
    let (s1, f1) = lab.legit_counts();
    let dt = t0.elapsed().as_secs_f64();
    let rr = rr.join().map_err(|_| Error::ProberPanicked)?;
    let peak = watch.finish();
    let path_drops = link_drops(lab).saturating_sub(d0);
    std::thread::sleep(SETTLE);
    let counters1 = lab
        .api(&Request::ShowCounters { nonzero: false })
        .unwrap_or(Value::Null);
    let counter_secs = t_c0.elapsed().as_secs_f64();
    let stats1 = lab.stats();
    let rss1 = pid.and_then(lab::rss_kib).map_or(0, |r| r.0);
    Ok(Window {
        legit_pps: (f1 - f0) as f64 / dt,
        legit_offered_pps: (s1 - s0) as f64 / dt,
        rr,
        rss: (rss0, rss1, peak.max(rss0).max(rss1)),
        stats0,
        stats1,
        counters0,
        counters1,
        counter_secs,
        sent: sent?,
        path_drops,
    })
}

impl Window {
    /// Fills the figures every case shares.
    fn fill(&self, r: &mut CaseResult, base: &Baseline) {
        r.legit_pps = Some(self.legit_pps);
        r.legit_ratio = Some(self.legit_pps / base.legit_pps.max(1.0));
        r.legit_share =
            (self.legit_offered_pps > 0.0).then(|| self.legit_pps / self.legit_offered_pps);
        r.rr = self.rr.clone();
        r.rr_p50_ratio = self.rr.pct(0.5).map(|v| v / base.rr_p50.max(1.0));
        r.rr_p99_ratio = self.rr.pct(0.99).map(|v| v / base.rr_p99.max(1.0));
        r.rss = self.rss;
        r.saturated = self.path_drops > 0;
        if self.stats0.is_object() && self.stats1.is_object() {
            let (imb, books) = lab::accounting(&self.stats0, &self.stats1);
            r.imbalance = Some(imb);
            r.note("books", books);
            r.note("control", lab::control_delta(&self.stats0, &self.stats1));
            // The control plane thread's CPU time over the window: what the case cost it.
            let cpu = |v: &Value| v["cpu_seconds"]["control"].as_f64();
            if let (Some(a), Some(b)) = (cpu(&self.stats0), cpu(&self.stats1)) {
                let secs = self.stats_secs();
                let used = (b - a).max(0.0);
                r.note(
                    "control_cpu",
                    json!({"seconds": used, "share": (secs > 0.0).then(|| used / secs)}),
                );
            }
        }
        r.note(
            "flood",
            json!({"frames": self.sent.frames, "pps": self.sent.pps(), "seconds": self.sent.secs,
                   "ring_refused": self.sent.refused, "lost_before_vfsrd": self.path_drops}),
        );
        r.note(
            "legit",
            json!({"offered_pps": self.legit_offered_pps, "delivered_pps": self.legit_pps}),
        );
    }

    /// The workers' event `name` over the window.
    fn event(&self, name: &str) -> u64 {
        let a = lab::events(&self.counters1);
        let b = lab::events(&self.counters0);
        a.get(name)
            .copied()
            .unwrap_or(0)
            .saturating_sub(b.get(name).copied().unwrap_or(0))
    }

    fn control(&self, key: &str) -> u64 {
        lab::control_delta(&self.stats0, &self.stats1)[key]
            .as_u64()
            .unwrap_or(0)
    }

    /// Seconds the stats file's two readings are apart (vfsrd's uptime).
    fn stats_secs(&self) -> f64 {
        let u = |v: &Value| v["uptime_s"].as_f64().unwrap_or(0.0);
        (u(&self.stats1) - u(&self.stats0)).max(0.0)
    }
}

fn baseline(lab: &mut Lab, secs: f64) -> Result<(Baseline, CaseResult), Error> {
    println!("== idle (baseline)");
    let w = window(lab, secs, |_| {
        std::thread::sleep(Duration::from_secs_f64(secs));
        Ok(lab::FloodSent::default())
    })?;
    let base = Baseline {
        legit_pps: w.legit_pps,
        rr_p50: w.rr.pct(0.5).unwrap_or(0.0),
        rr_p99: w.rr.pct(0.99).unwrap_or(0.0),
    };
    if base.legit_pps < lab::LEGIT_PPS as f64 * 0.5 {
        return Err(Error::IdleRate(base.legit_pps));
    }
    if w.rr.samples.is_empty() {
        return Err(Error::IdleNoTransactions(
            w.rr.error.clone().unwrap_or_default(),
        ));
    }
    let mut r = CaseResult::new("idle", "baseline");
    w.fill(&mut r, &base);
    Ok((base, r))
}

fn run_case(
    lab: &mut Lab,
    name: &str,
    secs: f64,
    base: &Baseline,
    rng: &mut Rng,
) -> Result<CaseResult, Error> {
    match name {
        "arp" | "ns" | "scan4" | "scan6" | "flows" | "echo" | "syn" | "ttl1" | "noroute"
        | "malformed" => flood_case(lab, name, secs, base, rng),
        "punt" => punt_case(lab, secs, base, rng),
        "starve" => starve_case(lab, secs, base),
        "linkflap" => linkflap_case(lab, secs, base),
        "tapgone" => tapgone_case(lab, secs, base),
        "unwritable" => unwritable_case(lab),
        "sigkill" => sigkill_case(lab, secs, base),
        other => Err(Error::NoCase(other.to_string())),
    }
}

/// The frames of a flood case.
fn flood_frames(lab: &Lab, name: &str, rng: &mut Rng) -> Vec<Vec<u8>> {
    let macs = (lab.mac_a, lab.mac_gen);
    let gen6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 0, 0, 0, 0, 2);
    let mut out = Vec::new();
    match name {
        "arp" => {
            for k in 0..65_536u32 {
                let mac = rng.mac();
                let x = rng.next();
                let sender = if k % 2 == 0 {
                    Ipv4Addr::new(10, 10, 0, 3 + (x % 250) as u8)
                } else {
                    Ipv4Addr::from((x >> 8) as u32 | 0x0100_0000)
                };
                let target = if k % 4 < 2 {
                    lab::ROUTER_A4
                } else {
                    Ipv4Addr::new(10, 10, 0, 3 + ((x >> 40) % 250) as u8)
                };
                out.push(frames::arp_request(mac, sender, target));
            }
        }
        "ns" => {
            let target = Ipv6Addr::new(0xfd00, 0x10, 0, 0, 0, 0, 0, 1);
            for _ in 0..65_536u32 {
                let mac = rng.mac();
                let x = rng.next();
                let src = Ipv6Addr::from((0xfd00_0010_0000_0000u128 << 64) | u128::from(x | 0x100));
                out.push(frames::neighbor_solicit(mac, src, target));
            }
        }
        "scan4" => {
            for h in 0..65_536u32 {
                let dst = Ipv4Addr::from(0x0a14_0000 | h);
                if h <= 2 || h == 0xffff {
                    continue;
                }
                out.push(frames::udp4(macs, lab::GEN4, dst, (10_000, 10_001), 64, 18));
            }
        }
        "scan6" => {
            let keep = Ipv6Addr::new(0x2001, 0xdb8, 0x18, 0, 0, 0, 0, 1);
            for h in 3..131_075u32 {
                let dst = Ipv6Addr::new(0xfd00, 0x20, 0, 0, 0, 0, (h >> 16) as u16, h as u16);
                out.push(frames::udp6(macs, gen6, dst, (10_000, 10_001), 64));
                if h % 64 == 0 {
                    out.push(frames::udp6(macs, gen6, keep, (10_000, 10_001), 64));
                }
            }
        }
        "flows" => {
            for _ in 0..262_144u32 {
                let x = rng.next();
                let src = Ipv4Addr::from(0x6440_0000 | ((x as u32) & 0x003f_ffff));
                let dst = Ipv4Addr::new(198, 18, 2, (x >> 24) as u8);
                let sp = 1024 + ((x >> 32) as u16 % 60_000);
                let dp = 10_000 + ((x >> 48) as u16 % 50_000);
                out.push(frames::udp4(macs, src, dst, (sp, dp), 64, 18));
            }
        }
        "echo" => {
            for s in 0..1024u16 {
                out.push(frames::echo4(macs, lab::GEN4, lab::ROUTER_A4, s));
            }
        }
        "syn" => {
            for p in 0..1024u16 {
                let ports = (20_000 + p, 22);
                out.push(frames::tcp4(
                    macs,
                    lab::GEN4,
                    lab::ROUTER_A4,
                    ports,
                    frames::TCP_SYN,
                ));
            }
        }
        "ttl1" | "noroute" => {
            // IPv4 and IPv6 in turn: routed with TTL 1, or with a TTL of 64 to where no
            // route goes.
            let (net4, net6, ttl) = if name == "ttl1" {
                ([198, 18, 2], 0x18, 1)
            } else {
                ([203, 0, 113], 0x99, 64)
            };
            for k in 0..4096u32 {
                if k % 2 == 0 {
                    let [a, b, c] = net4;
                    let dst = Ipv4Addr::new(a, b, c, k as u8);
                    out.push(frames::udp4(
                        macs,
                        lab::GEN4,
                        dst,
                        (10_000, 10_001),
                        ttl,
                        18,
                    ));
                } else {
                    let d6 = Ipv6Addr::new(0x2001, 0xdb8, net6, 0, 0, 0, 0, k as u16);
                    out.push(frames::udp6(macs, gen6, d6, (10_000, 10_001), ttl));
                }
            }
        }
        "malformed" => {
            let set = frames::malformed(
                macs,
                lab::GEN4,
                Ipv4Addr::new(198, 18, 2, 1),
                gen6,
                Ipv6Addr::new(0x2001, 0xdb8, 0x18, 0, 0, 0, 0, 1),
            );
            out.extend(set.into_iter().map(|(_, f)| f));
        }
        _ => {}
    }
    out
}

/// The neighbor table of port `port` (`arp` or `nd`): (entries, the entry of `addr` as
/// (state, MAC)).
fn neighbors(
    lab: &Lab,
    port: &str,
    family: &str,
    addr: &str,
) -> Option<(usize, Option<(String, String)>)> {
    let v = lab
        .api(&Request::ShowNeighbors {
            port: Some(port.to_string()),
        })
        .ok()?;
    let rows = v["neighbors"].as_array()?;
    let mine: Vec<&Value> = rows.iter().filter(|r| r["family"] == family).collect();
    let entry = mine.iter().find(|r| r["address"] == addr).map(|r| {
        (
            r["state"].as_str().unwrap_or("").to_string(),
            r["mac"].as_str().unwrap_or("").to_string(),
        )
    });
    Some((mine.len(), entry))
}

fn usable(state: &str) -> bool {
    matches!(state, "REACHABLE" | "STALE" | "DELAY" | "PROBE")
}

/// Samples a neighbor table every 250 ms while a flood runs: the largest size seen and
/// how many samples lacked the watched entry in a usable state.
fn watch_neighbors(
    socket: Option<PathBuf>,
    port: String,
    family: &'static str,
    addr: String,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(usize, u32, u32)> {
    std::thread::spawn(move || {
        let (mut max, mut missing, mut samples) = (0usize, 0u32, 0u32);
        let Some(sock) = socket else {
            return (0, 0, 0);
        };
        while !stop.load(Ordering::Relaxed) {
            if let Ok(v) = lab::api_call(
                &sock,
                &Request::ShowNeighbors {
                    port: Some(port.clone()),
                },
            ) {
                let rows = v["neighbors"].as_array().cloned().unwrap_or_default();
                let mine: Vec<&Value> = rows.iter().filter(|r| r["family"] == family).collect();
                max = max.max(mine.len());
                samples += 1;
                let ok = mine.iter().any(|r| {
                    r["address"] == addr.as_str() && usable(r["state"].as_str().unwrap_or(""))
                });
                if !ok {
                    missing += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        (max, missing, samples)
    })
}

fn flood_case(
    lab: &mut Lab,
    name: &str,
    secs: f64,
    base: &Baseline,
    rng: &mut Rng,
) -> Result<CaseResult, Error> {
    let pool = Arc::new(flood_frames(lab, name, rng));
    let mut r = CaseResult::new(name, "flood");
    let b = lab.l.b.clone();
    let a_port = lab.l.a.clone();
    // The neighbor the scan must not evict.
    let watched = match name {
        "scan4" => Some((b.clone(), "arp", "10.20.0.2".to_string())),
        "scan6" => Some((b.clone(), "nd", "fd00:20::2".to_string())),
        _ => None,
    };
    if name == "scan6" {
        // Resolve fd00:20::2 before the scan starts: the scan's own frames through it keep
        // it in use.
        let keep = frames::udp6(
            (lab.mac_a, lab.mac_gen),
            Ipv6Addr::new(0xfd00, 0x10, 0, 0, 0, 0, 0, 2),
            Ipv6Addr::new(0x2001, 0xdb8, 0x18, 0, 0, 0, 0, 1),
            (10_000, 10_001),
            64,
        );
        lab::flood(&lab.l, lab.flood_core, Arc::new(vec![keep]), 50, 1.0)?;
    }
    let flows0 = lab.api(&Request::ShowFlows).unwrap_or(Value::Null);
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watched
        .as_ref()
        .map(|(p, f, a)| watch_neighbors(lab.socket(), p.clone(), f, a.clone(), Arc::clone(&stop)));
    let w = window(lab, secs, |lab| {
        let s = lab::flood(
            &lab.l,
            lab.flood_core,
            Arc::clone(&pool),
            lab.flood_pps,
            secs,
        );
        stop.store(true, Ordering::Relaxed);
        s
    });
    stop.store(true, Ordering::Relaxed);
    let watch = watcher.and_then(|t| t.join().ok());
    let w = w?;
    w.fill(&mut r, base);
    println!(
        "  flood: {} frames, {:.0} kpps offered",
        w.sent.frames,
        w.sent.pps() / 1e3
    );
    let limit_secs = w.counter_secs;
    match name {
        "arp" | "ns" => {
            let fam = if name == "arp" { "arp" } else { "nd" };
            let n = neighbors(lab, &a_port, fam, "").map_or(0, |x| x.0);
            r.check(
                "neighbor table bounded",
                n <= NEIGH_MAX,
                format!("{n} {fam} entries on port A (at most {NEIGH_MAX})"),
            );
            let punt_limit = 2000.0;
            let taken = w.control("frames_in") as f64;
            let limited = lab::control_delta(&w.stats0, &w.stats1)["rate_limited"]["arp_nd"]
                .as_u64()
                .unwrap_or(0);
            r.note("arp_nd_limited", json!(limited));
            check_policed(&mut r, lab, &w, "arp_nd", punt_limit);
            let bound = punt_limit * w.stats_secs() + 200.0 + 1000.0;
            r.check(
                "punt limit held",
                taken - limited as f64 <= bound,
                format!(
                    "{:.0} control frames taken, {limited} rate-limited, in {:.1} s (bound: arp_nd 2000/s + burst, plus 1000 for the TCP prober: {bound:.0})",
                    taken - limited as f64,
                    w.stats_secs()
                ),
            );
        }
        "scan4" | "scan6" => {
            let (p, fam, addr) = watched.clone().unwrap_or_default();
            let end = neighbors(lab, &p, fam, &addr);
            let (n, entry) = end.clone().unwrap_or((0, None));
            let (max, missing, samples) = watch.unwrap_or((0, 0, 0));
            r.check(
                "neighbor table bounded",
                n <= NEIGH_MAX && max <= NEIGH_MAX,
                format!("{fam} entries on port B: {max} at most during the scan, {n} after (bound {NEIGH_MAX})"),
            );
            let kept = entry.as_ref().is_some_and(|(s, _)| usable(s)) && missing == 0;
            r.check(
                "active neighbor kept",
                kept,
                format!(
                    "{addr}: {} after; missing or unusable in {missing} of {samples} samples",
                    entry.map_or("absent".to_string(), |(s, m)| format!("{s} {m}"))
                ),
            );
            r.note(
                "neighbors",
                json!({"max_during": max, "after": n, "samples": samples, "watched_missing": missing}),
            );
        }
        "flows" => {
            let f1 = lab.api(&Request::ShowFlows).unwrap_or(Value::Null);
            let get = |v: &Value, k: &str| -> u64 {
                v["workers"]
                    .as_array()
                    .map_or(0, |a| a.iter().map(|w| w[k].as_u64().unwrap_or(0)).sum())
            };
            let cap = get(&f1, "capacity");
            let entries = get(&f1, "entries");
            let evicted = get(&f1, "evictions").saturating_sub(get(&flows0, "evictions"));
            let inserts = get(&f1, "inserts").saturating_sub(get(&flows0, "inserts"));
            let refused = get(&f1, "refusals").saturating_sub(get(&flows0, "refusals"));
            r.check(
                "flow table bounded",
                cap > 0 && entries <= cap,
                format!("{entries} entries of {cap}; {inserts} inserted, {evicted} evicted, {refused} refused in the window"),
            );
            r.note("flow_table", json!({"capacity": cap, "entries": entries, "inserts": inserts, "evictions": evicted, "refusals": refused}));
        }
        "syn" => check_policed(&mut r, lab, &w, "local", 10_000.0),
        "echo" => {
            check_policed(&mut r, lab, &w, "icmp", 1000.0);
            let replies = w.control("echo_replies") as f64;
            let bound = 1000.0 * w.stats_secs() + 100.0;
            r.check(
                "echo limited",
                replies <= bound,
                format!(
                    "{replies:.0} echo replies in {:.1} s (icmp punt limit 1000/s + burst 100: {bound:.0})",
                    w.stats_secs()
                ),
            );
        }
        "ttl1" | "noroute" => {
            let sent = w.event("event.icmp4_sent") + w.event("event.icmp6_sent");
            let limited = w.event("event.icmp_rate_limited");
            let bound = ICMP_RATE * limit_secs + ICMP_BURST;
            r.check(
                "ICMP errors rate-limited",
                (sent as f64) <= bound && limited > 0,
                format!(
                    "{sent} ICMP errors sent in {limit_secs:.1} s (bound {bound:.0}), {limited} held back by the limit"
                ),
            );
            let reason = if name == "ttl1" {
                "ttl_expired"
            } else {
                "no_route"
            };
            let drops = r.extra["books"]["drops"][reason].as_u64().unwrap_or(0);
            r.check(
                "dropped by name",
                drops > 0,
                format!("{drops} counted as {reason}"),
            );
        }
        "malformed" => {
            let books = r.extra["books"].clone();
            let received = books["received"].as_u64().unwrap_or(0);
            let fwd = books["forwarded"].as_u64().unwrap_or(0);
            let legit = (w.legit_pps * w.sent.secs) as u64;
            let dropped = books["named_drops"].as_u64().unwrap_or(0);
            // Forwarded may only be the legitimate flow: the stats window is a little longer
            // than the flood's (settling), at the flow's rate.
            let slack = (lab::LEGIT_PPS as f64 * (w.counter_secs - w.sent.secs + 1.5)) as u64;
            r.check(
                "none forwarded",
                fwd <= legit + slack,
                format!("{fwd} forwarded in the window, the legitimate flow delivered {legit} (+{slack} for the settling time)"),
            );
            r.check(
                "all dropped by name",
                dropped > 0 && received > 0,
                format!(
                    "{dropped} named drops of {received} received; the books: {}",
                    books["drops"]
                ),
            );
            r.note(
                "kinds",
                json!(frames::malformed(
                    (lab.mac_a, lab.mac_gen),
                    lab::GEN4,
                    Ipv4Addr::new(198, 18, 2, 1),
                    Ipv6Addr::LOCALHOST,
                    Ipv6Addr::LOCALHOST
                )
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()),
            );
        }
        _ => {}
    }
    Ok(r)
}

/// A punt class: its name, its index in the control plane's counters, its default limit
/// (frames per second) and frames of it.
type PuntStep = (&'static str, usize, f64, Vec<Vec<u8>>);

/// The punt classes, their default limits (`vfsrd::config::PuntSection`) and a frame of each.
fn punt_classes(lab: &Lab, rng: &mut Rng) -> Vec<PuntStep> {
    let macs = (lab.mac_a, lab.mac_gen);
    let r6 = Ipv6Addr::new(0xfd00, 0x10, 0, 0, 0, 0, 0, 1);
    let mut arp = Vec::new();
    let mut nd = Vec::new();
    for k in 0..1024u32 {
        // Senders off the port's subnet: the router answers but learns nothing, so the
        // class's work is the same every time.
        let s = Ipv4Addr::from(0x0b00_0000 | k);
        arp.push(frames::arp_request(rng.mac(), s, lab::ROUTER_A4));
        let s6 = Ipv6Addr::new(0xfd00, 0x10, 0, 0, 0, 0, 1, k as u16);
        nd.push(frames::neighbor_solicit(rng.mac(), s6, r6));
    }
    let echo: Vec<Vec<u8>> = (0..256)
        .map(|s| frames::echo4(macs, lab::GEN4, lab::ROUTER_A4, s))
        .collect();
    // Segments of established sessions: the class's own bucket. Connection attempts have
    // a bucket of their own in the XDP program (`[punt] tcp_syn`), a step of their own.
    let tcp = |dport: u16, flags: u8| -> Vec<Vec<u8>> {
        (0..256)
            .map(|p| frames::tcp4(macs, lab::GEN4, lab::ROUTER_A4, (40_000 + p, dport), flags))
            .collect()
    };
    let ssh = tcp(22, frames::TCP_ACK);
    let bgp = tcp(179, frames::TCP_ACK);
    let syn = tcp(22, frames::TCP_SYN);
    let alert: Vec<Vec<u8>> = (0..256)
        .map(|k| frames::router_alert4(macs, lab::GEN4, Ipv4Addr::new(198, 18, 3, k as u8)))
        .collect();
    let mut classes = vec![
        ("arp", 0, 2000.0, arp),
        ("nd", 0, 2000.0, nd),
        ("icmp", 2, 1000.0, echo),
        ("local (tcp/22)", 3, 10_000.0, ssh),
        ("routing (bgp)", 1, 10_000.0, bgp),
        ("slow_path (router alert)", 4, 2000.0, alert),
    ];
    // Only the XDP program tells connection attempts apart.
    if lab.backend == "xdp" {
        classes.push(("tcp_syn (to port 22, local)", 3, 1000.0, syn));
    }
    classes
}

/// Notes what the port's XDP program dropped of a flood of punt class `class` (limit
/// `limit` per second) and, on AF_XDP and for a flood of ten times the limit or more (at full
/// rate, a hundred times), checks that it dropped more than the control plane took in.
fn check_policed(r: &mut CaseResult, lab: &Lab, w: &Window, class: &str, limit: f64) {
    let policed = lab::control_delta(&w.stats0, &w.stats1)["policed_xdp"][class]
        .as_u64()
        .unwrap_or(0);
    r.note(&format!("{class}_policed_xdp"), json!(policed));
    if lab.backend == "xdp" && w.sent.pps() > 10.0 * limit {
        let taken = w.control("frames_in");
        r.check(
            "policed before the kernel",
            policed > taken,
            format!(
                "{policed} of {} flooded frames dropped by the XDP program's {class} bucket, \
                 {taken} taken in by the control plane",
                w.sent.frames
            ),
        );
    }
}

fn punt_case(
    lab: &mut Lab,
    secs: f64,
    base: &Baseline,
    rng: &mut Rng,
) -> Result<CaseResult, Error> {
    let classes = punt_classes(lab, rng);
    let steps: Vec<(usize, f64)> = (0..classes.len())
        .flat_map(|c| [(c, 1.0), (c, 2.0)])
        .collect();
    let per = (secs / steps.len() as f64).max(1.0);
    let mut r = CaseResult::new("punt", "flood");
    let mut rows = Vec::new();
    let mut stats_before = lab.stats();
    // Wait for a fresh stats file so that each step's counters start at its own beginning.
    let fresh = |lab: &Lab, prev: &Value| -> Value {
        let u0 = prev["uptime_s"].as_f64().unwrap_or(0.0);
        let t = Instant::now();
        loop {
            let s = lab.stats();
            if s["uptime_s"].as_f64().unwrap_or(0.0) > u0 || t.elapsed() > Duration::from_secs(3) {
                return s;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let w = window(lab, steps.len() as f64 * (per + 1.2), |lab| {
        let mut total = lab::FloodSent::default();
        for &(c, times) in &steps {
            let Some((cname, idx, limit, frames)) = classes.get(c) else {
                continue;
            };
            let s0 = fresh(lab, &stats_before);
            let pps = (limit * times) as u64;
            let sent = lab::flood(&lab.l, lab.flood_core, Arc::new(frames.clone()), pps, per)?;
            std::thread::sleep(Duration::from_millis(1100));
            let s1 = fresh(lab, &s0);
            stats_before = s1.clone();
            let g = |v: &Value, k: &str| v["control"][k].as_u64().unwrap_or(0);
            let of_class = |v: &Value, key: &str| v["control"][key][*idx].as_u64().unwrap_or(0);
            let grew = |key: &str| of_class(&s1, key).saturating_sub(of_class(&s0, key));
            let wl = |v: &Value| v["punts_limited"].as_u64().unwrap_or(0);
            let limited = grew("rate_limited") + wl(&s1).saturating_sub(wl(&s0));
            // Dropped by the port's XDP program before the kernel (every class but
            // slow_path).
            let policed = grew("policed_xdp");
            let taken = g(&s1, "frames_in").saturating_sub(g(&s0, "frames_in"));
            let span = (s1["uptime_s"].as_f64().unwrap_or(0.0)
                - s0["uptime_s"].as_f64().unwrap_or(0.0))
            .max(0.0);
            rows.push(
                json!({"class": cname, "limit_pps": limit, "offered_pps": sent.pps(),
                             "times_limit": times, "sent": sent.frames,
                             "control_frames_in": taken, "rate_limited": limited,
                             "policed_xdp": policed, "seconds": span}),
            );
            total.frames += sent.frames;
            total.secs += sent.secs;
        }
        Ok(total)
    })?;
    w.fill(&mut r, base);
    // The checks: beyond the limit something is limited; what passes stays within it.
    let burst = |limit: f64| (limit / 10.0).max(16.0);
    for row in &rows {
        let cname = row["class"].as_str().unwrap_or("");
        let limit = row["limit_pps"].as_f64().unwrap_or(0.0);
        let times = row["times_limit"].as_f64().unwrap_or(0.0);
        let sent = row["sent"].as_u64().unwrap_or(0) as f64;
        let limited = row["rate_limited"].as_u64().unwrap_or(0) as f64;
        let policed = row["policed_xdp"].as_u64().unwrap_or(0) as f64;
        let span = row["seconds"].as_f64().unwrap_or(per);
        let passed = (sent - limited - policed).max(0.0);
        let bound = limit * per + burst(limit) + limit * 0.05 * span;
        if times > 1.0 {
            r.check(
                &format!("{cname} at 2x"),
                limited + policed > 0.0 && passed <= bound,
                format!("{sent:.0} sent, {policed:.0} policed in XDP, {limited:.0} rate-limited, {passed:.0} passed (limit {limit:.0}/s over {per:.1} s + burst: {bound:.0})"),
            );
        } else {
            r.note(
                &format!("{cname} at 1x"),
                json!({"sent": sent, "rate_limited": limited, "policed_xdp": policed}),
            );
        }
    }
    r.note("steps", json!(rows));
    Ok(r)
}

/// A fault's window: `action` does something to the router (it should take about `secs`)
/// while the legitimate flow, the TCP transactions and vfsrd's memory are measured as in
/// every case, and nothing floods; the figures every case shares go into `r`.
fn fault_window(
    lab: &Lab,
    r: &mut CaseResult,
    base: &Baseline,
    secs: f64,
    action: impl FnOnce(&Lab) -> Result<(), Error>,
) -> Result<Window, Error> {
    let w = window(lab, secs, |lab| {
        let t0 = Instant::now();
        action(lab)?;
        Ok(lab::FloodSent {
            secs: t0.elapsed().as_secs_f64(),
            ..lab::FloodSent::default()
        })
    })?;
    w.fill(r, base);
    Ok(w)
}

/// Checks `name`: the legitimate flow delivers at least [`LEGIT_MIN`] of its idle rate over
/// the next 2 s (`when` ends the check's detail: when that is).
fn check_rate_back(lab: &Lab, r: &mut CaseResult, base: &Baseline, name: &str, when: &str) {
    let ratio = lab.legit_rate_over(Duration::from_secs(2)) / base.legit_pps.max(1.0);
    r.check(
        name,
        ratio >= LEGIT_MIN,
        format!("{ratio:.2} of the idle rate{when}"),
    );
}

/// Checks that vfsrd still runs; a vfsrd that does not counts as crashed.
fn check_alive(lab: &mut Lab, r: &mut CaseResult) {
    let alive = lab.running();
    r.check("vfsrd alive", alive, "vfsrd still runs");
    r.crashed = !alive;
}

fn starve_case(lab: &mut Lab, secs: f64, base: &Baseline) -> Result<CaseResult, Error> {
    let mut r = CaseResult::new("starve", "fault");
    r.excused = Some("the worker's core is taken from it on purpose");
    let mut exit = None;
    fault_window(lab, &mut r, base, secs, |_| {
        // A busy loop at the worker's SCHED_FIFO priority on its core, bounded by timeout.
        let st = std::process::Command::new("timeout")
            .args([
                &format!("{secs:.1}"),
                "chrt",
                "-f",
                &lab::WORKER_PRIORITY.to_string(),
                "taskset",
                "-c",
                &crate::vethbench::ROUTER_CORE.to_string(),
                "sh",
                "-c",
                "while :; do :; done",
            ])
            .status()
            .map_err(Error::BusyProcess)?;
        exit = st.code();
        Ok(())
    })?;
    r.note("busy_process_exit", json!(exit));
    check_rate_back(
        lab,
        &mut r,
        base,
        "forwarding resumes",
        " in the 2 s after the busy process ended",
    );
    check_alive(lab, &mut r);
    Ok(r)
}

fn linkflap_case(lab: &mut Lab, secs: f64, base: &Baseline) -> Result<CaseResult, Error> {
    let mut r = CaseResult::new("linkflap", "fault");
    r.excused = Some("the egress port is down for a second of the window");
    let b = lab.l.b.clone();
    fault_window(lab, &mut r, base, secs, |lab| {
        std::thread::sleep(Duration::from_secs_f64(secs / 3.0));
        lab.l.lab.ip("rtr", &["link", "set", "dev", &b, "down"])?;
        std::thread::sleep(Duration::from_secs(1));
        lab.l.lab.ip("rtr", &["link", "set", "dev", &b, "up"])?;
        std::thread::sleep(Duration::from_secs_f64((secs * 2.0 / 3.0 - 1.0).max(0.5)));
        Ok(())
    })?;
    check_rate_back(
        lab,
        &mut r,
        base,
        "traffic resumes",
        " in the 2 s after the window",
    );
    let route = lab
        .api(&Request::RouteGet {
            addr: "198.18.1.1".into(),
        })
        .map(|v| v.to_string())
        .unwrap_or_else(|e| format!("error: {e}"));
    r.check(
        "route back",
        route.contains("10.20.0.2"),
        format!("route get 198.18.1.1: {route}"),
    );
    check_alive(lab, &mut r);
    Ok(r)
}

fn tapgone_case(lab: &mut Lab, secs: f64, base: &Baseline) -> Result<CaseResult, Error> {
    let mut r = CaseResult::new("tapgone", "fault");
    r.excused = Some("the TCP transactions go through the deleted TAP");
    let tap = format!("v{}", lab.l.a);
    let w = fault_window(lab, &mut r, base, secs, |lab| {
        std::thread::sleep(Duration::from_secs_f64(secs / 3.0));
        lab.l.lab.ip("rtr", &["link", "del", "dev", &tap])?;
        std::thread::sleep(Duration::from_secs_f64(secs * 2.0 / 3.0));
        Ok(())
    })?;
    check_rate_back(
        lab,
        &mut r,
        base,
        "forwarding continues",
        " after the TAP went away",
    );
    let lost = w.control("taps_lost");
    let logged = lab
        .vfsrd
        .as_ref()
        .and_then(|d| d.logged("TAP went away", Duration::from_secs(2)));
    r.check(
        "reported",
        lost == 1 && logged.is_some(),
        format!(
            "taps_lost {lost}; log: {}",
            logged.unwrap_or_else(|| "nothing".into())
        ),
    );
    check_alive(lab, &mut r);
    // The next case needs the TAP: a new vfsrd makes it again.
    lab.start_vfsrd()?;
    std::thread::sleep(Duration::from_secs(1));
    Ok(r)
}

/// vfsrd started with its control socket (then its stats file) in a read-only directory:
/// it must stop with an error that names the path, or run on and say so, never crash.
fn unwritable_case(lab: &mut Lab) -> Result<CaseResult, Error> {
    let mut r = CaseResult::new("unwritable", "fault");
    lab.vfsrd = None;
    let dir = std::env::temp_dir().join(format!("vfsr-stress-ro-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|err| Error::File {
        path: dir.clone(),
        err,
    })?;
    let mut rows = Vec::new();
    for what in ["socket", "stats"] {
        let cfg_path =
            std::env::temp_dir().join(format!("vfsr-stress-{}-{what}.toml", std::process::id()));
        let sock = if what == "socket" {
            dir.join("api.sock")
        } else {
            std::env::temp_dir().join(format!("vfsr-stress-{}.sock", std::process::id()))
        };
        let stats = if what == "stats" {
            dir.join("stats.json")
        } else {
            std::env::temp_dir().join(format!("vfsr-stress-{}-stats.json", std::process::id()))
        };
        std::fs::write(&cfg_path, lab.config(&sock.display().to_string())).map_err(|err| {
            Error::File {
                path: cfg_path.clone(),
                err,
            }
        })?;
        // The read-only mount lives in `ip netns exec`'s own mount namespace and goes
        // with it.
        let script = format!(
            "mount -t tmpfs -o ro,size=64k tmpfs {d} && exec timeout -s KILL 20 {exe} --config {c} --stats {s}",
            d = dir.display(),
            exe = lab.exe.display(),
            c = cfg_path.display(),
            s = stats.display()
        );
        let t0 = Instant::now();
        let mut child = lab
            .l
            .lab
            .command("rtr", "sh")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(Error::StartVfsrd)?;
        // A vfsrd that starts anyway runs until stopped: give it 4 s, then SIGTERM.
        let mut ran = false;
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            if t0.elapsed() > Duration::from_secs(4) {
                ran = true;
                let _ = std::process::Command::new("pkill")
                    .args(["-TERM", "-P", &child.id().to_string()])
                    .status();
                // SAFETY: signals our own child.
                unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().map_err(Error::WaitVfsrd)?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        let _ = std::fs::remove_file(&cfg_path);
        let _ = std::fs::remove_file(&sock);
        let _ = std::fs::remove_file(&stats);
        use std::os::unix::process::ExitStatusExt;
        let signal = out.status.signal();
        let panicked = text.contains("panicked");
        let named = text.contains(&dir.display().to_string());
        let err_line = text
            .lines()
            .find(|l| l.contains(&dir.display().to_string()))
            .unwrap_or("")
            .trim()
            .to_string();
        let ok = signal.is_none() && !panicked && named && (ran || out.status.code() != Some(0));
        r.check(
            &format!("{what} dir read-only"),
            ok,
            format!(
                "{} (exit {:?}, signal {signal:?}); message: {err_line:?}",
                if ran {
                    "ran on, stopped with SIGTERM"
                } else {
                    "stopped by itself"
                },
                out.status.code()
            ),
        );
        rows.push(
            json!({"what": what, "ran_on": ran, "exit": out.status.code(), "signal": signal,
                         "panicked": panicked, "message": err_line}),
        );
    }
    let _ = std::fs::remove_dir(&dir);
    r.note("starts", json!(rows));
    lab.start_vfsrd()?;
    std::thread::sleep(Duration::from_secs(1));
    Ok(r)
}

fn port_state(lab: &Lab) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for p in [lab.l.a.clone(), lab.l.b.clone()] {
        for (k, v) in lab::port_sysctls(&lab.l, &p) {
            m.insert(k, v);
        }
        m.insert(
            format!("{p} xdp"),
            lab::xdp_attached(&lab.l, &p).to_string(),
        );
        let taps = lab
            .l
            .lab
            .ip("rtr", &["-o", "link", "show", "dev", &format!("v{p}")]);
        m.insert(format!("v{p} exists"), taps.is_ok().to_string());
    }
    m
}

fn sigkill_case(lab: &mut Lab, secs: f64, base: &Baseline) -> Result<CaseResult, Error> {
    let mut r = CaseResult::new("sigkill", "fault");
    r.excused = Some("vfsrd is killed in the window");
    // The ports as they were before any vfsrd: stop the running one cleanly first.
    lab.vfsrd = None;
    std::thread::sleep(Duration::from_millis(300));
    let pristine = port_state(lab);
    lab.start_vfsrd()?;
    std::thread::sleep(Duration::from_secs(1));
    fault_window(lab, &mut r, base, secs, |_| {
        std::thread::sleep(Duration::from_secs_f64(secs / 2.0));
        Ok(())
    })?;
    r.imbalance = None;
    let killed = lab
        .vfsrd
        .as_mut()
        .and_then(|d| d.kill9())
        .map(|s| format!("{s}"));
    std::thread::sleep(Duration::from_millis(300));
    let after_kill = port_state(lab);
    let differs = |m: &BTreeMap<String, String>| -> Vec<String> {
        pristine
            .iter()
            .filter(|(k, v)| m.get(*k) != Some(*v))
            .map(|(k, v)| format!("{k}: {} (was {v})", m.get(k).map_or("?", |s| s.as_str())))
            .collect()
    };
    let left = differs(&after_kill);
    r.note("killed", json!(killed));
    r.note("left_after_kill", json!(left));
    // The next start must take over what the killed one left, and a clean stop must leave
    // the ports as they were before any vfsrd.
    lab.vfsrd = None;
    let restart = lab.start_vfsrd();
    r.check(
        "next start",
        restart.is_ok(),
        restart
            .err()
            .map_or_else(|| "vfsrd started again".to_string(), |e| e.to_string()),
    );
    if lab.running() {
        check_rate_back(lab, &mut r, base, "forwarding after restart", "");
    }
    lab.vfsrd = None;
    std::thread::sleep(Duration::from_millis(300));
    let after_stop = port_state(lab);
    let wrong = differs(&after_stop);
    r.check(
        "ports restored",
        wrong.is_empty(),
        if wrong.is_empty() {
            format!(
                "after kill: {}; after the next start and stop: as before",
                if left.is_empty() {
                    "nothing left".to_string()
                } else {
                    left.join(", ")
                }
            )
        } else {
            format!("after the next start and stop: {}", wrong.join(", "))
        },
    );
    r.note("ports_before", json!(pristine));
    r.note("ports_after_restart_and_stop", json!(after_stop));
    // Leave a router running for whatever comes next.
    lab.start_vfsrd()?;
    Ok(r)
}

fn fmt_ratio(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.2}"))
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

fn print_case(r: &CaseResult) {
    println!(
        "  legit {} ({} kpps, {} of what was offered), cp p50/p99 {} / {} µs ({} / {}x), RSS {} → {} (peak {}) MiB, books {}",
        fmt_ratio(r.legit_ratio),
        r.legit_pps.map_or("-".into(), |p| format!("{:.1}", p / 1e3)),
        fmt_ratio(r.legit_share),
        r.rr.pct(0.5).map_or("-".into(), |v| format!("{v:.0}")),
        r.rr.pct(0.99).map_or("-".into(), |v| format!("{v:.0}")),
        fmt_ratio(r.rr_p50_ratio),
        fmt_ratio(r.rr_p99_ratio),
        mib(r.rss.0),
        mib(r.rss.1),
        mib(r.rss.2),
        r.imbalance.map_or("-".into(), |i| if i == 0 { "balanced".into() } else { format!("off by {i}") })
    );
    if let Some(s) = r.extra["control_cpu"]["share"].as_f64() {
        println!("  control plane thread: {:.1} % of its core", s * 100.0);
    }
    for c in &r.checks {
        println!(
            "  [{}] {}: {}",
            if c.ok { "ok" } else { "FAIL" },
            c.name,
            c.detail
        );
    }
    if let Some(e) = &r.error {
        println!("  error: {e}");
    }
}

/// The readable table.
fn render(results: &[CaseResult], base: &Baseline, cpu: &str, a: &StressArgs) -> String {
    let mut t = format!(
        "vfsr stress — {cpu}; {} backend; {:.0} s per case; idle: legit {:.1} kpps, cp p50 {:.0} µs, p99 {:.0} µs\n",
        a.backend,
        a.seconds,
        base.legit_pps / 1e3,
        base.rr_p50,
        base.rr_p99
    );
    t.push_str("| case | legit rate ratio | cp latency p50 / p99 ratio | RSS before / after / peak MiB | drops accounted | verdict |\n");
    t.push_str("| --- | --- | --- | --- | --- | --- |\n");
    for r in results {
        let fails = r.failures();
        let verdict = if fails.is_empty() {
            let mut v = "pass".to_string();
            if r.saturated && r.excused.is_none() {
                v.push_str(" (port saturated: legit target not applied)");
            } else if r.generator_short() && r.excused.is_none() {
                v.push_str(&format!(
                    " (the generator offered less; vfsrd delivered {} of it)",
                    fmt_ratio(r.legit_share)
                ));
            }
            v
        } else {
            format!("FAIL: {}", fails.join("; "))
        };
        t.push_str(&format!(
            "| {} | {}{} | {} / {} | {} / {} / {} | {} | {} |\n",
            r.name,
            fmt_ratio(r.legit_ratio),
            if r.saturated { " (saturated)" } else { "" },
            fmt_ratio(r.rr_p50_ratio),
            fmt_ratio(r.rr_p99_ratio),
            mib(r.rss.0),
            mib(r.rss.1),
            mib(r.rss.2),
            match r.imbalance {
                Some(0) => "yes".to_string(),
                Some(i) => format!("no (off by {i})"),
                None => "-".into(),
            },
            verdict
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_picks_known_cases_in_run_order() {
        let got = selected(&["sigkill".into(), "arp".into()]).expect("known");
        assert_eq!(got, vec!["arp", "sigkill"]);
        assert!(selected(&["nope".into()]).is_err());
        assert_eq!(selected(&[]).expect("all").len(), CASES.len());
    }

    #[test]
    fn a_case_fails_on_each_missed_target() {
        let mut r = CaseResult::new("x", "flood");
        r.legit_ratio = Some(0.95);
        r.rr_p99_ratio = Some(1.2);
        r.imbalance = Some(0);
        r.rss = (1000, 2000, 3000);
        assert!(r.failures().is_empty());
        r.legit_ratio = Some(0.5);
        assert_eq!(r.failures().len(), 1);
        // Short because the generator offered less, all of it delivered: not vfsrd's loss.
        r.legit_share = Some(0.99);
        assert!(r.failures().is_empty());
        r.legit_share = Some(0.6);
        assert_eq!(r.failures(), ["legit 0.50 < 0.90"]);
        r.saturated = true;
        assert!(r.failures().is_empty());
        r.imbalance = Some(3);
        r.rss = (1000, 1000 + RSS_GROWTH_KIB + 1, 0);
        r.check("own", false, "broken");
        assert_eq!(r.failures().len(), 3);
        r.crashed = true;
        assert!(r.failures().iter().any(|f| f.contains("crashed")));
    }
}
