//! Real routing daemons in the namespaces of a [`NetLab`], for the integration tests, the
//! benchmarks and the demo: FRR (zebra, with or without its FPM module `dplane_fpm_nl`,
//! bgpd, staticd, bfdd), GoBGP as a route speaker, BIRD 2, and [`FpmCapture`], a server that
//! records what zebra sends over FPM.
//!
//! Every daemon runs in the foreground as a child of this process, started through
//! `ip netns exec` (which execs, so the child is the daemon itself), with a state directory of
//! its own under `/tmp` (config, pid file, control sockets, logs). Dropping a handle stops its
//! daemons (SIGTERM, SIGKILL after a bounded grace) and removes the directory, also when a
//! test fails half-way. Declare the [`NetLab`] before the daemons so that it is dropped after
//! them. Every wait is a bounded poll ([`wait_until`], [`wait_for`]).
//!
//! What the daemons do, as observed with FRR 8.4.4, GoBGP 3.10.0 and BIRD 2.0.12:
//! - zebra's FPM module connects only when zebra's config has `fpm address`; the first
//!   attempt comes 3 s after zebra starts, and 3 s after a lost connection (or a change of
//!   `fpm use-next-hop-groups`, which closes the connection) it connects again and replays
//!   its whole table: next-hop groups first (when enabled), then every selected route, with no
//!   marker at the end. zebra still installs every route in the kernel of its namespace.
//! - bgpd and staticd connect to zebra's socket when they start; if it is not there they
//!   retry every 10 s (every 60 s after three failures), so [`Frr`] starts zebra first and
//!   waits for it. After zebra is killed they reconnect 10 s after they lost it; staticd then
//!   sends its routes again, bgpd does not (FRR 8.4 leaves its routes out of a restarted
//!   zebra until the sessions are reset or bgpd restarts: [`Frr::restart_clients`]).
//! - bgpd's `-l ADDRESS` (listen address) implies `-n` (no routes to zebra, so nothing
//!   reaches the kernel or FPM either); FRR 8.4 keeps `bgp ebgp-requires-policy` on, so an eBGP
//!   neighbour needs an inbound route-map (or `no bgp ebgp-requires-policy`) before bgpd
//!   accepts its routes, and an outbound one before bgpd sends it any.
//! - bgpd holds an IPv6 session back about 5 s on a fresh veth, until the link-local address
//!   is no longer tentative: [`add_ns_without_dad`].
//! - bfdd's control socket defaults to `/var/run/frr/bfdd.sock`, one for the whole machine:
//!   [`Frr::start_bfdd`] gives each instance its own (`--bfdctl`). bgpd's `neighbor X bfd`
//!   reaches bfdd through zebra, also when bfdd starts after bgpd.
//! - `gobgp mrt inject` exits as soon as it has queued its last update, and the updates
//!   still queued in the client are lost (all of them for a small file); [`GoBgp::add_routes`]
//!   therefore feeds it through a FIFO that stays open until gobgpd holds the routes.
//!   gobgp reads RFC 6396's abbreviated MP_REACH_NLRI (what `vfsr_table::mrt::attributes_v6`
//!   writes) as a full one and rejects it; `gobgp global rib add` gives ORIGIN INCOMPLETE
//!   unless told `origin igp`.
//!
//! Failures are [`Error`]s that say what failed: a daemon that exited or did not answer in
//! time (with the end of its log), a command and what it said, a wait that ran out
//! ([`Timeout`]), a file, a missing program and its Debian package; the namespace lab's own
//! errors are kept inside ([`Error::Lab`]).

// The harness runs only in tests, benchmarks and the demo, never in the router: a daemon that
// answers something unexpected may fail the test that started it.
#![allow(clippy::indexing_slicing, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashSet};
use std::ffi::CString;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::netlab::{self, NetLab};
use vfsr_lpm::prefix::{parse_addr_len, PrefixError};
use vfsr_lpm::Prefix;
use vfsr_table::mrt::{self, MrtPeer, MrtWriter, RibEntry};

pub const ZEBRA: &str = "/usr/lib/frr/zebra";
pub const BGPD: &str = "/usr/lib/frr/bgpd";
pub const STATICD: &str = "/usr/lib/frr/staticd";
/// FRR's BFD daemon: optional, started by [`Frr::start_bfdd`].
pub const BFDD: &str = "/usr/lib/frr/bfdd";
pub const VTYSH: &str = "vtysh";
pub const FPM_MODULE: &str = "/usr/lib/x86_64-linux-gnu/frr/modules/dplane_fpm_nl.so";
pub const GOBGPD: &str = "gobgpd";
pub const GOBGP: &str = "gobgp";
pub const BIRD: &str = "bird";
pub const BIRDC: &str = "birdc";

/// What FRR tests need: zebra, bgpd, staticd, vtysh and the FPM module.
pub const FRR_PROGRAMS: &[&str] = &[ZEBRA, BGPD, STATICD, VTYSH, FPM_MODULE];
/// What GoBGP tests need.
pub const GOBGP_PROGRAMS: &[&str] = &[GOBGPD, GOBGP];
/// What BIRD tests need.
pub const BIRD_PROGRAMS: &[&str] = &[BIRD, BIRDC];

/// The port zebra's FPM module connects to unless told otherwise.
pub const FPM_PORT: u16 = 2620;

/// Seconds zebra's FPM module waits before connecting again (fixed in FRR 8.4).
pub const FPM_RECONNECT: Duration = Duration::from_secs(3);

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// A wait that ran out: what was awaited and how long it was waited for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("timed out after {:.1} s waiting for {what}", .after.as_secs_f64())]
pub struct Timeout {
    /// What was awaited ("zebra's FPM connection", "both BGP sessions").
    pub what: String,
    /// How long the wait lasted.
    pub after: Duration,
}

/// What failed while a daemon was started, driven or stopped, or while its answers were read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The namespace lab failed (a namespace, a link, a command run in a namespace).
    #[error(transparent)]
    Lab(#[from] netlab::Error),
    /// A program the test needs is not installed.
    #[error("{program} is not installed{}", AptHint(.package))]
    Missing {
        /// The program (a path or a name on the `PATH`).
        program: String,
        /// The Debian package that brings it (empty when not known).
        package: &'static str,
    },
    /// A daemon or a command could not be started.
    #[error("cannot start {what}: {source}")]
    Start {
        /// The daemon's name or the command line.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// A command ran and failed: its exit status was a failure, or it said so in its output
    /// (vtysh's `% Unknown command`, birdc's `syntax error`).
    #[error("{command}{}: {output}", ExitHint(.status.as_ref()))]
    Command {
        /// The command line.
        command: String,
        /// Its exit status, when it matters to the message.
        status: Option<ExitStatus>,
        /// The end of what it wrote (standard output, then standard error), trimmed.
        output: String,
    },
    /// A daemon exited before it was ready.
    #[error("{name} in {ns} exited; its log ends with:\n{log}")]
    Exited {
        /// The daemon.
        name: String,
        /// Its namespace.
        ns: String,
        /// The end of its log.
        log: String,
    },
    /// A daemon did not answer within its time.
    #[error(
        "timed out after {:.1} s waiting for {name} in {ns} to be ready; its log ends with:\n{log}",
        .after.as_secs_f64()
    )]
    NotReady {
        /// The daemon.
        name: String,
        /// Its namespace.
        ns: String,
        /// How long it was given.
        after: Duration,
        /// The end of its log.
        log: String,
    },
    /// A daemon is already running (it is not started twice).
    #[error("{0} is already running")]
    AlreadyRunning(&'static str),
    /// A daemon is not running.
    #[error("{0} is not running")]
    NotRunning(&'static str),
    /// A wait ran out.
    #[error(transparent)]
    Timeout(#[from] Timeout),
    /// A file or directory could not be made, opened or written.
    #[error("{}: {source}", .path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// Another system call failed (`chown`, `mkfifo`, a socket, a thread).
    #[error("{what}: {source}")]
    Os {
        /// What was done, naming its object (`chown /tmp/vfsr-frr-…`).
        what: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// The user the daemons run as does not exist.
    #[error("no user {0}")]
    NoUser(String),
    /// A daemon's JSON answer could not be parsed.
    #[error("{what}: {source}{}{text}", if .text.is_empty() { "" } else { ": " })]
    Json {
        /// Which answer (`route summary`, `fpm counters`).
        what: &'static str,
        /// The parser's error.
        source: serde_json::Error,
        /// The text, when the message shows it (else empty).
        text: String,
    },
    /// A daemon's answer was not what was expected.
    #[error("unexpected {what}: {text}")]
    Unexpected {
        /// What was read (`rib summary`, `route json`, `ifindex`).
        what: &'static str,
        /// The answer.
        text: String,
    },
    /// A prefix that does not parse as `address/length` with its host bits clear.
    #[error("{text}: {err}")]
    BadNet {
        /// The text.
        text: String,
        /// What is wrong with it.
        #[source]
        err: PrefixError,
    },
    /// A prefix of the other family than its next hop.
    #[error("{net} is not of next hop {nexthop}'s family")]
    FamilyMismatch {
        /// The prefix.
        net: Net,
        /// The next hop.
        nexthop: IpAddr,
    },
    /// The MRT records for an injection could not be written.
    #[error("MRT records: {0}")]
    Mrt(#[from] vfsr_table::WriteError),
    /// gobgp's MRT injection exited before it opened its FIFO.
    #[error("gobgp mrt inject exited before reading")]
    InjectExited,
    /// The MRT FIFO took only part of a write of at most `PIPE_BUF` bytes.
    #[error("short write to the FIFO ({0} bytes)")]
    ShortWrite(usize),
    /// gobgp stopped reading the MRT FIFO (it stayed full for two minutes).
    #[error("gobgp stopped reading the MRT FIFO")]
    InjectStalled,
    /// Prefixes still missing from gobgpd after its injections.
    #[error(
        "{missing} of {of} prefixes still missing after four MRT injections (see {})",
        .log.display()
    )]
    NotInjected {
        /// How many are missing.
        missing: usize,
        /// How many were announced.
        of: usize,
        /// The injections' log.
        log: PathBuf,
    },
    /// No FPM connection is open (to close).
    #[error("no FPM connection to close")]
    NoFpmConnection,
    /// A malformed FPM header in a captured stream.
    #[error("bad FPM header at byte {at}: version {version}, type {kind}, length {len}")]
    BadFpmHeader {
        /// Its byte offset.
        at: usize,
        /// The version byte (1 expected).
        version: u8,
        /// The type byte (1, netlink, expected).
        kind: u8,
        /// The length (4 at least).
        len: usize,
    },
}

/// ` (apt-get install <package>)` after a [`Error::Missing`] program whose package is known.
struct AptHint(&'static str);

impl fmt::Display for AptHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            "" => Ok(()),
            package => write!(f, " (apt-get install {package})"),
        }
    }
}

