//! What happened to every packet: outcome counters, drop reasons, punt classes and events.
//!
//! Every packet a worker receives ends in exactly one outcome, and every drop has exactly one
//! named reason (the VPP habit: one table of counters with a human text each):
//!
//! ```text
//!   rx = forwarded + punted (by class) + held (waiting for a neighbor) + dropped (by reason)
//! ```
//!
//! `tests/counters.rs` checks that balance on arbitrary frames. Events (ICMP errors sent,
//! suppressed or rate-limited, fragments made, flow-table refreshes) are counted besides and do
//! not enter the balance, since one packet may cause several or none.
//!
//! A worker counts into plain `u64` arrays ([`Counters`]) and copies them once per batch into
//! its [`SharedCounters`], a cache-line-aligned block of atomics that only it writes (relaxed
//! stores, no read-modify-write). Anyone may sum the shared blocks of all workers at any time
//! ([`Counters::sum`]) without slowing a worker down: it never waits and never shares a cache
//! line it writes with another worker.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $key:literal, $text:literal;)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            /// Every value, in declaration order (the order of the counter arrays).
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];
            /// Number of values.
            pub const COUNT: usize = $name::ALL.len();

            /// Short machine-readable name (`snake_case`), as printed in JSON.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $key,)*
                }
            }

            /// What it means, for people.
            pub fn text(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// Index into the counter array.
            #[inline]
            pub fn index(self) -> usize {
                self as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

named_enum! {
    /// Why a packet was dropped. Each stage drops only under its own reasons.
    DropReason {
        /// Ethernet input.
        EthTruncated => "eth_truncated", "frame shorter than an Ethernet header";
        EthNotForUs => "eth_not_for_us", "unicast frame addressed to another MAC";
        EthMulticastSource => "eth_multicast_source", "frame with a multicast source MAC";
        EthUnknownType => "eth_unknown_type", "ethertype is not IPv4, IPv6 or ARP";
        NoIngressPort => "no_ingress_port", "frame from an interface the worker does not know";
        /// IPv4 input (RFC 1812 5.2.2).
        Ip4Truncated => "ip4_truncated", "IPv4 header longer than the frame";
        Ip4BadVersion => "ip4_bad_version", "IPv4 ethertype but version is not 4";
        Ip4BadHeaderLen => "ip4_bad_header_len", "IPv4 header length below 20 bytes";
        Ip4BadTotalLen => "ip4_bad_total_len", "IPv4 total length below the header or beyond the frame";
        Ip4BadChecksum => "ip4_bad_checksum", "IPv4 header checksum wrong";
        Ip4MartianSource => "ip4_martian_source", "IPv4 source is multicast, broadcast, loopback, 0/8 or class E";
        Ip4MartianDest => "ip4_martian_dest", "IPv4 destination is 0/8, loopback or class E";
        Ip4BadOptions => "ip4_bad_options", "IPv4 options malformed";
        Ip4SourceRoute => "ip4_source_route", "IPv4 source-routed (LSRR/SSRR), not accepted";
        /// IPv6 input (RFC 8200).
        Ip6Truncated => "ip6_truncated", "IPv6 header longer than the frame";
        Ip6BadVersion => "ip6_bad_version", "IPv6 ethertype but version is not 6";
        Ip6BadPayloadLen => "ip6_bad_payload_len", "IPv6 payload length beyond the frame";
        Ip6MartianSource => "ip6_martian_source", "IPv6 source is multicast or loopback";
        Ip6MartianDest => "ip6_martian_dest", "IPv6 destination is unspecified or loopback";
        Ip6BadExtHeader => "ip6_bad_ext_header", "IPv6 extension header chain malformed or too long";
        Ip6LinkLocal => "ip6_link_local", "IPv6 link-local source or destination cannot leave the link";
        /// Classification.
        MulticastNotForwarded => "multicast_not_forwarded", "multicast for a group the router does not forward";
        BroadcastNotForwarded => "broadcast_not_forwarded", "link-layer broadcast of a packet not for the router";
        /// TTL / hop limit.
        TtlExpired => "ttl_expired", "TTL or hop limit expired in transit";
        /// Route lookup.
        NoRoute => "no_route", "no route to the destination";
        Blackhole => "blackhole", "route is a blackhole";
        Unreachable => "unreachable", "route is unreachable (reject)";
        NextHopMissing => "nexthop_missing", "route names a next hop absent from the next-hop table";
        EcmpEmpty => "ecmp_empty", "ECMP group without a usable member";
        NoEgressPort => "no_egress_port", "next hop on an interface the worker does not know";
        HairpinLocal => "local_route_mismatch", "route says local but the address is not the router's";
        /// Neighbor resolution.
        NeighborFailed => "neighbor_failed", "next hop did not answer address resolution";
        /// MTU.
        MtuExceededDf => "mtu_exceeded_df", "IPv4 larger than the egress MTU with DF set";
        MtuExceeded6 => "mtu_exceeded_v6", "IPv6 larger than the egress MTU";
        FragmentationDisabled => "fragmentation_disabled", "IPv4 larger than the egress MTU, fragmentation disabled";
        FragmentFailed => "fragment_failed", "IPv4 could not be fragmented (MTU too small for its header)";
    }
}

named_enum! {
    /// Traffic handed to the control plane, by class (rate-limited by class downstream).
    PuntClass {
        ArpNd => "arp_nd", "ARP and Neighbor Discovery";
        Routing => "routing", "routing protocols (BGP, OSPF, RIP, BFD, VRRP, PIM)";
        Icmp => "icmp", "ICMP and ICMPv6 to the router";
        Local => "local", "other traffic to the router's addresses";
        SlowPath => "slow_path", "router alert or hop-by-hop options";
    }
}

named_enum! {
    /// The end of a packet: exactly one per packet received.
    Outcome {
        Forwarded => "forwarded", "sent to an egress interface";
        Punted => "punted", "handed to the control plane";
        Held => "held", "waiting for its next hop to resolve";
        Dropped => "dropped", "dropped (by reason)";
    }
}

named_enum! {
    /// Things counted besides a packet's outcome.
    Event {
        Rx => "rx", "packets received";
        FlowHit => "flow_hit", "route and neighbor taken from the flow table";
        FlowMiss => "flow_miss", "flow not in the table: looked up and inserted";
        FlowStale => "flow_stale", "flow entry outdated by a route, next-hop or neighbor change: refreshed";
        FlowEvicted => "flow_evicted", "flow entry evicted to make room";
        FlowRefused => "flow_refused", "new flow left uncached: its bucket's entries all used within the last second";
        EcmpKept => "ecmp_kept", "flow kept its ECMP member across a group change";
        Icmp4Sent => "icmp4_sent", "ICMPv4 errors sent";
        Icmp6Sent => "icmp6_sent", "ICMPv6 errors sent";
        IcmpRateLimited => "icmp_rate_limited", "ICMP errors not sent: rate limit";
        IcmpSuppressed => "icmp_suppressed", "ICMP errors not sent: never answered (an error, multicast, broadcast, non-first fragment, bad source)";
        IcmpNoRoute => "icmp_no_route", "ICMP errors not sent: no usable route back to the source";
        FragmentsMade => "fragments_made", "IPv4 fragments created";
        Ip4Options => "ip4_options", "IPv4 packets forwarded with options";
    }
}

/// A worker's counters, plain integers (the worker's own copy, or a sum over workers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counters {
    /// Per [`Outcome`].
    pub outcomes: [u64; Outcome::COUNT],
    /// Per [`DropReason`].
    pub drops: [u64; DropReason::COUNT],
    /// Per [`PuntClass`].
    pub punts: [u64; PuntClass::COUNT],
    /// Per [`Event`].
    pub events: [u64; Event::COUNT],
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            outcomes: [0; Outcome::COUNT],
            drops: [0; DropReason::COUNT],
            punts: [0; PuntClass::COUNT],
            events: [0; Event::COUNT],
        }
    }
}

