//! `vfsr lpm bench`: every engine and every peer on the same table and the same traffic, in one
//! run, on one core.
//!
//! The harness builds every contender (timed), checks each one's answers against the first
//! contender's on the whole traffic array (a contender that disagrees is reported with its
//! mismatch count, not hidden), then times `runs` rounds in which every contender makes one pass
//! of bulk lookups over every pattern, in batches of `batch` addresses, and reports the median,
//! minimum and maximum lookups per second. Going round-robin spreads the machine's slow spells
//! over all contenders, which keeps the ratios (to the radix baseline and to DIR-24-8, both
//! measured in the same rounds) fair on a noisy host.

use crate::check::Check;
use crate::peers::PeerError;
use crate::stats::Stats;
use serde::Serialize;
use std::time::Instant;
use vfsr_lpm::poptrie::Vector;
use vfsr_lpm::{Key, Lpm, NextHop, Route};

/// A structure under test: how to build it from a route list.
pub struct Contender<K: Key> {
    /// Report name (`poptrie`, `lctrie`, `rte_fib`...).
    pub name: String,
    /// Configuration shown next to the name (`s=18`, `fill=50/30`...).
    pub variant: String,
    /// Builds the structure; an error skips the contender with its reason.
    pub build: BuildFn<K>,
}

/// A contender's constructor.
pub type BuildFn<K> = Box<dyn Fn(&[Route<K>]) -> Result<Box<dyn Lpm<K>>, ContenderError>>;

/// Why a contender could not be built (the run skips it and reports the text).
#[derive(Debug, thiserror::Error)]
pub enum ContenderError {
    /// One of vfsr's engines refused the routes.
    #[error(transparent)]
    Engine(#[from] vfsr_lpm::BuildError),
    /// A peer could not run here or refused the routes.
    #[error(transparent)]
    Peer(#[from] PeerError),
}

impl<K: Key> Contender<K> {
    pub fn new(
        name: impl Into<String>,
        variant: impl Into<String>,
        build: impl Fn(&[Route<K>]) -> Result<Box<dyn Lpm<K>>, ContenderError> + 'static,
    ) -> Self {
        Contender {
            name: name.into(),
            variant: variant.into(),
            build: Box::new(build),
        }
    }
}

/// Timing parameters.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Timed passes over the traffic array (the median is reported).
    pub runs: usize,
    /// Addresses per `lookup_bulk` call.
    pub batch: usize,
    /// Longest a timed pass may take: a slow contender is timed on a prefix of the traffic
    /// (never under [`MIN_LOOKUPS`] addresses) so that the whole run stays bounded.
    pub max_pass_s: f64,
}

/// Fewest addresses a contender is timed on.
pub const MIN_LOOKUPS: usize = 1 << 16;

impl Default for Params {
    fn default() -> Self {
        Params {
            runs: 7,
            batch: 256,
            max_pass_s: 1.0,
        }
    }
}

/// Lookups per second in millions.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Mlps {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// One contender on one traffic pattern.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub backend: String,
    pub variant: String,
    pub family: String,
    pub traffic: String,
    pub mlps: Mlps,
    pub ns_per_lookup: f64,
    pub build_s: f64,
    pub bytes: usize,
    pub bytes_per_route: f64,
    pub routes: usize,
    pub lookups: usize,
    /// Answers that differ from the reference contender's (0 for a correct engine).
    pub mismatches: usize,
    pub ratio_to_radix: Option<f64>,
    pub ratio_to_dir24: Option<f64>,
}

/// A contender that could not be measured, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    pub backend: String,
    pub family: String,
    pub reason: String,
}

