//! [`NeighborTable`]: one interface's neighbors of one family, owned by the control plane,
//! published to the forwarding workers as immutable [`NeighborSnapshot`]s.
//!
//! ```text
//!   control plane (one thread)                          workers (any number)
//!   resolve(addr, pkt) / apply(addr, ev) / expire(now)
//!        │ state::step per neighbor
//!        ▼
//!   slots: id → { addr, Nud, gen, hold queue ≤ 3 }
//!        │ publish(): copy { id, gen, MAC, state }     NeighborReader::load()
//!        ▼                                                   │ (lock-free)
//!   ArcSwap<NeighborSnapshot> ──────────────────────────▶ lookup(addr) → &NeighborEntry
//!                                                          is_current(id, gen)?
//! ```
//!
//! **Generations.** Each entry has a `gen` taken from a table-wide counter whenever the
//! entry is created or its MAC or usability changes (becoming FAILED, being resolved, a new
//! MAC). A worker (or its flow table) that cached `(id, gen)` checks
//! [`NeighborSnapshot::is_current`]: one indexed read, no lock. Because the counter never
//! repeats, a recycled `id` never matches a stale cache. A change of state that keeps the MAC
//! usable (REACHABLE → STALE → DELAY → PROBE) does not bump it: the cached MAC stays right.
//!
//! **Bounds.** At most `capacity` entries (default 4096); a new neighbor in a full table
//! evicts a FAILED entry, else a STALE one, the least recently changed first; if every entry
//! is resolving or in use, the new neighbor is refused and its packet dropped (counted).
//! Each neighbor holds at most `hold_capacity` packets (default 3) while INCOMPLETE; a
//! packet beyond that pushes the oldest one out (counted). Held packets are opaque handles
//! `P` handed back to the caller, to send or to free.
//!
//! The table knows nothing of routes: a failed resolution drops held packets and marks the
//! entry FAILED, and that is all.

use std::collections::{HashMap, VecDeque};
use std::fmt::Debug;
use std::hash::Hash;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::Deref;
use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};

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

/// An immutable picture of a table, as published.
#[derive(Debug)]
pub struct NeighborSnapshot<A> {
    by_addr: HashMap<A, u32>,
    by_id: Vec<Option<NeighborEntry>>,
}

impl<A: NeighAddr> NeighborSnapshot<A> {
    fn empty() -> Self {
        NeighborSnapshot {
            by_addr: HashMap::new(),
            by_id: Vec::new(),
        }
    }

    /// The entry for `addr`, if the table had one.
    #[inline]
    pub fn lookup(&self, addr: &A) -> Option<&NeighborEntry> {
        let id = *self.by_addr.get(addr)?;
        self.get(id)
    }

    /// The entry with slot number `id`.
    #[inline]
    pub fn get(&self, id: u32) -> Option<&NeighborEntry> {
        self.by_id.get(usize::try_from(id).ok()?)?.as_ref()
    }

