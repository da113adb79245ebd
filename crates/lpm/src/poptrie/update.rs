//! Incremental updates: only the part of the trie a changed prefix touches is rebuilt.
//!
//! As in the Poptrie paper (section 3.5), a change rebuilds the subtree below the place where
//! the prefix lives, into freshly allocated blocks, and frees the old blocks for reuse. Where
//! that place is depends on the prefix length `len` against the direct bits `s`:
//!
//! ```text
//!   len <= s    the prefix paints 2^(s-len) direct slots. Per slot, `Cover` remembers the
//!               longest prefix of at most s bits over it; a slot whose cover changes is
//!               rewritten if it is a leaf, rebuilt whole if it holds a subtree (its default
//!               changed).
//!   len >  s    one slot. A leaf or childless-node slot is rebuilt whole (it holds at most
//!               the routes of one stride). Below a node, the walk follows the prefix down to
//!               the node N where it ends (off < len <= off + 6), or to the deepest node on
//!               its path, and rebuilds N's subtree in place: N keeps its position in its
//!               parent's child block, so nothing above N changes.
//!
//!        direct[s] ─▶ node (off 18) ─▶ node (off 24)   ◀── N for a /28: rebuilt from the
//!                                       ├ leaves           routes inside its /24, over the
//!                                       └ children         default N inherited (`ndef`)
//! ```
//!
//! A node emptied by withdrawals stays a node whose leaves all hold its default until an
//! ancestor is rebuilt: the answers are exact, the shape is not minimal. Blocks are reused at
//! their exact size through free lists (the paper uses a buddy allocator).
//!
//! Not incremental, rebuilt from the route map instead: the configuration without direct
//! pointing, two-level direct pointing, and batches that change more than a quarter of the
//! table (a full load, a session reset), for which a build is cheaper than many rebuilds.
//!
//! A live FIB updates a copy no reader can see (see `vfsr-fib`), so the trie is changed in
//! place through `&mut self`.

use super::{
    alloc_padded, emit_leaves, lnode_leafvec, Builder, Poptrie, INDEX, LEAF, LNODE, LNODE_HEADER,
    MAX_NEXTHOP, STRIDE,
};
use crate::key::Key;
use crate::prefix::{NextHop, Prefix, Route};
use crate::update::{LpmUpdate, RouteMap};
use crate::{BuildError, LpmBuild};

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

/// The routes of `table` inside `q` longer than `off`, with their next hops checked.
fn run_below<K: Key>(
    table: &RouteMap<K>,
    q: Prefix<K>,
    off: u8,
) -> Result<Vec<Route<K>>, BuildError> {
    let mut run = Vec::new();
    for r in table.within(q) {
        if r.prefix.len() > off {
            leaf(r.nexthop)?;
            run.push(r);
        }
    }
    Ok(run)
}

/// The direct slots a prefix of at most `ds` bits covers.
fn slot_range<K: Key>(p: Prefix<K>, ds: u8) -> (usize, usize) {
    let a = p.addr().chunk(0, ds);
    (a, a + (1usize << (ds - p.len())))
}

/// The prefix of direct slot `s`.
fn slot_prefix<K: Key>(s: usize, ds: u8) -> Prefix<K> {
    Prefix::new_masked(K::from_u128_left((s as u128) << (128 - ds as u32)), ds)
}

impl<K: Key> Poptrie<K> {
    fn config(&self) -> PoptrieConfig {
        PoptrieConfig {
            direct_bits: self.direct_bits,
            top_bits: self.top_bits,
        }
    }

    /// Replaces the trie by a fresh build of `table`, keeping the SIMD choice.
    fn rebuild(&mut self, table: &RouteMap<K>) -> Result<(), BuildError> {
        let simd = self.simd;
        *self = Poptrie::build(&table.to_routes(), &self.config())?;
        self.simd = simd;
        Ok(())
    }

    fn take_builder(&mut self) -> Builder<K> {
        Builder {
            nodes: core::mem::take(&mut self.nodes),
            ndef: core::mem::take(&mut self.ndef),
            lnodes: core::mem::take(&mut self.lnodes),
            lnode_count: self.lnode_count,
            leaves: core::mem::take(&mut self.leaves),
            free: core::mem::take(&mut self.free),
            _k: core::marker::PhantomData,
        }
    }

    fn put_builder(&mut self, b: Builder<K>) {
        self.nodes = b.nodes;
        self.ndef = b.ndef;
        self.lnodes = b.lnodes;
        self.lnode_count = b.lnode_count;
        self.leaves = b.leaves;
        self.free = b.free;
    }

