//! # LC-trie: the level- and path-compressed trie of Linux's `fib_trie`
//!
//! A binary trie spends one memory read per address bit. Two compressions shorten the walk:
//!
//! * **path compression** (Patricia): a node records the bit position `pos` at which its keys
//!   first differ, so a chain of one-child nodes costs nothing;
//! * **level compression**: where the trie is bushy, `bits` levels are merged into one node with
//!   `2^bits` children, indexed by the `bits` address bits at `pos`. A *relaxed* LC-trie also
//!   merges levels whose lower part is incomplete, as long as enough of the `2^bits` slots are
//!   used: that share is the **fill factor** (`inflate_threshold`).
//!
//! Linux's IPv4 routing table (`net/ipv4/fib_trie.c`, the only one since 2.6.39) inflates a
//! node when, after doubling it, at least 50 % of the children would be in use, and at least
//! 30 % for the root node. The slides this module follows (Masakazu Asama, "Linux NAPI &
//! MultiQueue + routing table", Internet Week 2014, in Japanese) give the rule as
//!
//! ```text
//!   (children not doubling + children doubling * 2) / children after doubling >= threshold
//! ```
//!
//! where a child "doubles" when both of its halves would be used in the doubled node, and
//! sweep the threshold from 0 % ("one tremendously large node") through 100 % (the perfect
//! LC-trie, no empty slot) to "never" (plain Patricia, one bit per node). [`LcConfig`] exposes
//! the same knobs. Because this trie is built once from a complete table, the rule is applied
//! exactly: the builder counts how many slots would be used with `bits + 1` bits and doubles
//! while `used * 100 >= threshold * 2^(bits+1)`.
//!
//! ## Lookup: descend, then walk the prefix chain
//!
//! This follows Nilsson and Karlsson, "IP-address lookup using LC-tries" (IEEE JSAC 17(6),
//! 1999). The trie's keys are the distinct network addresses of the table's prefixes. Every
//! prefix is one entry of a flat *chain* array, sorted, with a `parent` link to the longest
//! table prefix that strictly covers it. A leaf names the longest prefix whose address is the
//! leaf's key. A lookup
//!
//! 1. descends from the root using only the address bits at each node's `pos..pos+bits`
//!    (skipped bits are not compared), and reaches a leaf with key `k`;
//! 2. computes `m = common_prefix_len(addr, k)` once;
//! 3. follows `parent` links from the leaf's entry and returns the first entry with `len <= m`.
//!
//! Why this is right: the descent reaches a key that shares the longest possible prefix with
//! the address (argued at `Builder::fill_empty_slots` below). The longest matching prefix `P`
//! of the address then also contains `k`, so it covers the leaf's entry and lies on its chain;
//! every chain entry contains `k`, so an entry contains the address exactly when its length is
//! at most `m`; and the chain is ordered longest first.
//!
//! ## Worked example
//!
//! The table of the slides, built with the kernel's thresholds (root 30 %, other nodes 50 %):
//!
//! ```text
//!   chain  prefix             parent        keys (distinct addresses) and their leaf entry
//!   e0     172.16.0.0/16      -             172.16.0.0    -> e1
//!   e1     172.16.0.0/24      e0            192.168.0.0   -> e2
//!   e2     192.168.0.0/16     -             192.168.64.0  -> e3
//!   e3     192.168.64.0/18    e2            192.168.128.0 -> e4
//!   e4     192.168.128.0/18   e2
//! ```
//!
//! 172 = `10101100` and 192 = `11000000` first differ at bit 1, so the root skips bit 0 and sits
//! at `pos 1`. With 2 bits, two of the four slots are used (50 % >= 30 %): inflate; with 3 bits,
//! two of eight (25 %): stop. Below it, 192.168.{0,64,128} first differ at bit 16 (the third
//! octet's top bit); 2 bits use three slots of four (75 % >= 50 %), 3 bits three of eight.
//!
//! ```text
//!   root: pos 1, bits 2 (address bits 1..=2)
//!   ┌──────────┬──────────┬──────────────┬──────────┐
//!   │ 00 ~> e1 │ 01  e1   │ 10  node B   │ 11 ~> e2 │
//!   └──────────┴──────────┴──────┬───────┴──────────┘
//!                                │
//!        node B: pos 16, bits 2 (top two bits of the third octet)
//!        ┌──────────┬──────────┬──────────┬──────────┐
//!        │ 00  e2   │ 01  e3   │ 10  e4   │ 11 ~> e4 │
//!        └──────────┴──────────┴──────────┴──────────┘
//!   ~>  an empty slot, pointed at a representative leaf (see below)
//! ```
//!
//! Looking up 192.168.192.123: root slot `10` leads to node B; the third octet 192 = `11...`
//! selects slot `11`, which is empty and stands in for e4 (192.168.128.0). The address and
//! 192.168.128.0 share 17 bits; e4 is a /18, too long; its parent e2, 192.168.0.0/16, fits:
//! that is the answer. Looking up 10.1.2.3 lands in root slot `00` ~> e1 (172.16.0.0), shares
//! 0 bits with it, and the chain e1 -> e0 ends without a fit: no route.
//!
//! ## Layout
//!
//! Nodes live in one flat `Vec` of 8-byte slots `{base, pos, bits}`. As in Nilsson and Karlsson's
//! array layout, a node's header lives in the slot its parent points through, so each level of
//! the descent is one memory read (the kernel keeps the header in the child node and pays a
//! pointer read plus a header read). A slot with `bits == 0` is a leaf and `base` is an index
//! into the chain; otherwise the node's children are `slots[base .. base + 2^bits]`.
//!
//! Two limits keep a node from growing absurdly: [`LcConfig::max_bits`] (default 24) and a
//! sparsity guard: a node never has more than 16 slots per key beneath it. The guard only binds
//! for thresholds below about 6 % (with 50 % a node can have at most two slots per key); a
//! threshold of 0 therefore means "as large as the guard allows".
//!
//! ## Updates
//!
//! An update has three things to bring in line: the chain (entries and parent links), the leaves
//! (one per distinct address, naming its longest prefix) and the empty slots (representatives).
//! [`LpmUpdate::update`](crate::LpmUpdate::update) takes a batch in three passes, all reading the
//! route map after the changes:
//!
//! 1. **Entries.** A new prefix takes a free chain entry (or one at the end), a withdrawn one
//!    frees its entry, a replaced one gets its next hop in place. A prefix → entry map, made
//!    by the first update, finds them; entries keep their index while their prefix lives.
//! 2. **Parent links.** For a changed prefix `P`, `P`'s own parent is `parent(P)`, and the
//!    routes right below it (the ones of `within(P)` no other route inside `P` covers) get `P`,
//!    or `parent(P)` if `P` is gone. No other prefix's longest cover can have changed.
//! 3. **The trie**, once per changed address `k`, whose leaf must name its longest prefix:
//!    * *same longest prefix*: nothing (the entry kept its index);
//!    * *another one*: the leaf slot is re-pointed;
//!    * *address gone*: its leaf slot is emptied; a node left with no used slot is freed, a
//!      node of at most 16 slots left with one is replaced by that slot (path compression);
//!    * *new address*: the descent of `k` reaches a leaf `k'`; the deepest node passed whose
//!      skipped bits `k` agrees with (`pos <= common_prefix_len(k, k')`) gets it, and the
//!      subtree under the slot `k` picks there, the smallest whose key range (the *span*: the
//!      node's path and that slot, `pos + bits` bits) holds `k`, is rebuilt by the builder from
//!      the routes in the span (`within(span)` and the span's own address at shorter lengths),
//!      with the inner fill factor.
//!
//!    After each, the empty slots beside the slot that changed are re-pointed on every node
//!    of the descent, bottom up (only the run between its used neighbours: a representative
//!    always names the leftmost leaf of the nearest used slot).
//!
//! ```text
//!   add 192.168.200.0/24 to the worked example: new entry e5, parent e2 (192.168.0.0/16)
//!   descent: root slot 10 -> node B slot 11 (~> e4, 192.168.128.0); 192.168.200.0 and
//!   192.168.128.0 share 17 bits >= B.pos 16, so B's slot 11 (span 192.168.192.0/18) is the
//!   smallest subtree that holds it; rebuilt from the one route in the span, a leaf:
//!        node B: pos 16, bits 2
//!        ┌──────────┬──────────┬──────────┬──────────┐
//!        │ 00  e2   │ 01  e3   │ 10  e4   │ 11  e5   │
//!        └──────────┴──────────┴──────────┴──────────┘
//!   withdraw it again: slot 11 is emptied and re-pointed ~> e4; e5 goes to the free list.
//! ```
//!
//! **Full rebuild** happens only when the root itself must change: a new address disagrees
//! with the bits every key shared so far (the root's skipped bits, before its `pos`), or the
//! trie was empty or a single leaf. It also serves as **compaction**: freed node blocks
//! (reused by size) and freed chain entries are taken before the arrays grow, and once either
//! kind of freed space outgrows the live part (with at least 64 slots or entries), the trie is
//! rebuilt packed, so memory stays within twice the live size over any run of updates. Nodes
//! keep their branching factor while keys come and go; a rebuild restores the exact rule.
//! [`Lpm::memory_bytes`] counts the lookup arrays only, not the update bookkeeping.

