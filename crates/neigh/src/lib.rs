//! # vfsr-neigh: per-interface neighbor tables (ARP and ND)
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
#![warn(missing_docs)]

pub mod state;
pub mod table;

pub use state::{step, Actions, Event, Mac, Nud, QueueAction, Solicit, State, Tick, Timers};
pub use table::{
    NeighAddr, NeighCounters, NeighborConfig, NeighborEntry, NeighborGuard, NeighborReader,
    NeighborSnapshot, NeighborTable, Outcome, DEFAULT_CAPACITY, DEFAULT_HOLD_CAPACITY,
};
