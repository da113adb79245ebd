//! The FIB as text, written on request (`vfsrd --fib-dump FILE`, then `SIGUSR1`): one line
//! per prefix the workers forward by, with the next hop as the published next-hop table
//! says and the port by name. For operators and tests that compare vfsr's FIB with a
//! routing daemon's RIB.
//!
//! ```text
//! # vfsrd FIB: 3 IPv4, 1 IPv6 prefixes; 1 unresolved route
//! 10.1.0.0/24 connected dev r1
//! 203.0.113.0/24 via 10.9.0.2 dev r2
//! 198.51.100.0/24 group via 10.9.0.2 dev r2 weight 1, via 10.8.0.2 dev r3 weight 1
//! 2001:db8::/32 blackhole
//! ```

use std::fmt::Write as _;

use vfsr_fib::nexthop::{Forward, NhSnapshot};
use vfsr_lpm::LpmUpdate;
use vfsr_router::Router;

fn port_name(names: &[String], ifindex: u32) -> String {
    ifindex
        .checked_sub(1)
        .and_then(|i| names.get(i as usize))
        .cloned()
        .unwrap_or_else(|| format!("port{ifindex}"))
}

fn single(f: &Forward, names: &[String]) -> String {
    match f {
        Forward::Gateway {
            addr,
            ifindex: Some(i),
        } => format!("via {addr} dev {}", port_name(names, *i)),
        Forward::Connected { ifindex } => format!("connected dev {}", port_name(names, *ifindex)),
        other => other.to_string(),
    }
}

/// How a FIB value forwards, in words.
pub fn describe(snap: &NhSnapshot, index: u32, names: &[String]) -> String {
    match snap.get(index).map(|e| &e.forward) {
        None => "none".into(),
        Some(Forward::Group { members, weights }) => {
            let mut s = String::from("group ");
            for (k, (m, w)) in members.iter().zip(weights.iter()).enumerate() {
                let f = snap
                    .get(*m)
                    .map(|e| single(&e.forward, names))
                    .unwrap_or_else(|| format!("#{m}"));
                let _ = write!(s, "{}{f} weight {w}", if k == 0 { "" } else { ", " });
            }
            s
        }
        Some(f) => single(f, names),
    }
}

/// The router's FIB as text (see the module doc). Publishes pending changes first, so the
/// text is what the workers use.
pub fn fib_text<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    router: &mut Router<E4, E6>,
) -> String {
    let _ = router.publish();
    let names: Vec<String> = router.specs().iter().map(|s| s.name.clone()).collect();
    let rib = router.rib();
    let snap = rib.nexthop_snapshot();
    let v4 = rib.fib_routes_v4();
    let v6 = rib.fib_routes_v6();
    let unresolved = rib.v4().unresolved() + rib.v6().unresolved();
    let mut out = String::with_capacity((v4.len() + v6.len()) * 48 + 64);
    let _ = writeln!(
        out,
        "# vfsrd FIB: {} IPv4, {} IPv6 prefixes; {unresolved} unresolved route(s)",
        v4.len(),
        v6.len()
    );
    for r in &v4 {
        let _ = writeln!(out, "{} {}", r.prefix, describe(&snap, r.nexthop, &names));
    }
    for r in &v6 {
        let _ = writeln!(out, "{} {}", r.prefix, describe(&snap, r.nexthop, &names));
    }
    out
}
