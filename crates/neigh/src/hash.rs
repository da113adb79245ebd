//! A fast seeded hash for neighbor addresses.
//!
//! Workers look a next hop up in an interface's neighbor table for every packet they
//! forward without a flow-table hit, so the table's hash must cost a few nanoseconds; the
//! standard library's SipHash costs several times that. The keys are 4- or 16-byte
//! addresses, a few per packet, and entries are bounded per interface: rustc-hash's Fx hash
//! is enough, and a random seed per table keeps an outside sender from choosing colliding
//! addresses in advance.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use rustc_hash::{FxHasher, FxSeededState};

/// Builds Fx hashers with one random seed per table.
#[derive(Clone)]
pub struct AddrHashBuilder(FxSeededState);

impl Default for AddrHashBuilder {
    fn default() -> Self {
        let seed = RandomState::new().hash_one(0x5eed_u64) | 1;
        AddrHashBuilder(FxSeededState::with_seed(seed as usize))
    }
}

impl std::fmt::Debug for AddrHashBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AddrHashBuilder")
    }
}

impl BuildHasher for AddrHashBuilder {
    type Hasher = FxHasher;

    #[inline]
    fn build_hasher(&self) -> FxHasher {
        self.0.build_hasher()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn spreads_neighbouring_addresses() {
        let b = AddrHashBuilder::default();
        let mut low = HashSet::new();
        for i in 0..4096u32 {
            let h = b.hash_one(Ipv4Addr::from(0x0a00_0000 + i));
            low.insert(h & 0xfff);
        }
        // 4096 keys into 4096 buckets: a good hash fills about 63%.
        assert!(low.len() > 2300, "{}", low.len());
        let a: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let c: Ipv6Addr = "2001:db8::2".parse().unwrap();
        assert_ne!(b.hash_one(a), b.hash_one(c));
        assert_eq!(b.hash_one(a), b.hash_one(a));
    }

    #[test]
    fn seeds_differ() {
        let a = AddrHashBuilder::default();
        let b = AddrHashBuilder::default();
        let x = Ipv4Addr::new(192, 0, 2, 1);
        assert_ne!(a.hash_one(x), b.hash_one(x));
    }
}
