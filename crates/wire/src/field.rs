//! Fixed-offset reads and writes in network byte order.
//!
//! A view checks its buffer's length once, in `new_checked`; its getters then read at fixed
//! offsets through these helpers. Each helper goes through `get(..)`, so a read past the end
//! yields zero (and a write past the end does nothing) instead of a panic. That fallback is
//! never taken for a checked view. Its cost is one well-predicted compare per read, and less
//! where the view is built and read in one function: once inlined, the compiler can see the
//! constructor's length check and drop the later ones.

/// The byte at `off`, or 0 past the end.
#[inline(always)]
pub(crate) fn u8_at(buf: &[u8], off: usize) -> u8 {
    buf.get(off).copied().unwrap_or(0)
}

/// `N` bytes starting at `off`, or zeros if they are not all there.
#[inline(always)]
pub(crate) fn array_at<const N: usize>(buf: &[u8], off: usize) -> [u8; N] {
    match off.checked_add(N).and_then(|end| buf.get(off..end)) {
        Some(s) => s.try_into().unwrap_or([0; N]),
        None => [0; N],
    }
}

/// The big-endian `u16` at `off`, or 0.
#[inline(always)]
pub(crate) fn u16_at(buf: &[u8], off: usize) -> u16 {
    u16::from_be_bytes(array_at(buf, off))
}

/// The big-endian `u32` at `off`, or 0.
#[inline(always)]
pub(crate) fn u32_at(buf: &[u8], off: usize) -> u32 {
    u32::from_be_bytes(array_at(buf, off))
}

/// Writes `v` at `off` if it fits.
#[inline(always)]
pub(crate) fn set_u8(buf: &mut [u8], off: usize, v: u8) {
    if let Some(b) = buf.get_mut(off) {
        *b = v;
    }
}

/// Writes `bytes` at `off` if they fit.
#[inline(always)]
pub(crate) fn set_bytes(buf: &mut [u8], off: usize, bytes: &[u8]) {
    if let Some(s) = off
        .checked_add(bytes.len())
        .and_then(|end| buf.get_mut(off..end))
    {
        s.copy_from_slice(bytes);
    }
}

/// Writes the big-endian `v` at `off` if it fits.
#[inline(always)]
pub(crate) fn set_u16(buf: &mut [u8], off: usize, v: u16) {
    set_bytes(buf, off, &v.to_be_bytes());
}

/// Writes the big-endian `v` at `off` if it fits.
#[inline(always)]
pub(crate) fn set_u32(buf: &mut [u8], off: usize, v: u32) {
    set_bytes(buf, off, &v.to_be_bytes());
}

/// `buf[start..end]`, or an empty slice if that range is not inside `buf`.
#[inline(always)]
pub(crate) fn slice(buf: &[u8], start: usize, end: usize) -> &[u8] {
    buf.get(start..end).unwrap_or(&[])
}

/// `buf[start..end]` mutably, or an empty slice if that range is not inside `buf`.
#[inline(always)]
pub(crate) fn slice_mut(buf: &mut [u8], start: usize, end: usize) -> &mut [u8] {
    buf.get_mut(start..end).unwrap_or(&mut [])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_the_end_are_zero_and_writes_are_dropped() {
        let mut b = [1u8, 2, 3];
        assert_eq!(u16_at(&b, 1), 0x0203);
        assert_eq!(u16_at(&b, 2), 0);
        assert_eq!(u32_at(&b, 0), 0);
        assert_eq!(u8_at(&b, 3), 0);
        assert_eq!(u16_at(&b, usize::MAX), 0);
        set_u16(&mut b, 2, 0xffff);
        set_u32(&mut b, usize::MAX - 1, 7);
        assert_eq!(b, [1, 2, 3]);
        assert!(slice(&b, 2, 5).is_empty());
        assert!(slice(&b, 3, 2).is_empty());
    }
}
