//! The control API's server (protocol: `vfsr-api`): a Unix socket the control plane's loop
//! serves between its other work, never blocking on a client.
//!
//! ```text
//!   vfsrctl / scripts ──JSON line──▶ ApiServer::work ──▶ handle(Request, View) ──▶ answer line
//!                                          │                  │ reads: Router (RIB, FIB, next
//!                                          │                  │ hops, neighbors), counters, stats
//!                                          │                  └ changes: static routes, neighbor
//!                                          │                    tables, reload
//!                      one request at a time per client, every client each step
//! ```
//!
//! The socket is created mode 0660, owned by root and the configured group (`[api] group`):
//! a user outside both gets "permission denied" from the kernel, which `vfsrctl` explains. A
//! socket file left by a stopped vfsrd is replaced; one a running vfsrd answers on is left
//! alone and the API stays off (logged). Answers that list the whole FIB or RIB are cut at
//! [`MAX_ROWS`] rows (the answer says so and gives the total): a full table listed at once
//! would hold up the control plane for a second.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::IpAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use vfsr_api::{parse_request, Answer, Request, MAX_REQUEST};
use vfsr_fib::nexthop::Forward;
use vfsr_fwd::{Counters, DropReason, Event, PuntClass, SharedCounters};
use vfsr_io::xdp::FastPath;
use vfsr_lpm::{LpmUpdate, Prefix};
use vfsr_rib::{IpPrefix, RibFamily, Source};

use crate::config::Plan;
use crate::control::{Control, ControlCounters};
use crate::dataplane::WorkerStats;
use crate::dump::describe;
use crate::error::Error;
use crate::fastpath::InstallCounters;
use crate::metrics::kernel_stat;

/// Most rows an answer lists.
pub const MAX_ROWS: usize = 100_000;
/// Most bytes of answers waiting for a slow client before it is dropped.
const MAX_PENDING: usize = 64 << 20;

struct Conn {
    stream: UnixStream,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    /// Close once `out` is written (after an oversized request).
    closing: bool,
    dead: bool,
}

/// Carries out a reload: reads the file, applies the difference to the control plane and
/// the configuration in force.
pub type Reload<'r, E4, E6> =
    dyn FnMut(&mut Control<E4, E6>, &mut Plan) -> Result<Value, Error> + 'r;

/// What a request reads and changes.
pub struct View<'a, E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone> {
    /// The control plane (router, ports, sources, its counters).
    pub control: &'a mut Control<E4, E6>,
    /// The configuration in force.
    pub plan: &'a mut Plan,
    /// The workers' counters.
    pub shared: &'a [Arc<SharedCounters>],
    /// The workers' loop statistics.
    pub wstats: &'a [Arc<WorkerStats>],
    /// The ports' XDP fast paths.
    pub fast: &'a [Option<FastPath>],
    /// Each port's backend as running (`xdp`, `packet`, ...).
    pub backends: &'a [String],
    /// The workers' thread ids.
    pub tids: &'a [AtomicI32],
    /// Time since the router started.
    pub uptime: Duration,
    /// Carries out a reload (reads the file, applies the difference).
    pub reload: &'a mut Reload<'a, E4, E6>,
}

/// The listener, its clients, and what answers their requests.
pub struct ApiServer {
    listener: UnixListener,
    path: PathBuf,
    conns: Vec<Conn>,
    answers: Answers,
}

/// Answers request lines, apart from any socket: the counters' zero points (`clear
/// counters`) are its state. [`ApiServer`] feeds it each client's bytes; the tests and the
/// fuzz target feed it bytes of their own.
#[derive(Default)]
pub struct Answers {
    base_workers: Vec<Counters>,
    base_control: ControlCounters,
    base_port_drops: Vec<[u64; DropReason::COUNT]>,
}

fn group_id(name: &str) -> Result<u32, Error> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| Error::invalid(format!("group {name:?}"), "not a valid name"))?;
    // SAFETY: getgrnam with a valid C string; the result is read at once, before any other
    // call that could reuse its static storage.
    let g = unsafe { libc::getgrnam(c.as_ptr()) };
    if g.is_null() {
        return Err(Error::invalid(format!("group {name:?}"), "no such group"));
    }
    // SAFETY: `g` is non-null and points at libc's group record.
    Ok(unsafe { (*g).gr_gid })
}

