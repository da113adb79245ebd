//! LC-trie updates in place: the descent to an address, the slot refreshed or the subtree
//! rebuilt beneath it, nodes with one used slot collapsed, freed blocks reused, and a
//! compacting rebuild once freed space outweighs what is live (see the parent module's doc
//! for the worked example).

use crate::key::Key;
use crate::prefix::Prefix;
use crate::update::{LpmUpdate, RouteMap};
use crate::{BuildError, LpmBuild};
use std::collections::HashMap;

use super::{Builder, Entry, LcConfig, LcTrie, Slot, NONE};

/// Bookkeeping of updates, kept apart from the lookup arrays.
#[derive(Clone, Debug, Default)]
pub(super) struct Spare<K: Key> {
    /// The chain entry of every prefix.
    pub(super) index: HashMap<Prefix<K>, u32>,
    /// Chain entries no prefix uses, reused before the chain grows.
    pub(super) free_entries: Vec<u32>,
    /// Bases of freed node blocks, by `bits` (a block of `2^bits` slots).
    pub(super) free_nodes: Vec<Vec<u32>>,
    /// Slots in freed blocks.
    pub(super) free_slots: usize,
}

/// One level of a descent: the node, where its header is kept (`None`: the root), and the
/// slot the descent took.
#[derive(Clone, Copy, Debug)]
pub(super) struct Step {
    at: Option<usize>,
    node: Slot,
    i: usize,
}

/// Nodes of at most this many bits that are left with one used slot are replaced by it.
pub(super) const COLLAPSE_BITS: u8 = 4;

/// Below this many slots or chain entries, freed space is not worth a compacting rebuild.
pub(super) const COMPACT_MIN: usize = 64;

/// What an update of one address did to the trie.
pub(super) enum Outcome {
    Done,
    /// The root itself has to change: the caller rebuilds everything.
    NeedsRebuild,
}

impl<K: Key> LpmUpdate<K> for LcTrie<K> {
    fn update(&mut self, table: &RouteMap<K>, changed: &[Prefix<K>]) -> Result<(), BuildError> {
        let mut todo = changed.to_vec();
        todo.sort_unstable();
        todo.dedup();
        if todo.is_empty() {
            return Ok(());
        }
        let mut sp = match self.spare.take() {
            Some(sp) => sp,
            None => Box::new(self.make_spare()),
        };
        let rebuild = self.apply(table, &todo, &mut sp);
        self.spare = Some(sp);
        if rebuild? {
            *self = LcTrie::build(&table.to_routes(), &self.config)?;
        }
        Ok(())
    }
}

impl<K: Key> LcTrie<K> {
    /// The update bookkeeping of a freshly built trie: every chain entry is in use.
    fn make_spare(&self) -> Spare<K> {
        let index = (0u32..)
            .zip(&self.chain)
            .map(|(i, e)| (Prefix::new_masked(e.addr, e.len), i))
            .collect();
        Spare {
            index,
            free_entries: Vec::new(),
            free_nodes: vec![Vec::new(); LcConfig::MAX_BITS_LIMIT as usize + 1],
            free_slots: 0,
        }
    }

