//! AVX2 bulk lookup for IPv4: four Poptrie lookups per vector, several vectors in flight.
//!
//! The same walk as the AVX-512 lookup (`avx512.rs`), for CPUs that have AVX2 but not
//! AVX-512 (AMD before Zen 4, many Intel parts). Each 64-bit lane carries one lookup. The
//! direct-pointing entries are gathered first: leaf lanes are done, lanes on a childless node
//! rank their slot in its record at once, the others walk one node level per round. AVX2 has
//! no vector population count, so the rank is counted per byte with a 16-entry table
//! (`vpshufb` on each nibble) and summed per lane with `vpsadbw`. Lane masks are vectors
//! (all ones or all zeros per lane), as AVX2's masked gathers take them.
//!
//! Only flat direct pointing is handled (the default); with two-level direct pointing or
//! none the caller's scalar lookup answers everything. IPv6 stays scalar: its walks are five
//! or more levels deep, and four lanes per vector do not pay for the rounds.
//!
//! Memory safety rests on the invariants listed in `avx512.rs`: every entry, child rank and
//! leaf rank of a built trie is in bounds, and the arenas end with padding, so a 4- or 8-byte
//! read at a 2-byte element stays inside the allocation. Masked-off lanes read nothing.

#![allow(clippy::needless_range_loop)] // lanes are indexed by vector number on purpose

use core::arch::x86_64::*;

use super::{Parts, INDEX, LEAF, LNODE, LNODE_HEADER, STRIDE};

/// Vectors advanced together.
const G: usize = 4;
/// Lanes per vector.
const L: usize = 4;

/// Lookup state of `G` vectors of lanes.
type Lanes = super::Lanes<__m256i, __m256i, G>;

/// Whether any lane of mask `m` is set.
#[inline(always)]
unsafe fn any(m: __m256i) -> bool {
    // SAFETY: the caller checked AVX2.
    unsafe { _mm256_testz_si256(m, m) == 0 }
}

/// The number of set bits of each 64-bit lane.
#[inline(always)]
unsafe fn popcnt64(x: __m256i) -> __m256i {
    // SAFETY: the caller checked AVX2.
    unsafe {
        let lut = _mm256_setr_epi8(
            0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2,
            3, 3, 4,
        );
        let nibble = _mm256_set1_epi8(0x0f);
        let lo = _mm256_and_si256(x, nibble);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(x), nibble);
        let per_byte = _mm256_add_epi8(_mm256_shuffle_epi8(lut, lo), _mm256_shuffle_epi8(lut, hi));
        _mm256_sad_epu8(per_byte, _mm256_setzero_si256())
    }
}

/// The low 32 bits of each 64-bit lane, packed into four 32-bit lanes.
#[inline(always)]
unsafe fn narrow(x: __m256i) -> __m128i {
    // SAFETY: the caller checked AVX2.
    unsafe {
        let even = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
        _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(x, even))
    }
}

/// The low 16 bits of the 32-bit elements gathered at 2-byte positions `at` of `base` for
/// the lanes of `mask`, zero-extended to 64 bits; zero in the other lanes.
#[inline(always)]
unsafe fn gather_u16(base: *const u16, at: __m256i, mask: __m256i) -> __m256i {
    // SAFETY: the caller checked AVX2 and that every masked lane's position is inside the
    // arena, padding included.
    unsafe {
        let w = _mm256_mask_i64gather_epi32::<2>(
            _mm_setzero_si128(),
            base as *const i32,
            at,
            narrow(mask),
        );
        _mm256_and_si256(_mm256_cvtepu32_epi64(w), _mm256_set1_epi64x(0xffff))
    }
}

/// The 6-bit slot at bit `off` of left-aligned 64-bit keys.
#[inline(always)]
unsafe fn chunk6(k: __m256i, off: u8) -> __m256i {
    // SAFETY: the caller checked AVX2.
    unsafe { _mm256_srli_epi64::<58>(_mm256_sll_epi64(k, _mm_cvtsi32_si128(i32::from(off)))) }
}