impl ApiServer {
    /// Listens at `path` (mode 0660, group `group` if given).
    pub fn bind(path: &Path, group: Option<&str>) -> Result<ApiServer, Error> {
        let shown = path.display();
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(Error::invalid(
                    shown.to_string(),
                    "a running vfsrd answers there",
                ));
            }
            std::fs::remove_file(path)
                .map_err(|e| Error::os(format!("{shown}: removing a stale socket"), e))?;
        }
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() && !dir.exists() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| Error::os(dir.display().to_string(), e))?;
            }
        }
        let listener = UnixListener::bind(path).map_err(|e| Error::os(shown.to_string(), e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::os(shown.to_string(), e))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
            .map_err(|e| Error::os(format!("{shown}: mode 0660"), e))?;
        if let Some(g) = group {
            let gid = group_id(g)?;
            std::os::unix::fs::chown(path, Some(0), Some(gid))
                .map_err(|e| Error::os(format!("{shown}: chown to group {g}"), e))?;
        }
        Ok(ApiServer {
            listener,
            path: path.to_path_buf(),
            conns: Vec::new(),
            answers: Answers::default(),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Descriptors to poll: the listener and every client.
    pub fn fds(&self) -> Vec<RawFd> {
        let mut v = vec![self.listener.as_raw_fd()];
        v.extend(self.conns.iter().map(|c| c.stream.as_raw_fd()));
        v
    }

    /// Clients connected now.
    pub fn clients(&self) -> usize {
        self.conns.len()
    }

    /// Accepts, reads every complete request, answers, writes what the clients take.
    pub fn work<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        view: &mut View<'_, E4, E6>,
    ) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_ok() {
                        self.conns.push(Conn {
                            stream,
                            inbuf: Vec::new(),
                            out: Vec::new(),
                            closing: false,
                            dead: false,
                        });
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let mut conns = std::mem::take(&mut self.conns);
        for c in &mut conns {
            self.serve(c, view);
        }
        conns.retain(|c| !c.dead);
        self.conns = conns;
    }

    fn serve<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        c: &mut Conn,
        view: &mut View<'_, E4, E6>,
    ) {
        let mut buf = [0u8; 8192];
        // A bounded read per step: a client cannot keep the loop here.
        for _ in 0..16 {
            if c.closing {
                break;
            }
            match c.stream.read(&mut buf) {
                Ok(0) => {
                    c.dead = true;
                    return;
                }
                Ok(n) => c.inbuf.extend_from_slice(buf.get(..n).unwrap_or_default()),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    c.dead = true;
                    return;
                }
            }
        }
        if self.answers.take_lines(&mut c.inbuf, &mut c.out, view) {
            c.closing = true;
        }
        while !c.out.is_empty() {
            match c.stream.write(&c.out) {
                Ok(0) => {
                    c.dead = true;
                    return;
                }
                Ok(n) => {
                    c.out.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    c.dead = true;
                    return;
                }
            }
        }
        if c.out.len() > MAX_PENDING || (c.closing && c.out.is_empty()) {
            c.dead = true;
        }
    }
}

