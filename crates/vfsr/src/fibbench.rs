//! `vfsr fib bench`: how fast the live FIB loads, absorbs updates, and how much updates cost
//! the readers.
//!
//! Four measurements, all on the same table (the reference table by default):
//!
//! 1. **load**: from a route list in memory to a published, ready FIB, per family (the route
//!    map, the engine build), with and without the RIB in front, and the FIB's memory (one
//!    copy of the engine for Poptrie, updated in place).
//! 2. **updates**: 100,000 random table routes (seeded) get a new next hop (`change`), are
//!    withdrawn (`withdraw`), then announced again (`announce`), one change at a time, with
//!    batched publication (the FIB's 1 ms delay bound) and with a publication after every
//!    change (`each`). The time includes the last publication.
//! 3. **reader**: a reader thread pinned to the benchmark core looks up matched IPv4 traffic
//!    in batches of 256, while the writer, pinned to core 0 as the control plane would be,
//!    streams next-hop changes at 10k, 100k and the most updates per second it can. Each
//!    phase's lookup rate is divided by the rate of the idle phases around it.
//! 4. **trace**: the seeded update trace of `vfsr_table::trace` (withdraw and re-announce a
//!    share of the table, next-hop changes, a session reset of the busiest next hop), phase
//!    by phase, over several passes (the change phase's routes set back between passes, so
//!    each starts from the same table), reported as the median pass with the slowest and the
//!    fastest beside it, and a check that the FIB then answers like a fresh build. A phase
//!    of a session reset lasts a few milliseconds, which one hiccup of the host can double.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};
use vfsr_bench::stats::Stats;
use vfsr_fib::nexthop::Forward;
use vfsr_fib::{LiveFib, Publish, POLL_EVERY};
use vfsr_lpm::poptrie::{Poptrie, PoptrieConfig};
use vfsr_lpm::{Key, Lpm, LpmBuild, LpmUpdate, NextHop, Route, NO_ROUTE};
use vfsr_rib::{Rib, RibFamily, RibRoute, RouteTable, Source};
use vfsr_table::rng::Rng;
use vfsr_table::{trace, traffic, Table};

use crate::tables;

/// What can stop `vfsr fib bench`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The route table could not be read (the reader's error names the file).
    #[error(transparent)]
    Table(vfsr_table::Error),
    /// The writer could not be pinned.
    #[error(transparent)]
    Pin(vfsr_cpu::CpuError),
    /// A live FIB refused a change, a publication or its first build.
    #[error(transparent)]
    Fib(#[from] vfsr_fib::FibError),
    /// A fresh Poptrie, the reference of the check, could not be built.
    #[error(transparent)]
    Build(#[from] vfsr_lpm::BuildError),
    /// The RIB refused a route.
    #[error(transparent)]
    Rib(vfsr_rib::RibError),
    /// The RIB-to-FIB table could not load the table.
    #[error(transparent)]
    Load(vfsr_rib::LoadError),
    /// The published FIB answered addresses unlike a fresh build (where, how many).
    #[error("{what}: {bad} addresses answer unlike a fresh build")]
    Stale { what: String, bad: usize },
    /// The reader thread panicked.
    #[error("reader thread failed")]
    ReaderPanicked,
    /// The JSON document could not be made or written.
    #[error(transparent)]
    Report(#[from] crate::jsonfile::Error),
}

#[derive(Args)]
pub struct FibBenchArgs {
    /// Route table (default: the reference table in ../shared/data when present, else the
    /// synthetic one).
    #[arg(long)]
    pub table: Option<std::path::PathBuf>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Routes changed, withdrawn and announced again in the update-rate measurement.
    #[arg(long, default_value_t = 100_000)]
    pub updates: usize,
    /// Seconds per reader phase.
    #[arg(long, default_value_t = 1.5)]
    pub phase_s: f64,
    /// Publication delay bound in microseconds.
    #[arg(long, default_value_t = 1000)]
    pub max_delay_us: u64,
    /// Core of the reader (default: the last core); the writer runs on core 0.
    #[arg(long)]
    pub core: Option<usize>,
    /// Seed of the sampled routes, the traffic and the trace.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Passes of the update trace (each phase reported as the median pass, with the slowest
    /// and the fastest).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub trace_passes: u64,
    /// Families to measure, comma-separated: v4, v6 (the reader phases are IPv4's and run
    /// only with v4; the RIB is loaded with both families either way).
    #[arg(long, value_delimiter = ',', default_values_t = ["v4".to_string(), "v6".to_string()],
        value_parser = clap::builder::PossibleValuesParser::new(["v4", "v6"]))]
    pub families: Vec<String>,
}

