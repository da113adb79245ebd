//! ICMPv6 (RFC 4443) and the Neighbor Discovery messages a router resolves with (RFC 4861).
//!
//! ```text
//!   0        1        2                 4                                  8
//!   ┌────────┬────────┬─────────────────┬──────────────────────────────────┬──────────────
//!   │ type   │ code   │ checksum        │ message body (4 bytes)           │ data
//!   └────────┴────────┴─────────────────┴──────────────────────────────────┴──────────────
//!   destination unreachable (1), time exceeded (3): unused │ quoted packet
//!   packet too big (2):                             MTU (4) │ quoted packet
//!   parameter problem (4):                      pointer (4) │ quoted packet
//!   echo request (128) / reply (129):      ident (2) │ seq (2) │ echo data
//!
//!   neighbor solicitation (135):   reserved (4)       │ target address (16) │ options
//!   neighbor advertisement (136):  R S O + reserved   │ target address (16) │ options
//!
//!   option (RFC 4861 4.6):  type (1) │ length in units of 8 bytes (1) │ value
//!     1 source link-layer address, 2 target link-layer address: 6 bytes of MAC for Ethernet
//! ```
//!
//! Unlike ICMPv4, the checksum covers an IPv6 pseudo-header (RFC 8200 8.1: source,
//! destination, upper-layer length, next header 58) before the message, so checksum
//! functions take the addresses. The view covers the whole message (the upper-layer bytes of
//! the IPv6 packet).
//!
//! [`NdRepr::parse`] reads a Neighbor Solicitation or Advertisement: code 0
//! ([`WireError::BadCode`]), 24 bytes ([`WireError::Truncated`]), and the options walked with
//! [`NdOptions`]: each option's length checked non-zero and inside the message
//! ([`WireError::BadNdOption`], RFC 4861 4.6 says to discard such a packet), at most
//! [`MAX_ND_OPTIONS`] of them ([`WireError::TooManyNdOptions`]). The checks that need the IP
//! header (hop limit 255, no source link-layer option from the unspecified address, RFC 4861
//! 7.1) belong to the classifier, which has it. Router Solicitation and Advertisement are
//! only named ([`msg_type`]): the router punts them to the control plane.

use core::net::Ipv6Addr;

use crate::checksum;
use crate::ethernet::MacAddr;
use crate::field::{
    array_at, set_bytes, set_u16, set_u32, set_u8, slice, slice_mut, u16_at, u32_at, u8_at,
};
use crate::{ip_proto, WireError};

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const BODY: usize = 4;
    pub const ECHO_IDENT: usize = 4;
    pub const ECHO_SEQ: usize = 6;
    pub const ND_FLAGS: usize = 4;
    pub const ND_TARGET: usize = 8;
    pub const ND_OPTIONS: usize = 24;
}

/// Length of the ICMPv6 header (type, code, checksum, 4-byte body).
pub const HEADER_LEN: usize = 8;
/// Length of a Neighbor Solicitation or Advertisement without options.
pub const ND_LEN: usize = 24;
/// The most ND options [`NdOptions`] reads from one message.
pub const MAX_ND_OPTIONS: usize = 16;

/// Message types.
pub mod msg_type {
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: u8 = 1;
    /// Packet too big.
    pub const PACKET_TOO_BIG: u8 = 2;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 4;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Router solicitation (RFC 4861 4.1).
    pub const ROUTER_SOLICIT: u8 = 133;
    /// Router advertisement (RFC 4861 4.2).
    pub const ROUTER_ADVERT: u8 = 134;
    /// Neighbor solicitation (RFC 4861 4.3).
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbor advertisement (RFC 4861 4.4).
    pub const NEIGHBOR_ADVERT: u8 = 136;
    /// Redirect (RFC 4861 4.5).
    pub const REDIRECT: u8 = 137;
}

