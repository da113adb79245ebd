//! Routes from every source, best-path selection, ECMP groups and the FIB change log.
//!
//! Per prefix the RIB keeps the routes of every [`Source`], at most one per (source, next hop).
//! The best routes are the *active* ones (next hop resolved, see below) of lowest
//! administrative distance, then lowest metric; one best next hop is the prefix's FIB value,
//! several distinct ones form a weighted ECMP group, interned in the shared [`NextHopTable`] so
//! prefixes with the same set share one group index.
//!
//! ```text
//!   10.0.0.0/8   static d1 m0 via 192.0.2.1   ─┐ best: d1 m0, two next hops
//!                static d1 m0 via 192.0.2.2   ─┤   → group {1, 2} = index 3
//!                fpm   d20 m0 via 198.51.100.1 │ (not best)
//!                kernel d10 via 203.0.113.1    │ (unresolved: no port holds the gateway)
//!                                              ▼
//!                              change log: (10.0.0.0/8, 3)
//! ```
//!
//! Each operation recomputes the FIB value of the prefix it touches only; a changed value is
//! appended to the family's change log as `(prefix, index)` (index 0 = the prefix is gone),
//! which the owner drains and applies to the live FIB in order. Reference counts follow the
//! routes: each stored route holds one reference on its next hop, each prefix's FIB value one
//! on its next hop or group, each group one on each member.
//!
//! ## Resolution against the links
//!
//! With resolution on ([`Rib::enable_resolution`]), a next hop is usable only through a link
//! the RIB knows to be up ([`Rib::set_link`]: a port, its state and its connected subnets):
//!
//! | named by the source            | resolves to                               | when             |
//! | ------------------------------ | ----------------------------------------- | ---------------- |
//! | `via G` (no interface)         | `via G dev P`, P the up link whose subnet holds G (longest) | such a link exists |
//! | `via G dev P`                  | itself                                    | link P is up     |
//! | `connected dev P`              | itself                                    | link P is up     |
//! | blackhole, unreachable, local  | itself                                    | always           |
//!
//! A route whose next hop does not resolve stays in the RIB, *unresolved* (counted in
//! [`FamilyRib::unresolved`], shown by [`Rib::route_details`]), and takes part in best-path
//! selection again as soon as it resolves. A link going down (or losing the subnet) makes the
//! routes through it unresolved and their prefixes fall back to the next best route or to no
//! route. Without resolution (the default, for tables and benchmarks) every next hop is used
//! as named.
//!
//! ## Resynchronisation: epochs, mark and sweep
//!
//! A route source that reconnects (zebra replaying its RIB, the kernel table re-dumped after
//! an overrun) starts a new epoch ([`Rib::begin_epoch`]); every route it then announces is
//! stamped with it, unchanged ones included (a re-announcement of the same route changes no
//! FIB entry). Routes still carrying an older stamp are *stale*: they keep forwarding until
//! [`Rib::sweep`] removes them once the replay is complete (or the source's stale timer ran
//! out).
//!
//! The owner's cycle, so that no published FIB ever points at a recycled index:
//!
//! 1. apply updates to the [`Rib`];
//! 2. publish [`Rib::nexthop_snapshot`] (new indices exist before any FIB uses them);
//! 3. drain [`Rib::drain_fib_changes_v4`] / `_v6`, apply them to the FIB and publish it;
//! 4. once no reader holds an older FIB, [`Rib::release_quarantine`].

use std::collections::hash_map::Entry as MapEntry;
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;
use vfsr_fib::nexthop::{Forward, NhId, NhSnapshot};
use vfsr_lpm::{Key, NextHop, Prefix, Route, NO_ROUTE};
use vfsr_table::Table;

use crate::nexthop::{NextHopTable, NhError};

/// Where a route comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// A directly connected network: the ports' own subnets (distance 0).
    Connected,
    /// Configured by the operator (distance 1).
    Static,
    /// Pushed at run time by an operator's tool or the update stream (distance 5: an
    /// operator's action, below static).
    Api,
    /// Mirrored from the kernel's routing table, whoever wrote it (BIRD, FRR without FPM,
    /// `ip route`) (distance 10).
    Kernel,
    /// A table file or the synthetic table (distance 15, like an imported table).
    Table,
    /// FRR's zebra over FPM: its selected routes, whatever protocol chose them (distance 20,
    /// eBGP's; zebra has applied its own distances already).
    Fpm,
}

impl Source {
    /// Every source.
    pub const ALL: [Source; 6] = [
        Source::Connected,
        Source::Static,
        Source::Api,
        Source::Kernel,
        Source::Table,
        Source::Fpm,
    ];

    /// Number of sources.
    pub const COUNT: usize = 6;

    /// Position in [`Source::ALL`].
    pub fn index(self) -> usize {
        match self {
            Source::Connected => 0,
            Source::Static => 1,
            Source::Api => 2,
            Source::Kernel => 3,
            Source::Table => 4,
            Source::Fpm => 5,
        }
    }

    /// The administrative distance a route of this source gets unless told otherwise.
    pub fn default_distance(self) -> u8 {
        match self {
            Source::Connected => 0,
            Source::Static => 1,
            Source::Api => 5,
            Source::Kernel => 10,
            Source::Table => 15,
            Source::Fpm => 20,
        }
    }

    /// The lower-case name (`static`, `fpm`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Connected => "connected",
            Source::Static => "static",
            Source::Api => "api",
            Source::Kernel => "kernel",
            Source::Table => "table",
            Source::Fpm => "fpm",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Source {
    type Err = UnknownSource;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Source::ALL
            .into_iter()
            .find(|src| src.as_str() == s)
            .ok_or(UnknownSource)
    }
}

/// A name that is no [`Source`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownSource;

impl fmt::Display for UnknownSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown route source")
    }
}

impl std::error::Error for UnknownSource {}

/// One route of one source to a prefix.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RibRoute {
    pub source: Source,
    /// Administrative distance: lower wins.
    pub distance: u8,
    /// Metric, compared between routes of equal distance: lower wins.
    pub metric: u32,
    /// A single next hop (not a group), as the source named it.
    pub nexthop: Forward,
    /// Its weight when it is one of several best routes (an ECMP member), at least 1.
    pub weight: u16,
    /// The source's next-hop object this route came through (a netlink next-hop id), 0 for
    /// none: lets the source find the routes to change when the object changes.
    pub nhid: u32,
}

impl RibRoute {
    /// A route with the source's default distance, metric 0, weight 1.
    pub fn new(source: Source, nexthop: Forward) -> Self {
        RibRoute {
            source,
            distance: source.default_distance(),
            metric: 0,
            nexthop,
            weight: 1,
            nhid: 0,
        }
    }

    /// The same route with another metric.
    pub fn with_metric(mut self, metric: u32) -> Self {
        self.metric = metric;
        self
    }

    /// The same route with another distance.
    pub fn with_distance(mut self, distance: u8) -> Self {
        self.distance = distance;
        self
    }

    /// The same route with another ECMP weight (0 counts as 1).
    pub fn with_weight(mut self, weight: u16) -> Self {
        self.weight = weight.max(1);
        self
    }

    /// The same route tagged with a source's next-hop object id.
    pub fn with_nhid(mut self, nhid: u32) -> Self {
        self.nhid = nhid;
        self
    }
}

/// A route as [`Rib::route_details`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteDetail {
    /// The route as its source gave it.
    pub route: RibRoute,
    /// What its next hop resolves to (`None`: unresolved).
    pub resolved: Option<Forward>,
    /// Whether it is one of the prefix's best routes (in the FIB).
    pub best: bool,
    /// Whether it predates its source's current epoch (kept until the resync sweeps it).
    pub stale: bool,
}

/// Why a RIB operation failed. The RIB is unchanged when one is returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RibError {
    /// A gateway of the other address family than the prefix.
    WrongFamily,
    /// A route's next hop is a group (routes name single next hops).
    GroupNotAllowed,
    /// A route given to `replace` belongs to another source.
    SourceMismatch { expected: Source, got: Source },
    /// A next hop of a loaded table is neither nh64 nor a gateway of its table.
    UnknownTableNextHop(NextHop),
    /// The next-hop table refused (index space exhausted...).
    NextHop(NhError),
}

impl fmt::Display for RibError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RibError::WrongFamily => f.write_str("next hop of the other address family"),
            RibError::GroupNotAllowed => f.write_str("a route's next hop cannot be a group"),
            RibError::SourceMismatch { expected, got } => {
                write!(f, "route of source {got} given as {expected}")
            }
            RibError::UnknownTableNextHop(n) => write!(f, "unknown table next hop {n}"),
            RibError::NextHop(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RibError {}

impl From<NhError> for RibError {
    fn from(e: NhError) -> Self {
        RibError::NextHop(e)
    }
}

/// A route as stored: the next hop as an interned id holding one reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stored {
    source: Source,
    distance: u8,
    weight: u16,
    metric: u32,
    nh: NhId,
    /// The source's epoch when the route was last announced.
    stamp: u32,
    nhid: u32,
}

/// The routes of one prefix and its FIB value (holding one reference unless none).
#[derive(Clone, Debug, Default)]
struct Entry {
    routes: SmallVec<[Stored; 1]>,
    fib: NhId,
}