/// Routes of `routes` picked at random (distinct positions).
fn pick<K: Key>(routes: &[Route<K>], n: usize, seed: u64) -> Vec<Route<K>> {
    let mut rng = Rng::new(seed);
    let mut idx: Vec<usize> = (0..routes.len()).collect();
    let n = n.min(idx.len());
    for i in 0..n {
        let j = i + rng.index(idx.len() - i);
        idx.swap(i, j);
    }
    idx[..n].iter().map(|&i| routes[i]).collect()
}

/// A next hop of the table other than `nh` (the table's next hops cycle).
fn other(nh: NextHop, hops: &[NextHop]) -> NextHop {
    let i = hops.iter().position(|&h| h == nh).unwrap_or(0);
    let o = hops[(i + 1) % hops.len()];
    if o == nh {
        nh % 60_000 + 1
    } else {
        o
    }
}

fn distinct_hops<K: Key>(routes: &[Route<K>]) -> Vec<NextHop> {
    let mut h: Vec<NextHop> = routes.iter().map(|r| r.nexthop).collect();
    h.sort_unstable();
    h.dedup();
    if h.is_empty() {
        h.push(1);
    }
    h
}

type Fib<K> = LiveFib<K, Poptrie<K>>;

fn new_fib<K: Key>(routes: &[Route<K>], delay: Duration) -> Result<Fib<K>, Error> {
    let mut f = LiveFib::new(routes, PoptrieConfig::for_family::<K>())?;
    f.set_max_delay(delay);
    Ok(f)
}

/// Applies `changes` one at a time ([`LiveFib::apply_changes`]); `each` publishes after every
/// change, otherwise the delay bound decides. Returns changes per second and publications
/// made.
fn stream<K: Key, E: LpmUpdate<K> + Clone>(
    fib: &mut LiveFib<K, E>,
    changes: &[Route<K>],
    each: bool,
) -> Result<(f64, u64), Error> {
    let p0 = fib.stats().publications;
    let t = Instant::now();
    fib.apply_changes(
        changes,
        if each {
            Publish::Each
        } else {
            Publish::Batched
        },
    )?;
    let s = t.elapsed().as_secs_f64();
    Ok((changes.len() as f64 / s, fib.stats().publications - p0))
}

