//! The update trace of `vfsr fib bench`, phase by phase, through a live Poptrie FIB with no
//! reader: changes per second of each phase over repeated passes (min / median / max), so
//! that a change to the update path can be timed in rounds against another build, and counted
//! under callgrind.
//!
//! ```text
//! cargo run --release -p vfsr-fib --example trace_phases -- [passes] [v4|v6|v4,v6]
//! PHASE=withdraw valgrind --tool=callgrind --collect-atstart=no \
//!     --toggle-collect='*measured_phase*' target/release/examples/trace_phases 1 v6
//! ```
//!
//! Each pass runs the withdraw, announce, reset-withdraw and reset-announce phases, which
//! bring the table back to where it started (the trace's change phase would not, and is left
//! out). With `PHASE` set, only that phase runs in `measured_phase`, the one function to
//! collect. The table is the reference one in `../shared/data` when present, else the
//! synthetic one. The allocator is the one the vfsr and vfsrd binaries use (mimalloc), whose
//! large regions sit on huge pages; the route map's B-tree nodes come from it.

use std::time::Instant;

use vfsr_fib::{LiveFib, Publish};
use vfsr_lpm::poptrie::{Poptrie, PoptrieConfig};
use vfsr_lpm::{Key, Route, RouteMap};
use vfsr_table::trace;

type Fib<K> = LiveFib<K, Poptrie<K>>;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Applies one phase as `vfsr fib bench` does ([`LiveFib::apply_changes`], batched). A
/// refused change or publication ends the program, saying why.
fn apply<K: Key>(fib: &mut Fib<K>, changes: &[Route<K>]) {
    if let Err(e) = fib.apply_changes(changes, Publish::Batched) {
        eprintln!("trace_phases: {e}");
        std::process::exit(1);
    }
}

/// The phase to measure (see the module doc). The `black_box` keeps the linker from folding
/// it into an identical function, which would leave callgrind no symbol of this name.
#[inline(never)]
fn measured_phase<K: Key>(fib: &mut Fib<K>, changes: &[Route<K>]) {
    apply(fib, std::hint::black_box(changes));
}

fn run<K: Key>(routes: &[Route<K>], per_phase: usize, passes: usize, only: &str) {
    let mut fib = match Fib::<K>::new(routes, PoptrieConfig::for_family::<K>()) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("trace_phases: {e}");
            std::process::exit(1);
        }
    };
    let phases: Vec<_> = trace::trace(&RouteMap::from_routes(routes).to_routes(), per_phase, 1)
        .into_iter()
        .filter(|p| p.name != "change")
        .collect();
    let mut rates = vec![Vec::new(); phases.len()];
    for _ in 0..passes {
        for (p, r) in phases.iter().zip(rates.iter_mut()) {
            let t = Instant::now();
            if only.is_empty() || only == p.name {
                measured_phase(&mut fib, &p.changes);
            } else {
                apply(&mut fib, &p.changes);
            }
            r.push(p.changes.len() as f64 / t.elapsed().as_secs_f64() / 1e6);
        }
    }
    for (p, r) in phases.iter().zip(rates.iter_mut()) {
        r.sort_by(f64::total_cmp);
        let (lo, med, hi) = (r[0], r[r.len() / 2], r[r.len() - 1]);
        println!(
            "{} {:<15} {:>6} changes  min {lo:.3} med {med:.3} max {hi:.3} M changes/s",
            K::FAMILY,
            p.name,
            p.changes.len()
        );
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let passes = match args.next().map(|s| s.parse::<usize>()) {
        None => 5,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("trace_phases: the first argument is a number of passes (1 or more)");
            std::process::exit(2);
        }
    };
    let families = args.next().unwrap_or_else(|| "v4,v6".into());
    let only = std::env::var("PHASE").unwrap_or_default();
    let (table, source) = match vfsr_table::load_default_table(1) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("trace_phases: {e}");
            std::process::exit(1);
        }
    };
    eprintln!("trace_phases: {source}");
    // The trace sizes of `vfsr fib bench` at its default 100,000 updates.
    if families.contains("v4") {
        run(&table.v4, 100_000, passes, &only);
    }
    if families.contains("v6") {
        run(&table.v6, 25_000, passes, &only);
    }
}
