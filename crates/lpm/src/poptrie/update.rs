//! Incremental updates, made in the one copy readers use.
//!
//! As in the Poptrie paper (section 3.5), a change rebuilds the part of the trie where the
//! prefix lives into fresh blocks, switches them in with one atomic store, and lets the old
//! blocks go once no reader can be in them. Where that part is depends on the prefix length
//! `len` against the direct bits `s`:
//!
//! ```text
//!   len <= s    the prefix paints 2^(s-len) direct slots. Per slot, `Cover` remembers the
//!               longest prefix of at most s bits over it; a slot whose cover changes gets
//!               a new leaf entry (one store) if it is a leaf, is rebuilt whole if it holds a
//!               subtree (its default changed).
//!   len >  s    one slot. A leaf slot is rebuilt whole; a childless-node record is
//!               repainted into a fresh record. Below a node, the walk follows the prefix
//!               down to the node N where it ends (off < len <= off + 6), or to the deepest
//!               node on its path, and the path above N is copied. If the prefix ends in N,
//!               only its range changes: the range of N's leaves is repainted into a fresh
//!               leaf block (most IPv6 changes, a /48 in its /42 node), and the children of
//!               N in the range, if any, are rebuilt (a /32 over /48s). If the walk stopped
//!               at N for want of the child the prefix goes to, that child alone is built
//!               and added to N. Otherwise (a batch that changes which children the range
//!               needs) N's subtree is rebuilt:
//!
//!   direct[slot] ──▶ A ──▶ [B0 B1 B2] ──▶ [N0 N1]          before
//!                               │                 (B1's child block holds N = N1)
//!   direct[slot] ══▶ A' ─▶ [B0 B1'B2] ─▶ [N0 N1'] ─▶ N1's rebuilt subtree
//!                    fresh: copies of A and of each child block on the path, B1' and N1'
//!                    pointing to the new block below; then ONE store of direct[slot]
//! ```
//!
//! A lookup reads the entry once, so it walks the old path or the new one, each complete:
//! the answer comes from the table before the change or after it. The store is a `Release`
//! and lookups load entries with `Acquire`, so a lookup that sees the new entry sees the
//! blocks written before it. Sibling blocks below the copied path are shared, not copied:
//! an IPv4 change copies at most three small blocks below s = 18.
//!
//! ## A batch: one set of fresh blocks and one store per slot
//!
//! A batch's changes longer than s are taken slot by slot, in canonical order. The first
//! change below a node copies its path as above; the copies are not reachable until the
//! slot's store, so the next changes of the slot modify them where they are and copy only
//! the blocks of their own paths that are still the published ones (the writer marks the
//! node blocks it allocated for the slot). A change inside a subtree the batch already
//! rebuilt from the (final) table is skipped. Then ONE store switches the slot:
//!
//! ```text
//!   changes p, p' below one slot:   A' and [B0 B1'B2] copied once (for p); p' under B2
//!   direct[slot] ══▶ A' ─▶ [B0 B1'B2'] ─▶ ...      copies only B2's child block
//! ```
//!
//! So a lookup during the batch answers, for each slot, from the table before the batch or
//! after all its changes there, never from a mix; a leaf slot whose cover changes is also
//! stored once, after all the batch's changes to the cover. Every block the new tree stops
//! pointing to is retired once: a published block when it is copied, a block below N when
//! N is rebuilt. Changes in a childless-node record go into one new record per slot; the
//! records, covers and route-map buckets of eight such slots are prefetched together, while
//! the eight before them are worked on, so that their cache misses overlap each other and the
//! work (a batch of random changes spends most of its time waiting for memory, not
//! computing). A session reset, thousands of IPv6 changes below a few slots, copies each path
//! once instead of once per change.
//!
//! ## Retiring and reusing blocks
//!
//! A replaced block is *retired*: a lookup that loaded the old entry may still be in it. It
//! joins the current retirement group; the owner of the readers (the live FIB) closes a group
//! ([`Poptrie::retire_group`]) when it publishes a new snapshot, and reclaims it
//! ([`Poptrie::reclaim`]) once no reader holds a snapshot published before the group was
//! closed. Only then do its blocks join the free lists, whose blocks are reused at their exact
//! size (the paper uses a buddy allocator). A trie no other handle shares frees what it
//! retires at the end of each update.
//!
//! The arenas never grow (`arena.rs`): an update that finds no room, like one that runs out
//! of index space, builds the trie again in new storage twice as large, which the live FIB
//! publishes by pointer swap; readers of the old storage keep it until they let go. Twice,
//! because the batches that follow one that filled the storage tend to be like it; and a
//! later rebuild (a reload) keeps the size, so the storage is not filled and rebuilt over and
//! over.
//!
//! A node emptied by withdrawals stays a node whose leaves all hold its default until an
//! ancestor is rebuilt: the answers are exact, the shape is not minimal.
//!
//! Not incremental, rebuilt from the route map instead (in new storage): the configuration
//! without direct pointing, two-level direct pointing, and batches that change more than a
//! quarter of the table (a full load, a session reset), for which a build is cheaper than many
//! rebuilds.

use std::sync::Arc;

use super::{
    decode_leaves, emit_leaves, lnode_leafvec, upto, Builder, Kind, Node, Poptrie, INDEX, LEAF,
    LNODE, LNODE_HEADER, MAX_NEXTHOP, STRIDE,
};
use crate::key::Key;
use crate::prefix::{NextHop, Prefix, Route};
use crate::update::{LpmUpdate, RouteMap};
use crate::BuildError;

use super::PoptrieConfig;

/// Per direct-pointing slot: the next hop and length + 1 (0 = none) of the longest prefix of at
/// most `direct_bits` bits covering it.
#[derive(Clone, Debug)]
pub(super) struct Cover {
    nh: Vec<u16>,
    len1: Vec<u8>,
}

impl Cover {
    fn new<K: Key>(table: &RouteMap<K>, ds: u8) -> Result<Cover, BuildError> {
        let n = 1usize << ds;
        let mut c = Cover {
            nh: vec![0; n],
            len1: vec![0; n],
        };
        // Canonical order puts a covering prefix before the prefixes it covers.
        for r in table.iter().filter(|r| r.prefix.len() <= ds) {
            let (a, b) = slot_range(r.prefix, ds);
            c.nh[a..b].fill(leaf(r.nexthop)?);
            c.len1[a..b].fill(r.prefix.len() + 1);
        }
        Ok(c)
    }

    pub(super) fn bytes(&self) -> usize {
        self.nh.capacity() * 2 + self.len1.capacity()
    }
}

/// A next hop as a leaf, or the error that it does not fit. Checked where the update reads
/// the table, so no change reaches the trie with a truncated next hop.
fn leaf(nh: NextHop) -> Result<u16, BuildError> {
    u16::try_from(nh).map_err(|_| BuildError::NextHopTooLarge {
        nexthop: nh,
        max: MAX_NEXTHOP,
    })
}

/// Lists an update fills and empties again, kept by the writer's handle from one update to
/// the next so that an update does not allocate and grow them anew (a publication of a
/// single change did so for each of them).
#[derive(Debug, Default)]
pub(super) struct Scratch<K: Key> {
    /// The routes below a prefix ([`run_below`]).
    run: Vec<Route<K>>,
    /// `update_flat`'s lists: slots to rebuild whole, leaf slots to store, changes in
    /// childless-node slots and below nodes.
    whole: Vec<usize>,
    leaves: Vec<usize>,
    shallow: Vec<Prefix<K>>,
    deep: Vec<Prefix<K>>,
    /// `update_below`'s subtrees already rebuilt.
    done: Vec<Prefix<K>>,
}

/// Entries a kept list may have room for: a list grown past it by a large batch or rebuild
/// is dropped rather than kept for the rest of the trie's life.
const KEEP: usize = 4096;

/// `v` emptied, to be kept for reuse; a new list instead if `v` has grown past [`KEEP`].
fn kept<T>(mut v: Vec<T>) -> Vec<T> {
    if v.capacity() > KEEP {
        return Vec::new();
    }
    v.clear();
    v
}

impl<K: Key> Scratch<K> {
    /// Bytes of the room the lists keep.
    pub(super) fn bytes(&self) -> usize {
        self.run.capacity() * core::mem::size_of::<Route<K>>()
            + (self.whole.capacity() + self.leaves.capacity()) * core::mem::size_of::<usize>()
            + (self.shallow.capacity() + self.deep.capacity() + self.done.capacity())
                * core::mem::size_of::<Prefix<K>>()
    }
}

