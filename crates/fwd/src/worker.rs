//! A forwarding worker: the stages strung together over a batch.
//!
//! ```text
//!   Batch.packets ─┬─ pass 1, per packet: eth_input → ip4/ip6_input → classify → ttl
//!                  │     punts, drops and expiries end here; transit packets become work
//!                  ├─ pass 2: flow table lookup per packet (split+flow), then one bulk FIB
//!                  │     lookup per family for the misses and stale entries
//!                  └─ pass 3, per packet: route → ecmp → neighbor → mtu → rewrite → verdict
//!                        (a flow hit skips route, ecmp and neighbor: its entry holds them)
//! ```
//!
//! **What a worker owns** (nothing of it is shared or locked): its flow table, its ECMP
//! bucket tables, its ICMP token bucket, its counters and scratch arrays. **What it reads**:
//! the published FIB snapshots (one `load` per family per batch, held for the batch), the
//! published next-hop table, and each port's ARP and ND snapshots through per-worker caches
//! (one atomic read per use while nothing changed). It never waits for the control plane.
//!
//! **Flow entries are checked, not trusted.** An entry holds the FIB version it was made
//! under, the route's and the member's next-hop generation and version, and the neighbor's
//! `(id, gen)`. A hit is used only if all still match; otherwise the entry is stale and is
//! recomputed, and the flow keeps its ECMP member if the member is still in the route's
//! group (stateful ECMP), even when the group itself changed.
//!
//! **Counting.** Every packet ends in one [`Outcome`](crate::counters::Outcome); drops carry
//! a [`DropReason`]. After each batch the worker copies its counters to its
//! [`SharedCounters`] for readers on other threads.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use vfsr_cpu::prefetch;
use vfsr_fib::nexthop::{NhReader, NhSnapshot};
use vfsr_fib::FibReader;
use vfsr_flow::{FlowConfig, FlowHasher, FlowKey, FlowTable, HashFields, KeyMode, Lookup};
use vfsr_lpm::Lpm;
use vfsr_neigh::NeighborCache;
use vfsr_wire::MacAddr;

use crate::counters::{Counters, DropReason, Event, PuntClass, SharedCounters};
use crate::frag::Fragmenter;
use crate::icmp_error::{icmp4_error, icmp6_error, Icmp4Error, Icmp6Error};
use crate::packet::{Batch, Packet, Verdict, DEFAULT_BUFFER};
use crate::port::{Port, Ports};
use crate::profile::{Clock, Profile, Stage};
use crate::ratelimit::TokenBucket;
use crate::stage::classify::{classify4, classify6, punt_class, Class};
use crate::stage::ecmp::{EcmpGroups, EcmpOutcome};
use crate::stage::eth_input::{eth_input, EthOutcome, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETH_HEADER};
use crate::stage::ip4_input::{ip4_input, ports4, Ip4Outcome};
use crate::stage::ip6_input::{ip6_input, ports6, Ip6Outcome};
use crate::stage::mtu::{mtu4, mtu6, MtuOutcome};
use crate::stage::neighbor::{neighbor, NeighOutcome};
use crate::stage::rewrite::{decrement_hop_limit, decrement_ttl4, set_macs};
use crate::stage::route::{route, single, RouteOutcome};
use crate::stage::ttl::{ttl_check, TtlOutcome};

/// How a worker behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerConfig {
    /// Packets per batch the runtime hands over (the worker takes any size).
    pub batch_size: usize,
    /// The flow table's size and idle timeout; `None` runs without a flow table.
    pub flow: Option<FlowConfig>,
    /// What a flow is: the 5-tuple ([`KeyMode::FiveTuple`]) or the destination only
    /// ([`KeyMode::Destination`], the FreeBSD paper's second mode).
    pub flow_key: KeyMode,
    /// Which fields pick an ECMP member.
    pub ecmp_fields: HashFields,
    /// Fragment IPv4 packets without DF that exceed the egress MTU (else drop them).
    pub fragment: bool,
    /// ICMP errors per second this worker may send.
    pub icmp_rate: u32,
    /// ICMP errors it may send at once.
    pub icmp_burst: u32,
    /// Flow-table buckets visited for idle entries after each batch.
    pub gc_budget: usize,
    /// List the packets whose forwarding decision depends on the destination alone in
    /// [`Batch::offload`].
    pub report_offload: bool,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            batch_size: 32,
            flow: Some(FlowConfig::default()),
            flow_key: KeyMode::FiveTuple,
            ecmp_fields: HashFields::FiveTuple,
            fragment: true,
            icmp_rate: TokenBucket::DEFAULT_RATE,
            icmp_burst: TokenBucket::DEFAULT_BURST,
            gc_budget: 16,
            report_offload: false,
        }
    }
}

/// What a flow entry caches: the forwarding decision and the versions it was made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FlowValue {
    fib_version: u64,
    neigh_gen: u64,
    /// The FIB's answer (a single next hop or a group).
    route_nh: u32,
    route_gen: u32,
    route_version: u32,
    /// The single next hop used (equal to `route_nh` without ECMP).
    member: u32,
    member_gen: u32,
    member_version: u32,
    oif: u32,
    neigh_id: u32,
    /// The egress port's epoch when the neighbor was looked up (or last checked).
    neigh_epoch: u32,
    mac: MacAddr,
}

/// What a worker knows of a port's neighbor snapshots at the start of a batch.
#[derive(Clone, Copy, Debug, Default)]
struct PortEpoch {
    /// Publication serials of the ARP and ND snapshots (not their addresses: a freed
    /// snapshot's address can come back for a newer one).
    arp: u64,
    nd: u64,
    /// Moves whenever `arp` or `nd` does; never 0 once seen.
    epoch: u32,
}

/// A worker's memo of a gateway next hop's neighbor: the LLE reference the FreeBSD design
/// lets L3 keep, checked by generation on every use (never trusted).
#[derive(Clone, Copy, Debug, Default)]
struct Adj {
    /// The next-hop entry it was made for (index + 1, generation, version; 0 = empty).
    tag: u32,
    nh_gen: u32,
    nh_version: u32,
    ifindex: u32,
    id: u32,
    gen: u64,
    mac: MacAddr,
    /// The port's epoch when last checked.
    epoch: u32,
}

