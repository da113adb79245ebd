//! Any sequence of FPM messages, reconnections and replays leaves vfsr's published FIB equal
//! to a model of zebra's RIB: each prefix forwards exactly as zebra's last word on it says
//! (the next hops through vfsr's ports, with their weights; blackhole; unreachable; nothing),
//! next-hop objects followed as they change, and after a reconnection exactly the replayed
//! routes kept.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use vfsr_fib::nexthop::Forward;
use vfsr_lpm::poptrie::Poptrie;
use vfsr_lpm::Lpm;
use vfsr_netlink::msg::{Message, NextHop, NextHopMsg, NextHopObject, Op, Route, RouteType};
use vfsr_router::fpm::{FpmConfig, FpmSession};
use vfsr_router::{IfMap, PortSpec, Router, RouterConfig};
use vfsr_wire::MacAddr;

type R = Router<Poptrie<u32>, Poptrie<u128>>;

const PREFIXES: usize = 6;
const OBJECTS: u32 = 6;

fn prefix(i: usize) -> (IpAddr, u8) {
    if i.is_multiple_of(2) {
        (IpAddr::V4(Ipv4Addr::new(10, 0, i as u8, 0)), 24)
    } else {
        (
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, i as u16, 0, 0, 0, 0, 0)),
            48,
        )
    }
}

/// Gateway `g` of the family of prefix `i` (on port 1 or 2's subnet).
fn gateway(i: usize, g: u8) -> IpAddr {
    let port = g % 2 + 1;
    if i.is_multiple_of(2) {
        IpAddr::V4(Ipv4Addr::new(192, 0, port, 10 + g))
    } else {
        IpAddr::V6(Ipv6Addr::new(
            0xfd00,
            u16::from(port),
            0,
            0,
            0,
            0,
            0,
            10 + u16::from(g),
        ))
    }
}

/// A next hop as zebra names it: through the TAP of port 1 or 2 (kernel indices 7, 8), a
/// foreign interface (9, left out by vfsr), or no interface (resolved by subnet).
#[derive(Clone, Copy, Debug)]
struct Hop {
    gw: u8,
    oif: u8,
    weight: u16,
}

fn hop() -> impl Strategy<Value = Hop> {
    (0u8..4, 0u8..4, 1u16..4).prop_map(|(gw, oif, weight)| Hop { gw, oif, weight })
}

#[derive(Clone, Debug)]
enum Target {
    Hops(Vec<Hop>),
    Object(u32),
    Blackhole,
    Unreachable,
}

#[derive(Clone, Debug)]
enum Obj {
    /// A single next hop of IPv4 (`v4`) or IPv6.
    Single {
        v4: bool,
        hop: Hop,
    },
    Blackhole,
    Group(Vec<(u32, u16)>),
}

#[derive(Clone, Debug)]
enum Step {
    Route {
        p: usize,
        target: Target,
    },
    Withdraw {
        p: usize,
    },
    Object {
        id: u32,
        obj: Obj,
    },
    /// The connection drops and comes back; zebra replays the objects and the routes
    /// `keep` selects (the others it no longer has).
    Reconnect {
        keep: Vec<bool>,
    },
    /// The connection drops and zebra stays away past the stale time.
    Lost,
}

fn step() -> impl Strategy<Value = Step> {
    let target = prop_oneof![
        4 => prop::collection::vec(hop(), 1..4).prop_map(Target::Hops),
        3 => (1..=OBJECTS).prop_map(Target::Object),
        1 => Just(Target::Blackhole),
        1 => Just(Target::Unreachable),
    ];
    let obj = prop_oneof![
        3 => (any::<bool>(), hop()).prop_map(|(v4, hop)| Obj::Single { v4, hop }),
        1 => Just(Obj::Blackhole),
        2 => prop::collection::vec((1..=OBJECTS, 1u16..4), 1..4).prop_map(Obj::Group),
    ];
    prop_oneof![
        6 => (0..PREFIXES, target).prop_map(|(p, target)| Step::Route { p, target }),
        2 => (0..PREFIXES).prop_map(|p| Step::Withdraw { p }),
        4 => (1..=OBJECTS, obj).prop_map(|(id, obj)| Step::Object { id, obj }),
        1 => prop::collection::vec(any::<bool>(), PREFIXES).prop_map(|keep| Step::Reconnect { keep }),
        1 => Just(Step::Lost),
    ]
}

