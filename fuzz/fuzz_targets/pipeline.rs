//! Arbitrary batches of frames into a forwarding worker (with and without its flow table) on
//! a small router: nothing may panic, every frame gets one verdict, and the counters balance
//! (received = forwarded + punted + held + dropped by reason).
//!
//! Input: a sequence of frames, each a length byte followed by that many bytes.

#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use vfsr_fib::nexthop::Forward;
use vfsr_flow::FlowConfig;
use vfsr_fwd::{Batch, WorkerConfig};
use vfsr_lpm::poptrie::Poptrie;
use vfsr_lpm::Prefix;
use vfsr_rib::{IpPrefix, Source};
use vfsr_router::{PortSpec, Router, RouterConfig};
use vfsr_wire::MacAddr;

type FuzzRouter = Router<Poptrie<u32>, Poptrie<u128>>;

fn v4(a: [u8; 4], len: u8) -> IpPrefix {
    Prefix::new(u32::from(Ipv4Addr::from(a)), len)
        .expect("prefix")
        .into()
}

fn v6(a: &str, len: u8) -> IpPrefix {
    let a: Ipv6Addr = a.parse().expect("addr");
    Prefix::new(u128::from(a), len).expect("prefix").into()
}

fn router() -> FuzzRouter {
    let mut r = FuzzRouter::new(
        vec![
            PortSpec::new(1, MacAddr([2, 0, 0, 0, 0, 1]))
                .v4(Ipv4Addr::new(192, 0, 2, 254), 24)
                .v6("2001:db8:1::fe".parse().expect("addr"), 64),
            PortSpec::new(2, MacAddr([2, 0, 0, 0, 0, 2]))
                .v4(Ipv4Addr::new(198, 51, 100, 254), 24)
                .v6("2001:db8:2::fe".parse().expect("addr"), 64)
                .mtu(576),
        ],
        RouterConfig::default(),
    )
    .expect("ports");
    let gw4 = Ipv4Addr::new(198, 51, 100, 1);
    let gw6: Ipv6Addr = "2001:db8:2::1".parse().expect("addr");
    let via = |r: &FuzzRouter, addr: IpAddr| {
        r.route(
            Source::Static,
            Forward::Gateway {
                addr,
                ifindex: Some(2),
            },
        )
    };
    let b = via(&r, gw4.into());
    let c = via(&r, Ipv4Addr::new(198, 51, 100, 2).into());
    let d = via(&r, gw6.into());
    let unreachable = r.route(Source::Static, Forward::Unreachable);
    // The ports' subnets are connected routes; 10.0.0.0/8 is an ECMP group of two gateways.
    for (p, routes) in [
        (v4([0, 0, 0, 0], 1), vec![b.clone()]),
        (v4([10, 0, 0, 0], 8), vec![b, c]),
        (v4([11, 0, 0, 0], 8), vec![unreachable]),
        (v6("2000::", 3), vec![d]),
    ] {
        r.announce(p, Source::Static, &routes).expect("route");
    }
    r.resolve4(
        1,
        Ipv4Addr::new(192, 0, 2, 1),
        MacAddr([2, 0, 0, 0, 0xa, 1]),
    );
    r.resolve4(2, gw4, MacAddr([2, 0, 0, 0, 0xb, 1]));
    r.resolve6(2, gw6, MacAddr([2, 0, 0, 0, 0xb, 1]));
    r.publish().expect("publish");
    r
}

thread_local! {
    // Built once: workers only read it.
    static ROUTER: FuzzRouter = router();
}

fuzz_target!(|data: &[u8]| {
    let mut frames: Vec<&[u8]> = Vec::new();
    let mut rest = data;
    while let Some((&n, tail)) = rest.split_first() {
        let n = usize::from(n).min(tail.len());
        frames.push(&tail[..n]);
        rest = &tail[n..];
    }
    if frames.is_empty() {
        return;
    }
    ROUTER.with(|router| {
        for flow in [false, true] {
            let mut w = router.worker(WorkerConfig {
                flow: flow.then_some(FlowConfig {
                    capacity: 256,
                    ..FlowConfig::default()
                }),
                ..WorkerConfig::default()
            });
            let mut b = Batch::from_frames(frames.iter().copied(), 1);
            w.process(&mut b, 1_000_000_000);
            assert_eq!(b.verdicts.len(), frames.len());
            assert!(w.counters().balanced());
            assert_eq!(w.counters().rx(), frames.len() as u64);
        }
    });
});
