//! Arbitrary batches of frames into a forwarding worker (with and without its flow table) on
//! a small router: nothing may panic, every frame gets one verdict, and the counters balance
//! (received = forwarded + punted + held + dropped by reason).
//!
//! Input: a sequence of frames, each a length byte followed by that many bytes.

#![no_main]

use std::net::Ipv4Addr;

use libfuzzer_sys::fuzz_target;
use vfsr_fib::nexthop::Forward;
use vfsr_fwd::lab::{Lab, PortSpec};
use vfsr_flow::FlowConfig;
use vfsr_fwd::{Batch, WorkerConfig};
use vfsr_lpm::poptrie::Poptrie;
use vfsr_wire::MacAddr;

fn lab() -> Lab<Poptrie<u32>, Poptrie<u128>> {
    let mut lab = Lab::new(vec![
        PortSpec::new(1, MacAddr([2, 0, 0, 0, 0, 1]))
            .v4("192.0.2.254/24")
            .v6("2001:db8:1::fe/64"),
        PortSpec::new(2, MacAddr([2, 0, 0, 0, 0, 2]))
            .v4("198.51.100.254/24")
            .v6("2001:db8:2::fe/64")
            .mtu(576),
    ])
    .expect("ports");
    let gw4 = Ipv4Addr::new(198, 51, 100, 1);
    lab.nexthop(1, Forward::Connected { ifindex: 1 });
    lab.nexthop(2, Forward::Gateway { addr: gw4.into(), ifindex: Some(2) });
    lab.nexthop(3, Forward::Gateway { addr: "198.51.100.2".parse().expect("addr"), ifindex: Some(2) });
    lab.nexthop(4, Forward::group(vec![2, 3]));
    lab.nexthop(5, Forward::Unreachable);
    lab.nexthop(6, Forward::Gateway { addr: "2001:db8:2::1".parse().expect("addr"), ifindex: Some(2) });
    for (p, nh) in [("192.0.2.0/24", 1), ("0.0.0.0/1", 2), ("10.0.0.0/8", 4), ("11.0.0.0/8", 5)] {
        lab.route4(p, nh).expect("route");
    }
    lab.route6("2001:db8:1::/64", 1).expect("route");
    lab.route6("2000::/3", 6).expect("route");
    lab.resolve4(1, Ipv4Addr::new(192, 0, 2, 1), MacAddr([2, 0, 0, 0, 0xa, 1]));
    lab.resolve4(2, gw4, MacAddr([2, 0, 0, 0, 0xb, 1]));
    lab.resolve6(2, "2001:db8:2::1".parse().expect("addr"), MacAddr([2, 0, 0, 0, 0xb, 1]));
    lab.publish().expect("publish");
    lab
}

thread_local! {
    // Built once: workers only read it.
    static LAB: Lab<Poptrie<u32>, Poptrie<u128>> = lab();
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
    LAB.with(|lab| {
        for flow in [false, true] {
            let mut w = lab.worker(WorkerConfig {
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