/// The routes of `table` inside `q` longer than `off`, with their next hops checked, into
/// `run` (emptied first).
fn run_below<K: Key>(
    table: &RouteMap<K>,
    q: Prefix<K>,
    off: u8,
    run: &mut Vec<Route<K>>,
) -> Result<(), BuildError> {
    run.clear();
    for r in table.within(q) {
        if r.prefix.len() > off {
            leaf(r.nexthop)?;
            run.push(r);
        }
    }
    Ok(())
}

/// Slots of childless-node records whose memory is fetched together before they are worked on.
const PREFETCH_SLOTS: usize = 8;

/// The direct slots a prefix of at most `ds` bits covers.
fn slot_range<K: Key>(p: Prefix<K>, ds: u8) -> (usize, usize) {
    let a = p.addr().chunk(0, ds);
    (a, a + (1usize << (ds - p.len())))
}

/// The prefix ending at bit `end` whose last chunk is `v`, below the bits `above` (left
/// aligned, nothing at or past the chunk): a direct slot's (nothing above), a node's child's.
fn chunk_prefix<K: Key>(above: u128, v: usize, end: u8) -> Prefix<K> {
    Prefix::new_masked(
        K::from_u128_left(above | (v as u128) << (128 - end as u32)),
        end,
    )
}

impl<K: Key> Poptrie<K> {
    fn config(&self) -> PoptrieConfig {
        PoptrieConfig {
            direct_bits: self.direct_bits,
            top_bits: self.top_bits,
        }
    }

    /// Replaces the trie by a fresh build of `table` in storage of its own (readers of the
    /// old storage keep it until they drop their handles), at least as large as the one it
    /// leaves: a reload between the batches that once filled it would otherwise shrink it
    /// back, to be filled and rebuilt again.
    fn rebuild(&mut self, table: &RouteMap<K>) -> Result<(), BuildError> {
        self.rebuild_at_least(table, self.arena_lens())
    }

    /// The capacities the node, childless-node record and leaf arenas were built with
    /// (their slots but the padding).
    fn arena_lens(&self) -> [usize; 3] {
        [
            self.mem.nodes.len(),
            self.mem.lnodes.len(),
            self.mem.leaves.len(),
        ]
        .map(|n| n.saturating_sub(super::PAD))
    }

    /// The rebuild after an update that found no room in an arena (or no index space): into
    /// arenas twice the size of the ones it filled. A batch that fills them is likely to be
    /// followed by others like it (a session's worth of changes arrives in many batches,
    /// each writing its fresh blocks before it can reuse the ones it replaced), and storage
    /// sized as before would fill again and be rebuilt again, each rebuild a full build.
    fn rebuild_larger(&mut self, table: &RouteMap<K>) -> Result<(), BuildError> {
        let grown = self.arena_lens().map(|c| c.saturating_mul(2));
        self.rebuild_at_least(table, grown)
    }

    /// A fresh build of `table` into arenas of at least `min_caps` slots, keeping the bulk
    /// lookup chosen and the retirement group count.
    fn rebuild_at_least(
        &mut self,
        table: &RouteMap<K>,
        min_caps: [usize; 3],
    ) -> Result<(), BuildError> {
        let vector = self.vector;
        let group = self.w.as_ref().map_or(0, |w| w.group);
        *self = Poptrie::build_at_least(&table.to_routes(), &self.config(), min_caps)?;
        self.vector = vector;
        if let Some(w) = self.w.as_mut() {
            w.group = group;
        }
        Ok(())
    }

    /// Whether no other handle shares the storage (then nothing retired can be in use).
    fn alone(&mut self) -> bool {
        Arc::get_mut(&mut self.mem).is_some()
    }

    /// Runs `f` with a builder over the trie's storage and the writer's state, then records
    /// the high-water marks and, when no reader shares the storage, frees what was retired.
    fn with_builder<R>(
        &mut self,
        f: impl FnOnce(&mut Builder<'_, K>) -> Result<R, BuildError>,
    ) -> Option<Result<R, BuildError>> {
        let mut w = self.w.take()?;
        let mut scratch = self.scratch.take().unwrap_or_default();
        let mem = Arc::clone(&self.mem);
        let mut b = Builder {
            mem: &mem,
            w: &mut w,
            align_records: false,
            s: &mut scratch,
        };
        let r = f(&mut b);
        drop(mem);
        self.w = Some(w);
        self.scratch = Some(scratch);
        self.publish_used();
        if self.alone() {
            if let Some(w) = self.w.as_mut() {
                w.reclaim(u64::MAX);
            }
        }
        Some(r)
    }

    /// Closes the group of blocks retired so far and returns its number: once no reader
    /// that could have loaded an entry before the group was closed is still looking up, the
    /// group may be reclaimed ([`Poptrie::reclaim`]).
    pub fn retire_group(&mut self) -> u64 {
        match self.w.as_mut() {
            Some(w) => {
                w.group += 1;
                w.group - 1
            }
            None => 0,
        }
    }

    /// Makes the blocks retired in groups up to `group` free for reuse. The caller
    /// guarantees that no lookup still runs that began before that group was closed.
    pub fn reclaim(&mut self, group: u64) {
        if let Some(w) = self.w.as_mut() {
            w.reclaim(group);
        }
    }

    /// Blocks retired and not reclaimed yet (for tests and statistics).
    pub fn retired_blocks(&self) -> usize {
        self.w.as_ref().map_or(0, |w| w.retired.len())
    }
}

impl<K: Key> Builder<'_, K> {
    /// The incremental path (flat direct pointing of at least one bit).
    fn update_flat(
        &mut self,
        ds: u8,
        cover: &mut Cover,
        fresh: bool,
        table: &RouteMap<K>,
        changed: &[Prefix<K>],
    ) -> Result<(), BuildError> {
        // Slots to rebuild whole, and prefixes to rebuild below a node.
        let mut whole = std::mem::take(&mut self.s.whole);
        let mut deep = std::mem::take(&mut self.s.deep);
        // Prefixes within one stride below the direct bits, in childless-node slots.
        let mut shallow = std::mem::take(&mut self.s.shallow);
        // Leaf slots whose cover changed: stored once, after all the batch's changes to the
        // cover (an earlier store could show one change of the batch without the next).
        let mut leaves = std::mem::take(&mut self.s.leaves);
        let repaint = |b: &Self, s: usize, whole: &mut Vec<usize>, leaves: &mut Vec<usize>| {
            if b.direct(s) & LEAF != 0 {
                leaves.push(s);
            } else {
                whole.push(s);
            }
        };
        for &p in changed {
            let len = p.len();
            if len > ds {
                let s = p.addr().chunk(0, ds);
                let e = self.direct(s);
                if e & LEAF != 0 || (e & LNODE != 0 && len > ds + STRIDE) {
                    whole.push(s);
                } else if e & LNODE != 0 {
                    shallow.push(p);
                } else {
                    deep.push(p);
                }
                continue;
            }
            let (a, z) = slot_range(p, ds);
            if fresh {
                // The cover was made from the changed table: every slot may differ.
                for s in a..z {
                    repaint(self, s, &mut whole, &mut leaves);
                }
                continue;
            }
            let (nh, l1) = match table.get(&p) {
                Some(nh) => (leaf(nh)?, len + 1),
                None => match table.parent(p) {
                    Some(r) => (leaf(r.nexthop)?, r.prefix.len() + 1),
                    None => (0, 0),
                },
            };
            for s in a..z {
                // Slots under a longer prefix of the direct range keep it; the others take
                // the prefix (announce) or what covers it (withdraw).
                let mine = cover.len1[s] <= len + 1;
                if mine && (cover.nh[s] != nh || cover.len1[s] != l1) {
                    cover.nh[s] = nh;
                    cover.len1[s] = l1;
                    repaint(self, s, &mut whole, &mut leaves);
                }
            }
        }
        whole.sort_unstable();
        whole.dedup();
        leaves.sort_unstable();
        leaves.dedup();
        for &s in &leaves {
            if whole.binary_search(&s).is_err() {
                self.set_direct(s, LEAF | cover.nh[s] as u32);
            }
        }
        for &s in &whole {
            self.rebuild_slot(ds, cover, table, s)?;
        }
        // The rest by direct slot: each slot's changes are built into the same fresh blocks
        // and switched in with one store.
        // In canonical order (address, then length), so a slot's changes are together and
        // a prefix comes before those it covers.
        shallow.sort_unstable();
        shallow.dedup();
        deep.sort_unstable();
        deep.dedup();
        let slot = |p: &Prefix<K>| p.addr().chunk(0, ds);
        // The records, covers and routes of a few slots are fetched together, one group
        // ahead of the group being worked on: their cache misses overlap each other and the
        // work, instead of coming one after the other. `ahead` walks the same slots a group
        // of `PREFETCH_SLOTS` before the loop (no list of them is made).
        let fetch = |b: &Self, (s, group): (usize, &[Prefix<K>])| {
            let e = b.direct(s);
            if e & (LEAF | LNODE) == LNODE {
                // The header and the first leaves, and the line after (a record of more
                // than a few distinct leaves crosses into it).
                let at = b.mem.lnodes.as_ptr().wrapping_add((e & INDEX) as usize);
                crate::prefetch(at);
                crate::prefetch(at.wrapping_add(32));
            }
            crate::prefetch(cover.nh.as_ptr().wrapping_add(s));
            if let Some(p) = group.first() {
                table.prefetch(p);
            }
        };
        let mut ahead = by_slot(&shallow, slot);
        for g in ahead.by_ref().take(PREFETCH_SLOTS) {
            fetch(self, g);
        }
        for (i, (s, group)) in by_slot(&shallow, slot).enumerate() {
            if i % PREFETCH_SLOTS == 0 {
                for g in ahead.by_ref().take(PREFETCH_SLOTS) {
                    fetch(self, g);
                }
            }
            if whole.binary_search(&s).is_err() {
                self.update_lnode(ds, cover, table, group, s)?;
            }
        }
        // `ahead` borrows `shallow`, which is given back to the builder below.
        drop(ahead);
        for (s, group) in by_slot(&deep, slot) {
            if whole.binary_search(&s).is_err() {
                self.update_below(ds, cover, table, group, s)?;
            }
        }
        self.s.whole = kept(whole);
        self.s.leaves = kept(leaves);
        self.s.shallow = kept(shallow);
        self.s.deep = kept(deep);
        Ok(())
    }