impl Answers {
    /// Answers every complete line in `inbuf` (taking it out) into `out`, one answer line
    /// per request line, in order. A rest without a newline longer than [`MAX_REQUEST`]
    /// cannot be a request: it is dropped and answered with an error, and the result is
    /// `true`, for the connection to be closed once `out` is written.
    pub fn take_lines<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        inbuf: &mut Vec<u8>,
        out: &mut Vec<u8>,
        view: &mut View<'_, E4, E6>,
    ) -> bool {
        while let Some(nl) = inbuf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = inbuf.drain(..=nl).collect();
            let answer = match parse_request(&line) {
                Ok(req) => self.handle(req, view),
                Err(e) => Answer::error(e.to_string()),
            };
            out.extend_from_slice(answer.to_line().as_bytes());
        }
        if inbuf.len() <= MAX_REQUEST {
            return false;
        }
        inbuf.clear();
        let too_long = format!("request longer than {MAX_REQUEST} bytes: closing the connection");
        out.extend_from_slice(Answer::error(too_long).to_line().as_bytes());
        true
    }

    /// Answers one request.
    pub fn handle<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        req: Request,
        v: &mut View<'_, E4, E6>,
    ) -> Answer {
        let r = match req {
            Request::ShowInterfaces => Ok(interfaces(v)),
            Request::ShowRoute { prefix, source } => show_route(v, prefix, source),
            Request::RouteGet { addr } => route_get(v, &addr),
            Request::ShowRib { prefix } => show_rib(v, prefix),
            Request::ShowSources => Ok(v.control.sources.stats(&v.control.router)),
            Request::ShowNeighbors { port } => neighbors(v, port),
            Request::ShowNexthops => Ok(nexthops(v)),
            Request::ShowFlows => Ok(self.flows(v)),
            Request::ShowFastPath => Ok(fast_path(v)),
            Request::ShowWorkers => Ok(self.workers(v)),
            Request::ShowCounters { nonzero } => Ok(self.counters(v, nonzero)),
            Request::ClearCounters => {
                self.base_workers = v.shared.iter().map(|s| s.read()).collect();
                self.base_control = v.control.counters;
                self.base_port_drops = port_drops(v.wstats);
                Ok(json!({"cleared": true}))
            }
            Request::RouteAdd {
                prefix,
                via,
                blackhole,
            } => route_add(v, &prefix, &via, blackhole),
            Request::RouteDel { prefix } => route_del(v, &prefix),
            Request::NeighborFlush { port } => neighbor_flush(v, port),
            Request::Reload => (v.reload)(v.control, v.plan).map_err(|e| e.to_string()),
        };
        match r {
            Ok(d) => Answer::data(d),
            Err(e) => Answer::error(e),
        }
    }

    fn worker_counters<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &self,
        v: &View<'_, E4, E6>,
    ) -> Vec<Counters> {
        v.shared
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let now = s.read();
                match self.base_workers.get(i) {
                    Some(b) => since(&now, b),
                    None => now,
                }
            })
            .collect()
    }

    fn flows<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &self,
        v: &View<'_, E4, E6>,
    ) -> Value {
        let counters = self.worker_counters(v);
        let rows: Vec<Value> = v
            .wstats
            .iter()
            .enumerate()
            .map(|(w, st)| {
                let c = counters.get(w).cloned().unwrap_or_default();
                let table = st.flow.lock().ok().and_then(|g| *g);
                let (f, entries) = table.unwrap_or_default();
                let looked = f.hits + f.misses + f.stale_refreshes;
                json!({
                    "worker": w,
                    "enabled": table.is_some(),
                    "capacity": v.plan.flow_entries,
                    "entries": entries,
                    "occupancy": if v.plan.flow_entries == 0 { 0.0 }
                        else { entries as f64 / v.plan.flow_entries as f64 },
                    "hits": f.hits,
                    "misses": f.misses,
                    "stale": f.stale_refreshes,
                    "inserts": f.inserts,
                    "evictions": f.evictions,
                    "refusals": f.refusals,
                    "expirations": f.expirations,
                    "invalidations": f.invalidations,
                    "ecmp_kept": c.get(Event::EcmpKept),
                    "hit_rate": if looked == 0 { 0.0 } else { f.hits as f64 / looked as f64 },
                })
            })
            .collect();
        json!({"workers": rows, "idle_timeout_ms": v.plan.flow_idle_ms,
               "protect_ms": v.plan.flow_protect_ms})
    }

    fn workers<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &self,
        v: &View<'_, E4, E6>,
    ) -> Value {
        let secs = v.uptime.as_secs_f64().max(1e-9);
        let counters = self.worker_counters(v);
        let rows: Vec<Value> = v
            .wstats
            .iter()
            .enumerate()
            .map(|(w, st)| {
                let cpu = v
                    .tids
                    .get(w)
                    .map(|t| crate::runtime::thread_cpu_seconds(t.load(Ordering::Relaxed)))
                    .unwrap_or(0.0);
                let rx = counters.get(w).map_or(0, |c| c.rx());
                let batches = st.batches.load(Ordering::Relaxed);
                json!({
                    "worker": w,
                    "core": v.plan.workers.get(w),
                    "busy": cpu / secs,
                    "cpu_s": cpu,
                    "rx": rx,
                    "pps": rx as f64 / secs,
                    "batches": batches,
                    "batch_fill": if batches == 0 { 0.0 } else { rx as f64 / batches as f64 },
                    "batch_size": v.plan.batch,
                    "sleeps": st.sleeps.load(Ordering::Relaxed),
                    "punts_limited": st.punts_limited.load(Ordering::Relaxed),
                })
            })
            .collect();
        json!({"uptime_s": secs, "workers": rows})
    }

    fn counters<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &self,
        v: &View<'_, E4, E6>,
        nonzero: bool,
    ) -> Value {
        let list = |c: &Counters| -> Value {
            let mut m = Map::new();
            if nonzero {
                for (group, name, n) in c.nonzero() {
                    m.insert(format!("{group}.{name}"), json!(n));
                }
            } else {
                for r in DropReason::ALL {
                    m.insert(format!("drop.{}", r.name()), json!(c.dropped(*r)));
                }
                for e in Event::ALL {
                    m.insert(format!("event.{}", e.name()), json!(c.get(*e)));
                }
                for (g, n, x) in c.nonzero() {
                    if g == "outcome" || g == "punt" {
                        m.insert(format!("{g}.{n}"), json!(x));
                    }
                }
            }
            Value::Object(m)
        };
        let workers: Vec<Value> = self
            .worker_counters(v)
            .iter()
            .enumerate()
            .map(|(w, c)| json!({"worker": w, "counters": list(c)}))
            .collect();
        let control = control_since(&v.control.counters, &self.base_control);
        let mut cm = Map::new();
        if let Value::Object(o) = json!(control) {
            for (k, mut x) in o {
                // The per-class arrays, by class name.
                if let (true, Some(a)) = (PER_CLASS.contains(&k.as_str()), x.as_array()) {
                    let named: Map<String, Value> = PuntClass::ALL
                        .iter()
                        .zip(a)
                        .map(|(c, n)| (c.name().to_string(), n.clone()))
                        .collect();
                    x = Value::Object(named);
                }
                let zero = x.as_u64() == Some(0)
                    || x.as_object()
                        .is_some_and(|m| m.values().all(|n| n.as_u64() == Some(0)));
                if !(nonzero && zero) {
                    cm.insert(k, x);
                }
            }
        }
        let by_port = port_drops(v.wstats);
        let ports: Vec<Value> = v
            .plan
            .interfaces
            .iter()
            .enumerate()
            .map(|(i, itf)| {
                let mut m = Map::new();
                let drops = by_port.get(i).copied().unwrap_or([0; DropReason::COUNT]);
                let base = self
                    .base_port_drops
                    .get(i)
                    .copied()
                    .unwrap_or([0; DropReason::COUNT]);
                for r in DropReason::ALL {
                    let n = drops
                        .get(r.index())
                        .copied()
                        .unwrap_or(0)
                        .wrapping_sub(base.get(r.index()).copied().unwrap_or(0));
                    if !(nonzero && n == 0) {
                        m.insert(format!("drop.{}", r.name()), json!(n));
                    }
                }
                json!({"port": itf.name, "counters": Value::Object(m)})
            })
            .collect();
        json!({"workers": workers, "ports": ports, "control": Value::Object(cm)})
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Drops by ingress port (pipeline index - 1) and reason, over every worker.
pub fn port_drops(wstats: &[Arc<WorkerStats>]) -> Vec<[u64; DropReason::COUNT]> {
    let mut by_port: Vec<[u64; DropReason::COUNT]> = Vec::new();
    for st in wstats {
        if let Ok(g) = st.port_drops.lock() {
            if by_port.len() < g.len() {
                by_port.resize(g.len(), [0; DropReason::COUNT]);
            }
            for (acc, d) in by_port.iter_mut().zip(g.iter()) {
                for (a, x) in acc.iter_mut().zip(d) {
                    *a += x;
                }
            }
        }
    }
    by_port
}

/// `now - base`, counter by counter.
fn since(now: &Counters, base: &Counters) -> Counters {
    let sub = |a: &mut [u64], b: &[u64]| {
        for (x, y) in a.iter_mut().zip(b) {
            *x = x.wrapping_sub(*y);
        }
    };
    let mut c = now.clone();
    sub(&mut c.outcomes, &base.outcomes);
    sub(&mut c.drops, &base.drops);
    sub(&mut c.punts, &base.punts);
    sub(&mut c.events, &base.events);
    c
}

/// [`ControlCounters`]' per-class arrays, shown by class name in `show counters`.
const PER_CLASS: [&str; 2] = ["rate_limited", "policed_xdp"];

fn control_since(now: &ControlCounters, base: &ControlCounters) -> ControlCounters {
    let d = |a: u64, b: u64| a.wrapping_sub(b);
    let per_class = |mut a: [u64; PuntClass::COUNT], b: [u64; PuntClass::COUNT]| {
        for (x, y) in a.iter_mut().zip(b) {
            *x = x.wrapping_sub(y);
        }
        a
    };
    ControlCounters {
        frames_in: d(now.frames_in, base.frames_in),
        rate_limited: per_class(now.rate_limited, base.rate_limited),
        policed_xdp: per_class(now.policed_xdp, base.policed_xdp),
        arp_answered: d(now.arp_answered, base.arp_answered),
        ns_answered: d(now.ns_answered, base.ns_answered),
        neighbors_learned: d(now.neighbors_learned, base.neighbors_learned),
        solicits_sent: d(now.solicits_sent, base.solicits_sent),
        solicits_limited: d(now.solicits_limited, base.solicits_limited),
        held: d(now.held, base.held),
        released: d(now.released, base.released),
        hold_dropped: d(now.hold_dropped, base.hold_dropped),
        echo_replies: d(now.echo_replies, base.echo_replies),
        to_host: d(now.to_host, base.to_host),
        to_host_dropped: d(now.to_host_dropped, base.to_host_dropped),
        fast_invalidations: d(now.fast_invalidations, base.fast_invalidations),
        from_host: d(now.from_host, base.from_host),
        tx_failed: d(now.tx_failed, base.tx_failed),
        malformed: d(now.malformed, base.malformed),
        publish_errors: d(now.publish_errors, base.publish_errors),
        taps_lost: d(now.taps_lost, base.taps_lost),
    }
}

fn port_name<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &View<'_, E4, E6>,
    ifindex: u32,
) -> String {
    v.control
        .router
        .specs()
        .iter()
        .find(|s| s.ifindex == ifindex)
        .map_or_else(|| format!("port{ifindex}"), |s| s.name.clone())
}

