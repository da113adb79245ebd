//! The unified routing design that the split design replaced, as a baseline to measure
//! against (the "legacy" design of Li and Macy's FreeBSD routing paper: section 1.2, "Limitations of the Legacy
//! Unified Design", and the legacy curves of Figures 7 and 9).
//!
//! Before FreeBSD 8, one routing table held everything: every prefix route is an `rtentry`
//! with its own mutex (`rt_mtx`) guarding its reference count (`rt_refcnt`), and the ARP and
//! ND entries are "cloned" host routes in the same radix tree, their link-layer data hanging
//! off the entry (`rt_llinfo`). An indirect route reaches its gateway's cloned host route
//! through `rt_gwroute`. Every forwarded packet goes through it, under shared locks:
//!
//! ```text
//!   ip_forward
//!     rtalloc_ign → rtalloc1:
//!         RADIX_NODE_HEAD_LOCK ─ rn_match(dst) ─ RT_LOCK(rt) ─ RT_ADDREF(rt) ─
//!         RADIX_NODE_HEAD_UNLOCK ─ RT_UNLOCK(rt)
//!     ip_output → ether_output → arpresolve → rt_check:
//!         RT_LOCK(rt) ─ gw = rt->rt_gwroute ─ RT_LOCK(gw) ─ RT_UNLOCK(rt) ─
//!         read gw->rt_llinfo (the MAC) ─ RT_UNLOCK(gw)
//!     RTFREE(rt):
//!         RT_LOCK(rt) ─ RT_REMREF(rt) ─ RT_UNLOCK(rt)
//! ```
//!
//! Five lock acquisitions per packet, written on three shared cache lines: the radix head's
//! lock (every lookup of the family, serialized), the route entry's lock and count (taken
//! three times per packet; shared by all flows to the same prefix), and the gateway host
//! route's lock (shared by every route through that gateway; with a default route, by all
//! traffic).
//! With one core they cost the uncontended price; with several, the lines bounce between
//! cores and the head lock serializes the lookups: the paper's flat legacy curves.
//!
//! [`LegacyRouter`] reproduces that with `std::sync::Mutex` (futex-based, an atomic
//! exchange when uncontended, as the kernel's adaptive mutexes) around a BSD radix tree
//! (`vfsr_lpm::radix`, the original's `rn_match`), one entry per prefix and one cloned host
//! route per gateway in the same tree, all shared by the workers through an `Arc`. The
//! header checks and rewrite are the split design's own stages, so a comparison measures the
//! routing structures, not the parsing. Packets are handled one at a time, as the original
//! does ([`LegacyRouter::forward_batch`] is a loop). Only what a benchmark sends is handled
//! (transit IPv4 and IPv6 to resolved gateways); anything else is reported as not forwarded.

use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard};

use vfsr_lpm::radix::Radix;
use vfsr_lpm::{BuildError, Lpm, LpmBuild, NextHop, Prefix, Route, NO_ROUTE};
use vfsr_wire::MacAddr;

use crate::packet::Packet;
use crate::stage::eth_input::{eth_input, EthOutcome, ETH_HEADER};
use crate::stage::ip4_input::{ip4_input, Ip4Outcome};
use crate::stage::ip6_input::{ip6_input, Ip6Outcome};
use crate::stage::rewrite::rewrite;
use crate::stage::ttl::{ttl_check, TtlOutcome};

/// A route entry of the unified table (`struct rtentry`).
#[derive(Debug)]
struct RtEntry {
    /// `rt_mtx` and what it guards.
    mtx: Mutex<RtLocked>,
    /// `rt_gwroute`: the gateway's cloned host route, an index into the entries (indirect
    /// routes only). The original fills it on first use; here it is set when built.
    gwroute: Option<u32>,
}

/// The fields of an entry read or written only under its lock.
#[derive(Debug)]
struct RtLocked {
    /// `rt_refcnt`.
    refcnt: u32,
    /// `rt_llinfo`: the link-layer data of a cloned host route.
    llinfo: Option<LlInfo>,
}

