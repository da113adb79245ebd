//! Software RSS: the Toeplitz hash of Microsoft's Receive Side Scaling specification, for
//! interfaces with one receive queue and several workers.
//!
//! The hash of an input of `n` bytes is the XOR of one 32-bit window of the key for every set
//! bit of the input (the window starting at that bit's position). It is computed here with a
//! table per input byte position (`table[i][byte]` = the XOR of the windows of that byte's
//! set bits), so a 12-byte IPv4 4-tuple costs 12 loads and XORs; the tables (36 positions,
//! enough for an IPv6 4-tuple) take 36 KiB.
//!
//! Inputs, as NICs build them: source address, destination address, then source and
//! destination port for TCP and UDP (non-first fragments and other protocols hash the
//! addresses only, so all fragments of a packet land together).
//!
//! Symmetric mode sorts the two endpoints (address, then port) before hashing, so both
//! directions of a flow hash alike with the standard key. (The other known way, a key made of
//! one repeated 16-bit pattern such as `0x6d5a`, also works but throws away most of the
//! key's entropy; sorting keeps the standard key and its published test vectors.)
//!
//! A hash picks a worker through a 128-entry indirection table, as a NIC's does.

use std::net::{Ipv4Addr, Ipv6Addr};

use vfsr_wire::ethernet::ethertype;
use vfsr_wire::{ip_proto, l4, EthernetFrame, Ipv4Packet, Ipv6Packet};

/// The key of the RSS specification's examples, the default of most NIC drivers.
pub const STANDARD_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// Longest input: two IPv6 addresses and two ports.
const MAX_INPUT: usize = 36;
/// Indirection table entries.
pub const INDIRECTION: usize = 128;

/// A Toeplitz hasher with its indirection table.
#[derive(Clone)]
pub struct Rss {
    table: Box<[[u32; 256]; MAX_INPUT]>,
    indirection: [u16; INDIRECTION],
    symmetric: bool,
}

impl std::fmt::Debug for Rss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rss")
            .field("symmetric", &self.symmetric)
            .finish_non_exhaustive()
    }
}

/// The 32-bit window of `key` starting at bit `bit` (bits past the end read as 0).
fn window(key: &[u8; 40], bit: usize) -> u32 {
    let mut w: u64 = 0;
    for i in 0..5 {
        w = (w << 8) | u64::from(key.get(bit / 8 + i).copied().unwrap_or(0));
    }
    ((w >> (8 - bit % 8)) & 0xffff_ffff) as u32
}

/// The hash bit by bit, as the specification writes it (for tests).
pub fn toeplitz_reference(key: &[u8; 40], input: &[u8]) -> u32 {
    let mut h = 0;
    for (i, b) in input.iter().enumerate() {
        for k in 0..8 {
            if b & (0x80 >> k) != 0 {
                h ^= window(key, 8 * i + k);
            }
        }
    }
    h
}

impl Rss {
    /// A hasher with `key` spreading over `workers` (at least 1), symmetric or not.
    pub fn new(key: &[u8; 40], workers: usize, symmetric: bool) -> Rss {
        let mut table = Box::new([[0u32; 256]; MAX_INPUT]);
        for (i, row) in table.iter_mut().enumerate() {
            let w: [u32; 8] = std::array::from_fn(|k| window(key, 8 * i + k));
            for (b, slot) in row.iter_mut().enumerate() {
                let mut h = 0;
                for (k, wk) in w.iter().enumerate() {
                    if b & (0x80 >> k) != 0 {
                        h ^= wk;
                    }
                }
                *slot = h;
            }
        }
        let workers = workers.clamp(1, usize::from(u16::MAX));
        let indirection = std::array::from_fn(|i| (i % workers) as u16);
        Rss {
            table,
            indirection,
            symmetric,
        }
    }

    /// The hash of raw input bytes (at most 36 are used).
    #[inline]
    pub fn hash(&self, input: &[u8]) -> u32 {
        let mut h = 0;
        for (row, &b) in self.table.iter().zip(input) {
            // A row has 256 entries: any byte indexes it.
            h ^= row.get(usize::from(b)).copied().unwrap_or(0);
        }
        h
    }