/// ` (<status>)` after a failed [`Error::Command`] when its exit status matters.
struct ExitHint<'a>(Option<&'a ExitStatus>);

impl fmt::Display for ExitHint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(status) => write!(f, " ({status})"),
            None => Ok(()),
        }
    }
}

/// The Debian package that brings `program` (this module's programs, FRR's daemons and
/// modules, and the tools the tests run beside them); empty for another.
pub fn package_of(program: &str) -> &'static str {
    match program {
        GOBGPD | GOBGP => "gobgpd",
        BIRD | BIRDC => "bird2",
        "ping" => "iputils-ping",
        "ethtool" => "ethtool",
        "traceroute" => "traceroute",
        "iperf3" => "iperf3",
        _ if program.contains("/frr/") || program == VTYSH => "frr",
        _ => "",
    }
}

// ---------------------------------------------------------------------------------------
// Waiting and skipping
// ---------------------------------------------------------------------------------------

/// Polls `probe` (every 10 ms at first, backing off to 200 ms) until it returns a value or
/// `timeout` has passed; the error names `what`.
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> Result<T, Timeout> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        if let Some(v) = probe() {
            return Ok(v);
        }
        let spent = start.elapsed();
        if spent >= timeout {
            return Err(Timeout {
                what: what.to_string(),
                after: spent,
            });
        }
        std::thread::sleep(pause.min(timeout - spent));
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// Polls `cond` until it holds or `timeout` has passed; how long it took.
pub fn wait_until(
    what: &str,
    timeout: Duration,
    mut cond: impl FnMut() -> bool,
) -> Result<Duration, Timeout> {
    let start = Instant::now();
    wait_for(what, timeout, || cond().then_some(()))?;
    Ok(start.elapsed())
}

/// Whether `program` (a path, or a name looked up in `PATH`) exists.
pub fn program_exists(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
}

/// Why a test needing network namespaces and `programs` cannot run here, if it cannot
/// ([`Error::Lab`] or [`Error::Missing`]).
pub fn skip_reason(programs: &[&str]) -> Option<Error> {
    if let Err(e) = netlab::available() {
        return Some(Error::Lab(e));
    }
    programs
        .iter()
        .find(|p| !program_exists(p))
        .map(|p| Error::Missing {
            program: p.to_string(),
            package: package_of(p),
        })
}

/// Makes namespace `name` (loopback up) with IPv6 duplicate address detection off for the
/// interfaces made in it afterwards. Use it for namespaces where bgpd runs IPv6 sessions:
/// bgpd holds an IPv6 session back until the interface's link-local address has left the
/// tentative state, about 5 s on a fresh veth (the IPv4 session comes up in tens of ms).
pub fn add_ns_without_dad(lab: &mut NetLab, name: &str) -> Result<String, Error> {
    let full = lab.add_ns(name)?;
    for key in ["all", "default"] {
        lab.sh(
            name,
            &[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{key}.accept_dad=0"),
            ],
        )?;
    }
    Ok(full)
}

// ---------------------------------------------------------------------------------------
// Prefixes
// ---------------------------------------------------------------------------------------

/// An address family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(addr: IpAddr) -> Family {
        match addr {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    /// `AF_INET` or `AF_INET6`, as in `rtm_family`.
    pub fn af(self) -> u8 {
        match self {
            Family::V4 => libc::AF_INET as u8,
            Family::V6 => libc::AF_INET6 as u8,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        }
    }

    fn bits(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }
}

/// A network prefix (host bits clear), printed and parsed as `address/length`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Net {
    pub addr: IpAddr,
    pub len: u8,
}