    /// Repaints, for prefixes ending within the stride below the direct bits, the slots they
    /// cover in a childless-node record, without reading the rest of the direct slot's
    /// routes: each prefix's slots take the route just above it (or the slot's cover), then
    /// the prefix and the routes inside it. That makes each prefix's range final whatever
    /// the order, so all of `changed` go into one new record in a fresh block. It stays a
    /// record even when all its slots agree with the cover: a leaf entry promises that no
    /// route of the slot is longer than the direct bits, which a route carrying the cover's
    /// own next hop would break.
    fn update_lnode(
        &mut self,
        ds: u8,
        cover: &Cover,
        table: &RouteMap<K>,
        changed: &[Prefix<K>],
        s: usize,
    ) -> Result<(), BuildError> {
        let old = self.direct(s);
        if old & LEAF != 0 || old & LNODE == 0 {
            return self.rebuild_slot(ds, cover, table, s);
        }
        let o = (old & INDEX) as usize;
        let lv = lnode_leafvec(&self.mem.lnodes, o);
        let mut slots = decode_leaves(&self.mem.lnodes, o + LNODE_HEADER, lv, 0);
        for &p in changed {
            if paint_range(&mut slots, table, p, ds, cover.nh[s])? != 0 {
                // A route that needs a child: cannot happen while the slot is a childless
                // node; rebuild it whole.
                return self.rebuild_slot(ds, cover, table, s);
            }
        }
        let mut rec = [0u16; LNODE_HEADER + 64];
        let (leafvec, n) = emit_leaves(&slots, 0, &mut rec[LNODE_HEADER..]);
        for (k, w) in rec[..LNODE_HEADER].iter_mut().enumerate() {
            *w = (leafvec >> (16 * k)) as u16;
        }
        self.replace_record(s, &rec[..LNODE_HEADER + n])
    }

    /// Puts record `rec` in place of the childless-node record of direct slot `s`: written
    /// to a fresh block, switched in by one store of the entry; the old record is retired.
    fn replace_record(&mut self, s: usize, rec: &[u16]) -> Result<(), BuildError> {
        let old = self.direct(s);
        let at = self.alloc_record(rec)?;
        self.set_direct(s, LNODE | at as u32);
        self.retire_entry(old);
        Ok(())
    }

    /// Rebuilds direct slot `s` whole from the table.
    fn rebuild_slot(
        &mut self,
        ds: u8,
        cover: &Cover,
        table: &RouteMap<K>,
        s: usize,
    ) -> Result<(), BuildError> {
        let old = self.direct(s);
        let e = self.slot_from_table(ds, cover, table, s)?;
        self.set_direct(s, e);
        self.retire_entry(old);
        Ok(())
    }

