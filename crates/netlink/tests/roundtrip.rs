//! Property tests: what the encoder writes, the decoder reads back; arbitrary and mutated
//! streams never panic the reader or the decoder, and whatever they decode to survives an
//! encode → decode round trip unchanged.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use vfsr_netlink::*;

fn v4_addr() -> impl Strategy<Value = IpAddr> {
    any::<u32>().prop_map(|a| IpAddr::V4(Ipv4Addr::from(a)))
}

fn v6_addr() -> impl Strategy<Value = IpAddr> {
    any::<u128>().prop_map(|a| IpAddr::V6(Ipv6Addr::from(a)))
}

fn any_addr() -> impl Strategy<Value = IpAddr> {
    prop_oneof![v4_addr(), v6_addr()]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![Just(Op::New), Just(Op::Del)]
}

fn route_type() -> impl Strategy<Value = RouteType> {
    prop_oneof![
        Just(RouteType::Unicast),
        Just(RouteType::Blackhole),
        Just(RouteType::Unreachable),
        Just(RouteType::Prohibit),
        Just(RouteType::Local),
        // other kinds by number: not the five above
        prop::sample::select(vec![0u8, 3, 4, 5, 9, 10, 11, 200]).prop_map(RouteType::Other),
    ]
}

/// A next hop as the wire can carry it: a gateway or an interface (or both).
fn nexthop(weighted: bool) -> impl Strategy<Value = NextHop> {
    let weight = if weighted { 1u16..=256 } else { 1u16..=1 };
    (
        prop::option::of(any_addr()),
        prop::option::of(1u32..=u32::MAX),
        weight,
        any::<bool>(),
    )
        .prop_filter(
            "a next hop names a gateway or an interface",
            |(g, o, _, _)| g.is_some() || o.is_some(),
        )
        .prop_map(|(gateway, oif, weight, onlink)| NextHop {
            gateway,
            oif,
            weight,
            onlink,
        })
}

fn route() -> impl Strategy<Value = Route> {
    let family = any::<bool>();
    let nexthops = prop_oneof![
        Just(vec![]),
        nexthop(false).prop_map(|n| vec![n]),
        prop::collection::vec(nexthop(true), 1..8),
    ];
    (
        family,
        any::<u128>(),
        any::<u8>(),
        op(),
        any::<bool>(),
        any::<u32>(),
        (any::<u8>(), any::<u8>(), route_type()),
        prop::option::of(any::<u32>()),
        nexthops,
        prop::option::of(1u32..),
        any::<u8>(),
    )
        .prop_map(
            |(
                v6,
                bits,
                len,
                op,
                replace,
                table,
                (protocol, scope, kind),
                priority,
                nexthops,
                nhid,
                src,
            )| {
                let (addr, max) = if v6 {
                    (IpAddr::V6(Ipv6Addr::from(bits)), 129)
                } else {
                    (IpAddr::V4(Ipv4Addr::from(bits as u32)), 33)
                };
                Route {
                    op,
                    // only an add can replace
                    replace: replace && op == Op::New,
                    dst: (addr, len % max),
                    table,
                    protocol,
                    scope,
                    kind,
                    priority,
                    // a route naming an object carries no next hops of its own
                    nexthops: if nhid.is_some() { vec![] } else { nexthops },
                    nhid,
                    src_len: src % max,
                }
            },
        )
}

fn nexthop_msg() -> impl Strategy<Value = NextHopMsg> {
    let single = (
        prop::option::of(any_addr()),
        prop::option::of(any::<u32>()),
        any::<bool>(),
    )
        .prop_map(|(gateway, oif, onlink)| {
            NextHopObject::Single(NextHop {
                gateway,
                oif,
                weight: 1,
                onlink,
            })
        });
    let object = prop_oneof![
        single,
        Just(NextHopObject::Blackhole),
        prop::collection::vec((any::<u32>(), 1u16..), 1..16).prop_map(NextHopObject::Group),
    ];
    (op(), any::<bool>(), any::<u32>(), any::<u8>(), object).prop_map(
        |(op, replace, id, protocol, object)| NextHopMsg {
            op,
            replace: replace && op == Op::New,
            id,
            protocol,
            object,
        },
    )
}

fn link() -> impl Strategy<Value = Link> {
    (
        op(),
        any::<u32>(),
        prop::option::of("[a-z0-9.@-]{0,15}"),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(any::<[u8; 6]>()),
        prop::option::of(any::<u32>()),
    )
        .prop_map(|(op, ifindex, name, admin_up, lower_up, mac, mtu)| Link {
            op,
            ifindex,
            name,
            admin_up,
            lower_up,
            mac,
            mtu,
        })
}

