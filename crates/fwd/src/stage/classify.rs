//! Stage 3, `classify`: forward, or is it for the router?
//!
//! ```text
//!                         own address / subnet broadcast / 255.255.255.255 ──▶ punt (by class)
//!   valid IP packet ──▶   link-local multicast (224.0.0.0/24, ff02::/16)   ──▶ punt (by class)
//!                         other multicast                                  ──▶ multicast_not_forwarded
//!                         router alert / hop-by-hop options                ──▶ punt slow_path
//!                         sent to a link broadcast/multicast MAC           ──▶ broadcast_not_forwarded
//!                         IPv6 link-local source or destination            ──▶ ip6_link_local
//!                         anything else                                    ──▶ forward
//! ```
//!
//! The punt class decides which control-plane queue (and rate limit) a packet goes to, so a
//! flood of one kind cannot starve another: ARP and ND, routing protocols (BGP on TCP 179,
//! OSPF, RIP, BFD, VRRP, PIM, IGMP), ICMP, everything else. RFC 1812 5.3.4 forbids forwarding a
//! packet that arrived as a link-layer broadcast; RFC 4291 2.5.6 forbids forwarding one with a
//! link-local source or destination.

use crate::counters::{DropReason, PuntClass};
use crate::port::Ports;
use crate::stage::ip4_input::Ip4Meta;
use crate::stage::ip6_input::{is_multicast6, Ip6Meta};

/// What `classify` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Transit traffic: route it.
    Forward,
    /// For the router.
    Punt(PuntClass),
    /// Dropped.
    Drop(DropReason),
}

/// The punt class of a packet to the router, from its protocol and ports.
#[inline]
pub fn punt_class(protocol: u8, ports: (u16, u16), icmp6_type: Option<u8>) -> PuntClass {
    const ROUTING_UDP: [u16; 5] = [520, 521, 3784, 3785, 4784];
    match protocol {
        1 => PuntClass::Icmp,
        58 => match icmp6_type {
            Some(133..=137) => PuntClass::ArpNd,
            Some(143) | Some(130..=132) => PuntClass::Routing, // MLD
            _ => PuntClass::Icmp,
        },
        2 | 89 | 103 | 112 => PuntClass::Routing,
        6 if ports.0 == 179 || ports.1 == 179 => PuntClass::Routing,
        17 if ROUTING_UDP.contains(&ports.0) || ROUTING_UDP.contains(&ports.1) => {
            PuntClass::Routing
        }
        _ => PuntClass::Local,
    }
}

/// Runs the stage on an IPv4 packet; `l4` reads its transport ports, asked only for a
/// packet to the router (a transit packet's ports are read later, if at all).
#[inline(always)]
pub fn classify4(
    meta: &Ip4Meta,
    link_broadcast: bool,
    ports: &Ports,
    l4: impl FnOnce() -> (u16, u16),
) -> Class {
    let dst = meta.dst;
    if dst == u32::MAX || ports.is_local4(dst) {
        return Class::Punt(punt_class(meta.protocol, l4(), None));
    }
    if dst >> 28 == 0xe {
        if dst >> 8 == 0xe0_00_00 {
            return Class::Punt(punt_class(meta.protocol, l4(), None));
        }
        return Class::Drop(DropReason::MulticastNotForwarded);
    }
    if link_broadcast {
        return Class::Drop(DropReason::BroadcastNotForwarded);
    }
    if meta.router_alert {
        return Class::Punt(PuntClass::SlowPath);
    }
    Class::Forward
}

#[inline]
fn is_link_local6(a: u128) -> bool {
    (a >> 118) == (0xfe80 >> 6)
}

