//! The seed corpus of `text_parse`, `mrt_parse`, `config_parse`, `pcap_read`,
//! `control_frames`, `netlink_stream` and `api_requests` (`corpus/<target>/`), made here with
//! the crates' own writers: a few small valid inputs and damaged copies of them.
//!
//! ```sh
//! cargo test --test seeds -- --ignored   # writes the seeds
//! cargo test --test seeds                # checks them (and that the committed ones match)
//! ```

/// The table crate's test helpers (gzip, an MRT dump of a text table), shared rather than
/// written again.
#[path = "../../crates/table/tests/common/mod.rs"]
mod table_common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use vfsr_api::{parse_request, Request};
use vfsr_io::pcap::{PcapReader, PcapWriter, Resolution};
use vfsr_lpm::Prefix;
use vfsr_netlink::msg::{Link, Message, NextHop, NextHopMsg, NextHopObject, Op, Route, RouteType};
use vfsr_netlink::{decode_into_marked, encode, DecodeStats};
use vfsr_table::mrt::{
    attributes_v4, attributes_v6, push_attribute, read_mrt, MrtPeer, MrtWriter, RibEntry,
    TABLE_DUMP_V2,
};
use vfsr_table::{read_text, ReadOptions};
use vfsr_wire::arp::ArpRepr;
use vfsr_wire::icmpv6::Icmpv6Packet;
use vfsr_wire::{checksum, MacAddr};
use vfsrd::config;
use vfsrd::control::frames;

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

// ---- text_parse, mrt_parse ----

const MIXED: &str = "\
# both families, gateways and nh64
10.0.0.0/8            192.0.2.1
10.1.0.0/16                         # nh64
0.0.0.0/0             192.0.2.254
2001:db8::/32         2001:db8::1
2001:db8:8000::/33
::/0                  fe80::1
203.0.113.7/32        198.51.100.9
";

const BAD_LINES: &str = "\
10.0.0.300/8
10.0.0.0/33
10.0.0.1/8
10.0.0.0/8 2001:db8::1
10.0.0.0/8 192.0.2.1 junk
2001:db8::1/32
192.0.2.0/24 not-an-address
";

/// Two peers (one IPv6), two entries per prefix, the full RFC 4760 MP_REACH_NLRI form with a
/// link-local next hop, and records of other types and subtypes in between.
fn varied_dump() -> Vec<u8> {
    let mut w = MrtWriter::new(Vec::new(), 1_700_000_000);
    let peers = [
        MrtPeer {
            bgp_id: Ipv4Addr::new(192, 0, 2, 1),
            address: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            asn: 64496,
        },
        MrtPeer {
            bgp_id: Ipv4Addr::new(192, 0, 2, 2),
            address: "2001:db8::2".parse().unwrap(),
            asn: 4_200_000_000,
        },
    ];
    w.peer_index_table(Ipv4Addr::new(192, 0, 2, 255), "seed", &peers)
        .unwrap();
    w.record(16, 4, b"a BGP4MP record").unwrap();
    let p4 = Prefix::<u32>::new(0xc633_6400, 22).unwrap();
    let e = |peer, attributes| RibEntry {
        peer_index: peer,
        originated: 1_700_000_000,
        attributes,
    };
    w.rib_v4(
        0,
        &p4,
        &[
            e(0, attributes_v4(64496, Ipv4Addr::new(192, 0, 2, 1))),
            e(1, attributes_v4(64497, Ipv4Addr::new(192, 0, 2, 2))),
        ],
    )
    .unwrap();
    w.record(TABLE_DUMP_V2, 3, b"multicast").unwrap();
    let mut full = Vec::new();
    let mut value = vec![0, 2, 1, 32];
    value.extend_from_slice(&"2001:db8::99".parse::<Ipv6Addr>().unwrap().octets());
    value.extend_from_slice(&"fe80::99".parse::<Ipv6Addr>().unwrap().octets());
    value.push(0);
    push_attribute(&mut full, 0x80, 14, &value).unwrap();
    let p6 = Prefix::<u128>::new(0x2001_0db8_0001u128 << 80, 48).unwrap();
    w.rib_v6(
        1,
        &p6,
        &[
            e(1, full),
            e(0, attributes_v6(64496, "2001:db8::1".parse().unwrap())),
        ],
    )
    .unwrap();
    w.into_inner().unwrap()
}

