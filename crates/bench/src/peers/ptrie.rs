//! `prefix-trie`: a tree bitmap keyed by `(address, length)` pairs.

use super::PeerError;
use prefix_trie::PrefixMap;
use vfsr_lpm::{canonicalize, Key, Lpm, NextHop, Route, NO_ROUTE};

pub(crate) const NAME: &str = "prefix-trie";

/// [`prefix_trie::PrefixMap`] behind [`Lpm`]. Lookups are `PrefixMap::get_lpm` of the address
/// as a full-length prefix.
///
/// The map is keyed by `(address, length)` tuples, for which the crate implements its `Prefix`
/// trait: that is vfsr's own key layout (most significant bit first), so neither building nor
/// looking up converts to `ipnet` types.
///
/// `memory_bytes` is the crate's own `PrefixMap::mem_size` (its node and value tables; the
/// values are plain `u32` next hops, so nothing lives outside them).
pub struct PrefixTriePeer<K: Key> {
    map: PrefixMap<(K, u8), NextHop>,
}

impl<K> PrefixTriePeer<K>
where
    K: Key,
    (K, u8): prefix_trie::Prefix<R = K>,
{
    /// Builds the map from `routes` (canonical order; last route per prefix wins). Never fails
    /// for well-formed routes; the `Result` keeps the signature common to every peer.
    pub fn build(routes: &[Route<K>]) -> Result<Self, PeerError> {
        let mut map: PrefixMap<(K, u8), NextHop> = PrefixMap::new();
        for r in canonicalize(routes) {
            map.insert((r.prefix.addr(), r.prefix.len()), r.nexthop);
        }
        Ok(PrefixTriePeer { map })
    }
}

impl<K> Lpm<K> for PrefixTriePeer<K>
where
    K: Key,
    (K, u8): prefix_trie::Prefix<R = K>,
    PrefixMap<(K, u8), NextHop>: Send + Sync,
{
    #[inline]
    fn lookup(&self, addr: K) -> NextHop {
        match self.map.get_lpm(&(addr, K::BITS)) {
            Some((_, nh)) => *nh,
            None => NO_ROUTE,
        }
    }

    fn memory_bytes(&self) -> usize {
        self.map.mem_size()
    }

    fn name(&self) -> &'static str {
        NAME
    }
}
