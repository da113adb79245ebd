//! Messages written out byte by byte from the uapi structs (`struct nlmsghdr`, `struct
//! rtmsg`, `struct rtattr`, `struct rtnexthop`, `struct nhmsg`, `struct nexthop_grp`,
//! `struct ifinfomsg`, `struct ifaddrmsg`), as a little-endian kernel or zebra sends them,
//! and the messages they decode to.

#![cfg(target_endian = "little")]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::decode::{decode, DecodeError, DecodeStats};
use crate::msg::*;

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

fn v6(s: &str) -> IpAddr {
    IpAddr::V6(s.parse::<Ipv6Addr>().unwrap())
}

/// `ip route replace 10.9.0.0/16 via 192.0.2.2 dev <3> metric 100 proto static`.
#[rustfmt::skip]
pub(crate) const ROUTE_V4_GATEWAY: [u8; 68] = [
    // nlmsghdr: len 68, RTM_NEWROUTE (24), REQUEST|CREATE|REPLACE (0x501), seq 1, port 0
    68, 0, 0, 0,   24, 0,   0x01, 0x05,   1, 0, 0, 0,   0, 0, 0, 0,
    // rtmsg: AF_INET, dst_len 16, src_len 0, tos 0, table 254, proto 4, scope 0, RTN_UNICAST
    2, 16, 0, 0,   254, 4, 0, 1,   0, 0, 0, 0, // rtm_flags
    8, 0, 15, 0,   254, 0, 0, 0,      // RTA_TABLE 254
    8, 0, 1, 0,    10, 9, 0, 0,       // RTA_DST 10.9.0.0
    8, 0, 6, 0,    100, 0, 0, 0,      // RTA_PRIORITY 100
    8, 0, 5, 0,    192, 0, 2, 2,      // RTA_GATEWAY 192.0.2.2
    8, 0, 4, 0,    3, 0, 0, 0,        // RTA_OIF 3
];

fn route_v4_gateway() -> Route {
    Route {
        op: Op::New,
        replace: true,
        dst: (v4(10, 9, 0, 0), 16),
        table: 254,
        protocol: 4,
        scope: 0,
        kind: RouteType::Unicast,
        priority: Some(100),
        nexthops: vec![NextHop {
            gateway: Some(v4(192, 0, 2, 2)),
            oif: Some(3),
            weight: 1,
            onlink: false,
        }],
        nhid: None,
        src_len: 0,
    }
}

/// An IPv6 BGP route over two weighted next hops, the second onlink.
#[rustfmt::skip]
const ROUTE_V6_MULTIPATH: [u8; 116] = [
    // nlmsghdr: len 116, RTM_NEWROUTE, REQUEST|CREATE (0x401), seq 2
    116, 0, 0, 0,   24, 0,   0x01, 0x04,   2, 0, 0, 0,   0, 0, 0, 0,
    // rtmsg: AF_INET6, /48, table 254 (no RTA_TABLE), proto 186 (bgp), universe, unicast
    10, 48, 0, 0,   254, 186, 0, 1,   0, 0, 0, 0,
    // RTA_DST 2001:db8:7::
    20, 0, 1, 0,   0x20, 0x01, 0x0d, 0xb8, 0, 7, 0, 0,  0, 0, 0, 0,  0, 0, 0, 0,
    8, 0, 6, 0,    20, 0, 0, 0,       // RTA_PRIORITY 20
    60, 0, 9, 0,                       // RTA_MULTIPATH: two rtnexthop of 28 bytes
    // rtnexthop: len 28, flags 0, hops 1 (weight 2), ifindex 3; RTA_GATEWAY 2001:db8::2
    28, 0, 0, 1,   3, 0, 0, 0,
    20, 0, 5, 0,   0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,  0, 0, 0, 0,  0, 0, 0, 2,
    // rtnexthop: len 28, flags RTNH_F_ONLINK, hops 3 (weight 4), ifindex 4; 2001:db8::3
    28, 0, 4, 3,   4, 0, 0, 0,
    20, 0, 5, 0,   0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,  0, 0, 0, 0,  0, 0, 0, 3,
];

