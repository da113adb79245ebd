//! The test topology and frame builders shared by the pipeline tests.
#![allow(dead_code)]

mod fixture;

use std::net::{Ipv4Addr, Ipv6Addr};

pub use fixture::{Fixture, PortDef};
use vfsr_fib::nexthop::Forward;
use vfsr_fwd::{Batch, Worker, WorkerConfig};
use vfsr_lpm::poptrie::Poptrie;
use vfsr_wire::checksum;
use vfsr_wire::MacAddr;

pub type TestWorker = Worker<Poptrie<u32>, Poptrie<u128>>;

pub const P1: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
pub const P2: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
pub const P3: MacAddr = MacAddr([2, 0, 0, 0, 0, 3]);
/// Host A on port 1 (sender of the test traffic).
pub const HOST: MacAddr = MacAddr([2, 0, 0, 0, 0xa, 1]);
pub const GW_B: MacAddr = MacAddr([2, 0, 0, 0, 0xb, 1]);
pub const GW_C: MacAddr = MacAddr([2, 0, 0, 0, 0xb, 2]);
pub const GW_D: MacAddr = MacAddr([2, 0, 0, 0, 0xd, 1]);
pub const GW_E: MacAddr = MacAddr([2, 0, 0, 0, 0xb, 3]);

pub const HOST4: [u8; 4] = [192, 0, 2, 1];
pub const HOST6: &str = "2001:db8:1::1";

/// ```text
///   host A 192.0.2.1 ── port 1 (192.0.2.254/24, 2001:db8:1::fe/64)
///                       port 2 (198.51.100.254/24, 2001:db8:2::fe/64) ── B .1, C .2, E .3
///                       port 3 (203.0.113.254/24, 2001:db8:3::fe/64, MTU 1280) ── D .1
///   routes: 192.0.2.0/24 connected(1)   10.0.0.0/8 → B        10.3.0.0/16 → D (MTU 1280)
///           10.5.0.0/16 → group [B, C]  10.6.0.0/16 blackhole 10.7.0.0/16 unreachable
///           10.8.0.0/16 local           10.9.0.0/16 → 198.51.100.9 (never answers)
///           2001:db8:1::/64 connected   2001:db8:a::/48 → B6  2001:db8:c::/48 → D6
///           2001:db8:5::/48 → group [B6, C6]
/// ```
pub fn fixture() -> Fixture {
    let mut fx = Fixture::new(vec![
        PortDef::new(1, P1)
            .v4("192.0.2.254/24")
            .v6("2001:db8:1::fe/64")
            .v6("fe80::1/64"),
        PortDef::new(2, P2)
            .v4("198.51.100.254/24")
            .v6("2001:db8:2::fe/64"),
        PortDef::new(3, P3)
            .v4("203.0.113.254/24")
            .v6("2001:db8:3::fe/64")
            .mtu(1280),
    ]);
    let gw = |a: &str, i| Forward::Gateway {
        addr: a.parse().unwrap(),
        ifindex: Some(i),
    };
    fx.nexthop(1, Forward::Connected { ifindex: 1 });
    fx.nexthop(2, gw("198.51.100.1", 2));
    fx.nexthop(3, gw("198.51.100.2", 2));
    fx.nexthop(4, gw("203.0.113.1", 3));
    fx.nexthop(5, Forward::group(vec![2, 3]));
    fx.nexthop(6, Forward::Blackhole);
    fx.nexthop(7, Forward::Unreachable);
    fx.nexthop(8, Forward::Local);
    fx.nexthop(9, gw("198.51.100.9", 2));
    fx.nexthop(10, gw("198.51.100.3", 2));
    fx.nexthop(11, Forward::Connected { ifindex: 1 });
    fx.nexthop(12, gw("2001:db8:2::1", 2));
    fx.nexthop(13, gw("2001:db8:2::2", 2));
    fx.nexthop(14, gw("2001:db8:3::1", 3));
    fx.nexthop(15, Forward::group(vec![12, 13]));
    for (p, nh) in [
        ("192.0.2.0/24", 1),
        ("10.0.0.0/8", 2),
        ("10.3.0.0/16", 4),
        ("10.5.0.0/16", 5),
        ("10.6.0.0/16", 6),
        ("10.7.0.0/16", 7),
        ("10.8.0.0/16", 8),
        ("10.9.0.0/16", 9),
    ] {
        fx.route4(p, nh);
    }
    for (p, nh) in [
        ("2001:db8:1::/64", 11),
        ("2001:db8:a::/48", 12),
        ("2001:db8:c::/48", 14),
        ("2001:db8:5::/48", 15),
    ] {
        fx.route6(p, nh);
    }
    fx.resolve4(1, Ipv4Addr::from(HOST4), HOST);
    fx.resolve4(2, "198.51.100.1".parse().unwrap(), GW_B);
    fx.resolve4(2, "198.51.100.2".parse().unwrap(), GW_C);
    fx.resolve4(2, "198.51.100.3".parse().unwrap(), GW_E);
    fx.resolve4(3, "203.0.113.1".parse().unwrap(), GW_D);
    fx.resolve6(1, HOST6.parse().unwrap(), HOST);
    fx.resolve6(2, "2001:db8:2::1".parse().unwrap(), GW_B);
    fx.resolve6(2, "2001:db8:2::2".parse().unwrap(), GW_C);
    fx.resolve6(3, "2001:db8:3::1".parse().unwrap(), GW_D);
    fx.publish();
    fx
}

