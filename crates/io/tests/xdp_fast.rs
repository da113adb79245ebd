//! The XDP fast path (`xsk_steer.c` with `FastPath`) against the pipeline it replays.
//!
//! Every frame here first goes through a real worker on an in-memory router; the decision
//! the worker reports as destination-only is installed in the program's table, and the
//! program, run on the same input frame with `BPF_PROG_TEST_RUN`, must redirect it with
//! exactly the bytes the pipeline wrote. Frames the pipeline would treat differently (TTL
//! 1, a bad checksum, options, a martian source, someone else's MAC, over the MTU, IPv6
//! hop-by-hop or link-local) must leave the program untouched, and so must every frame
//! once the generation moved.
//!
//! Needs root (BPF); without it each test prints why and passes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use vfsr_fib::nexthop::Forward;
use vfsr_fwd::{Batch, Verdict, Worker, WorkerConfig};
use vfsr_io::bpf::{self, BpfObject};
use vfsr_io::xdp::{FastEntry, FastPath};
use vfsr_lpm::poptrie::Poptrie;
use vfsr_lpm::Prefix;
use vfsr_rib::{IpPrefix, Source};
use vfsr_router::{PortSpec, Router, RouterConfig};
use vfsr_wire::{checksum, MacAddr};

const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;
const IN_MAC: [u8; 6] = [2, 0, 0, 0, 0xa, 1];
const OUT_MAC: [u8; 6] = [2, 0, 0, 0, 0xa, 2];
const GW_MAC: [u8; 6] = [2, 0, 0, 0, 0xb, 2];
const SENDER_MAC: [u8; 6] = [2, 0, 0, 0, 0xc, 1];
const GW4: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 1);
const GW6: Ipv6Addr = Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 1);
const MTU: u16 = 1400;

type TestRouter = Router<Poptrie<u32>, Poptrie<u128>>;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        vfsr_skip::skip("needs root for BPF");
        return false;
    }
    true
}

/// Two ports; everything is routed out of port 2 through one resolved gateway.
fn router() -> (TestRouter, Worker<Poptrie<u32>, Poptrie<u128>>) {
    let specs = vec![
        PortSpec::new(1, MacAddr(IN_MAC))
            .v4(Ipv4Addr::new(10, 1, 0, 254), 24)
            .v6(Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 0xfe), 64),
        PortSpec::new(2, MacAddr(OUT_MAC))
            .v4(Ipv4Addr::new(10, 2, 0, 254), 24)
            .v6(Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 0xfe), 64)
            .mtu(MTU),
    ];
    let mut router = TestRouter::new(specs, RouterConfig::default()).unwrap();
    let defaults: [(IpPrefix, IpAddr); 2] = [
        (Prefix::new_masked(0u32, 0).into(), GW4.into()),
        (Prefix::new_masked(0u128, 0).into(), GW6.into()),
    ];
    for (prefix, addr) in defaults {
        let route = router.route(
            Source::Static,
            Forward::Gateway {
                addr,
                ifindex: Some(2),
            },
        );
        router.announce(prefix, Source::Static, &[route]).unwrap();
    }
    router.resolve4(2, GW4, MacAddr(GW_MAC));
    router.resolve6(2, GW6, MacAddr(GW_MAC));
    router.publish().unwrap();
    let w = router.worker(WorkerConfig {
        flow: None,
        report_offload: true,
        ..WorkerConfig::default()
    });
    (router, w)
}

/// The steering program with its fast path on; egress port 2 is the loopback device (a
/// test run does not transmit).
fn program() -> (BpfObject, FastPath) {
    let obj = BpfObject::load("xsk_steer", bpf::objects::XSK_STEER).unwrap();
    let fast = FastPath::for_object("test", &obj, IN_MAC, &[(2, 1)]).unwrap();
    (obj, fast)
}

fn frame4(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, tos: u8, id: u16, payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&IN_MAC);
    f.extend_from_slice(&SENDER_MAC);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + 8 + payload) as u16;
    f.extend_from_slice(&[0x45, tos]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(&[0x40, 0, ttl, 17, 0, 0]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    let c = checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&[0x30, 0x39, 0, 53]);
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend((0..payload).map(|i| i as u8));
    f
}

fn frame6(src: Ipv6Addr, dst: Ipv6Addr, hop: u8, next: u8, payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&IN_MAC);
    f.extend_from_slice(&SENDER_MAC);
    f.extend_from_slice(&[0x86, 0xdd]);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[next, hop]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    // A UDP header (its checksum is not the router's business) and the payload.
    f.extend_from_slice(&[0x30, 0x39, 0, 53]);
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0x12, 0x34]);
    f.extend((0..payload).map(|i| i as u8));
    f
}

