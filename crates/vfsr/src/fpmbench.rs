//! `vfsr fpm bench`: how fast vfsrd takes in a whole table from zebra over FPM.
//!
//! The table (the 2024 reference table when `../shared/data` has it, else the synthetic
//! one) is written once as the FPM stream zebra's `dplane_fpm_nl` sends (`RTM_NEWROUTE` per
//! prefix, or next-hop objects first and routes naming them), its routes spread over 64
//! gateways on four ports. Each pass builds a fresh router and vfsrd's own FPM listener on
//! 127.0.0.1, and a writer thread sends the recorded stream as fast as the socket takes it,
//! while this thread runs what vfsrd's control plane runs: read, decode, RIB, FIB,
//! publication. Reported per mode, min / median / max over the passes:
//!
//! - **routes/s**: prefixes in the published FIB / time from the connection to the moment
//!   the last one is published (zebra, never vfsrd, should be the limit: target ≥ 1M/s);
//! - **tail**: time from the writer's last byte to the last route published (target ≤ 1 s);
//! - **bytes per route**: the process's resident-set growth over the pass / routes.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpStream};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use vfsr_bench::stats::Stats;
use vfsr_lpm::poptrie::Poptrie;
use vfsr_netlink::fpm::{write_table_stream, TableRoute, TableStreamOptions};
use vfsr_router::fpm::FpmConfig;
use vfsr_router::{IfMap, PortSpec, Router, RouterConfig};
use vfsr_wire::MacAddr;
use vfsrd::config::FpmPlan;
use vfsrd::sources::fpm::FpmServer;

