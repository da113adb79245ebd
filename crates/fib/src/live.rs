//! The live FIB of one address family: a lookup engine that changes while readers look up.
//!
//! ## One copy, changed in place (Poptrie)
//!
//! An engine that can be updated under its readers ([`LpmUpdate::share`]: the default
//! engine, Poptrie) is kept once. Readers load a small [`Snapshot`] through an [`ArcSwap`]: a
//! version and a handle on the engine's storage, which the writer changes in place:
//!
//! ```text
//!   readers ──load()──▶ ArcSwap ──▶ Snapshot v5 ─┐
//!                                                ├──▶ the one engine (shared storage)
//!   writer: LiveFib ── update in place ──────────┘    old blocks retired, not freed
//!
//!   publish():  apply the pending changes (each switched in by one atomic store);
//!               swap in Snapshot v6 (same storage); keep v5 with the group of blocks
//!               retired while v5 was published; once no reader holds v5 (nor anything
//!               older), that group is reused
//! ```
//!
//! A lookup during a change answers from the table before it or after it: the engine builds
//! each change into fresh blocks and switches them in with one store (see the Poptrie's
//! `update.rs`). A reader that loaded snapshot v5 may still be in blocks replaced while v5 was
//! published; a reader that loads v6 loads every entry after those replacements, so it can
//! only be in newer blocks. Hence the rule above, checked with `Arc::get_mut` on the replaced
//! snapshot (`arc-swap` counts the readers' guards into the `Arc` when it is swapped out). A
//! reader holds a snapshot for one batch of lookups, so blocks wait about one publication
//! (at most the delay bound) before reuse; readers never wait, and neither does the writer.
//! `crates/fib/tests/loom.rs` is a `loom` model of this protocol.
//!
//! One copy means half the memory and half the update work, and readers keep their cache
//! lines across publications: only the lines a change rewrote are new to them.
//!
//! ## Two copies, published by pointer swap (the other engines)
//!
//! Engines that cannot be changed under readers (LC-trie, radix, DIR-24-8) are kept twice.
//! One copy is *published*: readers load it through the [`ArcSwap`] and look up in it without
//! any lock. The other, the *spare*, belongs to the writer alone, who changes it in place
//! through [`LpmUpdate::update`], then publishes it with one atomic pointer swap:
//!
//! ```text
//!   readers ──load()──▶ ArcSwap ──▶ copy A (published)      copy B (spare, writer only)
//!
//!   set(prefix, nh):  RouteMap updated; once no reader holds B any more:
//!                       B catches up with the last publication's changes, copied from A
//!                       (LpmUpdate::update_from), then takes this change (update)
//!   publish():        wait until no reader holds B; apply what B still lacks;
//!                     swap A ⇄ B (readers now load B; A is the spare, one batch behind)
//! ```
//!
//! A reader holds a copy for one batch of lookups; a lookup sees the old copy or the new one,
//! never a half-applied change. Each change reaches both copies: the spare takes it as it is
//! made (while the table entries it touched are still in the cache), the other copy copies
//! the result at the next publication, by which time that copy's readers have long moved on,
//! so the writer almost never waits. Readers never wait at all. The pointer swap and the
//! count of readers still holding a copy come from the `arc-swap` crate (whose guards are
//! paid back into the `Arc` count on swap), so this module adds no concurrency primitive of
//! its own.
//!
//! The price of two copies: after every publication the readers work in the other copy,
//! whose cache lines they do not hold. `vfsr fib bench` measures it (the reader's share of
//! its idle rate, at two delay bounds).
//!
//! ## Batches with a bounded delay
//!
//! Changes are collected and published together: [`LiveFib::poll`] publishes once the oldest
//! unpublished change is [`LiveFib::max_delay`] old (1 ms by default), so a full-table load
//! costs one publication and a single change is visible to forwarding within the bound. In
//! place, changes reach the engine only when they are published, sorted, as one batch.
//! A delay of zero publishes after every change.
//!
//! ## Bad input
//!
//! A next hop the engine cannot store is refused before anything changes
//! ([`FibError::NextHopTooLarge`]); an engine that fails an update is rebuilt from the route
//! map, which is the truth; lost routes are impossible.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, Guard};
use vfsr_lpm::{BuildError, Key, LpmUpdate, NextHop, Prefix, Route, RouteMap, NO_ROUTE};

