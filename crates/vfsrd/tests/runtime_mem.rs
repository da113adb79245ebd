//! The whole daemon over in-memory ports: workers, control plane, neighbor resolution with
//! hold queues, echo replies and the punt path, without any kernel interface.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use vfsr_io::mem::{pair, MemWire};
use vfsr_lpm::poptrie::Poptrie;
use vfsr_wire::arp::{ArpOp, ArpRepr};
use vfsr_wire::checksum;
use vfsr_wire::MacAddr;
use vfsrd::config::parse;
use vfsrd::control::frames::{arp_frame, parse_arp};
use vfsrd::link::MemLink;
use vfsrd::runtime::{run, PortIo, RunOptions, Summary};

const R1: MacAddr = MacAddr([2, 0, 0, 0, 1, 1]);
const R2: MacAddr = MacAddr([2, 0, 0, 0, 1, 2]);
const HOST: MacAddr = MacAddr([2, 0, 0, 0, 9, 1]);
const GW: MacAddr = MacAddr([2, 0, 0, 0, 9, 2]);

fn udp4(dst_mac: MacAddr, src: [u8; 4], dst: [u8; 4], ttl: u8, sport: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst_mac.0);
    f.extend_from_slice(&HOST.0);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let mut ip = vec![0x45, 0, 0, 32, 0, 0, 0, 0, ttl, 17, 0, 0];
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = checksum::checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&[0x30, 0x39, 0, 12, 0, 0, 1, 2, 3, 4]);
    f
}

