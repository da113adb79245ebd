//! Address keys: IPv4 addresses as `u32`, IPv6 addresses as `u128`, both in host order so that
//! bit 0 of the key (counted from the most significant end) is the first bit of the address on
//! the wire.
//!
//! Every engine is generic over [`Key`]; the two implementations are the only address families
//! a router forwards. The helpers here are the only places that shift keys, so the edge cases
//! (a shift by the full key width, a stride that runs past the last bit) are handled once.

use core::fmt::Debug;
use core::hash::Hash;

/// An address as a fixed-width unsigned integer, most significant bit first.
pub trait Key: Copy + Eq + Ord + Hash + Debug + Default + Send + Sync + 'static {
    /// Width of the address in bits (32 or 128).
    const BITS: u8;
    /// The all-zero address.
    const ZERO: Self;
    /// Family name as used in reports ("v4" or "v6").
    const FAMILY: &'static str;

    /// The address with every bit at position `len` and beyond cleared.
    /// `len` greater than the width is treated as the width.
    fn masked(self, len: u8) -> Self;

    /// `width` bits starting at bit `offset` (0 = most significant), as an integer; bits past
    /// the end of the address read as zero. `width` is at most 32 and `offset` below the width.
    fn chunk(self, offset: u8, width: u8) -> usize;

    /// Bit `i` (0 = most significant). `i` must be below the width.
    fn bit(self, i: u8) -> bool;

    /// Number of leading bits `self` and `other` have in common (the width when equal).
    fn common_prefix_len(self, other: Self) -> u8;

    /// Whether `self` lies in the prefix `net/len`.
    #[inline]
    fn in_prefix(self, net: Self, len: u8) -> bool {
        self.common_prefix_len(net) >= len
    }

    /// The address widened to 128 bits, left aligned (for hashing and printing).
    fn to_u128_left(self) -> u128;

    /// The inverse of [`Key::to_u128_left`]: keeps the top `BITS` bits.
    fn from_u128_left(v: u128) -> Self;

    /// Network-order bytes of the address (4 or 16 of them).
    fn write_be(self, out: &mut [u8; 16]) -> usize;
}

impl Key for u32 {
    const BITS: u8 = 32;
    const ZERO: Self = 0;
    const FAMILY: &'static str = "v4";

    #[inline(always)]
    fn masked(self, len: u8) -> Self {
        if len == 0 {
            0
        } else if len >= 32 {
            self
        } else {
            self & !(u32::MAX >> len)
        }
    }

    #[inline(always)]
    fn chunk(self, offset: u8, width: u8) -> usize {
        // Widen so that a stride running past bit 31 reads zeros instead of overflowing.
        let wide = (self as u64) << 32;
        ((wide << offset) >> (64 - width as u32)) as usize
    }

    #[inline(always)]
    fn bit(self, i: u8) -> bool {
        (self >> (31 - i as u32)) & 1 == 1
    }

    #[inline(always)]
    fn common_prefix_len(self, other: Self) -> u8 {
        (self ^ other).leading_zeros() as u8
    }

    #[inline(always)]
    fn to_u128_left(self) -> u128 {
        (self as u128) << 96
    }

    #[inline(always)]
    fn from_u128_left(v: u128) -> Self {
        (v >> 96) as u32
    }

    fn write_be(self, out: &mut [u8; 16]) -> usize {
        out[..4].copy_from_slice(&self.to_be_bytes());
        4
    }
}

impl Key for u128 {
    const BITS: u8 = 128;
    const ZERO: Self = 0;
    const FAMILY: &'static str = "v6";

    #[inline(always)]
    fn masked(self, len: u8) -> Self {
        if len == 0 {
            0
        } else if len >= 128 {
            self
        } else {
            self & !(u128::MAX >> len)
        }
    }

