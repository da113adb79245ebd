//! The router's control-side state: ports and their neighbor tables, and the route table
//! (RIB + live FIBs + published next hops) every route goes through.
//!
//! ```text
//!   connected (ports' subnets) ─┐
//!   static (config)            ─┤
//!   table (file, synthetic)    ─┼─▶ Rib ──best paths──▶ LiveFib v4/v6 ──▶ workers' FibReaders
//!   kernel (netlink mirror)    ─┤     │                 NhPublisher  ──▶ workers' NhReaders
//!   fpm (zebra)                ─┘     └─ resolves next hops through the ports (links)
//!
//!   ports: PortTables (ARP and ND writers) ──publish──▶ workers' NeighborReaders
//! ```
//!
//! Every port is a link of the RIB ([`vfsr_rib::Rib::set_link`]): its subnets resolve
//! gateways named without an interface, and its state decides whether routes through it
//! are usable. A port's connected subnets are routes of source `connected` (link-local
//! subnets excepted: every port has one, they are not routes). [`Router::set_port_up`]
//! takes a port down or up; routes through a port that is down stay in the RIB, unresolved,
//! and come back with it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vfsr_fib::nexthop::Forward;
use vfsr_fib::FibError;
use vfsr_fwd::port::PortError;
use vfsr_fwd::{Packet, Ports, Worker, WorkerConfig};
use vfsr_lpm::{LpmUpdate, Prefix};
use vfsr_neigh::Event;
use vfsr_rib::{
    IpPrefix, LinkState, LoadError, LoadReport, ResolveReport, Rib, RibError, RibRoute, RouteTable,
    Source,
};
use vfsr_table::Table;
use vfsr_wire::MacAddr;

use crate::port::{PortSpec, PortTables};

/// How the router is set up.
#[derive(Clone, Debug)]
pub struct RouterConfig {
    /// Administrative distance of each source (indexed by [`Source::index`]).
    pub distances: [u8; Source::COUNT],
    /// The longest a route change waits before it is published to the workers.
    pub max_delay: Duration,
}

impl Default for RouterConfig {
    fn default() -> Self {
        let mut distances = [0u8; Source::COUNT];
        for s in Source::ALL {
            if let Some(d) = distances.get_mut(s.index()) {
                *d = s.default_distance();
            }
        }
        RouterConfig {
            distances,
            max_delay: vfsr_fib::live::DEFAULT_MAX_DELAY,
        }
    }
}

/// Why the router could not be built or changed.
#[derive(Debug)]
pub enum RouterError {
    /// The ports do not make a valid set.
    Port(PortError),
    /// A FIB refused (build failure, next-hop index too large).
    Fib(FibError),
    /// The RIB refused.
    Rib(RibError),
}

impl std::fmt::Display for RouterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RouterError::Port(e) => write!(f, "ports: {e}"),
            RouterError::Fib(e) => write!(f, "FIB: {e}"),
            RouterError::Rib(e) => write!(f, "RIB: {e}"),
        }
    }
}

impl std::error::Error for RouterError {}

impl From<FibError> for RouterError {
    fn from(e: FibError) -> Self {
        RouterError::Fib(e)
    }
}

impl From<RibError> for RouterError {
    fn from(e: RibError) -> Self {
        RouterError::Rib(e)
    }
}

fn is_link_local6(a: &Ipv6Addr) -> bool {
    (a.segments()[0] & 0xffc0) == 0xfe80
}

/// The connected subnets of a port (link-local ones left out).
fn subnets(spec: &PortSpec) -> (Vec<Prefix<u32>>, Vec<Prefix<u128>>) {
    let v4 = spec
        .addrs4
        .iter()
        .map(|(a, l)| Prefix::new_masked(u32::from(*a), (*l).min(32)))
        .collect();
    let v6 = spec
        .addrs6
        .iter()
        .filter(|(a, _)| !is_link_local6(a))
        .map(|(a, l)| Prefix::new_masked(u128::from(*a), (*l).min(128)))
        .collect();
    (v4, v6)
}

/// The router's control-side state (see the module doc).
pub struct Router<E4: LpmUpdate<u32>, E6: LpmUpdate<u128>> {
    table: RouteTable<E4, E6>,
    tables: Vec<PortTables<Packet>>,
    specs: Vec<PortSpec>,
    shared: Arc<Ports>,
    up: Vec<bool>,
    config: RouterConfig,
    /// The neighbor tables' clock for the helpers that drive them without a control plane.
    now: u64,
}