/// `vfsr fpm bench` arguments.
#[derive(Args)]
pub struct FpmBenchArgs {
    /// Route table file (text or MRT, gzip or not); default: the 2024 reference table, else
    /// the synthetic one.
    #[arg(long)]
    table: Option<std::path::PathBuf>,
    /// Passes per mode.
    #[arg(long, default_value_t = 3)]
    passes: usize,
    /// Modes: `routes` (gateways in each route), `nhg` (next-hop objects first).
    #[arg(long, value_delimiter = ',', default_value = "routes,nhg")]
    modes: Vec<String>,
    /// Core for vfsrd's side (the writer runs on the other cores); default: the last.
    #[arg(long)]
    core: Option<usize>,
    /// FIB eager-application limits to compare (see `LiveFib::set_eager_limit`); the
    /// passes of each are interleaved.
    #[arg(long, value_delimiter = ',')]
    eager_limit: Vec<usize>,
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

type R = Router<Poptrie<u32>, Poptrie<u128>>;

/// Why an FPM intake run stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// An option that is none of its choices.
    #[error("--modes: unknown mode {0:?} (routes, nhg)")]
    Mode(String),
    /// The table could not be read (the reader's error names the file).
    #[error(transparent)]
    Table(vfsr_table::Error),
    /// The FPM stream of the table could not be written.
    #[error("writing the FPM stream: {0}")]
    Stream(#[source] std::io::Error),
    /// The router could not be made.
    #[error(transparent)]
    Router(vfsr_router::RouterError),
    /// vfsrd's FPM listener could not be bound.
    #[error(transparent)]
    Listen(vfsrd::error::Error),
    /// The writer could not connect to the listener, or write the stream.
    #[error("{what}: {err}")]
    Writer {
        what: String,
        #[source]
        err: std::io::Error,
    },
    /// The writer thread ended without saying when it finished.
    #[error("the writer did not finish")]
    WriterLost,
    /// A FIB could not be published.
    #[error(transparent)]
    Fib(vfsr_fib::FibError),
    /// The RIB did not reach what the pass expects within its time.
    #[error("timed out with {prefixes} prefixes ({expect:?})")]
    Timeout { prefixes: usize, expect: Expect },
    /// The report could not be written.
    #[error(transparent)]
    Report(#[from] crate::jsonfile::Error),
}

const PORTS: u32 = 4;
const GATEWAYS_PER_PORT: u32 = 16;
/// The kernel interface index the stream names for port `p` (a TAP's index in vfsrd).
fn oif(p: u32) -> u32 {
    100 + p
}

fn gateway4(i: u32) -> IpAddr {
    let p = i % PORTS + 1;
    IpAddr::V4(Ipv4Addr::new(10, p as u8, 0, (i / PORTS + 2) as u8))
}

fn gateway6(i: u32) -> IpAddr {
    let p = i % PORTS + 1;
    IpAddr::V6(Ipv6Addr::new(
        0xfd00,
        p as u16,
        0,
        0,
        0,
        0,
        0,
        (i / PORTS + 2) as u16,
    ))
}

/// The router a replay feeds: its ports, and the kernel interface indexes the stream names
/// as each port (`(kernel index, port)`).
#[derive(Clone, Debug)]
pub struct IntakeSetup {
    pub ports: Vec<PortSpec>,
    pub interfaces: Vec<(u32, u32)>,
}

impl IntakeSetup {
    /// The four ports `write_table_stream`'s gateways are spread over (10.P.0.1/24,
    /// fd00:P::1/64, kernel index 100 + P).
    fn four_ports() -> IntakeSetup {
        let ports = (1..=PORTS)
            .map(|p| {
                PortSpec::new(p, MacAddr([2, 0, 0, 0, 0, p as u8]))
                    .v4(Ipv4Addr::new(10, p as u8, 0, 1), 24)
                    .v6(Ipv6Addr::new(0xfd00, p as u16, 0, 0, 0, 0, 0, 1), 64)
            })
            .collect();
        IntakeSetup {
            ports,
            interfaces: (1..=PORTS).map(|p| (oif(p), p)).collect(),
        }
    }
}

/// When a replay is complete.
#[derive(Clone, Copy, Debug)]
pub enum Expect {
    /// When the RIB holds this many active prefixes (timed passes).
    Prefixes(usize),
    /// When the whole stream was written and the prefix count has not moved for this long
    /// (a first pass over a recorded stream, to learn how many prefixes it makes).
    Quiet(Duration),
}

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// One replay's outcome.
#[derive(Clone, Debug)]
pub struct Pass {
    /// Prefixes in the published FIB at the end.
    pub routes: usize,
    /// `routes` / time from the connection to the last one published.
    pub routes_per_s: f64,
    /// Time from the writer's last byte to the last route published.
    pub tail_s: f64,
    /// The process's resident-set growth over the pass / `routes`.
    pub bytes_per_route: f64,
}

/// Replays `stream` (FPM frames, as zebra sends them) into a fresh router through vfsrd's
/// FPM listener on 127.0.0.1, written by a thread as fast as the socket takes it, while the
/// calling thread, pinned to `core`, runs vfsrd's control-plane work until `expect` holds.
pub fn replay(
    stream: &[u8],
    expect: Expect,
    core: usize,
    eager: Option<usize>,
    setup: &IntakeSetup,
) -> Result<Pass, Error> {
    let mut r = R::new(setup.ports.clone(), RouterConfig::default()).map_err(Error::Router)?;
    if let Some(n) = eager {
        r.route_table_mut().set_eager_limit(n);
    }
    let mut ifmap = IfMap::new();
    for &(kernel, port) in &setup.interfaces {
        ifmap.insert(kernel, port);
    }
    let plan = FpmPlan {
        listen: std::net::SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        session: FpmConfig {
            resync_quiet: Duration::from_secs(600),
            ..FpmConfig::default()
        },
    };
    let mut server = FpmServer::bind(&plan).map_err(Error::Listen)?;
    let addr = server.local_addr().to_string();
    let rss0 = rss_bytes();
    let bytes = stream.to_vec();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Result<Instant, Error>>();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        let mut s = match TcpStream::connect(&addr) {
            Ok(s) => s,
            Err(err) => {
                let what = format!("connect {addr}");
                let _ = done_tx.send(Err(Error::Writer { what, err }));
                return;
            }
        };
        let r = s
            .write_all(&bytes)
            .map(|()| Instant::now())
            .map_err(|err| Error::Writer {
                what: "write".into(),
                err,
            });
        let _ = done_tx.send(r);
        // zebra keeps the connection open; so does the writer until the pass ends.
        let _ = stop_rx.recv_timeout(Duration::from_secs(120));
    });
    if let Err(e) = vfsr_cpu::pin(core) {
        eprintln!("vfsr: {e}");
    }
    let start = Instant::now();
    let limit = start + Duration::from_secs(120);
    let mut connected_at = None;
    let mut written: Option<Instant> = None;
    let mut last_change = (usize::MAX, start);
    let done = loop {
        let now = Instant::now();
        if now > limit {
            return Err(Error::Timeout {
                prefixes: r.rib().v4().active_prefixes() + r.rib().v6().active_prefixes(),
                expect,
            });
        }
        server.work(now, &mut r, &ifmap);
        if connected_at.is_none() && server.session().connections() > 0 {
            connected_at = Some(now);
        }
        r.poll(Instant::now()).map_err(Error::Fib)?;
        if written.is_none() {
            if let Ok(w) = done_rx.try_recv() {
                written = Some(w?);
            }
        }
        let have = r.rib().v4().active_prefixes() + r.rib().v6().active_prefixes();
        if have != last_change.0 {
            last_change = (have, Instant::now());
        }
        let complete = match expect {
            Expect::Prefixes(n) => have >= n,
            Expect::Quiet(q) => written.is_some() && last_change.1.elapsed() >= q,
        };
        if complete {
            r.publish().map_err(Error::Fib)?;
            break match expect {
                Expect::Prefixes(_) => Instant::now(),
                Expect::Quiet(_) => last_change.1,
            };
        }
        if server.session().connections() == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
    };
    let growth = rss_bytes().saturating_sub(rss0);
    let published = r.route_table().v4().table().len() + r.route_table().v6().table().len();
    // Every byte was read, so the writer has finished writing.
    let written = match written {
        Some(w) => w,
        None => done_rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| Error::WriterLost)??,
    };
    let _ = stop_tx.send(());
    let _ = writer.join();
    let from = connected_at.unwrap_or(start);
    let secs = done.duration_since(from).as_secs_f64().max(1e-9);
    Ok(Pass {
        routes: published,
        routes_per_s: published as f64 / secs,
        tail_s: done.saturating_duration_since(written).as_secs_f64(),
        bytes_per_route: growth as f64 / published.max(1) as f64,
    })
}

