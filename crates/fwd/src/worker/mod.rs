//! A forwarding worker: the stages strung together over a batch.
//!
//! ```text
//!   Batch.packets ─┬─ pass 1, per packet: eth_input → ip4/ip6_input → classify → ttl
//!                  │     punts, drops and expiries end here; transit packets become work
//!                  │     (without a flow table, their destinations also go on the lists
//!                  │     for the bulk lookup; with one, their flow keys are made and
//!                  │     hashed and their buckets asked for)
//!                  ├─ pass 2: in a flow table past 1 MiB, each matching entry asked for;
//!                  │     lookup per packet (split+flow), then one bulk FIB
//!                  │     lookup per family for the misses and stale entries (without a
//!                  │     flow table: for the lists pass 1 made; pass 3 reads the answers
//!                  │     in the same order)
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
//! **Flow entries are checked, not trusted.** An entry holds where the packet goes (port and MAC)
//! in the flow table's line, and in the table's side array what that was made from: the FIB
//! version, the route's and the member's next-hop generation and version, and the neighbor's `(id,
//! gen)`. A hit is used only if all still match; otherwise the entry is stale and is recomputed,
//! and the flow keeps its ECMP member if the member is still in the route's group (stateful ECMP),
//! even when the group itself changed. The check is done in full only once per change: an entry
//! found current is stamped with the worker's `World` serial, which moves when a FIB version, the
//! next-hop snapshot or a port's neighbor snapshot does, and an entry bearing the current serial is
//! current without looking further.
//!
//! **Counting.** Every packet ends in one [`Outcome`](crate::counters::Outcome); drops carry
//! a [`DropReason`]. After each batch the worker copies its counters to its
//! [`SharedCounters`] for readers on other threads.
//!
//! **Files.** This one holds the worker's state and [`Worker::process`], the orchestration of
//! the passes. The rest, one concern each:
//!
//! | file | what |
//! | --- | --- |
//! | `input.rs` | pass 1: the input stages for one packet, a transit packet becoming work |
//! | `decide.rs` | the flow table's answer checked against the snapshots; route, ECMP, neighbor |
//! | `neighbor.rs` | per-port snapshot epochs, the gateway neighbor memo, table lookups |
//! | `output.rs` | MTU, rewrite and verdict; fragmentation; buffers and Ethernet headers |
//! | `icmp.rs` | ICMP errors the worker originates, rate-limited, routed back |

mod decide;
mod icmp;
mod input;
mod neighbor;
mod output;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use vfsr_cpu::prefetch;
use vfsr_fib::nexthop::NhReader;
use vfsr_fib::FibReader;
use vfsr_flow::{FlowConfig, FlowHasher, FlowKey, FlowTable, HashFields, KeyMode};
use vfsr_lpm::Lpm;
use vfsr_neigh::NeighborCache;
use vfsr_wire::ipv4::Ipv4Packet;
use vfsr_wire::ipv6::Ipv6Packet;
use vfsr_wire::MacAddr;

use self::decide::tick;
use self::output::set_verdict;
use crate::counters::{Counters, DropReason, Event, PuntClass, SharedCounters};
use crate::packet::{Batch, Packet, Verdict};
use crate::port::Ports;
use crate::profile::{Clock, Profile, Stage};
use crate::ratelimit::TokenBucket;
use crate::stage::ecmp::EcmpGroups;
use crate::stage::eth_input::ETH_HEADER;
use crate::stage::ip4_input::ports_at;

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
    /// Work of one step of the flow table's idle sweep (a bucket visited is two units, a
    /// bitmap word of empty buckets one), run after the first batch of each millisecond
    /// tick; a table of more than `512 * gc_budget` buckets gets a step of `buckets / 512`.
    pub gc_budget: usize,
    /// List the packets whose forwarding decision depends on the destination alone in
    /// [`Batch::offload`].
    pub report_offload: bool,
}

/// Packets per batch a runtime hands a worker unless configured otherwise (vfsrd's
/// `router.batch`, `vfsr fwd bench --batch`): with many flows the flow table's two trips to
/// memory are paid once per batch, so a larger batch pays (`docs/bench/zen5.md`).
pub const DEFAULT_BATCH: usize = 64;

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            batch_size: DEFAULT_BATCH,
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

