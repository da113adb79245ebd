//! [`NeighborTable`]: one interface's neighbors of one family, owned by the control plane,
//! published to the forwarding workers as immutable [`NeighborSnapshot`]s.
//!
//! ```text
//!   control plane (one thread)                          workers (any number)
//!   resolve(addr, pkt) / apply(addr, ev) / expire(now)
//!        │ state::step per neighbor
//!        ▼
//!   slots: id → { addr, Nud, gen, hold queue ≤ 3 }
//!        │ publish(): rewrite the chunks that changed  NeighborReader::load()
//!        ▼                                                   │ (lock-free)
//!   ArcSwap<NeighborSnapshot> ──────────────────────────▶ lookup(addr) → &NeighborEntry
//!     { index shards, id chunks: shared Arcs }             is_current(id, gen)?
//! ```
//!
//! **Publication in proportion to the change.** A scan of a connected subnet creates a
//! new entry for every address it tries, and the control plane publishes after each one
//! (a worker that misses must see the entry to hold rather than ask again). So a snapshot
//! is not a copy of the table: the address index is split into shards by a seeded hash
//! (one per 64 entries of capacity) and the entries by id into chunks of
//! 64, each behind an `Arc`, and the shards and chunks in groups of 64 behind `Arc`s of
//! their own (`paged.rs`). A snapshot clones the two arrays of groups; the table
//! changes a group, shard or chunk in place when no snapshot holds it and copies it first
//! when one does (`Arc::make_mut`), and a publication rewrites only the chunks whose
//! entries changed. A change then costs a shard, a chunk and their groups copied at most,
//! and a publication a pointer per group, where a copy of the table cost tens of
//! microseconds at 4096 entries and over half a millisecond at 65536 (`vfsr neigh bench`).
//! The index holds the entries, so a lookup by address hashes once and reads its shard's
//! group, the shard's pointer, then the entry; an id (`is_current`) reads its chunk's group
//! and the chunk, two loads more than a flat copy.
//!
//! **Generations.** Each entry has a `gen` taken from a table-wide counter whenever the
//! entry is created or its MAC or usability changes (becoming FAILED, being resolved, a new
//! MAC). A worker (or its flow table) that cached `(id, gen)` checks
//! [`NeighborSnapshot::is_current`]: one indexed read, no lock. Because the counter never
//! repeats, a recycled `id` never matches a stale cache. A change of state that keeps the MAC
//! usable (REACHABLE → STALE → DELAY → PROBE) does not bump it: the cached MAC stays right.
//!
//! **Bounds.** At most `capacity` entries (default 4096); a new neighbor in a full table
//! evicts a FAILED entry, else a STALE one, the least recently changed first (kept in
//! order as states change, so finding it takes a logarithm, not a pass over the table); if
//! every entry is resolving or in use, the new neighbor is refused and its packet dropped
//! (counted).
//!
//! **Timers.** The entries whose state runs a timer are kept in deadline order, so a timer
//! round ([`NeighborTable::expire`]) takes the ones due and reads nothing else: its cost
//! is the timers that fire, not the size of the table (a table of a million REACHABLE
//! entries at rest costs a round nothing).
//!
//! Each neighbor holds at most `hold_capacity` packets (default 3) while INCOMPLETE; a
//! packet beyond that pushes the oldest one out (counted). Held packets are opaque handles
//! `P` handed back to the caller, to send or to free.
//!
//! The table knows nothing of routes: a failed resolution drops held packets and marks the
//! entry FAILED, and that is all.

use std::collections::{BTreeSet, VecDeque};

use crate::hash::AddrHashBuilder;
use crate::paged::Paged;
use std::fmt::Debug;
use std::hash::{BuildHasher, Hash};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::Deref;
use std::sync::Arc;

use arc_swap::{ArcSwap, Cache, Guard};
use hashbrown::HashTable;

use crate::state::{step, Event, Mac, Nud, QueueAction, Solicit, State, Tick, Timers};

/// A neighbor address family: `Ipv4Addr` (ARP) or `Ipv6Addr` (ND).
pub trait NeighAddr: Copy + Eq + Hash + Debug + Send + Sync + 'static {
    /// "arp" or "nd".
    const PROTOCOL: &'static str;
}

impl NeighAddr for Ipv4Addr {
    const PROTOCOL: &'static str = "arp";
}

impl NeighAddr for Ipv6Addr {
    const PROTOCOL: &'static str = "nd";
}

/// Default number of neighbors per interface and family.
pub const DEFAULT_CAPACITY: usize = 4096;
/// Default number of packets held per unresolved neighbor.
pub const DEFAULT_HOLD_CAPACITY: usize = 3;

/// A table's limits and protocol timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighborConfig {
    /// Maximum number of entries (at least 1 is used).
    pub capacity: usize,
    /// Maximum packets held per neighbor while it resolves (0 drops them all).
    pub hold_capacity: usize,
    /// RFC 4861 timers and solicit counts.
    pub timers: Timers,
}

impl Default for NeighborConfig {
    fn default() -> Self {
        NeighborConfig {
            capacity: DEFAULT_CAPACITY,
            hold_capacity: DEFAULT_HOLD_CAPACITY,
            timers: Timers::default(),
        }
    }
}

/// What a worker sees of one neighbor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighborEntry {
    /// Slot number, stable while the entry exists (may be reused after it goes).
    pub id: u32,
    /// Generation: changes when the MAC or usability changes; never repeats in a table.
    pub gen: u64,
    /// The MAC, `Some` exactly when the state is usable.
    pub mac: Option<Mac>,
    /// The RFC 4861 state when published.
    pub state: State,
}

