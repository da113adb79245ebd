//! Resilient ECMP member selection for a next-hop group.
//!
//! The FreeBSD seed (section 4) starts from the stateless rule: member = hash mod n. When a
//! member is added or removed, n changes and almost every flow moves to another member; for
//! server load balancing, where connections end at the members, every moved connection is
//! reset. Two mechanisms fix this, and vfsr uses both:
//!
//! 1. **Resilient hashing (this module)**: the hash picks one of a fixed number of buckets
//!    (256 by default), and a table says which member owns each bucket. Changing the member
//!    set reassigns as few buckets as possible:
//!    - removing a member hands *only its own buckets* to the remaining members (each to the
//!      member with the fewest buckets at that moment), so only its flows move;
//!    - adding a member takes `buckets / (members + 1)` buckets, one at a time from whichever
//!      member has the most, so only the flows of those buckets move, all to the new member.
//!
//!    Shares stay within one bucket of each other, and the table is a pure function of the
//!    bucket count and the history of additions and removals (ties go to the member added
//!    earliest; a member gives up its highest-numbered bucket).
//! 2. **Stateful forwarding (the flow table)**: a flow already in the
//!    [`FlowTable`](crate::FlowTable) keeps the member it was given even when its bucket
//!    changes owner; only flows whose member left the group are moved. Resilient hashing
//!    decides for new flows (and for flows the table has forgotten), the flow table keeps the
//!    old ones where they are. `tests/stateful_ecmp.rs` shows the two together.
//!
//! ```text
//!   members [1, 2, 3, 4], 8 buckets (256 in practice)
//!   buckets   0 1 2 3 4 5 6 7
//!   owner     1 1 4 3 2 2 4 3        hash ── top 3 bits ──▶ bucket ──▶ member
//!   remove 2: 1 1 4 3 1 3 4 3        only buckets 4 and 5 changed (to the smallest shares)
//!   add 5:    1 1 4 3 5 3 4 5        floor(8 / 4) = 2 buckets moved (from 1 and 3), to 5
//! ```
//!
//! The bucket index comes from the *top* bits of the flow hash; the flow table uses the low
//! bits for its bucket, so the two choices are independent.

use std::fmt;

/// Buckets per group unless told otherwise.
pub const DEFAULT_ECMP_BUCKETS: usize = 256;

/// Most buckets a group may have.
pub const MAX_ECMP_BUCKETS: usize = 1 << 12;

/// Why a group change was refused (the group is unchanged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcmpError {
    /// The bucket count is not a power of two in `1..=MAX_ECMP_BUCKETS`.
    BadBucketCount(usize),
    /// The member is already in the group.
    Duplicate(u32),
    /// The member is not in the group.
    NotMember(u32),
    /// The group has as many members as buckets.
    Full,
}

impl fmt::Display for EcmpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EcmpError::BadBucketCount(n) => write!(
                f,
                "ECMP bucket count {n} is not a power of two in 1..={MAX_ECMP_BUCKETS}"
            ),
            EcmpError::Duplicate(m) => write!(f, "next hop {m} is already a member"),
            EcmpError::NotMember(m) => write!(f, "next hop {m} is not a member"),
            EcmpError::Full => f.write_str("the group has as many members as buckets"),
        }
    }
}

impl std::error::Error for EcmpError {}

/// A next-hop group's bucket table: hash → bucket → member (a next-hop index).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResilientGroup {
    /// Members in order of addition (the tie-break order).
    members: Vec<u32>,
    /// Owner of each bucket; meaningless while `members` is empty.
    buckets: Vec<u32>,
    /// `64 - log2(buckets)`: the shift that leaves the top bits of a hash.
    shift: u32,
    /// Bumped on every change.
    generation: u64,
}

impl ResilientGroup {
    /// A group of `buckets` buckets whose members are added in the order given.
    pub fn new(buckets: usize, members: &[u32]) -> Result<Self, EcmpError> {
        if !buckets.is_power_of_two() || buckets > MAX_ECMP_BUCKETS {
            return Err(EcmpError::BadBucketCount(buckets));
        }
        let mut g = ResilientGroup {
            members: Vec::with_capacity(members.len()),
            buckets: vec![0; buckets],
            shift: 64 - buckets.trailing_zeros(),
            generation: 0,
        };
        for &m in members {
            g.add(m)?;
        }
        g.generation = 0;
        Ok(g)
    }

