//! Starting and stopping the router: the control plane on the calling thread (pinned to
//! its core), one thread per forwarding worker (pinned to its core), the stats file, and a
//! clean stop: workers stop receiving and flush what they queued, then the control plane
//! stops, then the caller drops the I/O (which detaches XDP programs and deletes TAPs).

use std::any::Any;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use vfsr_flow::FlowConfig;
use vfsr_fwd::{Counters, DropReason, Outcome, PuntClass, SharedCounters, WorkerConfig};
use vfsr_io::rss::{Rss, STANDARD_KEY};
use vfsr_io::xdp::{FastPath, Policer};
use vfsr_io::{Backend, IoStats};
use vfsr_lpm::LpmUpdate;
use vfsr_wire::MacAddr;

use crate::api::{ApiServer, View};
use crate::config::Plan;
use crate::control::{Control, ControlCounters, CtlPort};
use crate::dataplane::{PuntRates, WorkerLoop, WorkerStats};
use crate::error::{Error, Result};
use crate::fastpath::{FastInstaller, InstallCounters};
use crate::link::{Link, ToControl, Wake};
use crate::metrics::MetricsServer;
use crate::router::{self, Installed};
use crate::service::Service;
use crate::sources::{KernelIds, Sources};
use crate::spread;

/// Frames workers may queue for the control plane.
const INBOX: usize = 4096;

/// One port's I/O.
pub struct PortIo {
    /// The interface's MAC.
    pub mac: MacAddr,
    /// One backend per queue (queue `w` goes to worker `w`).
    pub queues: Vec<Box<dyn Backend>>,
    /// The control plane's link on the port.
    pub wire: Box<dyn Link>,
    /// The host stack's TAP.
    pub tap: Option<Box<dyn Link>>,
    /// What must stay alive while the port runs (the XDP program's attachment).
    pub keep: Vec<Box<dyn Any + Send>>,
    /// The port's XDP fast path, when it has one.
    pub fast: Option<FastPath>,
    /// The buckets its XDP program polices control classes with, when it has one.
    pub police: Option<Policer>,
    /// The port's kernel interfaces (its own, its TAP's), when it has them: their link state
    /// is followed and routes through them are routes out of the port.
    pub kernel: Option<KernelIds>,
}

/// Options of a run.
#[derive(Default)]
pub struct RunOptions {
    /// Write the FIB as text here when `dump` is raised (see [`crate::dump`]).
    pub fib_dump: Option<PathBuf>,
    /// Raised (by `SIGUSR1`) to ask for a FIB dump.
    pub dump: Arc<AtomicBool>,
    /// Rewrite this file with JSON counters every second.
    pub stats: Option<PathBuf>,
    /// Print progress lines to standard output.
    pub verbose: bool,
    /// The configuration file, read again on a reload.
    pub config: Option<PathBuf>,
    /// Raised (by `SIGHUP`) to ask for a reload.
    pub reload: Arc<AtomicBool>,
}

/// The counters at the end of a run.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Pipeline counters of all workers.
    pub counters: Counters,
    /// Each worker's pipeline counters.
    pub per_worker: Vec<Counters>,
    /// Control-plane counters.
    pub control: ControlCounters,
    /// I/O counters, summed.
    pub io: IoStats,
    /// What was installed.
    pub installed: Installed,
}

/// CPU seconds used by thread `tid` of this process.
pub fn thread_cpu_seconds(tid: i32) -> f64 {
    let path = format!("/proc/self/task/{tid}/stat");
    let Ok(s) = std::fs::read_to_string(path) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let Some(rest) = s.rfind(')').and_then(|i| s.get(i + 2..)) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 (1-based), 11 and 12 after the state field.
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) / hz
}

/// Pins the calling thread to `core`; a failure is reported, not fatal.
pub fn pin(core: usize) -> Result<(), vfsr_cpu::CpuError> {
    vfsr_cpu::pin(core)
}

/// Puts the calling thread back under ordinary scheduling. Done before the clean-up after the
/// loop: undoing the port's settings can meet a kernel lock another process holds (a sysctl
/// write under the rtnl lock restarts until it gets it), and a real-time thread retrying on
/// a core would keep the holder, and the kernel's RCU threads, from running there.
pub fn ordinary() {
    let _ = vfsr_cpu::ordinary(0);
}