/// The RIB of one address family. Its next hops live in the [`Rib`]'s shared table, so it is
/// changed through the [`Rib`].
#[derive(Clone, Debug, Default)]
pub struct FamilyRib<K: Key> {
    prefixes: FxHashMap<Prefix<K>, Entry>,
    changes: Vec<(Prefix<K>, NextHop)>,
    degraded: u64,
    /// Stored routes whose next hop is inactive.
    unresolved: usize,
    /// Stored routes per source, kept as routes come and go (reports read it at any rate).
    by_source: [usize; Source::COUNT],
    /// Prefixes with a FIB value, kept as values change.
    active: usize,
}

/// Whether a gateway address may serve a prefix of family `K`.
fn family_ok<K: Key>(f: &Forward) -> Result<(), RibError> {
    match f {
        Forward::Group { .. } => Err(RibError::GroupNotAllowed),
        Forward::Gateway { addr, .. } if addr.is_ipv4() != (K::BITS == 32) => {
            Err(RibError::WrongFamily)
        }
        _ => Ok(()),
    }
}

/// The context every family operation needs: the shared next-hop table, the links next hops
/// resolve through, and the stamp new routes get (the RIB's own; not constructible outside).
#[doc(hidden)]
pub struct Ctx<'a> {
    nh: &'a mut NextHopTable,
    links: Option<&'a Links>,
    stamp: u32,
}

impl Ctx<'_> {
    /// Interns a next hop as named (one reference), resolving it when it is new.
    fn intern(&mut self, named: &Forward) -> Result<NhId, NhError> {
        let (id, new) = self.nh.intern_new(named)?;
        if new {
            if let Some(links) = self.links {
                let _ = self.nh.set_resolution(id, links.resolve(named));
            }
        }
        Ok(id)
    }
}

impl<K: Key> FamilyRib<K> {
    /// Prefixes with at least one route.
    pub fn len(&self) -> usize {
        self.prefixes.len()
    }

    /// Whether no prefix has a route.
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// Routes of every source and prefix.
    pub fn route_count(&self) -> usize {
        self.prefixes.values().map(|e| e.routes.len()).sum()
    }

    /// Routes of each source (indexed by [`Source::index`]).
    pub fn routes_by_source(&self) -> [usize; Source::COUNT] {
        self.by_source
    }

    /// Prefixes in the FIB (with a usable route).
    pub fn active_prefixes(&self) -> usize {
        self.active
    }

    /// Routes kept whose next hop does not resolve (no up link holds their gateway).
    pub fn unresolved(&self) -> usize {
        self.unresolved
    }

    /// How often an ECMP group could not be interned (index space exhausted) and the prefix
    /// fell back to its lowest-index best next hop.
    pub fn degraded_groups(&self) -> u64 {
        self.degraded
    }

    /// The FIB value of `prefix`: a next-hop or group index, [`NO_ROUTE`] without a usable
    /// route.
    pub fn fib_value(&self, prefix: &Prefix<K>) -> NextHop {
        self.prefixes.get(prefix).map_or(NO_ROUTE, |e| e.fib.index)
    }

    /// The FIB value of `prefix` as an id.
    pub fn fib_id(&self, prefix: &Prefix<K>) -> NhId {
        self.prefixes.get(prefix).map_or(NhId::NONE, |e| e.fib)
    }

    /// The full FIB of this family in canonical order (address, then length).
    pub fn fib_routes(&self) -> Vec<Route<K>> {
        let mut v: Vec<Route<K>> = self
            .prefixes
            .iter()
            .filter(|(_, e)| !e.fib.is_none())
            .map(|(p, e)| Route::new(*p, e.fib.index))
            .collect();
        v.sort_unstable_by_key(|r| r.prefix);
        v
    }

    /// Takes the FIB changes logged since the last drain, in order.
    pub fn drain_changes(&mut self) -> Vec<(Prefix<K>, NextHop)> {
        std::mem::take(&mut self.changes)
    }

    /// FIB changes waiting to be drained.
    pub fn pending_changes(&self) -> usize {
        self.changes.len()
    }

