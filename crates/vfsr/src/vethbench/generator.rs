//! The generator and what it sends: a thread in the generator's namespace running the
//! `gen` XDP program (`bpf/bench.c`) with `BPF_F_TEST_XDP_LIVE_FRAMES`, paced through the
//! program's `conf` map and counted in its per-CPU `counts`; the 64-byte UDP frame it
//! starts from; the random destinations it writes into that frame.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vfsr_io::bpf::{self, BpfObject};
use vfsr_lpm::Route;

use super::{ifindex_in, mac_in, Error, Lab3, GEN_CORE};

/// Sum of a per-CPU counter slot.
pub(super) fn percpu(map_fd: i32, slot: u32) -> u64 {
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
    thread: Option<std::thread::JoinHandle<Result<(), Error>>>,
    /// The program and its maps, kept loaded until the thread has stopped.
    _obj: Option<BpfObject>,
}

/// How the generator's thread is scheduled on its core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scheduling {
    /// Ordinary scheduling, beside whatever else runs on the core.
    Ordinary,
    /// `SCHED_IDLE`: only what the core has left, behind every ordinary thread.
    Idle,
}

/// Program runs per test run.
const RUNS_PER_CALL: u32 = 1 << 21;

impl Generator {
    /// Loads the `gen` program, gives it `dests` (their number a power of two, at most the
    /// `dests` map's size) and the frame from the generator's port to the router's, and
    /// starts its thread in `l`'s generator namespace, paused, for at most `limit`.
    pub(crate) fn launch(
        l: &Lab3,
        dests: &[u32],
        limit: Duration,
        scheduling: Scheduling,
    ) -> Result<Generator, Error> {
        // Asked first, so a kernel that refuses it is named before any namespace sees traffic.
        if let Some(why) = bpf::live_frames_refusal() {
            return Err(Error::LiveFrames(why));
        }
        let obj = BpfObject::load("bench", bpf::objects::BENCH)?;
        let dmap = obj.map_fd("dests")?;
        for (i, d) in (0u32..).zip(dests) {
            bpf::map_update(dmap, &i.to_ne_bytes(), &d.to_be_bytes())?;
        }
        // Slot 0: the mask the program takes its random index into the destinations with.
        let mask = (dests.len() as u64)
            .checked_sub(1)
            .ok_or(Error::NoDestinations)?;
        let conf = obj.map_fd("conf")?;
        bpf::map_update(conf, &0u32.to_ne_bytes(), &mask.to_ne_bytes())?;
        let counts = obj.map_fd("counts")?;
        let frame = template(mac_in(&l.lab, "rtr", &l.a)?, mac_in(&l.lab, "gen", "gen0")?);
        let tmap = obj.map_fd("tmpl")?;
        bpf::map_update(tmap, &0u32.to_ne_bytes(), frame.get(..42).unwrap_or(&[]))?;
        let gen_if = ifindex_in(&l.lab, "gen", "gen0")?;
        let prog = obj.prog_fd("gen")?;
        let ns_path = format!("/var/run/netns/{}", l.lab.name("gen"));
        let start = move || Generator::start(ns_path, prog, conf, counts, gen_if, frame, limit);
        let mut g = match scheduling {
            Scheduling::Ordinary => start(),
            // The thread inherits SCHED_IDLE from the thread that starts it.
            Scheduling::Idle => std::thread::spawn(move || {
                let _ = vfsr_cpu::idle(0);
                start()
            })
            .join()
            .map_err(|_| Error::GeneratorStart)?,
        };
        g._obj = Some(obj);
        Ok(g)
    }

    fn start(
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
        let thread = std::thread::spawn(move || -> Result<(), Error> {
            let f = std::fs::File::open(&ns_path).map_err(|err| Error::File {
                path: ns_path.clone().into(),
                err,
            })?;
            // SAFETY: setns on a descriptor we hold open, for this thread only.
            if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(Error::Setns(std::io::Error::last_os_error()));
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
                .map_err(Error::Generator)?;
            }
            Ok(())
        });
        Generator {
            stop,
            paused,
            conf,
            counts,
            thread: Some(thread),
            _obj: None,
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

    pub(crate) fn finish(mut self) -> Result<(), Error> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| Error::GeneratorPanicked)?,
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
fn template(dst_mac: [u8; 6], src_mac: [u8; 6]) -> Vec<u8> {
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
