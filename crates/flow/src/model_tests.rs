//! The flow table against a plain `HashMap` model under random operation sequences.
//!
//! The model holds `key → (value, last_used)` and judges expiry the same way the table does
//! (idle for more than the timeout = absent). The table may drop entries the model keeps only
//! by eviction, and every eviction is visible: [`FlowTable::insert`] returns the evicted entry,
//! [`FlowTable::resize_with`] reports each one, and after a [`FlowTable::resolve`] miss at most
//! one entry may have gone (the counter says whether one did). The model removes what was
//! evicted, so after every step the two must agree exactly: every pool key the table returns
//! has the model's value, and every key the model holds (not evicted, not expired) is found.
//!
//! A new key is refused exactly when the model says its bucket (the table's hash, masked)
//! holds [`WAYS`] live keys all used within the protection window; the model then leaves it
//! out too.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use crate::key::FlowKey;
use crate::table::{FlowConfig, FlowTable, Insert, Lookup, Tick, WAYS};

const TIMEOUT: Tick = 50;
/// Shorter than the timeout and than the largest step of the clock, so that refusals,
/// evictions and expiries all happen.
const PROTECT: Tick = 20;
const POOL: usize = 48;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Val {
    data: u32,
    version: u32,
}

#[derive(Clone, Debug)]
enum Op {
    Insert(usize, u32),
    Lookup(usize),
    Resolve(usize, u32),
    Advance(Tick),
    Gc(usize),
    Invalidate(usize),
    BumpVersion,
    Resize(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..POOL, any::<u32>()).prop_map(|(k, d)| Op::Insert(k, d)),
        6 => (0..POOL).prop_map(Op::Lookup),
        4 => (0..POOL, any::<u32>()).prop_map(|(k, d)| Op::Resolve(k, d)),
        3 => (0..40u32).prop_map(Op::Advance),
        2 => (1..12usize).prop_map(Op::Gc),
        2 => (0..POOL).prop_map(Op::Invalidate),
        1 => Just(Op::BumpVersion),
        1 => prop::sample::select(vec![8usize, 16, 32, 64]).prop_map(Op::Resize),
    ]
}

/// Keys of every family and mode.
fn pool() -> Vec<FlowKey> {
    (0..POOL as u32)
        .map(|i| match i % 4 {
            0 => FlowKey::v4(Ipv4Addr::from(i), Ipv4Addr::new(10, 0, 0, 1), 6, 1000, 80),
            1 => FlowKey::dst_v4(Ipv4Addr::from(i)),
            2 => FlowKey::v6(
                Ipv6Addr::from(u128::from(i) << 64),
                Ipv6Addr::LOCALHOST,
                17,
                53,
                i as u16,
            ),
            _ => FlowKey::dst_v6(Ipv6Addr::from(u128::from(i))),
        })
        .collect()
}

struct Model {
    map: HashMap<FlowKey, (Val, Tick)>,
    now: Tick,
    version: u32,
    evictions: u64,
    refusals: u64,
}

impl Model {
    /// The live (present, not expired) entry of `key`.
    fn live(&self, key: &FlowKey) -> Option<Val> {
        let &(v, last) = self.map.get(key)?;
        (self.now.wrapping_sub(last) <= TIMEOUT).then_some(v)
    }

    /// Whether the table must refuse `key` (absent) now: its bucket holds a live key in every
    /// way, each used within the window.
    fn refuses(&self, t: &FlowTable<Val>, key: &FlowKey) -> bool {
        let bucket = |k: &FlowKey| (t.hash(k) as usize) & (t.buckets() - 1);
        let b = bucket(key);
        let ages: Vec<Tick> = self
            .map
            .iter()
            .filter(|(k, _)| bucket(k) == b && self.live(k).is_some())
            .map(|(_, &(_, last))| self.now.wrapping_sub(last))
            .collect();
        ages.len() == WAYS && ages.iter().all(|&age| age < PROTECT)
    }

    fn evict(&mut self, key: &FlowKey, value: Val) {
        assert_eq!(
            self.live(key),
            Some(value),
            "evicted an entry the model lacks"
        );
        self.map.remove(key);
        self.evictions += 1;
    }
}

