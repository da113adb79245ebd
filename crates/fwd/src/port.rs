//! The router's interfaces as a worker sees them.
//!
//! A [`Port`] is one interface: its index, MAC, IP MTU, addresses, and the readers of its own
//! two neighbor tables (ARP for IPv4, ND for IPv6), the L2 half of the split L2/L3 design:
//! a route names a next hop and an interface, and only that interface's table is asked for
//! the MAC. [`Ports`] holds them by index together with the set of the router's own
//! addresses, which classification checks every packet against.

use std::net::{Ipv4Addr, Ipv6Addr};

use vfsr_neigh::NeighborReader;
use vfsr_wire::MacAddr;

/// Largest interface index a worker accepts (indices index a vector).
pub const MAX_IFINDEX: u32 = 4095;

/// One interface.
#[derive(Clone, Debug)]
pub struct Port {
    /// Interface index (small, dense; `1..=MAX_IFINDEX`).
    pub ifindex: u32,
    /// Name, for counters and logs.
    pub name: String,
    /// The interface's MAC (source of every frame it sends).
    pub mac: MacAddr,
    /// IP MTU: the largest IP packet it sends without fragmenting.
    pub mtu: u16,
    /// IPv4 addresses with their prefix lengths.
    pub addrs4: Vec<(Ipv4Addr, u8)>,
    /// IPv6 addresses with their prefix lengths (a link-local one is expected).
    pub addrs6: Vec<(Ipv6Addr, u8)>,
    /// The ARP table's reader.
    pub arp: NeighborReader<Ipv4Addr>,
    /// The ND table's reader.
    pub nd: NeighborReader<Ipv6Addr>,
}

impl Port {
    /// The address ICMPv4 errors sent because of a packet that came in here carry as source
    /// (RFC 1812 4.3.2.4: an address of the interface the packet arrived on).
    pub fn icmp_source4(&self) -> Option<Ipv4Addr> {
        self.addrs4.first().map(|(a, _)| *a)
    }

    /// The same for ICMPv6: the first global address, else the link-local one.
    pub fn icmp_source6(&self) -> Option<Ipv6Addr> {
        self.addrs6
            .iter()
            .find(|(a, _)| !is_link_local6(a))
            .or_else(|| self.addrs6.first())
            .map(|(a, _)| *a)
    }
}

/// All ports, by index, and the router's own addresses.
#[derive(Clone, Debug, Default)]
pub struct Ports {
    by_index: Vec<Option<Port>>,
    /// Own IPv4 addresses and the directed broadcasts of the connected subnets.
    local4: Vec<u32>,
    /// Own IPv6 addresses.
    local6: Vec<u128>,
    /// One bit per byte-hash of a local address ([`LocalFilter`]): a transit packet's
    /// destination is told apart from the router's own addresses by one bit test.
    filter4: LocalFilter,
    /// The same for the IPv6 addresses.
    filter6: LocalFilter,
}

/// A 256-bit filter over a set of addresses, each address setting the bit its one-byte hash
/// (the XOR of its bytes) names. A clear bit proves the address is not in the set; a set bit
/// sends the caller to the list. With a dozen local addresses a random destination finds its
/// bit clear 19 times in 20, and the forwarding path skips the list's scan.
#[derive(Clone, Copy, Debug, Default)]
struct LocalFilter([u64; 4]);

impl LocalFilter {
    /// The filter of `addrs`.
    fn of(addrs: impl IntoIterator<Item = u128>) -> LocalFilter {
        let mut f = LocalFilter::default();
        for a in addrs {
            let (word, bit) = Self::place(a);
            if let Some(w) = f.0.get_mut(word) {
                *w |= bit;
            }
        }
        f
    }

    /// The word and bit of `a`: its bytes XORed into one.
    #[inline]
    fn place(a: u128) -> (usize, u64) {
        let x = (a as u64) ^ ((a >> 64) as u64);
        let x = x ^ (x >> 32);
        let x = x ^ (x >> 16);
        let h = (x ^ (x >> 8)) as u8;
        (usize::from(h >> 6), 1 << (h & 63))
    }

    #[inline]
    fn may_contain(&self, a: u128) -> bool {
        let (word, bit) = Self::place(a);
        self.0.get(word).is_some_and(|w| w & bit != 0)
    }
}

/// Why a port set cannot be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortError {
    /// Index 0 or above [`MAX_IFINDEX`].
    BadIndex(u32),
    /// Two ports with one index.
    Duplicate(u32),
    /// An MTU below the IPv4 minimum of 68 bytes.
    MtuTooSmall(u32),
}

impl std::fmt::Display for PortError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortError::BadIndex(i) => write!(f, "interface index {i} outside 1..={MAX_IFINDEX}"),
            PortError::Duplicate(i) => write!(f, "interface index {i} used twice"),
            PortError::MtuTooSmall(i) => write!(f, "interface {i}: MTU below 68"),
        }
    }
}

impl std::error::Error for PortError {}