fn text_seeds() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("mixed.txt", MIXED.as_bytes().to_vec()),
        ("mixed.txt.gz", table_common::gzip(MIXED.as_bytes())),
        ("crlf.txt", MIXED.replace('\n', "\r\n").into_bytes()),
        ("bad_lines.txt", BAD_LINES.as_bytes().to_vec()),
    ]
}

fn mrt_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let valid = table_common::mrt_of_gateway_routes(MIXED);
    let mut truncated = valid.clone();
    truncated.truncate(valid.len() - 7);
    vec![
        ("dump.mrt", valid.clone()),
        ("dump.mrt.gz", table_common::gzip(&valid)),
        ("varied.mrt", varied_dump()),
        ("truncated.mrt", truncated),
    ]
}

// ---- config_parse ----

const MINIMAL: &str = "[[interface]]\nname = \"eth1\"\naddresses = [\"192.0.2.1/24\"]\n";

const FULL: &str = r#"[router]
control_core = 0
workers = [1]
fib4 = "lctrie"
fib6 = "radix"
batch = 64
busy_poll_us = 50
worker_priority = 0

[[interface]]
name = "eth1"
backend = "packet"
addresses = ["192.0.2.1/24", "2001:db8:1::1/64"]
tap = "veth1"
mtu = 9000

[[interface]]
name = "eth2"
xdp_mode = "generic"
addresses = ["198.51.100.1/25", "fe80::2/64"]

[[route]]
prefix = "203.0.113.0/24"
via = ["192.0.2.2", "198.51.100.2"]

[[route]]
prefix = "2001:db8:9::/48"
via = "2001:db8:1::2"
interface = "eth1"

[[route]]
prefix = "10.0.0.0/8"
blackhole = true

[[route]]
prefix = "0.0.0.0/0"
interface = "eth2"

[rib]
distance = { static = 2, kernel = 9 }
max_delay_us = 500

[fpm]
listen = "[::1]:2620"
table = 10

[kernel]
table = "main"
exclude_protocols = ["kernel", 186, "bird"]
rcvbuf = 1048576

[api]
socket = "/run/vfsrd-test.sock"
group = "vfsr"
metrics = "off"

[punt]
arp_nd = 100
icmp = 0
"#;

/// Every mistake the checks name, in one file.
const WRONG: &str = r#"[router]
workers = []
fib4 = "trie"
batch = 0
control_priority = 120

[[interface]]
name = "eth1/x"
queues = 3
mtu = 100
addresses = ["192.0.2.1/33", "2001:db8::1"]

[[interface]]
name = "eth1/x"
tap = "eth1/x"

[[route]]
prefix = "203.0.113.1/24"
via = ["2001:db8::2"]
interface = "nope"

[[route]]
prefix = "10.0.0.0/8"
blackhole = true
via = "192.0.2.9"

[table]
synthetic = true
file = "/dev/null"

[rib]
distance = { bgp = 300 }

[kernel]
table = "nowhere"
rcvbuf = 1

[api]
socket = "relative"
metrics = "here"
"#;

fn config_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let half = FULL.get(..FULL.len() / 2).unwrap_or(FULL);
    vec![
        ("minimal.toml", MINIMAL.into()),
        ("full.toml", FULL.into()),
        (
            "table.toml",
            format!("{MINIMAL}[table]\nsynthetic = true\nvia4 = [\"192.0.2.9\"]\n").into(),
        ),
        ("wrong.toml", WRONG.into()),
        ("cut.toml", half.into()),
        (
            "unknown_key.toml",
            format!("{MINIMAL}colour = \"blue\"\n").into(),
        ),
        (
            "not_toml.toml",
            b"[[interface]\nname = eth1\n\xff\n".to_vec(),
        ),
    ]
}

// ---- pcap_read ----

const US: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const US2: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
const THEM: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x10]);