    /// Every prefix with at least one route, in no particular order.
    pub fn prefixes(&self) -> impl Iterator<Item = Prefix<K>> + '_ {
        self.prefixes.keys().copied()
    }

    /// The prefixes with a route of `source` through one of the next-hop objects `ids`.
    pub fn nhid_users(&self, source: Source, ids: &FxHashSet<u32>) -> Vec<Prefix<K>> {
        self.prefixes
            .iter()
            .filter(|(_, e)| {
                e.routes
                    .iter()
                    .any(|r| r.source == source && r.nhid != 0 && ids.contains(&r.nhid))
            })
            .map(|(p, _)| *p)
            .collect()
    }

    fn stored_route(r: &Stored, nh: &NextHopTable) -> Option<RibRoute> {
        Some(RibRoute {
            source: r.source,
            distance: r.distance,
            metric: r.metric,
            nexthop: nh.named(r.nh)?.clone(),
            weight: r.weight,
            nhid: r.nhid,
        })
    }

    fn routes(&self, prefix: &Prefix<K>, nh: &NextHopTable) -> Vec<RibRoute> {
        let Some(e) = self.prefixes.get(prefix) else {
            return Vec::new();
        };
        e.routes
            .iter()
            .filter_map(|r| Self::stored_route(r, nh))
            .collect()
    }

    fn details(
        &self,
        prefix: &Prefix<K>,
        nh: &NextHopTable,
        epochs: &[u32; Source::COUNT],
    ) -> Vec<RouteDetail> {
        let Some(e) = self.prefixes.get(prefix) else {
            return Vec::new();
        };
        let best = best_key(e, nh);
        e.routes
            .iter()
            .filter_map(|r| {
                let active = nh.is_active(r.nh);
                Some(RouteDetail {
                    route: Self::stored_route(r, nh)?,
                    resolved: if active {
                        nh.get(r.nh).map(|x| x.forward.clone())
                    } else {
                        None
                    },
                    best: active && Some((r.distance, r.metric)) == best,
                    stale: epochs.get(r.source.index()) != Some(&r.stamp),
                })
            })
            .collect()
    }

    /// Counts a stored route in (`sign` 1) or out (`sign` -1) of the unresolved and
    /// per-source tallies.
    fn tally(
        unresolved: &mut usize,
        by_source: &mut [usize; Source::COUNT],
        s: &Stored,
        nh: &NextHopTable,
        sign: isize,
    ) {
        if !nh.is_active(s.nh) {
            *unresolved = unresolved.saturating_add_signed(sign);
        }
        if let Some(c) = by_source.get_mut(s.source.index()) {
            *c = c.saturating_add_signed(sign);
        }
    }

    fn note_removed(
        unresolved: &mut usize,
        by_source: &mut [usize; Source::COUNT],
        s: &Stored,
        nh: &NextHopTable,
    ) {
        Self::tally(unresolved, by_source, s, nh, -1);
    }

    fn note_added(
        unresolved: &mut usize,
        by_source: &mut [usize; Source::COUNT],
        s: &Stored,
        nh: &NextHopTable,
    ) {
        Self::tally(unresolved, by_source, s, nh, 1);
    }

    fn add(
        &mut self,
        cx: &mut Ctx<'_>,
        prefix: Prefix<K>,
        route: &RibRoute,
    ) -> Result<(), RibError> {
        family_ok::<K>(&route.nexthop)?;
        let id = cx.intern(&route.nexthop)?;
        let stored = Stored {
            source: route.source,
            distance: route.distance,
            weight: route.weight.max(1),
            metric: route.metric,
            nh: id,
            stamp: cx.stamp,
            nhid: route.nhid,
        };
        let nh = &mut *cx.nh;
        let e = self.prefixes.entry(prefix).or_default();
        let same = e.routes.iter().position(|r| {
            r.source == route.source && (r.nh == id || nh.named(r.nh) == Some(&route.nexthop))
        });
        let (mut unresolved, mut by_source) = (self.unresolved, self.by_source);
        match same.and_then(|i| e.routes.get_mut(i)) {
            Some(r) => {
                let old = std::mem::replace(r, stored);
                Self::note_removed(&mut unresolved, &mut by_source, &old, nh);
                let _ = nh.release(old.nh);
            }
            None => e.routes.push(stored),
        }
        Self::note_added(&mut unresolved, &mut by_source, &stored, nh);
        (self.unresolved, self.by_source) = (unresolved, by_source);
        recompute(
            prefix,
            e,
            nh,
            &mut self.changes,
            &mut self.degraded,
            &mut self.active,
        );
        Ok(())
    }

    /// Interns the next hops of `routes` (one reference each); on error releases what it took.
    fn intern_routes(
        cx: &mut Ctx<'_>,
        source: Source,
        routes: &[RibRoute],
    ) -> Result<SmallVec<[Stored; 2]>, RibError> {
        for r in routes {
            if r.source != source {
                return Err(RibError::SourceMismatch {
                    expected: source,
                    got: r.source,
                });
            }
            family_ok::<K>(&r.nexthop)?;
        }
        let mut out: SmallVec<[Stored; 2]> = SmallVec::with_capacity(routes.len());
        for r in routes {
            match cx.intern(&r.nexthop) {
                Ok(id) => out.push(Stored {
                    source,
                    distance: r.distance,
                    weight: r.weight.max(1),
                    metric: r.metric,
                    nh: id,
                    stamp: cx.stamp,
                    nhid: r.nhid,
                }),
                Err(err) => {
                    for s in out {
                        let _ = cx.nh.release(s.nh);
                    }
                    return Err(err.into());
                }
            }
        }
        Ok(out)
    }

    /// The routes of `source` for `prefix` that `old` selects become `new` (each holding a
    /// reference already).
    fn replace_stored(
        &mut self,
        nh: &mut NextHopTable,
        prefix: Prefix<K>,
        source: Source,
        old: impl Fn(&Stored) -> bool,
        new: &[Stored],
    ) {
        let e = match self.prefixes.entry(prefix) {
            MapEntry::Occupied(o) => o.into_mut(),
            MapEntry::Vacant(v) => {
                if new.is_empty() {
                    return;
                }
                v.insert(Entry::default())
            }
        };
        let (mut unresolved, mut by_source) = (self.unresolved, self.by_source);
        e.routes.retain(|r| {
            if r.source == source && old(r) {
                Self::note_removed(&mut unresolved, &mut by_source, r, nh);
                let _ = nh.release(r.nh);
                false
            } else {
                true
            }
        });
        // Only the routes this call puts in are compared with each other: a source's routes
        // the call does not replace (the kernel's routes of other metrics) stay as they are,
        // even through the same next hop (one next hop at two metrics is two kernel routes,
        // and deleting one leaves the other).
        let first_new = e.routes.len();
        for s in new {
            match e
                .routes
                .iter_mut()
                .skip(first_new)
                .find(|r| r.source == source && r.nh == s.nh)
            {
                Some(r) => {
                    // The same next hop twice: the later route wins, one reference is enough.
                    Self::note_removed(&mut unresolved, &mut by_source, r, nh);
                    *r = *s;
                    let _ = nh.release(s.nh);
                }
                None => e.routes.push(*s),
            }
            Self::note_added(&mut unresolved, &mut by_source, s, nh);
        }
        (self.unresolved, self.by_source) = (unresolved, by_source);
        recompute(
            prefix,
            e,
            nh,
            &mut self.changes,
            &mut self.degraded,
            &mut self.active,
        );
        if e.routes.is_empty() {
            self.prefixes.remove(&prefix);
        }
    }

    fn replace(
        &mut self,
        cx: &mut Ctx<'_>,
        prefix: Prefix<K>,
        source: Source,
        metric: Option<u32>,
        routes: &[RibRoute],
    ) -> Result<(), RibError> {
        let new = Self::intern_routes(cx, source, routes)?;
        match metric {
            None => self.replace_stored(cx.nh, prefix, source, |_| true, &new),
            Some(m) => self.replace_stored(cx.nh, prefix, source, |r| r.metric == m, &new),
        }
        Ok(())
    }

    fn withdraw_where(
        &mut self,
        nh: &mut NextHopTable,
        prefix: Prefix<K>,
        mut pred: impl FnMut(&Stored, &NextHopTable) -> bool,
    ) -> usize {
        let Some(e) = self.prefixes.get_mut(&prefix) else {
            return 0;
        };
        let before = e.routes.len();
        let mut gone: SmallVec<[Stored; 2]> = SmallVec::new();
        e.routes.retain(|r| {
            if pred(r, nh) {
                gone.push(*r);
                false
            } else {
                true
            }
        });
        for s in gone {
            Self::note_removed(&mut self.unresolved, &mut self.by_source, &s, nh);
            let _ = nh.release(s.nh);
        }
        let n = before.saturating_sub(e.routes.len());
        if n > 0 {
            recompute(
                prefix,
                e,
                nh,
                &mut self.changes,
                &mut self.degraded,
                &mut self.active,
            );
            if e.routes.is_empty() {
                self.prefixes.remove(&prefix);
            }
        }
        n
    }

    /// Removes, over the whole family, the routes `pred` selects; returns how many.
    fn withdraw_all_where(
        &mut self,
        nh: &mut NextHopTable,
        mut pred: impl FnMut(&Stored) -> bool,
    ) -> usize {
        let FamilyRib {
            prefixes,
            changes,
            degraded,
            unresolved,
            by_source,
            active,
        } = self;
        let mut count = 0usize;
        prefixes.retain(|p, e| {
            let before = e.routes.len();
            e.routes.retain(|r| {
                if pred(r) {
                    Self::note_removed(unresolved, by_source, r, nh);
                    let _ = nh.release(r.nh);
                    false
                } else {
                    true
                }
            });
            let n = before.saturating_sub(e.routes.len());
            if n > 0 {
                count = count.saturating_add(n);
                recompute(*p, e, nh, changes, degraded, active);
            }
            !e.routes.is_empty()
        });
        count
    }

    /// Recomputes every prefix with a route through one of `ids` (their activity changed),
    /// then recounts the unresolved routes.
    fn reresolve(&mut self, nh: &mut NextHopTable, ids: &FxHashSet<u32>) {
        let FamilyRib {
            prefixes,
            changes,
            degraded,
            unresolved,
            active,
            ..
        } = self;
        let mut count = 0usize;
        for (p, e) in prefixes.iter_mut() {
            if e.routes.iter().any(|r| ids.contains(&r.nh.index)) {
                recompute(*p, e, nh, changes, degraded, active);
            }
            count += e.routes.iter().filter(|r| !nh.is_active(r.nh)).count();
        }
        *unresolved = count;
    }

    fn set_distance(&mut self, nh: &mut NextHopTable, source: Source, distance: u8) -> usize {
        let FamilyRib {
            prefixes,
            changes,
            degraded,
            active,
            ..
        } = self;
        let mut n = 0;
        for (p, e) in prefixes.iter_mut() {
            let mut touched = false;
            for r in e.routes.iter_mut() {
                if r.source == source && r.distance != distance {
                    r.distance = distance;
                    touched = true;
                    n += 1;
                }
            }
            if touched {
                recompute(*p, e, nh, changes, degraded, active);
            }
        }
        n
    }

    /// Routes of `source` stamped before `epoch`.
    fn stale(&self, source: Source, epoch: u32) -> usize {
        self.prefixes
            .values()
            .map(|e| {
                e.routes
                    .iter()
                    .filter(|r| r.source == source && r.stamp != epoch)
                    .count()
            })
            .sum()
    }

    /// Bulk load: every route of `routes` replaces `source`'s routes of its prefix, in order.
    /// `ids` maps each table next hop to an interned id (its reference is the caller's).
    fn load(
        &mut self,
        nh: &mut NextHopTable,
        routes: &[Route<K>],
        source: Source,
        distance: u8,
        stamp: u32,
        ids: &FxHashMap<NextHop, NhId>,
    ) -> usize {
        self.prefixes.reserve(routes.len());
        self.changes.reserve(routes.len());
        let mut n = 0usize;
        for r in routes {
            let Some(&id) = ids.get(&r.nexthop) else {
                continue;
            };
            if nh.retain(id).is_err() {
                continue;
            }
            let stored = Stored {
                source,
                distance,
                weight: 1,
                metric: 0,
                nh: id,
                stamp,
                nhid: 0,
            };
            n = n.saturating_add(1);
            match self.prefixes.entry(r.prefix) {
                MapEntry::Vacant(v) if nh.is_active(id) => {
                    // The common case: a new prefix with one usable route is its own best path.
                    let _ = nh.retain(id);
                    let mut routes = SmallVec::new();
                    routes.push(stored);
                    v.insert(Entry { routes, fib: id });
                    self.changes.push((r.prefix, id.index));
                    self.active = self.active.saturating_add(1);
                    Self::note_added(&mut self.unresolved, &mut self.by_source, &stored, nh);
                }
                _ => self.replace_stored(nh, r.prefix, source, |_| true, &[stored]),
            }
        }
        n
    }
}

/// The (distance, metric) of the best active routes of an entry.
fn best_key(e: &Entry, nh: &NextHopTable) -> Option<(u8, u32)> {
    e.routes
        .iter()
        .filter(|r| nh.is_active(r.nh))
        .map(|r| (r.distance, r.metric))
        .min()
}

