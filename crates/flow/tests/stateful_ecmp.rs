//! Stateful ECMP: the flow table and resilient hashing together (Li & Macy, "Optimizing the
//! BSD Routing System for Parallel Processing", section 4.1).
//!
//! A worker caches, per flow, the group member it chose and the group generation it chose it
//! under. When the group changes the entries become stale; the refresh keeps the old member if
//! it is still in the group and asks the bucket table only for flows whose member left. So:
//! - established flows keep their member across additions and removals, even where their
//!   bucket now belongs to another member;
//! - only flows of a removed member move;
//! - new flows follow the bucket table, which itself moved only the removed member's buckets
//!   (or, on an addition, only the buckets given to the new member).

use std::net::Ipv4Addr;

use vfsr_flow::{FlowConfig, FlowHasher, FlowKey, FlowTable, ResilientGroup};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cached {
    member: u32,
    group_gen: u64,
}

/// The worker's per-packet decision: a hit, or a refresh that keeps a surviving member, or a
/// fresh choice from the bucket table.
fn forward(t: &mut FlowTable<Cached>, g: &ResilientGroup, key: &FlowKey, now: u32) -> u32 {
    let hash = t.hasher().hash(key);
    let gen = g.generation();
    let v = t.resolve(
        key,
        now,
        |v| v.group_gen == gen,
        |old| {
            let member = match old {
                Some(o) if g.contains(o.member) => o.member,
                _ => g.select(hash)?,
            };
            Some(Cached {
                member,
                group_gen: gen,
            })
        },
    );
    v.map_or(0, |v| v.member)
}

fn flows(base: u8, n: u32) -> Vec<FlowKey> {
    (0..n)
        .map(|i| {
            FlowKey::v4(
                Ipv4Addr::new(base, 0, (i >> 8) as u8, i as u8),
                Ipv4Addr::new(203, 0, 113, 10),
                6,
                (1024 + i % 50000) as u16,
                443,
            )
        })
        .collect()
}

#[test]
fn established_flows_keep_their_member_new_flows_move_minimally() {
    let mut g = ResilientGroup::with_members(&[1, 2, 3, 4]).unwrap();
    let mut t: FlowTable<Cached> = FlowTable::new(FlowConfig {
        // Room to spare: a flow the table evicted would be a new flow again.
        capacity: 1 << 16,
        ..FlowConfig::default()
    });
    let h = FlowHasher::new(FlowConfig::default().seed);
    let old_flows = flows(10, 2000);
    let first: Vec<u32> = old_flows
        .iter()
        .map(|k| forward(&mut t, &g, k, 0))
        .collect();
    for m in 1..=4 {
        assert!(first.contains(&m), "member {m} unused");
    }
    assert_eq!(t.counters().inserts, 2000);

    // ---- Remove member 2. ----
    let before = g.clone();
    assert_eq!(g.remove(2).unwrap(), 64);
    let on_two = first.iter().filter(|&&m| m == 2).count();
    let second: Vec<u32> = old_flows
        .iter()
        .map(|k| forward(&mut t, &g, k, 1))
        .collect();
    for (i, (&a, &b)) in first.iter().zip(&second).enumerate() {
        if a == 2 {
            assert_ne!(b, 2, "flow {i} still on the removed member");
            assert_eq!(b, g.select(h.hash(&old_flows[i])).unwrap());
        } else {
            assert_eq!(a, b, "flow {i} moved although its member stayed");
        }
    }
    // Every entry was stale once (the group changed); only member 2's flows changed value.
    assert_eq!(t.counters().stale_refreshes, 2000);
    let moved = first.iter().zip(&second).filter(|(a, b)| a != b).count();
    assert_eq!(moved, on_two);

    // New flows: the bucket table moved only member 2's buckets.
    let new_flows = flows(20, 2000);
    for k in &new_flows {
        let hash = h.hash(k);
        let (was, is) = (before.select(hash).unwrap(), g.select(hash).unwrap());
        assert!(was == is || was == 2, "a new flow moved off member {was}");
        assert_eq!(forward(&mut t, &g, k, 1), is);
    }

    // ---- Add member 5. ----
    let before = g.clone();
    assert_eq!(g.add(5).unwrap(), 256 / 4);
    let third: Vec<u32> = old_flows
        .iter()
        .map(|k| forward(&mut t, &g, k, 2))
        .collect();
    let moved: Vec<usize> = (0..third.len())
        .filter(|&i| third[i] != second[i])
        .collect();
    assert!(
        moved.is_empty(),
        "an addition moved established flows {moved:?}"
    );
    assert_eq!(t.counters().evictions, 0);
    // Some of those flows' buckets now belong to 5: the flow table, not the hash, kept them.
    let kept_by_table = old_flows
        .iter()
        .zip(&third)
        .filter(|(k, &m)| g.select(h.hash(k)) == Some(5) && m != 5)
        .count();
    assert!(kept_by_table > 100, "{kept_by_table}");

    // Brand-new flows use the new table: moved ones go to 5 and only those moved.
    let newer = flows(30, 2000);
    let mut to_five = 0;
    for k in &newer {
        let hash = h.hash(k);
        let (was, is) = (before.select(hash).unwrap(), g.select(hash).unwrap());
        assert!(
            was == is || is == 5,
            "a new flow moved to {is}, not to the new member"
        );
        to_five += usize::from(is == 5);
        assert_eq!(forward(&mut t, &g, k, 2), is);
    }
    assert!(to_five > 200, "{to_five}");

    // A flow the table has forgotten is a new flow again.
    t.invalidate(&old_flows[0]);
    assert_eq!(
        forward(&mut t, &g, &old_flows[0], 3),
        g.select(h.hash(&old_flows[0])).unwrap()
    );
}

