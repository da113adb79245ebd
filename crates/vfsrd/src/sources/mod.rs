//! The route sources' sockets, driven by the control plane's loop: zebra's FPM connection
//! ([`fpm`]) and the kernel's rtnetlink socket ([`netlink`]), which also reports the ports'
//! link state. The sources' logic (what a message does to the RIB, resynchronisation,
//! stale routes) lives in `vfsr-router`; this module reads bytes and hands over messages,
//! within a budget per step so that a full-table replay never holds up ARP or the punt
//! path for long.

pub mod fpm;
pub mod netlink;

use std::os::fd::RawFd;
use std::time::Instant;

use serde_json::{json, Map, Value};
use vfsr_lpm::LpmUpdate;
use vfsr_rib::Source;
use vfsr_router::{IfMap, Router, Skip, SourceCounters};

use crate::config::Plan;
use crate::error::Result;

/// A port's kernel interfaces: its own and its TAP's interface index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelIds {
    /// The port's pipeline index.
    pub port: u32,
    /// The kernel's index of the port's interface.
    pub iface: u32,
    /// The kernel's index of the port's TAP.
    pub tap: Option<u32>,
}

/// Every route source's socket.
pub struct Sources {
    /// Kernel interface → port.
    pub ifmap: IfMap,
    /// zebra's FPM connection, if configured.
    pub fpm: Option<fpm::FpmServer>,
    /// The rtnetlink socket (links always; routes when the kernel source is on).
    pub netlink: Option<netlink::NetlinkSource>,
}

impl Sources {
    /// No source (tests, offline use).
    pub fn none() -> Sources {
        Sources {
            ifmap: IfMap::new(),
            fpm: None,
            netlink: None,
        }
    }

    /// Opens what `plan` asks for. `ports`: the ports' kernel interfaces (their link state
    /// is followed, and next hops through them are routes out of the port).
    pub fn open<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        plan: &Plan,
        ports: &[KernelIds],
        router: &mut Router<E4, E6>,
    ) -> Result<Sources> {
        Sources::open_parts(plan, ports, router, true, true)
    }

    /// Like [`Sources::open`], opening the FPM listener only if `open_fpm` and the
    /// rtnetlink socket only if `open_kernel` (a reload reopens what changed).
    pub fn open_parts<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        plan: &Plan,
        ports: &[KernelIds],
        router: &mut Router<E4, E6>,
        open_fpm: bool,
        open_kernel: bool,
    ) -> Result<Sources> {
        let mut ifmap = IfMap::new();
        for k in ports {
            ifmap.insert(k.iface, k.port);
            if let Some(t) = k.tap {
                ifmap.insert(t, k.port);
            }
        }
        let fpm = match &plan.fpm {
            Some(f) if open_fpm => Some(fpm::FpmServer::bind(f)?),
            _ => None,
        };
        let netlink = if open_kernel && (plan.kernel.is_some() || !ports.is_empty()) {
            Some(netlink::NetlinkSource::open(
                plan.kernel.as_ref(),
                ports,
                router,
            )?)
        } else {
            None
        };
        Ok(Sources {
            ifmap,
            fpm,
            netlink,
        })
    }

    /// The descriptors to poll.
    pub fn fds(&self) -> Vec<RawFd> {
        let mut v = Vec::new();
        if let Some(f) = &self.fpm {
            v.extend(f.fds());
        }
        if let Some(n) = &self.netlink {
            v.push(n.fd());
        }
        v
    }

    /// Reads what the sources sent (within a budget) and applies it to the router; runs the
    /// sources' timers.
    pub fn work<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &mut self,
        now: Instant,
        router: &mut Router<E4, E6>,
    ) {
        if let Some(f) = self.fpm.as_mut() {
            f.work(now, router, &self.ifmap);
        }
        if let Some(n) = self.netlink.as_mut() {
            n.work(now, router, &self.ifmap);
        }
    }

    /// The earliest moment a source's timer needs the loop.
    pub fn deadline(&self) -> Option<Instant> {
        self.fpm.as_ref().and_then(|f| f.deadline())
    }

    /// The sources' state and counters for the stats file.
    pub fn stats<E4: LpmUpdate<u32> + Clone, E6: LpmUpdate<u128> + Clone>(
        &self,
        router: &Router<E4, E6>,
    ) -> Value {
        let mut m = Map::new();
        if let Some(f) = &self.fpm {
            m.insert("fpm".into(), f.stats(router.rib()));
        }
        if let Some(n) = &self.netlink {
            m.insert("kernel".into(), n.stats(router.rib()));
        }
        let rib = router.rib();
        let by4 = rib.v4().routes_by_source();
        let by6 = rib.v6().routes_by_source();
        let mut routes = Map::new();
        for s in Source::ALL {
            routes.insert(
                s.as_str().into(),
                json!({"v4": by4.get(s.index()).copied().unwrap_or(0),
                       "v6": by6.get(s.index()).copied().unwrap_or(0)}),
            );
        }
        m.insert("rib_routes".into(), Value::Object(routes));
        m.insert(
            "fib_prefixes".into(),
            json!({"v4": rib.v4().active_prefixes(), "v6": rib.v6().active_prefixes()}),
        );
        m.insert(
            "unresolved".into(),
            json!({"v4": rib.v4().unresolved(), "v6": rib.v6().unresolved()}),
        );
        m.insert("nexthops".into(), json!(rib.nexthops().live()));
        Value::Object(m)
    }
}

/// A source's counters as JSON.
pub fn counters_json(c: &SourceCounters) -> Value {
    let mut skipped = Map::new();
    for s in Skip::ALL {
        let n = c.skipped(s);
        if n > 0 {
            skipped.insert(s.name().into(), json!(n));
        }
    }
    json!({
        "messages": c.messages,
        "announced": c.announced,
        "withdrawn": c.withdrawn,
        "objects": c.objects,
        "object_updates": c.object_updates,
        "resyncs": c.resyncs,
        "swept": c.swept,
        "skipped": Value::Object(skipped),
    })
}
