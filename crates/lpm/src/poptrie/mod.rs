//! Poptrie: a compressed 64-ary trie searched with population counts.
//!
//! This follows H. Asai and Y. Ohara, "Poptrie: A Compressed Trie with Population Count for Fast
//! and Scalable Software IP Routing Table Lookup" (SIGCOMM 2015), the lookup engine of
//! H. Asai's "Networking Operating System from Scratch towards High-Performance COTS Network
//! Facilities" (IIJ-II seminar, 2015). The lookup and the build are written here by hand because
//! they are the forwarding path's hottest code: no crate offers them at this speed.
//!
//! ## The idea, built by hand
//!
//! A multibit trie with stride 6 has 64 slots per node, one per value of the next 6 address
//! bits. A slot is either a *child* (longer prefixes live below it) or a *leaf* (a next hop).
//! Instead of storing 64 pointers, a node stores two 64-bit vectors and two base indices:
//!
//! ```text
//!   vector : bit i set  <=> slot i is a child       base1: index of the first child
//!   leafvec: bit i set  <=> slot i starts a new run  base0: index of the first leaf
//!            of equal leaves (child slots are skipped)
//! ```
//!
//! Children of one node are stored next to each other, and so are its leaves, so the `n`-th
//! child is `nodes[base1 + n]`, and `n` is the number of set bits of `vector` at or below the
//! slot, minus one: one `popcnt`. Leaves are compressed further: consecutive slots with the same
//! next hop share one leaf (the *leaf vector*), so a /1 inside a node costs one leaf, not 32.
//!
//! Take a toy table, 4-bit strides for brevity, looking at the first node only:
//!
//! ```text
//!   0000/2 -> A    (slots 0..=3)
//!   0100/4 -> B    (slot 4)
//!   1000/1 -> C    (slots 8..=15)
//!   1010/6 -> D    (longer than the stride: slot 10 becomes a child)
//!
//!   slot     : 15 ............................. 0
//!   leaf     :  C C C C C ^ C C   - - - A B A A A A   (^ = child, - = no route, default X)
//!   vector   :  0 0 0 0 0 1 0 0   0 0 0 0 0 0 0 0
//!   leafvec  :  0 0 0 0 0 0 0 1   1 0 0 0 1 1 0 1   (runs: A, B, A, X, C)
//!   leaves   :  [A, B, A, X, C]
//! ```
//!
//! Looking up slot 9: `vector` bit 9 is clear, so it is a leaf; `popcnt(leafvec & 0b11_1111_1111)`
//! is 5, so the answer is `leaves[base0 + 4]` = C. Slot 10 has its `vector` bit set and
//! `popcnt(vector & 0b111_1111_1111) = 1`, so the search continues at `nodes[base1 + 0]`.
//!
//! ## Direct pointing and childless nodes
//!
//! The first `s` bits (18 by default, 16 as the paper's other setting) index a flat array, as
//! in the paper. Each entry is one of three things:
//!
//! ```text
//!   1 nnnn…   a leaf: next hop n                      (a prefix of length <= s covers it)
//!   01 oooo…  a childless node: its record at offset o in `lnodes`
//!   00 iiii…  a node: nodes[i] covers the next 6 bits
//! ```
//!
//! A *childless node* has only leaves, which is what most IPv4 nodes are: a /18 block holding
//! /19../24 prefixes. It is stored as a record of its leaf vector followed by its leaves, so a
//! lookup reads the record and then a leaf a few bytes on, usually in the same cache line, and
//! the record needs neither `vector` nor bases. This is vfsr's addition to the paper's layout;
//! it cuts the full IPv4 table from 4.4 to 3.4 MiB and one dependent miss off most lookups.
//! A build places a record of up to 28 leaves where it does not cross a cache line (the
//! slots skipped go to the free lists), so its header and leaf are one line: on an AMD EPYC
//! Zen 5 that measured 1.04 times the portable rate on matched IPv4 traffic (1.02 with
//! AVX-512), for 0.13 MiB more on the full table. Updates pack the records they write (placed,
//! they measured 0.72-0.93 times the update trace's rate); the next build places them again.
//!
//! ## Bulk lookup
//!
//! A full IPv4 table does not fit in L2, so a lookup costs a few cache misses in a row, each
//! depending on the last. [`Poptrie::lookup_bulk`] overlaps the misses of many lookups.
//!
//! IPv4 with flat direct pointing of 18 bits, the default, runs one software-pipelined loop
//! (`pipelined.rs`): each turn prefetches one address's direct entry, reads another's entry
//! and prefetches its record, and finishes a third from its record, 16 addresses apart. A
//! leaf or a childless node (nearly every IPv4 lookup) is answered in that loop by selects,
//! without a branch between the two; the few lookups that reach a node are listed and walked
//! level by level afterwards. On an AMD EPYC (Zen 3) this measured 1.53 times the staged
//! lookup below on matched IPv4 traffic and 1.15 times on uniform IPv4 traffic (per-pair
//! medians of six pairs, `docs/bench/zen3.md`): the staged lookup ran about a hundred
//! instructions per matched lookup there, the pipelined loop about sixty.
//!
//! Other IPv4 tries (two-level direct pointing, other widths) take their addresses in chunks
//! of up to 256 and run each chunk in *stages*, one kind of memory read per stage, so that
//! the misses of a whole stage overlap instead of queuing:
//!
//! ```text
//!   addresses ──► direct entries ──┬─ leaf ─────────────────────────────────► answer
//!   (prefetch 16 ahead)            ├─ childless node ─► record, its leaf ────► answer
//!                                  └─ node ─► level 1 ─► level 2 … ─┬─ leaf ─► answer
//!                                      (one loop per level)          └─ child: next level
//! ```
//!
//! Each stage is a plain loop over a list the previous stage wrote: every lookup is appended
//! to the list of what it reads next by writing to all lists and advancing only the right
//! one's length, so the loops have no branch that depends on the data (a mispredicted branch
//! costs as much as an L2 hit, and which way a lookup goes is close to random). Each read is
//! prefetched as soon as its address is known: a node or leaf when the entry pointing to it is
//! appended, a direct entry or a childless-node record a fixed distance ahead in its loop (for
//! a record, both the header's line and the line where the slot's leaf can be at most, since
//! a dense record spans two or three lines). The record stage reads no address: the direct
//! stage lists each record lane's slot beside the record's offset (on an AMD EPYC Zen 5 this
//! measured 1.09 times the rate on matched IPv4 traffic, the address's re-read having cost a
//! division to keep its index in bounds), and flat direct pointing has a loop of its own
//! (1.06 times on uniform IPv4 traffic, same machine). Against the earlier bulk lookup, which
//! advanced groups of 16 lookups in lockstep and branched on every lookup's kind, the stages
//! measured 1.51–1.76 times the rate on uniform IPv4 traffic and 1.17–1.34 times on matched
//! IPv4 traffic on an AMD EPYC (Zen 3). IPv6 keeps the lockstep groups (32 lookups advance
//! one level per round): its lookups walk five or more levels of nodes, and there the stages
//! measured no better (0.82–1.02 times, same runs; 0.86 times on an AMD EPYC Zen 5). Groups
//! of 32 measured 1.09 times groups of 16 on matched IPv6 traffic there, groups of 64 0.93
//! times groups of 32 (on a first-generation Zen 1.05–1.06 times, and no faster in
//! forwarding: `docs/bench/zen1.md`).
//!
//! Where the CPU has AVX-512 (with `vpopcntq`), a vector version of the lockstep walk runs
//! instead (see `avx512.rs`), except for IPv4 on an AMD Zen 5, where the pipelined loop
//! measured faster (see [`Vector::best_for`]). An AVX2 version for IPv4 (`avx2.rs`) runs only
//! when chosen, for one trie with [`Poptrie::set_vector`] or for the process with
//! [`Vector::prefer`]: it wins on matched traffic and loses on uniform traffic (see
//! [`Vector::best`]).
//!
//! ## Storage shared with readers
//!
//! The arrays live in arenas of fixed capacity (`arena.rs`) shared by the writer's handle and
//! the readers' ([`Poptrie::share`]); direct-pointing entries are atomics. An update never writes
//! a block a reader can reach: it builds into fresh blocks and switches them in with one store of
//! a direct-pointing entry, and the blocks it replaced wait for the readers to leave before they
//! are reused (`update.rs`). So a live FIB keeps one copy, changed in place, instead of two.
//!
//! ## Limits
//!
//! Leaves are 16 bits (as in the paper): next hops up to 65,535. A larger one is a build error,
//! never a silent truncation. Prefix lengths up to the full width, /32 and /128 included: a
//! stride that runs past the last address bit reads zeros, and a prefix that ends inside a node
//! paints `2^(stride end - length)` slots, computed without shifting by the full width.

mod arena;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod leaves;
mod pipelined;
mod update;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use arena::Arena;
use leaves::{decode_leaves, emit_leaves};

use crate::key::Key;
use crate::prefix::{canonicalize, NextHop, Route, NO_ROUTE};
use crate::{prefetch, BuildError, Lpm, LpmBuild};

/// Bits consumed per trie level (64-ary nodes).
const STRIDE: u8 = 6;
/// Direct-pointing entry flag: the low bits hold a next hop.
const LEAF: u32 = 1 << 31;
/// Direct-pointing entry flag: the low bits are the offset in `lnodes` of a childless node.
const LNODE: u32 = 1 << 30;
/// The index bits of a direct-pointing entry.
const INDEX: u32 = LNODE - 1;
/// Largest next hop a leaf can hold.
pub const MAX_NEXTHOP: NextHop = u16::MAX as NextHop;
/// Lookups advanced together by the scalar IPv6 bulk lookup.
const GROUP: usize = 32;
/// Lookups one pass of the staged bulk lookup handles (a power of two, at most 2^16): the
/// longer the stage lists, the less the start of each stage waits for its first reads.
const CHUNK: usize = 256;
/// How far ahead in its list the staged lookup prefetches direct-pointing entries and
/// childless-node records.
const AHEAD: usize = 16;

/// Build parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoptrieConfig {
    /// Bits resolved by direct pointing (`s` in the paper). 0 disables it.
    pub direct_bits: u8,
    /// When non-zero, direct pointing is two-level: a table of `2^top_bits` entries whose
    /// populated slots point to blocks of `2^(direct_bits - top_bits)` entries. This makes a
    /// large `s` affordable where the table is sparse at the top (IPv6). 0 = one flat array.
    pub top_bits: u8,
}

impl Default for PoptrieConfig {
    fn default() -> Self {
        PoptrieConfig {
            direct_bits: 18,
            top_bits: 0,
        }
    }
}

impl PoptrieConfig {
    /// Flat direct pointing of `s` bits, as in the paper.
    pub fn flat(s: u8) -> Self {
        PoptrieConfig {
            direct_bits: s,
            top_bits: 0,
        }
    }

