//! A router in memory: ports with their neighbor tables, live FIBs and a next-hop table,
//! all on the control side, handing out workers. Tests, the pipeline benchmark and offline
//! replay build their router with it.
//!
//! ```
//! use std::net::Ipv4Addr;
//! use vfsr_fib::nexthop::Forward;
//! use vfsr_fwd::lab::{Lab, PortSpec};
//! use vfsr_lpm::poptrie::Poptrie;
//! use vfsr_wire::MacAddr;
//!
//! let mut lab: Lab<Poptrie<u32>, Poptrie<u128>> = Lab::new(vec![
//!     PortSpec::new(1, MacAddr([2, 0, 0, 0, 0, 1])).v4("192.0.2.254/24"),
//!     PortSpec::new(2, MacAddr([2, 0, 0, 0, 0, 2])).v4("198.51.100.254/24"),
//! ])
//! .unwrap();
//! let gw = Ipv4Addr::new(198, 51, 100, 1);
//! lab.nexthop(1, Forward::Gateway { addr: gw.into(), ifindex: Some(2) });
//! lab.route4("203.0.113.0/24", 1).unwrap();
//! lab.resolve4(2, gw, MacAddr([2, 0, 0, 0, 0, 9]));
//! lab.publish().unwrap();
//! let worker = lab.worker(Default::default());
//! # drop(worker);
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use vfsr_fib::nexthop::{Forward, NhEntry, NhPublisher, NhSnapshot};
use vfsr_fib::{FibError, LiveFib};
use vfsr_lpm::{LpmUpdate, Prefix, Route};
use vfsr_neigh::{Event, NeighborConfig};
use vfsr_wire::MacAddr;

use crate::packet::Packet;
use crate::port::{PortError, PortTables, Ports};
use crate::worker::{Worker, WorkerConfig};

/// What a port is made of.
#[derive(Clone, Debug)]
pub struct PortSpec {
    /// Interface index.
    pub ifindex: u32,
    /// MAC.
    pub mac: MacAddr,
    /// IP MTU.
    pub mtu: u16,
    /// IPv4 addresses.
    pub addrs4: Vec<(Ipv4Addr, u8)>,
    /// IPv6 addresses.
    pub addrs6: Vec<(Ipv6Addr, u8)>,
    /// Neighbor table limits.
    pub neighbors: NeighborConfig,
}

impl PortSpec {
    /// A port with MTU 1500 and no address.
    pub fn new(ifindex: u32, mac: MacAddr) -> Self {
        PortSpec {
            ifindex,
            mac,
            mtu: 1500,
            addrs4: Vec::new(),
            addrs6: Vec::new(),
            neighbors: NeighborConfig::default(),
        }
    }

    /// Adds an IPv4 address given as `a.b.c.d/len` (ignored if malformed).
    pub fn v4(mut self, cidr: &str) -> Self {
        if let Some((a, l)) = cidr.split_once('/') {
            if let (Ok(a), Ok(l)) = (a.parse(), l.parse()) {
                self.addrs4.push((a, l));
            }
        }
        self
    }

    /// Adds an IPv6 address given as `addr/len` (ignored if malformed).
    pub fn v6(mut self, cidr: &str) -> Self {
        if let Some((a, l)) = cidr.split_once('/') {
            if let (Ok(a), Ok(l)) = (a.parse(), l.parse()) {
                self.addrs6.push((a, l));
            }
        }
        self
    }

    /// Sets the MTU.
    pub fn mtu(mut self, mtu: u16) -> Self {
        self.mtu = mtu;
        self
    }
}

/// Why a lab change failed.
#[derive(Debug)]
pub enum LabError {
    /// The ports do not make a valid set.
    Port(PortError),
    /// The FIB refused a change.
    Fib(FibError),
    /// A prefix did not parse.
    Prefix(String),
}

impl std::fmt::Display for LabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabError::Port(e) => write!(f, "ports: {e}"),
            LabError::Fib(e) => write!(f, "fib: {e:?}"),
            LabError::Prefix(p) => write!(f, "bad prefix {p:?}"),
        }
    }
}

