//! Live reconfiguration (`vfsrctl reload`, SIGHUP): the configuration file is read and
//! checked again, and what changed is applied while the workers go on forwarding.
//!
//! | applied live | how |
//! | --- | --- |
//! | `[[route]]` | routes gone are withdrawn, new or changed ones announced (source `static`); a FIB change is published like any other, in one batch |
//! | `[punt]` | the control plane's token buckets are rebuilt |
//! | `[neighbor] solicit_rate` | the ports' solicitation buckets are rebuilt |
//! | `[rib] distance` | every route of a changed source takes the new distance; best paths are recomputed |
//! | `[rib] max_delay_us` | the FIBs' publication bound |
//! | `[fpm]`, `[kernel]` | a source turned off stops and its routes are withdrawn; one turned on or changed is opened again (an FPM session starts over: zebra reconnects and replays) |
//!
//! Everything else (interfaces, workers and cores, engines, the flow table, batch size,
//! scheduling, the fast path, `[table]`, `[api]`) takes a restart: the answer names each
//! such change, and the running configuration keeps its old value for it. A file that does
//! not check is refused whole, with every error, and nothing changes.

use std::path::Path;

use serde_json::{json, Value};
use vfsr_lpm::LpmUpdate;
use vfsr_rib::{IpPrefix, Source};

use crate::config::{self, Plan, StaticRoute};
use crate::control::Control;
use crate::error::{Error, Result};
use crate::router::{static_prefix, static_routes};
use crate::sources::{KernelIds, Sources};

/// What only a restart can change, by key.
fn restart_needed(old: &Plan, new: &Plan) -> Vec<&'static str> {
    let mut v = Vec::new();
    let mut check = |changed: bool, key: &'static str| {
        if changed {
            v.push(key);
        }
    };
    check(old.interfaces != new.interfaces, "interface");
    check(old.workers != new.workers, "router.workers");
    check(old.control_core != new.control_core, "router.control_core");
    check(old.fib4 != new.fib4, "router.fib4");
    check(old.fib6 != new.fib6, "router.fib6");
    check(old.lookup != new.lookup, "router.lookup");
    check(
        old.flow_entries != new.flow_entries
            || old.flow_idle_ms != new.flow_idle_ms
            || old.flow_protect_ms != new.flow_protect_ms,
        "router.flow_table",
    );
    check(old.batch != new.batch, "router.batch");
    check(old.busy_poll_us != new.busy_poll_us, "router.busy_poll_us");
    check(
        old.worker_priority != new.worker_priority || old.control_priority != new.control_priority,
        "router.*_priority",
    );
    check(old.fast_path != new.fast_path, "router.fast_path");
    check(
        old.rss_symmetric != new.rss_symmetric,
        "router.rss_symmetric",
    );
    check(old.table != new.table, "table");
    check(old.api != new.api, "api");
    v
}

