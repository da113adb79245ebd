//! vfsrd's configuration file on arbitrary text: `vfsrd::config::parse`, the TOML parse and
//! every check, as the daemon runs it at start and on reload (with this machine's two cores,
//! and without the core checks as `--check-config` elsewhere would). Nothing may panic; a
//! checked plan holds what its checks promise (masked prefixes, usable names, ranges); the
//! same text checks the same way twice; and a plan without a `[table]` builds a router
//! (`vfsrd::router::build`, as at start) in which every configured route is a static route
//! of the RIB.

#![no_main]

use std::collections::HashSet;
use std::net::IpAddr;

use libfuzzer_sys::fuzz_target;
use vfsr_lpm::radix::Radix;
use vfsr_rib::{IpPrefix, Source};
use vfsr_router::Router;
use vfsr_wire::MacAddr;
use vfsrd::config::{self, Plan, Target};
use vfsrd::router;

fn masked(addr: IpAddr, len: u8) -> bool {
    match addr {
        IpAddr::V4(a) => len <= 32 && (len == 32 || u32::from(a) << len == 0),
        IpAddr::V6(a) => len <= 128 && (len == 128 || u128::from(a) << len == 0),
    }
}

fn check_plan(plan: &Plan, cores: Option<&[usize]>) {
    assert!(!plan.workers.is_empty());
    if let Some(usable) = cores {
        assert!(usable.contains(&plan.control_core));
        assert!(plan.workers.iter().all(|c| usable.contains(c)));
    }
    assert!(config::ENGINES.contains(&plan.fib4.as_str()));
    assert!(config::ENGINES.contains(&plan.fib6.as_str()));
    assert!((1..=256).contains(&plan.batch));
    assert!(plan.worker_priority <= 99 && plan.control_priority <= 99);
    assert!(!plan.interfaces.is_empty());
    let mut names = HashSet::new();
    for itf in &plan.interfaces {
        for n in [&itf.name, &itf.tap] {
            assert!(!n.is_empty() && n.len() <= 15, "{n:?}");
            assert!(names.insert(n.clone()), "{n:?} twice");
        }
        assert!((1280..=9000).contains(&itf.mtu));
        assert!((1..=64).contains(&itf.queues));
        assert!(itf.addrs4.iter().all(|(_, l)| *l <= 32));
        assert!(itf.addrs6.iter().all(|(_, l)| *l <= 128));
    }
    for r in &plan.routes {
        assert!(masked(r.prefix.0, r.prefix.1), "{:?}", r.prefix);
        match &r.target {
            Target::Gateways(g) => {
                assert!(!g.is_empty());
                for (a, p) in g {
                    assert_eq!(a.is_ipv4(), r.prefix.0.is_ipv4());
                    assert!(p.is_none_or(|p| p < plan.interfaces.len()));
                }
            }
            Target::Connected(p) => assert!(*p < plan.interfaces.len()),
            Target::Blackhole => {}
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for cores in [Some(&[0usize, 1][..]), None] {
        let first = config::parse(text, cores);
        assert_eq!(first, config::parse(text, cores));
        match &first {
            Ok(plan) => check_plan(plan, cores),
            Err(errs) => assert!(!errs.is_empty()),
        }
    }
    let Ok(plan) = config::parse(text, None) else {
        return;
    };
    // A table (synthetic or a file) is a million routes or a path on this machine: not
    // built here. So are very many ports or routes (slow, not different).
    if plan.table.is_some() || plan.interfaces.len() > 8 || plan.routes.len() > 256 {
        return;
    }
    let macs: Vec<MacAddr> = (0..plan.interfaces.len())
        .map(|i| MacAddr([2, 0, 0, 0, 0, i as u8 + 1]))
        .collect();
    type R = Router<Radix<u32>, Radix<u128>>;
    let Ok((built, _)) = router::build::<Radix<u32>, Radix<u128>>(&plan, &macs) else {
        return;
    };
    let built: R = built;
    for r in &plan.routes {
        let has = match router::static_prefix(r) {
            IpPrefix::V4(p) => built.rib().routes(&p),
            IpPrefix::V6(p) => built.rib().routes(&p),
        }
        .iter()
        .any(|x| x.source == Source::Static);
        assert!(has, "configured route {:?} is not in the RIB", r.prefix);
    }
});
