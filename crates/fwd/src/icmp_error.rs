//! ICMP and ICMPv6 error messages about a packet the router could not forward.
//!
//! ```text
//!   IPv4 (RFC 792, RFC 1812 4.3.2)                 IPv6 (RFC 4443)
//!   ┌ IPv4 header, 20 bytes ────────────┐          ┌ IPv6 header, 40 bytes ────────────┐
//!   │ TTL 64, DF clear, proto 1          │          │ hop limit 64, next header 58       │
//!   │ src: the ingress interface's addr  │          │ src: the ingress interface's addr  │
//!   │ dst: the offending packet's source │          │ dst: the offending packet's source │
//!   ├ ICMP header, 8 bytes ─────────────┤          ├ ICMPv6 header, 8 bytes ───────────┤
//!   │ type, code, checksum, 4 bytes:     │          │ type, code, checksum, 4 bytes:     │
//!   │ next-hop MTU (3/4, RFC 1191) or    │          │ MTU (Packet Too Big) or pointer    │
//!   │ pointer (12/0), else zero          │          │ (Parameter Problem), else zero     │
//!   ├ the offending packet, from its IP ─┤          ├ the offending packet, from its IP ─┤
//!   │ header on, as much as fits in 576  │          │ header on, as much as fits in 1280 │
//!   └ bytes in all (RFC 1812 4.3.2.3) ───┘          └ bytes in all (RFC 4443 2.4 (c)) ───┘
//! ```
//!
//! **Never answered** (RFC 1812 4.3.2.7, RFC 4443 2.4 (e)), reported as [`Suppressed`]:
//! an ICMP error (or an ICMPv4 redirect); a packet to a multicast or broadcast address or
//! received as a link-layer broadcast or multicast (for IPv6, except Packet Too Big and
//! Parameter Problem code 2, which path MTU discovery and option processing need); a fragment
//! other than the first; a packet whose source does not name one host (unspecified, `0/8`,
//! loopback, multicast, broadcast, class E).
//!
//! **Which rule is where.** RFC 792 gives the message formats (type, code, the 4-byte field,
//! the quoted header). RFC 1812 4.3.2.3 lets a router quote as much of the original as fits
//! in 576 bytes (instead of RFC 792's header and 8 bytes), 4.3.2.4 sets the source address
//! (the caller passes the ingress interface's), 4.3.2.7 lists when no error is sent, and
//! 4.3.2.8 asks for rate limiting. RFC 1191 section 4 puts the next-hop MTU in the low 16
//! bits of the 4-byte field of Fragmentation Needed. RFC 4443 2.4 (c) quotes up to 1280 bytes
//! for ICMPv6, 2.4 (e) lists the suppressions, 3.2 and 3.4 define Packet Too Big's MTU and
//! Parameter Problem's pointer, 2.3 the checksum over the pseudo-header (RFC 8200 8.1).
//!
//! The checks run in a fixed order, so a packet that breaks several rules always gets the
//! same [`Suppressed`] reason: header validity, later fragment, ICMP error, destination
//! (broadcast, multicast), link-layer broadcast, source, then buffer room.
//!
//! The builders write into a caller's buffer (the worker's spare packet buffers) and return
//! the length; nothing is allocated. Rate limiting is the caller's: the worker asks
//! [`icmp4_allowed`] / [`icmp6_allowed`] (the same rules, nothing built) before it takes a
//! token of its bucket (`ratelimit.rs`), so that packets no error may answer neither spend a
//! token nor cost a build.

use std::net::{Ipv4Addr, Ipv6Addr};

use vfsr_wire::icmpv4::{self, Icmpv4Packet};
use vfsr_wire::icmpv6::{self, Icmpv6Packet};
use vfsr_wire::ip_proto;
use vfsr_wire::ipv4::{self, Ipv4Packet};
use vfsr_wire::ipv6::{self, walk_extension_headers, Ipv6Packet};

/// Largest IPv4 error message (RFC 1812 4.3.2.3).
pub const MAX_ICMP4: usize = 576;
/// Largest ICMPv6 error message (RFC 4443 2.4 (c)).
pub const MAX_ICMP6: usize = 1280;

/// An ICMPv4 error to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Icmp4Error {
    /// Type 11 code 0: TTL exceeded in transit.
    TimeExceeded,
    /// Type 3 code 0: no route.
    NetUnreachable,
    /// Type 3 code 1: the route rejects, or the next hop did not resolve.
    HostUnreachable,
    /// Type 3 code 4: DF set and larger than the next hop's MTU (given, RFC 1191).
    FragNeeded {
        /// The next-hop MTU.
        mtu: u16,
    },
    /// Type 3 code 13: administratively prohibited.
    AdminProhibited,
    /// Type 12 code 0: a header field is wrong; `pointer` is its offset.
    ParamProblem {
        /// Offset of the offending octet in the original header.
        pointer: u8,
    },
}

impl Icmp4Error {
    /// The message's type and code.
    pub fn type_code(&self) -> (u8, u8) {
        match self {
            Icmp4Error::TimeExceeded => (11, 0),
            Icmp4Error::NetUnreachable => (3, 0),
            Icmp4Error::HostUnreachable => (3, 1),
            Icmp4Error::FragNeeded { .. } => (3, 4),
            Icmp4Error::AdminProhibited => (3, 13),
            Icmp4Error::ParamProblem { .. } => (12, 0),
        }
    }

