//! `vfsr fwd bench --veth`: vfsrd against the Linux kernel's forwarding and an in-kernel XDP
//! forwarder, in one topology and one run.
//!
//! ```text
//!   ns gen: gen0 10.10.0.2 ──veth── A [ns rtr: the router] B ──veth── sink0 10.20.0.2 :ns sink
//!   generator: XDP live frames on core 0        router work on core 1     sink: XDP counts
//! ```
//!
//! - **Generator**: an XDP program run by `BPF_PROG_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES`
//!   (`bpf/bench.c`, `gen`): each run writes a random destination from the table into a
//!   64-byte UDP frame and transmits it out of `gen0`, from core 0, flat out or paced.
//! - **Routers**, each with the same routes (the table, every route via the sink):
//!   `vfsr` (vfsrd, control plane on core 0, one worker on core 1), `linux` (the kernel's
//!   forwarding, routes installed with `ip -batch`, static neighbor, an `XDP_PASS` program on
//!   A so the generator's frames are accepted) and `linux-xdp` (`fib_fwd`: `bpf_fib_lookup`
//!   against the kernel's routes, redirect through a devmap).
//! - **Where the work runs**: a veth's receive work runs in its NAPI context; A's NAPI is made
//!   threaded and its thread pinned to core 1 with `SCHED_FIFO` priority `--napi-priority`
//!   (default 5, the same for every router: ahead of ordinary tasks, which could otherwise
//!   hold core 1 longer than the veth's 256-frame ring lasts, and behind vfsrd's worker at
//!   10, which must stay ahead of it), so all of a router's packet work (the XDP program, the kernel stack, vfsrd's
//!   worker) is on core 1; the sink's NAPI thread is pinned to core 0 with the generator,
//!   with priority over it. A router's CPU is core 1's busy time
//!   (`/proc/stat`), the same measure for all three.
//! - **Counted**: offered = generator runs; forwarded = frames the sink's XDP program saw;
//!   drops: vfsrd's counters by reason and its rings, the kernel's interface counters.
//! - **Latency**: `ping` from the generator's namespace to the sink through the router, and a
//!   TCP request/response (1 byte each way, one connection) to the router's own address
//!   (for vfsr through its control plane and TAP), idle and under the flood.
//!
//! The parts, one file each:
//!
//! ```text
//!   mod.rs        options, the run: one pass per router, in order
//!   topology.rs   the three namespaces, their veths, XDP attachments, NAPI threads (Lab3)
//!   generator.rs  the XDP generator thread, its frame template and destinations
//!   daemon.rs     vfsrd as the router under test: config, start, stats, stop
//!   linux.rs      the kernel as the router under test: routes, neighbor, drop counters
//!   latency.rs    ping through the router, TCP request/response to it
//!   measure.rs    a flood window (rates, core busy time), the sustained run
//!   report.rs     the table, ratios, bottlenecks and the JSON document
//!   error.rs      what can go wrong, as values with their messages
//! ```
//!
//! `cp flood`, `soak` and `stress` build on the same topology and generator (the items
//! re-exported here).

mod daemon;
mod error;
mod generator;
mod latency;
mod linux;
mod measure;
mod report;
mod topology;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use vfsr_io::bpf::{self, BpfObject};
use vfsrd::netlab;

pub(crate) use daemon::{policed_xdp_delta, rate_limited_delta, vfsrd_exe};
pub(crate) use error::Error;
pub(crate) use generator::{destinations, Generator, Scheduling};
pub(crate) use latency::{echo_server, percentile, rr_client, RrOutcome, RrPace};
pub(crate) use measure::core_jiffies;
pub(crate) use topology::{build_lab, if_stat, ifindex_in, mac_in, threaded_napi, Lab3};

use daemon::{start_vfsrd, vfsrd_cpu, vfsrd_stats, TableSpec};
use latency::{latency_probe, ping_avg_us};
use linux::{install_linux_routes, linux_drops};
use measure::{measure, run_sustain};
use report::{report, Outcome};