fn run(capacity: usize, seed: u64, ops: &[Op]) {
    let keys = pool();
    let mut t: FlowTable<Val> = FlowTable::new(FlowConfig {
        capacity,
        idle_timeout: TIMEOUT,
        seed,
        protect: PROTECT,
    });
    let mut m = Model {
        map: HashMap::new(),
        now: 0,
        version: 0,
        evictions: 0,
        refusals: 0,
    };
    for op in ops {
        let cur = m.version;
        let now = m.now;
        match *op {
            Op::Insert(k, data) => {
                let key = keys[k];
                let val = Val { data, version: cur };
                let refuse = m.live(&key).is_none() && m.refuses(&t, &key);
                let got = t.insert(key, val, now);
                assert_eq!(matches!(got, Insert::Refused), refuse, "{got:?}");
                match got {
                    Insert::New => assert_eq!(m.live(&key), None),
                    Insert::Replaced(old) => assert_eq!(m.live(&key), Some(old)),
                    Insert::Evicted { key: ek, value } => {
                        assert_eq!(m.live(&key), None);
                        m.evict(&ek, value);
                    }
                    Insert::Refused => m.refusals += 1,
                }
                if !refuse {
                    m.map.insert(key, (val, now));
                }
            }
            Op::Lookup(k) => {
                let key = keys[k];
                let got = t.lookup(&key, now, |v| v.version == cur);
                match m.live(&key) {
                    None => assert_eq!(got, Lookup::Miss),
                    Some(v) if v.version == cur => {
                        assert_eq!(got, Lookup::Hit(v));
                        m.map.insert(key, (v, now));
                    }
                    Some(v) => assert_eq!(got, Lookup::Stale(v)),
                }
            }
            Op::Resolve(k, data) => {
                let key = keys[k];
                let cache = data % 5 != 0;
                let new = Val { data, version: cur };
                let mut seen = None;
                let evictions_before = t.counters().evictions;
                let refusals_before = t.counters().refusals;
                let refuse = m.live(&key).is_none() && m.refuses(&t, &key);
                let got = t.resolve(
                    &key,
                    now,
                    |v| v.version == cur,
                    |old| {
                        seen = Some(old.copied());
                        cache.then_some(new)
                    },
                );
                match m.live(&key) {
                    Some(v) if v.version == cur => {
                        assert_eq!((got, seen), (Some(v), None));
                        m.map.insert(key, (v, now));
                    }
                    Some(v) => {
                        assert_eq!(seen, Some(Some(v)));
                        assert_eq!(got, cache.then_some(new));
                        if cache {
                            m.map.insert(key, (new, now));
                        } else {
                            m.map.remove(&key);
                        }
                    }
                    None => {
                        assert_eq!(seen, Some(None));
                        assert_eq!(got, cache.then_some(new));
                        if cache {
                            // At most one other entry of the bucket may have been evicted.
                            let gone: Vec<FlowKey> = keys
                                .iter()
                                .filter(|k| **k != key)
                                .filter(|k| m.live(k).is_some() && t.peek(k, now).is_none())
                                .copied()
                                .collect();
                            let counted = t.counters().evictions - evictions_before;
                            assert_eq!(gone.len() as u64, counted);
                            for k in gone {
                                let v = m.live(&k).unwrap();
                                m.evict(&k, v);
                            }
                            let refused = t.counters().refusals - refusals_before;
                            assert_eq!(refused, u64::from(refuse));
                            if refuse {
                                m.refusals += 1;
                            } else {
                                m.map.insert(key, (new, now));
                            }
                        }
                    }
                }
            }
            Op::Advance(dt) => m.now = m.now.wrapping_add(dt),
            Op::Gc(budget) => {
                let r = t.gc(now, budget);
                assert!(r.work <= budget + 1);
                assert!(r.visited <= t.buckets());
            }
            Op::Invalidate(k) => {
                let key = keys[k];
                let got = t.invalidate(&key);
                match (m.map.get(&key), m.live(&key)) {
                    (_, Some(v)) => assert_eq!(got, Some(v)),
                    (None, None) => assert_eq!(got, None),
                    // Expired: the table may or may not have removed it already.
                    (Some(&(v, _)), None) => assert!(got.is_none() || got == Some(v)),
                }
                m.map.remove(&key);
            }
            Op::BumpVersion => m.version += 1,
            Op::Resize(cap) => {
                let mut dropped = Vec::new();
                let n = t.resize_with(cap, now, |k, v| dropped.push((k, v)));
                assert_eq!(n, dropped.len());
                for (k, v) in dropped {
                    m.evict(&k, v);
                }
            }
        }
        t.check_invariants();
        assert!(t.len() <= t.capacity());
        for key in &keys {
            assert_eq!(t.peek(key, m.now), m.live(key), "key {key:?} after {op:?}");
        }
        assert_eq!(t.counters().evictions, m.evictions);
        assert_eq!(t.counters().refusals, m.refusals);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Small tables (1 to 8 buckets for 48 keys) so evictions and shared buckets are common.
    #[test]
    fn table_matches_the_model(
        capacity in prop::sample::select(vec![8usize, 16, 32, 64]),
        seed in any::<u64>(),
        ops in prop::collection::vec(op(), 1..200),
    ) {
        run(capacity, seed, &ops);
    }
}

#[test]
fn model_smoke_sequence() {
    use Op::*;
    run(
        8,
        3,
        &[
            Insert(0, 1),
            Insert(1, 2),
            Lookup(0),
            BumpVersion,
            Lookup(0),
            Resolve(0, 7),
            Advance(60),
            Lookup(1),
            Gc(3),
            Resize(64),
            Invalidate(0),
        ],
    );
}