    /// A group with [`DEFAULT_ECMP_BUCKETS`] buckets.
    pub fn with_members(members: &[u32]) -> Result<Self, EcmpError> {
        Self::new(DEFAULT_ECMP_BUCKETS, members)
    }

    /// The member for a flow hash; `None` if the group is empty.
    #[inline]
    pub fn select(&self, hash: u64) -> Option<u32> {
        if self.members.is_empty() {
            return None;
        }
        let b = hash.checked_shr(self.shift).unwrap_or(0) as usize;
        self.buckets.get(b).copied()
    }

    /// The bucket a hash falls in.
    #[inline]
    pub fn bucket_of(&self, hash: u64) -> usize {
        hash.checked_shr(self.shift).unwrap_or(0) as usize
    }

    /// Members, in order of addition.
    pub fn members(&self) -> &[u32] {
        &self.members
    }

    /// Whether `member` is in the group.
    pub fn contains(&self, member: u32) -> bool {
        self.members.contains(&member)
    }

    /// The bucket table (owner per bucket); meaningless while the group is empty.
    pub fn buckets(&self) -> &[u32] {
        &self.buckets
    }

    /// Number of buckets `member` owns.
    pub fn share(&self, member: u32) -> usize {
        if !self.contains(member) {
            return 0;
        }
        self.buckets.iter().filter(|&&o| o == member).count()
    }

    /// Bumped on every successful change (0 after [`ResilientGroup::new`]); flow table entries
    /// can record it to notice that the group changed.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Buckets owned per member, in member order.
    fn counts(&self) -> Vec<usize> {
        let mut counts = vec![0usize; self.members.len()];
        for owner in &self.buckets {
            if let Some(p) = self.members.iter().position(|m| m == owner) {
                if let Some(c) = counts.get_mut(p) {
                    *c += 1;
                }
            }
        }
        counts
    }

    /// Adds `member`, moving `buckets / (members + 1)` buckets to it (all of them if it is
    /// the first). Returns the number of buckets moved.
    pub fn add(&mut self, member: u32) -> Result<usize, EcmpError> {
        if self.contains(member) {
            return Err(EcmpError::Duplicate(member));
        }
        if self.members.len() >= self.buckets.len() {
            return Err(EcmpError::Full);
        }
        if self.members.is_empty() {
            self.buckets.fill(member);
            self.members.push(member);
            self.generation += 1;
            return Ok(self.buckets.len());
        }
        // Each member's buckets, ascending; a member gives up its highest one first.
        let mut owned: Vec<Vec<usize>> = vec![Vec::new(); self.members.len()];
        for (b, owner) in self.buckets.iter().enumerate() {
            if let Some(p) = self.members.iter().position(|m| m == owner) {
                if let Some(list) = owned.get_mut(p) {
                    list.push(b);
                }
            }
        }
        let take = self.buckets.len() / (self.members.len() + 1);
        for _ in 0..take {
            // The member with the most buckets; the earliest added on a tie.
            let mut richest: Option<&mut Vec<usize>> = None;
            for list in owned.iter_mut() {
                if richest.as_ref().is_none_or(|r| list.len() > r.len()) {
                    richest = Some(list);
                }
            }
            let Some(b) = richest.and_then(|list| list.pop()) else {
                break;
            };
            if let Some(owner) = self.buckets.get_mut(b) {
                *owner = member;
            }
        }
        self.members.push(member);
        self.generation += 1;
        Ok(take)
    }

    /// Removes `member`, handing each of its buckets (in ascending order) to the member with
    /// the fewest buckets at that moment (the earliest added on a tie). Returns the number of
    /// buckets moved.
    pub fn remove(&mut self, member: u32) -> Result<usize, EcmpError> {
        let Some(pos) = self.members.iter().position(|&m| m == member) else {
            return Err(EcmpError::NotMember(member));
        };
        self.members.remove(pos);
        self.generation += 1;
        let orphans: Vec<usize> = (0..self.buckets.len())
            .filter(|&b| self.buckets.get(b) == Some(&member))
            .collect();
        if self.members.is_empty() {
            return Ok(orphans.len());
        }
        let mut counts = self.counts();
        for &b in &orphans {
            let mut poorest = 0;
            for (p, &c) in counts.iter().enumerate() {
                if counts.get(poorest).is_some_and(|&best| c < best) {
                    poorest = p;
                }
            }
            if let (Some(owner), Some(&m), Some(c)) = (
                self.buckets.get_mut(b),
                self.members.get(poorest),
                counts.get_mut(poorest),
            ) {
                *owner = m;
                *c += 1;
            }
        }
        Ok(orphans.len())
    }

