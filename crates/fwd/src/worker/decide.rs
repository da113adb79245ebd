//! Pass 2 and 3 for a transit packet: the flow table's answer checked against the current
//! snapshots, or route, ECMP and neighbor decided afresh (and cached in the flow table).

use vfsr_fib::nexthop::{NhEntry, NhSnapshot};
use vfsr_flow::{FlowKey, FlowTable, KeyMode, Lookup};
use vfsr_lpm::Lpm;
use vfsr_wire::MacAddr;

use crate::counters::{DropReason, Event};
use crate::packet::{Batch, Verdict};
use crate::port::Ports;
use crate::stage::classify::punt_class;
use crate::stage::ecmp::EcmpOutcome;
use crate::stage::neighbor::NeighOutcome;
use crate::stage::rewrite::rewrite;
use crate::stage::route::{route, single, RouteOutcome};

use super::neighbor::{epoch_of, neigh_current};
use super::{Adj, FlowMade, FlowSlot, FlowState, FlowValue, Work, Worker};

impl<E4: Lpm<u32>, E6: Lpm<u128>> Worker<E4, E6> {
    /// The flow table's answer for slot `f`'s key, checked against the current snapshots,
    /// written into the slot; returns whether it is a hit. The caller counts the hits (one
    /// counter update per batch); a stale entry and a miss are counted here.
    ///
    /// The table is handed in, taken out of the worker for the batch's lookups, and the FIB
    /// versions of both families with it: which one applies is looked at only when an entry
    /// needs its full check. Both were read per packet before, a test of the worker's
    /// optional table and a select on the family, on the path of every hit.
    #[inline]
    pub(super) fn flow_lookup(
        &mut self,
        table: &mut FlowTable<FlowValue, FlowMade>,
        f: &mut FlowSlot,
        now: u32,
        fib_versions: (u64, u64),
        nh: &NhSnapshot,
    ) -> bool {
        let (fkey, fhash) = (&f.fkey, f.fhash);
        let arp = &mut self.arp;
        let nd = &mut self.nd;
        let epochs = &self.epochs;
        let world = self.world.serial;
        let mut stale = None;
        let valid = |v: &mut FlowValue, m: &mut FlowMade| {
            if v.world == world {
                return true;
            }
            let v6 = fkey.family() == vfsr_flow::Family::V6;
            let fib_version = if v6 { fib_versions.1 } else { fib_versions.0 };
            let current = m.fib_version == fib_version
                && entry_matches(nh, m.member, m.member_gen, m.member_version)
                && (m.route_nh == m.member
                    || entry_matches(nh, m.route_nh, m.route_gen, m.route_version))
                && (epoch_of(epochs, v.oif) == m.neigh_epoch
                    || neigh_current(arp, nd, v6, v.oif, m.neigh_id, m.neigh_gen));
            if current {
                v.world = world;
            } else {
                stale = Some(*m);
            }
            current
        };
        // A hit is stored in its own arm: one store after the match moved every arm's state
        // through a temporary (callgrind, vfsr fwd bench split+flow 1k flows: 556 against 534
        // instructions per packet).
        let state = match table.lookup_hashed(fkey, fhash, now, valid) {
            Lookup::Hit(v) => {
                f.state = FlowState::Hit(v);
                return true;
            }
            Lookup::Stale(_) => {
                self.counters.event(Event::FlowStale, 1);
                // The check that found it stale copied out what it was made from.
                match stale {
                    Some(m) => {
                        let at = self.q.stale.len() as u32;
                        self.q.stale.push(m);
                        FlowState::Stale(at)
                    }
                    None => FlowState::None,
                }
            }
            Lookup::Miss => {
                self.counters.event(Event::FlowMiss, 1);
                FlowState::None
            }
        };
        f.state = state;
        false
    }

