//! Policing of control classes in the steering program (`bpf/xsk_steer.c`).
//!
//! Control frames leave XDP for the kernel, where the control plane reads them from the
//! port's raw socket and rate-limits them per class. Under a flood of ARP requests or pings
//! with random sources, every flooded frame would still cost the kernel's receive path, a
//! socket buffer and a read on the control plane's core before its token bucket dropped it,
//! and the frames queued behind it (a BGP keepalive, an ssh segment) would wait for all of
//! that. The program therefore keeps a token bucket of its own for the two classes that
//! are cheap to tell apart in the receive hook, ARP/ND and ICMP to the router, and drops
//! what exceeds it there, counted per class.
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
/// Credit units one token costs (as in the control plane's token bucket).
const TOKEN: u64 = 1_000_000_000;

/// A control class the program polices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicedClass {
    /// ARP, and ICMPv6 133..137 (router and neighbor discovery, redirects).
    ArpNd,
    /// ICMP to the router: IPv4 protocol 1, ICMPv6 other than neighbor discovery and MLD.
    Icmp,
}

impl PolicedClass {
    /// Both classes.
    pub const ALL: [PolicedClass; 2] = [PolicedClass::ArpNd, PolicedClass::Icmp];

    /// Its key in the program's `police_cfg` map.
    fn key(self) -> u32 {
        match self {
            PolicedClass::ArpNd => 0,
            PolicedClass::Icmp => 1,
        }
    }

    fn counter(self) -> u32 {
        match self {
            PolicedClass::ArpNd => CNT_POLICED_ARP_ND,
            PolicedClass::Icmp => CNT_POLICED_ICMP,
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
}

impl PolicedCounters {
    /// The count of `class`.
    pub fn get(&self, class: PolicedClass) -> u64 {
        match class {
            PolicedClass::ArpNd => self.arp_nd,
            PolicedClass::Icmp => self.icmp,
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
        bpf::map_update(
            self.cfg.as_raw_fd(),
            &class.key().to_ne_bytes(),
            &config_bytes(rate, burst),
        )
        .map_err(|e| IoError::Unsupported(format!("{}: policing {class:?}: {e}", self.name)))
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
