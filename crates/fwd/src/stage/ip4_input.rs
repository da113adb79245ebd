//! Stage 2 (IPv4), `ip4-input`: RFC 1812 section 5.2.2 validation.
//!
//! A packet is forwarded only if (5.2.2):
//! 1. the frame holds at least a 20-byte header (`ip4_truncated`);
//! 2. the version is 4 (`ip4_bad_version`);
//! 3. the header length is at least 20 bytes and fits (`ip4_bad_header_len`);
//! 4. the total length is at least the header length and no more than the frame holds
//!    (`ip4_bad_total_len`; bytes past it, such as Ethernet padding, are ignored);
//! 5. the header checksum is right (`ip4_bad_checksum`).
//!
//! Then the addresses (5.3.7): no multicast, limited-broadcast, loopback, `0/8` or class E
//! source (`ip4_martian_source`); no `0/8`, loopback or class E destination
//! (`ip4_martian_dest`; 255.255.255.255 is left to classification). Options, when present,
//! are walked: malformed lengths drop (`ip4_bad_options`), source routing (LSRR, SSRR) is
//! refused as Linux does by default (`ip4_source_route`), a Router Alert sends the packet to
//! the slow path; other options are forwarded untouched.

use vfsr_wire::ipv4::{self, Ipv4Packet};
use vfsr_wire::{l4, WireError};

use crate::counters::DropReason;

/// What the rest of the pipeline needs from an IPv4 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ip4Meta {
    /// Source address.
    pub src: u32,
    /// Destination address.
    pub dst: u32,
    /// Time to live, as received.
    pub ttl: u8,
    /// Protocol.
    pub protocol: u8,
    /// Header length in bytes.
    pub header_len: u8,
    /// Total length.
    pub total_len: u16,
    /// Don't Fragment.
    pub df: bool,
    /// A fragment other than the first (offset ≠ 0).
    pub later_fragment: bool,
    /// Options are present.
    pub options: bool,
    /// A Router Alert option is present (RFC 2113): slow path.
    pub router_alert: bool,
}

/// What `ip4-input` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ip4Outcome {
    /// Valid.
    Valid(Ip4Meta),
    /// Dropped.
    Drop(DropReason),
}

/// The drop reason for a header the view refuses.
#[inline]
fn refused(e: WireError) -> DropReason {
    match e {
        WireError::BadVersion => DropReason::Ip4BadVersion,
        WireError::BadHeaderLength => DropReason::Ip4BadHeaderLen,
        WireError::BadTotalLength => DropReason::Ip4BadTotalLen,
        _ => DropReason::Ip4Truncated,
    }
}

/// Runs the stage on `ip`, the frame's bytes after the Ethernet header.
///
/// The header is read through `vfsr_wire::ipv4::Ipv4Packet`: `new_checked` makes the
/// structural checks of 5.2.2 (1 to 4), and once it is inlined here the getters' own bounds
/// checks fold into it, so the reads are plain loads (the same-run `vfsr fwd bench` A/B
/// against hand-written offset reads is in docs/bench/core.md).
#[inline(always)]
pub fn ip4_input(ip: &[u8]) -> Ip4Outcome {
    let p = match Ipv4Packet::new_checked(ip) {
        Ok(p) => p,
        Err(e) => return Ip4Outcome::Drop(refused(e)),
    };
    if !p.verify_checksum() {
        return Ip4Outcome::Drop(DropReason::Ip4BadChecksum);
    }
    if p.check_source().is_err() {
        return Ip4Outcome::Drop(DropReason::Ip4MartianSource);
    }
    let d = p.dst_addr();
    if ipv4::is_this_network(d)
        || ipv4::is_loopback(d)
        || (ipv4::is_class_e(d) && !ipv4::is_broadcast(d))
    {
        return Ip4Outcome::Drop(DropReason::Ip4MartianDest);
    }
    let header_len = p.header_len();
    let mut meta = Ip4Meta {
        src: u32::from(p.src_addr()),
        dst: u32::from(d),
        ttl: p.ttl(),
        protocol: p.protocol(),
        header_len: header_len as u8,
        total_len: p.total_len(),
        df: p.dont_frag(),
        later_fragment: p.frag_offset() != 0,
        options: header_len > ipv4::MIN_HEADER_LEN,
        router_alert: false,
    };
    if meta.options {
        match walk_options(p.options()) {
            Ok(alert) => meta.router_alert = alert,
            Err(reason) => return Ip4Outcome::Drop(reason),
        }
    }
    Ip4Outcome::Valid(meta)
}