/// The core the generator (and the sink's receive thread, and vfsrd's control plane) runs on.
pub(crate) const GEN_CORE: usize = 0;
/// The core all of a router's packet work runs on.
pub(crate) const ROUTER_CORE: usize = 1;
/// The sink's address, every route's next hop.
pub(crate) const SINK: &str = "10.20.0.2";
/// The router's address on the generator's side.
pub(crate) const ROUTER_A: &str = "10.10.0.1";

/// What `vfsr fwd bench --veth` is asked to do (its options among `fwd bench`'s).
pub(crate) struct Options {
    /// Route table (`None`: the synthetic one drawn from `seed`).
    pub(crate) table: Option<PathBuf>,
    /// Seed of the synthetic table and of the destinations.
    pub(crate) seed: u64,
    /// Seconds of flood per router.
    pub(crate) seconds: f64,
    /// Routers to measure, in order: vfsr, vfsr-fast, linux, linux-xdp.
    pub(crate) routers: Vec<String>,
    /// Random destinations drawn from the table (a power of two).
    pub(crate) destinations: usize,
    /// Offered load in Mpps (0: as fast as the generator goes).
    pub(crate) rate: f64,
    /// After vfsr's maximum, offer half of it for this many seconds and count losses.
    pub(crate) sustain: Option<u64>,
    /// `SCHED_FIFO` priority of the router's receive (NAPI) thread.
    pub(crate) napi_priority: u8,
    /// Also write the results as JSON to this file.
    pub(crate) json: Option<PathBuf>,
}

/// On SIGINT or SIGTERM, deletes this run's namespaces (their veths, routes and XDP
/// programs go with them) and exits; vfsrd, started with a parent-death signal, stops by
/// itself. A handler (reset to the default in every program the benchmark starts) writes
/// the signal to a pipe that a watcher thread reads.
fn clean_up_on_signal() {
    crate::interrupt::on_interrupt("removing the benchmark's namespaces", || {
        crate::interrupt::delete_namespaces(&format!("fb{}-", std::process::id()));
    });
}

