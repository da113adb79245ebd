//! ICMP for IPv4 (RFC 792), the messages a router reads and sends (RFC 1812 4.3).
//!
//! ```text
//!   0        1        2                 4                                  8
//!   ┌────────┬────────┬─────────────────┬──────────────────────────────────┬──────────────
//!   │ type   │ code   │ checksum        │ rest of header                   │ data
//!   └────────┴────────┴─────────────────┴──────────────────────────────────┴──────────────
//!   echo request (8) / reply (0):     identifier (2) │ sequence (2)        │ echo data
//!   destination unreachable (3):      unused (2)     │ next-hop MTU (2)    │ quoted datagram
//!                                     (MTU only for code 4, RFC 1191)
//!   time exceeded (11):               unused (4)                           │ quoted datagram
//!   parameter problem (12):           pointer (1) │ unused (3)             │ quoted datagram
//! ```
//!
//! The view covers the whole ICMP message (the IPv4 payload); the checksum is the RFC 1071
//! checksum of all of it. [`Icmpv4Packet::new_checked`] checks the 8-byte header is there;
//! the checksum is a separate step ([`Icmpv4Packet::verify_checksum`]). [`Icmpv4Repr`] is the
//! parsed message; its [`Icmpv4Repr::emit`] writes the errors the pipeline sends (Time
//! Exceeded, Destination Unreachable with the next-hop MTU for Fragmentation Needed), with
//! the quoted bytes the caller chose (RFC 1812 4.3.2.3: as much as fits in 576 bytes).

use crate::checksum;
use crate::field::{set_bytes, set_u16, set_u32, set_u8, slice, slice_mut, u16_at, u32_at, u8_at};
use crate::WireError;

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const REST: usize = 4;
    pub const ECHO_IDENT: usize = 4;
    pub const ECHO_SEQ: usize = 6;
    pub const MTU: usize = 6;
    pub const POINTER: usize = 4;
}

/// Length of the ICMP header (type, code, checksum, rest of header).
pub const HEADER_LEN: usize = 8;

/// Message types.
pub mod msg_type {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: u8 = 3;
    /// Source quench (deprecated, RFC 6633).
    pub const SOURCE_QUENCH: u8 = 4;
    /// Redirect.
    pub const REDIRECT: u8 = 5;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 12;
}

/// Destination Unreachable codes (RFC 792, RFC 1812 5.2.7.1).
pub mod unreachable {
    /// Network unreachable (no route).
    pub const NET: u8 = 0;
    /// Host unreachable (neighbor resolution failed).
    pub const HOST: u8 = 1;
    /// Protocol unreachable.
    pub const PROTOCOL: u8 = 2;
    /// Port unreachable.
    pub const PORT: u8 = 3;
    /// Fragmentation needed and DF set (carries the next-hop MTU).
    pub const FRAG_NEEDED: u8 = 4;
    /// Communication administratively prohibited (reject routes).
    pub const ADMIN_PROHIBITED: u8 = 13;
}

/// Time Exceeded codes.
pub mod time_exceeded {
    /// TTL exceeded in transit.
    pub const TTL: u8 = 0;
    /// Fragment reassembly time exceeded.
    pub const REASSEMBLY: u8 = 1;
}

/// True for the error message types (RFC 1812 4.3.2.7: never sent in answer to one of these).
pub fn is_error(msg_type: u8) -> bool {
    matches!(
        msg_type,
        msg_type::DEST_UNREACHABLE
            | msg_type::SOURCE_QUENCH
            | msg_type::REDIRECT
            | msg_type::TIME_EXCEEDED
            | msg_type::PARAM_PROBLEM
    )
}

