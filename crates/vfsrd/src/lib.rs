//! vfsrd, the router daemon: opens the configured interfaces, runs one forwarding worker
//! per configured core and the control plane on its own core.

pub mod api;
pub mod config;
pub mod control;
pub mod daemons;
pub mod dataplane;
pub mod dump;
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
