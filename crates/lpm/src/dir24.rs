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
//!
//! ## Updates
//!
//! A changed prefix owns a block of entries: `2^(24 - len)` tbl24 entries for `len <= 24`, or
//! `2^(32 - len)` entries of one tbl8 group beyond. [`LpmUpdate::update`] repaints exactly that
//! block from the route map: first the next hop that covers the whole block from outside (the
//! prefix itself if it is still announced, else [`RouteMap::parent`], else no route), then every
//! route inside the block ([`RouteMap::within`]) in canonical order, exactly as `build` paints.
//!
//! ```text
//!   withdraw 10.0.0.0/25 (routes left: 10.0.0.0/8 -> 1, 10.0.0.64/26 -> 2)
//!
//!   tbl24[0x0a0000] = EXT|g     group g, entries 0..128 repainted:
//!                                 0..64   <- 1   (parent 10.0.0.0/8)
//!                                 64..128 <- 1, then 10.0.0.64/26 paints 2
//!                               entries 128..256 untouched
//! ```
//!
//! A group whose 256 entries end up equal after a repaint is folded back into its tbl24 entry
//! and its number goes to a free list, which later groups are taken from before `tbl8` grows;
//! a repaint of a short prefix frees every group under it before painting. Prefixes inside an
//! earlier changed prefix of the same batch are skipped: its repaint already covered them.
//! Next hops are checked before anything is written, so an over-large one leaves the table as
//! it was.

use crate::prefix::{canonicalize, NextHop, Prefix, Route};
use crate::update::{LpmUpdate, RouteMap};
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
    /// Group numbers freed by updates, reused before `tbl8` grows.
    free8: Vec<u32>,
}

impl Dir24 {
    /// Number of 256-entry second-level groups in use.
    pub fn tbl8_groups(&self) -> usize {
        (self.tbl8.len() / 256).saturating_sub(self.free8.len())
    }

    /// The group of tbl24 entry `slot`, made from the entry's next hop if there is none yet:
    /// taken from the free list, else appended.
    fn group_of(&mut self, slot: usize) -> Result<usize, BuildError> {
        let Some(&e) = self.tbl24.get(slot) else {
            return Err(BuildError::TooLarge("tbl24 index out of range"));
        };
        if e & EXT != 0 {
            return Ok((e & !EXT) as usize);
        }
        let g = match self.free8.pop() {
            Some(g) => {
                let g = g as usize;
                if let Some(block) = self.tbl8.get_mut(g << 8..(g + 1) << 8) {
                    block.fill(e);
                }
                g
            }
            None => {
                let g = self.tbl8.len() / 256;
                if g >= EXT as usize {
                    return Err(BuildError::TooLarge("more than 2^31 tbl8 groups"));
                }
                self.tbl8.extend(core::iter::repeat_n(e, 256));
                g
            }
        };
        if let Some(t) = self.tbl24.get_mut(slot) {
            *t = EXT | g as u32;
        }
        Ok(g)
    }

    /// Sets tbl24 entries `start..start + count` to `nh`, freeing the groups they pointed to.
    fn fill24(&mut self, start: usize, count: usize, nh: NextHop) {
        if let Some(block) = self.tbl24.get_mut(start..start + count) {
            for e in block {
                if *e & EXT != 0 {
                    self.free8.push(*e & !EXT);
                }
                *e = nh;
            }
        }
    }

    /// Paints one route over what is there, as `build` does (`len > 24` makes or reuses the
    /// group of its /24 and records it in `touched`).
    fn paint(
        &mut self,
        p: Prefix<u32>,
        nh: NextHop,
        touched: &mut Vec<(usize, usize)>,
    ) -> Result<(), BuildError> {
        let (a, len) = (p.addr(), p.len());
        if len <= 24 {
            self.fill24((a >> 8) as usize, 1usize << (24 - len), nh);
        } else {
            let slot = (a >> 8) as usize;
            let g = self.group_of(slot)?;
            let start = (g << 8) | (a & 0xff) as usize;
            if let Some(block) = self.tbl8.get_mut(start..start + (1usize << (32 - len))) {
                block.fill(nh);
            }
            touched.push((slot, g));
        }
        Ok(())
    }

    /// Folds the group of `slot` back into its tbl24 entry if it still is group `g` and all
    /// its entries are equal.
    fn fold_if_uniform(&mut self, slot: usize, g: usize) {
        if self.tbl24.get(slot) != Some(&(EXT | g as u32)) {
            return;
        }
        let Some(block) = self.tbl8.get(g << 8..(g + 1) << 8) else {
            return;
        };
        let Some(&first) = block.first() else {
            return;
        };
        if block.iter().all(|&e| e == first) {
            if let Some(t) = self.tbl24.get_mut(slot) {
                *t = first;
            }
            self.free8.push(g as u32);
        }
    }

    /// Repaints the block `p` owns from `table` (see the module doc).
    fn repaint(
        &mut self,
        table: &RouteMap<u32>,
        p: Prefix<u32>,
        outside: NextHop,
    ) -> Result<(), BuildError> {
        let mut touched = Vec::new();
        self.paint(p, outside, &mut touched)?;
        for r in table.within(p) {
            if r.prefix != p {
                self.paint(r.prefix, r.nexthop, &mut touched)?;
            }
        }
        for (slot, g) in touched {
            self.fold_if_uniform(slot, g);
        }
        Ok(())
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
        Ok(Dir24 {
            tbl24,
            tbl8,
            free8: Vec::new(),
        })
    }
}

