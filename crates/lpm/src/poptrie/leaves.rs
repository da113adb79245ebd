//! A node's 64 slots to and from its leaves: the writer's side of the leaf vector.
//!
//! A node (or a childless node's record) keeps one leaf per run of equal next hops among its
//! leaf slots, and a leaf vector with a bit where each run starts (see the module above). An
//! update that changes some of a node's slots decodes the 64 slots from the leaves, repaints
//! the range it changes and encodes them again; those two steps were a third of an IPv4
//! update's instructions (callgrind), so both are done eight slots at a time with SSSE3's byte
//! shuffle, which x86-64-v2 (this build's baseline) has:
//!
//! ```text
//!   decode, slots 8k..8k+8:  run starts b = leafvec byte k       b = 0b0100_1001
//!                            rank before the byte: r             ranks  r r r r+1 r+1 r+1 r+2 r+3
//!                            eight leaves from r, one shuffle ──▶ slots  L L L L'  L'  L'  L'' L'''
//!   emit,   slots 8k..8k+8:  the run starts' slots packed to the front by one shuffle, stored
//!                            where the leaves so far end, that end moved by popcnt(b)
//! ```
//!
//! The shuffles' control bytes come from two tables of 256 entries (4 KiB each), one per
//! pattern of eight bits. Elsewhere, or built without SSSE3, the slots are walked one by one
//! (the reference the tests hold the shuffles to).

use super::arena::Arena;
use super::upto;

/// Writes to `out` the leaves of a node's leaf slots (those not in `vector`), one per run of
/// equal next hops; returns the leaf vector and the number of leaves (at most 64, which `out`
/// must hold; with 64 or more, the slots of `out` past the leaves may be overwritten too).
///
/// A leaf slot starts a run where it differs from the leaf slot before it. For a slot whose
/// neighbour below is a leaf slot too, that is one comparison with the neighbour, made for all
/// 64 slots at once ([`differs_from_below`]); only a slot right above a child looks further
/// down, one by one. Then the leaves are written, eight slots at a time where SSSE3 is at hand.
/// A loop over the 64 slots with a branch on each was most of this function's time in updates,
/// a rebuilt node being mostly slots inside runs.
pub(super) fn emit_leaves(slots: &[u16; 64], vector: u64, out: &mut [u16]) -> (u64, usize) {
    let leaf = !vector;
    let above_child = leaf & (vector << 1);
    let mut leafvec = leaf & differs_from_below(slots) & !above_child;
    let mut fix = above_child;
    while fix != 0 {
        let i = fix.trailing_zeros() as usize;
        fix &= fix - 1;
        let below = leaf & (upto(i) >> 1);
        let starts = below == 0 || slots[63 - below.leading_zeros() as usize] != slots[i];
        leafvec |= u64::from(starts) << i;
    }
    #[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
    if let Some(out) = out.first_chunk_mut::<64>() {
        return (leafvec, ssse3::pack(slots, leafvec, out));
    }
    (leafvec, pack_one_by_one(slots, leafvec, out))
}

/// The slots `leafvec` marks, in order, written to `out` (as many as fit); their count.
fn pack_one_by_one(slots: &[u16; 64], leafvec: u64, out: &mut [u16]) -> usize {
    let mut n = 0;
    let mut runs = leafvec;
    while runs != 0 {
        let i = runs.trailing_zeros() as usize;
        runs &= runs - 1;
        if let Some(o) = out.get_mut(n) {
            *o = slots[i];
        }
        n += 1;
    }
    n
}

/// One bit per slot: set where the slot's value differs from the slot below it, and for slot
/// 0. Eight comparisons of eight slots with SSE2 (always present on x86-64), elsewhere a loop.
#[inline]
fn differs_from_below(slots: &[u16; 64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            _mm_cmpeq_epi16, _mm_loadu_si128, _mm_movemask_epi8, _mm_packs_epi16,
            _mm_setzero_si128, _mm_slli_si128,
        };
        let p = slots.as_ptr();
        let mut same = 0u64;
        for k in 0..8 {
            // SAFETY: every load reads eight u16 inside `slots` (64 long): slots k*8.. and,
            // for k > 0, slots k*8 - 1..; SSE2 is part of x86-64.
            let m = unsafe {
                let cur = _mm_loadu_si128(p.add(k * 8).cast());
                let below = if k == 0 {
                    // Slots 0..7 moved up one lane (slot 0's lane gets 0; slot 0 is set
                    // below whatever it compares with).
                    _mm_slli_si128::<2>(cur)
                } else {
                    _mm_loadu_si128(p.add(k * 8 - 1).cast())
                };
                let eq = _mm_cmpeq_epi16(cur, below);
                _mm_movemask_epi8(_mm_packs_epi16(eq, _mm_setzero_si128())) as u64 & 0xff
            };
            same |= m << (k * 8);
        }
        !same | 1
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut d = 1u64;
        for i in 1..64 {
            d |= u64::from(slots[i] != slots[i - 1]) << i;
        }
        d
    }
}

