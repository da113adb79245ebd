//! `vfsr fwd bench --veth`: vfsrd against the Linux kernel's forwarding and an in-kernel XDP
//! forwarder, in one topology and one run.
//!
//! ```text
//!   ns gen: gen0 10.10.0.2 ──veth── A [ns rtr: the router] B ──veth── sink0 10.20.0.2 :ns sink
//!   generator: XDP live frames on core 0        router work on core 1     sink: XDP counts
//! ```
//!
//! - **Generator**: an XDP program run by `BPF_PROG_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES`
//!   (`bpf/bench.c`, `gen`): each run writes a random destination from the table into a
//!   64-byte UDP frame and transmits it out of `gen0`, from core 0, flat out or paced.
//! - **Routers**, each with the same routes (the table, every route via the sink):
//!   `vfsr` (vfsrd, control plane on core 0, one worker on core 1), `linux` (the kernel's
//!   forwarding, routes installed with `ip -batch`, static neighbor, an `XDP_PASS` program on
//!   A so the generator's frames are accepted) and `linux-xdp` (`fib_fwd`: `bpf_fib_lookup`
//!   against the kernel's routes, redirect through a devmap).
//! - **Where the work runs**: a veth's receive work runs in its NAPI context; A's NAPI is made
//!   threaded and its thread pinned to core 1 with `SCHED_FIFO` priority `--napi-priority`
//!   (default 5, the same for every router: ahead of ordinary tasks, which could otherwise
//!   hold core 1 longer than the veth's 256-frame ring lasts, and behind vfsrd's worker at
//!   10, which must stay ahead of it), so all of a router's packet work (the XDP program, the kernel stack, vfsrd's
//!   worker) is on core 1; the sink's NAPI thread is pinned to core 0 with the generator,
//!   with priority over it. A router's CPU is core 1's busy time
//!   (`/proc/stat`), the same measure for all three.
//! - **Counted**: offered = generator runs; forwarded = frames the sink's XDP program saw;
//!   drops: vfsrd's counters by reason and its rings, the kernel's interface counters.
//! - **Latency**: `ping` from the generator's namespace to the sink through the router, and a
//!   TCP request/response (1 byte each way, one connection) to the router's own address
//!   (for vfsr through its control plane and TAP), idle and under the flood.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use vfsr_io::bpf::{self, BpfObject, XdpAttachment, XdpMode};
use vfsr_lpm::Route;
use vfsrd::netlab::{self, NetLab};

use crate::fwdbench::FwdBenchArgs;

pub(crate) const GEN_CORE: usize = 0;
pub(crate) const ROUTER_CORE: usize = 1;
pub(crate) const SINK: &str = "10.20.0.2";
/// `SCHED_FIFO` priority of the sink's receive thread: above the generator (ordinary
/// scheduling), below vfsrd's control plane (20), which shares core 0 with both.
const SINK_PRIORITY: i32 = 1;
pub(crate) const ROUTER_A: &str = "10.10.0.1";

/// One router's figures.
#[derive(Clone, Debug, Default)]
struct Outcome {
    router: String,
    offered_pps: f64,
    forwarded_pps: f64,
    cpu_cores_used: f64,
    drops: Value,
    /// vfsrd's fast-path counters (frames its XDP programs forwarded), if it is vfsrd.
    fast_path: Value,
    ping_idle_us: f64,
    ping_flood_us: f64,
    ping_flood_loss: f64,
    tcp_rr_idle_us: f64,
    tcp_rr_flood_us: f64,
    /// Requests to the router unanswered within a second under flood (of 200).
    tcp_rr_flood_timeouts: u32,
    setup_s: f64,
}

impl Outcome {
    fn pps_per_core(&self) -> f64 {
        if self.cpu_cores_used > 0.0 {
            self.forwarded_pps / self.cpu_cores_used
        } else {
            0.0
        }
    }
}

/// Core `c`'s busy and total jiffies from `/proc/stat`.
pub(crate) fn core_jiffies(c: usize) -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let tag = format!("cpu{c} ");
    for l in s.lines() {
        if let Some(rest) = l.strip_prefix(&tag) {
            let v: Vec<u64> = rest
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            let total: u64 = v.iter().take(8).sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            return (total - idle, total);
        }
    }
    (0, 0)
}

/// Pins the NAPI threads of interface `ifname` to `core`, with `SCHED_FIFO` priority
/// `priority` when it is not 0; returns how many.
fn pin_napi(ifname: &str, core: usize, priority: i32) -> usize {
    let prefix = format!("napi/{ifname}-");
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if comm.trim_end().starts_with(&prefix) {
                let _ = vfsr_cpu::pin_task(pid, &[core]);
                if priority > 0 {
                    let _ = vfsr_cpu::fifo(pid, priority);
                }
                n += 1;
            }
        }
    }
    n
}

/// Makes interface `ifname`'s receive work (its NAPI context, which exists on a veth once an
/// XDP program is attached) a kernel thread and pins that thread to `core`.
pub(crate) fn threaded_napi(lab: &NetLab, ns: &str, ifname: &str, core: usize, priority: i32) {
    let set = lab.sh(
        ns,
        &[
            "sh",
            "-c",
            &format!("echo 1 > /sys/class/net/{ifname}/threaded"),
        ],
    );
    let n = pin_napi(ifname, core, priority);
    if set.is_err() || n == 0 {
        eprintln!("vfsr: {ifname}: could not pin its NAPI thread to core {core}");
    }
}

