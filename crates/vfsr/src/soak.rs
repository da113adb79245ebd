//! `vfsr soak`: vfsrd as a router between namespaces for a long time, under route churn and
//! traffic, checked at the end for leaks, lost counts and a FIB that drifted from its source.
//!
//! ```text
//!  ns gen                      ns rtr: vfsrd (control core 0, worker core 1)         ns sink
//!  gen0 10.10.0.2 ══veth══ A ─▶ worker ─▶ B ══veth══ 10.20.0.2 … .9, fd00:20::2 … ::9
//!   XDP generator: 64-byte UDP      ▲ FPM 127.0.0.1:2620        (XDP counts what arrives)
//!   to table destinations           │
//!   (core 0)                    soak: zebra's stream (RTM_NEWROUTE / RTM_DELROUTE)
//! ```
//!
//! 1. **Table.** The 2024 reference table when `../shared/data` has it, else the synthetic
//!    one (`--synthetic N` asks for a generated table of N IPv4 and N/8 IPv6 prefixes).
//!    Prefixes that overlap the lab's own subnets are left out. Every route goes via one of
//!    eight gateways on the sink's link (10.20.0.2–9, fd00:20::2–9).
//! 2. **Load.** vfsrd starts with an `[fpm]` listener; the soak connects as zebra's
//!    `dplane_fpm_nl` does and sends the whole table (`RTM_NEWROUTE`, one frame per route),
//!    then waits until vfsrd's RIB holds every route (`show sources` over the control API)
//!    and compares the FIB dump with the table once.
//! 3. **Churn** for `--minutes`, at `--rate` changes per second in 10 ms ticks, in turn: a
//!    withdrawal (`RTM_DELROUTE`), a next-hop change (`RTM_DELROUTE` then `RTM_NEWROUTE`
//!    with another gateway: how zebra's FPM module sends a route update) and a
//!    re-announcement of a withdrawn prefix (`RTM_NEWROUTE`). About 1 % of the table
//!    (10,000 prefixes at most) is withdrawn at any time, so the table keeps its size and
//!    memory can be compared across the run. A quarter of the changes hit the prefixes the
//!    traffic is sent to.
//! 4. **Traffic** all along: the generator of `vfsr fwd bench --veth` (on core 0, ordinary
//!    scheduling) offers `--pps` frames per second to `--destinations` addresses drawn from the table's IPv4 prefixes; the
//!    sink's XDP program counts what arrives. Frames to a prefix that is withdrawn at that
//!    moment are dropped by vfsrd as `no_route` (or forwarded by a covering route).
//! 5. **Samples** every `--sample-s` seconds: vfsrd's resident memory (`VmRSS` of
//!    `/proc/PID/status` and `smaps_rollup`), its counters (stats file), the FPM messages it
//!    has taken in, the changes sent, the frames offered and arriving at the sink.
//! 6. **Checks** at the end, after the churn and the traffic stopped and vfsrd caught up:
//!    - memory: the mean `VmRSS` of the last tenth of the run no more than `--rss-bound` %
//!      (5) above that of the first tenth after the load. Memory that falls passes (and is
//!      shown): vfsrd's allocator gives the load's transient memory back to the system some
//!      seconds after the load, which is not a leak;
//!    - counters: `rx = forwarded + punted + held + dropped`, the drops adding up by reason
//!      and the punts by class, and the sink never counting more than vfsrd forwarded;
//!    - FIB: vfsrd's FIB dump compared prefix by prefix with the routes the soak believes
//!      installed: none missing (lost), none withdrawn but present (stale), none through
//!      another gateway; and the RIB's FPM route count equal to the table's.
//!
//! The run prints a line per sample and a summary table, writes everything (time series
//! included) to `--json`, and fails when a check fails.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};
use vfsr_bench::stats::Stats;
use vfsr_netlink::fpm::{write_table_stream, TableRoute, TableStreamOptions};
use vfsr_netlink::{encode_into, Message, NextHop, Op, Route, RouteType};
use vfsrd::harness::Vfsrd;
use vfsrd::netlab;

use crate::vethbench::{self, Generator, Scheduling, GEN_CORE, ROUTER_A, ROUTER_CORE};

/// `vfsr soak` arguments.
#[derive(Args)]
pub struct SoakArgs {
    /// How long the churn and the traffic last (after the table is loaded).
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    /// Route changes per second (withdrawals, next-hop changes, re-announcements).
    #[arg(long, default_value_t = 10_000)]
    rate: u64,
    /// Write the results and the time series as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Route table file (text or MRT, gzip or not); default: the 2024 reference table, else
    /// the synthetic one.
    #[arg(long)]
    table: Option<PathBuf>,
    /// Use a generated table of this many IPv4 prefixes (and an eighth as many IPv6 ones).
    #[arg(long, conflicts_with = "table")]
    synthetic: Option<usize>,
    /// Seed of the generated table, the destinations and the churn.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Frames per second offered through the router.
    #[arg(long, default_value_t = 200_000)]
    pps: u64,
    /// Traffic destinations (a power of two up to 1048576).
    #[arg(long, default_value_t = 65_536)]
    destinations: usize,
    /// Seconds between samples.
    #[arg(long, default_value_t = 5.0)]
    sample_s: f64,
    /// How far (%) the resident memory of the last tenth may lie above the first tenth's.
    #[arg(long, default_value_t = 5.0)]
    rss_bound: f64,
    /// The vfsrd binary (default: the one built next to vfsr).
    #[arg(long)]
    vfsrd: Option<PathBuf>,
}

/// The gateways on the sink's link every route goes through, as (IPv4, IPv6).
const GATEWAYS: u8 = 8;
/// Where vfsrd listens for zebra, in the router's namespace.
const FPM_LISTEN: &str = "127.0.0.1:2620";
/// The route table and protocol zebra's routes carry (main, bgp).
const TABLE_MAIN: u32 = 254;
const PROTO_BGP: u8 = 186;
/// Churn ticks.
const TICK: Duration = Duration::from_millis(10);
/// `SCHED_FIFO` priority of the router port's receive thread (as `vfsr fwd bench --veth`).
const NAPI_PRIORITY: i32 = 5;
/// How long vfsrd may take to take in the whole table, or to catch up at the end.
const CATCH_UP: Duration = Duration::from_secs(600);

