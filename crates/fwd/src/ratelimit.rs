//! A token bucket for the ICMP errors a worker sends.
//!
//! RFC 1812 4.3.2.8 asks routers to limit the rate of ICMP errors they originate, and RFC
//! 4443 2.4 (f) requires it for ICMPv6; a token bucket is the method RFC 4443 suggests. Each
//! worker owns one (no sharing, no atomics): a flood of expiring packets on one core costs
//! that core at most `rate` errors per second after an initial `burst`. The defaults are
//! Linux's `icmp_msgs_per_sec` (1000) and `icmp_msgs_burst` (50).
//!
//! Integers only, and exact for every rate. Credit is counted in units of 1/`rate` of a
//! nanosecond's worth of tokens ("rate-nanoseconds"): a token costs 10^9 units, each
//! nanosecond that passes adds `rate` units, and the bucket holds at most `burst` × 10^9.
//! So 1000/s gives a token every 1 000 000 ns and 3/s exactly three tokens a second (a
//! per-token cost in whole nanoseconds, 333 333 333 ns, would drift). The largest credit,
//! `u32::MAX` × 10^9 ≈ 4.3 × 10^18, fits a `u64`; the refill saturates before the cap.
//!
//! ```text
//!   credit ▲  burst × 10^9 ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─
//!          │ ████                          ╱
//!          │ ████▄▄▄                     ╱   refill: + rate per ns elapsed
//!          │        ▀▀▀▄▄▄ errors      ╱
//!          │              ▀▀▀▄▄▄     ╱       each error takes 10^9
//!          └────────────────────────────────▶ time (ns, from the caller)
//! ```
//!
//! The clock is the caller's (a monotonic nanosecond count read once per batch): the bucket
//! never reads time itself, so tests drive it with simulated time. A clock that goes
//! backwards adds nothing (and the bucket waits for it to pass the last time seen again); a
//! long pause fills the bucket to `burst`, no more.

/// Credit units one token costs: 10^9, one second's worth at a rate of one per second.
const TOKEN: u64 = 1_000_000_000;

/// A token bucket driven by a caller-supplied monotonic clock in nanoseconds.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    /// Credit units added per nanosecond: the rate in tokens per second (0: never allow).
    rate: u64,
    /// Most credit the bucket holds: `burst` tokens.
    cap: u64,
    /// Credit now.
    credit: u64,
    /// Time of the last refill; `None` until the first call.
    last: Option<u64>,
}

impl TokenBucket {
    /// Linux's default rate (`net.ipv4.icmp_msgs_per_sec`).
    pub const DEFAULT_RATE: u32 = 1000;
    /// Linux's default burst (`net.ipv4.icmp_msgs_burst`).
    pub const DEFAULT_BURST: u32 = 50;

    /// `rate_per_s` tokens per second, at most `burst` stored; starts full. A rate of 0
    /// allows nothing; a burst of 0 is taken as 1 (a bucket that can hold no token would
    /// allow nothing either, whatever the rate).
    pub fn new(rate_per_s: u32, burst: u32) -> TokenBucket {
        let cap = TOKEN.saturating_mul(u64::from(burst.max(1)));
        TokenBucket {
            rate: u64::from(rate_per_s),
            cap,
            credit: cap,
            last: None,
        }
    }

    /// Takes one token at `now_ns`; `false` when there is none. Time going backwards adds
    /// nothing; a long pause fills the bucket to its burst, no more.
    pub fn allow(&mut self, now_ns: u64) -> bool {
        if self.rate == 0 {
            return false;
        }
        match self.last {
            Some(last) if now_ns > last => {
                let gained = (now_ns - last).saturating_mul(self.rate);
                self.credit = self.credit.saturating_add(gained).min(self.cap);
                self.last = Some(now_ns);
            }
            Some(_) => {}
            None => self.last = Some(now_ns),
        }
        match self.credit.checked_sub(TOKEN) {
            Some(left) => {
                self.credit = left;
                true
            }
            None => false,
        }
    }
}

impl Default for TokenBucket {
    fn default() -> Self {
        TokenBucket::new(Self::DEFAULT_RATE, Self::DEFAULT_BURST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_empty() {
        let mut b = TokenBucket::new(1000, 50);
        let t = 5_000_000_000;
        assert_eq!((0..100).filter(|_| b.allow(t)).count(), 50);
        assert!(!b.allow(t));
    }

    #[test]
    fn refills_at_the_rate() {
        let mut b = TokenBucket::new(1000, 50);
        let mut t = 1_000;
        while b.allow(t) {}
        // One token per millisecond, exactly.
        t += 999_999;
        assert!(!b.allow(t));
        t += 1;
        assert!(b.allow(t));
        assert!(!b.allow(t));
        // Ten seconds of simulated time at one try per 100 µs: 10,000 tokens.
        let mut sent = 0;
        for _ in 0..100_000 {
            t += 100_000;
            sent += usize::from(b.allow(t));
        }
        assert_eq!(sent, 10_000);
    }

    #[test]
    fn zero_rate_and_clock_edges() {
        let mut z = TokenBucket::new(0, 50);
        assert!(!z.allow(0));
        assert!(!z.allow(u64::MAX));
        let mut b = TokenBucket::new(1000, 2);
        assert!(b.allow(u64::MAX - 10));
        assert!(b.allow(u64::MAX - 10));
        assert!(!b.allow(5), "time going backwards adds nothing");
        assert!(!b.allow(u64::MAX - 10));
        let mut c = TokenBucket::new(u32::MAX, u32::MAX);
        assert!(c.allow(0));
        // A long pause fills to the burst only.
        let mut d = TokenBucket::new(1000, 3);
        for _ in 0..3 {
            assert!(d.allow(0));
        }
        assert_eq!((0..10).filter(|_| d.allow(3_600_000_000_000)).count(), 3);
    }

    #[test]
    fn rates_that_do_not_divide_a_second_are_exact() {
        // 3/s: the k-th token after an empty bucket comes at ceil(k × 10^9 / 3) ns. A cost in
        // whole nanoseconds (333 333 333) would give the third at 999 999 999 ns.
        let mut b = TokenBucket::new(3, 5);
        assert_eq!((0..9).filter(|_| b.allow(0)).count(), 5);
        for at in [333_333_334u64, 666_666_667, 1_000_000_000] {
            assert!(!b.allow(at - 1), "{at}");
            assert!(b.allow(at), "{at}");
            assert!(!b.allow(at));
        }
        // Over a simulated minute at one try per microsecond: 7/s gives 420 exactly.
        let mut b = TokenBucket::new(7, 2);
        assert!(b.allow(0) && b.allow(0) && !b.allow(0));
        let sent = (1..=60_000_000u64).filter(|us| b.allow(us * 1_000)).count();
        assert_eq!(sent, 420);
    }

    #[test]
    fn burst_zero_holds_one_and_default_is_linux() {
        let mut b = TokenBucket::new(1000, 0);
        assert!(b.allow(0));
        assert!(!b.allow(0));
        assert!(b.allow(1_000_000));
        let mut d = TokenBucket::default();
        assert_eq!((0..60).filter(|_| d.allow(42)).count(), 50);
        // The largest rate and burst neither overflow nor stall.
        let mut m = TokenBucket::new(u32::MAX, u32::MAX);
        assert_eq!((0..1000).filter(|_| m.allow(0)).count(), 1000);
        assert!(m.allow(u64::MAX));
    }
}
