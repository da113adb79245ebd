//! The stress run's topology and measuring tools: the three namespaces of
//! `vfsr fwd bench --veth` (generator, router, sink) with IPv6 added, vfsrd in the router's
//! namespace through [`vfsrd::harness::Vfsrd`], the legitimate flow (the XDP generator, paced),
//! a flood sender (AF_PACKET transmit ring in the generator's namespace), the TCP
//! request/response prober to the router's host stack, and vfsrd's memory and counters.
//!
//! ```text
//!  ns gen                           ns rtr (vfsrd)                          ns sink
//!  gen0 10.10.0.2/24 fd00:10::2 ─── A 10.10.0.1/24 fd00:10::1/64
//!   legit: XDP generator, 198.18.1.x, UDP port 9, paced     B 10.20.0.1/16 fd00:20::1/64 ─── 10.20.0.2
//!   flood: AF_PACKET ring, bounded in time                  198.18.0.0/16 via 10.20.0.2       XDP: counts
//!   TCP RR ─▶ 10.10.0.1:7000 (TAP vA, the host stack)                                         port 9
//! ```

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use vfsr_io::packet::{PacketConfig, PacketPort};
use vfsr_io::Backend;
use vfsrd::harness::Vfsrd;

use super::error::Error;
pub(crate) use crate::vethbench::GEN_CORE;
use crate::vethbench::{self, Generator, Lab3, RrOutcome, RrPace, Scheduling, ROUTER_CORE};

/// The legitimate flow's rate: well below what the router forwards, so any loss is the
/// case's doing.
pub(crate) const LEGIT_PPS: u64 = 50_000;
/// Destinations of the legitimate flow (198.18.1.0 + i).
const LEGIT_DESTS: u32 = 256;
/// The TCP request/response server's port (bound on every address of the router's
/// namespace: the TAP's come and go with vfsrd).
pub(crate) const RR_PORT: u16 = 7000;
/// Spacing of the TCP transactions.
const RR_EVERY: Duration = Duration::from_millis(2);
/// A transaction unanswered this long counts as lost.
const RR_GIVE_UP: Duration = Duration::from_millis(1000);
/// vfsrd's priorities (its defaults).
pub(crate) const WORKER_PRIORITY: u8 = 10;
pub(crate) const CONTROL_PRIORITY: u8 = 20;

pub(crate) const ROUTER_A4: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 1);
pub(crate) const GEN4: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 2);

/// The namespaces, the legitimate flow and vfsrd.
pub(crate) struct Lab {
    /// Declared first, dropped first: vfsrd goes before its namespaces.
    pub(crate) vfsrd: Option<Vfsrd>,
    legit: Option<Generator>,
    rr_stop: Arc<AtomicBool>,
    rr_server: Option<JoinHandle<()>>,
    pub(crate) exe: PathBuf,
    pub(crate) backend: String,
    /// The core the floods' sender runs on.
    pub(crate) flood_core: usize,
    /// The floods' rate (0: as fast as the ring takes them).
    pub(crate) flood_pps: u64,
    pub(crate) mac_a: [u8; 6],
    pub(crate) mac_gen: [u8; 6],
    pub(crate) tag: String,
    /// Declared last, dropped last.
    pub(crate) l: Lab3,
}

/// vfsrd's files are named after this.
const TAG: &str = "stress";