    /// IPv4 addresses and, if given, ports.
    pub fn hash_v4(&self, src: Ipv4Addr, dst: Ipv4Addr, ports: Option<(u16, u16)>) -> u32 {
        let (mut s, mut d) = (src.octets(), dst.octets());
        let (mut sp, mut dp) = ports.unwrap_or((0, 0));
        if self.symmetric && (s, sp) > (d, dp) {
            std::mem::swap(&mut s, &mut d);
            std::mem::swap(&mut sp, &mut dp);
        }
        let [s0, s1, s2, s3] = s;
        let [d0, d1, d2, d3] = d;
        let [p0, p1] = sp.to_be_bytes();
        let [q0, q1] = dp.to_be_bytes();
        let b = [s0, s1, s2, s3, d0, d1, d2, d3, p0, p1, q0, q1];
        let n = if ports.is_some() { b.len() } else { 8 };
        self.hash(b.get(..n).unwrap_or(&b))
    }

    /// IPv6 addresses and, if given, ports.
    pub fn hash_v6(&self, src: Ipv6Addr, dst: Ipv6Addr, ports: Option<(u16, u16)>) -> u32 {
        let (mut s, mut d) = (src.octets(), dst.octets());
        let (mut sp, mut dp) = ports.unwrap_or((0, 0));
        if self.symmetric && (s, sp) > (d, dp) {
            std::mem::swap(&mut s, &mut d);
            std::mem::swap(&mut sp, &mut dp);
        }
        let mut b = [0u8; 36];
        let port_bytes = [sp.to_be_bytes(), dp.to_be_bytes()].concat();
        for (slot, byte) in b.iter_mut().zip(s.iter().chain(&d).chain(&port_bytes)) {
            *slot = *byte;
        }
        let n = if ports.is_some() { b.len() } else { 32 };
        self.hash(b.get(..n).unwrap_or(&b))
    }

    /// The hash of an Ethernet frame's flow, `None` if it is not IPv4 or IPv6 or its IP
    /// header is malformed (read through `vfsr-wire`'s checked views).
    pub fn hash_frame(&self, f: &[u8]) -> Option<u32> {
        let eth = EthernetFrame::new_checked(f).ok()?;
        match eth.ethertype() {
            ethertype::IPV4 => {
                let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
                let proto = ip.protocol();
                // A fragmented packet hashes by addresses only, first fragment included.
                let ports =
                    if (proto == ip_proto::TCP || proto == ip_proto::UDP) && !ip.is_fragment() {
                        l4::ports(ip.payload())
                    } else {
                        None
                    };
                Some(self.hash_v4(ip.src_addr(), ip.dst_addr(), ports))
            }
            ethertype::IPV6 => {
                let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
                let nh = ip.next_header();
                let ports = if nh == ip_proto::TCP || nh == ip_proto::UDP {
                    l4::ports(ip.payload())
                } else {
                    None
                };
                Some(self.hash_v6(ip.src_addr(), ip.dst_addr(), ports))
            }
            _ => None,
        }
    }

