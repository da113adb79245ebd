//! The command line as a user runs it: `vfsr lookup`, `vfsr table gen`, bad arguments.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn vfsr() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vfsr"))
}

fn temp_file(name: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vfsr-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

const TABLE: &str = "# a small table\n\
                     10.0.0.0/8 192.0.2.1\n\
                     10.1.0.0/16\n\
                     0.0.0.0/0 192.0.2.254\n\
                     2001:db8::/32 2001:db8::1\n\
                     \n";

#[test]
fn lookup_prints_address_prefix_and_next_hop_for_every_backend() {
    let t = temp_file("t.txt", TABLE);
    for backend in ["poptrie", "poptrie16", "lctrie", "radix", "dir24"] {
        let out = vfsr()
            .args(["lookup", "--table"])
            .arg(&t)
            .args([
                "--backend",
                backend,
                "10.2.3.4",
                "8.8.8.8",
                "2001:db8::5",
                "2001:db9::1",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{backend}: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "10.2.3.4 10.0.0.0/8 via 192.0.2.1",
                "8.8.8.8 0.0.0.0/0 via 192.0.2.254",
                "2001:db8::5 2001:db8::/32 via 2001:db8::1",
                "2001:db9::1 - unreachable",
            ],
            "{backend}"
        );
    }
}

#[test]
fn lookup_reads_addresses_from_stdin_and_names_nh64_next_hops() {
    let t = temp_file("s.txt", TABLE);
    let mut child = vfsr()
        .args(["lookup", "--table"])
        .arg(&t)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"10.1.2.3\n\n# comment\n10.200.0.1\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(
        lines[0].starts_with("10.1.2.3 10.1.0.0/16 nh64 #"),
        "{}",
        lines[0]
    );
    assert_eq!(lines[1], "10.200.0.1 10.0.0.0/8 via 192.0.2.1");
}

#[test]
fn a_bad_table_line_is_an_error_naming_file_and_line_unless_skipped() {
    let t = temp_file("bad.txt", "10.0.0.0/8 192.0.2.1\n10.0.0.1/8\n");
    let out = vfsr()
        .args(["lookup", "--table"])
        .arg(&t)
        .arg("10.0.0.1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("bad.txt:2"), "{err}");
    assert!(err.contains("host bits"), "{err}");

    let out = vfsr()
        .args(["lookup", "--skip-bad", "--table"])
        .arg(&t)
        .arg("10.0.0.1")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        "10.0.0.1 10.0.0.0/8 via 192.0.2.1"
    );
}

