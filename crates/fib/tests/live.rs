//! The live FIB against fresh builds, and under concurrent readers.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use vfsr_fib::{FibError, LiveFib, Publish};
use vfsr_lpm::golden::Golden;
use vfsr_lpm::poptrie::{Poptrie, PoptrieConfig};
use vfsr_lpm::{Key, Lpm, LpmBuild, LpmUpdate, NextHop, Prefix, Route, NO_ROUTE};

fn v4(a: u32, len: u8, nh: NextHop) -> Route<u32> {
    Route::new(Prefix::new_masked(a, len), nh)
}

/// Every address of `addrs` answers as a fresh golden build of the FIB's table, in the
/// published snapshot.
fn check_published<K: Key, E: LpmUpdate<K> + Clone>(fib: &LiveFib<K, E>, addrs: &[K]) {
    let golden = Golden::build(&fib.table().to_routes(), &()).unwrap();
    let snap = fib.reader().load();
    let mut out = vec![NO_ROUTE; addrs.len()];
    snap.engine.lookup_bulk(addrs, &mut out);
    for (a, got) in addrs.iter().zip(out) {
        assert_eq!(
            got,
            golden.lookup(*a),
            "address {a:?}, version {}",
            snap.version
        );
    }
}

/// Random nested IPv4 routes around a few bases.
fn route4() -> impl Strategy<Value = Route<u32>> {
    (
        prop::sample::select(vec![0u32, 0x0a00_0000, 0x0a01_0000, 0xc0a8_0000]),
        any::<u32>(),
        0u32..=32,
        0u8..=32,
        0u32..40,
    )
        .prop_map(|(base, noise, shift, len, nh)| {
            v4(base ^ noise.checked_shr(shift).unwrap_or(0), len, nh)
        })
}

