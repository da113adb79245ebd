//! Scale-out: two vfsr routers side by side, one upstream router spreading flows over both
//! with BGP multipath, and what the traffic does when one of them stops or loses its link.
//!
//! ```text
//!   cl: sender, 64 UDP flows (10.0.0.2:40000-40063 → 198.18.{0-3}.1:5001), 2,000 packets/s
//!    │ eth0 10.0.0.2
//!    │ eth-cl 10.0.0.1
//!   up: Linux forwarding, FRR (zebra, bgpd AS 65000, bfdd); 198.18.0.0/22 as a multipath
//!       route via 10.1.1.2 and 10.1.2.2, hashed on the 5-tuple (fib_multipath_hash_policy=1);
//!       the tap: an AF_PACKET socket that sees every frame leaving for ra or rb
//!   eth-ra 10.1.1.1                    eth-rb 10.1.2.1
//!    │                                  │
//!   up0 10.1.1.2 (TAP vup0)            up0 10.1.2.2 (TAP vup0)
//!   ra: vfsrd + FRR                    rb: vfsrd + FRR
//!       (zebra ─FPM─▶ vfsrd,               (the same; both routers are AS 65001, so
//!        bgpd AS 65001, bfdd)               up sees one AS path twice: multipath)
//!   dn0 10.2.1.1 (TAP vdn0)            dn0 10.2.2.1 (TAP vdn0)
//!    │                                  │
//!   eth-ra 10.2.1.2                    eth-rb 10.2.2.2
//!   dn: FRR (zebra, bgpd AS 65100, bfdd); 198.18.{0-3}.1/24 on lo, announced to both
//!       routers; 10.0.0.0/24 back over both (multipath); the receiver on 198.18.x.1:5001
//! ```
//!
//! The downstream prefixes come from a BGP speaker in `dn` rather than from static routes in
//! the routers: that is how a network behind several edge routers announces itself, both
//! routers then carry the same routes without sharing configuration, the route back to the
//! client is learnt over both routers as well, and the BGP sessions on vfsrd's second port
//! (over its second TAP) are exercised too.
//!
//! Every BGP session runs BFD (FRR's bfdd, 100 ms intervals, multiplier 3) when bfdd is
//! installed and `VFSR_SCALEOUT_BFD` is not `0`; without it the sessions' hold time (9 s)
//! bounds the failover. BFD's UDP packets (3784) to a router's address are routing-class
//! punts to vfsrd's TAPs, like BGP.
//!
//! What the test checks, one packet at a time (sequence numbers; the tap in `up` records
//! which router each frame went into, the receiver which ones arrived):
//! 1. steady state: both routers carry traffic, each flow keeps to one of them, nothing is
//!    lost (and so after every return below);
//! 2. unplanned stop, `kill -TERM` of ra's vfsrd: the last frame into ra leaves up within the
//!    failover bound (2 s with BFD, hold time + 2 s without), every packet after it arrives
//!    through rb, and no frame enters ra for the rest of the outage (at least 2 s of
//!    traffic). vfsrd started again: FRR's sessions and zebra's FPM connection come back by
//!    themselves and traffic spreads again. The BGP sessions may be back before zebra's FPM
//!    connection (which it retries every 3 s) has replayed the routes: vfsrd then drops the
//!    flows sent to it (`no_route`), so up to FPM_RECONNECT + 1 s of traffic may be lost on
//!    the way back. bgpd doubles a peer's idle hold time (up to 120 s) at every attempt that
//!    ends in an error, so if up's session is still down half-way through the 90 s wait for
//!    traffic, the test clears it once, as an operator would, and prints what bgpd reported;
//! 3. a cut link, `ip link set up0 down` in rb (up sees the carrier go): the same checks
//!    with the roles swapped, and nothing lost when the link comes back;
//! 4. planned maintenance of ra: its upstream session shut first (`neighbor 10.1.1.1
//!    shutdown`), vfsrd restarted, the session opened again once vfsrd's FIB holds the
//!    downstream routes, its FPM source is `in_sync` and a ping from dn answers (which also
//!    resolves dn in vfsrd's fresh ARP table): nothing lost either way.
//!
//! zebra in `up` and `dn` installs plain multipath routes in the kernel rather than next-hop
//! objects (`no zebra nexthop kernel enable`): with FRR 8.4, a member of a kernel next-hop
//! group whose link flaps is gone from the group for good (see [`frr`]).
//!
//! The failover times (from the stop or the cut to the last frame into the failed router,
//! and to the first packet from which everything arrives through the other) and the packets
//! lost are printed. Needs root, network namespaces and FRR 8.4 (zebra, bgpd, vtysh, the FPM
//! module; bfdd optional); skips with a printed reason otherwise. Every wait is bounded; the
//! namespaces, daemons and threads go away when the test ends, also when it fails.

mod common;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::daemons::{
    ifindex, program_exists, skip_reason, wait_until, Family, FpmTarget, Frr, FrrConfig, BFDD,
    FPM_RECONNECT, FRR_PROGRAMS,
};
use vfsrd::harness::Vfsrd;
use vfsrd::netlab::NetLab;

const VFSRD: &str = env!("CARGO_BIN_EXE_vfsrd");

