//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! The checksum of a run of bytes is the ones' complement of the ones' complement sum of its
//! 16-bit big-endian words (an odd last byte is padded with a zero byte). A receiver sums the
//! covered bytes *including* the checksum field: a correct message sums to `0xffff`.
//!
//! ## Why the sum is fast
//!
//! RFC 1071 section 2 lists the properties this code relies on:
//! - (B) byte-order independence: summing the words in the machine's native order and swapping
//!   the folded result once gives the same sum as summing big-endian words;
//! - (C) parallel summation: words can be added in wider units and folded afterwards, because
//!   2^16 ≡ 1 (mod 2^16 - 1), the modulus of ones' complement arithmetic.
//!
//! So [`ones_sum`] loads 8 bytes at a time as one native `u64`, adds its two 32-bit halves
//! into a `u64` accumulator (no carry to track: 2^31 chunks, 16 GiB, would be needed to
//! overflow it), and folds the accumulator to 16 bits at the end:
//!
//! ```text
//!   bytes   b0 b1 b2 b3 b4 b5 b6 b7 | b8 ...     chunk = u64::from_ne_bytes(b0..b7)
//!   acc    += (chunk & 0xffff_ffff) + (chunk >> 32)
//!   fold:   acc = (acc & 0xffff) + (acc >> 16)   until it fits in 16 bits
//!   result: the folded native-order sum, read as big-endian bytes
//! ```
//!
//! ## Incremental update (RFC 1624)
//!
//! When one 16-bit word `m` of a checksummed header becomes `m'`, the new checksum follows
//! from the old one without touching the other words (RFC 1624 section 3, equation 3):
//!
//! ```text
//!   HC' = ~(~HC + ~m + m')        (+ is ones' complement addition)
//! ```
//!
//! [`update_word`] implements that equation; `Ipv4Packet::set_ttl_and_update_checksum` uses it
//! for the TTL decrement (the word holding TTL and protocol).

use core::net::{Ipv4Addr, Ipv6Addr};

/// The ones' complement sum of `data` as 16-bit big-endian words, folded to 16 bits (not
/// complemented). An odd last byte counts as the high byte of a word whose low byte is zero.
/// The sum of empty data is 0.
#[inline]
pub fn ones_sum(data: &[u8]) -> u16 {
    let native = fold(native_sum(data));
    u16::from_be_bytes(native.to_ne_bytes())
}

/// The sum of `data`'s 16-bit words in the machine's byte order, not yet folded (RFC 1071's
/// properties B and C). An option-less IPv4 header, the case a router checks on every packet,
/// is summed as five 32-bit loads with no loop.
#[inline]
fn native_sum(data: &[u8]) -> u64 {
    if let Ok(h) = <&[u8; 20]>::try_from(data) {
        let (words, _) = h.as_chunks::<4>();
        return words
            .iter()
            .map(|w| u64::from(u32::from_ne_bytes(*w)))
            .sum();
    }
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in chunks.by_ref() {
        let w = u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]));
        acc += (w & 0xffff_ffff) + (w >> 32);
    }
    let mut pairs = chunks.remainder().chunks_exact(2);
    for p in pairs.by_ref() {
        acc += u64::from(u16::from_ne_bytes(p.try_into().unwrap_or([0; 2])));
    }
    if let [last] = pairs.remainder() {
        acc += u64::from(u16::from_ne_bytes([*last, 0]));
    }
    acc
}

/// Folds a wide ones' complement sum to 16 bits (end-around carries), without a loop: four
/// fixed steps take any `u64` down to 16 bits.
#[inline]
pub fn fold(acc: u64) -> u16 {
    let acc = (acc >> 32) + (acc & 0xffff_ffff); // < 2^33
    let acc = (acc >> 16) + (acc & 0xffff); // < 2^18
    let acc = (acc >> 16) + (acc & 0xffff); // <= 0x1_0002
    let acc = (acc >> 16) + (acc & 0xffff); // <= 0xffff
    acc as u16
}

/// Ones' complement addition of two 16-bit sums.
#[inline]
pub fn add(a: u16, b: u16) -> u16 {
    fold(u64::from(a) + u64::from(b))
}

/// The Internet checksum of `data`: the ones' complement of [`ones_sum`]. This is the value to
/// store in a checksum field that was zero while summing.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !ones_sum(data)
}

