//! # Radix: the 4.4BSD routing tree (the legacy baseline)
//!
//! The BSD kernels looked routes up in a path-compressed binary (Patricia) trie, described by
//! Keith Sklower, "A Tree-Based Packet Routing Table for Berkeley Unix" (USENIX Winter 1991),
//! and walked through line by line in Wright and Stevens, *TCP/IP Illustrated, Volume 2*,
//! chapter 18 (`net/radix.c`: `rn_match`, `rn_addroute`, `struct radix_mask`). This module keeps
//! its shape and its costs, one node and one pointer per address bit that matters, so that the
//! benchmarks have the classic baseline to compare the compressed engines with. It is not
//! meant to be fast.
//!
//! * **Internal nodes** test one bit (`bit`, 0 = most significant) and have a left (0) and a
//!   right (1) child and a parent link. A node's keys agree on every bit before `bit`.
//! * **Leaves** are the prefixes. Prefixes with the same network address share one place in
//!   the trie as a *duplicate-key* list (BSD's `rn_dupedkey`), longest first.
//! * **Mask lists** (BSD's `rn_mklist`) make backtracking possible: a prefix `P/L` is also
//!   attached to the highest node on the path to its leaf whose bit is at least `L`. The keys
//!   below that node are exactly the keys `P` covers. Lists are ordered longest first.
//!
//! A lookup descends by the address bits to a leaf, checks the leaf's prefixes, then climbs
//! parent links checking each node's mask list; the first prefix containing the address is
//! the answer. The descent follows the address, so it stays inside the subtree of any prefix
//! that contains it; the climb meets the attachment nodes in decreasing order of prefix length.
//!
//! ## Worked example
//!
//! Routes `0.0.0.0/0`, `10.0.0.0/8`, `10.1.0.0/16`, `10.1.2.0/24`, `192.168.0.0/16`. The keys
//! 0.0.0.0 and 10.x first differ from 192.168.0.0 at bit 0; 0.0.0.0 and 10.x at bit 4
//! (10 = `00001010`); 10.0.0.0 and 10.1.x at bit 15; 10.1.0.0 and 10.1.2.0 at bit 22.
//!
//! ```text
//!                         root: bit 0      masks [0.0.0.0/0]
//!                        0/            \1
//!               n: bit 4                leaf 192.168.0.0  [/16]
//!              0/      \1
//!   leaf 0.0.0.0 [/0]   n: bit 15      masks [10.0.0.0/8]
//!                      0/        \1
//!        leaf 10.0.0.0 [/8]       n: bit 22     masks [10.1.0.0/16]
//!                                0/        \1
//!                leaf 10.1.0.0 [/16]       leaf 10.1.2.0 [/24]
//! ```
//!
//! `0.0.0.0/0` hangs at the root (bit 0 >= 0), `10.0.0.0/8` at the bit-15 node (the first on
//! its path with bit >= 8), `10.1.0.0/16` at bit 22; `10.1.2.0/24` and `192.168.0.0/16` have no
//! node at or below their length on their path and live only in their leaves.
//!
//! * 10.1.3.4 descends 0, 1, 1, 1 to leaf 10.1.2.0/24, which does not contain it; climbing,
//!   the bit-22 node's `10.1.0.0/16` does: the answer.
//! * 11.0.0.1 descends to leaf 10.0.0.0/8 (the skipped bits are not compared), which does not
//!   contain it; `10.0.0.0/8` at bit 15 does not either, the bit-4 node has no masks, the root's
//!   `0.0.0.0/0` matches.
//!
//! ## Updates
//!
//! [`LpmUpdate::update`] changes the tree in place, one changed prefix at a time, the way
//! `rn_addroute` and `rn_delete` do; the route map is only asked for the prefix's next hop.
//!
//! * **Replace**: the leaf is found by the descent and its next hop overwritten.
//! * **Announce, key present**: the new leaf joins the key's duplicate-key list at its length
//!   and is attached to the mask list of the first node on its path testing a bit at or past
//!   its length.
//! * **Announce, new key**: the descent ends at some leaf; the first bit `b` where the two
//!   keys differ is where a new node goes, on the edge above the first node of the key's path
//!   testing a bit past `b`. Masks of length `<= b` that hung at the node below (or lived only
//!   in the leaf below) now hang at the new node. Adding `10.1.3.0/24` to the worked example
//!   (it differs from 10.1.2.0 at bit 23):
//!
//! ```text
//!   before:  n: bit 22 [10.1.0.0/16]            after:  n: bit 22 [10.1.0.0/16]
//!           0/        \1                                0/        \1
//!     leaf 10.1.0.0   leaf 10.1.2.0 [/24]        leaf 10.1.0.0   new: bit 23
//!                                                               0/          \1
//!                                                leaf 10.1.2.0 [/24]   leaf 10.1.3.0 [/24]
//! ```
//!
//! * **Withdraw**: the leaf leaves its list and its mask its node. When it was the key's last
//!   prefix, its parent node goes too and the sibling takes its place; the parent's masks move
//!   down to the sibling if that is a node (they cover all of it), or are dropped if it is a
//!   leaf (they are then that leaf's own prefixes, found through its list).
//!
//! Freed nodes, leaves and mask entries go to free lists that later announcements take from,
//! so a long run of updates does not grow the arrays past the largest table seen.