/// The two vfsr routers, by the index the measurements use.
const ROUTERS: [&str; 2] = ["ra", "rb"];
/// Each router's address on its link to up (up's BGP peer), by the same index.
const UPSTREAM: [&str; 2] = ["10.1.1.2", "10.1.2.2"];
/// How long traffic may take to go into a router again after it came back.
const RECOVERY: Duration = Duration::from_secs(90);
/// The downstream prefixes (dn holds .1 of each on its loopback).
const PREFIXES: [&str; 4] = [
    "198.18.0.0/24",
    "198.18.1.0/24",
    "198.18.2.0/24",
    "198.18.3.0/24",
];
const FLOWS: u16 = 64;
const FIRST_PORT: u16 = 40000;
const DST_PORT: u16 = 5001;
/// Packets per second over all flows.
const RATE: u64 = 2000;
/// BGP keepalive and hold time, seconds.
const KEEPALIVE: u32 = 3;
const HOLD: u32 = 9;
/// BFD transmit and receive interval (ms) and detection multiplier.
const BFD_INTERVAL_MS: u32 = 100;
const BFD_MULTIPLIER: u32 = 3;
/// How long a failed router must stay without traffic before it comes back.
const OUTAGE_QUIET: Duration = Duration::from_secs(2);
/// The steady window measured before the first fault and after each return.
const STEADY: Duration = Duration::from_millis(2000);

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the sessions run BFD: bfdd installed and not turned off.
fn with_bfd() -> bool {
    program_exists(BFDD) && std::env::var("VFSR_SCALEOUT_BFD").map_or(true, |v| v != "0")
}

// ---------------------------------------------------------------------------------------
// vfsrd
// ---------------------------------------------------------------------------------------

/// vfsrd in router namespace `ns` with ports `up0` and `dn0` holding addresses `up` and `dn`,
/// FPM on, and its control API on a socket of its own.
fn start_vfsrd(lab: &NetLab, ns: &str, up: &str, dn: &str) -> Vfsrd {
    Vfsrd::start(lab, ns, Path::new(VFSRD), "scaleout", &vfsrd_config(up, dn)).unwrap()
}

/// Both routers' vfsrd config: one worker, FPM from zebra, the control API on a socket of its
/// own (not the machine's default, which a vfsrd of the host or of another test may hold).
fn vfsrd_config(up: &str, dn: &str) -> String {
    format!(
        r#"
[router]
control_core = 0
workers = [1]
busy_poll_us = 50

[api]
socket = "@SOCKET@"
metrics = "off"

[[interface]]
name = "up0"
addresses = ["{up}"]
[[interface]]
name = "dn0"
addresses = ["{dn}"]

[fpm]
"#
    )
}

// ---------------------------------------------------------------------------------------
// The network and FRR
// ---------------------------------------------------------------------------------------

fn topology(tag: &str) -> NetLab {
    let mut lab = NetLab::new(tag);
    for ns in ["cl", "up", "ra", "rb", "dn"] {
        lab.add_ns(ns).unwrap();
    }
    lab.veth("cl", "eth0", "up", "eth-cl").unwrap();
    lab.veth("up", "eth-ra", "ra", "up0").unwrap();
    lab.veth("up", "eth-rb", "rb", "up0").unwrap();
    lab.veth("ra", "dn0", "dn", "eth-ra").unwrap();
    lab.veth("rb", "dn0", "dn", "eth-rb").unwrap();
    let addr = |ns: &str, a: &str, dev: &str| {
        lab.ip(ns, &["addr", "add", a, "dev", dev]).unwrap();
    };
    addr("cl", "10.0.0.2/24", "eth0");
    lab.ip("cl", &["route", "add", "default", "via", "10.0.0.1"])
        .unwrap();
    addr("up", "10.0.0.1/24", "eth-cl");
    addr("up", "10.1.1.1/24", "eth-ra");
    addr("up", "10.1.2.1/24", "eth-rb");
    for key in [
        "net.ipv4.ip_forward=1",
        "net.ipv4.fib_multipath_hash_policy=1",
    ] {
        lab.sh("up", &["sysctl", "-qw", key]).unwrap();
    }
    addr("dn", "10.2.1.2/24", "eth-ra");
    addr("dn", "10.2.2.2/24", "eth-rb");
    for p in PREFIXES {
        let a = p.replace(".0/24", ".1/24");
        addr("dn", &a, "lo");
    }
    lab
}

/// A neighbor's lines in `router bgp`: eBGP, fast reconnects, BFD when on.
fn neighbor(addr: &str, asn: u32, bfd: bool) -> String {
    let mut s = format!(
        " neighbor {addr} remote-as {asn}\n neighbor {addr} timers {KEEPALIVE} {HOLD}\n \
         neighbor {addr} timers connect 1\n"
    );
    if bfd {
        s.push_str(&format!(
            " neighbor {addr} bfd\n neighbor {addr} bfd profile fast\n"
        ));
    }
    s
}

