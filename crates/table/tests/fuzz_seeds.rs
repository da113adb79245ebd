//! The seed corpus of the fuzz targets (`fuzz/corpus/` at the workspace root): made here with
//! the crate's writers, checked here against the readers.
//!
//! `cargo test -p vfsr-table --test fuzz_seeds -- --ignored` rewrites the seed files.

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use vfsr_lpm::Prefix;
use vfsr_table::mrt::{
    attributes_v4, attributes_v6, push_attribute, read_mrt, MrtPeer, MrtWriter, RibEntry,
    TABLE_DUMP_V2,
};
use vfsr_table::{read_text, ReadOptions};

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

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

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

fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let valid = common::mrt_of_gateway_routes(MIXED);
    let mut truncated = valid.clone();
    truncated.truncate(valid.len() - 7);
    vec![
        ("text_parse", "mixed.txt", MIXED.as_bytes().to_vec()),
        ("text_parse", "mixed.txt.gz", common::gzip(MIXED.as_bytes())),
        (
            "text_parse",
            "crlf.txt",
            MIXED.replace('\n', "\r\n").into_bytes(),
        ),
        ("text_parse", "bad_lines.txt", BAD_LINES.as_bytes().to_vec()),
        ("mrt_parse", "dump.mrt", valid.clone()),
        ("mrt_parse", "dump.mrt.gz", common::gzip(&valid)),
        ("mrt_parse", "varied.mrt", varied_dump()),
        ("mrt_parse", "truncated.mrt", truncated),
    ]
}

#[test]
#[ignore = "writes the seed files of fuzz/corpus"]
fn write_seed_corpus() {
    for (target, name, bytes) in seeds() {
        let dir = corpus_dir(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

#[test]
fn seeds_read_as_intended() {
    let strict = ReadOptions::default();
    let lenient = ReadOptions {
        skip_bad: true,
        ..ReadOptions::default()
    };
    let seeds = seeds();
    let get = |name: &str| seeds.iter().find(|s| s.1 == name).unwrap().2.clone();

    let (t, _) = read_text(&get("crlf.txt")[..], "crlf", &strict).unwrap();
    assert_eq!((t.v4.len(), t.v6.len()), (4, 3));
    let (_, r) = read_text(&get("bad_lines.txt")[..], "bad", &lenient).unwrap();
    assert_eq!(r.skipped_total(), 7);
    let (t, r) = read_mrt(&get("varied.mrt")[..], "varied", &strict).unwrap();
    assert_eq!((t.v4.len(), t.v6.len()), (1, 1));
    assert_eq!(r.skipped_total(), 2);
    assert_eq!(
        t.nexthops.gateway(t.v6[0].nexthop).unwrap().to_string(),
        "2001:db8::99"
    );
    assert!(read_mrt(&get("truncated.mrt")[..], "t", &strict).is_err());

    // The committed corpus is what this file makes (when the fuzz directory is there).
    for (target, name, bytes) in seeds {
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
