//! Stage 5b, `ecmp`: one member of a next-hop group.
//!
//! A new flow's member comes from resilient bucket hashing (`vfsr_flow::ResilientGroup`: the
//! flow hash picks one of 256 buckets, each bucket names a member), so adding or removing a
//! member moves only the buckets that must move. A flow already in the flow table keeps its
//! member as long as that member is still in the group, whatever the buckets say (stateful
//! ECMP, the FreeBSD seed's server-load-balancing case); that decision is the worker's, which
//! holds the flow's old member.
//!
//! Each worker keeps its own bucket tables, indexed by group index and rebuilt when the
//! group's next-hop entry changes (generation or version). A rebuild starts from the bucket
//! table it replaces (the same index at an older version, or the group a refreshed flow came
//! from), so a member change keeps every other member's buckets in place.

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

    /// Picks a member of group `nh` (at generation `gen`, version `version`, with
    /// `members`) for a flow hashing to `hash`. `from` names another group whose buckets the
    /// new table should start from when this one is not cached yet (a flow's previous group).
    #[inline]
    pub fn select(
        &mut self,
        nh: u32,
        gen: u32,
        version: u32,
        members: &[u32],
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
        match self.rebuild(nh, gen, version, members, from) {
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
            Some(mut g) => match g.sync(members) {
                Ok(_) => g,
                Err(_) => ResilientGroup::with_members(members).ok()?,
            },
            None => ResilientGroup::with_members(members).ok()?,
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
        (0..4096u64)
            .map(|i| {
                let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                match g.select(nh, 0, version, members, h, from) {
                    EcmpOutcome::Member(m) => m,
                    EcmpOutcome::Drop(r) => panic!("{r}"),
                }
            })
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
    fn empty_group_drops() {
        let mut g = EcmpGroups::new();
        assert_eq!(
            g.select(5, 0, 0, &[], 7, None),
            EcmpOutcome::Drop(DropReason::EcmpEmpty)
        );
    }
}