use crate::key::Key;
use crate::prefix::{canonicalize, NextHop, Prefix, Route, NO_ROUTE};
use crate::update::{LpmUpdate, RouteMap};
use crate::{BuildError, Lpm, LpmBuild};

/// Top bit of a child reference: set = the rest indexes `leaves`, clear = `nodes`.
const LEAF: u32 = 1 << 31;
/// "No node": the end of a list, the parent of the root, the root of an empty tree.
const NIL: u32 = u32::MAX;

/// An internal node: a one-bit test (BSD's `radix_node` with `rn_bit >= 0`).
#[derive(Clone, Copy, Debug)]
struct Node {
    bit: u8,
    left: u32,
    right: u32,
    parent: u32,
    /// Head of this node's mask list in `masks`, or [`NIL`].
    masks: u32,
}

/// A prefix (BSD's leaf `radix_node`: key, mask, duplicate-key link).
#[derive(Clone, Copy, Debug)]
struct Leaf<K: Key> {
    key: K,
    len: u8,
    nexthop: NextHop,
    /// Next (shorter) prefix with the same key, or [`NIL`].
    dupedkey: u32,
    /// The internal node above the key's place, or [`NIL`] when the key is the root.
    parent: u32,
}

/// One entry of a mask list (BSD's `radix_mask`).
#[derive(Clone, Copy, Debug)]
struct Mask {
    leaf: u32,
    next: u32,
}

/// The 4.4BSD radix tree: one bit per internal node, backtracking through mask lists.
#[derive(Clone, Debug)]
pub struct Radix<K: Key> {
    root: u32,
    nodes: Vec<Node>,
    leaves: Vec<Leaf<K>>,
    masks: Vec<Mask>,
    /// Slots of the three arrays freed by updates, reused before the arrays grow.
    free_nodes: Vec<u32>,
    free_leaves: Vec<u32>,
    free_masks: Vec<u32>,
}

impl<K: Key> Radix<K> {
    /// Internal nodes plus leaves (one leaf per prefix).
    pub fn node_count(&self) -> usize {
        (self.nodes.len() + self.leaves.len())
            .saturating_sub(self.free_nodes.len() + self.free_leaves.len())
    }

    /// The longest prefix covering `addr` and its next hop.
    pub fn lookup_route(&self, addr: K) -> Option<(Prefix<K>, NextHop)> {
        let l = self.find(addr)?;
        Some((Prefix::new_masked(l.key, l.len), l.nexthop))
    }

    /// `rn_match`. References that leave the arrays (impossible for a tree this module built)
    /// end the search with no match.
    fn find(&self, addr: K) -> Option<&Leaf<K>> {
        // Descend to the head of a duplicate-key list.
        let head = self.leaves.get(self.descend(addr)? as usize)?;
        let mut l = Some(head);
        while let Some(leaf) = l {
            if addr.in_prefix(leaf.key, leaf.len) {
                return Some(leaf);
            }
            l = self.leaves.get(leaf.dupedkey as usize);
        }
        // Backtrack: climb parent links and try each node's mask list.
        let mut up = self.nodes.get(head.parent as usize);
        while let Some(n) = up {
            let mut m = self.masks.get(n.masks as usize);
            while let Some(mask) = m {
                let leaf = self.leaves.get(mask.leaf as usize)?;
                if addr.in_prefix(leaf.key, leaf.len) {
                    return Some(leaf);
                }
                m = self.masks.get(mask.next as usize);
            }
            up = self.nodes.get(n.parent as usize);
        }
        None
    }