/// Batches between two copies of the counters to the shared block (about 30 µs at line
/// rate; a copy is some 70 stores).
pub const COUNTER_FLUSH: u64 = 16;

/// Largest next-hop index with a neighbor memo.
const MAX_ADJ: u32 = 1 << 20;

/// Where a transit packet stands between the passes.
#[derive(Clone, Copy, Debug)]
struct Work {
    idx: usize,
    v6: bool,
    link_bcast: bool,
    /// IP length (total length, or 40 + payload length).
    ip_len: usize,
    df: bool,
    /// Addresses (IPv4 in the low 32 bits), protocol and ports: the flow key is made from
    /// them only when something needs it (flow table, ECMP, a punt's class).
    src: u128,
    dst: u128,
    proto: u8,
    sport: u16,
    dport: u16,
    /// The FIB's answer, once looked up.
    nh: u32,
}

impl Work {
    /// The packet's 5-tuple key.
    #[inline]
    fn key(&self) -> FlowKey {
        if self.v6 {
            FlowKey::v6(
                Ipv6Addr::from(self.src),
                Ipv6Addr::from(self.dst),
                self.proto,
                self.sport,
                self.dport,
            )
        } else {
            FlowKey::v4(
                Ipv4Addr::from(self.src as u32),
                Ipv4Addr::from(self.dst as u32),
                self.proto,
                self.sport,
                self.dport,
            )
        }
    }

    /// The destination address.
    #[inline]
    fn dst_addr(&self) -> IpAddr {
        if self.v6 {
            IpAddr::V6(Ipv6Addr::from(self.dst))
        } else {
            IpAddr::V4(Ipv4Addr::from(self.dst as u32))
        }
    }
}

/// A work item's flow-table state (kept apart: only a worker with a flow table has them).
#[derive(Clone, Copy, Debug)]
struct FlowSlot {
    fkey: FlowKey,
    fhash: u64,
    state: FlowState,
}

#[derive(Clone, Copy, Debug)]
enum FlowState {
    /// No flow table, or a miss.
    None,
    /// A stale entry: recompute, keeping its member if possible.
    Stale(FlowValue),
    /// A valid entry: use it.
    Hit(FlowValue),
}

/// A forwarding worker over IPv4 engine `E4` and IPv6 engine `E6`.
pub struct Worker<E4, E6> {
    config: WorkerConfig,
    fib4: FibReader<E4>,
    fib6: FibReader<E6>,
    nh: NhReader,
    /// Taken out for the length of a batch (no reference-count traffic shared with the
    /// other workers), put back at its end.
    ports: Option<Arc<Ports>>,
    arp: Vec<Option<NeighborCache<Ipv4Addr>>>,
    nd: Vec<Option<NeighborCache<Ipv6Addr>>>,
    /// Per port: the ARP and ND snapshots seen at the start of the batch (by address) and
    /// an epoch that moves when either changes. A cached neighbor reference made in the
    /// current epoch needs no further check.
    epochs: Vec<PortEpoch>,
    flow: Option<FlowTable<FlowValue>>,
    hasher: FlowHasher,
    groups: EcmpGroups,
    adj: Vec<Adj>,
    icmp: TokenBucket,
    counters: Counters,
    shared: Arc<SharedCounters>,
    ident: u16,
    batches: u64,
    spare: Vec<Packet>,
    work: Vec<Work>,
    flows: Vec<FlowSlot>,
    dst4: Vec<u32>,
    nh4: Vec<u32>,
    dst6: Vec<u128>,
    nh6: Vec<u32>,
    /// Cycles per stage, when profiling (`None`: one branch per stage boundary).
    profile: Option<Box<Profile>>,
}

