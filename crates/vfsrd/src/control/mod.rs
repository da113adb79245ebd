//! The control plane, one thread on its own core: it owns the FIBs, the next-hop table and
//! every port's ARP and ND tables (the workers only read published snapshots), and it
//! handles what is not transit traffic:
//!
//! - **neighbor resolution**: answers ARP requests and Neighbor Solicitations for the
//!   router's addresses, learns from replies and advertisements, sends requests and
//!   solicitations for next hops the workers asked about ([`ToControl::Resolve`]), holds their
//!   packets (a few per neighbor) and sends them once the MAC is known;
//! - **ICMP echo** to the router's addresses, answered here, without the host stack;
//! - **the punt path**: every other frame for the router goes to the port's TAP device, where
//!   the host stack (sshd, routing daemons) sees it as if the port were a kernel interface;
//!   what the host sends on the TAP leaves through the port.
//!
//! Input is rate-limited per class ([`PuntClass`]: ARP/ND, routing protocols, ICMP, other
//! local traffic, slow path), each with its own token bucket, so a flood of one kind (say,
//! pings to the router) cannot crowd out BGP or ssh. Frames reach this thread two ways: the
//! XDP program passes control traffic to the kernel, where the port's raw socket reads it
//! (it never waits behind transit traffic in a worker's ring), and workers hand over what
//! their own classification punts (AF_PACKET ports) through the inbox, a bounded channel
//! of [`ToControl`].

pub mod frames;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use vfsr_fwd::ratelimit::TokenBucket;
use vfsr_fwd::stage::classify::punt_class;
use vfsr_fwd::{Packet, PuntClass};
use vfsr_io::xdp::{FastPath, PolicedClass, PolicedCounters, Policer};
use vfsr_lpm::LpmUpdate;
use vfsr_neigh::{Event, Outcome, Solicit};
use vfsr_router::Router;
use vfsr_wire::arp::{ArpOp, ArpRepr};
use vfsr_wire::ethernet::{ethertype, MacAddr, HEADER_LEN};
use vfsr_wire::icmpv6::NdRepr;
use vfsr_wire::{ip_proto, EthernetFrame, Ipv4Packet, Ipv6Packet};

use crate::config::{NeighborSection, Plan, PuntSection};
use crate::link::{Link, MemLink, ToControl, Wake};
use crate::sources::Sources;

/// How often neighbor timers run.
pub const TIMER_MS: u64 = 50;
/// The longest a round after one with route messages waits before reading the sources
/// again (see [`Control::step`]): within the FIB's own publication bound.
pub const COALESCE_MS: i32 = 1;
/// Most frames read from one source per step (the rest wait for the next step).
const READ_BUDGET: usize = 256;

/// One port as the control plane sees it.
pub struct CtlPort {
    /// Pipeline index.
    pub ifindex: u32,
    /// Interface name.
    pub name: String,
    /// MAC.
    pub mac: MacAddr,
    /// IPv4 addresses.
    pub addrs4: Vec<(Ipv4Addr, u8)>,
    /// IPv6 addresses (a link-local one included).
    pub addrs6: Vec<(Ipv6Addr, u8)>,
    /// Sends out of the port; with an XDP port it also receives the control traffic the
    /// XDP program passed to the kernel.
    pub wire: Box<dyn Link>,
    /// The host stack's view of the port.
    pub tap: Option<Box<dyn Link>>,
}

impl CtlPort {
    fn owns4(&self, a: Ipv4Addr) -> bool {
        self.addrs4.iter().any(|(x, _)| *x == a)
    }

    fn owns6(&self, a: Ipv6Addr) -> bool {
        self.addrs6.iter().any(|(x, _)| *x == a)
    }

    fn on_link4(&self, a: Ipv4Addr) -> bool {
        self.addrs4.iter().any(|(x, l)| {
            let m = if *l == 0 { 0 } else { u32::MAX << (32 - l) };
            u32::from(*x) & m == u32::from(a) & m
        })
    }

