//! Destination-address streams of the shared benchmark conventions.
//!
//! * **uniform4**: uniformly random 32-bit addresses; most fall into the table or into a
//!   covering route, as on an Internet router.
//! * **matched4 / matched6**: each address is a uniformly chosen prefix of the table with its
//!   host bits random, so every lookup hits a real route and the table's length distribution
//!   drives the work.
//!
//! ```text
//!   prefix 192.0.2.0/23, random bits r:   address = 192.0.2.0 | (r & 0.0.1.255)
//! ```
//!
//! Every stream is a pure function of its seed (the crate's own [`Rng`]).

use vfsr_lpm::{Key, Prefix, Route};

use crate::rng::Rng;

/// Seed salts so that different patterns of one seed are different streams.
const SALT_UNIFORM: u64 = 0x7472_6166_0000_0001;
const SALT_MATCHED: u64 = 0x7472_6166_0000_0002;

/// Things that have a prefix: prefixes themselves and routes.
pub trait HasPrefix<K: Key> {
    fn prefix(&self) -> Prefix<K>;
}

impl<K: Key> HasPrefix<K> for Prefix<K> {
    fn prefix(&self) -> Prefix<K> {
        *self
    }
}

impl<K: Key> HasPrefix<K> for Route<K> {
    fn prefix(&self) -> Prefix<K> {
        self.prefix
    }
}

/// `n` uniformly random IPv4 addresses.
pub fn uniform4(seed: u64, n: usize) -> Vec<u32> {
    let mut rng = Rng::new(seed ^ SALT_UNIFORM);
    (0..n).map(|_| rng.next_u32()).collect()
}

/// `n` uniformly random IPv6 addresses (almost all miss a real table; for completeness).
pub fn uniform6(seed: u64, n: usize) -> Vec<u128> {
    let mut rng = Rng::new(seed ^ SALT_UNIFORM);
    (0..n).map(|_| rng.next_u128()).collect()
}

/// `n` addresses, each inside a uniformly chosen element of `table` with random host bits.
/// Empty when `table` is empty (there is nothing to match).
pub fn matched<K: Key, P: HasPrefix<K>>(table: &[P], seed: u64, n: usize) -> Vec<K> {
    if table.is_empty() {
        return Vec::new();
    }
    let mut rng = Rng::new(seed ^ SALT_MATCHED);
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let Some(item) = table.get(rng.index(table.len())) else {
            continue;
        };
        let p = item.prefix();
        let net_mask = u128::MAX
            .checked_shl(128u32.saturating_sub(u32::from(p.len())))
            .unwrap_or(0);
        let addr = p.addr().to_u128_left() | (rng.next_u128() & !net_mask);
        out.push(K::from_u128_left(addr));
    }
    out
}

/// [`matched`] for IPv4.
pub fn matched4<P: HasPrefix<u32>>(table: &[P], seed: u64, n: usize) -> Vec<u32> {
    matched(table, seed, n)
}

/// [`matched`] for IPv6.
pub fn matched6<P: HasPrefix<u128>>(table: &[P], seed: u64, n: usize) -> Vec<u128> {
    matched(table, seed, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matched_addresses_fall_in_their_table() {
        let table = [
            Prefix::<u32>::new(0xc000_0200, 23).unwrap(),
            Prefix::<u32>::new(0x0a00_0000, 8).unwrap(),
            Prefix::<u32>::new(0x0101_0101, 32).unwrap(),
            Prefix::<u32>::new(0, 0).unwrap(),
        ];
        let addrs = matched4(&table, 9, 1000);
        assert_eq!(addrs.len(), 1000);
        assert!(addrs.iter().all(|&a| table.iter().any(|p| p.contains(a))));
        // All four prefixes are chosen, and host bits vary.
        assert!(addrs.contains(&0x0101_0101));
        assert!(addrs.iter().any(|&a| a >> 24 == 10 && a & 0xff_ffff != 0));
        assert_eq!(addrs, matched4(&table, 9, 1000));
        assert_ne!(addrs, matched4(&table, 10, 1000));
        assert!(matched4::<Prefix<u32>>(&[], 1, 10).is_empty());
    }

    #[test]
    fn matched_v6_routes() {
        let p = Prefix::<u128>::new(0x2001_0db8u128 << 96, 32).unwrap();
        let routes = [Route::new(p, 3)];
        let addrs = matched6(&routes, 1, 100);
        assert!(addrs.iter().all(|&a| p.contains(a)));
        assert!(addrs.windows(2).any(|w| w[0] != w[1]));
    }

    #[test]
    fn uniform_is_seeded() {
        assert_eq!(uniform4(5, 100), uniform4(5, 100));
        assert_ne!(uniform4(5, 100), uniform4(6, 100));
        assert_eq!(uniform4(5, 0).len(), 0);
        assert_eq!(uniform6(5, 3).len(), 3);
    }
}
