//! The golden reference: a hash map per prefix length, searched from the longest length down.
//!
//! It is slow on purpose and small enough to be checked by eye, so that the fast engines can be
//! compared against it on random and real tables. Only tests and checking tools build it (the
//! `golden` feature).

use crate::key::Key;
use crate::prefix::{canonicalize, NextHop, Prefix, Route, NO_ROUTE};
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
