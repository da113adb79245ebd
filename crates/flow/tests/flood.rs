//! A random-source flood against a flow table: ten times its capacity in new keys.
//!
//! Memory stays what it was at construction, every entry pushed out is counted as an
//! eviction, every key left out as a refusal, and flows that keep sending (touched every
//! tick) survive the flood, with or without the eviction protection window.

use std::net::Ipv4Addr;

use vfsr_flow::{FlowConfig, FlowKey, FlowTable, Insert, Tick};

/// A small xorshift generator: the test needs no crate for randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Without the protection window: plain least-recently-used eviction.
#[test]
fn random_source_flood_keeps_memory_and_recent_flows() {
    const CAPACITY: usize = 4096;
    // About one recent flow per bucket: a bucket of eight recent flows would have to give
    // one up to each new key (every way in use, all equally recent).
    const RECENT: u32 = 500;
    const PER_TICK: usize = 32;
    let mut t: FlowTable<u32> = FlowTable::new(FlowConfig {
        capacity: CAPACITY,
        idle_timeout: Tick::MAX / 2,
        seed: 0xf100d,
        protect: 0,
    });
    let memory = t.memory_bytes();
    let dst = Ipv4Addr::new(192, 0, 2, 80);
    let recent: Vec<FlowKey> = (0..RECENT)
        .map(|i| {
            FlowKey::v4(
                Ipv4Addr::new(10, 1, (i >> 8) as u8, i as u8),
                dst,
                6,
                50000,
                443,
            )
        })
        .collect();
    for (i, k) in recent.iter().enumerate() {
        t.insert(*k, i as u32, 0);
    }

    let mut rng = Rng(0x1234_5678_9abc_def1);
    let flood = 10 * CAPACITY;
    let mut evicted_reported = 0u64;
    let mut now: Tick = 0;
    for n in 0..flood {
        if n % PER_TICK == 0 {
            now += 1;
            // The established flows send a packet every tick.
            for (i, k) in recent.iter().enumerate() {
                assert_eq!(
                    t.get(k, now),
                    Some(i as u32),
                    "recent flow {i} lost at tick {now}"
                );
            }
        }
        let r = rng.next();
        let src = Ipv4Addr::from(r as u32);
        let key = FlowKey::v4(src, dst, 17, (r >> 32) as u16, 53);
        if let Insert::Evicted { .. } = t.insert(key, u32::MAX, now) {
            evicted_reported += 1;
        }
    }

    assert_eq!(t.memory_bytes(), memory, "the flood grew the table");
    assert_eq!(t.capacity(), CAPACITY);
    assert_eq!(t.len(), CAPACITY, "every way is in use after the flood");
    let c = *t.counters();
    assert_eq!((c.expirations, c.refusals), (0, 0));
    assert_eq!(c.evictions, evicted_reported);
    // Every insert either still sits in the table or was evicted.
    assert_eq!(c.inserts - c.evictions, t.len() as u64);
    assert!(c.evictions >= (flood + RECENT as usize - CAPACITY) as u64);
    for (i, k) in recent.iter().enumerate() {
        assert_eq!(t.get(k, now), Some(i as u32));
    }
}

/// With the default window (1,000 ticks): a table full of flows that keep sending refuses
/// every new key and loses none of them; once they stop, new keys replace them as they fall
/// idle past the window.
#[test]
fn a_flood_cannot_push_out_flows_used_within_the_window() {
    const CAPACITY: usize = 1024;
    let mut t: FlowTable<u32> = FlowTable::new(FlowConfig {
        capacity: CAPACITY,
        seed: 7,
        ..FlowConfig::default()
    });
    assert_eq!(t.protect(), vfsr_flow::DEFAULT_PROTECT);
    let mut rng = Rng(0xabcdef);
    // Fill every way with an established flow.
    let mut live: Vec<(FlowKey, u32)> = Vec::new();
    let mut n = 0u32;
    while t.len() < CAPACITY {
        let k = FlowKey::dst_v4(Ipv4Addr::from(rng.next() as u32));
        if matches!(t.insert(k, n, 0), Insert::New) {
            live.push((k, n));
        }
        n += 1;
    }
    // Filling it, a key whose bucket was already full was refused (all its ways in use now).
    let refused_filling = t.counters().refusals;
    assert_eq!(refused_filling, u64::from(n) - CAPACITY as u64);
    // Ten times the capacity in new keys over 500 ticks; the flows send every tick.
    let flood = 10 * CAPACITY as u64;
    for i in 0..flood {
        let now = 1 + (i / 20) as Tick;
        if i % 20 == 0 {
            for (k, v) in &live {
                assert_eq!(t.get(k, now), Some(*v), "an established flow lost at {now}");
            }
        }
        let k = FlowKey::v4(
            Ipv4Addr::from(rng.next() as u32),
            Ipv4Addr::LOCALHOST,
            17,
            9,
            53,
        );
        assert_eq!(t.insert(k, u32::MAX, now), Insert::Refused);
    }
    let c = *t.counters();
    assert_eq!((c.refusals - refused_filling, c.evictions), (flood, 0));
    assert_eq!(t.len(), CAPACITY);
    // The flows stop; a window later the flood's keys go in, evicting them.
    let later = 1 + (flood / 20) as Tick + vfsr_flow::DEFAULT_PROTECT;
    let k = FlowKey::dst_v4(Ipv4Addr::new(198, 51, 100, 1));
    assert!(matches!(t.insert(k, 1, later), Insert::Evicted { .. }));
    assert_eq!(t.get(&k, later), Some(1));
    assert_eq!(t.counters().evictions, 1);
}

#[test]
fn flood_without_recent_traffic_replaces_idle_flows_and_stays_bounded() {
    let mut t: FlowTable<u32> = FlowTable::with_capacity(1024);
    let memory = t.memory_bytes();
    let old = FlowKey::dst_v4(Ipv4Addr::new(198, 51, 100, 1));
    t.insert(old, 1, 0);
    let mut rng = Rng(99);
    // A new key every 8 ticks: a bucket's least recently used entry is thousands of ticks old
    // when the next key comes, past the window but within the idle timeout.
    for n in 0..10 * 1024u32 {
        let k = FlowKey::dst_v4(Ipv4Addr::from(rng.next() as u32));
        t.insert(k, n, 1 + n * 8);
    }
    assert_eq!(t.memory_bytes(), memory);
    assert_eq!(t.len(), t.capacity());
    let c = *t.counters();
    assert!(c.evictions >= 9 * 1024 - c.refusals, "{c:?}");
    assert!(c.refusals < 64, "{c:?}");
    // The idle flow was the least recently used of its bucket long ago.
    assert_eq!(t.peek(&old, 1 + 10 * 1024 * 8), None);
}
