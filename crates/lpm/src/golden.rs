//! The golden reference: a hash map per prefix length, searched from the longest length down.
//!
//! It is slow on purpose and small enough to be checked by eye, so that the fast engines can be
//! compared against it on random and real tables. Only tests and checking tools build it (the
//! `golden` feature).
//!
//! ## Updates
//!
//! As a reference it follows a [`RouteMap`] the simplest way there is: every
//! [`LpmUpdate::update`] rebuilds it from the whole map, whatever changed.
//!
//! ```text
//!   map (after the changes) ──to_routes──▶ Golden::build ──▶ replaces self
//! ```

use crate::key::Key;
use crate::prefix::{canonicalize, NextHop, Prefix, Route, NO_ROUTE};
use crate::update::{LpmUpdate, RouteMap};
use crate::{BuildError, Lpm, LpmBuild};
use std::collections::HashMap;

/// Longest-prefix match by brute force over one hash map per prefix length.
#[derive(Clone, Debug, Default)]
pub struct Golden<K: Key> {
    by_len: Vec<HashMap<K, NextHop>>,
    /// The lengths that have at least one prefix, longest first (only these are probed).
    lens: Vec<u8>,
    routes: usize,
}

impl<K: Key> Golden<K> {
    /// The matching prefix and its next hop, longest first.
    pub fn lookup_route(&self, addr: K) -> Option<(Prefix<K>, NextHop)> {
        for &len in &self.lens {
            let net = addr.masked(len);
            if let Some(&nh) = self.by_len[len as usize].get(&net) {
                return Some((Prefix::new_masked(net, len), nh));
            }
        }
        None
    }
}

impl<K: Key> Lpm<K> for Golden<K> {
    fn lookup(&self, addr: K) -> NextHop {
        self.lookup_route(addr).map_or(NO_ROUTE, |(_, nh)| nh)
    }

    fn memory_bytes(&self) -> usize {
        self.routes * (core::mem::size_of::<K>() + 4)
    }

    fn name(&self) -> &'static str {
        "golden"
    }
}

impl<K: Key> LpmBuild<K> for Golden<K> {
    type Config = ();

    fn build(routes: &[Route<K>], _: &()) -> Result<Self, BuildError> {
        let mut by_len = vec![HashMap::new(); K::BITS as usize + 1];
        let routes = canonicalize(routes);
        for r in &routes {
            by_len[r.prefix.len() as usize].insert(r.prefix.addr(), r.nexthop);
        }
        let lens = (0..=K::BITS)
            .rev()
            .filter(|&l| !by_len[l as usize].is_empty())
            .collect();
        Ok(Golden {
            by_len,
            lens,
            routes: routes.len(),
        })
    }
}

impl<K: Key> LpmUpdate<K> for Golden<K> {
    /// Rebuilds from `table`; `changed` is not needed. The engine is untouched on error.
    fn update(&mut self, table: &RouteMap<K>, _changed: &[Prefix<K>]) -> Result<(), BuildError> {
        *self = Golden::build(&table.to_routes(), &())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{check_updates, updates_and_probes, v4, v6, POOL4, POOL6};
    use proptest::prelude::*;

    #[test]
    fn announce_replace_withdraw_nested() {
        let mut map = RouteMap::new();
        let mut g = Golden::<u32>::build(&[], &()).unwrap();
        let steps = [
            v4([0, 0, 0, 0], 0, 1),
            v4([10, 0, 0, 0], 8, 2),
            v4([10, 0, 0, 1], 32, 3),
            v4([10, 0, 0, 0], 8, 4),
            v4([0, 0, 0, 0], 0, NO_ROUTE),
        ];
        for r in steps {
            map.set(r.prefix, r.nexthop);
            g.update(&map, &[r.prefix]).unwrap();
        }
        assert_eq!(g.lookup(0x0a00_0001), 3);
        assert_eq!(g.lookup(0x0a00_0002), 4);
        assert_eq!(g.lookup(0x0b00_0000), NO_ROUTE);

        let mut map = RouteMap::new();
        let mut g = Golden::<u128>::build(&[], &()).unwrap();
        let top = v6(u128::MAX, 128, 9);
        let half = v6(u128::MAX, 1, 8);
        for r in [top, half, v6(0, 0, 7)] {
            map.set(r.prefix, r.nexthop);
        }
        g.update(&map, &[top.prefix, half.prefix]).unwrap();
        assert_eq!(g.lookup(u128::MAX), 9);
        assert_eq!(g.lookup(u128::MAX - 1), 8);
        assert_eq!(g.lookup(0), 7);
        map.set(top.prefix, NO_ROUTE);
        g.update(&map, &[top.prefix, top.prefix]).unwrap();
        assert_eq!(g.lookup(u128::MAX), 8);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn v4_updates_match_a_fresh_build(case in updates_and_probes(POOL4)) {
            check_updates::<u32, Golden<u32>>(&(), &case, "golden v4");
        }

        #[test]
        fn v6_updates_match_a_fresh_build(case in updates_and_probes(POOL6)) {
            check_updates::<u128, Golden<u128>>(&(), &case, "golden v6");
        }
    }
}
