//! Intake speed of a whole table over FPM (ignored by default; run in release):
//!
//! ```text
//! cargo test --release -p vfsr-netlink --test throughput -- --ignored --nocapture
//! ```
//!
//! A stream of 1,000,000 IPv4 `RTM_NEWROUTE` frames from [`write_table_stream`] is read the
//! way a route source reads its socket (64 KiB at a time into the reader's spare space, every
//! frame decoded, the messages handed on in batches), then the parts are timed alone: the
//! framing, the decoder on the netlink bytes, and, for comparison, `netlink-packet-route`'s
//! whole-message parse (`RouteMessage::parse`, which this crate does not use).

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use netlink_packet_core::{NetlinkBuffer, NlasIterator, Parseable, ParseableParametrized};
use netlink_packet_route::route::{RouteAttribute, RouteHeader, RouteLwEnCapType, RouteMessage};
use vfsr_netlink::*;

const ROUTES: u32 = 1_000_000;

fn table() -> Vec<TableRoute> {
    (0..ROUTES)
        .map(|i| {
            // /24s from 1.0.0.0 up, 16 gateways on 4 interfaces
            let g = (i.wrapping_mul(2_654_435_761) >> 28) as u8;
            TableRoute {
                addr: IpAddr::V4(Ipv4Addr::from(0x0100_0000 + (i << 8))),
                len: 24,
                gateway: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1 + g)),
                oif: 1 + u32::from(g % 4),
            }
        })
        .collect()
}

fn rate(what: &str, n: u64, secs: f64) {
    println!(
        "{what:<58} {:>7.2} M msg/s  {:>6.1} ns/msg",
        n as f64 / secs / 1e6,
        secs * 1e9 / n as f64
    );
}

/// Reads `stream` as from a socket: 64 KiB copies into spare(), frames decoded, messages
/// handed on (dropped) every 4096.
fn intake(stream: &[u8]) -> (u64, DecodeStats) {
    let mut reader = FpmReader::new();
    let mut stats = DecodeStats::default();
    let mut out = Vec::with_capacity(8192);
    let mut n = 0u64;
    let mut at = 0;
    while at < stream.len() {
        let spare = reader.spare();
        let k = spare.len().min(64 * 1024).min(stream.len() - at);
        spare[..k].copy_from_slice(&stream[at..at + k]);
        reader.filled(k);
        at += k;
        while let Some(netlink) = reader.next_frame().unwrap() {
            decode_into(netlink, &mut out, &mut stats).unwrap();
        }
        if out.len() >= 4096 {
            n += out.len() as u64;
            black_box(&out);
            out.clear();
        }
    }
    n += out.len() as u64;
    (n, stats)
}

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (T, f64) {
    let mut best = f64::MAX;
    let mut last = None;
    for _ in 0..runs {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed().as_secs_f64());
        last = Some(v);
    }
    (last.unwrap(), best)
}

#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture"]
fn decode_throughput_of_a_million_route_table() {
    let v4 = table();
    for nexthop_objects in [false, true] {
        let opts = TableStreamOptions {
            nexthop_objects,
            ..TableStreamOptions::default()
        };
        let t = Instant::now();
        let mut stream = Vec::new();
        let summary = write_table_stream(&v4, &[], &opts, &mut stream).unwrap();
        let write = t.elapsed().as_secs_f64();
        println!(
            "\n{} routes, next-hop objects: {nexthop_objects}: {} frames, {} bytes ({:.1} B/frame)",
            ROUTES,
            summary.frames,
            summary.bytes,
            summary.bytes as f64 / summary.frames as f64
        );
        rate("write_table_stream (encode + frame)", summary.frames, write);

        let ((n, stats), secs) = best_of(3, || intake(&stream));
        assert_eq!(n, summary.frames);
        assert_eq!(stats.routes, u64::from(ROUTES));
        assert_eq!(stats.skipped.total() + stats.unknown_types, 0);
        rate("intake: read 64 KiB + next_frame + decode_into", n, secs);

        // the parts alone
        let frames: Vec<&[u8]> = {
            let mut reader = FpmReader::new();
            reader.push(&stream);
            let mut spans = Vec::new();
            let mut at = 0usize;
            while let Some(f) = reader.next_frame().unwrap() {
                spans.push((at + 4, f.len()));
                at += 4 + f.len();
            }
            // the route frames only (not the next-hop objects)
            spans
                .iter()
                .map(|&(s, l)| &stream[s..s + l])
                .filter(|f| f[4] == 24)
                .collect()
        };
        assert_eq!(frames.len() as u32, ROUTES);
        let mut secs = f64::MAX;
        let mut count = 0u64;
        for _ in 0..3 {
            let mut reader = FpmReader::new();
            reader.push(&stream);
            count = 0;
            let t = Instant::now();
            while let Some(f) = reader.next_frame().unwrap() {
                black_box(f);
                count += 1;
            }
            secs = secs.min(t.elapsed().as_secs_f64());
        }
        rate(
            "  framing alone (next_frame, bytes already buffered)",
            count,
            secs,
        );

        let (_, secs) = best_of(3, || {
            let mut out = Vec::with_capacity(4096);
            let mut stats = DecodeStats::default();
            for f in &frames {
                decode_into(f, &mut out, &mut stats).unwrap();
                if out.len() == 4096 {
                    black_box(&out);
                    out.clear();
                }
            }
            stats
        });
        rate(
            "  decode_into alone (+ drop of the messages)",
            frames.len() as u64,
            secs,
        );

        let (_, secs) = best_of(3, || {
            let mut attrs = 0usize;
            for f in &frames {
                let buf = NetlinkBuffer::new_checked(*f).unwrap();
                let payload = buf.payload();
                black_box(RouteHeader::parse(payload).unwrap());
                attrs += NlasIterator::new(&payload[12..]).count();
            }
            attrs
        });
        rate(
            "  nlmsghdr + rtmsg + attribute walk, no attribute parsed",
            frames.len() as u64,
            secs,
        );

        let (_, secs) = best_of(3, || {
            let mut n = 0usize;
            for f in &frames {
                let buf = NetlinkBuffer::new_checked(*f).unwrap();
                let payload = buf.payload();
                let header = RouteHeader::parse(payload).unwrap();
                let param = (header.address_family, header.kind, RouteLwEnCapType::None);
                for nla in NlasIterator::new(&payload[12..]) {
                    let attr = RouteAttribute::parse_with_param(&nla.unwrap(), param).unwrap();
                    n += usize::from(matches!(attr, RouteAttribute::Table(_)));
                    black_box(attr);
                }
            }
            n
        });
        rate(
            "  ... + RouteAttribute::parse of every attribute",
            frames.len() as u64,
            secs,
        );

        let (_, secs) = best_of(3, || {
            let mut n = 0usize;
            for f in &frames {
                let buf = NetlinkBuffer::new_checked(*f).unwrap();
                let msg = RouteMessage::parse(buf.payload()).unwrap();
                n += msg.attributes.len();
                black_box(msg);
            }
            n
        });
        rate(
            "  netlink-packet-route RouteMessage::parse (not used)",
            frames.len() as u64,
            secs,
        );
    }
}