/// Classifies the gathered direct-pointing entries `d` of vector `g` (zero-extended): leaf
/// lanes are answered, childless-node lanes rank `slot` in their record, node lanes walk.
#[inline(always)]
unsafe fn start(p: &Parts<'_>, st: &mut Lanes, g: usize, d: __m256i, slot: __m256i) {
    // SAFETY: the caller checked AVX2 and passes the parts of a built trie; the gathers stay
    // inside them by the invariants in the module doc.
    unsafe {
        let one = _mm256_set1_epi64x(1);
        let two = _mm256_set1_epi64x(2);
        let kind = _mm256_and_si256(d, _mm256_set1_epi64x(i64::from(LEAF | LNODE)));
        let is_lnode = _mm256_cmpeq_epi64(kind, _mm256_set1_epi64x(i64::from(LNODE)));
        let is_node = _mm256_cmpeq_epi64(kind, _mm256_setzero_si256());
        st.res[g] = _mm256_and_si256(d, _mm256_set1_epi64x(i64::from(!LEAF)));
        let idx = _mm256_and_si256(d, _mm256_set1_epi64x(i64::from(INDEX)));
        st.idx[g] = idx;
        st.walking[g] = is_node;
        if any(is_lnode) {
            // The record at u16 offset o: its leaf vector in the first 8 bytes, then leaves.
            let lv = _mm256_mask_i64gather_epi64::<2>(
                _mm256_setzero_si256(),
                p.lnodes.as_ptr() as *const i64,
                idx,
                is_lnode,
            );
            let m = _mm256_sub_epi64(_mm256_sllv_epi64(two, slot), one);
            let cl = popcnt64(_mm256_and_si256(lv, m));
            let li = _mm256_add_epi64(
                idx,
                _mm256_add_epi64(cl, _mm256_set1_epi64x(LNODE_HEADER as i64 - 1)),
            );
            st.leafing[g] = is_lnode;
            st.lidx[g] = li;
        }
    }
}

/// Reads the leaves of vector `g`'s childless-node lanes from their records; done for all
/// vectors after all [`start`]s, so that the record reads of the group overlap.
#[inline(always)]
unsafe fn answer_lnodes(p: &Parts<'_>, st: &mut Lanes, g: usize) {
    // SAFETY: as in `start`.
    unsafe {
        let k = st.leafing[g];
        if any(k) {
            let l = gather_u16(p.lnodes.as_ptr(), st.lidx[g], k);
            st.res[g] = _mm256_blendv_epi8(st.res[g], l, k);
            st.leafing[g] = _mm256_setzero_si256();
        }
    }
}

