//! A neighbor that competes for the shared last-level cache while a benchmark runs: one thread
//! on another core reading random cache lines of a buffer far larger than the cache, as a
//! routing daemon's RIB walk or another tenant of the host would.
//!
//! On a router the control plane lives on core 0 beside the forwarding cores and shares their
//! L3; a lookup structure that needs much of the L3 slows down when that neighbor is busy,
//! one that lives in L2 does not. `vfsr lpm bench --neighbor-core N` and `vfsr fwd bench
//! --neighbor-core N` measure under that neighbor (`docs/bench/zen5.md`, "A neighbor on the
//! shared cache").
//!
//! The neighbor stops when its [`CacheLoad`] is dropped, so it never outlives the benchmark.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Independent chains of reads in flight at once (a core keeps many misses outstanding).
const CHAINS: usize = 16;

/// Reads between two looks at the stop flag.
const ROUND: u64 = 1 << 14;

/// What can keep the neighbor from starting.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The neighbor would share a core the benchmark runs on: it would compete for the core
    /// itself, not only for the cache.
    #[error("--neighbor-core {0}: the benchmark runs on that core; name another")]
    SameCore(usize),
    /// A buffer too small to leave the cache, or larger than the neighbor takes.
    #[error("--neighbor-mib {0}: must be in 64..=4096 (the buffer must miss the cache)")]
    Size(usize),
    /// The thread could not be pinned to its core.
    #[error("cache neighbor: {0}")]
    Pin(#[from] vfsr_cpu::CpuError),
    /// The thread could not be started, or ended before it said it had started.
    #[error("cache neighbor: the thread did not start: {0}")]
    Start(String),
}

/// Checks a neighbor's request before anything is built: its core must not be one of
/// `bench_cores`, its buffer within 64..=4096 MiB. [`CacheLoad::start`] checks the same.
pub(crate) fn check(core: usize, bench_cores: &[usize], mib: usize) -> Result<(), Error> {
    if bench_cores.contains(&core) {
        return Err(Error::SameCore(core));
    }
    if !(64..=4096).contains(&mib) {
        return Err(Error::Size(mib));
    }
    Ok(())
}

/// A running neighbor; dropping it stops and joins the thread.
pub(crate) struct CacheLoad {
    stop: Arc<AtomicBool>,
    reads: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
    core: usize,
    mib: usize,
    started: std::time::Instant,
}

impl CacheLoad {
    /// Starts the neighbor on `core` over a buffer of `mib` MiB, once the buffer is written
    /// (so that the benchmark does not time the page faults); `bench_cores` are the cores it
    /// must leave alone.
    pub(crate) fn start(
        core: usize,
        bench_cores: &[usize],
        mib: usize,
    ) -> Result<CacheLoad, Error> {
        check(core, bench_cores, mib)?;
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), vfsr_cpu::CpuError>>();
        let thread = {
            let (stop, reads) = (Arc::clone(&stop), Arc::clone(&reads));
            std::thread::Builder::new()
                .name("cache-neighbor".into())
                .spawn(move || {
                    if let Err(e) = vfsr_cpu::pin(core) {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                    let words = mib << 17; // 8-byte words
                    let buf: Vec<u64> = (0..words as u64).map(mix).collect();
                    let _ = ready_tx.send(Ok(()));
                    walk(&buf, &stop, &reads);
                })
                .map_err(|e| Error::Start(e.to_string()))?
        };
        // Made before the wait, so that an error joins the thread on its way out.
        let mut load = CacheLoad {
            stop,
            reads,
            thread: Some(thread),
            core,
            mib,
            started: std::time::Instant::now(),
        };
        match ready_rx.recv() {
            Ok(Ok(())) => {
                // The rate counts from the first read, not from the buffer's filling.
                load.started = std::time::Instant::now();
                Ok(load)
            }
            Ok(Err(e)) => Err(Error::Pin(e)),
            Err(_) => Err(Error::Start("it ended first".into())),
        }
    }

    /// Reads done so far.
    pub(crate) fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The core, the buffer's size and the reads per second so far, for reports.
    pub(crate) fn describe(&self) -> serde_json::Value {
        let s = self.started.elapsed().as_secs_f64();
        let rate = if s > 0.0 {
            self.reads() as f64 / s
        } else {
            0.0
        };
        serde_json::json!({"core": self.core, "mib": self.mib, "reads_per_s": rate.round()})
    }
}

