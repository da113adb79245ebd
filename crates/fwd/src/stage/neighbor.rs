//! Stage 6, `neighbor`: the L2 half of the split — the egress interface's own ARP (IPv4) or
//! ND (IPv6) table gives the MAC.
//!
//! ```text
//!   entry usable (REACHABLE, STALE, DELAY, PROBE) ──▶ Resolved { mac, id, gen }
//!   no entry, or INCOMPLETE ───────────────────────▶ Miss: the packet goes to the control
//!                                                    plane, which holds it (a few per
//!                                                    neighbor, drops beyond counted there)
//!                                                    and sends ARP request / NS
//!   FAILED ────────────────────────────────────────▶ neighbor_failed + ICMP host unreachable
//! ```
//!
//! The worker reads a published snapshot without locking. `(id, gen)` is what a flow entry
//! keeps: the FreeBSD paper's LLE reference, whose change the worker detects without a lock by
//! comparing generations. A failed resolution changes nothing in the FIB: routes stay, only
//! this neighbor's packets are refused until it answers again.

use vfsr_neigh::{NeighAddr, NeighborSnapshot, State};
use vfsr_wire::MacAddr;

/// What `neighbor` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighOutcome {
    /// Send to this MAC; `(id, gen)` detect a later change.
    Resolved {
        /// The neighbor's MAC.
        mac: MacAddr,
        /// Slot in the table.
        id: u32,
        /// Generation of the entry.
        gen: u64,
    },
    /// Not resolved yet: hand the packet to the control plane.
    Miss,
    /// Resolution failed: drop, answer host unreachable.
    Failed,
}

/// Runs the stage: looks `addr` up in `table`.
#[inline]
pub fn neighbor<A: NeighAddr>(table: &NeighborSnapshot<A>, addr: &A) -> NeighOutcome {
    match table.lookup(addr) {
        Some(e) => match e.usable_mac() {
            Some(mac) => NeighOutcome::Resolved {
                mac,
                id: e.id,
                gen: e.gen,
            },
            None if e.state == State::Failed => NeighOutcome::Failed,
            None => NeighOutcome::Miss,
        },
        None => NeighOutcome::Miss,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use vfsr_neigh::{Event, NeighborConfig, NeighborTable};

    #[test]
    fn miss_resolved_failed_and_generation() {
        let mut t: NeighborTable<Ipv4Addr, u32> = NeighborTable::new(NeighborConfig::default());
        let r = t.reader();
        let gw = Ipv4Addr::new(192, 0, 2, 1);
        assert_eq!(neighbor(&r.load(), &gw), NeighOutcome::Miss);
        t.resolve(gw, 1, 0);
        t.publish();
        assert_eq!(neighbor(&r.load(), &gw), NeighOutcome::Miss); // INCOMPLETE
        let mac = MacAddr([2, 0, 0, 0, 0, 7]);
        t.apply(
            gw,
            Event::Advert {
                mac: Some(mac),
                solicited: true,
                override_flag: true,
            },
            1,
        );
        t.publish();
        let NeighOutcome::Resolved { mac: m, id, gen } = neighbor(&r.load(), &gw) else {
            panic!("not resolved");
        };
        assert_eq!(m, mac);
        assert!(r.load().is_current(id, gen));
        // A new MAC: the old (id, gen) is no longer current.
        t.apply(
            gw,
            Event::Advert {
                mac: Some(MacAddr([2, 0, 0, 0, 0, 8])),
                solicited: true,
                override_flag: true,
            },
            2,
        );
        t.publish();
        assert!(!r.load().is_current(id, gen));
        // Let resolution time out: FAILED.
        let mut now = 2;
        t.remove(&gw);
        t.resolve(gw, 2, now);
        for _ in 0..100 {
            now += 1000;
            t.expire(now);
        }
        t.publish();
        assert_eq!(neighbor(&r.load(), &gw), NeighOutcome::Failed);
    }
}
