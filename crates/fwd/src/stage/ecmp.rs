//! Stage 5b, `ecmp`: one member of a next-hop group.
//!
//! A new flow's member comes from resilient bucket hashing (`vfsr_flow::ResilientGroup`: the
//! flow hash picks one of 256 buckets, each bucket names a member, and a member owns a share
//! of the buckets in proportion to its weight), so adding or removing a member, or changing a
//! weight, moves only the buckets that must move. A flow already in the flow table keeps its
//! member as long as that member is still in the group, whatever the buckets say (stateful
//! ECMP, the FreeBSD paper's server-load-balancing case); that decision is the worker's, which
//! holds the flow's old member.
//!
//! Each worker keeps its own bucket tables, indexed by group index and rebuilt when the
//! group's next-hop entry changes (generation or version). A rebuild starts from the bucket
//! table it replaces (the same index at an older version, or the group a refreshed flow came
//! from), so a change of members or weights keeps every other bucket in place. Weights cost
//! nothing per packet: they shape the table when it is built, and a cached table is read with
//! a shift and an index.
//!
//! ```text
//!   group 10, members [1, 2], weights [2, 1], version 0    buckets 0..=170 → 1, 171..=255 → 2
//!   version 1, weights [1, 1] (same members)               buckets 128..=170 move to 2, no other
//! ```
//!
//! A group whose member and weight lists differ in length, or with a zero weight, has no
//! usable member (`ecmp_empty`), like a group without members.

use vfsr_flow::ResilientGroup;

use crate::counters::DropReason;

/// Largest group index the cache holds (next-hop indices are 16-bit in the RIB).
const MAX_GROUP_INDEX: u32 = 1 << 20;

/// What `ecmp` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcmpOutcome {
    /// Use this member (a next-hop index).
    Member(u32),
    /// The group has no member, or an index the cache does not hold.
    Drop(DropReason),
}

#[derive(Clone, Debug)]
struct Cached {
    gen: u32,
    version: u32,
    group: ResilientGroup,
}

/// One worker's bucket tables.
#[derive(Clone, Debug, Default)]
pub struct EcmpGroups {
    slots: Vec<Option<Cached>>,
}