/// Sum of a per-CPU counter slot.
fn percpu(map_fd: i32, slot: u32) -> u64 {
    let cpus = bpf::possible_cpus().unwrap_or(1);
    let mut buf = vec![0u8; 8 * cpus];
    if !bpf::map_lookup(map_fd, &slot.to_ne_bytes(), &mut buf).unwrap_or(false) {
        return 0;
    }
    buf.chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .sum()
}

/// The generator: a thread in the generator's namespace running the `gen` program in long
/// test runs (each run of `BPF_PROG_RUN` costs milliseconds to set up, so runs are long and
/// the program itself paces the frames). The thread ends when it is told to, or at the time
/// limit given to [`Generator::start`], whichever comes first, so a run that loses track of
/// it never leaves it flooding.
pub(crate) struct Generator {
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    conf: i32,
    counts: i32,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

/// Program runs per test run.
const RUNS_PER_CALL: u32 = 1 << 21;

impl Generator {
    pub(crate) fn start(
        ns_path: String,
        prog_fd: i32,
        conf: i32,
        counts: i32,
        gen_ifindex: u32,
        frame: Vec<u8>,
        limit: Duration,
    ) -> Generator {
        let deadline = Instant::now() + limit;
        let stop = Arc::new(AtomicBool::new(false));
        let paused = Arc::new(AtomicBool::new(true));
        let (s, p) = (Arc::clone(&stop), Arc::clone(&paused));
        let thread = std::thread::spawn(move || -> Result<(), String> {
            let f = std::fs::File::open(&ns_path).map_err(|e| format!("{ns_path}: {e}"))?;
            // SAFETY: setns on a descriptor we hold open, for this thread only.
            if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(format!("setns: {}", std::io::Error::last_os_error()));
            }
            let _ = vfsr_cpu::pin(GEN_CORE);
            let ctx = bpf::xdp_md_ctx(gen_ifindex, 0, frame.len() as u32);
            while !s.load(Ordering::Relaxed) {
                if Instant::now() >= deadline {
                    eprintln!(
                        "vfsr: the generator stopped at its time limit ({:.0} s)",
                        limit.as_secs_f64()
                    );
                    break;
                }
                if p.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                }
                bpf::prog_test_run(
                    prog_fd,
                    &frame,
                    RUNS_PER_CALL,
                    bpf::BPF_F_TEST_XDP_LIVE_FRAMES,
                    Some(&ctx),
                )
                .map_err(|e| format!("generator: {e}"))?;
            }
            Ok(())
        });
        Generator {
            stop,
            paused,
            conf,
            counts,
            thread: Some(thread),
        }
    }

    /// Offers `pps` frames per second (0: as fast as it can).
    pub(crate) fn set_rate(&self, pps: u64) {
        // 0 frames per second means no pacing (interval 0).
        let interval: u64 = 1_000_000_000u64.checked_div(pps).map_or(0, |i| i.max(1));
        let _ = bpf::map_update(self.conf, &1u32.to_ne_bytes(), &interval.to_ne_bytes());
        self.paused.store(false, Ordering::Relaxed);
    }

    pub(crate) fn pause(&self) {
        self.paused.store(true, Ordering::Relaxed);
    }

    /// Frames sent so far.
    pub(crate) fn sent(&self) -> u64 {
        percpu(self.counts, 0)
    }

    pub(crate) fn finish(mut self) -> Result<(), String> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| "generator panicked".to_string())?,
            None => Ok(()),
        }
    }
}

impl Drop for Generator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The 64-byte UDP template (destination rewritten by the program).
pub(crate) fn template(dst_mac: [u8; 6], src_mac: [u8; 6]) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    // IPv4: 50 bytes (64 - 14), TTL 64, UDP, 10.10.0.2 -> (rewritten).
    f.extend_from_slice(&[
        0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0, 10, 10, 0, 2, 0, 0, 0, 0,
    ]);
    // UDP 9 -> 9, length 30, no checksum.
    f.extend_from_slice(&[0, 9, 0, 9, 0, 30, 0, 0]);
    f.resize(64, 0);
    f
}

pub(crate) fn mac_in(lab: &NetLab, ns: &str, ifname: &str) -> Result<[u8; 6], String> {
    let out = lab.sh(ns, &["cat", &format!("/sys/class/net/{ifname}/address")])?;
    let mut m = [0u8; 6];
    let parts: Vec<&str> = out.trim().split(':').collect();
    if parts.len() != 6 {
        return Err(format!("{ifname}: unreadable MAC {out:?}"));
    }
    for (b, p) in m.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).map_err(|_| format!("{ifname}: bad MAC {out:?}"))?;
    }
    Ok(m)
}

pub(crate) fn ifindex_in(lab: &NetLab, ns: &str, ifname: &str) -> Result<u32, String> {
    lab.sh(ns, &["cat", &format!("/sys/class/net/{ifname}/ifindex")])?
        .trim()
        .parse()
        .map_err(|_| format!("{ifname}: no ifindex"))
}