    fn rest(&self) -> [u8; 4] {
        match self {
            Icmp4Error::FragNeeded { mtu } => {
                let m = mtu.to_be_bytes();
                [0, 0, m[0], m[1]]
            }
            Icmp4Error::ParamProblem { pointer } => [*pointer, 0, 0, 0],
            _ => [0; 4],
        }
    }
}

/// An ICMPv6 error to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Icmp6Error {
    /// Type 3 code 0: hop limit exceeded in transit.
    TimeExceeded,
    /// Type 1 code 0: no route to destination.
    NoRoute,
    /// Type 1 code 1: administratively prohibited.
    AdminProhibited,
    /// Type 1 code 2: beyond the scope of the source address.
    BeyondScope,
    /// Type 1 code 3: address unreachable (the neighbor did not resolve).
    AddressUnreachable,
    /// Type 1 code 6: reject route to destination.
    RejectRoute,
    /// Type 2 code 0: larger than the next hop's MTU.
    PacketTooBig {
        /// The next-hop MTU.
        mtu: u32,
    },
    /// Type 4: parameter problem (`code` 0 header field, 1 next header, 2 option).
    ParamProblem {
        /// The code.
        code: u8,
        /// Offset of the offending octet.
        pointer: u32,
    },
}

impl Icmp6Error {
    /// The message's type and code.
    pub fn type_code(&self) -> (u8, u8) {
        match self {
            Icmp6Error::TimeExceeded => (3, 0),
            Icmp6Error::NoRoute => (1, 0),
            Icmp6Error::AdminProhibited => (1, 1),
            Icmp6Error::BeyondScope => (1, 2),
            Icmp6Error::AddressUnreachable => (1, 3),
            Icmp6Error::RejectRoute => (1, 6),
            Icmp6Error::PacketTooBig { .. } => (2, 0),
            Icmp6Error::ParamProblem { code, .. } => (4, *code),
        }
    }

    fn rest(&self) -> [u8; 4] {
        match self {
            Icmp6Error::PacketTooBig { mtu } => mtu.to_be_bytes(),
            Icmp6Error::ParamProblem { pointer, .. } => pointer.to_be_bytes(),
            _ => [0; 4],
        }
    }

    /// Sent even about multicast (RFC 4443 2.4 (e) 3 and 4).
    fn multicast_allowed(&self) -> bool {
        matches!(
            self,
            Icmp6Error::PacketTooBig { .. } | Icmp6Error::ParamProblem { code: 2, .. }
        )
    }
}

/// Why no error is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suppressed {
    /// The original is itself an ICMP error (or an ICMPv4 redirect).
    IcmpError,
    /// The original went to a multicast group.
    Multicast,
    /// The original came in a link-layer broadcast or multicast frame.
    LinkBroadcast,
    /// The original went to the limited broadcast address.
    Broadcast,
    /// The original is a fragment other than the first.
    NotFirstFragment,
    /// The original's source names no single host.
    BadSource,
    /// The original is too short to hold its IP header.
    Truncated,
    /// The output buffer cannot hold the smallest message.
    NoRoom,
}

impl Suppressed {
    /// A short fixed name.
    pub fn name(&self) -> &'static str {
        match self {
            Suppressed::IcmpError => "icmp_error",
            Suppressed::Multicast => "multicast",
            Suppressed::LinkBroadcast => "link_broadcast",
            Suppressed::Broadcast => "broadcast",
            Suppressed::NotFirstFragment => "not_first_fragment",
            Suppressed::BadSource => "bad_source",
            Suppressed::Truncated => "truncated",
            Suppressed::NoRoom => "no_room",
        }
    }
}

/// Bytes of the original quoted: what it has (up to its stated length), within `room`.
/// At least its IP header and 8 bytes (or all of it, if shorter) must fit.
fn quote_len(have: usize, header: usize, room: usize) -> Result<usize, Suppressed> {
    let least = have.min(header + 8);
    if room < least {
        return Err(Suppressed::NoRoom);
    }
    Ok(have.min(room))
}

/// What the rules found in an IPv4 original that may be answered.
struct Orig4 {
    /// Its header's length.
    header: usize,
    /// Its bytes up to its stated length.
    have: usize,
    /// Its source, the error's destination.
    src: Ipv4Addr,
}

/// Whether the rules let an ICMPv4 error answer `orig` (an IPv4 packet from its header on):
/// the checks of [`icmp4_error`] before the buffer's, without building anything, so that a
/// caller can count a suppressed error before it spends a rate-limit token or a buffer.
pub fn icmp4_allowed(orig: &[u8], link_broadcast: bool) -> Result<(), Suppressed> {
    rules4(orig, link_broadcast).map(|_| ())
}

