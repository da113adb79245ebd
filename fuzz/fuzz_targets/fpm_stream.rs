//! An FPM byte stream (what zebra's dplane_fpm_nl sends) on arbitrary bytes: pushed into an
//! `FpmReader` in chunks (the first byte picks their size), every frame decoded. Nothing may
//! panic; a failed frame pushes nothing; a failed reader stays failed; reading through
//! `FpmStream::pump` (spare/filled, no copy) gives the same messages; and every decoded
//! message survives encode → decode unchanged. The same bytes are also decoded as raw
//! netlink (a kernel datagram).

#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use vfsr_netlink::{decode, decode_into, encode_into, DecodeStats, FpmReader, FpmStream, Message};

fn round_trip(msgs: &[Message]) {
    let mut bytes = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        encode_into(m, i as u32, &mut bytes);
    }
    let mut stats = DecodeStats::default();
    let again = decode(&bytes, &mut stats).expect("encoded messages decode");
    assert_eq!(again.as_slice(), msgs);
}

fuzz_target!(|data: &[u8]| {
    let Some((&k, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(k % 64) + 1;

    let mut reader = FpmReader::with_capacity(0);
    let mut stats = DecodeStats::default();
    let mut out = Vec::new();
    'feed: for piece in stream.chunks(chunk) {
        reader.push(piece);
        loop {
            match reader.next_frame() {
                Ok(Some(netlink)) => {
                    let (before, saved) = (out.len(), stats);
                    if decode_into(netlink, &mut out, &mut stats).is_err() {
                        assert_eq!(out.len(), before);
                        assert_eq!(stats, saved);
                        break 'feed;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    assert_eq!(reader.next_frame(), Err(e));
                    break 'feed;
                }
            }
        }
    }
    round_trip(&out);

    let mut pumped = Vec::new();
    let mut fpm = FpmStream::with_capacity(0);
    let _ = fpm.pump(&mut Cursor::new(stream), &mut pumped, usize::MAX);
    assert_eq!(pumped, out);

    let mut raw_stats = DecodeStats::default();
    if let Ok(msgs) = decode(stream, &mut raw_stats) {
        assert_eq!(raw_stats.decoded(), msgs.len() as u64);
        round_trip(&msgs);
    }
});
