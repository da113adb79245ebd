//! # vfsr-rib: the routing information base (control plane)
//!
//! Routes arrive from many sources; the RIB keeps all of them, picks the best per prefix,
//! and hands the data path two things only (the FreeBSD split of L3 and L2 state): prefix →
//! index changes for the lookup engines, and the table of what each index means.
//!
//! ```text
//!  connected static kernel table bgp ospf api        update stream (stream.rs)
//!       │      │      │     │    │    │    │            "a 10.0.0.0/8 192.0.2.1"
//!       └──────┴──────┴─────┴──┬─┴────┴────┘◀────────── Rib::apply / load_table
//!                              ▼
//!               Rib { v4: FamilyRib<u32>, v6: FamilyRib<u128> }      (rib.rs)
//!               per prefix: routes keyed by (source, next hop)
//!                              │ best path: lowest distance, then metric
//!                              │ several best next hops → ECMP group
//!              ┌───────────────┴──────────────────┐
//!              ▼                                  ▼
//!   NextHopTable (nexthop.rs)            FIB change log per family
//!   Forward ⇄ index, groups interned,    (prefix, index), 0 = gone
//!   refcounts, quarantine, generations   drain_fib_changes_v4/_v6
//!              │ snapshot()                       │
//!              ▼                                  ▼
//!   vfsr_fib::nexthop::NhPublisher        live FIB (lookup engines)
//! ```
//!
//! Start reading at [`Rib`] (the module doc of [`rib`] gives the owner's publish cycle), then
//! [`NextHopTable`], then [`stream`] for the text format, then [`RouteTable`] ([`control`]),
//! which ties the RIB to the live FIBs of `vfsr-fib` and runs the publication cycle.
//!
//! **Outside input never panics.** The stream reader takes arbitrary bytes and returns errors
//! as values; the crate denies `unwrap`, `panic!` and unchecked indexing. RIB operations that
//! fail leave the RIB unchanged.

#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::expect_used, clippy::unreachable, clippy::todo)]

pub mod control;
pub mod nexthop;
pub mod rib;
pub mod stream;

pub use control::{LoadError, RouteTable};
pub use nexthop::{NextHopTable, NhError, DEFAULT_MAX_NEXTHOPS};
pub use rib::{
    FamilyRib, LinkState, LoadReport, ResolveReport, Rib, RibError, RibFamily, RibRoute,
    RouteDetail, Source, UnknownSource,
};
pub use stream::{
    parse_update, read_updates, ApplyError, IpPrefix, NextHopSpec, ParseError, ReadError,
    StreamError, StreamOptions, StreamReport, Update, UpdateReader,
};
pub use vfsr_fib::nexthop::{Forward, NhEntry, NhId, NhSnapshot};
