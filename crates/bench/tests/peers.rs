//! Every peer must answer exactly like a brute-force longest-prefix match over the same routes.
//!
//! The tables are random but nested the way real ones are (more-specifics under shorter
//! prefixes), hold a default route, host routes, repeated prefixes (the last one wins) and
//! withdrawals (next hop 0). DPDK's peers are checked only with the `dpdk` feature, and are
//! skipped, with the reason printed, where DPDK's EAL cannot start.

/// Says why a test is skipped on the real stderr, past the test harness's output capture.
#[cfg(feature = "dpdk")]
macro_rules! skip_note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use vfsr_bench::peers::{self, PeerErrorKind, PeerKey};
use vfsr_lpm::{canonicalize, Key, Lpm, NextHop, Prefix, Route, NO_ROUTE};

/// splitmix64: small, seedable, good enough for test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn key<K: Key>(&mut self) -> K {
        let v = ((self.next() as u128) << 64) | self.next() as u128;
        K::from_u128_left(v)
    }
}

/// A random table of about `n` routes of family `K`; next hops are 1..=64 except that every
/// `big_every`-th route gets one in 1..=`big` (0 turns that off).
fn table<K: Key>(rng: &mut Rng, n: usize, big_every: usize, big: u32) -> Vec<Route<K>> {
    let bits = K::BITS;
    // Prefix lengths users see: short aggregates, the usual /16../24 (v4) or /32../48 (v6),
    // and longer ones down to host routes.
    let lens: Vec<u8> = if bits == 32 {
        vec![
            1, 4, 8, 12, 16, 18, 20, 22, 23, 24, 24, 24, 25, 26, 28, 30, 31, 32,
        ]
    } else {
        vec![
            1, 8, 16, 20, 24, 28, 29, 32, 32, 36, 40, 44, 48, 48, 48, 52, 56, 60, 64, 64, 80, 96,
            112, 120, 127, 128,
        ]
    };
    let mut out: Vec<Route<K>> = Vec::with_capacity(n + 8);
    let nh = |rng: &mut Rng, i: usize| -> NextHop {
        if i.checked_rem(big_every) == Some(0) {
            1 + rng.below(big as u64) as NextHop
        } else {
            1 + rng.below(64) as NextHop
        }
    };
    out.push(Route::new(Prefix::new_masked(K::ZERO, 0), nh(rng, 1)));
    for i in 0..n {
        let len = lens[rng.below(lens.len() as u64) as usize];
        let addr: K = if !out.is_empty() && rng.below(3) != 0 {
            // A more-specific of (or a sibling next to) an existing route.
            let base = out[rng.below(out.len() as u64) as usize].prefix;
            let noise: K = rng.key();
            let keep = base.len().min(len);
            let base_bits = base.addr().to_u128_left();
            let noise_bits = noise.to_u128_left();
            let mask = if keep == 0 {
                0
            } else {
                u128::MAX << (128 - keep as u32)
            };
            K::from_u128_left((base_bits & mask) | (noise_bits & !mask))
        } else {
            rng.key()
        };
        out.push(Route::new(Prefix::new_masked(addr, len), nh(rng, i)));
    }
    // Host routes at both ends of the address space.
    out.push(Route::new(Prefix::new_masked(K::ZERO, bits), nh(rng, 3)));
    out.push(Route::new(
        Prefix::new_masked(K::from_u128_left(u128::MAX), bits),
        nh(rng, 5),
    ));
    // Repeat a few prefixes with new next hops (the later route wins) and withdraw a few.
    for _ in 0..n / 50 {
        let p = out[rng.below(out.len() as u64) as usize].prefix;
        out.push(Route::new(p, nh(rng, 7)));
    }
    for _ in 0..n / 100 {
        let p = out[1 + rng.below(out.len() as u64 - 1) as usize].prefix;
        out.push(Route::new(p, NO_ROUTE));
    }
    out
}

/// Longest-prefix match by scanning every route.
fn brute<K: Key>(canon: &[Route<K>], addr: K) -> NextHop {
    let mut best: Option<&Route<K>> = None;
    for r in canon {
        if r.prefix.contains(addr) && best.is_none_or(|b| r.prefix.len() > b.prefix.len()) {
            best = Some(r);
        }
    }
    best.map_or(NO_ROUTE, |r| r.nexthop)
}