    /// Brings the group to the member set `members`: removes the members not in it (in
    /// ascending order), then adds the new ones (in the order given). Returns the number of
    /// buckets moved. On error (a duplicate in `members`, more members than buckets) the group
    /// is unchanged.
    pub fn sync(&mut self, members: &[u32]) -> Result<usize, EcmpError> {
        for (i, m) in members.iter().enumerate() {
            if members.iter().take(i).any(|x| x == m) {
                return Err(EcmpError::Duplicate(*m));
            }
        }
        if members.len() > self.buckets.len() {
            return Err(EcmpError::Full);
        }
        let mut gone: Vec<u32> = self
            .members
            .iter()
            .copied()
            .filter(|m| !members.contains(m))
            .collect();
        gone.sort_unstable();
        let mut moved = 0;
        for m in gone {
            moved += self.remove(m)?;
        }
        for &m in members {
            if !self.contains(m) {
                moved += self.add(m)?;
            }
        }
        Ok(moved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff(a: &[u32], b: &[u32]) -> Vec<usize> {
        a.iter()
            .zip(b)
            .enumerate()
            .filter(|(_, (x, y))| x != y)
            .map(|(i, _)| i)
            .collect()
    }

    fn shares(g: &ResilientGroup) -> Vec<usize> {
        g.members().iter().map(|&m| g.share(m)).collect()
    }

    #[test]
    fn the_module_doc_example() {
        let mut g = ResilientGroup::new(8, &[1, 2, 3, 4]).unwrap();
        assert_eq!(g.buckets(), &[1, 1, 4, 3, 2, 2, 4, 3]);
        assert_eq!(shares(&g), vec![2, 2, 2, 2]);
        let before = g.buckets().to_vec();
        assert_eq!(g.remove(2).unwrap(), 2);
        let d = diff(&before, g.buckets());
        assert_eq!(d.len(), 2);
        assert!(d.iter().all(|&b| before[b] == 2));
        assert_eq!(g.buckets(), &[1, 1, 4, 3, 1, 3, 4, 3]);
        let before = g.buckets().to_vec();
        assert_eq!(g.add(5).unwrap(), 2);
        assert_eq!(g.buckets(), &[1, 1, 4, 3, 5, 3, 4, 5]);
        let d = diff(&before, g.buckets());
        assert_eq!(d.len(), 2);
        assert!(d.iter().all(|&b| g.buckets()[b] == 5));
    }

    #[test]
    fn initial_shares_are_equal() {
        let g = ResilientGroup::with_members(&[10, 20, 30, 40]).unwrap();
        assert_eq!(shares(&g), vec![64, 64, 64, 64]);
        let g = ResilientGroup::with_members(&[1, 2, 3]).unwrap();
        // 256 = 85 + 85 + 86.
        let mut s = shares(&g);
        s.sort_unstable();
        assert_eq!(s, vec![85, 85, 86]);
        assert_eq!(g.generation(), 0);
    }

    #[test]
    fn removal_moves_exactly_the_removed_members_buckets() {
        let mut g = ResilientGroup::with_members(&[1, 2, 3, 4]).unwrap();
        let before = g.buckets().to_vec();
        assert_eq!(g.remove(2).unwrap(), 64);
        let d = diff(&before, g.buckets());
        assert_eq!(d.len(), 64);
        assert!(d.iter().all(|&b| before[b] == 2));
        let mut s = shares(&g);
        s.sort_unstable();
        assert_eq!(s, vec![85, 85, 86]);
        assert!(!g.contains(2));
        assert_eq!(g.generation(), 1);
    }

    #[test]
    fn addition_takes_an_equal_share_from_the_others() {
        let mut g = ResilientGroup::with_members(&[1, 2, 3, 4]).unwrap();
        let before = g.buckets().to_vec();
        assert_eq!(g.add(5).unwrap(), 51); // floor(256 / 5)
        let d = diff(&before, g.buckets());
        assert_eq!(d.len(), 51);
        assert!(d.iter().all(|&b| g.buckets()[b] == 5));
        let mut s = shares(&g);
        s.sort_unstable();
        assert_eq!(s, vec![51, 51, 51, 51, 52]);
        // Each old member gave up 12 or 13 buckets.
        for m in 1..=4 {
            let lost = 64 - g.share(m);
            assert!(lost == 12 || lost == 13, "member {m} lost {lost}");
        }
    }

    #[test]
    fn shares_stay_balanced_through_a_history() {
        let mut g = ResilientGroup::with_members(&[1]).unwrap();
        for m in 2..=16 {
            let before = g.buckets().to_vec();
            let n = g.members().len();
            assert_eq!(g.add(m).unwrap(), 256 / (n + 1));
            assert_eq!(diff(&before, g.buckets()).len(), 256 / (n + 1));
            let s = shares(&g);
            assert!(
                s.iter().max().unwrap() - s.iter().min().unwrap() <= 1,
                "{s:?}"
            );
        }
        for m in [3, 7, 1, 16, 9] {
            let before = g.buckets().to_vec();
            let own = g.share(m);
            assert_eq!(g.remove(m).unwrap(), own);
            assert_eq!(diff(&before, g.buckets()).len(), own);
            let s = shares(&g);
            assert!(
                s.iter().max().unwrap() - s.iter().min().unwrap() <= 1,
                "{s:?}"
            );
        }
    }

    #[test]
    fn deterministic_given_the_history() {
        let run = || {
            let mut g = ResilientGroup::with_members(&[5, 6, 7]).unwrap();
            g.add(8).unwrap();
            g.remove(6).unwrap();
            g.add(9).unwrap();
            g
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn select_uses_the_top_bits() {
        let g = ResilientGroup::new(4, &[1, 2, 3, 4]).unwrap();
        let owners: Vec<u32> = (0..4u64).map(|b| g.select(b << 62).unwrap()).collect();
        assert_eq!(owners, g.buckets());
        assert_eq!(g.bucket_of(u64::MAX), 3);
        assert_eq!(g.select(u64::MAX >> 2), Some(g.buckets()[0]));
        // One bucket: every hash lands in it.
        let one = ResilientGroup::new(1, &[9]).unwrap();
        assert_eq!(one.select(u64::MAX), Some(9));
        assert_eq!(one.add_would_fail(), Err(EcmpError::Full));
    }

    impl ResilientGroup {
        fn add_would_fail(&self) -> Result<usize, EcmpError> {
            self.clone().add(u32::MAX)
        }
    }

    #[test]
    fn errors_leave_the_group_unchanged() {
        assert_eq!(
            ResilientGroup::new(100, &[1]),
            Err(EcmpError::BadBucketCount(100))
        );
        assert_eq!(
            ResilientGroup::new(0, &[1]),
            Err(EcmpError::BadBucketCount(0))
        );
        assert_eq!(
            ResilientGroup::new(1 << 13, &[1]),
            Err(EcmpError::BadBucketCount(1 << 13))
        );
        let mut g = ResilientGroup::with_members(&[1, 2]).unwrap();
        let before = g.clone();
        assert_eq!(g.add(1), Err(EcmpError::Duplicate(1)));
        assert_eq!(g.remove(3), Err(EcmpError::NotMember(3)));
        assert_eq!(g.sync(&[4, 4]), Err(EcmpError::Duplicate(4)));
        assert_eq!(g, before);
        assert!(!EcmpError::Full.to_string().is_empty());
    }

    #[test]
    fn empty_group_selects_nothing_and_refills() {
        let mut g = ResilientGroup::with_members(&[1]).unwrap();
        assert_eq!(g.remove(1).unwrap(), 256);
        assert_eq!(g.select(12345), None);
        assert_eq!(g.add(2).unwrap(), 256);
        assert_eq!(g.select(12345), Some(2));
        assert_eq!(ResilientGroup::with_members(&[]).unwrap().select(0), None);
    }

    #[test]
    fn sync_removes_then_adds() {
        let mut g = ResilientGroup::with_members(&[1, 2, 3, 4]).unwrap();
        let mut h = g.clone();
        let moved = g.sync(&[1, 3, 4, 5]).unwrap();
        let a = h.remove(2).unwrap();
        let b = h.add(5).unwrap();
        assert_eq!(moved, a + b);
        assert_eq!(g, h);
        assert_eq!(g.sync(&[1, 3, 4, 5]).unwrap(), 0);
    }
}
