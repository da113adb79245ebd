//! A seedable synthetic full table shaped like the real 2024 one.
//!
//! A fresh clone has no reference data, yet benchmarks and tests want a full-size table whose
//! shape drives the engines the way the real one does. Two properties matter most: how many
//! prefixes there are of each length, and how many of them sit inside a shorter prefix
//! ("nested": they are what makes longest-prefix match harder than exact match). Both are
//! embedded below as counted from the real table, and the generator reproduces them exactly at
//! the default sizes (proportionally scaled for other sizes).
//!
//! ```text
//!   unicast space ─▶ allocations ─▶ free blocks ─▶ roots (not covered by a shorter prefix)
//!   (1/8..223/8 less    (/8../16 for v4,   (buddy split,     drawn at random from free
//!    10/8, 127/8, ...;   /12 for v6)        one random half    space, so they are disjoint)
//!    v6: 2000::/3)                          kept per step)
//!                                           nested prefixes: a random shorter prefix of the
//!                                           table, its host bits below the new length random
//! ```
//!
//! Lengths are generated from short to long. At each length `L` the generator makes
//! `count[L] - nested[L]` roots, each a block of length `L` carved from the free space of the
//! allocations (a free block of any length `<= L` is drawn at random and split down to `L`,
//! keeping a random half at each step; the other halves stay free), and `nested[L]` nested
//! prefixes, each a random sub-prefix of a random prefix already generated (all shorter).
//! Roots never overlap anything generated before them and nested prefixes always do, so the
//! nesting of every length comes out exactly as asked. Allocations are opened only as the
//! space is needed, which concentrates the table in a limited set of blocks as real tables
//! are (IPv4 fills most of the unicast space, as the real table covers 71% of all addresses;
//! IPv6 sits in a few RIR-sized /12 blocks of 2000::/3).
//!
//! The generator uses the crate's own [`Rng`], so a seed gives the same
//! table on every machine and with every dependency version. The output is sorted by address
//! and length and has no duplicates.

use std::collections::HashSet;

use rustc_hash::FxBuildHasher;

use vfsr_lpm::{Key, Prefix};

use crate::rng::Rng;
use crate::Table;

/// IPv4 prefixes of the real table (and of [`synth_table`]).
pub const DEFAULT_V4: usize = 901_899;
/// IPv6 prefixes of the real table (and of [`synth_table`]).
pub const DEFAULT_V6: usize = 160_147;

/// `(length, prefixes, nested)` of the IPv4 part of the real table, where `nested` counts the
/// prefixes covered by a shorter prefix of the table. Counted from
/// `shared/data/tier1-2024-prefixes.txt.gz` (a tier-1 ISP's table of March 2024, from the
/// iprbench test data) with a one-off script; only these statistics are kept here.
pub const REAL_V4_STATS: &[(u8, u32, u32)] = &[
    (8, 16, 0),
    (9, 13, 4),
    (10, 38, 0),
    (11, 103, 4),
    (12, 299, 31),
    (13, 581, 96),
    (14, 1_203, 178),
    (15, 2_100, 464),
    (16, 13_490, 3_206),
    (17, 8_235, 3_754),
    (18, 13_798, 6_875),
    (19, 24_870, 9_815),
    (20, 42_611, 23_206),
    (21, 50_750, 27_723),
    (22, 108_623, 49_227),
    (23, 96_510, 55_056),
    (24, 537_698, 276_616),
    (25, 20, 20),
    (26, 3, 3),
    (27, 11, 11),
    (28, 18, 17),
    (29, 17, 17),
    (30, 3, 3),
    (31, 3, 3),
    (32, 886, 880),
];