impl Net {
    /// The prefix of length `len` (clamped to the family's width) holding `addr`.
    pub fn new(addr: IpAddr, len: u8) -> Net {
        let len = len.min(Family::of(addr).bits());
        let addr = match addr {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
                IpAddr::V4((u32::from(a) & mask).into())
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
                IpAddr::V6((u128::from(a) & mask).into())
            }
        };
        Net { addr, len }
    }

    pub fn family(&self) -> Family {
        Family::of(self.addr)
    }

    /// `count` consecutive prefixes of length `len`, the first holding `first`
    /// (`block("100.64.0.0", 24, 3)`: 100.64.0.0/24, 100.64.1.0/24, 100.64.2.0/24); fewer when
    /// the block reaches the end of the address space, none for a length of 0.
    pub fn block(first: IpAddr, len: u8, count: usize) -> Vec<Net> {
        let start = Net::new(first, len);
        if len == 0 {
            return Vec::new();
        }
        match start.addr {
            IpAddr::V4(a) => {
                let step = 1u64 << (32 - u32::from(start.len));
                (0..count as u64)
                    .map_while(|i| {
                        let v = u64::from(u32::from(a)) + i * step;
                        let v = u32::try_from(v).ok()?;
                        Some(Net::new(IpAddr::V4(v.into()), start.len))
                    })
                    .collect()
            }
            IpAddr::V6(a) => {
                let step = 1u128 << (128 - u32::from(start.len));
                (0..count as u128)
                    .map_while(|i| {
                        let v = i
                            .checked_mul(step)
                            .and_then(|o| u128::from(a).checked_add(o))?;
                        Some(Net::new(IpAddr::V6(v.into()), start.len))
                    })
                    .collect()
            }
        }
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Net {
    type Err = Error;

    /// Parses `address/length` with the prefix parser of vfsr-lpm; host bits must be clear
    /// ([`Error::BadNet`] otherwise).
    fn from_str(s: &str) -> Result<Net, Error> {
        let bad = |err| Error::BadNet {
            text: s.to_string(),
            err,
        };
        let (addr, len) = parse_addr_len(s).map_err(bad)?;
        let net = Net::new(addr, len);
        if net.addr != addr {
            return Err(bad(PrefixError::HostBitsSet));
        }
        Ok(net)
    }
}

// ---------------------------------------------------------------------------------------
// Processes and state directories
// ---------------------------------------------------------------------------------------

/// A directory under `/tmp` (not `$TMPDIR`: FRR's daemons run as user `frr` and must reach
/// it; control socket paths must also stay short), removed on drop.
struct StateDir(PathBuf);

impl StateDir {
    fn new(kind: &str) -> Result<StateDir, Error> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let path = PathBuf::from(format!(
            "/tmp/vfsr-{kind}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&path);
        if let Err(source) = fs::create_dir_all(&path) {
            return Err(Error::File { path, source });
        }
        Ok(StateDir(path))
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A daemon started by the test (through `ip netns exec`, so its pid is the daemon's).
struct Proc {
    name: String,
    netns: String,
    child: Child,
}

impl Proc {
    /// Starts `argv` in namespace `netns` with standard output and error appended to `log`.
    fn spawn(name: &str, netns: &str, argv: &[String], log: &Path) -> Result<Proc, Error> {
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|source| Error::File {
                path: log.to_path_buf(),
                source,
            })?;
        let err = out.try_clone().map_err(|source| Error::Os {
            what: format!("duplicating {}", log.display()),
            source,
        })?;
        let mut cmd = Command::new("ip");
        crate::netlab::die_with_parent(&mut cmd);
        let child = cmd
            .args(["netns", "exec", netns])
            .args(argv)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|source| Error::Start {
                what: name.to_string(),
                source,
            })?;
        Ok(Proc {
            name: name.to_string(),
            netns: netns.to_string(),
            child,
        })
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends `signal`, waits up to `grace` for the exit, then kills. The pid cannot have been
    /// reused: the child is not reaped before `try_wait` sees it gone.
    fn stop(&mut self, signal: i32, grace: Duration) -> Result<ExitStatus, Error> {
        stop_child(&mut self.child, signal, grace)
    }
}

/// Sends `signal` to `child`, waits up to `grace` for it to exit, then kills it; its exit
/// status. The pid cannot have been reused: the child is not reaped before `try_wait` sees
/// it gone.
pub fn stop_child(child: &mut Child, signal: i32, grace: Duration) -> Result<ExitStatus, Error> {
    if let Ok(Some(st)) = child.try_wait() {
        return Ok(st);
    }
    // SAFETY: kill(2) on our own unreaped child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let t0 = Instant::now();
    while t0.elapsed() < grace {
        if let Ok(Some(st)) = child.try_wait() {
            return Ok(st);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait().map_err(|source| Error::Os {
        what: format!("waiting for process {}", child.id()),
        source,
    })
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.stop(libc::SIGTERM, Duration::from_secs(10));
    }
}

/// Waits until `proc` answers `ready`; fails at once (with the end of its log) if it exits.
fn wait_ready(
    proc: &mut Proc,
    log: &Path,
    timeout: Duration,
    mut ready: impl FnMut() -> bool,
) -> Result<Duration, Error> {
    let start = Instant::now();
    let (name, ns) = (proc.name.clone(), proc.netns.clone());
    let mut died = false;
    let r = wait_for(&format!("{name} to be ready"), timeout, || {
        if !proc.alive() {
            died = true;
            return Some(());
        }
        ready().then_some(())
    });
    let log = || log_tail(log, 20);
    if died {
        return Err(Error::Exited {
            name,
            ns,
            log: log(),
        });
    }
    if let Err(t) = r {
        return Err(Error::NotReady {
            name,
            ns,
            after: t.after,
            log: log(),
        });
    }
    Ok(start.elapsed())
}

/// The last `lines` lines of a log file.
pub fn log_tail(path: &Path, lines: usize) -> String {
    crate::netlab::last_lines(&fs::read_to_string(path).unwrap_or_default(), lines)
}

fn write_file(path: &Path, text: &str) -> Result<(), Error> {
    fs::write(path, text).map_err(|source| Error::File {
        path: path.to_path_buf(),
        source,
    })
}

fn user_ids(user: &str) -> Result<(u32, u32), Error> {
    let name = CString::new(user).map_err(|_| Error::NoUser(user.to_string()))?;
    // SAFETY: getpwnam with a valid C string; the fields are copied out at once (tests do not
    // call getpw* concurrently).
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return Err(Error::NoUser(user.to_string()));
    }
    // SAFETY: pw is non-null and points to libc's static passwd record.
    Ok(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

fn chown(path: &Path, ids: (u32, u32)) -> Result<(), Error> {
    std::os::unix::fs::chown(path, Some(ids.0), Some(ids.1)).map_err(|source| Error::Os {
        what: format!("chown {}", path.display()),
        source,
    })
}

/// What a command wrote (standard output, then standard error), its end, trimmed.
fn output_text(o: &std::process::Output) -> String {
    netlab::output_tail(&format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    ))
}

// ---------------------------------------------------------------------------------------
// FRR
// ---------------------------------------------------------------------------------------

/// Where zebra's FPM module connects, and in which mode.
#[derive(Clone, Debug)]
pub struct FpmTarget {
    pub address: IpAddr,
    pub port: u16,
    /// `fpm use-next-hop-groups` (FRR's default: routes carry `RTA_NH_ID`, next hops come
    /// as `RTM_NEWNEXTHOP`) or `no fpm use-next-hop-groups` (next hops inside each route).
    pub next_hop_groups: bool,
}

impl FpmTarget {
    /// 127.0.0.1:2620 in zebra's namespace.
    pub fn local(next_hop_groups: bool) -> FpmTarget {
        FpmTarget {
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: FPM_PORT,
            next_hop_groups,
        }
    }
}

/// What to run: zebra always (with `zebra` as the body of its config), bgpd and staticd
/// when their config is given.
#[derive(Clone, Debug, Default)]
pub struct FrrConfig {
    pub zebra: String,
    pub bgpd: Option<String>,
    pub staticd: Option<String>,
    /// Load `dplane_fpm_nl` and point it there.
    pub fpm: Option<FpmTarget>,
}

/// One FRR instance in a namespace: zebra plus bgpd and staticd as configured (and bfdd once
/// [`Frr::start_bfdd`] is called), as user `frr`, with their own pid files, vty sockets and
/// zserv socket in a state directory.
///
/// The daemons run as
/// `ip netns exec NS /usr/lib/frr/zebra -u frr -g frr -f DIR/zebra.conf -i DIR/zebra.pid
/// --vty_socket DIR -z DIR/zserv.api -P 0 --log file:DIR/zebra.log -s 90000000
/// [-M dplane_fpm_nl]` (bgpd and staticd alike, without `-s` and `-M`); `-P 0` turns the
/// TCP vty off, vtysh reaches them with `vtysh --vty_socket DIR`.
pub struct Frr {
    netns: String,
    ids: (u32, u32),
    config: FrrConfig,
    zebra: Option<Proc>,
    staticd: Option<Proc>,
    bgpd: Option<Proc>,
    bfdd: Option<Proc>,
    dir: StateDir,
}

/// A route of zebra's RIB, from `show ip[v6] route json`.
#[derive(Clone, Debug)]
pub struct RibRoute {
    pub prefix: Net,
    /// "bgp", "static", "connected", "kernel", ...
    pub protocol: String,
    pub selected: bool,
    pub installed: bool,
    pub nexthops: Vec<RibNextHop>,
}

/// A next hop of a [`RibRoute`].
#[derive(Clone, Debug)]
pub struct RibNextHop {
    pub ip: Option<IpAddr>,
    pub interface: Option<String>,
    pub active: bool,
    pub fib: bool,
    pub blackhole: bool,
    pub connected: bool,
}

impl Frr {
    /// Starts zebra, waits until it answers, then staticd and bgpd if configured.
    pub fn start(lab: &NetLab, ns: &str, config: FrrConfig) -> Result<Frr, Error> {
        let ids = user_ids("frr")?;
        let dir = StateDir::new("frr")?;
        chown(dir.path(), ids)?;
        let mut zebra = format!("hostname {ns}\n{}\n", config.zebra);
        if let Some(f) = &config.fpm {
            zebra.push_str(&format!("fpm address {} port {}\n", f.address, f.port));
            if !f.next_hop_groups {
                zebra.push_str("no fpm use-next-hop-groups\n");
            }
        }
        let files = [
            ("zebra", Some(zebra)),
            ("bgpd", config.bgpd.clone()),
            ("staticd", config.staticd.clone()),
        ];
        for (daemon, text) in files {
            if let Some(text) = text {
                let path = dir.join(&format!("{daemon}.conf"));
                write_file(&path, &text)?;
                chown(&path, ids)?;
            }
        }
        let mut frr = Frr {
            netns: lab.name(ns),
            ids,
            config,
            zebra: None,
            staticd: None,
            bgpd: None,
            bfdd: None,
            dir,
        };
        frr.start_zebra()?;
        frr.start_clients()?;
        Ok(frr)
    }

    /// The state directory (logs: `zebra.log`, `bgpd.log`, ...).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn argv(&self, daemon: &str, program: &str) -> Vec<String> {
        let d = |name: &str| self.dir.join(name).display().to_string();
        let mut argv = vec![
            program.to_string(),
            "-u".into(),
            "frr".into(),
            "-g".into(),
            "frr".into(),
            "-f".into(),
            d(&format!("{daemon}.conf")),
            "-i".into(),
            d(&format!("{daemon}.pid")),
            "--vty_socket".into(),
            self.dir.path().display().to_string(),
            "-z".into(),
            d("zserv.api"),
            "-P".into(),
            "0".into(),
            "--log".into(),
            format!("file:{}", d(&format!("{daemon}.log"))),
        ];
        if daemon == "zebra" {
            argv.extend(["-s".into(), "90000000".into()]);
            if self.config.fpm.is_some() {
                argv.extend(["-M".into(), "dplane_fpm_nl".into()]);
            }
        }
        argv
    }

    /// The uid and gid the daemons run as (user `frr`).
    pub fn user_ids(&self) -> (u32, u32) {
        self.ids
    }

    /// Starts zebra (again) and waits until its zserv socket exists and it answers vtysh.
    pub fn start_zebra(&mut self) -> Result<Duration, Error> {
        if self.zebra.as_mut().is_some_and(Proc::alive) {
            return Err(Error::AlreadyRunning("zebra"));
        }
        let _ = fs::remove_file(self.dir.join("zserv.api"));
        let argv = self.argv("zebra", ZEBRA);
        let out = self.dir.join("zebra.out");
        let mut proc = Proc::spawn("zebra", &self.netns, &argv, &out)?;
        let zserv = self.dir.join("zserv.api");
        let dir = self.dir.path().to_path_buf();
        let took = wait_ready(&mut proc, &out, Duration::from_secs(20), || {
            zserv.exists() && vtysh_at(&dir, Some("zebra"), "show version").is_ok()
        })?;
        self.zebra = Some(proc);
        Ok(took)
    }

    /// Stops zebra with `signal` (SIGTERM: zebra removes its routes from the kernel first;
    /// SIGKILL: a crash, the kernel keeps them) and waits for it to exit.
    pub fn kill_zebra(&mut self, signal: i32) -> Result<ExitStatus, Error> {
        let mut proc = self.zebra.take().ok_or(Error::NotRunning("zebra"))?;
        proc.stop(signal, Duration::from_secs(20))
    }

    fn start_client(&mut self, daemon: &str) -> Result<(), Error> {
        let program = if daemon == "bgpd" { BGPD } else { STATICD };
        let argv = self.argv(daemon, program);
        let out = self.dir.join(&format!("{daemon}.out"));
        let mut proc = Proc::spawn(daemon, &self.netns, &argv, &out)?;
        let dir = self.dir.path().to_path_buf();
        wait_ready(&mut proc, &out, Duration::from_secs(20), || {
            vtysh_at(&dir, Some(daemon), "show version").is_ok()
        })?;
        match daemon {
            "bgpd" => self.bgpd = Some(proc),
            _ => self.staticd = Some(proc),
        }
        Ok(())
    }

    fn start_clients(&mut self) -> Result<(), Error> {
        if self.config.staticd.is_some() {
            self.start_client("staticd")?;
        }
        if self.config.bgpd.is_some() {
            self.start_client("bgpd")?;
        }
        Ok(())
    }

    /// Restarts bgpd and staticd (after a zebra restart: bgpd does not send its routes to a
    /// new zebra by itself). bgpd's sessions start over.
    pub fn restart_clients(&mut self) -> Result<(), Error> {
        for p in [self.bgpd.take(), self.staticd.take()]
            .into_iter()
            .flatten()
        {
            let mut p = p;
            p.stop(libc::SIGTERM, Duration::from_secs(10))?;
        }
        self.start_clients()
    }

    /// Starts bfdd with `config` as its config (`bfd` with `profile` blocks; bgpd's
    /// `neighbor X bfd` makes the sessions) and its control socket (`--bfdctl`) in the state
    /// directory, then waits until it answers vtysh. Clients reach bfdd through zebra, so
    /// bgpd may already run.
    pub fn start_bfdd(&mut self, config: &str) -> Result<Duration, Error> {
        if self.bfdd.as_mut().is_some_and(Proc::alive) {
            return Err(Error::AlreadyRunning("bfdd"));
        }
        let conf = self.dir.join("bfdd.conf");
        write_file(&conf, config)?;
        chown(&conf, self.ids)?;
        let mut argv = self.argv("bfdd", BFDD);
        argv.push("--bfdctl".into());
        argv.push(self.dir.join("bfdd.sock").display().to_string());
        let out = self.dir.join("bfdd.out");
        let mut proc = Proc::spawn("bfdd", &self.netns, &argv, &out)?;
        let dir = self.dir.path().to_path_buf();
        let took = wait_ready(&mut proc, &out, Duration::from_secs(20), || {
            vtysh_at(&dir, Some("bfdd"), "show version").is_ok()
        })?;
        self.bfdd = Some(proc);
        Ok(took)
    }

    /// Runs vtysh commands (one per line, as one session) against this instance.
    pub fn vtysh(&self, commands: &str) -> Result<String, Error> {
        vtysh_at(self.dir.path(), None, commands)
    }

    /// Runs vtysh commands against one daemon (`zebra`, `bgpd`, `staticd`, `bfdd`).
    pub fn vtysh_on(&self, daemon: &str, commands: &str) -> Result<String, Error> {
        vtysh_at(self.dir.path(), Some(daemon), commands)
    }

    /// Applies configuration lines (`configure terminal` first).
    pub fn configure(&self, lines: &str) -> Result<String, Error> {
        self.vtysh(&format!("configure terminal\n{lines}"))
    }

    /// Whether bgpd's session with `peer` is Established.
    pub fn bgp_established(&self, peer: &str) -> bool {
        let Ok(text) = self.vtysh_on("bgpd", &format!("show bgp neighbors {peer} json")) else {
            return false;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            return false;
        };
        v.as_object().is_some_and(|o| {
            o.values()
                .any(|n| n.get("bgpState").and_then(|s| s.as_str()) == Some("Established"))
        })
    }

    /// zebra's routes of one family.
    pub fn routes_json(&self, family: Family) -> Result<Vec<RibRoute>, Error> {
        let cmd = match family {
            Family::V4 => "show ip route json",
            Family::V6 => "show ipv6 route json",
        };
        parse_routes_json(&self.vtysh_on("zebra", cmd)?)
    }

    /// Routes per source in zebra's RIB and FIB (`show ip route summary json`): type
    /// ("connected", "kernel", "static", "ebgp", "ibgp", ...) -> (rib, fib). Cheap enough to
    /// poll.
    pub fn route_summary(&self, family: Family) -> Result<BTreeMap<String, (u64, u64)>, Error> {
        let cmd = match family {
            Family::V4 => "show ip route summary json",
            Family::V6 => "show ipv6 route summary json",
        };
        let text = self.vtysh_on("zebra", cmd)?;
        let v: serde_json::Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(source) => {
                return Err(Error::Json {
                    what: "route summary",
                    source,
                    text,
                })
            }
        };
        let mut out = BTreeMap::new();
        for r in v["routes"].as_array().into_iter().flatten() {
            let kind = r["type"].as_str().unwrap_or("?").to_string();
            let e = out.entry(kind).or_insert((0, 0));
            e.0 += r["rib"].as_u64().unwrap_or(0);
            e.1 += r["fib"].as_u64().unwrap_or(0);
        }
        Ok(out)
    }

    /// Routes of `kind` ("ebgp", "static", ...) zebra has in its FIB (0 when it has none).
    pub fn fib_count(&self, family: Family, kind: &str) -> Result<u64, Error> {
        Ok(self
            .route_summary(family)?
            .get(kind)
            .map_or(0, |&(_, fib)| fib))
    }

    /// `show fpm counters json` (keys such as "connection-closes", "bytes-sent").
    pub fn fpm_counters(&self) -> Result<serde_json::Value, Error> {
        let text = self.vtysh_on("zebra", "show fpm counters json")?;
        serde_json::from_str(&text).map_err(|source| Error::Json {
            what: "fpm counters",
            source,
            text,
        })
    }

    /// Switches `fpm use-next-hop-groups`; zebra closes the FPM connection and connects
    /// again 3 s later.
    pub fn set_fpm_next_hop_groups(&self, on: bool) -> Result<(), Error> {
        let no = if on { "" } else { "no " };
        self.configure(&format!("{no}fpm use-next-hop-groups"))
            .map(drop)
    }

    /// Stops bgpd, bfdd, staticd and zebra (SIGTERM, then SIGKILL after a grace).
    pub fn stop(&mut self) {
        for p in [
            self.bgpd.take(),
            self.bfdd.take(),
            self.staticd.take(),
            self.zebra.take(),
        ]
        .into_iter()
        .flatten()
        {
            let mut p = p;
            let _ = p.stop(libc::SIGTERM, Duration::from_secs(10));
        }
    }
}

impl Drop for Frr {
    fn drop(&mut self) {
        self.stop();
    }
}

/// vtysh against the daemons whose vty sockets are in `dir`.
fn vtysh_at(dir: &Path, daemon: Option<&str>, commands: &str) -> Result<String, Error> {
    let mut c = Command::new(VTYSH);
    c.arg("--vty_socket").arg(dir);
    if let Some(d) = daemon {
        c.args(["-d", d]);
    }
    for line in commands.lines().map(str::trim).filter(|l| !l.is_empty()) {
        c.args(["-c", line]);
    }
    let o = c
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Start {
            what: VTYSH.to_string(),
            source,
        })?;
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    const FAILURES: [&str; 6] = [
        "% Unknown command",
        "% Command incomplete",
        "% Ambiguous command",
        "% Invalid",
        "% Malformed",
        "% Specify",
    ];
    let failed = out
        .lines()
        .any(|l| FAILURES.iter().any(|f| l.trim_start().starts_with(f)));
    if !o.status.success() || failed {
        return Err(Error::Command {
            command: format!("vtysh {commands:?}"),
            status: Some(o.status),
            output: output_text(&o),
        });
    }
    Ok(out)
}

/// Parses `show ip route json` / `show ipv6 route json`.
pub fn parse_routes_json(text: &str) -> Result<Vec<RibRoute>, Error> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|source| Error::Json {
        what: "route json",
        source,
        text: String::new(),
    })?;
    let obj = v.as_object().ok_or_else(|| Error::Unexpected {
        what: "route json (not an object)",
        text: netlab::output_tail(text),
    })?;
    let mut out = Vec::new();
    for (prefix, entries) in obj {
        let prefix: Net = prefix.parse()?;
        for e in entries.as_array().into_iter().flatten() {
            let flag = |k: &str| e.get(k).and_then(|b| b.as_bool()).unwrap_or(false);
            let nexthops = e["nexthops"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|n| {
                    let f = |k: &str| n.get(k).and_then(|b| b.as_bool()).unwrap_or(false);
                    RibNextHop {
                        ip: n["ip"].as_str().and_then(|s| s.parse().ok()),
                        interface: n["interfaceName"].as_str().map(str::to_string),
                        active: f("active"),
                        fib: f("fib"),
                        blackhole: f("blackhole"),
                        connected: f("directlyConnected"),
                    }
                })
                .collect();
            out.push(RibRoute {
                prefix,
                protocol: e["protocol"].as_str().unwrap_or("?").to_string(),
                selected: flag("selected"),
                installed: flag("installed"),
                nexthops,
            });
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// GoBGP
// ---------------------------------------------------------------------------------------

/// A neighbor of a [`GoBgpConfig`]: one session per address family (an IPv4 neighbor carries
/// ipv4-unicast, an IPv6 neighbor ipv6-unicast).
#[derive(Clone, Debug)]
pub struct GoBgpNeighbor {
    pub address: IpAddr,
    pub peer_as: u32,
    pub hold_time: u32,
    pub keepalive: u32,
}

/// A GoBGP speaker's config.
#[derive(Clone, Debug)]
pub struct GoBgpConfig {
    pub asn: u32,
    pub router_id: Ipv4Addr,
    pub neighbors: Vec<GoBgpNeighbor>,
}

impl GoBgpConfig {
    /// The config as gobgpd's TOML (connect-retry 1 s, so a session comes up as soon as the
    /// peer listens).
    pub fn toml(&self) -> String {
        let mut t = format!(
            "[global.config]\n  as = {}\n  router-id = \"{}\"\n  port = 179\n",
            self.asn, self.router_id
        );
        for n in &self.neighbors {
            let family = match n.address {
                IpAddr::V4(_) => "ipv4-unicast",
                IpAddr::V6(_) => "ipv6-unicast",
            };
            t.push_str(&format!(
                "\n[[neighbors]]\n  [neighbors.config]\n    neighbor-address = \"{}\"\n    \
                 peer-as = {}\n  [neighbors.timers.config]\n    hold-time = {}\n    \
                 keepalive-interval = {}\n    connect-retry = 1\n  [[neighbors.afi-safis]]\n    \
                 [neighbors.afi-safis.config]\n      afi-safi-name = \"{family}\"\n",
                n.address, n.peer_as, n.hold_time, n.keepalive
            ));
        }
        t
    }
}

/// gobgpd in a namespace (`gobgpd -f DIR/gobgpd.toml -p --api-hosts 127.0.0.1:50051
/// --pprof-disable`), driven with the `gobgp` CLI run in the same namespace.
pub struct GoBgp {
    netns: String,
    proc: Option<Proc>,
    seq: AtomicUsize,
    dir: StateDir,
}

/// Up to this many prefixes, [`GoBgp::add_routes`] uses one `gobgp global rib add` each
/// (about 9 ms apiece); above, one MRT injection.
const CLI_ADD_LIMIT: usize = 8;

impl GoBgp {
    /// Starts gobgpd with `toml` as its config and waits until its API answers.
    pub fn start(lab: &NetLab, ns: &str, toml: &str) -> Result<GoBgp, Error> {
        let dir = StateDir::new("gobgp")?;
        let conf = dir.join("gobgpd.toml");
        write_file(&conf, toml)?;
        let argv: Vec<String> = [
            GOBGPD,
            "-f",
            &conf.display().to_string(),
            "-t",
            "toml",
            "-p",
            "--api-hosts",
            "127.0.0.1:50051",
            "--pprof-disable",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let log = dir.join("gobgpd.log");
        let netns = lab.name(ns);
        let mut proc = Proc::spawn("gobgpd", &netns, &argv, &log)?;
        let probe_ns = netns.clone();
        wait_ready(&mut proc, &log, Duration::from_secs(15), || {
            gobgp_in(&probe_ns, &["global"]).is_ok()
        })?;
        Ok(GoBgp {
            netns,
            proc: Some(proc),
            seq: AtomicUsize::new(0),
            dir,
        })
    }

    /// The state directory (`gobgpd.log`, `inject.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `gobgp ARGS` against this gobgpd; its standard output.
    pub fn gobgp(&self, args: &[&str]) -> Result<String, Error> {
        gobgp_in(&self.netns, args)
    }

    /// Whether the session with `neighbor` is established.
    pub fn established(&self, neighbor: IpAddr) -> bool {
        self.gobgp(&["neighbor", &neighbor.to_string()])
            .is_ok_and(|t| t.to_lowercase().contains("bgp state = established"))
    }

    /// (destinations, paths) in the global RIB of one family.
    pub fn rib_summary(&self, family: Family) -> Result<(usize, usize), Error> {
        let text = self.gobgp(&["global", "rib", "summary", "-a", family.name()])?;
        let number = |key: &str| -> Option<usize> {
            let rest = &text[text.find(key)? + key.len()..];
            let digits: String = rest
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        };
        match (number("Destination:"), number("Path:")) {
            (Some(d), Some(p)) => Ok((d, p)),
            _ => Err(Error::Unexpected {
                what: "rib summary",
                text,
            }),
        }
    }

    /// Destinations in the global RIB of one family.
    pub fn rib_count(&self, family: Family) -> Result<usize, Error> {
        self.rib_summary(family).map(|(d, _)| d)
    }

    /// The prefixes this speaker originates itself (paths not learnt from a neighbor).
    pub fn local_prefixes(&self, family: Family) -> Result<HashSet<Net>, Error> {
        let text = self.gobgp(&["global", "rib", "-a", family.name(), "-j"])?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|source| Error::Json {
            what: "gobgp rib json",
            source,
            text: String::new(),
        })?;
        let mut out = HashSet::new();
        for (prefix, paths) in v.as_object().into_iter().flatten() {
            let local = paths.as_array().into_iter().flatten().any(|p| {
                p.get("neighbor-ip")
                    .and_then(|n| n.as_str())
                    .is_none_or(|n| n.parse::<IpAddr>().is_ok_and(|a| a.is_unspecified()))
            });
            if local {
                out.insert(prefix.parse()?);
            }
        }
        Ok(out)
    }

    /// Announces `prefixes` (all of `nexthop`'s family) with `nexthop`, an empty AS_PATH and
    /// ORIGIN IGP (`gobgp global rib add P nexthop NH origin igp`: the CLI's default origin
    /// is INCOMPLETE, and paths of different origins are not equal-cost for bgpd); returns
    /// once gobgpd holds all of them.
    ///
    /// More than a handful go in one `gobgp mrt inject global` of a TABLE_DUMP_V2 stream
    /// written with `vfsr_table::mrt` (peer AS 0 and BGP ID 0.0.0.0, so gobgpd files the
    /// paths as its own and `gobgp global rib del` removes them; IPv6 next hops in a full
    /// MP_REACH_NLRI, since gobgp misreads RFC 6396's abbreviated form). The stream goes
    /// through a FIFO kept open until gobgpd's path count shows the routes arrived (or stops
    /// growing), since the CLI loses what it has not flushed when its input ends; prefixes
    /// still missing are injected again (at most three more rounds).
    pub fn add_routes(&self, prefixes: &[Net], nexthop: IpAddr) -> Result<(), Error> {
        let family = Family::of(nexthop);
        if let Some(p) = prefixes.iter().find(|p| p.family() != family) {
            return Err(Error::FamilyMismatch { net: *p, nexthop });
        }
        if prefixes.len() <= CLI_ADD_LIMIT {
            for p in prefixes {
                let (net, nh) = (p.to_string(), nexthop.to_string());
                self.gobgp(&[
                    "global",
                    "rib",
                    "-a",
                    family.name(),
                    "add",
                    &net,
                    "nexthop",
                    &nh,
                    "origin",
                    "igp",
                ])?;
            }
            return Ok(());
        }
        let mut pending = prefixes.to_vec();
        for _ in 0..4 {
            let (_, before) = self.rib_summary(family)?;
            self.inject(family, &pending, nexthop, before + pending.len())?;
            if self.rib_summary(family)?.1 >= before + pending.len() {
                return Ok(());
            }
            let have = self.local_prefixes(family)?;
            pending.retain(|p| !have.contains(p));
            if pending.is_empty() {
                return Ok(());
            }
        }
        Err(Error::NotInjected {
            missing: pending.len(),
            of: prefixes.len(),
            log: self.dir.join("inject.log"),
        })
    }

    /// One `gobgp mrt inject global FIFO`: writes the records, waits until gobgpd has
    /// `target_paths` paths of `family` (or its count stays still for 600 ms), then closes
    /// the FIFO and waits for the CLI to exit.
    fn inject(
        &self,
        family: Family,
        prefixes: &[Net],
        nexthop: IpAddr,
        target_paths: usize,
    ) -> Result<(), Error> {
        let records = mrt_records(prefixes, nexthop)?;
        let fifo = self.dir.join(&format!(
            "inject-{}.fifo",
            self.seq.fetch_add(1, Ordering::Relaxed)
        ));
        let mkfifo = |source| Error::Os {
            what: format!("mkfifo {}", fifo.display()),
            source,
        };
        let cpath = CString::new(fifo.as_os_str().as_bytes())
            .map_err(|e| mkfifo(std::io::Error::new(ErrorKind::InvalidInput, e)))?;
        // SAFETY: mkfifo with a valid C string.
        if unsafe { libc::mkfifo(cpath.as_ptr(), 0o600) } != 0 {
            return Err(mkfifo(std::io::Error::last_os_error()));
        }
        let argv: Vec<String> = [
            GOBGP,
            "-u",
            "127.0.0.1",
            "-p",
            "50051",
            "mrt",
            "inject",
            "global",
            &fifo.display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let log = self.dir.join("inject.log");
        let mut cli = Proc::spawn("gobgp mrt inject", &self.netns, &argv, &log)?;
        let result = self.feed(&mut cli, &fifo, &records, family, target_paths);
        let _ = cli.stop(libc::SIGTERM, Duration::from_secs(10));
        let _ = fs::remove_file(&fifo);
        result
    }

    fn feed(
        &self,
        cli: &mut Proc,
        fifo: &Path,
        records: &[Vec<u8>],
        family: Family,
        target_paths: usize,
    ) -> Result<(), Error> {
        // Non-blocking: open fails with ENXIO until the CLI has opened its end, and a write
        // of at most PIPE_BUF bytes is then all or nothing (EAGAIN while the pipe is full).
        let mut pipe = wait_for(
            "gobgp to open the MRT FIFO",
            Duration::from_secs(15),
            || match OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(fifo)
            {
                Ok(f) => Some(Ok(f)),
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                    if cli.alive() {
                        None
                    } else {
                        Some(Err(Error::InjectExited))
                    }
                }
                Err(source) => Some(Err(Error::File {
                    path: fifo.to_path_buf(),
                    source,
                })),
            },
        )??;
        let mut chunk = Vec::with_capacity(libc::PIPE_BUF);
        let deadline = Instant::now() + Duration::from_secs(120);
        let flush = |chunk: &mut Vec<u8>, pipe: &mut File| -> Result<(), Error> {
            while !chunk.is_empty() {
                match pipe.write(chunk) {
                    Ok(n) if n == chunk.len() => chunk.clear(),
                    Ok(n) => return Err(Error::ShortWrite(n)),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        if Instant::now() > deadline {
                            return Err(Error::InjectStalled);
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(source) => {
                        return Err(Error::File {
                            path: fifo.to_path_buf(),
                            source,
                        })
                    }
                }
            }
            Ok(())
        };
        for r in records {
            if chunk.len() + r.len() > libc::PIPE_BUF {
                flush(&mut chunk, &mut pipe)?;
            }
            chunk.extend_from_slice(r);
        }
        flush(&mut chunk, &mut pipe)?;
        let mut last = None;
        let mut still_since = Instant::now();
        wait_until(
            "gobgpd to take the injected routes",
            Duration::from_secs(120),
            || {
                let Ok((_, paths)) = self.rib_summary(family) else {
                    return false;
                };
                if paths >= target_paths {
                    return true;
                }
                if last != Some(paths) {
                    last = Some(paths);
                    still_since = Instant::now();
                }
                still_since.elapsed() > Duration::from_millis(600)
            },
        )?;
        drop(pipe);
        let _ = wait_until("gobgp mrt inject to exit", Duration::from_secs(10), || {
            !cli.alive()
        });
        Ok(())
    }

    /// How many `gobgp mrt inject` runs [`GoBgp::add_routes`] has made so far.
    pub fn injections(&self) -> usize {
        self.seq.load(Ordering::Relaxed)
    }

    /// Withdraws `prefixes` (one `gobgp global rib del` each, about 9 ms apiece).
    pub fn withdraw_routes(&self, prefixes: &[Net]) -> Result<(), Error> {
        for p in prefixes {
            let net = p.to_string();
            self.gobgp(&["global", "rib", "-a", p.family().name(), "del", &net])?;
        }
        Ok(())
    }

    /// Withdraws every route this speaker announced, both families.
    pub fn withdraw_all(&self) -> Result<(), Error> {
        for f in [Family::V4, Family::V6] {
            self.gobgp(&["global", "rib", "-a", f.name(), "del", "all"])?;
        }
        Ok(())
    }

    /// Stops gobgpd (its sessions close with a NOTIFICATION).
    pub fn stop(&mut self) {
        if let Some(mut p) = self.proc.take() {
            let _ = p.stop(libc::SIGTERM, Duration::from_secs(10));
        }
    }
}

impl Drop for GoBgp {
    fn drop(&mut self) {
        self.stop();
    }
}

fn gobgp_in(netns: &str, args: &[&str]) -> Result<String, Error> {
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            netns,
            GOBGP,
            "-u",
            "127.0.0.1",
            "-p",
            "50051",
        ])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Start {
            what: GOBGP.to_string(),
            source,
        })?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        Err(Error::Command {
            command: format!("gobgp {}", args.join(" ")),
            status: Some(o.status),
            output: output_text(&o),
        })
    }
}

