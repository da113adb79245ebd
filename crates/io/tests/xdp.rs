//! The AF_XDP backend and its steering program on a real veth pair across two network
//! namespaces, in native and in generic mode: transit frames the peer sends arrive through
//! `recv` with their exact bytes and never reach the kernel; ARP, frames to the router's own
//! addresses, IPv6 link-local and neighbour discovery go to the kernel (an AF_PACKET socket
//! on the interface sees them) and never to the port; a batch longer than one copy-mode
//! transmit call arrives at the peer in order; a second program is refused; the program is
//! gone after the interface is dropped. The steering decisions are also checked one frame
//! at a time with `BPF_PROG_TEST_RUN`, without namespaces.
//!
//! Needs root and `ip netns`; without them each test prints why and passes.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use vfsr_io::bpf::{self, BpfObject, XdpMode};
use vfsr_io::raw::RawSocket;
use vfsr_io::xdp::{self, AttachMode, PolicedClass, Policer, XdpConfig, XdpPort};
use vfsr_io::{Backend, Kind};

static SEQ: AtomicU32 = AtomicU32::new(0);

const XDP_PASS: u32 = 2;
const LOCAL4: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
const LOCAL6: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1);
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0xbb, 1];
const PORT_MAC: [u8; 6] = [2, 0, 0, 0, 0xaa, 1];

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn ip_out(args: &[&str]) -> String {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        vfsr_skip::skip("needs root for BPF, AF_XDP and network namespaces");
        return false;
    }
    true
}

/// Two namespaces joined by a veth pair; deleted (with the pair) on drop.
struct Topo {
    ns_a: String,
    ns_b: String,
    if_a: String,
    if_b: String,
}

impl Drop for Topo {
    fn drop(&mut self) {
        ip(&["netns", "del", &self.ns_a]);
        ip(&["netns", "del", &self.ns_b]);
    }
}

fn topo() -> Option<Topo> {
    if !is_root() {
        return None;
    }
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let id = format!("{}x{n}", std::process::id());
    let t = Topo {
        ns_a: format!("vfsrxa{id}"),
        ns_b: format!("vfsrxb{id}"),
        if_a: format!("vxa{id}"),
        if_b: format!("vxb{id}"),
    };
    if !ip(&["netns", "add", &t.ns_a]) {
        vfsr_skip::skip("`ip netns add` does not work here");
        return None;
    }
    let ok = ip(&["netns", "add", &t.ns_b])
        && ip(&[
            "link", "add", &t.if_a, "netns", &t.ns_a, "type", "veth", "peer", "name", &t.if_b,
            "netns", &t.ns_b,
        ])
        && ip(&[
            "-n",
            &t.ns_a,
            "link",
            "set",
            &t.if_a,
            "address",
            "02:00:00:00:aa:01",
        ])
        && ip(&[
            "-n",
            &t.ns_b,
            "link",
            "set",
            &t.if_b,
            "address",
            "02:00:00:00:bb:01",
        ])
        && ip(&["-n", &t.ns_a, "link", "set", &t.if_a, "up"])
        && ip(&["-n", &t.ns_b, "link", "set", &t.if_b, "up"]);
    assert!(ok, "could not build the veth pair {} / {}", t.if_a, t.if_b);
    Some(t)
}

/// Runs `f` on a thread that has entered namespace `ns`. Sockets it opens stay in that
/// namespace wherever they are used; XDP attach and detach act on the thread's namespace,
/// so an `XdpInterface` is opened and dropped inside `f`.
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: a valid namespace descriptor; only this thread changes namespace.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .unwrap()
}

fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An IPv4 frame to `dst` carrying `seq` and a pattern (`len` bytes in all). Checksums do
/// not matter: the program does not check them.
fn ipv4(dst_mac: [u8; 6], dst: Ipv4Addr, seq: u32, len: usize) -> Vec<u8> {
    let mut f = eth(dst_mac, PEER_MAC, 0x0800);
    let total = (len - 14) as u16;
    f.extend_from_slice(&[
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        0,
        0,
        0,
        64,
        17,
        0,
        0,
    ]);
    f.extend_from_slice(&[10, 2, 0, 2]);
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < len {
        f.push((f.len() as u32 ^ seq) as u8);
    }
    f
}

/// An IPv6 frame to `dst` with next header `nh` and `payload`.
fn ipv6(dst_mac: [u8; 6], dst: Ipv6Addr, nh: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = eth(dst_mac, PEER_MAC, 0x86dd);
    let plen = payload.len() as u16;
    f.extend_from_slice(&[0x60, 0, 0, 0, (plen >> 8) as u8, plen as u8, nh, 64]);
    f.extend_from_slice(&Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 2).octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(payload);
    f
}

