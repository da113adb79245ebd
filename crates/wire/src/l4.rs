//! UDP and TCP ports, and the 5-tuple that flow hashing and the flow table key on.
//!
//! ```text
//!   UDP (RFC 768)                          TCP (RFC 9293 3.1)
//!   0        2        4        6        8  0        2        4          12     13
//!   ┌────────┬────────┬────────┬────────┐  ┌────────┬────────┬── ... ──┬──────┬──
//!   │src port│dst port│ length │checksum│  │src port│dst port│ seq, ack │offset│ flags ...
//!   └────────┴────────┴────────┴────────┘  └────────┴────────┴── ... ──┴──────┴──
//! ```
//!
//! A router reads only the ports, which sit at the same offsets in both. [`UdpHeader`] and
//! [`TcpHeader`] check their header lengths for callers that want the full views;
//! [`five_tuple_v4`] and [`five_tuple_v6`] read just the 4 port bytes, and give ports 0
//! when there are none to read: a protocol other than TCP or UDP, a fragment other than the
//! first (its payload is the middle of a datagram), or an upper-layer header shorter than 4
//! bytes. Such packets still hash by addresses and protocol, and all fragments of one
//! datagram but the first hash alike.

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::field::u16_at;
use crate::ip_proto;
use crate::ipv4::Ipv4Packet;
use crate::ipv6::Ipv6Packet;
use crate::WireError;

/// Length of the UDP header.
pub const UDP_HEADER_LEN: usize = 8;
/// Length of the TCP header without options.
pub const TCP_MIN_HEADER_LEN: usize = 20;

/// A view of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpHeader<T> {
    /// Wraps `buffer` after checking 8 bytes and a length field between 8 and the buffer's
    /// length ([`WireError::BadL4Length`]).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        if b.len() < UDP_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let len = usize::from(u16_at(b, 4));
        if len < UDP_HEADER_LEN || len > b.len() {
            return Err(WireError::BadL4Length);
        }
        Ok(UdpHeader { buffer })
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        u16_at(self.buffer.as_ref(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        u16_at(self.buffer.as_ref(), 2)
    }

    /// Length of header and data.
    pub fn len(&self) -> u16 {
        u16_at(self.buffer.as_ref(), 4)
    }

    /// True when the length field says 0 (never, for a checked view).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checksum as stored (0: none, IPv4 only).
    pub fn checksum(&self) -> u16 {
        u16_at(self.buffer.as_ref(), 6)
    }
}

/// A view of a TCP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpHeader<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpHeader<T> {
    /// Wraps `buffer` after checking 20 bytes and a data offset between 5 and the buffer's
    /// length ([`WireError::BadL4Length`]).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        if b.len() < TCP_MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let h = TcpHeader { buffer };
        let hl = h.header_len();
        if hl < TCP_MIN_HEADER_LEN || hl > h.buffer.as_ref().len() {
            return Err(WireError::BadL4Length);
        }
        Ok(h)
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        u16_at(self.buffer.as_ref(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        u16_at(self.buffer.as_ref(), 2)
    }

    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(crate::field::u8_at(self.buffer.as_ref(), 12) >> 4) * 4
    }

    /// The flags byte (CWR ECE URG ACK PSH RST SYN FIN).
    pub fn flags(&self) -> u8 {
        crate::field::u8_at(self.buffer.as_ref(), 13)
    }
}

/// Source and destination port of a TCP or UDP header, if its first 4 bytes are there.
#[inline]
pub fn ports(upper: &[u8]) -> Option<(u16, u16)> {
    if upper.len() < 4 {
        return None;
    }
    Some((u16_at(upper, 0), u16_at(upper, 2)))
}

/// The flow key: addresses, upper-layer protocol, ports (0 where there are none, see the
/// module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FiveTuple<A> {
    /// Source address.
    pub src: A,
    /// Destination address.
    pub dst: A,
    /// Upper-layer protocol (IPv6: after the extension headers).
    pub protocol: u8,
    /// Source port, or 0.
    pub src_port: u16,
    /// Destination port, or 0.
    pub dst_port: u16,
}

fn has_ports(protocol: u8) -> bool {
    protocol == ip_proto::TCP || protocol == ip_proto::UDP
}

/// The 5-tuple of a checked IPv4 packet.
#[inline]
pub fn five_tuple_v4<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> FiveTuple<Ipv4Addr> {
    let protocol = p.protocol();
    let (src_port, dst_port) = if has_ports(protocol) && p.frag_offset() == 0 {
        ports(p.payload()).unwrap_or((0, 0))
    } else {
        (0, 0)
    };
    FiveTuple {
        src: p.src_addr(),
        dst: p.dst_addr(),
        protocol,
        src_port,
        dst_port,
    }
}

