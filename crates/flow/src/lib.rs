//! # vfsr-flow: the per-core flow table and resilient ECMP
//!
//! The flow table of the FreeBSD split L2/L3 design (Li & Macy, "Optimizing the BSD Routing
//! System for Parallel Processing", PRESTO '09, section 4 and Figure 8), for a userspace
//! router: a per-worker cache from a flow to the forwarding decision made for its first
//! packet, so later packets skip the route and neighbor lookups and, above all, stay on the
//! ECMP member they started on (section 4.1, "stateful forwarding").
//!
//! ```text
//!   packet ──▶ FlowKey ───────────▶ FlowHasher::hash ──▶ u64
//!             (5-tuple, or dst     (seeded multiply-     │ low bits      │ high 32 bits
//!              only; v4 and v6)     xorshift, ~ns)       ▼               ▼ signature
//!                                                  bucket b of 2^k ──────┘
//!                                                        │
//!         heads[b]: 8 signatures + 8 last-used ticks (one cache line)
//!                                                        │ signature match
//!                                                        ▼
//!         slots[b*8 + way]: entry { key, value V }       (N = 8 ways per bucket)
//!                                                        │ key equal, not idle > timeout,
//!                                                        ▼ valid(value)?
//!                          Hit(V) │ Stale(old V): caller recomputes, insert() │ Miss
//!
//!   used bitmap:  0010 1100 0000 0001 ...  one bit per bucket holding an entry
//!   GC cursor:    ───────▶ gc(now, budget) visits set bits only, removes idle entries,
//!                          resumes where it stopped on the next call
//!
//!   ECMP group (ResilientGroup): top bits of the hash ──▶ one of 256 buckets ──▶ member
//! ```
//!
//! **Everything here is per core.** A worker owns its [`FlowTable`] (entries, bitmap, cursor,
//! counters) and the [`ResilientGroup`]s it has built from the published next-hop table;
//! nothing is shared, atomic or locked, as in Li & Macy's per-CPU tables. Each worker keeps
//! its own hash seed. Statistics are plain `u64` counters on their own cache line
//! ([`FlowCounters`]), added up across workers by whoever reports them.
//!
//! Cached values carry the versions they were computed from (the pipeline stores the route
//! result, the next-hop index and generation, the neighbor reference and generation and the
//! FIB snapshot version); a lookup checks them through a closure, so an entry made before a
//! route or neighbor change is detected and refreshed, never used.
//!
//! Data-path crate: it depends on `std` only.
//!
//! Start reading at [`key`] (what a flow is and how it is hashed), then [`table`] (the
//! table, with a worked example), then [`ecmp`] (member selection, and how it combines with
//! the table).
//!
//! **No input panics.** The crate denies `unwrap`, `panic!` and unchecked indexing; every
//! array access is checked.

#![deny(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::expect_used, clippy::unreachable, clippy::todo)]
#![warn(missing_docs)]

pub mod ecmp;
pub mod key;
pub mod table;

#[cfg(test)]
mod model_tests;

pub use ecmp::{EcmpError, ResilientGroup, DEFAULT_ECMP_BUCKETS, MAX_ECMP_BUCKETS};
pub use key::{Family, FlowHasher, FlowKey, HashFields, KeyMode};
pub use table::{
    FlowConfig, FlowCounters, FlowTable, GcReport, Insert, Lookup, Tick, DEFAULT_CAPACITY,
    DEFAULT_IDLE_TIMEOUT, DEFAULT_PROTECT, MAX_CAPACITY, WAYS,
};
