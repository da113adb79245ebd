//! The values a table file's routes carry, and the gateway addresses behind them.
//!
//! A [`Table`](crate::Table) stores each route's next hop as a small integer, the form the
//! lookup engines take directly (the benchmarks build engines from a table as it is). These
//! values belong to the table alone: the router never forwards by them, since loading a
//! table into the router (`vfsr_router::Router::load_table`) names each value's next hop and
//! the RIB's next-hop table, the one numbering the workers read, interns it. Two kinds share
//! the value space without overlap:
//!
//! ```text
//!   0          no route                        (vfsr_lpm::NO_ROUTE)
//!   1 ..= 64   nh64 synthetic next hops         (crate::nh64, for tables without next hops)
//!   65 ..      gateways, numbered in first-seen order by a TableGateways
//! ```
//!
//! [`TableGateways`] interns the gateways of one table: the first gateway a reader meets
//! gets 65, the next new one 66, and so on; a gateway seen again gets its old index. Both
//! families share one numbering (an IPv6 gateway may be 66 after an IPv4 gateway took 65), so a
//! single table serves a [`Table`](crate::Table) holding routes of both families, and the
//! reverse map turns an index back into the address for `vfsr lookup`.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

use vfsr_lpm::{NextHop, NO_ROUTE};

use crate::nh64::is_nh64;

/// The index given to the first gateway; everything below is "no route" or nh64.
pub const FIRST_GATEWAY_NEXTHOP: NextHop = 65;

/// A table's gateways and the route values standing for them (and back).
///
/// Indices are dense: the `i`-th distinct gateway (from 0) has index
/// `FIRST_GATEWAY_NEXTHOP + i`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableGateways {
    /// Gateway address to its index.
    by_gateway: HashMap<IpAddr, NextHop>,
    /// Gateways in index order: `gateways[i]` has index `FIRST_GATEWAY_NEXTHOP + i`.
    gateways: Vec<IpAddr>,
}

impl TableGateways {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The index of `gateway`, giving it the next free index if it is new. `None` only when
    /// the 32-bit index space is exhausted (more than four billion distinct gateways).
    pub fn intern(&mut self, gateway: IpAddr) -> Option<NextHop> {
        if let Some(&nh) = self.by_gateway.get(&gateway) {
            return Some(nh);
        }
        let offset = NextHop::try_from(self.gateways.len()).ok()?;
        let nh = FIRST_GATEWAY_NEXTHOP.checked_add(offset)?;
        self.by_gateway.insert(gateway, nh);
        self.gateways.push(gateway);
        Some(nh)
    }

    /// The index of `gateway`, if it has one.
    pub fn index_of(&self, gateway: IpAddr) -> Option<NextHop> {
        self.by_gateway.get(&gateway).copied()
    }

    /// The gateway behind index `nexthop`, if `nexthop` is a gateway index of this table.
    pub fn gateway(&self, nexthop: NextHop) -> Option<IpAddr> {
        let offset = nexthop.checked_sub(FIRST_GATEWAY_NEXTHOP)?;
        self.gateways.get(usize::try_from(offset).ok()?).copied()
    }

    /// Number of distinct gateways.
    pub fn len(&self) -> usize {
        self.gateways.len()
    }

    /// Whether no gateway has been seen.
    pub fn is_empty(&self) -> bool {
        self.gateways.is_empty()
    }

    /// `(index, gateway)` pairs in index order.
    pub fn iter(&self) -> impl Iterator<Item = (NextHop, IpAddr)> + '_ {
        (FIRST_GATEWAY_NEXTHOP..).zip(self.gateways.iter().copied())
    }

    /// What a next-hop index stands for, for printing.
    pub fn describe(&self, nexthop: NextHop) -> NextHopInfo {
        if nexthop == NO_ROUTE {
            NextHopInfo::NoRoute
        } else if is_nh64(nexthop) {
            NextHopInfo::Nh64(nexthop)
        } else if let Some(gw) = self.gateway(nexthop) {
            NextHopInfo::Gateway(gw)
        } else {
            NextHopInfo::Unknown(nexthop)
        }
    }
}

/// The meaning of a next-hop index (see [`TableGateways::describe`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextHopInfo {
    /// `0`: no prefix covers the address.
    NoRoute,
    /// `1..=64`: a synthetic nh64 next hop.
    Nh64(NextHop),
    /// A gateway read from a table.
    Gateway(IpAddr),
    /// An index this table does not know.
    Unknown(NextHop),
}

impl fmt::Display for NextHopInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NextHopInfo::NoRoute => write!(f, "no route"),
            NextHopInfo::Nh64(nh) => write!(f, "nh64 #{nh}"),
            NextHopInfo::Gateway(gw) => write!(f, "via {gw}"),
            NextHopInfo::Unknown(nh) => write!(f, "next hop {nh} (unknown)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_seen_order_from_65_and_back() {
        let mut t = TableGateways::new();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(t.intern(a), Some(65));
        assert_eq!(t.intern(b), Some(66));
        assert_eq!(t.intern(a), Some(65));
        assert_eq!(t.len(), 2);
        assert_eq!(t.gateway(65), Some(a));
        assert_eq!(t.gateway(66), Some(b));
        assert_eq!(t.gateway(67), None);
        assert_eq!(t.gateway(3), None);
        assert_eq!(t.index_of(b), Some(66));
        assert_eq!(t.iter().collect::<Vec<_>>(), vec![(65, a), (66, b)]);
        assert_eq!(t.describe(0).to_string(), "no route");
        assert_eq!(t.describe(64).to_string(), "nh64 #64");
        assert_eq!(t.describe(66).to_string(), "via 2001:db8::1");
        assert_eq!(t.describe(99).to_string(), "next hop 99 (unknown)");
    }
}
