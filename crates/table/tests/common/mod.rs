//! Helpers shared by the integration tests of vfsr-table.
#![allow(dead_code)] // each test file uses its own subset

use std::io::Write;
use vfsr_table::mrt::write_mrt;
use vfsr_table::{read_text, ReadOptions};

/// `data` gzip-compressed (best level: the committed fuzz seeds were made this way).
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// An MRT dump of the routes of text table `text` that have a gateway (MRT needs one).
pub fn mrt_of_gateway_routes(text: &str) -> Vec<u8> {
    let (t, _) = read_text(text.as_bytes(), "text", &ReadOptions::default()).unwrap();
    let mut gw = t.clone();
    gw.v4.retain(|r| t.nexthops.gateway(r.nexthop).is_some());
    gw.v6.retain(|r| t.nexthops.gateway(r.nexthop).is_some());
    let mut out = Vec::new();
    write_mrt(&gw, &mut out).unwrap();
    out
}