impl Counters {
    /// Counts one drop (outcome and reason).
    #[inline]
    pub fn drop(&mut self, reason: DropReason) {
        bump(&mut self.drops, reason.index());
        bump(&mut self.outcomes, Outcome::Dropped.index());
    }

    /// Counts one punt (outcome and class).
    #[inline]
    pub fn punt(&mut self, class: PuntClass) {
        bump(&mut self.punts, class.index());
        bump(&mut self.outcomes, Outcome::Punted.index());
    }

    /// Counts one forwarded packet.
    #[inline]
    pub fn forwarded(&mut self) {
        bump(&mut self.outcomes, Outcome::Forwarded.index());
    }

    /// Counts one packet held for neighbor resolution.
    #[inline]
    pub fn held(&mut self) {
        bump(&mut self.outcomes, Outcome::Held.index());
    }

    /// Counts `n` of an event.
    #[inline]
    pub fn event(&mut self, e: Event, n: u64) {
        if let Some(v) = self.events.get_mut(e.index()) {
            *v = v.wrapping_add(n);
        }
    }

    /// The value of one outcome counter.
    pub fn outcome(&self, o: Outcome) -> u64 {
        self.outcomes.get(o.index()).copied().unwrap_or(0)
    }

    /// The value of one drop counter.
    pub fn dropped(&self, r: DropReason) -> u64 {
        self.drops.get(r.index()).copied().unwrap_or(0)
    }

    /// The value of one punt counter.
    pub fn punted(&self, c: PuntClass) -> u64 {
        self.punts.get(c.index()).copied().unwrap_or(0)
    }

    /// The value of one event counter.
    pub fn get(&self, e: Event) -> u64 {
        self.events.get(e.index()).copied().unwrap_or(0)
    }

