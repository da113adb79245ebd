//! Golden tests of the whole pipeline: frames in, verdicts and frames out, for every outcome.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use common::*;
use vfsr_fib::nexthop::Forward;
use vfsr_fwd::{DropReason, Event, Outcome, Packet, PuntClass, Verdict};
use vfsr_wire::checksum;

fn drop_of(w: &mut TestWorker, frame: Vec<u8>) -> DropReason {
    let b = run1(w, frame);
    match b.verdicts[0] {
        Verdict::Drop(r) => r,
        v => panic!("not dropped: {v:?}"),
    }
}

/// The ICMPv4 error the router must send to host A about `orig` (an IP packet): built here
/// field by field, independently of the code under test.
fn expected_icmp4(ty: u8, code: u8, rest: [u8; 4], orig: &[u8], ident: u16) -> Vec<u8> {
    let quote = &orig[..orig.len().min(576 - 28)];
    let mut icmp = vec![ty, code, 0, 0];
    icmp.extend_from_slice(&rest);
    icmp.extend_from_slice(quote);
    let c = checksum::checksum(&icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let total = (20 + icmp.len()) as u16;
    let mut f = eth(HOST, P1, 0x0800);
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&ident.to_be_bytes());
    f.extend_from_slice(&[0, 0, 64, 1, 0, 0, 192, 0, 2, 254]);
    f.extend_from_slice(&HOST4);
    f.extend_from_slice(&icmp);
    fix4(&mut f);
    f
}

#[test]
fn forwards_ipv4_golden_bytes() {
    let fx = fixture();
    let mut w = split(&fx);
    let input = udp4(HOST4, [10, 1, 2, 3], 64, 18, true);
    // The frame as it arrives, literally.
    let literal_in: Vec<u8> = vec![
        0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0x0a, 0x01, 0x08, 0x00, // Ethernet
        0x45, 0x00, 0x00, 0x2e, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x5a, 0x86, // IPv4
        192, 0, 2, 1, 10, 1, 2, 3, //
        0x03, 0xe8, 0x07, 0xd0, 0x00, 0x1a, 0x00, 0x00, // UDP
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
    ];
    assert_eq!(input, literal_in);
    let b = run1(&mut w, input);
    assert_eq!(b.verdicts[0], Verdict::Forward { oif: 2 });
    // Out: MACs B ← port 2, TTL 63, checksum 0x5a86 + 0x0100 (computed by hand).
    let literal_out: Vec<u8> = vec![
        0x02, 0, 0, 0, 0x0b, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x00, //
        0x45, 0x00, 0x00, 0x2e, 0x12, 0x34, 0x40, 0x00, 0x3f, 0x11, 0x5b, 0x86, //
        192, 0, 2, 1, 10, 1, 2, 3, //
        0x03, 0xe8, 0x07, 0xd0, 0x00, 0x1a, 0x00, 0x00, //
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
    ];
    assert_eq!(b.packets[0].frame(), literal_out.as_slice());
    assert_eq!(b.packets[0].oif, 2);
    assert!(checksum::verify(&literal_out[14..34]));
    assert_eq!(w.counters().outcome(Outcome::Forwarded), 1);
}

#[test]
fn forwards_ipv6_golden_bytes() {
    let fx = fixture();
    let mut w = split(&fx);
    let input = udp6(HOST6, "2001:db8:a::7", 64, 10);
    let mut expected = input.clone();
    expected[0..6].copy_from_slice(&GW_B.0);
    expected[6..12].copy_from_slice(&P2.0);
    expected[14 + 7] = 63;
    let b = run1(&mut w, input);
    assert_eq!(b.verdicts[0], Verdict::Forward { oif: 2 });
    assert_eq!(b.packets[0].frame(), expected.as_slice());
}

#[test]
fn connected_destination_uses_its_own_mac() {
    let fx = fixture();
    let mut w = split(&fx);
    let mut f = udp4([10, 1, 1, 1], HOST4, 9, 0, false);
    f[6..12].copy_from_slice(&GW_B.0);
    fix4(&mut f);
    let b = run1(&mut w, f);
    assert_eq!(b.verdicts[0], Verdict::Forward { oif: 1 });
    assert_eq!(&b.packets[0].frame()[0..6], &HOST.0);
}

#[test]
fn ttl_one_and_zero_expire_with_time_exceeded() {
    for ttl in [1u8, 0] {
        let fx = fixture();
        let mut w = split(&fx);
        let input = udp4(HOST4, [10, 1, 2, 3], ttl, 30, false);
        let orig = input[14..].to_vec();
        let b = run1(&mut w, input.clone());
        assert_eq!(b.verdicts[0], Verdict::Drop(DropReason::TtlExpired));
        assert_eq!(b.packets[0].frame(), input.as_slice(), "original untouched");
        assert_eq!(b.generated.len(), 1);
        let expected = expected_icmp4(11, 0, [0; 4], &orig, 1);
        assert_eq!(b.generated[0].frame(), expected.as_slice(), "ttl {ttl}");
        assert_eq!(b.generated[0].oif, 1);
        assert_eq!(w.counters().get(Event::Icmp4Sent), 1);
    }
}

