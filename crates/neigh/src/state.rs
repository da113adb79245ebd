//! The neighbor state machine of RFC 4861 (section 7.3, Neighbor Unreachability Detection),
//! as a pure function: `step(entry, event, now, timers) -> (entry', actions)`.
//!
//! ARP (IPv4) runs the same machine: an ARP request plays the Neighbor Solicitation (sent
//! to the broadcast address where ND sends to the solicited-node multicast address), an ARP
//! reply plays a solicited Neighbor Advertisement with the override flag set, and an ARP
//! request received from the neighbor plays a solicitation carrying its link-layer address.
//!
//! ```text
//!                  (1)                 (3)
//!   (no entry) ─────────▶ INCOMPLETE ─────────▶ REACHABLE ◀──────────────┐
//!        │               │ ▲  │   ▲ (2)           │  ▲                   │
//!        │ (6)       (4) │ │  │   └──┘        (7) │  │ (8)               │ (8)
//!        │               │ │  │ (5)               ▼  │                   │
//!        └──────────────────────┴─────────────▶ STALE ──(9)──▶ DELAY ──(10)──▶ PROBE ─┐
//!                        ▼ │(12)                                  (11) │  ▲         │
//!                       FAILED ◀───────────────────────────────────────┘  └──(2')───┘
//!
//!   (1)  Resolve: multicast (ND) or broadcast (ARP) solicitation, the packet is held
//!   (2)  Timer, fewer than MAX_MULTICAST_SOLICIT sent: multicast solicitation again
//!   (2') Timer, fewer than MAX_UNICAST_SOLICIT sent: unicast probe again
//!   (3)  solicited advert with a MAC: flush the hold queue to it
//!   (4)  Timer, MAX_MULTICAST_SOLICIT sent: drop the hold queue
//!   (5)  unsolicited advert or hint with a MAC: flush the hold queue
//!   (6)  hint (NS / RS / ARP request from the neighbor, section 7.2.3): entry created
//!   (7)  Timer: reachable time over
//!   (8)  Confirmed, or solicited advert (from STALE, DELAY, PROBE)
//!   (9)  Resolve: the packet goes out with the stale MAC; DELAY_FIRST_PROBE_TIME runs
//!   (10) Timer: first unicast probe
//!   (11) Timer, MAX_UNICAST_SOLICIT sent: the MAC is forgotten
//!   (12) Resolve: start again
//!   Any state with a MAC: an advert that may override, or a hint, with a new MAC → STALE.
//! ```
//!
//! The advertisement rules are those of RFC 4861 section 7.2.5 and Appendix C:
//!
//! | current      | advert                             | result                           |
//! |--------------|------------------------------------|----------------------------------|
//! | INCOMPLETE   | no link-layer address              | unchanged                        |
//! | INCOMPLETE   | MAC, solicited                     | REACHABLE, flush hold queue      |
//! | INCOMPLETE   | MAC, unsolicited                   | STALE, flush hold queue          |
//! | any with MAC | override clear, MAC differs        | REACHABLE → STALE, else unchanged; MAC kept |
//! | any with MAC | solicited, override or same MAC    | REACHABLE, MAC updated           |
//! | any with MAC | unsolicited, override, MAC differs | STALE, MAC updated               |
//! | any with MAC | unsolicited, same MAC / no MAC     | unchanged                        |
//! | (no entry)   | any                                | ignored (not created)            |
//!
//! FAILED is treated as INCOMPLETE without a hold queue (RFC 4861 deletes such entries;
//! keeping them lets the table count and evict them first).
//!
//! Times are ticks the caller supplies (milliseconds by convention); nothing here reads a
//! clock. The state keeps one deadline: the expiry of whichever timer the state runs
//! (REACHABLE: reachable time; DELAY: first probe delay; INCOMPLETE and PROBE: retransmit).

/// A coarse time in milliseconds, supplied by the caller.
pub type Tick = u64;

/// An Ethernet MAC address: the packet layer's own type, so the rewrite stage writes what the
/// table holds without a conversion.
pub use vfsr_wire::MacAddr as Mac;