/// A view of an ICMPv4 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv4Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wraps `buffer` without checks (getters read zeros past its end).
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv4Packet { buffer }
    }

    /// Wraps `buffer` after checking it holds the 8-byte header.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Icmpv4Packet { buffer })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type (see [`msg_type`]).
    #[inline]
    pub fn msg_type(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::TYPE)
    }

    /// Code.
    #[inline]
    pub fn code(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::CODE)
    }

    /// Checksum as stored.
    #[inline]
    pub fn checksum(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The four type-specific bytes after the checksum.
    #[inline]
    pub fn rest_of_header(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::REST)
    }

    /// Echo identifier.
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    /// Echo sequence number.
    #[inline]
    pub fn echo_seq(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::ECHO_SEQ)
    }

    /// Next-hop MTU of a Fragmentation Needed message (RFC 1191 4; 0 from old routers).
    #[inline]
    pub fn next_hop_mtu(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::MTU)
    }

    /// Pointer of a Parameter Problem message.
    #[inline]
    pub fn pointer(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::POINTER)
    }

    /// True for an error message type.
    #[inline]
    pub fn is_error(&self) -> bool {
        is_error(self.msg_type())
    }

    /// The data after the header: echo data or the quoted datagram.
    #[inline]
    pub fn data(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        slice(b, HEADER_LEN, b.len())
    }

    /// True when the message sums to `0xffff`.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(self.buffer.as_ref())
    }

    /// [`Icmpv4Packet::verify_checksum`] as a `Result`.
    pub fn check_checksum(&self) -> Result<(), WireError> {
        if self.verify_checksum() {
            Ok(())
        } else {
            Err(WireError::BadChecksum)
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Sets the message type.
    pub fn set_msg_type(&mut self, t: u8) {
        set_u8(self.buffer.as_mut(), field::TYPE, t);
    }

    /// Sets the code.
    pub fn set_code(&mut self, code: u8) {
        set_u8(self.buffer.as_mut(), field::CODE, code);
    }

    /// Sets the stored checksum.
    pub fn set_checksum(&mut self, c: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    /// Sets the four type-specific bytes.
    pub fn set_rest_of_header(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::REST, v);
    }

    /// Sets the echo identifier.
    pub fn set_echo_ident(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::ECHO_IDENT, v);
    }

    /// Sets the echo sequence number.
    pub fn set_echo_seq(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::ECHO_SEQ, v);
    }

    /// Sets the next-hop MTU (Fragmentation Needed).
    pub fn set_next_hop_mtu(&mut self, mtu: u16) {
        set_u16(self.buffer.as_mut(), field::MTU, mtu);
    }

    /// Sets the pointer (Parameter Problem).
    pub fn set_pointer(&mut self, p: u8) {
        set_u8(self.buffer.as_mut(), field::POINTER, p);
    }

    /// The data after the header, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let len = b.len();
        slice_mut(b, HEADER_LEN, len)
    }

    /// Computes and stores the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// A parsed ICMPv4 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
    /// Echo request.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq: u16,
        /// Echo data.
        data: &'a [u8],
    },
    /// Echo reply.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq: u16,
        /// Echo data.
        data: &'a [u8],
    },
    /// Destination unreachable (see [`mod@unreachable`]).
    DestUnreachable {
        /// Code.
        code: u8,
        /// Next-hop MTU (code 4), else 0.
        next_hop_mtu: u16,
        /// The quoted datagram: its IP header and at least 8 bytes of its payload.
        quoted: &'a [u8],
    },
    /// Time exceeded (see [`time_exceeded`]).
    TimeExceeded {
        /// Code.
        code: u8,
        /// The quoted datagram.
        quoted: &'a [u8],
    },
    /// Parameter problem.
    ParamProblem {
        /// Code.
        code: u8,
        /// Offset of the octet in error.
        pointer: u8,
        /// The quoted datagram.
        quoted: &'a [u8],
    },
    /// Any other message, left uninterpreted.
    Other {
        /// Type.
        msg_type: u8,
        /// Code.
        code: u8,
        /// Rest of header.
        rest: u32,
        /// Data after the header.
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Reads a checked view over borrowed bytes (the checksum is not verified here; the
    /// data borrows from the same bytes).
    pub fn parse(p: &Icmpv4Packet<&'a [u8]>) -> Icmpv4Repr<'a> {
        let b: &'a [u8] = p.buffer;
        let data = slice(b, HEADER_LEN, b.len());
        match p.msg_type() {
            msg_type::ECHO_REQUEST => Icmpv4Repr::EchoRequest {
                ident: p.echo_ident(),
                seq: p.echo_seq(),
                data,
            },
            msg_type::ECHO_REPLY => Icmpv4Repr::EchoReply {
                ident: p.echo_ident(),
                seq: p.echo_seq(),
                data,
            },
            msg_type::DEST_UNREACHABLE => Icmpv4Repr::DestUnreachable {
                code: p.code(),
                next_hop_mtu: if p.code() == unreachable::FRAG_NEEDED {
                    p.next_hop_mtu()
                } else {
                    0
                },
                quoted: data,
            },
            msg_type::TIME_EXCEEDED => Icmpv4Repr::TimeExceeded {
                code: p.code(),
                quoted: data,
            },
            msg_type::PARAM_PROBLEM => Icmpv4Repr::ParamProblem {
                code: p.code(),
                pointer: p.pointer(),
                quoted: data,
            },
            t => Icmpv4Repr::Other {
                msg_type: t,
                code: p.code(),
                rest: p.rest_of_header(),
                data,
            },
        }
    }

    /// Type, code, rest of header and data of this message.
    fn parts(&self) -> (u8, u8, u32, &'a [u8]) {
        match *self {
            Icmpv4Repr::EchoRequest { ident, seq, data } => (
                msg_type::ECHO_REQUEST,
                0,
                (u32::from(ident) << 16) | u32::from(seq),
                data,
            ),
            Icmpv4Repr::EchoReply { ident, seq, data } => (
                msg_type::ECHO_REPLY,
                0,
                (u32::from(ident) << 16) | u32::from(seq),
                data,
            ),
            Icmpv4Repr::DestUnreachable {
                code,
                next_hop_mtu,
                quoted,
            } => (
                msg_type::DEST_UNREACHABLE,
                code,
                u32::from(next_hop_mtu),
                quoted,
            ),
            Icmpv4Repr::TimeExceeded { code, quoted } => (msg_type::TIME_EXCEEDED, code, 0, quoted),
            Icmpv4Repr::ParamProblem {
                code,
                pointer,
                quoted,
            } => (
                msg_type::PARAM_PROBLEM,
                code,
                u32::from(pointer) << 24,
                quoted,
            ),
            Icmpv4Repr::Other {
                msg_type,
                code,
                rest,
                data,
            } => (msg_type, code, rest, data),
        }
    }

    /// Length of the emitted message.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.parts().3.len()
    }

    /// Writes the message with its checksum at the start of `buf` and returns its length;
    /// [`WireError::BufferTooSmall`] if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let (t, code, rest, data) = self.parts();
        let len = HEADER_LEN + data.len();
        let b = buf.get_mut(..len).ok_or(WireError::BufferTooSmall)?;
        let mut p = Icmpv4Packet::new_unchecked(b);
        p.set_msg_type(t);
        p.set_code(code);
        p.set_rest_of_header(rest);
        set_bytes(p.data_mut(), 0, data);
        p.fill_checksum();
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::Ipv4Packet;

    /// IPv4 + ICMP echo request, id 0x1234, seq 1, 16 data bytes.
    const PING: [u8; 44] = [
        0x45, 0x00, 0x00, 0x2c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0x9b, 0x2f, 0xc0, 0xa8, 0x01,
        0x0a, 0xc0, 0xa8, 0x01, 0x01, 0x08, 0x00, 0x2d, 0x0a, 0x12, 0x34, 0x00, 0x01, 0x10, 0x11,
        0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
    ];

    /// IPv4 + ICMP Time Exceeded (TTL) from 192.0.2.254, quoting the ping's IP header and
    /// the first 8 bytes of its payload.
    const TIME_EXCEEDED: [u8; 56] = [
        0x45, 0x00, 0x00, 0x38, 0x00, 0x00, 0x00, 0x00, 0xff, 0x01, 0x37, 0x14, 0xc0, 0x00, 0x02,
        0xfe, 0xc0, 0xa8, 0x01, 0x0a, 0x0b, 0x00, 0xad, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00,
        0x00, 0x2c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0x9b, 0x2f, 0xc0, 0xa8, 0x01, 0x0a, 0xc0,
        0xa8, 0x01, 0x01, 0x08, 0x00, 0x2d, 0x0a, 0x12, 0x34, 0x00, 0x01,
    ];

    /// IPv4 + ICMP Fragmentation Needed, next-hop MTU 1400, same quote.
    const FRAG_NEEDED: [u8; 56] = [
        0x45, 0x00, 0x00, 0x38, 0x00, 0x00, 0x00, 0x00, 0xff, 0x01, 0x37, 0x14, 0xc0, 0x00, 0x02,
        0xfe, 0xc0, 0xa8, 0x01, 0x0a, 0x03, 0x04, 0xb0, 0x44, 0x00, 0x00, 0x05, 0x78, 0x45, 0x00,
        0x00, 0x2c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0x9b, 0x2f, 0xc0, 0xa8, 0x01, 0x0a, 0xc0,
        0xa8, 0x01, 0x01, 0x08, 0x00, 0x2d, 0x0a, 0x12, 0x34, 0x00, 0x01,
    ];

    fn icmp_of(ip: &[u8]) -> &[u8] {
        Ipv4Packet::new_checked(ip).unwrap().into_payload()
    }

    #[test]
    fn golden_echo_request() {
        let m = icmp_of(&PING);
        let p = Icmpv4Packet::new_checked(m).unwrap();
        assert_eq!((p.msg_type(), p.code()), (msg_type::ECHO_REQUEST, 0));
        assert_eq!(p.checksum(), 0x2d0a);
        assert!(p.verify_checksum());
        assert!(!p.is_error());
        assert_eq!((p.echo_ident(), p.echo_seq()), (0x1234, 1));
        assert_eq!(
            Icmpv4Repr::parse(&p),
            Icmpv4Repr::EchoRequest {
                ident: 0x1234,
                seq: 1,
                data: &PING[28..]
            }
        );
    }

    #[test]
    fn golden_time_exceeded_and_emit() {
        let m = icmp_of(&TIME_EXCEEDED);
        let p = Icmpv4Packet::new_checked(m).unwrap();
        assert!(p.verify_checksum() && p.is_error());
        let r = Icmpv4Repr::parse(&p);
        assert_eq!(
            r,
            Icmpv4Repr::TimeExceeded {
                code: time_exceeded::TTL,
                quoted: &PING[..28]
            }
        );
        // Building the same error from the original packet gives the same bytes.
        let built = Icmpv4Repr::TimeExceeded {
            code: time_exceeded::TTL,
            quoted: &PING[..28],
        };
        let mut out = [0u8; 64];
        let n = built.emit(&mut out).unwrap();
        assert_eq!(n, built.buffer_len());
        assert_eq!(out[..n], *m);
    }

    #[test]
    fn golden_frag_needed_carries_the_mtu() {
        let m = icmp_of(&FRAG_NEEDED);
        let p = Icmpv4Packet::new_checked(m).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.next_hop_mtu(), 1400);
        let r = Icmpv4Repr::parse(&p);
        assert_eq!(
            r,
            Icmpv4Repr::DestUnreachable {
                code: unreachable::FRAG_NEEDED,
                next_hop_mtu: 1400,
                quoted: &PING[..28]
            }
        );
        let mut out = [0u8; 36];
        assert_eq!(r.emit(&mut out), Ok(36));
        assert_eq!(out[..], *m);
    }

    #[test]
    fn echo_reply_and_param_problem_round_trip() {
        let reply = Icmpv4Repr::EchoReply {
            ident: 7,
            seq: 9,
            data: b"abc",
        };
        let pp = Icmpv4Repr::ParamProblem {
            code: 0,
            pointer: 20,
            quoted: &PING[..28],
        };
        let other = Icmpv4Repr::Other {
            msg_type: 13,
            code: 0,
            rest: 0xdead_beef,
            data: &[1, 2],
        };
        for r in [reply, pp, other] {
            let mut out = [0u8; 64];
            let n = r.emit(&mut out).unwrap();
            let p = Icmpv4Packet::new_checked(&out[..n]).unwrap();
            assert!(p.verify_checksum());
            assert_eq!(Icmpv4Repr::parse(&p), r);
        }
    }

    #[test]
    fn errors() {
        let m = icmp_of(&PING);
        assert_eq!(
            Icmpv4Packet::new_checked(&m[..7]),
            Err(WireError::Truncated)
        );
        let mut b = m.to_vec();
        b[9] ^= 0x40;
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.check_checksum(), Err(WireError::BadChecksum));
        let r = Icmpv4Repr::parse(&p);
        assert_eq!(r.emit(&mut [0u8; 23]), Err(WireError::BufferTooSmall));
    }

    #[test]
    fn error_types() {
        for t in 0..=255u8 {
            assert_eq!(is_error(t), [3, 4, 5, 11, 12].contains(&t), "type {t}");
        }
    }
}
