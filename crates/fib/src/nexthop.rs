//! The next-hop table as the forwarding path sees it (published snapshots).
//!
//! The FIB follows the FreeBSD split of L3 and L2 state: a lookup engine maps a prefix to a
//! small integer only (a next-hop index, or the index of an ECMP group), and this table says
//! what the integer means. A change of a next hop (link down, gateway moved) is a change of one
//! entry here; the lookup structures are not touched.
//!
//! ```text
//!   lookup engine                 NhSnapshot (index → NhEntry)
//!   10.0.0.0/8   ──▶ 5 ──────▶  5: gen 0, v 3, Gateway 192.0.2.1 dev 2
//!   10.1.0.0/16  ──▶ 9 ──────▶  9: gen 1, v 0, Group [5, 7] ──▶ 5, 7 (single next hops)
//!   0.0.0.0/0    ──▶ 7 ──────▶  7: gen 0, v 0, Connected dev 3
//! ```
//!
//! The control plane owns the only [`NhPublisher`] and publishes whole immutable
//! [`NhSnapshot`]s; forwarding workers hold [`NhReader`]s and [`NhReader::load`] the current
//! snapshot once per batch. Publication goes through `arc_swap::ArcSwap`: a load never takes a
//! lock and never waits for the writer, and an old snapshot stays valid for as long as a worker
//! holds it.
//!
//! Index `0` is "no route" and never holds an entry. An entry's `gen` changes each time its
//! index is given to a new next hop (so an [`NhId`], index + generation, taken before the reuse
//! no longer matches), its `version` on every change of the entry.

use std::fmt;
use std::net::IpAddr;
use std::ops::Deref;
use std::sync::Arc;

use arc_swap::{ArcSwap, Cache, Guard};

/// What the forwarding path does with a packet whose route resolves to a next hop.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Forward {
    /// Send to a gateway; `ifindex` is the outgoing interface when it is known.
    Gateway { addr: IpAddr, ifindex: Option<u32> },
    /// The destination is on a directly connected link.
    Connected { ifindex: u32 },
    /// The destination is this router (deliver to the host stack).
    Local,
    /// Drop silently.
    Blackhole,
    /// Drop and answer ICMP unreachable.
    Unreachable,
    /// A synthetic next hop of the benchmark tables (an nh64 value, `1..=64`).
    Opaque(u32),
    /// An ECMP group: the indices of its single next hops, sorted and distinct, and the
    /// weight of each (`weights[i]` for `members[i]`, at least 1): a member of weight 2 takes
    /// twice the flows of a member of weight 1.
    Group {
        members: Box<[u32]>,
        weights: Box<[u16]>,
    },
}

impl Forward {
    /// An ECMP group of `members` (sorted and distinct), all of weight 1.
    pub fn group(members: impl Into<Box<[u32]>>) -> Forward {
        let members = members.into();
        let weights = vec![1u16; members.len()].into_boxed_slice();
        Forward::Group { members, weights }
    }

    /// Whether this is an ECMP group.
    pub fn is_group(&self) -> bool {
        matches!(self, Forward::Group { .. })
    }

    /// The gateway address, if this is a gateway.
    pub fn gateway(&self) -> Option<IpAddr> {
        match self {
            Forward::Gateway { addr, .. } => Some(*addr),
            _ => None,
        }
    }
}

impl fmt::Display for Forward {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Forward::Gateway {
                addr,
                ifindex: Some(i),
            } => write!(f, "via {addr} dev {i}"),
            Forward::Gateway {
                addr,
                ifindex: None,
            } => write!(f, "via {addr}"),
            Forward::Connected { ifindex } => write!(f, "connected dev {ifindex}"),
            Forward::Local => f.write_str("local"),
            Forward::Blackhole => f.write_str("blackhole"),
            Forward::Unreachable => f.write_str("unreachable"),
            Forward::Opaque(n) => write!(f, "nh64 #{n}"),
            Forward::Group { members, weights } => {
                f.write_str("group [")?;
                for (i, m) in members.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    write!(f, "{sep}{m}")?;
                    match weights.get(i) {
                        Some(1) | None => {}
                        Some(w) => write!(f, " weight {w}")?,
                    }
                }
                f.write_str("]")
            }
        }
    }
}