/// `(length, prefixes, nested)` of the IPv6 part of the real table; see [`REAL_V4_STATS`].
pub const REAL_V6_STATS: &[(u8, u32, u32)] = &[
    (16, 1, 0),
    (19, 1, 0),
    (20, 16, 0),
    (21, 3, 0),
    (22, 7, 0),
    (23, 8, 0),
    (24, 30, 3),
    (25, 8, 1),
    (26, 15, 0),
    (27, 20, 2),
    (28, 193, 85),
    (29, 4_371, 54),
    (30, 650, 283),
    (31, 284, 130),
    (32, 22_548, 5_727),
    (33, 2_926, 2_367),
    (34, 2_603, 1_873),
    (35, 1_043, 649),
    (36, 5_996, 3_392),
    (37, 880, 663),
    (38, 1_617, 848),
    (39, 1_377, 1_130),
    (40, 13_418, 10_235),
    (41, 903, 480),
    (42, 2_301, 1_832),
    (43, 1_001, 434),
    (44, 14_365, 10_306),
    (45, 1_553, 1_268),
    (46, 3_039, 1_618),
    (47, 3_153, 2_477),
    (48, 75_488, 44_913),
    (49, 11, 11),
    (50, 3, 3),
    (52, 1, 1),
    (55, 1, 1),
    (56, 24, 23),
    (58, 20, 20),
    (60, 2, 0),
    (64, 184, 179),
    (112, 2, 2),
    (122, 1, 1),
    (124, 4, 4),
    (125, 9, 9),
    (126, 19, 19),
    (127, 42, 42),
    (128, 6, 6),
];

/// The seed [`crate::shared::load_default_table`] uses for the synthetic table.
pub const DEFAULT_SEED: u64 = 2024;

/// Seed salts so the two families of one seed are independent streams.
const SALT_V4: u64 = 0x7634_0000_0000_0004;
const SALT_V6: u64 = 0x7636_0000_0000_0006;

/// How many RIR-sized /12 blocks of 2000::/3 the IPv6 table starts in.
const V6_RIR_BLOCKS: usize = 6;

/// Attempts to place one nested prefix before giving up on it.
const NESTED_TRIES: usize = 32;

/// The per-length duplicate check: rustc-hash's Fx hash (keys are generator-made, no seed
/// needed; only insertion is used, so the table does not depend on the hash).
type FastSet = HashSet<u128, FxBuildHasher>;

/// The left-aligned mask of the first `len` bits (`len <= 128`).
fn mask(len: u8) -> u128 {
    u128::MAX
        .checked_shl(128u32.saturating_sub(u32::from(len)))
        .unwrap_or(0)
}

/// The left-aligned single bit at position `i` (0 = most significant); 0 past bit 127.
fn bit(i: u8) -> u128 {
    (1u128 << 127).checked_shr(u32::from(i)).unwrap_or(0)
}