/// Destination Unreachable codes (RFC 4443 3.1).
pub mod unreachable {
    /// No route to destination.
    pub const NO_ROUTE: u8 = 0;
    /// Communication administratively prohibited.
    pub const ADMIN_PROHIBITED: u8 = 1;
    /// Address unreachable (neighbor resolution failed).
    pub const ADDRESS: u8 = 3;
    /// Port unreachable.
    pub const PORT: u8 = 4;
    /// Reject route to destination.
    pub const REJECT_ROUTE: u8 = 6;
}

/// Time Exceeded codes (RFC 4443 3.3).
pub mod time_exceeded {
    /// Hop limit exceeded in transit.
    pub const HOP_LIMIT: u8 = 0;
    /// Fragment reassembly time exceeded.
    pub const REASSEMBLY: u8 = 1;
}

/// ND option types (RFC 4861 4.6).
pub mod nd_option {
    /// Source link-layer address.
    pub const SOURCE_LL_ADDR: u8 = 1;
    /// Target link-layer address.
    pub const TARGET_LL_ADDR: u8 = 2;
    /// Prefix information.
    pub const PREFIX_INFO: u8 = 3;
    /// Redirected header.
    pub const REDIRECTED_HEADER: u8 = 4;
    /// MTU.
    pub const MTU: u8 = 5;
}

/// True for error messages (types below 128, RFC 4443 2.1): never answered with an error.
pub fn is_error(msg_type: u8) -> bool {
    msg_type < 128
}

const NA_ROUTER: u32 = 0x8000_0000;
const NA_SOLICITED: u32 = 0x4000_0000;
const NA_OVERRIDE: u32 = 0x2000_0000;

/// The pseudo-header sum for an ICMPv6 message of `len` bytes.
fn pseudo(src: &Ipv6Addr, dst: &Ipv6Addr, len: usize) -> u16 {
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    checksum::pseudo_header_v6(src, dst, ip_proto::ICMPV6, len)
}

/// A view of an ICMPv6 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv6Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wraps `buffer` without checks (getters read zeros past its end).
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv6Packet { buffer }
    }

    /// Wraps `buffer` after checking it holds the 8-byte header.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Icmpv6Packet { buffer })
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

    /// The 4-byte message body after the checksum (MTU, pointer, echo id and sequence).
    #[inline]
    pub fn body(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::BODY)
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

    /// MTU of a Packet Too Big message.
    #[inline]
    pub fn mtu(&self) -> u32 {
        self.body()
    }

    /// True for an error message type.
    #[inline]
    pub fn is_error(&self) -> bool {
        is_error(self.msg_type())
    }

    /// The data after the 8-byte header.
    #[inline]
    pub fn data(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        slice(b, HEADER_LEN, b.len())
    }

    /// True when pseudo-header and message sum to `0xffff`.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let b = self.buffer.as_ref();
        checksum::add(pseudo(src, dst, b.len()), checksum::ones_sum(b)) == 0xffff
    }

    /// [`Icmpv6Packet::verify_checksum`] as a `Result`.
    pub fn check_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> Result<(), WireError> {
        if self.verify_checksum(src, dst) {
            Ok(())
        } else {
            Err(WireError::BadChecksum)
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
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

    /// Sets the 4-byte body.
    pub fn set_body(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::BODY, v);
    }

    /// The data after the header, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let len = b.len();
        slice_mut(b, HEADER_LEN, len)
    }

    /// Computes and stores the checksum with the pseudo-header of `src` and `dst`.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let c = !checksum::add(pseudo(src, dst, b.len()), checksum::ones_sum(b));
        self.set_checksum(c);
    }
}

