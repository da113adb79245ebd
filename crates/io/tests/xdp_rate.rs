//! A one-second receive rate figure for each way a veth port can receive: AF_XDP with the
//! steering program in native and in generic mode, and AF_PACKET (TPACKET_V3) as the
//! baseline, measured in the same run. An AF_XDP socket on the peer transmits batches of
//! 64-byte transit frames (copy mode), and the same thread receives them on the port, so
//! the first figure is what one core moves through transmit, veth, XDP and receive
//! together; the second is the time spent in `recv` alone per frame.
//!
//! Ignored by default (it takes the CPU for a few seconds); run with
//! `cargo test -p vfsr-io --test xdp_rate -- --ignored --nocapture` as root.

use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

use vfsr_io::packet::PacketPort;
use vfsr_io::xdp::{self, AttachMode, XdpConfig, XdpPort};
use vfsr_io::Backend;

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

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

fn topo(tag: &str) -> Option<Topo> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        vfsr_skip::skip("needs root for BPF, AF_XDP and network namespaces");
        return None;
    }
    let id = format!("{}{tag}", std::process::id());
    let t = Topo {
        ns_a: format!("vfsrra{id}"),
        ns_b: format!("vfsrrb{id}"),
        if_a: format!("vra{id}"),
        if_b: format!("vrb{id}"),
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
    assert!(ok, "could not build the veth pair");
    Some(t)
}

fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: a valid namespace descriptor; only this thread changes namespace.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {path}");
        f()
    })
    .join()
    .unwrap()
}

/// A 64-byte IPv4 frame to 10.9.0.7 (transit for the steering program).
fn frame(i: u32) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0xaa, 1, 2, 0, 0, 0, 0xbb, 1, 0x08, 0x00];
    f.extend_from_slice(&[
        0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0, 10, 2, 0, 2, 10, 9, 0, 7,
    ]);
    f.extend_from_slice(&i.to_be_bytes());
    f.resize(64, 0);
    f
}

/// Sends batches on `tx` and receives on `rx` for `dur`; returns (frames received per
/// second, frames sent, nanoseconds spent in `recv` per frame received).
fn pump(tx: &mut XdpPort, rx: &mut dyn Backend, dur: Duration) -> (f64, u64, f64) {
    let frames: Vec<Vec<u8>> = (0..64).map(frame).collect();
    let mut pool = Vec::new();
    let mut out = Vec::with_capacity(64);
    let mut got = 0u64;
    let mut sent = 0u64;
    let mut in_recv = Duration::ZERO;
    let start = Instant::now();
    while start.elapsed() < dur {
        sent += tx.send(&mut frames.iter().map(|f| f.as_slice())).unwrap() as u64;
        tx.flush().unwrap();
        loop {
            let t0 = Instant::now();
            let n = rx.recv(&mut out, 64, &mut pool).unwrap();
            in_recv += t0.elapsed();
            got += n as u64;
            pool.append(&mut out);
            if n < 64 {
                break;
            }
        }
    }
    let per = in_recv.as_nanos() as f64 / got.max(1) as f64;
    (got as f64 / start.elapsed().as_secs_f64(), sent, per)
}

fn sender(t: &Topo) -> XdpPort {
    let if_b = t.if_b.clone();
    in_ns(&t.ns_b, move || {
        XdpPort::open(&if_b, 0, 2048, 4096, false).unwrap()
    })
}

#[test]
#[ignore = "a rate figure; run with --ignored --nocapture"]
fn receive_rate_per_mode() {
    let dur = Duration::from_secs(1);
    let mut lines = Vec::new();
    for (name, mode) in [
        ("xdp native", Some(AttachMode::Native)),
        ("xdp generic", Some(AttachMode::Generic)),
        ("packet", None),
    ] {
        let Some(t) = topo(&name.replace(' ', "")[..3]) else {
            return;
        };
        let mut tx = sender(&t);
        let if_a = t.if_a.clone();
        let (rate, sent, per, stats) = in_ns(&t.ns_a, move || match mode {
            Some(m) => {
                let mut c = XdpConfig::new(&if_a);
                c.mode = m;
                let (iface, mut ports) = xdp::open(&c).unwrap();
                let mut rx = ports.pop().unwrap();
                let (rate, sent, per) = pump(&mut tx, &mut rx, dur);
                let st = rx.stats();
                drop(rx);
                iface.close().unwrap();
                (rate, sent, per, st)
            }
            None => {
                let mut rx = PacketPort::open(&if_a).unwrap();
                let (rate, sent, per) = pump(&mut tx, &mut rx, dur);
                (rate, sent, per, rx.stats())
            }
        });
        assert!(rate > 0.0, "{name}: nothing received");
        lines.push(format!(
            "{name:12} {:6.3} Mpps through, {per:5.1} ns/frame in recv ({} sent, rx {} \
             dropped {})",
            rate / 1e6,
            sent,
            stats.rx,
            stats.rx_dropped
        ));
    }
    for l in &lines {
        println!("{l}");
    }
}
