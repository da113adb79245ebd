//! A `loom` model of the in-place FIB's publication and reclamation (see `vfsr_fib::live`).
//!
//! Run it with
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p vfsr-fib --release --test loom
//! ```
//!
//! The model keeps what the protocol rests on and nothing else: storage blocks whose slots the
//! writer fills before it switches a direct-pointing entry to them with one `Release` store,
//! readers that load the entry with `Acquire` and read the block, snapshots that readers hold
//! for a batch, and the rule that a block replaced while snapshot `S` was published is reused
//! only once no reader holds `S` (the writer owns the last handle: `Arc::get_mut`). The
//! published snapshot sits behind a lock here, standing for `arc-swap`, whose guards the
//! writer's swap counts into the `Arc` (its own guarantee, not modelled).
//!
//! Loom runs every interleaving of a reader's batch with the writer's two publications and
//! fails if a reader reads a slot while the writer writes it (a block reused too early) or
//! sees a block other than as written before its entry was stored.

#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

/// Storage blocks of two slots; block `b` holds the pair (v, v) for the value it was last
/// filled with.
const BLOCKS: usize = 3;

struct Store {
    slots: [[UnsafeCell<u32>; 2]; BLOCKS],
    /// The direct-pointing entry: the number of the block in use.
    direct: AtomicU32,
}

/// What readers load: a version and the shared storage.
struct Snapshot {
    version: u32,
    store: Arc<Store>,
}

impl Store {
    fn new() -> Self {
        let block = |v: u32| [UnsafeCell::new(v), UnsafeCell::new(v)];
        Store {
            slots: [block(10), block(0), block(0)],
            direct: AtomicU32::new(0),
        }
    }

    /// Fills block `b` with `v`. The caller guarantees no reader can reach it.
    fn fill(&self, b: usize, v: u32) {
        for s in &self.slots[b] {
            // SAFETY (of the model): the protocol under test guarantees exclusive access;
            // loom reports it if not.
            s.with_mut(|p| unsafe { *p = v });
        }
    }

    /// One lookup: the entry, then both slots of its block.
    fn lookup(&self) -> (u32, u32) {
        let b = self.direct.load(Ordering::Acquire) as usize;
        let r = |k: usize| self.slots[b][k].with(|p| unsafe { *p });
        (r(0), r(1))
    }
}

/// The writer: two changes, each into a fresh block switched in by one store, then a
/// publication; a replaced block is reused only after the snapshot published while it was
/// replaced is held by nobody else (when `wait` is false, at once: the bug the model must
/// catch).
fn writer(store: &Arc<Store>, published: &Mutex<Arc<Snapshot>>, wait: bool) {
    // Change 1: block 1 replaces block 0.
    store.fill(1, 11);
    store.direct.store(1, Ordering::Release);
    let new = Arc::new(Snapshot {
        version: 1,
        store: Arc::clone(store),
    });
    let mut old = std::mem::replace(&mut *published.lock().unwrap(), new);
    // Change 2: into block 0 when its readers have left (or at once), else block 2.
    let reuse = !wait || Arc::get_mut(&mut old).is_some();
    drop(old);
    let b = if reuse { 0 } else { 2 };
    store.fill(b, 12);
    store.direct.store(b as u32, Ordering::Release);
    let new = Arc::new(Snapshot {
        version: 2,
        store: Arc::clone(store),
    });
    *published.lock().unwrap() = new;
}

/// A reader's batch: load a snapshot, look up twice, drop it. Every answer is a whole block
/// of one of the values written, never older than the snapshot.
fn reader(published: &Mutex<Arc<Snapshot>>) {
    let snap = Arc::clone(&published.lock().unwrap());
    for _ in 0..2 {
        let (a, b) = snap.store.lookup();
        assert_eq!(a, b, "a block seen half written");
        assert!((10..=12).contains(&a), "a value never written: {a}");
        assert!(
            a >= 10 + snap.version,
            "older than snapshot {}",
            snap.version
        );
    }
}

fn model(wait: bool) {
    loom::model(move || {
        let store = Arc::new(Store::new());
        let published = Arc::new(Mutex::new(Arc::new(Snapshot {
            version: 0,
            store: Arc::clone(&store),
        })));
        let p = Arc::clone(&published);
        let r = thread::spawn(move || reader(&p));
        writer(&store, &published, wait);
        r.join().unwrap();
    });
}

#[test]
fn a_block_is_reused_only_after_its_readers_left() {
    model(true);
}

#[test]
#[should_panic]
fn reusing_a_block_at_once_is_caught() {
    model(false);
}
