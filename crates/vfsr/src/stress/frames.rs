//! The frames the stress cases send, built by hand byte by byte (a flood must be able to
//! carry what no well-behaved stack would write): ARP and Neighbor Solicitations with random
//! senders, UDP to chosen destinations and ports, ICMP echo, TCP SYNs, IPv4 with a router
//! alert, and one frame of each malformation `vfsr-wire` rejects.
//!
//! Every builder returns a whole Ethernet frame (no FCS). Checksums are right unless the
//! frame exists to have them wrong.

use std::net::{Ipv4Addr, Ipv6Addr};

use vfsr_wire::checksum::{add, checksum, ones_sum, pseudo_header_v4, pseudo_header_v6};

pub(crate) const ETH_IPV4: u16 = 0x0800;
pub(crate) const ETH_ARP: u16 = 0x0806;
pub(crate) const ETH_IPV6: u16 = 0x86dd;

/// A small xorshift generator: the floods' randomness needs to be cheap and repeatable, not
/// good.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A unicast, locally administered MAC.
    pub(crate) fn mac(&mut self) -> [u8; 6] {
        let x = self.next().to_be_bytes();
        [(x[0] & 0xfc) | 0x02, x[1], x[2], x[3], x[4], x[5]]
    }
}

fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(128);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An IPv4 header (no options) with a correct checksum.
fn ip4_header(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, ttl: u8, payload: usize) -> [u8; 20] {
    let total = (20 + payload) as u16;
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[8] = ttl;
    h[9] = proto;
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    let c = checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

/// A UDP datagram in IPv4, `payload` zero bytes, checksum filled in.
pub(crate) fn udp4(
    macs: ([u8; 6], [u8; 6]),
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ports: (u16, u16),
    ttl: u8,
    payload: usize,
) -> Vec<u8> {
    let mut l4 = vec![0u8; 8 + payload];
    l4[0..2].copy_from_slice(&ports.0.to_be_bytes());
    l4[2..4].copy_from_slice(&ports.1.to_be_bytes());
    let len = l4.len() as u16;
    l4[4..6].copy_from_slice(&len.to_be_bytes());
    let sum = add(
        pseudo_header_v4(src, dst, 17, l4.len() as u16),
        ones_sum(&l4),
    );
    let c = match !sum {
        0 => 0xffff,
        c => c,
    };
    l4[6..8].copy_from_slice(&c.to_be_bytes());
    let mut f = eth(macs.0, macs.1, ETH_IPV4);
    f.extend_from_slice(&ip4_header(src, dst, 17, ttl, l4.len()));
    f.extend_from_slice(&l4);
    f
}

/// A UDP datagram in IPv6.
pub(crate) fn udp6(
    macs: ([u8; 6], [u8; 6]),
    src: Ipv6Addr,
    dst: Ipv6Addr,
    ports: (u16, u16),
    hop_limit: u8,
) -> Vec<u8> {
    let mut l4 = vec![0u8; 8 + 18];
    l4[0..2].copy_from_slice(&ports.0.to_be_bytes());
    l4[2..4].copy_from_slice(&ports.1.to_be_bytes());
    let len = l4.len() as u16;
    l4[4..6].copy_from_slice(&len.to_be_bytes());
    let sum = add(
        pseudo_header_v6(&src, &dst, 17, l4.len() as u32),
        ones_sum(&l4),
    );
    let c = match !sum {
        0 => 0xffff,
        c => c,
    };
    l4[6..8].copy_from_slice(&c.to_be_bytes());
    ip6_frame(macs, src, dst, 17, hop_limit, &l4)
}

fn ip6_frame(
    macs: ([u8; 6], [u8; 6]),
    src: Ipv6Addr,
    dst: Ipv6Addr,
    next_header: u8,
    hop_limit: u8,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = eth(macs.0, macs.1, ETH_IPV6);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    f.push(next_header);
    f.push(hop_limit);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(payload);
    f
}

/// An ARP request (broadcast) from `sender` asking for `target`.
pub(crate) fn arp_request(sender_mac: [u8; 6], sender: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut f = eth([0xff; 6], sender_mac, ETH_ARP);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&sender_mac);
    f.extend_from_slice(&sender.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target.octets());
    f.resize(60, 0);
    f
}

