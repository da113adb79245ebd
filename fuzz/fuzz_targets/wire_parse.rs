//! The packet views of `vfsr-wire` on arbitrary bytes, read as an Ethernet frame and as each
//! header on its own. Nothing may panic, checked views stay inside their buffers, parsed
//! messages emit back to the same length, and the RFC 1624 TTL update keeps a valid IPv4
//! checksum valid.

#![no_main]

use core::net::Ipv6Addr;

use libfuzzer_sys::fuzz_target;
use vfsr_wire::arp::{ArpPacket, ArpRepr};
use vfsr_wire::ethernet::{ethertype, EthernetFrame};
use vfsr_wire::icmpv4::{Icmpv4Packet, Icmpv4Repr};
use vfsr_wire::icmpv6::{Icmpv6Packet, Icmpv6Repr, NdRepr};
use vfsr_wire::ip_proto;
use vfsr_wire::ipv4::Ipv4Packet;
use vfsr_wire::ipv6::{walk_extension_headers, Ipv6Packet};
use vfsr_wire::l4::{five_tuple_v4, five_tuple_v6, TcpHeader, UdpHeader};

fn arp(data: &[u8]) {
    if let Ok(p) = ArpPacket::new_checked(data) {
        if let Ok(r) = ArpRepr::parse(&p) {
            let mut out = [0u8; 28];
            assert_eq!(r.emit(&mut out), Ok(28));
            assert_eq!(out[..], data[..28]);
        }
    }
}

fn ipv4(data: &[u8]) {
    let Ok(p) = Ipv4Packet::new_checked(data) else {
        return;
    };
    assert!((20..=60).contains(&p.header_len()));
    assert_eq!(
        p.header_len() + p.payload().len(),
        usize::from(p.total_len())
    );
    let _ = (p.check_source(), p.options(), p.frag_offset());
    let t = five_tuple_v4(&p);
    assert_eq!(t.protocol, p.protocol());
    let valid = p.verify_checksum();
    if p.protocol() == ip_proto::ICMP {
        icmpv4(p.payload());
    }
    l4(p.payload());
    let mut copy = data.to_vec();
    if let Ok(mut q) = Ipv4Packet::new_checked(&mut copy[..]) {
        let ttl = q.ttl();
        q.set_ttl_and_update_checksum(ttl.wrapping_sub(1));
        assert_eq!(q.verify_checksum(), valid);
    }
}

fn ipv6(data: &[u8]) {
    let Ok(p) = Ipv6Packet::new_checked(data) else {
        return;
    };
    assert!(40 + p.payload().len() <= data.len());
    if let Ok(ext) = p.ext_headers() {
        assert!(ext.upper_offset <= p.payload().len());
        assert_eq!(ext.hop_by_hop, p.has_hop_by_hop());
        let upper = p.upper_layer(&ext);
        if ext.upper_protocol == ip_proto::ICMPV6 {
            icmpv6(upper, &p.src_addr(), &p.dst_addr());
        }
        l4(upper);
    }
    let _ = five_tuple_v6(&p);
}

fn icmpv4(data: &[u8]) {
    if let Ok(p) = Icmpv4Packet::new_checked(data) {
        let valid = p.verify_checksum();
        let r = Icmpv4Repr::parse(&p);
        let mut out = vec![0u8; r.buffer_len()];
        assert_eq!(r.emit(&mut out), Ok(data.len()));
        if valid && out == data {
            assert!(Icmpv4Packet::new_checked(&out[..]).is_ok_and(|o| o.verify_checksum()));
        }
    }
}

fn icmpv6(data: &[u8], src: &Ipv6Addr, dst: &Ipv6Addr) {
    if let Ok(p) = Icmpv6Packet::new_checked(data) {
        let _ = (p.verify_checksum(src, dst), p.is_error());
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
    if let Ok(u) = UdpHeader::new_checked(data) {
        assert!(usize::from(u.len()) <= data.len());
    }
    if let Ok(t) = TcpHeader::new_checked(data) {
        assert!(t.header_len() <= data.len());
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = EthernetFrame::new_checked(data) {
        let _ = (f.dst(), f.src());
        match f.ethertype() {
            ethertype::ARP => arp(f.payload()),
            ethertype::IPV4 => ipv4(f.payload()),
            ethertype::IPV6 => ipv6(f.payload()),
            _ => {}
        }
    }
    // The same bytes as each header on its own, so every parser sees every input.
    arp(data);
    ipv4(data);
    ipv6(data);
    let any = Ipv6Addr::LOCALHOST;
    icmpv6(data, &any, &any);
    icmpv4(data);
    if let Some((&first, rest)) = data.split_first() {
        if let Ok(ext) = walk_extension_headers(first, rest) {
            assert!(ext.upper_offset <= rest.len());
        }
    }
});