/// Recomputes the FIB value of one prefix from its active routes; logs it when it changed.
/// The new value gets one reference, the old one loses its.
fn recompute<K: Key>(
    prefix: Prefix<K>,
    e: &mut Entry,
    nh: &mut NextHopTable,
    changes: &mut Vec<(Prefix<K>, NextHop)>,
    degraded: &mut u64,
    active: &mut usize,
) {
    let new = match best_key(e, nh) {
        None => NhId::NONE,
        Some(best) => {
            let mut members: SmallVec<[(NhId, u16); 4]> = e
                .routes
                .iter()
                .filter(|r| (r.distance, r.metric) == best && nh.is_active(r.nh))
                .map(|r| (r.nh, r.weight))
                .collect();
            members.sort_unstable();
            // (value, whether a reference on it was taken already)
            let (value, taken) = match members.as_slice() {
                [(one, _)] => (*one, false),
                _ => match nh.intern_group(&members) {
                    Ok(g) => (g, true),
                    Err(_) => {
                        *degraded = degraded.saturating_add(1);
                        (members.first().map_or(NhId::NONE, |m| m.0), false)
                    }
                },
            };
            if value == e.fib {
                if taken {
                    // The same group again: drop the reference interning took.
                    let _ = nh.release(value);
                }
                return;
            }
            if !taken {
                let _ = nh.retain(value);
            }
            value
        }
    };
    if new == e.fib {
        return;
    }
    if !e.fib.is_none() {
        let _ = nh.release(e.fib);
    }
    match (e.fib.is_none(), new.is_none()) {
        (true, false) => *active = active.saturating_add(1),
        (false, true) => *active = active.saturating_sub(1),
        _ => {}
    }
    e.fib = new;
    changes.push((prefix, new.index));
}

/// The address families a [`Rib`] holds: `u32` (IPv4) and `u128` (IPv6).
pub trait RibFamily: Key {
    /// This family's part of the RIB.
    fn family(rib: &Rib) -> &FamilyRib<Self>;
    /// This family's part and the context its operations need.
    #[doc(hidden)]
    fn parts(rib: &mut Rib, source: Source) -> (&mut FamilyRib<Self>, Ctx<'_>);
    /// Whether `addr` is of this family.
    fn is_family(addr: &IpAddr) -> bool;
}

impl RibFamily for u32 {
    fn family(rib: &Rib) -> &FamilyRib<u32> {
        &rib.v4
    }
    fn parts(rib: &mut Rib, source: Source) -> (&mut FamilyRib<u32>, Ctx<'_>) {
        let stamp = rib.epoch(source);
        (
            &mut rib.v4,
            Ctx {
                nh: &mut rib.nexthops,
                links: rib.links.as_ref(),
                stamp,
            },
        )
    }
    fn is_family(addr: &IpAddr) -> bool {
        addr.is_ipv4()
    }
}

impl RibFamily for u128 {
    fn family(rib: &Rib) -> &FamilyRib<u128> {
        &rib.v6
    }
    fn parts(rib: &mut Rib, source: Source) -> (&mut FamilyRib<u128>, Ctx<'_>) {
        let stamp = rib.epoch(source);
        (
            &mut rib.v6,
            Ctx {
                nh: &mut rib.nexthops,
                links: rib.links.as_ref(),
                stamp,
            },
        )
    }
    fn is_family(addr: &IpAddr) -> bool {
        addr.is_ipv6()
    }
}

/// What [`Rib::load_table`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// IPv4 routes loaded.
    pub v4: usize,
    /// IPv6 routes loaded.
    pub v6: usize,
}

/// A link (port) as next hops resolve through it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkState {
    /// Whether it forwards (administratively up, carrier present).
    pub up: bool,
    /// Its connected IPv4 subnets.
    pub v4: Vec<Prefix<u32>>,
    /// Its connected IPv6 subnets.
    pub v6: Vec<Prefix<u128>>,
}

/// The links next hops resolve through, by interface index.
#[derive(Clone, Debug, Default)]
struct Links {
    links: BTreeMap<u32, LinkState>,
}

impl Links {
    fn up(&self, ifindex: u32) -> bool {
        self.links.get(&ifindex).is_some_and(|l| l.up)
    }

    /// The up link whose subnet holds `addr` (the longest such subnet; ties: the lowest
    /// index).
    fn on_link(&self, addr: IpAddr) -> Option<u32> {
        let mut best: Option<(u8, u32)> = None;
        for (&i, l) in &self.links {
            if !l.up {
                continue;
            }
            let len = match addr {
                IpAddr::V4(a) => {
                    let a = u32::from(a);
                    l.v4.iter().filter(|p| p.contains(a)).map(|p| p.len()).max()
                }
                IpAddr::V6(a) => {
                    let a = u128::from(a);
                    l.v6.iter().filter(|p| p.contains(a)).map(|p| p.len()).max()
                }
            };
            if let Some(len) = len {
                if best.is_none_or(|(b, _)| len > b) {
                    best = Some((len, i));
                }
            }
        }
        best.map(|(_, i)| i)
    }

    /// What a next hop named by a source resolves to, if anything.
    fn resolve(&self, named: &Forward) -> Option<Forward> {
        match named {
            Forward::Gateway {
                addr,
                ifindex: None,
            } => self.on_link(*addr).map(|i| Forward::Gateway {
                addr: *addr,
                ifindex: Some(i),
            }),
            Forward::Gateway {
                ifindex: Some(i), ..
            }
            | Forward::Connected { ifindex: i } => self.up(*i).then(|| named.clone()),
            Forward::Group { .. } => None,
            Forward::Local | Forward::Blackhole | Forward::Unreachable | Forward::Opaque(_) => {
                Some(named.clone())
            }
        }
    }
}

/// What a change of the links did ([`Rib::set_link`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResolveReport {
    /// Next hops that became usable.
    pub activated: usize,
    /// Next hops that became unusable.
    pub deactivated: usize,
    /// Next hops that stay usable but now resolve differently (changed in place).
    pub moved: usize,
}

/// The RIB of both families with their shared next-hop table.
#[derive(Clone, Debug, Default)]
pub struct Rib {
    v4: FamilyRib<u32>,
    v6: FamilyRib<u128>,
    nexthops: NextHopTable,
    /// `Some` once resolution is on.
    links: Option<Links>,
    /// The current epoch of each source (see [`Rib::begin_epoch`]).
    epochs: [u32; Source::COUNT],
    /// Whether a source may have stale routes: set when its epoch begins, cleared when it is
    /// swept or withdrawn whole (until then [`Rib::stale_routes`] has to count them).
    maybe_stale: [bool; Source::COUNT],
    /// Distances that differ from the sources' defaults, for whole-table loads.
    distances: [Option<u8>; Source::COUNT],
}

impl Rib {
    /// An empty RIB with next-hop indices `1..=65535`, next hops used as named.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty RIB with next-hop indices `1..=max`.
    pub fn with_max_nexthops(max: u32) -> Self {
        Rib {
            nexthops: NextHopTable::with_max(max),
            ..Self::default()
        }
    }

    /// The IPv4 part.
    pub fn v4(&self) -> &FamilyRib<u32> {
        &self.v4
    }

    /// The IPv6 part.
    pub fn v6(&self) -> &FamilyRib<u128> {
        &self.v6
    }

    /// The part of family `K`.
    pub fn family<K: RibFamily>(&self) -> &FamilyRib<K> {
        K::family(self)
    }

    /// The shared next-hop table.
    pub fn nexthops(&self) -> &NextHopTable {
        &self.nexthops
    }

    /// Sets the distance the routes of a whole-table load of `source` get (routes given one
    /// by one carry their own).
    pub fn set_distance(&mut self, source: Source, distance: u8) {
        if let Some(d) = self.distances.get_mut(source.index()) {
            *d = Some(distance);
        }
    }

    /// Gives every route of `source` distance `distance` (and its future whole-table
    /// loads), recomputing the prefixes whose best path changes; returns how many routes.
    pub fn set_source_distance(&mut self, source: Source, distance: u8) -> usize {
        self.set_distance(source, distance);
        let a = self.v4.set_distance(&mut self.nexthops, source, distance);
        let b = self.v6.set_distance(&mut self.nexthops, source, distance);
        a + b
    }

    /// The distance of `source`'s whole-table loads.
    pub fn distance(&self, source: Source) -> u8 {
        self.distances
            .get(source.index())
            .copied()
            .flatten()
            .unwrap_or_else(|| source.default_distance())
    }

    fn epoch(&self, source: Source) -> u32 {
        self.epochs.get(source.index()).copied().unwrap_or(0)
    }

    /// Adds one route, or replaces the route of the same source and next hop.
    pub fn add<K: RibFamily>(
        &mut self,
        prefix: Prefix<K>,
        route: &RibRoute,
    ) -> Result<(), RibError> {
        let (f, mut cx) = K::parts(self, route.source);
        f.add(&mut cx, prefix, route)
    }

    /// Announce-or-replace: `source`'s routes for `prefix` become exactly `routes` (each of
    /// which must be of `source`; none withdraws). Several routes of equal distance and
    /// metric form an ECMP group with their weights.
    pub fn replace<K: RibFamily>(
        &mut self,
        prefix: Prefix<K>,
        source: Source,
        routes: &[RibRoute],
    ) -> Result<(), RibError> {
        let (f, mut cx) = K::parts(self, source);
        f.replace(&mut cx, prefix, source, None, routes)
    }

    /// As [`Rib::replace`], for `source`'s routes of metric `metric` only (a kernel route is
    /// identified by prefix and metric; routes of other metrics stay).
    pub fn replace_metric<K: RibFamily>(
        &mut self,
        prefix: Prefix<K>,
        source: Source,
        metric: u32,
        routes: &[RibRoute],
    ) -> Result<(), RibError> {
        let (f, mut cx) = K::parts(self, source);
        f.replace(&mut cx, prefix, source, Some(metric), routes)
    }

