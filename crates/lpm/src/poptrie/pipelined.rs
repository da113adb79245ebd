//! The portable IPv4 bulk lookup for flat direct pointing: one software-pipelined loop.
//!
//! Each turn of the loop works on three addresses a fixed distance `D` apart:
//!
//! ```text
//!   address i + 2D : its direct entry prefetched
//!   address i + D  : its direct entry read and kept in out[i + D]; its record prefetched
//!   address i      : its entry taken back from out[i]; a leaf is the answer, a childless
//!                    node's record gives the answer, a node is listed for the walk
//! ```
//!
//! The steady loop is unrolled by hand into blocks of `U` = 8 lanes, so its control and the
//! bounds checks are paid once per block, and the record address worked out when the entry is
//! read is kept in a small ring for the turn that finishes the lane, instead of being worked
//! out again from the entry: about 35 instructions per lane instead of 48. Same-run rounds on
//! an AMD EPYC Zen 5 (`docs/bench/zen5.md`): matched IPv4 traffic 1.13 and uniform 1.21 times
//! the rolled loop's rate.
//!
//! Leaves and childless nodes, nearly every IPv4 lookup, are finished in that one loop; the
//! few lanes whose entry is a node (a /18 block with routes longer than /24) are walked
//! afterwards, level by level, as the staged lookup walks them. Whether a lane is a leaf or a
//! record is settled by selects, not branches (a lane that is not a record's reads an empty
//! record kept for it); the one branch on the data lists a node lane, which only a /18 block
//! with routes longer than /24 leads to. The slot's mask comes from a table of 64, not a
//! shift by a variable count, which would tie up the count register the loop needs for other
//! values (the two together: 1.09 times on matched and 1.16 times on uniform IPv4 traffic on
//! an AMD EPYC Zen 3, per-pair medians of six pairs).
//!
//! The staged lookup (`lookup_staged`) does the same work in a loop per kind of read, with
//! three lists written for every address: about a hundred instructions per matched lookup,
//! against about sixty in this loop before it was unrolled, and on an AMD EPYC (Zen 3) the
//! count, not the misses, bounded it. The trie's parts are copied into locals and the loop
//! is a function of its own, so they stay in registers; the direct width is a constant, so
//! the slots are cut with immediate shifts. Written by hand for the same reason as the rest
//! of the module: it is the forwarding path's hottest loop.

use core::hint::select_unpredictable;
use core::sync::atomic::{AtomicU32, Ordering};

use super::{Poptrie, INDEX, LEAF, LNODE, LNODE_HEADER, STRIDE, UPTO};
use crate::key::Key;
use crate::prefetch;
use crate::prefix::NextHop;

/// Addresses between the one whose record is read and the one whose direct entry is read,
/// and again between that one and the one whose direct entry is prefetched.
pub(super) const D: usize = 16;

/// Lanes per turn of the steady loop, unrolled.
const U: usize = 8;

/// Places in the ring of record addresses; lane i's is i % RING. More than D, so a lane's
/// place is not reused before the lane is finished; a multiple of U, so a block's lanes take
/// consecutive places.
const RING: usize = (D + U).next_power_of_two();

// The steady loop starts at lane D and steps by U: its first lane stays a multiple of U.
const _: () = assert!(D.is_multiple_of(U) && RING.is_multiple_of(U) && RING > D);

/// Direct bits of the tries this lookup serves: the default, flat 18.
pub(super) const BITS: u8 = 18;

/// What a lane that is not a childless node's reads in its place: a record with no leaves
/// marked, whose leaf (slot 3) is 0. Reading it spares the loop a branch between leaf and
/// record.
static EMPTY_RECORD: [u16; LNODE_HEADER + 64] = [0; LNODE_HEADER + 64];

/// Node lanes listed before they are walked. A batch of 64 packets fits whole; a longer call
/// walks each 64 as they are listed, which keeps enough walks in flight to overlap their
/// misses. The lists are zeroed on every call (safe code has no uninitialised arrays), so
/// they are kept short: with the staged lookup's 256 entries, a 64-packet batch's lookup
/// stored 2 KiB of zeros before its first address.
const LANES: usize = 64;

/// Lanes whose entry is a node, with the node; walked when the list fills and at the end.
struct NodeLanes {
    lane: [u32; LANES],
    at: [u32; LANES],
    n: usize,
}

/// The trie's parts as locals, so the loop keeps them in registers.
struct Flat<'a, K> {
    addrs: &'a [K],
    direct: &'a [AtomicU32; 1 << BITS],
    lnodes_at: *const u16,
}

