//! Builds the router's control state from a checked [`Plan`]: one pipeline port per
//! interface (index = position + 1, independent of the kernel's interface index), the next
//! hops, and the FIBs filled with the connected subnets, the static routes and the table.
//!
//! Next hops are numbered in this order: one `Connected` per interface, then each distinct
//! gateway (with the interface it is reached by), then each ECMP group, then a blackhole.
//! A table's routes are spread over its `via4`/`via6` gateways by their own next-hop number,
//! so a full table exercises several gateways the way a real one does.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;
use std::time::Instant;

use vfsr_fib::nexthop::Forward;
use vfsr_fwd::lab::{Lab, PortSpec};
use vfsr_lpm::{LpmUpdate, Prefix, Route};
use vfsr_wire::MacAddr;

use crate::config::{Plan, TableSource, Target};
use crate::control::frames::link_local;

/// What was installed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Installed {
    /// IPv4 routes in the FIB.
    pub routes4: usize,
    /// IPv6 routes.
    pub routes6: usize,
    /// Next hops (gateways, connected, groups).
    pub nexthops: usize,
    /// Where the table came from, if any.
    pub table: Option<String>,
    /// Milliseconds spent building the FIBs.
    pub build_ms: u128,
}

/// Every port's addresses as the pipeline sees them: the configured ones plus the EUI-64
/// link-local address when none is configured.
pub fn port_specs(plan: &Plan, macs: &[MacAddr]) -> Vec<PortSpec> {
    plan.interfaces
        .iter()
        .zip(macs)
        .enumerate()
        .map(|(i, (itf, mac))| {
            let mut s = PortSpec::new(i as u32 + 1, *mac).mtu(itf.mtu);
            s.addrs4 = itf.addrs4.clone();
            s.addrs6 = itf.addrs6.clone();
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

struct Numbering {
    next: u32,
    gateways: HashMap<(IpAddr, usize), u32>,
    entries: Vec<(u32, Forward)>,
}

impl Numbering {
    fn add(&mut self, f: Forward) -> u32 {
        let id = self.next;
        self.next += 1;
        self.entries.push((id, f));
        id
    }

    fn gateway(&mut self, addr: IpAddr, port: usize) -> u32 {
        if let Some(id) = self.gateways.get(&(addr, port)) {
            return *id;
        }
        let id = self.add(Forward::Gateway {
            addr,
            ifindex: Some(port as u32 + 1),
        });
        self.gateways.insert((addr, port), id);
        id
    }
}

/// Builds the router for `plan`, with `macs[i]` the MAC of interface `i`.
pub fn build<E4, E6>(plan: &Plan, macs: &[MacAddr]) -> Result<(Lab<E4, E6>, Installed), String>
where
    E4: LpmUpdate<u32> + Clone,
    E6: LpmUpdate<u128> + Clone,
    E4::Config: Default,
    E6::Config: Default,
{
    let t0 = Instant::now();
    let mut n = Numbering {
        next: 1,
        gateways: HashMap::new(),
        entries: Vec::new(),
    };
    let mut r4: Vec<Route<u32>> = Vec::new();
    let mut r6: Vec<Route<u128>> = Vec::new();
    let mut installed = Installed::default();

    // The table first: static and connected routes override it below.
    if let Some(t) = &plan.table {
        let (table, source) = match &t.source {
            TableSource::Synthetic(seed) => (
                vfsr_table::synth_table(*seed),
                format!("synthetic full table (seed {seed})"),
            ),
            TableSource::File(f) => {
                let (table, _report) =
                    vfsr_table::read_table_file(Path::new(f), &Default::default())
                        .map_err(|e| format!("table.file: {f}: {e}"))?;
                (table, f.clone())
            }
        };
        let g4: Vec<u32> = t.via4.iter().map(|(a, p)| n.gateway(*a, *p)).collect();
        let g6: Vec<u32> = t.via6.iter().map(|(a, p)| n.gateway(*a, *p)).collect();
        if !g4.is_empty() {
            r4 = table
                .v4
                .iter()
                .map(|r| Route::new(r.prefix, spread(&g4, r.nexthop)))
                .collect();
        }
        if !g6.is_empty() {
            r6 = table
                .v6
                .iter()
                .map(|r| Route::new(r.prefix, spread(&g6, r.nexthop)))
                .collect();
        }
        installed.table = Some(source);
    }

    let mut lab: Lab<E4, E6> = Lab::with_routes(port_specs(plan, macs), &r4, &r6)
        .map_err(|e| format!("building the FIBs: {e}"))?;

    let mut extra4: Vec<(Prefix<u32>, u32)> = Vec::new();
    let mut extra6: Vec<(Prefix<u128>, u32)> = Vec::new();
    for (i, itf) in plan.interfaces.iter().enumerate() {
        let id = n.add(Forward::Connected {
            ifindex: i as u32 + 1,
        });
        for (a, l) in &itf.addrs4 {
            extra4.push((Prefix::new_masked(u32::from(*a), *l), id));
        }
        for (a, l) in &itf.addrs6 {
            extra6.push((Prefix::new_masked(u128::from(*a), *l), id));
        }
    }
    let mut groups: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut blackhole = None;
    for r in &plan.routes {
        let id = match &r.target {
            Target::Connected(p) => *p as u32 + 1,
            Target::Blackhole => *blackhole.get_or_insert_with(|| n.add(Forward::Blackhole)),
            Target::Gateways(gws) => {
                let mut members: Vec<u32> = gws.iter().map(|(a, p)| n.gateway(*a, *p)).collect();
                members.sort_unstable();
                members.dedup();
                match members.as_slice() {
                    [one] => *one,
                    _ => match groups.get(&members) {
                        Some(g) => *g,
                        None => {
                            let g = n.add(Forward::group(members.clone()));
                            groups.insert(members, g);
                            g
                        }
                    },
                }
            }
        };
        match r.prefix {
            (IpAddr::V4(a), l) => extra4.push((Prefix::new_masked(u32::from(a), l), id)),
            (IpAddr::V6(a), l) => extra6.push((Prefix::new_masked(u128::from(a), l), id)),
        }
    }
    for (id, f) in &n.entries {
        lab.nexthop(*id, f.clone());
    }
    for (p, id) in extra4 {
        lab.fib4
            .set(p, id)
            .map_err(|e| format!("installing a route: {e:?}"))?;
    }
    for (p, id) in extra6 {
        lab.fib6
            .set(p, id)
            .map_err(|e| format!("installing a route: {e:?}"))?;
    }
    lab.publish().map_err(|e| format!("publishing: {e}"))?;
    installed.routes4 = lab.fib4.table().len();
    installed.routes6 = lab.fib6.table().len();
    installed.nexthops = n.entries.len();
    installed.build_ms = t0.elapsed().as_millis();
    Ok((lab, installed))
}

fn spread(gateways: &[u32], nexthop: u32) -> u32 {
    let i = (nexthop.max(1) - 1) as usize % gateways.len().max(1);
    gateways.get(i).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use vfsr_lpm::poptrie::Poptrie;
    use vfsr_lpm::Lpm;

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
[[route]]
prefix = "10.9.0.0/16"
via = ["10.2.0.3", "10.2.0.2"]
[[route]]
prefix = "10.8.0.0/16"
via = "10.2.0.2"
[[route]]
prefix = "fd00:9::/32"
via = "fd00:2::2"
"#,
            None,
        )
        .unwrap();
        let macs = [MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2])];
        let (lab, inst) = build::<Poptrie<u32>, Poptrie<u128>>(&plan, &macs).unwrap();
        assert_eq!(inst.routes4, 4);
        assert_eq!(inst.routes6, 2);
        let f = lab.fib4.reader();
        let g = f.load();
        let nh = |a: [u8; 4]| g.engine.lookup(u32::from_be_bytes(a));
        // Connected subnets: next hops 1 and 2 (the interfaces).
        assert_eq!(nh([10, 1, 0, 9]), 1);
        assert_eq!(nh([10, 2, 0, 9]), 2);
        // Gateways 10.2.0.3 (3) and 10.2.0.2 (4), the group (5), the single route (4).
        assert_eq!(nh([10, 9, 1, 1]), 5);
        assert_eq!(nh([10, 8, 1, 1]), 4);
        assert_eq!(nh([192, 0, 2, 1]), 0);
        // Every port has a link-local address.
        let specs = port_specs(&plan, &macs);
        assert!(specs[0].addrs6.iter().any(|(a, _)| is_link_local(a)));
    }

    #[test]
    fn a_table_is_spread_over_its_gateways() {
        let plan = parse(
            r#"
[[interface]]
name = "b"
addresses = ["10.2.0.1/24"]
[table]
synthetic = true
via4 = ["10.2.0.2", "10.2.0.3"]
"#,
            None,
        )
        .unwrap();
        let macs = [MacAddr([2, 0, 0, 0, 0, 2])];
        let (_lab, inst) = build::<Poptrie<u32>, Poptrie<u128>>(&plan, &macs).unwrap();
        assert!(inst.routes4 > 500_000, "{inst:?}");
        assert_eq!(inst.routes6, 0);
        assert_eq!(inst.nexthops, 3);
        assert_eq!(spread(&[7, 8], 1), 7);
        assert_eq!(spread(&[7, 8], 2), 8);
        assert_eq!(spread(&[7, 8], 0), 7);
    }
}
