//! pcap files: written frames read back with their bytes and timestamps (µs and ns, both
//! byte orders), every kind of broken file counted or refused with its name and offset, and
//! arbitrary or mutated bytes never panic.

use std::path::PathBuf;

use vfsr_io::pcap::{PcapReader, PcapWriter, Record, Resolution, MAX_RECORD};
use vfsr_io::{Backend, IoError, Kind};

struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn temp(tag: &str) -> TempFile {
    TempFile(std::env::temp_dir().join(format!("vfsr-pcap-{}-{tag}.pcap", std::process::id())))
}

fn frames() -> Vec<Vec<u8>> {
    (0..5u8)
        .map(|i| {
            (0..60 + usize::from(i) * 200)
                .map(|j| (j as u8) ^ i)
                .collect()
        })
        .collect()
}

/// A file header by hand: `magic` as given in the byte order chosen.
fn header(magic: u32, big: bool, linktype: u32) -> Vec<u8> {
    let w32 = |v: u32| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w16 = |v: u16| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut h = Vec::new();
    h.extend_from_slice(&w32(magic));
    h.extend_from_slice(&w16(2));
    h.extend_from_slice(&w16(4));
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&w32(65535));
    h.extend_from_slice(&w32(linktype));
    h
}

fn record(big: bool, secs: u32, frac: u32, incl: u32, orig: u32, data: &[u8]) -> Vec<u8> {
    let w32 = |v: u32| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut r = Vec::new();
    for v in [secs, frac, incl, orig] {
        r.extend_from_slice(&w32(v));
    }
    r.extend_from_slice(data);
    r
}

fn read_all(path: &std::path::Path) -> Result<(Vec<Record>, u64), IoError> {
    let mut r = PcapReader::open(path, 1)?;
    let mut v = Vec::new();
    while let Some(rec) = r.next_record()? {
        v.push(rec);
    }
    Ok((v, r.stats().rx_invalid))
}

#[test]
fn frames_and_timestamps_round_trip_in_both_resolutions() {
    for (res, tag) in [(Resolution::Micro, "us"), (Resolution::Nano, "ns")] {
        let f = temp(tag);
        let mut w = PcapWriter::create(&f.0, res).unwrap();
        let t0 = 1_700_000_000_123_456_789u64;
        for (i, fr) in frames().iter().enumerate() {
            assert!(w.write_frame(t0 + i as u64 * 1_000_000, fr).unwrap());
        }
        assert_eq!(w.stats().tx, 5);
        w.finish().unwrap();
        let mut r = PcapReader::open(&f.0, 7).unwrap();
        assert_eq!(r.resolution(), res);
        for (i, fr) in frames().iter().enumerate() {
            let rec = r.next_record().unwrap().unwrap();
            assert_eq!(&rec.data, fr);
            assert_eq!(rec.orig_len as usize, fr.len());
            let want = t0 + i as u64 * 1_000_000;
            let want = if res == Resolution::Micro {
                want / 1000 * 1000
            } else {
                want
            };
            assert_eq!(rec.ts_ns, want);
        }
        assert_eq!(r.next_record().unwrap(), None);
        assert_eq!(r.next_record().unwrap(), None);
    }
}

#[test]
fn the_backend_side_receives_in_batches_and_sends_through_the_writer() {
    let f = temp("backend");
    let mut w = PcapWriter::create(&f.0, Resolution::Nano).unwrap();
    w.set_timestamp(Some(42));
    let fr = frames();
    let n = w.send(&mut fr.iter().map(|v| v.as_slice())).unwrap();
    assert_eq!(n, 5);
    assert_eq!(w.kind(), Kind::Pcap);
    let mut nothing = Vec::new();
    assert_eq!(w.recv(&mut nothing, 8, &mut Vec::new()).unwrap(), 0);
    w.finish().unwrap();

    let mut r = PcapReader::open(&f.0, 9).unwrap();
    let mut out = Vec::new();
    let mut pool = Vec::new();
    assert_eq!(r.recv(&mut out, 2, &mut pool).unwrap(), 2);
    assert_eq!(r.recv(&mut out, 8, &mut pool).unwrap(), 3);
    assert_eq!(r.recv(&mut out, 8, &mut pool).unwrap(), 0);
    for (p, want) in out.iter().zip(&fr) {
        assert_eq!(p.frame(), want.as_slice());
        assert_eq!(p.iif, 9);
    }
    assert_eq!(r.stats().rx, 5);
    let e = r.send(&mut std::iter::once(&[1u8][..])).unwrap_err();
    assert!(e.to_string().contains("cannot send"), "{e}");
    let (recs, _) = read_all(&f.0).unwrap();
    assert_eq!(recs.len(), 5);
    assert!(recs.iter().all(|r| r.ts_ns == 42));
}

#[test]
fn big_endian_files_are_read() {
    let f = temp("be");
    let mut bytes = header(0xa1b2_c3d4, true, 1);
    bytes.extend(record(true, 10, 5, 3, 3, &[1, 2, 3]));
    std::fs::write(&f.0, &bytes).unwrap();
    let (recs, bad) = read_all(&f.0).unwrap();
    assert_eq!(bad, 0);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].data, vec![1, 2, 3]);
    assert_eq!(recs[0].ts_ns, 10_000_005_000);
}