    /// The default for an address family: flat 18 bits (the paper's choice) for both.
    ///
    /// Two-level direct pointing (12 + 12 bits) makes the full IPv6 table a quarter smaller
    /// (2.3 instead of 3.1 MiB, one trie level fewer on every /48) but measured slower here
    /// (77 against 84–89 Mlps on matched6, same run), the top-level read costing more than the
    /// level it saves; it stays available for memory-bound deployments.
    pub fn for_family<K: Key>() -> Self {
        Self::flat(18)
    }
}

/// An internal node, 24 bytes. The fields a lookup reads at every level (`vector` and the two
/// bases) come first and share 16 bytes; `leafvec`, read once where the lookup stops, follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
struct Node {
    vector: u64,
    base0: u32,
    base1: u32,
    leafvec: u64,
}

/// A node as the AVX-512 lookup reads it, kept beside `Mem::nodes` (same index) on CPUs that
/// have AVX-512: 32 bytes, aligned so that it never straddles two cache lines. Each 64-bit
/// vector is kept as two halves, each beside the base its ranks count from, so that one
/// 8-byte read (the half of slot `v`, word `v >> 5`) is all a lookup needs at one level:
///
/// ```text
///   word 0: vector bits 0..32   | base1 << 32
///   word 1: vector bits 32..64  | (base1 + ones in vector bits 0..32) << 32
///   word 2: leafvec bits 0..32  | base0 << 32
///   word 3: leafvec bits 32..64 | (base0 + ones in leafvec bits 0..32) << 32
/// ```
///
/// The vector walk then gathers one word per lane and level instead of two (the vector and
/// the bases); its gathers bound it, and IPv6 lookups ran 1.19 times as fast on an AMD EPYC
/// Zen 5 (`docs/bench/zen5.md`). The portable lookup keeps reading [`Node`]: in this form,
/// read in place, it ran 0.92 times as fast.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(32))]
struct NodeWords([u64; 4]);

impl NodeWords {
    /// The vector lookup's form of `n`.
    fn of(n: Node) -> Self {
        let halves = |bits: u64, base: u32| {
            let lo = bits & 0xffff_ffff;
            let above = base.wrapping_add(lo.count_ones());
            [
                lo | u64::from(base) << 32,
                bits >> 32 | u64::from(above) << 32,
            ]
        };
        let [w0, w1] = halves(n.vector, n.base1);
        let [w2, w3] = halves(n.leafvec, n.base0);
        NodeWords([w0, w1, w2, w3])
    }
}

/// Childless nodes below a direct-pointing entry are stored as variable-length records in one
/// `u16` array: the leaf vector in four `u16` (low first), then the node's leaves.
///
/// ```text
///   lnodes: … │ lv0 lv1 lv2 lv3 │ leaf0 leaf1 … leafN │ next record …
///             └ offset in the direct-pointing entry
/// ```
///
/// Most IPv4 nodes are of this kind (a /18 block holding /19../24 prefixes). A lookup there
/// reads the record and then a leaf a few bytes further on, usually in the same cache line,
/// instead of a node and then a leaf elsewhere; and the record needs no leaf base.
const LNODE_HEADER: usize = 4;

/// The leaf vector of the childless-node record at `o` (zero if the arena is too short, which
/// a built structure never is).
#[inline(always)]
fn lnode_leafvec(lnodes: &Arena<u16>, o: usize) -> u64 {
    if o + LNODE_HEADER > lnodes.len() {
        return 0;
    }
    let w = |k: usize| lnodes.get(o + k) as u64;
    w(0) | w(1) << 16 | w(2) << 32 | w(3) << 48
}

/// Record slots (`u16`) in a cache line.
const LINE_SLOTS: usize = 64 / core::mem::size_of::<u16>();

/// Slots to skip before a record of `size` slots appended at `at`, so that it spans no more
/// cache lines than a record of its size must: one line for a record of up to 32 slots (28
/// leaves), where the lookup's header and leaf are then one miss instead of two. The skipped
/// slots go to the free lists, where a record of exactly that size can take them.
fn record_pad(at: usize, size: usize) -> usize {
    let into = at % LINE_SLOTS;
    let lines = |from: usize| (from + size).div_ceil(LINE_SLOTS);
    if lines(into) == lines(0) {
        0
    } else {
        LINE_SLOTS - into
    }
}

/// Slots kept free at the end of every arena, so a vector gather that reads a few bytes past
/// the last block stays inside the allocation.
const PAD: usize = 64;

/// The storage readers and the writer share (see `arena.rs`): fixed-size arrays at addresses
/// that never move. Direct-pointing entries are atomics, so one store switches a slot from
/// its old blocks to new ones; lookups load them with `Acquire`, a plain load on x86.
#[derive(Debug)]
struct Mem {
    /// Top level of two-level direct pointing (empty when flat): a leaf, or a block number.
    /// Never changed after the build (updates of two-level tries rebuild).
    top: Vec<u32>,
    /// Direct-pointing entries: one flat array, or the blocks of the top level one after the
    /// other.
    direct: Box<[AtomicU32]>,
    nodes: Arena<Node>,
    /// `nodes` in the AVX-512 lookup's form, slot for slot, where the CPU has AVX-512 (see
    /// [`NodeWords`]); one unused slot elsewhere.
    words: Arena<NodeWords>,
    /// Childless-node records below direct pointing.
    lnodes: Arena<u16>,
    leaves: Arena<u16>,
    /// High-water marks of `nodes`, `lnodes` and `leaves` (what has been touched), for
    /// `memory_bytes`.
    used: [AtomicUsize; 3],
}

impl Mem {
    /// Whether `words` mirrors `nodes` (the CPU has AVX-512).
    #[inline(always)]
    fn mirrored(&self) -> bool {
        self.words.len() == self.nodes.len()
    }
}

/// What only the writer needs: free space, blocks waiting for readers to leave, and the
/// side tables updates read. A reader's handle ([`Poptrie::share`]) has none.
#[derive(Clone, Debug, Default)]
struct Writer {
    /// For every node, the next hop it inherits from above (its slots' default).
    ndef: Vec<u16>,
    /// High-water marks: slots past them were never used.
    nodes_len: usize,
    lnodes_len: usize,
    leaves_len: usize,
    /// Number of live childless-node records.
    lnode_count: usize,
    /// Blocks free for reuse.
    free: FreeLists,
    /// Blocks replaced by updates, by the group (see [`Poptrie::retire_group`]) in which
    /// they were replaced, oldest first: readers may still be in them.
    retired: VecDeque<(u64, Block)>,
    /// The group blocks retired now join.
    group: u64,
    /// The next hop and length of the longest prefix of at most `direct_bits` bits covering
    /// every direct-pointing slot: what updates need to repaint a slot. Made by the first
    /// update (lookups never need it).
    cover: Option<Box<update::Cover>>,
    /// While an update builds the changes below one direct slot (`marking`, one `round` of
    /// it): `stamp[k]` is `round` where a node block starting at `k` was allocated in this
    /// round and not switched in yet. No reader can reach those blocks, so later changes of
    /// the same slot modify them instead of copying them again. A stamp per node index
    /// (grown only by updates) is one store per block and one load per question, where a
    /// hash set of the starts cost 3.6 % of an IPv6 update's instructions.
    stamp: Vec<u16>,
    round: u16,
    marking: bool,
}

/// Which arena a block is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Nodes,
    Leaves,
    Lnodes,
}

/// A block of an arena: `size` slots from `at`.
#[derive(Clone, Copy, Debug)]
struct Block {
    kind: Kind,
    at: u32,
    size: u32,
}

impl Writer {
    /// Slots in retired blocks of `kind`.
    fn retired_slots(&self, kind: Kind) -> usize {
        self.retired
            .iter()
            .filter(|(_, b)| b.kind == kind)
            .map(|(_, b)| b.size as usize)
            .sum()
    }

    /// Starts a round of marking: the blocks stamped before it are fresh no longer. When the
    /// count wraps, every stamp is cleared, so an old one cannot pass for the new round.
    fn new_round(&mut self) {
        self.round = self.round.wrapping_add(1);
        if self.round == 0 {
            self.stamp.fill(0);
            self.round = 1;
        }
    }

    /// Moves the retired blocks of groups up to `group` to the free lists.
    fn reclaim(&mut self, group: u64) {
        while let Some(&(g, b)) = self.retired.front() {
            if g > group {
                break;
            }
            self.retired.pop_front();
            let lists = match b.kind {
                Kind::Nodes => &mut self.free.nodes,
                Kind::Leaves => &mut self.free.leaves,
                Kind::Lnodes => &mut self.free.lnodes,
            };
            FreeLists::put(lists, b.size as usize, b.at as usize);
        }
    }

    fn bytes(&self) -> usize {
        self.ndef.capacity() * 2
            + self.free.bytes()
            + self.retired.capacity() * core::mem::size_of::<(u64, Block)>()
            + self.cover.as_ref().map_or(0, |c| c.bytes())
            + self.stamp.capacity() * 2
    }
}

/// A Poptrie over keys `K` (IPv4: `u32`, IPv6: `u128`).
///
/// The arrays live in storage shared by every handle of one structure: the writer's (which
/// updates it in place, see `update.rs`) and the readers' ([`Poptrie::share`]). `Clone`
/// makes an independent copy.
#[derive(Debug)]
pub struct Poptrie<K: Key> {
    mem: Arc<Mem>,
    /// The writer's state; `None` in a reader's handle.
    w: Option<Box<Writer>>,
    direct_bits: u8,
    top_bits: u8,
    routes: usize,
    /// The bulk lookup in use (one this CPU runs).
    vector: Vector,
    /// Lists the writer's updates reuse, made by the first update (never in a reader's
    /// handle, which stays as small as before).
    scratch: Option<Box<update::Scratch<K>>>,
}

/// The raw parts of a built Poptrie, as the vector lookups (`avx2.rs`, `avx512.rs`) read them.
#[cfg(target_arch = "x86_64")]
struct Parts<'a> {
    /// Top level of two-level direct pointing (empty when flat).
    top: &'a [u32],
    top_bits: u8,
    direct: &'a [u32],
    nodes: &'a [Node],
    /// `nodes` in the AVX-512 lookup's form (one unused slot where the CPU lacks AVX-512).
    words: &'a [NodeWords],
    /// Childless-node records plus one padding element.
    lnodes: &'a [u16],
    /// Leaves plus one padding element.
    leaves: &'a [u16],
    direct_bits: u8,
}

/// Lookup state of the vector lookups: `G` vectors `V` of lanes, lane masks `M`.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Lanes<V: Copy, M: Copy, const G: usize> {
    /// Node index of walking lanes.
    idx: [V; G],
    /// Lanes still walking nodes.
    walking: [M; G],
    /// Lanes whose leaf index is known (in `lidx`), waiting for the leaf read.
    leafing: [M; G],
    lidx: [V; G],
    /// Next hops of lanes answered so far.
    res: [V; G],
}