use crate::key::Key;
use crate::prefix::{canonicalize, NextHop, Prefix, Route, NO_ROUTE};
use crate::{BuildError, Lpm, LpmBuild};
use core::fmt;

mod update;
use update::Spare;

/// "No entry": the parent link of a prefix that nothing covers, and the chain index of the
/// root of an empty trie. The chain is kept shorter than this, so it never indexes anything.
const NONE: u32 = u32::MAX;

/// The sparsity guard: a node has at most this many slots per key beneath it.
const MAX_SLOTS_PER_KEY: usize = 16;

/// Addresses descended in lock step by [`Lpm::lookup_bulk`].
const BATCH: usize = 8;

/// Fill factors of the LC-trie, as in the kernel's `inflate_threshold` and
/// `inflate_threshold_root`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LcConfig {
    /// A node below the root is doubled while at least this percentage of the doubled node's
    /// slots would be in use. `None` never doubles: every node tests one bit (Patricia).
    pub inflate_threshold: Option<u8>,
    /// The same for the root node.
    pub root_threshold: Option<u8>,
    /// Most address bits one node may consume (`1..=`[`LcConfig::MAX_BITS_LIMIT`]).
    pub max_bits: u8,
}

impl LcConfig {
    /// The kernel's threshold for nodes below the root (percent).
    pub const KERNEL_INFLATE: u8 = 50;
    /// The kernel's threshold for the root node (percent).
    pub const KERNEL_ROOT: u8 = 30;
    /// Default cap on the bits of one node.
    pub const DEFAULT_MAX_BITS: u8 = 24;
    /// Largest accepted `max_bits` (a node of `2^30` slots is 8 GiB).
    pub const MAX_BITS_LIMIT: u8 = 30;

    /// Never inflate: a Patricia trie with one bit per node.
    pub const fn never() -> Self {
        LcConfig {
            inflate_threshold: None,
            root_threshold: None,
            max_bits: Self::DEFAULT_MAX_BITS,
        }
    }

    /// The same threshold, in percent, for the root and every other node.
    pub const fn uniform(percent: u8) -> Self {
        LcConfig {
            inflate_threshold: Some(percent),
            root_threshold: Some(percent),
            max_bits: Self::DEFAULT_MAX_BITS,
        }
    }