    /// Applies `changed`, prefixes longer than the direct bits in direct slot `s`, which
    /// holds a node: each one rebuilds the subtree of the node N where it ends or of the
    /// deepest node on its path, below a copy of the path above N (see the module doc). The
    /// copies are fresh blocks no reader sees until the slot's one store at the end, so a
    /// later change of the slot that passes through them changes them where they are: the
    /// path is copied once per slot and batch, not once per change.
    fn update_below(
        &mut self,
        ds: u8,
        cover: &Cover,
        table: &RouteMap<K>,
        changed: &[Prefix<K>],
        s: usize,
    ) -> Result<(), BuildError> {
        let old = self.direct(s);
        self.w.new_round();
        self.w.marking = true;
        let mut cur = old;
        let mut r = Ok(());
        // Subtrees rebuilt and ranges repainted from the table so far, innermost last: a
        // change inside one (and longer than its top) is already there.
        let mut done = std::mem::take(&mut self.s.done);
        for &p in changed {
            while done.last().is_some_and(|q| !q.covers(&p)) {
                done.pop();
            }
            if done.last().is_some_and(|q| p.len() > q.len()) {
                continue;
            }
            if cur & (LEAF | LNODE) != 0 {
                // A change of the batch left the slot without routes longer than the direct
                // bits: the rest of the slot is rebuilt from the table.
                r = self.slot_from_table(ds, cover, table, s).map(|e| {
                    self.retire_entry(cur);
                    cur = e;
                });
                break;
            }
            match self.change_below(ds, cover.nh[s], table, p, cur as usize) {
                Ok((e, q)) => {
                    cur = e;
                    done.push(q);
                }
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
        self.w.marking = false;
        self.s.done = kept(done);
        r?;
        // One store switches the slot from the old blocks (retired above, as each was
        // replaced in the fresh tree) to the new ones.
        if cur != old {
            self.set_direct(s, cur);
        }
        Ok(())
    }

    /// One change below the node `root` of a direct slot whose new blocks are being built
    /// (`self.w.stamp` marks them); returns the slot's new entry and the prefix whose routes
    /// were all read from the table: the change's own when only its range was repainted,
    /// the new child's when one was added, else that of the node whose subtree was rebuilt.
    /// Every block the fresh tree stops pointing to is retired once: a block of the published
    /// tree when it is copied, any block below N when N is rebuilt.
    fn change_below(
        &mut self,
        ds: u8,
        slot_default: u16,
        table: &RouteMap<K>,
        p: Prefix<K>,
        root: usize,
    ) -> Result<(u32, Prefix<K>), BuildError> {
        let root = self.fresh_block(root, 1)?;
        let mut idx = root;
        let mut off = ds;
        while p.len() > off + STRIDE {
            let mut n = self.node(idx);
            let v = p.addr().chunk(off, STRIDE);
            if n.vector & (1u64 << v) == 0 {
                break;
            }
            let rank = (n.vector & super::upto(v)).count_ones() as usize - 1;
            // The child block of a fresh node may still be the published one.
            let base = self.fresh_block(n.base1 as usize, n.vector.count_ones() as usize)?;
            if base != n.base1 as usize {
                n.base1 = base as u32;
                self.set_node(idx, n);
            }
            idx = n.base1 as usize + rank;
            off += STRIDE;
        }
        if off < p.len() && p.len() <= off + STRIDE && self.repaint_in_node(table, p, idx, off)? {
            return Ok((root as u32, p));
        }
        if p.len() > off + STRIDE {
            // The walk stopped at a node without a child for `p`.
            let q = self.add_child(table, p, idx, off)?;
            return Ok((root as u32, q));
        }
        let q = Prefix::new_masked(p.addr(), off);
        self.with_run_below(table, q, off, |b, run| {
            if run.is_empty() && off == ds {
                // Nothing longer than the direct bits is left in the slot.
                b.retire_entry(root as u32);
                return Ok((LEAF | slot_default as u32, q));
            }
            let default = b.w.ndef.get(idx).copied().unwrap_or(slot_default);
            b.retire_below(idx);
            b.fill(run, idx, off, default)?;
            Ok((root as u32, q))
        })
    }

    /// A change `p` ending in node `idx` (at bit `off`, in a fresh block): the node's leaves
    /// are decoded, `p`'s range repainted from the table ([`paint_range`]) and written to a
    /// new leaf block, and the children in the range, whose default is the route over them
    /// that may have changed, are rebuilt from the table. The node's other children and the
    /// routes of the node outside `p` are not read. (Rebuilding the whole node instead, a
    /// withdrawn /32 with routes below it rebuilt every /32 of its /30 node; on the IPv6
    /// update trace, repainting only the range cut 10-16 % of the instructions per change.)
    /// Returns false, having changed nothing, when the table asks for other children in the
    /// range than the node has (a batch that also announced or withdrew a longer route
    /// there): the caller then rebuilds the node.
    fn repaint_in_node(
        &mut self,
        table: &RouteMap<K>,
        p: Prefix<K>,
        idx: usize,
        off: u8,
    ) -> Result<bool, BuildError> {
        let end = off + STRIDE;
        let n = self.node(idx);
        let c = p.addr().chunk(off, STRIDE);
        let width = 1usize << (end - p.len());
        let range = upto(c + width - 1) & !(upto(c) >> 1);
        let mut slots = decode_leaves(&self.mem.leaves, n.base0 as usize, n.leafvec, n.vector);
        let default = self.w.ndef.get(idx).copied().unwrap_or(0);
        let children = paint_range(&mut slots, table, p, off, default)?;
        if children != n.vector & range {
            return Ok(false);
        }
        // The children are rebuilt where they are: in a copy of their block.
        let base1 = if children != 0 {
            self.fresh_block(n.base1 as usize, n.vector.count_ones() as usize)?
        } else {
            n.base1 as usize
        };
        // A child holds routes longer than `end`, so `end` is inside the address.
        let top = p.addr().to_u128_left() & !(u128::MAX >> off);
        let mut m = children;
        while m != 0 {
            let v = m.trailing_zeros() as usize;
            m &= m - 1;
            let k = base1 + (n.vector & upto(v)).count_ones() as usize - 1;
            self.with_run_below(table, chunk_prefix(top, v, end), end, |b, run| {
                b.retire_below(k);
                b.fill(run, k, end, slots[v])
            })?;
        }
        let (base0, leafvec) = self.alloc_leaves(&slots, n.vector)?;
        self.retire_leaves(&n);
        self.set_node(
            idx,
            Node {
                base0,
                leafvec,
                base1: base1 as u32,
                ..n
            },
        );
        Ok(true)
    }

    /// A change `p` below node `idx` (at bit `off`, in a fresh block), which has no child
    /// where `p` goes: gives the node that child, built from the routes of the child's prefix
    /// `q` (the new ones: none were there), over the node's leaf for that slot as its default.
    /// The node gets a new child block, with its other children copied (their subtrees are
    /// shared), and new leaves without that slot; nothing else of the node is read. Returns
    /// `q`, whose routes were all read from the table. If `q` holds no route (a withdrawal
    /// of a route that was not there), nothing changes.
    fn add_child(
        &mut self,
        table: &RouteMap<K>,
        p: Prefix<K>,
        idx: usize,
        off: u8,
    ) -> Result<Prefix<K>, BuildError> {
        let end = off + STRIDE;
        let q = Prefix::new_masked(p.addr(), end);
        self.with_run_below(table, q, end, |b, run| {
            if run.is_empty() {
                return Ok(());
            }
            let n = b.node(idx);
            let slots = decode_leaves(&b.mem.leaves, n.base0 as usize, n.leafvec, n.vector);
            let v = p.addr().chunk(off, STRIDE);
            let vector = n.vector | 1u64 << v;
            let (base0, leafvec) = b.alloc_leaves(&slots, vector)?;
            let nc = n.vector.count_ones() as usize;
            let blk = b.alloc_nodes(nc + 1)?;
            let rank = (vector & upto(v)).count_ones() as usize - 1;
            let old = n.base1 as usize;
            b.copy_nodes(old, blk, rank);
            b.copy_nodes(old + rank, blk + rank + 1, nc - rank);
            b.fill(run, blk + rank, end, slots[v])?;
            b.retire_leaves(&n);
            b.retire(Kind::Nodes, old, nc);
            b.set_node(
                idx,
                Node {
                    vector,
                    base0,
                    base1: blk as u32,
                    leafvec,
                },
            );
            Ok(())
        })?;
        Ok(q)
    }

    /// Whether the node block starting at `at` was allocated for the changes of the direct
    /// slot being updated (and is not reachable by readers yet).
    fn is_fresh(&self, at: usize) -> bool {
        self.w.marking && self.w.stamp.get(at) == Some(&self.w.round)
    }

    /// The node block of `n` nodes at `at` if it is fresh, else a fresh copy of it, the
    /// published one retired: where a change may write the block's nodes.
    #[inline(always)]
    fn fresh_block(&mut self, at: usize, n: usize) -> Result<usize, BuildError> {
        if self.is_fresh(at) {
            return Ok(at);
        }
        let blk = self.alloc_nodes(n)?;
        self.copy_nodes(at, blk, n);
        self.retire(Kind::Nodes, at, n);
        Ok(blk)
    }

    /// Copies nodes `from..from + n` (and their defaults) to `to..`, a fresh block: one copy
    /// of the block, not a load and a store per node (a change copies the child block of
    /// every node on its path, up to 64 nodes each).
    fn copy_nodes(&mut self, from: usize, to: usize, n: usize) {
        // SAFETY: `to..to + n` is a block this builder allocated and has not published (as
        // in `set_node`); the builder is the only writer, so nobody writes `from..from + n`.
        unsafe {
            self.mem.nodes.copy_block(from, to, n);
            if self.mem.mirrored() {
                self.mem.words.copy_block(from, to, n);
            }
        }
        // Every node comes from `alloc_nodes`, which grows the defaults to cover it, so both
        // ranges are in them; the check only keeps a broken trie from panicking here.
        let d = &mut self.w.ndef;
        if from + n <= d.len() && to + n <= d.len() {
            d.copy_within(from..from + n, to);
        }
    }

    /// The entry of direct slot `s` built from the table in fresh blocks (not stored).
    fn slot_from_table(
        &mut self,
        ds: u8,
        cover: &Cover,
        table: &RouteMap<K>,
        s: usize,
    ) -> Result<u32, BuildError> {
        self.with_run_below(table, chunk_prefix::<K>(0, s, ds), ds, |b, run| {
            if run.is_empty() {
                Ok(LEAF | cover.nh[s] as u32)
            } else {
                b.slot_entry(run, ds, cover.nh[s])
            }
        })
    }

    /// Runs `f` on the routes of `table` inside `q` longer than `off` ([`run_below`]), read
    /// into the kept list, which goes back to the scratch afterwards.
    fn with_run_below<R>(
        &mut self,
        table: &RouteMap<K>,
        q: Prefix<K>,
        off: u8,
        f: impl FnOnce(&mut Self, &[Route<K>]) -> Result<R, BuildError>,
    ) -> Result<R, BuildError> {
        let mut run = std::mem::take(&mut self.s.run);
        let r = run_below(table, q, off, &mut run).and_then(|()| f(self, &run));
        self.s.run = kept(run);
        r
    }
}

/// Repaints, in the 64 slots of the node at bit `off`, the range of `p` (a prefix ending in
/// that node's stride): the route just above `p` inside the node (or `default`, the node's
/// own default) first, unless `p` itself is a route, then `p` and the routes inside it, in
/// canonical order, so the range is final whatever was there. Routes inside `p` longer than
/// the stride are left out: returns the slots they are in (the children the range needs),
/// whose entries hold the default each such child takes.
fn paint_range<K: Key>(
    slots: &mut [u16; 64],
    table: &RouteMap<K>,
    p: Prefix<K>,
    off: u8,
    default: u16,
) -> Result<u64, BuildError> {
    let end = off + STRIDE;
    let mut inside = table.within(p).peekable();
    // A route at `p` covers its whole range: what is above it shows nowhere.
    if inside.peek().is_none_or(|r| r.prefix != p) {
        let above = match table.covering(p, off + 1..p.len()) {
            Some(r) => leaf(r.nexthop)?,
            None => default,
        };
        let c = p.addr().chunk(off, STRIDE);
        slots[c..c + (1usize << (end - p.len()))].fill(above);
    }
    let mut children = 0u64;
    for r in inside {
        let c = r.prefix.addr().chunk(off, STRIDE);
        if r.prefix.len() > end {
            children |= 1u64 << c;
            continue;
        }
        slots[c..c + (1usize << (end - r.prefix.len()))].fill(leaf(r.nexthop)?);
    }
    Ok(children)
}

/// Each direct slot of `changed` (sorted by slot) with its changes.
fn by_slot<'a, K: Key>(
    changed: &'a [Prefix<K>],
    slot: impl Fn(&Prefix<K>) -> usize + 'a,
) -> impl Iterator<Item = (usize, &'a [Prefix<K>])> + 'a {
    let mut rest = changed;
    core::iter::from_fn(move || {
        let s = slot(rest.first()?);
        let n = rest.iter().take_while(|p| slot(p) == s).count();
        let (group, tail) = rest.split_at(n);
        rest = tail;
        Some((s, group))
    })
}

impl<K: Key> LpmUpdate<K> for Poptrie<K> {
    const MAX_NEXTHOP: NextHop = MAX_NEXTHOP;

    fn update(&mut self, table: &RouteMap<K>, changed: &[Prefix<K>]) -> Result<(), BuildError> {
        let ds = self.direct_bits;
        let bulk = changed.len() > 1024 && changed.len() * 4 > table.len();
        if ds == 0 || self.top_bits != 0 || bulk || self.w.is_none() {
            return self.rebuild(table);
        }
        let cover = self.w.as_mut().and_then(|w| w.cover.take());
        let (mut cover, fresh) = match cover {
            Some(c) => (c, false),
            None => (Box::new(Cover::new(table, ds)?), true),
        };
        let r = self.with_builder(|b| {
            let r = b.update_flat(ds, &mut cover, fresh, table, changed);
            b.w.cover = Some(cover);
            r
        });
        self.routes = table.len();
        match r {
            Some(Ok(())) => Ok(()),
            // Out of room or index space half-way: a fresh, larger build either fits or
            // says so.
            Some(Err(_)) => self.rebuild_larger(table),
            None => self.rebuild(table),
        }
    }

    /// Childless-node records of a prefix one stride below the direct bits are copied from
    /// `src` (the common IPv4 change, a record of at most 68 half-words); everything else is
    /// recomputed by `update`.
    fn update_from(
        &mut self,
        src: &Self,
        table: &RouteMap<K>,
        changed: &[Prefix<K>],
    ) -> Result<(), BuildError> {
        let ds = self.direct_bits;
        let same = ds == src.direct_bits && self.top_bits == 0 && src.top_bits == 0;
        let prepared = self.w.as_ref().is_some_and(|w| w.cover.is_some());
        if !same || ds == 0 || !prepared || self.mem.direct.len() != src.mem.direct.len() {
            return self.update(table, changed);
        }
        let mut rest = Vec::new();
        let r = self.with_builder(|b| {
            for &p in changed {
                let s = p.addr().chunk(0, ds);
                let (e, se) = (b.direct(s), src.entry(s));
                let shallow = p.len() > ds && p.len() <= ds + STRIDE;
                let records = e & LEAF == 0 && e & LNODE != 0 && se & LEAF == 0 && se & LNODE != 0;
                if !(shallow && records) {
                    rest.push(p);
                    continue;
                }
                let so = (se & INDEX) as usize;
                let n = lnode_leafvec(&src.mem.lnodes, so).count_ones() as usize;
                if so + LNODE_HEADER + n > src.mem.lnodes.len() {
                    rest.push(p);
                    continue;
                }
                let mut rec = [0u16; LNODE_HEADER + 64];
                for (k, v) in rec[..LNODE_HEADER + n].iter_mut().enumerate() {
                    *v = src.mem.lnodes.get(so + k);
                }
                b.replace_record(s, &rec[..LNODE_HEADER + n])?;
            }
            Ok(())
        });
        match r {
            Some(Ok(())) => {}
            Some(Err(_)) => return self.rebuild_larger(table),
            None => return self.rebuild(table),
        }
        self.routes = table.len();
        if rest.is_empty() {
            Ok(())
        } else {
            self.update(table, &rest)
        }
    }

    fn prepare(&mut self, table: &RouteMap<K>) {
        let ds = self.direct_bits;
        if let Some(w) = self.w.as_mut() {
            if w.cover.is_none() && ds > 0 && self.top_bits == 0 {
                // A table the trie could not hold was refused by the build; nothing to
                // prepare.
                w.cover = Cover::new(table, ds).ok().map(Box::new);
            }
        }
    }

    fn share(&self) -> Option<Self> {
        Some(Poptrie::share(self))
    }

    fn retire_group(&mut self) -> u64 {
        Poptrie::retire_group(self)
    }

    fn reclaim(&mut self, group: u64) {
        Poptrie::reclaim(self, group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prefix::NO_ROUTE;
    use crate::testkit::{check_updates, updates_and_probes, v4, v6, xorshift, POOL4, POOL6};
    use crate::{Lpm, LpmBuild};
    use proptest::prelude::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_block_is_fresh_only_in_the_round_that_made_it_even_after_the_count_wraps() {
        let mut w = super::super::Writer::default();
        w.new_round();
        w.stamp = vec![0; 8];
        w.stamp[5] = w.round;
        let first = w.round;
        w.new_round();
        assert_ne!(w.round, first);
        assert_ne!(w.stamp[5], w.round);
        // The last round before the wrap stamps index 3; index 5 keeps round 1's stamp, the
        // round the count comes back to: the wrap must clear both.
        w.round = u16::MAX - 1;
        w.new_round();
        w.stamp[3] = w.round;
        w.stamp[5] = 1;
        w.new_round();
        assert_eq!(w.round, 1);
        assert!(w.stamp.iter().all(|&s| s == 0));
    }

    #[test]
    fn a_kept_list_comes_back_empty_and_only_a_small_one_keeps_its_room() {
        let mut small: Vec<u32> = Vec::with_capacity(KEEP);
        small.extend(0..100);
        let small = kept(small);
        assert!(small.is_empty());
        assert!(small.capacity() >= KEEP);
        let mut big: Vec<u32> = Vec::with_capacity(KEEP + 1);
        big.extend(0..10);
        let big = kept(big);
        assert!(big.is_empty());
        assert_eq!(big.capacity(), 0);
    }

    #[test]
    fn an_update_that_fills_the_storage_rebuilds_it_twice_as_large() {
        let cfg = PoptrieConfig::for_family::<u128>();
        let p48 = |i: u128| Prefix::new_masked((0x2001_0db8u128 << 96) | (i << 80), 48);
        let mut table = RouteMap::new();
        for i in 0..4096 {
            table.set(p48(i), 1 + (i % 7) as NextHop);
        }
        let mut p = Poptrie::build(&table.to_routes(), &cfg).unwrap();
        // While another handle shares the storage, nothing retired is reused: every round
        // takes fresh room until there is none.
        let reader = p.share();
        let before = p.arena_lens();
        let storage = Arc::as_ptr(&p.mem);
        let mut round = 0u32;
        while Arc::as_ptr(&p.mem) == storage {
            round += 1;
            assert!(round < 1000, "the storage never filled");
            // An eighth of the routes per round: a change, not a reload (no bulk rebuild).
            let changed: Vec<_> = (0..512)
                .map(|k| p48((k * 8 + u128::from(round)) % 4096))
                .collect();
            for q in &changed {
                table.set(*q, 1 + (round % 9) as NextHop);
            }
            p.update(&table, &changed).unwrap();
        }
        let after = p.arena_lens();
        for k in 0..3 {
            assert!(
                after[k] >= 2 * before[k],
                "arena {k}: {} slots, was {}",
                after[k],
                before[k]
            );
        }
        let fresh = Poptrie::build(&table.to_routes(), &cfg).unwrap();
        for i in 0..4096u128 {
            let a = (0x2001_0db8u128 << 96) | (i << 80) | 1;
            assert_eq!(p.lookup(a), fresh.lookup(a));
        }
        // The old storage keeps answering for the reader that holds it.
        assert_eq!(Arc::as_ptr(&reader.mem), storage);
        // A reload (a batch of more than a quarter of the table) builds anew, no smaller.
        let grown = Arc::as_ptr(&p.mem);
        let all: Vec<_> = (0..4096).map(p48).collect();
        for q in &all {
            table.set(*q, 3);
        }
        p.update(&table, &all).unwrap();
        assert_ne!(Arc::as_ptr(&p.mem), grown, "a reload builds new storage");
        assert_eq!(p.arena_lens(), after);
        assert_eq!(p.lookup((0x2001_0db8u128 << 96) | (5 << 80)), 3);
    }

    fn configs() -> Vec<PoptrieConfig> {
        let mut v: Vec<PoptrieConfig> = [0u8, 1, 6, 16, 18].map(PoptrieConfig::flat).to_vec();
        v.push(PoptrieConfig {
            direct_bits: 16,
            top_bits: 8,
        });
        v
    }

    #[test]
    fn nested_changes_rebuild_only_what_they_touch() {
        let cfg = PoptrieConfig::default();
        let table = [
            v4([0, 0, 0, 0], 0, 1),
            v4([10, 0, 0, 0], 8, 2),
            v4([10, 1, 0, 0], 16, 3),
            v4([10, 1, 2, 0], 24, 4),
            v4([10, 1, 2, 128], 25, 5),
            v4([10, 1, 2, 129], 32, 6),
        ];
        let mut m = RouteMap::from_routes(&table);
        let mut p = Poptrie::build(&table, &cfg).unwrap();
        p.prepare(&m);
        let a = 0x0a01_0281u32; // 10.1.2.129
        let steps: [(Route<u32>, [NextHop; 3]); 6] = [
            // (change, answers for 10.1.2.129, 10.1.2.130, 10.1.3.1)
            (v4([10, 1, 2, 129], 32, 0), [5, 5, 3]),
            (v4([10, 1, 2, 128], 25, 0), [4, 4, 3]),
            (v4([10, 1, 0, 0], 16, 9), [4, 4, 9]),
            (v4([10, 1, 2, 0], 24, 0), [9, 9, 9]),
            (v4([10, 1, 0, 0], 16, 0), [2, 2, 2]),
            (v4([10, 1, 2, 130], 31, 7), [2, 7, 2]),
        ];
        for (r, want) in steps {
            m.set(r.prefix, r.nexthop);
            p.update(&m, &[r.prefix]).unwrap();
            let got = [p.lookup(a), p.lookup(a + 1), p.lookup(0x0a01_0301)];
            assert_eq!(got, want, "after {:?}", r);
        }
        // Everything back out: only the default route answers, and blocks were reused (the
        // update's kept lists, which a /8 fills with a thousand slots, aside).
        let before = p.memory_bytes() - p.scratch_bytes();
        for r in m.to_routes() {
            if !r.prefix.is_empty() {
                m.set(r.prefix, 0);
                p.update(&m, &[r.prefix]).unwrap();
            }
        }
        assert_eq!(p.lookup(a), 1);
        assert!(p.memory_bytes() - p.scratch_bytes() <= before + 4096);
    }

    /// A /24 with the next hop of the /18 over it leaves the record uniform once its sibling
    /// goes; withdrawing the /18 afterwards must still leave the /24 answering.
    #[test]
    fn a_uniform_record_is_not_a_leaf() {
        let table = [
            v4([213, 235, 192, 0], 18, 34),
            v4([213, 235, 196, 0], 24, 16),
            v4([213, 235, 234, 0], 24, 34),
        ];
        let mut m = RouteMap::from_routes(&table);
        let mut p = Poptrie::build(&table, &PoptrieConfig::default()).unwrap();
        p.prepare(&m);
        for r in [table[1], table[0]] {
            m.set(r.prefix, 0);
            p.update(&m, &[r.prefix]).unwrap();
        }
        assert_eq!(p.lookup(u32::from_be_bytes([213, 235, 234, 9])), 34);
        assert_eq!(p.lookup(u32::from_be_bytes([213, 235, 196, 9])), 0);
    }

    /// Two copies: one updated from the table, the other brought level by copying from it,
    /// then the roles swap; both always answer as a fresh build.
    fn check_copy_from<K: Key>((table, batches, addrs): &crate::testkit::UpdateCase<K>) {
        let cfg = PoptrieConfig::default();
        let mut m = RouteMap::from_routes(table);
        let mut a = Poptrie::build(table, &cfg).unwrap();
        let mut b = a.clone();
        a.prepare(&m);
        b.prepare(&m);
        for (i, batch) in batches.iter().enumerate() {
            let changed: Vec<Prefix<K>> = batch.iter().map(|r| r.prefix).collect();
            for r in batch {
                m.set(r.prefix, r.nexthop);
            }
            a.update(&m, &changed).unwrap();
            b.update_from(&a, &m, &changed).unwrap();
            let routes = m.to_routes();
            crate::testkit::check_against_golden(&a, &routes, addrs, &format!("updated, {i}"));
            crate::testkit::check_against_golden(&b, &routes, addrs, &format!("copied, {i}"));
            core::mem::swap(&mut a, &mut b);
        }
    }

    /// In place under readers: a reader's handle, taken before each batch, answers as a
    /// fresh build after it (it shares the storage); retired blocks are reused only when the
    /// handle of two batches before is dropped, and meanwhile stay as they were.
    fn check_in_place<K: Key>((table, batches, addrs): &crate::testkit::UpdateCase<K>) {
        let cfg = PoptrieConfig::default();
        let mut m = RouteMap::from_routes(table);
        let mut w = Poptrie::build(table, &cfg).unwrap();
        w.prepare(&m);
        let mut held: std::collections::VecDeque<(Poptrie<K>, u64, Vec<NextHop>)> =
            Default::default();
        for (i, batch) in batches.iter().enumerate() {
            let changed: Vec<Prefix<K>> = batch.iter().map(|r| r.prefix).collect();
            for r in batch {
                m.set(r.prefix, r.nexthop);
            }
            let view = w.share();
            let mem = Arc::as_ptr(&w.mem);
            w.update(&m, &changed).unwrap();
            let routes = m.to_routes();
            crate::testkit::check_against_golden(&w, &routes, addrs, &format!("writer, {i}"));
            if Arc::as_ptr(&w.mem) == mem {
                crate::testkit::check_against_golden(&view, &routes, addrs, &format!("view {i}"));
            }
            // What the view's storage holds now, to compare once more blocks were retired.
            let answers: Vec<NextHop> = addrs.iter().map(|&a| view.lookup(a)).collect();
            let group = w.retire_group();
            held.push_back((view, group, answers));
            if held.len() > 2 {
                let (old, g, _) = held.pop_front().unwrap();
                drop(old);
                w.reclaim(g);
            }
        }
        // A rebuild gives new storage; the old keeps its last answers for its readers.
        for (view, _, answers) in &held {
            if !Arc::ptr_eq(&view.mem, &w.mem) {
                let now: Vec<NextHop> = addrs.iter().map(|&a| view.lookup(a)).collect();
                assert_eq!(&now, answers, "old storage changed after a rebuild");
            }
        }
    }

    /// The offsets and sizes (in slots) of the childless-node records `p` reaches.
    fn records(p: &Poptrie<u32>) -> Vec<(usize, usize)> {
        p.mem
            .direct
            .iter()
            .map(|d| d.load(Ordering::Relaxed))
            .filter(|e| e & (LEAF | LNODE) == LNODE)
            .map(|e| {
                let o = (e & INDEX) as usize;
                let n = lnode_leafvec(&p.mem.lnodes, o).count_ones() as usize;
                (o, LNODE_HEADER + n)
            })
            .collect()
    }

    /// Every record of up to a cache line lies in one line, and a longer one in as few lines
    /// as its size needs (the arena starts at a line).
    fn check_record_lines(p: &Poptrie<u32>, what: &str) {
        let line = super::super::LINE_SLOTS;
        let recs = records(p);
        assert!(recs.len() > 100, "{what}: {} records", recs.len());
        for (o, size) in recs {
            let lines = (o % line + size).div_ceil(line);
            assert_eq!(
                lines,
                size.div_ceil(line),
                "{what}: record of {size} at {o}"
            );
        }
    }

    /// /18 blocks of 10.0.0.0/8 holding 1..=64 of their /24s, with next hops that change
    /// along the block: records of every size from 5 to 68 slots.
    fn record_table() -> Vec<Route<u32>> {
        let mut routes = Vec::new();
        for block in 0..256u32 {
            let n = 1 + (block * 37) % 64;
            for k in 0..n {
                let addr = (10 << 24) | (block << 14) | (k << 8);
                routes.push(Route::new(
                    Prefix::new_masked(addr, 24),
                    1 + (k + block) % 5,
                ));
            }
        }
        routes
    }

    /// A build places records across no more lines than they need; updates pack what they
    /// write (see the module doc of `poptrie`), and the next build places them again.
    #[test]
    fn builds_place_records_across_no_more_lines_than_they_need() {
        let table = record_table();
        let mut w = Poptrie::build(&table, &PoptrieConfig::default()).unwrap();
        check_record_lines(&w, "built");
        let mut m = RouteMap::from_routes(&table);
        w.prepare(&m);
        let mut next = xorshift(0x5eed);
        for _ in 0..2000 {
            let x = next();
            let (block, k) = ((x >> 8) as u32 % 256, (x >> 20) as u32 % 64);
            let prefix = Prefix::new_masked((10 << 24) | (block << 14) | (k << 8), 24);
            m.set(
                prefix,
                if x.is_multiple_of(3) {
                    NO_ROUTE
                } else {
                    1 + (x >> 40) as u32 % 9
                },
            );
            w.update(&m, &[prefix]).unwrap();
            let g = w.retire_group();
            w.reclaim(g);
        }
        for block in 0..256u32 {
            for k in 0..64u32 {
                let addr = (10 << 24) | (block << 14) | (k << 8) | 7;
                let want = m.lookup(addr).map_or(NO_ROUTE, |r| r.nexthop);
                assert_eq!(w.lookup(addr), want, "{addr:#x}");
            }
        }
        w.rebuild(&m).unwrap();
        check_record_lines(&w, "rebuilt");
    }

    #[test]
    fn retired_blocks_wait_for_reclaim() {
        let table = [v4([10, 1, 0, 0], 16, 1), v4([10, 1, 2, 0], 26, 2)];
        let mut m = RouteMap::from_routes(&table);
        let mut w = Poptrie::build(&table, &PoptrieConfig::default()).unwrap();
        w.prepare(&m);
        let view = w.share();
        let r = v4([10, 1, 2, 64], 26, 3);
        m.set(r.prefix, r.nexthop);
        w.update(&m, &[r.prefix]).unwrap();
        assert_eq!(view.lookup(0x0a01_0241), 3, "the view sees the change");
        let retired = w.retired_blocks();
        assert!(retired > 0, "the replaced path was retired");
        let g = w.retire_group();
        w.reclaim(g);
        assert_eq!(w.retired_blocks(), 0);
        // Alone, an update frees what it retires at once.
        drop(view);
        m.set(r.prefix, 4);
        w.update(&m, &[r.prefix]).unwrap();
        assert_eq!((w.retired_blocks(), w.lookup(0x0a01_0241)), (0, 4));
    }

    /// 10.1.0.0/16 → 1 over the direct slot of 10.1.0.0/18, whose node holds 10.1.2.0/24 → 2
    /// as leaves and a child for 10.1.3.128/25 → 3: the route map, the trie and a reader's
    /// handle on it (so that what an update retires is kept and can be counted).
    fn a_node_with_a_child() -> (RouteMap<u32>, Poptrie<u32>, Poptrie<u32>) {
        shared(&[
            v4([10, 1, 0, 0], 16, 1),
            v4([10, 1, 2, 0], 24, 2),
            v4([10, 1, 3, 128], 25, 3),
        ])
    }

    /// The route map of `table`, a trie of it ready for updates, and a reader's handle on
    /// the trie (so that what an update retires is kept and can be counted).
    fn shared(table: &[Route<u32>]) -> (RouteMap<u32>, Poptrie<u32>, Poptrie<u32>) {
        let m = RouteMap::from_routes(table);
        let mut w = Poptrie::build(table, &PoptrieConfig::default()).unwrap();
        w.prepare(&m);
        let view = w.share();
        (m, w, view)
    }

    /// A change that ends in a node with no child in its range touches the node's leaves
    /// only: the copied node and its old leaf block are all it retires, and the child beside
    /// it is kept as it was.
    #[test]
    fn a_change_beside_a_child_repaints_only_the_leaves() {
        let (mut m, mut w, view) = a_node_with_a_child();
        let r = v4([10, 1, 2, 0], 24, 7);
        m.set(r.prefix, r.nexthop);
        w.update(&m, &[r.prefix]).unwrap();
        assert_eq!(w.retired_blocks(), 2, "the node's copy and its old leaves");
        let at = |a: [u8; 4]| view.lookup(u32::from_be_bytes(a));
        let got = [
            at([10, 1, 2, 9]),
            at([10, 1, 3, 129]),
            at([10, 1, 3, 1]),
            at([10, 1, 9, 9]),
        ];
        assert_eq!(got, [7, 3, 1, 1]);
        // Withdrawn, its range takes what is above it: the /16, the node's default.
        m.set(r.prefix, 0);
        w.update(&m, &[r.prefix]).unwrap();
        assert_eq!((at([10, 1, 2, 9]), at([10, 1, 3, 129])), (1, 3));
    }

    /// A change over a child of its node rebuilds that child and repaints the node's leaves
    /// in its range; the node's other child keeps its subtree. 10.1.0.0/22 over the child of
    /// 10.1.3.0/24 in the node of 10.1.0.0/18, whose other child is 10.1.9.0/24's.
    #[test]
    fn a_change_over_a_child_rebuilds_that_child_alone() {
        let (mut m, mut w, view) = shared(&[
            v4([10, 1, 0, 0], 16, 1),
            v4([10, 1, 0, 0], 22, 5),
            v4([10, 1, 2, 0], 24, 2),
            v4([10, 1, 3, 128], 25, 3),
            v4([10, 1, 9, 128], 25, 6),
        ]);
        let at = |a: [u8; 4]| view.lookup(u32::from_be_bytes(a));
        let r = v4([10, 1, 0, 0], 22, 7);
        m.set(r.prefix, r.nexthop);
        w.update(&m, &[r.prefix]).unwrap();
        assert_eq!(
            w.retired_blocks(),
            4,
            "the node's copy, its leaves, its child block, the rebuilt child's leaves"
        );
        let probes = [
            [10, 1, 1, 1],
            [10, 1, 2, 9],
            [10, 1, 3, 1],
            [10, 1, 3, 129],
            [10, 1, 9, 1],
            [10, 1, 9, 129],
        ];
        assert_eq!(probes.map(at), [7, 2, 7, 3, 1, 6]);
        // Withdrawn, the /16 shows again under it, in the node and in the child.
        m.set(r.prefix, 0);
        w.update(&m, &[r.prefix]).unwrap();
        assert_eq!(probes.map(at), [1, 2, 1, 3, 1, 6]);
        let fresh = Poptrie::build(&m.to_routes(), &PoptrieConfig::default()).unwrap();
        for a in (0x0a01_0000u32..0x0a01_0c00).step_by(7) {
            assert_eq!(view.lookup(a), fresh.lookup(a), "{a:#x}");
        }
    }

    /// A route that needs a child where its node has none gets that child alone: the
    /// node's copy, its old leaves and its old child block are all that is retired (the
    /// sibling subtree is shared, not rebuilt), and the new child starts from the node's leaf
    /// there.
    #[test]
    fn a_new_child_is_added_beside_its_siblings() {
        let (mut m, mut w, view) = a_node_with_a_child();
        let r = v4([10, 1, 2, 64], 26, 8);
        m.set(r.prefix, r.nexthop);
        w.update(&m, &[r.prefix]).unwrap();
        assert_eq!(
            w.retired_blocks(),
            3,
            "the node's copy, its leaves, its child block"
        );
        let at = |a: [u8; 4]| view.lookup(u32::from_be_bytes(a));
        let got = [
            at([10, 1, 2, 70]),
            at([10, 1, 2, 9]),
            at([10, 1, 3, 129]),
            at([10, 1, 3, 1]),
        ];
        assert_eq!(got, [8, 2, 3, 1]);
        // A withdrawal of a route that was never there changes nothing.
        let ghost = v4([10, 1, 5, 0], 28, 0);
        w.update(&m, &[ghost.prefix]).unwrap();
        assert_eq!(at([10, 1, 5, 1]), 1);
    }

    #[test]
    fn deep_ipv6_change_keeps_its_siblings() {
        let doc = 0x2001_0db8u128 << 96;
        let table = [
            v6(doc, 32, 1),
            v6(doc | 1 << 80, 48, 2),
            v6(doc | 2 << 80, 48, 3),
            v6(doc | 2 << 80 | 5 << 64, 64, 4),
        ];
        let mut m = RouteMap::from_routes(&table);
        let mut p = Poptrie::build(&table, &PoptrieConfig::default()).unwrap();
        let extra = v6(doc | 1 << 80 | 7 << 64, 64, 5);
        m.set(extra.prefix, extra.nexthop);
        p.update(&m, &[extra.prefix]).unwrap();
        assert_eq!(p.lookup(doc | 1 << 80 | 7 << 64 | 9), 5);
        assert_eq!(p.lookup(doc | 1 << 80 | 8 << 64), 2);
        assert_eq!(p.lookup(doc | 2 << 80 | 5 << 64), 4);
        assert_eq!(p.lookup(doc | 3 << 80), 1);
    }

    #[test]
    fn a_next_hop_too_large_changes_nothing() {
        let table = [v4([10, 0, 0, 0], 8, 2)];
        let mut m = RouteMap::from_routes(&table);
        let mut p = Poptrie::build(&table, &PoptrieConfig::default()).unwrap();
        let big = v4([10, 0, 0, 0], 8, MAX_NEXTHOP + 1);
        m.set(big.prefix, big.nexthop);
        assert!(p.update(&m, &[big.prefix]).is_err());
        assert_eq!(p.lookup(0x0a00_0001), 2);
    }

    #[test]
    fn large_batches_rebuild() {
        let table: Vec<Route<u32>> = (0..4096u32)
            .map(|i| v4((i << 12).to_be_bytes(), 20, 1 + i % 7))
            .collect();
        let mut m = RouteMap::new();
        let mut p = Poptrie::build(&[], &PoptrieConfig::default()).unwrap();
        for r in &table {
            m.set(r.prefix, r.nexthop);
        }
        let changed: Vec<Prefix<u32>> = table.iter().map(|r| r.prefix).collect();
        p.update(&m, &changed).unwrap();
        for r in &table {
            assert_eq!(p.lookup(r.prefix.addr()), r.nexthop);
        }
        assert_eq!(p.route_count(), 4096);
    }

    /// A small deterministic generator for the batch tests.
    struct Mix(u64);

    impl Mix {
        fn next(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Rounds of batches, each with many changes below the same direct slots: announces,
    /// withdrawals and next-hop changes of nested prefixes drawn from `pool`, a change and
    /// its undo, an announce and its withdrawal; once the withdrawal of every route in the
    /// pool with a few announced again in the same batch, once the withdrawal of every route
    /// below the direct bits (the slots become leaves). After every batch the trie,
    /// and a reader's handle taken before it, answer every address of `probe` as a fresh
    /// build of the final table (and the golden reference) does.
    fn check_batches_in_one_slot<K: Key>(base: &[Route<K>], pool: &[Prefix<K>], probe: &[K]) {
        let cfg = PoptrieConfig::default();
        let mut m = RouteMap::from_routes(base);
        let mut w = Poptrie::build(&m.to_routes(), &cfg).unwrap();
        w.prepare(&m);
        let mut mix = Mix(0x9e37_79b9_7f4a_7c15);
        let mut held = std::collections::VecDeque::new();
        for round in 0..8 {
            let mut changed = Vec::new();
            let mut set = |m: &mut RouteMap<K>, p: Prefix<K>, nh: NextHop| {
                m.set(p, nh);
                changed.push(p);
            };
            if round == 5 || round == 6 {
                for &p in pool {
                    set(&mut m, p, 0);
                }
            }
            if round == 5 {
                for &p in pool.iter().step_by(7) {
                    set(&mut m, p, 40);
                }
            }
            let n = if round == 6 { 0 } else { pool.len() * 2 };
            for _ in 0..n {
                let p = pool[mix.next(pool.len() as u64) as usize];
                match mix.next(4) {
                    0 => set(&mut m, p, 0),
                    _ => set(&mut m, p, 1 + mix.next(30) as NextHop),
                }
            }
            // A change and its undo, and an announce and its withdrawal, in one batch.
            let p = pool[mix.next(pool.len() as u64) as usize];
            let was = m.get(&p).unwrap_or(0);
            set(&mut m, p, was + 100);
            set(&mut m, p, was);
            let q = pool[mix.next(pool.len() as u64) as usize];
            if m.get(&q).is_none() {
                set(&mut m, q, 77);
                set(&mut m, q, 0);
            }
            let view = w.share();
            let before_mem = Arc::as_ptr(&w.mem);
            w.update(&m, &changed).unwrap();
            assert!(
                Arc::as_ptr(&w.mem) == before_mem,
                "round {round}: the batch was applied in place, not rebuilt"
            );
            let routes = m.to_routes();
            let fresh = Poptrie::build(&routes, &cfg).unwrap();
            let want: Vec<NextHop> = probe.iter().map(|&a| fresh.lookup(a)).collect();
            let what = format!("round {round}, {} changes", changed.len());
            crate::testkit::check_against_golden(&w, &routes, probe, &what);
            for (e, name) in [(&w, "writer"), (&view, "reader")] {
                let got: Vec<NextHop> = probe.iter().map(|&a| e.lookup(a)).collect();
                let bad = got.iter().zip(&want).position(|(g, f)| g != f);
                assert!(bad.is_none(), "{name}, {what}: {:?}", bad.map(|i| probe[i]));
            }
            held.push_back((view, w.retire_group()));
            if held.len() > 1 {
                let (old, g) = held.pop_front().unwrap();
                drop(old);
                w.reclaim(g);
            }
        }
    }

    #[test]
    fn v4_batches_below_one_slot_match_a_fresh_build() {
        // 10.1.0.0/18 (a node: routes to /32) and 10.1.64.0/18 (a childless-node record:
        // routes to /24), below a /8 and a /18 cover; every address of both slots probed.
        let at = |o: u32, len: u8| Prefix::new_masked(0x0a01_0000u32 + o, len);
        let mut pool = Vec::new();
        for (o, lens) in [
            (0u32, &[19u8, 20, 22, 24, 25, 26, 28, 30, 32][..]),
            (0x0200, &[23, 24, 26, 27, 29, 31, 32]),
            (0x0280, &[25, 26, 32]),
            (0x1000, &[20, 21, 24, 28]),
            (0x2f40, &[24, 26, 29]),
            (0x4000, &[19, 20, 21, 22, 23, 24]),
            (0x4a00, &[21, 23, 24]),
            (0x7f00, &[20, 24]),
            (0x0281, &[32]),
            (0x0a00, &[24]),
        ] {
            for &l in lens {
                pool.push(at(o, l));
            }
        }
        let base = [
            v4([10, 0, 0, 0], 8, 1),
            v4([10, 1, 0, 0], 18, 2),
            v4([10, 1, 2, 0], 24, 3),
            v4([10, 1, 2, 128], 25, 4),
            v4([10, 1, 2, 129], 32, 5),
            v4([10, 1, 64, 0], 20, 6),
            v4([10, 1, 74, 0], 24, 7),
        ];
        let probe: Vec<u32> = (0x0a00_ff00u32..0x0a01_8100).collect();
        check_batches_in_one_slot(&base, &pool, &probe);
    }

    #[test]
    fn v6_batches_below_one_slot_match_a_fresh_build() {
        // Nested prefixes of 2001:db8::/48 (one direct slot) down to /64, and a /32 and a
        // /40 over them: every /64 of the /48 answers as one address, probed at both ends.
        let doc = 0x2001_0db8u128 << 96;
        let at = |net: u128, len: u8| Prefix::new_masked(doc | net << 64, len);
        let mut pool = vec![
            Prefix::new_masked(doc, 32),
            Prefix::new_masked(doc, 36),
            Prefix::new_masked(doc, 40),
            Prefix::new_masked(doc, 44),
        ];
        for (net, lens) in [
            (0u128, &[48u8, 50, 52, 56, 58, 60, 63, 64][..]),
            (0x0100, &[56, 60, 64]),
            (0x0140, &[58, 62, 64]),
            (0x1234, &[52, 56, 64]),
            (0x8000, &[49, 50, 54, 64]),
            (0xff00, &[56, 57, 64]),
            (0xffff, &[64]),
            (0x0142, &[64]),
        ] {
            for &l in lens {
                pool.push(at(net, l));
            }
        }
        let base = [
            v6(doc, 32, 1),
            v6(doc, 48, 2),
            v6(doc | 0x0100 << 64, 56, 3),
            v6(doc | 0x0142 << 64, 64, 4),
            v6(doc | 0x8000 << 64, 49, 5),
        ];
        let mut probe = Vec::new();
        for net in 0..=0xffffu128 {
            probe.push(doc | net << 64);
            probe.push(doc | net << 64 | u64::MAX as u128);
        }
        probe.extend([
            doc - 1,
            doc | 1 << 80,
            doc | 0xf << 88,
            doc | ((1u128 << 96) - 1),
        ]);
        check_batches_in_one_slot(&base, &pool, &probe);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn v4_update_sequences_match_a_fresh_build(case in updates_and_probes(POOL4)) {
            for cfg in configs() {
                check_updates::<u32, Poptrie<u32>>(&cfg, &case, &format!("{cfg:?}"));
            }
        }

        #[test]
        fn v4_copies_brought_level_match_a_fresh_build(case in updates_and_probes(POOL4)) {
            check_copy_from(&case);
        }

        #[test]
        fn v6_copies_brought_level_match_a_fresh_build(case in updates_and_probes(POOL6)) {
            check_copy_from(&case);
        }

        #[test]
        fn v4_in_place_updates_match_a_fresh_build(case in updates_and_probes(POOL4)) {
            check_in_place(&case);
        }

        #[test]
        fn v6_in_place_updates_match_a_fresh_build(case in updates_and_probes(POOL6)) {
            check_in_place(&case);
        }

        #[test]
        fn v6_update_sequences_match_a_fresh_build(case in updates_and_probes(POOL6)) {
            for cfg in configs() {
                check_updates::<u128, Poptrie<u128>>(&cfg, &case, &format!("{cfg:?}"));
            }
        }
    }
}
