//! Netlink bytes → [`Message`]s.
//!
//! A buffer (one FPM frame's payload, or one datagram from the kernel) holds netlink messages
//! back to back, each starting on a 4-byte boundary:
//!
//! ```text
//!  0               4       6       8              12              16
//!  +---------------+-------+-------+---------------+---------------+------------------+
//!  | nlmsg_len     | type  | flags | nlmsg_seq     | nlmsg_pid     | payload ...      |
//!  +---------------+-------+-------+---------------+---------------+------------------+
//!  |<------------------------- nlmsg_len (header included) ------------------------->| pad to 4
//!
//!  RTM_*ROUTE payload:    struct rtmsg (12 bytes)  then RTA_* attributes
//!  RTM_*NEXTHOP payload:  struct nhmsg (8 bytes)   then NHA_* attributes
//!  RTM_*LINK payload:     struct ifinfomsg (16)    then IFLA_* attributes
//!  RTM_*ADDR payload:     struct ifaddrmsg (8)     then IFA_* attributes
//!
//!  attribute:  +---------+----------+--------------+  pad to 4
//!              | rta_len | rta_type | value ...    |
//!              +---------+----------+--------------+
//!              |<------------ rta_len ---------->|
//! ```
//!
//! The framing loop walks the messages with `netlink-packet-core`'s [`NetlinkBuffer`]; each
//! message's fixed header is read with `netlink-packet-route`'s header types
//! ([`RouteHeader`], [`LinkHeader`], [`AddressHeader`]; [`NextHopHeader`] for the next-hop
//! objects that crate lacks), and its attributes are walked with [`NlasIterator`] and parsed
//! one by one with the crates' attribute types ([`RouteAttribute`], [`LinkAttribute`],
//! [`AddressAttribute`], [`NextHopAttribute`]), only for the attribute kinds a [`Message`]
//! carries: the others are counted ([`DecodeStats::unused_attrs`]) without being parsed, which
//! is both faster and keeps an attribute nobody reads from rejecting a route.
//!
//! # Outcomes
//!
//! - decoded: pushed as a [`Message`], counted by kind;
//! - skipped: a message type this crate does not read (counted in
//!   [`DecodeStats::unknown_types`]), or a message it reads but cannot use (a route of
//!   another family, an address of the wrong length...: counted by [`SkipReason`]);
//! - [`DecodeError`]: the buffer cannot be walked (a header whose length is shorter than the
//!   header or runs past the buffer) or a message's fixed header or attribute framing is
//!   broken. The buffer is unusable as a whole: nothing from it is pushed, its counts are not
//!   kept. On an FPM connection this closes the connection.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use netlink_packet_core::ParseableParametrized;
use netlink_packet_core::{ErrorBuffer, NetlinkBuffer, NlaBuffer, NlasIterator, Parseable};
use netlink_packet_route::address::{AddressAttribute, AddressHeader};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkHeader};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteLwEnCapType, RouteNextHop, RouteVia,
};
use netlink_packet_route::AddressFamily;

use crate::consts::*;
use crate::msg::{Addr, Link, Message, NextHop, NextHopMsg, NextHopObject, Op, Route, RouteType};
use crate::nhmsg::{NextHopAttribute, NextHopHeader, NHMSG_LEN};

/// `sizeof(struct rtmsg)`.
const RTMSG_LEN: usize = 12;
/// `sizeof(struct ifinfomsg)`.
const IFINFOMSG_LEN: usize = 16;
/// `sizeof(struct ifaddrmsg)`.
const IFADDRMSG_LEN: usize = 8;