/// The solicited-node multicast group of `a` (RFC 4291 2.7.1) and its MAC (RFC 2464 7).
pub(crate) fn solicited_node(a: Ipv6Addr) -> (Ipv6Addr, [u8; 6]) {
    let o = a.octets();
    let g = Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    );
    let go = g.octets();
    (g, [0x33, 0x33, go[12], go[13], go[14], go[15]])
}

/// A Neighbor Solicitation for `target` from `src` with its link-layer address option.
pub(crate) fn neighbor_solicit(src_mac: [u8; 6], src: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
    let (group, group_mac) = solicited_node(target);
    let mut m = vec![135, 0, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(&target.octets());
    m.extend_from_slice(&[1, 1]);
    m.extend_from_slice(&src_mac);
    let sum = add(
        pseudo_header_v6(&src, &group, 58, m.len() as u32),
        ones_sum(&m),
    );
    m[2..4].copy_from_slice(&(!sum).to_be_bytes());
    ip6_frame((group_mac, src_mac), src, group, 58, 255, &m)
}

/// An ICMP echo request.
pub(crate) fn echo4(macs: ([u8; 6], [u8; 6]), src: Ipv4Addr, dst: Ipv4Addr, seq: u16) -> Vec<u8> {
    let mut m = vec![8, 0, 0, 0, 0x51, 0x7e];
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(&[0xa5; 32]);
    let c = checksum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    let mut f = eth(macs.0, macs.1, ETH_IPV4);
    f.extend_from_slice(&ip4_header(src, dst, 1, 64, m.len()));
    f.extend_from_slice(&m);
    f
}

/// TCP flags: a connection attempt (SYN) and a segment of an established connection (ACK).
pub(crate) const TCP_SYN: u8 = 0x02;
pub(crate) const TCP_ACK: u8 = 0x10;

/// A TCP segment with flags `flags` ([`TCP_SYN`], [`TCP_ACK`]), no options and no payload.
pub(crate) fn tcp4(
    macs: ([u8; 6], [u8; 6]),
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ports: (u16, u16),
    flags: u8,
) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&ports.0.to_be_bytes());
    t[2..4].copy_from_slice(&ports.1.to_be_bytes());
    t[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&64240u16.to_be_bytes());
    let sum = add(pseudo_header_v4(src, dst, 6, 20), ones_sum(&t));
    t[16..18].copy_from_slice(&(!sum).to_be_bytes());
    let mut f = eth(macs.0, macs.1, ETH_IPV4);
    f.extend_from_slice(&ip4_header(src, dst, 6, 64, t.len()));
    f.extend_from_slice(&t);
    f
}

/// A transit UDP datagram carrying the router alert option (RFC 2113): the pipeline's slow
/// path.
pub(crate) fn router_alert4(macs: ([u8; 6], [u8; 6]), src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    let udp = [0u8, 9, 0x27, 0x11, 0, 8, 0, 0];
    let total = (24 + udp.len()) as u16;
    let mut h = vec![0x46, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0]);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    h.extend_from_slice(&[148, 4, 0, 0]);
    let c = checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    let mut f = eth(macs.0, macs.1, ETH_IPV4);
    f.extend_from_slice(&h);
    f.extend_from_slice(&udp);
    f
}