/// The default bound on the delay between a change and its publication.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_millis(1);

/// What readers load: an engine and the version of the table it answers for.
#[derive(Clone, Debug)]
pub struct Snapshot<E> {
    /// Number of publications before this one; a flow cache entry made under an older version
    /// is stale.
    pub version: u64,
    /// The lookup engine.
    pub engine: E,
}

/// Why a change or a publication was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FibError {
    /// The next hop does not fit the engine (Poptrie leaves hold up to 65,535).
    NextHopTooLarge { nexthop: NextHop, max: NextHop },
    /// The engine could not be built from the table.
    Build(BuildError),
}

impl std::fmt::Display for FibError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FibError::NextHopTooLarge { nexthop, max } => {
                write!(f, "next hop {nexthop} is larger than the FIB's limit {max}")
            }
            FibError::Build(e) => write!(f, "FIB build failed: {e}"),
        }
    }
}

impl std::error::Error for FibError {}

/// Counters of a live FIB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FibStats {
    /// Changes accepted (set or remove).
    pub changes: u64,
    /// Changes refused (next hop too large).
    pub rejected: u64,
    /// Publications.
    pub publications: u64,
    /// Publications that had to wait for a reader to leave the spare copy.
    pub waits: u64,
    /// Times an engine update failed and the engine was rebuilt instead.
    pub rebuilds: u64,
}

/// The reading side: cheap to clone, one per forwarding worker. Never blocks.
pub struct FibReader<E> {
    shared: Arc<ArcSwap<Snapshot<E>>>,
}