fn arp_request() -> Vec<u8> {
    let mut f = eth([0xff; 6], PEER_MAC, 0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&[10, 1, 0, 2]);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&LOCAL4.octets());
    f
}

fn is_transit(f: &[u8]) -> bool {
    f.get(12..14) == Some(&[0x08, 0x00][..]) && f.get(30..34) == Some(&[10, 9, 0, 7][..])
}

fn wait_readable(fd: i32, ms: i32) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) };
}

/// Everything `port` receives within `wait` (stopping early once `want` frames came).
fn drain_port(port: &mut XdpPort, want: usize, wait: Duration) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut pool = Vec::new();
    let deadline = Instant::now() + wait;
    while got.len() < want && Instant::now() < deadline {
        let mut out = Vec::new();
        let n = port.recv(&mut out, 16, &mut pool).unwrap();
        assert!(n <= 16);
        assert_eq!(n, out.len());
        for p in out {
            assert_eq!(p.iif, port.ifindex());
            got.push(p.frame().to_vec());
            pool.push(p);
        }
        if n == 0 {
            wait_readable(port.fd().unwrap(), 10);
        }
    }
    got
}

/// Everything a raw socket receives within `wait`, or until `want` frames matching `keep`.
fn drain_raw(
    s: &mut RawSocket,
    want: usize,
    wait: Duration,
    keep: fn(&[u8]) -> bool,
) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 2048];
    let deadline = Instant::now() + wait;
    while got.len() < want && Instant::now() < deadline {
        match s.recv_frame(&mut buf).unwrap() {
            Some(n) => {
                if keep(&buf[..n]) {
                    got.push(buf[..n].to_vec());
                }
            }
            None => wait_readable(s.fd(), 10),
        }
    }
    got
}

fn xdp_shown(t: &Topo) -> bool {
    ip_out(&["-n", &t.ns_a, "link", "show", "dev", &t.if_a]).contains("xdp")
}