#[cfg(target_arch = "x86_64")]
impl<V: Copy, M: Copy, const G: usize> Lanes<V, M, G> {
    /// Every lane idle: `z` in every vector, `none` in every mask.
    #[inline(always)]
    fn idle(z: V, none: M) -> Self {
        Lanes {
            idx: [z; G],
            walking: [none; G],
            leafing: [none; G],
            lidx: [z; G],
            res: [z; G],
        }
    }
}

/// Which bulk lookup runs: the portable one, or a vector one the CPU has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vector {
    /// Scalar code: staged lookups (IPv4), lockstep groups (IPv6).
    Portable,
    /// AVX2 gathers, four lanes per vector (IPv4; IPv6 stays portable).
    Avx2,
    /// AVX-512 gathers and `vpopcntq`, eight lanes per vector (IPv4 and IPv6).
    Avx512,
}

impl Vector {
    /// Whether this CPU can run it.
    pub fn available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Vector::Portable => true,
                Vector::Avx2 => std::is_x86_feature_detected!("avx2"),
                Vector::Avx512 => {
                    std::is_x86_feature_detected!("avx512f")
                        && std::is_x86_feature_detected!("avx512vpopcntdq")
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Vector::Portable
        }
    }

    /// The widest bulk lookup this CPU has, AVX2 aside: AVX-512 where the CPU has it, else
    /// the portable lookup (what a trie uses by default is [`Vector::best_for`], which takes
    /// the portable one for IPv4 on some CPUs). AVX2 runs only when chosen ([`Poptrie::set_vector`],
    /// [`Vector::prefer`]): on an AMD EPYC Zen 5
    /// it measured 1.14–1.16 times the portable lookup's rate on matched IPv4 traffic but
    /// 0.73–0.76 times on uniform traffic (`vfsr lpm bench` row `poptrie_avx2`, same run);
    /// on an AMD EPYC Zen 4, 0.99–1.06 times on matched and 0.68–0.70 times on uniform
    /// traffic (two runs, `docs/bench/zen4.md`). Neither makes it the better default. Those
    /// runs predate the pipelined portable IPv4 loop, which on an AMD EPYC Zen 3 runs about
    /// twice the AVX2 lookup's rate on both (`docs/bench/zen3.md`).
    pub fn best() -> Vector {
        if Vector::Avx512.available() {
            Vector::Avx512
        } else {
            Vector::Portable
        }
    }

    /// The one a trie of `K` uses unless told otherwise: [`Vector::best`], except IPv4 on a
    /// CPU where the portable lookup's pipelined loop measured faster than the AVX-512
    /// gathers. That is AMD's Zen 5 (family 26): there the portable IPv4 lookup ran 1.17
    /// times the AVX-512 one's rate on uniform and 1.12 times on matched traffic (`vfsr lpm
    /// bench`, same run), and forwarded at 1.00 times its cycles per packet with 1k flows and
    /// 0.99 times with a million (`vfsr fwd bench --lookup`, four to six alternating rounds;
    /// `docs/bench/zen5.md`). On Intel's Xeons (family 6, models 167 and 207) AVX-512 led on
    /// matched IPv4 traffic by 1.15–1.37 times, and AMD's Zen 4 was not measured with the
    /// pipelined loop, so both keep AVX-512. IPv6 keeps it everywhere: its portable lookup
    /// ran about half the AVX-512 rate on the same Zen 5.
    pub fn best_for<K: Key>() -> Vector {
        let widest = Vector::best();
        if widest == Vector::Avx512 && K::BITS == 32 && portable_leads_v4() {
            Vector::Portable
        } else {
            widest
        }
    }

    /// Its name in reports and configurations.
    pub fn name(self) -> &'static str {
        match self {
            Vector::Portable => "portable",
            Vector::Avx2 => "avx2",
            Vector::Avx512 => "avx512",
        }
    }

    /// Every path, in the order of their numbers.
    const ALL: [Vector; 3] = [Vector::Portable, Vector::Avx2, Vector::Avx512];

    /// The path of a [`Vector::name`].
    pub fn from_name(name: &str) -> Option<Vector> {
        Vector::ALL.into_iter().find(|v| v.name() == name)
    }

    /// A choice as configurations and command lines write it: `auto` (no choice: `Ok(None)`)
    /// or a [`Vector::name`].
    pub fn choice(word: &str) -> Result<Option<Vector>, UnknownVector> {
        match word {
            "auto" => Ok(None),
            name => Vector::from_name(name)
                .map(Some)
                .ok_or_else(|| UnknownVector(name.to_string())),
        }
    }

    /// Chooses, for the whole process, the bulk lookup that tries built from now on start
    /// with (`None`: [`Vector::best_for`] again); tries built before keep theirs. Returns the
    /// ones they will use on this CPU, per address family: `v` where the CPU has it, else
    /// [`Vector::best_for`]. A router whose traffic is mostly to routed destinations (matched
    /// traffic) and whose CPU has AVX2 but not AVX-512 may prefer [`Vector::Avx2`].
    pub fn prefer(v: Option<Vector>) -> Chosen {
        let code = v.map_or(0, |v| 1 + v as u8);
        PREFERRED.store(code, Ordering::Relaxed);
        Vector::chosen()
    }

    /// The bulk lookup a new trie of `K` starts with: the one [`Vector::prefer`] chose where
    /// the CPU has it, else [`Vector::best_for`].
    pub fn preferred_for<K: Key>() -> Vector {
        let code = usize::from(PREFERRED.load(Ordering::Relaxed));
        code.checked_sub(1)
            .and_then(|i| Vector::ALL.get(i).copied())
            .filter(|v| v.available())
            .unwrap_or_else(Vector::best_for::<K>)
    }

    /// The bulk lookups new IPv4 and IPv6 tries start with ([`Vector::preferred_for`]).
    pub fn chosen() -> Chosen {
        Chosen {
            v4: Vector::preferred_for::<u32>(),
            v6: Vector::preferred_for::<u128>(),
        }
    }
}

/// The bulk lookups new tries use, per address family ([`Vector::chosen`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chosen {
    /// For IPv4 tries.
    pub v4: Vector,
    /// For IPv6 tries.
    pub v6: Vector,
}

impl core::fmt::Display for Chosen {
    /// One name when both families use the same lookup, else both: "portable (IPv4), avx512
    /// (IPv6)".
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.v4 == self.v6 {
            f.write_str(self.v4.name())
        } else {
            write!(f, "{} (IPv4), {} (IPv6)", self.v4.name(), self.v6.name())
        }
    }
}

/// Whether this CPU is one where the portable IPv4 lookup measured faster than the AVX-512
/// one (see [`Vector::best_for`]): AMD's family 26 (Zen 5). Asked of CPUID once.
fn portable_leads_v4() -> bool {
    static LEADS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LEADS.get_or_init(|| {
        vfsr_cpu::x86_signature()
            .is_some_and(|s| s.vendor == vfsr_cpu::Vendor::Amd && s.family == 26)
    })
}

/// A word that names no bulk lookup (see [`Vector::choice`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownVector(pub String);

impl core::fmt::Display for UnknownVector {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "unknown lookup {:?} (expected one of: auto, avx512, avx2, portable)",
            self.0
        )
    }
}

impl std::error::Error for UnknownVector {}

/// The process-wide choice of [`Vector::prefer`]: 0 for none, else 1 + the path's number.
static PREFERRED: AtomicU8 = AtomicU8::new(0);

/// Whether tries of some address family use a vector bulk lookup on this CPU unless told
/// otherwise ([`Vector::best`]).
pub fn simd_available() -> bool {
    Vector::best() != Vector::Portable
}

/// Ones at bit positions `0..=v`.
#[inline(always)]
const fn upto(v: usize) -> u64 {
    // `2 << 63` wraps to 0 and 0 - 1 is all ones: the right mask for v = 63.
    (2u64 << v).wrapping_sub(1)
}

/// `upto(v)` for every slot, read instead of shifted. The bulk lookups' loops take it from
/// here: a shift by a variable count needs the count register (`shl %cl` without BMI2,
/// which x86-64-v2 lacks), and those loops have other uses for it.
static UPTO: [u64; 64] = {
    let mut m = [0u64; 64];
    let mut v = 0;
    while v < 64 {
        m[v] = upto(v);
        v += 1;
    }
    m
};

impl<K: Key> Clone for Poptrie<K> {
    /// An independent copy (its own storage), which updates do not share.
    fn clone(&self) -> Self {
        let m = &self.mem;
        let copy = |r: Result<Mem, BuildError>| r.expect("memory for a copy of the trie");
        let mem = copy((|| {
            Ok(Mem {
                top: m.top.clone(),
                direct: m
                    .direct
                    .iter()
                    .map(|e| AtomicU32::new(e.load(Ordering::Relaxed)))
                    .collect(),
                nodes: m.nodes.copy(m.nodes.len())?,
                words: m.words.copy(m.words.len())?,
                lnodes: m.lnodes.copy(m.lnodes.len())?,
                leaves: m.leaves.copy(m.leaves.len())?,
                used: [0, 1, 2].map(|i| AtomicUsize::new(m.used[i].load(Ordering::Relaxed))),
            })
        })());
        Poptrie {
            mem: Arc::new(mem),
            w: self.w.clone(),
            direct_bits: self.direct_bits,
            top_bits: self.top_bits,
            routes: self.routes,
            vector: self.vector,
            scratch: None,
        }
    }
}

impl<K: Key> Poptrie<K> {
    /// Number of internal nodes (childless nodes below direct pointing included); 0 in a
    /// reader's handle.
    pub fn node_count(&self) -> usize {
        self.w.as_ref().map_or(0, |w| {
            w.nodes_len - w.free.node_slots() - w.retired_slots(Kind::Nodes) + w.lnode_count
        })
    }

    /// Number of (compressed) leaves, those in childless-node records included; 0 in a
    /// reader's handle.
    pub fn leaf_count(&self) -> usize {
        self.w.as_ref().map_or(0, |w| {
            (w.leaves_len + w.lnodes_len).saturating_sub(
                LNODE_HEADER * w.lnode_count
                    + w.free.leaf_slots()
                    + w.retired_slots(Kind::Leaves)
                    + w.retired_slots(Kind::Lnodes),
            )
        })
    }

    /// A handle for readers on the same storage: it sees every later in-place update of this
    /// trie (each one switched in atomically) and cannot update it itself.
    pub fn share(&self) -> Self {
        Poptrie {
            mem: Arc::clone(&self.mem),
            w: None,
            direct_bits: self.direct_bits,
            top_bits: self.top_bits,
            routes: self.routes,
            vector: self.vector,
            scratch: None,
        }
    }

    /// Bytes of the room the writer's kept update lists hold.
    fn scratch_bytes(&self) -> usize {
        self.scratch.as_ref().map_or(0, |s| s.bytes())
    }