    /// Packets received.
    pub fn rx(&self) -> u64 {
        self.get(Event::Rx)
    }

    /// Whether every received packet is accounted for exactly once:
    /// `rx = forwarded + punted + held + dropped`, punts add up by class and drops by reason.
    pub fn balanced(&self) -> bool {
        let outcomes: u64 = self.outcomes.iter().sum();
        let drops: u64 = self.drops.iter().sum();
        let punts: u64 = self.punts.iter().sum();
        outcomes == self.rx()
            && drops == self.outcome(Outcome::Dropped)
            && punts == self.outcome(Outcome::Punted)
    }

    /// Adds another set of counters to this one.
    pub fn add(&mut self, other: &Counters) {
        fn add_all(a: &mut [u64], b: &[u64]) {
            for (x, y) in a.iter_mut().zip(b) {
                *x = x.wrapping_add(*y);
            }
        }
        add_all(&mut self.outcomes, &other.outcomes);
        add_all(&mut self.drops, &other.drops);
        add_all(&mut self.punts, &other.punts);
        add_all(&mut self.events, &other.events);
    }

    /// The sum over workers' shared blocks, read without stopping them.
    pub fn sum<'a>(workers: impl IntoIterator<Item = &'a SharedCounters>) -> Counters {
        let mut total = Counters::default();
        for w in workers {
            total.add(&w.read());
        }
        total
    }

    /// Every non-zero counter as `(group, name, value)`, in a fixed order.
    pub fn nonzero(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut out = Vec::new();
        for (o, v) in Outcome::ALL.iter().zip(&self.outcomes) {
            if *v != 0 {
                out.push(("outcome", o.name(), *v));
            }
        }
        for (r, v) in DropReason::ALL.iter().zip(&self.drops) {
            if *v != 0 {
                out.push(("drop", r.name(), *v));
            }
        }
        for (c, v) in PuntClass::ALL.iter().zip(&self.punts) {
            if *v != 0 {
                out.push(("punt", c.name(), *v));
            }
        }
        for (e, v) in Event::ALL.iter().zip(&self.events) {
            if *v != 0 {
                out.push(("event", e.name(), *v));
            }
        }
        out
    }
}

#[inline]
fn bump(a: &mut [u64], i: usize) {
    if let Some(v) = a.get_mut(i) {
        *v = v.wrapping_add(1);
    }
}

const TOTAL: usize = Outcome::COUNT + DropReason::COUNT + PuntClass::COUNT + Event::COUNT;

/// One worker's published counters: written by that worker only (relaxed stores once per
/// batch), read by anyone. Aligned to a cache line so two workers never share one.
#[repr(align(64))]
pub struct SharedCounters {
    vals: [AtomicU64; TOTAL],
}

impl Default for SharedCounters {
    fn default() -> Self {
        SharedCounters {
            vals: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl fmt::Debug for SharedCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedCounters")
            .field("rx", &self.read().rx())
            .finish_non_exhaustive()
    }
}

impl SharedCounters {
    /// Copies a worker's counters in (the worker calls this after each batch).
    pub fn store(&self, c: &Counters) {
        let src = c
            .outcomes
            .iter()
            .chain(&c.drops)
            .chain(&c.punts)
            .chain(&c.events);
        for (dst, v) in self.vals.iter().zip(src) {
            dst.store(*v, Ordering::Relaxed);
        }
    }

    /// A copy of the counters as last stored.
    pub fn read(&self) -> Counters {
        let mut c = Counters::default();
        let dst = c
            .outcomes
            .iter_mut()
            .chain(c.drops.iter_mut())
            .chain(c.punts.iter_mut())
            .chain(c.events.iter_mut());
        for (d, v) in dst.zip(&self.vals) {
            *d = v.load(Ordering::Relaxed);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_snake_case() {
        let mut names: Vec<&str> = DropReason::ALL.iter().map(|r| r.name()).collect();
        names.extend(PuntClass::ALL.iter().map(|c| c.name()));
        names.extend(Event::ALL.iter().map(|e| e.name()));
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
        assert!(names.iter().all(|s| s
            .chars()
            .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())));
    }

    #[test]
    fn balance_and_shared_round_trip() {
        let mut c = Counters::default();
        c.event(Event::Rx, 4);
        c.forwarded();
        c.punt(PuntClass::ArpNd);
        c.held();
        assert!(!c.balanced());
        c.drop(DropReason::NoRoute);
        assert!(c.balanced());
        let shared = SharedCounters::default();
        shared.store(&c);
        assert_eq!(shared.read(), c);
        let total = Counters::sum([&shared, &shared]);
        assert_eq!(total.rx(), 8);
        assert_eq!(total.dropped(DropReason::NoRoute), 2);
        assert!(total.balanced());
        assert_eq!(std::mem::align_of::<SharedCounters>(), 64);
    }
}
