//! In-memory queues: a [`MemPort`] receives what a [`MemWire`] injects and keeps what it
//! sends for the test (or benchmark) to take. Both ends share the queues.

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard};

use vfsr_packet::Packet;

use crate::rx::RxBatch;
use crate::{Backend, IoError, IoStats, Kind};

#[derive(Default)]
struct Queues {
    rx: VecDeque<Vec<u8>>,
    tx: VecDeque<Vec<u8>>,
    /// Frames refused because `rx` was full.
    dropped: u64,
}

/// The test's end of a memory port.
#[derive(Clone, Default)]
pub struct MemWire {
    q: Arc<Mutex<Queues>>,
    /// Frames the port's receive queue holds at most (more are dropped and counted).
    limit: usize,
}

/// The router's end.
pub struct MemPort {
    name: String,
    ifindex: u32,
    q: Arc<Mutex<Queues>>,
    stats: IoStats,
}

fn lock(q: &Mutex<Queues>) -> MutexGuard<'_, Queues> {
    match q.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// A connected pair: the port for the router, the wire for the test. The receive queue
/// holds at most `limit` frames, like a NIC ring.
pub fn pair(name: &str, ifindex: u32, limit: usize) -> (MemPort, MemWire) {
    let q = Arc::new(Mutex::new(Queues::default()));
    let limit = limit.max(1);
    (
        MemPort {
            name: name.to_string(),
            ifindex,
            q: Arc::clone(&q),
            stats: IoStats::default(),
        },
        MemWire { q, limit },
    )
}

impl MemWire {
    /// Offers a frame to the port; `false` if its receive queue is full (the frame is lost).
    pub fn inject(&self, frame: &[u8]) -> bool {
        let mut q = lock(&self.q);
        if q.rx.len() >= self.limit {
            q.dropped += 1;
            return false;
        }
        q.rx.push_back(frame.to_vec());
        true
    }

    /// Takes every frame the port has sent, oldest first.
    pub fn take_sent(&self) -> Vec<Vec<u8>> {
        lock(&self.q).tx.drain(..).collect()
    }

    /// Frames waiting in the port's receive queue.
    pub fn pending(&self) -> usize {
        lock(&self.q).rx.len()
    }
}

impl Backend for MemPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> Kind {
        Kind::Mem
    }

    fn recv(
        &mut self,
        out: &mut Vec<Packet>,
        max: usize,
        pool: &mut Vec<Packet>,
    ) -> Result<usize, IoError> {
        let mut q = lock(&self.q);
        let mut rx = RxBatch::new(out, pool, self.ifindex);
        while rx.got() < max {
            let Some(frame) = q.rx.pop_front() else { break };
            rx.push_copy(&frame);
        }
        Ok(rx.finish(&mut self.stats))
    }

    fn send(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, IoError> {
        let mut q = lock(&self.q);
        let mut n = 0;
        for f in frames {
            q.tx.push_back(f.to_vec());
            n += 1;
        }
        self.stats.tx += n as u64;
        Ok(n)
    }

    fn fd(&self) -> Option<RawFd> {
        None
    }

    fn stats(&self) -> IoStats {
        let mut s = self.stats;
        s.rx_dropped = lock(&self.q).dropped;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cross_in_both_directions_and_the_ring_limit_holds() {
        let (mut port, wire) = pair("m0", 3, 2);
        assert!(wire.inject(&[1, 2, 3]));
        assert!(wire.inject(&[4]));
        assert!(!wire.inject(&[5]), "a full receive queue refuses frames");
        let mut out = Vec::new();
        let mut pool = Vec::new();
        assert_eq!(port.recv(&mut out, 1, &mut pool).unwrap(), 1);
        assert_eq!(port.recv(&mut out, 8, &mut pool).unwrap(), 1);
        assert_eq!(port.recv(&mut out, 8, &mut pool).unwrap(), 0);
        assert_eq!(out[0].frame(), &[1, 2, 3]);
        assert_eq!(out[1].iif, 3);
        let frames: Vec<&[u8]> = vec![&[9, 9], &[8]];
        assert_eq!(port.send(&mut frames.into_iter()).unwrap(), 2);
        assert_eq!(wire.take_sent(), vec![vec![9, 9], vec![8]]);
        assert_eq!(port.stats().rx, 2);
        assert_eq!(port.stats().tx, 2);
        assert_eq!(port.stats().rx_dropped, 1);
    }
}