fn steer_and_transmit(mode: AttachMode) {
    let Some(t) = topo() else { return };
    let if_b = t.if_b.clone();
    let mut peer = in_ns(&t.ns_b, move || RawSocket::open(&if_b, true).unwrap());
    let if_a = t.if_a.clone();
    let ns_a = t.ns_a.clone();
    let result = in_ns(&ns_a, move || {
        let mut c = XdpConfig::new(&if_a);
        c.mode = mode;
        // veth has no zero-copy: asking for it must fall back to copy mode.
        c.zero_copy = mode == AttachMode::Auto;
        c.frames = 256;
        c.local4 = vec![LOCAL4];
        c.local6 = vec![LOCAL6];
        let (iface, mut ports) = match xdp::open(&c) {
            Ok(x) => x,
            Err(e) => panic!("opening AF_XDP on {if_a} ({mode:?}): {e}"),
        };
        assert_eq!(ports.len(), 1);
        let mut port = ports.pop().unwrap();
        let mut observer = RawSocket::open(&if_a, true).unwrap();
        let want_mode = match mode {
            AttachMode::Generic => XdpMode::Generic,
            _ => XdpMode::Native,
        };
        assert_eq!(iface.mode(), want_mode, "veth attaches natively");
        assert!(!iface.zero_copy(), "veth has no zero-copy");
        assert_eq!(port.kind(), Kind::Xdp);
        assert_eq!(port.queue(), 0);
        let shown = ip_out(&["link", "show", "dev", &if_a]);
        let tag = if want_mode == XdpMode::Generic {
            "xdpgeneric"
        } else {
            "xdp"
        };
        assert!(shown.contains(tag), "`ip link` shows no {tag}: {shown}");

        // Transit frames from the peer: through the port, byte for byte.
        let transit: Vec<Vec<u8>> = (0..40)
            .map(|i| ipv4(PORT_MAC, Ipv4Addr::new(10, 9, 0, 7), i, 60 + i as usize * 7))
            .collect();
        // Control frames: ARP, to our addresses, link-local, NDP to a global address.
        let mut ns = vec![135, 0, 0, 0, 0, 0, 0, 0];
        ns.extend_from_slice(&LOCAL6.octets());
        let control = vec![
            arp_request(),
            ipv4(PORT_MAC, LOCAL4, 1000, 80),
            ipv6(PORT_MAC, LOCAL6, 17, &[0; 16]),
            ipv6(PORT_MAC, "fe80::1".parse().unwrap(), 17, &[0; 16]),
            ipv6(PORT_MAC, "fd00:9::9".parse().unwrap(), 58, &ns),
        ];
        for f in transit.iter().chain(control.iter()) {
            assert!(peer.send_frame(f).unwrap(), "peer send");
        }
        let got = drain_port(&mut port, transit.len(), Duration::from_secs(3));
        let got_transit: Vec<&Vec<u8>> = got.iter().filter(|f| is_transit(f)).collect();
        assert_eq!(got_transit.len(), transit.len(), "transit frames received");
        for (a, b) in got_transit.iter().zip(transit.iter()) {
            assert_eq!(*a, b, "frame bytes");
        }
        // Nothing else arrives at the port: give stragglers a moment.
        let late = drain_port(&mut port, 1, Duration::from_millis(200));
        let stray: Vec<&Vec<u8>> = got
            .iter()
            .chain(late.iter())
            .filter(|f| !is_transit(f))
            .collect();
        assert!(
            stray.is_empty(),
            "control frames reached the port: {stray:02x?}"
        );

        // The kernel saw every control frame and no transit frame.
        let seen = drain_raw(&mut observer, control.len(), Duration::from_secs(2), |f| {
            is_transit(f) || f.get(6..12) == Some(&PEER_MAC[..])
        });
        for c in &control {
            assert!(
                seen.contains(c),
                "control frame not passed to the kernel: {c:02x?}"
            );
        }
        assert!(
            !seen.iter().any(|f| is_transit(f)),
            "a transit frame reached the kernel"
        );
        let counters = iface.counters().unwrap();
        assert_eq!(counters.redirected, transit.len() as u64);
        assert!(
            counters.passed_control >= control.len() as u64,
            "{counters:?}"
        );
        assert_eq!(counters.xsk_missing, 0);
        let st = port.stats();
        assert_eq!(st.rx, transit.len() as u64);
        assert_eq!(st.rx_invalid, 0);

        // Transmit: a batch longer than one copy-mode call, in order at the peer.
        let out: Vec<Vec<u8>> = (0..100)
            .map(|i| {
                ipv4(
                    PEER_MAC,
                    Ipv4Addr::new(10, 9, 0, 7),
                    5000 + i,
                    64 + i as usize,
                )
            })
            .collect();
        let sent = port.send(&mut out.iter().map(|f| f.as_slice())).unwrap();
        assert_eq!(sent, out.len());
        port.flush().unwrap();
        let arrived = drain_raw(&mut peer, out.len(), Duration::from_secs(3), is_transit);
        assert_eq!(arrived, out, "frames at the peer");
        let st = port.stats();
        assert_eq!(st.tx, out.len() as u64);
        assert_eq!(st.tx_dropped, 0);
        assert!(st.kicks >= 1, "copy mode needs a sendto: {st:?}");

        // More than the transmit half of the UMEM at once: the rest is counted, not lost
        // silently, and the frames come back for the next batch.
        let many: Vec<Vec<u8>> = (0..200)
            .map(|i| ipv4(PEER_MAC, Ipv4Addr::new(10, 9, 0, 7), 9000 + i, 64))
            .collect();
        let sent = port.send(&mut many.iter().map(|f| f.as_slice())).unwrap();
        assert!(sent <= 128, "sent {sent} with 128 transmit frames");
        assert_eq!(port.stats().tx_dropped, (many.len() - sent) as u64);
        port.flush().unwrap();
        let arrived = drain_raw(&mut peer, sent, Duration::from_secs(3), is_transit);
        assert_eq!(arrived.len(), sent);
        let again = port
            .send(&mut out.iter().take(10).map(|f| f.as_slice()))
            .unwrap();
        assert_eq!(again, 10, "transmit frames were reclaimed");

        drop(port);
        iface.close().unwrap();
        ip_out(&["link", "show", "dev", &if_a])
    });
    assert!(!result.contains("xdp"), "program left attached: {result}");
    assert!(!xdp_shown(&t));
}

#[test]
fn native_mode_steers_and_transmits() {
    steer_and_transmit(AttachMode::Native);
}

#[test]
fn generic_mode_steers_and_transmits() {
    steer_and_transmit(AttachMode::Generic);
}

#[test]
fn auto_mode_is_native_on_veth() {
    steer_and_transmit(AttachMode::Auto);
}

