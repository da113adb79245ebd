//! The workers' side of the XDP fast path (see `vfsr_io::xdp::FastPath`): after each batch
//! a worker stores, in the ingress port's table, the decisions the pipeline reported as
//! depending on the destination alone (`Batch::offload`), so that the port's XDP program
//! forwards later frames to those destinations itself.
//!
//! ```text
//!   generation = fast.generation()        read before the pipeline loads any snapshot
//!   worker.process(batch)                 decisions from the current snapshots
//!   for i in batch.offload:               one next hop, MAC resolved, fits the MTU
//!       fast.install(dst(i), {generation, oif, MACs from the rewritten frame, MTU(oif)})
//! ```
//!
//! An entry costs one system call (a BPF map update, about a microsecond), so installs are
//! bounded: a destination installed under the current generation is not installed again
//! (a small direct-mapped memory of recent installs), and a token bucket caps the rate, so
//! traffic the fast path cannot hold (more live destinations than its table, or frames it
//! always refuses) costs the worker a bounded share of its time. Only ports whose program
//! can redirect to the egress (`tx_ports`) get entries for it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vfsr_fwd::ratelimit::TokenBucket;
use vfsr_fwd::Batch;
use vfsr_io::xdp::{FastEntry, FastPath};

/// Installs per second one worker may make into one port's table.
pub const INSTALL_RATE: u32 = 200_000;
/// Slots of the memory of recent installs.
const RECENT: usize = 4096;

/// What an installer did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InstallCounters {
    /// Entries written.
    pub installed: u64,
    /// Candidates skipped because the rate limit was reached.
    pub limited: u64,
    /// Writes the kernel refused.
    pub failed: u64,
}

impl InstallCounters {
    /// Adds `o`'s counts to these.
    pub fn add(&mut self, o: &InstallCounters) {
        self.installed += o.installed;
        self.limited += o.limited;
        self.failed += o.failed;
    }
}

/// One worker's installer for one ingress port.
pub struct FastInstaller {
    path: FastPath,
    /// The IP MTU of each egress port by pipeline index (0: not an egress of the fast path).
    mtu: Vec<u16>,
    /// (destination, generation) of recent installs, by a hash of the destination.
    recent: Vec<(u128, u32, bool)>,
    bucket: TokenBucket,
    /// Counters.
    pub counters: InstallCounters,
}

impl FastInstaller {
    /// An installer writing into `path`; `mtu[oif]` is the MTU of egress port `oif`, 0
    /// where the program cannot send.
    pub fn new(path: FastPath, mtu: Vec<u16>) -> FastInstaller {
        FastInstaller {
            path,
            mtu,
            recent: vec![(0, 0, false); RECENT],
            bucket: TokenBucket::new(INSTALL_RATE, INSTALL_RATE / 50),
            counters: InstallCounters::default(),
        }
    }

    /// The generation to tag this batch's decisions with: call before processing it.
    #[inline]
    pub fn generation(&self) -> u32 {
        self.path.generation()
    }

    /// Installs the batch's destination-only decisions under `gen`.
    pub fn install(&mut self, batch: &Batch, gen: u32, now_ns: u64) {
        for &i in &batch.offload {
            let Some(p) = batch.packets.get(i as usize) else {
                continue;
            };
            let mtu = self.mtu.get(p.oif as usize).copied().unwrap_or(0);
            if mtu == 0 {
                continue;
            }
            let Some((dst, key, v6)) = destination(p.frame()) else {
                continue;
            };
            let slot = slot_of(key, v6);
            if self.recent.get(slot) == Some(&(key, gen, v6)) {
                continue;
            }
            if !self.bucket.allow(now_ns) {
                self.counters.limited += 1;
                continue;
            }
            let f = p.frame();
            let mut dmac = [0u8; 6];
            let mut smac = [0u8; 6];
            if let (Some(d), Some(s)) = (f.get(0..6), f.get(6..12)) {
                dmac.copy_from_slice(d);
                smac.copy_from_slice(s);
            }
            let entry = FastEntry {
                gen,
                port: p.oif,
                dmac,
                smac,
                mtu,
            };
            match self.path.install(dst, &entry) {
                Ok(()) => {
                    self.counters.installed += 1;
                    if let Some(r) = self.recent.get_mut(slot) {
                        *r = (key, gen, v6);
                    }
                }
                Err(_) => self.counters.failed += 1,
            }
        }
    }
}

/// The destination address of a rewritten frame (Ethernet + IPv4 or IPv6).
fn destination(f: &[u8]) -> Option<(IpAddr, u128, bool)> {
    match f.get(12..14)? {
        [0x08, 0x00] => {
            let b: [u8; 4] = f.get(30..34)?.try_into().ok()?;
            Some((
                Ipv4Addr::from(b).into(),
                u128::from(u32::from_be_bytes(b)),
                false,
            ))
        }
        [0x86, 0xdd] => {
            let b: [u8; 16] = f.get(38..54)?.try_into().ok()?;
            Some((Ipv6Addr::from(b).into(), u128::from_be_bytes(b), true))
        }
        _ => None,
    }
}

fn slot_of(key: u128, v6: bool) -> usize {
    let x = (key as u64) ^ ((key >> 64) as u64) ^ u64::from(v6);
    (x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52) as usize % RECENT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_are_read_from_rewritten_frames() {
        let mut f = vec![0u8; 60];
        f[12] = 0x08;
        f[30..34].copy_from_slice(&[198, 51, 100, 7]);
        let (a, k, v6) = destination(&f).unwrap();
        assert_eq!(a, IpAddr::from([198, 51, 100, 7]));
        assert_eq!(k, 0xc633_6407);
        assert!(!v6);
        let mut g = vec![0u8; 60];
        g[12] = 0x86;
        g[13] = 0xdd;
        g[38] = 0x20;
        g[39] = 0x01;
        g[53] = 5;
        let (a, _, v6) = destination(&g).unwrap();
        assert_eq!(a, "2001::5".parse::<IpAddr>().unwrap());
        assert!(v6);
        assert_eq!(destination(&g[..40]), None);
        let mut arp = f.clone();
        arp[13] = 0x06;
        assert_eq!(destination(&arp), None);
    }

    #[test]
    fn slots_stay_in_range() {
        for k in [0u128, 1, u128::MAX, 0xc633_6407] {
            assert!(slot_of(k, false) < RECENT);
            assert!(slot_of(k, true) < RECENT);
        }
    }
}
