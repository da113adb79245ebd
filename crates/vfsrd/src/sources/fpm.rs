//! zebra's FPM connection: a TCP listener (one connection at a time; a new one replaces the
//! old, as zebra only reconnects after losing the first), its byte stream cut into frames
//! and decoded by `vfsr-netlink`, the messages handed to the session of `vfsr-router`.
//!
//! A frame that is not FPM or not netlink (bad version, bad length, a netlink message cut
//! short) closes the connection: the reason is logged and counted, and the routes taken so
//! far stay (stale until zebra reconnects and replays them, see `vfsr_router::fpm`).

use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use serde_json::{json, Value};
use vfsr_lpm::LpmUpdate;
use vfsr_netlink::fpm::{FpmStream, PumpStatus};
use vfsr_netlink::msg::Message;
use vfsr_netlink::DecodeStats;
use vfsr_rib::{Rib, Source};
use vfsr_router::fpm::{FpmSession, FpmState};
use vfsr_router::{IfMap, Router};

use crate::config::FpmPlan;
use crate::error::{Error, Result};

/// Bytes read from zebra in one step at most (about 20,000 routes).
const STEP_BUDGET: usize = 2 << 20;
/// The connection's receive buffer: a burst of a full table's replay waits in the kernel
/// while the control plane answers ARP.
const RCVBUF: libc::c_int = 8 << 20;

/// The listener, the connection and the session.
pub struct FpmServer {
    listener: TcpListener,
    conn: Option<(TcpStream, FpmStream)>,
    session: FpmSession,
    msgs: Vec<Message>,
    /// What the decoder saw over every connection.
    decoded: DecodeStats,
    addr: String,
}

