//! `rotonda-store`: NLnet Labs' RIB store (a tree bitmap over concurrent hash tables), used
//! in memory only.

use super::{heap_in_use, PeerError};
use core::fmt;
use rotonda_store::addr::Prefix as RPrefix;
use rotonda_store::epoch;
use rotonda_store::match_options::{IncludeHistory, MatchOptions, MatchType};
use rotonda_store::prefix_record::{Meta, Record, RouteStatus};
use rotonda_store::rib::config::MemoryOnlyConfig;
use rotonda_store::rib::StarCastRib;
use std::net::IpAddr;
use vfsr_lpm::{canonicalize, Key, Lpm, NextHop, Route, NO_ROUTE};

pub(crate) const NAME: &str = "rotonda-store";

/// The only multi-unique id ("mui", rotonda's name for the peer a route came from) the
/// adapter uses: the benchmark's table has one route per prefix.
const MUI: u32 = 1;

/// The record stored with each prefix: the next hop, little endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextHopMeta([u8; 4]);

impl NextHopMeta {
    fn new(nh: NextHop) -> Self {
        NextHopMeta(nh.to_le_bytes())
    }

    fn nexthop(&self) -> NextHop {
        u32::from_le_bytes(self.0)
    }
}

impl fmt::Display for NextHopMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "nh {}", self.nexthop())
    }
}

impl AsRef<[u8]> for NextHopMeta {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for NextHopMeta {
    fn from(v: Vec<u8>) -> Self {
        let mut b = [0u8; 4];
        for (d, s) in b.iter_mut().zip(v.iter()) {
            *d = *s;
        }
        NextHopMeta(b)
    }
}

impl Meta for NextHopMeta {
    type Orderable<'a> = u32;
    type TBI = ();

    fn as_orderable(&self, _tbi: ()) -> u32 {
        self.nexthop()
    }
}

/// The per-family conversion to rotonda's prefix type (sealed: `u32` and `u128`).
pub trait RotondaKey: Key + private::Sealed {
    #[doc(hidden)]
    fn ip(addr: Self) -> IpAddr;
}

mod private {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u128 {}
}

impl RotondaKey for u32 {
    #[inline]
    fn ip(addr: u32) -> IpAddr {
        IpAddr::V4(addr.into())
    }
}

impl RotondaKey for u128 {
    #[inline]
    fn ip(addr: u128) -> IpAddr {
        IpAddr::V6(addr.into())
    }
}

/// [`rotonda_store::rib::StarCastRib`] (in-memory configuration) behind [`Lpm`]. A lookup is
/// `match_prefix` of the address as a full-length prefix with `MatchType::LongestMatch`, no
/// less- or more-specifics and no history, under one epoch guard per call (per batch for
/// [`Lpm::lookup_bulk`]). The store is a RIB rather than a FIB: a query returns the matching
/// prefix with its records in a freshly allocated vector, and that cost is part of what is
/// measured.
///
/// rotonda-store 0.5 finds the longest match by probing the store for the search prefix
/// truncated to every length from the full width down to /1 (one hash-table probe per length)
/// and never returns a default route (/0) as a match. The adapter therefore keeps the next hop
/// of a /0 beside the store (the route is inserted into the store as well) and answers it when
/// the store finds nothing: one branch per lookup, which is what a user of the crate has to add.
///
/// `memory_bytes` is an estimate: the store does not report its footprint, so [`Self::build`]
/// reads glibc's count of bytes allocated and not freed (`mallinfo2`) before and after it fills
/// the store and keeps the difference. Allocations made by other threads during the build
/// count too, and with a global allocator other than glibc's malloc the figure is 0.
pub struct RotondaPeer<K: RotondaKey> {
    rib: StarCastRib<NextHopMeta, MemoryOnlyConfig>,
    mem: usize,
    default: NextHop,
    opts: MatchOptions,
    _family: core::marker::PhantomData<K>,
}

impl<K: RotondaKey> RotondaPeer<K> {
    /// Builds the store from `routes` (canonical order; last route per prefix wins).
    pub fn build(routes: &[Route<K>]) -> Result<Self, PeerError> {
        let routes = canonicalize(routes);
        let before = heap_in_use();
        let rib = StarCastRib::<NextHopMeta, MemoryOnlyConfig>::try_default()
            .map_err(|e| PeerError::build(NAME, format!("cannot create the store: {e}")))?;
        for r in &routes {
            let p = RPrefix::new(K::ip(r.prefix.addr()), r.prefix.len()).map_err(|e| {
                PeerError::build(
                    NAME,
                    format!("{:?}/{}: {e}", r.prefix.addr(), r.prefix.len()),
                )
            })?;
            let rec = Record::new(MUI, 0, RouteStatus::Active, NextHopMeta::new(r.nexthop));
            rib.insert(&p, rec, None).map_err(|e| {
                PeerError::build(
                    NAME,
                    format!("insert {:?}/{}: {e}", r.prefix.addr(), r.prefix.len()),
                )
            })?;
        }
        let mem = match (before, heap_in_use()) {
            (Some(b), Some(a)) => a.saturating_sub(b),
            _ => 0,
        };
        let default = routes
            .iter()
            .find(|r| r.prefix.is_empty())
            .map_or(NO_ROUTE, |r| r.nexthop);
        Ok(RotondaPeer {
            rib,
            mem,
            default,
            opts: MatchOptions {
                match_type: MatchType::LongestMatch,
                include_withdrawn: false,
                include_less_specifics: false,
                include_more_specifics: false,
                mui: None,
                include_history: IncludeHistory::None,
            },
            _family: core::marker::PhantomData,
        })
    }

    #[inline]
    fn lookup_in(&self, addr: K, guard: &epoch::Guard) -> NextHop {
        let Ok(p) = RPrefix::new(K::ip(addr), K::BITS) else {
            return self.default;
        };
        match self.rib.match_prefix(&p, &self.opts, guard) {
            Ok(res) if res.prefix.is_some() => res
                .records
                .first()
                .map_or(self.default, |r| r.meta.nexthop()),
            _ => self.default,
        }
    }
}

impl<K: RotondaKey> Lpm<K> for RotondaPeer<K> {
    fn lookup(&self, addr: K) -> NextHop {
        let guard = epoch::pin();
        self.lookup_in(addr, &guard)
    }

    fn lookup_bulk(&self, addrs: &[K], out: &mut [NextHop]) {
        let guard = epoch::pin();
        for (a, o) in addrs.iter().zip(out.iter_mut()) {
            *o = self.lookup_in(*a, &guard);
        }
    }

    fn memory_bytes(&self) -> usize {
        self.mem
    }

    fn name(&self) -> &'static str {
        NAME
    }
}
