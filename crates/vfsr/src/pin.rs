//! Pinning the calling thread to one core, so that a benchmark measures one core's work: the
//! names the benchmarks use for [`vfsr_cpu`]'s pinning.

pub use vfsr_cpu::{default_bench_core, pin as pin_to_core};