#[derive(Clone, Copy, Debug)]
struct LlInfo {
    mac: MacAddr,
    ifindex: u32,
    port_mac: MacAddr,
}

/// One gateway: the next-hop value the routes through it carry, its address, its port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LegacyGateway {
    /// The next-hop value of the routes through it.
    pub nexthop: NextHop,
    /// Its address (its cloned host route's key).
    pub addr: IpAddr,
    /// The egress interface.
    pub ifindex: u32,
    /// Its MAC.
    pub mac: MacAddr,
    /// The egress interface's MAC.
    pub port_mac: MacAddr,
}

/// The unified routing table, shared by every worker (`Arc<LegacyRouter>`).
#[derive(Debug)]
pub struct LegacyRouter {
    /// The IPv4 radix head and its lock; leaves name entries.
    head4: Mutex<Radix<u32>>,
    /// The IPv6 radix head and its lock.
    head6: Mutex<Radix<u128>>,
    /// Every route entry, prefix routes and cloned host routes; index 0 unused (no route).
    entries: Vec<RtEntry>,
    /// The ingress port's MAC.
    port_mac: MacAddr,
}

/// Locks `m`; a lock poisoned by a panicking thread is taken over (the data is plain
/// counters and copies, never left half-written).
#[inline]
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn too_large(_: std::num::TryFromIntError) -> BuildError {
    BuildError::TooLarge("legacy table holds fewer than 2^32 entries")
}

/// Appends one entry per route, its `rt_gwroute` the host route of the route's gateway;
/// returns the new entries' indices in route order.
fn clone_entries(
    entries: &mut Vec<RtEntry>,
    by_nexthop: &[Option<u32>],
    nexthops: impl Iterator<Item = NextHop>,
) -> Result<Vec<u32>, BuildError> {
    let mut out = Vec::with_capacity(nexthops.size_hint().0);
    for nh in nexthops {
        let gw = by_nexthop
            .get(nh as usize)
            .copied()
            .flatten()
            .ok_or_else(|| BuildError::BadConfig(format!("next hop {nh} is no gateway's")))?;
        let at = u32::try_from(entries.len()).map_err(too_large)?;
        entries.push(RtEntry {
            mtx: Mutex::new(RtLocked {
                refcnt: 0,
                llinfo: None,
            }),
            gwroute: Some(gw),
        });
        out.push(at);
    }
    Ok(out)
}

