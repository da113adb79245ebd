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

use rustc_hash::FxHashSet;
use vfsr_netlink::msg::{Message, Route};
use vfsr_rib::{IpPrefix, Rib, Source};

use crate::fpm::MAIN_TABLE;
use crate::source::{Apply, Identity, SourceState};
use crate::translate::{prefix_of, IfMap, Skip, SourceCounters};

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
    /// Prefixes a notification changed since the dump began: the dump's own listing of one
    /// may predate the change, so it is not taken.
    touched: FxHashSet<IpPrefix>,
    /// Dump listings left out for that reason.
    superseded: u64,
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
            touched: FxHashSet::default(),
            superseded: 0,
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
        self.touched.clear();
        self.dumps += 1;
    }

    /// The dump listed everything: routes it did not list are removed. Returns how many.
    pub fn dump_complete(&mut self, rib: &mut Rib) -> usize {
        if !self.dumping {
            return 0;
        }
        self.dumping = false;
        self.touched.clear();
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

    /// Dump listings left out because a notification had changed their prefix since the
    /// dump began.
    pub fn superseded(&self) -> u64 {
        self.superseded
    }

    /// Applies the messages of one read (a dump's part or live changes); `multi[i]` says
    /// whether `msgs[i]` is part of a dump (missing: a notification).
    ///
    /// While a dump runs, a notification of a route change can arrive before the dump's
    /// listing of the same route, which the kernel may have read before the change (the
    /// dump and the change race under RCU). The prefixes notifications change during a dump
    /// are remembered, and the dump's listings of them are left out: the notifications
    /// are the newer word.
    pub fn messages_marked(
        &mut self,
        msgs: &[Message],
        multi: &[bool],
        rib: &mut Rib,
        ifmap: &IfMap,
        distance: u8,
    ) {
        if !self.dumping {
            return self.messages(msgs, rib, ifmap, distance);
        }
        let mut kept: Vec<Message> = Vec::with_capacity(msgs.len());
        for (i, m) in msgs.iter().enumerate() {
            if let Message::Route(r) = m {
                if let Some(p) = prefix_of(r.dst) {
                    if multi.get(i).copied().unwrap_or(false) {
                        if self.touched.contains(&p) {
                            self.superseded += 1;
                            continue;
                        }
                    } else {
                        self.touched.insert(p);
                    }
                }
            }
            kept.push(m.clone());
        }
        self.messages(&kept, rib, ifmap, distance);
    }

    /// Applies the messages of one read, all taken as they are.
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};
    use vfsr_lpm::Prefix;
    use vfsr_netlink::msg::{NextHop, Op, RouteType};

    fn route(op: Op, third: u8) -> Message {
        Message::Route(Route {
            op,
            replace: false,
            dst: (IpAddr::V4(Ipv4Addr::new(10, 0, third, 0)), 24),
            table: 254,
            protocol: 4,
            scope: 0,
            kind: RouteType::Unicast,
            priority: None,
            nexthops: vec![NextHop {
                gateway: Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2))),
                oif: None,
                weight: 1,
                onlink: false,
            }],
            nhid: None,
            src_len: 0,
        })
    }

    fn has(rib: &Rib, third: u8) -> bool {
        let p = Prefix::new_masked(u32::from(Ipv4Addr::new(10, 0, third, 0)), 24);
        !rib.routes(&p).is_empty()
    }

    #[test]
    fn a_withdrawal_before_an_announcement_that_is_not_taken_still_withdraws() {
        let mut rib = Rib::new();
        let mut m = KernelMirror::new(KernelConfig::default());
        let ifmap = IfMap::new();
        m.messages(
            &[route(Op::New, 1), route(Op::New, 2)],
            &mut rib,
            &ifmap,
            10,
        );
        assert!(has(&rib, 1) && has(&rib, 2));
        // Deleted, then announced again by an excluded protocol (kernel, 2): the announcement
        // is refused, the deletion must still happen.
        let mut excluded = route(Op::New, 1);
        if let Message::Route(r) = &mut excluded {
            r.protocol = PROTO_KERNEL;
        }
        m.messages(&[route(Op::Del, 1), excluded], &mut rib, &ifmap, 10);
        assert!(!has(&rib, 1), "the deleted route stayed");
        // Deleted, then announced as a local route (not a forwarding route): gone too.
        let mut local = route(Op::New, 2);
        if let Message::Route(r) = &mut local {
            r.kind = RouteType::Local;
        }
        m.messages(&[route(Op::Del, 2), local], &mut rib, &ifmap, 10);
        assert!(!has(&rib, 2), "the deleted route stayed");
        // A deletion and a taken announcement is still an update in place.
        m.messages(&[route(Op::New, 3)], &mut rib, &ifmap, 10);
        m.messages(
            &[route(Op::Del, 3), route(Op::New, 3)],
            &mut rib,
            &ifmap,
            10,
        );
        assert!(has(&rib, 3));
    }

    #[test]
    fn one_next_hop_at_two_metrics_is_two_routes() {
        let mut rib = Rib::new();
        let mut m = KernelMirror::new(KernelConfig::default());
        let ifmap = IfMap::new();
        let at = |op, metric| {
            let mut r = route(op, 1);
            if let Message::Route(x) = &mut r {
                x.priority = Some(metric);
            }
            r
        };
        // `ip route add 10.0.1.0/24 via 192.0.2.2 metric 100`, then the same at metric 300.
        m.messages(&[at(Op::New, 100), at(Op::New, 300)], &mut rib, &ifmap, 10);
        let p = Prefix::new_masked(u32::from(Ipv4Addr::new(10, 0, 1, 0)), 24);
        let metrics = |rib: &Rib| {
            let mut v: Vec<u32> = rib.routes(&p).iter().map(|r| r.metric).collect();
            v.sort_unstable();
            v
        };
        assert_eq!(metrics(&rib), [100, 300]);
        // `ip route del ... metric 100`: the kernel still forwards by the metric-300 route.
        m.messages(&[at(Op::Del, 100)], &mut rib, &ifmap, 10);
        assert_eq!(metrics(&rib), [300]);
        assert!(has(&rib, 1));
    }

    #[test]
    fn a_dump_listing_older_than_a_notification_is_not_taken() {
        let mut rib = Rib::new();
        let mut m = KernelMirror::new(KernelConfig::default());
        let ifmap = IfMap::new();
        m.messages(
            &[route(Op::New, 1), route(Op::New, 2)],
            &mut rib,
            &ifmap,
            10,
        );
        m.begin_dump(&mut rib);
        // Route 1 is deleted while the dump runs; the notice comes before the dump's listing
        // of it. Route 3 is added the same way. Route 2 is listed normally.
        m.messages_marked(
            &[route(Op::Del, 1), route(Op::New, 3)],
            &[false, false],
            &mut rib,
            &ifmap,
            10,
        );
        m.messages_marked(
            &[route(Op::New, 1), route(Op::New, 2), route(Op::New, 3)],
            &[true, true, true],
            &mut rib,
            &ifmap,
            10,
        );
        assert_eq!(m.superseded(), 2);
        assert_eq!(m.dump_complete(&mut rib), 0);
        assert!(!has(&rib, 1), "the deleted route stays deleted");
        assert!(has(&rib, 2) && has(&rib, 3));
        // Outside a dump, listings are taken as they come.
        m.messages_marked(&[route(Op::New, 1)], &[true], &mut rib, &ifmap, 10);
        assert!(has(&rib, 1));
    }
}