impl<K: Key> Poptrie<K> {
    /// Looks up `addrs` into `out` for a trie with flat direct pointing of [`BITS`] bits, or
    /// returns false, answering nothing, for any other trie. `K` must be IPv4.
    #[inline(never)]
    pub(super) fn lookup_pipelined(&self, addrs: &[K], out: &mut [NextHop]) -> bool {
        let Ok(direct) = <&[AtomicU32; 1 << BITS]>::try_from(&self.mem.direct[..]) else {
            return false;
        };
        if self.top_bits != 0 || self.direct_bits != BITS || K::BITS != 32 {
            return false;
        }
        let n = addrs.len().min(out.len());
        let (addrs, out) = (&addrs[..n], &mut out[..n]);
        let f = Flat {
            addrs,
            direct,
            lnodes_at: self.mem.lnodes.as_ptr(),
        };
        let pf_direct = |a: K| prefetch(direct.as_ptr().wrapping_add(a.chunk(0, BITS)));
        let mut nodes = NodeLanes {
            lane: [0; LANES],
            at: [0; LANES],
            n: 0,
        };
        // U places past RING, never used, so that `ring[now + k]` needs no bounds check.
        let mut ring = [EMPTY_RECORD.as_ptr(); RING + U];
        for &a in &addrs[..n.min(2 * D)] {
            pf_direct(a);
        }
        for i in 0..n.min(D) {
            Self::pipe_entry(&f, i, out, &mut ring[i % RING]);
        }
        // The steady state, where the address 2D ahead always exists: its prefetch is not
        // behind a test of whether it does (the index keeps a bounds check that never fails).
        let steady = n.saturating_sub(D).max(D);
        let mut i = D;
        while i + U <= steady {
            // i is a multiple of U, so lane i + k's place in the ring is (i % RING) + k.
            let (now, back) = (i % RING, (i - D) % RING);
            let Some(Ok(ahead)) = addrs.get(i + D..i + D + U).map(<&[K; U]>::try_from) else {
                break;
            };
            macro_rules! lane {
                ($k:expr) => {
                    pf_direct(ahead[$k]);
                    Self::pipe_entry(&f, i + $k, out, &mut ring[now + $k]);
                    self.pipe_finish(&f, i + $k - D, out, ring[back + $k], &mut nodes);
                };
            }
            lane!(0);
            lane!(1);
            lane!(2);
            lane!(3);
            lane!(4);
            lane!(5);
            lane!(6);
            lane!(7);
            i += U;
        }
        for i in i..steady {
            pf_direct(addrs[i + D]);
            Self::pipe_entry(&f, i, out, &mut ring[i % RING]);
            self.pipe_finish(&f, i - D, out, ring[(i - D) % RING], &mut nodes);
        }
        for i in steady..n {
            Self::pipe_entry(&f, i, out, &mut ring[i % RING]);
            self.pipe_finish(&f, i - D, out, ring[(i - D) % RING], &mut nodes);
        }
        for i in n.saturating_sub(D)..n {
            self.pipe_finish(&f, i, out, ring[i % RING], &mut nodes);
        }
        self.walk_nodes(addrs, out, &mut nodes);
        true
    }

    /// Walks the listed node lanes and empties the list.
    #[inline(never)]
    fn walk_nodes(&self, addrs: &[K], out: &mut [NextHop], nodes: &mut NodeLanes) {
        if nodes.n > 0 {
            self.walk_listed(addrs, out, &mut nodes.lane, &mut nodes.at, nodes.n, BITS);
            nodes.n = 0;
        }
    }

    /// Reads lane `i`'s direct entry into `out[i]`, keeps its record's address in `kept` and
    /// prefetches the record: the header's line and the line where the slot's leaf can be at
    /// most. A lane on a leaf or a node prefetches the empty record, at hand (nodes are rare
    /// and read later).
    #[inline(always)]
    fn pipe_entry(f: &Flat<'_, K>, i: usize, out: &mut [NextHop], kept: &mut *const u16) {
        let a = f.addrs[i];
        let e = f.direct[a.chunk(0, BITS)].load(Ordering::Acquire);
        out[i] = e;
        let rec = Self::record(f, e);
        *kept = rec;
        prefetch(rec);
        prefetch(rec.wrapping_add(LNODE_HEADER + a.chunk(BITS, STRIDE)));
    }

    /// The record of entry `e`, or the empty record when `e` is not a childless node's.
    #[inline(always)]
    fn record(f: &Flat<'_, K>, e: u32) -> *const u16 {
        let at = f.lnodes_at.wrapping_add((e & INDEX) as usize);
        select_unpredictable(e & (LEAF | LNODE) == LNODE, at, EMPTY_RECORD.as_ptr())
    }

    /// Finishes lane `i` from the entry left in `out[i]` and the record `rec` kept for it by
    /// [`Self::pipe_entry`]: a leaf's next hop, a record's leaf, or the lane listed for the
    /// walk (walked at once when that fills the list).
    #[inline(always)]
    fn pipe_finish(
        &self,
        f: &Flat<'_, K>,
        i: usize,
        out: &mut [NextHop],
        rec: *const u16,
        nodes: &mut NodeLanes,
    ) {
        let e = out[i];
        let kind = e & (LEAF | LNODE);
        let v = f.addrs[i].chunk(BITS, STRIDE);
        // SAFETY: `rec` is a record of a built trie (every record lies inside its arena, and
        // the writer does not change it before this lookup is over, see `update.rs`) or the
        // empty record. A record's header is its first four slots, and its leaves follow,
        // one per bit set in the header's leaf vector, the bit of slot 0 always among them:
        // the slot's leaf, at the count of set bits up to `v` less one, is one of them.
        let leaf = unsafe {
            let w = |k: usize| rec.add(k).read() as u64;
            let lv = w(0) | w(1) << 16 | w(2) << 32 | w(3) << 48;
            let li = LNODE_HEADER - 1 + (lv & UPTO[v & 63]).count_ones() as usize;
            rec.add(li).read() as NextHop
        };
        out[i] = select_unpredictable(kind == LEAF, e & !LEAF, leaf);
        if kind == 0 {
            nodes.lane[nodes.n & (LANES - 1)] = i as u32;
            nodes.at[nodes.n & (LANES - 1)] = e;
            nodes.n += 1;
            if nodes.n == LANES {
                self.walk_nodes(f.addrs, out, nodes);
            }
        }
    }
}
