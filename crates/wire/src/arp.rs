//! ARP for IPv4 over Ethernet (RFC 826), the only combination vfsr resolves.
//!
//! ```text
//!   0        2        4    5    6        8                14        18                24        28
//!   ┌────────┬────────┬────┬────┬────────┬─────────────────┬─────────┬─────────────────┬─────────┐
//!   │ htype  │ ptype  │hlen│plen│ oper   │ sender hw (MAC) │sender IP│ target hw (MAC) │target IP│
//!   │ 1      │ 0x0800 │ 6  │ 4  │ 1 / 2  │                 │         │                 │         │
//!   └────────┴────────┴────┴────┴────────┴─────────────────┴─────────┴─────────────────┴─────────┘
//! ```
//!
//! [`ArpPacket::new_checked`] accepts only hardware type 1 (Ethernet), protocol type 0x0800,
//! address lengths 6 and 4, so the fixed offsets above hold; anything else is
//! [`WireError::UnsupportedArpFormat`]. [`ArpRepr`] is the parsed message (request or reply)
//! and writes one back with [`ArpRepr::emit`]: the neighbor tables send requests and answer
//! requests for the router's own addresses with replies.

use core::net::Ipv4Addr;

use crate::ethernet::MacAddr;
use crate::field::{array_at, set_bytes, set_u16, set_u8, u16_at, u8_at};
use crate::WireError;

mod field {
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const SHA: usize = 8;
    pub const SPA: usize = 14;
    pub const THA: usize = 18;
    pub const TPA: usize = 24;
}

/// Length of an ARP message for IPv4 over Ethernet.
pub const PACKET_LEN: usize = 28;

/// Hardware type: Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;

/// ARP operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOp {
    /// Who has the target protocol address? (1)
    Request,
    /// The sender has it (2).
    Reply,
}

impl ArpOp {
    /// The wire value.
    pub const fn to_u16(self) -> u16 {
        match self {
            ArpOp::Request => 1,
            ArpOp::Reply => 2,
        }
    }

    /// The operation for a wire value, if it is request or reply.
    pub const fn from_u16(v: u16) -> Option<ArpOp> {
        match v {
            1 => Some(ArpOp::Request),
            2 => Some(ArpOp::Reply),
            _ => None,
        }
    }
}

/// A view of an ARP message for IPv4 over Ethernet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpPacket<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps `buffer` without checks (getters read zeros past its end).
    pub const fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wraps `buffer` after checking it holds 28 bytes of ARP for IPv4 over Ethernet. Bytes
    /// after the 28 (Ethernet padding) are ignored.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        if b.len() < PACKET_LEN {
            return Err(WireError::Truncated);
        }
        let p = ArpPacket { buffer };
        if p.htype() != HTYPE_ETHERNET
            || p.ptype() != crate::ethernet::ethertype::IPV4
            || p.hlen() != 6
            || p.plen() != 4
        {
            return Err(WireError::UnsupportedArpFormat);
        }
        Ok(p)
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Hardware type (1 = Ethernet).
    pub fn htype(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::HTYPE)
    }

    /// Protocol type (0x0800 = IPv4).
    pub fn ptype(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::PTYPE)
    }

    /// Hardware address length.
    pub fn hlen(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::HLEN)
    }

    /// Protocol address length.
    pub fn plen(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::PLEN)
    }

    /// Operation as on the wire (see [`ArpOp`]).
    pub fn op(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::OPER)
    }

    /// Sender hardware address.
    pub fn sender_hw(&self) -> MacAddr {
        MacAddr(array_at(self.buffer.as_ref(), field::SHA))
    }

    /// Sender protocol address.
    pub fn sender_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(array_at::<4>(self.buffer.as_ref(), field::SPA))
    }

    /// Target hardware address (zero in requests).
    pub fn target_hw(&self) -> MacAddr {
        MacAddr(array_at(self.buffer.as_ref(), field::THA))
    }

    /// Target protocol address.
    pub fn target_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(array_at::<4>(self.buffer.as_ref(), field::TPA))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Writes the fixed fields for IPv4 over Ethernet (types and lengths).
    pub fn set_ipv4_over_ethernet(&mut self) {
        let b = self.buffer.as_mut();
        set_u16(b, field::HTYPE, HTYPE_ETHERNET);
        set_u16(b, field::PTYPE, crate::ethernet::ethertype::IPV4);
        set_u8(b, field::HLEN, 6);
        set_u8(b, field::PLEN, 4);
    }

    /// Sets the operation.
    pub fn set_op(&mut self, op: u16) {
        set_u16(self.buffer.as_mut(), field::OPER, op);
    }

    /// Sets the sender hardware address.
    pub fn set_sender_hw(&mut self, mac: MacAddr) {
        set_bytes(self.buffer.as_mut(), field::SHA, &mac.0);
    }

    /// Sets the sender protocol address.
    pub fn set_sender_ip(&mut self, ip: Ipv4Addr) {
        set_bytes(self.buffer.as_mut(), field::SPA, &ip.octets());
    }

    /// Sets the target hardware address.
    pub fn set_target_hw(&mut self, mac: MacAddr) {
        set_bytes(self.buffer.as_mut(), field::THA, &mac.0);
    }

    /// Sets the target protocol address.
    pub fn set_target_ip(&mut self, ip: Ipv4Addr) {
        set_bytes(self.buffer.as_mut(), field::TPA, &ip.octets());
    }
}

