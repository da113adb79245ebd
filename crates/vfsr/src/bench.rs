//! `vfsr lpm bench`: the lookup-engine benchmark (see `vfsr_bench::lpm` for the method).

use crate::cacheload::CacheLoad;
use crate::tables;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;
use vfsr_bench::lpm::{self, Contender, ContenderError, Params, Row, Skipped, SweepRow};
use vfsr_bench::peers::{self, PeerKey};
use vfsr_lpm::dir24::Dir24;
use vfsr_lpm::lctrie::{LcConfig, LcTrie};
use vfsr_lpm::poptrie::{Poptrie, PoptrieConfig, Vector};
use vfsr_lpm::radix::Radix;
use vfsr_lpm::{Key, Lpm, LpmBuild, Route};
use vfsr_table::traffic;

#[derive(Args)]
pub struct BenchArgs {
    /// Route table (default: the reference table in ../shared/data when present, else the
    /// synthetic one).
    #[arg(long)]
    pub table: Option<PathBuf>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Addresses per traffic pattern.
    #[arg(long, default_value_t = 1 << 23)]
    pub lookups: usize,
    /// Timed passes per measurement (the median is reported; at least 5 are advised).
    #[arg(long, default_value_t = 7)]
    pub runs: usize,
    /// Addresses per bulk-lookup call.
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// Longest one timed pass may take; slower contenders are timed on fewer addresses.
    #[arg(long, default_value_t = 1.0)]
    pub max_pass_s: f64,
    /// Core to pin the benchmark to (default: the last core).
    #[arg(long)]
    pub core: Option<usize>,
    /// Seed of the traffic (and of the synthetic table when it is used).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Leave out the peers (Rust crates, DPDK).
    #[arg(long)]
    pub no_peers: bool,
    /// Measure only these contenders (comma-separated report names, e.g. poptrie,dir24,rte_fib).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Leave out these contenders (comma-separated report names, e.g. rte_lpm,rotonda-store).
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<String>,
    /// Leave out the LC-trie fill-factor sweep.
    #[arg(long)]
    pub no_sweep: bool,
    /// Run a neighbor on this core while measuring: a thread reading random cache lines of a
    /// large buffer, competing for the shared last-level cache as a routing daemon on core 0
    /// or another tenant of the host does.
    #[arg(long)]
    pub neighbor_core: Option<usize>,
    /// The neighbor's buffer, MiB (64 to 4096).
    #[arg(long, default_value_t = 256)]
    pub neighbor_mib: usize,
}

type Boxed<K> = Box<dyn Lpm<K>>;

