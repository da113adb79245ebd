//! `vfsr replay` as a user runs it: a capture built here (IPv4 and IPv6 UDP to port 1's MAC,
//! a TTL-1 packet, a packet with a broken header checksum, one too large for port 2) goes
//! through the pipeline, and the written capture is checked byte by byte; bad input files
//! are clear errors with a nonzero exit.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use vfsr_io::pcap::{PcapReader, PcapWriter, Record, Resolution};
use vfsr_wire::checksum;

const PORT1_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const PORT2_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const GW_MAC: [u8; 6] = [2, 0, 0, 0, 2, 2];
const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 1, 2];
const HOST4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const HOST6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);
const DST4: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 5);
const DST6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 5);

/// Files of one test, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("vfsr-replay-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn vfsr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vfsr"))
        .args(args)
        .output()
        .unwrap()
}

fn sum_ok(pseudo: u16, bytes: &[u8]) -> bool {
    checksum::add(pseudo, checksum::ones_sum(bytes)) == 0xffff
}

fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An IPv4 UDP frame to port 1 with valid checksums (`payload` bytes of data).
fn udp4(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, payload: usize) -> Vec<u8> {
    let mut f = eth(PORT1_MAC, HOST_MAC, 0x0800);
    let udp_len = 8 + payload as u16;
    let total = 20 + udp_len;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0x12, 0x34, 0, 0, ttl, 17, 0, 0]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    let c = checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&4000u16.to_be_bytes());
    f.extend_from_slice(&53u16.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend((0..payload).map(|i| i as u8));
    let pseudo = checksum::pseudo_header_v4(src, dst, 17, udp_len);
    let u = !checksum::add(pseudo, checksum::ones_sum(&f[34..]));
    f[40..42].copy_from_slice(&(if u == 0 { 0xffff } else { u }).to_be_bytes());
    f
}

/// An IPv6 UDP frame to port 1 with a valid checksum.
fn udp6(src: Ipv6Addr, dst: Ipv6Addr, hops: u8) -> Vec<u8> {
    let mut f = eth(PORT1_MAC, HOST_MAC, 0x86dd);
    let payload = b"replayed";
    let udp_len = 8 + payload.len() as u16;
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[17, hops]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&4000u16.to_be_bytes());
    f.extend_from_slice(&53u16.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    let pseudo = checksum::pseudo_header_v6(&src, &dst, 17, u32::from(udp_len));
    let u = !checksum::add(pseudo, checksum::ones_sum(&f[54..]));
    f[60..62].copy_from_slice(&(if u == 0 { 0xffff } else { u }).to_be_bytes());
    f
}

fn write_capture(path: &Path, frames: &[Vec<u8>]) {
    let mut w = PcapWriter::create(path, Resolution::Micro).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(1_700_000_000_000_000_000 + i as u64 * 1000, f)
            .unwrap();
    }
    w.finish().unwrap();
}

fn read_capture(path: &Path) -> Vec<Record> {
    let mut r = PcapReader::open(path, 0).unwrap();
    let mut v = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        v.push(rec);
    }
    v
}

fn table(dir: &Dir) -> PathBuf {
    let p = dir.path("table.txt");
    std::fs::write(&p, "203.0.113.0/24 10.0.0.1\n2001:db8:ffff::/48 fd00::1\n").unwrap();
    p
}

/// Checks a forwarded IPv4 frame against the one sent: MACs of port 2 and the gateway, TTL
/// one less, header checksum valid, everything else unchanged.
fn check_forwarded4(out: &[u8], sent: &[u8]) {
    assert_eq!(out.len(), sent.len());
    assert_eq!(&out[0..6], &GW_MAC, "destination MAC is the gateway's");
    assert_eq!(&out[6..12], &PORT2_MAC, "source MAC is port 2's");
    assert_eq!(out[22], sent[22] - 1, "TTL decremented");
    assert!(sum_ok(0, &out[14..34]), "IPv4 header checksum");
    let src = Ipv4Addr::new(out[26], out[27], out[28], out[29]);
    let dst = Ipv4Addr::new(out[30], out[31], out[32], out[33]);
    let pseudo = checksum::pseudo_header_v4(src, dst, 17, (out.len() - 34) as u16);
    assert!(sum_ok(pseudo, &out[34..]), "UDP checksum");
    assert_eq!(&out[34..], &sent[34..], "payload unchanged");
}