/// `ip route add blackhole 10.6.0.0/16` (proto boot, RTN_BLACKHOLE, no next hop).
#[rustfmt::skip]
const ROUTE_BLACKHOLE: [u8; 44] = [
    // nlmsghdr: len 44, RTM_NEWROUTE, REQUEST|EXCL|CREATE (0x601), seq 3
    44, 0, 0, 0,   24, 0,   0x01, 0x06,   3, 0, 0, 0,   0, 0, 0, 0,
    2, 16, 0, 0,   254, 3, 0, 6,   0, 0, 0, 0,
    8, 0, 15, 0,   254, 0, 0, 0,      // RTA_TABLE 254
    8, 0, 1, 0,    10, 6, 0, 0,       // RTA_DST 10.6.0.0
];

/// `ip route add 10.8.0.0/16 nhid 5` as the kernel reports it: RTA_NH_ID, plus the object's
/// gateway and interface for older readers.
#[rustfmt::skip]
const ROUTE_NHID: [u8; 68] = [
    // nlmsghdr: len 68, RTM_NEWROUTE, flags 0 (a notification), seq 0, port 0
    68, 0, 0, 0,   24, 0,   0, 0,   0, 0, 0, 0,   0, 0, 0, 0,
    2, 16, 0, 0,   254, 3, 0, 1,   0, 0, 0, 0,
    8, 0, 15, 0,   254, 0, 0, 0,      // RTA_TABLE 254
    8, 0, 1, 0,    10, 8, 0, 0,       // RTA_DST 10.8.0.0
    8, 0, 30, 0,   5, 0, 0, 0,        // RTA_NH_ID 5
    8, 0, 5, 0,    192, 0, 2, 2,      // RTA_GATEWAY 192.0.2.2
    8, 0, 4, 0,    3, 0, 0, 0,        // RTA_OIF 3
];

/// `ip nexthop add id 7 group 5/6,3`.
#[rustfmt::skip]
const NEXTHOP_GROUP: [u8; 60] = [
    // nlmsghdr: len 60, RTM_NEWNEXTHOP (104), flags 0, seq 0
    60, 0, 0, 0,   104, 0,   0, 0,   0, 0, 0, 0,   0, 0, 0, 0,
    // nhmsg: AF_UNSPEC, scope 0, protocol 3, resvd, nh_flags 0
    0, 0, 3, 0,    0, 0, 0, 0,
    8, 0, 1, 0,    7, 0, 0, 0,        // NHA_ID 7
    // NHA_GROUP: {id 5, weight 0 (share 1)}, {id 6, weight 2 (share 3)}
    20, 0, 2, 0,   5, 0, 0, 0, 0, 0, 0, 0,   6, 0, 0, 0, 2, 0, 0, 0,
    6, 0, 3, 0,    0, 0, 0, 0,        // NHA_GROUP_TYPE 0 (mpath), padded
];

/// `ip nexthop add id 5 via 192.0.2.2 dev <3> onlink`.
#[rustfmt::skip]
const NEXTHOP_SINGLE: [u8; 48] = [
    48, 0, 0, 0,   104, 0,   0, 0,   0, 0, 0, 0,   0, 0, 0, 0,
    // nhmsg: AF_INET, scope 0, protocol 3, resvd, nh_flags RTNH_F_ONLINK
    2, 0, 3, 0,    4, 0, 0, 0,
    8, 0, 1, 0,    5, 0, 0, 0,        // NHA_ID 5
    8, 0, 5, 0,    3, 0, 0, 0,        // NHA_OIF 3
    8, 0, 6, 0,    192, 0, 2, 2,      // NHA_GATEWAY 192.0.2.2
];

