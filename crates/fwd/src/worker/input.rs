//! Pass 1: `eth_input`, `ip4_input`/`ip6_input`, `classify` and `ttl` for one packet; a
//! transit packet leaves it as a [`Work`] item.

use vfsr_fib::nexthop::NhSnapshot;
use vfsr_lpm::Lpm;

use crate::counters::{DropReason, Event, PuntClass};
use crate::icmp_error::{Icmp4Error, Icmp6Error};
use crate::packet::{Batch, Verdict};
use crate::port::Ports;
use crate::stage::classify::{classify4, classify6, Class};
use crate::stage::eth_input::{eth_input, EthOutcome, ETH_HEADER};
use crate::stage::ip4_input::{ip4_input, ports4, Ip4Outcome};
use crate::stage::ip6_input::{ip6_input, ports6, Ip6Outcome};
use crate::stage::ttl::{ttl_check, TtlOutcome};

use super::{Work, Worker};

impl<E4: Lpm<u32>, E6: Lpm<u128>> Worker<E4, E6> {
    /// Pass 1 for packet `idx`: a final verdict, or `None` after queueing it as work.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn input(
        &mut self,
        batch: &mut Batch,
        idx: usize,
        ports: &Ports,
        fib4: &E4,
        fib6: &E6,
        nh: &NhSnapshot,
        now_ns: u64,
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
                let l4 = ports4(ip, &meta);
                match classify4(&meta, link_broadcast, ports, l4) {
                    Class::Forward => {}
                    Class::Punt(c) => return Some(self.punt(c)),
                    Class::Drop(r) => return Some(self.drop(r)),
                }
                if meta.options {
                    self.counters.event(Event::Ip4Options, 1);
                }
                if ttl_check(meta.ttl) == TtlOutcome::Expired {
                    let orig = ip.get(..usize::from(meta.total_len)).unwrap_or(ip);
                    let orig = orig.to_vec();
                    self.icmp4(
                        batch,
                        &orig,
                        link_broadcast,
                        Icmp4Error::TimeExceeded,
                        port,
                        ports,
                        fib4,
                        nh,
                        now_ns,
                    );
                    return Some(self.drop(DropReason::TtlExpired));
                }
                if self.flow.is_none() {
                    self.dst4.push(meta.dst);
                }
                self.work.push(Work {
                    idx: idx as u32,
                    v6: false,
                    link_bcast: link_broadcast,
                    ip_len: u32::from(meta.total_len),
                    df: meta.df,
                    src: u128::from(meta.src),
                    dst: u128::from(meta.dst),
                    proto: meta.protocol,
                    sport: l4.0,
                    dport: l4.1,
                    nh: 0,
                });
                None
            }
            EthOutcome::Ipv6 { link_broadcast } => {
                let meta = match ip6_input(ip) {
                    Ip6Outcome::Valid(m) => m,
                    Ip6Outcome::Drop(r) => return Some(self.drop(r)),
                };
                let l4 = ports6(ip, &meta);
                let icmp_type = if meta.upper == 58 && !meta.later_fragment {
                    ip.get(meta.upper_offset).copied()
                } else {
                    None
                };
                match classify6(&meta, link_broadcast, ports, l4, icmp_type) {
                    Class::Forward => {}
                    Class::Punt(c) => return Some(self.punt(c)),
                    Class::Drop(r) => return Some(self.drop(r)),
                }
                let ip_len = 40 + usize::from(meta.payload_len);
                if ttl_check(meta.hop_limit) == TtlOutcome::Expired {
                    let orig = ip.get(..ip_len).unwrap_or(ip).to_vec();
                    self.icmp6(
                        batch,
                        &orig,
                        link_broadcast,
                        Icmp6Error::TimeExceeded,
                        port,
                        ports,
                        fib6,
                        nh,
                        now_ns,
                    );
                    return Some(self.drop(DropReason::TtlExpired));
                }
                if self.flow.is_none() {
                    self.dst6.push(meta.dst);
                }
                self.work.push(Work {
                    idx: idx as u32,
                    v6: true,
                    link_bcast: link_broadcast,
                    ip_len: ip_len as u32,
                    df: true,
                    src: meta.src,
                    dst: meta.dst,
                    proto: meta.upper,
                    sport: l4.0,
                    dport: l4.1,
                    nh: 0,
                });
                None
            }
        }
    }
}