/// Random destinations inside the table's IPv4 routes (not in the lab's 10.10/16, 10.20/16).
pub(crate) fn destinations(routes: &[Route<u32>], n: usize, seed: u64) -> Vec<u32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::with_capacity(n);
    let mut tries = 0;
    while out.len() < n && tries < n * 20 && !routes.is_empty() {
        tries += 1;
        let r = routes[(next() % routes.len() as u64) as usize];
        let len = r.prefix.len();
        let host = if len >= 32 {
            0
        } else {
            (next() as u32) & (u32::MAX >> len)
        };
        let a = r.prefix.addr() | host;
        if a >> 16 == 0x0a0a || a >> 16 == 0x0a14 || a >> 24 == 0 || a >> 28 >= 0xe {
            continue;
        }
        out.push(a);
    }
    out
}

fn ping_avg_us(lab: &NetLab, count: u32) -> (f64, f64) {
    let c = count.to_string();
    let o = lab
        .exec(
            "gen",
            &["ping", "-n", "-q", "-c", &c, "-i", "0.01", "-W", "1", SINK],
        )
        .ok();
    let text = o
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let avg = text
        .lines()
        .find(|l| l.contains("min/avg/max"))
        .and_then(|l| l.split('=').nth(1))
        .and_then(|v| v.trim().split('/').nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .map(|ms| ms * 1000.0)
        .unwrap_or(f64::NAN);
    let loss = text
        .split(',')
        .find_map(|p| p.trim().strip_suffix("% packet loss"))
        .and_then(|p| p.trim().parse::<f64>().ok())
        .unwrap_or(100.0);
    (avg, loss)
}

/// A request/response server on the router's address (one connection, echoes bytes). It
/// waits for that connection at most `ACCEPT_WAIT`, so a client that never connects (the
/// router too busy to answer its handshake) cannot leave the benchmark waiting forever.
fn rr_server(lab: &NetLab) -> Result<std::thread::JoinHandle<()>, String> {
    let listener = lab
        .in_ns("rtr", || {
            let l = TcpListener::bind((ROUTER_A, 7000))?;
            l.set_nonblocking(true)?;
            Ok::<_, std::io::Error>(l)
        })?
        .map_err(|e| format!("listen on {ROUTER_A}:7000: {e}"))?;
    Ok(std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut s = loop {
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if t0.elapsed() > ACCEPT_WAIT {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return,
            }
        };
        let _ = s.set_nonblocking(false);
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
        let mut b = [0u8; 1];
        while s.read_exact(&mut b).is_ok() {
            if s.write_all(&b).is_err() {
                break;
            }
        }
    }))
}

/// How long the request/response server waits for its client.
const ACCEPT_WAIT: Duration = Duration::from_secs(6);

