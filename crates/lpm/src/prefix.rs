//! Prefixes, routes and the canonical route list every engine is built from.

use crate::key::Key;
use core::fmt;
use core::str::FromStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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

/// Why a prefix could not be made, or read from text.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PrefixError {
    /// The length is longer than the address.
    LengthTooLong { len: u8, max: u8 },
    /// Bits past the length are set (`10.0.0.1/8`).
    HostBitsSet,
    /// The text has no `/length`.
    NoLength,
    /// The text before the `/` is not an IPv4 or IPv6 address.
    BadAddress,
    /// The text after the `/` is not one to three decimal digits.
    BadLength,
    /// An address of the other family than the one asked for.
    WrongFamily,
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrefixError::LengthTooLong { len, max } => {
                write!(f, "prefix length /{len} is longer than /{max}")
            }
            PrefixError::HostBitsSet => write!(f, "host bits are set past the prefix length"),
            PrefixError::NoLength => write!(f, "no /length"),
            PrefixError::BadAddress => write!(f, "not an IPv4 or IPv6 address before the /"),
            PrefixError::BadLength => write!(f, "not a prefix length after the /"),
            PrefixError::WrongFamily => write!(f, "an address of the other family"),
        }
    }
}

/// Reads `address/length` of either family, the address's host bits allowed (an interface
/// address is written so): the one reader of prefix text, under every `FromStr` of a prefix
/// and every file, stream and configuration that holds one. The length is one to three
/// decimal digits, at most the address's width; nothing around either part is skipped.
///
/// ```
/// use vfsr_lpm::prefix::{parse_addr_len, PrefixError};
/// assert_eq!(parse_addr_len("10.1.2.3/8"), Ok(("10.1.2.3".parse().unwrap(), 8)));
/// assert_eq!(parse_addr_len("2001:db8::/129"), Err(PrefixError::LengthTooLong { len: 129, max: 128 }));
/// assert_eq!(parse_addr_len("10.0.0.0"), Err(PrefixError::NoLength));
/// ```
pub fn parse_addr_len(s: &str) -> Result<(IpAddr, u8), PrefixError> {
    let (addr, len) = s.split_once('/').ok_or(PrefixError::NoLength)?;
    if len.is_empty() || len.len() > 3 || !len.bytes().all(|b| b.is_ascii_digit()) {
        return Err(PrefixError::BadLength);
    }
    let len: u8 = len.parse().map_err(|_| PrefixError::BadLength)?;
    let addr: IpAddr = addr.parse().map_err(|_| PrefixError::BadAddress)?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if len > max {
        return Err(PrefixError::LengthTooLong { len, max });
    }
    Ok((addr, len))
}

impl FromStr for Prefix<u32> {
    type Err = PrefixError;

    /// An IPv4 `address/length` whose host bits are clear.
    fn from_str(s: &str) -> Result<Self, PrefixError> {
        match parse_addr_len(s)? {
            (IpAddr::V4(a), len) => Prefix::new(u32::from(a), len),
            (IpAddr::V6(_), _) => Err(PrefixError::WrongFamily),
        }
    }
}

impl FromStr for Prefix<u128> {
    type Err = PrefixError;

    /// An IPv6 `address/length` whose host bits are clear.
    fn from_str(s: &str) -> Result<Self, PrefixError> {
        match parse_addr_len(s)? {
            (IpAddr::V6(a), len) => Prefix::new(u128::from(a), len),
            (IpAddr::V4(_), _) => Err(PrefixError::WrongFamily),
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
    fn prefixes_read_from_text() {
        let p: Prefix<u32> = "10.128.0.0/9".parse().unwrap();
        assert_eq!((p.addr(), p.len()), (0x0a80_0000, 9));
        let p: Prefix<u128> = "2001:db8::/32".parse().unwrap();
        assert_eq!(p.len(), 32);
        assert_eq!("0.0.0.0/0".parse::<Prefix<u32>>().unwrap().len(), 0);
        assert_eq!("::/128".parse::<Prefix<u128>>().unwrap().len(), 128);
        for (text, err) in [
            ("10.0.0.1/8", PrefixError::HostBitsSet),
            (
                "10.0.0.0/33",
                PrefixError::LengthTooLong { len: 33, max: 32 },
            ),
            ("10.0.0.0/256", PrefixError::BadLength),
            ("10.0.0.0/1000", PrefixError::BadLength),
            ("10.0.0.0/", PrefixError::BadLength),
            ("10.0.0.0/+8", PrefixError::BadLength),
            ("10.0.0.0/ 8", PrefixError::BadLength),
            ("10.0.0.0", PrefixError::NoLength),
            ("10.0.0/8", PrefixError::BadAddress),
            (" 10.0.0.0/8", PrefixError::BadAddress),
            ("/8", PrefixError::BadAddress),
            ("2001:db8::/32", PrefixError::WrongFamily),
        ] {
            assert_eq!(text.parse::<Prefix<u32>>(), Err(err), "{text:?}");
        }
        assert_eq!(
            "10.0.0.0/8".parse::<Prefix<u128>>(),
            Err(PrefixError::WrongFamily)
        );
        assert_eq!(
            parse_addr_len("192.0.2.1/24"),
            Ok((IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), 24)),
            "host bits are the caller's business"
        );
    }

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