impl Lab {
    pub(crate) fn build(exe: PathBuf, backend: &str, limit: Duration) -> Result<Lab, Error> {
        let l = vethbench::build_lab()?;
        l.lab.ip(
            "gen",
            &["-6", "addr", "add", "fd00:10::2/64", "dev", "gen0", "nodad"],
        )?;
        let sink_if = interface_in(&l, "sink")?;
        l.lab.ip(
            "sink",
            &[
                "-6",
                "addr",
                "add",
                "fd00:20::2/64",
                "dev",
                &sink_if,
                "nodad",
            ],
        )?;
        let mac_a = vethbench::mac_in(&l.lab, "rtr", &l.a)?;
        let mac_gen = vethbench::mac_in(&l.lab, "gen", "gen0")?;
        // The legitimate flow: the XDP generator, 64-byte UDP to port 9 (what the sink
        // counts), at SCHED_IDLE: it takes only what core 0 has left, behind vfsrd's control
        // plane and the measuring threads (as in `cp flood`).
        let base = u32::from(Ipv4Addr::new(198, 18, 1, 0));
        let dests: Vec<u32> = (0..LEGIT_DESTS).map(|i| base + i).collect();
        let legit = Generator::launch(&l, &dests, limit, Scheduling::Idle)?;
        let listener = l
            .lab
            .in_ns("rtr", || {
                let s = TcpListener::bind((Ipv4Addr::UNSPECIFIED, RR_PORT))?;
                s.set_nonblocking(true)?;
                Ok::<_, std::io::Error>(s)
            })?
            .map_err(Error::RrServer)?;
        let rr_stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&rr_stop);
        let rr_server = std::thread::Builder::new()
            .name("stress-rr-server".into())
            .spawn(move || vethbench::echo_server(listener, &s))
            .map_err(Error::Thread)?;
        Ok(Lab {
            vfsrd: None,
            legit: Some(legit),
            rr_stop,
            rr_server: Some(rr_server),
            exe,
            backend: backend.to_string(),
            flood_core: GEN_CORE,
            flood_pps: 0,
            mac_a,
            mac_gen,
            tag: TAG.into(),
            l,
        })
    }

    /// vfsrd's configuration: both ports, a static route for the legitimate flow, the API
    /// socket, no metrics endpoint.
    pub(crate) fn config(&self, api_socket: &str) -> String {
        let b = &self.backend;
        format!(
            "[router]\ncontrol_core = {GEN_CORE}\nworkers = [{ROUTER_CORE}]\n\
             control_priority = {CONTROL_PRIORITY}\nworker_priority = {WORKER_PRIORITY}\n\n\
             [[interface]]\nname = \"{}\"\nbackend = \"{b}\"\n\
             addresses = [\"10.10.0.1/24\", \"fd00:10::1/64\"]\n\n\
             [[interface]]\nname = \"{}\"\nbackend = \"{b}\"\n\
             addresses = [\"10.20.0.1/16\", \"fd00:20::1/64\"]\n\n\
             [[route]]\nprefix = \"198.18.0.0/16\"\nvia = [\"10.20.0.2\"]\n\n\
             [[route]]\nprefix = \"2001:db8:18::/48\"\nvia = [\"fd00:20::2\"]\n\n\
             [api]\nsocket = \"{api_socket}\"\nmetrics = \"off\"\n",
            self.l.a, self.l.b
        )
    }

    /// Starts vfsrd (stopping one that runs) and gives port A's receive thread the core
    /// and priority `cp flood` gives it.
    pub(crate) fn start_vfsrd(&mut self) -> Result<(), Error> {
        self.vfsrd = None;
        let cfg = self.config("@SOCKET@");
        let d = Vfsrd::start(&self.l.lab, "rtr", &self.exe, &self.tag, &cfg)?;
        self.vfsrd = Some(d);
        vethbench::threaded_napi(&self.l.lab, "rtr", &self.l.a, ROUTER_CORE, 5);
        Ok(())
    }

    /// Whether vfsrd runs.
    pub(crate) fn running(&mut self) -> bool {
        self.vfsrd.as_mut().is_some_and(Vfsrd::running)
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.vfsrd.as_ref().and_then(Vfsrd::pid)
    }

    pub(crate) fn socket(&self) -> Option<PathBuf> {
        self.vfsrd.as_ref().map(|d| d.socket().to_path_buf())
    }

    /// One request to vfsrd's control API.
    pub(crate) fn api(&self, req: &vfsr_api::Request) -> Result<Value, Error> {
        let path = self.socket().ok_or(Error::NotRunning)?;
        api_call(&path, req)
    }

    /// The stats file (rewritten every second).
    pub(crate) fn stats(&self) -> Value {
        self.vfsrd.as_ref().map_or(Value::Null, Vfsrd::stats)
    }

    /// Starts the legitimate flow at [`LEGIT_PPS`].
    pub(crate) fn legit_on(&self) {
        if let Some(g) = &self.legit {
            g.set_rate(LEGIT_PPS);
        }
    }

    pub(crate) fn legit_off(&self) {
        if let Some(g) = &self.legit {
            g.pause();
        }
    }

    /// (legitimate frames sent, legitimate frames the sink counted) so far.
    pub(crate) fn legit_counts(&self) -> (u64, u64) {
        (
            self.legit.as_ref().map_or(0, Generator::sent),
            self.l.forwarded(),
        )
    }

    /// The legitimate flow's delivered rate over `d` (frames per second), measured now.
    pub(crate) fn legit_rate_over(&self, d: Duration) -> f64 {
        let (_, f0) = self.legit_counts();
        let t0 = Instant::now();
        std::thread::sleep(d);
        let (_, f1) = self.legit_counts();
        (f1 - f0) as f64 / t0.elapsed().as_secs_f64()
    }

    /// Stops the generator thread (its own time limit would also stop it).
    pub(crate) fn finish(&mut self) -> Result<(), Error> {
        self.vfsrd = None;
        match self.legit.take() {
            Some(g) => Ok(g.finish()?),
            None => Ok(()),
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.vfsrd = None;
        self.legit = None;
        self.rr_stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.rr_server.take() {
            let _ = t.join();
        }
    }
}

