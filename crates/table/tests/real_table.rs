//! The real 2024 table from the shared data, when it is present beside the checkout.

use std::time::Instant;

use vfsr_lpm::Prefix;
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
        println!("skipping: shared/data/tier1-2024-prefixes.txt.gz absent");
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
fn default_table_is_the_real_one_when_present() {
    let (table, source) = load_default_table(1).unwrap();
    match source {
        TableSource::Real(p) => {
            println!("default table: real, {}", p.display());
            assert_eq!(table.len(), 901_899 + 160_147);
        }
        TableSource::Synthetic { seed } => {
            println!("skipping the real-table check: shared data absent (synthetic, seed {seed})");
            assert_eq!(seed, 1);
            assert_eq!(table.len(), 901_899 + 160_147);
        }
    }
}
