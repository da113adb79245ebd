//! Arbitrary bytes into every `new_checked`, walker and parser: nothing may panic, and what a
//! checked view reports stays inside its buffer. Half the cases start from a valid header so
//! the deeper paths (options, extension headers, ND options) are reached, not just the first
//! length check.

use core::net::Ipv6Addr;

use proptest::prelude::*;
use vfsr_wire::arp::{ArpPacket, ArpRepr};
use vfsr_wire::ethernet::{ethertype, EthernetFrame};
use vfsr_wire::icmpv4::{Icmpv4Packet, Icmpv4Repr};
use vfsr_wire::icmpv6::{Icmpv6Packet, Icmpv6Repr, NdOptions, NdRepr};
use vfsr_wire::ipv4::Ipv4Packet;
use vfsr_wire::ipv6::{walk_extension_headers, Ipv6Packet};
use vfsr_wire::l4::{five_tuple_v4, five_tuple_v6, ports, TcpHeader, UdpHeader};
use vfsr_wire::{checksum, ip_proto};

/// Everything the crate can be asked about one buffer.
fn exercise(data: &[u8]) {
    if let Ok(f) = EthernetFrame::new_checked(data) {
        let _ = (f.dst(), f.src(), f.ethertype());
        let payload = f.payload();
        match f.ethertype() {
            ethertype::ARP => arp(payload),
            ethertype::IPV4 => ipv4(payload),
            ethertype::IPV6 => ipv6(payload),
            _ => {}
        }
    }
    arp(data);
    ipv4(data);
    ipv6(data);
    icmpv4(data);
    icmpv6(data);
    l4(data);
    for first in [0u8, 43, 44, 51, 60] {
        if let Ok(ext) = walk_extension_headers(first, data) {
            assert!(ext.upper_offset <= data.len());
            assert!(usize::from(ext.count) <= vfsr_wire::ipv6::MAX_EXTENSION_HEADERS);
        }
    }
    let mut n = 0;
    for o in NdOptions::new(data) {
        n += 1;
        assert!(n <= vfsr_wire::icmpv6::MAX_ND_OPTIONS + 1);
        let Ok(o) = o else { break };
        assert!(!o.bytes.is_empty() && o.bytes.len() % 8 == 0);
        let _ = o.link_layer_addr();
    }
    let _ = checksum::ones_sum(data);
}

fn arp(data: &[u8]) {
    if let Ok(p) = ArpPacket::new_checked(data) {
        if let Ok(r) = ArpRepr::parse(&p) {
            let mut out = [0u8; 28];
            assert_eq!(r.emit(&mut out), Ok(28));
            assert_eq!(&out[..], &data[..28]);
        }
    }
}

fn ipv4(data: &[u8]) {
    let Ok(p) = Ipv4Packet::new_checked(data) else {
        return;
    };
    assert!((20..=60).contains(&p.header_len()));
    assert!(usize::from(p.total_len()) <= data.len());
    let _ = (
        p.ttl(),
        p.protocol(),
        p.src_addr(),
        p.dst_addr(),
        p.options(),
    );
    let _ = (p.check_source(), p.is_fragment(), p.frag_offset());
    assert_eq!(
        p.header_len() + p.payload().len(),
        usize::from(p.total_len())
    );
    let valid = p.verify_checksum();
    let t = five_tuple_v4(&p);
    assert_eq!(t.protocol, p.protocol());
    icmpv4(p.payload());
    l4(p.payload());
    // The incremental TTL update keeps a valid checksum valid.
    let mut copy = data.to_vec();
    let mut q = Ipv4Packet::new_checked(&mut copy[..]).unwrap();
    let ttl = q.ttl();
    q.set_ttl_and_update_checksum(ttl.wrapping_sub(1));
    if valid {
        assert!(q.verify_checksum());
    }
}