impl<E4: Lpm<u32>, E6: Lpm<u128>> Worker<E4, E6> {
    /// A worker reading these FIBs, next-hop table and ports.
    pub fn new(
        config: WorkerConfig,
        fib4: FibReader<E4>,
        fib6: FibReader<E6>,
        nh: NhReader,
        ports: Arc<Ports>,
    ) -> Self {
        let bound = ports.index_bound();
        let mut arp = Vec::with_capacity(bound);
        let mut nd = Vec::with_capacity(bound);
        for i in 0..bound {
            let p = u32::try_from(i).ok().and_then(|i| ports.get(i));
            arp.push(p.map(|p| p.arp.cache()));
            nd.push(p.map(|p| p.nd.cache()));
        }
        let seed = config.flow.map_or(0, |f| f.seed);
        let cap = config.batch_size.max(1);
        Worker {
            flow: config.flow.map(FlowTable::new),
            hasher: FlowHasher::new(seed ^ 0x6563_6d70),
            groups: EcmpGroups::new(),
            adj: Vec::new(),
            icmp: TokenBucket::new(config.icmp_rate, config.icmp_burst),
            counters: Counters::default(),
            shared: Arc::new(SharedCounters::default()),
            ident: 0,
            batches: 0,
            spare: Vec::new(),
            work: Vec::with_capacity(cap),
            flows: Vec::with_capacity(cap),
            dst4: Vec::with_capacity(cap),
            nh4: Vec::with_capacity(cap),
            dst6: Vec::with_capacity(cap),
            nh6: Vec::with_capacity(cap),
            profile: None,
            config,
            fib4,
            fib6,
            nh,
            ports: Some(ports),
            epochs: vec![PortEpoch::default(); bound],
            arp,
            nd,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// This worker's counters (its own copy, current).
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The block this worker publishes its counters to after each batch.
    pub fn shared(&self) -> Arc<SharedCounters> {
        Arc::clone(&self.shared)
    }

    /// The flow table's counters, if it has one.
    pub fn flow_counters(&self) -> Option<vfsr_flow::FlowCounters> {
        self.flow.as_ref().map(|f| *f.counters())
    }

    /// Entries in the flow table.
    pub fn flow_len(&self) -> usize {
        self.flow.as_ref().map_or(0, |f| f.len())
    }

    /// Resizes the flow table at run time (entries are kept while they fit); returns the
    /// new capacity, or 0 without a flow table.
    pub fn resize_flow_table(&mut self, capacity: usize, now_ns: u64) -> usize {
        match self.flow.as_mut() {
            Some(f) => {
                f.resize(capacity, tick(now_ns));
                f.capacity()
            }
            None => 0,
        }
    }

    /// Sets the flow table's idle timeout, in milliseconds.
    pub fn set_flow_idle_timeout(&mut self, ms: u32) {
        if let Some(f) = self.flow.as_mut() {
            f.set_idle_timeout(ms);
        }
    }

    /// Gives buffers back for the packets the worker generates (ICMP errors, fragments).
    pub fn recycle(&mut self, packets: impl IntoIterator<Item = Packet>) {
        for p in packets {
            if self.spare.len() < 1024 {
                self.spare.push(p);
            }
        }
    }

    /// Starts (or restarts) a per-stage profile of this worker's batches (see
    /// [`crate::profile`]): TSC timestamps around each stage, seven reads per batch.
    pub fn enable_profile(&mut self) {
        self.profile = Some(Box::default());
    }

    /// The profile taken since [`Worker::enable_profile`], if any.
    pub fn profile(&self) -> Option<&Profile> {
        self.profile.as_deref()
    }

    /// Processes one batch at time `now_ns` (monotonic nanoseconds): fills
    /// `batch.verdicts` (one per packet) and appends generated packets to
    /// `batch.generated`.
    pub fn process(&mut self, batch: &mut Batch, now_ns: u64) {
        let mut clock = self.profile.is_some().then(Clock::start);
        macro_rules! mark {
            ($stage:expr) => {
                if let (Some(c), Some(p)) = (clock.as_mut(), self.profile.as_deref_mut()) {
                    c.mark(p, $stage);
                }
            };
        }
        let n = batch.packets.len();
        batch.verdicts.clear();
        batch.verdicts.resize(n, Verdict::Consumed);
        batch.offload.clear();
        self.work.clear();
        self.refresh_epochs();
        let fib4 = self.fib4.load();
        let fib6 = self.fib6.load();
        let nh = self.nh.load();
        self.counters.event(Event::Rx, n as u64);
        let Some(ports) = self.ports.take() else {
            // Only a batch that panicked half-way could leave it out; none can.
            for v in batch.verdicts.iter_mut() {
                *v = self.drop(DropReason::NoIngressPort);
            }
            return;
        };
        // The headers of the whole batch are requested from memory at once: frames arrive
        // in buffers the NIC (or the previous batch) wrote a while ago, no longer in L1.
        for p in &batch.packets {
            prefetch(p.frame().as_ptr());
        }
        mark!(Stage::Rx);

        // Pass 1: input, classification, TTL.
        for idx in 0..n {
            let v = self.input(batch, idx, &ports, &fib4.engine, &fib6.engine, &nh, now_ns);
            if let Some(v) = v {
                if let Some(slot) = batch.verdicts.get_mut(idx) {
                    *slot = v;
                }
            }
        }
        mark!(Stage::Input);

        // Pass 2: flow table, then bulk FIB lookups for what it did not answer.
        let now = tick(now_ns);
        let mut work = std::mem::take(&mut self.work);
        let mut flows = std::mem::take(&mut self.flows);
        flows.clear();
        if let Some(table) = self.flow.as_ref() {
            // Hash and prefetch the whole batch first, so the misses overlap.
            let mode = self.config.flow_key;
            for w in &work {
                let fkey = flow_key(mode, &w.key());
                let fhash = table.hash(&fkey);
                table.prefetch_hash(fhash);
                flows.push(FlowSlot {
                    fkey,
                    fhash,
                    state: FlowState::None,
                });
            }
            for (w, f) in work.iter().zip(flows.iter_mut()) {
                let version = if w.v6 { fib6.version } else { fib4.version };
                f.state = self.flow_lookup(&f.fkey, f.fhash, now, version, &nh);
            }
        }
        mark!(Stage::Flow);
        let hit = |flows: &[FlowSlot], i: usize| {
            flows
                .get(i)
                .is_some_and(|f| matches!(f.state, FlowState::Hit(_)))
        };
        self.dst4.clear();
        self.dst6.clear();
        for (i, w) in work.iter().enumerate() {
            if hit(&flows, i) {
                continue;
            }
            if w.v6 {
                self.dst6.push(w.dst);
            } else {
                self.dst4.push(w.dst as u32);
            }
        }
        self.nh4.clear();
        self.nh4.resize(self.dst4.len(), 0);
        fib4.engine.lookup_bulk(&self.dst4, &mut self.nh4);
        self.nh6.clear();
        self.nh6.resize(self.dst6.len(), 0);
        fib6.engine.lookup_bulk(&self.dst6, &mut self.nh6);
        let (mut i4, mut i6) = (0usize, 0usize);
        for (i, w) in work.iter_mut().enumerate() {
            if hit(&flows, i) {
                continue;
            }
            if w.v6 {
                w.nh = self.nh6.get(i6).copied().unwrap_or(0);
                i6 += 1;
            } else {
                w.nh = self.nh4.get(i4).copied().unwrap_or(0);
                i4 += 1;
            }
        }
        mark!(Stage::Fib);

        // Pass 3: next hop, neighbor, MTU, rewrite.
        for (i, w) in work.iter().enumerate() {
            let version = if w.v6 { fib6.version } else { fib4.version };
            let v = self.finish(
                batch,
                w,
                flows.get(i),
                version,
                &nh,
                &ports,
                &fib4.engine,
                &fib6.engine,
                now,
                now_ns,
            );
            if let Some(slot) = batch.verdicts.get_mut(w.idx) {
                *slot = v;
            }
        }
        mark!(Stage::Output);
        self.work = work;
        self.flows = flows;
        self.ports = Some(ports);

        if let Some(f) = self.flow.as_mut() {
            let before = f.counters().evictions;
            f.gc(now, self.config.gc_budget);
            let evicted = f.counters().evictions - before;
            self.counters.event(Event::FlowEvicted, evicted);
        }
        self.batches = self.batches.wrapping_add(1);
        if self.batches.is_multiple_of(COUNTER_FLUSH) {
            self.shared.store(&self.counters);
        }
        mark!(Stage::Counters);
        if let Some(p) = self.profile.as_deref_mut() {
            p.packets += n as u64;
            p.batches += 1;
        }
    }

    /// Copies the counters to the shared block now (the worker does so every
    /// `COUNTER_FLUSH` batches by itself; a runtime calls this when a worker goes idle).
    pub fn flush_counters(&self) {
        self.shared.store(&self.counters);
    }

    /// Pass 1 for packet `idx`: a final verdict, or `None` after queueing it as work.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn input(
        &mut self,
        batch: &mut Batch,
        idx: usize,
        ports: &Ports,
        fib4: &E4,
        fib6: &E6,
        nh: &NhSnapshot,
        now_ns: u64,
    ) -> Option<Verdict> {
        let pkt = batch.packets.get(idx)?;
        let Some(port) = ports.get(pkt.iif) else {
            return Some(self.drop(DropReason::NoIngressPort));
        };
        let frame = pkt.frame();
        let ip = frame.get(ETH_HEADER..).unwrap_or(&[]);
        match eth_input(frame, port.mac) {
            EthOutcome::Drop(r) => Some(self.drop(r)),
            EthOutcome::Arp => Some(self.punt(PuntClass::ArpNd)),
            EthOutcome::Ipv4 { link_broadcast } => {
                let meta = match ip4_input(ip) {
                    Ip4Outcome::Valid(m) => m,
                    Ip4Outcome::Drop(r) => return Some(self.drop(r)),
                };
                let l4 = ports4(ip, &meta);
                match classify4(&meta, link_broadcast, ports, l4) {
                    Class::Forward => {}
                    Class::Punt(c) => return Some(self.punt(c)),
                    Class::Drop(r) => return Some(self.drop(r)),
                }
                if meta.options {
                    self.counters.event(Event::Ip4Options, 1);
                }
                if ttl_check(meta.ttl) == TtlOutcome::Expired {
                    let orig = ip.get(..usize::from(meta.total_len)).unwrap_or(ip);
                    let orig = orig.to_vec();
                    self.icmp4(
                        batch,
                        &orig,
                        link_broadcast,
                        Icmp4Error::TimeExceeded,
                        port,
                        ports,
                        fib4,
                        nh,
                        now_ns,
                    );
                    return Some(self.drop(DropReason::TtlExpired));
                }
                self.work.push(Work {
                    idx,
                    v6: false,
                    link_bcast: link_broadcast,
                    ip_len: usize::from(meta.total_len),
                    df: meta.df,
                    src: u128::from(meta.src),
                    dst: u128::from(meta.dst),
                    proto: meta.protocol,
                    sport: l4.0,
                    dport: l4.1,
                    nh: 0,
                });
                None
            }
            EthOutcome::Ipv6 { link_broadcast } => {
                let meta = match ip6_input(ip) {
                    Ip6Outcome::Valid(m) => m,
                    Ip6Outcome::Drop(r) => return Some(self.drop(r)),
                };
                let l4 = ports6(ip, &meta);
                let icmp_type = if meta.upper == 58 && !meta.later_fragment {
                    ip.get(meta.upper_offset).copied()
                } else {
                    None
                };
                match classify6(&meta, link_broadcast, ports, l4, icmp_type) {
                    Class::Forward => {}
                    Class::Punt(c) => return Some(self.punt(c)),
                    Class::Drop(r) => return Some(self.drop(r)),
                }
                let ip_len = 40 + usize::from(meta.payload_len);
                if ttl_check(meta.hop_limit) == TtlOutcome::Expired {
                    let orig = ip.get(..ip_len).unwrap_or(ip).to_vec();
                    self.icmp6(
                        batch,
                        &orig,
                        link_broadcast,
                        Icmp6Error::TimeExceeded,
                        port,
                        ports,
                        fib6,
                        nh,
                        now_ns,
                    );
                    return Some(self.drop(DropReason::TtlExpired));
                }
                self.work.push(Work {
                    idx,
                    v6: true,
                    link_bcast: link_broadcast,
                    ip_len,
                    df: true,
                    src: meta.src,
                    dst: meta.dst,
                    proto: meta.upper,
                    sport: l4.0,
                    dport: l4.1,
                    nh: 0,
                });
                None
            }
        }
    }

    /// The flow table's answer for `key`, checked against the current snapshots.
    #[inline]
    fn flow_lookup(
        &mut self,
        fkey: &FlowKey,
        fhash: u64,
        now: u32,
        fib_version: u64,
        nh: &NhSnapshot,
    ) -> FlowState {
        let Some(table) = self.flow.as_mut() else {
            return FlowState::None;
        };
        let arp = &mut self.arp;
        let nd = &mut self.nd;
        let epochs = &self.epochs;
        let v6 = fkey.family() == vfsr_flow::Family::V6;
        let valid = |v: &FlowValue| {
            v.fib_version == fib_version
                && entry_matches(nh, v.member, v.member_gen, v.member_version)
                && (v.route_nh == v.member
                    || entry_matches(nh, v.route_nh, v.route_gen, v.route_version))
                && (epoch_of(epochs, v.oif) == v.neigh_epoch
                    || neigh_current(arp, nd, v6, v.oif, v.neigh_id, v.neigh_gen))
        };
        match table.lookup_hashed(fkey, fhash, now, valid) {
            Lookup::Hit(v) => {
                self.counters.event(Event::FlowHit, 1);
                FlowState::Hit(v)
            }
            Lookup::Stale(v) => {
                self.counters.event(Event::FlowStale, 1);
                FlowState::Stale(v)
            }
            Lookup::Miss => {
                self.counters.event(Event::FlowMiss, 1);
                FlowState::None
            }
        }
    }

    /// Pass 3 for one transit packet.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn finish(
        &mut self,
        batch: &mut Batch,
        w: &Work,
        slot: Option<&FlowSlot>,
        fib_version: u64,
        nh: &NhSnapshot,
        ports: &Ports,
        fib4: &E4,
        fib6: &E6,
        now: u32,
        now_ns: u64,
    ) -> Verdict {
        let state = slot.map_or(FlowState::None, |f| f.state);
        let value = match state {
            FlowState::Hit(v) => v,
            FlowState::None | FlowState::Stale(_) => {
                let stale = match state {
                    FlowState::Stale(v) => Some(v),
                    _ => None,
                };
                match self.decide(batch, w, stale, fib_version, nh, ports, fib4, fib6, now_ns) {
                    Ok(v) => {
                        if let (Some(f), Some(slot)) = (self.flow.as_mut(), slot) {
                            f.insert_hashed(slot.fkey, slot.fhash, v, now);
                        }
                        v
                    }
                    Err(verdict) => return verdict,
                }
            }
        };
        self.output(batch, w, &value, ports, fib4, fib6, nh, now_ns)
    }