    /// The direct-pointing entry `d`.
    #[inline(always)]
    fn entry(&self, d: usize) -> u32 {
        self.mem.direct[d].load(Ordering::Acquire)
    }

    /// Turns the vector bulk lookup off (to measure the portable one) or back to
    /// [`Vector::best_for`] (not to a [`Vector::prefer`] choice).
    pub fn set_simd(&mut self, on: bool) {
        self.vector = if on {
            Vector::best_for::<K>()
        } else {
            Vector::Portable
        };
    }

    /// Whether the bulk lookup uses a vector path.
    pub fn simd(&self) -> bool {
        self.vector != Vector::Portable
    }

    /// Chooses the bulk lookup (to compare them on one CPU); one the CPU lacks falls back to
    /// the portable lookup. Returns the one now in use.
    pub fn set_vector(&mut self, v: Vector) -> Vector {
        self.vector = if v.available() { v } else { Vector::Portable };
        self.vector
    }

    /// The bulk lookup in use.
    pub fn vector(&self) -> Vector {
        self.vector
    }

    /// Bits resolved by the direct-pointing array.
    pub fn direct_bits(&self) -> u8 {
        self.direct_bits
    }

    /// Number of routes the structure was built from.
    pub fn route_count(&self) -> usize {
        self.routes
    }

    /// Runs the vector lookup over a prefix of `addrs`; returns how many it answered.
    #[inline]
    fn lookup_bulk_simd(&self, addrs: &[K], out: &mut [NextHop]) -> usize {
        #[cfg(target_arch = "x86_64")]
        {
            use core::any::TypeId;
            if self.vector == Vector::Portable {
                return 0;
            }
            let m = &*self.mem;
            // SAFETY: the gathers read only entries and the blocks reachable from them, which
            // the writer does not change before this lookup is over (see `update.rs`);
            // `AtomicU32` has the layout of `u32`.
            let parts = unsafe {
                Parts {
                    top: &m.top,
                    top_bits: self.top_bits,
                    direct: core::slice::from_raw_parts(
                        m.direct.as_ptr() as *const u32,
                        m.direct.len(),
                    ),
                    nodes: m.nodes.as_slice(),
                    words: m.words.as_slice(),
                    lnodes: m.lnodes.as_slice(),
                    leaves: m.leaves.as_slice(),
                    direct_bits: self.direct_bits,
                }
            };
            if self.vector == Vector::Avx512 && !m.mirrored() {
                // Not reached (a trie built where AVX-512 is missing cannot be set to it),
                // but the walk must not gather from words that do not mirror the nodes.
                return 0;
            }
            if TypeId::of::<K>() == TypeId::of::<u32>() {
                // SAFETY: K is u32, so the slice reinterpretation is the identity; the CPU
                // features were checked when `vector` was set, and the parts come from a build.
                unsafe {
                    let a = core::slice::from_raw_parts(addrs.as_ptr() as *const u32, addrs.len());
                    return match self.vector {
                        Vector::Avx512 => avx512::bulk_v4(&parts, a, out),
                        Vector::Avx2 => avx2::bulk_v4(&parts, a, out),
                        Vector::Portable => 0,
                    };
                }
            }
            if self.vector == Vector::Avx512 && TypeId::of::<K>() == TypeId::of::<u128>() {
                // SAFETY: as above, with K = u128.
                unsafe {
                    let a = core::slice::from_raw_parts(addrs.as_ptr() as *const u128, addrs.len());
                    return avx512::bulk_v6(&parts, a, out);
                }
            }
            0
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (addrs, out);
            0
        }
    }

    /// The leaf index for slot `v` of a node with leaf vector `leafvec` and leaf base `base0`.
    #[inline(always)]
    fn rank_leaf(leafvec: u64, base0: u32, v: usize) -> u32 {
        base0 + (leafvec & UPTO[v & 63]).count_ones() - 1
    }

    /// Where `addr`'s direct-pointing entry is: its index in `direct`, or the next hop when the
    /// top level of two-level direct pointing already answers.
    #[inline(always)]
    fn direct_slot(&self, addr: K) -> Result<usize, NextHop> {
        let (ds, tb) = (self.direct_bits, self.top_bits);
        if tb == 0 {
            return Ok(addr.chunk(0, ds));
        }
        let t = self.mem.top[addr.chunk(0, tb)];
        if t & LEAF != 0 {
            Err(t & !LEAF)
        } else {
            Ok(((t as usize) << (ds - tb)) | addr.chunk(tb, ds - tb))
        }
    }

    /// The leaf of slot `v` of the childless-node record at offset `o`.
    #[inline(always)]
    fn lnode_lookup(&self, o: usize, v: usize) -> NextHop {
        let lv = lnode_leafvec(&self.mem.lnodes, o);
        let li = o + LNODE_HEADER + (lv & upto(v)).count_ones() as usize - 1;
        self.mem.lnodes.get(li) as NextHop
    }

    /// Continues a lookup at node `idx`, bit `off`.
    #[inline(always)]
    fn walk(&self, addr: K, mut idx: u32, mut off: u8) -> NextHop {
        loop {
            let n = self.mem.nodes.get(idx as usize);
            let v = addr.chunk(off, STRIDE);
            if n.vector & (1u64 << v) != 0 {
                idx = n.base1 + (n.vector & upto(v)).count_ones() - 1;
                off += STRIDE;
            } else {
                let li = Self::rank_leaf(n.leafvec, n.base0, v);
                return self.mem.leaves.get(li as usize) as NextHop;
            }
        }
    }

    /// Looks up one group of at most [`GROUP`] addresses in lockstep: each round advances every
    /// unfinished lookup by one memory access and prefetches the next one.
    ///
    /// Every lookup that walks nodes starts at the direct bits in the first round and goes one
    /// level down per round, so all walking lanes of a round read the same bit offset: it is
    /// one number per round, not one per lane, and while the stride lies in the upper 64 bits
    /// of the address (every level of a route up to /60 below 18 direct bits) a lane's index
    /// comes from two shifts of a copy of those bits. Answers are gathered in a local array
    /// (lane numbers below [`GROUP`] need no bounds check) and copied out at the end.
    #[inline(always)]
    fn lookup_group(&self, addrs: &[K], out: &mut [NextHop]) {
        let n = addrs.len().min(out.len()).min(GROUP);
        let (addrs, out) = (&addrs[..n], &mut out[..n]);
        if n == 0 {
            return;
        }
        // Per lane: the index to read next (node, childless node or leaf), the address's
        // upper 64 bits, and the answer.
        let mut idx = [0u32; GROUP];
        let mut hi = [0u64; GROUP];
        let mut res = [NO_ROUTE; GROUP];
        // Lanes by what they read next.
        let mut walking: u64 = 0;
        let mut lnode: u64 = 0;
        let mut leafing: u64 = 0;
        let ds = self.direct_bits;
        let nodes = &self.mem.nodes;
        for (h, a) in hi.iter_mut().zip(addrs) {
            *h = (a.to_u128_left() >> 64) as u64;
        }
        if ds > 0 {
            let mut pending: u64 = 0;
            for (i, &a) in addrs.iter().enumerate() {
                match self.direct_slot(a) {
                    Ok(d) => {
                        prefetch(self.mem.direct.as_ptr().wrapping_add(d));
                        idx[i] = d as u32;
                        pending |= 1 << i;
                    }
                    Err(nh) => res[i] = nh,
                }
            }
            let mut lanes = pending;
            while lanes != 0 {
                let i = lanes.trailing_zeros() as usize % GROUP;
                lanes &= lanes - 1;
                let e = self.entry(idx[i] as usize);
                if e & LEAF != 0 {
                    res[i] = e & !LEAF;
                } else if e & LNODE != 0 {
                    idx[i] = e & INDEX;
                    lnode |= 1 << i;
                    prefetch(self.mem.lnodes.as_ptr().wrapping_add(idx[i] as usize));
                } else {
                    idx[i] = e;
                    walking |= 1 << i;
                    prefetch(nodes.as_ptr().wrapping_add(e as usize));
                }
            }
        } else {
            walking = u64::MAX >> (64 - n);
        }
        // The bit offset of the walking lanes' nodes in this round.
        let mut off = ds;
        while walking | lnode | leafing != 0 {
            let mut lanes = leafing;
            while lanes != 0 {
                let i = lanes.trailing_zeros() as usize % GROUP;
                lanes &= lanes - 1;
                res[i] = self.mem.leaves.get(idx[i] as usize) as NextHop;
            }
            leafing = 0;
            let mut lanes = lnode;
            while lanes != 0 {
                let i = lanes.trailing_zeros() as usize % GROUP;
                lanes &= lanes - 1;
                // The leaf sits in the same record, mostly in the line just fetched.
                let v = addrs.get(i).map_or(0, |a| a.chunk(ds, STRIDE));
                res[i] = self.lnode_lookup(idx[i] as usize, v);
            }
            lnode = 0;
            // One node visit per walking lane; `$slot` gives lane `i`'s slot in its node. The
            // loop is written out twice, once per way of taking the slot, so that the choice
            // is made once per round, not at every visit.
            macro_rules! visit_nodes {
                ($slot:expr) => {
                    let mut lanes = walking;
                    while lanes != 0 {
                        let i = lanes.trailing_zeros() as usize % GROUP;
                        lanes &= lanes - 1;
                        let node = nodes.get(idx[i] as usize);
                        let v: usize = $slot(i);
                        if node.vector & (1u64 << v) != 0 {
                            let c = node.base1 + (node.vector & UPTO[v & 63]).count_ones() - 1;
                            idx[i] = c;
                            prefetch(nodes.as_ptr().wrapping_add(c as usize));
                        } else {
                            let l = Self::rank_leaf(node.leafvec, node.base0, v);
                            idx[i] = l;
                            walking &= !(1 << i);
                            leafing |= 1 << i;
                            prefetch(self.mem.leaves.as_ptr().wrapping_add(l as usize));
                        }
                    }
                };
            }
            if u32::from(off) + u32::from(STRIDE) <= 64 {
                visit_nodes!(|i: usize| ((hi[i] << off) >> (64 - STRIDE)) as usize);
            } else {
                visit_nodes!(|i: usize| addrs.get(i).map_or(0, |a| a.chunk(off, STRIDE)));
            }
            off = off.saturating_add(STRIDE);
        }
        out.copy_from_slice(&res[..n]);
    }

