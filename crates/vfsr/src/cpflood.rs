//! `vfsr cp flood`: the control plane's responsiveness while a port is flooded.

use clap::Args;

/// `vfsr cp flood` arguments.
#[derive(Args)]
pub struct CpFloodArgs {
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// Runs the experiment.
pub fn run(a: &CpFloodArgs) -> Result<(), String> {
    let _ = &a.json;
    Err("vfsr cp flood: not built yet".into())
}
