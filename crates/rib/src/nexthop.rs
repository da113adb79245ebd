//! The control plane's next-hop table: interning, reference counts, quarantine, generations,
//! and the resolution of each next hop as its source named it into what workers use.
//!
//! Every distinct next hop ([`Forward`] other than a group) and every distinct weighted ECMP
//! member set gets one index in `1..=max` (0 is "no route"; the default `max` is 65535, the
//! Poptrie leaf limit). Routes that forward the same way share the index, and prefixes whose
//! best routes form the same weighted member set share one group.
//!
//! ```text
//!   intern(via 192.0.2.1) ─▶ nh 1.0  refs 3 ◀─┐ member refs
//!   intern(via 192.0.2.2) ─▶ nh 2.0  refs 2 ◀─┤
//!   intern_group([(1, 1), (2, 1)]) ─▶ nh 3.0  refs 1  Group { members: [1, 2], weights: [1, 1] }
//!
//!   release → refs 0 → quarantine ──release_quarantine()──▶ free ──reuse──▶ nh 3.1 (gen + 1)
//! ```
//!
//! An index whose last reference goes is not reusable at once: a published FIB may still map
//! prefixes to it. It waits in quarantine (and stays in [`NextHopTable::snapshot`]) until the
//! owner has published a FIB that no longer refers to it and calls
//! [`NextHopTable::release_quarantine`]. A reused index gets the next generation, so an
//! [`NhId`] taken before the reuse is refused by [`NextHopTable::get`].
//!
//! **Named and resolved.** A single next hop is interned under the form its source gave
//! (`via 192.0.2.1`, no interface); what the snapshot publishes for it is its *resolution*
//! (`via 192.0.2.1 dev 2`, once the RIB knows that port 2's subnet holds the gateway), set by
//! [`NextHopTable::set_resolution`]. A next hop with no resolution is *inactive*: it keeps
//! its index and its routes, but no best path uses it until it resolves again. A resolution
//! that changes an active next hop (a gateway that moved to another port) changes the entry
//! in place, like [`NextHopTable::modify`]: same index and generation, version + 1, the FIB
//! untouched.
//!
//! **Weights.** A group's members carry weights (netlink's `rtnh_hops + 1`, a next-hop
//! group's member weight). Interning divides them by their greatest common divisor, so
//! `{a: 2, b: 2}` is the same group as `{a: 1, b: 1}`; a member named twice keeps its larger
//! weight.

use std::fmt;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use vfsr_fib::nexthop::{Forward, NhEntry, NhId, NhSnapshot};

/// The default highest index: the Poptrie leaf limit.
pub const DEFAULT_MAX_NEXTHOPS: u32 = 65535;

/// Why a next-hop operation failed. Nothing is changed when one is returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NhError {
    /// Every index in `1..=max` is in use or in quarantine.
    Exhausted { max: u32 },
    /// The id names no live next hop (never given, released, or an older generation).
    Stale(NhId),
    /// A group was given where a single next hop is required.
    GroupNotAllowed,
    /// A group needs at least one member.
    EmptyGroup,
}

impl fmt::Display for NhError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NhError::Exhausted { max } => write!(f, "next-hop indices exhausted (max {max})"),
            NhError::Stale(id) => write!(f, "{id} is not a live next hop"),
            NhError::GroupNotAllowed => f.write_str("a group is not allowed here"),
            NhError::EmptyGroup => f.write_str("a group needs at least one member"),
        }
    }
}

impl std::error::Error for NhError {}

/// What [`NextHopTable::set_resolution`] changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    /// The next hop became active or inactive: the best paths using it must be recomputed.
    pub activity: bool,
    /// The published entry changed in place (version + 1).
    pub entry: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Live,
    Quarantined,
    Free,
}

#[derive(Clone, Debug)]
struct Slot {
    /// What the snapshot publishes (for a single next hop: its resolution, or its named form
    /// while it has none).
    entry: NhEntry,
    /// A single next hop as its source named it (the interning key); `None` for a group.
    named: Option<Forward>,
    /// Whether best paths may use it (groups: always).
    active: bool,
    refs: u64,
    state: State,
}

