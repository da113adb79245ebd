//! The real routing daemons driven by `common::daemons`, with real outcomes checked:
//!
//! ```text
//!   spk (gobgpd, AS 65002) s0 ──── r0 rtr (FRR zebra + bgpd, AS 65001)
//!        10.0.0.2/24  fd00::2/64      10.0.0.1/24  fd00::1/64
//!                                     zebra -M dplane_fpm_nl ──▶ 127.0.0.1:2620 (FpmCapture)
//! ```
//!
//! - the speaker announces 2,000 IPv4 and 500 IPv6 prefixes; zebra's RIB, the kernel of
//!   rtr and the FPM stream hold every one with the speaker as next hop; withdrawing them
//!   all brings an RTM_DELROUTE for each (once with `fpm use-next-hop-groups`, once without);
//! - zebra reconnects to an FPM server that closed the connection and replays its table;
//!   a killed and restarted zebra gets staticd's routes again;
//! - BIRD's kernel protocol puts static routes (multipath and blackhole included) in the
//!   kernel and takes them out again when the config drops them.
//!
//! Ignored (run by hand with `--ignored --nocapture`): `capture_fpm_streams` rewrites the
//! captures in tests/data/fpm; `convergence_7000` times 5,000 + 2,000 prefixes.
//!
//! Needs root, network namespaces, FRR 8.4, gobgp and BIRD 2; skips with a printed reason
//! otherwise. The tests take a lock so that only one runs at a time (the daemons are timed,
//! and the machine may have few cores).

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::daemons::{
    add_ns_without_dad, bird_kernel_config, fpm_frames, ifindex, skip_reason, wait_until, Bird,
    Family, FpmCapture, FpmTarget, Frr, FrrConfig, GoBgp, GoBgpConfig, GoBgpNeighbor, Net,
    BIRD_PROGRAMS, FPM_PORT, FRR_PROGRAMS, GOBGP_PROGRAMS,
};
use vfsrd::netlab::NetLab;

const RTM_NEWROUTE: u16 = 24;
const RTM_DELROUTE: u16 = 25;
const RTM_NEWNEXTHOP: u16 = 104;
const RTM_DELNEXTHOP: u16 = 105;
const NLM_F_REPLACE: u16 = 0x100;
const NLM_F_CREATE: u16 = 0x400;
/// rtm_protocol of zebra's routes: FRR's own numbers (zebra/rt_netlink.h), connected and
/// kernel routes as RTPROT_KERNEL (2); next hops as RTPROT_ZEBRA (11).
const RTPROT_BGP: u8 = 186;
const RTPROT_ZSTATIC: u8 = 196;
const RT_TABLE_MAIN: u32 = 254;

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn skip(programs: &[&[&str]]) -> bool {
    let all: Vec<&str> = programs.iter().flat_map(|p| p.iter().copied()).collect();
    match skip_reason(&all) {
        Some(why) => {
            vfsr_skip::skip(&why);
            true
        }
        None => false,
    }
}

// ---------------------------------------------------------------------------------------
// Just enough netlink to count what zebra sends
// ---------------------------------------------------------------------------------------

/// One netlink message of an FPM stream.
#[derive(Clone, Debug)]
struct Msg {
    /// The FPM frame it came in (0-based).
    frame: usize,
    kind: u16,
    flags: u16,
    family: u8,
    protocol: u8,
    /// rtm_type (routes only).
    rtm_type: u8,
    table: u32,
    dst: Option<Net>,
    gateway: Option<IpAddr>,
    oif: Option<u32>,
    /// RTA_NH_ID of a route, NHA_ID of a next hop.
    nh_id: Option<u32>,
    /// RTA_MULTIPATH hops: (ifindex, gateway).
    multipath: Vec<(u32, Option<IpAddr>)>,
    /// NHA_GROUP members: (id, weight).
    group: Vec<(u32, u8)>,
    blackhole: bool,
}

fn attributes(mut b: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([b[0], b[1]]));
        let kind = u16::from_ne_bytes([b[2], b[3]]) & 0x3fff;
        if len < 4 || len > b.len() {
            break;
        }
        out.push((kind, &b[4..len]));
        b = &b[((len + 3) & !3).min(b.len())..];
    }
    out
}

fn address(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(b).ok()?))),
        16 => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(b).ok()?))),
        _ => None,
    }
}