fn addr() -> impl Strategy<Value = Addr> {
    (op(), any::<u32>(), any_addr(), any::<u8>()).prop_map(|(op, ifindex, addr, len)| Addr {
        op,
        ifindex,
        addr,
        prefix_len: len % if addr.is_ipv4() { 33 } else { 129 },
    })
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        4 => route().prop_map(Message::Route),
        2 => nexthop_msg().prop_map(Message::NextHop),
        1 => link().prop_map(Message::Link),
        1 => addr().prop_map(Message::Addr),
        1 => Just(Message::Done),
        1 => any::<i32>().prop_map(Message::Error),
    ]
}

/// Decodes, then re-encodes and decodes again: the second decode must equal the first.
fn stable(msgs: &[Message]) -> Result<(), TestCaseError> {
    let mut bytes = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        encode_into(m, i as u32, &mut bytes);
    }
    let mut stats = DecodeStats::default();
    let again = decode(&bytes, &mut stats).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(again.as_slice(), msgs);
    Ok(())
}

/// Feeds `bytes` through an FPM reader in chunks, decoding every frame; returns what was
/// decoded. Never panics; errors end the stream as they end a connection.
fn feed(bytes: &[u8], chunk: usize) -> Vec<Message> {
    let mut reader = FpmReader::with_capacity(0);
    let mut out = Vec::new();
    let mut stats = DecodeStats::default();
    for piece in bytes.chunks(chunk.max(1)) {
        reader.push(piece);
        loop {
            match reader.next_frame() {
                Ok(Some(netlink)) => {
                    let before = out.len();
                    if decode_into(netlink, &mut out, &mut stats).is_err() {
                        assert_eq!(out.len(), before, "a failed frame pushes nothing");
                        return out;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    assert_eq!(reader.next_frame(), Err(e), "the reader stays failed");
                    return out;
                }
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn encode_then_decode_gives_the_message_back(msg in message(), seq in any::<u32>()) {
        let bytes = encode(&msg, seq);
        prop_assert_eq!(bytes.len() % 4, 0);
        let mut stats = DecodeStats::default();
        let got = decode(&bytes, &mut stats).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(got, vec![msg]);
        prop_assert_eq!(stats.skipped.total(), 0);
        prop_assert_eq!(stats.unknown_types, 0);
    }

    #[test]
    fn concatenated_messages_framed_in_fpm_come_back_in_order(
        msgs in prop::collection::vec(message(), 1..20),
        per_frame in 1usize..4,
        chunk in 1usize..300,
    ) {
        let mut stream = Vec::new();
        for group in msgs.chunks(per_frame) {
            let mut netlink = Vec::new();
            for m in group {
                encode_into(m, 0, &mut netlink);
            }
            frame(&netlink, &mut stream).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        prop_assert_eq!(feed(&stream, chunk), msgs);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        chunk in 1usize..64,
    ) {
        let out = feed(&bytes, chunk);
        stable(&out)?;
        // and as raw netlink, without the FPM header
        let mut stats = DecodeStats::default();
        if let Ok(msgs) = decode(&bytes, &mut stats) {
            stable(&msgs)?;
        }
    }

    #[test]
    fn arbitrary_frames_never_panic(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 16..400), 1..6),
        chunk in 1usize..128,
    ) {
        // well-framed FPM, arbitrary netlink inside (lengths patched to fit half the time)
        let mut stream = Vec::new();
        for (i, mut p) in payloads.into_iter().enumerate() {
            if i % 2 == 0 {
                let len = p.len() as u32;
                p[..4].copy_from_slice(&len.to_ne_bytes());
            }
            frame(&p, &mut stream).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        let out = feed(&stream, chunk);
        stable(&out)?;
    }

    #[test]
    fn mutated_streams_never_panic(
        msgs in prop::collection::vec(message(), 1..10),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 1..8),
        chunk in 1usize..200,
    ) {
        let mut stream = Vec::new();
        for m in &msgs {
            frame(&encode(m, 1), &mut stream).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        for (at, byte, how) in edits {
            if stream.is_empty() {
                break;
            }
            let i = at.index(stream.len());
            match how {
                0 => stream[i] = byte,
                1 => stream[i] ^= 1 << (byte % 8),
                2 => stream.insert(i, byte),
                _ => {
                    stream.remove(i);
                }
            }
        }
        let out = feed(&stream, chunk);
        stable(&out)?;
    }
}