/// The RFC 4861 neighbor cache states (section 7.3.2), plus FAILED.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Resolution in progress: solicitations sent, no MAC yet, packets held.
    Incomplete,
    /// Reachability confirmed within the reachable time.
    Reachable,
    /// MAC known but not confirmed recently; used as is, verified on the next packet.
    Stale,
    /// A packet was sent with a stale MAC; waiting for an upper-layer confirmation.
    Delay,
    /// Unicast probes in flight.
    Probe,
    /// Resolution or probing gave up; no MAC.
    Failed,
}

impl State {
    /// Whether an entry in this state carries a MAC packets may be sent to.
    pub fn is_usable(self) -> bool {
        matches!(
            self,
            State::Reachable | State::Stale | State::Delay | State::Probe
        )
    }
}

/// Protocol constants (RFC 4861 section 10), all in ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timers {
    /// ReachableTime (the caller picks it, randomized around BaseReachableTime 30 s).
    pub reachable_time: Tick,
    /// DELAY_FIRST_PROBE_TIME, 5 s.
    pub delay_first_probe: Tick,
    /// RetransTimer, 1 s.
    pub retrans: Tick,
    /// MAX_MULTICAST_SOLICIT, 3.
    pub max_multicast_solicit: u8,
    /// MAX_UNICAST_SOLICIT, 3.
    pub max_unicast_solicit: u8,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            reachable_time: 30_000,
            delay_first_probe: 5_000,
            retrans: 1_000,
            max_multicast_solicit: 3,
            max_unicast_solicit: 3,
        }
    }
}

/// One neighbor's resolution state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nud {
    /// The state.
    pub state: State,
    /// The link-layer address: `Some` exactly in the usable states.
    pub mac: Option<Mac>,
    /// Solicitations sent in the current INCOMPLETE or PROBE round.
    pub probes: u8,
    /// When the running timer expires, if one runs.
    pub deadline: Option<Tick>,
}

/// What happened to a neighbor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A packet (or a worker on its behalf) wants to go to this neighbor.
    Resolve,
    /// The control plane reports a solicitation actually left at `now`: the retransmit
    /// timer restarts from then (INCOMPLETE and PROBE only).
    SolicitationSent,
    /// A Neighbor Advertisement (or, for ARP, a reply: solicited with override set).
    Advert {
        /// The target link-layer address option, if present.
        mac: Option<Mac>,
        /// The S flag.
        solicited: bool,
        /// The O flag.
        override_flag: bool,
    },
    /// The neighbor's MAC learned from a packet it sent us (NS, RS, Redirect source
    /// link-layer option, or an ARP request), RFC 4861 section 7.2.3.
    LinkLayerHint(Mac),
    /// Upper-layer reachability confirmation (section 7.3.1).
    Confirmed,
    /// The clock reached `now`: the running timer fires if its deadline has passed.
    Timer,
}

/// A solicitation to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Solicit {
    /// To the solicited-node multicast address (ND) or broadcast (ARP).
    Multicast,
    /// A unicast probe to the cached MAC.
    Unicast(Mac),
}

/// What to do with the neighbor's hold queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum QueueAction {
    /// Leave it as it is.
    #[default]
    Keep,
    /// Send every held packet to the (now known) MAC.
    Flush,
    /// Resolution failed: drop every held packet and count them.
    Drop,
}

/// The side effects a transition asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Actions {
    /// A solicitation to send, if any.
    pub solicit: Option<Solicit>,
    /// What to do with the hold queue.
    pub queue: QueueAction,
}

impl Actions {
    const NONE: Actions = Actions {
        solicit: None,
        queue: QueueAction::Keep,
    };
}

impl Nud {
    fn with(state: State, mac: Option<Mac>, probes: u8, deadline: Option<Tick>) -> Nud {
        Nud {
            state,
            mac,
            probes,
            deadline,
        }
    }

    fn reachable(mac: Mac, now: Tick, t: &Timers) -> Nud {
        Nud::with(
            State::Reachable,
            Some(mac),
            0,
            Some(now.saturating_add(t.reachable_time)),
        )
    }

    fn stale(mac: Mac) -> Nud {
        Nud::with(State::Stale, Some(mac), 0, None)
    }

    fn incomplete(now: Tick, t: &Timers) -> (Nud, Actions) {
        (
            Nud::with(
                State::Incomplete,
                None,
                1,
                Some(now.saturating_add(t.retrans)),
            ),
            Actions {
                solicit: Some(Solicit::Multicast),
                queue: QueueAction::Keep,
            },
        )
    }
}