fn names<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &View<'_, E4, E6>,
) -> Vec<String> {
    v.control
        .router
        .specs()
        .iter()
        .map(|s| s.name.clone())
        .collect()
}

fn interfaces<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &View<'_, E4, E6>,
) -> Value {
    let mut io: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for w in v.wstats {
        if let Ok(g) = w.io.lock() {
            for (name, q) in g.iter() {
                let port = name.split(':').next().unwrap_or(name).to_string();
                io.entry(port).or_default().push(json!({
                    "queue": name, "rx": q.rx, "rx_dropped": q.rx_dropped,
                    "rx_invalid": q.rx_invalid, "tx": q.tx, "tx_dropped": q.tx_dropped,
                }));
            }
        }
    }
    let rows: Vec<Value> = v
        .plan
        .interfaces
        .iter()
        .enumerate()
        .map(|(i, itf)| {
            let ifindex = i as u32 + 1;
            let spec = v.control.router.specs().get(i);
            let queues = io.get(&itf.name).cloned().unwrap_or_default();
            let sum = |k: &str| -> u64 { queues.iter().filter_map(|q| q[k].as_u64()).sum() };
            json!({
                "name": itf.name,
                "index": ifindex,
                "state": if v.control.router.port_up(ifindex) { "up" } else { "down" },
                "mtu": itf.mtu,
                "mac": spec.map(|s| s.mac.to_string()),
                "addresses": spec.map(|s| {
                    s.addrs4.iter().map(|(a, l)| format!("{a}/{l}"))
                        .chain(s.addrs6.iter().map(|(a, l)| format!("{a}/{l}")))
                        .collect::<Vec<_>>()
                }),
                "tap": itf.tap,
                "backend": v.backends.get(i).cloned()
                    .unwrap_or_else(|| format!("{:?}", itf.backend).to_lowercase()),
                "queues": queues,
                "rx_packets": sum("rx"),
                "tx_packets": sum("tx"),
                "rx_dropped": sum("rx_dropped"),
                "tx_dropped": sum("tx_dropped"),
                "kernel": {
                    "rx_packets": kernel_stat(&itf.name, "rx_packets"),
                    "rx_bytes": kernel_stat(&itf.name, "rx_bytes"),
                    "tx_packets": kernel_stat(&itf.name, "tx_packets"),
                    "tx_bytes": kernel_stat(&itf.name, "tx_bytes"),
                    "rx_dropped": kernel_stat(&itf.name, "rx_dropped"),
                    "tx_dropped": kernel_stat(&itf.name, "tx_dropped"),
                },
            })
        })
        .collect();
    json!({"interfaces": rows})
}

