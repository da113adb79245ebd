//! [`Message`]s → netlink bytes, built with the `netlink-packet-route` message types (and
//! [`crate::nhmsg`] for next-hop objects), for tests, fuzz seeds and the FPM replay
//! benchmark. What [`crate::decode()`] reads back is the message that was encoded.
//!
//! The bytes are what a sender would produce:
//!
//! - routes: `struct rtmsg` (`rtm_table` = the table if below 256, else `RT_TABLE_COMPAT`),
//!   then `RTA_TABLE` (always), `RTA_DST` (left out for the default route), `RTA_PRIORITY`,
//!   `RTA_NH_ID`, and the next hops: one with weight 1 as `RTA_GATEWAY` (`RTA_VIA` when the
//!   gateway's family differs from the route's) + `RTA_OIF`, with `RTNH_F_ONLINK` in
//!   `rtm_flags`; several, or one with another weight, as `RTA_MULTIPATH`;
//! - next-hop objects: `struct nhmsg` (family of the gateway, `AF_UNSPEC` otherwise), `NHA_ID`,
//!   then `NHA_GROUP`, `NHA_BLACKHOLE` or `NHA_OIF` + `NHA_GATEWAY`;
//! - links: `struct ifinfomsg` with `IFF_UP`/`IFF_LOWER_UP`, `IFLA_IFNAME`, `IFLA_ADDRESS`,
//!   `IFLA_MTU`;
//! - addresses: `struct ifaddrmsg`, `IFA_ADDRESS`, and `IFA_LOCAL` for IPv4 (as the kernel
//!   sends them);
//! - `NLMSG_DONE` (code 0) and `NLMSG_ERROR` (the code, then an all-zero request header).
//!
//! Header flags: `NLM_F_REQUEST`, plus `NLM_F_CREATE` on `RTM_NEW*` and `NLM_F_REPLACE` when
//! the message says replace (a delete never carries it: the bit means "non-recursive" there);
//! `NLM_F_MULTI` on `NLMSG_DONE`.
//!
//! Values the wire cannot hold are clamped: a multipath weight above 256 is sent as 256, a
//! weight of 0 as 1; a group member's weight 0 as 1. An attribute's length is 16 bits, so
//! lists are cut to fit in [`MAX_ATTRIBUTE_VALUE`] bytes: the next hops of a route that fit,
//! at most [`MAX_MEMBERS`] members of a group, [`MAX_NAME`] bytes of an interface name. (A
//! message longer than 65,535 bytes does not fit in an FPM frame either: see
//! [`crate::fpm::frame`].)

use std::net::IpAddr;

use netlink_packet_core::{Emitable, NetlinkHeader};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::route::{
    RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteNextHop, RouteNextHopFlags,
    RouteVia,
};
use netlink_packet_route::AddressFamily;

use crate::consts::*;
use crate::msg::{Addr, Link, Message, NextHop, NextHopMsg, NextHopObject, Op, Route, RouteType};
use crate::nhmsg::{NextHopAttribute, NextHopGroupEntry, NextHopHeader, NextHopMessage};

/// The largest attribute value (`rta_len` is 16 bits and counts the 4-byte header).
pub const MAX_ATTRIBUTE_VALUE: usize = u16::MAX as usize - 4;
/// The most members of one group written into `NHA_GROUP` (8 bytes each).
pub const MAX_MEMBERS: usize = MAX_ATTRIBUTE_VALUE / 8;
/// The most bytes of an interface name written into `IFLA_IFNAME` (Linux allows 15; the
/// value also holds the terminating NUL).
pub const MAX_NAME: usize = MAX_ATTRIBUTE_VALUE - 1;

/// Encodes one message with sequence number `seq` into a new vector.
pub fn encode(msg: &Message, seq: u32) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(msg, seq, &mut out);
    out
}

