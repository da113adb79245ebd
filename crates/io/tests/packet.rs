//! The AF_PACKET backend on a real veth pair across two network namespaces: frames sent by
//! the peer arrive with their exact bytes (more than a ring's worth of blocks, read in small
//! batches so receive resumes mid-block; VLAN tags put back), a batch sent by the port
//! arrives at the peer in order and does not come back, frames others send on the interface
//! are hidden by `PACKET_IGNORE_OUTGOING`, a full transmit ring counts drops and frees its
//! slots, and the kernel's receive drops are accumulated.
//!
//! Needs root and `ip netns`; without them each test prints why and passes.

use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use vfsr_io::packet::{PacketConfig, PacketPort};
use vfsr_io::raw::RawSocket;
use vfsr_io::{Backend, Kind};

/// An ethertype of the IEEE local experimental range: nothing else on the link uses it.
const ETHERTYPE: [u8; 2] = [0x88, 0xb5];

static SEQ: AtomicU32 = AtomicU32::new(0);

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Two namespaces joined by a veth pair; deleted (with the pair) on drop.
struct Topo {
    ns_a: String,
    ns_b: String,
    if_a: String,
    if_b: String,
}

impl Drop for Topo {
    fn drop(&mut self) {
        ip(&["netns", "del", &self.ns_a]);
        ip(&["netns", "del", &self.ns_b]);
    }
}

fn topo() -> Option<Topo> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        vfsr_skip::skip("needs root for network namespaces and AF_PACKET");
        return None;
    }
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let id = format!("{}x{n}", std::process::id());
    let t = Topo {
        ns_a: format!("vfsrpa{id}"),
        ns_b: format!("vfsrpb{id}"),
        if_a: format!("vpa{id}"),
        if_b: format!("vpb{id}"),
    };
    if !ip(&["netns", "add", &t.ns_a]) {
        vfsr_skip::skip("`ip netns add` does not work here");
        return None;
    }
    let ok = ip(&["netns", "add", &t.ns_b])
        && ip(&[
            "link", "add", &t.if_a, "netns", &t.ns_a, "type", "veth", "peer", "name", &t.if_b,
            "netns", &t.ns_b,
        ])
        && ip(&["-n", &t.ns_a, "link", "set", &t.if_a, "up"])
        && ip(&["-n", &t.ns_b, "link", "set", &t.if_b, "up"]);
    assert!(ok, "could not build the veth pair {} / {}", t.if_a, t.if_b);
    Some(t)
}

/// Runs `f` on a thread that has entered namespace `ns`; sockets it opens stay bound to
/// that namespace's interfaces wherever they are used afterwards.
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: a valid namespace descriptor; only this thread changes namespace.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .unwrap()
}

/// A frame of `len` bytes: broadcast, our ethertype, `seq` and a pattern after it.
fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0x77, 1]);
    f.extend_from_slice(&ETHERTYPE);
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < len {
        f.push((f.len() as u32 ^ seq) as u8);
    }
    f
}

fn ours(f: &[u8]) -> bool {
    f.get(12..14) == Some(&ETHERTYPE[..])
}

fn wait_readable(fd: i32, ms: i32) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) };
}

/// Receives from `port` in batches of at most `max` until `want` of our frames came or 3 s
/// passed; returns our frames' bytes.
fn receive_ours(port: &mut PacketPort, want: usize, max: usize) -> Vec<Vec<u8>> {
    receive_within(port, want, max, Duration::from_secs(3))
}

fn receive_within(port: &mut PacketPort, want: usize, max: usize, wait: Duration) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut pool = Vec::new();
    let deadline = Instant::now() + wait;
    while got.len() < want && Instant::now() < deadline {
        let mut out = Vec::new();
        let n = port.recv(&mut out, max, &mut pool).unwrap();
        assert!(n <= max, "recv returned {n} > max {max}");
        assert_eq!(n, out.len());
        for p in out {
            assert_eq!(p.iif, port.ifindex());
            if ours(p.frame()) {
                got.push(p.frame().to_vec());
            }
            pool.push(p);
        }
        if n == 0 {
            wait_readable(port.fd().unwrap(), 20);
        }
    }
    got
}

