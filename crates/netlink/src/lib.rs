//! # vfsr-netlink: rtnetlink and FPM messages for the route sources
//!
//! Routes reach the router from two places, both speaking rtnetlink (rtnetlink(7)): FRR's
//! zebra, through its `dplane_fpm_nl` module, over a TCP connection (FPM, the Forwarding
//! Plane Manager interface), and the Linux kernel, through its routing socket. This crate
//! turns their bytes into plain [`Message`]s, and messages back into bytes.
//!
//! ```text
//!  zebra ──TCP──▶ FpmStream (fpm.rs) ─┬─ FpmReader: FPM header, one frame at a time
//!                                     └─ decode_into (decode.rs) ──▶ Vec<Message> (msg.rs)
//!  kernel ───────▶ RouteSocket (socket.rs): groups, dumps, overruns ──▶ decode_into ─┘
//!
//!  tests, fuzz seeds, replays ◀── encode (encode.rs), write_table_stream (fpm.rs)
//! ```
//!
//! Start reading at [`msg`] (what a route source gets), then [`decode`](mod@decode) (the
//! layout of a netlink message and what is read from it), then [`fpm`] (the framing and the
//! connection loop), then [`socket`]. [`consts`] lists the protocol numbers; [`nhmsg`] models
//! the next-hop object messages `netlink-packet-route` lacks.
//!
//! # The FPM header
//!
//! FRR's `fpm/fpm.h` defines it: each frame on the TCP stream starts with four bytes,
//! `version` (1), `msg_type` (1 = netlink; 2 = protobuf, refused here) and `msg_len`
//! (16 bits, big-endian, the whole frame including the header), then one or more netlink
//! messages: zebra sends a route change it cannot express as a replace as `RTM_DELROUTE` +
//! `RTM_NEWROUTE` in one frame.
//!
//! # What is understood
//!
//! - `RTM_NEWROUTE`, `RTM_DELROUTE` (IPv4, IPv6): from `rtmsg` the family, destination and
//!   source lengths, table, protocol, scope, type and `RTNH_F_ONLINK`; `RTA_DST` (absent: the
//!   default route), `RTA_TABLE` (else `rtm_table`), `RTA_PRIORITY`, `RTA_GATEWAY`, `RTA_VIA`
//!   (an IPv6 gateway of an IPv4 route), `RTA_OIF`, `RTA_MULTIPATH` (each `rtnexthop`: its
//!   gateway, interface, weight = hops + 1, `RTNH_F_ONLINK`), `RTA_NH_ID`;
//! - `RTM_NEWNEXTHOP`, `RTM_DELNEXTHOP`: from `nhmsg` the family, protocol and
//!   `RTNH_F_ONLINK`; `NHA_ID`, `NHA_GATEWAY`, `NHA_OIF`, `NHA_BLACKHOLE`, `NHA_GROUP`
//!   (member weights = weight + 1);
//! - `RTM_NEWLINK`, `RTM_DELLINK` (`AF_UNSPEC`): from `ifinfomsg` the index, `IFF_UP` and
//!   `IFF_LOWER_UP`; `IFLA_IFNAME`, `IFLA_ADDRESS` (when 6 bytes), `IFLA_MTU`;
//! - `RTM_NEWADDR`, `RTM_DELADDR` (IPv4, IPv6): from `ifaddrmsg` the index and prefix length;
//!   `IFA_LOCAL`, else `IFA_ADDRESS`;
//! - `NLMSG_DONE` and `NLMSG_ERROR`: [`Message::Done`], [`Message::Error`] (the code; 0 is an
//!   acknowledgement).
//!
//! `NLM_F_REPLACE` on an `RTM_NEW*` sets `replace`. A route naming a next-hop object keeps
//! the id only (the kernel's compatibility copy of the object's next hops is dropped).
//!
//! # Counted and skipped, never an error
//!
//! [`DecodeStats`] counts what was decoded by kind, and what was passed over: `NLMSG_NOOP`,
//! message types not in the table (neighbours, rules, ...), attributes not in the table
//! (`RTA_CACHEINFO`, `IFLA_STATS64`, ... skipped without being parsed), messages flagged
//! `NLM_F_DUMP_INTR`, and messages of a known type that cannot be used, by [`SkipReason`]:
//! another family (MPLS, multicast tables; bridge-port link messages), a prefix too long,
//! an address of the wrong length, a value the netlink crates refuse, a missing id or
//! address, a broken group, a lightweight tunnel encapsulation, a route-cache clone, a
//! TOS-selected route.
//!
//! # What closes a connection
//!
//! A [`DecodeError`]: a netlink header whose length is shorter than the header or runs past
//! the buffer, or a message of a known type whose fixed header is short or whose attribute
//! framing is broken. An [`FpmError`]: a frame header of another version or type, or
//! shorter than 20 bytes. The stream cannot be resynchronised after either: the FPM loop
//! ([`FpmStream::pump`]) returns the error, keeps the messages of the frames before it, and
//! the route source closes the connection; zebra reconnects and sends its table again. A
//! buffer that fails decodes to nothing (a frame is applied whole or not at all).
//!
//! # Worked example
//!
//! Zebra announces 10.9.0.0/16 learned by BGP, via 192.0.2.2 on interface 3, metric 20:
//!
//! ```
//! use std::net::{IpAddr, Ipv4Addr};
//! use vfsr_netlink::{FpmReader, DecodeStats, Message, NextHop, Op, RouteType, decode};
//!
//! # #[cfg(target_endian = "little")] {
//! let bytes: &[u8] = &[
//!     0x01, 0x01, 0x00, 0x48,                     // FPM: version 1, netlink, 72 bytes
//!     0x44, 0, 0, 0,  0x18, 0,  0x01, 0x04,       // nlmsghdr: 68 bytes, RTM_NEWROUTE,
//!     0x01, 0, 0, 0,  0, 0, 0, 0,                 //   REQUEST|CREATE, seq 1, port 0
//!     0x02, 0x10, 0x00, 0x00,                     // rtmsg: AF_INET, /16, no source, tos 0,
//!     0xfe, 0xba, 0x00, 0x01,                     //   table 254, proto 186 (bgp), universe,
//!     0, 0, 0, 0,                                 //   RTN_UNICAST, flags 0
//!     0x08, 0x00, 0x0f, 0x00,  0xfe, 0, 0, 0,     // RTA_TABLE 254
//!     0x08, 0x00, 0x01, 0x00,  10, 9, 0, 0,       // RTA_DST 10.9.0.0
//!     0x08, 0x00, 0x06, 0x00,  20, 0, 0, 0,       // RTA_PRIORITY 20
//!     0x08, 0x00, 0x05, 0x00,  192, 0, 2, 2,      // RTA_GATEWAY 192.0.2.2
//!     0x08, 0x00, 0x04, 0x00,  3, 0, 0, 0,        // RTA_OIF 3
//! ];
//! let mut reader = FpmReader::new();
//! reader.push(bytes);
//! let netlink = reader.next_frame().unwrap().unwrap();
//! let mut stats = DecodeStats::default();
//! let msgs = decode(netlink, &mut stats).unwrap();
//! let Message::Route(route) = &msgs[0] else { panic!() };
//! assert_eq!(route.op, Op::New);
//! assert_eq!(route.dst, (IpAddr::V4(Ipv4Addr::new(10, 9, 0, 0)), 16));
//! assert_eq!((route.table, route.protocol, route.kind), (254, 186, RouteType::Unicast));
//! assert_eq!(route.priority, Some(20));
//! assert_eq!(route.nexthops, vec![NextHop {
//!     gateway: Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2))),
//!     oif: Some(3),
//!     weight: 1,
//!     onlink: false,
//! }]);
//! assert_eq!(stats.routes, 1);
//! # }
//! ```
//!
//! **Outside input never panics.** The decoder and the FPM reader take arbitrary bytes and
//! return errors as values; the crate denies `unwrap`, `panic!` and unchecked indexing, is
//! property-tested (`tests/roundtrip.rs`) and fuzzed (`fuzz/fuzz_targets/fpm_stream.rs`).
//! Decoding costs about 100 ns per route message (`tests/throughput.rs`).

#![deny(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::expect_used, clippy::unreachable, clippy::todo)]

pub mod consts;
pub mod decode;
pub mod encode;
pub mod fpm;
pub mod msg;
pub mod nhmsg;
pub mod socket;

pub use decode::{
    decode, decode_into, decode_into_marked, DecodeError, DecodeStats, SkipCounts, SkipReason,
};
pub use encode::{encode, encode_into};
pub use fpm::{
    frame, write_table_stream, FpmError, FpmReader, FpmStream, PumpStatus, StreamError, TableRoute,
    TableStreamOptions, TableStreamSummary,
};
pub use msg::{Addr, Link, Message, NextHop, NextHopMsg, NextHopObject, Op, Route, RouteType};
pub use socket::{DumpKind, RecvStatus, RouteSocket};

#[cfg(test)]
mod golden_tests;