#[test]
fn hop_limit_expiry_sends_icmpv6_time_exceeded() {
    let fx = fixture();
    let mut w = split(&fx);
    let input = udp6(HOST6, "2001:db8:a::7", 1, 10);
    let b = run1(&mut w, input.clone());
    assert_eq!(b.verdicts[0], Verdict::Drop(DropReason::TtlExpired));
    let g = b.generated[0].frame();
    assert_eq!(&g[0..6], &HOST.0);
    assert_eq!(&g[6..12], &P1.0);
    assert_eq!(&g[12..14], &[0x86, 0xdd]);
    let ip = &g[14..];
    assert_eq!(ip[6], 58);
    assert_eq!(ip[7], 64);
    assert_eq!(
        &ip[8..24],
        &"2001:db8:1::fe"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets()
    );
    assert_eq!(&ip[24..40], &input[22..38]);
    assert_eq!(&ip[40..42], &[3, 0]);
    assert_eq!(&ip[44..48], &[0; 4]);
    assert_eq!(&ip[48..], &input[14..], "whole original quoted");
    let len = u16::from_be_bytes([ip[4], ip[5]]);
    let sum = checksum::pseudo_header_v6(
        &"2001:db8:1::fe".parse().unwrap(),
        &HOST6.parse().unwrap(),
        58,
        u32::from(len),
    );
    assert_eq!(
        checksum::add(sum, checksum::ones_sum(&ip[40..])),
        0xffff,
        "ICMPv6 checksum"
    );
}

#[test]
fn bad_checksum_and_lengths_drop_without_icmp() {
    let fx = fixture();
    let mut w = split(&fx);
    let good = udp4(HOST4, [10, 1, 2, 3], 64, 18, true);
    let mut f = good.clone();
    f[24] ^= 0xff;
    assert_eq!(drop_of(&mut w, f), DropReason::Ip4BadChecksum);
    // Total length beyond the frame.
    let mut f = good.clone();
    f[17] += 1;
    fix4(&mut f);
    assert_eq!(drop_of(&mut w, f), DropReason::Ip4BadTotalLen);
    // Truncated header.
    assert_eq!(
        drop_of(&mut w, good[..30].to_vec()),
        DropReason::Ip4Truncated
    );
    // A frame longer than the total length (Ethernet padding) forwards the packet only.
    let mut f = good.clone();
    f.extend_from_slice(&[0xee; 6]);
    let b = run1(&mut w, f);
    assert_eq!(b.verdicts[0], Verdict::Forward { oif: 2 });
    // IPv6 payload length beyond the frame.
    let mut f = udp6(HOST6, "2001:db8:a::7", 64, 10);
    f[19] += 1;
    assert_eq!(drop_of(&mut w, f), DropReason::Ip6BadPayloadLen);
    assert_eq!(w.counters().get(Event::Icmp4Sent), 0);
    assert_eq!(w.counters().get(Event::Icmp6Sent), 0);
    assert_eq!(w.counters().dropped(DropReason::Ip4BadChecksum), 1);
}

#[test]
fn ipv4_options() {
    let fx = fixture();
    let mut w = split(&fx);
    let with = |opts: &[u8]| {
        let base = udp4(HOST4, [10, 1, 2, 3], 64, 4, false);
        let mut f = base[..34].to_vec();
        f.extend_from_slice(opts);
        f.extend_from_slice(&base[34..]);
        f[14] = 0x40 | ((20 + opts.len()) / 4) as u8;
        let total = (f.len() - 14) as u16;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        fix4(&mut f);
        f
    };
    // Record route: forwarded, options untouched.
    let f = with(&[7, 7, 4, 0, 0, 0, 0, 0]);
    let b = run1(&mut w, f.clone());
    assert_eq!(b.verdicts[0], Verdict::Forward { oif: 2 });
    assert_eq!(&b.packets[0].frame()[34..42], &f[34..42]);
    assert!(checksum::verify(&b.packets[0].frame()[14..42]));
    assert_eq!(w.counters().get(Event::Ip4Options), 1);
    // Router alert: slow path. Source route: refused. Malformed: dropped.
    let b = run1(&mut w, with(&[0x94, 4, 0, 0]));
    assert_eq!(b.verdicts[0], Verdict::Punt(PuntClass::SlowPath));
    assert_eq!(
        drop_of(&mut w, with(&[0x83, 7, 4, 1, 2, 3, 4, 0])),
        DropReason::Ip4SourceRoute
    );
    assert_eq!(
        drop_of(&mut w, with(&[7, 40, 4, 0])),
        DropReason::Ip4BadOptions
    );
}

