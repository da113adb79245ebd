//! What the two netlink-speaking sources (zebra over FPM, the kernel's table) share: their
//! next-hop objects and the way a route or next-hop message changes the RIB.
//!
//! A route naming a next-hop object (`RTA_NH_ID`) is stored as the routes the object
//! expands to, each tagged with the object's id. When an object changes (a next hop moves,
//! a group gains a member), the routes tagged with it, or with a group it belongs to, are
//! expanded again at the end of the batch: one scan of the RIB per batch, however many
//! objects changed in it.

use rustc_hash::FxHashSet;
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
    /// Objects changed in this batch.
    changed: FxHashSet<u32>,
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
        while let Some(m) = msgs.get(i) {
            i += 1;
            self.counters.messages += 1;
            match m {
                Message::Route(r) => {
                    if let Some(why) = accept(r) {
                        self.counters.skip(why);
                        continue;
                    }
                    if r.op == Op::Del {
                        if let Some(Message::Route(next)) = msgs.get(i) {
                            if next.op == Op::New
                                && next.dst == r.dst
                                && next.table == r.table
                                && self.metric(next) == self.metric(r)
                            {
                                continue;
                            }
                        }
                    }
                    self.route(r, cx);
                }
                Message::NextHop(n) => self.nexthop(n),
                Message::Link(_) | Message::Addr(_) | Message::Done | Message::Error(_) => {}
            }
        }
    }

    fn route(&mut self, r: &Route, cx: &mut Apply<'_>) {
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
                    Err(why) => {
                        self.counters.skip(why);
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
                if matches!(r.kind, RouteType::Local | RouteType::Other(_)) {
                    self.counters.skip(Skip::RouteType);
                    return;
                }
                let Some(prefix) = prefix_of(r.dst) else {
                    self.counters.skip(Skip::BadPrefix);
                    return;
                };
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
                if !same && self.objects.set(n.id, n.object.clone()) {
                    self.changed.insert(n.id);
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
        if self.changed.is_empty() {
            return 0;
        }
        let mut ids = std::mem::take(&mut self.changed);
        let groups: Vec<u32> = ids
            .iter()
            .flat_map(|id| self.objects.groups_with(*id).collect::<Vec<_>>())
            .collect();
        ids.extend(groups);
        let n = self.reexpand::<u32>(&ids, cx) + self.reexpand::<u128>(&ids, cx);
        self.counters.object_updates += n as u64;
        n
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
                let prefix = IpPrefix::from(p);
                let (addr, len) = prefix.addr_len();
                let msg = Route {
                    op: Op::New,
                    replace: true,
                    dst: (addr, len),
                    table: 0,
                    protocol: 0,
                    scope: 0,
                    kind: RouteType::Unicast,
                    priority: Some(metric),
                    nexthops: Vec::new(),
                    nhid: Some(nhid),
                    src_len: 0,
                };
                self.route(&msg, cx);
                n += 1;
            }
        }
        n
    }
}