    /// Route, ECMP and neighbor for a packet the flow table did not answer: the value to
    /// cache, or the packet's final verdict.
    #[allow(clippy::too_many_arguments)]
    fn decide(
        &mut self,
        batch: &mut Batch,
        w: &Work,
        stale: Option<FlowValue>,
        fib_version: u64,
        nh: &NhSnapshot,
        ports: &Ports,
        fib4: &E4,
        fib6: &E6,
        now_ns: u64,
    ) -> Result<FlowValue, Verdict> {
        let (route_gen, route_version) = nh.get(w.nh).map_or((0, 0), |e| (e.gen, e.version));
        let outcome = route(w.nh, nh);
        let single_out = match outcome {
            RouteOutcome::Group {
                nh: g,
                members,
                weights,
            } => {
                // Stateful ECMP: a known flow keeps its member while it is in the group.
                let kept = stale.and_then(|old| {
                    (members.contains(&old.member)
                        && entry_matches(nh, old.member, old.member_gen, old.member_version))
                    .then_some(old.member)
                });
                let member = match kept {
                    Some(m) => {
                        if stale
                            .is_some_and(|o| o.route_nh != g || o.route_version != route_version)
                        {
                            self.counters.event(Event::EcmpKept, 1);
                        }
                        m
                    }
                    None => {
                        let hash = self.hasher.hash_fields(&w.key(), self.config.ecmp_fields);
                        let from = stale.map(|o| o.route_nh).filter(|&o| o != g);
                        match self.groups.select(
                            g,
                            route_gen,
                            route_version,
                            members,
                            weights,
                            hash,
                            from,
                        ) {
                            EcmpOutcome::Member(m) => m,
                            EcmpOutcome::Drop(r) => return Err(self.drop(r)),
                        }
                    }
                };
                match nh.get(member).and_then(|e| single(member, &e.forward)) {
                    Some(o) => o,
                    None => return Err(self.drop(DropReason::EcmpEmpty)),
                }
            }
            o => o,
        };
        let (member, ifindex, gateway) = match single_out {
            RouteOutcome::Via {
                nh: m,
                ifindex,
                gateway,
            } => (m, ifindex, gateway),
            RouteOutcome::Local => {
                let (proto, ports_l4) = (w.proto, (w.sport, w.dport));
                let icmp6 = None;
                return Err(self.punt(punt_class(proto, ports_l4, icmp6)));
            }
            RouteOutcome::Drop { reason, icmp } => {
                if icmp {
                    self.unreachable(batch, w, reason, ports, fib4, fib6, nh, now_ns);
                }
                return Err(self.drop(reason));
            }
            RouteOutcome::Group { .. } => return Err(self.drop(DropReason::EcmpEmpty)),
        };
        let (member_gen, member_version) = nh.get(member).map_or((0, 0), |e| (e.gen, e.version));
        if ports.get(ifindex).is_none() {
            return Err(self.drop(DropReason::NoEgressPort));
        }
        let target = gateway.unwrap_or_else(|| w.dst_addr());
        let found = if gateway.is_some() {
            self.neighbor_of_gateway(member, member_gen, member_version, ifindex, target)
        } else {
            self.neighbor_lookup(ifindex, target)
        };
        match found {
            NeighOutcome::Resolved { mac, id, gen } => Ok(FlowValue {
                fib_version,
                neigh_gen: gen,
                route_nh: w.nh,
                route_gen,
                route_version,
                member,
                member_gen,
                member_version,
                oif: ifindex,
                neigh_id: id,
                neigh_epoch: epoch_of(&self.epochs, ifindex),
                mac,
            }),
            NeighOutcome::Miss => {
                // The control plane holds it; it goes out with TTL already decremented.
                if let Some(p) = batch.packets.get_mut(w.idx) {
                    if let Some(port) = ports.get(ifindex) {
                        let frame = p.frame_mut();
                        if w.v6 {
                            decrement_hop_limit(frame);
                        } else {
                            decrement_ttl4(frame);
                        }
                        set_macs(frame, MacAddr([0; 6]), port.mac);
                    }
                    p.oif = ifindex;
                }
                self.counters.held();
                Err(Verdict::Resolve {
                    ifindex,
                    nexthop: target,
                })
            }
            NeighOutcome::Failed => {
                let reason = DropReason::NeighborFailed;
                self.unreachable(batch, w, reason, ports, fib4, fib6, nh, now_ns);
                Err(self.drop(reason))
            }
        }
    }

