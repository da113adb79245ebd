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
        // A handful of addresses: a linear scan beats a hash.
        self.local4.contains(&a)
    }

    /// Whether `a` is one of the router's IPv6 addresses, or the solicited-node group of one.
    #[inline]
    pub fn is_local6(&self, a: u128) -> bool {
        self.local6.contains(&a)
    }
}

/// `fe80::/10`.
#[inline]
pub fn is_link_local6(a: &Ipv6Addr) -> bool {
    (a.segments()[0] & 0xffc0) == 0xfe80
}