impl FpmServer {
    /// Listens where `plan` says.
    pub fn bind(plan: &FpmPlan) -> Result<FpmServer> {
        let listener = TcpListener::bind(plan.listen)
            .map_err(|e| Error::os(format!("fpm: cannot listen on {}", plan.listen), e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::os("fpm: non-blocking listener", e))?;
        Ok(FpmServer {
            addr: listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
            listener,
            conn: None,
            session: FpmSession::new(plan.session.clone()),
            msgs: Vec::with_capacity(4096),
            decoded: DecodeStats::default(),
        })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> &str {
        &self.addr
    }

    /// The session.
    pub fn session(&self) -> &FpmSession {
        &self.session
    }

    /// Descriptors to poll: the listener and the connection.
    pub fn fds(&self) -> Vec<RawFd> {
        let mut v = vec![self.listener.as_raw_fd()];
        if let Some((s, _)) = &self.conn {
            v.push(s.as_raw_fd());
        }
        v
    }

    /// When the session's timer is due.
    pub fn deadline(&self) -> Option<Instant> {
        self.session.deadline()
    }

    fn close(&mut self, now: Instant, reason: &'static str, detail: &str, rib: &mut Rib) {
        if let Some((_, stream)) = self.conn.take() {
            add_stats(&mut self.decoded, stream.stats());
            tracing::warn!(
                reason = %reason,
                detail = %detail,
                routes_kept = rib.v4().routes_by_source().get(Source::Fpm.index()).copied().unwrap_or(0)
                    + rib.v6().routes_by_source().get(Source::Fpm.index()).copied().unwrap_or(0),
                "fpm: connection closed; its routes are kept, stale until zebra replays them"
            );
        }
        self.session.disconnected(now, reason, rib);
    }

    /// Accepts, reads and applies, then runs the session's timers.
    pub fn work<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        now: Instant,
        router: &mut Router<E4, E6>,
        ifmap: &IfMap,
    ) {
        let distance = router.distance(Source::Fpm);
        loop {
            match self.listener.accept() {
                Ok((s, peer)) => {
                    if self.conn.is_some() {
                        self.close(now, "replaced", "", router.rib_mut());
                    }
                    if let Err(e) = prepare(&s) {
                        tracing::error!(%peer, error = %e, "fpm: preparing the connection");
                        continue;
                    }
                    tracing::info!(%peer, "fpm: zebra connected");
                    self.conn = Some((s, FpmStream::with_capacity(1 << 20)));
                    self.session.connected(now, router.rib_mut());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::error!(error = %e, "fpm: accept");
                    break;
                }
            }
        }
        if let Some((sock, stream)) = self.conn.as_mut() {
            self.msgs.clear();
            let res = stream.pump(sock, &mut self.msgs, STEP_BUDGET);
            // Whatever decoded before an error is applied: the routes learned so far stay.
            if !self.msgs.is_empty() {
                self.session
                    .frame(&self.msgs, now, router.rib_mut(), ifmap, distance);
                self.session.end_batch(router.rib_mut(), ifmap, distance);
            }
            match res {
                Ok(PumpStatus::WouldBlock) | Ok(PumpStatus::Budget) => {}
                Ok(PumpStatus::Eof) => {
                    let partial = self
                        .conn
                        .as_mut()
                        .map(|(_, s)| s.reader().buffered())
                        .unwrap_or(0);
                    let detail = if partial > 0 {
                        format!("{partial} bytes of an unfinished frame dropped")
                    } else {
                        String::new()
                    };
                    self.close(now, "peer_closed", &detail, router.rib_mut());
                }
                Err(e) => {
                    let detail = e.to_string();
                    self.close(now, e.reason(), &detail, router.rib_mut());
                }
            }
        }
        let swept = self.session.poll(now, router.rib_mut());
        if swept > 0 {
            let why = match self.session.state() {
                FpmState::Disconnected { .. } => "zebra did not come back",
                _ => "not replayed",
            };
            tracing::info!(routes = swept, why = %why, "fpm: stale routes removed");
        }
    }

    /// State and counters for the stats file.
    pub fn stats(&self, rib: &Rib) -> Value {
        let mut decoded = self.decoded;
        if let Some((_, s)) = &self.conn {
            add_stats(&mut decoded, s.stats());
        }
        let state = match self.session.state() {
            FpmState::Waiting => "waiting",
            FpmState::Connected { replaying: true } => "replaying",
            FpmState::Connected { replaying: false } => "in_sync",
            FpmState::Disconnected { .. } => "disconnected",
        };
        json!({
            "listen": self.addr,
            "state": state,
            "connections": self.session.connections(),
            "closes": self.session.closes(),
            "objects": self.session.objects(),
            "stale_routes": rib.stale_routes(Source::Fpm),
            "counters": super::counters_json(self.session.counters()),
            "decoder": decode_json(&decoded),
        })
    }
}

fn prepare(s: &TcpStream) -> io::Result<()> {
    s.set_nonblocking(true)?;
    let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a live socket, a pointer to a local int of `len` bytes.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&RCVBUF as *const libc::c_int).cast(),
            len,
        );
    }
    Ok(())
}

/// Adds one connection's decoder counters to the running totals.
pub fn add_stats(into: &mut DecodeStats, from: &DecodeStats) {
    into.routes += from.routes;
    into.nexthops += from.nexthops;
    into.links += from.links;
    into.addrs += from.addrs;
    into.done += from.done;
    into.errors += from.errors;
    into.noops += from.noops;
    into.unknown_types += from.unknown_types;
    into.unused_attrs += from.unused_attrs;
    into.dump_interrupted += from.dump_interrupted;
    let (a, b) = (&mut into.skipped, &from.skipped);
    a.family += b.family;
    a.prefix_len += b.prefix_len;
    a.address += b.address;
    a.value += b.value;
    a.missing += b.missing;
    a.group += b.group;
    a.encap += b.encap;
    a.cloned += b.cloned;
    a.tos += b.tos;
}

/// The decoder's counters as JSON.
pub fn decode_json(d: &DecodeStats) -> Value {
    let mut skipped = serde_json::Map::new();
    for (name, n) in d.skipped.by_reason() {
        if n > 0 {
            skipped.insert(name.into(), json!(n));
        }
    }
    json!({
        "routes": d.routes,
        "nexthops": d.nexthops,
        "links": d.links,
        "addrs": d.addrs,
        "unknown_types": d.unknown_types,
        "unused_attrs": d.unused_attrs,
        "dump_interrupted": d.dump_interrupted,
        "skipped": Value::Object(skipped),
    })
}