/// One transition. `cur` is `None` when the table has no entry for the neighbor; the result
/// is `None` when the event does not create one.
pub fn step(cur: Option<&Nud>, event: Event, now: Tick, t: &Timers) -> (Option<Nud>, Actions) {
    let Some(cur) = cur else {
        return match event {
            Event::Resolve => {
                let (n, a) = Nud::incomplete(now, t);
                (Some(n), a)
            }
            Event::LinkLayerHint(mac) => (Some(Nud::stale(mac)), Actions::NONE),
            _ => (None, Actions::NONE),
        };
    };
    let (n, a) = step_entry(cur, event, now, t);
    (Some(n), a)
}

fn step_entry(cur: &Nud, event: Event, now: Tick, t: &Timers) -> (Nud, Actions) {
    let unchanged = (*cur, Actions::NONE);
    let flush = Actions {
        solicit: None,
        queue: QueueAction::Flush,
    };
    let resolving = matches!(cur.state, State::Incomplete | State::Failed);
    match event {
        Event::Resolve => match cur.state {
            State::Failed => Nud::incomplete(now, t),
            State::Stale => (
                Nud::with(
                    State::Delay,
                    cur.mac,
                    0,
                    Some(now.saturating_add(t.delay_first_probe)),
                ),
                Actions::NONE,
            ),
            _ => unchanged,
        },
        Event::SolicitationSent => match cur.state {
            State::Incomplete | State::Probe => (
                Nud {
                    deadline: Some(now.saturating_add(t.retrans)),
                    ..*cur
                },
                Actions::NONE,
            ),
            _ => unchanged,
        },
        Event::LinkLayerHint(mac) => {
            if resolving {
                (Nud::stale(mac), flush)
            } else if cur.mac == Some(mac) {
                unchanged
            } else {
                (Nud::stale(mac), Actions::NONE)
            }
        }
        Event::Advert {
            mac,
            solicited,
            override_flag,
        } => {
            if resolving {
                return match (mac, solicited) {
                    (None, _) => unchanged,
                    (Some(m), true) => (Nud::reachable(m, now, t), flush),
                    (Some(m), false) => (Nud::stale(m), flush),
                };
            }
            let differs = matches!((mac, cur.mac), (Some(m), Some(c)) if m != c);
            let Some(known) = mac.or(cur.mac) else {
                return unchanged;
            };
            if differs && !override_flag {
                return if cur.state == State::Reachable {
                    (Nud::with(State::Stale, cur.mac, 0, None), Actions::NONE)
                } else {
                    unchanged
                };
            }
            if solicited {
                (Nud::reachable(known, now, t), Actions::NONE)
            } else if differs {
                (Nud::stale(known), Actions::NONE)
            } else {
                unchanged
            }
        }
        Event::Confirmed => match (cur.state.is_usable(), cur.mac) {
            (true, Some(m)) => (Nud::reachable(m, now, t), Actions::NONE),
            _ => unchanged,
        },
        Event::Timer => {
            let Some(deadline) = cur.deadline else {
                return unchanged;
            };
            if now < deadline {
                return unchanged;
            }
            let retrans = Some(now.saturating_add(t.retrans));
            match (cur.state, cur.mac) {
                (State::Reachable, Some(m)) => (Nud::stale(m), Actions::NONE),
                (State::Delay, Some(m)) => (
                    Nud::with(State::Probe, Some(m), 1, retrans),
                    Actions {
                        solicit: Some(Solicit::Unicast(m)),
                        queue: QueueAction::Keep,
                    },
                ),
                (State::Probe, Some(m)) if cur.probes < t.max_unicast_solicit => (
                    Nud::with(State::Probe, Some(m), cur.probes.saturating_add(1), retrans),
                    Actions {
                        solicit: Some(Solicit::Unicast(m)),
                        queue: QueueAction::Keep,
                    },
                ),
                (State::Incomplete, _) if cur.probes < t.max_multicast_solicit => (
                    Nud::with(
                        State::Incomplete,
                        None,
                        cur.probes.saturating_add(1),
                        retrans,
                    ),
                    Actions {
                        solicit: Some(Solicit::Multicast),
                        queue: QueueAction::Keep,
                    },
                ),
                (State::Incomplete | State::Probe, _) => (
                    Nud::with(State::Failed, None, 0, None),
                    Actions {
                        solicit: None,
                        queue: QueueAction::Drop,
                    },
                ),
                // Stale and Failed run no timer; a usable state without a MAC cannot be
                // built here, and is left alone rather than trusted.
                _ => (
                    Nud {
                        deadline: None,
                        ..*cur
                    },
                    Actions::NONE,
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use QueueAction::{Drop, Flush, Keep};
    use State::*;

    const A: Mac = Mac([2, 0, 0, 0, 0, 1]);
    const B: Mac = Mac([2, 0, 0, 0, 0, 2]);
    const NOW: Tick = 10_000;

    fn t() -> Timers {
        Timers::default()
    }

    fn nud(state: State, mac: Option<Mac>, probes: u8, deadline: Option<Tick>) -> Nud {
        Nud::with(state, mac, probes, deadline)
    }

    fn adv(mac: Option<Mac>, solicited: bool, override_flag: bool) -> Event {
        Event::Advert {
            mac,
            solicited,
            override_flag,
        }
    }

    /// (name, start, event, end state, end MAC, solicitation, queue action)
    type Row = (
        &'static str,
        Option<Nud>,
        Event,
        Option<State>,
        Option<Mac>,
        Option<Solicit>,
        QueueAction,
    );

    fn rows() -> Vec<Row> {
        let inc = Some(nud(Incomplete, None, 1, Some(NOW + 1)));
        let inc_last = Some(nud(Incomplete, None, 3, Some(NOW)));
        let inc_retry = Some(nud(Incomplete, None, 2, Some(NOW)));
        let reach = Some(nud(Reachable, Some(A), 0, Some(NOW + 5)));
        let reach_due = Some(nud(Reachable, Some(A), 0, Some(NOW)));
        let stale = Some(nud(Stale, Some(A), 0, None));
        let delay = Some(nud(Delay, Some(A), 0, Some(NOW + 5)));
        let delay_due = Some(nud(Delay, Some(A), 0, Some(NOW)));
        let probe = Some(nud(Probe, Some(A), 1, Some(NOW)));
        let probe_last = Some(nud(Probe, Some(A), 3, Some(NOW)));
        let failed = Some(nud(Failed, None, 0, None));
        let um = Some(Solicit::Multicast);
        let uu = Some(Solicit::Unicast(A));
        vec![
            // No entry (7.2.5: adverts for unknown targets are ignored; 7.2.3 hints create STALE).
            (
                "none+resolve",
                None,
                Event::Resolve,
                Some(Incomplete),
                None,
                um,
                Keep,
            ),
            (
                "none+advert",
                None,
                adv(Some(A), true, true),
                None,
                None,
                None,
                Keep,
            ),
            (
                "none+hint",
                None,
                Event::LinkLayerHint(A),
                Some(Stale),
                Some(A),
                None,
                Keep,
            ),
            (
                "none+confirm",
                None,
                Event::Confirmed,
                None,
                None,
                None,
                Keep,
            ),
            ("none+timer", None, Event::Timer, None, None, None, Keep),
            // INCOMPLETE (7.2.2, 7.2.5, Appendix C).
            (
                "inc+resolve",
                inc,
                Event::Resolve,
                Some(Incomplete),
                None,
                None,
                Keep,
            ),
            (
                "inc+adv S",
                inc,
                adv(Some(A), true, false),
                Some(Reachable),
                Some(A),
                None,
                Flush,
            ),
            (
                "inc+adv !S",
                inc,
                adv(Some(A), false, true),
                Some(Stale),
                Some(A),
                None,
                Flush,
            ),
            (
                "inc+adv no lla",
                inc,
                adv(None, true, true),
                Some(Incomplete),
                None,
                None,
                Keep,
            ),
            (
                "inc+hint",
                inc,
                Event::LinkLayerHint(A),
                Some(Stale),
                Some(A),
                None,
                Flush,
            ),
            (
                "inc+confirm",
                inc,
                Event::Confirmed,
                Some(Incomplete),
                None,
                None,
                Keep,
            ),
            (
                "inc+timer early",
                inc,
                Event::Timer,
                Some(Incomplete),
                None,
                None,
                Keep,
            ),
            (
                "inc+timer retry",
                inc_retry,
                Event::Timer,
                Some(Incomplete),
                None,
                um,
                Keep,
            ),
            (
                "inc+timer give up",
                inc_last,
                Event::Timer,
                Some(Failed),
                None,
                None,
                Drop,
            ),
            // REACHABLE.
            (
                "reach+resolve",
                reach,
                Event::Resolve,
                Some(Reachable),
                Some(A),
                None,
                Keep,
            ),
            (
                "reach+timer",
                reach_due,
                Event::Timer,
                Some(Stale),
                Some(A),
                None,
                Keep,
            ),
            (
                "reach+timer early",
                reach,
                Event::Timer,
                Some(Reachable),
                Some(A),
                None,
                Keep,
            ),
            (
                "reach+adv !O other",
                reach,
                adv(Some(B), true, false),
                Some(Stale),
                Some(A),
                None,
                Keep,
            ),
            (
                "reach+adv O S other",
                reach,
                adv(Some(B), true, true),
                Some(Reachable),
                Some(B),
                None,
                Keep,
            ),
            (
                "reach+adv O !S other",
                reach,
                adv(Some(B), false, true),
                Some(Stale),
                Some(B),
                None,
                Keep,
            ),
            (
                "reach+adv !S same",
                reach,
                adv(Some(A), false, false),
                Some(Reachable),
                Some(A),
                None,
                Keep,
            ),
            (
                "reach+hint other",
                reach,
                Event::LinkLayerHint(B),
                Some(Stale),
                Some(B),
                None,
                Keep,
            ),
            (
                "reach+hint same",
                reach,
                Event::LinkLayerHint(A),
                Some(Reachable),
                Some(A),
                None,
                Keep,
            ),
            (
                "reach+confirm",
                reach,
                Event::Confirmed,
                Some(Reachable),
                Some(A),
                None,
                Keep,
            ),
            // STALE.
            (
                "stale+resolve",
                stale,
                Event::Resolve,
                Some(Delay),
                Some(A),
                None,
                Keep,
            ),
            (
                "stale+timer",
                stale,
                Event::Timer,
                Some(Stale),
                Some(A),
                None,
                Keep,
            ),
            (
                "stale+adv S same",
                stale,
                adv(Some(A), true, false),
                Some(Reachable),
                Some(A),
                None,
                Keep,
            ),
            (
                "stale+adv S no lla",
                stale,
                adv(None, true, false),
                Some(Reachable),
                Some(A),
                None,
                Keep,
            ),
            (
                "stale+adv !O other",
                stale,
                adv(Some(B), true, false),
                Some(Stale),
                Some(A),
                None,
                Keep,
            ),
            (
                "stale+adv !S O other",
                stale,
                adv(Some(B), false, true),
                Some(Stale),
                Some(B),
                None,
                Keep,
            ),
            (
                "stale+confirm",
                stale,
                Event::Confirmed,
                Some(Reachable),
                Some(A),
                None,
                Keep,
            ),
            // DELAY.
            (
                "delay+timer early",
                delay,
                Event::Timer,
                Some(Delay),
                Some(A),
                None,
                Keep,
            ),
            (
                "delay+timer",
                delay_due,
                Event::Timer,
                Some(Probe),
                Some(A),
                uu,
                Keep,
            ),
            (
                "delay+confirm",
                delay,
                Event::Confirmed,
                Some(Reachable),
                Some(A),
                None,
                Keep,
            ),
            (
                "delay+adv S",
                delay,
                adv(Some(A), true, false),
                Some(Reachable),
                Some(A),
                None,
                Keep,
            ),
            (
                "delay+adv !O other",
                delay,
                adv(Some(B), true, false),
                Some(Delay),
                Some(A),
                None,
                Keep,
            ),
            (
                "delay+resolve",
                delay,
                Event::Resolve,
                Some(Delay),
                Some(A),
                None,
                Keep,
            ),
            // PROBE.
            (
                "probe+timer retry",
                probe,
                Event::Timer,
                Some(Probe),
                Some(A),
                uu,
                Keep,
            ),
            (
                "probe+timer give up",
                probe_last,
                Event::Timer,
                Some(Failed),
                None,
                None,
                Drop,
            ),
            (
                "probe+adv S",
                probe,
                adv(Some(A), true, false),
                Some(Reachable),
                Some(A),
                None,
                Keep,
            ),
            (
                "probe+adv !S O other",
                probe,
                adv(Some(B), false, true),
                Some(Stale),
                Some(B),
                None,
                Keep,
            ),
            (
                "probe+confirm",
                probe,
                Event::Confirmed,
                Some(Reachable),
                Some(A),
                None,
                Keep,
            ),
            (
                "probe+resolve",
                probe,
                Event::Resolve,
                Some(Probe),
                Some(A),
                None,
                Keep,
            ),
            // FAILED.
            (
                "failed+resolve",
                failed,
                Event::Resolve,
                Some(Incomplete),
                None,
                um,
                Keep,
            ),
            (
                "failed+adv S",
                failed,
                adv(Some(A), true, false),
                Some(Reachable),
                Some(A),
                None,
                Flush,
            ),
            (
                "failed+hint",
                failed,
                Event::LinkLayerHint(A),
                Some(Stale),
                Some(A),
                None,
                Flush,
            ),
            (
                "failed+timer",
                failed,
                Event::Timer,
                Some(Failed),
                None,
                None,
                Keep,
            ),
            (
                "failed+confirm",
                failed,
                Event::Confirmed,
                Some(Failed),
                None,
                None,
                Keep,
            ),
        ]
    }

    #[test]
    fn transitions_follow_rfc4861() {
        for (name, start, ev, state, mac, solicit, queue) in rows() {
            let (got, act) = step(start.as_ref(), ev, NOW, &t());
            assert_eq!(got.map(|n| n.state), state, "{name}: state");
            assert_eq!(got.and_then(|n| n.mac), mac, "{name}: mac");
            assert_eq!(act.solicit, solicit, "{name}: solicitation");
            assert_eq!(act.queue, queue, "{name}: queue");
            if let Some(n) = got {
                assert_eq!(
                    n.state.is_usable(),
                    n.mac.is_some(),
                    "{name}: MAC invariant"
                );
            }
        }
    }

    #[test]
    fn timers_are_armed_from_now() {
        let t = t();
        let (n, _) = step(None, Event::Resolve, NOW, &t);
        assert_eq!(n.and_then(|n| n.deadline), Some(NOW + t.retrans));
        let stale = nud(Stale, Some(A), 0, None);
        let (n, _) = step(Some(&stale), Event::Resolve, NOW, &t);
        assert_eq!(n.and_then(|n| n.deadline), Some(NOW + t.delay_first_probe));
        let (n, _) = step(Some(&stale), Event::Confirmed, NOW, &t);
        assert_eq!(n.and_then(|n| n.deadline), Some(NOW + t.reachable_time));
        let inc = nud(Incomplete, None, 1, Some(NOW + 1));
        let (n, _) = step(Some(&inc), Event::SolicitationSent, NOW + 500, &t);
        assert_eq!(n.and_then(|n| n.deadline), Some(NOW + 500 + t.retrans));
        let (n, _) = step(Some(&stale), Event::SolicitationSent, NOW, &t);
        assert_eq!(n, Some(stale));
    }

    #[test]
    fn incomplete_sends_max_multicast_then_fails() {
        let t = t();
        let (mut n, a) = step(None, Event::Resolve, 0, &t);
        let mut sent = usize::from(a.solicit.is_some());
        let mut now = 0;
        while n.map(|n| n.state) == Some(Incomplete) {
            now += t.retrans;
            let (m, a) = step(n.as_ref(), Event::Timer, now, &t);
            sent += usize::from(a.solicit.is_some());
            n = m;
        }
        assert_eq!(sent, usize::from(t.max_multicast_solicit));
        assert_eq!(n.map(|n| n.state), Some(Failed));
        assert_eq!(now, u64::from(t.max_multicast_solicit) * t.retrans);
    }

    #[test]
    fn delay_probes_max_unicast_then_fails() {
        let t = t();
        let stale = nud(Stale, Some(A), 0, None);
        let (mut n, _) = step(Some(&stale), Event::Resolve, 0, &t);
        let mut now = t.delay_first_probe;
        let mut sent = 0;
        loop {
            let (m, a) = step(n.as_ref(), Event::Timer, now, &t);
            sent += usize::from(a.solicit.is_some());
            n = m;
            if n.map(|n| n.state) == Some(Failed) {
                assert_eq!(a.queue, Drop);
                break;
            }
            now += t.retrans;
        }
        assert_eq!(sent, usize::from(t.max_unicast_solicit));
    }
}
