//! The worker's neighbor caches: per-port epochs of the ARP and ND snapshots, the memo of a
//! gateway's neighbor (checked by generation on every use), and lookups in a port's table.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vfsr_lpm::Lpm;
use vfsr_neigh::NeighborCache;

use crate::stage::neighbor::{neighbor, NeighOutcome};

use super::{Adj, PortEpoch, Worker, MAX_ADJ};

impl<E4: Lpm<u32>, E6: Lpm<u128>> Worker<E4, E6> {
    /// Notes which ports' neighbor snapshots changed since the last batch (two atomic reads
    /// per port): references cached in an unchanged port's epoch stay valid without a check.
    /// Whether any port's epoch moved.
    pub(super) fn refresh_epochs(&mut self) -> bool {
        let mut moved = false;
        let ports = self.arp.iter_mut().zip(self.nd.iter_mut());
        for ((a, n), e) in ports.zip(self.epochs.iter_mut()) {
            let pa = a.as_mut().map_or(0, |c| c.load().serial());
            let pn = n.as_mut().map_or(0, |c| c.load().serial());
            if pa != e.arp || pn != e.nd || e.epoch == 0 {
                e.arp = pa;
                e.nd = pn;
                e.epoch = e.epoch.wrapping_add(1).max(1);
                moved = true;
            }
        }
        moved
    }

    /// The neighbor of gateway next hop `member`: from the memo when its `(id, gen)` is
    /// still current, else looked up in the interface's table (and memoized).
    #[inline]
    pub(super) fn neighbor_of_gateway(
        &mut self,
        member: u32,
        nh_gen: u32,
        nh_version: u32,
        ifindex: u32,
        target: IpAddr,
    ) -> NeighOutcome {
        let now = epoch_of(&self.epochs, ifindex);
        if let Some(a) = self.adj.get(member as usize).copied() {
            if a.made_for(member, nh_gen, nh_version) && a.ifindex == ifindex {
                let fresh = a.epoch == now
                    || neigh_current(
                        &mut self.arp,
                        &mut self.nd,
                        target.is_ipv6(),
                        ifindex,
                        a.id,
                        a.gen,
                    );
                if fresh {
                    if a.epoch != now {
                        if let Some(m) = self.adj.get_mut(member as usize) {
                            m.epoch = now;
                        }
                    }
                    return NeighOutcome::Resolved {
                        mac: a.mac,
                        id: a.id,
                        gen: a.gen,
                    };
                }
            }
        }
        let found = self.neighbor_lookup(ifindex, target);
        if let NeighOutcome::Resolved { mac, id, gen } = found {
            if member < MAX_ADJ {
                let i = member as usize;
                if self.adj.len() <= i {
                    self.adj.resize(i + 1, Adj::default());
                }
                if let Some(slot) = self.adj.get_mut(i) {
                    *slot = Adj {
                        epoch: epoch_of(&self.epochs, ifindex),
                        tag: member.wrapping_add(1),
                        nh_gen,
                        nh_version,
                        ifindex,
                        id,
                        gen,
                        mac,
                        world: 0,
                    };
                }
            }
        }
        found
    }

    /// Looks `target` up in port `ifindex`'s ARP or ND table.
    #[inline]
    pub(super) fn neighbor_lookup(&mut self, ifindex: u32, target: IpAddr) -> NeighOutcome {
        match target {
            IpAddr::V4(a) => match self.arp.get_mut(ifindex as usize) {
                Some(Some(c)) => neighbor(c.load(), &a),
                _ => NeighOutcome::Miss,
            },
            IpAddr::V6(a) => match self.nd.get_mut(ifindex as usize) {
                Some(Some(c)) => neighbor(c.load(), &a),
                _ => NeighOutcome::Miss,
            },
        }
    }
}

/// The current epoch of port `oif` (0 for an unknown port: never matches).
#[inline]
pub(super) fn epoch_of(epochs: &[PortEpoch], oif: u32) -> u32 {
    epochs.get(oif as usize).map_or(0, |e| e.epoch)
}

/// Whether a cached neighbor reference is current.
#[inline]
pub(super) fn neigh_current(
    arp: &mut [Option<NeighborCache<Ipv4Addr>>],
    nd: &mut [Option<NeighborCache<Ipv6Addr>>],
    v6: bool,
    oif: u32,
    id: u32,
    gen: u64,
) -> bool {
    if v6 {
        match nd.get_mut(oif as usize) {
            Some(Some(c)) => c.load().is_current(id, gen),
            _ => false,
        }
    } else {
        match arp.get_mut(oif as usize) {
            Some(Some(c)) => c.load().is_current(id, gen),
            _ => false,
        }
    }
}