/// A parsed ICMPv6 message (ND messages: [`NdRepr`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
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
        /// As much of the offending packet as fits in 1280 bytes.
        quoted: &'a [u8],
    },
    /// Packet too big.
    PacketTooBig {
        /// MTU of the next-hop link.
        mtu: u32,
        /// The quoted packet.
        quoted: &'a [u8],
    },
    /// Time exceeded (see [`time_exceeded`]).
    TimeExceeded {
        /// Code.
        code: u8,
        /// The quoted packet.
        quoted: &'a [u8],
    },
    /// Parameter problem.
    ParamProblem {
        /// Code.
        code: u8,
        /// Offset of the octet in error.
        pointer: u32,
        /// The quoted packet.
        quoted: &'a [u8],
    },
    /// Any other message (ND included), left uninterpreted.
    Other {
        /// Type.
        msg_type: u8,
        /// Code.
        code: u8,
        /// The 4-byte body.
        body: u32,
        /// Data after the header.
        data: &'a [u8],
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// Reads a checked view over borrowed bytes (the checksum is not verified here).
    pub fn parse(p: &Icmpv6Packet<&'a [u8]>) -> Icmpv6Repr<'a> {
        let b: &'a [u8] = p.buffer;
        let data = slice(b, HEADER_LEN, b.len());
        let code = p.code();
        match p.msg_type() {
            msg_type::ECHO_REQUEST => Icmpv6Repr::EchoRequest {
                ident: p.echo_ident(),
                seq: p.echo_seq(),
                data,
            },
            msg_type::ECHO_REPLY => Icmpv6Repr::EchoReply {
                ident: p.echo_ident(),
                seq: p.echo_seq(),
                data,
            },
            msg_type::DEST_UNREACHABLE => Icmpv6Repr::DestUnreachable { code, quoted: data },
            msg_type::PACKET_TOO_BIG => Icmpv6Repr::PacketTooBig {
                mtu: p.mtu(),
                quoted: data,
            },
            msg_type::TIME_EXCEEDED => Icmpv6Repr::TimeExceeded { code, quoted: data },
            msg_type::PARAM_PROBLEM => Icmpv6Repr::ParamProblem {
                code,
                pointer: p.body(),
                quoted: data,
            },
            t => Icmpv6Repr::Other {
                msg_type: t,
                code,
                body: p.body(),
                data,
            },
        }
    }

    fn parts(&self) -> (u8, u8, u32, &'a [u8]) {
        match *self {
            Icmpv6Repr::EchoRequest { ident, seq, data } => (
                msg_type::ECHO_REQUEST,
                0,
                (u32::from(ident) << 16) | u32::from(seq),
                data,
            ),
            Icmpv6Repr::EchoReply { ident, seq, data } => (
                msg_type::ECHO_REPLY,
                0,
                (u32::from(ident) << 16) | u32::from(seq),
                data,
            ),
            Icmpv6Repr::DestUnreachable { code, quoted } => {
                (msg_type::DEST_UNREACHABLE, code, 0, quoted)
            }
            Icmpv6Repr::PacketTooBig { mtu, quoted } => (msg_type::PACKET_TOO_BIG, 0, mtu, quoted),
            Icmpv6Repr::TimeExceeded { code, quoted } => (msg_type::TIME_EXCEEDED, code, 0, quoted),
            Icmpv6Repr::ParamProblem {
                code,
                pointer,
                quoted,
            } => (msg_type::PARAM_PROBLEM, code, pointer, quoted),
            Icmpv6Repr::Other {
                msg_type,
                code,
                body,
                data,
            } => (msg_type, code, body, data),
        }
    }

    /// Length of the emitted message.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.parts().3.len()
    }

    /// Writes the message at the start of `buf`, checksummed with the pseudo-header of `src`
    /// and `dst`, and returns its length; [`WireError::BufferTooSmall`] if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8], src: &Ipv6Addr, dst: &Ipv6Addr) -> Result<usize, WireError> {
        let (t, code, body, data) = self.parts();
        let len = HEADER_LEN + data.len();
        let b = buf.get_mut(..len).ok_or(WireError::BufferTooSmall)?;
        let mut p = Icmpv6Packet::new_unchecked(b);
        p.set_msg_type(t);
        p.set_code(code);
        p.set_body(body);
        set_bytes(p.data_mut(), 0, data);
        p.fill_checksum(src, dst);
        Ok(len)
    }
}

/// One ND option: its type and its whole bytes (type and length included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdOption<'a> {
    /// Option type (see [`nd_option`]).
    pub kind: u8,
    /// The option's bytes, `length × 8` of them.
    pub bytes: &'a [u8],
}

impl NdOption<'_> {
    /// The MAC address of a link-layer address option (its bytes 2..8).
    pub fn link_layer_addr(&self) -> MacAddr {
        MacAddr(array_at(self.bytes, 2))
    }
}

