//! The numbers of the netlink protocol this crate reads and writes, with the names of the
//! Linux uapi headers (`linux/netlink.h`, `linux/rtnetlink.h`, `linux/nexthop.h`,
//! `linux/if_addr.h`, `linux/if_link.h`). The netlink crates keep most of them private; they
//! are spelled out here so that the decoder's dispatch, the tests' golden bytes and the docs
//! agree on one list.

/// `sizeof(struct nlmsghdr)`: length (u32), type (u16), flags (u16), sequence (u32), port
/// (u32), in host byte order.
pub const NLMSG_HDRLEN: usize = 16;
/// Netlink messages and attributes start on 4-byte boundaries.
pub const NLMSG_ALIGNTO: usize = 4;

/// `NLMSG_NOOP`: nothing; skipped.
pub const NLMSG_NOOP: u16 = 1;
/// `NLMSG_ERROR`: `struct nlmsgerr` (a negated errno, 0 for an acknowledgement, then the
/// header of the request).
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the end of a dump.
pub const NLMSG_DONE: u16 = 3;
/// `NLMSG_OVERRUN`: defined, never sent by Linux.
pub const NLMSG_OVERRUN: u16 = 4;

/// `RTM_NEWLINK` (`struct ifinfomsg` + `IFLA_*`).
pub const RTM_NEWLINK: u16 = 16;
/// `RTM_DELLINK`.
pub const RTM_DELLINK: u16 = 17;
/// `RTM_GETLINK`.
pub const RTM_GETLINK: u16 = 18;
/// `RTM_NEWADDR` (`struct ifaddrmsg` + `IFA_*`).
pub const RTM_NEWADDR: u16 = 20;
/// `RTM_DELADDR`.
pub const RTM_DELADDR: u16 = 21;
/// `RTM_GETADDR`.
pub const RTM_GETADDR: u16 = 22;
/// `RTM_NEWROUTE` (`struct rtmsg` + `RTA_*`).
pub const RTM_NEWROUTE: u16 = 24;
/// `RTM_DELROUTE`.
pub const RTM_DELROUTE: u16 = 25;
/// `RTM_GETROUTE`.
pub const RTM_GETROUTE: u16 = 26;
/// `RTM_NEWNEXTHOP` (`struct nhmsg` + `NHA_*`; Linux 5.3).
pub const RTM_NEWNEXTHOP: u16 = 104;
/// `RTM_DELNEXTHOP`.
pub const RTM_DELNEXTHOP: u16 = 105;
/// `RTM_GETNEXTHOP`.
pub const RTM_GETNEXTHOP: u16 = 106;

/// `NLM_F_REQUEST`: a request (to the kernel).
pub const NLM_F_REQUEST: u16 = 0x1;
/// `NLM_F_MULTI`: part of a multipart reply (a dump), ended by `NLMSG_DONE`.
pub const NLM_F_MULTI: u16 = 0x2;
/// `NLM_F_ACK`: acknowledge the request with an `NLMSG_ERROR` of code 0.
pub const NLM_F_ACK: u16 = 0x4;
/// `NLM_F_DUMP_INTR`: the table changed while it was being dumped; the dump is inconsistent.
pub const NLM_F_DUMP_INTR: u16 = 0x10;
/// `NLM_F_REPLACE` (on `RTM_NEW*`): replace the existing object.
pub const NLM_F_REPLACE: u16 = 0x100;
/// `NLM_F_EXCL` (on `RTM_NEW*`): fail if the object exists.
pub const NLM_F_EXCL: u16 = 0x200;
/// `NLM_F_CREATE` (on `RTM_NEW*`): create the object if it does not exist.
pub const NLM_F_CREATE: u16 = 0x400;
/// `NLM_F_DUMP` (`NLM_F_ROOT | NLM_F_MATCH`, on `RTM_GET*`): return every object.
pub const NLM_F_DUMP: u16 = 0x300;

/// `AF_UNSPEC`.
pub const AF_UNSPEC: u8 = 0;
/// `AF_INET`.
pub const AF_INET: u8 = 2;
/// `AF_INET6`.
pub const AF_INET6: u8 = 10;

/// `RTA_DST`: the destination prefix's address.
pub const RTA_DST: u16 = 1;
/// `RTA_SRC`: the source prefix's address (source-specific routes).
pub const RTA_SRC: u16 = 2;
/// `RTA_OIF`: the output interface index (u32).
pub const RTA_OIF: u16 = 4;
/// `RTA_GATEWAY`: the gateway, of the route's family.
pub const RTA_GATEWAY: u16 = 5;
/// `RTA_PRIORITY`: the metric (u32).
pub const RTA_PRIORITY: u16 = 6;
/// `RTA_PREFSRC`: the preferred source address.
pub const RTA_PREFSRC: u16 = 7;
/// `RTA_METRICS`: nested `RTAX_*` (MTU, window...).
pub const RTA_METRICS: u16 = 8;
/// `RTA_MULTIPATH`: a sequence of `struct rtnexthop`, each followed by its attributes.
pub const RTA_MULTIPATH: u16 = 9;
/// `RTA_CACHEINFO`: `struct rta_cacheinfo`.
pub const RTA_CACHEINFO: u16 = 12;
/// `RTA_TABLE`: the table id (u32), which `rtm_table` (u8) cannot hold beyond 255.
pub const RTA_TABLE: u16 = 15;
/// `RTA_VIA`: `struct rtvia` (a family, then an address): a gateway of another family.
pub const RTA_VIA: u16 = 18;
/// `RTA_PREF`: the IPv6 router preference (u8).
pub const RTA_PREF: u16 = 20;
/// `RTA_ENCAP_TYPE`: the lightweight tunnel type (u16).
pub const RTA_ENCAP_TYPE: u16 = 21;
/// `RTA_ENCAP`: the lightweight tunnel (MPLS labels, SRv6 segments...).
pub const RTA_ENCAP: u16 = 22;
/// `RTA_NH_ID`: the id of the next-hop object the route uses (u32).
pub const RTA_NH_ID: u16 = 30;