#[test]
fn frames_from_the_peer_arrive_exactly_across_many_blocks() {
    let Some(t) = topo() else { return };
    // Small blocks: a burst fills several, the whole test cycles the ring about three times.
    let config = PacketConfig {
        block_size: 4096,
        block_count: 8,
        ..PacketConfig::default()
    };
    let if_a = t.if_a.clone();
    let mut port = in_ns(&t.ns_a, move || {
        PacketPort::with_config(&if_a, &config).unwrap()
    });
    assert_eq!(port.kind(), Kind::Packet);
    assert_eq!(port.name(), t.if_a);
    let if_b = t.if_b.clone();
    let mut peer = in_ns(&t.ns_b, move || RawSocket::open(&if_b, true).unwrap());

    // The descriptor polls readable once a frame waits (the block retires within ~1 ms).
    let t0 = Instant::now();
    assert!(peer.send_frame(&frame(99_999, 60)).unwrap());
    let mut p = libc::pollfd {
        fd: port.fd().unwrap(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, 2000) };
    assert_eq!(r, 1, "poll did not report the waiting frame");
    assert!(t0.elapsed() < Duration::from_millis(1000));
    assert_eq!(receive_ours(&mut port, 1, 8), vec![frame(99_999, 60)]);

    let mut sent = Vec::new();
    let mut received = Vec::new();
    let mut seq = 0u32;
    for burst in 0..6 {
        let mut this = Vec::new();
        for i in 0..14 {
            let f = frame(seq, 60 + (i * 97 + burst * 31) % 1400);
            seq += 1;
            assert!(peer.send_frame(&f).unwrap(), "peer socket buffer full");
            this.push(f);
        }
        // Batches of 5 frames: blocks hold more, so reading resumes in the middle of one.
        let got = receive_ours(&mut port, this.len(), 5);
        assert_eq!(got.len(), this.len(), "burst {burst}: frames lost");
        sent.extend(this);
        received.extend(got);
    }
    assert_eq!(received, sent, "bytes or order differ");
    let s = port.stats();
    assert!(s.rx >= sent.len() as u64);
    assert_eq!(s.rx_dropped, 0);
    assert_eq!(s.rx_invalid, 0);
    let total: usize = sent.iter().map(|f| f.len() + 64).sum();
    assert!(
        total > 8 * 4096 * 2,
        "the test must cycle the ring: {total} bytes"
    );
}

