//! `vfsr demo` as a live router: builds two hosts and a router in network namespaces, starts
//! `vfsrd` in the router's namespace with the synthetic full table (about 900k IPv4 and 100k
//! IPv6 routes, every one towards host B), and sends real traffic through it with `ping`,
//! `traceroute` and `iperf3`. Prints the router's counters, then tears everything down.
//!
//! ```text
//!   a: eth0 10.1.0.2 ── r1 [ vfsrd, full table ] r2 ── eth0 10.2.0.2 :b
//!                                                       + one address per route tried
//! ```

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use vfsr_lpm::Route;
use vfsrd::netlab::{self, NetLab};

/// Whether the live demo can run here; the reason when not.
pub fn unavailable() -> Option<String> {
    if let Err(e) = netlab::available() {
        return Some(e);
    }
    for t in ["ping", "traceroute", "iperf3"] {
        let ok = Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Some(format!("{t} is not installed"));
        }
    }
    if vfsrd_path().is_none() {
        return Some("the vfsrd binary is not built next to vfsr".into());
    }
    None
}

fn vfsrd_path() -> Option<std::path::PathBuf> {
    let me = std::env::current_exe().ok()?;
    let p = me.parent()?.join("vfsrd");
    p.exists().then_some(p)
}

struct Daemon(Option<Child>);

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Destinations from the table, one per few prefix lengths, that host B will answer for.
fn destinations(routes: &[Route<u32>]) -> Vec<std::net::Ipv4Addr> {
    let mut out = Vec::new();
    for want in [8u8, 16, 20, 24] {
        if let Some(r) = routes
            .iter()
            .find(|r| r.prefix.len() == want && !covers_lab(r.prefix.addr(), want))
        {
            out.push(std::net::Ipv4Addr::from(r.prefix.addr() | 1));
        }
    }
    out
}

/// Whether a prefix overlaps the demo's own link subnets (10.1.0.0/24, 10.2.0.0/24).
fn covers_lab(addr: u32, len: u8) -> bool {
    let m = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    [0x0a01_0000u32, 0x0a02_0000].iter().any(|n| n & m == addr)
        || addr >> 24 == 10
        || addr >> 24 == 127
}

fn step(title: &str) {
    println!("\n== {title}");
}