/// The options of an ND message, walked one by one: each length checked non-zero and inside
/// the message, at most [`MAX_ND_OPTIONS`]. After an error the iterator ends.
#[derive(Debug, Clone)]
pub struct NdOptions<'a> {
    rest: &'a [u8],
    count: usize,
}

impl<'a> NdOptions<'a> {
    /// Walks the options in `bytes` (an ND message from its options field on).
    pub fn new(bytes: &'a [u8]) -> Self {
        NdOptions {
            rest: bytes,
            count: 0,
        }
    }
}

impl<'a> Iterator for NdOptions<'a> {
    type Item = Result<NdOption<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let fail = |s: &mut Self, e| {
            s.rest = &[];
            Some(Err(e))
        };
        if self.count >= MAX_ND_OPTIONS {
            return fail(self, WireError::TooManyNdOptions);
        }
        let len = usize::from(u8_at(self.rest, 1)) * 8;
        if len == 0 || self.rest.len() < 2 {
            return fail(self, WireError::BadNdOption);
        }
        let Some((bytes, rest)) = self.rest.split_at_checked(len) else {
            return fail(self, WireError::BadNdOption);
        };
        self.rest = rest;
        self.count += 1;
        Some(Ok(NdOption {
            kind: u8_at(bytes, 0),
            bytes,
        }))
    }
}

/// A parsed Neighbor Solicitation or Advertisement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NdRepr {
    /// Neighbor Solicitation (RFC 4861 4.3).
    NeighborSolicit {
        /// The address being resolved.
        target: Ipv6Addr,
        /// The sender's link-layer address (absent in duplicate address detection).
        source_ll: Option<MacAddr>,
    },
    /// Neighbor Advertisement (RFC 4861 4.4).
    NeighborAdvert {
        /// R: the sender is a router.
        router: bool,
        /// S: sent in answer to a solicitation.
        solicited: bool,
        /// O: override an existing cache entry.
        override_: bool,
        /// The address advertised.
        target: Ipv6Addr,
        /// The target's link-layer address.
        target_ll: Option<MacAddr>,
    },
}

impl NdRepr {
    /// Reads an NS or NA from a checked view (the checksum is not verified here). Another
    /// message type is [`WireError::WrongMessageType`]; the other errors are in the module
    /// doc. Unknown options are skipped (RFC 4861 4.6); the first link-layer option counts.
    pub fn parse<T: AsRef<[u8]>>(p: &Icmpv6Packet<T>) -> Result<NdRepr, WireError> {
        let t = p.msg_type();
        let wanted_option = match t {
            msg_type::NEIGHBOR_SOLICIT => nd_option::SOURCE_LL_ADDR,
            msg_type::NEIGHBOR_ADVERT => nd_option::TARGET_LL_ADDR,
            _ => return Err(WireError::WrongMessageType),
        };
        if p.code() != 0 {
            return Err(WireError::BadCode);
        }
        let b = p.buffer.as_ref();
        if b.len() < ND_LEN {
            return Err(WireError::Truncated);
        }
        let target = Ipv6Addr::from(array_at::<16>(b, field::ND_TARGET));
        let mut ll = None;
        for opt in NdOptions::new(slice(b, field::ND_OPTIONS, b.len())) {
            let opt = opt?;
            if opt.kind == wanted_option && ll.is_none() {
                ll = Some(opt.link_layer_addr());
            }
        }
        if t == msg_type::NEIGHBOR_SOLICIT {
            Ok(NdRepr::NeighborSolicit {
                target,
                source_ll: ll,
            })
        } else {
            let flags = u32_at(b, field::ND_FLAGS);
            Ok(NdRepr::NeighborAdvert {
                router: flags & NA_ROUTER != 0,
                solicited: flags & NA_SOLICITED != 0,
                override_: flags & NA_OVERRIDE != 0,
                target,
                target_ll: ll,
            })
        }
    }