#[test]
fn a_sent_batch_reaches_the_peer_and_does_not_come_back() {
    let Some(t) = topo() else { return };
    let if_a = t.if_a.clone();
    let mut port = in_ns(&t.ns_a, move || PacketPort::open(&if_a).unwrap());
    let if_b = t.if_b.clone();
    let mut peer = in_ns(&t.ns_b, move || RawSocket::open(&if_b, true).unwrap());

    let frames: Vec<Vec<u8>> = (0..40)
        .map(|i| frame(1000 + i, 60 + i as usize * 30))
        .collect();
    let n = port.send(&mut frames.iter().map(|f| f.as_slice())).unwrap();
    assert_eq!(n, frames.len());
    port.flush().unwrap();
    let s = port.stats();
    assert_eq!(s.tx, 40);
    assert_eq!(s.tx_dropped, 0);
    assert!(s.kicks >= 1);

    let mut got = Vec::new();
    let mut buf = vec![0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(3);
    while got.len() < frames.len() && Instant::now() < deadline {
        match peer.recv_frame(&mut buf).unwrap() {
            Some(len) => {
                if ours(&buf[..len]) {
                    got.push(buf[..len].to_vec());
                }
            }
            None => wait_readable(peer.fd(), 20),
        }
    }
    assert_eq!(
        got, frames,
        "the peer must see the batch, in order, byte for byte"
    );

    // The port's own transmits are not received.
    let echoed = receive_within(&mut port, 1, 64, Duration::from_millis(300));
    assert!(
        echoed.is_empty(),
        "the port read back {} of its own frames",
        echoed.len()
    );
}

/// How many of the frames another socket sends out of the port's interface (as the host
/// stack would) the port reads, with `ignore_outgoing` as given.
fn outgoing_seen(t: &Topo, ignore_outgoing: bool) -> usize {
    let config = PacketConfig {
        ignore_outgoing,
        ..PacketConfig::default()
    };
    let if_a = t.if_a.clone();
    let mut port = in_ns(&t.ns_a, move || {
        PacketPort::with_config(&if_a, &config).unwrap()
    });
    let if_a = t.if_a.clone();
    let mut host = in_ns(&t.ns_a, move || RawSocket::open(&if_a, true).unwrap());
    for i in 0..8 {
        assert!(host.send_frame(&frame(2000 + i, 100)).unwrap());
    }
    receive_within(&mut port, 8, 64, Duration::from_millis(500)).len()
}

#[test]
fn ignore_outgoing_hides_what_others_send_on_the_interface() {
    let Some(t) = topo() else { return };
    // A packet socket never reads its own transmits; other senders' outgoing frames reach
    // every packet socket of the interface unless it asks not to see them.
    assert_eq!(
        outgoing_seen(&t, false),
        8,
        "without PACKET_IGNORE_OUTGOING the frames are seen"
    );
    assert_eq!(outgoing_seen(&t, true), 0);
}

#[test]
fn a_full_transmit_ring_counts_drops_and_slots_come_back() {
    let Some(t) = topo() else { return };
    let config = PacketConfig {
        tx_frames: 16,
        ..PacketConfig::default()
    };
    let if_a = t.if_a.clone();
    let mut port = in_ns(&t.ns_a, move || {
        PacketPort::with_config(&if_a, &config).unwrap()
    });
    let frames: Vec<Vec<u8>> = (0..100).map(|i| frame(3000 + i, 80)).collect();
    let n = port.send(&mut frames.iter().map(|f| f.as_slice())).unwrap();
    assert_eq!(n, 16, "one ring's worth is accepted before the kick");
    assert_eq!(port.stats().tx_dropped, 84);
    // Once the kernel has sent them, the slots are free again.
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut again = 0;
    while again == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        again = port
            .send(&mut frames[..16].iter().map(|f| f.as_slice()))
            .unwrap();
    }
    assert_eq!(again, 16, "slots were not given back");
}

#[test]
fn kernel_drops_are_accumulated_across_reads() {
    let Some(t) = topo() else { return };
    let config = PacketConfig {
        block_size: 4096,
        block_count: 2,
        ..PacketConfig::default()
    };
    let if_a = t.if_a.clone();
    let mut port = in_ns(&t.ns_a, move || {
        PacketPort::with_config(&if_a, &config).unwrap()
    });
    let if_b = t.if_b.clone();
    let mut peer = in_ns(&t.ns_b, move || RawSocket::open(&if_b, true).unwrap());
    // Two blocks hold a few 1000-byte frames; the rest are dropped while nobody reads.
    for i in 0..60 {
        while !peer.send_frame(&frame(4000 + i, 1000)).unwrap() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    let first = port.stats().rx_dropped;
    assert!(first > 0, "the full ring must have dropped frames");
    let second = port.stats().rx_dropped;
    assert!(second >= first, "drops went from {first} to {second}");
    let got = receive_within(&mut port, 60, 64, Duration::from_millis(200));
    assert!(!got.is_empty() && got.len() < 60, "{} frames", got.len());
}

#[test]
fn vlan_tags_are_put_back() {
    let Some(t) = topo() else { return };
    let if_a = t.if_a.clone();
    let mut port = in_ns(&t.ns_a, move || PacketPort::open(&if_a).unwrap());
    let if_b = t.if_b.clone();
    let mut peer = in_ns(&t.ns_b, move || RawSocket::open(&if_b, true).unwrap());
    let inner = frame(5000, 90);
    let mut tagged = inner[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x20, 0x64]); // priority 1, VLAN 100
    tagged.extend_from_slice(&inner[12..]);
    assert!(peer.send_frame(&tagged).unwrap());
    let mut pool = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut got = None;
    while got.is_none() && Instant::now() < deadline {
        let mut out = Vec::new();
        port.recv(&mut out, 8, &mut pool).unwrap();
        got = out
            .iter()
            .find(|p| p.frame().get(16..18) == Some(&ETHERTYPE[..]))
            .map(|p| p.frame().to_vec());
        wait_readable(port.fd().unwrap(), 20);
    }
    assert_eq!(got, Some(tagged), "the tagged frame as sent");
}