/// Interface 3, "a", up with carrier, MTU 1500, MAC 02:00:00:00:00:01, plus IFLA_TXQLEN.
#[rustfmt::skip]
const LINK: [u8; 68] = [
    68, 0, 0, 0,   16, 0,   0, 0,   0, 0, 0, 0,   0, 0, 0, 0,
    // ifinfomsg: AF_UNSPEC, pad, ARPHRD_ETHER, index 3, flags UP|BROADCAST|RUNNING|LOWER_UP
    0, 0, 1, 0,    3, 0, 0, 0,   0x43, 0x00, 0x01, 0x00,   0, 0, 0, 0,
    6, 0, 3, 0,    b'a', 0, 0, 0,     // IFLA_IFNAME "a"
    8, 0, 4, 0,    0xdc, 0x05, 0, 0,  // IFLA_MTU 1500
    10, 0, 1, 0,   2, 0, 0, 0, 0, 1, 0, 0, // IFLA_ADDRESS, padded
    8, 0, 13, 0,   0xe8, 0x03, 0, 0,  // IFLA_TXQLEN 1000 (unused)
];

/// 192.0.2.1/24 on interface 3.
#[rustfmt::skip]
const ADDR: [u8; 48] = [
    48, 0, 0, 0,   20, 0,   0, 0,   0, 0, 0, 0,   0, 0, 0, 0,
    // ifaddrmsg: AF_INET, /24, IFA_F_PERMANENT, scope 0, index 3
    2, 24, 0x80, 0,   3, 0, 0, 0,
    8, 0, 1, 0,    192, 0, 2, 1,      // IFA_ADDRESS
    8, 0, 2, 0,    192, 0, 2, 1,      // IFA_LOCAL
    6, 0, 3, 0,    b'a', 0, 0, 0,     // IFA_LABEL "a" (unused)
];

#[test]
fn ipv4_route_with_gateway_and_interface() {
    let mut stats = DecodeStats::default();
    let msgs = decode(&ROUTE_V4_GATEWAY, &mut stats).unwrap();
    assert_eq!(msgs, vec![Message::Route(route_v4_gateway())]);
    assert_eq!(stats.routes, 1);
    assert_eq!(stats.unused_attrs, 0);
}

#[test]
fn ipv6_multipath_route_with_weights() {
    let mut stats = DecodeStats::default();
    let msgs = decode(&ROUTE_V6_MULTIPATH, &mut stats).unwrap();
    let expected = Route {
        op: Op::New,
        replace: false,
        dst: (v6("2001:db8:7::"), 48),
        table: 254,
        protocol: 186,
        scope: 0,
        kind: RouteType::Unicast,
        priority: Some(20),
        nexthops: vec![
            NextHop {
                gateway: Some(v6("2001:db8::2")),
                oif: Some(3),
                weight: 2,
                onlink: false,
            },
            NextHop {
                gateway: Some(v6("2001:db8::3")),
                oif: Some(4),
                weight: 4,
                onlink: true,
            },
        ],
        nhid: None,
        src_len: 0,
    };
    assert_eq!(msgs, vec![Message::Route(expected)]);
}

#[test]
fn blackhole_route() {
    let mut stats = DecodeStats::default();
    let msgs = decode(&ROUTE_BLACKHOLE, &mut stats).unwrap();
    let expected = Route {
        op: Op::New,
        replace: false,
        dst: (v4(10, 6, 0, 0), 16),
        table: 254,
        protocol: 3,
        scope: 0,
        kind: RouteType::Blackhole,
        priority: None,
        nexthops: vec![],
        nhid: None,
        src_len: 0,
    };
    assert_eq!(msgs, vec![Message::Route(expected)]);
}

#[test]
fn route_naming_a_nexthop_object_keeps_the_id_only() {
    let mut stats = DecodeStats::default();
    let msgs = decode(&ROUTE_NHID, &mut stats).unwrap();
    let [Message::Route(r)] = msgs.as_slice() else {
        panic!("expected one route, got {msgs:?}");
    };
    assert_eq!(r.dst, (v4(10, 8, 0, 0), 16));
    assert_eq!(r.nhid, Some(5));
    assert!(r.nexthops.is_empty(), "{:?}", r.nexthops);
    assert!(!r.replace);
}

