//! Every engine against the golden reference on random tables, and bulk lookup against single
//! lookup, and shuffled builds against sorted builds.

use proptest::prelude::*;
use vfsr_lpm::dir24::Dir24;
use vfsr_lpm::golden::Golden;
use vfsr_lpm::lctrie::{LcConfig, LcTrie};
use vfsr_lpm::poptrie::{Poptrie, PoptrieConfig};
use vfsr_lpm::radix::Radix;
use vfsr_lpm::{Key, Lpm, LpmBuild, NextHop, Prefix, Route};

/// Lengths weighted towards the edges that break engines: /0, /1, stride boundaries, full width.
fn len_strategy(bits: u8) -> impl Strategy<Value = u8> {
    prop_oneof![
        3 => 0..=bits,
        1 => Just(0u8),
        1 => Just(1u8),
        1 => Just(bits),
        1 => Just(bits - 1),
        1 => (0u8..=bits / 6).prop_map(move |k| (k * 6).min(bits)),
        1 => (16u8..=24).prop_map(move |l| l.min(bits)),
    ]
}

/// Random routes, a share of them nested inside or adjacent to earlier ones, and addresses that
/// sit on prefix edges as well as random ones.
fn table<K: Key + Arbitrary>() -> impl Strategy<Value = (Vec<Route<K>>, Vec<K>)>
where
    K::Strategy: 'static,
{
    let route = (any::<K>(), len_strategy(K::BITS), 1u32..=300);
    (
        prop::collection::vec(route, 0..120),
        prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<K>()), 0..40),
        prop::collection::vec(any::<K>(), 0..200),
    )
        .prop_map(|(raw, derive, probes)| {
            let mut routes: Vec<Route<K>> = raw
                .into_iter()
                .map(|(a, l, nh)| Route::new(Prefix::new_masked(a, l), nh))
                .collect();
            // Nested and adjacent prefixes: derived from existing ones.
            for (ix, kind, bits) in derive {
                if routes.is_empty() {
                    break;
                }
                let base = routes[ix.index(routes.len())].prefix;
                let len = base.len();
                let p = match kind {
                    // A longer prefix inside it.
                    0 if len < K::BITS => {
                        let l = len + 1 + (bits.to_u128_left() as u8 % (K::BITS - len));
                        let inner = K::from_u128_left(
                            base.addr().to_u128_left() | (bits.to_u128_left() & (u128::MAX >> len)),
                        );
                        Prefix::new_masked(inner, l)
                    }
                    // Its sibling of the same length.
                    1 if len > 0 => {
                        let flip = 1u128 << (128 - len as u32);
                        Prefix::new_masked(
                            K::from_u128_left(base.addr().to_u128_left() ^ flip),
                            len,
                        )
                    }
                    // Its parent.
                    2 if len > 0 => Prefix::new_masked(base.addr(), len - 1),
                    _ => base,
                };
                routes.push(Route::new(p, 301 + routes.len() as u32));
            }
            let mut addrs = probes;
            for r in &routes {
                let a = r.prefix.addr().to_u128_left();
                let len = r.prefix.len();
                let last = if len >= 128 {
                    a
                } else {
                    a | (u128::MAX >> len)
                };
                for x in [
                    a,
                    last,
                    a.wrapping_sub(1 << (128 - K::BITS as u32)),
                    last.wrapping_add(1 << (128 - K::BITS as u32)),
                ] {
                    addrs.push(K::from_u128_left(x));
                }
            }
            (routes, addrs)
        })
}

fn check<K: Key, E: Lpm<K>>(e: &E, golden: &Golden<K>, addrs: &[K]) -> Result<(), TestCaseError> {
    let mut bulk = vec![0 as NextHop; addrs.len()];
    e.lookup_bulk(addrs, &mut bulk);
    for (i, &a) in addrs.iter().enumerate() {
        let want = golden.lookup(a);
        prop_assert_eq!(e.lookup(a), want, "{} single lookup of {:?}", e.name(), a);
        prop_assert_eq!(bulk[i], want, "{} bulk lookup of {:?}", e.name(), a);
    }
    Ok(())
}

/// Flat direct pointing of several widths, none, and two-level direct pointing.
fn poptrie_configs() -> Vec<PoptrieConfig> {
    let mut v: Vec<PoptrieConfig> = [0u8, 6, 16, 18].map(PoptrieConfig::flat).to_vec();
    for (direct_bits, top_bits) in [(24, 12), (16, 8), (18, 6), (7, 1)] {
        v.push(PoptrieConfig {
            direct_bits,
            top_bits,
        });
    }
    v
}