fn word(b: &[u8]) -> u32 {
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

fn messages(bytes: &[u8]) -> Vec<Msg> {
    let (frames, _) = fpm_frames(bytes).expect("FPM framing");
    let mut out = Vec::new();
    for (frame, payload) in frames.iter().enumerate() {
        let mut rest = *payload;
        while rest.len() >= 16 {
            let len = word(rest) as usize;
            if len < 16 || len > rest.len() {
                break;
            }
            let kind = u16::from_ne_bytes([rest[4], rest[5]]);
            let flags = u16::from_ne_bytes([rest[6], rest[7]]);
            let body = &rest[16..len];
            let mut m = Msg {
                frame,
                kind,
                flags,
                family: body.first().copied().unwrap_or(0),
                protocol: 0,
                rtm_type: 0,
                table: 0,
                dst: None,
                gateway: None,
                oif: None,
                nh_id: None,
                multipath: Vec::new(),
                group: Vec::new(),
                blackhole: false,
            };
            match kind {
                RTM_NEWROUTE | RTM_DELROUTE if body.len() >= 12 => {
                    let dst_len = body[1];
                    m.table = u32::from(body[4]);
                    m.protocol = body[5];
                    m.rtm_type = body[7];
                    for (t, v) in attributes(&body[12..]) {
                        match t {
                            1 => m.dst = address(v).map(|a| Net::new(a, dst_len)),
                            4 => m.oif = Some(word(v)),
                            5 => m.gateway = address(v),
                            15 => m.table = word(v),
                            30 => m.nh_id = Some(word(v)),
                            9 => {
                                let mut hops = v;
                                while hops.len() >= 8 {
                                    let hl = usize::from(u16::from_ne_bytes([hops[0], hops[1]]));
                                    if hl < 8 || hl > hops.len() {
                                        break;
                                    }
                                    let gw = attributes(&hops[8..hl])
                                        .into_iter()
                                        .find(|(t, _)| *t == 5)
                                        .and_then(|(_, g)| address(g));
                                    m.multipath.push((word(&hops[4..8]), gw));
                                    hops = &hops[((hl + 3) & !3).min(hops.len())..];
                                }
                            }
                            _ => {}
                        }
                    }
                }
                RTM_NEWNEXTHOP | RTM_DELNEXTHOP if body.len() >= 8 => {
                    m.protocol = body[2];
                    for (t, v) in attributes(&body[8..]) {
                        match t {
                            1 => m.nh_id = Some(word(v)),
                            2 => {
                                m.group = v
                                    .chunks_exact(8)
                                    .map(|g| (word(g), g[4].wrapping_add(1)))
                                    .collect()
                            }
                            4 => m.blackhole = true,
                            5 => m.oif = Some(word(v)),
                            6 => m.gateway = address(v),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
            out.push(m);
            rest = &rest[((len + 3) & !3).min(rest.len())..];
        }
    }
    out
}

fn kind_name(kind: u16) -> &'static str {
    match kind {
        RTM_NEWROUTE => "RTM_NEWROUTE",
        RTM_DELROUTE => "RTM_DELROUTE",
        RTM_NEWNEXTHOP => "RTM_NEWNEXTHOP",
        RTM_DELNEXTHOP => "RTM_DELNEXTHOP",
        _ => "other",
    }
}

/// Messages per (type, family), printed as a summary.
fn census(msgs: &[Msg]) -> BTreeMap<(&'static str, u8), usize> {
    let mut c = BTreeMap::new();
    for m in msgs {
        *c.entry((kind_name(m.kind), m.family)).or_insert(0) += 1;
    }
    c
}

/// The prefixes that have a message of `kind` with protocol `protocol`.
fn prefixes_of(msgs: &[Msg], kind: u16, protocol: u8) -> HashSet<Net> {
    msgs.iter()
        .filter(|m| m.kind == kind && m.protocol == protocol)
        .filter_map(|m| m.dst)
        .collect()
}

// ---------------------------------------------------------------------------------------
// Configs
// ---------------------------------------------------------------------------------------

/// bgpd's config: AS 65001, eBGP to each (address, AS) in `peers` with hold 9 / keepalive 3,
/// routes accepted through a permit-all route-map (no outbound policy: FRR's default
/// `bgp ebgp-requires-policy` then keeps it from sending anything back), up to 4 paths per
/// prefix across different neighbour ASes.
fn bgpd_config(router_id: &str, peers: &[(&str, u32)]) -> String {
    let mut c = format!(
        "route-map ACCEPT permit 10\n!\nrouter bgp 65001\n bgp router-id {router_id}\n \
         no bgp network import-check\n bgp bestpath as-path multipath-relax\n"
    );
    for (addr, asn) in peers {
        c.push_str(&format!(
            " neighbor {addr} remote-as {asn}\n neighbor {addr} timers 3 9\n \
             neighbor {addr} timers connect 1\n"
        ));
    }
    for (af, v6) in [("ipv4 unicast", false), ("ipv6 unicast", true)] {
        c.push_str(&format!(" address-family {af}\n  maximum-paths 4\n"));
        for (addr, _) in peers {
            if addr.contains(':') == v6 {
                c.push_str(&format!(
                    "  neighbor {addr} activate\n  neighbor {addr} route-map ACCEPT in\n"
                ));
            } else if !v6 {
                c.push_str(&format!("  no neighbor {addr} activate\n"));
            }
        }
        c.push_str(" exit-address-family\n");
    }
    c
}

fn speaker(asn: u32, router_id: &str, peer4: &str, peer6: &str) -> String {
    let n = |a: &str| GoBgpNeighbor {
        address: a.parse().unwrap(),
        peer_as: 65001,
        hold_time: 9,
        keepalive: 3,
    };
    GoBgpConfig {
        asn,
        router_id: router_id.parse().unwrap(),
        neighbors: vec![n(peer4), n(peer6)],
    }
    .toml()
}

fn addr(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn add_ns(lab: &mut NetLab, name: &str) {
    add_ns_without_dad(lab, name).unwrap();
}

/// Adds `a4` and `a6` (a /64, nodad) to `dev` in `ns`.
fn address_link(lab: &NetLab, ns: &str, dev: &str, a4: &str, a6: &str) {
    lab.ip(ns, &["addr", "add", a4, "dev", dev]).unwrap();
    lab.ip(ns, &["addr", "add", a6, "dev", dev, "nodad"])
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// gobgp -> bgpd -> zebra -> FPM
// ---------------------------------------------------------------------------------------

const V4_ROUTES: usize = 2000;
const V6_ROUTES: usize = 500;

#[test]
fn bgp_routes_reach_fpm_with_next_hop_groups() {
    bgp_routes_reach_fpm(true);
}

#[test]
fn bgp_routes_reach_fpm_without_next_hop_groups() {
    bgp_routes_reach_fpm(false);
}

/// rtr and spk joined by r0 -- s0.
fn bgp_lab(tag: &str) -> NetLab {
    let mut lab = NetLab::new(tag);
    add_ns(&mut lab, "rtr");
    add_ns(&mut lab, "spk");
    lab.veth("rtr", "r0", "spk", "s0").unwrap();
    address_link(&lab, "rtr", "r0", "10.0.0.1/24", "fd00::1/64");
    address_link(&lab, "spk", "s0", "10.0.0.2/24", "fd00::2/64");
    lab
}

fn bgp_routes_reach_fpm(nhg: bool) {
    let _one = serial();
    if skip(&[FRR_PROGRAMS, GOBGP_PROGRAMS]) {
        return;
    }
    let mode = if nhg {
        "next-hop groups"
    } else {
        "no next-hop groups"
    };
    let lab = bgp_lab(if nhg { "dmg" } else { "dmp" });
    let r0 = ifindex(&lab, "rtr", "r0").unwrap();
    let capture = FpmCapture::start(&lab, "rtr", FPM_PORT).unwrap();
    let frr = Frr::start(
        &lab,
        "rtr",
        FrrConfig {
            bgpd: Some(bgpd_config(
                "10.0.0.1",
                &[("10.0.0.2", 65002), ("fd00::2", 65002)],
            )),
            fpm: Some(FpmTarget::local(nhg)),
            ..FrrConfig::default()
        },
    )
    .unwrap();
    let spk = GoBgp::start(
        &lab,
        "spk",
        &speaker(65002, "10.0.0.2", "10.0.0.1", "fd00::1"),
    )
    .unwrap();

    let up = wait_until("both BGP sessions", Duration::from_secs(60), || {
        frr.bgp_established("10.0.0.2") && frr.bgp_established("fd00::2")
    })
    .unwrap();
    wait_until(
        "the speaker's side of the sessions",
        Duration::from_secs(10),
        || spk.established(addr("10.0.0.1")) && spk.established(addr("fd00::1")),
    )
    .unwrap();
    capture
        .wait_connections(1, Duration::from_secs(15))
        .unwrap();
    eprintln!("[{mode}] sessions established after {up:.1?}");

    let v4 = Net::block(addr("100.64.0.0"), 24, V4_ROUTES);
    let v6 = Net::block(addr("2001:db8:1000::"), 48, V6_ROUTES);
    let start = Instant::now();
    spk.add_routes(&v4, addr("10.0.0.2")).unwrap();
    spk.add_routes(&v6, addr("fd00::2")).unwrap();
    let injected = start.elapsed();
    assert_eq!(spk.rib_count(Family::V4).unwrap(), V4_ROUTES);
    assert_eq!(spk.rib_count(Family::V6).unwrap(), V6_ROUTES);
    let local = spk.local_prefixes(Family::V6).unwrap();
    assert_eq!(local, v6.iter().copied().collect::<HashSet<Net>>());
    wait_until(
        "zebra to install every BGP route",
        Duration::from_secs(120),
        || {
            frr.fib_count(Family::V4, "ebgp").ok() == Some(V4_ROUTES as u64)
                && frr.fib_count(Family::V6, "ebgp").ok() == Some(V6_ROUTES as u64)
        },
    )
    .unwrap();
    let in_rib = start.elapsed();

    // zebra's RIB: every prefix, from bgp, selected and installed, via the speaker on r0.
    for (family, nets, nh) in [
        (Family::V4, &v4, addr("10.0.0.2")),
        (Family::V6, &v6, addr("fd00::2")),
    ] {
        let routes = frr.routes_json(family).unwrap();
        let bgp: HashMap<Net, _> = routes
            .iter()
            .filter(|r| r.protocol == "bgp")
            .map(|r| (r.prefix, r))
            .collect();
        assert_eq!(bgp.len(), nets.len(), "{family:?} BGP routes in zebra");
        for n in nets {
            let r = bgp
                .get(n)
                .unwrap_or_else(|| panic!("{n} missing from zebra"));
            assert!(r.selected && r.installed, "{n}: {r:?}");
            assert_eq!(r.nexthops.len(), 1, "{n}: {r:?}");
            let h = &r.nexthops[0];
            assert_eq!(h.ip, Some(nh), "{n}: {r:?}");
            assert_eq!(h.interface.as_deref(), Some("r0"), "{n}: {r:?}");
            assert!(h.active && h.fib, "{n}: {r:?}");
        }
    }
    // zebra installs them in the kernel as well, FPM or not.
    let kernel4 = lab.ip("rtr", &["route", "show", "proto", "bgp"]).unwrap();
    let kernel6 = lab
        .ip("rtr", &["-6", "route", "show", "proto", "bgp"])
        .unwrap();
    assert_eq!(
        kernel4
            .lines()
            .filter(|l| !l.starts_with(char::is_whitespace))
            .count(),
        V4_ROUTES
    );
    assert_eq!(
        kernel6
            .lines()
            .filter(|l| !l.starts_with(char::is_whitespace))
            .count(),
        V6_ROUTES
    );

    // The FPM stream: an RTM_NEWROUTE for every prefix.
    let expected: HashSet<Net> = v4.iter().chain(&v6).copied().collect();
    let fpm_all = wait_until(
        "an RTM_NEWROUTE per prefix",
        Duration::from_secs(60),
        || {
            prefixes_of(&messages(&capture.bytes(0)), RTM_NEWROUTE, RTPROT_BGP)
                .is_superset(&expected)
        },
    );
    let msgs = messages(&capture.bytes(0));
    eprintln!("[{mode}] after the announcement: {:?}", census(&msgs));
    fpm_all.unwrap();
    let in_fpm = start.elapsed();
    eprintln!(
        "[{mode}] {V4_ROUTES} + {V6_ROUTES} prefixes: injected in {injected:.2?} ({} mrt \
         inject runs), in zebra's FIB after {in_rib:.2?}, all in FPM after {in_fpm:.2?}",
        spk.injections()
    );

    let nexthops: HashMap<u32, &Msg> = msgs
        .iter()
        .filter(|m| m.kind == RTM_NEWNEXTHOP)
        .filter_map(|m| m.nh_id.map(|id| (id, m)))
        .collect();
    for m in msgs
        .iter()
        .filter(|m| m.kind == RTM_NEWROUTE && m.protocol == RTPROT_BGP)
    {
        let dst = m.dst.unwrap();
        let family = dst.family();
        let nh = if family == Family::V4 {
            addr("10.0.0.2")
        } else {
            addr("fd00::2")
        };
        assert_eq!(m.family, family.af(), "{m:?}");
        assert_eq!(m.table, RT_TABLE_MAIN, "{m:?}");
        assert_eq!(m.rtm_type, libc::RTN_UNICAST, "{m:?}");
        // IPv4 routes replace, IPv6 routes do not (zebra without --v6-rr-semantics).
        assert_ne!(m.flags & NLM_F_CREATE, 0, "{m:?}");
        assert_eq!(m.flags & NLM_F_REPLACE != 0, family == Family::V4, "{m:?}");
        if nhg {
            let id = m.nh_id.unwrap_or_else(|| panic!("no RTA_NH_ID: {m:?}"));
            assert!(m.gateway.is_none() && m.oif.is_none(), "{m:?}");
            let g = nexthops
                .get(&id)
                .unwrap_or_else(|| panic!("next hop {id} not sent before {m:?}"));
            assert!(g.frame < m.frame, "next hop {id} after its route");
            assert_eq!((g.gateway, g.oif), (Some(nh), Some(r0)), "{g:?}");
        } else {
            assert!(m.nh_id.is_none(), "{m:?}");
            assert_eq!((m.gateway, m.oif), (Some(nh), Some(r0)), "{m:?}");
        }
    }
    if nhg {
        for f in [Family::V4, Family::V6] {
            assert!(
                msgs.iter()
                    .any(|m| m.kind == RTM_NEWNEXTHOP && m.family == f.af()),
                "no RTM_NEWNEXTHOP for {f:?}"
            );
        }
    } else {
        assert!(
            !msgs.iter().any(|m| m.kind == RTM_NEWNEXTHOP),
            "next hops sent"
        );
    }

    // Withdraw everything: an RTM_DELROUTE for every prefix.
    let start = Instant::now();
    spk.withdraw_all().unwrap();
    wait_until(
        "zebra to drop every BGP route",
        Duration::from_secs(60),
        || {
            frr.fib_count(Family::V4, "ebgp").ok() == Some(0)
                && frr.fib_count(Family::V6, "ebgp").ok() == Some(0)
        },
    )
    .unwrap();
    let out_rib = start.elapsed();
    let deleted = wait_until(
        "an RTM_DELROUTE per prefix",
        Duration::from_secs(60),
        || {
            prefixes_of(&messages(&capture.bytes(0)), RTM_DELROUTE, RTPROT_BGP)
                .is_superset(&expected)
        },
    );
    let msgs = messages(&capture.bytes(0));
    eprintln!("[{mode}] after the withdrawal: {:?}", census(&msgs));
    deleted.unwrap();
    eprintln!(
        "[{mode}] withdrawal: out of zebra's FIB after {out_rib:.2?}, all RTM_DELROUTE after {:.2?}",
        start.elapsed()
    );
    assert_eq!(capture.count(), 1, "zebra reconnected during the test");
    assert!(lab
        .ip("rtr", &["route", "show", "proto", "bgp"])
        .unwrap()
        .is_empty());
}

// ---------------------------------------------------------------------------------------
// zebra and the FPM connection going away
// ---------------------------------------------------------------------------------------

#[test]
fn zebra_replays_after_fpm_reconnect_and_restart() {
    let _one = serial();
    if skip(&[FRR_PROGRAMS]) {
        return;
    }
    let mut lab = NetLab::new("dmr");
    lab.add_ns("rtr").unwrap();
    lab.add_ns("nbr").unwrap();
    lab.veth("rtr", "r0", "nbr", "n0").unwrap();
    address_link(&lab, "rtr", "r0", "10.1.0.1/24", "fd01::1/64");
    address_link(&lab, "nbr", "n0", "10.1.0.2/24", "fd01::2/64");
    let statics = "ip route 198.51.100.0/24 10.1.0.2\n\
                   ip route 203.0.113.0/24 10.1.0.2\n\
                   ip route 203.0.113.0/24 10.1.0.3\n\
                   ip route 192.0.2.0/24 blackhole\n\
                   ipv6 route 2001:db8:1::/48 fd01::2\n";
    let ours: HashSet<Net> = [
        "198.51.100.0/24",
        "203.0.113.0/24",
        "192.0.2.0/24",
        "2001:db8:1::/48",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect();
    let capture = FpmCapture::start(&lab, "rtr", FPM_PORT).unwrap();
    let started = Instant::now();
    let mut frr = Frr::start(
        &lab,
        "rtr",
        FrrConfig {
            staticd: Some(statics.into()),
            fpm: Some(FpmTarget::local(true)),
            ..FrrConfig::default()
        },
    )
    .unwrap();
    capture
        .wait_connections(1, Duration::from_secs(15))
        .unwrap();
    eprintln!(
        "first FPM connection {:.2?} after zebra started",
        started.elapsed()
    );
    let has_ours = |conn: usize| {
        prefixes_of(
            &messages(&capture.bytes(conn)),
            RTM_NEWROUTE,
            RTPROT_ZSTATIC,
        )
        .is_superset(&ours)
    };
    wait_until(
        "the static routes over FPM",
        Duration::from_secs(30),
        || has_ours(0),
    )
    .unwrap();
    let first = capture
        .wait_quiet(0, Duration::from_millis(500), Duration::from_secs(10))
        .unwrap();
    let msgs = messages(&capture.bytes(0));
    eprintln!("first connection: {first} bytes, {:?}", census(&msgs));
    let ecmp = msgs
        .iter()
        .find(|m| m.kind == RTM_NEWROUTE && m.dst == Some("203.0.113.0/24".parse().unwrap()))
        .unwrap();
    let group = msgs
        .iter()
        .find(|m| m.kind == RTM_NEWNEXTHOP && m.nh_id == ecmp.nh_id)
        .unwrap();
    assert_eq!(group.group.len(), 2, "{group:?}");
    let black = msgs
        .iter()
        .find(|m| m.kind == RTM_NEWROUTE && m.dst == Some("192.0.2.0/24".parse().unwrap()))
        .unwrap();
    assert_eq!(
        (black.rtm_type, black.nh_id),
        (libc::RTN_BLACKHOLE, None),
        "{black:?}"
    );

    // The server closes: zebra connects again after 3 s and replays everything.
    capture.close_connection().unwrap();
    let closed = Instant::now();
    capture
        .wait_connections(2, Duration::from_secs(15))
        .unwrap();
    let again = closed.elapsed();
    wait_until("the replay", Duration::from_secs(10), || has_ours(1)).unwrap();
    let replay = capture
        .wait_quiet(1, Duration::from_millis(500), Duration::from_secs(10))
        .unwrap();
    let msgs = messages(&capture.bytes(1));
    eprintln!(
        "reconnected {again:.2?} after the close; replay: {replay} bytes, {:?}",
        census(&msgs)
    );
    assert!(
        again >= Duration::from_millis(2500),
        "reconnected after {again:?}"
    );
    assert!(msgs
        .iter()
        .all(|m| m.kind == RTM_NEWROUTE || m.kind == RTM_NEWNEXTHOP));
    let first_route = msgs.iter().position(|m| m.kind == RTM_NEWROUTE).unwrap();
    assert!(
        msgs[first_route..].iter().all(|m| m.kind == RTM_NEWROUTE),
        "next hops after routes"
    );
    let connected: HashSet<Net> = prefixes_of(&msgs, RTM_NEWROUTE, libc::RTPROT_KERNEL);
    assert!(
        connected.contains(&"10.1.0.0/24".parse().unwrap()),
        "{connected:?}"
    );

    // zebra dies: the connection ends with no RTM_DELROUTE; a new zebra connects, and
    // staticd, which reconnects 10 s after it lost zebra, sends its routes again.
    let killed = Instant::now();
    frr.kill_zebra(libc::SIGKILL).unwrap();
    wait_until("the FPM connection to end", Duration::from_secs(5), || {
        !capture.connected()
    })
    .unwrap();
    assert!(!messages(&capture.bytes(1))
        .iter()
        .any(|m| m.kind == RTM_DELROUTE));
    frr.start_zebra().unwrap();
    capture
        .wait_connections(3, Duration::from_secs(15))
        .unwrap();
    let reconnected = killed.elapsed();
    wait_until(
        "staticd's routes in the new zebra",
        Duration::from_secs(40),
        || {
            frr.fib_count(Family::V4, "static").ok() == Some(3)
                && frr.fib_count(Family::V6, "static").ok() == Some(1)
        },
    )
    .unwrap();
    let back = killed.elapsed();
    wait_until(
        "staticd's routes over FPM again",
        Duration::from_secs(10),
        || has_ours(2),
    )
    .unwrap();
    eprintln!(
        "zebra killed and restarted: FPM connection {reconnected:.2?} after the kill, \
         static routes back in zebra after {back:.2?}, over FPM after {:.2?}; {:?}",
        killed.elapsed(),
        census(&messages(&capture.bytes(2)))
    );
    assert_eq!(capture.count(), 3);
}

// ---------------------------------------------------------------------------------------
// BIRD -> kernel
// ---------------------------------------------------------------------------------------

#[test]
fn bird_exports_static_routes_to_the_kernel() {
    let _one = serial();
    if skip(&[BIRD_PROGRAMS]) {
        return;
    }
    let mut lab = NetLab::new("dmb");
    lab.add_ns("brd").unwrap();
    lab.add_ns("nbr").unwrap();
    lab.veth("brd", "b0", "nbr", "n0").unwrap();
    lab.veth("brd", "b1", "nbr", "n1").unwrap();
    address_link(&lab, "brd", "b0", "10.9.0.1/24", "fd09::1/64");
    lab.ip("brd", &["addr", "add", "10.9.1.1/24", "dev", "b1"])
        .unwrap();
    let id: Ipv4Addr = "10.9.0.1".parse().unwrap();
    let full = bird_kernel_config(
        id,
        &[
            "198.51.100.0/24 via 10.9.0.2",
            "203.0.113.0/24 via 10.9.0.2 via 10.9.1.2",
            "192.0.2.0/24 blackhole",
            "192.0.2.128/25 unreachable",
        ],
        &[
            "2001:db8:1::/48 via fd09::2",
            "2001:db8:dead::/48 blackhole",
        ],
    );
    let bird = Bird::start(&lab, "brd", &full).unwrap();
    let show = |v6: bool| {
        let mut args = vec!["route", "show", "proto", "bird"];
        if v6 {
            args.insert(0, "-6");
        }
        lab.ip("brd", &args).unwrap()
    };
    let took = wait_until(
        "BIRD's routes in the kernel",
        Duration::from_secs(15),
        || {
            show(false)
                .lines()
                .filter(|l| !l.starts_with(char::is_whitespace))
                .count()
                == 4
                && show(true).lines().count() == 2
        },
    );
    let (v4, v6) = (show(false), show(true));
    eprintln!("kernel, IPv4:\n{v4}kernel, IPv6:\n{v6}");
    took.unwrap();
    // (`ip route show proto bird` leaves "proto bird" out of each line.)
    assert!(
        v4.contains("198.51.100.0/24 via 10.9.0.2 dev b0 metric 32"),
        "{v4}"
    );
    assert!(v4.contains("blackhole 192.0.2.0/24 metric 32"), "{v4}");
    assert!(v4.contains("unreachable 192.0.2.128/25 metric 32"), "{v4}");
    let multi: Vec<&str> = v4
        .lines()
        .skip_while(|l| !l.starts_with("203.0.113.0/24"))
        .take(3)
        .collect();
    assert_eq!(multi.len(), 3, "{v4}");
    assert!(multi[1].contains("nexthop via 10.9.0.2 dev b0"), "{v4}");
    assert!(multi[2].contains("nexthop via 10.9.1.2 dev b1"), "{v4}");
    assert!(
        v6.contains("2001:db8:1::/48 via fd09::2 dev b0 metric 32"),
        "{v6}"
    );
    assert!(v6.contains("blackhole 2001:db8:dead::/48"), "{v6}");
    let count = bird.birdc("show route count").unwrap();
    assert!(
        count.contains("4 of 4 routes for 4 networks in table master4"),
        "{count}"
    );

    // Drop the multipath and blackhole routes from the config: BIRD takes them out.
    let fewer = bird_kernel_config(
        id,
        &["198.51.100.0/24 via 10.9.0.2", "192.0.2.128/25 unreachable"],
        &["2001:db8:1::/48 via fd09::2"],
    );
    bird.configure(&fewer).unwrap();
    let took = wait_until(
        "the dropped routes to leave the kernel",
        Duration::from_secs(10),
        || show(false).lines().count() == 2 && show(true).lines().count() == 1,
    );
    let (v4, v6) = (show(false), show(true));
    took.unwrap();
    assert!(
        !v4.contains("203.0.113.0/24") && !v4.contains("192.0.2.0/24"),
        "{v4}"
    );
    assert!(!v6.contains("2001:db8:dead::/48"), "{v6}");

    // With `persist` off, BIRD takes its routes out of the kernel when it stops.
    drop(bird);
    assert!(show(false).is_empty() && show(true).is_empty());
}

// ---------------------------------------------------------------------------------------
// Captures for the decoder tests (tests/data/fpm) and timing, run by hand
// ---------------------------------------------------------------------------------------

/// rtr with two speakers:
///
/// ```text
///   spk1 (AS 65002) s1 ── r1 rtr r2 ── s2 spk2 (AS 65003)
///   10.0.1.2 fd00:1::2   10.0.1.1 10.0.2.1   10.0.2.2 fd00:2::2
///                        fd00:1::1 fd00:2::1
/// ```
struct TwoSpeakers {
    capture: FpmCapture,
    frr: Frr,
    spk1: GoBgp,
    spk2: GoBgp,
    r1: u32,
    r2: u32,
    _lab: NetLab,
}

fn two_speakers(tag: &str, nhg: bool) -> TwoSpeakers {
    let mut lab = NetLab::new(tag);
    for ns in ["rtr", "spk1", "spk2"] {
        add_ns(&mut lab, ns);
    }
    lab.veth("rtr", "r1", "spk1", "s1").unwrap();
    lab.veth("rtr", "r2", "spk2", "s2").unwrap();
    address_link(&lab, "rtr", "r1", "10.0.1.1/24", "fd00:1::1/64");
    address_link(&lab, "rtr", "r2", "10.0.2.1/24", "fd00:2::1/64");
    address_link(&lab, "spk1", "s1", "10.0.1.2/24", "fd00:1::2/64");
    address_link(&lab, "spk2", "s2", "10.0.2.2/24", "fd00:2::2/64");
    let r1 = ifindex(&lab, "rtr", "r1").unwrap();
    let r2 = ifindex(&lab, "rtr", "r2").unwrap();
    let capture = FpmCapture::start(&lab, "rtr", FPM_PORT).unwrap();
    let peers = [
        ("10.0.1.2", 65002),
        ("fd00:1::2", 65002),
        ("10.0.2.2", 65003),
        ("fd00:2::2", 65003),
    ];
    let frr = Frr::start(
        &lab,
        "rtr",
        FrrConfig {
            // Unused next-hop groups go after 1 s instead of 180 s, so that the captures
            // hold RTM_DELNEXTHOP too.
            zebra: "zebra nexthop-group keep 1\n".into(),
            bgpd: Some(bgpd_config("10.0.0.1", &peers)),
            fpm: Some(FpmTarget::local(nhg)),
            ..FrrConfig::default()
        },
    )
    .unwrap();
    let spk1 = GoBgp::start(
        &lab,
        "spk1",
        &speaker(65002, "10.0.1.2", "10.0.1.1", "fd00:1::1"),
    )
    .unwrap();
    let spk2 = GoBgp::start(
        &lab,
        "spk2",
        &speaker(65003, "10.0.2.2", "10.0.2.1", "fd00:2::1"),
    )
    .unwrap();
    wait_until("four BGP sessions", Duration::from_secs(60), || {
        peers.iter().all(|(a, _)| frr.bgp_established(a))
    })
    .unwrap();
    TwoSpeakers {
        capture,
        frr,
        spk1,
        spk2,
        r1,
        r2,
        _lab: lab,
    }
}

/// Waits until zebra's FIB holds `v4`/`v6` BGP routes and those of `ecmp` have two next
/// hops, then until connection `conn` of the capture is quiet; its length.
fn settle(t: &TwoSpeakers, conn: usize, v4: u64, v6: u64, ecmp: &[Net]) -> usize {
    let settled = wait_until("zebra to settle", Duration::from_secs(60), || {
        let counts = t.frr.fib_count(Family::V4, "ebgp").ok() == Some(v4)
            && t.frr.fib_count(Family::V6, "ebgp").ok() == Some(v6);
        counts
            && (ecmp.is_empty()
                || [Family::V4, Family::V6].iter().all(|&f| {
                    t.frr.routes_json(f).is_ok_and(|rs| {
                        rs.iter()
                            .filter(|r| r.protocol == "bgp" && ecmp.contains(&r.prefix))
                            .all(|r| r.nexthops.iter().filter(|h| h.fib).count() == 2)
                    })
                }))
    });
    if let Err(e) = settled {
        for f in [Family::V4, Family::V6] {
            eprintln!("{f:?}: {:?}", t.frr.route_summary(f));
            for r in t.frr.routes_json(f).unwrap_or_default() {
                eprintln!("  {} {} {:?}", r.prefix, r.protocol, r.nexthops);
            }
        }
        panic!(
            "{e} ({v4} + {v6} routes, {} with two next hops)",
            ecmp.len()
        );
    }
    t.capture
        .wait_quiet(conn, Duration::from_millis(2500), Duration::from_secs(30))
        .unwrap()
}

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/fpm")
}

/// Writes `NAME.fpm` and `NAME.phases` (one `offset<TAB>what` line per phase: the byte
/// offset where the phase's frames begin).
fn save(name: &str, bytes: &[u8], phases: &[(usize, String)]) {
    let dir = data_dir();
    std::fs::create_dir_all(&dir).unwrap();
    for (off, what) in phases {
        let (_, whole) = fpm_frames(&bytes[..*off]).unwrap();
        assert_eq!(
            whole, *off,
            "phase {what:?} does not start on a frame boundary"
        );
    }
    std::fs::write(dir.join(format!("{name}.fpm")), bytes).unwrap();
    let text: String = phases.iter().map(|(o, w)| format!("{o}\t{w}\n")).collect();
    std::fs::write(dir.join(format!("{name}.phases")), text).unwrap();
    eprintln!(
        "{name}.fpm: {} bytes, {:?}",
        bytes.len(),
        census(&messages(bytes))
    );
}

#[test]
#[ignore = "rewrites tests/data/fpm; run by hand"]
fn capture_fpm_streams() {
    let _one = serial();
    if skip(&[FRR_PROGRAMS, GOBGP_PROGRAMS]) {
        return;
    }
    let v4 = Net::block(addr("198.18.0.0"), 24, 20);
    let v6 = Net::block(addr("2001:db8:100::"), 48, 10);
    let (keep4, gone4) = v4.split_at(15);
    let (keep6, gone6) = v6.split_at(5);
    let ecmp: Vec<Net> = keep4.iter().chain(keep6).copied().collect();
    for nhg in [true, false] {
        let name = if nhg { "bgp-nhg" } else { "bgp-no-nhg" };
        let t = two_speakers(if nhg { "dcg" } else { "dcp" }, nhg);
        let mut phases = Vec::new();
        t.capture
            .wait_connections(1, Duration::from_secs(15))
            .unwrap();
        phases.push((0, "connect: zebra's table (connected routes)".to_string()));
        let at = settle(&t, 0, 0, 0, &[]);
        phases.push((at, "spk1 announces 20 IPv4 + 10 IPv6".into()));
        t.spk1.add_routes(&v4, addr("10.0.1.2")).unwrap();
        t.spk1.add_routes(&v6, addr("fd00:1::2")).unwrap();
        let at = settle(&t, 0, 20, 10, &[]);
        phases.push((at, "spk1 withdraws 5 IPv4 + 5 IPv6".into()));
        t.spk1.withdraw_routes(gone4).unwrap();
        t.spk1.withdraw_routes(gone6).unwrap();
        let at = settle(&t, 0, 15, 5, &[]);
        phases.push((
            at,
            "spk2 announces the remaining 15 + 5 (ECMP over r1 and r2)".into(),
        ));
        t.spk2.add_routes(keep4, addr("10.0.2.2")).unwrap();
        t.spk2.add_routes(keep6, addr("fd00:2::2")).unwrap();
        let at = settle(&t, 0, 15, 5, &ecmp);
        phases.push((at, "spk2 withdraws all (back to one next hop)".into()));
        t.spk2.withdraw_all().unwrap();
        let at = settle(&t, 0, 15, 5, &[]);
        phases.push((at, "spk1 withdraws all".into()));
        t.spk1.withdraw_all().unwrap();
        let end = settle(&t, 0, 0, 0, &[]);
        let bytes = t.capture.bytes(0);
        assert_eq!(bytes.len(), end);
        eprintln!("{name}: r1 = ifindex {}, r2 = ifindex {}", t.r1, t.r2);
        save(name, &bytes, &phases);
    }
    for nhg in [true, false] {
        let suffix = if nhg { "nhg" } else { "no-nhg" };
        let mut t = two_speakers(if nhg { "drg" } else { "drp" }, nhg);
        t.capture
            .wait_connections(1, Duration::from_secs(15))
            .unwrap();
        t.spk1.add_routes(&v4, addr("10.0.1.2")).unwrap();
        t.spk1.add_routes(&v6, addr("fd00:1::2")).unwrap();
        t.spk2.add_routes(keep4, addr("10.0.2.2")).unwrap();
        t.spk2.add_routes(keep6, addr("fd00:2::2")).unwrap();
        settle(&t, 0, 20, 10, &ecmp);
        t.capture.close_connection().unwrap();
        t.capture
            .wait_connections(2, Duration::from_secs(15))
            .unwrap();
        let end = t
            .capture
            .wait_quiet(1, Duration::from_millis(2500), Duration::from_secs(30))
            .unwrap();
        save(
            &format!("replay-{suffix}"),
            &t.capture.bytes(1)[..end],
            &[(
                0,
                "replay after the FPM server closed the connection".into(),
            )],
        );
        // zebra crashes and comes back; bgpd is restarted so that it sends its routes again.
        t.frr.kill_zebra(libc::SIGKILL).unwrap();
        t.frr.start_zebra().unwrap();
        t.capture
            .wait_connections(3, Duration::from_secs(15))
            .unwrap();
        let first = t
            .capture
            .wait_quiet(2, Duration::from_millis(2500), Duration::from_secs(30))
            .unwrap();
        t.frr.restart_clients().unwrap();
        wait_until("four BGP sessions again", Duration::from_secs(60), || {
            ["10.0.1.2", "fd00:1::2", "10.0.2.2", "fd00:2::2"]
                .iter()
                .all(|a| t.frr.bgp_established(a))
        })
        .unwrap();
        let end = settle(&t, 2, 20, 10, &ecmp);
        save(
            &format!("zebra-restart-{suffix}"),
            &t.capture.bytes(2)[..end],
            &[
                (
                    0,
                    "a new zebra after a crash (SIGKILL): its first connection".into(),
                ),
                (first, "bgpd restarted: the routes come back".into()),
            ],
        );
        drop(t);
    }
}

#[test]
#[ignore = "timing; run by hand with --nocapture"]
fn convergence_7000() {
    let _one = serial();
    if skip(&[FRR_PROGRAMS, GOBGP_PROGRAMS]) {
        return;
    }
    for nhg in [true, false] {
        let lab = bgp_lab("dmc");
        let capture = FpmCapture::start(&lab, "rtr", FPM_PORT).unwrap();
        let frr = Frr::start(
            &lab,
            "rtr",
            FrrConfig {
                bgpd: Some(bgpd_config(
                    "10.0.0.1",
                    &[("10.0.0.2", 65002), ("fd00::2", 65002)],
                )),
                fpm: Some(FpmTarget::local(nhg)),
                ..FrrConfig::default()
            },
        )
        .unwrap();
        let spk = GoBgp::start(
            &lab,
            "spk",
            &speaker(65002, "10.0.0.2", "10.0.0.1", "fd00::1"),
        )
        .unwrap();
        wait_until("both BGP sessions", Duration::from_secs(60), || {
            frr.bgp_established("10.0.0.2") && frr.bgp_established("fd00::2")
        })
        .unwrap();
        capture
            .wait_connections(1, Duration::from_secs(15))
            .unwrap();
        let v4 = Net::block(addr("100.64.0.0"), 24, 5000);
        let v6 = Net::block(addr("2001:db8:1000::"), 48, 2000);
        let expected: HashSet<Net> = v4.iter().chain(&v6).copied().collect();
        let start = Instant::now();
        spk.add_routes(&v4, addr("10.0.0.2")).unwrap();
        let t4 = start.elapsed();
        spk.add_routes(&v6, addr("fd00::2")).unwrap();
        let injected = start.elapsed();
        let runs = spk.injections();
        wait_until("zebra's FIB", Duration::from_secs(180), || {
            frr.fib_count(Family::V4, "ebgp").ok() == Some(5000)
                && frr.fib_count(Family::V6, "ebgp").ok() == Some(2000)
        })
        .unwrap();
        let fib = start.elapsed();
        wait_until("FPM", Duration::from_secs(60), || {
            prefixes_of(&messages(&capture.bytes(0)), RTM_NEWROUTE, RTPROT_BGP)
                .is_superset(&expected)
        })
        .unwrap();
        let fpm = start.elapsed();
        let bytes = capture.len(0);
        // The server closes: how soon zebra is back, how long its replay of 7,000 routes takes.
        let closed = Instant::now();
        capture.close_connection().unwrap();
        capture
            .wait_connections(2, Duration::from_secs(15))
            .unwrap();
        let back = closed.elapsed();
        wait_until("the replay", Duration::from_secs(60), || {
            prefixes_of(&messages(&capture.bytes(1)), RTM_NEWROUTE, RTPROT_BGP)
                .is_superset(&expected)
        })
        .unwrap();
        let replayed = closed.elapsed();
        let start = Instant::now();
        spk.withdraw_all().unwrap();
        wait_until("withdrawal", Duration::from_secs(120), || {
            prefixes_of(&messages(&capture.bytes(1)), RTM_DELROUTE, RTPROT_BGP)
                .is_superset(&expected)
        })
        .unwrap();
        eprintln!(
            "[nhg {nhg}] 5000 + 2000 prefixes: gobgp holds the IPv4 ones after {t4:.2?}, all \
             after {injected:.2?} ({runs} mrt inject runs); zebra's FIB complete after \
             {fib:.2?}; every RTM_NEWROUTE after {fpm:.2?} ({bytes} FPM bytes); after a \
             close, zebra back after {back:.2?}, replay complete after {replayed:.2?}; \
             withdrawal over FPM in {:.2?}",
            start.elapsed(),
        );
        drop((spk, frr, capture));
        drop(lab);
    }
}