/// One frame of each malformation, named: what `vfsr-wire` and the pipeline's input stages
/// reject (a transit destination in each, so nothing about it is for the router).
pub(crate) fn malformed(
    macs: ([u8; 6], [u8; 6]),
    src4: Ipv4Addr,
    dst4: Ipv4Addr,
    src6: Ipv6Addr,
    dst6: Ipv6Addr,
) -> Vec<(&'static str, Vec<u8>)> {
    let good4 = udp4(macs, src4, dst4, (10_000, 10_001), 64, 18);
    let good6 = udp6(macs, src6, dst6, (10_000, 10_001), 64);
    let mut out: Vec<(&'static str, Vec<u8>)> = Vec::new();
    // Ethernet. A frame shorter than its 14-byte header cannot be put on a veth (the
    // kernel refuses it at the sender, or pads it to 14 bytes), so the shortest is a header
    // and nothing after it; and an ethertype the router does not speak.
    out.push(("ethernet_header_only", good4[..14].to_vec()));
    let mut f = good4.clone();
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    out.push(("ethertype_unknown", f));
    // IPv4.
    out.push(("ip4_truncated", good4[..14 + 12].to_vec()));
    let mut f = good4.clone();
    f[14] = 0x55;
    out.push(("ip4_bad_version", f));
    let mut f = good4.clone();
    f[14] = 0x43;
    out.push(("ip4_ihl_below_5", f));
    let mut f = good4.clone();
    f[14] = 0x4f;
    out.push(("ip4_ihl_beyond_frame", f));
    let mut f = good4.clone();
    f[16..18].copy_from_slice(&1400u16.to_be_bytes());
    refill_ip4_checksum(&mut f);
    out.push(("ip4_total_length_beyond_frame", f));
    let mut f = good4.clone();
    f[16..18].copy_from_slice(&12u16.to_be_bytes());
    refill_ip4_checksum(&mut f);
    out.push(("ip4_total_length_below_header", f));
    let mut f = good4.clone();
    f[24] ^= 0x5a;
    out.push(("ip4_bad_checksum", f));
    // IPv6.
    out.push(("ip6_truncated", good6[..14 + 30].to_vec()));
    let mut f = good6.clone();
    f[14] = 0x40;
    out.push(("ip6_bad_version", f));
    let mut f = good6.clone();
    f[18..20].copy_from_slice(&1200u16.to_be_bytes());
    out.push(("ip6_payload_length_beyond_frame", f));
    // Hop-by-hop options anywhere but first.
    let udp = &good6[54..];
    let mut ext = vec![0u8, 0, 0, 0, 0, 0, 0, 0];
    ext[0] = 0; // destination options, next header: hop-by-hop (0)
    let mut hbh = vec![17u8, 0, 1, 4, 0, 0, 0, 0];
    hbh.extend_from_slice(udp);
    ext.extend_from_slice(&hbh);
    out.push((
        "ip6_hop_by_hop_not_first",
        ip6_frame(macs, src6, dst6, 60, 64, &ext),
    ));
    // An extension header whose length runs past the packet.
    let mut ext = vec![17u8, 20, 1, 4, 0, 0, 0, 0];
    ext.extend_from_slice(udp);
    out.push((
        "ip6_ext_header_beyond_packet",
        ip6_frame(macs, src6, dst6, 60, 64, &ext),
    ));
    // Nine destination-options headers in a row: more than the walk takes.
    let mut ext = Vec::new();
    for k in 0..9 {
        let next = if k == 8 { 17 } else { 60 };
        ext.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
    }
    ext.extend_from_slice(udp);
    out.push((
        "ip6_too_many_ext_headers",
        ip6_frame(macs, src6, dst6, 60, 64, &ext),
    ));
    out
}

fn refill_ip4_checksum(f: &mut [u8]) {
    f[24] = 0;
    f[25] = 0;
    let c = checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfsr_wire::checksum::verify;
    use vfsr_wire::{EthernetFrame, Ipv4Packet, Ipv6Packet};

    const MACS: ([u8; 6], [u8; 6]) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);

    #[test]
    fn udp4_is_well_formed() {
        let f = udp4(
            MACS,
            Ipv4Addr::new(10, 10, 0, 2),
            Ipv4Addr::new(198, 18, 0, 7),
            (1000, 2000),
            64,
            18,
        );
        assert_eq!(f.len(), 14 + 20 + 8 + 18);
        let e = EthernetFrame::new_checked(&f[..]).expect("ethernet");
        assert_eq!(e.ethertype(), ETH_IPV4);
        let ip = Ipv4Packet::new_checked(&f[14..]).expect("ipv4");
        assert!(ip.verify_checksum());
        assert_eq!(ip.dst_addr(), Ipv4Addr::new(198, 18, 0, 7));
        let l4 = &f[34..];
        let sum = add(
            pseudo_header_v4(ip.src_addr(), ip.dst_addr(), 17, l4.len() as u16),
            ones_sum(l4),
        );
        assert_eq!(sum, 0xffff);
    }

    #[test]
    fn ns_goes_to_the_solicited_node_group_with_a_good_checksum() {
        let src: Ipv6Addr = "fd00:10::1234".parse().expect("addr");
        let target: Ipv6Addr = "fd00:10::1".parse().expect("addr");
        let f = neighbor_solicit([2, 1, 2, 3, 4, 5], src, target);
        assert_eq!(&f[..6], &[0x33, 0x33, 0xff, 0, 0, 1]);
        let ip = Ipv6Packet::new_checked(&f[14..]).expect("ipv6");
        assert_eq!(ip.next_header(), 58);
        let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&f[38..54]).expect("16 bytes"));
        let m = &f[54..];
        assert_eq!(m[0], 135);
        assert_eq!(
            add(
                pseudo_header_v6(&src, &dst, 58, m.len() as u32),
                ones_sum(m)
            ),
            0xffff
        );
    }

    #[test]
    fn arp_and_echo_and_syn() {
        let a = arp_request(
            [2, 9, 9, 9, 9, 9],
            Ipv4Addr::new(10, 10, 0, 77),
            Ipv4Addr::new(10, 10, 0, 1),
        );
        assert_eq!(a.len(), 60);
        assert_eq!(&a[12..14], &[8, 6]);
        assert_eq!(&a[38..42], &[10, 10, 0, 1]);
        let e = echo4(
            MACS,
            Ipv4Addr::new(10, 10, 0, 2),
            Ipv4Addr::new(10, 10, 0, 1),
            3,
        );
        assert!(verify(&e[34..]));
        let s = tcp4(
            MACS,
            Ipv4Addr::new(10, 10, 0, 2),
            Ipv4Addr::new(10, 10, 0, 1),
            (40000, 179),
            TCP_SYN,
        );
        assert_eq!(s[47], 0x02);
        let a = tcp4(
            MACS,
            Ipv4Addr::new(10, 10, 0, 2),
            Ipv4Addr::new(10, 10, 0, 1),
            (40000, 179),
            TCP_ACK,
        );
        assert_eq!((a[47], &a[..47], &a[48..50]), (0x10, &s[..47], &s[48..50]));
        let pseudo = pseudo_header_v4(
            Ipv4Addr::new(10, 10, 0, 2),
            Ipv4Addr::new(10, 10, 0, 1),
            6,
            20,
        );
        assert_eq!(add(pseudo, ones_sum(&a[34..54])), 0xffff);
        let r = router_alert4(
            MACS,
            Ipv4Addr::new(10, 10, 0, 2),
            Ipv4Addr::new(198, 18, 0, 1),
        );
        let ip = Ipv4Packet::new_checked(&r[14..]).expect("ipv4 with options");
        assert_eq!(ip.header_len(), 24);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn every_malformed_frame_is_rejected_by_the_wire_views() {
        let set = malformed(
            MACS,
            Ipv4Addr::new(10, 10, 0, 2),
            Ipv4Addr::new(198, 18, 0, 1),
            "fd00:10::2".parse().expect("addr"),
            "2001:db8:18::1".parse().expect("addr"),
        );
        assert!(set.len() >= 14);
        for (name, f) in &set {
            let bad = match EthernetFrame::new_checked(&f[..]) {
                Err(_) => true,
                Ok(e) => match e.ethertype() {
                    0x88b5 => true,
                    ETH_IPV4 => match Ipv4Packet::new_checked(&f[14..]) {
                        Err(_) => true,
                        Ok(p) => !p.verify_checksum(),
                    },
                    ETH_IPV6 => match Ipv6Packet::new_checked(&f[14..]) {
                        Err(_) => true,
                        Ok(p) => p.ext_headers().is_err(),
                    },
                    _ => false,
                },
            };
            assert!(bad, "{name} passes the wire checks");
        }
    }

    #[test]
    fn random_macs_are_unicast() {
        let mut r = Rng::new(7);
        for _ in 0..100 {
            let m = r.mac();
            assert_eq!(m[0] & 1, 0);
        }
    }
}