/// The changes of the update-rate measurement, in its three phases: `n` random table routes
/// moved to another next hop of the table (`change`), withdrawn (`withdraw`), and announced
/// again with their own next hop (`announce`).
fn update_phases<K: Key>(
    routes: &[Route<K>],
    n: usize,
    seed: u64,
) -> [(&'static str, Vec<Route<K>>); 3] {
    let picked = pick(routes, n, seed);
    let hops = distinct_hops(routes);
    let change = picked
        .iter()
        .map(|r| Route::new(r.prefix, other(r.nexthop, &hops)))
        .collect();
    let withdraw = picked
        .iter()
        .map(|r| Route::new(r.prefix, NO_ROUTE))
        .collect();
    [
        ("change", change),
        ("withdraw", withdraw),
        ("announce", picked),
    ]
}

/// The update-rate rows of one family.
fn update_rates<K: Key>(
    routes: &[Route<K>],
    n: usize,
    seed: u64,
    delay: Duration,
    out: &mut Vec<Value>,
) -> Result<(), Error> {
    let phases = update_phases(routes, n, seed);
    for each in [false, true] {
        let mut fib = new_fib(routes, delay)?;
        let publish = if each { "each" } else { "batched" };
        for (kind, changes) in &phases {
            let (per_s, pubs) = stream(&mut fib, changes, each)?;
            eprintln!(
                "updates {:<3} {kind:<9} {publish:<8} {:>12.0} /s  ({pubs} publications)",
                K::FAMILY,
                per_s
            );
            out.push(
                json!({"family": K::FAMILY, "path": "fib", "kind": kind, "publish": publish,
                "per_s": per_s, "count": changes.len(), "publications": pubs}),
            );
        }
        let probe = &phases[2].1;
        check_fresh(&fib, probe, &format!("{} updates, {publish}", K::FAMILY))?;
    }
    Ok(())
}

/// The published FIB answers every start address of `probe` as a fresh build would.
fn check_fresh<K: Key>(fib: &Fib<K>, probe: &[Route<K>], what: &str) -> Result<(), Error> {
    let fresh = Poptrie::build(&fib.table().to_routes(), &PoptrieConfig::for_family::<K>())?;
    let snap = fib.reader().load();
    let bad = probe
        .iter()
        .filter(|r| snap.engine.lookup(r.prefix.addr()) != fresh.lookup(r.prefix.addr()))
        .count();
    if bad > 0 {
        return Err(Error::Stale {
            what: what.to_string(),
            bad,
        });
    }
    Ok(())
}

/// Load time from a route list to a published FIB.
fn load<K: Key>(routes: &[Route<K>], out: &mut Vec<Value>) -> Result<f64, Error> {
    let t = Instant::now();
    let fib = new_fib(routes, Duration::from_millis(1))?;
    let s = t.elapsed().as_secs_f64();
    let got = fib.reader().load().engine.route_count();
    let mib = fib.memory_bytes() as f64 / 1048576.0;
    eprintln!(
        "load    {:<3} {:>8} routes in {:.3} s ({:.2} M routes/s), FIB {:.1} MiB",
        K::FAMILY,
        got,
        s,
        got as f64 / s / 1e6,
        mib
    );
    out.push(json!({"family": K::FAMILY, "path": "fib", "seconds": s,
        "routes": got, "routes_per_s": got as f64 / s, "fib_mib": mib}));
    Ok(s)
}

type Routes = RouteTable<Poptrie<u32>, Poptrie<u128>>;

fn new_route_table(delay: Duration) -> Result<Routes, Error> {
    let mut rt = RouteTable::new(
        Rib::new(),
        PoptrieConfig::for_family::<u32>(),
        PoptrieConfig::for_family::<u128>(),
    )?;
    rt.set_max_delay(delay);
    Ok(rt)
}

/// Load time of the whole table (both families) through the RIB into published FIBs.
fn load_rib(t: &Table, out: &mut Vec<Value>) -> Result<Routes, Error> {
    let mut rt = new_route_table(Duration::from_millis(1))?;
    let tm = Instant::now();
    let r = rt.load_table(t, Source::Table).map_err(Error::Load)?;
    let s = tm.elapsed().as_secs_f64();
    let n = r.v4 + r.v6;
    eprintln!(
        "load    v4+v6 {n:>8} routes in {s:.3} s ({:.2} M routes/s) through the RIB",
        n as f64 / s / 1e6
    );
    out.push(json!({"family": "v4+v6", "path": "rib+fib", "seconds": s,
        "routes": n, "routes_per_s": n as f64 / s}));
    Ok(rt)
}

/// The RIB's view of a table next hop: a gateway, or a synthetic nh64 next hop.
fn forward_of(t: &Table, nh: NextHop) -> Forward {
    match t.nexthops.gateway(nh) {
        Some(addr) => Forward::Gateway {
            addr,
            ifindex: None,
        },
        None => Forward::Opaque(nh),
    }
}

/// Single-route updates through the RIB (best path, next-hop interning, change log) and the
/// FIB, as `update_rates` does for the FIB alone.
fn rib_update_rates<K: Key + RibFamily>(
    t: &Table,
    routes: &[Route<K>],
    n: usize,
    seed: u64,
    delay: Duration,
    out: &mut Vec<Value>,
) -> Result<(), Error> {
    let phases = update_phases(routes, n, seed);
    let route = |nh: NextHop| [RibRoute::new(Source::Table, forward_of(t, nh))];
    for each in [false, true] {
        let mut rt = new_route_table(delay)?;
        rt.load_table(t, Source::Table).map_err(Error::Load)?;
        let publish = if each { "each" } else { "batched" };
        for (kind, changes) in &phases {
            let p0 = rt.v4().stats().publications + rt.v6().stats().publications;
            let tm = Instant::now();
            for (i, r) in changes.iter().enumerate() {
                let rib = rt.rib_mut();
                if r.nexthop == NO_ROUTE {
                    rib.withdraw(r.prefix, Source::Table);
                } else {
                    rib.replace(r.prefix, Source::Table, &route(r.nexthop))
                        .map_err(Error::Rib)?;
                }
                rt.feed()?;
                if each {
                    rt.publish()?;
                } else if i % POLL_EVERY == POLL_EVERY - 1 {
                    rt.poll(Instant::now())?;
                }
            }
            rt.settle()?;
            let per_s = changes.len() as f64 / tm.elapsed().as_secs_f64();
            let pubs = rt.v4().stats().publications + rt.v6().stats().publications - p0;
            eprintln!(
                "updates {:<3} {kind:<9} {publish:<8} {per_s:>12.0} /s  ({pubs} publications) through the RIB",
                K::FAMILY
            );
            out.push(json!({"family": K::FAMILY, "path": "rib+fib", "kind": kind,
                "publish": publish, "per_s": per_s, "count": changes.len(), "publications": pubs}));
        }
    }
    Ok(())
}

/// One reader phase: lookups per second of the reader while the writer streams `rate`
/// updates per second (0: none, `u64::MAX`: as fast as it can). Returns (lookups/s,
/// achieved updates/s).
fn reader_phase(
    fib: &mut Fib<u32>,
    addrs: &Arc<Vec<u32>>,
    changes: &[Route<u32>],
    cursor: &mut usize,
    rate: u64,
    secs: f64,
    core: usize,
) -> Result<(f64, f64), Error> {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let reader = fib.reader();
    let (stop2, done2, addrs2) = (Arc::clone(&stop), Arc::clone(&done), Arc::clone(addrs));
    let h = std::thread::spawn(move || {
        let _ = vfsr_cpu::pin(core);
        let mut out = vec![0; 256];
        let mut n = 0u64;
        let mut sink = 0u32;
        // Warm up, then count until told to stop.
        let t = Instant::now();
        while !stop2.load(Ordering::Relaxed) {
            for chunk in addrs2.chunks(256) {
                let snap = reader.load();
                snap.engine.lookup_bulk(chunk, &mut out);
                sink = sink.wrapping_add(out[0]);
                n += chunk.len() as u64;
                if stop2.load(Ordering::Relaxed) {
                    break;
                }
            }
        }
        done2.store(n, Ordering::Relaxed);
        (t.elapsed().as_secs_f64(), sink)
    });
    let t0 = Instant::now();
    let dur = Duration::from_secs_f64(secs);
    let mut applied = 0u64;
    let tick = Duration::from_millis(1);
    let mut next = t0;
    while t0.elapsed() < dur {
        let burst = match rate {
            0 => 0,
            u64::MAX => 64,
            r => (r / 1000).max(1),
        };
        for _ in 0..burst {
            let r = changes[*cursor % changes.len()];
            *cursor += 1;
            fib.set(r.prefix, r.nexthop)?;
            applied += 1;
        }
        fib.poll(Instant::now())?;
        if rate != u64::MAX {
            next += tick;
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            }
        }
    }
    fib.publish()?;
    let wall = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let (rs, _) = h.join().map_err(|_| Error::ReaderPanicked)?;
    let n = done.load(Ordering::Relaxed) as f64;
    Ok((n / rs, applied as f64 / wall))
}