/// The TABLE_DUMP_V2 records announcing `prefixes` via `nexthop`, one buffer per record
/// (the PEER_INDEX_TABLE first).
fn mrt_records(prefixes: &[Net], nexthop: IpAddr) -> Result<Vec<Vec<u8>>, Error> {
    const TIME: u32 = 1_700_000_000;
    let err = Error::Mrt;
    let bad = |p: &Net, err| Error::BadNet {
        text: p.to_string(),
        err,
    };
    let mut records = Vec::with_capacity(prefixes.len() + 1);
    let mut w = MrtWriter::new(Vec::new(), TIME);
    w.peer_index_table(
        Ipv4Addr::UNSPECIFIED,
        "vfsr",
        &[MrtPeer {
            bgp_id: Ipv4Addr::UNSPECIFIED,
            address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            asn: 0,
        }],
    )
    .map_err(err)?;
    records.push(w.into_inner().map_err(err)?);
    let mut attributes = Vec::new();
    mrt::push_attribute(&mut attributes, 0x40, 1, &[0]).map_err(err)?;
    mrt::push_attribute(&mut attributes, 0x40, 2, &[]).map_err(err)?;
    match nexthop {
        IpAddr::V4(nh) => mrt::push_attribute(&mut attributes, 0x40, 3, &nh.octets()),
        IpAddr::V6(nh) => {
            let mut value = vec![0, 2, 1, 16];
            value.extend_from_slice(&nh.octets());
            value.push(0);
            mrt::push_attribute(&mut attributes, 0x80, 14, &value)
        }
    }
    .map_err(err)?;
    let entry = [RibEntry {
        peer_index: 0,
        originated: TIME,
        attributes,
    }];
    for (i, p) in prefixes.iter().enumerate() {
        let mut w = MrtWriter::new(Vec::new(), TIME);
        let seq = i as u32;
        match p.addr {
            IpAddr::V4(a) => {
                let prefix = Prefix::new(u32::from(a), p.len).map_err(|e| bad(p, e))?;
                w.rib_v4(seq, &prefix, &entry)
            }
            IpAddr::V6(a) => {
                let prefix = Prefix::new(u128::from(a), p.len).map_err(|e| bad(p, e))?;
                w.rib_v6(seq, &prefix, &entry)
            }
        }
        .map_err(err)?;
        records.push(w.into_inner().map_err(err)?);
    }
    Ok(records)
}

