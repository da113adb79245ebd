//! Tables and address sets shared by the engines' unit tests: the edge cases every engine must
//! answer like the golden reference, random nested tables, and the addresses that probe them.

use crate::golden::Golden;
use crate::{Key, Lpm, LpmBuild, NextHop, Prefix, Route, NO_ROUTE};
use proptest::prelude::*;

/// A xorshift generator of test data, from seed `x` (not 0).
pub(crate) fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

pub(crate) fn v4(a: [u8; 4], len: u8, nh: NextHop) -> Route<u32> {
    Route::new(Prefix::new_masked(u32::from_be_bytes(a), len), nh)
}

pub(crate) fn v6(a: u128, len: u8, nh: NextHop) -> Route<u128> {
    Route::new(Prefix::new_masked(a, len), nh)
}

/// Addresses on the edges of every prefix: its first and last address and one step outside
/// each, plus the ends of the address space and `extra`.
pub(crate) fn probes<K: Key>(routes: &[Route<K>], extra: &[K]) -> Vec<K> {
    let step = 1u128 << (128 - K::BITS as u32);
    let mut v = extra.to_vec();
    v.push(K::ZERO);
    v.push(K::from_u128_left(u128::MAX));
    for r in routes {
        let a = r.prefix.addr().to_u128_left();
        let len = r.prefix.len();
        let last = if len >= 128 {
            a
        } else {
            a | (u128::MAX >> len)
        };
        for x in [a, last, a.wrapping_sub(step), last.wrapping_add(step)] {
            v.push(K::from_u128_left(x));
        }
    }
    v
}

/// IPv4 tables that break engines: /0 alone, /1 halves, /31 and /32 neighbours, both ends of
/// the space, a deep nest, repeats and withdrawals, every length at one address, a dense /16.
pub(crate) fn edge_tables_v4() -> Vec<(Vec<Route<u32>>, Vec<u32>)> {
    let tables: Vec<Vec<Route<u32>>> = vec![
        vec![v4([0, 0, 0, 0], 0, 7)],
        vec![v4([0, 0, 0, 0], 1, 1), v4([128, 0, 0, 0], 1, 2)],
        vec![v4([128, 0, 0, 0], 1, 2)],
        vec![v4([10, 0, 0, 0], 31, 1), v4([10, 0, 0, 2], 31, 2)],
        vec![v4([10, 0, 0, 0], 32, 1), v4([10, 0, 0, 1], 32, 2)],
        vec![
            v4([0, 0, 0, 0], 32, 1),
            v4([255, 255, 255, 255], 32, 2),
            v4([255, 255, 255, 254], 31, 3),
            v4([0, 0, 0, 0], 31, 4),
        ],
        vec![
            v4([0, 0, 0, 0], 0, 1),
            v4([10, 0, 0, 0], 8, 2),
            v4([10, 0, 0, 0], 16, 3),
            v4([10, 0, 0, 0], 24, 4),
            v4([10, 0, 0, 0], 31, 5),
            v4([10, 0, 0, 0], 32, 6),
            v4([10, 0, 0, 1], 32, 7),
            v4([10, 0, 0, 128], 25, 8),
            v4([10, 0, 1, 0], 24, 9),
        ],
        // Repeats and withdrawals: the last word wins.
        vec![
            v4([10, 0, 0, 0], 8, 1),
            v4([10, 0, 0, 0], 8, 2),
            v4([10, 1, 0, 0], 16, 3),
            v4([10, 1, 0, 0], 16, 0),
        ],
        (0..=32)
            .map(|l| v4([0xa5, 0x5a, 0xc3, 0x3c], l, 1 + l as u32))
            .collect(),
        (0..256)
            .map(|i| v4([192, 168, i as u8, 0], 24, 1 + i))
            .collect(),
    ];
    with_probes(tables, &[0x0a00_0001, 0x7fff_ffff, 0x8000_0000])
}

/// Each table with its edge addresses and `extra`.
fn with_probes<K: Key>(tables: Vec<Vec<Route<K>>>, extra: &[K]) -> Vec<(Vec<Route<K>>, Vec<K>)> {
    tables
        .into_iter()
        .map(|t| {
            let p = probes(&t, extra);
            (t, p)
        })
        .collect()
}

