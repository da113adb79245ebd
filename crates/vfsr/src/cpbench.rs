//! `vfsr cp bench`: a whole BGP table through FRR into vfsr and into the Linux kernel, timed
//! stage by stage, in one run on one machine.
//!
//! ```text
//!              sp: BGP speaker (BIRD, or gobgpd)
//!          eth0 10.9.0.2            eth1 10.10.0.2
//!               │                        │
//!   rt: r2 10.9.0.1 (vfsrd's port;       lx: k2 10.10.0.1 (a plain Linux router)
//!       bgpd/zebra on its TAP vr2)           bgpd, zebra → kernel FIB
//!
//!   fpm:           bgpd → zebra ─FPM─▶ tap 127.0.0.1:2620 ─▶ vfsrd 127.0.0.1:2621   (rt)
//!                            └──────▶ kernel FIB (FRR 8.4 installs there as well)
//!   kernel:        bgpd → zebra ──────▶ kernel FIB                                   (lx)
//!   kernel-mirror: bgpd → zebra ──────▶ kernel FIB ─rtnetlink─▶ vfsrd ([kernel])     (rt)
//! ```
//!
//! **Speaker.** The speaker holds the whole table before any session may come up. By
//! default it is BIRD 2 with the table as blackhole static routes in its config (the full
//! 2024 table loads in about 4 s and BIRD sends it using under 2 s of CPU); its BGP sessions
//! (IPv4 over IPv4, IPv6 over IPv6, next hop self: the speaker's address on the link) start
//! disabled and `birdc enable` releases them. `--speaker gobgp` uses gobgpd instead, loaded
//! through `GoBgp::add_routes` (MRT TABLE_DUMP_V2 from `vfsr_table::mrt` through a FIFO into
//! `gobgp mrt inject`), its neighbors disabled until released. Measured here on the full
//! table: the injection runs at about 35,000 routes/s (30 s and 40 s of CPU, gobgpd then at
//! 1.4 GB resident), and gobgpd needs some 25 s of CPU to announce the table, with nothing
//! sent in the first 7 to 13 s after the session comes up: on two cores it competes with
//! FRR for the time being measured, which is why BIRD is the default.
//!
//! **A path's run.** FRR (zebra, bgpd; one IPv4 and one IPv6 eBGP session, timers 60/180)
//! starts on core 0, vfsrd (control plane on core 0, one worker on core 1) where the path
//! needs it; the speaker and this program run on core 1. With the probes running, the
//! speaker's sessions are released; the time origin is the first `Established` seen at
//! bgpd. The path has converged when every stage holds the whole table; then the speaker
//! withdraws everything (`birdc disable` of its static protocols, or `gobgp global rib del
//! all`) and the withdrawal is timed from that command until every stage is empty. After
//! each phase the complete set is checked: the kernel's BGP routes by a netlink dump, vfsr's
//! FIB by `--fib-dump` (on SIGUSR1); after the withdrawal, that nothing is left behind.
//!
//! **Stages**, each seen by a probe cheap enough to poll at full-table scale:
//!
//! | stage | probe |
//! | --- | --- |
//! | bgpd has the routes | `show bgp summary json` (pfxRcd, session state) every 20 ms, over bgpd's vty socket (no vtysh process) |
//! | zebra has them from bgpd | `show zebra client summary` (bgp's adds and deletes) every 50 ms, over zebra's vty socket |
//! | kernel FIB | an rtnetlink socket in the router's namespace on the IPv4/IPv6 route groups, counting `proto bgp` routes of table main as notified (a dump after an overrun) |
//! | zebra's FPM stream | a tap between zebra and vfsrd that forwards every byte at once and counts the BGP routes in the frames (it also records the stream for the intake figure) |
//! | vfsr has them | vfsrd's stats file (`routing.rib_routes`, `unresolved`; rewritten every second), refined by its control thread's run time (`/proc/PID/task/PID/schedstat`, every 2 ms) |
//!
//! Times are given from `Established` (or from the withdrawal command) to the first and to
//! the last change of each stage. The stats file bounds vfsr's completion to the second
//! before the write that first shows it; within that second, the completion is taken as the
//! end of the control thread's last busy 2 ms (more than 40 µs of run time) after the source
//! (zebra's FPM stream, or the kernel) was complete, or the source's completion itself when
//! the thread had nothing left to do. The probes cost bgpd and zebra a few short vty
//! commands per second and the kernel one more listener per route change.
//!
//! **Memory.** vfsrd's resident set (`VmRSS`) before the session comes up and after the
//! `fpm` path converged, over the routes; the kernel's, in the `kernel` path, as the growth
//! of `SUnreclaim + Percpu` in `/proc/meminfo` plus the vmalloc areas of fib_trie's largest
//! nodes (named by their caller in `/proc/vmallocinfo`; the machine's `VmallocUsed` moves
//! with other programs' BPF maps and rings), over the routes: the FIB's objects are
//! unreclaimable slab. The kernel's is a machine-wide figure: other activity on the machine
//! shows in it, which is why a small `--prefixes` run gives no usable kernel figure.
//!
//! **Intake.** The FPM stream zebra sent in the `fpm` path (recorded by the tap up to the
//! frame that completed the table) is replayed into vfsrd's FPM listener and control-plane
//! work in this process, as fast as the socket takes it (`fpmbench::replay`): routes per
//! second and resident growth per route, median of `--intake-passes`.
//!
//! FRR 8.4 has no switch to keep zebra from installing into the kernel when the FPM module
//! is loaded: the `fpm` path has zebra doing both, and its dataplane hands a route to the
//! FPM module after the kernel took it.
//!
//! Everything runs between namespaces named `cp<pid>-*`; every wait is bounded
//! (`--timeout-s`); daemons, namespaces and files go on return, on error and on SIGINT or
//! SIGTERM.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use clap::Args;
use serde_json::{json, Map, Value};
use vfsr_router::PortSpec;
use vfsr_wire::MacAddr;
use vfsrd::daemons::{
    self, Bird, FpmTarget, Frr, FrrConfig, GoBgp, GoBgpConfig, GoBgpNeighbor, Net,
};
use vfsrd::harness::{self, Echo, Launch};
use vfsrd::netlab::{self, NetLab};

use crate::fpmbench::{self, Expect, IntakeSetup};