    /// Length of the emitted message (24 bytes, 32 with a link-layer option).
    pub fn buffer_len(&self) -> usize {
        let ll = match self {
            NdRepr::NeighborSolicit { source_ll, .. } => source_ll,
            NdRepr::NeighborAdvert { target_ll, .. } => target_ll,
        };
        ND_LEN + if ll.is_some() { 8 } else { 0 }
    }

    /// Writes the message at the start of `buf`, checksummed with the pseudo-header of `src`
    /// and `dst`, and returns its length; [`WireError::BufferTooSmall`] if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8], src: &Ipv6Addr, dst: &Ipv6Addr) -> Result<usize, WireError> {
        let len = self.buffer_len();
        let b = buf.get_mut(..len).ok_or(WireError::BufferTooSmall)?;
        b.fill(0);
        let (t, flags, target, opt) = match *self {
            NdRepr::NeighborSolicit { target, source_ll } => (
                msg_type::NEIGHBOR_SOLICIT,
                0,
                target,
                source_ll.map(|m| (nd_option::SOURCE_LL_ADDR, m)),
            ),
            NdRepr::NeighborAdvert {
                router,
                solicited,
                override_,
                target,
                target_ll,
            } => {
                let mut f = 0;
                if router {
                    f |= NA_ROUTER;
                }
                if solicited {
                    f |= NA_SOLICITED;
                }
                if override_ {
                    f |= NA_OVERRIDE;
                }
                (
                    msg_type::NEIGHBOR_ADVERT,
                    f,
                    target,
                    target_ll.map(|m| (nd_option::TARGET_LL_ADDR, m)),
                )
            }
        };
        set_u8(b, field::TYPE, t);
        set_u32(b, field::ND_FLAGS, flags);
        set_bytes(b, field::ND_TARGET, &target.octets());
        if let Some((kind, mac)) = opt {
            set_u8(b, field::ND_OPTIONS, kind);
            set_u8(b, field::ND_OPTIONS + 1, 1);
            set_bytes(b, field::ND_OPTIONS + 2, &mac.0);
        }
        Icmpv6Packet::new_unchecked(b).fill_checksum(src, dst);
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv6::Ipv6Packet;
    use std::vec::Vec;

    /// Ethernet + IPv6 fe80::ff:fe00:2 -> ff02::1:ff00:1 (solicited-node), hop limit 255,
    /// Neighbor Solicitation for 2001:db8::1 with a source link-layer option 02:00:00:00:00:02.
    const NS: [u8; 86] = [
        0x33, 0x33, 0xff, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x86, 0xdd, 0x60,
        0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x02, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0x00, 0x00, 0x01, 0x87, 0x00, 0x4c, 0x5f, 0x00, 0x00,
        0x00, 0x00, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x01, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    ];