/// Runs `frame` through the worker; the output frame if it was forwarded with a
/// destination-only decision.
fn pipeline(w: &mut Worker<Poptrie<u32>, Poptrie<u128>>, frame: &[u8]) -> Option<Vec<u8>> {
    let mut b = Batch::from_frames([frame], 1);
    w.process(&mut b, 1_000_000);
    match b.verdicts.first() {
        Some(Verdict::Forward { oif: 2 }) if b.offload == [0] => {
            Some(b.packets[0].frame().to_vec())
        }
        _ => None,
    }
}

/// Installs what the pipeline wrote for `dst`.
fn install(fast: &FastPath, dst: IpAddr, out: &[u8]) {
    let mut dmac = [0u8; 6];
    let mut smac = [0u8; 6];
    dmac.copy_from_slice(&out[..6]);
    smac.copy_from_slice(&out[6..12]);
    let e = FastEntry {
        gen: fast.generation(),
        port: 2,
        dmac,
        smac,
        mtu: MTU,
    };
    fast.install(dst, &e).unwrap();
    assert_eq!(fast.get(dst).unwrap(), Some(e));
}

fn run(obj: &BpfObject, frame: &[u8]) -> (u32, Vec<u8>) {
    let prog = obj.prog_fd("xsk_steer").unwrap();
    bpf::prog_test_run_data(prog, frame).unwrap()
}

/// The program leaves the frame alone (it goes to the worker, here the kernel: no socket).
fn assert_slow(obj: &BpfObject, frame: &[u8], why: &str) {
    let (ret, out) = run(obj, frame);
    assert_eq!(ret, XDP_PASS, "{why}: verdict");
    assert_eq!(out, frame, "{why}: the frame must be untouched");
}

#[test]
fn the_fast_path_writes_what_the_pipeline_writes_and_refuses_what_it_would_not() {
    if !is_root() {
        return;
    }
    let (_router, mut w) = router();
    let (obj, fast) = program();
    let dst = Ipv4Addr::new(198, 51, 100, 7);
    let src = Ipv4Addr::new(10, 1, 0, 9);
    let f = frame4(src, dst, 64, 0, 0x1234, 18);

    // Nothing installed: to the worker.
    assert_slow(&obj, &f, "no entry");
    let out = pipeline(&mut w, &f).expect("the pipeline forwards it, destination-only");
    install(&fast, dst.into(), &out);
    let (ret, got) = run(&obj, &f);
    assert_eq!(ret, XDP_REDIRECT);
    assert_eq!(got, out, "fast path bytes differ from the pipeline's");
    assert_eq!(fast.counters().unwrap().forwarded, 1);

    // What the pipeline would not forward as it stands stays out of the fast path.
    let mut bad_sum = f.clone();
    bad_sum[24] ^= 0x40;
    let mut options = f.clone();
    options[14] = 0x46;
    let mut foreign = f.clone();
    foreign[5] ^= 1;
    let mut group_src = f.clone();
    group_src[6] |= 1;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (frame4(src, dst, 1, 0, 1, 18), "TTL 1"),
        (frame4(src, dst, 0, 0, 1, 18), "TTL 0"),
        (bad_sum, "bad header checksum"),
        (options, "IPv4 options"),
        (
            frame4(Ipv4Addr::new(127, 0, 0, 1), dst, 64, 0, 1, 18),
            "loopback source",
        ),
        (
            frame4(Ipv4Addr::new(0, 1, 2, 3), dst, 64, 0, 1, 18),
            "this-network source",
        ),
        (
            frame4(Ipv4Addr::new(224, 0, 0, 9), dst, 64, 0, 1, 18),
            "multicast source",
        ),
        (
            frame4(Ipv4Addr::new(255, 255, 255, 255), dst, 64, 0, 1, 18),
            "broadcast source",
        ),
        (foreign, "not our MAC"),
        (group_src, "group source MAC"),
        (frame4(src, dst, 64, 0, 1, 1400), "over the MTU"),
        (f[..40].to_vec(), "truncated"),
    ];
    for (frame, why) in &cases {
        assert_slow(&obj, frame, why);
    }

    // IPv6.
    let d6: Ipv6Addr = "2001:db8:77::5".parse().unwrap();
    let s6: Ipv6Addr = "fd00:1::9".parse().unwrap();
    let g = frame6(s6, d6, 64, 17, 30);
    assert_slow(&obj, &g, "no IPv6 entry");
    let out6 = pipeline(&mut w, &g).expect("forwarded");
    install(&fast, d6.into(), &out6);
    let (ret, got) = run(&obj, &g);
    assert_eq!(ret, XDP_REDIRECT);
    assert_eq!(got, out6);
    // ICMPv6 neighbor solicitation (type 135) to a fast destination: control traffic.
    let mut ns = frame6(s6, d6, 255, 58, 30);
    ns[54] = 135;
    let cases6: Vec<(Vec<u8>, &str)> = vec![
        (ns, "neighbor discovery"),
        (frame6(s6, d6, 1, 17, 30), "hop limit 1"),
        (frame6(s6, d6, 64, 0, 30), "hop-by-hop"),
        (frame6(s6, d6, 64, 44, 30), "fragment header"),
        (
            frame6("fe80::1".parse().unwrap(), d6, 64, 17, 30),
            "link-local source",
        ),
        (
            frame6("ff02::1".parse().unwrap(), d6, 64, 17, 30),
            "multicast source",
        ),
        (
            frame6(Ipv6Addr::LOCALHOST, d6, 64, 17, 30),
            "loopback source",
        ),
        (
            frame6(Ipv6Addr::UNSPECIFIED, d6, 64, 17, 30),
            "unspecified source",
        ),
        (frame6(s6, d6, 64, 17, 1400), "over the MTU"),
    ];
    for (frame, why) in &cases6 {
        assert_slow(&obj, frame, why);
    }

    // A new generation retires both entries; reinstalling brings them back.
    fast.invalidate();
    let stale0 = fast.counters().unwrap().stale;
    assert_slow(&obj, &f, "stale IPv4 entry");
    assert_slow(&obj, &g, "stale IPv6 entry");
    assert_eq!(fast.counters().unwrap().stale, stale0 + 2);
    install(&fast, dst.into(), &out);
    assert_eq!(run(&obj, &f), (XDP_REDIRECT, out.clone()));

    // Switched off: everything to the worker, entries or not.
    fast.disable();
    assert!(!fast.enabled());
    assert_slow(&obj, &f, "fast path off");
}