/// Gives the calling thread `SCHED_FIFO` priority `priority` (0: leaves it as it is).
///
/// Why a worker wants it: on a port whose receive work runs in the kernel's NAPI context on
/// the worker's own core (AF_XDP in copy mode, as on veth), the two share that core. Under
/// the ordinary scheduler they get half of it each, and under a flood the NAPI half fills
/// the worker's ring and then spends itself on frames the full ring drops: a receive
/// livelock. With priority the worker runs whenever its ring has frames, and sleeps in
/// `poll` the moment it is empty; only then does the receive work run, one NAPI poll (at
/// most 64 frames) at a time, whose end wakes the worker again. The receive work thus takes
/// only frames the worker has room for; the rest wait in (and overflow from) the device's
/// own queue, where they cost nothing. The kernel's real-time throttling
/// (`sched_rt_runtime_us`) still leaves the core's other threads their share.
pub fn realtime(priority: u8) -> Result<()> {
    if priority == 0 {
        return Ok(());
    }
    vfsr_cpu::fifo(0, i32::from(priority)).map_err(|e| {
        Error::invalid(
            format!("priority {priority}"),
            format!("{e} (needs CAP_SYS_NICE)"),
        )
    })
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Builds the router for `plan` and runs it over `ports` until `stop` is set. Calls
/// `ready` once every worker runs.
pub fn run<E4, E6>(
    plan: &Plan,
    mut ports: Vec<PortIo>,
    opts: &RunOptions,
    stop: Arc<AtomicBool>,
    ready: &mut dyn FnMut(&Installed),
) -> Result<Summary>
where
    E4: LpmUpdate<u32> + Clone + Send + Sync + 'static,
    E6: LpmUpdate<u128> + Clone + Send + Sync + 'static,
    E4::Config: Default,
    E6::Config: Default,
{
    // The cores a reloaded configuration may name: those this process could use before its
    // control thread is pinned to one.
    let cores = vfsr_cpu::usable_cores();
    if let Err(e) = pin(plan.control_core) {
        tracing::warn!(error = %e, "control plane: pinning");
    }
    let macs: Vec<MacAddr> = ports.iter().map(|p| p.mac).collect();
    let (lab, installed) = router::build::<E4, E6>(plan, &macs)?;
    let kernel_ids: Vec<KernelIds> = ports.iter().filter_map(|p| p.kernel).collect();
    let specs = router::port_specs(plan, &macs);

    let wake = Arc::new(Wake::new().map_err(|e| Error::os("eventfd", e))?);
    let (tx, rx) = sync_channel::<ToControl>(INBOX);

    // Split each port's queues among the workers: queue w to worker w.
    let nworkers = plan.workers.len();
    let mut per_worker: Vec<Vec<Option<Box<dyn Backend>>>> = (0..nworkers)
        .map(|_| (0..ports.len()).map(|_| None).collect())
        .collect();
    let mut ctl_ports = Vec::new();
    let mut keep = Vec::new();
    // The XDP fast paths: port by port, and the MTU of each egress they can send by.
    let fast: Vec<Option<FastPath>> = ports.iter_mut().map(|p| p.fast.take()).collect();
    let policers: Vec<Policer> = ports.iter_mut().filter_map(|p| p.police.take()).collect();
    // Indexed by pipeline port number (0 unused): 0 where the fast path cannot send.
    let fast_mtu: Vec<u16> = std::iter::once(0)
        .chain(
            fast.iter()
                .zip(&plan.interfaces)
                .map(|(f, itf)| if f.is_some() { itf.mtu } else { 0 }),
        )
        .collect();
    // What each port runs on (the configuration may have said `auto`).
    let backends: Vec<String> = ports
        .iter()
        .map(|p| {
            p.queues
                .first()
                .map_or_else(|| "none".into(), |q| q.kind().name().to_string())
        })
        .collect();
    for (i, (p, spec)) in ports.into_iter().zip(&specs).enumerate() {
        if p.queues.len() == 1 && nworkers > 1 {
            // One queue, several workers: software RSS from worker 0.
            let rss = Rss::new(&STANDARD_KEY, nworkers, plan.rss_symmetric);
            let mut queues = p.queues;
            let Some(q) = queues.pop() else {
                continue;
            };
            let (spreader, handoffs) = spread::split(q, rss, nworkers, 0)?;
            for (w, h) in handoffs.into_iter().enumerate() {
                let b: Box<dyn Backend> = match h {
                    Some(h) => Box::new(h),
                    None => continue,
                };
                if let Some(slot) = per_worker.get_mut(w).and_then(|v| v.get_mut(i)) {
                    *slot = Some(b);
                }
            }
            if let Some(slot) = per_worker.get_mut(0).and_then(|v| v.get_mut(i)) {
                *slot = Some(Box::new(spreader));
            }
        } else {
            for (w, q) in p.queues.into_iter().enumerate() {
                match per_worker.get_mut(w).and_then(|v| v.get_mut(i)) {
                    Some(slot) => *slot = Some(q),
                    None => tracing::warn!(
                        queue = %q.name(),
                        workers = nworkers,
                        "the queue has no worker; it is not read"
                    ),
                }
            }
        }
        ctl_ports.push(CtlPort {
            ifindex: i as u32 + 1,
            name: plan
                .interfaces
                .get(i)
                .map(|x| x.name.clone())
                .unwrap_or_default(),
            mac: p.mac,
            addrs4: spec.addrs4.clone(),
            addrs6: spec.addrs6.clone(),
            wire: p.wire,
            tap: p.tap,
        });
        keep.extend(p.keep);
    }

    let wconfig = WorkerConfig {
        batch_size: plan.batch,
        flow: (plan.flow_entries > 0).then(|| FlowConfig {
            capacity: plan.flow_entries,
            idle_timeout: plan.flow_idle_ms,
            seed: seed(),
            protect: plan.flow_protect_ms,
        }),
        report_offload: fast.iter().any(Option::is_some),
        ..WorkerConfig::default()
    };
    let mut shared: Vec<Arc<SharedCounters>> = Vec::new();
    let mut wstats: Vec<Arc<WorkerStats>> = Vec::new();
    let tids: Arc<Vec<AtomicI32>> = Arc::new((0..nworkers).map(|_| AtomicI32::new(0)).collect());
    let mut handles = Vec::new();
    let punt_rates = PuntRates::new(&plan.punt);
    for (w, queues) in per_worker.into_iter().enumerate() {
        let mut cfg = wconfig;
        if let Some(f) = cfg.flow.as_mut() {
            f.seed ^= (w as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
        let worker = lab.worker(cfg);
        shared.push(worker.shared());
        let st = Arc::new(WorkerStats::default());
        wstats.push(Arc::clone(&st));
        let mut lp = WorkerLoop::new(
            worker,
            queues,
            tx.clone(),
            Arc::clone(&wake),
            Arc::clone(&punt_rates),
            Duration::from_micros(plan.busy_poll_us),
            plan.batch,
            st,
        );
        let mut installers = Vec::with_capacity(fast.len());
        for f in &fast {
            installers.push(match f {
                Some(f) => Some(FastInstaller::new(
                    f.try_clone()
                        .map_err(|e| Error::Io(e).context(format!("worker {w}: fast path")))?,
                    fast_mtu.clone(),
                )),
                None => None,
            });
        }
        lp.set_fast_path(installers);
        let core = plan.workers.get(w).copied().unwrap_or(1);
        let priority = plan.worker_priority;
        let stop = Arc::clone(&stop);
        let tids = Arc::clone(&tids);
        let h = std::thread::Builder::new()
            .name(format!("vfsr-worker{w}"))
            .spawn(move || {
                if let Some(t) = tids.get(w) {
                    t.store(gettid(), Ordering::Relaxed);
                }
                if let Err(e) = pin(core) {
                    tracing::warn!(worker = w, error = %e, "pinning");
                }
                if let Err(e) = realtime(priority) {
                    tracing::warn!(worker = w, error = %e, "it runs with ordinary priority");
                }
                lp.run(&stop);
            })
            .map_err(|e| Error::os(format!("starting worker {w}"), e))?;
        handles.push(h);
    }
    drop(tx);

    let mut control = Control::new(lab, ctl_ports, rx, Arc::clone(&wake), &plan.punt);
    control.set_solicit_rate(plan.neighbor.solicit_rate);
    control.sources = Sources::open(plan, &kernel_ids, &mut control.router)?;
    control.set_worker_rates(punt_rates);
    let mut ctl_fast = Vec::new();
    for f in fast.iter().flatten() {
        ctl_fast.push(
            f.try_clone()
                .map_err(|e| Error::Io(e).context("control plane: fast path"))?,
        );
    }
    control.set_fast_paths(ctl_fast);
    control.set_policers(policers);
    // The control plane's thread takes its priority only now, after every worker started
    // (threads inherit the policy of the one that spawns them).
    if let Err(e) = realtime(plan.control_priority) {
        tracing::warn!(error = %e, "control plane: it runs with ordinary priority");
    }
    let mut api = match &plan.api {
        Some(a) => match ApiServer::bind(&a.socket, a.group.as_deref()) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::error!(error = %e, "control API off");
                None
            }
        },
        None => None,
    };
    let mut metrics = match plan.api.as_ref().and_then(|a| a.metrics) {
        Some(addr) => match MetricsServer::bind(addr) {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::error!(error = %e, "metrics off");
                None
            }
        },
        None => None,
    };
    // The configuration in force: a reload changes its live parts.
    let mut live_plan = plan.clone();
    let mut do_reload = |control: &mut Control<E4, E6>, current: &mut Plan| match &opts.config {
        Some(path) => crate::reload::reload(control, current, path, &kernel_ids, &cores),
        None => Err(Error::invalid(
            "reload",
            "vfsrd was started without a configuration file to read again",
        )),
    };
    ready(&installed);
    let mut service = Service::new();
    let status = format!(
        "forwarding on {} port(s) with {} worker(s); {} IPv4 and {} IPv6 prefixes at start",
        plan.interfaces.len(),
        plan.workers.len(),
        installed.routes4,
        installed.routes6
    );
    service.ready(&status);
    if let Some(w) = service.watchdog() {
        tracing::info!(interval_ms = w.as_millis() as u64, "systemd watchdog on");
    }
    let control_tid = gettid();
    let started = Instant::now();
    let mut next_stats = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let mut extra = api.as_ref().map(ApiServer::fds).unwrap_or_default();
        extra.extend(metrics.as_ref().map(MetricsServer::fds).unwrap_or_default());
        control.set_extra_fds(extra);
        control.step(50);
        service.tick();
        if opts.reload.swap(false, Ordering::Relaxed) {
            service.reloading();
            let outcome = do_reload(&mut control, &mut live_plan);
            service.ready(&status);
            match outcome {
                Ok(v) => tracing::info!(
                    applied = %words(v.get("applied").unwrap_or(&serde_json::Value::Null)),
                    restart_needed =
                        %words(v.get("restart_needed").unwrap_or(&serde_json::Value::Null)),
                    "reloaded"
                ),
                Err(e) => tracing::error!(error = %e, "reload refused"),
            }
        }
        if api.is_some() || metrics.is_some() {
            control.read_policed(Duration::from_millis(100));
            let mut view = View {
                control: &mut control,
                plan: &mut live_plan,
                shared: &shared,
                wstats: &wstats,
                fast: &fast,
                backends: &backends,
                tids: &tids,
                uptime: started.elapsed(),
                reload: &mut do_reload,
            };
            if let Some(a) = api.as_mut() {
                a.work(&mut view);
            }
            if let Some(m) = metrics.as_mut() {
                m.work(&view, api.as_ref().map_or(0, ApiServer::clients));
            }
        }
        if opts.dump.swap(false, Ordering::Relaxed) {
            match &opts.fib_dump {
                Some(path) => {
                    write_text_atomically(path, &crate::dump::fib_text(&mut control.router))
                }
                None => {
                    tracing::warn!("a FIB dump was asked for, but no --fib-dump FILE was given")
                }
            }
        }
        if let Some(path) = &opts.stats {
            if Instant::now() >= next_stats {
                next_stats += Duration::from_secs(1);
                control.read_policed(Duration::ZERO);
                let mut v = stats_json(
                    &Counters::sum(shared.iter().map(|s| s.as_ref())),
                    &control.counters,
                    &wstats,
                    &fast,
                    control_tid,
                    &tids,
                    started.elapsed(),
                );
                if let Some(o) = v.as_object_mut() {
                    o.insert("routing".into(), control.sources.stats(&control.router));
                }
                write_atomically(path, &v);
            }
        }
    }
    service.stopping();
    ordinary();
    for h in handles {
        let _ = h.join();
    }
    let counters = Counters::sum(shared.iter().map(|s| s.as_ref()));
    let mut io = IoStats::default();
    for s in &wstats {
        if let Ok(g) = s.io.lock() {
            for (_, q) in g.iter() {
                io.add(q);
            }
        }
    }
    if let Some(path) = &opts.stats {
        control.read_policed(Duration::ZERO);
        let mut v = stats_json(
            &counters,
            &control.counters,
            &wstats,
            &fast,
            control_tid,
            &tids,
            started.elapsed(),
        );
        if let Some(o) = v.as_object_mut() {
            o.insert("routing".into(), control.sources.stats(&control.router));
        }
        write_atomically(path, &v);
    }
    drop(keep);
    Ok(Summary {
        counters,
        per_worker: shared.iter().map(|s| s.read()).collect(),
        control: control.counters,
        io,
        installed,
    })
}