#[test]
fn stateless_selection_would_have_moved_established_flows() {
    // The contrast the paper draws: without the flow table, adding a member moves every flow
    // of the buckets it takes, established or not.
    let mut g = ResilientGroup::with_members(&[1, 2, 3, 4]).unwrap();
    let h = FlowHasher::new(0);
    let f = flows(40, 2000);
    let before: Vec<u32> = f.iter().map(|k| g.select(h.hash(k)).unwrap()).collect();
    g.add(5).unwrap();
    let after: Vec<u32> = f.iter().map(|k| g.select(h.hash(k)).unwrap()).collect();
    let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
    // About a fifth of the flows (51 of 256 buckets changed owner) move, all to 5.
    assert!((300..=500).contains(&moved), "{moved}");
    assert!(before.iter().zip(&after).all(|(a, b)| a == b || *b == 5));
}

#[test]
fn a_weight_change_keeps_established_flows_and_steers_new_ones() {
    let mut g = ResilientGroup::with_weights(&[1, 2, 3], &[1, 1, 1]).unwrap();
    let mut t: FlowTable<Cached> = FlowTable::new(FlowConfig {
        capacity: 1 << 16,
        ..FlowConfig::default()
    });
    let h = FlowHasher::new(FlowConfig::default().seed);
    let old_flows = flows(50, 3000);
    let first: Vec<u32> = old_flows
        .iter()
        .map(|k| forward(&mut t, &g, k, 0))
        .collect();

    // The routing daemon now weighs member 1 three times as much (targets 153.6, 51.2, 51.2
    // buckets): member 1 takes buckets from 2 and 3, and nothing else moves.
    let before = g.clone();
    let moved = g.sync_weighted(&[1, 2, 3], &[3, 1, 1]).unwrap();
    assert_eq!(moved, 153 - 85);
    assert_eq!(g.share(1), 153);
    for (b, (&was, &is)) in before.buckets().iter().zip(g.buckets()).enumerate() {
        assert!(was == is || is == 1, "bucket {b} moved from {was} to {is}");
    }

    // Established flows keep their member, although many of their buckets now belong to 1.
    let second: Vec<u32> = old_flows
        .iter()
        .map(|k| forward(&mut t, &g, k, 1))
        .collect();
    assert_eq!(first, second);
    assert_eq!(t.counters().stale_refreshes, 3000);
    let kept_by_table = old_flows
        .iter()
        .zip(&second)
        .filter(|(k, &m)| g.select(h.hash(k)) != Some(m))
        .count();
    assert!(kept_by_table > 400, "{kept_by_table}");

    // New flows follow the weights (3:1:1), and leave 2 and 3 only for 1.
    let newer = flows(60, 10_000);
    let mut on = [0usize; 4];
    for k in &newer {
        let hash = h.hash(k);
        let (was, is) = (before.select(hash).unwrap(), g.select(hash).unwrap());
        assert!(was == is || is == 1, "a new flow moved from {was} to {is}");
        let m = forward(&mut t, &g, k, 1);
        assert_eq!(m, is);
        on[m as usize] += 1;
    }
    for (m, w) in [(1, 3.0), (2, 1.0), (3, 1.0)] {
        let got = on[m] as f64 / newer.len() as f64;
        assert!((got - w / 5.0).abs() < 0.03, "member {m}: {got}");
    }
}
