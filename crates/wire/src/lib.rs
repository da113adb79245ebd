//! # vfsr-wire: packet formats as zero-copy checked views
//!
//! The forwarding path reads each packet's headers straight from the receive buffer. A view
//! (`EthernetFrame<T>`, `Ipv4Packet<T>`, ...) wraps a byte buffer `T: AsRef<[u8]>` and reads
//! fields at fixed offsets; nothing is copied or allocated. Views over `T: AsMut<[u8]>` also
//! write fields in place, which is all the rewrite stage does to a forwarded packet (TTL or hop
//! limit, header checksum, MAC addresses).
//!
//! ```text
//!   offset 0        14                 14+IHL*4 (IPv4) / 40+ext (IPv6)
//!   ┌──────────────┬──────────────────┬─────────────────────────────────┐
//!   │ Ethernet II  │ IPv4 / IPv6      │ ICMPv4 / ICMPv6 (+ND) / UDP/TCP │
//!   │ ethernet.rs  │ ipv4.rs, ipv6.rs │ icmpv4.rs, icmpv6.rs, l4.rs     │
//!   └──────┬───────┴──────────────────┴─────────────────────────────────┘
//!          └─ ethertype 0x0806: ARP (arp.rs) instead of an IP header
//!
//!   IPv6:  fixed header ─▶ hop-by-hop ─▶ routing ─▶ fragment ─▶ dest opts / AH ─▶ upper layer
//!                          (ipv6::walk_extension_headers follows the chain, bounded)
//!
//!   checksum.rs: RFC 1071 sum (IPv4 header, ICMP, pseudo-headers), RFC 1624 update
//!   l4.rs:       the 5-tuple for flow hashing (ports 0 for non-first fragments, non-TCP/UDP)
//! ```
//!
//! Start reading at [`ipv4`] (the layout diagram, the checks, the incremental checksum update),
//! then [`ipv6`] (the extension-header walker), then [`l4`] (what flow hashing takes).
//!
//! ## The panic contract
//!
//! Every view is built with `new_checked(buf) -> Result<View, WireError>`, which checks the
//! lengths (and the version or formats) that its getters rely on. Malformed bytes give a
//! [`WireError`] naming what is wrong; **no input makes this crate panic**. The crate denies
//! `unwrap`, `panic!` and unchecked indexing outside tests: every read goes through `get(..)`
//! (the fixed-offset helpers in `field`, which read zero if a buffer is short, something only a
//! view made with `new_unchecked` on too short a buffer can see), and every length taken from
//! the packet is combined with checked or bounded arithmetic. `tests/arbitrary.rs` feeds
//! arbitrary bytes to every constructor and walker, and `fuzz/fuzz_targets/wire_parse.rs` does
//! the same under libFuzzer.
//!
//! ## Why vfsr writes its own
//!
//! Well-kept crates exist: smoltcp's `wire` module (checked views with `Packet`/`Repr` pairs,
//! the model for this crate) and etherparse (slices and headers for the whole Ethernet/VLAN/IP
//! stack). vfsr parses each packet's headers once per packet at 20+ million packets per second
//! per core, so a header view must be a bounds check and a few loads at fixed offsets, and it
//! wants:
//! - control over the exact checks: RFC 1812 5.2.2 input validation (total length against the
//!   frame, IHL 20..=60, checksum as a separate step the stage counts), RFC 8200 payload length,
//!   a bounded extension-header walk with a hop-by-hop flag for the slow path, and one error
//!   enum whose variants become the pipeline's drop reasons;
//! - in-place mutation for the rewrite stage: TTL decrement with the RFC 1624 incremental
//!   checksum update, hop limit, MAC rewrite, on the receive buffer itself;
//! - no allocation and no dependencies: the crate is `no_std`.
//!
//! smoltcp's views serve a TCP/IP stack (they also check what a host must), etherparse builds
//! header structs by copying; neither offers the incremental update or the walker's slow-path
//! flag, and tuning their checks for a router would mean a fork.

#![no_std]
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::expect_used, clippy::unreachable, clippy::todo)]
#![warn(missing_docs)]

#[cfg(test)]
extern crate std;

pub mod arp;
pub mod checksum;
pub mod ethernet;
mod field;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod l4;

pub use arp::{ArpOp, ArpPacket, ArpRepr};
pub use ethernet::{EthernetFrame, MacAddr};
pub use icmpv4::{Icmpv4Packet, Icmpv4Repr};
pub use icmpv6::{Icmpv6Packet, Icmpv6Repr, NdRepr};
pub use ipv4::Ipv4Packet;
pub use ipv6::{ExtHeaders, Ipv6Packet};
pub use l4::FiveTuple;

