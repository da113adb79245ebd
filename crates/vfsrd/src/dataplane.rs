//! A forwarding worker's loop: receive a batch from each of its queues, run it through the
//! pipeline, send the results, hand punts and unresolved packets to the control plane.
//!
//! Polling is adaptive, as NAPI does: while batches come in the worker keeps polling (no
//! system call while frames wait in the rings); after `busy_poll` without a frame it
//! flushes its transmit queues and sleeps in `poll(2)` on its queues' descriptors until a
//! frame arrives (or 100 ms pass, to notice a stop request). A full ring under overload is
//! not a problem of this loop: every batch is bounded, so the worker always finishes its
//! round and the kernel drops the excess at the ring, where it is counted.
//!
//! Punts are rate-limited here per class before they reach the control plane's queue, and
//! the control plane is woken once per batch that had any.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vfsr_fwd::ratelimit::TokenBucket;
use vfsr_fwd::{Batch, DropReason, Outcome, Packet, PuntClass, Verdict, Worker};
use vfsr_io::{Backend, IoStats};
use vfsr_lpm::LpmUpdate;

use crate::config::PuntSection;
use crate::fastpath::{FastInstaller, InstallCounters};
use crate::link::{ToControl, Wake};

/// How long an idle worker sleeps in `poll` at most.
const IDLE_POLL_MS: i32 = 100;
/// Packets kept for reuse.
const POOL: usize = 1024;

/// What a worker publishes for the stats file.
#[derive(Default)]
pub struct WorkerStats {
    /// Per-queue I/O counters, refreshed every few hundred batches and when idle.
    pub io: Mutex<Vec<(String, IoStats)>>,
    /// Punts lost to the per-class limits or a full control queue.
    pub punts_limited: AtomicU64,
    /// Batches processed.
    pub batches: AtomicU64,
    /// Times the worker went to sleep in `poll`.
    pub sleeps: AtomicU64,
    /// What the worker's XDP fast-path installers did, over every port.
    pub fast: Mutex<InstallCounters>,
    /// Drops by ingress port (pipeline index - 1) and reason ([`DropReason::index`]).
    pub port_drops: Mutex<Vec<[u64; DropReason::COUNT]>>,
    /// The flow table's counters and entries stored, when the worker has one.
    pub flow: Mutex<Option<(vfsr_flow::FlowCounters, usize)>>,
}

/// The per-class punt rates every worker limits by, changed by a reload: each worker reads
/// the generation once per round and rebuilds its buckets when it moved.
#[derive(Default)]
pub struct PuntRates {
    generation: AtomicU64,
    rates: [AtomicU64; PuntClass::COUNT],
}

impl PuntRates {
    /// Rates from a `[punt]` section.
    pub fn new(punt: &PuntSection) -> Arc<PuntRates> {
        let r = Arc::new(PuntRates::default());
        r.set(punt);
        r
    }