    /// The head leaf the bits of `addr` lead to (`None` for an empty tree). Bits grow
    /// strictly downwards, so a tree this module keeps is left within `K::BITS` steps; the
    /// bound only guards against a broken one.
    fn descend(&self, addr: K) -> Option<u32> {
        let mut r = self.root;
        for _ in 0..=K::BITS {
            if r & LEAF != 0 {
                return Some(r & !LEAF);
            }
            let n = self.nodes.get(r as usize)?;
            r = if addr.bit(n.bit) { n.right } else { n.left };
        }
        None
    }

    /// The node a prefix `key/len` hangs its mask at: the first one on the key's path that
    /// tests a bit at or past `len` ([`NIL`] if the path reaches a leaf first).
    fn attach_node(&self, key: K, len: u8) -> u32 {
        let mut r = self.root;
        while let Some(n) = self.nodes.get(r as usize) {
            if n.bit >= len {
                return r;
            }
            r = if key.bit(n.bit) { n.right } else { n.left };
        }
        NIL
    }

    /// Points the child link of `parent` (the root link when [`NIL`]) that held `old` at `new`.
    fn replace_child(&mut self, parent: u32, old: u32, new: u32) {
        match self.nodes.get_mut(parent as usize) {
            Some(p) if p.left == old => p.left = new,
            Some(p) if p.right == old => p.right = new,
            Some(_) => {}
            None => self.root = new,
        }
    }

    /// Sets the parent link of `r`: a node's, or every leaf's of a duplicate-key list.
    fn set_parent(&mut self, r: u32, parent: u32) {
        if r & LEAF == 0 {
            if let Some(n) = self.nodes.get_mut(r as usize) {
                n.parent = parent;
            }
            return;
        }
        let mut l = r & !LEAF;
        while let Some(leaf) = self.leaves.get_mut(l as usize) {
            leaf.parent = parent;
            l = leaf.dupedkey;
        }
    }

    fn leaf_len(&self, l: u32) -> u8 {
        self.leaves.get(l as usize).map_or(0, |x| x.len)
    }

    /// Adds `leaf` to the mask list of `node`, keeping it longest first.
    fn mask_insert(&mut self, node: u32, leaf: u32) {
        let len = self.leaf_len(leaf);
        let Some(n) = self.nodes.get(node as usize) else {
            return;
        };
        let (mut prev, mut cur) = (NIL, n.masks);
        while let Some(m) = self.masks.get(cur as usize) {
            if self.leaf_len(m.leaf) <= len {
                break;
            }
            prev = cur;
            cur = m.next;
        }
        let at = alloc(
            &mut self.masks,
            &mut self.free_masks,
            Mask { leaf, next: cur },
        );
        match self.masks.get_mut(prev as usize) {
            Some(p) => p.next = at,
            None => {
                if let Some(n) = self.nodes.get_mut(node as usize) {
                    n.masks = at;
                }
            }
        }
    }

    /// Takes `leaf` off the mask list of `node`.
    fn mask_remove(&mut self, node: u32, leaf: u32) {
        let Some(n) = self.nodes.get(node as usize) else {
            return;
        };
        let (mut prev, mut cur) = (NIL, n.masks);
        while let Some(m) = self.masks.get(cur as usize).copied() {
            if m.leaf == leaf {
                match self.masks.get_mut(prev as usize) {
                    Some(p) => p.next = m.next,
                    None => {
                        if let Some(n) = self.nodes.get_mut(node as usize) {
                            n.masks = m.next;
                        }
                    }
                }
                self.free_masks.push(cur);
                return;
            }
            prev = cur;
            cur = m.next;
        }
    }

