//! The control plane's route table: the RIB compiled into live FIBs, one per family, and the
//! next-hop table the forwarding path reads beside them.
//!
//! ```text
//!   Rib::apply / load_table ──▶ Rib ──drain changes──▶ LiveFib<u32, E4> ──▶ FibReader (v4)
//!                                │                     LiveFib<u128, E6> ──▶ FibReader (v6)
//!                                └──nexthop_snapshot──▶ NhPublisher ──────▶ NhReader
//! ```
//!
//! [`RouteTable::poll`] runs the publication cycle when the oldest unpublished change has
//! waited the FIB's delay bound (1 ms by default), [`RouteTable::publish`] runs it now:
//!
//! 1. publish the next-hop snapshot (an index exists before any FIB points to it);
//! 2. move the RIB's FIB changes into both live FIBs and publish them;
//! 3. release the next-hop indices quarantined before the *previous* cycle. A live FIB's
//!    spare copy lags one publication behind (see `vfsr_fib::live`), so an index dropped in
//!    cycle k is still referenced by the copy published in cycle k-1 until cycle k+1 has
//!    waited for that copy's readers and brought it up to date.
//!
//! Workers load the FIB snapshot first and the next-hop snapshot second, so every index the
//! FIB returns is in the next-hop snapshot they read.

use std::net::IpAddr;
use std::time::Instant;

use vfsr_fib::nexthop::{Forward, NhPublisher, NhReader};
use vfsr_fib::{FibError, FibReader, LiveFib};
use vfsr_lpm::{Key, LpmUpdate, NextHop, Prefix, Route};
use vfsr_table::Table;

use crate::rib::{LoadReport, Rib, RibError, Source};
use crate::stream::{ApplyError, Update};

/// Why a whole-table load failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// The RIB refused the table (nothing was loaded).
    Rib(RibError),
    /// A FIB could not be built from the RIB.
    Fib(FibError),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Rib(e) => write!(f, "RIB: {e}"),
            LoadError::Fib(e) => write!(f, "FIB: {e}"),
        }
    }
}

impl std::error::Error for LoadError {}

/// The RIB, its two live FIBs (engines `E4`, `E6`) and the published next-hop table.
pub struct RouteTable<E4: LpmUpdate<u32>, E6: LpmUpdate<u128>> {
    rib: Rib,
    v4: LiveFib<u32, E4>,
    v6: LiveFib<u128, E6>,
    nexthops: NhPublisher,
    /// Quarantined indices at the previous publication: released at the next one.
    mark: usize,
    /// When the oldest change not yet in the FIBs was made.
    since: Option<Instant>,
    /// The RIB was lent out to change ([`RouteTable::rib_mut`]) since the last poll: whether
    /// anything changed is found out by the next one.
    touched: bool,
}

fn apply<K: Key, E: LpmUpdate<K>>(
    fib: &mut LiveFib<K, E>,
    changes: Vec<(Prefix<K>, NextHop)>,
) -> Result<(), FibError> {
    for (p, nh) in changes {
        fib.set(p, nh)?;
    }
    Ok(())
}

