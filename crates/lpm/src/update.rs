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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::{Bound, Range};

use rustc_hash::FxBuildHasher;

use crate::key::Key;
use crate::prefix::{NextHop, Prefix, Route, NO_ROUTE};
use crate::{BuildError, LpmBuild};

/// Buckets by number: rustc-hash's Fx hash (bucket numbers are already well spread integers;
/// SipHash would cost more than the bucket's own search).
type Buckets<K> = HashMap<u64, Bucket<K>, FxBuildHasher>;

/// Bytes of entries a bucket keeps in a sorted vector before it turns into a B-tree (on x86-64:
/// 144 IPv4 routes, 36 IPv6 ones).
const SMALL_BYTES: usize = 1152;

/// A route's prefix inside its bucket as one integer of its family: the address bits after the
/// bucket's `B` (see [`RouteMap`]), then the length, in the low bits the bucket's own bits
/// left free.
///
/// ```text
///   IPv6, B = 20:  │ address bits 20..128 (108 bits) │ 12 zero bits │ length (8 bits) │
///   IPv4, B = 18:  │ address bits 18..32  (14 bits)  │ 12 zero bits │ length (6 bits) │
/// ```
///
/// The prefixes of one bucket share its first `B` bits, so they differ only in what the key
/// keeps, and the keys' numeric order is the canonical one (address, then length). An IPv6
/// key is a `u128` of 16 bytes where a `Prefix<u128>` takes 32 (a byte of length padded to
/// the `u128`'s alignment): a B-tree node's keys and a vector's entries fill half the cache
/// lines a search reads.
#[inline(always)]
fn pack<K: Key>(p: Prefix<K>) -> K {
    let len = (p.len() as u128) << (128 - K::BITS as u32);
    K::from_u128_left(p.addr().to_u128_left() << RouteMap::<K>::B | len)
}

/// The prefix of key `v` (see [`pack`]) in the bucket whose first address is `base`.
#[inline(always)]
fn unpack<K: Key>(v: K, base: K) -> Prefix<K> {
    let x = v.to_u128_left();
    // The length's bits are the key's lowest; shifted by `B`, they fall below the family's
    // width and out of the address.
    let len = (x >> (128 - K::BITS as u32)) as u8;
    Prefix::new_masked(
        K::from_u128_left(base.to_u128_left() | x >> RouteMap::<K>::B),
        len,
    )
}

/// The routes of one bucket in canonical order, by their keys ([`pack`]): a sorted vector
/// while small, a B-tree once large.
///
/// Most IPv4 buckets are small (18 bucket bits, the 2024 reference table: half the routes sit
/// in buckets of 27 or fewer, 99 % in buckets of at most 71). A vector of that size is a few
/// adjacent cache lines, all asked for at once before a search (so it waits for about one
/// miss, not one per step) and which an update can prefetch ([`RouteMap::prefetch`]), where a
/// B-tree of the same routes is a node and a leaf at unrelated addresses: a miss each. A large
/// bucket is a B-tree, because inserting into a long vector moves too much; most IPv6 routes
/// are in those (20 bucket bits: half the routes sit in buckets of 1,700 or more).
#[derive(Clone, Debug)]
enum Bucket<K: Key> {
    Small(Vec<(K, NextHop)>),
    Big(BTreeMap<K, NextHop>),
}

impl<K: Key> Default for Bucket<K> {
    fn default() -> Self {
        Bucket::Small(Vec::new())
    }
}

/// Asks for every cache line of `v` at once (a small bucket is at most 18 lines), so that a
/// binary search over it waits for about one miss instead of one per step.
fn prefetch_all<T>(v: &[T]) {
    let step = (64 / std::mem::size_of::<T>().max(1)).max(1);
    for e in v.iter().step_by(step) {
        crate::prefetch(e);
    }
    if let Some(last) = v.last() {
        crate::prefetch(last);
    }
}