/// `vfsr cp bench` arguments.
#[derive(Args)]
pub struct CpBenchArgs {
    /// Route table file (text or MRT, gzip or not); default: the 2024 reference table, else
    /// the synthetic one.
    #[arg(long)]
    table: Option<PathBuf>,
    /// Use only this many of the table's prefixes, taken evenly across it, both families in
    /// the table's proportion.
    #[arg(long)]
    prefixes: Option<usize>,
    /// The paths to measure, in this order: fpm, kernel, kernel-mirror.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fpm,kernel,kernel-mirror"
    )]
    paths: Vec<String>,
    /// The BGP speaker: bird (the table as static routes) or gobgp (MRT injection).
    #[arg(long, default_value = "bird")]
    speaker: String,
    /// Replays of the recorded FPM stream for the intake figure (0: none).
    #[arg(long, default_value_t = 3)]
    intake_passes: usize,
    /// Longest wait for any one phase, in seconds.
    #[arg(long, default_value_t = 900)]
    timeout_s: u64,
    /// The vfsrd binary; default: the one next to this program.
    #[arg(long)]
    vfsrd: Option<PathBuf>,
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Where FRR and vfsrd's control plane run.
const CONTROL_CORE: usize = 0;
/// Where the speaker, vfsrd's worker and this program's probes run.
const OTHER_CORE: usize = 1;
/// The FPM tap listens where zebra connects; vfsrd listens behind it.
const TAP_PORT: u16 = daemons::FPM_PORT;
const VFSRD_FPM_PORT: u16 = 2621;
/// The tag of vfsrd's files (config, stats, FIB dump) in the temporary directory.
const VFSRD_TAG: &str = "cpbench";
const ROUTER_AS: u32 = 65000;
const SPEAKER_AS: u32 = 65001;
/// `rtm_protocol` of zebra's BGP routes, in the kernel and in FPM frames.
const RTPROT_BGP: u8 = 186;
/// A 2 ms interval in which vfsrd's control thread ran longer than this counts as busy.
const BUSY_NS: u64 = 40_000;

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// What can stop `cp bench`, as values. Only [`run`] turns one into text.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// `--paths` names a path there is not.
    #[error("--paths: unknown path {0:?} (fpm, kernel, kernel-mirror)")]
    UnknownPath(String),
    /// `--paths` names none.
    #[error("--paths: nothing to measure")]
    NoPaths,
    /// `--speaker` is neither `bird` nor `gobgp`.
    #[error("--speaker: unknown speaker {0:?} (bird, gobgp)")]
    UnknownSpeaker(String),
    /// `--prefixes` is 0 or more than the table has (its usable prefixes).
    #[error("--prefixes: between 1 and {total}")]
    Prefixes { total: usize },
    /// No network namespaces or no root (why).
    #[error("vfsr cp bench builds network namespaces and needs root: {0}")]
    NoNamespaces(#[source] netlab::Error),
    /// Fewer than the two cores the run pins to.
    #[error("vfsr cp bench needs 2 cores (FRR and vfsrd's control on core 0)")]
    TooFewCores,
    /// A program the run starts is not installed.
    #[error("{0} is not installed (scripts/setup.sh installs FRR and BIRD)")]
    NotInstalled(String),
    /// No vfsrd binary, and a path needs it.
    #[error("the vfsrd binary is not next to vfsr (cargo build -p vfsrd, or --vfsrd FILE)")]
    NoVfsrd,
    /// The table could not be read (its file, or the default table when `None`).
    #[error(
        "{}{err}",
        .path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default()
    )]
    Table {
        path: Option<PathBuf>,
        #[source]
        err: vfsr_table::Error,
    },
    /// The table has no prefix the lab can announce.
    #[error("the table has no usable prefix")]
    NoUsablePrefix,
    /// This thread could not be moved onto `cores`.
    #[error("moving onto cores {cores:?}: {err}")]
    Affinity {
        cores: Vec<usize>,
        #[source]
        err: vfsr_cpu::CpuError,
    },
    /// A namespace, link or address of the lab (the lab's error, within the daemons' error
    /// where one of their helpers made the namespace).
    #[error(transparent)]
    Topology(daemons::Error),
    /// A thread could not enter a namespace (its full name).
    #[error("entering namespace {ns}: {err}")]
    EnterNetns {
        ns: String,
        #[source]
        err: std::io::Error,
    },
    /// A route dump or the route listener (rtnetlink).
    #[error(transparent)]
    Netlink(#[from] rtnl::Error),
    /// A probe's thread could not be started, or said nothing in time (its name).
    #[error("{name}: {err}")]
    Thread {
        name: String,
        #[source]
        err: std::io::Error,
    },
    #[error("the {0} did not start")]
    ProbeSilent(&'static str),
    /// A daemon did not start or did not become ready.
    #[error("starting {daemon}: {err}")]
    Start {
        daemon: &'static str,
        #[source]
        err: daemons::Error,
    },
    /// vfsrd did not start or did not say it was ready.
    #[error("starting vfsrd: {0}")]
    StartVfsrd(#[source] harness::Error),
    /// vfsrd started but runs without a process id.
    #[error("starting vfsrd: it runs without a process id")]
    VfsrdNoPid,
    /// The vty of an FRR daemon could not be reached (its socket).
    #[error("{}: {err}", .path.display())]
    VtyConnect {
        path: PathBuf,
        #[source]
        err: std::io::Error,
    },
    /// A vty command could not be sent or its answer read.
    #[error("vty {command:?}: {err}")]
    Vty {
        command: String,
        #[source]
        err: std::io::Error,
    },
    /// The daemon closed the vty session during a command.
    #[error("vty {command:?}: the daemon closed the session")]
    VtyClosed { command: String },
    /// The daemon refused a vty command (what it said).
    #[error("vty {command:?}: {said}")]
    VtyRefused { command: String, said: String },
    /// The FPM tap could not listen for zebra (its port).
    #[error("FPM tap: bind 127.0.0.1:{port}: {err}")]
    TapListen {
        port: u16,
        #[source]
        err: std::io::Error,
    },
    /// The FPM tap could not connect to vfsrd (vfsrd's FPM port).
    #[error("FPM tap: connect to vfsrd on 127.0.0.1:{port}: {err}")]
    TapConnect {
        port: u16,
        #[source]
        err: std::io::Error,
    },
    /// The FPM tap could not set up zebra's connection.
    #[error("FPM tap: {0}")]
    TapIo(#[source] std::io::Error),
    /// The FPM tap could not write to vfsrd.
    #[error("FPM tap: writing to vfsrd: {0}")]
    TapWrite(#[source] std::io::Error),
    /// zebra's stream held a frame header that is not FPM's (after so many bytes).
    #[error("FPM tap: bad frame header {header:?} after {after} bytes")]
    TapFrame { header: [u8; 4], after: u64 },
    /// A speaker command failed (what it was asked, its message).
    #[error("the speaker: {what}: {err}")]
    Speaker {
        what: String,
        #[source]
        err: daemons::Error,
    },
    /// BIRD's `show route count` said something else than a count.
    #[error("unexpected `show route count`: {0}")]
    BirdCount(String),
    /// A link address of the lab does not parse.
    #[error("{text}: {err}")]
    Address {
        text: &'static str,
        #[source]
        err: std::net::AddrParseError,
    },
    /// The kernel's interface index of a lab interface.
    #[error(transparent)]
    Ifindex(daemons::Error),
    /// What the run waited for did not happen in time.
    #[error("timed out after {:.1} s waiting for {what}", .after.as_secs_f64())]
    Timeout { what: &'static str, after: Duration },
    /// A path did not converge or withdraw in time: what the probes saw last.
    #[error(
        "{path} path: timed out after {:.1} s waiting for {what}: {probes}",
        .after.as_secs_f64()
    )]
    Stalled {
        path: &'static str,
        what: &'static str,
        after: Duration,
        probes: String,
    },
    /// vfsrd wrote no FIB dump.
    #[error(transparent)]
    FibDump(harness::Error),
    /// The recorded FPM stream could not be replayed (`fpm bench`'s message).
    #[error("replaying the recorded FPM stream: {0}")]
    Replay(#[source] crate::fpmbench::Error),
    /// The recorded FPM stream made fewer prefixes than were announced.
    #[error(
        "the recorded FPM stream made {routes} prefixes, fewer than the {announced} announced"
    )]
    ShortRecording { routes: usize, announced: usize },
    /// The report could not be written.
    #[error(transparent)]
    Report(#[from] crate::jsonfile::Error),
    /// A file could not be read.
    #[error("{}: {err}", .path.display())]
    File {
        path: PathBuf,
        #[source]
        err: std::io::Error,
    },
    /// A path's complete sets were wrong, or it left routes behind (the paths).
    #[error("the checks failed for: {}", .0.join(", "))]
    ChecksFailed(Vec<&'static str>),
}

/// [`daemons::wait_until`], its time-out as [`Error::Timeout`].
fn wait_until(
    what: &'static str,
    timeout: Duration,
    cond: impl FnMut() -> bool,
) -> Result<Duration, Error> {
    daemons::wait_until(what, timeout, cond).map_err(|_| Error::Timeout {
        what,
        after: timeout,
    })
}

// ---------------------------------------------------------------------------------------
// Topology
// ---------------------------------------------------------------------------------------

/// A link between the speaker and a router namespace.
struct Link {
    ns: &'static str,
    ifname: &'static str,
    speaker_if: &'static str,
    router4: &'static str,
    router6: &'static str,
    speaker4: &'static str,
    speaker6: &'static str,
    /// Suffix of the speaker's session names for this link.
    tag: &'static str,
}

/// The link to vfsrd's port (the `fpm` and `kernel-mirror` paths).
const VFSR_LINK: Link = Link {
    ns: "rt",
    ifname: "r2",
    speaker_if: "eth0",
    router4: "10.9.0.1",
    router6: "fd00:9::1",
    speaker4: "10.9.0.2",
    speaker6: "fd00:9::2",
    tag: "rt",
};

/// The link to the plain Linux router (the `kernel` path).
const LINUX_LINK: Link = Link {
    ns: "lx",
    ifname: "k2",
    speaker_if: "eth1",
    router4: "10.10.0.1",
    router6: "fd00:10::1",
    speaker4: "10.10.0.2",
    speaker6: "fd00:10::2",
    tag: "lx",
};

/// The subnets of the links: a table prefix inside one would disturb the next hops.
fn lab_subnets() -> [Net; 4] {
    let net =
        |a: &str, len: u8| Net::new(a.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)), len);
    [
        net(VFSR_LINK.router4, 24),
        net(VFSR_LINK.router6, 64),
        net(LINUX_LINK.router4, 24),
        net(LINUX_LINK.router6, 64),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PathKind {
    Fpm,
    Kernel,
    KernelMirror,
}

impl PathKind {
    fn parse(s: &str) -> Result<PathKind, Error> {
        match s {
            "fpm" => Ok(PathKind::Fpm),
            "kernel" => Ok(PathKind::Kernel),
            "kernel-mirror" => Ok(PathKind::KernelMirror),
            other => Err(Error::UnknownPath(other.to_string())),
        }
    }

    fn name(self) -> &'static str {
        match self {
            PathKind::Fpm => "fpm",
            PathKind::Kernel => "kernel",
            PathKind::KernelMirror => "kernel-mirror",
        }
    }

    fn link(self) -> &'static Link {
        match self {
            PathKind::Kernel => &LINUX_LINK,
            _ => &VFSR_LINK,
        }
    }

    fn uses_vfsrd(self) -> bool {
        self != PathKind::Kernel
    }

    /// The RIB source vfsrd files the routes under.
    fn vfsr_source(self) -> &'static str {
        match self {
            PathKind::Fpm => "fpm",
            _ => "kernel",
        }
    }
}

// ---------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------

/// The prefixes announced.
struct Workload {
    v4: Vec<Net>,
    v6: Vec<Net>,
    what: String,
}

impl Workload {
    fn load(a: &CpBenchArgs) -> Result<Workload, Error> {
        let (table, what) = match &a.table {
            Some(p) => (
                vfsr_table::read_table_file(p, &Default::default())
                    .map_err(|err| Error::Table {
                        path: Some(p.clone()),
                        err,
                    })?
                    .0,
                p.display().to_string(),
            ),
            None => {
                let (t, s) = vfsr_table::shared::load_default_table(1)
                    .map_err(|err| Error::Table { path: None, err })?;
                (t, s.to_string())
            }
        };
        let mut v4: Vec<Net> = table
            .v4
            .iter()
            .map(|r| Net::new(IpAddr::V4(Ipv4Addr::from(r.prefix.addr())), r.prefix.len()))
            .collect();
        let mut v6: Vec<Net> = table
            .v6
            .iter()
            .map(|r| Net::new(IpAddr::V6(Ipv6Addr::from(r.prefix.addr())), r.prefix.len()))
            .collect();
        let before = v4.len() + v6.len();
        for v in [&mut v4, &mut v6] {
            v.sort();
            v.dedup();
            v.retain(usable);
        }
        let left_out = before - v4.len() - v6.len();
        let mut what = what;
        if left_out > 0 {
            what.push_str(&format!(
                " ({left_out} duplicate or special-purpose prefixes left out)"
            ));
        }
        if let Some(n) = a.prefixes {
            let total = v4.len() + v6.len();
            if n == 0 || n > total {
                return Err(Error::Prefixes { total });
            }
            let n4 = (n as u128 * v4.len() as u128 / total as u128) as usize;
            let n4 = n4.max(n.saturating_sub(v6.len())).min(v4.len());
            v4 = spread(&v4, n4);
            v6 = spread(&v6, n - v4.len());
            what.push_str(&format!(", {n} of its prefixes"));
        }
        if v4.is_empty() && v6.is_empty() {
            return Err(Error::NoUsablePrefix);
        }
        Ok(Workload { v4, v6, what })
    }

    fn total(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    fn keys(&self) -> HashSet<rtnl::Key> {
        self.v4.iter().chain(&self.v6).map(key_of).collect()
    }
}

/// Whether a table prefix can be announced in the lab: not loopback, link-local,
/// multicast or reserved, nor inside one of the lab's own subnets.
fn usable(n: &Net) -> bool {
    let special = match n.addr {
        IpAddr::V4(a) => {
            let [o, o2, ..] = a.octets();
            (o == 0 && n.len > 0) || o == 127 || o >= 224 || (o == 169 && o2 == 254)
        }
        IpAddr::V6(a) => {
            let s = a.segments()[0];
            (s >> 8 == 0 && n.len >= 8) || s & 0xffc0 == 0xfe80 || s >> 8 == 0xff
        }
    };
    !special && !lab_subnets().iter().any(|s| within(n, s))
}

/// Whether `n` lies inside `outer`.
fn within(n: &Net, outer: &Net) -> bool {
    n.family() == outer.family() && n.len >= outer.len && Net::new(n.addr, outer.len) == *outer
}

/// `n` items taken evenly across `v`.
fn spread(v: &[Net], n: usize) -> Vec<Net> {
    if n >= v.len() {
        return v.to_vec();
    }
    (0..n)
        .filter_map(|i| v.get((i as u128 * v.len() as u128 / n as u128) as usize))
        .copied()
        .collect()
}

fn key_of(n: &Net) -> rtnl::Key {
    match n.addr {
        IpAddr::V4(a) => (libc::AF_INET as u8, u128::from(u32::from(a)), n.len),
        IpAddr::V6(a) => (libc::AF_INET6 as u8, u128::from(a), n.len),
    }
}

fn key_text(k: &rtnl::Key) -> String {
    let (family, addr, len) = *k;
    if i32::from(family) == libc::AF_INET {
        format!("{}/{len}", Ipv4Addr::from(addr as u32))
    } else {
        format!("{}/{len}", Ipv6Addr::from(addr))
    }
}

// ---------------------------------------------------------------------------------------
// Cores, processes, clean-up
// ---------------------------------------------------------------------------------------

/// Sets the calling thread's CPU affinity to `cores`. Processes it starts inherit it.
fn set_affinity(cores: &[usize]) -> Result<(), Error> {
    vfsr_cpu::pin_task(0, cores).map_err(|err| Error::Affinity {
        cores: cores.to_vec(),
        err,
    })
}

/// Runs `f` (which starts daemons) with the calling thread on `cores`, then puts it back on
/// [`OTHER_CORE`].
fn on_cores<T>(cores: &[usize], f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    set_affinity(cores)?;
    let r = f();
    set_affinity(&[OTHER_CORE])?;
    r
}

/// CPU seconds (user + system) of a process or thread, from `/proc/.../stat`.
fn cpu_seconds(stat_path: &str) -> Option<f64> {
    let text = fs::read_to_string(stat_path).ok()?;
    let rest = text.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((utime + stime) / hz)
}

fn rss_bytes(pid: i32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The kernel's memory in bytes: `SUnreclaim`, the FIB's vmalloc areas, `Percpu` and
/// `Slab`. The machine's `VmallocUsed` is not taken: other programs' BPF maps, AF_XDP
/// rings and thread stacks move it by far more than a table does, while the FIB's own
/// areas (fib_trie's largest nodes) are named by their caller in `/proc/vmallocinfo`.
fn kernel_memory() -> [u64; 4] {
    let text = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let vmalloc = fs::read_to_string("/proc/vmallocinfo").unwrap_or_default();
    let field = |name: &str| -> u64 {
        text.lines()
            .find(|l| l.split(':').next() == Some(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    [
        field("SUnreclaim"),
        fib_vmalloc_bytes(&vmalloc),
        field("Percpu"),
        field("Slab"),
    ]
}

/// The bytes of the `/proc/vmallocinfo` areas that the FIB allocated (callers `tnode_*`,
/// fib_trie's nodes, and `fib*`). A line reads `0xSTART-0xEND SIZE CALLER+0xOFF/0xLEN ...`.
fn fib_vmalloc_bytes(vmallocinfo: &str) -> u64 {
    vmallocinfo
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let size: u64 = f.nth(1)?.parse().ok()?;
            let caller = f.next()?;
            let name = caller.split('+').next()?;
            (name.starts_with("tnode") || name.starts_with("fib")).then_some(size)
        })
        .sum()
}

fn read_pid(path: &Path) -> Option<i32> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// On SIGINT or SIGTERM: stops every process in this run's namespaces (the daemons this
/// program started: FRR, the speaker, vfsrd), deletes the namespaces, removes the daemons'
/// state directories and this run's files, and exits. The handler writes the signal to a
/// pipe that a watcher thread reads.
fn clean_up_on_signal() {
    crate::interrupt::on_interrupt("stopping the benchmark's daemons", || {
        let pid = std::process::id();
        let names = our_namespaces(pid);
        for sig in [libc::SIGTERM, libc::SIGKILL] {
            for ns in &names {
                for p in namespace_pids(ns) {
                    // SAFETY: kill(2) on a process of this run's namespaces, which only
                    // this program's daemons inhabit.
                    unsafe { libc::kill(p, sig) };
                }
            }
            std::thread::sleep(Duration::from_millis(1500));
        }
        for ns in &names {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", ns])
                .status();
        }
        remove_state_dirs(pid);
    });
}

fn ns_prefix(pid: u32) -> String {
    format!("cp{pid}-")
}

fn our_namespaces(pid: u32) -> Vec<String> {
    let prefix = ns_prefix(pid);
    std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .filter(|n| n.starts_with(&prefix))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn namespace_pids(ns: &str) -> Vec<i32> {
    std::process::Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Removes the daemons' state directories (`/tmp/vfsr-frr-PID-*` and the like) and vfsrd's
/// files (config, stats, FIB dump: `vfsrd-cpbench-rt-PID.*` where the harness keeps them).
fn remove_state_dirs(pid: u32) {
    let vfsrd_files = format!("vfsrd-{VFSRD_TAG}-{}-{pid}.", VFSR_LINK.ns);
    if let Ok(entries) = fs::read_dir(std::env::temp_dir()) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&vfsrd_files) {
                let _ = fs::remove_file(e.path());
            }
        }
    }
    let Ok(entries) = fs::read_dir("/tmp") else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = ["frr", "bird", "gobgp"]
            .iter()
            .any(|k| name.starts_with(&format!("vfsr-{k}-{pid}-")));
        if ours {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// Makes the calling thread enter network namespace `full_name` (for good).
fn enter_netns(full_name: &str) -> Result<(), Error> {
    let err = |err| Error::EnterNetns {
        ns: full_name.to_string(),
        err,
    };
    let file = fs::File::open(format!("/var/run/netns/{full_name}")).map_err(err)?;
    // SAFETY: setns on a descriptor we hold open, for this thread only.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(err(std::io::Error::last_os_error()));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// rtnetlink: counting BGP routes in the kernel and in FPM frames
// ---------------------------------------------------------------------------------------

/// Just enough rtnetlink to count routes: the header fields of `RTM_NEWROUTE` and
/// `RTM_DELROUTE`, read with checked slices (rtnetlink(7)), a socket on the route groups
/// and a route dump.
mod rtnl {
    use std::collections::HashSet;
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    /// (family, address, prefix length) of a route.
    pub type Key = (u8, u128, u8);

    const NLMSG_HDRLEN: usize = 16;
    const NLMSG_ERROR: u16 = 2;
    const NLMSG_DONE: u16 = 3;
    pub const RTM_NEWROUTE: u16 = 24;
    pub const RTM_DELROUTE: u16 = 25;
    const RTM_GETROUTE: u16 = 26;
    const RTA_DST: u16 = 1;
    const RTA_TABLE: u16 = 15;
    const RT_TABLE_MAIN: u32 = 254;
    const RTMGRP_IPV4_ROUTE: u32 = 0x40;
    const RTMGRP_IPV6_ROUTE: u32 = 0x400;

    fn u16_at(b: &[u8], at: usize) -> Option<u16> {
        Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
    }

    fn u32_at(b: &[u8], at: usize) -> Option<u32> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
    }

    fn align4(n: usize) -> usize {
        (n + 3) & !3
    }

    /// A route message's (family, address, length), table and protocol.
    fn route(msg: &[u8]) -> Option<(Key, u32, u8)> {
        let family = *msg.first()?;
        let dst_len = *msg.get(1)?;
        let mut table = u32::from(*msg.get(4)?);
        let protocol = *msg.get(5)?;
        let mut addr = 0u128;
        let mut at = 12;
        while let (Some(len), Some(kind)) = (u16_at(msg, at), u16_at(msg, at + 2)) {
            let len = usize::from(len);
            if len < 4 {
                break;
            }
            let value = msg.get(at + 4..at + len)?;
            match kind & 0x3fff {
                RTA_DST => {
                    addr = match value.len() {
                        4 => u128::from(u32::from_be_bytes(value.try_into().ok()?)),
                        16 => u128::from_be_bytes(value.try_into().ok()?),
                        _ => return None,
                    }
                }
                RTA_TABLE => table = u32_at(value, 0)?,
                _ => {}
            }
            at += align4(len);
        }
        Some(((family, addr, dst_len), table, protocol))
    }

    /// What went wrong with rtnetlink.
    #[derive(Debug, thiserror::Error)]
    pub enum Error {
        /// A message cut short at byte `at` of the buffer.
        #[error("netlink message cut short at byte {at}")]
        Truncated { at: usize },
        /// A message length shorter than a header or past the buffer's end.
        #[error("bad netlink length {len} at byte {at}")]
        Length { len: usize, at: usize },
        /// An `NLMSG_ERROR` other than an acknowledgement.
        #[error("netlink error: {0}")]
        Kernel(#[source] io::Error),
        /// The socket could not be opened.
        #[error("netlink socket: {0}")]
        Socket(#[source] io::Error),
        /// A dump could not be asked for.
        #[error("route dump request: {0}")]
        Request(#[source] io::Error),
        /// A dump could not be read.
        #[error("route dump: {0}")]
        Recv(#[source] io::Error),
        /// A dump stopped coming (100 reads timed out).
        #[error("the route dump stalled")]
        Stalled,
    }

    /// What a buffer of netlink messages held.
    #[derive(Debug, Default)]
    pub struct Parsed {
        /// A dump's end (`NLMSG_DONE`) was seen.
        pub done: bool,
    }

    /// Calls `f(message type, route)` for each BGP route of table main in `buf`: netlink
    /// messages back to back (a datagram, or an FPM frame's payload). An `NLMSG_ERROR`
    /// other than an acknowledgement is an error.
    pub fn bgp_routes(buf: &[u8], mut f: impl FnMut(u16, Key)) -> Result<Parsed, Error> {
        let mut parsed = Parsed::default();
        let mut at = 0;
        while buf.len().saturating_sub(at) >= NLMSG_HDRLEN {
            let len = u32_at(buf, at).ok_or(Error::Truncated { at })? as usize;
            let kind = u16_at(buf, at + 4).ok_or(Error::Truncated { at })?;
            if len < NLMSG_HDRLEN || at + len > buf.len() {
                return Err(Error::Length { len, at });
            }
            let body = buf
                .get(at + NLMSG_HDRLEN..at + len)
                .ok_or(Error::Length { len, at })?;
            match kind {
                NLMSG_DONE => parsed.done = true,
                NLMSG_ERROR => {
                    let code = u32_at(body, 0).ok_or(Error::Truncated { at })? as i32;
                    if code != 0 {
                        return Err(Error::Kernel(io::Error::from_raw_os_error(-code)));
                    }
                }
                RTM_NEWROUTE | RTM_DELROUTE => {
                    if let Some((k, table, protocol)) = route(body) {
                        if protocol == super::RTPROT_BGP && table == RT_TABLE_MAIN {
                            f(kind, k);
                        }
                    }
                }
                _ => {}
            }
            at += align4(len);
        }
        Ok(parsed)
    }

    /// A `NETLINK_ROUTE` socket in the calling thread's namespace.
    pub struct Socket(OwnedFd);

    impl Socket {
        /// Opens one, joined to the IPv4 and IPv6 route groups when `listen`, with a receive
        /// buffer of `rcvbuf` bytes and reads that time out after 50 ms.
        pub fn open(listen: bool, rcvbuf: usize) -> io::Result<Socket> {
            // SAFETY: plain socket(2); the descriptor is owned at once.
            let fd = unsafe {
                libc::socket(
                    libc::AF_NETLINK,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    libc::NETLINK_ROUTE,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is a fresh descriptor nobody else owns.
            let s = Socket(unsafe { OwnedFd::from_raw_fd(fd) });
            // SAFETY: a zeroed sockaddr_nl is valid; the fields set are plain integers.
            let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
            addr.nl_family = libc::AF_NETLINK as u16;
            if listen {
                addr.nl_groups = RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE;
            }
            // SAFETY: bind(2) with a valid sockaddr_nl and its size.
            let rc = unsafe {
                libc::bind(
                    fd,
                    (&addr as *const libc::sockaddr_nl).cast(),
                    std::mem::size_of::<libc::sockaddr_nl>() as u32,
                )
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            let size = i32::try_from(rcvbuf).unwrap_or(i32::MAX);
            s.setopt(libc::SO_RCVBUFFORCE, &size)?;
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 50_000,
            };
            s.setopt(libc::SO_RCVTIMEO, &tv)?;
            Ok(s)
        }

        fn setopt<T>(&self, name: i32, value: &T) -> io::Result<()> {
            // SAFETY: setsockopt(2) reads size_of::<T>() bytes of `value`.
            let rc = unsafe {
                libc::setsockopt(
                    self.0.as_raw_fd(),
                    libc::SOL_SOCKET,
                    name,
                    (value as *const T).cast(),
                    std::mem::size_of::<T>() as u32,
                )
            };
            if rc == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        }

        /// One datagram (an error of kind `WouldBlock` when the read timed out;
        /// `ENOBUFS` after an overrun).
        pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
            // SAFETY: recv(2) writes at most buf.len() bytes into `buf`.
            let n =
                unsafe { libc::recv(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        }

        fn send(&self, bytes: &[u8]) -> io::Result<()> {
            // SAFETY: a zeroed sockaddr_nl addresses the kernel; send reads `bytes`.
            let mut to: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
            to.nl_family = libc::AF_NETLINK as u16;
            // SAFETY: sendto(2) with a valid buffer and address.
            let n = unsafe {
                libc::sendto(
                    self.0.as_raw_fd(),
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    0,
                    (&to as *const libc::sockaddr_nl).cast(),
                    std::mem::size_of::<libc::sockaddr_nl>() as u32,
                )
            };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
    }

    /// The BGP routes of table main in the calling thread's namespace, both families, by
    /// route dumps.
    pub fn dump_bgp_routes() -> Result<HashSet<Key>, Error> {
        let s = Socket::open(false, 8 << 20).map_err(Error::Socket)?;
        let mut out = HashSet::new();
        let mut buf = vec![0u8; 1 << 20];
        for (seq, family) in [(1u32, libc::AF_INET), (2, libc::AF_INET6)] {
            let mut req = Vec::with_capacity(28);
            req.extend_from_slice(&28u32.to_ne_bytes());
            req.extend_from_slice(&RTM_GETROUTE.to_ne_bytes());
            let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
            req.extend_from_slice(&flags.to_ne_bytes());
            req.extend_from_slice(&seq.to_ne_bytes());
            req.extend_from_slice(&0u32.to_ne_bytes());
            let mut rtm = [0u8; 12];
            rtm[0] = family as u8;
            req.extend_from_slice(&rtm);
            s.send(&req).map_err(Error::Request)?;
            let mut idle = 0;
            loop {
                let n = match s.recv(&mut buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        idle += 1;
                        if idle > 100 {
                            return Err(Error::Stalled);
                        }
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(Error::Recv(e)),
                };
                let data = buf.get(..n).ok_or(Error::Length { len: n, at: 0 })?;
                let p = bgp_routes(data, |kind, k| {
                    if kind == RTM_NEWROUTE {
                        out.insert(k);
                    }
                })?;
                if p.done {
                    break;
                }
            }
        }
        Ok(out)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn message(kind: u16, family: u8, len: u8, protocol: u8, dst: &[u8]) -> Vec<u8> {
            let mut body = vec![family, len, 0, 0, 254, protocol, 0, 1, 0, 0, 0, 0];
            body.extend_from_slice(&((4 + dst.len()) as u16).to_ne_bytes());
            body.extend_from_slice(&RTA_DST.to_ne_bytes());
            body.extend_from_slice(dst);
            while body.len() % 4 != 0 {
                body.push(0);
            }
            let mut m = Vec::new();
            m.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(&[0u8; 10]);
            m.extend_from_slice(&body);
            m
        }

        #[test]
        fn counts_bgp_routes_of_table_main_only() {
            let mut buf = message(RTM_NEWROUTE, 2, 24, 186, &[192, 0, 2, 0]);
            buf.extend(message(RTM_NEWROUTE, 2, 24, 4, &[198, 51, 100, 0]));
            let v6 = 0x2001_0db8_u128 << 96;
            buf.extend(message(RTM_DELROUTE, 10, 48, 186, &v6.to_be_bytes()));
            let mut seen = Vec::new();
            let p = bgp_routes(&buf, |kind, k| seen.push((kind, k))).unwrap_or_default();
            assert!(!p.done);
            assert_eq!(
                seen,
                vec![
                    (RTM_NEWROUTE, (2, 0xc000_0200, 24)),
                    (RTM_DELROUTE, (10, v6, 48))
                ]
            );
        }

        #[test]
        fn refuses_a_length_past_the_end() {
            let mut buf = message(RTM_NEWROUTE, 2, 24, 186, &[192, 0, 2, 0]);
            buf.truncate(buf.len() - 4);
            let e = bgp_routes(&buf, |_, _| {}).err();
            assert!(matches!(e, Some(Error::Length { len: 36, at: 0 })), "{e:?}");
        }

        #[test]
        fn a_kernel_error_is_an_error_and_an_acknowledgement_is_not() {
            let ack = |code: i32| {
                let mut m = Vec::new();
                m.extend_from_slice(&20u32.to_ne_bytes());
                m.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
                m.extend_from_slice(&[0u8; 10]);
                m.extend_from_slice(&code.to_ne_bytes());
                m
            };
            assert!(bgp_routes(&ack(0), |_, _| {}).is_ok());
            let e = bgp_routes(&ack(-libc::EPERM), |_, _| {}).err();
            assert!(
                matches!(&e, Some(Error::Kernel(k)) if k.raw_os_error() == Some(libc::EPERM)),
                "{e:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Time series and probes
// ---------------------------------------------------------------------------------------

/// A probe's samples: when it saw which values.
type Sample = (Instant, [u64; 4]);

/// Samples shared between a probe's thread and the benchmark.
#[derive(Clone, Default)]
struct Series(Arc<Mutex<Vec<Sample>>>);

impl Series {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Sample>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, t: Instant, v: [u64; 4]) {
        self.lock().push((t, v));
    }

    /// Appends a sample unless the values are those of the last one.
    fn push_change(&self, t: Instant, v: [u64; 4]) {
        let mut s = self.lock();
        if s.last().is_none_or(|l| l.1 != v) {
            s.push((t, v));
        }
    }

    fn last(&self) -> Option<[u64; 4]> {
        self.lock().last().map(|s| s.1)
    }

    /// The first sample at or after `from` whose values satisfy `pred`.
    fn first(&self, from: Instant, pred: impl Fn(&[u64; 4]) -> bool) -> Option<Instant> {
        self.lock()
            .iter()
            .find(|(t, v)| *t >= from && pred(v))
            .map(|s| s.0)
    }

    fn samples(&self) -> Vec<Sample> {
        self.lock().clone()
    }
}

/// Groups the samples of a fast event source: a sample within `res` of the one that
/// opened the current group replaces the group's last one (values and time), so the
/// series stays short and its last sample of a group is exact.
struct Coalescer {
    opened: Option<Instant>,
    res: Duration,
}

impl Coalescer {
    fn new(res: Duration) -> Coalescer {
        Coalescer { opened: None, res }
    }

    fn push(&mut self, series: &Series, t: Instant, v: [u64; 4]) {
        let mut s = series.lock();
        if s.last().is_some_and(|l| l.1 == v) {
            return;
        }
        match (self.opened, s.last_mut()) {
            (Some(o), Some(last)) if t.duration_since(o) < self.res => *last = (t, v),
            _ => {
                s.push((t, v));
                self.opened = Some(t);
            }
        }
    }
}

/// A thread that calls `sample` every `period` until `stop`, pushing what it returns.
fn poll_probe(
    name: &str,
    period: Duration,
    stop: &Arc<AtomicBool>,
    series: &Series,
    all_samples: bool,
    mut sample: impl FnMut() -> Option<[u64; 4]> + Send + 'static,
) -> Result<JoinHandle<()>, Error> {
    let stop = Arc::clone(stop);
    let series = series.clone();
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                if let Some(v) = sample() {
                    if all_samples {
                        series.push(t, v);
                    } else {
                        series.push_change(t, v);
                    }
                }
                std::thread::sleep(period.saturating_sub(t.elapsed()));
            }
        })
        .map_err(|err| Error::Thread {
            name: name.to_string(),
            err,
        })
}

/// A vty session with one FRR daemon over its unix socket (`DIR/<daemon>.vty`), the way
/// vtysh talks to it: a command and a NUL, then the output ended by three NULs and a status
/// byte.
struct Vty {
    stream: UnixStream,
    buf: Vec<u8>,
}

impl Vty {
    fn connect(frr: &Frr, daemon: &str) -> Result<Vty, Error> {
        let path = frr.dir().join(format!("{daemon}.vty"));
        let stream = UnixStream::connect(&path)
            .and_then(|s| {
                s.set_read_timeout(Some(Duration::from_secs(10)))?;
                Ok(s)
            })
            .map_err(|err| Error::VtyConnect { path, err })?;
        let mut v = Vty {
            stream,
            buf: Vec::with_capacity(1 << 16),
        };
        v.run("enable")?;
        Ok(v)
    }

    fn run(&mut self, command: &str) -> Result<String, Error> {
        let io = |err| Error::Vty {
            command: command.to_string(),
            err,
        };
        let mut line = command.as_bytes().to_vec();
        line.push(0);
        self.stream.write_all(&line).map_err(io)?;
        self.buf.clear();
        let mut chunk = [0u8; 1 << 16];
        loop {
            let n = self.stream.read(&mut chunk).map_err(io)?;
            if n == 0 {
                return Err(Error::VtyClosed {
                    command: command.to_string(),
                });
            }
            self.buf.extend_from_slice(chunk.get(..n).unwrap_or(&[]));
            let len = self.buf.len();
            if len >= 4 && self.buf.get(len - 4..len - 1) == Some(&[0, 0, 0][..]) {
                let status = self.buf.get(len - 1).copied().unwrap_or(1);
                let text = String::from_utf8_lossy(self.buf.get(..len - 4).unwrap_or(&[]));
                if status != 0 {
                    return Err(Error::VtyRefused {
                        command: command.to_string(),
                        said: text.trim().to_string(),
                    });
                }
                return Ok(text.into_owned());
            }
        }
    }
}

/// bgpd's view: [IPv4 session established, IPv6 session established, IPv4 prefixes
/// received, IPv6 prefixes received].
fn bgpd_sample(vty: &mut Vty, link: &Link) -> Option<[u64; 4]> {
    parse_bgp_summary(&vty.run("show bgp summary json").ok()?, link)
}

/// [IPv4 session established, IPv6 session established, IPv4 prefixes received, IPv6
/// prefixes received] of the speaker on `link` from `show bgp summary json`.
fn parse_bgp_summary(text: &str, link: &Link) -> Option<[u64; 4]> {
    let v: Value = serde_json::from_str(text).ok()?;
    let peer = |af: &str, addr: &str| -> (u64, u64) {
        let p = &v[af]["peers"][addr];
        (
            u64::from(p["state"].as_str() == Some("Established")),
            p["pfxRcd"].as_u64().unwrap_or(0),
        )
    };
    let (e4, p4) = peer("ipv4Unicast", link.speaker4);
    let (e6, p6) = peer("ipv6Unicast", link.speaker6);
    Some([e4, e6, p4, p6])
}

/// zebra's view of bgpd as a client: [IPv4 adds, IPv4 deletes, IPv6 adds, IPv6 deletes]
/// (`show zebra client summary`, whose route columns read `added+updated/deleted`).
fn zebra_sample(vty: &mut Vty) -> Option<[u64; 4]> {
    parse_zebra_clients(&vty.run("show zebra client summary").ok()?)
}

/// bgp's line of `show zebra client summary`: `bgp HH:MM:SS HH:MM:SS HH:MM:SS A4/D4 A6/D6
/// ...` gives [A4, D4, A6, D6].
fn parse_zebra_clients(text: &str) -> Option<[u64; 4]> {
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("bgp"))?;
    let pair = |s: &str| -> Option<(u64, u64)> {
        let (a, d) = s.split_once('/')?;
        Some((a.parse().ok()?, d.parse().ok()?))
    };
    let cols: Vec<&str> = line.split_whitespace().collect();
    let (a4, d4) = pair(cols.get(4)?)?;
    let (a6, d6) = pair(cols.get(5)?)?;
    Some([a4, d4, a6, d6])
}

/// A thread in namespace `full_ns` counting the kernel's BGP routes of table main from the
/// route notifications: samples [IPv4, IPv6, overruns, 0]. After an overrun it counts again
/// from a dump.
fn kernel_probe(
    full_ns: String,
    stop: &Arc<AtomicBool>,
    series: &Series,
) -> Result<JoinHandle<()>, Error> {
    let stop = Arc::clone(stop);
    let series = series.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), Error>>();
    let h = std::thread::Builder::new()
        .name("kernel-probe".into())
        .spawn(move || {
            let sock = enter_netns(&full_ns).and_then(|()| {
                rtnl::Socket::open(true, 256 << 20)
                    .map_err(|e| Error::Netlink(rtnl::Error::Socket(e)))
            });
            let sock = match sock {
                Ok(s) => s,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let mut routes: HashSet<rtnl::Key> = rtnl::dump_bgp_routes().unwrap_or_default();
            let _ = ready_tx.send(Ok(()));
            let mut overruns = 0u64;
            let mut co = Coalescer::new(Duration::from_millis(1));
            let count = |r: &HashSet<rtnl::Key>, o: u64| -> [u64; 4] {
                let v4 = r.iter().filter(|k| i32::from(k.0) == libc::AF_INET).count() as u64;
                [v4, r.len() as u64 - v4, o, 0]
            };
            let (mut v4, mut v6) = {
                let c = count(&routes, 0);
                (c[0], c[1])
            };
            co.push(&series, Instant::now(), [v4, v6, 0, 0]);
            let mut buf = vec![0u8; 1 << 20];
            while !stop.load(Ordering::Relaxed) {
                match sock.recv(&mut buf) {
                    Ok(n) => {
                        let _ = rtnl::bgp_routes(buf.get(..n).unwrap_or(&[]), |kind, k| {
                            let v4_route = i32::from(k.0) == libc::AF_INET;
                            let changed = if kind == rtnl::RTM_NEWROUTE {
                                routes.insert(k)
                            } else {
                                routes.remove(&k)
                            };
                            if changed {
                                let c = if v4_route { &mut v4 } else { &mut v6 };
                                if kind == rtnl::RTM_NEWROUTE {
                                    *c += 1;
                                } else {
                                    *c = c.saturating_sub(1);
                                }
                            }
                        });
                        co.push(&series, Instant::now(), [v4, v6, overruns, 0]);
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                        overruns += 1;
                        if let Ok(r) = rtnl::dump_bgp_routes() {
                            routes = r;
                            let c = count(&routes, overruns);
                            (v4, v6) = (c[0], c[1]);
                        }
                        co.push(&series, Instant::now(), [v4, v6, overruns, 0]);
                    }
                    Err(_) => {}
                }
            }
        })
        .map_err(|err| Error::Thread {
            name: "kernel probe".to_string(),
            err,
        })?;
    ready_rx
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| Error::ProbeSilent("kernel probe"))??;
    Ok(h)
}

/// vfsrd's stats file: [the source's IPv4 RIB routes, its IPv6 RIB routes, FIB prefixes,
/// unresolved routes], stamped with the file's modification time.
fn stats_sample(path: &Path, source: &str) -> Option<(SystemTime, [u64; 4])> {
    let mtime = fs::metadata(path).ok()?.modified().ok()?;
    let v: Value = serde_json::from_str(&fs::read_to_string(path).ok()?).ok()?;
    let r = &v["routing"];
    let n = |x: &Value| x.as_u64().unwrap_or(0);
    Some((
        mtime,
        [
            n(&r["rib_routes"][source]["v4"]),
            n(&r["rib_routes"][source]["v6"]),
            n(&r["fib_prefixes"]["v4"]) + n(&r["fib_prefixes"]["v6"]),
            n(&r["unresolved"]["v4"]) + n(&r["unresolved"]["v6"]),
        ],
    ))
}

/// The monotonic instant of a wall-clock time in the recent past.
fn instant_of(t: SystemTime) -> Instant {
    let now = Instant::now();
    match SystemTime::now().duration_since(t) {
        Ok(ago) => now.checked_sub(ago).unwrap_or(now),
        Err(e) => now + e.duration(),
    }
}

/// Run time of a thread in nanoseconds (`/proc/PID/task/TID/schedstat`).
fn run_time_ns(pid: i32, tid: i32) -> Option<u64> {
    fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

// ---------------------------------------------------------------------------------------
// The FPM tap between zebra and vfsrd
// ---------------------------------------------------------------------------------------

struct TapState {
    stop: AtomicBool,
    connections: Mutex<usize>,
    /// The stream as zebra sent it, frame by frame, until the table was complete.
    recording: Mutex<Vec<u8>>,
    recording_done: AtomicBool,
    /// (IPv4, IPv6) BGP routes that complete the table (the recording stops there).
    target: (u64, u64),
    error: Mutex<Option<String>>,
}

/// A TCP relay in the router's namespace: zebra connects to it, it connects to vfsrd and
/// forwards every byte as soon as it has it, and counts the BGP routes the FPM frames
/// announce and withdraw: samples [IPv4, IPv6, frames, bytes].
struct FpmTap {
    state: Arc<TapState>,
    thread: Option<JoinHandle<()>>,
}

impl FpmTap {
    fn start(
        full_ns: String,
        listen: u16,
        upstream: u16,
        series: &Series,
        target: (u64, u64),
    ) -> Result<FpmTap, Error> {
        let state = Arc::new(TapState {
            stop: AtomicBool::new(false),
            connections: Mutex::new(0),
            recording: Mutex::new(Vec::new()),
            recording_done: AtomicBool::new(false),
            target,
            error: Mutex::new(None),
        });
        let st = Arc::clone(&state);
        let series = series.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), Error>>();
        let thread = std::thread::Builder::new()
            .name("fpm-tap".into())
            .spawn(move || {
                let listener = enter_netns(&full_ns).and_then(|()| {
                    TcpListener::bind((Ipv4Addr::LOCALHOST, listen))
                        .and_then(|l| {
                            l.set_nonblocking(true)?;
                            Ok(l)
                        })
                        .map_err(|err| Error::TapListen { port: listen, err })
                });
                let listener = match listener {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let mut routes: HashSet<rtnl::Key> = HashSet::new();
                let mut counts = [0u64; 4];
                let mut co = Coalescer::new(Duration::from_millis(1));
                while !st.stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((zebra, _)) => {
                            *st.connections.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                            let r = relay(
                                zebra,
                                upstream,
                                &st,
                                &series,
                                &mut co,
                                &mut routes,
                                &mut counts,
                            );
                            if let Err(e) = r {
                                *st.error.lock().unwrap_or_else(|e| e.into_inner()) =
                                    Some(e.to_string());
                            }
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
            .map_err(|err| Error::Thread {
                name: "FPM tap".to_string(),
                err,
            })?;
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| Error::ProbeSilent("FPM tap"))??;
        Ok(FpmTap {
            state,
            thread: Some(thread),
        })
    }

    fn connections(&self) -> usize {
        *self
            .state
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn error(&self) -> Option<String> {
        self.state
            .error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The recorded stream, if it reached the whole table.
    fn recording(&self) -> Option<Vec<u8>> {
        if !self.state.recording_done.load(Ordering::SeqCst) {
            return None;
        }
        Some(std::mem::take(
            &mut *self
                .state
                .recording
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        ))
    }
}

impl Drop for FpmTap {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Relays one zebra connection to vfsrd until either side closes it or the tap stops.
fn relay(
    mut zebra: TcpStream,
    upstream: u16,
    st: &TapState,
    series: &Series,
    co: &mut Coalescer,
    routes: &mut HashSet<rtnl::Key>,
    counts: &mut [u64; 4],
) -> Result<(), Error> {
    let mut vfsrd =
        TcpStream::connect((Ipv4Addr::LOCALHOST, upstream)).map_err(|err| Error::TapConnect {
            port: upstream,
            err,
        })?;
    let _ = vfsrd.set_nodelay(true);
    zebra
        .set_nonblocking(false)
        .and_then(|()| zebra.set_read_timeout(Some(Duration::from_millis(50))))
        .map_err(Error::TapIo)?;
    let mut pending: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut chunk = vec![0u8; 1 << 18];
    while !st.stop.load(Ordering::Relaxed) {
        let n = match zebra.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(_) => return Ok(()),
        };
        let data = chunk.get(..n).unwrap_or(&[]);
        vfsrd.write_all(data).map_err(Error::TapWrite)?;
        pending.extend_from_slice(data);
        let mut at = 0;
        while let Some(header) = pending.get(at..at + 4) {
            let len = usize::from(u16::from_be_bytes([header[2], header[3]]));
            if header[0] != 1 || header[1] != 1 || len < 4 {
                return Err(Error::TapFrame {
                    header: [header[0], header[1], header[2], header[3]],
                    after: counts[3],
                });
            }
            let Some(frame) = pending.get(at..at + len) else {
                break;
            };
            let payload = frame.get(4..).unwrap_or(&[]);
            let _ = rtnl::bgp_routes(payload, |kind, k| {
                let i = usize::from(i32::from(k.0) != libc::AF_INET);
                let changed = if kind == rtnl::RTM_NEWROUTE {
                    routes.insert(k)
                } else {
                    routes.remove(&k)
                };
                if changed {
                    if kind == rtnl::RTM_NEWROUTE {
                        counts[i] += 1;
                    } else {
                        counts[i] = counts[i].saturating_sub(1);
                    }
                }
            });
            counts[2] += 1;
            counts[3] += len as u64;
            if !st.recording_done.load(Ordering::Relaxed) {
                st.recording
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(frame);
                if (counts[0], counts[1]) == st.target {
                    st.recording_done.store(true, Ordering::SeqCst);
                }
            }
            at += len;
        }
        pending.drain(..at);
        co.push(series, Instant::now(), *counts);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// vfsrd
// ---------------------------------------------------------------------------------------

/// vfsrd running in a namespace (through the harness), its FIB readable on demand
/// (`--fib-dump`, SIGUSR1).
struct Vfsrd {
    d: harness::Vfsrd,
    /// Its process id, which is also its control thread's.
    pid: i32,
}

impl Vfsrd {
    /// Starts vfsrd in `ns` with `config`; returns once it has said `ready`. It prints
    /// nothing (what it says is kept by the harness, and its last lines are in the error
    /// when it does not start).
    fn start(lab: &NetLab, exe: &Path, ns: &str, config: &str) -> Result<Vfsrd, Error> {
        let launch = Launch {
            echo: Echo::Quiet,
            cpus: None,
        };
        let d = harness::Vfsrd::start_with(lab, ns, exe, VFSRD_TAG, config, launch)
            .map_err(Error::StartVfsrd)?;
        let pid = d
            .pid()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or(Error::VfsrdNoPid)?;
        Ok(Vfsrd { d, pid })
    }

    fn rss(&self) -> Option<u64> {
        rss_bytes(self.pid)
    }

    /// CPU seconds of the control thread (the main thread) and of the whole process.
    fn cpu(&self) -> (f64, f64) {
        (
            cpu_seconds(&format!("/proc/{0}/task/{0}/stat", self.pid)).unwrap_or(0.0),
            cpu_seconds(&format!("/proc/{}/stat", self.pid)).unwrap_or(0.0),
        )
    }

    /// The stats file vfsrd rewrites every second.
    fn stats(&self) -> &Path {
        self.d.stats_path()
    }

    /// The FIB, from a dump asked for now: prefix → how it forwards.
    fn fib(&self, timeout: Duration) -> Result<BTreeMap<String, String>, Error> {
        let text = self.d.fib_dump(timeout).map_err(Error::FibDump)?;
        Ok(harness::fib_entries(&text))
    }

    fn stop(&mut self) {
        self.d.stop();
    }
}

/// vfsrd's config: the speaker's link as its one port, control plane on core 0, one
/// worker on core 1, the path's route source, and no control API (its default socket is
/// machine-wide; the benchmark reads the stats file and the FIB dump instead).
fn vfsrd_config(kind: PathKind) -> String {
    let source = match kind {
        PathKind::Fpm => format!("[fpm]\nlisten = \"127.0.0.1:{VFSRD_FPM_PORT}\"\n"),
        _ => "[kernel]\n".to_string(),
    };
    format!(
        "[router]\ncontrol_core = {CONTROL_CORE}\nworkers = [{OTHER_CORE}]\n\n\
         [api]\nenabled = false\n\n\
         [[interface]]\nname = \"{}\"\naddresses = [\"{}/24\", \"{}/64\"]\n\n{source}",
        VFSR_LINK.ifname, VFSR_LINK.router4, VFSR_LINK.router6
    )
}

// ---------------------------------------------------------------------------------------
// FRR and the speaker
// ---------------------------------------------------------------------------------------

/// bgpd: AS 65000, one IPv4 and one IPv6 eBGP session with the speaker on `link`, no
/// policy required, keepalives every 60 s (none during a phase), connect retry 1 s.
fn bgpd_config(link: &Link) -> String {
    let mut c = format!(
        "router bgp {ROUTER_AS}\n bgp router-id {}\n no bgp ebgp-requires-policy\n \
         no bgp network import-check\n",
        link.router4
    );
    for peer in [link.speaker4, link.speaker6] {
        c.push_str(&format!(
            " neighbor {peer} remote-as {SPEAKER_AS}\n neighbor {peer} timers 60 180\n \
             neighbor {peer} timers connect 1\n"
        ));
    }
    c.push_str(&format!(
        " address-family ipv4 unicast\n  no neighbor {} activate\n exit-address-family\n \
         address-family ipv6 unicast\n  neighbor {} activate\n exit-address-family\n",
        link.speaker6, link.speaker6
    ));
    c
}

fn start_frr(lab: &NetLab, kind: PathKind) -> Result<Frr, Error> {
    let link = kind.link();
    on_cores(&[CONTROL_CORE], || {
        Frr::start(
            lab,
            link.ns,
            FrrConfig {
                zebra: String::new(),
                bgpd: Some(bgpd_config(link)),
                staticd: None,
                fpm: (kind == PathKind::Fpm).then(|| FpmTarget::local(true)),
            },
        )
        .map_err(|err| Error::Start {
            daemon: "FRR (zebra, bgpd)",
            err,
        })
    })
}

/// The speaker, holding the whole table; its sessions are released per link.
enum Speaker {
    Bird(Bird),
    GoBgp {
        gobgp: GoBgp,
        netns: String,
        v4: Vec<Net>,
        v6: Vec<Net>,
    },
}

impl Speaker {
    /// Starts the speaker on core 1 and loads the table; how long the loading took.
    fn start(lab: &NetLab, kind: &str, work: &Workload) -> Result<(Speaker, f64), Error> {
        on_cores(&[OTHER_CORE], || match kind {
            "bird" => {
                let t0 = Instant::now();
                let bird =
                    Bird::start(lab, "sp", &bird_config(work)).map_err(|err| Error::Start {
                        daemon: "BIRD",
                        err,
                    })?;
                let s = Speaker::Bird(bird);
                s.wait_loaded(work.total())?;
                Ok((s, t0.elapsed().as_secs_f64()))
            }
            "gobgp" => {
                let neighbors = [&VFSR_LINK, &LINUX_LINK]
                    .iter()
                    .flat_map(|l| [l.router4, l.router6])
                    .map(|a| {
                        Ok(GoBgpNeighbor {
                            address: a.parse().map_err(|err| Error::Address { text: a, err })?,
                            peer_as: ROUTER_AS,
                            hold_time: 180,
                            keepalive: 60,
                        })
                    })
                    .collect::<Result<Vec<_>, Error>>()?;
                let toml = GoBgpConfig {
                    asn: SPEAKER_AS,
                    router_id: Ipv4Addr::new(10, 9, 0, 2),
                    neighbors,
                }
                .toml();
                let gobgp = GoBgp::start(lab, "sp", &toml).map_err(|err| Error::Start {
                    daemon: "gobgpd",
                    err,
                })?;
                let s = Speaker::GoBgp {
                    gobgp,
                    netns: lab.name("sp"),
                    v4: work.v4.clone(),
                    v6: work.v6.clone(),
                };
                for l in [&VFSR_LINK, &LINUX_LINK] {
                    s.hold(l)?;
                }
                let t0 = Instant::now();
                s.reload()?;
                Ok((s, t0.elapsed().as_secs_f64()))
            }
            other => Err(Error::UnknownSpeaker(other.to_string())),
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Speaker::Bird(_) => "bird",
            Speaker::GoBgp { .. } => "gobgpd",
        }
    }

    fn pid(&self) -> Option<i32> {
        match self {
            Speaker::Bird(b) => read_pid(&b.dir().join("bird.pid")),
            Speaker::GoBgp { netns, .. } => namespace_pids(netns).into_iter().find(|p| {
                fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "gobgpd")
            }),
        }
    }

    fn birdc(bird: &Bird, commands: &[String]) -> Result<(), Error> {
        for c in commands {
            bird.birdc(c).map_err(|err| Error::Speaker {
                what: format!("birdc {c}"),
                err,
            })?;
        }
        Ok(())
    }

    /// `gobgp ARGS`, its failure as [`Error::Speaker`].
    fn gobgp(gobgp: &GoBgp, args: &[&str]) -> Result<(), Error> {
        gobgp.gobgp(args).map(drop).map_err(|err| Error::Speaker {
            what: format!("gobgp {}", args.join(" ")),
            err,
        })
    }

    /// Lets the sessions on `link` come up.
    fn release(&self, link: &Link) -> Result<(), Error> {
        match self {
            Speaker::Bird(b) => Self::birdc(
                b,
                &[
                    format!("enable {}4", link.tag),
                    format!("enable {}6", link.tag),
                ],
            ),
            Speaker::GoBgp { gobgp, .. } => {
                for a in [link.router4, link.router6] {
                    Self::gobgp(gobgp, &["neighbor", a, "enable"])?;
                }
                Ok(())
            }
        }
    }

    /// Takes the sessions on `link` down and keeps them down.
    fn hold(&self, link: &Link) -> Result<(), Error> {
        match self {
            Speaker::Bird(b) => Self::birdc(
                b,
                &[
                    format!("disable {}4", link.tag),
                    format!("disable {}6", link.tag),
                ],
            ),
            Speaker::GoBgp { gobgp, .. } => {
                for a in [link.router4, link.router6] {
                    Self::gobgp(gobgp, &["neighbor", a, "disable"])?;
                }
                Ok(())
            }
        }
    }

    /// Withdraws every route.
    fn withdraw(&self) -> Result<(), Error> {
        match self {
            Speaker::Bird(b) => Self::birdc(b, &["disable s4".into(), "disable s6".into()]),
            Speaker::GoBgp { gobgp, .. } => gobgp.withdraw_all().map_err(|err| Error::Speaker {
                what: "withdrawing every route".to_string(),
                err,
            }),
        }
    }

    /// Takes the whole table back (with the sessions held).
    fn reload(&self) -> Result<(), Error> {
        match self {
            Speaker::Bird(b) => {
                Self::birdc(b, &["enable s4".into(), "enable s6".into()])?;
                self.wait_loaded(0)
            }
            Speaker::GoBgp { gobgp, v4, v6, .. } => {
                let add = |routes: &[Net], nh: IpAddr| {
                    gobgp.add_routes(routes, nh).map_err(|err| Error::Speaker {
                        what: format!("announcing {} routes via {nh}", routes.len()),
                        err,
                    })
                };
                if !v4.is_empty() {
                    add(v4, IpAddr::V4(Ipv4Addr::new(10, 9, 0, 2)))?;
                }
                if !v6.is_empty() {
                    let text = VFSR_LINK.speaker6;
                    let nh: IpAddr = text.parse().map_err(|err| Error::Address { text, err })?;
                    add(v6, nh)?;
                }
                Ok(())
            }
        }
    }

    /// For BIRD: waits until its tables hold `total` routes (0: as many as its config has).
    fn wait_loaded(&self, total: usize) -> Result<(), Error> {
        let Speaker::Bird(b) = self else {
            return Ok(());
        };
        let want = if total > 0 {
            total
        } else {
            bird_total(b, true)?
        };
        wait_until("BIRD to hold the table", Duration::from_secs(300), || {
            bird_total(b, false).is_ok_and(|n| n >= want)
        })
        .map(drop)
    }
}

/// The routes in BIRD's tables (the total of `show route count`); with `configured`, the
/// routes its config gives its static protocols (its `route` lines).
fn bird_total(b: &Bird, configured: bool) -> Result<usize, Error> {
    if configured {
        let path = b.dir().join("bird.conf");
        let text = fs::read_to_string(&path).map_err(|err| Error::File { path, err })?;
        return Ok(text
            .lines()
            .filter(|l| l.trim_start().starts_with("route "))
            .count());
    }
    let out = b.birdc("show route count").map_err(|err| Error::Speaker {
        what: "birdc show route count".to_string(),
        err,
    })?;
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Total:"))
        .or_else(|| out.lines().last())
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| Error::BirdCount(out.clone()))
}

/// BIRD's config: the table as blackhole static routes (`s4`, `s6`) and, per link, an
/// IPv4 and an IPv6 eBGP session that start disabled, export everything (next hop self)
/// and import nothing; retries every second so a released session comes up at once.
fn bird_config(work: &Workload) -> String {
    let mut c = String::with_capacity(work.total() * 34 + 4096);
    c.push_str(&format!(
        "router id {};\nlog stderr {{ warning, error, fatal, bug }};\nprotocol device {{}}\n",
        VFSR_LINK.speaker4
    ));
    for (name, family, routes) in [("s4", "ipv4", &work.v4), ("s6", "ipv6", &work.v6)] {
        c.push_str(&format!("protocol static {name} {{\n  {family};\n"));
        for r in routes.iter() {
            c.push_str(&format!("  route {r} blackhole;\n"));
        }
        c.push_str("}\n");
    }
    for link in [&VFSR_LINK, &LINUX_LINK] {
        for (family, local, peer) in [
            ("ipv4", link.speaker4, link.router4),
            ("ipv6", link.speaker6, link.router6),
        ] {
            let n = &family[3..];
            c.push_str(&format!(
                "protocol bgp {}{n} {{\n  disabled;\n  local {local} as {SPEAKER_AS};\n  \
                 neighbor {peer} as {ROUTER_AS};\n  hold time 180;\n  keepalive time 60;\n  \
                 connect delay time 1;\n  connect retry time 1;\n  error wait time 1, 5;\n  \
                 {family} {{ import none; export all; }};\n}}\n",
                link.tag
            ));
        }
    }
    c
}

// ---------------------------------------------------------------------------------------
// One path
// ---------------------------------------------------------------------------------------

/// A stage's first and last change, in seconds from the phase's origin.
#[derive(Clone, Debug)]
struct Stage {
    name: &'static str,
    first: Option<f64>,
    all: Option<f64>,
}

/// vfsr's completion in a phase.
#[derive(Clone, Copy, Debug)]
struct VfsrEnd {
    /// The estimate (see the module doc), seconds from the phase's origin.
    at: f64,
    /// The stats file's write that first showed it.
    stats: f64,
    /// `at` minus the source's completion (zebra's FPM stream or the kernel).
    after_source: Option<f64>,
}

#[derive(Clone, Debug)]
struct Phase {
    stages: Vec<Stage>,
    /// The path's time: until vfsr (or, for `kernel`, the kernel) held the whole table, or
    /// none of it.
    end: f64,
    vfsr: Option<VfsrEnd>,
    /// CPU seconds per process over the phase.
    cpu: Vec<(String, f64)>,
}

struct PathResult {
    kind: PathKind,
    routes: usize,
    /// Seconds between the two sessions' `Established`.
    session_gap: f64,
    converge: Phase,
    withdraw: Phase,
    /// vfsrd's resident growth over the load, bytes.
    vfsrd_rss_growth: Option<i64>,
    /// Growth of SUnreclaim, the FIB's vmalloc areas, Percpu and Slab over the load, bytes.
    kernel_growth: [i64; 4],
    /// Problems found by the complete-set checks (empty: all good).
    problems: Vec<String>,
    /// BGP routes left in the kernel and learned routes left in vfsr after the withdrawal.
    left_behind: (usize, Option<usize>),
    /// Overruns of the kernel probe's netlink socket.
    overruns: u64,
    /// vfsrd's `routing` section at the end of the load.
    vfsrd_routing: Option<Value>,
}

/// Everything the paths share.
struct Bench<'a> {
    lab: &'a NetLab,
    work: &'a Workload,
    speaker: &'a Speaker,
    vfsrd_exe: Option<&'a Path>,
    timeout: Duration,
}

/// The stream zebra sent in the `fpm` path and the router it addresses.
struct Recorded {
    stream: Vec<u8>,
    setup: IntakeSetup,
    vfsrd_rss_growth: Option<i64>,
}

fn secs_from(t: Instant, origin: Instant) -> f64 {
    if t >= origin {
        t.duration_since(origin).as_secs_f64()
    } else {
        -origin.duration_since(t).as_secs_f64()
    }
}

/// CPU seconds of the processes taking part.
fn cpu_snapshot(speaker: &Speaker, frr: &Frr, vfsrd: Option<&Vfsrd>) -> Vec<(String, f64)> {
    let mut v = Vec::new();
    let proc_cpu = |pid: Option<i32>| pid.and_then(|p| cpu_seconds(&format!("/proc/{p}/stat")));
    if let Some(c) = proc_cpu(speaker.pid()) {
        v.push((speaker.name().to_string(), c));
    }
    for d in ["bgpd", "zebra"] {
        if let Some(c) = proc_cpu(read_pid(&frr.dir().join(format!("{d}.pid")))) {
            v.push((d.to_string(), c));
        }
    }
    if let Some(d) = vfsrd {
        let (control, all) = d.cpu();
        v.push(("vfsrd control".into(), control));
        v.push(("vfsrd others".into(), all - control));
    }
    if let Some(c) = cpu_seconds("/proc/self/stat") {
        v.push(("vfsr (probes)".into(), c));
    }
    v
}

fn cpu_diff(after: &[(String, f64)], before: &[(String, f64)]) -> Vec<(String, f64)> {
    after
        .iter()
        .map(|(k, a)| {
            let b = before.iter().find(|(n, _)| n == k).map_or(0.0, |x| x.1);
            // Clock ticks: a thread's and its process's counts round apart.
            (k.clone(), (a - b).max(0.0))
        })
        .collect()
}

/// The probes of one path.
struct Probes {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    bgpd: Series,
    zebra: Series,
    kernel: Series,
    tap: Series,
    stats: Series,
    /// The source's routes in vfsrd before the session came up (zebra's FPM stream also
    /// carries its connected routes), taken off what the stats probe records.
    stats_base: Arc<Mutex<[u64; 2]>>,
    activity: Series,
}

impl Probes {
    fn start(
        lab: &NetLab,
        kind: PathKind,
        frr: &Frr,
        vfsrd: Option<&Vfsrd>,
        tap: Series,
    ) -> Result<Probes, Error> {
        let link = kind.link();
        let mut p = Probes {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            bgpd: Series::default(),
            zebra: Series::default(),
            kernel: Series::default(),
            tap,
            stats: Series::default(),
            stats_base: Arc::default(),
            activity: Series::default(),
        };
        let mut vty = Vty::connect(frr, "bgpd")?;
        p.threads.push(poll_probe(
            "bgpd-probe",
            Duration::from_millis(20),
            &p.stop,
            &p.bgpd,
            false,
            move || bgpd_sample(&mut vty, link),
        )?);
        let mut vty = Vty::connect(frr, "zebra")?;
        p.threads.push(poll_probe(
            "zebra-probe",
            Duration::from_millis(50),
            &p.stop,
            &p.zebra,
            false,
            move || zebra_sample(&mut vty),
        )?);
        p.threads
            .push(kernel_probe(lab.name(link.ns), &p.stop, &p.kernel)?);
        if let Some(d) = vfsrd {
            let (path, source) = (d.stats().to_path_buf(), kind.vfsr_source());
            let (stop, series) = (Arc::clone(&p.stop), p.stats.clone());
            let base = Arc::clone(&p.stats_base);
            p.threads.push(
                std::thread::Builder::new()
                    .name("stats-probe".into())
                    .spawn(move || {
                        let mut last = None;
                        while !stop.load(Ordering::Relaxed) {
                            if let Some((mtime, v)) = stats_sample(&path, source) {
                                if last != Some(mtime) {
                                    last = Some(mtime);
                                    let [b4, b6] = *base.lock().unwrap_or_else(|e| e.into_inner());
                                    let v = [
                                        v[0].saturating_sub(b4),
                                        v[1].saturating_sub(b6),
                                        v[2],
                                        v[3],
                                    ];
                                    series.push(instant_of(mtime), v);
                                }
                            }
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    })
                    .map_err(|err| Error::Thread {
                        name: "stats probe".to_string(),
                        err,
                    })?,
            );
            let pid = d.pid;
            p.threads.push(poll_probe(
                "activity-probe",
                Duration::from_millis(2),
                &p.stop,
                &p.activity,
                true,
                move || run_time_ns(pid, pid).map(|r| [r, 0, 0, 0]),
            )?);
        }
        Ok(p)
    }

    /// Takes the source's routes that vfsrd holds now, once two consecutive writes of its
    /// stats file agree, as the baseline of the counts that follow.
    fn settle_stats_base(&self) -> Result<(), Error> {
        let seen = self.stats.samples().len();
        let what = "vfsrd's route counts to settle";
        let after = Duration::from_secs(20);
        let stable = daemons::wait_for(what, after, || {
            let s = self.stats.samples();
            let fresh = s.get(seen..)?;
            let (a, b) = (fresh.len().checked_sub(2)?, fresh.len() - 1);
            let (x, y) = (fresh.get(a)?.1, fresh.get(b)?.1);
            (x == y).then_some([x[0], x[1]])
        })
        .map_err(|_| Error::Timeout { what, after })?;
        *self.stats_base.lock().unwrap_or_else(|e| e.into_inner()) = stable;
        Ok(())
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// The last values of every probe, for an error message.
    fn describe(&self) -> String {
        let f = |s: &Series| s.last().map_or("-".to_string(), |v| format!("{v:?}"));
        format!(
            "bgpd [est4, est6, pfx4, pfx6] {}, zebra [add4, del4, add6, del6] {}, kernel \
             [v4, v6, overruns] {}, FPM tap [v4, v6, frames, bytes] {}, vfsrd stats [rib4, \
             rib6, fib, unresolved] {}",
            f(&self.bgpd),
            f(&self.zebra),
            f(&self.kernel),
            f(&self.tap),
            f(&self.stats)
        )
    }
}

impl Drop for Probes {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether every stage of the path holds the whole table (`load`) or none of it.
fn stages_done(p: &Probes, kind: PathKind, n: (u64, u64), load: bool) -> bool {
    let (n4, n6) = n;
    let want = if load { (n4, n6) } else { (0, 0) };
    let bgpd = p.bgpd.last().is_some_and(|v| (v[2], v[3]) == want);
    let zebra = p.zebra.last().is_some_and(|v| {
        if load {
            v[0] >= n4 && v[2] >= n6
        } else {
            v[1] >= n4 && v[3] >= n6
        }
    });
    let kernel = p.kernel.last().is_some_and(|v| (v[0], v[1]) == want);
    let tap = kind != PathKind::Fpm || p.tap.last().is_some_and(|v| (v[0], v[1]) == want);
    let vfsr = !kind.uses_vfsrd()
        || p.stats
            .last()
            .is_some_and(|v| (v[0], v[1]) == want && v[3] == 0);
    bgpd && zebra && kernel && tap && vfsr
}

/// vfsr's completion: the stats write that first showed `done` bounds it; within the
/// second before, the end of the control thread's last busy interval after `lower` (the
/// source's completion, or the previous write if later), or `lower` itself.
fn vfsr_end(
    p: &Probes,
    from: Instant,
    source_done: Option<Instant>,
    done: impl Fn(&[u64; 4]) -> bool,
) -> Option<(Instant, Instant)> {
    let writes = p.stats.samples();
    let idx = writes.iter().position(|(t, v)| *t >= from && done(v))?;
    let t_c = writes.get(idx)?.0;
    let prev = idx
        .checked_sub(1)
        .and_then(|i| writes.get(i))
        .map_or(from, |w| w.0.max(from));
    let lower = source_done.map_or(prev, |s| s.max(prev)).min(t_c);
    let near_write = |a: Instant, b: Instant| {
        writes.iter().any(|(w, _)| {
            let w = *w;
            w + Duration::from_millis(1) >= a && w <= b + Duration::from_millis(3)
        })
    };
    let act = p.activity.samples();
    let busy_end = act.windows(2).rev().find_map(|w| {
        let (a, b) = (w.first()?, w.get(1)?);
        let busy = b.1[0].saturating_sub(a.1[0]) >= BUSY_NS;
        (busy && a.0 >= lower && b.0 <= t_c && !near_write(a.0, b.0)).then_some(b.0)
    });
    Some((busy_end.unwrap_or(lower).max(lower), t_c))
}

/// The stages of a phase from its probes; `load` tells the load from the withdrawal.
fn phase_stages(
    p: &Probes,
    kind: PathKind,
    n: (u64, u64),
    from: Instant,
    origin: Instant,
    load: bool,
) -> (Vec<Stage>, Option<VfsrEnd>, Option<Instant>) {
    let (n4, n6) = n;
    let total = n4 + n6;
    let t = |x: Option<Instant>| x.map(|x| secs_from(x, origin));
    let count_stage = |name, s: &Series, i: usize, j: usize| {
        let (first, all) = if load {
            (
                s.first(from, |v| v[i] + v[j] > 0),
                s.first(from, |v| v[i] == n4 && v[j] == n6),
            )
        } else {
            (
                s.first(from, |v| v[i] + v[j] < total),
                s.first(from, |v| v[i] + v[j] == 0),
            )
        };
        Stage {
            name,
            first: t(first),
            all: t(all),
        }
    };
    let mut stages = vec![count_stage("bgpd has the routes (pfxRcd)", &p.bgpd, 2, 3)];
    let (zfirst, zall) = if load {
        (
            p.zebra.first(from, |v| v[0] + v[2] > 0),
            p.zebra.first(from, |v| v[0] >= n4 && v[2] >= n6),
        )
    } else {
        (
            p.zebra.first(from, |v| v[1] + v[3] > 0),
            p.zebra.first(from, |v| v[1] >= n4 && v[3] >= n6),
        )
    };
    stages.push(Stage {
        name: "zebra has them from bgpd",
        first: t(zfirst),
        all: t(zall),
    });
    stages.push(count_stage("kernel FIB (proto bgp)", &p.kernel, 0, 1));
    let kernel_all = if load {
        p.kernel.first(from, |v| v[0] == n4 && v[1] == n6)
    } else {
        p.kernel.first(from, |v| v[0] + v[1] == 0)
    };
    let mut source_done = kernel_all;
    if kind == PathKind::Fpm {
        stages.push(count_stage("zebra's FPM stream", &p.tap, 0, 1));
        source_done = if load {
            p.tap.first(from, |v| v[0] == n4 && v[1] == n6)
        } else {
            p.tap.first(from, |v| v[0] + v[1] == 0)
        };
    }
    let mut vfsr = None;
    if kind.uses_vfsrd() {
        let mut stage = count_stage("vfsr RIB/FIB (stats file)", &p.stats, 0, 1);
        let end = if load {
            vfsr_end(p, from, source_done, |v| {
                v[0] == n4 && v[1] == n6 && v[3] == 0
            })
        } else {
            vfsr_end(p, from, source_done, |v| v[0] + v[1] == 0)
        };
        if let Some((at, stats)) = end {
            vfsr = Some(VfsrEnd {
                at: secs_from(at, origin),
                stats: secs_from(stats, origin),
                after_source: source_done.map(|s| secs_from(at, s)),
            });
            stage.all = Some(secs_from(at, origin));
            // The stats file bounds the first change from above, to the second.
            stage.first = stage.first.map(|f| f.min(secs_from(at, origin)));
        }
        stages.push(stage);
    }
    (stages, vfsr, source_done)
}

fn run_path(b: &Bench, kind: PathKind) -> Result<(PathResult, Option<Recorded>), Error> {
    let link = kind.link();
    let (n4, n6) = (b.work.v4.len() as u64, b.work.v6.len() as u64);
    let n = (n4, n6);
    let mut vfsrd = match (kind.uses_vfsrd(), b.vfsrd_exe) {
        // vfsrd checks its config against the cores it may use, and pins its threads.
        (true, Some(exe)) => Some(on_cores(&[CONTROL_CORE, OTHER_CORE], || {
            Vfsrd::start(b.lab, exe, link.ns, &vfsrd_config(kind))
        })?),
        (true, None) => return Err(Error::NoVfsrd),
        (false, _) => None,
    };
    let tap_series = Series::default();
    let tap = match kind {
        PathKind::Fpm => Some(FpmTap::start(
            b.lab.name(link.ns),
            TAP_PORT,
            VFSRD_FPM_PORT,
            &tap_series,
            n,
        )?),
        _ => None,
    };
    let mut frr = start_frr(b.lab, kind)?;
    let mut setup = None;
    if let Some(t) = &tap {
        wait_until("zebra's FPM connection", Duration::from_secs(30), || {
            t.connections() > 0
        })?;
        // zebra's first replay (its connected routes) goes by before the session comes up.
        std::thread::sleep(Duration::from_secs(1));
        let ifs = [
            VFSR_LINK.ifname.to_string(),
            format!("v{}", VFSR_LINK.ifname),
        ];
        let mut interfaces = Vec::new();
        for i in &ifs {
            interfaces.push((
                daemons::ifindex(b.lab, link.ns, i).map_err(Error::Ifindex)?,
                1,
            ));
        }
        let a4: Ipv4Addr = link.router4.parse().map_err(|err| Error::Address {
            text: link.router4,
            err,
        })?;
        let a6: Ipv6Addr = link.router6.parse().map_err(|err| Error::Address {
            text: link.router6,
            err,
        })?;
        setup = Some(IntakeSetup {
            ports: vec![PortSpec::new(1, MacAddr([2, 0, 0, 0, 0, 1]))
                .v4(a4, 24)
                .v6(a6, 64)],
            interfaces,
        });
    }
    let mut probes = Probes::start(b.lab, kind, &frr, vfsrd.as_ref(), tap_series)?;
    std::thread::sleep(Duration::from_millis(1200));
    if vfsrd.is_some() {
        probes.settle_stats_base()?;
    }
    let rss0 = vfsrd.as_ref().and_then(Vfsrd::rss);
    let mem0 = kernel_memory();
    let cpu0 = cpu_snapshot(b.speaker, &frr, vfsrd.as_ref());

    // The load, from the first session's Established.
    let released = Instant::now();
    b.speaker.release(link)?;
    wait_until("a BGP session to come up", Duration::from_secs(120), || {
        probes.bgpd.last().is_some_and(|v| v[0] + v[1] > 0)
    })?;
    let est4 = probes.bgpd.first(released, |v| v[0] > 0);
    let est6 = probes.bgpd.first(released, |v| v[1] > 0);
    let t_est = match (est4, est6) {
        (Some(a), Some(c)) => a.min(c),
        (a, c) => a.or(c).unwrap_or(released),
    };
    let stalled = |what| Error::Stalled {
        path: kind.name(),
        what,
        after: b.timeout,
        probes: probes.describe(),
    };
    let converged = daemons::wait_until("the path to converge", b.timeout, || {
        stages_done(&probes, kind, n, true)
    });
    if converged.is_err() {
        return Err(stalled("the path to converge"));
    }
    let cpu1 = cpu_snapshot(b.speaker, &frr, vfsrd.as_ref());
    std::thread::sleep(Duration::from_secs(1));
    let mem1 = kernel_memory();
    let rss1 = vfsrd.as_ref().and_then(Vfsrd::rss);
    let (mut stages, vfsr, _) = phase_stages(&probes, kind, n, released, t_est, true);
    let kernel_all = stages
        .iter()
        .find(|s| s.name.starts_with("kernel"))
        .and_then(|s| s.all);
    let end = vfsr.map(|v| v.at).or(kernel_all).unwrap_or(f64::NAN);
    stages.retain(|s| s.first.is_some() || s.all.is_some());
    let converge = Phase {
        stages,
        end,
        vfsr,
        cpu: cpu_diff(&cpu1, &cpu0),
    };

    // The complete sets.
    let mut problems = Vec::new();
    let want = b.work.keys();
    let kernel_set = b
        .lab
        .in_ns(link.ns, rtnl::dump_bgp_routes)
        .map_err(|e| Error::Topology(e.into()))??;
    compare_sets("kernel", &kernel_set, &want, &mut problems);
    let mut vfsrd_routing = None;
    if let Some(d) = &vfsrd {
        let fib = d.fib(Duration::from_secs(120))?;
        let learned = learned_routes(&fib, &mut problems);
        compare_sets("vfsr", &learned, &want, &mut problems);
        vfsrd_routing = stats_routing(d.stats());
    }

    // The withdrawal, from the speaker's command.
    let cpu2 = cpu_snapshot(b.speaker, &frr, vfsrd.as_ref());
    let t_wd = Instant::now();
    b.speaker.withdraw()?;
    let withdrawn = daemons::wait_until("the path to withdraw", b.timeout, || {
        stages_done(&probes, kind, n, false)
    });
    if withdrawn.is_err() {
        return Err(stalled("the path to withdraw"));
    }
    let cpu3 = cpu_snapshot(b.speaker, &frr, vfsrd.as_ref());
    std::thread::sleep(Duration::from_millis(1200));
    probes.stop();
    let (mut wstages, wvfsr, _) = phase_stages(&probes, kind, n, t_wd, t_wd, false);
    let kernel_none = wstages
        .iter()
        .find(|s| s.name.starts_with("kernel"))
        .and_then(|s| s.all);
    wstages.retain(|s| s.first.is_some() || s.all.is_some());
    let withdraw = Phase {
        stages: wstages,
        end: wvfsr.map(|v| v.at).or(kernel_none).unwrap_or(f64::NAN),
        vfsr: wvfsr,
        cpu: cpu_diff(&cpu3, &cpu2),
    };
    let kernel_left = b
        .lab
        .in_ns(link.ns, rtnl::dump_bgp_routes)
        .map_err(|e| Error::Topology(e.into()))??
        .len();
    let vfsr_left = match &vfsrd {
        Some(d) => Some(learned_routes(&d.fib(Duration::from_secs(60))?, &mut problems).len()),
        None => None,
    };
    let overruns = probes.kernel.last().map_or(0, |v| v[2]);
    let session_gap = match (est4, est6) {
        (Some(a), Some(c)) => secs_from(a.max(c), a.min(c)),
        _ => 0.0,
    };

    // Tear down: the speaker's sessions held for the next path, FRR and vfsrd stopped.
    b.speaker.hold(link)?;
    frr.stop();
    if let Some(d) = vfsrd.as_mut() {
        d.stop();
    }
    let rss_growth = match (rss0, rss1) {
        (Some(a), Some(c)) => Some(c as i64 - a as i64),
        _ => None,
    };
    let recorded = match (tap.as_ref().and_then(FpmTap::recording), setup) {
        (Some(stream), Some(setup)) => Some(Recorded {
            stream,
            setup,
            vfsrd_rss_growth: rss_growth,
        }),
        _ => None,
    };
    if let Some(e) = tap.as_ref().and_then(FpmTap::error) {
        problems.push(e);
    }
    let result = PathResult {
        kind,
        routes: b.work.total(),
        session_gap,
        converge,
        withdraw,
        vfsrd_rss_growth: rss_growth,
        kernel_growth: [0, 1, 2, 3].map(|i| mem1[i] as i64 - mem0[i] as i64),
        problems,
        left_behind: (kernel_left, vfsr_left),
        overruns,
        vfsrd_routing,
    };
    Ok((result, recorded))
}

/// vfsr's learned routes in a FIB dump (the ports' connected subnets left out).
fn learned_routes(
    fib: &BTreeMap<String, String>,
    problems: &mut Vec<String>,
) -> HashSet<rtnl::Key> {
    let mut out = HashSet::new();
    for (prefix, how) in fib {
        if how.starts_with("connected") {
            continue;
        }
        match prefix.parse::<Net>() {
            Ok(net) => {
                out.insert(key_of(&net));
            }
            Err(e) => problems.push(format!("vfsr's FIB dump: {e}")),
        }
    }
    out
}

fn compare_sets(
    what: &str,
    have: &HashSet<rtnl::Key>,
    want: &HashSet<rtnl::Key>,
    problems: &mut Vec<String>,
) {
    let missing: Vec<&rtnl::Key> = want.difference(have).collect();
    let extra: Vec<&rtnl::Key> = have.difference(want).collect();
    if !missing.is_empty() || !extra.is_empty() {
        let show = |v: &[&rtnl::Key]| -> String {
            v.iter()
                .take(3)
                .map(|k| key_text(k))
                .collect::<Vec<_>>()
                .join(", ")
        };
        problems.push(format!(
            "{what}: {} missing ({}), {} not announced ({})",
            missing.len(),
            show(&missing),
            extra.len(),
            show(&extra)
        ));
    }
}

fn stats_routing(path: &Path) -> Option<Value> {
    let v: Value = serde_json::from_str(&fs::read_to_string(path).ok()?).ok()?;
    let mut r = v.get("routing")?.clone();
    if let Some(o) = r.as_object_mut() {
        o.insert("punts_limited".into(), v["punts_limited"].clone());
    }
    Some(r)
}

// ---------------------------------------------------------------------------------------
// The run and its report
// ---------------------------------------------------------------------------------------

fn build_lab() -> Result<NetLab, Error> {
    build_lab_steps().map_err(Error::Topology)
}

/// The namespaces, links and addresses of the lab.
fn build_lab_steps() -> Result<NetLab, daemons::Error> {
    let mut lab = NetLab::new("cp");
    for ns in ["sp", "rt", "lx"] {
        daemons::add_ns_without_dad(&mut lab, ns)?;
    }
    for link in [&VFSR_LINK, &LINUX_LINK] {
        lab.veth(link.ns, link.ifname, "sp", link.speaker_if)?;
        lab.ip(
            "sp",
            &[
                "addr",
                "add",
                &format!("{}/24", link.speaker4),
                "dev",
                link.speaker_if,
            ],
        )?;
        lab.ip(
            "sp",
            &[
                "addr",
                "add",
                &format!("{}/64", link.speaker6),
                "dev",
                link.speaker_if,
                "nodad",
            ],
        )?;
    }
    let l = &LINUX_LINK;
    lab.ip(
        l.ns,
        &["addr", "add", &format!("{}/24", l.router4), "dev", l.ifname],
    )?;
    lab.ip(
        l.ns,
        &[
            "addr",
            "add",
            &format!("{}/64", l.router6),
            "dev",
            l.ifname,
            "nodad",
        ],
    )?;
    Ok(lab)
}

fn opt(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.3}"))
}

fn print_phase(title: &str, p: &Phase) {
    println!("  {title:<44} {:>9} {:>9} {:>9}", "first", "all", "adds");
    let mut prev: Option<f64> = None;
    for s in &p.stages {
        let adds = match (s.all, prev) {
            (Some(a), Some(b)) => Some(a - b),
            (Some(a), None) => Some(a),
            _ => None,
        };
        println!(
            "    {:<42} {:>9} {:>9} {:>9}",
            s.name,
            opt(s.first),
            opt(s.all),
            opt(adds)
        );
        if s.all.is_some() {
            prev = s.all;
        }
    }
    if let Some(v) = &p.vfsr {
        println!(
            "    (vfsr: stats file showed it at {:.3} s; done {} s after its source)",
            v.stats,
            opt(v.after_source)
        );
    }
    let cpu: Vec<String> = p.cpu.iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
    println!("    CPU seconds: {}", cpu.join(", "));
}

fn print_path(r: &PathResult) {
    println!(
        "\n== {}: {} routes; the IPv4 and IPv6 sessions came up {:.3} s apart",
        r.kind.name(),
        r.routes,
        r.session_gap
    );
    print_phase("load, seconds from Established", &r.converge);
    print_phase(
        "withdrawal, seconds from the speaker's command",
        &r.withdraw,
    );
    let per = |b: i64| b as f64 / r.routes.max(1) as f64;
    if let Some(g) = r.vfsrd_rss_growth {
        println!(
            "  vfsrd resident growth: {:.1} MB, {:.0} bytes per route",
            g as f64 / 1e6,
            per(g)
        );
    }
    let [su, vm, pc, slab] = r.kernel_growth;
    println!(
        "  kernel growth: SUnreclaim {:.1} MB, FIB vmalloc {:.1} MB, Percpu {:.1} MB (Slab {:.1} \
         MB): {:.0} bytes per route",
        su as f64 / 1e6,
        vm as f64 / 1e6,
        pc as f64 / 1e6,
        slab as f64 / 1e6,
        per(su + vm + pc)
    );
    if r.overruns > 0 {
        println!(
            "  kernel probe: {} netlink overrun(s), counted again from dumps",
            r.overruns
        );
    }
    if r.problems.is_empty() {
        println!(
            "  checked: the complete set in the kernel{}; after the withdrawal {} BGP route(s) \
             left in the kernel{}",
            if r.kind.uses_vfsrd() {
                " and in vfsr's FIB"
            } else {
                ""
            },
            r.left_behind.0,
            r.left_behind
                .1
                .map_or(String::new(), |n| format!(", {n} in vfsr"))
        );
    } else {
        for p in &r.problems {
            println!("  PROBLEM: {p}");
        }
    }
}

fn phase_json(p: &Phase) -> Value {
    let mut stages = Map::new();
    for s in &p.stages {
        stages.insert(s.name.into(), json!({"first_s": s.first, "all_s": s.all}));
    }
    let cpu: Map<String, Value> = p.cpu.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    json!({
        "stages": stages,
        "vfsr": p.vfsr.map(|v| json!({"at_s": v.at, "stats_file_s": v.stats,
            "after_source_s": v.after_source})),
        "cpu_s": cpu,
    })
}

/// Intake figures from the recorded stream.
struct Intake {
    routes: usize,
    stream_bytes: usize,
    rates: Vec<f64>,
    tails: Vec<f64>,
    replay_bytes: Vec<f64>,
}

fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn intake(rec: &Recorded, passes: usize, expected_min: usize) -> Result<Intake, Error> {
    // The writer thread runs on core 0; `replay` pins the reading side to core 1.
    set_affinity(&[CONTROL_CORE])?;
    let r = (|| {
        let warm = fpmbench::replay(
            &rec.stream,
            Expect::Quiet(Duration::from_millis(500)),
            OTHER_CORE,
            None,
            &rec.setup,
        )
        .map_err(Error::Replay)?;
        if warm.routes < expected_min {
            return Err(Error::ShortRecording {
                routes: warm.routes,
                announced: expected_min,
            });
        }
        let mut out = Intake {
            routes: warm.routes,
            stream_bytes: rec.stream.len(),
            rates: Vec::new(),
            tails: Vec::new(),
            replay_bytes: Vec::new(),
        };
        for _ in 0..passes {
            let p = fpmbench::replay(
                &rec.stream,
                Expect::Prefixes(warm.routes),
                OTHER_CORE,
                None,
                &rec.setup,
            )
            .map_err(Error::Replay)?;
            out.rates.push(p.routes_per_s);
            out.tails.push(p.tail_s);
            out.replay_bytes.push(p.bytes_per_route);
        }
        Ok(out)
    })();
    set_affinity(&[OTHER_CORE])?;
    r
}

/// `vfsr cp bench`: runs the benchmark; an error as the text `vfsr` prints.
pub(crate) fn run(a: &CpBenchArgs) -> Result<(), Error> {
    let kinds = a
        .paths
        .iter()
        .map(|p| PathKind::parse(p))
        .collect::<Result<Vec<_>, _>>()?;
    if kinds.is_empty() {
        return Err(Error::NoPaths);
    }
    netlab::available().map_err(Error::NoNamespaces)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        return Err(Error::TooFewCores);
    }
    let mut programs = vec![daemons::ZEBRA, daemons::BGPD, daemons::VTYSH];
    if kinds.contains(&PathKind::Fpm) {
        programs.push(daemons::FPM_MODULE);
    }
    match a.speaker.as_str() {
        "bird" => programs.extend(daemons::BIRD_PROGRAMS),
        "gobgp" => programs.extend(daemons::GOBGP_PROGRAMS),
        other => return Err(Error::UnknownSpeaker(other.to_string())),
    }
    if let Some(p) = programs.iter().find(|p| !daemons::program_exists(p)) {
        return Err(Error::NotInstalled(p.to_string()));
    }
    let vfsrd_exe = match &a.vfsrd {
        Some(p) => Some(p.clone()),
        None => std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("vfsrd"))),
    }
    .filter(|p| p.is_file());
    if vfsrd_exe.is_none() && kinds.iter().any(|k| k.uses_vfsrd()) {
        return Err(Error::NoVfsrd);
    }
    let work = Workload::load(a)?;
    let cpu = crate::machine::cpu_model();
    println!(
        "vfsr cp bench: {}: {} IPv4 + {} IPv6 prefixes; FRR and vfsrd's control plane on \
         core {CONTROL_CORE}, the speaker ({}), vfsrd's worker and the probes on core \
         {OTHER_CORE}; {cpu}",
        work.what,
        work.v4.len(),
        work.v6.len(),
        a.speaker
    );
    clean_up_on_signal();
    set_affinity(&[OTHER_CORE])?;
    let lab = build_lab()?;
    let (speaker, load_s) = Speaker::start(&lab, &a.speaker, &work)?;
    println!(
        "speaker: {} holds the table after {load_s:.2} s",
        speaker.name()
    );
    let bench = Bench {
        lab: &lab,
        work: &work,
        speaker: &speaker,
        vfsrd_exe: vfsrd_exe.as_deref(),
        timeout: Duration::from_secs(a.timeout_s.max(1)),
    };
    let mut results = Vec::new();
    let mut recorded = None;
    for (i, k) in kinds.iter().enumerate() {
        if i > 0 {
            speaker.reload()?;
        }
        let (r, rec) = run_path(&bench, *k)?;
        print_path(&r);
        results.push(r);
        if rec.is_some() {
            recorded = rec;
        }
    }
    drop(speaker);
    let intake = match &recorded {
        Some(rec) if a.intake_passes > 0 => Some(intake(rec, a.intake_passes, work.total())?),
        _ => None,
    };
    report(
        a,
        &cpu,
        &work,
        load_s,
        &results,
        intake.as_ref(),
        recorded.as_ref(),
    )
}

fn report(
    a: &CpBenchArgs,
    cpu: &str,
    work: &Workload,
    load_s: f64,
    results: &[PathResult],
    intake: Option<&Intake>,
    recorded: Option<&Recorded>,
) -> Result<(), Error> {
    println!("\n| path | routes | converge s | withdraw s | routes/s | vfsr after its source, load / withdrawal s |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for r in results {
        let after = |p: &Phase| opt(p.vfsr.and_then(|v| v.after_source));
        println!(
            "| {} | {} | {:.3} | {:.3} | {:.0} | {} |",
            r.kind.name(),
            r.routes,
            r.converge.end,
            r.withdraw.end,
            r.routes as f64 / r.converge.end,
            if r.kind.uses_vfsrd() {
                format!("{} / {}", after(&r.converge), after(&r.withdraw))
            } else {
                "-".into()
            }
        );
    }
    let routes = work.total().max(1) as f64;
    let vfsrd_bpr = recorded
        .and_then(|r| r.vfsrd_rss_growth)
        .map(|g| g as f64 / routes);
    let kernel_bpr = results
        .iter()
        .find(|r| r.kind == PathKind::Kernel)
        .map(|r| (r.kernel_growth[0] + r.kernel_growth[1] + r.kernel_growth[2]) as f64 / routes);
    if let Some(i) = intake {
        let (lo, hi) = i
            .rates
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
        println!(
            "\nintake: zebra's recorded FPM stream ({} bytes, {} prefixes) replayed into \
             vfsrd's FPM listener and control-plane work, {} passes: {:.2} M routes/s \
             (median; {:.2}-{:.2}), last route published {:.3} s after the last byte, {:.0} \
             resident bytes per route",
            i.stream_bytes,
            i.routes,
            i.rates.len(),
            median(&i.rates) / 1e6,
            lo / 1e6,
            hi / 1e6,
            median(&i.tails),
            median(&i.replay_bytes)
        );
    }
    println!(
        "memory per route: vfsrd {} bytes (resident growth over the fpm load), kernel {} bytes \
         (SUnreclaim + FIB vmalloc + Percpu growth over the kernel load)",
        vfsrd_bpr.map_or("-".into(), |b| format!("{b:.0}")),
        kernel_bpr.map_or("-".into(), |b| format!("{b:.0}"))
    );
    let targets = targets(results, intake, vfsrd_bpr, kernel_bpr);
    println!("targets:");
    for (name, text, _) in &targets {
        println!("  {name}: {text}");
    }
    if let Some(path) = &a.json {
        let res: Vec<Value> = results
            .iter()
            .map(|r| {
                json!({
                    "path": r.kind.name(),
                    "routes": r.routes,
                    "converge_s": r.converge.end,
                    "withdraw_s": r.withdraw.end,
                    "routes_per_s": r.routes as f64 / r.converge.end,
                    "withdraw_routes_per_s": r.routes as f64 / r.withdraw.end,
                    "session_gap_s": r.session_gap,
                    "load": phase_json(&r.converge),
                    "withdrawal": phase_json(&r.withdraw),
                    "vfsrd_rss_growth_bytes": r.vfsrd_rss_growth,
                    "kernel_growth_bytes": {"SUnreclaim": r.kernel_growth[0],
                        "vmalloc_fib": r.kernel_growth[1], "Percpu": r.kernel_growth[2],
                        "Slab": r.kernel_growth[3]},
                    "kernel_probe_overruns": r.overruns,
                    "problems": r.problems,
                    "left_behind": {"kernel": r.left_behind.0, "vfsr": r.left_behind.1},
                    "vfsrd_routing": r.vfsrd_routing,
                    "zebra_installs_in_kernel_too": r.kind == PathKind::Fpm,
                })
            })
            .collect();
        let intake_json = intake.map(|i| {
            json!({
                "routes_per_s": median(&i.rates),
                "bytes_per_route": vfsrd_bpr,
                "replay_bytes_per_route": median(&i.replay_bytes),
                "tail_s": median(&i.tails),
                "passes": i.rates.len(),
                "routes_per_s_all": i.rates,
                "prefixes": i.routes,
                "stream_bytes": i.stream_bytes,
            })
        });
        let t: Map<String, Value> = targets
            .iter()
            .map(|(n, text, met)| (n.to_string(), json!({"met": met, "detail": text})))
            .collect();
        let v = json!({
            "cpu": cpu,
            "table": work.what,
            "prefixes": {"v4": work.v4.len(), "v6": work.v6.len()},
            "speaker": a.speaker,
            "speaker_load_s": load_s,
            "results": res,
            "intake": intake_json,
            "kernel_bytes_per_route": kernel_bpr,
            "targets": t,
        });
        crate::jsonfile::write(path, &v)?;
    }
    let failed: Vec<&'static str> = results
        .iter()
        .filter(|r| {
            !r.problems.is_empty() || r.left_behind.0 > 0 || r.left_behind.1.is_some_and(|n| n > 0)
        })
        .map(|r| r.kind.name())
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::ChecksFailed(failed))
    }
}

/// The issue's targets: (name, what was measured, met).
fn targets(
    results: &[PathResult],
    intake: Option<&Intake>,
    vfsrd_bpr: Option<f64>,
    kernel_bpr: Option<f64>,
) -> Vec<(&'static str, String, Option<bool>)> {
    let mut t = Vec::new();
    let verdict = |met: bool, by: String| {
        if met {
            "met".to_string()
        } else {
            format!("not met ({by})")
        }
    };
    if let Some(i) = intake {
        let r = median(&i.rates);
        t.push((
            "intake >= 1M routes/s",
            format!(
                "{:.2} M routes/s: {}",
                r / 1e6,
                verdict(r >= 1e6, format!("{:.0}% short", (1.0 - r / 1e6) * 100.0))
            ),
            Some(r >= 1e6),
        ));
    }
    let find = |k: PathKind| results.iter().find(|r| r.kind == k);
    if let (Some(f), Some(k)) = (find(PathKind::Fpm), find(PathKind::Kernel)) {
        for (what, a, b) in [
            ("load", f.converge.end, k.converge.end),
            ("withdrawal", f.withdraw.end, k.withdraw.end),
        ] {
            t.push((
                if what == "load" {
                    "fpm converges faster than kernel"
                } else {
                    "fpm withdraws faster than kernel"
                },
                format!(
                    "{what} {a:.3} s against {b:.3} s: {}",
                    verdict(
                        a < b,
                        format!("slower by {:.3} s, {:.1}%", a - b, (a / b - 1.0) * 100.0)
                    )
                ),
                Some(a < b),
            ));
        }
    }
    if let Some(f) = find(PathKind::Fpm) {
        let l = f.converge.vfsr.and_then(|v| v.after_source);
        let w = f.withdraw.vfsr.and_then(|v| v.after_source);
        let met = l.is_some_and(|x| x <= 1.0) && w.is_some_and(|x| x <= 1.0);
        t.push((
            "vfsrd adds <= 1 s after zebra's last message",
            format!(
                "load {} s, withdrawal {} s: {}",
                opt(l),
                opt(w),
                verdict(met, "more than 1 s".into())
            ),
            Some(met),
        ));
    }
    if let (Some(v), Some(k)) = (vfsrd_bpr, kernel_bpr) {
        let met = v <= k / 4.0;
        t.push((
            "vfsrd bytes per route <= kernel's / 4",
            format!(
                "{v:.0} against {k:.0} / 4 = {:.0}: {}",
                k / 4.0,
                verdict(
                    met,
                    format!(
                        "{:.1}x the bound, {:.2}x the kernel's",
                        v / (k / 4.0),
                        v / k
                    )
                )
            ),
            Some(met),
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_what_failed_and_where() {
        assert_eq!(
            Error::UnknownPath("bgp".into()).to_string(),
            "--paths: unknown path \"bgp\" (fpm, kernel, kernel-mirror)"
        );
        let e = Error::Start {
            daemon: "BIRD",
            err: daemons::Error::NotRunning("bird"),
        };
        assert_eq!(e.to_string(), "starting BIRD: bird is not running");
        assert!(std::error::Error::source(&e).is_some());
        let e = Error::Stalled {
            path: "fpm",
            what: "the path to converge",
            after: Duration::from_secs(900),
            probes: "bgpd [1, 1, 10, 2]".into(),
        };
        assert_eq!(
            e.to_string(),
            "fpm path: timed out after 900.0 s waiting for the path to converge: \
             bgpd [1, 1, 10, 2]"
        );
        let e = Error::TapFrame {
            header: [1, 2, 0, 8],
            after: 4096,
        };
        assert_eq!(
            e.to_string(),
            "FPM tap: bad frame header [1, 2, 0, 8] after 4096 bytes"
        );
        let e = Error::ChecksFailed(vec!["fpm", "kernel"]);
        assert_eq!(e.to_string(), "the checks failed for: fpm, kernel");
        let e = Error::Netlink(rtnl::Error::Stalled);
        assert_eq!(e.to_string(), "the route dump stalled");
    }

    #[test]
    fn the_paths_are_parsed_by_name() {
        assert_eq!(
            PathKind::parse("kernel-mirror").ok(),
            Some(PathKind::KernelMirror)
        );
        assert!(matches!(
            PathKind::parse("mirror"),
            Err(Error::UnknownPath(p)) if p == "mirror"
        ));
    }

    #[test]
    fn reads_bgps_line_of_zebras_client_summary() {
        let text = "Name    Connect Time    Last Read  Last Write  IPv4 Routes       IPv6 Routes\n\
                    ------------------------------------------------------------------------\n\
                    bgp       00:00:07     00:00:01    00:00:01  901899/12      160147/0       \n\
                    static    00:00:09     00:00:09    00:00:09       0/0              0/0       \n";
        assert_eq!(parse_zebra_clients(text), Some([901_899, 12, 160_147, 0]));
        // No bgp client yet, or a line cut short: no sample rather than a wrong one.
        assert_eq!(
            parse_zebra_clients("static 00:00:09 never never 0/0 0/0"),
            None
        );
        assert_eq!(parse_zebra_clients("bgp 00:00:07 never never 5/x"), None);
    }

    #[test]
    fn reads_the_speakers_sessions_from_the_bgp_summary() {
        let text = r#"{"ipv4Unicast": {"peers": {"10.9.0.2": {"state": "Established", "pfxRcd": 4246}}},
                       "ipv6Unicast": {"peers": {"fd00:9::2": {"state": "Active", "pfxRcd": 0}}}}"#;
        assert_eq!(parse_bgp_summary(text, &VFSR_LINK), Some([1, 0, 4246, 0]));
        // The other link's peers are not there: nothing established, nothing received.
        assert_eq!(parse_bgp_summary(text, &LINUX_LINK), Some([0, 0, 0, 0]));
        assert_eq!(parse_bgp_summary("% Unknown command", &VFSR_LINK), None);
    }

    #[test]
    fn counts_only_the_fibs_vmalloc_areas() {
        let info = "0xffffc90000000000-0xffffc90000005000   20480 kernel_clone+0xa1/0x420 pages=4 vmalloc N0=4\n\
                    0xffffc90000100000-0xffffc90000181000  528384 tnode_new+0x5b/0x120 pages=128 vmalloc N0=128\n\
                    0xffffc90000200000-0xffffc90000209000   36864 xskq_create+0x5f/0xa0 pages=8 vmalloc\n\
                    0xffffc90000300000-0xffffc90000303000   12288 fib6_table_alloc+0x1/0x2 pages=2 vmalloc\n\
                    garbage line\n";
        assert_eq!(fib_vmalloc_bytes(info), 528_384 + 12_288);
        assert_eq!(fib_vmalloc_bytes(""), 0);
    }

    #[test]
    fn leaves_out_special_and_lab_prefixes() {
        let net = |s: &str| s.parse::<Net>().unwrap_or_else(|e| panic!("{s}: {e}"));
        assert!(usable(&net("1.0.0.0/24")));
        assert!(usable(&net("2001:db8::/32")));
        for s in [
            "127.0.0.0/8",
            "224.0.0.0/4",
            "169.254.0.0/16",
            "10.9.0.0/24",
            "10.10.0.128/25",
            "fe80::/64",
            "ff00::/8",
            "fd00:9::/64",
        ] {
            assert!(!usable(&net(s)), "{s}");
        }
        // The lab's /24 does not swallow a wider table prefix that covers it.
        assert!(usable(&net("10.0.0.0/8")));
    }

    #[test]
    fn spreads_a_subset_evenly() {
        let v: Vec<Net> = (0..10u8)
            .map(|i| Net::new(IpAddr::V4(Ipv4Addr::new(1, i, 0, 0)), 16))
            .collect();
        let s = spread(&v, 5);
        assert_eq!(s.len(), 5);
        assert_eq!(s.first(), v.first());
        assert_eq!(s.get(1), v.get(2));
        assert_eq!(spread(&v, 20).len(), 10);
        assert!(spread(&v, 0).is_empty());
    }
}