impl NeighborEntry {
    /// The MAC to rewrite with, if packets may be sent now.
    #[inline]
    pub fn usable_mac(&self) -> Option<Mac> {
        if self.state.is_usable() {
            self.mac
        } else {
            None
        }
    }
}

/// Entries per chunk of the id array (a power of two).
const CHUNK: usize = 64;

/// `CHUNK` entries by id; `None` where no entry has the id.
type Chunk = [Option<NeighborEntry>; CHUNK];

/// The address index: shards chosen by a seeded hash, each behind an `Arc` that snapshots
/// share until the table changes the shard (see the module doc). It holds each entry
/// itself, kept up to date as the entry changes, so a worker's lookup by address reads no
/// chunk.
///
/// The shards are `hashbrown` tables of `(address, entry)` searched with a hash computed
/// once per lookup (it picks the shard, then the bucket), where a standard map in each
/// shard would hash the address again.
#[derive(Clone, Debug)]
struct Index<A> {
    hasher: AddrHashBuilder,
    /// Shards - 1 (their number is a power of two).
    mask: usize,
    shards: Paged<HashTable<(A, NeighborEntry)>>,
    len: usize,
}

impl<A: NeighAddr> Index<A> {
    /// A shard per [`CHUNK`] entries of capacity (a power of two, 1 to 65,536): a change
    /// copies a shard of about that many entries at most; a publication clones a pointer per
    /// group of shards.
    fn new(capacity: usize) -> Self {
        let n = (capacity / CHUNK).next_power_of_two().clamp(1, 1 << 16);
        Index {
            shards: Paged::new(HashTable::new(), n),
            hasher: AddrHashBuilder::default(),
            mask: n - 1,
            len: 0,
        }
    }

    /// The hash of `a` and its shard. The shard's table takes its buckets from the hash's
    /// low bits and its tags from the top seven, so the shard must come from neither; and
    /// the Fx hash's middle bits hardly change between addresses of one subnet (every
    /// address of a /16 landed in one shard when they were used). So the shard is the top
    /// bits of the hash multiplied once more, which depend on all of its bits.
    #[inline]
    fn locate(&self, a: &A) -> (u64, usize) {
        let h = self.hasher.hash_one(a);
        let mixed = h.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h, (mixed >> 48) as usize & self.mask)
    }

    #[inline]
    fn get(&self, a: &A) -> Option<&NeighborEntry> {
        let (h, i) = self.locate(a);
        self.shards.get(i)?.find(h, |e| e.0 == *a).map(|e| &e.1)
    }

    /// Sets `a`'s entry (added if missing).
    fn set(&mut self, a: A, entry: NeighborEntry) {
        let (h, i) = self.locate(&a);
        let hasher = &self.hasher;
        let Some(m) = self.shards.make_mut(i) else {
            return;
        };
        match m.find_mut(h, |e| e.0 == a) {
            Some(e) => e.1 = entry,
            None => {
                m.insert_unique(h, (a, entry), |e| hasher.hash_one(e.0));
                self.len += 1;
            }
        }
    }

    /// Removes `a`; a shard without it is left shared (not copied).
    fn remove(&mut self, a: &A) -> Option<u32> {
        let (h, i) = self.locate(a);
        self.shards.get(i)?.find(h, |e| e.0 == *a)?;
        let m = self.shards.make_mut(i)?;
        let ((_, e), _) = m.find_entry(h, |e| e.0 == *a).ok()?.remove();
        self.len -= 1;
        Some(e.id)
    }
}

/// An immutable picture of a table, as published.
#[derive(Debug)]
pub struct NeighborSnapshot<A> {
    index: Index<A>,
    chunks: Paged<Chunk>,
    serial: u64,
}

impl<A: NeighAddr> NeighborSnapshot<A> {
    fn empty() -> Self {
        NeighborSnapshot {
            index: Index::new(1),
            chunks: Paged::new([None; CHUNK], 0),
            serial: 0,
        }
    }

    /// The publication this snapshot came from: 0 for the empty table a reader starts with,
    /// then 1, 2, ... per publication of the table (never repeats, unlike an address).
    #[inline]
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// The entry for `addr`, if the table had one.
    #[inline]
    pub fn lookup(&self, addr: &A) -> Option<&NeighborEntry> {
        self.index.get(addr)
    }

    /// The entry with slot number `id`.
    #[inline]
    pub fn get(&self, id: u32) -> Option<&NeighborEntry> {
        let id = usize::try_from(id).ok()?;
        self.chunks.get(id / CHUNK)?.get(id % CHUNK)?.as_ref()
    }

    /// Whether a cached `(id, gen)` still names the same MAC and usability.
    #[inline]
    pub fn is_current(&self, id: u32, gen: u64) -> bool {
        self.get(id).is_some_and(|e| e.gen == gen)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.index.len
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.index.len == 0
    }
}

/// A worker's handle on a table's published snapshots. Cheap to clone; never blocks.
#[derive(Debug)]
pub struct NeighborReader<A> {
    cell: Arc<ArcSwap<NeighborSnapshot<A>>>,
}

impl<A> Clone for NeighborReader<A> {
    fn clone(&self) -> Self {
        NeighborReader {
            cell: Arc::clone(&self.cell),
        }
    }
}

/// A loaded snapshot; hold it for a batch, not longer.
pub struct NeighborGuard<A>(Guard<Arc<NeighborSnapshot<A>>>);

impl<A> Deref for NeighborGuard<A> {
    type Target = NeighborSnapshot<A>;
    #[inline]
    fn deref(&self) -> &NeighborSnapshot<A> {
        &self.0
    }
}

impl<A: NeighAddr> NeighborReader<A> {
    /// The current snapshot (lock-free).
    #[inline]
    pub fn load(&self) -> NeighborGuard<A> {
        NeighborGuard(self.cell.load())
    }