#[test]
fn an_attached_program_is_not_replaced_and_stays() {
    let Some(t) = topo() else { return };
    let if_a = t.if_a.clone();
    let (open_err, attach_err, still) = in_ns(&t.ns_a, move || {
        let (iface, _ports) = xdp::open(&XdpConfig::new(&if_a)).unwrap();
        // A second router on the same queue: its socket cannot bind.
        let open_err = xdp::open(&XdpConfig::new(&if_a))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        // A second program on the interface: refused in either mode.
        let other = BpfObject::load("other", bpf::objects::XSK_STEER).unwrap();
        let prog = other.prog_fd("xsk_steer").unwrap();
        let attach_err = bpf::XdpAttachment::attach(iface.ifindex(), prog, XdpMode::Native)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        let still = ip_out(&["link", "show", "dev", &if_a]).contains("xdp");
        iface.close().unwrap();
        (open_err, attach_err, still)
    });
    assert!(
        open_err.contains("in use by another AF_XDP socket"),
        "{open_err}"
    );
    assert!(attach_err.contains("already attached"), "{attach_err}");
    assert!(
        attach_err.contains("xdp off"),
        "the error says how to remove it: {attach_err}"
    );
    assert!(still, "the first program was removed by the refused ones");
    assert!(!xdp_shown(&t));
}

/// Run in a child process of this test binary (`VFSR_XDP_CRASH=ns,ifname`): opens the
/// interface and dies without running a destructor, as a killed router would.
#[test]
fn crash_child() {
    let Ok(spec) = std::env::var("VFSR_XDP_CRASH") else {
        return;
    };
    let (ns, ifname) = spec.split_once(',').unwrap();
    let ifname = ifname.to_string();
    in_ns(ns, move || {
        let _open = xdp::open(&XdpConfig::new(&ifname)).unwrap();
        std::process::abort();
    });
}

#[test]
fn a_program_left_by_a_killed_run_is_replaced_and_a_foreign_one_is_not() {
    let Some(t) = topo() else { return };
    // A run that dies without detaching: its program stays on the interface.
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--test-threads=1"])
        .env("VFSR_XDP_CRASH", format!("{},{}", t.ns_a, t.if_a))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the child died");
    assert!(xdp_shown(&t), "the killed run's program stayed attached");
    // (The kernel frees a dead socket's queue a moment after the process is gone: the open
    // waits for it.)
    let if_a = t.if_a.clone();
    let removed_foreign = in_ns(&t.ns_a, move || {
        // The next run replaces it.
        let (iface, _ports) = xdp::open(&XdpConfig::new(&if_a))
            .unwrap_or_else(|e| panic!("opening after a killed run: {e}"));
        let ifindex = iface.ifindex();
        iface.close().unwrap();
        // A program of another name is someone else's: left alone.
        let other = BpfObject::load("other", bpf::objects::XSK_STEER).unwrap();
        let prog = other.prog_fd("xsk_steer").unwrap();
        let foreign = bpf::XdpAttachment::attach(ifindex, prog, XdpMode::Native).unwrap();
        let removed = bpf::XdpAttachment::remove_stale(ifindex, "not_ours").unwrap();
        foreign.detach().unwrap();
        removed
    });
    assert!(!removed_foreign);
    assert!(!xdp_shown(&t));
}

/// Runs the steering program on one frame and says which counter moved.
fn steer(obj: &BpfObject, frame: &[u8]) -> &'static str {
    let prog = obj.prog_fd("xsk_steer").unwrap();
    let counters = obj.map_fd("counters").unwrap();
    let cpus = bpf::possible_cpus().unwrap();
    let read = || -> [u64; 3] {
        let mut out = [0u64; 3];
        for (slot, o) in out.iter_mut().enumerate() {
            let mut buf = vec![0u8; cpus * 8];
            assert!(bpf::map_lookup(counters, &(slot as u32).to_ne_bytes(), &mut buf).unwrap());
            *o = buf
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
                .sum();
        }
        out
    };
    let before = read();
    let (ret, _) = bpf::prog_test_run(prog, frame, 1, 0, None).unwrap();
    // No socket is registered: transit falls back to the kernel too.
    assert_eq!(ret, XDP_PASS);
    let after = read();
    let moved: Vec<usize> = (0..3).filter(|&i| after[i] != before[i]).collect();
    assert_eq!(
        moved.len(),
        1,
        "one counter per frame: {before:?} -> {after:?}"
    );
    ["redirected", "control", "xsk_missing"][moved[0]]
}