/// bgpd's config: AS `asn`, the neighbors, the prefixes it originates, ECMP over up to four
/// paths.
fn bgpd(asn: u32, id: &str, neighbors: &[(&str, u32)], networks: &[&str], bfd: bool) -> String {
    let mut c = format!(
        "router bgp {asn}\n bgp router-id {id}\n no bgp ebgp-requires-policy\n \
         no bgp network import-check\n"
    );
    for (a, peer_as) in neighbors {
        c.push_str(&neighbor(a, *peer_as, bfd));
    }
    c.push_str(" address-family ipv4 unicast\n  maximum-paths 4\n");
    for n in networks {
        c.push_str(&format!("  network {n}\n"));
    }
    c.push_str(" exit-address-family\n");
    c
}

fn bfdd_config() -> String {
    format!(
        "bfd\n profile fast\n  detect-multiplier {BFD_MULTIPLIER}\n  \
         receive-interval {BFD_INTERVAL_MS}\n  transmit-interval {BFD_INTERVAL_MS}\n !\n!\n"
    )
}

/// FRR in `ns`: zebra (streaming to vfsrd over FPM when `fpm`), bgpd, and bfdd when `bfd`.
/// Without FPM, zebra installs plain multipath routes in the kernel rather than next-hop
/// objects: FRR 8.4 loses a member of a kernel next-hop group for good when that member's
/// link flaps (the kernel drops it from the group, zebra believes the group unchanged and
/// never installs it again; later releases reinstall groups on link up, FRR pull request
/// 13413).
fn frr(lab: &NetLab, ns: &str, bgpd: String, fpm: bool, bfd: bool) -> Frr {
    let zebra = if fpm {
        String::new()
    } else {
        "no zebra nexthop kernel enable\n".to_string()
    };
    let mut f = Frr::start(
        lab,
        ns,
        FrrConfig {
            zebra,
            bgpd: Some(bgpd),
            staticd: None,
            fpm: fpm.then(|| FpmTarget::local(true)),
        },
    )
    .unwrap();
    if bfd {
        f.start_bfdd(&bfdd_config()).unwrap();
    }
    f
}

/// Whether bfdd has the session with `peer` up.
fn bfd_up(f: &Frr, peer: &str) -> bool {
    let Ok(text) = f.vtysh_on("bfdd", "show bfd peers json") else {
        return false;
    };
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    v.as_array()
        .into_iter()
        .flatten()
        .any(|p| p["peer"].as_str() == Some(peer) && p["status"].as_str() == Some("up"))
}

/// The next hops zebra has in the FIB for `prefix`.
fn fib_hops(f: &Frr, prefix: &str) -> usize {
    f.routes_json(Family::V4)
        .unwrap_or_default()
        .iter()
        .filter(|r| r.prefix.to_string() == prefix && r.selected)
        .flat_map(|r| &r.nexthops)
        .filter(|h| h.fib)
        .count()
}

/// Waits until `f`'s sessions with `peers` are established (and their BFD sessions up). A
/// session still down half-way through (bgpd's idle hold time doubles after each failed
/// attempt, as across a vfsrd restart) is cleared once, as an operator would.
fn sessions_up(f: &Frr, who: &str, peers: &[&str], bfd: bool, timeout: Duration) {
    for p in peers {
        let what = format!("{who}: BGP with {p}");
        if wait_until(&what, timeout / 2, || f.bgp_established(p)).is_err() {
            clear_if_down(f, who, p);
            wait_until(&what, timeout - timeout / 2, || f.bgp_established(p)).unwrap();
        }
        if bfd {
            wait_until(&format!("{who}: BFD with {p}"), timeout, || bfd_up(f, p)).unwrap();
        }
    }
}

// ---------------------------------------------------------------------------------------
// Traffic: sender, tap, receiver
// ---------------------------------------------------------------------------------------

/// What the threads show while they run.
#[derive(Default)]
struct Live {
    /// Stops the sender.
    stop_sending: AtomicBool,
    /// Stops the tap and the receiver.
    stop: AtomicBool,
    /// Frames seen leaving up for each router, and when the last one left (ns since the
    /// base).
    into: [AtomicU64; 2],
    into_last_ns: [AtomicU64; 2],
    /// Frames the tap's socket dropped (known once the tap has stopped).
    tap_drops: AtomicU64,
}

/// The sender in `cl`, the tap in `up` and the receiver in `dn`, stopped and joined on
/// drop.
struct Traffic {
    base: Instant,
    live: Arc<Live>,
    sender: Option<JoinHandle<Vec<u64>>>,
    tap: Option<JoinHandle<Vec<(u64, u8)>>>,
    receiver: Option<JoinHandle<Vec<u64>>>,
}

/// Per packet, by sequence number: when it was sent (ns since the base), which router it
/// went into (0 = ra, 1 = rb), whether it arrived.
struct Record {
    sent_ns: Vec<u64>,
    into: Vec<Option<u8>>,
    arrived: Vec<bool>,
}

fn payload_seq(udp_payload: &[u8]) -> Option<u64> {
    udp_payload
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
}