/// The phrase a report's header gives the neighbor (`describe`'s value), empty without one.
pub(crate) fn summary(neighbor: Option<&serde_json::Value>) -> String {
    neighbor.map_or(String::new(), |d| {
        format!(
            "; a cache neighbor on core {} reading random lines of {} MiB, {:.1} M/s",
            d["core"],
            d["mib"],
            d["reads_per_s"].as_f64().unwrap_or(0.0) / 1e6
        )
    })
}

impl Drop for CacheLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A 64-bit mix (the finalizer of SplitMix64): the next line of a chain from the last value.
#[inline]
fn mix(x: u64) -> u64 {
    let x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The next word a chain reads, at step `i`, after reading `v`: a hash of both, scaled to
/// `0..n` by a multiply (no division). The step number keeps the chain from falling into a
/// cycle, as iterating a fixed function over the buffer's positions soon would (a cycle of
/// some thousands of words, which the cache holds); the read value keeps each read waiting
/// for the one before it.
#[inline]
fn next(v: u64, i: u64, n: u64) -> u64 {
    ((u128::from(mix(v ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15))) * u128::from(n)) >> 64) as u64
}

/// Reads random words of `buf` on [`CHAINS`] dependent chains until `stop` is set, counting
/// the reads in `reads`.
fn walk(buf: &[u64], stop: &AtomicBool, reads: &AtomicU64) {
    let n = buf.len() as u64;
    let mut at: [u64; CHAINS] = std::array::from_fn(|k| next(0, k as u64, n));
    let mut i = CHAINS as u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..ROUND / CHAINS as u64 {
            for a in at.iter_mut() {
                let v = buf.get(*a as usize).copied().unwrap_or(0);
                *a = next(v, i, n);
                i += 1;
            }
        }
        reads.fetch_add(ROUND, Ordering::Relaxed);
    }
    std::hint::black_box(at);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_the_benchmark_core_and_a_buffer_out_of_range() {
        assert!(matches!(
            CacheLoad::start(1, &[0, 1], 256),
            Err(Error::SameCore(1))
        ));
        assert!(matches!(CacheLoad::start(0, &[1], 8), Err(Error::Size(8))));
        assert!(matches!(
            CacheLoad::start(0, &[1], usize::MAX),
            Err(Error::Size(_))
        ));
    }

    #[test]
    fn refuses_a_core_it_cannot_take() {
        let core = libc::CPU_SETSIZE as usize + 5;
        assert!(matches!(
            CacheLoad::start(core, &[0], 64),
            Err(Error::Pin(vfsr_cpu::CpuError::CoreOutOfRange(_)))
        ));
    }

    #[test]
    fn a_chain_spreads_over_the_buffer() {
        let n = 1u64 << 23;
        let buf: Vec<u64> = (0..n).map(mix).collect();
        let mut seen = std::collections::HashSet::new();
        let mut a = next(0, 0, n);
        for i in 1..200_000u64 {
            assert!(a < n);
            seen.insert(a / 8); // the 64-byte line
            a = next(buf[a as usize], i, n);
        }
        // 200,000 draws from 2^20 lines: about 181,000 distinct if uniform; a chain caught
        // in a cycle would see a few thousand.
        assert!(seen.len() > 170_000, "{} lines", seen.len());
    }

    #[test]
    fn reads_until_dropped_and_then_stops() {
        let core = vfsr_cpu::default_bench_core();
        let load = CacheLoad::start(core, &[core + 1], 64).expect("neighbor starts");
        let t = std::time::Instant::now();
        while load.reads() == 0 && t.elapsed().as_secs() < 30 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(load.reads() > 0, "the neighbor read nothing");
        let stop = Arc::clone(&load.stop);
        let reads = Arc::clone(&load.reads);
        drop(load);
        assert!(stop.load(Ordering::Relaxed));
        let after = reads.load(Ordering::Relaxed);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(
            reads.load(Ordering::Relaxed),
            after,
            "it read after the drop"
        );
    }
}
