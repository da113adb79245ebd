//! `vfsr stress`: a short run of four cases (malformed frames, an ARP flood, TTL-1 transit and
//! SIGKILL) between network namespaces, checking what does not depend on the machine's speed: vfsrd
//! never crashed, every frame the worker received is in its books, the ICMP errors stayed within
//! the rate limit, the ARP flood was policed in the XDP program and the control plane took no more
//! than its limit, and after SIGKILL the next vfsrd took over and left the ports' sysctls, XDP
//! programs and TAPs as they were before any vfsrd.
//!
//! Needs root, network namespaces and the vfsrd binary built next to vfsr
//! (`cargo build -p vfsrd`); skips with a printed reason otherwise.

use std::path::PathBuf;

mod common;
use common::{generator_skip_reason, namespaces_left, run_with_report};

use serde_json::Value;

fn case<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["cases"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["case"] == name))
        .unwrap_or_else(|| panic!("no case {name} in the report"))
}

fn check_ok(c: &Value, name: &str) -> bool {
    c["checks"]
        .as_array()
        .and_then(|a| a.iter().find(|k| k["check"] == name))
        .unwrap_or_else(|| panic!("case {} has no check {name:?}: {}", c["case"], c["checks"]))
        ["ok"]
        == true
}

#[test]
fn short_stress_run_keeps_the_books_and_restores_the_ports() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_vfsr"));
    if let Some(why) = generator_skip_reason(Some(&exe)) {
        vfsr_skip::skip(&why);
        return;
    }
    let run = run_with_report(
        &exe,
        "stress",
        &[
            "stress",
            "--seconds",
            "2",
            "--only",
            "malformed,arp,ttl1,sigkill",
        ],
    );
    assert!(run.ok, "vfsr stress failed");
    let doc = &run.doc;
    // The readable output names every case it ran.
    for name in ["idle", "arp", "ttl1", "malformed", "sigkill"] {
        assert!(
            run.stdout.contains(&format!("== {name}")),
            "{name} not in the output"
        );
    }
    assert!(doc["cpu"].as_str().is_some_and(|c| !c.is_empty()));
    let names: Vec<&str> = doc["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .filter_map(|c| c["case"].as_str())
        .collect();
    assert_eq!(names, ["idle", "arp", "ttl1", "malformed", "sigkill"]);
    for c in doc["cases"].as_array().expect("cases") {
        assert_eq!(c["crashed"], false, "vfsrd crashed in {}", c["case"]);
        assert!(
            c["error"].is_null(),
            "case {} failed to run: {}",
            c["case"],
            c["error"]
        );
    }
    for name in ["idle", "arp", "ttl1", "malformed"] {
        let c = case(doc, name);
        assert_eq!(
            c["drops_accounted"], true,
            "{name}: the books do not balance: {}",
            c["details"]["books"]
        );
        assert!(c["details"]["books"]["received"].as_u64().unwrap_or(0) > 0);
    }
    let ttl1 = case(doc, "ttl1");
    assert!(
        check_ok(ttl1, "ICMP errors rate-limited"),
        "{}",
        ttl1["checks"]
    );
    assert!(check_ok(ttl1, "dropped by name"));
    let malformed = case(doc, "malformed");
    assert!(
        check_ok(malformed, "none forwarded"),
        "{}",
        malformed["checks"]
    );
    assert!(check_ok(malformed, "all dropped by name"));
    let arp = case(doc, "arp");
    assert!(check_ok(arp, "neighbor table bounded"));
    // The XDP program dropped most of the flood by its arp_nd bucket, and what reached the
    // control plane stayed within the class's limit.
    assert!(
        check_ok(arp, "policed before the kernel"),
        "{}",
        arp["checks"]
    );
    assert!(check_ok(arp, "punt limit held"), "{}", arp["checks"]);
    let kill = case(doc, "sigkill");
    assert!(check_ok(kill, "next start"), "{}", kill["checks"]);
    assert!(check_ok(kill, "ports restored"), "{}", kill["checks"]);
    // The run removed its namespaces.
    let left = namespaces_left(run.pid);
    assert!(left.is_empty(), "namespaces left: {left:?}");
}