/// A later fragment (offset 64 bytes, MF) from host A to 10.1.2.3 with `ttl`.
fn later_fragment4(ttl: u8) -> Vec<u8> {
    let mut f = udp4(HOST4, [10, 1, 2, 3], ttl, 20, false);
    f[20] = 0x20;
    f[21] = 8;
    fix4(&mut f);
    f
}

#[test]
fn fragments_are_forwarded_and_later_ones_never_answered() {
    let fx = fixture();
    let mut w = split(&fx);
    // A later fragment is forwarded as any packet.
    let b = run1(&mut w, later_fragment4(64));
    assert_eq!(b.verdicts[0], Verdict::Forward { oif: 2 });
    // Expiring, it gets no ICMP error (RFC 1812 4.3.2.7).
    let b = run1(&mut w, later_fragment4(1));
    assert_eq!(b.verdicts[0], Verdict::Drop(DropReason::TtlExpired));
    assert!(b.generated.is_empty());
    assert_eq!(w.counters().get(Event::IcmpSuppressed), 1);
}

#[test]
fn ipv6_extension_headers() {
    let fx = fixture();
    let mut w = split(&fx);
    // Destination options then UDP: forwarded.
    let f = udp6_ext(
        HOST6,
        "2001:db8:a::7",
        64,
        4,
        60,
        &[17, 0, 1, 4, 0, 0, 0, 0],
    );
    let b = run1(&mut w, f);
    assert_eq!(b.verdicts[0], Verdict::Forward { oif: 2 });
    // Hop-by-hop: slow path.
    let f = udp6_ext(HOST6, "2001:db8:a::7", 64, 4, 0, &[17, 0, 1, 4, 0, 0, 0, 0]);
    let b = run1(&mut w, f);
    assert_eq!(b.verdicts[0], Verdict::Punt(PuntClass::SlowPath));
    // A chain running past the packet: dropped.
    let f = udp6_ext(
        HOST6,
        "2001:db8:a::7",
        64,
        0,
        60,
        &[17, 9, 1, 4, 0, 0, 0, 0],
    );
    assert_eq!(drop_of(&mut w, f), DropReason::Ip6BadExtHeader);
}

#[test]
fn no_route_unreachable_and_blackhole() {
    let fx = fixture();
    let mut w = split(&fx);
    // No route: net unreachable, quoting the packet as received.
    let f = udp4(HOST4, [11, 0, 0, 1], 64, 12, false);
    let orig = f[14..].to_vec();
    let b = run1(&mut w, f);
    assert_eq!(b.verdicts[0], Verdict::Drop(DropReason::NoRoute));
    assert_eq!(
        b.generated[0].frame(),
        expected_icmp4(3, 0, [0; 4], &orig, 1).as_slice()
    );
    // Unreachable route: host unreachable.
    let f = udp4(HOST4, [10, 7, 0, 1], 64, 12, false);
    let orig = f[14..].to_vec();
    let b = run1(&mut w, f);
    assert_eq!(b.verdicts[0], Verdict::Drop(DropReason::Unreachable));
    assert_eq!(
        b.generated[0].frame(),
        expected_icmp4(3, 1, [0; 4], &orig, 2).as_slice()
    );
    // Blackhole: silent.
    let b = run1(&mut w, udp4(HOST4, [10, 6, 0, 1], 64, 12, false));
    assert_eq!(b.verdicts[0], Verdict::Drop(DropReason::Blackhole));
    assert!(b.generated.is_empty());
    // IPv6 without route: ICMPv6 destination unreachable code 0.
    let b = run1(&mut w, udp6(HOST6, "2001:db8:ffff::1", 64, 4));
    assert_eq!(b.verdicts[0], Verdict::Drop(DropReason::NoRoute));
    assert_eq!(&b.generated[0].frame()[54..56], &[1, 0]);
}

#[test]
fn mtu_with_df_sends_fragmentation_needed() {
    let fx = fixture();
    let mut w = split(&fx);
    let f = udp4(HOST4, [10, 3, 0, 1], 64, 1400, true);
    let orig = f[14..].to_vec();
    let b = run1(&mut w, f);
    assert_eq!(b.verdicts[0], Verdict::Drop(DropReason::MtuExceededDf));
    // Type 3 code 4, next-hop MTU 1280 in the second half of the rest-of-header (RFC 1191).
    let expected = expected_icmp4(3, 4, [0, 0, 0x05, 0x00], &orig, 1);
    assert_eq!(b.generated[0].frame(), expected.as_slice());
    assert_eq!(b.generated[0].len(), 14 + 576, "quote fills 576 bytes");
}

