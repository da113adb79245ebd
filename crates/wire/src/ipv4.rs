//! IPv4 headers (RFC 791), checked as RFC 1812 section 5.2.2 asks of a router.
//!
//! ```text
//!    0                   1                   2                   3
//!    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//!   ┌───────┬───────┬───────────┬───┬───────────────────────────────┐
//!  0│Version│  IHL  │   DSCP    │ECN│         Total Length          │
//!   ├───────┴───────┴───────────┴───┼─┬─┬─┬─────────────────────────┤
//!  4│         Identification        │0│D│M│     Fragment Offset     │
//!   ├───────────────┬───────────────┼─┴─┴─┴─────────────────────────┤
//!  8│      TTL      │   Protocol    │        Header Checksum        │
//!   ├───────────────┴───────────────┴───────────────────────────────┤
//! 12│                        Source Address                         │
//!   ├───────────────────────────────────────────────────────────────┤
//! 16│                      Destination Address                      │
//!   ├───────────────────────────────────────────────────────────────┤
//! 20│              Options (IHL > 5: up to 40 bytes)                │
//!   └───────────────────────────────────────────────────────────────┘
//! ```
//!
//! [`Ipv4Packet::new_checked`] does the structural part of RFC 1812 5.2.2 and nothing else:
//! at least 20 bytes ([`WireError::Truncated`]), version 4 ([`WireError::BadVersion`]), IHL at
//! least 5 and the header inside the buffer ([`WireError::BadHeaderLength`]), total length at
//! least the header length and no more than the buffer ([`WireError::BadTotalLength`]; a
//! longer buffer is Ethernet padding, cut off by [`Ipv4Packet::payload`]). The header checksum
//! is a separate step, [`Ipv4Packet::verify_checksum`], so the input stage counts it under its
//! own name and a view can be built over a header still being written.
//!
//! ## The TTL decrement
//!
//! TTL and protocol share the 16-bit word at offset 8. Decrementing TTL changes that one word,
//! so [`Ipv4Packet::set_ttl_and_update_checksum`] patches the checksum with RFC 1624's
//! equation 3 instead of summing the header again:
//!
//! ```text
//!   m  = TTL  << 8 | protocol        (old word)
//!   m' = TTL' << 8 | protocol        (new word)
//!   HC' = ~(~HC + ~m + m')           (ones' complement addition)
//! ```
//!
//! The unit test `ttl_update_equals_recompute_for_every_ttl` checks it against a full
//! recompute for every pair of old and new TTL values.
//!
//! ## Source address sanity
//!
//! RFC 1812 5.3.7 says a router must not forward a packet whose source is "this network"
//! (0/8), loopback (127/8), limited broadcast, multicast (224/4) or class E (240/4).
//! [`check_source`] names which; the input stage drops and counts.

use core::net::Ipv4Addr;

use crate::checksum;
use crate::field::{array_at, set_bytes, set_u16, set_u8, slice, slice_mut, u16_at, u8_at};
use crate::WireError;

mod field {
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

/// Length of a header without options.
pub const MIN_HEADER_LEN: usize = 20;
/// Length of a header with the most options (IHL 15).
pub const MAX_HEADER_LEN: usize = 60;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 packet (header and payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps `buffer` without checks (getters read zeros past its end).
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps `buffer` after the structural checks of RFC 1812 5.2.2 (see the module doc).
    /// The checksum is not verified here: call [`Ipv4Packet::verify_checksum`].
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let len = buffer.as_ref().len();
        if len < MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let p = Ipv4Packet { buffer };
        if p.version() != 4 {
            return Err(WireError::BadVersion);
        }
        let hl = p.header_len();
        if hl < MIN_HEADER_LEN || hl > len {
            return Err(WireError::BadHeaderLength);
        }
        let tl = usize::from(p.total_len());
        if tl < hl || tl > len {
            return Err(WireError::BadTotalLength);
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

    /// Version (4).
    #[inline]
    pub fn version(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::VER_IHL) >> 4
    }

    /// Header length in bytes (IHL × 4): 20..=60 for a checked view.
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(u8_at(self.buffer.as_ref(), field::VER_IHL) & 0x0f) * 4
    }

