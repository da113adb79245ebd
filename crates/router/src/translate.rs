//! From route-source messages to RIB routes: the one place where a netlink route (from
//! zebra's FPM stream or the kernel's table) becomes routes of the RIB.
//!
//! ```text
//!   RTM_NEWROUTE 10.0.0.0/8 table 254 proto bgp        RIB (source fpm or kernel)
//!     RTA_MULTIPATH                                      10.0.0.0/8
//!       via 192.0.2.1 dev vport1 (ifindex 7) hops 2  ─▶   via 192.0.2.1 dev 1, weight 3
//!       via 192.0.2.9 dev vport2 (ifindex 8)         ─▶   via 192.0.2.9 dev 2, weight 1
//!       via 10.9.9.9  dev eth0   (ifindex 2)         ─▶   (skipped: not a port; counted)
//! ```
//!
//! The output interface of a next hop is the kernel's index of one of the ports' TAPs (what
//! zebra and the host stack see) or of the port's own interface; [`IfMap`] maps both to the
//! pipeline's port index. A next hop without an interface keeps its gateway alone and is
//! resolved by the RIB through the ports' subnets; a next hop through an interface that is
//! not a port cannot be forwarded by vfsr and is left out (a route left with no next hop is
//! withdrawn from this source, as the daemon's choice is not a route vfsr can use).
//!
//! Blackhole routes drop silently; unreachable and prohibit routes drop with an ICMP
//! unreachable. Local, broadcast, multicast and source-specific routes are not forwarding
//! routes and are skipped, each counted under its [`Skip`] reason.

use std::fmt;
use std::net::IpAddr;

use rustc_hash::FxHashMap;
use vfsr_fib::nexthop::Forward;
use vfsr_lpm::Prefix;
use vfsr_netlink::msg::{NextHop, NextHopObject, Route, RouteType};
use vfsr_rib::{IpPrefix, RibRoute, Source};

/// Kernel interface index → the pipeline's port index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IfMap {
    map: FxHashMap<u32, u32>,
}

impl IfMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Kernel interface `kernel` (a port's TAP, or its own interface) is port `port`.
    pub fn insert(&mut self, kernel: u32, port: u32) {
        self.map.insert(kernel, port);
    }

    /// Forgets kernel interface `kernel`.
    pub fn remove(&mut self, kernel: u32) {
        self.map.remove(&kernel);
    }

    /// The port of kernel interface `kernel`.
    pub fn get(&self, kernel: u32) -> Option<u32> {
        self.map.get(&kernel).copied()
    }
}

/// Why a message, or one next hop of it, was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Skip {
    /// A route of another routing table.
    OtherTable,
    /// A route of a protocol the configuration excludes.
    ExcludedProtocol,
    /// A source-specific route (`from` prefix): not a destination route.
    SourceSpecific,
    /// A local, broadcast, multicast or other non-forwarding route type.
    RouteType,
    /// A prefix length beyond its family's width.
    BadPrefix,
    /// An IPv6 link-local prefix (`fe80::/10`): each link has its own, none is forwarded.
    LinkLocal,
    /// A next hop through an interface that is not a port (left out of the route).
    ForeignInterface,
    /// A next hop with neither gateway nor interface, or a gateway of the other family.
    BadNextHop,
    /// A route naming a next-hop object never announced.
    UnknownObject,
    /// A next-hop group naming an unknown or grouped member.
    BadGroup,
    /// The RIB refused the route (next-hop indices exhausted).
    RibRefused,
}

impl Skip {
    /// Every reason.
    pub const ALL: [Skip; 11] = [
        Skip::OtherTable,
        Skip::ExcludedProtocol,
        Skip::SourceSpecific,
        Skip::RouteType,
        Skip::BadPrefix,
        Skip::LinkLocal,
        Skip::ForeignInterface,
        Skip::BadNextHop,
        Skip::UnknownObject,
        Skip::BadGroup,
        Skip::RibRefused,
    ];

