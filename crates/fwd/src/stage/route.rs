//! Stage 5, `route`: what the FIB's answer means.
//!
//! The FIB maps the destination to a next-hop index (0 = no route); the published next-hop
//! table says what the index is (the split L3 side: a route never holds link-layer data).
//!
//! ```text
//!   index 0 ──────────────────────────▶ no_route      (ICMP net unreachable / no route)
//!   no entry in the next-hop table ───▶ nexthop_missing
//!   Gateway { addr, ifindex }   ──────▶ Via  { neighbor = addr }
//!   Connected { ifindex }       ──────▶ Via  { neighbor = the destination itself }
//!   Group { members, weights }  ──────▶ Group (the `ecmp` stage picks a member)
//!   Local                       ──────▶ Local (punt)
//!   Blackhole                   ──────▶ blackhole     (silent)
//!   Unreachable                 ──────▶ unreachable   (ICMP host unreachable / reject route)
//!   a gateway without interface, or an unknown port ─▶ no_egress_port
//!   Opaque (benchmark tables' synthetic values) ─────▶ nexthop_missing
//! ```

use std::net::IpAddr;

use vfsr_fib::nexthop::{Forward, NhSnapshot};

use crate::counters::DropReason;

/// What `route` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteOutcome<'a> {
    /// Send through `ifindex` to `neighbor` (the gateway, or the destination if connected).
    Via {
        /// The single next hop's index.
        nh: u32,
        /// Egress interface.
        ifindex: u32,
        /// Whose MAC to use; `None` for a connected route (the destination's).
        gateway: Option<IpAddr>,
    },
    /// An ECMP group: pick one of these next-hop indices, in proportion to their weights.
    Group {
        /// The group's index.
        nh: u32,
        /// The members' indices.
        members: &'a [u32],
        /// `weights[i]` is the weight of `members[i]`.
        weights: &'a [u16],
    },
    /// For the router.
    Local,
    /// Dropped; `icmp` says whether the sender gets an ICMP unreachable.
    Drop {
        /// The reason.
        reason: DropReason,
        /// Whether to answer with ICMP Destination Unreachable.
        icmp: bool,
    },
}

/// Runs the stage: `nh` is the FIB's answer.
#[inline]
pub fn route(nh: u32, table: &NhSnapshot) -> RouteOutcome<'_> {
    if nh == 0 {
        return RouteOutcome::Drop {
            reason: DropReason::NoRoute,
            icmp: true,
        };
    }
    let Some(entry) = table.get(nh) else {
        return RouteOutcome::Drop {
            reason: DropReason::NextHopMissing,
            icmp: false,
        };
    };
    match &entry.forward {
        Forward::Group { members, weights } => RouteOutcome::Group {
            nh,
            members,
            weights,
        },
        f => single(nh, f).unwrap_or(RouteOutcome::Drop {
            reason: DropReason::NextHopMissing,
            icmp: false,
        }),
    }
}

/// The outcome of a single (non-group) next hop; `None` for a group.
#[inline]
pub fn single(nh: u32, forward: &Forward) -> Option<RouteOutcome<'static>> {
    Some(match forward {
        Forward::Gateway {
            addr,
            ifindex: Some(ifindex),
        } => RouteOutcome::Via {
            nh,
            ifindex: *ifindex,
            gateway: Some(*addr),
        },
        Forward::Gateway { ifindex: None, .. } => RouteOutcome::Drop {
            reason: DropReason::NoEgressPort,
            icmp: false,
        },
        Forward::Connected { ifindex } => RouteOutcome::Via {
            nh,
            ifindex: *ifindex,
            gateway: None,
        },
        Forward::Local => RouteOutcome::Local,
        Forward::Blackhole => RouteOutcome::Drop {
            reason: DropReason::Blackhole,
            icmp: false,
        },
        Forward::Unreachable => RouteOutcome::Drop {
            reason: DropReason::Unreachable,
            icmp: true,
        },
        Forward::Opaque(_) => RouteOutcome::Drop {
            reason: DropReason::NextHopMissing,
            icmp: false,
        },
        Forward::Group { .. } => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfsr_fib::nexthop::NhEntry;

    fn table() -> NhSnapshot {
        let e = |forward| {
            Some(NhEntry {
                gen: 0,
                version: 0,
                forward,
            })
        };
        NhSnapshot::from_entries(vec![
            None,
            e(Forward::Gateway {
                addr: "192.0.2.1".parse().unwrap(),
                ifindex: Some(2),
            }),
            e(Forward::Connected { ifindex: 3 }),
            e(Forward::Local),
            e(Forward::Blackhole),
            e(Forward::Unreachable),
            e(Forward::group(vec![1, 2])),
            e(Forward::Gateway {
                addr: "192.0.2.9".parse().unwrap(),
                ifindex: None,
            }),
            e(Forward::Opaque(3)),
            e(Forward::Group {
                members: vec![1, 2].into(),
                weights: vec![3, 1].into(),
            }),
        ])
    }

    #[test]
    fn every_outcome() {
        let t = table();
        let drop = |reason, icmp| RouteOutcome::Drop { reason, icmp };
        assert_eq!(route(0, &t), drop(DropReason::NoRoute, true));
        assert_eq!(
            route(1, &t),
            RouteOutcome::Via {
                nh: 1,
                ifindex: 2,
                gateway: Some("192.0.2.1".parse().unwrap())
            }
        );
        assert_eq!(
            route(2, &t),
            RouteOutcome::Via {
                nh: 2,
                ifindex: 3,
                gateway: None
            }
        );
        assert_eq!(route(3, &t), RouteOutcome::Local);
        assert_eq!(route(4, &t), drop(DropReason::Blackhole, false));
        assert_eq!(route(5, &t), drop(DropReason::Unreachable, true));
        assert_eq!(
            route(6, &t),
            RouteOutcome::Group {
                nh: 6,
                members: &[1, 2],
                weights: &[1, 1]
            }
        );
        assert_eq!(
            route(9, &t),
            RouteOutcome::Group {
                nh: 9,
                members: &[1, 2],
                weights: &[3, 1]
            }
        );
        assert_eq!(route(7, &t), drop(DropReason::NoEgressPort, false));
        assert_eq!(route(8, &t), drop(DropReason::NextHopMissing, false));
        assert_eq!(route(99, &t), drop(DropReason::NextHopMissing, false));
    }
}