#[test]
fn wrong_arguments_are_clear_errors() {
    let t = temp_file("w.txt", TABLE);
    let out = vfsr()
        .args(["lookup", "--backend", "bogus", "--table"])
        .arg(&t)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr).unwrap().contains("bogus"));

    let out = vfsr()
        .args(["lookup", "--table"])
        .arg(&t)
        .arg("not-an-address")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("not-an-address"));

    let out = vfsr()
        .args(["lookup", "--table", "/nonexistent/table.txt", "1.1.1.1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("/nonexistent/table.txt"));
}

#[test]
fn generated_table_reads_back_with_the_requested_sizes() {
    let dir = std::env::temp_dir().join(format!("vfsr-gen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("gen.txt");
    let out = vfsr()
        .args([
            "table", "gen", "--seed", "7", "--v4", "5000", "--v6", "800", "-o",
        ])
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (t, _) = vfsr_table::read_table_file(&f, &Default::default()).unwrap();
    assert_eq!(t.v4.len(), 5000);
    assert_eq!(t.v6.len(), 800);
    // The same seed gives the same file.
    let again = vfsr()
        .args(["table", "gen", "--seed", "7", "--v4", "5000", "--v6", "800"])
        .output()
        .unwrap();
    assert_eq!(again.stdout, std::fs::read(&f).unwrap());
}

/// Runs `vfsr lookup` on TABLE after `updates`, returning (success, stdout, stderr).
fn lookup_after(updates: &str, extra: &[&str], addrs: &[&str]) -> (bool, String, String) {
    // Tests run in parallel: every call writes files of its own.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = temp_file(&format!("t-upd-{n}.txt"), TABLE);
    let u = temp_file(&format!("u-{n}.txt"), updates);
    let out = vfsr()
        .args(["lookup", "--table"])
        .arg(&t)
        .arg("--updates")
        .arg(&u)
        .args(extra)
        .args(addrs)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn lookup_applies_an_update_stream_for_every_backend() {
    let updates = "# move 10/8, add a /24 and a blackhole, drop the default\n\
                   a 10.0.0.0/8 192.0.2.7\n\
                   a 10.9.9.0/24 192.0.2.1\r\n\
                   a 172.16.0.0/12\tblackhole\n\
                   w 0.0.0.0/0\n\
                   w 2001:db8::/32\n\
                   a 2001:db8:1::/48 2001:db8::9\n\
                   w 192.168.0.0/16\n";
    for backend in ["poptrie", "poptrie16", "lctrie", "radix", "dir24"] {
        let (ok, text, err) = lookup_after(
            updates,
            &["--backend", backend],
            &[
                "10.2.3.4",
                "10.9.9.9",
                "10.1.2.3",
                "172.20.0.1",
                "8.8.8.8",
                "2001:db8::5",
                "2001:db8:1::5",
            ],
        );
        assert!(ok, "{backend}: {err}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "10.2.3.4 10.0.0.0/8 via 192.0.2.7",
                "10.9.9.9 10.9.9.0/24 via 192.0.2.1",
                "10.1.2.3 10.1.0.0/16 nh64 #45",
                "172.20.0.1 172.16.0.0/12 blackhole",
                "8.8.8.8 - unreachable",
                "2001:db8::5 - unreachable",
                "2001:db8:1::5 2001:db8:1::/48 via 2001:db8::9",
            ],
            "{backend}"
        );
        assert!(err.contains("7 updates"), "{err}");
    }
}

#[test]
fn bad_update_lines_and_unknown_next_hops_are_errors_or_counted() {
    let cases = [
        ("a 10.0.0.1/8 192.0.2.1\n", "1:"),
        ("w 10.0.0.0/8\nx 10.0.0.0/8\n", "2:"),
        ("a 10.0.0.0/8 2001:db8::1\n", "1:"),
        ("a 10.0.0.0/8\n", "1:"),
        ("a 10.0.0.0/8 #60000\n", "no next hop with index 60000"),
    ];
    for (updates, want) in cases {
        let (ok, _, err) = lookup_after(updates, &[], &["10.1.1.1"]);
        assert!(!ok, "{updates:?} was accepted");
        assert!(err.contains(want), "{updates:?}: {err}");
    }
    // With --skip-bad the good lines apply and the rest is counted.
    let (ok, text, err) = lookup_after(
        "a 10.0.0.1/8 192.0.2.1\nbogus\na 10.0.0.0/8 #60000\na 10.0.0.0/8 192.0.2.3\n",
        &["--skip-bad"],
        &["10.2.2.2"],
    );
    assert!(ok, "{err}");
    assert_eq!(text.trim(), "10.2.2.2 10.0.0.0/8 via 192.0.2.3");
    assert!(
        err.contains("skipped 2 bad lines") && err.contains("1 refused"),
        "{err}"
    );
}

#[test]
fn a_next_hop_index_names_an_existing_next_hop() {
    // The table interns its next hops in order: 192.0.2.1 is index 1, the /16's nh64 #45
    // index 2, the default's 192.0.2.254 index 3.
    let (ok, text, err) = lookup_after("a 10.0.0.0/8 #3\n", &[], &["10.2.2.2"]);
    assert!(ok, "{err}");
    assert_eq!(text.trim(), "10.2.2.2 10.0.0.0/8 via 192.0.2.254");
}

/// A generated table of 20,000 IPv4 and 4,000 IPv6 routes in the test's directory, and the
/// path for a benchmark's JSON beside it.
fn small_table(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("vfsr-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let table = dir.join(format!("{name}-small.txt"));
    let gen = vfsr()
        .args(["table", "gen", "--v4", "20000", "--v6", "4000", "-o"])
        .arg(&table)
        .output()
        .unwrap();
    assert!(gen.status.success(), "{gen:?}");
    (table, dir.join(format!("{name}.json")))
}

/// Runs a benchmark command with `args` on a small generated table, checks that it succeeds,
/// and returns the JSON it wrote.
fn bench_json(name: &str, args: &[&str]) -> serde_json::Value {
    let (table, json) = small_table(name);
    let out = vfsr()
        .args(args)
        .arg("--table")
        .arg(&table)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

/// `vfsr fib bench` on a small generated table: it runs, checks itself against fresh builds,
/// and writes the JSON shape tools read.
#[test]
fn fib_bench_runs_and_writes_its_json_shape() {
    let doc = bench_json(
        "fib",
        &[
            "fib",
            "bench",
            "--updates",
            "2000",
            "--phase-s",
            "0.05",
            "--trace-passes",
            "3",
        ],
    );
    let load = doc["load"].as_array().unwrap();
    assert!(load
        .iter()
        .any(|l| l["family"] == "v4" && l["seconds"].as_f64().unwrap() > 0.0));
    assert!(load
        .iter()
        .all(|l| l["routes_per_s"].as_f64().unwrap() > 0.0));
    let updates = doc["updates"].as_array().unwrap();
    for kind in ["change", "withdraw", "announce"] {
        for publish in ["batched", "each"] {
            assert!(
                updates.iter().any(|u| u["kind"] == kind
                    && u["publish"] == publish
                    && u["per_s"].as_f64().unwrap() > 0.0),
                "{kind} {publish}"
            );
        }
    }
    let reader = doc["reader"].as_array().unwrap();
    assert!(reader.iter().any(|r| r["updates_per_s"] == 100000));
    assert!(reader
        .iter()
        .all(|r| r["updates_per_s"].is_number() && r["ratio_to_idle"].as_f64().unwrap() > 0.0));
    // Every trace phase of both families, three passes each, the median between the ends.
    let trace = doc["trace"].as_array().unwrap();
    for fam in ["v4", "v6"] {
        for phase in [
            "withdraw",
            "announce",
            "change",
            "reset-withdraw",
            "reset-announce",
        ] {
            let t = trace
                .iter()
                .find(|t| t["family"] == fam && t["phase"] == phase)
                .unwrap_or_else(|| panic!("{fam} {phase}"));
            let f = |k: &str| t[k].as_f64().unwrap();
            assert_eq!(t["passes"].as_array().unwrap().len(), 3, "{fam} {phase}");
            assert!(
                0.0 < f("per_s_min")
                    && f("per_s_min") <= f("per_s")
                    && f("per_s") <= f("per_s_max"),
                "{fam} {phase}: {t}"
            );
        }
    }
}

/// `vfsr fwd bench` on a small generated table: every design forwards every packet (the
/// command fails otherwise) and the JSON has the documented shape.
#[test]
fn fwd_bench_runs_and_writes_its_json_shape() {
    let doc = bench_json(
        "fwd",
        &[
            "fwd",
            "bench",
            "--flows",
            "1,1000",
            "--workers",
            "1",
            "--seconds",
            "0.05",
            "--passes",
            "3",
            "--lookup",
            "portable",
        ],
    );
    assert_eq!(doc["params"]["passes"], 3);
    assert_eq!(doc["params"]["lookup"], "portable");
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 3 * 2 * 2);
    for design in ["legacy", "split", "split+flow"] {
        for family in ["v4", "v6"] {
            for flows in [1u64, 1000] {
                let r = results
                    .iter()
                    .find(|r| r["design"] == design && r["family"] == family && r["flows"] == flows)
                    .unwrap_or_else(|| panic!("{design} {family} {flows}"));
                assert_eq!(r["workers"], 1);
                let mpps = r["mpps_per_worker"].as_f64().unwrap();
                let ns = r["ns_per_packet"].as_f64().unwrap();
                assert!(mpps > 0.0 && ns > 0.0);
                assert!(
                    (mpps * ns - 1e3).abs() < 1.0,
                    "ns per packet is 1000 / Mpps"
                );
                assert_eq!(r["packets"], r["forwarded"]);
                // The median of three interleaved passes, between their minimum and maximum.
                let passes: Vec<f64> = r["mpps_per_worker_passes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p.as_f64().unwrap())
                    .collect();
                assert_eq!(passes.len(), 3);
                let (lo, hi) = (
                    r["mpps_per_worker_min"].as_f64().unwrap(),
                    r["mpps_per_worker_max"].as_f64().unwrap(),
                );
                assert!(lo <= mpps && mpps <= hi, "{lo} {mpps} {hi}");
                assert!(passes.contains(&mpps), "the median is one of the passes");
                assert_eq!(passes.iter().cloned().fold(f64::INFINITY, f64::min), lo);
            }
        }
    }
    assert!(!doc["targets"].as_array().unwrap().is_empty());
}

/// With a cache neighbor on the core the worker leaves free, both benchmarks run and name it
/// in their JSON, with the rate it read at.
#[test]
fn benches_run_beside_a_cache_neighbor() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        vfsr_skip::skip(
            "a cache neighbor needs a core besides the benchmark's; this machine has one",
        );
        return;
    }
    let lpm: &[&str] = &[
        "lpm",
        "bench",
        "--no-peers",
        "--no-sweep",
        "--runs",
        "1",
        "--only",
        "poptrie",
    ];
    let fwd: &[&str] = &[
        "fwd",
        "bench",
        "--workers",
        "1",
        "--flows",
        "1",
        "--seconds",
        "0.05",
    ];
    for (name, base) in [("lpm", lpm), ("fwd", fwd)] {
        let alone = bench_json(&format!("{name}-alone"), base);
        assert!(
            alone["params"]["neighbor"].is_null(),
            "{name}: a neighbor unasked for"
        );
        let beside = ["--neighbor-core", "0", "--neighbor-mib", "64"];
        let args: Vec<&str> = base.iter().chain(beside.iter()).copied().collect();
        let doc = bench_json(&format!("{name}-beside"), &args);
        let n = &doc["params"]["neighbor"];
        assert_eq!(n["core"], 0, "{name}: {n}");
        assert_eq!(n["mib"], 64, "{name}: {n}");
        assert!(n["reads_per_s"].as_f64().unwrap() > 0.0, "{name}: {n}");
    }
}

#[test]
fn fwd_bench_refuses_bad_arguments() {
    for args in [
        &["--designs", "fastest"][..],
        &["--families", "v5"],
        &["--workers", "0"],
        &["--flows", "0"],
        &["--batch", "0"],
        &["--seconds", "-1"],
        &["--passes", "0"],
        &["--lookup", "sse"],
        &["--veth", "--neighbor-core", "0"],
        &["--workers", "1,2", "--neighbor-core", "0"],
        &[
            "--workers",
            "1",
            "--neighbor-core",
            "0",
            "--neighbor-mib",
            "8",
        ],
    ] {
        let out = vfsr().args(["fwd", "bench"]).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--") || err.contains("error"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_report_piped_into_a_reader_that_stops_ends_quietly() {
    // The neigh bench prints its machine line at once, then a line per measure once the
    // measure is taken (milliseconds later); the pipe is closed after the first line.
    let mut child = vfsr()
        .args(["neigh", "bench", "--capacities", "4096"])
        .args(["--measures", "churn", "--runs", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(141), "{:?} {err}", out.status);
}