#[test]
fn mtu_without_df_fragments() {
    let fx = fixture();
    let mut w = split(&fx);
    let f = udp4(HOST4, [10, 3, 0, 1], 64, 1400, false);
    let payload_in = f[34..].to_vec();
    let b = run1(&mut w, f);
    assert_eq!(b.verdicts[0], Verdict::Consumed);
    assert_eq!(b.generated.len(), 2);
    let mut payload = Vec::new();
    for (i, g) in b.generated.iter().enumerate() {
        let fr = g.frame();
        assert_eq!(g.oif, 3);
        assert_eq!(&fr[0..6], &GW_D.0);
        assert_eq!(&fr[6..12], &P3.0);
        let ip = &fr[14..];
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        assert!(total <= 1280);
        assert_eq!(ip[8], 63, "TTL decremented once");
        assert!(checksum::verify(&ip[..20]));
        let off = usize::from(u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff) * 8;
        let mf = ip[6] & 0x20 != 0;
        assert_eq!(mf, i == 0);
        assert_eq!(off, payload.len());
        payload.extend_from_slice(&ip[20..total]);
    }
    assert_eq!(payload, payload_in);
    assert_eq!(w.counters().get(Event::FragmentsMade), 2);
    assert_eq!(w.counters().outcome(Outcome::Forwarded), 1);
    // Fragmentation off: dropped.
    let mut w = fx.worker(vfsr_fwd::WorkerConfig {
        fragment: false,
        flow: None,
        ..Default::default()
    });
    let b = run1(&mut w, udp4(HOST4, [10, 3, 0, 1], 64, 1400, false));
    assert_eq!(
        b.verdicts[0],
        Verdict::Drop(DropReason::FragmentationDisabled)
    );
}

#[test]
fn ipv6_too_big() {
    let fx = fixture();
    let mut w = split(&fx);
    let f = udp6(HOST6, "2001:db8:c::1", 64, 1300);
    let b = run1(&mut w, f.clone());
    assert_eq!(b.verdicts[0], Verdict::Drop(DropReason::MtuExceeded6));
    let g = b.generated[0].frame();
    assert_eq!(&g[54..56], &[2, 0]);
    assert_eq!(&g[58..62], &1280u32.to_be_bytes());
    assert_eq!(g.len(), 14 + 1280, "quote fills 1280 bytes");
    assert_eq!(&g[62..], &f[14..14 + 1280 - 48]);
}

#[test]
fn icmp_errors_are_rate_limited() {
    let fx = fixture();
    let mut w = split(&fx);
    let frames: Vec<Vec<u8>> = (0..100)
        .map(|_| udp4(HOST4, [10, 1, 2, 3], 1, 0, false))
        .collect();
    let mut sent = 0;
    for chunk in frames.chunks(32) {
        let b = run(&mut w, chunk, 5_000_000_000);
        sent += b.generated.len();
    }
    assert_eq!(sent, 50, "the burst");
    assert_eq!(w.counters().get(Event::IcmpRateLimited), 50);
    // 10 ms later, 10 more tokens at 1000/s.
    let b = run(&mut w, &frames[..32], 5_010_000_000);
    assert_eq!(b.generated.len(), 10);
}

#[test]
fn errors_the_rules_forbid_spend_no_token_and_are_counted_as_such() {
    let fx = fixture();
    let mut w = split(&fx);
    // A later fragment whose TTL runs out: no error may answer it.
    let later: Vec<Vec<u8>> = (0..64).map(|_| later_fragment4(1)).collect();
    let expiring: Vec<Vec<u8>> = (0..64)
        .map(|_| udp4(HOST4, [10, 1, 2, 3], 1, 0, false))
        .collect();
    let t = 5_000_000_000;
    for chunk in later.chunks(32) {
        assert!(run(&mut w, chunk, t).generated.is_empty());
    }
    assert_eq!(w.counters().get(Event::IcmpSuppressed), 64);
    // The burst of 50 is whole for the packets that may be answered.
    let sent: usize = expiring
        .chunks(32)
        .map(|c| run(&mut w, c, t).generated.len())
        .sum();
    assert_eq!(sent, 50);
    assert_eq!(w.counters().get(Event::IcmpRateLimited), 14);
    // With the bucket empty, the rules still come first.
    assert!(run(&mut w, &later[..8], t).generated.is_empty());
    assert_eq!(w.counters().get(Event::IcmpSuppressed), 72);
    assert_eq!(w.counters().get(Event::IcmpRateLimited), 14);
}

