//! `vfsr cp bench`: full-table BGP convergence through FRR into vfsr and into the kernel.

use clap::Args;

/// `vfsr cp bench` arguments.
#[derive(Args)]
pub struct CpBenchArgs {
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// Runs the benchmark.
pub fn run(a: &CpBenchArgs) -> Result<(), String> {
    let _ = &a.json;
    Err("vfsr cp bench: not built yet".into())
}
