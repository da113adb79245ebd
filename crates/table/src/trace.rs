//! Update traces generated from a table, for benchmarks and tests of the live FIB.
//!
//! A trace is a list of phases; each phase is a list of changes (a route; next hop
//! [`NO_ROUTE`] withdraws). From a table of `n` routes and a seed, [`trace`] makes, in order:
//!
//! ```text
//!   withdraw        a random share of the table withdrawn        (share · n changes)
//!   announce        the same routes announced again              (share · n)
//!   change          another random share moved to another next   (share · n)
//!                   hop used by the table
//!   reset-withdraw  a session reset: every route of the next hop  (routes of that next hop)
//!                   that the most routes use, withdrawn
//!   reset-announce  the same routes back, with their next hop     (same)
//! ```
//!
//! Applied in order to the table, the trace ends at the table it started from except for the
//! `change` phase, whose routes keep their new next hops. The same table and seed always give
//! the same trace.

use std::collections::HashMap;

use vfsr_lpm::{Key, NextHop, Route, NO_ROUTE};

use crate::rng::Rng;

/// One phase of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase<K: Key> {
    /// `withdraw`, `announce`, `change`, `reset-withdraw` or `reset-announce`.
    pub name: &'static str,
    /// The changes, in order.
    pub changes: Vec<Route<K>>,
}

/// A random sample of `k` distinct positions out of `n` (all of them if `k >= n`).
fn sample(rng: &mut Rng, n: usize, k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    let k = k.min(n);
    for i in 0..k {
        let j = i + rng.below((n - i) as u64) as usize;
        idx.swap(i, j);
    }
    idx.truncate(k);
    idx
}

/// The trace of `routes` (a canonical table: one route per prefix) with `per_phase` routes in
/// each of the withdraw, announce and change phases.
pub fn trace<K: Key>(routes: &[Route<K>], per_phase: usize, seed: u64) -> Vec<Phase<K>> {
    let mut rng = Rng::new(seed);
    let picked = sample(&mut rng, routes.len(), per_phase);
    let chosen: Vec<Route<K>> = picked
        .iter()
        .filter_map(|&i| routes.get(i))
        .copied()
        .collect();
    let withdraw = chosen
        .iter()
        .map(|r| Route::new(r.prefix, NO_ROUTE))
        .collect();
    let mut used: HashMap<NextHop, usize> = HashMap::new();
    for r in routes {
        *used.entry(r.nexthop).or_default() += 1;
    }
    let mut hops: Vec<(NextHop, usize)> = used.into_iter().collect();
    // Most used first, ties by number, so the trace does not depend on hash order.
    hops.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let others: Vec<NextHop> = hops.iter().map(|h| h.0).collect();
    let change = sample(&mut rng, routes.len(), per_phase)
        .into_iter()
        .filter_map(|i| routes.get(i))
        .map(|r| {
            let mut nh = r.nexthop;
            if others.len() > 1 {
                while nh == r.nexthop {
                    nh = others
                        .get(rng.below(others.len() as u64) as usize)
                        .copied()
                        .unwrap_or(r.nexthop);
                }
            } else {
                nh = r.nexthop.wrapping_add(1).max(1);
            }
            Route::new(r.prefix, nh)
        })
        .collect();
    let reset_nh = hops.first().map(|h| h.0);
    let reset: Vec<Route<K>> = routes
        .iter()
        .filter(|r| Some(r.nexthop) == reset_nh)
        .copied()
        .collect();
    vec![
        Phase {
            name: "withdraw",
            changes: withdraw,
        },
        Phase {
            name: "announce",
            changes: chosen,
        },
        Phase {
            name: "change",
            changes: change,
        },
        Phase {
            name: "reset-withdraw",
            changes: reset
                .iter()
                .map(|r| Route::new(r.prefix, NO_ROUTE))
                .collect(),
        },
        Phase {
            name: "reset-announce",
            changes: reset,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfsr_lpm::{Prefix, RouteMap};

    fn table() -> Vec<Route<u32>> {
        (0..1000u32)
            .map(|i| {
                Route::new(
                    Prefix::new_masked(i << 12, 20),
                    1 + i % 3 + (i % 7 == 0) as u32,
                )
            })
            .collect()
    }

    #[test]
    fn phases_have_their_sizes_and_are_reproducible() {
        let t = table();
        let tr = trace(&t, 100, 7);
        let names: Vec<&str> = tr.iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            [
                "withdraw",
                "announce",
                "change",
                "reset-withdraw",
                "reset-announce"
            ]
        );
        assert_eq!(tr[0].changes.len(), 100);
        assert!(tr[0].changes.iter().all(|r| r.nexthop == NO_ROUTE));
        assert_eq!(tr[2].changes.len(), 100);
        let busiest = tr[4].changes[0].nexthop;
        let count = t.iter().filter(|r| r.nexthop == busiest).count();
        assert_eq!(tr[3].changes.len(), count);
        assert!(t
            .iter()
            .all(|r| t.iter().filter(|x| x.nexthop == r.nexthop).count() <= count));
        assert_eq!(trace(&t, 100, 7), tr);
        assert_ne!(trace(&t, 100, 8), tr);
    }

    #[test]
    fn replaying_restores_the_table_but_for_the_changes() {
        let t = table();
        let tr = trace(&t, 50, 1);
        let mut m = RouteMap::from_routes(&t);
        for p in &tr {
            for r in &p.changes {
                m.set(r.prefix, r.nexthop);
            }
        }
        assert_eq!(m.len(), t.len());
        let moved: Vec<Route<u32>> = t
            .iter()
            .filter(|r| m.get(&r.prefix) != Some(r.nexthop))
            .copied()
            .collect();
        assert!(moved.len() <= 50 && !moved.is_empty());
        assert!(tr[2].changes.iter().all(|c| t
            .iter()
            .any(|r| r.prefix == c.prefix && r.nexthop != c.nexthop)));
        assert!(trace::<u32>(&[], 10, 1)
            .iter()
            .all(|p| p.changes.is_empty()));
    }
}
