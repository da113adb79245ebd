//! Writes seed inputs for the `fpm_stream` fuzz target (fuzz/fuzz_targets/fpm_stream.rs):
//! FPM streams of every message kind the crate reads, produced by the encoder.
//!
//! ```text
//! cargo run -p vfsr-netlink --example fpm_corpus -- <directory>
//! ```
//!
//! Each seed is one byte (the fuzz target's chunk size selector) followed by the stream.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use vfsr_netlink::*;

fn v4(a: [u8; 4]) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(a))
}

fn v6(s: &str) -> IpAddr {
    IpAddr::V6(s.parse::<Ipv6Addr>().unwrap_or(Ipv6Addr::LOCALHOST))
}

fn nh(gateway: IpAddr, oif: u32, weight: u16) -> NextHop {
    NextHop {
        gateway: Some(gateway),
        oif: Some(oif),
        weight,
        onlink: false,
    }
}

fn route(op: Op, dst: (IpAddr, u8), kind: RouteType, nexthops: Vec<NextHop>) -> Route {
    Route {
        op,
        replace: false,
        dst,
        table: 254,
        protocol: 186,
        scope: 0,
        kind,
        priority: Some(20),
        nexthops,
        nhid: None,
        src_len: 0,
    }
}

fn messages() -> Vec<Vec<Message>> {
    let gw = v4([192, 0, 2, 2]);
    let mut nhid = route(Op::New, (v4([10, 8, 0, 0]), 16), RouteType::Unicast, vec![]);
    nhid.nhid = Some(7);
    vec![
        vec![Message::Route(route(
            Op::New,
            (v4([10, 9, 0, 0]), 16),
            RouteType::Unicast,
            vec![nh(gw, 3, 1)],
        ))],
        vec![
            Message::Route(route(
                Op::Del,
                (v4([10, 1, 0, 0]), 16),
                RouteType::Unicast,
                vec![],
            )),
            Message::Route(route(
                Op::New,
                (v4([10, 1, 0, 0]), 16),
                RouteType::Unicast,
                vec![nh(gw, 3, 1)],
            )),
        ],
        vec![Message::Route(route(
            Op::New,
            (v6("2001:db8:7::"), 48),
            RouteType::Unicast,
            vec![nh(v6("2001:db8::2"), 3, 2), nh(v6("2001:db8::3"), 4, 4)],
        ))],
        vec![Message::Route(route(
            Op::New,
            (v4([10, 6, 0, 0]), 16),
            RouteType::Blackhole,
            vec![],
        ))],
        vec![Message::Route(route(
            Op::New,
            (v4([10, 2, 0, 0]), 16),
            RouteType::Unicast,
            vec![nh(v6("fe80::1"), 2, 1)],
        ))],
        vec![Message::Route(nhid)],
        vec![Message::NextHop(NextHopMsg {
            op: Op::New,
            replace: false,
            id: 7,
            protocol: 186,
            object: NextHopObject::Group(vec![(5, 1), (6, 3)]),
        })],
        vec![Message::NextHop(NextHopMsg {
            op: Op::New,
            replace: true,
            id: 5,
            protocol: 186,
            object: NextHopObject::Single(nh(gw, 3, 1)),
        })],
        vec![Message::Link(Link {
            op: Op::New,
            ifindex: 3,
            name: Some("eth0".into()),
            admin_up: true,
            lower_up: true,
            mac: Some([2, 0, 0, 0, 0, 1]),
            mtu: Some(1500),
        })],
        vec![Message::Addr(Addr {
            op: Op::New,
            ifindex: 3,
            addr: v4([192, 0, 2, 1]),
            prefix_len: 24,
        })],
        vec![Message::Done, Message::Error(-17)],
    ]
}

fn main() -> std::io::Result<()> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "fpm_corpus".into()),
    );
    std::fs::create_dir_all(&dir)?;
    let mut n = 0;
    for (i, group) in messages().iter().enumerate() {
        let mut netlink = Vec::new();
        for m in group {
            encode_into(m, i as u32, &mut netlink);
        }
        let mut seed = vec![i as u8 * 5];
        if frame(&netlink, &mut seed).is_ok() {
            std::fs::write(dir.join(format!("seed-{i:02}")), &seed)?;
            n += 1;
        }
    }
    let table: Vec<TableRoute> = (0..20u32)
        .map(|i| TableRoute {
            addr: IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | (i << 8))),
            len: 24,
            gateway: v4([192, 0, 2, 1 + (i % 3) as u8]),
            oif: 1 + i % 2,
        })
        .collect();
    for nexthop_objects in [false, true] {
        let opts = TableStreamOptions {
            nexthop_objects,
            ..TableStreamOptions::default()
        };
        let mut seed = vec![63];
        write_table_stream(&table, &[], &opts, &mut seed)?;
        std::fs::write(dir.join(format!("table-{nexthop_objects}")), &seed)?;
        n += 1;
    }
    println!("{n} seeds in {}", dir.display());
    Ok(())
}