/// The walk of [`Bucket::covering`]: the routes `before` `p` in a bucket, nearest first,
/// looked at until one covers `p` with a length in `lens` (`Some(Some(route))`), or one starts
/// before the shortest such length's address or none is left (`Some(None)`: no route covers
/// it), or `limit` were looked at (`None`: undecided).
fn walk_back<K: Key>(
    before: impl Iterator<Item = Route<K>>,
    p: Prefix<K>,
    lens: &Range<u8>,
    limit: usize,
) -> Option<Option<Route<K>>> {
    let lo = p.addr().masked(lens.start);
    let mut seen = 0;
    for r in before.take(limit) {
        let q = r.prefix;
        if q.addr() < lo {
            return Some(None);
        }
        if lens.contains(&q.len()) && q.covers(&p) {
            return Some(Some(r));
        }
        seen += 1;
    }
    (seen < limit).then_some(None)
}

impl<K: Key> Bucket<K> {
    /// Entries of the sorted vector at most.
    const SMALL_MAX: usize = SMALL_BYTES / std::mem::size_of::<(K, NextHop)>();

    /// Routes a covering route's backward walk in the B-tree looks at before it asks for
    /// each length instead (one exact search per length).
    const WALK: usize = 16;

    /// Where key `k` is in the sorted vector `v`, or where it would go.
    fn find(v: &[(K, NextHop)], k: K) -> Result<usize, usize> {
        prefetch_all(v);
        v.binary_search_by(|(q, _)| q.cmp(&k))
    }

    fn get(&self, p: &Prefix<K>) -> Option<NextHop> {
        let k = pack(*p);
        match self {
            Bucket::Small(v) => {
                let i = Self::find(v, k).ok()?;
                v.get(i).map(|e| e.1)
            }
            Bucket::Big(m) => m.get(&k).copied(),
        }
    }

    /// The longest route of the bucket (first address `base`) covering `p` with a length in
    /// `lens` (all below `p`'s). In canonical order the routes covering `p` come before it,
    /// the longest last, and a route of length `l` at the earliest at `p`'s address cut to
    /// `l` bits: one search for `p`'s place, then a walk back over the routes from the
    /// shortest length's address on. In the B-tree the walk stops after [`Self::WALK`]
    /// routes (a dense range before `p`) and the lengths are then asked one by one.
    fn covering(&self, p: Prefix<K>, lens: Range<u8>, base: K) -> Option<Route<K>> {
        if lens.is_empty() {
            return None;
        }
        let k = pack(p);
        let route = |(q, nh): (&K, &NextHop)| Route::new(unpack(*q, base), *nh);
        match self {
            Bucket::Small(v) => {
                let before = v.get(..v.partition_point(|(q, _)| *q < k))?;
                let nearest_first = before.iter().rev().map(|(q, nh)| route((q, nh)));
                walk_back(nearest_first, p, &lens, usize::MAX).flatten()
            }
            Bucket::Big(m) => walk_back(m.range(..k).rev().map(route), p, &lens, Self::WALK)
                .unwrap_or_else(|| {
                    lens.clone().rev().find_map(|len| {
                        let q = Prefix::new_masked(p.addr(), len);
                        m.get(&pack(q)).map(|&nh| Route::new(q, nh))
                    })
                }),
        }
    }

    fn insert(&mut self, p: Prefix<K>, nh: NextHop) -> Option<NextHop> {
        let k = pack(p);
        match self {
            Bucket::Small(v) => match Self::find(v, k) {
                Ok(i) => v.get_mut(i).map(|e| std::mem::replace(&mut e.1, nh)),
                Err(i) if v.len() < Self::SMALL_MAX => {
                    v.insert(i, (k, nh));
                    None
                }
                Err(_) => {
                    let mut m: BTreeMap<K, NextHop> = v.drain(..).collect();
                    m.insert(k, nh);
                    *self = Bucket::Big(m);
                    None
                }
            },
            Bucket::Big(m) => m.insert(k, nh),
        }
    }