/// What a flow entry caches for a hit: where the packet goes. It shares the entry's cache
/// line with the key (16 bytes of the 24 a one-line entry leaves), so a hit reads the bucket's
/// head line and this one; what the decision was made from is in the table's side array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FlowValue {
    /// The worker's [`World`] serial when the entry was last found valid.
    world: u32,
    oif: u32,
    mac: MacAddr,
    /// The route is a single next hop (not an ECMP group): a hit may be offloaded.
    single: bool,
}

// The entry of a flow (key and value) is one cache line.
const _: () = assert!(std::mem::size_of::<FlowValue>() <= 24);

/// What a flow entry's decision was made from, in the flow table's side array: read only
/// when the entry's `world` stamp is not the current serial (after a change), and for a stale
/// entry's recomputation (stateful ECMP keeps its member).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct FlowMade {
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
    neigh_id: u32,
    /// The egress port's epoch when the neighbor was looked up (or last checked).
    neigh_epoch: u32,
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
/// lets L3 keep, checked by generation against the current snapshots (never trusted), once
/// per [`World`] serial.
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
    /// The worker's [`World`] serial when the memo was last found current (0: never), as a
    /// flow entry keeps it: within one serial no next hop and no neighbor epoch moves, so
    /// a memo stamped with the current serial needs no other check.
    world: u32,
}

impl Adj {
    /// Whether the memo was made for next hop `index` as it is now (its generation and
    /// version): then it still names the same gateway on the same port.
    #[inline]
    fn made_for(&self, index: u32, nh_gen: u32, nh_version: u32) -> bool {
        self.tag == index.wrapping_add(1) && self.nh_gen == nh_gen && self.nh_version == nh_version
    }
}

/// What every cached decision was made against, as one serial: it moves whenever a FIB
/// version, the next-hop snapshot or a port's neighbor epoch does. A flow entry stamped with
/// the current serial needs no other check; one stamped earlier is checked field by field and
/// stamped again if it passes.
#[derive(Debug)]
struct World {
    serial: u32,
    /// The FIB versions and the next-hop snapshot's serial seen last.
    seen: [u64; 3],
}

impl Default for World {
    fn default() -> Self {
        World {
            serial: 1,
            seen: [0; 3],
        }
    }
}

impl World {
    /// Moves the serial if the neighbor epochs moved or the FIB versions or next-hop serial
    /// differ from the last batch's; true when it wrapped (to 1: 0 is never current).
    #[inline]
    fn advance(&mut self, epochs: bool, fib4: u64, fib6: u64, nh: u64) -> bool {
        let seen = [fib4, fib6, nh];
        if !epochs && seen == self.seen {
            return false;
        }
        self.seen = seen;
        self.serial = self.serial.wrapping_add(1);
        if self.serial == 0 {
            self.serial = 1;
            return true;
        }
        false
    }
}

/// Batches between two copies of the counters to the shared block (about 30 µs at line
/// rate; a copy is some 70 stores).
pub const COUNTER_FLUSH: u64 = 16;

/// Largest next-hop index with a neighbor memo.
const MAX_ADJ: u32 = 1 << 20;

/// Where a transit packet stands between the passes: a small handle on the packet, whose
/// header (checked in pass 1, still in cache) stays the source of its addresses and ports.
/// Only what the flow table, ECMP, a connected route or a punt needs reads them again;
/// a packet to a single gateway never does.
#[derive(Clone, Copy, Debug)]
struct Work {
    /// The packet's place in the batch.
    idx: u32,
    /// IP length (total length, or 40 + payload length).
    ip_len: u32,
    /// The FIB's answer, once looked up, with a flow table (without one, pass 3 takes it
    /// from the lookup's answers in order and this stays 0).
    nh: u32,
    /// Where the transport ports start in the IP packet; 0 when it has none to read
    /// (another protocol, or a later fragment).
    l4: u16,
    /// The upper-layer protocol.
    proto: u8,
    v6: bool,
    link_bcast: bool,
    df: bool,
}

/// What pass 1 queues for the passes after it: the transit packets, their flow keys (with a
/// flow table) or their destinations (without one; with one, the flow table's misses). The
/// worker keeps the lists from batch to batch and moves them out for pass 1, into a local
/// whose lengths the compiler keeps in registers, instead of reading and writing each list's
/// length in the worker at every packet.
#[derive(Default)]
struct Queues {
    work: Vec<Work>,
    flows: Vec<FlowSlot>,
    /// What the batch's stale flow entries were made from ([`FlowState::Stale`] holds the
    /// index): kept apart so that a flow slot stays small for the common hit.
    stale: Vec<FlowMade>,
    dst4: Vec<u32>,
    dst6: Vec<u128>,
}

