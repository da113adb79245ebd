//! What the two netlink-speaking sources (zebra over FPM, the kernel's table) share: their
//! next-hop objects and the way a route or next-hop message changes the RIB.
//!
//! A route naming a next-hop object (`RTA_NH_ID`) is stored as the routes the object
//! expands to, each tagged with the object's id. When an object changes (a next hop moves,
//! a group gains a member), the routes tagged with it, or with a group it belongs to, are
//! expanded again at the end of the batch: one scan of the RIB per batch, however many
//! objects changed in it.

use rustc_hash::{FxHashMap, FxHashSet};
use vfsr_netlink::msg::{Message, NextHopMsg, Op, Route, RouteType};
use vfsr_rib::{IpPrefix, Rib, RibFamily, Source};

use crate::translate::{prefix_of, translate, IfMap, Objects, Skip, SourceCounters};

/// How a source identifies its routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Identity {
    /// One route set per prefix (zebra sends its selected route): a new route replaces
    /// whatever the source had for the prefix.
    Prefix,
    /// Routes per prefix and metric (the kernel's table).
    PrefixAndMetric,
}

/// A netlink source's state.
#[derive(Debug)]
pub(crate) struct SourceState {
    pub source: Source,
    pub identity: Identity,
    pub objects: Objects,
    /// Objects redefined in this batch (the RIB's routes through them change).
    changed: FxHashSet<u32>,
    /// Objects defined for the first time in this batch (only parked routes can use them).
    added: FxHashSet<u32>,
    /// Routes through an object that gives vfsr no usable next hop today (all through other
    /// interfaces, say), by (prefix, metric): the object's id and the epoch of the
    /// announcement. They hold no RIB route, but a change of their object brings them in.
    parked: FxHashMap<(IpPrefix, u32), (u32, u32)>,
    pub counters: SourceCounters,
}

/// What a route message is applied with.
pub(crate) struct Apply<'a> {
    pub rib: &'a mut Rib,
    pub ifmap: &'a IfMap,
    pub distance: u8,
}

impl SourceState {
    pub fn new(source: Source, identity: Identity) -> Self {
        SourceState {
            source,
            identity,
            objects: Objects::default(),
            changed: FxHashSet::default(),
            added: FxHashSet::default(),
            parked: FxHashMap::default(),
            counters: SourceCounters::default(),
        }
    }

    fn metric(&self, r: &Route) -> Option<u32> {
        match self.identity {
            Identity::Prefix => None,
            Identity::PrefixAndMetric => Some(r.priority.unwrap_or(0)),
        }
    }

    /// Applies `msgs` (one frame or one read) in order. A withdrawal immediately followed by
    /// an announcement of the same prefix (zebra's update) is applied as the announcement
    /// alone, so the prefix keeps its next-hop index when its routes do not change.
    pub fn apply(
        &mut self,
        msgs: &[Message],
        cx: &mut Apply<'_>,
        accept: impl Fn(&Route) -> Option<Skip>,
    ) {
        let mut i = 0usize;
        // The previous message was a withdrawal of this announcement's route, left out.
        let mut replacing = false;
        while let Some(m) = msgs.get(i) {
            i += 1;
            self.counters.messages += 1;
            match m {
                Message::Route(r) => {
                    if let Some(why) = accept(r) {
                        self.counters.skip(why);
                        continue;
                    }
                    // The withdrawal is left out only when the announcement will be taken;
                    // one the filter refuses would otherwise lose the withdrawal and leave
                    // the old route in the RIB.
                    if r.op == Op::Del {
                        if let Some(Message::Route(next)) = msgs.get(i) {
                            if next.op == Op::New
                                && next.dst == r.dst
                                && next.table == r.table
                                && self.metric(next) == self.metric(r)
                                && accept(next).is_none()
                            {
                                replacing = true;
                                continue;
                            }
                        }
                    }
                    self.route(r, cx, replacing);
                    replacing = false;
                }
                Message::NextHop(n) => self.nexthop(n),
                Message::Link(_) | Message::Addr(_) | Message::Done | Message::Error(_) => {}
            }
        }
    }