#[test]
fn broadcast_multicast_and_local() {
    let fx = fixture();
    let mut w = split(&fx);
    // To the router: punted by class.
    let b = run1(&mut w, udp4(HOST4, [192, 0, 2, 254], 64, 0, false));
    assert_eq!(b.verdicts[0], Verdict::Punt(PuntClass::Local));
    let b = run1(&mut w, udp4(HOST4, [10, 8, 0, 1], 64, 0, false));
    assert_eq!(
        b.verdicts[0],
        Verdict::Punt(PuntClass::Local),
        "local route"
    );
    let mut f = udp4(HOST4, [255, 255, 255, 255], 64, 0, false);
    f[0..6].copy_from_slice(&[0xff; 6]);
    assert_eq!(run1(&mut w, f).verdicts[0], Verdict::Punt(PuntClass::Local));
    let mut f = udp4_ports(HOST4, [192, 0, 2, 255], 64, 0, false, 520, 520);
    f[0..6].copy_from_slice(&[0xff; 6]);
    assert_eq!(
        run1(&mut w, f).verdicts[0],
        Verdict::Punt(PuntClass::Routing)
    );
    // Multicast beyond the link: not forwarded.
    let mut f = udp4(HOST4, [239, 1, 2, 3], 64, 0, false);
    f[0..6].copy_from_slice(&[1, 0, 0x5e, 1, 2, 3]);
    assert_eq!(drop_of(&mut w, f), DropReason::MulticastNotForwarded);
    // A unicast packet in a broadcast frame: not forwarded, no ICMP.
    let mut f = udp4(HOST4, [10, 1, 2, 3], 64, 0, false);
    f[0..6].copy_from_slice(&[0xff; 6]);
    assert_eq!(drop_of(&mut w, f), DropReason::BroadcastNotForwarded);
    // ARP: to the control plane.
    let mut f = eth(vfsr_wire::MacAddr([0xff; 6]), HOST, 0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&[0; 20]);
    assert_eq!(run1(&mut w, f).verdicts[0], Verdict::Punt(PuntClass::ArpNd));
    // A frame for another MAC.
    let mut f = udp4(HOST4, [10, 1, 2, 3], 64, 0, false);
    f[0..6].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
    assert_eq!(drop_of(&mut w, f), DropReason::EthNotForUs);
    // Expiring broadcast: no ICMP about a broadcast.
    let mut f = udp4(HOST4, [10, 1, 2, 3], 1, 0, false);
    f[0..6].copy_from_slice(&[0xff; 6]);
    let b = run1(&mut w, f);
    assert!(b.generated.is_empty());
}

#[test]
fn neighbor_miss_holds_a_few_packets_then_sends_them() {
    let mut fx = fixture();
    let mut w = split(&fx);
    let frames: Vec<Vec<u8>> = (0..5)
        .map(|i| udp4(HOST4, [10, 9, 0, i], 64, 0, false))
        .collect();
    let b = run(&mut w, &frames, 1_000_000_000);
    let gw: IpAddr = "198.51.100.9".parse().unwrap();
    let mut dropped = 0;
    for (p, v) in b.packets.into_iter().zip(b.verdicts) {
        assert_eq!(
            v,
            Verdict::Resolve {
                ifindex: 2,
                nexthop: gw
            }
        );
        assert_eq!(p.frame()[14 + 8], 63, "TTL decremented before holding");
        dropped += fx.hold(2, gw, p).len();
    }
    assert_eq!(w.counters().outcome(Outcome::Held), 5);
    assert_eq!(dropped, 2, "hold queue of 3");
    assert_eq!(fx.neighbors(2).arp.counters().hold_overflow, 2);
    // The answer comes: the three held packets leave, later ones forward directly.
    let gw4: Ipv4Addr = "198.51.100.9".parse().unwrap();
    let out = fx.resolve4(2, gw4, GW_E);
    assert_eq!(out.len(), 3);
    let b = run1(&mut w, udp4(HOST4, [10, 9, 0, 9], 64, 0, false));
    assert_eq!(b.verdicts[0], Verdict::Forward { oif: 2 });
    assert_eq!(&b.packets[0].frame()[0..6], &GW_E.0);
}

#[test]
fn failed_neighbor_drops_with_host_unreachable_and_keeps_routes() {
    let mut fx = fixture();
    let mut w = split(&fx);
    let gw: IpAddr = "198.51.100.9".parse().unwrap();
    let b = run1(&mut w, udp4(HOST4, [10, 9, 0, 1], 64, 0, false));
    let p: Packet = b.packets.into_iter().next().unwrap();
    fx.hold(2, gw, p);
    for _ in 0..20 {
        fx.advance(1000);
    }
    let b = run1(&mut w, udp4(HOST4, [10, 9, 0, 1], 64, 0, false));
    assert_eq!(b.verdicts[0], Verdict::Drop(DropReason::NeighborFailed));
    assert_eq!(&b.generated[0].frame()[34..36], &[3, 1]);
    // The route is still there: the neighbor comes back, traffic flows again.
    assert_eq!(fx.fib4.table().len(), 8);
    fx.resolve4(2, "198.51.100.9".parse().unwrap(), GW_E);
    let b = run1(&mut w, udp4(HOST4, [10, 9, 0, 1], 64, 0, false));
    assert_eq!(b.verdicts[0], Verdict::Forward { oif: 2 });
}

