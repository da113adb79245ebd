//! # vfsr-router: the router's control-side state
//!
//! Everything the control plane owns and the workers only read through published
//! snapshots: the ports with their neighbor tables ([`port`]), and the route table every
//! route goes through ([`router`]): the RIB of `vfsr-rib`, whose next-hop table is the one
//! next-hop authority, compiled into the live FIBs. Route sources feed it:
//!
//! ```text
//!   [[interface]] addresses ──▶ connected ─┐
//!   [[route]]               ──▶ static    ─┤
//!   [table]                 ──▶ table     ─┼─▶ Router (RIB ─▶ FIBs, next hops) ─▶ workers
//!   rtnetlink (kernel.rs)   ──▶ kernel    ─┤
//!   zebra FPM (fpm.rs)      ──▶ fpm       ─┘
//! ```
//!
//! [`translate`] turns a netlink route (both dynamic sources speak netlink) into RIB routes;
//! [`fpm::FpmSession`] and [`kernel::KernelMirror`] keep each source's state: its next-hop
//! objects, its epochs for resynchronisation (mark and sweep), its stale timer, its
//! counters. They are plain state machines fed with decoded messages (`vfsr-netlink`);
//! the daemon owns the sockets.
//!
//! Start reading at [`router::Router`], then [`translate`], then [`fpm`].

#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::expect_used, clippy::unreachable, clippy::todo)]

pub mod fpm;
pub mod kernel;
pub mod port;
pub mod router;
mod source;
pub mod translate;

pub use port::{PortSpec, PortTables};
pub use router::{Router, RouterConfig, RouterError};
pub use translate::{IfMap, Skip, SourceCounters};
pub use vfsr_rib::{Forward, IpPrefix, RibRoute, Source};
