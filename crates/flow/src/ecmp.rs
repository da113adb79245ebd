//! Resilient ECMP member selection for a weighted next-hop group.
//!
//! Li and Macy's FreeBSD routing paper (section 4) starts from the stateless rule: member = hash mod n. When a
//! member is added or removed, n changes and almost every flow moves to another member; for
//! server load balancing, where connections end at the members, every moved connection is
//! reset. Two mechanisms fix this, and vfsr uses both:
//!
//! 1. **Resilient hashing (this module)**: the hash picks one of a fixed number of buckets
//!    (256 by default), and a table says which member owns each bucket. Each member has a
//!    weight (at least 1) and a *target* of `buckets × weight / Σ weights` buckets, a
//!    fraction; a member is *within one bucket* of its target when it owns the target rounded
//!    down or up. Changing the group reassigns as few buckets as possible:
//!    - removing a member hands *only its own buckets* (in ascending order) to the remaining
//!      members, each to the member furthest below its target at that moment, so only its
//!      flows move;
//!    - adding a member moves buckets to it one at a time, each from whichever member is
//!      furthest above its new target, until the new member owns its target rounded down;
//!      only the flows of those buckets move, all to the new member;
//!    - changing weights moves buckets one at a time from the member furthest above its target
//!      to the member furthest below, for as long as some member is not within one bucket of
//!      its target. Buckets go only from members above their target to members below it (none
//!      both gives and takes), and no fewer moves could bring every member within one bucket:
//!      a member already within one bucket keeps its buckets unless the members further off
//!      cannot be evened out among themselves.
//!
//!    A new group is built by adding its members in order and then evening out as after a
//!    weight change, so every member starts within one bucket of its target. Additions and
//!    removals move only what they must, so with fractional targets they can leave a member
//!    further off (a member whose target is under one bucket gets none; the others keep its
//!    fraction); the next weight change evens that out. Ties go to the member added earliest
//!    and a member gives up its highest-numbered bucket, so the table is a pure function of
//!    the bucket count and the history of additions, removals and weight changes.
//!
//!    With equal weights every target is the same: a removal feeds the smallest shares, an
//!    addition takes `buckets / (members + 1)` buckets from the largest, and shares stay
//!    within one bucket of each other.
//! 2. **Stateful forwarding (the flow table)**: a flow already in the
//!    [`FlowTable`](crate::FlowTable) keeps the member it was given even when its bucket
//!    changes owner; only flows whose member left the group are moved. Resilient hashing
//!    decides for new flows (and for flows the table has forgotten), the flow table keeps the
//!    old ones where they are. `tests/stateful_ecmp.rs` shows the two together.
//!
//! ```text
//!   members [1, 2, 3, 4], equal weights, 8 buckets (256 in practice)
//!   buckets   0 1 2 3 4 5 6 7
//!   owner     1 1 4 3 2 2 4 3        hash ── top 3 bits ──▶ bucket ──▶ member
//!   remove 2: 1 1 4 3 1 3 4 3        only buckets 4 and 5 changed (to the smallest shares)
//!   add 5:    1 1 4 3 5 3 4 5        floor(8 / 4) = 2 buckets moved (from 1 and 3), to 5
//! ```
//!
//! With weights 2:1 (member 1 has weight 2, members 2 and 3 weight 1), 8 buckets; the targets
//! are on the right:
//!
//! ```text
//!   buckets            0 1 2 3 4 5 6 7   targets
//!   owner              1 1 1 1 3 3 2 2   1: 4    2: 2    3: 2     (1 took all, 2 took 7 and 6
//!                                                                  from 1, 3 took 5 and 4)
//!   weight of 2 → 2:   1 1 1 2 3 3 2 2   1: 3.2  2: 3.2  3: 1.6   2 was 1.2 below: bucket 3
//!                                        moves from 1 (0.8 above); then all are within one
//!   remove 3:          1 1 1 2 1 2 2 2   1: 4    2: 4            only 4 and 5 moved, one each
//!                                        (both 1 below; 4 to 1, added earlier, then 5 to 2)
//!   add 4, weight 2:   1 1 1 2 4 2 2 4   1, 2, 4: 2.67 each      floor(2.67) = 2 buckets, to
//!                                        4: bucket 4 from 1 (tie), then 7 from 2 (further above)
//! ```
//!
//! The bucket index comes from the *top* bits of the flow hash; the flow table uses the low
//! bits for its bucket, so the two choices are independent. Weights matter only when the
//! table changes: [`ResilientGroup::select`] is a shift and an index whatever the weights.

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
    /// The member was given weight 0.
    ZeroWeight(u32),
    /// Members and weights differ in number.
    WeightCount {
        /// Number of members.
        members: usize,
        /// Number of weights.
        weights: usize,
    },
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
            EcmpError::ZeroWeight(m) => write!(f, "next hop {m} has weight 0"),
            EcmpError::WeightCount { members, weights } => {
                write!(f, "{members} members but {weights} weights")
            }
        }
    }
}

