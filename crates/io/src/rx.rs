//! The part every [`Backend::recv`](crate::Backend::recv) shares: a buffer from the pool
//! for each frame read, the frame copied in, the packet appended with its interface, and a
//! frame that does not fit counted as invalid with its buffer given back.
//!
//! ```text
//!  ring / queue / file ──frame──▶ RxBatch::push_copy ──fits──▶ out (iif set, oif 0)
//!                                   │ Packet::take(pool)  └─no──▶ pool, rx_invalid + 1
//!  RxBatch::finish(stats): rx += frames appended, rx_invalid += frames refused
//! ```
//!
//! The backends differ only in how they find the next frame, so each keeps its own loop
//! around an [`RxBatch`]. Everything here is `#[inline]` and the copy a backend supplies
//! is a generic closure, so the loop compiles to what it was with the steps written out:
//! no call and no dynamic dispatch per frame. The counts are kept in the batch and added
//! to the queue's [`IoStats`] once, by [`RxBatch::finish`], which every return path of a
//! `recv` calls (a frame refused before an error is still counted).

use vfsr_packet::Packet;

use crate::IoStats;

/// The frames one `recv` call appends to `out`, and those it refused.
pub(crate) struct RxBatch<'a> {
    out: &'a mut Vec<Packet>,
    pool: &'a mut Vec<Packet>,
    /// `out`'s length before the batch: the frames appended are the ones past it, so the
    /// loop keeps no counter of its own for them.
    start: usize,
    ifindex: u32,
    invalid: u64,
}

impl<'a> RxBatch<'a> {
    /// A batch appending to `out` frames received on `ifindex`, in buffers from `pool`.
    #[inline]
    pub(crate) fn new(
        out: &'a mut Vec<Packet>,
        pool: &'a mut Vec<Packet>,
        ifindex: u32,
    ) -> RxBatch<'a> {
        RxBatch {
            start: out.len(),
            out,
            pool,
            ifindex,
            invalid: 0,
        }
    }

    /// The frames appended so far.
    #[inline]
    pub(crate) fn got(&self) -> usize {
        // `out` is only appended to while the batch holds it, so this never goes below 0.
        self.out.len() - self.start
    }

    /// Appends a copy of `frame`, or counts it invalid when it is larger than a buffer.
    #[inline]
    pub(crate) fn push_copy(&mut self, frame: &[u8]) -> bool {
        self.push_with(|p| {
            if frame.len() > p.capacity() {
                return false;
            }
            p.set_frame(frame);
            true
        })
    }

    /// Takes a buffer and lets `fill` write the frame into it: appended when `fill` says
    /// it did, otherwise counted invalid and the buffer given back to the pool.
    #[inline]
    pub(crate) fn push_with(&mut self, fill: impl FnOnce(&mut Packet) -> bool) -> bool {
        let mut p = Packet::take(self.pool);
        if fill(&mut p) {
            p.iif = self.ifindex;
            p.oif = 0;
            self.out.push(p);
            true
        } else {
            self.pool.push(p);
            self.invalid += 1;
            false
        }
    }

    /// Counts `n` frames invalid without taking a buffer (a descriptor or header that
    /// cannot be read at all).
    #[inline]
    pub(crate) fn invalid(&mut self, n: u64) {
        self.invalid += n;
    }

    /// Adds the batch to the queue's counters and returns the frames appended.
    #[inline]
    pub(crate) fn finish(self, stats: &mut IoStats) -> usize {
        let got = self.got();
        stats.rx += got as u64;
        stats.rx_invalid += self.invalid;
        got
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfsr_packet::DEFAULT_BUFFER;

    #[test]
    fn frames_are_appended_and_the_too_large_counted_with_their_buffers_kept() {
        // A frame already in `out` is not counted as received by this batch.
        let mut out = vec![Packet::from_frame(&[5], 1)];
        let mut pool = vec![Packet::with_capacity(DEFAULT_BUFFER)];
        let mut stats = IoStats {
            rx: 5,
            rx_invalid: 1,
            ..IoStats::default()
        };
        let mut rx = RxBatch::new(&mut out, &mut pool, 7);
        assert!(rx.push_copy(&[1, 2, 3]));
        assert!(rx.push_with(|p| {
            p.set_frame(&[9; 60]);
            true
        }));
        assert!(!rx.push_copy(&vec![0; DEFAULT_BUFFER + 1]));
        assert!(!rx.push_with(|_| false));
        rx.invalid(2);
        assert_eq!(rx.got(), 2);
        assert_eq!(rx.finish(&mut stats), 2);
        assert_eq!((stats.rx, stats.rx_invalid), (7, 5));
        assert_eq!(out.len(), 3);
        assert_eq!(out[1].frame(), &[1, 2, 3]);
        assert_eq!(out[2].frame(), &[9; 60][..]);
        assert!(out[1..].iter().all(|p| p.iif == 7 && p.oif == 0));
        // The refused frames' buffer went back to the pool (one, taken again for the second).
        assert_eq!(pool.len(), 1);
    }
}
