//! Flow keys and the per-packet hash.
//!
//! A [`FlowKey`] names what the flow table remembers a forwarding decision for. The FreeBSD
//! flow table (Li & Macy, PRESTO '09, section 4.1) has two modes, and so does this key:
//!
//! - [`KeyMode::FiveTuple`]: source and destination address, protocol, source and destination
//!   port. One entry per connection; this is what stateful ECMP needs, because two connections
//!   to the same destination may be on different group members.
//! - [`KeyMode::Destination`]: the destination address only (Li & Macy's "hashing just the
//!   destination address" mode, used by `ip_output` to skip the L3 and L2 lookups for recently
//!   seen destinations). One entry per destination; far fewer entries, no per-flow state.
//!
//! A third mode, [`KeyMode::Addresses`] (source and destination, no ports), is what
//! [`FlowKey::l3_only`] produces: the fields an "L3-only" ECMP hash looks at, for networks where
//! fragments or port-less protocols must follow the same path as the rest of their flow.
//!
//! ## One fixed-size representation for both families
//!
//! ```text
//!   FlowKey (40 bytes, align 8)
//!   ┌──────────┬──────────┬──────────┬──────────┬───────┬───────┬─────┬──────┬──────┐
//!   │ src_hi   │ src_lo   │ dst_hi   │ dst_lo   │ sport │ dport │proto│family│ mode │
//!   │ u64      │ u64      │ u64      │ u64      │ u16   │ u16   │ u8  │ u8   │ u8   │
//!   └──────────┴──────────┴──────────┴──────────┴───────┴───────┴─────┴──────┴──────┘
//!   IPv4: the address in the low 32 bits of *_lo, *_hi = 0.   IPv6: the 128 bits split in two.
//! ```
//!
//! Addresses are stored as two `u64` halves rather than one `u128` because a `u128` field
//! makes the struct 16-byte aligned and 48 bytes long; the halves keep it at 40. The family and
//! the mode are part of the key, so an IPv4 key never equals an IPv6 key that happens to hold
//! the same bits, and a destination-only key never equals a 5-tuple key with zero ports. Fields
//! a mode does not use are zero, so equality and hashing are plain field comparisons.
//!
//! ## The hash
//!
//! [`FlowHasher`] is a seeded mixer written for this key, built on the *folded multiply*: the
//! full 128-bit product of two words, its high and low halves XORed, so that every bit of
//! either factor reaches most bits of the result in one multiplication. The seed is expanded
//! into six secret words; the high halves of the two addresses are XORed with two of them and
//! multiplied together, the low halves likewise, and the two results (one with the ports,
//! protocol, family and mode) are multiplied once more:
//!
//! ```text
//!   hi = fold(src_hi ^ k0, dst_hi ^ k1)     lo = fold(src_lo ^ k2, dst_lo ^ k3)
//!   hash = fold(hi ^ meta ^ k4, lo ^ k5)
//! ```
//!
//! Three multiplications, no branches, no loops, no memory reads. An earlier mixer of five
//! multiply–xorshift absorb steps and a two-multiply avalanche cost about 10 cycles per key on
//! an AMD EPYC Zen 5, bound by the multiplier; this one measured 1.02–1.03 times the
//! forwarding rate with the flow table (same run).
//!
//! **Why not SipHash** (the standard library's `DefaultHasher`): SipHash is a keyed PRF built
//! to resist hash-flooding of unbounded chained tables; on a 40-byte key it costs several times
//! more than this mixer, through the streaming `Hasher` interface, on a path whose whole budget
//! is about 50 ns per packet. The flow table does not need that protection: its buckets have a
//! fixed number of ways and evict the least recently used entry, so a flood of colliding keys
//! can only churn the buckets it hits; it can neither lengthen a lookup nor grow memory. The
//! seed (different per worker, e.g. from [`FlowHasher::random`]) still keeps an outsider from
//! predicting which keys share a bucket.
//!
//! The low bits of a hash choose the flow table bucket, the high 32 bits are the bucket
//! signature, and ECMP uses the top bits (see [`crate::ecmp`]).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The address family of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Family {
    /// IPv4: 32-bit addresses.
    V4 = 4,
    /// IPv6: 128-bit addresses.
    V6 = 6,
}