/// The checks of the module doc, in their order, for an IPv4 original.
fn rules4(orig: &[u8], link_broadcast: bool) -> Result<Orig4, Suppressed> {
    // The original may be cut short (quoted as far as it goes): an unchecked view, with the
    // header's own bounds checked here.
    if orig.len() < ipv4::MIN_HEADER_LEN {
        return Err(Suppressed::Truncated);
    }
    let o = Ipv4Packet::new_unchecked(orig);
    let header = o.header_len();
    if o.version() != 4 || header < ipv4::MIN_HEADER_LEN || header > orig.len() {
        return Err(Suppressed::Truncated);
    }
    let orig_src = o.src_addr();
    let orig_dst = u32::from(o.dst_addr());
    let stated = usize::from(o.total_len());
    let later_fragment = o.frag_offset() != 0;
    if later_fragment {
        return Err(Suppressed::NotFirstFragment);
    }
    if o.protocol() == ip_proto::ICMP {
        match orig.get(header) {
            Some(&t) if icmpv4::is_error(t) => return Err(Suppressed::IcmpError),
            Some(_) => {}
            None => return Err(Suppressed::Truncated),
        }
    }
    if orig_dst == u32::MAX {
        return Err(Suppressed::Broadcast);
    }
    if orig_dst >> 28 == 0xe {
        return Err(Suppressed::Multicast);
    }
    if link_broadcast {
        return Err(Suppressed::LinkBroadcast);
    }
    if ipv4::check_source(orig_src).is_err() {
        return Err(Suppressed::BadSource);
    }
    Ok(Orig4 {
        header,
        have: orig.len().min(stated.max(header)),
        src: orig_src,
    })
}

/// Writes an ICMPv4 error about `orig` (an IPv4 packet from its header on) into `out` and
/// returns its length (see the module doc for the layout and the rules).
pub fn icmp4_error(
    orig: &[u8],
    link_broadcast: bool,
    kind: Icmp4Error,
    src: Ipv4Addr,
    ident: u16,
    out: &mut [u8],
) -> Result<usize, Suppressed> {
    let Orig4 {
        header,
        have,
        src: orig_src,
    } = rules4(orig, link_broadcast)?;
    let room = out.len().min(MAX_ICMP4).saturating_sub(28);
    let q = quote_len(have, header, room)?;
    let total = 28 + q;
    if out.len() < total {
        return Err(Suppressed::NoRoom);
    }
    write(out, 28, orig.get(..q).ok_or(Suppressed::Truncated)?)?;
    let (t, c) = kind.type_code();
    let mut icmp = Icmpv4Packet::new_unchecked(out.get_mut(20..total).ok_or(Suppressed::NoRoom)?);
    icmp.set_msg_type(t);
    icmp.set_code(c);
    icmp.set_rest_of_header(u32::from_be_bytes(kind.rest()));
    icmp.fill_checksum();
    let mut ip = Ipv4Packet::new_unchecked(out.get_mut(..total).ok_or(Suppressed::NoRoom)?);
    ip.set_version_and_header_len(ipv4::MIN_HEADER_LEN);
    ip.set_dscp_ecn(0, 0);
    ip.set_total_len(total as u16); // at most 576
    ip.set_ident(ident);
    ip.set_frag(false, false, 0);
    ip.set_ttl(64);
    ip.set_protocol(ip_proto::ICMP);
    ip.set_src_addr(src);
    ip.set_dst_addr(orig_src);
    ip.fill_checksum();
    Ok(total)
}

/// What the rules found in an IPv6 original that may be answered.
struct Orig6 {
    /// Its bytes up to its stated length.
    have: usize,
    /// Its source, the error's destination.
    src: Ipv6Addr,
}

/// Whether the rules let an ICMPv6 error of `kind` answer `orig` (an IPv6 packet from its
/// header on): the checks of [`icmp6_error`] before the buffer's, without building anything.
pub fn icmp6_allowed(
    orig: &[u8],
    link_multicast: bool,
    kind: Icmp6Error,
) -> Result<(), Suppressed> {
    rules6(orig, link_multicast, kind).map(|_| ())
}

/// The checks of the module doc, in their order, for an IPv6 original.
fn rules6(orig: &[u8], link_multicast: bool, kind: Icmp6Error) -> Result<Orig6, Suppressed> {
    // The original may be cut short: an unchecked view over at least its fixed header.
    if orig.len() < ipv6::HEADER_LEN {
        return Err(Suppressed::Truncated);
    }
    let o = Ipv6Packet::new_unchecked(orig);
    if o.version() != 6 {
        return Err(Suppressed::Truncated);
    }
    let orig_src = o.src_addr();
    let orig_dst = o.dst_addr();
    let have = orig
        .len()
        .min(ipv6::HEADER_LEN + usize::from(o.payload_len()));
    let next = o.next_header();
    // What the packet carries: an unreadable chain is answered as if it held no ICMPv6.
    if let Ok(ext) = walk_extension_headers(next, orig.get(ipv6::HEADER_LEN..have).unwrap_or(&[])) {
        if ext.is_later_fragment() {
            return Err(Suppressed::NotFirstFragment);
        }
        if ext.upper_protocol == ip_proto::ICMPV6 {
            match orig.get(ipv6::HEADER_LEN + ext.upper_offset) {
                Some(&t) if icmpv6::is_error(t) => return Err(Suppressed::IcmpError),
                Some(_) => {}
                None => return Err(Suppressed::Truncated),
            }
        }
    }
    let mcast_ok = kind.multicast_allowed();
    if orig_dst.is_multicast() && !mcast_ok {
        return Err(Suppressed::Multicast);
    }
    if link_multicast && !mcast_ok {
        return Err(Suppressed::LinkBroadcast);
    }
    if orig_src.is_unspecified() || orig_src.is_multicast() || orig_src.is_loopback() {
        return Err(Suppressed::BadSource);
    }
    Ok(Orig6 {
        have,
        src: orig_src,
    })
}