    #[inline(always)]
    fn chunk(self, offset: u8, width: u8) -> usize {
        // Most strides of a walk lie in the upper half (routes up to /64): two 64-bit shifts
        // there instead of a 128-bit shift, which takes a double shift and a select.
        if u32::from(offset) + u32::from(width) <= 64 {
            let hi = (self >> 64) as u64;
            return ((hi << offset) >> (64 - u32::from(width))) as usize;
        }
        // `offset` < 128, so the shift is defined; bits shifted in from the right are zero,
        // which is exactly the padding a stride past bit 127 needs.
        ((self << offset) >> (128 - width as u32)) as usize
    }

    #[inline(always)]
    fn bit(self, i: u8) -> bool {
        (self >> (127 - i as u32)) & 1 == 1
    }

    #[inline(always)]
    fn common_prefix_len(self, other: Self) -> u8 {
        (self ^ other).leading_zeros() as u8
    }

    #[inline(always)]
    fn to_u128_left(self) -> u128 {
        self
    }

    #[inline(always)]
    fn from_u128_left(v: u128) -> Self {
        v
    }

    fn write_be(self, out: &mut [u8; 16]) -> usize {
        out.copy_from_slice(&self.to_be_bytes());
        16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_at_the_edges() {
        assert_eq!(0xffff_ffffu32.masked(0), 0);
        assert_eq!(0xffff_ffffu32.masked(1), 0x8000_0000);
        assert_eq!(0xffff_ffffu32.masked(31), 0xffff_fffe);
        assert_eq!(0xffff_ffffu32.masked(32), 0xffff_ffff);
        assert_eq!(u128::MAX.masked(127), u128::MAX - 1);
        assert_eq!(u128::MAX.masked(128), u128::MAX);
        assert_eq!(u128::MAX.masked(0), 0);
    }

    #[test]
    fn chunks_pad_with_zeros_past_the_end() {
        let a: u32 = 0b11 << 30 | 0b11;
        assert_eq!(a.chunk(0, 6), 0b110000);
        assert_eq!(a.chunk(30, 6), 0b110000);
        assert_eq!(a.chunk(26, 6), 0b000011);
        assert_eq!(a.chunk(0, 18), (a >> 14) as usize);
        let b: u128 = 0b101;
        assert_eq!(b.chunk(124, 6), 0b010100);
        assert_eq!(b.chunk(125, 6), 0b101_000);
        assert_eq!(u128::MAX.chunk(0, 16), 0xffff);
    }

    /// A `width`-bit field at `offset` of a 128-bit address, bit by bit.
    fn chunk_by_bits(a: u128, offset: u8, width: u8) -> usize {
        (0..width).fold(0usize, |acc, i| {
            let at = u32::from(offset) + u32::from(i);
            let bit = at < 128 && (a >> (127 - at)) & 1 == 1;
            (acc << 1) | usize::from(bit)
        })
    }

    proptest::proptest! {
        #[test]
        fn a_v6_chunk_equals_its_bits(a in proptest::prelude::any::<u128>(), offset in 0u8..128, width in 1u8..=32) {
            proptest::prop_assert_eq!(a.chunk(offset, width), chunk_by_bits(a, offset, width));
        }
    }

    #[test]
    fn v6_chunks_on_both_sides_of_the_halves() {
        let a: u128 = (0xdead_beef_0123_4567 << 64) | 0x89ab_cdef_0f1e_2d3c;
        for offset in [0u8, 30, 52, 58, 59, 60, 63, 64, 100, 122, 127] {
            for width in [1u8, 6, 16, 18, 32] {
                assert_eq!(
                    a.chunk(offset, width),
                    chunk_by_bits(a, offset, width),
                    "{offset} {width}"
                );
            }
        }
    }

    #[test]
    fn common_prefix() {
        assert_eq!(5u32.common_prefix_len(5), 32);
        assert_eq!(0u32.common_prefix_len(1), 31);
        assert_eq!(0u128.common_prefix_len(1 << 127), 0);
        assert!(0x0a01_0203u32.in_prefix(0x0a00_0000, 8));
        assert!(!0x0b01_0203u32.in_prefix(0x0a00_0000, 8));
        assert!(7u32.in_prefix(0, 0));
    }
}
