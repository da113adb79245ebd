//! Ethernet II frames (IEEE 802.3 with an EtherType, RFC 894 for IPv4 over Ethernet).
//!
//! ```text
//!   0                   6                   12      14
//!   ┌───────────────────┬───────────────────┬───────┬──────────────────────┐
//!   │ destination MAC   │ source MAC        │ type  │ payload (46..1500)   │
//!   └───────────────────┴───────────────────┴───────┴──────────────────────┘
//! ```
//!
//! The view starts at the destination address (no preamble) and ends where the buffer ends
//! (no frame check sequence: NICs strip it). Frames shorter than 60 bytes are padded on the
//! wire, so the payload may be longer than the packet it carries; the IP views cut it to the
//! IP length.
//!
//! Out of scope: VLAN tags (802.1Q, 0x8100, and QinQ); a tagged frame reads as EtherType
//! [`ethertype::VLAN`] and the classifier treats it as unknown. An EtherType below 0x0600 is an
//! 802.3 length field, not a type; the view does not reject it, it just matches no protocol.
//! The rewrite stage uses [`EthernetFrame::set_dst`] and [`EthernetFrame::set_src`].

use crate::field::{array_at, set_bytes, set_u16, slice, slice_mut, u16_at};
use crate::WireError;

/// EtherType values vfsr looks at.
pub mod ethertype {
    /// IPv4 (RFC 894).
    pub const IPV4: u16 = 0x0800;
    /// ARP (RFC 826).
    pub const ARP: u16 = 0x0806;
    /// IEEE 802.1Q VLAN tag (not parsed here).
    pub const VLAN: u16 = 0x8100;
    /// IPv6 (RFC 2464).
    pub const IPV6: u16 = 0x86dd;
}

mod field {
    pub const DST: usize = 0;
    pub const SRC: usize = 6;
    pub const ETHERTYPE: usize = 12;
}

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = 14;

/// A 48-bit MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// The all-ones broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Group bit set (the low bit of the first byte): multicast or broadcast.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }

    /// Neither multicast nor broadcast.
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// The Ethernet multicast address an IPv6 multicast address maps to (RFC 2464 7):
    /// 33:33 followed by the address's last four bytes.
    pub fn ipv6_multicast(addr: &core::net::Ipv6Addr) -> MacAddr {
        let o = addr.octets();
        MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
    }
}

impl core::fmt::Display for MacAddr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// A view of an Ethernet II frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer` without checks. Getters read zeros past its end; use for buffers the
    /// caller sized itself (building a frame).
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps `buffer` after checking it holds the 14-byte header.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(EthernetFrame { buffer })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC address.
    #[inline]
    pub fn dst(&self) -> MacAddr {
        MacAddr(array_at(self.buffer.as_ref(), field::DST))
    }

    /// Source MAC address.
    #[inline]
    pub fn src(&self) -> MacAddr {
        MacAddr(array_at(self.buffer.as_ref(), field::SRC))
    }

    /// EtherType (see [`ethertype`]).
    #[inline]
    pub fn ethertype(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::ETHERTYPE)
    }

    /// Everything after the header (padding included).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        slice(b, HEADER_LEN, b.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC address.
    #[inline]
    pub fn set_dst(&mut self, mac: MacAddr) {
        set_bytes(self.buffer.as_mut(), field::DST, &mac.0);
    }

    /// Sets the source MAC address.
    #[inline]
    pub fn set_src(&mut self, mac: MacAddr) {
        set_bytes(self.buffer.as_mut(), field::SRC, &mac.0);
    }

    /// Sets the EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, ethertype: u16) {
        set_u16(self.buffer.as_mut(), field::ETHERTYPE, ethertype);
    }

    /// The payload, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let len = b.len();
        slice_mut(b, HEADER_LEN, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;
    use std::vec::Vec;

    /// ARP request "who has 192.168.1.1, tell 192.168.1.10", broadcast, padded to 60 bytes.
    const ARP_REQUEST: [u8; 60] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x06, 0x00,
        0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0xc0, 0xa8,
        0x01, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x01, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn golden_broadcast_arp_frame() {
        let f = EthernetFrame::new_checked(&ARP_REQUEST[..]).unwrap();
        assert!(f.dst().is_broadcast());
        assert!(f.dst().is_multicast());
        assert_eq!(f.src(), MacAddr([2, 0, 0, 0, 0, 2]));
        assert!(f.src().is_unicast());
        assert_eq!(f.ethertype(), ethertype::ARP);
        assert_eq!(f.payload().len(), 46);
        assert_eq!(f.payload()[..2], [0x00, 0x01]);
    }

    #[test]
    fn rewrite_macs_in_place() {
        let mut buf = ARP_REQUEST.to_vec();
        let mut f = EthernetFrame::new_checked(&mut buf[..]).unwrap();
        f.set_dst(MacAddr([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]));
        f.set_src(MacAddr([1, 2, 3, 4, 5, 6]));
        f.set_ethertype(ethertype::IPV4);
        f.payload_mut()[0] = 0x45;
        assert_eq!(f.dst().to_string(), "aa:bb:cc:dd:ee:ff");
        assert_eq!(
            buf[..15],
            [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 1, 2, 3, 4, 5, 6, 8, 0, 0x45]
        );
        assert_eq!(buf[15..], ARP_REQUEST[15..]);
    }

    #[test]
    fn short_frames_are_truncated() {
        for n in 0..HEADER_LEN {
            assert_eq!(
                EthernetFrame::new_checked(&ARP_REQUEST[..n]),
                Err(WireError::Truncated)
            );
        }
        let f = EthernetFrame::new_checked(&ARP_REQUEST[..HEADER_LEN]).unwrap();
        assert!(f.payload().is_empty());
    }

    #[test]
    fn unchecked_views_never_panic() {
        let mut empty: Vec<u8> = Vec::new();
        let mut f = EthernetFrame::new_unchecked(&mut empty[..]);
        assert_eq!(f.dst(), MacAddr([0; 6]));
        assert_eq!(f.ethertype(), 0);
        f.set_src(MacAddr::BROADCAST);
        assert!(f.payload_mut().is_empty());
    }

    #[test]
    fn ipv6_multicast_mac() {
        let a: core::net::Ipv6Addr = "ff02::1:ff00:1".parse().unwrap();
        assert_eq!(
            MacAddr::ipv6_multicast(&a),
            MacAddr([0x33, 0x33, 0xff, 0, 0, 1])
        );
    }
}
