//! The published state the pipeline tests run workers against.
//!
//! [`Fixture`] plays the control plane's publishing role and nothing else: it writes FIB
//! entries and whole next-hop snapshots directly, with next hops numbered by the test, so
//! that a test can reach any published state (an entry changed in place, a group whose
//! members change, a new version at the same index) and check what a worker does with
//! it. The product builds its state through `vfsr-router` (the RIB numbers the next hops
//! there); this crate only reads what is published.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use vfsr_fib::nexthop::{Forward, NhEntry, NhPublisher, NhSnapshot};
use vfsr_fib::LiveFib;
use vfsr_fwd::{Packet, Port, Ports, Worker, WorkerConfig};
use vfsr_lpm::poptrie::Poptrie;
use vfsr_lpm::Prefix;
use vfsr_neigh::{Event, NeighborConfig, NeighborTable};
use vfsr_wire::MacAddr;

/// A port as the fixture makes it.
pub struct PortDef {
    pub ifindex: u32,
    pub mac: MacAddr,
    pub mtu: u16,
    pub addrs4: Vec<(Ipv4Addr, u8)>,
    pub addrs6: Vec<(Ipv6Addr, u8)>,
}

impl PortDef {
    /// A port with MTU 1500 and no address.
    pub fn new(ifindex: u32, mac: MacAddr) -> Self {
        PortDef {
            ifindex,
            mac,
            mtu: 1500,
            addrs4: Vec::new(),
            addrs6: Vec::new(),
        }
    }

    /// Adds an IPv4 address given as `a.b.c.d/len`.
    pub fn v4(mut self, cidr: &str) -> Self {
        let (a, l) = cidr.split_once('/').unwrap();
        self.addrs4.push((a.parse().unwrap(), l.parse().unwrap()));
        self
    }

    /// Adds an IPv6 address given as `addr/len`.
    pub fn v6(mut self, cidr: &str) -> Self {
        let (a, l) = cidr.split_once('/').unwrap();
        self.addrs6.push((a.parse().unwrap(), l.parse().unwrap()));
        self
    }

    /// Sets the MTU.
    pub fn mtu(mut self, mtu: u16) -> Self {
        self.mtu = mtu;
        self
    }
}

/// The writing ends of one port's neighbor tables.
pub struct Neighbors {
    pub ifindex: u32,
    pub arp: NeighborTable<Ipv4Addr, Packet>,
    pub nd: NeighborTable<Ipv6Addr, Packet>,
}

/// Published FIBs, next hops and neighbor tables, written directly (see the module doc).
pub struct Fixture {
    /// The IPv4 FIB.
    pub fib4: LiveFib<u32, Poptrie<u32>>,
    /// The IPv6 FIB.
    pub fib6: LiveFib<u128, Poptrie<u128>>,
    nh: NhPublisher,
    entries: Vec<Option<NhEntry>>,
    neighbors: Vec<Neighbors>,
    ports: Arc<Ports>,
    /// The neighbor tables' clock.
    now: u64,
}

impl Fixture {
    /// These ports with empty neighbor tables, empty FIBs and no next hop.
    pub fn new(defs: Vec<PortDef>) -> Self {
        let mut ports = Vec::new();
        let mut neighbors = Vec::new();
        for d in defs {
            let arp = NeighborTable::new(NeighborConfig::default());
            let nd = NeighborTable::new(NeighborConfig::default());
            ports.push(Port {
                ifindex: d.ifindex,
                name: format!("port{}", d.ifindex),
                mac: d.mac,
                mtu: d.mtu,
                addrs4: d.addrs4,
                addrs6: d.addrs6,
                arp: arp.reader(),
                nd: nd.reader(),
            });
            neighbors.push(Neighbors {
                ifindex: d.ifindex,
                arp,
                nd,
            });
        }
        Fixture {
            fib4: LiveFib::new(&[], Default::default()).unwrap(),
            fib6: LiveFib::new(&[], Default::default()).unwrap(),
            nh: NhPublisher::new(NhSnapshot::new()),
            entries: vec![None],
            neighbors,
            ports: Arc::new(Ports::new(ports).unwrap()),
            now: 0,
        }
    }

    /// Sets next hop `index` (`1..`): a new entry starts at version 0, a changed one keeps
    /// its generation and gets the next version.
    pub fn nexthop(&mut self, index: u32, forward: Forward) {
        let i = index as usize;
        assert!(i > 0, "next hop 0 means no route");
        if self.entries.len() <= i {
            self.entries.resize(i + 1, None);
        }
        let slot = &mut self.entries[i];
        *slot = Some(match slot.take() {
            Some(old) => NhEntry {
                gen: old.gen,
                version: old.version.wrapping_add(u32::from(old.forward != forward)),
                forward,
            },
            None => NhEntry {
                gen: 0,
                version: 0,
                forward,
            },
        });
    }

