//! # vfsr-fwd: the forwarding pipeline
#![deny(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::expect_used, clippy::unreachable, clippy::todo)]
#![cfg_attr(
    test,
    allow(
        clippy::unwrap_used,
        clippy::panic,
        clippy::indexing_slicing,
        clippy::expect_used,
        clippy::unreachable
    )
)]

pub mod counters;
pub mod frag;
pub mod icmp_error;
pub mod packet;
pub mod port;
pub mod ratelimit;
pub mod stage;

pub use counters::{Counters, DropReason, Event, Outcome, PuntClass, SharedCounters};
pub use packet::{Batch, Packet, Verdict, DEFAULT_BUFFER};
