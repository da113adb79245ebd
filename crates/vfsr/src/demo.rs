//! `vfsr demo`: the README's first command. Where it can (root, network namespaces, the test
//! tools) it runs the live router of [`crate::livedemo`]. Otherwise, or with `--offline`, it
//! shows the parts in memory: it builds the synthetic full table, loads it into every
//! engine, checks that they agree, and shows lookups and their speed on one core; then loads the
//! table into the RIB and the live Poptrie FIBs, streams route changes into them while a reader
//! thread looks up, and shows answers before and after; last, the forwarding pipeline: a few
//! frames and their fate, and one worker's rate.

use crate::{engines, tables};
use clap::Args;
use std::time::Instant;
use vfsr_bench::lpm::{budget, time_bulk, Params};
use vfsr_lpm::radix::Radix;
use vfsr_lpm::{Key, LpmBuild, Route, NO_ROUTE};
use vfsr_table::traffic;

#[derive(Args)]
pub struct DemoArgs {
    /// Seed of the synthetic table and of the traffic.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Addresses per speed measurement.
    #[arg(long, default_value_t = 1 << 20)]
    pub lookups: usize,
    /// Run the in-memory demo (engines, live FIB, pipeline) instead of the live router.
    #[arg(long)]
    pub offline: bool,
    /// The live router learns only the first N IPv4 prefixes of the table (and an eighth as
    /// many IPv6 ones): a shorter demo.
    #[arg(long)]
    pub prefixes: Option<usize>,
}