    /// Pass 3's decision for a transit packet that neither the flow table (a hit) nor,
    /// without a flow table, the gateway's memo answered: the flow table's stale entry
    /// recomputed, or a miss decided (and cached when there is a flow table), or the
    /// packet's final verdict.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn decided(
        &mut self,
        batch: &mut Batch,
        w: &Work,
        route_nh: u32,
        slot: Option<&FlowSlot>,
        fib_version: u64,
        nh: &NhSnapshot,
        ports: &Ports,
        fib4: &E4,
        fib6: &E6,
        now: u32,
        now_ns: u64,
    ) -> Result<FlowValue, Verdict> {
        let stale = match slot.map(|f| f.state) {
            Some(FlowState::Hit(v)) => return Ok(v),
            Some(FlowState::Stale(i)) => self.q.stale.get(i as usize).copied(),
            Some(FlowState::None) | None => None,
        };
        // A miss tries the gateway's memo first; a stale entry takes the full path, which
        // may keep its ECMP member.
        let memo = match stale {
            None => self.remembered(route_nh, fib_version, nh),
            Some(_) => None,
        };
        let (v, made) = match memo {
            Some(d) => d,
            None => self.decide(
                batch,
                w,
                route_nh,
                stale,
                fib_version,
                nh,
                ports,
                fib4,
                fib6,
                now_ns,
            )?,
        };
        if let (Some(f), Some(slot)) = (self.flow.as_mut(), slot) {
            f.insert_hashed_side(slot.fkey, slot.fhash, v, made, now);
        }
        Ok(v)
    }

    /// The decision for a route to a single gateway next hop, straight from that next hop's
    /// neighbor memo, when the memo was made for the entry now at `index` (same generation and
    /// version, so still a gateway on the same port) in the port's current neighbor epoch.
    /// Anything else (a group, a connected route, a memo made before a change) returns `None`
    /// and takes the full path, which checks and refreshes the memo.
    #[inline]
    fn remembered(
        &self,
        index: u32,
        fib_version: u64,
        nh: &NhSnapshot,
    ) -> Option<(FlowValue, FlowMade)> {
        let (a, e) = self.memo(index, nh)?;
        Some((
            self.memo_value(a),
            FlowMade {
                fib_version,
                neigh_gen: a.gen,
                route_nh: index,
                route_gen: e.gen,
                route_version: e.version,
                member: index,
                member_gen: e.gen,
                member_version: e.version,
                neigh_id: a.id,
                neigh_epoch: a.epoch,
            },
        ))
    }

    /// [`Worker::remembered`]'s value alone, for a worker without a flow table (nothing to
    /// cache, so nothing to record what it was made from). A memo found current is stamped
    /// with the world serial, and until the serial moves it is taken on that stamp alone.
    #[inline]
    pub(super) fn remembered_value(&mut self, index: u32, nh: &NhSnapshot) -> Option<FlowValue> {
        let serial = self.world.serial;
        if self.adj.get(index as usize)?.world != serial {
            self.memo(index, nh)?;
            self.adj.get_mut(index as usize)?.world = serial;
        }
        self.adj.get(index as usize).map(|a| self.memo_value(a))
    }

    /// The neighbor memo of next hop `index` and its entry, when the memo is current.
    #[inline]
    fn memo<'a>(&'a self, index: u32, nh: &'a NhSnapshot) -> Option<(&'a Adj, &'a NhEntry)> {
        let a = self.adj.get(index as usize)?;
        let e = nh.get(index)?;
        let current =
            a.made_for(index, e.gen, e.version) && a.epoch == epoch_of(&self.epochs, a.ifindex);
        current.then_some((a, e))
    }

    /// The value a current memo gives.
    #[inline]
    fn memo_value(&self, a: &Adj) -> FlowValue {
        FlowValue {
            world: self.world.serial,
            oif: a.ifindex,
            mac: a.mac,
            single: true,
        }
    }

    /// Route, ECMP and neighbor for a packet the flow table did not answer and the gateway
    /// memo ([`Worker::remembered`]) could not: the value to cache with what it was made from,
    /// or the packet's final verdict.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn decide(
        &mut self,
        batch: &mut Batch,
        w: &Work,
        route_nh: u32,
        stale: Option<FlowMade>,
        fib_version: u64,
        nh: &NhSnapshot,
        ports: &Ports,
        fib4: &E4,
        fib6: &E6,
        now_ns: u64,
    ) -> Result<(FlowValue, FlowMade), Verdict> {
        let (route_gen, route_version) = nh.get(route_nh).map_or((0, 0), |e| (e.gen, e.version));
        let outcome = route(route_nh, nh);
        let single_out = match outcome {
            RouteOutcome::Group {
                nh: g,
                members,
                weights,
            } => {
                // Stateful ECMP: a known flow keeps its member while it is in the group.
                let kept = stale.and_then(|old| {
                    (members.contains(&old.member)
                        && entry_matches(nh, old.member, old.member_gen, old.member_version))
                    .then_some(old.member)
                });
                let member = match kept {
                    Some(m) => {
                        if stale
                            .is_some_and(|o| o.route_nh != g || o.route_version != route_version)
                        {
                            self.counters.event(Event::EcmpKept, 1);
                        }
                        m
                    }
                    None => {
                        let hash = self
                            .hasher
                            .hash_fields(&w.key(batch), self.config.ecmp_fields);
                        let from = stale.map(|o| o.route_nh).filter(|&o| o != g);
                        match self.groups.select(
                            g,
                            route_gen,
                            route_version,
                            members,
                            weights,
                            hash,
                            from,
                        ) {
                            EcmpOutcome::Member(m) => m,
                            EcmpOutcome::Drop(r) => return Err(self.drop(r)),
                        }
                    }
                };
                match nh.get(member).and_then(|e| single(member, &e.forward)) {
                    Some(o) => o,
                    None => return Err(self.drop(DropReason::EcmpEmpty)),
                }
            }
            o => o,
        };
        let (member, ifindex, gateway) = match single_out {
            RouteOutcome::Via {
                nh: m,
                ifindex,
                gateway,
            } => (m, ifindex, gateway),
            RouteOutcome::Local => {
                let ports_l4 = w.ports(w.ip(batch));
                return Err(self.punt(punt_class(w.proto, ports_l4, None)));
            }
            RouteOutcome::Drop { reason, icmp } => {
                if icmp {
                    self.unreachable(batch, w, reason, ports, fib4, fib6, nh, now_ns);
                }
                return Err(self.drop(reason));
            }
            RouteOutcome::Group { .. } => return Err(self.drop(DropReason::EcmpEmpty)),
        };
        let (member_gen, member_version) = nh.get(member).map_or((0, 0), |e| (e.gen, e.version));
        if ports.get(ifindex).is_none() {
            return Err(self.drop(DropReason::NoEgressPort));
        }
        let target = gateway.unwrap_or_else(|| w.dst_addr(batch));
        let found = if gateway.is_some() {
            self.neighbor_of_gateway(member, member_gen, member_version, ifindex, target)
        } else {
            self.neighbor_lookup(ifindex, target)
        };
        match found {
            NeighOutcome::Resolved { mac, id, gen } => Ok((
                FlowValue {
                    world: self.world.serial,
                    oif: ifindex,
                    mac,
                    single: route_nh == member,
                },
                FlowMade {
                    fib_version,
                    neigh_gen: gen,
                    route_nh,
                    route_gen,
                    route_version,
                    member,
                    member_gen,
                    member_version,
                    neigh_id: id,
                    neigh_epoch: epoch_of(&self.epochs, ifindex),
                },
            )),
            NeighOutcome::Miss => {
                // The control plane holds it; it goes out with TTL already decremented.
                if let Some(p) = batch.packets.get_mut(w.idx as usize) {
                    if let Some(port) = ports.get(ifindex) {
                        rewrite(p.frame_mut(), w.v6, MacAddr([0; 6]), port.mac);
                    }
                    p.oif = ifindex;
                }
                self.counters.held();
                Err(Verdict::Resolve {
                    ifindex,
                    nexthop: target,
                })
            }
            NeighOutcome::Failed => {
                let reason = DropReason::NeighborFailed;
                self.unreachable(batch, w, reason, ports, fib4, fib6, nh, now_ns);
                Err(self.drop(reason))
            }
        }
    }
}

/// The flow table's key for a packet's 5-tuple.
#[inline]
pub(super) fn flow_key(mode: KeyMode, key: &FlowKey) -> FlowKey {
    match mode {
        KeyMode::FiveTuple => *key,
        KeyMode::Addresses => key.l3_only(),
        KeyMode::Destination => FlowKey::destination(key.dst()),
    }
}

/// Milliseconds, the flow table's tick.
#[inline]
pub(super) fn tick(now_ns: u64) -> u32 {
    (now_ns / 1_000_000) as u32
}

/// Whether next hop `index` still has generation `gen` and version `version`.
#[inline]
pub(super) fn entry_matches(nh: &NhSnapshot, index: u32, gen: u32, version: u32) -> bool {
    nh.get(index)
        .is_some_and(|e| e.gen == gen && e.version == version)
}