    /// Checks the ranges: thresholds at most 100, `max_bits` in `1..=MAX_BITS_LIMIT`.
    pub fn validate(&self) -> Result<(), BuildError> {
        for (what, t) in [
            ("inflate_threshold", self.inflate_threshold),
            ("root_threshold", self.root_threshold),
        ] {
            if let Some(p) = t {
                if p > 100 {
                    return Err(BuildError::BadConfig(format!(
                        "LC-trie {what} {p} % is above 100 % (use None for \"never\")"
                    )));
                }
            }
        }
        if self.max_bits == 0 || self.max_bits > Self::MAX_BITS_LIMIT {
            return Err(BuildError::BadConfig(format!(
                "LC-trie max_bits {} is outside 1..={}",
                self.max_bits,
                Self::MAX_BITS_LIMIT
            )));
        }
        Ok(())
    }
}

impl Default for LcConfig {
    /// The kernel's values: 50 % for inner nodes, 30 % for the root, at most 24 bits a node.
    fn default() -> Self {
        LcConfig {
            inflate_threshold: Some(Self::KERNEL_INFLATE),
            root_threshold: Some(Self::KERNEL_ROOT),
            max_bits: Self::DEFAULT_MAX_BITS,
        }
    }
}

/// A name [`LcConfig`]'s `FromStr` does not know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownFillFactor {
    /// The name as given.
    pub name: String,
}

impl fmt::Display for UnknownFillFactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown LC-trie fill factor {:?}: expected \"default\", \"never\" or a \
             percentage from 0 to 100",
            self.name
        )
    }
}

impl std::error::Error for UnknownFillFactor {}

/// The names of the threshold sweep, as `Display` writes them: `"default"` (the kernel's 50 % /
/// 30 % root), `"never"` (Patricia), or a percentage `"0"` to `"100"` (optionally with a `%`)
/// used for the root and the other nodes alike.
impl core::str::FromStr for LcConfig {
    type Err = UnknownFillFactor;

    fn from_str(name: &str) -> Result<LcConfig, UnknownFillFactor> {
        let s = name.trim();
        match s {
            "default" => Ok(LcConfig::default()),
            "never" => Ok(LcConfig::never()),
            _ => {
                let digits = s.strip_suffix('%').unwrap_or(s);
                match digits.parse::<u8>() {
                    Ok(p) if p <= 100 && digits.bytes().all(|b| b.is_ascii_digit()) => {
                        Ok(LcConfig::uniform(p))
                    }
                    _ => Err(UnknownFillFactor {
                        name: name.to_string(),
                    }),
                }
            }
        }
    }
}

impl fmt::Display for LcConfig {
    /// The name `FromStr` accepts when there is one, else every field.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |t: Option<u8>| t.map_or_else(|| "never".to_string(), |p| format!("{p}%"));
        if self.max_bits == Self::DEFAULT_MAX_BITS {
            if *self == LcConfig::default() {
                return f.write_str("default");
            }
            if *self == LcConfig::never() {
                return f.write_str("never");
            }
            if let (Some(a), Some(b)) = (self.inflate_threshold, self.root_threshold) {
                if a == b {
                    return write!(f, "{a}");
                }
            }
        }
        write!(
            f,
            "inflate {} root {} max_bits {}",
            pct(self.inflate_threshold),
            pct(self.root_threshold),
            self.max_bits
        )
    }
}

/// One node reference. `bits == 0`: a leaf, `base` is its chain index. Otherwise a node at
/// `pos` whose `2^bits` children are `slots[base..]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    base: u32,
    pos: u8,
    bits: u8,
}

impl Slot {
    const EMPTY: Slot = Slot {
        base: NONE,
        pos: 0,
        bits: 0,
    };

    fn leaf(entry: u32) -> Slot {
        Slot {
            base: entry,
            pos: 0,
            bits: 0,
        }
    }
}

/// One table prefix with a link to the longest prefix that strictly covers it.
#[derive(Clone, Copy, Debug)]
struct Entry<K: Key> {
    addr: K,
    len: u8,
    nexthop: NextHop,
    /// Chain index of the covering prefix, always a shorter prefix; [`NONE`] if none.
    parent: u32,
}

/// Level- and path-compressed trie with Linux's fill-factor rule, built from a table and kept
/// in line with it by [`LpmUpdate::update`](crate::LpmUpdate::update).
#[derive(Clone, Debug)]
pub struct LcTrie<K: Key> {
    root: Slot,
    slots: Vec<Slot>,
    chain: Vec<Entry<K>>,
    internal: usize,
    leaves: usize,
    config: LcConfig,
    /// What updates need beside the lookup arrays; made by the first update.
    spare: Option<Box<Spare<K>>>,
}

impl<K: Key> LcTrie<K> {
    /// Internal nodes plus leaves (one leaf per distinct prefix address).
    pub fn node_count(&self) -> usize {
        self.internal + self.leaves
    }

    /// Internal (branching) nodes.
    pub fn internal_node_count(&self) -> usize {
        self.internal
    }

    /// Leaves: distinct network addresses in the table.
    pub fn leaf_count(&self) -> usize {
        self.leaves
    }

    /// The configuration the trie was built with.
    pub fn config(&self) -> &LcConfig {
        &self.config
    }

    /// The longest prefix covering `addr` and its next hop.
    pub fn lookup_route(&self, addr: K) -> Option<(Prefix<K>, NextHop)> {
        let e = self.resolve(addr, self.descend(addr))?;
        Some((Prefix::new_masked(e.addr, e.len), e.nexthop))
    }

    /// One level of the descent. A reference that would leave the arrays (impossible for a
    /// trie this module built) ends the walk at a leaf that matches nothing.
    #[inline(always)]
    fn step(&self, s: Slot, addr: K) -> Slot {
        let i = s.base as usize + addr.chunk(s.pos, s.bits);
        match self.slots.get(i) {
            Some(&next) => next,
            None => Slot::EMPTY,
        }
    }

