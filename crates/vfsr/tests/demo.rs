//! `vfsr demo`, the README's main command, as a user runs it: the live router learns its
//! table over BGP (gobgpd → FRR's bgpd → zebra → FPM → vfsrd) and forwards ping, traceroute
//! and iperf3; a smaller table (`--prefixes`) keeps the test short. Needs root, network
//! namespaces, FRR and gobgpd; skips with a printed reason otherwise.

use std::process::Command;

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    for p in [
        "/usr/lib/frr/zebra",
        "/usr/lib/frr/bgpd",
        "/usr/bin/gobgpd",
        "/usr/bin/gobgp",
        "/usr/bin/iperf3",
        "/usr/bin/traceroute",
    ] {
        if !std::path::Path::new(p).exists() {
            return Some(format!("{p} is not installed"));
        }
    }
    None
}

#[test]
fn the_demo_learns_its_table_over_bgp_and_forwards() {
    if let Some(why) = skip_reason() {
        vfsr_skip::skip(&why);
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_vfsr"))
        .args(["demo", "--prefixes", "20000"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    println!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the demo failed");
    assert!(
        text.contains("gobgpd holds 20000 IPv4 and 2500 IPv6 routes"),
        "{text}"
    );
    assert!(
        text.contains("converged: every route in vfsr's FIB"),
        "{text}"
    );
    assert!(
        text.contains("vfsr holds 20000 of the 20000 IPv4 and 2500 of the 2500 IPv6 prefixes"),
        "{text}"
    );
    // Every ping got its answers: the router's own address and each address through it.
    let sent = text.matches("3 packets transmitted").count();
    let answered = text.matches("3 packets transmitted, 3 received").count();
    assert!(sent >= 2, "{text}");
    assert_eq!(answered, sent, "{text}");
    assert!(text.contains("receiver"), "iperf3 ran: {text}");
    // Nothing is left behind.
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let left = String::from_utf8_lossy(&ns.stdout);
    assert!(
        !left
            .lines()
            .any(|l| l.starts_with("vd") && l.contains("-rt")),
        "namespaces left: {left}"
    );
}
