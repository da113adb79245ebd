//! The kernel's rtnetlink socket: the ports' link state (a port whose interface or TAP goes
//! down takes its routes out of the FIB) and, with `[kernel]` configured, the mirror of the
//! kernel's routing table (`vfsr_router::kernel`).
//!
//! At start the socket dumps the links (and, for the mirror, the next-hop objects and the
//! routes of both families). An overrun (`ENOBUFS`: the kernel dropped messages because the
//! socket's buffer was full) starts the dumps again; the mirror reconciles by mark and
//! sweep when the route dumps end, so nothing lost in the overrun stays wrong. A route dump
//! the table changed under (the kernel flags its messages `NLM_F_DUMP_INTR`) can list a route
//! after the notice of its deletion: it is not swept on, but done again. The socket is
//! opened anew for that dump: the kernel may still be sending a dump on the old one, whose
//! end could not be told from the new one's.
//!
//! What is done with the messages lives in [`KernelFeed`], which holds no socket: the
//! socket's owner ([`NetlinkSource`]) hands it each read's messages and does what it answers
//! ([`Next`]). The fuzz target `netlink_stream` drives the same feed with arbitrary datagrams.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use serde_json::{json, Value};
use vfsr_lpm::LpmUpdate;
use vfsr_netlink::msg::{Link, Message};
use vfsr_netlink::{DecodeStats, DumpKind, RecvStatus, RouteSocket};
use vfsr_rib::{Rib, Source};
use vfsr_router::kernel::{KernelConfig, KernelMirror};
use vfsr_router::{IfMap, Router};

use super::KernelIds;
use crate::config::KernelPlan;
use crate::error::{Error, Result};

/// Reads per step at most (each up to 64 datagrams).
const STEP_READS: usize = 16;
/// The socket's receive buffer when only links are followed.
const LINK_RCVBUF: usize = 1 << 20;

/// The socket: every group for the mirror, links alone otherwise (a routing daemon writing a
/// full table into the kernel would otherwise flood a socket that only follows links).
fn open(rcvbuf: usize, mirror: bool) -> std::io::Result<RouteSocket> {
    if mirror {
        RouteSocket::open(rcvbuf)
    } else {
        RouteSocket::open_links(rcvbuf)
    }
}

/// A port's kernel-side state.
#[derive(Clone, Copy, Debug)]
struct PortLink {
    ids: KernelIds,
    iface_up: bool,
    tap_up: bool,
}

impl PortLink {
    fn up(&self) -> bool {
        self.iface_up && self.tap_up
    }
}

/// What the socket's owner does after a read was applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Go on reading.
    Read,
    /// Open the socket anew and request [`KernelFeed::begin_dump`]'s dumps; the rest of
    /// the read is not applied.
    Dump,
}

/// Sees what the feed gives the mirror (a check's model of it; nothing in vfsrd).
pub trait FeedWatch {
    /// Before a run of route messages (with their dump marks) goes to the mirror.
    fn run(&mut self, _msgs: &[Message], _marks: &[bool], _mirror: &KernelMirror) {}
    /// After the mirror swept at the end of a complete dump.
    fn swept(&mut self) {}
}

impl FeedWatch for () {}

/// The rtnetlink messages' effect, without the socket: link changes to the ports' state,
/// route and next-hop messages to the kernel mirror, dump ends to the mirror's sweep.
pub struct KernelFeed {
    mirror: Option<KernelMirror>,
    ports: Vec<PortLink>,
    /// The dumps requested, in order; each ends with a `Done` (or an error).
    expected: VecDeque<DumpKind>,
    stats: DecodeStats,
    overruns: u64,
    malformed: u64,
    link_changes: u64,
    /// The decoder's count of interrupted-dump messages when the current dump began.
    intr_at_dump: u64,
    /// Route dumps redone because the table changed under them.
    interrupted: u64,
}

impl KernelFeed {
    /// A feed for `ports` (all taken as up until the link dump says otherwise), mirroring
    /// the kernel's table as `mirror` says, or following links alone.
    pub fn new(mirror: Option<KernelConfig>, ports: &[KernelIds]) -> KernelFeed {
        KernelFeed {
            mirror: mirror.map(KernelMirror::new),
            ports: ports
                .iter()
                .map(|ids| PortLink {
                    ids: *ids,
                    iface_up: true,
                    tap_up: true,
                })
                .collect(),
            expected: VecDeque::new(),
            stats: DecodeStats::default(),
            overruns: 0,
            malformed: 0,
            link_changes: 0,
            intr_at_dump: 0,
            interrupted: 0,
        }
    }

    /// The mirror, if on.
    pub fn mirror(&self) -> Option<&KernelMirror> {
        self.mirror.as_ref()
    }

