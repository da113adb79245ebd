//! Source `fpm`: FRR's zebra, through its `dplane_fpm_nl` module.
//!
//! zebra connects to vfsrd (TCP, 127.0.0.1:2620 by default) and streams the routes it
//! selected as netlink messages in FPM frames: next-hop objects first (with `fpm
//! use-next-hop-groups`, FRR 8's default), then `RTM_NEWROUTE` / `RTM_DELROUTE`. It has one
//! route per prefix, so each announcement replaces what this source had for the prefix.
//!
//! ## Connections, replays and stale routes
//!
//! ```text
//!   connected ── messages ──▶ (quiet for resync_quiet) ──▶ sweep: routes not replayed go
//!       ▲                                                          │
//!       │ zebra reconnects: new epoch,                              ▼
//!       │ replay refreshes the routes it still has              in sync ── messages ──▶ …
//!       │                                                          │ connection lost
//!   disconnected: every route stale but kept forwarding  ◀─────────┘
//!       │ stale_time passes without zebra
//!       ▼
//!   sweep: all of them removed
//! ```
//!
//! When zebra connects it replays its whole RIB. The FPM stream marks neither the start nor
//! the end of a replay, so the session takes the replay as complete once the stream has
//! been quiet for `resync_quiet`; only then are the routes zebra did not replay removed
//! (mark and sweep: a new epoch at the connection, [`vfsr_rib::Rib::sweep`] at the end).
//! Routes zebra replays unchanged keep their FIB entries throughout. When the connection
//! drops, the routes stay and keep forwarding, stale, for `stale_time`; a reconnection
//! within it replays and reconciles them, otherwise they are removed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use vfsr_netlink::msg::{Message, Route};
use vfsr_rib::{Rib, Source};

use crate::source::{Apply, Identity, SourceState};
use crate::translate::{IfMap, Skip, SourceCounters};

/// The kernel's main routing table (`RT_TABLE_MAIN`).
pub const MAIN_TABLE: u32 = 254;

/// How the FPM source behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FpmConfig {
    /// The routing table taken from zebra (routes of other tables are skipped, counted).
    pub table: u32,
    /// How long routes are kept after zebra went away.
    pub stale_time: Duration,
    /// How long the stream must be quiet after a connection for its replay to count as
    /// complete.
    pub resync_quiet: Duration,
}

impl Default for FpmConfig {
    fn default() -> Self {
        FpmConfig {
            table: MAIN_TABLE,
            stale_time: Duration::from_secs(60),
            resync_quiet: Duration::from_secs(2),
        }
    }
}

/// Where the session stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FpmState {
    /// zebra never connected.
    Waiting,
    /// zebra is connected; `replaying` until its replay is complete.
    Connected { replaying: bool },
    /// The connection dropped at `since`; the routes are stale.
    Disconnected { since: Instant },
}

/// The FPM session's state (see the module doc).
#[derive(Debug)]
pub struct FpmSession {
    config: FpmConfig,
    state: FpmState,
    inner: SourceState,
    last_message: Option<Instant>,
    connections: u64,
    last_resync: Option<Instant>,
    /// Whether the stale routes of the current disconnection were removed already.
    stale_swept: bool,
    /// Connections closed, by reason.
    closes: BTreeMap<&'static str, u64>,
}

impl FpmSession {
    /// A session waiting for zebra.
    pub fn new(config: FpmConfig) -> Self {
        FpmSession {
            config,
            state: FpmState::Waiting,
            inner: SourceState::new(Source::Fpm, Identity::Prefix),
            last_message: None,
            connections: 0,
            last_resync: None,
            stale_swept: false,
            closes: BTreeMap::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &FpmConfig {
        &self.config
    }

    /// Where the session stands.
    pub fn state(&self) -> FpmState {
        self.state
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections
    }

    /// When the last replay completed.
    pub fn last_resync(&self) -> Option<Instant> {
        self.last_resync
    }

    /// Connections closed, by reason (`peer_closed`, `bad_version`, ...).
    pub fn closes(&self) -> &BTreeMap<&'static str, u64> {
        &self.closes
    }

    /// The counters.
    pub fn counters(&self) -> &SourceCounters {
        &self.inner.counters
    }

    /// Next-hop objects known.
    pub fn objects(&self) -> usize {
        self.inner.objects.len()
    }

    /// zebra connected: a new epoch starts, every route this source had is stale until
    /// zebra replays it.
    pub fn connected(&mut self, now: Instant, rib: &mut Rib) {
        rib.begin_epoch(Source::Fpm);
        self.connections += 1;
        self.state = FpmState::Connected { replaying: true };
        self.last_message = Some(now);
    }

    /// The connection was closed (`reason`: a stable name, counted); the routes stay,
    /// stale, for the stale time.
    pub fn disconnected(&mut self, now: Instant, reason: &'static str, rib: &mut Rib) {
        *self.closes.entry(reason).or_default() += 1;
        if matches!(self.state, FpmState::Connected { .. }) {
            rib.begin_epoch(Source::Fpm);
            self.state = FpmState::Disconnected { since: now };
            self.stale_swept = false;
        }
    }

    /// Applies the messages of one FPM frame.
    pub fn frame(
        &mut self,
        msgs: &[Message],
        now: Instant,
        rib: &mut Rib,
        ifmap: &IfMap,
        distance: u8,
    ) {
        self.last_message = Some(now);
        let table = self.config.table;
        let mut cx = Apply {
            rib,
            ifmap,
            distance,
        };
        self.inner.apply(msgs, &mut cx, |r: &Route| {
            (r.table != table).then_some(Skip::OtherTable)
        });
    }

    /// Call after a batch of frames: routes whose next-hop objects changed are updated.
    pub fn end_batch(&mut self, rib: &mut Rib, ifmap: &IfMap, distance: u8) -> usize {
        let mut cx = Apply {
            rib,
            ifmap,
            distance,
        };
        self.inner.end_batch(&mut cx)
    }

    /// Completes a replay after the quiet time, or removes the stale routes once the stale
    /// time has passed without zebra. Returns the routes removed.
    pub fn poll(&mut self, now: Instant, rib: &mut Rib) -> usize {
        let due = match self.state {
            FpmState::Connected { replaying: true } => self
                .last_message
                .is_none_or(|t| now.saturating_duration_since(t) >= self.config.resync_quiet),
            FpmState::Disconnected { since } => {
                !self.stale_swept && now.saturating_duration_since(since) >= self.config.stale_time
            }
            _ => false,
        };
        if !due {
            return 0;
        }
        let n = rib.sweep(Source::Fpm);
        self.inner.sweep_parked(rib.current_epoch(Source::Fpm));
        self.inner.counters.swept += n as u64;
        match self.state {
            FpmState::Connected { .. } => {
                self.state = FpmState::Connected { replaying: false };
                self.inner.counters.resyncs += 1;
                self.last_resync = Some(now);
            }
            _ => self.stale_swept = true,
        }
        n
    }

    /// When [`FpmSession::poll`] next has something to do, if ever.
    pub fn deadline(&self) -> Option<Instant> {
        match self.state {
            FpmState::Connected { replaying: true } => {
                self.last_message.map(|t| t + self.config.resync_quiet)
            }
            FpmState::Disconnected { since } if !self.stale_swept => {
                Some(since + self.config.stale_time)
            }
            _ => None,
        }
    }
}