    /// Notes which ports' neighbor snapshots changed since the last batch (two atomic reads
    /// per port): references cached in an unchanged port's epoch stay valid without a check.
    fn refresh_epochs(&mut self) {
        let ports = self.arp.iter_mut().zip(self.nd.iter_mut());
        for ((a, n), e) in ports.zip(self.epochs.iter_mut()) {
            let pa = a.as_mut().map_or(0, |c| c.load().serial());
            let pn = n.as_mut().map_or(0, |c| c.load().serial());
            if pa != e.arp || pn != e.nd || e.epoch == 0 {
                e.arp = pa;
                e.nd = pn;
                e.epoch = e.epoch.wrapping_add(1).max(1);
            }
        }
    }

    /// The neighbor of gateway next hop `member`: from the memo when its `(id, gen)` is
    /// still current, else looked up in the interface's table (and memoized).
    #[inline]
    fn neighbor_of_gateway(
        &mut self,
        member: u32,
        nh_gen: u32,
        nh_version: u32,
        ifindex: u32,
        target: IpAddr,
    ) -> NeighOutcome {
        let now = epoch_of(&self.epochs, ifindex);
        if let Some(a) = self.adj.get(member as usize).copied() {
            if a.tag == member.wrapping_add(1)
                && a.nh_gen == nh_gen
                && a.nh_version == nh_version
                && a.ifindex == ifindex
            {
                let fresh = a.epoch == now
                    || neigh_current(
                        &mut self.arp,
                        &mut self.nd,
                        target.is_ipv6(),
                        ifindex,
                        a.id,
                        a.gen,
                    );
                if fresh {
                    if a.epoch != now {
                        if let Some(m) = self.adj.get_mut(member as usize) {
                            m.epoch = now;
                        }
                    }
                    return NeighOutcome::Resolved {
                        mac: a.mac,
                        id: a.id,
                        gen: a.gen,
                    };
                }
            }
        }
        let found = self.neighbor_lookup(ifindex, target);
        if let NeighOutcome::Resolved { mac, id, gen } = found {
            if member < MAX_ADJ {
                let i = member as usize;
                if self.adj.len() <= i {
                    self.adj.resize(i + 1, Adj::default());
                }
                if let Some(slot) = self.adj.get_mut(i) {
                    *slot = Adj {
                        epoch: epoch_of(&self.epochs, ifindex),
                        tag: member.wrapping_add(1),
                        nh_gen,
                        nh_version,
                        ifindex,
                        id,
                        gen,
                        mac,
                    };
                }
            }
        }
        found
    }

