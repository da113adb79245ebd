//! Policing of control classes in the steering program (`bpf/xsk_steer.c`).
//!
//! Control frames leave XDP for the kernel, where the control plane reads them from the
//! port's raw socket and rate-limits them per class. Under a flood of ARP requests, pings or
//! TCP SYNs to the router, every flooded frame would still cost the kernel's receive path, a
//! socket buffer and a read on the control plane's core before its token bucket dropped it,
//! and the frames queued behind it (a BGP keepalive, an ssh segment) would wait for all of
//! that. The program therefore keeps a token bucket of its own for four of the pipeline's
//! punt classes, classed by the same rules (ARP/ND, ICMP to the router, and for frames to
//! one of the router's addresses routing protocols and everything else), and drops what
//! exceeds it there, counted per class. Frames it cannot class as the pipeline would
//! (group-addressed ones other than ARP, ND and ICMP, IPv6 with extension headers) pass
//! to the control plane unpoliced. TCP connection attempts to the router (SYN without ACK,
//! routing or local) take their token from a bucket of their own ([`Policer::set_tcp_syn`])
//! and are counted under their class, so that a SYN flood cannot spend the tokens the
//! segments of established BGP or ssh sessions need.
//!
//! The bucket is per CPU (no atomics in the receive path): with n CPUs receiving, up to n
//! times the rate passes, and the control plane's own bucket makes the exact cut. Until
//! [`Policer::set`] is called for a class, the program does not police it.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::fast::{dup, read_counter};
use crate::bpf;
use crate::IoError;

/// Counter slots of the program's `counters` map for frames dropped by policing.
const CNT_POLICED_ARP_ND: u32 = 5;
const CNT_POLICED_ICMP: u32 = 6;
const CNT_POLICED_ROUTING: u32 = 7;
const CNT_POLICED_LOCAL: u32 = 8;
/// The `police_cfg` key of the bucket of TCP connection attempts.
const BUCKET_SYN: u32 = 4;
/// Credit units one token costs (as in the control plane's token bucket).
const TOKEN: u64 = 1_000_000_000;

/// A control class the program polices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicedClass {
    /// ARP, and ICMPv6 133..137 (router and neighbor discovery, redirects).
    ArpNd,
    /// ICMP to the router: IPv4 protocol 1, ICMPv6 other than neighbor discovery and MLD.
    Icmp,
    /// Routing protocols to one of the router's addresses: IGMP, OSPF, PIM, VRRP, MLD, BGP
    /// (TCP 179), RIP, RIPng and BFD (UDP 520, 521, 3784, 3785, 4784).
    Routing,
    /// Everything else to one of the router's addresses (ssh, SNMP, ...).
    Local,
}

impl PolicedClass {
    /// Every class the program polices.
    pub const ALL: [PolicedClass; 4] = [
        PolicedClass::ArpNd,
        PolicedClass::Icmp,
        PolicedClass::Routing,
        PolicedClass::Local,
    ];

    /// Its key in the program's `police_cfg` map.
    fn key(self) -> u32 {
        match self {
            PolicedClass::ArpNd => 0,
            PolicedClass::Icmp => 1,
            PolicedClass::Routing => 2,
            PolicedClass::Local => 3,
        }
    }

    fn counter(self) -> u32 {
        match self {
            PolicedClass::ArpNd => CNT_POLICED_ARP_ND,
            PolicedClass::Icmp => CNT_POLICED_ICMP,
            PolicedClass::Routing => CNT_POLICED_ROUTING,
            PolicedClass::Local => CNT_POLICED_LOCAL,
        }
    }
}

/// Frames the program dropped by policing, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolicedCounters {
    /// ARP and neighbor discovery.
    pub arp_nd: u64,
    /// ICMP to the router.
    pub icmp: u64,
    /// Routing protocols to the router.
    pub routing: u64,
    /// Everything else to the router.
    pub local: u64,
}

impl PolicedCounters {
    /// The count of `class`.
    pub fn get(&self, class: PolicedClass) -> u64 {
        match class {
            PolicedClass::ArpNd => self.arp_nd,
            PolicedClass::Icmp => self.icmp,
            PolicedClass::Routing => self.routing,
            PolicedClass::Local => self.local,
        }
    }
}