    /// Position in [`Skip::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The counter name.
    pub fn name(self) -> &'static str {
        match self {
            Skip::OtherTable => "other_table",
            Skip::ExcludedProtocol => "excluded_protocol",
            Skip::SourceSpecific => "source_specific",
            Skip::RouteType => "route_type",
            Skip::BadPrefix => "bad_prefix",
            Skip::LinkLocal => "link_local",
            Skip::ForeignInterface => "foreign_interface",
            Skip::BadNextHop => "bad_next_hop",
            Skip::UnknownObject => "unknown_object",
            Skip::BadGroup => "bad_group",
            Skip::RibRefused => "rib_refused",
        }
    }
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a source did, for counters and logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceCounters {
    /// Messages taken (all kinds).
    pub messages: u64,
    /// Routes announced or replaced in the RIB.
    pub announced: u64,
    /// Route withdrawals applied.
    pub withdrawn: u64,
    /// Next-hop objects defined or changed.
    pub objects: u64,
    /// Routes moved to a changed next-hop object.
    pub object_updates: u64,
    /// Resynchronisations completed (stale routes swept).
    pub resyncs: u64,
    /// Stale routes removed by sweeps.
    pub swept: u64,
    /// Skipped messages or next hops, by [`Skip`] reason.
    pub skipped: [u64; Skip::ALL.len()],
}

impl SourceCounters {
    /// Counts one skip.
    pub fn skip(&mut self, why: Skip) {
        if let Some(c) = self.skipped.get_mut(why.index()) {
            *c += 1;
        }
    }

    /// The count of one reason.
    pub fn skipped(&self, why: Skip) -> u64 {
        self.skipped.get(why.index()).copied().unwrap_or(0)
    }

    /// Skips of every reason.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.iter().sum()
    }
}

/// The prefix of a route's destination, host bits cleared.
pub fn prefix_of(dst: (IpAddr, u8)) -> Option<IpPrefix> {
    match dst.0 {
        IpAddr::V4(a) if dst.1 <= 32 => Some(IpPrefix::V4(Prefix::new_masked(u32::from(a), dst.1))),
        IpAddr::V6(a) if dst.1 <= 128 => {
            Some(IpPrefix::V6(Prefix::new_masked(u128::from(a), dst.1)))
        }
        _ => None,
    }
}

/// One next hop as the RIB names it, or why it cannot be used. `v4`: the route's family.
pub fn forward_of(nh: &NextHop, v4: bool, ifmap: &IfMap) -> Result<Forward, Skip> {
    let port = match nh.oif {
        Some(k) => Some(ifmap.get(k).ok_or(Skip::ForeignInterface)?),
        None => None,
    };
    match (nh.gateway, port) {
        (Some(g), _) if g.is_ipv4() != v4 => Err(Skip::BadNextHop),
        (Some(addr), ifindex) => Ok(Forward::Gateway { addr, ifindex }),
        (None, Some(ifindex)) => Ok(Forward::Connected { ifindex }),
        (None, None) => Err(Skip::BadNextHop),
    }
}

/// Next-hop objects (`RTM_NEWNEXTHOP`) of one source, by id.
#[derive(Clone, Debug, Default)]
pub struct Objects {
    map: FxHashMap<u32, NextHopObject>,
}

impl Objects {
    /// Defines or redefines `id`; returns whether it was defined before.
    pub fn set(&mut self, id: u32, object: NextHopObject) -> bool {
        self.map.insert(id, object).is_some()
    }

    /// What `id` stands for.
    pub fn get(&self, id: u32) -> Option<&NextHopObject> {
        self.map.get(&id)
    }

    /// Forgets `id`.
    pub fn remove(&mut self, id: u32) -> bool {
        self.map.remove(&id).is_some()
    }

    /// Forgets every object.
    pub fn clear(&mut self) {
        self.map.clear();
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The groups that have `id` as a member.
    pub fn groups_with(&self, id: u32) -> impl Iterator<Item = u32> + '_ {
        self.map.iter().filter_map(move |(g, o)| match o {
            NextHopObject::Group(m) if m.iter().any(|(x, _)| *x == id) => Some(*g),
            _ => None,
        })
    }

    /// The weighted next hops (or a blackhole) `id` stands for.
    pub fn expand(&self, id: u32) -> Result<Expanded, Skip> {
        match self.map.get(&id).ok_or(Skip::UnknownObject)? {
            NextHopObject::Blackhole => Ok(Expanded::Blackhole),
            NextHopObject::Single(nh) => Ok(Expanded::NextHops(vec![*nh])),
            NextHopObject::Group(members) => {
                let mut out = Vec::with_capacity(members.len());
                for (m, w) in members {
                    match self.map.get(m) {
                        Some(NextHopObject::Single(nh)) => out.push(NextHop {
                            weight: (*w).max(1),
                            ..*nh
                        }),
                        // A blackhole member forwards nothing: left out of the group.
                        Some(NextHopObject::Blackhole) => {}
                        Some(NextHopObject::Group(_)) | None => return Err(Skip::BadGroup),
                    }
                }
                Ok(Expanded::NextHops(out))
            }
        }
    }
}

/// What a next-hop object stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expanded {
    /// Next hops with weights.
    NextHops(Vec<NextHop>),
    /// Drop.
    Blackhole,
}