/// One entry of the next-hop table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NhEntry {
    /// Bumped each time the index is recycled for another next hop.
    pub gen: u32,
    /// Bumped on every change of this entry.
    pub version: u32,
    /// What to do with the packet.
    pub forward: Forward,
}

/// A next hop named by index and generation: stale names (taken before the index was
/// recycled) are told apart from current ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct NhId {
    pub index: u32,
    pub gen: u32,
}

impl NhId {
    /// "No route": index 0.
    pub const NONE: NhId = NhId { index: 0, gen: 0 };

    pub fn new(index: u32, gen: u32) -> Self {
        NhId { index, gen }
    }

    /// Whether this is [`NhId::NONE`] (index 0).
    pub fn is_none(&self) -> bool {
        self.index == 0
    }
}

impl fmt::Display for NhId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "nh {}.{}", self.index, self.gen)
    }
}

/// An immutable next-hop table: index → entry. Index 0 never has an entry.
///
/// Equality compares the entries, not the serial.
#[derive(Clone, Debug, Default)]
pub struct NhSnapshot {
    entries: Vec<Option<NhEntry>>,
    serial: u64,
}

impl PartialEq for NhSnapshot {
    fn eq(&self, o: &Self) -> bool {
        self.entries == o.entries
    }
}

impl Eq for NhSnapshot {}

impl NhSnapshot {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// A table whose entry `i` is `entries[i]`; an entry at index 0 is dropped.
    pub fn from_entries(mut entries: Vec<Option<NhEntry>>) -> Self {
        if let Some(first) = entries.first_mut() {
            *first = None;
        }
        NhSnapshot { entries, serial: 0 }
    }

    /// The publication this snapshot came from: 0 for one not published (or the publisher's
    /// initial one), then 1, 2, ... per [`NhPublisher::publish`] (never repeats, unlike an
    /// address), as the neighbor tables number theirs.
    #[inline]
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// The entry at `index`, if there is one.
    #[inline]
    pub fn get(&self, index: u32) -> Option<&NhEntry> {
        self.entries.get(usize::try_from(index).ok()?)?.as_ref()
    }

    /// One past the highest index the table has room for (entries may be absent below it).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table has no entry at all.
    pub fn is_empty(&self) -> bool {
        self.entries.iter().all(Option::is_none)
    }

    /// `(index, entry)` for every present entry, in index order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &NhEntry)> + '_ {
        (0u32..)
            .zip(self.entries.iter())
            .filter_map(|(i, e)| e.as_ref().map(|e| (i, e)))
    }
}

/// The writing end of a published next-hop table; owned by the control plane (not `Clone`).
#[derive(Debug)]
pub struct NhPublisher {
    cell: Arc<ArcSwap<NhSnapshot>>,
}

/// The reading end: cheap to clone, one per forwarding worker. Never blocks.
#[derive(Clone, Debug)]
pub struct NhReader {
    cell: Arc<ArcSwap<NhSnapshot>>,
}

/// The snapshot a reader loaded; dereferences to [`NhSnapshot`]. Hold it for a batch, not for
/// long: a held guard keeps its snapshot alive.
pub struct NhGuard(Guard<Arc<NhSnapshot>>);

impl Deref for NhGuard {
    type Target = NhSnapshot;
    #[inline]
    fn deref(&self) -> &NhSnapshot {
        &self.0
    }
}

impl NhPublisher {
    /// A publisher whose current snapshot is `initial`.
    pub fn new(initial: NhSnapshot) -> Self {
        NhPublisher {
            cell: Arc::new(ArcSwap::from_pointee(initial)),
        }
    }

    /// A reader of this publisher's snapshots.
    pub fn reader(&self) -> NhReader {
        NhReader {
            cell: Arc::clone(&self.cell),
        }
    }

    /// Makes `snapshot` the current one; readers see it from their next load on.
    pub fn publish(&self, mut snapshot: NhSnapshot) {
        // The one writer: nothing publishes between this load and the store.
        snapshot.serial = self.cell.load().serial.wrapping_add(1);
        self.cell.store(Arc::new(snapshot));
    }

    /// The current snapshot.
    pub fn current(&self) -> Arc<NhSnapshot> {
        self.cell.load_full()
    }
}

