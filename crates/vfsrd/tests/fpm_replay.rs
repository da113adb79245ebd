//! vfsrd's FPM listener over real TCP connections, with a client playing zebra: a table
//! sent whole, a replay cut in the middle (mid-frame), a complete replay of a changed table,
//! and hostile bytes. The FIB must equal the last complete replay, and before that keep
//! every route it had (stale, forwarding); a bad frame closes the connection, counted, and
//! loses no route.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpStream};
use std::time::{Duration, Instant};

use vfsr_lpm::poptrie::Poptrie;
use vfsr_netlink::fpm::{write_table_stream, TableRoute, TableStreamOptions};
use vfsr_router::fpm::{FpmConfig, FpmState};
use vfsr_router::{IfMap, PortSpec, Router, RouterConfig};
use vfsr_wire::MacAddr;
use vfsrd::config::FpmPlan;
use vfsrd::sources::fpm::FpmServer;

type R = Router<Poptrie<u32>, Poptrie<u128>>;

fn router() -> R {
    let specs = (1..=2u32)
        .map(|p| {
            PortSpec::new(p, MacAddr([2, 0, 0, 0, 0, p as u8]))
                .v4(Ipv4Addr::new(10, p as u8, 0, 1), 24)
                .v6(Ipv6Addr::new(0xfd00, p as u16, 0, 0, 0, 0, 0, 1), 64)
        })
        .collect();
    R::new(specs, RouterConfig::default()).unwrap()
}

/// `n` IPv4 /24s and `n / 4` IPv6 /48s through gateway `g` (1 or 2: its port).
fn table(n: u32, skip: u32, g: u8) -> (Vec<TableRoute>, Vec<TableRoute>) {
    let v4 = (0..n)
        .filter(|i| skip == 0 || i % skip != 0)
        .map(|i| TableRoute {
            addr: IpAddr::V4(Ipv4Addr::from(0x6440_0000 + (i << 8))),
            len: 24,
            gateway: IpAddr::V4(Ipv4Addr::new(10, g, 0, 2)),
            oif: 100 + u32::from(g),
        })
        .collect();
    let v6 = (0..n / 4)
        .filter(|i| skip == 0 || i % skip != 0)
        .map(|i| TableRoute {
            addr: IpAddr::V6(Ipv6Addr::from(
                (0x2001_0db8_1000_u128 << 80) + (u128::from(i) << 80),
            )),
            len: 48,
            gateway: IpAddr::V6(Ipv6Addr::new(0xfd00, u16::from(g), 0, 0, 0, 0, 0, 2)),
            oif: 100 + u32::from(g),
        })
        .collect();
    (v4, v6)
}

fn stream(t: &(Vec<TableRoute>, Vec<TableRoute>), nhg: bool) -> Vec<u8> {
    let mut out = Vec::new();
    write_table_stream(
        &t.0,
        &t.1,
        &TableStreamOptions {
            nexthop_objects: nhg,
            ..TableStreamOptions::default()
        },
        &mut out,
    )
    .unwrap();
    out
}

struct Rig {
    r: R,
    server: FpmServer,
    ifmap: IfMap,
}

impl Rig {
    fn new(quiet: Duration) -> Rig {
        let plan = FpmPlan {
            listen: "127.0.0.1:0".parse().unwrap(),
            session: FpmConfig {
                resync_quiet: quiet,
                stale_time: Duration::from_secs(600),
                ..FpmConfig::default()
            },
        };
        let mut ifmap = IfMap::new();
        ifmap.insert(101, 1);
        ifmap.insert(102, 2);
        Rig {
            r: router(),
            server: FpmServer::bind(&plan).unwrap(),
            ifmap,
        }
    }