/// Runs the stage on an IPv6 packet; `upper` reads its transport ports and, when the upper
/// layer is ICMPv6, the ICMPv6 type, asked only for a packet to the router.
#[inline(always)]
pub fn classify6(
    meta: &Ip6Meta,
    link_multicast: bool,
    ports: &Ports,
    upper: impl FnOnce() -> ((u16, u16), Option<u8>),
) -> Class {
    let dst = meta.dst;
    if ports.is_local6(dst) {
        let (l4, icmp6_type) = upper();
        return Class::Punt(punt_class(meta.upper, l4, icmp6_type));
    }
    if is_multicast6(dst) {
        // Interface-local (ff01) and link-local (ff02) scope: the router listens to those
        // (all-nodes, all-routers, solicited-node, OSPF, RIPng, MLD, PIM).
        let scope = (dst >> 112) & 0x000f;
        if scope <= 2 {
            let (l4, icmp6_type) = upper();
            return Class::Punt(punt_class(meta.upper, l4, icmp6_type));
        }
        return Class::Drop(DropReason::MulticastNotForwarded);
    }
    if link_multicast {
        return Class::Drop(DropReason::BroadcastNotForwarded);
    }
    if meta.hop_by_hop {
        return Class::Punt(PuntClass::SlowPath);
    }
    if is_link_local6(meta.src) || is_link_local6(dst) {
        return Class::Drop(DropReason::Ip6LinkLocal);
    }
    Class::Forward
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::{Port, Ports};
    use std::net::{Ipv4Addr, Ipv6Addr};
    use vfsr_neigh::{NeighborConfig, NeighborTable};
    use vfsr_wire::MacAddr;

    fn ports() -> Ports {
        let arp: NeighborTable<Ipv4Addr, ()> = NeighborTable::new(NeighborConfig::default());
        let nd: NeighborTable<Ipv6Addr, ()> = NeighborTable::new(NeighborConfig::default());
        let port = Port {
            ifindex: 1,
            name: "p1".to_string(),
            mac: MacAddr([2, 0, 0, 0, 0, 1]),
            mtu: 1500,
            addrs4: vec![(Ipv4Addr::new(192, 0, 2, 254), 24)],
            addrs6: vec![("2001:db8::fe".parse::<Ipv6Addr>().unwrap(), 64)],
            arp: arp.reader(),
            nd: nd.reader(),
        };
        Ports::new(vec![port]).unwrap()
    }

    fn m4(dst: [u8; 4], protocol: u8) -> Ip4Meta {
        Ip4Meta {
            src: u32::from(Ipv4Addr::new(192, 0, 2, 1)),
            dst: u32::from(Ipv4Addr::from(dst)),
            ttl: 64,
            protocol,
            header_len: 20,
            total_len: 40,
            df: false,
            later_fragment: false,
            options: false,
            router_alert: false,
        }
    }

    #[test]
    fn ipv4_classes() {
        let p = ports();
        let c = |dst, proto, l4, bcast| classify4(&m4(dst, proto), bcast, &p, || l4);
        assert_eq!(c([198, 51, 100, 1], 17, (1, 2), false), Class::Forward);
        // A transit packet's ports are not read here.
        let read = std::cell::Cell::new(false);
        let transit = m4([198, 51, 100, 1], 17);
        let l4 = || {
            read.set(true);
            (1, 2)
        };
        assert_eq!(classify4(&transit, false, &p, l4), Class::Forward);
        assert!(!read.get());
        assert_eq!(
            c([192, 0, 2, 254], 1, (0, 0), false),
            Class::Punt(PuntClass::Icmp)
        );
        assert_eq!(
            c([192, 0, 2, 254], 6, (40000, 179), false),
            Class::Punt(PuntClass::Routing)
        );
        assert_eq!(
            c([192, 0, 2, 254], 6, (40000, 22), false),
            Class::Punt(PuntClass::Local)
        );
        assert_eq!(
            c([192, 0, 2, 255], 17, (68, 67), true),
            Class::Punt(PuntClass::Local)
        );
        assert_eq!(
            c([255, 255, 255, 255], 17, (520, 520), true),
            Class::Punt(PuntClass::Routing)
        );
        assert_eq!(
            c([224, 0, 0, 5], 89, (0, 0), true),
            Class::Punt(PuntClass::Routing)
        );
        assert_eq!(
            c([239, 1, 1, 1], 17, (1, 2), true),
            Class::Drop(DropReason::MulticastNotForwarded)
        );
        assert_eq!(
            c([198, 51, 100, 1], 17, (1, 2), true),
            Class::Drop(DropReason::BroadcastNotForwarded)
        );
        let mut m = m4([198, 51, 100, 1], 17);
        m.router_alert = true;
        assert_eq!(
            classify4(&m, false, &p, || (0, 0)),
            Class::Punt(PuntClass::SlowPath)
        );
    }

    fn m6(src: &str, dst: &str, upper: u8) -> Ip6Meta {
        Ip6Meta {
            src: u128::from(src.parse::<Ipv6Addr>().unwrap()),
            dst: u128::from(dst.parse::<Ipv6Addr>().unwrap()),
            hop_limit: 64,
            upper,
            upper_offset: 40,
            payload_len: 8,
            hop_by_hop: false,
            later_fragment: false,
        }
    }

    #[test]
    fn ipv6_classes() {
        let p = ports();
        let c = |m: Ip6Meta, mc, t| classify6(&m, mc, &p, || ((0, 0), t));
        assert_eq!(
            c(m6("2001:db8::1", "2001:db8:5::1", 17), false, None),
            Class::Forward
        );
        assert_eq!(
            c(m6("2001:db8::1", "2001:db8::fe", 58), false, Some(128)),
            Class::Punt(PuntClass::Icmp)
        );
        assert_eq!(
            c(m6("fe80::1", "ff02::1:ff00:fe", 58), true, Some(135)),
            Class::Punt(PuntClass::ArpNd)
        );
        assert_eq!(
            c(m6("fe80::1", "ff02::5", 89), true, None),
            Class::Punt(PuntClass::Routing)
        );
        assert_eq!(
            c(m6("2001:db8::1", "ff0e::1", 17), true, None),
            Class::Drop(DropReason::MulticastNotForwarded)
        );
        assert_eq!(
            c(m6("fe80::1", "2001:db8:5::1", 17), false, None),
            Class::Drop(DropReason::Ip6LinkLocal)
        );
        assert_eq!(
            c(m6("2001:db8::1", "fe80::7", 17), false, None),
            Class::Drop(DropReason::Ip6LinkLocal)
        );
        assert_eq!(
            c(m6("2001:db8::1", "2001:db8:5::1", 17), true, None),
            Class::Drop(DropReason::BroadcastNotForwarded)
        );
        let mut m = m6("2001:db8::1", "2001:db8:5::1", 17);
        m.hop_by_hop = true;
        assert_eq!(c(m, false, None), Class::Punt(PuntClass::SlowPath));
    }
}