/// An AF_PACKET socket in the calling thread's namespace that sees every frame, incoming and
/// outgoing (only `ETH_P_ALL` sockets see what the host sends), with a 100 ms receive
/// timeout.
fn packet_socket() -> Result<OwnedFd, String> {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: socket(2) with constant arguments.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            i32::from(proto),
        )
    };
    if fd < 0 {
        return Err(format!("AF_PACKET: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 100_000,
    };
    // SAFETY: setsockopt on our socket with a value of the size given.
    let ok = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        ) == 0
    };
    if !ok {
        return Err(format!("SO_RCVTIMEO: {}", std::io::Error::last_os_error()));
    }
    big_receive_buffer(fd.as_raw_fd()).map_err(|e| format!("SO_RCVBUFFORCE: {e}"))?;
    Ok(fd)
}

/// An 8 MiB receive buffer (seconds of the test's traffic), whatever `rmem_max` says.
fn big_receive_buffer(fd: i32) -> std::io::Result<()> {
    let size: libc::c_int = 8 << 20;
    // SAFETY: setsockopt on a socket the caller holds, with a value of the size given.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The tap: every test packet leaving `up` through `eth-ra` or `eth-rb`, as (sequence,
/// router).
fn tap_loop(fd: OwnedFd, ifindex: [u32; 2], base: Instant, live: &Live) -> Vec<(u64, u8)> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 2048];
    while !live.stop.load(Ordering::Relaxed) {
        // SAFETY: an all-zero sockaddr_ll is valid.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: recvfrom into our buffer and address of the sizes given.
        let n = unsafe {
            libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&mut from as *mut libc::sockaddr_ll).cast(),
                &mut len,
            )
        };
        if n <= 0
            || from.sll_pkttype != libc::PACKET_OUTGOING
            || from.sll_protocol != (libc::ETH_P_IP as u16).to_be()
        {
            continue;
        }
        let Some(r) = ifindex.iter().position(|&i| i as i32 == from.sll_ifindex) else {
            continue;
        };
        let ip = &buf[..n as usize];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        if ip.len() < ihl + 16 || ip[9] != 17 {
            continue;
        }
        let udp = &ip[ihl..];
        if u16::from_be_bytes([udp[2], udp[3]]) != DST_PORT {
            continue;
        }
        if let Some(seq) = payload_seq(&udp[8..]) {
            seen.push((seq, r as u8));
            live.into[r].fetch_add(1, Ordering::Relaxed);
            live.into_last_ns[r].store(base.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }
    // SAFETY: getsockopt of PACKET_STATISTICS into a tpacket_stats of the size given.
    let mut st: libc::tpacket_stats = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: as above.
    let ok = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        ) == 0
    };
    if ok {
        live.tap_drops
            .store(u64::from(st.tp_drops), Ordering::Relaxed);
    }
    seen
}

fn send_loop(socks: Vec<UdpSocket>, base: Instant, live: &Live) -> Vec<u64> {
    let mut sent_ns = Vec::new();
    let start = Instant::now();
    let mut seq = 0u64;
    let mut payload = [0u8; 32];
    while !live.stop_sending.load(Ordering::Relaxed) {
        let due = start.elapsed().as_nanos() as u64 * RATE / 1_000_000_000;
        while seq < due {
            let flow = (seq % u64::from(FLOWS)) as usize;
            let dst = SocketAddrV4::new(Ipv4Addr::new(198, 18, (flow % 4) as u8, 1), DST_PORT);
            payload[..8].copy_from_slice(&seq.to_le_bytes());
            sent_ns.push(base.elapsed().as_nanos() as u64);
            let _ = socks[flow].send_to(&payload, dst);
            seq += 1;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    sent_ns
}

fn receive_loop(sock: UdpSocket, live: &Live) -> Vec<u64> {
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    while !live.stop.load(Ordering::Relaxed) {
        if let Ok(n) = sock.recv(&mut buf) {
            if let Some(seq) = payload_seq(&buf[..n]) {
                got.push(seq);
            }
        }
    }
    got
}

impl Traffic {
    fn start(lab: &NetLab) -> Traffic {
        let base = Instant::now();
        let live = Arc::new(Live::default());
        let ifs = [
            ifindex(lab, "up", "eth-ra").unwrap(),
            ifindex(lab, "up", "eth-rb").unwrap(),
        ];
        let tap_fd = lab.in_ns("up", packet_socket).unwrap().unwrap();
        let rx = lab
            .in_ns("dn", || {
                let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, DST_PORT))?;
                s.set_read_timeout(Some(Duration::from_millis(100)))?;
                big_receive_buffer(s.as_raw_fd())?;
                Ok::<_, std::io::Error>(s)
            })
            .unwrap()
            .unwrap();
        let socks = lab
            .in_ns("cl", || {
                (0..FLOWS)
                    .map(|i| UdpSocket::bind((Ipv4Addr::new(10, 0, 0, 2), FIRST_PORT + i)))
                    .collect::<Result<Vec<_>, _>>()
            })
            .unwrap()
            .unwrap();
        let spawn = |name: &str| std::thread::Builder::new().name(name.to_string());
        let l = Arc::clone(&live);
        let tap = spawn("tap")
            .spawn(move || tap_loop(tap_fd, ifs, base, &l))
            .unwrap();
        let l = Arc::clone(&live);
        let receiver = spawn("receiver")
            .spawn(move || receive_loop(rx, &l))
            .unwrap();
        let l = Arc::clone(&live);
        let sender = spawn("sender")
            .spawn(move || send_loop(socks, base, &l))
            .unwrap();
        Traffic {
            base,
            live,
            sender: Some(sender),
            tap: Some(tap),
            receiver: Some(receiver),
        }
    }

    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    fn frames_into(&self, r: usize) -> u64 {
        self.live.into[r].load(Ordering::Relaxed)
    }

    /// How long ago the last frame went into router `r` (forever if none did).
    fn since_last_into(&self, r: usize) -> Duration {
        if self.frames_into(r) == 0 {
            return Duration::MAX;
        }
        let last = self.live.into_last_ns[r].load(Ordering::Relaxed);
        Duration::from_nanos(self.now_ns().saturating_sub(last))
    }

    /// Stops the sender, lets the last packets land, stops the rest; every packet's fate.
    fn finish(&mut self) -> Record {
        self.live.stop_sending.store(true, Ordering::Relaxed);
        let sent_ns = self
            .sender
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        std::thread::sleep(Duration::from_millis(300));
        self.live.stop.store(true, Ordering::Relaxed);
        let seen = self
            .tap
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        let got = self
            .receiver
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        let n = sent_ns.len();
        let mut into = vec![None; n];
        for (seq, r) in seen {
            if let Some(slot) = into.get_mut(seq as usize) {
                *slot = Some(r);
            }
        }
        let mut arrived = vec![false; n];
        for seq in got {
            if let Some(slot) = arrived.get_mut(seq as usize) {
                *slot = true;
            }
        }
        Record {
            sent_ns,
            into,
            arrived,
        }
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.live.stop_sending.store(true, Ordering::Relaxed);
        self.live.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.sender.take() {
            let _ = h.join();
        }
        if let Some(h) = self.tap.take() {
            let _ = h.join();
        }
        if let Some(h) = self.receiver.take() {
            let _ = h.join();
        }
    }
}

