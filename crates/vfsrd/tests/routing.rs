//! vfsrd driven by real routing daemons, with what it forwards by compared to what they hold.
//!
//! ```text
//!   h1 eth0 ── r1 ┐   rt: vfsrd + FRR (zebra -M dplane_fpm_nl, bgpd AS 65000)  ┌ r2 ── eth0 s1
//!  10.1.0.2       │        zebra ──FPM 127.0.0.1:2620──▶ vfsrd                 │   10.9.0.2 gobgpd
//!  fd00:1::2      └ vr1, vr2, vr3: vfsrd's TAPs, where bgpd and zebra live     ├ r3 ── eth0 s2
//!                                                                               │   10.8.0.2 gobgpd
//! ```
//!
//! - `bgp_over_fpm_*`: the speakers announce 2,000 IPv4 and 500 IPv6 prefixes to bgpd over
//!   the TAPs; every one reaches vfsr's FIB with zebra's next hop (the complete sets are
//!   compared), h1 pings an address inside one through vfsr, a second speaker announcing a
//!   part of them makes ECMP groups in vfsr, and withdrawals remove everything. With and
//!   without `fpm use-next-hop-groups`.
//! - `faults_*`: zebra killed and restarted (vfsr keeps forwarding on its routes, then
//!   reconciles with what zebra replays), vfsrd killed with SIGKILL and restarted.
//! - `kernel_*`: BIRD's kernel protocol and `ip route` / `ip nexthop` write the kernel's table
//!   of vfsrd's namespace; the kernel source mirrors every change; a TAP taken down takes
//!   its port's routes out of the FIB; a netlink overrun (a small receive buffer and a burst
//!   of 100,000 routes) ends with the FIB equal to the kernel's table.
//!
//! vfsr's FIB is read through vfsrd's `--fib-dump` (written on SIGUSR1). Needs root, network
//! namespaces, FRR 8.4, gobgp and BIRD 2 (test.sh installs them); skips with a printed reason
//! otherwise. One test at a time: the daemons are timed, and the machine may have two cores.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::daemons::{
    add_ns_without_dad, bird_kernel_config, skip_reason, wait_for, wait_until, Bird, Family,
    FpmTarget, Frr, FrrConfig, GoBgp, GoBgpConfig, GoBgpNeighbor, Net, BIRD_PROGRAMS, FRR_PROGRAMS,
    GOBGP_PROGRAMS,
};
use vfsrd::harness::Vfsrd;
use vfsrd::netlab::NetLab;

const VFSRD: &str = env!("CARGO_BIN_EXE_vfsrd");

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn skipped(programs: &[&[&str]]) -> bool {
    let mut all: Vec<&str> = programs.iter().flat_map(|p| p.iter().copied()).collect();
    all.extend(["ping", "ethtool", "ip"]);
    match skip_reason(&all) {
        Some(why) => {
            vfsr_skip::skip(&why);
            true
        }
        None => false,
    }
}

/// vfsrd running in namespace `rt`, with its FIB readable on demand.
struct Router(Vfsrd);

impl Router {
    fn start(lab: &NetLab, tag: &str, config: &str) -> Router {
        Router(Vfsrd::start(lab, "rt", Path::new(VFSRD), tag, config).unwrap())
    }

    fn spawn(&mut self, lab: &NetLab) {
        self.0.spawn(lab).unwrap();
    }

    fn kill9(&mut self) {
        self.0.kill9();
    }

    /// vfsr's FIB: prefix → how it forwards (`via 10.9.0.2 dev r2`, `group ...`).
    fn fib(&self) -> BTreeMap<String, String> {
        self.0.fib(Duration::from_secs(20))
    }

    /// The stats file, a little over a second from now (it is rewritten every second).
    fn stats(&self) -> serde_json::Value {
        std::thread::sleep(Duration::from_millis(1200));
        self.0.stats()
    }

    /// The FIB without the ports' connected subnets.
    fn learned(&self) -> BTreeMap<String, String> {
        let mut f = self.fib();
        f.retain(|_, v| !v.starts_with("connected"));
        f
    }
}

