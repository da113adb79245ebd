//! # vfsr-fib: the live FIB the forwarding path reads
//!
//! Data-path crate: it depends on the lookup engines only, never on control-plane code.

pub mod nexthop;
