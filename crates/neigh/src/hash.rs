//! A fast seeded hash for neighbor addresses.
//!
//! Workers look a next hop up in an interface's neighbor table for every packet they
//! forward without a flow-table hit, so the table's hash must cost a few nanoseconds; the
//! standard library's SipHash costs several times that. The keys are 4- or 16-byte
//! addresses, a few per packet, and entries are bounded per interface; a multiply-xorshift
//! over 8-byte words is enough, and a random seed per table keeps an outside sender from
//! choosing colliding addresses in advance.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// Builds [`AddrHasher`]s with one random seed.
#[derive(Clone, Debug)]
pub struct AddrHashBuilder {
    seed: u64,
}

impl Default for AddrHashBuilder {
    fn default() -> Self {
        AddrHashBuilder {
            seed: RandomState::new().hash_one(0x5eed_u64) | 1,
        }
    }
}

impl BuildHasher for AddrHashBuilder {
    type Hasher = AddrHasher;

    #[inline]
    fn build_hasher(&self) -> AddrHasher {
        AddrHasher { state: self.seed }
    }
}

/// The hasher: each 8-byte word is mixed in by xor and multiply.
#[derive(Clone, Debug)]
pub struct AddrHasher {
    state: u64,
}

impl AddrHasher {
    #[inline]
    fn mix(&mut self, w: u64) {
        self.state = (self.state ^ w).wrapping_mul(K).rotate_left(29);
    }
}

impl Hasher for AddrHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.mix(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            for (d, s) in w.iter_mut().zip(rest) {
                *d = *s;
            }
            self.mix(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 56));
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // A full avalanche (the finalizer of MurmurHash3), so low bits (the bucket) and
        // high bits (hashbrown's tag) both depend on every input bit.
        let mut x = self.state;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
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