impl NhReader {
    /// The current snapshot (lock-free).
    #[inline]
    pub fn load(&self) -> NhGuard {
        NhGuard(self.cell.load())
    }

    /// The current snapshot as an owned `Arc` (for holding longer than a batch).
    pub fn load_full(&self) -> Arc<NhSnapshot> {
        self.cell.load_full()
    }

    /// A per-worker cache of the current snapshot: its `load` costs one atomic read while
    /// nothing was published (it keeps the last snapshot alive until the next `load`).
    pub fn cache(&self) -> NhCache {
        Cache::new(Arc::clone(&self.cell))
    }
}

/// What [`NhReader::cache`] returns.
pub type NhCache = Cache<Arc<ArcSwap<NhSnapshot>>, Arc<NhSnapshot>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(gen: u32, forward: Forward) -> Option<NhEntry> {
        Some(NhEntry {
            gen,
            version: 0,
            forward,
        })
    }

    #[test]
    fn publications_are_numbered_and_the_number_is_not_the_table() {
        let p = NhPublisher::new(NhSnapshot::new());
        let r = p.reader();
        assert_eq!(r.load().serial(), 0);
        let table = || NhSnapshot::from_entries(vec![None, entry(1, Forward::Blackhole)]);
        for want in 1..=3 {
            // The same table each time: a new publication all the same.
            p.publish(table());
            assert_eq!(r.load().serial(), want);
        }
        assert_eq!(*p.current(), table());
    }

    #[test]
    fn snapshot_get_and_iter() {
        let s = NhSnapshot::from_entries(vec![
            entry(0, Forward::Local),
            entry(0, Forward::Blackhole),
            None,
            entry(2, Forward::group(vec![1, 4])),
        ]);
        assert_eq!(s.get(0), None);
        assert_eq!(s.get(1).map(|e| &e.forward), Some(&Forward::Blackhole));
        assert_eq!(s.get(2), None);
        assert_eq!(s.get(3).map(|e| e.gen), Some(2));
        assert_eq!(s.get(4), None);
        assert_eq!(s.get(u32::MAX), None);
        assert_eq!(s.len(), 4);
        assert_eq!(s.iter().map(|(i, _)| i).collect::<Vec<_>>(), vec![1, 3]);
        assert!(NhSnapshot::new().is_empty());
    }

    #[test]
    fn display() {
        assert_eq!(NhId::new(5, 2).to_string(), "nh 5.2");
        let gw = Forward::Gateway {
            addr: "192.0.2.1".parse().unwrap(),
            ifindex: Some(3),
        };
        assert_eq!(gw.to_string(), "via 192.0.2.1 dev 3");
        let g = Forward::group(vec![1, 2]);
        assert_eq!(g.to_string(), "group [1, 2]");
        let w = Forward::Group {
            members: vec![1, 2].into(),
            weights: vec![3, 1].into(),
        };
        assert_eq!(w.to_string(), "group [1 weight 3, 2]");
        assert_eq!(Forward::Opaque(7).to_string(), "nh64 #7");
        assert!(g.is_group());
        assert!(NhId::NONE.is_none());
    }

    #[test]
    fn readers_see_published_snapshots_while_the_writer_publishes() {
        let publisher = NhPublisher::new(NhSnapshot::new());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let r = publisher.reader();
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut last = 0u32;
                    let mut loads = 0u64;
                    loop {
                        let done = stop.load(std::sync::atomic::Ordering::Relaxed);
                        let s = r.load();
                        // Every snapshot is complete: entry 1's version equals its length - 1
                        // and versions never go backwards.
                        if let Some(e) = s.get(1) {
                            assert_eq!(e.version as usize, s.len() - 1);
                            assert!(e.version >= last);
                            last = e.version;
                        }
                        loads += 1;
                        if done {
                            break loads;
                        }
                    }
                })
            })
            .collect();
        for v in 1..2000u32 {
            let mut entries = vec![None; v as usize + 1];
            entries[1] = Some(NhEntry {
                gen: 0,
                version: v,
                forward: Forward::Opaque(1),
            });
            publisher.publish(NhSnapshot::from_entries(entries));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in workers {
            assert!(w.join().unwrap() > 0);
        }
        assert_eq!(publisher.current().get(1).map(|e| e.version), Some(1999));
    }
}