    /// Our address to speak from to `a`: the one on its subnet, else the first.
    fn source4(&self, a: Ipv4Addr) -> Option<Ipv4Addr> {
        self.addrs4
            .iter()
            .find(|(x, l)| {
                let m = if *l == 0 { 0 } else { u32::MAX << (32 - l) };
                u32::from(*x) & m == u32::from(a) & m
            })
            .or(self.addrs4.first())
            .map(|(x, _)| *x)
    }

    fn link_local6(&self) -> Option<Ipv6Addr> {
        self.addrs6
            .iter()
            .find(|(a, _)| a.segments()[0] & 0xffc0 == 0xfe80)
            .or(self.addrs6.first())
            .map(|(a, _)| *a)
    }
}

/// What the control plane did, for the stats file.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct ControlCounters {
    /// Control frames taken in (from the kernel path and from workers).
    pub frames_in: u64,
    /// Frames dropped by a class's rate limit, per class (arp_nd, routing, icmp, local,
    /// slow_path).
    pub rate_limited: [u64; PuntClass::COUNT],
    /// Frames the ports' XDP programs dropped by the class's limit before the kernel saw
    /// them, per class as `rate_limited` (all classes but slow_path are policed there; see
    /// `vfsr_io::xdp::Policer`). Read from the programs' maps, not counted here.
    pub policed_xdp: [u64; PuntClass::COUNT],
    /// ARP requests for our addresses answered.
    pub arp_answered: u64,
    /// Neighbor Solicitations for our addresses answered.
    pub ns_answered: u64,
    /// Neighbor MACs learned or confirmed.
    pub neighbors_learned: u64,
    /// ARP requests and Neighbor Solicitations sent.
    pub solicits_sent: u64,
    /// Solicitations not sent: the port's `[neighbor] solicit_rate` was spent (the entry's
    /// timer goes on; a later retransmission may go out).
    pub solicits_limited: u64,
    /// Packets held while their next hop resolves.
    pub held: u64,
    /// Held packets sent after resolution.
    pub released: u64,
    /// Held packets dropped (queue full, resolution failed).
    pub hold_dropped: u64,
    /// Echo requests answered.
    pub echo_replies: u64,
    /// Frames written to a TAP (the host stack).
    pub to_host: u64,
    /// Frames for the host lost (no TAP, TAP queue full).
    pub to_host_dropped: u64,
    /// Times the XDP fast paths were retired after a neighbor change.
    pub fast_invalidations: u64,
    /// Frames the host sent out through a port.
    pub from_host: u64,
    /// Frames that could not be sent on a port.
    pub tx_failed: u64,
    /// Frames too short or malformed to handle.
    pub malformed: u64,
    /// Route publications that failed (the RIB kept the changes; the next one retries).
    pub publish_errors: u64,
    /// TAPs that went away under vfsrd (deleted, or their namespace removed): their port
    /// keeps forwarding, its frames for the host are dropped and counted in
    /// `to_host_dropped`.
    pub taps_lost: u64,
}

/// The control plane.
pub struct Control<E4: LpmUpdate<u32>, E6: LpmUpdate<u128>> {
    /// The router's state (RIB, FIBs, next hops, neighbor tables).
    pub router: Router<E4, E6>,
    /// The route sources' sockets (FPM, rtnetlink).
    pub sources: Sources,
    /// Ports, index = pipeline index - 1.
    pub ports: Vec<CtlPort>,
    inbox: Receiver<ToControl>,
    wake: Arc<Wake>,
    limits: [TokenBucket; PuntClass::COUNT],
    /// Per port: the solicitations it may still send.
    solicit_limits: Vec<TokenBucket>,
    /// Counters.
    pub counters: ControlCounters,
    start: Instant,
    last_timer_ms: u64,
    buf: Vec<u8>,
    /// The ports' XDP fast paths, retired whenever a neighbor change is published.
    fast: Vec<FastPath>,
    /// Neighbor snapshots published, as last seen by [`Control::sync_fast_paths`].
    fast_seen: u64,
    /// More descriptors a step waits on (the control API's).
    extra_fds: Vec<i32>,
    /// A route source had something to read in the last step: the next one waits up to
    /// [`COALESCE_MS`] without watching the sources (see [`Control::step`]).
    coalesce: bool,
    /// The workers' punt rates.
    worker_rates: Option<Arc<crate::dataplane::PuntRates>>,
    /// The `[punt]` rates in force.
    punt: PuntSection,
    /// The ports' XDP policers, set to the `[punt]` rates of the classes they police.
    policers: Vec<Policer>,
    /// Each policer's counters as last read (kept when a read fails, so that the sum never
    /// goes back).
    policed_last: Vec<PolicedCounters>,
    /// When the policers' counters were last read.
    policed_read: Option<Instant>,
}

