//! The real 2024 table from the shared data, when it is present beside the checkout.

/// Says why a test is skipped on the real stderr, past the test harness's output capture.
macro_rules! skip_note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use std::net::IpAddr;
use std::time::Instant;

use vfsr_lpm::Prefix;
use vfsr_table::mrt::{read_mrt, write_mrt};
use vfsr_table::shared::{load_default_table, real_table_path, TableSource};
use vfsr_table::synth::{length_histogram, nested_histogram, REAL_V4_STATS, REAL_V6_STATS};
use vfsr_table::{nh64, read_table_file, read_text_file, ReadOptions, Report};

fn expected(stats: &[(u8, u32, u32)], width: usize) -> (Vec<u64>, Vec<u64>) {
    let mut counts = vec![0u64; width + 1];
    let mut nested = vec![0u64; width + 1];
    for &(len, c, n) in stats {
        counts[len as usize] = c.into();
        nested[len as usize] = n.into();
    }
    (counts, nested)
}

#[test]
fn real_table_loads_with_its_published_sizes_and_the_embedded_statistics() {
    let Some(path) = real_table_path() else {
        skip_note!("skipping: shared/data/tier1-2024-prefixes.txt.gz absent");
        return;
    };
    let t0 = Instant::now();
    let (table, report) = read_text_file(&path, &ReadOptions::default()).unwrap();
    println!("read {} in {:?}: {report}", path.display(), t0.elapsed());
    assert_eq!(table.v4.len(), 901_899);
    assert_eq!(table.v6.len(), 160_147);
    assert_eq!(report.skipped_total(), 0);
    assert!(table.nexthops.is_empty());
    assert!(table.v4.iter().all(|r| r.nexthop == nh64(&r.prefix)));
    assert!(table.v6.iter().all(|r| r.nexthop == nh64(&r.prefix)));

    // The statistics the synthetic generator embeds are the real table's.
    let v4: Vec<Prefix<u32>> = table.v4.iter().map(|r| r.prefix).collect();
    let v6: Vec<Prefix<u128>> = table.v6.iter().map(|r| r.prefix).collect();
    let (c4, n4) = expected(REAL_V4_STATS, 32);
    let (c6, n6) = expected(REAL_V6_STATS, 128);
    assert_eq!(length_histogram(&v4), c4);
    assert_eq!(nested_histogram(&v4), n4);
    assert_eq!(length_histogram(&v6), c6);
    assert_eq!(nested_histogram(&v6), n6);

    // Format detection reads it as text too.
    let (again, report) = read_table_file(&path, &ReadOptions::default()).unwrap();
    assert!(matches!(report, Report::Text(_)));
    assert_eq!(again, table);
}

#[test]
fn real_table_through_mrt() {
    let Some(path) = real_table_path() else {
        skip_note!("skipping: shared/data/tier1-2024-prefixes.txt.gz absent");
        return;
    };
    let (mut table, _) = read_text_file(&path, &ReadOptions::default()).unwrap();
    // Sixteen gateways per family, so that every route can be written as MRT.
    let g4: Vec<u32> = (1..=16u8)
        .map(|i| table.nexthops.intern(IpAddr::from([192, 0, 2, i])).unwrap())
        .collect();
    let g6: Vec<u32> = (1..=16u16)
        .map(|i| {
            let a = IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, i]);
            table.nexthops.intern(a).unwrap()
        })
        .collect();
    for r in &mut table.v4 {
        r.nexthop = g4[(r.nexthop % 16) as usize];
    }
    for r in &mut table.v6 {
        r.nexthop = g6[(r.nexthop % 16) as usize];
    }
    let mut dump = Vec::new();
    write_mrt(&table, &mut dump).unwrap();
    let t0 = Instant::now();
    let (back, report) = read_mrt(&dump[..], "real.mrt", &ReadOptions::default()).unwrap();
    println!(
        "read {} MB of MRT in {:?}: {report}",
        dump.len() >> 20,
        t0.elapsed()
    );
    // Gateways are numbered in the order the dump shows them: compare addresses, not indices.
    assert_eq!(
        (back.v4.len(), back.v6.len()),
        (table.v4.len(), table.v6.len())
    );
    let gw = |t: &vfsr_table::Table, nh| t.nexthops.gateway(nh).unwrap();
    for (a, b) in back.v4.iter().zip(&table.v4) {
        assert_eq!(
            (a.prefix, gw(&back, a.nexthop)),
            (b.prefix, gw(&table, b.nexthop))
        );
    }
    for (a, b) in back.v6.iter().zip(&table.v6) {
        assert_eq!(
            (a.prefix, gw(&back, a.nexthop)),
            (b.prefix, gw(&table, b.nexthop))
        );
    }
}

#[test]
fn default_table_is_the_real_one_when_present() {
    let (table, source) = load_default_table(1).unwrap();
    match source {
        TableSource::Real(p) => {
            println!("default table: real, {}", p.display());
            assert_eq!(table.len(), 901_899 + 160_147);
        }
        TableSource::Synthetic { seed } => {
            skip_note!(
                "skipping the real-table check: shared data absent (synthetic, seed {seed})"
            );
            assert_eq!(seed, 1);
            assert_eq!(table.len(), 901_899 + 160_147);
        }
    }
}
