//! `vfsr neigh bench`: what a neighbor table costs the control plane under a scan, and what
//! it costs the workers that read it.
//!
//! A scan of a connected subnet (`vfsr stress`'s `scan4`/`scan6`) sends packets to addresses
//! nobody answers: each new one is a new INCOMPLETE entry in the port's table, which the
//! control plane creates (evicting a FAILED entry once the table is full) and publishes to
//! the workers before it goes on. This command replays that on one core, per family and
//! per table capacity:
//!
//! - **churn**: the addresses of one subnet in order, as a scan tries them (10.0.0.0/8,
//!   fd00:20::/64): the table full of FAILED entries for the first ones, then half its
//!   capacity of the next ones resolved one at a time, with a publication after every
//!   change (what vfsrd does for a held packet) or after every 16 (a batch). Reported as
//!   nanoseconds per change, the publication included.
//! - **timer round**: one `expire` call over a table full of REACHABLE entries none of
//!   whose timers is due (a large LAN at rest; vfsrd runs a round every 50 ms per port and
//!   family), in nanoseconds per round.
//! - **lookup**: a worker's view: present addresses looked up in a published snapshot in a
//!   random order, and `is_current` checks of cached `(id, gen)` pairs, in nanoseconds.
//!
//! `--measures` picks among `churn`, `timer` and `lookup` (all by default). Each figure is
//! the median of `--runs` passes with the minimum and maximum beside it.

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use clap::Args;
use serde_json::{json, Value};
use vfsr_bench::stats::Stats;
use vfsr_neigh::{Event, Mac, NeighAddr, NeighborConfig, NeighborTable};
use vfsr_table::rng::Rng;

/// What can stop `vfsr neigh bench`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The benchmark could not be pinned to its core.
    #[error(transparent)]
    Pin(vfsr_cpu::CpuError),
    /// A capacity out of range.
    #[error("--capacities: {0} is outside 16..=1048576")]
    Capacity(usize),
    /// The JSON document could not be written.
    #[error(transparent)]
    Report(#[from] crate::jsonfile::Error),
}

#[derive(Args)]
pub struct NeighBenchArgs {
    /// Table capacities to measure (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "4096,65536")]
    pub capacities: Vec<usize>,
    /// Which measures to take (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "churn,timer,lookup")]
    pub measures: Vec<Measure>,
    /// Timed passes per measurement (the median is reported).
    #[arg(long, default_value_t = 7)]
    pub runs: usize,
    /// Core to pin the benchmark to (default: the last core).
    #[arg(long)]
    pub core: Option<usize>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// One of the benchmark's measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Measure {
    /// New neighbors in a full table, published after each and after every 16.
    Churn,
    /// A timer round with nothing due.
    Timer,
    /// A worker's lookup and `is_current`.
    Lookup,
}

/// Addresses for a family: distinct ones from a seeded generator, or a subnet's in order.
trait Family: NeighAddr {
    fn nth(rng: &mut Rng) -> Self;
    /// Address `i` of the family's scanned subnet.
    fn scanned(i: u32) -> Self;
}

impl Family for Ipv4Addr {
    fn nth(rng: &mut Rng) -> Self {
        Ipv4Addr::from(rng.next_u64() as u32)
    }
    fn scanned(i: u32) -> Self {
        Ipv4Addr::from(0x0a00_0000 | (i & 0x00ff_ffff))
    }
}

/// The IPv6 addresses' subnet, fd00:20::/64.
const SUBNET6: u128 = 0xfd00_0020_0000_0000_u128 << 64;

impl Family for Ipv6Addr {
    fn nth(rng: &mut Rng) -> Self {
        Ipv6Addr::from(SUBNET6 | u128::from(rng.next_u64()))
    }
    fn scanned(i: u32) -> Self {
        Ipv6Addr::from(SUBNET6 | u128::from(i))
    }
}

fn distinct<A: Family>(n: usize, seed: u64) -> Vec<A> {
    let mut rng = Rng::new(seed);
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        let a = A::nth(&mut rng);
        if seen.insert(a) {
            v.push(a);
        }
    }
    v
}

/// A table of `cap` entries, every one FAILED (resolutions that timed out), at tick `now`.
fn failed_table<A: Family>(cap: usize, addrs: &[A]) -> (NeighborTable<A, u32>, u64) {
    let mut t = NeighborTable::new(NeighborConfig {
        capacity: cap,
        ..NeighborConfig::default()
    });
    let mut now = 1;
    for (i, a) in addrs.iter().take(cap).enumerate() {
        let _ = t.resolve(*a, i as u32, now);
    }
    // Each timer round sends one more solicitation; after the last the entry fails.
    for _ in 0..8 {
        now += 1_000;
        let _ = t.expire(now);
    }
    t.publish();
    (t, now)
}

/// Nanoseconds per change for `n` new addresses resolved into a full table of FAILED
/// entries, publishing after every `every` changes.
fn churn<A: Family>(cap: usize, every: usize, runs: usize) -> Stats {
    let addrs: Vec<A> = (0..(cap + cap / 2) as u32).map(A::scanned).collect();
    let (fresh, rest) = addrs.split_at(cap);
    let mut ns = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (mut t, now) = failed_table::<A>(cap, fresh);
        let t0 = Instant::now();
        for (i, a) in rest.iter().enumerate() {
            black_box(t.resolve(*a, i as u32, now + 1));
            if (i + 1) % every == 0 {
                t.publish();
            }
        }
        t.publish();
        ns.push(t0.elapsed().as_nanos() as f64 / rest.len() as f64);
        drop(black_box(t));
    }
    Stats::of(&ns)
}