    /// Descends to a leaf and returns its chain index ([`NONE`] for an empty trie). A child
    /// node's `pos` is at least its parent's `pos + bits`, so every level consumes bits and
    /// the walk ends.
    #[inline(always)]
    fn descend(&self, addr: K) -> u32 {
        let mut s = self.root;
        while s.bits != 0 {
            s = self.step(s, addr);
        }
        s.base
    }

    /// Walks the chain from entry `e` to the first prefix containing `addr`. Parents are
    /// shorter than their children, so the walk ends.
    #[inline(always)]
    fn resolve(&self, addr: K, e: u32) -> Option<&Entry<K>> {
        let mut cur = self.chain.get(e as usize)?;
        // Every entry on this chain contains the leaf's key, so it contains `addr` exactly
        // when it is no longer than the bits `addr` shares with that key.
        let shared = addr.common_prefix_len(cur.addr);
        while cur.len > shared {
            cur = self.chain.get(cur.parent as usize)?;
        }
        Some(cur)
    }
}

impl<K: Key> Lpm<K> for LcTrie<K> {
    #[inline]
    fn lookup(&self, addr: K) -> NextHop {
        self.resolve(addr, self.descend(addr))
            .map_or(NO_ROUTE, |e| e.nexthop)
    }

    /// Descends 8 addresses in lock step, so that the reads of one level of several
    /// lookups are in flight together instead of one after another.
    fn lookup_bulk(&self, addrs: &[K], out: &mut [NextHop]) {
        for (a, o) in addrs.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            let mut lanes = [self.root; BATCH];
            let mut busy = true;
            while busy {
                busy = false;
                for (s, &addr) in lanes.iter_mut().zip(a) {
                    if s.bits != 0 {
                        *s = self.step(*s, addr);
                        busy = true;
                    }
                }
            }
            for ((s, &addr), o) in lanes.iter().zip(a).zip(o.iter_mut()) {
                *o = self.resolve(addr, s.base).map_or(NO_ROUTE, |e| e.nexthop);
            }
        }
    }

    fn memory_bytes(&self) -> usize {
        core::mem::size_of::<Self>()
            + self.slots.capacity() * core::mem::size_of::<Slot>()
            + self.chain.capacity() * core::mem::size_of::<Entry<K>>()
    }

    fn name(&self) -> &'static str {
        "lctrie"
    }
}

impl<K: Key> LpmBuild<K> for LcTrie<K> {
    type Config = LcConfig;

    fn build(routes: &[Route<K>], config: &LcConfig) -> Result<Self, BuildError> {
        config.validate()?;
        let routes = canonicalize(routes);
        let chain = make_chain(&routes)?;

        // The keys: distinct addresses in order; the leaf of each is the last (longest) entry
        // with that address, since the canonical order sorts lengths upwards.
        let mut keys: Vec<K> = Vec::new();
        let mut leaf_entry: Vec<u32> = Vec::new();
        for (i, e) in (0u32..).zip(&chain) {
            match (keys.last(), leaf_entry.last_mut()) {
                (Some(&k), Some(last)) if k == e.addr => *last = i,
                _ => {
                    keys.push(e.addr);
                    leaf_entry.push(i);
                }
            }
        }

        let mut b = Builder {
            config,
            keys: &keys,
            leaf_entry: &leaf_entry,
            slots: Vec::new(),
            free_nodes: Vec::new(),
            free_slots: 0,
            internal: 0,
            top_is_root: true,
        };
        let root = b.run()?;
        let mut slots = b.slots;
        let internal = b.internal;
        slots.shrink_to_fit();
        Ok(LcTrie {
            root,
            slots,
            chain,
            internal,
            leaves: keys.len(),
            config: *config,
            spare: None,
        })
    }
}

/// The chain: one entry per prefix in canonical order, each linked to its longest strict
/// cover. In canonical order every cover of a prefix comes before it, and the covers of the
/// previous prefix form a stack: pop what does not cover the new prefix (it cannot cover any
/// later one either, those start even further right), and the top is the parent.
fn make_chain<K: Key>(routes: &[Route<K>]) -> Result<Vec<Entry<K>>, BuildError> {
    if routes.len() >= NONE as usize {
        return Err(BuildError::TooLarge(
            "LC-trie chain holds fewer than 2^32 - 1 prefixes",
        ));
    }
    let mut chain: Vec<Entry<K>> = Vec::with_capacity(routes.len());
    let mut covers: Vec<(u32, Prefix<K>)> = Vec::new();
    for (i, r) in (0u32..).zip(routes) {
        while let Some(&(_, top)) = covers.last() {
            if top.covers(&r.prefix) {
                break;
            }
            covers.pop();
        }
        let parent = covers.last().map_or(NONE, |&(j, _)| j);
        chain.push(Entry {
            addr: r.prefix.addr(),
            len: r.prefix.len(),
            nexthop: r.nexthop,
            parent,
        });
        covers.push((i, r.prefix));
    }
    Ok(chain)
}

/// A range of keys whose subtree still has to be built, and where its reference goes.
struct Task {
    lo: usize,
    hi: usize,
    /// Index into `slots`, or `None` for the root.
    slot: Option<usize>,
}

/// Keys in `lo..hi` that share one slot of the node being built.
struct Group {
    slot: usize,
    lo: usize,
    hi: usize,
}

struct Builder<'a, K: Key> {
    config: &'a LcConfig,
    keys: &'a [K],
    leaf_entry: &'a [u32],
    slots: Vec<Slot>,
    /// Freed node blocks by `bits` (see [`Spare`]), taken before `slots` grows.
    free_nodes: Vec<Vec<u32>>,
    free_slots: usize,
    /// Nodes made.
    internal: usize,
    /// Whether the top node is the trie's root (it then uses the root threshold).
    top_is_root: bool,
}