fn run_sequence<E: LpmUpdate<u32> + Clone>(
    config: E::Config,
    table: &[Route<u32>],
    steps: &[(Route<u32>, bool)],
    eager_limit: usize,
) {
    let mut fib = LiveFib::<u32, E>::new(table, config).unwrap();
    fib.set_eager_limit(eager_limit);
    let mut addrs: Vec<u32> = table.iter().map(|r| r.prefix.addr()).collect();
    addrs.extend(steps.iter().flat_map(|(r, _)| {
        let a = r.prefix.addr();
        [
            a,
            a.wrapping_sub(1),
            a | (u32::MAX >> r.prefix.len().min(31)),
        ]
    }));
    check_published(&fib, &addrs);
    for (r, publish) in steps {
        fib.set(r.prefix, r.nexthop).unwrap();
        if *publish {
            fib.publish().unwrap();
            check_published(&fib, &addrs);
        }
    }
    fib.publish().unwrap();
    check_published(&fib, &addrs);
    // A second publication with nothing pending keeps the version; the spare copy, one batch
    // behind until now, must catch up when it is published next.
    let v = fib.version();
    fib.publish().unwrap();
    assert_eq!(fib.version(), v);
    if let Some((r, _)) = steps.first() {
        fib.set(r.prefix, NO_ROUTE).unwrap();
        fib.publish().unwrap();
        check_published(&fib, &addrs);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn published_snapshots_match_a_fresh_build(
        table in prop::collection::vec(route4(), 0..60),
        steps in prop::collection::vec((route4(), any::<bool>()), 0..60),
    ) {
        // Changes applied as they come, bursts left to the publication, and a mix.
        for eager in [usize::MAX, 0, 3] {
            run_sequence::<Poptrie<u32>>(PoptrieConfig::default(), &table, &steps, eager);
            run_sequence::<Poptrie<u32>>(PoptrieConfig::flat(16), &table, &steps, eager);
            run_sequence::<Golden<u32>>((), &table, &steps, eager);
        }
    }
}

#[test]
fn next_hops_the_engine_cannot_store_are_refused_and_change_nothing() {
    let mut fib =
        LiveFib::<u32, Poptrie<u32>>::new(&[v4(0x0a00_0000, 8, 5)], PoptrieConfig::default())
            .unwrap();
    let p = Prefix::new_masked(0x0a00_0000u32, 8);
    assert_eq!(
        fib.set(p, 70_000),
        Err(FibError::NextHopTooLarge {
            nexthop: 70_000,
            max: 65_535
        })
    );
    assert_eq!(fib.pending(), 0);
    assert_eq!(fib.stats().rejected, 1);
    fib.publish().unwrap();
    assert_eq!(fib.reader().load().engine.lookup(0x0a01_0101), 5);
    assert!(
        LiveFib::<u32, Poptrie<u32>>::new(&[v4(0, 0, 1 << 20)], PoptrieConfig::default()).is_err()
    );
}

#[test]
fn poll_publishes_after_the_delay_bound() {
    let mut fib = LiveFib::<u32, Poptrie<u32>>::new(&[], PoptrieConfig::default()).unwrap();
    fib.set_max_delay(Duration::from_millis(5));
    let t0 = Instant::now();
    fib.set(Prefix::new_masked(0x0a00_0000, 8), 3).unwrap();
    assert!(!fib.poll(t0).unwrap(), "not due yet");
    assert_eq!(fib.reader().load().engine.lookup(0x0a00_0001), NO_ROUTE);
    let due = fib.deadline().unwrap();
    assert!(due <= Instant::now() + Duration::from_millis(5));
    assert!(fib.poll(due).unwrap());
    assert_eq!(fib.reader().load().engine.lookup(0x0a00_0001), 3);
    assert_eq!(fib.deadline(), None);
    assert_eq!(fib.reader().load().version, 1);
}

#[test]
fn a_run_of_changes_publishes_as_asked_and_ends_published() {
    let changes: Vec<Route<u32>> = (0..200u32)
        .map(|i| v4(0x0a00_0000 | i << 8, 24, 1 + i % 7))
        .chain([v4(0x0a00_0500, 24, NO_ROUTE)])
        .collect();
    let expect = |fib: &LiveFib<u32, Poptrie<u32>>| {
        let s = fib.reader().load();
        assert_eq!(s.engine.lookup(0x0a00_0001), 1);
        assert_eq!(s.engine.lookup(0x0a00_c701), 1 + 199 % 7);
        assert_eq!(
            s.engine.lookup(0x0a00_0501),
            9,
            "withdrawn: the /8 under it"
        );
        assert_eq!(fib.pending(), 0);
    };
    let base = [v4(0x0a00_0000, 8, 9)];
    let mut each = LiveFib::<u32, Poptrie<u32>>::new(&base, PoptrieConfig::default()).unwrap();
    each.apply_changes(&changes, Publish::Each).unwrap();
    expect(&each);
    assert_eq!(each.stats().publications, changes.len() as u64);
    // A bound no run reaches: the one publication is the settle at the end.
    let mut batched = LiveFib::<u32, Poptrie<u32>>::new(&base, PoptrieConfig::default()).unwrap();
    batched.set_max_delay(Duration::from_secs(3600));
    batched.apply_changes(&changes, Publish::Batched).unwrap();
    expect(&batched);
    assert_eq!(batched.stats().publications, 1);
    // A refused change stops the run; the ones before it stay.
    let bad = [
        v4(0x0b00_0000, 8, 4),
        v4(0x0c00_0000, 8, 70_000),
        v4(0x0d00_0000, 8, 4),
    ];
    assert!(batched.apply_changes(&bad, Publish::Batched).is_err());
    batched.publish().unwrap();
    let s = batched.reader().load();
    assert_eq!(s.engine.lookup(0x0b00_0001), 4);
    assert_eq!(s.engine.lookup(0x0d00_0001), NO_ROUTE);
}

#[test]
fn a_full_load_replaces_the_table() {
    let mut fib =
        LiveFib::<u32, Poptrie<u32>>::new(&[v4(0, 0, 1)], PoptrieConfig::default()).unwrap();
    fib.set(Prefix::new_masked(0x0a00_0000, 8), 3).unwrap();
    fib.load(&[v4(0xc0a8_0000, 16, 4)]).unwrap();
    assert_eq!(fib.pending(), 0);
    let s = fib.reader().load();
    assert_eq!(s.engine.lookup(0x0a00_0001), NO_ROUTE);
    assert_eq!(s.engine.lookup(0xc0a8_0101), 4);
    drop(s);
    fib.set(Prefix::new_masked(0xc0a8_0000, 16), 5).unwrap();
    fib.publish().unwrap();
    fib.set(Prefix::new_masked(0x0a00_0000, 8), 6).unwrap();
    fib.publish().unwrap();
    let s = fib.reader().load();
    assert_eq!(
        (s.engine.lookup(0xc0a8_0101), s.engine.lookup(0x0a00_0001)),
        (5, 6)
    );
}

/// The next hop the writer of [`stress`] gives its group in round `r` (round 0: the table as
/// built; `NO_ROUTE` rounds leave the group to the 30.0.0.0/8 under it).
fn group_hop(r: u32) -> NextHop {
    if r.is_multiple_of(5) {
        2
    } else {
        1 + r % 700
    }
}

/// Reader threads look up addresses whose routes never change (some in slots the writer
/// churns, so their lookups walk paths being copied and replaced) and a group of addresses
/// whose routes the writer changes every round, while a writer churns thousands of other
/// routes. No reader may ever see a wrong answer or a missing one, and a group address
/// answers as of a round between the last one published before the lookup began and the
/// last one started before it ended: the table before or after each change, never a mix of
/// blocks or a block reused under the lookup.
fn stress<E: LpmUpdate<u32> + Clone + 'static>(config: E::Config, what: &str) {
    // Stable: 10.s.0.0/16 -> 100 + s for s in 0..64 (and a 10.0.0.0/8 over them), and
    // 20.4s.7.7/32 -> 600 + s among the churned routes.
    let mut table = vec![v4(0x0a00_0000, 8, 1), v4(0x1e00_0000, 8, 2)];
    for s in 0..64u32 {
        table.push(v4(0x0a00_0000 | s << 16, 16, 100 + s));
        table.push(v4(0x1400_0707 | s << 18, 32, 600 + s));
    }
    // A /32 in each of the group's two direct slots makes them nodes with children.
    table.push(v4(0x1e00_0081, 32, 3));
    table.push(v4(0x1e00_4081, 32, 3));
    let mut fib = LiveFib::<u32, E>::new(&table, config).unwrap();
    fib.set_max_delay(Duration::from_micros(200));
    // Churned: /24s and /32s under 20.0.0.0/8, and a group of eight prefixes under
    // 30.0.0.0/8 (/24 and /28, in two direct slots) that always carry the same next hop.
    let group: Vec<u32> = (0..8u32).map(|i| 0x1e00_0000 | i << 12).collect();
    let group_len = |i: usize| if i.is_multiple_of(2) { 24 } else { 28 };
    let stop = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicU64::new(0));
    // The last round fully published, and the last round whose changes began.
    let done = Arc::new(AtomicU32::new(0));
    let started = Arc::new(AtomicU32::new(0));
    let mut readers = Vec::new();
    for t in 0..3u32 {
        let r = fib.reader();
        let group = group.clone();
        let (stop, checked) = (Arc::clone(&stop), Arc::clone(&checked));
        let (done, started) = (Arc::clone(&done), Arc::clone(&started));
        readers.push(std::thread::spawn(move || -> Result<(), String> {
            let mut addrs = Vec::new();
            let mut stable = Vec::new();
            for s in 0..64u32 {
                addrs.push(0x0a00_0000 | s << 16 | (t * 7919 + s * 31) & 0xffff);
                stable.push(100 + s);
                addrs.push(0x1400_0707 | s << 18);
                stable.push(600 + s);
            }
            addrs.push(0x0aff_0001); // under the /8 only
            stable.push(1);
            let mut out = vec![0; addrs.len()];
            let mut gout = vec![0; group.len()];
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Read before the snapshot: a snapshot of two copies is as old as its load.
                let lo = done.load(Ordering::SeqCst);
                let snap = r.load();
                snap.engine.lookup_bulk(&addrs, &mut out);
                if out != stable {
                    return Err(format!(
                        "stable answers changed at version {}: {out:?}",
                        snap.version
                    ));
                }
                snap.engine.lookup_bulk(&group, &mut gout);
                let hi = started.load(Ordering::SeqCst);
                for &g in &gout {
                    if !(lo..=hi).any(|r| group_hop(r) == g) {
                        return Err(format!(
                            "group answer {g} not of rounds {lo}..={hi} at version {}: {gout:?}",
                            snap.version
                        ));
                    }
                }
                n += 1;
            }
            checked.fetch_add(n, Ordering::Relaxed);
            Ok(())
        }));
    }
    let mut x = 0x2545_f491_u32;
    let t0 = Instant::now();
    let mut round = 0u32;
    while t0.elapsed() < Duration::from_millis(1500) {
        round += 1;
        started.store(round, Ordering::SeqCst);
        for _ in 0..200 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let len = if x & 1 == 0 { 24 } else { 32 };
            let nh = if x & 6 == 0 {
                NO_ROUTE
            } else {
                1 + (x >> 20) % 500
            };
            let p = Prefix::new_masked(0x1400_0000 | (x & 0x00ff_ffff), len);
            if len == 32 && p.addr() & 0x0003_ffff == 0x0707 {
                continue; // a stable /32
            }
            fib.set(p, nh).unwrap();
        }
        let g = if round.is_multiple_of(5) {
            NO_ROUTE
        } else {
            group_hop(round)
        };
        for (i, &a) in group.iter().enumerate() {
            fib.set(Prefix::new_masked(a, group_len(i)), g).unwrap();
        }
        if fib.poll(Instant::now()).unwrap() {
            done.store(round, Ordering::SeqCst);
        }
        if round.is_multiple_of(3) {
            fib.publish().unwrap();
            done.store(round, Ordering::SeqCst);
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap().unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    // Few when readers outnumber the cores (a preempted reader holds its copy), never none.
    assert!(fib.stats().publications > 10, "{what}: {:?}", fib.stats());
    assert!(
        checked.load(Ordering::Relaxed) > 1000,
        "{what}: readers hardly ran"
    );
    fib.publish().unwrap();
    check_published(&fib, &[0x1400_0000, 0x1e00_0001, 0x0a05_0505, 0x1400_0707]);
}

#[test]
fn readers_never_see_a_wrong_answer_while_writers_churn_poptrie() {
    stress::<Poptrie<u32>>(PoptrieConfig::default(), "poptrie");
}

#[test]
fn readers_never_see_a_wrong_answer_while_writers_churn_two_copies() {
    stress::<Golden<u32>>((), "golden");
}
