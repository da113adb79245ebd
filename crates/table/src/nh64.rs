//! The `nh64` next-hop rule of the shared benchmark conventions.
//!
//! Reference tables carry prefixes only. To give every prefix a next hop that all
//! implementations agree on, the prefix is hashed and the hash is folded onto 64 next hops:
//!
//! ```text
//!   bytes = network-order address (4 bytes for IPv4, 16 for IPv6) ++ [prefix length]
//!   h     = FNV-1a 32-bit over bytes        (offset basis 2166136261, prime 16777619)
//!   nh    = 1 + (h mod 64)                  (1..=64; 0 stays "no route")
//! ```
//!
//! Worked example, `10.0.0.0/8`: the bytes are `0a 00 00 00 08`, FNV-1a gives `0xcc999115`,
//! `0xcc999115 mod 64 = 21`, so the next hop is 22.
//!
//! Next hops spread uniformly over 1..=64, which is the hardest case for leaf compression in
//! the engines. Gateway next hops read from files are numbered from
//! [`FIRST_GATEWAY_NEXTHOP`](crate::FIRST_GATEWAY_NEXTHOP) = 65 upwards, so the two kinds never
//! collide.

use vfsr_lpm::{Key, NextHop, Prefix};

/// FNV-1a 32-bit offset basis.
const FNV_OFFSET: u32 = 2_166_136_261;
/// FNV-1a 32-bit prime.
const FNV_PRIME: u32 = 16_777_619;

/// Number of distinct nh64 next hops (they are `1..=NH64_COUNT`).
pub const NH64_COUNT: NextHop = 64;

/// FNV-1a 32-bit over `bytes`.
fn fnv1a32(bytes: impl IntoIterator<Item = u8>) -> u32 {
    bytes.into_iter().fold(FNV_OFFSET, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(FNV_PRIME)
    })
}

/// The nh64 hash of a prefix before folding (exposed for tests and documentation).
pub fn nh64_hash<K: Key>(p: &Prefix<K>) -> u32 {
    let mut bytes = [0u8; 16];
    let n = p.addr().write_be(&mut bytes);
    fnv1a32(
        bytes
            .iter()
            .take(n)
            .copied()
            .chain(core::iter::once(p.len())),
    )
}

/// The nh64 next hop of a prefix of either family: `1 + (fnv1a32(addr ++ len) mod 64)`.
pub fn nh64<K: Key>(p: &Prefix<K>) -> NextHop {
    1 + nh64_hash(p) % NH64_COUNT
}

/// The nh64 next hop of an IPv4 prefix.
pub fn nh64_v4(p: &Prefix<u32>) -> NextHop {
    nh64(p)
}

/// The nh64 next hop of an IPv6 prefix.
pub fn nh64_v6(p: &Prefix<u128>) -> NextHop {
    nh64(p)
}

/// Whether `nh` is in the range nh64 produces (`1..=64`).
pub fn is_nh64(nh: NextHop) -> bool {
    (1..=NH64_COUNT).contains(&nh)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4(s: &str, len: u8) -> Prefix<u32> {
        Prefix::new(u32::from(s.parse::<Ipv4Addr>().unwrap()), len).unwrap()
    }

    fn v6(s: &str, len: u8) -> Prefix<u128> {
        Prefix::new(u128::from(s.parse::<Ipv6Addr>().unwrap()), len).unwrap()
    }

    #[test]
    fn fnv_of_nothing_is_the_offset_basis() {
        assert_eq!(fnv1a32([]), FNV_OFFSET);
        // One step by hand: (2166136261 ^ 0x61) * 16777619 mod 2^32 = 0xe40c292c ("a").
        assert_eq!(fnv1a32(*b"a"), 0xe40c_292c);
    }

    #[test]
    fn hand_computed_v4() {
        // Values computed independently from the rule in the shared data README.
        assert_eq!(nh64_hash(&v4("10.0.0.0", 8)), 0xcc99_9115);
        assert_eq!(nh64_v4(&v4("10.0.0.0", 8)), 22);
        assert_eq!(nh64_hash(&v4("0.0.0.0", 0)), 0x1210_d00f);
        assert_eq!(nh64_v4(&v4("0.0.0.0", 0)), 16);
        assert_eq!(nh64_v4(&v4("1.0.0.0", 24)), 21);
        assert_eq!(nh64_v4(&v4("192.168.1.0", 24)), 5);
        assert_eq!(nh64_v4(&v4("255.255.255.255", 32)), 4);
    }

    #[test]
    fn hand_computed_v6() {
        assert_eq!(nh64_hash(&v6("::", 0)), 0xf572_62df);
        assert_eq!(nh64_v6(&v6("::", 0)), 32);
        assert_eq!(nh64_hash(&v6("2001:db8::", 32)), 0xf34b_78e5);
        assert_eq!(nh64_v6(&v6("2001:db8::", 32)), 38);
        assert_eq!(nh64_v6(&v6("2c0f:ffd0::", 32)), 18);
    }

    #[test]
    fn the_length_byte_matters_and_the_range_holds() {
        assert_ne!(nh64_hash(&v4("10.0.0.0", 8)), nh64_hash(&v4("10.0.0.0", 9)));
        for len in 0..=32u8 {
            let p = Prefix::<u32>::new_masked(0xdead_beef, len);
            assert!(is_nh64(nh64(&p)));
        }
    }
}