    /// Differentiated services code point (RFC 2474).
    #[inline]
    pub fn dscp(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::DSCP_ECN) >> 2
    }

    /// Explicit congestion notification (RFC 3168).
    #[inline]
    pub fn ecn(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::DSCP_ECN) & 0x03
    }

    /// Total length (header and payload) in bytes.
    #[inline]
    pub fn total_len(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::IDENT)
    }

    /// Don't Fragment.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        u16_at(self.buffer.as_ref(), field::FLG_OFF) & FLAG_DF != 0
    }

    /// More Fragments.
    #[inline]
    pub fn more_frags(&self) -> bool {
        u16_at(self.buffer.as_ref(), field::FLG_OFF) & FLAG_MF != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (u16_at(self.buffer.as_ref(), field::FLG_OFF) & OFFSET_MASK) << 3
    }

    /// Part of a fragmented datagram (MF set or a non-zero offset).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        u16_at(self.buffer.as_ref(), field::FLG_OFF) & (FLAG_MF | OFFSET_MASK) != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::TTL)
    }

    /// Protocol of the payload (see [`crate::ip_proto`]).
    #[inline]
    pub fn protocol(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::PROTOCOL)
    }

    /// Header checksum as stored.
    #[inline]
    pub fn checksum(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(array_at::<4>(self.buffer.as_ref(), field::SRC))
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(array_at::<4>(self.buffer.as_ref(), field::DST))
    }

    /// The header, options included.
    #[inline]
    pub fn header(&self) -> &[u8] {
        slice(self.buffer.as_ref(), 0, self.header_len())
    }

    /// The options (bytes 20..header length; empty without options). Not interpreted here:
    /// a router forwards them untouched, and a packet with options takes the slow path.
    #[inline]
    pub fn options(&self) -> &[u8] {
        slice(self.buffer.as_ref(), MIN_HEADER_LEN, self.header_len())
    }

    /// The payload: header length..total length (Ethernet padding cut off).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        slice(
            self.buffer.as_ref(),
            self.header_len(),
            usize::from(self.total_len()),
        )
    }

    /// True when the header (options included) sums to `0xffff` (RFC 1071).
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(self.header())
    }

    /// [`Ipv4Packet::verify_checksum`] as a `Result`: [`WireError::BadChecksum`] if it fails.
    #[inline]
    pub fn check_checksum(&self) -> Result<(), WireError> {
        if self.verify_checksum() {
            Ok(())
        } else {
            Err(WireError::BadChecksum)
        }
    }

    /// The checksum the header should carry: the header summed with its checksum field taken
    /// as zero.
    pub fn compute_checksum(&self) -> u16 {
        let h = self.header();
        let stored = self.checksum();
        // Summing with the stored value and taking it back out equals summing with a zero
        // field; no copy of the header is needed.
        !checksum::add(checksum::ones_sum(h), !stored)
    }

    /// The source address checked as RFC 1812 5.3.7 asks (see [`check_source`]).
    #[inline]
    pub fn check_source(&self) -> Result<(), MartianSource> {
        check_source(self.src_addr())
    }
}