/// A worker without a flow table (each packet takes the full path).
pub fn split(fx: &Fixture) -> TestWorker {
    fx.worker(WorkerConfig {
        flow: None,
        ..WorkerConfig::default()
    })
}

/// A worker with the default flow table.
pub fn with_flow(fx: &Fixture) -> TestWorker {
    fx.worker(WorkerConfig::default())
}

pub fn eth(dst: MacAddr, src: MacAddr, ethertype: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// Recomputes the IPv4 header checksum of a frame.
pub fn fix4(frame: &mut [u8]) {
    let hl = usize::from(frame[14] & 0xf) * 4;
    frame[24] = 0;
    frame[25] = 0;
    let c = checksum::checksum(&frame[14..14 + hl]);
    frame[24..26].copy_from_slice(&c.to_be_bytes());
}

/// An IPv4 UDP frame from host A: ports 1000 → 2000, `payload` bytes of 0, 1, 2...
pub fn udp4(src: [u8; 4], dst: [u8; 4], ttl: u8, payload: usize, df: bool) -> Vec<u8> {
    udp4_ports(src, dst, ttl, payload, df, 1000, 2000)
}

pub fn udp4_ports(
    src: [u8; 4],
    dst: [u8; 4],
    ttl: u8,
    payload: usize,
    df: bool,
    sport: u16,
    dport: u16,
) -> Vec<u8> {
    let mut f = eth(P1, HOST, 0x0800);
    let total = (20 + 8 + payload) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0x12, 0x34, if df { 0x40 } else { 0 }, 0, ttl, 17, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend((0..payload).map(|i| i as u8));
    fix4(&mut f);
    f
}

/// An IPv6 UDP frame from host A (hop limit `hops`), with extension headers `ext` (whose
/// chain ends in UDP) after the fixed header whose next header is `next`.
pub fn udp6_ext(src: &str, dst: &str, hops: u8, payload: usize, next: u8, ext: &[u8]) -> Vec<u8> {
    let mut f = eth(P1, HOST, 0x86dd);
    let plen = (ext.len() + 8 + payload) as u16;
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&plen.to_be_bytes());
    f.push(next);
    f.push(hops);
    f.extend_from_slice(&src.parse::<Ipv6Addr>().unwrap().octets());
    f.extend_from_slice(&dst.parse::<Ipv6Addr>().unwrap().octets());
    f.extend_from_slice(ext);
    f.extend_from_slice(&1000u16.to_be_bytes());
    f.extend_from_slice(&2000u16.to_be_bytes());
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend((0..payload).map(|i| i as u8));
    f
}

pub fn udp6(src: &str, dst: &str, hops: u8, payload: usize) -> Vec<u8> {
    udp6_ext(src, dst, hops, payload, 17, &[])
}

/// Runs `frames` (received on port 1) through `w` at time `now_ns`.
pub fn run(w: &mut TestWorker, frames: &[Vec<u8>], now_ns: u64) -> Batch {
    let mut b = Batch::from_frames(frames.iter().map(|f| f.as_slice()), 1);
    w.process(&mut b, now_ns);
    assert_eq!(b.verdicts.len(), frames.len());
    assert!(w.counters().balanced(), "{:?}", w.counters().nonzero());
    b
}

/// Runs one frame.
pub fn run1(w: &mut TestWorker, frame: Vec<u8>) -> Batch {
    run(w, &[frame], 1_000_000_000)
}
