//! `ip_network_table`: `IpNetworkTable`, a pair of tree bitmaps (one per family) from the
//! `ip_network_table-deps-treebitmap` fork of `treebitmap`.

use super::PeerError;
use ip_network::{IpNetworkError, Ipv4Network, Ipv6Network};
use ip_network_table::IpNetworkTable;
use ip_network_table_deps_treebitmap::IpLookupTable;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;
use vfsr_lpm::{canonicalize, Key, Lpm, NextHop, Prefix, Route, NO_ROUTE};

pub(crate) const NAME: &str = "ip_network_table";

/// A prefix `ip_network` refused as a network: the prefix and its error.
#[derive(Debug, thiserror::Error)]
#[error("{prefix} is not a network: {source}")]
pub struct NotANetwork {
    prefix: String,
    source: IpNetworkError,
}

impl NotANetwork {
    /// The error of `prefix`, given `ip_network`'s.
    fn of(prefix: impl std::fmt::Display) -> impl FnOnce(IpNetworkError) -> NotANetwork {
        move |source| NotANetwork {
            prefix: prefix.to_string(),
            source,
        }
    }
}

/// The per-family calls of `ip_network_table` (sealed: implemented for `u32` and `u128`).
pub trait IpntKey: Key + private::Sealed {
    #[doc(hidden)]
    fn insert(
        t: &mut IpNetworkTable<NextHop>,
        p: Prefix<Self>,
        nh: NextHop,
    ) -> Result<(), NotANetwork>;
    #[doc(hidden)]
    fn longest(t: &IpNetworkTable<NextHop>, addr: Self) -> Option<NextHop>;
    #[doc(hidden)]
    fn count(t: &IpNetworkTable<NextHop>) -> usize;
    #[doc(hidden)]
    fn rebuilt_mem_usage(t: &IpNetworkTable<NextHop>) -> (usize, usize);
}

mod private {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u128 {}
}

impl IpntKey for u32 {
    fn insert(
        t: &mut IpNetworkTable<NextHop>,
        p: Prefix<u32>,
        nh: NextHop,
    ) -> Result<(), NotANetwork> {
        let net =
            Ipv4Network::new(Ipv4Addr::from(p.addr()), p.len()).map_err(NotANetwork::of(p))?;
        t.insert(net, nh);
        Ok(())
    }

    #[inline]
    fn longest(t: &IpNetworkTable<NextHop>, addr: u32) -> Option<NextHop> {
        t.longest_match_ipv4(Ipv4Addr::from(addr))
            .map(|(_, nh)| *nh)
    }

    fn count(t: &IpNetworkTable<NextHop>) -> usize {
        t.len().0
    }

    fn rebuilt_mem_usage(t: &IpNetworkTable<NextHop>) -> (usize, usize) {
        let mut twin: IpLookupTable<Ipv4Addr, NextHop> = IpLookupTable::new();
        for (net, nh) in t.iter_ipv4() {
            twin.insert(net.network_address(), u32::from(net.netmask()), *nh);
        }
        twin.mem_usage()
    }
}

impl IpntKey for u128 {
    fn insert(
        t: &mut IpNetworkTable<NextHop>,
        p: Prefix<u128>,
        nh: NextHop,
    ) -> Result<(), NotANetwork> {
        let net =
            Ipv6Network::new(Ipv6Addr::from(p.addr()), p.len()).map_err(NotANetwork::of(p))?;
        t.insert(net, nh);
        Ok(())
    }

    #[inline]
    fn longest(t: &IpNetworkTable<NextHop>, addr: u128) -> Option<NextHop> {
        t.longest_match_ipv6(Ipv6Addr::from(addr))
            .map(|(_, nh)| *nh)
    }

    fn count(t: &IpNetworkTable<NextHop>) -> usize {
        t.len().1
    }

    fn rebuilt_mem_usage(t: &IpNetworkTable<NextHop>) -> (usize, usize) {
        let mut twin: IpLookupTable<Ipv6Addr, NextHop> = IpLookupTable::new();
        for (net, nh) in t.iter_ipv6() {
            twin.insert(net.network_address(), u32::from(net.netmask()), *nh);
        }
        twin.mem_usage()
    }
}

/// [`ip_network_table::IpNetworkTable`] behind [`Lpm`]. Lookups are the crate's
/// `longest_match_ipv4` / `longest_match_ipv6`.
///
/// `memory_bytes` is measured, not guessed, but indirectly: `IpNetworkTable` does not expose
/// the `mem_usage` of the tree bitmaps it holds, so the first call re-inserts the table's own
/// contents into a twin `IpLookupTable` from the same backend crate, reads the twin's
/// `mem_usage` (node and result arrays), drops the twin and caches the sum. The twin holds the
/// same prefixes, though inserted in iteration order, so its figure can differ slightly from
/// the original's. The work happens outside [`Self::build`], so it does not count as build time.
pub struct IpNetworkTablePeer<K: IpntKey> {
    table: IpNetworkTable<NextHop>,
    mem: OnceLock<usize>,
    _family: core::marker::PhantomData<K>,
}

impl<K: IpntKey> IpNetworkTablePeer<K> {
    /// Builds the table from `routes` (canonical order; last route per prefix wins).
    pub fn build(routes: &[Route<K>]) -> Result<Self, PeerError> {
        let mut table = IpNetworkTable::new();
        for r in canonicalize(routes) {
            K::insert(&mut table, r.prefix, r.nexthop)
                .map_err(|e| PeerError::build(NAME, e.to_string()))?;
        }
        Ok(IpNetworkTablePeer {
            table,
            mem: OnceLock::new(),
            _family: core::marker::PhantomData,
        })
    }

    /// Number of prefixes in the table.
    pub fn len(&self) -> usize {
        K::count(&self.table)
    }

    /// Whether the table holds no prefix.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: IpntKey> Lpm<K> for IpNetworkTablePeer<K> {
    #[inline]
    fn lookup(&self, addr: K) -> NextHop {
        K::longest(&self.table, addr).unwrap_or(NO_ROUTE)
    }

    fn memory_bytes(&self) -> usize {
        *self.mem.get_or_init(|| {
            let (nodes, results) = K::rebuilt_mem_usage(&self.table);
            nodes + results + core::mem::size_of::<IpNetworkTable<NextHop>>()
        })
    }

    fn name(&self) -> &'static str {
        NAME
    }
}
