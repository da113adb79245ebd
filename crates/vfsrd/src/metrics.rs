//! The Prometheus endpoint (`[api] metrics`, `127.0.0.1:9108` by default): `GET /metrics`
//! answers the router's state, encoded by `prometheus-client` in the OpenMetrics text format
//! for a scraper that accepts it (Prometheus does), in the Prometheus text format 0.0.4 for
//! the others (`curl`, `promtool check metrics`).
//!
//! Nothing here touches the workers: their counters are the blocks they publish after each
//! batch (`SharedCounters`, `WorkerStats`), summed at scrape time, so a scrape costs the
//! forwarding path nothing. The registry is built afresh for each scrape from those blocks
//! and the control plane's own state (RIB, sources, neighbor tables); the workers' busy
//! ratio is the CPU time each used since the previous scrape over the time between them.
//!
//! The HTTP side is the smallest that Prometheus needs, served by the control plane's loop
//! without blocking (as the control API is): one `GET` per connection, answered and closed;
//! a request that is not a `GET`, is malformed or longer than 8 KiB gets its status code; a
//! client silent for 5 s is dropped. A library HTTP server would need a thread of its own
//! and a lock around the router's state.
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `vfsr_build_info` | gauge (1) | `version`, `fib4`, `fib6` |
//! | `vfsr_uptime_seconds` | gauge | |
//! | `vfsr_port_up` | gauge | `port` |
//! | `vfsr_port_{rx,tx}_packets_total`, `vfsr_port_{rx,tx}_dropped_total` | counter | `port` (vfsr's queues) |
//! | `vfsr_port_{rx,tx}_bytes_total` | counter | `port` (the kernel's interface counters) |
//! | `vfsr_drops_total` | counter | `reason`, `port` (ingress) |
//! | `vfsr_packets_total` | counter | `outcome`, `worker` |
//! | `vfsr_punts_total`, `vfsr_punts_rate_limited_total`, `vfsr_punts_policed_xdp_total` | counter | `class` |
//! | `vfsr_worker_{rx_packets,batches,sleeps,punts_limited,cpu_seconds}_total` | counter | `worker`, `core` |
//! | `vfsr_worker_busy_ratio` | gauge | `worker`, `core` |
//! | `vfsr_flow_entries`, `vfsr_flow_capacity` | gauge | `worker` |
//! | `vfsr_flow_lookups_total` | counter | `worker`, `result` (hit, miss, stale) |
//! | `vfsr_flow_{inserts,evictions,refusals,expirations}_total`, `vfsr_ecmp_kept_total` | counter | `worker` |
//! | `vfsr_rib_routes` | gauge | `source`, `family` |
//! | `vfsr_rib_unresolved_routes`, `vfsr_fib_prefixes` | gauge | `family` |
//! | `vfsr_nexthops` | gauge | `state` (live, quarantined) |
//! | `vfsr_source_up`, `vfsr_source_state` | gauge | `source` (fpm, kernel), `state` |
//! | `vfsr_source_{messages,routes_announced,routes_withdrawn,resyncs,routes_swept}_total` | counter | `source` |
//! | `vfsr_source_skipped_total` | counter | `source`, `reason` |
//! | `vfsr_source_stale_routes` | gauge | `source` |
//! | `vfsr_fpm_connections_total`, `vfsr_netlink_overruns_total`, `vfsr_netlink_malformed_total` | counter | |
//! | `vfsr_neighbors` | gauge | `port`, `family` (arp, nd), `state` |
//! | `vfsr_control_events_total` | counter | `event` |
//! | `vfsr_fast_path_forwarded_total` | counter | `port` |
//! | `vfsr_api_clients` | gauge | |

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::Value;
use vfsr_fwd::{Counters, DropReason, Event, Outcome, PuntClass};
use vfsr_lpm::LpmUpdate;
use vfsr_rib::Source;

use crate::api::{port_drops, View};
use crate::error::Error;