    /// Looks `target` up in port `ifindex`'s ARP or ND table.
    #[inline]
    fn neighbor_lookup(&mut self, ifindex: u32, target: IpAddr) -> NeighOutcome {
        match target {
            IpAddr::V4(a) => match self.arp.get_mut(ifindex as usize) {
                Some(Some(c)) => neighbor(c.load(), &a),
                _ => NeighOutcome::Miss,
            },
            IpAddr::V6(a) => match self.nd.get_mut(ifindex as usize) {
                Some(Some(c)) => neighbor(c.load(), &a),
                _ => NeighOutcome::Miss,
            },
        }
    }

    /// MTU and rewrite, once the next hop and its MAC are known.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn output(
        &mut self,
        batch: &mut Batch,
        w: &Work,
        v: &FlowValue,
        ports: &Ports,
        fib4: &E4,
        fib6: &E6,
        nh: &NhSnapshot,
        now_ns: u64,
    ) -> Verdict {
        let Some(port) = ports.get(v.oif) else {
            return self.drop(DropReason::NoEgressPort);
        };
        let verdict = if w.v6 {
            mtu6(w.ip_len, port.mtu)
        } else {
            mtu4(
                u16::try_from(w.ip_len).unwrap_or(u16::MAX),
                w.df,
                port.mtu,
                self.config.fragment,
            )
        };
        match verdict {
            MtuOutcome::Fits => {
                let Some(p) = batch.packets.get_mut(w.idx) else {
                    return self.drop(DropReason::NoEgressPort);
                };
                let frame = p.frame_mut();
                if w.v6 {
                    decrement_hop_limit(frame);
                } else {
                    decrement_ttl4(frame);
                }
                set_macs(frame, v.mac, port.mac);
                p.oif = v.oif;
                if self.config.report_offload && v.route_nh == v.member {
                    batch.offload.push(w.idx as u32);
                }
                self.counters.forwarded();
                Verdict::Forward { oif: v.oif }
            }
            MtuOutcome::FragNeeded { mtu } => {
                let kind = Icmp4Error::FragNeeded { mtu };
                self.error_for(batch, w, ErrorKind::V4(kind), ports, fib4, fib6, nh, now_ns);
                self.drop(DropReason::MtuExceededDf)
            }
            MtuOutcome::TooBig { mtu } => {
                let kind = Icmp6Error::PacketTooBig {
                    mtu: u32::from(mtu),
                };
                self.error_for(batch, w, ErrorKind::V6(kind), ports, fib4, fib6, nh, now_ns);
                self.drop(DropReason::MtuExceeded6)
            }
            MtuOutcome::Disabled => self.drop(DropReason::FragmentationDisabled),
            MtuOutcome::Fragment { mtu } => self.fragment(batch, w, v, port, mtu),
        }
    }

    /// Splits an IPv4 packet into fragments that fit `mtu` and queues them.
    fn fragment(
        &mut self,
        batch: &mut Batch,
        w: &Work,
        v: &FlowValue,
        port: &Port,
        mtu: u16,
    ) -> Verdict {
        let Some(p) = batch.packets.get_mut(w.idx) else {
            return self.drop(DropReason::FragmentFailed);
        };
        decrement_ttl4(p.frame_mut());
        let ip = p
            .frame()
            .get(ETH_HEADER..ETH_HEADER + w.ip_len)
            .unwrap_or(&[]);
        let mut frags = match Fragmenter::new(ip, usize::from(mtu)) {
            Ok(f) => f,
            Err(_) => return self.drop(DropReason::FragmentFailed),
        };
        let start = batch.generated.len();
        loop {
            let mut out = self
                .spare
                .pop()
                .unwrap_or_else(|| Packet::with_capacity(DEFAULT_BUFFER));
            let need = ETH_HEADER + usize::from(mtu);
            if out.capacity() < need {
                out = Packet::with_capacity(need.max(DEFAULT_BUFFER));
            }
            let buf = out.buffer_mut();
            write_eth(buf, v.mac, port.mac, ETHERTYPE_IPV4);
            match frags.write_next(buf.get_mut(ETH_HEADER..).unwrap_or(&mut [])) {
                Ok(Some(len)) => {
                    out.set_len(ETH_HEADER + len);
                    out.iif = p.iif;
                    out.oif = v.oif;
                    batch.generated.push(out);
                }
                Ok(None) => {
                    self.spare.push(out);
                    break;
                }
                Err(_) => {
                    self.spare.push(out);
                    let made: Vec<Packet> = batch.generated.drain(start..).collect();
                    self.recycle(made);
                    return self.drop(DropReason::FragmentFailed);
                }
            }
        }
        let made = (batch.generated.len() - start) as u64;
        self.counters.event(Event::FragmentsMade, made);
        self.counters.forwarded();
        Verdict::Consumed
    }

    /// ICMP Destination Unreachable for a packet dropped for `reason`.
    #[allow(clippy::too_many_arguments)]
    fn unreachable(
        &mut self,
        batch: &mut Batch,
        w: &Work,
        reason: DropReason,
        ports: &Ports,
        fib4: &E4,
        fib6: &E6,
        nh: &NhSnapshot,
        now_ns: u64,
    ) {
        let kind = match (w.v6, reason) {
            (false, DropReason::NoRoute) => ErrorKind::V4(Icmp4Error::NetUnreachable),
            (false, _) => ErrorKind::V4(Icmp4Error::HostUnreachable),
            (true, DropReason::NoRoute) => ErrorKind::V6(Icmp6Error::NoRoute),
            (true, DropReason::Unreachable) => ErrorKind::V6(Icmp6Error::RejectRoute),
            (true, _) => ErrorKind::V6(Icmp6Error::AddressUnreachable),
        };
        self.error_for(batch, w, kind, ports, fib4, fib6, nh, now_ns);
    }

    /// Sends an ICMP error about work item `w`.
    #[allow(clippy::too_many_arguments)]
    fn error_for(
        &mut self,
        batch: &mut Batch,
        w: &Work,
        kind: ErrorKind,
        ports: &Ports,
        fib4: &E4,
        fib6: &E6,
        nh: &NhSnapshot,
        now_ns: u64,
    ) {
        let Some(p) = batch.packets.get(w.idx) else {
            return;
        };
        let Some(port) = ports.get(p.iif) else {
            return;
        };
        let orig = p
            .frame()
            .get(ETH_HEADER..ETH_HEADER + w.ip_len)
            .unwrap_or(&[])
            .to_vec();
        match kind {
            ErrorKind::V4(k) => {
                self.icmp4(batch, &orig, w.link_bcast, k, port, ports, fib4, nh, now_ns)
            }
            ErrorKind::V6(k) => {
                self.icmp6(batch, &orig, w.link_bcast, k, port, ports, fib6, nh, now_ns)
            }
        }
    }

    /// A buffer for a packet the worker makes: a recycled one, else a new one.
    fn take_buffer(&mut self) -> Packet {
        self.spare
            .pop()
            .unwrap_or_else(|| Packet::with_capacity(DEFAULT_BUFFER))
    }

    /// Builds, routes and queues an ICMPv4 error about `orig` (an IPv4 packet).
    #[allow(clippy::too_many_arguments)]
    fn icmp4(
        &mut self,
        batch: &mut Batch,
        orig: &[u8],
        link_bcast: bool,
        kind: Icmp4Error,
        in_port: &Port,
        ports: &Ports,
        fib4: &E4,
        nh: &NhSnapshot,
        now_ns: u64,
    ) {
        let Some(src) = in_port.icmp_source4() else {
            self.counters.event(Event::IcmpNoRoute, 1);
            return;
        };
        let mut out = self.take_buffer();
        self.ident = self.ident.wrapping_add(1);
        let built = icmp4_error(
            orig,
            link_bcast,
            kind,
            src,
            self.ident,
            out.buffer_mut().get_mut(ETH_HEADER..).unwrap_or(&mut []),
        );
        let dst = Ipv4Addr::new(
            orig.get(12).copied().unwrap_or(0),
            orig.get(13).copied().unwrap_or(0),
            orig.get(14).copied().unwrap_or(0),
            orig.get(15).copied().unwrap_or(0),
        );
        let hop = fib4.lookup(u32::from(dst));
        let key = FlowKey::v4(src, dst, 1, 0, 0);
        let reply = Reply {
            hop,
            dst: IpAddr::V4(dst),
            key,
            ethertype: ETHERTYPE_IPV4,
            sent: Event::Icmp4Sent,
        };
        self.send_error(batch, out, built.ok(), reply, in_port, nh, ports, now_ns);
    }

    /// Builds, routes and queues an ICMPv6 error about `orig` (an IPv6 packet).
    #[allow(clippy::too_many_arguments)]
    fn icmp6(
        &mut self,
        batch: &mut Batch,
        orig: &[u8],
        link_mcast: bool,
        kind: Icmp6Error,
        in_port: &Port,
        ports: &Ports,
        fib6: &E6,
        nh: &NhSnapshot,
        now_ns: u64,
    ) {
        let Some(src) = in_port.icmp_source6() else {
            self.counters.event(Event::IcmpNoRoute, 1);
            return;
        };
        let mut out = self.take_buffer();
        let built = icmp6_error(
            orig,
            link_mcast,
            kind,
            src,
            out.buffer_mut().get_mut(ETH_HEADER..).unwrap_or(&mut []),
        );
        let mut a = [0u8; 16];
        if let Some(s) = orig.get(8..24) {
            a.copy_from_slice(s);
        }
        let dst = Ipv6Addr::from(a);
        let hop = fib6.lookup(u128::from(dst));
        let reply = Reply {
            hop,
            dst: IpAddr::V6(dst),
            key: FlowKey::v6(src, dst, 58, 0, 0),
            ethertype: ETHERTYPE_IPV6,
            sent: Event::Icmp6Sent,
        };
        self.send_error(batch, out, built.ok(), reply, in_port, nh, ports, now_ns);
    }

    /// The common end of an ICMP error: `len` is the built message's length (`None` when
    /// the rules forbid one); rate-limits it, routes it back, and queues it or counts why not.
    #[allow(clippy::too_many_arguments)]
    fn send_error(
        &mut self,
        batch: &mut Batch,
        mut out: Packet,
        len: Option<usize>,
        reply: Reply,
        in_port: &Port,
        nh: &NhSnapshot,
        ports: &Ports,
        now_ns: u64,
    ) {
        let Some(len) = len else {
            self.counters.event(Event::IcmpSuppressed, 1);
            self.spare.push(out);
            return;
        };
        if !self.icmp.allow(now_ns) {
            self.counters.event(Event::IcmpRateLimited, 1);
            self.spare.push(out);
            return;
        }
        match self.reply_path(reply.hop, reply.dst, &reply.key, nh, ports) {
            Some((oif, mac, port_mac)) => {
                write_eth(out.buffer_mut(), mac, port_mac, reply.ethertype);
                out.set_len(ETH_HEADER + len);
                out.iif = in_port.ifindex;
                out.oif = oif;
                batch.generated.push(out);
                self.counters.event(reply.sent, 1);
            }
            None => {
                self.counters.event(Event::IcmpNoRoute, 1);
                self.spare.push(out);
            }
        }
    }

    /// Where a packet the router originates goes: `(oif, neighbor MAC, port MAC)`, if the
    /// route is usable and the neighbor resolved (an error is not worth holding).
    fn reply_path(
        &mut self,
        hop: u32,
        dst: IpAddr,
        key: &FlowKey,
        nh: &NhSnapshot,
        ports: &Ports,
    ) -> Option<(u32, MacAddr, MacAddr)> {
        let out = match route(hop, nh) {
            RouteOutcome::Group {
                nh: g,
                members,
                weights,
            } => {
                let e = nh.get(g)?;
                let hash = self.hasher.hash_fields(key, self.config.ecmp_fields);
                match self
                    .groups
                    .select(g, e.gen, e.version, members, weights, hash, None)
                {
                    EcmpOutcome::Member(m) => single(m, &nh.get(m)?.forward)?,
                    EcmpOutcome::Drop(_) => return None,
                }
            }
            o => o,
        };
        let RouteOutcome::Via {
            ifindex, gateway, ..
        } = out
        else {
            return None;
        };
        let port = ports.get(ifindex)?;
        let found = match gateway.unwrap_or(dst) {
            IpAddr::V4(a) => neighbor(self.arp.get_mut(ifindex as usize)?.as_mut()?.load(), &a),
            IpAddr::V6(a) => neighbor(self.nd.get_mut(ifindex as usize)?.as_mut()?.load(), &a),
        };
        match found {
            NeighOutcome::Resolved { mac, .. } => Some((ifindex, mac, port.mac)),
            _ => None,
        }
    }

    #[inline]
    fn drop(&mut self, reason: DropReason) -> Verdict {
        self.counters.drop(reason);
        Verdict::Drop(reason)
    }

    #[inline]
    fn punt(&mut self, class: PuntClass) -> Verdict {
        self.counters.punt(class);
        Verdict::Punt(class)
    }
}

