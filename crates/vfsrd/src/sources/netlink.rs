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

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use serde_json::{json, Value};
use vfsr_lpm::LpmUpdate;
use vfsr_netlink::msg::{Link, Message};
use vfsr_netlink::{DecodeStats, DumpKind, RecvStatus, RouteSocket};
use vfsr_rib::{Rib, Source};
use vfsr_router::kernel::KernelMirror;
use vfsr_router::{IfMap, Router};

use super::KernelIds;
use crate::config::KernelPlan;

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

/// The socket and what it feeds.
pub struct NetlinkSource {
    sock: RouteSocket,
    /// The receive buffer asked for.
    rcvbuf: usize,
    mirror: Option<KernelMirror>,
    ports: Vec<PortLink>,
    /// The dumps requested, in order; each ends with a `Done` (or an error).
    expected: VecDeque<DumpKind>,
    msgs: Vec<Message>,
    /// Per message of `msgs`: part of a dump (else a notification).
    multi: Vec<bool>,
    stats: DecodeStats,
    overruns: u64,
    malformed: u64,
    link_changes: u64,
    /// The decoder's count of interrupted-dump messages when the current dump began.
    intr_at_dump: u64,
    /// Route dumps redone because the table changed under them.
    interrupted: u64,
}

impl NetlinkSource {
    /// Opens the socket and starts the dumps.
    pub fn open<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        kernel: Option<&KernelPlan>,
        ports: &[KernelIds],
        router: &mut Router<E4, E6>,
    ) -> Result<NetlinkSource, String> {
        let rcvbuf = kernel.map_or(LINK_RCVBUF, |k| k.rcvbuf);
        let sock = open(rcvbuf, kernel.is_some()).map_err(|e| format!("rtnetlink socket: {e}"))?;
        let mut n = NetlinkSource {
            sock,
            rcvbuf,
            mirror: kernel.map(|k| KernelMirror::new(k.mirror.clone())),
            ports: ports
                .iter()
                .map(|ids| PortLink {
                    ids: *ids,
                    iface_up: true,
                    tap_up: true,
                })
                .collect(),
            expected: VecDeque::new(),
            msgs: Vec::with_capacity(1024),
            multi: Vec::with_capacity(1024),
            stats: DecodeStats::default(),
            overruns: 0,
            malformed: 0,
            link_changes: 0,
            intr_at_dump: 0,
            interrupted: 0,
        };
        n.dump(router.rib_mut())
            .map_err(|e| format!("rtnetlink dump: {e}"))?;
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
        self.mirror.as_ref()
    }

    /// Reopens the socket (a dump the kernel was still sending on the old one would mix
    /// with the new dump's replies), then dumps.
    fn redump(&mut self, rib: &mut Rib) -> std::io::Result<()> {
        self.sock = open(self.rcvbuf, self.mirror.is_some())?;
        self.dump(rib)
    }

    fn dump(&mut self, rib: &mut Rib) -> std::io::Result<()> {
        self.sock.reset_dumps();
        self.expected.clear();
        let kinds: &[DumpKind] = if self.mirror.is_some() {
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
        for k in kinds {
            self.sock.request_dump(*k)?;
            self.expected.push_back(*k);
        }
        Ok(())
    }

    /// Reads (within a budget), applies link changes to the ports and route changes to the
    /// mirror; dumps again after an overrun.
    pub fn work<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        _now: Instant,
        router: &mut Router<E4, E6>,
        ifmap: &IfMap,
    ) {
        let distance = router.distance(Source::Kernel);
        for _ in 0..STEP_READS {
            self.msgs.clear();
            self.multi.clear();
            let status =
                match self
                    .sock
                    .recv_marked(&mut self.msgs, &mut self.multi, &mut self.stats)
                {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::error!(error = %e, "rtnetlink: receive");
                        break;
                    }
                };
            let msgs = std::mem::take(&mut self.msgs);
            let multi = std::mem::take(&mut self.multi);
            self.apply(&msgs, &multi, router, ifmap, distance);
            self.msgs = msgs;
            self.multi = multi;
            match status {
                RecvStatus::Messages(_) => {}
                RecvStatus::WouldBlock => break,
                RecvStatus::Overrun | RecvStatus::Malformed(_) => {
                    if matches!(status, RecvStatus::Overrun) {
                        self.overruns += 1;
                        if let Some(m) = self.mirror.as_mut() {
                            m.overrun();
                        }
                    } else {
                        self.malformed += 1;
                    }
                    tracing::warn!(
                        "rtnetlink: {} ({} so far): dumping again",
                        if matches!(status, RecvStatus::Overrun) {
                            "overrun, messages lost"
                        } else {
                            "malformed datagram"
                        },
                        self.overruns + self.malformed
                    );
                    if let Err(e) = self.redump(router.rib_mut()) {
                        tracing::error!(error = %e, "rtnetlink: dump");
                    }
                    break;
                }
            }
        }
        if let Some(m) = self.mirror.as_mut() {
            m.end_batch(router.rib_mut(), ifmap, distance);
        }
    }

    fn apply<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        msgs: &[Message],
        multi: &[bool],
        router: &mut Router<E4, E6>,
        ifmap: &IfMap,
        distance: u8,
    ) {
        // Route messages go to the mirror in runs; links and dump ends are handled in order.
        let mut start = 0usize;
        for (i, m) in msgs.iter().enumerate() {
            let boundary = matches!(m, Message::Link(_) | Message::Done | Message::Error(_));
            if !boundary {
                continue;
            }
            if let (Some(mirror), Some(run)) = (self.mirror.as_mut(), msgs.get(start..i)) {
                let marks = multi.get(start..i).unwrap_or_default();
                mirror.messages_marked(run, marks, router.rib_mut(), ifmap, distance);
            }
            start = i + 1;
            match m {
                Message::Link(l) => self.link(l, router),
                Message::Done | Message::Error(_) => {
                    if let Some(kind) = self.expected.pop_front() {
                        // A route dump the table changed under (NLM_F_DUMP_INTR) may list a
                        // route after its deletion was announced: no sweep on it, dump again.
                        if kind == DumpKind::Routes6
                            && self.mirror.is_some()
                            && self.stats.dump_interrupted > self.intr_at_dump
                        {
                            self.interrupted += 1;
                            tracing::info!(
                                "kernel: the table changed during the dump: dumping again"
                            );
                            if let Err(e) = self.redump(router.rib_mut()) {
                                tracing::error!(error = %e, "rtnetlink: dump");
                            }
                            return;
                        }
                        if kind == DumpKind::Routes6 {
                            if let Some(mirror) = self.mirror.as_mut() {
                                let n = mirror.dump_complete(router.rib_mut());
                                if n > 0 {
                                    tracing::info!(
                                        routes = n,
                                        "kernel: routes gone from the kernel's table removed"
                                    );
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if let (Some(mirror), Some(run)) = (self.mirror.as_mut(), msgs.get(start..)) {
            if !run.is_empty() {
                let marks = multi.get(start..).unwrap_or_default();
                mirror.messages_marked(run, marks, router.rib_mut(), ifmap, distance);
            }
        }
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
            "rcvbuf": self.sock.rcvbuf(),
            "overruns": self.overruns,
            "malformed": self.malformed,
            "link_changes": self.link_changes,
            "interrupted_dumps": self.interrupted,
            "mirror": mirror,
            "decoder": super::fpm::decode_json(&self.stats),
        })
    }
}
