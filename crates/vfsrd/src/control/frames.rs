//! The frames the control plane writes itself: ARP requests and replies, Neighbor
//! Solicitations and Advertisements, and ICMP echo replies. Each builder returns a whole
//! Ethernet frame; each reader takes a received frame and never panics on a short or
//! malformed one (it returns `None`).

use std::net::{Ipv4Addr, Ipv6Addr};

use vfsr_wire::arp::{ArpOp, ArpPacket, ArpRepr};
use vfsr_wire::ethernet::{ethertype, MacAddr, HEADER_LEN};
use vfsr_wire::icmpv4::{self, Icmpv4Packet};
use vfsr_wire::icmpv6::{Icmpv6Packet, NdRepr};
use vfsr_wire::{ip_proto, EthernetFrame, Ipv4Packet, Ipv6Packet};

/// ICMPv6 types the control plane handles.
pub const ICMP6_ECHO_REQUEST: u8 = 128;
/// Echo reply.
pub const ICMP6_ECHO_REPLY: u8 = 129;
/// Neighbor Solicitation.
pub const ND_NS: u8 = 135;
/// Neighbor Advertisement.
pub const ND_NA: u8 = 136;

fn eth_header(buf: &mut Vec<u8>, dst: MacAddr, src: MacAddr, ethertype: u16) {
    buf.extend_from_slice(&dst.0);
    buf.extend_from_slice(&src.0);
    buf.extend_from_slice(&ethertype.to_be_bytes());
}

/// An ARP frame (request or reply) padded to the 60-byte Ethernet minimum.
pub fn arp_frame(dst: MacAddr, src: MacAddr, repr: &ArpRepr) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    eth_header(&mut f, dst, src, ethertype::ARP);
    let start = f.len();
    f.resize(start + 28, 0);
    if let Some(b) = f.get_mut(start..) {
        let _ = repr.emit(b);
    }
    f.resize(60, 0);
    f
}

/// The ARP message of a frame.
pub fn parse_arp(frame: &[u8]) -> Option<ArpRepr> {
    let body = frame.get(HEADER_LEN..)?;
    let p = ArpPacket::new_checked(body).ok()?;
    ArpRepr::parse(&p).ok()
}

/// The solicited-node multicast address of `target` (RFC 4291 2.7.1).
pub fn solicited_node(target: Ipv6Addr) -> Ipv6Addr {
    let o = target.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The EUI-64 link-local address of a MAC (RFC 4291 appendix A).
pub fn link_local(mac: MacAddr) -> Ipv6Addr {
    let m = mac.0;
    Ipv6Addr::new(
        0xfe80,
        0,
        0,
        0,
        u16::from_be_bytes([m[0] ^ 0x02, m[1]]),
        u16::from_be_bytes([m[2], 0xff]),
        u16::from_be_bytes([0xfe, m[3]]),
        u16::from_be_bytes([m[4], m[5]]),
    )
}

fn ipv6_frame(
    dst_mac: MacAddr,
    src_mac: MacAddr,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    icmp: &[u8],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(HEADER_LEN + 40 + icmp.len());
    eth_header(&mut f, dst_mac, src_mac, ethertype::IPV6);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(icmp.len() as u16).to_be_bytes());
    f.push(58);
    f.push(hop_limit);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(icmp);
    f
}

fn nd_frame(
    dst_mac: MacAddr,
    src_mac: MacAddr,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    nd: &NdRepr,
) -> Option<Vec<u8>> {
    let mut icmp = vec![0u8; nd.buffer_len()];
    nd.emit(&mut icmp, &src, &dst).ok()?;
    Some(ipv6_frame(dst_mac, src_mac, src, dst, 255, &icmp))
}

/// A Neighbor Solicitation for `target` from `src` (our address on that link) with our MAC
/// as source link-layer option; to the solicited-node group, or unicast to `to` (a probe).
pub fn neighbor_solicit(
    our_mac: MacAddr,
    src: Ipv6Addr,
    target: Ipv6Addr,
    to: Option<MacAddr>,
) -> Option<Vec<u8>> {
    let (dst, dst_mac) = match to {
        Some(m) => (target, m),
        None => {
            let g = solicited_node(target);
            (g, MacAddr::ipv6_multicast(&g))
        }
    };
    let nd = NdRepr::NeighborSolicit {
        target,
        source_ll: Some(our_mac),
    };
    nd_frame(dst_mac, our_mac, src, dst, &nd)
}

/// A solicited Neighbor Advertisement for our address `target`, answering a solicitation
/// from `to_ip`/`to_mac` (router flag set: we are a router).
pub fn neighbor_advert(
    our_mac: MacAddr,
    target: Ipv6Addr,
    to_ip: Ipv6Addr,
    to_mac: MacAddr,
) -> Option<Vec<u8>> {
    let unspecified = to_ip.is_unspecified();
    let (dst, dst_mac) = if unspecified {
        // An answer to duplicate address detection goes to all nodes, unsolicited.
        let all = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
        (all, MacAddr::ipv6_multicast(&all))
    } else {
        (to_ip, to_mac)
    };
    let nd = NdRepr::NeighborAdvert {
        router: true,
        solicited: !unspecified,
        override_: true,
        target,
        target_ll: Some(our_mac),
    };
    nd_frame(dst_mac, our_mac, target, dst, &nd)
}