    /// Runs the control plane's part for `d`.
    fn run_for(&mut self, d: Duration) {
        let end = Instant::now() + d;
        while Instant::now() < end {
            self.server.work(Instant::now(), &mut self.r, &self.ifmap);
            self.r.poll(Instant::now()).unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        self.r.publish().unwrap();
    }

    /// Sends `bytes` on a new connection, then keeps it open (`close`: closes it).
    fn send(&mut self, bytes: &[u8], close: bool) -> Option<TcpStream> {
        let mut s = TcpStream::connect(self.server.local_addr()).unwrap();
        s.write_all(bytes).unwrap();
        s.flush().unwrap();
        self.run_for(Duration::from_millis(300));
        if close {
            drop(s);
            self.run_for(Duration::from_millis(100));
            None
        } else {
            Some(s)
        }
    }

    /// vfsr's FIB: prefix → gateway, for the learned routes.
    fn fib(&self) -> std::collections::BTreeMap<String, String> {
        let rib = self.r.rib();
        let snap = rib.nexthop_snapshot();
        let mut out = std::collections::BTreeMap::new();
        for r in rib.fib_routes_v4() {
            let f = snap.get(r.nexthop).unwrap().forward.to_string();
            if !f.starts_with("connected") {
                out.insert(r.prefix.to_string(), f);
            }
        }
        for r in rib.fib_routes_v6() {
            let f = snap.get(r.nexthop).unwrap().forward.to_string();
            if !f.starts_with("connected") {
                out.insert(r.prefix.to_string(), f);
            }
        }
        out
    }
}

fn want(t: &(Vec<TableRoute>, Vec<TableRoute>)) -> std::collections::BTreeMap<String, String> {
    t.0.iter()
        .chain(&t.1)
        .map(|r| {
            let p = match r.addr {
                IpAddr::V4(a) => vfsr_lpm::Prefix::new_masked(u32::from(a), r.len).to_string(),
                IpAddr::V6(a) => vfsr_lpm::Prefix::new_masked(u128::from(a), r.len).to_string(),
            };
            (p, format!("via {} dev {}", r.gateway, r.oif - 100))
        })
        .collect()
}

fn replay_cut_in_the_middle(nhg: bool) {
    let mut rig = Rig::new(Duration::from_millis(400));
    // zebra's table, whole.
    let t1 = table(8000, 0, 1);
    let _c1 = rig.send(&stream(&t1, nhg), false);
    rig.run_for(Duration::from_millis(600));
    assert_eq!(rig.fib(), want(&t1));
    assert!(matches!(
        rig.server.session().state(),
        FpmState::Connected { replaying: false }
    ));
    drop(_c1);
    rig.run_for(Duration::from_millis(100));
    assert_eq!(rig.fib(), want(&t1), "kept when zebra goes away");

    // zebra comes back with a changed table (every fifth route gone, all through the other
    // gateway) and the connection breaks in the middle of the replay, mid-frame.
    let t2 = table(8000, 5, 2);
    let s2 = stream(&t2, nhg);
    let cut = s2.len() / 2 + 3;
    rig.send(&s2[..cut], true);
    let fib = rig.fib();
    assert_eq!(
        fib.len(),
        want(&t1).len(),
        "no route lost to the cut replay"
    );
    let moved = fib.values().filter(|f| f.ends_with("dev 2")).count();
    if nhg {
        // The replay redefined next-hop object 1 (gateway 2 now) before the cut: every route
        // through it follows at once.
        assert_eq!(moved, fib.len());
    } else {
        assert!(
            moved > 0 && moved < fib.len(),
            "{moved} of {} moved",
            fib.len()
        );
    }
    assert!(rig.r.rib().stale_routes(vfsr_rib::Source::Fpm) > 0);
    assert_eq!(rig.server.session().closes().get("peer_closed"), Some(&2));

    // The next, complete replay: the FIB is exactly zebra's table once the stream is quiet.
    let _c3 = rig.send(&s2, false);
    rig.run_for(Duration::from_millis(700));
    assert_eq!(rig.fib(), want(&t2));
    assert_eq!(rig.r.rib().stale_routes(vfsr_rib::Source::Fpm), 0);
    assert!(rig.server.session().counters().swept > 0);
}

#[test]
fn a_replay_cut_in_the_middle_loses_nothing_and_the_next_one_reconciles() {
    replay_cut_in_the_middle(false);
}

#[test]
fn the_same_with_next_hop_objects() {
    replay_cut_in_the_middle(true);
}

#[test]
fn bad_frames_close_the_connection_and_keep_the_routes() {
    let mut rig = Rig::new(Duration::from_millis(300));
    let t = table(500, 0, 1);
    let good = stream(&t, false);
    let _c = rig.send(&good, false);
    rig.run_for(Duration::from_millis(400));
    assert_eq!(rig.fib(), want(&t));
    // Wrong version, protobuf, a length below the header, a netlink header cut short.
    let bad: [&[u8]; 4] = [
        &[2, 1, 0, 20, 0, 0, 0, 0],
        &[1, 2, 0, 8, 0, 0, 0, 0],
        &[1, 1, 0, 3],
        &[
            1, 1, 0, 20, 40, 0, 0, 0, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
    ];
    for b in bad {
        // Some good routes first: they are applied; then the bad frame closes.
        let mut bytes = stream(&table(10, 0, 2), false);
        bytes.extend_from_slice(b);
        let s = rig.send(&bytes, false);
        rig.run_for(Duration::from_millis(100));
        drop(s);
        rig.run_for(Duration::from_millis(50));
    }
    let closes = rig.server.session().closes().clone();
    for reason in ["bad_version", "bad_type", "bad_length", "truncated"] {
        assert_eq!(closes.get(reason), Some(&1), "{closes:?}");
    }
    // Every route is still there (the first ten moved to gateway 2 by the good frames).
    let fib = rig.fib();
    assert_eq!(fib.len(), want(&t).len());
    assert_eq!(
        fib.values().filter(|f| f.ends_with("dev 2")).count(),
        10 + 2
    );
}
