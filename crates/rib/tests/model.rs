//! The RIB against a plain model: random sequences of add / replace / withdraw from several
//! sources; after every step the drained change log, applied to a plain map, equals the FIB,
//! each prefix's FIB value equals a naive best-path recomputation, and every reference count
//! equals the references the routes, prefixes and groups hold.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use vfsr_lpm::{Key, NextHop, Prefix};
use vfsr_rib::{Forward, Rib, RibFamily, RibRoute, Source};

const SOURCES: [Source; 3] = [Source::Static, Source::Fpm, Source::Kernel];

#[derive(Clone, Debug)]
enum Op {
    Add {
        p: usize,
        s: usize,
        f: usize,
        metric: u32,
        distance: Option<u8>,
    },
    Replace {
        p: usize,
        s: usize,
        routes: Vec<(usize, u32)>,
    },
    Withdraw {
        p: usize,
        s: usize,
    },
    WithdrawRoute {
        p: usize,
        s: usize,
        f: usize,
    },
    WithdrawNexthop {
        s: usize,
        f: usize,
    },
    ReleaseQuarantine,
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..6usize;
    let s = 0..SOURCES.len();
    let f = 0..6usize;
    prop_oneof![
        4 => (p.clone(), s.clone(), f.clone(), 0..3u32, prop::option::of(0..3u8)).prop_map(
            |(p, s, f, metric, distance)| Op::Add { p, s, f, metric, distance }
        ),
        3 => (p.clone(), s.clone(), prop::collection::vec((f.clone(), 0..2u32), 0..4))
            .prop_map(|(p, s, routes)| Op::Replace { p, s, routes }),
        2 => (p.clone(), s.clone()).prop_map(|(p, s)| Op::Withdraw { p, s }),
        1 => (p, s.clone(), f.clone()).prop_map(|(p, s, f)| Op::WithdrawRoute { p, s, f }),
        1 => (s, f).prop_map(|(s, f)| Op::WithdrawNexthop { s, f }),
        1 => Just(Op::ReleaseQuarantine),
    ]
}

/// prefix → (source, next hop) → (distance, metric)
type Model<K> = BTreeMap<Prefix<K>, BTreeMap<(Source, Forward), (u8, u32)>>;

fn best<K: Key>(model: &Model<K>, p: &Prefix<K>) -> BTreeSet<Forward> {
    let Some(routes) = model.get(p) else {
        return BTreeSet::new();
    };
    let Some(min) = routes.values().min() else {
        return BTreeSet::new();
    };
    routes
        .iter()
        .filter(|(_, v)| *v == min)
        .map(|((_, f), _)| f.clone())
        .collect()
}

fn resolve(rib: &Rib, index: NextHop) -> BTreeSet<Forward> {
    if index == 0 {
        return BTreeSet::new();
    }
    let nh = rib.nexthops();
    let e = nh.get(nh.id_of_index(index).unwrap()).unwrap();
    match &e.forward {
        Forward::Group { members, .. } => members
            .iter()
            .map(|&m| resolve(rib, m).into_iter().next().unwrap())
            .collect(),
        f => [f.clone()].into(),
    }
}

fn check<K: RibFamily>(
    rib: &mut Rib,
    model: &Model<K>,
    prefixes: &[Prefix<K>],
    fib: &mut BTreeMap<Prefix<K>, NextHop>,
) {
    for (p, v) in rib.drain_fib_changes::<K>() {
        if v == 0 {
            fib.remove(&p);
        } else {
            fib.insert(p, v);
        }
    }
    let routes = rib.fib_routes::<K>();
    let got: BTreeMap<Prefix<K>, NextHop> = routes.iter().map(|r| (r.prefix, r.nexthop)).collect();
    assert_eq!(&got, fib, "change log applied to a map equals the FIB");
    assert_eq!(routes.len(), got.len());
    // The tallies kept as routes come and go equal a count.
    let family = K::family(rib);
    assert_eq!(family.active_prefixes(), fib.len(), "active prefixes");
    let mut by_source = [0usize; Source::COUNT];
    for routes in model.values() {
        for (source, _) in routes.keys() {
            by_source[source.index()] += 1;
        }
    }
    assert_eq!(family.routes_by_source(), by_source, "routes by source");
    for p in prefixes {
        assert_eq!(
            resolve(rib, rib.fib_value(p)),
            best(model, p),
            "best path of {p:?}"
        );
        let stored: BTreeMap<(Source, Forward), (u8, u32)> = rib
            .routes(p)
            .into_iter()
            .map(|r| ((r.source, r.nexthop), (r.distance, r.metric)))
            .collect();
        assert_eq!(Some(&stored).filter(|m| !m.is_empty()), model.get(p));
    }
    // Reference counts: one per route, one per FIB value, one per group member.
    let nh = rib.nexthops();
    let mut want: BTreeMap<u32, u64> = BTreeMap::new();
    for p in prefixes {
        for r in rib.routes(p) {
            *want
                .entry(nh.lookup(&r.nexthop).unwrap().index)
                .or_default() += 1;
        }
        let v = rib.fib_value(p);
        if v != 0 {
            *want.entry(v).or_default() += 1;
        }
    }
    for (id, e, _) in nh.iter() {
        if let Forward::Group { members, .. } = &e.forward {
            for m in members.iter() {
                *want.entry(*m).or_default() += 1;
            }
            let _ = id;
        }
    }
    let got: BTreeMap<u32, u64> = nh.iter().map(|(id, _, refs)| (id.index, refs)).collect();
    assert_eq!(got, want, "reference counts");
}

