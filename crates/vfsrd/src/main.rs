//! `vfsrd`: the router daemon.
//!
//! ```text
//! vfsrd --config FILE [--stats FILE]   run the router (SIGHUP: reload FILE; SIGUSR1: FIB dump)
//! vfsrd --check-config FILE            check a configuration and say what is wrong
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use vfsr_lpm::lctrie::LcTrie;
use vfsr_lpm::poptrie::{Poptrie, Vector};
use vfsr_lpm::radix::Radix;
use vfsrd::config::{self, Plan};
use vfsrd::error::Error;
use vfsrd::runtime::{run, PortIo, RunOptions, Summary};

/// vfsr's router daemon: forwards between the configured interfaces with pinned workers,
/// the control plane on its own core.
#[derive(Parser)]
#[command(name = "vfsrd", version)]
struct Cli {
    /// The configuration file (TOML).
    #[arg(
        long,
        short = 'c',
        value_name = "FILE",
        conflicts_with = "check_config"
    )]
    config: Option<PathBuf>,
    /// Check FILE and exit: 0 if it is usable, 1 with every error otherwise.
    #[arg(long, value_name = "FILE")]
    check_config: Option<PathBuf>,
    /// Rewrite FILE every second with the counters as JSON.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
    /// On SIGUSR1, write the FIB as text to FILE (one line per prefix).
    #[arg(long, value_name = "FILE")]
    fib_dump: Option<PathBuf>,
    /// Log level: error, warn, info, debug or trace (`VFSR_LOG`, a tracing filter, wins).
    #[arg(long, value_name = "LEVEL", default_value = "info")]
    log_level: String,
}

static STOP: AtomicBool = AtomicBool::new(false);
static DUMP: AtomicBool = AtomicBool::new(false);
static RELOAD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

extern "C" fn on_dump(_: libc::c_int) {
    DUMP.store(true, Ordering::Relaxed);
}

extern "C" fn on_reload(_: libc::c_int) {
    RELOAD.store(true, Ordering::Relaxed);
}

fn install_signals() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
    // SAFETY: as above.
    unsafe {
        libc::signal(libc::SIGUSR1, on_dump as *const () as libc::sighandler_t);
        libc::signal(libc::SIGHUP, on_reload as *const () as libc::sighandler_t);
    }
}

fn load(path: &PathBuf) -> Result<Plan, Error> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::os(path.display().to_string(), e))?;
    config::parse(&text, Some(&vfsr_cpu::usable_cores())).map_err(|errors| Error::Config {
        file: path.display().to_string(),
        errors,
    })
}

fn run_engines(plan: &Plan, ports: Vec<PortIo>, opts: &RunOptions) -> Result<Summary, Error> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let dump = Arc::clone(&opts.dump);
    let reload = Arc::clone(&opts.reload);
    std::thread::spawn(move || loop {
        if STOP.load(Ordering::Relaxed) {
            s.store(true, Ordering::Relaxed);
            return;
        }
        if DUMP.swap(false, Ordering::Relaxed) {
            dump.store(true, Ordering::Relaxed);
        }
        if RELOAD.swap(false, Ordering::Relaxed) {
            reload.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(20));
    });
    let mut ready = |i: &vfsrd::router::Installed| {
        println!(
            "vfsrd: ready: {} interface(s), {} worker(s) on cores {:?}, control on core {}; \
             {} IPv4 and {} IPv6 routes ({}) built in {} ms",
            plan.interfaces.len(),
            plan.workers.len(),
            plan.workers,
            plan.control_core,
            i.routes4,
            i.routes6,
            i.table.as_deref().unwrap_or("static routes"),
            i.build_ms
        );
    };
    macro_rules! go {
        ($e4:ty, $e6:ty) => {
            run::<$e4, $e6>(plan, ports, opts, stop, &mut ready)
        };
    }
    macro_rules! v6 {
        ($e4:ty) => {
            match plan.fib6.as_str() {
                "lctrie" => go!($e4, LcTrie<u128>),
                "radix" => go!($e4, Radix<u128>),
                _ => go!($e4, Poptrie<u128>),
            }
        };
    }
    // Set before any trie is built; tries rebuilt later keep what they started with.
    let used = Vector::prefer(plan.lookup);
    if plan.fib4 == "poptrie" || plan.fib6 == "poptrie" {
        match plan.lookup {
            Some(v) if !v.available() => println!(
                "vfsrd: router.lookup = {:?}: this CPU cannot run it; Poptrie uses its {used} bulk lookup",
                v.name(),
            ),
            _ => println!("vfsrd: Poptrie uses its {used} bulk lookup"),
        }
    }
    match plan.fib4.as_str() {
        "lctrie" => v6!(LcTrie<u32>),
        "radix" => v6!(Radix<u32>),
        _ => v6!(Poptrie<u32>),
    }
}

/// The heap is mimalloc's. Its large regions are 2 MiB aligned and advised for transparent
/// huge pages, which the system allocator's heap is not, and the route maps behind the live
/// FIBs are hundreds of thousands of small nodes that every route change reaches in random
/// order: on 4 KiB pages most such reads also miss the TLB. The lookup engines' arrays land on
/// huge pages too. `docs/bench/core.md` has the same-run comparison with the system allocator.
#[global_allocator]
static HEAP: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    vfsr_cpu::exit_unless_built_for_this_cpu("vfsrd");
    let cli = Cli::parse();
    if let Some(path) = &cli.check_config {
        return match load(path) {
            Ok(p) => {
                println!(
                    "{}: ok: {} interface(s), {} worker(s), {} static route(s){}",
                    path.display(),
                    p.interfaces.len(),
                    p.workers.len(),
                    p.routes.len(),
                    if p.table.is_some() { ", a table" } else { "" }
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("vfsrd: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let Some(path) = &cli.config else {
        eprintln!("vfsrd: give --config FILE (or --check-config FILE); see --help");
        return ExitCode::from(2);
    };
    let plan = match load(path) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("vfsrd: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = vfsrd::logging::init(&cli.log_level) {
        eprintln!("vfsrd: {e}");
        return ExitCode::from(2);
    }
    install_signals();
    let ports = match vfsrd::sys::open_ports(&plan) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("vfsrd: {e}");
            return ExitCode::FAILURE;
        }
    };
    let opts = RunOptions {
        stats: cli.stats.clone(),
        fib_dump: cli.fib_dump.clone(),
        config: Some(path.clone()),
        ..RunOptions::default()
    };
    match run_engines(&plan, ports, &opts) {
        Ok(s) => {
            println!(
                "vfsrd: stopped: {} received, {} forwarded, {} dropped, {} punted; \
                 control: {} echo replies, {} ARP/NS answered, {} to the host",
                s.counters.rx(),
                s.counters.outcome(vfsr_fwd::Outcome::Forwarded),
                s.counters.outcome(vfsr_fwd::Outcome::Dropped),
                s.counters.outcome(vfsr_fwd::Outcome::Punted),
                s.control.echo_replies,
                s.control.arp_answered + s.control.ns_answered,
                s.control.to_host
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("vfsrd: {e}");
            ExitCode::FAILURE
        }
    }
}