/// IPv6 tables that break engines: /0, /1 halves, /127 and /128 at both ends of the space
/// (strides that run past the last bit), a deep nest, every length at one address.
pub(crate) fn edge_tables_v6() -> Vec<(Vec<Route<u128>>, Vec<u128>)> {
    let top = u128::MAX;
    let doc = 0x2001_0db8u128 << 96;
    let tables: Vec<Vec<Route<u128>>> = vec![
        vec![v6(0, 0, 7)],
        vec![v6(0, 1, 1), v6(1 << 127, 1, 2)],
        vec![v6(0, 127, 1), v6(2, 127, 2), v6(1, 128, 3)],
        vec![
            v6(top, 128, 1),
            v6(top - 1, 127, 2),
            v6(top, 120, 3),
            v6(0, 128, 4),
        ],
        vec![
            v6(0, 0, 1),
            v6(doc, 32, 2),
            v6(doc, 48, 3),
            v6(doc, 64, 4),
            v6(doc, 127, 5),
            v6(doc, 128, 6),
            v6(doc | 1, 128, 7),
            v6(doc | (1 << 64), 64, 8),
        ],
        (0..=128).map(|l| v6(top / 3, l, 1 + l as u32)).collect(),
    ];
    with_probes(tables, &[doc | 0xffff, 1 << 127, (1 << 127) - 1])
}

/// Checks `e` against the golden reference on `addrs`, single and bulk lookups; returns the
/// golden table for further checks.
pub(crate) fn check_against_golden<K: Key>(
    e: &dyn Lpm<K>,
    routes: &[Route<K>],
    addrs: &[K],
    what: &str,
) -> Golden<K> {
    let golden = Golden::build(routes, &()).unwrap();
    let want: Vec<NextHop> = addrs.iter().map(|&a| golden.lookup(a)).collect();
    for (&a, &w) in addrs.iter().zip(&want) {
        assert_eq!(e.lookup(a), w, "lookup {a:?} with {what}");
    }
    let mut out = vec![NO_ROUTE; addrs.len()];
    e.lookup_bulk(addrs, &mut out);
    assert_eq!(out, want, "bulk with {what}");
    golden
}

/// Random tables whose prefixes mostly start from a few bases in `pool`, so that they nest and
/// touch, with their edge addresses and some random ones.
pub(crate) fn routes_and_probes<K: Key + Arbitrary>(
    pool: &'static [K],
) -> impl Strategy<Value = (Vec<Route<K>>, Vec<K>)> {
    let route = (
        0..pool.len() + 2,
        any::<K>(),
        0..=K::BITS as u32,
        0..=K::BITS,
        0u32..200,
    );
    (
        prop::collection::vec(route, 0..160),
        prop::collection::vec(any::<K>(), 0..64),
    )
        .prop_map(move |(raw, extra)| {
            let routes: Vec<Route<K>> = raw
                .into_iter()
                .map(|(p, noise, shift, len, nh)| {
                    let base = pool.get(p).map_or(0, |b| b.to_u128_left());
                    let noise = noise.to_u128_left().checked_shr(shift).unwrap_or(0);
                    let addr = K::from_u128_left(base ^ noise);
                    Route::new(Prefix::new_masked(addr, len), nh)
                })
                .collect();
            let addrs = probes(&routes, &extra);
            (routes, addrs)
        })
}

pub(crate) const POOL4: &[u32] = &[0, 0x0a00_0000, 0xc0a8_0000, 0xffff_ffff];
pub(crate) const POOL6: &[u128] = &[0, 0x2001_0db8 << 96, 0xfe80 << 112, u128::MAX];

/// Every edge table of both families through `build`, checked against golden.
pub(crate) fn check_edge_tables<E4, E6>(
    build4: impl Fn(&[Route<u32>]) -> E4,
    build6: impl Fn(&[Route<u128>]) -> E6,
) where
    E4: Lpm<u32>,
    E6: Lpm<u128>,
{
    for (routes, addrs) in edge_tables_v4() {
        check_against_golden(&build4(&routes), &routes, &addrs, "v4 edge table");
    }
    for (routes, addrs) in edge_tables_v6() {
        check_against_golden(&build6(&routes), &routes, &addrs, "v6 edge table");
    }
}

/// A table, then batches of changes (a next hop of [`NO_ROUTE`] withdraws), and addresses on
/// the edges of every prefix involved. Half the changes hit prefixes of the table, so
/// withdrawals and replacements of existing routes are common.
pub(crate) type UpdateCase<K> = (Vec<Route<K>>, Vec<Vec<Route<K>>>, Vec<K>);

