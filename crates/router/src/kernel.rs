//! Source `kernel`: the Linux routing table of vfsrd's own network namespace, mirrored over
//! rtnetlink. This is how any daemon that writes the kernel's table drives vfsr: BIRD's
//! `kernel` protocol, FRR without FPM, keepalived, or `ip route`.
//!
//! The mirror takes the routes of one table (`main` by default) whose next hops leave
//! through a port's TAP or port interface, or name a gateway on a port's subnet. Routes of
//! excluded protocols are skipped: by default `kernel` (2), the kernel's own connected and
//! local routes of the TAPs, which are vfsr's connected routes already. A kernel route is
//! identified by prefix and metric (`RTA_PRIORITY`), as in the kernel; the lowest metric wins
//! among this source's routes of a prefix.
//!
//! ## Dumps and overruns
//!
//! At start the daemon dumps the table; later it follows the route and next-hop groups.
//! Netlink drops messages when the socket's buffer overflows (`ENOBUFS`), which a full
//! table's churn can cause: the daemon then dumps again, and the mirror reconciles by mark
//! and sweep ([`KernelMirror::begin_dump`] starts an epoch, [`KernelMirror::dump_complete`]
//! removes the routes the dump did not list), so no route is lost and none stays stale.

use vfsr_netlink::msg::{Message, Route};
use vfsr_rib::{Rib, Source};

use crate::fpm::MAIN_TABLE;
use crate::source::{Apply, Identity, SourceState};
use crate::translate::{IfMap, Skip, SourceCounters};

/// `RTPROT_KERNEL`: routes the kernel adds itself (connected and local routes).
pub const PROTO_KERNEL: u8 = 2;

/// What the mirror takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelConfig {
    /// The routing table mirrored.
    pub table: u32,
    /// Protocols (`rtm_protocol`) whose routes are not mirrored.
    pub exclude_protocols: Vec<u8>,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            table: MAIN_TABLE,
            exclude_protocols: vec![PROTO_KERNEL],
        }
    }
}

/// The mirror's state (see the module doc).
#[derive(Debug)]
pub struct KernelMirror {
    config: KernelConfig,
    inner: SourceState,
    dumping: bool,
    dumps: u64,
    overruns: u64,
}

impl KernelMirror {
    /// A mirror with nothing yet.
    pub fn new(config: KernelConfig) -> Self {
        KernelMirror {
            config,
            inner: SourceState::new(Source::Kernel, Identity::PrefixAndMetric),
            dumping: false,
            dumps: 0,
            overruns: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &KernelConfig {
        &self.config
    }

    /// The counters.
    pub fn counters(&self) -> &SourceCounters {
        &self.inner.counters
    }

    /// Dumps started.
    pub fn dumps(&self) -> u64 {
        self.dumps
    }

    /// Overruns reported ([`KernelMirror::overrun`]).
    pub fn overruns(&self) -> u64 {
        self.overruns
    }

    /// Whether a dump is under way.
    pub fn dumping(&self) -> bool {
        self.dumping
    }

    /// A dump of the table starts: the routes mirrored so far are stale until it lists them.
    pub fn begin_dump(&mut self, rib: &mut Rib) {
        rib.begin_epoch(Source::Kernel);
        self.dumping = true;
        self.dumps += 1;
    }

    /// The dump listed everything: routes it did not list are removed. Returns how many.
    pub fn dump_complete(&mut self, rib: &mut Rib) -> usize {
        if !self.dumping {
            return 0;
        }
        self.dumping = false;
        let n = rib.sweep(Source::Kernel);
        self.inner.sweep_parked(rib.current_epoch(Source::Kernel));
        self.inner.counters.swept += n as u64;
        self.inner.counters.resyncs += 1;
        n
    }

    /// The socket overflowed: messages were lost. The caller dumps again.
    pub fn overrun(&mut self) {
        self.overruns += 1;
    }

    /// Applies the messages of one read (a dump's part or live changes).
    pub fn messages(&mut self, msgs: &[Message], rib: &mut Rib, ifmap: &IfMap, distance: u8) {
        let table = self.config.table;
        let exclude = self.config.exclude_protocols.clone();
        let mut cx = Apply {
            rib,
            ifmap,
            distance,
        };
        self.inner.apply(msgs, &mut cx, |r: &Route| {
            if r.table != table {
                Some(Skip::OtherTable)
            } else if exclude.contains(&r.protocol) {
                Some(Skip::ExcludedProtocol)
            } else {
                None
            }
        });
    }

    /// Call after a batch of reads: routes whose next-hop objects changed are updated.
    pub fn end_batch(&mut self, rib: &mut Rib, ifmap: &IfMap, distance: u8) -> usize {
        let mut cx = Apply {
            rib,
            ifmap,
            distance,
        };
        self.inner.end_batch(&mut cx)
    }
}
