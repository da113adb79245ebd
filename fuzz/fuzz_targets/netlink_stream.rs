//! The kernel route source on arbitrary datagrams: each decoded by
//! `vfsr_netlink::decode_into_marked` (what `RouteSocket::recv_marked` does with each
//! datagram the kernel sends) and applied by vfsrd's own `KernelFeed`
//! (`vfsrd::sources::netlink`), the socket-free part of its netlink source, as that source
//! drives it: the dumps started at open and again when the feed asks (an overrun, a
//! malformed datagram, a route dump the table changed under), each read applied, then the
//! mirror's batch ended.
//!
//! The input is a sequence of datagrams, each `flags | len (u16 LE) | bytes`; flag bit 0
//! ends a read after the datagram, bit 1 makes the read report an overrun.
//!
//! Nothing may panic, and no route is lost: after each read, for every (prefix, metric)
//! whose last message in the read the mirror took (table, protocol, not a dump listing a
//! notification superseded) and that names no next-hop object, the RIB holds exactly the
//! kernel routes that message translates to: none for a deletion or a route whose next
//! hops are all unusable. The model of which messages the mirror takes sees each run of
//! route messages just before the mirror does (`FeedWatch`). At the end the published FIB
//! answers as the RIB says.

#![no_main]

/// The FIB-against-RIB check the targets that change a RIB end with.
#[path = "shared/fib_agrees.rs"]
mod fib_agrees;
use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use vfsr_lpm::radix::Radix;
use vfsr_netlink::decode_into_marked;
use vfsr_netlink::msg::{Message, Op, Route};
use vfsr_rib::{IpPrefix, Rib, RibRoute, Source};
use vfsr_router::kernel::{KernelConfig, KernelMirror};
use vfsr_router::translate::{prefix_of, translate, Objects, Skip, SourceCounters};
use vfsr_router::{IfMap, PortSpec, Router, RouterConfig};
use vfsr_wire::MacAddr;
use vfsrd::sources::netlink::{FeedWatch, KernelFeed, Next};
use vfsrd::sources::KernelIds;

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

/// The check's model: what each route message the feed gives the mirror must leave.
struct Model {
    ifmap: IfMap,
    distance: u8,
    /// Prefixes notifications changed since the dump began (the mirror's rule, followed
    /// here to know which listings it leaves out).
    touched: HashSet<IpPrefix>,
    want: Expect,
}

impl Model {
    /// What the mirror does with route message `r` (after its filters), for the check.
    fn expect(&mut self, r: &Route, listing: bool, mirror: &KernelMirror) {
        let Some(prefix) = prefix_of(r.dst) else {
            return;
        };
        if mirror.dumping() {
            if listing {
                if self.touched.contains(&prefix) {
                    return; // superseded: left out
                }
            } else {
                self.touched.insert(prefix);
            }
        }
        let config = mirror.config();
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
                    self.distance,
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
        self.want.insert((prefix, metric), want);
    }
}

impl FeedWatch for Model {
    fn run(&mut self, msgs: &[Message], marks: &[bool], mirror: &KernelMirror) {
        for (m, listing) in msgs.iter().zip(marks) {
            if let Message::Route(r) = m {
                self.expect(r, *listing, mirror);
            }
        }
    }

    fn swept(&mut self) {
        self.touched.clear();
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
    let mut ports = Vec::new();
    for (port, iface, tap) in PORTS {
        ifmap.insert(iface, port);
        if let Some(t) = tap {
            ifmap.insert(t, port);
        }
        ports.push(KernelIds { port, iface, tap });
    }
    let mut feed = KernelFeed::new(Some(KernelConfig::default()), &ports);
    let mut model = Model {
        ifmap: ifmap.clone(),
        distance: router.distance(Source::Kernel),
        touched: HashSet::new(),
        want: Expect::new(),
    };
    feed.begin_dump(router.rib_mut());

    let mut rest = data;
    let (mut msgs, mut multi) = (Vec::new(), Vec::new());
    let refused = |feed: &KernelFeed| {
        feed.mirror()
            .map_or(0, |m| m.counters().skipped(Skip::RibRefused))
    };
    let mut refused_before = refused(&feed);
    while let [flags, a, b, tail @ ..] = rest {
        let n = usize::from(u16::from_le_bytes([*a, *b])).min(tail.len());
        let (datagram, next) = tail.split_at(n);
        rest = next;
        let first = msgs.len();
        let failed =
            match decode_into_marked(datagram, &mut msgs, &mut multi, feed.decode_stats_mut()) {
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
        let overrun = flags & 2 != 0;
        let end_read = flags & 1 != 0 || failed || overrun || rest.len() < 3;
        if !end_read {
            continue;
        }
        // A read: its messages applied, then an overrun or a malformed datagram dumps again.
        let mut next = feed.apply(&msgs, &multi, &mut router, &ifmap, &mut model);
        msgs.clear();
        multi.clear();
        if overrun {
            next = feed.lost(true);
        } else if failed {
            next = feed.lost(false);
        }
        if next == Next::Dump {
            feed.begin_dump(router.rib_mut());
            model.touched.clear();
        }
        feed.end_batch(&mut router, &ifmap);
        let now_refused = refused(&feed);
        if now_refused == refused_before {
            check(router.rib(), &model.want);
        }
        refused_before = now_refused;
        model.want.clear();
    }

    // What the RIB says is what the published FIB answers.
    if router.publish().is_err() {
        return;
    }
    fib_agrees::assert_fib_agrees(router.route_table());
});