/// The namespaces and links: h1 on r1, s1 on r2, s2 on r3; the speakers hold 203.0.113.1 and
/// 2001:db8:ff::1 on their loopback and route h1's subnet back through vfsr.
fn topology(tag: &str) -> NetLab {
    let mut lab = NetLab::new(tag);
    for ns in ["rt", "h1", "s1", "s2"] {
        add_ns_without_dad(&mut lab, ns).unwrap();
    }
    lab.veth("h1", "eth0", "rt", "r1").unwrap();
    lab.veth("rt", "r2", "s1", "eth0").unwrap();
    lab.veth("rt", "r3", "s2", "eth0").unwrap();
    let host = |ns: &str, a4: &str, a6: &str, gw4: &str, gw6: &str, routes: bool| {
        lab.ip(ns, &["addr", "add", a4, "dev", "eth0"]).unwrap();
        lab.ip(ns, &["addr", "add", a6, "dev", "eth0", "nodad"])
            .unwrap();
        if routes {
            lab.ip(ns, &["route", "add", "default", "via", gw4])
                .unwrap();
            lab.ip(ns, &["-6", "route", "add", "default", "via", gw6])
                .unwrap();
        } else {
            lab.ip(ns, &["route", "add", "10.1.0.0/24", "via", gw4])
                .unwrap();
            lab.ip(ns, &["-6", "route", "add", "fd00:1::/64", "via", gw6])
                .unwrap();
        }
        lab.sh(ns, &["ethtool", "-K", "eth0", "tx", "off"]).unwrap();
    };
    host(
        "h1",
        "10.1.0.2/24",
        "fd00:1::2/64",
        "10.1.0.1",
        "fd00:1::1",
        true,
    );
    host(
        "s1",
        "10.9.0.2/24",
        "fd00:9::2/64",
        "10.9.0.1",
        "fd00:9::1",
        false,
    );
    host(
        "s2",
        "10.8.0.2/24",
        "fd00:8::2/64",
        "10.8.0.1",
        "fd00:8::1",
        false,
    );
    for s in ["s1", "s2"] {
        lab.ip(s, &["addr", "add", "203.0.113.1/32", "dev", "lo"])
            .unwrap();
        lab.ip(s, &["addr", "add", "2001:db8:ff::1/128", "dev", "lo"])
            .unwrap();
    }
    lab
}

fn vfsrd_config(extra: &str) -> String {
    format!(
        r#"
[router]
control_core = 0
workers = [1]
busy_poll_us = 50

[[interface]]
name = "r1"
addresses = ["10.1.0.1/24", "fd00:1::1/64"]
[[interface]]
name = "r2"
addresses = ["10.9.0.1/24", "fd00:9::1/64"]
[[interface]]
name = "r3"
addresses = ["10.8.0.1/24", "fd00:8::1/64"]
{extra}
"#
    )
}

/// bgpd AS 65000: eBGP to both speakers (IPv4 and IPv6 sessions), hold 9 s, ECMP across
/// them.
fn bgpd() -> String {
    let mut c = String::from(
        "route-map ACCEPT permit 10\n!\nrouter bgp 65000\n bgp router-id 10.9.0.1\n \
         no bgp network import-check\n bgp bestpath as-path multipath-relax\n",
    );
    let peers = [
        ("10.9.0.2", 65101),
        ("fd00:9::2", 65101),
        ("10.8.0.2", 65102),
        ("fd00:8::2", 65102),
    ];
    for (a, asn) in peers {
        c.push_str(&format!(
            " neighbor {a} remote-as {asn}\n neighbor {a} timers 3 9\n neighbor {a} timers connect 1\n"
        ));
    }
    for (af, v6) in [("ipv4 unicast", false), ("ipv6 unicast", true)] {
        c.push_str(&format!(" address-family {af}\n  maximum-paths 4\n"));
        for (a, _) in peers {
            if a.contains(':') == v6 {
                c.push_str(&format!(
                    "  neighbor {a} activate\n  neighbor {a} route-map ACCEPT in\n"
                ));
            } else if !v6 {
                c.push_str(&format!("  no neighbor {a} activate\n"));
            }
        }
        c.push_str(" exit-address-family\n");
    }
    c
}