    /// The three passes of an update (see the module doc). `Ok(true)`: the caller rebuilds.
    fn apply(
        &mut self,
        table: &RouteMap<K>,
        todo: &[Prefix<K>],
        sp: &mut Spare<K>,
    ) -> Result<bool, BuildError> {
        // 1. Chain entries. Room is checked before anything changes.
        let grow = todo
            .iter()
            .filter(|p| table.get(p).is_some() && !sp.index.contains_key(p))
            .count();
        let live = self.chain.len().saturating_sub(sp.free_entries.len());
        if live.saturating_add(grow) >= NONE as usize {
            return Err(BuildError::TooLarge(
                "LC-trie chain holds fewer than 2^32 - 1 prefixes",
            ));
        }
        // Entries freed now are reused from the next batch on, so that no slot still naming
        // one can be mistaken for a leaf of a prefix announced in this batch.
        let mut freed = Vec::new();
        for &p in todo {
            match (table.get(&p), sp.index.get(&p).copied()) {
                (Some(nexthop), Some(e)) => {
                    if let Some(x) = self.chain.get_mut(e as usize) {
                        x.nexthop = nexthop;
                    }
                }
                (Some(nexthop), None) => {
                    let entry = Entry {
                        addr: p.addr(),
                        len: p.len(),
                        nexthop,
                        parent: NONE,
                    };
                    let e = match sp.free_entries.pop() {
                        Some(e) => {
                            if let Some(x) = self.chain.get_mut(e as usize) {
                                *x = entry;
                            }
                            e
                        }
                        None => {
                            self.chain.push(entry);
                            (self.chain.len() - 1) as u32
                        }
                    };
                    sp.index.insert(p, e);
                }
                (None, Some(e)) => {
                    sp.index.remove(&p);
                    freed.push(e);
                }
                (None, None) => {}
            }
        }

        // 2. Parent links: a prefix's own, and those of the routes right below it.
        for &p in todo {
            let up = table
                .parent(p)
                .and_then(|r| sp.index.get(&r.prefix).copied())
                .unwrap_or(NONE);
            let own = sp.index.get(&p).copied();
            if let Some(x) = own.and_then(|e| self.chain.get_mut(e as usize)) {
                x.parent = up;
            }
            let above = own.unwrap_or(up);
            let mut top: Option<Prefix<K>> = None;
            for r in table.within(p) {
                if r.prefix == p || top.is_some_and(|t| t.covers(&r.prefix)) {
                    continue;
                }
                top = Some(r.prefix);
                if let Some(x) = sp
                    .index
                    .get(&r.prefix)
                    .and_then(|&c| self.chain.get_mut(c as usize))
                {
                    x.parent = above;
                }
            }
        }

        // 3. The trie, once per changed address.
        let mut keys: Vec<K> = todo.iter().map(|p| p.addr()).collect();
        keys.dedup(); // sorted by address already
        for k in keys {
            let e = self.descend(k);
            let old = self
                .chain
                .get(e as usize)
                .filter(|x| x.addr == k)
                .map(|_| e);
            let new = longest_at(&sp.index, k);
            let outcome = match (old, new) {
                (Some(o), Some(n)) if o == n => Outcome::Done,
                (Some(_), Some(n)) => {
                    let (steps, at) = self.path(k);
                    self.put(at, Slot::leaf(n));
                    self.settle(&steps, sp);
                    Outcome::Done
                }
                (Some(_), None) => {
                    let (steps, at) = self.path(k);
                    self.put(at, Slot::EMPTY);
                    self.leaves = self.leaves.saturating_sub(1);
                    self.settle(&steps, sp);
                    Outcome::Done
                }
                (None, Some(_)) => self.insert_key(k, table, sp)?,
                (None, None) => Outcome::Done,
            };
            if let Outcome::NeedsRebuild = outcome {
                return Ok(true);
            }
        }
        sp.free_entries.extend(freed);

        // Compaction: once freed space outgrows the live part, a rebuild packs it.
        let live_slots = self.slots.len().saturating_sub(sp.free_slots);
        let live_entries = self.chain.len().saturating_sub(sp.free_entries.len());
        Ok(
            (self.slots.len() >= COMPACT_MIN && sp.free_slots > live_slots)
                || (self.chain.len() >= COMPACT_MIN && sp.free_entries.len() > live_entries),
        )
    }

    /// The descent of `k`: every node passed, and where the leaf reached is kept.
    fn path(&self, k: K) -> (Vec<Step>, Option<usize>) {
        let mut steps = Vec::new();
        let (mut s, mut at) = (self.root, None);
        for _ in 0..=K::BITS {
            if s.bits == 0 {
                break;
            }
            let i = k.chunk(s.pos, s.bits);
            steps.push(Step { at, node: s, i });
            let child = s.base as usize + i;
            at = Some(child);
            s = self.slots.get(child).copied().unwrap_or(Slot::EMPTY);
        }
        (steps, at)
    }

    /// Stores `s` at `at` (`None`: the root).
    fn put(&mut self, at: Option<usize>, s: Slot) {
        match at {
            None => self.root = s,
            Some(i) => {
                if let Some(dst) = self.slots.get_mut(i) {
                    *dst = s;
                }
            }
        }
    }