    /// New rates; workers take them at their next round.
    pub fn set(&self, punt: &PuntSection) {
        for (k, slot) in self.rates.iter().enumerate() {
            slot.store(u64::from(rate_of(punt, k)), Ordering::Relaxed);
        }
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn buckets(&self) -> [TokenBucket; PuntClass::COUNT] {
        std::array::from_fn(|k| {
            let rate = self
                .rates
                .get(k)
                .map_or(0, |r| r.load(Ordering::Relaxed))
                .min(u64::from(u32::MAX)) as u32;
            bucket_of(rate)
        })
    }
}

/// The burst a punt class's bucket holds at `rate` per second (the workers', the control
/// plane's and the XDP programs'): a tenth of a second's worth, at least 16.
pub fn burst_of(rate: u32) -> u32 {
    (rate / 10).max(16)
}

/// A bucket of `rate` per second with [`burst_of`] its burst: every punt class's, and each
/// port's solicitations.
pub fn bucket_of(rate: u32) -> TokenBucket {
    TokenBucket::new(rate, burst_of(rate))
}

/// The `[punt]` rate of class `k` ([`PuntClass::index`]).
pub fn rate_of(punt: &PuntSection, k: usize) -> u32 {
    match PuntClass::ALL.get(k) {
        Some(PuntClass::ArpNd) => punt.arp_nd,
        Some(PuntClass::Routing) => punt.routing,
        Some(PuntClass::Icmp) => punt.icmp,
        Some(PuntClass::Local) => punt.local,
        Some(PuntClass::SlowPath) | None => punt.slow_path,
    }
}

/// One worker and its queues.
pub struct WorkerLoop<E4, E6> {
    /// The pipeline.
    pub worker: Worker<E4, E6>,
    /// This worker's queue on each port, by pipeline index - 1 (`None`: no queue there;
    /// packets for that port are counted as transmit drops).
    pub queues: Vec<Option<Box<dyn Backend>>>,
    /// To the control plane.
    pub to_control: SyncSender<ToControl>,
    /// Wakes the control plane.
    pub wake: Arc<Wake>,
    /// Spin this long on empty queues before sleeping.
    pub busy_poll: Duration,
    /// Packets per receive call.
    pub batch: usize,
    /// Published counters.
    pub stats: Arc<WorkerStats>,
    limits: [TokenBucket; PuntClass::COUNT],
    rates: Arc<PuntRates>,
    rates_seen: u64,
    /// Drops by ingress port, and the worker's drop counters when last attributed.
    port_drops: Vec<[u64; DropReason::COUNT]>,
    drops_seen: [u64; DropReason::COUNT],
    dropped_seen: u64,
    pool: Vec<Packet>,
    start: Instant,
    tx_unrouted: u64,
    /// The XDP fast path's installer for each ingress port (by pipeline index - 1).
    fast: Vec<Option<FastInstaller>>,
}

impl<E4, E6> WorkerLoop<E4, E6>
where
    E4: LpmUpdate<u32>,
    E6: LpmUpdate<u128>,
{
    /// A loop over `queues`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        worker: Worker<E4, E6>,
        queues: Vec<Option<Box<dyn Backend>>>,
        to_control: SyncSender<ToControl>,
        wake: Arc<Wake>,
        rates: Arc<PuntRates>,
        busy_poll: Duration,
        batch: usize,
        stats: Arc<WorkerStats>,
    ) -> Self {
        let rates_seen = rates.generation.load(Ordering::Acquire);
        let limits = rates.buckets();
        let ports = queues.len();
        WorkerLoop {
            worker,
            queues,
            to_control,
            wake,
            busy_poll,
            batch: batch.max(1),
            stats,
            limits,
            rates,
            rates_seen,
            port_drops: vec![[0; DropReason::COUNT]; ports],
            drops_seen: [0; DropReason::COUNT],
            dropped_seen: 0,
            pool: Vec::with_capacity(POOL),
            start: Instant::now(),
            tx_unrouted: 0,
            fast: Vec::new(),
        }
    }

    /// Gives the loop an installer per ingress port (see [`crate::fastpath`]).
    pub fn set_fast_path(&mut self, fast: Vec<Option<FastInstaller>>) {
        self.fast = fast;
    }

    /// Runs until `stop` is set, then flushes the transmit queues.
    pub fn run(&mut self, stop: &AtomicBool) {
        let mut batch = Batch::new();
        let mut last_work = Instant::now();
        let mut rounds: u64 = 0;
        while !stop.load(Ordering::Relaxed) {
            let n = self.round(&mut batch);
            rounds += 1;
            if n > 0 {
                last_work = Instant::now();
                if rounds.is_multiple_of(512) {
                    self.publish();
                }
                continue;
            }
            if last_work.elapsed() < self.busy_poll {
                std::hint::spin_loop();
                continue;
            }
            self.flush();
            self.worker.flush_counters();
            self.publish();
            self.sleep();
            last_work = Instant::now();
        }
        self.flush();
        self.worker.flush_counters();
        self.publish();
    }

    /// Receives and forwards one batch from each queue; returns the frames received.
    pub fn round(&mut self, batch: &mut Batch) -> usize {
        let gen = self.rates.generation.load(Ordering::Acquire);
        if gen != self.rates_seen {
            self.rates_seen = gen;
            self.limits = self.rates.buckets();
        }
        let mut total = 0;
        for q in 0..self.queues.len() {
            batch.packets.clear();
            batch.verdicts.clear();
            let got = match self.queues.get_mut(q).and_then(|b| b.as_mut()) {
                Some(b) => b
                    .recv(&mut batch.packets, self.batch, &mut self.pool)
                    .unwrap_or(0),
                None => 0,
            };
            if got == 0 {
                continue;
            }
            total += got;
            // Backends stamp the kernel's interface index; the pipeline numbers ports
            // itself.
            let iif = q as u32 + 1;
            for p in &mut batch.packets {
                p.iif = iif;
            }
            // The fast path's generation is read before the pipeline loads its snapshots,
            // so what this batch installs is never newer than what it was decided from.
            let gen = self
                .fast
                .get(q)
                .and_then(Option::as_ref)
                .map(FastInstaller::generation);
            let now = self.start.elapsed().as_nanos() as u64;
            self.worker.process(batch, now);
            self.attribute_drops(q);
            if let (Some(f), Some(gen)) = (self.fast.get_mut(q).and_then(|f| f.as_mut()), gen) {
                if !batch.offload.is_empty() {
                    f.install(batch, gen, now);
                }
            }
            self.dispatch(batch, now);
        }
        if total > 0 {
            self.stats.batches.fetch_add(1, Ordering::Relaxed);
        }
        total
    }