fn gateway(v4: bool, g: u8) -> IpAddr {
    if v4 {
        IpAddr::V4(Ipv4Addr::new(10, 20, 0, 2 + g))
    } else {
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0x20, 0, 0, 0, 0, 0, 2 + u16::from(g)))
    }
}

/// One prefix of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Pfx {
    addr: IpAddr,
    len: u8,
}

impl Pfx {
    fn v4(&self) -> bool {
        self.addr.is_ipv4()
    }

    fn text(&self) -> String {
        format!("{}/{}", self.addr, self.len)
    }
}

/// Whether two IPv4 prefixes overlap (one contains the other).
fn overlap4(a: u32, alen: u8, b: u32, blen: u8) -> bool {
    let l = alen.min(blen);
    let mask = if l == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(l))
    };
    a & mask == b & mask
}

fn overlap6(a: u128, alen: u8, b: u128, blen: u8) -> bool {
    let l = alen.min(blen);
    let mask = if l == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(l))
    };
    a & mask == b & mask
}

/// The lab's own subnets, kept out of the table: 10.10.0.0/16, 10.20.0.0/16, fd00:20::/64.
fn in_lab(p: &Pfx) -> bool {
    match p.addr {
        IpAddr::V4(a) => {
            let a = u32::from(a);
            overlap4(a, p.len, 0x0a0a_0000, 16) || overlap4(a, p.len, 0x0a14_0000, 16)
        }
        IpAddr::V6(a) => overlap6(u128::from(a), p.len, 0xfd00_0020 << 96, 64),
    }
}

/// A small xorshift generator (the churn and the destinations are reproducible per seed).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// The routes the soak believes vfsrd holds: per prefix 0 (withdrawn) or 1 + gateway.
struct Believed {
    prefixes: Vec<Pfx>,
    state: Vec<u8>,
    /// Indexes of the withdrawn prefixes.
    withdrawn: Vec<usize>,
}

impl Believed {
    fn installed(&self) -> usize {
        self.prefixes.len() - self.withdrawn.len()
    }

    /// What the FIB dump should say for each installed prefix.
    fn expected(&self, port: &str) -> BTreeMap<String, String> {
        self.prefixes
            .iter()
            .zip(&self.state)
            .filter(|(_, s)| **s > 0)
            .map(|(p, s)| {
                (
                    p.text(),
                    format!("via {} dev {port}", gateway(p.v4(), s - 1)),
                )
            })
            .collect()
    }
}

/// Counts the churn thread keeps, read by the sampler.
#[derive(Default)]
struct ChurnCounts {
    changes: AtomicU64,
    withdrawals: AtomicU64,
    nexthop_changes: AtomicU64,
    announcements: AtomicU64,
    frames: AtomicU64,
}

/// Appends one route message to `out` as an FPM frame.
fn put_route(
    out: &mut Vec<u8>,
    nl: &mut Vec<u8>,
    seq: &mut u32,
    op: Op,
    p: &Pfx,
    gw: u8,
    oif: u32,
) -> Result<(), Error> {
    let nexthops = match op {
        Op::New => vec![NextHop {
            gateway: Some(gateway(p.v4(), gw)),
            oif: Some(oif),
            weight: 1,
            onlink: false,
        }],
        Op::Del => Vec::new(),
    };
    let msg = Message::Route(Route {
        op,
        replace: false,
        dst: (p.addr, p.len),
        table: TABLE_MAIN,
        protocol: PROTO_BGP,
        scope: 0,
        kind: RouteType::Unicast,
        priority: Some(20),
        nexthops,
        nhid: None,
        src_len: 0,
    });
    *seq = seq.wrapping_add(1);
    nl.clear();
    encode_into(&msg, *seq, nl);
    vfsr_netlink::fpm::frame(nl, out).map_err(Error::Frame)
}

/// What the churn thread was given.
struct Churn {
    believed: Believed,
    /// Indexes of the prefixes the traffic goes to.
    hot: Vec<usize>,
    rate: u64,
    until: Instant,
    oif: u32,
    seed: u64,
    /// Sequence number of the last frame of the load.
    seq: u32,
}