impl Queues {
    fn with_capacity(cap: usize) -> Self {
        Queues {
            work: Vec::with_capacity(cap),
            flows: Vec::with_capacity(cap),
            // At most one per packet: sized with the rest, so no batch allocates.
            stale: Vec::with_capacity(cap),
            dst4: Vec::with_capacity(cap),
            dst6: Vec::with_capacity(cap),
        }
    }

    fn clear(&mut self) {
        self.work.clear();
        self.flows.clear();
        self.stale.clear();
        self.dst4.clear();
        self.dst6.clear();
    }
}

// A third of a cache line per packet between the passes.
const _: () = assert!(std::mem::size_of::<Work>() <= 24);

impl Work {
    /// The packet's IP header and what follows.
    #[inline]
    fn ip<'a>(&self, batch: &'a Batch) -> &'a [u8] {
        batch
            .packets
            .get(self.idx as usize)
            .and_then(|p| p.frame().get(ETH_HEADER..))
            .unwrap_or(&[])
    }

    /// The transport ports, `(0, 0)` without them.
    #[inline]
    fn ports(&self, ip: &[u8]) -> (u16, u16) {
        match self.l4 {
            0 => (0, 0),
            at => ports_at(ip, usize::from(at), self.ip_len as usize),
        }
    }

    /// The packet's 5-tuple key.
    #[inline]
    fn key(&self, batch: &Batch) -> FlowKey {
        let ip = self.ip(batch);
        let (sport, dport) = self.ports(ip);
        if self.v6 {
            let p = Ipv6Packet::new_unchecked(ip);
            FlowKey::v6(p.src_addr(), p.dst_addr(), self.proto, sport, dport)
        } else {
            let p = Ipv4Packet::new_unchecked(ip);
            FlowKey::v4(p.src_addr(), p.dst_addr(), self.proto, sport, dport)
        }
    }

    /// The destination address.
    #[inline]
    fn dst_addr(&self, batch: &Batch) -> IpAddr {
        let ip = self.ip(batch);
        if self.v6 {
            IpAddr::V6(Ipv6Packet::new_unchecked(ip).dst_addr())
        } else {
            IpAddr::V4(Ipv4Packet::new_unchecked(ip).dst_addr())
        }
    }
}

/// Walks the bulk lookups' answers (`nh4`, `nh6`) in the order their destinations were
/// listed, one family each.
#[derive(Default)]
struct Answers {
    i4: usize,
    i6: usize,
}