#[test]
fn a_capture_is_forwarded_and_every_outcome_counted() {
    let dir = Dir::new("fwd");
    let input = dir.path("in.pcap");
    let output = dir.path("out.pcap");
    let sent4 = udp4(HOST4, DST4, 64, 18);
    let sent6 = udp6(HOST6, DST6, 64);
    let ttl1 = udp4(HOST4, DST4, 1, 18);
    let mut bad = udp4(HOST4, DST4, 64, 18);
    bad[24] ^= 0x55; // header checksum broken
    let hop1 = udp6(HOST6, DST6, 1);
    write_capture(
        &input,
        &[sent4.clone(), sent6.clone(), ttl1.clone(), bad, hop1],
    );
    let t = table(&dir);

    let o = vfsr(&[
        "replay",
        "--in",
        input.to_str().unwrap(),
        "--out",
        output.to_str().unwrap(),
        "--table",
        t.to_str().unwrap(),
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "vfsr replay failed: {stderr}");
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["frames_in"], 5, "{j}");
    assert_eq!(j["forwarded"], 2, "{j}");
    assert_eq!(j["dropped"], 3, "{j}");
    assert_eq!(j["drops"]["ttl_expired"], 2, "{j}");
    assert_eq!(j["drops"]["ip4_bad_checksum"], 1, "{j}");
    assert_eq!(j["events"]["icmp4_sent"], 1, "{j}");
    assert_eq!(j["events"]["icmp6_sent"], 1, "{j}");
    assert_eq!(j["frames_out"], 4, "{j}");

    let out = read_capture(&output);
    assert_eq!(out.len(), 4);
    // In input order: the two forwarded frames, then the two errors.
    check_forwarded4(&out[0].data, &sent4);
    assert_eq!(out[0].ts_ns, 1_700_000_000_000_000_000);

    let o6 = &out[1].data;
    assert_eq!(o6.len(), sent6.len());
    assert_eq!(&o6[0..6], &GW_MAC);
    assert_eq!(&o6[6..12], &PORT2_MAC);
    assert_eq!(o6[21], 63, "hop limit decremented");
    assert_eq!(&o6[22..], &sent6[22..], "addresses and UDP unchanged");

    // TTL 1: ICMP Time Exceeded from port 1's address back to the host on port 1.
    let te = &out[2].data;
    assert_eq!(&te[0..6], &HOST_MAC);
    assert_eq!(&te[6..12], &PORT1_MAC);
    assert_eq!(&te[12..14], &[8, 0]);
    assert_eq!(te[23], 1, "ICMP");
    assert_eq!(&te[26..30], &[192, 0, 2, 1], "from port 1's address");
    assert_eq!(&te[30..34], &HOST4.octets());
    assert!(sum_ok(0, &te[14..34]), "IPv4 header checksum");
    assert_eq!((te[34], te[35]), (11, 0), "time exceeded in transit");
    assert!(sum_ok(0, &te[34..]), "ICMP checksum");
    assert_eq!(&te[42..62], &ttl1[14..34], "quotes the expired header");
    assert_eq!(out[2].ts_ns, 1_700_000_000_000_002_000);

    // Hop limit 1: ICMPv6 Time Exceeded to the IPv6 host.
    let te6 = &out[3].data;
    assert_eq!(&te6[0..6], &HOST_MAC);
    assert_eq!(te6[20], 58, "ICMPv6");
    assert_eq!(&te6[38..54], &HOST6.octets());
    assert_eq!((te6[54], te6[55]), (3, 0), "time exceeded in transit");
}