#[test]
fn nexthop_group_with_weights() {
    let mut stats = DecodeStats::default();
    let msgs = decode(&NEXTHOP_GROUP, &mut stats).unwrap();
    let expected = NextHopMsg {
        op: Op::New,
        replace: false,
        id: 7,
        protocol: 3,
        object: NextHopObject::Group(vec![(5, 1), (6, 3)]),
    };
    assert_eq!(msgs, vec![Message::NextHop(expected)]);
    assert_eq!(stats.nexthops, 1);
    assert_eq!(stats.unused_attrs, 1, "NHA_GROUP_TYPE is not used");
}

#[test]
fn single_nexthop_object() {
    let mut stats = DecodeStats::default();
    let msgs = decode(&NEXTHOP_SINGLE, &mut stats).unwrap();
    let expected = NextHopMsg {
        op: Op::New,
        replace: false,
        id: 5,
        protocol: 3,
        object: NextHopObject::Single(NextHop {
            gateway: Some(v4(192, 0, 2, 2)),
            oif: Some(3),
            weight: 1,
            onlink: true,
        }),
    };
    assert_eq!(msgs, vec![Message::NextHop(expected)]);
}

#[test]
fn link_and_address() {
    let mut stats = DecodeStats::default();
    let mut bytes = LINK.to_vec();
    bytes.extend_from_slice(&ADDR);
    let msgs = decode(&bytes, &mut stats).unwrap();
    let link = Link {
        op: Op::New,
        ifindex: 3,
        name: Some("a".into()),
        admin_up: true,
        lower_up: true,
        mac: Some([2, 0, 0, 0, 0, 1]),
        mtu: Some(1500),
    };
    let addr = Addr {
        op: Op::New,
        ifindex: 3,
        addr: v4(192, 0, 2, 1),
        prefix_len: 24,
    };
    assert_eq!(msgs, vec![Message::Link(link), Message::Addr(addr)]);
    assert_eq!((stats.links, stats.addrs), (1, 1));
    assert_eq!(stats.unused_attrs, 2, "IFLA_TXQLEN and IFA_LABEL");
}

#[test]
fn done_error_and_noop() {
    #[rustfmt::skip]
    let bytes: [u8; 72] = [
        // NLMSG_NOOP, header only
        16, 0, 0, 0,   1, 0,   0, 0,   0, 0, 0, 0,   0, 0, 0, 0,
        // NLMSG_ERROR -17 (EEXIST), then the request's header
        36, 0, 0, 0,   2, 0,   0, 0,   9, 0, 0, 0,   0, 0, 0, 0,
        0xef, 0xff, 0xff, 0xff,
        16, 0, 0, 0,   24, 0,   0x01, 0x06,   9, 0, 0, 0,   0, 0, 0, 0,
        // NLMSG_DONE, NLM_F_MULTI, code 0
        20, 0, 0, 0,   3, 0,   2, 0,   1, 0, 0, 0,   0, 0, 0, 0,   0, 0, 0, 0,
    ];
    let mut stats = DecodeStats::default();
    let msgs = decode(&bytes, &mut stats).unwrap();
    assert_eq!(msgs, vec![Message::Error(-17), Message::Done]);
    assert_eq!((stats.noops, stats.errors, stats.done), (1, 1, 1));
}

#[test]
fn unknown_type_and_unknown_attributes_are_counted_and_skipped() {
    #[rustfmt::skip]
    let neigh: [u8; 28] = [
        // RTM_NEWNEIGH (28): ndmsg (12 bytes), no attributes
        28, 0, 0, 0,   28, 0,   0, 0,   0, 0, 0, 0,   0, 0, 0, 0,
        10, 0, 0, 0,   3, 0, 0, 0,   0x80, 0, 0, 1,
    ];
    // the IPv4 route with two more attributes: RTA_PREFSRC and an unknown type 200 (8 bytes
    // each), its length patched from 68 to 84
    let mut route = ROUTE_V4_GATEWAY.to_vec();
    route[0] = 84;
    route.extend_from_slice(&[8, 0, 7, 0, 192, 0, 2, 1]);
    route.extend_from_slice(&[8, 0, 200, 0, 1, 2, 3, 4]);
    let mut bytes = neigh.to_vec();
    bytes.extend_from_slice(&route);
    let mut stats = DecodeStats::default();
    let msgs = decode(&bytes, &mut stats).unwrap();
    assert_eq!(msgs, vec![Message::Route(route_v4_gateway())]);
    assert_eq!(stats.unknown_types, 1);
    assert_eq!(stats.unused_attrs, 2);
    assert_eq!(stats.routes, 1);
}

