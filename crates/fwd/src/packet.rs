//! Batches and verdicts.
//!
//! A [`Packet`] (from `vfsr-packet`, below both the pipeline and the I/O backends) is one
//! frame in an owned buffer. A [`Batch`] is what a worker processes at once: the frames
//! received, a verdict for each, and the packets the pipeline generated.

use std::net::IpAddr;

use crate::counters::{DropReason, PuntClass};
pub use vfsr_packet::{Packet, DEFAULT_BUFFER};

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
