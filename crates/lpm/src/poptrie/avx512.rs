//! AVX-512 bulk lookup: eight Poptrie lookups per vector, several vectors in flight.
//!
//! Each 64-bit lane carries one lookup. A round gathers the two words of every lane's node
//! (`vector` and the two bases), extracts the lane's next 6 address bits, and ranks the slot
//! with `vpopcntq`; lanes whose slot is a child move down, the others stop and remember their
//! node. Then one gather reads the stopped nodes' leaf vectors, a second the leaves. All live lanes of a call are at the same depth, so the
//! bit offset is one scalar for the whole round. A last masked gather reads the leaves.
//!
//! `G` vectors are advanced together so that the gathers of one overlap the misses of the
//! others. Used when the CPU has AVX-512F and AVX-512 VPOPCNTDQ (checked at run time by the
//! caller); otherwise the scalar lockstep lookup in the parent module runs.
//!
//! Memory safety rests on the structure's invariants, established by the builder and never
//! changed after: every direct-pointing entry is a leaf or a valid node index; a child rank
//! `base1 + popcnt(vector & upto(v)) - 1` with bit `v` of `vector` set is a valid node index; a
//! leaf rank `base0 + popcnt(leafvec & upto(v)) - 1` for a leaf slot `v` is a valid leaf index
//! (the first leaf slot of a node always starts a run). The leaf array carries one padding
//! element so that a 4-byte gather of the last 2-byte leaf stays inside the allocation.

use core::arch::x86_64::*;

use super::{Node, LEAF, STRIDE};

/// The raw parts of a built Poptrie, as the gather code reads them.
pub(super) struct Parts<'a> {
    pub direct: &'a [u32],
    pub nodes: &'a [Node],
    pub leafvecs: &'a [u64],
    /// Leaves plus one padding element.
    pub leaves: &'a [u16],
    pub direct_bits: u8,
}

/// Vectors advanced together.
const G: usize = 4;
/// Lanes per vector.
const L: usize = 8;

/// Walks the nodes of `G` vectors of lookups from bit `off`, given each vector's node index
/// (valid where `active` is set) and the results so far (valid where `active` is clear).
/// `chunk(g, off)` returns the 6-bit slot of every lane of vector `g` at bit `off`.
#[inline(always)]
unsafe fn walk(
    p: &Parts<'_>,
    mut idx: [__m512i; G],
    mut active: [__mmask8; G],
    mut res: [__m512i; G],
    mut off: u8,
    chunk: impl Fn(usize, u8) -> __m512i,
) -> [__m512i; G] {
    let nodes = p.nodes.as_ptr() as *const i64;
    let leafvecs = p.leafvecs.as_ptr() as *const i64;
    let leaves = p.leaves.as_ptr() as *const i32;
    let one = _mm512_set1_epi64(1);
    let two = _mm512_set1_epi64(2);
    let low32 = _mm512_set1_epi64(0xffff_ffff);
    // Per vector: the slot mask `upto(v)` and node index where each lane stopped.
    let mut stop_m = [_mm512_setzero_si512(); G];
    let mut stop_base0 = [_mm512_setzero_si512(); G];
    let mut leafing = [0 as __mmask8; G];
    while active.iter().any(|&a| a != 0) {
        for g in 0..G {
            let a = active[g];
            if a == 0 {
                continue;
            }
            let i2 = _mm512_slli_epi64::<1>(idx[g]);
            let z = _mm512_setzero_si512();
            let vec = _mm512_mask_i64gather_epi64::<8>(z, a, i2, nodes);
            let bases = _mm512_mask_i64gather_epi64::<8>(z, a, _mm512_add_epi64(i2, one), nodes);
            let v = chunk(g, off);
            let bit = _mm512_sllv_epi64(one, v);
            let m = _mm512_sub_epi64(_mm512_sllv_epi64(two, v), one);
            let child = _mm512_mask_test_epi64_mask(a, vec, bit);
            let leaf = a & !child;
            let cc = _mm512_popcnt_epi64(_mm512_and_si512(vec, m));
            let base1 = _mm512_srli_epi64::<32>(bases);
            // Lanes that stop here keep the node (for its leaf vector), mask and leaf base.
            stop_m[g] = _mm512_mask_mov_epi64(stop_m[g], leaf, m);
            stop_base0[g] =
                _mm512_mask_mov_epi64(stop_base0[g], leaf, _mm512_and_si512(bases, low32));
            res[g] = _mm512_mask_mov_epi64(res[g], leaf, idx[g]);
            idx[g] = _mm512_mask_mov_epi64(
                idx[g],
                child,
                _mm512_sub_epi64(_mm512_add_epi64(base1, cc), one),
            );
            leafing[g] |= leaf;
            active[g] = child;
        }
        off += STRIDE;
    }
    // Every lane that walked stopped at a leaf slot: read its node's leaf vector, rank the slot.
    let mut lidx = [_mm512_setzero_si512(); G];
    for g in 0..G {
        if leafing[g] != 0 {
            let lv = _mm512_mask_i64gather_epi64::<8>(
                _mm512_setzero_si512(),
                leafing[g],
                res[g],
                leafvecs,
            );
            let cl = _mm512_popcnt_epi64(_mm512_and_si512(lv, stop_m[g]));
            lidx[g] = _mm512_sub_epi64(_mm512_add_epi64(stop_base0[g], cl), one);
        }
    }
    for g in 0..G {
        if leafing[g] != 0 {
            let l = _mm512_mask_i64gather_epi32::<2>(
                _mm256_setzero_si256(),
                leafing[g],
                lidx[g],
                leaves,
            );
            let l = _mm512_and_si512(_mm512_cvtepu32_epi64(l), _mm512_set1_epi64(0xffff));
            res[g] = _mm512_mask_mov_epi64(res[g], leafing[g], l);
        }
    }
    res
}