// ---------------------------------------------------------------------------------------
// BIRD
// ---------------------------------------------------------------------------------------

/// BIRD 2 in a namespace, in the foreground as root:
/// `bird -f -c DIR/bird.conf -s DIR/bird.ctl -P DIR/bird.pid` (standard error, where
/// `log stderr all` sends the log, goes to DIR/bird.log).
pub struct Bird {
    netns: String,
    proc: Option<Proc>,
    dir: StateDir,
}

impl Bird {
    /// Checks `config` with `bird -p`, starts BIRD and waits until birdc answers.
    pub fn start(lab: &NetLab, ns: &str, config: &str) -> Result<Bird, Error> {
        let dir = StateDir::new("bird")?;
        let conf = dir.join("bird.conf");
        write_file(&conf, config)?;
        let check = Command::new(BIRD)
            .arg("-p")
            .arg("-c")
            .arg(&conf)
            .output()
            .map_err(|source| Error::Start {
                what: BIRD.to_string(),
                source,
            })?;
        if !check.status.success() {
            return Err(Error::Command {
                command: "bird -p".to_string(),
                status: None,
                output: output_text(&check),
            });
        }
        let d = |name: &str| dir.join(name).display().to_string();
        let argv = vec![
            BIRD.to_string(),
            "-f".into(),
            "-c".into(),
            d("bird.conf"),
            "-s".into(),
            d("bird.ctl"),
            "-P".into(),
            d("bird.pid"),
        ];
        let log = dir.join("bird.log");
        let netns = lab.name(ns);
        let mut proc = Proc::spawn("bird", &netns, &argv, &log)?;
        let ctl = dir.join("bird.ctl");
        wait_ready(&mut proc, &log, Duration::from_secs(10), || {
            ctl.exists() && birdc_at(&ctl, "show status").is_ok()
        })?;
        Ok(Bird {
            netns,
            proc: Some(proc),
            dir,
        })
    }

