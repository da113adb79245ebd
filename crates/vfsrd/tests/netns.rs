//! vfsrd as a real router between network namespaces, tested with the real tools.
//!
//! ```text
//!   h1 eth0 ── r1 ┐            ┌ r2 ── eth0 h2      (r2: MTU 1400)
//!  10.1.0.2       │   vfsrd    │      10.2.0.2
//!  fd00:1::2      │    (rt)    │      fd00:2::2
//!                 │            ├ r3 ── eth0 n1   10.3.0.2 ┐ both hold 10.99.0.1:
//!                 └            └ r4 ── eth0 n2   10.4.0.2 ┘ an ECMP route's two next hops
//! ```
//!
//! Runs once over AF_XDP and once over AF_PACKET; a last test pings the router beyond its
//! ICMP punt limit (policed in the XDP program) and reloads a higher one. Needs root and
//! network namespaces; skips with a printed reason otherwise. The namespaces are deleted even
//! when a check fails.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use vfsrd::harness::Vfsrd;
use vfsrd::netlab::{self, NetLab};

const VFSRD: &str = env!("CARGO_BIN_EXE_vfsrd");

fn tool(name: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn skip_reason() -> Option<String> {
    if let Err(e) = netlab::available() {
        return Some(e.to_string());
    }
    for t in ["ping", "traceroute", "iperf3", "ethtool"] {
        if !tool(t) {
            return Some(format!("{t} is not installed"));
        }
    }
    None
}

/// One router at a time: each pins its worker to core 1, and the throughput checks need
/// that core to themselves (three at once starve the AF_PACKET worker on a 2-core machine).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The router and its namespaces; the fields drop in order: vfsrd stops before the
/// namespaces go.
struct Router {
    daemon: Vfsrd,
    lab: NetLab,
    _turn: std::sync::MutexGuard<'static, ()>,
}

/// The topology and a running vfsrd; `fast`: with the XDP fast path (the hosts' veth ends
/// then take redirected frames: GRO on).
fn build(tag: &str, backend: &str, fast: bool) -> Router {
    let turn = one_at_a_time();
    let mut lab = NetLab::new(tag);
    for ns in ["h1", "rt", "h2", "n1", "n2"] {
        lab.add_ns(ns).unwrap();
    }
    lab.veth("h1", "eth0", "rt", "r1").unwrap();
    lab.veth("rt", "r2", "h2", "eth0").unwrap();
    lab.veth("rt", "r3", "n1", "eth0").unwrap();
    lab.veth("rt", "r4", "n2", "eth0").unwrap();
    lab.ip("rt", &["link", "set", "r2", "mtu", "1400"]).unwrap();
    let host = |ns: &str, v4: &str, gw4: &str, v6: Option<(&str, &str)>| {
        lab.ip(ns, &["addr", "add", v4, "dev", "eth0"]).unwrap();
        lab.ip(ns, &["route", "add", "default", "via", gw4])
            .unwrap();
        if let Some((a, g)) = v6 {
            lab.ip(ns, &["addr", "add", a, "dev", "eth0", "nodad"])
                .unwrap();
            lab.ip(ns, &["-6", "route", "add", "default", "via", g])
                .unwrap();
        }
    };
    host(
        "h1",
        "10.1.0.2/24",
        "10.1.0.1",
        Some(("fd00:1::2/64", "fd00:1::1")),
    );
    host(
        "h2",
        "10.2.0.2/24",
        "10.2.0.1",
        Some(("fd00:2::2/64", "fd00:2::1")),
    );
    host("n1", "10.3.0.2/24", "10.3.0.1", None);
    host("n2", "10.4.0.2/24", "10.4.0.1", None);
    if fast {
        for ns in ["h1", "h2", "n1", "n2"] {
            lab.sh(ns, &["ethtool", "-K", "eth0", "gro", "on"]).unwrap();
        }
    }
    for ns in ["n1", "n2"] {
        lab.ip(ns, &["addr", "add", "10.99.0.1/32", "dev", "lo"])
            .unwrap();
    }
    let config = format!(
        r#"
[router]
control_core = 0
workers = [1]
busy_poll_us = 50
fast_path = {fast}

[api]
socket = "@SOCKET@"

[[interface]]
name = "r1"
backend = "{backend}"
addresses = ["10.1.0.1/24", "fd00:1::1/64"]
[[interface]]
name = "r2"
backend = "{backend}"
mtu = 1400
addresses = ["10.2.0.1/24", "fd00:2::1/64"]
[[interface]]
name = "r3"
backend = "{backend}"
addresses = ["10.3.0.1/24"]
[[interface]]
name = "r4"
backend = "{backend}"
addresses = ["10.4.0.1/24"]

[[route]]
prefix = "10.99.0.0/16"
via = ["10.3.0.2", "10.4.0.2"]
"#
    );
    let daemon = Vfsrd::start(&lab, "rt", Path::new(VFSRD), tag, &config)
        .expect("vfsrd starts and says ready");
    Router {
        daemon,
        lab,
        _turn: turn,
    }
}

fn stats(r: &Router) -> serde_json::Value {
    std::thread::sleep(Duration::from_millis(1200));
    r.daemon.stats()
}

fn received(ping_out: &str) -> u32 {
    ping_out
        .split(',')
        .find_map(|p| p.trim().strip_suffix(" received"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

fn ping(r: &Router, ns: &str, v6: bool, dst: &str, n: u32) -> u32 {
    let count = n.to_string();
    let mut argv = vec!["ping", "-n", "-c", &count, "-i", "0.2", "-W", "2"];
    if v6 {
        argv.insert(1, "-6");
    }
    argv.push(dst);
    let o = r.lab.exec(ns, &argv).unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    println!("{text}");
    received(&text)
}

fn the_router_forwards_and_answers(tag: &str, backend: &str, fast: bool) {
    if let Some(why) = skip_reason() {
        vfsr_skip::skip(&why);
        return;
    }
    let mut r = build(tag, backend, fast);

    // Ping through the router from cold neighbor caches: the first packet waits in the
    // hold queue while the router resolves h2, and is delivered.
    assert_eq!(
        ping(&r, "h1", false, "10.2.0.2", 3),
        3,
        "IPv4 ping h1 -> h2"
    );
    assert_eq!(
        ping(&r, "h1", true, "fd00:2::2", 3),
        3,
        "IPv6 ping h1 -> h2"
    );
    // The router's own addresses answer.
    assert_eq!(ping(&r, "h1", false, "10.1.0.1", 3), 3, "ping the router");
    assert_eq!(
        ping(&r, "h1", true, "fd00:1::1", 3),
        3,
        "ping -6 the router"
    );

    // traceroute shows the router as the first hop (ICMP Time Exceeded from 10.1.0.1).
    let t = r
        .lab
        .sh(
            "h1",
            &[
                "traceroute",
                "-n",
                "-q",
                "1",
                "-w",
                "2",
                "-m",
                "4",
                "10.2.0.2",
            ],
        )
        .unwrap();
    println!("{t}");
    let hops: Vec<&str> = t.lines().skip(1).collect();
    assert!(hops.first().is_some_and(|l| l.contains("10.1.0.1")), "{t}");
    assert!(hops.get(1).is_some_and(|l| l.contains("10.2.0.2")), "{t}");

    // A TCP connection to the router's own address goes through the TAP to the host stack.
    let listener = r
        .lab
        .in_ns("rt", || TcpListener::bind("10.1.0.1:7777"))
        .unwrap()
        .expect("listen on the router's address (the TAP carries it)");
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
        buf
    });
    let echoed = r
        .lab
        .in_ns("h1", || -> std::io::Result<Vec<u8>> {
            let addr: SocketAddr = "10.1.0.1:7777".parse().unwrap();
            let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
            c.set_read_timeout(Some(Duration::from_secs(5)))?;
            c.write_all(b"hello")?;
            let mut buf = [0u8; 5];
            c.read_exact(&mut buf)?;
            Ok(buf.to_vec())
        })
        .unwrap()
        .expect("TCP to the router");
    assert_eq!(echoed, b"hello");
    assert_eq!(&server.join().unwrap(), b"hello");

    // iperf3 TCP through the router. The egress MTU is 1400 and the hosts' 1500: the
    // first full-size segments get ICMP Fragmentation Needed and the flow continues with
    // the smaller path MTU.
    let mut srv = r
        .lab
        .command("h2", "iperf3")
        .args(["-s", "-1", "-B", "10.2.0.2"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let out = r
        .lab
        .sh("h1", &["iperf3", "-c", "10.2.0.2", "-t", "2", "-J"])
        .unwrap();
    let _ = srv.wait();
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let bps = j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    println!("iperf3 through vfsrd ({backend}): {:.1} Mbit/s", bps / 1e6);
    assert!(bps > 20e6, "iperf3 at {bps} bit/s");
    let route = r.lab.sh("h1", &["ip", "route", "get", "10.2.0.2"]).unwrap();
    assert!(
        route.contains("mtu 1400"),
        "h1 learned the path MTU: {route}"
    );

    // ECMP: 40 UDP flows to 10.99.0.1 spread over n1 and n2, each flow on one path.
    let listen = |ns: &str| {
        r.lab
            .in_ns(ns, || {
                let s = UdpSocket::bind("10.99.0.1:9999").unwrap();
                s.set_read_timeout(Some(Duration::from_millis(300)))
                    .unwrap();
                s
            })
            .unwrap()
    };
    let (s1, s2) = (listen("n1"), listen("n2"));
    let collect = |s: UdpSocket| {
        std::thread::spawn(move || {
            let mut ports = HashSet::new();
            let t0 = Instant::now();
            let mut buf = [0u8; 64];
            while t0.elapsed() < Duration::from_secs(4) {
                if let Ok((_, from)) = s.recv_from(&mut buf) {
                    ports.insert(from.port());
                }
            }
            ports
        })
    };
    let (c1, c2) = (collect(s1), collect(s2));
    r.lab
        .in_ns("h1", || {
            for round in 0..5 {
                for f in 0..40u16 {
                    let s = UdpSocket::bind(("10.1.0.2", 20000 + f)).unwrap();
                    let _ = s.send_to(&[round; 8], "10.99.0.1:9999");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
        .unwrap();
    let (p1, p2) = (c1.join().unwrap(), c2.join().unwrap());
    println!("ECMP: {} flows via n1, {} via n2", p1.len(), p2.len());
    assert!(!p1.is_empty() && !p2.is_empty(), "both paths carry flows");
    assert!(p1.is_disjoint(&p2), "a flow took both paths");
    assert_eq!(p1.len() + p2.len(), 40, "every flow arrived");

    let s = stats(&r);
    println!("{s:#}");
    // Forwarded by the workers, and with the fast path by the XDP programs too.
    let forwarded =
        s["forwarded"].as_u64().unwrap_or(0) + s["fast_path"]["forwarded"].as_u64().unwrap_or(0);
    assert!(forwarded > 1000, "{forwarded} forwarded");
    assert!(s["control"]["released"].as_u64().unwrap_or(0) >= 1);
    assert!(s["control"]["echo_replies"].as_u64().unwrap_or(0) >= 6);
    assert!(s["control"]["to_host"].as_u64().unwrap_or(0) >= 1);
    if fast {
        fast_path_checks(&r, &s);
    }

    // A clean stop: SIGTERM, exit 0, no XDP program and no TAP left.
    // (SIGKILL after the grace would show as a failure here.)
    let status = r.daemon.stop().expect("vfsrd was running");
    assert!(status.success(), "vfsrd stops on SIGTERM: {status:?}");
    let links = r.lab.ip("rt", &["link", "show"]).unwrap();
    assert!(!links.contains("xdp"), "an XDP program was left: {links}");
    assert!(!links.contains("vr1"), "a TAP was left: {links}");
    // The kernel's own stack is as it was on the ports (it answers ARP again).
    let ignore = r
        .lab
        .sh("rt", &["cat", "/proc/sys/net/ipv4/conf/r1/arp_ignore"])
        .unwrap();
    assert_eq!(ignore.trim(), "0", "arp_ignore not restored on r1");
}

/// With the fast path: most of the iperf3 traffic never reached a worker, and after a
/// neighbor's MAC changes the cached decisions retire and traffic follows the new MAC.
fn fast_path_checks(r: &Router, s: &serde_json::Value) {
    let f = &s["fast_path"];
    assert_eq!(f["enabled"], true, "{f}");
    assert!(f["installed"].as_u64().unwrap_or(0) >= 2, "{f}");
    let fwd = f["forwarded"].as_u64().unwrap_or(0);
    assert!(
        fwd > s["forwarded"].as_u64().unwrap_or(0),
        "the XDP program forwarded more than the workers: {f}"
    );
    let before = s["control"]["fast_invalidations"].as_u64().unwrap_or(0);
    // h2 takes a new MAC and tells the router in an ARP request (it pings the router with
    // an empty neighbor cache). Frames to the old MAC would be dropped by h2's kernel.
    r.lab
        .ip(
            "h2",
            &["link", "set", "eth0", "address", "02:00:00:00:99:02"],
        )
        .unwrap();
    r.lab.ip("h2", &["neigh", "flush", "dev", "eth0"]).unwrap();
    assert_eq!(
        ping(r, "h2", false, "10.2.0.1", 1),
        1,
        "h2 pings the router"
    );
    assert_eq!(
        ping(r, "h1", false, "10.2.0.2", 5),
        5,
        "h1 reaches h2 at its new MAC"
    );
    std::thread::sleep(Duration::from_millis(1200));
    let s = stats(r);
    println!("{:#}", s["fast_path"]);
    assert!(
        s["control"]["fast_invalidations"].as_u64().unwrap_or(0) > before,
        "the MAC change retired the fast path's entries"
    );
}

#[test]
fn over_af_xdp() {
    the_router_forwards_and_answers("vx", "xdp", false);
}

#[test]
fn over_af_xdp_with_the_fast_path() {
    the_router_forwards_and_answers("vf", "xdp", true);
}

#[test]
fn over_af_packet() {
    the_router_forwards_and_answers("vp", "packet", false);
}

/// ICMP to the router beyond `[punt] icmp` is dropped by the port's XDP program and counted
/// there (`control.policed_xdp`), and a reload with a higher limit lets every ping through.
#[test]
fn echo_beyond_the_punt_limit_is_policed_in_xdp_and_a_reload_lifts_it() {
    if let Some(why) = skip_reason() {
        vfsr_skip::skip(&why);
        return;
    }
    let _turn = one_at_a_time();
    let mut lab = NetLab::new("pol");
    for ns in ["h1", "rt"] {
        lab.add_ns(ns).unwrap();
    }
    lab.veth("h1", "eth0", "rt", "r1").unwrap();
    lab.ip("h1", &["addr", "add", "10.1.0.2/24", "dev", "eth0"])
        .unwrap();
    let config = |icmp: u32| {
        format!(
            "[router]\ncontrol_core = 0\nworkers = [1]\n\n\
             [[interface]]\nname = \"r1\"\nbackend = \"xdp\"\naddresses = [\"10.1.0.1/24\"]\n\n\
             [punt]\nicmp = {icmp}\n"
        )
    };
    let d = Vfsrd::start(&lab, "rt", Path::new(VFSRD), "pol", &config(2))
        .expect("vfsrd starts and says ready");
    let icmp_policed = |d: &Vfsrd| -> u64 {
        std::thread::sleep(Duration::from_millis(1200));
        d.stats()["control"]["policed_xdp"][2].as_u64().unwrap_or(0)
    };
    let pings = |n: u32| -> u32 {
        let count = n.to_string();
        let argv = [
            "ping", "-n", "-q", "-c", &count, "-i", "0.005", "-W", "1", "10.1.0.1",
        ];
        let o = lab.exec("h1", &argv).unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        println!("{text}");
        received(&text)
    };

    // 100 echo requests in about half a second at 2/s with a burst of 16: the burst is
    // answered (one bucket per receiving CPU in the program, the control plane's own after
    // it), most of the rest is dropped in XDP.
    let answered = pings(100);
    let policed = icmp_policed(&d);
    assert!(
        (10..=24).contains(&answered),
        "{answered} of 100 answered at icmp = 2/s"
    );
    assert!(policed >= 60, "{policed} echo requests policed in XDP");

    // A reload with a high limit: every ping answered, nothing more policed.
    std::fs::write(d.config_path(), config(100_000)).unwrap();
    d.signal(libc::SIGHUP);
    assert!(
        d.logged("reloaded", Duration::from_secs(5)).is_some(),
        "vfsrd did not say it reloaded"
    );
    assert_eq!(pings(50), 50, "every ping answered after the reload");
    assert_eq!(
        icmp_policed(&d),
        policed,
        "nothing policed after the reload"
    );
}
