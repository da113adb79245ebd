//! Live updates: the canonical route map a live FIB keeps, and the trait engines implement to
//! follow it without a full rebuild.
//!
//! A live FIB keeps two things per address family: the [`RouteMap`] (prefix → next hop, the
//! plain canonical table, ordered by address then length) and an engine built from it. A
//! change is made to the map first; the engine is then told which prefixes changed and brings
//! itself in line, reading whatever it needs (the routes under a subtree, the prefix covering
//! another) from the map:
//!
//! ```text
//!   set 10.1.0.0/16 -> 7 ──▶ RouteMap ──(changed: [10.1.0.0/16])──▶ engine.update(&map, ..)
//!                             (truth)                               rebuilds only what the
//!                                                                   prefix touches
//! ```
//!
//! The contract of [`LpmUpdate::update`] is exact: afterwards the engine answers every address
//! as a fresh [`LpmBuild::build`] from the map would. The property tests of every engine check
//! that after random sequences of changes.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Bound;

use crate::key::Key;
use crate::prefix::{NextHop, Prefix, Route, NO_ROUTE};
use crate::{BuildError, LpmBuild};

/// A multiplicative hash for bucket numbers (already well spread integers); SipHash would
/// cost more than the bucket's own search.
#[derive(Default)]
pub(crate) struct BucketHasher(u64);

impl Hasher for BucketHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
}

type Buckets<K> = HashMap<u64, BTreeMap<Prefix<K>, NextHop>, BuildHasherDefault<BucketHasher>>;

/// The canonical table of one address family: one next hop per prefix, in (address, length)
/// order, so that the routes inside a prefix form one contiguous range.
///
/// A single ordered map of a full table is deep (a million IPv4 routes: five to six B-tree
/// levels, one cache miss each), and every change pays for it twice (the change, then the
/// engine's look at the routes around it). So routes are kept in buckets by their first
/// `B` address bits (18 for IPv4, the direct-pointing width of Poptrie, so a Poptrie slot's routes are one small bucket; 20 for IPv6), each a small ordered map found by hashing;
/// routes shorter than `B` bits sit in one ordered map of their own:
///
/// ```text
///   short  (len < B):  0.0.0.0/0  10.0.0.0/8  ...            one BTreeMap
///   bucket 10.1.0 ───▶ 10.1.0.0/18  10.1.2.0/24  10.1.2.128/25  ...  a BTreeMap per bucket
///   bucket 10.1.64 ──▶ ...                                           (HashMap by bucket)
/// ```
///
/// A short prefix starts exactly at a bucket boundary, so the canonical order is: for each
/// bucket in address order, the short prefixes at its first address, then the bucket.
#[derive(Clone, Debug, Default)]
pub struct RouteMap<K: Key> {
    short: BTreeMap<Prefix<K>, NextHop>,
    buckets: Buckets<K>,
    len: usize,
}

impl<K: Key> PartialEq for RouteMap<K> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl<K: Key> Eq for RouteMap<K> {}

impl<K: Key> RouteMap<K> {
    /// Address bits that choose a bucket.
    const B: u8 = if K::BITS == 32 { 18 } else { 20 };

    /// An empty map.
    pub fn new() -> Self {
        RouteMap {
            short: BTreeMap::new(),
            buckets: Buckets::default(),
            len: 0,
        }
    }

    /// A map of `routes`; for a prefix given twice the last wins, and [`NO_ROUTE`] removes.
    pub fn from_routes(routes: &[Route<K>]) -> Self {
        let mut m = RouteMap::new();
        for r in routes {
            m.set(r.prefix, r.nexthop);
        }
        m
    }

    fn bucket_of(addr: K) -> u64 {
        addr.chunk(0, Self::B) as u64
    }

    /// The first address of bucket `b`.
    fn bucket_addr(b: u64) -> K {
        K::from_u128_left((b as u128) << (128 - Self::B as u32))
    }

