//! # vfsr-fib: the live FIB the forwarding path reads
//!
//! ```text
//!   control plane (vfsr-rib)                       forwarding workers
//!   ───────────────────────                        ──────────────────
//!   LiveFib::set / remove ──▶ RouteMap (truth)
//!            │ poll(): every ≤ 1 ms
//!            ▼
//!   update in place,   ──swap──▶ ArcSwap<Snapshot> ◀──load()── FibReader (one per worker)
//!   snapshot per batch
//!                                                              lookup_bulk on a batch
//!   NextHopTable ──publish──▶ ArcSwap<NhSnapshot> ◀──load()── NhReader
//! ```
//!
//! Data-path crate: it depends on the lookup engines only, never on control-plane code.
//! Readers never lock and never wait; a lookup during an update answers from the table before
//! or after it, never from a half-applied change.
//!
//! Start reading at [`live`] (the FIB publication), then [`nexthop`] (what a FIB value means).

pub mod live;
pub mod nexthop;

pub use live::{
    FibError, FibReader, FibStats, LiveFib, Publish, Snapshot, DEFAULT_MAX_DELAY, POLL_EVERY,
};