/// Runs the benchmark.
pub(crate) fn run(a: &FpmBenchArgs) -> Result<(), Error> {
    let (table, what) = match &a.table {
        Some(p) => (
            vfsr_table::read_table_file(p, &Default::default())
                .map_err(Error::Table)?
                .0,
            p.display().to_string(),
        ),
        None => {
            let (t, s) = vfsr_table::shared::load_default_table(1).map_err(Error::Table)?;
            (t, s.to_string())
        }
    };
    let mut v4: Vec<TableRoute> = Vec::with_capacity(table.v4.len());
    let mut seen4 = std::collections::HashSet::new();
    for (i, r) in table.v4.iter().enumerate() {
        if !seen4.insert(r.prefix) {
            continue;
        }
        let g = (i as u32) % (PORTS * GATEWAYS_PER_PORT);
        v4.push(TableRoute {
            addr: IpAddr::V4(Ipv4Addr::from(r.prefix.addr())),
            len: r.prefix.len(),
            gateway: gateway4(g),
            oif: oif(g % PORTS + 1),
        });
    }
    let mut v6: Vec<TableRoute> = Vec::with_capacity(table.v6.len());
    let mut seen6 = std::collections::HashSet::new();
    for (i, r) in table.v6.iter().enumerate() {
        if !seen6.insert(r.prefix) {
            continue;
        }
        let g = (i as u32) % (PORTS * GATEWAYS_PER_PORT);
        v6.push(TableRoute {
            addr: IpAddr::V6(Ipv6Addr::from(r.prefix.addr())),
            len: r.prefix.len(),
            gateway: gateway6(g),
            oif: oif(g % PORTS + 1),
        });
    }
    // Connected subnets of the four ports are in the FIB too (one v4, one v6 each).
    let connected = 2 * PORTS as usize;
    let expected = v4.len() + v6.len() + connected;
    let core = a.core.unwrap_or_else(vfsr_cpu::default_bench_core);
    let cpu = crate::machine::cpu_model();
    println!(
        "vfsr fpm bench: {what}: {} IPv4 + {} IPv6 prefixes over {} gateways; vfsrd's side on \
         core {core}; {cpu}",
        v4.len(),
        v6.len(),
        PORTS * GATEWAYS_PER_PORT
    );
    // Every (mode, eager limit) variant, their passes interleaved.
    let eagers: Vec<Option<usize>> = if a.eager_limit.is_empty() {
        vec![None]
    } else {
        a.eager_limit.iter().map(|n| Some(*n)).collect()
    };
    struct Variant {
        name: String,
        mode: String,
        eager: Option<usize>,
        stream: Vec<u8>,
        frames: u64,
        passes: Vec<Pass>,
    }
    let mut variants = Vec::new();
    for mode in &a.modes {
        let nhg = match mode.as_str() {
            "routes" => false,
            "nhg" => true,
            other => return Err(Error::Mode(other.to_string())),
        };
        let mut stream = Vec::new();
        let summary = write_table_stream(
            &v4,
            &v6,
            &TableStreamOptions {
                nexthop_objects: nhg,
                ..TableStreamOptions::default()
            },
            &mut stream,
        )
        .map_err(Error::Stream)?;
        for e in &eagers {
            variants.push(Variant {
                name: match e {
                    Some(n) => format!("{mode}, eager {n}"),
                    None => mode.clone(),
                },
                mode: mode.clone(),
                eager: *e,
                stream: stream.clone(),
                frames: summary.frames,
                passes: Vec::new(),
            });
        }
    }
    let setup = IntakeSetup::four_ports();
    for _ in 0..a.passes.max(1) {
        for v in &mut variants {
            let p = replay(&v.stream, Expect::Prefixes(expected), core, v.eager, &setup)?;
            v.passes.push(p);
        }
    }
    let mut results = Vec::new();
    let mut rows = Vec::new();
    for v in &variants {
        let rates: Vec<f64> = v.passes.iter().map(|p| p.routes_per_s).collect();
        let tails: Vec<f64> = v.passes.iter().map(|p| p.tail_s).collect();
        let bpr: Vec<f64> = v.passes.iter().map(|p| p.bytes_per_route).collect();
        let routes = v.passes.last().map_or(0, |p| p.routes);
        let (r, t, b) = (Stats::of(&rates), Stats::of(&tails), Stats::of(&bpr));
        rows.push(format!(
            "| {} | {routes} | {:.2} / {:.2} / {:.2} | {:.3} / {:.3} / {:.3} | {:.0} | {} |",
            v.name,
            r.min / 1e6,
            r.median / 1e6,
            r.max / 1e6,
            t.min,
            t.median,
            t.max,
            b.median,
            v.stream.len()
        ));
        results.push(json!({
            "mode": v.mode,
            "eager_limit": v.eager,
            "routes": routes,
            "stream_bytes": v.stream.len(),
            "frames": v.frames,
            "routes_per_s": {"min": r.min, "median": r.median, "max": r.max},
            "tail_s": {"min": t.min, "median": t.median, "max": t.max},
            "bytes_per_route": b.median,
        }));
    }
    println!("| mode | routes | Mroutes/s min / median / max | tail s min / median / max | RSS bytes per route | stream bytes |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for r in rows {
        println!("{r}");
    }
    if let Some(path) = &a.json {
        let v = json!({"cpu": cpu, "table": what, "passes": a.passes, "results": results});
        crate::jsonfile::write(path, &v)?;
    }
    Ok(())
}