#[test]
fn flow_entries_follow_route_and_neighbor_changes() {
    let mut fx = fixture();
    let mut w = with_flow(&fx);
    let f = || udp4(HOST4, [10, 1, 2, 3], 64, 0, false);
    let b = run1(&mut w, f());
    assert_eq!(&b.packets[0].frame()[0..6], &GW_B.0);
    let b = run1(&mut w, f());
    assert_eq!(&b.packets[0].frame()[0..6], &GW_B.0);
    assert_eq!(w.counters().get(Event::FlowHit), 1);
    // The neighbor's MAC changes: the cached entry is stale, the new MAC is used.
    fx.resolve4(2, "198.51.100.1".parse().unwrap(), GW_E);
    let b = run1(&mut w, f());
    assert_eq!(&b.packets[0].frame()[0..6], &GW_E.0);
    assert_eq!(w.counters().get(Event::FlowStale), 1);
    // The route moves to D on port 3.
    fx.route4("10.1.0.0/16", 4);
    fx.publish();
    let b = run1(&mut w, f());
    assert_eq!(b.verdicts[0], Verdict::Forward { oif: 3 });
    assert_eq!(&b.packets[0].frame()[0..6], &GW_D.0);
    // The next hop itself changes (same index, new gateway): stale again.
    fx.nexthop(
        4,
        Forward::Gateway {
            addr: "198.51.100.2".parse().unwrap(),
            ifindex: Some(2),
        },
    );
    fx.publish();
    let b = run1(&mut w, f());
    assert_eq!(b.verdicts[0], Verdict::Forward { oif: 2 });
    assert_eq!(&b.packets[0].frame()[0..6], &GW_C.0);
    assert_eq!(w.counters().get(Event::FlowStale), 3);
    // Withdrawn: no route, even though the flow was cached.
    fx.remove4("10.1.0.0/16");
    fx.remove4("10.0.0.0/8");
    fx.publish();
    let b = run1(&mut w, f());
    assert_eq!(b.verdicts[0], Verdict::Drop(DropReason::NoRoute));
}

/// A route moved to another existing next hop, with only its family's FIB published (no new
/// next-hop snapshot, no neighbor change): cached flows of that family follow it, the other
/// family's keep their entries (checked again and found current).
#[test]
fn cached_flows_follow_a_route_change_published_alone() {
    let mut fx = fixture();
    let mut w = with_flow(&fx);
    let f4 = || udp4(HOST4, [10, 1, 2, 3], 64, 0, false);
    let f6 = || udp6(HOST6, "2001:db8:a::9", 64, 0);
    for _ in 0..2 {
        assert_eq!(&run1(&mut w, f4()).packets[0].frame()[0..6], &GW_B.0);
        assert_eq!(&run1(&mut w, f6()).packets[0].frame()[0..6], &GW_B.0);
    }
    assert_eq!(w.counters().get(Event::FlowHit), 2);
    fx.route4("10.1.0.0/16", 4);
    fx.publish_fib4();
    let b = run1(&mut w, f4());
    assert_eq!(b.verdicts[0], Verdict::Forward { oif: 3 });
    assert_eq!(&b.packets[0].frame()[0..6], &GW_D.0);
    assert_eq!(&run1(&mut w, f6()).packets[0].frame()[0..6], &GW_B.0);
    assert_eq!(w.counters().get(Event::FlowStale), 1);
    assert_eq!(w.counters().get(Event::FlowHit), 3);
    fx.route6("2001:db8:a::/48", 13);
    fx.publish_fib6();
    assert_eq!(&run1(&mut w, f6()).packets[0].frame()[0..6], &GW_C.0);
    assert_eq!(&run1(&mut w, f4()).packets[0].frame()[0..6], &GW_D.0);
    assert_eq!(w.counters().get(Event::FlowStale), 2);
    assert_eq!(w.counters().get(Event::FlowHit), 4);
}

/// The member each of `n` flows to 10.5.0.0/16 uses (by the gateway MAC it gets).
fn members(w: &mut TestWorker, n: u16, now: u64) -> Vec<[u8; 6]> {
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            udp4_ports(
                HOST4,
                [10, 5, (i >> 8) as u8, i as u8],
                64,
                0,
                false,
                1000 + i,
                80,
            )
        })
        .collect();
    let mut out = Vec::new();
    for chunk in frames.chunks(32) {
        let b = run(w, chunk, now);
        for (p, v) in b.results() {
            assert!(matches!(v, Verdict::Forward { .. }), "{v:?}");
            let mut m = [0u8; 6];
            m.copy_from_slice(&p.frame()[0..6]);
            out.push(m);
        }
    }
    out
}

