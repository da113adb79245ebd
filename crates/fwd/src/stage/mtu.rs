//! Stage 7, `mtu`: does the packet fit the egress link?
//!
//! ```text
//!   IPv4  length ≤ MTU ─────────────────▶ Fits
//!         DF set ───────────────────────▶ mtu_exceeded_df + ICMP Fragmentation Needed
//!                                          carrying the next-hop MTU (RFC 1191)
//!         DF clear, fragmenting on ─────▶ Fragment (RFC 791; `frag.rs`)
//!         DF clear, fragmenting off ────▶ fragmentation_disabled
//!   IPv6  length ≤ MTU ─────────────────▶ Fits
//!         else ─────────────────────────▶ mtu_exceeded_v6 + ICMPv6 Packet Too Big
//!                                          (routers never fragment IPv6; RFC 8200 5)
//! ```
//!
//! The MTU is the egress port's IP MTU; the length is the IP packet's (total length, or 40 +
//! payload length), not the frame's.

/// What `mtu` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtuOutcome {
    /// It fits.
    Fits,
    /// IPv4 with DF: drop and send Fragmentation Needed with this MTU.
    FragNeeded {
        /// The egress MTU.
        mtu: u16,
    },
    /// IPv4 without DF: fragment to this MTU.
    Fragment {
        /// The egress MTU.
        mtu: u16,
    },
    /// IPv4 without DF, but fragmentation is configured off.
    Disabled,
    /// IPv6: drop and send Packet Too Big with this MTU.
    TooBig {
        /// The egress MTU.
        mtu: u16,
    },
}

/// Runs the stage on an IPv4 packet of `len` bytes.
#[inline]
pub fn mtu4(len: u16, df: bool, mtu: u16, fragment: bool) -> MtuOutcome {
    if len <= mtu {
        MtuOutcome::Fits
    } else if df {
        MtuOutcome::FragNeeded { mtu }
    } else if fragment {
        MtuOutcome::Fragment { mtu }
    } else {
        MtuOutcome::Disabled
    }
}

/// Runs the stage on an IPv6 packet of `len` bytes.
#[inline]
pub fn mtu6(len: usize, mtu: u16) -> MtuOutcome {
    if len <= usize::from(mtu) {
        MtuOutcome::Fits
    } else {
        MtuOutcome::TooBig { mtu }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome() {
        assert_eq!(mtu4(1500, true, 1500, true), MtuOutcome::Fits);
        assert_eq!(
            mtu4(1501, true, 1500, true),
            MtuOutcome::FragNeeded { mtu: 1500 }
        );
        assert_eq!(
            mtu4(1501, false, 1500, true),
            MtuOutcome::Fragment { mtu: 1500 }
        );
        assert_eq!(mtu4(1501, false, 1500, false), MtuOutcome::Disabled);
        assert_eq!(mtu6(1280, 1280), MtuOutcome::Fits);
        assert_eq!(mtu6(1281, 1280), MtuOutcome::TooBig { mtu: 1280 });
    }
}
