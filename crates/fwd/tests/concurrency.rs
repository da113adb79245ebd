//! Workers forwarding on their own threads while the control plane changes neighbors, next
//! hops and routes under them, with no lock anywhere: every frame a worker sends must be
//! consistent (a MAC of a neighbor on the port it leaves by, that port's own MAC as source,
//! TTL decremented once, checksum valid), and the workers must see the changes.

mod common;

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use vfsr_fib::nexthop::Forward;
use vfsr_fwd::{Batch, Verdict, WorkerConfig};
use vfsr_wire::{checksum, MacAddr};

const B_OTHER: MacAddr = MacAddr([2, 0, 0, 0, 0xb, 0x91]);
const D_OTHER: MacAddr = MacAddr([2, 0, 0, 0, 0xd, 0x91]);

#[test]
fn workers_stay_consistent_while_everything_changes() {
    let mut fx = fixture();
    let stop = Arc::new(AtomicBool::new(false));
    let workers = vec![
        fx.worker(WorkerConfig {
            flow: None,
            ..WorkerConfig::default()
        }),
        fx.worker(WorkerConfig::default()),
    ];
    let frames: Vec<Vec<u8>> = (0..64u16)
        .map(|i| {
            udp4_ports(
                HOST4,
                [10, 1, (i >> 4) as u8, i as u8],
                64,
                0,
                false,
                1000 + i,
                53,
            )
        })
        .collect();
    let handles: Vec<_> = workers
        .into_iter()
        .map(|mut w| {
            let stop = Arc::clone(&stop);
            let frames = frames.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut seen = std::collections::HashSet::new();
                let mut forwarded = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut b = Batch::from_frames(frames.iter().map(|f| f.as_slice()), 1);
                    w.process(&mut b, start.elapsed().as_nanos() as u64);
                    for (p, v) in b.results() {
                        let f = p.frame();
                        let Verdict::Forward { oif } = *v else {
                            panic!("not forwarded: {v:?}");
                        };
                        let mut dst = [0u8; 6];
                        dst.copy_from_slice(&f[0..6]);
                        let ok = match oif {
                            2 => [GW_B.0, B_OTHER.0, GW_C.0].contains(&dst) && f[6..12] == P2.0,
                            3 => [GW_D.0, D_OTHER.0].contains(&dst) && f[6..12] == P3.0,
                            _ => false,
                        };
                        assert!(ok, "port {oif} with MACs {:02x?}", &f[0..12]);
                        assert_eq!(f[14 + 8], 63);
                        assert!(checksum::verify(&f[14..34]));
                        seen.insert((oif, dst));
                        forwarded += 1;
                    }
                }
                (seen, forwarded, w.counters().balanced())
            })
        })
        .collect();

    // The control plane: flip the gateways' MACs, move the next hop, move the route.
    let gw_b: Ipv4Addr = "198.51.100.1".parse().unwrap();
    let gw_d: Ipv4Addr = "203.0.113.1".parse().unwrap();
    let end = Instant::now() + Duration::from_millis(1500);
    let mut round = 0u64;
    while Instant::now() < end {
        // MACs flip every three rounds, out of step with the three-round route cycle, so
        // every (route, next hop, MAC) combination comes up again and again.
        let flip = (round / 3).is_multiple_of(2);
        fx.resolve4(2, gw_b, if flip { B_OTHER } else { GW_B });
        fx.resolve4(3, gw_d, if flip { D_OTHER } else { GW_D });
        match round % 3 {
            0 => fx.route4("10.1.0.0/16", 4),
            1 => fx.route4("10.1.0.0/16", 2),
            _ => fx.nexthop(
                2,
                Forward::Gateway {
                    addr: if flip { "198.51.100.2" } else { "198.51.100.1" }
                        .parse()
                        .unwrap(),
                    ifindex: Some(2),
                },
            ),
        }
        fx.publish();
        round += 1;
        std::thread::sleep(Duration::from_micros(200));
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let (seen, forwarded, balanced) = h.join().unwrap();
        assert!(balanced);
        assert!(forwarded > 1000, "{forwarded}");
        // Both routes, both MACs of each gateway: the changes reached the worker.
        for want in [(2, GW_B), (2, B_OTHER), (3, GW_D), (3, D_OTHER)] {
            assert!(
                seen.contains(&(want.0, want.1 .0)),
                "never sent to {want:?}: {seen:?} after {round} rounds"
            );
        }
    }
}