    fn dispatch(&mut self, batch: &mut Batch, now: u64) {
        // Transmit: one send per egress port that has packets (ports are 1..=64).
        let bit = |oif: u32| match oif {
            1..=64 => 1u64 << (oif - 1),
            _ => 0,
        };
        let mut mask: u64 = 0;
        for (p, v) in batch.packets.iter().zip(&batch.verdicts) {
            if let Verdict::Forward { oif } = v {
                mask |= bit(*oif);
                if bit(*oif) == 0 || bit(p.oif) == 0 {
                    self.tx_unrouted += 1;
                }
            }
        }
        for p in &batch.generated {
            mask |= bit(p.oif);
        }
        while mask != 0 {
            let oif = mask.trailing_zeros() + 1;
            mask &= mask - 1;
            let mut frames = batch
                .packets
                .iter()
                .zip(&batch.verdicts)
                .filter(|(_, v)| matches!(v, Verdict::Forward { oif: o } if *o == oif))
                .map(|(p, _)| p.frame())
                .chain(
                    batch
                        .generated
                        .iter()
                        .filter(|p| p.oif == oif)
                        .map(|p| p.frame()),
                );
            match self
                .queues
                .get_mut(oif as usize - 1)
                .and_then(|q| q.as_mut())
            {
                Some(q) => {
                    let _ = q.send(&mut frames);
                }
                None => self.tx_unrouted += frames.count() as u64,
            }
        }
        let generated = std::mem::take(&mut batch.generated);
        self.worker.recycle(generated);

        // Punts and holds go to the control plane; the rest of the buffers are reused.
        let mut woke = false;
        for (p, v) in batch.packets.drain(..).zip(batch.verdicts.drain(..)) {
            let msg = match v {
                Verdict::Punt(class) => {
                    let ok = self
                        .limits
                        .get_mut(class.index())
                        .is_some_and(|b| b.allow(now));
                    if !ok {
                        self.stats.punts_limited.fetch_add(1, Ordering::Relaxed);
                        self.pool.push(p);
                        continue;
                    }
                    ToControl::Punt { class, packet: p }
                }
                Verdict::Resolve { ifindex, nexthop } => {
                    let ok = self
                        .limits
                        .get_mut(PuntClass::SlowPath.index())
                        .is_some_and(|b| b.allow(now));
                    if !ok {
                        self.stats.punts_limited.fetch_add(1, Ordering::Relaxed);
                        self.pool.push(p);
                        continue;
                    }
                    ToControl::Resolve {
                        ifindex,
                        nexthop,
                        packet: p,
                    }
                }
                _ => {
                    if self.pool.len() < POOL {
                        self.pool.push(p);
                    }
                    continue;
                }
            };
            match self.to_control.try_send(msg) {
                Ok(()) => woke = true,
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                    self.stats.punts_limited.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if woke {
            self.wake.notify();
        }
    }

    fn flush(&mut self) {
        for q in self.queues.iter_mut().flatten() {
            let _ = q.flush();
        }
    }

    /// Charges the drops of the batch just processed to its ingress port. Drops are rare:
    /// the common case is one comparison.
    fn attribute_drops(&mut self, q: usize) {
        let c = self.worker.counters();
        let dropped = c.outcome(Outcome::Dropped);
        if dropped == self.dropped_seen {
            return;
        }
        self.dropped_seen = dropped;
        let Some(port) = self.port_drops.get_mut(q) else {
            return;
        };
        for ((p, seen), now) in port.iter_mut().zip(self.drops_seen.iter_mut()).zip(c.drops) {
            *p += now.wrapping_sub(*seen);
            *seen = now;
        }
    }

    fn publish(&self) {
        let io: Vec<(String, IoStats)> = self
            .queues
            .iter()
            .flatten()
            .map(|q| (q.name().to_string(), q.stats()))
            .collect();
        if let Ok(mut g) = self.stats.io.lock() {
            *g = io;
        }
        let mut fast = InstallCounters::default();
        for f in self.fast.iter().flatten() {
            fast.add(&f.counters);
        }
        if let Ok(mut g) = self.stats.fast.lock() {
            *g = fast;
        }
        if let Ok(mut g) = self.stats.port_drops.lock() {
            g.clone_from(&self.port_drops);
        }
        if let Ok(mut g) = self.stats.flow.lock() {
            *g = self
                .worker
                .flow_counters()
                .map(|c| (c, self.worker.flow_len()));
        }
    }

    /// Frames that had no queue to leave by.
    pub fn tx_unrouted(&self) -> u64 {
        self.tx_unrouted
    }

    fn sleep(&mut self) {
        self.stats.sleeps.fetch_add(1, Ordering::Relaxed);
        let mut fds: Vec<libc::pollfd> = self
            .queues
            .iter()
            .flatten()
            .filter_map(|q| q.fd())
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if fds.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
            return;
        }
        // SAFETY: `fds` is a live, correctly sized array of pollfd.
        unsafe {
            libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, IDLE_POLL_MS);
        }
    }
}
