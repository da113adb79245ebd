//! Pass 1: `eth_input`, `ip4_input`/`ip6_input`, `classify` and `ttl` for one packet; a
//! transit packet leaves it as a [`Work`] item.

use std::net::{Ipv4Addr, Ipv6Addr};

use vfsr_fib::nexthop::NhSnapshot;
use vfsr_flow::FlowKey;
use vfsr_lpm::Lpm;

use crate::counters::{DropReason, Event, PuntClass};
use crate::packet::{Batch, Verdict};
use crate::port::Ports;
use crate::stage::classify::{classify4, classify6, Class};
use crate::stage::eth_input::{eth_input, EthOutcome, ETH_HEADER};
use crate::stage::ip4_input::{ip4_input, l4_offset4, ports_at, Ip4Meta, Ip4Outcome};
use crate::stage::ip6_input::{ip6_input, l4_offset6, ports6, Ip6Meta, Ip6Outcome};
use crate::stage::ttl::{ttl_check, TtlOutcome};

use super::decide::flow_key;
use super::{FlowSlot, Queues, Work, Worker};

impl<E4: Lpm<u32>, E6: Lpm<u128>> Worker<E4, E6> {
    /// Pass 1 for packet `idx`: a final verdict, or `None` after queueing it as work (and,
    /// with a flow table (`FLOWS`), its flow key, hashed; without one, its destination for
    /// the bulk lookup).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn input<const FLOWS: bool>(
        &mut self,
        batch: &mut Batch,
        idx: usize,
        ports: &Ports,
        fib4: &E4,
        fib6: &E6,
        nh: &NhSnapshot,
        now_ns: u64,
        q: &mut Queues,
    ) -> Option<Verdict> {
        let pkt = batch.packets.get(idx)?;
        let Some(port) = ports.get(pkt.iif) else {
            return Some(self.drop(DropReason::NoIngressPort));
        };
        let frame = pkt.frame();
        let ip = frame.get(ETH_HEADER..).unwrap_or(&[]);
        match eth_input(frame, port.mac) {
            EthOutcome::Drop(r) => Some(self.drop(r)),
            EthOutcome::Arp => Some(self.punt(PuntClass::ArpNd)),
            EthOutcome::Ipv4 { link_broadcast } => {
                let meta = match ip4_input(ip) {
                    Ip4Outcome::Valid(m) => m,
                    Ip4Outcome::Drop(r) => return Some(self.drop(r)),
                };
                let l4 = l4_offset4(&meta);
                let len = usize::from(meta.total_len);
                let l4_ports = move || l4.map_or((0, 0), |at| ports_at(ip, at, len));
                match classify4(&meta, link_broadcast, ports, l4_ports) {
                    Class::Forward => {}
                    Class::Punt(c) => return Some(self.punt(c)),
                    Class::Drop(r) => return Some(self.drop(r)),
                }
                if meta.options {
                    self.counters.event(Event::Ip4Options, 1);
                }
                if ttl_check(meta.ttl) == TtlOutcome::Expired {
                    let w = Work::v4(idx, &meta, l4, link_broadcast);
                    return Some(self.expired(batch, &w, (ports, nh), (fib4, fib6), now_ns));
                }
                if !FLOWS {
                    q.dst4.push(meta.dst);
                } else {
                    let (sport, dport) = l4_ports();
                    let (src, dst) = (Ipv4Addr::from(meta.src), Ipv4Addr::from(meta.dst));
                    let key = FlowKey::v4(src, dst, meta.protocol, sport, dport);
                    q.flows.push(self.flow_slot(&key));
                }
                q.work.push(Work::v4(idx, &meta, l4, link_broadcast));
                None
            }
            EthOutcome::Ipv6 { link_broadcast } => {
                let meta = match ip6_input(ip) {
                    Ip6Outcome::Valid(m) => m,
                    Ip6Outcome::Drop(r) => return Some(self.drop(r)),
                };
                // The closure holds a copy of `meta` and calls the stage's `ports6` (for
                // IPv4 the offsets are taken apart first: there a copy counted more
                // instructions under callgrind, here fewer).
                let upper = move || {
                    let icmp = meta.upper == 58 && !meta.later_fragment;
                    let icmp_type = if icmp {
                        ip.get(meta.upper_offset).copied()
                    } else {
                        None
                    };
                    (ports6(ip, &meta), icmp_type)
                };
                match classify6(&meta, link_broadcast, ports, upper) {
                    Class::Forward => {}
                    Class::Punt(c) => return Some(self.punt(c)),
                    Class::Drop(r) => return Some(self.drop(r)),
                }
                if ttl_check(meta.hop_limit) == TtlOutcome::Expired {
                    let w = Work::v6(idx, &meta, link_broadcast);
                    return Some(self.expired(batch, &w, (ports, nh), (fib4, fib6), now_ns));
                }
                if !FLOWS {
                    q.dst6.push(meta.dst);
                } else {
                    let ((sport, dport), _) = upper();
                    let (src, dst) = (Ipv6Addr::from(meta.src), Ipv6Addr::from(meta.dst));
                    let key = FlowKey::v6(src, dst, meta.upper, sport, dport);
                    q.flows.push(self.flow_slot(&key));
                }
                q.work.push(Work::v6(idx, &meta, link_broadcast));
                None
            }
        }
    }
}

impl<E4, E6> Worker<E4, E6> {
    /// The flow slot of a packet whose 5-tuple is `key`: its key in the configured mode,
    /// hashed while the header's fields are in registers, and its bucket asked for, so the
    /// lines have the rest of pass 1 to arrive before pass 2 reads them. In a table that fits
    /// the cache that is the bucket's head and first way; in one past it the head alone,
    /// whose signatures pass 2 reads to ask for the way that holds the key.
    #[inline(always)]
    fn flow_slot(&self, key: &FlowKey) -> FlowSlot {
        let fkey = flow_key(self.config.flow_key, key);
        let fhash = match self.flow.as_ref() {
            Some(t) => {
                let h = t.hash(&fkey);
                if self.flows_past_cache {
                    t.prefetch_head(h);
                } else {
                    t.prefetch_hash(h);
                }
                h
            }
            None => 0,
        };
        FlowSlot::new(fkey, fhash)
    }
}

impl Work {
    /// The work item of IPv4 packet `idx` with header `meta` (`l4`: where its ports start).
    #[inline(always)]
    fn v4(idx: usize, meta: &Ip4Meta, l4: Option<usize>, link_bcast: bool) -> Work {
        Work {
            idx: idx as u32,
            ip_len: u32::from(meta.total_len),
            nh: 0,
            l4: l4.map_or(0, |at| at as u16),
            proto: meta.protocol,
            v6: false,
            link_bcast,
            df: meta.df,
        }
    }

    /// The work item of IPv6 packet `idx` with header `meta`.
    #[inline(always)]
    fn v6(idx: usize, meta: &Ip6Meta, link_bcast: bool) -> Work {
        Work {
            idx: idx as u32,
            ip_len: 40 + u32::from(meta.payload_len),
            nh: 0,
            l4: l4_offset6(meta).map_or(0, |at| u16::try_from(at).unwrap_or(0)),
            proto: meta.upper,
            v6: true,
            link_bcast,
            df: true,
        }
    }
}