#[test]
fn steering_decisions_one_frame_at_a_time() {
    if !is_root() {
        return;
    }
    let obj = BpfObject::load("xsk_steer", bpf::objects::XSK_STEER).unwrap();
    let local4 = obj.map_fd("local4").unwrap();
    let local6 = obj.map_fd("local6").unwrap();
    bpf::map_update(local4, &LOCAL4.octets(), &[1]).unwrap();
    bpf::map_update(local6, &LOCAL6.octets(), &[1]).unwrap();
    let mut v = [0u8; 1];
    assert!(bpf::map_lookup(local4, &LOCAL4.octets(), &mut v).unwrap());
    assert_eq!(v, [1]);
    assert!(!bpf::map_lookup(local4, &[10, 9, 9, 9], &mut v).unwrap());
    assert!(
        bpf::map_update(local4, &[1, 2, 3], &[1]).is_err(),
        "short key refused"
    );

    let transit = "xsk_missing";
    let t4 = ipv4(PORT_MAC, Ipv4Addr::new(10, 9, 0, 7), 1, 64);
    assert_eq!(steer(&obj, &t4), transit);
    assert_eq!(steer(&obj, &ipv4(PORT_MAC, LOCAL4, 1, 64)), "control");
    assert_eq!(
        steer(&obj, &ipv4([0xff; 6], Ipv4Addr::new(10, 9, 0, 7), 1, 64)),
        "control"
    );
    assert_eq!(
        steer(
            &obj,
            &ipv4([0x01, 0, 0x5e, 0, 0, 5], Ipv4Addr::new(224, 0, 0, 5), 1, 64)
        ),
        "control"
    );
    assert_eq!(steer(&obj, &arp_request()), "control");
    let v6 = |dst: &str, nh: u8, p: &[u8]| ipv6(PORT_MAC, dst.parse().unwrap(), nh, p);
    assert_eq!(steer(&obj, &v6("fd00:9::9", 17, &[0; 8])), transit);
    assert_eq!(steer(&obj, &v6("fd00:1::1", 17, &[0; 8])), "control");
    assert_eq!(steer(&obj, &v6("fe80::1", 17, &[0; 8])), "control");
    assert_eq!(steer(&obj, &v6("febf::1", 17, &[0; 8])), "control");
    assert_eq!(steer(&obj, &v6("fec0::1", 17, &[0; 8])), transit);
    assert_eq!(steer(&obj, &v6("ff02::1:ff00:1", 17, &[0; 8])), "control");
    for ty in 133..=137u8 {
        assert_eq!(
            steer(&obj, &v6("fd00:9::9", 58, &[ty, 0, 0, 0, 0, 0, 0, 0])),
            "control"
        );
    }
    // Echo requests and errors through the router are transit.
    assert_eq!(
        steer(&obj, &v6("fd00:9::9", 58, &[128, 0, 0, 0, 0, 0, 0, 0])),
        transit
    );
    assert_eq!(
        steer(&obj, &v6("fd00:9::9", 58, &[1, 0, 0, 0, 0, 0, 0, 0])),
        transit
    );
    // Malformed frames go to the worker, which counts them.
    assert_eq!(steer(&obj, &t4[..20]), transit);
    assert_eq!(steer(&obj, &v6("fd00:9::9", 17, &[])[..40]), transit);
    let mut odd = t4.clone();
    odd[12..14].copy_from_slice(&[0x88, 0xb5]);
    assert_eq!(steer(&obj, &odd), transit);

    // Removing a local address makes it transit again.
    assert!(bpf::map_delete(local4, &LOCAL4.octets()).unwrap());
    assert!(!bpf::map_delete(local4, &LOCAL4.octets()).unwrap());
    assert_eq!(steer(&obj, &ipv4(PORT_MAC, LOCAL4, 1, 64)), transit);
}

/// Runs the steering program `n` times on `frame` (one call, so on one CPU) and returns
/// the last verdict with how many frames were passed as control and how many policed
/// (ARP/ND, ICMP, routing, local).
fn run_n(obj: &BpfObject, frame: &[u8], n: u32) -> (u32, u64, [u64; 4]) {
    let prog = obj.prog_fd("xsk_steer").unwrap();
    let counters = obj.map_fd("counters").unwrap();
    let cpus = bpf::possible_cpus().unwrap();
    let read = |slot: u32| -> u64 {
        let mut buf = vec![0u8; cpus * 8];
        assert!(bpf::map_lookup(counters, &slot.to_ne_bytes(), &mut buf).unwrap());
        buf.chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            .sum()
    };
    let slots = [1, 5, 6, 7, 8];
    let before = slots.map(read);
    let (ret, _) = bpf::prog_test_run(prog, frame, n, 0, None).unwrap();
    let after = slots.map(read);
    let d = |i: usize| after[i] - before[i];
    (ret, d(0), [d(1), d(2), d(3), d(4)])
}