/// What a received NS or NA says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NdMessage {
    /// The IPv6 source.
    pub src: Ipv6Addr,
    /// The IPv6 destination.
    pub dst: Ipv6Addr,
    /// The Ethernet source.
    pub src_mac: MacAddr,
    /// The message.
    pub nd: NdRepr,
}

/// Reads an NS or NA: hop limit must be 255 and the checksum right (RFC 4861 7.1.1).
pub fn parse_nd(frame: &[u8]) -> Option<NdMessage> {
    let eth = frame.get(..HEADER_LEN)?;
    if u16::from_be_bytes([*eth.get(12)?, *eth.get(13)?]) != ethertype::IPV6 {
        return None;
    }
    let src_mac = MacAddr(<[u8; 6]>::try_from(eth.get(6..12)?).ok()?);
    let ip = frame.get(HEADER_LEN..)?;
    let hdr = ip.get(..40)?;
    if hdr.first()? >> 4 != 6 || *hdr.get(6)? != 58 || *hdr.get(7)? != 255 {
        return None;
    }
    let plen = usize::from(u16::from_be_bytes([*hdr.get(4)?, *hdr.get(5)?]));
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(hdr.get(8..24)?).ok()?);
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(hdr.get(24..40)?).ok()?);
    let body = ip.get(40..40 + plen)?;
    let p = Icmpv6Packet::new_checked(body).ok()?;
    if !p.verify_checksum(&src, &dst) || p.code() != 0 {
        return None;
    }
    let nd = NdRepr::parse(&p).ok()?;
    Some(NdMessage {
        src,
        dst,
        src_mac,
        nd,
    })
}

/// Turns an ICMP echo request in `frame` (IPv4 or IPv6, addressed to us) into the echo
/// reply in place: MACs and addresses swapped, type changed, checksum updated, TTL reset.
/// Returns `false` (frame unchanged) if it is not a well-formed echo request.
pub fn echo_reply_in_place(frame: &mut [u8]) -> bool {
    let Ok(mut eth) = EthernetFrame::new_checked(frame) else {
        return false;
    };
    let ok = match eth.ethertype() {
        ethertype::IPV4 => echo4(eth.payload_mut()),
        ethertype::IPV6 => echo6(eth.payload_mut()),
        _ => false,
    };
    if ok {
        let (dst, src) = (eth.dst(), eth.src());
        eth.set_dst(src);
        eth.set_src(dst);
    }
    ok
}

/// The IPv4 half of [`echo_reply_in_place`], on the frame's payload.
fn echo4(payload: &mut [u8]) -> bool {
    let Ok(mut ip) = Ipv4Packet::new_checked(payload) else {
        return false;
    };
    // Not a fragment (a reply to one piece of an echo would be wrong).
    if ip.protocol() != ip_proto::ICMP || ip.is_fragment() || !ip.verify_checksum() {
        return false;
    }
    {
        let Ok(icmp) = Icmpv4Packet::new_checked(ip.payload()) else {
            return false;
        };
        if icmp.msg_type() != icmpv4::msg_type::ECHO_REQUEST
            || icmp.code() != 0
            || !icmp.verify_checksum()
        {
            return false;
        }
    }
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    ip.set_src_addr(dst);
    ip.set_dst_addr(src);
    ip.set_ttl(64);
    ip.fill_checksum();
    let Ok(mut icmp) = Icmpv4Packet::new_checked(ip.payload_mut()) else {
        return false;
    };
    icmp.set_msg_type(icmpv4::msg_type::ECHO_REPLY);
    icmp.fill_checksum();
    true
}

/// The IPv6 half of [`echo_reply_in_place`], on the frame's payload.
fn echo6(payload: &mut [u8]) -> bool {
    let Ok(mut ip) = Ipv6Packet::new_checked(payload) else {
        return false;
    };
    if ip.next_header() != ip_proto::ICMPV6 {
        return false;
    }
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    {
        let Ok(p) = Icmpv6Packet::new_checked(ip.payload()) else {
            return false;
        };
        if p.msg_type() != ICMP6_ECHO_REQUEST || p.code() != 0 || !p.verify_checksum(&src, &dst) {
            return false;
        }
    }
    // A request to a multicast group is answered from our unicast address by the caller;
    // here only unicast requests are turned around.
    if dst.is_multicast() {
        return false;
    }
    ip.set_src_addr(&dst);
    ip.set_dst_addr(&src);
    ip.set_hop_limit(64);
    let Ok(mut p) = Icmpv6Packet::new_checked(ip.payload_mut()) else {
        return false;
    };
    p.set_msg_type(ICMP6_ECHO_REPLY);
    p.fill_checksum(&dst, &src);
    true
}

/// The IPv4 destination of an IPv4 frame.
pub fn dst4(frame: &[u8]) -> Option<Ipv4Addr> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != ethertype::IPV4 {
        return None;
    }
    Some(Ipv4Packet::new_checked(eth.payload()).ok()?.dst_addr())
}