/// Where an ICMP error goes back to.
struct Reply {
    /// The FIB's answer for the offending packet's source.
    hop: u32,
    dst: IpAddr,
    /// For an ECMP choice.
    key: FlowKey,
    ethertype: u16,
    /// The event counted when it is sent.
    sent: Event,
}

#[derive(Clone, Copy, Debug)]
enum ErrorKind {
    V4(Icmp4Error),
    V6(Icmp6Error),
}

/// The flow table's key for a packet's 5-tuple.
#[inline]
fn flow_key(mode: KeyMode, key: &FlowKey) -> FlowKey {
    match mode {
        KeyMode::FiveTuple => *key,
        KeyMode::Addresses => key.l3_only(),
        KeyMode::Destination => FlowKey::destination(key.dst()),
    }
}

/// Milliseconds, the flow table's tick.
#[inline]
fn tick(now_ns: u64) -> u32 {
    (now_ns / 1_000_000) as u32
}

/// Whether next hop `index` still has generation `gen` and version `version`.
#[inline]
fn entry_matches(nh: &NhSnapshot, index: u32, gen: u32, version: u32) -> bool {
    nh.get(index)
        .is_some_and(|e| e.gen == gen && e.version == version)
}

/// The current epoch of port `oif` (0 for an unknown port: never matches).
#[inline]
fn epoch_of(epochs: &[PortEpoch], oif: u32) -> u32 {
    epochs.get(oif as usize).map_or(0, |e| e.epoch)
}

/// Whether a cached neighbor reference is current.
#[inline]
fn neigh_current(
    arp: &mut [Option<NeighborCache<Ipv4Addr>>],
    nd: &mut [Option<NeighborCache<Ipv6Addr>>],
    v6: bool,
    oif: u32,
    id: u32,
    gen: u64,
) -> bool {
    if v6 {
        match nd.get_mut(oif as usize) {
            Some(Some(c)) => c.load().is_current(id, gen),
            _ => false,
        }
    } else {
        match arp.get_mut(oif as usize) {
            Some(Some(c)) => c.load().is_current(id, gen),
            _ => false,
        }
    }
}

/// Writes an Ethernet header at the start of `buf`.
#[inline]
fn write_eth(buf: &mut [u8], dst: MacAddr, src: MacAddr, ethertype: u16) {
    set_macs(buf, dst, src);
    if let Some(t) = buf.get_mut(12..14) {
        t.copy_from_slice(&ethertype.to_be_bytes());
    }
}