/// The 64 slots whose leaves start at `at` in `arena`, one leaf per bit of `leafvec` (the
/// inverse of [`emit_leaves`]); a slot of `vector` (a child's) reads as 0.
///
/// A slot takes the leaf its rank names: the number of run starts (bits of `leafvec` that are
/// not children) at or below it, less one. A leaf slot below the first start, and every leaf
/// slot when no bit is set (neither happens in a built trie), reads the first leaf.
pub(super) fn decode_leaves(arena: &Arena<u16>, at: usize, leafvec: u64, vector: u64) -> [u16; 64] {
    #[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
    {
        ssse3::decode(arena, at, leafvec, vector)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "ssse3")))]
    {
        decode_one_by_one(arena, at, leafvec, vector)
    }
}

/// Runs of a node at most that [`decode_one_by_one`] fills one by one.
const FEW_RUNS: usize = 4;

/// [`decode_leaves`] a slot at a time (without SSSE3, and the reference in the tests).
///
/// The leaves are read once. With few runs, each run's leaf fills its slots (less work than
/// 64 rank steps); otherwise each slot takes the leaf its rank among the marks
/// names, the rank counted up slot by slot, and a child's slot is cleared by a select. A loop
/// with a branch per slot, or filling run after run when runs are many, missed often enough
/// to be a large part of an update's time.
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "ssse3"),
    allow(dead_code)
)]
fn decode_one_by_one(arena: &Arena<u16>, at: usize, leafvec: u64, vector: u64) -> [u16; 64] {
    let marks = leafvec & !vector;
    let n = leaf_count(marks, vector);
    let mut leaves = [0u16; 64];
    for (j, l) in leaves.iter_mut().enumerate().take(n) {
        *l = arena.get(at + j);
    }
    let mut slots = [0u16; 64];
    if n <= FEW_RUNS && marks != 0 {
        // Few runs: each run's leaf fills its slots, up to the next mark.
        let mut m = marks;
        let (mut j, mut start) = (0, 0);
        while m != 0 {
            m &= m - 1;
            let end = if m == 0 {
                64
            } else {
                m.trailing_zeros() as usize
            };
            slots[start..end].fill(leaves[j & 63]);
            j += 1;
            start = end;
        }
        let mut children = vector;
        while children != 0 {
            slots[children.trailing_zeros() as usize] = 0;
            children &= children - 1;
        }
        return slots;
    }
    let mut rank = 0usize;
    for (i, v) in slots.iter_mut().enumerate() {
        rank += (marks >> i & 1) as usize;
        let leaf = leaves[rank.saturating_sub(1) & 63];
        *v = core::hint::select_unpredictable(vector >> i & 1 != 0, 0, leaf);
    }
    slots
}