fn eth(dst: MacAddr, src: MacAddr, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An ICMPv4 echo request (or, with `proto` 6, a TCP SYN to port 22) from `src` to `dst`.
fn ipv4(dst_mac: MacAddr, src: Ipv4Addr, dst: Ipv4Addr, proto: u8) -> Vec<u8> {
    let l4: Vec<u8> = if proto == 1 {
        let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1, b'p', b'i', b'n', b'g'];
        let c = checksum::checksum(&icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        icmp
    } else {
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&22u16.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = 0x02;
        tcp
    };
    let total = (20 + l4.len()) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, proto, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    let c = checksum::checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip.extend_from_slice(&l4);
    eth(dst_mac, THEM, 0x0800, &ip)
}

/// An ICMPv6 echo request from `src` to `dst`.
fn echo6(dst_mac: MacAddr, src: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
    let mut icmp = vec![128, 0, 0, 0, 0, 7, 0, 1, 1, 2, 3, 4];
    Icmpv6Packet::new_checked(&mut icmp[..])
        .unwrap()
        .fill_checksum(&src, &dst);
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(icmp.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[58, 64]);
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    ip.extend_from_slice(&icmp);
    eth(dst_mac, THEM, 0x86dd, &ip)
}

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn sample_frames() -> Vec<Vec<u8>> {
    let arp = ArpRepr::request(THEM, v4("10.0.0.2"), v4("10.0.0.1"));
    vec![
        frames::arp_frame(MacAddr::BROADCAST, THEM, &arp),
        ipv4(US, v4("10.0.0.2"), v4("10.0.0.1"), 1),
        echo6(US, v6("fd00::2"), v6("fd00::1")),
    ]
}

fn pcap_file(res: Resolution, frames: &[Vec<u8>]) -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("vfsr-fuzz-seeds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{res:?}.pcap"));
    let mut w = PcapWriter::create(&path, res).unwrap();
    for (i, f) in frames.iter().enumerate() {
        assert!(w
            .write_frame(1_700_000_000_000_000_000 + i as u64 * 1_234_567, f)
            .unwrap());
    }
    w.finish().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    bytes
}

/// The same file with every field in big-endian order (a capture from a big-endian host).
fn swapped(le: &[u8]) -> Vec<u8> {
    let mut out = le.to_vec();
    let flip = |b: &mut [u8]| b.reverse();
    flip(&mut out[0..4]);
    flip(&mut out[4..6]);
    flip(&mut out[6..8]);
    for at in (8..24).step_by(4) {
        flip(&mut out[at..at + 4]);
    }
    let mut at = 24;
    while at + 16 <= out.len() {
        let incl = u32::from_le_bytes(le[at + 8..at + 12].try_into().unwrap()) as usize;
        for k in 0..4 {
            flip(&mut out[at + 4 * k..at + 4 * k + 4]);
        }
        at += 16 + incl;
    }
    out
}

fn pcap_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let frames = sample_frames();
    let micro = pcap_file(Resolution::Micro, &frames);
    let nano = pcap_file(Resolution::Nano, &frames);
    let first_record = 24 + 16 + frames[0].len();
    let mut cut_orig = micro.clone();
    // The first record's original length one byte short of what it captured.
    let orig = (frames[0].len() - 1) as u32;
    cut_orig[24 + 12..24 + 16].copy_from_slice(&orig.to_le_bytes());
    let mut snapped = micro.clone();
    snapped[24 + 12..24 + 16].copy_from_slice(&1514u32.to_le_bytes());
    let mut huge = micro.clone();
    huge[first_record + 8..first_record + 12].copy_from_slice(&0x0100_0000u32.to_le_bytes());
    let mut linktype = micro.clone();
    linktype[20] = 113;
    let mut pcapng = micro.clone();
    pcapng[0..4].copy_from_slice(&0x0a0d_0d0au32.to_le_bytes());
    vec![
        ("micro.pcap", micro.clone()),
        ("nano.pcap", nano),
        ("big_endian.pcap", swapped(&micro)),
        ("cut.pcap", micro[..micro.len() - 5].to_vec()),
        ("cut_header.pcap", micro[..first_record + 9].to_vec()),
        ("orig_short.pcap", cut_orig),
        ("snapped.pcap", snapped),
        ("huge_record.pcap", huge),
        ("linktype.pcap", linktype),
        ("pcapng.pcap", pcapng),
    ]
}

// ---- control_frames ----

/// A record of the target's input: `op | len | bytes`.
fn record(out: &mut Vec<u8>, op: u8, frame: &[u8]) {
    out.push(op);
    out.push(frame.len().min(255) as u8);
    out.extend_from_slice(&frame[..frame.len().min(255)]);
}

/// Received on port `port`'s socket (the control plane classifies it).
const RX: u8 = 32;
/// Punted by a worker (class from the op).
const PUNT: u8 = 96;