impl std::error::Error for EcmpError {}

/// A next-hop group's bucket table: hash → bucket → member (a next-hop index).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResilientGroup {
    /// Members in order of addition (the tie-break order).
    members: Vec<u32>,
    /// `weights[i]` is the weight of `members[i]`, at least 1.
    weights: Vec<u16>,
    /// Owner of each bucket; meaningless while `members` is empty.
    buckets: Vec<u32>,
    /// `64 - log2(buckets)`: the shift that leaves the top bits of a hash.
    shift: u32,
    /// Bumped on every change.
    generation: u64,
}

/// The position of the largest key; the earliest on a tie.
fn first_max(keys: impl Iterator<Item = i64>) -> Option<usize> {
    let mut best: Option<(usize, i64)> = None;
    for (p, k) in keys.enumerate() {
        if best.is_none_or(|(_, b)| k > b) {
            best = Some((p, k));
        }
    }
    best.map(|(p, _)| p)
}

/// Checks a member list with its weights: as many weights as members, none zero, no
/// duplicate member.
fn check(members: &[u32], weights: &[u16]) -> Result<(), EcmpError> {
    if members.len() != weights.len() {
        return Err(EcmpError::WeightCount {
            members: members.len(),
            weights: weights.len(),
        });
    }
    for (i, (&m, &w)) in members.iter().zip(weights).enumerate() {
        if members.iter().take(i).any(|&x| x == m) {
            return Err(EcmpError::Duplicate(m));
        }
        if w == 0 {
            return Err(EcmpError::ZeroWeight(m));
        }
    }
    Ok(())
}

impl ResilientGroup {
    /// A group of `buckets` buckets whose members, all of weight 1, are added in the order
    /// given.
    pub fn new(buckets: usize, members: &[u32]) -> Result<Self, EcmpError> {
        Self::new_weighted(buckets, members, &vec![1; members.len()])
    }

    /// A group of `buckets` buckets whose members (`weights[i]` is the weight of
    /// `members[i]`) are added in the order given, then evened out so that every member is
    /// within one bucket of its target.
    pub fn new_weighted(
        buckets: usize,
        members: &[u32],
        weights: &[u16],
    ) -> Result<Self, EcmpError> {
        if !buckets.is_power_of_two() || buckets > MAX_ECMP_BUCKETS {
            return Err(EcmpError::BadBucketCount(buckets));
        }
        check(members, weights)?;
        let mut g = ResilientGroup {
            members: Vec::with_capacity(members.len()),
            weights: Vec::with_capacity(members.len()),
            buckets: vec![0; buckets],
            shift: 64 - buckets.trailing_zeros(),
            generation: 0,
        };
        for (&m, &w) in members.iter().zip(weights) {
            g.add_weighted(m, w)?;
        }
        g.settle();
        g.generation = 0;
        Ok(g)
    }

    /// A group with [`DEFAULT_ECMP_BUCKETS`] buckets and members of weight 1.
    pub fn with_members(members: &[u32]) -> Result<Self, EcmpError> {
        Self::new(DEFAULT_ECMP_BUCKETS, members)
    }