/// Keeps the calling thread on the CPU it runs on: the program's buckets are per CPU.
fn pin_here() {
    // SAFETY: a plain query.
    let cpu = unsafe { libc::sched_getcpu() };
    vfsr_cpu::pin(usize::try_from(cpu).unwrap()).unwrap();
}

#[test]
fn control_classes_are_policed_in_the_program() {
    if !is_root() {
        return;
    }
    const XDP_DROP: u32 = 1;
    let handle = std::thread::spawn(|| {
        pin_here();
        let obj = BpfObject::load("xsk_steer", bpf::objects::XSK_STEER).unwrap();
        bpf::map_update(obj.map_fd("local4").unwrap(), &LOCAL4.octets(), &[1]).unwrap();
        bpf::map_update(obj.map_fd("local6").unwrap(), &LOCAL6.octets(), &[1]).unwrap();
        let police = Policer::for_object("test", &obj).unwrap();
        let v6 = |dst: &str, nh: u8, p: &[u8]| ipv6(PORT_MAC, dst.parse().unwrap(), nh, p);
        let mut echo4 = ipv4(PORT_MAC, LOCAL4, 1, 64);
        echo4[23] = 1;
        let echo6 = ipv6(PORT_MAC, LOCAL6, 58, &[128, 0, 0, 0, 0, 0, 0, 0]);
        let ns = v6("fd00:9::9", 58, &[135, 0, 0, 0, 0, 0, 0, 0]);
        let mld = v6("ff02::16", 58, &[143, 0, 0, 0, 0, 0, 0, 0]);

        // Until user space sets a class, nothing is policed.
        assert_eq!(
            run_n(&obj, &arp_request(), 10),
            (XDP_PASS, 10, [0, 0, 0, 0])
        );

        // ARP/ND at 1/s with a burst of 3: three pass, the rest are dropped and counted;
        // a Neighbor Solicitation takes from the same bucket.
        police.set(PolicedClass::ArpNd, 1, 3).unwrap();
        assert_eq!(run_n(&obj, &arp_request(), 10), (XDP_DROP, 3, [7, 0, 0, 0]));
        assert_eq!(run_n(&obj, &ns, 5), (XDP_DROP, 0, [5, 0, 0, 0]));
        // ICMP has its own bucket, not set yet.
        assert_eq!(run_n(&obj, &echo4, 5), (XDP_PASS, 5, [0, 0, 0, 0]));

        // ICMP at 0/s: every echo to the router dropped, IPv4 and IPv6; MLD (a routing
        // protocol's class) and other traffic to the router still pass, transit still
        // goes to the queue.
        police.set(PolicedClass::Icmp, 0, 0).unwrap();
        assert_eq!(run_n(&obj, &echo4, 3), (XDP_DROP, 0, [0, 3, 0, 0]));
        assert_eq!(run_n(&obj, &echo6, 3), (XDP_DROP, 0, [0, 3, 0, 0]));
        assert_eq!(run_n(&obj, &mld, 2), (XDP_PASS, 2, [0, 0, 0, 0]));
        assert_eq!(
            run_n(&obj, &ipv4(PORT_MAC, LOCAL4, 1, 64), 2),
            (XDP_PASS, 2, [0, 0, 0, 0])
        );
        assert_eq!(
            steer(&obj, &ipv4(PORT_MAC, Ipv4Addr::new(10, 9, 0, 7), 1, 64)),
            "xsk_missing"
        );

        // A new rate takes effect at once: a large one lets a burst of 50 through.
        police.set(PolicedClass::Icmp, 1_000_000, 100).unwrap();
        assert_eq!(run_n(&obj, &echo6, 50), (XDP_PASS, 50, [0, 0, 0, 0]));

        // Routing protocols and everything else sent to the router: by protocol and port,
        // as the pipeline classes them, IPv4 and IPv6, each class its own bucket.
        let udp4 = |sport: u32, dport: u32| ipv4(PORT_MAC, LOCAL4, (sport << 16) | dport, 64);
        // A segment of an established session (ACK set).
        let tcp4 = |sport: u32, dport: u32| {
            let mut f = udp4(sport, dport);
            f[23] = 6;
            f[14 + 20 + 13] = 0x10;
            f
        };
        let mut ospf = udp4(0, 0);
        ospf[23] = 89;
        let mut udp6_ports = [0u8; 16];
        udp6_ports[..4].copy_from_slice(&[0x9c, 0x40, 0x02, 0x09]); // 40000 -> 521 (RIPng)
        let ripng = ipv6(PORT_MAC, LOCAL6, 17, &udp6_ports);
        udp6_ports[2..4].copy_from_slice(&22u16.to_be_bytes());
        let ssh6 = ipv6(PORT_MAC, LOCAL6, 6, &udp6_ports);
        let mld6 = ipv6(PORT_MAC, LOCAL6, 58, &[131, 0, 0, 0, 0, 0, 0, 0]);
        police.set(PolicedClass::Routing, 0, 0).unwrap();
        for f in [
            tcp4(40_000, 179),
            tcp4(179, 40_000),
            udp4(40_000, 3784),
            ospf,
            ripng,
            mld6,
        ] {
            assert_eq!(run_n(&obj, &f, 2), (XDP_DROP, 0, [0, 0, 2, 0]), "{f:02x?}");
        }
        // Not a routing port: local, not policed until its class is set.
        assert_eq!(
            run_n(&obj, &tcp4(40_000, 22), 2),
            (XDP_PASS, 2, [0, 0, 0, 0])
        );
        police.set(PolicedClass::Local, 1, 3).unwrap();
        assert_eq!(
            run_n(&obj, &tcp4(40_000, 22), 5),
            (XDP_DROP, 3, [0, 0, 0, 2])
        );
        assert_eq!(run_n(&obj, &ssh6, 2), (XDP_DROP, 0, [0, 0, 0, 2]));
        assert_eq!(
            run_n(&obj, &udp4(40_000, 53), 1),
            (XDP_DROP, 0, [0, 0, 0, 1])
        );
        // A later fragment has no ports: local, as in the pipeline.
        let mut frag = tcp4(40_000, 179);
        frag[20] = 0x00;
        frag[21] = 0x10;
        assert_eq!(run_n(&obj, &frag, 1), (XDP_DROP, 0, [0, 0, 0, 1]));
        // Not to one of our addresses: a BGP segment to a group is left to the control
        // plane, one in transit goes to the queue.
        let mut to_group = tcp4(40_000, 179);
        to_group[0] = 0x01;
        assert_eq!(run_n(&obj, &to_group, 2), (XDP_PASS, 2, [0, 0, 0, 0]));
        let mut transit_bgp = tcp4(40_000, 179);
        transit_bgp[30..34].copy_from_slice(&[10, 9, 0, 7]);
        assert_eq!(steer(&obj, &transit_bgp), "xsk_missing");

        // TCP connection attempts take from a bucket of their own, counted under their
        // class: with it empty, SYNs to ssh and BGP are dropped while a generous local
        // bucket lets the segments of established sessions (ACK set) and SYN+ACKs through.
        police.set(PolicedClass::Local, 1_000_000, 1_000).unwrap();
        police.set(PolicedClass::Routing, 1_000_000, 1_000).unwrap();
        police.set_tcp_syn(0, 0).unwrap();
        let with_flags = |mut f: Vec<u8>, flags: u8| {
            f[14 + 20 + 13] = flags;
            f
        };
        let syn22 = with_flags(tcp4(40_000, 22), 0x02);
        assert_eq!(run_n(&obj, &syn22, 3), (XDP_DROP, 0, [0, 0, 0, 3]));
        let syn179 = with_flags(tcp4(40_000, 179), 0x02);
        assert_eq!(run_n(&obj, &syn179, 2), (XDP_DROP, 0, [0, 0, 2, 0]));
        let mut syn6 = ssh6.clone();
        syn6[14 + 40 + 13] = 0x02;
        assert_eq!(run_n(&obj, &syn6, 1), (XDP_DROP, 0, [0, 0, 0, 1]));
        for flags in [0x10, 0x12, 0x18] {
            let f = with_flags(tcp4(40_000, 22), flags);
            assert_eq!(
                run_n(&obj, &f, 4),
                (XDP_PASS, 4, [0, 0, 0, 0]),
                "flags {flags:#x}"
            );
        }
        police.set_tcp_syn(1_000_000, 100).unwrap();
        assert_eq!(run_n(&obj, &syn22, 5), (XDP_PASS, 5, [0, 0, 0, 0]));

        let c = police.counters().unwrap();
        assert_eq!((c.arp_nd, c.icmp, c.routing, c.local), (12, 6, 14, 10));
    });
    handle.join().unwrap();
}