/// How many of `addrs` a pass can cover within `p.max_pass_s`, from one untimed-for-the-report
/// pass over the first [`MIN_LOOKUPS`] addresses.
pub fn budget<K: Key>(e: &dyn Lpm<K>, addrs: &[K], p: &Params) -> usize {
    let probe = addrs.len().min(MIN_LOOKUPS);
    let mut out = vec![0 as NextHop; probe];
    let t = Instant::now();
    for (a, o) in addrs[..probe]
        .chunks(p.batch.max(1))
        .zip(out.chunks_mut(p.batch.max(1)))
    {
        e.lookup_bulk(a, o);
    }
    let per_lookup = t.elapsed().as_secs_f64() / probe.max(1) as f64;
    let fit = (p.max_pass_s / per_lookup.max(1e-12)) as usize;
    fit.clamp(probe, addrs.len())
}

/// Times `runs` passes of bulk lookups over `addrs`; returns Mlps statistics and fills `out`.
pub fn time_bulk<K: Key>(e: &dyn Lpm<K>, addrs: &[K], out: &mut [NextHop], p: &Params) -> Mlps {
    // One untimed pass warms caches and TLBs the way a running router has them warm.
    bulk_pass(e, addrs, out, p.batch);
    let mut rates = Vec::with_capacity(p.runs);
    for _ in 0..p.runs.max(1) {
        let t = Instant::now();
        bulk_pass(e, addrs, out, p.batch);
        let s = t.elapsed().as_secs_f64();
        std::hint::black_box(&out);
        rates.push(addrs.len() as f64 / s.max(1e-9) / 1e6);
    }
    let s = Stats::of(&rates);
    Mlps {
        median: s.median,
        min: s.min,
        max: s.max,
    }
}

/// Measures every contender on every traffic pattern of one family. The first contender that
/// builds is the reference for the answer check.
///
/// All contenders are built first; then the timed passes go round-robin (one pass of each
/// contender and pattern per round), so that a slow spell of the machine falls on all of them
/// alike and the ratios stay fair.
pub fn run_family<K: Key>(
    routes: &[Route<K>],
    contenders: &[Contender<K>],
    traffic: &[(&str, &[K])],
    p: &Params,
    rows: &mut Vec<Row>,
    skipped: &mut Vec<Skipped>,
    mut progress: impl FnMut(&str),
) {
    struct Built<'c, K: Key> {
        c: &'c Contender<K>,
        e: Box<dyn Lpm<K>>,
        build_s: f64,
        /// Per pattern: addresses timed, answer mismatches, rates of the passes so far.
        per: Vec<(usize, usize, Vec<f64>)>,
    }
    let mut built: Vec<Built<'_, K>> = Vec::new();
    for c in contenders {
        let t = Instant::now();
        match (c.build)(routes) {
            Ok(e) => {
                let build_s = t.elapsed().as_secs_f64();
                progress(&format!(
                    "{:>16} {:<12} {} built in {:.3} s",
                    c.name,
                    c.variant,
                    K::FAMILY,
                    build_s
                ));
                built.push(Built {
                    c,
                    e,
                    build_s,
                    per: Vec::new(),
                });
            }
            Err(e) => {
                progress(&format!("{} ({}): skipped: {e}", c.name, K::FAMILY));
                skipped.push(Skipped {
                    backend: c.name.clone(),
                    family: K::FAMILY.into(),
                    reason: e.to_string(),
                });
            }
        }
    }
    // An untimed pass per contender and pattern: sizes the pass, warms the structure, and
    // gives the answers to check against the reference.
    let mut reference: Vec<Vec<NextHop>> = Vec::new();
    for b in &mut built {
        for (ti, (_, addrs)) in traffic.iter().enumerate() {
            let n = budget(b.e.as_ref(), addrs, p);
            let mut out = vec![0 as NextHop; n];
            bulk_pass(b.e.as_ref(), &addrs[..n], &mut out, p.batch);
            let mismatches = match reference.get(ti) {
                Some(r) => r.iter().zip(&out).filter(|(a, b)| a != b).count(),
                None => {
                    reference.push(out);
                    0
                }
            };
            b.per.push((n, mismatches, Vec::with_capacity(p.runs)));
        }
    }
    let mut out = vec![0 as NextHop; traffic.iter().map(|t| t.1.len()).max().unwrap_or(0)];
    for _ in 0..p.runs.max(1) {
        for b in &mut built {
            for ((_, addrs), (n, _, rates)) in traffic.iter().zip(b.per.iter_mut()) {
                let t = Instant::now();
                bulk_pass(b.e.as_ref(), &addrs[..*n], &mut out[..*n], p.batch);
                let secs = t.elapsed().as_secs_f64();
                std::hint::black_box(&out);
                rates.push(*n as f64 / secs.max(1e-9) / 1e6);
            }
        }
    }
    let first_row = rows.len();
    for b in &built {
        let bytes = b.e.memory_bytes();
        for ((tname, _), (n, mismatches, rates)) in traffic.iter().zip(&b.per) {
            let st = Stats::of(rates);
            let mlps = Mlps {
                median: st.median,
                min: st.min,
                max: st.max,
            };
            progress(&format!(
                "{:>16} {:<12} {} {:<9} {:>8.1} Mlps",
                b.c.name,
                b.c.variant,
                K::FAMILY,
                tname,
                mlps.median
            ));
            rows.push(Row {
                backend: b.c.name.clone(),
                variant: b.c.variant.clone(),
                family: K::FAMILY.into(),
                traffic: (*tname).into(),
                mlps,
                ns_per_lookup: 1e3 / mlps.median.max(1e-9),
                build_s: b.build_s,
                bytes,
                bytes_per_route: bytes as f64 / routes.len().max(1) as f64,
                routes: routes.len(),
                lookups: *n,
                mismatches: *mismatches,
                ratio_to_radix: None,
                ratio_to_dir24: None,
            });
        }
    }
    add_ratios(&mut rows[first_row..]);
}

