//! IPv6 headers and the extension-header chain (RFC 8200).
//!
//! ```text
//!    0                   1                   2                   3
//!    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//!   ┌───────┬───────────────┬───────────────────────────────────────┐
//!  0│Version│ Traffic Class │              Flow Label               │
//!   ├───────┴───────────────┴───────┬───────────────┬───────────────┤
//!  4│         Payload Length        │  Next Header  │   Hop Limit   │
//!   ├───────────────────────────────┴───────────────┴───────────────┤
//!  8│                     Source Address (16 bytes)                 │
//!   ├───────────────────────────────────────────────────────────────┤
//! 24│                  Destination Address (16 bytes)               │
//!   └───────────────────────────────────────────────────────────────┘
//!  40  payload: extension headers, then the upper-layer header
//! ```
//!
//! [`Ipv6Packet::new_checked`] checks 40 bytes ([`WireError::Truncated`]), version 6
//! ([`WireError::BadVersion`]) and 40 + payload length within the buffer
//! ([`WireError::BadPayloadLength`]; a longer buffer is Ethernet padding, cut off by
//! [`Ipv6Packet::payload`]). IPv6 has no header checksum, so the hop-limit decrement is a
//! plain store ([`Ipv6Packet::set_hop_limit`]). Jumbograms (payload length 0 with a
//! hop-by-hop Jumbo Payload option, RFC 2675) are not supported: payload length 0 means an
//! empty payload.
//!
//! ## The extension-header walk
//!
//! Each extension header starts with the next header's type and (except the fragment header)
//! its own length. [`walk_extension_headers`] follows the chain from the fixed header's Next
//! Header to the first header that is not an extension header, which is the upper layer:
//!
//! ```text
//!   type                     length in bytes         section
//!   0   hop-by-hop options   (Hdr Ext Len + 1) × 8   RFC 8200 4.3 (first only, 4.1)
//!   43  routing              (Hdr Ext Len + 1) × 8   RFC 8200 4.4
//!   44  fragment             8                       RFC 8200 4.5
//!   60  destination options  (Hdr Ext Len + 1) × 8   RFC 8200 4.6
//!   51  authentication (AH)  (Payload Len + 2) × 4   RFC 4302 2.2
//!
//!   [IPv6 nh=0]─▶[HBH nh=44 len=0]─▶[Frag nh=17 off=0 M]─▶[UDP ...]
//!                 payload offset 0   offset 8               upper_offset 16, protocol 17
//! ```
//!
//! Every header's length is checked against the payload
//! ([`WireError::TruncatedExtensionHeader`]), at most [`MAX_EXTENSION_HEADERS`] are followed
//! ([`WireError::TooManyExtensionHeaders`]) so a crafted chain costs bounded work, and a
//! hop-by-hop header after the first position is [`WireError::MisplacedHopByHop`]. The walk
//! stops after the fragment header of a non-first fragment (what follows is the middle of the
//! datagram, not a header) and at ESP, No Next Header or any unknown type (reported as the
//! upper-layer protocol). The result says whether a hop-by-hop header is present: such packets
//! take the slow path (RFC 8200 4.3 lets a router skip it, but the classifier punts Router
//! Alert).

use core::net::Ipv6Addr;

use crate::field::{
    array_at, set_bytes, set_u16, set_u32, set_u8, slice, slice_mut, u16_at, u32_at, u8_at,
};
use crate::ip_proto;
use crate::WireError;

mod field {
    pub const VER_TC_FLOW: usize = 0;
    pub const LENGTH: usize = 4;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: usize = 8;
    pub const DST: usize = 24;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

/// The most extension headers [`walk_extension_headers`] follows. Real traffic carries one or
/// two; RFC 8200 4.1 orders at most seven kinds, destination options appearing twice.
pub const MAX_EXTENSION_HEADERS: usize = 8;

/// A view of an IPv6 packet (fixed header and payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buffer` without checks (getters read zeros past its end).
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps `buffer` after checking length, version and payload length (module doc).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let len = buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let p = Ipv6Packet { buffer };
        if p.version() != 6 {
            return Err(WireError::BadVersion);
        }
        if HEADER_LEN + usize::from(p.payload_len()) > len {
            return Err(WireError::BadPayloadLength);
        }
        Ok(p)
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole buffer (Ethernet padding included).
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Version (6).
    #[inline]
    pub fn version(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::VER_TC_FLOW) >> 4
    }

    /// Traffic class (DSCP and ECN).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        ((u32_at(self.buffer.as_ref(), field::VER_TC_FLOW) >> 20) & 0xff) as u8
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::VER_TC_FLOW) & 0x000f_ffff
    }

    /// Payload length: the bytes after the fixed header, extension headers included.
    #[inline]
    pub fn payload_len(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::LENGTH)
    }

    /// Next header: the first extension header's type or the upper-layer protocol.
    #[inline]
    pub fn next_header(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::NXT_HDR)
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::HOP_LIMIT)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(array_at::<16>(self.buffer.as_ref(), field::SRC))
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(array_at::<16>(self.buffer.as_ref(), field::DST))
    }

    /// A hop-by-hop header follows the fixed header (the slow-path test, no walk needed:
    /// hop-by-hop may only come first).
    #[inline]
    pub fn has_hop_by_hop(&self) -> bool {
        self.next_header() == ip_proto::HOP_BY_HOP
    }

    /// The payload: bytes 40..40 + payload length (Ethernet padding cut off).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        slice(
            self.buffer.as_ref(),
            HEADER_LEN,
            HEADER_LEN + usize::from(self.payload_len()),
        )
    }

    /// Walks the extension headers of the payload ([`walk_extension_headers`]).
    #[inline]
    pub fn ext_headers(&self) -> Result<ExtHeaders, WireError> {
        walk_extension_headers(self.next_header(), self.payload())
    }

    /// The upper-layer bytes a walk found (from `ext.upper_offset` to the end of the payload).
    #[inline]
    pub fn upper_layer(&self, ext: &ExtHeaders) -> &[u8] {
        let p = self.payload();
        slice(p, ext.upper_offset, p.len())
    }
}