/// Reader throughput under update load, as ratios to the idle phases around each phase.
fn reader_ratios(
    routes: &[Route<u32>],
    a: &FibBenchArgs,
    core: usize,
    out: &mut Vec<Value>,
) -> Result<(), Error> {
    let mut fib = new_fib(routes, Duration::from_micros(a.max_delay_us))?;
    let addrs = Arc::new(traffic::matched(routes, a.seed ^ 4, 1 << 20));
    // Changes that move random routes to another next hop and back.
    let [(_, mut changes), _, (_, back)] = update_phases(routes, 200_000, a.seed ^ 0x55);
    changes.extend(back);
    let mut cursor = 0;
    let idle = |fib: &mut Fib<u32>, cursor: &mut usize| {
        reader_phase(fib, &addrs, &changes, cursor, 0, a.phase_s, core).map(|r| r.0)
    };
    let mut before = idle(&mut fib, &mut cursor)?;
    let bound = Duration::from_micros(a.max_delay_us);
    // The last two phases repeat 100k/s and max with a ten times longer delay bound: fewer
    // publications, to show what each one costs the reader.
    let long = bound * 10;
    for (label, rate, delay) in [
        ("10k", 10_000u64, bound),
        ("100k", 100_000, bound),
        ("max", u64::MAX, bound),
        ("100k", 100_000, long),
        ("max", u64::MAX, long),
    ] {
        fib.set_max_delay(delay);
        let p0 = fib.stats().publications;
        let (lps, ups) = reader_phase(
            &mut fib,
            &addrs,
            &changes,
            &mut cursor,
            rate,
            a.phase_s,
            core,
        )?;
        let pubs = (fib.stats().publications - p0) as f64 / a.phase_s;
        fib.set_max_delay(bound);
        let after = idle(&mut fib, &mut cursor)?;
        let base = (before + after) / 2.0;
        let ratio = lps / base;
        let us = delay.as_micros();
        eprintln!(
            "reader  {label:>5} updates/s target, bound {us} us, {ups:>10.0} achieved, {pubs:.0} publications/s: {:>7.1} Mlps, idle {:>7.1} Mlps, ratio {ratio:.3}",
            lps / 1e6,
            base / 1e6
        );
        // The "max" phase reports the rate it reached as its rate, and says so in "target".
        let (per_s, target): (Value, Value) = if rate == u64::MAX {
            (json!(ups), json!("max"))
        } else {
            (json!(rate), json!(rate))
        };
        out.push(
            json!({"updates_per_s": per_s, "target": target, "achieved_updates_per_s": ups,
            "max_delay_us": us, "publications_per_s": pubs,
            "lookups_per_s": lps, "idle_lookups_per_s": base, "ratio_to_idle": ratio}),
        );
        before = after;
    }
    Ok(())
}

