//! DIR-24-8: the flat two-level table of DPDK's `rte_lpm` and `rte_fib` (IPv4 only).
//!
//! Gupta, Lin and McKeown, "Routing Lookups in Hardware at Memory Access Speeds" (INFOCOM 1998),
//! as DPDK implements it: the first 24 address bits index a table of 2^24 entries; an entry is a
//! next hop, or (top bit set) the number of a 256-entry group that the last 8 bits index.
//!
//! ```text
//!   addr = 10.1.2.3       tbl24[0x0a0102] ──(ext)──> tbl8[group * 256 + 3]
//!          └─24 bits─┘└8┘               └─(leaf)──> next hop
//! ```
//!
//! A lookup is one memory read for prefixes up to /24 and two beyond. The price is memory: the
//! first level alone is 64 MiB with 4-byte entries, which is why it suits DPDK's huge pages and
//! why the benchmark reports bytes per route next to lookups per second. This is the design DPDK
//! users pick; it is here as the flat-table reference point, not as vfsr's forwarding engine.

use crate::prefix::{canonicalize, NextHop, Route};
use crate::{prefetch, BuildError, Lpm, LpmBuild};

/// Entry flag: the low bits are a tbl8 group number, not a next hop.
const EXT: u32 = 1 << 31;
/// Largest next hop an entry can hold.
pub const MAX_NEXTHOP: NextHop = EXT - 1;
/// Lookups whose first-level reads are issued together by the bulk lookup.
const GROUP: usize = 16;

/// DIR-24-8 over IPv4 addresses.
#[derive(Clone, Debug)]
pub struct Dir24 {
    tbl24: Vec<u32>,
    tbl8: Vec<u32>,
}

impl Dir24 {
    /// Number of 256-entry second-level groups in use.
    pub fn tbl8_groups(&self) -> usize {
        self.tbl8.len() / 256
    }
}

impl Lpm<u32> for Dir24 {
    #[inline]
    fn lookup(&self, addr: u32) -> NextHop {
        let e = self.tbl24[(addr >> 8) as usize];
        if e & EXT == 0 {
            e
        } else {
            self.tbl8[(((e & !EXT) as usize) << 8) | (addr & 0xff) as usize]
        }
    }

    fn lookup_bulk(&self, addrs: &[u32], out: &mut [NextHop]) {
        for (a, o) in addrs.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
            for &x in a {
                prefetch(self.tbl24.as_ptr().wrapping_add((x >> 8) as usize));
            }
            let mut ext = 0u32;
            for (i, (&x, o)) in a.iter().zip(o.iter_mut()).enumerate() {
                let e = self.tbl24[(x >> 8) as usize];
                *o = e;
                if e & EXT != 0 {
                    ext |= 1 << i;
                    let j = (((e & !EXT) as usize) << 8) | (x & 0xff) as usize;
                    prefetch(self.tbl8.as_ptr().wrapping_add(j));
                }
            }
            while ext != 0 {
                let i = ext.trailing_zeros() as usize;
                ext &= ext - 1;
                let j = (((o[i] & !EXT) as usize) << 8) | (a[i] & 0xff) as usize;
                o[i] = self.tbl8[j];
            }
        }
    }

    fn memory_bytes(&self) -> usize {
        core::mem::size_of::<Self>() + (self.tbl24.capacity() + self.tbl8.capacity()) * 4
    }

    fn name(&self) -> &'static str {
        "dir24"
    }
}

impl LpmBuild<u32> for Dir24 {
    type Config = ();

    fn build(routes: &[Route<u32>], _: &()) -> Result<Self, BuildError> {
        let routes = canonicalize(routes);
        if let Some(r) = routes.iter().find(|r| r.nexthop > MAX_NEXTHOP) {
            return Err(BuildError::NextHopTooLarge {
                nexthop: r.nexthop,
                max: MAX_NEXTHOP,
            });
        }
        let mut tbl24 = vec![0u32; 1 << 24];
        let mut tbl8: Vec<u32> = Vec::new();
        // Canonical order puts every covering prefix before the prefixes it covers, so painting
        // in order leaves the longest match in each entry, and a group copies the final value of
        // its first-level entry when it is created.
        for r in &routes {
            let len = r.prefix.len();
            let a = r.prefix.addr();
            if len <= 24 {
                let start = (a >> 8) as usize;
                let count = 1usize << (24 - len);
                tbl24[start..start + count].fill(r.nexthop);
            } else {
                let slot = (a >> 8) as usize;
                let e = tbl24[slot];
                let group = if e & EXT != 0 {
                    (e & !EXT) as usize
                } else {
                    let g = tbl8.len() / 256;
                    if g >= EXT as usize {
                        return Err(BuildError::TooLarge("more than 2^31 tbl8 groups"));
                    }
                    tbl8.extend(core::iter::repeat_n(e, 256));
                    tbl24[slot] = EXT | g as u32;
                    g
                };
                let start = (group << 8) | (a & 0xff) as usize;
                let count = 1usize << (32 - len);
                tbl8[start..start + count].fill(r.nexthop);
            }
        }
        tbl8.shrink_to_fit();
        Ok(Dir24 { tbl24, tbl8 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{check_against_golden, edge_tables_v4, v4};

    #[test]
    fn edge_tables_match_golden() {
        for (routes, addrs) in edge_tables_v4() {
            let d = Dir24::build(&routes, &()).unwrap();
            check_against_golden(&d, &routes, &addrs, "dir24");
        }
    }

    #[test]
    fn long_prefixes_share_one_group_per_slash24() {
        let routes = [
            v4([10, 0, 0, 0], 25, 1),
            v4([10, 0, 0, 128], 26, 2),
            v4([10, 0, 1, 7], 32, 3),
        ];
        let d = Dir24::build(&routes, &()).unwrap();
        assert_eq!(d.tbl8_groups(), 2);
        assert_eq!(d.lookup(0x0a00_0001), 1);
        assert_eq!(d.lookup(0x0a00_00c1), 0);
        assert_eq!(d.lookup(0x0a00_0081), 2);
        assert_eq!(d.lookup(0x0a00_0107), 3);
    }
}