impl<K: Key> Builder<'_, K> {
    /// Builds top down, depth first, from a work stack (no recursion).
    fn run(&mut self) -> Result<Slot, BuildError> {
        let mut root = Slot::EMPTY;
        if self.keys.is_empty() {
            return Ok(root);
        }
        let mut work = vec![Task {
            lo: 0,
            hi: self.keys.len(),
            slot: None,
        }];
        let mut groups: Vec<Group> = Vec::new();
        while let Some(t) = work.pop() {
            let s = if t.hi - t.lo == 1 {
                Slot::leaf(self.leaf_of(t.lo))
            } else {
                self.node(&t, &mut groups, &mut work)?
            };
            match t.slot {
                None => root = s,
                Some(i) => {
                    if let Some(dst) = self.slots.get_mut(i) {
                        *dst = s;
                    }
                }
            }
        }
        Ok(root)
    }

    /// A block of `2^bits` empty slots: a freed one of that size, else new ones at the end.
    fn alloc(&mut self, bits: u8) -> Result<usize, BuildError> {
        let size = 1usize << bits;
        if let Some(base) = self.free_nodes.get_mut(bits as usize).and_then(|v| v.pop()) {
            let base = base as usize;
            self.free_slots = self.free_slots.saturating_sub(size);
            if let Some(block) = self.slots.get_mut(base..base + size) {
                block.fill(Slot::EMPTY);
            }
            return Ok(base);
        }
        let base = self.slots.len();
        if base + size > NONE as usize {
            return Err(BuildError::TooLarge(
                "LC-trie holds fewer than 2^32 - 1 slots",
            ));
        }
        self.slots.resize(base + size, Slot::EMPTY);
        Ok(base)
    }

    /// The chain entry of key `i`'s leaf.
    fn leaf_of(&self, i: usize) -> u32 {
        self.leaf_entry.get(i).copied().unwrap_or(NONE)
    }

    /// Makes the node for keys `t.lo..t.hi` (at least two): allocates its slots, points the
    /// empty ones at representative leaves and queues the used ones.
    fn node(
        &mut self,
        t: &Task,
        groups: &mut Vec<Group>,
        work: &mut Vec<Task>,
    ) -> Result<Slot, BuildError> {
        let all = self.keys;
        let keys = all.get(t.lo..t.hi).unwrap_or(&[]);
        let (Some(&first), Some(&last)) = (keys.first(), keys.last()) else {
            return Err(BuildError::TooLarge("LC-trie builder lost a key range"));
        };
        // Path compression: the keys are sorted, so the first and the last differ first where
        // any two of them do. They are distinct, so `pos < K::BITS`.
        let pos = first.common_prefix_len(last);
        let threshold = if t.slot.is_none() && self.top_is_root {
            self.config.root_threshold
        } else {
            self.config.inflate_threshold
        };
        let bits = choose_bits(keys, pos, threshold, self.config.max_bits);
        let size = 1usize << bits;
        let base = self.alloc(bits)?;
        self.internal += 1;

        // Group the keys by slot; sorted keys sharing bits 0..pos give ascending slots.
        groups.clear();
        let mut i = 0;
        while let Some(k) = keys.get(i) {
            let slot = k.chunk(pos, bits);
            let run = keys
                .get(i..)
                .unwrap_or(&[])
                .iter()
                .take_while(|k| k.chunk(pos, bits) == slot)
                .count();
            groups.push(Group {
                slot,
                lo: t.lo + i,
                hi: t.lo + i + run,
            });
            i += run.max(1);
        }
        self.fill_empty_slots(base, size, groups);
        for g in groups.iter().rev() {
            work.push(Task {
                lo: g.lo,
                hi: g.hi,
                slot: Some(base + g.slot),
            });
        }
        Ok(Slot {
            base: base as u32,
            pos,
            bits,
        })
    }

    /// Points every empty slot `i` of the node at `slots[base..base + size]` at a leaf below
    /// the used slot `j` that shares the most leading bits with `i`; in a sorted list that is
    /// the used slot just before or just after `i`. Any leaf below `j` will do (we take its
    /// leftmost), so a lookup never meets an empty slot.
    ///
    /// Why the answer is still right. The descent keeps this invariant: the subtree it is in
    /// holds a key sharing the longest prefix with the address `a` of all keys. At a node
    /// whose keys share bits `0..pos`, either `a` differs from them before `pos`, and then all
    /// its keys share the same prefix with `a`, or `a` agrees, picks slot `i` with its bits
    /// `pos..pos + bits`, and keys below slot `j` share exactly `pos + cpl(i, j)` bits with
    /// `a`; the used `j` with the longest `cpl(i, j)` is the best subtree, and every key in it
    /// is equally good. So the leaf reached shares the most bits with `a`; the longest prefix
    /// containing `a` is no longer than that, hence covers the leaf's key and is on its chain.
    fn fill_empty_slots(&mut self, base: usize, size: usize, groups: &[Group]) {
        // `next` is the first group whose slot is >= the slot being filled.
        let mut next = 0;
        for i in 0..size {
            while groups.get(next).is_some_and(|g| g.slot < i) {
                next += 1;
            }
            let after = groups.get(next);
            if after.is_some_and(|g| g.slot == i) {
                continue; // used: its subtree is queued
            }
            let before = next.checked_sub(1).and_then(|p| groups.get(p));
            let pick = match (before, after) {
                (Some(b), Some(n)) => {
                    if (i ^ b.slot).leading_zeros() >= (i ^ n.slot).leading_zeros() {
                        b
                    } else {
                        n
                    }
                }
                (Some(g), None) | (None, Some(g)) => g,
                (None, None) => continue,
            };
            let leaf = Slot::leaf(self.leaf_of(pick.lo));
            if let Some(dst) = self.slots.get_mut(base + i) {
                *dst = leaf;
            }
        }
    }
}

