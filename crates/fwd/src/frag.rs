//! IPv4 fragmentation (RFC 791 sections 2.3 and 3.2; RFC 1812 4.2.2.7 and 5.2.6).
//!
//! A packet without DF that is larger than the egress MTU leaves as several packets whose
//! data are consecutive slices of the original's, each carrying an offset in 8-byte units:
//!
//! ```text
//!   original:   [ hdr+opts | data 0 ................................ data N ]   MF = m
//!   fragment 1: [ hdr+opts | data 0 .. k-1 ]                 offset o,         MF = 1
//!   fragment 2: [ hdr+copied opts | data k .. 2k-1 ]         offset o + k/8,   MF = 1
//!   last:       [ hdr+copied opts | data .. N ]              offset ...,       MF = m
//! ```
//!
//! Every fragment but the last carries a multiple of 8 data bytes and fits the MTU. The first
//! keeps all options; the later ones only those whose "copied" flag (bit 0x80 of the option
//! type) is set, padded with End of Option List to a multiple of 4. Identification, type of
//! service, TTL, protocol and addresses are copied; each header checksum is recomputed.
//! Fragmenting a fragment works the same way: offsets start from its own, and its last piece
//! keeps its MF flag.
//!
//! **What is followed where.** RFC 791 section 2.3 ("Fragmentation") describes the
//! mechanism; section 3.2 ("Fragmentation and Reassembly", "An Example Fragmentation
//! Procedure") gives the steps this code takes: data cut on 8-byte boundaries, so each piece
//! but the last carries `(MTU - header) & !7` bytes; offsets in 8-byte units counted from
//! the original's own offset; the last piece keeps the original's MF. Section 3.1 gives the
//! fragment offset field (13 bits, so no datagram reaches past 65535 bytes) and the options:
//! End of Option List (0) and No Operation (1) are one byte, every other option has a
//! length byte counting the type and itself, and the copied flag says whether it goes into
//! every fragment or the first only. RFC 1812 4.2.2.7 and 5.2.6 ask routers to fragment so;
//! a DF packet is not fragmented but answered with ICMP Fragmentation Needed carrying the
//! next-hop MTU (RFC 1191 section 4; the caller's job, see `icmp_error`).
//!
//! ```text
//!   one option:   ┌─ type ────────────┐┌ length ┐┌ data ...
//!                 │ c │ class │ number ││ (>= 2) ││
//!                 └───┴───────┴────────┘└────────┘└─────────
//!                   └ bit 0x80: copied into every fragment
//! ```
//!
//! The fragmenter borrows the packet and writes one fragment per call into the caller's
//! buffer, so nothing is allocated and fragments can go straight into transmit buffers.

use vfsr_wire::ipv4::Ipv4Packet;

/// Why a packet cannot be fragmented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FragError {
    /// DF is set: the sender asked not to.
    DontFragment,
    /// Not a valid IPv4 packet: too short, a bad version, header or total length, malformed
    /// options, or a fragment whose offset and length reach past 65535 bytes.
    Truncated,
    /// The MTU cannot carry the header and 8 bytes of data.
    MtuTooSmall,
    /// The output buffer is too small for the next fragment.
    NoRoom,
}

impl FragError {
    /// A short fixed name.
    pub fn name(&self) -> &'static str {
        match self {
            FragError::DontFragment => "dont_fragment",
            FragError::Truncated => "truncated",
            FragError::MtuTooSmall => "mtu_too_small",
            FragError::NoRoom => "no_room",
        }
    }
}

/// Produces the fragments of one packet, one at a time, into caller buffers.
#[derive(Clone, Debug)]
pub struct Fragmenter<'a> {
    header: &'a [u8],
    data: &'a [u8],
    /// The options later fragments carry, padded.
    copied: [u8; 40],
    copied_len: usize,
    /// The original's own offset, in bytes.
    base: usize,
    more: bool,
    mtu: usize,
    pos: usize,
    first: bool,
}

