//! Software RSS: more workers than an interface has queues.
//!
//! When a port has one receive queue (a veth, a simple NIC) and the router runs several
//! workers, the worker that owns the queue receives every frame, hashes it with the Toeplitz
//! function ([`vfsr_io::rss`], symmetric by default so both directions of a flow meet on one
//! worker and its flow-table entry) and keeps the frames whose hash maps to it. The others
//! go, in arrival order, into the ring of the worker they map to, which is woken once per
//! batch. A flow therefore always lands on the same worker and is never reordered. Every
//! worker transmits through the one queue, which is shared behind a lock; only transmit
//! takes it from the other workers, once per batch.
//!
//! A full hand-off ring drops the frame, counted in the receiving queue's `rx_dropped` as a
//! NIC would.

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard};

use vfsr_fwd::Packet;
use vfsr_io::rss::Rss;
use vfsr_io::{Backend, IoError, IoStats, Kind};

use crate::error::{Error, Result};
use crate::link::Wake;

/// Frames a hand-off ring holds.
pub const RING: usize = 4096;

type SharedQueue = Arc<Mutex<Box<dyn Backend>>>;

fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// A ring from the owner to one other worker.
pub struct Ring {
    q: Mutex<VecDeque<Packet>>,
    wake: Wake,
}

/// The queue as its owner sees it: receives and spreads.
pub struct Spreader {
    name: String,
    kind: Kind,
    fd: Option<RawFd>,
    queue: SharedQueue,
    rss: Rss,
    me: usize,
    rings: Vec<Option<Arc<Ring>>>,
    scratch: Vec<Packet>,
    spread_dropped: u64,
}

/// The queue as another worker sees it: its ring in, the shared queue out.
pub struct Handoff {
    name: String,
    kind: Kind,
    ring: Arc<Ring>,
    queue: SharedQueue,
}

/// Splits `queue` among `workers` workers: `owner` gets the [`Spreader`], every other
/// worker a [`Handoff`] (`None` at the owner's position).
pub fn split(
    queue: Box<dyn Backend>,
    rss: Rss,
    workers: usize,
    owner: usize,
) -> Result<(Spreader, Vec<Option<Handoff>>)> {
    let name = queue.name().to_string();
    let kind = queue.kind();
    let fd = queue.fd();
    let shared: SharedQueue = Arc::new(Mutex::new(queue));
    let mut rings = Vec::new();
    let mut handoffs = Vec::new();
    for w in 0..workers {
        if w == owner {
            rings.push(None);
            handoffs.push(None);
            continue;
        }
        let ring = Arc::new(Ring {
            q: Mutex::new(VecDeque::with_capacity(RING)),
            wake: Wake::new().map_err(|e| Error::os("eventfd", e))?,
        });
        rings.push(Some(Arc::clone(&ring)));
        handoffs.push(Some(Handoff {
            name: format!("{name}>w{w}"),
            kind,
            ring,
            queue: Arc::clone(&shared),
        }));
    }
    Ok((
        Spreader {
            name,
            kind,
            fd,
            queue: shared,
            rss,
            me: owner,
            rings,
            scratch: Vec::new(),
            spread_dropped: 0,
        },
        handoffs,
    ))
}

impl Backend for Spreader {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> Kind {
        self.kind
    }

    fn recv(
        &mut self,
        out: &mut Vec<Packet>,
        max: usize,
        pool: &mut Vec<Packet>,
    ) -> Result<usize, IoError> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let r = lock(&self.queue).recv(&mut scratch, max, pool);
        let mut mine = 0;
        let mut woken = vec![false; self.rings.len()];
        for p in scratch.drain(..) {
            let w = match self.rss.hash_frame(p.frame()) {
                Some(h) => self.rss.queue_of(h),
                None => self.me,
            };
            match self.rings.get(w).and_then(|r| r.as_ref()) {
                Some(ring) => {
                    let mut q = lock(&ring.q);
                    if q.len() < RING {
                        q.push_back(p);
                        if let Some(f) = woken.get_mut(w) {
                            *f = true;
                        }
                    } else {
                        drop(q);
                        self.spread_dropped += 1;
                        pool.push(p);
                    }
                }
                None => {
                    out.push(p);
                    mine += 1;
                }
            }
        }
        self.scratch = scratch;
        for (w, f) in woken.iter().enumerate() {
            if *f {
                if let Some(Some(r)) = self.rings.get(w) {
                    r.wake.notify();
                }
            }
        }
        r.map(|_| mine)
    }

    fn send(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, IoError> {
        lock(&self.queue).send(frames)
    }

    fn flush(&mut self) -> Result<(), IoError> {
        lock(&self.queue).flush()
    }

    fn fd(&self) -> Option<RawFd> {
        self.fd
    }

    fn stats(&self) -> IoStats {
        let mut s = lock(&self.queue).stats();
        s.rx_dropped += self.spread_dropped;
        s
    }
}

impl Backend for Handoff {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> Kind {
        self.kind
    }

    fn recv(
        &mut self,
        out: &mut Vec<Packet>,
        max: usize,
        _pool: &mut Vec<Packet>,
    ) -> Result<usize, IoError> {
        let mut q = lock(&self.ring.q);
        let n = q.len().min(max);
        out.extend(q.drain(..n));
        if q.is_empty() {
            self.ring.wake.drain();
        }
        Ok(n)
    }

    fn send(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, IoError> {
        lock(&self.queue).send(frames)
    }

    fn fd(&self) -> Option<RawFd> {
        Some(self.ring.wake.fd())
    }

    fn stats(&self) -> IoStats {
        // The shared queue counts every frame once, in its owner's stats.
        IoStats::default()
    }
}
