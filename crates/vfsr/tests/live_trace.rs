//! Every engine as a live FIB on the real full table, through the generated update trace
//! (withdraw and re-announce 100,000 routes, 100,000 next-hop changes, a session reset), with
//! batched publication: after every phase the published copy answers exactly as a fresh build
//! of the table, on every route's first and last address and a million matched addresses.
//!
//! Skips, saying why, when the reference data is absent (a fresh clone without shared/).

use vfsr_fib::LiveFib;
use vfsr_lpm::dir24::Dir24;
use vfsr_lpm::lctrie::{LcConfig, LcTrie};
use vfsr_lpm::poptrie::{Poptrie, PoptrieConfig};
use vfsr_lpm::radix::Radix;
use vfsr_lpm::{Key, LpmUpdate, NextHop, Route, RouteMap};
use vfsr_table::{trace, traffic, ReadOptions, Table};

fn real_table() -> Option<Table> {
    let Some(path) = vfsr_table::real_table_path() else {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "skipping: the reference table (../shared/data/tier1-2024-prefixes.txt.gz) is absent"
        );
        return None;
    };
    let (t, _) = vfsr_table::read_table_file(&path, &ReadOptions::default()).unwrap();
    Some(t)
}

/// Probe addresses: both ends of every route plus matched traffic.
fn probes<K: Key>(routes: &[Route<K>]) -> Vec<K> {
    let mut v = traffic::matched(routes, 11, 1 << 20);
    for r in routes {
        let a = r.prefix.addr().to_u128_left();
        let host = u128::MAX.checked_shr(r.prefix.len() as u32).unwrap_or(0);
        v.push(r.prefix.addr());
        v.push(K::from_u128_left(a | host));
    }
    v
}

fn run<K: Key, E: LpmUpdate<K> + Clone>(
    name: &str,
    routes: &[Route<K>],
    config: E::Config,
    per_phase: usize,
) where
    E::Config: Clone,
{
    let table = RouteMap::from_routes(routes).to_routes();
    let mut fib = LiveFib::<K, E>::new(&table, config.clone()).unwrap();
    let addrs = probes(&table);
    for phase in trace::trace(&table, per_phase, 3) {
        for (i, r) in phase.changes.iter().enumerate() {
            fib.set(r.prefix, r.nexthop).unwrap();
            // Batches of about a thousand changes, as the 1 ms bound gives at full speed.
            if i % 1024 == 1023 {
                fib.publish().unwrap();
            }
        }
        fib.publish().unwrap();
        let fresh = E::build(&fib.table().to_routes(), &config).unwrap();
        let snap = fib.reader().load();
        let (mut got, mut want) = (
            vec![0 as NextHop; addrs.len()],
            vec![0 as NextHop; addrs.len()],
        );
        snap.engine.lookup_bulk(&addrs, &mut got);
        fresh.lookup_bulk(&addrs, &mut want);
        let wrong = got.iter().zip(&want).filter(|(g, w)| g != w).count();
        assert_eq!(
            wrong,
            0,
            "{name} {}: {wrong} of {} addresses differ after '{}'",
            K::FAMILY,
            addrs.len(),
            phase.name
        );
    }
}

#[test]
fn poptrie_follows_the_trace() {
    let Some(t) = real_table() else { return };
    run::<u32, Poptrie<u32>>("poptrie", &t.v4, PoptrieConfig::default(), 100_000);
    run::<u128, Poptrie<u128>>("poptrie", &t.v6, PoptrieConfig::default(), 40_000);
}

#[test]
fn lctrie_follows_the_trace() {
    let Some(t) = real_table() else { return };
    run::<u32, LcTrie<u32>>("lctrie", &t.v4, LcConfig::default(), 100_000);
    run::<u128, LcTrie<u128>>("lctrie", &t.v6, LcConfig::default(), 40_000);
}

#[test]
fn radix_follows_the_trace() {
    let Some(t) = real_table() else { return };
    run::<u32, Radix<u32>>("radix", &t.v4, (), 100_000);
    run::<u128, Radix<u128>>("radix", &t.v6, (), 40_000);
}

#[test]
fn dir24_follows_the_trace() {
    let Some(t) = real_table() else { return };
    run::<u32, Dir24>("dir24", &t.v4, (), 100_000);
}
