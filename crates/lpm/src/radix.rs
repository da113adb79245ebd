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

use crate::key::Key;
use crate::prefix::{canonicalize, NextHop, Prefix, Route, NO_ROUTE};
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
}

impl<K: Key> Radix<K> {
    /// Internal nodes plus leaves (one leaf per prefix).
    pub fn node_count(&self) -> usize {
        self.nodes.len() + self.leaves.len()
    }

    /// The longest prefix covering `addr` and its next hop.
    pub fn lookup_route(&self, addr: K) -> Option<(Prefix<K>, NextHop)> {
        let l = self.find(addr)?;
        Some((Prefix::new_masked(l.key, l.len), l.nexthop))
    }

    /// `rn_match`. References that leave the arrays (impossible for a tree this module built)
    /// end the search with no match.
    fn find(&self, addr: K) -> Option<&Leaf<K>> {
        // Descend: children are allocated after their parent, so this moves forward and ends.
        let mut r = self.root;
        while r & LEAF == 0 {
            let n = self.nodes.get(r as usize)?;
            r = if addr.bit(n.bit) { n.right } else { n.left };
        }
        // The leaf's duplicate-key list, longest first.
        let head = self.leaves.get((r & !LEAF) as usize)?;
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
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::golden::Golden;
    use crate::testkit::{
        edge_tables_v4, edge_tables_v6, probes, routes_and_probes, v4, POOL4, POOL6,
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
    /// mask hangs where its definition says, lists are longest first.
    fn check_shape<K: Key>(t: &Radix<K>) {
        let distinct = {
            let mut k: Vec<K> = t.leaves.iter().map(|l| l.key).collect();
            k.dedup();
            k.len()
        };
        assert_eq!(t.nodes.len(), distinct.saturating_sub(1));
        for (i, n) in t.nodes.iter().enumerate() {
            for c in [n.left, n.right] {
                if c & LEAF == 0 {
                    let child = &t.nodes[c as usize];
                    assert_eq!(child.parent as usize, i);
                    assert!(child.bit > n.bit);
                } else {
                    assert_eq!(t.leaves[(c & !LEAF) as usize].parent as usize, i);
                }
            }
            let mut m = n.masks;
            let mut prev = u8::MAX;
            while m != NIL {
                let mask = t.masks[m as usize];
                let leaf = t.leaves[mask.leaf as usize];
                assert!(leaf.len <= n.bit && leaf.len <= prev);
                if let Some(p) = t.nodes.get(n.parent as usize) {
                    assert!(p.bit < leaf.len);
                }
                prev = leaf.len;
                m = mask.next;
            }
        }
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
}
