//! Reader threads load snapshots while the control plane churns the table: a generation
//! always names one MAC and one usability, and no snapshot shows an entry with a MAC in an
//! unusable state (or the reverse).

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use vfsr_neigh::{Event, Mac, NeighborConfig, NeighborTable};

#[test]
fn readers_under_churn_see_consistent_generations() {
    let mut table: NeighborTable<Ipv4Addr, u32> = NeighborTable::new(NeighborConfig {
        capacity: 64,
        ..NeighborConfig::default()
    });
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let r = table.reader();
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut seen: HashMap<u64, (Option<Mac>, bool)> = HashMap::new();
                let mut loads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let snap = r.load();
                    for n in 0..80u8 {
                        if let Some(e) = snap.lookup(&Ipv4Addr::new(10, 0, 0, n)) {
                            let usable = e.state.is_usable();
                            assert_eq!(usable, e.mac.is_some());
                            assert!(snap.is_current(e.id, e.gen));
                            let prev = *seen.entry(e.gen).or_insert((e.mac, usable));
                            assert_eq!(prev, (e.mac, usable), "gen {} changed meaning", e.gen);
                        }
                    }
                    loads += 1;
                }
                loads
            })
        })
        .collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut now = 0u64;
    for i in 0..200_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let addr = Ipv4Addr::new(10, 0, 0, (x % 80) as u8);
        let mac = Mac([2, 0, 0, 0, 0, ((x >> 8) % 4) as u8]);
        match (x >> 16) % 6 {
            0 => drop(table.resolve(addr, i, now)),
            1 => drop(table.apply(addr, Event::LinkLayerHint(mac), now)),
            2 => drop(table.apply(
                addr,
                Event::Advert {
                    mac: Some(mac),
                    solicited: true,
                    override_flag: (x >> 20) & 1 == 0,
                },
                now,
            )),
            3 => drop(table.expire(now)),
            4 => drop(table.remove(&addr)),
            _ => now += 700,
        }
        if i % 16 == 0 {
            table.publish();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
}
