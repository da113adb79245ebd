//! Where a worker's cycles go, stage by stage: TSC timestamps around each pass or stage of
//! a batch, summed over many batches.
//!
//! These are **time-stamp counter reads per batch stage**, not hardware performance
//! counters: the worker reads the TSC (`rdtsc`) once at the start of a batch and once after
//! each stage has run over the whole batch, and adds each difference to that stage's total.
//! One read costs some tens of cycles, a batch takes seven of them, so over a batch of 32
//! packets the profile adds a few cycles per packet; the stages' sum equals the time spent
//! in [`Worker::process`](crate::Worker::process) (the reads between stages are counted in
//! the stage that follows them).
//!
//! ```text
//!   rdtsc ─ rx ─ rdtsc ─ input ─ rdtsc ─ flow ─ rdtsc ─ fib ─ rdtsc ─ next hop ─ rdtsc ─ …
//!          └─ cycles[Rx] += t1 - t0      └─ cycles[Flow] += t3 - t2
//! ```
//!
//! Pass 3 (next hop and ECMP, neighbor, MTU, rewrite) runs per packet, each packet through
//! all four before the next, so it is one stage here: timing its parts apart over whole
//! batches would need four passes over the batch, which measured slower than one.
//!
//! A worker profiles only when asked ([`Worker::enable_profile`](crate::Worker::enable_profile));
//! otherwise its profile is `None` and each stage boundary costs one predictable branch.
//! The TSC ticks at a constant rate (`constant_tsc`), which on most machines is the nominal
//! clock, not the boosted one: a "cycle" here is a TSC tick.

/// The stages a batch goes through, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Stage {
    /// Batch set-up: verdicts cleared, snapshots and port epochs loaded, headers prefetched.
    Rx,
    /// Pass 1: Ethernet and IP input, classification, TTL; with a flow table, the flow keys
    /// made and hashed and their buckets asked for.
    Input,
    /// Pass 2a: flow table looked up and entries checked.
    Flow,
    /// Pass 2b: the FIB's bulk lookups for what the flow table did not answer.
    Fib,
    /// Pass 3, per packet: next hop and ECMP member, neighbor (ARP/ND) and flow-table
    /// insertion for what the flow table did not answer; then egress MTU, TTL/hop limit,
    /// checksum and MAC rewrite, verdicts.
    Output,
    /// After the batch: flow-table garbage collection, counters published.
    Counters,
}

impl Stage {
    /// Every stage, in order.
    pub const ALL: [Stage; 6] = [
        Stage::Rx,
        Stage::Input,
        Stage::Flow,
        Stage::Fib,
        Stage::Output,
        Stage::Counters,
    ];

    /// A short name (JSON keys, table columns).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Rx => "rx",
            Stage::Input => "input",
            Stage::Flow => "flow",
            Stage::Fib => "fib",
            Stage::Output => "output",
            Stage::Counters => "counters",
        }
    }

    /// What the stage does.
    pub fn text(self) -> &'static str {
        match self {
            Stage::Rx => "rx bookkeeping (verdicts, snapshots, epochs, prefetch)",
            Stage::Input => "input + classify + TTL (+ flow key and hash)",
            Stage::Flow => "flow lookup",
            Stage::Fib => "FIB bulk lookup",
            Stage::Output => "next hop/ECMP + neighbor + MTU + rewrite",
            Stage::Counters => "counters / flow gc",
        }
    }
}

/// TSC ticks per stage, summed over the batches profiled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    /// Ticks per stage, indexed by `Stage as usize`.
    pub cycles: [u64; Stage::ALL.len()],
    /// Packets in the batches profiled.
    pub packets: u64,
    /// Batches profiled.
    pub batches: u64,
}

impl Profile {
    /// Ticks spent in `stage`.
    pub fn get(&self, stage: Stage) -> u64 {
        self.cycles.get(stage as usize).copied().unwrap_or(0)
    }

    /// Ticks spent in all stages.
    pub fn total(&self) -> u64 {
        self.cycles.iter().sum()
    }

    /// Ticks per packet in `stage` (0 before any packet).
    pub fn per_packet(&self, stage: Stage) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.get(stage) as f64 / self.packets as f64
        }
    }

    /// Adds another profile's ticks and packets (workers of one run).
    pub fn add(&mut self, other: &Profile) {
        for (a, b) in self.cycles.iter_mut().zip(other.cycles.iter()) {
            *a += b;
        }
        self.packets += other.packets;
        self.batches += other.batches;
    }

    /// Forgets everything measured so far (after a warm-up).
    pub fn reset(&mut self) {
        *self = Profile::default();
    }
}

/// A profile being taken over one batch: the last timestamp and where it goes.
pub(crate) struct Clock {
    last: u64,
}

impl Clock {
    /// Starts timing a batch.
    #[inline(always)]
    pub(crate) fn start() -> Clock {
        Clock { last: rdtsc() }
    }

    /// Ends `stage`: the ticks since the previous mark go to it.
    #[inline(always)]
    pub(crate) fn mark(&mut self, profile: &mut Profile, stage: Stage) {
        let now = rdtsc();
        if let Some(c) = profile.cycles.get_mut(stage as usize) {
            *c += now.wrapping_sub(self.last);
        }
        self.last = now;
    }
}

/// The clock the profile reads (one definition for every crate).
pub use vfsr_cpu::rdtsc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_add_up_to_the_span() {
        let mut p = Profile::default();
        let t0 = rdtsc();
        let mut c = Clock::start();
        for s in Stage::ALL {
            c.mark(&mut p, s);
        }
        let t1 = rdtsc();
        p.packets = 4;
        assert!(p.total() <= t1.wrapping_sub(t0));
        let mut q = p.clone();
        q.add(&p);
        assert_eq!(q.total(), 2 * p.total());
        assert_eq!(q.packets, 8);
        assert_eq!(Stage::ALL.len(), 6);
        assert_eq!(Stage::Fib.name(), "fib");
        q.reset();
        assert_eq!(q.total(), 0);
        assert_eq!(q.per_packet(Stage::Rx), 0.0);
    }
}