#[test]
fn large_packets_are_fragmented_or_answered_and_the_text_summary_names_reasons() {
    let dir = Dir::new("mtu");
    let input = dir.path("in.pcap");
    let output = dir.path("out.pcap");
    let big = udp4(HOST4, DST4, 64, 1400);
    let mut big_df = big.clone();
    big_df[20] = 0x40; // DF
    let c = checksum::checksum(&{
        let mut h = big_df[14..34].to_vec();
        h[10] = 0;
        h[11] = 0;
        h
    });
    big_df[24..26].copy_from_slice(&c.to_be_bytes());
    write_capture(&input, &[big, big_df]);
    let t = table(&dir);
    let o = vfsr(&[
        "replay",
        "--in",
        input.to_str().unwrap(),
        "--out",
        output.to_str().unwrap(),
        "--table",
        t.to_str().unwrap(),
        "--egress-mtu",
        "1280",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("frames in:       2"), "{text}");
    assert!(text.contains("mtu_exceeded_df"), "{text}");
    assert!(text.contains("fragments_made"), "{text}");
    let out = read_capture(&output);
    // Two fragments of the first, then Fragmentation Needed for the second.
    assert_eq!(out.len(), 3, "{text}");
    for f in &out[..2] {
        assert_eq!(&f.data[0..6], &GW_MAC);
        assert!(f.data.len() - 14 <= 1280);
        assert!(sum_ok(0, &f.data[14..34]));
    }
    let fne = &out[2].data;
    assert_eq!(&fne[0..6], &HOST_MAC);
    assert_eq!((fne[34], fne[35]), (3, 4), "fragmentation needed");
    assert_eq!(u16::from_be_bytes([fne[40], fne[41]]), 1280, "next-hop MTU");
}

#[test]
fn the_synthetic_table_is_the_default() {
    let dir = Dir::new("synth");
    let input = dir.path("in.pcap");
    let output = dir.path("out.pcap");
    let sent = udp4(HOST4, Ipv4Addr::new(8, 8, 8, 8), 64, 10);
    write_capture(&input, std::slice::from_ref(&sent));
    let o = vfsr(&[
        "replay",
        "--in",
        input.to_str().unwrap(),
        "--out",
        output.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(j["table"].as_str().unwrap().contains("synthetic"), "{j}");
    assert_eq!(j["forwarded"], 1, "{j}");
    let out = read_capture(&output);
    check_forwarded4(&out[0].data, &sent);
}

#[test]
fn missing_or_garbage_input_is_a_clear_error() {
    let dir = Dir::new("bad");
    let output = dir.path("out.pcap");
    let missing = dir.path("missing.pcap");
    let garbage = dir.path("garbage.pcap");
    std::fs::write(&garbage, b"certainly not a capture, just some text\n").unwrap();
    let pcapng = dir.path("capture.pcapng");
    std::fs::write(
        &pcapng,
        [
            0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a,
        ],
    )
    .unwrap();
    for (input, want) in [
        (&missing, "missing.pcap"),
        (&garbage, "not a pcap file"),
        (
            &pcapng,
            "pcapng is not supported; convert with editcap -F pcap",
        ),
    ] {
        let o = vfsr(&[
            "replay",
            "--in",
            input.to_str().unwrap(),
            "--out",
            output.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{input:?} must fail");
        assert!(err.contains(want), "{input:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let same = dir.path("same.pcap");
    std::fs::copy(&garbage, &same).unwrap();
    let o = vfsr(&[
        "replay",
        "--in",
        same.to_str().unwrap(),
        "--out",
        same.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("same file"));
    assert_eq!(
        std::fs::read(&same).unwrap(),
        std::fs::read(&garbage).unwrap()
    );
    let help = vfsr(&["--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("replay"));
}

#[test]
fn to_router_readdresses_foreign_frames_and_batches_give_the_same_frames() {
    let dir = Dir::new("opts");
    let input = dir.path("in.pcap");
    let output = dir.path("out.pcap");
    let mut foreign = udp4(HOST4, DST4, 64, 20);
    foreign[0..6].copy_from_slice(&[0x00, 0x1b, 0x21, 1, 2, 3]);
    let frames: Vec<Vec<u8>> = (0..40u8)
        .map(|i| udp4(HOST4, Ipv4Addr::new(203, 0, 113, i), 64, usize::from(i)))
        .collect();
    write_capture(&input, std::slice::from_ref(&foreign));
    let t = table(&dir);
    let run = |extra: &[&str]| -> Value {
        let mut args = vec![
            "replay",
            "--in",
            input.to_str().unwrap(),
            "--out",
            output.to_str().unwrap(),
            "--table",
            t.to_str().unwrap(),
            "--json",
        ];
        args.extend_from_slice(extra);
        let o = vfsr(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let j = run(&[]);
    assert_eq!(j["drops"]["eth_not_for_us"], 1, "{j}");
    let j = run(&["--to-router"]);
    assert_eq!(j["forwarded"], 1, "{j}");
    let mut readdressed = foreign.clone();
    readdressed[0..6].copy_from_slice(&PORT1_MAC);
    check_forwarded4(&read_capture(&output)[0].data, &readdressed);

    write_capture(&input, &frames);
    run(&[]);
    let one = read_capture(&output);
    let j = run(&["--batch", "16"]);
    assert_eq!(j["forwarded"], 40, "{j}");
    let batched = read_capture(&output);
    assert_eq!(one.len(), 40);
    assert_eq!(
        one.iter().map(|r| &r.data).collect::<Vec<_>>(),
        batched.iter().map(|r| &r.data).collect::<Vec<_>>(),
        "forwarded frames are written in input order whatever the batch"
    );
    for (r, sent) in one.iter().zip(&frames) {
        check_forwarded4(&r.data, sent);
    }
    let o = vfsr(&[
        "replay",
        "--in",
        input.to_str().unwrap(),
        "--out",
        output.to_str().unwrap(),
        "--batch",
        "0",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--batch 0"));
}
