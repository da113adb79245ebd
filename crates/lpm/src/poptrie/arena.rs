//! Fixed-capacity storage that readers and the one writer of a Poptrie share.
//!
//! A Poptrie changed in place is read by forwarding threads while the control plane changes
//! it. Its blocks (nodes, leaves, childless-node records) therefore live at addresses that
//! never move, in one allocation made when the trie is built: an [`Arena`] never grows. The
//! writer fills only slots no reader can reach (fresh ones past the high-water mark, or
//! blocks whose readers have all finished, see `update.rs`), and then makes them reachable
//! with one atomic store of a direct-pointing entry. When an arena is full the trie is built
//! again, bigger, and published as a new structure.
//!
//! ```text
//!   Arena<Node>: │ reachable │ reachable │ retired (old readers) │ free │ unused … capacity │
//!                                                                        └ high-water mark
//! ```
//!
//! The elements are `UnsafeCell`s: readers hold `&Arena` and read slots; the writer holds
//! `&Arena` too and writes slots that, by the protocol above, no reader reads at that time.
//! The storage comes from the global allocator. In the vfsr and vfsrd binaries that is
//! mimalloc, which advises its large regions for transparent huge pages, so an arena of a
//! full table sits on 2 MiB pages there; `docs/bench/core.md` has the same-run comparison
//! with the system allocator's 4 KiB pages.

use core::cell::UnsafeCell;
use core::ptr::NonNull;
use std::alloc::{alloc_zeroed, dealloc, Layout};

use crate::BuildError;

/// Element types whose all-zero bit pattern is a valid value (so a zeroed allocation is an
/// arena of default elements).
pub(super) trait Zeroable: Copy {}
impl Zeroable for u16 {}
impl Zeroable for super::Node {}
impl Zeroable for super::NodeWords {}

/// `cap` elements of `T` at a fixed address, zeroed at first.
pub(super) struct Arena<T: Zeroable> {
    ptr: NonNull<UnsafeCell<T>>,
    cap: usize,
    layout: Layout,
}

// SAFETY: an arena owns its elements like a `Box<[T]>`; sending it sends them.
unsafe impl<T: Zeroable + Send> Send for Arena<T> {}
// SAFETY: shared access reads slots (`get`) and, through the unsafe `set`, writes slots the
// caller guarantees no other thread reads or writes at that time (the trie's single writer,
// writing slots no reader can reach). So no two threads ever access one slot concurrently
// unless both only read.
unsafe impl<T: Zeroable + Sync> Sync for Arena<T> {}

impl<T: Zeroable> Arena<T> {
    /// An arena of `cap` zeroed elements (at least one).
    pub(super) fn zeroed(cap: usize) -> Result<Self, BuildError> {
        let cap = cap.max(1);
        let size = cap
            .checked_mul(core::mem::size_of::<T>())
            .ok_or(BuildError::TooLarge("arena size overflows"))?;
        // Cache-line aligned, so a node never straddles two lines more than it must.
        let align = core::mem::align_of::<T>().max(64);
        let layout = Layout::from_size_align(size.next_multiple_of(align), align)
            .map_err(|_| BuildError::TooLarge("arena size overflows"))?;
        // SAFETY: the layout has a non-zero size (cap >= 1 and T is not zero-sized: Node and
        // u16 are not).
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw as *mut UnsafeCell<T>)
            .ok_or(BuildError::TooLarge("arena allocation failed"))?;
        Ok(Arena { ptr, cap, layout })
    }

    /// Number of slots.
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.cap
    }

    #[inline(always)]
    fn cells(&self) -> &[UnsafeCell<T>] {
        // SAFETY: `ptr` points to `cap` initialized (zeroed, hence valid) elements owned by
        // the arena for its whole life.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.cap) }
    }

    /// Slot `i` (panics when out of range, like a slice).
    #[inline(always)]
    pub(super) fn get(&self, i: usize) -> T {
        // SAFETY: no other thread writes this slot now: the writer writes only slots no
        // reader can reach, and the writer's own reads do not overlap its writes.
        unsafe { *self.cells()[i].get() }
    }

    /// Writes `v` to slot `i` (panics when out of range).
    ///
    /// # Safety
    /// No other thread may read or write slot `i` at the same time: the slot is not reachable
    /// from anything a reader can load, or the arena is not shared.
    #[inline(always)]
    pub(super) unsafe fn set(&self, i: usize, v: T) {
        // SAFETY: the caller guarantees no other thread accesses slot `i` now.
        unsafe { *self.cells()[i].get() = v }
    }

    /// Writes `data` to slots `at..at + data.len()` (panics when out of range): one bounds
    /// check and one copy, where a loop of [`Arena::set`] checks every slot.
    ///
    /// # Safety
    /// As for [`Arena::set`], for every slot written.
    #[inline]
    pub(super) unsafe fn set_slice(&self, at: usize, data: &[T]) {
        let dst = &self.cells()[at..at + data.len()];
        // SAFETY: `dst` was cut from the arena, so the slots are in it; the caller guarantees
        // nobody else touches them now; `data` is a separate borrow, not in the arena's
        // cells (which are only reachable through `UnsafeCell`s).
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), dst.as_ptr() as *mut T, data.len()) }
    }

    /// Copies slots `from..from + n` to `to..to + n` (panics when either is out of range).
    ///
    /// # Safety
    /// As for [`Arena::set`], for every slot of `to..to + n`; and no other thread writes the
    /// slots of `from..from + n` now.
    #[inline]
    pub(super) unsafe fn copy_block(&self, from: usize, to: usize, n: usize) {
        let cells = self.cells();
        let (src, dst) = (&cells[from..from + n], &cells[to..to + n]);
        // SAFETY: both ranges are in the arena (the slices above were cut from it); the
        // caller guarantees nobody else touches `dst` and nobody writes `src`; `copy` allows
        // the two to overlap.
        unsafe { core::ptr::copy(src.as_ptr().cast::<T>(), dst.as_ptr() as *mut T, n) }
    }

    /// The first slot's address, for prefetches and vector gathers.
    #[inline(always)]
    pub(super) fn as_ptr(&self) -> *const T {
        self.ptr.as_ptr() as *const T
    }

    /// The slots as a plain slice, for the vector gathers (which compute addresses
    /// themselves).
    ///
    /// # Safety
    /// While the slice lives, the slots it is read at are not written: the caller reads
    /// only slots reachable from entries it loaded, which the writer does not reuse before
    /// the caller is done.
    #[inline(always)]
    pub(super) unsafe fn as_slice(&self) -> &[T] {
        // SAFETY: `cap` initialized elements at a fixed address for the arena's life; the
        // caller keeps the slots it reads from being written meanwhile.
        unsafe { core::slice::from_raw_parts(self.as_ptr(), self.cap) }
    }

    /// A copy of this arena with `cap` slots (at least this one's length), for a private
    /// clone of the trie.
    pub(super) fn copy(&self, cap: usize) -> Result<Self, BuildError> {
        let a = Arena::zeroed(cap.max(self.cap))?;
        // SAFETY: `a` is fresh, so nobody else accesses it; the source slots are read (a
        // copy made by the writer, which does not write while it copies).
        unsafe {
            core::ptr::copy_nonoverlapping(self.as_ptr(), a.ptr.as_ptr() as *mut T, self.cap);
        }
        Ok(a)
    }
}

impl<T: Zeroable> Drop for Arena<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr() as *mut u8, self.layout) }
    }
}

impl<T: Zeroable + core::fmt::Debug> core::fmt::Debug for Arena<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Arena({} x {})", self.cap, core::any::type_name::<T>())
    }
}
