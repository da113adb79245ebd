//! The kernel route source on arbitrary datagrams: each decoded by
//! `vfsr_netlink::decode_into_marked` (what `RouteSocket::recv_marked` does with each
//! datagram the kernel sends) and applied to a router's RIB by the kernel mirror
//! (`vfsr_router::kernel::KernelMirror`) in the order vfsrd's netlink source
//! (`vfsrd::sources::netlink`) drives it: a dump of links, next-hop objects and both route
//! families started at open and after an overrun or a malformed datagram, route messages
//! in runs between links and dump ends, link changes taking a port up or down, the mark
//! and sweep when the IPv6 route dump ends (or the dumps again when it was interrupted),
//! and the next-hop objects' re-expansion after each read.
//!
//! The input is a sequence of datagrams, each `flags | len (u16 LE) | bytes`; flag bit 0
//! ends a read after the datagram, bit 1 makes the read report an overrun.
//!
//! Nothing may panic, and no route is lost: after each read, for every (prefix, metric)
//! whose last message in the read the mirror took (table, protocol, not a dump listing a
//! notification superseded) and that names no next-hop object, the RIB holds exactly the
//! kernel routes that message translates to: none for a deletion or a route whose next
//! hops are all unusable. At the end the published FIB answers as the RIB says.

#![no_main]

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use vfsr_lpm::radix::Radix;
use vfsr_lpm::{Lpm, RouteMap};
use vfsr_netlink::msg::{Message, Op, Route};
use vfsr_netlink::{decode_into_marked, DecodeStats, DumpKind};
use vfsr_rib::{IpPrefix, Rib, RibRoute, Source};
use vfsr_router::kernel::{KernelConfig, KernelMirror};
use vfsr_router::translate::{prefix_of, translate, Objects, Skip, SourceCounters};
use vfsr_router::{IfMap, PortSpec, Router, RouterConfig};
use vfsr_wire::MacAddr;

type R = Router<Radix<u32>, Radix<u128>>;

/// Port 1: kernel interface 2, its TAP 3; port 2: interface 4, no TAP.
const PORTS: [(u32, u32, Option<u32>); 2] = [(1, 2, Some(3)), (2, 4, None)];

fn router() -> R {
    let mut a = PortSpec::new(1, MacAddr([2, 0, 0, 0, 0, 1])).named("p0");
    a.addrs4 = vec![(Ipv4Addr::new(10, 0, 0, 1), 24)];
    a.addrs6 = vec![(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1), 64)];
    let mut b = PortSpec::new(2, MacAddr([2, 0, 0, 0, 0, 2])).named("p1");
    b.addrs4 = vec![(Ipv4Addr::new(192, 0, 2, 1), 24)];
    b.addrs6 = vec![(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), 64)];
    Router::new(vec![a, b], RouterConfig::default()).expect("the fixed router builds")
}

/// What the RIB must hold for a key after a read: `None` when it cannot be told cheaply.
type Expect = HashMap<(IpPrefix, u32), Option<Vec<RibRoute>>>;

struct Feed {
    mirror: KernelMirror,
    ifmap: IfMap,
    /// Per port: interface up, TAP up.
    up: [(bool, bool); 2],
    expected: VecDeque<DumpKind>,
    stats: DecodeStats,
    intr_at_dump: u64,
    /// Prefixes notifications changed since the dump began (the mirror's rule, followed
    /// here to know which listings it leaves out).
    touched: HashSet<IpPrefix>,
}

impl Feed {
    fn dump(&mut self, rib: &mut Rib) {
        self.expected = [
            DumpKind::Links,
            DumpKind::NextHops,
            DumpKind::Routes4,
            DumpKind::Routes6,
        ]
        .into();
        self.mirror.begin_dump(rib);
        self.touched.clear();
        self.intr_at_dump = self.stats.dump_interrupted;
    }

    fn link(&mut self, l: &vfsr_netlink::Link, router: &mut R) {
        let deleted = l.op == Op::Del;
        for (k, (port, iface, tap)) in PORTS.iter().enumerate() {
            let before = self.up[k].0 && self.up[k].1;
            if *iface == l.ifindex {
                self.up[k].0 = !deleted && l.admin_up && l.lower_up;
            } else if *tap == Some(l.ifindex) {
                self.up[k].1 = !deleted && l.admin_up;
            } else {
                continue;
            }
            let up = self.up[k].0 && self.up[k].1;
            if up != before {
                router.set_port_up(*port, up);
            }
        }
    }

    /// What the mirror does with route message `r` (after its filters), for the check.
    fn expect(&mut self, r: &Route, listing: bool, distance: u8, out: &mut Expect) {
        let Some(prefix) = prefix_of(r.dst) else {
            return;
        };
        if self.mirror.dumping() {
            if listing {
                if self.touched.contains(&prefix) {
                    return; // superseded: left out
                }
            } else {
                self.touched.insert(prefix);
            }
        }
        let config = self.mirror.config();
        if r.table != config.table || config.exclude_protocols.contains(&r.protocol) {
            return;
        }
        let metric = r.priority.unwrap_or(0);
        let want = match r.op {
            Op::Del if r.src_len == 0 => Some(Vec::new()),
            Op::Del => None,
            Op::New if r.nhid.is_some() => None,
            Op::New => {
                let mut scratch = SourceCounters::default();
                match translate(
                    r,
                    Source::Kernel,
                    distance,
                    metric,
                    &self.ifmap,
                    &Objects::default(),
                    &mut scratch,
                ) {
                    Ok(t) => Some(t.routes),
                    Err(Skip::UnknownObject | Skip::BadGroup) => Some(Vec::new()),
                    Err(_) => None,
                }
            }
        };
        out.insert((prefix, metric), want);
    }