/// Which fields of the packet a key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum KeyMode {
    /// Source and destination address, protocol, ports.
    FiveTuple = 1,
    /// Source and destination address (the L3-only ECMP fields).
    Addresses = 2,
    /// The destination address only.
    Destination = 3,
}

/// The key of a flow table entry: a 5-tuple, an address pair or a destination, IPv4 or IPv6,
/// in one 40-byte representation. Fields the mode does not use are zero.
///
/// The last eight bytes (ports, protocol, family, mode and a zero byte) are laid out as the
/// little-endian word `FlowKey::meta` builds, so that on x86-64 the word is one load.
#[derive(Clone, Copy, Debug, Eq)]
#[repr(C)]
pub struct FlowKey {
    src_hi: u64,
    src_lo: u64,
    dst_hi: u64,
    dst_lo: u64,
    src_port: u16,
    dst_port: u16,
    protocol: u8,
    family: Family,
    mode: KeyMode,
    /// Always 0: a byte of the word [`FlowKey::meta`] reads.
    zero: u8,
}

#[inline]
fn split(a: u128) -> (u64, u64) {
    ((a >> 64) as u64, a as u64)
}

impl FlowKey {
    /// An IPv4 5-tuple key.
    #[inline]
    pub fn v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, src_port: u16, dst_port: u16) -> Self {
        FlowKey {
            src_hi: 0,
            src_lo: u64::from(u32::from(src)),
            dst_hi: 0,
            dst_lo: u64::from(u32::from(dst)),
            src_port,
            dst_port,
            protocol,
            family: Family::V4,
            mode: KeyMode::FiveTuple,
            zero: 0,
        }
    }

    /// An IPv6 5-tuple key.
    #[inline]
    pub fn v6(src: Ipv6Addr, dst: Ipv6Addr, protocol: u8, src_port: u16, dst_port: u16) -> Self {
        let (src_hi, src_lo) = split(u128::from(src));
        let (dst_hi, dst_lo) = split(u128::from(dst));
        FlowKey {
            src_hi,
            src_lo,
            dst_hi,
            dst_lo,
            src_port,
            dst_port,
            protocol,
            family: Family::V6,
            mode: KeyMode::FiveTuple,
            zero: 0,
        }
    }

    /// A 5-tuple key from addresses of either family; `None` if the families differ.
    pub fn five_tuple(
        src: IpAddr,
        dst: IpAddr,
        protocol: u8,
        src_port: u16,
        dst_port: u16,
    ) -> Option<Self> {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Some(Self::v4(s, d, protocol, src_port, dst_port)),
            (IpAddr::V6(s), IpAddr::V6(d)) => Some(Self::v6(s, d, protocol, src_port, dst_port)),
            _ => None,
        }
    }

    /// A destination-only IPv4 key (Li & Macy's second mode).
    #[inline]
    pub fn dst_v4(dst: Ipv4Addr) -> Self {
        let mut k = Self::v4(Ipv4Addr::UNSPECIFIED, dst, 0, 0, 0);
        k.mode = KeyMode::Destination;
        k
    }

    /// A destination-only IPv6 key.
    #[inline]
    pub fn dst_v6(dst: Ipv6Addr) -> Self {
        let mut k = Self::v6(Ipv6Addr::UNSPECIFIED, dst, 0, 0, 0);
        k.mode = KeyMode::Destination;
        k
    }

    /// A destination-only key of either family.
    pub fn destination(dst: IpAddr) -> Self {
        match dst {
            IpAddr::V4(d) => Self::dst_v4(d),
            IpAddr::V6(d) => Self::dst_v6(d),
        }
    }

    /// The address pair of this key (ports and protocol cleared, mode
    /// [`KeyMode::Addresses`]): the fields an L3-only ECMP hash looks at. A destination-only
    /// key stays as it is (it has no source to keep).
    #[inline]
    pub fn l3_only(&self) -> Self {
        match self.mode {
            KeyMode::Destination => *self,
            KeyMode::FiveTuple | KeyMode::Addresses => FlowKey {
                src_port: 0,
                dst_port: 0,
                protocol: 0,
                mode: KeyMode::Addresses,
                ..*self
            },
        }
    }

    /// The address family.
    #[inline]
    pub fn family(&self) -> Family {
        self.family
    }

    /// Which fields the key holds.
    #[inline]
    pub fn mode(&self) -> KeyMode {
        self.mode
    }

    /// The source address (unspecified for a destination-only key).
    pub fn src(&self) -> IpAddr {
        self.addr(self.src_hi, self.src_lo)
    }

    /// The destination address.
    pub fn dst(&self) -> IpAddr {
        self.addr(self.dst_hi, self.dst_lo)
    }

    fn addr(&self, hi: u64, lo: u64) -> IpAddr {
        match self.family {
            // IPv4 keys keep the address in the low 32 bits; the truncation is exact.
            Family::V4 => IpAddr::V4(Ipv4Addr::from(lo as u32)),
            Family::V6 => IpAddr::V6(Ipv6Addr::from((u128::from(hi) << 64) | u128::from(lo))),
        }
    }

    /// The IP protocol (0 unless the mode is [`KeyMode::FiveTuple`]).
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.protocol
    }

    /// The source port (0 unless the mode is [`KeyMode::FiveTuple`]).
    #[inline]
    pub fn src_port(&self) -> u16 {
        self.src_port
    }

    /// The destination port (0 unless the mode is [`KeyMode::FiveTuple`]).
    #[inline]
    pub fn dst_port(&self) -> u16 {
        self.dst_port
    }

    /// Ports, protocol, family and mode packed into one word (for equality and the hash).
    #[inline]
    fn meta(&self) -> u64 {
        u64::from(self.src_port)
            | (u64::from(self.dst_port) << 16)
            | (u64::from(self.protocol) << 32)
            | (u64::from(self.family as u8) << 40)
            | (u64::from(self.mode as u8) << 48)
            | (u64::from(self.zero) << 56)
    }
}

