//! A token bucket for the ICMP errors a worker sends.
//!
//! RFC 1812 4.3.2.8 asks routers to limit the rate of ICMP errors they originate, and RFC
//! 4443 2.4 (f) requires it for ICMPv6; a token bucket is the method RFC 4443 suggests. Each
//! worker owns one (no sharing, no atomics): a flood of expiring packets on one core costs
//! that core at most `rate` errors per second after an initial `burst`. The defaults are
//! Linux's `icmp_msgs_per_sec` (1000) and `icmp_msgs_burst` (50).
//!
//! Tokens are kept in nanoseconds of credit, integers only: one token is worth
//! `1e9 / rate` ns, the bucket holds at most `burst` tokens' worth, and time passing adds
//! credit one for one.
//!
//! ```text
//!   credit (ns) ▲  burst × cost ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─
//!               │ ████                       ╱
//!               │ ████▄▄▄                  ╱  refill: +1 ns of credit per ns
//!               │        ▀▀▀▄▄▄ errors   ╱
//!               │              ▀▀▀▄▄▄  ╱    an error takes `cost`
//!               └──────────────────────────────▶ time
//! ```

/// A token bucket driven by a caller-supplied monotonic clock in nanoseconds.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    /// Nanoseconds of credit one token costs (0 when the rate is 0: never allow).
    cost: u64,
    /// Most credit the bucket holds.
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
    /// allows nothing.
    pub fn new(rate_per_s: u32, burst: u32) -> TokenBucket {
        let cost = if rate_per_s == 0 {
            0
        } else {
            (1_000_000_000 / u64::from(rate_per_s)).max(1)
        };
        let cap = cost.saturating_mul(u64::from(burst.max(1)));
        TokenBucket {
            cost,
            cap,
            credit: cap,
            last: None,
        }
    }

    /// Takes one token at `now_ns`; `false` when there is none. Time going backwards adds
    /// nothing; a long pause fills the bucket to its burst, no more.
    pub fn allow(&mut self, now_ns: u64) -> bool {
        if self.cost == 0 {
            return false;
        }
        if let Some(last) = self.last {
            if now_ns > last {
                self.credit = self.credit.saturating_add(now_ns - last).min(self.cap);
                self.last = Some(now_ns);
            }
        } else {
            self.last = Some(now_ns);
        }
        if self.credit >= self.cost {
            self.credit -= self.cost;
            true
        } else {
            false
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
}