    /// `replacing`: a withdrawal of the same route came right before and was left out; if
    /// this announcement gives no forwarding route, the withdrawal is made instead.
    fn route(&mut self, r: &Route, cx: &mut Apply<'_>, replacing: bool) {
        let metric = self.metric(r);
        match r.op {
            Op::New => {
                let t = match translate(
                    r,
                    self.source,
                    cx.distance,
                    metric.unwrap_or(0),
                    cx.ifmap,
                    &self.objects,
                    &mut self.counters,
                ) {
                    Ok(t) => t,
                    // A route through an object not (fully) known yet: the source's route for
                    // the prefix is that object, which gives nothing usable now. What the
                    // prefix had goes; the route is parked and taken once the object is.
                    Err(why @ (Skip::UnknownObject | Skip::BadGroup)) => {
                        self.counters.skip(why);
                        let (Some(prefix), Some(id)) = (prefix_of(r.dst), r.nhid) else {
                            return;
                        };
                        match (prefix, metric) {
                            (IpPrefix::V4(p), None) => cx.rib.withdraw(p, self.source),
                            (IpPrefix::V6(p), None) => cx.rib.withdraw(p, self.source),
                            (IpPrefix::V4(p), Some(m)) => cx.rib.withdraw_metric(p, self.source, m),
                            (IpPrefix::V6(p), Some(m)) => cx.rib.withdraw_metric(p, self.source, m),
                        };
                        let epoch = cx.rib.current_epoch(self.source);
                        self.parked
                            .insert((prefix, metric.unwrap_or(0)), (id, epoch));
                        return;
                    }
                    // Not a forwarding route (local, source-specific...): what the source had
                    // for the prefix stays, and counts as announced (a resync does not sweep
                    // it for a message that was never a route of ours).
                    Err(why) => {
                        self.counters.skip(why);
                        if replacing {
                            let del = Route {
                                op: Op::Del,
                                ..r.clone()
                            };
                            return self.route(&del, cx, false);
                        }
                        if let Some(prefix) = prefix_of(r.dst) {
                            match prefix {
                                IpPrefix::V4(p) => cx.rib.touch(p, self.source, metric),
                                IpPrefix::V6(p) => cx.rib.touch(p, self.source, metric),
                            };
                        }
                        return;
                    }
                };
                let res = match (t.prefix, metric) {
                    (IpPrefix::V4(p), None) => cx.rib.replace(p, self.source, &t.routes),
                    (IpPrefix::V6(p), None) => cx.rib.replace(p, self.source, &t.routes),
                    (IpPrefix::V4(p), Some(m)) => {
                        cx.rib.replace_metric(p, self.source, m, &t.routes)
                    }
                    (IpPrefix::V6(p), Some(m)) => {
                        cx.rib.replace_metric(p, self.source, m, &t.routes)
                    }
                };
                let key = (t.prefix, metric.unwrap_or(0));
                match (r.nhid, t.routes.is_empty()) {
                    (Some(id), true) => {
                        let epoch = cx.rib.current_epoch(self.source);
                        self.parked.insert(key, (id, epoch));
                    }
                    _ => {
                        if !self.parked.is_empty() {
                            self.parked.remove(&key);
                        }
                    }
                }
                match res {
                    Ok(()) if t.routes.is_empty() => self.counters.withdrawn += 1,
                    Ok(()) => self.counters.announced += 1,
                    Err(_) => self.counters.skip(Skip::RibRefused),
                }
            }
            Op::Del => {
                if r.src_len > 0 {
                    self.counters.skip(Skip::SourceSpecific);
                    return;
                }
                // The type of a deletion does not matter (zebra sends RTN_UNSPEC): whatever
                // the source had for the prefix goes.
                let Some(prefix) = prefix_of(r.dst) else {
                    self.counters.skip(Skip::BadPrefix);
                    return;
                };
                if !self.parked.is_empty() {
                    match metric {
                        Some(m) => {
                            self.parked.remove(&(prefix, m));
                        }
                        None => self.parked.retain(|(p, _), _| *p != prefix),
                    }
                }
                let n = match (prefix, metric) {
                    (IpPrefix::V4(p), None) => cx.rib.withdraw(p, self.source),
                    (IpPrefix::V6(p), None) => cx.rib.withdraw(p, self.source),
                    (IpPrefix::V4(p), Some(m)) => cx.rib.withdraw_metric(p, self.source, m),
                    (IpPrefix::V6(p), Some(m)) => cx.rib.withdraw_metric(p, self.source, m),
                };
                if n > 0 {
                    self.counters.withdrawn += 1;
                }
            }
        }
    }

