//! Prefixes, routes and the canonical route list every engine is built from.

use crate::key::Key;
use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Index of a next hop (or next-hop group) in the forwarding tables. `0` means "no route".
pub type NextHop = u32;

/// The next hop returned when no prefix covers an address.
pub const NO_ROUTE: NextHop = 0;

/// An address prefix `addr/len` with every bit past `len` clear.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct Prefix<K: Key> {
    addr: K,
    len: u8,
}

/// Why a prefix could not be made.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PrefixError {
    /// The length is longer than the address.
    LengthTooLong { len: u8, max: u8 },
    /// Bits past the length are set (`10.0.0.1/8`).
    HostBitsSet,
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrefixError::LengthTooLong { len, max } => {
                write!(f, "prefix length /{len} is longer than /{max}")
            }
            PrefixError::HostBitsSet => write!(f, "host bits are set past the prefix length"),
        }
    }
}

impl std::error::Error for PrefixError {}

impl<K: Key> Prefix<K> {
    /// A prefix whose host bits must already be clear.
    pub fn new(addr: K, len: u8) -> Result<Self, PrefixError> {
        if len > K::BITS {
            return Err(PrefixError::LengthTooLong { len, max: K::BITS });
        }
        if addr.masked(len) != addr {
            return Err(PrefixError::HostBitsSet);
        }
        Ok(Prefix { addr, len })
    }

    /// A prefix from any address in it (host bits are cleared). Lengths past the width are
    /// clamped to the width.
    pub fn new_masked(addr: K, len: u8) -> Self {
        let len = len.min(K::BITS);
        Prefix {
            addr: addr.masked(len),
            len,
        }
    }

    /// The network address.
    #[inline(always)]
    pub fn addr(&self) -> K {
        self.addr
    }

    /// The prefix length in bits.
    #[inline(always)]
    pub fn len(&self) -> u8 {
        self.len
    }

    /// Whether this is the default route (`/0`, the prefix of no bits).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `a` lies inside the prefix.
    #[inline(always)]
    pub fn contains(&self, a: K) -> bool {
        a.in_prefix(self.addr, self.len)
    }

    /// Whether `other` lies entirely inside this prefix (a prefix covers itself).
    pub fn covers(&self, other: &Prefix<K>) -> bool {
        other.len >= self.len && self.contains(other.addr)
    }
}

impl fmt::Display for Prefix<u32> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.addr), self.len)
    }
}

impl fmt::Display for Prefix<u128> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv6Addr::from(self.addr), self.len)
    }
}

/// A route: a prefix and the next hop it forwards to.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Route<K: Key> {
    pub prefix: Prefix<K>,
    pub nexthop: NextHop,
}

impl<K: Key> Route<K> {
    pub fn new(prefix: Prefix<K>, nexthop: NextHop) -> Self {
        Route { prefix, nexthop }
    }
}

/// Sorts routes by (address, length) and keeps the last route given for each prefix, so that a
/// list with repeated prefixes means "the later announcement replaces the earlier one" for every
/// engine alike. Routes to [`NO_ROUTE`] are withdrawals of that prefix and are dropped.
///
/// In the result a covering prefix always comes before the prefixes it covers, which is the
/// order in which the engines paint their tables (longer prefixes overwrite shorter ones).
pub fn canonicalize<K: Key>(routes: &[Route<K>]) -> Vec<Route<K>> {
    let mut v: Vec<(usize, Route<K>)> = routes.iter().copied().enumerate().collect();
    v.sort_unstable_by(|a, b| {
        (a.1.prefix.addr, a.1.prefix.len, a.0).cmp(&(b.1.prefix.addr, b.1.prefix.len, b.0))
    });
    let mut out: Vec<Route<K>> = Vec::with_capacity(v.len());
    for (_, r) in v {
        match out.last_mut() {
            Some(last) if last.prefix == r.prefix => *last = r,
            _ => out.push(r),
        }
    }
    out.retain(|r| r.nexthop != NO_ROUTE);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_host_bits_and_long_lengths() {
        assert_eq!(
            Prefix::<u32>::new(0x0a00_0001, 8),
            Err(PrefixError::HostBitsSet)
        );
        assert_eq!(
            Prefix::<u32>::new(0, 33),
            Err(PrefixError::LengthTooLong { len: 33, max: 32 })
        );
        assert!(Prefix::<u128>::new(1, 128).is_ok());
        assert_eq!(
            Prefix::<u32>::new_masked(0x0a01_0203, 8).addr(),
            0x0a00_0000
        );
    }

    #[test]
    fn prints_like_ip_route() {
        let p = Prefix::<u32>::new(0x0a00_0000, 8).unwrap();
        assert_eq!(p.to_string(), "10.0.0.0/8");
        let q = Prefix::<u128>::new(0x2001_0db8u128 << 96, 32).unwrap();
        assert_eq!(q.to_string(), "2001:db8::/32");
    }

    #[test]
    fn canonical_order_and_last_wins() {
        let p8 = Prefix::<u32>::new(0x0a00_0000, 8).unwrap();
        let p16 = Prefix::<u32>::new(0x0a00_0000, 16).unwrap();
        let p0 = Prefix::<u32>::new(0, 0).unwrap();
        let c = canonicalize(&[
            Route::new(p16, 3),
            Route::new(p8, 1),
            Route::new(p0, 9),
            Route::new(p8, 2),
        ]);
        assert_eq!(
            c,
            vec![Route::new(p0, 9), Route::new(p8, 2), Route::new(p16, 3)]
        );
        let w = canonicalize(&[Route::new(p8, 1), Route::new(p8, NO_ROUTE)]);
        assert!(w.is_empty());
    }
}