fn speaker(lab: &NetLab, ns: &str, asn: u32, id: &str, v4: &str, v6: &str) -> GoBgp {
    let n = |a: &str| GoBgpNeighbor {
        address: a.parse().unwrap(),
        peer_as: 65000,
        hold_time: 9,
        keepalive: 3,
    };
    let toml = GoBgpConfig {
        asn,
        router_id: id.parse().unwrap(),
        neighbors: vec![n(v4), n(v6)],
    }
    .toml();
    GoBgp::start(lab, ns, &toml).unwrap()
}

fn frr(lab: &NetLab, nhg: bool) -> Frr {
    Frr::start(
        lab,
        "rt",
        FrrConfig {
            zebra: String::new(),
            bgpd: Some(bgpd()),
            staticd: None,
            fpm: Some(FpmTarget::local(nhg)),
        },
    )
    .unwrap()
}

fn received(out: &str) -> u32 {
    out.split(',')
        .find_map(|p| p.trim().strip_suffix(" received"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

fn ping(lab: &NetLab, ns: &str, dst: &str, n: u32) -> u32 {
    let count = n.to_string();
    let mut argv = vec!["ping", "-n", "-c", &count, "-i", "0.2", "-W", "2"];
    if dst.contains(':') {
        argv.insert(1, "-6");
    }
    argv.push(dst);
    let o = lab.exec(ns, &argv).unwrap();
    received(&String::from_utf8_lossy(&o.stdout))
}

/// The prefixes announced: 2,000 IPv4 /24s and 500 IPv6 /48s, and the ones holding the
/// speakers' loopback addresses.
fn prefixes() -> (Vec<Net>, Vec<Net>) {
    let mut v4 = Net::block("100.64.0.0".parse().unwrap(), 24, 2000);
    v4.push("203.0.113.0/24".parse().unwrap());
    let mut v6 = Net::block("2001:db8:1000::".parse().unwrap(), 48, 500);
    v6.push("2001:db8:ff::/48".parse().unwrap());
    (v4, v6)
}

/// zebra's selected BGP routes: prefix → next-hop addresses.
fn zebra_bgp(f: &Frr) -> BTreeMap<String, BTreeSet<IpAddr>> {
    let mut out = BTreeMap::new();
    for fam in [Family::V4, Family::V6] {
        for r in f.routes_json(fam).unwrap() {
            if r.protocol == "bgp" && r.selected {
                let hops: BTreeSet<IpAddr> = r
                    .nexthops
                    .iter()
                    .filter(|h| h.active)
                    .filter_map(|h| h.ip)
                    .collect();
                out.insert(r.prefix.to_string(), hops);
            }
        }
    }
    out
}

/// The gateways a FIB line names (`via A dev X` once or in a group).
fn gateways(line: &str) -> BTreeSet<IpAddr> {
    line.split("via ")
        .skip(1)
        .filter_map(|s| s.split_whitespace().next())
        .filter_map(|a| a.parse().ok())
        .collect()
}

/// Waits until vfsr's learned routes are exactly zebra's selected BGP routes with zebra's
/// next hops, and returns them.
fn converge(v: &Router, f: &Frr, want: usize, what: &str) -> BTreeMap<String, String> {
    converge_within(v, f, want, what, Duration::from_secs(90)).unwrap_or_else(|e| panic!("{e}"))
}

/// [`converge`] within `limit`, or what zebra and vfsr had when it ran out.
fn converge_within(
    v: &Router,
    f: &Frr,
    want: usize,
    what: &str,
    limit: Duration,
) -> Result<BTreeMap<String, String>, String> {
    let mut last = (0, 0);
    let result = wait_for(what, limit, || {
        let z = zebra_bgp(f);
        let fib = v.learned();
        last = (z.len(), fib.len());
        if z.len() != want || fib.len() != want {
            return None;
        }
        let same = z
            .iter()
            .all(|(p, hops)| fib.get(p).is_some_and(|l| &gateways(l) == hops));
        same.then_some(fib)
    });
    result.map_err(|e| {
        format!(
            "{e}: zebra has {} BGP routes, vfsr {} (want {want})",
            last.0, last.1
        )
    })
}

fn bgp_over_fpm(tag: &str, nhg: bool) {
    if skipped(&[FRR_PROGRAMS, GOBGP_PROGRAMS]) {
        return;
    }
    let _one = serial();
    let lab = topology(tag);
    let v = Router::start(&lab, tag, &vfsrd_config("[fpm]\n"));
    let f = frr(&lab, nhg);
    let s1 = speaker(&lab, "s1", 65101, "10.9.0.2", "10.9.0.1", "fd00:9::1");
    let s2 = speaker(&lab, "s2", 65102, "10.8.0.2", "10.8.0.1", "fd00:8::1");
    for p in ["10.9.0.2", "fd00:9::2", "10.8.0.2", "fd00:8::2"] {
        wait_until(
            &format!("BGP session with {p}"),
            Duration::from_secs(60),
            || f.bgp_established(p),
        )
        .unwrap();
    }

    // Every announced prefix reaches vfsr's FIB through s1, as zebra has it.
    let (v4, v6) = prefixes();
    s1.add_routes(&v4, "10.9.0.2".parse().unwrap()).unwrap();
    s1.add_routes(&v6, "fd00:9::2".parse().unwrap()).unwrap();
    let all = v4.len() + v6.len();
    let fib = converge(&v, &f, all, "every route in vfsr's FIB");
    let announced: BTreeSet<String> = v4.iter().chain(&v6).map(|n| n.to_string()).collect();
    let got: BTreeSet<String> = fib.keys().cloned().collect();
    assert_eq!(
        got, announced,
        "vfsr's learned routes are the announced ones"
    );
    assert!(
        fib.values()
            .all(|l| l.ends_with("dev r2") && !l.starts_with("group")),
        "all through s1 on r2"
    );

    // Traffic follows them: h1 reaches s1's loopback through vfsr.
    assert_eq!(ping(&lab, "h1", "203.0.113.1", 3), 3, "ping through vfsr");
    assert_eq!(
        ping(&lab, "h1", "2001:db8:ff::1", 3),
        3,
        "ping -6 through vfsr"
    );

    // s2 announces a part of them too: those become two-member ECMP groups in vfsr.
    let both4: Vec<Net> = v4.iter().take(100).chain(v4.last()).copied().collect();
    let both6: Vec<Net> = v6.iter().take(50).chain(v6.last()).copied().collect();
    s2.add_routes(&both4, "10.8.0.2".parse().unwrap()).unwrap();
    s2.add_routes(&both6, "fd00:8::2".parse().unwrap()).unwrap();
    let fib = converge(&v, &f, all, "ECMP in vfsr's FIB");
    let shared: BTreeSet<String> = both4.iter().chain(&both6).map(|n| n.to_string()).collect();
    for (p, line) in &fib {
        if shared.contains(p) {
            assert!(
                line.starts_with("group") && line.contains("dev r2") && line.contains("dev r3"),
                "{p}: {line}"
            );
        } else {
            assert!(!line.starts_with("group"), "{p}: {line}");
        }
    }
    assert_eq!(ping(&lab, "h1", "203.0.113.1", 3), 3, "ping over ECMP");

    // Withdrawals: s2's paths go (back to s1 alone), then everything.
    s2.withdraw_all().unwrap();
    let fib = converge(&v, &f, all, "s2's paths withdrawn");
    assert!(fib.values().all(|l| !l.starts_with("group")));
    s1.withdraw_all().unwrap();
    let gone = wait_until("every learned route gone", Duration::from_secs(60), || {
        v.learned().is_empty()
    });
    if let Err(e) = gone {
        let left = v.learned();
        let z = zebra_bgp(&f);
        panic!(
            "{e}: vfsr keeps {} routes ({:?}...), zebra {}",
            left.len(),
            left.iter().take(3).collect::<Vec<_>>(),
            z.len()
        );
    }
    // The connected routes stay.
    assert_eq!(v.fib().len(), 6, "{:?}", v.fib());
}

#[test]
fn bgp_over_fpm_with_next_hop_groups() {
    bgp_over_fpm("rf1", true);
}

#[test]
fn bgp_over_fpm_without_next_hop_groups() {
    bgp_over_fpm("rf2", false);
}

#[test]
fn faults_zebra_and_vfsrd_restarts() {
    if skipped(&[FRR_PROGRAMS, GOBGP_PROGRAMS]) {
        return;
    }
    let _one = serial();
    let tag = "rf3";
    let lab = topology(tag);
    let mut v = Router::start(
        &lab,
        tag,
        &vfsrd_config("[fpm]\nstale_time_s = 120\nresync_quiet_ms = 1500\n"),
    );
    let mut f = frr(&lab, true);
    let s1 = speaker(&lab, "s1", 65101, "10.9.0.2", "10.9.0.1", "fd00:9::1");
    for p in ["10.9.0.2", "fd00:9::2"] {
        wait_until(
            &format!("BGP session with {p}"),
            Duration::from_secs(60),
            || f.bgp_established(p),
        )
        .unwrap();
    }
    let (v4, v6) = prefixes();
    s1.add_routes(&v4, "10.9.0.2".parse().unwrap()).unwrap();
    s1.add_routes(&v6, "fd00:9::2".parse().unwrap()).unwrap();
    let all = v4.len() + v6.len();
    let before = converge(&v, &f, all, "the table in vfsr");

    // zebra crashes: vfsr keeps every route and keeps forwarding.
    f.kill_zebra(libc::SIGKILL).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(v.learned(), before, "routes kept while zebra is away");
    assert_eq!(ping(&lab, "h1", "203.0.113.1", 3), 3, "forwarding goes on");
    // Meanwhile the speaker withdraws 300 prefixes; zebra's replay will lack them.
    let gone: Vec<Net> = v4.iter().skip(1000).take(300).copied().collect();
    s1.withdraw_routes(&gone).unwrap();
    f.start_zebra().unwrap();
    f.restart_clients().unwrap();
    for p in ["10.9.0.2", "fd00:9::2"] {
        wait_until(
            &format!("BGP session with {p} again"),
            Duration::from_secs(60),
            || f.bgp_established(p),
        )
        .unwrap();
    }
    let after = converge(&v, &f, all - gone.len(), "reconciled with zebra's replay");
    for n in &gone {
        assert!(!after.contains_key(&n.to_string()), "{n} swept");
    }

    // zebra's FPM connection is cut as its replay starts (zebra reconnects after a mode
    // change and replays; the connection is killed as soon as it shows): vfsr keeps every
    // route, and zebra's next replay, 3 s later, reconciles.
    f.set_fpm_next_hop_groups(false).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    wait_until(
        "zebra's new FPM connection, cut",
        Duration::from_secs(20),
        || {
            lab.exec(
                "rt",
                &[
                    "ss",
                    "-K",
                    "-tn",
                    "state",
                    "established",
                    "dport",
                    "=",
                    "2620",
                ],
            )
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(":2620"))
        },
    )
    .unwrap();
    let kept = v.learned();
    assert_eq!(kept.len(), after.len(), "no route lost to the cut");
    wait_until(
        "zebra's next replay complete",
        Duration::from_secs(30),
        || {
            let st = v.stats();
            let fpm = &st["routing"]["fpm"];
            fpm["state"] == "in_sync" && fpm["stale_routes"] == 0
        },
    )
    .unwrap();
    let again = converge(&v, &f, all - gone.len(), "reconciled after the cut replay");
    assert_eq!(again.len(), after.len());
    let closes = v.stats()["routing"]["fpm"]["closes"].clone();
    assert!(
        closes
            .as_object()
            .is_some_and(|o| o.values().filter_map(|n| n.as_u64()).sum::<u64>() >= 3),
        "{closes}"
    );

    // vfsrd is killed and started again: its TAPs come back, zebra reconnects and replays.
    v.kill9();
    std::thread::sleep(Duration::from_secs(1));
    v.spawn(&lab);
    // bgpd's sessions ran through the TAPs that went with vfsrd. bgpd doubles a session's
    // idle hold time (up to 120 s) after each attempt that ends in an error, and gobgpd holds
    // its side idle after a reset too, so a session still down half-way through the wait is
    // reset once at both ends, as an operator would.
    let what = "the table after vfsrd's restart";
    let again = converge_within(&v, &f, all - gone.len(), what, Duration::from_secs(45))
        .unwrap_or_else(|e| {
            let state = f
                .vtysh("show bgp summary")
                .unwrap_or_else(|e| e.to_string());
            println!("{e}; bgpd:\n{state}");
            // What the path to the speaker looked like: vfsrd's control counters (punts to
            // the TAPs and back), and each end's neighbours and TCP sockets.
            println!("vfsrd control: {}", v.stats()["control"]);
            for ns in ["rt", "s1"] {
                for argv in [&["ip", "neigh"][..], &["ss", "-tan"][..]] {
                    let out = lab.sh(ns, argv).unwrap_or_else(|e| e.to_string());
                    println!("{ns}: {}:\n{out}", argv.join(" "));
                }
            }
            // The speaker's side: gobgpd holds a session idle after a reset too, and then
            // closes the connections bgpd opens.
            for argv in [&["neighbor"][..], &["neighbor", "10.9.0.1"]] {
                let out = s1.gobgp(argv).unwrap_or_else(|e| e.to_string());
                println!("s1: gobgp {}:\n{out}", argv.join(" "));
            }
            let log = std::fs::read_to_string(s1.dir().join("gobgpd.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            println!("s1: gobgpd.log, last lines first:\n{}", tail.join("\n"));
            println!("resetting the sessions at both ends");
            if let Err(e) = f.vtysh("clear bgp *") {
                println!("clear bgp * failed: {e}");
            }
            for peer in ["10.9.0.1", "fd00:9::1"] {
                if let Err(e) = s1.gobgp(&["neighbor", peer, "reset"]) {
                    println!("gobgp neighbor {peer} reset failed: {e}");
                }
            }
            converge(&v, &f, all - gone.len(), what)
        });
    assert_eq!(again.len(), after.len());
    wait_until(
        "forwarding after the restart",
        Duration::from_secs(30),
        || ping(&lab, "h1", "203.0.113.1", 1) == 1,
    )
    .unwrap();
}

/// The kernel's routes of table main in `rt`, by prefix: gateways and whether blackhole or
/// unreachable (routes through the ports' TAPs or on their subnets, other than the kernel's
/// own).
fn kernel_routes(lab: &NetLab) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for fam in ["-4", "-6"] {
        let text = lab
            .sh("rt", &["ip", "-j", fam, "route", "show", "table", "main"])
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        for r in v.as_array().into_iter().flatten() {
            let proto = r["protocol"].as_str().unwrap_or("");
            if proto == "kernel" {
                continue;
            }
            let mut dst = r["dst"].as_str().unwrap_or("").to_string();
            if dst == "default" {
                dst = if fam == "-4" { "0.0.0.0/0" } else { "::/0" }.into();
            } else if !dst.contains('/') {
                dst.push_str(if fam == "-4" { "/32" } else { "/128" });
            }
            let kind = r["type"].as_str().unwrap_or("unicast");
            let what = match kind {
                "blackhole" => "blackhole".to_string(),
                "unreachable" | "prohibit" => "unreachable".to_string(),
                _ => {
                    let mut g: Vec<String> = Vec::new();
                    if let Some(gw) = r["gateway"].as_str() {
                        g.push(gw.to_string());
                    }
                    for h in r["nexthops"].as_array().into_iter().flatten() {
                        if let Some(gw) = h["gateway"].as_str() {
                            g.push(gw.to_string());
                        }
                    }
                    g.sort();
                    g.join(",")
                }
            };
            out.insert(dst, what);
        }
    }
    out
}

/// vfsr's learned routes in the same terms as [`kernel_routes`].
fn fib_terms(fib: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    fib.iter()
        .map(|(p, l)| {
            let what = if l == "blackhole" || l == "unreachable" {
                l.clone()
            } else {
                let g: Vec<String> = gateways(l).iter().map(|a| a.to_string()).collect();
                g.join(",")
            };
            (p.clone(), what)
        })
        .collect()
}

fn mirrored(v: &Router, lab: &NetLab, what: &str) -> BTreeMap<String, String> {
    let mut last = (BTreeMap::new(), BTreeMap::new());
    let r = wait_for(what, Duration::from_secs(30), || {
        let k = kernel_routes(lab);
        let f = fib_terms(&v.learned());
        let same = k == f;
        last = (k.clone(), f);
        same.then_some(k)
    });
    match r {
        Ok(k) => k,
        Err(e) => panic!("{e}:\n kernel {:?}\n vfsr   {:?}", last.0, last.1),
    }
}

#[test]
fn kernel_source_mirrors_bird_and_ip_route() {
    if skipped(&[BIRD_PROGRAMS]) {
        return;
    }
    let _one = serial();
    let tag = "rk1";
    let lab = topology(tag);
    let v = Router::start(&lab, tag, &vfsrd_config("[kernel]\n"));
    let ip = |args: &[&str]| lab.ip("rt", args).unwrap();

    // BIRD's kernel protocol: a route, a multipath route, a blackhole, an unreachable.
    let statics4 = [
        "198.51.100.0/24 via 10.9.0.2",
        "203.0.113.0/24 via 10.9.0.2 via 10.8.0.2",
        "192.0.2.0/24 blackhole",
        "192.0.2.128/25 unreachable",
    ];
    let statics6 = ["2001:db8:10::/48 via fd00:9::2"];
    let mut bird = Bird::start(
        &lab,
        "rt",
        &bird_kernel_config("10.9.0.1".parse().unwrap(), &statics4, &statics6),
    )
    .unwrap();
    let k = mirrored(&v, &lab, "BIRD's routes in vfsr");
    assert_eq!(k.len(), 5, "{k:?}");
    assert_eq!(k["203.0.113.0/24"], "10.8.0.2,10.9.0.2");
    let fib = v.learned();
    assert!(fib["203.0.113.0/24"].starts_with("group"), "{fib:?}");
    assert_eq!(fib["192.0.2.0/24"], "blackhole");
    assert_eq!(
        ping(&lab, "h1", "203.0.113.1", 3),
        3,
        "ping over BIRD's route"
    );

    // BIRD drops two of them.
    bird.configure(&bird_kernel_config(
        "10.9.0.1".parse().unwrap(),
        &statics4[..2],
        &statics6,
    ))
    .unwrap();
    let k = mirrored(&v, &lab, "BIRD's reconfiguration in vfsr");
    assert_eq!(k.len(), 3, "{k:?}");
    bird.stop();
    let k = mirrored(&v, &lab, "BIRD stopped");
    assert!(k.is_empty(), "{k:?}");

    // ip route: add, replace, multipath, blackhole, next-hop objects, delete.
    ip(&["route", "add", "10.50.0.0/16", "via", "10.9.0.2"]);
    ip(&["route", "replace", "10.50.0.0/16", "via", "10.8.0.2"]);
    ip(&[
        "route",
        "add",
        "10.51.0.0/16",
        "nexthop",
        "via",
        "10.9.0.2",
        "weight",
        "3",
        "nexthop",
        "via",
        "10.8.0.2",
    ]);
    ip(&["route", "add", "blackhole", "10.52.0.0/16"]);
    ip(&["-6", "route", "add", "2001:db8:50::/48", "via", "fd00:8::2"]);
    ip(&[
        "nexthop", "add", "id", "11", "via", "10.9.0.2", "dev", "vr2",
    ]);
    ip(&[
        "nexthop", "add", "id", "12", "via", "10.8.0.2", "dev", "vr3",
    ]);
    ip(&["nexthop", "add", "id", "13", "group", "11/12"]);
    ip(&["route", "add", "10.53.0.0/16", "nhid", "13"]);
    let k = mirrored(&v, &lab, "ip route's routes in vfsr");
    assert_eq!(k["10.50.0.0/16"], "10.8.0.2");
    assert_eq!(k["10.53.0.0/16"], "10.8.0.2,10.9.0.2");
    let fib = v.learned();
    assert!(fib["10.51.0.0/16"].contains("weight 3"), "{fib:?}");
    // A next-hop object changes: the route through it follows.
    ip(&["nexthop", "replace", "id", "13", "group", "11"]);
    let k = mirrored(&v, &lab, "a changed next-hop group");
    assert_eq!(k["10.53.0.0/16"], "10.9.0.2");
    ip(&["route", "del", "10.50.0.0/16"]);
    ip(&["route", "del", "10.53.0.0/16"]);
    let k = mirrored(&v, &lab, "deletions");
    assert!(!k.contains_key("10.50.0.0/16") && !k.contains_key("10.53.0.0/16"));

    // The TAP of port r3 goes down: routes through r3 leave vfsr's FIB (its connected subnet
    // too); up again, its subnet comes back.
    ip(&["link", "set", "vr3", "down"]);
    wait_until("r3's routes gone", Duration::from_secs(20), || {
        let f = v.fib();
        !f.contains_key("10.8.0.0/24") && !f.values().any(|l| l.contains("dev r3"))
    })
    .unwrap();
    ip(&["link", "set", "vr3", "up"]);
    wait_until("r3's subnet back", Duration::from_secs(20), || {
        v.fib()
            .get("10.8.0.0/24")
            .is_some_and(|l| l == "connected dev r3")
    })
    .unwrap();
}

#[test]
fn kernel_source_recovers_from_a_netlink_overrun() {
    if skipped(&[]) {
        return;
    }
    let _one = serial();
    let tag = "rk2";
    let lab = topology(tag);
    let v = Router::start(&lab, tag, &vfsrd_config("[kernel]\nrcvbuf = 65536\n"));
    // 100,000 routes in one burst, far more than the receive buffer holds: /24s from
    // 20.0.0.0 on.
    let mut batch = String::new();
    for i in 0..100_000u32 {
        let a = std::net::Ipv4Addr::from(0x1400_0000 + (i << 8));
        batch.push_str(&format!("route add {a}/24 via 10.9.0.2\n"));
    }
    let file = std::env::temp_dir().join(format!("vfsr-batch-{}", std::process::id()));
    std::fs::write(&file, &batch).unwrap();
    // vfsrd is stopped during the burst, so the socket surely overruns however fast it
    // would have read.
    v.0.signal(libc::SIGSTOP);
    let r = lab.sh("rt", &["ip", "-batch", &file.display().to_string()]);
    v.0.signal(libc::SIGCONT);
    let _ = std::fs::remove_file(&file);
    r.unwrap();
    let k = mirrored(&v, &lab, "100,000 routes after the overruns");
    assert_eq!(k.len(), 100_000);
    let st = v.stats();
    let overruns = st["routing"]["kernel"]["overruns"].as_u64().unwrap_or(0);
    assert!(
        overruns > 0,
        "the burst overran the socket: {}",
        st["routing"]["kernel"]
    );
    // And a burst of deletions the same way.
    let mut batch = String::new();
    for i in 0..100_000u32 {
        let a = std::net::Ipv4Addr::from(0x1400_0000 + (i << 8));
        batch.push_str(&format!("route del {a}/24\n"));
    }
    let file = std::env::temp_dir().join(format!("vfsr-batch-{}", std::process::id()));
    std::fs::write(&file, &batch).unwrap();
    // vfsrd is stopped during the burst, so the socket surely overruns however fast it
    // would have read.
    v.0.signal(libc::SIGSTOP);
    let r = lab.sh("rt", &["ip", "-batch", &file.display().to_string()]);
    v.0.signal(libc::SIGCONT);
    let _ = std::fs::remove_file(&file);
    r.unwrap();
    let k = mirrored(&v, &lab, "every route deleted after the overruns");
    assert!(k.is_empty());
    let again = v.stats()["routing"]["kernel"]["overruns"]
        .as_u64()
        .unwrap_or(0);
    assert!(again > overruns, "the second burst overran too");
}