/// Addresses to look up: every route's first and last address and their neighbours, and
/// random ones.
fn queries<K: Key>(rng: &mut Rng, routes: &[Route<K>], random: usize) -> Vec<K> {
    let mut q = Vec::with_capacity(routes.len() * 4 + random);
    for r in routes {
        let first = r.prefix.addr().to_u128_left();
        let span = u128::MAX.checked_shr(r.prefix.len() as u32).unwrap_or(0);
        let last = first | span;
        let unit = 1u128 << (128 - K::BITS as u32);
        for v in [
            first,
            last,
            first.wrapping_sub(unit),
            last.wrapping_add(unit),
        ] {
            q.push(K::from_u128_left(v));
        }
    }
    for _ in 0..random {
        q.push(rng.key());
    }
    q
}

/// Checks `lpm` against the brute-force answers, through `lookup` and through `lookup_bulk`
/// (with batch lengths that are not multiples of anything and an output shorter than the input).
fn check<K: Key>(lpm: &dyn Lpm<K>, canon: &[Route<K>], q: &[K], want: &[NextHop]) {
    let name = lpm.name();
    for (a, w) in q.iter().zip(want) {
        let got = lpm.lookup(*a);
        assert_eq!(got, *w, "{name}: lookup({a:?})");
    }
    let mut out = vec![u32::MAX; q.len()];
    let mut at = 0;
    let mut step = 1;
    while at < q.len() {
        let end = (at + step).min(q.len());
        lpm.lookup_bulk(&q[at..end], &mut out[at..end]);
        at = end;
        step = step * 3 + 1;
    }
    for (i, (o, w)) in out.iter().zip(want).enumerate() {
        assert_eq!(*o, *w, "{name}: lookup_bulk at {i}, address {:?}", q[i]);
    }
    // Only min(addrs, out) addresses are looked up.
    let mut short = vec![u32::MAX; 5];
    lpm.lookup_bulk(&q[..q.len().min(9)], &mut short);
    assert_eq!(&short[..], &want[..5], "{name}: short output");
    assert!(!canon.is_empty());
}

fn check_all_peers<K: PeerKey>(seed: u64, n: usize, big_every: usize, big: u32) {
    let mut rng = Rng(seed);
    let routes = table::<K>(&mut rng, n, big_every, big);
    let canon = canonicalize(&routes);
    assert!(canon.iter().any(|r| r.prefix.is_empty()));
    assert!(canon.iter().any(|r| r.prefix.len() == K::BITS));
    let q = queries(&mut rng, &canon, 4000);
    let want: Vec<NextHop> = q.iter().map(|a| brute(&canon, *a)).collect();

    let list = peers::peers::<K>();
    assert!(list.len() >= 3);
    for p in list {
        match (p.build)(&routes) {
            Ok(lpm) => {
                assert_eq!(lpm.name(), p.name);
                check(lpm.as_ref(), &canon, &q, &want);
                let mem = lpm.memory_bytes();
                println!(
                    "{} {}: {} routes ok, memory_bytes {mem}",
                    K::FAMILY,
                    p.name,
                    canon.len()
                );
            }
            Err(e) if e.kind == PeerErrorKind::Unavailable && p.name.starts_with("rte_") => {
                vfsr_skip::skip(format!("{} {}: {e}", K::FAMILY, p.name));
            }
            Err(e) => panic!("{} {}: {e}", K::FAMILY, p.name),
        }
    }
}

#[test]
fn v4_peers_match_brute_force() {
    check_all_peers::<u32>(0x5eed_0004, 3000, 0, 0);
}

#[test]
fn v6_peers_match_brute_force() {
    check_all_peers::<u128>(0x5eed_0006, 3000, 0, 0);
}

/// Next hops past 15 bits push DPDK's FIBs to 4-byte entries; the Rust peers do not care.
#[test]
fn v4_peers_with_large_next_hops() {
    check_all_peers::<u32>(0x5eed_0014, 2000, 10, 1_000_000);
}

#[test]
fn v6_peers_with_large_next_hops() {
    check_all_peers::<u128>(0x5eed_0016, 2000, 10, 1_000_000);
}