impl LegacyRouter {
    /// Builds the table: one entry per route of `routes4`/`routes6` (each naming a
    /// gateway's `nexthop`), one cloned host route per gateway (a /32 or /128 in the tree,
    /// holding the MAC), each route's `rt_gwroute` pointing at its gateway's host route.
    /// `port_mac` is the ingress port's MAC (frames must be sent to it). A route whose next
    /// hop is no gateway's is an error.
    pub fn new(
        routes4: &[Route<u32>],
        routes6: &[Route<u128>],
        gateways: &[LegacyGateway],
        port_mac: MacAddr,
    ) -> Result<Self, BuildError> {
        let mut entries = Vec::with_capacity(1 + gateways.len() + routes4.len() + routes6.len());
        entries.push(RtEntry {
            mtx: Mutex::new(RtLocked {
                refcnt: 0,
                llinfo: None,
            }),
            gwroute: None,
        });
        // Next-hop value → the gateway's host route.
        let mut by_nexthop: Vec<Option<u32>> = Vec::new();
        let mut hosts4 = Vec::new();
        let mut hosts6 = Vec::new();
        for g in gateways {
            let at = u32::try_from(entries.len()).map_err(too_large)?;
            entries.push(RtEntry {
                mtx: Mutex::new(RtLocked {
                    refcnt: 0,
                    llinfo: Some(LlInfo {
                        mac: g.mac,
                        ifindex: g.ifindex,
                        port_mac: g.port_mac,
                    }),
                }),
                gwroute: None,
            });
            let n = g.nexthop as usize;
            if by_nexthop.len() <= n {
                by_nexthop.resize(n + 1, None);
            }
            if let Some(slot) = by_nexthop.get_mut(n) {
                *slot = Some(at);
            }
            match g.addr {
                IpAddr::V4(a) => hosts4.push(Route::new(Prefix::new_masked(u32::from(a), 32), at)),
                IpAddr::V6(a) => {
                    hosts6.push(Route::new(Prefix::new_masked(u128::from(a), 128), at))
                }
            }
        }
        let at4 = clone_entries(&mut entries, &by_nexthop, routes4.iter().map(|r| r.nexthop))?;
        let at6 = clone_entries(&mut entries, &by_nexthop, routes6.iter().map(|r| r.nexthop))?;
        // Host routes last: for the same prefix, the cloned host route wins.
        let mut tree4: Vec<Route<u32>> = routes4
            .iter()
            .zip(at4)
            .map(|(r, at)| Route::new(r.prefix, at))
            .collect();
        tree4.extend(hosts4);
        let mut tree6: Vec<Route<u128>> = routes6
            .iter()
            .zip(at6)
            .map(|(r, at)| Route::new(r.prefix, at))
            .collect();
        tree6.extend(hosts6);
        Ok(LegacyRouter {
            head4: Mutex::new(Radix::build(&tree4, &())?),
            head6: Mutex::new(Radix::build(&tree6, &())?),
            entries,
            port_mac,
        })
    }

    /// Route entries in the table (prefix routes and cloned host routes).
    pub fn entries(&self) -> usize {
        self.entries.len() - 1
    }

    /// Forwards one frame in place: `Some(oif)` when it was forwarded, `None` when this
    /// model does not forward it (not for us, invalid, expired, no route).
    pub fn forward(&self, frame: &mut [u8]) -> Option<u32> {
        let v6 = match eth_input(frame, self.port_mac) {
            EthOutcome::Ipv4 {
                link_broadcast: false,
            } => false,
            EthOutcome::Ipv6 {
                link_broadcast: false,
            } => true,
            _ => return None,
        };
        let ip = frame.get(ETH_HEADER..)?;
        // rtalloc1: the lookup and the reference, under the head lock.
        let at = if v6 {
            let Ip6Outcome::Valid(m) = ip6_input(ip) else {
                return None;
            };
            if ttl_check(m.hop_limit) == TtlOutcome::Expired {
                return None;
            }
            let head = lock(&self.head6);
            self.rtalloc(head.lookup(m.dst), head)?
        } else {
            let Ip4Outcome::Valid(m) = ip4_input(ip) else {
                return None;
            };
            if ttl_check(m.ttl) == TtlOutcome::Expired {
                return None;
            }
            let head = lock(&self.head4);
            self.rtalloc(head.lookup(m.dst), head)?
        };
        let rt = self.entries.get(at)?;
        // ip_forward: TTL, then ip_output → ether_output → arpresolve.
        let ll = self.rt_check(rt);
        if let Some(ll) = ll {
            rewrite(frame, v6, ll.mac, ll.port_mac);
        }
        // RTFREE once ip_output returns.
        {
            let mut st = lock(&rt.mtx);
            st.refcnt = st.refcnt.wrapping_sub(1);
        }
        ll.map(|ll| ll.ifindex)
    }

    /// Forwards the packets one after the other, as the original does (no batching of the
    /// locks); writes each packet's egress interface to `oifs` and returns how many were
    /// forwarded. Only `min(packets.len(), oifs.len())` packets are handled.
    pub fn forward_batch(&self, packets: &mut [Packet], oifs: &mut [Option<u32>]) -> usize {
        let mut n = 0;
        for (p, o) in packets.iter_mut().zip(oifs.iter_mut()) {
            *o = self.forward(p.frame_mut());
            n += usize::from(o.is_some());
        }
        n
    }

