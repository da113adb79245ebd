//! `vfsr fwd bench --veth`: a short run over a small table between network namespaces,
//! checking the JSON report's shape and that every router forwarded traffic.
//!
//! Needs root and network namespaces; skips with a printed reason otherwise. The benchmark
//! tears its own namespaces down; the test only checks that none named after the run is left.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod common;
use common::{generator_skip_reason, namespaces_left, run_with_report, TempFile};

/// The benchmark floods both cores: the tests of this file take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A small table: 512 IPv4 prefixes of lengths 16 to 24 in 11.0.0.0/8 and a few IPv6 ones.
fn small_table(path: &Path) {
    let mut s = String::new();
    for i in 0u32..512 {
        let len = 16 + (i % 9);
        let addr = (11u32 << 24) | (i << 13);
        let mask = u32::MAX << (32 - len);
        let a = addr & mask;
        s.push_str(&format!(
            "{}.{}.{}.{}/{len}\n",
            a >> 24,
            (a >> 16) & 255,
            (a >> 8) & 255,
            a & 255
        ));
    }
    for i in 0..8 {
        s.push_str(&format!("2001:db8:{i:x}::/48\n"));
    }
    std::fs::write(path, s).unwrap();
}

#[test]
fn veth_bench_reports_every_router() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = generator_skip_reason(None) {
        vfsr_skip::skip(&why);
        return;
    }
    let pid = std::process::id();
    let table = TempFile(std::env::temp_dir().join(format!("vfsr-vb-table-{pid}.txt")));
    small_table(&table.0);

    let exe = PathBuf::from(env!("CARGO_BIN_EXE_vfsr"));
    let mut routers = vec!["linux", "linux-xdp"];
    // vfsrd is a binary of the same workspace; measure it when it was built next to vfsr.
    if exe.with_file_name("vfsrd").exists() {
        routers.insert(0, "vfsr-fast");
        routers.insert(0, "vfsr");
    } else {
        println!("vfsrd not built next to vfsr: measuring the Linux routers only");
    }
    let routers_arg = routers.join(",");
    let table_arg = table.0.display().to_string();
    let run = run_with_report(
        &exe,
        "vb",
        &[
            "fwd",
            "bench",
            "--veth",
            "--seconds",
            "1",
            "--destinations",
            "256",
            "--routers",
            &routers_arg,
            "--table",
            &table_arg,
        ],
    );
    assert!(run.ok, "vfsr fwd bench --veth failed");
    assert!(run.stdout.contains("bottleneck") || run.stdout.contains("-bound"));

    let v = &run.doc;
    let results = v["results"].as_array().expect("results is an array");
    assert_eq!(results.len(), routers.len());
    for (r, name) in results.iter().zip(&routers) {
        assert_eq!(r["router"].as_str(), Some(*name));
        for k in [
            "offered_pps",
            "forwarded_pps",
            "cpu_cores_used",
            "pps_per_core",
        ] {
            assert!(r[k].is_number(), "{name}: {k} is not a number: {}", r[k]);
        }
        let fwd = r["forwarded_pps"].as_f64().unwrap();
        let offered = r["offered_pps"].as_f64().unwrap();
        assert!(fwd > 0.0, "{name} forwarded nothing");
        assert!(
            offered >= fwd * 0.9,
            "{name}: forwarded {fwd} > offered {offered}"
        );
        assert!(r["cpu_cores_used"].as_f64().unwrap() > 0.0);
        // Ping through vfsrd works, with and without the fast path (the peers' latencies
        // are reported, not asserted).
        if name.starts_with("vfsr") {
            let ping = r["latency_us"]["ping_idle"].as_f64().unwrap_or(0.0);
            assert!(ping > 0.0, "{name}: ping through the router failed");
        }
    }
    // With the fast path, the XDP program forwarded the flood; without, it forwarded nothing.
    for r in results {
        match r["router"].as_str() {
            Some("vfsr-fast") => assert!(
                r["fast_path"]["forwarded"].as_u64().unwrap_or(0) > 1000,
                "{}",
                r["fast_path"]
            ),
            Some("vfsr") => assert_eq!(r["fast_path"]["enabled"], false),
            _ => {}
        }
    }
    assert!(v["idle_cpu_percent"].is_number());
    for k in ["ping_idle", "ping_flood", "tcp_rr_idle", "tcp_rr_flood"] {
        assert!(
            v["latency_us"].get(k).is_some(),
            "latency_us.{k} missing: {}",
            v["latency_us"]
        );
    }
    assert!(v["latency_us"]["ping_idle"].as_f64().unwrap() > 0.0);

    // Nothing of the run is left behind.
    let left = namespaces_left(run.pid);
    assert!(left.is_empty(), "namespaces left: {left:?}");
}

#[test]
fn an_interrupted_run_leaves_nothing_behind() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = generator_skip_reason(None) {
        vfsr_skip::skip(&why);
        return;
    }
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_vfsr"));
    if !exe.with_file_name("vfsrd").exists() {
        vfsr_skip::skip("vfsrd not built next to vfsr");
        return;
    }
    let mut run = Command::new(&exe)
        .args([
            "fwd",
            "bench",
            "--veth",
            "--seconds",
            "30",
            "--routers",
            "vfsr",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = run.id();
    let netns = || namespaces_left(pid).len();
    let vfsrd_running = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
            .any(|e| {
                std::fs::read_to_string(e.path().join("cmdline"))
                    .unwrap_or_default()
                    .contains(&format!("vfsrd-vethbench-rtr-{pid}."))
            })
    };
    // Wait until the router runs, then interrupt.
    let t0 = std::time::Instant::now();
    while !vfsrd_running() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "vfsrd never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(netns(), 3);
    // SAFETY: signals our own child.
    unsafe {
        libc::kill(pid as i32, libc::SIGINT);
    }
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGINT), "{status:?}");
    assert_eq!(netns(), 0, "namespaces left after SIGINT");
    let t0 = std::time::Instant::now();
    while vfsrd_running() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(10),
            "vfsrd outlived the benchmark"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