    /// The decoder's counters, which each datagram's decoding adds to.
    pub fn decode_stats_mut(&mut self) -> &mut DecodeStats {
        &mut self.stats
    }

    /// Starts the dumps: the kinds to request, in order (links; with the mirror also the
    /// next-hop objects and both route families).
    pub fn begin_dump(&mut self, rib: &mut Rib) -> &'static [DumpKind] {
        let kinds: &'static [DumpKind] = if self.mirror.is_some() {
            &[
                DumpKind::Links,
                DumpKind::NextHops,
                DumpKind::Routes4,
                DumpKind::Routes6,
            ]
        } else {
            &[DumpKind::Links]
        };
        if let Some(m) = self.mirror.as_mut() {
            m.begin_dump(rib);
        }
        self.intr_at_dump = self.stats.dump_interrupted;
        self.expected.clear();
        self.expected.extend(kinds.iter().copied());
        kinds
    }

    /// Messages were lost: the kernel overran the socket (`overrun`) or sent a datagram
    /// that does not decode. Counted; the dumps must start again.
    pub fn lost(&mut self, overrun: bool) -> Next {
        if overrun {
            self.overruns += 1;
            if let Some(m) = self.mirror.as_mut() {
                m.overrun();
            }
        } else {
            self.malformed += 1;
        }
        tracing::warn!(
            "rtnetlink: {} ({} so far): dumping again",
            if overrun {
                "overrun, messages lost"
            } else {
                "malformed datagram"
            },
            self.overruns + self.malformed
        );
        Next::Dump
    }

    /// Applies one read's messages (`multi`: per message, part of a dump): route messages
    /// go to the mirror in runs; links and dump ends are handled in order.
    pub fn apply<E4, E6, W>(
        &mut self,
        msgs: &[Message],
        multi: &[bool],
        router: &mut Router<E4, E6>,
        ifmap: &IfMap,
        watch: &mut W,
    ) -> Next
    where
        E4: LpmUpdate<u32> + Clone,
        E6: LpmUpdate<u128> + Clone,
        W: FeedWatch,
    {
        let distance = router.distance(Source::Kernel);
        let mut start = 0usize;
        for (i, m) in msgs.iter().enumerate() {
            let boundary = matches!(m, Message::Link(_) | Message::Done | Message::Error(_));
            if !boundary {
                continue;
            }
            self.run(msgs, multi, start..i, router, ifmap, distance, watch);
            start = i + 1;
            // A boundary is a link or a dump's end (`Done`, or an error in its place).
            if let Message::Link(l) = m {
                self.link(l, router);
            } else if self.dump_ended(router.rib_mut(), watch) == Next::Dump {
                return Next::Dump;
            }
        }
        self.run(
            msgs,
            multi,
            start..msgs.len(),
            router,
            ifmap,
            distance,
            watch,
        );
        Next::Read
    }

    /// Ends a read: the mirror's batch (next-hop objects re-expanded) goes to the RIB.
    pub fn end_batch<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        router: &mut Router<E4, E6>,
        ifmap: &IfMap,
    ) {
        let distance = router.distance(Source::Kernel);
        if let Some(m) = self.mirror.as_mut() {
            m.end_batch(router.rib_mut(), ifmap, distance);
        }
    }

    /// Route messages `range` of a read to the mirror.
    #[allow(clippy::too_many_arguments)]
    fn run<E4, E6, W>(
        &mut self,
        msgs: &[Message],
        multi: &[bool],
        range: std::ops::Range<usize>,
        router: &mut Router<E4, E6>,
        ifmap: &IfMap,
        distance: u8,
        watch: &mut W,
    ) where
        E4: LpmUpdate<u32> + Clone,
        E6: LpmUpdate<u128> + Clone,
        W: FeedWatch,
    {
        let (Some(mirror), Some(run)) = (self.mirror.as_mut(), msgs.get(range.clone())) else {
            return;
        };
        if run.is_empty() {
            return;
        }
        let marks = multi.get(range).unwrap_or_default();
        watch.run(run, marks, mirror);
        mirror.messages_marked(run, marks, router.rib_mut(), ifmap, distance);
    }

    /// A dump's end (`Done`, or an error in its place).
    fn dump_ended<W: FeedWatch>(&mut self, rib: &mut Rib, watch: &mut W) -> Next {
        let Some(kind) = self.expected.pop_front() else {
            return Next::Read;
        };
        if kind != DumpKind::Routes6 {
            return Next::Read;
        }
        let Some(mirror) = self.mirror.as_mut() else {
            return Next::Read;
        };
        // A route dump the table changed under (NLM_F_DUMP_INTR) may list a route after its
        // deletion was announced: no sweep on it, dump again.
        if self.stats.dump_interrupted > self.intr_at_dump {
            self.interrupted += 1;
            tracing::info!("kernel: the table changed during the dump: dumping again");
            return Next::Dump;
        }
        let n = mirror.dump_complete(rib);
        watch.swept();
        if n > 0 {
            tracing::info!(
                routes = n,
                "kernel: routes gone from the kernel's table removed"
            );
        }
        Next::Read
    }

    fn link<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        l: &Link,
        router: &mut Router<E4, E6>,
    ) {
        let deleted = l.op == vfsr_netlink::Op::Del;
        for p in &mut self.ports {
            let before = p.up();
            if p.ids.iface == l.ifindex {
                p.iface_up = !deleted && l.admin_up && l.lower_up;
            } else if p.ids.tap == Some(l.ifindex) {
                p.tap_up = !deleted && l.admin_up;
            } else {
                continue;
            }
            let up = p.up();
            if up != before {
                self.link_changes += 1;
                let r = router.set_port_up(p.ids.port, up);
                tracing::warn!(
                    port = p.ids.port,
                    up,
                    nexthops = if up { r.activated } else { r.deactivated },
                    "port {}: next hops through it {}",
                    if up { "up" } else { "down" },
                    if up { "usable again" } else { "unusable" }
                );
            }
        }
    }

    /// State and counters for the stats file.
    pub fn stats(&self, rib: &Rib) -> Value {
        let mirror = self.mirror.as_ref().map(|m| {
            json!({
                "table": m.config().table,
                "dumps": m.dumps(),
                "dumping": m.dumping(),
                "superseded_listings": m.superseded(),
                "stale_routes": rib.stale_routes(Source::Kernel),
                "counters": super::counters_json(m.counters()),
            })
        });
        json!({
            "overruns": self.overruns,
            "malformed": self.malformed,
            "link_changes": self.link_changes,
            "interrupted_dumps": self.interrupted,
            "mirror": mirror,
            "decoder": super::fpm::decode_json(&self.stats),
        })
    }
}