    fn remove(&mut self, p: &Prefix<K>) -> Option<NextHop> {
        let k = pack(*p);
        match self {
            Bucket::Small(v) => {
                let i = Self::find(v, k).ok()?;
                Some(v.remove(i).1)
            }
            Bucket::Big(m) => {
                let old = m.remove(&k);
                // Back to a vector well below the limit, so a bucket at the limit does not
                // switch back and forth.
                if m.len() < Self::SMALL_MAX / 2 {
                    *self = Bucket::Small(std::mem::take(m).into_iter().collect());
                }
                old
            }
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Bucket::Small(v) => v.is_empty(),
            Bucket::Big(m) => m.is_empty(),
        }
    }

    /// The entries inside `outer` (`outer` included), in order; `base` is the bucket's first
    /// address.
    fn inside(&self, outer: Prefix<K>, base: K) -> Entries<'_, K> {
        // In canonical order the prefixes inside `outer` follow it without a gap, up to the
        // host route of its last address.
        let lo = pack(outer);
        let hi = pack(Prefix::new_masked(last_addr(outer), K::BITS));
        match self {
            Bucket::Small(v) => {
                let a = v.partition_point(|(q, _)| *q < lo);
                let rest = v.get(a..).unwrap_or_default();
                let n = rest.iter().take_while(|(q, _)| *q <= hi).count();
                Entries::Small(rest.get(..n).unwrap_or_default().iter(), base)
            }
            // From `outer` on, up to the first entry past `hi`: one search down the tree
            // instead of two (a range to `hi` also searches for its end).
            Bucket::Big(m) => Entries::Inside(m.range(lo..), base, hi),
        }
    }

    /// Every entry, in order; `base` is the bucket's first address.
    fn all(&self, base: K) -> Entries<'_, K> {
        match self {
            Bucket::Small(v) => Entries::Small(v.iter(), base),
            Bucket::Big(m) => Entries::Big(m.range(..), base),
        }
    }
}