/// `RTN_UNICAST`.
pub const RTN_UNICAST: u8 = 1;
/// `RTN_LOCAL`.
pub const RTN_LOCAL: u8 = 2;
/// `RTN_BLACKHOLE`.
pub const RTN_BLACKHOLE: u8 = 6;
/// `RTN_UNREACHABLE`.
pub const RTN_UNREACHABLE: u8 = 7;
/// `RTN_PROHIBIT`.
pub const RTN_PROHIBIT: u8 = 8;

/// `RT_TABLE_COMPAT`: `rtm_table` of a route whose table id does not fit in a byte.
pub const RT_TABLE_COMPAT: u8 = 252;
/// `RT_TABLE_MAIN`.
pub const RT_TABLE_MAIN: u8 = 254;
/// `RTPROT_BGP`.
pub const RTPROT_BGP: u8 = 186;

/// `RTNH_F_ONLINK` (in `rtnh_flags`, in `rtm_flags` for a single next hop, in `nh_flags`).
pub const RTNH_F_ONLINK: u32 = 4;
/// `RTM_F_CLONED` (in `rtm_flags`): a route-cache entry (a PMTU or redirect exception), not a
/// route.
pub const RTM_F_CLONED: u32 = 0x200;

/// `NHA_ID`: the object's id (u32).
pub const NHA_ID: u16 = 1;
/// `NHA_GROUP`: an array of `struct nexthop_grp`.
pub const NHA_GROUP: u16 = 2;
/// `NHA_GROUP_TYPE`: multipath (0) or resilient (1).
pub const NHA_GROUP_TYPE: u16 = 3;
/// `NHA_BLACKHOLE`: a flag (no payload).
pub const NHA_BLACKHOLE: u16 = 4;
/// `NHA_OIF`: the output interface index (u32).
pub const NHA_OIF: u16 = 5;
/// `NHA_GATEWAY`: the gateway, of the `nh_family`.
pub const NHA_GATEWAY: u16 = 6;
/// `NHA_ENCAP_TYPE`: the lightweight tunnel type (u16).
pub const NHA_ENCAP_TYPE: u16 = 7;
/// `NHA_ENCAP`: the lightweight tunnel.
pub const NHA_ENCAP: u16 = 8;
/// `NHA_FDB`: a flag: the object belongs to a bridge's forwarding database.
pub const NHA_FDB: u16 = 11;

/// `IFLA_ADDRESS`: the link-layer address.
pub const IFLA_ADDRESS: u16 = 1;
/// `IFLA_IFNAME`: the interface name (NUL-terminated).
pub const IFLA_IFNAME: u16 = 3;
/// `IFLA_MTU` (u32).
pub const IFLA_MTU: u16 = 4;
/// `IFF_UP` (in `ifi_flags`): administratively up.
pub const IFF_UP: u32 = 1;
/// `IFF_LOWER_UP` (in `ifi_flags`): the carrier is up.
pub const IFF_LOWER_UP: u32 = 1 << 16;

/// `IFA_ADDRESS`: the prefix address (the peer's on a point-to-point link).
pub const IFA_ADDRESS: u16 = 1;
/// `IFA_LOCAL`: the local address (IPv4).
pub const IFA_LOCAL: u16 = 2;

/// `RTNLGRP_LINK`: multicast group of link changes.
pub const RTNLGRP_LINK: u32 = 1;
/// `RTNLGRP_IPV4_IFADDR`.
pub const RTNLGRP_IPV4_IFADDR: u32 = 5;
/// `RTNLGRP_IPV4_ROUTE`.
pub const RTNLGRP_IPV4_ROUTE: u32 = 7;
/// `RTNLGRP_IPV6_IFADDR`.
pub const RTNLGRP_IPV6_IFADDR: u32 = 9;
/// `RTNLGRP_IPV6_ROUTE`.
pub const RTNLGRP_IPV6_ROUTE: u32 = 11;
/// `RTNLGRP_NEXTHOP` (32). `bind`'s `nl_groups` mask reaches group 32 at most and only
/// through its top bit; [`crate::RouteSocket`] joins every group with
/// `NETLINK_ADD_MEMBERSHIP` instead, which takes any group number.
pub const RTNLGRP_NEXTHOP: u32 = 32;