/// What can stop the demo.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The live router's demo failed.
    #[error(transparent)]
    Live(#[from] crate::livedemo::Error),
    /// Two engines answered a lookup differently.
    #[error("{engine} disagrees with {reference} on {wrong} lookups")]
    Disagree {
        /// The engine that disagreed.
        engine: &'static str,
        /// The first engine, whose answers are the reference.
        reference: &'static str,
        /// How many lookups it answered otherwise.
        wrong: usize,
    },
    /// The radix tree of the sample lookups refused the table.
    #[error(transparent)]
    Build(#[from] vfsr_lpm::BuildError),
    /// The forwarding pipeline's router could not be built.
    #[error(transparent)]
    Router(crate::fwdbench::Error),
    /// A live FIB could not be made, fed or published.
    #[error(transparent)]
    Fib(#[from] vfsr_fib::FibError),
    /// The RIB and FIBs refused the table.
    #[error(transparent)]
    Load(#[from] vfsr_rib::LoadError),
    /// The RIB refused a route change.
    #[error(transparent)]
    Apply(#[from] vfsr_rib::ApplyError),
    /// The RIB refused the routes announced back.
    #[error(transparent)]
    Rib(#[from] vfsr_rib::RibError),
    /// The reader thread panicked.
    #[error("reader thread failed")]
    ReaderPanicked,
}

struct Built<K: Key> {
    name: &'static str,
    engine: engines::Engine<K>,
    build_s: f64,
}

fn build_all<K: Key>(
    routes: &[Route<K>],
    build: impl Fn(&str, &[Route<K>]) -> Result<engines::Engine<K>, engines::Error>,
) -> Vec<Built<K>> {
    let mut v = Vec::new();
    for &name in engines::NAMES {
        let t = Instant::now();
        if let Ok(engine) = build(name, routes) {
            v.push(Built {
                name,
                engine,
                build_s: t.elapsed().as_secs_f64(),
            });
        }
    }
    v
}

fn report<K: Key>(
    family: &str,
    routes: usize,
    built: &[Built<K>],
    addrs: &[K],
    p: &Params,
) -> Result<(), Error> {
    let mut first: Option<Vec<u32>> = None;
    for b in built {
        let n = budget(b.engine.as_ref(), addrs, p);
        let mut out = vec![0; n];
        let m = time_bulk(b.engine.as_ref(), &addrs[..n], &mut out, p);
        let agree = match &first {
            None => {
                first = Some(out.clone());
                "reference".to_string()
            }
            Some(r) => {
                let wrong = r.iter().zip(&out).filter(|(a, b)| a != b).count();
                if wrong > 0 {
                    return Err(Error::Disagree {
                        engine: b.name,
                        reference: built[0].name,
                        wrong,
                    });
                }
                "agrees".to_string()
            }
        };
        println!(
            "  {family} {:<10} build {:>6.3} s  {:>8.2} MiB  {:>6.1} B/route  {:>7.1} Mlps  ({agree})",
            b.name,
            b.build_s,
            b.engine.memory_bytes() as f64 / 1048576.0,
            b.engine.memory_bytes() as f64 / routes.max(1) as f64,
            m.median,
        );
    }
    Ok(())
}

/// The live demo where it can run, else the in-memory one.
pub(crate) fn run(a: &DemoArgs) -> Result<(), Error> {
    if !a.offline {
        match crate::livedemo::unavailable() {
            None => return Ok(crate::livedemo::run(a.seed, a.prefixes)?),
            Some(why) => println!(
                "vfsr demo: the live router needs root, network namespaces and ping, traceroute \
                 and iperf3 ({why}); showing the in-memory demo instead\n"
            ),
        }
    }
    offline(a)
}

/// The in-memory demo.
fn offline(a: &DemoArgs) -> Result<(), Error> {
    let core = vfsr_cpu::default_bench_core();
    if let Err(e) = vfsr_cpu::pin(core) {
        eprintln!("vfsr: not pinned: {e}");
    }
    let t = Instant::now();
    let table = tables::synthetic(a.seed);
    println!(
        "vfsr demo: {} with {} IPv4 and {} IPv6 routes, made in {:.2} s",
        table.source,
        table.v4.len(),
        table.v6.len(),
        t.elapsed().as_secs_f64()
    );
    let n = a.lookups.max(1024);
    let p = Params {
        runs: 3,
        batch: 256,
        max_pass_s: 0.25,
    };
    println!(
        "\nEvery engine, bulk lookups on core {core} (median of {} passes over up to {n} addresses):",
        p.runs
    );
    let b4 = build_all(&table.v4, engines::build_v4);
    report(
        "v4 matched",
        table.v4.len(),
        &b4,
        &traffic::matched(&table.v4, a.seed, n),
        &p,
    )?;
    report(
        "v4 uniform",
        table.v4.len(),
        &b4,
        &traffic::uniform4(a.seed, n),
        &p,
    )?;
    let b6 = build_all(&table.v6, engines::build_v6);
    report(
        "v6 matched",
        table.v6.len(),
        &b6,
        &traffic::matched(&table.v6, a.seed, n),
        &p,
    )?;

    println!("\nSample lookups (matched prefix from the radix tree, next hop from each engine):");
    let x4 = Radix::build(&table.v4, &())?;
    let x6 = Radix::build(&table.v6, &())?;
    let names: Vec<&str> = b4.iter().map(|b| b.name).collect();
    println!("  {:<40} {:<24} {}", "address", "prefix", names.join(" "));
    for a4 in traffic::matched(&table.v4, a.seed ^ 0x5eed, 4)
        .into_iter()
        .chain(traffic::uniform4(a.seed ^ 7, 2))
    {
        let p = x4
            .lookup_route(a4)
            .map_or("-".to_string(), |(p, _)| p.to_string());
        let nh: Vec<String> = b4.iter().map(|b| show(b.engine.lookup(a4))).collect();
        println!(
            "  {:<40} {:<24} {}",
            std::net::Ipv4Addr::from(a4).to_string(),
            p,
            nh.join(" ")
        );
    }
    for a6 in traffic::matched(&table.v6, a.seed ^ 0x5eed, 3) {
        let p = x6
            .lookup_route(a6)
            .map_or("-".to_string(), |(p, _)| p.to_string());
        let nh: Vec<String> = b6.iter().map(|b| show(b.engine.lookup(a6))).collect();
        println!(
            "  {:<40} {:<24} {}",
            std::net::Ipv6Addr::from(a6).to_string(),
            p,
            nh.join(" ")
        );
    }
    live(&table, a.seed)?;
    forwarding(&table, a.seed)?;
    println!(
        "\nFull benchmarks with peers and JSON: vfsr lpm bench --json lpm.json, vfsr fib bench, \
         vfsr fwd bench"
    );
    Ok(())
}

/// The forwarding pipeline on the table: a few frames and what became of each, then the
/// rate of one worker on 1000 flows.
fn forwarding(table: &tables::Loaded, seed: u64) -> Result<(), Error> {
    use crate::fwdbench::{build_router, frame_v4, frame_v6, receive, source_v4, HOST_MAC};
    use vfsr_fwd::{Batch, Outcome, Verdict, WorkerConfig};
    use vfsr_lpm::Lpm;

    let mut router = build_router(table).map_err(Error::Router)?;
    // The senders of the sample frames are known neighbors of the ingress port.
    for i in 1..=4 {
        router.resolve4(1, source_v4(i), HOST_MAC);
    }
    println!("\nForwarding pipeline (split L2/L3, Poptrie FIB, flow table), one worker:");
    let d4 = traffic::matched(&table.v4, seed, 2);
    let d6 = traffic::matched(&table.v6, seed, 1);
    let reader = router.route_table().v4().reader();
    let unrouted = traffic::uniform4(seed, 4096)
        .into_iter()
        .find(|&a| reader.load().engine.lookup(a) == NO_ROUTE && a >> 28 < 0xe && a >> 24 != 0);
    let mut samples = vec![
        ("IPv4 to a table prefix", frame_v4(d4[0], 1)),
        ("IPv6 to a table prefix", frame_v6(d6[0], 2)),
    ];
    let mut expired = frame_v4(d4[1], 3);
    expired.bytes[22] = 1;
    expired.bytes[24..26].copy_from_slice(&[0, 0]);
    let c = vfsr_wire::checksum::checksum(&expired.bytes[14..34]);
    expired.bytes[24..26].copy_from_slice(&c.to_be_bytes());
    samples.push(("IPv4 with TTL 1", expired));
    if let Some(u) = unrouted {
        samples.push(("IPv4 without a route", frame_v4(u, 4)));
    }
    let mut w = router.worker(WorkerConfig::default());
    let mut b = Batch::from_frames(samples.iter().map(|(_, t)| &t.bytes[..t.len]), 1);
    w.process(&mut b, 1_000_000_000);
    for ((what, _), (p, v)) in samples.iter().zip(b.results()) {
        let fate = match v {
            Verdict::Forward { oif } => {
                let f = p.frame();
                format!(
                    "forwarded on port {oif} to {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                    f[0], f[1], f[2], f[3], f[4], f[5]
                )
            }
            Verdict::Drop(r) => format!("dropped: {}", r.text()),
            other => format!("{other:?}"),
        };
        println!("  {what:<24} {fate}");
    }
    for g in &b.generated {
        let f = g.frame();
        let (ty, code) = (
            f.get(34).copied().unwrap_or(0),
            f.get(35).copied().unwrap_or(0),
        );
        println!(
            "  generated: ICMP type {ty} code {code}, {} bytes, back out port {}",
            g.len(),
            g.oif
        );
    }
    for (fam, templates) in [
        (
            "v4",
            traffic::matched(&table.v4, seed, 1000)
                .into_iter()
                .enumerate()
                .map(|(i, d)| frame_v4(d, i))
                .collect::<Vec<_>>(),
        ),
        (
            "v6",
            traffic::matched(&table.v6, seed, 1000)
                .into_iter()
                .enumerate()
                .map(|(i, d)| frame_v6(d, i))
                .collect(),
        ),
    ] {
        let mut w = router.worker(WorkerConfig::default());
        let mut b = Batch::from_frames((0..32).map(|_| &templates[0].bytes[..]), 1);
        let t = Instant::now();
        let mut at = 0usize;
        while t.elapsed().as_secs_f64() < 0.5 {
            for _ in 0..256 {
                receive(&mut b.packets, &templates, at);
                at = (at + 32) % templates.len();
                w.process(&mut b, t.elapsed().as_nanos() as u64);
            }
        }
        let c = w.counters();
        let s = t.elapsed().as_secs_f64();
        println!(
            "  {fam}, 1000 flows, 64-byte frames: {:.1} Mpps ({} forwarded of {} received)",
            c.rx() as f64 / s / 1e6,
            c.outcome(Outcome::Forwarded),
            c.rx()
        );
    }
    Ok(())
}

/// The table in the RIB and live FIBs: a burst of changes while a reader thread looks up.
fn live(table: &tables::Loaded, seed: u64) -> Result<(), Error> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use vfsr_lpm::poptrie::{Poptrie, PoptrieConfig};
    use vfsr_lpm::Lpm;
    use vfsr_rib::{parse_update, Rib, RouteTable, Source};

    let t = Instant::now();
    let mut rt = RouteTable::<Poptrie<u32>, Poptrie<u128>>::new(
        Rib::new(),
        PoptrieConfig::for_family::<u32>(),
        PoptrieConfig::for_family::<u128>(),
    )?;
    let whole = vfsr_table::Table {
        v4: table.v4.clone(),
        v6: table.v6.clone(),
        nexthops: table.nexthops.clone(),
    };
    let r = rt.load_table(&whole, Source::Table)?;
    println!(
        "\nLive FIB: {} IPv4 and {} IPv6 routes into the RIB and published Poptrie FIBs in {:.3} s",
        r.v4,
        r.v6,
        t.elapsed().as_secs_f64()
    );
    let probe = traffic::matched(&table.v4, seed ^ 0x11fe, 1);
    let a = probe.first().copied().unwrap_or(0);
    let dest = std::net::Ipv4Addr::from(a);
    let show_one = |rt: &RouteTable<Poptrie<u32>, Poptrie<u128>>| -> String {
        let (r4, _, nh) = rt.readers();
        let i = r4.load().engine.lookup(a);
        let p = rt
            .v4()
            .table()
            .lookup(a)
            .map_or("-".to_string(), |r| r.prefix.to_string());
        let what = nh
            .load()
            .get(i)
            .map_or("unreachable".to_string(), |e| e.forward.to_string());
        format!("{dest} -> {p} {what}")
    };
    println!("  before:  {}", show_one(&rt));
    // A reader on another thread keeps looking up while the changes stream in.
    let (r4, _, _) = rt.readers();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let addrs = traffic::matched(&table.v4, seed ^ 0x22, 1 << 16);
    // The writer is the control plane (core 0); the reader a forwarding core.
    let _ = vfsr_cpu::pin(0);
    let reader = std::thread::spawn(move || {
        let _ = vfsr_cpu::pin(vfsr_cpu::default_bench_core());
        let mut out = vec![0; 256];
        let mut n = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            for c in addrs.chunks(256) {
                r4.load().engine.lookup_bulk(c, &mut out);
                n += c.len() as u64;
            }
        }
        n
    });
    // Re-point a /24 of the probe's block, then withdraw 50,000 routes and announce them back.
    let more_specific = std::net::Ipv4Addr::from(a & !0xff);
    let lines = [
        format!("a {more_specific}/24 192.0.2.99"),
        format!("a {}/32 blackhole", dest),
    ];
    for l in &lines {
        if let Ok(Some(u)) = parse_update(l) {
            rt.apply(&u, Source::Api)?;
        }
    }
    let t = Instant::now();
    let churn: Vec<Route<u32>> = table.v4.iter().step_by(17).take(50_000).copied().collect();
    for r in &churn {
        rt.rib_mut().withdraw(r.prefix, Source::Table);
        rt.feed()?;
        rt.poll(Instant::now())?;
    }
    let back = vfsr_table::Table {
        v4: churn.clone(),
        v6: Vec::new(),
        nexthops: table.nexthops.clone(),
    };
    rt.rib_mut().load_table(&back, Source::Table)?;
    rt.settle()?;
    let s = t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let looked = reader.join().map_err(|_| Error::ReaderPanicked)?;
    for l in &lines {
        println!("  applied: {l}");
    }
    println!(
        "  then withdrew and re-announced {} routes in {s:.3} s ({:.0} changes/s, {} publications) \
         while a reader made {:.1} M lookups without a lock",
        churn.len(),
        2.0 * churn.len() as f64 / s,
        rt.v4().stats().publications,
        looked as f64 / 1e6
    );
    println!("  after:   {}", show_one(&rt));
    Ok(())
}

fn show(nh: u32) -> String {
    if nh == NO_ROUTE {
        "-".into()
    } else {
        format!("nh{nh}")
    }
}