#[test]
fn empty_tables_answer_no_route() {
    for p in peers::peers_v4() {
        if let Ok(lpm) = (p.build)(&[]) {
            assert_eq!(lpm.lookup(0x0a00_0001), NO_ROUTE, "{}", p.name);
        }
    }
    for p in peers::peers_v6() {
        if let Ok(lpm) = (p.build)(&[]) {
            assert_eq!(lpm.lookup(1), NO_ROUTE, "{}", p.name);
        }
    }
}

#[test]
fn registry_names_are_the_report_names() {
    let v4: Vec<&str> = peers::peers_v4().iter().map(|p| p.name).collect();
    let v6: Vec<&str> = peers::peers_v6().iter().map(|p| p.name).collect();
    for n in ["prefix-trie", "ip_network_table", "rotonda-store"] {
        assert!(v4.contains(&n) && v6.contains(&n), "{n}");
    }
    if cfg!(feature = "dpdk") {
        assert_eq!(&v4[3..], ["rte_lpm", "rte_fib", "rte_fib_avx512"]);
        assert_eq!(&v6[3..], ["rte_fib6", "rte_fib6_avx512"]);
    } else {
        assert_eq!(v4.len(), 3);
        assert_eq!(v6.len(), 3);
        assert!(peers::dpdk_available().is_err());
    }
    let built = peers::build_all::<u32>(&[]);
    assert_eq!(built.len(), v4.len());
}

#[cfg(feature = "dpdk")]
mod dpdk {
    use super::*;
    use vfsr_bench::peers::dpdk::{self as d, RteFib, RteFib6, RteLpm};

    fn eal_or_skip() -> bool {
        match d::dpdk_available() {
            Ok(()) => true,
            Err(e) => {
                skip_note!("skipping DPDK test: {e}");
                false
            }
        }
    }

    /// The computed tbl8 counts are enough: no table needs its second, larger attempt, and a
    /// 2-byte table is chosen for small next hops.
    #[test]
    fn tbl8_sizing_needs_no_rebuild() {
        if !eal_or_skip() {
            return;
        }
        let mut rng = Rng(0xd1d0);
        let v4 = table::<u32>(&mut rng, 5000, 0, 0);
        let v6 = table::<u128>(&mut rng, 5000, 0, 0);
        let lpm = RteLpm::build(&v4).expect("rte_lpm");
        assert!(!lpm.resized());
        let fib = RteFib::build(&v4).expect("rte_fib");
        assert!(!fib.resized());
        assert_eq!(fib.entry_bytes(), 2);
        let fib6 = RteFib6::build(&v6).expect("rte_fib6");
        assert!(!fib6.resized());
        assert_eq!(fib6.entry_bytes(), 2);
        println!(
            "tbl8 groups: rte_lpm {}, rte_fib {}, rte_fib6 {}",
            lpm.tbl8_groups(),
            fib.tbl8_groups(),
            fib6.tbl8_groups()
        );
    }

    #[test]
    fn large_next_hops_use_four_byte_entries() {
        if !eal_or_skip() {
            return;
        }
        let p = Prefix::new_masked(0x0a00_0000u32, 8);
        let fib = RteFib::build(&[Route::new(p, 40_000)]).expect("rte_fib");
        assert_eq!(fib.entry_bytes(), 4);
        assert_eq!(fib.lookup(0x0a01_0203), 40_000);
        let too_big = RteLpm::build(&[Route::new(p, 1 << 24)]);
        assert!(matches!(too_big, Err(e) if e.kind == PeerErrorKind::Build));
    }

    #[test]
    fn default_route_only_on_rte_lpm() {
        if !eal_or_skip() {
            return;
        }
        let d0 = Route::new(Prefix::new_masked(0u32, 0), 9);
        let lpm = RteLpm::build(&[d0]).expect("rte_lpm");
        assert_eq!(lpm.lookup(0), 9);
        assert_eq!(lpm.lookup(u32::MAX), 9);
        // A /1 given by the table wins over the expanded default route.
        let half = Route::new(Prefix::new_masked(0x8000_0000u32, 1), 3);
        let lpm = RteLpm::build(&[half, d0]).expect("rte_lpm");
        assert_eq!(lpm.lookup(0x8000_0001), 3);
        assert_eq!(lpm.lookup(0x7fff_ffff), 9);
    }
}
