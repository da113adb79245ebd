//! One AF_XDP ring: a single-producer single-consumer queue shared with the kernel.
//!
//! ```text
//!   mmap of one ring (offsets from getsockopt(XDP_MMAP_OFFSETS)):
//!   [ producer: u32 ] [ consumer: u32 ] [ flags: u32 ] ... [ desc 0 | desc 1 | ... | desc size-1 ]
//!
//!   producer and consumer are free-running u32 counters; slot of counter c = c & (size - 1)
//!   ready (consumer side)  = producer - consumer          (wrapping)
//!   free  (producer side)  = size - (producer - consumer) (wrapping)
//! ```
//!
//! Each side owns one counter and only reads the other. The owner writes its descriptors,
//! then publishes its counter with a release store; the other side reads the counter with
//! an acquire load before it reads the descriptors (the pairing the kernel's
//! `Documentation/networking/af_xdp.rst` and `xsk_queue.h` describe). The counter of the
//! other side is cached and only re-read when the cached value says the ring is empty
//! (or full), so a batch costs one shared-line read, not one per descriptor.
//!
//! The arithmetic is in plain functions ([`ready`], [`free`]) so it can be tested apart
//! from the memory, wraparound included. A kernel-written counter is untrusted in the
//! sense that a value saying more than `size` entries are ready is clamped, so a bad
//! counter can never make us read a slot twice in one batch.

use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::IoError;

/// Entries ready to consume: `prod - cons`, wrapping, at most `size`.
pub(crate) fn ready(prod: u32, cons: u32, size: u32) -> u32 {
    prod.wrapping_sub(cons).min(size)
}

/// Slots free to produce into: `size - (prod - cons)`, wrapping, never below zero.
pub(crate) fn free(prod: u32, cons: u32, size: u32) -> u32 {
    size.saturating_sub(prod.wrapping_sub(cons))
}

/// The slot of counter `c` in a ring of `size` (a power of two) entries.
pub(crate) fn slot(c: u32, size: u32) -> usize {
    (c & size.wrapping_sub(1)) as usize
}

/// A shared memory mapping, unmapped on drop.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    /// Maps `len` bytes of `fd` at page offset `pgoff` (shared), or anonymous memory when
    /// `fd` is `None` (the UMEM).
    pub(crate) fn new(
        fd: Option<RawFd>,
        len: usize,
        pgoff: u64,
        what: &str,
    ) -> Result<Mapping, IoError> {
        let (flags, fd) = match fd {
            Some(fd) => (libc::MAP_SHARED | libc::MAP_POPULATE, fd),
            None => (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
            ),
        };
        let off = libc::off_t::try_from(pgoff)
            .map_err(|_| IoError::Unsupported(format!("{what}: mmap offset {pgoff:#x}")))?;
        // SAFETY: a fresh mapping; the kernel checks the descriptor, offset and length.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(IoError::last(format!("mmap of {what} ({len} bytes)")));
        }
        match NonNull::new(p.cast::<u8>()) {
            Some(ptr) => Ok(Mapping { ptr, len }),
            None => Err(IoError::Unsupported(format!(
                "mmap of {what} returned NULL"
            ))),
        }
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly what mmap returned; nothing uses it after the owner is dropped.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// One ring of `T` descriptors (`u64` addresses for fill and completion, `xdp_desc` for
/// receive and transmit).
pub(crate) struct Ring<T> {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut T,
    size: u32,
    /// The counter this side owns (producer for fill/transmit, consumer for
    /// receive/completion), as last published or about to be.
    head: u32,
    /// The last value read of the other side's counter.
    other: u32,
    /// Whether this side produces.
    producing: bool,
    // Last: unmapped after the pointers above are no longer used.
    _map: Mapping,
}