fn control_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let arp_req0 = frames::arp_frame(
        MacAddr::BROADCAST,
        THEM,
        &ArpRepr::request(THEM, v4("10.0.0.2"), v4("10.0.0.1")),
    );
    let arp_req1 = frames::arp_frame(
        MacAddr::BROADCAST,
        THEM,
        &ArpRepr::request(THEM, v4("192.0.2.7"), v4("192.0.2.1")),
    );
    let ns = frames::neighbor_solicit(THEM, frames::link_local(THEM), v6("fd00::1"), None).unwrap();
    let dad =
        frames::neighbor_solicit(THEM, Ipv6Addr::UNSPECIFIED, v6("2001:db8::1"), None).unwrap();
    let na = frames::neighbor_advert(THEM, v6("fd00::2"), v6("fd00::1"), US).unwrap();
    let echo4 = ipv4(US, v4("10.0.0.2"), v4("10.0.0.1"), 1);
    let echo6 = echo6(US2, v6("2001:db8::7"), v6("2001:db8::1"));
    let ssh = ipv4(US2, v4("192.0.2.7"), v4("192.0.2.1"), 6);
    let arp_reply = frames::arp_frame(
        US,
        THEM,
        &ArpRepr::request(US, v4("10.0.0.1"), v4("10.0.0.2")).reply_to(THEM),
    );

    let mut answers = Vec::new();
    record(&mut answers, RX, &arp_req0);
    record(&mut answers, RX + 1, &arp_req1);
    record(&mut answers, RX, &ns);
    record(&mut answers, RX + 1, &dad);
    record(&mut answers, RX, &echo4);
    record(&mut answers, RX + 1, &echo6);

    let mut punted = Vec::new();
    record(&mut punted, PUNT + 1, &ssh);
    record(&mut punted, PUNT + 4, &echo4);
    record(&mut punted, RX + 1, &ssh);

    // A packet held for 10.0.0.2 on port 1 (ifindex 1: op 2), then the neighbor's reply;
    // one held for fd00::2 (op 0x12) and its advertisement.
    let mut resolve = Vec::new();
    record(&mut resolve, 2, &[2, 0x45, 0, 0, 20]);
    record(&mut resolve, RX, &arp_reply);
    let mut held6 = ssh.clone();
    held6[0] = 2;
    record(&mut resolve, 0x12, &held6);
    record(&mut resolve, RX, &na);

    let mut damaged = Vec::new();
    record(&mut damaged, RX, &arp_req0[..30]);
    let mut bad_sum = echo4.clone();
    *bad_sum.last_mut().unwrap() ^= 0xff;
    record(&mut damaged, RX, &bad_sum);
    let mut low_hops = ns.clone();
    low_hops[14 + 7] = 64;
    record(&mut damaged, RX, &low_hops);
    record(&mut damaged, RX, &echo6[..50]);
    record(&mut damaged, RX + 1, &[0xff; 13]);

    vec![
        ("answers", answers),
        ("punted", punted),
        ("resolve", resolve),
        ("damaged", damaged),
    ]
}

// ---- netlink_stream ----

const NLM_F_MULTI: u16 = 0x2;
const NLM_F_DUMP_INTR: u16 = 0x10;