/// Option types this stage acts on (RFC 791, RFC 2113).
const OPT_END: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_LSRR: u8 = 0x83;
const OPT_SSRR: u8 = 0x89;
const OPT_ROUTER_ALERT: u8 = 0x94;

/// Walks the options; `Ok(router_alert)` when they are well formed and not source routes.
fn walk_options(opts: &[u8]) -> Result<bool, DropReason> {
    let mut alert = false;
    let mut at = 0usize;
    while let Some(&kind) = opts.get(at) {
        match kind {
            OPT_END => break,
            OPT_NOP => at += 1,
            _ => {
                let len = usize::from(opts.get(at + 1).copied().unwrap_or(0));
                if len < 2 || at + len > opts.len() {
                    return Err(DropReason::Ip4BadOptions);
                }
                match kind {
                    OPT_LSRR | OPT_SSRR => return Err(DropReason::Ip4SourceRoute),
                    OPT_ROUTER_ALERT if len == 4 => alert = true,
                    OPT_ROUTER_ALERT => return Err(DropReason::Ip4BadOptions),
                    _ => {}
                }
                at += len;
            }
        }
    }
    Ok(alert)
}

/// Where the transport ports start (the header length), for a first fragment (or
/// unfragmented packet) of TCP, UDP, SCTP or UDP-Lite; `None` otherwise.
#[inline(always)]
pub fn l4_offset4(meta: &Ip4Meta) -> Option<usize> {
    (!meta.later_fragment && matches!(meta.protocol, 6 | 17 | 132 | 136))
        .then_some(usize::from(meta.header_len))
}

/// The transport ports of a first fragment (or unfragmented packet) of TCP, UDP, SCTP or
/// UDP-Lite; `(0, 0)` otherwise.
#[inline(always)]
pub fn ports4(ip: &[u8], meta: &Ip4Meta) -> (u16, u16) {
    // The bounds come from `meta`, which the checked view found; reading them again from
    // the header cost two to three cycles per packet (`vfsr fwd bench`).
    l4_offset4(meta).map_or((0, 0), |at| ports_at(ip, at, usize::from(meta.total_len)))
}

