//! # vfsr-fwd: the forwarding pipeline
//!
//! The per-packet path of the router, independent of how packets arrive: a [`Worker`] takes a
//! [`Batch`] of Ethernet frames in memory, decides each one's fate ([`Verdict`]), rewrites
//! forwarded frames in place and appends the packets it makes (ICMP errors, IPv4
//! fragments). Packet I/O, the control plane and the runtime sit around it; this crate reads
//! only what they publish.
//!
//! ```text
//!   frames ─▶ eth_input ─▶ ip4_input ─▶ classify ─▶ ttl ─▶ [flow table] ─▶ route ─▶ ecmp
//!             (stage/)     ip6_input      │  punt      │ ICMP    hit ─┐  (FIB bulk   │
//!                                         ▼            ▼ time      │   lookup)     ▼
//!                                     control plane   exceeded     │          neighbor
//!                                                                  ▼            (ARP/ND of
//!                                                     mtu ◀────────┴──────────  the port)
//!                                                      │ ICMP frag needed / too big,   │ miss:
//!                                                      │ or fragment (frag.rs)         ▼ hold
//!                                                      ▼                        control plane
//!                                                   rewrite ─▶ Verdict::Forward { oif }
//! ```
//!
//! It follows the split L2/L3 design of Li and Macy's FreeBSD work ("Optimizing the
//! BSD Routing System for Parallel Processing"): the FIB (`vfsr-fib`, Poptrie by default)
//! maps a destination to a next-hop index; the published next-hop table says which gateway
//! and interface; the interface's own ARP or ND table (`vfsr-neigh`) says which MAC; a
//! per-worker flow table (`vfsr-flow`) caches the whole decision per flow and keeps a flow
//! on its ECMP member. Nothing on this path takes a lock or waits for the control plane:
//! snapshots are loaded once per batch (FIB) or per use through a per-worker cache (next
//! hops, neighbors), and every cached reference carries the generation it was taken at.
//!
//! For comparison, [`legacy`] models the unified design it replaced (one locked radix tree
//! with neighbors as host routes and shared reference counts); `vfsr fwd bench` runs both.
//!
//! **Where to start reading.** [`stage`] (one file per stage, each with its outcome enum),
//! then [`worker`] (how they are strung together over a batch, the flow table and stateful
//! ECMP), then [`counters`] (every drop has a named reason). [`icmp_error`], [`frag`] and
//! [`ratelimit`] are the ICMP error builder (RFC 1812 4.3.2, RFC 4443), IPv4 fragmentation
//! (RFC 791) and the per-worker token bucket. [`port`] is the ports as workers read them.
//!
//! **Who writes what workers read.** Not this crate: the router's control-side state
//! (`vfsr-router`: ports with their ARP/ND tables, the RIB compiled into the live FIBs and
//! the published next hops) builds it, for the daemon, the benchmarks and offline replay
//! alike. This crate's own tests publish exact states directly through a small fixture
//! (`tests/common/fixture.rs`).
//!
//! **Why the packet views are hand-written.** See `vfsr-wire`: a header view here is a
//! bounds check and a few loads at fixed offsets; the stages read bytes directly for the
//! same reason (one packet has about 50 ns at 20 Mpps).
//!
//! **No input panics.** The crate denies `unwrap`, `panic!` and unchecked indexing outside
//! tests; `tests/counters.rs` feeds arbitrary frames to a worker and checks that every
//! packet is accounted for exactly once.
#![deny(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::expect_used, clippy::unreachable, clippy::todo)]

pub mod counters;
pub mod frag;
pub mod icmp_error;
pub mod legacy;
pub mod packet;
pub mod port;
pub mod profile;
pub mod ratelimit;
pub mod stage;
pub mod worker;

pub use counters::{Counters, DropReason, Event, Outcome, PuntClass, SharedCounters};
pub use packet::{Batch, Packet, Verdict, DEFAULT_BUFFER};
pub use port::{Port, Ports};
pub use profile::{Profile, Stage};
pub use worker::{Worker, WorkerConfig, DEFAULT_BATCH};
