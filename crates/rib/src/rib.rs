//! Routes from every source, best-path selection, ECMP groups and the FIB change log.
//!
//! Per prefix the RIB keeps the routes of every [`Source`], at most one per (source, next hop).
//! The best routes are those of lowest administrative distance, then lowest metric; one best
//! next hop is the prefix's FIB value, several distinct ones form an ECMP group, interned in
//! the shared [`NextHopTable`] so prefixes with the same set share one group index.
//!
//! ```text
//!   10.0.0.0/8   static d1 m0 via 192.0.2.1   ─┐ best: d1 m0, two next hops
//!                static d1 m0 via 192.0.2.2   ─┤   → group {1, 2} = index 3
//!                bgp   d20 m0 via 198.51.100.1 │ (not best)
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
//! The owner's cycle, so that no published FIB ever points at a recycled index:
//!
//! 1. apply updates to the [`Rib`];
//! 2. publish [`Rib::nexthop_snapshot`] (new indices exist before any FIB uses them);
//! 3. drain [`Rib::drain_fib_changes_v4`] / `_v6`, apply them to the FIB and publish it;
//! 4. once no reader holds an older FIB, [`Rib::release_quarantine`].

use std::collections::hash_map::Entry as MapEntry;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use vfsr_fib::nexthop::{Forward, NhId, NhSnapshot};
use vfsr_lpm::{Key, NextHop, Prefix, Route, NO_ROUTE};
use vfsr_table::Table;

use crate::nexthop::{NextHopTable, NhError};

/// Where a route comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// A directly connected network (distance 0).
    Connected,
    /// Configured by the operator (distance 1).
    Static,
    /// Learned from the host kernel's table (distance 10: trusted, but below what the
    /// operator configured here).
    Kernel,
    /// Loaded from a table file or a benchmark table (distance 15, like an imported table).
    Table,
    /// eBGP (distance 20).
    Bgp,
    /// OSPF (distance 110).
    Ospf,
    /// Pushed through the management API (distance 5: an operator's action, below static).
    Api,
}

impl Source {
    /// Every source.
    pub const ALL: [Source; 7] = [
        Source::Connected,
        Source::Static,
        Source::Kernel,
        Source::Table,
        Source::Bgp,
        Source::Ospf,
        Source::Api,
    ];

    /// The administrative distance a route of this source gets unless told otherwise.
    pub fn default_distance(self) -> u8 {
        match self {
            Source::Connected => 0,
            Source::Static => 1,
            Source::Api => 5,
            Source::Kernel => 10,
            Source::Table => 15,
            Source::Bgp => 20,
            Source::Ospf => 110,
        }
    }

    /// The lower-case name (`static`, `bgp`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Connected => "connected",
            Source::Static => "static",
            Source::Kernel => "kernel",
            Source::Table => "table",
            Source::Bgp => "bgp",
            Source::Ospf => "ospf",
            Source::Api => "api",
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
    /// A single next hop (not a group).
    pub nexthop: Forward,
}

