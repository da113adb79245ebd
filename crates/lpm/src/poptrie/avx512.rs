//! AVX-512 bulk lookup: eight Poptrie lookups per vector, several vectors in flight.
//!
//! Each 64-bit lane carries one lookup. The direct-pointing entries are gathered first: leaf
//! lanes are done, lanes on a childless node rank their slot in it at once, the others walk.
//! A round of the walk extracts every walking lane's next 6 address bits and gathers the one
//! word of its node that holds that slot's half of the vector and the base the half's ranks
//! start from (the nodes' copy kept for this lookup, `NodeWords`), then ranks the slot with
//! `vpopcntq`; lanes whose slot is a child move down, the others stop and remember the word
//! of their half of the leaf vector. Then one gather reads those words (in the node's cache
//! line), and a last masked one the leaves of every lane. All live lanes of a call are at the
//! same depth, so the bit offset is one scalar for the whole round.
//!
//! `G` vectors are advanced together so that the gathers of one overlap the misses of the
//! others. Used when the CPU has AVX-512F and AVX-512 VPOPCNTDQ (checked at run time by the
//! caller); otherwise the scalar lockstep lookup in the parent module runs.
//!
//! Memory safety rests on the structure's invariants, established by the builder and never
//! changed after: every direct-pointing entry is a leaf, a valid childless-node index or a
//! valid node index; the node words mirror the nodes slot for slot (every node the writer
//! stores or copies, it stores or copies in both forms before publishing it); a child rank
//! (the base in a node's word plus the ones up to the slot in its half, less one) with the
//! slot's bit set is a valid node index, and a leaf rank taken the same way is a valid leaf
//! index (the first leaf slot of a node always starts a run). The leaf and childless-node
//! arrays end with one padding element, so a gather that reads a few bytes past the last real
//! record (a 4-byte read of a 2-byte leaf) stays inside the allocation.

#![allow(clippy::needless_range_loop)] // lanes are indexed by vector number on purpose

use core::arch::x86_64::*;

use super::{Parts, INDEX, LEAF, LNODE, LNODE_HEADER, STRIDE};

/// Vectors advanced together.
const G: usize = 4;
/// Lanes per vector.
const L: usize = 8;

/// Lookup state of `G` vectors of lanes.
type Lanes = super::Lanes<__m512i, __mmask8, G>;

/// Classifies gathered direct-pointing entries `d` (zero-extended) of vector `g`: leaf lanes
/// are answered, childless-node lanes are answered from their record (`slot` holds each
/// lane's 6 bits after the direct bits), node lanes start walking.
#[inline(always)]
unsafe fn start(p: &Parts<'_>, st: &mut Lanes, g: usize, d: __m512i, slot: __m512i) {
    // SAFETY: the caller checked AVX-512F and VPOPCNTDQ and passes the parts of a built
    // trie; every gather and load stays inside them by the invariants in the module doc.
    unsafe {
        let one = _mm512_set1_epi64(1);
        let two = _mm512_set1_epi64(2);
        let is_leaf = _mm512_test_epi64_mask(d, _mm512_set1_epi64(LEAF as i64));
        let is_lnode = _mm512_mask_test_epi64_mask(!is_leaf, d, _mm512_set1_epi64(LNODE as i64));
        st.res[g] = _mm512_and_si512(d, _mm512_set1_epi64(!LEAF as i64 & 0xffff_ffff));
        let idx = _mm512_and_si512(d, _mm512_set1_epi64(INDEX as i64));
        st.idx[g] = idx;
        st.walking[g] = !is_leaf & !is_lnode;
        if is_lnode != 0 {
            // The record at u16 offset o: leaf vector in its first 8 bytes, leaves after it.
            let lnodes = p.lnodes.as_ptr();
            let z = _mm512_setzero_si512();
            let lv = _mm512_mask_i64gather_epi64::<2>(z, is_lnode, idx, lnodes as *const i64);
            let m = _mm512_sub_epi64(_mm512_sllv_epi64(two, slot), one);
            let cl = _mm512_popcnt_epi64(_mm512_and_si512(lv, m));
            let li = _mm512_add_epi64(
                idx,
                _mm512_add_epi64(cl, _mm512_set1_epi64(LNODE_HEADER as i64 - 1)),
            );
            st.leafing[g] = is_lnode;
            st.lidx[g] = li;
        }
    }
}