    /// Sets `prefix` to `nexthop` ([`NO_ROUTE`] removes it); returns the previous next hop
    /// ([`NO_ROUTE`] if there was none).
    pub fn set(&mut self, prefix: Prefix<K>, nexthop: NextHop) -> NextHop {
        let old = if prefix.len() < Self::B {
            if nexthop == NO_ROUTE {
                self.short.remove(&prefix)
            } else {
                self.short.insert(prefix, nexthop)
            }
        } else {
            let b = Self::bucket_of(prefix.addr());
            if nexthop == NO_ROUTE {
                match self.buckets.get_mut(&b) {
                    Some(m) => {
                        let old = m.remove(&prefix);
                        if m.is_empty() {
                            self.buckets.remove(&b);
                        }
                        old
                    }
                    None => None,
                }
            } else {
                self.buckets.entry(b).or_default().insert(prefix, nexthop)
            }
        };
        match (old, nexthop) {
            (None, n) if n != NO_ROUTE => self.len += 1,
            (Some(_), NO_ROUTE) => self.len -= 1,
            _ => {}
        }
        old.unwrap_or(NO_ROUTE)
    }

    /// The next hop of exactly `prefix`.
    pub fn get(&self, prefix: &Prefix<K>) -> Option<NextHop> {
        if prefix.len() < Self::B {
            self.short.get(prefix).copied()
        } else {
            self.buckets
                .get(&Self::bucket_of(prefix.addr()))?
                .get(prefix)
                .copied()
        }
    }

    /// Number of prefixes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every route in canonical order.
    pub fn iter(&self) -> impl Iterator<Item = Route<K>> + '_ {
        self.within(Prefix::new_masked(K::ZERO, 0))
    }

    /// Every route as a list in canonical order (what [`LpmBuild::build`] takes).
    pub fn to_routes(&self) -> Vec<Route<K>> {
        self.iter().collect()
    }

    /// The routes whose prefix lies inside `outer` (`outer` itself included), in order.
    pub fn within(&self, outer: Prefix<K>) -> impl Iterator<Item = Route<K>> + '_ {
        let last = last_addr(outer);
        let hi = Prefix::new_masked(last, K::BITS);
        let range = (Bound::Included(outer), Bound::Included(hi));
        let as_route = |(p, n): (&Prefix<K>, &NextHop)| Route::new(*p, *n);
        if outer.len() >= Self::B {
            let one = self.buckets.get(&Self::bucket_of(outer.addr()));
            return Within::One(
                one.into_iter()
                    .flat_map(move |m| m.range(range))
                    .map(as_route),
            );
        }
        // The buckets under `outer`: probed one by one when they are few, else every
        // populated bucket, sorted.
        let (first, n) = (
            Self::bucket_of(outer.addr()),
            1u64 << (Self::B - outer.len()),
        );
        let mut keys: Vec<u64> = if (n as usize) <= 2 * self.buckets.len().max(16) {
            (first..first + n)
                .filter(|b| self.buckets.contains_key(b))
                .collect()
        } else {
            let mut k: Vec<u64> = self
                .buckets
                .keys()
                .copied()
                .filter(|b| (first..first + n).contains(b))
                .collect();
            k.sort_unstable();
            k
        };
        keys.reverse();
        Within::Many(Merge {
            map: self,
            short: self.short.range(range).peekable(),
            keys,
            current: None,
        })
        .map_many(as_route)
    }

    /// The longest route that covers `p` and is strictly shorter than it.
    pub fn parent(&self, p: Prefix<K>) -> Option<Route<K>> {
        (0..p.len()).rev().find_map(|len| {
            let q = Prefix::new_masked(p.addr(), len);
            self.get(&q).map(|nh| Route::new(q, nh))
        })
    }

    /// The longest route covering `addr` (the reference answer of a lookup; slow).
    pub fn lookup(&self, addr: K) -> Option<Route<K>> {
        (0..=K::BITS).rev().find_map(|len| {
            let q = Prefix::new_masked(addr, len);
            self.get(&q).map(|nh| Route::new(q, nh))
        })
    }
}

type Entries<'a, K> = std::collections::btree_map::Range<'a, Prefix<K>, NextHop>;

/// The short prefixes and the buckets under one prefix, merged in canonical order.
struct Merge<'a, K: Key> {
    map: &'a RouteMap<K>,
    short: std::iter::Peekable<Entries<'a, K>>,
    /// Buckets still to visit, last first.
    keys: Vec<u64>,
    current: Option<Entries<'a, K>>,
}