/// One pass of bulk lookups over `addrs` in batches of `batch`.
fn bulk_pass<K: Key>(e: &dyn Lpm<K>, addrs: &[K], out: &mut [NextHop], batch: usize) {
    let batch = batch.max(1);
    for (a, o) in addrs.chunks(batch).zip(out.chunks_mut(batch)) {
        e.lookup_bulk(a, o);
    }
}

/// Fills each row's ratios to the radix and DIR-24-8 rows of the same family and traffic.
fn add_ratios(rows: &mut [Row]) {
    let base = |rows: &[Row], name: &str, r: &Row| {
        rows.iter()
            .find(|b| b.backend == name && b.traffic == r.traffic && b.family == r.family)
            .map(|b| b.mlps.median)
    };
    let ratios: Vec<(Option<f64>, Option<f64>)> = rows
        .iter()
        .map(|r| {
            let radix = base(rows, "radix", r).map(|b| r.mlps.median / b.max(1e-9));
            let dir24 = base(rows, "dir24", r).map(|b| r.mlps.median / b.max(1e-9));
            (radix, dir24)
        })
        .collect();
    for (r, (a, b)) in rows.iter_mut().zip(ratios) {
        r.ratio_to_radix = a;
        r.ratio_to_dir24 = b;
    }
}

/// One threshold of the LC-trie fill-factor sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SweepRow {
    /// Inflate threshold in percent ("never": a Patricia trie).
    pub threshold: String,
    /// Inflate threshold of the root node.
    pub root_threshold: String,
    pub mlps: f64,
    pub mlps_min: f64,
    pub mlps_max: f64,
    pub nodes: usize,
    pub bytes: usize,
    pub build_s: f64,
}