/// The longest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// A client silent this long is dropped.
const IDLE: Duration = Duration::from_secs(5);
/// The content type of the OpenMetrics exposition (for scrapers that ask for it).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the Prometheus text format (everyone else: curl, promtool).
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The OpenMetrics text as the Prometheus text format 0.0.4: a counter family's `HELP` and
/// `TYPE` name its samples' `_total` name, and the `# EOF` and `# UNIT` lines go (the older
/// format has neither). Everything else is the same in both.
pub fn prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            if let Some(h) = help.take() {
                out.push_str(h);
                out.push('\n');
            }
            help = Some(line);
            let _ = rest;
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.splitn(2, ' ');
            let (name, kind) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let rename = kind == "counter" && !name.ends_with("_total");
            if let Some(h) = help.take() {
                match (
                    rename,
                    h.strip_prefix("# HELP ").and_then(|r| r.split_once(' ')),
                ) {
                    (true, Some((n, text))) => {
                        out.push_str(&format!("# HELP {n}_total {text}\n"));
                    }
                    _ => {
                        out.push_str(h);
                        out.push('\n');
                    }
                }
            }
            if rename {
                out.push_str(&format!("# TYPE {name}_total counter\n"));
            } else {
                out.push_str(line);
                out.push('\n');
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    if let Some(h) = help {
        out.push_str(h);
        out.push('\n');
    }
    out
}