/// Reads the leaves of the childless-node lanes of vector `g` (set up by [`start`]) from
/// their records. Done for all vectors after all [`start`]s, so that the record reads of the
/// group are in flight together.
#[inline(always)]
unsafe fn answer_lnodes(p: &Parts<'_>, st: &mut Lanes, g: usize) {
    // SAFETY: the caller checked AVX-512F and VPOPCNTDQ and passes the parts of a built
    // trie; every gather and load stays inside them by the invariants in the module doc.
    unsafe {
        let k = st.leafing[g];
        if k != 0 {
            let l = _mm512_mask_i64gather_epi32::<2>(
                _mm256_setzero_si256(),
                k,
                st.lidx[g],
                p.lnodes.as_ptr() as *const i32,
            );
            let l = _mm512_and_si512(_mm512_cvtepu32_epi64(l), _mm512_set1_epi64(0xffff));
            st.res[g] = _mm512_mask_mov_epi64(st.res[g], k, l);
            st.leafing[g] = 0;
        }
    }
}

/// Walks the nodes of the walking lanes from bit `off`, then reads every pending leaf and
/// returns the next hops. `chunk(g, off)` returns the 6-bit slot of every lane of vector `g`.
#[inline(always)]
unsafe fn finish(
    p: &Parts<'_>,
    mut st: Lanes,
    mut off: u8,
    chunk: impl Fn(usize, u8) -> __m512i,
) -> [__m512i; G] {
    // SAFETY: the caller checked AVX-512F and VPOPCNTDQ and passes the parts of a built
    // trie; every gather and load stays inside them by the invariants in the module doc.
    unsafe {
        let words = p.words.as_ptr() as *const i64;
        let leaves = p.leaves.as_ptr() as *const i32;
        let one = _mm512_set1_epi64(1);
        let two = _mm512_set1_epi64(2);
        let low32 = _mm512_set1_epi64(0xffff_ffff);
        let low5 = _mm512_set1_epi64(31);
        let z = _mm512_setzero_si512();
        // Per vector, for lanes that stop in a node: the word of their leaf-vector half and
        // the slot mask.
        let mut stop_w = [z; G];
        let mut stop_m = [z; G];
        let mut stopped = [0 as __mmask8; G];
        while st.walking.iter().any(|&a| a != 0) {
            for g in 0..G {
                let a = st.walking[g];
                if a == 0 {
                    continue;
                }
                // The node's word with the slot's half of the vector and the half's base:
                // one gather for the level (see `NodeWords`).
                let v = chunk(g, off);
                let w =
                    _mm512_add_epi64(_mm512_slli_epi64::<2>(st.idx[g]), _mm512_srli_epi64::<5>(v));
                let word = _mm512_mask_i64gather_epi64::<8>(z, a, w, words);
                let vs = _mm512_and_si512(v, low5);
                let half = _mm512_and_si512(word, low32);
                let m = _mm512_sub_epi64(_mm512_sllv_epi64(two, vs), one);
                let child = _mm512_mask_test_epi64_mask(a, half, _mm512_sllv_epi64(one, vs));
                let stop = a & !child;
                let cc = _mm512_popcnt_epi64(_mm512_and_si512(half, m));
                let base = _mm512_srli_epi64::<32>(word);
                // A lane that stops keeps the word of its half of the leaf vector, two on.
                stop_w[g] = _mm512_mask_mov_epi64(stop_w[g], stop, _mm512_add_epi64(w, two));
                stop_m[g] = _mm512_mask_mov_epi64(stop_m[g], stop, m);
                st.idx[g] = _mm512_mask_mov_epi64(
                    st.idx[g],
                    child,
                    _mm512_sub_epi64(_mm512_add_epi64(base, cc), one),
                );
                stopped[g] |= stop;
                st.walking[g] = child;
            }
            off += STRIDE;
        }
        for g in 0..G {
            if stopped[g] != 0 {
                // The word of the slot's half of the leaf vector, in the node's line.
                let lw = _mm512_mask_i64gather_epi64::<8>(z, stopped[g], stop_w[g], words);
                let cl = _mm512_popcnt_epi64(_mm512_and_si512(lw, stop_m[g]));
                let li = _mm512_sub_epi64(_mm512_add_epi64(_mm512_srli_epi64::<32>(lw), cl), one);
                st.lidx[g] = _mm512_mask_mov_epi64(st.lidx[g], stopped[g], li);
                st.leafing[g] |= stopped[g];
            }
            if st.leafing[g] != 0 {
                let l = _mm512_mask_i64gather_epi32::<2>(
                    _mm256_setzero_si256(),
                    st.leafing[g],
                    st.lidx[g],
                    leaves,
                );
                let l = _mm512_and_si512(_mm512_cvtepu32_epi64(l), _mm512_set1_epi64(0xffff));
                st.res[g] = _mm512_mask_mov_epi64(st.res[g], st.leafing[g], l);
            }
        }
        st.res
    }
}