impl<'a> Fragmenter<'a> {
    /// Prepares to fragment `ip` (a whole IPv4 packet; bytes past its total length are
    /// ignored) to `mtu`.
    pub fn new(ip: &'a [u8], mtu: usize) -> Result<Self, FragError> {
        let p = Ipv4Packet::new_checked(ip).map_err(|_| FragError::Truncated)?;
        if p.dont_frag() {
            return Err(FragError::DontFragment);
        }
        let (hl, offset, more) = (p.header_len(), p.frag_offset(), p.more_frags());
        if mtu < hl + 8 {
            return Err(FragError::MtuTooSmall);
        }
        let header = ip.get(..hl).ok_or(FragError::Truncated)?;
        let data = p.into_payload();
        let (copied, copied_len) = copied_options(header.get(20..).unwrap_or(&[]))?;
        let base = usize::from(offset);
        // A fragment reaching past byte 65535 of its datagram (RFC 791's largest) has no
        // valid offsets for its pieces: the 13-bit field would wrap.
        if base + data.len() > usize::from(u16::MAX) {
            return Err(FragError::Truncated);
        }
        Ok(Fragmenter {
            header,
            data,
            copied,
            copied_len,
            base,
            more,
            mtu,
            pos: 0,
            first: true,
        })
    }

    fn header_len(&self, first: bool) -> usize {
        if first {
            self.header.len()
        } else {
            20 + self.copied_len
        }
    }

    /// Data bytes of the fragment starting at `pos` with a header of `hl` bytes.
    fn chunk(&self, pos: usize, hl: usize) -> usize {
        let left = self.data.len().saturating_sub(pos);
        let room = self.mtu.saturating_sub(hl);
        if left <= room {
            left
        } else {
            room & !7
        }
    }

    /// How many fragments there will be in all.
    pub fn count(&self) -> usize {
        let (mut pos, mut first, mut n) = (0usize, true, 0usize);
        loop {
            let c = self.chunk(pos, self.header_len(first));
            n += 1;
            pos += c;
            first = false;
            if pos >= self.data.len() || c == 0 {
                return n;
            }
        }
    }

    /// Writes the next fragment (an IPv4 packet) into `out` and returns its length;
    /// `Ok(None)` once all are written.
    pub fn write_next(&mut self, out: &mut [u8]) -> Result<Option<usize>, FragError> {
        if !self.first && self.pos >= self.data.len() {
            return Ok(None);
        }
        let hl = self.header_len(self.first);
        let n = self.chunk(self.pos, hl);
        let len = hl + n;
        if out.len() < len {
            return Err(FragError::NoRoom);
        }
        let last = self.pos + n >= self.data.len();
        let Some(fixed) = self.header.get(..20) else {
            return Err(FragError::Truncated);
        };
        put(out, 0, fixed)?;
        if self.first {
            put(out, 20, self.header.get(20..).unwrap_or(&[]))?;
        } else {
            put(out, 20, self.copied.get(..self.copied_len).unwrap_or(&[]))?;
        }
        put(
            out,
            hl,
            self.data.get(self.pos..self.pos + n).unwrap_or(&[]),
        )?;
        let mut frag = Ipv4Packet::new_unchecked(out.get_mut(..len).ok_or(FragError::NoRoom)?);
        frag.set_version_and_header_len(hl);
        frag.set_total_len(len as u16);
        let mf = if last { self.more } else { true };
        // DF is clear (a DF packet is refused in `new`); the offset is below 65536 (checked
        // there too).
        frag.set_frag(false, mf, (self.base + self.pos) as u16);
        frag.fill_checksum();
        self.pos += n;
        self.first = false;
        Ok(Some(len))
    }
}