    /// `NetlinkSource::apply`: route runs to the mirror, links and dump ends in order.
    /// `false`: a dump was started again (the rest of the read is dropped).
    fn apply(&mut self, msgs: &[Message], multi: &[bool], router: &mut R, out: &mut Expect) {
        let distance = router.distance(Source::Kernel);
        let mut start = 0usize;
        let run = |feed: &mut Feed, router: &mut R, from: usize, to: usize, out: &mut Expect| {
            let (Some(ms), Some(marks)) = (msgs.get(from..to), multi.get(from..to)) else {
                return;
            };
            if ms.is_empty() {
                return;
            }
            for (m, listing) in ms.iter().zip(marks) {
                if let Message::Route(r) = m {
                    feed.expect(r, *listing, distance, out);
                }
            }
            feed.mirror
                .messages_marked(ms, marks, router.rib_mut(), &feed.ifmap, distance);
        };
        for (i, m) in msgs.iter().enumerate() {
            if !matches!(m, Message::Link(_) | Message::Done | Message::Error(_)) {
                continue;
            }
            run(self, router, start, i, out);
            start = i + 1;
            match m {
                Message::Link(l) => self.link(l, router),
                _ => {
                    if self.expected.pop_front() == Some(DumpKind::Routes6) {
                        if self.stats.dump_interrupted > self.intr_at_dump {
                            self.dump(router.rib_mut());
                            return;
                        }
                        self.mirror.dump_complete(router.rib_mut());
                        self.touched.clear();
                    }
                }
            }
        }
        run(self, router, start, msgs.len(), out);
    }
}

fn check(rib: &Rib, want: &Expect) {
    for ((prefix, metric), routes) in want {
        let Some(routes) = routes else { continue };
        let mut have: Vec<RibRoute> = match prefix {
            IpPrefix::V4(p) => rib.routes(p),
            IpPrefix::V6(p) => rib.routes(p),
        }
        .into_iter()
        .filter(|r| r.source == Source::Kernel && r.metric == *metric)
        .collect();
        let mut routes = routes.clone();
        let key = |r: &RibRoute| format!("{r:?}");
        have.sort_by_key(key);
        routes.sort_by_key(key);
        routes.dedup();
        assert_eq!(
            have, routes,
            "{prefix} metric {metric}: the RIB differs from the last message"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let mut router = router();
    let mut ifmap = IfMap::new();
    for (port, iface, tap) in PORTS {
        ifmap.insert(iface, port);
        if let Some(t) = tap {
            ifmap.insert(t, port);
        }
    }
    let mut feed = Feed {
        mirror: KernelMirror::new(KernelConfig::default()),
        ifmap,
        up: [(true, true); 2],
        expected: VecDeque::new(),
        stats: DecodeStats::default(),
        intr_at_dump: 0,
        touched: HashSet::new(),
    };
    feed.dump(router.rib_mut());

    let mut rest = data;
    let (mut msgs, mut multi) = (Vec::new(), Vec::new());
    let mut want = Expect::new();
    let mut refused = feed.mirror.counters().skipped(Skip::RibRefused);
    while let [flags, a, b, tail @ ..] = rest {
        let n = usize::from(u16::from_le_bytes([*a, *b])).min(tail.len());
        let (datagram, next) = tail.split_at(n);
        rest = next;
        let first = msgs.len();
        let failed = match decode_into_marked(datagram, &mut msgs, &mut multi, &mut feed.stats) {
            Ok(k) => {
                assert_eq!(msgs.len(), first + k);
                assert_eq!(multi.len(), msgs.len());
                false
            }
            Err(_) => {
                assert_eq!(msgs.len(), first);
                true
            }
        };
        let end_read = flags & 1 != 0 || failed || flags & 2 != 0 || rest.len() < 3;
        if !end_read {
            continue;
        }
        // A read: its messages applied, then an overrun or a malformed datagram dumps again.
        let m = std::mem::take(&mut msgs);
        let k = std::mem::take(&mut multi);
        feed.apply(&m, &k, &mut router, &mut want);
        if failed || flags & 2 != 0 {
            if flags & 2 != 0 {
                feed.mirror.overrun();
            }
            feed.dump(router.rib_mut());
        }
        let distance = router.distance(Source::Kernel);
        feed.mirror
            .end_batch(router.rib_mut(), &feed.ifmap, distance);
        let now_refused = feed.mirror.counters().skipped(Skip::RibRefused);
        if now_refused == refused {
            check(router.rib(), &want);
        }
        refused = now_refused;
        want.clear();
    }

    // What the RIB says is what the published FIB answers.
    if router.publish().is_err() {
        return;
    }
    let (r4, r6, _) = router.route_table().readers();
    let (f4, f6) = (r4.load(), r6.load());
    let routes4 = router.rib().fib_routes_v4();
    let map4 = RouteMap::from_routes(&routes4);
    for r in &routes4 {
        let want = map4.lookup(r.prefix.addr()).map_or(0, |w| w.nexthop);
        assert_eq!(f4.engine.lookup(r.prefix.addr()), want);
    }
    let routes6 = router.rib().fib_routes_v6();
    let map6 = RouteMap::from_routes(&routes6);
    for r in &routes6 {
        let want = map6.lookup(r.prefix.addr()).map_or(0, |w| w.nexthop);
        assert_eq!(f6.engine.lookup(r.prefix.addr()), want);
    }
});