impl PartialEq for FlowKey {
    /// Five word comparisons folded into one test (no branch per field): the flow table
    /// compares a key on every lookup.
    #[inline]
    fn eq(&self, o: &Self) -> bool {
        ((self.src_hi ^ o.src_hi)
            | (self.src_lo ^ o.src_lo)
            | (self.dst_hi ^ o.dst_hi)
            | (self.dst_lo ^ o.dst_lo)
            | (self.meta() ^ o.meta()))
            == 0
    }
}

impl std::hash::Hash for FlowKey {
    /// The same words [`PartialEq`] compares (for `std` maps; the flow table uses
    /// [`FlowHasher`]).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.src_hi);
        state.write_u64(self.src_lo);
        state.write_u64(self.dst_hi);
        state.write_u64(self.dst_lo);
        state.write_u64(self.meta());
    }
}

/// Constants that separate the six keys a seed is expanded into (the hexadecimal digits of
/// pi, as in many hash functions' "nothing up my sleeve" constants).
const KEY_SALT: [u64; 6] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7344,
    0xa409_3822_299f_31d0,
    0x082e_fa98_ec4e_6c89,
    0x4528_21e6_38d0_1377,
    0xbe54_66cf_34e9_0c6c,
];
/// Multipliers of the avalanche that expands a seed into the hash's secret words (odd, with
/// well-spread bits).
const M_FIN1: u64 = 0xbf58_476d_1ce4_e5b9;
const M_FIN2: u64 = 0x94d0_49bb_1331_11eb;

/// A folded multiply: the full 128-bit product of `a` and `b`, its halves XORed. Every bit of
/// either factor reaches most bits of the result, in one multiplication.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// An avalanche: every input bit reaches every output bit (used to expand a seed).
#[inline(always)]
fn avalanche(mut x: u64) -> u64 {
    x ^= x >> 31;
    x = x.wrapping_mul(M_FIN1);
    x ^= x >> 27;
    x = x.wrapping_mul(M_FIN2);
    x ^ (x >> 33)
}

/// The seeded per-packet hash of a [`FlowKey`]. Cheap to copy; one per worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowHasher {
    /// Secret words XORed into the key's words before they are multiplied.
    k: [u64; 6],
    /// The high words' fold when both are zero (every IPv4 key), computed once.
    hi_v4: u64,
}

impl Default for FlowHasher {
    /// The hasher of seed 0 (deterministic; production workers should use a random seed).
    fn default() -> Self {
        Self::new(0)
    }
}