    /// The state directory (`bird.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The namespace BIRD runs in.
    pub fn netns(&self) -> &str {
        &self.netns
    }

    /// Runs one birdc command (`show route`, `configure`, ...); its output.
    pub fn birdc(&self, command: &str) -> Result<String, Error> {
        birdc_at(&self.dir.join("bird.ctl"), command)
    }

    /// Replaces the config file and has BIRD load it (`birdc configure`).
    pub fn configure(&self, config: &str) -> Result<(), Error> {
        write_file(&self.dir.join("bird.conf"), config)?;
        let out = self.birdc("configure")?;
        if out.contains("Reconfigured") || out.contains("Reconfiguration in progress") {
            Ok(())
        } else {
            Err(Error::Command {
                command: "birdc configure".to_string(),
                status: None,
                output: netlab::output_tail(&out),
            })
        }
    }

    /// Stops BIRD (with `persist` off, the kernel protocol removes its routes first).
    pub fn stop(&mut self) {
        if let Some(mut p) = self.proc.take() {
            let _ = p.stop(libc::SIGTERM, Duration::from_secs(10));
        }
    }
}

impl Drop for Bird {
    fn drop(&mut self) {
        self.stop();
    }
}

fn birdc_at(ctl: &Path, command: &str) -> Result<String, Error> {
    let o = Command::new(BIRDC)
        .arg("-s")
        .arg(ctl)
        .args(command.split_whitespace())
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Start {
            what: BIRDC.to_string(),
            source,
        })?;
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let failed = out.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("syntax error") || l.starts_with("Unable to connect")
    });
    if !o.status.success() || failed {
        return Err(Error::Command {
            command: format!("birdc {command}"),
            status: Some(o.status),
            output: netlab::output_tail(&out),
        });
    }
    Ok(out)
}