impl<'a> Ipv4Packet<&'a [u8]> {
    /// The payload, borrowed for as long as the bytes (not just the view).
    #[inline]
    pub fn into_payload(self) -> &'a [u8] {
        slice(
            self.buffer,
            self.header_len(),
            usize::from(self.total_len()),
        )
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets version 4 and the header length in bytes (a multiple of 4, 20..=60).
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        let ihl = ((header_len / 4) & 0x0f) as u8;
        set_u8(self.buffer.as_mut(), field::VER_IHL, 0x40 | ihl);
    }

    /// Sets DSCP and ECN.
    pub fn set_dscp_ecn(&mut self, dscp: u8, ecn: u8) {
        set_u8(
            self.buffer.as_mut(),
            field::DSCP_ECN,
            (dscp << 2) | (ecn & 3),
        );
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, len: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, len);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, ident: u16) {
        set_u16(self.buffer.as_mut(), field::IDENT, ident);
    }

    /// Sets DF, MF and the fragment offset (in bytes; a multiple of 8, below 65536).
    pub fn set_frag(&mut self, dont_frag: bool, more_frags: bool, offset_bytes: u16) {
        let mut v = (offset_bytes >> 3) & OFFSET_MASK;
        if dont_frag {
            v |= FLAG_DF;
        }
        if more_frags {
            v |= FLAG_MF;
        }
        set_u16(self.buffer.as_mut(), field::FLG_OFF, v);
    }

    /// Sets the TTL without touching the checksum.
    pub fn set_ttl(&mut self, ttl: u8) {
        set_u8(self.buffer.as_mut(), field::TTL, ttl);
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, protocol: u8) {
        set_u8(self.buffer.as_mut(), field::PROTOCOL, protocol);
    }

    /// Sets the stored checksum.
    pub fn set_checksum(&mut self, checksum: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, checksum);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        set_bytes(self.buffer.as_mut(), field::SRC, &addr.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        set_bytes(self.buffer.as_mut(), field::DST, &addr.octets());
    }

    /// Computes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.header());
        self.set_checksum(c);
    }

    /// Sets the TTL and patches the checksum for the change (RFC 1624 equation 3; see the
    /// module doc). The forwarding path's decrement: `p.set_ttl_and_update_checksum(p.ttl() - 1)`
    /// after checking `ttl() > 1`.
    #[inline]
    pub fn set_ttl_and_update_checksum(&mut self, ttl: u8) {
        let b = self.buffer.as_mut();
        let old = u16_at(b, field::TTL);
        let new = (u16::from(ttl) << 8) | (old & 0x00ff);
        let hc = u16_at(b, field::CHECKSUM);
        set_u8(b, field::TTL, ttl);
        set_u16(b, field::CHECKSUM, checksum::update_word(hc, old, new));
    }

    /// The forwarding path's decrement: TTL minus one and the checksum patched with the
    /// constant [`checksum::ttl_decremented`] takes from equation 3. The caller has checked
    /// that the TTL is above 1 (at 0 the TTL wraps to 255 and the checksum is wrong).
    #[inline]
    pub fn decrement_ttl(&mut self) {
        let b = self.buffer.as_mut();
        let ttl = u8_at(b, field::TTL).wrapping_sub(1);
        let hc = u16_at(b, field::CHECKSUM);
        set_u8(b, field::TTL, ttl);
        set_u16(b, field::CHECKSUM, checksum::ttl_decremented(hc));
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.header_len(), usize::from(self.total_len()));
        slice_mut(self.buffer.as_mut(), start, end)
    }
}

/// Why a source address must not be forwarded (RFC 1812 5.3.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MartianSource {
    /// 0.0.0.0/8, "this host on this network".
    ThisNetwork,
    /// 127.0.0.0/8.
    Loopback,
    /// 255.255.255.255.
    Broadcast,
    /// 224.0.0.0/4 (class D).
    Multicast,
    /// 240.0.0.0/4 except the limited broadcast (class E).
    ClassE,
}

/// 0.0.0.0/8.
#[inline]
pub fn is_this_network(a: Ipv4Addr) -> bool {
    a.octets()[0] == 0
}

/// 127.0.0.0/8.
#[inline]
pub fn is_loopback(a: Ipv4Addr) -> bool {
    a.octets()[0] == 127
}

/// 255.255.255.255.
#[inline]
pub fn is_broadcast(a: Ipv4Addr) -> bool {
    a == Ipv4Addr::BROADCAST
}

/// 224.0.0.0/4.
#[inline]
pub fn is_multicast(a: Ipv4Addr) -> bool {
    a.octets()[0] & 0xf0 == 0xe0
}

/// 240.0.0.0/4, the limited broadcast included.
#[inline]
pub fn is_class_e(a: Ipv4Addr) -> bool {
    a.octets()[0] & 0xf0 == 0xf0
}