impl FlowHasher {
    /// A hasher for `seed`. Equal seeds give equal hashes (tests, reproducible benchmarks).
    pub fn new(seed: u64) -> Self {
        let mut k = KEY_SALT;
        for (i, w) in k.iter_mut().enumerate() {
            *w = avalanche(seed.rotate_left(11 * i as u32) ^ *w);
        }
        FlowHasher {
            k,
            hi_v4: fold(k[0], k[1]),
        }
    }

    /// A hasher with a seed drawn from the standard library's per-process random keys.
    pub fn random() -> Self {
        Self::new(Self::random_seed())
    }

    /// A random seed (from `std::collections::hash_map::RandomState`, no extra dependency).
    pub fn random_seed() -> u64 {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(0x5eed);
        h.finish()
    }

    /// The hash of every field of `key`.
    #[inline]
    pub fn hash(&self, key: &FlowKey) -> u64 {
        // Three folded multiplies: the high words of both addresses, the low words, then the
        // two results with the ports, protocol and family.
        let k = &self.k;
        // Zero high words (IPv4) fold to a value known in advance: one multiply saved.
        let hi = if key.src_hi | key.dst_hi == 0 {
            self.hi_v4
        } else {
            fold(key.src_hi ^ k[0], key.dst_hi ^ k[1])
        };
        let lo = fold(key.src_lo ^ k[2], key.dst_lo ^ k[3]);
        fold(hi ^ key.meta() ^ k[4], lo ^ k[5])
    }

    /// The L3-only hash: addresses and family, not ports or protocol
    /// (the hash of [`FlowKey::l3_only`]).
    #[inline]
    pub fn hash_l3(&self, key: &FlowKey) -> u64 {
        self.hash(&key.l3_only())
    }

    /// The hash of the fields `fields` selects, for an ECMP group's bucket.
    ///
    /// The flow table's hash ends in one multiply of the port word by a word fixed per host
    /// pair, so its top bits, which pick a resilient group's bucket, step through the
    /// buckets in even strides as consecutive source ports go by: for most seeds that
    /// spreads a host's flows evenly, for some it puts all of them on one member. An
    /// avalanche of the hash (two more multiplies, only when a new flow picks its member)
    /// makes every bit of the bucket depend on every bit of the key
    /// (`tests/ecmp_spread.rs`).
    #[inline]
    pub fn hash_fields(&self, key: &FlowKey, fields: HashFields) -> u64 {
        avalanche(match fields {
            HashFields::FiveTuple => self.hash(key),
            HashFields::L3Only => self.hash_l3(key),
        })
    }
}