/// Nanoseconds per timer round over a table of `cap` REACHABLE entries, none due.
fn timer_round<A: Family>(cap: usize, runs: usize) -> Stats {
    let addrs: Vec<A> = distinct(cap, 13);
    let mut t: NeighborTable<A, u32> = NeighborTable::new(NeighborConfig {
        capacity: cap,
        ..NeighborConfig::default()
    });
    let answer = Event::Advert {
        mac: Some(Mac([2, 0, 0, 0, 0, 1])),
        solicited: true,
        override_flag: true,
    };
    for (i, a) in addrs.iter().enumerate() {
        let _ = t.resolve(*a, i as u32, 1);
        let _ = t.apply(*a, answer, 2);
    }
    t.publish();
    let reps = (1 << 22) / cap;
    let mut ns = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t0 = Instant::now();
        for _ in 0..reps.max(1) {
            black_box(t.expire(black_box(3)));
        }
        ns.push(t0.elapsed().as_nanos() as f64 / reps.max(1) as f64);
    }
    Stats::of(&ns)
}

/// Nanoseconds per lookup and per `is_current` check in a published table of `cap` entries.
fn lookups<A: Family>(cap: usize, runs: usize) -> (Stats, Stats) {
    let addrs: Vec<A> = distinct(cap, 11);
    let (t, _) = failed_table::<A>(cap, &addrs);
    let r = t.reader();
    let snap = r.load_full();
    let mut order: Vec<usize> = (0..cap).collect();
    let mut rng = Rng::new(3);
    for i in (1..order.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    let probes: Vec<A> = order
        .iter()
        .filter_map(|&i| addrs.get(i).copied())
        .collect();
    let refs: Vec<(u32, u64)> = probes
        .iter()
        .filter_map(|a| snap.lookup(a).map(|e| (e.id, e.gen)))
        .collect();
    let reps = (4_000_000 / cap).max(1);
    let (mut look, mut cur) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        let t0 = Instant::now();
        let mut hits = 0u64;
        for _ in 0..reps {
            for a in &probes {
                hits += u64::from(snap.lookup(black_box(a)).is_some());
            }
        }
        black_box(hits);
        look.push(t0.elapsed().as_nanos() as f64 / (reps * probes.len()) as f64);
        let t0 = Instant::now();
        let mut ok = 0u64;
        for _ in 0..reps {
            for &(id, gen) in &refs {
                ok += u64::from(snap.is_current(black_box(id), gen));
            }
        }
        black_box(ok);
        cur.push(t0.elapsed().as_nanos() as f64 / (reps * refs.len().max(1)) as f64);
    }
    (Stats::of(&look), Stats::of(&cur))
}

fn stats_json(s: &Stats) -> Value {
    json!({"median": s.median, "min": s.min, "max": s.max})
}

fn family<A: Family>(
    name: &str,
    cap: usize,
    measures: &[Measure],
    runs: usize,
    rows: &mut Vec<Value>,
) {
    let mut taken = Vec::new();
    if measures.contains(&Measure::Churn) {
        taken.push(("churn, publish each change", churn::<A>(cap, 1, runs)));
        taken.push(("churn, publish every 16", churn::<A>(cap, 16, runs)));
    }
    if measures.contains(&Measure::Timer) {
        taken.push(("timer round, none due", timer_round::<A>(cap, runs)));
    }
    if measures.contains(&Measure::Lookup) {
        let (look, cur) = lookups::<A>(cap, runs);
        taken.push(("lookup", look));
        taken.push(("is_current", cur));
    }
    for (what, s) in taken {
        println!(
            "{name:<4} {cap:>8}  {what:<28} {:>10.1} ns  ({:.1}-{:.1})",
            s.median, s.min, s.max
        );
        rows.push(json!({"family": name, "capacity": cap, "measure": what,
            "ns": stats_json(&s)}));
    }
}

pub(crate) fn run(a: &NeighBenchArgs) -> Result<(), Error> {
    if let Some(&bad) = a.capacities.iter().find(|&&c| !(16..=1 << 20).contains(&c)) {
        return Err(Error::Capacity(bad));
    }
    let core = a.core.unwrap_or_else(vfsr_cpu::default_bench_core);
    // The machine's facts first: pinned, the process sees one core.
    let facts = crate::machine::facts();
    vfsr_cpu::pin(core).map_err(Error::Pin)?;
    println!(
        "vfsr neigh bench: {}, core {core}, {} runs",
        crate::machine::summary(&facts),
        a.runs
    );
    println!("fam  capacity  measure                       median      (min-max)");
    let runs = a.runs.max(1);
    let mut rows = Vec::new();
    for &cap in &a.capacities {
        family::<Ipv4Addr>("arp", cap, &a.measures, runs, &mut rows);
        family::<Ipv6Addr>("nd", cap, &a.measures, runs, &mut rows);
    }
    if let Some(p) = &a.json {
        let doc = json!({"machine": facts, "core": core, "runs": runs, "results": rows});
        crate::jsonfile::write(p, &doc)?;
    }
    Ok(())
}