/// The options a later fragment carries, padded to a multiple of 4.
fn copied_options(opts: &[u8]) -> Result<([u8; 40], usize), FragError> {
    let mut out = [0u8; 40];
    let mut n = 0usize;
    let mut at = 0usize;
    while let Some(&kind) = opts.get(at) {
        let len = match kind {
            0 => break,
            1 => 1,
            _ => {
                let l = usize::from(opts.get(at + 1).copied().unwrap_or(0));
                if l < 2 || at + l > opts.len() {
                    return Err(FragError::Truncated);
                }
                l
            }
        };
        if kind & 0x80 != 0 {
            let src = opts.get(at..at + len).ok_or(FragError::Truncated)?;
            out.get_mut(n..n + len)
                .ok_or(FragError::Truncated)?
                .copy_from_slice(src);
            n += len;
        }
        at += len;
    }
    Ok((out, n.div_ceil(4) * 4))
}

#[inline]
fn put(out: &mut [u8], at: usize, bytes: &[u8]) -> Result<(), FragError> {
    out.get_mut(at..at + bytes.len())
        .ok_or(FragError::NoRoom)?
        .copy_from_slice(bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use vfsr_wire::checksum;

    /// An IPv4 packet with `opts` and `payload` bytes of data (0, 1, 2, ...), DF clear.
    fn packet(opts: &[u8], payload: usize, frag: u16) -> Vec<u8> {
        let hl = 20 + opts.len();
        let total = (hl + payload) as u16;
        let t = total.to_be_bytes();
        let f = frag.to_be_bytes();
        let mut p = vec![
            0x40 | (hl / 4) as u8,
            0x10,
            t[0],
            t[1],
            0xbe,
            0xef,
            f[0],
            f[1],
            63,
            17,
            0,
            0,
            192,
            0,
            2,
            1,
            10,
            3,
            0,
            1,
        ];
        p.extend_from_slice(opts);
        p.extend((0..payload).map(|i| (i % 251) as u8));
        let c = checksum::checksum(&p[..hl]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p
    }

    fn all(ip: &[u8], mtu: usize) -> Vec<Vec<u8>> {
        let mut f = Fragmenter::new(ip, mtu).unwrap();
        let n = f.count();
        let mut out = Vec::new();
        let mut buf = [0u8; 2000];
        while let Some(len) = f.write_next(&mut buf).unwrap() {
            out.push(buf[..len].to_vec());
        }
        assert_eq!(out.len(), n);
        out
    }

    fn field(p: &[u8]) -> (usize, usize, bool, usize) {
        let hl = usize::from(p[0] & 0xf) * 4;
        let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
        let fl = u16::from_be_bytes([p[6], p[7]]);
        (hl, total, fl & 0x2000 != 0, usize::from(fl & 0x1fff) * 8)
    }

    #[test]
    fn golden_1400_bytes_at_576() {
        let p = packet(&[], 1400, 0);
        let frags = all(&p, 576);
        // 556 data bytes fit, 552 is the multiple of 8: 552 + 552 + 296.
        let shape: Vec<_> = frags.iter().map(|f| field(f)).collect();
        assert_eq!(
            shape,
            vec![
                (20, 572, true, 0),
                (20, 572, true, 552),
                (20, 316, false, 1104)
            ]
        );
        for f in &frags {
            assert!(checksum::verify(&f[..20]));
            assert_eq!(&f[4..6], &[0xbe, 0xef]);
            assert_eq!((f[1], f[8], f[9]), (0x10, 63, 17));
            assert_eq!(&f[12..20], &p[12..20]);
        }
        // The first fragment's header, literally (checksum computed apart).
        let c = {
            let mut h = p[..20].to_vec();
            h[2..4].copy_from_slice(&572u16.to_be_bytes());
            h[6] = 0x20;
            h[10] = 0;
            h[11] = 0;
            checksum::checksum(&h)
        };
        assert_eq!(&frags[0][10..12], &c.to_be_bytes());
        let data: Vec<u8> = frags.iter().flat_map(|f| f[20..].to_vec()).collect();
        assert_eq!(data, p[20..].to_vec());
    }

    #[test]
    fn golden_fragment_headers_literal() {
        // 192.0.2.1 → 10.3.0.1, UDP, ident 0xbeef, TOS 0x10, TTL 63, 1400 bytes of data,
        // at MTU 576. The three headers written out, checksums summed by hand.
        let p = packet(&[], 1400, 0);
        let frags = all(&p, 576);
        let expected: [[u8; 20]; 3] = [
            [
                0x45, 0x10, 0x02, 0x3c, 0xbe, 0xef, 0x20, 0x00, 0x3f, 0x11, 0xce, 0xac, 0xc0, 0x00,
                0x02, 0x01, 0x0a, 0x03, 0x00, 0x01,
            ],
            [
                0x45, 0x10, 0x02, 0x3c, 0xbe, 0xef, 0x20, 0x45, 0x3f, 0x11, 0xce, 0x67, 0xc0, 0x00,
                0x02, 0x01, 0x0a, 0x03, 0x00, 0x01,
            ],
            [
                0x45, 0x10, 0x01, 0x3c, 0xbe, 0xef, 0x00, 0x8a, 0x3f, 0x11, 0xef, 0x22, 0xc0, 0x00,
                0x02, 0x01, 0x0a, 0x03, 0x00, 0x01,
            ],
        ];
        assert_eq!(frags.len(), 3);
        for (f, e) in frags.iter().zip(expected.iter()) {
            assert_eq!(&f[..20], e);
            let v = vfsr_wire::Ipv4Packet::new_checked(&f[..]).unwrap();
            assert!(v.verify_checksum());
        }
        assert_eq!(FragError::DontFragment.name(), "dont_fragment");
        assert_eq!(FragError::NoRoom.name(), "no_room");
    }

    #[test]
    fn offsets_past_65535_are_refused() {
        // Offset 8191 × 8 = 65528 and 100 data bytes: the pieces would need offsets > 0x1fff.
        let p = packet(&[], 100, 0x1fff);
        assert_eq!(Fragmenter::new(&p, 68).err(), Some(FragError::Truncated));
        // Offset 8190 × 8 = 65520 with 8 data bytes still fits.
        let p = packet(&[], 8, 0x1ffe);
        assert_eq!(all(&p, 68).len(), 1);
    }

    #[test]
    fn first_fragment_options_and_padding() {
        // NOP, a 3-byte copied option (0x83, LSRR-like, odd length), EOL, padding: the later
        // fragments carry the 3 bytes padded to 4 with End of Option List.
        let opts = [0x01, 0x83, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00];
        let p = packet(&opts, 200, 0);
        let frags = all(&p, 100);
        assert_eq!(&frags[0][20..28], &opts);
        for f in &frags[1..] {
            assert_eq!(field(f).0, 24);
            assert_eq!(&f[20..24], &[0x83, 0x03, 0x04, 0x00]);
        }
        // An option whose length runs past the header is malformed.
        let bad = [0x83, 0x09, 0x04, 0x00];
        assert_eq!(
            Fragmenter::new(&packet(&bad, 200, 0), 100).err(),
            Some(FragError::Truncated)
        );
    }

    #[test]
    fn options_copied_only_when_flagged() {
        // Router alert (0x94, copied) and record route (0x07, not copied), 12 bytes.
        let opts = [0x94, 4, 0, 0, 0x07, 7, 4, 0, 0, 0, 0, 0];
        let p = packet(&opts, 1000, 0);
        let frags = all(&p, 600);
        assert_eq!(field(&frags[0]).0, 32);
        assert_eq!(&frags[0][20..32], &opts);
        for f in &frags[1..] {
            assert_eq!(field(f).0, 24);
            assert_eq!(&f[20..24], &[0x94, 4, 0, 0]);
            assert!(checksum::verify(&f[..24]));
        }
        let data: Vec<u8> = frags
            .iter()
            .flat_map(|f| f[field(f).0..].to_vec())
            .collect();
        assert_eq!(data, p[32..].to_vec());
    }

    #[test]
    fn refragmenting_a_middle_fragment() {
        // A fragment at offset 800 with MF set.
        let p = packet(&[], 1000, 0x2000 | 100);
        let frags = all(&p, 500);
        let shape: Vec<_> = frags.iter().map(|f| field(f)).collect();
        assert_eq!(
            shape,
            vec![
                (20, 500, true, 800),
                (20, 500, true, 1280),
                (20, 60, true, 1760)
            ]
        );
        // The last piece of a last fragment keeps MF clear.
        let p = packet(&[], 1000, 100);
        let last = all(&p, 500).pop().unwrap();
        assert!(!field(&last).2);
    }

    #[test]
    fn refusals() {
        assert_eq!(
            Fragmenter::new(&packet(&[], 100, 0x4000), 68).err(),
            Some(FragError::DontFragment)
        );
        assert_eq!(
            Fragmenter::new(&packet(&[], 100, 0)[..19], 68).err(),
            Some(FragError::Truncated)
        );
        assert_eq!(
            Fragmenter::new(&packet(&[7, 9, 4, 0], 100, 0), 68).err(),
            Some(FragError::Truncated)
        );
        assert_eq!(
            Fragmenter::new(&packet(&[], 100, 0), 27).err(),
            Some(FragError::MtuTooSmall)
        );
        let p = packet(&[], 100, 0);
        let mut f = Fragmenter::new(&p, 68).unwrap();
        let mut small = [0u8; 30];
        assert_eq!(f.write_next(&mut small), Err(FragError::NoRoom));
    }

    proptest! {
        #[test]
        fn fragments_reassemble(payload in 0usize..3000, mtu in 68usize..1500, with_opts: bool) {
            let opts: &[u8] = if with_opts { &[0x94, 4, 0, 0, 1, 1, 1, 0] } else { &[] };
            let p = packet(opts, payload, 0);
            let frags = all(&p, mtu);
            let mut data = Vec::new();
            for (i, f) in frags.iter().enumerate() {
                let (hl, total, mf, off) = field(f);
                prop_assert!(total <= mtu);
                prop_assert_eq!(total, f.len());
                prop_assert_eq!(off, data.len());
                prop_assert_eq!(mf, i + 1 < frags.len());
                if i + 1 < frags.len() {
                    prop_assert_eq!((total - hl) % 8, 0);
                }
                prop_assert!(checksum::verify(&f[..hl]));
                data.extend_from_slice(&f[hl..]);
            }
            prop_assert_eq!(data, p[20 + opts.len()..].to_vec());
        }

        #[test]
        fn refragments_reassemble(payload in 0usize..3000, mtu in 100usize..1500, cut in 68usize..100) {
            // Fragment once, then fragment every piece again on a smaller link: the pieces
            // still tile the data in order, and only the very last clears MF.
            let opts: &[u8] = &[0x94, 4, 0, 0, 0x07, 3, 4, 0];
            let p = packet(opts, payload, 0);
            let mut data = Vec::new();
            let mut mfs = Vec::new();
            for f in all(&p, mtu) {
                for g in all(&f, cut) {
                    let (hl, total, mf, off) = field(&g);
                    prop_assert!(total <= cut);
                    prop_assert_eq!(off, data.len());
                    prop_assert!(checksum::verify(&g[..hl]));
                    data.extend_from_slice(&g[hl..]);
                    mfs.push(mf);
                }
            }
            prop_assert_eq!(mfs.iter().filter(|&&m| !m).count(), 1);
            prop_assert_eq!(mfs.last(), Some(&false));
            prop_assert_eq!(data, p[20 + opts.len()..].to_vec());
        }

        #[test]
        fn arbitrary_bytes_never_panic(ip in proptest::collection::vec(any::<u8>(), 0..200), mtu in 0usize..300, room in 0usize..300) {
            if let Ok(mut f) = Fragmenter::new(&ip, mtu) {
                let mut out = vec![0u8; room];
                for _ in 0..64 {
                    match f.write_next(&mut out) {
                        Ok(Some(n)) => prop_assert!(n <= room && n <= mtu.max(n)),
                        Ok(None) | Err(_) => break,
                    }
                }
            }
        }
    }
}