    /// A group with [`DEFAULT_ECMP_BUCKETS`] buckets and weighted members.
    pub fn with_weights(members: &[u32], weights: &[u16]) -> Result<Self, EcmpError> {
        Self::new_weighted(DEFAULT_ECMP_BUCKETS, members, weights)
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

    /// Weights, in member order.
    pub fn weights(&self) -> &[u16] {
        &self.weights
    }

    /// The weight of `member`, if it is in the group.
    pub fn weight(&self, member: u32) -> Option<u16> {
        let p = self.members.iter().position(|&m| m == member)?;
        self.weights.get(p).copied()
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

    /// Sum of the weights.
    fn total(&self) -> u64 {
        self.weights.iter().map(|&w| u64::from(w)).sum()
    }

    /// How far `count` buckets lie above the target of a member of weight `weight` when the
    /// weights sum to `total`, in units of `1 / total` bucket (negative: below the target).
    /// Within one bucket means strictly between `-total` and `total`.
    fn excess(&self, count: usize, weight: u16, total: u64) -> i64 {
        let (count, total) = (count as i64, total as i64);
        count * total - self.buckets.len() as i64 * i64::from(weight)
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

    /// Each member's buckets in ascending order, in member order.
    fn owned(&self) -> Vec<Vec<usize>> {
        let mut owned: Vec<Vec<usize>> = vec![Vec::new(); self.members.len()];
        for (b, owner) in self.buckets.iter().enumerate() {
            if let Some(p) = self.members.iter().position(|m| m == owner) {
                if let Some(list) = owned.get_mut(p) {
                    list.push(b);
                }
            }
        }
        owned
    }

    /// Adds `member` with weight 1 (see [`ResilientGroup::add_weighted`]).
    pub fn add(&mut self, member: u32) -> Result<usize, EcmpError> {
        self.add_weighted(member, 1)
    }

    /// Adds `member` with weight `weight`, moving buckets to it one at a time, each from the
    /// member furthest above its new target (the earliest added on a tie), until it owns its
    /// target rounded down (all buckets if it is the first). Returns the number of buckets
    /// moved.
    pub fn add_weighted(&mut self, member: u32, weight: u16) -> Result<usize, EcmpError> {
        if weight == 0 {
            return Err(EcmpError::ZeroWeight(member));
        }
        if self.contains(member) {
            return Err(EcmpError::Duplicate(member));
        }
        if self.members.len() >= self.buckets.len() {
            return Err(EcmpError::Full);
        }
        if self.members.is_empty() {
            self.buckets.fill(member);
            self.members.push(member);
            self.weights.push(weight);
            self.generation += 1;
            return Ok(self.buckets.len());
        }
        let total = self.total() + u64::from(weight);
        let take = self.buckets.len() as u64 * u64::from(weight) / total;
        // Each member's buckets, ascending; a member gives up its highest one first.
        let mut owned = self.owned();
        let mut moved = 0;
        for _ in 0..take {
            let richest = first_max(
                owned
                    .iter()
                    .zip(&self.weights)
                    .map(|(list, &w)| self.excess(list.len(), w, total)),
            );
            let Some(b) = richest
                .and_then(|p| owned.get_mut(p))
                .and_then(|list| list.pop())
            else {
                break;
            };
            if let Some(owner) = self.buckets.get_mut(b) {
                *owner = member;
                moved += 1;
            }
        }
        self.members.push(member);
        self.weights.push(weight);
        self.generation += 1;
        Ok(moved)
    }

    /// Removes `member`, handing each of its buckets (in ascending order) to the member
    /// furthest below its target at that moment (the earliest added on a tie). Returns the
    /// number of buckets moved.
    pub fn remove(&mut self, member: u32) -> Result<usize, EcmpError> {
        let Some(pos) = self.members.iter().position(|&m| m == member) else {
            return Err(EcmpError::NotMember(member));
        };
        self.members.remove(pos);
        if pos < self.weights.len() {
            self.weights.remove(pos);
        }
        self.generation += 1;
        let orphans: Vec<usize> = (0..self.buckets.len())
            .filter(|&b| self.buckets.get(b) == Some(&member))
            .collect();
        if self.members.is_empty() {
            return Ok(orphans.len());
        }
        let total = self.total();
        let mut counts = self.counts();
        for &b in &orphans {
            let poorest = first_max(
                counts
                    .iter()
                    .zip(&self.weights)
                    .map(|(&c, &w)| -self.excess(c, w, total)),
            );
            let Some(p) = poorest else {
                break;
            };
            if let (Some(owner), Some(&m), Some(c)) = (
                self.buckets.get_mut(b),
                self.members.get(p),
                counts.get_mut(p),
            ) {
                *owner = m;
                *c += 1;
            }
        }
        Ok(orphans.len())
    }

    /// Gives `member` weight `weight` and moves buckets as the module doc says (only between
    /// members whose share must change, until every member is within one bucket of its
    /// target). Returns the number of buckets moved; setting the weight a member already has
    /// changes nothing.
    pub fn set_weight(&mut self, member: u32, weight: u16) -> Result<usize, EcmpError> {
        if weight == 0 {
            return Err(EcmpError::ZeroWeight(member));
        }
        let Some(pos) = self.members.iter().position(|&m| m == member) else {
            return Err(EcmpError::NotMember(member));
        };
        match self.weights.get_mut(pos) {
            Some(w) if *w != weight => *w = weight,
            _ => return Ok(0),
        }
        self.generation += 1;
        Ok(self.settle())
    }

    /// Moves one bucket at a time from the member furthest above its target to the member
    /// furthest below (the earliest added on a tie; the giver's highest-numbered bucket) while
    /// some member is not within one bucket of its target. Returns the number moved.
    ///
    /// While one member is a bucket or more above its target, some member is below its own
    /// (the excesses sum to zero), and the other way round; so each move brings one member that
    /// had to change closer, and leaves the other side short of a whole bucket: a giver never
    /// takes, a taker never gives, and the moves are as few as the members a bucket or more
    /// away require.
    fn settle(&mut self) -> usize {
        if self.members.is_empty() {
            return 0;
        }
        let total = self.total();
        let unit = total as i64;
        let even = self
            .counts()
            .iter()
            .zip(&self.weights)
            .all(|(&c, &w)| self.excess(c, w, total).abs() < unit);
        if even {
            return 0;
        }
        let mut owned = self.owned();
        let mut moved = 0;
        // Each bucket moves at most once (a giver never takes).
        for _ in 0..self.buckets.len() {
            let excess: Vec<i64> = owned
                .iter()
                .zip(&self.weights)
                .map(|(list, &w)| self.excess(list.len(), w, total))
                .collect();
            let giver = first_max(excess.iter().copied());
            let taker = first_max(excess.iter().map(|&e| -e));
            let (Some(g), Some(t)) = (giver, taker) else {
                break;
            };
            let (Some(&above), Some(&below)) = (excess.get(g), excess.get(t)) else {
                break;
            };
            let below = -below;
            if (above < unit && below < unit) || above <= 0 || below <= 0 {
                break;
            }
            let Some(b) = owned.get_mut(g).and_then(|list| list.pop()) else {
                break;
            };
            if let Some(list) = owned.get_mut(t) {
                let at = list.partition_point(|&x| x < b);
                list.insert(at, b);
            }
            if let (Some(owner), Some(&m)) = (self.buckets.get_mut(b), self.members.get(t)) {
                *owner = m;
                moved += 1;
            }
        }
        moved
    }

    /// Brings the group to the member set `members`, all of weight 1 (see
    /// [`ResilientGroup::sync_weighted`]).
    pub fn sync(&mut self, members: &[u32]) -> Result<usize, EcmpError> {
        self.sync_weighted(members, &vec![1; members.len()])
    }

    /// Brings the group to the member set `members` with weights `weights` (`weights[i]` for
    /// `members[i]`): removes the members not in it (in ascending order), then gives the
    /// remaining members their new weights and evens out once (as
    /// [`ResilientGroup::set_weight`] does, if any weight changed), then adds the new members
    /// (in the order given). Returns the number of bucket moves. On error (a duplicate in
    /// `members`, a zero weight, as many weights as members not given, more members than
    /// buckets) the group is unchanged.
    pub fn sync_weighted(&mut self, members: &[u32], weights: &[u16]) -> Result<usize, EcmpError> {
        check(members, weights)?;
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
        let mut reweighted = false;
        for (&m, &w) in members.iter().zip(weights) {
            let pos = self.members.iter().position(|&x| x == m);
            if let Some(old) = pos.and_then(|p| self.weights.get_mut(p)) {
                if *old != w {
                    *old = w;
                    reweighted = true;
                }
            }
        }
        if reweighted {
            self.generation += 1;
            moved += self.settle();
        }
        for (&m, &w) in members.iter().zip(weights) {
            if !self.contains(m) {
                moved += self.add_weighted(m, w)?;
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

    // ---- Weights ----

    /// Each member's distance from its target in units of `1 / total` bucket, in member
    /// order, and `total` (one bucket in those units).
    fn excesses(g: &ResilientGroup) -> (Vec<i64>, i64) {
        let total: i64 = g.weights().iter().map(|&w| i64::from(w)).sum();
        let n = g.buckets().len() as i64;
        let e = g
            .members()
            .iter()
            .zip(g.weights())
            .map(|(&m, &w)| g.share(m) as i64 * total - n * i64::from(w))
            .collect();
        (e, total)
    }

    fn within_one_bucket(g: &ResilientGroup) -> bool {
        let (e, total) = excesses(g);
        e.iter().all(|x| x.abs() < total)
    }

    /// Checks a weight change from `before` to `after` that reported `moved` moves: every
    /// moved bucket went from a member whose share fell to one whose share rose (so a member
    /// whose share did not change kept every bucket), every member is within one bucket of
    /// its target, and no fewer moves could have got there.
    fn check_minimal(before: &ResilientGroup, after: &ResilientGroup, moved: usize) {
        assert_eq!(before.members(), after.members());
        let d = diff(before.buckets(), after.buckets());
        assert_eq!(d.len(), moved);
        for &b in &d {
            let (from, to) = (before.buckets()[b], after.buckets()[b]);
            assert!(
                after.share(from) < before.share(from),
                "bucket {b} from {from}"
            );
            assert!(after.share(to) > before.share(to), "bucket {b} to {to}");
        }
        assert!(within_one_bucket(after), "{:?}", excesses(after));
        // The least number of moves: each member a whole bucket or more above its new target
        // must give that many, each one below must take that many.
        let total: i64 = after.weights().iter().map(|&w| i64::from(w)).sum();
        let n = after.buckets().len() as i64;
        let (mut give, mut take) = (0, 0);
        for (&m, &w) in after.members().iter().zip(after.weights()) {
            let e = before.share(m) as i64 * total - n * i64::from(w);
            if e > 0 {
                give += e / total;
            } else {
                take += (-e) / total;
            }
        }
        assert_eq!(moved as i64, give.max(take));
    }

    #[test]
    fn the_weighted_module_doc_example() {
        let mut g = ResilientGroup::new_weighted(8, &[1, 2, 3], &[2, 1, 1]).unwrap();
        assert_eq!(g.buckets(), &[1, 1, 1, 1, 3, 3, 2, 2]);
        let before = g.clone();
        assert_eq!(g.set_weight(2, 2).unwrap(), 1);
        assert_eq!(g.buckets(), &[1, 1, 1, 2, 3, 3, 2, 2]);
        check_minimal(&before, &g, 1);
        assert_eq!(g.remove(3).unwrap(), 2);
        assert_eq!(g.buckets(), &[1, 1, 1, 2, 1, 2, 2, 2]);
        assert_eq!(g.add_weighted(4, 2).unwrap(), 2);
        assert_eq!(g.buckets(), &[1, 1, 1, 2, 4, 2, 2, 4]);
        assert_eq!(g.weights(), &[2, 2, 2]);
        assert_eq!(g.weight(4), Some(2));
        assert_eq!(g.weight(3), None);
    }

    #[test]
    fn weighted_shares_hit_the_targets() {
        let g = ResilientGroup::with_weights(&[1, 2], &[3, 1]).unwrap();
        assert_eq!(shares(&g), vec![192, 64]);
        // 2:1 of 256: targets 170.67 and 85.33.
        let g = ResilientGroup::with_weights(&[1, 2], &[2, 1]).unwrap();
        assert_eq!(shares(&g), vec![171, 85]);
        assert!(g.buckets()[..171].iter().all(|&o| o == 1));
        // Added one by one, the small members would get their targets rounded down (none)
        // and the large one would keep the fractions; building evens that out.
        let g = ResilientGroup::new_weighted(16, &[1, 2, 3, 4, 5], &[255, 17, 15, 12, 12]).unwrap();
        assert!(within_one_bucket(&g), "{:?}", shares(&g));
        assert_eq!(shares(&g).iter().sum::<usize>(), 16);
        assert_eq!(g.generation(), 0);
        // Equal weights given explicitly are the unweighted group.
        assert_eq!(
            ResilientGroup::with_weights(&[4, 5, 6], &[7, 7, 7])
                .unwrap()
                .buckets(),
            ResilientGroup::with_members(&[4, 5, 6]).unwrap().buckets()
        );
    }

    #[test]
    fn weighted_removal_moves_exactly_the_removed_members_buckets() {
        let mut g = ResilientGroup::with_weights(&[1, 2, 3, 4], &[1, 2, 3, 4]).unwrap();
        let before = g.buckets().to_vec();
        let own = g.share(3);
        assert_eq!(own, 77); // 256 × 3 / 10 = 76.8
        assert_eq!(g.remove(3).unwrap(), own);
        let d = diff(&before, g.buckets());
        assert_eq!(d.len(), own);
        assert!(d.iter().all(|&b| before[b] == 3));
        // Targets 256 / 7 × (1, 2, 4): each orphan went to the member furthest below.
        assert!(within_one_bucket(&g), "{:?}", shares(&g));
    }

    #[test]
    fn weighted_addition_moves_the_new_target_rounded_down() {
        let mut g = ResilientGroup::with_weights(&[1, 2, 3], &[1, 2, 3]).unwrap();
        let before = g.buckets().to_vec();
        // 256 × 5 / 11 = 116.4.
        assert_eq!(g.add_weighted(4, 5).unwrap(), 116);
        let d = diff(&before, g.buckets());
        assert_eq!(d.len(), 116);
        assert!(d.iter().all(|&b| g.buckets()[b] == 4));
        assert_eq!(g.share(4), 116);
        assert!(within_one_bucket(&g), "{:?}", shares(&g));
        // A member whose target is under one bucket (256 / 301) moves nothing.
        let mut g = ResilientGroup::with_weights(&[1, 2], &[200, 100]).unwrap();
        let before = g.clone();
        assert_eq!(g.add_weighted(5, 1).unwrap(), 0);
        assert_eq!(g.buckets(), before.buckets());
        assert_eq!(g.share(5), 0);
        assert_eq!(g.generation(), before.generation() + 1);
    }

    #[test]
    fn a_weight_change_moves_the_minimum() {
        let cases: &[(&[u32], &[u16], u32, u16)] = &[
            (&[1, 2], &[1, 1], 1, 3),
            (&[1, 2], &[3, 1], 1, 1),
            (&[1, 2, 3, 4], &[1, 1, 1, 1], 2, 2),
            (&[1, 2, 3, 4], &[1, 2, 3, 4], 4, 1),
            (&[1, 2, 3, 4, 5], &[10, 1, 1, 1, 1], 1, 100),
            (&[1, 2, 3], &[255, 1, 7], 2, 255),
        ];
        for &(members, weights, m, w) in cases {
            let mut g = ResilientGroup::with_weights(members, weights).unwrap();
            let before = g.clone();
            let moved = g.set_weight(m, w).unwrap();
            check_minimal(&before, &g, moved);
            assert_eq!(g.weight(m), Some(w));
            assert_eq!(g.generation(), 1);
        }
        // 1:1 to 3:1: exactly the 64 buckets member 1 gains move, all from member 2.
        let mut g = ResilientGroup::with_members(&[1, 2]).unwrap();
        let before = g.buckets().to_vec();
        assert_eq!(g.set_weight(1, 3).unwrap(), 64);
        let d = diff(&before, g.buckets());
        assert_eq!(d.len(), 64);
        assert!(d.iter().all(|&b| before[b] == 2 && g.buckets()[b] == 1));
        // Members whose weights did not change exchange nothing between them: 2:1:1 to
        // 2:2:1 moves buckets from 1 and 3 to 2 only.
        let mut g = ResilientGroup::with_weights(&[1, 2, 3], &[2, 1, 1]).unwrap();
        let before = g.buckets().to_vec();
        assert_eq!(g.set_weight(2, 2).unwrap(), 38); // 102.4 - 64, rounded down
        let d = diff(&before, g.buckets());
        assert_eq!(d.len(), 38);
        assert!(d.iter().all(|&b| before[b] != 2 && g.buckets()[b] == 2));
        assert_eq!(shares(&g), vec![103, 102, 51]);
        // The same weight again changes nothing.
        let same = g.clone();
        assert_eq!(g.set_weight(2, 2).unwrap(), 0);
        assert_eq!(g, same);
    }

    #[test]
    fn weighted_tables_are_a_function_of_the_history() {
        let run = || {
            let mut g = ResilientGroup::with_weights(&[5, 6, 7], &[3, 1, 2]).unwrap();
            g.add_weighted(8, 4).unwrap();
            g.set_weight(5, 1).unwrap();
            g.remove(6).unwrap();
            g.sync_weighted(&[5, 7, 8, 9], &[2, 2, 4, 9]).unwrap();
            g
        };
        assert_eq!(run(), run());
        // A different order of the same members is a different history.
        let a = ResilientGroup::with_weights(&[1, 2, 3], &[1, 2, 3]).unwrap();
        let b = ResilientGroup::with_weights(&[3, 2, 1], &[3, 2, 1]).unwrap();
        assert!(within_one_bucket(&a) && within_one_bucket(&b));
        assert_ne!(a.buckets(), b.buckets());
    }

    /// splitmix64: a stream of well-spread 64-bit values.
    fn hashes(seed: u64) -> impl Iterator<Item = u64> {
        let mut s = seed;
        std::iter::repeat_with(move || {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        })
    }

    #[test]
    fn flows_follow_the_weights() {
        let cases: &[(&[u32], &[u16])] =
            &[(&[1, 2], &[3, 1]), (&[1, 2, 3, 4, 5], &[1, 2, 3, 4, 6])];
        for &(members, weights) in cases {
            let g = ResilientGroup::with_weights(members, weights).unwrap();
            let n = 100_000;
            let mut hits = vec![0usize; members.len()];
            for h in hashes(7).take(n) {
                let m = g.select(h).unwrap();
                hits[members.iter().position(|&x| x == m).unwrap()] += 1;
            }
            let total: usize = weights.iter().map(|&w| usize::from(w)).sum();
            for (i, &w) in weights.iter().enumerate() {
                let expect = n * usize::from(w) / total;
                let off = hits[i].abs_diff(expect);
                assert!(
                    off * 100 <= expect * 3,
                    "member {i}: {} of {expect}",
                    hits[i]
                );
            }
        }
    }

    #[test]
    fn weighted_sync_removes_then_reweighs_then_adds() {
        let mut g = ResilientGroup::with_weights(&[1, 2, 3, 4], &[1, 2, 3, 4]).unwrap();
        let mut h = g.clone();
        let moved = g.sync_weighted(&[1, 3, 4, 5], &[1, 3, 1, 2]).unwrap();
        let a = h.remove(2).unwrap();
        let b = h.set_weight(4, 1).unwrap();
        let c = h.add_weighted(5, 2).unwrap();
        assert_eq!(moved, a + b + c);
        assert_eq!(g.buckets(), h.buckets());
        assert_eq!(g.weights(), h.weights());
        assert_eq!(g.sync_weighted(&[1, 3, 4, 5], &[1, 3, 1, 2]).unwrap(), 0);
        // The unweighted sync sets every weight to 1.
        g.sync(&[1, 3, 4, 5]).unwrap();
        assert_eq!(g.weights(), &[1, 1, 1, 1]);
        assert!(within_one_bucket(&g));
    }

    #[test]
    fn weight_errors_leave_the_group_unchanged() {
        let mut g = ResilientGroup::with_weights(&[1, 2], &[2, 1]).unwrap();
        let before = g.clone();
        assert_eq!(g.add_weighted(3, 0), Err(EcmpError::ZeroWeight(3)));
        assert_eq!(g.set_weight(1, 0), Err(EcmpError::ZeroWeight(1)));
        assert_eq!(g.set_weight(9, 1), Err(EcmpError::NotMember(9)));
        assert_eq!(
            g.sync_weighted(&[1, 2], &[1]),
            Err(EcmpError::WeightCount {
                members: 2,
                weights: 1
            })
        );
        assert_eq!(
            g.sync_weighted(&[1, 3], &[1, 0]),
            Err(EcmpError::ZeroWeight(3))
        );
        assert_eq!(g, before);
        assert_eq!(
            ResilientGroup::with_weights(&[1], &[0]),
            Err(EcmpError::ZeroWeight(1))
        );
        assert_eq!(
            ResilientGroup::with_weights(&[1, 2], &[1, 1, 1]),
            Err(EcmpError::WeightCount {
                members: 2,
                weights: 3
            })
        );
        assert!(!EcmpError::ZeroWeight(1).to_string().is_empty());
    }

    mod weighted_properties {
        use super::*;
        use proptest::prelude::*;

        fn weight() -> impl Strategy<Value = u16> {
            prop_oneof![1u16..=4, 1u16..=300, 1u16..=u16::MAX]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(500))]

            #[test]
            fn new_groups_are_within_one_bucket_of_the_targets(
                log2 in 0u32..=12,
                weights in prop::collection::vec(weight(), 1..=40),
            ) {
                let buckets = 1usize << log2;
                let weights = &weights[..weights.len().min(buckets)];
                let members: Vec<u32> = (0..weights.len() as u32).map(|i| 3 * i + 1).collect();
                let g = ResilientGroup::new_weighted(buckets, &members, weights).unwrap();
                prop_assert!(within_one_bucket(&g), "{:?}", excesses(&g));
                prop_assert_eq!(shares(&g).iter().sum::<usize>(), buckets);
            }

            #[test]
            fn histories_move_only_what_they_must(
                log2 in 3u32..=9,
                start in prop::collection::vec(weight(), 1..=6),
                ops in prop::collection::vec((0u8..3, 0usize..64, weight()), 1..=24),
            ) {
                let buckets = 1usize << log2;
                let members: Vec<u32> = (1..=start.len() as u32).collect();
                let mut g = ResilientGroup::new_weighted(buckets, &members, &start).unwrap();
                let first = g.clone();
                let mut next = 100u32;
                let mut history = Vec::new();
                for (kind, pick, w) in ops {
                    let before = g.clone();
                    let n = g.members().len();
                    match kind {
                        0 if n < buckets.min(12) => {
                            let total: u64 =
                                g.weights().iter().map(|&x| u64::from(x)).sum::<u64>() + u64::from(w);
                            let moved = g.add_weighted(next, w).unwrap();
                            let expect = if n == 0 { buckets } else {
                                (buckets as u64 * u64::from(w) / total) as usize
                            };
                            prop_assert_eq!(moved, expect);
                            let d = diff(before.buckets(), g.buckets());
                            if n > 0 {
                                prop_assert_eq!(d.len(), moved);
                            }
                            prop_assert!(d.iter().all(|&b| g.buckets()[b] == next));
                            prop_assert_eq!(g.share(next), moved);
                            history.push((0, next, w));
                            next += 1;
                        }
                        1 if n > 1 => {
                            let m = g.members()[pick % n];
                            let own = g.share(m);
                            prop_assert_eq!(g.remove(m).unwrap(), own);
                            let d = diff(before.buckets(), g.buckets());
                            prop_assert_eq!(d.len(), own);
                            prop_assert!(d.iter().all(|&b| before.buckets()[b] == m));
                            history.push((1, m, 0));
                        }
                        _ if n > 0 => {
                            let m = g.members()[pick % n];
                            let moved = g.set_weight(m, w).unwrap();
                            if before.weight(m) == Some(w) {
                                prop_assert_eq!(&g, &before);
                            } else {
                                check_minimal(&before, &g, moved);
                            }
                            history.push((2, m, w));
                        }
                        _ => {}
                    }
                }
                // The same history gives the same table.
                let mut again = first;
                for (kind, m, w) in history {
                    match kind {
                        0 => { again.add_weighted(m, w).unwrap(); }
                        1 => { again.remove(m).unwrap(); }
                        _ => { again.set_weight(m, w).unwrap(); }
                    }
                }
                prop_assert_eq!(again, g);
            }
        }
    }
}