/// A route message as RIB routes: `routes` empty means the source has no usable route for
/// the prefix (withdraw what it had).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Translation {
    /// The prefix.
    pub prefix: IpPrefix,
    /// The routes (source, distance, metric, weights and next-hop object id set).
    pub routes: Vec<RibRoute>,
}

/// Turns one announced route into RIB routes of `source` at `distance` with metric
/// `metric`. Next hops that cannot be used are counted in `counters` and left out.
pub fn translate(
    route: &Route,
    source: Source,
    distance: u8,
    metric: u32,
    ifmap: &IfMap,
    objects: &Objects,
    counters: &mut SourceCounters,
) -> Result<Translation, Skip> {
    if route.src_len > 0 {
        return Err(Skip::SourceSpecific);
    }
    let prefix = prefix_of(route.dst).ok_or(Skip::BadPrefix)?;
    if let IpPrefix::V6(p) = prefix {
        if p.len() >= 10 && (p.addr() >> 118) == 0x3fa {
            return Err(Skip::LinkLocal);
        }
    }
    let v4 = matches!(prefix, IpPrefix::V4(_));
    let base = |f: Forward| {
        RibRoute::new(source, f)
            .with_distance(distance)
            .with_metric(metric)
    };
    let routes = match route.kind {
        RouteType::Blackhole => vec![base(Forward::Blackhole)],
        RouteType::Unreachable | RouteType::Prohibit => vec![base(Forward::Unreachable)],
        RouteType::Local | RouteType::Other(_) => return Err(Skip::RouteType),
        RouteType::Unicast => {
            let (nexthops, nhid) = match route.nhid {
                Some(id) => match objects.expand(id)? {
                    Expanded::Blackhole => {
                        return Ok(Translation {
                            prefix,
                            routes: vec![base(Forward::Blackhole).with_nhid(id)],
                        })
                    }
                    Expanded::NextHops(v) => (v, id),
                },
                None => (route.nexthops.clone(), 0),
            };
            let mut routes: Vec<RibRoute> = Vec::with_capacity(nexthops.len());
            for nh in &nexthops {
                match forward_of(nh, v4, ifmap) {
                    Ok(f) => {
                        let r = base(f).with_weight(nh.weight).with_nhid(nhid);
                        // The same next hop twice (two paths through one gateway): one route
                        // with the weights added up.
                        match routes.iter_mut().find(|x| x.nexthop == r.nexthop) {
                            Some(x) => x.weight = x.weight.saturating_add(r.weight),
                            None => routes.push(r),
                        }
                    }
                    Err(why) => counters.skip(why),
                }
            }
            routes
        }
    };
    Ok(Translation { prefix, routes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfsr_netlink::msg::Op;

    fn route(dst: &str, len: u8, nexthops: Vec<NextHop>) -> Route {
        Route {
            op: Op::New,
            replace: false,
            dst: (dst.parse().unwrap(), len),
            table: 254,
            protocol: 186,
            scope: 0,
            kind: RouteType::Unicast,
            priority: None,
            nexthops,
            nhid: None,
            src_len: 0,
        }
    }

    fn nh(gw: Option<&str>, oif: Option<u32>, weight: u16) -> NextHop {
        NextHop {
            gateway: gw.map(|g| g.parse().unwrap()),
            oif,
            weight,
            onlink: false,
        }
    }

    fn map() -> IfMap {
        let mut m = IfMap::new();
        m.insert(7, 1);
        m.insert(8, 2);
        m
    }

    #[test]
    fn multipath_through_ports_with_weights_and_a_foreign_interface() {
        let mut c = SourceCounters::default();
        let r = route(
            "10.0.0.0",
            8,
            vec![
                nh(Some("192.0.2.1"), Some(7), 3),
                nh(Some("192.0.2.9"), Some(8), 1),
                nh(Some("10.9.9.9"), Some(2), 1),
                nh(None, Some(8), 1),
            ],
        );
        let t = translate(&r, Source::Fpm, 20, 0, &map(), &Objects::default(), &mut c).unwrap();
        assert_eq!(t.prefix.to_string(), "10.0.0.0/8");
        let got: Vec<(String, u16)> = t
            .routes
            .iter()
            .map(|r| (r.nexthop.to_string(), r.weight))
            .collect();
        assert_eq!(
            got,
            vec![
                ("via 192.0.2.1 dev 1".to_string(), 3),
                ("via 192.0.2.9 dev 2".to_string(), 1),
                ("connected dev 2".to_string(), 1)
            ]
        );
        assert_eq!(c.skipped(Skip::ForeignInterface), 1);
        assert!(t
            .routes
            .iter()
            .all(|r| r.distance == 20 && r.source == Source::Fpm));
    }

    #[test]
    fn host_bits_are_cleared_and_types_map() {
        let mut c = SourceCounters::default();
        let mut r = route("10.1.2.3", 16, vec![]);
        r.kind = RouteType::Blackhole;
        let t = translate(
            &r,
            Source::Kernel,
            10,
            5,
            &map(),
            &Objects::default(),
            &mut c,
        )
        .unwrap();
        assert_eq!(t.prefix.to_string(), "10.1.0.0/16");
        assert_eq!(t.routes[0].nexthop, Forward::Blackhole);
        assert_eq!(t.routes[0].metric, 5);
        r.kind = RouteType::Prohibit;
        let t = translate(
            &r,
            Source::Kernel,
            10,
            5,
            &map(),
            &Objects::default(),
            &mut c,
        )
        .unwrap();
        assert_eq!(t.routes[0].nexthop, Forward::Unreachable);
        r.kind = RouteType::Local;
        assert_eq!(
            translate(
                &r,
                Source::Kernel,
                10,
                5,
                &map(),
                &Objects::default(),
                &mut c
            ),
            Err(Skip::RouteType)
        );
        r.kind = RouteType::Unicast;
        r.src_len = 8;
        assert_eq!(
            translate(
                &r,
                Source::Kernel,
                10,
                5,
                &map(),
                &Objects::default(),
                &mut c
            ),
            Err(Skip::SourceSpecific)
        );
        let ll = route("fe80::", 64, vec![nh(None, Some(7), 1)]);
        assert_eq!(
            translate(&ll, Source::Fpm, 20, 0, &map(), &Objects::default(), &mut c),
            Err(Skip::LinkLocal)
        );
        let bad = route("10.0.0.0", 33, vec![]);
        assert_eq!(
            translate(
                &bad,
                Source::Kernel,
                10,
                5,
                &map(),
                &Objects::default(),
                &mut c
            ),
            Err(Skip::BadPrefix)
        );
        // A gateway of the other family is refused; a gateway without interface is kept.
        let r6 = route(
            "2001:db8::",
            32,
            vec![
                nh(Some("192.0.2.1"), None, 1),
                nh(Some("2001:db8::1"), None, 1),
            ],
        );
        let t = translate(
            &r6,
            Source::Kernel,
            10,
            0,
            &map(),
            &Objects::default(),
            &mut c,
        )
        .unwrap();
        assert_eq!(t.routes.len(), 1);
        assert_eq!(t.routes[0].nexthop.to_string(), "via 2001:db8::1");
        assert_eq!(c.skipped(Skip::BadNextHop), 1);
    }

    #[test]
    fn next_hop_objects_expand_with_weights() {
        let mut c = SourceCounters::default();
        let mut o = Objects::default();
        o.set(1, NextHopObject::Single(nh(Some("192.0.2.1"), Some(7), 1)));
        o.set(2, NextHopObject::Single(nh(Some("192.0.2.2"), Some(7), 1)));
        o.set(3, NextHopObject::Group(vec![(1, 2), (2, 1)]));
        o.set(4, NextHopObject::Blackhole);
        o.set(5, NextHopObject::Group(vec![(1, 1), (9, 1)]));
        let mut r = route("10.0.0.0", 8, vec![]);
        r.nhid = Some(3);
        let t = translate(&r, Source::Fpm, 20, 0, &map(), &o, &mut c).unwrap();
        let w: Vec<(String, u16, u32)> = t
            .routes
            .iter()
            .map(|r| (r.nexthop.to_string(), r.weight, r.nhid))
            .collect();
        assert_eq!(
            w,
            vec![
                ("via 192.0.2.1 dev 1".to_string(), 2, 3),
                ("via 192.0.2.2 dev 1".to_string(), 1, 3)
            ]
        );
        r.nhid = Some(4);
        let t = translate(&r, Source::Fpm, 20, 0, &map(), &o, &mut c).unwrap();
        assert_eq!(t.routes[0].nexthop, Forward::Blackhole);
        r.nhid = Some(5);
        assert_eq!(
            translate(&r, Source::Fpm, 20, 0, &map(), &o, &mut c),
            Err(Skip::BadGroup)
        );
        r.nhid = Some(6);
        assert_eq!(
            translate(&r, Source::Fpm, 20, 0, &map(), &o, &mut c),
            Err(Skip::UnknownObject)
        );
        assert_eq!(o.groups_with(1).collect::<Vec<_>>().len(), 2);
    }
}