    /// The incremental path (flat direct pointing of at least one bit).
    fn update_flat(
        &mut self,
        b: &mut Builder<K>,
        cover: &mut Cover,
        fresh: bool,
        table: &RouteMap<K>,
        changed: &[Prefix<K>],
    ) -> Result<(), BuildError> {
        let ds = self.direct_bits;
        // Slots to rebuild whole, and prefixes to rebuild below a node.
        let mut whole: Vec<usize> = Vec::new();
        let mut deep: Vec<Prefix<K>> = Vec::new();
        // Prefixes within one stride below the direct bits, in childless-node slots.
        let mut shallow: Vec<Prefix<K>> = Vec::new();
        let repaint = |s: usize, direct: &mut [u32], cover: &Cover, whole: &mut Vec<usize>| {
            if direct[s] & LEAF != 0 {
                direct[s] = LEAF | cover.nh[s] as u32;
            } else {
                whole.push(s);
            }
        };
        for &p in changed {
            let len = p.len();
            if len > ds {
                let s = p.addr().chunk(0, ds);
                let e = self.direct[s];
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
                    repaint(s, &mut self.direct, cover, &mut whole);
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
                    repaint(s, &mut self.direct, cover, &mut whole);
                }
            }
        }
        whole.sort_unstable();
        whole.dedup();
        for &s in &whole {
            self.rebuild_slot(b, cover, table, s)?;
        }
        for p in shallow {
            let s = p.addr().chunk(0, ds);
            if whole.binary_search(&s).is_err() {
                self.update_lnode(b, cover, table, p, s)?;
            }
        }
        for p in deep {
            let s = p.addr().chunk(0, ds);
            if whole.binary_search(&s).is_err() {
                self.update_below(b, cover, table, p, s)?;
            }
        }
        Ok(())
    }

    /// Repaints, for a prefix ending within the stride below the direct bits, the slots it
    /// covers in a childless-node record, without reading the rest of the direct slot's
    /// routes: they take the route just above the prefix (or the slot's cover), then the
    /// prefix and the routes inside it. The record is rewritten in place when its leaf count
    /// stays, moved otherwise. It stays a record even when all its slots agree with the
    /// cover: a leaf entry promises that no route of the slot is longer than the direct
    /// bits, which a route carrying the cover's own next hop would break.
    fn update_lnode(
        &mut self,
        b: &mut Builder<K>,
        cover: &Cover,
        table: &RouteMap<K>,
        p: Prefix<K>,
        s: usize,
    ) -> Result<(), BuildError> {
        let ds = self.direct_bits;
        let end = ds + STRIDE;
        let old = self.direct[s];
        if old & LEAF != 0 || old & LNODE == 0 {
            return self.rebuild_slot(b, cover, table, s);
        }
        let o = (old & INDEX) as usize;
        let lv = lnode_leafvec(&b.lnodes, o);
        let mut slots = [0u16; 64];
        let mut li = o + LNODE_HEADER;
        for (i, v) in slots.iter_mut().enumerate() {
            if lv & (1u64 << i) != 0 && i > 0 {
                li += 1;
            }
            *v = b.lnodes[li];
        }
        let mut above = cover.nh[s];
        for l in (ds + 1..p.len()).rev() {
            if let Some(nh) = table.get(&Prefix::new_masked(p.addr(), l)) {
                above = leaf(nh)?;
                break;
            }
        }
        let c = p.addr().chunk(ds, STRIDE);
        slots[c..c + (1usize << (end - p.len()))].fill(above);
        for r in table.within(p) {
            if r.prefix.len() > end {
                // Cannot happen while the slot is a childless node; rebuild it whole.
                return self.rebuild_slot(b, cover, table, s);
            }
            let c = r.prefix.addr().chunk(ds, STRIDE);
            slots[c..c + (1usize << (end - r.prefix.len()))].fill(leaf(r.nexthop)?);
        }
        let mut rec = [0u16; LNODE_HEADER + 64];
        let (leafvec, n) = emit_leaves(&slots, 0, &mut rec[LNODE_HEADER..]);
        for (k, w) in rec[..LNODE_HEADER].iter_mut().enumerate() {
            *w = (leafvec >> (16 * k)) as u16;
        }
        self.replace_record(b, s, &rec[..LNODE_HEADER + n])
    }

    /// Puts record `rec` in place of the childless-node record of direct slot `s`: over it
    /// when their leaf counts match, else in a block of its own size (the old one is freed).
    fn replace_record(
        &mut self,
        b: &mut Builder<K>,
        s: usize,
        rec: &[u16],
    ) -> Result<(), BuildError> {
        let old = self.direct[s];
        let o = (old & INDEX) as usize;
        let n_old = lnode_leafvec(&b.lnodes, o).count_ones() as usize;
        if LNODE_HEADER + n_old == rec.len() {
            b.lnodes[o..o + rec.len()].copy_from_slice(rec);
            return Ok(());
        }
        let at = alloc_padded(&mut b.lnodes, &mut b.free.lnodes, rec);
        if at + LNODE_HEADER + 64 > INDEX as usize {
            return Err(BuildError::TooLarge("childless-node records past 2^30"));
        }
        b.lnode_count += 1;
        self.direct[s] = LNODE | at as u32;
        b.free_entry(old);
        Ok(())
    }

    /// Rebuilds direct slot `s` whole from the table.
    fn rebuild_slot(
        &mut self,
        b: &mut Builder<K>,
        cover: &Cover,
        table: &RouteMap<K>,
        s: usize,
    ) -> Result<(), BuildError> {
        let ds = self.direct_bits;
        let run = run_below(table, slot_prefix::<K>(s, ds), ds)?;
        let old = self.direct[s];
        self.direct[s] = if run.is_empty() {
            LEAF | cover.nh[s] as u32
        } else {
            b.slot_entry(&run, ds, cover.nh[s])?
        };
        b.free_entry(old);
        Ok(())
    }

    /// Rebuilds, for a prefix longer than the direct bits in a slot holding a node, the
    /// subtree of the node where the prefix ends or the deepest node on its path.
    fn update_below(
        &mut self,
        b: &mut Builder<K>,
        cover: &Cover,
        table: &RouteMap<K>,
        p: Prefix<K>,
        s: usize,
    ) -> Result<(), BuildError> {
        let ds = self.direct_bits;
        if self.direct[s] & (LEAF | LNODE) != 0 {
            // An earlier change of the batch emptied the slot's node.
            return self.rebuild_slot(b, cover, table, s);
        }
        let mut idx = self.direct[s] as usize;
        let mut off = ds;
        while p.len() > off + STRIDE {
            let n = b.nodes[idx];
            let v = p.addr().chunk(off, STRIDE);
            if n.vector & (1u64 << v) == 0 {
                break;
            }
            idx = n.base1 as usize + (n.vector & super::upto(v)).count_ones() as usize - 1;
            off += STRIDE;
        }
        let q = Prefix::new_masked(p.addr(), off);
        let run = run_below(table, q, off)?;
        if run.is_empty() && off == ds {
            let old = self.direct[s];
            self.direct[s] = LEAF | cover.nh[s] as u32;
            b.free_entry(old);
            return Ok(());
        }
        let default = b.ndef[idx];
        b.free_below(idx);
        b.fill(&run, idx, off, default)
    }
}

