//! `vfsr cp flood`: the control plane's responsiveness while the port it listens on is
//! flooded with transit traffic, with and without the separation of control and forwarding.
//!
//! Olsson and Hagsand ("Control and forwarding plane separation on an open-source router",
//! Linux Kongress 2010) measured TCP transaction latency to a router idle, under a
//! forwarding flood, and under the flood with the control plane kept on core 0 and the
//! forwarding on the other cores; their experiment 2 sends the control traffic in-line,
//! on the interface that takes the flood. This command does the same with vfsrd, FRR and a
//! BGP speaker, in-line:
//!
//! ```text
//!  ns gen: the upstream neighbour                  ns rtr                              ns sink
//!  gen0 10.10.0.2 ═══veth═══ A ┬─ worker (core 1) ─▶ B ═══veth═══ sink0 10.20.0.2
//!   XDP generator: 64-byte UDP │   transit flood, every destination in the table via the sink
//!   gobgpd AS 65001 ─ BGP ────▶│─ control plane (core 0) ─▶ TAP vA 10.10.0.1: bgpd AS 65000
//!   TCP request/response ─────▶│     └─ echo replies             └─ zebra ─FPM─▶ vfsrd RIB/FIB
//!   ping 10.10.0.1 ───────────▶┘   TCP server on 10.10.0.1:7000 (the host stack, behind vA)
//!   lo: 198.18.0.0/15 and 100.64.0.0/10 local, a UDP echo ◀── probes from the sink, through
//!                                   vfsr, to an address in the newest announced prefix
//! ```
//!
//! **In-line.** The flood, the BGP session, the TCP transactions and the pings all come in
//! on port A, through the same veth and the same receive ring. The XDP program on A sends
//! transit frames to the worker and passes frames for the router's addresses to the kernel,
//! where the control plane's raw socket reads them. A's receive ring (the veth's 256 frames)
//! is kept full by the flood. A frame that finds it full is dropped at the sender and counted
//! in gen0's `tx_dropped`: the generator's XDP frames always, and the kernel's own frames
//! (BGP, TCP, ping) too when gen0 has no queueing discipline (a veth's default, `noqueue`).
//! With one (`--neighbour-qdisc pfifo`, the default), the veth stops gen0's queue while the
//! ring is full and the kernel's frames wait there (`requeues` of the qdisc) instead, as a
//! host's do behind a busy NIC. With `noqueue`, about one TCP segment in a thousand was lost
//! that way under the flood and came back only after the 200 ms retransmission timeout,
//! which made the p99 of the request/response 200 ms; vfsrd's own counters (punts, rate
//! limits, `to_host_dropped`, ring drops) showed nothing, since the frame never reached it.
//! Each phase records the link's counters (`link` in the JSON).
//!
//! **Phases**, each measuring for `--seconds` (60 by default), run in turn in one run (and
//! `--rounds` times, interleaved):
//!
//! - (a) `idle`: no flood;
//! - (b) `separated`: the generator floods A at the highest rate it reaches; vfsrd as
//!   configured: control plane pinned to core 0 at `SCHED_FIFO` 20, the worker on core 1 at
//!   10, punts limited per class;
//! - (c) `shared-core`: as (b) with the control plane moved onto the worker's core at
//!   ordinary priority, where it gets what the real-time worker and the port's receive
//!   thread leave (the kernel keeps 5 % of a core for ordinary tasks);
//! - (c') `ordinary-priority`: as (b) with the control plane on core 0 at ordinary
//!   priority, beside the routing daemons and the measuring threads.
//!
//! The separation is switched off and on again on the running vfsrd, by setting its control
//! thread's affinity and scheduling policy (`sched_setaffinity`, `sched_setscheduler`:
//! what vfsrd itself does at start for `control_core` and `control_priority`), so the BGP
//! session, zebra's FPM connection and the routes stay in place across the phases. The punt
//! limits cannot change in a running vfsrd and stay as configured (the defaults); the phase
//! records show how many frames each class's limit dropped (none in the runs so far: the
//! flood is transit traffic and is never punted, and the control traffic stays far below the
//! limits, which is why the transactions are paced).
//!
//! **Measured in each phase:**
//!
//! - TCP request/response: one connection from gen to a server on 10.10.0.1:7000 in vfsrd's
//!   namespace (the host stack, reached through the control plane and the TAP), one byte
//!   each way, closed loop, a transaction started every `--rr-interval-us` (2 ms) or as soon
//!   as the previous one is answered if that is later; p50, p99, max and transactions per
//!   second;
//! - ping to 10.10.0.1 every 10 ms (answered by the control plane itself, without the host
//!   stack): p50, p99, lost;
//! - the BGP session (hold time 9 s, keepalive 3 s): resets as bgpd counts them
//!   (`connectionsDropped` of `show bgp neighbors json`) and as gobgpd does (`flops`), over
//!   the phase and the settling time after it, and whether it is established at the end;
//! - announcements: every `--announce-ms` (1 s) gobgpd announces a new /24 (next hop
//!   10.10.0.2) and the time from the moment gobgpd holds the path (the `gobgp global rib
//!   add` command has returned) until the route is in vfsr's FIB is measured through the
//!   forwarding path: a prober in the sink's namespace sends a UDP datagram every 1 ms to an
//!   address in the prefix; vfsr drops them (no route) until the workers forward by the new
//!   route, which takes them out of A to gen, whose UDP echo answers. The time is that of
//!   the first datagram answered, so the resolution is the 1 ms spacing plus the
//!   datagram's one-way time from the sink into vfsr (tens of µs; more under flood). The
//!   prefixes are chosen where no table route covers or splits them, so the flood never
//!   hits them. After each phase, vfsrd's FIB dump (`--fib-dump`, SIGUSR1) is checked to hold
//!   every prefix announced so far via 10.10.0.2 (the dump of a whole table stops the control
//!   plane for a while, so it is never taken during a measurement);
//! - the flood: frames offered (generator) and forwarded (counted at the sink), core 1's
//!   busy share, and vfsrd's counters (ring drops, rate-limited punts, frames to the host).
//!
//! **Where things run** (2 cores): core 0 holds vfsrd's control plane, zebra, bgpd, gobgpd,
//! the measuring threads, the sink's receive thread (`SCHED_FIFO` 1) and the generator;
//! core 1 holds vfsrd's worker (`SCHED_FIFO` 10) and port A's receive (NAPI) thread
//! (`SCHED_FIFO` 5). The generator stands for an outside host: it runs at `SCHED_IDLE`, so
//! it takes only the time core 0 has left and delays nothing there (at ordinary priority it
//! would hold core 0 for whole time slices against the daemons and the measuring threads,
//! which would measure the test bench rather than the router).
//!
//! Targets (from the issue), for (b) against (a): the BGP session never drops; the p99
//! request/response latency under flood is at most 1.5 times the idle p99; an announcement
//! reaches the FIB within 1 s under flood.
//!
//! Everything the run makes is removed at the end, on an error and on SIGINT or SIGTERM (the
//! run stops at the next check and unwinds; if it has not finished 30 s later, the processes
//! in its namespaces are killed and the namespaces and state directories removed).

use std::collections::HashSet;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};
use vfsr_lpm::Route;
use vfsrd::daemons::{self, FpmTarget, Frr, FrrConfig, GoBgp, GoBgpConfig, GoBgpNeighbor, Net};
use vfsrd::harness::{Echo, Launch, Vfsrd};
use vfsrd::netlab;

use crate::vethbench::{
    self, echo_server, percentile, rate_limited_delta, rr_client, vfsrd_exe, Generator, Lab3,
    RrOutcome, RrPace, Scheduling, GEN_CORE, ROUTER_A, ROUTER_CORE, SINK,
};

/// What the run prints, kept for `--text`.
static TRANSCRIPT: Mutex<String> = Mutex::new(String::new());

/// `println!` that also keeps the line for the text report.
macro_rules! out {
    ($($t:tt)*) => {{
        let line = format!($($t)*);
        println!("{line}");
        let mut t = lock(&TRANSCRIPT);
        t.push_str(&line);
        t.push('\n');
    }};
}

/// Where the control traffic comes from: in-line with the flood (the neighbour on A's link,
/// the generator's namespace, set up by `vethbench::build_lab`) or through a port of its own.
#[derive(Clone, Copy, Debug)]
struct Placement {
    inline: bool,
    /// The neighbour's namespace: gobgpd, the TCP client, ping and the UDP echo.
    ns: &'static str,
    /// The router's address the neighbour talks to.
    router: Ipv4Addr,
    /// The neighbour's address.
    neighbour: Ipv4Addr,
}

const INLINE: Placement = Placement {
    inline: true,
    ns: "gen",
    router: Ipv4Addr::new(10, 10, 0, 1),
    neighbour: Ipv4Addr::new(10, 10, 0, 2),
};

const OTHER_PORT: Placement = Placement {
    inline: false,
    ns: "ctl",
    router: Ipv4Addr::new(10, 30, 0, 1),
    neighbour: Ipv4Addr::new(10, 30, 0, 2),
};
/// The tag of vfsrd's files (config, stats, FIB dump) in the temporary directory.
const VFSRD_TAG: &str = "cpflood";
/// The TCP request/response server's port on the router's address.
const RR_PORT: u16 = 7000;
/// The UDP echo's port in the neighbour's namespace.
const ECHO_PORT: u16 = 7001;
const ROUTER_AS: u32 = 65000;
const SPEAKER_AS: u32 = 65001;
const HOLD_S: u32 = 9;
const KEEPALIVE_S: u32 = 3;
/// vfsrd's priorities (its defaults, written into the config).
const CONTROL_PRIORITY: u8 = 20;
const WORKER_PRIORITY: u8 = 10;
/// Spacing of the probes to a newly announced prefix.
const PROBE_EVERY: Duration = Duration::from_millis(1);
/// Probes to a prefix stop this long after its announcement.
const PROBE_GIVE_UP: Duration = Duration::from_secs(30);
/// Ping spacing.
const PING_EVERY_MS: u32 = 10;
/// Pause after each phase before its counters are read (the stats file is rewritten every
/// second; a hold timer that the phase made run out may still fire).
const SETTLE: Duration = Duration::from_secs(2);
/// Warm-up of the flood before a flooded phase starts measuring.
const FLOOD_WARMUP: Duration = Duration::from_secs(1);
/// A transaction unanswered this long is counted as unanswered and the next one starts.
const RR_GIVE_UP: Duration = Duration::from_secs(10);
/// Where the announced /24s are taken from (those no table route covers or splits).
const POOLS: [(Ipv4Addr, u8); 2] = [
    (Ipv4Addr::new(198, 18, 0, 0), 15),
    (Ipv4Addr::new(100, 64, 0, 0), 10),
];