/// One request to the control API at `path`.
pub(crate) fn api_call(path: &Path, req: &vfsr_api::Request) -> Result<Value, Error> {
    let mut c = vfsr_api::Client::connect(path)?;
    Ok(c.call(req)?)
}

/// The first interface of namespace `ns` that is not the loopback.
fn interface_in(l: &Lab3, ns: &str) -> Result<String, Error> {
    let out = l.lab.ip(ns, &["-o", "link", "show"])?;
    out.lines()
        .filter_map(|line| line.split(':').nth(1))
        .map(|n| n.trim().split('@').next().unwrap_or("").to_string())
        .find(|n| !n.is_empty() && n != "lo")
        .ok_or_else(|| Error::NoInterface(ns.to_string()))
}

/// One-byte transactions to the router's host stack (through vfsrd's control plane and the
/// TAP), one every [`RR_EVERY`], for `secs`; the thread runs on core 0 at ordinary priority.
/// The outcome's samples are sorted.
pub(crate) fn rr_probe(l: &Lab3, secs: f64) -> Result<JoinHandle<RrOutcome>, Error> {
    let addr = SocketAddr::from((ROUTER_A4, RR_PORT));
    let conn = l.lab.in_ns("gen", move || {
        TcpStream::connect_timeout(&addr, Duration::from_secs(2))
    })?;
    std::thread::Builder::new()
        .name("stress-rr".into())
        .spawn(move || {
            let _ = vfsr_cpu::pin(GEN_CORE);
            let c = match conn {
                Ok(c) => c,
                Err(e) => {
                    return RrOutcome {
                        error: Some(format!("connecting to {addr}: {e}")),
                        ..RrOutcome::default()
                    }
                }
            };
            let pace = RrPace {
                every: RR_EVERY,
                read_timeout: Duration::from_millis(50),
                give_up: RR_GIVE_UP,
            };
            vethbench::rr_client(c, secs, &pace, || false).sorted()
        })
        .map_err(Error::Thread)
}

/// A process's resident memory: (VmRSS, VmHWM) in KiB.
pub(crate) fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Samples a process's resident memory every 100 ms until stopped: the largest VmRSS seen.
pub(crate) struct RssWatch {
    stop: Arc<AtomicBool>,
    peak: Arc<Mutex<u64>>,
    thread: Option<JoinHandle<()>>,
}

impl RssWatch {
    pub(crate) fn start(pid: Option<u32>) -> RssWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(Mutex::new(0u64));
        let (s, p) = (Arc::clone(&stop), Arc::clone(&peak));
        let thread = pid.map(|pid| {
            std::thread::spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    if let Some((rss, _)) = rss_kib(pid) {
                        let mut g = p.lock().unwrap_or_else(|e| e.into_inner());
                        *g = (*g).max(rss);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        });
        RssWatch { stop, peak, thread }
    }

