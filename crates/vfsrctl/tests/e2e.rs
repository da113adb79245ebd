//! vfsrctl against a running vfsrd, every command checked against what the router does.
//!
//! ```text
//!   h1 eth0 ── r1 ┐  rt: vfsrd, API on a socket in /tmp  ┌ r2 ── eth0 s1  10.9.0.2
//!  10.1.0.2       │                                      │       lo 198.51.100.1, 192.0.2.1
//!                 └──────────────────────────────────────┴ r3 ── eth0 s2  10.8.0.2
//!                                                                lo 198.51.100.1, 192.0.2.1
//! ```
//!
//! - `every_command_against_a_live_router`: each `show` command's text and JSON name what
//!   the configuration and the traffic sent made (ports, the static route and its neighbor,
//!   counters that grew); `route add` makes 192.0.2.0/24 reachable through s2 and `route
//!   del` unreachable again; `neighbor flush` empties the tables and forwarding resolves
//!   again; `clear counters` starts them from zero; `top` shows the rates of a ping flood;
//!   bad arguments, a bad prefix, no daemon and a user outside the socket's group each get a
//!   clear error and their exit status; malformed and oversized protocol lines are answered.
//! - `reload_moves_a_route_under_traffic_without_loss`: h1 pings 198.51.100.1 every 2 ms
//!   while the configuration's static route moves from s1 to s2 and `vfsrctl reload` applies
//!   it: every echo is answered, the later ones through s2; a file with an error is refused
//!   and changes nothing; a change that needs a restart is named; SIGHUP reloads as well.
//!
//! Needs root and network namespaces, skips with a printed reason otherwise; needs the vfsrd
//! binary beside vfsrctl's (`cargo test --workspace` builds both).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use vfsrd::daemons::{add_ns_without_dad, skip_reason, wait_until};
use vfsrd::harness::Vfsrd;
use vfsrd::netlab::NetLab;

const VFSRCTL: &str = env!("CARGO_BIN_EXE_vfsrctl");

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn vfsrd_binary() -> Option<PathBuf> {
    let p = Path::new(VFSRCTL).parent()?.join("vfsrd");
    p.exists().then_some(p)
}

fn skipped() -> Option<PathBuf> {
    if let Some(why) = skip_reason(&["ip", "ping", "ethtool"]) {
        vfsr_skip::skip(&why);
        return None;
    }
    match vfsrd_binary() {
        Some(p) => Some(p),
        None => {
            vfsr_skip::skip(format!(
                "no vfsrd binary beside {VFSRCTL} (cargo test --workspace builds it)"
            ));
            None
        }
    }
}

/// h1 — rt (vfsrd) — s1, s2; vfsrd is stopped before the namespaces go.
struct Router {
    vfsrd: Vfsrd,
    lab: NetLab,
}

impl Router {
    fn start(vfsrd: &Path, tag: &str, config: &str) -> Router {
        let mut lab = NetLab::new(tag);
        for ns in ["rt", "h1", "s1", "s2"] {
            add_ns_without_dad(&mut lab, ns).unwrap();
        }
        lab.veth("h1", "eth0", "rt", "r1").unwrap();
        lab.veth("rt", "r2", "s1", "eth0").unwrap();
        lab.veth("rt", "r3", "s2", "eth0").unwrap();
        for (ns, addr, gw) in [
            ("h1", "10.1.0.2/24", "10.1.0.1"),
            ("s1", "10.9.0.2/24", "10.9.0.1"),
            ("s2", "10.8.0.2/24", "10.8.0.1"),
        ] {
            lab.ip(ns, &["addr", "add", addr, "dev", "eth0"]).unwrap();
            lab.ip(ns, &["route", "add", "default", "via", gw]).unwrap();
            lab.sh(ns, &["ethtool", "-K", "eth0", "tx", "off"]).unwrap();
        }
        for s in ["s1", "s2"] {
            for a in ["198.51.100.1/32", "192.0.2.1/32"] {
                lab.ip(s, &["addr", "add", a, "dev", "lo"]).unwrap();
            }
        }
        let vfsrd = Vfsrd::start(&lab, "rt", vfsrd, tag, config).unwrap();
        Router { vfsrd, lab }
    }

    fn socket(&self) -> &Path {
        self.vfsrd.socket()
    }