/// `vfsr fwd bench --veth`.
pub(crate) fn run(a: &Options) -> Result<(), Error> {
    if let Err(e) = netlab::available() {
        return Err(Error::NoNamespaces(e));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        return Err(Error::TooFewCores);
    }
    let routers: Vec<String> = a.routers.clone();
    for r in &routers {
        if !matches!(r.as_str(), "vfsr" | "vfsr-fast" | "linux" | "linux-xdp") {
            return Err(Error::UnknownRouter(r.clone()));
        }
    }
    if !a.destinations.is_power_of_two() || a.destinations > 1 << 20 {
        return Err(Error::Destinations(a.destinations));
    }
    let (spec, routes) = match &a.table {
        Some(p) => (
            TableSpec::File(p.clone()),
            crate::tables::load(p, false).map_err(Error::Table)?.v4,
        ),
        None => (
            TableSpec::Synthetic(a.seed),
            crate::tables::synthetic(a.seed).v4,
        ),
    };
    let dests = destinations(&routes, a.destinations, a.seed);
    clean_up_on_signal();
    if dests.len() < a.destinations {
        return Err(Error::TooFewRoutes);
    }
    println!(
        "veth benchmark: {} IPv4 routes, {} destinations, 64-byte UDP, {:.0} s per router",
        routes.len(),
        dests.len(),
        a.seconds
    );
    let mut l = build_lab()?;
    let gen = Generator::launch(
        &l,
        &dests,
        // Far beyond any run of the routers' passes; only a run that lost track of the
        // generator reaches it.
        Duration::from_secs(4 * 3600),
        Scheduling::Ordinary,
    )?;
    let rate = (a.rate * 1e6) as u64;

    let mut results: Vec<Outcome> = Vec::new();
    let mut idle_cpu = f64::NAN;
    let mut sustain: Option<Value> = None;
    for r in &routers {
        println!("\n== {r}");
        let t0 = Instant::now();
        let mut o = Outcome {
            router: r.clone(),
            ..Outcome::default()
        };
        let mut daemon = None;
        match r.as_str() {
            "vfsr" | "vfsr-fast" => {
                let d = start_vfsrd(&l, &spec, r == "vfsr-fast")?;
                threaded_napi(&l.lab, "rtr", &l.a, ROUTER_CORE, i32::from(a.napi_priority));
                daemon = Some(d);
            }
            _ => {
                if results.iter().all(|x| x.router.starts_with("vfsr")) {
                    let s = install_linux_routes(&l, &routes)?;
                    println!(
                        "  {} routes installed with ip -batch in {s:.1} s",
                        routes.len()
                    );
                }
                let obj = BpfObject::load("bench", bpf::objects::BENCH)?;
                let prog = if r == "linux" { "pass" } else { "fib_fwd" };
                if r == "linux-xdp" {
                    let pm = obj.map_fd("ports")?;
                    let bi = ifindex_in(&l.lab, "rtr", &l.b)?;
                    // A devmap names its devices by index in the updater's namespace.
                    l.lab.in_ns("rtr", move || {
                        bpf::map_update(pm, &bi.to_ne_bytes(), &bi.to_ne_bytes())
                    })??;
                }
                let fd = obj.prog_fd(prog)?;
                let ai = l.a.clone();
                l.attach("rtr", &ai, fd)?;
                threaded_napi(&l.lab, "rtr", &l.a, ROUTER_CORE, i32::from(a.napi_priority));
                // The object stays loaded while attached (the attachment holds the program).
                std::mem::forget(obj);
            }
        }
        o.setup_s = t0.elapsed().as_secs_f64();
        // Warm up: neighbors resolve, caches fill.
        let _ = ping_avg_us(&l.lab, 5);
        if let Some(d) = &daemon {
            // Idle CPU: the daemon with no traffic.
            let c0 = vfsrd_cpu(d);
            std::thread::sleep(Duration::from_secs(3));
            idle_cpu = (vfsrd_cpu(d) - c0) / 3.0 * 100.0;
            println!("  idle: vfsrd used {idle_cpu:.2} % of a core");
        }
        let idle = latency_probe(&l);
        o.ping_idle_us = idle.0;
        o.tcp_rr_idle_us = idle.2;
        let (off, fwd, busy, flood) = measure(&l, &gen, a.seconds.max(3.0), rate, &mut || {
            latency_probe(&l)
        });
        o.offered_pps = off;
        o.forwarded_pps = fwd;
        o.cpu_cores_used = busy;
        o.ping_flood_us = flood.0;
        o.ping_flood_loss = flood.1;
        o.tcp_rr_flood_us = flood.2;
        o.tcp_rr_flood_timeouts = flood.3;
        std::thread::sleep(Duration::from_millis(300));
        if let Some(d) = &daemon {
            std::thread::sleep(Duration::from_millis(1100));
            let s = vfsrd_stats(d);
            o.drops =
                json!({"pipeline": s["drops"], "io": s["io"], "punts_limited": s["punts_limited"]});
            o.fast_path = s["fast_path"].clone();
            if s["fast_path"]["enabled"] == true {
                println!(
                    "  fast path: {} frames forwarded in XDP, {} by the worker, {} entries installed",
                    s["fast_path"]["forwarded"], s["forwarded"], s["fast_path"]["installed"]
                );
            }
            if let Some(secs) = a.sustain {
                sustain = Some(run_sustain(&l, &gen, d, fwd / 2.0, secs));
            }
        } else {
            o.drops = linux_drops(&l);
        }
        println!(
            "  offered {:.3} Mpps, forwarded {:.3} Mpps, core {} busy {:.0} %, {:.3} Mpps per core",
            off / 1e6,
            fwd / 1e6,
            ROUTER_CORE,
            busy * 100.0,
            o.pps_per_core() / 1e6
        );
        println!(
            "  ping {:.0} us idle, {:.0} us under flood ({:.0} % lost); tcp_rr to the router {:.0} us idle, {:.0} us under flood ({} of 200 unanswered)",
            o.ping_idle_us, o.ping_flood_us, o.ping_flood_loss, o.tcp_rr_idle_us, o.tcp_rr_flood_us,
            o.tcp_rr_flood_timeouts
        );
        println!("  drops: {}", o.drops);
        drop(daemon);
        l.detach_all("rtr");
        results.push(o);
    }
    gen.finish()?;
    report(&results, idle_cpu, sustain, a)
}