#[test]
fn the_queue_count_is_read_in_the_namespace_and_checked() {
    let Some(t) = topo() else { return };
    let if_a = t.if_a.clone();
    let (count, err) = in_ns(&t.ns_a, move || {
        let name = std::ffi::CString::new(if_a.as_str()).unwrap();
        // SAFETY: a valid C string.
        let idx = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert_ne!(idx, 0);
        let count = xdp::rx_queue_count(&if_a, idx);
        let mut c = XdpConfig::new(&if_a);
        c.queues = 2;
        let err = xdp::open(&c)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        (count, err)
    });
    assert_eq!(count, Some(1));
    assert!(
        err.contains("interface has 1 queues, config asks for 2"),
        "{err}"
    );
    let if_a = t.if_a.clone();
    let driver = in_ns(&t.ns_a, move || xdp::driver_name(&if_a));
    assert_eq!(driver.as_deref(), Some("veth"));
}

#[test]
fn a_live_frames_test_run_delivers_what_the_program_passes() {
    if is_root() {
        if let Some(why) = bpf::live_frames_refusal() {
            vfsr_skip::skip(&why);
            return;
        }
    }
    let Some(t) = topo() else { return };
    let if_a = t.if_a.clone();
    let (ret, seen) = in_ns(&t.ns_a, move || {
        let mut observer = RawSocket::open(&if_a, true).unwrap();
        let obj = BpfObject::load("xsk_steer", bpf::objects::XSK_STEER).unwrap();
        let prog = obj.prog_fd("xsk_steer").unwrap();
        let arp = arp_request();
        let ctx = bpf::xdp_md_ctx(observer.ifindex(), 0, arp.len() as u32);
        let (ret, _) =
            bpf::prog_test_run(prog, &arp, 5, bpf::BPF_F_TEST_XDP_LIVE_FRAMES, Some(&ctx)).unwrap();
        let seen = drain_raw(&mut observer, 5, Duration::from_secs(2), |f| {
            f.get(12..14) == Some(&[0x08, 0x06][..])
        });
        (ret, seen)
    });
    // Live-frames runs report no return value; the frames went up the stack (XDP_PASS).
    assert_eq!(ret, 0);
    assert_eq!(
        seen.len(),
        5,
        "five passed ARP frames seen on the interface"
    );
    assert!(seen.iter().all(|f| *f == arp_request()));
}