impl<E> Clone for FibReader<E> {
    fn clone(&self) -> Self {
        FibReader {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<E> FibReader<E> {
    /// The current snapshot. Hold it for one batch of lookups, then drop it: a held snapshot
    /// keeps the writer from reusing its copy.
    #[inline]
    pub fn load(&self) -> Guard<Arc<Snapshot<E>>> {
        self.shared.load()
    }
}

/// The writing side of a live FIB (owned by the control plane).
pub struct LiveFib<K: Key, E: LpmUpdate<K>> {
    shared: Arc<ArcSwap<Snapshot<E>>>,
    /// Two copies: the copy readers do not see (`None` only while it is being swapped, and
    /// always in place).
    spare: Option<Arc<Snapshot<E>>>,
    /// In place: the writer's handle on the one copy, which readers share.
    writer: Option<E>,
    /// In place: snapshots replaced by publications, oldest first, each with the group of
    /// storage retired while it was the published one.
    held: VecDeque<(Arc<Snapshot<E>>, u64)>,
    config: E::Config,
    table: RouteMap<K>,
    /// Changes not published yet.
    pending: Vec<Prefix<K>>,
    /// How many of `pending` are already applied to the spare copy.
    applied: usize,
    /// Changes published but not yet applied to the spare.
    lag: Vec<Prefix<K>>,
    /// When the oldest pending change was made.
    since: Option<Instant>,
    max_delay: Duration,
    /// Pending changes beyond which changes wait for the publication (see `apply_eagerly`).
    eager_limit: usize,
    version: u64,
    stats: FibStats,
}

/// Pending changes applied to the spare copy as they come; more wait for the publication.
pub const DEFAULT_EAGER_LIMIT: usize = 256;

/// Changes between two looks at the delay bound in [`LiveFib::apply_changes`], as an event
/// loop looks between reads of its input.
pub const POLL_EVERY: usize = 64;

/// When [`LiveFib::apply_changes`] publishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publish {
    /// After every change.
    Each,
    /// When the oldest pending change has waited the delay bound, looked at every
    /// [`POLL_EVERY`] changes.
    Batched,
}

/// Changes the pending list keeps room for between publications; a list grown past it (a
/// full load) is dropped instead of kept.
const KEEP_PENDING: usize = 4096;

/// The table of `routes` and an engine built from it, ready for updates.
fn build<K: Key, E: LpmUpdate<K>>(
    routes: &[Route<K>],
    config: &E::Config,
) -> Result<(RouteMap<K>, E), FibError> {
    if let Some(r) = routes.iter().find(|r| r.nexthop > E::MAX_NEXTHOP) {
        return Err(FibError::NextHopTooLarge {
            nexthop: r.nexthop,
            max: E::MAX_NEXTHOP,
        });
    }
    let table = RouteMap::from_routes(routes);
    let mut engine = E::build(&table.to_routes(), config).map_err(FibError::Build)?;
    engine.prepare(&table);
    Ok((table, engine))
}

impl<K: Key, E: LpmUpdate<K> + Clone> LiveFib<K, E> {
    /// A live FIB over `routes` (any order; for a prefix given twice the last wins).
    pub fn new(routes: &[Route<K>], config: E::Config) -> Result<Self, FibError> {
        let (table, engine) = build::<K, E>(routes, &config)?;
        let (published, spare, writer) = match engine.share() {
            Some(view) => (view, None, Some(engine)),
            None => {
                let spare = Arc::new(Snapshot {
                    version: 0,
                    engine: engine.clone(),
                });
                (engine, Some(spare), None)
            }
        };
        let shared = Arc::new(ArcSwap::from_pointee(Snapshot {
            version: 0,
            engine: published,
        }));
        Ok(LiveFib {
            shared,
            spare,
            writer,
            held: VecDeque::new(),
            config,
            table,
            pending: Vec::new(),
            applied: 0,
            lag: Vec::new(),
            since: None,
            max_delay: DEFAULT_MAX_DELAY,
            eager_limit: DEFAULT_EAGER_LIMIT,
            version: 0,
            stats: FibStats::default(),
        })
    }

    /// Replaces the whole table by `routes` and publishes it at once (a full load: one build
    /// instead of a change per route).
    pub fn load(&mut self, routes: &[Route<K>]) -> Result<(), FibError> {
        let (table, engine) = build::<K, E>(routes, &self.config)?;
        let version = self.version + 1;
        if let Some(view) = engine.share() {
            // The snapshots held so far are of the old storage, which nothing writes any
            // more: readers free it when they let go.
            self.shared.store(Arc::new(Snapshot {
                version,
                engine: view,
            }));
            self.writer = Some(engine);
            self.held.clear();
        } else {
            let spare = engine.clone();
            self.shared.store(Arc::new(Snapshot { version, engine }));
            self.spare = Some(Arc::new(Snapshot {
                version,
                engine: spare,
            }));
        }
        self.table = table;
        self.pending.clear();
        self.applied = 0;
        self.lag.clear();
        self.since = None;
        self.version = version;
        self.stats.publications += 1;
        Ok(())
    }
}

impl<K: Key, E: LpmUpdate<K>> LiveFib<K, E> {
    /// A handle for a reader thread.
    pub fn reader(&self) -> FibReader<E> {
        FibReader {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Sets the delay bound (zero: publish after every change through [`LiveFib::poll`]).
    pub fn set_max_delay(&mut self, d: Duration) {
        self.max_delay = d;
    }

    /// Sets how many pending changes are applied as they come (0: every change waits for
    /// the publication; `usize::MAX`: none does).
    pub fn set_eager_limit(&mut self, n: usize) {
        self.eager_limit = n;
    }

    /// The delay bound.
    pub fn max_delay(&self) -> Duration {
        self.max_delay
    }

    /// The table the FIB answers for once the pending changes are published.
    pub fn table(&self) -> &RouteMap<K> {
        &self.table
    }

    /// Counters.
    pub fn stats(&self) -> FibStats {
        self.stats
    }

    /// Number of publications so far (the version readers see).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Changes not yet published.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Announces or replaces `prefix` → `nexthop` ([`NO_ROUTE`] withdraws).
    pub fn set(&mut self, prefix: Prefix<K>, nexthop: NextHop) -> Result<(), FibError> {
        if nexthop > E::MAX_NEXTHOP {
            self.stats.rejected += 1;
            return Err(FibError::NextHopTooLarge {
                nexthop,
                max: E::MAX_NEXTHOP,
            });
        }
        let old = self.table.set(prefix, nexthop);
        self.stats.changes += 1;
        if old != nexthop {
            self.pending.push(prefix);
            if self.since.is_none() {
                self.since = Some(Instant::now());
            }
            self.apply_eagerly();
        }
        Ok(())
    }

    /// Applies the unapplied pending changes to the spare copy now, while the table entries
    /// they touched are still in the cache, if no reader holds the spare any more (otherwise,
    /// or if the engine fails, the publication does it). A burst of more than the eager limit
    /// waits for the publication instead, which applies it as one sorted batch (each subtree
    /// the burst touches is rebuilt once, not once per change).
    fn apply_eagerly(&mut self) {
        if self.pending.len() > self.eager_limit || self.writer.is_some() {
            return;
        }
        if !self.catch_up() {
            return;
        }
        let Some(s) = self.spare.as_mut().and_then(Arc::get_mut) else {
            return;
        };
        if let Some(rest) = self.pending.get(self.applied..) {
            if s.engine.update(&self.table, rest).is_ok() {
                self.applied = self.pending.len();
            }
        }
    }

    /// Brings the spare copy level with the published one by the changes of the last
    /// publication (copying from the published copy where the engine can), before any newer
    /// change touches the spare. Returns whether the spare is level (false: a reader still
    /// holds it, or the engine failed; the publication then applies the changes from the
    /// table).
    fn catch_up(&mut self) -> bool {
        if self.lag.is_empty() {
            return true;
        }
        let Some(s) = self.spare.as_mut().and_then(Arc::get_mut) else {
            return false;
        };
        let mut lag = std::mem::take(&mut self.lag);
        lag.sort_unstable();
        lag.dedup();
        let published = self.shared.load();
        if s.engine
            .update_from(&published.engine, &self.table, &lag)
            .is_err()
        {
            self.lag = lag;
            return false;
        }
        true
    }

    /// Applies `changes` in order ([`NO_ROUTE`] withdraws), publishing as `publish` says,
    /// then settles: a run of route changes as an event loop applies it. Stops at the first
    /// change or publication refused; the changes before it stay applied.
    pub fn apply_changes(
        &mut self,
        changes: &[Route<K>],
        publish: Publish,
    ) -> Result<(), FibError> {
        for (i, r) in changes.iter().enumerate() {
            self.set(r.prefix, r.nexthop)?;
            match publish {
                Publish::Each => self.publish()?,
                Publish::Batched if i % POLL_EVERY == POLL_EVERY - 1 => {
                    self.poll(Instant::now())?;
                }
                Publish::Batched => {}
            }
        }
        self.settle()
    }

    /// Withdraws `prefix` (nothing happens if it is not in the table).
    pub fn remove(&mut self, prefix: Prefix<K>) {
        // NO_ROUTE never exceeds the limit.
        let _ = self.set(prefix, NO_ROUTE);
    }

    /// When the pending changes are due for publication, if there are any.
    pub fn deadline(&self) -> Option<Instant> {
        self.since.map(|t| t + self.max_delay)
    }

    /// Publishes if the oldest pending change has waited the delay bound. Returns whether it
    /// published.
    pub fn poll(&mut self, now: Instant) -> Result<bool, FibError> {
        match self.deadline() {
            Some(d) if now >= d => self.publish().map(|()| true),
            _ => Ok(false),
        }
    }

    /// Waits until no reader holds the spare copy any more.
    fn wait_for_spare(&mut self) {
        let mut waited = false;
        while let Some(s) = self.spare.as_mut() {
            if Arc::get_mut(s).is_some() {
                break;
            }
            waited = true;
            std::thread::yield_now();
        }
        if waited {
            self.stats.waits += 1;
        }
    }

    /// Brings the spare copy in line with the table: applies `changes` (sorted here), or
    /// rebuilds it when the engine's update fails. On a build error the changes are kept
    /// for the next attempt.
    fn apply_to_spare(
        &mut self,
        mut changes: Vec<Prefix<K>>,
        version: u64,
    ) -> Result<(), FibError> {
        changes.sort_unstable();
        changes.dedup();
        let Some(s) = self.spare.as_mut().and_then(Arc::get_mut) else {
            self.lag = changes;
            return Ok(());
        };
        if s.engine.update(&self.table, &changes).is_err() {
            self.stats.rebuilds += 1;
            match E::build(&self.table.to_routes(), &self.config) {
                Ok(e) => s.engine = e,
                Err(e) => {
                    self.lag = changes;
                    return Err(FibError::Build(e));
                }
            }
        }
        s.version = version;
        Ok(())
    }

    /// Applies the pending changes and publishes them now.
    pub fn publish(&mut self) -> Result<(), FibError> {
        if self.pending.is_empty() {
            self.since = None;
            return Ok(());
        }
        if self.writer.is_some() {
            return self.publish_in_place();
        }
        self.wait_for_spare();
        self.catch_up();
        let mut changes = std::mem::take(&mut self.lag);
        changes.extend_from_slice(self.pending.get(self.applied..).unwrap_or_default());
        let version = self.version + 1;
        self.apply_to_spare(changes, version)?;
        let Some(spare) = self.spare.take() else {
            return Ok(());
        };
        let old = self.shared.swap(spare);
        self.spare = Some(old);
        self.lag = std::mem::take(&mut self.pending);
        self.applied = 0;
        self.since = None;
        self.version = version;
        self.stats.publications += 1;
        Ok(())
    }

    /// In place: applies the pending changes to the one copy (readers see each as it is
    /// switched in), publishes a snapshot of the new version over the same storage, and
    /// reuses the storage no reader can be in any more.
    fn publish_in_place(&mut self) -> Result<(), FibError> {
        self.reclaim();
        let Some(w) = self.writer.as_mut() else {
            return Ok(());
        };
        let mut changes = std::mem::take(&mut self.pending);
        changes.sort_unstable();
        changes.dedup();
        if w.update(&self.table, &changes).is_err() {
            self.stats.rebuilds += 1;
            match build::<K, E>(&self.table.to_routes(), &self.config) {
                // New storage: what the held snapshots retired is not in it.
                Ok((_, e)) => {
                    *w = e;
                    self.held.clear();
                }
                Err(e) => {
                    self.pending = changes;
                    return Err(e);
                }
            }
        }
        let version = self.version + 1;
        if let Some(view) = w.share() {
            let old = self.shared.swap(Arc::new(Snapshot {
                version,
                engine: view,
            }));
            // Readers that load the new snapshot load the entries after every change above,
            // so only holders of this one (or older ones) can be in what they retired.
            let group = w.retire_group();
            self.held.push_back((old, group));
        }
        // The list goes back empty, its room kept for the next changes unless a burst (a
        // full load) grew it.
        if changes.capacity() <= KEEP_PENDING {
            changes.clear();
            self.pending = changes;
        }
        self.applied = 0;
        self.since = None;
        self.version = version;
        self.stats.publications += 1;
        self.reclaim();
        Ok(())
    }

    /// In place: reuses the storage retired while the oldest held snapshots were published,
    /// for those no reader holds any more (`arc-swap` counted the readers' guards into the
    /// `Arc` when the snapshot was swapped out).
    fn reclaim(&mut self) {
        let mut upto = None;
        while let Some((s, g)) = self.held.front_mut() {
            if Arc::get_mut(s).is_none() {
                break;
            }
            upto = Some(*g);
            self.held.pop_front();
        }
        if let (Some(g), Some(w)) = (upto, self.writer.as_mut()) {
            w.reclaim(g);
        }
    }

    /// Snapshots replaced by publications that readers may still hold (in place; 0 with two
    /// copies).
    pub fn held_snapshots(&self) -> usize {
        self.held.len()
    }

    /// Memory of the engine's copies: one in place, two otherwise (the published one counted
    /// with the spare's size).
    pub fn memory_bytes(&self) -> usize {
        match (&self.writer, &self.spare) {
            (Some(w), _) => w.memory_bytes(),
            (None, Some(s)) => 2 * s.engine.memory_bytes(),
            (None, None) => 2 * self.shared.load().engine.memory_bytes(),
        }
    }

    /// Publishes what is pending, then brings the spare copy up to date as well, so that the
    /// next change costs one engine update instead of two. For quiet moments.
    pub fn settle(&mut self) -> Result<(), FibError> {
        self.publish()?;
        if self.writer.is_some() {
            return Ok(());
        }
        if self.lag.is_empty() {
            return Ok(());
        }
        self.wait_for_spare();
        if self.catch_up() {
            return Ok(());
        }
        let lag = std::mem::take(&mut self.lag);
        self.apply_to_spare(lag, self.version)
    }
}