/// The direct-pointing entries (zero-extended) of the lanes whose address starts with the 64
/// bits in `k`, through the top level when direct pointing is two-level (a top-level leaf is
/// returned as the entry itself).
#[inline(always)]
unsafe fn gather_direct(p: &Parts<'_>, k: __m512i) -> __m512i {
    // SAFETY: the caller checked AVX-512F and VPOPCNTDQ and passes the parts of a built
    // trie; every gather and load stays inside them by the invariants in the module doc.
    unsafe {
        let ds = p.direct_bits as i32;
        let direct = p.direct.as_ptr() as *const i32;
        if p.top_bits == 0 {
            let di = _mm512_srl_epi64(k, _mm_cvtsi32_si128(64 - ds));
            return _mm512_cvtepu32_epi64(_mm512_i64gather_epi32::<4>(di, direct));
        }
        let tb = p.top_bits as i32;
        let ti = _mm512_srl_epi64(k, _mm_cvtsi32_si128(64 - tb));
        let t = _mm512_i64gather_epi32::<4>(ti, p.top.as_ptr() as *const i32);
        let t64 = _mm512_cvtepu32_epi64(t);
        let block = !_mm512_test_epi64_mask(t64, _mm512_set1_epi64(LEAF as i64));
        let low = _mm512_srl_epi64(
            _mm512_sll_epi64(k, _mm_cvtsi32_si128(tb)),
            _mm_cvtsi32_si128(64 - (ds - tb)),
        );
        let di = _mm512_or_si512(_mm512_sll_epi64(t64, _mm_cvtsi32_si128(ds - tb)), low);
        _mm512_cvtepu32_epi64(_mm512_mask_i64gather_epi32::<4>(t, block, di, direct))
    }
}

/// Prefetches the direct-pointing entry of the address whose first 64 bits are `k` (reading
/// the small top level on the way when direct pointing is two-level).
#[inline(always)]
unsafe fn prefetch_direct(p: &Parts<'_>, k: u64) {
    // SAFETY: the caller checked AVX-512F and VPOPCNTDQ and passes the parts of a built
    // trie; every gather and load stays inside them by the invariants in the module doc.
    unsafe {
        let (ds, tb) = (p.direct_bits as u32, p.top_bits as u32);
        let slot = if ds == 0 {
            return;
        } else if tb == 0 {
            (k >> (64 - ds)) as usize
        } else {
            match p.top.get((k >> (64 - tb)) as usize) {
                Some(&t) if t & LEAF == 0 => {
                    ((t as usize) << (ds - tb)) | ((k << tb) >> (64 - (ds - tb))) as usize
                }
                _ => return,
            }
        };
        _mm_prefetch::<_MM_HINT_T0>(p.direct.as_ptr().wrapping_add(slot) as *const i8);
    }
}

/// All lanes idle. Inlined into the `target_feature` callers, like every helper here.
#[inline(always)]
unsafe fn empty_lanes() -> Lanes {
    // SAFETY: the caller checked AVX-512F and VPOPCNTDQ and passes the parts of a built
    // trie; every gather and load stays inside them by the invariants in the module doc.
    unsafe { Lanes::idle(_mm512_setzero_si512(), 0) }
}