/// IP protocol numbers (IPv4 protocol, IPv6 next header) that vfsr looks at.
pub mod ip_proto {
    /// IPv6 hop-by-hop options (RFC 8200 4.3).
    pub const HOP_BY_HOP: u8 = 0;
    /// ICMP for IPv4 (RFC 792).
    pub const ICMP: u8 = 1;
    /// IGMP (RFC 3376).
    pub const IGMP: u8 = 2;
    /// TCP (RFC 9293).
    pub const TCP: u8 = 6;
    /// UDP (RFC 768).
    pub const UDP: u8 = 17;
    /// IPv6 routing header (RFC 8200 4.4).
    pub const ROUTING: u8 = 43;
    /// IPv6 fragment header (RFC 8200 4.5).
    pub const FRAGMENT: u8 = 44;
    /// Encapsulating Security Payload (RFC 4303): opaque, ends a walk.
    pub const ESP: u8 = 50;
    /// Authentication Header (RFC 4302).
    pub const AH: u8 = 51;
    /// ICMP for IPv6 (RFC 4443).
    pub const ICMPV6: u8 = 58;
    /// IPv6 "no next header" (RFC 8200 4.7).
    pub const NO_NEXT_HEADER: u8 = 59;
    /// IPv6 destination options (RFC 8200 4.6).
    pub const DESTINATION_OPTIONS: u8 = 60;
}

/// What is wrong with a packet's bytes. Every constructor and walker in this crate returns one
/// of these instead of panicking; the forwarding stages count drops under these names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireError {
    /// The buffer ends before the fixed part of the header (or a field the view needs).
    Truncated,
    /// The IP version field is not the view's (4 or 6).
    BadVersion,
    /// IPv4 IHL below 5 (20 bytes), or a header longer than the buffer.
    BadHeaderLength,
    /// IPv4 total length below the header length or beyond the buffer.
    BadTotalLength,
    /// IPv6 payload length beyond the buffer.
    BadPayloadLength,
    /// A checksum does not verify.
    BadChecksum,
    /// More IPv6 extension headers than the walker follows (`ipv6::MAX_EXTENSION_HEADERS`).
    TooManyExtensionHeaders,
    /// An IPv6 extension header runs past the payload.
    TruncatedExtensionHeader,
    /// A hop-by-hop header somewhere else than right after the IPv6 header (RFC 8200 4.1).
    MisplacedHopByHop,
    /// ARP for something else than IPv4 over Ethernet (hardware type, protocol type or
    /// address lengths).
    UnsupportedArpFormat,
    /// An ARP operation other than request (1) or reply (2).
    BadArpOperation,
    /// An ICMP code that the message type does not define where the parser needs it (ND
    /// messages must have code 0).
    BadCode,
    /// A Neighbor Discovery option of length zero or running past the message (RFC 4861 4.6).
    BadNdOption,
    /// More Neighbor Discovery options than the walker follows (`icmpv6::MAX_ND_OPTIONS`).
    TooManyNdOptions,
    /// A UDP length below 8 or beyond the buffer, or a TCP data offset below 5 or beyond it.
    BadL4Length,
    /// The message type is not the one the parser was asked for.
    WrongMessageType,
    /// The output buffer is too small for what `emit` has to write.
    BufferTooSmall,
}

impl WireError {
    /// A short fixed name, for counters and logs.
    pub const fn name(self) -> &'static str {
        match self {
            WireError::Truncated => "truncated",
            WireError::BadVersion => "bad version",
            WireError::BadHeaderLength => "bad header length",
            WireError::BadTotalLength => "bad total length",
            WireError::BadPayloadLength => "bad payload length",
            WireError::BadChecksum => "bad checksum",
            WireError::TooManyExtensionHeaders => "too many extension headers",
            WireError::TruncatedExtensionHeader => "truncated extension header",
            WireError::MisplacedHopByHop => "hop-by-hop header not first",
            WireError::UnsupportedArpFormat => "ARP not IPv4 over Ethernet",
            WireError::BadArpOperation => "bad ARP operation",
            WireError::BadCode => "bad ICMP code",
            WireError::BadNdOption => "bad ND option",
            WireError::TooManyNdOptions => "too many ND options",
            WireError::BadL4Length => "bad UDP/TCP length",
            WireError::WrongMessageType => "wrong message type",
            WireError::BufferTooSmall => "output buffer too small",
        }
    }
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::error::Error for WireError {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn error_display_names_the_problem() {
        assert_eq!(WireError::BadChecksum.to_string(), "bad checksum");
        assert_eq!(WireError::Truncated.to_string(), "truncated");
    }
}