    /// Withdraws every route of `source` for `prefix`; returns how many.
    pub fn withdraw<K: RibFamily>(&mut self, prefix: Prefix<K>, source: Source) -> usize {
        let (f, cx) = K::parts(self, source);
        f.withdraw_where(cx.nh, prefix, |r, _| r.source == source)
    }

    /// Withdraws the routes of `source` with metric `metric` for `prefix`; returns how many.
    pub fn withdraw_metric<K: RibFamily>(
        &mut self,
        prefix: Prefix<K>,
        source: Source,
        metric: u32,
    ) -> usize {
        let (f, cx) = K::parts(self, source);
        f.withdraw_where(cx.nh, prefix, |r, _| {
            r.source == source && r.metric == metric
        })
    }

    /// Withdraws the route of `source` via `nexthop` for `prefix`; returns whether it existed.
    pub fn withdraw_route<K: RibFamily>(
        &mut self,
        prefix: Prefix<K>,
        source: Source,
        nexthop: &Forward,
    ) -> bool {
        let (f, cx) = K::parts(self, source);
        f.withdraw_where(cx.nh, prefix, |r, nh| {
            r.source == source && nh.named(r.nh) == Some(nexthop)
        }) > 0
    }

    /// Withdraws every route of `source` via `nexthop`, in both families (a session reset);
    /// returns how many. Scans the whole RIB.
    pub fn withdraw_nexthop(&mut self, source: Source, nexthop: &Forward) -> usize {
        let ids: FxHashSet<u32> = self
            .nexthops
            .singles()
            .filter(|(_, named)| *named == nexthop)
            .map(|(id, _)| id.index)
            .collect();
        if ids.is_empty() {
            return 0;
        }
        let pred = |r: &Stored| r.source == source && ids.contains(&r.nh.index);
        let a = self.v4.withdraw_all_where(&mut self.nexthops, pred);
        let b = self.v6.withdraw_all_where(&mut self.nexthops, pred);
        a.saturating_add(b)
    }

    /// Withdraws every route of `source`, in both families; returns how many.
    pub fn withdraw_source(&mut self, source: Source) -> usize {
        let a = self
            .v4
            .withdraw_all_where(&mut self.nexthops, |r| r.source == source);
        let b = self
            .v6
            .withdraw_all_where(&mut self.nexthops, |r| r.source == source);
        a.saturating_add(b)
    }

    /// Starts a new epoch of `source` (it reconnected and replays its routes): routes it had
    /// are stale until announced again. Returns the new epoch.
    pub fn begin_epoch(&mut self, source: Source) -> u32 {
        if let Some(e) = self.epochs.get_mut(source.index()) {
            *e = e.wrapping_add(1);
        }
        if let Some(m) = self.maybe_stale.get_mut(source.index()) {
            *m = true;
        }
        self.epoch(source)
    }

    /// The current epoch of `source`.
    pub fn current_epoch(&self, source: Source) -> u32 {
        self.epoch(source)
    }

    /// Removes `source`'s stale routes (not announced since its current epoch began), in
    /// both families; returns how many.
    pub fn sweep(&mut self, source: Source) -> usize {
        let epoch = self.epoch(source);
        let pred = |r: &Stored| r.source == source && r.stamp != epoch;
        let a = self.v4.withdraw_all_where(&mut self.nexthops, pred);
        let b = self.v6.withdraw_all_where(&mut self.nexthops, pred);
        if let Some(m) = self.maybe_stale.get_mut(source.index()) {
            *m = false;
        }
        a.saturating_add(b)
    }

    /// Marks `source`'s routes for `prefix` (of metric `metric` only, if given) as announced
    /// in the current epoch without changing them (the source said something about the
    /// prefix that could not be used: what it had stays). Returns how many.
    pub fn touch<K: RibFamily>(
        &mut self,
        prefix: Prefix<K>,
        source: Source,
        metric: Option<u32>,
    ) -> usize {
        let (f, cx) = K::parts(self, source);
        let Some(e) = f.prefixes.get_mut(&prefix) else {
            return 0;
        };
        let mut n = 0;
        for r in e.routes.iter_mut() {
            if r.source == source && metric.is_none_or(|m| m == r.metric) {
                r.stamp = cx.stamp;
                n += 1;
            }
        }
        n
    }

    /// `source`'s routes not announced since its current epoch began, in both families.
    pub fn stale_routes(&self, source: Source) -> usize {
        if self.maybe_stale.get(source.index()) == Some(&false) {
            return 0;
        }
        let epoch = self.epoch(source);
        self.v4
            .stale(source, epoch)
            .saturating_add(self.v6.stale(source, epoch))
    }

    /// Turns resolution on: from now on a next hop is used only through a known, up link
    /// (see the module doc). Every next hop is resolved again.
    pub fn enable_resolution(&mut self) -> ResolveReport {
        if self.links.is_none() {
            self.links = Some(Links::default());
        }
        self.reresolve()
    }

    /// Whether next hops resolve through links.
    pub fn resolution(&self) -> bool {
        self.links.is_some()
    }

    /// Sets what the RIB knows of link `ifindex` (turning resolution on if it was off) and
    /// resolves every next hop again: routes through a link that went down lose their
    /// place in the FIB, unresolved routes whose gateway is now on a link take theirs.
    pub fn set_link(&mut self, ifindex: u32, state: LinkState) -> ResolveReport {
        let links = self.links.get_or_insert_with(Links::default);
        if links.links.get(&ifindex) == Some(&state) {
            return ResolveReport::default();
        }
        links.links.insert(ifindex, state);
        self.reresolve()
    }

    /// Forgets link `ifindex` (as if it were down and had no subnet).
    pub fn remove_link(&mut self, ifindex: u32) -> ResolveReport {
        let removed = self
            .links
            .as_mut()
            .is_some_and(|l| l.links.remove(&ifindex).is_some());
        if removed {
            self.reresolve()
        } else {
            ResolveReport::default()
        }
    }

    /// What the RIB knows of link `ifindex`.
    pub fn link(&self, ifindex: u32) -> Option<&LinkState> {
        self.links.as_ref()?.links.get(&ifindex)
    }

    fn reresolve(&mut self) -> ResolveReport {
        let Some(links) = self.links.as_ref() else {
            return ResolveReport::default();
        };
        let todo: Vec<(NhId, Option<Forward>)> = self
            .nexthops
            .singles()
            .map(|(id, named)| (id, links.resolve(named)))
            .collect();
        let mut report = ResolveReport::default();
        let mut changed: FxHashSet<u32> = FxHashSet::default();
        for (id, res) in todo {
            let active = res.is_some();
            if let Ok(r) = self.nexthops.set_resolution(id, res) {
                if r.activity {
                    changed.insert(id.index);
                    if active {
                        report.activated += 1;
                    } else {
                        report.deactivated += 1;
                    }
                } else if r.entry {
                    report.moved += 1;
                }
            }
        }
        if !changed.is_empty() {
            self.v4.reresolve(&mut self.nexthops, &changed);
            self.v6.reresolve(&mut self.nexthops, &changed);
        }
        report
    }

    /// Changes a next hop in place (same index, version + 1, no FIB change) and resolves it
    /// again; publish [`Rib::nexthop_snapshot`] afterwards. The family of a gateway is not
    /// checked (a prefix may be reached through a gateway of the other family).
    pub fn modify_nexthop(&mut self, id: NhId, forward: Forward) -> Result<(), NhError> {
        self.nexthops.modify(id, forward)?;
        self.reresolve();
        Ok(())
    }

    /// The FIB value of `prefix` (0 = none).
    pub fn fib_value<K: RibFamily>(&self, prefix: &Prefix<K>) -> NextHop {
        K::family(self).fib_value(prefix)
    }

    /// Every route of every source for `prefix`, next hops as their sources named them.
    pub fn routes<K: RibFamily>(&self, prefix: &Prefix<K>) -> Vec<RibRoute> {
        K::family(self).routes(prefix, &self.nexthops)
    }

    /// Every route for `prefix` with its resolution, whether it is best and whether stale.
    pub fn route_details<K: RibFamily>(&self, prefix: &Prefix<K>) -> Vec<RouteDetail> {
        K::family(self).details(prefix, &self.nexthops, &self.epochs)
    }

    /// The full IPv4 FIB in canonical order.
    pub fn fib_routes_v4(&self) -> Vec<Route<u32>> {
        self.v4.fib_routes()
    }

    /// The full IPv6 FIB in canonical order.
    pub fn fib_routes_v6(&self) -> Vec<Route<u128>> {
        self.v6.fib_routes()
    }

    /// The full FIB of family `K` in canonical order.
    pub fn fib_routes<K: RibFamily>(&self) -> Vec<Route<K>> {
        K::family(self).fib_routes()
    }

    /// IPv4 FIB changes since the last drain, in order (`0` = remove the prefix).
    pub fn drain_fib_changes_v4(&mut self) -> Vec<(Prefix<u32>, NextHop)> {
        self.v4.drain_changes()
    }

    /// IPv6 FIB changes since the last drain, in order (`0` = remove the prefix).
    pub fn drain_fib_changes_v6(&mut self) -> Vec<(Prefix<u128>, NextHop)> {
        self.v6.drain_changes()
    }

