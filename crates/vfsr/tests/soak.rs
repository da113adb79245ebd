//! `vfsr soak`: a short soak (20 s, 1,000 changes per second, a generated table of 20,000
//! IPv4 and 2,500 IPv6 prefixes) through vfsrd between namespaces, asserting its three checks
//! from the JSON report: resident memory does not grow, counters balanced, FIB equal to its
//! source.
//!
//! The memory bound is 10 % here, not the 5 % of a real soak: in 20 seconds the first tenth
//! is the two seconds right after the load, a window of two samples, in which the allocator,
//! the RIB's free lists and the hash tables may still be reaching their working size (a
//! 30-minute soak compares three-minute windows long after that). vfsrd holds about 70 MiB
//! here, so the bound still fails a leak of about 360 bytes per change (20,000 changes).
//! Memory may fall: vfsrd's allocator gives the load's transient memory back a few seconds
//! after the load (about 12 % here).
//!
//! Needs root, network namespaces and vfsrd built next to vfsr; skips with a printed reason
//! otherwise.

use std::path::PathBuf;

mod common;
use common::{generator_skip_reason, namespaces_left, run_with_report};

#[test]
fn a_short_soak_passes_its_three_checks() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_vfsr"));
    if let Some(why) = generator_skip_reason(Some(&exe)) {
        vfsr_skip::skip(&why);
        return;
    }
    let run = run_with_report(
        &exe,
        "soak",
        &[
            "soak",
            "--minutes",
            "0.3334",
            "--rate",
            "1000",
            "--synthetic",
            "20000",
            "--pps",
            "50000",
            "--destinations",
            "4096",
            "--sample-s",
            "1",
            "--rss-bound",
            "10",
        ],
    );
    let v = &run.doc;
    // The readable table says what the report says.
    assert!(
        run.stdout.contains("| resident memory does not grow |"),
        "no check table"
    );
    let checks = &v["checks"];

    // Memory: both windows measured, the drift within the bound.
    let rss = &checks["rss"];
    let (first, last) = (
        rss["first_tenth_kib"].as_f64().unwrap(),
        rss["last_tenth_kib"].as_f64().unwrap(),
    );
    assert!(first > 1000.0 && last > 1000.0, "{rss}");
    assert!(rss["drift_pct"].as_f64().unwrap() <= 10.0, "{rss}");
    assert_eq!(rss["ok"], true, "{rss}");

    // Counters: traffic went through, and every packet is counted once.
    let b = &checks["balance"];
    assert_eq!(b["ok"], true, "{b}");
    let rx = b["rx"].as_u64().unwrap();
    assert!(rx > 50_000, "too little traffic reached vfsrd: {b}");
    assert!(b["forwarded"].as_u64().unwrap() > rx / 2, "{b}");
    let parts = ["forwarded", "punted", "held", "dropped"]
        .iter()
        .map(|k| b[*k].as_u64().unwrap())
        .sum::<u64>();
    assert_eq!(parts, rx, "{b}");

    // FIB: equal to what was sent, after the load and after the churn.
    let f = &checks["fib"];
    assert_eq!(f["final"]["differences"], 0, "{f}");
    assert_eq!(v["load"]["fib"]["differences"], 0, "{}", v["load"]["fib"]);
    assert!(f["final"]["compared"].as_u64().unwrap() > 20_000, "{f}");
    assert_eq!(f["fpm_rib_routes"], f["believed_installed"], "{f}");
    assert_eq!(f["ok"], true, "{f}");

    // The churn ran at about the rate asked, of every kind.
    let c = &v["churn"];
    assert!(c["achieved_per_s"].as_f64().unwrap() > 800.0, "{c}");
    for k in ["withdrawals", "nexthop_changes", "announcements"] {
        assert!(c[k].as_u64().unwrap() > 1000, "{k}: {c}");
    }
    assert!(v["samples"].as_array().unwrap().len() >= 15);
    assert_eq!(checks["ok"], true);
    assert!(run.ok, "vfsr soak failed");

    // Nothing of the run is left behind.
    let left = namespaces_left(run.pid);
    assert!(left.is_empty(), "namespaces left: {left:?}");
}
