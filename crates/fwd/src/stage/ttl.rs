//! Stage 4, `ttl`: will the packet live through this hop?
//!
//! RFC 1812 5.3.1: a router forwarding a packet with TTL 0 or 1 discards it and sends ICMP
//! Time Exceeded (code 0); RFC 8200 3 and RFC 4443 3.3 say the same of the IPv6 hop limit.
//! The check comes before the route lookup (an expired packet is answered even without a
//! route); the decrement itself is done by `rewrite`, after every stage that may still quote
//! the packet in an ICMP error, so that quotes show the header as it arrived (as Linux does).

/// What `ttl` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TtlOutcome {
    /// At least 2: it may be forwarded.
    Alive,
    /// 0 or 1: Time Exceeded.
    Expired,
}

/// Runs the stage on a TTL or hop limit.
#[inline]
pub fn ttl_check(ttl: u8) -> TtlOutcome {
    if ttl <= 1 {
        TtlOutcome::Expired
    } else {
        TtlOutcome::Alive
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries() {
        assert_eq!(ttl_check(0), TtlOutcome::Expired);
        assert_eq!(ttl_check(1), TtlOutcome::Expired);
        assert_eq!(ttl_check(2), TtlOutcome::Alive);
        assert_eq!(ttl_check(255), TtlOutcome::Alive);
    }
}