/// A datagram of the target's input: `flags | len (u16 LE) | bytes`.
fn datagram(out: &mut Vec<u8>, flags: u8, bytes: &[u8]) {
    out.push(flags);
    out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// `msg` encoded, with header flags added.
fn nl(msg: &Message, seq: u32, extra: u16) -> Vec<u8> {
    let mut b = encode(msg, seq);
    let flags = u16::from_ne_bytes([b[6], b[7]]) | extra;
    b[6..8].copy_from_slice(&flags.to_ne_bytes());
    b
}

fn route(
    op: Op,
    dst: (IpAddr, u8),
    metric: Option<u32>,
    gateway: Option<IpAddr>,
    oif: Option<u32>,
) -> Message {
    Message::Route(Route {
        op,
        replace: false,
        dst,
        table: 254,
        protocol: 12,
        scope: 0,
        kind: RouteType::Unicast,
        priority: metric,
        nexthops: vec![NextHop {
            gateway,
            oif,
            weight: 1,
            onlink: false,
        }],
        nhid: None,
        src_len: 0,
    })
}

fn link(ifindex: u32, up: bool) -> Message {
    Message::Link(Link {
        op: Op::New,
        ifindex,
        name: Some(format!("if{ifindex}")),
        admin_up: up,
        lower_up: up,
        mac: Some([2, 0, 0, 0, 0, ifindex as u8]),
        mtu: Some(1500),
    })
}

fn netlink_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let p4 = |s: &str, l: u8| (IpAddr::V4(v4(s)), l);
    let p6 = |s: &str, l: u8| (IpAddr::V6(v6(s)), l);
    let gw4 = Some(IpAddr::V4(v4("10.0.0.2")));
    let gw6 = Some(IpAddr::V6(v6("2001:db8::2")));
    let nh_obj = Message::NextHop(NextHopMsg {
        op: Op::New,
        replace: false,
        id: 7,
        protocol: 12,
        object: NextHopObject::Single(NextHop {
            gateway: Some(IpAddr::V4(v4("192.0.2.9"))),
            oif: Some(4),
            weight: 1,
            onlink: false,
        }),
    });
    let mut via_obj = match route(Op::New, p4("203.0.113.0", 24), Some(20), None, None) {
        Message::Route(r) => r,
        _ => unreachable!(),
    };
    via_obj.nexthops.clear();
    via_obj.nhid = Some(7);

    // The start: the four dumps, each listing something, each ended.
    let mut dump = Vec::new();
    let links: Vec<u8> = [link(2, true), link(3, true), link(4, true)]
        .iter()
        .flat_map(|m| nl(m, 1, NLM_F_MULTI))
        .chain(encode(&Message::Done, 1))
        .collect();
    datagram(&mut dump, 0, &links);
    let nhs: Vec<u8> = nl(&nh_obj, 2, NLM_F_MULTI)
        .into_iter()
        .chain(encode(&Message::Done, 2))
        .collect();
    datagram(&mut dump, 1, &nhs);
    let r4: Vec<u8> = [
        route(Op::New, p4("198.51.100.0", 24), None, gw4, None),
        route(Op::New, p4("198.51.100.0", 24), Some(100), None, Some(2)),
        Message::Route(via_obj.clone()),
    ]
    .iter()
    .flat_map(|m| nl(m, 3, NLM_F_MULTI))
    .chain(encode(&Message::Done, 3))
    .collect();
    datagram(&mut dump, 0, &r4);
    let r6: Vec<u8> = nl(
        &route(Op::New, p6("2001:db8:100::", 48), Some(1024), gw6, Some(4)),
        4,
        NLM_F_MULTI,
    )
    .into_iter()
    .chain(encode(&Message::Done, 4))
    .collect();
    datagram(&mut dump, 1, &r6);

    // Then notifications: a change (delete + new), a port going down, a withdrawal.
    let mut live = dump.clone();
    let change: Vec<u8> = [
        route(Op::Del, p4("198.51.100.0", 24), None, None, None),
        route(
            Op::New,
            p4("198.51.100.0", 24),
            None,
            Some(IpAddr::V4(v4("192.0.2.5"))),
            None,
        ),
    ]
    .iter()
    .flat_map(|m| nl(m, 0, 0))
    .collect();
    datagram(&mut live, 1, &change);
    datagram(&mut live, 0, &nl(&link(4, false), 0, 0));
    datagram(
        &mut live,
        1,
        &nl(
            &route(Op::Del, p6("2001:db8:100::", 48), Some(1024), None, None),
            0,
            0,
        ),
    );

    // A route dump the table changed under (NLM_F_DUMP_INTR), a notification racing it.
    let mut interrupted = Vec::new();
    let notice = nl(
        &route(Op::Del, p4("198.51.100.0", 24), None, None, None),
        0,
        0,
    );
    let listing: Vec<u8> = nl(
        &route(Op::New, p4("198.51.100.0", 24), None, gw4, None),
        3,
        NLM_F_MULTI | NLM_F_DUMP_INTR,
    )
    .into_iter()
    .chain(encode(&Message::Done, 3))
    .collect();
    datagram(&mut interrupted, 1, &links);
    datagram(&mut interrupted, 1, &nhs);
    datagram(&mut interrupted, 0, &notice);
    datagram(&mut interrupted, 1, &listing);
    datagram(&mut interrupted, 1, &r6);

    // An overrun in the middle, then a datagram cut inside a message.
    let mut damaged = Vec::new();
    datagram(&mut damaged, 0, &links);
    datagram(&mut damaged, 2, &nhs);
    datagram(&mut damaged, 1, &r4[..r4.len() - 9]);
    datagram(&mut damaged, 1, &r6[..10]);

    vec![
        ("dump", dump),
        ("live", live),
        ("interrupted", interrupted),
        ("damaged", damaged),
    ]
}