/// A group's interning key: `(member index, weight)` sorted by index.
type GroupKey = Box<[(u32, u16)]>;

/// Interning table of next hops and ECMP groups with reference counts (see the module doc).
#[derive(Clone, Debug)]
pub struct NextHopTable {
    /// `slots[i]` is index `i`; `slots[0]` is a placeholder that is never live.
    slots: Vec<Slot>,
    /// Single next hop as named → its index (the one interning hands out).
    singles: FxHashMap<Forward, u32>,
    /// Weighted member set → group index.
    groups: FxHashMap<GroupKey, u32>,
    /// Indices released from quarantine, ready for reuse.
    free: Vec<u32>,
    /// Indices whose last reference went, not reusable yet.
    quarantine: Vec<u32>,
    max: u32,
    live: usize,
}

impl Default for NextHopTable {
    fn default() -> Self {
        Self::new()
    }
}

fn gcd(a: u16, b: u16) -> u16 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl NextHopTable {
    /// An empty table with indices `1..=DEFAULT_MAX_NEXTHOPS`.
    pub fn new() -> Self {
        Self::with_max(DEFAULT_MAX_NEXTHOPS)
    }

    /// An empty table with indices `1..=max`.
    pub fn with_max(max: u32) -> Self {
        NextHopTable {
            slots: vec![Slot {
                entry: NhEntry {
                    gen: 0,
                    version: 0,
                    forward: Forward::Blackhole,
                },
                named: None,
                active: false,
                refs: 0,
                state: State::Free,
            }],
            singles: FxHashMap::default(),
            groups: FxHashMap::default(),
            free: Vec::new(),
            quarantine: Vec::new(),
            max,
            live: 0,
        }
    }

    /// The highest index.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// Live next hops and groups.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Indices in quarantine.
    pub fn quarantined(&self) -> usize {
        self.quarantine.len()
    }

    /// Indices that can be handed out now (never used or released from quarantine).
    pub fn available(&self) -> usize {
        let never_used = (self.max as usize).saturating_sub(self.slots.len().saturating_sub(1));
        never_used.saturating_add(self.free.len())
    }

    fn slot(&self, index: u32) -> Option<&Slot> {
        self.slots.get(usize::try_from(index).ok()?)
    }

    fn slot_mut(&mut self, index: u32) -> Option<&mut Slot> {
        self.slots.get_mut(usize::try_from(index).ok()?)
    }

    fn live_slot(&self, id: NhId) -> Option<&Slot> {
        self.slot(id.index)
            .filter(|s| s.state == State::Live && s.entry.gen == id.gen && id.index != 0)
    }

    fn live_slot_mut(&mut self, id: NhId) -> Option<&mut Slot> {
        if id.index == 0 {
            return None;
        }
        self.slot_mut(id.index)
            .filter(|s| s.state == State::Live && s.entry.gen == id.gen)
    }

    /// The published entry of a live next hop; `None` for a stale id.
    pub fn get(&self, id: NhId) -> Option<&NhEntry> {
        self.live_slot(id).map(|s| &s.entry)
    }

    /// A single next hop as its source named it (`None` for a group or a stale id).
    pub fn named(&self, id: NhId) -> Option<&Forward> {
        self.live_slot(id).and_then(|s| s.named.as_ref())
    }

    /// Whether best paths may use this next hop (a group always; a single one while it has a
    /// resolution). `false` for a stale id.
    #[inline]
    pub fn is_active(&self, id: NhId) -> bool {
        self.live_slot(id).is_some_and(|s| s.active)
    }

    /// The live next hop at `index`, with its current generation.
    pub fn id_of_index(&self, index: u32) -> Option<NhId> {
        let s = self.slot(index)?;
        (index != 0 && s.state == State::Live).then_some(NhId::new(index, s.entry.gen))
    }

    /// The references held on a live next hop.
    pub fn refcount(&self, id: NhId) -> Option<u64> {
        self.live_slot(id).map(|s| s.refs)
    }

    /// The index interning hands out for `forward` (a single next hop as named), without
    /// taking a reference.
    pub fn lookup(&self, forward: &Forward) -> Option<NhId> {
        let &i = self.singles.get(forward)?;
        self.id_of_index(i)
    }

    /// Every live next hop and group: id, published entry, references.
    pub fn iter(&self) -> impl Iterator<Item = (NhId, &NhEntry, u64)> + '_ {
        (0u32..)
            .zip(self.slots.iter())
            .filter(|(i, s)| *i != 0 && s.state == State::Live)
            .map(|(i, s)| (NhId::new(i, s.entry.gen), &s.entry, s.refs))
    }

    /// Every live single next hop: id and the form its source named it in.
    pub fn singles(&self) -> impl Iterator<Item = (NhId, &Forward)> + '_ {
        (0u32..)
            .zip(self.slots.iter())
            .filter(|(i, s)| *i != 0 && s.state == State::Live)
            .filter_map(|(i, s)| Some((NhId::new(i, s.entry.gen), s.named.as_ref()?)))
    }

    /// Gives a new index to `forward` with one reference.
    fn alloc(&mut self, forward: Forward, named: Option<Forward>) -> Result<NhId, NhError> {
        if let Some(index) = self.free.pop() {
            if let Some(s) = self.slot_mut(index) {
                s.entry.gen = s.entry.gen.wrapping_add(1);
                s.entry.version = s.entry.version.wrapping_add(1);
                s.entry.forward = forward;
                s.named = named;
                s.active = true;
                s.refs = 1;
                s.state = State::Live;
                let gen = s.entry.gen;
                self.live = self.live.saturating_add(1);
                return Ok(NhId::new(index, gen));
            }
        }
        let index =
            u32::try_from(self.slots.len()).map_err(|_| NhError::Exhausted { max: self.max })?;
        if index > self.max {
            return Err(NhError::Exhausted { max: self.max });
        }
        self.slots.push(Slot {
            entry: NhEntry {
                gen: 0,
                version: 0,
                forward,
            },
            named,
            active: true,
            refs: 1,
            state: State::Live,
        });
        self.live = self.live.saturating_add(1);
        Ok(NhId::new(index, 0))
    }

    /// The index of a single next hop with one more reference (a new, active index when
    /// `forward` is new). Groups are refused: use [`NextHopTable::intern_group`].
    pub fn intern(&mut self, forward: &Forward) -> Result<NhId, NhError> {
        self.intern_new(forward).map(|(id, _)| id)
    }

    /// As [`NextHopTable::intern`], and whether the index is new (its resolution is still
    /// the named form: the owner resolves it).
    pub fn intern_new(&mut self, forward: &Forward) -> Result<(NhId, bool), NhError> {
        if forward.is_group() {
            return Err(NhError::GroupNotAllowed);
        }
        if let Some(&index) = self.singles.get(forward) {
            if let Some(id) = self.id_of_index(index) {
                self.retain(id)?;
                return Ok((id, false));
            }
        }
        let id = self.alloc(forward.clone(), Some(forward.clone()))?;
        self.singles.insert(forward.clone(), id.index);
        Ok((id, true))
    }

    /// Sets what a single next hop resolves to: `Some(forward)` makes it active and publishes
    /// `forward` (in place, version + 1, when it differs from what is published); `None` makes
    /// it inactive and leaves the published entry as it is (no FIB uses it once the owner has
    /// recomputed the best paths).
    pub fn set_resolution(
        &mut self,
        id: NhId,
        resolution: Option<Forward>,
    ) -> Result<Resolved, NhError> {
        let s = self.live_slot_mut(id).ok_or(NhError::Stale(id))?;
        if s.named.is_none() {
            return Err(NhError::GroupNotAllowed);
        }
        let mut out = Resolved::default();
        match resolution {
            None => {
                out.activity = s.active;
                s.active = false;
            }
            Some(f) => {
                if f.is_group() {
                    return Err(NhError::GroupNotAllowed);
                }
                out.activity = !s.active;
                s.active = true;
                if s.entry.forward != f {
                    s.entry.forward = f;
                    s.entry.version = s.entry.version.wrapping_add(1);
                    out.entry = true;
                }
            }
        }
        Ok(out)
    }

    /// The group of `members` (live, active single next hops with their weights, in any
    /// order, repeats allowed) with one more reference. A new group holds one reference on
    /// each member. A set of one member is that member itself (one more reference on it).
    pub fn intern_group(&mut self, members: &[(NhId, u16)]) -> Result<NhId, NhError> {
        let mut set: SmallVec<[(u32, u16); 8]> = SmallVec::with_capacity(members.len());
        for &(m, w) in members {
            let s = self.live_slot(m).ok_or(NhError::Stale(m))?;
            if s.named.is_none() {
                return Err(NhError::GroupNotAllowed);
            }
            set.push((m.index, w.max(1)));
        }
        set.sort_unstable();
        // A member named twice keeps its larger weight (the last of its run after sorting).
        let mut dedup: SmallVec<[(u32, u16); 8]> = SmallVec::with_capacity(set.len());
        for (m, w) in set {
            match dedup.last_mut() {
                Some(last) if last.0 == m => last.1 = last.1.max(w),
                _ => dedup.push((m, w)),
            }
        }
        let g = dedup.iter().fold(0u16, |g, &(_, w)| gcd(g, w)).max(1);
        for e in dedup.iter_mut() {
            e.1 /= g;
        }
        match dedup.as_slice() {
            [] => return Err(NhError::EmptyGroup),
            [(one, _)] => {
                let id = self
                    .id_of_index(*one)
                    .ok_or(NhError::Stale(NhId::new(*one, 0)))?;
                self.retain(id)?;
                return Ok(id);
            }
            _ => {}
        }
        if let Some(&index) = self.groups.get(dedup.as_slice()) {
            if let Some(id) = self.id_of_index(index) {
                self.retain(id)?;
                return Ok(id);
            }
        }
        let key: GroupKey = dedup.as_slice().into();
        let forward = Forward::Group {
            members: key.iter().map(|&(m, _)| m).collect(),
            weights: key.iter().map(|&(_, w)| w).collect(),
        };
        let id = self.alloc(forward, None)?;
        for &(m, _) in key.iter() {
            if let Some(s) = self.slot_mut(m) {
                s.refs = s.refs.saturating_add(1);
            }
        }
        self.groups.insert(key, id.index);
        Ok(id)
    }

    /// One more reference on a live next hop or group.
    pub fn retain(&mut self, id: NhId) -> Result<(), NhError> {
        let s = self.live_slot_mut(id).ok_or(NhError::Stale(id))?;
        s.refs = s.refs.saturating_add(1);
        Ok(())
    }

    /// One reference less; the last one sends the index to quarantine (a group then releases
    /// its members).
    pub fn release(&mut self, id: NhId) -> Result<(), NhError> {
        let s = self.live_slot_mut(id).ok_or(NhError::Stale(id))?;
        s.refs = s.refs.saturating_sub(1);
        if s.refs > 0 {
            return Ok(());
        }
        s.state = State::Quarantined;
        let forward = s.entry.forward.clone();
        let named = s.named.take();
        self.live = self.live.saturating_sub(1);
        self.quarantine.push(id.index);
        match (named, forward) {
            (Some(named), _) => {
                if self.singles.get(&named) == Some(&id.index) {
                    self.singles.remove(&named);
                }
            }
            (None, Forward::Group { members, weights }) => {
                let key: GroupKey = members
                    .iter()
                    .copied()
                    .zip(weights.iter().copied())
                    .collect();
                if self.groups.get(&key) == Some(&id.index) {
                    self.groups.remove(&key);
                }
                for &m in members.iter() {
                    if let Some(mid) = self.id_of_index(m) {
                        self.release(mid)?;
                    }
                }
            }
            (None, _) => {}
        }
        Ok(())
    }

    /// Changes what a single next hop is, in place: same index and generation, version + 1;
    /// it is named and published as `forward` from now on (the owner resolves it again).
    /// Every prefix and group using it follows without a FIB change.
    pub fn modify(&mut self, id: NhId, forward: Forward) -> Result<(), NhError> {
        if forward.is_group() {
            return Err(NhError::GroupNotAllowed);
        }
        let s = self.live_slot(id).ok_or(NhError::Stale(id))?;
        let Some(old) = s.named.clone() else {
            return Err(NhError::GroupNotAllowed);
        };
        if self.singles.get(&old) == Some(&id.index) {
            self.singles.remove(&old);
        }
        // Interning hands out this index for the new value unless another one has it.
        self.singles.entry(forward.clone()).or_insert(id.index);
        if let Some(s) = self.live_slot_mut(id) {
            s.entry.forward = forward.clone();
            s.named = Some(forward);
            s.entry.version = s.entry.version.wrapping_add(1);
        }
        Ok(())
    }

    /// Makes the quarantined indices reusable. Call it once a FIB that no longer refers to
    /// them has been published (and no reader holds an older one). Returns how many.
    pub fn release_quarantine(&mut self) -> usize {
        self.release_quarantine_upto(self.quarantine.len())
    }

    /// Makes the first `mark` quarantined indices reusable (those quarantined before
    /// [`NextHopTable::quarantined`] returned `mark`), keeping the later ones. An owner whose
    /// FIB lags one publication behind releases, at each publication, what was quarantined
    /// before the previous one. Returns how many.
    pub fn release_quarantine_upto(&mut self, mark: usize) -> usize {
        let mark = mark.min(self.quarantine.len());
        let n = mark;
        let rest = self.quarantine.split_off(mark);
        for index in std::mem::replace(&mut self.quarantine, rest) {
            if let Some(s) = self.slot_mut(index) {
                if s.state == State::Quarantined {
                    s.state = State::Free;
                    self.free.push(index);
                }
            }
        }
        n
    }

    /// The table as the forwarding path reads it: live and quarantined entries (a published
    /// FIB may still use the latter).
    pub fn snapshot(&self) -> NhSnapshot {
        let entries = self
            .slots
            .iter()
            .map(|s| match s.state {
                State::Live | State::Quarantined => Some(s.entry.clone()),
                State::Free => None,
            })
            .collect();
        NhSnapshot::from_entries(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gw(s: &str) -> Forward {
        Forward::Gateway {
            addr: s.parse().unwrap(),
            ifindex: None,
        }
    }

    #[test]
    fn interning_shares_indices_and_counts_references() {
        let mut t = NextHopTable::new();
        let a = t.intern(&gw("192.0.2.1")).unwrap();
        let b = t.intern(&gw("192.0.2.2")).unwrap();
        assert_eq!(a, NhId::new(1, 0));
        assert_eq!(b, NhId::new(2, 0));
        assert_eq!(t.intern(&gw("192.0.2.1")).unwrap(), a);
        assert_eq!(t.refcount(a), Some(2));
        assert_eq!(t.lookup(&gw("192.0.2.2")), Some(b));
        assert_eq!(t.live(), 2);
        assert_eq!(
            t.intern(&Forward::group(vec![1, 2])),
            Err(NhError::GroupNotAllowed)
        );
    }

    #[test]
    fn groups_are_interned_by_member_set() {
        let mut t = NextHopTable::new();
        let a = t.intern(&gw("192.0.2.1")).unwrap();
        let b = t.intern(&gw("192.0.2.2")).unwrap();
        let g = t.intern_group(&[(b, 1), (a, 1), (b, 1)]).unwrap();
        assert_eq!(t.intern_group(&[(a, 1), (b, 1)]).unwrap(), g);
        // Weights are reduced by their common divisor: {2, 2} is {1, 1}.
        assert_eq!(t.intern_group(&[(a, 2), (b, 2)]).unwrap(), g);
        t.release(g).unwrap();
        assert_eq!(t.refcount(g), Some(2));
        assert_eq!(t.get(g).unwrap().forward, Forward::group(vec![1, 2]));
        // One member ref per group, not per group reference.
        assert_eq!(t.refcount(a), Some(2));
        // A set of one is the member itself.
        assert_eq!(t.intern_group(&[(a, 1), (a, 3)]).unwrap(), a);
        assert_eq!(t.refcount(a), Some(3));
        assert_eq!(t.intern_group(&[]), Err(NhError::EmptyGroup));
        assert_eq!(
            t.intern_group(&[(a, 1), (g, 1)]),
            Err(NhError::GroupNotAllowed)
        );
        // Releasing the group's last reference releases its members.
        t.release(g).unwrap();
        t.release(g).unwrap();
        assert_eq!(t.get(g), None);
        assert_eq!(t.refcount(a), Some(2));
        assert_eq!(t.refcount(b), Some(1));
    }

    #[test]
    fn quarantine_then_reuse_with_next_generation() {
        let mut t = NextHopTable::new();
        let a = t.intern(&Forward::Blackhole).unwrap();
        t.release(a).unwrap();
        assert_eq!(t.get(a), None);
        assert_eq!(t.release(a), Err(NhError::Stale(a)));
        assert_eq!(t.quarantined(), 1);
        // Still in the snapshot while quarantined; not reused before release_quarantine.
        assert!(t.snapshot().get(1).is_some());
        let b = t.intern(&Forward::Local).unwrap();
        assert_eq!(b.index, 2);
        assert_eq!(t.release_quarantine(), 1);
        assert!(t.snapshot().get(1).is_none());
        let c = t.intern(&Forward::Unreachable).unwrap();
        assert_eq!(c, NhId::new(1, 1));
        assert_eq!(t.get(a), None);
        assert_eq!(t.get(c).unwrap().forward, Forward::Unreachable);
        assert_eq!(t.snapshot().get(1).unwrap().gen, 1);
    }

    #[test]
    fn exhaustion_is_an_error() {
        let mut t = NextHopTable::with_max(2);
        let a = t.intern(&Forward::Opaque(1)).unwrap();
        let b = t.intern(&Forward::Opaque(2)).unwrap();
        assert_eq!(
            t.intern(&Forward::Opaque(3)),
            Err(NhError::Exhausted { max: 2 })
        );
        assert_eq!(
            t.intern_group(&[(a, 1), (b, 1)]),
            Err(NhError::Exhausted { max: 2 })
        );
        assert_eq!(t.refcount(a), Some(1));
        assert_eq!(t.available(), 0);
        t.release(a).unwrap();
        assert_eq!(t.available(), 0);
        t.release_quarantine();
        assert_eq!(t.available(), 1);
        assert!(t.intern(&Forward::Opaque(3)).is_ok());
        let mut z = NextHopTable::with_max(0);
        assert!(z.intern(&Forward::Local).is_err());
    }

    #[test]
    fn modify_keeps_the_index() {
        let mut t = NextHopTable::new();
        let a = t.intern(&gw("192.0.2.1")).unwrap();
        let v0 = t.get(a).unwrap().version;
        t.modify(a, Forward::Unreachable).unwrap();
        let e = t.get(a).unwrap();
        assert_eq!((e.gen, e.version), (0, v0 + 1));
        assert_eq!(e.forward, Forward::Unreachable);
        assert_eq!(t.lookup(&gw("192.0.2.1")), None);
        assert_eq!(t.lookup(&Forward::Unreachable), Some(a));
        // Another index already forwarding the same way keeps interning it.
        let b = t.intern(&Forward::Blackhole).unwrap();
        t.modify(a, Forward::Blackhole).unwrap();
        assert_eq!(t.lookup(&Forward::Blackhole), Some(b));
        assert_eq!(
            t.modify(a, Forward::group(vec![])),
            Err(NhError::GroupNotAllowed)
        );
        assert_eq!(
            t.modify(NhId::new(9, 0), Forward::Local),
            Err(NhError::Stale(NhId::new(9, 0)))
        );
        // Releasing the modified entry does not disturb b's interning.
        t.release(a).unwrap();
        assert_eq!(t.lookup(&Forward::Blackhole), Some(b));
    }
}