#[test]
fn oversized_frames_are_counted_not_sent() {
    let Some(t) = topo() else { return };
    let if_a = t.if_a.clone();
    let mut port = in_ns(&t.ns_a, move || PacketPort::open(&if_a).unwrap());
    let big = frame(7, 3000);
    let small = frame(8, 100);
    let n = port
        .send(&mut [big.as_slice(), small.as_slice()].into_iter())
        .unwrap();
    assert_eq!(n, 1);
    let s = port.stats();
    assert_eq!(s.tx, 1);
    assert_eq!(s.tx_dropped, 1);
}

/// An IPv4 UDP frame of flow `i` (source port varies), our marker in the payload.
fn udp_flow(i: u16, seq: u32) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0x77, 1, 0x08, 0x00]);
    f.extend_from_slice(&[0x45, 0, 0, 32, 0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&(1000 + i).to_be_bytes());
    f.extend_from_slice(&[0x1f, 0x90, 0, 12, 0, 0]);
    f.extend_from_slice(&seq.to_be_bytes());
    f
}

#[test]
fn a_fanout_group_splits_flows_without_duplicates() {
    let Some(t) = topo() else { return };
    let group = (std::process::id() & 0xffff) as u16;
    let config = PacketConfig {
        fanout: Some(group),
        ..PacketConfig::default()
    };
    let if_a = t.if_a.clone();
    let mut ports = in_ns(&t.ns_a, move || {
        [
            PacketPort::with_config(&if_a, &config).unwrap(),
            PacketPort::with_config(&if_a, &config).unwrap(),
        ]
    });
    let if_b = t.if_b.clone();
    let mut peer = in_ns(&t.ns_b, move || RawSocket::open(&if_b, true).unwrap());
    let mut sent = Vec::new();
    for seq in 0..200u32 {
        let f = udp_flow((seq % 50) as u16, seq);
        while !peer.send_frame(&f).unwrap() {
            std::thread::sleep(Duration::from_millis(1));
        }
        sent.push(f);
    }
    let mut got: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
    let mut pool = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    while got[0].len() + got[1].len() < sent.len() && Instant::now() < deadline {
        for (k, port) in ports.iter_mut().enumerate() {
            let mut out = Vec::new();
            port.recv(&mut out, 64, &mut pool).unwrap();
            got[k].extend(
                out.iter()
                    .filter(|p| p.frame().get(26..30) == Some(&[10, 0, 0, 1][..]))
                    .map(|p| p.frame().to_vec()),
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut all: Vec<Vec<u8>> = got.concat();
    all.sort();
    let mut want = sent.clone();
    want.sort();
    assert_eq!(all, want, "every frame exactly once across the group");
    assert!(
        !got[0].is_empty() && !got[1].is_empty(),
        "50 flows over two sockets: {} and {}",
        got[0].len(),
        got[1].len()
    );
    // A flow stays on one socket.
    let flows_of = |v: &Vec<Vec<u8>>| -> std::collections::BTreeSet<Vec<u8>> {
        v.iter().map(|f| f[34..36].to_vec()).collect()
    };
    assert!(flows_of(&got[0]).is_disjoint(&flows_of(&got[1])));
}