impl<'a> Ipv6Packet<&'a [u8]> {
    /// The payload, borrowed for as long as the bytes (not just the view).
    #[inline]
    pub fn into_payload(self) -> &'a [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        slice(self.buffer, HEADER_LEN, end)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets version 6, traffic class and flow label.
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let v = (6 << 28) | (u32::from(traffic_class) << 20) | (flow_label & 0x000f_ffff);
        set_u32(self.buffer.as_mut(), field::VER_TC_FLOW, v);
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, len: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, len);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, next_header: u8) {
        set_u8(self.buffer.as_mut(), field::NXT_HDR, next_header);
    }

    /// Sets the hop limit (no checksum to patch in IPv6).
    #[inline]
    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        set_u8(self.buffer.as_mut(), field::HOP_LIMIT, hop_limit);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: &Ipv6Addr) {
        set_bytes(self.buffer.as_mut(), field::SRC, &addr.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: &Ipv6Addr) {
        set_bytes(self.buffer.as_mut(), field::DST, &addr.octets());
    }

    /// The payload (bytes 40..40 + payload length), writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        slice_mut(self.buffer.as_mut(), HEADER_LEN, end)
    }
}

/// What a fragment header says (RFC 8200 4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fragment {
    /// Offset of this fragment's data in the datagram, in bytes.
    pub offset: u16,
    /// More fragments follow.
    pub more: bool,
    /// Identification.
    pub ident: u32,
}

/// The result of an extension-header walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExtHeaders {
    /// The upper-layer protocol: the first type that is not a followed extension header (for
    /// a non-first fragment, the fragment header's Next Header).
    pub upper_protocol: u8,
    /// Where the upper-layer header starts, from the start of the IPv6 payload.
    pub upper_offset: usize,
    /// A hop-by-hop options header is present (slow path).
    pub hop_by_hop: bool,
    /// The fragment header, if there is one.
    pub fragment: Option<Fragment>,
    /// How many extension headers were followed.
    pub count: u8,
}

impl ExtHeaders {
    /// A fragment other than the first: no upper-layer header in this packet.
    pub fn is_later_fragment(&self) -> bool {
        matches!(self.fragment, Some(f) if f.offset != 0)
    }
}