/// The socket and the feed it reads into.
pub struct NetlinkSource {
    sock: RouteSocket,
    /// The receive buffer asked for.
    rcvbuf: usize,
    feed: KernelFeed,
    msgs: Vec<Message>,
    /// Per message of `msgs`: part of a dump (else a notification).
    multi: Vec<bool>,
}

impl NetlinkSource {
    /// Opens the socket and starts the dumps.
    pub fn open<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        kernel: Option<&KernelPlan>,
        ports: &[KernelIds],
        router: &mut Router<E4, E6>,
    ) -> Result<NetlinkSource> {
        let rcvbuf = kernel.map_or(LINK_RCVBUF, |k| k.rcvbuf);
        let sock = open(rcvbuf, kernel.is_some()).map_err(|e| Error::os("rtnetlink socket", e))?;
        let mut n = NetlinkSource {
            sock,
            rcvbuf,
            feed: KernelFeed::new(kernel.map(|k| k.mirror.clone()), ports),
            msgs: Vec::with_capacity(1024),
            multi: Vec::with_capacity(1024),
        };
        n.dump(router.rib_mut())
            .map_err(|e| Error::os("rtnetlink dump", e))?;
        Ok(n)
    }

    /// The socket's descriptor.
    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// The receive buffer obtained, bytes.
    pub fn rcvbuf(&self) -> usize {
        self.sock.rcvbuf()
    }

    /// The mirror, if on.
    pub fn mirror(&self) -> Option<&KernelMirror> {
        self.feed.mirror()
    }

    /// Reopens the socket (a dump the kernel was still sending on the old one would mix
    /// with the new dump's replies), then dumps.
    fn redump(&mut self, rib: &mut Rib) {
        let r = open(self.rcvbuf, self.feed.mirror().is_some()).and_then(|sock| {
            self.sock = sock;
            self.dump(rib)
        });
        if let Err(e) = r {
            tracing::error!(error = %e, "rtnetlink: dump");
        }
    }

    fn dump(&mut self, rib: &mut Rib) -> std::io::Result<()> {
        self.sock.reset_dumps();
        for k in self.feed.begin_dump(rib) {
            self.sock.request_dump(*k)?;
        }
        Ok(())
    }

    /// Reads (within a budget) and applies what was read; dumps again after an overrun, a
    /// malformed datagram or a route dump the table changed under.
    pub fn work<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        _now: Instant,
        router: &mut Router<E4, E6>,
        ifmap: &IfMap,
    ) {
        for _ in 0..STEP_READS {
            self.msgs.clear();
            self.multi.clear();
            let status = match self.sock.recv_marked(
                &mut self.msgs,
                &mut self.multi,
                self.feed.decode_stats_mut(),
            ) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "rtnetlink: receive");
                    break;
                }
            };
            let mut next = self
                .feed
                .apply(&self.msgs, &self.multi, router, ifmap, &mut ());
            match status {
                RecvStatus::Messages(_) => {}
                RecvStatus::WouldBlock => {
                    if next == Next::Read {
                        break;
                    }
                }
                RecvStatus::Overrun => next = self.feed.lost(true),
                RecvStatus::Malformed(_) => next = self.feed.lost(false),
            }
            if next == Next::Dump {
                self.redump(router.rib_mut());
                break;
            }
        }
        self.feed.end_batch(router, ifmap);
    }

    /// State and counters for the stats file.
    pub fn stats(&self, rib: &Rib) -> Value {
        let mut v = self.feed.stats(rib);
        if let Some(m) = v.as_object_mut() {
            m.insert("rcvbuf".into(), json!(self.sock.rcvbuf()));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use vfsr_lpm::radix::Radix;
    use vfsr_netlink::Op;
    use vfsr_router::{PortSpec, RouterConfig};
    use vfsr_wire::MacAddr;

    type R = Router<Radix<u32>, Radix<u128>>;

    fn router() -> R {
        let mut a = PortSpec::new(1, MacAddr([2, 0, 0, 0, 0, 1])).named("p0");
        a.addrs4 = vec![(Ipv4Addr::new(10, 0, 0, 1), 24)];
        Router::new(vec![a], RouterConfig::default()).unwrap()
    }

    fn link(ifindex: u32, up: bool) -> Message {
        Message::Link(Link {
            op: Op::New,
            ifindex,
            name: None,
            admin_up: up,
            lower_up: up,
            mac: None,
            mtu: None,
        })
    }

    /// Counts what it is shown.
    #[derive(Default)]
    struct Seen {
        runs: usize,
        swept: usize,
    }

    impl FeedWatch for Seen {
        fn run(&mut self, _: &[Message], _: &[bool], _: &KernelMirror) {
            self.runs += 1;
        }
        fn swept(&mut self) {
            self.swept += 1;
        }
    }

    const IDS: KernelIds = KernelIds {
        port: 1,
        iface: 7,
        tap: Some(8),
    };

    #[test]
    fn a_tap_going_down_takes_the_port_down_and_back() {
        let mut r = router();
        let ifmap = IfMap::new();
        let mut feed = KernelFeed::new(None, &[IDS]);
        assert_eq!(feed.begin_dump(r.rib_mut()), &[DumpKind::Links]);
        let mut seen = Seen::default();
        let msgs = [link(8, false), link(99, false), Message::Done];
        let next = feed.apply(&msgs, &[true; 3], &mut r, &ifmap, &mut seen);
        assert_eq!(next, Next::Read);
        assert_eq!(feed.link_changes, 1, "only the port's TAP counts");
        assert_eq!(seen.runs, 0, "no mirror, no runs");
        feed.apply(&[link(8, true)], &[false], &mut r, &ifmap, &mut seen);
        assert_eq!(feed.link_changes, 2);
        // Up again while already up: no change.
        feed.apply(&[link(7, true)], &[false], &mut r, &ifmap, &mut seen);
        assert_eq!(feed.link_changes, 2);
    }

    #[test]
    fn the_sweep_follows_a_whole_dump_and_an_interrupted_one_is_redone() {
        let mut r = router();
        let ifmap = IfMap::new();
        let mut feed = KernelFeed::new(Some(KernelConfig::default()), &[IDS]);
        assert_eq!(feed.begin_dump(r.rib_mut()).len(), 4);
        let mut seen = Seen::default();
        let ends = [Message::Done, Message::Done, Message::Done, Message::Done];
        let next = feed.apply(&ends, &[true; 4], &mut r, &ifmap, &mut seen);
        assert_eq!((next, seen.swept), (Next::Read, 1));
        assert!(!feed.mirror().unwrap().dumping());

        // The table changes under the next dump: no sweep, the feed asks for the dumps.
        feed.begin_dump(r.rib_mut());
        feed.decode_stats_mut().dump_interrupted += 1;
        let next = feed.apply(&ends, &[true; 4], &mut r, &ifmap, &mut seen);
        assert_eq!((next, seen.swept, feed.interrupted), (Next::Dump, 1, 1));

        // Lost messages are counted by kind and always ask for the dumps.
        assert_eq!(feed.lost(true), Next::Dump);
        assert_eq!(feed.lost(false), Next::Dump);
        assert_eq!((feed.overruns, feed.malformed), (1, 1));
        assert_eq!(feed.stats(r.rib())["overruns"], 1);
    }
}