/// A BIRD 2 config whose static routes go to the kernel's main table of BIRD's namespace:
/// `static4`/`static6` are route statements without `route` and `;` (`"198.51.100.0/24 via
/// 10.9.0.2"`, `"203.0.113.0/24 via 10.9.0.2 via 10.9.1.2"` (multipath),
/// `"192.0.2.0/24 blackhole"`, `"192.0.2.128/25 unreachable"`). The kernel protocols export
/// what the static protocols hold and import nothing (`learn` is off: routes others put in
/// the kernel stay out of BIRD). A static route with several `via` reaches the kernel as one
/// multipath route by itself; `merge paths yes` is there for equal routes from different
/// sources (two BGP peers, say), which it merges into one multipath kernel route. The
/// kernel shows the routes as `proto bird` (12) with metric 32, blackholes as
/// `blackhole PREFIX` (IPv6: `dev lo`), and BIRD takes them out again when a `configure`
/// drops them or when it stops (`persist` is off).
pub fn bird_kernel_config(router_id: Ipv4Addr, static4: &[&str], static6: &[&str]) -> String {
    let routes = |rs: &[&str]| -> String { rs.iter().map(|r| format!("  route {r};\n")).collect() };
    format!(
        "router id {router_id};\n\
         log stderr all;\n\
         \n\
         protocol device {{\n  scan time 10;\n}}\n\
         \n\
         protocol kernel kernel4 {{\n  ipv4 {{\n    import none;\n    export where source = RTS_STATIC;\n  }};\n  merge paths yes;\n}}\n\
         \n\
         protocol kernel kernel6 {{\n  ipv6 {{\n    import none;\n    export where source = RTS_STATIC;\n  }};\n  merge paths yes;\n}}\n\
         \n\
         protocol static static4 {{\n  ipv4;\n{}}}\n\
         \n\
         protocol static static6 {{\n  ipv6;\n{}}}\n",
        routes(static4),
        routes(static6)
    )
}

// ---------------------------------------------------------------------------------------
// FPM capture
// ---------------------------------------------------------------------------------------

/// One connection an [`FpmCapture`] accepted.
#[derive(Clone, Debug)]
pub struct FpmConnection {
    /// Everything received, as sent (FPM frames back to back).
    pub bytes: Vec<u8>,
    pub opened: Instant,
    /// When it ended (either side closed it).
    pub closed: Option<Instant>,
}

struct CaptureState {
    stop: AtomicBool,
    close: AtomicBool,
    conns: Mutex<Vec<FpmConnection>>,
}

/// A minimal FPM server: listens on 127.0.0.1:`port` inside a namespace (the socket is made
/// by a thread that entered the namespace; it stays there), accepts one connection at a
/// time and records the bytes of each. It can close the current connection (zebra then
/// connects again 3 s later). Stops on drop.
pub struct FpmCapture {
    state: Arc<CaptureState>,
    thread: Option<JoinHandle<()>>,
}

