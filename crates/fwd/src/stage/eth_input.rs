//! Stage 1, `eth-input`: is the frame for this router, and which protocol does it carry?
//!
//! ```text
//!   frame ──▶ ≥ 14 bytes? ──▶ source MAC unicast? ──▶ destination = port MAC,
//!             │ no            │ no                     broadcast or multicast?
//!             ▼               ▼                        │ no               │ yes
//!        eth_truncated   eth_multicast_source     eth_not_for_us          ▼
//!                                     ethertype 0x0800 → Ipv4, 0x86dd → Ipv6,
//!                                               0x0806 → Arp, else eth_unknown_type
//! ```
//!
//! VLAN tags (0x8100) are not handled and count as an unknown ethertype.

use vfsr_wire::ethernet::EthernetFrame;
use vfsr_wire::MacAddr;

use crate::counters::DropReason;

/// Ethertypes the router handles.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// Length of an Ethernet II header.
pub const ETH_HEADER: usize = 14;

/// What `eth-input` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EthOutcome {
    /// IPv4 follows; `link_broadcast` when the frame was sent to a broadcast or multicast MAC.
    Ipv4 {
        /// Broadcast or multicast destination MAC.
        link_broadcast: bool,
    },
    /// IPv6 follows.
    Ipv6 {
        /// Broadcast or multicast destination MAC.
        link_broadcast: bool,
    },
    /// ARP: for the control plane.
    Arp,
    /// Dropped.
    Drop(DropReason),
}

/// Runs the stage on `frame`, received on a port whose MAC is `port_mac`.
#[inline(always)]
pub fn eth_input(frame: &[u8], port_mac: MacAddr) -> EthOutcome {
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return EthOutcome::Drop(DropReason::EthTruncated);
    };
    if eth.src().is_multicast() {
        return EthOutcome::Drop(DropReason::EthMulticastSource);
    }
    let dst = eth.dst();
    let link_broadcast = dst.is_multicast();
    if !link_broadcast && dst != port_mac {
        return EthOutcome::Drop(DropReason::EthNotForUs);
    }
    match eth.ethertype() {
        ETHERTYPE_IPV4 => EthOutcome::Ipv4 { link_broadcast },
        ETHERTYPE_IPV6 => EthOutcome::Ipv6 { link_broadcast },
        ETHERTYPE_ARP => EthOutcome::Arp,
        _ => EthOutcome::Drop(DropReason::EthUnknownType),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);

    fn frame(dst: [u8; 6], src: [u8; 6], ethertype: u16) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&dst);
        f.extend_from_slice(&src);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(&[0x45; 20]);
        f
    }

    #[test]
    fn every_outcome() {
        let peer = [2, 0, 0, 0, 0, 9];
        let ours = MAC.0;
        let bcast = [0xff; 6];
        assert_eq!(
            eth_input(&frame(ours, peer, 0x0800), MAC),
            EthOutcome::Ipv4 {
                link_broadcast: false
            }
        );
        assert_eq!(
            eth_input(&frame(bcast, peer, 0x0800), MAC),
            EthOutcome::Ipv4 {
                link_broadcast: true
            }
        );
        assert_eq!(
            eth_input(&frame([0x33, 0x33, 0, 0, 0, 1], peer, 0x86dd), MAC),
            EthOutcome::Ipv6 {
                link_broadcast: true
            }
        );
        assert_eq!(eth_input(&frame(bcast, peer, 0x0806), MAC), EthOutcome::Arp);
        assert_eq!(
            eth_input(&frame([2, 0, 0, 0, 0, 2], peer, 0x0800), MAC),
            EthOutcome::Drop(DropReason::EthNotForUs)
        );
        assert_eq!(
            eth_input(&frame(ours, [1, 0, 0, 0, 0, 0], 0x0800), MAC),
            EthOutcome::Drop(DropReason::EthMulticastSource)
        );
        assert_eq!(
            eth_input(&frame(ours, peer, 0x8100), MAC),
            EthOutcome::Drop(DropReason::EthUnknownType)
        );
        assert_eq!(
            eth_input(&frame(ours, peer, 0x0800)[..13], MAC),
            EthOutcome::Drop(DropReason::EthTruncated)
        );
    }
}