#[test]
fn truncated_headers_are_errors() {
    let mut stats = DecodeStats::default();
    // 8 bytes after a good message: not a header
    let mut bytes = ROUTE_V4_GATEWAY.to_vec();
    bytes.extend_from_slice(&[16, 0, 0, 0, 24, 0, 0, 0]);
    let e = decode(&bytes, &mut stats).unwrap_err();
    assert_eq!(
        e,
        DecodeError::Truncated {
            offset: 68,
            len: None,
            available: 8
        }
    );
    assert_eq!(e.reason(), "truncated");
    assert_eq!(
        stats,
        DecodeStats::default(),
        "nothing of a failed buffer is counted"
    );

    // nlmsg_len runs past the end
    let mut long = ROUTE_V4_GATEWAY.to_vec();
    long[0] = 72;
    let e = decode(&long, &mut stats).unwrap_err();
    assert_eq!(
        e,
        DecodeError::Truncated {
            offset: 0,
            len: Some(72),
            available: 68
        }
    );

    // nlmsg_len shorter than the header
    let mut short = ROUTE_V4_GATEWAY.to_vec();
    short[0] = 12;
    let e = decode(&short, &mut stats).unwrap_err();
    assert!(
        matches!(e, DecodeError::Truncated { len: Some(12), .. }),
        "{e}"
    );
}

#[test]
fn broken_fixed_header_or_attribute_framing_is_malformed() {
    let mut stats = DecodeStats::default();
    // an RTM_NEWROUTE of 8 payload bytes: rtmsg is 12
    let mut short = ROUTE_V4_GATEWAY[..24].to_vec();
    short[0] = 24;
    let e = decode(&short, &mut stats).unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::Malformed {
                offset: 0,
                msg_type: 24,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.reason(), "malformed");

    // an attribute whose rta_len (3) is shorter than its header
    let mut framing = ROUTE_V4_GATEWAY.to_vec();
    framing[28] = 3;
    let e = decode(&framing, &mut stats).unwrap_err();
    assert!(matches!(e, DecodeError::Malformed { .. }), "{e}");

    // an attribute running past the message
    let mut past = ROUTE_V4_GATEWAY.to_vec();
    past[60] = 12;
    let e = decode(&past, &mut stats).unwrap_err();
    assert!(matches!(e, DecodeError::Malformed { .. }), "{e}");
}

#[test]
fn unusable_messages_are_skipped_by_reason() {
    // (byte of ROUTE_V4_GATEWAY to change, new value, reason)
    let cases: [(usize, u8, &str); 6] = [
        (16, 28, "family"),     // rtm_family AF_MPLS
        (17, 33, "prefix_len"), // rtm_dst_len 33
        (19, 4, "tos"),         // rtm_tos 4
        (25, 0x02, "cloned"),   // rtm_flags RTM_F_CLONED
        (36, 5, "address"),     // RTA_DST's rta_len 5: a 1-byte address (padding keeps framing)
        (60, 6, "value"),       // RTA_OIF's rta_len 6: a 2-byte interface index
    ];
    for (at, value, reason) in cases {
        let mut bytes = ROUTE_V4_GATEWAY.to_vec();
        bytes[at] = value;
        let mut stats = DecodeStats::default();
        let msgs = decode(&bytes, &mut stats).unwrap();
        assert!(msgs.is_empty(), "{reason}: {msgs:?}");
        let counted: Vec<_> = stats
            .skipped
            .by_reason()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect();
        assert_eq!(counted, vec![(reason, 1)], "{reason}");
        assert_eq!(stats.routes, 0);
    }
}