/// A JSON list of strings as `a; b` (`-` when empty).
fn words(v: &Value) -> String {
    let w: Vec<&str> = v
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if w.is_empty() {
        "-".into()
    } else {
        w.join("; ")
    }
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ u64::from(std::process::id()).rotate_left(32)
}

fn write_text_atomically(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    let ok = std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = ok {
        tracing::error!(file = %path.display(), error = %e, "writing the FIB dump");
    }
}

fn write_atomically(path: &std::path::Path, v: &Value) {
    let tmp = path.with_extension("tmp");
    let ok = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(v.to_string().as_bytes()))
        .and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = ok {
        tracing::error!(file = %path.display(), error = %e, "writing the stats file");
    }
}

/// The stats file's JSON.
pub fn stats_json(
    c: &Counters,
    control: &ControlCounters,
    workers: &[Arc<WorkerStats>],
    fast: &[Option<FastPath>],
    control_tid: i32,
    tids: &[AtomicI32],
    uptime: Duration,
) -> Value {
    let mut drops = Map::new();
    for r in DropReason::ALL {
        let n = c.dropped(*r);
        if n > 0 {
            drops.insert(r.name().into(), json!(n));
        }
    }
    let mut punts = Map::new();
    for p in PuntClass::ALL {
        punts.insert(p.name().into(), json!(c.punted(*p)));
    }
    let mut io = IoStats::default();
    let mut queues = Vec::new();
    let mut limited = 0;
    let mut sleeps = 0;
    for w in workers {
        limited += w.punts_limited.load(Ordering::Relaxed);
        sleeps += w.sleeps.load(Ordering::Relaxed);
        if let Ok(g) = w.io.lock() {
            for (name, q) in g.iter() {
                io.add(q);
                queues.push(json!({"name": name, "rx": q.rx, "rx_dropped": q.rx_dropped,
                    "tx": q.tx, "tx_dropped": q.tx_dropped, "kicks": q.kicks}));
            }
        }
    }
    let worker_cpu: Vec<f64> = tids
        .iter()
        .map(|t| thread_cpu_seconds(t.load(Ordering::Relaxed)))
        .collect();
    // The XDP fast path: frames its programs forwarded (never seen by a worker) and what
    // the workers installed for them.
    let mut fast_ports = Vec::new();
    let (mut fast_fwd, mut fast_stale) = (0u64, 0u64);
    for f in fast.iter().flatten() {
        let c = f.counters().unwrap_or_default();
        fast_fwd += c.forwarded;
        fast_stale += c.stale;
        fast_ports.push(
            json!({"name": f.name(), "forwarded": c.forwarded, "stale": c.stale,
            "generation": f.generation()}),
        );
    }
    let mut installs = InstallCounters::default();
    for w in workers {
        if let Ok(g) = w.fast.lock() {
            installs.add(&g);
        }
    }
    json!({
        "uptime_s": uptime.as_secs_f64(),
        "rx": c.rx(),
        "forwarded": c.outcome(Outcome::Forwarded),
        "dropped": c.outcome(Outcome::Dropped),
        "punted": c.outcome(Outcome::Punted),
        "held": c.outcome(Outcome::Held),
        "drops": drops,
        "punts": punts,
        "punts_limited": limited,
        "worker_sleeps": sleeps,
        "io": {"rx": io.rx, "rx_dropped": io.rx_dropped, "rx_invalid": io.rx_invalid,
               "tx": io.tx, "tx_dropped": io.tx_dropped, "kicks": io.kicks},
        "queues": queues,
        "control": serde_json::to_value(control).unwrap_or(Value::Null),
        "cpu_seconds": {"control": thread_cpu_seconds(control_tid), "workers": worker_cpu},
        "fast_path": {"enabled": fast.iter().any(Option::is_some), "forwarded": fast_fwd,
            "stale": fast_stale, "installed": installs.installed, "install_limited": installs.limited,
            "install_failed": installs.failed, "ports": fast_ports},
    })
}