/// Formats rows as an aligned text table.
pub fn render_table(rows: &[Row]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:<16} {:<12} {:<3} {:<9} {:>8} {:>8} {:>8} {:>7} {:>8} {:>10} {:>7} {:>7} {:>7} {:>5}\n",
        "backend",
        "variant",
        "fam",
        "traffic",
        "Mlps",
        "min",
        "max",
        "ns/lkp",
        "build s",
        "MiB",
        "B/route",
        "x radix",
        "x dir24",
        "wrong"
    ));
    for r in rows {
        let ratio = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
        s.push_str(&format!(
            "{:<16} {:<12} {:<3} {:<9} {:>8.1} {:>8.1} {:>8.1} {:>7.2} {:>8.3} {:>10.2} {:>7.1} {:>7} {:>7} {:>5}\n",
            r.backend,
            r.variant,
            r.family,
            r.traffic,
            r.mlps.median,
            r.mlps.min,
            r.mlps.max,
            r.ns_per_lookup,
            r.build_s,
            r.bytes as f64 / (1024.0 * 1024.0),
            r.bytes_per_route,
            ratio(r.ratio_to_radix),
            ratio(r.ratio_to_dir24),
            r.mismatches
        ));
    }
    s
}

/// Formats the sweep as an aligned text table.
pub fn render_sweep(rows: &[SweepRow]) -> String {
    let mut s = format!(
        "{:<10} {:<5} {:>8} {:>8} {:>8} {:>10} {:>10} {:>8}\n",
        "threshold", "root", "Mlps", "min", "max", "nodes", "MiB", "build s"
    );
    for r in rows {
        s.push_str(&format!(
            "{:<10} {:<5} {:>8.1} {:>8.1} {:>8.1} {:>10} {:>10.2} {:>8.3}\n",
            r.threshold,
            r.root_threshold,
            r.mlps,
            r.mlps_min,
            r.mlps_max,
            r.nodes,
            r.bytes as f64 / (1024.0 * 1024.0),
            r.build_s
        ));
    }
    s
}

/// Poptrie's lookup rate, at least, as a multiple of the best DPDK `rte_fib` variant in the
/// same run, on every pattern.
pub const PEER_RATIO: f64 = 1.5;
/// Poptrie's IPv4 memory, at most, in MiB.
pub const MAX_MIB: f64 = 4.4;
/// Poptrie's IPv4 build time, at most, in seconds.
pub const MAX_BUILD_S: f64 = 0.3;

