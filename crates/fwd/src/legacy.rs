//! The unified routing design that the split design replaced, as a baseline to measure
//! against (the FreeBSD seed's "legacy" path, section 2 and Figures 7 and 9).
//!
//! Before FreeBSD 8, one routing table held everything: prefix routes, and the ARP and ND
//! entries as "cloned" host routes whose link-layer data hung off the route entry
//! (`rt_llinfo`). Every forwarded packet went through it, under shared locks:
//!
//! ```text
//!   ip_forward
//!     rtalloc1:   RADIX_NODE_HEAD_LOCK ─ rn_match(dst) ─ RT_LOCK(rt) ─ refcnt++ ─
//!                 RT_UNLOCK ─ RADIX_NODE_HEAD_UNLOCK
//!     ether_output → arpresolve: rt->rt_gwroute (the gateway's host route)
//!                 RT_LOCK(gw) ─ read rt_llinfo (MAC) ─ RT_UNLOCK(gw)
//!     RTFREE:     RT_LOCK(rt) ─ refcnt-- ─ RT_UNLOCK
//! ```
//!
//! Four lock round trips per packet, all on lines every core writes: the radix head's lock,
//! the route entry's lock and reference count, the gateway entry's lock. With one core they
//! cost the uncontended lock price; with several, the cache lines bounce between cores and
//! the head lock serializes the lookups, which is what the seed's Figures 7 and 9 show.
//!
//! [`LegacyRouter`] reproduces exactly that with `std::sync::Mutex` (futex-based, like the
//! kernel's adaptive mutexes when uncontended) around a BSD radix tree (`vfsr_lpm::radix`,
//! the `rn_match` of the original), shared by all workers through an `Arc`. Header checks
//! and rewrite are the split design's own stages, so the benchmark compares the routing
//! structures, not the parsing. It handles only what the benchmark sends (transit IPv4 and
//! IPv6 to resolved gateways); anything else is reported as not forwarded.

use std::net::IpAddr;
use std::sync::Mutex;

use vfsr_lpm::radix::Radix;
use vfsr_lpm::{BuildError, Lpm, LpmBuild, Route};
use vfsr_wire::MacAddr;

use crate::stage::eth_input::{eth_input, EthOutcome, ETH_HEADER};
use crate::stage::ip4_input::{ip4_input, Ip4Outcome};
use crate::stage::ip6_input::{ip6_input, Ip6Outcome};
use crate::stage::rewrite::{decrement_hop_limit, decrement_ttl4, set_macs};
use crate::stage::ttl::{ttl_check, TtlOutcome};

/// A route entry of the unified table.
#[derive(Debug)]
struct RtEntry {
    /// `RT_LOCK` and the reference count it protects.
    lock: Mutex<u32>,
    /// The gateway's host route (`rt_gwroute`), an index into the entries.
    gwroute: usize,
}

/// A gateway's host route: link-layer data under the entry's lock (`rt_llinfo`).
#[derive(Debug)]
struct HostRoute {
    lock: Mutex<LlInfo>,
}

#[derive(Clone, Copy, Debug)]
struct LlInfo {
    refcnt: u32,
    mac: MacAddr,
    ifindex: u32,
    port_mac: MacAddr,
}

/// One gateway of the benchmark: the next-hop value routes use, its address, its port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LegacyGateway {
    /// The next-hop value of the routes through it.
    pub nexthop: u32,
    /// Its address.
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
    head4: Mutex<Radix<u32>>,
    head6: Mutex<Radix<u128>>,
    /// Route entries by next-hop value (0 unused): each has its own lock and refcount.
    routes: Vec<Option<RtEntry>>,
    /// Gateway host routes.
    hosts: Vec<HostRoute>,
    port_mac: MacAddr,
}