    /// `rn_addroute`: announces `p` or replaces its next hop.
    fn insert(&mut self, p: Prefix<K>, nexthop: NextHop) -> Result<(), BuildError> {
        let (key, len) = (p.addr(), p.len());
        // Room for one leaf, one node and a few masks, checked before anything changes.
        let live = self.leaves.len().saturating_sub(self.free_leaves.len());
        if live >= (LEAF - 2) as usize || self.masks.len() >= (NIL - 2) as usize {
            return Err(BuildError::TooLarge(
                "radix holds fewer than 2^31 - 1 prefixes",
            ));
        }
        let fresh = Leaf {
            key,
            len,
            nexthop,
            dupedkey: NIL,
            parent: NIL,
        };
        if self.root == NIL {
            let l = alloc(&mut self.leaves, &mut self.free_leaves, fresh);
            self.root = LEAF | l;
            return Ok(());
        }
        let Some(head) = self.descend(key) else {
            return Err(BuildError::TooLarge("radix tree is broken"));
        };
        let Some(&h) = self.leaves.get(head as usize) else {
            return Err(BuildError::TooLarge("radix tree is broken"));
        };

        if h.key == key {
            // The key has a place: join its duplicate-key list at the right length.
            let (mut prev, mut cur) = (NIL, head);
            while let Some(l) = self.leaves.get_mut(cur as usize) {
                if l.len == len {
                    l.nexthop = nexthop;
                    return Ok(());
                }
                if l.len < len {
                    break;
                }
                prev = cur;
                cur = l.dupedkey;
            }
            let l = alloc(
                &mut self.leaves,
                &mut self.free_leaves,
                Leaf {
                    dupedkey: cur,
                    parent: h.parent,
                    ..fresh
                },
            );
            match self.leaves.get_mut(prev as usize) {
                Some(p) => p.dupedkey = l,
                None => self.replace_child(h.parent, LEAF | head, LEAF | l),
            }
            let a = self.attach_node(key, len);
            if a != NIL {
                self.mask_insert(a, l);
            }
            return Ok(());
        }

        // A new key: a node testing bit `b` goes above the first node past `b` on its path.
        let b = key.common_prefix_len(h.key);
        let (mut parent, mut below) = (NIL, self.root);
        while let Some(n) = self.nodes.get(below as usize) {
            if n.bit > b {
                break;
            }
            parent = below;
            below = if key.bit(n.bit) { n.right } else { n.left };
        }
        let l = alloc(&mut self.leaves, &mut self.free_leaves, fresh);
        let (left, right) = if key.bit(b) {
            (below, LEAF | l)
        } else {
            (LEAF | l, below)
        };
        let n = alloc(
            &mut self.nodes,
            &mut self.free_nodes,
            Node {
                bit: b,
                left,
                right,
                parent,
                masks: NIL,
            },
        );
        if let Some(leaf) = self.leaves.get_mut(l as usize) {
            leaf.parent = n;
        }
        self.replace_child(parent, below, n);
        self.set_parent(below, n);
        let parent_bit = self.nodes.get(parent as usize).map(|p| p.bit);

        // Masks of length <= b under `below` now hang at the new node.
        if below & LEAF == 0 {
            // The node's list is longest first: the masks to move are its tail.
            let mut prev = NIL;
            let mut cur = self.nodes.get(below as usize).map_or(NIL, |x| x.masks);
            while let Some(m) = self.masks.get(cur as usize) {
                if self.leaf_len(m.leaf) <= b {
                    break;
                }
                prev = cur;
                cur = m.next;
            }
            match self.masks.get_mut(prev as usize) {
                Some(p) => p.next = NIL,
                None => {
                    if let Some(x) = self.nodes.get_mut(below as usize) {
                        x.masks = NIL;
                    }
                }
            }
            if let Some(x) = self.nodes.get_mut(n as usize) {
                x.masks = cur;
            }
        } else {
            // Prefixes of the leaf below that had no node to hang at until now.
            let mut cur = below & !LEAF;
            while let Some(&leaf) = self.leaves.get(cur as usize) {
                if leaf.len <= b && parent_bit.is_none_or(|pb| pb < leaf.len) {
                    self.mask_insert(n, cur);
                }
                cur = leaf.dupedkey;
            }
        }
        let a = self.attach_node(key, len);
        if a != NIL {
            self.mask_insert(a, l);
        }
        Ok(())
    }