/// True when `data`, checksum field included, sums to `0xffff` (a correct message).
///
/// Folding keeps a sum's value modulo `0xffff` (2^16 ≡ 1) and never turns a non-zero sum into
/// zero, so the folded sum is `0xffff` exactly when the wide sum is a non-zero multiple of
/// `0xffff`: one remainder by a constant (a multiply and shifts) instead of four folding
/// steps. 0xffff reads the same in either byte order, so the native sum needs no swap.
#[inline]
pub fn verify(data: &[u8]) -> bool {
    let s = native_sum(data);
    s != 0 && s.is_multiple_of(0xffff)
}

/// RFC 1624 equation 3: the checksum `hc` after one covered 16-bit word changes from `old` to
/// `new`: `~(~hc + ~old + new)`.
#[inline]
pub fn update_word(hc: u16, old: u16, new: u16) -> u16 {
    !add(add(!hc, !old), new)
}

/// The checksum `hc` after the IPv4 TTL drops by one. The TTL is the high byte of its word,
/// so the word `m` becomes `m - 0x100`, and RFC 1624's `~m + m'` is the ones' complement of
/// `0x100`, a constant: `HC' = ~(~HC + 0xfeff)`, one addition and one end-around carry. Equal
/// to [`update_word`] for every header whose TTL was at least 1 (the caller checks that).
#[inline]
pub fn ttl_decremented(hc: u16) -> u16 {
    let s = u32::from(!hc) + 0xfeff;
    !(((s & 0xffff) + (s >> 16)) as u16)
}

/// The sum of the IPv4 pseudo-header (RFC 9293 3.1, RFC 768): source, destination, zero,
/// protocol, upper-layer length.
#[inline]
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: u16) -> u16 {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&src.octets());
    b[4..8].copy_from_slice(&dst.octets());
    b[9] = protocol;
    b[10..].copy_from_slice(&len.to_be_bytes());
    ones_sum(&b)
}