// ---------------------------------------------------------------------------------------
// What the packets show
// ---------------------------------------------------------------------------------------

/// A steady window: frames into each router, flows on each, flows seen on both, lost.
#[derive(Debug)]
struct Spread {
    frames: [usize; 2],
    flows: [usize; 2],
    flows_on_both: usize,
    lost: usize,
}

/// A fault: from the stop or cut (t0) until the failed router came back (t1).
#[derive(Debug)]
struct Failover {
    /// From t0 to the sending of the last frame that went into the failed router.
    last_into_failed: Duration,
    /// From t0 to the first packet from which every packet arrived through the other.
    all_on_other: Duration,
    /// From the last frame into the failed router until t1, with none going in.
    quiet: Duration,
    /// Packets lost in [t0, t1), and how many of them never reached either router.
    lost: usize,
    lost_before_routers: usize,
}

/// A return: from the restart or the link back up (t1) until the next steady window.
#[derive(Debug)]
struct Comeback {
    /// From t1 to the first packet that arrived through the router that came back.
    first_through: Option<Duration>,
    lost: usize,
}

impl Record {
    fn ns(d: u64) -> Duration {
        Duration::from_nanos(d)
    }

    /// The sequence numbers of the packets sent in [from, to) (ns since the base).
    fn window(&self, from: u64, to: u64) -> std::ops::Range<usize> {
        self.sent_ns.partition_point(|&t| t < from)..self.sent_ns.partition_point(|&t| t < to)
    }

    fn flow(seq: usize) -> usize {
        seq % usize::from(FLOWS)
    }

    fn spread(&self, from: u64, to: u64) -> Spread {
        let mut frames = [0; 2];
        let mut on = vec![[false; 2]; usize::from(FLOWS)];
        let mut lost = 0;
        for s in self.window(from, to) {
            if let Some(r) = self.into[s] {
                frames[usize::from(r)] += 1;
                on[Self::flow(s)][usize::from(r)] = true;
            }
            lost += usize::from(!self.arrived[s]);
        }
        Spread {
            frames,
            flows: [0, 1].map(|r| on.iter().filter(|f| f[r]).count()),
            flows_on_both: on.iter().filter(|f| f[0] && f[1]).count(),
            lost,
        }
    }

    fn failover(&self, t0: u64, t1: u64, failed: u8) -> Failover {
        let w = self.window(t0, t1);
        let other = 1 - failed;
        let last_into = w
            .clone()
            .rev()
            .find(|&s| self.into[s] == Some(failed))
            .map_or(t0, |s| self.sent_ns[s]);
        let all_on_other = w
            .clone()
            .rev()
            .find(|&s| !(self.arrived[s] && self.into[s] == Some(other)))
            .and_then(|s| self.sent_ns.get(s + 1))
            .map_or(t0, |&t| t);
        Failover {
            last_into_failed: Self::ns(last_into - t0),
            all_on_other: Self::ns(all_on_other.saturating_sub(t0)),
            quiet: Self::ns(t1.saturating_sub(last_into)),
            lost: w.clone().filter(|&s| !self.arrived[s]).count(),
            lost_before_routers: w
                .filter(|&s| !self.arrived[s] && self.into[s].is_none())
                .count(),
        }
    }