impl<K: Key> LpmUpdate<K> for Poptrie<K> {
    const MAX_NEXTHOP: NextHop = MAX_NEXTHOP;

    fn update(&mut self, table: &RouteMap<K>, changed: &[Prefix<K>]) -> Result<(), BuildError> {
        let ds = self.direct_bits;
        let bulk = changed.len() > 1024 && changed.len() * 4 > table.len();
        if ds == 0 || self.top_bits != 0 || bulk {
            return self.rebuild(table);
        }
        let (mut cover, fresh) = match self.cover.take() {
            Some(c) => (c, false),
            None => (Box::new(Cover::new(table, ds)?), true),
        };
        let mut b = self.take_builder();
        let r = self.update_flat(&mut b, &mut cover, fresh, table, changed);
        self.put_builder(b);
        self.cover = Some(cover);
        self.routes = table.len();
        match r {
            Ok(()) => Ok(()),
            // Out of index space half-way: a fresh build either fits or says so.
            Err(_) => self.rebuild(table),
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
        if !same || ds == 0 || self.cover.is_none() || self.direct.len() != src.direct.len() {
            return self.update(table, changed);
        }
        let mut rest = Vec::new();
        let mut b = self.take_builder();
        for &p in changed {
            let s = p.addr().chunk(0, ds);
            let (e, se) = (self.direct[s], src.direct[s]);
            let shallow = p.len() > ds && p.len() <= ds + STRIDE;
            let records = e & LEAF == 0 && e & LNODE != 0 && se & LEAF == 0 && se & LNODE != 0;
            if !(shallow && records) {
                rest.push(p);
                continue;
            }
            let so = (se & INDEX) as usize;
            let n = lnode_leafvec(&src.lnodes, so).count_ones() as usize;
            let Some(rec) = src.lnodes.get(so..so + LNODE_HEADER + n) else {
                rest.push(p);
                continue;
            };
            if let Err(err) = self.replace_record(&mut b, s, rec) {
                self.put_builder(b);
                return Err(err);
            }
        }
        self.put_builder(b);
        self.routes = table.len();
        if rest.is_empty() {
            Ok(())
        } else {
            self.update(table, &rest)
        }
    }

    fn prepare(&mut self, table: &RouteMap<K>) {
        if self.cover.is_none() && self.direct_bits > 0 && self.top_bits == 0 {
            // A table the trie could not hold was refused by the build; nothing to prepare.
            self.cover = Cover::new(table, self.direct_bits).ok().map(Box::new);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{check_updates, updates_and_probes, v4, v6, POOL4, POOL6};
    use crate::Lpm;
    use proptest::prelude::*;

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
        // Everything back out: only the default route answers, and blocks were reused.
        let before = p.memory_bytes();
        for r in m.to_routes() {
            if !r.prefix.is_empty() {
                m.set(r.prefix, 0);
                p.update(&m, &[r.prefix]).unwrap();
            }
        }
        assert_eq!(p.lookup(a), 1);
        assert!(p.memory_bytes() <= before + 4096);
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
        fn v6_update_sequences_match_a_fresh_build(case in updates_and_probes(POOL6)) {
            for cfg in configs() {
                check_updates::<u128, Poptrie<u128>>(&cfg, &case, &format!("{cfg:?}"));
            }
        }
    }
}