#[test]
fn two_queues_share_the_traffic_and_lose_none() {
    let Some(t) = topo() else { return };
    // A second pair with two queues each way, in the same namespaces.
    let (qa, qb) = (format!("{}q", t.if_a), format!("{}q", t.if_b));
    let ok = ip(&[
        "link",
        "add",
        &qa,
        "netns",
        &t.ns_a,
        "numrxqueues",
        "2",
        "numtxqueues",
        "2",
        "type",
        "veth",
        "peer",
        "name",
        &qb,
        "netns",
        &t.ns_b,
        "numrxqueues",
        "2",
        "numtxqueues",
        "2",
    ]) && ip(&["-n", &t.ns_a, "link", "set", &qa, "up"])
        && ip(&["-n", &t.ns_b, "link", "set", &qb, "up"]);
    assert!(ok, "could not build the two-queue veth pair");
    let qb2 = qb.clone();
    let mut peer = in_ns(&t.ns_b, move || RawSocket::open(&qb2, true).unwrap());
    let (per_port, counters) = in_ns(&t.ns_a, move || {
        let mut c = XdpConfig::new(&qa);
        c.queues = 2;
        c.frames = 256;
        let (iface, mut ports) = xdp::open(&c).unwrap();
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[1].queue(), 1);
        assert_eq!(ports[1].name(), format!("{qa}:1"));
        for i in 0..64u32 {
            let f = ipv4(PORT_MAC, Ipv4Addr::new(10, 9, 0, 7), i, 64 + i as usize);
            assert!(peer.send_frame(&f).unwrap());
        }
        let mut per_port = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut total = 0;
        let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(), Vec::new()];
        while total < 64 && Instant::now() < deadline {
            for (i, p) in ports.iter_mut().enumerate() {
                let f = drain_port(p, 64, Duration::from_millis(20));
                total += f.len();
                got[i].extend(f);
            }
        }
        for g in &got {
            per_port.push(g.iter().filter(|f| is_transit(f)).count());
        }
        let counters = iface.counters().unwrap();
        drop(ports);
        iface.close().unwrap();
        (per_port, counters)
    });
    assert_eq!(
        per_port.iter().sum::<usize>(),
        64,
        "per queue: {per_port:?}"
    );
    assert_eq!(counters.redirected, 64);
    assert_eq!(counters.xsk_missing, 0);
    eprintln!("frames per queue: {per_port:?}");
}