    /// Points the IPv4 prefix `a.b.c.d/len` at next hop `nh`.
    pub fn route4(&mut self, prefix: &str, nh: u32) {
        self.fib4.set(parse4(prefix), nh).unwrap();
    }

    /// Points the IPv6 prefix `addr/len` at next hop `nh`.
    pub fn route6(&mut self, prefix: &str, nh: u32) {
        self.fib6.set(parse6(prefix), nh).unwrap();
    }

    /// Removes the IPv4 prefix `a.b.c.d/len`.
    pub fn remove4(&mut self, prefix: &str) {
        self.fib4.remove(parse4(prefix));
    }

    /// Publishes the IPv4 FIB alone (next hops and the IPv6 FIB as they were).
    pub fn publish_fib4(&mut self) {
        self.fib4.publish().unwrap();
    }

    /// Publishes the IPv6 FIB alone.
    pub fn publish_fib6(&mut self) {
        self.fib6.publish().unwrap();
    }

    /// Publishes the next-hop snapshot and both FIBs.
    pub fn publish(&mut self) {
        self.nh
            .publish(NhSnapshot::from_entries(self.entries.clone()));
        self.fib4.publish().unwrap();
        self.fib6.publish().unwrap();
    }

    /// The neighbor tables of port `ifindex`.
    pub fn neighbors(&mut self, ifindex: u32) -> &mut Neighbors {
        self.neighbors
            .iter_mut()
            .find(|n| n.ifindex == ifindex)
            .unwrap()
    }

    /// Marks `addr` reachable at `mac` in port `ifindex`'s ARP table and publishes it;
    /// returns the packets it held.
    pub fn resolve4(&mut self, ifindex: u32, addr: Ipv4Addr, mac: MacAddr) -> Vec<Packet> {
        self.now += 1;
        let now = self.now;
        let t = &mut self.neighbors(ifindex).arp;
        let _ = t.apply(addr, Event::Resolve, now);
        let out = t.apply(addr, advert(mac), now);
        t.publish();
        out.transmit
    }

    /// The same in the ND table.
    pub fn resolve6(&mut self, ifindex: u32, addr: Ipv6Addr, mac: MacAddr) -> Vec<Packet> {
        self.now += 1;
        let now = self.now;
        let t = &mut self.neighbors(ifindex).nd;
        let _ = t.apply(addr, Event::Resolve, now);
        let out = t.apply(addr, advert(mac), now);
        t.publish();
        out.transmit
    }

    /// Holds `packet` in the queue of `nexthop` on port `ifindex` (what the control plane
    /// does with a `Resolve` verdict) and publishes the table; returns the packets the
    /// bounded queue dropped.
    pub fn hold(&mut self, ifindex: u32, nexthop: IpAddr, packet: Packet) -> Vec<Packet> {
        self.now += 1;
        let now = self.now;
        let n = self.neighbors(ifindex);
        let out = match nexthop {
            IpAddr::V4(a) => {
                let o = n.arp.resolve(a, packet, now);
                n.arp.publish();
                o
            }
            IpAddr::V6(a) => {
                let o = n.nd.resolve(a, packet, now);
                n.nd.publish();
                o
            }
        };
        out.dropped
    }

    /// Advances the neighbor tables' clock by `ticks` (retransmissions, failures) and
    /// publishes them.
    pub fn advance(&mut self, ticks: u64) {
        self.now += ticks;
        let now = self.now;
        for n in &mut self.neighbors {
            n.arp.expire(now);
            n.nd.expire(now);
            n.arp.publish();
            n.nd.publish();
        }
    }

    /// A worker reading what the fixture publishes.
    pub fn worker(&self, config: WorkerConfig) -> Worker<Poptrie<u32>, Poptrie<u128>> {
        Worker::new(
            config,
            self.fib4.reader(),
            self.fib6.reader(),
            self.nh.reader(),
            Arc::clone(&self.ports),
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

/// `a.b.c.d/len`.
fn parse4(s: &str) -> Prefix<u32> {
    let (a, l) = s.split_once('/').unwrap();
    let a: Ipv4Addr = a.parse().unwrap();
    Prefix::new(u32::from(a), l.parse().unwrap()).unwrap()
}

/// `addr/len` (IPv6).
fn parse6(s: &str) -> Prefix<u128> {
    let (a, l) = s.split_once('/').unwrap();
    let a: Ipv6Addr = a.parse().unwrap();
    Prefix::new(u128::from(a), l.parse().unwrap()).unwrap()
}