impl RibRoute {
    /// A route with the source's default distance and metric 0.
    pub fn new(source: Source, nexthop: Forward) -> Self {
        RibRoute {
            source,
            distance: source.default_distance(),
            metric: 0,
            nexthop,
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
    metric: u32,
    nh: NhId,
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

    /// How often an ECMP group could not be interned (index space exhausted) and the prefix
    /// fell back to its lowest-index best next hop.
    pub fn degraded_groups(&self) -> u64 {
        self.degraded
    }

    /// The FIB value of `prefix`: a next-hop or group index, [`NO_ROUTE`] without routes.
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

    fn routes(&self, prefix: &Prefix<K>, nh: &NextHopTable) -> Vec<RibRoute> {
        let Some(e) = self.prefixes.get(prefix) else {
            return Vec::new();
        };
        e.routes
            .iter()
            .filter_map(|r| {
                Some(RibRoute {
                    source: r.source,
                    distance: r.distance,
                    metric: r.metric,
                    nexthop: nh.get(r.nh)?.forward.clone(),
                })
            })
            .collect()
    }

    fn add(
        &mut self,
        nh: &mut NextHopTable,
        prefix: Prefix<K>,
        route: &RibRoute,
    ) -> Result<(), RibError> {
        family_ok::<K>(&route.nexthop)?;
        let id = nh.intern(&route.nexthop)?;
        let e = self.prefixes.entry(prefix).or_default();
        let same = e.routes.iter_mut().find(|r| {
            r.source == route.source
                && (r.nh == id || nh.get(r.nh).map(|x| &x.forward) == Some(&route.nexthop))
        });
        let stored = Stored {
            source: route.source,
            distance: route.distance,
            metric: route.metric,
            nh: id,
        };
        match same {
            Some(r) => {
                let old = std::mem::replace(r, stored);
                let _ = nh.release(old.nh);
            }
            None => e.routes.push(stored),
        }
        recompute(prefix, e, nh, &mut self.changes, &mut self.degraded);
        Ok(())
    }

    /// Interns the next hops of `routes` (one reference each); on error releases what it took.
    fn intern_routes(
        nh: &mut NextHopTable,
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
            match nh.intern(&r.nexthop) {
                Ok(id) => out.push(Stored {
                    source,
                    distance: r.distance,
                    metric: r.metric,
                    nh: id,
                }),
                Err(err) => {
                    for s in out {
                        let _ = nh.release(s.nh);
                    }
                    return Err(err.into());
                }
            }
        }
        Ok(out)
    }

    /// The routes of `source` for `prefix` become `new` (each holding a reference already).
    fn replace_stored(
        &mut self,
        nh: &mut NextHopTable,
        prefix: Prefix<K>,
        source: Source,
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
        e.routes.retain(|r| {
            if r.source == source {
                let _ = nh.release(r.nh);
                false
            } else {
                true
            }
        });
        for s in new {
            match e
                .routes
                .iter_mut()
                .find(|r| r.source == source && r.nh == s.nh)
            {
                Some(r) => {
                    // The same next hop twice: the later route wins, one reference is enough.
                    *r = *s;
                    let _ = nh.release(s.nh);
                }
                None => e.routes.push(*s),
            }
        }
        recompute(prefix, e, nh, &mut self.changes, &mut self.degraded);
        if e.routes.is_empty() {
            self.prefixes.remove(&prefix);
        }
    }

    fn replace(
        &mut self,
        nh: &mut NextHopTable,
        prefix: Prefix<K>,
        source: Source,
        routes: &[RibRoute],
    ) -> Result<(), RibError> {
        let new = Self::intern_routes(nh, source, routes)?;
        self.replace_stored(nh, prefix, source, &new);
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
        let mut gone: SmallVec<[NhId; 2]> = SmallVec::new();
        e.routes.retain(|r| {
            if pred(r, nh) {
                gone.push(r.nh);
                false
            } else {
                true
            }
        });
        for id in gone {
            let _ = nh.release(id);
        }
        let n = before.saturating_sub(e.routes.len());
        if n > 0 {
            recompute(prefix, e, nh, &mut self.changes, &mut self.degraded);
            if e.routes.is_empty() {
                self.prefixes.remove(&prefix);
            }
        }
        n
    }

    fn withdraw_nexthop(&mut self, nh: &mut NextHopTable, source: Source, ids: &[u32]) -> usize {
        let FamilyRib {
            prefixes,
            changes,
            degraded,
        } = self;
        let mut count = 0usize;
        prefixes.retain(|p, e| {
            let before = e.routes.len();
            e.routes.retain(|r| {
                if r.source == source && ids.contains(&r.nh.index) {
                    let _ = nh.release(r.nh);
                    false
                } else {
                    true
                }
            });
            let n = before.saturating_sub(e.routes.len());
            if n > 0 {
                count = count.saturating_add(n);
                recompute(*p, e, nh, changes, degraded);
            }
            !e.routes.is_empty()
        });
        count
    }

    /// Bulk load: every route of `routes` replaces `source`'s routes of its prefix, in order.
    /// `ids` maps each table next hop to an interned id (its reference is the caller's).
    fn load(
        &mut self,
        nh: &mut NextHopTable,
        routes: &[Route<K>],
        source: Source,
        ids: &FxHashMap<NextHop, NhId>,
    ) -> usize {
        let distance = source.default_distance();
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
                metric: 0,
                nh: id,
            };
            n = n.saturating_add(1);
            match self.prefixes.entry(r.prefix) {
                MapEntry::Vacant(v) => {
                    // The common case: a new prefix with one route is its own best path.
                    let _ = nh.retain(id);
                    let mut routes = SmallVec::new();
                    routes.push(stored);
                    v.insert(Entry { routes, fib: id });
                    self.changes.push((r.prefix, id.index));
                }
                MapEntry::Occupied(_) => self.replace_stored(nh, r.prefix, source, &[stored]),
            }
        }
        n
    }
}