/// Why a message of a type this crate reads was skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// The address family is neither IPv4 nor IPv6 (MPLS routes, multicast routing tables
    /// `RTNL_FAMILY_IPMR`/`IP6MR`, ...), or, for a link, not `AF_UNSPEC` (`AF_BRIDGE`
    /// messages describe bridge ports).
    Family,
    /// The prefix length exceeds the family's address length.
    PrefixLen,
    /// An address attribute (`RTA_DST`, `RTA_GATEWAY`, `RTA_VIA`, `NHA_GATEWAY`, `IFA_*`) has
    /// the wrong length or family.
    Address,
    /// Another attribute the message needs has a value the netlink crates refuse (an
    /// `RTA_OIF` that is not 4 bytes, an `IFLA_IFNAME` that is not UTF-8...).
    Value,
    /// A required part is missing: `NHA_ID`; both `IFA_LOCAL` and `IFA_ADDRESS`; `RTA_DST`
    /// with a non-zero prefix length.
    Missing,
    /// `NHA_GROUP` is empty or not a whole number of `struct nexthop_grp`.
    Group,
    /// The route or next hop carries a lightweight tunnel encapsulation (`RTA_ENCAP`,
    /// `NHA_ENCAP`: MPLS labels, SRv6, ...), which plain IP forwarding would get wrong.
    Encap,
    /// `RTM_F_CLONED`: a route-cache exception (PMTU, redirect), not a route.
    Cloned,
    /// An IPv4 route selected by TOS (`rtm_tos` ≠ 0): not a destination-only route.
    Tos,
}

impl SkipReason {
    /// Every reason, in the order of [`SkipCounts::by_reason`].
    pub const ALL: [SkipReason; 9] = [
        SkipReason::Family,
        SkipReason::PrefixLen,
        SkipReason::Address,
        SkipReason::Value,
        SkipReason::Missing,
        SkipReason::Group,
        SkipReason::Encap,
        SkipReason::Cloned,
        SkipReason::Tos,
    ];