    /// FIB changes of family `K` since the last drain.
    pub fn drain_fib_changes<K: RibFamily>(&mut self) -> Vec<(Prefix<K>, NextHop)> {
        K::parts(self, Source::Api).0.drain_changes()
    }

    /// Makes quarantined next-hop indices reusable (step 4 of the owner's cycle).
    pub fn release_quarantine(&mut self) -> usize {
        self.nexthops.release_quarantine()
    }

    /// Makes the first `mark` quarantined indices reusable (see
    /// [`NextHopTable::release_quarantine_upto`]).
    pub fn release_quarantine_upto(&mut self, mark: usize) -> usize {
        self.nexthops.release_quarantine_upto(mark)
    }

    /// The next-hop table for the forwarding path.
    pub fn nexthop_snapshot(&self) -> NhSnapshot {
        self.nexthops.snapshot()
    }

    /// Loads a whole table as routes of `source`: each route replaces the source's routes of
    /// its prefix (a prefix given twice: the later wins). nh64 values (`1..=64`) become
    /// [`Forward::Opaque`], gateway indices [`Forward::Gateway`] without interface (resolved
    /// like any gateway when resolution is on). Every next hop is checked and interned first,
    /// so an error leaves the RIB unchanged.
    pub fn load_table(&mut self, table: &Table, source: Source) -> Result<LoadReport, RibError> {
        self.load_table_with(table, source, |v, gw, _| match gw {
            Some(addr) => Forward::Gateway {
                addr,
                ifindex: None,
            },
            None => Forward::Opaque(v),
        })
    }

    /// As [`Rib::load_table`], with `forward(value, gateway, v4)` naming the next hop of
    /// each table value of each family (`gateway`: the table's gateway for that value, if
    /// it has one; nh64 values have none; `v4`: whether the value is of an IPv4 route). A
    /// next hop of the wrong family is still refused.
    pub fn load_table_with(
        &mut self,
        table: &Table,
        source: Source,
        mut forward: impl FnMut(NextHop, Option<IpAddr>, bool) -> Forward,
    ) -> Result<LoadReport, RibError> {
        let mut ids4: FxHashMap<NextHop, NhId> = FxHashMap::default();
        let mut ids6: FxHashMap<NextHop, NhId> = FxHashMap::default();
        let res = self
            .intern_table_nexthops::<u32>(
                table,
                table.v4.iter().map(|r| r.nexthop),
                &mut ids4,
                &mut forward,
            )
            .and_then(|()| {
                self.intern_table_nexthops::<u128>(
                    table,
                    table.v6.iter().map(|r| r.nexthop),
                    &mut ids6,
                    &mut forward,
                )
            });
        let stamp = self.epoch(source);
        let distance = self.distance(source);
        let report = match res {
            Ok(()) => LoadReport {
                v4: self.v4.load(
                    &mut self.nexthops,
                    &table.v4,
                    source,
                    distance,
                    stamp,
                    &ids4,
                ),
                v6: self.v6.load(
                    &mut self.nexthops,
                    &table.v6,
                    source,
                    distance,
                    stamp,
                    &ids6,
                ),
            },
            Err(e) => {
                for id in ids4.values().chain(ids6.values()) {
                    let _ = self.nexthops.release(*id);
                }
                return Err(e);
            }
        };
        for id in ids4.values().chain(ids6.values()) {
            let _ = self.nexthops.release(*id);
        }
        Ok(report)
    }

