//! `vfsr`: the command-line front end.
//!
//! ```text
//! vfsr demo                         synthetic full table into every engine, lookups and speed
//! vfsr table gen                    write the synthetic full table as text
//! vfsr lookup --table FILE [ADDR]   answer lookups from a table (text, gzip or MRT)
//! vfsr lpm bench                    every engine and peer, one core, table + JSON
//! vfsr fib bench                    live FIB: load, update rates, readers under updates
//! vfsr fwd bench                    forwarding pipeline in memory: legacy, split, split+flow
//! vfsr replay --in A --out B        forward a pcap capture offline through the pipeline
//! vfsr soak                         vfsrd between namespaces for 30 min under route churn and
//!                                   traffic; memory, counters and FIB checked at the end
//! vfsr stress                       vfsrd under floods and faults between namespaces
//! ```

mod bench;
mod cacheload;
mod cpbench;
mod cpflood;
mod demo;
mod engines;
mod fibbench;
mod fpmbench;
mod fwdbench;
mod interrupt;
mod jsonfile;
mod livedemo;
mod lookup;
mod machine;
mod neighbench;
mod replay;
mod report;
mod soak;
mod stress;
mod tables;
mod vethbench;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "vfsr", version, about = "vfsr, a very fast software router")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// A live router: vfsrd between two namespaces learns the synthetic full table over BGP
    /// (FRR's zebra over FPM; from its config when FRR cannot run), then ping, traceroute and
    /// iperf3 go through it (or, with --offline or without root, the engines, the live FIB and
    /// the pipeline in memory).
    Demo(demo::DemoArgs),
    /// Route tables: generate.
    #[command(subcommand)]
    Table(TableCommand),
    /// Look addresses up in a table; prints address, matched prefix and next hop per line.
    Lookup(lookup::LookupArgs),
    /// Longest-prefix-match engines.
    #[command(subcommand)]
    Lpm(LpmCommand),
    /// The live FIB.
    #[command(subcommand)]
    Fib(FibCommand),
    /// The forwarding pipeline.
    #[command(subcommand)]
    Fwd(FwdCommand),
    /// Neighbor (ARP and ND) tables.
    #[command(subcommand)]
    Neigh(NeighCommand),
    /// Route intake from FRR's zebra (FPM).
    #[command(subcommand)]
    Fpm(FpmCommand),
    /// The control plane driven by BGP: full-table convergence, and under a forwarding flood.
    #[command(subcommand)]
    Cp(CpCommand),
    /// Forward a pcap capture offline through the pipeline; write what it sends to a pcap.
    Replay(replay::ReplayArgs),
    /// One self-contained HTML page with the papers' figures drawn from the benchmarks' JSON
    /// (the newest of each kind in --from; --run runs the benchmarks first, for minutes).
    Report(report::ReportArgs),
    /// vfsrd as a router between namespaces for --minutes under route churn over FPM and
    /// traffic; checks at the end that its resident memory stayed flat, its counters balance
    /// and its FIB equals the routes sent.
    Soak(soak::SoakArgs),
    /// vfsrd between namespaces under floods (ARP, ND, scans, new flows, echo, ICMP errors,
    /// malformed frames, every punt class) and faults (a starved worker, a link flap, the TAP
    /// deleted, an unwritable directory, SIGKILL): the legitimate flow's rate, the control
    /// plane's latency, memory and the drop counters beside each case.
    Stress(stress::StressArgs),
}

#[derive(Subcommand)]
enum FwdCommand {
    /// Mpps per worker for the legacy, split and split+flow designs on frames in memory.
    Bench(fwdbench::FwdBenchArgs),
}

#[derive(Subcommand)]
enum NeighCommand {
    /// The control plane's cost per neighbor created under a scan (publication included)
    /// and the workers' cost per lookup, per family and table capacity.
    Bench(neighbench::NeighBenchArgs),
}