// ---- api_requests ----

/// One request as a client writes it.
fn request_line(r: &Request) -> Vec<u8> {
    r.to_line().unwrap().into_bytes()
}

fn api_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let s = |x: &str| x.to_string();
    let add4 = Request::RouteAdd {
        prefix: s("203.0.113.0/24"),
        via: vec![s("192.0.2.7")],
        blackhole: false,
    };
    let every = [
        Request::ShowInterfaces,
        Request::ShowRoute {
            prefix: Some(s("198.51.100.0/24")),
            source: Some(s("static")),
        },
        Request::RouteGet {
            addr: s("198.51.100.9"),
        },
        Request::ShowRib { prefix: None },
        Request::ShowSources,
        Request::ShowNeighbors {
            port: Some(s("p1")),
        },
        Request::ShowNexthops,
        Request::ShowFlows,
        Request::ShowFastPath,
        Request::ShowWorkers,
        Request::ShowCounters { nonzero: true },
        Request::ClearCounters,
        add4.clone(),
        Request::RouteAdd {
            prefix: s("2001:db8:100::/48"),
            via: vec![s("2001:db8::9"), s("2001:db8::a")],
            blackhole: false,
        },
        Request::RouteAdd {
            prefix: s("192.0.2.128/25"),
            via: Vec::new(),
            blackhole: true,
        },
        Request::RouteDel {
            prefix: s("203.0.113.0/24"),
        },
        Request::NeighborFlush { port: None },
        Request::Reload,
    ];
    let requests: Vec<u8> = every.iter().flat_map(request_line).collect();
    // A request cut into two reads (the target cuts its input at zero bytes), then its
    // withdrawal twice.
    let line = request_line(&add4);
    let (a, b) = line.split_at(line.len() / 2);
    let del = request_line(&Request::RouteDel {
        prefix: s("203.0.113.0/24"),
    });
    let split = [a, &[0], b, &del, &del].concat();
    let damaged = [
        &b"not json\n"[..],
        b"{\"cmd\":\"bogus\"}\n",
        b"{\"cmd\":\"route-add\",\"prefix\":\"203.0.113.0/24\",\"via\":[\"2001:db8::1\"]}\n",
        b"{\"cmd\":\"route-add\",\"prefix\":\"203.0.113.0/33\",\"via\":[\"192.0.2.7\"]}\n",
        b"{\"cmd\":\"route-del\",\"prefix\":\"198.51.100.0/24\",\"colour\":1}\n",
        b"\xff\xfe\n",
        b"{\"cmd\":\"route-get\"",
    ]
    .concat();
    vec![
        ("requests", requests),
        ("split_reads", split),
        ("damaged", damaged),
    ]
}

fn all() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut v = Vec::new();
    for (target, seeds) in [
        ("text_parse", text_seeds()),
        ("mrt_parse", mrt_seeds()),
        ("config_parse", config_seeds()),
        ("pcap_read", pcap_seeds()),
        ("control_frames", control_seeds()),
        ("netlink_stream", netlink_seeds()),
        ("api_requests", api_seeds()),
    ] {
        for (name, bytes) in seeds {
            v.push((target, name, bytes));
        }
    }
    v
}