    fn comeback(&self, t1: u64, t2: u64, back: u8) -> Comeback {
        let w = self.window(t1, t2);
        Comeback {
            first_through: w
                .clone()
                .find(|&s| self.arrived[s] && self.into[s] == Some(back))
                .map(|s| Self::ns(self.sent_ns[s] - t1)),
            lost: w.filter(|&s| !self.arrived[s]).count(),
        }
    }
}

fn check_spread(what: &str, s: &Spread) {
    println!(
        "{what}: frames into ra {} / rb {}, flows {} / {}, flows on both {}, lost {}",
        s.frames[0], s.frames[1], s.flows[0], s.flows[1], s.flows_on_both, s.lost
    );
    let total = s.frames[0] + s.frames[1];
    assert!(
        total as u64 >= RATE,
        "{what}: a full window of traffic ({total})"
    );
    for (r, name) in ROUTERS.iter().enumerate() {
        assert!(
            s.frames[r] * 5 >= total && s.flows[r] >= usize::from(FLOWS) / 5,
            "{what}: {name} carries its share: {s:?}"
        );
    }
    assert_eq!(s.flows_on_both, 0, "{what}: every flow keeps to one router");
    assert_eq!(s.lost, 0, "{what}: nothing lost");
}

// ---------------------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------------------

/// Waits until every downstream prefix is an ECMP route over both routers in up's zebra.
fn up_has_both(up: &Frr, timeout: Duration) {
    wait_until("up's routes over both routers", timeout, || {
        PREFIXES.iter().all(|p| fib_hops(up, p) == 2)
    })
    .unwrap();
}

/// Waits until vfsrd's FIB holds every downstream prefix (through its dn0 port).
fn vfsr_has_prefixes(v: &Vfsrd, timeout: Duration) {
    let mut last = BTreeMap::new();
    let r = wait_until(
        &format!("the downstream prefixes in {}'s FIB", v.ns()),
        timeout,
        || {
            last = v.fib(Duration::from_secs(10));
            PREFIXES
                .iter()
                .all(|p| last.get(*p).is_some_and(|l| l.contains("dev dn0")))
        },
    );
    if let Err(e) = r {
        panic!("{e}: {last:?}");
    }
}

/// Waits until `n` more frames went into router `r` than `since`; on a timeout, what up and
/// the router hold.
fn traffic_into(
    t: &Traffic,
    r: usize,
    since: u64,
    n: u64,
    timeout: Duration,
    state: impl Fn() -> String,
) -> Duration {
    let what = format!("traffic into {}", ROUTERS[r]);
    match wait_until(&what, timeout, || t.frames_into(r) >= since + n) {
        Ok(d) => d,
        Err(e) => panic!("{e}\n{}", state()),
    }
}

/// [`traffic_into`] after router `r` came back, within [`RECOVERY`], with `up`'s session to
/// it cleared once if it is still not Established half-way through. bgpd doubles a peer's
/// idle hold time (up to 120 s) at every session attempt that ends in an error, so after a
/// restart that cost several attempts, up may wait in Idle longer than the test does; an
/// operator would clear the peer, and so does the test, saying so with what bgpd reported.
fn traffic_back_into(t: &Traffic, r: usize, since: u64, up: &Frr, state: impl Fn() -> String) {
    let what = format!("traffic into {}", ROUTERS[r]);
    let half = RECOVERY / 2;
    if wait_until(&what, half, || t.frames_into(r) >= since + 100).is_ok() {
        return;
    }
    println!("no traffic into {} after {half:?}", ROUTERS[r]);
    clear_if_down(up, "up", UPSTREAM[r]);
    traffic_into(t, r, since, 100, RECOVERY - half, state);
}

/// Clears `f`'s BGP session with `peer` if it is not Established, saying so with what bgpd
/// reported of it.
fn clear_if_down(f: &Frr, who: &str, peer: &str) {
    if f.bgp_established(peer) {
        return;
    }
    let detail = f
        .vtysh(&format!("show bgp neighbors {peer}"))
        .unwrap_or_else(|e| e.to_string());
    let lines: Vec<&str> = detail
        .lines()
        .filter(|l| {
            l.contains("BGP state") || l.contains("start timer") || l.contains("Last reset")
        })
        .collect();
    println!(
        "{who}'s session to {peer} is not Established ({}): clearing it",
        lines.join("; ").trim()
    );
    if let Err(e) = f.vtysh(&format!("clear bgp {peer}")) {
        println!("clear bgp {peer} failed: {e}");
    }
}

/// What up's FRR and kernel and a router's FRR and vfsrd hold, for failure messages.
fn state(lab: &NetLab, up: &Frr, router: &Frr, v: &Vfsrd) -> String {
    let show = |f: &Frr, cmd: &str| f.vtysh(cmd).unwrap_or_else(|e| e.to_string());
    let ip = |ns: &str, args: &[&str]| lab.ip(ns, args).unwrap_or_else(|e| e.to_string());
    format!(
        "up: {}{}{}{}{}{}\n{}: {}{}{}vfsrd FIB {:?}\nvfsrd control {}",
        show(up, "show bgp summary"),
        show(up, &format!("show bgp ipv4 unicast {}", PREFIXES[0])),
        show(up, &format!("show ip route {}", PREFIXES[0])),
        show(up, "show bfd peers brief"),
        ip("up", &["route", "show", PREFIXES[0]]),
        ip("up", &["neigh"]),
        v.ns(),
        show(router, "show bgp summary"),
        show(router, "show bfd peers brief"),
        ip(v.ns(), &["link"]),
        v.fib(Duration::from_secs(10)),
        v.stats()["control"],
    )
}