/// The seeded trace, phase by phase over `passes` passes, then a check against a fresh build.
/// Between passes the change phase's routes get their table next hops back (not timed); the
/// other phases end where they began.
fn run_trace<K: Key>(
    routes: &[Route<K>],
    seed: u64,
    per_phase: usize,
    passes: u64,
    delay: Duration,
    out: &mut Vec<Value>,
) -> Result<(), Error> {
    let mut fib = new_fib(routes, delay)?;
    let map = vfsr_lpm::RouteMap::from_routes(routes);
    let tr = trace::trace(&map.to_routes(), per_phase, seed);
    let restore: Vec<Route<K>> = tr
        .iter()
        .filter(|p| p.name == "change")
        .flat_map(|p| &p.changes)
        .map(|r| Route::new(r.prefix, map.get(&r.prefix).unwrap_or(NO_ROUTE)))
        .collect();
    let mut runs: Vec<Vec<(f64, u64)>> = vec![Vec::new(); tr.len()];
    for pass in 0..passes {
        if pass > 0 {
            stream(&mut fib, &restore, false)?;
        }
        for (p, r) in tr.iter().zip(runs.iter_mut()) {
            let (per_s, pubs) = stream(&mut fib, &p.changes, false)?;
            eprintln!(
                "trace   {:<3} {:<15} {:>8} changes {:>12.0} /s  ({pubs} publications, pass {})",
                K::FAMILY,
                p.name,
                p.changes.len(),
                per_s,
                pass + 1
            );
            r.push((per_s, pubs));
        }
    }
    let mut probe = Vec::new();
    for (p, r) in tr.iter().zip(&runs) {
        let rates: Vec<f64> = r.iter().map(|x| x.0).collect();
        let pubs: Vec<f64> = r.iter().map(|x| x.1 as f64).collect();
        let st = Stats::of(&rates);
        out.push(
            json!({"family": K::FAMILY, "phase": p.name, "changes": p.changes.len(),
            "per_s": st.median, "per_s_min": st.min, "per_s_max": st.max, "passes": rates,
            "publications": Stats::of(&pubs).median.round() as u64}),
        );
        probe.extend(p.changes.iter().copied());
    }
    check_fresh(&fib, &probe, &format!("{} trace", K::FAMILY))
}