impl LegacyRouter {
    /// Builds the table: `routes4`/`routes6` name next-hop values, each of which must be a
    /// gateway's `nexthop`; `port_mac` is the ingress port's MAC (frames must be sent to it).
    pub fn new(
        routes4: &[Route<u32>],
        routes6: &[Route<u128>],
        gateways: &[LegacyGateway],
        port_mac: MacAddr,
    ) -> Result<Self, BuildError> {
        let mut routes: Vec<Option<RtEntry>> = Vec::new();
        let mut hosts = Vec::with_capacity(gateways.len());
        for (i, g) in gateways.iter().enumerate() {
            hosts.push(HostRoute {
                lock: Mutex::new(LlInfo {
                    refcnt: 0,
                    mac: g.mac,
                    ifindex: g.ifindex,
                    port_mac: g.port_mac,
                }),
            });
            let n = g.nexthop as usize;
            if routes.len() <= n {
                routes.resize_with(n + 1, || None);
            }
            if let Some(slot) = routes.get_mut(n) {
                *slot = Some(RtEntry {
                    lock: Mutex::new(0),
                    gwroute: i,
                });
            }
        }
        Ok(LegacyRouter {
            head4: Mutex::new(Radix::build(routes4, &())?),
            head6: Mutex::new(Radix::build(routes6, &())?),
            routes,
            hosts,
            port_mac,
        })
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
        let nh = if v6 {
            let Ip6Outcome::Valid(m) = ip6_input(ip) else {
                return None;
            };
            if ttl_check(m.hop_limit) == TtlOutcome::Expired {
                return None;
            }
            // rtalloc1: the head lock around the tree walk.
            let head = self.head6.lock().ok()?;
            head.lookup(m.dst)
        } else {
            let Ip4Outcome::Valid(m) = ip4_input(ip) else {
                return None;
            };
            if ttl_check(m.ttl) == TtlOutcome::Expired {
                return None;
            }
            let head = self.head4.lock().ok()?;
            head.lookup(m.dst)
        };
        let rt = self.routes.get(nh as usize)?.as_ref()?;
        // RT_LOCK(rt), RT_ADDREF, RT_UNLOCK (in the original, still under the head lock).
        {
            let mut refcnt = rt.lock.lock().ok()?;
            *refcnt = refcnt.wrapping_add(1);
        }
        // arpresolve through rt_gwroute: the gateway entry's lock, its link-layer data.
        let ll = {
            let host = self.hosts.get(rt.gwroute)?;
            let mut ll = host.lock.lock().ok()?;
            ll.refcnt = ll.refcnt.wrapping_add(1);
            let out = *ll;
            ll.refcnt = ll.refcnt.wrapping_sub(1);
            out
        };
        if v6 {
            decrement_hop_limit(frame);
        } else {
            decrement_ttl4(frame);
        }
        set_macs(frame, ll.mac, ll.port_mac);
        // RTFREE.
        {
            let mut refcnt = rt.lock.lock().ok()?;
            *refcnt = refcnt.wrapping_sub(1);
        }
        Some(ll.ifindex)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use vfsr_lpm::Prefix;
    use vfsr_wire::checksum;

    const PORT: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);

    fn router() -> LegacyRouter {
        let r4 = vec![
            Route::new(Prefix::new(0x0a00_0000, 8).unwrap(), 1),
            Route::new(Prefix::new(0x0a01_0000, 16).unwrap(), 2),
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
                mac: MacAddr([2, 0, 0, 0, 0xb, 1]),
                port_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            },
            LegacyGateway {
                nexthop: 2,
                addr: "198.51.100.2".parse().unwrap(),
                ifindex: 3,
                mac: MacAddr([2, 0, 0, 0, 0xb, 2]),
                port_mac: MacAddr([2, 0, 0, 0, 0, 3]),
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

    #[test]
    fn forwards_with_rewritten_headers() {
        let r = router();
        let mut f = frame4([10, 1, 2, 3], 64);
        assert_eq!(r.forward(&mut f), Some(3));
        assert_eq!(&f[0..12], &[2, 0, 0, 0, 0xb, 2, 2, 0, 0, 0, 0, 3]);
        assert_eq!(f[22], 63);
        assert!(checksum::verify(&f[14..34]));
        let mut f = frame4([10, 9, 2, 3], 64);
        assert_eq!(r.forward(&mut f), Some(2));
        // No route, expired, not for us: not forwarded.
        assert_eq!(r.forward(&mut frame4([11, 0, 0, 1], 64)), None);
        assert_eq!(r.forward(&mut frame4([10, 1, 2, 3], 1)), None);
        let mut f = frame4([10, 1, 2, 3], 64);
        f[0] = 4;
        assert_eq!(r.forward(&mut f), None);
        // IPv6.
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0xa, 1, 0x86, 0xdd];
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 8, 17, 64]);
        f.extend_from_slice(
            &"2001:db8:ffff::1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
        );
        f.extend_from_slice(
            &"2001:db8:5::1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
        );
        f.extend_from_slice(&[0, 1, 0, 2, 0, 8, 0, 0]);
        assert_eq!(r.forward(&mut f), Some(3));
        assert_eq!(f[21], 63);
    }

    #[test]
    fn threads_share_it_and_agree() {
        let r = Arc::new(router());
        let expected: Vec<Option<u32>> = (0..=255u8)
            .map(|b| r.forward(&mut frame4([10, b % 3, b, 1], 64)))
            .collect();
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let r = Arc::clone(&r);
                std::thread::spawn(move || {
                    (0..=255u8)
                        .map(|b| r.forward(&mut frame4([10, b % 3, b, 1], 64)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), expected);
        }
        // Every reference taken was released.
        for e in r.routes.iter().flatten() {
            assert_eq!(*e.lock.lock().unwrap(), 0);
        }
    }
}