/// A range of one bucket (with the bucket's first address, to make prefixes of its keys), or
/// of the short prefixes' B-tree.
enum Entries<'a, K: Key> {
    Small(std::slice::Iter<'a, (K, NextHop)>, K),
    Big(std::collections::btree_map::Range<'a, K, NextHop>, K),
    /// A B-tree's entries from a key on, up to the last key inside a prefix.
    Inside(std::collections::btree_map::Range<'a, K, NextHop>, K, K),
    Short(std::collections::btree_map::Range<'a, Prefix<K>, NextHop>),
}

impl<K: Key> Entries<'_, K> {
    fn empty() -> Self {
        Entries::Small(Default::default(), K::ZERO)
    }
}

impl<K: Key> Iterator for Entries<'_, K> {
    type Item = Route<K>;

    #[inline]
    fn next(&mut self) -> Option<Route<K>> {
        let route = |q: &K, n: &NextHop, base: K| Route::new(unpack(*q, base), *n);
        match self {
            Entries::Small(i, base) => i.next().map(|(q, n)| route(q, n, *base)),
            Entries::Big(r, base) => r.next().map(|(q, n)| route(q, n, *base)),
            Entries::Inside(r, base, hi) => match r.next() {
                Some((q, n)) if q <= hi => Some(route(q, n, *base)),
                // Everything after the first entry past the last one inside is outside too.
                _ => {
                    *self = Entries::empty();
                    None
                }
            },
            Entries::Short(r) => r.next().map(|(p, n)| Route::new(*p, *n)),
        }
    }
}

/// The canonical table of one address family: one next hop per prefix, in (address, length)
/// order, so that the routes inside a prefix form one contiguous range.
///
/// A single ordered map of a full table is deep (a million IPv4 routes: five to six B-tree
/// levels, one cache miss each), and every change pays for it twice (the change, then the
/// engine's look at the routes around it). So routes are kept in buckets by their first
/// `B` address bits (18 for IPv4, the direct-pointing width of Poptrie, so a Poptrie slot's
/// routes are one small bucket; 20 for IPv6), each found by hashing its number and kept in
/// order, as a sorted vector while small and a B-tree once large, under keys of one integer
/// of the family that leave the bucket's bits out (`pack` in this module); routes shorter
/// than `B` bits sit in one ordered map of their own, and an ordered set of the bucket numbers
/// in use lists the buckets under a short prefix:
///
/// ```text
///   short  (len < B):  0.0.0.0/0  10.0.0.0/8  ...            one BTreeMap
///   bucket 10.1.0 ───▶ [10.1.0.0/18  10.1.2.0/24  10.1.2.128/25  ...]  sorted vector
///   bucket 10.1.64 ──▶ ...                                     (HashMap by bucket number)
///   keys:  {.., 10.1.0, 10.1.64, ..}                           BTreeSet of bucket numbers
/// ```
///
/// A short prefix starts exactly at a bucket boundary, so the canonical order is: for each
/// bucket in address order, the short prefixes at its first address, then the bucket.
#[derive(Clone, Debug, Default)]
pub struct RouteMap<K: Key> {
    short: BTreeMap<Prefix<K>, NextHop>,
    buckets: Buckets<K>,
    /// The numbers of the buckets in `buckets`, in order.
    keys: BTreeSet<u64>,
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
            keys: BTreeSet::new(),
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
                            self.keys.remove(&b);
                        }
                        old
                    }
                    None => None,
                }
            } else {
                let keys = &mut self.keys;
                self.buckets
                    .entry(b)
                    .or_insert_with(|| {
                        keys.insert(b);
                        Bucket::default()
                    })
                    .insert(prefix, nexthop)
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
        }
    }

    /// Asks the CPU to fetch what a [`RouteMap::get`] of `prefix` or a look at the routes
    /// around it will read, so that the caller can start the cache misses of several changes
    /// at once before it works on them one by one. Only a hint: it changes nothing.
    pub fn prefetch(&self, prefix: &Prefix<K>) {
        if prefix.len() < Self::B {
            return;
        }
        if let Some(Bucket::Small(v)) = self.buckets.get(&Self::bucket_of(prefix.addr())) {
            prefetch_all(v);
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
        if outer.len() >= Self::B {
            let b = Self::bucket_of(outer.addr());
            let one = self.buckets.get(&b);
            let base = Self::bucket_addr(b);
            return Within::One(one.map_or(Entries::empty(), |m| m.inside(outer, base)));
        }
        let hi = Prefix::new_masked(last_addr(outer), K::BITS);
        let range = (Bound::Included(outer), Bound::Included(hi));
        let first = Self::bucket_of(outer.addr());
        let keys = self
            .keys
            .range(first..=first + ((1u64 << (Self::B - outer.len())) - 1));
        Within::Many(Merge {
            map: self,
            short: Entries::Short(self.short.range(range)).peekable(),
            keys: keys.peekable(),
            current: None,
        })
    }

    /// The longest route that covers `p` and is strictly shorter than it.
    pub fn parent(&self, p: Prefix<K>) -> Option<Route<K>> {
        self.covering(p, 0..p.len())
    }

    /// The longest route that covers `p` with a length in `lens` (lengths from `p.len()` up
    /// are left out). The lengths of at least `B` bits are looked up in `p`'s bucket, found
    /// once, the shorter ones in the map of short prefixes.
    pub fn covering(&self, p: Prefix<K>, lens: Range<u8>) -> Option<Route<K>> {
        let end = lens.end.min(p.len());
        if end > Self::B {
            let n = Self::bucket_of(p.addr());
            if let Some(b) = self.buckets.get(&n) {
                let r = b.covering(p, lens.start.max(Self::B)..end, Self::bucket_addr(n));
                if r.is_some() {
                    return r;
                }
            }
        }
        (lens.start..end.min(Self::B)).rev().find_map(|len| {
            let q = Prefix::new_masked(p.addr(), len);
            self.short.get(&q).map(|&nh| Route::new(q, nh))
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

/// The short prefixes and the buckets under one prefix, merged in canonical order.
struct Merge<'a, K: Key> {
    map: &'a RouteMap<K>,
    short: std::iter::Peekable<Entries<'a, K>>,
    /// Buckets still to visit.
    keys: std::iter::Peekable<std::collections::btree_set::Range<'a, u64>>,
    current: Option<Entries<'a, K>>,
}

impl<K: Key> Iterator for Merge<'_, K> {
    type Item = Route<K>;

    fn next(&mut self) -> Option<Route<K>> {
        loop {
            if let Some(c) = self.current.as_mut() {
                if let Some(e) = c.next() {
                    return Some(e);
                }
                self.current = None;
            }
            // Between buckets: short prefixes up to the next bucket's first address come
            // first (a short prefix at that address is shorter than all of the bucket's).
            let next_bucket = self.keys.peek().map(|&&b| RouteMap::<K>::bucket_addr(b));
            if let Some(r) = self.short.peek() {
                if next_bucket.is_none_or(|a| r.prefix.addr() <= a) {
                    return self.short.next();
                }
            }
            let b = *self.keys.next()?;
            let base = RouteMap::<K>::bucket_addr(b);
            self.current = self.map.buckets.get(&b).map(|m| m.all(base));
        }
    }
}

/// One bucket's range, or a merge over several (two iterator types behind one).
enum Within<A, B> {
    One(A),
    Many(B),
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

    /// The routes of `want` (in order) inside `outer`: what `within(outer)` must give.
    fn inside<K: Key>(want: &[Route<K>], outer: Prefix<K>) -> Vec<Route<K>> {
        want.iter()
            .filter(|r| outer.covers(&r.prefix))
            .copied()
            .collect()
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
            proptest::prop_assert_eq!(got, inside(&want, outer));
            // Covering routes of every range of lengths, for the probe at every length.
            for len in [outer_len, K::BITS, outer_len / 2] {
                let p = Prefix::new_masked(*a, len);
                for lens in [0..len, outer_len / 3..len, 0..outer_len, len / 2..K::BITS] {
                    proptest::prop_assert_eq!(
                        m.covering(p, lens.clone()),
                        covering(&want, p, lens.clone()),
                        "{:?} over {:?}",
                        p,
                        lens
                    );
                }
                proptest::prop_assert_eq!(m.parent(p), covering(&want, p, 0..len));
            }
        }
        Ok(())
    }

    /// The longest route of `want` covering `p` with a length in `lens` and below `p`'s,
    /// by a look at every route: what `covering` must give.
    fn covering<K: Key>(want: &[Route<K>], p: Prefix<K>, lens: Range<u8>) -> Option<Route<K>> {
        want.iter()
            .filter(|r| r.prefix.covers(&p) && r.prefix.len() < p.len())
            .filter(|r| lens.contains(&r.prefix.len()))
            .max_by_key(|r| r.prefix.len())
            .copied()
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

    /// One bucket (10.1.0.0/18) made a B-tree by 400 /32s; a /20 and a /26 over some of them.
    /// Probes right after a covering route are answered by the walk back, probes after many
    /// /32s by the length-by-length searches, probes under neither by none.
    #[test]
    fn a_big_buckets_covering_route_is_found_by_the_walk_and_past_it() {
        let mut m = RouteMap::new();
        let mut want = Vec::new();
        let mut add = |p: Prefix<u32>, nh: NextHop| {
            m.set(p, nh);
            want.push(Route::new(p, nh));
        };
        add(Prefix::new_masked(0x0a01_1000, 20), 7);
        add(Prefix::new_masked(0x0a01_1f00, 26), 8);
        for i in 0..400u32 {
            add(
                Prefix::new_masked(0x0a01_0000 + i * 37, 32),
                100 + i as NextHop,
            );
        }
        want.sort_by_key(|r| r.prefix);
        assert!(matches!(
            m.buckets.get(&RouteMap::<u32>::bucket_of(0x0a01_0000)),
            Some(Bucket::Big(_))
        ));
        for a in (0x0a01_0000u32..0x0a01_4000).step_by(29) {
            for len in [32u8, 28, 24] {
                let p = Prefix::new_masked(a, len);
                for lens in [0..len, 19..len, 21..len, 18..27] {
                    assert_eq!(
                        m.covering(p, lens.clone()),
                        covering(&want, p, lens.clone()),
                        "{p:?} over {lens:?}"
                    );
                }
            }
        }
    }

    /// One bucket grows past the vector's limit into a B-tree and shrinks back, and at every
    /// step answers like one plain ordered map: exact gets, the bucket's routes in order, and
    /// the range under a prefix inside it.
    #[test]
    fn a_bucket_turns_into_a_tree_and_back() {
        let mut m = RouteMap::new();
        let mut plain: BTreeMap<Prefix<u32>, NextHop> = BTreeMap::new();
        // All inside 10.1.0.0/18 (one bucket), in a scattered order: /24s (many set more than
        // once) and /32s.
        let ps: Vec<Prefix<u32>> = (0..2 * Bucket::<u32>::SMALL_MAX as u32)
            .map(|i| {
                let x = i.wrapping_mul(2_654_435_761) & 0x3fff;
                let len = if i % 3 == 0 { 32 } else { 24 };
                Prefix::new_masked(0x0a01_0000 | x, len)
            })
            .collect();
        let check = |m: &RouteMap<u32>, plain: &BTreeMap<Prefix<u32>, NextHop>| {
            let want: Vec<Route<u32>> = plain.iter().map(|(p, n)| Route::new(*p, *n)).collect();
            assert_eq!(m.to_routes(), want);
            assert_eq!(m.len(), plain.len());
            let inner = Prefix::new_masked(0x0a01_2000u32, 20);
            let got: Vec<Route<u32>> = m.within(inner).collect();
            assert_eq!(got, inside(&want, inner));
            for p in plain.keys().take(20) {
                assert_eq!(m.get(p), plain.get(p).copied());
                // Inside the bucket, big or small, the covering route (here a /24 over a /32).
                assert_eq!(m.covering(*p, 0..p.len()), covering(&want, *p, 0..p.len()));
            }
        };
        for (i, p) in ps.iter().enumerate() {
            let nh = 1 + i as NextHop;
            assert_eq!(m.set(*p, nh), plain.insert(*p, nh).unwrap_or(NO_ROUTE));
            if i % 17 == 0 {
                check(&m, &plain);
            }
        }
        check(&m, &plain);
        let b = RouteMap::<u32>::bucket_of(0x0a01_0000);
        assert!(matches!(m.buckets.get(&b), Some(Bucket::Big(_))));
        for (i, p) in ps.iter().enumerate().rev() {
            assert_eq!(m.set(*p, NO_ROUTE), plain.remove(p).unwrap_or(NO_ROUTE));
            if i % 13 == 0 {
                check(&m, &plain);
            }
            if plain.len() == Bucket::<u32>::SMALL_MAX / 4 {
                assert!(matches!(m.buckets.get(&b), Some(Bucket::Small(_))));
            }
        }
        assert!(m.is_empty());
        assert!(m.buckets.is_empty() && m.keys.is_empty());
    }

    /// A bucket's key gives back its prefix, at the bucket's ends and every length from the
    /// bucket bits to the full width, and orders prefixes as the canonical order does.
    fn packs_both_ways<K: Key>(addrs: &[K]) {
        let b = RouteMap::<K>::B;
        let mut prefixes = Vec::new();
        for &a in addrs {
            for len in b..=K::BITS {
                let p = Prefix::new_masked(a, len);
                let base = RouteMap::<K>::bucket_addr(RouteMap::<K>::bucket_of(a));
                assert_eq!(unpack(pack(p), base), p, "{p:?}");
                prefixes.push(p);
            }
        }
        for p in &prefixes {
            for q in prefixes
                .iter()
                .filter(|q| q.addr().masked(b) == p.addr().masked(b))
            {
                assert_eq!(pack(*p).cmp(&pack(*q)), p.cmp(q), "{p:?} {q:?}");
            }
        }
    }

    #[test]
    fn a_buckets_keys_keep_prefix_and_order() {
        packs_both_ways::<u32>(&[
            0,
            u32::MAX,
            0x0a01_0000,
            0x0a01_3fff,
            0x0a01_2a80,
            0xc000_0001,
        ]);
        packs_both_ways::<u128>(&[
            0,
            u128::MAX,
            0x2001_0db8 << 96,
            (0x2001_0db8 << 96) | 1,
            (0x2001_0fff_ffff << 80) | (u128::MAX >> 48),
            0x2a00_1450_4001_0800 << 64,
        ]);
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