pub(crate) fn run(a: &FibBenchArgs) -> Result<(), Error> {
    let v4 = a.families.iter().any(|f| f == "v4");
    let v6 = a.families.iter().any(|f| f == "v6");
    let core = a.core.unwrap_or_else(vfsr_cpu::default_bench_core);
    vfsr_cpu::pin(0).map_err(Error::Pin)?;
    let table = match &a.table {
        Some(p) => tables::load(p, false),
        None => tables::default_table(a.seed),
    }
    .map_err(Error::Table)?;
    eprintln!(
        "table: {} ({} IPv4, {} IPv6 routes); writer on core 0, reader on core {core}",
        table.source,
        table.v4.len(),
        table.v6.len()
    );
    let delay = Duration::from_micros(a.max_delay_us);
    let mut loads = Vec::new();
    let s4 = if v4 {
        load(&table.v4, &mut loads)?
    } else {
        0.0
    };
    let s6 = if v6 {
        load(&table.v6, &mut loads)?
    } else {
        0.0
    };
    let whole = Table {
        v4: table.v4.clone(),
        v6: table.v6.clone(),
        nexthops: table.nexthops.clone(),
    };
    drop(load_rib(&whole, &mut loads)?);
    let mut updates = Vec::new();
    if v4 {
        update_rates(&table.v4, a.updates, a.seed, delay, &mut updates)?;
    }
    if v6 {
        update_rates(&table.v6, a.updates, a.seed, delay, &mut updates)?;
    }
    if v4 {
        rib_update_rates(&whole, &table.v4, a.updates, a.seed, delay, &mut updates)?;
    }
    if v6 {
        rib_update_rates(&whole, &table.v6, a.updates, a.seed, delay, &mut updates)?;
    }
    let mut reader = Vec::new();
    if v4 {
        reader_ratios(&table.v4, a, core, &mut reader)?;
    }
    let mut traces = Vec::new();
    if v4 {
        run_trace(
            &table.v4,
            a.seed,
            a.updates,
            a.trace_passes,
            delay,
            &mut traces,
        )?;
    }
    if v6 {
        run_trace(
            &table.v6,
            a.seed,
            a.updates / 4,
            a.trace_passes,
            delay,
            &mut traces,
        )?;
    }

    println!(
        "\nvfsr fib bench: {} ; poptrie, delay bound {} µs, writer core 0, reader core {core}; {}\n",
        table.source,
        a.max_delay_us,
        crate::machine::summary(&crate::machine::facts())
    );
    println!("load (route list to published FIB)");
    for l in &loads {
        println!(
            "  {:<8} {:<5} {:>9} routes {:>8.3} s {:>10.2} M routes/s",
            l["path"].as_str().unwrap_or(""),
            l["family"].as_str().unwrap_or(""),
            l["routes"],
            l["seconds"].as_f64().unwrap_or(0.0),
            l["routes_per_s"].as_f64().unwrap_or(0.0) / 1e6
        );
    }
    if v4 && v6 {
        println!("  fib      v4 + v6: {:.3} s", s4 + s6);
    }
    println!("\nsingle-route updates ({} random table routes)", a.updates);
    println!("  path     fam kind      publish        per s   publications");
    for u in &updates {
        println!(
            "  {:<8} {:<3} {:<9} {:<8} {:>12.0} {:>12}",
            u["path"].as_str().unwrap_or(""),
            u["family"].as_str().unwrap_or(""),
            u["kind"].as_str().unwrap_or(""),
            u["publish"].as_str().unwrap_or(""),
            u["per_s"].as_f64().unwrap_or(0.0),
            u["publications"]
        );
    }
    if !reader.is_empty() {
        println!("\nreader (IPv4 matched traffic, batches of 256) while updates stream");
        println!("  target/s   bound us  achieved/s  publ./s    Mlps   idle Mlps  ratio");
        for r in &reader {
            println!(
                "  {:>8} {:>10} {:>11.0} {:>8.0} {:>7.1} {:>10.1} {:>6.3}",
                r["target"].to_string(),
                r["max_delay_us"],
                r["achieved_updates_per_s"].as_f64().unwrap_or(0.0),
                r["publications_per_s"].as_f64().unwrap_or(0.0),
                r["lookups_per_s"].as_f64().unwrap_or(0.0) / 1e6,
                r["idle_lookups_per_s"].as_f64().unwrap_or(0.0) / 1e6,
                r["ratio_to_idle"].as_f64().unwrap_or(0.0)
            );
        }
    }
    println!(
        "\nupdate trace (seed {}), batched publication, median of {} passes (slowest, fastest)",
        a.seed, a.trace_passes
    );
    for t in &traces {
        let f = |k: &str| t[k].as_f64().unwrap_or(0.0);
        println!(
            "  {:<3} {:<15} {:>8} changes {:>12.0} /s  ({:.0} - {:.0})",
            t["family"].as_str().unwrap_or(""),
            t["phase"].as_str().unwrap_or(""),
            t["changes"],
            f("per_s"),
            f("per_s_min"),
            f("per_s_max")
        );
    }
    if let Some(path) = &a.json {
        let machine = crate::machine::facts();
        let doc = json!({
            "machine": machine,
            "cpu": machine["cpu"],
            "table": {"source": table.source, "v4_routes": table.v4.len(), "v6_routes": table.v6.len()},
            "params": {"updates": a.updates, "phase_s": a.phase_s, "max_delay_us": a.max_delay_us,
                "reader_core": core, "writer_core": 0, "seed": a.seed, "backend": "poptrie",
                "families": a.families, "trace_passes": a.trace_passes},
            "load": loads,
            "updates": updates,
            "reader": reader,
            "trace": traces,
        });
        crate::jsonfile::write(path, &doc)?;
    }
    Ok(())
}