#[test]
fn ecmp_spreads_and_flows_stick_when_members_change() {
    let mut fx = fixture();
    let mut w = with_flow(&fx);
    let before = members(&mut w, 1000, 1_000_000_000);
    let on_b = before.iter().filter(|m| **m == GW_B.0).count();
    let on_c = before.iter().filter(|m| **m == GW_C.0).count();
    assert_eq!(on_b + on_c, 1000);
    assert!(on_b > 350 && on_c > 350, "spread {on_b}/{on_c}");
    // A third member (E, next hop 10) joins: the group's entry changes in place.
    fx.nexthop(5, Forward::group(vec![2, 3, 10]));
    fx.publish();
    let after = members(&mut w, 1000, 2_000_000_000);
    assert_eq!(before, after, "known flows keep their member");
    // New flows use the new member too.
    let fresh: Vec<Vec<u8>> = (0..300)
        .map(|i| udp4_ports(HOST4, [10, 5, 9, i as u8], 64, 0, false, 30000 + i, 443))
        .collect();
    let mut on_e = 0;
    for chunk in fresh.chunks(32) {
        let b = run(&mut w, chunk, 2_000_000_000);
        on_e += b
            .packets
            .iter()
            .filter(|p| p.frame()[0..6] == GW_E.0)
            .count();
    }
    assert!(on_e > 50, "new member gets new flows: {on_e}");
    // C leaves (a new group index, as the RIB interns groups): only C's flows move.
    fx.nexthop(16, Forward::group(vec![2, 10]));
    fx.route4("10.5.0.0/16", 16);
    fx.publish();
    let last = members(&mut w, 1000, 3_000_000_000);
    for (b, a) in before.iter().zip(&last) {
        if *b == GW_C.0 {
            assert_ne!(*a, GW_C.0);
        } else {
            assert_eq!(a, b, "a flow not on C moved");
        }
    }
    assert!(w.counters().get(Event::EcmpKept) >= 1000);
}

#[test]
fn ecmp_without_flow_table_is_resilient() {
    let mut fx = fixture();
    let mut w = split(&fx);
    let before = members(&mut w, 1000, 1_000_000_000);
    fx.nexthop(5, Forward::group(vec![2, 3, 10]));
    fx.publish();
    let after = members(&mut w, 1000, 1_000_000_000);
    let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
    assert!(after
        .iter()
        .zip(&before)
        .all(|(a, b)| a == b || *a == GW_E.0));
    assert!(moved > 200 && moved < 450, "about a third moves: {moved}");
}

/// A worker config with a flow table of `capacity` entries (the default when `None`) whose
/// entries idle out after 100 ms.
fn flow_config(capacity: Option<usize>) -> vfsr_fwd::WorkerConfig {
    let flow = vfsr_flow::FlowConfig {
        idle_timeout: 100,
        ..Default::default()
    };
    vfsr_fwd::WorkerConfig {
        flow: Some(vfsr_flow::FlowConfig {
            capacity: capacity.unwrap_or(flow.capacity),
            ..flow
        }),
        ..Default::default()
    }
}

/// `n` UDP flows to 10.1.2.3 that differ in their source port.
fn udp4_flows(n: u16) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| udp4_ports(HOST4, [10, 1, 2, 3], 64, 0, false, 1000 + i, 2000))
        .collect()
}

#[test]
fn ipv6_ecmp_and_flow_idle_timeout() {
    let fx = fixture();
    let mut w = fx.worker(flow_config(None));
    let f = udp6(HOST6, "2001:db8:5::1", 64, 0);
    let b = run(&mut w, std::slice::from_ref(&f), 1_000_000_000);
    assert!(matches!(b.verdicts[0], Verdict::Forward { oif: 2 }));
    run(&mut w, std::slice::from_ref(&f), 1_050_000_000);
    assert_eq!(w.counters().get(Event::FlowHit), 1);
    // 200 ms idle: the entry expired, a miss.
    run(&mut w, &[f], 1_300_000_000);
    assert_eq!(w.counters().get(Event::FlowMiss), 2);
}