/// How many leaves a node with run starts `marks` (children left out) and children `vector`
/// keeps: one per start, and one when no slot starts a run but some slot is a leaf.
#[inline]
fn leaf_count(marks: u64, vector: u64) -> usize {
    if marks == 0 && vector != u64::MAX {
        1
    } else {
        marks.count_ones() as usize
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
mod ssse3 {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_andnot_si128, _mm_cmpeq_epi16, _mm_loadu_si128, _mm_set1_epi16,
        _mm_set_epi16, _mm_shuffle_epi8, _mm_storeu_si128,
    };

    use super::{leaf_count, Arena};

    /// For each pattern of run starts among eight slots, the shuffle that gives each slot its
    /// leaf from eight leaves in a row: the first of them is the leaf of the rank before the
    /// eight slots, or, when all eight start runs (where the ranks reach nine leaves), the
    /// next one.
    static EXPAND: [[u8; 16]; 256] = {
        let mut t = [[0u8; 16]; 256];
        let mut b = 0;
        while b < 256 {
            let skip = (b == 255) as usize;
            let (mut rank, mut j) = (0usize, 0);
            while j < 8 {
                rank += (b >> j) & 1;
                let lane = rank - skip;
                t[b][2 * j] = (2 * lane) as u8;
                t[b][2 * j + 1] = (2 * lane + 1) as u8;
                j += 1;
            }
            b += 1;
        }
        t
    };

    /// For each pattern of eight bits, the shuffle that packs the marked 16-bit lanes to the
    /// front, in order.
    static PACK: [[u8; 16]; 256] = {
        let mut t = [[0x80u8; 16]; 256];
        let mut b = 0;
        while b < 256 {
            let (mut n, mut j) = (0, 0);
            while j < 8 {
                if (b >> j) & 1 != 0 {
                    t[b][2 * n] = (2 * j) as u8;
                    t[b][2 * n + 1] = (2 * j + 1) as u8;
                    n += 1;
                }
                j += 1;
            }
            b += 1;
        }
        t
    };

    /// The lane bits of one byte of a 64-bit vector, as 16-bit lanes: lane `j` is all ones
    /// where bit `j` of `byte` is set.
    #[inline(always)]
    fn lanes_of(byte: u8) -> __m128i {
        // SAFETY: SSE2 is part of x86-64.
        unsafe {
            let bits = _mm_set_epi16(128, 64, 32, 16, 8, 4, 2, 1);
            _mm_cmpeq_epi16(_mm_and_si128(_mm_set1_epi16(i16::from(byte)), bits), bits)
        }
    }

    /// [`super::decode_leaves`], eight slots per shuffle.
    #[inline]
    pub(super) fn decode(arena: &Arena<u16>, at: usize, leafvec: u64, vector: u64) -> [u16; 64] {
        let marks = leafvec & !vector;
        // `ranked[r]` is the leaf of the slots of rank `r`: leaf `r - 1`, and the first leaf
        // for rank 0; then room for a window of eight read past the last leaf.
        let mut ranked = [0u16; 1 + 64 + 8];
        if at + 64 <= arena.len() {
            // SAFETY: slots `at..at + 64` are in the arena. This runs in the writer, the one
            // thread that writes the arena, and it does not write while it reads; the slots
            // past the node's leaves are read only to move them as a block and never used.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    arena.as_ptr().add(at),
                    ranked.as_mut_ptr().add(1),
                    64,
                );
            }
        } else {
            let n = leaf_count(marks, vector);
            for (j, l) in ranked[1..].iter_mut().enumerate().take(n) {
                *l = arena.get(at + j);
            }
        }
        ranked[0] = ranked[1];
        let mut slots = [0u16; 64];
        let mut rank = 0usize;
        for k in 0..8 {
            let b = (marks >> (8 * k)) as u8;
            let from = rank + usize::from(b == 0xff);
            let children = lanes_of((vector >> (8 * k)) as u8);
            // SAFETY: `from + 8 <= 8 * k + 1 + 8 <= 65 + 8`, the length of `ranked` (the rank
            // before byte k is at most 8k); the store writes slots 8k..8k + 8 of 64; the
            // shuffle is SSSE3, which this module is built only with.
            unsafe {
                let window = _mm_loadu_si128(ranked.as_ptr().add(from).cast());
                let control = _mm_loadu_si128(EXPAND[usize::from(b)].as_ptr().cast());
                let leaves = _mm_shuffle_epi8(window, control);
                let out = _mm_andnot_si128(children, leaves);
                _mm_storeu_si128(slots.as_mut_ptr().add(8 * k).cast(), out);
            }
            rank += b.count_ones() as usize;
        }
        slots
    }

    /// The slots `leafvec` marks, in order, to the front of `out`; their count.
    #[inline]
    pub(super) fn pack(slots: &[u16; 64], leafvec: u64, out: &mut [u16; 64]) -> usize {
        let mut n = 0usize;
        for k in 0..8 {
            let b = (leafvec >> (8 * k)) as u8;
            // SAFETY: the load reads slots 8k..8k + 8 of 64; the store writes eight lanes at
            // `n`, the count of marks below slot 8k, so at most 8k, and `n + 8 <= 64`; the
            // shuffle is SSSE3, which this module is built only with.
            unsafe {
                let v = _mm_loadu_si128(slots.as_ptr().add(8 * k).cast());
                let control = _mm_loadu_si128(PACK[usize::from(b)].as_ptr().cast());
                _mm_storeu_si128(out.as_mut_ptr().add(n).cast(), _mm_shuffle_epi8(v, control));
            }
            n += b.count_ones() as usize;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::xorshift;

    /// The leaves of a node's slots by their definition, one slot at a time: a leaf slot
    /// starts a run where it differs from the last leaf slot before it.
    fn emit_by_definition(slots: &[u16; 64], vector: u64) -> (u64, Vec<u16>) {
        let (mut leafvec, mut out, mut prev) = (0u64, Vec::new(), None);
        for (i, &leaf) in slots.iter().enumerate() {
            if vector >> i & 1 == 0 && prev != Some(leaf) {
                leafvec |= 1 << i;
                out.push(leaf);
                prev = Some(leaf);
            }
        }
        (leafvec, out)
    }

    /// Slots in runs of up to `hops` next hops, a new run at a slot with chance 1 in `every`.
    fn runs(rnd: &mut impl FnMut() -> u64, hops: u64, every: u64) -> [u16; 64] {
        let mut slots = [0u16; 64];
        let mut v = (rnd() % hops) as u16;
        for s in slots.iter_mut() {
            if rnd().is_multiple_of(every) {
                v = (rnd() % hops) as u16;
            }
            *s = v;
        }
        slots
    }

    #[test]
    fn leaves_are_emitted_and_decoded_as_the_slots_define_them() {
        let mut rnd = xorshift(0x1ea7_5eed);
        let arena = Arena::<u16>::zeroed(128).unwrap();
        // Fewer under Miri, which checks the unsafe reads and copies, not the cases.
        let cases = if cfg!(miri) { 300 } else { 20_000 };
        for case in 0..cases {
            // Runs of a few next hops or of many (up to a new one at every slot), children
            // dense or sparse, and the edges: no child, every slot a child, a child at slot
            // 0 and at slot 63. The leaves go near the arena's end in every fourth case,
            // where the decode reads them one by one.
            let slots = match case % 3 {
                0 => runs(&mut rnd, 4, 6),
                1 => runs(&mut rnd, 1000, 2),
                _ => runs(&mut rnd, 60_000, 1),
            };
            let vector = match case % 8 {
                0 => 0,
                1 => u64::MAX,
                2 => rnd() | 1 | 1 << 63,
                3 => rnd() & rnd() & rnd(),
                _ => rnd() & rnd(),
            };
            let mut out = [0xffffu16; 64];
            let (leafvec, n) = emit_leaves(&slots, vector, &mut out);
            let (want_vec, want) = emit_by_definition(&slots, vector);
            assert_eq!((leafvec, &out[..n]), (want_vec, &want[..]), "case {case}");
            // A short `out` takes the leaves that fit.
            let mut short = [0u16; 5];
            assert_eq!(emit_leaves(&slots, vector, &mut short), (leafvec, n));
            assert_eq!(&short[..n.min(5)], &want[..n.min(5)], "case {case}");
            let at = if case % 4 == 0 { 128 - n.max(1) } else { 7 };
            for (k, &l) in want.iter().enumerate() {
                // SAFETY: the arena is this test's alone.
                unsafe { arena.set(at + k, l) };
            }
            let back = decode_leaves(&arena, at, leafvec, vector);
            for i in 0..64 {
                let want = if vector >> i & 1 != 0 { 0 } else { slots[i] };
                assert_eq!(back[i], want, "case {case}, slot {i}");
            }
            assert_eq!(back, decode_one_by_one(&arena, at, leafvec, vector));
        }
    }

    #[test]
    fn any_leaf_vector_decodes_as_slot_by_slot() {
        // Vectors no build makes too: no start at slot 0, no start at all, starts on
        // children; the leaves are distinct, so a slot that takes the wrong one shows.
        let mut rnd = xorshift(0xdec0_de00);
        let arena = Arena::<u16>::zeroed(200).unwrap();
        for i in 0..200 {
            // SAFETY: the arena is this test's alone.
            unsafe { arena.set(i, 1000 + i as u16) };
        }
        let cases = if cfg!(miri) { 200 } else { 20_000 };
        for case in 0..cases {
            let leafvec = match case % 5 {
                0 => 0,
                1 => u64::MAX,
                2 => rnd(),
                3 => rnd() & rnd() & !1,
                _ => rnd() | rnd(),
            };
            let vector = match case % 7 {
                0 => 0,
                1 => u64::MAX,
                _ => rnd() & rnd(),
            };
            let at = (rnd() % 200) as usize;
            let n = leaf_count(leafvec & !vector, vector);
            if at + n > 200 {
                continue;
            }
            assert_eq!(
                decode_leaves(&arena, at, leafvec, vector),
                decode_one_by_one(&arena, at, leafvec, vector),
                "case {case}: leafvec {leafvec:#x}, vector {vector:#x}, at {at}"
            );
        }
    }
}
