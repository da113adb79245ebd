//! The ports as the control plane holds them: each port's settings and the writing ends of
//! its two neighbor tables (ARP, ND), beside the [`Port`] the workers read.

use std::net::{Ipv4Addr, Ipv6Addr};

use vfsr_fwd::Port;
use vfsr_neigh::{NeighborConfig, NeighborTable};
use vfsr_wire::MacAddr;

/// What a port is made of.
#[derive(Clone, Debug)]
pub struct PortSpec {
    /// The pipeline's index of the port (`1..`, dense; not the kernel's interface index).
    pub ifindex: u32,
    /// Name, for counters and logs.
    pub name: String,
    /// MAC.
    pub mac: MacAddr,
    /// IP MTU.
    pub mtu: u16,
    /// IPv4 addresses with their prefix lengths.
    pub addrs4: Vec<(Ipv4Addr, u8)>,
    /// IPv6 addresses with their prefix lengths.
    pub addrs6: Vec<(Ipv6Addr, u8)>,
    /// Neighbor table limits.
    pub neighbors: NeighborConfig,
}

impl PortSpec {
    /// A port named `port<ifindex>` with MTU 1500 and no address.
    pub fn new(ifindex: u32, mac: MacAddr) -> Self {
        PortSpec {
            ifindex,
            name: format!("port{ifindex}"),
            mac,
            mtu: 1500,
            addrs4: Vec::new(),
            addrs6: Vec::new(),
            neighbors: NeighborConfig::default(),
        }
    }

    /// The same port with another name.
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// Adds an IPv4 address.
    pub fn v4(mut self, addr: Ipv4Addr, len: u8) -> Self {
        self.addrs4.push((addr, len));
        self
    }

    /// Adds an IPv6 address.
    pub fn v6(mut self, addr: Ipv6Addr, len: u8) -> Self {
        self.addrs6.push((addr, len));
        self
    }

    /// Sets the MTU.
    pub fn mtu(mut self, mtu: u16) -> Self {
        self.mtu = mtu;
        self
    }
}

/// A port together with the two neighbor tables it reads from (the control plane owns the
/// tables; workers get the [`Port`]).
pub struct PortTables<P> {
    /// What workers get.
    pub port: Port,
    /// The ARP table.
    pub arp: NeighborTable<Ipv4Addr, P>,
    /// The ND table.
    pub nd: NeighborTable<Ipv6Addr, P>,
}

impl<P> PortTables<P> {
    /// A port with fresh, empty neighbor tables.
    pub fn new(spec: &PortSpec) -> Self {
        let arp = NeighborTable::new(spec.neighbors);
        let nd = NeighborTable::new(spec.neighbors);
        let port = Port {
            ifindex: spec.ifindex,
            name: spec.name.clone(),
            mac: spec.mac,
            mtu: spec.mtu,
            addrs4: spec.addrs4.clone(),
            addrs6: spec.addrs6.clone(),
            arp: arp.reader(),
            nd: nd.reader(),
        };
        PortTables { port, arp, nd }
    }
}