/// Walks the walking lanes' nodes from bit `off`, then reads their leaves; returns the next
/// hops of every lane.
#[inline(always)]
unsafe fn finish(p: &Parts<'_>, mut st: Lanes, mut off: u8, keys: &[__m256i; G]) -> [__m256i; G] {
    // SAFETY: as in `start`.
    unsafe {
        let nodes = p.nodes.as_ptr() as *const i64;
        let one = _mm256_set1_epi64x(1);
        let two = _mm256_set1_epi64x(2);
        let low32 = _mm256_set1_epi64x(0xffff_ffff);
        let z = _mm256_setzero_si256();
        // Per vector, for lanes that stop in a node: the node, the slot mask and the leaf base.
        let mut stop_idx = [z; G];
        let mut stop_m = [z; G];
        let mut stop_base0 = [z; G];
        let mut stopped = [z; G];
        while st.walking.iter().any(|&a| any(a)) {
            for g in 0..G {
                let a = st.walking[g];
                if !any(a) {
                    continue;
                }
                // A node is three u64 words: vector, the two bases, leafvec.
                let i3 = _mm256_add_epi64(_mm256_slli_epi64::<1>(st.idx[g]), st.idx[g]);
                let vec = _mm256_mask_i64gather_epi64::<8>(z, nodes, i3, a);
                let bases =
                    _mm256_mask_i64gather_epi64::<8>(z, nodes, _mm256_add_epi64(i3, one), a);
                let v = chunk6(keys[g], off);
                let bit = _mm256_sllv_epi64(one, v);
                let m = _mm256_sub_epi64(_mm256_sllv_epi64(two, v), one);
                let child =
                    _mm256_and_si256(a, _mm256_cmpeq_epi64(_mm256_and_si256(vec, bit), bit));
                let stop = _mm256_andnot_si256(child, a);
                let cc = popcnt64(_mm256_and_si256(vec, m));
                let base1 = _mm256_srli_epi64::<32>(bases);
                stop_idx[g] = _mm256_blendv_epi8(stop_idx[g], st.idx[g], stop);
                stop_m[g] = _mm256_blendv_epi8(stop_m[g], m, stop);
                stop_base0[g] =
                    _mm256_blendv_epi8(stop_base0[g], _mm256_and_si256(bases, low32), stop);
                st.idx[g] = _mm256_blendv_epi8(
                    st.idx[g],
                    _mm256_sub_epi64(_mm256_add_epi64(base1, cc), one),
                    child,
                );
                stopped[g] = _mm256_or_si256(stopped[g], stop);
                st.walking[g] = child;
            }
            off += STRIDE;
        }
        for g in 0..G {
            let s = stopped[g];
            if any(s) {
                // The leaf vector is the node's third word, in the cache line just read.
                let i3 = _mm256_add_epi64(_mm256_slli_epi64::<1>(stop_idx[g]), stop_idx[g]);
                let lv = _mm256_mask_i64gather_epi64::<8>(z, nodes, _mm256_add_epi64(i3, two), s);
                let cl = popcnt64(_mm256_and_si256(lv, stop_m[g]));
                let li = _mm256_sub_epi64(_mm256_add_epi64(stop_base0[g], cl), one);
                let l = gather_u16(p.leaves.as_ptr(), li, s);
                st.res[g] = _mm256_blendv_epi8(st.res[g], l, s);
            }
        }
        st.res
    }
}

/// Looks up IPv4 addresses in groups of `G * L`; returns how many it did (a multiple of
/// `G * L`, or 0 when direct pointing is not flat); the caller finishes the tail.
///
/// # Safety
/// The CPU must support AVX2, and `p` must come from a built Poptrie (see the module doc).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn bulk_v4(p: &Parts<'_>, addrs: &[u32], out: &mut [u32]) -> usize {
    // SAFETY: the caller checked AVX2 and passes the parts of a built trie; every gather and
    // load stays inside them by the invariants in the module doc, and the loads and stores
    // of addresses and results stay inside `addrs[..n]` and `out[..n]`.
    unsafe {
        let n = addrs.len().min(out.len());
        let ds = p.direct_bits;
        if ds == 0 || p.top_bits != 0 {
            return 0;
        }
        let direct = p.direct.as_ptr();
        let shift = _mm_cvtsi32_si128(64 - i32::from(ds));
        let mut done = 0;
        while done + G * L <= n {
            // Warm the next group's direct-pointing entries while this group walks.
            for &a in addrs.get(done + G * L..done + 2 * G * L).unwrap_or(&[]) {
                let slot = (a >> (32 - u32::from(ds))) as usize;
                _mm_prefetch::<_MM_HINT_T0>(direct.wrapping_add(slot) as *const i8);
            }
            let z = _mm256_setzero_si256();
            let mut keys = [z; G];
            let mut st = Lanes::idle(z, z);
            for g in 0..G {
                let src = addrs.as_ptr().add(done + g * L) as *const __m128i;
                let k = _mm256_slli_epi64::<32>(_mm256_cvtepu32_epi64(_mm_loadu_si128(src)));
                keys[g] = k;
                let di = _mm256_srl_epi64(k, shift);
                let d =
                    _mm256_cvtepu32_epi64(_mm256_i64gather_epi32::<4>(direct as *const i32, di));
                start(p, &mut st, g, d, chunk6(k, ds));
            }
            for g in 0..G {
                answer_lnodes(p, &mut st, g);
            }
            let res = finish(p, st, ds, &keys);
            for (g, r) in res.iter().enumerate() {
                let dst = out.as_mut_ptr().add(done + g * L) as *mut __m128i;
                _mm_storeu_si128(dst, narrow(*r));
            }
            done += G * L;
        }
        done
    }
}