fn nexthop(v4: bool, h: Hop) -> NextHop {
    NextHop {
        gateway: Some(gateway(if v4 { 0 } else { 1 }, h.gw)),
        oif: match h.oif {
            0 => Some(7),
            1 => Some(8),
            2 => Some(9),
            _ => None,
        },
        weight: h.weight,
        onlink: false,
    }
}

/// What a prefix forwards to: next hops (resolved, with weights reduced by their common
/// divisor) or a drop.
type Expect = BTreeMap<String, u16>;

fn gcd(a: u16, b: u16) -> u16 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn normalise(mut m: Expect) -> Expect {
    let g = m.values().fold(0, |g, w| gcd(g, *w)).max(1);
    for w in m.values_mut() {
        *w /= g;
    }
    m
}

/// The model: zebra's routes and objects as zebra last stated them. A route through an
/// object vfsr cannot expand (unknown yet, a group with an unknown member, next hops of the
/// other family or through other interfaces only) forwards nothing until its object changes.
#[derive(Clone, Debug, Default)]
struct Model {
    routes: BTreeMap<usize, Target>,
    objects: BTreeMap<u32, Obj>,
}

fn resolve_hop(v4: bool, h: Hop) -> Option<String> {
    let gw = gateway(if v4 { 0 } else { 1 }, h.gw);
    let port = match h.oif {
        0 => 1,
        1 => 2,
        2 => return None,
        _ => u32::from(h.gw % 2 + 1),
    };
    Some(format!("via {gw} dev {port}"))
}

impl Model {
    fn hops(&self, v4: bool, hops: &[Hop]) -> Option<Expect> {
        let mut m = Expect::new();
        for h in hops {
            if let Some(f) = resolve_hop(v4, *h) {
                *m.entry(f).or_default() += h.weight;
            }
        }
        (!m.is_empty()).then(|| normalise(m))
    }

    /// What object `id` stands for in a route of family `v4`: `None` when vfsr cannot use it
    /// (unknown, a member missing, a family mismatch, no usable next hop).
    fn object(&self, v4: bool, id: u32) -> Option<Expect> {
        match self.objects.get(&id) {
            None => None,
            Some(Obj::Blackhole) => Some([("blackhole".to_string(), 1)].into()),
            Some(Obj::Single { v4: f, hop }) => {
                if *f != v4 {
                    return None;
                }
                self.hops(v4, &[*hop])
            }
            Some(Obj::Group(members)) => {
                let mut hops = Vec::new();
                for (m, w) in members {
                    match self.objects.get(m) {
                        Some(Obj::Single { v4: f, hop }) => {
                            if *f == v4 {
                                hops.push(Hop { weight: *w, ..*hop });
                            }
                        }
                        Some(Obj::Blackhole) => {}
                        _ => return None,
                    }
                }
                self.hops(v4, &hops)
            }
        }
    }
}

fn port(i: u32) -> PortSpec {
    PortSpec::new(i, MacAddr([2, 0, 0, 0, 0, i as u8]))
        .v4(Ipv4Addr::new(192, 0, i as u8, 1), 24)
        .v6(Ipv6Addr::new(0xfd00, i as u16, 0, 0, 0, 0, 0, 1), 64)
}

/// What the published FIB says for prefix `i`.
fn published(r: &R, i: usize) -> Option<Expect> {
    let (f4, f6, nh) = r.route_table().readers();
    let snap = nh.load();
    let index = match prefix(i).0 {
        IpAddr::V4(a) => f4.load().engine.lookup(u32::from(a)),
        IpAddr::V6(a) => f6.load().engine.lookup(u128::from(a)),
    };
    let e = snap.get(index)?;
    Some(match &e.forward {
        // Two members may forward alike (a gateway named with and without its interface):
        // their weights add up, as their shares of the buckets do.
        Forward::Group { members, weights } => {
            let mut m = Expect::new();
            for (i, w) in members.iter().zip(weights.iter()) {
                let f = snap
                    .get(*i)
                    .map(|x| x.forward.to_string())
                    .unwrap_or_default();
                *m.entry(f).or_default() += *w;
            }
            normalise(m)
        }
        Forward::Unreachable => [("unreachable".to_string(), 1)].into(),
        f => [(f.to_string(), 1)].into(),
    })
}

struct Harness {
    r: R,
    s: FpmSession,
    ifmap: IfMap,
    now: Instant,
    model: Model,
    /// What vfsr holds for each prefix by the model's reckoning.
    expect: BTreeMap<usize, Option<Expect>>,
}