/// Reads `path`, checks it, and applies to `control` what changed from `current` (which
/// becomes the new configuration for the live parts); `cores`: the cores vfsrd could use
/// when it started (its control thread is pinned since). The answer lists what was applied and
/// what waits for a restart.
pub fn reload<E4, E6>(
    control: &mut Control<E4, E6>,
    current: &mut Plan,
    path: &Path,
    kernel_ids: &[KernelIds],
    cores: &[usize],
) -> Result<Value>
where
    E4: LpmUpdate<u32> + Clone,
    E6: LpmUpdate<u128> + Clone,
    E4::Config: Default,
    E6::Config: Default,
{
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::os(path.display().to_string(), e))?;
    let new = config::parse(&text, Some(cores))
        .map_err(|errors| Error::Config {
            file: path.display().to_string(),
            errors,
        })
        .map_err(|e| e.context("nothing changed"))?;
    let mut applied: Vec<String> = Vec::new();

    // Distances first: the static routes announced below take the new ones.
    for s in Source::ALL {
        let (o, n) = (
            current.distances.get(s.index()),
            new.distances.get(s.index()),
        );
        if let (Some(&o), Some(&n)) = (o, n) {
            if o != n {
                let moved = control.router.rib_mut().set_source_distance(s, n);
                applied.push(format!("rib.distance.{s}: {o} -> {n} ({moved} routes)"));
            }
        }
    }
    if current.distances != new.distances {
        control.router.set_distances(new.distances);
    }
    if current.max_delay != new.max_delay {
        control
            .router
            .route_table_mut()
            .set_max_delay(new.max_delay);
        applied.push(format!(
            "rib.max_delay_us: {} -> {}",
            current.max_delay.as_micros(),
            new.max_delay.as_micros()
        ));
    }

    // Static routes: withdraw what went, announce what came or changed.
    let old_routes: std::collections::BTreeMap<IpPrefix, &StaticRoute> = current
        .routes
        .iter()
        .map(|r| (static_prefix(r), r))
        .collect();
    let new_routes: std::collections::BTreeMap<IpPrefix, &StaticRoute> =
        new.routes.iter().map(|r| (static_prefix(r), r)).collect();
    let (mut added, mut withdrawn, mut changed) = (0, 0, 0);
    for p in old_routes.keys() {
        if !new_routes.contains_key(p) {
            control.router.withdraw(*p, Source::Static);
            withdrawn += 1;
        }
    }
    let distance_changed =
        current.distances.get(Source::Static.index()) != new.distances.get(Source::Static.index());
    for (p, r) in &new_routes {
        let same = old_routes.get(p).is_some_and(|o| o.target == r.target);
        if same && !distance_changed {
            continue;
        }
        let routes = static_routes(&control.router, r);
        control
            .router
            .announce(*p, Source::Static, &routes)
            .map_err(|e| Error::build(format!("route {p}"), e))?;
        if old_routes.contains_key(p) {
            changed += 1;
        } else {
            added += 1;
        }
    }
    if added + withdrawn + changed > 0 {
        applied.push(format!(
            "route: {added} added, {changed} changed, {withdrawn} withdrawn"
        ));
    }

    if current.punt != new.punt {
        control.set_punt(&new.punt);
        applied.push("punt: limits replaced".into());
    }
    if current.neighbor != new.neighbor {
        control.set_solicit_rate(new.neighbor.solicit_rate);
        applied.push(format!(
            "neighbor: {} solicitations per second per port",
            new.neighbor.solicit_rate
        ));
    }

    // Route sources.
    let fpm_changed = current.fpm != new.fpm;
    let kernel_changed = current.kernel != new.kernel;
    if fpm_changed || kernel_changed {
        if fpm_changed && new.fpm.is_none() {
            let n = control.router.rib_mut().withdraw_source(Source::Fpm);
            applied.push(format!("fpm: off, {n} routes withdrawn"));
        }
        if kernel_changed && new.kernel.is_none() {
            let n = control.router.rib_mut().withdraw_source(Source::Kernel);
            applied.push(format!("kernel: off, {n} routes withdrawn"));
        }
        let mut plan = current.clone();
        plan.fpm = new.fpm.clone();
        plan.kernel = new.kernel.clone();
        // Closing the old sockets first frees the FPM port for the new listener.
        let old = std::mem::replace(&mut control.sources, Sources::none());
        let keep_fpm = !fpm_changed;
        let keep_kernel = !kernel_changed;
        let mut fresh = Sources::open_parts(
            &plan,
            kernel_ids,
            &mut control.router,
            !keep_fpm,
            !keep_kernel,
        )?;
        if keep_fpm {
            fresh.fpm = old.fpm;
        }
        if keep_kernel {
            fresh.netlink = old.netlink;
        }
        control.sources = fresh;
        if fpm_changed && new.fpm.is_some() {
            applied.push("fpm: listening again (zebra reconnects and replays)".into());
        }
        if kernel_changed && new.kernel.is_some() {
            applied.push("kernel: mirror opened again (dump and reconcile)".into());
        }
    }
    control
        .router
        .publish()
        .map_err(|e| Error::build("publishing the FIBs", e))?;

    let restart = restart_needed(current, &new);
    // The live parts take the new values; the others keep the running ones.
    current.routes = new.routes.clone();
    current.punt = new.punt;
    current.neighbor = new.neighbor;
    current.distances = new.distances;
    current.max_delay = new.max_delay;
    current.fpm = new.fpm.clone();
    current.kernel = new.kernel.clone();
    Ok(json!({
        "file": path.display().to_string(),
        "applied": applied,
        "restart_needed": restart,
    }))
}