impl<E4, E6> Control<E4, E6>
where
    E4: LpmUpdate<u32> + Clone,
    E6: LpmUpdate<u128> + Clone,
    E4::Config: Default,
    E6::Config: Default,
{
    /// The control plane of the router `plan` describes, with its ports' wires in memory
    /// (and a TAP in memory for each port whose position is in `taps`), for tests and fuzz
    /// targets: the control plane, then the far ends of the wires and of the TAPs, in port
    /// order. No worker can send to it (its inbox is closed).
    pub fn in_memory(
        plan: &Plan,
        macs: &[MacAddr],
        taps: &[usize],
        punt: &PuntSection,
    ) -> crate::error::Result<(Self, Vec<MemLink>, Vec<MemLink>)> {
        let (router, _) = crate::router::build::<E4, E6>(plan, macs)?;
        let specs = crate::router::port_specs(plan, macs);
        let (mut ports, mut wires, mut host) = (Vec::new(), Vec::new(), Vec::new());
        for (i, spec) in specs.iter().enumerate() {
            let (ours, theirs) = MemLink::pair();
            wires.push(theirs);
            let tap = taps.contains(&i).then(|| {
                let (t, h) = MemLink::pair();
                host.push(h);
                Box::new(t) as Box<dyn Link>
            });
            ports.push(CtlPort {
                ifindex: spec.ifindex,
                name: spec.name.clone(),
                mac: spec.mac,
                addrs4: spec.addrs4.clone(),
                addrs6: spec.addrs6.clone(),
                wire: Box::new(ours),
                tap,
            });
        }
        let (_, inbox) = std::sync::mpsc::sync_channel(1);
        let wake = Arc::new(Wake::new().map_err(|e| crate::error::Error::os("eventfd", e))?);
        Ok((Control::new(router, ports, inbox, wake, punt), wires, host))
    }

    /// A control plane over `router` and `ports`, reading what workers send on `inbox`.
    pub fn new(
        router: Router<E4, E6>,
        ports: Vec<CtlPort>,
        inbox: Receiver<ToControl>,
        wake: Arc<Wake>,
        punt: &PuntSection,
    ) -> Self {
        let limits = punt_limits(punt);
        let solicit_limits = solicit_buckets(ports.len(), NeighborSection::default().solicit_rate);
        Control {
            router,
            sources: Sources::none(),
            ports,
            inbox,
            wake,
            limits,
            solicit_limits,
            counters: ControlCounters::default(),
            start: Instant::now(),
            last_timer_ms: 0,
            buf: vec![0; 16 * 1024],
            fast: Vec::new(),
            fast_seen: 0,
            extra_fds: Vec::new(),
            coalesce: false,
            worker_rates: None,
            punt: *punt,
            policers: Vec::new(),
            policed_last: Vec::new(),
            policed_read: None,
        }
    }

    /// The most solicitations each port sends per second (`[neighbor] solicit_rate`; at
    /// start and on a reload).
    pub fn set_solicit_rate(&mut self, rate: u32) {
        self.solicit_limits = solicit_buckets(self.ports.len(), rate);
    }

    /// Whether port `i` may send a solicitation now; counts the ones it may not.
    fn solicit_allowed(&mut self, i: usize) -> bool {
        let now = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let ok = self.solicit_limits.get_mut(i).is_some_and(|b| b.allow(now));
        if !ok {
            self.counters.solicits_limited += 1;
        }
        ok
    }

    /// New per-class punt limits (a reload): the control plane's and, through the shared
    /// rates, the workers'.
    pub fn set_punt(&mut self, punt: &PuntSection) {
        self.limits = punt_limits(punt);
        self.punt = *punt;
        if let Some(r) = &self.worker_rates {
            r.set(punt);
        }
        self.apply_policing();
    }

    /// Gives the control plane the ports' XDP policers and sets them to the `[punt]` rates:
    /// each CPU's bucket gets the class's rate and burst, so the kernel path carries at most
    /// that many frames of the class per receiving CPU to this thread's own limit.
    pub fn set_policers(&mut self, policers: Vec<Policer>) {
        self.policed_last = vec![PolicedCounters::default(); policers.len()];
        self.policers = policers;
        self.apply_policing();
    }

    fn apply_policing(&mut self) {
        for p in &self.policers {
            for class in PolicedClass::ALL {
                let rate = crate::dataplane::rate_of(&self.punt, punt_class_of(class).index());
                if let Err(e) = p.set(class, rate, crate::dataplane::burst_of(rate)) {
                    // The control plane's own limit still holds; only the early drop is lost.
                    tracing::warn!(port = %p.name(), error = %e, "XDP policing not set");
                }
            }
            let syn = self.punt.tcp_syn;
            if let Err(e) = p.set_tcp_syn(syn, crate::dataplane::burst_of(syn)) {
                tracing::warn!(port = %p.name(), error = %e, "XDP policing of TCP SYNs not set");
            }
        }
    }

    /// Reads the XDP policers' counters into [`ControlCounters::policed_xdp`], unless they
    /// were read less than `max_age` ago.
    pub fn read_policed(&mut self, max_age: Duration) {
        if self.policers.is_empty() || self.policed_read.is_some_and(|t| t.elapsed() < max_age) {
            return;
        }
        self.policed_read = Some(Instant::now());
        let mut sum = [0u64; PuntClass::COUNT];
        for (p, last) in self.policers.iter().zip(self.policed_last.iter_mut()) {
            if let Ok(c) = p.counters() {
                *last = c;
            }
            for class in PolicedClass::ALL {
                if let Some(s) = sum.get_mut(punt_class_of(class).index()) {
                    *s += last.get(class);
                }
            }
        }
        self.counters.policed_xdp = sum;
    }

    /// The rates the workers limit punts by, changed by [`Control::set_punt`].
    pub fn set_worker_rates(&mut self, rates: Arc<crate::dataplane::PuntRates>) {
        self.worker_rates = Some(rates);
    }

    /// More descriptors for [`Control::step`] to wait on.
    pub fn set_extra_fds(&mut self, fds: Vec<i32>) {
        self.extra_fds = fds;
    }

    /// Gives the control plane the ports' XDP fast paths: their cached decisions hold a
    /// neighbor's MAC, so every published neighbor change retires them (see
    /// `vfsr_io::xdp::FastPath`).
    pub fn set_fast_paths(&mut self, fast: Vec<FastPath>) {
        self.fast = fast;
        self.fast_seen = self.published();
    }

    /// Neighbor snapshots published so far, over every port's ARP and ND table.
    fn published(&self) -> u64 {
        self.router
            .tables()
            .iter()
            .map(|t| t.arp.counters().published + t.nd.counters().published)
            .sum()
    }

    /// Bumps the fast paths' generation if a neighbor snapshot was published since the last
    /// call. The bump comes after the publication, which is what makes a worker's entry,
    /// tagged with the generation it read before loading its snapshots, never outlive the
    /// snapshot it came from.
    fn sync_fast_paths(&mut self) {
        if self.fast.is_empty() {
            return;
        }
        let p = self.published();
        if p != self.fast_seen {
            self.fast_seen = p;
            for f in &self.fast {
                f.invalidate();
            }
            self.counters.fast_invalidations += 1;
        }
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// The descriptors a step waits on: the wake-up eventfd, each port's socket, each TAP.
    pub fn poll_fds(&self) -> Vec<i32> {
        let mut v = vec![self.wake.fd()];
        v.extend(self.sources.fds());
        v.extend(self.extra_fds.iter().copied());
        for p in &self.ports {
            v.extend(p.wire.fd());
            if let Some(t) = &p.tap {
                v.extend(t.fd());
            }
        }
        v
    }

    /// One round: waits up to `timeout_ms` for something to do, then handles what the
    /// workers sent, what the ports and TAPs received, and due timers.
    ///
    /// A routing daemon streams routes a few at a time (zebra writes each one as it installs
    /// it, the kernel notifies each): woken by every message, the loop would spend its time
    /// in the round's system calls rather than on the routes. So after a round in which a
    /// route source was readable, the next one leaves the sources out of its wait and
    /// waits at most [`COALESCE_MS`] (the ports, TAPs and workers still wake it at once);
    /// the messages gathered meanwhile are read together.
    pub fn step(&mut self, timeout_ms: i32) {
        let sources = self.sources.fds();
        let skip_sources = std::mem::take(&mut self.coalesce);
        let mut fds: Vec<libc::pollfd> = self
            .poll_fds()
            .into_iter()
            .filter(|fd| !(skip_sources && sources.contains(fd)))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let mut wait = timeout_ms.min((TIMER_MS as i32).max(1));
        if skip_sources {
            wait = wait.min(COALESCE_MS);
        }
        // Route changes wait at most the publication bound; a source's timer its turn.
        let now = Instant::now();
        for d in [self.router.deadline(), self.sources.deadline()]
            .into_iter()
            .flatten()
        {
            let ms = d.saturating_duration_since(now).as_millis();
            wait = wait.min(i32::try_from(ms).unwrap_or(i32::MAX));
        }
        // SAFETY: `fds` is a live, correctly sized array of pollfd.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait) };
        if ready > 0 {
            self.drop_dead_taps(&fds);
            self.coalesce = fds
                .iter()
                .any(|f| f.revents & libc::POLLIN != 0 && sources.contains(&f.fd));
        }
        self.wake.drain();
        self.work();
    }

    /// A TAP whose device is gone polls as an error for ever (the kernel keeps the file
    /// open but detached): such a TAP is closed, or every later step would return at once
    /// and the control plane would spin.
    fn drop_dead_taps(&mut self, fds: &[libc::pollfd]) {
        const DEAD: libc::c_short = libc::POLLERR | libc::POLLHUP | libc::POLLNVAL;
        for p in &mut self.ports {
            let Some(fd) = p.tap.as_ref().and_then(|t| t.fd()) else {
                continue;
            };
            if fds.iter().any(|f| f.fd == fd && f.revents & DEAD != 0) {
                tracing::error!(
                    port = %p.name,
                    "the port's TAP went away; frames for the host on it are dropped from now on"
                );
                p.tap = None;
                self.counters.taps_lost += 1;
            }
        }
    }

    /// Handles everything waiting, without blocking.
    pub fn work(&mut self) {
        for _ in 0..4 * READ_BUDGET {
            match self.inbox.try_recv() {
                Ok(m) => self.handle_worker_msg(m),
                Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => break,
            }
        }
        let mut buf = std::mem::take(&mut self.buf);
        for i in 0..self.ports.len() {
            for _ in 0..READ_BUDGET {
                let Some(n) = self.ports.get_mut(i).and_then(|p| p.wire.recv(&mut buf)) else {
                    break;
                };
                if let Some(f) = buf.get(..n) {
                    self.input(i, f, None);
                }
            }
            for _ in 0..READ_BUDGET {
                let Some(p) = self.ports.get_mut(i) else {
                    break;
                };
                let Some(tap) = p.tap.as_mut() else { break };
                let Some(n) = tap.recv(&mut buf) else { break };
                let Some(f) = buf.get(..n) else { break };
                if p.wire.send(f) {
                    self.counters.from_host += 1;
                } else {
                    self.counters.tx_failed += 1;
                }
            }
        }
        self.buf = buf;
        let at = Instant::now();
        self.sources.work(at, &mut self.router);
        if let Err(e) = self.router.poll(at) {
            self.counters.publish_errors += 1;
            tracing::error!(error = %e, "publishing route changes (the RIB keeps them; retried)");
        }
        let now = self.now_ms();
        if now >= self.last_timer_ms + TIMER_MS {
            self.last_timer_ms = now;
            self.timers(now);
        }
        self.sync_fast_paths();
    }

    fn handle_worker_msg(&mut self, m: ToControl) {
        match m {
            ToControl::Punt { class, packet } => {
                let i = packet.iif as usize;
                if i >= 1 && i <= self.ports.len() {
                    self.input(i - 1, packet.frame(), Some(class));
                } else {
                    self.counters.malformed += 1;
                }
            }
            ToControl::Resolve {
                ifindex,
                nexthop,
                packet,
            } => self.hold(ifindex, nexthop, packet),
        }
    }

    /// Holds `packet` until `nexthop` on port `ifindex` resolves, soliciting it.
    pub fn hold(&mut self, ifindex: u32, nexthop: IpAddr, packet: Packet) {
        let now = self.now_ms();
        let i = ifindex as usize;
        let Some(t) = i
            .checked_sub(1)
            .and_then(|k| self.router.tables_mut().get_mut(k))
        else {
            self.counters.hold_dropped += 1;
            return;
        };
        self.counters.held += 1;
        match nexthop {
            IpAddr::V4(a) => {
                let o = t.arp.resolve(a, packet, now);
                t.arp.publish();
                self.after4(i - 1, a, o);
            }
            IpAddr::V6(a) => {
                let o = t.nd.resolve(a, packet, now);
                t.nd.publish();
                self.after6(i - 1, a, o);
            }
        }
    }

    /// Handles one control frame that arrived on port `i` (`class` known when a worker
    /// classified it).
    pub fn input(&mut self, i: usize, frame: &[u8], class: Option<PuntClass>) {
        self.counters.frames_in += 1;
        let Ok(et) = EthernetFrame::new_checked(frame).map(|e| e.ethertype()) else {
            self.counters.malformed += 1;
            return;
        };
        let class = class.unwrap_or_else(|| classify(et, frame));
        let now = self.now_ns();
        if let Some(b) = self.limits.get_mut(class.index()) {
            if !b.allow(now) {
                if let Some(c) = self.counters.rate_limited.get_mut(class.index()) {
                    *c += 1;
                }
                return;
            }
        }
        match et {
            ethertype::ARP => self.arp(i, frame),
            ethertype::IPV4 => {
                let ours = frames::dst4(frame)
                    .is_some_and(|d| self.ports.get(i).is_some_and(|p| p.owns4(d)));
                if ours && self.echo(i, frame) {
                    return;
                }
                self.punt_to_host(i, frame);
            }
            ethertype::IPV6 => {
                if let Some(m) = frames::parse_nd(frame) {
                    self.nd(i, frame, m);
                    return;
                }
                let ours = frames::dst6(frame)
                    .is_some_and(|d| self.ports.get(i).is_some_and(|p| p.owns6(d)));
                if ours && self.echo(i, frame) {
                    return;
                }
                self.punt_to_host(i, frame);
            }
            _ => self.punt_to_host(i, frame),
        }
    }

    fn echo(&mut self, i: usize, frame: &[u8]) -> bool {
        let Some(mac) = self.ports.get(i).map(|p| p.mac) else {
            return false;
        };
        let mut reply = frame.to_vec();
        if !frames::echo_reply_in_place(&mut reply) {
            return false;
        }
        // The reply leaves from the port's own MAC, whatever the request was sent to: a
        // broadcast (a source MAC must be unicast) or another station's MAC.
        if let Ok(mut eth) = EthernetFrame::new_checked(&mut reply[..]) {
            eth.set_src(mac);
        }
        self.counters.echo_replies += 1;
        self.send(i, &reply);
        true
    }

    fn send(&mut self, i: usize, frame: &[u8]) {
        let ok = self.ports.get_mut(i).is_some_and(|p| p.wire.send(frame));
        if !ok {
            self.counters.tx_failed += 1;
        }
    }

    fn punt_to_host(&mut self, i: usize, frame: &[u8]) {
        let ok = self
            .ports
            .get_mut(i)
            .and_then(|p| p.tap.as_mut())
            .is_some_and(|t| t.send(frame));
        if ok {
            self.counters.to_host += 1;
        } else {
            self.counters.to_host_dropped += 1;
        }
    }

    fn arp(&mut self, i: usize, frame: &[u8]) {
        let Some(a) = frames::parse_arp(frame) else {
            self.counters.malformed += 1;
            return;
        };
        let Some(port) = self.ports.get(i) else {
            return;
        };
        let mac = port.mac;
        let for_us = port.owns4(a.target_ip);
        let sender_on_link = port.on_link4(a.sender_ip) && !port.owns4(a.sender_ip);
        let now = self.now_ms();
        // RFC 826: update an entry we have; create one only when the message is for us.
        if sender_on_link && a.sender_hw.is_unicast() {
            let known = self
                .router
                .tables()
                .get(i)
                .is_some_and(|t| t.arp.get(&a.sender_ip).is_some());
            if known || for_us {
                let ev = if a.op == ArpOp::Reply {
                    Event::Advert {
                        mac: Some(a.sender_hw),
                        solicited: true,
                        override_flag: true,
                    }
                } else {
                    Event::LinkLayerHint(a.sender_hw)
                };
                if let Some(t) = self.router.tables_mut().get_mut(i) {
                    let o = t.arp.apply(a.sender_ip, ev, now);
                    t.arp.publish();
                    self.counters.neighbors_learned += 1;
                    self.after4(i, a.sender_ip, o);
                }
            }
        }
        match a.op {
            ArpOp::Request if for_us => {
                let reply = a.reply_to(mac);
                let f = frames::arp_frame(a.sender_hw, mac, &reply);
                self.counters.arp_answered += 1;
                self.send(i, &f);
            }
            // Replies reach the host stack too: it resolves its own neighbors through the TAP.
            ArpOp::Reply if for_us => self.punt_to_host(i, frame),
            _ => {}
        }
    }

    fn nd(&mut self, i: usize, frame: &[u8], m: frames::NdMessage) {
        let Some(port) = self.ports.get(i) else {
            return;
        };
        let mac = port.mac;
        let now = self.now_ms();
        match m.nd {
            NdRepr::NeighborSolicit { target, source_ll } => {
                if !port.owns6(target) {
                    return;
                }
                if let (Some(ll), false) = (source_ll, m.src.is_unspecified()) {
                    if let Some(t) = self.router.tables_mut().get_mut(i) {
                        let o = t.nd.apply(m.src, Event::LinkLayerHint(ll), now);
                        t.nd.publish();
                        self.counters.neighbors_learned += 1;
                        self.after6(i, m.src, o);
                    }
                }
                let to_mac = source_ll.unwrap_or(m.src_mac);
                if let Some(f) = frames::neighbor_advert(mac, target, m.src, to_mac) {
                    self.counters.ns_answered += 1;
                    self.send(i, &f);
                }
            }
            NdRepr::NeighborAdvert {
                solicited,
                override_,
                target,
                target_ll,
                ..
            } => {
                if let Some(t) = self.router.tables_mut().get_mut(i) {
                    if t.nd.get(&target).is_some() {
                        let ev = Event::Advert {
                            mac: target_ll,
                            solicited,
                            override_flag: override_,
                        };
                        let o = t.nd.apply(target, ev, now);
                        t.nd.publish();
                        self.counters.neighbors_learned += 1;
                        self.after6(i, target, o);
                    }
                }
                self.punt_to_host(i, frame);
            }
        }
    }

    /// Sends what a neighbor-table operation asks for on port `i`.
    fn after4(&mut self, i: usize, addr: Ipv4Addr, o: Outcome<Packet>) {
        if let Some(s) = o.solicit {
            self.solicit4(i, addr, s);
        }
        self.release(i, o);
    }

    fn after6(&mut self, i: usize, addr: Ipv6Addr, o: Outcome<Packet>) {
        if let Some(s) = o.solicit {
            self.solicit6(i, addr, s);
        }
        self.release(i, o);
    }

    fn release(&mut self, i: usize, o: Outcome<Packet>) {
        self.counters.hold_dropped += o.dropped.len() as u64;
        let (Some(mac), Some(port)) = (o.mac, self.ports.get(i)) else {
            self.counters.hold_dropped += o.transmit.len() as u64;
            return;
        };
        let src = port.mac;
        for mut p in o.transmit {
            if let Ok(mut eth) = EthernetFrame::new_checked(p.frame_mut()) {
                eth.set_dst(mac);
                eth.set_src(src);
            }
            self.counters.released += 1;
            self.send(i, p.frame());
        }
    }

    fn solicit4(&mut self, i: usize, addr: Ipv4Addr, s: Solicit) {
        let Some(port) = self.ports.get(i) else {
            return;
        };
        let Some(src) = port.source4(addr) else {
            return;
        };
        let mac = port.mac;
        if !self.solicit_allowed(i) {
            return;
        }
        let dst = match s {
            Solicit::Multicast => MacAddr::BROADCAST,
            Solicit::Unicast(m) => m,
        };
        let f = frames::arp_frame(dst, mac, &ArpRepr::request(mac, src, addr));
        self.counters.solicits_sent += 1;
        self.send(i, &f);
    }

    fn solicit6(&mut self, i: usize, addr: Ipv6Addr, s: Solicit) {
        let Some(port) = self.ports.get(i) else {
            return;
        };
        let Some(src) = port.link_local6() else {
            return;
        };
        let to = match s {
            Solicit::Multicast => None,
            Solicit::Unicast(m) => Some(m),
        };
        let f = frames::neighbor_solicit(port.mac, src, addr, to);
        if let Some(f) = f.filter(|_| self.solicit_allowed(i)) {
            self.counters.solicits_sent += 1;
            self.send(i, &f);
        }
    }

    /// Fires the neighbor tables' timers: retransmissions, probes, failures.
    fn timers(&mut self, now: u64) {
        for i in 0..self.router.tables().len() {
            let (fired4, fired6) = match self.router.tables_mut().get_mut(i) {
                Some(t) => {
                    let a = t.arp.expire(now);
                    let b = t.nd.expire(now);
                    t.arp.publish();
                    t.nd.publish();
                    (a, b)
                }
                None => continue,
            };
            for (a, o) in fired4 {
                self.after4(i, a, o);
            }
            for (a, o) in fired6 {
                self.after6(i, a, o);
            }
        }
    }
}

/// The control plane's class of a class the XDP program polices.
fn punt_class_of(class: PolicedClass) -> PuntClass {
    match class {
        PolicedClass::ArpNd => PuntClass::ArpNd,
        PolicedClass::Icmp => PuntClass::Icmp,
        PolicedClass::Routing => PuntClass::Routing,
        PolicedClass::Local => PuntClass::Local,
    }
}

/// One solicitation bucket per port, `rate` a second.
fn solicit_buckets(ports: usize, rate: u32) -> Vec<TokenBucket> {
    (0..ports)
        .map(|_| crate::dataplane::bucket_of(rate))
        .collect()
}

fn punt_limits(punt: &PuntSection) -> [TokenBucket; PuntClass::COUNT] {
    std::array::from_fn(|k| crate::dataplane::bucket_of(crate::dataplane::rate_of(punt, k)))
}

/// The class of a control frame read from the kernel path (the pipeline's own rules). A
/// header cut short reads as zeros (the views' unchecked form): the frame still gets a class.
pub fn classify(et: u16, frame: &[u8]) -> PuntClass {
    let ip = frame.get(HEADER_LEN..).unwrap_or(&[]);
    match et {
        ethertype::ARP => PuntClass::ArpNd,
        ethertype::IPV4 => {
            let p = Ipv4Packet::new_unchecked(ip);
            punt_class(p.protocol(), ports(p.payload()), None)
        }
        ethertype::IPV6 => {
            let p = Ipv6Packet::new_unchecked(ip);
            let nh = p.next_header();
            let l4 = p.payload();
            let icmp6 = if nh == ip_proto::ICMPV6 {
                l4.first().copied()
            } else {
                None
            };
            punt_class(nh, ports(l4), icmp6)
        }
        _ => PuntClass::Local,
    }
}

fn ports(l4: &[u8]) -> (u16, u16) {
    vfsr_wire::l4::ports(l4).unwrap_or((0, 0))
}