/// Sends `rate` changes per second until `until` or `stop`; gives back what it believes.
fn churn(
    mut c: Churn,
    mut sock: TcpStream,
    counts: &ChurnCounts,
    stop: &AtomicBool,
) -> Result<(Believed, TcpStream), Error> {
    let n = c.believed.prefixes.len();
    let pool = (n / 100).clamp(1, 10_000);
    let mut rng = Rng::new(c.seed ^ 0x5eed);
    let mut out = Vec::with_capacity(1 << 20);
    let mut nl = Vec::with_capacity(256);
    let start = Instant::now();
    let mut done: u64 = 0;
    let mut turn: u64 = 0;
    let b = &mut c.believed;
    // A prefix to change: a quarter of the time one the traffic goes to.
    let pick = |rng: &mut Rng| -> usize {
        if !c.hot.is_empty() && rng.next().is_multiple_of(4) {
            c.hot.get(rng.below(c.hot.len())).copied().unwrap_or(0)
        } else {
            rng.below(n)
        }
    };
    while Instant::now() < c.until && !stop.load(Ordering::Relaxed) {
        let due = (start.elapsed().as_secs_f64() * c.rate as f64) as u64;
        // At most a second's worth at once: a stalled writer catches up, but not in one burst.
        let todo = due.saturating_sub(done).min(c.rate.max(1));
        out.clear();
        let mut frames = 0u64;
        let (mut w, mut x, mut a) = (0u64, 0u64, 0u64);
        for _ in 0..todo {
            let kind = if b.withdrawn.len() < pool {
                0
            } else {
                turn += 1;
                turn % 3
            };
            match kind {
                // Withdraw an installed prefix (or, failing to find one, change nothing).
                0 | 1 => {
                    let mut found = None;
                    for _ in 0..16 {
                        let i = pick(&mut rng);
                        if b.state.get(i).is_some_and(|s| *s > 0) {
                            found = Some(i);
                            break;
                        }
                    }
                    let Some(i) = found else { continue };
                    let (Some(p), Some(s)) = (b.prefixes.get(i).copied(), b.state.get_mut(i))
                    else {
                        continue;
                    };
                    put_route(&mut out, &mut nl, &mut c.seq, Op::Del, &p, 0, c.oif)?;
                    frames += 1;
                    if kind == 0 {
                        *s = 0;
                        b.withdrawn.push(i);
                        w += 1;
                    } else {
                        let g = ((*s - 1) + 1 + (rng.next() % u64::from(GATEWAYS - 1)) as u8)
                            % GATEWAYS;
                        *s = g + 1;
                        put_route(&mut out, &mut nl, &mut c.seq, Op::New, &p, g, c.oif)?;
                        frames += 1;
                        x += 1;
                    }
                }
                // Announce a withdrawn prefix again.
                _ => {
                    if b.withdrawn.is_empty() {
                        continue;
                    }
                    let i = b.withdrawn.swap_remove(rng.below(b.withdrawn.len()));
                    let g = (rng.next() % u64::from(GATEWAYS)) as u8;
                    let (Some(p), Some(s)) = (b.prefixes.get(i).copied(), b.state.get_mut(i))
                    else {
                        continue;
                    };
                    *s = g + 1;
                    put_route(&mut out, &mut nl, &mut c.seq, Op::New, &p, g, c.oif)?;
                    frames += 1;
                    a += 1;
                }
            }
        }
        done += todo;
        if !out.is_empty() {
            sock.write_all(&out).map_err(Error::FpmWrite)?;
        }
        counts.withdrawals.fetch_add(w, Ordering::Relaxed);
        counts.nexthop_changes.fetch_add(x, Ordering::Relaxed);
        counts.announcements.fetch_add(a, Ordering::Relaxed);
        counts.changes.fetch_add(w + x + a, Ordering::Relaxed);
        counts.frames.fetch_add(frames, Ordering::Relaxed);
        // Sleep to the next tick.
        let next = TICK.as_secs_f64()
            * ((start.elapsed().as_secs_f64() / TICK.as_secs_f64()).floor() + 1.0);
        let left = next - start.elapsed().as_secs_f64();
        if left > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(left));
        }
    }
    // zebra keeps its connection: the socket stays open until the checks are done.
    Ok((c.believed, sock))
}

/// `VmRSS` (KiB) of process `pid`, 0 when unreadable.
fn vm_rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    kib_field(&s, "VmRSS:")
}

fn kib_field(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|x| x.parse().ok())
        .unwrap_or(0)
}

