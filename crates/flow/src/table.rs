//! The per-core flow table: a fixed-size, set-associative cache of forwarding decisions.
//!
//! This is FreeBSD's flowtable (Li & Macy, PRESTO '09, section 4.1, Figure 8):
//! a hash of the connection (or of the destination) leads to an entry caching the route and
//! the link-layer entry, kept until it has been idle for a timeout (30 s by default), one table
//! per CPU so nothing is locked, and a bitmap of used buckets so garbage collection skips the
//! empty ones. It differs from Li & Macy's design where the paper lists its own limits (section 5): it is
//! IPv4 and IPv6, it can be resized at run time, and it replaces the collision chains with
//! fixed buckets so memory has a hard bound.
//!
//! ## Layout
//!
//! ```text
//!   hash(key) ── low bits ──▶ bucket b            high 32 bits ──▶ signature s (never 0)
//!
//!   heads[b]  (one 64-byte cache line)                      slots[b*8 .. b*8+8]
//!   ┌──────────────────────────────────────────────┐       ┌──────────────────────────┐
//!   │ sig:       s0  s1  s2  0   s4  0   0   0     │  ──▶  │ way 0: {key, value}      │
//!   │ last_used: t0  t1  t2  -   t4  -   -   -     │       │ way 1: {key, value}      │
//!   └──────────────────────────────────────────────┘       │ ...  (None where sig = 0)│
//!                                                          └──────────────────────────┘
//!                                                           side[b*8 .. b*8+8] (optional)
//!                                                          ┌──────────────────────────┐
//!                                                          │ way 0: side part         │
//!                                                          │ ...                      │
//!                                                          └──────────────────────────┘
//!   used bitmap: one bit per bucket, set while the bucket holds an entry
//!   GC cursor:   the next bucket an incremental gc() call looks at
//! ```
//!
//! A lookup reads the bucket's head line and compares the eight signatures; only a way whose
//! signature matches has its key compared, in the slot array. A miss therefore costs one cache
//! line (a false signature match happens once in 2^29 lookups), a hit the head line plus the
//! entry's line: entries are aligned to lines, and a key (40 bytes) with a value of up to 24
//! bytes is one line. A hit refreshes the way's `last_used` tick, which lives in the line
//! already read.
//!
//! A table made [`FlowTable::with_side`] keeps a second part per entry, `S`, in an array of
//! its own, for what a caller reads only now and then: the forwarding worker keeps there the
//! versions a decision was made from, which it compares only after something changed, and
//! keeps in the entry only where the packet goes. With a million flows, entries of one line
//! instead of two or three forwarded 1.05 times as fast (`docs/bench/zen5.md`).
//!
//! ## Time
//!
//! The table never reads a clock. Every call that can touch an entry takes `now`, a coarse
//! [`Tick`] (`u32`) the worker reads once per batch; the default idle timeout assumes
//! millisecond ticks (30,000 ticks = 30 s) and [`FlowConfig::idle_timeout`] changes it. Ages
//! are `now.wrapping_sub(last_used)`, so the tick may wrap; it must not go backwards. An entry
//! idle for more than the timeout is *expired*: lookups treat it as absent (and remove it),
//! [`FlowTable::gc`] removes it, an insertion may reuse its way.
//!
//! ## Insertion and the memory bound
//!
//! A new key goes to the first free way of its bucket, else to the way of an expired entry,
//! else it evicts the bucket's least recently used entry (counted in
//! [`FlowCounters::evictions`] and returned to the caller as [`Insert::Evicted`]), but only if
//! that entry has not been used for [`FlowConfig::protect`] ticks (1 s by default). A bucket
//! whose entries were all used more recently keeps them: the new key is not stored
//! ([`Insert::Refused`], counted in [`FlowCounters::refusals`]) and its packets take the full
//! path until an entry of the bucket falls idle that long. Without the window, nine flows
//! that take turns in one bucket of eight would evict each other on every packet (least
//! recently used is exactly the next to come back); with it, eight of them stay cached. With a
//! million flows cycled through a table of two million entries, where 4 % of the flows share
//! a bucket with eight or more others, the window made forwarding 1.2 times as fast (AMD EPYC
//! Zen 5, `docs/bench/zen5.md`).
//!
//! Nothing is ever allocated after construction, so a flood of random sources churns entries
//! but cannot grow the table, and the flows a bucket has seen within the window survive it.
//!
//! ## Staleness
//!
//! A cached value is a copy of decisions made against versioned state (FIB version, next-hop
//! generation, neighbor generation). Lookups take a `valid` closure that compares the value's
//! versions with the current ones; an entry that fails it is *stale*: [`FlowTable::lookup`]
//! returns [`Lookup::Stale`] with the old value (so the caller can, for instance, keep an ECMP
//! member) and counts a stale refresh; the caller recomputes and stores the new value with
//! [`FlowTable::insert`]. [`FlowTable::resolve`] does both in one probe. A stale value is
//! never returned as a hit. [`FlowTable::lookup_hashed`] hands the check the stored value
//! itself, so a caller can stamp an entry it found current and skip the full comparison
//! until something changes (the forwarding worker does).
//!
//! ## Garbage collection
//!
//! [`FlowTable::gc`] walks the used-bucket bitmap from a cursor, 64 buckets per bitmap word,
//! visits only buckets whose bit is set, removes their expired entries and stops after
//! `budget` units of work (one per bitmap word read, one per bucket visited), so a worker can
//! spend a bounded slice of each batch on it. A full table of 2^20 entries is 2^17 buckets,
//! 2,048 bitmap words.
//!
//! ## Worked example
//!
//! ```
//! use std::net::Ipv4Addr;
//! use vfsr_flow::{FlowConfig, FlowKey, FlowTable, Lookup};
//!
//! #[derive(Clone, Copy, Debug, PartialEq)]
//! struct Cached { next_hop: u32, fib_version: u64 }
//!
//! let mut table = FlowTable::new(FlowConfig { capacity: 1024, ..FlowConfig::default() });
//! let key = FlowKey::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(192, 0, 2, 9), 6, 4000, 443);
//! let mut fib_version = 1;
//!
//! // First packet: a miss; the worker looks up the FIB and caches the answer.
//! let valid = |v: &Cached| v.fib_version == fib_version;
//! assert_eq!(table.lookup(&key, 0, valid), Lookup::Miss);
//! table.insert(key, Cached { next_hop: 7, fib_version }, 0);
//! // Next packets: hits.
//! assert_eq!(table.lookup(&key, 5, valid), Lookup::Hit(Cached { next_hop: 7, fib_version: 1 }));
//!
//! // The FIB is republished: the entry is stale, reported with its old value, never a hit.
//! fib_version = 2;
//! let valid = |v: &Cached| v.fib_version == fib_version;
//! assert!(matches!(table.lookup(&key, 6, valid), Lookup::Stale(_)));
//! table.insert(key, Cached { next_hop: 8, fib_version }, 6);
//! assert_eq!(table.lookup(&key, 7, valid), Lookup::Hit(Cached { next_hop: 8, fib_version: 2 }));
//!
//! // 30 s (30,000 ms ticks) idle: expired.
//! assert_eq!(table.lookup(&key, 7 + 30_001, valid), Lookup::Miss);
//! let c = table.counters();
//! assert_eq!((c.hits, c.misses, c.stale_refreshes, c.expirations), (2, 2, 1, 1));
//! ```

use std::iter::Sum;
use std::ops::{Add, AddAssign};

use vfsr_cpu::prefetch;

use crate::key::{FlowHasher, FlowKey};

/// A coarse timestamp supplied by the caller (milliseconds for the default timeout).
pub type Tick = u32;

/// Ways (entries) per bucket: eight signatures and eight ticks fill one cache line.
pub const WAYS: usize = 8;

/// Default idle timeout: 30 s in millisecond ticks (Li & Macy's default).
pub const DEFAULT_IDLE_TIMEOUT: Tick = 30_000;