    /// Whether slot `j` of `node` holds a subtree of its own (a node, or the leaf of a key
    /// whose bits pick `j`) rather than a representative or nothing.
    pub(super) fn is_used(&self, node: Slot, j: usize) -> bool {
        match self.slots.get(node.base as usize + j) {
            Some(c) if c.bits != 0 => true,
            Some(c) => self
                .chain
                .get(c.base as usize)
                .is_some_and(|e| e.addr.chunk(node.pos, node.bits) == j),
            None => false,
        }
    }

    /// The chain entry of the leftmost leaf below `s` (slot 0 always leads to it: if it is
    /// empty it stands for the first used slot).
    pub(super) fn leftmost(&self, mut s: Slot) -> u32 {
        for _ in 0..=K::BITS {
            if s.bits == 0 {
                return s.base;
            }
            s = self
                .slots
                .get(s.base as usize)
                .copied()
                .unwrap_or(Slot::EMPTY);
        }
        NONE
    }

    /// Re-points the empty slots of `node` between the used neighbours of slot `j` (whose
    /// content just changed), with the rule of `Builder::fill_empty_slots`. Returns whether
    /// the node still has a used slot.
    fn refresh(&mut self, node: Slot, j: usize) -> bool {
        let size = 1usize << node.bits;
        let base = node.base as usize;
        let before = (0..j).rev().find(|&s| self.is_used(node, s));
        let after = (j + 1..size).find(|&s| self.is_used(node, s));
        let here = self.is_used(node, j).then_some(j);
        let with_leaf = |s: Option<usize>| {
            s.map(|s| {
                let c = self.slots.get(base + s).copied().unwrap_or(Slot::EMPTY);
                (s, self.leftmost(c))
            })
        };
        let (b, h, a) = (with_leaf(before), with_leaf(here), with_leaf(after));
        if b.is_none() && h.is_none() && a.is_none() {
            return false;
        }
        let lo = before.map_or(0, |b| b + 1);
        let hi = after.unwrap_or(size);
        for i in lo..hi {
            if here == Some(i) {
                continue;
            }
            let (l, r) = match h {
                Some(h) if i < h.0 => (b, Some(h)),
                Some(h) => (Some(h), a),
                None => (b, a),
            };
            let pick = match (l, r) {
                (Some(x), Some(y)) => {
                    if (i ^ x.0).leading_zeros() >= (i ^ y.0).leading_zeros() {
                        x
                    } else {
                        y
                    }
                }
                (Some(x), None) | (None, Some(x)) => x,
                (None, None) => continue,
            };
            if let Some(dst) = self.slots.get_mut(base + i) {
                *dst = Slot::leaf(pick.1);
            }
        }
        true
    }

    /// After the slot at the end of `steps` changed: re-points representatives on every
    /// node above it, bottom up, frees nodes left empty and replaces small nodes left with
    /// one used slot by that slot.
    fn settle(&mut self, steps: &[Step], sp: &mut Spare<K>) {
        for st in steps.iter().rev() {
            if !self.refresh(st.node, st.i) {
                self.free_block(st.node, sp);
                self.put(st.at, Slot::EMPTY);
                continue;
            }
            if st.node.bits <= COLLAPSE_BITS {
                let mut used = (0..1usize << st.node.bits).filter(|&j| self.is_used(st.node, j));
                if let (Some(only), None) = (used.next(), used.next()) {
                    let child = self
                        .slots
                        .get(st.node.base as usize + only)
                        .copied()
                        .unwrap_or(Slot::EMPTY);
                    self.free_block(st.node, sp);
                    self.put(st.at, child);
                }
            }
        }
    }

    /// Puts the slots of one node on the free list.
    fn free_block(&mut self, node: Slot, sp: &mut Spare<K>) {
        if let Some(list) = sp.free_nodes.get_mut(node.bits as usize) {
            list.push(node.base);
            sp.free_slots += 1usize << node.bits;
            self.internal = self.internal.saturating_sub(1);
        }
    }