fn check_all<K: Key>(routes: &[Route<K>], addrs: &[K]) -> Result<Golden<K>, TestCaseError> {
    let golden = Golden::build(routes, &()).unwrap();
    for cfg in poptrie_configs() {
        let p = Poptrie::build(routes, &cfg).unwrap();
        check(&p, &golden, addrs)?;
    }
    for name in ["default", "never", "0", "20", "100"] {
        let cfg = name.parse::<LcConfig>().unwrap();
        check(&LcTrie::build(routes, &cfg).unwrap(), &golden, addrs)?;
    }
    check(&Radix::build(routes, &()).unwrap(), &golden, addrs)?;
    Ok(golden)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn v4_engines_match_golden((routes, addrs) in table::<u32>()) {
        let golden = check_all(&routes, &addrs)?;
        check(&Dir24::build(&routes, &()).unwrap(), &golden, &addrs)?;
    }

    #[test]
    fn v6_engines_match_golden((routes, addrs) in table::<u128>()) {
        check_all(&routes, &addrs)?;
    }

    #[test]
    fn shuffled_build_equals_sorted_build((routes, addrs) in table::<u32>(), seed in any::<u64>()) {
        let mut shuffled = routes.clone();
        // Reverse-then-rotate keeps the relative order of repeated prefixes only when the
        // table has none, so deduplicate first: the last route per prefix wins in both.
        let canon = vfsr_lpm::canonicalize(&routes);
        shuffled.clone_from(&canon);
        let n = shuffled.len().max(1);
        shuffled.rotate_left((seed as usize) % n);
        shuffled.reverse();
        let a = Poptrie::build(&canon, &PoptrieConfig::default()).unwrap();
        let b = Poptrie::build(&shuffled, &PoptrieConfig::default()).unwrap();
        for &x in &addrs {
            prop_assert_eq!(a.lookup(x), b.lookup(x));
        }
        prop_assert_eq!(a.node_count(), b.node_count());
        prop_assert_eq!(a.leaf_count(), b.leaf_count());
        prop_assert_eq!(a.memory_bytes(), b.memory_bytes());
        type Engine = Box<dyn Lpm<u32>>;
        let pairs: Vec<(Engine, Engine)> = vec![
            (
                Box::new(LcTrie::build(&canon, &LcConfig::default()).unwrap()),
                Box::new(LcTrie::build(&shuffled, &LcConfig::default()).unwrap()),
            ),
            (
                Box::new(Radix::build(&canon, &()).unwrap()),
                Box::new(Radix::build(&shuffled, &()).unwrap()),
            ),
            (
                Box::new(Dir24::build(&canon, &()).unwrap()),
                Box::new(Dir24::build(&shuffled, &()).unwrap()),
            ),
        ];
        for (x, y) in &pairs {
            for &a in &addrs {
                prop_assert_eq!(x.lookup(a), y.lookup(a), "{}", x.name());
            }
        }
    }
}

#[test]
fn host_routes_at_the_end_of_the_v6_space() {
    // /127 and /128 routes whose stride runs past bit 127 in every direct-pointing setting.
    let top = u128::MAX;
    let routes = vec![
        Route::new(Prefix::new_masked(top, 128), 1),
        Route::new(Prefix::new_masked(top - 1, 127), 2),
        Route::new(Prefix::new_masked(top, 120), 3),
        Route::new(Prefix::new_masked(0, 128), 4),
        Route::new(Prefix::new_masked(2, 127), 5),
    ];
    let addrs: Vec<u128> = vec![top, top - 1, top - 2, top - 255, top - 256, 0, 1, 2, 3, 4];
    check_all(&routes, &addrs).unwrap();
    let p = Poptrie::build(&routes, &PoptrieConfig::default()).unwrap();
    assert_eq!(p.lookup(top), 1);
    assert_eq!(p.lookup(top - 1), 2);
    assert_eq!(p.lookup(top - 2), 3);
    assert_eq!(p.lookup(0), 4);
    assert_eq!(p.lookup(1), 0);
    assert_eq!(p.lookup(3), 5);
}

#[test]
fn empty_table_answers_no_route() {
    let p = Poptrie::<u32>::build(&[], &PoptrieConfig::default()).unwrap();
    assert_eq!(p.lookup(0x0a00_0001), 0);
    let d = Dir24::build(&[], &()).unwrap();
    assert_eq!(d.lookup(0xffff_ffff), 0);
}

#[test]
fn poptrie_rejects_next_hops_wider_than_a_leaf() {
    let r = [Route::new(Prefix::<u32>::new_masked(0, 0), 70_000)];
    assert!(Poptrie::build(&r, &PoptrieConfig::default()).is_err());
}

#[test]
fn default_route_without_direct_pointing() {
    // Regression: with no direct-pointing bits the /0 route must become the root's default.
    let routes = vec![
        Route::new(Prefix::<u128>::new_masked(0, 128), 1),
        Route::new(Prefix::<u128>::new_masked(0, 0), 2),
    ];
    let p = Poptrie::build(&routes, &PoptrieConfig::flat(0)).unwrap();
    assert_eq!(p.lookup(u128::MAX), 2);
    assert_eq!(p.lookup(0), 1);
    let mut out = [0; 2];
    p.lookup_bulk(&[u128::MAX, 0], &mut out);
    assert_eq!(out, [2, 1]);
}