    fn intern_table_nexthops<K: RibFamily>(
        &mut self,
        table: &Table,
        values: impl Iterator<Item = NextHop>,
        ids: &mut FxHashMap<NextHop, NhId>,
        forward: &mut impl FnMut(NextHop, Option<IpAddr>, bool) -> Forward,
    ) -> Result<(), RibError> {
        let mut last = NO_ROUTE;
        for v in values {
            if v == last || ids.contains_key(&v) {
                continue;
            }
            last = v;
            let v4 = K::BITS == 32;
            let f = if (1..=64).contains(&v) {
                forward(v, None, v4)
            } else {
                match table.nexthops.gateway(v) {
                    Some(addr) if K::is_family(&addr) => forward(v, Some(addr), v4),
                    Some(_) => return Err(RibError::WrongFamily),
                    None => return Err(RibError::UnknownTableNextHop(v)),
                }
            };
            family_ok::<K>(&f)?;
            let (_, mut cx) = K::parts(self, Source::Table);
            let id = cx.intern(&f)?;
            ids.insert(v, id);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p4(s: &str) -> Prefix<u32> {
        let (a, l) = s.split_once('/').unwrap();
        Prefix::new(
            u32::from(a.parse::<std::net::Ipv4Addr>().unwrap()),
            l.parse().unwrap(),
        )
        .unwrap()
    }

    fn gw(s: &str) -> Forward {
        Forward::Gateway {
            addr: s.parse().unwrap(),
            ifindex: None,
        }
    }

    /// The tallies kept as routes come and go equal a count over the whole RIB, and so does
    /// the stale count when it takes its shortcut.
    fn assert_tallies(rib: &Rib) {
        fn family<K: Key>(f: &FamilyRib<K>) -> ([usize; Source::COUNT], usize) {
            let mut by = [0usize; Source::COUNT];
            for e in f.prefixes.values() {
                for r in &e.routes {
                    by[r.source.index()] += 1;
                }
            }
            (by, f.prefixes.values().filter(|e| !e.fib.is_none()).count())
        }
        for (f, (by, active)) in [("v4", family(&rib.v4)), ("v6", family(&rib.v6))] {
            let kept = if f == "v4" {
                (rib.v4.routes_by_source(), rib.v4.active_prefixes())
            } else {
                (rib.v6.routes_by_source(), rib.v6.active_prefixes())
            };
            assert_eq!(kept, (by, active), "{f}: kept against counted");
        }
        for s in Source::ALL {
            let e = rib.epoch(s);
            assert_eq!(
                rib.stale_routes(s),
                rib.v4.stale(s, e) + rib.v6.stale(s, e),
                "{s:?}"
            );
        }
    }

    fn fwd_of(rib: &Rib, index: NextHop) -> Forward {
        let id = rib.nexthops().id_of_index(index).unwrap();
        rib.nexthops().get(id).unwrap().forward.clone()
    }

    #[test]
    fn best_path_by_distance_then_metric() {
        let mut rib = Rib::new();
        let p = p4("10.0.0.0/8");
        rib.add(p, &RibRoute::new(Source::Fpm, gw("192.0.2.1")))
            .unwrap();
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), gw("192.0.2.1"));
        rib.add(p, &RibRoute::new(Source::Kernel, gw("192.0.2.2")))
            .unwrap();
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), gw("192.0.2.2"));
        rib.add(
            p,
            &RibRoute::new(Source::Kernel, gw("192.0.2.3")).with_metric(5),
        )
        .unwrap();
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), gw("192.0.2.2"));
        // Overriding the distance of the FPM route makes it win.
        rib.add(
            p,
            &RibRoute::new(Source::Fpm, gw("192.0.2.1")).with_distance(5),
        )
        .unwrap();
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), gw("192.0.2.1"));
        assert_eq!(rib.routes(&p).len(), 3);
        let changes = rib.drain_fib_changes_v4();
        assert_eq!(changes.len(), 3);
        assert_eq!(changes.last(), Some(&(p, rib.fib_value(&p))));
        assert_eq!(rib.withdraw(p, Source::Fpm), 1);
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), gw("192.0.2.2"));
        assert_eq!(rib.withdraw(p, Source::Kernel), 2);
        assert_eq!(rib.fib_value(&p), NO_ROUTE);
        assert!(rib.v4().is_empty());
        assert_eq!(rib.drain_fib_changes_v4().last(), Some(&(p, NO_ROUTE)));
        assert_eq!(rib.nexthops().live(), 0);
    }

    #[test]
    fn a_source_distance_changed_live_moves_best_paths() {
        let mut rib = Rib::new();
        let (a, b) = (p4("10.0.0.0/8"), p4("11.0.0.0/8"));
        for p in [a, b] {
            rib.add(
                p,
                &RibRoute::new(Source::Fpm, gw("192.0.2.1")).with_distance(20),
            )
            .unwrap();
            rib.add(
                p,
                &RibRoute::new(Source::Kernel, gw("192.0.2.2")).with_distance(10),
            )
            .unwrap();
        }
        assert_eq!(fwd_of(&rib, rib.fib_value(&a)), gw("192.0.2.2"));
        rib.drain_fib_changes_v4();
        // FPM below the kernel: both prefixes move, both routes of FPM are counted.
        assert_eq!(rib.set_source_distance(Source::Fpm, 5), 2);
        assert_eq!(fwd_of(&rib, rib.fib_value(&a)), gw("192.0.2.1"));
        assert_eq!(fwd_of(&rib, rib.fib_value(&b)), gw("192.0.2.1"));
        assert_eq!(rib.drain_fib_changes_v4().len(), 2);
        assert_eq!(rib.distance(Source::Fpm), 5);
        // The same distance again changes nothing.
        assert_eq!(rib.set_source_distance(Source::Fpm, 5), 0);
        assert!(rib.drain_fib_changes_v4().is_empty());
        assert_tallies(&rib);
    }

    #[test]
    fn ecmp_groups_are_shared_between_prefixes() {
        let mut rib = Rib::new();
        let (a, b) = (p4("10.0.0.0/8"), p4("11.0.0.0/8"));
        let routes = [
            RibRoute::new(Source::Fpm, gw("192.0.2.1")),
            RibRoute::new(Source::Fpm, gw("192.0.2.2")),
        ];
        rib.replace(a, Source::Fpm, &routes).unwrap();
        let rev = [routes[1].clone(), routes[0].clone()];
        rib.replace(b, Source::Fpm, &rev).unwrap();
        let g = rib.fib_value(&a);
        assert_eq!(rib.fib_value(&b), g);
        let Forward::Group { members, .. } = fwd_of(&rib, g) else {
            panic!("not a group");
        };
        assert_eq!(members.len(), 2);
        // Two singles and one group.
        assert_eq!(rib.nexthops().live(), 3);
        let gid = rib.nexthops().id_of_index(g).unwrap();
        assert_eq!(rib.nexthops().refcount(gid), Some(2));
        // One member withdrawn from one prefix: that prefix leaves the group.
        assert!(rib.withdraw_route(a, Source::Fpm, &gw("192.0.2.2")));
        assert_eq!(fwd_of(&rib, rib.fib_value(&a)), gw("192.0.2.1"));
        assert_eq!(rib.fib_value(&b), g);
        // A session reset removes every route via the gateway.
        assert_eq!(rib.withdraw_nexthop(Source::Fpm, &gw("192.0.2.1")), 2);
        assert_eq!(rib.fib_value(&a), NO_ROUTE);
        assert_eq!(fwd_of(&rib, rib.fib_value(&b)), gw("192.0.2.2"));
        assert_eq!(rib.withdraw_nexthop(Source::Static, &gw("192.0.2.2")), 0);
    }

    #[test]
    fn same_source_and_next_hop_is_one_route() {
        let mut rib = Rib::new();
        let p = p4("10.0.0.0/8");
        rib.add(p, &RibRoute::new(Source::Static, Forward::Blackhole))
            .unwrap();
        rib.add(
            p,
            &RibRoute::new(Source::Static, Forward::Blackhole).with_metric(3),
        )
        .unwrap();
        assert_eq!(rib.routes(&p).len(), 1);
        assert_eq!(rib.routes(&p)[0].metric, 3);
        // A metric change does not change the FIB value: one change only.
        assert_eq!(rib.drain_fib_changes_v4().len(), 1);
        let id = rib.nexthops().lookup(&Forward::Blackhole).unwrap();
        assert_eq!(rib.nexthops().refcount(id), Some(2));
    }

    #[test]
    fn errors_leave_the_rib_unchanged() {
        let mut rib = Rib::new();
        let p = p4("10.0.0.0/8");
        assert_eq!(
            rib.add(p, &RibRoute::new(Source::Static, gw("2001:db8::1"))),
            Err(RibError::WrongFamily)
        );
        let group = Forward::group(vec![1, 2]);
        assert_eq!(
            rib.add(p, &RibRoute::new(Source::Static, group)),
            Err(RibError::GroupNotAllowed)
        );
        assert_eq!(
            rib.replace(
                p,
                Source::Fpm,
                &[
                    RibRoute::new(Source::Fpm, Forward::Local),
                    RibRoute::new(Source::Static, Forward::Local)
                ]
            ),
            Err(RibError::SourceMismatch {
                expected: Source::Fpm,
                got: Source::Static
            })
        );
        let mut small = Rib::with_max_nexthops(1);
        small
            .add(p, &RibRoute::new(Source::Static, Forward::Local))
            .unwrap();
        let q = p4("11.0.0.0/8");
        assert_eq!(
            small.replace(
                q,
                Source::Static,
                &[
                    RibRoute::new(Source::Static, Forward::Local),
                    RibRoute::new(Source::Static, Forward::Blackhole)
                ]
            ),
            Err(RibError::NextHop(NhError::Exhausted { max: 1 }))
        );
        assert_eq!(small.fib_value(&q), NO_ROUTE);
        let id = small.nexthops().lookup(&Forward::Local).unwrap();
        assert_eq!(small.nexthops().refcount(id), Some(2));
        assert!(rib.v4().is_empty());
        assert_eq!(rib.nexthops().live(), 0);
        assert!(rib.drain_fib_changes_v4().is_empty());
    }

    #[test]
    fn exhausted_group_falls_back_to_one_member() {
        let mut rib = Rib::with_max_nexthops(2);
        let p = p4("10.0.0.0/8");
        rib.replace(
            p,
            Source::Static,
            &[
                RibRoute::new(Source::Static, Forward::Local),
                RibRoute::new(Source::Static, Forward::Blackhole),
            ],
        )
        .unwrap();
        assert_eq!(rib.fib_value(&p), 1);
        assert_eq!(rib.v4().degraded_groups(), 1);
        rib.withdraw(p, Source::Static);
        assert_eq!(rib.nexthops().live(), 0);
    }

    #[test]
    fn modify_keeps_the_index_and_the_fib() {
        let mut rib = Rib::new();
        let p = p4("10.0.0.0/8");
        rib.add(p, &RibRoute::new(Source::Fpm, gw("192.0.2.1")))
            .unwrap();
        rib.drain_fib_changes_v4();
        let id = rib.nexthops().lookup(&gw("192.0.2.1")).unwrap();
        let link_down = Forward::Gateway {
            addr: "192.0.2.1".parse().unwrap(),
            ifindex: Some(4),
        };
        rib.modify_nexthop(id, link_down.clone()).unwrap();
        assert!(rib.drain_fib_changes_v4().is_empty());
        assert_eq!(rib.fib_value(&p), id.index);
        let snap = rib.nexthop_snapshot();
        let e = snap.get(id.index).unwrap();
        assert_eq!((e.gen, e.version, &e.forward), (0, 1, &link_down));
        assert_eq!(rib.routes(&p)[0].nexthop, link_down);
        assert_tallies(&rib);
    }

    #[test]
    fn load_table_maps_nh64_and_gateways() {
        let mut t = Table::new();
        let gw4 = t.nexthops.intern("192.0.2.1".parse().unwrap()).unwrap();
        let gw6 = t.nexthops.intern("2001:db8::1".parse().unwrap()).unwrap();
        let p = p4("10.0.0.0/8");
        let q = p4("11.0.0.0/8");
        t.v4.push(Route::new(p, 7));
        t.v4.push(Route::new(q, gw4));
        t.v4.push(Route::new(p, gw4)); // the later route wins
        let p6 = Prefix::<u128>::new(0x2001_0db8 << 96, 32).unwrap();
        t.v6.push(Route::new(p6, gw6));
        let mut rib = Rib::new();
        rib.add(q, &RibRoute::new(Source::Static, Forward::Blackhole))
            .unwrap();
        let r = rib.load_table(&t, Source::Table).unwrap();
        assert_eq!(r, LoadReport { v4: 3, v6: 1 });
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), gw("192.0.2.1"));
        assert_eq!(fwd_of(&rib, rib.fib_value(&q)), Forward::Blackhole);
        assert_eq!(fwd_of(&rib, rib.fib_value(&p6)), gw("2001:db8::1"));
        assert_eq!(rib.routes(&q).len(), 2);
        // Opaque(7) was used, then replaced: quarantined.
        assert_eq!(rib.nexthops().lookup(&Forward::Opaque(7)), None);
        assert_eq!(rib.nexthops().quarantined(), 1);
        assert_eq!(rib.fib_routes_v4().len(), 2);
        assert_eq!(rib.fib_routes_v6().len(), 1);
        assert_tallies(&rib);

        // A bad table changes nothing.
        let mut bad = t.clone();
        bad.v4.push(Route::new(p, gw6));
        let before = rib.fib_routes_v4();
        let live = rib.nexthops().live();
        assert_eq!(
            rib.load_table(&bad, Source::Fpm),
            Err(RibError::WrongFamily)
        );
        bad.v4.pop();
        bad.v6.push(Route::new(p6, 999));
        assert_eq!(
            rib.load_table(&bad, Source::Fpm),
            Err(RibError::UnknownTableNextHop(999))
        );
        assert_eq!(rib.fib_routes_v4(), before);
        assert_eq!(rib.nexthops().live(), live);
    }

    fn link(up: bool, v4: &[&str]) -> LinkState {
        LinkState {
            up,
            v4: v4.iter().map(|s| p4(s)).collect(),
            v6: Vec::new(),
        }
    }

    #[test]
    fn gateways_resolve_through_up_links_and_fall_back_when_one_goes_down() {
        let mut rib = Rib::new();
        rib.enable_resolution();
        let p = p4("10.0.0.0/8");
        // Two routes: the better one through a gateway no link holds yet.
        rib.add(p, &RibRoute::new(Source::Static, gw("192.0.2.1")))
            .unwrap();
        rib.add(p, &RibRoute::new(Source::Fpm, gw("198.51.100.1")))
            .unwrap();
        assert_eq!(rib.fib_value(&p), NO_ROUTE, "nothing resolves");
        assert_eq!(rib.v4().unresolved(), 2);
        let d = rib.route_details(&p);
        assert_eq!(d.len(), 2, "unresolved routes are shown too");
        assert!(d.iter().all(|r| r.resolved.is_none() && !r.best));
        // Port 2 holds 198.51.100.0/24: the FPM route becomes the FIB value, resolved there.
        let r = rib.set_link(2, link(true, &["198.51.100.0/24"]));
        assert_eq!(r.activated, 1);
        let via2 = Forward::Gateway {
            addr: "198.51.100.1".parse().unwrap(),
            ifindex: Some(2),
        };
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), via2);
        assert_eq!(rib.v4().unresolved(), 1);
        // Port 1 comes up with 192.0.2.0/24: the static route wins.
        rib.set_link(1, link(true, &["192.0.2.0/24"]));
        let via1 = Forward::Gateway {
            addr: "192.0.2.1".parse().unwrap(),
            ifindex: Some(1),
        };
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), via1);
        assert_eq!(rib.v4().unresolved(), 0);
        let d = rib.route_details(&p);
        assert_eq!(d.iter().filter(|r| r.best).count(), 1);
        // Port 1 goes down: back to the FPM route; its route stays, unresolved.
        let r = rib.set_link(1, link(false, &["192.0.2.0/24"]));
        assert_eq!(r.deactivated, 1);
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), via2);
        assert_eq!(rib.routes(&p).len(), 2);
        assert_eq!(rib.v4().unresolved(), 1);
        // A next hop naming its port follows that port's state; connected routes too.
        let q = p4("192.0.2.0/24");
        rib.add(
            q,
            &RibRoute::new(Source::Connected, Forward::Connected { ifindex: 1 }),
        )
        .unwrap();
        assert_eq!(rib.fib_value(&q), NO_ROUTE);
        rib.set_link(1, link(true, &["192.0.2.0/24"]));
        assert_eq!(
            fwd_of(&rib, rib.fib_value(&q)),
            Forward::Connected { ifindex: 1 }
        );
        rib.remove_link(1);
        assert_eq!(rib.fib_value(&q), NO_ROUTE);
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), via2);
        assert_tallies(&rib);
    }

    #[test]
    fn a_gateway_that_moves_to_another_port_changes_in_place() {
        let mut rib = Rib::new();
        rib.set_link(1, link(true, &["192.0.2.0/24"]));
        let p = p4("10.0.0.0/8");
        rib.add(p, &RibRoute::new(Source::Static, gw("192.0.2.1")))
            .unwrap();
        let v = rib.fib_value(&p);
        rib.drain_fib_changes_v4();
        // Port 2 gets a longer subnet holding the gateway: same index, new version.
        let r = rib.set_link(2, link(true, &["192.0.2.0/25"]));
        assert_eq!((r.activated, r.deactivated, r.moved), (0, 0, 1));
        assert_eq!(rib.fib_value(&p), v);
        assert!(rib.drain_fib_changes_v4().is_empty());
        let e = rib.nexthop_snapshot().get(v).unwrap().clone();
        assert_eq!(
            e.forward,
            Forward::Gateway {
                addr: "192.0.2.1".parse().unwrap(),
                ifindex: Some(2)
            }
        );
        assert_eq!(e.version, 2);
    }

    #[test]
    fn weighted_routes_make_weighted_groups() {
        let mut rib = Rib::new();
        let (a, b) = (p4("10.0.0.0/8"), p4("11.0.0.0/8"));
        let r = |g: &str, w| RibRoute::new(Source::Fpm, gw(g)).with_weight(w);
        rib.replace(a, Source::Fpm, &[r("192.0.2.1", 3), r("192.0.2.2", 1)])
            .unwrap();
        let Forward::Group { members, weights } = fwd_of(&rib, rib.fib_value(&a)) else {
            panic!("not a group");
        };
        assert_eq!(members.len(), 2);
        assert_eq!(&*weights, &[3, 1]);
        // Weights 6:2 are the same group as 3:1; 1:1 is another one.
        rib.replace(b, Source::Fpm, &[r("192.0.2.2", 2), r("192.0.2.1", 6)])
            .unwrap();
        assert_eq!(rib.fib_value(&b), rib.fib_value(&a));
        rib.replace(b, Source::Fpm, &[r("192.0.2.2", 1), r("192.0.2.1", 1)])
            .unwrap();
        assert_ne!(rib.fib_value(&b), rib.fib_value(&a));
        let Forward::Group { weights, .. } = fwd_of(&rib, rib.fib_value(&b)) else {
            panic!("not a group");
        };
        assert_eq!(&*weights, &[1, 1]);
    }

    #[test]
    fn epochs_mark_stale_routes_and_sweep_removes_them() {
        let mut rib = Rib::new();
        let (a, b, c) = (p4("10.0.0.0/8"), p4("11.0.0.0/8"), p4("12.0.0.0/8"));
        for p in [a, b, c] {
            rib.replace(
                p,
                Source::Fpm,
                &[RibRoute::new(Source::Fpm, gw("192.0.2.1"))],
            )
            .unwrap();
        }
        rib.add(a, &RibRoute::new(Source::Static, Forward::Blackhole))
            .unwrap();
        rib.drain_fib_changes_v4();
        assert_eq!(rib.stale_routes(Source::Fpm), 0);
        // The source reconnects and replays a and b (b unchanged, a through another gateway).
        rib.begin_epoch(Source::Fpm);
        assert_eq!(rib.stale_routes(Source::Fpm), 3);
        rib.replace(
            b,
            Source::Fpm,
            &[RibRoute::new(Source::Fpm, gw("192.0.2.1"))],
        )
        .unwrap();
        rib.replace(
            a,
            Source::Fpm,
            &[RibRoute::new(Source::Fpm, gw("192.0.2.2"))],
        )
        .unwrap();
        assert!(
            rib.drain_fib_changes_v4().is_empty(),
            "an unchanged route changes no FIB entry (a's best is static)"
        );
        assert_eq!(rib.stale_routes(Source::Fpm), 1);
        assert_tallies(&rib);
        assert!(rib.route_details(&c)[0].stale);
        assert!(!rib.route_details(&b)[0].stale);
        // Until the sweep, c still forwards.
        assert_ne!(rib.fib_value(&c), NO_ROUTE);
        assert_eq!(rib.sweep(Source::Fpm), 1);
        assert_eq!(rib.fib_value(&c), NO_ROUTE);
        assert_eq!(rib.drain_fib_changes_v4(), vec![(c, NO_ROUTE)]);
        assert_eq!(rib.routes(&a).len(), 2, "the static route is untouched");
        assert_tallies(&rib);
    }

    #[test]
    fn routes_by_metric_and_next_hop_objects() {
        let mut rib = Rib::new();
        let p = p4("10.0.0.0/8");
        let k = |g: &str, m| RibRoute::new(Source::Kernel, gw(g)).with_metric(m);
        rib.replace_metric(p, Source::Kernel, 100, &[k("192.0.2.1", 100)])
            .unwrap();
        rib.replace_metric(p, Source::Kernel, 50, &[k("192.0.2.2", 50)])
            .unwrap();
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), gw("192.0.2.2"));
        // Replacing metric 50 leaves metric 100 alone.
        rib.replace_metric(p, Source::Kernel, 50, &[k("192.0.2.3", 50)])
            .unwrap();
        assert_eq!(rib.routes(&p).len(), 2);
        assert_eq!(rib.withdraw_metric(p, Source::Kernel, 50), 1);
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), gw("192.0.2.1"));
        // One next hop at two metrics is two routes: the lower one forwards, and withdrawing
        // it leaves the other (the kernel keeps both).
        rib.replace_metric(p, Source::Kernel, 20, &[k("192.0.2.1", 20)])
            .unwrap();
        assert_eq!(rib.routes(&p).len(), 2);
        assert_eq!(rib.withdraw_metric(p, Source::Kernel, 20), 1);
        assert_eq!(rib.routes(&p), vec![k("192.0.2.1", 100)]);
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), gw("192.0.2.1"));
        assert_tallies(&rib);
        // Routes through next-hop object 7 are found again.
        let q = p4("11.0.0.0/8");
        rib.replace(
            q,
            Source::Fpm,
            &[RibRoute::new(Source::Fpm, gw("192.0.2.9")).with_nhid(7)],
        )
        .unwrap();
        let ids: FxHashSet<u32> = [7].into_iter().collect();
        assert_eq!(rib.v4().nhid_users(Source::Fpm, &ids), vec![q]);
        assert!(rib.v4().nhid_users(Source::Kernel, &ids).is_empty());
        assert_eq!(rib.withdraw_source(Source::Kernel), 1);
        assert_eq!(rib.v4().routes_by_source()[Source::Fpm.index()], 1);
        assert_tallies(&rib);
    }

    #[test]
    fn sources_by_name() {
        for s in Source::ALL {
            assert_eq!(s.as_str().parse::<Source>(), Ok(s));
        }
        assert_eq!("rip".parse::<Source>(), Err(UnknownSource));
        assert!(Source::Connected.default_distance() < Source::Static.default_distance());
        assert!(Source::Kernel.default_distance() < Source::Fpm.default_distance());
    }
}