/// `vfsr cp flood` arguments.
#[derive(Args)]
pub struct CpFloodArgs {
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the readable report (what the run prints: each phase, the table, the targets)
    /// here.
    #[arg(long)]
    text: Option<PathBuf>,
    /// Seconds each phase measures (a flooded phase floods one more second first).
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Run the phases ((a), (b), (c)...) in turn this many times.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// The separation-off phases: `shared` (the control plane on the worker's core at
    /// ordinary priority), `ordinary` (on its own core at ordinary priority).
    #[arg(long, value_delimiter = ',', default_values_t = ["shared".to_string(), "ordinary".to_string()])]
    off: Vec<String>,
    /// The router's table (text or MRT); default: the real 2024 table beside the checkout,
    /// else the synthetic one.
    #[arg(long)]
    table: Option<PathBuf>,
    /// Seed of the synthetic table and of the flood's destinations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Random destinations of the flood drawn from the table (a power of two).
    #[arg(long, default_value_t = 65_536)]
    destinations: usize,
    /// Milliseconds between two announcements.
    #[arg(long, default_value_t = 1000)]
    announce_ms: u64,
    /// Microseconds between the starts of two TCP transactions (a transaction never starts
    /// before the previous one is answered).
    #[arg(long, default_value_t = 2000)]
    rr_interval_us: u64,
    /// Where the control traffic (BGP, TCP, ping) comes in: `inline`, on the flooded port
    /// with the flood, or `other-port`, from a neighbour on a third port.
    #[arg(long, default_value = "inline")]
    placement: String,
    /// Flood rate in Mpps (0: as fast as the generator goes).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Turn on vfsrd's XDP fast path.
    #[arg(long)]
    fast_path: bool,
    /// The vfsrd binary to measure (default: the one built next to vfsr).
    #[arg(long)]
    vfsrd: Option<PathBuf>,
    /// The queueing discipline on the neighbour's interface: `pfifo` (1000 frames: its
    /// kernel's traffic waits while the router's receive ring is full, as a host's does
    /// behind a busy NIC) or `noqueue` (a veth's default: such a frame is dropped at the
    /// sender, `tx_dropped` of the neighbour's interface).
    #[arg(long, default_value = "pfifo")]
    neighbour_qdisc: String,
    /// SCHED_FIFO priority of port A's receive (NAPI) thread on the worker's core.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(0..=9))]
    napi_priority: u8,
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// What can stop `cp flood`, as values. Only [`run`] turns one into text.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// An argument out of its range: the flag and what it must be.
    #[error("{flag} must {must}")]
    Arg {
        flag: &'static str,
        must: &'static str,
    },
    /// `--destinations` is not a power of two up to 2^20.
    #[error("--destinations {0} must be a power of two up to 1048576")]
    Destinations(usize),
    /// An argument that is none of its choices.
    #[error("{flag}: unknown {value:?} ({choices})")]
    Unknown {
        flag: &'static str,
        value: String,
        choices: &'static str,
    },
    /// No network namespaces or no root (why).
    #[error("cp flood builds network namespaces and needs root: {0}")]
    NoNamespaces(#[source] netlab::Error),
    /// A daemon or tool the run needs is missing (which).
    #[error("cp flood needs FRR, GoBGP, ping and ethtool: {0}")]
    MissingTools(#[source] daemons::Error),
    /// Fewer than the two cores the run pins to.
    #[error("cp flood needs 2 cores (control on core 0, worker on core 1)")]
    TooFewCores,
    /// This process could not be pinned to the generator's core.
    #[error("pinning this process to core {GEN_CORE}: {0}")]
    Pin(#[source] vfsr_cpu::CpuError),
    /// The table could not be read (the reader's error names the file).
    #[error(transparent)]
    Table(vfsr_table::Error),
    /// The table has fewer IPv4 routes than destinations are asked for.
    #[error("the table has too few IPv4 routes to draw destinations from")]
    TooFewRoutes,
    /// Fewer /24s free of the table's routes than announcements are planned.
    #[error("only {free} of the {want} /24s to announce are free of the table's routes")]
    TooFewFreePrefixes { free: usize, want: usize },
    /// The benchmark lab the run builds on (`vethbench`: the namespaces, the generator).
    #[error(transparent)]
    Lab(#[from] vethbench::Error),
    /// A namespace, link, address, route or queueing step of the topology.
    #[error(transparent)]
    Topology(netlab::Error),
    /// A daemon did not start or did not become ready.
    #[error("starting {daemon}: {err}")]
    Start {
        daemon: &'static str,
        #[source]
        err: daemons::Error,
    },
    /// vfsrd did not start or did not say it was ready.
    #[error("starting vfsrd: {0}")]
    StartVfsrd(#[source] vfsrd::harness::Error),
    /// vfsrd runs without a process id.
    #[error("vfsrd runs without a process id")]
    NoPid,
    /// vfsrd's control thread could not be moved or rescheduled.
    #[error("vfsrd's control plane: {0}")]
    Control(#[source] vfsr_cpu::CpuError),
    /// A socket of the measuring helpers could not be opened (which, where).
    #[error("{what}: {err}")]
    Socket {
        what: String,
        #[source]
        err: std::io::Error,
    },
    /// A thread could not be started (its name).
    #[error("starting thread {name}: {err}")]
    Thread {
        name: &'static str,
        #[source]
        err: std::io::Error,
    },
    /// SIGINT or SIGTERM.
    #[error("interrupted")]
    Interrupted,
    /// What the run waited for did not happen in time.
    #[error("timed out after {:.0} s waiting for {what}", .after.as_secs_f64())]
    Timeout { what: &'static str, after: Duration },
    /// vfsrd wrote no FIB dump.
    #[error(transparent)]
    FibDump(vfsrd::harness::Error),
    /// Every prefix set aside for announcements has been announced.
    #[error("no prefixes left to announce")]
    NoPrefixesLeft,
    /// gobgpd did not take an announcement.
    #[error("announcing {net}: {err}")]
    Announce {
        net: Net,
        #[source]
        err: daemons::Error,
    },
    /// `ping` could not be started.
    #[error("ping: {0}")]
    Ping(#[source] std::io::Error),
    /// The TCP client's thread panicked.
    #[error("the TCP client panicked")]
    ClientPanicked,
    /// The report could not be written.
    #[error(transparent)]
    Report(#[from] crate::jsonfile::Error),
    /// The transcript could not be written.
    #[error("{}: {err}", .path.display())]
    File {
        path: PathBuf,
        #[source]
        err: std::io::Error,
    },
}

// ---------------------------------------------------------------------------------------
// Interruption
// ---------------------------------------------------------------------------------------

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// On SIGINT or SIGTERM, raises [`INTERRUPTED`] (every wait of the run checks it and the
/// run unwinds, its handles removing what they made). If the process is still there 30 s
/// later, kills the processes in this run's namespaces, deletes the namespaces and the
/// daemons' state directories, and exits.
fn watch_signals() {
    crate::interrupt::on_interrupt("stopping the run and cleaning up", || {
        INTERRUPTED.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs(30));
        eprintln!("vfsr: still not done after 30 s: removing what the run made");
        hard_clean_up();
    });
}

/// The last resort of [`watch_signals`]: everything this process made, by name and id.
fn hard_clean_up() {
    let pid = std::process::id();
    let prefix = format!("fb{pid}-");
    let list = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    for ns in list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
    {
        let pids = std::process::Command::new("ip")
            .args(["netns", "pids", ns])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for p in pids
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            // SAFETY: kill(2) on a process living in a namespace this run made.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", ns])
            .status();
    }
    // The daemons' state directories in /tmp; vfsrd's files where the harness puts them.
    let mine = [
        (PathBuf::from("/tmp"), format!("vfsr-frr-{pid}-")),
        (PathBuf::from("/tmp"), format!("vfsr-gobgp-{pid}-")),
        (
            std::env::temp_dir(),
            format!("vfsrd-{VFSRD_TAG}-rtr-{pid}."),
        ),
    ];
    for (dir, start) in &mine {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(start.as_str()) {
                let p = e.path();
                let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
            }
        }
    }
}

fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

fn check() -> Result<(), Error> {
    if interrupted() {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

/// Sleeps `d`, waking every 50 ms to see whether the run was interrupted.
fn nap(d: Duration) -> Result<(), Error> {
    let end = Instant::now() + d;
    loop {
        check()?;
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}

/// Polls `cond` every 100 ms until it holds (its time), `timeout` passes or the run is
/// interrupted.
fn wait_until(
    what: &'static str,
    timeout: Duration,
    mut cond: impl FnMut() -> bool,
) -> Result<f64, Error> {
    let t0 = Instant::now();
    loop {
        if cond() {
            return Ok(t0.elapsed().as_secs_f64());
        }
        if t0.elapsed() > timeout {
            return Err(Error::Timeout {
                what,
                after: timeout,
            });
        }
        nap(Duration::from_millis(100))?;
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------------------
// Phases
// ---------------------------------------------------------------------------------------

/// What a phase does to the control plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// (a) no flood.
    Idle,
    /// (b) flood, vfsrd as configured.
    Separated,
    /// (c) flood, the control plane on the worker's core at ordinary priority.
    SharedCore,
    /// (c') flood, the control plane on its own core at ordinary priority.
    Ordinary,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Idle => "idle",
            Mode::Separated => "separated",
            Mode::SharedCore => "shared-core",
            Mode::Ordinary => "ordinary-priority",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Mode::Idle => "(a) idle",
            Mode::Separated => "(b) flood, separated",
            Mode::SharedCore => "(c) flood, on the worker's core",
            Mode::Ordinary => "(c') flood, ordinary priority",
        }
    }

    fn flood(self) -> bool {
        self != Mode::Idle
    }

    /// The control plane's core and `SCHED_FIFO` priority (0: ordinary) in this phase.
    fn control(self) -> (usize, u8) {
        match self {
            Mode::Idle | Mode::Separated => (GEN_CORE, CONTROL_PRIORITY),
            Mode::SharedCore => (ROUTER_CORE, 0),
            Mode::Ordinary => (GEN_CORE, 0),
        }
    }
}

/// One phase's figures.
#[derive(Default)]
struct PhaseResult {
    round: usize,
    mode: Option<Mode>,
    seconds: f64,
    offered_pps: f64,
    forwarded_pps: f64,
    core1_busy: f64,
    /// Round trips of the answered transactions, µs.
    rr: Vec<f64>,
    rr_unanswered: u32,
    rr_error: Option<String>,
    ping: Vec<f64>,
    ping_sent: u32,
    /// TCP segments the two ends retransmitted during the window (the BGP session's
    /// included).
    tcp_retransmits: Value,
    /// Where a frame between the neighbour and the router's port is lost before vfsrd
    /// sees it: the neighbour's interface and qdisc, the port's receive counters.
    link: Value,
    /// Announcement → FIB of each announcement, ms (`None`: never seen in the FIB).
    announce: Vec<Option<f64>>,
    /// How many were in the FIB before the phase ended.
    announce_in_phase: usize,
    bgpd_resets: u64,
    gobgp_resets: u64,
    established_after: bool,
    session_after: Value,
    control: Value,
    vfsrd: Value,
    fib_check: Value,
}

// ---------------------------------------------------------------------------------------
// vfsrd
// ---------------------------------------------------------------------------------------

enum TableSpec {
    Synthetic(u64),
    File(PathBuf),
}

/// Writes vfsrd's config and starts it in the router's namespace (through the harness, on
/// every core: this process keeps to core 0, and vfsrd counts the cores it may use and pins
/// its control plane and workers itself); prints the line with which it said `ready`.
/// Returns it with its process id, which is also its control thread's.
fn start_vfsrd(
    l: &Lab3,
    exe: &std::path::Path,
    table: &TableSpec,
    fast: bool,
    ctl_port: Option<&str>,
) -> Result<(Vfsrd, i32), Error> {
    let source = match table {
        TableSpec::Synthetic(seed) => format!("synthetic = true\nseed = {seed}"),
        TableSpec::File(p) => format!("file = {:?}", p.display().to_string()),
    };
    let text = format!(
        "[router]\ncontrol_core = {GEN_CORE}\nworkers = [{ROUTER_CORE}]\n\
         control_priority = {CONTROL_PRIORITY}\nworker_priority = {WORKER_PRIORITY}\n\
         fast_path = {fast}\n\n\
         [[interface]]\nname = \"{}\"\nbackend = \"xdp\"\naddresses = [\"{ROUTER_A}/24\"]\n\n\
         [[interface]]\nname = \"{}\"\nbackend = \"xdp\"\naddresses = [\"10.20.0.1/24\"]\n\n\
         [table]\n{source}\nvia4 = [\"{SINK}\"]\n\n[fpm]\n",
        l.a, l.b
    );
    let text = match ctl_port {
        Some(c) => format!(
            "{text}\n[[interface]]\nname = \"{c}\"\nbackend = \"xdp\"\naddresses = [\"{}/24\"]\n",
            OTHER_PORT.router
        ),
        None => text,
    };
    let launch = Launch {
        echo: Echo::Quiet,
        cpus: Some((0..online_cores()).collect()),
    };
    let v = Vfsrd::start_with(&l.lab, "rtr", exe, VFSRD_TAG, &text, launch)
        .map_err(Error::StartVfsrd)?;
    if let Some(line) = v.ready_line() {
        out!("  {line}");
    }
    let pid = v
        .pid()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or(Error::NoPid)?;
    Ok((v, pid))
}

/// Asks vfsrd for a FIB dump and counts the `wanted` prefixes in it: (how many are there
/// via the neighbour, the dump's header line).
fn fib_check(
    v: &Vfsrd,
    wanted: &HashSet<String>,
    neighbour: Ipv4Addr,
) -> Result<(usize, String), Error> {
    let text = v
        .fib_dump(Duration::from_secs(60))
        .map_err(Error::FibDump)?;
    let via = format!("via {neighbour} ");
    let found = vfsrd::harness::fib_entries(&text)
        .iter()
        .filter(|(p, rest)| wanted.contains(p.as_str()) && rest.starts_with(&via))
        .count();
    let header = text.lines().next().unwrap_or_default().to_string();
    Ok((found, header))
}

/// The cores online (this process itself keeps to core 0).
fn online_cores() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// Sets thread `tid`'s core and policy: `SCHED_FIFO` `priority`, or ordinary scheduling
/// for 0.
fn set_control(tid: i32, core: usize, priority: u8) -> Result<(), Error> {
    // Leave real-time scheduling before moving onto the worker's core, and come back to
    // core 0 before taking it again.
    if priority == 0 {
        vfsr_cpu::ordinary(tid).map_err(Error::Control)?;
    }
    vfsr_cpu::pin_task(tid, &[core]).map_err(Error::Control)?;
    if priority > 0 {
        vfsr_cpu::fifo(tid, i32::from(priority)).map_err(Error::Control)?;
    }
    Ok(())
}

/// Thread `tid`'s cores, policy and priority, as the kernel has them.
fn control_state(tid: i32) -> Value {
    // SAFETY: plain system calls on valid, live out-parameters.
    let (policy, prio) = unsafe {
        let policy = libc::sched_getscheduler(tid);
        let mut p = libc::sched_param { sched_priority: 0 };
        libc::sched_getparam(tid, &mut p);
        (policy, p.sched_priority)
    };
    let cores = vfsr_cpu::allowed_cores(tid);
    let name = match policy {
        libc::SCHED_FIFO => "SCHED_FIFO",
        libc::SCHED_OTHER => "SCHED_OTHER",
        libc::SCHED_RR => "SCHED_RR",
        libc::SCHED_IDLE => "SCHED_IDLE",
        libc::SCHED_BATCH => "SCHED_BATCH",
        _ => "unknown",
    };
    json!({"cores": cores, "policy": name, "priority": prio})
}

// ---------------------------------------------------------------------------------------
// BGP
// ---------------------------------------------------------------------------------------

fn bgpd_config(p: Placement) -> String {
    let (router, neighbour) = (p.router, p.neighbour);
    format!(
        "route-map ACCEPT permit 10\n!\nrouter bgp {ROUTER_AS}\n bgp router-id {router}\n \
         neighbor {neighbour} remote-as {SPEAKER_AS}\n \
         neighbor {neighbour} timers {KEEPALIVE_S} {HOLD_S}\n \
         neighbor {neighbour} timers connect 1\n \
         address-family ipv4 unicast\n  neighbor {neighbour} activate\n  \
         neighbor {neighbour} route-map ACCEPT in\n exit-address-family\n"
    )
}

/// The session's counters on both sides.
#[derive(Clone, Debug, Default)]
struct Session {
    bgpd_state: String,
    bgpd_established: u64,
    bgpd_dropped: u64,
    hold_ms: u64,
    keepalive_ms: u64,
    gobgp_state: i64,
    gobgp_flops: u64,
}

impl Session {
    fn read(frr: &Frr, speaker: &GoBgp, p: Placement) -> Session {
        let mut s = Session::default();
        let text = frr
            .vtysh_on("bgpd", &format!("show bgp neighbors {} json", p.neighbour))
            .unwrap_or_default();
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            let n = &v[p.neighbour.to_string()];
            let num = |k: &str| n[k].as_u64().unwrap_or(0);
            s.bgpd_state = n["bgpState"].as_str().unwrap_or("unknown").to_string();
            s.bgpd_established = num("connectionsEstablished");
            s.bgpd_dropped = num("connectionsDropped");
            s.hold_ms = num("bgpTimerHoldTimeMsecs");
            s.keepalive_ms = num("bgpTimerKeepAliveIntervalMsecs");
        }
        let text = speaker
            .gobgp(&["neighbor", &p.router.to_string(), "-j"])
            .unwrap_or_default();
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            s.gobgp_state = v["state"]["session_state"].as_i64().unwrap_or(0);
            s.gobgp_flops = v["state"]["flops"].as_u64().unwrap_or(0);
        }
        s
    }

    /// Established on both sides (gobgpd's state 6 is ESTABLISHED).
    fn up(&self) -> bool {
        self.bgpd_state == "Established" && self.gobgp_state == 6
    }

    fn to_json(&self) -> Value {
        json!({"bgpd_state": self.bgpd_state, "bgpd_connections_established": self.bgpd_established,
               "bgpd_connections_dropped": self.bgpd_dropped, "hold_time_ms": self.hold_ms,
               "keepalive_ms": self.keepalive_ms, "gobgp_session_state": self.gobgp_state,
               "gobgp_flops": self.gobgp_flops})
    }
}

/// `n` /24s from [`POOLS`] that no route of `routes` covers or splits.
fn free_prefixes(routes: &[Route<u32>], n: usize) -> Vec<Net> {
    let mut exact: HashSet<(u32, u32)> = HashSet::new();
    let mut longer: Vec<u32> = Vec::new();
    for r in routes {
        let len = r.prefix.len() as u32;
        if len > 24 {
            longer.push(r.prefix.addr());
        } else if len >= 8 {
            exact.insert((r.prefix.addr(), len));
        }
    }
    longer.sort_unstable();
    let mut out = Vec::with_capacity(n);
    for (base, plen) in POOLS {
        let first = u32::from(base);
        let count = 1u32 << (24 - u32::from(plen));
        for i in 0..count {
            if out.len() == n {
                return out;
            }
            let c = first + (i << 8);
            let covered = (8..=24u32).any(|l| exact.contains(&(c & (u32::MAX << (32 - l)), l)));
            let at = longer.partition_point(|&x| x < c);
            let split = longer.get(at).is_some_and(|&x| x <= c | 0xff);
            if !covered && !split {
                out.push(Net::new(IpAddr::V4(Ipv4Addr::from(c)), 24));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// The measuring threads
// ---------------------------------------------------------------------------------------

/// A prefix being looked for in the FIB.
struct Target {
    id: u32,
    dst: Ipv4Addr,
    announced: Instant,
    /// Announcement → the send time of the first probe answered.
    reached: Option<Duration>,
}

/// The long-lived helpers: the TCP server in the router's namespace, the UDP echo in the
/// neighbour's, the prober in the sink's. Stopped and joined on drop.
struct Helpers {
    stop: Arc<AtomicBool>,
    targets: Arc<Mutex<Vec<Target>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Helpers {
    fn start(l: &Lab3, p: Placement) -> Result<Helpers, Error> {
        let router = p.router;
        let stop = Arc::new(AtomicBool::new(false));
        let targets = Arc::new(Mutex::new(Vec::new()));
        let mut h = Helpers {
            stop: Arc::clone(&stop),
            targets: Arc::clone(&targets),
            threads: Vec::new(),
        };
        let listener = l
            .lab
            .in_ns("rtr", move || {
                let s = TcpListener::bind((router, RR_PORT))?;
                s.set_nonblocking(true)?;
                Ok::<_, std::io::Error>(s)
            })
            .map_err(Error::Topology)?
            .map_err(|err| Error::Socket {
                what: format!("TCP server on {router}:{RR_PORT}"),
                err,
            })?;
        let echo = l
            .lab
            .in_ns(p.ns, || UdpSocket::bind((Ipv4Addr::UNSPECIFIED, ECHO_PORT)))
            .map_err(Error::Topology)?
            .map_err(|err| Error::Socket {
                what: format!("UDP echo on port {ECHO_PORT}"),
                err,
            })?;
        let probe = l
            .lab
            .in_ns("sink", || UdpSocket::bind((SINK, 0)))
            .map_err(Error::Topology)?
            .map_err(|err| Error::Socket {
                what: format!("prober socket on {SINK}"),
                err,
            })?;
        let s = Arc::clone(&stop);
        h.threads.push(
            std::thread::Builder::new()
                .name("cpflood-rr-server".into())
                .spawn(move || echo_server(listener, &s))
                .map_err(|err| Error::Thread {
                    name: "cpflood-rr-server",
                    err,
                })?,
        );
        let s = Arc::clone(&stop);
        h.threads.push(
            std::thread::Builder::new()
                .name("cpflood-echo".into())
                .spawn(move || udp_echo(echo, &s))
                .map_err(|err| Error::Thread {
                    name: "cpflood-echo",
                    err,
                })?,
        );
        let s = Arc::clone(&stop);
        h.threads.push(
            std::thread::Builder::new()
                .name("cpflood-prober".into())
                .spawn(move || prober(probe, &targets, &s))
                .map_err(|err| Error::Thread {
                    name: "cpflood-prober",
                    err,
                })?,
        );
        Ok(h)
    }

    fn watch(&self, id: u32, net: &Net, announced: Instant) {
        let dst = match net.addr {
            IpAddr::V4(a) => Ipv4Addr::from(u32::from(a) | 1),
            IpAddr::V6(_) => return,
        };
        lock(&self.targets).push(Target {
            id,
            dst,
            announced,
            reached: None,
        });
    }

    fn reached(&self, id: u32) -> Option<Duration> {
        lock(&self.targets)
            .iter()
            .find(|t| t.id == id)
            .and_then(|t| t.reached)
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Sends every datagram back where it came from, until `stop`.
fn udp_echo(sock: UdpSocket, stop: &AtomicBool) {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 256];
    while !stop.load(Ordering::Relaxed) {
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            if let Some(b) = buf.get(..n) {
                let _ = sock.send_to(b, from);
            }
        }
    }
}

/// Every [`PROBE_EVERY`], sends a datagram (target id, send time) to each target not yet
/// reached, and marks a target reached by the send time of the first one that comes back.
fn prober(sock: UdpSocket, targets: &Mutex<Vec<Target>>, stop: &AtomicBool) {
    let _ = sock.set_nonblocking(true);
    let base = Instant::now();
    let mut buf = [0u8; 64];
    while !stop.load(Ordering::Relaxed) {
        {
            let t = lock(targets);
            for x in t
                .iter()
                .filter(|x| x.reached.is_none() && x.announced.elapsed() < PROBE_GIVE_UP)
            {
                let mut p = [0u8; 12];
                p[..4].copy_from_slice(&x.id.to_be_bytes());
                p[4..].copy_from_slice(&(base.elapsed().as_nanos() as u64).to_be_bytes());
                let _ = sock.send_to(&p, (x.dst, ECHO_PORT));
            }
        }
        while let Ok((n, _)) = sock.recv_from(&mut buf) {
            if n < 12 {
                continue;
            }
            let id = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
            let mut ns = [0u8; 8];
            ns.copy_from_slice(&buf[4..12]);
            let sent = base + Duration::from_nanos(u64::from_be_bytes(ns));
            let mut t = lock(targets);
            if let Some(x) = t.iter_mut().find(|x| x.id == id && x.reached.is_none()) {
                x.reached = Some(sent.saturating_duration_since(x.announced));
            }
        }
        std::thread::sleep(PROBE_EVERY);
    }
}

/// Packets `ping` says it transmitted.
fn ping_transmitted(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.split_once(" packets transmitted"))
        .and_then(|(n, _)| n.trim().parse().ok())
}

/// TCP segments retransmitted by namespace `ns`'s stack so far (`RetransSegs`).
fn tcp_retransmits(l: &Lab3, ns: &str) -> u64 {
    let snmp = l.lab.sh(ns, &["cat", "/proc/net/snmp"]).unwrap_or_default();
    let rows: Vec<&str> = snmp.lines().filter(|x| x.starts_with("Tcp: ")).collect();
    match rows.as_slice() {
        [names, values] => names
            .split_whitespace()
            .zip(values.split_whitespace())
            .find(|(k, _)| *k == "RetransSegs")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

/// The neighbour's interface toward the router.
fn neighbour_if(p: Placement) -> &'static str {
    if p.inline {
        "gen0"
    } else {
        "ctl0"
    }
}

/// The `tc` command that gives interface `dev` the queueing discipline `kind`.
fn qdisc_command<'a>(dev: &'a str, kind: &'a str) -> Vec<&'a str> {
    match kind {
        "pfifo" => vec![
            "tc", "qdisc", "replace", "dev", dev, "root", "pfifo", "limit", "1000",
        ],
        _ => vec!["tc", "qdisc", "replace", "dev", dev, "root", "noqueue"],
    }
}

/// (packets sent, dropped, requeued) of the root qdisc in `tc -s -j qdisc show`'s output;
/// zeros for `noqueue`, which counts nothing.
fn qdisc_stats(json_text: &str) -> (u64, u64, u64) {
    let v: Value = serde_json::from_str(json_text).unwrap_or(Value::Null);
    let root = v
        .as_array()
        .and_then(|a| a.iter().find(|q| q["root"].as_bool() == Some(true)));
    match root {
        Some(q) => {
            let n = |k: &str| q[k].as_u64().unwrap_or(0);
            (n("packets"), n("drops"), n("requeues"))
        }
        None => (0, 0, 0),
    }
}

/// The counters of the link between the neighbour and the router's port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct LinkCounters {
    /// Frames the neighbour's interface dropped on transmit: with a veth, those the
    /// router's port's receive ring had no room for (the generator's and the kernel's).
    neighbour_tx_dropped: u64,
    neighbour_tx_packets: u64,
    qdisc_sent: u64,
    qdisc_dropped: u64,
    /// Frames the qdisc sent again because the port's ring was full (veth back-pressure).
    qdisc_requeues: u64,
    port_rx_dropped: u64,
}

impl LinkCounters {
    fn read(l: &Lab3, p: Placement, port: &str) -> LinkCounters {
        let dev = neighbour_if(p);
        let tc = l
            .lab
            .sh(p.ns, &["tc", "-s", "-j", "qdisc", "show", "dev", dev])
            .unwrap_or_default();
        let (qdisc_sent, qdisc_dropped, qdisc_requeues) = qdisc_stats(&tc);
        LinkCounters {
            neighbour_tx_dropped: vethbench::if_stat(l, p.ns, dev, "tx_dropped"),
            neighbour_tx_packets: vethbench::if_stat(l, p.ns, dev, "tx_packets"),
            qdisc_sent,
            qdisc_dropped,
            qdisc_requeues,
            port_rx_dropped: vethbench::if_stat(l, "rtr", port, "rx_dropped"),
        }
    }

    fn since(&self, before: &LinkCounters) -> Value {
        json!({
            "neighbour_tx_packets": self.neighbour_tx_packets.saturating_sub(before.neighbour_tx_packets),
            "neighbour_tx_dropped": self.neighbour_tx_dropped.saturating_sub(before.neighbour_tx_dropped),
            "neighbour_qdisc_sent": self.qdisc_sent.saturating_sub(before.qdisc_sent),
            "neighbour_qdisc_dropped": self.qdisc_dropped.saturating_sub(before.qdisc_dropped),
            "neighbour_qdisc_requeues": self.qdisc_requeues.saturating_sub(before.qdisc_requeues),
            "port_rx_dropped": self.port_rx_dropped.saturating_sub(before.port_rx_dropped),
        })
    }
}

/// The generator's time limit: every phase with its warm-up, settling, FIB dump and waits
/// for the session, and the set-up, with room to spare.
fn generator_limit(seconds: f64, phases: usize) -> Duration {
    Duration::from_secs_f64(600.0 + phases as f64 * (seconds + 240.0))
}

/// Round trips (µs) in `ping`'s output.
fn ping_times(text: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| !l.contains("DUP!"))
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next())
        .filter_map(|t| t.parse::<f64>().ok())
        .map(|ms| ms * 1000.0)
        .collect()
}

// ---------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

fn modes(a: &CpFloodArgs) -> Result<Vec<Mode>, Error> {
    let mut m = vec![Mode::Idle, Mode::Separated];
    for o in &a.off {
        let x = match o.as_str() {
            "shared" => Mode::SharedCore,
            "ordinary" => Mode::Ordinary,
            other => {
                return Err(Error::Unknown {
                    flag: "--off",
                    value: other.to_string(),
                    choices: "shared, ordinary",
                })
            }
        };
        if !m.contains(&x) {
            m.push(x);
        }
    }
    Ok(m)
}

/// The announcement times within a phase, seconds from its start.
fn schedule(secs: f64, every_ms: u64) -> Vec<f64> {
    let iv = every_ms as f64 / 1000.0;
    (0..)
        .map(|k| (k as f64 + 0.5) * iv)
        .take_while(|t| *t <= secs - 1.0)
        .collect()
}

/// `vfsr cp flood`: runs the experiment; an error as the text `vfsr` prints.
pub(crate) fn run(a: &CpFloodArgs) -> Result<(), Error> {
    let arg = |flag, must| Err(Error::Arg { flag, must });
    if !(2.0..=3600.0).contains(&a.seconds) {
        return arg("--seconds", "be between 2 and 3600");
    }
    if a.rounds == 0 || a.rounds > 100 {
        return arg("--rounds", "be between 1 and 100");
    }
    if a.announce_ms < 100 {
        return arg("--announce-ms", "be at least 100");
    }
    if a.rr_interval_us < 100 {
        return arg("--rr-interval-us", "be at least 100");
    }
    if !a.destinations.is_power_of_two() || a.destinations > 1 << 20 {
        return Err(Error::Destinations(a.destinations));
    }
    let modes = modes(a)?;
    let placement = match a.placement.as_str() {
        "inline" => INLINE,
        "other-port" => OTHER_PORT,
        other => {
            return Err(Error::Unknown {
                flag: "--placement",
                value: other.to_string(),
                choices: "inline, other-port",
            })
        }
    };
    if !matches!(a.neighbour_qdisc.as_str(), "pfifo" | "noqueue") {
        return Err(Error::Unknown {
            flag: "--neighbour-qdisc",
            value: a.neighbour_qdisc.clone(),
            choices: "pfifo, noqueue",
        });
    }
    if !(0.0..=100.0).contains(&a.rate) {
        return arg("--rate", "be between 0 and 100 Mpps");
    }
    netlab::available().map_err(Error::NoNamespaces)?;
    let needed = [
        daemons::ZEBRA,
        daemons::BGPD,
        daemons::VTYSH,
        daemons::FPM_MODULE,
        daemons::GOBGPD,
        daemons::GOBGP,
        "ping",
        "ethtool",
    ];
    if let Some(why) = daemons::skip_reason(&needed) {
        return Err(Error::MissingTools(why));
    }
    let cpus = online_cores();
    if cpus < 2 {
        return Err(Error::TooFewCores);
    }
    vfsrd_exe(a.vfsrd.as_ref())?;
    // Everything this process starts (threads, daemons, vfsrd's control plane) inherits
    // core 0; vfsrd moves its worker to core 1 itself.
    vfsr_cpu::pin(GEN_CORE).map_err(Error::Pin)?;
    let (spec, routes, source) = match &a.table {
        Some(p) => (
            TableSpec::File(p.clone()),
            crate::tables::load(p, false).map_err(Error::Table)?.v4,
            p.display().to_string(),
        ),
        None => match vfsr_table::shared::real_table_path() {
            Some(p) => (
                TableSpec::File(p.clone()),
                crate::tables::load(&p, false).map_err(Error::Table)?.v4,
                p.display().to_string(),
            ),
            None => (
                TableSpec::Synthetic(a.seed),
                crate::tables::synthetic(a.seed).v4,
                format!("synthetic full table (seed {})", a.seed),
            ),
        },
    };
    let dests = vethbench::destinations(&routes, a.destinations, a.seed);
    if dests.len() < a.destinations {
        return Err(Error::TooFewRoutes);
    }
    let per_phase = schedule(a.seconds, a.announce_ms).len();
    let want = 1 + per_phase * modes.len() * a.rounds;
    let prefixes = free_prefixes(&routes, want);
    if prefixes.len() < want {
        return Err(Error::TooFewFreePrefixes {
            free: prefixes.len(),
            want,
        });
    }
    watch_signals();
    let cpu = crate::machine::cpu_model();
    out!(
        "vfsr cp flood: {cpu}, {cpus} cores; table {source} ({} IPv4 routes); {:.0} s per phase, \
         {} round(s); flood: 64-byte UDP to {} destinations on port A at {}; BGP, TCP and ping {}",
        routes.len(),
        a.seconds,
        a.rounds,
        dests.len(),
        if a.rate > 0.0 {
            format!("{} Mpps", a.rate)
        } else {
            "the generator's highest rate".into()
        },
        if placement.inline {
            "in-line on port A"
        } else {
            "on a port of their own (C)"
        }
    );
    let ctx = Setup {
        placement,
        spec,
        routes: routes.len(),
        source,
        dests,
        prefixes,
        modes,
        cpu,
    };
    experiment(a, &ctx)
}

struct Setup {
    placement: Placement,
    spec: TableSpec,
    routes: usize,
    source: String,
    dests: Vec<u32>,
    prefixes: Vec<Net>,
    modes: Vec<Mode>,
    cpu: String,
}

/// Everything a phase works with.
struct Bench<'a> {
    a: &'a CpFloodArgs,
    l: &'a Lab3,
    vfsrd: &'a Vfsrd,
    /// vfsrd's process id, which is its control thread's.
    pid: i32,
    frr: &'a Frr,
    speaker: &'a GoBgp,
    gen: &'a Generator,
    helpers: &'a Helpers,
    prefixes: &'a [Net],
    /// Prefixes announced so far.
    announced: usize,
    p: Placement,
    /// The router's port the control traffic comes in on (A when in-line).
    port: &'a str,
}

fn experiment(a: &CpFloodArgs, s: &Setup) -> Result<(), Error> {
    let t_setup = Instant::now();
    let p = s.placement;
    // Declared first, dropped last: the namespaces outlive every process in them.
    let mut l = vethbench::build_lab()?;
    let ctl_port = if p.inline {
        None
    } else {
        let c = format!("{}c", l.a.trim_end_matches('a'));
        l.lab.add_ns(p.ns).map_err(Error::Topology)?;
        l.lab
            .veth(p.ns, "ctl0", "rtr", &c)
            .map_err(Error::Topology)?;
        l.lab
            .ip(
                p.ns,
                &["addr", "add", &format!("{}/24", p.neighbour), "dev", "ctl0"],
            )
            .map_err(Error::Topology)?;
        l.lab
            .ip(
                p.ns,
                &["route", "add", "default", "via", &p.router.to_string()],
            )
            .map_err(Error::Topology)?;
        // Frames the XDP fast path redirects out of the port reach a veth peer with GRO on.
        l.lab
            .sh(p.ns, &["ethtool", "-K", "ctl0", "gro", "on"])
            .map_err(Error::Topology)?;
        Some(c)
    };
    let port = ctl_port.clone().unwrap_or_else(|| l.a.clone());
    l.lab
        .sh(p.ns, &qdisc_command(neighbour_if(p), &a.neighbour_qdisc))
        .map_err(Error::Topology)?;
    for (net, len) in POOLS {
        l.lab
            .ip(
                p.ns,
                &[
                    "route",
                    "add",
                    "local",
                    &format!("{net}/{len}"),
                    "dev",
                    "lo",
                ],
            )
            .map_err(Error::Topology)?;
    }
    let limit = generator_limit(a.seconds, s.modes.len() * a.rounds);
    let gen = Generator::launch(&l, &s.dests, limit, Scheduling::Idle)?;

    out!(
        "setting up: vfsrd, FRR (zebra with FPM, bgpd) in its namespace, gobgpd in {}'s",
        p.ns
    );
    let exe = vfsrd_exe(a.vfsrd.as_ref())?;
    let (vfsrd, pid) = start_vfsrd(&l, &exe, &s.spec, a.fast_path, ctl_port.as_deref())?;
    vethbench::threaded_napi(&l.lab, "rtr", &l.a, ROUTER_CORE, i32::from(a.napi_priority));
    check()?;
    let frr = Frr::start(
        &l.lab,
        "rtr",
        FrrConfig {
            zebra: String::new(),
            bgpd: Some(bgpd_config(p)),
            staticd: None,
            fpm: Some(FpmTarget::local(true)),
        },
    )
    .map_err(|err| Error::Start {
        daemon: "FRR (zebra, bgpd)",
        err,
    })?;
    check()?;
    let speaker = GoBgp::start(
        &l.lab,
        p.ns,
        &GoBgpConfig {
            asn: SPEAKER_AS,
            router_id: p.neighbour,
            neighbors: vec![GoBgpNeighbor {
                address: IpAddr::V4(p.router),
                peer_as: ROUTER_AS,
                hold_time: HOLD_S,
                keepalive: KEEPALIVE_S,
            }],
        }
        .toml(),
    )
    .map_err(|err| Error::Start {
        daemon: "gobgpd",
        err,
    })?;
    let helpers = Helpers::start(&l, p)?;
    let up = wait_until("the BGP session", Duration::from_secs(60), || {
        Session::read(&frr, &speaker, p).up()
    })?;
    out!("  BGP session established after {up:.1} s");
    let mut b = Bench {
        a,
        l: &l,
        vfsrd: &vfsrd,
        pid,
        frr: &frr,
        speaker: &speaker,
        gen: &gen,
        helpers: &helpers,
        prefixes: &s.prefixes,
        announced: 0,
        p,
        port: &port,
    };
    // A first announcement proves the whole path (zebra's FPM connection included).
    let first = b.announce()?;
    let took = wait_until(
        "the first announced prefix in vfsr's FIB",
        Duration::from_secs(60),
        || helpers.reached(first).is_some(),
    )?;
    out!(
        "  first announcement in vfsr's FIB after {took:.1} s; set up in {:.1} s",
        t_setup.elapsed().as_secs_f64()
    );
    let session0 = Session::read(&frr, &speaker, p);
    let mut results = Vec::new();
    for round in 1..=a.rounds {
        for &m in &s.modes {
            check()?;
            let r = b.phase(round, m)?;
            print_phase(&r);
            results.push(r);
        }
    }
    let session_end = Session::read(&frr, &speaker, p);
    let doc = report(a, s, &results, &session0, &session_end);
    drop(helpers);
    drop(speaker);
    drop(frr);
    drop(vfsrd);
    gen.finish()?;
    if let Some(p) = &a.json {
        crate::jsonfile::write(p, &doc)?;
    }
    if let Some(p) = &a.text {
        let t = lock(&TRANSCRIPT).clone();
        std::fs::write(p, t).map_err(|err| Error::File {
            path: p.clone(),
            err,
        })?;
    }
    Ok(())
}

impl Bench<'_> {
    /// Announces the next prefix; its id for [`Helpers::reached`].
    fn announce(&mut self) -> Result<u32, Error> {
        let net = self
            .prefixes
            .get(self.announced)
            .copied()
            .ok_or(Error::NoPrefixesLeft)?;
        self.speaker
            .add_routes(&[net], IpAddr::V4(self.p.neighbour))
            .map_err(|err| Error::Announce { net, err })?;
        let at = Instant::now();
        let id = self.announced as u32;
        self.helpers.watch(id, &net, at);
        self.announced += 1;
        Ok(id)
    }

    fn phase(&mut self, round: usize, mode: Mode) -> Result<PhaseResult, Error> {
        let a = self.a;
        let mut r = PhaseResult {
            round,
            mode: Some(mode),
            seconds: a.seconds,
            ..PhaseResult::default()
        };
        out!("\n== round {round}: {}", mode.label());
        let before = Session::read(self.frr, self.speaker, self.p);
        let stats0 = self.vfsrd.stats();
        let (core, prio) = mode.control();
        set_control(self.pid, core, prio)?;
        r.control = control_state(self.pid);
        let body = self.measure(mode, &mut r);
        self.gen.pause();
        let restored = set_control(self.pid, GEN_CORE, CONTROL_PRIORITY);
        body?;
        restored?;
        nap(SETTLE)?;
        let after = Session::read(self.frr, self.speaker, self.p);
        r.bgpd_resets = after.bgpd_dropped.saturating_sub(before.bgpd_dropped);
        r.gobgp_resets = after.gobgp_flops.saturating_sub(before.gobgp_flops);
        r.established_after = after.up();
        r.session_after = after.to_json();
        if !r.established_after {
            out!("  the BGP session is down; waiting for it before going on");
            wait_until(
                "the BGP session to come back",
                Duration::from_secs(90),
                || Session::read(self.frr, self.speaker, self.p).up(),
            )?;
        }
        r.vfsrd = vfsrd_delta(&stats0, &self.vfsrd.stats());
        let wanted: HashSet<String> = self
            .prefixes
            .iter()
            .take(self.announced)
            .map(|p| p.to_string())
            .collect();
        let (found, header) = fib_check(self.vfsrd, &wanted, self.p.neighbour)?;
        r.fib_check = json!({"announced_so_far": wanted.len(), "in_fib_via_neighbour": found,
                             "dump_header": header});
        Ok(r)
    }

    /// The measuring window of a phase: flood (if any), transactions, pings and
    /// announcements for `seconds`.
    fn measure(&mut self, mode: Mode, r: &mut PhaseResult) -> Result<(), Error> {
        let a = self.a;
        if mode.flood() {
            self.gen.set_rate((a.rate * 1e6) as u64);
            nap(FLOOD_WARMUP)?;
        }
        let addr: SocketAddr = SocketAddr::from((self.p.router, RR_PORT));
        // A control plane starved of its core may not even answer the handshake: that is
        // an outcome of the phase (no transactions, the error recorded), not an error of
        // the run; the pings, the session and the announcements are measured all the same.
        let conn = self
            .l
            .lab
            .in_ns(self.p.ns, move || {
                TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            })
            .map_err(Error::Topology)?;
        let secs = a.seconds;
        let interval = Duration::from_micros(a.rr_interval_us);
        let client = match conn {
            Ok(conn) => Some(
                std::thread::Builder::new()
                    .name("cpflood-rr-client".into())
                    .spawn(move || {
                        let pace = RrPace {
                            every: interval,
                            read_timeout: Duration::from_millis(100),
                            give_up: RR_GIVE_UP,
                        };
                        rr_client(conn, secs, &pace, interrupted)
                    })
                    .map_err(|err| Error::Thread {
                        name: "cpflood-rr-client",
                        err,
                    })?,
            ),
            Err(e) => {
                r.rr_error = Some(format!("TCP connection to {addr}: {e}"));
                None
            }
        };
        let count = (secs * 1000.0 / f64::from(PING_EVERY_MS)) as u32;
        let mut ping = self
            .l
            .lab
            .command(self.p.ns, "ping")
            .args([
                "-n",
                "-i",
                &format!("{:.3}", f64::from(PING_EVERY_MS) / 1000.0),
                "-W",
                "2",
                "-c",
                &count.to_string(),
                "-w",
                &format!("{:.0}", secs + 3.0),
                &self.p.router.to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(Error::Ping)?;
        let ping_out = ping.stdout.take();
        let ping_reader = std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut o) = ping_out {
                let _ = o.read_to_string(&mut s);
            }
            s
        });
        r.ping_sent = count;
        let re0 = (
            tcp_retransmits(self.l, self.p.ns),
            tcp_retransmits(self.l, "rtr"),
        );
        let link0 = LinkCounters::read(self.l, self.p, self.port);
        let t0 = Instant::now();
        let (s0, f0, c0) = (
            self.gen.sent(),
            self.l.forwarded(),
            vethbench::core_jiffies(ROUTER_CORE),
        );
        let mut ids = Vec::new();
        let mut outcome = Ok(());
        for at in schedule(secs, a.announce_ms) {
            let due = t0 + Duration::from_secs_f64(at);
            if let Err(e) = nap(due.saturating_duration_since(Instant::now())) {
                outcome = Err(e);
                break;
            }
            match self.announce() {
                Ok(id) => ids.push(id),
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        if outcome.is_ok() {
            outcome = nap(Duration::from_secs_f64(secs).saturating_sub(t0.elapsed()));
        }
        let dt = t0.elapsed().as_secs_f64();
        let (s1, f1, c1) = (
            self.gen.sent(),
            self.l.forwarded(),
            vethbench::core_jiffies(ROUTER_CORE),
        );
        r.link = LinkCounters::read(self.l, self.p, self.port).since(&link0);
        r.announce_in_phase = ids
            .iter()
            .filter(|id| self.helpers.reached(**id).is_some())
            .count();
        if mode.flood() {
            r.offered_pps = (s1 - s0) as f64 / dt;
            r.forwarded_pps = (f1 - f0) as f64 / dt;
        }
        r.core1_busy = (c1.0 - c0.0) as f64 / ((c1.1 - c0.1).max(1)) as f64;
        // The client stops by itself at the end of the window (or on interruption); ping
        // within its deadline.
        let rr = match client {
            Some(c) => c.join().map_err(|_| Error::ClientPanicked)?,
            None => RrOutcome {
                error: r.rr_error.clone(),
                ..RrOutcome::default()
            },
        };
        r.rr = rr.samples;
        r.rr_unanswered = rr.unanswered;
        r.rr_error = rr.error;
        let t_ping = Instant::now();
        while matches!(ping.try_wait(), Ok(None)) {
            if t_ping.elapsed() > Duration::from_secs(10) || interrupted() {
                let _ = ping.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = ping.wait();
        let text = ping_reader.join().unwrap_or_default();
        r.ping = ping_times(&text);
        r.ping_sent = ping_transmitted(&text).unwrap_or(r.ping_sent);
        r.tcp_retransmits = json!({
            "neighbour": tcp_retransmits(self.l, self.p.ns).saturating_sub(re0.0),
            "router_host": tcp_retransmits(self.l, "rtr").saturating_sub(re0.1),
        });
        outcome?;
        // Announcements still on their way when the window closed are timed on (the
        // prober keeps going), flood or not; the settling pause gives them time.
        self.gen.pause();
        let t_wait = Instant::now();
        while ids.iter().any(|id| self.helpers.reached(*id).is_none())
            && t_wait.elapsed() < Duration::from_secs(5)
        {
            nap(Duration::from_millis(20))?;
        }
        r.announce = ids
            .iter()
            .map(|id| self.helpers.reached(*id).map(|d| d.as_secs_f64() * 1e3))
            .collect();
        Ok(())
    }
}

/// vfsrd's counters over a phase.
fn vfsrd_delta(before: &Value, after: &Value) -> Value {
    let d = |path: &[&str]| -> u64 {
        let get = |v: &Value| path.iter().fold(v, |v, k| &v[*k]).as_u64().unwrap_or(0);
        get(after).saturating_sub(get(before))
    };
    let cpu = |v: &Value| v["cpu_seconds"]["control"].as_f64().unwrap_or(0.0);
    let workers = |v: &Value| {
        v["cpu_seconds"]["workers"]
            .as_array()
            .map_or(0.0, |w| w.iter().filter_map(Value::as_f64).sum::<f64>())
    };
    json!({
        "rx": d(&["rx"]),
        "forwarded": d(&["forwarded"]),
        "ring_rx_dropped": d(&["io", "rx_dropped"]),
        "punted": d(&["punted"]),
        "punts_limited_by_workers": d(&["punts_limited"]),
        "control_frames_in": d(&["control", "frames_in"]),
        "control_rate_limited": rate_limited_delta(before, after),
        "to_host": d(&["control", "to_host"]),
        "to_host_dropped": d(&["control", "to_host_dropped"]),
        "from_host": d(&["control", "from_host"]),
        "echo_replies": d(&["control", "echo_replies"]),
        "control_cpu_s": cpu(after) - cpu(before),
        "worker_cpu_s": workers(after) - workers(before),
    })
}

fn fmt_us(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.0}"))
}

fn fmt_ms(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.1}"))
}

fn print_phase(r: &PhaseResult) {
    let rr = sorted(r.rr.clone());
    let ping = sorted(r.ping.clone());
    if r.offered_pps > 0.0 {
        out!(
            "  flood: offered {:.3} Mpps, forwarded {:.3} Mpps, core {ROUTER_CORE} {:.0} % busy",
            r.offered_pps / 1e6,
            r.forwarded_pps / 1e6,
            r.core1_busy * 100.0
        );
    }
    out!("  control plane: {}", r.control);
    out!(
        "  TCP request/response: {} transactions, p50 {} µs, p99 {} µs, max {} µs, {} unanswered{}",
        rr.len(),
        fmt_us(percentile(&rr, 0.5)),
        fmt_us(percentile(&rr, 0.99)),
        fmt_us(rr.last().copied()),
        r.rr_unanswered,
        r.rr_error
            .as_ref()
            .map(|e| format!(" (stopped: {e})"))
            .unwrap_or_default()
    );
    out!(
        "  ping to the router: {} of {} answered, p50 {} µs, p99 {} µs",
        ping.len(),
        r.ping_sent,
        fmt_us(percentile(&ping, 0.5)),
        fmt_us(percentile(&ping, 0.99))
    );
    let ann = sorted(r.announce.iter().flatten().copied().collect());
    out!(
        "  announcements: {} made, {} in the FIB within the phase, {} at all; to the FIB p50 {} ms, max {} ms",
        r.announce.len(),
        r.announce_in_phase,
        ann.len(),
        fmt_ms(percentile(&ann, 0.5)),
        fmt_ms(ann.last().copied())
    );
    out!(
        "  BGP: resets {} (bgpd) / {} (gobgpd), established after the phase: {}",
        r.bgpd_resets,
        r.gobgp_resets,
        r.established_after
    );
    out!("  TCP segments retransmitted: {}", r.tcp_retransmits);
    out!("  link to the router's port: {}", r.link);
    out!("  vfsrd: {}", r.vfsrd);
    out!("  FIB dump: {}", r.fib_check);
}

/// One mode's phases taken together.
struct Summary {
    mode: Mode,
    rr: Vec<f64>,
    rr_seconds: f64,
    rr_unanswered: u32,
    ping: Vec<f64>,
    ping_sent: u32,
    announce: Vec<f64>,
    announce_made: usize,
    announce_in_phase: usize,
    resets: u64,
    bgpd_resets: u64,
    gobgp_resets: u64,
    always_established: bool,
    offered_pps: f64,
    forwarded_pps: f64,
    core1_busy: f64,
}

fn summarize(mode: Mode, rs: &[&PhaseResult]) -> Summary {
    let n = rs.len().max(1) as f64;
    let bgpd: u64 = rs.iter().map(|r| r.bgpd_resets).sum();
    let gobgp: u64 = rs.iter().map(|r| r.gobgp_resets).sum();
    Summary {
        mode,
        rr: sorted(rs.iter().flat_map(|r| r.rr.iter().copied()).collect()),
        rr_seconds: rs.iter().map(|r| r.seconds).sum(),
        rr_unanswered: rs.iter().map(|r| r.rr_unanswered).sum(),
        ping: sorted(rs.iter().flat_map(|r| r.ping.iter().copied()).collect()),
        ping_sent: rs.iter().map(|r| r.ping_sent).sum(),
        announce: sorted(
            rs.iter()
                .flat_map(|r| r.announce.iter().flatten().copied())
                .collect(),
        ),
        announce_made: rs.iter().map(|r| r.announce.len()).sum(),
        announce_in_phase: rs.iter().map(|r| r.announce_in_phase).sum(),
        resets: bgpd.max(gobgp),
        bgpd_resets: bgpd,
        gobgp_resets: gobgp,
        always_established: rs.iter().all(|r| r.established_after),
        offered_pps: rs.iter().map(|r| r.offered_pps).sum::<f64>() / n,
        forwarded_pps: rs.iter().map(|r| r.forwarded_pps).sum::<f64>() / n,
        core1_busy: rs.iter().map(|r| r.core1_busy).sum::<f64>() / n,
    }
}

impl Summary {
    fn to_json(&self) -> Value {
        let p = |v: &[f64], q: f64| percentile(v, q);
        json!({
            "mode": self.mode.name(),
            "label": self.mode.label(),
            "flood": {"offered_pps": self.offered_pps, "forwarded_pps": self.forwarded_pps,
                      "core1_busy": self.core1_busy},
            "tcp_rr_us": {"transactions": self.rr.len(),
                          "per_second": self.rr.len() as f64 / self.rr_seconds.max(1e-9),
                          "p50": p(&self.rr, 0.5), "p90": p(&self.rr, 0.9),
                          "p99": p(&self.rr, 0.99), "max": self.rr.last(),
                          "unanswered": self.rr_unanswered},
            "ping_us": {"sent": self.ping_sent, "answered": self.ping.len(),
                        "p50": p(&self.ping, 0.5), "p99": p(&self.ping, 0.99),
                        "max": self.ping.last()},
            "bgp": {"resets": self.resets, "bgpd_connections_dropped": self.bgpd_resets,
                    "gobgp_flops": self.gobgp_resets,
                    "established_after_every_phase": self.always_established},
            "announce_to_fib_ms": {"announced": self.announce_made,
                                   "in_fib_within_phase": self.announce_in_phase,
                                   "in_fib": self.announce.len(),
                                   "p50": p(&self.announce, 0.5), "p90": p(&self.announce, 0.9),
                                   "max": self.announce.last(),
                                   "resolution_ms": PROBE_EVERY.as_secs_f64() * 1e3},
        })
    }

    fn row(&self) -> String {
        let flood = if self.mode.flood() {
            format!(
                "{:.2} / {:.2}",
                self.offered_pps / 1e6,
                self.forwarded_pps / 1e6
            )
        } else {
            "-".into()
        };
        format!(
            "| {} | {flood} | {:.0} % | {} / {} | {:.0} | {} / {} ({:.1} % lost) | {} / {} | {} / {} ({} of {}) |",
            self.mode.label(),
            self.core1_busy * 100.0,
            fmt_us(percentile(&self.rr, 0.5)),
            fmt_us(percentile(&self.rr, 0.99)),
            self.rr.len() as f64 / self.rr_seconds.max(1e-9),
            fmt_us(percentile(&self.ping, 0.5)),
            fmt_us(percentile(&self.ping, 0.99)),
            100.0 * (1.0 - self.ping.len() as f64 / f64::from(self.ping_sent.max(1))),
            self.bgpd_resets,
            self.gobgp_resets,
            fmt_ms(percentile(&self.announce, 0.5)),
            fmt_ms(self.announce.last().copied()),
            self.announce_in_phase,
            self.announce_made,
        )
    }
}

fn report(
    a: &CpFloodArgs,
    s: &Setup,
    results: &[PhaseResult],
    session0: &Session,
    session_end: &Session,
) -> Value {
    let sums: Vec<Summary> = s
        .modes
        .iter()
        .map(|&m| {
            let rs: Vec<&PhaseResult> = results.iter().filter(|r| r.mode == Some(m)).collect();
            summarize(m, &rs)
        })
        .collect();
    out!(
        "\nvfsr cp flood: {}; table {} routes; {} round(s) of {:.0} s phases; control plane on core {GEN_CORE}, worker on core {ROUTER_CORE}",
        s.cpu, s.routes, a.rounds, a.seconds
    );
    out!(
        "| phase | flood offered / forwarded Mpps | core {ROUTER_CORE} busy | TCP RR p50 / p99 µs | transactions/s | ping p50 / p99 µs | BGP resets bgpd / gobgpd | announcement → FIB p50 / max ms (in FIB within the phase) |"
    );
    out!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for x in &sums {
        out!("{}", x.row());
    }
    let get = |m: Mode| sums.iter().find(|x| x.mode == m);
    let mut targets = serde_json::Map::new();
    if let (Some(idle), Some(sep)) = (get(Mode::Idle), get(Mode::Separated)) {
        let session_ok = sep.resets == 0 && sep.always_established;
        out!(
            "target: the BGP session never drops with separation: {} ({} resets)",
            if session_ok { "met" } else { "NOT met" },
            sep.resets
        );
        targets.insert(
            "session_never_drops".into(),
            json!({"met": session_ok, "resets": sep.resets}),
        );
        if percentile(&sep.rr, 0.99).is_none() || percentile(&idle.rr, 0.99).is_none() {
            out!("target: p99 TCP RR under flood <= 1.5x idle: NOT met (no transactions measured)");
            targets.insert(
                "rr_p99_within_1_5x_idle".into(),
                json!({"met": false, "ratio": null}),
            );
        }
        if let (Some(i99), Some(s99)) = (percentile(&idle.rr, 0.99), percentile(&sep.rr, 0.99)) {
            let ratio = s99 / i99;
            let met = ratio <= 1.5;
            out!(
                "target: p99 TCP RR under flood <= 1.5x idle: {} ({s99:.0} µs vs {i99:.0} µs idle: {ratio:.2}x{})",
                if met { "met" } else { "NOT met" },
                if met {
                    String::new()
                } else {
                    format!(", {:.0} % over the bound", (ratio / 1.5 - 1.0) * 100.0)
                }
            );
            targets.insert(
                "rr_p99_within_1_5x_idle".into(),
                json!({"met": met, "ratio": ratio, "idle_p99_us": i99, "flood_p99_us": s99}),
            );
        }
        let all = sep.announce.len() == sep.announce_made && sep.announce_made > 0;
        let max = sep.announce.last().copied();
        let met = all && max.is_some_and(|m| m <= 1000.0);
        out!(
            "target: an announcement reaches the FIB within 1 s under flood: {} (max {} ms, {} of {} in the FIB)",
            if met { "met" } else { "NOT met" },
            fmt_ms(max),
            sep.announce.len(),
            sep.announce_made
        );
        targets.insert(
            "announcement_within_1s".into(),
            json!({"met": met, "max_ms": max, "in_fib": sep.announce.len(), "announced": sep.announce_made}),
        );
    }
    let phases: Vec<Value> = results
        .iter()
        .map(|r| {
            let rr = sorted(r.rr.clone());
            let ping = sorted(r.ping.clone());
            let ann: Vec<f64> = sorted(r.announce.iter().flatten().copied().collect());
            json!({
                "round": r.round,
                "mode": r.mode.map(Mode::name),
                "seconds": r.seconds,
                "control_plane": r.control,
                "flood": {"offered_pps": r.offered_pps, "forwarded_pps": r.forwarded_pps,
                          "core1_busy": r.core1_busy},
                "tcp_rr_us": {"transactions": rr.len(), "p50": percentile(&rr, 0.5),
                              "p99": percentile(&rr, 0.99), "max": rr.last(),
                              "unanswered": r.rr_unanswered, "error": r.rr_error},
                "tcp_retransmits": r.tcp_retransmits,
                "link": r.link,
                "ping_us": {"sent": r.ping_sent, "answered": ping.len(),
                            "p50": percentile(&ping, 0.5), "p99": percentile(&ping, 0.99)},
                "announce_to_fib_ms": {"each": r.announce, "in_fib_within_phase": r.announce_in_phase,
                                       "p50": percentile(&ann, 0.5), "max": ann.last()},
                "bgp": {"bgpd_resets": r.bgpd_resets, "gobgp_resets": r.gobgp_resets,
                        "established_after": r.established_after, "session": r.session_after},
                "vfsrd": r.vfsrd,
                "fib_check": r.fib_check,
            })
        })
        .collect();
    json!({
        "cpu": s.cpu,
        "cores": online_cores(),
        "config": {
            "seconds": a.seconds, "rounds": a.rounds, "table": s.source, "routes": s.routes,
            "destinations": s.dests.len(), "frame_bytes": 64, "fast_path": a.fast_path,
            "inline": s.placement.inline, "placement": a.placement,
            "rate_mpps": a.rate, "announce_ms": a.announce_ms, "rr_interval_us": a.rr_interval_us,
            "ping_interval_ms": PING_EVERY_MS, "probe_interval_ms": PROBE_EVERY.as_secs_f64() * 1e3,
            "hold_time_s": HOLD_S, "keepalive_s": KEEPALIVE_S,
            "control_core": GEN_CORE, "control_priority": CONTROL_PRIORITY,
            "worker_core": ROUTER_CORE, "worker_priority": WORKER_PRIORITY,
            "napi_priority": a.napi_priority, "neighbour_qdisc": a.neighbour_qdisc, "generator": {"core": GEN_CORE, "policy": "SCHED_IDLE"},
            "modes": s.modes.iter().map(|m| m.name()).collect::<Vec<_>>(),
        },
        "summary": sums.iter().map(Summary::to_json).collect::<Vec<_>>(),
        "targets": targets,
        "phases": phases,
        "session": {"start": session0.to_json(), "end": session_end.to_json()},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfsr_lpm::Prefix;

    #[test]
    fn samples_are_sorted() {
        assert_eq!(sorted(vec![3.0, 1.0, 2.0]), vec![1.0, 2.0, 3.0]);
        assert_eq!(sorted(vec![f64::NAN, 1.0]).first(), Some(&1.0));
    }

    #[test]
    fn announcements_fall_inside_the_window() {
        let s = schedule(60.0, 1000);
        assert_eq!(s.len(), 59);
        assert_eq!(s.first().copied(), Some(0.5));
        assert!(s.iter().all(|t| *t <= 59.0));
        assert!(schedule(2.0, 1000).len() == 1);
        assert_eq!(schedule(10.0, 250).len(), 36);
    }

    #[test]
    fn free_prefixes_avoid_covering_and_splitting_routes() {
        let route = |a: [u8; 4], len: u8| {
            Route::new(Prefix::new_masked(u32::from(Ipv4Addr::from(a)), len), 1)
        };
        let routes = vec![
            // Covers 198.18.0.0/24 and 198.18.1.0/24.
            route([198, 18, 0, 0], 23),
            // Splits 198.18.2.0/24.
            route([198, 18, 2, 128], 25),
            // Equal to 198.18.4.0/24.
            route([198, 18, 4, 0], 24),
        ];
        let got: Vec<String> = free_prefixes(&routes, 3)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, ["198.18.3.0/24", "198.18.5.0/24", "198.18.6.0/24"]);
        // The pools hold 512 + 16384 /24s; more cannot be had.
        assert_eq!(free_prefixes(&[], 20_000).len(), 512 + 16_384);
    }

    #[test]
    fn ping_output_is_read() {
        let text = "PING 10.10.0.1 (10.10.0.1) 56(84) bytes of data.\n\
            64 bytes from 10.10.0.1: icmp_seq=1 ttl=64 time=0.075 ms\n\
            64 bytes from 10.10.0.1: icmp_seq=1 ttl=64 time=0.080 ms (DUP!)\n\
            64 bytes from 10.10.0.1: icmp_seq=2 ttl=64 time=1.25 ms\n\n\
            --- 10.10.0.1 ping statistics ---\n\
            3 packets transmitted, 2 received, 33.3333% packet loss, time 20ms\n";
        let t = ping_times(text);
        assert_eq!(t.len(), 2);
        assert!((t[0] - 75.0).abs() < 1e-9 && (t[1] - 1250.0).abs() < 1e-9);
        assert_eq!(ping_transmitted(text), Some(3));
        assert_eq!(ping_transmitted("nothing"), None);
    }

    #[test]
    fn phases_and_their_control_plane() {
        assert_eq!(Mode::Separated.control(), (GEN_CORE, CONTROL_PRIORITY));
        assert_eq!(Mode::SharedCore.control(), (ROUTER_CORE, 0));
        assert_eq!(Mode::Ordinary.control(), (GEN_CORE, 0));
        assert!(!Mode::Idle.flood() && Mode::Ordinary.flood());
    }

    #[test]
    fn errors_say_what_failed_and_where() {
        let e = Error::Arg {
            flag: "--seconds",
            must: "be between 2 and 3600",
        };
        assert_eq!(e.to_string(), "--seconds must be between 2 and 3600");
        let e = Error::Unknown {
            flag: "--off",
            value: "both".into(),
            choices: "shared, ordinary",
        };
        assert_eq!(e.to_string(), "--off: unknown \"both\" (shared, ordinary)");
        let e = Error::Start {
            daemon: "gobgpd",
            err: daemons::Error::Start {
                what: "gobgpd".into(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            },
        };
        assert!(
            e.to_string()
                .starts_with("starting gobgpd: cannot start gobgpd: "),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some());
        let e = Error::Timeout {
            what: "the BGP session",
            after: Duration::from_secs(60),
        };
        assert_eq!(
            e.to_string(),
            "timed out after 60 s waiting for the BGP session"
        );
        let net = Net::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 0)), 24);
        let e = Error::Announce {
            net,
            err: daemons::Error::Command {
                command: "gobgp global rib add".into(),
                status: None,
                output: "refused".into(),
            },
        };
        assert_eq!(
            e.to_string(),
            "announcing 198.18.0.0/24: gobgp global rib add: refused"
        );
        let e = Error::File {
            path: PathBuf::from("/nonexistent/cp.json"),
            err: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(e.to_string().starts_with("/nonexistent/cp.json: "));
    }

    #[test]
    fn qdisc_counters_are_read_from_tc_json() {
        let pfifo = r#"[{"kind":"pfifo","handle":"8001:","root":true,"refcnt":2,
            "options":{"limit":1000},"bytes":6400,"packets":100,"drops":2,
            "overlimits":0,"requeues":7,"backlog":0,"qlen":0}]"#;
        assert_eq!(qdisc_stats(pfifo), (100, 2, 7));
        let noqueue = r#"[{"kind":"noqueue","handle":"0:","root":true,"refcnt":2,"options":{}}]"#;
        assert_eq!(qdisc_stats(noqueue), (0, 0, 0));
        assert_eq!(qdisc_stats("not json"), (0, 0, 0));
        assert_eq!(
            qdisc_command("gen0", "pfifo"),
            ["tc", "qdisc", "replace", "dev", "gen0", "root", "pfifo", "limit", "1000"]
        );
        assert_eq!(qdisc_command("gen0", "noqueue").last(), Some(&"noqueue"));
    }

    #[test]
    fn link_counters_subtract() {
        let a = LinkCounters {
            neighbour_tx_dropped: 10,
            neighbour_tx_packets: 100,
            qdisc_sent: 50,
            qdisc_dropped: 0,
            qdisc_requeues: 3,
            port_rx_dropped: 10,
        };
        let b = LinkCounters {
            neighbour_tx_dropped: 25,
            neighbour_tx_packets: 180,
            qdisc_sent: 90,
            qdisc_dropped: 1,
            qdisc_requeues: 9,
            port_rx_dropped: 25,
        };
        let d = b.since(&a);
        assert_eq!(d["neighbour_tx_dropped"], 15);
        assert_eq!(d["neighbour_tx_packets"], 80);
        assert_eq!(d["neighbour_qdisc_requeues"], 6);
        assert_eq!(d["neighbour_qdisc_dropped"], 1);
        assert_eq!(a.since(&b)["port_rx_dropped"], 0);
    }

    #[test]
    fn vfsrd_counters_over_a_phase() {
        let before = json!({"rx": 10, "control": {"to_host_dropped": 1,
            "rate_limited": [0, 1, 0, 0, 0]}, "cpu_seconds": {"control": 1.0,
            "workers": [2.0]}});
        let after = json!({"rx": 110, "control": {"to_host_dropped": 4,
            "rate_limited": [0, 3, 0, 0, 5]}, "cpu_seconds": {"control": 1.5,
            "workers": [4.5]}});
        let d = vfsrd_delta(&before, &after);
        assert_eq!(d["rx"], 100);
        assert_eq!(d["to_host_dropped"], 3);
        assert_eq!(d["control_rate_limited"]["routing"], 2);
        assert_eq!(d["control_rate_limited"]["slow_path"], 5);
        assert_eq!(d["ring_rx_dropped"], 0);
        assert!((d["worker_cpu_s"].as_f64().unwrap_or(0.0) - 2.5).abs() < 1e-9);
    }

    #[test]
    fn the_generator_is_bounded_beyond_the_run() {
        // Four 60 s phases: well past their own time, never unbounded.
        let l = generator_limit(60.0, 4);
        assert!(l > Duration::from_secs(4 * 63 + 60));
        assert!(l < Duration::from_secs(3 * 3600));
    }
}