    /// Looks up one chunk of at most [`CHUNK`] addresses in stages (see the module doc): the
    /// direct-pointing entries of all of them, then the childless-node records of those that
    /// need one, then the nodes level by level, then the leaves. Every stage is a loop without
    /// data-dependent branches over a list the previous stage wrote, prefetching ahead.
    #[inline(always)]
    fn lookup_staged(&self, addrs: &[K], out: &mut [NextHop]) {
        let n = addrs.len().min(out.len()).min(CHUNK);
        let (addrs, out) = (&addrs[..n], &mut out[..n]);
        if n == 0 {
            return;
        }
        // Lists of (lane, index to read next); a list never has more entries than lanes, and
        // every access masks its position with `CHUNK - 1`, so none is out of bounds.
        let mut ln_lane = [0u16; CHUNK];
        let mut ln_at = [0u32; CHUNK];
        // The record's slot of each listed lane, taken while the address is at hand.
        let mut ln_v = [0u8; CHUNK];
        let mut nd_lane = [0u32; CHUNK];
        let mut nd_at = [0u32; CHUNK];
        let (mut nl, mut nn) = (0usize, 0usize);
        let ds = self.direct_bits;
        let direct = self.mem.direct.as_ptr();
        let nodes = self.mem.nodes.as_ptr();
        let lnodes = self.mem.lnodes.as_ptr();
        // Both lines a 24-byte node starting at `p` may straddle.
        let pf_line_pair = |p: *const u8| {
            prefetch(p);
            prefetch(p.wrapping_add(core::mem::size_of::<Node>() - 1));
        };
        if ds == 0 {
            for (i, l) in nd_lane.iter_mut().enumerate().take(n) {
                *l = i as u32;
            }
            nn = n;
            pf_line_pair(nodes as *const u8);
        } else {
            // Lists lane `i`, whose direct-pointing entry is `e`.
            let mut list = |i: usize, e: u32| {
                // Right for leaf lanes; the later stages overwrite the others.
                out[i] = e & !LEAF;
                let kind = e & (LEAF | LNODE);
                let at = e & INDEX;
                ln_lane[nl & (CHUNK - 1)] = i as u16;
                ln_at[nl & (CHUNK - 1)] = at;
                ln_v[nl & (CHUNK - 1)] = addrs[i].chunk(ds, STRIDE) as u8;
                nl += (kind == LNODE) as usize;
                nd_lane[nn & (CHUNK - 1)] = i as u32;
                nd_at[nn & (CHUNK - 1)] = at;
                nn += (kind == 0) as usize;
                // A node lane's node, at once; without a branch, the other lanes prefetch
                // their own address, at hand.
                let line = if kind == 0 {
                    nodes.wrapping_add(at as usize) as *const u8
                } else {
                    addrs.as_ptr().wrapping_add(i) as *const u8
                };
                pf_line_pair(line);
            };
            if self.top_bits == 0 {
                // Flat direct pointing, the default, in a loop of its own: the slot is the
                // address's top bits, with no top level to consult.
                let table = &self.mem.direct[..];
                for &a in &addrs[..n.min(AHEAD)] {
                    prefetch(direct.wrapping_add(a.chunk(0, ds)));
                }
                for i in 0..n {
                    if let Some(&a) = addrs.get(i + AHEAD) {
                        prefetch(direct.wrapping_add(a.chunk(0, ds)));
                    }
                    let e = table
                        .get(addrs[i].chunk(0, ds))
                        .map_or(LEAF, |e| e.load(Ordering::Acquire));
                    list(i, e);
                }
            } else {
                let pf_direct = |a: K| {
                    if let Ok(d) = self.direct_slot(a) {
                        prefetch(direct.wrapping_add(d));
                    }
                };
                for &a in &addrs[..n.min(AHEAD)] {
                    pf_direct(a);
                }
                for i in 0..n {
                    if let Some(&a) = addrs.get(i + AHEAD) {
                        pf_direct(a);
                    }
                    let e = match self.direct_slot(addrs[i]) {
                        Ok(d) => self.entry(d),
                        Err(nh) => LEAF | nh,
                    };
                    list(i, e);
                }
            }
        }
        // A record's leaf for slot v lies at most v leaves after the header: prefetching the
        // header's line and that one covers the leaf in all but the sparsest records.
        let pf_record = |j: usize| {
            let o = ln_at[j & (CHUNK - 1)] as usize;
            let v = ln_v[j & (CHUNK - 1)] as usize;
            prefetch(lnodes.wrapping_add(o));
            prefetch(lnodes.wrapping_add(o + LNODE_HEADER + v));
        };
        for j in 0..nl.min(AHEAD) {
            pf_record(j);
        }
        for j in 0..nl {
            pf_record(j + AHEAD);
            let j = j & (CHUNK - 1);
            let nh = self.lnode_lookup(ln_at[j] as usize, ln_v[j] as usize);
            if let Some(o) = out.get_mut(ln_lane[j] as usize) {
                *o = nh;
            }
        }
        self.walk_listed(addrs, out, &mut nd_lane, &mut nd_at, nn, ds);
    }

    /// Walks the listed lanes (`nd_lane[..nn]`, each at node `nd_at`) from bit `off` down the
    /// nodes one level per loop, then reads their leaves into `out`. `N`, the lists' length,
    /// is a power of two: every position is masked with `N - 1`.
    #[inline(always)]
    fn walk_listed<const N: usize>(
        &self,
        addrs: &[K],
        out: &mut [NextHop],
        nd_lane: &mut [u32; N],
        nd_at: &mut [u32; N],
        mut nn: usize,
        mut off: u8,
    ) {
        const { assert!(N.is_power_of_two()) };
        let nodes = self.mem.nodes.as_ptr();
        let leaves = self.mem.leaves.as_ptr();
        let mut lf_lane = [0u32; N];
        let mut lf_at = [0u32; N];
        let mut nf = 0usize;
        // Both lines a 24-byte node starting at `p` may straddle.
        let pf_line_pair = |p: *const u8| {
            prefetch(p);
            prefetch(p.wrapping_add(core::mem::size_of::<Node>() - 1));
        };
        nn = nn.min(N);
        while nn > 0 {
            let mut next = 0usize;
            for j in 0..nn {
                let i = nd_lane[j] as usize;
                let node = self.mem.nodes.get(nd_at[j] as usize);
                let v = addrs[i].chunk(off, STRIDE);
                let m = upto(v);
                let child = (node.vector >> v) & 1 != 0;
                let c = node
                    .base1
                    .wrapping_add((node.vector & m).count_ones())
                    .wrapping_sub(1);
                let l = node
                    .base0
                    .wrapping_add((node.leafvec & m).count_ones())
                    .wrapping_sub(1);
                nd_lane[next & (N - 1)] = i as u32;
                nd_at[next & (N - 1)] = c;
                next += child as usize;
                lf_lane[nf & (N - 1)] = i as u32;
                lf_at[nf & (N - 1)] = l;
                nf += !child as usize;
                // The child node or the leaf this lane reads next, at once.
                let line = if child {
                    nodes.wrapping_add(c as usize) as *const u8
                } else {
                    leaves.wrapping_add(l as usize) as *const u8
                };
                pf_line_pair(line);
            }
            nn = next;
            off = off.saturating_add(STRIDE);
        }
        for j in 0..nf {
            out[lf_lane[j] as usize] = self.mem.leaves.get(lf_at[j] as usize) as NextHop;
        }
    }
}

impl<K: Key> Lpm<K> for Poptrie<K> {
    #[inline]
    fn lookup(&self, addr: K) -> NextHop {
        let ds = self.direct_bits;
        if ds == 0 {
            return self.walk(addr, 0, 0);
        }
        let e = match self.direct_slot(addr) {
            Ok(d) => self.entry(d),
            Err(nh) => return nh,
        };
        if e & LEAF != 0 {
            e & !LEAF
        } else if e & LNODE != 0 {
            self.lnode_lookup((e & INDEX) as usize, addr.chunk(ds, STRIDE))
        } else {
            self.walk(addr, e, ds)
        }
    }

    fn lookup_bulk(&self, addrs: &[K], out: &mut [NextHop]) {
        let n = addrs.len().min(out.len());
        let done = self.lookup_bulk_simd(&addrs[..n], &mut out[..n]);
        let (addrs, out) = (&addrs[done..n], &mut out[done..n]);
        if K::BITS == 32 {
            if !self.lookup_pipelined(addrs, out) {
                for (a, o) in addrs.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
                    self.lookup_staged(a, o);
                }
            }
        } else {
            for (a, o) in addrs.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
                self.lookup_group(a, o);
            }
        }
    }

    /// The arrays up to their high-water marks (the arenas' untouched headroom is reserved
    /// address space, not memory) and the writer's side tables.
    fn memory_bytes(&self) -> usize {
        let m = &self.mem;
        let used = |i: usize| m.used[i].load(Ordering::Relaxed);
        core::mem::size_of::<Self>()
            + core::mem::size_of::<Mem>()
            + (m.top.capacity() + m.direct.len()) * 4
            + used(0) * core::mem::size_of::<Node>()
            + used(0) * core::mem::size_of::<NodeWords>() * usize::from(m.mirrored())
            + used(1) * 2
            + used(2) * 2
            + self
                .w
                .as_ref()
                .map_or(0, |w| core::mem::size_of::<Writer>() + w.bytes())
            + self.scratch_bytes()
    }

    fn name(&self) -> &'static str {
        "poptrie"
    }
}

impl<K: Key> LpmBuild<K> for Poptrie<K> {
    type Config = PoptrieConfig;

    fn build(routes: &[Route<K>], config: &PoptrieConfig) -> Result<Self, BuildError> {
        Self::build_at_least(routes, config, [0; 3])
    }
}

/// Room an arena of `used` slots keeps for updates: the blocks they write before the blocks
/// they replace can be reused (a publication later) pile up. Untouched room costs address
/// space, not memory; but room once written stays in use, so a trie that does not need it is
/// better off reusing the blocks it freed, in memory already touched. An IPv6 change copies a
/// few child blocks of up to 64 nodes, and a batch of a millisecond's IPv6 changes filled
/// half its used size (then the trie is built again, twice as large, a full build in the
/// middle of the changes): IPv6 gets twice its used size, IPv4 half.
fn headroom(used: usize, key_bits: u8) -> usize {
    if key_bits > 32 {
        (2 * used).max(1 << 18)
    } else {
        (used / 2).max(1 << 17)
    }
}

/// The error of an arena without room for a block: the trie is built again, bigger.
const ARENA_FULL: &str = "arena full";