/// Appends one encoded message (sequence number `seq`, port 0) to `out`.
pub fn encode_into(msg: &Message, seq: u32, out: &mut Vec<u8>) {
    match msg {
        Message::Route(r) => {
            let (t, f) = new_or_del(r.op, r.replace, RTM_NEWROUTE, RTM_DELROUTE);
            emit(t, f, seq, &route_message(r), out)
        }
        Message::NextHop(n) => {
            let (t, f) = new_or_del(n.op, n.replace, RTM_NEWNEXTHOP, RTM_DELNEXTHOP);
            emit(t, f, seq, &nexthop_message(n), out)
        }
        Message::Link(l) => {
            let (t, f) = new_or_del(l.op, false, RTM_NEWLINK, RTM_DELLINK);
            emit(t, f, seq, &link_message(l), out)
        }
        Message::Addr(a) => {
            let (t, f) = new_or_del(a.op, false, RTM_NEWADDR, RTM_DELADDR);
            emit(t, f, seq, &addr_message(a), out)
        }
        Message::Done => emit(NLMSG_DONE, NLM_F_MULTI, seq, &RawBody(&[0; 4]), out),
        Message::Error(code) => {
            let mut body = [0u8; 4 + NLMSG_HDRLEN];
            if let Some(dst) = body.get_mut(..4) {
                dst.copy_from_slice(&code.to_ne_bytes());
            }
            emit(NLMSG_ERROR, 0, seq, &RawBody(&body), out)
        }
    }
}

/// The message type and header flags of a `RTM_NEW*`/`RTM_DEL*` pair.
fn new_or_del(op: Op, replace: bool, new: u16, del: u16) -> (u16, u16) {
    match op {
        Op::New if replace => (new, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE),
        Op::New => (new, NLM_F_REQUEST | NLM_F_CREATE),
        Op::Del => (del, NLM_F_REQUEST),
    }
}

/// A payload that is already bytes.
struct RawBody<'a>(&'a [u8]);

impl Emitable for RawBody<'_> {
    fn buffer_len(&self) -> usize {
        self.0.len()
    }

    fn emit(&self, buffer: &mut [u8]) {
        if let Some(dst) = buffer.get_mut(..self.0.len()) {
            dst.copy_from_slice(self.0);
        }
    }
}

/// Appends `nlmsghdr` + `body` (padded to 4 bytes) to `out`.
pub(crate) fn emit(msg_type: u16, flags: u16, seq: u32, body: &dyn Emitable, out: &mut Vec<u8>) {
    let body_len = body.buffer_len();
    let len = NLMSG_HDRLEN + body_len;
    let mut header = NetlinkHeader::default();
    header.length = u32::try_from(len).unwrap_or(u32::MAX);
    header.message_type = msg_type;
    header.flags = flags;
    header.sequence_number = seq;
    let start = out.len();
    out.resize(start + len.next_multiple_of(NLMSG_ALIGNTO), 0);
    if let Some(dst) = out.get_mut(start..start + NLMSG_HDRLEN) {
        header.emit(dst);
    }
    if let Some(dst) = out.get_mut(start + NLMSG_HDRLEN..start + len) {
        body.emit(dst);
    }
}

fn family_of(addr: IpAddr) -> AddressFamily {
    match addr {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    }
}

fn rtn(kind: RouteType) -> u8 {
    match kind {
        RouteType::Unicast => RTN_UNICAST,
        RouteType::Local => RTN_LOCAL,
        RouteType::Blackhole => RTN_BLACKHOLE,
        RouteType::Unreachable => RTN_UNREACHABLE,
        RouteType::Prohibit => RTN_PROHIBIT,
        RouteType::Other(n) => n,
    }
}

/// The gateway attribute of a next hop of a route of `family`.
fn gateway_attr(family: AddressFamily, gateway: IpAddr) -> RouteAttribute {
    if family_of(gateway) == family {
        RouteAttribute::Gateway(gateway.into())
    } else {
        RouteAttribute::Via(RouteVia::from(gateway))
    }
}

/// The `rtnh_hops` of a weight (weight − 1, within 0..=255).
fn hops(weight: u16) -> u8 {
    u8::try_from(weight.saturating_sub(1)).unwrap_or(u8::MAX)
}