/// Default capacity in entries.
pub const DEFAULT_CAPACITY: usize = 1 << 16;

/// Largest capacity a table accepts (larger requests are clamped): 2^26 entries.
pub const MAX_CAPACITY: usize = 1 << 26;

/// How a flow table is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowConfig {
    /// Entries; rounded up to a power of two number of buckets of [`WAYS`] entries, clamped to
    /// `WAYS..=MAX_CAPACITY`.
    pub capacity: usize,
    /// Idle ticks after which an entry expires.
    pub idle_timeout: Tick,
    /// Hash seed (use a random one per worker in production: [`FlowHasher::random_seed`]).
    pub seed: u64,
    /// Ticks an entry is kept from eviction after its last use: a new key that finds its
    /// bucket full of entries used more recently is not stored. 0 evicts the least recently
    /// used entry whatever its age. An entry idle past `idle_timeout` has expired and makes
    /// room whatever the window.
    pub protect: Tick,
}

/// Default eviction protection: 1 s in millisecond ticks.
pub const DEFAULT_PROTECT: Tick = 1_000;

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig {
            capacity: DEFAULT_CAPACITY,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            seed: 0,
            protect: DEFAULT_PROTECT,
        }
    }
}

/// The table's counters: plain integers, on a cache line of their own. A worker owns them; a
/// reader of statistics adds up the workers' copies (`+=`, [`Sum`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct FlowCounters {
    /// Lookups that returned a valid entry.
    pub hits: u64,
    /// Lookups that found no entry (or an expired one).
    pub misses: u64,
    /// New entries stored (replacing a key's value in place is not counted).
    pub inserts: u64,
    /// Valid entries pushed out to make room (full bucket, or a resize that shrank).
    pub evictions: u64,
    /// Entries removed or reused because they were idle longer than the timeout.
    pub expirations: u64,
    /// Lookups that found an entry the `valid` check rejected (the caller refreshes it).
    pub stale_refreshes: u64,
    /// Entries removed by [`FlowTable::invalidate`] or [`FlowTable::clear`], or dropped by
    /// [`FlowTable::resolve`] when the recomputation gave nothing to cache.
    pub invalidations: u64,
    /// New keys not stored: their bucket held only entries used within the protection window.
    pub refusals: u64,
}

// Eight counters: one cache line.
const _: () = assert!(std::mem::size_of::<FlowCounters>() == 64);

impl FlowCounters {
    /// Lookups of every outcome.
    pub fn lookups(&self) -> u64 {
        self.hits + self.misses + self.stale_refreshes
    }
}

impl AddAssign for FlowCounters {
    fn add_assign(&mut self, o: FlowCounters) {
        self.hits += o.hits;
        self.misses += o.misses;
        self.inserts += o.inserts;
        self.evictions += o.evictions;
        self.expirations += o.expirations;
        self.stale_refreshes += o.stale_refreshes;
        self.invalidations += o.invalidations;
        self.refusals += o.refusals;
    }
}

impl Add for FlowCounters {
    type Output = FlowCounters;
    fn add(mut self, o: FlowCounters) -> FlowCounters {
        self += o;
        self
    }
}

impl Sum for FlowCounters {
    fn sum<I: Iterator<Item = FlowCounters>>(iter: I) -> FlowCounters {
        iter.fold(FlowCounters::default(), Add::add)
    }
}

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup<V> {
    /// A valid entry: use it.
    Hit(V),
    /// An entry the `valid` check rejected; the old value is for information only (for
    /// example the ECMP member to keep). Recompute and [`FlowTable::insert`].
    Stale(V),
    /// No entry, or an expired one.
    Miss,
}

/// What an insertion did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert<V> {
    /// A new entry, in a free way or in the way of an expired entry.
    New,
    /// The key was present; its old value was replaced.
    Replaced(V),
    /// Nothing stored: the key was absent and every entry of its bucket had been used within
    /// the protection window ([`FlowConfig::protect`]).
    Refused,
    /// A new entry that evicted the least recently used entry of its bucket.
    Evicted {
        /// The evicted entry's key.
        key: FlowKey,
        /// The evicted entry's value.
        value: V,
    },
}

/// What a [`FlowTable::gc`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Units of work spent: bitmap words read plus buckets visited.
    pub work: usize,
    /// Buckets visited (only used ones are).
    pub visited: usize,
    /// Entries removed as expired.
    pub expired: usize,
    /// Whether the cursor reached the end of the table (a pass is complete; the next call
    /// starts from bucket 0).
    pub pass_done: bool,
}

/// The per-bucket line: signatures (0 = free way) and last-used ticks.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct BucketHead {
    sig: [u32; WAYS],
    last_used: [Tick; WAYS],
}

impl BucketHead {
    /// The ways whose signature is `sig`, one bit each.
    ///
    /// On x86-64 two SSE2 compares of four signatures each (SSE2 is part of the baseline):
    /// the compiler turned the portable loop below into some thirty mixed scalar and vector
    /// instructions, this is eight, and it runs for every packet of a flow-table lookup.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn matching(&self, sig: u32) -> u32 {
        use std::arch::x86_64::{
            __m128i, _mm_castsi128_ps, _mm_cmpeq_epi32, _mm_load_si128, _mm_movemask_ps,
            _mm_set1_epi32,
        };
        const _: () = assert!(WAYS == 8 && std::mem::align_of::<BucketHead>() >= 16);
        let p = self.sig.as_ptr().cast::<__m128i>();
        // SAFETY: `sig` is 32 bytes at the start of a 64-byte aligned struct, so both loads
        // are in bounds and 16-byte aligned; SSE and SSE2 are always present on x86-64.
        let (lo, hi) = unsafe {
            let s = _mm_set1_epi32(sig as i32);
            let lo = _mm_cmpeq_epi32(_mm_load_si128(p), s);
            let hi = _mm_cmpeq_epi32(_mm_load_si128(p.add(1)), s);
            (
                _mm_movemask_ps(_mm_castsi128_ps(lo)),
                _mm_movemask_ps(_mm_castsi128_ps(hi)),
            )
        };
        (lo | hi << 4) as u32
    }

    /// The ways whose signature is `sig`, one bit each.
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn matching(&self, sig: u32) -> u32 {
        self.matching_scalar(sig)
    }

    /// [`BucketHead::matching`] one way at a time (elsewhere than x86-64, and the reference
    /// the vector version is tested against).
    #[cfg(any(test, not(target_arch = "x86_64")))]
    #[inline(always)]
    fn matching_scalar(&self, sig: u32) -> u32 {
        self.sig
            .iter()
            .enumerate()
            .fold(0u32, |m, (w, &s)| m | (u32::from(s == sig) << w))
    }
}

/// The cache lines an entry of `size` bytes spans, as byte offsets of their starts from the
/// entry's start: entries are aligned to lines (`Entry` is `align(64)`, and so is the array
/// holding them), so an entry of up to 64 bytes is one line and is asked for once. When they
/// were 104 bytes packed end to end, half of them spanned three lines, and asking for the
/// first and last only had left the middle one to a miss in the lookup (with a million flows,
/// one to memory: 1.29-1.34 times the forwarding rate once it was asked for too, AMD EPYC
/// Zen 5). An earlier form of this function, written for any start within a line, asked for
/// the one line of today's entries three times.
fn line_starts(size: usize) -> impl Iterator<Item = usize> {
    (0..size.div_ceil(64)).map(|line| line * 64)
}

// An entry starts on a line, which `line_starts` relies on.
const _: () = assert!(std::mem::align_of::<Option<Entry<[u8; 24]>>>() == 64);

/// A way's key and value, aligned to a cache line: with a value of up to 24 bytes an entry
/// is exactly one line, so a hit reads two lines (the head and the entry), no more. What a
/// caller checks only now and then goes in the side array ([`FlowTable`]'s `S`).
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
struct Entry<V> {
    key: FlowKey,
    value: V,
}