    /// `rn_delete`: withdraws `p` if the tree has it.
    fn delete(&mut self, p: Prefix<K>) {
        let (key, len) = (p.addr(), p.len());
        let Some(head) = self.descend(key) else {
            return;
        };
        let (mut prev, mut cur) = (NIL, head);
        let found = loop {
            match self.leaves.get(cur as usize) {
                Some(l) if l.key == key && l.len == len => break *l,
                Some(l) if l.key == key && l.len > len => {
                    prev = cur;
                    cur = l.dupedkey;
                }
                _ => return,
            }
        };
        let a = self.attach_node(key, len);
        if a != NIL {
            self.mask_remove(a, cur);
        }
        self.free_leaves.push(cur);
        if let Some(p) = self.leaves.get_mut(prev as usize) {
            p.dupedkey = found.dupedkey;
            return;
        }
        if found.dupedkey != NIL {
            self.replace_child(found.parent, LEAF | cur, LEAF | found.dupedkey);
            return;
        }
        // The key's last prefix: its parent node goes and the sibling takes its place.
        let Some(&n) = self.nodes.get(found.parent as usize) else {
            self.root = NIL;
            return;
        };
        let sibling = if n.left == LEAF | cur {
            n.right
        } else {
            n.left
        };
        self.replace_child(n.parent, found.parent, sibling);
        self.set_parent(sibling, n.parent);
        self.free_nodes.push(found.parent);
        if let Some(s) = self.nodes.get_mut(sibling as usize) {
            // The sibling's masks are all longer than the parent's: append those.
            let mut last = NIL;
            let mut m = s.masks;
            while let Some(x) = self.masks.get(m as usize) {
                last = m;
                m = x.next;
            }
            match self.masks.get_mut(last as usize) {
                Some(x) => x.next = n.masks,
                None => {
                    if let Some(s) = self.nodes.get_mut(sibling as usize) {
                        s.masks = n.masks;
                    }
                }
            }
        } else {
            // The sibling is a leaf: the masks were its own prefixes, found in its list.
            let mut m = n.masks;
            while let Some(x) = self.masks.get(m as usize) {
                self.free_masks.push(m);
                m = x.next;
            }
        }
    }
}

/// Puts `v` in a freed slot of `arr` or at its end; returns the index.
fn alloc<T>(arr: &mut Vec<T>, free: &mut Vec<u32>, v: T) -> u32 {
    if let Some(i) = free.pop() {
        if let Some(slot) = arr.get_mut(i as usize) {
            *slot = v;
            return i;
        }
    }
    arr.push(v);
    (arr.len() - 1) as u32
}

impl<K: Key> LpmUpdate<K> for Radix<K> {
    fn update(&mut self, table: &RouteMap<K>, changed: &[Prefix<K>]) -> Result<(), BuildError> {
        for &p in changed {
            match table.get(&p) {
                Some(nh) => self.insert(p, nh)?,
                None => self.delete(p),
            }
        }
        Ok(())
    }
}

impl<K: Key> Lpm<K> for Radix<K> {
    fn lookup(&self, addr: K) -> NextHop {
        self.find(addr).map_or(NO_ROUTE, |l| l.nexthop)
    }

    fn memory_bytes(&self) -> usize {
        core::mem::size_of::<Self>()
            + self.nodes.capacity() * core::mem::size_of::<Node>()
            + self.leaves.capacity() * core::mem::size_of::<Leaf<K>>()
            + self.masks.capacity() * core::mem::size_of::<Mask>()
    }

    fn name(&self) -> &'static str {
        "radix"
    }
}

impl<K: Key> LpmBuild<K> for Radix<K> {
    type Config = ();