#[test]
fn route_without_destination_is_the_default_route() {
    // drop RTA_DST and set dst_len 0
    let mut bytes = ROUTE_V4_GATEWAY[..36].to_vec();
    bytes.extend_from_slice(&ROUTE_V4_GATEWAY[44..]);
    bytes[0] = 60;
    bytes[17] = 0;
    let mut stats = DecodeStats::default();
    let msgs = decode(&bytes, &mut stats).unwrap();
    let [Message::Route(r)] = msgs.as_slice() else {
        panic!("{msgs:?}");
    };
    assert_eq!(r.dst, (v4(0, 0, 0, 0), 0));
    // ...but a /16 without RTA_DST is refused
    bytes[17] = 16;
    let msgs = decode(&bytes, &mut stats).unwrap();
    assert!(msgs.is_empty());
    assert_eq!(stats.skipped.missing, 1);
}

#[test]
fn dump_interrupted_flag_is_counted() {
    let mut bytes = ROUTE_BLACKHOLE.to_vec();
    bytes[6] = 0x12; // NLM_F_MULTI | NLM_F_DUMP_INTR
    bytes[7] = 0;
    let mut stats = DecodeStats::default();
    let msgs = decode(&bytes, &mut stats).unwrap();
    assert_eq!(msgs.len(), 1);
    assert_eq!(stats.dump_interrupted, 1);
}

#[test]
fn delete_flag_bit_is_not_replace() {
    // RTM_DELROUTE with 0x100 (NLM_F_NONREC on a delete)
    let mut bytes = ROUTE_V4_GATEWAY.to_vec();
    bytes[4] = 25;
    let mut stats = DecodeStats::default();
    let msgs = decode(&bytes, &mut stats).unwrap();
    let [Message::Route(r)] = msgs.as_slice() else {
        panic!("{msgs:?}");
    };
    assert_eq!((r.op, r.replace), (Op::Del, false));
}

#[test]
fn encoder_writes_the_golden_route() {
    let bytes = crate::encode::encode(&Message::Route(route_v4_gateway()), 1);
    assert_eq!(bytes, ROUTE_V4_GATEWAY.to_vec());
}

#[test]
fn lightweight_tunnel_routes_are_skipped() {
    // RTA_ENCAP_TYPE 1 (MPLS) and RTA_ENCAP { MPLS_IPTUNNEL_DST label 100 }
    let mut bytes = ROUTE_V4_GATEWAY.to_vec();
    bytes[0] = 68 + 8 + 12;
    bytes.extend_from_slice(&[6, 0, 21, 0, 1, 0, 0, 0]);
    bytes.extend_from_slice(&[12, 0, 22, 0x80, 8, 0, 1, 0, 0x00, 0x06, 0x41, 0x00]);
    let mut stats = DecodeStats::default();
    let msgs = decode(&bytes, &mut stats).unwrap();
    assert!(msgs.is_empty(), "{msgs:?}");
    assert_eq!(stats.skipped.encap, 1);
}

#[test]
fn nexthop_gateway_of_the_wrong_family_is_skipped() {
    let mut bytes = NEXTHOP_SINGLE.to_vec();
    bytes[16] = 10; // nh_family AF_INET6 with a 4-byte NHA_GATEWAY
    let mut stats = DecodeStats::default();
    assert!(decode(&bytes, &mut stats).unwrap().is_empty());
    assert_eq!(stats.skipped.address, 1);
    // and without NHA_ID there is nothing to name
    let mut bytes = NEXTHOP_SINGLE.to_vec();
    bytes[26] = 99; // NHA_ID becomes an unknown attribute
    let mut stats = DecodeStats::default();
    assert!(decode(&bytes, &mut stats).unwrap().is_empty());
    assert_eq!(stats.skipped.missing, 1);
    assert_eq!(stats.unused_attrs, 1);
}

#[test]
fn bridge_port_messages_are_not_interface_events() {
    // the link message as AF_BRIDGE (7) and RTM_DELLINK: a port leaving its bridge
    let mut bytes = LINK.to_vec();
    bytes[4] = 17;
    bytes[16] = 7;
    let mut stats = DecodeStats::default();
    assert!(decode(&bytes, &mut stats).unwrap().is_empty());
    assert_eq!(stats.skipped.family, 1);
    assert_eq!(stats.links, 0);
}
