//! Builds the router's control state from a checked [`Plan`]: one port per interface
//! (pipeline index = position + 1, independent of the kernel's interface index), and every
//! configured route as a route of the RIB (`vfsr_router::Router`), which numbers next hops:
//!
//! - `connected`: each interface's subnets (the router adds them itself);
//! - `table`: a `[table]` file or the synthetic table, its routes spread over its
//!   `via4` / `via6` gateways by their own next-hop value, so a full table exercises several
//!   gateways the way a real one does;
//! - `static`: each `[[route]]`: gateways (an ECMP group when several), an interface alone
//!   (directly connected), or a blackhole. A gateway on no interface's subnet is kept,
//!   unresolved, until one holds it.
//!
//! Which route wins for a prefix given by several sources is the RIB's best path: lowest
//! administrative distance (`[rib] distance`), then metric.

use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;
use std::time::Instant;

use vfsr_fib::nexthop::Forward;
use vfsr_lpm::{LpmUpdate, Prefix};
use vfsr_rib::{IpPrefix, RibRoute, Source};
use vfsr_router::{PortSpec, Router, RouterConfig};
use vfsr_wire::MacAddr;

use crate::config::{Plan, StaticRoute, TableSource, Target};
use crate::control::frames::link_local;
use crate::error::{Error, Result};

/// What was installed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Installed {
    /// IPv4 prefixes in the FIB.
    pub routes4: usize,
    /// IPv6 prefixes in the FIB.
    pub routes6: usize,
    /// Next hops and groups in use.
    pub nexthops: usize,
    /// Routes kept whose gateway no port's subnet holds.
    pub unresolved: usize,
    /// Where the table came from, if any.
    pub table: Option<String>,
    /// Milliseconds spent building the RIB and the FIBs.
    pub build_ms: u128,
}

/// Every port as the router sees it: the configured addresses plus the EUI-64 link-local
/// address when none is configured.
pub fn port_specs(plan: &Plan, macs: &[MacAddr]) -> Vec<PortSpec> {
    plan.interfaces
        .iter()
        .zip(macs)
        .enumerate()
        .map(|(i, (itf, mac))| {
            let mut s = PortSpec::new(i as u32 + 1, *mac)
                .named(&itf.name)
                .mtu(itf.mtu);
            s.addrs4 = itf.addrs4.clone();
            s.addrs6 = itf.addrs6.clone();
            s.neighbors.capacity = itf.neighbors;
            if !s.addrs6.iter().any(|(a, _)| is_link_local(a)) {
                s.addrs6.push((link_local(*mac), 64));
            }
            s
        })
        .collect()
}

fn is_link_local(a: &Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// The router's settings from the plan.
pub fn router_config(plan: &Plan) -> RouterConfig {
    RouterConfig {
        distances: plan.distances,
        max_delay: plan.max_delay,
    }
}

fn port(i: usize) -> u32 {
    i as u32 + 1
}

/// A configured route's prefix.
pub fn static_prefix(r: &StaticRoute) -> IpPrefix {
    match r.prefix {
        (IpAddr::V4(a), l) => IpPrefix::V4(Prefix::new_masked(u32::from(a), l)),
        (IpAddr::V6(a), l) => IpPrefix::V6(Prefix::new_masked(u128::from(a), l)),
    }
}

/// A configured route's RIB routes (source `static`; ports numbered from 1).
pub fn static_routes<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
    router: &Router<E4, E6>,
    r: &StaticRoute,
) -> Vec<RibRoute> {
    let port = |i: usize| i as u32 + 1;
    match &r.target {
        Target::Connected(p) => {
            vec![router.route(Source::Static, Forward::Connected { ifindex: port(*p) })]
        }
        Target::Blackhole => vec![router.route(Source::Static, Forward::Blackhole)],
        Target::Gateways(gws) => gws
            .iter()
            .map(|(addr, p)| {
                router.route(
                    Source::Static,
                    Forward::Gateway {
                        addr: *addr,
                        ifindex: p.map(port),
                    },
                )
            })
            .collect(),
    }
}