/// Median microseconds of `n` one-byte round trips to the router's address, and how many
/// requests got no answer within a second. Each request carries a sequence byte and stale
/// answers (to requests already given up) are skipped, so one lost segment costs one
/// sample, not the measurement. NaN when the connection cannot be made.
fn tcp_rr_us(lab: &NetLab, n: usize) -> (f64, u32) {
    let server = match rr_server(lab) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vfsr: tcp_rr: {e}");
            return (f64::NAN, 0);
        }
    };
    let r = lab.in_ns("gen", move || -> std::io::Result<(Vec<f64>, u32)> {
        let addr: SocketAddr = format!("{ROUTER_A}:7000")
            .parse()
            .map_err(|_| std::io::Error::other("address"))?;
        let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
        c.set_nodelay(true)?;
        c.set_read_timeout(Some(Duration::from_secs(1)))?;
        let mut v = Vec::with_capacity(n);
        let mut timeouts = 0u32;
        for i in 0..n {
            let seq = (i % 251) as u8 + 1;
            let t = Instant::now();
            c.write_all(&[seq])?;
            let mut b = [0u8; 1];
            loop {
                match c.read_exact(&mut b) {
                    Ok(()) if b[0] == seq => {
                        v.push(t.elapsed().as_secs_f64() * 1e6);
                        break;
                    }
                    Ok(()) => continue,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        timeouts += 1;
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok((v, timeouts))
    });
    let _ = server.join();
    match r {
        Ok(Ok((mut v, timeouts))) if !v.is_empty() => {
            v.sort_by(|a, b| a.total_cmp(b));
            (v[v.len() / 2], timeouts)
        }
        Ok(Ok((_, timeouts))) => (f64::NAN, timeouts),
        Ok(Err(e)) => {
            eprintln!("vfsr: tcp_rr: {e}");
            (f64::NAN, 0)
        }
        Err(e) => {
            eprintln!("vfsr: tcp_rr: {e}");
            (f64::NAN, 0)
        }
    }
}

pub(crate) struct Lab3 {
    pub(crate) lab: NetLab,
    pub(crate) a: String,
    pub(crate) b: String,
    s: String,
    sink_counts: i32,
    keep: Vec<(String, XdpAttachment)>,
    _sink_obj: BpfObject,
}

impl Lab3 {
    fn attach(&mut self, ns: &str, ifname: &str, prog_fd: i32) -> Result<(), String> {
        let idx = ifindex_in(&self.lab, ns, ifname)?;
        let att = self
            .lab
            .in_ns(ns, move || {
                XdpAttachment::attach(idx, prog_fd, XdpMode::Native)
            })?
            .map_err(|e| format!("{ifname}: {e}"))?;
        self.keep.push((ns.to_string(), att));
        Ok(())
    }

    fn detach_all(&mut self, ns: &str) {
        let mut rest = Vec::new();
        for (n, att) in self.keep.drain(..) {
            if n == ns {
                let _ = self.lab.in_ns(ns, move || drop(att));
            } else {
                rest.push((n, att));
            }
        }
        self.keep = rest;
    }

    pub(crate) fn forwarded(&self) -> u64 {
        percpu(self.sink_counts, 0)
    }
}

impl Drop for Lab3 {
    fn drop(&mut self) {
        for (ns, att) in std::mem::take(&mut self.keep) {
            let _ = self.lab.in_ns(&ns, move || drop(att));
        }
    }
}

pub(crate) fn build_lab() -> Result<Lab3, String> {
    let tag = std::process::id() % 10_000;
    let (a, b, s) = (
        format!("vb{tag}a"),
        format!("vb{tag}b"),
        format!("vb{tag}s"),
    );
    let mut lab = NetLab::new("fb");
    for ns in ["gen", "rtr", "sink"] {
        lab.add_ns(ns)?;
    }
    lab.veth("gen", "gen0", "rtr", &a)?;
    lab.veth("rtr", &b, "sink", &s)?;
    lab.ip("gen", &["addr", "add", "10.10.0.2/24", "dev", "gen0"])?;
    // Both outer ends take frames redirected into their veth by an XDP program (the sink
    // through its own program, gen0 through GRO), as the egress of an XDP fast path needs.
    lab.sh("gen", &["ethtool", "-K", "gen0", "gro", "on"])?;
    lab.ip("gen", &["route", "add", "default", "via", ROUTER_A])?;
    lab.ip("sink", &["addr", "add", "10.20.0.2/24", "dev", &s])?;
    lab.ip("sink", &["route", "add", "default", "via", "10.20.0.1"])?;
    let obj = BpfObject::load("bench", bpf::objects::BENCH).map_err(|e| e.to_string())?;
    let sink_counts = obj.map_fd("counts").map_err(|e| e.to_string())?;
    let sink_prog = obj.prog_fd("sink").map_err(|e| e.to_string())?;
    let mut l = Lab3 {
        lab,
        a,
        b,
        s,
        sink_counts,
        keep: Vec::new(),
        _sink_obj: obj,
    };
    let s = l.s.clone();
    l.attach("sink", &s, sink_prog)?;
    // The sink's receive work stays off the router's core: without its own thread it would
    // run in the softirq of whoever transmits into it, the router. It shares core 0 with the
    // generator, ahead of it, so the sink is never what limits a router.
    threaded_napi(&l.lab, "sink", &s, GEN_CORE, SINK_PRIORITY);
    Ok(l)
}

struct Vfsrd {
    child: Option<Child>,
    stats: PathBuf,
    cfg: PathBuf,
}

impl Drop for Vfsrd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: signals our own child.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.stats);
        let _ = std::fs::remove_file(&self.cfg);
    }
}

fn vfsrd_stats(d: &Vfsrd) -> Value {
    let s = std::fs::read_to_string(&d.stats).unwrap_or_default();
    serde_json::from_str(&s).unwrap_or(Value::Null)
}

/// Starts vfsrd on the router's ports (`fast`: with the XDP fast path).
fn start_vfsrd(l: &Lab3, table: &TableSpec, fast: bool) -> Result<Vfsrd, String> {
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("vfsrd")))
        .filter(|p| p.exists())
        .ok_or("the vfsrd binary is not built next to vfsr (cargo build -p vfsrd)")?;
    let dir = std::env::temp_dir();
    let pid = std::process::id();
    let cfg = dir.join(format!("vfsr-vethbench-{pid}.toml"));
    let stats = dir.join(format!("vfsr-vethbench-{pid}.json"));
    let source = match table {
        TableSpec::Synthetic(seed) => format!("synthetic = true\nseed = {seed}"),
        TableSpec::File(p) => format!("file = {:?}", p.display().to_string()),
    };
    std::fs::write(
        &cfg,
        format!(
            "[router]\ncontrol_core = {GEN_CORE}\nworkers = [{ROUTER_CORE}]\nfast_path = {fast}\n\n\
             [[interface]]\nname = \"{}\"\nbackend = \"xdp\"\naddresses = [\"{ROUTER_A}/24\"]\n\n\
             [[interface]]\nname = \"{}\"\nbackend = \"xdp\"\naddresses = [\"10.20.0.1/24\"]\n\n\
             [table]\n{source}\nvia4 = [\"{SINK}\"]\n",
            l.a, l.b
        ),
    )
    .map_err(|e| format!("{}: {e}", cfg.display()))?;
    // NetLab::command gives vfsrd SIGTERM if the benchmark dies.
    let mut cmd = l.lab.command("rtr", &exe.display().to_string());
    let mut child = cmd
        .arg("--config")
        .arg(&cfg)
        .arg("--stats")
        .arg(&stats)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting vfsrd: {e}"))?;
    let out = child.stdout.take().ok_or("vfsrd: no stdout")?;
    let d = Vfsrd {
        child: Some(child),
        stats,
        cfg,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    loop {
        match rx.recv_timeout(Duration::from_secs(90)) {
            Ok(l) if l.contains("ready") => {
                println!("  {l}");
                break;
            }
            Ok(_) => {}
            Err(_) => return Err("vfsrd did not become ready in 90 s".into()),
        }
    }
    Ok(d)
}

