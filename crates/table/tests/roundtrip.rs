//! Writers and readers agree: text to text, text to MRT and back, plain and gzip, and the
//! format detection of `read_table`.

mod common;

use std::net::IpAddr;

use vfsr_lpm::{Prefix, Route};
use vfsr_table::mrt::{read_mrt, write_mrt};
use vfsr_table::{
    read_table, read_text, synth_v4, synth_v6, traffic, write_text, ReadOptions, Report, Table,
};

const SAMPLE: &str = "\
# a small table of both families, gateways and nh64 mixed
10.0.0.0/8            192.0.2.1
10.1.0.0/16                         # nh64
0.0.0.0/0             192.0.2.254
2001:db8::/32         2001:db8::1
192.0.2.0/24          192.0.2.1
2001:db8:8000::/33
::/0                  fe80::1
203.0.113.7/32        198.51.100.9
";

fn opts() -> ReadOptions {
    ReadOptions::default()
}

/// Routes with their gateway address (or the nh64 value) instead of the index.
type Resolved<K> = Vec<(Prefix<K>, String)>;

fn resolved(t: &Table) -> (Resolved<u32>, Resolved<u128>) {
    let show = |nh| match t.nexthops.gateway(nh) {
        Some(gw) => gw.to_string(),
        None => format!("nh64 {nh}"),
    };
    (
        t.v4.iter().map(|r| (r.prefix, show(r.nexthop))).collect(),
        t.v6.iter().map(|r| (r.prefix, show(r.nexthop))).collect(),
    )
}

#[test]
fn text_round_trip() {
    let (t, r) = read_text(SAMPLE.as_bytes(), "sample", &opts()).unwrap();
    assert_eq!((r.v4, r.v6), (5, 3));
    assert_eq!(t.nexthops.len(), 5);
    let mut out = Vec::new();
    write_text(&t, &mut out).unwrap();
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(text.starts_with("10.0.0.0/8 192.0.2.1\n10.1.0.0/16\n0.0.0.0/0 192.0.2.254\n"));
    assert!(text.contains("\n2001:db8:8000::/33\n::/0 fe80::1\n"));
    let (back, _) = read_text(&out[..], "written", &opts()).unwrap();
    assert_eq!(resolved(&back), resolved(&t));
    // Writing again gives the same bytes.
    let mut again = Vec::new();
    write_text(&back, &mut again).unwrap();
    assert_eq!(again, out);
}

#[test]
fn synthetic_table_round_trips_through_text_and_gzip() {
    let t = Table::from_prefixes(&synth_v4(5, 20_000), &synth_v6(5, 5_000));
    let mut out = Vec::new();
    write_text(&t, &mut out).unwrap();
    let (back, _) = read_text(&common::gzip(&out)[..], "gz", &opts()).unwrap();
    assert_eq!(back, t);
}

#[test]
fn mrt_round_trip() {
    let (t, _) = read_text(SAMPLE.as_bytes(), "sample", &opts()).unwrap();
    // MRT needs a gateway for every route: drop the two nh64 ones.
    let mut gw_only = t.clone();
    gw_only
        .v4
        .retain(|r| t.nexthops.gateway(r.nexthop).is_some());
    gw_only
        .v6
        .retain(|r| t.nexthops.gateway(r.nexthop).is_some());
    assert!(write_mrt(&t, Vec::new()).is_err());
    let mut dump = Vec::new();
    write_mrt(&gw_only, &mut dump).unwrap();
    for input in [dump.clone(), common::gzip(&dump)] {
        let (back, report) = read_mrt(&input[..], "dump", &opts()).unwrap();
        assert_eq!(resolved(&back), resolved(&gw_only));
        assert_eq!((report.v4, report.v6), (4, 2));
        assert_eq!(report.bad_total() + report.skipped_total(), 0);
        // And through format detection.
        let (auto, report) = read_table(&input[..], "dump", &opts()).unwrap();
        assert!(matches!(report, Report::Mrt(_)));
        assert_eq!(auto, back);
    }
    let (auto, report) =
        read_table(&common::gzip(SAMPLE.as_bytes())[..], "text.gz", &opts()).unwrap();
    assert!(matches!(report, Report::Text(_)));
    assert_eq!(auto, t);
}

#[test]
fn large_mrt_round_trip() {
    // Give every synthetic prefix one of a few gateways of its family.
    let mut t = Table::from_prefixes(&synth_v4(9, 50_000), &synth_v6(9, 10_000));
    let gws4: Vec<u32> = (1..=8)
        .map(|i| t.nexthops.intern(IpAddr::from([192, 0, 2, i])).unwrap())
        .collect();
    let gws6: Vec<u32> = (1..=8u16)
        .map(|i| {
            let a = IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, i]);
            t.nexthops.intern(a).unwrap()
        })
        .collect();
    for (i, r) in t.v4.iter_mut().enumerate() {
        r.nexthop = gws4[i % 8];
    }
    for (i, r) in t.v6.iter_mut().enumerate() {
        r.nexthop = gws6[i % 8];
    }
    let mut dump = Vec::new();
    write_mrt(&t, &mut dump).unwrap();
    let (back, _) = read_mrt(&dump[..], "big", &opts()).unwrap();
    assert_eq!(back, t);
}

#[test]
fn traffic_takes_route_lists() {
    let (t, _) = read_text(SAMPLE.as_bytes(), "sample", &opts()).unwrap();
    let a4 = traffic::matched(&t.v4, 1, 100);
    assert!(a4
        .iter()
        .all(|&a| t.v4.iter().any(|r: &Route<u32>| r.prefix.contains(a))));
    let a6: Vec<u128> = traffic::matched(&t.v6, 1, 100);
    assert_eq!(a6.len(), 100);
}