#[test]
#[ignore = "writes the seed files of corpus/"]
fn write_seed_corpus() {
    for (target, name, bytes) in all() {
        let dir = corpus_dir(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

#[test]
fn seeds_are_what_they_say() {
    // Route tables: the text seeds read with the lines they should, the MRT ones with the
    // records they should skip, and the cut dump is refused.
    let strict = ReadOptions::default();
    let lenient = ReadOptions {
        skip_bad: true,
        ..ReadOptions::default()
    };
    let (text, mrt) = (text_seeds(), mrt_seeds());
    let get = |seeds: &[(&str, Vec<u8>)], name: &str| {
        seeds.iter().find(|s| s.0 == name).unwrap().1.clone()
    };
    let (t, _) = read_text(&get(&text, "crlf.txt")[..], "crlf", &strict).unwrap();
    assert_eq!((t.v4.len(), t.v6.len()), (4, 3));
    let (_, r) = read_text(&get(&text, "bad_lines.txt")[..], "bad", &lenient).unwrap();
    assert_eq!(r.skipped_total(), 7);
    let (t, r) = read_mrt(&get(&mrt, "varied.mrt")[..], "varied", &strict).unwrap();
    assert_eq!((t.v4.len(), t.v6.len()), (1, 1));
    assert_eq!(r.skipped_total(), 2);
    assert_eq!(
        t.nexthops.gateway(t.v6[0].nexthop).unwrap().to_string(),
        "2001:db8::99"
    );
    assert!(read_mrt(&get(&mrt, "truncated.mrt")[..], "t", &strict).is_err());

    // Configurations: the valid ones check, the damaged ones do not.
    for (name, bytes) in config_seeds() {
        let text = String::from_utf8_lossy(&bytes);
        let r = config::parse(&text, Some(&[0, 1]));
        let valid = matches!(name, "minimal.toml" | "full.toml" | "table.toml");
        assert_eq!(r.is_ok(), valid, "{name}: {r:?}");
    }
    let errs = config::parse(WRONG, Some(&[0, 1])).unwrap_err();
    assert!(errs.len() >= 15, "{errs:?}");

    // Captures: the three frames from either byte order, fewer from the damaged ones.
    let dir = std::env::temp_dir().join(format!("vfsr-fuzz-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in pcap_seeds() {
        let path = dir.join(name);
        std::fs::write(&path, &bytes).unwrap();
        let read = PcapReader::open(&path, 1).map(|mut r| {
            let mut n = 0;
            while let Ok(Some(_)) = r.next_record() {
                n += 1;
            }
            n
        });
        let want = match name {
            "micro.pcap" | "nano.pcap" | "big_endian.pcap" | "snapped.pcap" => Some(3),
            "cut.pcap" => Some(2),
            "cut_header.pcap" | "orig_short.pcap" | "huge_record.pcap" => Some(1),
            _ => None,
        };
        match (read, want) {
            (Ok(n), Some(w)) if name == "orig_short.pcap" => assert_eq!(n, w + 1, "{name}"),
            (Ok(n), Some(w)) => assert_eq!(n, w, "{name}"),
            (Err(_), None) => {}
            (r, w) => panic!(
                "{name}: read {:?}, wanted {w:?}",
                r.map_err(|e| e.to_string())
            ),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();

    // Netlink: every datagram of the valid seeds decodes, and dump listings are marked.
    for (name, bytes) in netlink_seeds() {
        let mut rest = &bytes[..];
        let (mut ok, mut listed) = (0, 0);
        while rest.len() >= 3 {
            let n = u16::from_le_bytes([rest[1], rest[2]]) as usize;
            let d = &rest[3..3 + n];
            rest = &rest[3 + n..];
            let (mut out, mut multi, mut stats) = (Vec::new(), Vec::new(), DecodeStats::default());
            if decode_into_marked(d, &mut out, &mut multi, &mut stats).is_ok() {
                ok += 1;
                listed += multi.iter().filter(|m| **m).count();
            }
        }
        let (want_ok, want_listed) = match name {
            "dump" => (4, 12),
            "live" => (7, 12),
            "interrupted" => (5, 10),
            _ => (2, 6),
        };
        assert_eq!((ok, listed), (want_ok, want_listed), "{name}");
    }

    // API requests: every line of the valid seeds is a request; of the damaged seed's lines
    // only the two whose fault is in a value (a gateway of the other family, a /33).
    for (name, bytes) in api_seeds() {
        let lines: Vec<&[u8]> = bytes
            .split_inclusive(|b| *b == b'\n')
            .filter(|l| l.ends_with(b"\n"))
            .collect();
        let parsed = lines.iter().filter(|l| parse_request(l).is_ok()).count();
        let want = match name {
            "requests" => (18, 18),
            "split_reads" => (3, 2),
            _ => (6, 2),
        };
        assert_eq!((lines.len(), parsed), want, "{name}");
    }

    // The committed corpus is what this file makes.
    for (target, name, bytes) in all() {
        let path = corpus_dir(target).join(name);
        if let Ok(on_disk) = std::fs::read(&path) {
            assert_eq!(
                on_disk,
                bytes,
                "{} is stale: rerun with --ignored",
                path.display()
            );
        }
    }
}