impl<K: Key> Poptrie<K> {
    /// [`LpmBuild::build`] of canonical `routes` into arenas of at least `min_caps` slots
    /// (nodes, childless-node records, leaves).
    pub(super) fn build_at_least(
        routes: &[Route<K>],
        config: &PoptrieConfig,
        min_caps: [usize; 3],
    ) -> Result<Self, BuildError> {
        let (ds, tb) = (config.direct_bits, config.top_bits);
        if ds > 24 || ds >= K::BITS {
            return Err(BuildError::BadConfig(format!(
                "direct-pointing bits {ds} out of range (0..=24)"
            )));
        }
        if tb >= ds && tb != 0 {
            return Err(BuildError::BadConfig(format!(
                "top-level bits {tb} must be fewer than the direct-pointing bits {ds}"
            )));
        }
        let routes = canonicalize(routes);
        if let Some(r) = routes.iter().find(|r| r.nexthop > MAX_NEXTHOP) {
            return Err(BuildError::NextHopTooLarge {
                nexthop: r.nexthop,
                max: MAX_NEXTHOP,
            });
        }
        // Arena sizes from the route count, generous (untouched slots cost address space
        // only); a build that runs out starts again with the sizes it reached, and one that
        // leaves too little headroom for updates too.
        let n = routes.len();
        let mut caps = [n / 4 + 1024, 2 * n + 4096, n + 4096];
        for (c, m) in caps.iter_mut().zip(min_caps) {
            *c = (*c).max(m);
        }
        for _ in 0..8 {
            match Self::build_into(&routes, ds, tb, caps) {
                Ok(p) => {
                    let used = p.mem.used.each_ref().map(|u| u.load(Ordering::Relaxed));
                    let room = |i: usize| caps[i] >= used[i] + headroom(used[i], K::BITS) / 2;
                    if (0..3).all(room) {
                        return Ok(p);
                    }
                    caps = core::array::from_fn(|i| {
                        (used[i] + headroom(used[i], K::BITS)).max(caps[i])
                    });
                }
                Err(BuildError::TooLarge(ARENA_FULL)) => caps = caps.map(|c| c * 2),
                Err(e) => return Err(e),
            }
        }
        Err(BuildError::TooLarge(ARENA_FULL))
    }

    /// Builds over canonical `routes` into arenas of `caps` slots (nodes, childless-node
    /// records, leaves).
    fn build_into(
        routes: &[Route<K>],
        ds: u8,
        tb: u8,
        caps: [usize; 3],
    ) -> Result<Self, BuildError> {
        let mut mem = Mem {
            top: Vec::new(),
            direct: Box::new([]),
            nodes: Arena::zeroed(caps[0] + PAD)?,
            words: Arena::zeroed(if Vector::Avx512.available() {
                caps[0] + PAD
            } else {
                0
            })?,
            lnodes: Arena::zeroed(caps[1] + PAD)?,
            leaves: Arena::zeroed(caps[2] + PAD)?,
            used: Default::default(),
        };
        let mut w = Writer {
            ndef: Vec::with_capacity(caps[0] / 2),
            ..Writer::default()
        };
        // Leaf 0 and record 0 stay unused, so a base of 0 or 1 never underflows a rank.
        w.leaves_len = 1;
        w.lnodes_len = 1;
        let mut scratch = update::Scratch::default();
        let mut b = Builder::<K> {
            mem: &mem,
            w: &mut w,
            align_records: true,
            s: &mut scratch,
        };
        let mut top = Vec::new();
        let direct = if ds == 0 {
            b.alloc_nodes(1)?;
            // Without direct pointing the root node starts at bit 0, so only a default route
            // is "no longer than the offset"; it becomes the root's default leaf.
            let default = routes
                .iter()
                .find(|r| r.prefix.is_empty())
                .map_or(0, |r| r.nexthop as u16);
            b.fill(routes, 0, 0, default)?;
            Vec::new()
        } else if tb == 0 {
            b.build_direct(routes, 0, ds, LEAF)?
        } else {
            let (t, blocks) = b.build_two_level(routes, tb, ds)?;
            top = t;
            blocks
        };
        mem.top = top;
        mem.direct = direct.into_iter().map(AtomicU32::new).collect();
        let p = Poptrie {
            mem: Arc::new(mem),
            w: Some(Box::new(w)),
            direct_bits: ds,
            top_bits: tb,
            routes: routes.len(),
            vector: Vector::preferred_for::<K>(),
            scratch: None,
        };
        p.publish_used();
        Ok(p)
    }

    /// Records the writer's high-water marks where `memory_bytes` of any handle reads them.
    fn publish_used(&self) {
        if let Some(w) = &self.w {
            for (u, v) in self
                .mem
                .used
                .iter()
                .zip([w.nodes_len, w.lnodes_len, w.leaves_len])
            {
                u.store(v, Ordering::Relaxed);
            }
        }
    }
}

/// Free blocks by size: `lists[n]` holds the start of every free block of `n` elements.
/// Blocks are reused only at their exact size; sizes are small (at most 64 children, 64
/// leaves, or a 68-element record), so the lists stay few and short.
#[derive(Clone, Debug, Default)]
struct FreeLists {
    nodes: Vec<Vec<u32>>,
    leaves: Vec<Vec<u32>>,
    lnodes: Vec<Vec<u32>>,
}

impl FreeLists {
    fn take(lists: &mut [Vec<u32>], size: usize) -> Option<usize> {
        lists.get_mut(size)?.pop().map(|i| i as usize)
    }

    fn put(lists: &mut Vec<Vec<u32>>, size: usize, at: usize) {
        if lists.len() <= size {
            lists.resize_with(size + 1, Vec::new);
        }
        lists[size].push(at as u32);
    }

    fn slots(lists: &[Vec<u32>]) -> usize {
        lists.iter().enumerate().map(|(n, l)| n * l.len()).sum()
    }

    /// Node slots in free blocks.
    fn node_slots(&self) -> usize {
        Self::slots(&self.nodes)
    }

    /// Leaf slots in free blocks (childless-node records included, headers not).
    fn leaf_slots(&self) -> usize {
        Self::slots(&self.leaves) + Self::slots(&self.lnodes)
    }

    fn bytes(&self) -> usize {
        [&self.nodes, &self.leaves, &self.lnodes]
            .iter()
            .map(|l| l.capacity() * 24 + l.iter().map(|v| v.capacity() * 4).sum::<usize>())
            .sum()
    }
}

/// Builds (and, for updates, rebuilds) parts of the trie in its arenas. Every block it
/// writes is fresh: past the high-water mark or from the free lists, which hold only blocks no
/// reader can reach any more. Blocks an update replaces are retired, not freed.
struct Builder<'a, K: Key> {
    mem: &'a Mem,
    w: &'a mut Writer,
    /// Whether appended records are placed to cross no more lines than they must (a full
    /// build; see [`record_pad`]), or packed (updates).
    align_records: bool,
    /// Lists kept from one update to the next.
    s: &'a mut update::Scratch<K>,
}

/// Calls `f(chunk, start, end)` for each run of `routes` (sorted by address) whose addresses
/// share the `width`-bit chunk at bit `off` and for which `wanted(chunk)` holds.
fn runs<K: Key>(
    routes: &[Route<K>],
    off: u8,
    width: u8,
    wanted: impl Fn(usize) -> bool,
    mut f: impl FnMut(usize, usize, usize) -> Result<(), BuildError>,
) -> Result<(), BuildError> {
    let mut start = 0;
    while let Some(first) = routes.get(start) {
        let c = first.prefix.addr().chunk(off, width);
        let mut end = start + 1;
        while routes
            .get(end)
            .is_some_and(|r| r.prefix.addr().chunk(off, width) == c)
        {
            end += 1;
        }
        if wanted(c) {
            f(c, start, end)?;
        }
        start = end;
    }
    Ok(())
}