fn echo4(dst_mac: MacAddr, src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut f = udp4(dst_mac, src, dst, 64, 0);
    let ip = &mut f[14..];
    ip[9] = 1;
    ip[10] = 0;
    ip[11] = 0;
    let c = checksum::checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let icmp = &mut ip[20..];
    icmp.copy_from_slice(&[8, 0, 0, 0, 0, 7, 0, 1, 0xde, 0xad, 0xbe, 0xef]);
    let c = checksum::checksum(icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    f
}

struct Rig {
    wires: Vec<MemWire>,
    links: Vec<MemLink>,
    stop: Arc<AtomicBool>,
    done: mpsc::Receiver<Result<Summary, vfsrd::error::Error>>,
}

fn start(config: &str) -> Rig {
    let plan = parse(config, None).unwrap();
    let mut ports = Vec::new();
    let mut wires = Vec::new();
    let mut links = Vec::new();
    for (i, mac) in [R1, R2].into_iter().enumerate() {
        let (port, wire) = pair(&format!("m{i}"), i as u32 + 1, 256);
        let (ours, theirs) = MemLink::pair();
        ports.push(PortIo {
            mac,
            queues: vec![Box::new(port)],
            wire: Box::new(ours),
            tap: None,
            keep: Vec::new(),
            fast: None,
            police: None,
            kernel: None,
        });
        wires.push(wire);
        links.push(theirs);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, done) = mpsc::channel();
    let (rtx, rrx) = mpsc::channel();
    let s = Arc::clone(&stop);
    std::thread::spawn(move || {
        let r = run::<Poptrie<u32>, Poptrie<u128>>(
            &plan,
            ports,
            &RunOptions::default(),
            s,
            &mut |_| {
                let _ = rtx.send(());
            },
        );
        let _ = tx.send(r);
    });
    rrx.recv_timeout(Duration::from_secs(20))
        .expect("router ready");
    Rig {
        wires,
        links,
        stop,
        done,
    }
}

impl Rig {
    /// Frames sent on port `i` by workers and by the control plane, waiting up to 2 s for
    /// `want` of them.
    fn sent(&self, i: usize, want: usize) -> Vec<Vec<u8>> {
        let t0 = Instant::now();
        let mut out = Vec::new();
        while out.len() < want && t0.elapsed() < Duration::from_secs(2) {
            out.extend(self.wires[i].take_sent());
            out.extend(self.links[i].take());
            std::thread::sleep(Duration::from_millis(5));
        }
        out
    }

    fn finish(self) -> Summary {
        self.stop.store(true, Ordering::Relaxed);
        self.done
            .recv_timeout(Duration::from_secs(10))
            .expect("router stops")
            .unwrap()
    }
}

const CONFIG: &str = r#"
[router]
workers = [0]
control_core = 0
busy_poll_us = 0
[[interface]]
name = "m0"
addresses = ["10.1.0.1/24"]
[[interface]]
name = "m1"
addresses = ["10.2.0.1/24"]
[[route]]
prefix = "10.9.0.0/16"
via = "10.2.0.2"
"#;

#[test]
fn arp_resolution_releases_held_packets_then_workers_forward() {
    let mut rig = start(CONFIG);
    let _ = &mut rig;
    // ARP for the router's address on port 0 is answered.
    let who = ArpRepr::request(HOST, Ipv4Addr::new(10, 1, 0, 2), Ipv4Addr::new(10, 1, 0, 1));
    assert!(rig.wires[0].inject(&arp_frame(MacAddr::BROADCAST, HOST, &who)));
    let got = rig.sent(0, 1);
    let reply = got.iter().find_map(|f| parse_arp(f)).expect("an ARP reply");
    assert_eq!(reply.op, ArpOp::Reply);
    assert_eq!(reply.sender_hw, R1);
    assert_eq!(reply.sender_ip, Ipv4Addr::new(10, 1, 0, 1));

    // A packet to the routed prefix: the gateway is unknown, so it is held and the
    // control plane asks for the gateway on port 1.
    assert!(rig.wires[0].inject(&udp4(R1, [10, 1, 0, 2], [10, 9, 1, 1], 64, 1000)));
    let got = rig.sent(1, 1);
    let req = got
        .iter()
        .find_map(|f| parse_arp(f))
        .expect("an ARP request");
    assert_eq!(req.op, ArpOp::Request);
    assert_eq!(req.target_ip, Ipv4Addr::new(10, 2, 0, 2));
    assert_eq!(req.sender_ip, Ipv4Addr::new(10, 2, 0, 1));

    // The gateway answers: the held packet leaves with its MAC and TTL 63.
    let ans = ArpRepr {
        op: ArpOp::Reply,
        sender_hw: GW,
        sender_ip: Ipv4Addr::new(10, 2, 0, 2),
        target_hw: R2,
        target_ip: Ipv4Addr::new(10, 2, 0, 1),
    };
    assert!(rig.wires[1].inject(&arp_frame(R2, GW, &ans)));
    let got = rig.sent(1, 1);
    let held = got
        .iter()
        .find(|f| f.len() > 14 && f[12..14] == [8, 0])
        .expect("the held packet");
    assert_eq!(&held[0..6], &GW.0);
    assert_eq!(&held[6..12], &R2.0);
    assert_eq!(held[14 + 8], 63);

    // Now the worker forwards by itself.
    for i in 0..10 {
        assert!(rig.wires[0].inject(&udp4(R1, [10, 1, 0, 2], [10, 9, 1, 1], 64, 2000 + i)));
    }
    let got = rig.sent(1, 10);
    let fwd: Vec<_> = got.iter().filter(|f| f[12..14] == [8, 0]).collect();
    assert_eq!(fwd.len(), 10, "{got:?}");
    for f in fwd {
        assert_eq!(&f[0..6], &GW.0);
        assert!(checksum::verify(&f[14..34]));
    }

    // Echo to the router is answered by the control plane.
    assert!(rig.wires[0].inject(&echo4(R1, [10, 1, 0, 2], [10, 1, 0, 1])));
    let got = rig.sent(0, 1);
    let rep = got
        .iter()
        .find(|f| f.len() > 34 && f[12..14] == [8, 0] && f[14 + 9] == 1)
        .expect("an echo reply");
    assert_eq!(rep[34], 0, "type echo reply");
    assert_eq!(&rep[14 + 16..14 + 20], &[10, 1, 0, 2]);
    assert_eq!(&rep[0..6], &HOST.0);

    let s = rig.finish();
    assert_eq!(s.control.arp_answered, 1);
    assert_eq!(s.control.released, 1);
    assert_eq!(s.control.echo_replies, 1);
    assert!(s.counters.balanced());
    assert_eq!(s.counters.rx(), 14);
}

#[test]
fn software_rss_spreads_flows_over_two_workers_in_order() {
    let config = CONFIG.replace("workers = [0]", "workers = [0, 1]");
    let rig = start(&config);
    // Resolve the gateway first.
    let ans = ArpRepr {
        op: ArpOp::Reply,
        sender_hw: GW,
        sender_ip: Ipv4Addr::new(10, 2, 0, 2),
        target_hw: R2,
        target_ip: Ipv4Addr::new(10, 2, 0, 1),
    };
    assert!(rig.wires[0].inject(&udp4(R1, [10, 1, 0, 2], [10, 9, 1, 1], 64, 999)));
    let _ = rig.sent(1, 1);
    assert!(rig.wires[1].inject(&arp_frame(R2, GW, &ans)));
    let _ = rig.sent(1, 1);
    // 32 flows, 6 packets each, interleaved; the TTL field numbers a flow's packets.
    let mut total = 0;
    for seq in 0..6u8 {
        for flow in 0..32u16 {
            let f = udp4(R1, [10, 1, 0, 2], [10, 9, 1, 1], 64 - seq, 5000 + flow);
            while !rig.wires[0].inject(&f) {
                std::thread::sleep(Duration::from_millis(1));
            }
            total += 1;
        }
    }
    let got = rig.sent(1, total);
    let mut last: std::collections::HashMap<u16, u8> = Default::default();
    let mut n = 0;
    for f in got.iter().filter(|f| f.len() > 40 && f[12..14] == [8, 0]) {
        let sport = u16::from_be_bytes([f[34], f[35]]);
        if sport < 5000 {
            continue;
        }
        let ttl = f[22];
        if let Some(prev) = last.insert(sport, ttl) {
            assert!(ttl < prev, "flow {sport} reordered: {ttl} after {prev}");
        }
        n += 1;
    }
    assert_eq!(n, total, "every packet forwarded");
    let s = rig.finish();
    assert_eq!(s.per_worker.len(), 2);
    for (w, c) in s.per_worker.iter().enumerate() {
        assert!(
            c.outcome(vfsr_fwd::Outcome::Forwarded) > 20,
            "worker {w} forwarded {}",
            c.outcome(vfsr_fwd::Outcome::Forwarded)
        );
    }
}

#[test]
fn a_neighbor_that_never_answers_drops_its_held_packets() {
    let rig = start(CONFIG);
    for i in 0..5 {
        assert!(rig.wires[0].inject(&udp4(R1, [10, 1, 0, 2], [10, 9, 1, 1], 64, 3000 + i)));
    }
    // Three solicitations one second apart, then failure.
    let t0 = Instant::now();
    let mut reqs = 0;
    while t0.elapsed() < Duration::from_secs(5) && reqs < 3 {
        reqs += rig
            .sent(1, 1)
            .iter()
            .filter(|f| parse_arp(f).is_some())
            .count();
    }
    assert!(reqs >= 3, "{reqs} ARP requests");
    std::thread::sleep(Duration::from_millis(1500));
    let s = rig.finish();
    assert_eq!(s.control.released, 0);
    assert!(s.control.hold_dropped >= 5, "{:?}", s.control);
}
