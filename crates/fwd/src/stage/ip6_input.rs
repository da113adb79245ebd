//! Stage 2 (IPv6), `ip6-input`: RFC 8200 validation.
//!
//! 1. at least the 40-byte fixed header (`ip6_truncated`), version 6 (`ip6_bad_version`);
//! 2. the payload length fits in the frame (`ip6_bad_payload_len`; bytes past it are
//!    ignored);
//! 3. no multicast or loopback source, and the unspecified source only towards a multicast
//!    group (Duplicate Address Detection; RFC 4291 2.5.2) (`ip6_martian_source`);
//! 4. no unspecified or loopback destination (`ip6_martian_dest`);
//! 5. the extension-header chain is walked (bounded, `vfsr_wire::ipv6`) when the fixed
//!    header announces one; a broken chain drops (`ip6_bad_ext_header`). The walk finds the
//!    upper-layer protocol and offset for flow hashing, a hop-by-hop header (slow path, RFC
//!    8200 4.3) and a fragment header (a later fragment has no ports).

use vfsr_wire::ipv6::Ipv6Packet;
use vfsr_wire::WireError;

use crate::counters::DropReason;
use crate::stage::ip4_input::ports_at;

/// The IPv6 fixed header's length.
pub const IP6_HEADER: usize = 40;

/// What the rest of the pipeline needs from an IPv6 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ip6Meta {
    /// Source address.
    pub src: u128,
    /// Destination address.
    pub dst: u128,
    /// Hop limit, as received.
    pub hop_limit: u8,
    /// Upper-layer protocol after the extension headers.
    pub upper: u8,
    /// Offset of the upper-layer header from the start of the IPv6 header.
    pub upper_offset: usize,
    /// Payload length (the packet is `40 + payload_len` bytes).
    pub payload_len: u16,
    /// A hop-by-hop options header is present.
    pub hop_by_hop: bool,
    /// A fragment other than the first.
    pub later_fragment: bool,
}

/// What `ip6-input` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ip6Outcome {
    /// Valid.
    Valid(Ip6Meta),
    /// Dropped.
    Drop(DropReason),
}

#[inline]
fn is_ext_header(nh: u8) -> bool {
    matches!(nh, 0 | 43 | 44 | 60 | 51)
}

/// Whether `a` is multicast (`ff00::/8`).
#[inline]
pub fn is_multicast6(a: u128) -> bool {
    (a >> 120) == 0xff
}

/// The drop reason for a header the view refuses.
#[inline]
fn refused(e: WireError) -> DropReason {
    match e {
        WireError::BadVersion => DropReason::Ip6BadVersion,
        WireError::BadPayloadLength => DropReason::Ip6BadPayloadLen,
        _ => DropReason::Ip6Truncated,
    }
}

/// Runs the stage on `ip`, the frame's bytes after the Ethernet header.
///
/// The header is read through `vfsr_wire::ipv6::Ipv6Packet` (checks 1 and 2 in
/// `new_checked`), the chain through its walker.
#[inline(always)]
pub fn ip6_input(ip: &[u8]) -> Ip6Outcome {
    let p = match Ipv6Packet::new_checked(ip) {
        Ok(p) => p,
        Err(e) => return Ip6Outcome::Drop(refused(e)),
    };
    let src = u128::from(p.src_addr());
    let dst = u128::from(p.dst_addr());
    if is_multicast6(src) || src == 1 || (src == 0 && !is_multicast6(dst)) {
        return Ip6Outcome::Drop(DropReason::Ip6MartianSource);
    }
    if dst == 0 || dst == 1 {
        return Ip6Outcome::Drop(DropReason::Ip6MartianDest);
    }
    let next = p.next_header();
    let mut meta = Ip6Meta {
        src,
        dst,
        hop_limit: p.hop_limit(),
        upper: next,
        upper_offset: IP6_HEADER,
        payload_len: p.payload_len(),
        hop_by_hop: false,
        later_fragment: false,
    };
    if is_ext_header(next) {
        match p.ext_headers() {
            Ok(ext) => {
                meta.upper = ext.upper_protocol;
                meta.upper_offset = IP6_HEADER + ext.upper_offset;
                meta.hop_by_hop = ext.hop_by_hop;
                meta.later_fragment = ext.is_later_fragment();
            }
            Err(_) => return Ip6Outcome::Drop(DropReason::Ip6BadExtHeader),
        }
    }
    Ip6Outcome::Valid(meta)
}

/// Where the transport ports start (the upper-layer offset), for TCP, UDP, SCTP or
/// UDP-Lite not in a later fragment; `None` otherwise.
#[inline(always)]
pub fn l4_offset6(meta: &Ip6Meta) -> Option<usize> {
    (!meta.later_fragment && matches!(meta.upper, 6 | 17 | 132 | 136)).then_some(meta.upper_offset)
}