impl<K: Key> Builder<'_, K> {
    /// Direct-pointing entries for bits `off..off + width` over `routes` (those inside the
    /// range; when `off` > 0, routes no longer than `off` are accounted for in `default`, a
    /// leaf entry).
    fn build_direct(
        &mut self,
        routes: &[Route<K>],
        off: u8,
        width: u8,
        default: u32,
    ) -> Result<Vec<u32>, BuildError> {
        let ds = off + width;
        let mut direct = vec![default; 1usize << width];
        // Paint prefixes that end within the direct bits, covering ones first (canonical order).
        let mut deep = vec![false; 1usize << width];
        for r in routes {
            let len = r.prefix.len();
            if off > 0 && len <= off {
                continue;
            }
            let start = r.prefix.addr().chunk(off, width);
            if len <= ds {
                let count = 1usize << (ds - len);
                direct[start..start + count].fill(LEAF | r.nexthop);
            } else {
                deep[start] = true;
            }
        }
        // Slots holding longer prefixes become nodes, whose default is the painted leaf: a
        // childless node record when nothing reaches past the node's stride, else a node.
        runs(
            routes,
            off,
            width,
            |c| deep[c],
            |slot, a, b| {
                let default = (direct[slot] & !LEAF) as u16;
                direct[slot] = self.slot_entry(&routes[a..b], ds, default)?;
                Ok(())
            },
        )?;
        Ok(direct)
    }

    /// The direct-pointing entry of a slot whose routes longer than the direct bits `ds` are
    /// `run` (not empty, canonical order), below a slot default `default`: a childless-node
    /// record when nothing reaches past the next stride, else a node.
    fn slot_entry(&mut self, run: &[Route<K>], ds: u8, default: u16) -> Result<u32, BuildError> {
        if run.iter().any(|r| r.prefix.len() > ds + STRIDE) {
            let k = self.alloc_nodes(1)?;
            self.fill(run, k, ds, default)?;
            Ok(k as u32)
        } else {
            let (slots, _) = paint(run, ds, default);
            let mut rec = [0u16; LNODE_HEADER + 64];
            let (leafvec, n) = emit_leaves(&slots, 0, &mut rec[LNODE_HEADER..]);
            for (k, w) in rec[..LNODE_HEADER].iter_mut().enumerate() {
                *w = (leafvec >> (16 * k)) as u16;
            }
            let o = self.alloc_record(&rec[..LNODE_HEADER + n])?;
            Ok(LNODE | o as u32)
        }
    }

    /// Node `i`.
    #[inline(always)]
    fn node(&self, i: usize) -> Node {
        self.mem.nodes.get(i)
    }

    /// Writes node `i` of a block this builder allocated and has not made reachable yet.
    fn set_node(&mut self, i: usize, n: Node) {
        // SAFETY: blocks come from `take`, which hands out only slots no reader can reach
        // (never used, or retired and reclaimed after every reader left), and this builder
        // has not published them; the builder is the trie's only writer.
        unsafe {
            self.mem.nodes.set(i, n);
            if self.mem.mirrored() {
                self.mem.words.set(i, NodeWords::of(n));
            }
        }
    }

    /// Direct-pointing entry `s`, as the writer last stored it.
    fn direct(&self, s: usize) -> u32 {
        self.mem.direct[s].load(Ordering::Relaxed)
    }

    /// Switches direct-pointing entry `s` to `e`: the blocks below `e`, written before, are
    /// seen complete by every lookup that loads the entry.
    fn set_direct(&mut self, s: usize, e: u32) {
        self.mem.direct[s].store(e, Ordering::Release);
    }

    /// A fresh block of `size` slots of `kind`: a reclaimed one of that size, or one past the
    /// high-water mark.
    fn take(&mut self, kind: Kind, size: usize) -> Result<usize, BuildError> {
        let (lists, len, cap) = match kind {
            Kind::Nodes => (
                &mut self.w.free.nodes,
                &mut self.w.nodes_len,
                self.mem.nodes.len(),
            ),
            Kind::Leaves => (
                &mut self.w.free.leaves,
                &mut self.w.leaves_len,
                self.mem.leaves.len(),
            ),
            Kind::Lnodes => (
                &mut self.w.free.lnodes,
                &mut self.w.lnodes_len,
                self.mem.lnodes.len(),
            ),
        };
        if let Some(i) = FreeLists::take(lists, size) {
            return Ok(i);
        }
        let mut at = *len;
        if kind == Kind::Lnodes && self.align_records {
            let pad = record_pad(at, size);
            if pad > 0 && at + pad + size + PAD <= cap {
                FreeLists::put(lists, pad, at);
                at += pad;
            }
        }
        if at + size + PAD > cap {
            return Err(BuildError::TooLarge(ARENA_FULL));
        }
        if at + size > INDEX as usize {
            return Err(BuildError::TooLarge("more than 2^30 slots"));
        }
        *len = at + size;
        Ok(at)
    }

    /// A block of `n` nodes, reused or appended.
    fn alloc_nodes(&mut self, n: usize) -> Result<usize, BuildError> {
        let k = self.take(Kind::Nodes, n)?;
        if self.w.ndef.len() < k + n {
            self.w.ndef.resize(k + n, 0);
        }
        if self.w.marking {
            let stamp = &mut self.w.stamp;
            if stamp.len() <= k {
                stamp.resize(k + 1, 0);
            }
            stamp[k] = self.w.round;
        }
        Ok(k)
    }

    /// Stores `data` in a fresh block of `kind` (leaves or records); returns where.
    fn alloc_u16(&mut self, kind: Kind, data: &[u16]) -> Result<usize, BuildError> {
        let at = self.take(kind, data.len())?;
        let arena = if kind == Kind::Leaves {
            &self.mem.leaves
        } else {
            &self.mem.lnodes
        };
        // SAFETY: as in `set_node`, a fresh block no reader can reach.
        unsafe { arena.set_slice(at, data) };
        Ok(at)
    }

    /// Stores a childless-node record; returns its offset.
    fn alloc_record(&mut self, rec: &[u16]) -> Result<usize, BuildError> {
        let o = self.alloc_u16(Kind::Lnodes, rec)?;
        self.w.lnode_count += 1;
        Ok(o)
    }

    /// Retires a block: it goes to the free lists once no reader can be in it.
    fn retire(&mut self, kind: Kind, at: usize, size: usize) {
        if size > 0 {
            let b = Block {
                kind,
                at: at as u32,
                size: size as u32,
            };
            self.w.retired.push_back((self.w.group, b));
        }
    }

    /// Retires everything a direct-pointing entry owns (nothing for a leaf).
    fn retire_entry(&mut self, e: u32) {
        if e & LEAF != 0 {
        } else if e & LNODE != 0 {
            let o = (e & INDEX) as usize;
            let n = lnode_leafvec(&self.mem.lnodes, o).count_ones() as usize;
            self.retire(Kind::Lnodes, o, LNODE_HEADER + n);
            self.w.lnode_count -= 1;
        } else {
            self.retire_below(e as usize);
            self.retire(Kind::Nodes, e as usize, 1);
        }
    }

    /// Retires the leaf block of node `n`.
    fn retire_leaves(&mut self, n: &Node) {
        self.retire(
            Kind::Leaves,
            n.base0 as usize,
            n.leafvec.count_ones() as usize,
        );
    }

    /// Retires the leaves and the children (recursively) of node `idx`, not the node itself.
    fn retire_below(&mut self, idx: usize) {
        let n = self.node(idx);
        self.retire_leaves(&n);
        let nc = n.vector.count_ones() as usize;
        for j in 0..nc {
            self.retire_below(n.base1 as usize + j);
        }
        self.retire(Kind::Nodes, n.base1 as usize, nc);
    }

    /// Two-level direct pointing: the top table over bits `0..tb` and, for every top slot
    /// holding a prefix longer than `tb`, a block over bits `tb..ds`.
    fn build_two_level(
        &mut self,
        routes: &[Route<K>],
        tb: u8,
        ds: u8,
    ) -> Result<(Vec<u32>, Vec<u32>), BuildError> {
        let mut top = vec![LEAF; 1usize << tb];
        let mut deep = vec![false; 1usize << tb];
        for r in routes {
            let start = r.prefix.addr().chunk(0, tb);
            if r.prefix.len() <= tb {
                let count = 1usize << (tb - r.prefix.len());
                top[start..start + count].fill(LEAF | r.nexthop);
            } else {
                deep[start] = true;
            }
        }
        let mut blocks = Vec::new();
        let mut next = 0u32;
        runs(
            routes,
            0,
            tb,
            |c| deep[c],
            |slot, a, b| {
                let block = self.build_direct(&routes[a..b], tb, ds - tb, top[slot])?;
                blocks.extend_from_slice(&block);
                top[slot] = next;
                next += 1;
                Ok(())
            },
        )?;
        Ok((top, blocks))
    }

    /// Writes the leaves of a node's `slots` (its children at `vector`) to a fresh block;
    /// returns where (1 when there are none: a node of children only keeps `base0 - 1` in
    /// range) and the leaf vector.
    fn alloc_leaves(&mut self, slots: &[u16; 64], vector: u64) -> Result<(u32, u64), BuildError> {
        let mut buf = [0u16; 64];
        let (leafvec, nl) = emit_leaves(slots, vector, &mut buf);
        let base0 = if nl > 0 {
            self.alloc_u16(Kind::Leaves, &buf[..nl])?
        } else {
            1
        };
        if base0 + 64 > u32::MAX as usize {
            return Err(BuildError::TooLarge("more than 2^32 leaves"));
        }
        Ok((base0 as u32, leafvec))
    }

    /// Builds node `idx` at bit offset `off` from the routes whose addresses lie in its range.
    /// Routes no longer than `off` are already accounted for in `default`.
    fn fill(
        &mut self,
        routes: &[Route<K>],
        idx: usize,
        off: u8,
        default: u16,
    ) -> Result<(), BuildError> {
        let (slots, vector) = paint(routes, off, default);
        let (base0, leafvec) = self.alloc_leaves(&slots, vector)?;
        let nchild = vector.count_ones() as usize;
        let base1 = if nchild > 0 {
            self.alloc_nodes(nchild)?
        } else {
            0
        };
        self.set_node(
            idx,
            Node {
                vector,
                base0,
                base1: base1 as u32,
                leafvec,
            },
        );
        self.w.ndef[idx] = default;
        if nchild == 0 {
            return Ok(());
        }
        let mut k = base1;
        let end = off + STRIDE;
        runs(
            routes,
            off,
            STRIDE,
            |c| vector & (1u64 << c) != 0,
            |c, a, b| {
                self.fill(&routes[a..b], k, end, slots[c])?;
                k += 1;
                Ok(())
            },
        )
    }
}

