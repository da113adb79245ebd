//! The live FIB of one address family: a lookup engine that changes while readers look up.
//!
//! ## Two copies, published by pointer swap
//!
//! The writer (the control plane) keeps two copies of the engine. One is *published*: readers
//! load it through an [`ArcSwap`] and look up in it without any lock. The other, the *spare*,
//! belongs to the writer alone, who changes it in place through [`LpmUpdate::update`], then
//! publishes it with one atomic pointer swap:
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
//! costs one publication and a single change is visible to forwarding within the bound.
//! A delay of zero publishes after every change.
//!
//! ## Bad input
//!
//! A next hop the engine cannot store is refused before anything changes
//! ([`FibError::NextHopTooLarge`]); an engine that fails an update is rebuilt from the route
//! map, which is the truth; lost routes are impossible.

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
    /// The copy readers do not see (`None` only while it is being swapped).
    spare: Option<Arc<Snapshot<E>>>,
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
        let spare = Arc::new(Snapshot {
            version: 0,
            engine: engine.clone(),
        });
        let shared = Arc::new(ArcSwap::from_pointee(Snapshot { version: 0, engine }));
        Ok(LiveFib {
            shared,
            spare: Some(spare),
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
        let spare = engine.clone();
        self.shared.store(Arc::new(Snapshot { version, engine }));
        self.spare = Some(Arc::new(Snapshot {
            version,
            engine: spare,
        }));
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
        if self.pending.len() > self.eager_limit {
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

    /// Applies the pending changes to the spare copy and publishes it now.
    pub fn publish(&mut self) -> Result<(), FibError> {
        if self.pending.is_empty() {
            self.since = None;
            return Ok(());
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

    /// Publishes what is pending, then brings the spare copy up to date as well, so that the
    /// next change costs one engine update instead of two. For quiet moments.
    pub fn settle(&mut self) -> Result<(), FibError> {
        self.publish()?;
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
