//! Last stage, `rewrite`: the header changes of a forwarded packet, in place.
//!
//! ```text
//!   Ethernet: dst ← neighbor's MAC, src ← egress port's MAC
//!   IPv4:     TTL − 1, header checksum updated incrementally (RFC 1624 eqn. 3; the TTL
//!             is the high byte of its 16-bit word, so the update adds a constant)
//!   IPv6:     hop limit − 1 (no header checksum)
//! ```
//!
//! Nothing else of the packet is read or written, so a forwarded 64-byte frame costs two
//! 6-byte stores and a few byte operations here. The writes go through vfsr-wire's views,
//! made unchecked over one fixed-size block of the headers ([`rewrite`]): the input stages
//! checked them, and a block of known length lets the compiler drop every bound check.

use vfsr_wire::ethernet::EthernetFrame;
use vfsr_wire::ipv4::{self, Ipv4Packet};
use vfsr_wire::ipv6::Ipv6Packet;
use vfsr_wire::MacAddr;

use crate::stage::eth_input::ETH_HEADER;
use crate::stage::ip6_input::IP6_HEADER;

/// The whole rewrite of a forwarded frame: TTL and checksum (IPv4) or hop limit (`v6`),
/// then both MACs. The headers are taken as one fixed-size block, so none of the writes
/// checks a bound of its own; a frame too short to hold them (which the input stages
/// never pass on) is left as it is.
#[inline(always)]
pub fn rewrite(frame: &mut [u8], v6: bool, dst: MacAddr, src: MacAddr) {
    if v6 {
        if let Some(h) = frame.first_chunk_mut::<{ ETH_HEADER + IP6_HEADER }>() {
            decrement_hop_limit(h);
            set_macs(h, dst, src);
        }
    } else if let Some(h) = frame.first_chunk_mut::<{ ETH_HEADER + ipv4::MIN_HEADER_LEN }>() {
        decrement_ttl4(h);
        set_macs(h, dst, src);
    }
}

/// Sets the Ethernet addresses.
#[inline]
pub fn set_macs(frame: &mut [u8], dst: MacAddr, src: MacAddr) {
    let mut eth = EthernetFrame::new_unchecked(frame);
    eth.set_dst(dst);
    eth.set_src(src);
}

/// Decrements the IPv4 TTL of `frame` (the header starts at [`ETH_HEADER`]) and updates the
/// header checksum. The caller has checked that the TTL is at least 2.
#[inline]
pub fn decrement_ttl4(frame: &mut [u8]) {
    if let Some(ip) = frame.get_mut(ETH_HEADER..) {
        Ipv4Packet::new_unchecked(ip).decrement_ttl();
    }
}

/// Decrements the IPv6 hop limit of `frame`.
#[inline]
pub fn decrement_hop_limit(frame: &mut [u8]) {
    if let Some(ip) = frame.get_mut(ETH_HEADER..) {
        let mut p = Ipv6Packet::new_unchecked(ip);
        let hop_limit = p.hop_limit().wrapping_sub(1);
        p.set_hop_limit(hop_limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfsr_wire::checksum;

    #[test]
    fn ttl_and_checksum_golden() {
        // A header whose checksum is 0xb861 at TTL 64 (RFC 1071 by hand), framed.
        let ip: [u8; 20] = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert!(checksum::verify(&ip));
        let mut f = vec![0u8; 14];
        f.extend_from_slice(&ip);
        decrement_ttl4(&mut f);
        assert_eq!(f[14 + 8], 63);
        // TTL word 0x4011 → 0x3f11: the checksum grows by 0x0100.
        assert_eq!(&f[14 + 10..14 + 12], &[0xb9, 0x61]);
        assert!(checksum::verify(&f[14..34]));
        set_macs(
            &mut f,
            MacAddr([1, 2, 3, 4, 5, 6]),
            MacAddr([7, 8, 9, 10, 11, 12]),
        );
        assert_eq!(&f[..12], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    }

    #[test]
    fn checksum_stays_valid_for_every_ttl() {
        let mut ip: [u8; 20] = [
            0x45, 0x00, 0x00, 0x73, 0x12, 0x34, 0x00, 0x00, 0xff, 0x06, 0, 0, 0x0a, 0x00, 0x00,
            0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let c = checksum::checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let mut f = vec![0u8; 14];
        f.extend_from_slice(&ip);
        for ttl in (1..=254u8).rev() {
            decrement_ttl4(&mut f);
            assert_eq!(f[14 + 8], ttl);
            assert!(checksum::verify(&f[14..34]), "ttl {ttl}");
        }
    }

    #[test]
    fn rewrite_does_both_headers_and_leaves_a_short_frame_alone() {
        let ip: [u8; 20] = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let (dst, src) = (MacAddr([1, 2, 3, 4, 5, 6]), MacAddr([7, 8, 9, 10, 11, 12]));
        let mut f = vec![0u8; 14];
        f.extend_from_slice(&ip);
        rewrite(&mut f, false, dst, src);
        assert_eq!(&f[..12], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(f[14 + 8], 63);
        assert!(checksum::verify(&f[14..34]));
        let mut f6 = vec![0u8; 54];
        f6[14 + 7] = 9;
        rewrite(&mut f6, true, dst, src);
        assert_eq!(&f6[..12], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(f6[14 + 7], 8);
        let mut short = vec![0xaa; 40];
        rewrite(&mut short, true, dst, src);
        assert_eq!(short, vec![0xaa; 40]);
    }

    #[test]
    fn hop_limit() {
        let mut f = vec![0u8; 54];
        f[14 + 7] = 2;
        decrement_hop_limit(&mut f);
        assert_eq!(f[14 + 7], 1);
    }
}