impl std::error::Error for LabError {}

/// The control side of a router in memory.
pub struct Lab<E4: LpmUpdate<u32>, E6: LpmUpdate<u128>> {
    /// Ports and their neighbor tables (held packets are [`Packet`]s).
    pub tables: Vec<PortTables<Packet>>,
    /// The IPv4 FIB.
    pub fib4: LiveFib<u32, E4>,
    /// The IPv6 FIB.
    pub fib6: LiveFib<u128, E6>,
    nh: NhPublisher,
    entries: Vec<Option<NhEntry>>,
    next_gen: Vec<u32>,
    ports: Arc<Ports>,
    now: u64,
}

impl<E4, E6> Lab<E4, E6>
where
    E4: LpmUpdate<u32> + Clone,
    E6: LpmUpdate<u128> + Clone,
    E4::Config: Default,
    E6::Config: Default,
{
    /// A router with these ports, empty FIBs and no next hops.
    pub fn new(specs: Vec<PortSpec>) -> Result<Self, LabError> {
        Self::with_routes(specs, &[], &[])
    }

    /// A router whose FIBs start with these routes.
    pub fn with_routes(
        specs: Vec<PortSpec>,
        routes4: &[Route<u32>],
        routes6: &[Route<u128>],
    ) -> Result<Self, LabError> {
        let tables: Vec<PortTables<Packet>> = specs
            .into_iter()
            .map(|s| {
                PortTables::new(
                    s.ifindex,
                    &format!("port{}", s.ifindex),
                    s.mac,
                    s.mtu,
                    s.addrs4,
                    s.addrs6,
                    s.neighbors,
                )
            })
            .collect();
        let ports =
            Ports::new(tables.iter().map(|t| t.port.clone()).collect()).map_err(LabError::Port)?;
        Ok(Lab {
            fib4: LiveFib::new(routes4, E4::Config::default()).map_err(LabError::Fib)?,
            fib6: LiveFib::new(routes6, E6::Config::default()).map_err(LabError::Fib)?,
            nh: NhPublisher::new(NhSnapshot::new()),
            entries: vec![None],
            next_gen: Vec::new(),
            ports: Arc::new(ports),
            tables,
            now: 0,
        })
    }

    /// The ports as workers see them.
    pub fn ports(&self) -> Arc<Ports> {
        Arc::clone(&self.ports)
    }

    /// Sets next hop `index` (generation kept, version bumped when it changes).
    pub fn nexthop(&mut self, index: u32, forward: Forward) {
        let i = index as usize;
        if i == 0 {
            return;
        }
        if self.entries.len() <= i {
            self.entries.resize(i + 1, None);
        }
        if let Some(slot) = self.entries.get_mut(i) {
            *slot = Some(match slot.take() {
                Some(old) => NhEntry {
                    gen: old.gen,
                    version: old.version.wrapping_add(u32::from(old.forward != forward)),
                    forward,
                },
                None => NhEntry {
                    gen: self.next_gen.get(i).copied().unwrap_or(0),
                    version: 0,
                    forward,
                },
            });
        }
    }

    /// Removes next hop `index`; a later [`Lab::nexthop`] there starts a new generation.
    pub fn remove_nexthop(&mut self, index: u32) {
        if let Some(slot) = self.entries.get_mut(index as usize) {
            if let Some(old) = slot.take() {
                // The next entry at this index is another next hop: a new generation.
                if self.next_gen.len() <= index as usize {
                    self.next_gen.resize(index as usize + 1, 0);
                }
                if let Some(g) = self.next_gen.get_mut(index as usize) {
                    *g = old.gen.wrapping_add(1);
                }
            }
        }
    }

    /// Adds or changes an IPv4 route (`a.b.c.d/len`).
    pub fn route4(&mut self, prefix: &str, nh: u32) -> Result<(), LabError> {
        let p = parse4(prefix).ok_or_else(|| LabError::Prefix(prefix.to_string()))?;
        self.fib4.set(p, nh).map_err(LabError::Fib)
    }

    /// Adds or changes an IPv6 route.
    pub fn route6(&mut self, prefix: &str, nh: u32) -> Result<(), LabError> {
        let p = parse6(prefix).ok_or_else(|| LabError::Prefix(prefix.to_string()))?;
        self.fib6.set(p, nh).map_err(LabError::Fib)
    }

    /// Marks `addr` reachable at `mac` in port `ifindex`'s ARP table (packets it held are
    /// returned, ready to send once their destination MAC is written).
    pub fn resolve4(&mut self, ifindex: u32, addr: Ipv4Addr, mac: MacAddr) -> Vec<Packet> {
        self.now += 1;
        let now = self.now;
        let Some(t) = self.tables.iter_mut().find(|t| t.port.ifindex == ifindex) else {
            return Vec::new();
        };
        let _ = t.arp.apply(addr, Event::Resolve, now);
        let out = t.arp.apply(addr, advert(mac), now);
        t.arp.publish();
        out.transmit
    }

    /// The same in the ND table.
    pub fn resolve6(&mut self, ifindex: u32, addr: Ipv6Addr, mac: MacAddr) -> Vec<Packet> {
        self.now += 1;
        let now = self.now;
        let Some(t) = self.tables.iter_mut().find(|t| t.port.ifindex == ifindex) else {
            return Vec::new();
        };
        let _ = t.nd.apply(addr, Event::Resolve, now);
        let out = t.nd.apply(addr, advert(mac), now);
        t.nd.publish();
        out.transmit
    }

    /// What the control plane does with a [`Verdict::Resolve`](crate::Verdict::Resolve):
    /// holds `packet` in the neighbor's queue (a bounded one) and starts resolution. Returns
    /// the packets the queue dropped to make room, and publishes the table.
    pub fn hold(&mut self, ifindex: u32, nexthop: IpAddr, packet: Packet) -> Vec<Packet> {
        self.now += 1;
        let now = self.now;
        let Some(t) = self.tables.iter_mut().find(|t| t.port.ifindex == ifindex) else {
            return vec![packet];
        };
        let out = match nexthop {
            IpAddr::V4(a) => {
                let o = t.arp.resolve(a, packet, now);
                t.arp.publish();
                o
            }
            IpAddr::V6(a) => {
                let o = t.nd.resolve(a, packet, now);
                t.nd.publish();
                o
            }
        };
        out.dropped
    }

    /// Advances the neighbor tables' clocks by `ticks`, firing their timers (retransmits,
    /// failures), and publishes them.
    pub fn advance(&mut self, ticks: u64) {
        self.now += ticks;
        let now = self.now;
        for t in &mut self.tables {
            t.arp.expire(now);
            t.nd.expire(now);
            t.arp.publish();
            t.nd.publish();
        }
    }

    /// Publishes the FIBs and the next-hop table.
    pub fn publish(&mut self) -> Result<(), LabError> {
        self.nh
            .publish(NhSnapshot::from_entries(self.entries.clone()));
        self.fib4.publish().map_err(LabError::Fib)?;
        self.fib6.publish().map_err(LabError::Fib)
    }

    /// A worker reading this router.
    pub fn worker(&self, config: WorkerConfig) -> Worker<E4, E6> {
        Worker::new(
            config,
            self.fib4.reader(),
            self.fib6.reader(),
            self.nh.reader(),
            self.ports(),
        )
    }
}

fn advert(mac: MacAddr) -> Event {
    Event::Advert {
        mac: Some(mac),
        solicited: true,
        override_flag: true,
    }
}

/// Parses `a.b.c.d/len`.
pub fn parse4(s: &str) -> Option<Prefix<u32>> {
    let (a, l) = s.split_once('/')?;
    let a: Ipv4Addr = a.parse().ok()?;
    Prefix::new(u32::from(a), l.parse().ok()?).ok()
}

/// Parses `addr/len` (IPv6).
pub fn parse6(s: &str) -> Option<Prefix<u128>> {
    let (a, l) = s.split_once('/')?;
    let a: Ipv6Addr = a.parse().ok()?;
    Prefix::new(u128::from(a), l.parse().ok()?).ok()
}