#[test]
fn broken_files_are_refused_with_name_and_reason() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "shorter than the 24-byte file header"),
        (
            "garbage",
            b"this is not a capture file at all".to_vec(),
            "magic number",
        ),
        (
            "pcapng",
            vec![0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0, 0, 0],
            "pcapng is not supported; convert with editcap -F pcap",
        ),
        ("linktype", header(0xa1b2_c3d4, false, 113), "link type 113"),
        (
            "version",
            {
                let mut h = header(0xa1b2_c3d4, false, 1);
                h[4] = 9;
                h
            },
            "version 9",
        ),
    ];
    for (tag, bytes, want) in cases {
        let f = temp(tag);
        std::fs::write(&f.0, &bytes).unwrap();
        let e = PcapReader::open(&f.0, 1).err().unwrap();
        let s = e.to_string();
        assert!(s.contains(want), "{tag}: {s}");
        assert!(
            s.contains(&f.0.display().to_string()),
            "{tag}: no file name in {s}"
        );
    }
    let e = PcapReader::open(std::path::Path::new("/nonexistent/vfsr.pcap"), 1)
        .err()
        .unwrap();
    assert!(e.to_string().contains("/nonexistent/vfsr.pcap"), "{e}");
}

#[test]
fn bad_records_are_counted_and_an_impossible_length_names_the_offset() {
    let f = temp("records");
    let mut bytes = header(0xa1b2_c3d4, false, 1);
    bytes.extend(record(false, 1, 0, 4, 4, &[1, 2, 3, 4])); // fine
    bytes.extend(record(false, 1, 0, 4, 2, &[5, 6, 7, 8])); // captured > original
    bytes.extend(record(false, 1, 2_000_000, 1, 1, &[9])); // µs fraction ≥ 1 s
    bytes.extend(record(false, 2, 0, 2, 2, &[10, 11])); // fine
    bytes.extend(record(false, 3, 0, 100, 100, &[1, 2, 3])); // cut short by the end
    std::fs::write(&f.0, &bytes).unwrap();
    let (recs, bad) = read_all(&f.0).unwrap();
    assert_eq!(
        recs.iter().map(|r| r.data.clone()).collect::<Vec<_>>(),
        vec![vec![1, 2, 3, 4], vec![10, 11]]
    );
    assert_eq!(bad, 3);

    let mut bytes = header(0xa1b2_c3d4, false, 1);
    bytes.extend(record(false, 1, 0, 1, 1, &[1]));
    let at = bytes.len();
    bytes.extend(record(false, 1, 0, MAX_RECORD + 1, MAX_RECORD + 1, &[]));
    std::fs::write(&f.0, &bytes).unwrap();
    let e = read_all(&f.0).unwrap_err().to_string();
    assert!(e.contains(&format!("offset {at}")), "{e}");
    assert!(e.contains("corrupt"), "{e}");
    // Through the receive side: the good frame first, the error on the next call.
    let mut r = PcapReader::open(&f.0, 1).unwrap();
    let mut out = Vec::new();
    assert_eq!(r.recv(&mut out, 8, &mut Vec::new()).unwrap(), 1);
    assert!(r.recv(&mut out, 8, &mut Vec::new()).is_err());
    assert_eq!(r.recv(&mut out, 8, &mut Vec::new()).unwrap(), 0);

    // A record cut by the snapshot length is counted by the receive side, not forwarded.
    let mut bytes = header(0xa1b2_c3d4, false, 1);
    bytes.extend(record(false, 1, 0, 2, 60, &[1, 2]));
    std::fs::write(&f.0, &bytes).unwrap();
    let mut r = PcapReader::open(&f.0, 1).unwrap();
    let mut out = Vec::new();
    assert_eq!(r.recv(&mut out, 8, &mut Vec::new()).unwrap(), 0);
    assert_eq!(r.stats().rx_invalid, 1);
}

/// xorshift64*, enough to vary the bytes.
fn rng(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[test]
fn arbitrary_and_mutated_files_never_panic() {
    let f = temp("fuzz");
    let mut good = header(0xa1b2_3c4d, false, 1);
    for i in 0..6u8 {
        let data: Vec<u8> = (0..40 + u32::from(i) * 30).map(|j| j as u8).collect();
        good.extend(record(
            false,
            1,
            u32::from(i),
            data.len() as u32,
            data.len() as u32,
            &data,
        ));
    }
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..400 {
        let bytes = if round % 4 == 0 {
            let n = (rng(&mut s) % 300) as usize;
            (0..n).map(|_| rng(&mut s) as u8).collect()
        } else {
            let mut b = good.clone();
            for _ in 0..1 + rng(&mut s) % 6 {
                let at = (rng(&mut s) as usize) % b.len();
                b[at] = rng(&mut s) as u8;
            }
            let cut = (rng(&mut s) as usize) % (b.len() + 1);
            if round % 3 == 0 {
                b.truncate(cut);
            }
            b
        };
        std::fs::write(&f.0, &bytes).unwrap();
        let Ok(mut r) = PcapReader::open(&f.0, 1) else {
            continue;
        };
        let mut out = Vec::new();
        let mut pool = Vec::new();
        let mut total = 0;
        while let Ok(n) = r.recv(&mut out, 4, &mut pool) {
            if n == 0 {
                break;
            }
            total += n;
        }
        assert_eq!(out.len(), total);
        let frame_bytes: usize = out.iter().map(|p| p.len() + 16).sum();
        assert!(
            frame_bytes + 24 <= bytes.len(),
            "round {round}: {frame_bytes} bytes of records from a {}-byte file",
            bytes.len()
        );
    }
}