#[test]
fn a_clone_shares_the_generation_and_the_tables() {
    if !is_root() {
        return;
    }
    let (_obj, fast) = program();
    let other = fast.try_clone().unwrap();
    let g = fast.generation();
    other.invalidate();
    assert_eq!(fast.generation(), g.wrapping_add(1));
    let e = FastEntry {
        gen: fast.generation(),
        port: 2,
        dmac: GW_MAC,
        smac: OUT_MAC,
        mtu: MTU,
    };
    let d: IpAddr = Ipv4Addr::new(192, 0, 2, 1).into();
    other.install(d, &e).unwrap();
    assert_eq!(fast.get(d).unwrap(), Some(e));
    assert_eq!(fast.get(Ipv4Addr::new(192, 0, 2, 2).into()).unwrap(), None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Any TTL, TOS, identification and length: the program's TTL and checksum update
    /// (RFC 1624) gives the pipeline's bytes, whose checksum a full recompute confirms.
    #[test]
    fn ttl_and_checksum_match_the_pipeline(
        a in 1u8..=126, b: u8, c: u8, d in 1u8..=254,
        dst_a in 1u8..=223, dst_rest: [u8; 3],
        ttl in 2u8..=255, tos: u8, id: u16, payload in 0usize..64,
    ) {
        if !is_root() {
            return Ok(());
        }
        let dst = Ipv4Addr::new(dst_a, dst_rest[0], dst_rest[1], dst_rest[2]);
        prop_assume!(dst_a != 127 && dst_a != 10);
        let (_router, mut w) = router();
        let (obj, fast) = program();
        let f = frame4(Ipv4Addr::new(a, b, c, d), dst, ttl, tos, id, payload);
        let out = pipeline(&mut w, &f);
        prop_assert!(out.is_some(), "pipeline did not forward {:?}", f);
        let out = out.unwrap_or_default();
        install(&fast, dst.into(), &out);
        let (ret, got) = run(&obj, &f);
        prop_assert_eq!(ret, XDP_REDIRECT);
        prop_assert_eq!(&got, &out);
        prop_assert!(checksum::verify(&got[14..34]));
        prop_assert_eq!(got[22], ttl - 1);
    }
}