    /// `rtalloc1` after `rn_match`: locks the matched entry and takes a reference while the
    /// head is still locked, then releases the head, then the entry. Returns the entry.
    #[inline]
    fn rtalloc<T>(&self, matched: NextHop, head: MutexGuard<'_, T>) -> Option<usize> {
        if matched == NO_ROUTE {
            return None;
        }
        let at = matched as usize;
        let rt = self.entries.get(at)?;
        let mut st = lock(&rt.mtx);
        st.refcnt = st.refcnt.wrapping_add(1);
        drop(head);
        drop(st);
        Some(at)
    }

    /// `rt_check` and the `rt_llinfo` read of `arpresolve`: for an indirect route, the
    /// gateway's host route is locked hand over hand from the route's own lock.
    #[inline]
    fn rt_check(&self, rt: &RtEntry) -> Option<LlInfo> {
        let st0 = lock(&rt.mtx);
        match rt.gwroute {
            Some(g) => {
                let gw = self.entries.get(g as usize)?;
                let st = lock(&gw.mtx);
                drop(st0);
                st.llinfo
            }
            None => st0.llinfo,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;
    use std::sync::Arc;
    use vfsr_wire::checksum;

    const PORT: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const GW1: MacAddr = MacAddr([2, 0, 0, 0, 0xb, 1]);
    const GW2: MacAddr = MacAddr([2, 0, 0, 0, 0xb, 2]);
    const OUT2: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
    const OUT3: MacAddr = MacAddr([2, 0, 0, 0, 0, 3]);

    fn router() -> LegacyRouter {
        let r4 = vec![
            Route::new(Prefix::new(0x0a00_0000, 8).unwrap(), 1),
            Route::new(Prefix::new(0x0a01_0000, 16).unwrap(), 2),
            Route::new(Prefix::new(0xc633_6400, 24).unwrap(), 1),
        ];
        let r6 = vec![Route::new(
            Prefix::new(0x2001_0db8u128 << 96, 32).unwrap(),
            2,
        )];
        let gws = [
            LegacyGateway {
                nexthop: 1,
                addr: "198.51.100.1".parse().unwrap(),
                ifindex: 2,
                mac: GW1,
                port_mac: OUT2,
            },
            LegacyGateway {
                nexthop: 2,
                addr: "198.51.100.2".parse().unwrap(),
                ifindex: 3,
                mac: GW2,
                port_mac: OUT3,
            },
        ];
        LegacyRouter::new(&r4, &r6, &gws, PORT).unwrap()
    }

    fn frame4(dst: [u8; 4], ttl: u8) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0xa, 1, 8, 0];
        f.extend_from_slice(&[0x45, 0, 0, 28, 0, 1, 0, 0, ttl, 17, 0, 0, 192, 0, 2, 1]);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&[0, 1, 0, 2, 0, 8, 0, 0]);
        let c = checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f
    }

    fn frame6(dst: &str) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0xa, 1, 0x86, 0xdd];
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 8, 17, 64]);
        f.extend_from_slice(&"2001:db8:ffff::1".parse::<Ipv6Addr>().unwrap().octets());
        f.extend_from_slice(&dst.parse::<Ipv6Addr>().unwrap().octets());
        f.extend_from_slice(&[0, 1, 0, 2, 0, 8, 0, 0]);
        f
    }

    fn refcounts_released(r: &LegacyRouter) -> bool {
        r.entries.iter().all(|e| lock(&e.mtx).refcnt == 0)
    }

    #[test]
    fn forwards_with_rewritten_headers() {
        let r = router();
        // Three prefix routes, one IPv6 route, two cloned host routes.
        assert_eq!(r.entries(), 6);
        let mut f = frame4([10, 1, 2, 3], 64);
        let before = f.clone();
        assert_eq!(r.forward(&mut f), Some(3));
        assert_eq!(&f[0..6], &GW2.0);
        assert_eq!(&f[6..12], &OUT3.0);
        assert_eq!(f[22], 63);
        assert!(checksum::verify(&f[14..34]));
        // Only the MACs, the TTL and the checksum changed.
        let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != before[i]).collect();
        assert!(changed
            .iter()
            .all(|&i| i < 12 || i == 22 || i == 24 || i == 25));
        let mut f = frame4([10, 9, 2, 3], 64);
        assert_eq!(r.forward(&mut f), Some(2));
        assert_eq!(&f[0..12], &[GW1.0, OUT2.0].concat()[..]);
        // IPv6: hop limit and MACs.
        let mut f = frame6("2001:db8:5::1");
        assert_eq!(r.forward(&mut f), Some(3));
        assert_eq!(f[21], 63);
        assert_eq!(&f[0..12], &[GW2.0, OUT3.0].concat()[..]);
        assert!(refcounts_released(&r));
    }

    #[test]
    fn refuses_what_it_does_not_forward() {
        let r = router();
        // No route (IPv4, IPv6), expired, not for us, bad header checksum.
        assert_eq!(r.forward(&mut frame4([11, 0, 0, 1], 64)), None);
        assert_eq!(r.forward(&mut frame6("2001:db9::1")), None);
        assert_eq!(r.forward(&mut frame4([10, 1, 2, 3], 1)), None);
        let mut f = frame4([10, 1, 2, 3], 64);
        f[0] = 4;
        assert_eq!(r.forward(&mut f), None);
        let mut f = frame4([10, 1, 2, 3], 64);
        f[24] ^= 1;
        let before = f.clone();
        assert_eq!(r.forward(&mut f), None);
        assert_eq!(f, before, "a refused frame is left as it was");
        assert!(refcounts_released(&r));
    }

    #[test]
    fn a_gateway_is_reached_through_its_cloned_host_route() {
        let r = router();
        // 198.51.100.0/24 goes to gateway 1, but the /32 of gateway 2 is in the same tree.
        let mut f = frame4([198, 51, 100, 2], 64);
        assert_eq!(r.forward(&mut f), Some(3));
        assert_eq!(&f[0..6], &GW2.0);
        let mut f = frame4([198, 51, 100, 7], 64);
        assert_eq!(r.forward(&mut f), Some(2));
        assert_eq!(&f[0..6], &GW1.0);
    }

    #[test]
    fn a_route_to_an_unknown_gateway_is_an_error() {
        let r4 = [Route::new(Prefix::new(0x0a00_0000, 8).unwrap(), 7)];
        assert!(matches!(
            LegacyRouter::new(&r4, &[], &[], PORT),
            Err(BuildError::BadConfig(_))
        ));
    }

    #[test]
    fn batches_are_forwarded_packet_by_packet() {
        let r = router();
        let frames = [frame4([10, 1, 0, 1], 64), frame4([11, 0, 0, 1], 64)];
        let mut packets: Vec<Packet> = frames.iter().map(|f| Packet::from_frame(f, 1)).collect();
        let mut oifs = [None; 2];
        assert_eq!(r.forward_batch(&mut packets, &mut oifs), 1);
        assert_eq!(oifs, [Some(3), None]);
        assert_eq!(packets[0].frame()[22], 63);
    }

    #[test]
    fn threads_share_it_and_agree() {
        let r = Arc::new(router());
        let run = |r: &LegacyRouter| -> Vec<(Vec<u8>, Option<u32>)> {
            (0..=255u8)
                .map(|b| {
                    let mut f = frame4([10, b % 3, b, 1], 64);
                    let oif = r.forward(&mut f);
                    (f, oif)
                })
                .collect()
        };
        let expected = run(&r);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let r = Arc::clone(&r);
                std::thread::spawn(move || (0..50).map(|_| run(&r)).collect::<Vec<_>>())
            })
            .collect();
        for h in handles {
            for round in h.join().unwrap() {
                assert_eq!(round, expected);
            }
        }
        // Every reference taken was released.
        assert!(refcounts_released(&r));
    }
}