fn ipv6(data: &[u8]) {
    let Ok(p) = Ipv6Packet::new_checked(data) else {
        return;
    };
    assert!(40 + p.payload().len() <= data.len());
    let _ = (
        p.hop_limit(),
        p.flow_label(),
        p.traffic_class(),
        p.has_hop_by_hop(),
    );
    if let Ok(ext) = p.ext_headers() {
        assert!(ext.upper_offset <= p.payload().len());
        let upper = p.upper_layer(&ext);
        if ext.upper_protocol == ip_proto::ICMPV6 {
            icmpv6_with(upper, &p.src_addr(), &p.dst_addr());
        }
        l4(upper);
    }
    let _ = five_tuple_v6(&p);
}

fn icmpv4(data: &[u8]) {
    if let Ok(p) = Icmpv4Packet::new_checked(data) {
        let _ = (
            p.verify_checksum(),
            p.is_error(),
            p.next_hop_mtu(),
            p.data(),
        );
        let r = Icmpv4Repr::parse(&p);
        let mut out = vec![0u8; r.buffer_len()];
        assert_eq!(r.emit(&mut out), Ok(data.len()));
    }
}

fn icmpv6(data: &[u8]) {
    let a = Ipv6Addr::LOCALHOST;
    icmpv6_with(data, &a, &a);
}

fn icmpv6_with(data: &[u8], src: &Ipv6Addr, dst: &Ipv6Addr) {
    if let Ok(p) = Icmpv6Packet::new_checked(data) {
        let _ = (p.verify_checksum(src, dst), p.is_error(), p.mtu());
        let r = Icmpv6Repr::parse(&p);
        let mut out = vec![0u8; r.buffer_len()];
        assert_eq!(r.emit(&mut out, src, dst), Ok(data.len()));
        if let Ok(nd) = NdRepr::parse(&p) {
            let mut out = [0u8; 32];
            let n = nd.emit(&mut out, src, dst).unwrap();
            let back = Icmpv6Packet::new_checked(&out[..n]).unwrap();
            assert!(back.verify_checksum(src, dst));
            assert_eq!(NdRepr::parse(&back), Ok(nd));
        }
    }
}

fn l4(data: &[u8]) {
    let _ = ports(data);
    if let Ok(u) = UdpHeader::new_checked(data) {
        assert!(usize::from(u.len()) <= data.len());
    }
    if let Ok(t) = TcpHeader::new_checked(data) {
        assert!(t.header_len() <= data.len());
    }
}

/// Valid starts: the fixed part of each header, the rest arbitrary.
fn seeded() -> impl Strategy<Value = Vec<u8>> {
    let prefixes: Vec<Vec<u8>> = vec![
        // Ethernet + IPv4, IHL 5..15, total length patched below.
        vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00, 0x45],
        vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00, 0x4f],
        // Ethernet + IPv6.
        vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x86, 0xdd, 0x60],
        // Ethernet + ARP for IPv4 over Ethernet.
        vec![
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0,
        ],
        // Bare IPv6 with hop-by-hop first.
        vec![0x60, 0, 0, 0],
        // ICMPv6 NS, NA.
        vec![135, 0],
        vec![136, 0],
    ];
    (
        proptest::sample::select(prefixes),
        proptest::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(|(mut p, rest)| {
            let start = p.len();
            p.extend(rest);
            // Make length fields agree with the buffer often enough to get past them.
            if p.len() >= 18 && p[12] == 0x08 && p[13] == 0x00 {
                let tl = (p.len() - 14) as u16;
                p[16..18].copy_from_slice(&tl.to_be_bytes());
            }
            if p.len() >= 20 && p[12] == 0x86 && p[13] == 0xdd {
                let pl = (p.len().saturating_sub(54)) as u16;
                p[18..20].copy_from_slice(&pl.to_be_bytes());
            }
            if start == 4 && p.len() >= 6 {
                let pl = (p.len().saturating_sub(40)) as u16;
                p[4..6].copy_from_slice(&pl.to_be_bytes());
            }
            p
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        exercise(&data);
    }

    #[test]
    fn seeded_bytes_never_panic(data in seeded()) {
        exercise(&data);
    }
}

#[test]
fn every_short_prefix_of_every_length() {
    let mut rng = 0x1234_5678_9abc_def0u64;
    for len in 0..128 {
        for _ in 0..64 {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng as u8
                })
                .collect();
            exercise(&data);
        }
    }
}