/// Which fields an ECMP hash looks at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HashFields {
    /// Addresses, protocol and ports (the default: flows of one host pair spread).
    #[default]
    FiveTuple,
    /// Addresses only (fragments and port-less packets follow their flow's path).
    L3Only,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k4(s: u32, d: u32, p: u8, sp: u16, dp: u16) -> FlowKey {
        FlowKey::v4(Ipv4Addr::from(s), Ipv4Addr::from(d), p, sp, dp)
    }

    #[test]
    fn key_is_forty_bytes() {
        assert_eq!(std::mem::size_of::<FlowKey>(), 40);
        assert_eq!(std::mem::align_of::<FlowKey>(), 8);
        // The word of ports, protocol, family and mode ends the key, its last byte zero
        // whatever made the key.
        assert_eq!(std::mem::offset_of!(FlowKey, src_port), 32);
        assert_eq!(std::mem::offset_of!(FlowKey, zero), 39);
        let v6 = Ipv6Addr::from(u128::MAX);
        for k in [
            k4(u32::MAX, u32::MAX, 255, u16::MAX, u16::MAX),
            FlowKey::v6(v6, v6, 255, u16::MAX, u16::MAX),
            FlowKey::dst_v4(Ipv4Addr::BROADCAST),
            FlowKey::dst_v6(v6),
            k4(u32::MAX, 1, 6, 2, 3).l3_only(),
        ] {
            assert_eq!(k.meta() >> 56, 0, "{k:?}");
        }
        // The family/mode niches make an empty slot free.
        assert_eq!(std::mem::size_of::<Option<FlowKey>>(), 40);
    }

    #[test]
    fn accessors_round_trip() {
        let k = k4(0x0a00_0001, 0xc000_0207, 6, 1234, 80);
        assert_eq!(k.src(), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(k.dst(), IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)));
        assert_eq!((k.protocol(), k.src_port(), k.dst_port()), (6, 1234, 80));
        assert_eq!((k.family(), k.mode()), (Family::V4, KeyMode::FiveTuple));

        let s: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let d: Ipv6Addr = "2001:db8:ffff:1::2:3".parse().unwrap();
        let k6 = FlowKey::v6(s, d, 17, 53, 5353);
        assert_eq!(k6.src(), IpAddr::V6(s));
        assert_eq!(k6.dst(), IpAddr::V6(d));
        assert_eq!(k6.family(), Family::V6);
        assert_eq!(
            FlowKey::five_tuple(s.into(), d.into(), 17, 53, 5353),
            Some(k6)
        );
        assert_eq!(
            FlowKey::five_tuple(Ipv4Addr::LOCALHOST.into(), d.into(), 17, 1, 2),
            None
        );

        let dk = FlowKey::destination(d.into());
        assert_eq!(dk.mode(), KeyMode::Destination);
        assert_eq!(dk.src(), IpAddr::V6(Ipv6Addr::UNSPECIFIED));
        assert_eq!(dk.dst(), IpAddr::V6(d));
    }

    #[test]
    fn families_and_modes_never_collide_as_keys() {
        // The same bits in an IPv4 and an IPv6 key, and a 5-tuple with zero ports against a
        // destination-only key: all different keys, all different hashes.
        let v4 = FlowKey::dst_v4(Ipv4Addr::from(1));
        let v6 = FlowKey::dst_v6(Ipv6Addr::from(1));
        let ft = k4(0, 1, 0, 0, 0);
        let pair = ft.l3_only();
        assert_ne!(v4, v6);
        assert_ne!(v4, ft);
        assert_ne!(ft, pair);
        let h = FlowHasher::new(7);
        let hashes = [h.hash(&v4), h.hash(&v6), h.hash(&ft), h.hash(&pair)];
        for (i, a) in hashes.iter().enumerate() {
            for b in hashes.iter().skip(i + 1) {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn l3_only_ignores_ports_and_protocol() {
        let h = FlowHasher::new(99);
        let a = k4(1, 2, 6, 1000, 80);
        let b = k4(1, 2, 17, 2000, 53);
        assert_ne!(h.hash(&a), h.hash(&b));
        assert_eq!(h.hash_l3(&a), h.hash_l3(&b));
        assert_eq!(
            h.hash_fields(&a, HashFields::L3Only),
            h.hash_fields(&b, HashFields::L3Only)
        );
        assert_ne!(
            h.hash_fields(&a, HashFields::FiveTuple),
            h.hash_fields(&b, HashFields::FiveTuple)
        );
        // The ECMP hash is the flow hash mixed again, not the flow hash itself.
        assert_eq!(
            h.hash_fields(&a, HashFields::FiveTuple),
            avalanche(h.hash(&a))
        );
        // A different source is a different address pair.
        assert_ne!(h.hash_l3(&a), h.hash_l3(&k4(3, 2, 6, 1000, 80)));
        // Destination-only keys are their own L3 form.
        let d = FlowKey::dst_v4(Ipv4Addr::from(2));
        assert_eq!(d.l3_only(), d);
    }

    #[test]
    fn seed_changes_the_hash() {
        let k = k4(1, 2, 6, 3, 4);
        assert_eq!(FlowHasher::new(1).hash(&k), FlowHasher::new(1).hash(&k));
        assert_ne!(FlowHasher::new(1).hash(&k), FlowHasher::new(2).hash(&k));
        // src and dst are not interchangeable.
        let h = FlowHasher::new(1);
        assert_ne!(h.hash(&k4(1, 2, 6, 3, 4)), h.hash(&k4(2, 1, 6, 3, 4)));
        assert_ne!(h.hash(&k4(1, 2, 6, 3, 4)), h.hash(&k4(1, 2, 6, 4, 3)));
    }

    /// The precomputed fold of IPv4's zero high words changes no hash: every key hashes as
    /// the three folds of the module doc, high words zero or not.
    #[test]
    fn ipv4_keys_hash_as_the_full_three_folds() {
        let h = FlowHasher::new(0xfeed);
        let full = |key: &FlowKey| {
            let k = &h.k;
            let hi = fold(key.src_hi ^ k[0], key.dst_hi ^ k[1]);
            let lo = fold(key.src_lo ^ k[2], key.dst_lo ^ k[3]);
            fold(hi ^ key.meta() ^ k[4], lo ^ k[5])
        };
        let v6 = |s: u128, d: u128| FlowKey::v6(Ipv6Addr::from(s), Ipv6Addr::from(d), 17, 53, 9);
        for key in [
            k4(1, 2, 6, 3, 4),
            k4(0, 0, 0, 0, 0),
            k4(u32::MAX, 7, 17, 65535, 1),
            FlowKey::dst_v4(Ipv4Addr::new(192, 0, 2, 1)),
            k4(1, 2, 6, 3, 4).l3_only(),
            v6(1, 2),
            v6(1 << 64, 0),
            v6(0, 1 << 64),
            v6(u128::MAX, u128::MAX),
        ] {
            assert_eq!(h.hash(&key), full(&key), "{key:?}");
        }
    }

    /// Flipping one input bit flips about half of the output bits, for every input bit of an
    /// IPv4 and an IPv6 5-tuple.
    #[test]
    fn avalanche_on_every_input_bit() {
        let h = FlowHasher::new(0x1234_5678);
        let base = FlowKey::v6(
            "2001:db8:1:2::10".parse().unwrap(),
            "2001:db8:3:4::20".parse().unwrap(),
            6,
            40000,
            443,
        );
        let mut variants = Vec::new();
        for bit in 0..64 {
            variants.push(FlowKey {
                src_hi: base.src_hi ^ (1 << bit),
                ..base
            });
            variants.push(FlowKey {
                src_lo: base.src_lo ^ (1 << bit),
                ..base
            });
            variants.push(FlowKey {
                dst_hi: base.dst_hi ^ (1 << bit),
                ..base
            });
            variants.push(FlowKey {
                dst_lo: base.dst_lo ^ (1 << bit),
                ..base
            });
        }
        for bit in 0..16 {
            variants.push(FlowKey {
                src_port: base.src_port ^ (1 << bit),
                ..base
            });
            variants.push(FlowKey {
                dst_port: base.dst_port ^ (1 << bit),
                ..base
            });
        }
        for bit in 0..8 {
            variants.push(FlowKey {
                protocol: base.protocol ^ (1 << bit),
                ..base
            });
        }
        let h0 = h.hash(&base);
        let mut total = 0u64;
        for v in &variants {
            let flipped = (h.hash(v) ^ h0).count_ones();
            assert!((12..=52).contains(&flipped), "{flipped} bits flipped");
            total += u64::from(flipped);
        }
        let mean = total as f64 / variants.len() as f64;
        assert!((29.0..=35.0).contains(&mean), "mean {mean}");
    }

    /// Sequential addresses (the worst case for a weak mixer) spread evenly over buckets.
    #[test]
    fn sequential_keys_spread_evenly() {
        let h = FlowHasher::new(3);
        const BUCKETS: usize = 1024;
        const KEYS: u32 = 1024 * 64;
        let mut by_dst = vec![0u32; BUCKETS];
        let mut by_port = vec![0u32; BUCKETS];
        for i in 0..KEYS {
            let a = h.hash(&FlowKey::dst_v4(Ipv4Addr::from(0x0a00_0000 + i)));
            by_dst[(a as usize) & (BUCKETS - 1)] += 1;
            let b = h.hash(&k4(0x0a00_0001, 0x0a00_0002, 17, i as u16, 53));
            by_port[(b as usize) & (BUCKETS - 1)] += 1;
        }
        // Mean 64 per bucket, standard deviation 8: nothing beyond 7 sigma.
        for counts in [&by_dst, &by_port] {
            let max = counts.iter().copied().max().unwrap();
            let min = counts.iter().copied().min().unwrap();
            assert!(max < 120 && min > 10, "min {min} max {max}");
        }
    }

    #[test]
    fn random_seeds_differ() {
        // Two RandomStates of one process share keys but advance a counter.
        assert_ne!(FlowHasher::random_seed(), FlowHasher::random_seed());
    }
}
