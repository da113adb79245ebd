//! The synthetic full table: shape, determinism, speed.

use std::collections::HashSet;
use std::time::Instant;

use vfsr_table::nh64;
use vfsr_table::synth::{
    length_histogram, nested_histogram, synth_table, synth_v4, synth_v6, DEFAULT_V4, DEFAULT_V6,
    REAL_V4_STATS, REAL_V6_STATS,
};

/// Checks counts and nesting of every length against the embedded real statistics: counts
/// within 0.1% (+1), nested fractions within 0.02.
fn check_shape(stats: &[(u8, u32, u32)], counts: &[u64], nested: &[u64]) {
    let total_real: u64 = stats.iter().map(|t| u64::from(t.1)).sum();
    let total: u64 = counts.iter().sum();
    assert_eq!(total, total_real);
    for &(len, c, n) in stats {
        let got = counts[len as usize];
        let tol = u64::from(c) / 1000 + 1;
        assert!(
            got.abs_diff(c.into()) <= tol,
            "/{len}: {got} prefixes, real {c}"
        );
        if got > 0 {
            let frac = nested[len as usize] as f64 / got as f64;
            let real = f64::from(n) / f64::from(c);
            assert!(
                (frac - real).abs() <= 0.02,
                "/{len}: nested {frac:.4}, real {real:.4}"
            );
        }
    }
    for (len, &got) in counts.iter().enumerate() {
        if !stats.iter().any(|t| usize::from(t.0) == len) {
            assert_eq!(got, 0, "/{len} is not in the real table");
        }
    }
}

#[test]
fn default_table_matches_the_real_shape_and_is_fast_and_stable() {
    let t0 = Instant::now();
    let table = synth_table(7);
    let took = t0.elapsed();
    println!(
        "synthetic table: {} + {} prefixes in {took:?}",
        table.v4.len(),
        table.v6.len()
    );
    assert_eq!(table.v4.len(), DEFAULT_V4);
    assert_eq!(table.v6.len(), DEFAULT_V6);
    assert!(table.v4.iter().all(|r| r.nexthop == nh64(&r.prefix)));

    let v4: Vec<_> = table.v4.iter().map(|r| r.prefix).collect();
    let v6: Vec<_> = table.v6.iter().map(|r| r.prefix).collect();
    assert!(v4.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
    assert!(v6.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
    check_shape(
        REAL_V4_STATS,
        &length_histogram(&v4),
        &nested_histogram(&v4),
    );
    check_shape(
        REAL_V6_STATS,
        &length_histogram(&v6),
        &nested_histogram(&v6),
    );

    // Same seed, same table; another seed, another table.
    assert_eq!(synth_table(7), table);
    assert_ne!(synth_v4(8, 1000), synth_v4(7, 1000));
}

#[test]
fn addresses_cluster_like_a_real_table() {
    let v4 = synth_v4(11, DEFAULT_V4);
    let eights: HashSet<u32> = v4.iter().map(|p| p.addr() >> 24).collect();
    // Real tables reach nearly every unicast /8 but never 0, 10, 127 or 224 and above.
    assert!(
        eights.len() > 150 && eights.len() <= 221,
        "{} /8s",
        eights.len()
    );
    assert!(eights
        .iter()
        .all(|&o| (1..=223).contains(&o) && o != 10 && o != 127));
    let v6 = synth_v6(11, DEFAULT_V6);
    let twelves: HashSet<u128> = v6.iter().map(|p| p.addr() >> 116).collect();
    // Concentrated in a few RIR-sized /12s of 2000::/3.
    assert!(twelves.len() <= 16, "{} /12s", twelves.len());
    assert!(twelves.iter().all(|&b| b >> 9 == 1));
}

#[test]
fn scaled_tables_keep_the_proportions() {
    let v6 = synth_v6(3, 16_000);
    assert_eq!(v6.len(), 16_000);
    let h = length_histogram(&v6);
    // /48 is 47% of the real IPv6 table.
    let share = h[48] as f64 / 16_000.0;
    assert!((share - 75_488.0 / 160_147.0).abs() < 0.001, "{share}");
}
