//! [`Paged`]: an array of parts shared between a table and its snapshots, in two levels.
//!
//! A neighbor table's snapshot holds its index shards and its id chunks as `Arc`s, so that
//! a publication shares every part it did not change. Held in one flat array, a
//! publication clones a pointer per part: an atomic increment each, and an atomic
//! decrement each when the snapshot before it goes, which at a million entries (16,384
//! chunks and as many shards) is most of what publishing one new neighbor costs. Here the
//! parts sit in groups of [`GROUP`], each group behind an `Arc` of its own: a clone copies
//! a pointer per group, and changing a part copies its group first (64 pointers) if a
//! snapshot still holds it. A reader pays one more dependent load (the group's).

use std::sync::Arc;

/// Parts per group (a power of two).
pub(crate) const GROUP: usize = 64;

type Group<T> = [Arc<T>; GROUP];

/// Parts `0..` in groups of [`GROUP`]; the places past the last part hold a shared blank.
#[derive(Debug)]
pub(crate) struct Paged<T> {
    groups: Vec<Arc<Group<T>>>,
    blank: Arc<T>,
}

impl<T> Clone for Paged<T> {
    fn clone(&self) -> Self {
        Paged {
            groups: self.groups.clone(),
            blank: Arc::clone(&self.blank),
        }
    }
}

impl<T: Clone> Paged<T> {
    /// `n` parts, each a copy of `blank` (shared until changed).
    pub(crate) fn new(blank: T, n: usize) -> Self {
        let mut p = Paged {
            groups: Vec::new(),
            blank: Arc::new(blank),
        };
        p.grow_to(n);
        p
    }

    /// Makes room for parts `0..n` (new ones blank).
    pub(crate) fn grow_to(&mut self, n: usize) {
        while self.groups.len() * GROUP < n {
            let g: Group<T> = std::array::from_fn(|_| Arc::clone(&self.blank));
            self.groups.push(Arc::new(g));
        }
    }

    /// Part `i` (a blank past the last part of its group; `None` past the last group).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        self.groups.get(i / GROUP)?.get(i % GROUP).map(|p| &**p)
    }

    /// Part `i` to change: its group and the part are copied first if anything else
    /// (a snapshot) holds them.
    pub(crate) fn make_mut(&mut self, i: usize) -> Option<&mut T> {
        let g = Arc::make_mut(self.groups.get_mut(i / GROUP)?);
        g.get_mut(i % GROUP).map(Arc::make_mut)
    }

    /// Every place, blanks included, in order.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.groups.iter().flat_map(|g| g.iter().map(|p| &**p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_leaves_a_clone_as_it_was_and_shares_the_rest() {
        let mut a = Paged::new(0u32, 3 * GROUP - 1);
        for i in 0..3 * GROUP {
            *a.make_mut(i).unwrap() = i as u32;
        }
        let b = a.clone();
        *a.make_mut(GROUP + 5).unwrap() = 7_000;
        assert_eq!(a.get(GROUP + 5), Some(&7_000));
        assert_eq!(b.get(GROUP + 5), Some(&(GROUP as u32 + 5)));
        // The untouched groups are the same allocation in both; the touched one is not.
        assert!(Arc::ptr_eq(&a.groups[0], &b.groups[0]));
        assert!(Arc::ptr_eq(&a.groups[2], &b.groups[2]));
        assert!(!Arc::ptr_eq(&a.groups[1], &b.groups[1]));
        // In the copied group, the parts not changed are still shared.
        assert!(Arc::ptr_eq(&a.groups[1][4], &b.groups[1][4]));
        assert_eq!(a.get(3 * GROUP), None);
    }

    #[test]
    fn growing_adds_blank_parts_and_keeps_the_old_ones() {
        let mut a = Paged::new(1u8, 1);
        *a.make_mut(0).unwrap() = 9;
        assert_eq!(a.iter().count(), GROUP);
        a.grow_to(GROUP + 1);
        assert_eq!(a.get(0), Some(&9));
        assert_eq!(a.get(GROUP), Some(&1));
        assert_eq!(a.iter().filter(|&&v| v == 1).count(), 2 * GROUP - 1);
        *a.make_mut(GROUP + 1).unwrap() = 3;
        assert_eq!(
            a.get(GROUP + 2),
            Some(&1),
            "a blank changed with its neighbor"
        );
    }
}