/// Writes an ICMPv6 error about `orig` (an IPv6 packet from its header on) into `out` and
/// returns its length (see the module doc).
pub fn icmp6_error(
    orig: &[u8],
    link_multicast: bool,
    kind: Icmp6Error,
    src: Ipv6Addr,
    out: &mut [u8],
) -> Result<usize, Suppressed> {
    let Orig6 {
        have,
        src: orig_src,
    } = rules6(orig, link_multicast, kind)?;
    let room = out.len().min(MAX_ICMP6).saturating_sub(48);
    let q = quote_len(have, 40, room)?;
    let total = 48 + q;
    if out.len() < total {
        return Err(Suppressed::NoRoom);
    }
    write(out, 48, orig.get(..q).ok_or(Suppressed::Truncated)?)?;
    let (t, c) = kind.type_code();
    let mut icmp = Icmpv6Packet::new_unchecked(out.get_mut(40..total).ok_or(Suppressed::NoRoom)?);
    icmp.set_msg_type(t);
    icmp.set_code(c);
    icmp.set_body(u32::from_be_bytes(kind.rest()));
    icmp.fill_checksum(&src, &orig_src);
    let mut ip = Ipv6Packet::new_unchecked(out.get_mut(..total).ok_or(Suppressed::NoRoom)?);
    ip.set_version_tc_flow(0, 0);
    ip.set_payload_len((8 + q) as u16); // at most 1240
    ip.set_next_header(ip_proto::ICMPV6);
    ip.set_hop_limit(64);
    ip.set_src_addr(&src);
    ip.set_dst_addr(&orig_src);
    Ok(total)
}