/// The 64 slots of the node at bit `off` over `routes` (all inside the node's range): each
/// slot's longest-match next hop among the prefixes ending within the stride (over
/// `default`), and the vector of slots that hold longer prefixes.
fn paint<K: Key>(routes: &[Route<K>], off: u8, default: u16) -> ([u16; 64], u64) {
    let end = off + STRIDE;
    let mut slots = [default; 64];
    let mut vector = 0u64;
    for r in routes {
        let len = r.prefix.len();
        if len <= off {
            continue;
        }
        let c = r.prefix.addr().chunk(off, STRIDE);
        if len <= end {
            let count = 1usize << (end - len);
            slots[c..c + count].fill(r.nexthop as u16);
        } else {
            vector |= 1u64 << c;
        }
    }
    (slots, vector)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prefix::{Prefix, NO_ROUTE};
    use crate::testkit::{
        check_against_golden, check_edge_tables, routes_and_probes, xorshift, POOL4, POOL6,
    };
    use proptest::prelude::*;

    /// Flat direct pointing of several widths, none, and two-level direct pointing.
    fn configs() -> Vec<PoptrieConfig> {
        let mut v: Vec<PoptrieConfig> = [0u8, 1, 6, 16, 18, 24].map(PoptrieConfig::flat).to_vec();
        for (direct_bits, top_bits) in [(24, 12), (16, 8), (18, 6), (2, 1)] {
            v.push(PoptrieConfig {
                direct_bits,
                top_bits,
            });
        }
        v
    }

    fn both_paths<K: Key>(routes: &[Route<K>], addrs: &[K]) {
        for cfg in configs() {
            let mut p = Poptrie::build(routes, &cfg).unwrap();
            for v in [Vector::Avx512, Vector::Avx2, Vector::Portable] {
                if p.set_vector(v) == v {
                    check_against_golden(&p, routes, addrs, &format!("{cfg:?}, {v:?}"));
                }
            }
        }
    }

    /// The vector lookup's node words give every slot the child and leaf rank of the node's
    /// fields (the base plus the ones up to the slot, less one), on both halves.
    #[test]
    fn node_words_rank_every_slot_as_the_fields_do() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for k in 0..200 {
            let sparse = if k % 2 == 0 { next() } else { u64::MAX };
            let n = Node {
                vector: next() & sparse,
                base0: next() as u32 >> (k % 8),
                base1: next() as u32 >> (k % 8),
                leafvec: (next() & next()) | 1,
            };
            let w = NodeWords::of(n).0;
            for v in 0..64 {
                // What the vector walk does with the word of slot v's half.
                let rank = |word: u64| {
                    let half = word & 0xffff_ffff;
                    let r = ((word >> 32) as u32)
                        .wrapping_add((half & upto(v & 31)).count_ones())
                        .wrapping_sub(1);
                    (half >> (v & 31) & 1 != 0, r)
                };
                let ones = |bits: u64| (bits & upto(v)).count_ones();
                let child = n.base1.wrapping_add(ones(n.vector)).wrapping_sub(1);
                let (has, c) = rank(w[v >> 5]);
                assert_eq!(has, n.vector >> v & 1 != 0, "{n:?}, slot {v}");
                if has {
                    assert_eq!(c, child, "{n:?}, slot {v}");
                }
                let leaf = n.base0.wrapping_add(ones(n.leafvec)).wrapping_sub(1);
                assert_eq!(rank(w[2 + (v >> 5)]).1, leaf, "{n:?}, slot {v}");
            }
        }
        assert_eq!(core::mem::size_of::<NodeWords>(), 32);
        assert_eq!(core::mem::align_of::<NodeWords>(), 32);
    }

    #[test]
    fn two_level_direct_pointing_needs_fewer_top_bits() {
        let bad = PoptrieConfig {
            direct_bits: 12,
            top_bits: 12,
        };
        assert!(Poptrie::<u128>::build(&[], &bad).is_err());
    }

    #[test]
    fn a_preferred_lookup_is_what_new_tries_start_with() {
        let routes = [Route::new(Prefix::new_masked(0x0a00_0000u32, 8), 3)];
        let cfg = PoptrieConfig::default();
        for v in [Vector::Portable, Vector::Avx2, Vector::Avx512] {
            assert_eq!(Vector::from_name(v.name()), Some(v));
            let or = |best: Vector| if v.available() { v } else { best };
            let want = Chosen {
                v4: or(Vector::best_for::<u32>()),
                v6: or(Vector::best_for::<u128>()),
            };
            assert_eq!(Vector::prefer(Some(v)), want);
            let p = Poptrie::build(&routes, &cfg).unwrap();
            assert_eq!(p.vector(), want.v4, "{v:?}");
            let mut out = [0; 3];
            p.lookup_bulk(&[0x0a01_0203, 0x0b00_0000, 0x0aff_ffff], &mut out);
            assert_eq!(out, [3, NO_ROUTE, 3]);
        }
        assert_eq!(Vector::from_name("sse"), None);
        assert_eq!(Vector::choice("auto"), Ok(None));
        assert_eq!(Vector::choice("avx2"), Ok(Some(Vector::Avx2)));
        assert!(Vector::choice("sse").is_err());
        let auto = Vector::prefer(None);
        assert_eq!(
            auto,
            Chosen {
                v4: Vector::best_for::<u32>(),
                v6: Vector::best_for::<u128>()
            }
        );
        assert_eq!(Poptrie::build(&routes, &cfg).unwrap().vector(), auto.v4);
        let routes6 = [Route::new(Prefix::new_masked(0x2001u128 << 112, 16), 3)];
        assert_eq!(Poptrie::build(&routes6, &cfg).unwrap().vector(), auto.v6);
    }

    #[test]
    fn only_ipv4_may_leave_avx512_for_the_portable_lookup() {
        // IPv6 always gets the widest path; IPv4 the same or, on a CPU where the portable
        // loop leads, the portable lookup instead of AVX-512 (never another choice).
        assert_eq!(Vector::best_for::<u128>(), Vector::best());
        let v4 = Vector::best_for::<u32>();
        if v4 != Vector::best() {
            assert_eq!((v4, Vector::best()), (Vector::Portable, Vector::Avx512));
            assert!(portable_leads_v4());
        }
        let both = |v4, v6| Chosen { v4, v6 }.to_string();
        assert_eq!(both(Vector::Avx512, Vector::Avx512), "avx512");
        assert_eq!(
            both(Vector::Portable, Vector::Avx512),
            "portable (IPv4), avx512 (IPv6)"
        );
    }

    #[test]
    fn edge_tables_match_golden_for_every_direct_width() {
        for cfg in configs() {
            check_edge_tables(
                |r| Poptrie::build(r, &cfg).unwrap(),
                |r| Poptrie::build(r, &cfg).unwrap(),
            );
            let scalar = |r: &[Route<u32>]| {
                let mut p = Poptrie::build(r, &cfg).unwrap();
                p.set_simd(false);
                p
            };
            let scalar6 = |r: &[Route<u128>]| {
                let mut p = Poptrie::build(r, &cfg).unwrap();
                p.set_simd(false);
                p
            };
            check_edge_tables(scalar, scalar6);
        }
    }

    #[test]
    fn ipv6_storage_keeps_twice_its_used_size_free_and_ipv4_half() {
        let v4: Vec<Route<u32>> = (0..20_000u32)
            .map(|i| Route::new(Prefix::new_masked(0x0a00_0000 | (i << 8), 24), 1 + i % 5))
            .collect();
        let v6: Vec<Route<u128>> = (0..20_000u128)
            .map(|i| {
                Route::new(
                    Prefix::new_masked((0x2001_0db8u128 << 96) | (i << 80), 48),
                    2,
                )
            })
            .collect();
        let t4 = Poptrie::build(&v4, &PoptrieConfig::for_family::<u32>()).unwrap();
        let t6 = Poptrie::build(&v6, &PoptrieConfig::for_family::<u128>()).unwrap();
        let free = |len: usize, used: usize| len - PAD - used;
        let nodes = |m: &Mem| (m.nodes.len(), m.used[0].load(Ordering::Relaxed));
        // Few nodes for these routes: the first guess of the sizes is too small, and the
        // build settles on the used slots plus the whole headroom.
        let (len, used) = nodes(&t6.mem);
        assert!(
            free(len, used) >= (2 * used).max(1 << 18),
            "{len} slots, {used} used"
        );
        let (len, used) = nodes(&t4.mem);
        assert!(
            free(len, used) >= (used / 2).max(1 << 17),
            "{len} slots, {used} used"
        );
        assert!(
            free(len, used) < (2 * used).max(1 << 18),
            "IPv4 keeps less: {len}, {used}"
        );
    }

    /// `p` answers `addrs` as the golden engine does, and its bulk lookup, called on batches
    /// of each size in `batches`, answers as its lookups one at a time do.
    fn check_batches<K: Key>(
        p: &Poptrie<K>,
        routes: &[Route<K>],
        addrs: &[K],
        batches: &[usize],
        what: &str,
    ) {
        check_against_golden(p, routes, addrs, what);
        let want: Vec<NextHop> = addrs.iter().map(|&a| p.lookup(a)).collect();
        for &batch in batches {
            let mut out = vec![NO_ROUTE; addrs.len()];
            for (a, o) in addrs.chunks(batch).zip(out.chunks_mut(batch)) {
                p.lookup_bulk(a, o);
            }
            assert_eq!(out, want, "{what}, batches of {batch}");
        }
    }

    /// A table shaped like a real one (mostly /24s in /18 blocks, some longer prefixes under
    /// them, covering /16s) probed with more addresses than one chunk of the staged lookup, in
    /// batches that are not a multiple of it: every stage, list and chunk boundary is crossed.
    #[test]
    fn staged_lookup_matches_golden_across_chunks() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut routes = Vec::new();
        for k in 0..3000u32 {
            let r = next();
            let base = (r as u32) & 0x0fff_ff00;
            let len = match k % 10 {
                0 => 16,
                1 => 20,
                2 => 25 + (r >> 40) as u8 % 8,
                _ => 24,
            };
            let nh = 1 + (r >> 48) as u32 % 500;
            routes.push(Route::new(Prefix::new_masked(base, len), nh));
        }
        let mut addrs: Vec<u32> = (0..5000).map(|_| next() as u32 & 0x0fff_ffff).collect();
        addrs.extend(routes.iter().map(|r| r.prefix.addr() | 0x3f));
        for cfg in configs() {
            let mut p = Poptrie::build(&routes, &cfg).unwrap();
            for vector in [Vector::Portable, Vector::Avx2] {
                if p.set_vector(vector) != vector {
                    continue;
                }
                let batches = [1, 7, 17, CHUNK - 1, CHUNK + 3, 1000];
                check_batches(
                    &p,
                    &routes,
                    &addrs,
                    &batches,
                    &format!("{cfg:?}, {vector:?}"),
                );
            }
        }
    }

    /// The pipelined IPv4 lookup lists lanes that reach a node and walks them when its list
    /// is full: a batch in which far more lanes than the list holds reach nodes (every /18
    /// block holds routes longer than /24), mixed with leaf and childless-node lanes, answers
    /// as one lookup at a time does.
    #[test]
    fn pipelined_lookup_walks_more_node_lanes_than_its_list_holds() {
        let mut next = xorshift(0x51_7cc1_b727_220a);
        let mut routes = vec![Route::new(Prefix::new_masked(0x0a00_0000, 8), 7)];
        for block in 0..200u32 {
            let base = 0x0a00_0000 | block << 14;
            routes.push(Route::new(Prefix::new_masked(base, 20), 100 + block));
            for k in 0..4u32 {
                let at = base | (next() as u32 & 0x3f00) | k << 4;
                routes.push(Route::new(Prefix::new_masked(at, 28), 1000 + block * 4 + k));
            }
        }
        // Childless-node blocks beside them, and a leaf-only range.
        for block in 200..260u32 {
            let base = 0x0a00_0000 | block << 14;
            routes.push(Route::new(
                Prefix::new_masked(base | 0x100, 24),
                5000 + block,
            ));
        }
        let node_addrs = routes[1..801].iter().map(|r| r.prefix.addr() | 0x5);
        let mut addrs: Vec<u32> = node_addrs.collect();
        addrs.extend((0..3000).map(|_| 0x0a00_0000 | (next() as u32 & 0x00ff_ffff)));
        let mut p = Poptrie::build(&routes, &PoptrieConfig::default()).unwrap();
        p.set_vector(Vector::Portable);
        let d = pipelined::D;
        // Lengths around the prologue, the unrolled steady loop (blocks of eight lanes) and
        // the lanes left after its last block.
        let batches = [
            addrs.len(),
            1,
            d - 1,
            d + 1,
            2 * d,
            2 * d + 11,
            5 * d + 3,
            2 * CHUNK + 5,
        ];
        check_batches(&p, &routes, &addrs, &batches, "pipelined");
    }

    /// The scalar IPv6 lookup advances groups of [`GROUP`] lanes: batches shorter, longer and
    /// not a multiple of a group answer as one lookup at a time does.
    #[test]
    fn grouped_ipv6_lookup_matches_golden_across_groups() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let mut routes = Vec::new();
        for k in 0..3000u32 {
            let r = u128::from(next()) << 64 | u128::from(next());
            let base = (0x2001u128 << 112) | (r >> 16 & (u128::MAX >> 16));
            let len = [29u8, 32, 40, 44, 48, 56, 64, 128][k as usize % 8];
            let nh = 1 + (r as u32) % 500;
            routes.push(Route::new(Prefix::new_masked(base, len), nh));
        }
        let mut addrs: Vec<u128> = routes.iter().map(|r| r.prefix.addr() | 0xff).collect();
        addrs.extend((0..2000).map(|_| (0x2001u128 << 112) | u128::from(next()) << 48));
        for cfg in configs() {
            let mut p = Poptrie::build(&routes, &cfg).unwrap();
            p.set_simd(false);
            let batches = [1, GROUP - 1, GROUP, GROUP + 5, 3 * GROUP + 1];
            check_batches(&p, &routes, &addrs, &batches, &format!("{cfg:?}"));
        }
    }

    #[test]
    fn rejects_direct_widths_out_of_range() {
        assert!(Poptrie::<u32>::build(&[], &PoptrieConfig::flat(25)).is_err());
        assert!(Poptrie::<u32>::build(&[], &PoptrieConfig::flat(32)).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn v4_random_tables_match_golden((routes, addrs) in routes_and_probes(POOL4)) {
            both_paths(&routes, &addrs);
        }

        #[test]
        fn v6_random_tables_match_golden((routes, addrs) in routes_and_probes(POOL6)) {
            both_paths(&routes, &addrs);
        }
    }
}