/// The 5-tuple of a checked IPv6 packet, its extension headers walked; the walk's error if
/// the chain is malformed.
#[inline]
pub fn five_tuple_v6<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> Result<FiveTuple<Ipv6Addr>, WireError> {
    let ext = p.ext_headers()?;
    let protocol = ext.upper_protocol;
    let (src_port, dst_port) = if has_ports(protocol) && !ext.is_later_fragment() {
        ports(p.upper_layer(&ext)).unwrap_or((0, 0))
    } else {
        (0, 0)
    };
    Ok(FiveTuple {
        src: p.src_addr(),
        dst: p.dst_addr(),
        protocol,
        src_port,
        dst_port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet + IPv4 + TCP SYN 10.0.0.1:40000 -> 10.0.0.2:443 with an MSS option.
    const TCP_SYN: [u8; 58] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x2c, 0x30, 0x39, 0x40, 0x00, 0x40, 0x06, 0xf6, 0x90, 0x0a, 0x00, 0x00, 0x01,
        0x0a, 0x00, 0x00, 0x02, 0x9c, 0x40, 0x01, 0xbb, 0x11, 0x22, 0x33, 0x44, 0x00, 0x00, 0x00,
        0x00, 0x60, 0x02, 0xfa, 0xf0, 0xa6, 0xd1, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4,
    ];

    /// IPv4 UDP, a later fragment (offset 800).
    const UDP4_FRAG_LATER: [u8; 28] = [
        0x45, 0x00, 0x00, 0x1c, 0x00, 0x07, 0x20, 0x64, 0x40, 0x11, 0x46, 0x64, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x00, 0x00, 0x02, 0x79, 0x79, 0x79, 0x79, 0x79, 0x79, 0x79, 0x79,
    ];

    /// IPv6 UDP 2001:db8:1::10:5353 -> 2001:db8:2::20:53 "hello, world".
    const UDP6: [u8; 60] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x14, 0x11, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x02,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x14, 0xe9, 0x00, 0x35, 0x00,
        0x14, 0x4e, 0xb7, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x2c, 0x20, 0x77, 0x6f, 0x72, 0x6c, 0x64,
    ];

    /// IPv6 with hop-by-hop and a first-fragment header before the same UDP datagram.
    const V6_HBH_FRAG: [u8; 76] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x24, 0x00, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x02,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x2c, 0x00, 0x05, 0x02, 0x00,
        0x00, 0x01, 0x00, 0x11, 0x00, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef, 0x14, 0xe9, 0x00, 0x35,
        0x00, 0x14, 0x4e, 0xb7, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x2c, 0x20, 0x77, 0x6f, 0x72, 0x6c,
        0x64,
    ];

    fn a6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn golden_tcp_syn() {
        let p = Ipv4Packet::new_checked(&TCP_SYN[14..]).unwrap();
        let t = five_tuple_v4(&p);
        assert_eq!(
            t,
            FiveTuple {
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(10, 0, 0, 2),
                protocol: ip_proto::TCP,
                src_port: 40000,
                dst_port: 443
            }
        );
        let h = TcpHeader::new_checked(p.payload()).unwrap();
        assert_eq!((h.src_port(), h.dst_port()), (40000, 443));
        assert_eq!(h.header_len(), 24);
        assert_eq!(h.flags(), 0x02);
    }

    #[test]
    fn later_ipv4_fragment_has_no_ports() {
        let p = Ipv4Packet::new_checked(&UDP4_FRAG_LATER[..]).unwrap();
        let t = five_tuple_v4(&p);
        assert_eq!((t.protocol, t.src_port, t.dst_port), (ip_proto::UDP, 0, 0));
    }

    #[test]
    fn non_tcp_udp_has_no_ports() {
        // The ping from the ICMP tests: ICMP has no ports.
        let mut b = TCP_SYN[14..].to_vec();
        b[9] = ip_proto::ICMP;
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(five_tuple_v4(&p).src_port, 0);
        // A UDP header cut to 3 bytes.
        let mut b = TCP_SYN[14..14 + 23].to_vec();
        b[3] = 23;
        b[9] = ip_proto::UDP;
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(five_tuple_v4(&p).dst_port, 0);
    }

    #[test]
    fn golden_udp6_and_through_extension_headers() {
        let want = FiveTuple {
            src: a6("2001:db8:1::10"),
            dst: a6("2001:db8:2::20"),
            protocol: ip_proto::UDP,
            src_port: 5353,
            dst_port: 53,
        };
        let p = Ipv6Packet::new_checked(&UDP6[..]).unwrap();
        assert_eq!(five_tuple_v6(&p), Ok(want));
        let u = UdpHeader::new_checked(p.payload()).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.len()), (5353, 53, 20));
        assert_eq!(u.checksum(), 0x4eb7);
        assert!(!u.is_empty());
        let p = Ipv6Packet::new_checked(&V6_HBH_FRAG[..]).unwrap();
        assert_eq!(five_tuple_v6(&p), Ok(want));
    }

    #[test]
    fn later_ipv6_fragment_and_bad_chain() {
        let mut b = V6_HBH_FRAG.to_vec();
        b[50] = 0x05; // fragment offset 0x5c8 >> 3 = 185
        b[51] = 0xc8;
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        let t = five_tuple_v6(&p).unwrap();
        assert_eq!((t.protocol, t.src_port, t.dst_port), (ip_proto::UDP, 0, 0));
        let mut b = V6_HBH_FRAG.to_vec();
        b[41] = 200; // hop-by-hop length past the payload
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(five_tuple_v6(&p), Err(WireError::TruncatedExtensionHeader));
    }

    #[test]
    fn header_errors() {
        assert_eq!(
            UdpHeader::new_checked(&[0u8; 7][..]),
            Err(WireError::Truncated)
        );
        assert_eq!(
            UdpHeader::new_checked(&[0, 1, 0, 2, 0, 7, 0, 0][..]),
            Err(WireError::BadL4Length)
        );
        assert_eq!(
            UdpHeader::new_checked(&[0, 1, 0, 2, 0, 9, 0, 0][..]),
            Err(WireError::BadL4Length)
        );
        let syn = &TCP_SYN[34..];
        assert_eq!(
            TcpHeader::new_checked(&syn[..19]),
            Err(WireError::Truncated)
        );
        assert_eq!(
            TcpHeader::new_checked(&syn[..23]),
            Err(WireError::BadL4Length)
        );
        let mut b = syn.to_vec();
        b[12] = 0x40;
        assert_eq!(TcpHeader::new_checked(&b[..]), Err(WireError::BadL4Length));
        assert_eq!(ports(&[1, 2, 3]), None);
    }
}