impl Harness {
    fn new() -> Harness {
        let r = R::new(vec![port(1), port(2)], RouterConfig::default()).unwrap();
        let mut ifmap = IfMap::new();
        ifmap.insert(7, 1);
        ifmap.insert(8, 2);
        let mut h = Harness {
            r,
            s: FpmSession::new(FpmConfig {
                stale_time: Duration::from_secs(30),
                resync_quiet: Duration::from_secs(2),
                ..FpmConfig::default()
            }),
            ifmap,
            now: Instant::now(),
            model: Model::default(),
            expect: BTreeMap::new(),
        };
        let now = h.now;
        h.s.connected(now, h.r.rib_mut());
        h
    }

    fn send(&mut self, msgs: &[Message]) {
        let d = self.r.distance(vfsr_rib::Source::Fpm);
        self.s
            .frame(msgs, self.now, self.r.rib_mut(), &self.ifmap, d);
        self.s.end_batch(self.r.rib_mut(), &self.ifmap, d);
    }

    fn route_msg(&self, p: usize, t: &Target) -> Message {
        let (dst, _) = (prefix(p), ());
        let v4 = p.is_multiple_of(2);
        let (kind, nexthops, nhid) = match t {
            Target::Hops(h) => (
                RouteType::Unicast,
                h.iter().map(|x| nexthop(v4, *x)).collect(),
                None,
            ),
            Target::Object(id) => (RouteType::Unicast, Vec::new(), Some(*id)),
            Target::Blackhole => (RouteType::Blackhole, Vec::new(), None),
            Target::Unreachable => (RouteType::Unreachable, Vec::new(), None),
        };
        Message::Route(Route {
            op: Op::New,
            replace: false,
            dst,
            table: 254,
            protocol: 186,
            scope: 0,
            kind,
            priority: Some(20),
            nexthops,
            nhid,
            src_len: 0,
        })
    }

    fn object_msg(id: u32, o: &Obj) -> Message {
        Message::NextHop(NextHopMsg {
            op: Op::New,
            replace: true,
            id,
            protocol: 186,
            object: match o {
                Obj::Single { v4, hop } => NextHopObject::Single(NextHop {
                    weight: 1,
                    ..nexthop(*v4, *hop)
                }),
                Obj::Blackhole => NextHopObject::Blackhole,
                Obj::Group(m) => NextHopObject::Group(m.clone()),
            },
        })
    }

    /// What vfsr holds for a route zebra sent.
    fn expect_of(&self, p: usize, t: &Target) -> Option<Expect> {
        let v4 = p.is_multiple_of(2);
        match t {
            Target::Hops(h) => self.model.hops(v4, h),
            Target::Object(id) => self.model.object(v4, *id),
            Target::Blackhole => Some([("blackhole".to_string(), 1)].into()),
            Target::Unreachable => Some([("unreachable".to_string(), 1)].into()),
        }
    }

    /// Recomputes what vfsr holds for routes through objects (they follow their objects).
    fn follow_objects(&mut self) {
        for (p, t) in self.model.routes.clone() {
            if let Target::Object(_) = t {
                let e = self.expect_of(p, &t);
                self.expect.insert(p, e);
            }
        }
    }