/// The value written to `police_cfg` for `rate` tokens per second and `burst` stored: the
/// switch, the rate, the cap (`burst` × 10^9 credit units) and the nanoseconds that fill an
/// empty bucket. A burst of 0 is taken as 1, as the control plane's bucket takes it.
fn config_bytes(rate: u32, burst: u32) -> [u8; 24] {
    let cap = TOKEN.saturating_mul(u64::from(burst.max(1)));
    let fill_ns = match u64::from(rate) {
        0 => u64::MAX,
        r => cap.div_ceil(r),
    };
    let mut b = [0u8; 24];
    b[0..4].copy_from_slice(&1u32.to_ne_bytes());
    b[4..8].copy_from_slice(&rate.to_ne_bytes());
    b[8..16].copy_from_slice(&cap.to_ne_bytes());
    b[16..24].copy_from_slice(&fill_ns.to_ne_bytes());
    b
}

/// A handle on one interface's control-class buckets; it holds its own descriptors of the
/// program's maps and can be moved to any thread.
pub struct Policer {
    name: String,
    cfg: OwnedFd,
    counters: OwnedFd,
}

impl Policer {
    /// The buckets of a loaded `xsk_steer` object (`name` names it in errors).
    pub fn for_object(name: &str, obj: &bpf::BpfObject) -> Result<Policer, IoError> {
        Ok(Policer {
            name: name.to_string(),
            cfg: dup(obj.map_fd("police_cfg")?, "police_cfg")?,
            counters: dup(obj.map_fd("counters")?, "counters")?,
        })
    }

    /// The interface.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Polices `class` at `rate` frames per second per CPU with `burst` stored (a rate of 0
    /// drops every frame of the class). Takes effect at the next frame.
    pub fn set(&self, class: PolicedClass, rate: u32, burst: u32) -> Result<(), IoError> {
        self.set_bucket(class.key(), &format!("{class:?}"), rate, burst)
    }

    /// Polices TCP connection attempts to the router (SYN without ACK, whatever their
    /// class) at `rate` per second per CPU with `burst` stored, apart from their class's
    /// bucket. Until this is called they take their class's tokens.
    pub fn set_tcp_syn(&self, rate: u32, burst: u32) -> Result<(), IoError> {
        self.set_bucket(BUCKET_SYN, "TCP SYNs", rate, burst)
    }

    /// Writes bucket `key` of `police_cfg` (`what` names it in errors).
    fn set_bucket(&self, key: u32, what: &str, rate: u32, burst: u32) -> Result<(), IoError> {
        bpf::map_update(
            self.cfg.as_raw_fd(),
            &key.to_ne_bytes(),
            &config_bytes(rate, burst),
        )
        .map_err(|e| IoError::Unsupported(format!("{}: policing {what}: {e}", self.name)))
    }

    /// Frames dropped so far, per class.
    pub fn counters(&self) -> Result<PolicedCounters, IoError> {
        read_policed(self.counters.as_raw_fd())
    }
}

/// The policing counters of a program's `counters` map.
pub(super) fn read_policed(counters: RawFd) -> Result<PolicedCounters, IoError> {
    let read = |c: PolicedClass| read_counter(counters, c.counter());
    Ok(PolicedCounters {
        arp_nd: read(PolicedClass::ArpNd)?,
        icmp: read(PolicedClass::Icmp)?,
        routing: read(PolicedClass::Routing)?,
        local: read(PolicedClass::Local)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_bytes_follow_the_program_struct() {
        let b = config_bytes(2000, 200);
        assert_eq!(&b[0..4], &1u32.to_ne_bytes());
        assert_eq!(&b[4..8], &2000u32.to_ne_bytes());
        assert_eq!(&b[8..16], &200_000_000_000u64.to_ne_bytes());
        // 200 tokens at 2000/s: 0.1 s fills the bucket.
        assert_eq!(&b[16..24], &100_000_000u64.to_ne_bytes());
    }

    #[test]
    fn fill_time_rounds_up_and_rate_zero_never_fills() {
        // 3/s, burst 1: 10^9 / 3 rounded up, so a refill after fill_ns is never short.
        let b = config_bytes(3, 1);
        assert_eq!(&b[16..24], &333_333_334u64.to_ne_bytes());
        let z = config_bytes(0, 0);
        assert_eq!(&z[4..8], &0u32.to_ne_bytes());
        assert_eq!(&z[8..16], &TOKEN.to_ne_bytes());
        assert_eq!(&z[16..24], &u64::MAX.to_ne_bytes());
    }
}