impl<T: Copy> Ring<T> {
    /// Maps the ring of `size` entries at `pgoff` of socket `fd`, laid out as `off` says.
    pub(crate) fn map(
        fd: RawFd,
        pgoff: u64,
        off: &libc::xdp_ring_offset,
        size: u32,
        producing: bool,
        what: &str,
    ) -> Result<Ring<T>, IoError> {
        let bad = || IoError::Unsupported(format!("{what}: kernel ring offsets are inconsistent"));
        let desc = usize::try_from(off.desc).map_err(|_| bad())?;
        let len = (size as usize)
            .checked_mul(std::mem::size_of::<T>())
            .and_then(|b| b.checked_add(desc))
            .ok_or_else(bad)?;
        for o in [off.producer, off.consumer, off.flags] {
            let o = usize::try_from(o).map_err(|_| bad())?;
            if o % 4 != 0 || o.checked_add(4).is_none_or(|e| e > len) {
                return Err(bad());
            }
        }
        if desc % std::mem::align_of::<T>() != 0 {
            return Err(bad());
        }
        let map = Mapping::new(Some(fd), len, pgoff, what)?;
        let base = map.ptr();
        // SAFETY: every offset was checked to be inside the mapping and aligned.
        let (producer, consumer, flags, descs) = unsafe {
            (
                base.add(off.producer as usize) as *const AtomicU32,
                base.add(off.consumer as usize) as *const AtomicU32,
                base.add(off.flags as usize) as *const AtomicU32,
                base.add(desc) as *mut T,
            )
        };
        let mut r = Ring {
            producer,
            consumer,
            flags,
            descs,
            size,
            head: 0,
            other: 0,
            producing,
            _map: map,
        };
        if producing {
            r.head = r.prod().load(Ordering::Relaxed);
            r.other = r.cons().load(Ordering::Acquire);
        } else {
            r.head = r.cons().load(Ordering::Relaxed);
            r.other = r.prod().load(Ordering::Acquire);
        }
        Ok(r)
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: inside the live mapping, aligned (checked in `map`).
        unsafe { &*self.producer }
    }

    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }

    /// Entries in the ring.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// The kernel asked to be woken with a system call (`XDP_RING_NEED_WAKEUP`).
    pub(crate) fn needs_wakeup(&self) -> bool {
        // SAFETY: inside the live mapping, aligned.
        let f = unsafe { &*self.flags };
        f.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    // ---- producer side (fill, transmit) ----

    /// How many of `want` slots can be written now (re-reading the consumer if the cached
    /// value says fewer).
    pub(crate) fn reserve(&mut self, want: u32) -> u32 {
        debug_assert!(self.producing);
        let mut n = free(self.head, self.other, self.size);
        if n < want {
            self.other = self.cons().load(Ordering::Acquire);
            n = free(self.head, self.other, self.size);
        }
        n.min(want)
    }

    /// Writes entry `i` of the reserved batch (`i` below what [`Ring::reserve`] returned).
    pub(crate) fn write(&mut self, i: u32, v: T) {
        let s = slot(self.head.wrapping_add(i), self.size);
        // SAFETY: `s < size`, inside the descriptor array; the slot is free (reserved), so
        // the kernel does not read it until the producer is published.
        unsafe { self.descs.add(s).write_volatile(v) };
    }

    /// Publishes `n` written entries.
    pub(crate) fn submit(&mut self, n: u32) {
        self.head = self.head.wrapping_add(n);
        self.prod().store(self.head, Ordering::Release);
    }

    /// Entries produced that the kernel has not consumed yet.
    pub(crate) fn outstanding(&mut self) -> u32 {
        self.other = self.cons().load(Ordering::Acquire);
        ready(self.head, self.other, self.size)
    }

    // ---- consumer side (receive, completion) ----

    /// How many of `want` entries are ready (re-reading the producer if the cached value
    /// says fewer).
    pub(crate) fn peek(&mut self, want: u32) -> u32 {
        debug_assert!(!self.producing);
        let mut n = ready(self.other, self.head, self.size);
        if n < want {
            self.other = self.prod().load(Ordering::Acquire);
            n = ready(self.other, self.head, self.size);
        }
        n.min(want)
    }

    /// Reads entry `i` of the peeked batch.
    pub(crate) fn read(&self, i: u32) -> T {
        let s = slot(self.head.wrapping_add(i), self.size);
        // SAFETY: `s < size`; the entry was published by the kernel's release store that
        // the acquire load in `peek` saw.
        unsafe { self.descs.add(s).read_volatile() }
    }

    /// Gives `n` consumed entries back to the kernel.
    pub(crate) fn release(&mut self, n: u32) {
        self.head = self.head.wrapping_add(n);
        self.cons().store(self.head, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_across_the_u32_wrap() {
        let size = 8;
        let cons = u32::MAX - 2;
        let prod = cons.wrapping_add(5);
        assert_eq!(prod, 2);
        assert_eq!(ready(prod, cons, size), 5);
        assert_eq!(free(prod, cons, size), 3);
    }

    #[test]
    fn empty_and_full() {
        assert_eq!(ready(7, 7, 16), 0);
        assert_eq!(free(7, 7, 16), 16);
        assert_eq!(ready(23, 7, 16), 16);
        assert_eq!(free(23, 7, 16), 0);
    }

    #[test]
    fn a_bad_counter_is_clamped() {
        // A producer far ahead of the consumer (not possible from a sane kernel).
        assert_eq!(ready(1000, 0, 16), 16);
        assert_eq!(free(1000, 0, 16), 0);
        // A consumer ahead of the producer reads as a huge distance: clamped too.
        assert_eq!(ready(0, 5, 16), 16);
        assert_eq!(free(0, 5, 16), 0);
    }

    #[test]
    fn slots_wrap_with_the_counter() {
        assert_eq!(slot(0, 8), 0);
        assert_eq!(slot(9, 8), 1);
        assert_eq!(slot(u32::MAX, 8), 7);
        assert_eq!(slot(u32::MAX.wrapping_add(1), 8), 0);
    }
}