impl FpmCapture {
    pub fn start(lab: &NetLab, ns: &str, port: u16) -> Result<FpmCapture, Error> {
        let listener = lab
            .in_ns(ns, move || TcpListener::bind((Ipv4Addr::LOCALHOST, port)))?
            .map_err(|source| Error::Os {
                what: format!("FPM capture: bind 127.0.0.1:{port} in {ns}"),
                source,
            })?;
        listener.set_nonblocking(true).map_err(|source| Error::Os {
            what: "FPM capture: non-blocking listener".to_string(),
            source,
        })?;
        let state = Arc::new(CaptureState {
            stop: AtomicBool::new(false),
            close: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
        });
        let st = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name("fpm-capture".into())
            .spawn(move || capture_loop(&listener, &st))
            .map_err(|source| Error::Os {
                what: "FPM capture thread".to_string(),
                source,
            })?;
        Ok(FpmCapture {
            state,
            thread: Some(thread),
        })
    }

    fn conns(&self) -> std::sync::MutexGuard<'_, Vec<FpmConnection>> {
        self.state.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connections accepted so far.
    pub fn count(&self) -> usize {
        self.conns().len()
    }

    /// A copy of every connection so far.
    pub fn connections(&self) -> Vec<FpmConnection> {
        self.conns().clone()
    }

    /// The bytes of connection `index` (0 = the first).
    pub fn bytes(&self, index: usize) -> Vec<u8> {
        self.conns()
            .get(index)
            .map(|c| c.bytes.clone())
            .unwrap_or_default()
    }

    /// How many bytes connection `index` has brought so far.
    pub fn len(&self, index: usize) -> usize {
        self.conns().get(index).map_or(0, |c| c.bytes.len())
    }

    /// Whether a connection is open now.
    pub fn connected(&self) -> bool {
        self.conns().last().is_some_and(|c| c.closed.is_none())
    }

    /// Waits until `n` connections have been accepted; how long that took.
    pub fn wait_connections(&self, n: usize, timeout: Duration) -> Result<Duration, Timeout> {
        wait_until(&format!("FPM connection #{n}"), timeout, || {
            self.count() >= n
        })
    }

    /// Waits until connection `index` has brought nothing new for `quiet`; its length then.
    pub fn wait_quiet(
        &self,
        index: usize,
        quiet: Duration,
        timeout: Duration,
    ) -> Result<usize, Timeout> {
        let mut last = usize::MAX;
        let mut since = Instant::now();
        wait_for(
            &format!("FPM connection #{} to go quiet", index + 1),
            timeout,
            || {
                let n = self.len(index);
                if n != last {
                    last = n;
                    since = Instant::now();
                    None
                } else {
                    (since.elapsed() >= quiet).then_some(n)
                }
            },
        )
    }

    /// Closes the current connection (as an FPM server going away would) and waits until it
    /// is closed.
    pub fn close_connection(&self) -> Result<(), Error> {
        if !self.connected() {
            return Err(Error::NoFpmConnection);
        }
        self.state.close.store(true, Ordering::SeqCst);
        wait_until(
            "the FPM connection to close",
            Duration::from_secs(5),
            || !self.connected(),
        )
        .map(drop)
        .map_err(Error::Timeout)
    }
}

impl Drop for FpmCapture {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn capture_loop(listener: &TcpListener, state: &CaptureState) {
    while !state.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => capture_connection(stream, state),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn capture_connection(mut stream: TcpStream, state: &CaptureState) {
    state.close.store(false, Ordering::SeqCst);
    let index = {
        let mut conns = state.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.push(FpmConnection {
            bytes: Vec::new(),
            opened: Instant::now(),
            closed: None,
        });
        conns.len() - 1
    };
    let readable = stream.set_nonblocking(false).is_ok()
        && stream
            .set_read_timeout(Some(Duration::from_millis(20)))
            .is_ok();
    if readable {
        record(&mut stream, state, index);
    }
    let mut conns = state.conns.lock().unwrap_or_else(|e| e.into_inner());
    conns[index].closed = Some(Instant::now());
}

/// Appends what `stream` brings to connection `index` until either side closes it (the test
/// asks for a close, or stops the capture).
fn record(stream: &mut TcpStream, state: &CaptureState, index: usize) {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        if state.stop.load(Ordering::SeqCst) || state.close.swap(false, Ordering::SeqCst) {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                let mut conns = state.conns.lock().unwrap_or_else(|e| e.into_inner());
                conns[index].bytes.extend_from_slice(&buf[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => return,
        }
    }
}

/// Splits an FPM stream into the netlink payloads of its complete frames (FPM header:
/// version 1, type 1 = netlink, 16-bit big-endian length including the header). Returns the
/// payloads and how many bytes they took (a partial frame at the end is left out).
pub fn fpm_frames(bytes: &[u8]) -> Result<(Vec<&[u8]>, usize), Error> {
    let mut frames = Vec::new();
    let mut at = 0;
    while bytes.len() - at >= 4 {
        let (version, kind) = (bytes[at], bytes[at + 1]);
        let len = usize::from(u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]));
        if version != 1 || kind != 1 || len < 4 {
            return Err(Error::BadFpmHeader {
                at,
                version,
                kind,
                len,
            });
        }
        if bytes.len() - at < len {
            break;
        }
        frames.push(&bytes[at + 4..at + len]);
        at += len;
    }
    Ok((frames, at))
}

/// The interface index of `ifname` in namespace `ns` (what zebra puts in `RTA_OIF`).
pub fn ifindex(lab: &NetLab, ns: &str, ifname: &str) -> Result<u32, Error> {
    let text = lab.ip(ns, &["-o", "link", "show", "dev", ifname])?;
    text.split(':')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .ok_or(Error::Unexpected {
            what: "ip link (no ifindex)",
            text,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_wait_that_runs_out_names_what_it_awaited() {
        let t = wait_for("nothing", Duration::from_millis(30), || None::<()>).unwrap_err();
        assert_eq!(t.what, "nothing");
        assert!(t.after >= Duration::from_millis(30));
        assert!(t.to_string().starts_with("timed out after 0."), "{t}");
        assert!(t.to_string().ends_with(" s waiting for nothing"), "{t}");
        let said = t.to_string();
        let e = Error::from(t);
        // The wrapper is the timeout itself: its message once, not again as its cause.
        assert_eq!(e.to_string(), said);
        assert!(e.source().is_none());
        assert!(wait_until("at once", Duration::from_secs(1), || true).is_ok());
    }

    #[test]
    fn daemon_errors_say_which_daemon_where_and_what_it_logged() {
        let e = Error::NotReady {
            name: "zebra".into(),
            ns: "cp1-rt".into(),
            after: Duration::from_secs(20),
            log: "zebra: cannot bind".into(),
        };
        assert_eq!(
            e.to_string(),
            "timed out after 20.0 s waiting for zebra in cp1-rt to be ready; its log ends \
             with:\nzebra: cannot bind"
        );
        let e = Error::Exited {
            name: "bgpd".into(),
            ns: "cp1-rt".into(),
            log: "bad config".into(),
        };
        assert_eq!(
            e.to_string(),
            "bgpd in cp1-rt exited; its log ends with:\nbad config"
        );
        let e = Error::Missing {
            program: BIRDC.into(),
            package: package_of(BIRDC),
        };
        assert_eq!(
            e.to_string(),
            "birdc is not installed (apt-get install bird2)"
        );
        assert_eq!(package_of(ZEBRA), "frr");
        assert_eq!(package_of(FPM_MODULE), "frr");
        assert_eq!(package_of(GOBGP), "gobgpd");
        assert_eq!(package_of("ping"), "iputils-ping");
        let e = Error::Missing {
            program: "frobnicate".into(),
            package: package_of("frobnicate"),
        };
        assert_eq!(e.to_string(), "frobnicate is not installed");
        let e = Error::Lab(netlab::Error::NotRoot);
        assert_eq!(e.to_string(), "not root");
        assert!(e.source().is_none());
    }

    #[test]
    fn bad_prefixes_and_frames_are_refused_with_what_is_wrong() {
        assert!(matches!(
            "10.0.0.1/8".parse::<Net>(),
            Err(Error::BadNet {
                err: PrefixError::HostBitsSet,
                ..
            })
        ));
        let e = "10.0.0.0".parse::<Net>().unwrap_err();
        assert_eq!(e.to_string(), "10.0.0.0: no /length");
        assert_eq!(
            "10.0.0.0/8".parse::<Net>().unwrap().to_string(),
            "10.0.0.0/8"
        );
        let e = fpm_frames(&[2, 1, 0, 8, 0, 0, 0, 0]).unwrap_err();
        assert!(matches!(
            e,
            Error::BadFpmHeader {
                at: 0,
                version: 2,
                kind: 1,
                len: 8
            }
        ));
        assert_eq!(
            e.to_string(),
            "bad FPM header at byte 0: version 2, type 1, length 8"
        );
    }
}