/// The lookup targets over a run's rows: on each pattern, Poptrie as this CPU runs it
/// (`poptrie`) against the fastest `rte_fib`/`rte_fib6` variant measured, and Poptrie's
/// portable path (`poptrie_scalar`) against DPDK's scalar lookup, the pair a CPU without
/// AVX-512 runs; then Poptrie's IPv4 memory and build time. The AVX2 row (`poptrie_avx2`) is
/// measured for information and checked against nothing: no CPU runs it unless told to
/// ([`vfsr_lpm::poptrie::Vector::best`]).
/// Where a family's default is the portable path on a CPU with AVX-512 (IPv4 on AMD Zen 5),
/// the bench measures it once, as `poptrie` with a variant ending in `,portable`, and that
/// row stands for the portable path. Rows that were not measured give no check.
pub fn checks(rows: &[Row]) -> Vec<Check> {
    let find = |backend: &str, traffic: &str| {
        rows.iter()
            .find(|r| r.backend == backend && r.traffic == traffic && r.mlps.median > 0.0)
    };
    let mut out = Vec::new();
    for traffic in ["uniform4", "matched4", "matched6"] {
        let (scalar, avx512) = if traffic == "matched6" {
            ("rte_fib6", "rte_fib6_avx512")
        } else {
            ("rte_fib", "rte_fib_avx512")
        };
        let best = [scalar, avx512]
            .iter()
            .filter_map(|b| find(b, traffic))
            .max_by(|a, b| a.mlps.median.total_cmp(&b.mlps.median));
        if let (Some(p), Some(peer)) = (find("poptrie", traffic), best) {
            out.push(Check::at_least(
                format!("{traffic}: poptrie / best rte_fib ({})", peer.backend),
                p.mlps.median / peer.mlps.median,
                PEER_RATIO,
            ));
        }
        if let Some(peer) = find(scalar, traffic) {
            // Without an AVX-512 peer the check above is already this pair.
            let portable = format!(",{}", Vector::Portable.name());
            let default_portable = find("poptrie", traffic).filter(|p| {
                p.variant.ends_with(&portable)
                    && find("poptrie_scalar", traffic).is_none()
                    && find(avx512, traffic).is_some()
            });
            let own = find("poptrie_scalar", traffic)
                .map(|p| ("poptrie_scalar", p))
                .into_iter()
                .chain(default_portable.map(|p| ("poptrie (portable)", p)));
            for (own, p) in own {
                out.push(Check::at_least(
                    format!("{traffic}: {own} / {scalar} (no AVX-512)"),
                    p.mlps.median / peer.mlps.median,
                    PEER_RATIO,
                ));
            }
        }
    }
    if let Some(p) = rows
        .iter()
        .find(|r| r.backend == "poptrie" && r.family == "v4")
    {
        out.push(Check::at_most(
            "poptrie IPv4 memory, MiB".into(),
            p.bytes as f64 / (1024.0 * 1024.0),
            MAX_MIB,
        ));
        out.push(Check::at_most(
            "poptrie IPv4 build, s".into(),
            p.build_s,
            MAX_BUILD_S,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfsr_lpm::poptrie::{Poptrie, PoptrieConfig};
    use vfsr_lpm::{LpmBuild, Prefix};

    fn row(backend: &str, traffic: &str, mlps: f64) -> Row {
        Row {
            backend: backend.into(),
            variant: String::new(),
            family: if traffic == "matched6" { "v6" } else { "v4" }.into(),
            traffic: traffic.into(),
            mlps: Mlps {
                median: mlps,
                min: mlps,
                max: mlps,
            },
            ns_per_lookup: 1e3 / mlps,
            build_s: 0.05,
            bytes: 4 << 20,
            bytes_per_route: 4.0,
            routes: 1,
            lookups: 1,
            mismatches: 0,
            ratio_to_radix: None,
            ratio_to_dir24: None,
        }
    }

    #[test]
    fn checks_take_the_best_peer_and_the_scalar_pair() {
        let rows = vec![
            row("poptrie", "uniform4", 300.0),
            row("poptrie_scalar", "uniform4", 240.0),
            row("poptrie_avx2", "uniform4", 120.0),
            row("rte_fib", "uniform4", 100.0),
            row("rte_fib_avx512", "uniform4", 150.0),
            row("poptrie", "matched4", 300.0),
            row("rte_fib", "matched4", 250.0),
            row("poptrie", "matched6", 90.0),
        ];
        let c = checks(&rows);
        let get = |what: &str| c.iter().find(|c| c.what == what).cloned();
        let best = get("uniform4: poptrie / best rte_fib (rte_fib_avx512)").unwrap();
        assert_eq!((best.value, best.met), (2.0, true));
        let scalar = get("uniform4: poptrie_scalar / rte_fib (no AVX-512)").unwrap();
        assert!((scalar.value - 2.4).abs() < 1e-9 && scalar.met);
        let m4 = get("matched4: poptrie / best rte_fib (rte_fib)").unwrap();
        assert!((m4.value - 1.2).abs() < 1e-9 && !m4.met);
        // No peer measured on matched6: no check; memory and build from the IPv4 row.
        assert!(!c.iter().any(|c| c.what.starts_with("matched6")));
        // The AVX2 row, which no CPU runs by default, is not a target.
        assert!(!c.iter().any(|c| c.what.contains("avx2")));
        let mem = get("poptrie IPv4 memory, MiB").unwrap();
        assert_eq!((mem.value, mem.met, mem.at_most), (4.0, true, true));
        assert!(get("poptrie IPv4 build, s").unwrap().met);
        assert_eq!(c.len(), 5);
        let text = crate::check::render(&c);
        assert!(text.contains("NOT met") && text.contains("target >= 1.5"));
    }

    #[test]
    fn a_portable_default_row_stands_for_the_portable_path() {
        let portable = |traffic: &str, mlps: f64| {
            let mut r = row("poptrie", traffic, mlps);
            r.variant = "s=18,portable".into();
            r
        };
        let rows = vec![
            portable("uniform4", 300.0),
            row("rte_fib", "uniform4", 100.0),
            row("rte_fib_avx512", "uniform4", 150.0),
            // A run with its own portable row keeps reading that one.
            portable("matched4", 300.0),
            row("poptrie_scalar", "matched4", 200.0),
            row("rte_fib", "matched4", 100.0),
            // A vector default is not the portable path.
            row("poptrie", "matched6", 90.0),
            row("rte_fib6", "matched6", 30.0),
        ];
        let c = checks(&rows);
        let get = |what: &str| c.iter().find(|c| c.what == what).map(|c| c.value);
        assert_eq!(
            get("uniform4: poptrie (portable) / rte_fib (no AVX-512)"),
            Some(3.0)
        );
        assert_eq!(
            get("matched4: poptrie_scalar / rte_fib (no AVX-512)"),
            Some(2.0)
        );
        assert_eq!(
            get("matched4: poptrie (portable) / rte_fib (no AVX-512)"),
            None
        );
        assert!(!c
            .iter()
            .any(|c| c.what.starts_with("matched6: poptrie (portable)")));
        assert_eq!(
            get("matched6: poptrie / best rte_fib (rte_fib6)"),
            Some(3.0)
        );
        // Without an AVX-512 peer (a CPU without AVX-512) the portable default is already the
        // pair the first check compares: it is not checked twice.
        let c = checks(&[
            portable("uniform4", 300.0),
            row("rte_fib", "uniform4", 100.0),
        ]);
        let names: Vec<&str> = c.iter().map(|c| c.what.as_str()).collect();
        assert!(
            names.contains(&"uniform4: poptrie / best rte_fib (rte_fib)"),
            "{names:?}"
        );
        assert!(!names.iter().any(|n| n.contains("(portable)")), "{names:?}");
    }

    #[test]
    fn harness_counts_mismatches_and_ratios() {
        let routes = vec![
            Route::new(Prefix::<u32>::new_masked(0, 1), 1),
            Route::new(Prefix::<u32>::new_masked(0x8000_0000, 1), 2),
        ];
        struct Wrong;
        impl Lpm<u32> for Wrong {
            fn lookup(&self, _: u32) -> NextHop {
                7
            }
            fn memory_bytes(&self) -> usize {
                1
            }
            fn name(&self) -> &'static str {
                "wrong"
            }
        }
        let cs = vec![
            Contender::new("radix", "", |r: &[Route<u32>]| {
                Ok(Box::new(Poptrie::build(r, &PoptrieConfig::default())?) as Box<dyn Lpm<u32>>)
            }),
            Contender::new("wrong", "", |_: &[Route<u32>]| {
                Ok(Box::new(Wrong) as Box<dyn Lpm<u32>>)
            }),
            Contender::new("broken", "", |_: &[Route<u32>]| {
                Err(PeerError::unavailable("broken", "no").into())
            }),
        ];
        let addrs: Vec<u32> = (0..1000u32).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
        let mut rows = Vec::new();
        let mut skipped = Vec::new();
        let p = Params {
            runs: 2,
            batch: 64,
            max_pass_s: 1.0,
        };
        run_family(
            &routes,
            &cs,
            &[("t", &addrs)],
            &p,
            &mut rows,
            &mut skipped,
            |_| {},
        );
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].mismatches, 0);
        assert_eq!(rows[1].mismatches, 1000);
        assert_eq!(skipped.len(), 1);
        assert_eq!(skipped[0].reason, "broken: unavailable: no");
        assert!(rows[0]
            .ratio_to_radix
            .is_some_and(|r| (r - 1.0).abs() < 1e-9));
        assert!(rows[0].ratio_to_dir24.is_none());
        assert!(render_table(&rows).contains("wrong"));
    }
}