/// The fields of `/proc/PID/smaps_rollup` that say where resident memory is (KiB).
fn smaps(pid: u32) -> Value {
    let s = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    json!({
        "rss": kib_field(&s, "Rss:"),
        "pss": kib_field(&s, "Pss:"),
        "anonymous": kib_field(&s, "Anonymous:"),
        "private_dirty": kib_field(&s, "Private_Dirty:"),
        "anon_huge": kib_field(&s, "AnonHugePages:"),
    })
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// `show sources` over the control API (`Null` when vfsrd does not answer).
fn sources(socket: &Path) -> Value {
    let Ok(mut c) = vfsr_api::Client::connect(socket) else {
        return Value::Null;
    };
    c.call(&vfsr_api::Request::ShowSources)
        .unwrap_or(Value::Null)
}

/// FPM messages vfsrd has taken in and the FPM routes in its RIB (v4 + v6).
fn fpm_progress(s: &Value) -> (u64, u64) {
    let r = &s["rib_routes"]["fpm"];
    (
        u(&s["fpm"]["counters"]["messages"]),
        u(&r["v4"]) + u(&r["v6"]),
    )
}

/// Waits until vfsrd has taken in `frames` FPM messages and holds `routes` FPM routes.
fn catch_up(d: &Vfsrd, frames: u64, routes: u64, what: &str) -> Result<Duration, Error> {
    let t0 = Instant::now();
    let mut last_print = t0;
    loop {
        let s = sources(d.socket());
        let (m, r) = fpm_progress(&s);
        if m >= frames && r == routes {
            return Ok(t0.elapsed());
        }
        if t0.elapsed() > CATCH_UP {
            return Err(Error::CatchUp {
                what: what.to_string(),
                took: (m, frames),
                holds: (r, routes),
            });
        }
        if last_print.elapsed() > Duration::from_secs(10) {
            println!("  {what}: {m} of {frames} messages, {r} of {routes} routes");
            last_print = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The FIB dump against the believed routes: (prefixes compared, differences, the first
/// few in words, counts by kind).
struct FibDiff {
    compared: usize,
    missing: usize,
    stale: usize,
    wrong: usize,
    first: Vec<String>,
}

impl FibDiff {
    fn differences(&self) -> usize {
        self.missing + self.stale + self.wrong
    }

    fn to_json(&self) -> Value {
        json!({"compared": self.compared, "differences": self.differences(),
            "missing": self.missing, "stale": self.stale, "wrong_nexthop": self.wrong,
            "first": self.first})
    }
}

/// Compares vfsrd's FIB (`fib`: prefix → how it forwards) with `expected`; the lab's
/// connected subnets (and anything else vfsrd forwards by `connected`) are left aside.
fn compare_fib(fib: &BTreeMap<String, String>, expected: &BTreeMap<String, String>) -> FibDiff {
    let mut d = FibDiff {
        compared: expected.len(),
        missing: 0,
        stale: 0,
        wrong: 0,
        first: Vec::new(),
    };
    let note = |d: &mut Vec<String>, s: String| {
        if d.len() < 10 {
            d.push(s);
        }
    };
    for (p, want) in expected {
        match fib.get(p) {
            None => {
                d.missing += 1;
                note(&mut d.first, format!("{p}: missing (want {want})"));
            }
            Some(have) if have != want => {
                d.wrong += 1;
                note(&mut d.first, format!("{p}: {have} (want {want})"));
            }
            Some(_) => {}
        }
    }
    for (p, have) in fib {
        if !expected.contains_key(p) && !have.starts_with("connected") {
            d.stale += 1;
            note(&mut d.first, format!("{p}: {have} (withdrawn)"));
        }
    }
    d
}

/// The table's prefixes (deduplicated, the lab's subnets left out), and where it came from.
fn load_table(a: &SoakArgs) -> Result<(Vec<Pfx>, String), Error> {
    let t = match (&a.table, a.synthetic) {
        (Some(p), _) => crate::tables::load(p, false).map_err(Error::Table)?,
        (None, Some(n)) => {
            let p4 = vfsr_table::synth_v4(a.seed, n);
            let p6 = vfsr_table::synth_v6(a.seed, (n / 8).max(1));
            let t = vfsr_table::Table::from_prefixes(&p4, &p6);
            crate::tables::Loaded {
                v4: t.v4,
                v6: t.v6,
                nexthops: t.nexthops,
                source: format!("generated table (seed {}, {n} IPv4 prefixes)", a.seed),
            }
        }
        (None, None) => crate::tables::default_table(a.seed).map_err(Error::Table)?,
    };
    let mut v: Vec<Pfx> =
        t.v4.iter()
            .map(|r| Pfx {
                addr: IpAddr::V4(Ipv4Addr::from(r.prefix.addr())),
                len: r.prefix.len(),
            })
            .chain(t.v6.iter().map(|r| Pfx {
                addr: IpAddr::V6(Ipv6Addr::from(r.prefix.addr())),
                len: r.prefix.len(),
            }))
            .filter(|p| !in_lab(p))
            .collect();
    v.sort();
    v.dedup();
    Ok((v, t.source))
}

/// `n` destinations inside the table's IPv4 prefixes (unicast, outside the lab), and the
/// indexes of the prefixes they were drawn from.
fn destinations(prefixes: &[Pfx], n: usize, seed: u64) -> (Vec<u32>, Vec<usize>) {
    let v4: Vec<usize> = (0..prefixes.len())
        .filter(|i| prefixes.get(*i).is_some_and(Pfx::v4))
        .collect();
    let mut rng = Rng::new(seed);
    let (mut out, mut hot) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut tries = 0;
    while out.len() < n && tries < n * 20 && !v4.is_empty() {
        tries += 1;
        let i = v4.get(rng.below(v4.len())).copied().unwrap_or(0);
        let Some(Pfx {
            addr: IpAddr::V4(a),
            len,
        }) = prefixes.get(i)
        else {
            continue;
        };
        let host = if *len >= 32 {
            0
        } else {
            (rng.next() as u32) & (u32::MAX >> len)
        };
        let d = u32::from(*a) | host;
        if d >> 24 == 0 || d >> 24 == 127 || d >> 28 >= 0xe {
            continue;
        }
        out.push(d);
        hot.push(i);
    }
    hot.sort_unstable();
    hot.dedup();
    (out, hot)
}

/// The sink's interface: the one that is not `lo` in its namespace.
fn sink_if(lab: &netlab::NetLab) -> Result<String, Error> {
    let o = lab.ip("sink", &["-o", "link", "show"])?;
    o.lines()
        .filter_map(|l| l.split(':').nth(1))
        .map(|n| n.trim().split('@').next().unwrap_or("").to_string())
        .find(|n| !n.is_empty() && n != "lo")
        .ok_or(Error::NoSink)
}

/// One sample.
struct Sample {
    t: f64,
    rss_kib: u64,
    json: Value,
    fwd_pps: f64,
    changes_per_s: f64,
}

/// What can stop a soak, each with the message it prints.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// No network namespaces or no root (why).
    #[error("soak builds network namespaces: {0}")]
    NoNamespaces(#[source] netlab::Error),
    /// Fewer than the two cores the soak pins to.
    #[error("soak needs 2 cores (control plane and generator on 0, worker on 1)")]
    TooFewCores,
    /// `--destinations` is not a power of two up to 2^20.
    #[error("--destinations {0} must be a power of two up to 1048576")]
    Destinations(usize),
    /// `--minutes` or `--sample-s` is not positive.
    #[error("--minutes and --sample-s must be positive")]
    NotPositive,
    /// The table could not be read (the reader's error names the file).
    #[error(transparent)]
    Table(vfsr_table::Error),
    /// The table has fewer IPv4 prefixes than destinations are asked for.
    #[error("the table has too few IPv4 prefixes to draw destinations from")]
    TooFewPrefixes,
    /// The benchmark lab the soak builds on (`vethbench`).
    #[error(transparent)]
    Lab(#[from] vethbench::Error),
    /// A namespace, link or command failed.
    #[error(transparent)]
    NetLab(#[from] netlab::Error),
    /// vfsrd's harness could not start vfsrd, or it did not say it was ready.
    #[error(transparent)]
    Harness(#[from] vfsrd::harness::Error),
    /// The sink's namespace has no interface but the loopback.
    #[error("the sink has no interface")]
    NoSink,
    /// vfsrd runs without a process id to watch.
    #[error("vfsrd has no process id")]
    NoPid,
    /// The FPM listener did not take a connection (the last refusal, if any).
    #[error(
        "cannot connect to vfsrd's FPM listener {FPM_LISTEN}: {}",
        .0.as_ref().map(ToString::to_string).unwrap_or_default()
    )]
    ConnectFpm(#[source] Option<std::io::Error>),
    /// The table could not be sent over FPM.
    #[error("sending the table: {0}")]
    SendTable(#[source] std::io::Error),
    /// A route change could not be framed for FPM.
    #[error(transparent)]
    Frame(vfsr_netlink::fpm::FpmError),
    /// The churn could not be written to the FPM socket.
    #[error("writing to vfsrd's FPM socket: {0}")]
    FpmWrite(#[source] std::io::Error),
    /// The churn thread panicked.
    #[error("the churn thread panicked")]
    ChurnPanicked,
    /// vfsrd did not take in the FPM messages or hold the routes in time: (messages taken,
    /// sent), (routes held, expected).
    #[error(
        "{what}: vfsrd took in {} of {} FPM messages and holds {} of {} routes after {} s",
        .took.0,
        .took.1,
        .holds.0,
        .holds.1,
        CATCH_UP.as_secs()
    )]
    CatchUp {
        what: String,
        took: (u64, u64),
        holds: (u64, u64),
    },
    /// The report could not be written.
    #[error(transparent)]
    Report(#[from] crate::jsonfile::Error),
    /// A check failed (the table printed says which).
    #[error("soak: a check failed (see the table above)")]
    ChecksFailed,
}

/// `vfsr soak`.
pub(crate) fn run(a: &SoakArgs) -> Result<(), Error> {
    netlab::available().map_err(Error::NoNamespaces)?;
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return Err(Error::TooFewCores);
    }
    if !a.destinations.is_power_of_two() || a.destinations > 1 << 20 {
        return Err(Error::Destinations(a.destinations));
    }
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if !positive(a.minutes) || !positive(a.sample_s) {
        return Err(Error::NotPositive);
    }
    let exe = vethbench::vfsrd_exe(a.vfsrd.as_ref())?;
    let cpu = crate::machine::cpu_model();
    let (prefixes, what) = load_table(a)?;
    let (dests, hot) = destinations(&prefixes, a.destinations, a.seed);
    if dests.len() < a.destinations {
        return Err(Error::TooFewPrefixes);
    }
    let n4 = prefixes.iter().filter(|p| p.v4()).count();
    let duration = Duration::from_secs_f64(a.minutes * 60.0);
    println!(
        "vfsr soak: {what}: {n4} IPv4 + {} IPv6 prefixes; {} changes/s for {:.1} min; \
         {} frames/s to {} destinations ({} prefixes); {cpu}",
        prefixes.len() - n4,
        a.rate,
        a.minutes,
        a.pps,
        dests.len(),
        hot.len()
    );
    crate::interrupt::on_interrupt("removing the soak's namespaces", || {
        crate::interrupt::delete_namespaces(&format!("fb{}-", std::process::id()));
    });

    // The lab: gen ── rtr ── sink, the sink answering for the eight gateways.
    let l = vethbench::build_lab()?;
    let sink = sink_if(&l.lab)?;
    for g in 1..GATEWAYS {
        l.lab.ip(
            "sink",
            &[
                "addr",
                "add",
                &format!("{}/24", gateway(true, g)),
                "dev",
                &sink,
            ],
        )?;
    }
    for g in 0..GATEWAYS {
        l.lab.ip(
            "sink",
            &[
                "addr",
                "add",
                &format!("{}/64", gateway(false, g)),
                "dev",
                &sink,
                "nodad",
            ],
        )?;
    }
    let config = format!(
        "[router]\ncontrol_core = {GEN_CORE}\nworkers = [{ROUTER_CORE}]\n\n\
         [[interface]]\nname = \"{}\"\nbackend = \"xdp\"\naddresses = [\"{ROUTER_A}/24\"]\n\n\
         [[interface]]\nname = \"{}\"\nbackend = \"xdp\"\n\
         addresses = [\"10.20.0.1/24\", \"fd00:20::1/64\"]\n\n\
         [fpm]\nlisten = \"{FPM_LISTEN}\"\n\n\
         [api]\nsocket = \"@SOCKET@\"\nmetrics = \"off\"\n",
        l.a, l.b
    );
    let d = Vfsrd::start(&l.lab, "rtr", &exe, "soak", &config)?;
    let pid = d.pid().ok_or(Error::NoPid)?;
    // The soak's own threads stay on core 0, off the worker's core (after vfsrd started:
    // it would inherit the affinity and see one core).
    let _ = vfsr_cpu::pin(GEN_CORE);
    vethbench::threaded_napi(&l.lab, "rtr", &l.a, ROUTER_CORE, NAPI_PRIORITY);
    let oif = vethbench::ifindex_in(&l.lab, "rtr", &l.b)?;

    // Load: the whole table, every route via a gateway of its own.
    let believed = Believed {
        state: (0..prefixes.len())
            .map(|i| (i % usize::from(GATEWAYS)) as u8 + 1)
            .collect(),
        prefixes,
        withdrawn: Vec::new(),
    };
    let routes: Vec<TableRoute> = believed
        .prefixes
        .iter()
        .zip(&believed.state)
        .map(|(p, s)| TableRoute {
            addr: p.addr,
            len: p.len,
            gateway: gateway(p.v4(), s - 1),
            oif,
        })
        .collect();
    let (r4, r6): (Vec<TableRoute>, Vec<TableRoute>) =
        routes.into_iter().partition(|r| r.addr.is_ipv4());
    let mut sock = connect_fpm(&l.lab)?;
    let rss_empty = vm_rss_kib(pid);
    let t_load = Instant::now();
    let summary = write_table_stream(&r4, &r6, &TableStreamOptions::default(), &mut sock)
        .map_err(Error::SendTable)?;
    drop((r4, r6));
    let load_frames = summary.frames;
    let total = believed.prefixes.len() as u64;
    catch_up(&d, load_frames, total, "load")?;
    let load_s = t_load.elapsed().as_secs_f64();
    let rss_loaded = vm_rss_kib(pid);
    println!(
        "  load: {total} routes in {load_s:.1} s; vfsrd resident {:.1} MiB empty, {:.1} MiB loaded",
        rss_empty as f64 / 1024.0,
        rss_loaded as f64 / 1024.0
    );
    let port = l.b.clone();
    let fib_load = compare_fib(&d.fib(Duration::from_secs(120)), &believed.expected(&port));
    println!(
        "  FIB after the load: {} prefixes compared, {} differences",
        fib_load.compared,
        fib_load.differences()
    );
    for s in &fib_load.first {
        println!("    {s}");
    }

    // Traffic: the generator of the veth benchmark on core 0.
    let limit = duration + Duration::from_secs(600);
    // Ordinary scheduling: it shares core 0 with the soak's threads and whatever else runs
    // there (at SCHED_IDLE a build beside it would stop the traffic); vfsrd's control plane
    // runs ahead of all of them at SCHED_FIFO.
    let gen = Generator::launch(&l, &dests, limit, Scheduling::Ordinary)?;
    gen.set_rate(a.pps);
    // Neighbors resolve before the clock starts.
    std::thread::sleep(Duration::from_secs(1));

    // Churn and samples.
    let counts = Arc::new(ChurnCounts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let until = t0 + duration;
    let c = Churn {
        believed,
        hot,
        rate: a.rate,
        until,
        oif,
        seed: a.seed,
        seq: u32::try_from(load_frames).unwrap_or(u32::MAX),
    };
    let writer = {
        let (counts, stop) = (Arc::clone(&counts), Arc::clone(&stop));
        std::thread::spawn(move || {
            let _ = vfsr_cpu::pin(GEN_CORE);
            churn(c, sock, &counts, &stop)
        })
    };
    println!(
        "| t s | VmRSS MiB | changes/s | vfsrd FPM msgs/s | offered kpps | forwarded kpps | no_route drops/s | other drops/s |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut samples: Vec<Sample> = Vec::new();
    let read = || {
        let stats = d.stats();
        Reading {
            // vfsrd writes its route sources' figures into the stats file too.
            fpm_messages: fpm_progress(&stats["routing"]).0,
            stats,
            sent: gen.sent(),
            sink: l.forwarded(),
            changes: counts.changes.load(Ordering::Relaxed),
        }
    };
    let mut prev = read();
    let mut prev_t = 0.0;
    let every = Duration::from_secs_f64(a.sample_s);
    let mut next = t0 + every;
    while Instant::now() < until {
        if writer.is_finished() {
            break;
        }
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(200)));
            continue;
        }
        next += every;
        let t = t0.elapsed().as_secs_f64();
        let cur = read();
        let rss = vm_rss_kib(pid);
        let s = sample(t, t - prev_t, &prev, &cur, rss, smaps(pid));
        println!("{}", s.json["row"].as_str().unwrap_or(""));
        samples.push(s);
        prev = cur;
        prev_t = t;
    }
    stop.store(true, Ordering::Relaxed);
    let stopped = Instant::now();
    let churn_s = stopped.duration_since(t0).as_secs_f64();
    let (believed, sock) = match writer.join() {
        Ok(Ok((b, sock))) => (b, sock),
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(Error::ChurnPanicked),
    };
    let frames_total = load_frames + counts.frames.load(Ordering::Relaxed);
    catch_up(&d, frames_total, believed.installed() as u64, "catching up")?;
    let caught = stopped.elapsed();
    // Traffic stops after the churn; the counters settle (the generator finishes the test
    // run it is in, and vfsrd rewrites its stats file every second).
    gen.pause();
    let sent_total = settle(|| gen.sent());
    settle(|| u(&d.stats()["rx"]));
    // Publication follows within `max_delay_us` (1 ms); a second covers it.
    std::thread::sleep(Duration::from_secs(1));
    let final_stats = d.stats();
    let sink_total = l.forwarded();
    let src = sources(d.socket());
    let fib = d.fib(Duration::from_secs(120));
    let diff = compare_fib(&fib, &believed.expected(&port));
    let rss_end = vm_rss_kib(pid);
    let running = {
        let mut d = d;
        let r = d.running();
        drop(d);
        r
    };
    gen.finish()?;
    drop(sock);

    // The checks.
    let changes = counts.changes.load(Ordering::Relaxed);
    let tenth = churn_s / 10.0;
    let window = |from: f64, to: f64| -> f64 {
        let v: Vec<f64> = samples
            .iter()
            .filter(|s| s.t >= from && s.t <= to)
            .map(|s| s.rss_kib as f64)
            .collect();
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    // Each window holds at least one sample, however short the run.
    let first_t = samples.first().map_or(0.0, |s| s.t);
    let last_t = samples.last().map_or(churn_s, |s| s.t);
    let first = window(0.0, tenth.max(first_t));
    let last = window((churn_s - tenth).min(last_t), f64::INFINITY);
    let drift = (last - first) / first * 100.0;
    // Growth is what a leak looks like; memory given back after the load is not.
    let rss_ok = drift.is_finite() && drift <= a.rss_bound;
    let balance = balance(&final_stats, sink_total);
    let balance_ok = balance["ok"] == true;
    let fpm_routes = fpm_progress(&src).1;
    let stale_routes = u(&src["fpm"]["stale_routes"]);
    let fib_ok = diff.differences() == 0
        && fpm_routes == believed.installed() as u64
        && stale_routes == 0
        && fib_load.differences() == 0;
    let fwd: Vec<f64> = samples.iter().map(|s| s.fwd_pps).collect();
    let churn_rates: Vec<f64> = samples.iter().map(|s| s.changes_per_s).collect();
    let (fs, cs) = (Stats::of(&fwd), Stats::of(&churn_rates));
    let achieved = changes as f64 / churn_s.max(1e-9);

    println!();
    println!("| check | figures | result |");
    println!("| --- | --- | --- |");
    println!(
        "| resident memory does not grow | VmRSS first tenth {:.1} MiB, last tenth {:.1} MiB, drift {drift:+.2} % (bound +{} %) | {} |",
        first / 1024.0,
        last / 1024.0,
        a.rss_bound,
        ok(rss_ok)
    );
    println!(
        "| counters balanced | rx {} = forwarded {} + punted {} + held {} + dropped {} ({}); sink {} ≤ forwarded + released {} | {} |",
        balance["rx"], balance["forwarded"], balance["punted"], balance["held"],
        balance["dropped"], balance["drops"], sink_total, balance["released"], ok(balance_ok)
    );
    println!(
        "| FIB equal to its source | {} prefixes compared: {} missing, {} stale, {} other next hop; RIB FPM routes {fpm_routes} of {}, {stale_routes} stale; after the load {} differences | {} |",
        diff.compared,
        diff.missing,
        diff.stale,
        diff.wrong,
        believed.installed(),
        fib_load.differences(),
        ok(fib_ok)
    );
    for s in &diff.first {
        println!("    {s}");
    }
    println!();
    println!("| figure | value |");
    println!("| --- | --- |");
    println!("| run | {churn_s:.0} s of churn and traffic after a {load_s:.1} s load of {total} routes; vfsrd caught up {:.2} s after the churn |", caught.as_secs_f64());
    println!(
        "| changes applied | {changes} ({} withdrawals, {} next-hop changes, {} re-announcements; {} FPM frames) |",
        counts.withdrawals.load(Ordering::Relaxed),
        counts.nexthop_changes.load(Ordering::Relaxed),
        counts.announcements.load(Ordering::Relaxed),
        counts.frames.load(Ordering::Relaxed)
    );
    println!(
        "| churn rate achieved | {achieved:.0} /s over the run (asked {}); per sample min {:.0}, median {:.0} |",
        a.rate, cs.min, cs.median
    );
    println!(
        "| forwarding rate (sink) | min {:.1} kpps, median {:.1} kpps, max {:.1} kpps (offered {} kpps) |",
        fs.min / 1e3,
        fs.median / 1e3,
        fs.max / 1e3,
        a.pps as f64 / 1e3
    );
    println!("| frames | generator sent {sent_total}, sink received {sink_total} |");
    println!(
        "| vfsrd resident | {:.1} MiB empty, {:.1} MiB loaded, {:.1} MiB at the end; {} |",
        rss_empty as f64 / 1024.0,
        rss_loaded as f64 / 1024.0,
        rss_end as f64 / 1024.0,
        if running {
            "running at the end"
        } else {
            "NOT running at the end"
        }
    );
    println!("| CPU | {cpu} |");

    let checks_ok = rss_ok && balance_ok && fib_ok && running;
    if let Some(path) = &a.json {
        let v = json!({
            "cpu": cpu,
            "table": what,
            "prefixes": total,
            "args": {"minutes": a.minutes, "rate": a.rate, "pps": a.pps,
                "destinations": a.destinations, "sample_s": a.sample_s, "seed": a.seed,
                "rss_bound_pct": a.rss_bound},
            "load": {"seconds": load_s, "frames": load_frames, "rss_empty_kib": rss_empty,
                "rss_loaded_kib": rss_loaded, "fib": fib_load.to_json()},
            "churn": {"seconds": churn_s, "changes": changes,
                "withdrawals": counts.withdrawals.load(Ordering::Relaxed),
                "nexthop_changes": counts.nexthop_changes.load(Ordering::Relaxed),
                "announcements": counts.announcements.load(Ordering::Relaxed),
                "frames": counts.frames.load(Ordering::Relaxed),
                "achieved_per_s": achieved,
                "per_sample": {"min": cs.min, "median": cs.median, "max": cs.max},
                "catch_up_s": caught.as_secs_f64()},
            "forwarding": {"offered_pps": a.pps, "sent": sent_total, "sink": sink_total,
                "pps": {"min": fs.min, "median": fs.median, "max": fs.max}},
            "checks": {
                "rss": {"first_tenth_kib": first, "last_tenth_kib": last, "drift_pct": drift,
                    "bound_pct": a.rss_bound, "end_kib": rss_end, "ok": rss_ok},
                "balance": balance,
                "fib": {"final": diff.to_json(), "fpm_rib_routes": fpm_routes,
                    "believed_installed": believed.installed(), "stale_routes": stale_routes,
                    "ok": fib_ok},
                "running": running,
                "ok": checks_ok,
            },
            "final_stats": final_stats,
            "sources": src,
            "samples": samples.iter().map(|s| s.json.clone()).collect::<Vec<_>>(),
        });
        crate::jsonfile::write(path, &v)?;
    }
    drop(l);
    if checks_ok {
        Ok(())
    } else {
        Err(Error::ChecksFailed)
    }
}

/// Reads `f` every 1.2 s until two readings agree (30 s at most); the last reading.
fn settle(f: impl Fn() -> u64) -> u64 {
    let t0 = Instant::now();
    let mut last = f();
    while t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(1200));
        let now = f();
        if now == last {
            break;
        }
        last = now;
    }
    last
}

fn ok(b: bool) -> &'static str {
    if b {
        "ok"
    } else {
        "FAILED"
    }
}

/// Connects to vfsrd's FPM listener from inside the router's namespace.
fn connect_fpm(lab: &netlab::NetLab) -> Result<TcpStream, Error> {
    let mut last = None;
    for _ in 0..50 {
        match lab.in_ns("rtr", || TcpStream::connect(FPM_LISTEN))? {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(Error::ConnectFpm(last))
}

/// What is read at each sample.
struct Reading {
    /// vfsrd's stats file.
    stats: Value,
    /// FPM messages vfsrd has taken in.
    fpm_messages: u64,
    /// Frames the generator sent.
    sent: u64,
    /// Bench frames the sink received.
    sink: u64,
    /// Route changes sent.
    changes: u64,
}

/// One sample from two readings `dt` seconds apart.
fn sample(t: f64, dt: f64, prev: &Reading, cur: &Reading, rss: u64, smaps: Value) -> Sample {
    let dt = dt.max(1e-9);
    let rate = |a: u64, b: u64| b.saturating_sub(a) as f64 / dt;
    let (st0, st1) = (&prev.stats, &cur.stats);
    let no_route = rate(u(&st0["drops"]["no_route"]), u(&st1["drops"]["no_route"]));
    let dropped = rate(u(&st0["dropped"]), u(&st1["dropped"]));
    let changes_per_s = rate(prev.changes, cur.changes);
    let fwd_pps = rate(prev.sink, cur.sink);
    let row = format!(
        "| {t:.0} | {:.1} | {changes_per_s:.0} | {:.0} | {:.1} | {:.1} | {no_route:.0} | {:.0} |",
        rss as f64 / 1024.0,
        rate(prev.fpm_messages, cur.fpm_messages),
        rate(prev.sent, cur.sent) / 1e3,
        fwd_pps / 1e3,
        (dropped - no_route).max(0.0)
    );
    let json = json!({
        "t_s": t,
        "vm_rss_kib": rss,
        "smaps_rollup_kib": smaps,
        "changes": cur.changes,
        "changes_per_s": changes_per_s,
        "fpm_messages": cur.fpm_messages,
        "fpm_messages_per_s": rate(prev.fpm_messages, cur.fpm_messages),
        "offered_pps": rate(prev.sent, cur.sent),
        "forwarded_pps": fwd_pps,
        "vfsrd": {"rx": st1["rx"], "forwarded": st1["forwarded"], "punted": st1["punted"],
            "held": st1["held"], "dropped": st1["dropped"], "drops": st1["drops"],
            "io": st1["io"]},
        "row": row,
    });
    Sample {
        t,
        rss_kib: rss,
        json,
        fwd_pps,
        changes_per_s,
    }
}

/// vfsrd's counters at rest: every received packet counted once (`rx = forwarded + punted +
/// held + dropped`), drops adding up by reason and punts by class; the sink never counted
/// more bench frames than vfsrd sent (forwarded, and held until the next hop resolved then
/// released by the control plane).
fn balance(st: &Value, sink: u64) -> Value {
    let (rx, fwd, punted, held, dropped, released) = (
        u(&st["rx"]),
        u(&st["forwarded"]),
        u(&st["punted"]),
        u(&st["held"]),
        u(&st["dropped"]),
        u(&st["control"]["released"]),
    );
    let sum_of = |v: &Value| -> u64 { v.as_object().map(|m| m.values().map(u).sum()).unwrap_or(0) };
    let (drops, punts) = (sum_of(&st["drops"]), sum_of(&st["punts"]));
    let outcomes = fwd + punted + held + dropped;
    let ok = !st.is_null()
        && rx > 0
        && outcomes == rx
        && drops == dropped
        && punts == punted
        && sink <= fwd + released;
    json!({"rx": rx, "forwarded": fwd, "punted": punted, "held": held, "dropped": dropped,
        "released": released,
        "drops": st["drops"], "drops_sum": drops, "punts_sum": punts, "sink": sink,
        "io": st["io"], "ok": ok})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_how_far_vfsrd_got() {
        let e = Error::CatchUp {
            what: "load".into(),
            took: (10, 12),
            holds: (7, 9),
        };
        assert_eq!(
            e.to_string(),
            format!(
                "load: vfsrd took in 10 of 12 FPM messages and holds 7 of 9 routes after {} s",
                CATCH_UP.as_secs()
            )
        );
        assert_eq!(
            Error::ConnectFpm(None).to_string(),
            format!("cannot connect to vfsrd's FPM listener {FPM_LISTEN}: ")
        );
    }

    #[test]
    fn lab_subnets_are_recognised() {
        let p = |s: &str, len| Pfx {
            addr: s.parse().unwrap(),
            len,
        };
        assert!(in_lab(&p("10.20.0.0", 24)));
        assert!(in_lab(&p("10.0.0.0", 8)));
        assert!(in_lab(&p("0.0.0.0", 0)));
        assert!(!in_lab(&p("10.21.0.0", 16)));
        assert!(!in_lab(&p("11.0.0.0", 8)));
        assert!(in_lab(&p("fd00:20::", 64)));
        assert!(in_lab(&p("fd00::", 16)));
        assert!(!in_lab(&p("2001:db8::", 32)));
    }

    #[test]
    fn fib_differences_are_found_by_kind() {
        let m = |v: &[(&str, &str)]| -> BTreeMap<String, String> {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let want = m(&[
            ("11.0.0.0/8", "via 10.20.0.2 dev b"),
            ("12.0.0.0/8", "via 10.20.0.3 dev b"),
            ("13.0.0.0/8", "via 10.20.0.4 dev b"),
        ]);
        let have = m(&[
            ("10.20.0.0/24", "connected dev b"),
            ("11.0.0.0/8", "via 10.20.0.2 dev b"),
            ("12.0.0.0/8", "via 10.20.0.9 dev b"),
            ("14.0.0.0/8", "via 10.20.0.4 dev b"),
        ]);
        let d = compare_fib(&have, &want);
        assert_eq!((d.missing, d.stale, d.wrong), (1, 1, 1));
        assert_eq!(d.differences(), 3);
        assert_eq!(d.first.len(), 3);
        assert_eq!(compare_fib(&want, &want).differences(), 0);
    }

    #[test]
    fn balance_needs_every_packet_counted_once() {
        let good = json!({"rx": 11, "forwarded": 6, "punted": 1, "held": 1, "dropped": 3,
            "drops": {"no_route": 2, "ttl_exceeded": 1}, "punts": {"arp_nd": 1},
            "control": {"released": 1}});
        assert_eq!(balance(&good, 7)["ok"], true);
        assert_eq!(
            balance(&good, 8)["ok"],
            false,
            "the sink saw more than was sent"
        );
        let mut bad = good.clone();
        bad["drops"]["no_route"] = json!(1);
        assert_eq!(balance(&bad, 7)["ok"], false);
        let mut bad = good;
        bad["rx"] = json!(12);
        assert_eq!(balance(&bad, 7)["ok"], false);
        assert_eq!(balance(&Value::Null, 0)["ok"], false);
    }

    #[test]
    fn destinations_lie_in_their_prefixes() {
        let prefixes = vec![
            Pfx {
                addr: "11.1.0.0".parse().unwrap(),
                len: 16,
            },
            Pfx {
                addr: "2001:db8::".parse().unwrap(),
                len: 32,
            },
            Pfx {
                addr: "12.0.0.0".parse().unwrap(),
                len: 8,
            },
        ];
        let (d, hot) = destinations(&prefixes, 64, 3);
        assert_eq!(d.len(), 64);
        assert!(d.iter().all(|a| a >> 16 == 0x0b01 || a >> 24 == 12));
        assert_eq!(hot, vec![0, 2]);
    }

    #[test]
    fn smaps_fields_are_read_in_kib() {
        let text = "Rss:              123456 kB\nPss:               120000 kB\nAnonymous:  99 kB\n";
        assert_eq!(kib_field(text, "Rss:"), 123456);
        assert_eq!(kib_field(text, "Anonymous:"), 99);
        assert_eq!(kib_field(text, "Swap:"), 0);
    }
}