/// The best route's source of a prefix.
fn best_source<K: RibFamily, E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &View<'_, E4, E6>,
    p: &Prefix<K>,
) -> Option<Source> {
    v.control
        .router
        .rib()
        .route_details(p)
        .iter()
        .find(|d| d.best)
        .map(|d| d.route.source)
}

fn within(outer: &IpPrefix, inner: &IpPrefix) -> bool {
    match (outer, inner) {
        (IpPrefix::V4(o), IpPrefix::V4(i)) => i.len() >= o.len() && o.contains(i.addr()),
        (IpPrefix::V6(o), IpPrefix::V6(i)) => i.len() >= o.len() && o.contains(i.addr()),
        _ => false,
    }
}

fn show_route<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &View<'_, E4, E6>,
    prefix: Option<String>,
    source: Option<String>,
) -> Result<Value, String> {
    let filter: Option<IpPrefix> = match prefix {
        Some(p) => Some(p.parse().map_err(|e| format!("{p}: {e}"))?),
        None => None,
    };
    let source: Option<Source> = match source {
        Some(s) => Some(s.parse().map_err(|_| {
            format!("unknown source {s:?} (connected, static, api, kernel, table, fpm)")
        })?),
        None => None,
    };
    let names = names(v);
    let rib = v.control.router.rib();
    let snap = rib.nexthop_snapshot();
    let mut rows = Vec::new();
    let mut total = 0usize;
    // The best route's source is looked up only for rows listed or filtered by source: a
    // full table's million lookups would hold up the control plane.
    let mut push = |p: IpPrefix, nh: u32, src: &dyn Fn() -> Option<Source>| {
        if let Some(f) = &filter {
            if !within(f, &p) {
                return;
            }
        }
        let listed = rows.len() < MAX_ROWS;
        let src = if source.is_some() || listed {
            src()
        } else {
            None
        };
        if source.is_some() && src != source {
            return;
        }
        total += 1;
        if listed {
            rows.push(json!({
                "prefix": p.to_string(),
                "source": src.map(|s| s.as_str()),
                "forward": describe(&snap, nh, &names),
                "index": nh,
            }));
        }
    };
    for r in rib.fib_routes_v4() {
        push(IpPrefix::V4(r.prefix), r.nexthop, &|| {
            best_source(v, &r.prefix)
        });
    }
    for r in rib.fib_routes_v6() {
        push(IpPrefix::V6(r.prefix), r.nexthop, &|| {
            best_source(v, &r.prefix)
        });
    }
    let shown = rows.len();
    Ok(json!({"routes": rows, "total": total, "truncated": total > shown}))
}