impl EcmpGroups {
    /// No groups yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Picks a member of group `nh` (at generation `gen`, version `version`, with `members`
    /// and their `weights`) for a flow hashing to `hash`. `from` names another group whose
    /// buckets the new table should start from when this one is not cached yet (a flow's
    /// previous group).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn select(
        &mut self,
        nh: u32,
        gen: u32,
        version: u32,
        members: &[u32],
        weights: &[u16],
        hash: u64,
        from: Option<u32>,
    ) -> EcmpOutcome {
        if let Some(Some(c)) = self.slots.get(nh as usize) {
            if c.gen == gen && c.version == version {
                return match c.group.select(hash) {
                    Some(m) => EcmpOutcome::Member(m),
                    None => EcmpOutcome::Drop(DropReason::EcmpEmpty),
                };
            }
        }
        match self.rebuild(nh, gen, version, members, weights, from) {
            Some(g) => match g.select(hash) {
                Some(m) => EcmpOutcome::Member(m),
                None => EcmpOutcome::Drop(DropReason::EcmpEmpty),
            },
            None => EcmpOutcome::Drop(DropReason::EcmpEmpty),
        }
    }

    #[cold]
    fn rebuild(
        &mut self,
        nh: u32,
        gen: u32,
        version: u32,
        members: &[u32],
        weights: &[u16],
        from: Option<u32>,
    ) -> Option<&ResilientGroup> {
        if nh >= MAX_GROUP_INDEX || members.is_empty() {
            return None;
        }
        let i = nh as usize;
        // Start from this index's old table if it held the same group (generation), else
        // from the group the caller names.
        let base = match self.slots.get(i) {
            Some(Some(c)) if c.gen == gen => Some(c.group.clone()),
            _ => from
                .and_then(|f| self.slots.get(f as usize))
                .and_then(|c| c.as_ref())
                .map(|c| c.group.clone()),
        };
        let group = match base {
            Some(mut g) => match g.sync_weighted(members, weights) {
                Ok(_) => g,
                Err(_) => ResilientGroup::with_weights(members, weights).ok()?,
            },
            None => ResilientGroup::with_weights(members, weights).ok()?,
        };
        if self.slots.len() <= i {
            self.slots.resize(i + 1, None);
        }
        let slot = self.slots.get_mut(i)?;
        *slot = Some(Cached {
            gen,
            version,
            group,
        });
        slot.as_ref().map(|c| &c.group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members_of(
        g: &mut EcmpGroups,
        nh: u32,
        version: u32,
        members: &[u32],
        from: Option<u32>,
    ) -> Vec<u32> {
        let weights = vec![1; members.len()];
        (0..4096u64)
            .map(|i| {
                let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                match g.select(nh, 0, version, members, &weights, h, from) {
                    EcmpOutcome::Member(m) => m,
                    EcmpOutcome::Drop(r) => panic!("{r}"),
                }
            })
            .collect()
    }

    /// The member of each of the 256 buckets (a hash whose top eight bits are the bucket).
    fn owners(
        g: &mut EcmpGroups,
        nh: u32,
        version: u32,
        members: &[u32],
        weights: &[u16],
    ) -> Vec<u32> {
        (0..256u64)
            .map(
                |b| match g.select(nh, 0, version, members, weights, b << 56, None) {
                    EcmpOutcome::Member(m) => m,
                    EcmpOutcome::Drop(r) => panic!("{r}"),
                },
            )
            .collect()
    }

    #[test]
    fn spreads_and_moves_only_what_must_move() {
        let mut g = EcmpGroups::new();
        let before = members_of(&mut g, 10, 0, &[1, 2, 3], None);
        for m in [1, 2, 3] {
            let n = before.iter().filter(|&&x| x == m).count();
            assert!(n > 1000, "member {m} has {n} of 4096");
        }
        // The same index gets a fourth member (version 1): only flows moving to 4 change.
        let after = members_of(&mut g, 10, 1, &[1, 2, 3, 4], None);
        for (b, a) in before.iter().zip(&after) {
            assert!(a == b || *a == 4, "{b} moved to {a}");
        }
        // A new group index made from group 10 without member 2: only 2's flows move.
        let other = members_of(&mut g, 11, 0, &[1, 3, 4], Some(10));
        for (b, a) in after.iter().zip(&other) {
            assert!(a == b || *b == 2, "{b} moved to {a}");
        }
    }

    #[test]
    fn a_weighted_group_golden() {
        let mut g = EcmpGroups::new();
        // 2:1 of 256 buckets: targets 170.67 and 85.33.
        let o = owners(&mut g, 10, 0, &[1, 2], &[2, 1]);
        let mut expect = vec![1; 171];
        expect.resize(256, 2);
        assert_eq!(o, expect);
        // 3:1:4 (member 3 weight 4 of 8): 96, 32 and 128 buckets.
        let o = owners(&mut g, 12, 0, &[1, 2, 3], &[3, 1, 4]);
        let count = |m| o.iter().filter(|&&x| x == m).count();
        assert_eq!([count(1), count(2), count(3)], [96, 32, 128]);
    }

    #[test]
    fn a_weight_change_golden() {
        let mut g = EcmpGroups::new();
        let before = owners(&mut g, 10, 0, &[1, 2], &[2, 1]);
        // Version 1 evens the weights: 1 hands its highest 43 buckets (128..=170) to 2.
        let after = owners(&mut g, 10, 1, &[1, 2], &[1, 1]);
        let mut expect = vec![1; 128];
        expect.resize(256, 2);
        assert_eq!(after, expect);
        let moved: Vec<usize> = (0..256).filter(|&b| before[b] != after[b]).collect();
        assert_eq!(moved, (128..=170).collect::<Vec<_>>());
        // Version 2 adds member 3 with weight 2 (target 128): only buckets moving to 3 change,
        // 32 from each of 1 and 2.
        let third = owners(&mut g, 10, 2, &[1, 2, 3], &[1, 1, 2]);
        for (b, (&x, &y)) in after.iter().zip(&third).enumerate() {
            assert!(x == y || y == 3, "bucket {b}: {x} moved to {y}");
        }
        let count = |m| third.iter().filter(|&&x| x == m).count();
        assert_eq!([count(1), count(2), count(3)], [64, 64, 128]);
        // A new index made from group 10 with member 1 weighed up: only buckets moving to 1
        // change.
        let from: Vec<u32> = (0..256u64)
            .map(
                |b| match g.select(11, 0, 0, &[1, 2, 3], &[2, 1, 2], b << 56, Some(10)) {
                    EcmpOutcome::Member(m) => m,
                    EcmpOutcome::Drop(r) => panic!("{r}"),
                },
            )
            .collect();
        for (b, (&x, &y)) in third.iter().zip(&from).enumerate() {
            assert!(x == y || y == 1, "bucket {b}: {x} moved to {y}");
        }
    }

    #[test]
    fn empty_group_drops() {
        let mut g = EcmpGroups::new();
        assert_eq!(
            g.select(5, 0, 0, &[], &[], 7, None),
            EcmpOutcome::Drop(DropReason::EcmpEmpty)
        );
    }

    #[test]
    fn malformed_weights_drop() {
        let mut g = EcmpGroups::new();
        let empty = EcmpOutcome::Drop(DropReason::EcmpEmpty);
        assert_eq!(g.select(5, 0, 0, &[1, 2], &[1], 7, None), empty);
        assert_eq!(g.select(5, 0, 0, &[1, 2], &[1, 0], 7, None), empty);
        // A good version of the group works, and a bad later version still drops.
        assert_eq!(
            g.select(5, 0, 1, &[1], &[1], 7, None),
            EcmpOutcome::Member(1)
        );
        assert_eq!(g.select(5, 0, 2, &[1, 2], &[1, 1, 1], 7, None), empty);
    }
}