/// Copies `bytes` to `out[at..]`.
#[inline]
fn write(out: &mut [u8], at: usize, bytes: &[u8]) -> Result<(), Suppressed> {
    out.get_mut(at..at + bytes.len())
        .ok_or(Suppressed::NoRoom)?
        .copy_from_slice(bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use vfsr_wire::checksum;

    const ROUTER4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 254);

    /// UDP 192.0.2.1:1000 → 198.51.100.7:53, 4 bytes of payload, TTL 1, checksum filled.
    fn udp4(payload: usize) -> Vec<u8> {
        let total = (28 + payload) as u16;
        let t = total.to_be_bytes();
        let mut p = vec![
            0x45, 0, t[0], t[1], 0xab, 0xcd, 0, 0, 1, 17, 0, 0, 192, 0, 2, 1, 198, 51, 100, 7,
            0x03, 0xe8, 0x00, 0x35, 0, 0, 0, 0,
        ];
        p.extend((0..payload).map(|i| i as u8));
        let c = checksum::checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p
    }

    #[test]
    fn time_exceeded_literal_bytes() {
        let orig = udp4(4);
        let mut out = [0u8; 600];
        let n = icmp4_error(&orig, false, Icmp4Error::TimeExceeded, ROUTER4, 7, &mut out).unwrap();
        assert_eq!(n, 28 + 32);
        // The IPv4 header, literally (checksum 0xf5ba computed apart from the code under
        // test, by a one-line RFC 1071 sum).
        let expected_ip: [u8; 20] = [
            0x45, 0, 0, 60, 0, 7, 0, 0, 64, 1, 0xf5, 0xba, 192, 0, 2, 254, 192, 0, 2, 1,
        ];
        assert_eq!(&out[..20], &expected_ip);
        assert_eq!(&out[20..28], &[11, 0, 0xee, 0xde, 0, 0, 0, 0]);
        assert_eq!(&out[28..n], orig.as_slice());
        assert!(checksum::verify(&out[..20]));
        assert!(checksum::verify(&out[20..n]));
    }

    #[test]
    fn frag_needed_carries_the_mtu_and_quotes_576_at_most() {
        let orig = udp4(1400);
        let mut out = [0u8; 2048];
        let kind = Icmp4Error::FragNeeded { mtu: 1280 };
        let n = icmp4_error(&orig, false, kind, ROUTER4, 1, &mut out).unwrap();
        assert_eq!(n, 576);
        assert_eq!(&out[20..22], &[3, 4]);
        assert_eq!(&out[24..28], &[0, 0, 0x05, 0x00]);
        assert_eq!(&out[28..576], &orig[..548]);
        assert!(checksum::verify(&out[20..576]));
        // Bytes past the stated total length (padding) are not quoted.
        let mut padded = udp4(4);
        padded.extend_from_slice(&[0xee; 10]);
        let n = icmp4_error(&padded, false, kind, ROUTER4, 1, &mut out).unwrap();
        assert_eq!(n, 28 + 32);
        // A short output buffer quotes less, but at least the header and 8 bytes.
        let mut small = [0u8; 60];
        assert_eq!(
            icmp4_error(&orig, false, kind, ROUTER4, 1, &mut small),
            Ok(60)
        );
        let mut tiny = [0u8; 40];
        assert_eq!(
            icmp4_error(&orig, false, kind, ROUTER4, 1, &mut tiny),
            Err(Suppressed::NoRoom)
        );
    }

    #[test]
    fn every_v4_suppression() {
        let mut out = [0u8; 600];
        let mut run = |p: &[u8], lb: bool| {
            icmp4_error(p, lb, Icmp4Error::NetUnreachable, ROUTER4, 1, &mut out)
        };
        let fix = |p: &mut Vec<u8>| {
            p[10] = 0;
            p[11] = 0;
            let c = checksum::checksum(&p[..20]);
            p[10..12].copy_from_slice(&c.to_be_bytes());
        };
        // An ICMP error (destination unreachable) and a redirect: never answered.
        for ty in [3u8, 5, 11, 12, 4] {
            let mut p = udp4(4);
            p[9] = 1;
            p[20] = ty;
            fix(&mut p);
            assert_eq!(run(&p, false), Err(Suppressed::IcmpError), "type {ty}");
        }
        // An echo request is answered.
        let mut p = udp4(4);
        p[9] = 1;
        p[20] = 8;
        fix(&mut p);
        assert!(run(&p, false).is_ok());
        let mut p = udp4(4);
        p[16..20].copy_from_slice(&[224, 0, 0, 9]);
        fix(&mut p);
        assert_eq!(run(&p, false), Err(Suppressed::Multicast));
        let mut p = udp4(4);
        p[16..20].copy_from_slice(&[255; 4]);
        fix(&mut p);
        assert_eq!(run(&p, false), Err(Suppressed::Broadcast));
        assert_eq!(run(&udp4(4), true), Err(Suppressed::LinkBroadcast));
        let mut p = udp4(4);
        p[7] = 1;
        fix(&mut p);
        assert_eq!(run(&p, false), Err(Suppressed::NotFirstFragment));
        for s in [
            [0, 0, 0, 0],
            [127, 0, 0, 1],
            [224, 1, 1, 1],
            [255, 255, 255, 255],
            [240, 0, 0, 1],
        ] {
            let mut p = udp4(4);
            p[12..16].copy_from_slice(&s);
            fix(&mut p);
            assert_eq!(run(&p, false), Err(Suppressed::BadSource), "{s:?}");
        }
        assert_eq!(run(&udp4(4)[..19], false), Err(Suppressed::Truncated));
        // The first fragment (MF set, offset 0) is answered.
        let mut p = udp4(4);
        p[6] = 0x20;
        fix(&mut p);
        assert!(run(&p, false).is_ok());
    }

    const ROUTER6: &str = "2001:db8:1::fe";

    /// UDP 2001:db8:1::1 → 2001:db8:a::7, hop limit 1, `payload` bytes, after `ext`.
    fn udp6(payload: usize, next: u8, ext: &[u8]) -> Vec<u8> {
        let plen = ((ext.len() + 8 + payload) as u16).to_be_bytes();
        let mut p = vec![0x60, 0, 0, 0, plen[0], plen[1], next, 1];
        p.extend_from_slice(&"2001:db8:1::1".parse::<Ipv6Addr>().unwrap().octets());
        p.extend_from_slice(&"2001:db8:a::7".parse::<Ipv6Addr>().unwrap().octets());
        p.extend_from_slice(ext);
        p.extend_from_slice(&[0x03, 0xe8, 0x00, 0x35, 0, 0, 0, 0]);
        p.extend((0..payload).map(|i| i as u8));
        p
    }

    fn verify6(out: &[u8]) -> bool {
        let mut s = [0u8; 16];
        s.copy_from_slice(&out[8..24]);
        let src = Ipv6Addr::from(s);
        s.copy_from_slice(&out[24..40]);
        let dst = Ipv6Addr::from(s);
        let len = u16::from_be_bytes([out[4], out[5]]);
        let p = checksum::pseudo_header_v6(&src, &dst, 58, u32::from(len));
        checksum::add(p, checksum::ones_sum(&out[40..40 + usize::from(len)])) == 0xffff
    }

    #[test]
    fn time_exceeded_v6_layout() {
        let orig = udp6(4, 17, &[]);
        let mut out = [0u8; 1500];
        let src: Ipv6Addr = ROUTER6.parse().unwrap();
        let n = icmp6_error(&orig, false, Icmp6Error::TimeExceeded, src, &mut out).unwrap();
        assert_eq!(n, 48 + orig.len());
        let mut expected = vec![0x60, 0, 0, 0, 0, 60, 58, 64];
        expected.extend_from_slice(&src.octets());
        expected.extend_from_slice(&orig[8..24]);
        expected.extend_from_slice(&[3, 0]);
        assert_eq!(&out[..42], expected.as_slice());
        assert_eq!(&out[44..48], &[0; 4]);
        assert_eq!(&out[48..n], orig.as_slice());
        assert!(verify6(&out[..n]));
    }

    #[test]
    fn packet_too_big_quotes_1280_and_is_sent_for_multicast() {
        let src: Ipv6Addr = ROUTER6.parse().unwrap();
        let orig = udp6(1400, 17, &[]);
        let mut out = [0u8; 2048];
        let kind = Icmp6Error::PacketTooBig { mtu: 1280 };
        let n = icmp6_error(&orig, false, kind, src, &mut out).unwrap();
        assert_eq!(n, 1280);
        assert_eq!(&out[40..42], &[2, 0]);
        assert_eq!(&out[44..48], &1280u32.to_be_bytes());
        assert_eq!(&out[48..1280], &orig[..1232]);
        assert!(verify6(&out[..n]));
        let mut m = orig.clone();
        m[24] = 0xff;
        assert!(icmp6_error(&m, true, kind, src, &mut out).is_ok());
        assert_eq!(
            icmp6_error(&m, true, Icmp6Error::NoRoute, src, &mut out),
            Err(Suppressed::Multicast)
        );
        let pp = Icmp6Error::ParamProblem {
            code: 2,
            pointer: 42,
        };
        let n = icmp6_error(&m, true, pp, src, &mut out).unwrap();
        assert_eq!(&out[40..48], &[4, 2, out[42], out[43], 0, 0, 0, 42]);
        assert!(verify6(&out[..n]));
    }

    #[test]
    fn every_v6_suppression() {
        let src: Ipv6Addr = ROUTER6.parse().unwrap();
        let mut out = [0u8; 1500];
        let mut run = |p: &[u8], lm: bool| icmp6_error(p, lm, Icmp6Error::NoRoute, src, &mut out);
        // An ICMPv6 error (type 1) after a destination-options header: not answered.
        let mut p = udp6(4, 60, &[58, 0, 1, 4, 0, 0, 0, 0]);
        p[48] = 1;
        assert_eq!(run(&p, false), Err(Suppressed::IcmpError));
        // An echo request (128) is answered.
        p[48] = 128;
        assert!(run(&p, false).is_ok());
        assert_eq!(run(&udp6(4, 17, &[]), true), Err(Suppressed::LinkBroadcast));
        let later = udp6(4, 44, &[17, 0, 0, 8, 0, 0, 0, 1]);
        assert_eq!(run(&later, false), Err(Suppressed::NotFirstFragment));
        let first = udp6(4, 44, &[17, 0, 0, 1, 0, 0, 0, 1]);
        assert!(run(&first, false).is_ok());
        for s in ["::", "ff02::1", "::1"] {
            let mut p = udp6(4, 17, &[]);
            p[8..24].copy_from_slice(&s.parse::<Ipv6Addr>().unwrap().octets());
            assert_eq!(run(&p, false), Err(Suppressed::BadSource), "{s}");
        }
        assert_eq!(
            run(&udp6(4, 17, &[])[..39], false),
            Err(Suppressed::Truncated)
        );
        let mut tiny = [0u8; 80];
        assert_eq!(
            icmp6_error(
                &udp6(40, 17, &[]),
                false,
                Icmp6Error::NoRoute,
                src,
                &mut tiny
            ),
            Err(Suppressed::NoRoom)
        );
    }

    /// The UDP datagram quoted in the literal v4 golden test: 192.0.2.1:1024 →
    /// 198.51.100.7:53, 4 bytes of data, TTL 1, ident 0x1234 (header checksum 0xbb5d).
    const ORIG4: [u8; 32] = [
        0x45, 0x00, 0x00, 0x20, 0x12, 0x34, 0x00, 0x00, 0x01, 0x11, 0xbb, 0x5d, 0xc0, 0x00, 0x02,
        0x01, 0xc6, 0x33, 0x64, 0x07, 0x04, 0x00, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, 0xde, 0xad,
        0xbe, 0xef,
    ];

    #[test]
    fn host_unreachable_whole_message_literal() {
        assert!(checksum::verify(&ORIG4[..20]));
        let mut out = [0u8; 1500];
        let n = icmp4_error(
            &ORIG4,
            false,
            Icmp4Error::HostUnreachable,
            ROUTER4,
            0x0102,
            &mut out,
        )
        .unwrap();
        // Every byte written out; the two checksums (0xf4bf, 0x5b20) were summed by hand
        // apart from the code under test.
        let expected: [u8; 60] = [
            // IPv4: length 60, ident 0x0102, TTL 64, ICMP, 192.0.2.254 → 192.0.2.1.
            0x45, 0x00, 0x00, 0x3c, 0x01, 0x02, 0x00, 0x00, 0x40, 0x01, 0xf4, 0xbf, 0xc0, 0x00,
            0x02, 0xfe, 0xc0, 0x00, 0x02, 0x01, //
            // ICMP: type 3 code 1, checksum, unused.
            0x03, 0x01, 0x5b, 0x20, 0x00, 0x00, 0x00, 0x00, //
            // The original, whole.
            0x45, 0x00, 0x00, 0x20, 0x12, 0x34, 0x00, 0x00, 0x01, 0x11, 0xbb, 0x5d, 0xc0, 0x00,
            0x02, 0x01, 0xc6, 0x33, 0x64, 0x07, 0x04, 0x00, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00,
            0xde, 0xad, 0xbe, 0xef,
        ];
        assert_eq!(&out[..n], &expected[..]);
        let ip = vfsr_wire::Ipv4Packet::new_checked(&out[..n]).unwrap();
        assert!(ip.verify_checksum());
        assert!(!ip.dont_frag());
        let icmp = vfsr_wire::Icmpv4Packet::new_checked(ip.payload()).unwrap();
        assert!(icmp.verify_checksum() && icmp.is_error());
    }

    #[test]
    fn packet_too_big_whole_message_literal() {
        // UDP 2001:db8:1::1 → 2001:db8:a::7, hop limit 1, 4 bytes of data.
        let orig: [u8; 52] = [
            0x60, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x11, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8,
            0x00, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x03, 0xe8,
            0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, 0xca, 0xfe, 0xf0, 0x0d,
        ];
        let mut out = [0u8; 1500];
        let src: Ipv6Addr = ROUTER6.parse().unwrap();
        let kind = Icmp6Error::PacketTooBig { mtu: 1400 };
        let n = icmp6_error(&orig, false, kind, src, &mut out).unwrap();
        // The ICMPv6 checksum 0x0fd6 was summed by hand over the pseudo-header.
        let expected: [u8; 100] = [
            // IPv6: payload length 60, next header 58, hop limit 64.
            0x60, 0x00, 0x00, 0x00, 0x00, 0x3c, 0x3a, 0x40, //
            // Source 2001:db8:1::fe, destination 2001:db8:1::1.
            0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0xfe, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x01, //
            // ICMPv6: type 2 code 0, checksum, MTU 1400.
            0x02, 0x00, 0x0f, 0xd6, 0x00, 0x00, 0x05, 0x78, //
            // The original, whole.
            0x60, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x11, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8,
            0x00, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x03, 0xe8,
            0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, 0xca, 0xfe, 0xf0, 0x0d,
        ];
        assert_eq!(&out[..n], &expected[..]);
        assert!(verify6(&out[..n]));
        let ip = vfsr_wire::Ipv6Packet::new_checked(&out[..n]).unwrap();
        assert_eq!(ip.src_addr(), src);
    }

    #[test]
    fn a_cut_original_is_quoted_as_far_as_it_goes() {
        // Total length says 1428 bytes, only 100 are there (a capture cut short).
        let orig = udp4(1400);
        let n = icmp4_error(
            &orig[..100],
            false,
            Icmp4Error::NetUnreachable,
            ROUTER4,
            9,
            &mut [0u8; 600],
        )
        .unwrap();
        assert_eq!(n, 128);
        // The same for IPv6: payload length 1408, 100 bytes present.
        let orig6 = udp6(1400, 17, &[]);
        let src: Ipv6Addr = ROUTER6.parse().unwrap();
        let mut out = [0u8; 1500];
        let n = icmp6_error(&orig6[..100], false, Icmp6Error::NoRoute, src, &mut out).unwrap();
        assert_eq!(n, 148);
        assert_eq!(&out[48..148], &orig6[..100]);
        assert!(verify6(&out[..n]));
        // A header alone (IHL says 24 bytes, 22 present) is not enough.
        let mut p = udp4(4);
        p[0] = 0x46;
        assert_eq!(
            icmp4_error(
                &p[..22],
                false,
                Icmp4Error::TimeExceeded,
                ROUTER4,
                1,
                &mut out
            ),
            Err(Suppressed::Truncated)
        );
    }

    #[test]
    fn types_codes_and_names() {
        let v4 = [
            (Icmp4Error::TimeExceeded, (11, 0)),
            (Icmp4Error::NetUnreachable, (3, 0)),
            (Icmp4Error::HostUnreachable, (3, 1)),
            (Icmp4Error::FragNeeded { mtu: 1 }, (3, 4)),
            (Icmp4Error::AdminProhibited, (3, 13)),
            (Icmp4Error::ParamProblem { pointer: 1 }, (12, 0)),
        ];
        for (k, tc) in v4 {
            assert_eq!(k.type_code(), tc, "{k:?}");
        }
        let v6 = [
            (Icmp6Error::TimeExceeded, (3, 0)),
            (Icmp6Error::NoRoute, (1, 0)),
            (Icmp6Error::AdminProhibited, (1, 1)),
            (Icmp6Error::BeyondScope, (1, 2)),
            (Icmp6Error::AddressUnreachable, (1, 3)),
            (Icmp6Error::RejectRoute, (1, 6)),
            (Icmp6Error::PacketTooBig { mtu: 1 }, (2, 0)),
            (
                Icmp6Error::ParamProblem {
                    code: 1,
                    pointer: 6,
                },
                (4, 1),
            ),
        ];
        for (k, tc) in v6 {
            assert_eq!(k.type_code(), tc, "{k:?}");
        }
        // The pointer of a v4 Parameter Problem is byte 4 of the ICMP header.
        let mut out = [0u8; 600];
        let pp = Icmp4Error::ParamProblem { pointer: 9 };
        let n = icmp4_error(&udp4(4), false, pp, ROUTER4, 1, &mut out).unwrap();
        assert_eq!(&out[20..22], &[12, 0]);
        assert_eq!(&out[24..28], &[9, 0, 0, 0]);
        assert!(checksum::verify(&out[20..n]));
        let names = [
            Suppressed::IcmpError,
            Suppressed::Multicast,
            Suppressed::LinkBroadcast,
            Suppressed::Broadcast,
            Suppressed::NotFirstFragment,
            Suppressed::BadSource,
            Suppressed::Truncated,
            Suppressed::NoRoom,
        ]
        .map(|s| s.name());
        assert_eq!(
            names,
            [
                "icmp_error",
                "multicast",
                "link_broadcast",
                "broadcast",
                "not_first_fragment",
                "bad_source",
                "truncated",
                "no_room"
            ]
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(orig in proptest::collection::vec(any::<u8>(), 0..1600), room in 0usize..1600, lb: bool) {
            let mut out = vec![0u8; room];
            if let Ok(n) = icmp4_error(&orig, lb, Icmp4Error::TimeExceeded, ROUTER4, 1, &mut out) {
                prop_assert!(n <= room.min(MAX_ICMP4));
                prop_assert!(checksum::verify(&out[..20]));
                prop_assert!(checksum::verify(&out[20..n]));
            }
            let src: Ipv6Addr = ROUTER6.parse().unwrap();
            if let Ok(n) = icmp6_error(&orig, lb, Icmp6Error::PacketTooBig { mtu: 1280 }, src, &mut out) {
                prop_assert!(n <= room.min(MAX_ICMP6));
                prop_assert!(verify6(&out[..n]));
            }
        }

        /// The rules asked alone answer as the builders do wherever the buffer has room.
        #[test]
        fn the_rules_alone_agree_with_the_builders(
            mut orig in proptest::collection::vec(any::<u8>(), 0..200),
            v6: bool,
            ihl in 5u8..16,
            icmp_at in 20usize..80,
            icmp_type: u8,
            lb: bool,
            mtu: u16,
        ) {
            // A version nibble, no later fragment, and now and then ICMP in the payload, so
            // that every rule is reached, not only the first.
            if let Some(b) = orig.get_mut(0) {
                *b = if v6 { 0x60 } else { 0x40 | ihl };
            }
            if !v6 && orig.len() > 9 {
                orig[6] &= 0xe0;
                orig[7] = 0;
                if mtu % 3 == 0 {
                    orig[9] = ip_proto::ICMP;
                }
            }
            if v6 && orig.len() > 6 && mtu % 3 == 0 {
                orig[6] = ip_proto::ICMPV6;
            }
            if let Some(b) = orig.get_mut(icmp_at) {
                *b = icmp_type;
            }
            let mut out = vec![0u8; 1600];
            let k4 = Icmp4Error::FragNeeded { mtu };
            let built4 = icmp4_error(&orig, lb, k4, ROUTER4, 1, &mut out).map(|_| ());
            prop_assert_eq!(icmp4_allowed(&orig, lb), built4);
            let src: Ipv6Addr = ROUTER6.parse().unwrap();
            for k6 in [Icmp6Error::NoRoute, Icmp6Error::PacketTooBig { mtu: u32::from(mtu) }] {
                let built6 = icmp6_error(&orig, lb, k6, src, &mut out).map(|_| ());
                prop_assert_eq!(icmp6_allowed(&orig, lb, k6), built6);
            }
        }

        #[test]
        fn plausible_headers_never_panic(
            mut orig in proptest::collection::vec(any::<u8>(), 20..1600),
            ihl in 5u8..16,
            room in 0usize..1600,
            lb: bool,
            mtu: u16,
            pointer: u32,
        ) {
            // Random bytes rarely carry a version nibble; force it so the later checks run.
            let mut out = vec![0u8; room];
            orig[0] = 0x40 | ihl;
            // A random offset would almost always make it a later fragment.
            orig[6] &= 0xe0;
            orig[7] = 0;
            let kind = if mtu % 2 == 0 {
                Icmp4Error::FragNeeded { mtu }
            } else {
                Icmp4Error::ParamProblem { pointer: pointer as u8 }
            };
            if let Ok(n) = icmp4_error(&orig, lb, kind, ROUTER4, mtu, &mut out) {
                let stated = usize::from(u16::from_be_bytes([orig[2], orig[3]]));
                prop_assert!(n <= MAX_ICMP4 && n <= room);
                prop_assert!(n - 28 <= orig.len().min(stated.max(usize::from(ihl) * 4)));
                prop_assert_eq!(&out[28..n], &orig[..n - 28]);
                prop_assert!(checksum::verify(&out[..20]));
                prop_assert!(checksum::verify(&out[20..n]));
            }
            orig[0] = 0x60;
            let src: Ipv6Addr = ROUTER6.parse().unwrap();
            let kind = if mtu % 2 == 0 {
                Icmp6Error::PacketTooBig { mtu: u32::from(mtu) }
            } else {
                Icmp6Error::ParamProblem { code: (mtu % 3) as u8, pointer }
            };
            if let Ok(n) = icmp6_error(&orig, lb, kind, src, &mut out) {
                prop_assert!(n <= MAX_ICMP6 && n <= room);
                prop_assert_eq!(&out[48..n], &orig[..n - 48]);
                prop_assert!(verify6(&out[..n]));
            }
        }
    }
}