type Labels = Vec<(&'static str, String)>;

/// A registry being filled for one scrape.
struct Exposition {
    reg: Registry,
}

impl Exposition {
    fn new() -> Exposition {
        Exposition {
            reg: Registry::with_prefix("vfsr"),
        }
    }

    /// A counter family (`name` without `_total`).
    fn counter(&mut self, name: &str, help: &str, rows: impl IntoIterator<Item = (Labels, u64)>) {
        let f = Family::<Labels, Counter>::default();
        for (l, n) in rows {
            f.get_or_create(&l).inc_by(n);
        }
        self.reg.register(name, help.trim_end_matches('.'), f);
    }

    /// A counter family of seconds (`name` without `_total`).
    fn counter_seconds(
        &mut self,
        name: &str,
        help: &str,
        rows: impl IntoIterator<Item = (Labels, f64)>,
    ) {
        let f = Family::<Labels, Counter<f64, AtomicU64>>::default();
        for (l, x) in rows {
            f.get_or_create(&l).inc_by(x.max(0.0));
        }
        self.reg.register(name, help.trim_end_matches('.'), f);
    }

    /// A gauge family.
    fn gauge(&mut self, name: &str, help: &str, rows: impl IntoIterator<Item = (Labels, f64)>) {
        let f = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        for (l, x) in rows {
            f.get_or_create(&l).set(x);
        }
        self.reg.register(name, help.trim_end_matches('.'), f);
    }

    /// The OpenMetrics text (the encoder ends each help text with a full stop).
    fn text(&self) -> String {
        let mut s = String::new();
        if encode(&mut s, &self.reg).is_err() {
            s = "# encoding failed\n# EOF\n".into();
        }
        s
    }
}

fn l1(k: &'static str, v: impl ToString) -> Labels {
    vec![(k, v.to_string())]
}

fn l2(k1: &'static str, v1: impl ToString, k2: &'static str, v2: impl ToString) -> Labels {
    vec![(k1, v1.to_string()), (k2, v2.to_string())]
}

fn num(v: &Value, path: &[&str]) -> u64 {
    let mut x = v;
    for k in path {
        match x.get(k) {
            Some(n) => x = n,
            None => return 0,
        }
    }
    x.as_u64().unwrap_or(0)
}

struct HttpConn {
    stream: TcpStream,
    head: Vec<u8>,
    out: Vec<u8>,
    answered: bool,
    since: Instant,
    dead: bool,
}

/// The listener, its clients and the previous scrape's CPU times (for the busy ratio).
pub struct MetricsServer {
    listener: TcpListener,
    addr: SocketAddr,
    conns: Vec<HttpConn>,
    last_cpu: Option<(Instant, Vec<f64>)>,
    scrapes: u64,
}

impl MetricsServer {
    /// Listens on `addr`; an [`Error::Os`] names it (`metrics on 127.0.0.1:9108: …`).
    pub fn bind(addr: SocketAddr) -> Result<MetricsServer, Error> {
        let failed = |e: std::io::Error| Error::os(format!("metrics on {addr}"), e);
        let listener = TcpListener::bind(addr).map_err(failed)?;
        listener.set_nonblocking(true).map_err(failed)?;
        let addr = listener.local_addr().unwrap_or(addr);
        Ok(MetricsServer {
            listener,
            addr,
            conns: Vec::new(),
            last_cpu: None,
            scrapes: 0,
        })
    }

    /// The address listened on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Scrapes answered.
    pub fn scrapes(&self) -> u64 {
        self.scrapes
    }

    /// Descriptors to poll.
    pub fn fds(&self) -> Vec<RawFd> {
        let mut v = vec![self.listener.as_raw_fd()];
        v.extend(self.conns.iter().map(|c| c.stream.as_raw_fd()));
        v
    }

    /// Accepts, reads requests, answers them, writes what clients take.
    pub fn work<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        view: &View<'_, E4, E6>,
        api_clients: usize,
    ) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_ok() {
                        self.conns.push(HttpConn {
                            stream,
                            head: Vec::new(),
                            out: Vec::new(),
                            answered: false,
                            since: Instant::now(),
                            dead: false,
                        });
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let mut conns = std::mem::take(&mut self.conns);
        for c in &mut conns {
            self.serve(c, view, api_clients);
        }
        conns.retain(|c| !c.dead);
        self.conns = conns;
    }

    fn serve<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        c: &mut HttpConn,
        view: &View<'_, E4, E6>,
        api_clients: usize,
    ) {
        if !c.answered {
            let mut buf = [0u8; 2048];
            loop {
                match c.stream.read(&mut buf) {
                    Ok(0) => {
                        c.dead = true;
                        return;
                    }
                    Ok(n) => {
                        c.head.extend_from_slice(buf.get(..n).unwrap_or_default());
                        if c.head.len() > MAX_HEAD {
                            break;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => {
                        c.dead = true;
                        return;
                    }
                }
            }
            let complete = c.head.windows(4).any(|w| w == b"\r\n\r\n")
                || c.head.windows(2).any(|w| w == b"\n\n");
            if c.head.len() > MAX_HEAD {
                c.out = response(431, "text/plain", "request head too large\n");
                c.answered = true;
            } else if complete {
                c.out = self.answer(&c.head, view, api_clients);
                c.answered = true;
            } else if c.since.elapsed() > IDLE {
                c.dead = true;
                return;
            }
        }
        while c.answered && !c.out.is_empty() {
            match c.stream.write(&c.out) {
                Ok(0) => break,
                Ok(n) => {
                    c.out.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    c.dead = true;
                    return;
                }
            }
        }
        if c.answered && (c.out.is_empty() || c.since.elapsed() > IDLE) {
            let _ = c.stream.shutdown(std::net::Shutdown::Both);
            c.dead = true;
        }
    }

    fn answer<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        head: &[u8],
        view: &View<'_, E4, E6>,
        api_clients: usize,
    ) -> Vec<u8> {
        let text = String::from_utf8_lossy(head);
        let mut words = text.lines().next().unwrap_or("").split_whitespace();
        let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        if !words.next().is_some_and(|v| v.starts_with("HTTP/")) {
            return response(400, "text/plain", "bad request line\n");
        }
        if method != "GET" && method != "HEAD" {
            return response(405, "text/plain", "only GET\n");
        }
        let path = target.split('?').next().unwrap_or("");
        let openmetrics = text.lines().any(|l| {
            let l = l.to_ascii_lowercase();
            l.starts_with("accept:") && l.contains("application/openmetrics-text")
        });
        let mut out = match path {
            "/metrics" => {
                self.scrapes += 1;
                let body = self.render(view, api_clients);
                if openmetrics {
                    response(200, OPENMETRICS, &body)
                } else {
                    response(200, PROMETHEUS_TEXT, &prometheus_text(&body))
                }
            }
            "/" => response(
                200,
                "text/html; charset=utf-8",
                "<html><body><a href=\"/metrics\">vfsrd metrics</a></body></html>\n",
            ),
            _ => response(
                404,
                "text/plain",
                "not found (the metrics are at /metrics)\n",
            ),
        };
        if method == "HEAD" {
            if let Some(end) = out.windows(4).position(|w| w == b"\r\n\r\n") {
                out.truncate(end + 4);
            }
        }
        out
    }

    /// The exposition text for the router's state now.
    pub fn render<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        v: &View<'_, E4, E6>,
        api_clients: usize,
    ) -> String {
        let mut x = Exposition::new();
        let plan = &*v.plan;
        let control = &*v.control;
        let router = &control.router;
        x.gauge(
            "build_info",
            "vfsrd's version and FIB engines (always 1).",
            [(
                vec![
                    ("version", env!("CARGO_PKG_VERSION").to_string()),
                    ("fib4", plan.fib4.clone()),
                    ("fib6", plan.fib6.clone()),
                ],
                1.0,
            )],
        );
        x.gauge(
            "uptime_seconds",
            "Seconds since vfsrd started forwarding.",
            [(Vec::new(), v.uptime.as_secs_f64())],
        );

        // Ports.
        let mut io: BTreeMap<String, [u64; 4]> = BTreeMap::new();
        for w in v.wstats {
            if let Ok(g) = w.io.lock() {
                for (name, q) in g.iter() {
                    let port = name.split(':').next().unwrap_or(name).to_string();
                    let e = io.entry(port).or_default();
                    e[0] += q.rx;
                    e[1] += q.tx;
                    e[2] += q.rx_dropped;
                    e[3] += q.tx_dropped;
                }
            }
        }
        let names: Vec<String> = plan.interfaces.iter().map(|i| i.name.clone()).collect();
        let per_port = |k: usize| -> Vec<(Labels, u64)> {
            names
                .iter()
                .map(|n| {
                    (
                        l1("port", n),
                        io.get(n).and_then(|e| e.get(k).copied()).unwrap_or(0),
                    )
                })
                .collect()
        };
        x.gauge(
            "port_up",
            "Whether the port's link is up (1) or down (0).",
            names.iter().enumerate().map(|(i, n)| {
                let up = router.port_up(i as u32 + 1);
                (l1("port", n), if up { 1.0 } else { 0.0 })
            }),
        );
        x.counter(
            "port_rx_packets",
            "Frames vfsr's queues received on the port.",
            per_port(0),
        );
        x.counter(
            "port_tx_packets",
            "Frames vfsr's queues sent on the port.",
            per_port(1),
        );
        x.counter(
            "port_rx_dropped",
            "Frames lost at the port's receive rings (counted by the backend).",
            per_port(2),
        );
        x.counter(
            "port_tx_dropped",
            "Frames the port's transmit rings could not take.",
            per_port(3),
        );
        let kernel = |stat: &str| -> Vec<(Labels, u64)> {
            names
                .iter()
                .map(|n| (l1("port", n), kernel_stat(n, stat)))
                .collect()
        };
        x.counter(
            "port_rx_bytes",
            "Bytes the kernel counted received on the port's interface.",
            kernel("rx_bytes"),
        );
        x.counter(
            "port_tx_bytes",
            "Bytes the kernel counted sent on the port's interface.",
            kernel("tx_bytes"),
        );

        // Pipeline counters.
        let workers: Vec<Counters> = v.shared.iter().map(|s| s.read()).collect();
        let by_port = port_drops(v.wstats);
        let mut drops = Vec::new();
        for r in DropReason::ALL {
            for (i, n) in names.iter().enumerate() {
                let k = by_port
                    .get(i)
                    .and_then(|d| d.get(r.index()))
                    .copied()
                    .unwrap_or(0);
                drops.push((l2("reason", r.name(), "port", n), k));
            }
        }
        x.counter(
            "drops",
            "Packets the pipeline dropped, by reason and ingress port.",
            drops,
        );
        let mut outcomes = Vec::new();
        for (w, c) in workers.iter().enumerate() {
            for o in Outcome::ALL {
                outcomes.push((l2("outcome", o.name(), "worker", w), c.outcome(*o)));
            }
        }
        x.counter(
            "packets",
            "Packets through the pipeline by outcome, per worker.",
            outcomes,
        );
        let sum = Counters::sum(v.shared.iter().map(|s| s.as_ref()));
        x.counter(
            "punts",
            "Packets the workers handed to the control plane, by class.",
            PuntClass::ALL
                .iter()
                .map(|c| (l1("class", c.name()), sum.punted(*c))),
        );
        // A per-class array of the control plane's counters, labelled by class.
        let by_class = |a: &[u64; PuntClass::COUNT]| {
            PuntClass::ALL
                .iter()
                .map(|c| {
                    (
                        l1("class", c.name()),
                        a.get(c.index()).copied().unwrap_or(0),
                    )
                })
                .collect::<Vec<_>>()
        };
        x.counter(
            "punts_policed_xdp",
            "Control frames the ports' XDP programs dropped by the class's limit (arp_nd, icmp, routing, local).",
            by_class(&control.counters.policed_xdp),
        );
        x.counter(
            "punts_rate_limited",
            "Control frames dropped by the control plane's per-class limits.",
            by_class(&control.counters.rate_limited),
        );

        // Workers.
        let secs = v.uptime.as_secs_f64().max(1e-9);
        let now = Instant::now();
        let cpu: Vec<f64> = v
            .tids
            .iter()
            .map(|t| crate::runtime::thread_cpu_seconds(t.load(Ordering::Relaxed)))
            .collect();
        let busy: Vec<f64> = match &self.last_cpu {
            Some((at, before)) if now.duration_since(*at).as_secs_f64() > 0.05 => {
                let dt = now.duration_since(*at).as_secs_f64();
                cpu.iter()
                    .zip(before)
                    .map(|(c, b)| ((c - b) / dt).clamp(0.0, 1.0))
                    .collect()
            }
            _ => cpu.iter().map(|c| (c / secs).clamp(0.0, 1.0)).collect(),
        };
        self.last_cpu = Some((now, cpu.clone()));
        let wl = |w: usize| {
            l2(
                "worker",
                w,
                "core",
                plan.workers.get(w).copied().unwrap_or(0),
            )
        };
        x.counter(
            "worker_rx_packets",
            "Frames the worker received.",
            workers.iter().enumerate().map(|(w, c)| (wl(w), c.rx())),
        );
        x.counter(
            "worker_batches",
            "Receive rounds that brought frames.",
            v.wstats
                .iter()
                .enumerate()
                .map(|(w, s)| (wl(w), s.batches.load(Ordering::Relaxed))),
        );
        x.counter(
            "worker_sleeps",
            "Times the worker found its queues empty and slept in poll(2).",
            v.wstats
                .iter()
                .enumerate()
                .map(|(w, s)| (wl(w), s.sleeps.load(Ordering::Relaxed))),
        );
        x.counter(
            "worker_punts_limited",
            "Punts the worker's own per-class limits or a full control queue dropped.",
            v.wstats
                .iter()
                .enumerate()
                .map(|(w, s)| (wl(w), s.punts_limited.load(Ordering::Relaxed))),
        );
        x.counter_seconds(
            "worker_cpu_seconds",
            "CPU time the worker's thread used.",
            cpu.iter().enumerate().map(|(w, c)| (wl(w), *c)),
        );
        x.gauge(
            "worker_busy_ratio",
            "Share of its core the worker used since the previous scrape (0 to 1).",
            busy.iter().enumerate().map(|(w, b)| (wl(w), *b)),
        );

        // Flow tables.
        let flows: Vec<(usize, Option<(vfsr_flow::FlowCounters, usize)>)> = v
            .wstats
            .iter()
            .enumerate()
            .map(|(w, s)| (w, s.flow.lock().ok().and_then(|g| *g)))
            .collect();
        x.gauge(
            "flow_entries",
            "Entries in the worker's flow table.",
            flows
                .iter()
                .filter_map(|(w, f)| f.map(|(_, n)| (l1("worker", w), n as f64))),
        );
        x.gauge(
            "flow_capacity",
            "Entries the worker's flow table can hold.",
            flows
                .iter()
                .filter(|(_, f)| f.is_some())
                .map(|(w, _)| (l1("worker", w), plan.flow_entries as f64)),
        );
        let mut lookups = Vec::new();
        for (w, f) in &flows {
            if let Some((c, _)) = f {
                lookups.push((l2("worker", w, "result", "hit"), c.hits));
                lookups.push((l2("worker", w, "result", "miss"), c.misses));
                lookups.push((l2("worker", w, "result", "stale"), c.stale_refreshes));
            }
        }
        x.counter("flow_lookups", "Flow-table lookups by result.", lookups);
        let flow_counter = |pick: fn(&vfsr_flow::FlowCounters) -> u64| -> Vec<(Labels, u64)> {
            flows
                .iter()
                .filter_map(|(w, f)| f.map(|(c, _)| (l1("worker", w), pick(&c))))
                .collect()
        };
        x.counter("flow_inserts", "Flows stored.", flow_counter(|c| c.inserts));
        x.counter(
            "flow_evictions",
            "Live flows pushed out to make room.",
            flow_counter(|c| c.evictions),
        );
        x.counter(
            "flow_refusals",
            "New flows left uncached: their bucket's entries all used within the protection window.",
            flow_counter(|c| c.refusals),
        );
        x.counter(
            "flow_expirations",
            "Flows removed after their idle timeout.",
            flow_counter(|c| c.expirations),
        );
        x.counter(
            "ecmp_kept",
            "Packets whose flow kept its ECMP member after the group changed.",
            workers
                .iter()
                .enumerate()
                .map(|(w, c)| (l1("worker", w), c.get(Event::EcmpKept))),
        );

        // RIB and FIB.
        let rib = router.rib();
        let by4 = rib.v4().routes_by_source();
        let by6 = rib.v6().routes_by_source();
        let mut routes = Vec::new();
        for s in Source::ALL {
            for (fam, by) in [("ipv4", &by4), ("ipv6", &by6)] {
                let n = by.get(s.index()).copied().unwrap_or(0);
                routes.push((l2("source", s.as_str(), "family", fam), n as f64));
            }
        }
        x.gauge(
            "rib_routes",
            "Routes in the RIB by source and family.",
            routes,
        );
        x.gauge(
            "fib_prefixes",
            "Prefixes the workers forward by, by family.",
            [
                (l1("family", "ipv4"), rib.v4().active_prefixes() as f64),
                (l1("family", "ipv6"), rib.v6().active_prefixes() as f64),
            ],
        );
        x.gauge(
            "rib_unresolved_routes",
            "Routes whose gateway is on no port's subnet (kept, not forwarded by).",
            [
                (l1("family", "ipv4"), rib.v4().unresolved() as f64),
                (l1("family", "ipv6"), rib.v6().unresolved() as f64),
            ],
        );
        x.gauge(
            "nexthops",
            "Entries of the next-hop table.",
            [
                (l1("state", "live"), rib.nexthops().live() as f64),
                (
                    l1("state", "quarantined"),
                    rib.nexthops().quarantined() as f64,
                ),
            ],
        );

        // Route sources.
        let st = control.sources.stats(router);
        let mut up = Vec::new();
        let mut state = Vec::new();
        let mut counters: BTreeMap<&str, Vec<(Labels, u64)>> = BTreeMap::new();
        let mut skipped = Vec::new();
        let mut stale = Vec::new();
        let sources: [(&str, Option<&Value>); 2] = [
            ("fpm", st.get("fpm").filter(|m| !m.is_null())),
            (
                "kernel",
                st.get("kernel")
                    .and_then(|k| k.get("mirror"))
                    .filter(|m| !m.is_null()),
            ),
        ];
        // A source that is not configured is served too, as `off`, so that dashboards
        // and alerts see every source whatever the configuration.
        let off = Value::Null;
        for (name, s) in sources {
            let configured = s.is_some();
            let s = s.unwrap_or(&off);
            let now_state = match name {
                _ if !configured => "off",
                "fpm" => s.get("state").and_then(Value::as_str).unwrap_or("waiting"),
                _ => {
                    if s.get("dumping").and_then(Value::as_bool) == Some(true) {
                        "dumping"
                    } else {
                        "in_sync"
                    }
                }
            };
            let states: &[&str] = match name {
                "fpm" => &["off", "waiting", "replaying", "in_sync", "disconnected"],
                _ => &["off", "dumping", "in_sync"],
            };
            for x in states {
                state.push((
                    l2("source", name, "state", x),
                    if *x == now_state { 1.0 } else { 0.0 },
                ));
            }
            up.push((
                l1("source", name),
                if matches!(now_state, "replaying" | "in_sync" | "dumping") {
                    1.0
                } else {
                    0.0
                },
            ));
            for key in ["messages", "announced", "withdrawn", "resyncs", "swept"] {
                counters
                    .entry(key)
                    .or_default()
                    .push((l1("source", name), num(s, &["counters", key])));
            }
            if let Some(m) = s.pointer("/counters/skipped").and_then(Value::as_object) {
                for (reason, n) in m {
                    skipped.push((
                        l2("source", name, "reason", reason),
                        n.as_u64().unwrap_or(0),
                    ));
                }
            }
            stale.push((l1("source", name), num(s, &["stale_routes"]) as f64));
        }
        x.gauge(
            "source_up",
            "Whether the route source is connected (FPM: zebra's session; kernel: mirroring).",
            up,
        );
        x.gauge(
            "source_state",
            "The route source's state (1 for the current one).",
            state,
        );
        let take =
            |m: &mut BTreeMap<&str, Vec<(Labels, u64)>>, k: &str| m.remove(k).unwrap_or_default();
        x.counter(
            "source_messages",
            "Messages the source delivered.",
            take(&mut counters, "messages"),
        );
        x.counter(
            "source_routes_announced",
            "Route announcements taken from the source.",
            take(&mut counters, "announced"),
        );
        x.counter(
            "source_routes_withdrawn",
            "Route withdrawals taken from the source.",
            take(&mut counters, "withdrawn"),
        );
        x.counter(
            "source_resyncs",
            "Complete replays or dumps reconciled with the RIB.",
            take(&mut counters, "resyncs"),
        );
        x.counter(
            "source_routes_swept",
            "Routes removed because a resync did not repeat them.",
            take(&mut counters, "swept"),
        );
        x.counter(
            "source_skipped",
            "Messages or routes the source sent that vfsr does not use, by reason.",
            skipped,
        );
        x.gauge(
            "source_stale_routes",
            "Routes kept from before the source's last reconnection, awaiting its replay.",
            stale,
        );
        x.counter(
            "fpm_connections",
            "Connections zebra opened to the FPM listener.",
            [(
                Vec::new(),
                st.get("fpm").map_or(0, |f| num(f, &["connections"])),
            )],
        );
        let k = st.get("kernel");
        x.counter(
            "netlink_overruns",
            "Times the rtnetlink socket overflowed (a redump follows).",
            [(Vec::new(), k.map_or(0, |k| num(k, &["overruns"])))],
        );
        x.counter(
            "netlink_malformed",
            "Netlink messages that could not be decoded.",
            [(Vec::new(), k.map_or(0, |k| num(k, &["malformed"])))],
        );

        // Neighbors.
        let mut neigh: BTreeMap<(String, &'static str, String), u64> = BTreeMap::new();
        for t in router.tables() {
            for (_, n) in t.arp.entries() {
                *neigh
                    .entry((
                        t.port.name.clone(),
                        "arp",
                        format!("{:?}", n.state).to_lowercase(),
                    ))
                    .or_default() += 1;
            }
            for (_, n) in t.nd.entries() {
                *neigh
                    .entry((
                        t.port.name.clone(),
                        "nd",
                        format!("{:?}", n.state).to_lowercase(),
                    ))
                    .or_default() += 1;
            }
        }
        x.gauge(
            "neighbors",
            "Neighbor-table entries by port, family and state.",
            neigh.into_iter().map(|((p, f, s), n)| {
                (
                    vec![("port", p), ("family", f.to_string()), ("state", s)],
                    n as f64,
                )
            }),
        );

        // The control plane.
        let mut events = Vec::new();
        if let Value::Object(m) = serde_json::json!(control.counters) {
            for (k, n) in m {
                if let Some(n) = n.as_u64() {
                    events.push((l1("event", k), n));
                }
            }
        }
        x.counter(
            "control_events",
            "What the control plane did (frames taken in, ARP/ND answered, echo replies, ...).",
            events,
        );
        x.counter(
            "fast_path_forwarded",
            "Frames the XDP fast path forwarded without the workers.",
            v.fast.iter().flatten().map(|f| {
                (
                    l1("port", f.name()),
                    f.counters().map_or(0, |c| c.forwarded),
                )
            }),
        );
        x.gauge(
            "api_clients",
            "Clients connected to the control API.",
            [(Vec::new(), api_clients as f64)],
        );
        x.text()
    }
}