    /// The current snapshot as an owned `Arc`.
    pub fn load_full(&self) -> Arc<NeighborSnapshot<A>> {
        self.cell.load_full()
    }

    /// A per-worker cache of the current snapshot: its `load` costs one atomic read while
    /// nothing was published (it keeps the last snapshot alive until the next `load`).
    pub fn cache(&self) -> NeighborCache<A> {
        Cache::new(Arc::clone(&self.cell))
    }
}

/// What [`NeighborReader::cache`] returns.
pub type NeighborCache<A> = Cache<Arc<ArcSwap<NeighborSnapshot<A>>>, Arc<NeighborSnapshot<A>>>;

/// What the caller must do after an operation.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome<P> {
    /// A solicitation to send for this neighbor.
    pub solicit: Option<Solicit>,
    /// The MAC the packets in `transmit` go to.
    pub mac: Option<Mac>,
    /// Packets to send now to `mac` (the resolved packet, or a flushed hold queue).
    pub transmit: Vec<P>,
    /// Packets dropped (already counted): to be freed.
    pub dropped: Vec<P>,
}

impl<P> Default for Outcome<P> {
    fn default() -> Self {
        Outcome {
            solicit: None,
            mac: None,
            transmit: Vec::new(),
            dropped: Vec::new(),
        }
    }
}

/// Counters of one table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NeighCounters {
    /// Entries created.
    pub created: u64,
    /// Entries evicted to make room (FAILED or STALE).
    pub evicted: u64,
    /// New neighbors refused because the table was full and nothing could be evicted.
    pub refused: u64,
    /// Packets dropped because their neighbor was refused.
    pub table_full: u64,
    /// Packets pushed out of a full hold queue.
    pub hold_overflow: u64,
    /// Resolutions (or probe rounds) that ended FAILED.
    pub failed: u64,
    /// Held packets dropped because resolution failed or the entry was removed.
    pub failed_drops: u64,
    /// Snapshots published.
    pub published: u64,
}

#[derive(Debug)]
struct Slot<A, P> {
    addr: A,
    nud: Nud,
    gen: u64,
    changed: Tick,
    hold: VecDeque<P>,
}

impl<A, P> Slot<A, P> {
    /// What the workers see of the entry in slot `id`.
    fn entry(&self, id: u32) -> NeighborEntry {
        NeighborEntry {
            id,
            gen: self.gen,
            mac: self.nud.mac,
            state: self.nud.state,
        }
    }

    /// The entry's place in the eviction order, if it may be evicted: FAILED before STALE,
    /// the least recently changed first.
    fn evict_key(&self, id: u32) -> Option<(u8, Tick, u32)> {
        match self.nud.state {
            State::Failed => Some((0, self.changed, id)),
            State::Stale => Some((1, self.changed, id)),
            _ => None,
        }
    }

    /// The entry's place in the timer order, if its state runs a timer.
    fn timer_key(&self, id: u32) -> Option<(Tick, u32)> {
        self.nud.deadline.map(|d| (d, id))
    }
}

/// Moves an entry's key in one of the table's ordered sets from `old` to `new` (either may
/// be absent: the entry enters or leaves the set).
fn rekey<K: Ord>(set: &mut BTreeSet<K>, old: Option<K>, new: Option<K>) {
    if old == new {
        return;
    }
    if let Some(k) = old {
        set.remove(&k);
    }
    if let Some(k) = new {
        set.insert(k);
    }
}

/// One interface's neighbor table of one family; see the module doc.
#[derive(Debug)]
pub struct NeighborTable<A, P> {
    cfg: NeighborConfig,
    slots: Vec<Option<Slot<A, P>>>,
    free: Vec<u32>,
    index: Index<A>,
    /// The entries that may be evicted, in eviction order.
    evictable: BTreeSet<(u8, Tick, u32)>,
    /// The entries whose state runs a timer, by deadline.
    timers: BTreeSet<(Tick, u32)>,
    /// The id array as last published (chunks shared with the snapshot until rewritten).
    chunks: Paged<Chunk>,
    /// Chunks whose entries changed since the last publication, each once.
    dirty: Vec<usize>,
    /// Per chunk: whether it is listed in `dirty`.
    listed: Vec<bool>,
    next_gen: u64,
    counters: NeighCounters,
    cell: Arc<ArcSwap<NeighborSnapshot<A>>>,
}

impl<A: NeighAddr, P> NeighborTable<A, P> {
    /// An empty table (an empty snapshot is published).
    pub fn new(cfg: NeighborConfig) -> Self {
        let capacity = cfg.capacity.clamp(1, u32::MAX as usize);
        NeighborTable {
            cfg: NeighborConfig { capacity, ..cfg },
            slots: Vec::new(),
            free: Vec::new(),
            index: Index::new(capacity),
            evictable: BTreeSet::new(),
            timers: BTreeSet::new(),
            chunks: Paged::new([None; CHUNK], 0),
            dirty: Vec::new(),
            listed: Vec::new(),
            next_gen: 1,
            counters: NeighCounters::default(),
            cell: Arc::new(ArcSwap::from_pointee(NeighborSnapshot::empty())),
        }
    }