/// The branching factor of a node over `keys` (at least two, sorted, all sharing bits
/// `0..pos`): start at 1 bit and double the node while the doubled node would be at least
/// `threshold` percent full.
///
/// The number of used slots with `w` bits is one plus the number of neighbouring key pairs
/// that first differ before bit `pos + w`, so one pass over the neighbours gives it for
/// every `w`.
fn choose_bits<K: Key>(keys: &[K], pos: u8, threshold: Option<u8>, max_bits: u8) -> u8 {
    let Some(th) = threshold else {
        return 1;
    };
    let n = keys.len();
    // No more than the address has left, `max_bits`, and 16 slots per key.
    let guard = n
        .saturating_mul(MAX_SLOTS_PER_KEY)
        .checked_ilog2()
        .map_or(1, |b| b.min(32) as u8);
    let limit = max_bits
        .min(K::BITS.saturating_sub(pos))
        .min(guard)
        .clamp(1, LcConfig::MAX_BITS_LIMIT);

    // split[c]: neighbouring pairs whose first difference is at bit pos + c.
    let mut split = [0usize; LcConfig::MAX_BITS_LIMIT as usize + 1];
    for pair in keys.windows(2) {
        if let [x, y] = pair {
            let c = x.common_prefix_len(*y).saturating_sub(pos) as usize;
            if let Some(s) = split.get_mut(c) {
                *s += 1;
            }
        }
    }
    let mut bits = 1u8;
    let mut used = 1 + split[0];
    while bits < limit {
        let grown = used + split.get(bits as usize).copied().unwrap_or(0);
        let wide = bits + 1;
        if (grown as u64) * 100 >= u64::from(th) << wide {
            bits = wide;
            used = grown;
        } else {
            break;
        }
    }
    bits
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
    use crate::update::{LpmUpdate, RouteMap};
    use proptest::prelude::*;

    fn configs() -> Vec<LcConfig> {
        let mut v: Vec<LcConfig> = ["default", "never", "0", "20", "50", "100"]
            .iter()
            .map(|n| n.parse::<LcConfig>().unwrap())
            .collect();
        v.push(LcConfig {
            max_bits: 1,
            ..LcConfig::default()
        });
        v.push(LcConfig {
            max_bits: 3,
            ..LcConfig::uniform(0)
        });
        v.push(LcConfig {
            inflate_threshold: None,
            root_threshold: Some(0),
            max_bits: 16,
        });
        v
    }

    fn check<K: Key>(routes: &[Route<K>], addrs: &[K]) {
        let golden = Golden::build(routes, &()).unwrap();
        let want: Vec<NextHop> = addrs.iter().map(|&a| golden.lookup(a)).collect();
        for cfg in configs() {
            let t = LcTrie::build(routes, &cfg).unwrap();
            for (&a, &w) in addrs.iter().zip(&want) {
                assert_eq!(t.lookup(a), w, "lookup {a:?} with {cfg}");
                assert_eq!(t.lookup_route(a), golden.lookup_route(a), "{a:?} {cfg}");
            }
            let mut out = vec![NO_ROUTE; addrs.len()];
            t.lookup_bulk(addrs, &mut out);
            assert_eq!(out, want, "bulk with {cfg}");
            check_shape(&t);
        }
    }

    /// Structural promises: no empty slot is reachable, node sizes respect the limits,
    /// positions grow downwards, every empty slot names the leftmost leaf of its nearest used
    /// slot, every leaf its key's longest prefix, and every parent link the longest cover.
    fn check_shape<K: Key>(t: &LcTrie<K>) {
        let free: std::collections::HashSet<u32> = t
            .spare
            .as_ref()
            .map(|sp| sp.free_entries.iter().copied().collect())
            .unwrap_or_default();
        let live: Vec<u32> = (0..t.chain.len() as u32)
            .filter(|i| !free.contains(i))
            .collect();
        for &i in &live {
            let e = t.chain[i as usize];
            let p = Prefix::new_masked(e.addr, e.len);
            let best = live
                .iter()
                .copied()
                .filter(|&j| {
                    let c = t.chain[j as usize];
                    c.len < e.len && Prefix::new_masked(c.addr, c.len).covers(&p)
                })
                .max_by_key(|&j| t.chain[j as usize].len);
            assert_eq!(best.unwrap_or(NONE), e.parent, "parent of {p:?}");
        }
        let longest = |k: K| {
            live.iter()
                .copied()
                .filter(|&j| t.chain[j as usize].addr == k)
                .max_by_key(|&j| t.chain[j as usize].len)
        };

        let (mut nodes, mut keys) = (0, 0);
        let mut stack = vec![(t.root, true)];
        while let Some((s, is_root)) = stack.pop() {
            if s.bits == 0 {
                if t.leaf_count() == 0 {
                    assert_eq!(s, Slot::EMPTY);
                } else {
                    assert!(!free.contains(&s.base));
                    assert!((s.base as usize) < t.chain.len());
                }
                if is_root && s.base != NONE {
                    keys += 1;
                }
                continue;
            }
            nodes += 1;
            assert!(nodes <= t.slots.len(), "a cycle");
            assert!(s.bits <= t.config.max_bits);
            assert!((s.pos + s.bits) as usize <= K::BITS as usize);
            if t.config.inflate_threshold.is_none() && !is_root {
                assert_eq!(s.bits, 1);
            }
            let kids = &t.slots[s.base as usize..s.base as usize + (1 << s.bits)];
            let used: Vec<usize> = (0..kids.len()).filter(|&j| t.is_used(s, j)).collect();
            assert!(!used.is_empty());
            for (j, k) in kids.iter().enumerate() {
                if k.bits != 0 {
                    assert!(k.pos >= s.pos + s.bits);
                    stack.push((*k, false));
                    continue;
                }
                let e = t.chain[k.base as usize];
                if used.contains(&j) {
                    keys += 1;
                    assert_eq!(Some(k.base), longest(e.addr), "leaf of {:?}", e.addr);
                    continue;
                }
                // Empty: the leftmost leaf of the nearest used slot, ties to the left.
                let b = used.iter().rev().find(|&&u| u < j);
                let a = used.iter().find(|&&u| u > j);
                let pick = match (b, a) {
                    (Some(&b), Some(&a)) => {
                        if (j ^ b).leading_zeros() >= (j ^ a).leading_zeros() {
                            b
                        } else {
                            a
                        }
                    }
                    (Some(&x), None) | (None, Some(&x)) => x,
                    (None, None) => unreachable!(),
                };
                assert_eq!(k.base, t.leftmost(kids[pick]), "slot {j} of {s:?}");
            }
        }
        assert_eq!(nodes, t.internal_node_count());
        assert_eq!(keys, t.leaf_count());
        let mut distinct: Vec<K> = live.iter().map(|&i| t.chain[i as usize].addr).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), t.leaf_count());
    }

    #[test]
    fn worked_example_from_the_module_doc() {
        let routes = [
            v4([172, 16, 0, 0], 16, 1),
            v4([172, 16, 0, 0], 24, 2),
            v4([192, 168, 0, 0], 16, 3),
            v4([192, 168, 64, 0], 18, 4),
            v4([192, 168, 128, 0], 18, 5),
        ];
        let t = LcTrie::build(&routes, &LcConfig::default()).unwrap();
        assert_eq!((t.root.pos, t.root.bits), (1, 2));
        let b = t.slots[t.root.base as usize + 0b10];
        assert_eq!((b.pos, b.bits), (16, 2));
        assert_eq!(t.slots[t.root.base as usize], Slot::leaf(1)); // 00 ~> e1
        assert_eq!(t.slots[t.root.base as usize + 3], Slot::leaf(2)); // 11 ~> e2
        assert_eq!(t.slots[b.base as usize + 3], Slot::leaf(4)); // 11 ~> e4
        assert_eq!(t.node_count(), 2 + 4);
        let (p, nh) = t
            .lookup_route(u32::from_be_bytes([192, 168, 192, 123]))
            .unwrap();
        assert_eq!((p.to_string().as_str(), nh), ("192.168.0.0/16", 3));
        assert_eq!(t.lookup(u32::from_be_bytes([10, 1, 2, 3])), NO_ROUTE);
        check(&routes, &probes(&routes, &[]));
    }

    #[test]
    fn config_names() {
        let parse = |n: &str| n.parse::<LcConfig>();
        assert_eq!(parse("default"), Ok(LcConfig::default()));
        assert_eq!(parse("never"), Ok(LcConfig::never()));
        assert_eq!(parse("0"), Ok(LcConfig::uniform(0)));
        assert_eq!(parse("100%"), Ok(LcConfig::uniform(100)));
        for bad in ["101", "-1", "+5", "", "fifty", "always"] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.name, bad);
            assert!(e.to_string().contains("fill factor"), "{e}");
        }
        for name in ["default", "never", "0", "35", "100"] {
            let c = parse(name).unwrap();
            assert_eq!(c.to_string(), name);
        }
        let bad = LcConfig {
            max_bits: 0,
            ..LcConfig::default()
        };
        assert!(LcTrie::<u32>::build(&[], &bad).is_err());
        assert!(LcTrie::<u32>::build(&[], &LcConfig::uniform(120)).is_err());
    }

    #[test]
    fn empty_table() {
        for cfg in configs() {
            let t = LcTrie::<u32>::build(&[], &cfg).unwrap();
            assert_eq!(t.lookup(0), NO_ROUTE);
            assert_eq!(t.lookup_route(u32::MAX), None);
            assert_eq!(t.node_count(), 0);
            let t = LcTrie::<u128>::build(&[], &cfg).unwrap();
            assert_eq!(t.lookup(u128::MAX), NO_ROUTE);
        }
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

    #[test]
    fn thresholds_shape_the_trie() {
        // 64 /24s under 10.0.0.0/16, every other one present.
        let routes: Vec<Route<u32>> = (0..64).map(|i| v4([10, 0, 2 * i, 0], 24, 1)).collect();
        let never = LcTrie::build(&routes, &LcConfig::never()).unwrap();
        assert_eq!(never.internal_node_count(), 63); // Patricia: one less than the leaves
        let full = LcTrie::build(&routes, &LcConfig::uniform(100)).unwrap();
        // The third octets are 0, 2, .., 126: they first differ at bit 17, and bits 17..=22
        // take all 64 values.
        assert_eq!((full.root.pos, full.root.bits), (17, 6));
        let half = LcTrie::build(&routes, &LcConfig::uniform(50)).unwrap();
        assert_eq!(half.root.bits, 7); // 64 of 128 used
        let zero = LcTrie::build(&routes, &LcConfig::uniform(0)).unwrap();
        assert_eq!(zero.root.bits, 10); // the guard: 1024 = 16 slots per key
        let capped = LcTrie::build(
            &routes,
            &LcConfig {
                max_bits: 4,
                ..LcConfig::uniform(0)
            },
        )
        .unwrap();
        assert_eq!(capped.root.bits, 4);
        assert!(never.memory_bytes() < half.memory_bytes());
        assert!(half.memory_bytes() < zero.memory_bytes());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn v4_random_tables_match_golden((routes, addrs) in routes_and_probes(POOL4)) {
            check(&routes, &addrs);
        }

        #[test]
        fn v6_random_tables_match_golden((routes, addrs) in routes_and_probes(POOL6)) {
            check(&routes, &addrs);
        }
    }

    /// `check_updates` with every config, then the same batches again with the shape checked
    /// after each.
    fn check_updates_all_configs<K: Key>(case: &UpdateCase<K>) {
        for cfg in configs() {
            check_updates::<K, LcTrie<K>>(&cfg, case, &format!("lctrie {cfg}"));
            let (table, batches, _) = case;
            let mut map = RouteMap::from_routes(table);
            let mut t = LcTrie::build(table, &cfg).unwrap();
            for batch in batches {
                for r in batch {
                    map.set(r.prefix, r.nexthop);
                }
                let changed: Vec<Prefix<K>> = batch.iter().map(|r| r.prefix).collect();
                t.update(&map, &changed).unwrap();
                check_shape(&t);
            }
        }
    }

    #[test]
    fn update_example_from_the_module_doc() {
        let routes = [
            v4([172, 16, 0, 0], 16, 1),
            v4([172, 16, 0, 0], 24, 2),
            v4([192, 168, 0, 0], 16, 3),
            v4([192, 168, 64, 0], 18, 4),
            v4([192, 168, 128, 0], 18, 5),
        ];
        let mut t = LcTrie::build(&routes, &LcConfig::default()).unwrap();
        let mut map = RouteMap::from_routes(&routes);
        let add = v4([192, 168, 200, 0], 24, 6);
        map.set(add.prefix, add.nexthop);
        t.update(&map, &[add.prefix]).unwrap();
        let b = t.slots[t.root.base as usize + 0b10];
        assert_eq!((b.pos, b.bits), (16, 2));
        assert_eq!(t.slots[b.base as usize + 3], Slot::leaf(5)); // 11  e5
        assert_eq!(t.chain[5].parent, 2);
        assert_eq!(t.lookup(u32::from_be_bytes([192, 168, 200, 9])), 6);
        assert_eq!(t.lookup(u32::from_be_bytes([192, 168, 201, 9])), 3);
        check_shape(&t);
        map.set(add.prefix, NO_ROUTE);
        t.update(&map, &[add.prefix]).unwrap();
        assert_eq!(t.slots[b.base as usize + 3], Slot::leaf(4)); // 11 ~> e4
        assert_eq!(t.lookup(u32::from_be_bytes([192, 168, 200, 9])), 3);
        assert_eq!(t.spare.as_ref().unwrap().free_entries, [5]);
        check_shape(&t);
        // The next announcement takes the freed entry.
        let again = v4([10, 0, 0, 0], 8, 7);
        map.set(again.prefix, again.nexthop);
        t.update(&map, &[again.prefix]).unwrap();
        assert_eq!(t.chain.len(), 6);
        assert_eq!(t.lookup(u32::from_be_bytes([10, 1, 2, 3])), 7);
        check_shape(&t);
    }

    #[test]
    fn announce_replace_withdraw_nested_prefixes() {
        let (steps4, addrs) = nested_steps_v4();
        for cfg in configs() {
            let mut t = LcTrie::<u32>::build(&[], &cfg).unwrap();
            let mut map = RouteMap::new();
            for (i, r) in steps4.iter().enumerate() {
                map.set(r.prefix, r.nexthop);
                t.update(&map, &[r.prefix]).unwrap();
                check_against_golden(&t, &map.to_routes(), &addrs, &format!("{cfg} step {i}"));
                check_shape(&t);
            }
            assert_eq!(t.lookup(u32::from_be_bytes([10, 1, 2, 3])), 4);
            assert_eq!(t.lookup(u32::from_be_bytes([10, 0, 0, 9])), 11);
            // Withdraw everything in one batch, then announce it again.
            let all: Vec<Prefix<u32>> = map.iter().map(|r| r.prefix).collect();
            t.update(&RouteMap::new(), &all).unwrap();
            assert_eq!((t.lookup(0x0a01_0203), t.leaf_count()), (NO_ROUTE, 0));
            check_shape(&t);
            t.update(&map, &all).unwrap();
            check_against_golden(&t, &map.to_routes(), &addrs, &format!("{cfg} again"));
            check_shape(&t);
        }

        let (steps6, addrs) = nested_steps_v6();
        for cfg in configs() {
            let mut t = LcTrie::<u128>::build(&[], &cfg).unwrap();
            let mut map = RouteMap::new();
            for (i, r) in steps6.iter().enumerate() {
                map.set(r.prefix, r.nexthop);
                t.update(&map, &[r.prefix, r.prefix]).unwrap();
                check_against_golden(&t, &map.to_routes(), &addrs, &format!("{cfg} v6 {i}"));
                check_shape(&t);
            }
            assert_eq!(t.lookup(u128::MAX), 4);
            assert_eq!(t.lookup(0), 6);
        }
    }

    #[test]
    fn churn_keeps_memory_bounded() {
        // 512 /24s, then 40 rounds that withdraw half of them and announce others.
        let route = |i: u32, nh: u32| v4([10, (i >> 8) as u8, i as u8, 0], 24, nh);
        let table: Vec<Route<u32>> = (0..512).map(|i| route(i * 3, 1 + i)).collect();
        let mut map = RouteMap::from_routes(&table);
        let mut t = LcTrie::build(&table, &LcConfig::default()).unwrap();
        let mut peak = 0;
        for round in 0..40u32 {
            let mut changed = Vec::new();
            for i in 0..512u32 {
                let r = route((i * 7 + round * 13) % 2048, round + 1);
                let nh = if (i + round) % 2 == 0 {
                    NO_ROUTE
                } else {
                    r.nexthop
                };
                map.set(r.prefix, nh);
                changed.push(r.prefix);
            }
            t.update(&map, &changed).unwrap();
            peak = peak.max(t.memory_bytes());
        }
        let fresh = LcTrie::build(&map.to_routes(), &LcConfig::default()).unwrap();
        let addrs = probes(&map.to_routes(), &[]);
        check_against_golden(&t, &map.to_routes(), &addrs, "after churn");
        check_shape(&t);
        assert!(
            peak <= 4 * fresh.memory_bytes().max(8192),
            "{peak} vs {}",
            fresh.memory_bytes()
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn v4_updates_match_a_fresh_build(case in updates_and_probes(POOL4)) {
            check_updates_all_configs(&case);
        }

        #[test]
        fn v6_updates_match_a_fresh_build(case in updates_and_probes(POOL6)) {
            check_updates_all_configs(&case);
        }
    }
}