/// The IPv6 destination of an IPv6 frame.
pub fn dst6(frame: &[u8]) -> Option<Ipv6Addr> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != ethertype::IPV6 {
        return None;
    }
    Some(Ipv6Packet::new_checked(eth.payload()).ok()?.dst_addr())
}

/// Whether an ARP message is a reply.
pub fn is_reply(a: &ArpRepr) -> bool {
    a.op == ArpOp::Reply
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfsr_wire::checksum;

    const US: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const THEM: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

    #[test]
    fn arp_round_trip_and_padding() {
        let req = ArpRepr::request(US, Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let f = arp_frame(MacAddr::BROADCAST, US, &req);
        assert_eq!(f.len(), 60);
        assert_eq!(&f[0..6], &[0xff; 6]);
        assert_eq!(parse_arp(&f), Some(req));
        assert_eq!(parse_arp(&f[..30]), None);
    }

    #[test]
    fn solicited_node_and_link_local() {
        let t: Ipv6Addr = "2001:db8::12:3456".parse().unwrap();
        assert_eq!(
            solicited_node(t),
            "ff02::1:ff12:3456".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            link_local(MacAddr([0x00, 0x11, 0x22, 0x33, 0x44, 0x55])),
            "fe80::211:22ff:fe33:4455".parse::<Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn ns_and_na_parse_back() {
        let src = link_local(US);
        let target: Ipv6Addr = "fd00::2".parse().unwrap();
        let f = neighbor_solicit(US, src, target, None).unwrap();
        let m = parse_nd(&f).unwrap();
        assert_eq!(m.src, src);
        assert_eq!(m.dst, solicited_node(target));
        assert_eq!(
            m.nd,
            NdRepr::NeighborSolicit {
                target,
                source_ll: Some(US)
            }
        );
        let na = neighbor_advert(US, "fd00::1".parse().unwrap(), target, THEM).unwrap();
        let m = parse_nd(&na).unwrap();
        assert!(matches!(
            m.nd,
            NdRepr::NeighborAdvert {
                solicited: true,
                router: true,
                target_ll: Some(US),
                ..
            }
        ));
        assert_eq!(&na[0..6], &THEM.0);
        // A corrupted checksum or hop limit below 255 is refused.
        let mut bad = na.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(parse_nd(&bad), None);
        let mut bad = na;
        bad[HEADER_LEN + 7] = 64;
        assert_eq!(parse_nd(&bad), None);
        for n in 0..f.len() {
            let _ = parse_nd(&f[..n]);
        }
    }

    fn echo4_request() -> Vec<u8> {
        let mut f = Vec::new();
        eth_header(&mut f, US, THEM, ethertype::IPV4);
        let mut ip = vec![
            0x45, 0, 0, 36, 0, 1, 0x40, 0, 63, 1, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1,
        ];
        let c = checksum::checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8];
        let c = checksum::checksum(&icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&icmp);
        f
    }

    #[test]
    fn echo_reply_v4() {
        let mut f = echo4_request();
        assert!(echo_reply_in_place(&mut f));
        assert_eq!(&f[0..6], &THEM.0);
        assert_eq!(&f[6..12], &US.0);
        let ip = &f[HEADER_LEN..];
        assert_eq!(&ip[12..16], &[10, 0, 0, 1]);
        assert_eq!(&ip[16..20], &[10, 0, 0, 2]);
        assert!(checksum::verify(&ip[..20]));
        assert_eq!(ip[20], 0);
        assert!(checksum::verify(&ip[20..]));
        assert_eq!(&ip[24..28], &[0x12, 0x34, 0, 7]);
        // A reply is not a request: a second turn refuses.
        assert!(!echo_reply_in_place(&mut f));
        let mut bad = echo4_request();
        bad[HEADER_LEN + 25] ^= 0xff;
        assert!(!echo_reply_in_place(&mut bad));
        let full = echo4_request();
        for n in 0..full.len() {
            let mut t = full[..n].to_vec();
            assert!(!echo_reply_in_place(&mut t));
        }
    }

    #[test]
    fn echo_reply_v6() {
        let src: Ipv6Addr = "fd00::2".parse().unwrap();
        let dst: Ipv6Addr = "fd00::1".parse().unwrap();
        let mut icmp = vec![ICMP6_ECHO_REQUEST, 0, 0, 0, 0, 9, 0, 1, 0xaa, 0xbb];
        {
            let mut p = Icmpv6Packet::new_checked(&mut icmp[..]).unwrap();
            p.fill_checksum(&src, &dst);
        }
        let mut f = ipv6_frame(US, THEM, src, dst, 64, &icmp);
        assert!(echo_reply_in_place(&mut f));
        assert_eq!(dst6(&f), Some(src));
        let p = Icmpv6Packet::new_checked(&f[HEADER_LEN + 40..]).unwrap();
        assert_eq!(p.msg_type(), ICMP6_ECHO_REPLY);
        assert!(p.verify_checksum(&dst, &src));
    }
}