impl<'a, K: Key> Iterator for Merge<'a, K> {
    type Item = (&'a Prefix<K>, &'a NextHop);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(c) = self.current.as_mut() {
                if let Some(e) = c.next() {
                    return Some(e);
                }
                self.current = None;
            }
            // Between buckets: short prefixes up to the next bucket's first address come
            // first (a short prefix at that address is shorter than all of the bucket's).
            let next_bucket = self.keys.last().map(|&b| RouteMap::<K>::bucket_addr(b));
            if let Some((p, _)) = self.short.peek() {
                if next_bucket.is_none_or(|a| p.addr() <= a) {
                    return self.short.next();
                }
            }
            let b = self.keys.pop()?;
            self.current = self.map.buckets.get(&b).map(|m| m.range(..));
        }
    }
}

/// One bucket's range, or a merge over several (two iterator types behind one).
enum Within<A, B> {
    One(A),
    Many(B),
}

impl<A, B> Within<A, B> {
    fn map_many<F, T, I>(self, f: F) -> Within<A, std::iter::Map<B, F>>
    where
        B: Iterator<Item = I>,
        F: FnMut(I) -> T,
    {
        match self {
            Within::One(a) => Within::One(a),
            Within::Many(b) => Within::Many(b.map(f)),
        }
    }
}

impl<T, A: Iterator<Item = T>, B: Iterator<Item = T>> Iterator for Within<A, B> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        match self {
            Within::One(a) => a.next(),
            Within::Many(b) => b.next(),
        }
    }
}

/// The last address inside `p`.
pub(crate) fn last_addr<K: Key>(p: Prefix<K>) -> K {
    let a = p.addr().to_u128_left();
    let host = u128::MAX.checked_shr(p.len() as u32).unwrap_or(0);
    K::from_u128_left(a | host)
}

/// Engines that follow a [`RouteMap`] through changes instead of being rebuilt.
pub trait LpmUpdate<K: Key>: LpmBuild<K> {
    /// Largest next hop the engine stores. A live FIB refuses larger ones before any change,
    /// so an update never fails half-way.
    const MAX_NEXTHOP: NextHop = NextHop::MAX;

    /// Brings the engine in line with `table`, in which the prefixes of `changed` were set,
    /// replaced or removed since the engine last matched it. `changed` may hold duplicates
    /// and prefixes whose next hop did not really change. Afterwards the engine answers every
    /// address as `LpmBuild::build(&table.to_routes(), config)` would.
    ///
    /// An error leaves the engine answering as before the call for the prefixes it had not
    /// reached yet; the live FIB then rebuilds it from `table`.
    fn update(&mut self, table: &RouteMap<K>, changed: &[Prefix<K>]) -> Result<(), BuildError>;

    /// [`LpmUpdate::update`] for a second copy of the engine: `src` is another copy, built
    /// with the same configuration, that differed from this one exactly by the prefixes of
    /// `changed` and has since applied them. The engine may copy the parts those prefixes
    /// touched from `src` instead of recomputing them from `table` (a live FIB keeps two
    /// copies and brings the second one up to date this way). Parts it does not copy are
    /// recomputed from `table`, as `update` does.
    fn update_from(
        &mut self,
        src: &Self,
        table: &RouteMap<K>,
        changed: &[Prefix<K>],
    ) -> Result<(), BuildError> {
        let _ = src;
        self.update(table, changed)
    }

    /// Makes, from the table the engine was built from, any side state updates need, so the
    /// first update does not pay for it. Optional: `update` makes it when missing.
    fn prepare(&mut self, _table: &RouteMap<K>) {}

    /// For engines updated in place under readers: a handle on the same storage for readers,
    /// which sees every later [`LpmUpdate::update`] of `self` as it is made, each change
    /// switched in atomically (a lookup answers from the table before or after it). `None`
    /// (the default): the engine must be updated in a copy no reader sees.
    ///
    /// An engine that shares its storage does not reuse what an update replaced until told
    /// that no reader can be in it any more: [`LpmUpdate::retire_group`], then
    /// [`LpmUpdate::reclaim`].
    fn share(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }

