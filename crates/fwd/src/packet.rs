//! Packet buffers and batches.
//!
//! A [`Packet`] is one frame in an owned buffer with room to spare (the buffer's capacity is
//! fixed when it is made; the frame's length changes when the pipeline rewrites it). The
//! pipeline rewrites frames in place; packets it creates (ICMP errors, fragments) take
//! buffers of their own. A [`Batch`] is what a worker processes at once: the frames received,
//! a verdict for each, and the packets the pipeline generated.

use std::net::IpAddr;

use crate::counters::{DropReason, PuntClass};

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

/// What became of one received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Rewritten in place; send it on `oif` (also in [`Packet::oif`]).
    Forward {
        /// Egress interface.
        oif: u32,
    },
    /// Hand it to the control plane, unchanged.
    Punt(PuntClass),
    /// Its next hop is not resolved: the control plane holds it (bounded) and resolves
    /// `nexthop` on `ifindex`. The frame is unchanged except the TTL, already decremented.
    Resolve {
        /// Egress interface.
        ifindex: u32,
        /// The neighbor to resolve.
        nexthop: IpAddr,
    },
    /// Dropped (counted under the reason). The buffer may be reused.
    Drop(DropReason),
    /// Replaced by generated packets (the fragments of an IPv4 packet); the buffer may be
    /// reused.
    Consumed,
}

/// A batch: frames in, a verdict per frame, packets generated on the way.
#[derive(Debug, Default)]
pub struct Batch {
    /// The received frames (`iif` set), rewritten in place by the pipeline.
    pub packets: Vec<Packet>,
    /// `verdicts[i]` is the fate of `packets[i]`; filled by the worker.
    pub verdicts: Vec<Verdict>,
    /// Packets the pipeline made (ICMP errors, fragments), ready to send on their `oif`.
    pub generated: Vec<Packet>,
    /// Indices of forwarded packets whose decision depends on their destination alone (one
    /// next hop, not an ECMP group), so a destination cache in front of the pipeline may
    /// replay it for later packets (the XDP fast path). Filled only when
    /// `WorkerConfig::report_offload` is set.
    pub offload: Vec<u32>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Batch {
        Batch::default()
    }

    /// A batch of copies of `frames`, all received on `iif`.
    pub fn from_frames<'a>(frames: impl IntoIterator<Item = &'a [u8]>, iif: u32) -> Batch {
        Batch {
            packets: frames
                .into_iter()
                .map(|f| Packet::from_frame(f, iif))
                .collect(),
            verdicts: Vec::new(),
            generated: Vec::new(),
            offload: Vec::new(),
        }
    }

    /// `(packet, verdict)` pairs.
    pub fn results(&self) -> impl Iterator<Item = (&Packet, &Verdict)> {
        self.packets.iter().zip(&self.verdicts)
    }
}