pub(crate) fn updates_and_probes<K: Key + Arbitrary>(
    pool: &'static [K],
) -> impl Strategy<Value = UpdateCase<K>> {
    let change = (
        any::<bool>(),
        any::<prop::sample::Index>(),
        0u32..6,
        0u32..200,
    );
    // Half the announcements take the next hop of another route of the table, so that a
    // change often carries the next hop of the routes around it (uniform nodes, merged runs).
    (
        routes_and_probes(pool),
        routes_and_probes(pool),
        prop::collection::vec(prop::collection::vec(change, 1..12), 1..8),
    )
        .prop_map(|((table, mut addrs), (fresh, more), batches)| {
            let batches: Vec<Vec<Route<K>>> = batches
                .into_iter()
                .map(|b| {
                    b.into_iter()
                        .filter_map(|(old, i, kind, nh)| {
                            let from = if old && !table.is_empty() {
                                &table
                            } else {
                                &fresh
                            };
                            if from.is_empty() {
                                return None;
                            }
                            let r = from[i.index(from.len())];
                            let borrowed = table
                                .get(nh as usize % table.len().max(1))
                                .map_or(1, |t| t.nexthop.max(1));
                            // kind 0..2: withdraw; otherwise announce or replace.
                            let nh = match kind {
                                0 | 1 => NO_ROUTE,
                                2 | 3 => borrowed,
                                _ => nh + 1,
                            };
                            Some(Route::new(r.prefix, nh))
                        })
                        .collect()
                })
                .collect();
            addrs.extend(more);
            (table, batches, addrs)
        })
}

/// Builds `E` from the table, applies every batch through [`LpmUpdate::update`] and checks it
/// against a golden build of the resulting table after each batch.
pub(crate) fn check_updates<K: Key, E: crate::LpmUpdate<K>>(
    config: &E::Config,
    (table, batches, addrs): &UpdateCase<K>,
    what: &str,
) {
    let mut map = crate::RouteMap::from_routes(table);
    let mut e = E::build(table, config).unwrap();
    for (i, batch) in batches.iter().enumerate() {
        let mut changed = Vec::new();
        for r in batch {
            map.set(r.prefix, r.nexthop);
            changed.push(r.prefix);
        }
        e.update(&map, &changed).unwrap();
        check_against_golden(&e, &map.to_routes(), addrs, &format!("{what}, batch {i}"));
    }
}

/// Announcements, replacements and withdrawals of nested IPv4 prefixes, one change at a time:
/// a parent and its children, several prefixes at one address, /0 and /32, a prefix outside
/// the others' common bits. With addresses on all their edges.
pub(crate) fn nested_steps_v4() -> (Vec<Route<u32>>, Vec<u32>) {
    let steps = vec![
        v4([10, 0, 0, 0], 8, 1),
        v4([10, 1, 0, 0], 16, 2),
        v4([0, 0, 0, 0], 0, 3),
        v4([10, 1, 2, 0], 24, 4),
        v4([10, 1, 3, 0], 24, 5),
        v4([10, 0, 0, 0], 16, 6), // a second, longer prefix at address 10.0.0.0
        v4([10, 1, 2, 3], 32, 7),
        v4([255, 255, 255, 255], 32, 8), // outside the others' common bits
        v4([10, 1, 0, 0], 16, 9),        // replace
        v4([10, 0, 0, 0], 8, NO_ROUTE),  // a parent goes, its children stay
        v4([10, 1, 3, 0], 24, NO_ROUTE),
        v4([0, 0, 0, 0], 0, 10), // replace /0
        v4([10, 1, 2, 3], 32, NO_ROUTE),
        v4([0, 0, 0, 0], 0, NO_ROUTE),
        v4([10, 0, 0, 0], 8, 11), // back, under a /16 of its own address
        v4([10, 0, 0, 0], 16, NO_ROUTE),
    ];
    let addrs = probes(&steps, &[0x0a01_0304, 0x0b00_0001]);
    (steps, addrs)
}

/// The IPv6 counterpart at both ends of the space: /128 and /127 at the top, /1, /0.
pub(crate) fn nested_steps_v6() -> (Vec<Route<u128>>, Vec<u128>) {
    let top = u128::MAX;
    let steps = vec![
        v6(top, 128, 1),
        v6(top, 1, 2),
        v6(0, 0, 3),
        v6(top - 1, 127, 4),
        v6(top, 128, 5),
        v6(top, 1, NO_ROUTE),
        v6(0, 128, 6),
        v6(top, 128, NO_ROUTE),
        v6(0, 0, NO_ROUTE),
    ];
    let addrs = probes(&steps, &[1 << 127]);
    (steps, addrs)
}