    /// Whether a cached `(id, gen)` still names the same MAC and usability.
    #[inline]
    pub fn is_current(&self, id: u32, gen: u64) -> bool {
        self.get(id).is_some_and(|e| e.gen == gen)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.by_addr.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.by_addr.is_empty()
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
}

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
    /// New neighbors refused because nothing could be evicted (their packet dropped).
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

/// One interface's neighbor table of one family; see the module doc.
#[derive(Debug)]
pub struct NeighborTable<A, P> {
    cfg: NeighborConfig,
    slots: Vec<Option<Slot<A, P>>>,
    free: Vec<u32>,
    index: HashMap<A, u32>,
    next_gen: u64,
    counters: NeighCounters,
    dirty: bool,
    cell: Arc<ArcSwap<NeighborSnapshot<A>>>,
}

impl<A: NeighAddr, P> NeighborTable<A, P> {
    /// An empty table (an empty snapshot is published).
    pub fn new(cfg: NeighborConfig) -> Self {
        NeighborTable {
            cfg: NeighborConfig {
                capacity: cfg.capacity.clamp(1, u32::MAX as usize),
                ..cfg
            },
            slots: Vec::new(),
            free: Vec::new(),
            index: HashMap::new(),
            next_gen: 1,
            counters: NeighCounters::default(),
            dirty: false,
            cell: Arc::new(ArcSwap::from_pointee(NeighborSnapshot::empty())),
        }
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
        self.index.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The control plane's view of a neighbor: state machine and generation.
    pub fn get(&self, addr: &A) -> Option<(Nud, u64)> {
        let s = self.slot(*self.index.get(addr)?)?;
        Some((s.nud, s.gen))
    }

    /// Number of packets held for `addr`.
    pub fn held(&self, addr: &A) -> usize {
        self.index
            .get(addr)
            .and_then(|&id| self.slot(id))
            .map_or(0, |s| s.hold.len())
    }

    /// A packet must go to `addr`: sent at once if the MAC is usable (a STALE entry moves to
    /// DELAY), else held while the neighbor resolves (the entry is created if needed).
    pub fn resolve(&mut self, addr: A, packet: P, now: Tick) -> Outcome<P> {
        let id = match self.index.get(&addr) {
            Some(&id) => id,
            None => match self.create(addr, now) {
                Some(id) => id,
                None => {
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
        if let Some(&id) = self.index.get(&addr) {
            return self.event_on(id, event, now);
        }
        let (created, _) = step(None, event, now, &self.cfg.timers);
        if created.is_none() {
            return Outcome::default();
        }
        match self.create(addr, now) {
            Some(id) => self.event_on(id, event, now),
            None => {
                self.counters.table_full = self.counters.table_full.saturating_add(1);
                Outcome::default()
            }
        }
    }

    /// Fires every timer due at `now`; returns the neighbors with something to do.
    pub fn expire(&mut self, now: Tick) -> Vec<(A, Outcome<P>)> {
        let due: Vec<(u32, A)> = (0u32..)
            .zip(self.slots.iter())
            .filter_map(|(id, s)| {
                let s = s.as_ref()?;
                s.nud.deadline.filter(|&d| d <= now).map(|_| (id, s.addr))
            })
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
    pub fn publish(&mut self) -> bool {
        if !self.dirty {
            return false;
        }
        let mut by_id = Vec::with_capacity(self.slots.len());
        for (id, s) in (0u32..).zip(self.slots.iter()) {
            by_id.push(s.as_ref().map(|s| NeighborEntry {
                id,
                gen: s.gen,
                mac: s.nud.mac,
                state: s.nud.state,
            }));
        }
        let snap = NeighborSnapshot {
            by_addr: self.index.clone(),
            by_id,
        };
        self.cell.store(Arc::new(snap));
        self.dirty = false;
        self.counters.published = self.counters.published.saturating_add(1);
        true
    }

    fn slot(&self, id: u32) -> Option<&Slot<A, P>> {
        self.slots.get(usize::try_from(id).ok()?)?.as_ref()
    }

    fn slot_mut(&mut self, id: u32) -> Option<&mut Slot<A, P>> {
        self.slots.get_mut(usize::try_from(id).ok()?)?.as_mut()
    }

    fn take_slot(&mut self, id: u32) -> Option<Slot<A, P>> {
        let s = self.slots.get_mut(usize::try_from(id).ok()?)?.take();
        if s.is_some() {
            self.free.push(id);
            self.dirty = true;
        }
        s
    }

    fn bump_gen(&mut self) -> u64 {
        let g = self.next_gen;
        self.next_gen = self.next_gen.wrapping_add(1);
        g
    }

    /// A new slot for `addr` in state FAILED (the event then moves it), evicting if full.
    fn create(&mut self, addr: A, now: Tick) -> Option<u32> {
        if self.index.len() >= self.cfg.capacity && !self.evict_one() {
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
            Some(id) => {
                let cell = self.slots.get_mut(usize::try_from(id).ok()?)?;
                *cell = Some(slot);
                id
            }
            None => {
                let id = u32::try_from(self.slots.len()).ok()?;
                self.slots.push(Some(slot));
                id
            }
        };
        self.index.insert(addr, id);
        self.counters.created = self.counters.created.saturating_add(1);
        self.dirty = true;
        Some(id)
    }

    /// Evicts the FAILED entry, else the STALE entry, changed longest ago.
    fn evict_one(&mut self) -> bool {
        let victim = (0u32..)
            .zip(self.slots.iter())
            .filter_map(|(id, s)| {
                let s = s.as_ref()?;
                let rank = match s.nud.state {
                    State::Failed => 0u8,
                    State::Stale => 1,
                    _ => return None,
                };
                Some(((rank, s.changed, id), s.addr))
            })
            .min_by_key(|&(k, _)| k);
        let Some(((_, _, id), addr)) = victim else {
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
        if after != before {
            slot.changed = now;
        }
        let published_change = after.state != before.state || after.mac != before.mac;
        slot.nud = after;
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
        if published_change || new_gen.is_some() {
            self.dirty = true;
        }
        out
    }
}