impl<E4, E6> Router<E4, E6>
where
    E4: LpmUpdate<u32> + Clone,
    E6: LpmUpdate<u128> + Clone,
{
    /// A router with these ports (all up), their connected routes, and the engines'
    /// configurations.
    pub fn with_engines(
        specs: Vec<PortSpec>,
        config: RouterConfig,
        c4: E4::Config,
        c6: E6::Config,
    ) -> Result<Self, RouterError> {
        let tables: Vec<PortTables<Packet>> = specs.iter().map(PortTables::new).collect();
        let shared = Ports::new(tables.iter().map(|t| t.port.clone()).collect())
            .map_err(RouterError::Port)?;
        let mut rib = Rib::new();
        rib.enable_resolution();
        for s in Source::ALL {
            if let Some(d) = config.distances.get(s.index()) {
                rib.set_distance(s, *d);
            }
        }
        let mut table = RouteTable::new(rib, c4, c6)?;
        table.set_max_delay(config.max_delay);
        let mut r = Router {
            table,
            up: vec![true; specs.len()],
            tables,
            specs,
            shared: Arc::new(shared),
            config,
            now: 0,
        };
        for i in 0..r.specs.len() {
            r.install_connected(i)?;
        }
        r.table.publish()?;
        Ok(r)
    }

    fn install_connected(&mut self, i: usize) -> Result<(), RouterError> {
        let Some(spec) = self.specs.get(i) else {
            return Ok(());
        };
        let (v4, v6) = subnets(spec);
        let ifindex = spec.ifindex;
        let up = self.up.get(i).copied().unwrap_or(false);
        let d = self.distance(Source::Connected);
        let route =
            RibRoute::new(Source::Connected, Forward::Connected { ifindex }).with_distance(d);
        let rib = self.table.rib_mut();
        rib.set_link(
            ifindex,
            LinkState {
                up,
                v4: v4.clone(),
                v6: v6.clone(),
            },
        );
        for p in v4 {
            rib.add(p, &route)?;
        }
        for p in v6 {
            rib.add(p, &route)?;
        }
        Ok(())
    }

    /// The administrative distance routes of `source` get.
    pub fn distance(&self, source: Source) -> u8 {
        self.config
            .distances
            .get(source.index())
            .copied()
            .unwrap_or_else(|| source.default_distance())
    }

    /// New administrative distances: routes announced from now on take them (the RIB's
    /// existing routes are moved with `Rib::set_source_distance`).
    pub fn set_distances(&mut self, distances: [u8; Source::COUNT]) {
        self.config.distances = distances;
    }

    /// A route of `source` to `nexthop` at the configured distance.
    pub fn route(&self, source: Source, nexthop: Forward) -> RibRoute {
        RibRoute::new(source, nexthop).with_distance(self.distance(source))
    }

    /// `source`'s routes for `prefix` become `routes` (none withdraws).
    pub fn announce(
        &mut self,
        prefix: IpPrefix,
        source: Source,
        routes: &[RibRoute],
    ) -> Result<(), RibError> {
        let rib = self.table.rib_mut();
        match prefix {
            IpPrefix::V4(p) => rib.replace(p, source, routes),
            IpPrefix::V6(p) => rib.replace(p, source, routes),
        }
    }

    /// Withdraws `source`'s routes for `prefix`; returns how many.
    pub fn withdraw(&mut self, prefix: IpPrefix, source: Source) -> usize {
        let rib = self.table.rib_mut();
        match prefix {
            IpPrefix::V4(p) => rib.withdraw(p, source),
            IpPrefix::V6(p) => rib.withdraw(p, source),
        }
    }

    /// Takes port `ifindex` down or up: routes through it leave the FIB or come back (the
    /// RIB keeps them).
    pub fn set_port_up(&mut self, ifindex: u32, up: bool) -> ResolveReport {
        let Some(i) = self.specs.iter().position(|s| s.ifindex == ifindex) else {
            return ResolveReport::default();
        };
        if self.up.get(i) == Some(&up) {
            return ResolveReport::default();
        }
        if let Some(u) = self.up.get_mut(i) {
            *u = up;
        }
        let Some(spec) = self.specs.get(i) else {
            return ResolveReport::default();
        };
        let (v4, v6) = subnets(spec);
        self.table
            .rib_mut()
            .set_link(ifindex, LinkState { up, v4, v6 })
    }

    /// Whether port `ifindex` is up.
    pub fn port_up(&self, ifindex: u32) -> bool {
        self.specs
            .iter()
            .position(|s| s.ifindex == ifindex)
            .and_then(|i| self.up.get(i).copied())
            .unwrap_or(false)
    }

    /// Loads a whole table as routes of `source`, its routes spread over `via4` / `via6`
    /// (gateway, port) by their own next-hop value (a table's gateways, or the nh64 values
    /// of a table without any), so a full table uses several gateways the way a real one
    /// does. A family without gateways is not loaded. One FIB build per family.
    pub fn load_table(
        &mut self,
        table: &Table,
        source: Source,
        via4: &[(IpAddr, u32)],
        via6: &[(IpAddr, u32)],
    ) -> Result<LoadReport, RouterError> {
        let t = Table {
            v4: if via4.is_empty() {
                Vec::new()
            } else {
                table.v4.clone()
            },
            v6: if via6.is_empty() {
                Vec::new()
            } else {
                table.v6.clone()
            },
            nexthops: table.nexthops.clone(),
        };
        // A value's gateway is the value's turn in the family's list of gateways; the lists
        // of a family with routes are not empty.
        let report = self.table.load_table_with(&t, source, |v, _, v4| {
            let via = if v4 { via4 } else { via6 };
            let i = (v.max(1) as usize - 1) % via.len().max(1);
            match via.get(i) {
                Some(&(addr, port)) => Forward::Gateway {
                    addr,
                    ifindex: Some(port),
                },
                None => Forward::Blackhole,
            }
        });
        report.map_err(|e| match e {
            LoadError::Rib(e) => RouterError::Rib(e),
            LoadError::Fib(e) => RouterError::Fib(e),
        })
    }

    /// Publishes pending route changes if the oldest has waited the delay bound.
    pub fn poll(&mut self, now: Instant) -> Result<bool, FibError> {
        self.table.poll(now)
    }

    /// When pending route changes are due for publication, if there are any.
    pub fn deadline(&self) -> Option<Instant> {
        self.table.deadline()
    }

    /// Publishes pending route changes now.
    pub fn publish(&mut self) -> Result<(), FibError> {
        self.table.publish()
    }

    /// Publishes, then brings the FIBs' spare copies up to date (for quiet moments).
    pub fn settle(&mut self) -> Result<(), FibError> {
        self.table.settle()
    }

    /// The RIB.
    pub fn rib(&self) -> &Rib {
        self.table.rib()
    }

    /// The RIB, to change (published by the next [`Router::poll`] or [`Router::publish`]).
    pub fn rib_mut(&mut self) -> &mut Rib {
        self.table.rib_mut()
    }

    /// The route table (RIB, live FIBs, published next hops).
    pub fn route_table(&self) -> &RouteTable<E4, E6> {
        &self.table
    }

    /// The route table, to change.
    pub fn route_table_mut(&mut self) -> &mut RouteTable<E4, E6> {
        &mut self.table
    }

    /// The ports as workers see them.
    pub fn ports(&self) -> Arc<Ports> {
        Arc::clone(&self.shared)
    }

    /// The ports' settings.
    pub fn specs(&self) -> &[PortSpec] {
        &self.specs
    }

    /// Every port's neighbor tables, in port order.
    pub fn tables(&self) -> &[PortTables<Packet>] {
        &self.tables
    }

    /// Every port's neighbor tables, to change (publish them after).
    pub fn tables_mut(&mut self) -> &mut [PortTables<Packet>] {
        &mut self.tables
    }

    /// The neighbor tables of port `ifindex`.
    pub fn port_tables_mut(&mut self, ifindex: u32) -> Option<&mut PortTables<Packet>> {
        self.tables.iter_mut().find(|t| t.port.ifindex == ifindex)
    }

    /// Marks `addr` reachable at `mac` in port `ifindex`'s ARP table and publishes it (what
    /// an ARP reply does); returns the packets it held, ready to send once their
    /// destination MAC is written.
    pub fn resolve4(&mut self, ifindex: u32, addr: Ipv4Addr, mac: MacAddr) -> Vec<Packet> {
        self.now += 1;
        let now = self.now;
        let Some(t) = self.port_tables_mut(ifindex) else {
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
        let Some(t) = self.port_tables_mut(ifindex) else {
            return Vec::new();
        };
        let _ = t.nd.apply(addr, Event::Resolve, now);
        let out = t.nd.apply(addr, advert(mac), now);
        t.nd.publish();
        out.transmit
    }

    /// Holds `packet` while `nexthop` on port `ifindex` resolves (what the control plane
    /// does with a worker's `Resolve` verdict); returns the packets the bounded queue
    /// dropped.
    pub fn hold(&mut self, ifindex: u32, nexthop: IpAddr, packet: Packet) -> Vec<Packet> {
        self.now += 1;
        let now = self.now;
        let Some(t) = self.port_tables_mut(ifindex) else {
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

    /// Advances the neighbor tables' clock by `ticks` (retransmissions, failures) and
    /// publishes them.
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

    /// A worker reading this router.
    pub fn worker(&self, config: WorkerConfig) -> Worker<E4, E6> {
        let (f4, f6, nh) = self.table.readers();
        Worker::new(config, f4, f6, nh, self.ports())
    }
}

impl<E4, E6> Router<E4, E6>
where
    E4: LpmUpdate<u32> + Clone,
    E6: LpmUpdate<u128> + Clone,
    E4::Config: Default,
    E6::Config: Default,
{
    /// A router with these ports and the engines' default configurations.
    pub fn new(specs: Vec<PortSpec>, config: RouterConfig) -> Result<Self, RouterError> {
        Self::with_engines(specs, config, E4::Config::default(), E6::Config::default())
    }
}

fn advert(mac: MacAddr) -> Event {
    Event::Advert {
        mac: Some(mac),
        solicited: true,
        override_flag: true,
    }
}