/// Runs the demo.
pub fn run(seed: u64) -> Result<(), String> {
    let vfsrd = vfsrd_path().ok_or("vfsrd not built")?;
    let table = vfsr_table::synth_table(seed);
    let dests = destinations(&table.v4);
    let mut lab = NetLab::new("vd");
    step("topology: host a -- vfsrd -- host b, in network namespaces");
    for ns in ["a", "rt", "b"] {
        lab.add_ns(ns)?;
    }
    lab.veth("a", "eth0", "rt", "r1")?;
    lab.veth("rt", "r2", "b", "eth0")?;
    lab.ip("a", &["addr", "add", "10.1.0.2/24", "dev", "eth0"])?;
    lab.ip("a", &["route", "add", "default", "via", "10.1.0.1"])?;
    lab.ip("b", &["addr", "add", "10.2.0.2/24", "dev", "eth0"])?;
    lab.ip("b", &["route", "add", "default", "via", "10.2.0.1"])?;
    // The hosts' ends take frames redirected by an XDP program (GRO on), which the
    // router's XDP fast path sends them.
    for ns in ["a", "b"] {
        lab.sh(ns, &["ethtool", "-K", "eth0", "gro", "on"])?;
    }
    for d in &dests {
        lab.ip("b", &["addr", "add", &format!("{d}/32"), "dev", "lo"])?;
    }
    println!(
        "a: 10.1.0.2/24 via 10.1.0.1; b: 10.2.0.2/24 via 10.2.0.1, and on its loopback {}",
        dests
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let dir = std::env::temp_dir();
    let cfg = dir.join(format!("vfsr-demo-{}.toml", std::process::id()));
    let stats = dir.join(format!("vfsr-demo-{}.json", std::process::id()));
    std::fs::write(
        &cfg,
        format!(
            r#"[router]
control_core = 0
workers = [1]
fast_path = true

[[interface]]
name = "r1"
addresses = ["10.1.0.1/24"]
[[interface]]
name = "r2"
addresses = ["10.2.0.1/24"]

[table]
synthetic = true
seed = {seed}
via4 = ["10.2.0.2"]
"#
        ),
    )
    .map_err(|e| format!("{}: {e}", cfg.display()))?;
    step("starting vfsrd with the synthetic full table");
    let t0 = Instant::now();
    let mut child = lab
        .command("rt", &vfsrd.display().to_string())
        .arg("--config")
        .arg(&cfg)
        .arg("--stats")
        .arg(&stats)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting vfsrd: {e}"))?;
    let out = child.stdout.take().ok_or("no stdout")?;
    let mut daemon = Daemon(Some(child));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            println!("  {line}");
            let _ = tx.send(line);
        }
    });
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if l.contains("ready") => break,
            Ok(_) => {}
            Err(_) => return Err("vfsrd did not become ready within 60 s".into()),
        }
    }
    println!("  up in {:.1} s", t0.elapsed().as_secs_f64());

    let show = |ns: &str, argv: &[&str]| -> Result<(), String> {
        println!("$ {}", argv.join(" "));
        let o = lab.exec(ns, argv)?;
        print!("{}", String::from_utf8_lossy(&o.stdout));
        if !o.status.success() {
            return Err(format!(
                "{} failed: {}",
                argv.join(" "),
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        Ok(())
    };
    let first = dests
        .first()
        .map(|d| d.to_string())
        .unwrap_or_else(|| "10.2.0.2".into());
    step(
        "ping the router, then through it (cold ARP cache: the first packet waits for resolution)",
    );
    show("a", &["ping", "-c", "3", "-i", "0.2", "10.1.0.1"])?;
    for d in &dests {
        show("a", &["ping", "-c", "3", "-i", "0.2", &d.to_string()])?;
    }
    step("traceroute: the router answers with ICMP Time Exceeded");
    show("a", &["traceroute", "-n", "-q", "1", "-w", "2", &first])?;
    step("iperf3 TCP through the router, 3 s");
    let mut srv = lab
        .command("b", "iperf3")
        .args(["-s", "-1"])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("iperf3 -s: {e}"))?;
    std::thread::sleep(Duration::from_millis(400));
    let r = show("a", &["iperf3", "-c", &first, "-t", "3"]);
    let _ = srv.kill();
    let _ = srv.wait();
    r?;

    step("the router's counters");
    std::thread::sleep(Duration::from_millis(1200));
    let text = std::fs::read_to_string(&stats).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
    println!(
        "received {}, forwarded {}, dropped {}, punted {}",
        v["rx"], v["forwarded"], v["dropped"], v["punted"]
    );
    let f = &v["fast_path"];
    println!(
        "XDP fast path: {} frames forwarded by the ports' XDP programs from {} decisions the \
         worker installed; entries retired {} times by neighbor changes",
        f["forwarded"], f["installed"], v["control"]["fast_invalidations"]
    );
    println!("drops by reason: {}", v["drops"]);
    println!("control plane: {}", v["control"]);
    println!("queues: {}", v["queues"]);
    println!("cpu seconds: {}", v["cpu_seconds"]);

    step("stopping vfsrd (SIGTERM) and removing the namespaces");
    if let Some(c) = daemon.0.take() {
        // SAFETY: signals our own child.
        unsafe {
            libc::kill(c.id() as i32, libc::SIGTERM);
        }
        let mut c = c;
        let _ = c.wait();
        for l in rx.try_iter() {
            let _ = l;
        }
    }
    let _ = std::fs::remove_file(&cfg);
    let _ = std::fs::remove_file(&stats);
    drop(lab);
    println!("done");
    Ok(())
}