impl<E4, E6> RouteTable<E4, E6>
where
    E4: LpmUpdate<u32> + Clone,
    E6: LpmUpdate<u128> + Clone,
{
    /// An empty table with the engines' configurations.
    pub fn new(rib: Rib, c4: E4::Config, c6: E6::Config) -> Result<Self, FibError> {
        let v4 = LiveFib::new(&rib.fib_routes_v4(), c4)?;
        let v6 = LiveFib::new(&rib.fib_routes_v6(), c6)?;
        let nexthops = NhPublisher::new(rib.nexthop_snapshot());
        let mut rib = rib;
        rib.drain_fib_changes_v4();
        rib.drain_fib_changes_v6();
        Ok(RouteTable {
            rib,
            v4,
            v6,
            nexthops,
            mark: 0,
            since: None,
            touched: false,
        })
    }

    /// Loads a whole table into the RIB as routes of `source` and the FIBs in one build each
    /// (a full load, not a change per route). Returns what the RIB took; a [`LoadError`]
    /// says whether the RIB refused the table or a FIB could not be built.
    pub fn load_table(&mut self, table: &Table, source: Source) -> Result<LoadReport, LoadError> {
        let report = self.rib.load_table(table, source).map_err(LoadError::Rib)?;
        self.nexthops.publish(self.rib.nexthop_snapshot());
        self.rib.drain_fib_changes_v4();
        self.rib.drain_fib_changes_v6();
        self.v4
            .load(&self.rib.fib_routes_v4())
            .map_err(LoadError::Fib)?;
        self.v6
            .load(&self.rib.fib_routes_v6())
            .map_err(LoadError::Fib)?;
        Ok(report)
    }

    /// As [`RouteTable::load_table`], naming each table value's next hop with `forward` (see
    /// [`Rib::load_table_with`]).
    pub fn load_table_with(
        &mut self,
        table: &Table,
        source: Source,
        forward: impl FnMut(NextHop, Option<IpAddr>, bool) -> Forward,
    ) -> Result<LoadReport, LoadError> {
        let report = self
            .rib
            .load_table_with(table, source, forward)
            .map_err(LoadError::Rib)?;
        self.nexthops.publish(self.rib.nexthop_snapshot());
        self.rib.drain_fib_changes_v4();
        self.rib.drain_fib_changes_v6();
        self.v4
            .load(&self.rib.fib_routes_v4())
            .map_err(LoadError::Fib)?;
        self.v6
            .load(&self.rib.fib_routes_v6())
            .map_err(LoadError::Fib)?;
        Ok(report)
    }

    /// Applies one update of the stream as routes of `source`. Errors leave everything as it
    /// was.
    pub fn apply(&mut self, update: &Update, source: Source) -> Result<(), ApplyError> {
        self.rib.apply(update, source)?;
        if self.since.is_none() {
            self.since = Some(Instant::now());
        }
        // A change the FIB refuses stays in the RIB; publish() reports it.
        let _ = self.feed();
        Ok(())
    }

    /// Moves the RIB's pending FIB changes into the live FIBs (not yet published: the FIBs
    /// apply them to their spare copies while the touched entries are in the cache). Done by
    /// [`RouteTable::apply`], `poll` and `publish`; call it after changing the RIB through
    /// [`RouteTable::rib_mut`] to get the same.
    pub fn feed(&mut self) -> Result<(), FibError> {
        apply(&mut self.v4, self.rib.drain_fib_changes_v4())?;
        apply(&mut self.v6, self.rib.drain_fib_changes_v6())
    }

    /// The RIB, to read.
    pub fn rib(&self) -> &Rib {
        &self.rib
    }

    /// The RIB, to change directly (call [`RouteTable::poll`] or [`RouteTable::publish`]
    /// afterwards).
    pub fn rib_mut(&mut self) -> &mut Rib {
        self.touched = true;
        &mut self.rib
    }

    /// When the oldest unpublished change is due for publication, if there is one; now when
    /// the RIB was lent out since the last poll (the next poll finds out whether it changed).
    pub fn deadline(&self) -> Option<Instant> {
        if self.touched {
            return Some(Instant::now());
        }
        self.since.map(|t| t + self.v4.max_delay())
    }

    /// Whether anything awaits publication: FIB changes, or next hops that differ from the
    /// published ones.
    fn unpublished(&self) -> bool {
        self.v4.pending() > 0
            || self.v6.pending() > 0
            || *self.nexthops.current() != self.rib.nexthop_snapshot()
    }

    /// Runs the publication cycle if the oldest change has waited the delay bound. A RIB
    /// that was lent out but not changed starts no cycle: sources that look at the RIB on
    /// every round cost the forwarding path nothing.
    pub fn poll(&mut self, now: Instant) -> Result<bool, FibError> {
        let touched = std::mem::take(&mut self.touched);
        let fed = self.feed();
        if touched && self.since.is_none() && (fed.is_err() || self.unpublished()) {
            self.since = Some(now);
        }
        fed?;
        match self.since {
            Some(t) if now >= t + self.v4.max_delay() => self.publish().map(|()| true),
            _ => Ok(false),
        }
    }

    /// Runs the publication cycle now.
    pub fn publish(&mut self) -> Result<(), FibError> {
        self.since = None;
        self.touched = false;
        self.nexthops.publish(self.rib.nexthop_snapshot());
        self.feed()?;
        self.v4.publish()?;
        self.v6.publish()?;
        self.rib.release_quarantine_upto(self.mark);
        self.mark = self.rib.nexthops().quarantined();
        Ok(())
    }

    /// Runs the publication cycle, then brings both FIBs' spare copies up to date (see
    /// `LiveFib::settle`): for quiet moments.
    pub fn settle(&mut self) -> Result<(), FibError> {
        self.publish()?;
        self.v4.settle()?;
        self.v6.settle()
    }

    /// Sets how many pending changes both FIBs apply as they come (see
    /// `LiveFib::set_eager_limit`).
    pub fn set_eager_limit(&mut self, n: usize) {
        self.v4.set_eager_limit(n);
        self.v6.set_eager_limit(n);
    }

    /// Sets the publication delay bound of both FIBs.
    pub fn set_max_delay(&mut self, d: std::time::Duration) {
        self.v4.set_max_delay(d);
        self.v6.set_max_delay(d);
    }

    /// The IPv4 FIB.
    pub fn v4(&self) -> &LiveFib<u32, E4> {
        &self.v4
    }

    /// The IPv6 FIB.
    pub fn v6(&self) -> &LiveFib<u128, E6> {
        &self.v6
    }

    /// Readers for a forwarding worker: IPv4 FIB, IPv6 FIB, next hops.
    pub fn readers(&self) -> (FibReader<E4>, FibReader<E6>, NhReader) {
        (self.v4.reader(), self.v6.reader(), self.nexthops.reader())
    }

    /// The routes of the IPv4 or IPv6 FIB as the RIB sees them now.
    pub fn fib_routes_v4(&self) -> Vec<Route<u32>> {
        self.rib.fib_routes_v4()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::parse_update;
    use vfsr_lpm::poptrie::{Poptrie, PoptrieConfig};
    use vfsr_lpm::Lpm;

    type Table4 = RouteTable<Poptrie<u32>, Poptrie<u128>>;

    fn table() -> Table4 {
        RouteTable::new(
            Rib::new(),
            PoptrieConfig::default(),
            PoptrieConfig::default(),
        )
        .unwrap()
    }

    fn upd(t: &mut Table4, line: &str) {
        let u = parse_update(line).unwrap().unwrap();
        t.apply(&u, Source::Api).unwrap();
    }

    /// The published FIB value of an IPv4 address, resolved in the published next hops.
    fn resolve(t: &Table4, a: [u8; 4]) -> Option<String> {
        let (r4, _, nh) = t.readers();
        let fib = r4.load();
        let i = fib.engine.lookup(u32::from_be_bytes(a));
        let nhs = nh.load();
        nhs.get(i).map(|e| e.forward.to_string())
    }

    #[test]
    fn updates_reach_readers_after_publication_and_indices_wait_a_cycle() {
        let mut t = table();
        upd(&mut t, "a 10.0.0.0/8 192.0.2.1");
        assert_eq!(resolve(&t, [10, 1, 1, 1]), None, "not published yet");
        t.publish().unwrap();
        let first = resolve(&t, [10, 1, 1, 1]).unwrap();
        assert!(first.contains("192.0.2.1"), "{first}");
        // Move to another gateway: the old index is quarantined, then released one cycle on.
        upd(&mut t, "a 10.0.0.0/8 192.0.2.2");
        t.publish().unwrap();
        assert_eq!(t.rib().nexthops().quarantined(), 1);
        assert!(resolve(&t, [10, 1, 1, 1]).unwrap().contains("192.0.2.2"));
        upd(&mut t, "a 11.0.0.0/8 blackhole");
        t.publish().unwrap();
        assert_eq!(
            t.rib().nexthops().quarantined(),
            0,
            "released a cycle later"
        );
        upd(&mut t, "w 10.0.0.0/8");
        t.publish().unwrap();
        assert_eq!(resolve(&t, [10, 1, 1, 1]), None);
        assert_eq!(resolve(&t, [11, 1, 1, 1]).as_deref(), Some("blackhole"));
    }

    #[test]
    fn poll_waits_for_the_delay_bound() {
        let mut t = table();
        t.set_max_delay(std::time::Duration::from_millis(50));
        upd(&mut t, "a 2001:db8::/32 2001:db8::1");
        let now = Instant::now();
        assert!(!t.poll(now).unwrap());
        assert!(t.poll(now + std::time::Duration::from_millis(60)).unwrap());
        let (_, r6, _) = t.readers();
        assert_ne!(r6.load().engine.lookup(0x2001_0db8 << 96), 0);
    }

    #[test]
    fn lending_the_rib_out_without_a_change_publishes_nothing() {
        let mut t = table();
        upd(&mut t, "a 10.0.0.0/8 192.0.2.1");
        t.publish().unwrap();
        let version = t.readers().0.load().version;
        // A source that looks at the RIB on every round and changes nothing.
        let _ = t.rib_mut();
        assert!(t.deadline().is_some(), "the next poll must look");
        let now = Instant::now();
        assert!(!t.poll(now).unwrap());
        assert_eq!(t.deadline(), None, "nothing to publish, nothing due");
        assert!(!t.poll(now + std::time::Duration::from_secs(1)).unwrap());
        assert_eq!(t.readers().0.load().version, version, "no publication");
        // A change through the lent RIB is published within the bound.
        t.rib_mut()
            .add(
                Prefix::<u32>::new(0x0b00_0000, 8).unwrap(),
                &crate::RibRoute::new(Source::Api, Forward::Blackhole),
            )
            .unwrap();
        assert!(!t.poll(now).unwrap(), "due only after the delay bound");
        let due = t.deadline().expect("a publication due");
        assert!(t.poll(due).unwrap());
        assert_eq!(resolve(&t, [11, 1, 1, 1]).as_deref(), Some("blackhole"));
        // Looked at again and left as it was: nothing due.
        let _ = t.rib_mut();
        assert!(!t.poll(due).unwrap());
        assert_eq!(t.deadline(), None);
    }

    #[test]
    fn a_whole_table_loads_in_one_build() {
        let mut t = table();
        let tab = vfsr_table::synth_table(3);
        let report = t.load_table(&tab, Source::Table).unwrap();
        assert_eq!(report.v4 + report.v6, tab.v4.len() + tab.v6.len());
        let routes = t.fib_routes_v4();
        let (r4, _, _) = t.readers();
        let fib = r4.load();
        assert_eq!(fib.engine.route_count(), routes.len());
        let want = vfsr_lpm::RouteMap::from_routes(&routes);
        for r in routes.iter().step_by(997) {
            let a = r.prefix.addr();
            assert_eq!(
                Some(fib.engine.lookup(a)),
                want.lookup(a).map(|w| w.nexthop)
            );
        }
    }

    #[test]
    fn a_table_the_rib_refuses_is_a_rib_error_and_loads_nothing() {
        let mut t = table();
        let mut tab = vfsr_table::synth_table(3);
        tab.v4.truncate(100);
        // 999 is neither an nh64 value (1..=64) nor one of the table's gateways.
        if let Some(r) = tab.v4.first_mut() {
            r.nexthop = 999;
        }
        let e = t.load_table(&tab, Source::Table).unwrap_err();
        assert_eq!(e, LoadError::Rib(RibError::UnknownTableNextHop(999)));
        assert_eq!(e.to_string(), "RIB: unknown table next hop 999");
        assert!(t.fib_routes_v4().is_empty());
    }
}