#[test]
fn evictions_are_counted_and_the_idle_sweep_steps_once_per_millisecond() {
    let fx = fixture();
    // One bucket of eight ways, all used in this batch: the ninth flow is forwarded but not
    // cached (the protection window keeps the eight).
    let mut w = fx.worker(flow_config(Some(8)));
    let b = run(&mut w, &udp4_flows(9), 1_000_000_000);
    assert!(b
        .verdicts
        .iter()
        .all(|v| matches!(v, Verdict::Forward { .. })));
    let counted = |w: &TestWorker| {
        (
            w.counters().get(Event::FlowEvicted),
            w.counters().get(Event::FlowRefused),
        )
    };
    assert_eq!(counted(&w), (0, 1));
    // With a 10 ms window, the ninth flow 20 ms later evicts the least recently used one.
    let mut cfg = flow_config(Some(8));
    if let Some(f) = cfg.flow.as_mut() {
        f.protect = 10;
    }
    let mut w = fx.worker(cfg);
    let flows = udp4_flows(9);
    run(&mut w, &flows[..8], 1_000_000_000);
    run(&mut w, &flows[8..], 1_020_000_000);
    assert_eq!(counted(&w), (1, 0));

    // A table of 8,192 buckets, a step of 16 units: a hundred expired flows take many steps.
    let mut w = fx.worker(vfsr_fwd::WorkerConfig {
        gc_budget: 16,
        ..flow_config(Some(65536))
    });
    run(&mut w, &udp4_flows(100), 1_000_000_000);
    let expired = |w: &TestWorker| w.flow_counters().map_or(0, |c| c.expirations);
    // 200 ms later every entry is idle; fifty batches in one millisecond make one step.
    let t = 1_200_000_000;
    for i in 0..50 {
        run(&mut w, &[], t + i * 1000);
    }
    let one_step = expired(&w);
    assert!(
        one_step > 0 && one_step < 50,
        "one step of 16 units visits at most 8 buckets: {one_step} expired"
    );
    // One batch per millisecond after that: the sweep finishes.
    for ms in 1..=300u64 {
        run(&mut w, &[], t + ms * 1_000_000);
    }
    assert_eq!(expired(&w), 100);
    assert_eq!(w.counters().get(Event::FlowEvicted), 0);
}

#[test]
fn split_worker_sees_neighbor_and_next_hop_changes_at_once() {
    let mut fx = fixture();
    let mut w = split(&fx);
    let f = || udp4(HOST4, [10, 1, 2, 3], 64, 0, false);
    // Twice: the first batch makes the gateway's memo, the second finds it current.
    for _ in 0..2 {
        assert_eq!(&run1(&mut w, f()).packets[0].frame()[0..6], &GW_B.0);
    }
    // The gateway's MAC changes: the per-next-hop memo is rechecked, not trusted.
    fx.resolve4(2, "198.51.100.1".parse().unwrap(), GW_E);
    assert_eq!(&run1(&mut w, f()).packets[0].frame()[0..6], &GW_E.0);
    // Another neighbor on the same port changes: the memo stays right.
    fx.resolve4(2, "198.51.100.2".parse().unwrap(), GW_D);
    for _ in 0..2 {
        assert_eq!(&run1(&mut w, f()).packets[0].frame()[0..6], &GW_E.0);
    }
    // The next hop moves to another gateway (same index, new version).
    fx.nexthop(
        2,
        Forward::Gateway {
            addr: "198.51.100.2".parse().unwrap(),
            ifindex: Some(2),
        },
    );
    fx.publish();
    assert_eq!(&run1(&mut w, f()).packets[0].frame()[0..6], &GW_D.0);
    // The gateway fails: no stale MAC is used.
    let arp = &mut fx.neighbors(2).arp;
    arp.remove(&"198.51.100.2".parse().unwrap());
    arp.publish();
    let b = run1(&mut w, f());
    assert!(
        matches!(b.verdicts[0], Verdict::Resolve { ifindex: 2, .. }),
        "{:?}",
        b.verdicts[0]
    );
}

#[test]
fn a_mixed_batch_ends_as_each_packet_would_alone() {
    // IPv4 and IPv6 interleaved, with packets that end before the FIB (TTL, punt) and after
    // it (no route, blackhole) between ones that are forwarded: each packet must get the
    // answer of its own lookup, in either design.
    let frames = vec![
        udp4(HOST4, [10, 1, 2, 3], 64, 18, true),
        udp6(HOST6, "2001:db8:a::7", 64, 10),
        udp4(HOST4, [11, 0, 0, 1], 64, 12, false),
        udp4(HOST4, [10, 1, 2, 4], 1, 12, false),
        udp6(HOST6, "2001:db8:ffff::1", 64, 4),
        udp4(HOST4, [192, 0, 2, 254], 64, 12, false),
        udp4(HOST4, [10, 6, 0, 1], 64, 12, false),
        udp6(HOST6, "2001:db8:a::8", 64, 10),
        udp4([10, 1, 1, 1], HOST4, 9, 0, false),
    ];
    let fx = fixture();
    for make in [split, with_flow] {
        let alone: Vec<(Verdict, Vec<u8>)> = frames
            .iter()
            .map(|f| {
                let b = run1(&mut make(&fx), f.clone());
                (b.verdicts[0], b.packets[0].frame().to_vec())
            })
            .collect();
        let forwarded = alone
            .iter()
            .filter(|(v, _)| matches!(v, Verdict::Forward { .. }))
            .count();
        assert!(forwarded >= 4, "{alone:?}");
        let b = run(&mut make(&fx), &frames, 1_000_000_000);
        for (i, (verdict, frame)) in alone.iter().enumerate() {
            assert_eq!(b.verdicts[i], *verdict, "packet {i}");
            assert_eq!(b.packets[i].frame(), frame.as_slice(), "packet {i}");
        }
    }
}