fn run<K: RibFamily>(ops: &[Op], prefixes: &[Prefix<K>], fwds: &[Forward]) {
    let mut rib = Rib::with_max_nexthops(64);
    let mut model: Model<K> = BTreeMap::new();
    let mut fib = BTreeMap::new();
    for op in ops {
        match op {
            Op::Add {
                p,
                s,
                f,
                metric,
                distance,
            } => {
                let (p, s, f) = (prefixes[*p], SOURCES[*s], fwds[*f].clone());
                let mut r = RibRoute::new(s, f.clone()).with_metric(*metric);
                if let Some(d) = distance {
                    r = r.with_distance(*d);
                }
                rib.add(p, &r).unwrap();
                model
                    .entry(p)
                    .or_default()
                    .insert((s, f), (r.distance, r.metric));
            }
            Op::Replace { p, s, routes } => {
                let (p, s) = (prefixes[*p], SOURCES[*s]);
                let rs: Vec<RibRoute> = routes
                    .iter()
                    .map(|(f, m)| RibRoute::new(s, fwds[*f].clone()).with_metric(*m))
                    .collect();
                rib.replace(p, s, &rs).unwrap();
                let m = model.entry(p).or_default();
                m.retain(|(src, _), _| *src != s);
                for r in rs {
                    m.insert((s, r.nexthop), (r.distance, r.metric));
                }
            }
            Op::Withdraw { p, s } => {
                let (p, s) = (prefixes[*p], SOURCES[*s]);
                let n = rib.withdraw(p, s);
                let m = model.entry(p).or_default();
                let before = m.len();
                m.retain(|(src, _), _| *src != s);
                assert_eq!(n, before - m.len());
            }
            Op::WithdrawRoute { p, s, f } => {
                let (p, s, f) = (prefixes[*p], SOURCES[*s], fwds[*f].clone());
                let had = rib.withdraw_route(p, s, &f);
                let m = model.entry(p).or_default();
                assert_eq!(had, m.remove(&(s, f)).is_some());
            }
            Op::WithdrawNexthop { s, f } => {
                let (s, f) = (SOURCES[*s], fwds[*f].clone());
                let n = rib.withdraw_nexthop(s, &f);
                let mut want = 0;
                for m in model.values_mut() {
                    if m.remove(&(s, f.clone())).is_some() {
                        want += 1;
                    }
                }
                assert_eq!(n, want);
            }
            Op::ReleaseQuarantine => {
                check(&mut rib, &model, prefixes, &mut fib);
                rib.release_quarantine();
            }
        }
        model.retain(|_, m| !m.is_empty());
        check(&mut rib, &model, prefixes, &mut fib);
    }
    // Everything withdrawn: no reference left, every index free after the quarantine.
    for p in prefixes {
        for s in SOURCES {
            rib.withdraw(*p, s);
        }
    }
    model.clear();
    check(&mut rib, &model, prefixes, &mut fib);
    assert!(fib.is_empty());
    assert_eq!(rib.nexthops().live(), 0);
    rib.release_quarantine();
    assert_eq!(rib.nexthops().quarantined(), 0);
    assert_eq!(rib.nexthops().available(), 64);
    assert!(rib.nexthop_snapshot().is_empty());
}

fn v4(a: [u8; 4], len: u8) -> Prefix<u32> {
    Prefix::new(u32::from_be_bytes(a), len).unwrap()
}

fn gw(s: &str) -> Forward {
    Forward::Gateway {
        addr: s.parse().unwrap(),
        ifindex: None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn rib_matches_the_model_v4(ops in prop::collection::vec(op(), 1..60)) {
        let prefixes = [
            v4([0, 0, 0, 0], 0),
            v4([10, 0, 0, 0], 8),
            v4([10, 0, 0, 0], 16),
            v4([10, 1, 0, 0], 16),
            v4([11, 0, 0, 0], 8),
            v4([10, 0, 0, 0], 32),
        ];
        let fwds = [
            gw("192.0.2.1"),
            gw("192.0.2.2"),
            gw("192.0.2.3"),
            Forward::Blackhole,
            Forward::Local,
            Forward::Opaque(3),
        ];
        run::<u32>(&ops, &prefixes, &fwds);
    }

    #[test]
    fn rib_matches_the_model_v6(ops in prop::collection::vec(op(), 1..60)) {
        let p = |s: &str, len| Prefix::new(u128::from(s.parse::<std::net::Ipv6Addr>().unwrap()), len).unwrap();
        let prefixes = [
            p("::", 0),
            p("2001:db8::", 32),
            p("2001:db8::", 48),
            p("2001:db8:1::", 48),
            p("ffff::", 16),
            p("2001:db8::1", 128),
        ];
        let fwds = [
            gw("2001:db8::1"),
            gw("2001:db8::2"),
            gw("fe80::1"),
            Forward::Unreachable,
            Forward::Connected { ifindex: 2 },
            Forward::Opaque(3),
        ];
        run::<u128>(&ops, &prefixes, &fwds);
    }
}
