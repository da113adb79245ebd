//! # vfsr-neigh: per-interface neighbor tables (ARP and ND)
//!
//! The L2 half of the FreeBSD split L2/L3 design (Li & Macy, "Optimizing the BSD Routing
//! System for Parallel Processing", PRESTO '09, section 2): routes say which next hop and
//! which interface; the interface's own neighbor table says which MAC. An IPv4 next hop is
//! resolved by ARP, an IPv6 one by Neighbor Discovery, both with the RFC 4861 state machine.
//!
//! ```text
//!   control plane (core 0)                                forwarding workers
//!   ─────────────────────                                 ──────────────────
//!   ARP reply / NA / NS / timer / packet on a miss
//!        │ Event
//!        ▼
//!   state::step (pure, RFC 4861 7.2, 7.3)
//!        │ new state + Actions (solicit, flush / drop hold queue)
//!        ▼
//!   NeighborTable<A, P>  per interface and family
//!     id → { addr, state, MAC, gen, hold queue of P }
//!        │ publish()
//!        ▼
//!   ArcSwap<NeighborSnapshot<A>> ◀── load() (no lock) ── worker: lookup(next hop)
//!                                                          → NeighborEntry { id, gen, mac, state }
//!                                                        flow table caches (id, gen);
//!                                                        later: is_current(id, gen)?
//!                                                          yes → use the cached MAC
//!                                                          no  → look up again
//! ```
//!
//! **FreeBSD 8's LLE** (Li & Macy, "Optimizing the BSD Routing System for Parallel
//! Processing"). FreeBSD 8 gives each interface an ARP and an ND6 table of link-layer
//! entries (LLEs), each with its own reference count and lock, so that L3 can cache a
//! reference and "any change to the LLE object can be detected without locking by L3 the
//! next time the object is referenced" (section 2.1). Here the LLE is a
//! [`NeighborEntry`] in an immutable snapshot: workers never lock (the snapshot is swapped
//! whole by the control plane) and a cached `(id, gen)` pair is the reference; the
//! generation changes exactly when the MAC or its usability changes, so a worker rechecks
//! with one read. No reference counts: a snapshot lives as long as a worker holds it.
//!
//! **Per interface.** One [`NeighborTable<Ipv4Addr, P>`](NeighborTable) (ARP) and one
//! `NeighborTable<Ipv6Addr, P>` (ND) per interface, each with its own bound (4096 entries by
//! default), counters, generation counter and publisher. `P` is whatever handle the
//! pipeline uses for a packet buffer; held packets come back to the caller to send or free.
//!
//! **What is not here.** No packets are parsed or built (the ARP and ND formats are in
//! `vfsr-wire`), nothing is sent, and routes are unknown to this crate: a failed resolution
//! marks the entry FAILED and drops its held packets, nothing more. Times are ticks the
//! caller supplies.
//!
//! ```
//! use std::net::Ipv4Addr;
//! use vfsr_neigh::{Event, Mac, NeighborConfig, NeighborTable, Solicit};
//!
//! let gw = Ipv4Addr::new(192, 0, 2, 1);
//! let mut arp: NeighborTable<Ipv4Addr, &str> = NeighborTable::new(NeighborConfig::default());
//! let worker = arp.reader();
//!
//! // A worker missed; the control plane resolves: the packet waits, an ARP request goes out.
//! let out = arp.resolve(gw, "pkt 1", 0);
//! assert_eq!(out.solicit, Some(Solicit::Multicast));
//!
//! // The ARP reply (solicited, override): the held packet leaves; the entry is published.
//! let mac = Mac([2, 0, 0, 0, 0, 1]);
//! let reply = Event::Advert { mac: Some(mac), solicited: true, override_flag: true };
//! let out = arp.apply(gw, reply, 3);
//! assert_eq!((out.mac, out.transmit), (Some(mac), vec!["pkt 1"]));
//! arp.publish();
//!
//! let snap = worker.load();
//! let e = snap.lookup(&gw).copied().unwrap();
//! assert_eq!(e.usable_mac(), Some(mac));
//! assert!(snap.is_current(e.id, e.gen)); // what a flow table checks later
//! ```
//!
//! Data-path crate: `std`, `arc-swap`, `hashbrown`, `rustc-hash` and `vfsr-wire` (for the
//! MAC type) only. Start reading at [`state`] (the machine and its table of advertisement
//! rules), then [`table`].
//!
//! **No input panics.** The crate denies `unwrap`, `panic!` and unchecked indexing.

#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::expect_used, clippy::unreachable, clippy::todo)]
#![warn(missing_docs)]

mod hash;
mod paged;
pub mod state;
pub mod table;

pub use state::{step, Actions, Event, Mac, Nud, QueueAction, Solicit, State, Tick, Timers};
pub use table::{
    NeighAddr, NeighCounters, NeighborCache, NeighborConfig, NeighborEntry, NeighborGuard,
    NeighborReader, NeighborSnapshot, NeighborTable, Outcome, DEFAULT_CAPACITY,
    DEFAULT_HOLD_CAPACITY,
};