fn neighbor_of<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &View<'_, E4, E6>,
    port: u32,
    addr: IpAddr,
) -> Value {
    let Some(t) = v
        .control
        .router
        .tables()
        .iter()
        .find(|t| t.port.ifindex == port)
    else {
        return Value::Null;
    };
    let nud = match addr {
        IpAddr::V4(a) => t.arp.entries().find(|(x, _)| *x == a).map(|(_, n)| n),
        IpAddr::V6(a) => t.nd.entries().find(|(x, _)| *x == a).map(|(_, n)| n),
    };
    match nud {
        Some(n) => json!({
            "address": addr.to_string(),
            "mac": n.mac.map(|m| m.to_string()),
            "state": format!("{:?}", n.state).to_uppercase(),
        }),
        None => json!({"address": addr.to_string(), "mac": null, "state": "NONE"}),
    }
}

fn route_get<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &View<'_, E4, E6>,
    addr: &str,
) -> Result<Value, String> {
    let a: IpAddr = addr
        .trim()
        .parse()
        .map_err(|_| format!("{addr:?} is not an IP address"))?;
    let table = v.control.router.route_table();
    let (prefix, index, src) = match a {
        IpAddr::V4(x) => match table.v4().table().lookup(u32::from(x)) {
            Some(r) => (IpPrefix::V4(r.prefix), r.nexthop, best_source(v, &r.prefix)),
            None => return Ok(json!({"address": addr, "route": null, "reason": "no route"})),
        },
        IpAddr::V6(x) => match table.v6().table().lookup(u128::from(x)) {
            Some(r) => (IpPrefix::V6(r.prefix), r.nexthop, best_source(v, &r.prefix)),
            None => return Ok(json!({"address": addr, "route": null, "reason": "no route"})),
        },
    };
    let names = names(v);
    let snap = v.control.router.rib().nexthop_snapshot();
    let mut hops = Vec::new();
    let mut members: Vec<(u32, u16)> = Vec::new();
    match snap.get(index).map(|e| &e.forward) {
        Some(Forward::Group {
            members: m,
            weights,
        }) => {
            members = m.iter().copied().zip(weights.iter().copied()).collect();
        }
        Some(_) => members.push((index, 1)),
        None => {}
    }
    for (m, w) in members {
        let Some(e) = snap.get(m) else { continue };
        let (gateway, port) = match &e.forward {
            Forward::Gateway {
                addr: g,
                ifindex: Some(p),
            } => (Some(*g), Some(*p)),
            Forward::Connected { ifindex } => (None, Some(*ifindex)),
            _ => (None, None),
        };
        let neighbor = port.map(|p| neighbor_of(v, p, gateway.unwrap_or(a)));
        hops.push(json!({
            "forward": describe(&snap, m, &names),
            "weight": w,
            "gateway": gateway.map(|g| g.to_string()),
            "port": port.map(|p| port_name(v, p)),
            "neighbor": neighbor,
        }));
    }
    Ok(json!({
        "address": addr,
        "prefix": prefix.to_string(),
        "source": src.map(|s| s.as_str()),
        "forward": describe(&snap, index, &names),
        "index": index,
        "nexthops": hops,
    }))
}