    fn apply(&mut self, step: &Step) {
        self.now += Duration::from_millis(10);
        match step {
            Step::Route { p, target } => {
                let m = self.route_msg(*p, target);
                let e = self.expect_of(*p, target);
                self.model.routes.insert(*p, target.clone());
                self.expect.insert(*p, e);
                self.send(&[m]);
            }
            Step::Withdraw { p } => {
                let (dst, _) = (prefix(*p), ());
                let m = Message::Route(Route {
                    op: Op::Del,
                    replace: false,
                    dst,
                    table: 254,
                    protocol: 186,
                    scope: 0,
                    kind: RouteType::Unicast,
                    priority: Some(20),
                    nexthops: Vec::new(),
                    nhid: None,
                    src_len: 0,
                });
                self.model.routes.remove(p);
                self.expect.insert(*p, None);
                self.send(&[m]);
            }
            Step::Object { id, obj } => {
                let m = Self::object_msg(*id, obj);
                self.model.objects.insert(*id, obj.clone());
                self.send(&[m]);
                self.follow_objects();
            }
            Step::Reconnect { keep } => {
                let now = self.now;
                self.s.disconnected(now, "peer_closed", self.r.rib_mut());
                self.now += Duration::from_secs(1);
                let now = self.now;
                self.s.connected(now, self.r.rib_mut());
                // zebra replays its objects first, then the routes it still has.
                let objs: Vec<Message> = self
                    .model
                    .objects
                    .iter()
                    .map(|(id, o)| Self::object_msg(*id, o))
                    .collect();
                self.send(&objs);
                let mut routes = Vec::new();
                for (p, t) in self.model.routes.clone() {
                    if keep.get(p).copied().unwrap_or(false) {
                        routes.push(self.route_msg(p, &t));
                    } else {
                        self.model.routes.remove(&p);
                    }
                }
                self.send(&routes);
                // Until the replay is complete, the routes not replayed still forward.
                let before_sweep = self.expect.clone();
                self.follow_objects();
                for (p, e) in &before_sweep {
                    if !self.model.routes.contains_key(p) {
                        self.expect.insert(*p, e.clone());
                    }
                }
                self.check("during the replay");
                self.now += Duration::from_secs(3);
                let now = self.now;
                self.s.poll(now, self.r.rib_mut());
                for p in 0..PREFIXES {
                    if !self.model.routes.contains_key(&p) {
                        self.expect.insert(p, None);
                    }
                }
            }
            Step::Lost => {
                let now = self.now;
                self.s.disconnected(now, "peer_closed", self.r.rib_mut());
                self.now += Duration::from_secs(10);
                let now = self.now;
                assert_eq!(
                    self.s.poll(now, self.r.rib_mut()),
                    0,
                    "kept within the stale time"
                );
                self.check("stale, kept");
                self.now += Duration::from_secs(30);
                let now = self.now;
                self.s.poll(now, self.r.rib_mut());
                self.model.routes.clear();
                for p in 0..PREFIXES {
                    self.expect.insert(p, None);
                }
                self.now += Duration::from_secs(1);
                let now = self.now;
                self.s.connected(now, self.r.rib_mut());
            }
        }
    }

    fn check(&mut self, when: &str) {
        self.r.publish().unwrap();
        for p in 0..PREFIXES {
            let want = self.expect.get(&p).cloned().flatten();
            assert_eq!(published(&self.r, p), want, "prefix {p} {when}");
        }
    }
}

fn run(steps: &[Step]) {
    let mut h = Harness::new();
    for s in steps {
        h.apply(s);
        h.check("after the step");
    }
    // No route left behind: a prefix holds FPM routes exactly when zebra has one for it.
    let rib = h.r.rib();
    for p in 0..PREFIXES {
        let has = match prefix(p).0 {
            IpAddr::V4(a) => rib.routes(&vfsr_lpm::Prefix::new_masked(u32::from(a), 24)),
            IpAddr::V6(a) => rib.routes(&vfsr_lpm::Prefix::new_masked(u128::from(a), 48)),
        }
        .iter()
        .any(|r| r.source == vfsr_rib::Source::Fpm);
        let want = h.expect.get(&p).is_some_and(|e| e.is_some());
        assert_eq!(has, want, "prefix {p}: FPM routes in the RIB");
    }
    assert_eq!(rib.stale_routes(vfsr_rib::Source::Fpm), 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_fib_follows_zebras_rib(steps in prop::collection::vec(step(), 1..40)) {
        run(&steps);
    }
}

#[test]
fn an_update_arriving_as_delete_then_add_keeps_the_next_hop_index() {
    let mut h = Harness::new();
    h.apply(&Step::Route {
        p: 0,
        target: Target::Hops(vec![Hop {
            gw: 0,
            oif: 0,
            weight: 1,
        }]),
    });
    h.check("announced");
    let prefix0 = vfsr_lpm::Prefix::<u32>::new(u32::from(Ipv4Addr::new(10, 0, 0, 0)), 24).unwrap();
    let before = h.r.rib().fib_value(&prefix0);
    let del = Message::Route(Route {
        op: Op::Del,
        replace: false,
        dst: prefix(0),
        table: 254,
        protocol: 186,
        scope: 0,
        kind: RouteType::Unicast,
        priority: Some(20),
        nexthops: Vec::new(),
        nhid: None,
        src_len: 0,
    });
    let add = h.route_msg(
        0,
        &Target::Hops(vec![Hop {
            gw: 0,
            oif: 0,
            weight: 1,
        }]),
    );
    h.r.rib_mut().drain_fib_changes_v4();
    h.send(&[del, add]);
    assert_eq!(h.r.rib().fib_value(&prefix0), before);
    assert!(
        h.r.rib_mut().drain_fib_changes_v4().is_empty(),
        "no FIB change at all"
    );
}