    /// A short stable name, for counters.
    pub fn name(self) -> &'static str {
        match self {
            SkipReason::Family => "family",
            SkipReason::PrefixLen => "prefix_len",
            SkipReason::Address => "address",
            SkipReason::Value => "value",
            SkipReason::Missing => "missing",
            SkipReason::Group => "group",
            SkipReason::Encap => "encap",
            SkipReason::Cloned => "cloned",
            SkipReason::Tos => "tos",
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Messages skipped, by [`SkipReason`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SkipCounts {
    /// [`SkipReason::Family`].
    pub family: u64,
    /// [`SkipReason::PrefixLen`].
    pub prefix_len: u64,
    /// [`SkipReason::Address`].
    pub address: u64,
    /// [`SkipReason::Value`].
    pub value: u64,
    /// [`SkipReason::Missing`].
    pub missing: u64,
    /// [`SkipReason::Group`].
    pub group: u64,
    /// [`SkipReason::Encap`].
    pub encap: u64,
    /// [`SkipReason::Cloned`].
    pub cloned: u64,
    /// [`SkipReason::Tos`].
    pub tos: u64,
}

impl SkipCounts {
    fn slot(&mut self, reason: SkipReason) -> &mut u64 {
        match reason {
            SkipReason::Family => &mut self.family,
            SkipReason::PrefixLen => &mut self.prefix_len,
            SkipReason::Address => &mut self.address,
            SkipReason::Value => &mut self.value,
            SkipReason::Missing => &mut self.missing,
            SkipReason::Group => &mut self.group,
            SkipReason::Encap => &mut self.encap,
            SkipReason::Cloned => &mut self.cloned,
            SkipReason::Tos => &mut self.tos,
        }
    }

    /// The count of one reason.
    pub fn get(&self, reason: SkipReason) -> u64 {
        let mut copy = *self;
        *copy.slot(reason)
    }

    /// Counts one skipped message.
    pub fn add(&mut self, reason: SkipReason) {
        *self.slot(reason) += 1;
    }

    /// All skipped messages.
    pub fn total(&self) -> u64 {
        SkipReason::ALL.iter().map(|r| self.get(*r)).sum()
    }

    /// `(name, count)` for every reason, for counters.
    pub fn by_reason(&self) -> [(&'static str, u64); 9] {
        SkipReason::ALL.map(|r| (r.name(), self.get(r)))
    }
}

/// What a decoder saw. Plain counters: add them up across calls, copy them out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// `RTM_NEWROUTE`/`RTM_DELROUTE` decoded into [`Message::Route`].
    pub routes: u64,
    /// `RTM_NEWNEXTHOP`/`RTM_DELNEXTHOP` decoded into [`Message::NextHop`].
    pub nexthops: u64,
    /// `RTM_NEWLINK`/`RTM_DELLINK` decoded into [`Message::Link`].
    pub links: u64,
    /// `RTM_NEWADDR`/`RTM_DELADDR` decoded into [`Message::Addr`].
    pub addrs: u64,
    /// `NLMSG_DONE`.
    pub done: u64,
    /// `NLMSG_ERROR` (acknowledgements, code 0, included).
    pub errors: u64,
    /// `NLMSG_NOOP`, skipped.
    pub noops: u64,
    /// Messages of a type this crate does not read (neighbours, rules, `NLMSG_OVERRUN`...),
    /// skipped.
    pub unknown_types: u64,
    /// Attributes of decoded or skipped messages that no [`Message`] field takes
    /// (`RTA_CACHEINFO`, `RTA_PREFSRC`, `IFLA_STATS64`, ...), skipped unparsed.
    pub unused_attrs: u64,
    /// Messages flagged `NLM_F_DUMP_INTR`: the dump they belong to was inconsistent (the
    /// table changed under it) and should be redone.
    pub dump_interrupted: u64,
    /// Messages of a type this crate reads that it could not use, by reason.
    pub skipped: SkipCounts,
}

impl DecodeStats {
    /// Messages turned into [`Message`]s.
    pub fn decoded(&self) -> u64 {
        self.routes + self.nexthops + self.links + self.addrs + self.done + self.errors
    }

    /// Adds another set of counts to this one.
    pub fn add(&mut self, other: &DecodeStats) {
        self.routes += other.routes;
        self.nexthops += other.nexthops;
        self.links += other.links;
        self.addrs += other.addrs;
        self.done += other.done;
        self.errors += other.errors;
        self.noops += other.noops;
        self.unknown_types += other.unknown_types;
        self.unused_attrs += other.unused_attrs;
        self.dump_interrupted += other.dump_interrupted;
        for r in SkipReason::ALL {
            *self.skipped.slot(r) += other.skipped.get(r);
        }
    }
}

/// A buffer that cannot be decoded as a whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// A netlink header at `offset` is incomplete (`len` is `None`: fewer than 16 bytes
    /// remain), or its `nlmsg_len` is shorter than the header or runs past the buffer.
    Truncated {
        /// Where the header starts in the buffer.
        offset: usize,
        /// `nlmsg_len`, when the header is complete.
        len: Option<u32>,
        /// Bytes from `offset` to the end of the buffer.
        available: usize,
    },
    /// The message at `offset` is of a type this crate reads, but its fixed header is short
    /// or its attributes' framing is broken: the netlink crates refuse it.
    Malformed {
        /// Where the message starts in the buffer.
        offset: usize,
        /// `nlmsg_type`.
        msg_type: u16,
        /// What the crates said.
        detail: String,
    },
}

impl DecodeError {
    /// A short stable name, for counters: `truncated` or `malformed`.
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeError::Truncated { .. } => "truncated",
            DecodeError::Malformed { .. } => "malformed",
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated {
                offset,
                len: None,
                available,
            } => write!(
                f,
                "truncated netlink header at offset {offset}: {available} bytes left, \
                 a header is {NLMSG_HDRLEN}"
            ),
            DecodeError::Truncated {
                offset,
                len: Some(len),
                available,
            } => write!(
                f,
                "bad netlink length at offset {offset}: nlmsg_len {len}, {available} bytes left \
                 (a message is at least {NLMSG_HDRLEN})"
            ),
            DecodeError::Malformed {
                offset,
                msg_type,
                detail,
            } => write!(
                f,
                "malformed netlink message of type {msg_type} at offset {offset}: {detail}"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Decodes every message of `bytes` (concatenated netlink messages) into a new vector.
pub fn decode(bytes: &[u8], stats: &mut DecodeStats) -> Result<Vec<Message>, DecodeError> {
    let mut out = Vec::new();
    decode_into(bytes, &mut out, stats)?;
    Ok(out)
}

/// Decodes every message of `bytes`, pushing them onto `out`; returns how many were pushed.
///
/// On error, `out` and `stats` are as they were on entry: a buffer is taken whole or not at
/// all (an FPM frame may carry a delete and the add that replaces it; applying one without
/// the other would lose a route).
pub fn decode_into(
    bytes: &[u8],
    out: &mut Vec<Message>,
    stats: &mut DecodeStats,
) -> Result<usize, DecodeError> {
    let first = out.len();
    let saved = *stats;
    match walk(bytes, out, None, stats) {
        Ok(()) => Ok(out.len() - first),
        Err(e) => {
            out.truncate(first);
            *stats = saved;
            Err(e)
        }
    }
}

/// As [`decode_into`], and for each message pushed whether it belongs to a dump
/// (`NLM_F_MULTI` set in its header) rather than being a notification, pushed onto `multi`
/// (which keeps the same length as `out` grows by).
pub fn decode_into_marked(
    bytes: &[u8],
    out: &mut Vec<Message>,
    multi: &mut Vec<bool>,
    stats: &mut DecodeStats,
) -> Result<usize, DecodeError> {
    let first = out.len();
    let first_multi = multi.len();
    let saved = *stats;
    match walk(bytes, out, Some(multi), stats) {
        Ok(()) => Ok(out.len() - first),
        Err(e) => {
            out.truncate(first);
            multi.truncate(first_multi);
            *stats = saved;
            Err(e)
        }
    }
}

/// `NLM_F_MULTI`: the message is one of several answering a request (a dump).
const NLM_F_MULTI_FLAG: u16 = 0x2;

fn walk(
    bytes: &[u8],
    out: &mut Vec<Message>,
    mut multi: Option<&mut Vec<bool>>,
    stats: &mut DecodeStats,
) -> Result<(), DecodeError> {
    let mut offset = 0usize;
    while let Some(rest) = bytes.get(offset..).filter(|r| !r.is_empty()) {
        let Ok(buf) = NetlinkBuffer::new_checked(rest) else {
            let len = rest
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_ne_bytes)
                .filter(|_| rest.len() >= NLMSG_HDRLEN);
            return Err(DecodeError::Truncated {
                offset,
                len,
                available: rest.len(),
            });
        };
        let len = buf.length() as usize;
        let msg_type = buf.message_type();
        let flags = buf.flags();
        if flags & NLM_F_DUMP_INTR != 0 {
            stats.dump_interrupted += 1;
        }
        let before = out.len();
        one(msg_type, flags, buf.payload(), out, stats).map_err(|detail| {
            DecodeError::Malformed {
                offset,
                msg_type,
                detail,
            }
        })?;
        if let Some(m) = multi.as_deref_mut() {
            let added = out.len().saturating_sub(before);
            m.extend(std::iter::repeat_n(flags & NLM_F_MULTI_FLAG != 0, added));
        }
        // The next message starts at the next 4-byte boundary; the last one may end unpadded.
        offset = offset.saturating_add(len.next_multiple_of(NLMSG_ALIGNTO));
    }
    Ok(())
}

/// Decodes one message; `Err` carries the netlink crates' complaint (the buffer is then
/// malformed as a whole).
fn one(
    msg_type: u16,
    flags: u16,
    payload: &[u8],
    out: &mut Vec<Message>,
    stats: &mut DecodeStats,
) -> Result<(), String> {
    let op = |new: u16| if msg_type == new { Op::New } else { Op::Del };
    // NLM_F_REPLACE shares its bit with NLM_F_NONREC on deletes: it means replace on RTM_NEW*.
    let replace = |new: u16| msg_type == new && flags & NLM_F_REPLACE != 0;
    let decoded = match msg_type {
        NLMSG_NOOP => {
            stats.noops += 1;
            return Ok(());
        }
        NLMSG_DONE => {
            stats.done += 1;
            Ok(Message::Done)
        }
        NLMSG_ERROR => {
            let code = ErrorBuffer::new_checked(payload)
                .map_err(|e| e.to_string())?
                .code()
                .map_or(0, |c| c.get());
            stats.errors += 1;
            Ok(Message::Error(code))
        }
        RTM_NEWROUTE | RTM_DELROUTE => {
            route(op(RTM_NEWROUTE), replace(RTM_NEWROUTE), payload, stats)?.map(|r| {
                stats.routes += 1;
                Message::Route(r)
            })
        }
        RTM_NEWNEXTHOP | RTM_DELNEXTHOP => {
            nexthop(op(RTM_NEWNEXTHOP), replace(RTM_NEWNEXTHOP), payload, stats)?.map(|n| {
                stats.nexthops += 1;
                Message::NextHop(n)
            })
        }
        RTM_NEWLINK | RTM_DELLINK => link(op(RTM_NEWLINK), payload, stats)?.map(|l| {
            stats.links += 1;
            Message::Link(l)
        }),
        RTM_NEWADDR | RTM_DELADDR => addr(op(RTM_NEWADDR), payload, stats)?.map(|a| {
            stats.addrs += 1;
            Message::Addr(a)
        }),
        _ => {
            stats.unknown_types += 1;
            return Ok(());
        }
    };
    match decoded {
        Ok(m) => out.push(m),
        Err(reason) => stats.skipped.add(reason),
    }
    Ok(())
}

/// The outcome of one message: `Err(String)` = malformed (the whole buffer fails),
/// `Ok(Err(reason))` = skipped, `Ok(Ok(m))` = decoded.
type Outcome<T> = Result<Result<T, SkipReason>, String>;

/// Walks the attributes of `attrs`, calling `f` with each; framing errors are malformed.
fn attributes<'a>(attrs: &'a [u8], mut f: impl FnMut(NlaBuffer<&'a [u8]>)) -> Result<(), String> {
    for nla in NlasIterator::new(attrs) {
        f(nla.map_err(|e| format!("attribute framing: {e}"))?);
    }
    Ok(())
}

/// The prefix length limit of a family.
fn max_len(family: AddressFamily) -> Option<u8> {
    match family {
        AddressFamily::Inet => Some(32),
        AddressFamily::Inet6 => Some(128),
        _ => None,
    }
}

fn unspecified(family: AddressFamily) -> IpAddr {
    if family == AddressFamily::Inet6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

fn route_address(a: &RouteAddress) -> Result<IpAddr, SkipReason> {
    match a {
        RouteAddress::Inet(v4) => Ok(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Ok(IpAddr::V6(*v6)),
        _ => Err(SkipReason::Address),
    }
}

fn via_address(v: &RouteVia) -> Result<IpAddr, SkipReason> {
    match v {
        RouteVia::Inet(v4) => Ok(IpAddr::V4(*v4)),
        RouteVia::Inet6(v6) => Ok(IpAddr::V6(*v6)),
        _ => Err(SkipReason::Address),
    }
}

fn route_type(kind: u8) -> RouteType {
    match kind {
        RTN_UNICAST => RouteType::Unicast,
        RTN_LOCAL => RouteType::Local,
        RTN_BLACKHOLE => RouteType::Blackhole,
        RTN_UNREACHABLE => RouteType::Unreachable,
        RTN_PROHIBIT => RouteType::Prohibit,
        other => RouteType::Other(other),
    }
}

/// The first skip reason seen wins; later ones are not counted again.
fn note(first: &mut Option<SkipReason>, reason: SkipReason) {
    first.get_or_insert(reason);
}

/// One `rtnexthop` of `RTA_MULTIPATH` (its gateway from its own `RTA_GATEWAY` or `RTA_VIA`).
fn multipath_hop(nh: &RouteNextHop, stats: &mut DecodeStats) -> Result<NextHop, SkipReason> {
    let mut gateway = None;
    for attr in &nh.attributes {
        match attr {
            RouteAttribute::Gateway(a) => gateway = Some(route_address(a)?),
            RouteAttribute::Via(v) => gateway = Some(via_address(v)?),
            RouteAttribute::Encap(_) | RouteAttribute::EncapType(_) => {
                return Err(SkipReason::Encap)
            }
            _ => stats.unused_attrs += 1,
        }
    }
    Ok(NextHop {
        gateway,
        oif: (nh.interface_index != 0).then_some(nh.interface_index),
        weight: u16::from(nh.hops) + 1,
        onlink: nh.flags.bits() & (RTNH_F_ONLINK as u8) != 0,
    })
}

fn route(op: Op, replace: bool, payload: &[u8], stats: &mut DecodeStats) -> Outcome<Route> {
    let header = RouteHeader::parse(payload).map_err(|e| format!("rtmsg: {e}"))?;
    let family = header.address_family;
    let Some(max) = max_len(family) else {
        return Ok(Err(SkipReason::Family));
    };
    let rtm_flags = header.flags.bits();
    let mut skip = None;
    if header.destination_prefix_length > max || header.source_prefix_length > max {
        note(&mut skip, SkipReason::PrefixLen);
    }
    if rtm_flags & RTM_F_CLONED != 0 {
        note(&mut skip, SkipReason::Cloned);
    }
    if header.tos != 0 {
        note(&mut skip, SkipReason::Tos);
    }
    let kind = u8::from(header.kind);
    let param = (family, header.kind, RouteLwEnCapType::None);

    let mut dst = None;
    let mut table = None;
    let mut priority = None;
    let mut gateway = None;
    let mut oif = None;
    let mut nhid = None;
    let mut multipath = Vec::new();
    attributes(payload.get(RTMSG_LEN..).unwrap_or_default(), |nla| {
        let wanted = matches!(
            nla.kind(),
            RTA_DST
                | RTA_GATEWAY
                | RTA_VIA
                | RTA_OIF
                | RTA_PRIORITY
                | RTA_TABLE
                | RTA_MULTIPATH
                | RTA_NH_ID
        );
        if nla.kind() == RTA_ENCAP {
            note(&mut skip, SkipReason::Encap);
            return;
        }
        if !wanted {
            stats.unused_attrs += 1;
            return;
        }
        let address = matches!(nla.kind(), RTA_DST | RTA_GATEWAY | RTA_VIA);
        let parsed = RouteAttribute::parse_with_param(&nla, param);
        let result = match parsed {
            Err(_) if address => Err(SkipReason::Address),
            Err(_) => Err(SkipReason::Value),
            Ok(RouteAttribute::Destination(a)) => route_address(&a).map(|a| dst = Some(a)),
            Ok(RouteAttribute::Gateway(a)) => route_address(&a).map(|a| gateway = Some(a)),
            Ok(RouteAttribute::Via(v)) => via_address(&v).map(|a| gateway = Some(a)),
            Ok(RouteAttribute::Oif(i)) => {
                oif = Some(i);
                Ok(())
            }
            Ok(RouteAttribute::Priority(p)) => {
                priority = Some(p);
                Ok(())
            }
            Ok(RouteAttribute::Table(t)) => {
                table = Some(t);
                Ok(())
            }
            Ok(RouteAttribute::NhId(id)) => {
                nhid = Some(id);
                Ok(())
            }
            Ok(RouteAttribute::MultiPath(hops)) => hops
                .iter()
                .map(|nh| multipath_hop(nh, stats))
                .collect::<Result<Vec<_>, _>>()
                .map(|v| multipath = v),
            Ok(_) => {
                stats.unused_attrs += 1;
                Ok(())
            }
        };
        if let Err(reason) = result {
            note(&mut skip, reason);
        }
    })?;
    if let Some(reason) = skip {
        return Ok(Err(reason));
    }
    let dst = match dst {
        Some(addr) => (addr, header.destination_prefix_length),
        None if header.destination_prefix_length == 0 => (unspecified(family), 0),
        None => return Ok(Err(SkipReason::Missing)),
    };
    let nexthops = if nhid.is_some() {
        // The kernel adds the object's next hops for older readers (nexthop_compat_mode);
        // the id is what counts.
        Vec::new()
    } else if !multipath.is_empty() {
        multipath
    } else if gateway.is_some() || oif.is_some() {
        vec![NextHop {
            gateway,
            oif,
            weight: 1,
            onlink: rtm_flags & RTNH_F_ONLINK != 0,
        }]
    } else {
        Vec::new()
    };
    Ok(Ok(Route {
        op,
        replace,
        dst,
        table: table.unwrap_or(u32::from(header.table)),
        protocol: u8::from(header.protocol),
        scope: u8::from(header.scope),
        kind: route_type(kind),
        priority,
        nexthops,
        nhid,
        src_len: header.source_prefix_length,
    }))
}

fn nexthop(op: Op, replace: bool, payload: &[u8], stats: &mut DecodeStats) -> Outcome<NextHopMsg> {
    let header = NextHopHeader::parse(payload).map_err(|e| format!("nhmsg: {e}"))?;
    let mut skip = None;
    let mut id = None;
    let mut gateway = None;
    let mut oif = None;
    let mut blackhole = false;
    let mut group = None;
    attributes(payload.get(NHMSG_LEN..).unwrap_or_default(), |nla| {
        let kind = nla.kind();
        match kind {
            NHA_ENCAP => return note(&mut skip, SkipReason::Encap),
            NHA_ID | NHA_GATEWAY | NHA_OIF | NHA_BLACKHOLE | NHA_GROUP => {}
            _ => {
                stats.unused_attrs += 1;
                return;
            }
        }
        let result = match NextHopAttribute::parse(&nla) {
            Err(_) if kind == NHA_GATEWAY => Err(SkipReason::Address),
            Err(_) if kind == NHA_GROUP => Err(SkipReason::Group),
            Err(_) => Err(SkipReason::Value),
            Ok(NextHopAttribute::Id(v)) => {
                id = Some(v);
                Ok(())
            }
            Ok(NextHopAttribute::Oif(v)) => {
                oif = Some(v);
                Ok(())
            }
            Ok(NextHopAttribute::Blackhole) => {
                blackhole = true;
                Ok(())
            }
            Ok(NextHopAttribute::Group(members)) => {
                group = Some(members);
                Ok(())
            }
            Ok(NextHopAttribute::Gateway(a)) => {
                let fits = matches!(
                    (header.family, a),
                    (AF_INET, IpAddr::V4(_)) | (AF_INET6, IpAddr::V6(_))
                );
                if fits {
                    gateway = Some(a);
                    Ok(())
                } else {
                    Err(SkipReason::Address)
                }
            }
            Ok(_) => {
                stats.unused_attrs += 1;
                Ok(())
            }
        };
        if let Err(reason) = result {
            note(&mut skip, reason);
        }
    })?;
    if let Some(reason) = skip {
        return Ok(Err(reason));
    }
    let Some(id) = id else {
        return Ok(Err(SkipReason::Missing));
    };
    let object = if let Some(members) = group {
        NextHopObject::Group(
            members
                .iter()
                .map(|m| (m.id, u16::try_from(m.share()).unwrap_or(u16::MAX)))
                .collect(),
        )
    } else if blackhole {
        NextHopObject::Blackhole
    } else {
        NextHopObject::Single(NextHop {
            gateway,
            oif,
            weight: 1,
            onlink: header.flags & RTNH_F_ONLINK != 0,
        })
    };
    Ok(Ok(NextHopMsg {
        op,
        replace,
        id,
        protocol: header.protocol,
        object,
    }))
}

fn link(op: Op, payload: &[u8], stats: &mut DecodeStats) -> Outcome<Link> {
    let header = LinkHeader::parse(payload).map_err(|e| format!("ifinfomsg: {e}"))?;
    let family = header.interface_family;
    // Interfaces are AF_UNSPEC; AF_BRIDGE messages describe bridge ports (an RTM_DELLINK of
    // that family is a port leaving its bridge, not an interface going away).
    if family != AddressFamily::Unspec {
        return Ok(Err(SkipReason::Family));
    }
    let mut skip = None;
    let mut name = None;
    let mut mac = None;
    let mut mtu = None;
    attributes(payload.get(IFINFOMSG_LEN..).unwrap_or_default(), |nla| {
        if !matches!(nla.kind(), IFLA_IFNAME | IFLA_ADDRESS | IFLA_MTU) {
            stats.unused_attrs += 1;
            return;
        }
        match LinkAttribute::parse_with_param(&nla, family) {
            Ok(LinkAttribute::IfName(n)) => name = Some(n),
            Ok(LinkAttribute::Address(a)) => mac = <[u8; 6]>::try_from(a.as_slice()).ok(),
            Ok(LinkAttribute::Mtu(m)) => mtu = Some(m),
            Ok(_) => stats.unused_attrs += 1,
            Err(_) => note(&mut skip, SkipReason::Value),
        }
    })?;
    if let Some(reason) = skip {
        return Ok(Err(reason));
    }
    let flags = header.flags;
    Ok(Ok(Link {
        op,
        ifindex: header.index,
        name,
        admin_up: flags.contains(LinkFlags::Up),
        lower_up: flags.contains(LinkFlags::LowerUp),
        mac,
        mtu,
    }))
}

fn addr(op: Op, payload: &[u8], stats: &mut DecodeStats) -> Outcome<Addr> {
    let header = AddressHeader::parse(payload).map_err(|e| format!("ifaddrmsg: {e}"))?;
    let Some(max) = max_len(header.family) else {
        return Ok(Err(SkipReason::Family));
    };
    let v6 = header.family == AddressFamily::Inet6;
    let mut skip = (header.prefix_len > max).then_some(SkipReason::PrefixLen);
    let mut local = None;
    let mut address = None;
    attributes(payload.get(IFADDRMSG_LEN..).unwrap_or_default(), |nla| {
        if !matches!(nla.kind(), IFA_LOCAL | IFA_ADDRESS) {
            stats.unused_attrs += 1;
            return;
        }
        match AddressAttribute::parse(&nla) {
            Ok(AddressAttribute::Local(a)) if a.is_ipv6() == v6 => local = Some(a),
            Ok(AddressAttribute::Address(a)) if a.is_ipv6() == v6 => address = Some(a),
            Ok(AddressAttribute::Local(_) | AddressAttribute::Address(_)) | Err(_) => {
                note(&mut skip, SkipReason::Address)
            }
            Ok(_) => stats.unused_attrs += 1,
        }
    })?;
    if let Some(reason) = skip {
        return Ok(Err(reason));
    }
    let Some(addr) = local.or(address) else {
        return Ok(Err(SkipReason::Missing));
    };
    Ok(Ok(Addr {
        op,
        ifindex: header.index,
        addr,
        prefix_len: header.prefix_len,
    }))
}