/// Asks the kernel to back a large array with huge pages (transparent huge pages in
/// `madvise` mode): a table of a million flows spans hundreds of megabytes, and with 4 KiB
/// pages nearly every lookup would also miss the TLB. Only a hint; errors are ignored.
/// The hint is given before the array is filled, so the pages are huge from the first touch.
fn huge_vec<T: Clone>(n: usize, fill: T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    advise_huge(v.as_ptr(), n.saturating_mul(std::mem::size_of::<T>()));
    v.resize(n, fill);
    v
}

fn advise_huge<T>(ptr: *const T, len: usize) {
    if len < (4 << 20) {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let start = ptr as usize;
        let page = 4096usize;
        let aligned = start.div_ceil(page) * page;
        let end = start + len;
        if end > aligned {
            // SAFETY: the range lies inside the allocation at `ptr` (rounded inwards to
            // pages); MADV_HUGEPAGE changes no contents and no mapping the program relies on.
            unsafe {
                libc::madvise(
                    aligned as *mut libc::c_void,
                    end - aligned,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
}

/// The signature of a hash: its high 32 bits, never 0 (0 marks a free way).
#[inline]
fn signature(hash: u64) -> u32 {
    let s = (hash >> 32) as u32;
    if s == 0 {
        1
    } else {
        s
    }
}

/// A per-worker flow table (see the module doc). Each worker owns one and mutates it through
/// `&mut self`; nothing in it is atomic or locked, and nothing is meant to be shared.
#[derive(Clone, Debug)]
pub struct FlowTable<V: Copy, S: Copy + Default = ()> {
    heads: Vec<BucketHead>,
    slots: Vec<Option<Entry<V>>>,
    /// Per way, the part of an entry's value kept apart (see [`FlowTable::lookup_hashed`]);
    /// meaningful only while the way holds an entry. Nothing is allocated for `S = ()`.
    side: Vec<S>,
    used: Vec<u64>,
    mask: usize,
    len: usize,
    cursor: usize,
    idle_timeout: Tick,
    protect: Tick,
    hasher: FlowHasher,
    counters: FlowCounters,
}

impl<V: Copy> FlowTable<V> {
    /// An empty table as configured, without a side part.
    pub fn new(config: FlowConfig) -> Self {
        Self::with_side(config)
    }

    /// An empty table of `capacity` entries with the default timeout and seed.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::new(FlowConfig {
            capacity,
            ..FlowConfig::default()
        })
    }
}

impl<V: Copy, S: Copy + Default> FlowTable<V, S> {
    /// An empty table as configured, whose entries each have a side part `S`, kept in an
    /// array of its own (see [`FlowTable::lookup_hashed`]).
    pub fn with_side(config: FlowConfig) -> Self {
        let buckets = Self::buckets_for(config.capacity);
        let heads = huge_vec(buckets, BucketHead::default());
        let slots = huge_vec(buckets * WAYS, None);
        let side = huge_vec(buckets * WAYS, S::default());
        FlowTable {
            heads,
            slots,
            side,
            used: vec![0; buckets.div_ceil(64)],
            mask: buckets - 1,
            len: 0,
            cursor: 0,
            idle_timeout: config.idle_timeout,
            protect: config.protect,
            hasher: FlowHasher::new(config.seed),
            counters: FlowCounters::default(),
        }
    }

    /// Buckets for a requested capacity: a power of two, at least 1.
    fn buckets_for(capacity: usize) -> usize {
        capacity
            .clamp(WAYS, MAX_CAPACITY)
            .div_ceil(WAYS)
            .next_power_of_two()
    }

    /// Entries the table can hold (buckets × [`WAYS`]): its memory bound.
    pub fn capacity(&self) -> usize {
        self.heads.len() * WAYS
    }

    /// Number of buckets.
    pub fn buckets(&self) -> usize {
        self.heads.len()
    }

    /// Entries stored (expired entries not yet removed included).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Buckets holding at least one entry (bits set in the used bitmap).
    pub fn used_buckets(&self) -> usize {
        self.used.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Bytes the table's arrays occupy; fixed from construction (or the last resize) on.
    pub fn memory_bytes(&self) -> usize {
        self.heads.capacity() * std::mem::size_of::<BucketHead>()
            + self.slots.capacity() * std::mem::size_of::<Option<Entry<V>>>()
            + self.side.capacity() * std::mem::size_of::<S>()
            + self.used.capacity() * std::mem::size_of::<u64>()
    }

    /// The idle timeout in ticks.
    pub fn idle_timeout(&self) -> Tick {
        self.idle_timeout
    }

    /// Changes the idle timeout; entries are judged by the new value from now on.
    pub fn set_idle_timeout(&mut self, ticks: Tick) {
        self.idle_timeout = ticks;
    }

    /// The eviction protection window in ticks ([`FlowConfig::protect`]).
    pub fn protect(&self) -> Tick {
        self.protect
    }

    /// The table's hasher (the pipeline reuses it for ECMP hashes).
    pub fn hasher(&self) -> &FlowHasher {
        &self.hasher
    }

    /// The counters.
    pub fn counters(&self) -> &FlowCounters {
        &self.counters
    }

    /// Sets every counter to zero.
    pub fn reset_counters(&mut self) {
        self.counters = FlowCounters::default();
    }

    #[inline]
    fn is_expired(&self, now: Tick, last_used: Tick) -> bool {
        now.wrapping_sub(last_used) > self.idle_timeout
    }

    #[inline]
    fn place(&self, key: &FlowKey) -> (usize, u32) {
        self.place_hash(self.hasher.hash(key))
    }

    #[inline]
    fn place_hash(&self, h: u64) -> (usize, u32) {
        ((h as usize) & self.mask, signature(h))
    }

    /// The way of bucket `b` holding `key`, if any.
    #[inline(always)]
    fn find(&self, b: usize, sig: u32, key: &FlowKey) -> Option<usize> {
        let head = self.heads.get(b)?;
        let mut matches = head.matching(sig);
        while matches != 0 {
            let w = matches.trailing_zeros() as usize;
            matches &= matches - 1;
            if let Some(Some(e)) = self.slots.get(b * WAYS + w) {
                if e.key == *key {
                    return Some(w);
                }
            }
        }
        None
    }

    #[inline]
    fn last_used(&self, b: usize, w: usize) -> Tick {
        self.heads
            .get(b)
            .and_then(|h| h.last_used.get(w))
            .copied()
            .unwrap_or(0)
    }

    #[inline]
    fn touch(&mut self, b: usize, w: usize, now: Tick) {
        if let Some(t) = self.heads.get_mut(b).and_then(|h| h.last_used.get_mut(w)) {
            *t = now;
        }
    }

    #[inline]
    fn value_at(&self, b: usize, w: usize) -> Option<V> {
        match self.slots.get(b * WAYS + w) {
            Some(Some(e)) => Some(e.value),
            _ => None,
        }
    }

    #[inline]
    fn set_value(&mut self, b: usize, w: usize, value: V) {
        if let Some(Some(e)) = self.slots.get_mut(b * WAYS + w) {
            e.value = value;
        }
    }

    #[inline]
    fn set_side(&mut self, b: usize, w: usize, side: S) {
        if let Some(x) = self.side.get_mut(b * WAYS + w) {
            *x = side;
        }
    }

    /// Empties way `w` of bucket `b`, keeping `len` and the used bitmap right.
    fn remove_at(&mut self, b: usize, w: usize) -> Option<Entry<V>> {
        let old = self.slots.get_mut(b * WAYS + w).and_then(Option::take)?;
        self.len -= 1;
        if let Some(head) = self.heads.get_mut(b) {
            if let Some(s) = head.sig.get_mut(w) {
                *s = 0;
            }
            if head.sig.iter().all(|&s| s == 0) {
                if let Some(word) = self.used.get_mut(b / 64) {
                    *word &= !(1u64 << (b % 64));
                }
            }
        }
        Some(old)
    }

    /// Fills the free way `w` of bucket `b`.
    fn store_at(
        &mut self,
        b: usize,
        w: usize,
        sig: u32,
        entry: Entry<V>,
        side: S,
        last_used: Tick,
    ) {
        let Some(slot) = self.slots.get_mut(b * WAYS + w) else {
            return;
        };
        if slot.replace(entry).is_none() {
            self.len += 1;
        }
        self.set_side(b, w, side);
        if let Some(head) = self.heads.get_mut(b) {
            if let (Some(s), Some(t)) = (head.sig.get_mut(w), head.last_used.get_mut(w)) {
                *s = sig;
                *t = last_used;
            }
        }
        if let Some(word) = self.used.get_mut(b / 64) {
            *word |= 1u64 << (b % 64);
        }
    }

    /// The way a new entry of bucket `b` goes to: `(way, Some(age))` if it holds an entry
    /// (the least recently used one), `(way, None)` if it is free.
    fn victim(&self, b: usize, now: Tick) -> (usize, Option<Tick>) {
        let Some(head) = self.heads.get(b) else {
            return (0, None);
        };
        let mut oldest = (0, 0);
        for (w, (&s, &t)) in head.sig.iter().zip(head.last_used.iter()).enumerate() {
            if s == 0 {
                return (w, None);
            }
            let age = now.wrapping_sub(t);
            if w == 0 || age > oldest.1 {
                oldest = (w, age);
            }
        }
        (oldest.0, Some(oldest.1))
    }

    /// Stores a key known to be absent from bucket `b`.
    fn insert_absent(
        &mut self,
        b: usize,
        sig: u32,
        key: FlowKey,
        value: V,
        side: S,
        now: Tick,
    ) -> Insert<V> {
        let (w, age) = self.victim(b, now);
        let result = match age {
            None => Insert::New,
            Some(age) if age > self.idle_timeout => {
                self.remove_at(b, w);
                self.counters.expirations += 1;
                Insert::New
            }
            Some(age) if age < self.protect => {
                self.counters.refusals += 1;
                return Insert::Refused;
            }
            Some(_) => match self.remove_at(b, w) {
                Some(old) => {
                    self.counters.evictions += 1;
                    Insert::Evicted {
                        key: old.key,
                        value: old.value,
                    }
                }
                None => Insert::New,
            },
        };
        self.counters.inserts += 1;
        self.store_at(b, w, sig, Entry { key, value }, side, now);
        result
    }

    /// Asks the CPU to load the bucket `key` falls in (its signatures and the first of its
    /// entries) ahead of a [`FlowTable::lookup`]: a worker prefetches a whole batch first, so
    /// the cache misses of a large table overlap instead of adding up. In a large table
    /// [`FlowTable::prefetch_entry`] then asks for the entry in the way that holds it.
    #[inline]
    pub fn prefetch(&self, key: &FlowKey) {
        self.prefetch_hash(self.hash(key));
    }

    /// The table's hash of `key` (its own seed), for the `_hashed` calls: a caller that
    /// prefetches, looks up and inserts hashes once.
    #[inline]
    pub fn hash(&self, key: &FlowKey) -> u64 {
        self.hasher.hash(key)
    }

    /// [`FlowTable::prefetch`] for a key of hash `h` (from [`FlowTable::hash`]).
    #[inline]
    pub fn prefetch_hash(&self, h: u64) {
        let (b, _) = self.place_hash(h);
        prefetch(self.heads.as_ptr().wrapping_add(b));
        self.prefetch_slot(b * WAYS);
    }

    /// The bucket head of hash `h` alone, the first step of a two-step prefetch in a table
    /// past the cache ([`FlowTable::prefetch_entry`] is the second).
    #[inline]
    pub fn prefetch_head(&self, h: u64) {
        let (b, _) = self.place_hash(h);
        prefetch(self.heads.as_ptr().wrapping_add(b));
    }

    /// Asks for slot `i`, every line its entry (key and value) spans: one line for a value
    /// of up to 24 bytes, see [`line_starts`]. Only a hint: `i` need not be in range.
    #[inline(always)]
    fn prefetch_slot(&self, i: usize) {
        let e = self.slots.as_ptr().wrapping_add(i).cast::<u8>();
        for off in line_starts(std::mem::size_of::<Option<Entry<V>>>()) {
            prefetch(e.wrapping_add(off));
        }
    }

    /// The second step of a two-step prefetch: once the bucket's head line of hash `h` has
    /// arrived (asked for by [`FlowTable::prefetch_hash`] a while before), asks for the entry
    /// whose signature matches, in whichever way it is. In a well-filled table the entry is
    /// rarely in the bucket's first way, which is all the first step can guess.
    #[inline]
    pub fn prefetch_entry(&self, h: u64) {
        let (b, sig) = self.place_hash(h);
        let Some(head) = self.heads.get(b) else {
            return;
        };
        let matches = head.matching(sig);
        if matches != 0 {
            self.prefetch_slot(b * WAYS + matches.trailing_zeros() as usize);
        }
    }

    /// Whether the table's entries outgrow a core's cache (taken as 1 MiB, the L2 of
    /// recent server cores), so that the second prefetch step ([`FlowTable::prefetch_entry`])
    /// pays: below that, the entries are found in the cache and the extra pass over the
    /// batch only costs instructions (4–5 % of the forwarding rate with 1,000 flows; with a
    /// million flows the step gains 1.2x).
    #[inline]
    pub fn entries_outgrow_cache(&self) -> bool {
        self.len
            .saturating_mul(std::mem::size_of::<Option<Entry<V>>>())
            > 1 << 20
    }

    /// [`FlowTable::lookup`] for a key whose [`FlowTable::hash`] is `h`. A wrong `h` gives a
    /// miss (and a later insert in the wrong bucket), never a wrong entry: keys are compared.
    ///
    /// The check is handed the stored value itself, so it may record in it that it passed (a
    /// stamp that lets the next check end early); what it writes stays, whatever it returns,
    /// and is in the value the lookup returns. It is handed the entry's side part as well, by
    /// reference: a check that reads it only now and then (after a change) leaves its line
    /// unread the rest of the time. What a failing check wants of the side, it copies out.
    #[inline]
    pub fn lookup_hashed<F: FnOnce(&mut V, &mut S) -> bool>(
        &mut self,
        key: &FlowKey,
        h: u64,
        now: Tick,
        valid: F,
    ) -> Lookup<V> {
        let (b, sig) = self.place_hash(h);
        self.lookup_at(b, sig, key, now, valid)
    }

    /// [`FlowTable::insert`] for a key whose [`FlowTable::hash`] is `h` (the side part left
    /// at its default).
    pub fn insert_hashed(&mut self, key: FlowKey, h: u64, value: V, now: Tick) -> Insert<V> {
        self.insert_hashed_side(key, h, value, S::default(), now)
    }

    /// [`FlowTable::insert_hashed`] with the entry's side part.
    pub fn insert_hashed_side(
        &mut self,
        key: FlowKey,
        h: u64,
        value: V,
        side: S,
        now: Tick,
    ) -> Insert<V> {
        let (b, sig) = self.place_hash(h);
        self.insert_at(b, sig, key, value, side, now)
    }

    /// Looks `key` up at time `now`. A valid entry is a [`Lookup::Hit`] and its last-used
    /// tick becomes `now`; an entry `valid` rejects is [`Lookup::Stale`] (left in place for
    /// the caller to refresh); an expired entry is removed and the lookup is a miss.
    #[inline]
    pub fn lookup<F: FnOnce(&V) -> bool>(
        &mut self,
        key: &FlowKey,
        now: Tick,
        valid: F,
    ) -> Lookup<V> {
        let (b, sig) = self.place(key);
        self.lookup_at(b, sig, key, now, |v: &mut V, _: &mut S| valid(v))
    }

    #[inline]
    fn lookup_at<F: FnOnce(&mut V, &mut S) -> bool>(
        &mut self,
        b: usize,
        sig: u32,
        key: &FlowKey,
        now: Tick,
        valid: F,
    ) -> Lookup<V> {
        if let Some(w) = self.find(b, sig, key) {
            let last = self.last_used(b, w);
            if self.is_expired(now, last) {
                self.remove_at(b, w);
                self.counters.expirations += 1;
            } else if let (Some(Some(e)), Some(side)) = (
                self.slots.get_mut(b * WAYS + w),
                self.side.get_mut(b * WAYS + w),
            ) {
                let ok = valid(&mut e.value, side);
                let v = e.value;
                if ok {
                    // Most hits fall in the same tick as the last one: no store then.
                    if last != now {
                        self.touch(b, w, now);
                    }
                    self.counters.hits += 1;
                    return Lookup::Hit(v);
                }
                self.counters.stale_refreshes += 1;
                return Lookup::Stale(v);
            }
        }
        self.counters.misses += 1;
        Lookup::Miss
    }

    /// [`FlowTable::lookup`] without a validity check: the value if present and not expired.
    #[inline]
    pub fn get(&mut self, key: &FlowKey, now: Tick) -> Option<V> {
        match self.lookup(key, now, |_| true) {
            Lookup::Hit(v) => Some(v),
            Lookup::Stale(_) | Lookup::Miss => None,
        }
    }

    /// The value of `key` if present and not expired at `now`, without touching the entry or
    /// the counters.
    pub fn peek(&self, key: &FlowKey, now: Tick) -> Option<V> {
        let (b, sig) = self.place(key);
        let w = self.find(b, sig, key)?;
        if self.is_expired(now, self.last_used(b, w)) {
            return None;
        }
        self.value_at(b, w)
    }

    /// Stores `value` for `key` at time `now`: in place if the key is present, else in a free
    /// way, the way of an expired entry, or the way of the bucket's least recently used entry
    /// (evicted and returned) if that entry is older than the protection window; else nothing
    /// is stored ([`Insert::Refused`]).
    pub fn insert(&mut self, key: FlowKey, value: V, now: Tick) -> Insert<V> {
        let (b, sig) = self.place(&key);
        self.insert_at(b, sig, key, value, S::default(), now)
    }

    fn insert_at(
        &mut self,
        b: usize,
        sig: u32,
        key: FlowKey,
        value: V,
        side: S,
        now: Tick,
    ) -> Insert<V> {
        if let Some(w) = self.find(b, sig, &key) {
            if self.is_expired(now, self.last_used(b, w)) {
                self.remove_at(b, w);
                self.counters.expirations += 1;
                self.counters.inserts += 1;
                self.store_at(b, w, sig, Entry { key, value }, side, now);
                return Insert::New;
            }
            let old = self.value_at(b, w);
            self.set_value(b, w, value);
            self.set_side(b, w, side);
            self.touch(b, w, now);
            if let Some(old) = old {
                return Insert::Replaced(old);
            }
        }
        self.insert_absent(b, sig, key, value, side, now)
    }

    /// Lookup and refresh in one probe. A valid entry is returned (a hit). Otherwise
    /// `compute` is called with the stale value (`Some`) or nothing (a miss) and its answer is
    /// cached (unless a miss's bucket refuses it, see the module doc) and returned; `None`
    /// from `compute` caches nothing (and drops a stale entry). The side part, in a table that
    /// has one, is not seen: a refreshed entry keeps its side, a new one gets the default.
    pub fn resolve<F, C>(&mut self, key: &FlowKey, now: Tick, valid: F, compute: C) -> Option<V>
    where
        F: FnOnce(&V) -> bool,
        C: FnOnce(Option<&V>) -> Option<V>,
    {
        let (b, sig) = self.place(key);
        if let Some(w) = self.find(b, sig, key) {
            if self.is_expired(now, self.last_used(b, w)) {
                self.remove_at(b, w);
                self.counters.expirations += 1;
            } else if let Some(old) = self.value_at(b, w) {
                if valid(&old) {
                    self.touch(b, w, now);
                    self.counters.hits += 1;
                    return Some(old);
                }
                self.counters.stale_refreshes += 1;
                return match compute(Some(&old)) {
                    Some(new) => {
                        self.set_value(b, w, new);
                        self.touch(b, w, now);
                        Some(new)
                    }
                    None => {
                        self.remove_at(b, w);
                        self.counters.invalidations += 1;
                        None
                    }
                };
            }
        }
        self.counters.misses += 1;
        let new = compute(None)?;
        self.insert_absent(b, sig, *key, new, S::default(), now);
        Some(new)
    }

    /// Removes `key`'s entry (for example after its route changed); its value if it was there.
    pub fn invalidate(&mut self, key: &FlowKey) -> Option<V> {
        let (b, sig) = self.place(key);
        let w = self.find(b, sig, key)?;
        let old = self.remove_at(b, w)?;
        self.counters.invalidations += 1;
        Some(old.value)
    }

    /// Removes every entry (counted as invalidations); capacity is kept.
    pub fn clear(&mut self) {
        self.counters.invalidations += self.len as u64;
        self.heads.fill(BucketHead::default());
        self.slots.fill(None);
        self.used.fill(0);
        self.len = 0;
        self.cursor = 0;
    }

    /// Every entry: `(key, value, last_used)`, in bucket order (expired ones included).
    pub fn iter(&self) -> impl Iterator<Item = (FlowKey, V, Tick)> + '_ {
        self.slots
            .chunks_exact(WAYS)
            .zip(self.heads.iter())
            .flat_map(|(ways, head)| {
                ways.iter()
                    .zip(head.last_used.iter())
                    .filter_map(|(e, &t)| e.as_ref().map(|e| (e.key, e.value, t)))
            })
    }

    /// Removes the expired entries of bucket `b`; how many.
    fn expire_bucket(&mut self, b: usize, now: Tick) -> usize {
        let Some(head) = self.heads.get(b).copied() else {
            return 0;
        };
        let mut expired = 0;
        for (w, (&s, &t)) in head.sig.iter().zip(head.last_used.iter()).enumerate() {
            if s != 0 && self.is_expired(now, t) && self.remove_at(b, w).is_some() {
                expired += 1;
            }
        }
        self.counters.expirations += expired as u64;
        expired
    }

    /// One incremental garbage-collection step: from the cursor on, visits used buckets only
    /// and removes expired entries, until `budget` units of work are spent (a bitmap word read
    /// or a bucket visited is one unit) or the end of the table is reached.
    pub fn gc(&mut self, now: Tick, budget: usize) -> GcReport {
        let mut r = GcReport::default();
        let buckets = self.heads.len();
        while r.work < budget {
            if self.cursor >= buckets {
                self.cursor = 0;
                r.pass_done = true;
                break;
            }
            let wi = self.cursor / 64;
            let bits = self.used.get(wi).copied().unwrap_or(0) & (u64::MAX << (self.cursor % 64));
            r.work += 1;
            if bits == 0 {
                self.cursor = (wi + 1) * 64;
                continue;
            }
            let b = wi * 64 + bits.trailing_zeros() as usize;
            r.work += 1;
            r.visited += 1;
            r.expired += self.expire_bucket(b, now);
            self.cursor = b + 1;
        }
        r
    }

    /// A whole garbage-collection pass over the table, from bucket 0.
    pub fn gc_full(&mut self, now: Tick) -> GcReport {
        self.cursor = 0;
        self.gc(now, usize::MAX)
    }

    /// Rebuilds the table with room for `new_capacity` entries (rounded as in
    /// [`FlowConfig::capacity`]), rehashing every entry that has not expired at `now`, with its
    /// last-used tick. Every entry whose new bucket has room is kept; where a bucket receives
    /// more than [`WAYS`] entries (only when shrinking), its most recently used ones are kept
    /// and the others are evicted (counted). Returns the number evicted.
    pub fn resize(&mut self, new_capacity: usize, now: Tick) -> usize {
        self.resize_with(new_capacity, now, |_, _| {})
    }

    /// [`FlowTable::resize`], calling `on_evict` with each entry that did not fit.
    pub fn resize_with<F: FnMut(FlowKey, V)>(
        &mut self,
        new_capacity: usize,
        now: Tick,
        mut on_evict: F,
    ) -> usize {
        let buckets = Self::buckets_for(new_capacity);
        let old_heads =
            std::mem::replace(&mut self.heads, huge_vec(buckets, BucketHead::default()));
        let old_slots = std::mem::replace(&mut self.slots, huge_vec(buckets * WAYS, None));
        let old_side = std::mem::replace(&mut self.side, huge_vec(buckets * WAYS, S::default()));
        self.used = vec![0; buckets.div_ceil(64)];
        self.mask = buckets - 1;
        self.len = 0;
        self.cursor = 0;
        let mut evicted = 0;
        // The side array is as long as the slots (a vector of `()` too has a length).
        let old_ways = old_slots
            .chunks_exact(WAYS)
            .zip(old_side.chunks_exact(WAYS));
        for ((ways, sides), head) in old_ways.zip(old_heads.iter()) {
            for ((slot, &side), &last) in ways.iter().zip(sides).zip(head.last_used.iter()) {
                let Some(e) = slot else { continue };
                if self.is_expired(now, last) {
                    self.counters.expirations += 1;
                    continue;
                }
                if let Some(loser) = self.rehash_place(*e, side, last, now) {
                    self.counters.evictions += 1;
                    evicted += 1;
                    on_evict(loser.key, loser.value);
                }
            }
        }
        evicted
    }

    /// Places an entry during a resize, keeping the most recently used entries of a full
    /// bucket; the entry that does not fit, if any.
    fn rehash_place(&mut self, e: Entry<V>, side: S, last: Tick, now: Tick) -> Option<Entry<V>> {
        let (b, sig) = self.place(&e.key);
        let (w, lru_age) = self.victim(b, now);
        match lru_age {
            None => {
                self.store_at(b, w, sig, e, side, last);
                None
            }
            Some(lru_age) if lru_age > now.wrapping_sub(last) => {
                let loser = self.remove_at(b, w);
                self.store_at(b, w, sig, e, side, last);
                loser
            }
            Some(_) => Some(e),
        }
    }

    /// Checks the structure's invariants (tests): signatures match slots, `len` and the used
    /// bitmap agree with the ways, every key sits in its own bucket.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut len = 0;
        for (b, (ways, head)) in self
            .slots
            .chunks_exact(WAYS)
            .zip(self.heads.iter())
            .enumerate()
        {
            let mut any = false;
            for (slot, &s) in ways.iter().zip(head.sig.iter()) {
                assert_eq!(slot.is_some(), s != 0);
                if let Some(e) = slot {
                    any = true;
                    len += 1;
                    assert_eq!(self.place(&e.key), (b, s));
                }
            }
            let bit = self.used[b / 64] >> (b % 64) & 1;
            assert_eq!(bit == 1, any, "used bit of bucket {b}");
        }
        assert_eq!(len, self.len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn key(i: u32) -> FlowKey {
        FlowKey::v4(Ipv4Addr::from(i), Ipv4Addr::new(192, 0, 2, 1), 17, 1000, 53)
    }

    fn table(capacity: usize) -> FlowTable<u32> {
        FlowTable::new(FlowConfig {
            capacity,
            idle_timeout: 100,
            seed: 1,
            // Plain least-recently-used eviction; the window has tests of its own.
            protect: 0,
        })
    }

    #[test]
    fn a_hashed_lookups_check_may_stamp_the_stored_value() {
        let mut t = table(64);
        let k = key(1);
        let h = t.hash(&k);
        t.insert(k, 10, 1);
        // The check passes and stamps: the stamp is in the hit and in the table.
        let hit = t.lookup_hashed(&k, h, 2, |v, _| {
            *v += 1;
            true
        });
        assert_eq!(hit, Lookup::Hit(11));
        assert_eq!(t.peek(&k, 2), Some(11));
        // A failing check's writes stay too; the entry is stale, not removed.
        let stale = t.lookup_hashed(&k, h, 3, |v, _| {
            *v = 20;
            false
        });
        assert_eq!(stale, Lookup::Stale(20));
        assert_eq!(t.peek(&k, 3), Some(20));
        let c = t.counters();
        assert_eq!((c.hits, c.stale_refreshes), (1, 1));
    }

    #[test]
    fn the_side_part_travels_with_its_entry() {
        let mut t: FlowTable<u32, u64> = FlowTable::with_side(FlowConfig {
            capacity: 64,
            seed: 1,
            protect: 0,
            ..FlowConfig::default()
        });
        let hashed = |t: &FlowTable<u32, u64>, i: u32| (key(i), t.hash(&key(i)));
        for i in 0..40u32 {
            let (k, h) = hashed(&t, i);
            t.insert_hashed_side(k, h, i, 1000 + u64::from(i), 1);
        }
        let side_of = |t: &mut FlowTable<u32, u64>, i: u32| {
            let (k, h) = hashed(t, i);
            let mut seen = None;
            let r = t.lookup_hashed(&k, h, 2, |_, s| {
                seen = Some(*s);
                true
            });
            (r, seen)
        };
        let present: Vec<u32> = (0..40).filter(|&i| t.peek(&key(i), 2).is_some()).collect();
        assert!(present.len() > 30, "{} of 40 kept", present.len());
        for &i in &present {
            assert_eq!(
                side_of(&mut t, i),
                (Lookup::Hit(i), Some(1000 + u64::from(i)))
            );
        }
        // A check may rewrite the side; replacing the entry replaces it.
        let (k, h) = hashed(&t, present[0]);
        t.lookup_hashed(&k, h, 2, |_, s| {
            *s = 7;
            true
        });
        assert_eq!(side_of(&mut t, present[0]).1, Some(7));
        t.insert_hashed_side(k, h, 5, 8, 2);
        assert_eq!(side_of(&mut t, present[0]), (Lookup::Hit(5), Some(8)));
        // Plain inserts leave the default; a way reused by another key carries the new side.
        t.invalidate(&key(present[1]));
        t.insert(key(present[1]), 6, 2);
        assert_eq!(side_of(&mut t, present[1]), (Lookup::Hit(6), Some(0)));
        // A resize moves every side with its entry.
        t.resize(1024, 2);
        for &i in &present[2..] {
            assert_eq!(
                side_of(&mut t, i),
                (Lookup::Hit(i), Some(1000 + u64::from(i)))
            );
        }
        t.check_invariants();
    }

    proptest::proptest! {
        /// Few distinct signatures, so that several ways often hold the one asked for.
        #[test]
        fn a_bucket_matches_a_signature_in_exactly_the_ways_that_hold_it(
            sigs in proptest::array::uniform8(0u32..4),
            sig in 0u32..4,
        ) {
            let head = BucketHead { sig: sigs, ..BucketHead::default() };
            let want = head.matching_scalar(sig);
            proptest::prop_assert_eq!(head.matching(sig), want);
            for (w, &s) in sigs.iter().enumerate() {
                proptest::prop_assert_eq!(want >> w & 1 == 1, s == sig);
            }
        }
    }

    #[test]
    fn a_bucket_matches_the_extreme_signatures() {
        let head = BucketHead {
            sig: [u32::MAX, 7, 7, 0, 1, 7, 2, 7],
            ..BucketHead::default()
        };
        assert_eq!(head.matching(7), 0b1010_0110);
        assert_eq!(head.matching(u32::MAX), 1);
    }

    #[test]
    fn entries_outgrow_the_cache_past_one_mebibyte_and_prefetching_any_hash_is_harmless() {
        // Large enough that no bucket fills up before the threshold.
        let mut t = table(1 << 18);
        let entry = std::mem::size_of::<Option<Entry<u32>>>();
        let fit = (1 << 20) / entry;
        // Any hash, on an empty table and later, only hints.
        for h in [0, 1, u64::MAX, 0x1234_5678_9abc_def0] {
            t.prefetch_head(h);
            t.prefetch_entry(h);
        }
        let mut i = 0u32;
        while t.len() < fit {
            assert!(
                matches!(t.insert(key(i), i, 1), Insert::New),
                "no eviction this early"
            );
            i += 1;
        }
        assert!(
            !t.entries_outgrow_cache(),
            "{} entries of {entry} bytes",
            t.len()
        );
        t.insert(key(i), i, 1);
        assert!(
            t.entries_outgrow_cache(),
            "{} entries of {entry} bytes",
            t.len()
        );
        for j in 0..=i {
            t.prefetch_head(t.hash(&key(j)));
            t.prefetch_entry(t.hash(&key(j)));
            assert_eq!(t.get(&key(j), 2), Some(j));
        }
    }

    #[test]
    fn hashed_calls_agree_with_plain_ones() {
        let mut a = table(1024);
        let mut b = table(1024);
        for i in 0..600u32 {
            let k = key(i);
            a.insert(k, i, 1);
            let h = b.hash(&k);
            b.prefetch_hash(h);
            b.insert_hashed(k, h, i, 1);
        }
        for i in 0..700u32 {
            let k = key(i);
            let h = b.hash(&k);
            assert_eq!(
                a.lookup(&k, 2, |_| true),
                b.lookup_hashed(&k, h, 2, |_, _| true)
            );
        }
        // A wrong hash finds nothing rather than a wrong entry.
        let k = key(5);
        let wrong = b.hash(&key(6));
        assert!(matches!(
            b.lookup_hashed(&k, wrong, 2, |_, _| true),
            Lookup::Miss | Lookup::Hit(5)
        ));
        assert_eq!(a.len(), b.len());
    }

    #[test]
    fn key_equality_covers_every_field() {
        let base = FlowKey::v4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            6,
            1,
            2,
        );
        assert_eq!(base, base);
        for other in [
            FlowKey::v4(
                Ipv4Addr::new(10, 0, 0, 3),
                Ipv4Addr::new(10, 0, 0, 2),
                6,
                1,
                2,
            ),
            FlowKey::v4(
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 3),
                6,
                1,
                2,
            ),
            FlowKey::v4(
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 2),
                17,
                1,
                2,
            ),
            FlowKey::v4(
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 2),
                6,
                9,
                2,
            ),
            FlowKey::v4(
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 2),
                6,
                1,
                9,
            ),
            base.l3_only(),
            FlowKey::dst_v4(Ipv4Addr::new(10, 0, 0, 2)),
            FlowKey::v6(
                Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped(),
                Ipv4Addr::new(10, 0, 0, 2).to_ipv6_mapped(),
                6,
                1,
                2,
            ),
        ] {
            assert_ne!(base, other);
        }
    }

    /// `n` keys that hash to bucket `b`, from the first million test keys (a hash that
    /// never reaches the bucket fails the test instead of searching forever).
    fn keys_in_bucket(t: &FlowTable<u32>, b: usize, n: usize) -> Vec<FlowKey> {
        let ks: Vec<FlowKey> = (0u32..1 << 20)
            .map(key)
            .filter(|k| t.place(k).0 == b)
            .take(n)
            .collect();
        assert_eq!(ks.len(), n, "keys in bucket {b}");
        ks
    }

    #[test]
    fn sizes_and_layout() {
        assert_eq!(std::mem::size_of::<BucketHead>(), 64);
        assert_eq!(std::mem::align_of::<FlowCounters>(), 64);
        let t = table(1000);
        assert_eq!(t.buckets(), 128);
        assert_eq!(t.capacity(), 1024);
        assert_eq!(table(0).capacity(), WAYS);
        // The clamp, checked without allocating the largest table.
        assert_eq!(
            FlowTable::<u32>::buckets_for(usize::MAX) * WAYS,
            MAX_CAPACITY
        );
        assert_eq!(FlowTable::<u32>::buckets_for(9), 2);
        // Entries are the key and the value, a line each up to 24 bytes of value; the key's
        // niches make the Option free.
        assert_eq!(std::mem::size_of::<Option<Entry<u64>>>(), 64);
        assert_eq!(std::mem::size_of::<Option<Entry<[u32; 6]>>>(), 64);
        assert_eq!(std::mem::align_of::<Option<Entry<[u32; 6]>>>(), 64);
        // A side part takes no room in the entry; `()` none at all.
        let s = FlowTable::<u32, [u64; 6]>::with_side(FlowConfig {
            capacity: 1024,
            ..FlowConfig::default()
        });
        assert_eq!(s.memory_bytes() - t.memory_bytes(), 1024 * 48);
    }

    #[test]
    fn insert_lookup_replace_invalidate() {
        let mut t = table(64);
        assert_eq!(t.get(&key(1), 0), None);
        assert_eq!(t.insert(key(1), 10, 0), Insert::New);
        assert_eq!(t.insert(key(2), 20, 0), Insert::New);
        assert_eq!(t.get(&key(1), 1), Some(10));
        assert_eq!(t.insert(key(1), 11, 2), Insert::Replaced(10));
        assert_eq!(t.get(&key(1), 3), Some(11));
        assert_eq!(t.len(), 2);
        assert_eq!(t.invalidate(&key(1)), Some(11));
        assert_eq!(t.invalidate(&key(1)), None);
        assert_eq!(t.get(&key(1), 4), None);
        assert_eq!(t.get(&key(2), 4), Some(20));
        let c = t.counters();
        assert_eq!((c.hits, c.misses, c.inserts, c.invalidations), (3, 2, 2, 1));
        t.check_invariants();
        t.clear();
        assert!(t.is_empty());
        assert_eq!(t.used_buckets(), 0);
        assert_eq!(t.counters().invalidations, 2);
        t.check_invariants();
    }

    #[test]
    fn stale_entries_are_reported_never_hit() {
        let mut t = table(64);
        t.insert(key(1), 1, 0);
        let current = 2;
        assert_eq!(t.lookup(&key(1), 1, |v| *v == current), Lookup::Stale(1));
        // Still stale until refreshed.
        assert_eq!(t.lookup(&key(1), 1, |v| *v == current), Lookup::Stale(1));
        t.insert(key(1), current, 1);
        assert_eq!(t.lookup(&key(1), 2, |v| *v == current), Lookup::Hit(2));
        assert_eq!(t.counters().stale_refreshes, 2);
        assert_eq!(t.counters().hits, 1);
    }

    #[test]
    fn resolve_hits_refreshes_and_fills() {
        let mut t = table(64);
        let mut calls = Vec::new();
        let r = t.resolve(
            &key(1),
            0,
            |_| true,
            |old| {
                calls.push(old.copied());
                Some(5)
            },
        );
        assert_eq!(r, Some(5));
        assert_eq!(t.resolve(&key(1), 1, |_| true, |_| Some(99)), Some(5));
        let r = t.resolve(
            &key(1),
            2,
            |v| *v == 6,
            |old| {
                calls.push(old.copied());
                Some(6)
            },
        );
        assert_eq!(r, Some(6));
        assert_eq!(calls, vec![None, Some(5)]);
        assert_eq!(t.peek(&key(1), 2), Some(6));
        // A stale entry whose recomputation gives nothing is dropped.
        assert_eq!(t.resolve(&key(1), 3, |_| false, |_| None), None);
        assert_eq!(t.peek(&key(1), 3), None);
        // A miss that computes nothing caches nothing.
        assert_eq!(t.resolve(&key(2), 3, |_| true, |_| None), None);
        assert!(t.is_empty());
        let c = t.counters();
        assert_eq!(
            (
                c.hits,
                c.misses,
                c.stale_refreshes,
                c.inserts,
                c.invalidations
            ),
            (1, 2, 2, 1, 1)
        );
        t.check_invariants();
    }

    #[test]
    fn idle_entries_expire_on_lookup_and_hits_keep_them_alive() {
        let mut t = table(64);
        t.insert(key(1), 1, 0);
        t.insert(key(2), 2, 0);
        assert_eq!(t.get(&key(1), 100), Some(1)); // exactly the timeout: still alive
        assert_eq!(t.peek(&key(2), 101), None);
        assert_eq!(t.get(&key(2), 101), None);
        assert_eq!(t.get(&key(1), 200), Some(1));
        assert_eq!(t.counters().expirations, 1);
        assert_eq!(t.len(), 1);
        // Re-inserting an expired key is a new entry.
        assert_eq!(t.insert(key(1), 3, 301), Insert::New);
        assert_eq!(t.counters().expirations, 2);
        t.check_invariants();
    }

    #[test]
    fn ticks_may_wrap() {
        let mut t = table(64);
        let start = u32::MAX - 10;
        t.insert(key(1), 1, start);
        assert_eq!(t.get(&key(1), start.wrapping_add(50)), Some(1));
        assert_eq!(t.get(&key(1), start.wrapping_add(150)), Some(1));
        assert_eq!(t.get(&key(1), start.wrapping_add(251)), None);
    }

    #[test]
    fn full_bucket_evicts_its_least_recently_used_entry() {
        let mut t = table(64);
        let ks = keys_in_bucket(&t, 3, WAYS + 2);
        for (i, k) in ks.iter().take(WAYS).enumerate() {
            assert_eq!(t.insert(*k, i as u32, i as Tick), Insert::New);
        }
        // Touch the oldest: the second oldest becomes the LRU.
        assert_eq!(t.get(&ks[0], 20), Some(0));
        assert_eq!(
            t.insert(ks[WAYS], 100, 21),
            Insert::Evicted {
                key: ks[1],
                value: 1
            }
        );
        assert_eq!(
            t.insert(ks[WAYS + 1], 101, 22),
            Insert::Evicted {
                key: ks[2],
                value: 2
            }
        );
        assert_eq!(t.counters().evictions, 2);
        assert_eq!(t.len(), WAYS);
        assert_eq!(t.used_buckets(), 1);
        assert_eq!(t.peek(&ks[0], 22), Some(0));
        assert_eq!(t.peek(&ks[1], 22), None);
        t.check_invariants();
    }

    /// The prefetched offsets reach every cache line an entry spans, each line once and none
    /// outside the entry, for every size up to three lines of an entry starting on a line.
    #[test]
    fn prefetched_lines_cover_every_line_of_an_entry_once() {
        for size in 1..=192usize {
            let asked: Vec<usize> = line_starts(size).map(|o| o / 64).collect();
            let spanned: Vec<usize> = (0..=(size - 1) / 64).collect();
            assert_eq!(asked, spanned, "size {size}");
            assert!(line_starts(size).all(|o| o < size), "size {size}: outside");
        }
        // Today's entry, key and value, is one line: asked for once.
        let size = std::mem::size_of::<Option<Entry<u64>>>();
        assert_eq!(line_starts(size).count(), 1);
        assert_eq!(std::mem::align_of::<Option<Entry<u64>>>(), 64);
    }

    #[test]
    fn expired_way_is_reused_before_evicting() {
        let mut t = table(64);
        let ks = keys_in_bucket(&t, 5, WAYS + 1);
        t.insert(ks[0], 0, 0);
        for (i, k) in ks.iter().enumerate().take(WAYS).skip(1) {
            t.insert(*k, i as u32, 90);
        }
        // At 150 ks[0] (idle 150) has expired, the others (idle 60) have not.
        assert_eq!(t.insert(ks[WAYS], 8, 150), Insert::New);
        assert_eq!(t.counters().evictions, 0);
        assert_eq!(t.counters().expirations, 1);
        t.check_invariants();
    }

    #[test]
    fn gc_visits_only_used_buckets_within_budget() {
        let mut t = table(8 * 1024); // 1024 buckets, 16 bitmap words
        let ks: Vec<FlowKey> = (0..40).map(key).collect();
        for k in &ks[..20] {
            t.insert(*k, 0, 0);
        }
        for k in &ks[20..] {
            t.insert(*k, 1, 50);
        }
        let used = t.used_buckets();
        assert!(used <= 40);
        // Nothing expired yet: a full pass visits every used bucket and removes nothing.
        let r = t.gc_full(60);
        assert_eq!((r.visited, r.expired, r.pass_done), (used, 0, true));
        // One unit per bucket, one per bitmap word read (at most one extra read per bucket).
        assert!(r.work > used && r.work <= 2 * used + 16, "work {}", r.work);
        // At 120 the first twenty have expired; collect in steps of budget 5.
        let mut total = GcReport::default();
        let mut calls = 0;
        loop {
            let r = t.gc(120, 5);
            assert!(r.work <= 5 + 1, "work {}", r.work);
            calls += 1;
            total.visited += r.visited;
            total.expired += r.expired;
            if r.pass_done {
                break;
            }
            assert!(calls < 1000);
        }
        assert_eq!(total.expired, 20);
        assert_eq!(total.visited, used);
        assert_eq!(t.len(), 20);
        assert_eq!(t.counters().expirations, 20);
        for k in &ks[20..] {
            assert_eq!(t.peek(k, 120), Some(1));
        }
        t.check_invariants();
        // An empty table costs one unit per bitmap word.
        let mut e = table(8 * 1024);
        let r = e.gc(0, usize::MAX);
        assert_eq!((r.work, r.visited, r.pass_done), (16, 0, true));
    }

    #[test]
    fn resize_keeps_every_entry_that_fits() {
        let mut t: FlowTable<u32> = FlowTable::new(FlowConfig {
            capacity: 1024,
            idle_timeout: 10_000,
            seed: 1,
            protect: 0,
        });
        for i in 0..600 {
            t.insert(key(i), i, i);
        }
        let before: Vec<_> = (0..600).map(|i| t.peek(&key(i), 600)).collect();
        let kept = before.iter().filter(|v| v.is_some()).count();
        // Grow: nothing is lost, nothing evicted.
        assert_eq!(t.resize(4096, 600), 0);
        assert_eq!(t.capacity(), 4096);
        for i in 0..600 {
            assert_eq!(t.peek(&key(i), 600), before[i as usize]);
        }
        assert_eq!(t.len(), kept);
        t.check_invariants();
        // Shrink: 600 entries into 256 ways; the newest of each bucket stay.
        let mut dropped = Vec::new();
        let n = t.resize_with(256, 600, |k, v| dropped.push((k, v)));
        assert_eq!(n, dropped.len());
        assert_eq!(t.len() + n, kept);
        assert_eq!(t.len(), 256);
        for (b, head) in t.heads.iter().enumerate() {
            let newest_dropped = dropped
                .iter()
                .filter(|(k, _)| t.place(k).0 == b)
                .map(|&(_, v)| v)
                .max();
            let oldest_kept = head.last_used.iter().min().copied();
            if let (Some(d), Some(k)) = (newest_dropped, oldest_kept) {
                assert!(d < k, "bucket {b}: dropped tick {d} newer than kept {k}");
            }
        }
        t.check_invariants();
        // Expired entries are not carried over.
        let mut t = table(64);
        t.insert(key(1), 1, 0);
        t.insert(key(2), 2, 150);
        assert_eq!(t.resize(128, 150), 0);
        assert_eq!(t.len(), 1);
        assert_eq!(t.counters().expirations, 1);
    }

    #[test]
    fn counters_sum() {
        let a = FlowCounters {
            hits: 1,
            misses: 2,
            stale_refreshes: 3,
            ..FlowCounters::default()
        };
        let total: FlowCounters = [a, a, a].into_iter().sum();
        assert_eq!(total.hits, 3);
        assert_eq!(total.lookups(), 18);
    }
}