/// The ports of the transport header at `at` in an IP packet `ip` of length `len`, or
/// `(0, 0)` when they are not all there.
#[inline(always)]
pub fn ports_at(ip: &[u8], at: usize, len: usize) -> (u16, u16) {
    ip.get(at..len).and_then(l4::ports).unwrap_or((0, 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfsr_wire::checksum;

    /// A 28-byte UDP packet 192.0.2.1 → 198.51.100.7, TTL 64, checksum filled.
    pub(crate) fn udp4() -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 28, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 192, 0, 2, 1, 198, 51, 100, 7, 0x30,
            0x39, 0x00, 0x35, 0, 8, 0, 0,
        ];
        fix(&mut p);
        p
    }

    fn fix(p: &mut [u8]) {
        let hl = usize::from(p[0] & 0xf) * 4;
        p[10] = 0;
        p[11] = 0;
        let c = checksum::checksum(&p[..hl]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
    }

    #[test]
    fn valid_packet_meta() {
        let p = udp4();
        let Ip4Outcome::Valid(m) = ip4_input(&p) else {
            panic!("valid packet dropped");
        };
        assert_eq!(m.src, 0xc000_0201);
        assert_eq!(m.dst, 0xc633_6407);
        assert_eq!(
            (m.ttl, m.protocol, m.header_len, m.total_len),
            (64, 17, 20, 28)
        );
        assert!(m.df && !m.later_fragment && !m.options && !m.router_alert);
        assert_eq!(ports4(&p, &m), (12345, 53));
    }

    #[test]
    fn every_drop_reason() {
        let drop = |p: &[u8]| match ip4_input(p) {
            Ip4Outcome::Drop(r) => r,
            Ip4Outcome::Valid(_) => panic!("not dropped"),
        };
        let good = udp4();
        assert_eq!(drop(&good[..19]), DropReason::Ip4Truncated);
        let mut p = good.clone();
        p[0] = 0x65;
        assert_eq!(drop(&p), DropReason::Ip4BadVersion);
        let mut p = good.clone();
        p[0] = 0x44;
        assert_eq!(drop(&p), DropReason::Ip4BadHeaderLen);
        let mut p = good.clone();
        p[0] = 0x48; // 32-byte header in a 28-byte packet
        assert_eq!(drop(&p), DropReason::Ip4BadHeaderLen);
        let mut p = good.clone();
        p[3] = 29;
        fix(&mut p);
        assert_eq!(drop(&p), DropReason::Ip4BadTotalLen);
        let mut p = good.clone();
        p[3] = 19;
        fix(&mut p);
        assert_eq!(drop(&p), DropReason::Ip4BadTotalLen);
        let mut p = good.clone();
        p[10] ^= 1;
        assert_eq!(drop(&p), DropReason::Ip4BadChecksum);
        for src in [
            [224, 0, 0, 1],
            [127, 0, 0, 1],
            [0, 1, 2, 3],
            [255, 255, 255, 255],
            [240, 0, 0, 1],
        ] {
            let mut p = good.clone();
            p[12..16].copy_from_slice(&src);
            fix(&mut p);
            assert_eq!(drop(&p), DropReason::Ip4MartianSource, "{src:?}");
        }
        for dst in [[0, 0, 0, 0], [127, 0, 0, 1], [250, 0, 0, 1]] {
            let mut p = good.clone();
            p[16..20].copy_from_slice(&dst);
            fix(&mut p);
            assert_eq!(drop(&p), DropReason::Ip4MartianDest, "{dst:?}");
        }
    }

    fn with_options(opts: &[u8]) -> Vec<u8> {
        let good = udp4();
        let hl = 20 + opts.len();
        let mut p = good[..20].to_vec();
        p.extend_from_slice(opts);
        p.extend_from_slice(&good[20..]);
        p[0] = 0x40 | (hl / 4) as u8;
        let tl = p.len() as u16;
        p[2..4].copy_from_slice(&tl.to_be_bytes());
        fix(&mut p);
        p
    }

    #[test]
    fn options() {
        // Record route (7), 7 bytes + EOL.
        let p = with_options(&[7, 7, 4, 0, 0, 0, 0, 0]);
        let Ip4Outcome::Valid(m) = ip4_input(&p) else {
            panic!("record route dropped");
        };
        assert!(m.options && !m.router_alert);
        assert_eq!(ports4(&p, &m), (12345, 53));
        let p = with_options(&[0x94, 4, 0, 0]);
        assert!(matches!(ip4_input(&p), Ip4Outcome::Valid(m) if m.router_alert));
        let p = with_options(&[0x83, 7, 4, 192, 0, 2, 9, 0]);
        assert_eq!(ip4_input(&p), Ip4Outcome::Drop(DropReason::Ip4SourceRoute));
        let p = with_options(&[7, 9, 4, 0]);
        assert_eq!(ip4_input(&p), Ip4Outcome::Drop(DropReason::Ip4BadOptions));
        let p = with_options(&[1, 1, 1, 0x44]);
        assert_eq!(ip4_input(&p), Ip4Outcome::Drop(DropReason::Ip4BadOptions));
    }

    #[test]
    fn fragments_have_no_ports() {
        let mut p = udp4();
        p[6] = 0x00;
        p[7] = 0x10; // offset 128 bytes
        fix(&mut p);
        let Ip4Outcome::Valid(m) = ip4_input(&p) else {
            panic!("fragment dropped");
        };
        assert!(m.later_fragment && !m.df);
        assert_eq!(ports4(&p, &m), (0, 0));
    }

    #[test]
    fn ports_are_read_within_the_total_length() {
        // The IP packet ends two bytes into the UDP header; the frame's padding holds what
        // would be the destination port.
        let mut p = udp4();
        p[2..4].copy_from_slice(&22u16.to_be_bytes());
        fix(&mut p);
        let Ip4Outcome::Valid(m) = ip4_input(&p) else {
            panic!("short packet dropped");
        };
        assert_eq!(ports4(&p, &m), (0, 0));
    }
}