    /// Closes the group of storage retired by updates so far; returns its number (groups
    /// count up from 0 and keep counting across rebuilds).
    fn retire_group(&mut self) -> u64 {
        0
    }

    /// Reuses the storage retired in groups up to `group`: the caller guarantees that every
    /// lookup that began before that group was closed has finished.
    fn reclaim(&mut self, _group: u64) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{v4, v6};

    #[test]
    fn within_is_the_contiguous_range_under_a_prefix() {
        let m = RouteMap::from_routes(&[
            v4([10, 0, 0, 0], 8, 1),
            v4([10, 1, 0, 0], 16, 2),
            v4([10, 255, 255, 255], 32, 3),
            v4([11, 0, 0, 0], 8, 4),
            v4([9, 255, 0, 0], 16, 5),
            v4([0, 0, 0, 0], 0, 6),
        ]);
        let p8 = Prefix::new_masked(0x0a00_0000u32, 8);
        let got: Vec<NextHop> = m.within(p8).map(|r| r.nexthop).collect();
        assert_eq!(got, vec![1, 2, 3]);
        let all: Vec<NextHop> = m
            .within(Prefix::new_masked(0u32, 0))
            .map(|r| r.nexthop)
            .collect();
        assert_eq!(all.len(), 6);
        assert_eq!(
            m.parent(Prefix::new_masked(0x0a01_0000u32, 16))
                .map(|r| r.nexthop),
            Some(1)
        );
        assert_eq!(m.parent(Prefix::new_masked(0u32, 0)), None);
        assert_eq!(m.lookup(0x0aff_ffff).map(|r| r.nexthop), Some(3));
        assert_eq!(m.lookup(0x0c00_0000).map(|r| r.nexthop), Some(6));
    }

    fn same_order<K: Key>(
        routes: &[Route<K>],
        addrs: &[K],
        outer_len: u8,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        let m = RouteMap::from_routes(routes);
        let plain: BTreeMap<Prefix<K>, NextHop> = crate::canonicalize(routes)
            .into_iter()
            .map(|r| (r.prefix, r.nexthop))
            .collect();
        let want: Vec<Route<K>> = plain.iter().map(|(p, n)| Route::new(*p, *n)).collect();
        proptest::prop_assert_eq!(m.to_routes(), want.clone());
        proptest::prop_assert_eq!(m.len(), want.len());
        for a in addrs.iter().take(8) {
            let outer = Prefix::new_masked(*a, outer_len);
            let got: Vec<Route<K>> = m.within(outer).collect();
            let w: Vec<Route<K>> = want
                .iter()
                .filter(|r| outer.covers(&r.prefix))
                .copied()
                .collect();
            proptest::prop_assert_eq!(got, w);
        }
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Buckets and short prefixes merge into the order of one plain ordered map, for the
        /// whole map and under any prefix.
        #[test]
        fn buckets_keep_the_canonical_order_v4(
            (routes, addrs) in crate::testkit::routes_and_probes(crate::testkit::POOL4),
            outer_len in 0u8..=32,
        ) {
            same_order(&routes, &addrs, outer_len)?;
        }

        #[test]
        fn buckets_keep_the_canonical_order_v6(
            (routes, addrs) in crate::testkit::routes_and_probes(crate::testkit::POOL6),
            outer_len in 0u8..=128,
        ) {
            same_order(&routes, &addrs, outer_len)?;
        }
    }

    #[test]
    fn set_replaces_and_removes() {
        let mut m = RouteMap::new();
        let p = v6(0x2001_0db8 << 96, 32, 1).prefix;
        assert_eq!(m.set(p, 5), NO_ROUTE);
        assert_eq!(m.set(p, 6), 5);
        assert_eq!(m.set(p, NO_ROUTE), 6);
        assert!(m.is_empty());
        let top = Prefix::new_masked(u128::MAX, 128);
        m.set(top, 9);
        assert_eq!(m.within(Prefix::new_masked(0u128, 0)).count(), 1);
        assert_eq!(m.within(top).count(), 1);
    }
}