impl Answers {
    /// The next answer of the family (`v6` or not); 0, no route, past the list's end.
    #[inline(always)]
    fn next(&mut self, v6: bool, nh4: &[u32], nh6: &[u32]) -> u32 {
        if v6 {
            self.i6 += 1;
            nh6.get(self.i6 - 1).copied().unwrap_or(0)
        } else {
            self.i4 += 1;
            nh4.get(self.i4 - 1).copied().unwrap_or(0)
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

impl FlowSlot {
    /// The slot of a packet with flow key `fkey` of hash `fhash`, before pass 2 looks it up.
    #[inline]
    fn new(fkey: FlowKey, fhash: u64) -> FlowSlot {
        FlowSlot {
            fkey,
            fhash,
            state: FlowState::None,
        }
    }
}

// Written for every packet in pass 1 and read in passes 2 and 3: the key, the hash and a
// state no larger than a hit's value (a stale entry's inputs wait in `Queues::stale`), one
// cache line in all.
const _: () = assert!(std::mem::size_of::<FlowSlot>() <= 64);

#[derive(Clone, Copy, Debug)]
enum FlowState {
    /// No flow table, or a miss.
    None,
    /// A stale entry: recompute, keeping its member if possible. What it was made from is
    /// at this index of the batch's `Queues::stale`.
    Stale(u32),
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
    flow: Option<FlowTable<FlowValue, FlowMade>>,
    world: World,
    hasher: FlowHasher,
    groups: EcmpGroups,
    adj: Vec<Adj>,
    icmp: TokenBucket,
    counters: Counters,
    shared: Arc<SharedCounters>,
    ident: u16,
    batches: u64,
    /// The tick of the last idle-sweep step.
    gc_tick: Option<u32>,
    spare: Vec<Packet>,
    q: Queues,
    nh4: Vec<u32>,
    nh6: Vec<u32>,
    /// This batch's flow table outgrows the cache: pass 1 asks for the buckets' heads alone
    /// (see `input.rs`).
    flows_past_cache: bool,
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
            flow: config.flow.map(FlowTable::with_side),
            world: World::default(),
            hasher: FlowHasher::new(seed ^ 0x6563_6d70),
            groups: EcmpGroups::new(),
            adj: Vec::new(),
            icmp: TokenBucket::new(config.icmp_rate, config.icmp_burst),
            counters: Counters::default(),
            shared: Arc::new(SharedCounters::default()),
            ident: 0,
            batches: 0,
            gc_tick: None,
            spare: Vec::new(),
            q: Queues::with_capacity(cap),
            nh4: Vec::with_capacity(cap),
            nh6: Vec::with_capacity(cap),
            profile: None,
            flows_past_cache: false,
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
        self.q.clear();
        let epochs_moved = self.refresh_epochs();
        let fib4 = self.fib4.load();
        let fib6 = self.fib6.load();
        let nh = self.nh.load();
        if self
            .world
            .advance(epochs_moved, fib4.version, fib6.version, nh.serial())
        {
            // The serial wrapped: an entry last checked 2^32 serials ago would pass as
            // current. None may survive that.
            if let Some(f) = self.flow.as_mut() {
                f.clear();
            }
            for a in self.adj.iter_mut() {
                a.world = 0;
            }
        }
        // The batch's inserts may evict or be refused; counted at its end.
        let (evictions_before, refusals_before) = self
            .flow
            .as_ref()
            .map_or((0, 0), |f| (f.counters().evictions, f.counters().refusals));
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

        // A flow table past the cache: pass 1 asks for the buckets' heads alone, pass 2 for
        // the entries.
        let large = self
            .flow
            .as_ref()
            .is_some_and(|f| f.entries_outgrow_cache());
        self.flows_past_cache = large;
        // Pass 1: input, classification, TTL (one loop with a flow table, one without).
        let mut q = std::mem::take(&mut self.q);
        macro_rules! pass1 {
            ($flows:literal) => {
                for idx in 0..n {
                    let (f4, f6) = (&fib4.engine, &fib6.engine);
                    let v = self.input::<$flows>(batch, idx, &ports, f4, f6, &nh, now_ns, &mut q);
                    if let Some(v) = v {
                        if let Some(slot) = batch.verdicts.get_mut(idx) {
                            *slot = v;
                        }
                    }
                }
            };
        }
        if self.flow.is_some() {
            pass1!(true);
        } else {
            pass1!(false);
        }
        mark!(Stage::Input);

        // Pass 2: flow table, then bulk FIB lookups for what it did not answer.
        let now = tick(now_ns);
        // The work items and flow slots stay out for passes 2 and 3; the destination lists
        // go back for the bulk lookups.
        let mut work = std::mem::take(&mut q.work);
        let mut flows = std::mem::take(&mut q.flows);
        self.q = q;
        // Packets the flow table answered; when that is all of them the FIB stage has
        // nothing to do and is skipped.
        let mut hits = 0usize;
        // Taken out for the lookups, put back after them.
        if let Some(mut table) = self.flow.take() {
            if large {
                // Pass 1 hashed the keys and asked for their buckets' heads, which have had
                // the rest of it to arrive: now the entry in whichever way holds it.
                for f in flows.iter() {
                    table.prefetch_entry(f.fhash);
                }
            }
            let versions = (fib4.version, fib6.version);
            for f in flows.iter_mut() {
                hits += usize::from(self.flow_lookup(&mut table, f, now, versions, &nh));
            }
            self.flow = Some(table);
            self.counters.event(Event::FlowHit, hits as u64);
        }
        mark!(Stage::Flow);
        let hit = |flows: &[FlowSlot], i: usize| {
            flows
                .get(i)
                .is_some_and(|f| matches!(f.state, FlowState::Hit(_)))
        };
        // Without a flow table pass 1 listed every destination already, and pass 3 takes
        // each packet's answer from the lists in order.
        let direct = self.flow.is_none();
        if direct {
            self.look_up_lists(&fib4.engine, &fib6.engine);
        } else if hits < work.len() {
            self.q.dst4.clear();
            self.q.dst6.clear();
            // Each key holds its destination, whatever the key mode.
            for (i, f) in flows.iter().enumerate() {
                if hit(&flows, i) {
                    continue;
                }
                match f.fkey.dst() {
                    IpAddr::V4(d) => self.q.dst4.push(u32::from(d)),
                    IpAddr::V6(d) => self.q.dst6.push(u128::from(d)),
                }
            }
            self.look_up_lists(&fib4.engine, &fib6.engine);
            let mut answers = Answers::default();
            for (i, w) in work.iter_mut().enumerate() {
                if hit(&flows, i) {
                    continue;
                }
                w.nh = answers.next(w.v6, &self.nh4, &self.nh6);
            }
        }
        mark!(Stage::Fib);

        // Pass 3: next hop, neighbor, MTU, rewrite. The common answers inline: without a
        // flow table the gateway's memo, with one a hit; anything else is decided.
        let mut answers = Answers::default();
        for (i, w) in work.iter().enumerate() {
            let slot = flows.get(i);
            let (route_nh, quick) = if direct {
                let route_nh = answers.next(w.v6, &self.nh4, &self.nh6);
                (route_nh, self.remembered_value(route_nh, &nh))
            } else {
                let hit = slot.and_then(|f| match f.state {
                    FlowState::Hit(v) => Some(v),
                    _ => None,
                });
                (w.nh, hit)
            };
            let (f4, f6) = (&fib4.engine, &fib6.engine);
            if let Some(v) = quick {
                self.output(batch, w, &v, &ports, f4, f6, &nh, now_ns);
            } else {
                let version = if w.v6 { fib6.version } else { fib4.version };
                let (nh, ports) = (&nh, &ports);
                let d = self.decided(
                    batch, w, route_nh, slot, version, nh, ports, f4, f6, now, now_ns,
                );
                match d {
                    Ok(v) => self.output(batch, w, &v, ports, f4, f6, nh, now_ns),
                    Err(verdict) => set_verdict(batch, w.idx, verdict),
                }
            }
        }
        mark!(Stage::Output);
        self.q.work = work;
        self.q.flows = flows;
        self.ports = Some(ports);

        if let Some(f) = self.flow.as_mut() {
            // One step of the idle sweep per millisecond tick, not per batch: at line rate a
            // step per batch swept a small table hundreds of times a second for entries that
            // idle out after seconds (lookups and inserts expire entries on their own). A
            // large table gets a larger step, so a full pass takes about a second.
            if self.gc_tick != Some(now) {
                self.gc_tick = Some(now);
                f.gc(now, self.config.gc_budget.max(f.buckets() / 512));
            }
            let evicted = f.counters().evictions.saturating_sub(evictions_before);
            self.counters.event(Event::FlowEvicted, evicted);
            let refused = f.counters().refusals.saturating_sub(refusals_before);
            self.counters.event(Event::FlowRefused, refused);
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

    /// One bulk FIB lookup per family for the destinations listed in `dst4` and `dst6`,
    /// the answers in `nh4` and `nh6` in the same order.
    #[inline]
    fn look_up_lists(&mut self, fib4: &E4, fib6: &E6) {
        self.nh4.clear();
        self.nh4.resize(self.q.dst4.len(), 0);
        fib4.lookup_bulk(&self.q.dst4, &mut self.nh4);
        self.nh6.clear();
        self.nh6.resize(self.q.dst6.len(), 0);
        fib6.lookup_bulk(&self.q.dst6, &mut self.nh6);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_world_serial_moves_with_each_input_and_skips_zero_when_it_wraps() {
        let mut w = World::default();
        let first = w.serial;
        assert_ne!(first, 0);
        // Nothing changed: the serial stays.
        assert!(!w.advance(false, 0, 0, 0));
        assert_eq!(w.serial, first);
        // Each input alone moves it.
        let mut last = first;
        for (epochs, fib4, fib6, nh) in [
            (true, 0, 0, 0),
            (false, 1, 0, 0),
            (false, 1, 1, 0),
            (false, 1, 1, 1),
        ] {
            assert!(!w.advance(epochs, fib4, fib6, nh));
            assert_eq!(w.serial, last + 1);
            last = w.serial;
        }
        // The last serial before the wrap, then the wrap: reported, and never 0.
        w.serial = u32::MAX - 1;
        assert!(!w.advance(true, 1, 1, 1));
        assert_eq!(w.serial, u32::MAX);
        assert!(w.advance(true, 1, 1, 1));
        assert_eq!(w.serial, 1);
    }
}