    /// vfsrctl with `args` (as root, on this router's socket).
    fn ctl(&self, args: &[&str]) -> Output {
        Command::new(VFSRCTL)
            .arg("--socket")
            .arg(self.socket())
            .args(args)
            .output()
            .unwrap()
    }

    /// vfsrctl that must succeed: its standard output.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.ctl(args);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "vfsrctl {args:?}: {:?}\n{out}\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        println!("$ vfsrctl {}\n{out}", args.join(" "));
        out
    }

    /// vfsrctl --json: the answer.
    fn json(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        serde_json::from_str(&self.ok(&a)).unwrap()
    }

    /// Echo replies of `n` pings from h1 to `dst`, `interval` seconds apart.
    fn ping(&self, dst: &str, n: u32, interval: &str) -> u32 {
        let out = self
            .lab
            .exec(
                "h1",
                &[
                    "ping",
                    "-n",
                    "-q",
                    "-c",
                    &n.to_string(),
                    "-i",
                    interval,
                    "-W",
                    "1",
                    dst,
                ],
            )
            .unwrap();
        received(&String::from_utf8_lossy(&out.stdout))
    }

    fn rx_packets(&self, ns: &str) -> u64 {
        self.lab
            .sh(ns, &["cat", "/sys/class/net/eth0/statistics/rx_packets"])
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// Waits for a log line containing `what`.
    fn logged(&self, what: &str) -> String {
        self.vfsrd
            .logged(what, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("vfsrd never logged {what:?}"))
    }

    fn signal(&self, sig: i32) {
        self.vfsrd.signal(sig);
    }
}

