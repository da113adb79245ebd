//! `vfsr demo` as a live router: builds two hosts and a router in network namespaces, starts
//! `vfsrd` in the router's namespace, has it learn the synthetic full table (about 900k IPv4
//! and 100k IPv6 routes, every one towards host B) over BGP, and sends real traffic through
//! it with `ping`, `traceroute` and `iperf3`. Prints the router's counters, then tears
//! everything down.
//!
//! ```text
//!   a: eth0 10.1.0.2 ── r1 [ vfsrd + FRR ] r2 ── eth0 10.2.0.2 :b   gobgpd (AS 65002) holds
//!                            zebra ─FPM─▶ vfsrd                     the table, next hop b;
//!                            bgpd (AS 65001) ◀── BGP over vr2 ───   one address per route
//!                                                                   tried on b's loopback
//! ```
//!
//! FRR's zebra runs with its FPM module and streams what bgpd learns to vfsrd. When FRR or
//! gobgpd cannot be started (not installed, say), the demo says why and gives vfsrd the
//! table in its configuration instead.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vfsr_lpm::Route;
use vfsrd::daemons;
use vfsrd::harness::{self, Vfsrd};
use vfsrd::netlab::{self, NetLab};

/// What stops the demo.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No vfsrd binary next to vfsr.
    #[error("vfsrd not built")]
    NoVfsrd,
    /// A namespace, link, address or command of the lab.
    #[error(transparent)]
    Lab(#[from] netlab::Error),
    /// FRR or gobgpd could not be started or driven.
    #[error(transparent)]
    Daemon(#[from] daemons::Error),
    /// The BGP sessions or the table did not come in time.
    #[error(transparent)]
    Timeout(#[from] daemons::Timeout),
    /// vfsrd did not start or did not say it was ready.
    #[error("starting vfsrd: {0}")]
    Vfsrd(#[source] harness::Error),
    /// A command the demo shows failed (its command line, what it wrote on standard error).
    #[error("{command} failed: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// What it wrote on standard error.
        stderr: String,
    },
    /// The iperf3 server could not be started.
    #[error("iperf3 -s: {0}")]
    Iperf(#[source] std::io::Error),
    /// FRR or gobgpd programs are not installed (which).
    #[error(
        "FRR and gobgpd are needed to learn the table over BGP; missing: {} (./demo.sh \
         installs them)",
        .0.join(", ")
    )]
    Missing(Vec<&'static str>),
}

/// Whether the live demo can run here; the reason when not.
pub fn unavailable() -> Option<String> {
    if let Err(e) = netlab::available() {
        return Some(e.to_string());
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

/// Starts vfsrd in namespace `rt` with `config` (through the harness, which prints every
/// line it writes); returns once it is ready.
fn start_vfsrd(lab: &NetLab, vfsrd: &std::path::Path, config: &str) -> Result<Vfsrd, Error> {
    Vfsrd::start(lab, "rt", vfsrd, "demo", config).map_err(Error::Vfsrd)
}

fn read_stats(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
}

const PORTS: &str = r#"
[[interface]]
name = "r1"
addresses = ["10.1.0.1/24", "fd00:1::1/64"]
[[interface]]
name = "r2"
addresses = ["10.2.0.1/24", "fd00:2::1/64"]
"#;

/// The router side over BGP: FRR in the router's namespace (zebra streaming to vfsrd), the
/// speaker in b already holding the table. Returns FRR's handle once vfsr's FIB holds every
/// route, after printing how long each part took.
fn learn_over_bgp(
    lab: &NetLab,
    stats: &std::path::Path,
    want4: usize,
    want6: usize,
) -> Result<daemons::Frr, Error> {
    let bgpd = "route-map ACCEPT permit 10\n!\nrouter bgp 65001\n bgp router-id 10.2.0.1\n                 neighbor 10.2.0.2 remote-as 65002\n neighbor 10.2.0.2 timers 3 9\n                 neighbor 10.2.0.2 timers connect 1\n neighbor fd00:2::2 remote-as 65002\n                 neighbor fd00:2::2 timers 3 9\n neighbor fd00:2::2 timers connect 1\n                 address-family ipv4 unicast\n  neighbor 10.2.0.2 activate\n                  neighbor 10.2.0.2 route-map ACCEPT in\n  no neighbor fd00:2::2 activate\n                 exit-address-family\n address-family ipv6 unicast\n                  neighbor fd00:2::2 activate\n  neighbor fd00:2::2 route-map ACCEPT in\n                 exit-address-family\n";
    let t0 = Instant::now();
    let frr = daemons::Frr::start(
        lab,
        "rt",
        daemons::FrrConfig {
            zebra: String::new(),
            bgpd: Some(bgpd.into()),
            staticd: None,
            fpm: Some(daemons::FpmTarget::local(true)),
        },
    )?;
    println!(
        "  FRR up in {:.1} s: zebra with dplane_fpm_nl, bgpd AS 65001 peering with b over vfsrd's \
         TAP vr2",
        t0.elapsed().as_secs_f64()
    );
    let est = daemons::wait_until("the BGP sessions with b", Duration::from_secs(60), || {
        frr.bgp_established("10.2.0.2") && frr.bgp_established("fd00:2::2")
    })?;
    println!(
        "  BGP sessions established {:.1} s after FRR started",
        est.as_secs_f64()
    );
    let t_est = Instant::now();
    let mut bgpd_done: Option<f64> = None;
    let mut zebra_done: Option<f64> = None;
    let mut last = 0u64;
    let mut still = (0u64, Instant::now());
    daemons::wait_until(
        "vfsr's FIB to hold the whole table",
        Duration::from_secs(600),
        || {
            let v = read_stats(stats);
            let fib = &v["routing"]["rib_routes"]["fpm"];
            let (n4, n6) = (
                fib["v4"].as_u64().unwrap_or(0),
                fib["v6"].as_u64().unwrap_or(0),
            );
            let secs = t_est.elapsed().as_secs_f64();
            if zebra_done.is_none() {
                let z = frr.fib_count(daemons::Family::V4, "ebgp").unwrap_or(0)
                    + frr.fib_count(daemons::Family::V6, "ebgp").unwrap_or(0);
                if z as usize >= want4 + want6 {
                    zebra_done = Some(secs);
                }
                if bgpd_done.is_none() && z > 0 {
                    bgpd_done = Some(secs);
                }
            }
            if n4 + n6 >= last + 100_000 {
                last = n4 + n6;
                println!("  {secs:5.1} s: vfsr holds {n4} IPv4 and {n6} IPv6 routes from zebra");
            }
            if n4 + n6 != still.0 {
                still = (n4 + n6, Instant::now());
            }
            // zebra also sends its connected subnets (the TAPs' two per family).
            let all = n4 as usize >= want4 + 2 && n6 as usize >= want6 + 2;
            // bgpd may refuse a few prefixes (its own connected subnets, say): a count that
            // has stood still for 5 s at 99 % of the table is the whole of what it sent.
            let settled = still.1.elapsed() > Duration::from_secs(5)
                && (n4 + n6) as usize * 100 >= (want4 + want6) * 99;
            all || settled
        },
    )?;
    let v = read_stats(stats);
    let fib = &v["routing"]["rib_routes"]["fpm"];
    let got = |v: &serde_json::Value| v.as_u64().unwrap_or(0).saturating_sub(2);
    println!(
        "  vfsr holds {} of the {want4} IPv4 and {} of the {want6} IPv6 prefixes b announced \
         (and zebra's connected subnets)",
        got(&fib["v4"]),
        got(&fib["v6"])
    );
    println!(
        "  converged: every route in vfsr's FIB {:.1} s after the sessions came up (zebra's \
         first BGP route in its FIB after {:.1} s, all of them after {:.1} s)",
        t_est.elapsed().as_secs_f64(),
        bgpd_done.unwrap_or(f64::NAN),
        zebra_done.unwrap_or(f64::NAN)
    );
    Ok(frr)
}

/// Runs the demo.
pub fn run(seed: u64, prefixes: Option<usize>) -> Result<(), Error> {
    let vfsrd = vfsrd_path().ok_or(Error::NoVfsrd)?;
    let mut table = vfsr_table::synth_table(seed);
    if let Some(n) = prefixes {
        table.v4.truncate(n);
        table.v6.truncate(n / 8);
    }
    let dests = destinations(&table.v4);
    let mut lab = NetLab::new("vd");
    step("topology: host a -- vfsrd -- host b, in network namespaces");
    for ns in ["a", "rt", "b"] {
        daemons::add_ns_without_dad(&mut lab, ns)?;
    }
    lab.veth("a", "eth0", "rt", "r1")?;
    lab.veth("rt", "r2", "b", "eth0")?;
    lab.ip("a", &["addr", "add", "10.1.0.2/24", "dev", "eth0"])?;
    lab.ip("a", &["route", "add", "default", "via", "10.1.0.1"])?;
    lab.ip("b", &["addr", "add", "10.2.0.2/24", "dev", "eth0"])?;
    lab.ip(
        "b",
        &["addr", "add", "fd00:2::2/64", "dev", "eth0", "nodad"],
    )?;
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
    let head = "[router]\ncontrol_core = 0\nworkers = [1]\nfast_path = true\n";

    // The speaker first: gobgpd in b loads the table before any session comes up.
    step("the BGP speaker in b (gobgpd) loads the synthetic full table");
    let speaker = load_speaker(&lab, &table);
    let mut frr = None;
    let mut started = None;
    match &speaker {
        Err(why) => println!("  {why}"),
        Ok(_) => {
            step("starting vfsrd with no route but its connected subnets, listening for zebra");
            let s = start_vfsrd(&lab, &vfsrd, &format!("{head}{PORTS}\n[fpm]\n"))?;
            step("FRR in the router's namespace learns the table from b and streams it to vfsrd");
            let want4 = table
                .v4
                .iter()
                .map(|r| r.prefix)
                .collect::<std::collections::HashSet<_>>()
                .len();
            let want6 = table
                .v6
                .iter()
                .map(|r| r.prefix)
                .collect::<std::collections::HashSet<_>>()
                .len();
            match learn_over_bgp(&lab, s.stats_path(), want4, want6) {
                Ok(f) => {
                    frr = Some(f);
                    started = Some(s);
                }
                Err(e) => {
                    println!("  FRR could not bring the table to vfsrd ({e})");
                    drop(s);
                }
            }
        }
    }
    let started = match started {
        Some(s) => s,
        None => {
            step("vfsrd with the synthetic full table from its configuration instead");
            let config = format!(
                "{head}{PORTS}\n[table]\nsynthetic = true\nseed = {seed}\nvia4 = [\"10.2.0.2\"]\n"
            );
            let t0 = Instant::now();
            let s = start_vfsrd(&lab, &vfsrd, &config)?;
            println!("  up in {:.1} s", t0.elapsed().as_secs_f64());
            s
        }
    };

    let show = |ns: &str, argv: &[&str]| -> Result<(), Error> {
        println!("$ {}", argv.join(" "));
        let o = lab.exec(ns, argv)?;
        print!("{}", String::from_utf8_lossy(&o.stdout));
        if !o.status.success() {
            return Err(Error::Command {
                command: argv.join(" "),
                stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            });
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
        .map_err(Error::Iperf)?;
    std::thread::sleep(Duration::from_millis(400));
    let r = show("a", &["iperf3", "-c", &first, "-t", "3"]);
    let _ = srv.kill();
    let _ = srv.wait();
    r?;

    step("the router's counters");
    std::thread::sleep(Duration::from_millis(1200));
    let v = started.stats();
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

    step("stopping FRR, the speaker and vfsrd (SIGTERM) and removing the namespaces");
    drop(frr);
    drop(speaker);
    drop(started);
    drop(lab);
    println!("done");
    Ok(())
}

/// gobgpd in b, holding the table's routes with b as next hop (IPv4 and IPv6), sessions
/// configured towards the router (they come up once bgpd runs there).
fn load_speaker(lab: &NetLab, table: &vfsr_table::Table) -> Result<daemons::GoBgp, Error> {
    let missing: Vec<&'static str> = daemons::FRR_PROGRAMS
        .iter()
        .chain(daemons::GOBGP_PROGRAMS)
        .copied()
        .filter(|p| !daemons::program_exists(p))
        .collect();
    if !missing.is_empty() {
        return Err(Error::Missing(missing));
    }
    let n = |a: &str| daemons::GoBgpNeighbor {
        address: a
            .parse()
            .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)),
        peer_as: 65001,
        hold_time: 9,
        keepalive: 3,
    };
    let toml = daemons::GoBgpConfig {
        asn: 65002,
        router_id: std::net::Ipv4Addr::new(10, 2, 0, 2),
        neighbors: vec![n("10.2.0.1"), n("fd00:2::1")],
    }
    .toml();
    let t0 = Instant::now();
    let g = daemons::GoBgp::start(lab, "b", &toml)?;
    let mut v4: Vec<daemons::Net> = table
        .v4
        .iter()
        .map(|r| {
            daemons::Net::new(
                std::net::Ipv4Addr::from(r.prefix.addr()).into(),
                r.prefix.len(),
            )
        })
        .collect();
    let mut v6: Vec<daemons::Net> = table
        .v6
        .iter()
        .map(|r| {
            daemons::Net::new(
                std::net::Ipv6Addr::from(r.prefix.addr()).into(),
                r.prefix.len(),
            )
        })
        .collect();
    v4.sort_unstable();
    v4.dedup();
    v6.sort_unstable();
    v6.dedup();
    g.add_routes(&v4, std::net::Ipv4Addr::new(10, 2, 0, 2).into())?;
    g.add_routes(
        &v6,
        std::net::Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 2).into(),
    )?;
    println!(
        "  gobgpd holds {} IPv4 and {} IPv6 routes via b (loaded in {:.1} s)",
        v4.len(),
        v6.len(),
        t0.elapsed().as_secs_f64()
    );
    Ok(g)
}
