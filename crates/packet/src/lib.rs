//! The packet buffer: one frame in an owned buffer with room to spare.
//!
//! The I/O backends (`vfsr-io`) fill packets and the forwarding pipeline (`vfsr-fwd`)
//! rewrites them in place, so the buffer lives below both: the backends need nothing else of
//! the pipeline. The buffer's capacity is fixed when it is made; the frame's length changes
//! when the pipeline rewrites it (a packet the pipeline creates, an ICMP error or a fragment,
//! takes a buffer of its own).

#![forbid(unsafe_code)]

/// Default buffer size: a 1500-byte MTU frame plus Ethernet header, rounded up.
pub const DEFAULT_BUFFER: usize = 2048;

/// One frame in an owned buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    buf: Box<[u8]>,
    len: usize,
    /// The interface the frame came in on (or, for a generated packet, the one it answers).
    pub iif: u32,
    /// The interface it leaves by, set when the verdict is `Forward`.
    pub oif: u32,
}

impl Packet {
    /// An empty packet whose buffer holds `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Packet {
        Packet {
            buf: vec![0; capacity].into_boxed_slice(),
            len: 0,
            iif: 0,
            oif: 0,
        }
    }

    /// A buffer from `pool` (the packets a backend or worker keeps for reuse), or a new one of
    /// [`DEFAULT_BUFFER`] bytes when the pool is empty. What is taken keeps its old frame
    /// and interfaces until the taker sets them.
    #[inline]
    pub fn take(pool: &mut Vec<Packet>) -> Packet {
        pool.pop()
            .unwrap_or_else(|| Packet::with_capacity(DEFAULT_BUFFER))
    }

    /// A packet holding a copy of `frame`, received on `iif` (the buffer is at least
    /// [`DEFAULT_BUFFER`] bytes).
    pub fn from_frame(frame: &[u8], iif: u32) -> Packet {
        let mut p = Packet::with_capacity(frame.len().max(DEFAULT_BUFFER));
        p.set_frame(frame);
        p.iif = iif;
        p
    }

    /// Replaces the frame with a copy of `frame`, truncated to the capacity.
    #[inline]
    pub fn set_frame(&mut self, frame: &[u8]) {
        let n = frame.len().min(self.buf.len());
        if let (Some(dst), Some(src)) = (self.buf.get_mut(..n), frame.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.len = n;
    }

    /// The frame.
    #[inline]
    pub fn frame(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }

    /// The frame, writable.
    #[inline]
    pub fn frame_mut(&mut self) -> &mut [u8] {
        self.buf.get_mut(..self.len).unwrap_or(&mut [])
    }

    /// The frame's length.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the frame is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffer's size.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Sets the frame's length; `false` (and no change) beyond the capacity.
    #[inline]
    pub fn set_len(&mut self, len: usize) -> bool {
        if len <= self.buf.len() {
            self.len = len;
            true
        } else {
            false
        }
    }

    /// The whole buffer, for building a frame in it (then [`Packet::set_len`]).
    #[inline]
    pub fn buffer_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_copied_truncated_and_resized_within_the_capacity() {
        let mut p = Packet::with_capacity(8);
        assert!(p.is_empty());
        p.set_frame(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(p.frame(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(p.set_len(3));
        assert_eq!(p.frame(), &[1, 2, 3]);
        assert!(!p.set_len(9), "beyond the capacity");
        assert_eq!(p.len(), 3);
        p.frame_mut()[0] = 42;
        assert_eq!(p.buffer_mut()[0], 42);
        let q = Packet::from_frame(&[7; 60], 3);
        assert_eq!((q.len(), q.iif, q.capacity()), (60, 3, DEFAULT_BUFFER));
        let big = Packet::from_frame(&[0; 9000], 1);
        assert_eq!(big.len(), 9000, "a jumbo frame gets a buffer its size");
    }
}