/// Builds the router for `plan`, with `macs[i]` the MAC of interface `i`.
pub fn build<E4, E6>(plan: &Plan, macs: &[MacAddr]) -> Result<(Router<E4, E6>, Installed)>
where
    E4: LpmUpdate<u32> + Clone,
    E6: LpmUpdate<u128> + Clone,
    E4::Config: Default,
    E6::Config: Default,
{
    let t0 = Instant::now();
    let mut router: Router<E4, E6> = Router::new(port_specs(plan, macs), router_config(plan))
        .map_err(|e| Error::build("building the router", e))?;
    let mut installed = Installed::default();

    if let Some(t) = &plan.table {
        let (table, source) = match &t.source {
            TableSource::Synthetic(seed) => (
                vfsr_table::synth_table(*seed),
                format!("synthetic full table (seed {seed})"),
            ),
            TableSource::File(f) => {
                let (table, _report) =
                    vfsr_table::read_table_file(Path::new(f), &Default::default())
                        .map_err(|e| Error::build(format!("table.file: {f}"), e))?;
                (table, f.clone())
            }
        };
        let via = |v: &[(IpAddr, usize)]| -> Vec<(IpAddr, u32)> {
            v.iter().map(|(a, p)| (*a, port(*p))).collect()
        };
        router
            .load_table(&table, Source::Table, &via(&t.via4), &via(&t.via6))
            .map_err(|e| Error::build("loading the table", e))?;
        installed.table = Some(source);
    }

    for (i, r) in plan.routes.iter().enumerate() {
        let prefix = static_prefix(r);
        let routes = static_routes(&router, r);
        router
            .announce(prefix, Source::Static, &routes)
            .map_err(|e| Error::build(format!("route[{i}] {prefix}"), e))?;
    }
    router
        .publish()
        .map_err(|e| Error::build("publishing the FIBs", e))?;
    let rib = router.rib();
    installed.routes4 = rib.v4().active_prefixes();
    installed.routes6 = rib.v6().active_prefixes();
    installed.unresolved = rib.v4().unresolved() + rib.v6().unresolved();
    installed.nexthops = rib.nexthops().live();
    installed.build_ms = t0.elapsed().as_millis();
    Ok((router, installed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use vfsr_lpm::poptrie::Poptrie;
    use vfsr_lpm::Lpm;

    type R = Router<Poptrie<u32>, Poptrie<u128>>;

    /// What the published FIB and next hops say for an IPv4 address.
    fn forward(r: &R, a: [u8; 4]) -> Option<Forward> {
        let (f4, _, nh) = r.route_table().readers();
        let i = f4.load().engine.lookup(u32::from_be_bytes(a));
        nh.load().get(i).map(|e| e.forward.clone())
    }

    fn forward_of(r: &R, a: [u8; 4]) -> String {
        match forward(r, a) {
            Some(Forward::Group { members, weights }) => {
                let (_, _, nh) = r.route_table().readers();
                let snap = nh.load();
                let mut m: Vec<String> = members
                    .iter()
                    .map(|i| {
                        snap.get(*i)
                            .map(|e| e.forward.to_string())
                            .unwrap_or_default()
                    })
                    .collect();
                m.sort();
                format!("group {m:?} {weights:?}")
            }
            Some(f) => f.to_string(),
            None => "none".into(),
        }
    }

    #[test]
    fn connected_static_and_ecmp_routes_resolve_to_their_next_hops() {
        let plan = parse(
            r#"
[[interface]]
name = "a"
addresses = ["10.1.0.1/24"]
[[interface]]
name = "b"
addresses = ["10.2.0.1/24", "fd00:2::1/64"]
neighbors = 20000
[[route]]
prefix = "10.9.0.0/16"
via = ["10.2.0.3", "10.2.0.2"]
[[route]]
prefix = "10.8.0.0/16"
via = "10.2.0.2"
[[route]]
prefix = "fd00:9::/32"
via = "fd00:2::2"
[[route]]
prefix = "10.7.0.0/16"
via = "172.16.0.1"
"#,
            None,
        )
        .unwrap();
        let macs = [MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2])];
        let (r, inst) = build::<Poptrie<u32>, Poptrie<u128>>(&plan, &macs).unwrap();
        assert_eq!(
            inst.routes4, 4,
            "two connected, two static; 10.7/16 unresolved"
        );
        assert_eq!(inst.routes6, 2);
        assert_eq!(inst.unresolved, 1);
        assert_eq!(forward_of(&r, [10, 1, 0, 9]), "connected dev 1");
        assert_eq!(forward_of(&r, [10, 2, 0, 9]), "connected dev 2");
        assert_eq!(
            forward_of(&r, [10, 9, 1, 1]),
            r#"group ["via 10.2.0.2 dev 2", "via 10.2.0.3 dev 2"] [1, 1]"#
        );
        assert_eq!(forward_of(&r, [10, 8, 1, 1]), "via 10.2.0.2 dev 2");
        assert_eq!(forward_of(&r, [10, 7, 1, 1]), "none");
        assert_eq!(forward_of(&r, [192, 0, 2, 1]), "none");
        let specs = port_specs(&plan, &macs);
        assert!(specs[0].addrs6.iter().any(|(a, _)| is_link_local(a)));
        assert_eq!(specs[1].name, "b");
        assert_eq!(specs[0].neighbors.capacity, vfsr_neigh::DEFAULT_CAPACITY);
        assert_eq!(specs[1].neighbors.capacity, 20000);
    }

    #[test]
    fn a_table_and_an_interface_route_each_reach_their_own_next_hop() {
        // The table's gateways and the interface-only route used to share one numbering;
        // through the RIB each route names its next hop.
        let plan = parse(
            r#"
[[interface]]
name = "a"
addresses = ["10.1.0.1/24"]
[[interface]]
name = "b"
addresses = ["10.2.0.1/24"]
[table]
synthetic = true
via4 = ["10.2.0.2", "10.2.0.3"]
[[route]]
prefix = "198.18.0.0/15"
interface = "a"
[[route]]
prefix = "198.20.0.0/16"
blackhole = true
"#,
            None,
        )
        .unwrap();
        let macs = [MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2])];
        let (r, inst) = build::<Poptrie<u32>, Poptrie<u128>>(&plan, &macs).unwrap();
        assert!(inst.routes4 > 500_000, "{inst:?}");
        assert_eq!(inst.routes6, 0);
        assert_eq!(forward_of(&r, [198, 18, 7, 7]), "connected dev 1");
        assert_eq!(forward_of(&r, [198, 20, 7, 7]), "blackhole");
        // Every table route goes to one of its two gateways on port 2.
        let fib = r.rib().fib_routes_v4();
        let (_, _, nh) = r.route_table().readers();
        let snap = nh.load();
        let mut seen = std::collections::BTreeSet::new();
        for route in fib.iter().step_by(1009) {
            let f = snap.get(route.nexthop).unwrap().forward.to_string();
            seen.insert(f);
        }
        let want: std::collections::BTreeSet<String> = [
            "via 10.2.0.2 dev 2",
            "via 10.2.0.3 dev 2",
            "connected dev 1",
            "connected dev 2",
            "blackhole",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert!(seen.is_subset(&want), "{seen:?}");
        assert!(seen.contains("via 10.2.0.2 dev 2") && seen.contains("via 10.2.0.3 dev 2"));
    }

    #[test]
    fn a_static_route_beats_the_table_and_distances_can_say_otherwise() {
        // A prefix of the synthetic table, also given as a static route.
        let table = vfsr_table::synth_table(0);
        let p = table.v4[table.v4.len() / 2].prefix;
        let of = |r: &R| {
            let i = r.rib().fib_value(&p);
            r.rib()
                .nexthop_snapshot()
                .get(i)
                .map(|e| e.forward.to_string())
        };
        let text = |extra: &str| {
            format!(
                r#"
[[interface]]
name = "b"
addresses = ["10.2.0.1/24"]
[table]
synthetic = true
via4 = ["10.2.0.2"]
[[route]]
prefix = "{p}"
via = "10.2.0.9"
{extra}
"#
            )
        };
        let macs = [MacAddr([2, 0, 0, 0, 0, 2])];
        let plan = parse(&text(""), None).unwrap();
        let (r, _) = build::<Poptrie<u32>, Poptrie<u128>>(&plan, &macs).unwrap();
        assert_eq!(r.rib().routes(&p).len(), 2);
        assert_eq!(of(&r).as_deref(), Some("via 10.2.0.9 dev 1"));
        let plan = parse(&text("[rib]\ndistance = { static = 200 }"), None).unwrap();
        let (r, _) = build::<Poptrie<u32>, Poptrie<u128>>(&plan, &macs).unwrap();
        assert_eq!(of(&r).as_deref(), Some("via 10.2.0.2 dev 1"));
        // The table's distance applies to the whole load too.
        let plan = parse(&text("[rib]\ndistance = { table = 0 }"), None).unwrap();
        let (r, _) = build::<Poptrie<u32>, Poptrie<u128>>(&plan, &macs).unwrap();
        assert_eq!(of(&r).as_deref(), Some("via 10.2.0.2 dev 1"));
        assert!(r
            .rib()
            .routes(&p)
            .iter()
            .any(|x| x.source == Source::Table && x.distance == 0));
    }
}