enum TableSpec {
    Synthetic(u64),
    File(PathBuf),
}

fn install_linux_routes(l: &Lab3, routes: &[Route<u32>]) -> Result<f64, String> {
    l.lab.ip(
        "rtr",
        &["addr", "add", &format!("{ROUTER_A}/24"), "dev", &l.a],
    )?;
    l.lab
        .ip("rtr", &["addr", "add", "10.20.0.1/24", "dev", &l.b])?;
    for c in [
        "net.ipv4.ip_forward=1",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
    ] {
        l.lab.sh("rtr", &["sysctl", "-q", "-w", c])?;
    }
    let smac = mac_in(&l.lab, "sink", &l.s)?;
    let mac = smac
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    l.lab.ip(
        "rtr",
        &[
            "neigh",
            "replace",
            SINK,
            "lladdr",
            &mac,
            "dev",
            &l.b,
            "nud",
            "permanent",
        ],
    )?;
    let batch = std::env::temp_dir().join(format!("vfsr-routes-{}.txt", std::process::id()));
    let mut text = String::with_capacity(routes.len() * 40);
    for r in routes {
        let p = r.prefix;
        let net = Ipv4Addr::from(p.addr());
        if u32::from(net) >> 16 == 0x0a0a || u32::from(net) >> 16 == 0x0a14 {
            continue;
        }
        text.push_str(&format!("route replace {net}/{} via {SINK}\n", p.len()));
    }
    std::fs::write(&batch, text).map_err(|e| format!("{}: {e}", batch.display()))?;
    let t0 = Instant::now();
    let r = l
        .lab
        .ip("rtr", &["-batch", &batch.display().to_string()])
        .map(|_| t0.elapsed().as_secs_f64());
    let _ = std::fs::remove_file(&batch);
    r
}

/// Runs the flood for `secs` and measures; `during` runs in the middle of the window.
fn measure(
    l: &Lab3,
    g: &Generator,
    secs: f64,
    rate: u64,
    during: &mut dyn FnMut() -> (f64, f64, f64, u32),
) -> (f64, f64, f64, (f64, f64, f64, u32)) {
    g.set_rate(rate);
    std::thread::sleep(Duration::from_millis(700));
    let (s0, f0, c0, t0) = (
        g.sent(),
        l.forwarded(),
        core_jiffies(ROUTER_CORE),
        Instant::now(),
    );
    let lat = during();
    let rest = secs - t0.elapsed().as_secs_f64();
    if rest > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(rest));
    }
    let dt = t0.elapsed().as_secs_f64();
    let (s1, f1, c1) = (g.sent(), l.forwarded(), core_jiffies(ROUTER_CORE));
    g.pause();
    let busy = (c1.0 - c0.0) as f64 / ((c1.1 - c0.1).max(1)) as f64;
    ((s1 - s0) as f64 / dt, (f1 - f0) as f64 / dt, busy, lat)
}

/// Ping through the router (average µs, % lost) and TCP request/response to it (median µs,
/// requests unanswered).
fn latency_probe(l: &Lab3) -> (f64, f64, f64, u32) {
    let (p, loss) = ping_avg_us(&l.lab, 200);
    let (rr, timeouts) = tcp_rr_us(&l.lab, 200);
    (p, loss, rr, timeouts)
}

/// On SIGINT or SIGTERM, deletes this run's namespaces (their veths, routes and XDP
/// programs go with them) and exits; vfsrd, started with a parent-death signal, stops by
/// itself. A handler (reset to the default in every program the benchmark starts) writes
/// the signal to a pipe that a watcher thread reads.
fn clean_up_on_signal() {
    crate::interrupt::on_interrupt("removing the benchmark's namespaces", || {
        crate::interrupt::delete_namespaces(&format!("fb{}-", std::process::id()));
    });
}

