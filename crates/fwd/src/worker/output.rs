//! The end of a forwarded packet: MTU, rewrite and the verdict; IPv4 fragmentation; the
//! buffers and Ethernet headers of packets the worker makes.

use vfsr_fib::nexthop::NhSnapshot;
use vfsr_lpm::Lpm;
use vfsr_wire::ethernet::EthernetFrame;
use vfsr_wire::MacAddr;

use crate::counters::{DropReason, Event};
use crate::frag::Fragmenter;
use crate::icmp_error::{Icmp4Error, Icmp6Error};
use crate::packet::{Batch, Packet, Verdict, DEFAULT_BUFFER};
use crate::port::{Port, Ports};
use crate::stage::eth_input::{ETHERTYPE_IPV4, ETH_HEADER};
use crate::stage::mtu::{mtu4, mtu6, MtuOutcome};
use crate::stage::rewrite::{decrement_ttl4, rewrite};

use super::icmp::ErrorKind;
use super::{FlowValue, Work, Worker};

impl<E4: Lpm<u32>, E6: Lpm<u128>> Worker<E4, E6> {
    /// MTU and rewrite, once the next hop and its MAC are known, and the packet's verdict
    /// recorded. Always inlined: pass 3 calls it both for the quick answers and for the
    /// decided ones.
    ///
    /// A forwarded packet's verdict is stored here, in the arm that decides it, not
    /// returned: returned, the verdicts of all arms met in one stack slot, written field
    /// by field and read back whole, and that read waited for the writes to retire (the
    /// CPU cannot forward two small stores to one wider load).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn output(
        &mut self,
        batch: &mut Batch,
        w: &Work,
        v: &FlowValue,
        ports: &Ports,
        fib4: &E4,
        fib6: &E6,
        nh: &NhSnapshot,
        now_ns: u64,
    ) {
        let Some(port) = ports.get(v.oif) else {
            let verdict = self.drop(DropReason::NoEgressPort);
            set_verdict(batch, w.idx, verdict);
            return;
        };
        let fit = if w.v6 {
            mtu6(w.ip_len as usize, port.mtu)
        } else {
            mtu4(
                u16::try_from(w.ip_len).unwrap_or(u16::MAX),
                w.df,
                port.mtu,
                self.config.fragment,
            )
        };
        let verdict = match fit {
            MtuOutcome::Fits => {
                let Some(p) = batch.packets.get_mut(w.idx as usize) else {
                    let verdict = self.drop(DropReason::NoEgressPort);
                    set_verdict(batch, w.idx, verdict);
                    return;
                };
                rewrite(p.frame_mut(), w.v6, v.mac, port.mac);
                p.oif = v.oif;
                if self.config.report_offload && v.single {
                    batch.offload.push(w.idx);
                }
                self.counters.forwarded();
                set_verdict(batch, w.idx, Verdict::Forward { oif: v.oif });
                return;
            }
            MtuOutcome::FragNeeded { mtu } => {
                let kind = Icmp4Error::FragNeeded { mtu };
                self.error_for(batch, w, ErrorKind::V4(kind), ports, fib4, fib6, nh, now_ns);
                self.drop(DropReason::MtuExceededDf)
            }
            MtuOutcome::TooBig { mtu } => {
                let kind = Icmp6Error::PacketTooBig {
                    mtu: u32::from(mtu),
                };
                self.error_for(batch, w, ErrorKind::V6(kind), ports, fib4, fib6, nh, now_ns);
                self.drop(DropReason::MtuExceeded6)
            }
            MtuOutcome::Disabled => self.drop(DropReason::FragmentationDisabled),
            MtuOutcome::Fragment { mtu } => self.fragment(batch, w, v, port, mtu),
        };
        set_verdict(batch, w.idx, verdict);
    }

    /// Splits an IPv4 packet into fragments that fit `mtu` and queues them.
    pub(super) fn fragment(
        &mut self,
        batch: &mut Batch,
        w: &Work,
        v: &FlowValue,
        port: &Port,
        mtu: u16,
    ) -> Verdict {
        let Some(p) = batch.packets.get_mut(w.idx as usize) else {
            return self.drop(DropReason::FragmentFailed);
        };
        decrement_ttl4(p.frame_mut());
        let ip = p
            .frame()
            .get(ETH_HEADER..ETH_HEADER + w.ip_len as usize)
            .unwrap_or(&[]);
        let mut frags = match Fragmenter::new(ip, usize::from(mtu)) {
            Ok(f) => f,
            Err(_) => return self.drop(DropReason::FragmentFailed),
        };
        let start = batch.generated.len();
        loop {
            let mut out = Packet::take(&mut self.spare);
            let need = ETH_HEADER + usize::from(mtu);
            if out.capacity() < need {
                out = Packet::with_capacity(need.max(DEFAULT_BUFFER));
            }
            let buf = out.buffer_mut();
            write_eth(buf, v.mac, port.mac, ETHERTYPE_IPV4);
            match frags.write_next(buf.get_mut(ETH_HEADER..).unwrap_or(&mut [])) {
                Ok(Some(len)) => {
                    out.set_len(ETH_HEADER + len);
                    out.iif = p.iif;
                    out.oif = v.oif;
                    batch.generated.push(out);
                }
                Ok(None) => {
                    self.spare.push(out);
                    break;
                }
                Err(_) => {
                    self.spare.push(out);
                    let made: Vec<Packet> = batch.generated.drain(start..).collect();
                    self.recycle(made);
                    return self.drop(DropReason::FragmentFailed);
                }
            }
        }
        let made = (batch.generated.len() - start) as u64;
        self.counters.event(Event::FragmentsMade, made);
        self.counters.forwarded();
        Verdict::Consumed
    }

    /// A buffer for a packet the worker makes: a recycled one, else a new one.
    pub(super) fn take_buffer(&mut self) -> Packet {
        Packet::take(&mut self.spare)
    }
}

/// Records `verdict` for packet `idx` of the batch.
#[inline(always)]
pub(super) fn set_verdict(batch: &mut Batch, idx: u32, verdict: Verdict) {
    if let Some(slot) = batch.verdicts.get_mut(idx as usize) {
        *slot = verdict;
    }
}

/// Writes an Ethernet header at the start of `buf`.
#[inline]
pub(super) fn write_eth(buf: &mut [u8], dst: MacAddr, src: MacAddr, ethertype: u16) {
    let mut eth = EthernetFrame::new_unchecked(buf);
    eth.set_dst(dst);
    eth.set_src(src);
    eth.set_ethertype(ethertype);
}