impl Ports {
    /// Builds the set; indices must be distinct and in `1..=MAX_IFINDEX`.
    pub fn new(ports: Vec<Port>) -> Result<Ports, PortError> {
        let mut by_index: Vec<Option<Port>> = Vec::new();
        let mut local4 = Vec::new();
        let mut local6 = Vec::new();
        for p in ports {
            if p.ifindex == 0 || p.ifindex > MAX_IFINDEX {
                return Err(PortError::BadIndex(p.ifindex));
            }
            if p.mtu < 68 {
                return Err(PortError::MtuTooSmall(p.ifindex));
            }
            let i = p.ifindex as usize;
            if by_index.len() <= i {
                by_index.resize(i + 1, None);
            }
            for (a, len) in &p.addrs4 {
                local4.push(u32::from(*a));
                if *len < 31 {
                    let host = u32::MAX >> len;
                    local4.push(u32::from(*a) | host);
                }
            }
            for (a, _) in &p.addrs6 {
                local6.push(u128::from(*a));
            }
            match by_index.get_mut(i) {
                Some(slot @ None) => *slot = Some(p),
                _ => return Err(PortError::Duplicate(p.ifindex)),
            }
        }
        local4.sort_unstable();
        local4.dedup();
        local6.sort_unstable();
        local6.dedup();
        Ok(Ports {
            by_index,
            filter4: LocalFilter::of(local4.iter().map(|&a| u128::from(a))),
            filter6: LocalFilter::of(local6.iter().copied()),
            local4,
            local6,
        })
    }

    /// The port with index `ifindex`.
    #[inline]
    pub fn get(&self, ifindex: u32) -> Option<&Port> {
        self.by_index.get(ifindex as usize)?.as_ref()
    }

    /// Every port.
    pub fn iter(&self) -> impl Iterator<Item = &Port> {
        self.by_index.iter().flatten()
    }

    /// One past the highest index.
    pub fn index_bound(&self) -> usize {
        self.by_index.len()
    }

    /// Whether `a` is one of the router's IPv4 addresses or a connected subnet's broadcast.
    #[inline]
    pub fn is_local4(&self, a: u32) -> bool {
        // A handful of addresses: behind the filter, a linear scan beats a hash.
        self.filter4.may_contain(u128::from(a)) && self.local4.contains(&a)
    }

    /// Whether `a` is one of the router's IPv6 addresses, or the solicited-node group of one.
    #[inline]
    pub fn is_local6(&self, a: u128) -> bool {
        self.filter6.may_contain(a) && self.local6.contains(&a)
    }
}

/// `fe80::/10`.
#[inline]
pub fn is_link_local6(a: &Ipv6Addr) -> bool {
    (a.segments()[0] & 0xffc0) == 0xfe80
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use vfsr_neigh::{NeighborConfig, NeighborTable};

    fn port(ifindex: u32, v4: [u8; 4], len4: u8, v6: &str) -> Port {
        let arp: NeighborTable<Ipv4Addr, ()> = NeighborTable::new(NeighborConfig::default());
        let nd: NeighborTable<Ipv6Addr, ()> = NeighborTable::new(NeighborConfig::default());
        Port {
            ifindex,
            name: format!("p{ifindex}"),
            mac: MacAddr([2, 0, 0, 0, 0, ifindex as u8]),
            mtu: 1500,
            addrs4: vec![(Ipv4Addr::from(v4), len4)],
            addrs6: vec![
                (v6.parse().unwrap(), 64),
                (format!("fe80::{ifindex}").parse().unwrap(), 64),
            ],
            arp: arp.reader(),
            nd: nd.reader(),
        }
    }

    fn ports() -> Ports {
        Ports::new(vec![
            port(1, [198, 18, 255, 254], 15, "2001:db8:ffff::fe"),
            port(2, [100, 64, 2, 254], 24, "2001:db8:2::fe"),
            port(3, [100, 64, 3, 1], 31, "2001:db8:3::1"),
            port(4, [10, 9, 8, 7], 32, "2001:db8:4::fe"),
        ])
        .unwrap()
    }

    #[test]
    fn every_local_address_and_broadcast_is_local() {
        let p = ports();
        for a in [
            [198, 18, 255, 254],
            [198, 19, 255, 255],
            [100, 64, 2, 254],
            [100, 64, 2, 255],
            [100, 64, 3, 1],
            [10, 9, 8, 7],
        ] {
            assert!(p.is_local4(u32::from(Ipv4Addr::from(a))), "{a:?}");
        }
        for a in [
            "2001:db8:ffff::fe",
            "2001:db8:2::fe",
            "2001:db8:3::1",
            "fe80::4",
        ] {
            assert!(
                p.is_local6(u128::from(a.parse::<Ipv6Addr>().unwrap())),
                "{a}"
            );
        }
        assert!(!p.is_local4(u32::from(Ipv4Addr::new(100, 64, 2, 1))));
        assert!(!p.is_local6(u128::from("2001:db8:2::1".parse::<Ipv6Addr>().unwrap())));
    }

    proptest! {
        #[test]
        fn the_filter_changes_no_answer(a in any::<u32>(), b in any::<u128>()) {
            let p = ports();
            prop_assert_eq!(p.is_local4(a), p.local4.contains(&a));
            prop_assert_eq!(p.is_local6(b), p.local6.contains(&b));
        }
    }
}