#[derive(Subcommand)]
enum CpCommand {
    /// Full-table convergence: BGP through FRR into vfsr (FPM), into the kernel, and the
    /// kernel mirrored into vfsr; vfsrd's intake alone; memory per route.
    Bench(cpbench::CpBenchArgs),
    /// BGP, TCP to the router and route changes while a port is flooded, with and without
    /// the control plane's separation.
    Flood(cpflood::CpFloodArgs),
}

#[derive(Subcommand)]
enum FpmCommand {
    /// Routes per second vfsrd takes in from a recorded FPM stream of a whole table.
    Bench(fpmbench::FpmBenchArgs),
}

#[derive(Subcommand)]
enum FibCommand {
    /// Load time, single-route update rates, reader throughput under updates, update trace.
    Bench(fibbench::FibBenchArgs),
}

#[derive(Subcommand)]
enum TableCommand {
    /// Write the seedable synthetic full table (IPv4 and IPv6) as text.
    Gen(GenArgs),
}

#[derive(Args)]
struct GenArgs {
    /// Generator seed: the same seed always gives the same table.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of IPv4 prefixes (default: as many as the 2024 reference table).
    #[arg(long)]
    v4: Option<usize>,
    /// Number of IPv6 prefixes (default: as many as the 2024 reference table).
    #[arg(long)]
    v6: Option<usize>,
    /// Output file (default: standard output).
    #[arg(long, short)]
    out: Option<PathBuf>,
}

#[derive(Subcommand)]
enum LpmCommand {
    /// Benchmark every engine and peer on one core: Mlps, build time, memory, ratios.
    Bench(bench::BenchArgs),
}

/// The heap is mimalloc's, as in vfsrd (see the note there): the live FIBs and RIBs the
/// benchmarks build are the router's own, on the router's heap.
#[global_allocator]
static HEAP: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The status a shell gives a process that SIGPIPE ended (128 + 13).
const BROKEN_PIPE_STATUS: i32 = 141;

/// Output piped into a reader that stopped early (`vfsr neigh bench | head -3`) ends the
/// run quietly, as it would end any Unix filter. The print macros the reports use panic when
/// standard output is a closed pipe (Rust ignores SIGPIPE); this hook turns that one panic
/// into an exit with SIGPIPE's status and leaves every other panic to the default hook.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map_or("", String::as_str);
        if msg.starts_with("failed printing to stdout") && msg.contains("os error 32") {
            std::process::exit(BROKEN_PIPE_STATUS);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    vfsr_cpu::exit_unless_built_for_this_cpu("vfsr");
    quiet_on_broken_pipe();
    let cli = Cli::parse();
    let r: Result<(), Box<dyn std::error::Error>> = match cli.command {
        Command::Demo(a) => demo::run(&a).map_err(Box::from),
        Command::Table(TableCommand::Gen(a)) => {
            tables::generate(a.seed, a.v4, a.v6, a.out).map_err(Box::from)
        }
        Command::Lookup(a) => lookup::run(&a).map_err(Box::from),
        Command::Lpm(LpmCommand::Bench(a)) => bench::run(&a).map_err(Box::from),
        Command::Fib(FibCommand::Bench(a)) => fibbench::run(&a).map_err(Box::from),
        Command::Fwd(FwdCommand::Bench(a)) => fwdbench::run(&a).map_err(Box::from),
        Command::Neigh(NeighCommand::Bench(a)) => neighbench::run(&a).map_err(Box::from),
        Command::Replay(a) => replay::run(&a).map_err(Box::from),
        Command::Fpm(FpmCommand::Bench(a)) => fpmbench::run(&a).map_err(Box::from),
        Command::Cp(CpCommand::Bench(a)) => cpbench::run(&a).map_err(Box::from),
        Command::Cp(CpCommand::Flood(a)) => cpflood::run(&a).map_err(Box::from),
        Command::Report(a) => report::run(&a).map_err(Box::from),
        Command::Soak(a) => soak::run(&a).map_err(Box::from),
        Command::Stress(a) => stress::run(&a).map_err(Box::from),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vfsr: {e}");
            ExitCode::FAILURE
        }
    }
}