/// The transport ports of TCP, UDP, SCTP or UDP-Lite (not in a later fragment); `(0, 0)`
/// otherwise.
#[inline(always)]
pub fn ports6(ip: &[u8], meta: &Ip6Meta) -> (u16, u16) {
    // The bounds come from `meta` (the checked view and its walk of the chain), not from
    // the header read again.
    let len = IP6_HEADER + usize::from(meta.payload_len);
    l4_offset6(meta).map_or((0, 0), |at| ports_at(ip, at, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2001:db8::1 → 2001:db8:1::7, UDP 12345 → 53, 8 bytes of UDP header, hop limit 64.
    fn udp6(next: u8, ext: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0];
        let plen = (ext.len() + 8) as u16;
        p.extend_from_slice(&plen.to_be_bytes());
        p.push(next);
        p.push(64);
        p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]);
        p.extend_from_slice(ext);
        p.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 8, 0, 0]);
        p
    }

    #[test]
    fn valid_and_ports() {
        let p = udp6(17, &[]);
        let Ip6Outcome::Valid(m) = ip6_input(&p) else {
            panic!("dropped")
        };
        assert_eq!((m.upper, m.upper_offset, m.hop_limit), (17, 40, 64));
        assert_eq!(ports6(&p, &m), (12345, 53));
        // Destination options (8 bytes) then UDP.
        let p = udp6(60, &[17, 0, 1, 4, 0, 0, 0, 0]);
        let Ip6Outcome::Valid(m) = ip6_input(&p) else {
            panic!("dropped")
        };
        assert_eq!((m.upper, m.upper_offset), (17, 48));
        assert_eq!(ports6(&p, &m), (12345, 53));
        // Hop-by-hop.
        let p = udp6(0, &[17, 0, 1, 4, 0, 0, 0, 0]);
        assert!(matches!(ip6_input(&p), Ip6Outcome::Valid(m) if m.hop_by_hop));
        // A later fragment: offset 8.
        let p = udp6(44, &[17, 0, 0, 8, 0, 0, 0, 1]);
        let Ip6Outcome::Valid(m) = ip6_input(&p) else {
            panic!("dropped")
        };
        assert!(m.later_fragment);
        assert_eq!(ports6(&p, &m), (0, 0));
        // A payload that ends two bytes into the UDP header, the rest padding.
        let mut p = udp6(17, &[]);
        p[4..6].copy_from_slice(&2u16.to_be_bytes());
        let Ip6Outcome::Valid(m) = ip6_input(&p) else {
            panic!("dropped")
        };
        assert_eq!(ports6(&p, &m), (0, 0));
    }

    #[test]
    fn every_drop_reason() {
        let good = udp6(17, &[]);
        let drop = |p: &[u8]| match ip6_input(p) {
            Ip6Outcome::Drop(r) => r,
            Ip6Outcome::Valid(_) => panic!("not dropped"),
        };
        assert_eq!(drop(&good[..39]), DropReason::Ip6Truncated);
        let mut p = good.clone();
        p[0] = 0x40;
        assert_eq!(drop(&p), DropReason::Ip6BadVersion);
        let mut p = good.clone();
        p[5] = 9;
        assert_eq!(drop(&p), DropReason::Ip6BadPayloadLen);
        let mut p = good.clone();
        p[8] = 0xff;
        assert_eq!(drop(&p), DropReason::Ip6MartianSource);
        let mut p = good.clone();
        p[8..24].copy_from_slice(&1u128.to_be_bytes());
        assert_eq!(drop(&p), DropReason::Ip6MartianSource);
        let mut p = good.clone();
        p[8..24].copy_from_slice(&0u128.to_be_bytes());
        assert_eq!(drop(&p), DropReason::Ip6MartianSource);
        let mut p = good.clone();
        p[24..40].copy_from_slice(&0u128.to_be_bytes());
        assert_eq!(drop(&p), DropReason::Ip6MartianDest);
        // Extension header running past the payload.
        let p = udp6(60, &[17, 5, 1, 4, 0, 0, 0, 0]);
        assert_eq!(drop(&p), DropReason::Ip6BadExtHeader);
        // Unspecified source to a multicast group (DAD) is valid.
        let mut p = good.clone();
        p[8..24].copy_from_slice(&0u128.to_be_bytes());
        p[24] = 0xff;
        p[25] = 0x02;
        assert!(matches!(ip6_input(&p), Ip6Outcome::Valid(_)));
    }
}