impl LpmUpdate<u32> for Dir24 {
    const MAX_NEXTHOP: NextHop = MAX_NEXTHOP;

    fn update(&mut self, table: &RouteMap<u32>, changed: &[Prefix<u32>]) -> Result<(), BuildError> {
        let mut todo = changed.to_vec();
        todo.sort_unstable();
        todo.dedup();
        // What covers each block from outside, checked before anything is written.
        let mut plan: Vec<(Prefix<u32>, NextHop)> = Vec::with_capacity(todo.len());
        for p in todo {
            if plan.last().is_some_and(|(q, _)| q.covers(&p)) {
                continue; // repainted with the block of `q`
            }
            let outside = table
                .get(&p)
                .or_else(|| table.parent(p).map(|r| r.nexthop))
                .unwrap_or(crate::NO_ROUTE);
            if outside > MAX_NEXTHOP {
                return Err(BuildError::NextHopTooLarge {
                    nexthop: outside,
                    max: MAX_NEXTHOP,
                });
            }
            if let Some(r) = table.within(p).find(|r| r.nexthop > MAX_NEXTHOP) {
                return Err(BuildError::NextHopTooLarge {
                    nexthop: r.nexthop,
                    max: MAX_NEXTHOP,
                });
            }
            plan.push((p, outside));
        }
        for (p, outside) in plan {
            self.repaint(table, p, outside)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{
        check_against_golden, check_updates, edge_tables_v4, updates_and_probes, v4, POOL4,
    };
    use crate::NO_ROUTE;
    use proptest::prelude::*;

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

    /// Applies `r` to `map` and `d`, then compares `d` with a fresh build on `addrs`.
    fn step(d: &mut Dir24, map: &mut RouteMap<u32>, r: Route<u32>, addrs: &[u32]) {
        map.set(r.prefix, r.nexthop);
        d.update(map, &[r.prefix]).unwrap();
        check_against_golden(d, &map.to_routes(), addrs, &format!("after {r:?}"));
    }

    #[test]
    fn announce_replace_withdraw_nested_prefixes() {
        let steps = [
            v4([10, 0, 0, 0], 8, 1),
            v4([10, 0, 0, 0], 25, 2),
            v4([10, 0, 0, 7], 32, 3),
            v4([0, 0, 0, 0], 0, 4),
            v4([10, 0, 0, 0], 24, 5),
            v4([10, 0, 0, 7], 32, 6), // replace
            v4([10, 0, 0, 0], 25, NO_ROUTE),
            v4([255, 255, 255, 255], 32, 7),
            v4([10, 0, 0, 0], 8, 8), // replace the parent
            v4([0, 0, 0, 0], 0, NO_ROUTE),
            v4([10, 0, 0, 7], 32, NO_ROUTE),
            v4([10, 0, 0, 0], 24, NO_ROUTE),
            v4([255, 255, 255, 255], 32, NO_ROUTE),
        ];
        let routes: Vec<Route<u32>> = steps.to_vec();
        let addrs = crate::testkit::probes(&routes, &[0x0a00_0001, 0x0a00_0080]);
        let mut d = Dir24::build(&[], &()).unwrap();
        let mut map = RouteMap::new();
        for (i, r) in steps.into_iter().enumerate() {
            step(&mut d, &mut map, r, &addrs);
            if i == 2 {
                assert_eq!(d.tbl8_groups(), 1);
                assert_eq!(d.lookup(0x0a00_0007), 3);
                assert_eq!(d.lookup(0x0a00_0080), 1);
            }
        }
        assert_eq!(map.len(), 1);
        assert_eq!(d.lookup(0x0a00_0007), 8);
        // Every /25+ route is gone: the groups went back to the free list.
        assert_eq!(d.tbl8_groups(), 0);
        assert_eq!(d.free8.len(), d.tbl8.len() / 256);
        // A new long prefix reuses a freed group instead of growing tbl8.
        let before = d.tbl8.len();
        step(&mut d, &mut map, v4([192, 168, 1, 1], 32, 9), &addrs);
        assert_eq!(d.tbl8.len(), before);
        assert_eq!(d.tbl8_groups(), 1);
        assert_eq!(d.lookup(0xc0a8_0101), 9);
    }

    #[test]
    fn too_large_next_hop_leaves_the_table_alone() {
        let routes = [v4([10, 0, 0, 0], 8, 1), v4([10, 0, 0, 0], 30, 2)];
        let mut d = Dir24::build(&routes, &()).unwrap();
        let mut map = RouteMap::from_routes(&routes);
        let bad = v4([10, 0, 0, 0], 26, MAX_NEXTHOP + 1);
        map.set(bad.prefix, bad.nexthop);
        let withdrawn = v4([10, 0, 0, 0], 30, NO_ROUTE).prefix;
        map.set(withdrawn, NO_ROUTE);
        assert_eq!(
            d.update(&map, &[withdrawn, bad.prefix]),
            Err(BuildError::NextHopTooLarge {
                nexthop: MAX_NEXTHOP + 1,
                max: MAX_NEXTHOP
            })
        );
        let addrs = crate::testkit::probes(&routes, &[]);
        check_against_golden(&d, &routes, &addrs, "after the refused update");
        assert_eq!(<Dir24 as LpmUpdate<u32>>::MAX_NEXTHOP, EXT - 1);
    }

    proptest! {
        // Every case allocates the 64 MiB first level: few cases.
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn v4_updates_match_a_fresh_build(case in updates_and_probes(POOL4)) {
            check_updates::<u32, Dir24>(&(), &case, "dir24");
        }
    }
}