/// Follows the extension-header chain of an IPv6 payload that starts with header type
/// `first` (the fixed header's Next Header). Bounded and length-checked; see the module doc.
pub fn walk_extension_headers(first: u8, payload: &[u8]) -> Result<ExtHeaders, WireError> {
    let mut ext = ExtHeaders {
        upper_protocol: first,
        upper_offset: 0,
        hop_by_hop: false,
        fragment: None,
        count: 0,
    };
    let mut off = 0usize;
    let mut next = first;
    loop {
        let is_ext = matches!(
            next,
            ip_proto::HOP_BY_HOP
                | ip_proto::ROUTING
                | ip_proto::FRAGMENT
                | ip_proto::DESTINATION_OPTIONS
                | ip_proto::AH
        );
        if !is_ext {
            break;
        }
        if usize::from(ext.count) >= MAX_EXTENSION_HEADERS {
            return Err(WireError::TooManyExtensionHeaders);
        }
        if next == ip_proto::HOP_BY_HOP {
            if ext.count != 0 {
                return Err(WireError::MisplacedHopByHop);
            }
            ext.hop_by_hop = true;
        }
        // Every extension header is at least 8 bytes long.
        let rest = payload.get(off..).unwrap_or(&[]);
        if rest.len() < 8 {
            return Err(WireError::TruncatedExtensionHeader);
        }
        let len_field = usize::from(u8_at(rest, 1));
        let len = match next {
            ip_proto::FRAGMENT => 8,
            ip_proto::AH => (len_field + 2) * 4,
            _ => (len_field + 1) * 8,
        };
        if len > rest.len() {
            return Err(WireError::TruncatedExtensionHeader);
        }
        let this = next;
        next = u8_at(rest, 0);
        off += len;
        ext.count += 1;
        if this == ip_proto::FRAGMENT {
            let word = u16_at(rest, 2);
            let frag = Fragment {
                offset: word & 0xfff8,
                more: word & 1 != 0,
                ident: u32_at(rest, 4),
            };
            ext.fragment = Some(frag);
            if frag.offset != 0 {
                break;
            }
        }
    }
    ext.upper_protocol = next;
    ext.upper_offset = off;
    Ok(ext)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet + IPv6 2001:db8:1::10 -> 2001:db8:2::20 with a hop-by-hop header (Router Alert
    /// option, PadN) and a fragment header (first fragment, M set, id 0xdeadbeef), then UDP
    /// 5353 -> 53 "hello, world".
    const V6_HBH_FRAG: [u8; 90] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x86, 0xdd, 0x60,
        0x00, 0x00, 0x00, 0x00, 0x24, 0x00, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x02, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x2c, 0x00, 0x05, 0x02, 0x00, 0x00,
        0x01, 0x00, 0x11, 0x00, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef, 0x14, 0xe9, 0x00, 0x35, 0x00,
        0x14, 0x4e, 0xb7, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x2c, 0x20, 0x77, 0x6f, 0x72, 0x6c, 0x64,
    ];

    /// Ethernet + IPv6 with a fragment header at offset 185 × 8 = 1480 (last fragment).
    const V6_FRAG_LATER: [u8; 78] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x86, 0xdd, 0x60,
        0x00, 0x00, 0x00, 0x00, 0x18, 0x2c, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x02, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x11, 0x00, 0x05, 0xc8, 0xde, 0xad,
        0xbe, 0xef, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78,
        0x78, 0x78, 0x78,
    ];

    fn addr(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn golden_hop_by_hop_and_fragment() {
        let p = Ipv6Packet::new_checked(&V6_HBH_FRAG[14..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!((p.traffic_class(), p.flow_label()), (0, 0));
        assert_eq!(p.payload_len(), 36);
        assert_eq!(p.next_header(), ip_proto::HOP_BY_HOP);
        assert!(p.has_hop_by_hop());
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), addr("2001:db8:1::10"));
        assert_eq!(p.dst_addr(), addr("2001:db8:2::20"));
        let ext = p.ext_headers().unwrap();
        assert_eq!(
            ext,
            ExtHeaders {
                upper_protocol: ip_proto::UDP,
                upper_offset: 16,
                hop_by_hop: true,
                fragment: Some(Fragment {
                    offset: 0,
                    more: true,
                    ident: 0xdead_beef
                }),
                count: 2,
            }
        );
        assert!(!ext.is_later_fragment());
        assert_eq!(p.upper_layer(&ext)[..4], [0x14, 0xe9, 0x00, 0x35]);
    }

    #[test]
    fn golden_later_fragment_stops_the_walk() {
        let p = Ipv6Packet::new_checked(&V6_FRAG_LATER[14..]).unwrap();
        assert!(!p.has_hop_by_hop());
        let ext = p.ext_headers().unwrap();
        assert_eq!(ext.upper_protocol, ip_proto::UDP);
        assert_eq!(ext.upper_offset, 8);
        assert!(ext.is_later_fragment());
        assert_eq!(
            ext.fragment,
            Some(Fragment {
                offset: 1480,
                more: false,
                ident: 0xdead_beef
            })
        );
    }

    #[test]
    fn no_extension_headers() {
        let ext = walk_extension_headers(ip_proto::TCP, &[]).unwrap();
        assert_eq!((ext.upper_protocol, ext.upper_offset, ext.count), (6, 0, 0));
        assert!(!ext.hop_by_hop && ext.fragment.is_none());
        // ESP and No Next Header end the walk: nothing after them is readable.
        let ext = walk_extension_headers(ip_proto::ESP, &[0; 16]).unwrap();
        assert_eq!(ext.upper_protocol, ip_proto::ESP);
        let ext = walk_extension_headers(ip_proto::NO_NEXT_HEADER, &[]).unwrap();
        assert_eq!(ext.upper_protocol, ip_proto::NO_NEXT_HEADER);
    }

    #[test]
    fn routing_destination_options_and_ah_lengths() {
        // Routing (len 2 → 24 bytes) → dest opts (len 0 → 8) → AH (len 4 → 24) → TCP.
        let mut b = [0u8; 56];
        b[0] = ip_proto::DESTINATION_OPTIONS;
        b[1] = 2;
        b[24] = ip_proto::AH;
        b[32] = ip_proto::TCP;
        b[33] = 4;
        let ext = walk_extension_headers(ip_proto::ROUTING, &b).unwrap();
        assert_eq!(ext.upper_protocol, ip_proto::TCP);
        assert_eq!(ext.upper_offset, 56);
        assert_eq!(ext.count, 3);
        assert!(!ext.hop_by_hop);
        // One byte short of the AH.
        assert_eq!(
            walk_extension_headers(ip_proto::ROUTING, &b[..55]),
            Err(WireError::TruncatedExtensionHeader)
        );
    }

    #[test]
    fn walk_errors() {
        // Hop-by-hop after a destination options header.
        let mut b = [0u8; 16];
        b[0] = ip_proto::HOP_BY_HOP;
        assert_eq!(
            walk_extension_headers(ip_proto::DESTINATION_OPTIONS, &b),
            Err(WireError::MisplacedHopByHop)
        );
        // A chain of destination options headers longer than the bound.
        let mut chain = [0u8; 8 * (MAX_EXTENSION_HEADERS + 1)];
        for h in chain.chunks_mut(8) {
            h[0] = ip_proto::DESTINATION_OPTIONS;
        }
        assert_eq!(
            walk_extension_headers(ip_proto::DESTINATION_OPTIONS, &chain),
            Err(WireError::TooManyExtensionHeaders)
        );
        // Exactly the bound is fine when the last one leads to an upper layer.
        chain[8 * (MAX_EXTENSION_HEADERS - 1)] = ip_proto::UDP;
        let ext = walk_extension_headers(ip_proto::DESTINATION_OPTIONS, &chain).unwrap();
        assert_eq!(ext.count as usize, MAX_EXTENSION_HEADERS);
        // Header shorter than 8 bytes, and a length running past the payload.
        assert_eq!(
            walk_extension_headers(ip_proto::FRAGMENT, &[17, 0, 0, 0, 0, 0, 0]),
            Err(WireError::TruncatedExtensionHeader)
        );
        assert_eq!(
            walk_extension_headers(ip_proto::HOP_BY_HOP, &[17, 255, 0, 0, 0, 0, 0, 0]),
            Err(WireError::TruncatedExtensionHeader)
        );
        // The golden packet cut inside its fragment header (payload length adjusted).
        let mut v = V6_HBH_FRAG[14..14 + 40 + 12].to_vec();
        v[5] = 12;
        let p = Ipv6Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.ext_headers(), Err(WireError::TruncatedExtensionHeader));
    }

    #[test]
    fn header_errors() {
        let ip = &V6_HBH_FRAG[14..];
        assert_eq!(
            Ipv6Packet::new_checked(&ip[..39]),
            Err(WireError::Truncated)
        );
        assert_eq!(
            Ipv6Packet::new_checked(&ip[..ip.len() - 1]),
            Err(WireError::BadPayloadLength)
        );
        let mut b = ip.to_vec();
        b[0] = 0x45;
        assert_eq!(Ipv6Packet::new_checked(&b[..]), Err(WireError::BadVersion));
        // Padding after the payload is not payload.
        let mut b = ip.to_vec();
        b.extend_from_slice(&[0; 4]);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload().len(), 36);
    }

    #[test]
    fn setters() {
        let mut b = [0u8; 48];
        let mut p = Ipv6Packet::new_unchecked(&mut b[..]);
        p.set_version_tc_flow(0xb8, 0xabcde);
        p.set_payload_len(8);
        p.set_next_header(ip_proto::UDP);
        p.set_hop_limit(255);
        p.set_src_addr(&addr("fe80::1"));
        p.set_dst_addr(&addr("ff02::2"));
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.traffic_class(), p.flow_label()), (0xb8, 0xabcde));
        assert_eq!(
            (p.payload_len(), p.next_header(), p.hop_limit()),
            (8, 17, 255)
        );
        assert_eq!(p.src_addr(), addr("fe80::1"));
        assert_eq!(p.dst_addr(), addr("ff02::2"));
        assert_eq!(b[..8], [0x6b, 0x8a, 0xbc, 0xde, 0, 8, 17, 255]);
    }

    #[test]
    fn hop_limit_decrement_in_place() {
        let mut b = V6_HBH_FRAG[14..].to_vec();
        let mut p = Ipv6Packet::new_checked(&mut b[..]).unwrap();
        let h = p.hop_limit();
        p.set_hop_limit(h - 1);
        assert_eq!(b[7], 63);
        assert_eq!(b[8..], V6_HBH_FRAG[22..]);
    }
}
