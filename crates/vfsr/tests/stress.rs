//! `vfsr stress`: a short run of four cases (malformed frames, an ARP flood, TTL-1 transit
//! and SIGKILL) between network namespaces, checking what does not depend on the machine's
//! speed: vfsrd never crashed, every frame the worker received is in its books, the ICMP
//! errors stayed within the rate limit, and after SIGKILL the next vfsrd took over and left
//! the ports' sysctls, XDP programs and TAPs as they were before any vfsrd.
//!
//! Needs root, network namespaces and the vfsrd binary built next to vfsr
//! (`cargo build -p vfsrd`); skips with a printed reason otherwise.

use std::path::PathBuf;
use std::process::Command;

mod common;
use common::{netns_skip_reason, TempFile};

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
    if let Some(why) = netns_skip_reason(Some(&exe)) {
        println!("skipped: {why}");
        return;
    }
    let json =
        TempFile(std::env::temp_dir().join(format!("vfsr-stress-{}.json", std::process::id())));
    let out = Command::new(&exe)
        .args([
            "stress",
            "--seconds",
            "2",
            "--only",
            "malformed,arp,ttl1,sigkill",
            "--json",
        ])
        .arg(&json.0)
        .output()
        .expect("run vfsr stress");
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    println!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "vfsr stress failed");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&json.0).expect("the JSON report"))
            .expect("JSON");
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
        let c = case(&doc, name);
        assert_eq!(
            c["drops_accounted"], true,
            "{name}: the books do not balance: {}",
            c["details"]["books"]
        );
        assert!(c["details"]["books"]["received"].as_u64().unwrap_or(0) > 0);
    }
    let ttl1 = case(&doc, "ttl1");
    assert!(
        check_ok(ttl1, "ICMP errors rate-limited"),
        "{}",
        ttl1["checks"]
    );
    assert!(check_ok(ttl1, "dropped by name"));
    let malformed = case(&doc, "malformed");
    assert!(
        check_ok(malformed, "none forwarded"),
        "{}",
        malformed["checks"]
    );
    assert!(check_ok(malformed, "all dropped by name"));
    let arp = case(&doc, "arp");
    assert!(check_ok(arp, "neighbor table bounded"));
    let kill = case(&doc, "sigkill");
    assert!(check_ok(kill, "next start"), "{}", kill["checks"]);
    assert!(check_ok(kill, "ports restored"), "{}", kill["checks"]);
    // The run removed its namespaces.
    let left = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let prefix = format!("fb{}-", doc["pid"].as_u64().unwrap_or(0));
    assert!(
        doc["pid"].is_null() || !left.contains(&prefix),
        "namespaces left: {left}"
    );
}