fn rib_rows<K: RibFamily, E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &View<'_, E4, E6>,
    p: &Prefix<K>,
    names: &[String],
) -> Vec<Value>
where
    IpPrefix: From<Prefix<K>>,
{
    let port = |f: &Forward| match f {
        Forward::Gateway {
            addr,
            ifindex: Some(i),
        } => format!(
            "via {addr} dev {}",
            names.get(*i as usize - 1).cloned().unwrap_or_default()
        ),
        Forward::Connected { ifindex } => {
            format!(
                "connected dev {}",
                names
                    .get(*ifindex as usize - 1)
                    .cloned()
                    .unwrap_or_default()
            )
        }
        other => other.to_string(),
    };
    v.control
        .router
        .rib()
        .route_details(p)
        .into_iter()
        .map(|d| {
            json!({
                "prefix": IpPrefix::from(*p).to_string(),
                "source": d.route.source.as_str(),
                "distance": d.route.distance,
                "metric": d.route.metric,
                "weight": d.route.weight,
                "nexthop": d.route.nexthop.to_string(),
                "resolved": d.resolved.as_ref().map(port),
                "best": d.best,
                "unresolved": d.resolved.is_none(),
                "stale": d.stale,
            })
        })
        .collect()
}

fn show_rib<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &View<'_, E4, E6>,
    prefix: Option<String>,
) -> Result<Value, String> {
    let names = names(v);
    let rib = v.control.router.rib();
    let mut rows = Vec::new();
    let total;
    match prefix {
        Some(p) => {
            let p: IpPrefix = p.parse().map_err(|e| format!("{p}: {e}"))?;
            rows = match p {
                IpPrefix::V4(x) => rib_rows(v, &x, &names),
                IpPrefix::V6(x) => rib_rows(v, &x, &names),
            };
            total = rows.len();
        }
        None => {
            let mut p4: Vec<Prefix<u32>> = rib.v4().prefixes().collect();
            p4.sort_unstable();
            let mut p6: Vec<Prefix<u128>> = rib.v6().prefixes().collect();
            p6.sort_unstable();
            total = rib.v4().route_count() + rib.v6().route_count();
            for p in p4 {
                if rows.len() >= MAX_ROWS {
                    break;
                }
                rows.extend(rib_rows(v, &p, &names));
            }
            for p in p6 {
                if rows.len() >= MAX_ROWS {
                    break;
                }
                rows.extend(rib_rows(v, &p, &names));
            }
        }
    }
    let by = |f: [usize; Source::COUNT]| -> Value {
        let mut m = Map::new();
        for s in Source::ALL {
            m.insert(
                s.as_str().into(),
                json!(f.get(s.index()).copied().unwrap_or(0)),
            );
        }
        Value::Object(m)
    };
    Ok(json!({
        "routes": rows,
        "total": total,
        "truncated": total > rows.len(),
        "by_source": {"v4": by(rib.v4().routes_by_source()), "v6": by(rib.v6().routes_by_source())},
        "unresolved": rib.v4().unresolved() + rib.v6().unresolved(),
    }))
}

fn port_index<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &View<'_, E4, E6>,
    port: &Option<String>,
) -> Result<Option<u32>, String> {
    match port {
        None => Ok(None),
        Some(n) => v
            .control
            .router
            .specs()
            .iter()
            .find(|s| &s.name == n)
            .map(|s| Some(s.ifindex))
            .ok_or_else(|| format!("no port named {n:?} (ports: {})", names(v).join(", "))),
    }
}

fn neighbors<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &View<'_, E4, E6>,
    port: Option<String>,
) -> Result<Value, String> {
    let only = port_index(v, &port)?;
    let mut rows = Vec::new();
    for t in v.control.router.tables() {
        if only.is_some_and(|p| p != t.port.ifindex) {
            continue;
        }
        let name = t.port.name.clone();
        for (a, n) in t.arp.entries() {
            rows.push(json!({"port": name, "family": "arp", "address": a.to_string(),
                "mac": n.mac.map(|m| m.to_string()), "state": format!("{:?}", n.state).to_uppercase(),
                "held": t.arp.held(&a)}));
        }
        for (a, n) in t.nd.entries() {
            rows.push(json!({"port": name, "family": "nd", "address": a.to_string(),
                "mac": n.mac.map(|m| m.to_string()), "state": format!("{:?}", n.state).to_uppercase(),
                "held": t.nd.held(&a)}));
        }
    }
    Ok(json!({"neighbors": rows}))
}