    fn build(routes: &[Route<K>], _: &()) -> Result<Self, BuildError> {
        let routes = canonicalize(routes);
        if routes.len() >= (LEAF - 1) as usize {
            return Err(BuildError::TooLarge(
                "radix holds fewer than 2^31 - 1 prefixes",
            ));
        }

        // Leaves in canonical order; a key's prefixes are consecutive with lengths rising,
        // so the last one is the head of its duplicate-key list and links to the one before.
        let mut leaves: Vec<Leaf<K>> = Vec::with_capacity(routes.len());
        let mut keys: Vec<(K, u32)> = Vec::new(); // distinct key, head leaf
        for (i, r) in (0u32..).zip(&routes) {
            let key = r.prefix.addr();
            let dupedkey = match keys.last_mut() {
                Some((k, head)) if *k == key => core::mem::replace(head, i),
                _ => {
                    keys.push((key, i));
                    NIL
                }
            };
            leaves.push(Leaf {
                key,
                len: r.prefix.len(),
                nexthop: r.nexthop,
                dupedkey,
                parent: NIL,
            });
        }

        // The tree over the distinct keys, top down from a work stack.
        let mut nodes: Vec<Node> = Vec::with_capacity(keys.len().saturating_sub(1));
        let mut root = NIL;
        let mut work: Vec<(usize, usize, u32, bool)> = Vec::new(); // lo, hi, parent, right?
        if !keys.is_empty() {
            work.push((0, keys.len(), NIL, false));
        }
        while let Some((lo, hi, parent, right)) = work.pop() {
            let range = keys.get(lo..hi).unwrap_or(&[]);
            let r = match range {
                [] => continue,
                [(_, head)] => {
                    let mut l = *head;
                    while let Some(leaf) = leaves.get_mut(l as usize) {
                        leaf.parent = parent;
                        l = leaf.dupedkey;
                    }
                    LEAF | *head
                }
                [(first, _), .., (last, _)] => {
                    // Distinct sorted keys: the first and last differ first where any do.
                    let bit = first.common_prefix_len(*last);
                    let split = lo + range.partition_point(|(k, _)| !k.bit(bit));
                    let idx = nodes.len() as u32; // fewer nodes than keys, so below LEAF
                    nodes.push(Node {
                        bit,
                        left: NIL,
                        right: NIL,
                        parent,
                        masks: NIL,
                    });
                    work.push((split, hi, idx, true));
                    work.push((lo, split, idx, false));
                    idx
                }
            };
            match nodes.get_mut(parent as usize) {
                Some(p) if right => p.right = r,
                Some(p) => p.left = r,
                None => root = r,
            }
        }

        // Mask lists: each prefix goes to the first node on its key's path testing a bit at
        // or past its length, if there is one.
        let mut attach: Vec<(u32, u8, u32)> = Vec::new(); // node, length, leaf
        for (i, leaf) in (0u32..).zip(&leaves) {
            let mut r = root;
            while let Some(n) = nodes.get(r as usize) {
                if n.bit >= leaf.len {
                    attach.push((r, leaf.len, i));
                    break;
                }
                r = if leaf.key.bit(n.bit) { n.right } else { n.left };
            }
        }
        // Shorter first, and each is pushed at the head: the lists end up longest first.
        attach.sort_unstable();
        let mut masks: Vec<Mask> = Vec::with_capacity(attach.len());
        for (node, _, leaf) in attach {
            if let Some(n) = nodes.get_mut(node as usize) {
                let at = masks.len() as u32; // at most one per prefix, so below NIL
                masks.push(Mask {
                    leaf,
                    next: n.masks,
                });
                n.masks = at;
            }
        }

        Ok(Radix {
            root,
            nodes,
            leaves,
            masks,
            free_nodes: Vec::new(),
            free_leaves: Vec::new(),
            free_masks: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::golden::Golden;
    use crate::testkit::{
        check_against_golden, check_updates, edge_tables_v4, edge_tables_v6, nested_steps_v4,
        nested_steps_v6, probes, routes_and_probes, updates_and_probes, v4, UpdateCase, POOL4,
        POOL6,
    };
    use proptest::prelude::*;

    fn check<K: Key>(routes: &[Route<K>], addrs: &[K]) {
        let golden = Golden::build(routes, &()).unwrap();
        let t = Radix::build(routes, &()).unwrap();
        let want: Vec<NextHop> = addrs.iter().map(|&a| golden.lookup(a)).collect();
        for (&a, &w) in addrs.iter().zip(&want) {
            assert_eq!(t.lookup(a), w, "lookup {a:?}");
            assert_eq!(t.lookup_route(a), golden.lookup_route(a), "{a:?}");
        }
        let mut out = vec![NO_ROUTE; addrs.len()];
        t.lookup_bulk(addrs, &mut out);
        assert_eq!(out, want);
        check_shape(&t);
    }

    /// Structural promises: parent links agree with child links, bits grow downwards, every
    /// prefix hangs exactly where its definition says, lists are longest first, and the free
    /// lists name exactly the slots nothing reaches.
    fn check_shape<K: Key>(t: &Radix<K>) {
        use std::collections::HashSet;
        let free_nodes: HashSet<u32> = t.free_nodes.iter().copied().collect();
        let free_leaves: HashSet<u32> = t.free_leaves.iter().copied().collect();
        let free_masks: HashSet<u32> = t.free_masks.iter().copied().collect();
        assert_eq!(free_nodes.len(), t.free_nodes.len(), "node freed twice");
        assert_eq!(free_leaves.len(), t.free_leaves.len(), "leaf freed twice");
        assert_eq!(free_masks.len(), t.free_masks.len(), "mask freed twice");
        let live_leaves: Vec<u32> = (0..t.leaves.len() as u32)
            .filter(|i| !free_leaves.contains(i))
            .collect();
        let distinct = {
            let mut k: Vec<K> = live_leaves
                .iter()
                .map(|&l| t.leaves[l as usize].key)
                .collect();
            k.sort_unstable();
            k.dedup();
            k.len()
        };
        assert_eq!(t.nodes.len() - free_nodes.len(), distinct.saturating_sub(1));

        // Everything live is reachable from the root exactly once.
        let (mut seen_nodes, mut seen_leaves) = (HashSet::new(), HashSet::new());
        let mut stack = vec![(t.root, NIL)];
        if t.root == NIL {
            stack.clear();
        }
        while let Some((r, parent)) = stack.pop() {
            if r & LEAF == 0 {
                assert!(seen_nodes.insert(r) && !free_nodes.contains(&r));
                let n = &t.nodes[r as usize];
                assert_eq!(n.parent, parent);
                if let Some(p) = t.nodes.get(parent as usize) {
                    assert!(n.bit > p.bit);
                }
                stack.push((n.left, r));
                stack.push((n.right, r));
            } else {
                let mut l = r & !LEAF;
                let head = t.leaves[l as usize];
                let mut prev_len = None;
                while l != NIL {
                    assert!(seen_leaves.insert(l) && !free_leaves.contains(&l));
                    let leaf = t.leaves[l as usize];
                    assert_eq!((leaf.key, leaf.parent), (head.key, parent));
                    assert!(prev_len.is_none_or(|p| p > leaf.len), "list longest first");
                    if let Some(n) = t.nodes.get(parent as usize) {
                        assert_eq!(leaf.key.bit(n.bit), t.nodes[parent as usize].right == r);
                    }
                    prev_len = Some(leaf.len);
                    l = leaf.dupedkey;
                }
            }
        }
        assert_eq!(seen_nodes.len(), t.nodes.len() - free_nodes.len());
        assert_eq!(seen_leaves.len(), live_leaves.len());

        // Masks: each list longest first, each entry where the definition puts it.
        let mut hung = HashSet::new();
        for &i in &seen_nodes {
            let n = &t.nodes[i as usize];
            let mut m = n.masks;
            let mut prev = u8::MAX;
            while m != NIL {
                assert!(!free_masks.contains(&m));
                let mask = t.masks[m as usize];
                let leaf = t.leaves[mask.leaf as usize];
                assert!(leaf.len <= n.bit && leaf.len <= prev);
                if let Some(p) = t.nodes.get(n.parent as usize) {
                    assert!(p.bit < leaf.len);
                }
                assert_eq!(t.attach_node(leaf.key, leaf.len), i);
                assert!(hung.insert(mask.leaf), "prefix hung twice");
                prev = leaf.len;
                m = mask.next;
            }
        }
        for &l in &live_leaves {
            let leaf = t.leaves[l as usize];
            assert_eq!(
                t.attach_node(leaf.key, leaf.len) != NIL,
                hung.contains(&l),
                "prefix {:?}/{} misses its mask",
                leaf.key,
                leaf.len
            );
        }
        assert_eq!(hung.len() + free_masks.len(), t.masks.len());
    }

    #[test]
    fn worked_example_from_the_module_doc() {
        let routes = [
            v4([0, 0, 0, 0], 0, 1),
            v4([10, 0, 0, 0], 8, 2),
            v4([10, 1, 0, 0], 16, 3),
            v4([10, 1, 2, 0], 24, 4),
            v4([192, 168, 0, 0], 16, 5),
        ];
        let t = Radix::build(&routes, &()).unwrap();
        let bits: Vec<u8> = t.nodes.iter().map(|n| n.bit).collect();
        assert_eq!(bits, [0, 4, 15, 22]);
        let masks: Vec<(u8, Vec<u8>)> = t
            .nodes
            .iter()
            .map(|n| {
                let mut v = Vec::new();
                let mut m = n.masks;
                while m != NIL {
                    v.push(t.leaves[t.masks[m as usize].leaf as usize].len);
                    m = t.masks[m as usize].next;
                }
                (n.bit, v)
            })
            .collect();
        assert_eq!(
            masks,
            [(0, vec![0]), (4, vec![]), (15, vec![8]), (22, vec![16])]
        );
        let route = |a: [u8; 4]| {
            t.lookup_route(u32::from_be_bytes(a))
                .map(|(p, nh)| (p.to_string(), nh))
        };
        assert_eq!(route([10, 1, 3, 4]), Some(("10.1.0.0/16".into(), 3)));
        assert_eq!(route([10, 200, 0, 1]), Some(("10.0.0.0/8".into(), 2)));
        assert_eq!(route([11, 0, 0, 1]), Some(("0.0.0.0/0".into(), 1)));
        assert_eq!(t.node_count(), 4 + 5);
        check(&routes, &probes(&routes, &[]));
    }

    #[test]
    fn empty_table() {
        let t = Radix::<u32>::build(&[], &()).unwrap();
        assert_eq!(t.lookup(0), NO_ROUTE);
        assert_eq!(t.lookup_route(u32::MAX), None);
        assert_eq!(t.node_count(), 0);
        let t = Radix::<u128>::build(&[], &()).unwrap();
        assert_eq!(t.lookup(u128::MAX), NO_ROUTE);
    }

    #[test]
    fn v4_edge_tables() {
        for (routes, addrs) in edge_tables_v4() {
            check(&routes, &addrs);
        }
    }

    #[test]
    fn v6_edge_tables() {
        for (routes, addrs) in edge_tables_v6() {
            check(&routes, &addrs);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn v4_random_tables_match_golden((routes, addrs) in routes_and_probes(POOL4)) {
            check(&routes, &addrs);
        }

        #[test]
        fn v6_random_tables_match_golden((routes, addrs) in routes_and_probes(POOL6)) {
            check(&routes, &addrs);
        }
    }

    /// `check_updates`, then the same batches again with the shape checked after each.
    fn check_updates_and_shape<K: Key>(case: &UpdateCase<K>) {
        check_updates::<K, Radix<K>>(&(), case, "radix");
        let (table, batches, _) = case;
        let mut map = RouteMap::from_routes(table);
        let mut t = Radix::build(table, &()).unwrap();
        for batch in batches {
            for r in batch {
                map.set(r.prefix, r.nexthop);
            }
            let changed: Vec<Prefix<K>> = batch.iter().map(|r| r.prefix).collect();
            t.update(&map, &changed).unwrap();
            check_shape(&t);
            let fresh = Radix::build(&map.to_routes(), &()).unwrap();
            assert_eq!(t.node_count(), fresh.node_count());
        }
    }

    #[test]
    fn announce_replace_withdraw_nested_prefixes() {
        let (steps4, addrs) = nested_steps_v4();
        let mut t = Radix::<u32>::build(&[], &()).unwrap();
        let mut map = RouteMap::new();
        for (i, r) in steps4.iter().enumerate() {
            map.set(r.prefix, r.nexthop);
            t.update(&map, &[r.prefix]).unwrap();
            check_against_golden(&t, &map.to_routes(), &addrs, &format!("v4 step {i}"));
            check_shape(&t);
        }
        assert_eq!(t.lookup(u32::from_be_bytes([10, 1, 2, 3])), 4);
        assert_eq!(t.lookup(u32::from_be_bytes([10, 9, 9, 9])), 11);
        assert_eq!(t.lookup(u32::from_be_bytes([10, 0, 0, 9])), 11);
        // Withdraw everything: the tree empties and every slot is on a free list.
        let all: Vec<Prefix<u32>> = map.iter().map(|r| r.prefix).collect();
        let empty = RouteMap::new();
        t.update(&empty, &all).unwrap();
        assert_eq!((t.root, t.node_count()), (NIL, 0));
        assert_eq!(t.free_masks.len(), t.masks.len());
        check_shape(&t);
        let size = (t.nodes.len(), t.leaves.len(), t.masks.len());
        // The same table again fits in the freed slots.
        t.update(&map, &all).unwrap();
        assert_eq!((t.nodes.len(), t.leaves.len(), t.masks.len()), size);
        check_against_golden(&t, &map.to_routes(), &addrs, "v4 again");
        check_shape(&t);

        let (steps6, addrs) = nested_steps_v6();
        let mut t = Radix::<u128>::build(&[], &()).unwrap();
        let mut map = RouteMap::new();
        for (i, r) in steps6.iter().enumerate() {
            map.set(r.prefix, r.nexthop);
            // Duplicates in `changed` are allowed.
            t.update(&map, &[r.prefix, r.prefix]).unwrap();
            check_against_golden(&t, &map.to_routes(), &addrs, &format!("v6 step {i}"));
            check_shape(&t);
        }
        assert_eq!(t.lookup(u128::MAX), 4);
        assert_eq!(t.lookup(0), 6);
        assert_eq!(t.lookup(1), NO_ROUTE);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn v4_updates_match_a_fresh_build(case in updates_and_probes(POOL4)) {
            check_updates_and_shape(&case);
        }

        #[test]
        fn v6_updates_match_a_fresh_build(case in updates_and_probes(POOL6)) {
            check_updates_and_shape(&case);
        }
    }
}
