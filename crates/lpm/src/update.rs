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

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::key::Key;
use crate::prefix::{NextHop, Prefix, Route, NO_ROUTE};
use crate::{BuildError, LpmBuild};

/// The canonical table of one address family: one next hop per prefix, ordered by (address,
/// length), so that the routes inside a prefix form one contiguous range.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteMap<K: Key> {
    map: BTreeMap<Prefix<K>, NextHop>,
}

impl<K: Key> RouteMap<K> {
    /// An empty map.
    pub fn new() -> Self {
        RouteMap {
            map: BTreeMap::new(),
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

    /// Sets `prefix` to `nexthop` ([`NO_ROUTE`] removes it); returns the previous next hop
    /// ([`NO_ROUTE`] if there was none).
    pub fn set(&mut self, prefix: Prefix<K>, nexthop: NextHop) -> NextHop {
        if nexthop == NO_ROUTE {
            self.map.remove(&prefix).unwrap_or(NO_ROUTE)
        } else {
            self.map.insert(prefix, nexthop).unwrap_or(NO_ROUTE)
        }
    }

    /// The next hop of exactly `prefix`.
    pub fn get(&self, prefix: &Prefix<K>) -> Option<NextHop> {
        self.map.get(prefix).copied()
    }

    /// Number of prefixes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every route in canonical order.
    pub fn iter(&self) -> impl Iterator<Item = Route<K>> + '_ {
        self.map.iter().map(|(p, n)| Route::new(*p, *n))
    }

    /// Every route as a list in canonical order (what [`LpmBuild::build`] takes).
    pub fn to_routes(&self) -> Vec<Route<K>> {
        self.iter().collect()
    }

    /// The routes whose prefix lies inside `outer` (`outer` itself included), in order.
    pub fn within(&self, outer: Prefix<K>) -> impl Iterator<Item = Route<K>> + '_ {
        let last = last_addr(outer);
        let hi = Prefix::new_masked(last, K::BITS);
        self.map
            .range((Bound::Included(outer), Bound::Included(hi)))
            .filter(move |(p, _)| outer.covers(p))
            .map(|(p, n)| Route::new(*p, *n))
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

    /// Makes, from the table the engine was built from, any side state updates need, so the
    /// first update does not pay for it. Optional: `update` makes it when missing.
    fn prepare(&mut self, _table: &RouteMap<K>) {}
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