/// Addresses in a block of length `len`, as a left-aligned quantity (`2^(128 - len)`);
/// saturates for `/0`.
fn block_size(len: u8) -> u128 {
    1u128
        .checked_shl(128u32.saturating_sub(u32::from(len)))
        .unwrap_or(u128::MAX)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

/// Per-length targets: `(length, prefixes, nested)`.
type Targets = Vec<(u8, usize, usize)>;

/// Scales the real statistics to `n` prefixes: largest-remainder rounding of the counts (so
/// they sum to `n`), nested counts in the real proportion of each length.
fn scaled_targets(stats: &[(u8, u32, u32)], n: usize) -> Targets {
    let total: u128 = stats.iter().map(|&(_, c, _)| u128::from(c)).sum();
    if total == 0 {
        return Vec::new();
    }
    let n128 = n as u128;
    let mut out: Vec<(u8, usize, usize)> = Vec::with_capacity(stats.len());
    let mut rems: Vec<(u128, usize)> = Vec::with_capacity(stats.len());
    let mut assigned: u128 = 0;
    for (i, &(len, c, _)) in stats.iter().enumerate() {
        let exact = u128::from(c).saturating_mul(n128);
        let base = exact / total;
        assigned = assigned.saturating_add(base);
        rems.push((exact % total, i));
        out.push((len, usize::try_from(base).unwrap_or(usize::MAX), 0));
    }
    // Largest remainders first; ties go to the earlier (shorter) length.
    rems.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let missing = usize::try_from(n128.saturating_sub(assigned)).unwrap_or(0);
    for &(_, i) in rems.iter().take(missing) {
        if let Some(t) = out.get_mut(i) {
            t.1 = t.1.saturating_add(1);
        }
    }
    for (t, &(_, c, nested)) in out.iter_mut().zip(stats) {
        // nested' = round(nested * count' / count)
        let c = u128::from(c.max(1));
        let v = (u128::from(nested) * (t.1 as u128) * 2 + c) / (2 * c);
        t.2 = usize::try_from(v).unwrap_or(0).min(t.1);
    }
    out
}

/// The generator's state for one family.
struct Generator {
    family: Family,
    rng: Rng,
    /// Free blocks by length (left-aligned addresses).
    free: Vec<Vec<u128>>,
    /// v4: which /16s are allocated or reserved; v6: which /12s of 2000::/3 are allocated.
    used: Vec<bool>,
}

/// IPv4 ranges never allocated: `(first /16 index, number of /16s)`.
const V4_RESERVED: &[(usize, usize)] = &[
    (0x0000, 0x100),            // 0.0.0.0/8
    (0x0a00, 0x100),            // 10.0.0.0/8
    (0x6440, 0x40),             // 100.64.0.0/10
    (0x7f00, 0x100),            // 127.0.0.0/8
    (0xa9fe, 1),                // 169.254.0.0/16
    (0xac10, 0x10),             // 172.16.0.0/12
    (0xc0a8, 1),                // 192.168.0.0/16
    (0xc612, 2),                // 198.18.0.0/15
    (0xe000, 0x10000 - 0xe000), // 224.0.0.0/3: multicast and class E
];

impl Generator {
    fn new(family: Family, seed: u64) -> Self {
        let (salt, used_len) = match family {
            Family::V4 => (SALT_V4, 1 << 16),
            Family::V6 => (SALT_V6, 1 << 9),
        };
        let mut used = vec![false; used_len];
        if family == Family::V4 {
            for &(start, n) in V4_RESERVED {
                for u in used.iter_mut().skip(start).take(n) {
                    *u = true;
                }
            }
        }
        Generator {
            family,
            rng: Rng::new(seed ^ salt),
            free: vec![Vec::new(); 129],
            used,
        }
    }

    fn width(&self) -> u8 {
        match self.family {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }

    /// Marks `count` slots from `start` used if all are free.
    fn claim(&mut self, start: usize, count: usize) -> bool {
        let Some(slots) = start
            .checked_add(count)
            .and_then(|end| self.used.get_mut(start..end))
        else {
            return false;
        };
        if slots.iter().any(|&u| u) {
            return false;
        }
        slots.iter_mut().for_each(|u| *u = true);
        true
    }

    /// Opens a new allocation that can hold a block of length `max_len`; adds it to the free
    /// lists. `false` when the space is exhausted.
    fn allocate(&mut self, max_len: u8) -> bool {
        match self.family {
            Family::V4 => {
                if max_len < 8 {
                    return false;
                }
                let hi = max_len.min(16);
                let first = 8 + self.rng.below(u64::from(hi - 8) + 1) as u8;
                (first..=hi).any(|len| self.allocate_v4(len))
            }
            Family::V6 => max_len >= 12 && self.allocate_v6(),
        }
    }

    /// An IPv4 allocation of length `len` (8..=16), tracked at /16 granularity.
    fn allocate_v4(&mut self, len: u8) -> bool {
        let count = 1usize << (16 - len);
        let blocks = 1usize << len;
        let place = |g: &mut Self, i: usize| {
            let start = i * count;
            if g.claim(start, count) {
                let addr = (start as u128) << 112;
                if let Some(list) = g.free.get_mut(usize::from(len)) {
                    list.push(addr);
                }
                true
            } else {
                false
            }
        };
        for _ in 0..64 {
            let i = self.rng.index(blocks);
            if place(self, i) {
                return true;
            }
        }
        let offset = self.rng.index(blocks);
        (0..blocks).any(|k| place(self, (offset + k) % blocks))
    }

    /// An IPv6 allocation: a /12 of 2000::/3.
    fn allocate_v6(&mut self) -> bool {
        let n = self.used.len();
        let offset = self.rng.index(n);
        for k in 0..n {
            let i = (offset + k) % n;
            if self.claim(i, 1) {
                let addr = ((0x200 | i) as u128) << 116;
                if let Some(list) = self.free.get_mut(12) {
                    list.push(addr);
                }
                return true;
            }
        }
        false
    }

    /// A free block of length `len` (a random free block of length `<= len`, split down with a
    /// random half kept at each step), opening allocations as needed.
    fn take_block(&mut self, len: u8) -> Option<u128> {
        loop {
            let lists = self.free.get(..=usize::from(len))?;
            let total: usize = lists.iter().map(Vec::len).sum();
            if total > 0 {
                let mut pick = self.rng.index(total);
                let mut found = None;
                for (l, list) in self.free.iter_mut().enumerate().take(usize::from(len) + 1) {
                    if pick < list.len() {
                        found = Some((l as u8, list.swap_remove(pick)));
                        break;
                    }
                    pick -= list.len();
                }
                let (mut l, mut block) = found?;
                while l < len {
                    let half = bit(l);
                    let (keep, other) = if self.rng.coin() {
                        (block, block | half)
                    } else {
                        (block | half, block)
                    };
                    block = keep;
                    l += 1;
                    self.free.get_mut(usize::from(l))?.push(other);
                }
                return Some(block);
            }
            if !self.allocate(len) {
                return None;
            }
        }
    }

    /// A random sub-prefix of length `len` of a random prefix in `parents` (all shorter than
    /// `len`) that is not yet in `taken`.
    fn nested(&mut self, parents: &[(u128, u8)], len: u8, taken: &mut FastSet) -> Option<u128> {
        for _ in 0..NESTED_TRIES {
            let &(paddr, plen) = parents.get(self.rng.index(parents.len()))?;
            let host = mask(len) & !mask(plen);
            let addr = paddr | (self.rng.next_u128() & host);
            if taken.insert(addr) {
                return Some(addr);
            }
        }
        None
    }

    /// Generates prefixes per `targets` (sorted by length).
    fn run(&mut self, targets: &Targets) -> Vec<(u128, u8)> {
        let want: usize = targets.iter().map(|t| t.1).sum();
        let mut out: Vec<(u128, u8)> = Vec::with_capacity(want);
        // The space the roots need, to open the first allocations in one go (v4).
        let root_space = targets.iter().fold(0u128, |acc, &(len, c, nested)| {
            let roots = c.saturating_sub(nested) as u128;
            acc.saturating_add(roots.saturating_mul(block_size(len)))
        });
        match self.family {
            Family::V4 => {
                let available: u128 = block_size(16)
                    .saturating_mul(self.used.iter().filter(|&&u| !u).count() as u128);
                let budget = (root_space / 20).saturating_mul(23).min(available / 10 * 9);
                let mut opened: u128 = 0;
                while opened < budget {
                    let before: u128 = self.free_space();
                    if !self.allocate(16) {
                        break;
                    }
                    opened = opened.saturating_add(self.free_space().saturating_sub(before));
                }
            }
            Family::V6 => {
                for _ in 0..V6_RIR_BLOCKS {
                    self.allocate_v6();
                }
            }
        }
        let mut carry = 0usize;
        let mut taken = FastSet::default();
        for &(len, count, nested) in targets {
            if len > self.width() {
                continue;
            }
            let parents_end = out.len();
            let goal = count.saturating_add(carry);
            let mut nested_goal = nested.min(goal);
            if parents_end == 0 {
                nested_goal = 0;
            }
            let mut made = 0usize;
            for _ in 0..goal.saturating_sub(nested_goal) {
                match self.take_block(len) {
                    Some(a) => {
                        out.push((a, len));
                        made += 1;
                    }
                    // No space left for a root: make it a nested prefix instead.
                    None => nested_goal = nested_goal.saturating_add(1),
                }
            }
            taken.clear();
            for _ in 0..nested_goal {
                let Some(parents) = out.get(..parents_end) else {
                    break;
                };
                if let Some(a) = self.nested(parents, len, &mut taken) {
                    out.push((a, len));
                    made += 1;
                }
            }
            carry = goal.saturating_sub(made);
        }
        out
    }

    /// Addresses in the free lists (left-aligned units), for the allocation budget.
    fn free_space(&self) -> u128 {
        self.free
            .iter()
            .enumerate()
            .fold(0u128, |acc, (len, list)| {
                let size = block_size(u8::try_from(len).unwrap_or(128));
                acc.saturating_add(size.saturating_mul(list.len() as u128))
            })
    }
}

fn generate<K: Key>(
    family: Family,
    stats: &[(u8, u32, u32)],
    seed: u64,
    n: usize,
) -> Vec<Prefix<K>> {
    let targets = scaled_targets(stats, n);
    let mut g = Generator::new(family, seed);
    let raw = g.run(&targets);
    let mut out: Vec<Prefix<K>> = raw
        .into_iter()
        .map(|(a, len)| Prefix::new_masked(K::from_u128_left(a), len))
        .collect();
    out.sort_unstable();
    out
}

/// `n` distinct IPv4 prefixes shaped like the real table (length histogram and nesting per
/// length scaled to `n`), in (address, length) order. Fewer than `n` only if the address space
/// runs out (far beyond any real table size).
pub fn synth_v4(seed: u64, n: usize) -> Vec<Prefix<u32>> {
    generate(Family::V4, REAL_V4_STATS, seed, n)
}

/// `n` distinct IPv6 prefixes inside 2000::/3 shaped like the real table; see [`synth_v4`].
pub fn synth_v6(seed: u64, n: usize) -> Vec<Prefix<u128>> {
    generate(Family::V6, REAL_V6_STATS, seed, n)
}

/// A synthetic full table of the real table's size ([`DEFAULT_V4`] + [`DEFAULT_V6`]) with
/// nh64 next hops.
pub fn synth_table(seed: u64) -> Table {
    Table::from_prefixes(&synth_v4(seed, DEFAULT_V4), &synth_v6(seed, DEFAULT_V6))
}

/// Prefixes per length: element `l` counts the prefixes of length `l` (`K::BITS + 1`
/// elements).
pub fn length_histogram<K: Key>(prefixes: &[Prefix<K>]) -> Vec<u64> {
    let mut h = vec![0u64; usize::from(K::BITS) + 1];
    for p in prefixes {
        if let Some(c) = h.get_mut(usize::from(p.len())) {
            *c += 1;
        }
    }
    h
}

/// Nested prefixes per length: element `l` counts the prefixes of length `l` covered by a
/// strictly shorter prefix of the same list (`K::BITS + 1` elements).
pub fn nested_histogram<K: Key>(prefixes: &[Prefix<K>]) -> Vec<u64> {
    let mut sorted = prefixes.to_vec();
    sorted.sort_unstable();
    let mut h = vec![0u64; usize::from(K::BITS) + 1];
    // The chain of prefixes covering the current one, shortest first.
    let mut stack: Vec<Prefix<K>> = Vec::with_capacity(usize::from(K::BITS) + 1);
    for p in sorted {
        while let Some(top) = stack.last() {
            if top.len() < p.len() && top.covers(&p) {
                break;
            }
            stack.pop();
        }
        if !stack.is_empty() {
            if let Some(c) = h.get_mut(usize::from(p.len())) {
                *c += 1;
            }
        }
        stack.push(p);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_sum_to_the_real_sizes() {
        let v4: u32 = REAL_V4_STATS.iter().map(|t| t.1).sum();
        let v6: u32 = REAL_V6_STATS.iter().map(|t| t.1).sum();
        assert_eq!(v4 as usize, DEFAULT_V4);
        assert_eq!(v6 as usize, DEFAULT_V6);
        assert!(REAL_V4_STATS.iter().all(|t| t.2 <= t.1));
        assert!(REAL_V6_STATS.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn scaling() {
        let t = scaled_targets(REAL_V4_STATS, DEFAULT_V4);
        for (a, b) in t.iter().zip(REAL_V4_STATS) {
            assert_eq!((a.0, a.1, a.2), (b.0, b.1 as usize, b.2 as usize));
        }
        for n in [0, 1, 7, 1000, 12_345] {
            let t = scaled_targets(REAL_V6_STATS, n);
            assert_eq!(t.iter().map(|t| t.1).sum::<usize>(), n);
        }
    }

    #[test]
    fn small_tables_are_exact_and_distinct() {
        for n in [0, 1, 10, 1000] {
            let v4 = synth_v4(1, n);
            assert_eq!(v4.len(), n);
            assert!(v4.windows(2).all(|w| w[0] < w[1]));
            let v6 = synth_v6(1, n);
            assert_eq!(v6.len(), n);
            assert!(v6.windows(2).all(|w| w[0] < w[1]));
            assert!(v6.iter().all(|p| p.addr() >> 125 == 1), "inside 2000::/3");
        }
    }

    #[test]
    fn v4_avoids_reserved_space() {
        for p in synth_v4(3, 20_000) {
            let first = p.addr() >> 24;
            assert!(
                (1..=223).contains(&first) && first != 10 && first != 127,
                "{p}"
            );
            assert_ne!(p.addr() >> 16, 0xc0a8, "{p}");
        }
    }

    #[test]
    fn nesting_histogram_by_hand() {
        let p = |a: u32, l: u8| Prefix::<u32>::new(a, l).unwrap();
        let list = [
            p(0x0a00_0000, 8),
            p(0x0a00_0000, 16),
            p(0x0a00_0000, 24),
            p(0x0b00_0000, 24),
            p(0x0a00_0000, 16),
        ];
        let h = nested_histogram(&list);
        assert_eq!((h[8], h[16], h[24]), (0, 2, 1));
        assert_eq!(length_histogram(&list)[16], 2);
    }
}
