//! The messages route sources deliver, decoded from rtnetlink (the kernel's routing socket)
//! or from FPM frames (zebra's `dplane_fpm_nl`). Plain data: everything the control plane
//! needs of a message, nothing of its encoding.

use std::net::IpAddr;

/// Whether a message announces (`RTM_NEW*`) or withdraws (`RTM_DEL*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `RTM_NEWROUTE`, `RTM_NEWNEXTHOP`, `RTM_NEWLINK`, `RTM_NEWADDR`.
    New,
    /// `RTM_DELROUTE`, `RTM_DELNEXTHOP`, `RTM_DELLINK`, `RTM_DELADDR`.
    Del,
}

/// `rtm_type` of a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RouteType {
    /// `RTN_UNICAST`: forward through the next hops.
    Unicast,
    /// `RTN_BLACKHOLE`: drop silently.
    Blackhole,
    /// `RTN_UNREACHABLE`: drop, ICMP unreachable.
    Unreachable,
    /// `RTN_PROHIBIT`: drop, ICMP administratively prohibited.
    Prohibit,
    /// `RTN_LOCAL`: an address of this host.
    Local,
    /// Anything else (`RTN_BROADCAST`, `RTN_MULTICAST`, `RTN_ANYCAST`, ...), by number.
    Other(u8),
}

/// One next hop of a route (`RTA_GATEWAY` / `RTA_OIF`, or one `rtnexthop` of
/// `RTA_MULTIPATH`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NextHop {
    /// The gateway (`RTA_GATEWAY`; `RTA_VIA` for an IPv4 route through an IPv6 gateway).
    pub gateway: Option<IpAddr>,
    /// The output interface, as the kernel's interface index.
    pub oif: Option<u32>,
    /// `rtnh_hops + 1` (1 for a route with a single next hop).
    pub weight: u16,
    /// `RTNH_F_ONLINK`: the gateway is on the link even if no subnet says so.
    pub onlink: bool,
}

/// A route message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// New or delete.
    pub op: Op,
    /// `NLM_F_REPLACE` was set (replace the route of this prefix instead of adding one).
    pub replace: bool,
    /// The prefix: its address (host bits may be set in the message; kept as sent) and length.
    pub dst: (IpAddr, u8),
    /// The routing table: `RTA_TABLE` if present, else `rtm_table`.
    pub table: u32,
    /// `rtm_protocol` (2 = kernel, 3 = boot, 4 = static, 186 = bgp, ...).
    pub protocol: u8,
    /// `rtm_scope`.
    pub scope: u8,
    /// `rtm_type`.
    pub kind: RouteType,
    /// `RTA_PRIORITY` (the metric), if present.
    pub priority: Option<u32>,
    /// The next hops: one from `RTA_GATEWAY`/`RTA_OIF`, several from `RTA_MULTIPATH`, none
    /// for a route without either (blackhole...) or one that names a next-hop object.
    pub nexthops: Vec<NextHop>,
    /// `RTA_NH_ID`: the route uses the next-hop object with this id.
    pub nhid: Option<u32>,
    /// Source-specific routes (`rtm_src_len` > 0) cannot be forwarded by destination alone.
    pub src_len: u8,
}

/// What a next-hop object (`RTM_NEWNEXTHOP`) is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NextHopObject {
    /// One next hop (`NHA_GATEWAY` and/or `NHA_OIF`; `weight` is 1).
    Single(NextHop),
    /// `NHA_BLACKHOLE`.
    Blackhole,
    /// `NHA_GROUP`: member ids with their weights (`weight + 1` of `struct nexthop_grp`).
    Group(Vec<(u32, u16)>),
}

/// A next-hop object message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NextHopMsg {
    /// New or delete.
    pub op: Op,
    /// `NLM_F_REPLACE`.
    pub replace: bool,
    /// `NHA_ID`.
    pub id: u32,
    /// `nhm_protocol`.
    pub protocol: u8,
    /// What the id stands for (for a delete, whatever the message carried; usually a
    /// `Single` with neither gateway nor interface).
    pub object: NextHopObject,
}

/// An interface message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// New (also: changed) or delete.
    pub op: Op,
    /// The kernel's interface index.
    pub ifindex: u32,
    /// `IFLA_IFNAME`, if present.
    pub name: Option<String>,
    /// `IFF_UP` is set.
    pub admin_up: bool,
    /// `IFF_LOWER_UP` is set (carrier).
    pub lower_up: bool,
    /// `IFLA_ADDRESS`, when it is a 6-byte MAC.
    pub mac: Option<[u8; 6]>,
    /// `IFLA_MTU`.
    pub mtu: Option<u32>,
}

/// An address message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addr {
    /// New or delete.
    pub op: Op,
    /// The kernel's interface index.
    pub ifindex: u32,
    /// `IFA_LOCAL` if present, else `IFA_ADDRESS`.
    pub addr: IpAddr,
    /// `ifa_prefixlen`.
    pub prefix_len: u8,
}

/// One decoded message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Route(Route),
    NextHop(NextHopMsg),
    Link(Link),
    Addr(Addr),
    /// `NLMSG_DONE`: the end of a dump.
    Done,
    /// `NLMSG_ERROR` with a non-zero code (the negated errno), or an acknowledgement (0).
    Error(i32),
}
