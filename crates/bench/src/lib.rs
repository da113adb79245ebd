//! Benchmarks.

pub mod peers;