/// Recomputes the FIB value of one prefix from its routes; logs it when it changed. The new
/// value gets one reference, the old one loses its.
fn recompute<K: Key>(
    prefix: Prefix<K>,
    e: &mut Entry,
    nh: &mut NextHopTable,
    changes: &mut Vec<(Prefix<K>, NextHop)>,
    degraded: &mut u64,
) {
    let new = match e.routes.iter().map(|r| (r.distance, r.metric)).min() {
        None => NhId::NONE,
        Some(best) => {
            let mut members: SmallVec<[NhId; 4]> = e
                .routes
                .iter()
                .filter(|r| (r.distance, r.metric) == best)
                .map(|r| r.nh)
                .collect();
            members.sort_unstable();
            members.dedup();
            // (value, whether a reference on it was taken already)
            let (value, taken) = match members.as_slice() {
                [one] => (*one, false),
                _ => match nh.intern_group(&members) {
                    Ok(g) => (g, true),
                    Err(_) => {
                        *degraded = degraded.saturating_add(1);
                        (members.first().copied().unwrap_or(NhId::NONE), false)
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
    e.fib = new;
    changes.push((prefix, new.index));
}

/// The address families a [`Rib`] holds: `u32` (IPv4) and `u128` (IPv6).
pub trait RibFamily: Key {
    /// This family's part of the RIB.
    fn family(rib: &Rib) -> &FamilyRib<Self>;
    /// This family's part and the shared next-hop table.
    fn family_mut(rib: &mut Rib) -> (&mut FamilyRib<Self>, &mut NextHopTable);
    /// Whether `addr` is of this family.
    fn is_family(addr: &IpAddr) -> bool;
}

impl RibFamily for u32 {
    fn family(rib: &Rib) -> &FamilyRib<u32> {
        &rib.v4
    }
    fn family_mut(rib: &mut Rib) -> (&mut FamilyRib<u32>, &mut NextHopTable) {
        (&mut rib.v4, &mut rib.nexthops)
    }
    fn is_family(addr: &IpAddr) -> bool {
        addr.is_ipv4()
    }
}

impl RibFamily for u128 {
    fn family(rib: &Rib) -> &FamilyRib<u128> {
        &rib.v6
    }
    fn family_mut(rib: &mut Rib) -> (&mut FamilyRib<u128>, &mut NextHopTable) {
        (&mut rib.v6, &mut rib.nexthops)
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

/// The RIB of both families with their shared next-hop table.
#[derive(Clone, Debug, Default)]
pub struct Rib {
    v4: FamilyRib<u32>,
    v6: FamilyRib<u128>,
    nexthops: NextHopTable,
}

impl Rib {
    /// An empty RIB with next-hop indices `1..=65535`.
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

    /// Adds one route, or replaces the route of the same source and next hop.
    pub fn add<K: RibFamily>(
        &mut self,
        prefix: Prefix<K>,
        route: &RibRoute,
    ) -> Result<(), RibError> {
        let (f, nh) = K::family_mut(self);
        f.add(nh, prefix, route)
    }

    /// Announce-or-replace: `source`'s routes for `prefix` become exactly `routes` (each of
    /// which must be of `source`; none withdraws).
    pub fn replace<K: RibFamily>(
        &mut self,
        prefix: Prefix<K>,
        source: Source,
        routes: &[RibRoute],
    ) -> Result<(), RibError> {
        let (f, nh) = K::family_mut(self);
        f.replace(nh, prefix, source, routes)
    }

    /// Withdraws every route of `source` for `prefix`; returns how many.
    pub fn withdraw<K: RibFamily>(&mut self, prefix: Prefix<K>, source: Source) -> usize {
        let (f, nh) = K::family_mut(self);
        f.withdraw_where(nh, prefix, |r, _| r.source == source)
    }

    /// Withdraws the route of `source` via `nexthop` for `prefix`; returns whether it existed.
    pub fn withdraw_route<K: RibFamily>(
        &mut self,
        prefix: Prefix<K>,
        source: Source,
        nexthop: &Forward,
    ) -> bool {
        let (f, nh) = K::family_mut(self);
        f.withdraw_where(nh, prefix, |r, nh| {
            r.source == source && nh.get(r.nh).map(|e| &e.forward) == Some(nexthop)
        }) > 0
    }

    /// Withdraws every route of `source` via `nexthop`, in both families (a session reset);
    /// returns how many. Scans the whole RIB.
    pub fn withdraw_nexthop(&mut self, source: Source, nexthop: &Forward) -> usize {
        let ids: Vec<u32> = self
            .nexthops
            .iter()
            .filter(|(_, e, _)| &e.forward == nexthop && !e.forward.is_group())
            .map(|(id, _, _)| id.index)
            .collect();
        if ids.is_empty() {
            return 0;
        }
        let a = self.v4.withdraw_nexthop(&mut self.nexthops, source, &ids);
        let b = self.v6.withdraw_nexthop(&mut self.nexthops, source, &ids);
        a.saturating_add(b)
    }

    /// Changes a next hop in place (link down, gateway moved): same index, version + 1, no
    /// FIB change; publish [`Rib::nexthop_snapshot`] afterwards. The family of a gateway is
    /// not checked (a prefix may be reached through a gateway of the other family).
    pub fn modify_nexthop(&mut self, id: NhId, forward: Forward) -> Result<(), NhError> {
        self.nexthops.modify(id, forward)
    }

    /// The FIB value of `prefix` (0 = none).
    pub fn fib_value<K: RibFamily>(&self, prefix: &Prefix<K>) -> NextHop {
        K::family(self).fib_value(prefix)
    }

    /// Every route of every source for `prefix`, next hops resolved.
    pub fn routes<K: RibFamily>(&self, prefix: &Prefix<K>) -> Vec<RibRoute> {
        K::family(self).routes(prefix, &self.nexthops)
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
        K::family_mut(self).0.drain_changes()
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
    /// [`Forward::Opaque`], gateway indices [`Forward::Gateway`] without interface. Every
    /// next hop is checked and interned first, so an error leaves the RIB unchanged.
    pub fn load_table(&mut self, table: &Table, source: Source) -> Result<LoadReport, RibError> {
        let mut ids4: FxHashMap<NextHop, NhId> = FxHashMap::default();
        let mut ids6: FxHashMap<NextHop, NhId> = FxHashMap::default();
        let res = self
            .intern_table_nexthops::<u32>(table, table.v4.iter().map(|r| r.nexthop), &mut ids4)
            .and_then(|()| {
                self.intern_table_nexthops::<u128>(
                    table,
                    table.v6.iter().map(|r| r.nexthop),
                    &mut ids6,
                )
            });
        let report = match res {
            Ok(()) => LoadReport {
                v4: self.v4.load(&mut self.nexthops, &table.v4, source, &ids4),
                v6: self.v6.load(&mut self.nexthops, &table.v6, source, &ids6),
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
    ) -> Result<(), RibError> {
        let mut last = NO_ROUTE;
        for v in values {
            if v == last || ids.contains_key(&v) {
                continue;
            }
            last = v;
            let forward = if (1..=64).contains(&v) {
                Forward::Opaque(v)
            } else {
                match table.nexthops.gateway(v) {
                    Some(addr) if K::is_family(&addr) => Forward::Gateway {
                        addr,
                        ifindex: None,
                    },
                    Some(_) => return Err(RibError::WrongFamily),
                    None => return Err(RibError::UnknownTableNextHop(v)),
                }
            };
            let id = self.nexthops.intern(&forward)?;
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

    fn fwd_of(rib: &Rib, index: NextHop) -> Forward {
        let id = rib.nexthops().id_of_index(index).unwrap();
        rib.nexthops().get(id).unwrap().forward.clone()
    }

    #[test]
    fn best_path_by_distance_then_metric() {
        let mut rib = Rib::new();
        let p = p4("10.0.0.0/8");
        rib.add(p, &RibRoute::new(Source::Ospf, gw("192.0.2.1")))
            .unwrap();
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), gw("192.0.2.1"));
        rib.add(p, &RibRoute::new(Source::Bgp, gw("192.0.2.2")))
            .unwrap();
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), gw("192.0.2.2"));
        rib.add(
            p,
            &RibRoute::new(Source::Bgp, gw("192.0.2.3")).with_metric(5),
        )
        .unwrap();
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), gw("192.0.2.2"));
        // Overriding the distance of the OSPF route makes it win.
        rib.add(
            p,
            &RibRoute::new(Source::Ospf, gw("192.0.2.1")).with_distance(10),
        )
        .unwrap();
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), gw("192.0.2.1"));
        assert_eq!(rib.routes(&p).len(), 3);
        let changes = rib.drain_fib_changes_v4();
        assert_eq!(changes.len(), 3);
        assert_eq!(changes.last(), Some(&(p, rib.fib_value(&p))));
        assert_eq!(rib.withdraw(p, Source::Ospf), 1);
        assert_eq!(fwd_of(&rib, rib.fib_value(&p)), gw("192.0.2.2"));
        assert_eq!(rib.withdraw(p, Source::Bgp), 2);
        assert_eq!(rib.fib_value(&p), NO_ROUTE);
        assert!(rib.v4().is_empty());
        assert_eq!(rib.drain_fib_changes_v4().last(), Some(&(p, NO_ROUTE)));
        assert_eq!(rib.nexthops().live(), 0);
    }

    #[test]
    fn ecmp_groups_are_shared_between_prefixes() {
        let mut rib = Rib::new();
        let (a, b) = (p4("10.0.0.0/8"), p4("11.0.0.0/8"));
        let routes = [
            RibRoute::new(Source::Bgp, gw("192.0.2.1")),
            RibRoute::new(Source::Bgp, gw("192.0.2.2")),
        ];
        rib.replace(a, Source::Bgp, &routes).unwrap();
        let rev = [routes[1].clone(), routes[0].clone()];
        rib.replace(b, Source::Bgp, &rev).unwrap();
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
        assert!(rib.withdraw_route(a, Source::Bgp, &gw("192.0.2.2")));
        assert_eq!(fwd_of(&rib, rib.fib_value(&a)), gw("192.0.2.1"));
        assert_eq!(rib.fib_value(&b), g);
        // A session reset removes every route via the gateway.
        assert_eq!(rib.withdraw_nexthop(Source::Bgp, &gw("192.0.2.1")), 2);
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
                Source::Bgp,
                &[
                    RibRoute::new(Source::Bgp, Forward::Local),
                    RibRoute::new(Source::Static, Forward::Local)
                ]
            ),
            Err(RibError::SourceMismatch {
                expected: Source::Bgp,
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
        rib.add(p, &RibRoute::new(Source::Bgp, gw("192.0.2.1")))
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

        // A bad table changes nothing.
        let mut bad = t.clone();
        bad.v4.push(Route::new(p, gw6));
        let before = rib.fib_routes_v4();
        let live = rib.nexthops().live();
        assert_eq!(
            rib.load_table(&bad, Source::Bgp),
            Err(RibError::WrongFamily)
        );
        bad.v4.pop();
        bad.v6.push(Route::new(p6, 999));
        assert_eq!(
            rib.load_table(&bad, Source::Bgp),
            Err(RibError::UnknownTableNextHop(999))
        );
        assert_eq!(rib.fib_routes_v4(), before);
        assert_eq!(rib.nexthops().live(), live);
    }

    #[test]
    fn sources_by_name() {
        for s in Source::ALL {
            assert_eq!(s.as_str().parse::<Source>(), Ok(s));
        }
        assert_eq!("rip".parse::<Source>(), Err(UnknownSource));
        assert!(Source::Connected.default_distance() < Source::Static.default_distance());
        assert!(Source::Bgp.default_distance() < Source::Ospf.default_distance());
    }
}