fn response(code: u16, content_type: &str, body: &str) -> Vec<u8> {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Request Header Fields Too Large",
    };
    let mut out = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// A kernel statistic of an interface, 0 when absent.
pub fn kernel_stat(ifname: &str, name: &str) -> u64 {
    std::fs::read_to_string(format!("/sys/class/net/{ifname}/statistics/{name}"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_counters_take_their_total_name_in_the_text_format() {
        let mut x = Exposition::new();
        x.counter("drops", "Packets dropped.", [(l1("reason", "no_route"), 3)]);
        x.gauge("fib_prefixes", "Prefixes.", [(l1("family", "ipv4"), 7.0)]);
        let om = x.text();
        assert!(om.contains("# TYPE vfsr_drops counter\n"), "{om}");
        assert!(
            om.contains("vfsr_drops_total{reason=\"no_route\"} 3\n"),
            "{om}"
        );
        assert!(om.ends_with("# EOF\n"), "{om}");
        let t = prometheus_text(&om);
        assert!(
            t.contains("# HELP vfsr_drops_total Packets dropped.\n"),
            "{t}"
        );
        assert!(t.contains("# TYPE vfsr_drops_total counter\n"), "{t}");
        assert!(
            t.contains("vfsr_drops_total{reason=\"no_route\"} 3\n"),
            "{t}"
        );
        assert!(
            t.contains("# HELP vfsr_fib_prefixes Prefixes.\n# TYPE vfsr_fib_prefixes gauge\n"),
            "{t}"
        );
        assert!(!t.contains("# EOF"), "{t}");
    }

    #[test]
    fn responses_carry_their_length() {
        let r = String::from_utf8(response(404, "text/plain", "no\n")).unwrap();
        assert!(r.starts_with("HTTP/1.1 404 Not Found\r\n"), "{r}");
        assert!(r.contains("Content-Length: 3\r\n"), "{r}");
        assert!(r.ends_with("\r\n\r\nno\n"), "{r}");
    }
}