    /// The worker a hash goes to.
    #[inline]
    pub fn queue_of(&self, hash: u32) -> usize {
        // The remainder is below the table's length.
        self.indirection
            .get(hash as usize % INDIRECTION)
            .map_or(0, |&q| usize::from(q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }
    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// The verification table of the RSS specification ("Verifying the RSS Hash
    /// Calculation"): source, destination, hash with ports, hash of the addresses only.
    #[test]
    fn specification_vectors_ipv4() {
        let r = Rss::new(&STANDARD_KEY, 4, false);
        let cases = [
            (
                "66.9.149.187",
                2794,
                "161.142.100.80",
                1766,
                0x51cc_c178,
                0x323e_8fc2,
            ),
            (
                "199.92.111.2",
                14230,
                "65.69.140.83",
                4739,
                0xc626_b0ea,
                0xd718_262a,
            ),
            (
                "24.19.198.95",
                12898,
                "12.22.207.184",
                38024,
                0x5c2b_394a,
                0xd2d0_a5de,
            ),
            (
                "38.27.205.30",
                48228,
                "209.142.163.6",
                2217,
                0xafc7_327f,
                0x8298_9176,
            ),
            (
                "153.39.163.191",
                44251,
                "202.188.127.2",
                1303,
                0x10e8_28a2,
                0x5d18_09c5,
            ),
        ];
        for (s, sp, d, dp, with, without) in cases {
            assert_eq!(r.hash_v4(v4(s), v4(d), Some((sp, dp))), with, "{s} -> {d}");
            assert_eq!(r.hash_v4(v4(s), v4(d), None), without, "{s} -> {d}");
        }
    }

    #[test]
    fn specification_vectors_ipv6() {
        let r = Rss::new(&STANDARD_KEY, 4, false);
        let cases = [
            (
                "3ffe:2501:200:1fff::7",
                2794,
                "3ffe:2501:200:3::1",
                1766,
                0x4020_7d3d,
                0x2cc1_8cd5,
            ),
            (
                "3ffe:501:8::260:97ff:fe40:efab",
                14230,
                "ff02::1",
                4739,
                0xdde5_1bbf,
                0x0f0c_461c,
            ),
            (
                "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
                44251,
                "fe80::200:f8ff:fe21:67cf",
                38024,
                0x02d1_feef,
                0x4b61_e985,
            ),
        ];
        for (s, sp, d, dp, with, without) in cases {
            assert_eq!(r.hash_v6(v6(s), v6(d), Some((sp, dp))), with, "{s} -> {d}");
            assert_eq!(r.hash_v6(v6(s), v6(d), None), without, "{s} -> {d}");
        }
    }

    #[test]
    fn tables_match_the_bitwise_definition() {
        let r = Rss::new(&STANDARD_KEY, 1, false);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for n in 0..=36 {
            for _ in 0..50 {
                let input: Vec<u8> = (0..n)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                assert_eq!(r.hash(&input), toeplitz_reference(&STANDARD_KEY, &input));
            }
        }
    }

    #[test]
    fn symmetric_mode_hashes_both_directions_alike() {
        let sym = Rss::new(&STANDARD_KEY, 7, true);
        let asym = Rss::new(&STANDARD_KEY, 7, false);
        let mut differ = 0;
        let mut x: u32 = 12345;
        for _ in 0..5000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let a = Ipv4Addr::from(x);
            let b = Ipv4Addr::from(x.rotate_left(13) ^ 0x5555);
            let (p, q) = ((x >> 3) as u16, (x >> 17) as u16);
            assert_eq!(
                sym.hash_v4(a, b, Some((p, q))),
                sym.hash_v4(b, a, Some((q, p)))
            );
            let a6 = Ipv6Addr::from(u128::from(x) << 64 | 7);
            let b6 = Ipv6Addr::from(u128::from(x.rotate_left(7)) << 32 | 9);
            assert_eq!(
                sym.hash_v6(a6, b6, Some((p, q))),
                sym.hash_v6(b6, a6, Some((q, p)))
            );
            if asym.hash_v4(a, b, Some((p, q))) != asym.hash_v4(b, a, Some((q, p))) {
                differ += 1;
            }
        }
        assert!(differ > 4000, "the plain hash is not symmetric ({differ})");
    }

    fn frame_v4(proto: u8, frag: u16, sport: u16, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12] = 0x08;
        let mut ip = vec![0x45, 0, 0, 24, 0, 0, 0, 0, 64, proto, 0, 0];
        ip[6..8].copy_from_slice(&frag.to_be_bytes());
        ip.extend_from_slice(&[66, 9, 149, 187, 161, 142, 100, 80]);
        ip.extend_from_slice(&sport.to_be_bytes());
        ip.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&ip);
        f
    }

    #[test]
    fn frames_hash_like_their_tuples_and_fragments_stay_together() {
        let r = Rss::new(&STANDARD_KEY, 4, false);
        assert_eq!(r.hash_frame(&frame_v4(6, 0, 2794, 1766)), Some(0x51cc_c178));
        // First fragment, later fragment and ICMP: addresses only.
        assert_eq!(r.hash_frame(&frame_v4(17, 0x2000, 1, 2)), Some(0x323e_8fc2));
        assert_eq!(r.hash_frame(&frame_v4(17, 0x0010, 1, 2)), Some(0x323e_8fc2));
        assert_eq!(r.hash_frame(&frame_v4(1, 0, 1, 2)), Some(0x323e_8fc2));
        // A header cut short, or one that claims more than the frame holds, is not hashed.
        let full = frame_v4(6, 0, 2794, 1766);
        for n in 0..full.len() {
            assert_eq!(r.hash_frame(&full[..n]), None, "{n} bytes");
        }
        let mut bad = full.clone();
        bad[14] = 0x65;
        assert_eq!(r.hash_frame(&bad), None, "version 6 in an IPv4 frame");
        assert_eq!(r.hash_frame(&[0u8; 60]), None);
    }

    #[test]
    fn the_indirection_table_uses_every_worker() {
        let r = Rss::new(&STANDARD_KEY, 3, true);
        let mut seen = [0usize; 3];
        for h in 0..INDIRECTION as u32 {
            seen[r.queue_of(h)] += 1;
        }
        assert!(seen.iter().all(|n| *n >= 42), "{seen:?}");
        assert_eq!(Rss::new(&STANDARD_KEY, 0, true).queue_of(99), 0);
    }
}