/// The sum of the IPv6 pseudo-header (RFC 8200 8.1): source, destination, 32-bit upper-layer
/// length, three zero bytes, next header.
#[inline]
pub fn pseudo_header_v6(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: u8, len: u32) -> u16 {
    let mut b = [0u8; 40];
    b[..16].copy_from_slice(&src.octets());
    b[16..32].copy_from_slice(&dst.octets());
    b[32..36].copy_from_slice(&len.to_be_bytes());
    b[39] = next_header;
    ones_sum(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The textbook sum: big-endian words one at a time, in a u32 with end-around carry.
    fn reference_sum(data: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        let mut i = 0;
        while i < data.len() {
            let hi = u32::from(data[i]) << 8;
            let lo = data.get(i + 1).map_or(0, |&b| u32::from(b));
            sum += hi | lo;
            sum = (sum & 0xffff) + (sum >> 16);
            i += 2;
        }
        sum as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(ones_sum(&data), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn golden_ipv4_header() {
        // A real IPv4 header (ping 192.168.1.10 -> 192.168.1.1), checksum 0x9b2f.
        let mut h = [
            0x45, 0x00, 0x00, 0x2c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0x9b, 0x2f, 0xc0, 0xa8,
            0x01, 0x0a, 0xc0, 0xa8, 0x01, 0x01,
        ];
        assert!(verify(&h));
        h[10] = 0;
        h[11] = 0;
        assert_eq!(checksum(&h), 0x9b2f);
    }

    #[test]
    fn zeros_do_not_verify_and_all_ones_do() {
        // Zeros sum to 0, not 0xffff (their checksum would be 0xffff); all-ones words sum to
        // 0xffff, as do header-sized and longer runs of them.
        assert!(!verify(&[0u8; 20]));
        assert!(!verify(&[]));
        assert!(verify(&[0xffu8; 20]));
        assert!(verify(&[0xffu8; 24]));
        assert!(verify(&[0xffu8; 2]));
        assert!(!verify(&[0xffu8, 0xfe]));
    }

    #[test]
    fn odd_lengths_and_empty() {
        assert_eq!(ones_sum(&[]), 0);
        assert_eq!(ones_sum(&[0xab]), 0xab00);
        assert_eq!(ones_sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        assert_eq!(ones_sum(&[0xff; 9]), reference_sum(&[0xff; 9]));
    }

    #[test]
    fn update_word_matches_recompute() {
        let mut h = [
            0x45u8, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let c = checksum(&h);
        let old = u16::from_be_bytes([h[8], h[9]]);
        h[8] = 63;
        let new = u16::from_be_bytes([h[8], h[9]]);
        assert_eq!(update_word(c, old, new), checksum(&h));
    }

    #[test]
    fn pseudo_headers_sum_their_bytes() {
        let s = Ipv4Addr::new(10, 0, 0, 1);
        let d = Ipv4Addr::new(10, 0, 0, 2);
        let b = [10, 0, 0, 1, 10, 0, 0, 2, 0, 6, 0, 40];
        assert_eq!(pseudo_header_v4(s, d, 6, 40), reference_sum(&b));
        let s6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let d6: Ipv6Addr = "fe80::1".parse().unwrap();
        let mut b6 = [0u8; 40];
        b6[..16].copy_from_slice(&s6.octets());
        b6[16..32].copy_from_slice(&d6.octets());
        b6[32..36].copy_from_slice(&100u32.to_be_bytes());
        b6[39] = 58;
        assert_eq!(pseudo_header_v6(&s6, &d6, 58, 100), reference_sum(&b6));
    }

    /// The end-around carry done one carry at a time, as RFC 1071 describes it.
    fn fold_slowly(mut acc: u64) -> u16 {
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn fold_edges() {
        for x in [
            0,
            1,
            0xffff,
            0x1_0000,
            0x1_fffe,
            0x1_ffff,
            0xffff_ffff,
            0x1_0000_0000,
            u64::MAX,
        ] {
            assert_eq!(fold(x), fold_slowly(x), "{x:#x}");
        }
    }

    #[test]
    fn ttl_decrement_equals_rfc1624_update() {
        for hc in 0..=u16::MAX {
            for (ttl, protocol) in [(1u16, 17u16), (2, 6), (64, 1), (128, 0), (255, 255)] {
                let old = (ttl << 8) | protocol;
                let new = ((ttl - 1) << 8) | protocol;
                assert_eq!(
                    ttl_decremented(hc),
                    update_word(hc, old, new),
                    "checksum {hc:#06x}, TTL {ttl}, protocol {protocol}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn a_header_sized_sum_equals_reference(data in proptest::array::uniform20(any::<u8>())) {
            prop_assert_eq!(ones_sum(&data), reference_sum(&data));
            prop_assert_eq!(verify(&data), reference_sum(&data) == 0xffff);
        }

        #[test]
        fn verify_equals_the_folded_sum(
            mut data in proptest::collection::vec(any::<u8>(), 2..64),
            word in any::<u16>(),
            flip in any::<bool>(),
        ) {
            // Filled checksums (which verify), and the same data with one word changed
            // (which mostly do not), against the reference sum.
            data[0] = 0;
            data[1] = 0;
            let c = checksum(&data);
            data[..2].copy_from_slice(&c.to_be_bytes());
            if flip {
                let at = (usize::from(word) % (data.len() / 2)) * 2;
                data[at] ^= (word >> 8) as u8 | 1;
            }
            prop_assert_eq!(verify(&data), reference_sum(&data) == 0xffff);
            prop_assert_eq!(verify(&data), fold(native_sum(&data)) == 0xffff);
        }

        #[test]
        fn fold_equals_one_carry_at_a_time(x in any::<u64>()) {
            prop_assert_eq!(fold(x), fold_slowly(x));
        }

        #[test]
        fn fast_sum_equals_reference(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
            prop_assert_eq!(ones_sum(&data), reference_sum(&data));
        }

        #[test]
        fn fast_sum_equals_reference_at_any_alignment(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            skip in 0usize..8,
        ) {
            let s = data.get(skip..).unwrap_or(&[]);
            prop_assert_eq!(ones_sum(s), reference_sum(s));
        }

        #[test]
        fn a_filled_checksum_verifies(mut data in proptest::collection::vec(any::<u8>(), 2..512)) {
            data[0] = 0;
            data[1] = 0;
            let c = checksum(&data);
            data[..2].copy_from_slice(&c.to_be_bytes());
            // All-zero data sums to 0 (its checksum 0xffff stored makes it sum to 0xffff).
            prop_assert!(verify(&data));
        }
    }
}