    /// Frees every node of the subtree under node `top`; returns the keys it held.
    fn free_subtree(&mut self, top: Slot, sp: &mut Spare<K>) -> usize {
        let mut keys = 0;
        let mut stack = vec![top];
        while let Some(n) = stack.pop() {
            for j in 0..1usize << n.bits {
                match self.slots.get(n.base as usize + j) {
                    Some(&c) if c.bits != 0 => stack.push(c),
                    Some(_) if self.is_used(n, j) => keys += 1,
                    _ => {}
                }
            }
            self.free_block(n, sp);
        }
        keys
    }

    /// A new address `k`: rebuilds the smallest subtree whose key range holds it.
    fn insert_key(
        &mut self,
        k: K,
        table: &RouteMap<K>,
        sp: &mut Spare<K>,
    ) -> Result<Outcome, BuildError> {
        let (steps, _) = self.path(k);
        // A key the descent reaches shares bits 0..pos with every key of each node passed.
        let Some(reached) = self.chain.get(self.descend(k) as usize).map(|e| e.addr) else {
            return Ok(Outcome::NeedsRebuild);
        };
        let shared = k.common_prefix_len(reached);
        // The deepest node whose skipped bits `k` agrees with; none: the root must change.
        let Some(m) = steps.iter().rposition(|st| st.node.pos <= shared) else {
            return Ok(Outcome::NeedsRebuild);
        };
        let Some(&st) = steps.get(m) else {
            return Ok(Outcome::NeedsRebuild);
        };
        let span = Prefix::new_masked(k, st.node.pos + st.node.bits);
        let (keys, leaf_entry) = span_keys(table, span, &sp.index)?;

        let at = st.node.base as usize + st.i;
        let old = self.slots.get(at).copied().unwrap_or(Slot::EMPTY);
        let old_keys = if old.bits != 0 {
            self.free_subtree(old, sp)
        } else {
            usize::from(self.is_used(st.node, st.i))
        };
        let mut b = Builder {
            config: &self.config,
            keys: &keys,
            leaf_entry: &leaf_entry,
            slots: core::mem::take(&mut self.slots),
            free_nodes: core::mem::take(&mut sp.free_nodes),
            free_slots: sp.free_slots,
            internal: 0,
            top_is_root: false,
        };
        let built = b.run();
        self.slots = b.slots;
        sp.free_nodes = b.free_nodes;
        sp.free_slots = b.free_slots;
        self.internal += b.internal;
        self.put(Some(at), built?);
        self.leaves = (self.leaves + keys.len()).saturating_sub(old_keys);
        self.settle(steps.get(..=m).unwrap_or(&[]), sp);
        Ok(Outcome::Done)
    }
}

/// The chain entry of the longest prefix whose address is `k`.
pub(super) fn longest_at<K: Key>(index: &HashMap<Prefix<K>, u32>, k: K) -> Option<u32> {
    for len in (0..=K::BITS).rev() {
        let p = Prefix::new_masked(k, len);
        if p.addr() != k {
            break; // `k` has bits set past `len`: no shorter prefix has it as address
        }
        if let Some(&e) = index.get(&p) {
            return Some(e);
        }
    }
    None
}

/// The distinct addresses of the routes lying in `span` (routes inside it, and shorter ones
/// whose address is the span's), with the chain entry of the longest route at each.
pub(super) fn span_keys<K: Key>(
    table: &RouteMap<K>,
    span: Prefix<K>,
    index: &HashMap<Prefix<K>, u32>,
) -> Result<(Vec<K>, Vec<u32>), BuildError> {
    let mut keys: Vec<K> = Vec::new();
    let mut leaf_entry: Vec<u32> = Vec::new();
    for r in table.within(span) {
        let Some(&e) = index.get(&r.prefix) else {
            return Err(BuildError::TooLarge("LC-trie update index out of step"));
        };
        match (keys.last(), leaf_entry.last_mut()) {
            (Some(&k), Some(last)) if k == r.prefix.addr() => *last = e,
            _ => {
                keys.push(r.prefix.addr());
                leaf_entry.push(e);
            }
        }
    }
    if keys.first() != Some(&span.addr()) {
        if let Some(e) = longest_at(index, span.addr()) {
            keys.insert(0, span.addr());
            leaf_entry.insert(0, e);
        }
    }
    Ok((keys, leaf_entry))
}
