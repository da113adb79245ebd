//! ICMP errors the worker originates (Destination Unreachable, Time Exceeded, Fragmentation
//! Needed, Packet Too Big): built by `icmp_error`, rate-limited by the token bucket, and sent
//! back along the route to the offending packet's source.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vfsr_fib::nexthop::NhSnapshot;
use vfsr_flow::FlowKey;
use vfsr_lpm::Lpm;
use vfsr_wire::ipv4::Ipv4Packet;
use vfsr_wire::ipv6::Ipv6Packet;
use vfsr_wire::MacAddr;

use crate::counters::{DropReason, Event};
use crate::icmp_error::{
    icmp4_allowed, icmp4_error, icmp6_allowed, icmp6_error, Icmp4Error, Icmp6Error, Suppressed,
};
use crate::packet::{Batch, Packet, Verdict};
use crate::port::{Port, Ports};
use crate::stage::ecmp::EcmpOutcome;
use crate::stage::eth_input::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETH_HEADER};
use crate::stage::neighbor::{neighbor, NeighOutcome};
use crate::stage::route::{route, single, RouteOutcome};

use super::output::write_eth;
use super::{Work, Worker};

impl<E4: Lpm<u32>, E6: Lpm<u128>> Worker<E4, E6> {
    /// ICMP Destination Unreachable for a packet dropped for `reason`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn unreachable(
        &mut self,
        batch: &mut Batch,
        w: &Work,
        reason: DropReason,
        ports: &Ports,
        fib4: &E4,
        fib6: &E6,
        nh: &NhSnapshot,
        now_ns: u64,
    ) {
        let kind = match (w.v6, reason) {
            (false, DropReason::NoRoute) => ErrorKind::V4(Icmp4Error::NetUnreachable),
            (false, _) => ErrorKind::V4(Icmp4Error::HostUnreachable),
            (true, DropReason::NoRoute) => ErrorKind::V6(Icmp6Error::NoRoute),
            (true, DropReason::Unreachable) => ErrorKind::V6(Icmp6Error::RejectRoute),
            (true, _) => ErrorKind::V6(Icmp6Error::AddressUnreachable),
        };
        self.error_for(batch, w, kind, ports, fib4, fib6, nh, now_ns);
    }

    /// Pass 1's answer to a packet whose TTL (hop limit) ran out: a Time Exceeded error about
    /// it (rate-limited) and the drop. Out of line and cold: kept out of the loop every transit
    /// packet runs, whose registers it would otherwise share.
    #[cold]
    #[inline(never)]
    pub(super) fn expired(
        &mut self,
        batch: &mut Batch,
        w: &Work,
        (ports, nh): (&Ports, &NhSnapshot),
        (fib4, fib6): (&E4, &E6),
        now_ns: u64,
    ) -> Verdict {
        let kind = if w.v6 {
            ErrorKind::V6(Icmp6Error::TimeExceeded)
        } else {
            ErrorKind::V4(Icmp4Error::TimeExceeded)
        };
        self.error_for(batch, w, kind, ports, fib4, fib6, nh, now_ns);
        self.drop(DropReason::TtlExpired)
    }

    /// Sends an ICMP error about work item `w`. The checks that need no buffer come first, in
    /// this order: an address to send from, the rules ([`icmp4_allowed`], [`icmp6_allowed`]),
    /// then a token of the rate limit; only an error that passes them all is copied, built
    /// and routed. So a flood the limit holds back costs a look at each packet's header, not
    /// a build and a route lookup each.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn error_for(
        &mut self,
        batch: &mut Batch,
        w: &Work,
        kind: ErrorKind,
        ports: &Ports,
        fib4: &E4,
        fib6: &E6,
        nh: &NhSnapshot,
        now_ns: u64,
    ) {
        let Some(p) = batch.packets.get(w.idx as usize) else {
            return;
        };
        let Some(port) = ports.get(p.iif) else {
            return;
        };
        let orig = p
            .frame()
            .get(ETH_HEADER..ETH_HEADER + w.ip_len as usize)
            .unwrap_or(&[]);
        match kind {
            ErrorKind::V4(k) => {
                let Some(src) = port.icmp_source4() else {
                    self.counters.event(Event::IcmpNoRoute, 1);
                    return;
                };
                if self.may_answer(icmp4_allowed(orig, w.link_bcast), now_ns) {
                    // Copied: the error is queued on the batch the original lies in.
                    let orig = orig.to_vec();
                    self.icmp4(batch, &orig, w.link_bcast, k, src, port, ports, fib4, nh);
                }
            }
            ErrorKind::V6(k) => {
                let Some(src) = port.icmp_source6() else {
                    self.counters.event(Event::IcmpNoRoute, 1);
                    return;
                };
                if self.may_answer(icmp6_allowed(orig, w.link_bcast, k), now_ns) {
                    let orig = orig.to_vec();
                    self.icmp6(batch, &orig, w.link_bcast, k, src, port, ports, fib6, nh);
                }
            }
        }
    }

    /// Whether an error the rules judged as `rules` may go now: one they forbid is counted as
    /// suppressed and spends no token; otherwise it takes a token of the rate limit, or is
    /// counted as held back by it.
    fn may_answer(&mut self, rules: Result<(), Suppressed>, now_ns: u64) -> bool {
        if rules.is_err() {
            self.counters.event(Event::IcmpSuppressed, 1);
            return false;
        }
        if !self.icmp.allow(now_ns) {
            self.counters.event(Event::IcmpRateLimited, 1);
            return false;
        }
        true
    }

    /// Builds, routes and queues an ICMPv4 error about `orig` (an IPv4 packet), sent from `src`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn icmp4(
        &mut self,
        batch: &mut Batch,
        orig: &[u8],
        link_bcast: bool,
        kind: Icmp4Error,
        src: Ipv4Addr,
        in_port: &Port,
        ports: &Ports,
        fib4: &E4,
        nh: &NhSnapshot,
    ) {
        let mut out = self.take_buffer();
        self.ident = self.ident.wrapping_add(1);
        let built = icmp4_error(
            orig,
            link_bcast,
            kind,
            src,
            self.ident,
            out.buffer_mut().get_mut(ETH_HEADER..).unwrap_or(&mut []),
        );
        // The original's source (zero if it is cut before it: then no route answers).
        let dst = Ipv4Packet::new_unchecked(orig).src_addr();
        let hop = fib4.lookup(u32::from(dst));
        let key = FlowKey::v4(src, dst, 1, 0, 0);
        let reply = Reply {
            hop,
            dst: IpAddr::V4(dst),
            key,
            ethertype: ETHERTYPE_IPV4,
            sent: Event::Icmp4Sent,
        };
        self.send_error(batch, out, built.ok(), reply, in_port, nh, ports);
    }

    /// Builds, routes and queues an ICMPv6 error about `orig` (an IPv6 packet), sent from `src`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn icmp6(
        &mut self,
        batch: &mut Batch,
        orig: &[u8],
        link_mcast: bool,
        kind: Icmp6Error,
        src: Ipv6Addr,
        in_port: &Port,
        ports: &Ports,
        fib6: &E6,
        nh: &NhSnapshot,
    ) {
        let mut out = self.take_buffer();
        let built = icmp6_error(
            orig,
            link_mcast,
            kind,
            src,
            out.buffer_mut().get_mut(ETH_HEADER..).unwrap_or(&mut []),
        );
        let dst = Ipv6Packet::new_unchecked(orig).src_addr();
        let hop = fib6.lookup(u128::from(dst));
        let reply = Reply {
            hop,
            dst: IpAddr::V6(dst),
            key: FlowKey::v6(src, dst, 58, 0, 0),
            ethertype: ETHERTYPE_IPV6,
            sent: Event::Icmp6Sent,
        };
        self.send_error(batch, out, built.ok(), reply, in_port, nh, ports);
    }

    /// The common end of an ICMP error, its rate-limit token taken: `len` is the built
    /// message's length (`None` when it could not be built); routes it back, and queues it or
    /// counts why not.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send_error(
        &mut self,
        batch: &mut Batch,
        mut out: Packet,
        len: Option<usize>,
        reply: Reply,
        in_port: &Port,
        nh: &NhSnapshot,
        ports: &Ports,
    ) {
        let Some(len) = len else {
            self.counters.event(Event::IcmpSuppressed, 1);
            self.spare.push(out);
            return;
        };
        match self.reply_path(reply.hop, reply.dst, &reply.key, nh, ports) {
            Some((oif, mac, port_mac)) => {
                write_eth(out.buffer_mut(), mac, port_mac, reply.ethertype);
                out.set_len(ETH_HEADER + len);
                out.iif = in_port.ifindex;
                out.oif = oif;
                batch.generated.push(out);
                self.counters.event(reply.sent, 1);
            }
            None => {
                self.counters.event(Event::IcmpNoRoute, 1);
                self.spare.push(out);
            }
        }
    }

    /// Where a packet the router originates goes: `(oif, neighbor MAC, port MAC)`, if the
    /// route is usable and the neighbor resolved (an error is not worth holding).
    pub(super) fn reply_path(
        &mut self,
        hop: u32,
        dst: IpAddr,
        key: &FlowKey,
        nh: &NhSnapshot,
        ports: &Ports,
    ) -> Option<(u32, MacAddr, MacAddr)> {
        let out = match route(hop, nh) {
            RouteOutcome::Group {
                nh: g,
                members,
                weights,
            } => {
                let e = nh.get(g)?;
                let hash = self.hasher.hash_fields(key, self.config.ecmp_fields);
                match self
                    .groups
                    .select(g, e.gen, e.version, members, weights, hash, None)
                {
                    EcmpOutcome::Member(m) => single(m, &nh.get(m)?.forward)?,
                    EcmpOutcome::Drop(_) => return None,
                }
            }
            o => o,
        };
        let RouteOutcome::Via {
            ifindex, gateway, ..
        } = out
        else {
            return None;
        };
        let port = ports.get(ifindex)?;
        let found = match gateway.unwrap_or(dst) {
            IpAddr::V4(a) => neighbor(self.arp.get_mut(ifindex as usize)?.as_mut()?.load(), &a),
            IpAddr::V6(a) => neighbor(self.nd.get_mut(ifindex as usize)?.as_mut()?.load(), &a),
        };
        match found {
            NeighOutcome::Resolved { mac, .. } => Some((ifindex, mac, port.mac)),
            _ => None,
        }
    }
}

/// Where an ICMP error goes back to.
pub(super) struct Reply {
    /// The FIB's answer for the offending packet's source.
    hop: u32,
    dst: IpAddr,
    /// For an ECMP choice.
    key: FlowKey,
    ethertype: u16,
    /// The event counted when it is sent.
    sent: Event,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum ErrorKind {
    V4(Icmp4Error),
    V6(Icmp6Error),
}
