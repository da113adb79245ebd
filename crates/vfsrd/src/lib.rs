//! vfsrd, the router daemon: opens the configured interfaces, runs one forwarding worker
//! per configured core and the control plane on its own core.
//!
//! **No input panics.** Frames, route messages, API requests and config files come from
//! outside: the crate denies `unwrap`, `panic!` and unchecked indexing outside tests (the
//! test harness in [`daemons`] excepted), and reads packet headers through `vfsr-wire`'s
//! checked views.
#![deny(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::expect_used, clippy::unreachable, clippy::todo)]

pub mod api;
pub mod config;
pub mod control;
pub mod daemons;
pub mod dataplane;
pub mod dump;
pub mod error;
pub mod fastpath;
pub mod harness;
pub mod link;
pub mod logging;
pub mod metrics;
pub mod netlab;
pub mod reload;
pub mod router;
pub mod runtime;
pub mod service;
pub mod sources;
pub mod spread;
pub mod sys;
pub mod tap;