/// Waits until no frame has gone into router `r` for [`OUTAGE_QUIET`].
fn outage(t: &Traffic, r: usize, bound: Duration) -> Duration {
    wait_until(
        &format!("no traffic into {} for {OUTAGE_QUIET:?}", ROUTERS[r]),
        bound + OUTAGE_QUIET + Duration::from_secs(1),
        || t.since_last_into(r) >= OUTAGE_QUIET,
    )
    .unwrap()
}

fn ping(lab: &NetLab, ns: &str, dst: &str, n: u32) -> u32 {
    let count = n.to_string();
    let o = lab
        .exec(
            ns,
            &["ping", "-n", "-c", &count, "-i", "0.2", "-W", "2", dst],
        )
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .split(',')
        .find_map(|p| p.trim().strip_suffix(" received"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn two_routers_share_the_flows_and_take_over_from_each_other() {
    let mut need = FRR_PROGRAMS.to_vec();
    need.extend(["ip", "ping", "sysctl"]);
    if let Some(why) = skip_reason(&need) {
        vfsr_skip::skip(&why);
        return;
    }
    let _one = serial();
    let bfd = with_bfd();
    let bound = if bfd {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(u64::from(HOLD) + 2)
    };
    println!(
        "BFD {}; failover bound {bound:?}",
        if bfd { "on" } else { "off" }
    );
    let started = Instant::now();
    let lab = topology("so");
    let mut ra = start_vfsrd(&lab, "ra", "10.1.1.2/24", "10.2.1.1/24");
    let rb = start_vfsrd(&lab, "rb", "10.1.2.2/24", "10.2.2.1/24");
    let routers = UPSTREAM.map(|a| (a, 65001));
    let up = frr(
        &lab,
        "up",
        bgpd(65000, "10.0.0.1", &routers, &["10.0.0.0/24"], bfd),
        false,
        bfd,
    );
    let fa = frr(
        &lab,
        "ra",
        bgpd(
            65001,
            "10.1.1.2",
            &[("10.1.1.1", 65000), ("10.2.1.2", 65100)],
            &[],
            bfd,
        ),
        true,
        bfd,
    );
    let fb = frr(
        &lab,
        "rb",
        bgpd(
            65001,
            "10.1.2.2",
            &[("10.1.2.1", 65000), ("10.2.2.2", 65100)],
            &[],
            bfd,
        ),
        true,
        bfd,
    );
    let dn = frr(
        &lab,
        "dn",
        bgpd(
            65100,
            "10.2.1.2",
            &[("10.2.1.1", 65001), ("10.2.2.1", 65001)],
            &PREFIXES,
            bfd,
        ),
        false,
        bfd,
    );
    let settle = Duration::from_secs(60);
    sessions_up(&up, "up", &UPSTREAM, bfd, settle);
    sessions_up(&dn, "dn", &["10.2.1.1", "10.2.2.1"], bfd, settle);
    up_has_both(&up, settle);
    wait_until("dn's route back over both routers", settle, || {
        fib_hops(&dn, "10.0.0.0/24") == 2
    })
    .unwrap();
    vfsr_has_prefixes(&ra, settle);
    vfsr_has_prefixes(&rb, settle);
    assert_eq!(ping(&lab, "cl", "198.18.0.1", 3), 3, "ping through vfsr");
    println!("converged after {:.1} s", started.elapsed().as_secs_f64());

    // 1. Steady state: many flows over both routers.
    let mut t = Traffic::start(&lab);
    for r in 0..2 {
        traffic_into(&t, r, 0, 100, Duration::from_secs(10), String::new);
    }
    let s0 = t.now_ns();
    std::thread::sleep(STEADY);

    // 2. ra's vfsrd stops (SIGTERM), and starts again: FRR's sessions come back by
    // themselves, zebra's FPM connection within FPM_RECONNECT of vfsrd listening again.
    let t0 = t.now_ns();
    ra.stop();
    outage(&t, 0, bound);
    let t1 = t.now_ns();
    let before = t.frames_into(0);
    ra.spawn(&lab).unwrap();
    traffic_back_into(&t, 0, before, &up, || state(&lab, &up, &fa, &ra));
    vfsr_has_prefixes(&ra, settle);
    up_has_both(&up, settle);
    let s1 = t.now_ns();
    std::thread::sleep(STEADY);

    // 3. rb's upstream link is cut (in rb: up sees its carrier go), and comes back.
    let t2 = t.now_ns();
    lab.ip("rb", &["link", "set", "up0", "down"]).unwrap();
    outage(&t, 1, bound);
    let t3 = t.now_ns();
    let before = t.frames_into(1);
    lab.ip("rb", &["link", "set", "up0", "up"]).unwrap();
    traffic_back_into(&t, 1, before, &up, || state(&lab, &up, &fb, &rb));
    vfsr_has_prefixes(&rb, settle);
    up_has_both(&up, settle);
    let s2 = t.now_ns();
    std::thread::sleep(STEADY);

    // 4. ra out of service and back, planned: its upstream session shut first (up withdraws
    // ra's paths at once), vfsrd restarted, the session opened again once vfsrd holds the
    // downstream routes and its FPM source is in sync.
    let ra_drops = ra.stats()["drops"].clone();
    let t4 = t.now_ns();
    fa.configure("router bgp 65001\nneighbor 10.1.1.1 shutdown")
        .unwrap();
    outage(&t, 0, bound);
    ra.stop();
    ra.spawn(&lab).unwrap();
    sessions_up(&fa, "ra", &["10.2.1.2"], bfd, settle);
    vfsr_has_prefixes(&ra, settle);
    wait_until("ra's FPM source in sync", settle, || {
        ra.stats()["routing"]["fpm"]["state"] == "in_sync"
    })
    .unwrap();
    // As an operator checks the downstream link before returning a router to service: a
    // ping from dn to ra's address there also resolves dn in ra's fresh ARP table, so the
    // first flows back are not held for it (its hold queue keeps three packets).
    assert!(ping(&lab, "dn", "10.2.1.1", 2) >= 1, "ping ra from dn");
    let t5 = t.now_ns();
    let before = t.frames_into(0);
    fa.configure("router bgp 65001\nno neighbor 10.1.1.1 shutdown")
        .unwrap();
    traffic_back_into(&t, 0, before, &up, || state(&lab, &up, &fa, &ra));
    up_has_both(&up, settle);
    let s3 = t.now_ns();
    std::thread::sleep(STEADY);
    let end = t.now_ns();

    let rec = t.finish();
    let tap_drops = t.live.tap_drops.load(Ordering::Relaxed);
    let unseen = (0..rec.sent_ns.len())
        .filter(|&s| rec.arrived[s] && rec.into[s].is_none())
        .count();
    println!(
        "{} packets sent, {} arrived; tap drops {tap_drops}, arrivals the tap missed {unseen}",
        rec.sent_ns.len(),
        rec.arrived.iter().filter(|&&a| a).count()
    );
    println!("ra's vfsrd after its unplanned restart dropped {ra_drops}");
    for (name, v) in [("ra", &ra), ("rb", &rb)] {
        let st = v.stats();
        println!(
            "{name}'s vfsrd now: forwarded {}, dropped {}, control {}",
            st["forwarded"], st["drops"], st["control"]
        );
    }
    assert_eq!(tap_drops, 0, "the tap saw every frame");
    assert_eq!(unseen, 0, "every packet that arrived went through ra or rb");

    check_spread("steady", &rec.spread(s0, t0));
    check_spread("after ra's restart", &rec.spread(s1, t2));
    check_spread("after rb's link came back", &rec.spread(s2, t4));
    check_spread("after ra's maintenance", &rec.spread(s3, end));
    // Losses on the way back: none after a link cut or a planned restart; after an unplanned
    // restart, the flows sent to ra between its BGP session's return and zebra's replay
    // over FPM (at most FPM_RECONNECT after vfsrd listens again).
    let unplanned_back =
        (FPM_RECONNECT + Duration::from_secs(1)).as_millis() as usize * RATE as usize / 1000;
    let events = [
        (
            "ra's vfsrd stopped",
            0,
            (t0, t1, s1),
            bound,
            None,
            unplanned_back,
        ),
        ("rb's upstream link cut", 1, (t2, t3, s2), bound, None, 0),
        (
            "ra drained for maintenance",
            0,
            (t4, t5, s3),
            bound,
            Some(0),
            0,
        ),
    ];
    for (what, r, (fault, back_at, settled), bound, lost_max, back_lost_max) in events {
        let f = rec.failover(fault, back_at, r);
        let back = rec.comeback(back_at, settled, r);
        println!(
            "{what}: last frame into it after {:.3} s, everything through the other after \
             {:.3} s, then {:.1} s without a frame into it; {} lost ({} before the routers); \
             back: first packet through it {:.3} s after, {} lost on the way back",
            f.last_into_failed.as_secs_f64(),
            f.all_on_other.as_secs_f64(),
            f.quiet.as_secs_f64(),
            f.lost,
            f.lost_before_routers,
            back.first_through.map_or(f64::NAN, |d| d.as_secs_f64()),
            back.lost
        );
        assert!(
            f.last_into_failed <= bound,
            "{what}: traffic left it within {bound:?}: {f:?}"
        );
        assert!(
            f.all_on_other <= bound,
            "{what}: everything through the other within {bound:?}: {f:?}"
        );
        assert!(
            f.quiet >= OUTAGE_QUIET,
            "{what}: no frame went into it for the rest of the outage: {f:?}"
        );
        if let Some(max) = lost_max {
            assert!(f.lost <= max, "{what}: at most {max} lost: {f:?}");
        }
        assert!(back.first_through.is_some(), "{what}: traffic came back");
        assert!(
            back.lost <= back_lost_max,
            "{what}: at most {back_lost_max} lost on the way back: {back:?}"
        );
    }
    println!("done after {:.1} s", started.elapsed().as_secs_f64());
}