    /// The solicited Neighbor Advertisement answering it (S and O set), with a target
    /// link-layer option 02:00:00:00:00:01.
    const NA: [u8; 86] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xdd, 0x60,
        0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x02, 0x88, 0x00, 0xba, 0xab, 0x60, 0x00,
        0x00, 0x00, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x01, 0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    ];

    /// IPv6 + ICMPv6 Packet Too Big (MTU 1280) from 2001:db8::fe, quoting the first 48 bytes
    /// of a UDP packet.
    const PTB: [u8; 96] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x38, 0x3a, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x02, 0x00, 0x6b, 0x29, 0x00,
        0x00, 0x05, 0x00, 0x60, 0x00, 0x00, 0x00, 0x00, 0x14, 0x11, 0x40, 0x20, 0x01, 0x0d, 0xb8,
        0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x20, 0x01, 0x0d,
        0xb8, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x14, 0xe9,
        0x00, 0x35, 0x00, 0x14, 0x4e, 0xb7,
    ];

    /// IPv6 + ICMPv6 echo request, id 0xbeef, seq 7, "ping6 data".
    const ECHO6: [u8; 58] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x12, 0x3a, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x02,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x80, 0x00, 0x77, 0x63, 0xbe,
        0xef, 0x00, 0x07, 0x70, 0x69, 0x6e, 0x67, 0x36, 0x20, 0x64, 0x61, 0x74, 0x61,
    ];

    fn split(ip: &[u8]) -> (Ipv6Addr, Ipv6Addr, &[u8]) {
        let p = Ipv6Packet::new_checked(ip).unwrap();
        let (s, d) = (p.src_addr(), p.dst_addr());
        let ext = p.ext_headers().unwrap();
        assert_eq!(ext.upper_protocol, ip_proto::ICMPV6);
        let ip: &[u8] = p.into_inner();
        (s, d, &ip[40 + ext.upper_offset..])
    }

    fn addr(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn golden_neighbor_solicitation() {
        let (s, d, m) = split(&NS[14..]);
        let p = Icmpv6Packet::new_checked(m).unwrap();
        assert_eq!(p.msg_type(), msg_type::NEIGHBOR_SOLICIT);
        assert!(p.verify_checksum(&s, &d));
        assert!(!p.is_error());
        let nd = NdRepr::parse(&p).unwrap();
        assert_eq!(
            nd,
            NdRepr::NeighborSolicit {
                target: addr("2001:db8::1"),
                source_ll: Some(MacAddr([2, 0, 0, 0, 0, 2])),
            }
        );
        let mut out = [0u8; 40];
        assert_eq!(nd.emit(&mut out, &s, &d), Ok(32));
        assert_eq!(out[..32], *m);
    }

    #[test]
    fn golden_neighbor_advertisement() {
        let (s, d, m) = split(&NA[14..]);
        let p = Icmpv6Packet::new_checked(m).unwrap();
        assert!(p.verify_checksum(&s, &d));
        let nd = NdRepr::parse(&p).unwrap();
        assert_eq!(
            nd,
            NdRepr::NeighborAdvert {
                router: false,
                solicited: true,
                override_: true,
                target: addr("2001:db8::1"),
                target_ll: Some(MacAddr([2, 0, 0, 0, 0, 1])),
            }
        );
        let mut out = [0u8; 32];
        assert_eq!(nd.emit(&mut out, &s, &d), Ok(32));
        assert_eq!(out[..], *m);
        // A wrong pseudo-header fails the checksum.
        assert_eq!(
            p.check_checksum(&d, &addr("2001:db8::2")),
            Err(WireError::BadChecksum)
        );
    }

    #[test]
    fn golden_packet_too_big_and_emit() {
        let (s, d, m) = split(&PTB);
        let p = Icmpv6Packet::new_checked(m).unwrap();
        assert!(p.verify_checksum(&s, &d) && p.is_error());
        assert_eq!(p.mtu(), 1280);
        let r = Icmpv6Repr::parse(&p);
        assert_eq!(
            r,
            Icmpv6Repr::PacketTooBig {
                mtu: 1280,
                quoted: &PTB[48..]
            }
        );
        let mut out = [0u8; 56];
        assert_eq!(r.emit(&mut out, &s, &d), Ok(56));
        assert_eq!(out[..], *m);
        assert_eq!(NdRepr::parse(&p), Err(WireError::WrongMessageType));
    }

    #[test]
    fn golden_echo_request() {
        let (s, d, m) = split(&ECHO6);
        let p = Icmpv6Packet::new_checked(m).unwrap();
        assert!(p.verify_checksum(&s, &d));
        assert_eq!(
            Icmpv6Repr::parse(&p),
            Icmpv6Repr::EchoRequest {
                ident: 0xbeef,
                seq: 7,
                data: b"ping6 data"
            }
        );
    }

    #[test]
    fn other_messages_round_trip() {
        let (s, d) = (addr("2001:db8::1"), addr("2001:db8::2"));
        let q = [0x60u8; 48];
        let msgs = [
            Icmpv6Repr::EchoReply {
                ident: 1,
                seq: 2,
                data: b"x",
            },
            Icmpv6Repr::DestUnreachable {
                code: unreachable::NO_ROUTE,
                quoted: &q,
            },
            Icmpv6Repr::TimeExceeded {
                code: time_exceeded::HOP_LIMIT,
                quoted: &q,
            },
            Icmpv6Repr::ParamProblem {
                code: 1,
                pointer: 40,
                quoted: &q,
            },
            Icmpv6Repr::Other {
                msg_type: msg_type::ROUTER_SOLICIT,
                code: 0,
                body: 0,
                data: &[],
            },
        ];
        for r in msgs {
            let mut out = [0u8; 64];
            let n = r.emit(&mut out, &s, &d).unwrap();
            assert_eq!(n, r.buffer_len());
            let p = Icmpv6Packet::new_checked(&out[..n]).unwrap();
            assert!(p.verify_checksum(&s, &d));
            assert_eq!(Icmpv6Repr::parse(&p), r);
        }
        assert_eq!(
            msgs[0].emit(&mut [0u8; 8], &s, &d),
            Err(WireError::BufferTooSmall)
        );
    }

    #[test]
    fn nd_without_options_and_unknown_options() {
        let (s, d) = (addr("::"), addr("ff02::1:ff00:1"));
        // Duplicate address detection: no source link-layer option.
        let dad = NdRepr::NeighborSolicit {
            target: addr("2001:db8::1"),
            source_ll: None,
        };
        let mut out = [0u8; 48];
        let n = dad.emit(&mut out, &s, &d).unwrap();
        assert_eq!(n, 24);
        let p = Icmpv6Packet::new_checked(&out[..n]).unwrap();
        assert!(p.verify_checksum(&s, &d));
        assert_eq!(NdRepr::parse(&p), Ok(dad));
        // An unknown option (type 200, 16 bytes) before the link-layer one is skipped.
        let (_, _, m) = split(&NS[14..]);
        let mut v: Vec<u8> = m[..24].to_vec();
        v.extend_from_slice(&[200, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        v.extend_from_slice(&m[24..]);
        let p = Icmpv6Packet::new_checked(&v[..]).unwrap();
        let opts: Vec<_> = NdOptions::new(&v[24..]).map(|o| o.unwrap().kind).collect();
        assert_eq!(opts, [200, nd_option::SOURCE_LL_ADDR]);
        assert_eq!(
            NdRepr::parse(&p).unwrap(),
            NdRepr::NeighborSolicit {
                target: addr("2001:db8::1"),
                source_ll: Some(MacAddr([2, 0, 0, 0, 0, 2])),
            }
        );
    }

    #[test]
    fn nd_errors() {
        let (_, _, m) = split(&NS[14..]);
        let parse = |b: &[u8]| NdRepr::parse(&Icmpv6Packet::new_checked(b).unwrap());
        assert_eq!(parse(&m[..23]), Err(WireError::Truncated));
        let mut v = m.to_vec();
        v[1] = 1;
        assert_eq!(parse(&v), Err(WireError::BadCode));
        // Option length 0 (RFC 4861 4.6: discard).
        let mut v = m.to_vec();
        v[25] = 0;
        assert_eq!(parse(&v), Err(WireError::BadNdOption));
        // Option running past the message.
        let mut v = m.to_vec();
        v[25] = 2;
        assert_eq!(parse(&v), Err(WireError::BadNdOption));
        // One byte of options.
        assert_eq!(parse(&m[..25]), Err(WireError::BadNdOption));
        // More options than the bound.
        let mut v = m[..24].to_vec();
        for _ in 0..=MAX_ND_OPTIONS {
            v.extend_from_slice(&[200, 1, 0, 0, 0, 0, 0, 0]);
        }
        assert_eq!(parse(&v), Err(WireError::TooManyNdOptions));
        assert_eq!(
            Icmpv6Packet::new_checked(&m[..7]),
            Err(WireError::Truncated)
        );
        // After an error the walk ends.
        let mut it = NdOptions::new(&[1, 0, 1, 1]);
        assert_eq!(it.next(), Some(Err(WireError::BadNdOption)));
        assert_eq!(it.next(), None);
    }

    #[test]
    fn error_types() {
        assert!(is_error(msg_type::PACKET_TOO_BIG) && is_error(127));
        assert!(!is_error(msg_type::ECHO_REQUEST) && !is_error(msg_type::NEIGHBOR_SOLICIT));
    }
}