    fn nexthop(&mut self, n: &NextHopMsg) {
        match n.op {
            Op::New => {
                self.counters.objects += 1;
                let same = self.objects.get(n.id) == Some(&n.object);
                if !same {
                    if self.objects.set(n.id, n.object.clone()) {
                        self.changed.insert(n.id);
                    } else if !self.parked.is_empty() {
                        self.added.insert(n.id);
                    }
                }
            }
            Op::Del => {
                // Routes still tagged with it keep the next hops it had.
                self.objects.remove(n.id);
            }
        }
    }

    /// Expands again the routes of every object changed since the last call (and of the
    /// groups holding one). Returns how many prefixes were updated.
    pub fn end_batch(&mut self, cx: &mut Apply<'_>) -> usize {
        if self.changed.is_empty() && self.added.is_empty() {
            return 0;
        }
        let with_groups = |set: FxHashSet<u32>, objects: &Objects| {
            let groups: Vec<u32> = set
                .iter()
                .flat_map(|id| objects.groups_with(*id).collect::<Vec<_>>())
                .collect();
            let mut all = set;
            all.extend(groups);
            all
        };
        let changed = with_groups(std::mem::take(&mut self.changed), &self.objects);
        let added = with_groups(std::mem::take(&mut self.added), &self.objects);
        let mut n = 0;
        if !changed.is_empty() {
            n += self.reexpand::<u32>(&changed, cx) + self.reexpand::<u128>(&changed, cx);
        }
        let mut ids = changed;
        ids.extend(added);
        // Parked routes of those objects: announced again with their object's new meaning.
        let revive: Vec<((IpPrefix, u32), u32)> = self
            .parked
            .iter()
            .filter(|(_, (id, _))| ids.contains(id))
            .map(|(k, (id, _))| (*k, *id))
            .collect();
        for ((prefix, metric), id) in revive {
            let (addr, len) = prefix.addr_len();
            self.route(&object_route(addr, len, metric, id), cx, false);
            n += 1;
        }
        self.counters.object_updates += n as u64;
        n
    }

    /// Forgets parked routes announced before the source's current epoch (a resync's sweep
    /// removes their RIB counterparts the same way).
    pub fn sweep_parked(&mut self, epoch: u32) {
        self.parked.retain(|_, (_, e)| *e == epoch);
    }

    fn reexpand<K: RibFamily>(&mut self, ids: &FxHashSet<u32>, cx: &mut Apply<'_>) -> usize
    where
        IpPrefix: From<vfsr_lpm::Prefix<K>>,
    {
        let users = cx.rib.family::<K>().nhid_users(self.source, ids);
        let mut n = 0;
        for p in users {
            // The source's routes of this prefix, grouped by metric, each set re-expanded
            // from its object.
            let mut sets: Vec<(u32, u32)> = cx
                .rib
                .routes(&p)
                .into_iter()
                .filter(|r| r.source == self.source && r.nhid != 0 && ids.contains(&r.nhid))
                .map(|r| (r.metric, r.nhid))
                .collect();
            sets.sort_unstable();
            sets.dedup();
            for (metric, nhid) in sets {
                let (addr, len) = IpPrefix::from(p).addr_len();
                self.route(&object_route(addr, len, metric, nhid), cx, false);
                n += 1;
            }
        }
        n
    }
}

/// A route announcement through next-hop object `id`, as the source would send it again.
fn object_route(addr: std::net::IpAddr, len: u8, metric: u32, id: u32) -> Route {
    Route {
        op: Op::New,
        replace: true,
        dst: (addr, len),
        table: 0,
        protocol: 0,
        scope: 0,
        kind: RouteType::Unicast,
        priority: Some(metric),
        nexthops: Vec::new(),
        nhid: Some(id),
        src_len: 0,
    }
}