fn received(out: &str) -> u32 {
    out.split(',')
        .find_map(|p| p.trim().strip_suffix(" received"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

const CONFIG: &str = r#"
[router]
control_core = 0
workers = [1]
busy_poll_us = 50

[api]
socket = "@SOCKET@"

[[interface]]
name = "r1"
addresses = ["10.1.0.1/24"]
[[interface]]
name = "r2"
addresses = ["10.9.0.1/24"]
[[interface]]
name = "r3"
addresses = ["10.8.0.1/24"]

[[route]]
prefix = "198.51.100.0/24"
via = "10.9.0.2"
"#;

#[test]
fn every_command_against_a_live_router() {
    let _g = serial();
    let Some(vfsrd) = skipped() else { return };
    let r = Router::start(&vfsrd, "ctl", CONFIG);

    // Traffic first, so that neighbors, flows and counters have something to show.
    assert_eq!(r.ping("198.51.100.1", 20, "0.01"), 20);

    let t = r.ok(&["show", "interfaces"]);
    for want in [
        "r1: <UP>",
        "r2: <UP>",
        "r3: <UP>",
        "inet 10.9.0.1/24",
        "link/ether",
    ] {
        assert!(t.contains(want), "{want:?} missing");
    }
    assert!(
        t.contains("backend xdp") || t.contains("backend packet"),
        "the backend running, not the configured `auto`: {t}"
    );
    let j = r.json(&["show", "interfaces"]);
    let (r1, r2) = (&j["interfaces"][0], &j["interfaces"][1]);
    assert_eq!(r2["name"], "r2");
    assert!(r1["rx_packets"].as_u64().unwrap() >= 20, "{r1}");
    // The first echo requests leave through the control plane (they waited for ARP, one
    // or a few depending on how long resolving took).
    assert!(r2["tx_packets"].as_u64().unwrap() >= 15, "{r2}");

    let t = r.ok(&["show", "route"]);
    assert!(
        t.lines()
            .any(|l| l == "198.51.100.0/24 via 10.9.0.2 dev r2 proto static"),
        "{t}"
    );
    assert!(
        t.contains("10.1.0.0/24 connected dev r1 proto connected"),
        "{t}"
    );
    let t = r.ok(&["show", "route", "--source", "static"]);
    assert_eq!(t.lines().count(), 1, "{t}");
    let t = r.ok(&["show", "route", "10.8.0.0/16"]);
    assert_eq!(t.trim(), "10.8.0.0/24 connected dev r3 proto connected");

    let s1_mac = r
        .lab
        .sh("s1", &["cat", "/sys/class/net/eth0/address"])
        .unwrap()
        .trim()
        .to_string();
    let t = r.ok(&["route", "get", "198.51.100.1"]);
    assert!(
        t.starts_with("198.51.100.1 via 10.9.0.2 dev r2 proto static prefix 198.51.100.0/24"),
        "{t}"
    );
    assert!(
        t.contains(&format!("neighbor 10.9.0.2 lladdr {s1_mac} REACHABLE")),
        "{t}"
    );
    let t = r.ok(&["route", "get", "203.0.113.1"]);
    assert_eq!(t.trim(), "203.0.113.1: no route");

    let t = r.ok(&["show", "rib", "198.51.100.0/24"]);
    assert!(t.starts_with("198.51.100.0/24\n  * static"), "{t}");
    let j = r.json(&["show", "rib"]);
    assert_eq!(j["by_source"]["v4"]["static"], 1);
    assert_eq!(j["by_source"]["v4"]["connected"], 3);

    let j = r.json(&["show", "sources"]);
    assert_eq!(j["rib_routes"]["static"]["v4"], 1, "{j}");

    let t = r.ok(&["show", "neighbors", "r2"]);
    assert!(
        t.contains(&format!("10.9.0.2 dev r2 lladdr {s1_mac} REACHABLE")),
        "{t}"
    );
    let o = r.ctl(&["show", "neighbors", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no port named \"nope\""));

    let t = r.ok(&["show", "nexthops"]);
    assert!(t.contains("via 10.9.0.2 dev r2"), "{t}");

    let j = r.json(&["show", "flows"]);
    let w0 = &j["workers"][0];
    assert!(
        w0["hits"].as_u64().unwrap() + w0["misses"].as_u64().unwrap() >= 20,
        "{j}"
    );
    r.ok(&["show", "fast-path"]);
    let j = r.json(&["show", "workers"]);
    assert_eq!(j["workers"][0]["core"], 1);
    assert!(j["workers"][0]["rx"].as_u64().unwrap() >= 40, "{j}");

    let j = r.json(&["show", "counters", "--nonzero"]);
    let c = &j["workers"][0]["counters"];
    let fwd = c["outcome.forwarded"].as_u64().unwrap();
    // Each of the 20 echoes forwarded twice; the first waited for ARP (held).
    assert_eq!(fwd + c["outcome.held"].as_u64().unwrap_or(0), 40, "{j}");
    assert!(r.ok(&["clear", "counters"]).contains("counters cleared"));
    let j = r.json(&["show", "counters", "--nonzero"]);
    assert!(
        j["workers"][0]["counters"]["outcome.forwarded"].is_null(),
        "cleared counters still show forwarded: {j}"
    );
    assert_eq!(r.ping("198.51.100.1", 5, "0.01"), 5);
    let j = r.json(&["show", "counters"]);
    assert_eq!(j["workers"][0]["counters"]["outcome.forwarded"], 10, "{j}");
    // The control plane's per-class counters are named by class.
    for key in ["rate_limited", "policed_xdp"] {
        for class in ["arp_nd", "routing", "icmp", "local", "slow_path"] {
            assert!(j["control"][key][class].is_u64(), "{key}.{class}: {j}");
        }
    }

    // Runtime routes: 192.0.2.0/24 has none, gets one through s2, loses it.
    assert_eq!(r.ping("192.0.2.1", 2, "0.05"), 0);
    let j = r.json(&["show", "counters", "--nonzero"]);
    assert_eq!(j["ports"][0]["port"], "r1");
    assert_eq!(j["ports"][0]["counters"]["drop.no_route"], 2, "{j}");
    assert!(j["ports"][1]["counters"]["drop.no_route"].is_null(), "{j}");
    let before = r.rx_packets("s2");
    let t = r.ok(&["route", "add", "192.0.2.0/24", "via", "10.8.0.2"]);
    assert_eq!(t.trim(), "192.0.2.0/24: 1 route(s) added");
    assert_eq!(r.ping("192.0.2.1", 10, "0.01"), 10);
    assert!(r.rx_packets("s2") >= before + 10);
    let t = r.ok(&["show", "route", "--source", "api"]);
    assert_eq!(t.trim(), "192.0.2.0/24 via 10.8.0.2 dev r3 proto api");
    // ECMP over both servers, then a blackhole.
    r.ok(&[
        "route",
        "add",
        "192.0.2.0/24",
        "via",
        "10.8.0.2",
        "via",
        "10.9.0.2",
    ]);
    let t = r.ok(&["route", "get", "192.0.2.1"]);
    assert!(t.contains("group"), "{t}");
    assert_eq!(t.matches("nexthop").count(), 2, "{t}");
    r.ok(&["route", "add", "192.0.2.0/24", "blackhole"]);
    assert_eq!(r.ping("192.0.2.1", 3, "0.05"), 0);
    let t = r.ok(&["route", "del", "192.0.2.0/24"]);
    assert_eq!(t.trim(), "192.0.2.0/24: 1 route(s) withdrawn");
    let t = r.ok(&["route", "get", "192.0.2.1"]);
    assert_eq!(t.trim(), "192.0.2.1: no route");
    let o = r.ctl(&["route", "del", "192.0.2.0/24"]);
    assert_eq!(o.status.code(), Some(1));
    for (args, msg) in [
        (
            &["route", "add", "192.0.2.1/24", "via", "10.8.0.2"][..],
            "host bits",
        ),
        (
            &["route", "add", "192.0.2.0/24", "via", "fd00::1"],
            "family",
        ),
        (&["route", "add", "banana", "via", "10.8.0.2"], "banana"),
        (&["route", "get", "10.0.0.300"], "not an ip address"),
        (&["show", "route", "--source", "ospf"], "unknown source"),
    ] {
        let o = r.ctl(args);
        let err = String::from_utf8_lossy(&o.stderr).to_lowercase();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
    }

    // Neighbor flush: the tables empty, forwarding resolves again.
    let t = r.ok(&["neighbor", "flush"]);
    let n: u32 = t.split_whitespace().next().unwrap().parse().unwrap();
    assert!(n >= 2, "{t}");
    assert_eq!(
        r.json(&["show", "neighbors", "r2"])["neighbors"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    assert_eq!(r.ping("198.51.100.1", 5, "0.05"), 5);
    assert!(r
        .ok(&["show", "neighbors", "r2"])
        .contains("10.9.0.2 dev r2"));

    // top: a ping flood's rate shows on r1 and worker 0.
    let lab_ping = {
        let mut c = r.lab.command("h1", "ping");
        c.args(["-n", "-q", "-c", "1500", "-i", "0.002", "198.51.100.1"])
            .stdout(Stdio::null());
        c.spawn().unwrap()
    };
    let t = r.ok(&["top", "--interval", "1000", "--count", "2"]);
    let mut lab_ping = lab_ping;
    let _ = lab_ping.wait();
    assert_eq!(t.matches("worker").count(), 2, "{t}");
    let r1 = t
        .lines()
        .rfind(|l| l.starts_with("r1"))
        .unwrap()
        .split_whitespace()
        .nth(2)
        .unwrap()
        .trim_end_matches('k')
        .parse::<f64>()
        .unwrap();
    assert!(r1 >= 100.0, "r1 rx pps {r1}: {t}");

    // Bad command lines, no daemon, a user outside the group.
    assert_eq!(r.ctl(&["show", "bogus"]).status.code(), Some(2));
    assert_eq!(
        r.ctl(&["route", "add", "192.0.2.0/24", "via"])
            .status
            .code(),
        Some(2)
    );
    let o = Command::new(VFSRCTL)
        .args(["--socket", "/tmp/no-vfsrd-here.sock", "show", "route"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("vfsrd is not running there"));
    let o = Command::new(VFSRCTL)
        .arg("--socket")
        .arg(r.socket())
        .args(["show", "route"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("permission denied"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // The protocol itself: a bad line is answered and the connection stays; an oversized
    // one is answered and closed.
    let mut s = UnixStream::connect(r.socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rd = BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    s.write_all(b"{\"cmd\":\"bogus\"}\nnot json\n{\"cmd\":\"show-nexthops\"}\n")
        .unwrap();
    for want in ["unknown variant", "bad request", "\"ok\":true"] {
        line.clear();
        rd.read_line(&mut line).unwrap();
        assert!(line.contains(want), "{want}: {line}");
    }
    s.write_all(&vec![b'x'; 70 * 1024]).unwrap();
    line.clear();
    rd.read_line(&mut line).unwrap();
    assert!(line.contains("longer than"), "{line}");
    let mut rest = Vec::new();
    assert_eq!(rd.read_to_end(&mut rest).unwrap(), 0, "connection closed");
    // Several clients at once: eight connections open together, each asks in turn (one
    // holding a half-written request meanwhile), every one gets its own answers.
    let mut conns: Vec<(UnixStream, BufReader<UnixStream>)> = (0..8)
        .map(|_| {
            let s = UnixStream::connect(r.socket()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let rd = BufReader::new(s.try_clone().unwrap());
            (s, rd)
        })
        .collect();
    conns[7].0.write_all(b"{\"cmd\":\"show-").unwrap();
    for round in 0..3 {
        for (s, _) in conns.iter_mut().take(7) {
            s.write_all(b"{\"cmd\":\"route-get\",\"addr\":\"198.51.100.1\"}\n")
                .unwrap();
        }
        for (i, (_, rd)) in conns.iter_mut().take(7).enumerate() {
            line.clear();
            rd.read_line(&mut line).unwrap();
            assert!(
                line.contains("\"ok\":true") && line.contains("198.51.100.0/24"),
                "client {i}, round {round}: {line}"
            );
        }
    }
    conns[7].0.write_all(b"nexthops\"}\n").unwrap();
    line.clear();
    conns[7].1.read_line(&mut line).unwrap();
    assert!(line.contains("\"ok\":true"), "{line}");
    drop(conns);
    // The router still answers.
    assert_eq!(r.ping("198.51.100.1", 3, "0.05"), 3);
}

#[test]
fn reload_moves_a_route_under_traffic_without_loss() {
    let _g = serial();
    let Some(vfsrd) = skipped() else { return };
    let r = Router::start(&vfsrd, "rld", CONFIG);
    // Both servers' neighbors resolved: the move does not wait for ARP.
    assert_eq!(r.ping("10.8.0.2", 2, "0.05"), 2);
    assert_eq!(r.ping("198.51.100.1", 2, "0.05"), 2);

    let (s1, s2) = (r.rx_packets("s1"), r.rx_packets("s2"));
    let flood = {
        let mut c = r.lab.command("h1", "ping");
        c.args([
            "-n",
            "-q",
            "-c",
            "2000",
            "-i",
            "0.002",
            "-W",
            "1",
            "198.51.100.1",
        ])
        .stdout(Stdio::piped());
        c.spawn().unwrap()
    };
    std::thread::sleep(Duration::from_millis(1500));
    let moved = CONFIG
        .replace("@SOCKET@", &r.socket().display().to_string())
        .replace("via = \"10.9.0.2\"", "via = \"10.8.0.2\"");
    std::fs::write(r.vfsrd.config_path(), &moved).unwrap();
    let t = r.ok(&["reload"]);
    assert!(t.contains("route: 0 added, 1 changed, 0 withdrawn"), "{t}");
    assert!(!t.contains("restart"), "{t}");
    let out = flood.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        received(&text),
        2000,
        "echo replies lost across the reload: {text}"
    );
    let (d1, d2) = (r.rx_packets("s1") - s1, r.rx_packets("s2") - s2);
    assert!(d1 >= 200 && d2 >= 200, "s1 got {d1}, s2 got {d2}");
    let t = r.ok(&["route", "get", "198.51.100.1"]);
    assert!(t.contains("via 10.8.0.2 dev r3"), "{t}");

    // A file that does not check is refused whole.
    std::fs::write(
        r.vfsrd.config_path(),
        moved.replace("via = \"10.8.0.2\"", "via = \"10.8.0.2.7\""),
    )
    .unwrap();
    let o = r.ctl(&["reload"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing changed"));
    assert!(r
        .ok(&["route", "get", "198.51.100.1"])
        .contains("via 10.8.0.2"));

    // A change only a restart applies is named; the live part of the same file applies.
    std::fs::write(
        r.vfsrd.config_path(),
        CONFIG
            .replace("@SOCKET@", &r.socket().display().to_string())
            .replace("busy_poll_us = 50", "busy_poll_us = 50\nbatch = 16"),
    )
    .unwrap();
    let t = r.ok(&["reload"]);
    assert!(t.contains("kept until vfsrd restarts: router.batch"), "{t}");
    assert!(r
        .ok(&["route", "get", "198.51.100.1"])
        .contains("via 10.9.0.2"));

    // SIGHUP reloads too: the route goes.
    std::fs::write(
        r.vfsrd.config_path(),
        CONFIG
            .replace("@SOCKET@", &r.socket().display().to_string())
            .replace(
                "[[route]]\nprefix = \"198.51.100.0/24\"\nvia = \"10.9.0.2\"\n",
                "",
            ),
    )
    .unwrap();
    r.signal(libc::SIGHUP);
    let l = r.logged("reloaded");
    assert!(l.contains("1 withdrawn"), "{l}");
    wait_until("the route withdrawn", Duration::from_secs(5), || {
        r.ok(&["route", "get", "198.51.100.1"]).contains("no route")
    })
    .unwrap();
    assert_eq!(r.ping("198.51.100.1", 2, "0.05"), 0);
}

/// `GET path` on vfsrd's metrics endpoint in the router's namespace: status line and body.
fn http_get(r: &Router, request: &'static str) -> (String, String) {
    r.lab
        .in_ns("rt", move || {
            let mut s = std::net::TcpStream::connect("127.0.0.1:9108").unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(request.as_bytes()).unwrap();
            let mut text = String::new();
            s.read_to_string(&mut text).unwrap();
            let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
            (
                head.lines().next().unwrap_or("").to_string(),
                body.to_string(),
            )
        })
        .unwrap()
}

/// Every `expr` string in a Grafana dashboard.
fn collect_exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr", Value::String(e)) => out.push(e.clone()),
                    _ => collect_exprs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_exprs(x, out)),
        _ => {}
    }
}

/// The value of the sample `name{labels}` (labels exactly as exposed).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn metrics_are_scraped_and_pass_promtool() {
    let _g = serial();
    let Some(vfsrd) = skipped() else { return };
    let r = Router::start(&vfsrd, "prom", CONFIG);
    assert_eq!(r.ping("198.51.100.1", 20, "0.01"), 20);
    // A packet to an address with no route: one drop counted on r1 under its reason.
    let _ = r.ping("203.0.113.7", 1, "0.05");
    std::thread::sleep(Duration::from_millis(300));

    // Prometheus asks for OpenMetrics; curl and promtool get the older text format.
    let (status, om) = http_get(
        &r,
        "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0\r\n\r\n",
    );
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(om.ends_with("# EOF\n"), "{om}");
    let (status, text) = http_get(&r, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(!text.contains("# EOF"), "{text}");
    let v = |series: &str| {
        sample(&text, series).unwrap_or_else(|| panic!("no sample {series}:\n{text}"))
    };
    assert_eq!(
        v(r#"vfsr_build_info{version="0.1.0",fib4="poptrie",fib6="poptrie"}"#),
        1.0
    );
    assert!(v(r#"vfsr_port_rx_packets_total{port="r1"}"#) >= 21.0);
    assert!(v(r#"vfsr_port_tx_packets_total{port="r2"}"#) >= 19.0);
    assert!(v(r#"vfsr_port_rx_bytes_total{port="r1"}"#) > 0.0);
    assert_eq!(v(r#"vfsr_port_up{port="r3"}"#), 1.0);
    assert!(v(r#"vfsr_drops_total{reason="no_route",port="r1"}"#) >= 1.0);
    assert_eq!(v(r#"vfsr_drops_total{reason="no_route",port="r2"}"#), 0.0);
    assert!(v(r#"vfsr_packets_total{outcome="forwarded",worker="0"}"#) >= 38.0);
    assert_eq!(v(r#"vfsr_rib_routes{source="static",family="ipv4"}"#), 1.0);
    assert_eq!(
        v(r#"vfsr_rib_routes{source="connected",family="ipv4"}"#),
        3.0
    );
    assert_eq!(v(r#"vfsr_fib_prefixes{family="ipv4"}"#), 4.0);
    // No FPM source configured: served as off, not left out.
    assert_eq!(v(r#"vfsr_source_up{source="fpm"}"#), 0.0);
    assert_eq!(v(r#"vfsr_source_state{source="fpm",state="off"}"#), 1.0);
    assert!(v(r#"vfsr_neighbors{port="r2",family="arp",state="reachable"}"#) >= 1.0);
    assert!(v(r#"vfsr_worker_busy_ratio{worker="0",core="1"}"#) <= 1.0);
    assert!(v(r#"vfsr_flow_lookups_total{worker="0",result="hit"}"#) >= 1.0);
    assert!(v(r#"vfsr_control_events_total{event="arp_answered"}"#) >= 1.0);

    // Debian's promtool: the exposition parses and passes its lint.
    if let Some(why) = skip_reason(&["promtool"]) {
        vfsr_skip::skip(format!("promtool check: {why}"));
    } else {
        let mut child = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "promtool check metrics: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }

    // Every metric the shipped Grafana dashboard queries is one vfsrd serves.
    let dash = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana/vfsr.json");
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(&dash).unwrap()).unwrap();
    let mut exprs = Vec::new();
    collect_exprs(&dash, &mut exprs);
    assert!(
        exprs.len() >= 20,
        "{} queries in the dashboard",
        exprs.len()
    );
    const SPARSE: &[&str] = &[
        "vfsr_source_skipped_total",
        "vfsr_fast_path_forwarded_total",
    ];
    let metrics_doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../vfsrd/src/metrics.rs"),
    )
    .unwrap()
    .replace("{", "")
    .replace("}", "");
    for e in &exprs {
        let mut rest = e.as_str();
        while let Some(i) = rest.find("vfsr_") {
            let name: String = rest[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // A family whose labels name what happened (a skipped message's reason) or a
            // part that is off here (the XDP fast path) has no sample; it must at least be
            // one vfsrd documents.
            let sparse = SPARSE.contains(&name.as_str()) && metrics_doc.contains(&name);
            assert!(
                sparse || text.contains(&format!("# TYPE {name} ")),
                "the dashboard queries {name}, which vfsrd does not serve: {e}"
            );
            rest = &rest[i + name.len()..];
        }
    }

    // Counters grow between scrapes; the HTTP side refuses what it does not serve.
    assert_eq!(r.ping("198.51.100.1", 10, "0.01"), 10);
    std::thread::sleep(Duration::from_millis(300));
    let (_, again) = http_get(&r, "GET /metrics HTTP/1.0\r\n\r\n");
    assert!(
        sample(&again, r#"vfsr_port_rx_packets_total{port="r1"}"#).unwrap()
            >= v(r#"vfsr_port_rx_packets_total{port="r1"}"#) + 10.0
    );
    assert!(http_get(&r, "GET /nope HTTP/1.1\r\n\r\n")
        .0
        .contains(" 404 "));
    assert!(http_get(&r, "POST /metrics HTTP/1.1\r\n\r\n")
        .0
        .contains(" 405 "));
    assert!(http_get(&r, "garbage\r\n\r\n").0.contains(" 400 "));
    let (status, body) = http_get(&r, "HEAD /metrics HTTP/1.1\r\n\r\n");
    assert!(
        status.contains(" 200 ") && body.is_empty(),
        "{status} {body}"
    );
    // The router forwards on.
    assert_eq!(r.ping("198.51.100.1", 3, "0.05"), 3);
}

/// CPU seconds thread `tid` of process `pid` has used (user + system).
fn thread_cpu_s(pid: u32, tid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).unwrap();
    // The fields after the command name (which may hold spaces) start at its closing ')'.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

#[test]
fn a_tap_deleted_under_the_router_is_let_go() {
    let _g = serial();
    let Some(vfsrd) = skipped() else { return };
    let r = Router::start(&vfsrd, "tapgone", CONFIG);
    assert_eq!(r.ping("198.51.100.1", 5, "0.01"), 5);
    let pid = r.vfsrd.pid().unwrap();
    // The TAP of r3, deleted by someone else: its file then polls as an error for ever.
    r.lab.ip("rt", &["link", "del", "vr3"]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let before = thread_cpu_s(pid, pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = thread_cpu_s(pid, pid) - before;
    assert!(
        used < 0.5,
        "the control thread used {used:.2} s of CPU in 2 s after its TAP went away"
    );
    let (_, text) = http_get(&r, "GET /metrics HTTP/1.0\r\n\r\n");
    assert_eq!(
        sample(&text, r#"vfsr_control_events_total{event="taps_lost"}"#),
        Some(1.0),
        "{text}"
    );
    // The other ports forward and the control plane still answers.
    assert_eq!(r.ping("198.51.100.1", 5, "0.01"), 5);
    r.ok(&["show", "interfaces"]);
}
