//! Packet I/O: how frames get into and out of a worker.
//!
//! Every backend implements [`Backend`], one receive queue and one transmit queue of one
//! interface, worked in batches: [`Backend::recv`] fills up to a batch of [`Packet`]s with one
//! system call at most (none while frames are waiting in a ring), [`Backend::send`] queues a
//! batch and kicks the kernel once. A backend never blocks in `recv` or `send`; a runtime
//! that has nothing to do waits on [`Backend::fd`] (see the adaptive polling in `vfsrd`).
//!
//! Backends:
//! - [`xdp`]: AF_XDP sockets fed by an XDP steering program that keeps control traffic
//!   in the kernel (the fast path; [`bpf`] loads and attaches the programs).
//! - [`mem`]: queues in memory, for tests and the pipeline benchmark.
//! - [`packet`]: AF_PACKET with TPACKET_V3 rings (any interface; the fallback when AF_XDP
//!   is not available), and [`raw::RawSocket`] for the control plane's frames.
//! - [`pcap`]: pcap files, read as a receive queue and written as a transmit queue.
//!
//! **No input panics.** Frames and files come from outside: the crate denies `unwrap`,
//! `panic!` and unchecked indexing outside tests, and reads headers through `vfsr-wire`'s
//! checked views.
#![deny(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::expect_used, clippy::unreachable, clippy::todo)]

use std::os::fd::RawFd;

use vfsr_packet::Packet;

pub mod bpf;
pub mod mem;
pub mod packet;
pub mod pcap;
pub mod raw;
pub mod rss;
mod rx;
pub mod xdp;

/// Which backend a queue runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// AF_XDP socket fed by an XDP program.
    Xdp,
    /// AF_PACKET socket with TPACKET_V3 rings.
    Packet,
    /// A pcap file.
    Pcap,
    /// Memory.
    Mem,
}

impl Kind {
    /// The name used in configuration and logs.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Xdp => "xdp",
            Kind::Packet => "packet",
            Kind::Pcap => "pcap",
            Kind::Mem => "mem",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Counters of one queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Frames received.
    pub rx: u64,
    /// Frames the kernel or the ring dropped before we saw them (ring full, no buffers).
    pub rx_dropped: u64,
    /// Frames received truncated or malformed by the backend (counted and skipped).
    pub rx_invalid: u64,
    /// Frames handed to the kernel for transmit.
    pub tx: u64,
    /// Frames not sent: transmit ring full or too large for a buffer.
    pub tx_dropped: u64,
    /// System calls made to wake the kernel (receive and transmit).
    pub kicks: u64,
}

impl IoStats {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &IoStats) {
        self.rx += o.rx;
        self.rx_dropped += o.rx_dropped;
        self.rx_invalid += o.rx_invalid;
        self.tx += o.tx;
        self.tx_dropped += o.tx_dropped;
        self.kicks += o.kicks;
    }
}

/// Why an operation failed.
#[derive(Debug)]
pub enum IoError {
    /// A system call failed; `what` names it and the interface.
    Os {
        /// What was being done, with the interface name.
        what: String,
        /// The error.
        err: std::io::Error,
    },
    /// The interface does not exist.
    NoSuchInterface(String),
    /// The backend cannot run here; the text says why and what to do.
    Unsupported(String),
    /// A file could not be read or written, or is malformed.
    File(String),
}

impl IoError {
    /// An [`IoError::Os`] from `errno` now.
    pub fn last(what: impl Into<String>) -> IoError {
        IoError::Os {
            what: what.into(),
            err: std::io::Error::last_os_error(),
        }
    }
}

impl std::fmt::Display for IoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IoError::Os { what, err } => write!(f, "{what}: {err}"),
            IoError::NoSuchInterface(n) => write!(f, "interface {n:?} does not exist"),
            IoError::Unsupported(s) => f.write_str(s),
            IoError::File(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for IoError {}

/// One receive and one transmit queue of an interface.
pub trait Backend: Send {
    /// The interface's name (with the queue for multi-queue backends).
    fn name(&self) -> &str;

    /// Which backend this is.
    fn kind(&self) -> Kind;

    /// Receives at most `max` frames, appending them to `out` with `iif` set to the
    /// interface's index. Buffers come from `pool` (new ones are made when it is empty).
    /// Returns how many were appended; 0 when nothing is waiting. Never blocks.
    fn recv(
        &mut self,
        out: &mut Vec<Packet>,
        max: usize,
        pool: &mut Vec<Packet>,
    ) -> Result<usize, IoError>;

    /// Queues `frames` for transmit and wakes the kernel once. Returns how many were
    /// accepted; the others (ring full, frame too large) are counted in
    /// [`IoStats::tx_dropped`]. Never blocks.
    fn send(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, IoError>;

    /// Completes what transmit left pending (reclaims sent buffers, retries kicks); called
    /// when idle and before shutdown.
    fn flush(&mut self) -> Result<(), IoError> {
        Ok(())
    }

    /// A descriptor that polls readable when frames wait, for a blocking wait when idle;
    /// `None` when the backend cannot block (memory, files).
    fn fd(&self) -> Option<RawFd>;

    /// The queue's counters.
    fn stats(&self) -> IoStats;
}
