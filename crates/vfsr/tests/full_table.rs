//! Every engine against the golden reference on the real 2024 full table (from ../shared/data)
//! with ten million addresses of each traffic pattern, bulk and single lookups.
//!
//! Skips, saying why, when the reference data is absent (a fresh clone without shared/).

/// Says why a test is skipped on the real stderr, past the test harness's output capture.
macro_rules! skip_note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use vfsr_lpm::dir24::Dir24;
use vfsr_lpm::golden::Golden;
use vfsr_lpm::lctrie::{LcConfig, LcTrie};
use vfsr_lpm::poptrie::{Poptrie, PoptrieConfig, Vector};
use vfsr_lpm::radix::Radix;
use vfsr_lpm::{Key, Lpm, LpmBuild, NextHop, Route};
use vfsr_table::{traffic, ReadOptions, Table};

const LOOKUPS: usize = 10_000_000;
/// Single lookups checked per engine and pattern (the bulk path sees all of them).
const SINGLE: usize = 1_000_000;

fn real_table() -> Option<Table> {
    let Some(path) = vfsr_table::real_table_path() else {
        skip_note!(
            "skipping: the reference table (../shared/data/tier1-2024-prefixes.txt.gz) is absent"
        );
        return None;
    };
    let (t, _) = vfsr_table::read_table_file(&path, &ReadOptions::default()).unwrap();
    Some(t)
}

/// Golden answers, computed on two threads (the golden table is slow by design).
fn golden_answers<K: Key>(g: &Golden<K>, addrs: &[K]) -> Vec<NextHop> {
    let mut out = vec![0; addrs.len()];
    let half = addrs.len() / 2;
    let (oa, ob) = out.split_at_mut(half);
    std::thread::scope(|s| {
        s.spawn(|| {
            for (o, a) in oa.iter_mut().zip(&addrs[..half]) {
                *o = g.lookup(*a);
            }
        });
        for (o, a) in ob.iter_mut().zip(&addrs[half..]) {
            *o = g.lookup(*a);
        }
    });
    out
}

fn check<K: Key>(name: &str, e: &dyn Lpm<K>, pattern: &str, addrs: &[K], want: &[NextHop]) {
    let mut got = vec![0; addrs.len()];
    for (a, o) in addrs.chunks(256).zip(got.chunks_mut(256)) {
        e.lookup_bulk(a, o);
    }
    let wrong: Vec<usize> = (0..addrs.len())
        .filter(|&i| got[i] != want[i])
        .take(5)
        .collect();
    assert!(
        wrong.is_empty(),
        "{name} bulk on {pattern}: first wrong answers at {:?}",
        wrong
            .iter()
            .map(|&i| (addrs[i], got[i], want[i]))
            .collect::<Vec<_>>()
    );
    for i in 0..SINGLE.min(addrs.len()) {
        assert_eq!(
            e.lookup(addrs[i]),
            want[i],
            "{name} single on {pattern} at {:?}",
            addrs[i]
        );
    }
    println!(
        "{name:<22} {pattern:<9} {} lookups agree with golden",
        addrs.len()
    );
}

fn engines<K: Key>(routes: &[Route<K>]) -> Vec<(String, Box<dyn Lpm<K>>)> {
    let mut v: Vec<(String, Box<dyn Lpm<K>>)> = Vec::new();
    let configs = [
        PoptrieConfig::flat(0),
        PoptrieConfig::flat(16),
        PoptrieConfig::flat(18),
        PoptrieConfig::for_family::<K>(),
        PoptrieConfig {
            direct_bits: 24,
            top_bits: 12,
        },
    ];
    for cfg in configs {
        let ds = format!("{}/{}", cfg.direct_bits, cfg.top_bits);
        let p = Poptrie::build(routes, &cfg).unwrap();
        let mut scalar = p.clone();
        scalar.set_simd(false);
        let mut avx2 = p.clone();
        if avx2.set_vector(Vector::Avx2) == Vector::Avx2 {
            v.push((format!("poptrie s={ds} avx2"), Box::new(avx2)));
        }
        v.push((format!("poptrie s={ds}"), Box::new(p)));
        v.push((format!("poptrie s={ds} scalar"), Box::new(scalar)));
    }
    for t in ["default", "never", "20"] {
        let e = LcTrie::build(routes, &t.parse::<LcConfig>().unwrap()).unwrap();
        v.push((format!("lctrie {t}"), Box::new(e)));
    }
    v.push(("radix".into(), Box::new(Radix::build(routes, &()).unwrap())));
    v
}

#[test]
fn ipv4_engines_agree_with_golden_on_the_real_table() {
    let Some(t) = real_table() else { return };
    assert!(t.v4.len() > 900_000);
    let golden = Golden::build(&t.v4, &()).unwrap();
    let mut es = engines(&t.v4);
    es.push(("dir24".into(), Box::new(Dir24::build(&t.v4, &()).unwrap())));
    for (pattern, addrs) in [
        ("uniform4", traffic::uniform4(11, LOOKUPS)),
        ("matched4", traffic::matched(&t.v4, 12, LOOKUPS)),
    ] {
        let want = golden_answers(&golden, &addrs);
        // The check is only as strong as the traffic: most answers must be real routes.
        let routed = want.iter().filter(|&&nh| nh != 0).count();
        assert!(
            routed > LOOKUPS / 2,
            "{pattern}: only {routed} addresses routed"
        );
        for (name, e) in &es {
            check(name, e.as_ref(), pattern, &addrs, &want);
        }
    }
}

#[test]
fn ipv6_engines_agree_with_golden_on_the_real_table() {
    let Some(t) = real_table() else { return };
    assert!(t.v6.len() > 150_000);
    let golden = Golden::build(&t.v6, &()).unwrap();
    let es = engines(&t.v6);
    for (pattern, addrs) in [
        ("matched6", traffic::matched(&t.v6, 13, LOOKUPS)),
        ("uniform6", traffic::uniform6(14, LOOKUPS)),
    ] {
        let want = golden_answers(&golden, &addrs);
        for (name, e) in &es {
            check(name, e.as_ref(), pattern, &addrs, &want);
        }
    }
}