/// Looks up IPv4 addresses in groups of `G * L`; returns how many it did (a multiple of
/// `G * L`); the caller finishes the tail.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512 VPOPCNTDQ, and `p` must come from a built Poptrie
/// (see the module doc).
#[target_feature(enable = "avx512f,avx512vpopcntdq")]
pub(super) unsafe fn bulk_v4(p: &Parts<'_>, addrs: &[u32], out: &mut [u32]) -> usize {
    // SAFETY: the caller checked AVX-512F and VPOPCNTDQ and passes the parts of a built
    // trie; every gather and load stays inside them by the invariants in the module doc.
    unsafe {
        let n = addrs.len().min(out.len());
        let ds = p.direct_bits as u32;
        let mut done = 0;
        while done + G * L <= n {
            // Warm the next group's direct-pointing entries while this group walks.
            for &a in addrs.get(done + G * L..done + 2 * G * L).unwrap_or(&[]) {
                prefetch_direct(p, (a as u64) << 32);
            }
            let mut keys = [_mm512_setzero_si512(); G];
            let mut st = empty_lanes();
            for g in 0..G {
                let src = addrs.as_ptr().add(done + g * L) as *const __m256i;
                let k = _mm512_cvtepu32_epi64(_mm256_loadu_si256(src));
                keys[g] = _mm512_slli_epi64::<32>(k);
                if ds == 0 {
                    st.walking[g] = 0xff;
                } else {
                    let d = gather_direct(p, keys[g]);
                    let s = _mm512_sll_epi64(keys[g], _mm_cvtsi32_si128(ds as i32));
                    start(p, &mut st, g, d, _mm512_srli_epi64::<58>(s));
                }
            }
            for g in 0..G {
                answer_lnodes(p, &mut st, g);
            }
            let res = finish(p, st, ds as u8, |g, off| {
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
}

/// The 6-bit slot at bit `off` of 128-bit keys split into high and low halves.
#[inline(always)]
unsafe fn chunk6(hi: __m512i, lo: __m512i, off: i32) -> __m512i {
    // SAFETY: the caller checked AVX-512F and VPOPCNTDQ and passes the parts of a built
    // trie; every gather and load stays inside them by the invariants in the module doc.
    unsafe {
        if off <= 58 {
            _mm512_srli_epi64::<58>(_mm512_sll_epi64(hi, _mm_cvtsi32_si128(off)))
        } else if off >= 64 {
            _mm512_srli_epi64::<58>(_mm512_sll_epi64(lo, _mm_cvtsi32_si128(off - 64)))
        } else {
            let h = _mm512_srli_epi64::<58>(_mm512_sll_epi64(hi, _mm_cvtsi32_si128(off)));
            let l = _mm512_srl_epi64(lo, _mm_cvtsi32_si128(122 - off));
            _mm512_or_si512(h, l)
        }
    }
}

/// Looks up IPv6 addresses in groups of `G * L`, as [`bulk_v4`].
///
/// # Safety
/// As [`bulk_v4`].
#[target_feature(enable = "avx512f,avx512vpopcntdq")]
pub(super) unsafe fn bulk_v6(p: &Parts<'_>, addrs: &[u128], out: &mut [u32]) -> usize {
    // SAFETY: the caller checked AVX-512F and VPOPCNTDQ and passes the parts of a built
    // trie; every gather and load stays inside them by the invariants in the module doc.
    unsafe {
        let n = addrs.len().min(out.len());
        let ds = p.direct_bits as u32;
        // u128 in memory: low word first. Even qwords are low halves, odd ones high halves.
        let sel_lo = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
        let sel_hi = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
        let mut done = 0;
        while done + G * L <= n {
            // Warm the next group's direct-pointing entries while this group walks.
            for &a in addrs.get(done + G * L..done + 2 * G * L).unwrap_or(&[]) {
                prefetch_direct(p, (a >> 64) as u64);
            }
            let mut hi = [_mm512_setzero_si512(); G];
            let mut lo = [_mm512_setzero_si512(); G];
            let mut st = empty_lanes();
            for g in 0..G {
                let src = addrs.as_ptr().add(done + g * L) as *const __m512i;
                let a = _mm512_loadu_si512(src);
                let b = _mm512_loadu_si512(src.add(1));
                lo[g] = _mm512_permutex2var_epi64(a, sel_lo, b);
                hi[g] = _mm512_permutex2var_epi64(a, sel_hi, b);
                if ds == 0 {
                    st.walking[g] = 0xff;
                } else {
                    let d = gather_direct(p, hi[g]);
                    start(p, &mut st, g, d, chunk6(hi[g], lo[g], ds as i32));
                }
            }
            for g in 0..G {
                answer_lnodes(p, &mut st, g);
            }
            let res = finish(p, st, ds as u8, |g, off| chunk6(hi[g], lo[g], off as i32));
            for (g, r) in res.iter().enumerate() {
                let dst = out.as_mut_ptr().add(done + g * L) as *mut __m256i;
                _mm256_storeu_si256(dst, _mm512_cvtepi64_epi32(*r));
            }
            done += G * L;
        }
        done
    }
}