/// `vfsr fwd bench --veth`.
pub fn run(a: &FwdBenchArgs) -> Result<(), String> {
    if let Err(e) = netlab::available() {
        return Err(format!(
            "--veth builds network namespaces and needs root: {e}"
        ));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        return Err("--veth needs 2 cores (generator on core 0, router on core 1)".into());
    }
    let routers: Vec<String> = a.routers.clone();
    for r in &routers {
        if !matches!(r.as_str(), "vfsr" | "vfsr-fast" | "linux" | "linux-xdp") {
            return Err(format!(
                "--routers: unknown router {r:?} (vfsr, vfsr-fast, linux, linux-xdp)"
            ));
        }
    }
    if !a.destinations.is_power_of_two() || a.destinations > 1 << 20 {
        return Err(format!(
            "--destinations {} must be a power of two up to 1048576",
            a.destinations
        ));
    }
    let (spec, routes) = match &a.table {
        Some(p) => (
            TableSpec::File(p.clone()),
            crate::tables::load(p, false)?.v4,
        ),
        None => (
            TableSpec::Synthetic(a.seed),
            crate::tables::synthetic(a.seed)?.v4,
        ),
    };
    let dests = destinations(&routes, a.destinations, a.seed);
    clean_up_on_signal();
    if dests.len() < a.destinations {
        return Err("the table has too few IPv4 routes to draw destinations from".into());
    }
    println!(
        "veth benchmark: {} IPv4 routes, {} destinations, 64-byte UDP, {:.0} s per router",
        routes.len(),
        dests.len(),
        a.seconds
    );
    let mut l = build_lab()?;
    // The generator's program and its maps.
    let gen_obj = BpfObject::load("bench", bpf::objects::BENCH).map_err(|e| e.to_string())?;
    let dmap = gen_obj.map_fd("dests").map_err(|e| e.to_string())?;
    for (i, d) in dests.iter().enumerate() {
        bpf::map_update(dmap, &(i as u32).to_ne_bytes(), &d.to_be_bytes())
            .map_err(|e| e.to_string())?;
    }
    let cmap = gen_obj.map_fd("conf").map_err(|e| e.to_string())?;
    bpf::map_update(
        cmap,
        &0u32.to_ne_bytes(),
        &((dests.len() as u64) - 1).to_ne_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let gen_counts = gen_obj.map_fd("counts").map_err(|e| e.to_string())?;
    let frame = template(mac_in(&l.lab, "rtr", &l.a)?, mac_in(&l.lab, "gen", "gen0")?);
    let tmap = gen_obj.map_fd("tmpl").map_err(|e| e.to_string())?;
    bpf::map_update(tmap, &0u32.to_ne_bytes(), frame.get(..42).unwrap_or(&[]))
        .map_err(|e| e.to_string())?;
    let gen_if = ifindex_in(&l.lab, "gen", "gen0")?;
    let gen = Generator::start(
        format!("/var/run/netns/{}", l.lab.name("gen")),
        gen_obj.prog_fd("gen").map_err(|e| e.to_string())?,
        cmap,
        gen_counts,
        gen_if,
        frame,
        // Far beyond any run of the routers' passes; only a run that lost track of the
        // generator reaches it.
        Duration::from_secs(4 * 3600),
    );
    let rate = (a.rate * 1e6) as u64;

    let mut results: Vec<Outcome> = Vec::new();
    let mut idle_cpu = f64::NAN;
    let mut sustain: Option<Value> = None;
    for r in &routers {
        println!("\n== {r}");
        let t0 = Instant::now();
        let mut o = Outcome {
            router: r.clone(),
            ..Outcome::default()
        };
        let mut daemon = None;
        match r.as_str() {
            "vfsr" | "vfsr-fast" => {
                let d = start_vfsrd(&l, &spec, r == "vfsr-fast")?;
                threaded_napi(&l.lab, "rtr", &l.a, ROUTER_CORE, i32::from(a.napi_priority));
                daemon = Some(d);
            }
            _ => {
                if results.iter().all(|x| x.router.starts_with("vfsr")) {
                    let s = install_linux_routes(&l, &routes)?;
                    println!(
                        "  {} routes installed with ip -batch in {s:.1} s",
                        routes.len()
                    );
                }
                let obj =
                    BpfObject::load("bench", bpf::objects::BENCH).map_err(|e| e.to_string())?;
                let prog = if r == "linux" { "pass" } else { "fib_fwd" };
                if r == "linux-xdp" {
                    let pm = obj.map_fd("ports").map_err(|e| e.to_string())?;
                    let bi = ifindex_in(&l.lab, "rtr", &l.b)?;
                    // A devmap names its devices by index in the updater's namespace.
                    l.lab
                        .in_ns("rtr", move || {
                            bpf::map_update(pm, &bi.to_ne_bytes(), &bi.to_ne_bytes())
                        })?
                        .map_err(|e| e.to_string())?;
                }
                let fd = obj.prog_fd(prog).map_err(|e| e.to_string())?;
                let ai = l.a.clone();
                l.attach("rtr", &ai, fd)?;
                threaded_napi(&l.lab, "rtr", &l.a, ROUTER_CORE, i32::from(a.napi_priority));
                // The object stays loaded while attached (the attachment holds the program).
                std::mem::forget(obj);
            }
        }
        o.setup_s = t0.elapsed().as_secs_f64();
        // Warm up: neighbors resolve, caches fill.
        let _ = ping_avg_us(&l.lab, 5);
        if let Some(d) = &daemon {
            // Idle CPU: the daemon with no traffic.
            let c0 = vfsrd_cpu(d);
            std::thread::sleep(Duration::from_secs(3));
            idle_cpu = (vfsrd_cpu(d) - c0) / 3.0 * 100.0;
            println!("  idle: vfsrd used {idle_cpu:.2} % of a core");
        }
        let idle = latency_probe(&l);
        o.ping_idle_us = idle.0;
        o.tcp_rr_idle_us = idle.2;
        let (off, fwd, busy, flood) = measure(&l, &gen, a.seconds.max(3.0), rate, &mut || {
            latency_probe(&l)
        });
        o.offered_pps = off;
        o.forwarded_pps = fwd;
        o.cpu_cores_used = busy;
        o.ping_flood_us = flood.0;
        o.ping_flood_loss = flood.1;
        o.tcp_rr_flood_us = flood.2;
        o.tcp_rr_flood_timeouts = flood.3;
        std::thread::sleep(Duration::from_millis(300));
        if let Some(d) = &daemon {
            std::thread::sleep(Duration::from_millis(1100));
            let s = vfsrd_stats(d);
            o.drops =
                json!({"pipeline": s["drops"], "io": s["io"], "punts_limited": s["punts_limited"]});
            o.fast_path = s["fast_path"].clone();
            if s["fast_path"]["enabled"] == true {
                println!(
                    "  fast path: {} frames forwarded in XDP, {} by the worker, {} entries installed",
                    s["fast_path"]["forwarded"], s["forwarded"], s["fast_path"]["installed"]
                );
            }
            if let Some(secs) = a.sustain {
                sustain = Some(run_sustain(&l, &gen, d, fwd / 2.0, secs));
            }
        } else {
            o.drops = linux_drops(&l);
        }
        println!(
            "  offered {:.3} Mpps, forwarded {:.3} Mpps, core {} busy {:.0} %, {:.3} Mpps per core",
            off / 1e6,
            fwd / 1e6,
            ROUTER_CORE,
            busy * 100.0,
            o.pps_per_core() / 1e6
        );
        println!(
            "  ping {:.0} us idle, {:.0} us under flood ({:.0} % lost); tcp_rr to the router {:.0} us idle, {:.0} us under flood ({} of 200 unanswered)",
            o.ping_idle_us, o.ping_flood_us, o.ping_flood_loss, o.tcp_rr_idle_us, o.tcp_rr_flood_us,
            o.tcp_rr_flood_timeouts
        );
        println!("  drops: {}", o.drops);
        drop(daemon);
        l.detach_all("rtr");
        results.push(o);
    }
    gen.finish()?;
    report(&results, idle_cpu, sustain, a)
}

fn vfsrd_cpu(d: &Vfsrd) -> f64 {
    let Some(c) = &d.child else { return 0.0 };
    let s = std::fs::read_to_string(format!("/proc/{}/stat", c.id())).unwrap_or_default();
    let Some(rest) = s.rfind(')').and_then(|i| s.get(i + 2..)) else {
        return 0.0;
    };
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / hz
}

/// Interface `i`'s counter `what` (`/sys/class/net/<i>/statistics`) in namespace `ns`; 0
/// when unreadable.
pub(crate) fn if_stat(l: &Lab3, ns: &str, i: &str, what: &str) -> u64 {
    l.lab
        .sh(
            ns,
            &["cat", &format!("/sys/class/net/{i}/statistics/{what}")],
        )
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

fn linux_drops(l: &Lab3) -> Value {
    let read = |ns: &str, i: &str, what: &str| if_stat(l, ns, i, what);
    // The IP layer's own counters (where the kernel dropped what it received).
    let snmp = l
        .lab
        .sh("rtr", &["cat", "/proc/net/snmp"])
        .unwrap_or_default();
    let mut ip = serde_json::Map::new();
    let rows: Vec<&str> = snmp.lines().filter(|x| x.starts_with("Ip: ")).collect();
    if let [names, values] = rows.as_slice() {
        for (k, v) in names
            .split_whitespace()
            .zip(values.split_whitespace())
            .skip(1)
        {
            if let Ok(n) = v.parse::<u64>() {
                if n > 0 && k != "Forwarding" && k != "DefaultTTL" {
                    ip.insert(k.to_string(), json!(n));
                }
            }
        }
    }
    json!({
        "ip": ip,
        "ingress_rx_dropped": read("rtr", &l.a, "rx_dropped"),
        "egress_tx_dropped": read("rtr", &l.b, "tx_dropped"),
        "generator_tx_dropped": read("gen", "gen0", "tx_dropped"),
    })
}

/// The veth counters along the path where frames can be lost outside the router's own
/// counters: the generator's egress, the router's ingress and egress, the sink's ingress.
fn path_drops(l: &Lab3) -> [u64; 4] {
    let read = |ns: &str, i: &str, what: &str| if_stat(l, ns, i, what);
    [
        read("gen", "gen0", "tx_dropped"),
        read("rtr", &l.a, "rx_dropped"),
        read("rtr", &l.b, "tx_dropped"),
        read("sink", &l.s, "rx_dropped"),
    ]
}

fn run_sustain(l: &Lab3, g: &Generator, d: &Vfsrd, rate: f64, secs: u64) -> Value {
    println!(
        "  sustained run: {:.3} Mpps (half the maximum) for {secs} s",
        rate / 1e6
    );
    let before = vfsrd_stats(d);
    let p0 = path_drops(l);
    let (s0, f0) = (g.sent(), l.forwarded());
    g.set_rate(rate as u64);
    std::thread::sleep(Duration::from_secs(secs));
    g.pause();
    std::thread::sleep(Duration::from_millis(500));
    let (s1, f1) = (g.sent(), l.forwarded());
    let p1 = path_drops(l);
    let lost = (s1 - s0).saturating_sub(f1 - f0);
    let path: Vec<u64> = p1
        .iter()
        .zip(p0)
        .map(|(a, b)| a.saturating_sub(b))
        .collect();
    std::thread::sleep(Duration::from_millis(1100));
    let after = vfsrd_stats(d);
    println!(
        "  sent {}, forwarded {}, lost {lost} ({:.6} %); veth drops: generator tx {}, router rx {}, router tx {}, sink rx {}",
        s1 - s0,
        f1 - f0,
        lost as f64 * 100.0 / (s1 - s0).max(1) as f64,
        path.first().unwrap_or(&0),
        path.get(1).unwrap_or(&0),
        path.get(2).unwrap_or(&0),
        path.get(3).unwrap_or(&0),
    );
    json!({
        "rate_pps": rate,
        "seconds": secs,
        "sent": s1 - s0,
        "forwarded": f1 - f0,
        "lost": lost,
        "ring_drops": after["io"]["rx_dropped"].as_u64().unwrap_or(0)
            .saturating_sub(before["io"]["rx_dropped"].as_u64().unwrap_or(0)),
        "veth_drops": {"generator_tx": path.first(), "router_rx": path.get(1),
            "router_tx": path.get(2), "sink_rx": path.get(3)},
    })
}

fn report(
    results: &[Outcome],
    idle_cpu: f64,
    sustain: Option<Value>,
    a: &FwdBenchArgs,
) -> Result<(), String> {
    println!(
        "\n{:<10} {:>12} {:>14} {:>10} {:>14} {:>10} {:>10} {:>10} {:>10}",
        "router",
        "offered Mpps",
        "forwarded Mpps",
        "cores",
        "Mpps per core",
        "ping us",
        "ping fl.",
        "tcp_rr us",
        "rr flood"
    );
    for o in results {
        println!(
            "{:<10} {:>12.3} {:>14.3} {:>10.2} {:>14.3} {:>10.0} {:>10.0} {:>10.0} {:>10.0}",
            o.router,
            o.offered_pps / 1e6,
            o.forwarded_pps / 1e6,
            o.cpu_cores_used,
            o.pps_per_core() / 1e6,
            o.ping_idle_us,
            o.ping_flood_us,
            o.tcp_rr_idle_us,
            o.tcp_rr_flood_us
        );
    }
    let get = |n: &str| {
        results
            .iter()
            .find(|o| o.router == n)
            .map(|o| o.pps_per_core())
    };
    let mut ratios = serde_json::Map::new();
    for me in ["vfsr", "vfsr-fast"] {
        let Some(v) = get(me) else { continue };
        for peer in ["linux", "linux-xdp"] {
            if let Some(p) = get(peer).filter(|p| *p > 0.0) {
                println!("{me} / {peer}: {:.2}x packets per second per core", v / p);
                ratios.insert(
                    format!("{}_over_{peer}", me.replace('-', "_")),
                    json!(v / p),
                );
            }
        }
    }
    // Where the bottleneck is: a router whose core is nearly all busy while the generator
    // offers more than it forwards is router-bound; a generator that offers less than asked
    // (or barely more than is forwarded, with the router core idle) is the limit.
    let mut bottleneck = Vec::new();
    for o in results {
        let why = if o.cpu_cores_used >= 0.9 && o.offered_pps > o.forwarded_pps * 1.05 {
            format!(
                "router-bound: core {ROUTER_CORE} {:.0} % busy, {:.0} % of the offered load not forwarded",
                o.cpu_cores_used * 100.0,
                (1.0 - o.forwarded_pps / o.offered_pps.max(1.0)) * 100.0
            )
        } else if o.offered_pps <= o.forwarded_pps * 1.05 {
            format!(
                "generator-bound: everything offered was forwarded, core {ROUTER_CORE} {:.0} % busy",
                o.cpu_cores_used * 100.0
            )
        } else {
            format!(
                "veth/kernel-bound: frames lost with core {ROUTER_CORE} only {:.0} % busy",
                o.cpu_cores_used * 100.0
            )
        };
        println!("{}: {why}", o.router);
        bottleneck.push(json!({"router": o.router, "bottleneck": why}));
    }
    if !idle_cpu.is_nan() {
        println!("vfsrd idle: {idle_cpu:.2} % of a core");
    }
    let lat = |n: &str| results.iter().find(|o| o.router == n);
    let v = lat("vfsr").or(results.first());
    let doc = json!({
        "results": results.iter().map(|o| json!({
            "router": o.router,
            "offered_pps": o.offered_pps,
            "forwarded_pps": o.forwarded_pps,
            "cpu_cores_used": o.cpu_cores_used,
            "pps_per_core": o.pps_per_core(),
            "drops": o.drops,
            "fast_path": o.fast_path,
            "latency_us": {"ping_idle": nan0(o.ping_idle_us), "ping_flood": nan0(o.ping_flood_us),
                "ping_flood_loss_percent": o.ping_flood_loss,
                "tcp_rr_idle": nan0(o.tcp_rr_idle_us), "tcp_rr_flood": nan0(o.tcp_rr_flood_us),
                "tcp_rr_flood_timeouts": o.tcp_rr_flood_timeouts},
            "setup_s": o.setup_s,
        })).collect::<Vec<_>>(),
        "idle_cpu_percent": nan0(idle_cpu),
        "latency_us": {
            "ping_idle": v.map_or(0.0, |o| nan0(o.ping_idle_us)),
            "ping_flood": v.map_or(0.0, |o| nan0(o.ping_flood_us)),
            "tcp_rr_idle": v.map_or(0.0, |o| nan0(o.tcp_rr_idle_us)),
            "tcp_rr_flood": v.map_or(0.0, |o| nan0(o.tcp_rr_flood_us)),
        },
        "ratios": ratios,
        "bottleneck": bottleneck,
        "sustain": sustain.unwrap_or(Value::Null),
        "config": {"seconds": a.seconds, "destinations": a.destinations, "rate_mpps": a.rate, "napi_priority": a.napi_priority,
                   "generator_core": GEN_CORE, "router_core": ROUTER_CORE, "frame_bytes": 64},
    });
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&doc).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

fn nan0(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}