fn route_message(r: &Route) -> RouteMessage {
    let family = family_of(r.dst.0);
    let mut header = RouteHeader {
        address_family: family,
        destination_prefix_length: r.dst.1,
        source_prefix_length: r.src_len,
        table: u8::try_from(r.table).unwrap_or(RT_TABLE_COMPAT),
        protocol: r.protocol.into(),
        scope: r.scope.into(),
        kind: rtn(r.kind).into(),
        ..RouteHeader::default()
    };
    let mut attrs = vec![RouteAttribute::Table(r.table)];
    if !(r.dst.0.is_unspecified() && r.dst.1 == 0) {
        attrs.push(RouteAttribute::Destination(r.dst.0.into()));
    }
    if let Some(p) = r.priority {
        attrs.push(RouteAttribute::Priority(p));
    }
    if let Some(id) = r.nhid {
        attrs.push(RouteAttribute::NhId(id));
    }
    match r.nexthops.as_slice() {
        [] => {}
        [nh] if nh.weight == 1 && (nh.gateway.is_some() || nh.oif.is_some()) => {
            if let Some(gw) = nh.gateway {
                attrs.push(gateway_attr(family, gw));
            }
            if let Some(oif) = nh.oif {
                attrs.push(RouteAttribute::Oif(oif));
            }
            if nh.onlink {
                header.flags = RouteFlags::from_bits_retain(RTNH_F_ONLINK);
            }
        }
        hops_list => {
            let mut used = 0usize;
            let list = hops_list
                .iter()
                .map(|nh| rtnexthop(family, nh))
                .take_while(|nh| {
                    used += nh.buffer_len();
                    used <= MAX_ATTRIBUTE_VALUE
                })
                .collect();
            attrs.push(RouteAttribute::MultiPath(list));
        }
    }
    let mut msg = RouteMessage::default();
    msg.header = header;
    msg.attributes = attrs;
    msg
}

fn rtnexthop(family: AddressFamily, nh: &NextHop) -> RouteNextHop {
    let mut out = RouteNextHop::default();
    out.flags = if nh.onlink {
        RouteNextHopFlags::Onlink
    } else {
        RouteNextHopFlags::empty()
    };
    out.hops = hops(nh.weight);
    out.interface_index = nh.oif.unwrap_or(0);
    out.attributes = nh
        .gateway
        .map(|gw| gateway_attr(family, gw))
        .into_iter()
        .collect();
    out
}

fn nexthop_message(n: &NextHopMsg) -> NextHopMessage {
    let mut header = NextHopHeader {
        family: AF_UNSPEC,
        protocol: n.protocol,
        ..NextHopHeader::default()
    };
    let mut attributes = vec![NextHopAttribute::Id(n.id)];
    match &n.object {
        NextHopObject::Group(members) => attributes.push(NextHopAttribute::Group(
            members
                .iter()
                .take(MAX_MEMBERS)
                .map(|(id, weight)| NextHopGroupEntry {
                    id: *id,
                    weight: weight.saturating_sub(1),
                })
                .collect(),
        )),
        NextHopObject::Blackhole => attributes.push(NextHopAttribute::Blackhole),
        NextHopObject::Single(nh) => {
            if let Some(oif) = nh.oif {
                attributes.push(NextHopAttribute::Oif(oif));
            }
            if let Some(gw) = nh.gateway {
                header.family = match gw {
                    IpAddr::V4(_) => AF_INET,
                    IpAddr::V6(_) => AF_INET6,
                };
                attributes.push(NextHopAttribute::Gateway(gw));
            }
            if nh.onlink {
                header.flags = RTNH_F_ONLINK;
            }
        }
    }
    NextHopMessage { header, attributes }
}

fn link_message(l: &Link) -> LinkMessage {
    let mut msg = LinkMessage::default();
    msg.header.index = l.ifindex;
    let mut flags = LinkFlags::empty();
    if l.admin_up {
        flags |= LinkFlags::Up;
    }
    if l.lower_up {
        flags |= LinkFlags::LowerUp;
    }
    msg.header.flags = flags;
    if let Some(name) = &l.name {
        let mut end = name.len().min(MAX_NAME);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        let kept = name.get(..end).unwrap_or_default();
        msg.attributes.push(LinkAttribute::IfName(kept.to_string()));
    }
    if let Some(mac) = l.mac {
        msg.attributes.push(LinkAttribute::Address(mac.to_vec()));
    }
    if let Some(mtu) = l.mtu {
        msg.attributes.push(LinkAttribute::Mtu(mtu));
    }
    msg
}

fn addr_message(a: &Addr) -> AddressMessage {
    let mut msg = AddressMessage::default();
    msg.header.family = family_of(a.addr);
    msg.header.prefix_len = a.prefix_len;
    msg.header.index = a.ifindex;
    msg.attributes.push(AddressAttribute::Address(a.addr));
    if a.addr.is_ipv4() {
        msg.attributes.push(AddressAttribute::Local(a.addr));
    }
    msg
}