/// Checks a source address: `Ok` if a router may forward a packet from it, else which rule of
/// RFC 1812 5.3.7 it breaks.
#[inline]
pub fn check_source(a: Ipv4Addr) -> Result<(), MartianSource> {
    let first = a.octets()[0];
    if first == 0 {
        Err(MartianSource::ThisNetwork)
    } else if first == 127 {
        Err(MartianSource::Loopback)
    } else if first < 224 {
        Ok(())
    } else if first < 240 {
        Err(MartianSource::Multicast)
    } else if is_broadcast(a) {
        Err(MartianSource::Broadcast)
    } else {
        Err(MartianSource::ClassE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip_proto;

    /// Ethernet + IPv4 + ICMP echo request 192.168.1.10 -> 192.168.1.1 (DF, TTL 64).
    const PING: [u8; 58] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x2c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0x9b, 0x2f, 0xc0, 0xa8, 0x01, 0x0a,
        0xc0, 0xa8, 0x01, 0x01, 0x08, 0x00, 0x2d, 0x0a, 0x12, 0x34, 0x00, 0x01, 0x10, 0x11, 0x12,
        0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
    ];

    /// Ethernet + IPv4 with a Router Alert option (IHL 6, TTL 1, DSCP CS6) + IGMPv3 report
    /// to 224.0.0.22, laid out as a Linux host sends it when joining 239.1.2.3.
    const IGMP_RA: [u8; 54] = [
        0x01, 0x00, 0x5e, 0x00, 0x00, 0x16, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00, 0x46,
        0xc0, 0x00, 0x28, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0x42, 0x47, 0xc0, 0xa8, 0x01, 0x0a,
        0xe0, 0x00, 0x00, 0x16, 0x94, 0x04, 0x00, 0x00, 0x22, 0x00, 0xe8, 0xf9, 0x00, 0x00, 0x00,
        0x01, 0x04, 0x00, 0x00, 0x00, 0xef, 0x01, 0x02, 0x03,
    ];

    /// IPv4 UDP, a later fragment (MF set, offset 100 × 8 = 800 bytes).
    const UDP_FRAG_LATER: [u8; 28] = [
        0x45, 0x00, 0x00, 0x1c, 0x00, 0x07, 0x20, 0x64, 0x40, 0x11, 0x46, 0x64, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x00, 0x00, 0x02, 0x79, 0x79, 0x79, 0x79, 0x79, 0x79, 0x79, 0x79,
    ];

    #[test]
    fn golden_ping() {
        let p = Ipv4Packet::new_checked(&PING[14..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!((p.dscp(), p.ecn()), (0, 0));
        assert_eq!(p.total_len(), 44);
        assert_eq!(p.ident(), 0x1c46);
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), ip_proto::ICMP);
        assert_eq!(p.checksum(), 0x9b2f);
        assert!(p.verify_checksum());
        assert_eq!(p.compute_checksum(), 0x9b2f);
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 1, 10));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 1, 1));
        assert!(p.options().is_empty());
        assert_eq!(p.payload(), &PING[34..]);
        assert_eq!(p.check_source(), Ok(()));
    }

    #[test]
    fn golden_options() {
        let p = Ipv4Packet::new_checked(&IGMP_RA[14..]).unwrap();
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.options(), &[0x94, 0x04, 0x00, 0x00]); // Router Alert (RFC 2113)
        assert_eq!(p.dscp(), 48);
        assert_eq!(p.ttl(), 1);
        assert_eq!(p.protocol(), ip_proto::IGMP);
        assert!(p.verify_checksum());
        assert_eq!(p.dst_addr(), Ipv4Addr::new(224, 0, 0, 22));
        assert!(is_multicast(p.dst_addr()));
        assert_eq!(p.payload().len(), 16);
        assert_eq!(p.payload()[0], 0x22); // IGMPv3 membership report
    }

    #[test]
    fn golden_later_fragment() {
        let p = Ipv4Packet::new_checked(&UDP_FRAG_LATER[..]).unwrap();
        assert!(p.more_frags() && !p.dont_frag() && p.is_fragment());
        assert_eq!(p.frag_offset(), 800);
        assert!(p.verify_checksum());
    }

    #[test]
    fn padding_after_total_length_is_not_payload() {
        let mut b = PING[14..].to_vec();
        b.extend_from_slice(&[0; 6]);
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload(), &PING[34..]);
    }

    #[test]
    fn errors() {
        let ip = &PING[14..];
        assert_eq!(
            Ipv4Packet::new_checked(&ip[..19]),
            Err(WireError::Truncated)
        );
        let mut b = ip.to_vec();
        b[0] = 0x65;
        assert_eq!(Ipv4Packet::new_checked(&b[..]), Err(WireError::BadVersion));
        for ihl in 0..5 {
            b[0] = 0x40 | ihl;
            assert_eq!(
                Ipv4Packet::new_checked(&b[..]),
                Err(WireError::BadHeaderLength)
            );
        }
        // IHL 15 (60 bytes) in a 44-byte buffer.
        b[0] = 0x4f;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]),
            Err(WireError::BadHeaderLength)
        );
        b[0] = 0x45;
        b[3] = 19; // total length below the header
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]),
            Err(WireError::BadTotalLength)
        );
        b[3] = 45; // one byte beyond the buffer
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]),
            Err(WireError::BadTotalLength)
        );
        b[3] = 44;
        b[11] ^= 1;
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert!(!p.verify_checksum());
        assert_eq!(p.check_checksum(), Err(WireError::BadChecksum));
    }

    #[test]
    fn sixty_byte_header() {
        let mut b = [0u8; 64];
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.set_version_and_header_len(60);
        p.set_total_len(64);
        p.set_ttl(9);
        p.set_protocol(ip_proto::UDP);
        p.set_src_addr(Ipv4Addr::new(10, 1, 2, 3));
        p.set_dst_addr(Ipv4Addr::new(10, 4, 5, 6));
        p.set_frag(true, false, 0);
        p.set_ident(77);
        p.set_dscp_ecn(46, 1);
        // Options: forty NOPs.
        b[20..60].fill(1);
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(p.header_len(), 60);
        assert_eq!(p.options().len(), 40);
        assert_eq!(p.payload().len(), 4);
        assert_eq!((p.dscp(), p.ecn(), p.ident()), (46, 1, 77));
        p.payload_mut().fill(7);
        assert_eq!(b[60..], [7; 4]);
    }

    #[test]
    fn set_frag_round_trip() {
        let mut b = PING[14..].to_vec();
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        p.set_frag(false, true, 1480);
        assert!(!p.dont_frag() && p.more_frags());
        assert_eq!(p.frag_offset(), 1480);
        p.set_frag(false, false, 65528);
        assert_eq!(p.frag_offset(), 65528);
        assert!(p.is_fragment());
    }

    #[test]
    fn ttl_decrement_golden() {
        let mut b = PING[14..].to_vec();
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        p.set_ttl_and_update_checksum(63);
        assert_eq!(p.ttl(), 63);
        assert_eq!(p.checksum(), 0x9c2f);
        assert!(p.verify_checksum());
        assert_eq!(b[8..12], [63, 1, 0x9c, 0x2f]);
    }

    #[test]
    fn decrement_ttl_equals_recompute() {
        for protocol in [0u8, 1, 6, 17, 0xff] {
            for ident in 0..=u16::MAX {
                let mut b = PING[14..].to_vec();
                let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
                p.set_protocol(protocol);
                p.set_ident(ident);
                let ttl = (ident % 255) as u8 + 1;
                p.set_ttl(ttl);
                p.fill_checksum();
                p.decrement_ttl();
                let incremental = p.checksum();
                assert_eq!(p.ttl(), ttl - 1);
                p.fill_checksum();
                assert_eq!(
                    incremental,
                    p.checksum(),
                    "protocol {protocol} ident {ident:#x}"
                );
            }
        }
    }

    #[test]
    fn ttl_update_equals_recompute_for_every_ttl() {
        // A header with options and varied fields per protocol, so the checksum takes many
        // values, among them the ones near 0x0000 and 0xffff.
        for protocol in [0u8, 1, 6, 17, 0xff] {
            for ident in [0u16, 0x1234, 0xffff] {
                let mut b = IGMP_RA[14..].to_vec();
                let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
                p.set_protocol(protocol);
                p.set_ident(ident);
                for old in 0..=255u8 {
                    for new in 0..=255u8 {
                        p.set_ttl(old);
                        p.fill_checksum();
                        p.set_ttl_and_update_checksum(new);
                        let incremental = p.checksum();
                        assert_eq!(p.ttl(), new);
                        p.fill_checksum();
                        assert_eq!(
                            incremental,
                            p.checksum(),
                            "protocol {protocol} ident {ident:#x} ttl {old} -> {new}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn source_sanity() {
        let ok = |s: &str| check_source(s.parse().unwrap());
        assert_eq!(ok("192.0.2.1"), Ok(()));
        assert_eq!(ok("223.255.255.255"), Ok(()));
        assert_eq!(ok("0.0.0.0"), Err(MartianSource::ThisNetwork));
        assert_eq!(ok("0.1.2.3"), Err(MartianSource::ThisNetwork));
        assert_eq!(ok("127.0.0.1"), Err(MartianSource::Loopback));
        assert_eq!(ok("224.0.0.1"), Err(MartianSource::Multicast));
        assert_eq!(ok("239.255.255.255"), Err(MartianSource::Multicast));
        assert_eq!(ok("240.0.0.1"), Err(MartianSource::ClassE));
        assert_eq!(ok("255.255.255.254"), Err(MartianSource::ClassE));
        assert_eq!(ok("255.255.255.255"), Err(MartianSource::Broadcast));
        let a = Ipv4Addr::new(250, 0, 0, 1);
        assert!(is_class_e(a) && !is_multicast(a) && !is_loopback(a) && !is_this_network(a));
        assert!(is_class_e(Ipv4Addr::BROADCAST) && is_broadcast(Ipv4Addr::BROADCAST));
    }
}