/// Resolves the direct-pointing entries `d` (already gathered, zero-extended): leaf lanes get
/// their next hop, node lanes become active.
#[inline(always)]
unsafe fn split_direct(d: __m512i) -> (__m512i, __mmask8, __m512i) {
    let leafbit = _mm512_set1_epi64(LEAF as i64);
    let is_leaf = _mm512_test_epi64_mask(d, leafbit);
    let res = _mm512_andnot_si512(leafbit, d);
    (d, !is_leaf, res)
}

/// Looks up IPv4 addresses in groups of `G * L`; returns how many it did (a multiple of
/// `G * L`); the caller finishes the tail.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512 VPOPCNTDQ, and `p` must come from a built Poptrie
/// (see the module doc).
#[target_feature(enable = "avx512f,avx512vpopcntdq")]
pub(super) unsafe fn bulk_v4(p: &Parts<'_>, addrs: &[u32], out: &mut [u32]) -> usize {
    let n = addrs.len().min(out.len());
    let ds = p.direct_bits as u32;
    let direct = p.direct.as_ptr() as *const i32;
    let mut done = 0;
    while done + G * L <= n {
        let mut keys = [_mm512_setzero_si512(); G];
        let mut idx = [_mm512_setzero_si512(); G];
        let mut active = [0 as __mmask8; G];
        let mut res = [_mm512_setzero_si512(); G];
        for g in 0..G {
            let src = addrs.as_ptr().add(done + g * L) as *const __m256i;
            let k = _mm512_cvtepu32_epi64(_mm256_loadu_si256(src));
            keys[g] = _mm512_slli_epi64::<32>(k);
            if ds == 0 {
                active[g] = 0xff;
            } else {
                let di = _mm512_srl_epi64(keys[g], _mm_cvtsi32_si128(64 - ds as i32));
                let d = _mm512_i64gather_epi32::<4>(di, direct);
                (idx[g], active[g], res[g]) = split_direct(_mm512_cvtepu32_epi64(d));
            }
        }
        let res = walk(p, idx, active, res, ds as u8, |g, off| {
            let s = _mm512_sll_epi64(keys[g], _mm_cvtsi32_si128(off as i32));
            _mm512_srli_epi64::<58>(s)
        });
        for (g, r) in res.iter().enumerate() {
            let dst = out.as_mut_ptr().add(done + g * L) as *mut __m256i;
            _mm256_storeu_si256(dst, _mm512_cvtepi64_epi32(*r));
        }
        done += G * L;
    }
    done
}

/// Looks up IPv6 addresses in groups of `G * L`, as [`bulk_v4`].
///
/// # Safety
/// As [`bulk_v4`].
#[target_feature(enable = "avx512f,avx512vpopcntdq")]
pub(super) unsafe fn bulk_v6(p: &Parts<'_>, addrs: &[u128], out: &mut [u32]) -> usize {
    let n = addrs.len().min(out.len());
    let ds = p.direct_bits as u32;
    let direct = p.direct.as_ptr() as *const i32;
    // u128 in memory: low word first. Even qwords are low halves, odd ones high halves.
    let sel_lo = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
    let sel_hi = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
    let mut done = 0;
    while done + G * L <= n {
        let mut hi = [_mm512_setzero_si512(); G];
        let mut lo = [_mm512_setzero_si512(); G];
        let mut idx = [_mm512_setzero_si512(); G];
        let mut active = [0 as __mmask8; G];
        let mut res = [_mm512_setzero_si512(); G];
        for g in 0..G {
            let src = addrs.as_ptr().add(done + g * L) as *const __m512i;
            let a = _mm512_loadu_si512(src);
            let b = _mm512_loadu_si512(src.add(1));
            lo[g] = _mm512_permutex2var_epi64(a, sel_lo, b);
            hi[g] = _mm512_permutex2var_epi64(a, sel_hi, b);
            if ds == 0 {
                active[g] = 0xff;
            } else {
                let di = _mm512_srl_epi64(hi[g], _mm_cvtsi32_si128(64 - ds as i32));
                let d = _mm512_i64gather_epi32::<4>(di, direct);
                (idx[g], active[g], res[g]) = split_direct(_mm512_cvtepu32_epi64(d));
            }
        }
        let res = walk(p, idx, active, res, ds as u8, |g, off| {
            let off = off as i32;
            if off <= 58 {
                let s = _mm512_sll_epi64(hi[g], _mm_cvtsi32_si128(off));
                _mm512_srli_epi64::<58>(s)
            } else if off >= 64 {
                let s = _mm512_sll_epi64(lo[g], _mm_cvtsi32_si128(off - 64));
                _mm512_srli_epi64::<58>(s)
            } else {
                let s = _mm512_sll_epi64(hi[g], _mm_cvtsi32_si128(off));
                let h = _mm512_srli_epi64::<58>(s);
                let l = _mm512_srl_epi64(lo[g], _mm_cvtsi32_si128(122 - off));
                _mm512_or_si512(h, l)
            }
        });
        for (g, r) in res.iter().enumerate() {
            let dst = out.as_mut_ptr().add(done + g * L) as *mut __m256i;
            _mm256_storeu_si256(dst, _mm512_cvtepi64_epi32(*r));
        }
        done += G * L;
    }
    done
}