fn nexthops<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &View<'_, E4, E6>,
) -> Value {
    let names = names(v);
    let nh = v.control.router.rib().nexthops();
    let snap = v.control.router.rib().nexthop_snapshot();
    let rows: Vec<Value> = nh
        .iter()
        .map(|(id, e, refs)| {
            json!({
                "index": id.index,
                "generation": id.gen,
                "version": e.version,
                "forward": describe(&snap, id.index, &names),
                "named": nh.named(id).map(|f| f.to_string()),
                "active": nh.is_active(id),
                "references": refs,
            })
        })
        .collect();
    json!({"nexthops": rows, "live": nh.live(), "quarantined": nh.quarantined(), "max": nh.max()})
}

fn fast_path<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &View<'_, E4, E6>,
) -> Value {
    let mut installs = InstallCounters::default();
    for w in v.wstats {
        if let Ok(g) = w.fast.lock() {
            installs.add(&g);
        }
    }
    let ports: Vec<Value> = v
        .fast
        .iter()
        .flatten()
        .map(|f| {
            let c = f.counters().unwrap_or_default();
            json!({"port": f.name(), "forwarded": c.forwarded, "stale": c.stale,
                "generation": f.generation()})
        })
        .collect();
    json!({
        "enabled": v.plan.fast_path,
        "ports": ports,
        "installed": installs.installed,
        "limited": installs.limited,
        "failed": installs.failed,
        "invalidations": v.control.counters.fast_invalidations,
    })
}

fn api_routes<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &View<'_, E4, E6>,
    prefix: &IpPrefix,
    via: &[String],
    blackhole: bool,
) -> Result<Vec<vfsr_rib::RibRoute>, String> {
    if blackhole {
        if !via.is_empty() {
            return Err("a blackhole route has no gateway".into());
        }
        return Ok(vec![v
            .control
            .router
            .route(Source::Api, Forward::Blackhole)]);
    }
    if via.is_empty() {
        return Err("give a gateway (via) or blackhole".into());
    }
    let mut out = Vec::new();
    for g in via {
        let addr: IpAddr = g
            .trim()
            .parse()
            .map_err(|_| format!("{g:?} is not an IP address"))?;
        if addr.is_ipv4() != prefix.is_v4() {
            return Err(format!("{addr} is not of {prefix}'s family"));
        }
        out.push(v.control.router.route(
            Source::Api,
            Forward::Gateway {
                addr,
                ifindex: None,
            },
        ));
    }
    Ok(out)
}

fn route_add<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &mut View<'_, E4, E6>,
    prefix: &str,
    via: &[String],
    blackhole: bool,
) -> Result<Value, String> {
    let p: IpPrefix = prefix.parse().map_err(|e| format!("{prefix}: {e}"))?;
    let routes = api_routes(v, &p, via, blackhole)?;
    v.control
        .router
        .announce(p, Source::Api, &routes)
        .map_err(|e| e.to_string())?;
    v.control.router.publish().map_err(|e| e.to_string())?;
    let unresolved = match p {
        IpPrefix::V4(x) => v.control.router.rib().route_details(&x),
        IpPrefix::V6(x) => v.control.router.rib().route_details(&x),
    }
    .iter()
    .filter(|d| d.route.source == Source::Api && d.resolved.is_none())
    .count();
    Ok(json!({"prefix": p.to_string(), "routes": routes.len(), "unresolved": unresolved}))
}

fn route_del<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &mut View<'_, E4, E6>,
    prefix: &str,
) -> Result<Value, String> {
    let p: IpPrefix = prefix.parse().map_err(|e| format!("{prefix}: {e}"))?;
    let n = v.control.router.withdraw(p, Source::Api);
    v.control.router.publish().map_err(|e| e.to_string())?;
    if n == 0 {
        return Err(format!("{p}: no route added through the API"));
    }
    Ok(json!({"prefix": p.to_string(), "withdrawn": n}))
}

fn neighbor_flush<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    v: &mut View<'_, E4, E6>,
    port: Option<String>,
) -> Result<Value, String> {
    let only = port_index(v, &port)?;
    let mut n = 0;
    for t in v.control.router.tables_mut() {
        if only.is_some_and(|p| p != t.port.ifindex) {
            continue;
        }
        n += t.arp.flush() + t.nd.flush();
        t.arp.publish();
        t.nd.publish();
    }
    Ok(json!({"flushed": n}))
}