    /// Every entry: address and state (in slot order).
    pub fn entries(&self) -> impl Iterator<Item = (A, Nud)> + '_ {
        self.slots.iter().flatten().map(|s| (s.addr, s.nud))
    }

    /// Removes every entry (their held packets are dropped and counted); publish afterwards.
    /// Returns how many entries went.
    pub fn flush(&mut self) -> usize {
        let addrs: Vec<A> = self.slots.iter().flatten().map(|s| s.addr).collect();
        for a in &addrs {
            let _ = self.remove(a);
        }
        addrs.len()
    }

    /// The configuration in force.
    pub fn config(&self) -> &NeighborConfig {
        &self.cfg
    }

    /// A reader for a forwarding worker.
    pub fn reader(&self) -> NeighborReader<A> {
        NeighborReader {
            cell: Arc::clone(&self.cell),
        }
    }

    /// Counters so far.
    pub fn counters(&self) -> NeighCounters {
        self.counters
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.index.len
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.index.len == 0
    }

    /// The control plane's view of a neighbor: state machine and generation.
    pub fn get(&self, addr: &A) -> Option<(Nud, u64)> {
        let s = self.slot(self.index.get(addr)?.id)?;
        Some((s.nud, s.gen))
    }

    /// Number of packets held for `addr`.
    pub fn held(&self, addr: &A) -> usize {
        self.index
            .get(addr)
            .and_then(|e| self.slot(e.id))
            .map_or(0, |s| s.hold.len())
    }

    /// A packet must go to `addr`: sent at once if the MAC is usable (a STALE entry moves to
    /// DELAY), else held while the neighbor resolves (the entry is created if needed).
    pub fn resolve(&mut self, addr: A, packet: P, now: Tick) -> Outcome<P> {
        let id = match self.index.get(&addr) {
            Some(e) => e.id,
            None => match self.create(addr, now) {
                Some(id) => id,
                None => {
                    self.counters.refused = self.counters.refused.saturating_add(1);
                    self.counters.table_full = self.counters.table_full.saturating_add(1);
                    return Outcome {
                        dropped: vec![packet],
                        ..Outcome::default()
                    };
                }
            },
        };
        let mut out = self.event_on(id, Event::Resolve, now);
        let hold_cap = self.cfg.hold_capacity;
        let Some(slot) = self.slot_mut(id) else {
            out.dropped.push(packet);
            return out;
        };
        match slot.nud.mac {
            Some(mac) if slot.nud.state.is_usable() => {
                out.mac = Some(mac);
                out.transmit.push(packet);
            }
            _ => {
                slot.hold.push_back(packet);
                let mut over = 0u64;
                while slot.hold.len() > hold_cap {
                    if let Some(old) = slot.hold.pop_front() {
                        out.dropped.push(old);
                        over += 1;
                    }
                }
                self.counters.hold_overflow = self.counters.hold_overflow.saturating_add(over);
            }
        }
        out
    }

    /// Applies an event for `addr`. Only [`Event::Resolve`] and [`Event::LinkLayerHint`]
    /// create a missing entry (a full table with nothing to evict refuses it).
    pub fn apply(&mut self, addr: A, event: Event, now: Tick) -> Outcome<P> {
        if let Some(id) = self.index.get(&addr).map(|e| e.id) {
            return self.event_on(id, event, now);
        }
        let (created, _) = step(None, event, now, &self.cfg.timers);
        if created.is_none() {
            return Outcome::default();
        }
        match self.create(addr, now) {
            Some(id) => self.event_on(id, event, now),
            None => {
                self.counters.refused = self.counters.refused.saturating_add(1);
                Outcome::default()
            }
        }
    }

    /// Fires every timer due at `now`, earliest deadline first; returns the neighbors with
    /// something to do.
    pub fn expire(&mut self, now: Tick) -> Vec<(A, Outcome<P>)> {
        let due: Vec<(u32, A)> = self
            .timers
            .range(..=(now, u32::MAX))
            .filter_map(|&(_, id)| Some((id, self.slot(id)?.addr)))
            .collect();
        let mut res = Vec::new();
        for (id, addr) in due {
            let out = self.event_on(id, Event::Timer, now);
            if out.solicit.is_some() || !out.transmit.is_empty() || !out.dropped.is_empty() {
                res.push((addr, out));
            }
        }
        res
    }

    /// Deletes the entry for `addr`; its held packets come back as dropped (counted).
    pub fn remove(&mut self, addr: &A) -> Outcome<P> {
        let mut out = Outcome::default();
        if let Some(id) = self.index.remove(addr) {
            if let Some(slot) = self.take_slot(id) {
                let n = slot.hold.len() as u64;
                self.counters.failed_drops = self.counters.failed_drops.saturating_add(n);
                out.dropped.extend(slot.hold);
            }
        }
        out
    }

    /// Publishes the current table if anything visible changed since the last
    /// publication; returns whether it did.
    ///
    /// Only the chunks of entries that changed are rewritten (copied first if the last
    /// snapshot still holds them); the rest is shared with it.
    pub fn publish(&mut self) -> bool {
        if self.dirty.is_empty() {
            return false;
        }
        self.chunks.grow_to(self.slots.len().div_ceil(CHUNK));
        let mut dirty = std::mem::take(&mut self.dirty);
        for &c in &dirty {
            if let Some(l) = self.listed.get_mut(c) {
                *l = false;
            }
            let (Some(chunk), Some(from)) = (
                self.chunks.make_mut(c),
                self.slots.get(c * CHUNK..).map(|s| s.iter().take(CHUNK)),
            ) else {
                continue;
            };
            let mut id = (c * CHUNK) as u32;
            for (e, s) in chunk.iter_mut().zip(from.chain(std::iter::repeat(&None))) {
                *e = s.as_ref().map(|s| s.entry(id));
                id = id.wrapping_add(1);
            }
        }
        dirty.clear();
        self.dirty = dirty;
        let snap = NeighborSnapshot {
            index: self.index.clone(),
            chunks: self.chunks.clone(),
            serial: self.counters.published.saturating_add(1),
        };
        self.cell.store(Arc::new(snap));
        self.counters.published = self.counters.published.saturating_add(1);
        true
    }

    /// Notes that entry `id` changed (or went): its entry in the index is set (or was
    /// removed by the caller), its chunk is rewritten at the next publication.
    fn touch(&mut self, id: u32) {
        if let Some(s) = self.slot(id) {
            self.index.set(s.addr, s.entry(id));
        }
        let c = id as usize / CHUNK;
        if self.listed.len() <= c {
            self.listed.resize(c + 1, false);
        }
        if let Some(l) = self.listed.get_mut(c) {
            if !*l {
                *l = true;
                self.dirty.push(c);
            }
        }
    }

    fn slot(&self, id: u32) -> Option<&Slot<A, P>> {
        self.slots.get(usize::try_from(id).ok()?)?.as_ref()
    }

    fn slot_mut(&mut self, id: u32) -> Option<&mut Slot<A, P>> {
        self.slots.get_mut(usize::try_from(id).ok()?)?.as_mut()
    }

    fn take_slot(&mut self, id: u32) -> Option<Slot<A, P>> {
        let s = self.slots.get_mut(usize::try_from(id).ok()?)?.take()?;
        rekey(&mut self.evictable, s.evict_key(id), None);
        rekey(&mut self.timers, s.timer_key(id), None);
        self.free.push(id);
        self.touch(id);
        Some(s)
    }

    fn bump_gen(&mut self) -> u64 {
        let g = self.next_gen;
        self.next_gen = self.next_gen.wrapping_add(1);
        g
    }

    /// A new slot for `addr` in state FAILED (the event then moves it), evicting if full.
    fn create(&mut self, addr: A, now: Tick) -> Option<u32> {
        if self.index.len >= self.cfg.capacity && !self.evict_one() {
            return None;
        }
        let gen = self.bump_gen();
        let slot = Slot {
            addr,
            nud: Nud {
                state: State::Failed,
                mac: None,
                probes: 0,
                deadline: None,
            },
            gen,
            changed: now,
            hold: VecDeque::new(),
        };
        let id = match self.free.pop() {
            Some(id) => id,
            None => u32::try_from(self.slots.len()).ok()?,
        };
        rekey(&mut self.evictable, None, slot.evict_key(id));
        match self.slots.get_mut(id as usize) {
            Some(cell) => *cell = Some(slot),
            None => self.slots.push(Some(slot)),
        }
        self.touch(id);
        self.counters.created = self.counters.created.saturating_add(1);
        Some(id)
    }

    /// Evicts the FAILED entry, else the STALE entry, changed longest ago.
    fn evict_one(&mut self) -> bool {
        let Some(&(_, _, id)) = self.evictable.first() else {
            return false;
        };
        let Some(addr) = self.slot(id).map(|s| s.addr) else {
            // Not reachable: the set lists live slots only. Forget the stale key.
            self.evictable.pop_first();
            return false;
        };
        self.index.remove(&addr);
        if let Some(slot) = self.take_slot(id) {
            let n = slot.hold.len() as u64;
            self.counters.failed_drops = self.counters.failed_drops.saturating_add(n);
        }
        self.counters.evicted = self.counters.evicted.saturating_add(1);
        true
    }

    fn event_on(&mut self, id: u32, event: Event, now: Tick) -> Outcome<P> {
        let timers = self.cfg.timers;
        let mut out = Outcome::default();
        let Some(slot) = self.slot(id) else {
            return out;
        };
        let before = slot.nud;
        let (after, act) = step(Some(&before), event, now, &timers);
        let after = after.unwrap_or(before);
        let visible_change =
            after.mac != before.mac || after.state.is_usable() != before.state.is_usable();
        let new_gen = if visible_change {
            Some(self.bump_gen())
        } else {
            None
        };
        if after.state == State::Failed && before.state != State::Failed {
            self.counters.failed = self.counters.failed.saturating_add(1);
        }
        let Some(slot) = self.slot_mut(id) else {
            return out;
        };
        let (old_evict, old_timer) = (slot.evict_key(id), slot.timer_key(id));
        if after != before {
            slot.changed = now;
        }
        let published_change = after.state != before.state || after.mac != before.mac;
        slot.nud = after;
        let (new_evict, new_timer) = (slot.evict_key(id), slot.timer_key(id));
        if let Some(g) = new_gen {
            slot.gen = g;
        }
        out.solicit = act.solicit;
        let mut dropped = 0u64;
        match act.queue {
            QueueAction::Keep => {}
            QueueAction::Flush => {
                out.mac = after.mac;
                out.transmit.extend(slot.hold.drain(..));
            }
            QueueAction::Drop => {
                dropped = slot.hold.len() as u64;
                out.dropped.extend(slot.hold.drain(..));
            }
        }
        self.counters.failed_drops = self.counters.failed_drops.saturating_add(dropped);
        rekey(&mut self.evictable, old_evict, new_evict);
        rekey(&mut self.timers, old_timer, new_timer);
        if published_change || new_gen.is_some() {
            self.touch(id);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    const M1: Mac = Mac([2, 0, 0, 0, 0, 1]);
    const M2: Mac = Mac([2, 0, 0, 0, 0, 2]);

    fn v4(n: u8) -> Ipv4Addr {
        Ipv4Addr::new(192, 0, 2, n)
    }

    fn reply(mac: Mac) -> Event {
        Event::Advert {
            mac: Some(mac),
            solicited: true,
            override_flag: true,
        }
    }

    fn table(capacity: usize, hold: usize) -> NeighborTable<Ipv4Addr, u32> {
        NeighborTable::new(NeighborConfig {
            capacity,
            hold_capacity: hold,
            ..NeighborConfig::default()
        })
    }

    #[test]
    fn snapshots_carry_a_serial_that_never_repeats() {
        let mut t: NeighborTable<Ipv4Addr, u32> = NeighborTable::new(NeighborConfig::default());
        let r = t.reader();
        assert_eq!(r.load().serial(), 0);
        let mut last = 0;
        for i in 0..5u8 {
            t.resolve(Ipv4Addr::new(192, 0, 2, i), 1, u64::from(i));
            assert!(t.publish());
            let s = r.load().serial();
            assert!(s > last, "{s} after {last}");
            last = s;
        }
        assert!(!t.publish(), "nothing changed");
        assert_eq!(r.load().serial(), last);
    }

    #[test]
    fn miss_holds_then_reply_flushes() {
        let mut t = table(16, 3);
        let out = t.resolve(v4(1), 10, 0);
        assert_eq!(out.solicit, Some(Solicit::Multicast));
        assert!(out.transmit.is_empty() && out.dropped.is_empty());
        let out = t.resolve(v4(1), 11, 1);
        assert_eq!(
            out.solicit, None,
            "one solicitation per retransmit interval"
        );
        assert_eq!(t.held(&v4(1)), 2);
        let out = t.apply(v4(1), reply(M1), 2);
        assert_eq!(out.mac, Some(M1));
        assert_eq!(out.transmit, vec![10, 11]);
        assert_eq!(t.held(&v4(1)), 0);
        let out = t.resolve(v4(1), 12, 3);
        assert_eq!((out.mac, out.transmit), (Some(M1), vec![12]));
    }

    #[test]
    fn hold_queue_overflow_drops_oldest_and_counts() {
        let mut t = table(16, 3);
        for p in 0..5 {
            let out = t.resolve(v4(1), p, 0);
            if p >= 3 {
                assert_eq!(out.dropped, vec![p - 3]);
            }
        }
        assert_eq!(t.held(&v4(1)), 3);
        assert_eq!(t.counters().hold_overflow, 2);
        let out = t.apply(v4(1), reply(M1), 1);
        assert_eq!(out.transmit, vec![2, 3, 4]);
        let mut z = table(16, 0);
        assert_eq!(z.resolve(v4(1), 7, 0).dropped, vec![7]);
        assert_eq!(z.counters().hold_overflow, 1);
    }

    #[test]
    fn failed_resolution_drops_held_packets() {
        let mut t = table(16, 3);
        t.resolve(v4(1), 1, 0);
        t.resolve(v4(1), 2, 0);
        let mut dropped = Vec::new();
        let mut solicits = 1;
        for now in 1..=5u64 {
            for (addr, out) in t.expire(now * 1000) {
                assert_eq!(addr, v4(1));
                solicits += usize::from(out.solicit.is_some());
                dropped.extend(out.dropped);
            }
        }
        assert_eq!(solicits, 3);
        assert_eq!(dropped, vec![1, 2]);
        let c = t.counters();
        assert_eq!((c.failed, c.failed_drops), (1, 2));
        assert_eq!(t.get(&v4(1)).map(|(n, _)| n.state), Some(State::Failed));
    }

    #[test]
    fn readers_see_published_snapshots_only() {
        let mut t = table(16, 3);
        let r = t.reader();
        t.apply(v4(1), Event::LinkLayerHint(M1), 0);
        assert!(r.load().lookup(&v4(1)).is_none(), "not published yet");
        assert!(t.publish());
        assert!(!t.publish(), "nothing changed");
        let old = r.load_full();
        let e1 = *old.lookup(&v4(1)).unwrap();
        assert_eq!((e1.mac, e1.state), (Some(M1), State::Stale));

        // A new MAC: the generation moves; the old snapshot still shows the old entry.
        t.apply(v4(1), Event::LinkLayerHint(M2), 1);
        t.publish();
        assert_eq!(old.lookup(&v4(1)), Some(&e1));
        let new = r.load();
        let e2 = *new.lookup(&v4(1)).unwrap();
        assert_eq!((e2.id, e2.mac), (e1.id, Some(M2)));
        assert_ne!(e2.gen, e1.gen);
        assert!(!new.is_current(e1.id, e1.gen));
        assert!(new.is_current(e2.id, e2.gen));

        // Usable → usable with the same MAC (STALE → DELAY → PROBE): no bump.
        t.resolve(v4(1), 9, 2);
        t.expire(2 + 5_000);
        t.publish();
        let e3 = *r.load().lookup(&v4(1)).unwrap();
        assert_eq!(e3.state, State::Probe);
        assert_eq!(e3.gen, e2.gen);

        // PROBE gives up: FAILED, no MAC, generation bumped.
        for k in 1..=3 {
            t.expire(2 + 5_000 + k * 1_000);
        }
        t.publish();
        let e4 = *r.load().lookup(&v4(1)).unwrap();
        assert_eq!(
            (e4.state, e4.mac, e4.usable_mac()),
            (State::Failed, None, None)
        );
        assert_ne!(e4.gen, e3.gen);
        assert!(!r.load().is_current(e3.id, e3.gen));
    }

    #[test]
    fn a_subnets_addresses_spread_over_the_shards() {
        fn largest<A: NeighAddr>(addrs: impl Iterator<Item = A>) -> (usize, usize) {
            let mut idx = Index::<A>::new(4096);
            let id = |n| NeighborEntry {
                id: n,
                gen: 1,
                mac: None,
                state: State::Failed,
            };
            for (n, a) in (0u32..).zip(addrs) {
                idx.set(a, id(n));
            }
            let sizes: Vec<usize> = (0..=idx.mask)
                .map(|i| idx.shards.get(i).map_or(0, |s| s.len()))
                .collect();
            (sizes.iter().copied().max().unwrap_or(0), sizes.len())
        }
        // 4096 entries in 64 shards: 64 each on average.
        let (max, shards) = largest((0..4096u32).map(|i| Ipv4Addr::from(0x0a14_0000 + i)));
        assert_eq!(shards, 64);
        assert!(max <= 128, "a /20 put {max} addresses in one shard");
        let (max, _) = largest((0..4096u32).map(|i| Ipv4Addr::from(0x0a14_0000 + 7 * i)));
        assert!(max <= 128, "{max}");
        let base = u128::from(Ipv6Addr::new(0xfd00, 0x20, 0, 0, 0, 0, 0, 0));
        let (max, _) = largest((0..4096u128).map(|i| Ipv6Addr::from(base + i)));
        assert!(max <= 128, "a /116 put {max} addresses in one shard");
    }

    #[test]
    fn recycled_ids_never_match_old_generations() {
        let mut t = table(1, 3);
        t.apply(v4(1), Event::LinkLayerHint(M1), 0);
        t.publish();
        let e1 = *t.reader().load().lookup(&v4(1)).unwrap();
        t.apply(v4(2), Event::LinkLayerHint(M2), 1); // evicts v4(1), reuses its id
        t.publish();
        let snap = t.reader().load_full();
        let e2 = *snap.lookup(&v4(2)).unwrap();
        assert_eq!(e2.id, e1.id);
        assert!(!snap.is_current(e1.id, e1.gen));
        assert!(snap.lookup(&v4(1)).is_none());
    }

    #[test]
    fn full_table_evicts_failed_then_stale_oldest_first() {
        let mut t = table(4, 3);
        // 1: STALE at t=10, 2: STALE at t=5, 3: REACHABLE, 4: INCOMPLETE.
        t.apply(v4(1), Event::LinkLayerHint(M1), 10);
        t.apply(v4(2), Event::LinkLayerHint(M1), 5);
        t.apply(v4(3), reply(M1), 0);
        t.apply(v4(3), Event::Resolve, 0);
        t.apply(v4(3), reply(M1), 0);
        t.resolve(v4(4), 40, 0);
        assert_eq!(t.get(&v4(3)).map(|(n, _)| n.state), Some(State::Reachable));
        // Make 4 FAILED.
        for k in 1..=3 {
            t.expire(k * 1_000);
        }
        assert_eq!(t.get(&v4(4)).map(|(n, _)| n.state), Some(State::Failed));
        // v4(3) is still REACHABLE (reachable time 30 s): never a candidate.
        t.resolve(v4(5), 50, 4_000);
        assert!(t.get(&v4(4)).is_none(), "FAILED goes first");
        t.resolve(v4(6), 60, 4_000);
        assert!(t.get(&v4(2)).is_none(), "then the oldest STALE");
        t.resolve(v4(7), 70, 4_000);
        assert!(t.get(&v4(1)).is_none(), "then the next STALE");
        assert_eq!(t.counters().evicted, 3);
        // Left: REACHABLE 3 and INCOMPLETE 5, 6, 7; nothing evictable.
        let out = t.resolve(v4(8), 80, 4_000);
        assert_eq!(out.dropped, vec![80]);
        assert_eq!((t.counters().table_full, t.counters().refused), (1, 1));
        assert_eq!(
            t.apply(v4(9), Event::LinkLayerHint(M2), 4_000),
            Outcome::default()
        );
        assert_eq!((t.counters().table_full, t.counters().refused), (1, 2));
        assert_eq!(t.len(), 4);
        assert!(t.get(&v4(3)).is_some());
    }

    #[test]
    fn unknown_targets_are_not_created_by_adverts() {
        let mut t = table(4, 3);
        assert_eq!(t.apply(v4(1), reply(M1), 0), Outcome::default());
        assert!(t.is_empty());
        assert!(!t.publish());
    }

    #[test]
    fn remove_returns_held_packets() {
        let mut t: NeighborTable<Ipv6Addr, u8> = NeighborTable::new(NeighborConfig::default());
        let a = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
        t.resolve(a, 1, 0);
        assert_eq!(t.remove(&a).dropped, vec![1]);
        assert!(t.get(&a).is_none());
        assert_eq!(<Ipv6Addr as NeighAddr>::PROTOCOL, "nd");
    }

    #[test]
    fn flush_empties_the_table_and_drops_what_was_held() {
        let mut t = table(8, 4);
        t.resolve(v4(1), 10, 0);
        t.resolve(v4(2), 20, 0);
        let _ = t.apply(v4(2), reply(M1), 1);
        assert_eq!(t.entries().count(), 2);
        assert!(t.entries().any(|(a, n)| a == v4(2) && n.mac == Some(M1)));
        assert_eq!(t.flush(), 2);
        assert_eq!(t.entries().count(), 0);
        assert!(t.get(&v4(1)).is_none());
        assert!(t.publish());
        assert_eq!(t.flush(), 0);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Resolve(u8),
        Apply(u8, Event),
        Expire,
        Remove(u8),
        Publish,
        Advance(u16),
    }

    fn mac() -> impl Strategy<Value = Mac> {
        (0u8..3).prop_map(|b| Mac([2, 0, 0, 0, 0, b]))
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            Just(Event::Resolve),
            Just(Event::SolicitationSent),
            (proptest::option::of(mac()), any::<bool>(), any::<bool>()).prop_map(
                |(mac, solicited, override_flag)| Event::Advert {
                    mac,
                    solicited,
                    override_flag
                }
            ),
            mac().prop_map(Event::LinkLayerHint),
            Just(Event::Confirmed),
            Just(Event::Timer),
        ]
    }

    fn op(addrs: u8) -> impl Strategy<Value = Op> {
        let addr = 0u8..addrs;
        prop_oneof![
            3 => addr.clone().prop_map(Op::Resolve),
            3 => (addr.clone(), event()).prop_map(|(a, e)| Op::Apply(a, e)),
            1 => Just(Op::Expire),
            1 => addr.prop_map(Op::Remove),
            1 => Just(Op::Publish),
            2 => (0u16..8000).prop_map(Op::Advance),
        ]
    }

    fn check(t: &NeighborTable<Ipv4Addr, u32>) {
        assert!(t.len() <= t.config().capacity);
        for s in t.slots.iter().flatten() {
            let st = s.nud.state;
            assert_eq!(st.is_usable(), s.nud.mac.is_some(), "{st:?} and its MAC");
            assert!(s.hold.len() <= t.config().hold_capacity);
            assert!(
                s.hold.is_empty() || st == State::Incomplete,
                "{st:?} holds packets"
            );
            let e = t.index.get(&s.addr).copied();
            assert_eq!(e.and_then(|e| t.slot(e.id)).map(|x| x.gen), Some(s.gen));
            assert_eq!(
                e.map(|e| (e.gen, e.mac, e.state)),
                Some((s.gen, s.nud.mac, s.nud.state)),
                "the index's entry of {} is the slot's",
                s.addr
            );
        }
        assert_eq!(t.index.len, t.slots.iter().flatten().count());
        let shards: usize = t.index.shards.iter().map(|m| m.len()).sum();
        assert_eq!(shards, t.index.len);
        // The eviction order lists exactly the FAILED and STALE entries, with their times.
        let want: BTreeSet<(u8, Tick, u32)> = (0u32..)
            .zip(t.slots.iter())
            .filter_map(|(id, s)| s.as_ref()?.evict_key(id))
            .collect();
        assert_eq!(t.evictable, want);
        // The timer order lists exactly the entries with a deadline.
        let want: BTreeSet<(Tick, u32)> = (0u32..)
            .zip(t.slots.iter())
            .filter_map(|(id, s)| s.as_ref()?.timer_key(id))
            .collect();
        assert_eq!(t.timers, want);
    }

    /// A snapshot published now equals what a copy of the whole table would be: every
    /// entry under its address and id, nothing else.
    fn check_published(t: &NeighborTable<Ipv4Addr, u32>, snap: &NeighborSnapshot<Ipv4Addr>) {
        assert_eq!(snap.len(), t.len());
        for (id, s) in (0u32..).zip(t.slots.iter()) {
            let want = s.as_ref().map(|s| NeighborEntry {
                id,
                gen: s.gen,
                mac: s.nud.mac,
                state: s.nud.state,
            });
            assert_eq!(snap.get(id).copied(), want, "id {id}");
            if let Some(s) = s {
                assert_eq!(snap.lookup(&s.addr).copied(), want, "{}", s.addr);
            }
        }
        assert_eq!(snap.get(t.slots.len() as u32), None);
    }

    proptest! {
        #[test]
        fn random_event_sequences_keep_invariants(
            cap in 1usize..8,
            hold in 0usize..4,
            ops in proptest::collection::vec(op(12), 0..200),
        ) {
            run_ops(cap, hold, ops)?;
        }

        /// Tables of a few chunks and shards: every publication still equals a full copy.
        #[test]
        fn larger_tables_publish_what_a_full_copy_would(
            cap in 60usize..250,
            ops in proptest::collection::vec(op(255), 0..600),
        ) {
            run_ops(cap, 2, ops)?;
        }
    }

    fn run_ops(cap: usize, hold: usize, ops: Vec<Op>) -> Result<(), TestCaseError> {
        {
            let mut t = table(cap, hold);
            let r = t.reader();
            let mut now: Tick = 0;
            let mut pkt = 0u32;
            let (mut sent, mut dropped) = (0u64, 0u64);
            let mut last_gen: HashMap<Ipv4Addr, (u64, Option<Mac>, bool)> = HashMap::new();
            for op in ops {
                let out = match op {
                    Op::Resolve(a) => {
                        pkt += 1;
                        t.resolve(v4(a), pkt, now)
                    }
                    Op::Apply(a, e) => t.apply(v4(a), e, now),
                    Op::Expire => {
                        let mut all = Outcome::default();
                        for (_, o) in t.expire(now) {
                            all.transmit.extend(o.transmit);
                            all.dropped.extend(o.dropped);
                        }
                        // Every timer that was due has fired (each sets a later one or none).
                        for s in t.slots.iter().flatten() {
                            prop_assert!(s.nud.deadline.is_none_or(|d| d > now), "{}", s.addr);
                        }
                        all
                    }
                    Op::Remove(a) => t.remove(&v4(a)),
                    Op::Publish => {
                        t.publish();
                        let snap = r.load();
                        check_published(&t, &snap);
                        for (addr, &(g, m, u)) in &last_gen {
                            if let Some(e) = snap.lookup(addr) {
                                if e.gen == g {
                                    prop_assert_eq!((e.mac, e.state.is_usable()), (m, u));
                                }
                            }
                        }
                        last_gen.clear();
                        for a in 0..=255 {
                            if let Some(e) = snap.lookup(&v4(a)) {
                                prop_assert_eq!(e.state.is_usable(), e.mac.is_some());
                                last_gen.insert(v4(a), (e.gen, e.mac, e.state.is_usable()));
                            }
                        }
                        Outcome::default()
                    }
                    Op::Advance(d) => {
                        now += u64::from(d);
                        Outcome::default()
                    }
                };
                prop_assert!(out.transmit.is_empty() || out.mac.is_some());
                sent += out.transmit.len() as u64;
                dropped += out.dropped.len() as u64;
                check(&t);
            }
            // Every packet is sent, dropped or still held.
            let held: u64 = t.slots.iter().flatten().map(|s| s.hold.len() as u64).sum();
            prop_assert_eq!(sent + dropped + held, u64::from(pkt));
            let c = t.counters();
            prop_assert_eq!(dropped, c.hold_overflow + c.failed_drops + c.table_full);
        }
        Ok(())
    }
}