    pub(crate) fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        *self.peak.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What a flood sent.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FloodSent {
    pub(crate) frames: u64,
    pub(crate) secs: f64,
    /// Frames the transmit ring refused (full).
    pub(crate) refused: u64,
}

impl FloodSent {
    pub(crate) fn pps(&self) -> f64 {
        self.frames as f64 / self.secs.max(1e-9)
    }
}

/// Sends `frames` round and round out of the generator's interface for `secs` (at `pps`
/// frames per second, 0: as fast as the ring takes them), from a thread in the generator's
/// namespace on core 0 at `SCHED_IDLE`. Returns when done: the loop is bounded by its time.
pub(crate) fn flood(
    l: &Lab3,
    core: usize,
    frames: Arc<Vec<Vec<u8>>>,
    pps: u64,
    secs: f64,
) -> Result<FloodSent, Error> {
    if frames.is_empty() {
        return Ok(FloodSent::default());
    }
    l.lab.in_ns("gen", move || -> Result<FloodSent, Error> {
        let _ = vfsr_cpu::pin(core);
        let _ = vfsr_cpu::idle(0);
        let cfg = PacketConfig {
            block_size: 1 << 16,
            block_count: 2,
            tx_frames: 2048,
            ..PacketConfig::default()
        };
        let mut port = PacketPort::with_config("gen0", &cfg).map_err(Error::Flood)?;
        let t0 = Instant::now();
        let end = Duration::from_secs_f64(secs);
        let mut sent = 0u64;
        let mut k = 0usize;
        const BATCH: usize = 64;
        while t0.elapsed() < end {
            let want = if pps == 0 {
                BATCH as u64
            } else {
                let due = (t0.elapsed().as_secs_f64() * pps as f64) as u64;
                if due <= sent {
                    std::thread::sleep(Duration::from_micros(200));
                    continue;
                }
                (due - sent).min(BATCH as u64)
            };
            let n = want as usize;
            let start = k;
            k = (k + n) % frames.len();
            let mut it =
                (0..n).filter_map(|i| frames.get((start + i) % frames.len()).map(Vec::as_slice));
            let got = port.send(&mut it).map_err(Error::Flood)?;
            sent += got as u64;
            if got < n {
                // The ring is full: let the kernel drain it.
                let _ = port.flush();
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        let _ = port.flush();
        let refused = port.stats().tx_dropped;
        Ok(FloodSent {
            frames: sent,
            secs: t0.elapsed().as_secs_f64(),
            refused,
        })
    })?
}

/// The worker's books from the stats file: received against forwarded + punted + held +
/// each named drop. (imbalance, the parts as JSON).
pub(crate) fn accounting(before: &Value, after: &Value) -> (i64, Value) {
    let d = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    let delta = |k: &str| d(after, k).saturating_sub(d(before, k));
    let mut drops = serde_json::Map::new();
    let mut named: u64 = 0;
    if let Some(m) = after["drops"].as_object() {
        for (k, v) in m {
            let n = v
                .as_u64()
                .unwrap_or(0)
                .saturating_sub(before["drops"][k].as_u64().unwrap_or(0));
            if n > 0 {
                drops.insert(k.clone(), json!(n));
            }
            named += n;
        }
    }
    let (rx, fwd, punt, held, dropped) = (
        delta("rx"),
        delta("forwarded"),
        delta("punted"),
        delta("held"),
        delta("dropped"),
    );
    let imbalance = rx as i64 - (fwd + punt + held + named) as i64;
    (
        imbalance,
        json!({"received": rx, "forwarded": fwd, "punted": punt, "held": held,
               "dropped": dropped, "named_drops": named, "drops": drops,
               "ring_rx_dropped": after["io"]["rx_dropped"].as_u64().unwrap_or(0)
                   .saturating_sub(before["io"]["rx_dropped"].as_u64().unwrap_or(0)),
               "imbalance": imbalance}),
    )
}

/// The control plane's counters over a window.
pub(crate) fn control_delta(before: &Value, after: &Value) -> Value {
    let c = |v: &Value, k: &str| v["control"][k].as_u64().unwrap_or(0);
    let mut m = serde_json::Map::new();
    if let Some(o) = after["control"].as_object() {
        for (k, v) in o {
            if let Some(n) = v.as_u64() {
                m.insert(k.clone(), json!(n.saturating_sub(c(before, k))));
            }
        }
    }
    m.insert(
        "rate_limited".into(),
        vethbench::rate_limited_delta(before, after),
    );
    m.insert(
        "policed_xdp".into(),
        vethbench::policed_xdp_delta(before, after),
    );
    m.insert(
        "punts_limited_by_workers".into(),
        json!(after["punts_limited"]
            .as_u64()
            .unwrap_or(0)
            .saturating_sub(before["punts_limited"].as_u64().unwrap_or(0))),
    );
    Value::Object(m)
}

/// The workers' event counters (`show counters`), summed: name → count.
pub(crate) fn events(counters: &Value) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for w in counters["workers"].as_array().into_iter().flatten() {
        if let Some(m) = w["counters"].as_object() {
            for (k, v) in m {
                *out.entry(k.clone()).or_insert(0) += v.as_u64().unwrap_or(0);
            }
        }
    }
    out
}

/// A sysctl's value in namespace `ns`.
pub(crate) fn sysctl(l: &Lab3, ns: &str, path: &str) -> String {
    l.lab
        .sh(ns, &["cat", path])
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|e| format!("unreadable: {e}"))
}

/// The sysctls vfsrd changes on a port (see `vfsrd::sys::quiet_port`).
pub(crate) fn port_sysctls(l: &Lab3, port: &str) -> Vec<(String, String)> {
    [
        format!("/proc/sys/net/ipv4/conf/{port}/arp_ignore"),
        format!("/proc/sys/net/ipv4/conf/{port}/rp_filter"),
        format!("/proc/sys/net/ipv6/conf/{port}/disable_ipv6"),
    ]
    .into_iter()
    .map(|p| {
        let v = sysctl(l, "rtr", &p);
        (p, v)
    })
    .collect()
}

/// Whether `ip -d link show PORT` in the router's namespace shows an XDP program.
pub(crate) fn xdp_attached(l: &Lab3, port: &str) -> bool {
    l.lab
        .ip("rtr", &["-d", "link", "show", "dev", port])
        .map(|s| s.contains("prog/xdp") || s.contains(" xdp"))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounting_balances_and_shows_the_gap() {
        let before = json!({"rx": 10, "forwarded": 5, "punted": 1, "held": 0, "dropped": 4,
                            "drops": {"no_route": 4}, "io": {"rx_dropped": 0}});
        let after = json!({"rx": 114, "forwarded": 55, "punted": 11, "held": 4, "dropped": 40,
                           "drops": {"no_route": 14, "ip4_bad_checksum": 30}, "io": {"rx_dropped": 7}});
        let (imb, v) = accounting(&before, &after);
        assert_eq!(imb, 0);
        assert_eq!(v["named_drops"], 40);
        assert_eq!(v["ring_rx_dropped"], 7);
        let after2 = json!({"rx": 115, "forwarded": 55, "punted": 11, "held": 4, "dropped": 40,
                            "drops": {"no_route": 14, "ip4_bad_checksum": 30}});
        assert_eq!(accounting(&before, &after2).0, 1);
    }

    #[test]
    fn control_counters_and_events_are_differenced_and_summed() {
        let b = json!({"control": {"frames_in": 3, "rate_limited": [1, 0, 0, 0, 0]}, "punts_limited": 2});
        let a = json!({"control": {"frames_in": 13, "rate_limited": [4, 0, 2, 0, 0]}, "punts_limited": 5});
        let d = control_delta(&b, &a);
        assert_eq!(d["frames_in"], 10);
        assert_eq!(d["rate_limited"]["arp_nd"], 3);
        assert_eq!(d["rate_limited"]["icmp"], 2);
        assert_eq!(d["punts_limited_by_workers"], 3);
        let c = json!({"workers": [{"counters": {"event.icmp4_sent": 3}},
                                   {"counters": {"event.icmp4_sent": 4}}]});
        assert_eq!(events(&c).get("event.icmp4_sent"), Some(&7));
    }
}
