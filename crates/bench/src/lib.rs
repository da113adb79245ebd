//! # vfsr-bench: measuring vfsr against what users would run instead
//!
//! Benchmarks are commands that print figures (a readable table and JSON), never timed tests.
//! [`lpm`] is the harness of `vfsr lpm bench`; [`peers`] wraps the lookup structures users
//! would otherwise pick (Rust crates, and DPDK's `rte_lpm`/`rte_fib` with the `dpdk` feature)
//! behind vfsr's own [`vfsr_lpm::Lpm`] trait so that all are driven by the same loop.
//! [`check`] holds the targets a run is checked against, as the benchmarks print them.

pub mod check;
pub mod lpm;
pub mod peers;
pub mod stats;