/// A parsed ARP request or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Request or reply.
    pub op: ArpOp,
    /// Sender hardware address.
    pub sender_hw: MacAddr,
    /// Sender protocol address.
    pub sender_ip: Ipv4Addr,
    /// Target hardware address (zero in requests).
    pub target_hw: MacAddr,
    /// Target protocol address.
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    /// Reads a checked view; an operation other than request or reply is
    /// [`WireError::BadArpOperation`].
    pub fn parse<T: AsRef<[u8]>>(p: &ArpPacket<T>) -> Result<ArpRepr, WireError> {
        let op = ArpOp::from_u16(p.op()).ok_or(WireError::BadArpOperation)?;
        Ok(ArpRepr {
            op,
            sender_hw: p.sender_hw(),
            sender_ip: p.sender_ip(),
            target_hw: p.target_hw(),
            target_ip: p.target_ip(),
        })
    }

    /// A request from `sender_hw`/`sender_ip` for `target_ip`'s hardware address.
    pub fn request(sender_hw: MacAddr, sender_ip: Ipv4Addr, target_ip: Ipv4Addr) -> ArpRepr {
        ArpRepr {
            op: ArpOp::Request,
            sender_hw,
            sender_ip,
            target_hw: MacAddr([0; 6]),
            target_ip,
        }
    }

    /// The reply to this request saying that `our_hw` has the requested address.
    pub fn reply_to(&self, our_hw: MacAddr) -> ArpRepr {
        ArpRepr {
            op: ArpOp::Reply,
            sender_hw: our_hw,
            sender_ip: self.target_ip,
            target_hw: self.sender_hw,
            target_ip: self.sender_ip,
        }
    }

    /// Writes the 28-byte message at the start of `buf` and returns its length;
    /// [`WireError::BufferTooSmall`] if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let b = buf.get_mut(..PACKET_LEN).ok_or(WireError::BufferTooSmall)?;
        let mut p = ArpPacket::new_unchecked(b);
        p.set_ipv4_over_ethernet();
        p.set_op(self.op.to_u16());
        p.set_sender_hw(self.sender_hw);
        p.set_sender_ip(self.sender_ip);
        p.set_target_hw(self.target_hw);
        p.set_target_ip(self.target_ip);
        Ok(PACKET_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ARP part of a request "who has 192.168.1.1, tell 192.168.1.10" (after
    /// the 14-byte Ethernet header; 18 bytes of Ethernet padding follow).
    const ARP_REQUEST: [u8; 46] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0xc0,
        0xa8, 0x01, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x01, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00,
    ];

    #[test]
    fn golden_request() {
        let p = ArpPacket::new_checked(&ARP_REQUEST[..]).unwrap();
        assert_eq!(p.op(), 1);
        let r = ArpRepr::parse(&p).unwrap();
        assert_eq!(
            r,
            ArpRepr::request(
                MacAddr([2, 0, 0, 0, 0, 2]),
                Ipv4Addr::new(192, 168, 1, 10),
                Ipv4Addr::new(192, 168, 1, 1)
            )
        );
    }

    #[test]
    fn emit_request_is_the_golden_bytes() {
        let r = ArpRepr::parse(&ArpPacket::new_checked(&ARP_REQUEST[..]).unwrap()).unwrap();
        let mut out = [0u8; 28];
        assert_eq!(r.emit(&mut out), Ok(28));
        assert_eq!(out[..], ARP_REQUEST[..28]);
    }

    #[test]
    fn reply_round_trip() {
        let req = ArpRepr::parse(&ArpPacket::new_checked(&ARP_REQUEST[..]).unwrap()).unwrap();
        let ours = MacAddr([2, 0, 0, 0, 0, 1]);
        let reply = req.reply_to(ours);
        let mut out = [0xeeu8; 30];
        assert_eq!(reply.emit(&mut out), Ok(28));
        assert_eq!(out[28..], [0xee, 0xee]);
        assert_eq!(
            out[..28],
            [
                0, 1, 8, 0, 6, 4, 0, 2, 2, 0, 0, 0, 0, 1, 192, 168, 1, 1, 2, 0, 0, 0, 0, 2, 192,
                168, 1, 10
            ]
        );
        let back = ArpRepr::parse(&ArpPacket::new_checked(&out[..]).unwrap()).unwrap();
        assert_eq!(back, reply);
    }

    #[test]
    fn errors() {
        assert_eq!(
            ArpPacket::new_checked(&ARP_REQUEST[..27]),
            Err(WireError::Truncated)
        );
        for (off, v) in [(1, 6u8), (2, 0x86), (4, 8), (5, 16)] {
            let mut b = ARP_REQUEST;
            b[off] = v;
            assert_eq!(
                ArpPacket::new_checked(&b[..]),
                Err(WireError::UnsupportedArpFormat),
                "byte {off}"
            );
        }
        let mut b = ARP_REQUEST;
        b[7] = 3; // RARP request
        let p = ArpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(ArpRepr::parse(&p), Err(WireError::BadArpOperation));
        let r = ArpRepr::parse(&ArpPacket::new_checked(&ARP_REQUEST[..]).unwrap()).unwrap();
        assert_eq!(r.emit(&mut [0u8; 27]), Err(WireError::BufferTooSmall));
    }
}