/// What can stop `vfsr lpm bench`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The benchmark could not be pinned to its core.
    #[error(transparent)]
    Pin(#[from] vfsr_cpu::CpuError),
    /// The table could not be read (the reader's error names the file).
    #[error(transparent)]
    Table(vfsr_table::Error),
    /// A fill factor of the LC-trie sweep that the LC-trie does not take.
    #[error(transparent)]
    SweepConfig(#[from] vfsr_lpm::lctrie::UnknownFillFactor),
    /// The LC-trie refused the table at a fill factor of the sweep.
    #[error("lctrie {name}: {err}")]
    Sweep {
        name: &'static str,
        #[source]
        err: vfsr_lpm::BuildError,
    },
    /// The JSON file could not be written.
    #[error(transparent)]
    Report(#[from] crate::jsonfile::Error),
    /// The cache neighbor could not start.
    #[error(transparent)]
    Neighbor(#[from] crate::cacheload::Error),
}

fn ok<K: Key, E: Lpm<K> + 'static>(
    r: Result<E, vfsr_lpm::BuildError>,
) -> Result<Boxed<K>, ContenderError> {
    Ok(Box::new(r?))
}

/// vfsr's own engines for one family, radix (the baseline) included.
fn own<K: Key>() -> Vec<Contender<K>> {
    let mut v = Vec::new();
    // Backend names are unique so that tools reading the JSON find the default engine under
    // "poptrie"; the other rows show what its parts are worth.
    let family = PoptrieConfig::for_family::<K>();
    let label = |c: &PoptrieConfig| match c.top_bits {
        0 => format!("s={}", c.direct_bits),
        t => format!("s={}+{}", t, c.direct_bits - t),
    };
    let chosen = Vector::best_for::<K>();
    let variant = match chosen {
        Vector::Avx512 => label(&family),
        v => format!("{},{}", label(&family), v.name()),
    };
    v.push(Contender::new("poptrie", variant, move |r| {
        ok(Poptrie::build(r, &family))
    }));
    // Where this family's default is not AVX-512 on a CPU that has it (IPv4 on AMD Zen 5),
    // the AVX-512 lookup is measured beside it.
    if Vector::Avx512.available() && chosen != Vector::Avx512 {
        let variant = format!("{},{}", label(&family), Vector::Avx512.name());
        v.push(Contender::new("poptrie_avx512", variant, move |r| {
            let mut p = Poptrie::build(r, &family)?;
            p.set_vector(Vector::Avx512);
            Ok(Box::new(p) as Boxed<K>)
        }));
    }
    v.push(Contender::new("poptrie16", "s=16", |r| {
        ok(Poptrie::build(r, &PoptrieConfig::flat(16)))
    }));
    let two_level = PoptrieConfig {
        direct_bits: 24,
        top_bits: 12,
    };
    if K::BITS == 128 {
        v.push(Contender::new(
            "poptrie_2level",
            label(&two_level),
            move |r| ok(Poptrie::build(r, &two_level)),
        ));
    }
    if Vector::Avx2.available() && K::BITS == 32 {
        let variant = format!("{},{}", label(&family), Vector::Avx2.name());
        v.push(Contender::new("poptrie_avx2", variant, move |r| {
            let mut p = Poptrie::build(r, &family)?;
            p.set_vector(Vector::Avx2);
            Ok(Box::new(p) as Boxed<K>)
        }));
    }
    // The portable lookup on its own row, unless it is this family's default already (IPv4
    // on AMD Zen 5), where the `poptrie` row measures it and the checks read that row.
    if vfsr_lpm::poptrie::simd_available() && chosen != Vector::Portable {
        let variant = format!("{},no simd", label(&family));
        v.push(Contender::new("poptrie_scalar", variant, move |r| {
            let mut p = Poptrie::build(r, &family)?;
            p.set_simd(false);
            Ok(Box::new(p) as Boxed<K>)
        }));
    }
    v.push(Contender::new("lctrie", "fill=50/30", |r| {
        ok(LcTrie::build(r, &LcConfig::default()))
    }));
    v.push(Contender::new("radix", "bsd", |r| ok(Radix::build(r, &()))));
    v
}

fn with_peers<K: PeerKey>(mut v: Vec<Contender<K>>, on: bool) -> Vec<Contender<K>> {
    if on {
        for p in peers::peers::<K>() {
            let build = p.build;
            v.push(Contender::new(p.name, "", move |r| Ok(build(r)?)));
        }
    }
    v
}

/// Applies `--only` and `--skip`.
fn select<K: Key>(v: Vec<Contender<K>>, a: &BenchArgs) -> Vec<Contender<K>> {
    v.into_iter()
        .filter(|c| a.only.is_empty() || a.only.contains(&c.name))
        .filter(|c| !a.skip.contains(&c.name))
        .collect()
}

pub(crate) fn run(a: &BenchArgs) -> Result<(), Error> {
    let core = a.core.unwrap_or_else(vfsr_cpu::default_bench_core);
    if let Some(c) = a.neighbor_core {
        crate::cacheload::check(c, &[core], a.neighbor_mib)?;
    }
    vfsr_cpu::pin(core)?;
    let t = Instant::now();
    let table = match &a.table {
        Some(p) => tables::load(p, false),
        None => tables::default_table(a.seed),
    }
    .map_err(Error::Table)?;
    eprintln!(
        "table: {} ({} IPv4, {} IPv6 routes), loaded in {:.2} s; pinned to core {core}",
        table.source,
        table.v4.len(),
        table.v6.len(),
        t.elapsed().as_secs_f64()
    );
    let p = Params {
        runs: a.runs.max(1),
        batch: a.batch.max(1),
        max_pass_s: a.max_pass_s,
    };
    let n = a.lookups.max(1);
    let uniform4 = traffic::uniform4(a.seed, n);
    let matched4 = traffic::matched(&table.v4, a.seed ^ 4, n);
    let matched6 = traffic::matched(&table.v6, a.seed ^ 6, n);

    if !a.no_peers {
        if let Err(e) = peers::dpdk_available() {
            eprintln!("DPDK peers: {e}");
        }
    }
    let neighbor = a
        .neighbor_core
        .map(|c| CacheLoad::start(c, &[core], a.neighbor_mib))
        .transpose()?;
    if let Some(c) = a.neighbor_core {
        eprintln!("cache neighbor on core {c}, {} MiB", a.neighbor_mib);
    }
    let mut rows: Vec<Row> = Vec::new();
    let mut skipped: Vec<Skipped> = Vec::new();
    let say = |s: &str| eprintln!("{s}");

    let mut c4 = own::<u32>();
    c4.push(Contender::new("dir24", "u32", |r| ok(Dir24::build(r, &()))));
    let c4 = select(with_peers(c4, !a.no_peers), a);
    let t4: Vec<(&str, &[u32])> = vec![("uniform4", &uniform4), ("matched4", &matched4)];
    lpm::run_family(&table.v4, &c4, &t4, &p, &mut rows, &mut skipped, say);

    let c6 = select(with_peers(own::<u128>(), !a.no_peers), a);
    let t6: Vec<(&str, &[u128])> = vec![("matched6", &matched6)];
    lpm::run_family(&table.v6, &c6, &t6, &p, &mut rows, &mut skipped, say);

    let sweep = if a.no_sweep {
        Vec::new()
    } else {
        lctrie_sweep(&table.v4, &uniform4, &p)?
    };
    let neighbor_desc = neighbor.as_ref().map(|nb| nb.describe());
    drop(neighbor);

    let machine = crate::machine::facts();
    let beside = crate::cacheload::summary(neighbor_desc.as_ref());
    println!("\nvfsr lpm bench: {} ; {} lookups per pattern, median of {} runs, batches of {}, core {core}{beside}; {}\n",
        table.source, n, p.runs, p.batch, crate::machine::summary(&machine));
    print!("{}", lpm::render_table(&rows));
    for s in &skipped {
        println!("skipped {} ({}): {}", s.backend, s.family, s.reason);
    }
    let checks = lpm::checks(&rows);
    if !checks.is_empty() {
        println!("\ntargets (medians of the same run):");
        print!("{}", vfsr_bench::check::render(&checks));
    }
    if !sweep.is_empty() {
        println!("\nLC-trie fill-factor sweep (IPv4, uniform4 traffic, as in Asama's Linux LC-trie talk):\n");
        print!("{}", lpm::render_sweep(&sweep));
    }
    if let Some(path) = &a.json {
        let doc = json!({
            "machine": machine,
            "cpu": machine["cpu"],
            "table": {"source": table.source, "v4_routes": table.v4.len(), "v6_routes": table.v6.len()},
            "params": {"lookups": n, "runs": p.runs, "batch": p.batch, "max_pass_s": p.max_pass_s, "core": core, "seed": a.seed, "neighbor": neighbor_desc},
            "results": rows,
            "skipped": skipped,
            "targets": checks,
            "lctrie_sweep": sweep,
        });
        crate::jsonfile::write(path, &doc)?;
    }
    Ok(())
}

/// The fill-factor experiment of the Linux LC-trie talk (Asama, "Linux NAPI & MultiQueue +
/// routing table"): LC-trie lookup rate, node count and memory for each inflate
/// threshold, from "always compress" (0) to "never" (a Patricia trie).
fn lctrie_sweep<K: Key>(
    routes: &[Route<K>],
    addrs: &[K],
    p: &Params,
) -> Result<Vec<SweepRow>, Error> {
    let mut out = Vec::new();
    let mut buf = vec![0; addrs.len()];
    for name in ["0", "20", "40", "default", "60", "80", "100", "never"] {
        let cfg: LcConfig = name.parse()?;
        let t = Instant::now();
        let e = LcTrie::build(routes, &cfg).map_err(|err| Error::Sweep { name, err })?;
        let build_s = t.elapsed().as_secs_f64();
        let n = lpm::budget(&e, addrs, p);
        let m = lpm::time_bulk(&e, &addrs[..n], &mut buf[..n], p);
        let label = if name == "default" { "50" } else { name };
        // The kernel's default keeps the root larger (30 %); the others use one threshold.
        let root = if name == "default" { "30" } else { name };
        eprintln!("lctrie sweep {label:>7}: {:>8.1} Mlps", m.median);
        out.push(SweepRow {
            threshold: label.to_string(),
            root_threshold: root.to_string(),
            mlps: m.median,
            mlps_min: m.min,
            mlps_max: m.max,
            nodes: e.node_count(),
            bytes: e.memory_bytes(),
            build_s,
        });
    }
    Ok(out)
}
