//! The control plane takes any bytes: random frames and mutations of valid ARP, ND and echo
//! frames are handled or counted, never a panic, and what it sends is well-formed.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use vfsr_lpm::poptrie::Poptrie;
use vfsr_wire::arp::ArpRepr;
use vfsr_wire::MacAddr;
use vfsrd::config::{parse, PuntSection};
use vfsrd::control::frames::{arp_frame, link_local, neighbor_solicit, parse_arp, parse_nd};
use vfsrd::control::Control;
use vfsrd::link::MemLink;

type C = Control<Poptrie<u32>, Poptrie<u128>>;

const US: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const THEM: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

fn control() -> (C, MemLink) {
    let plan = parse(
        "[[interface]]\nname = \"p\"\naddresses = [\"10.0.0.1/24\", \"fd00::1/64\"]\n",
        None,
    )
    .unwrap();
    let punt = PuntSection {
        arp_nd: 1_000_000,
        routing: 1_000_000,
        icmp: 1_000_000,
        local: 1_000_000,
        slow_path: 1_000_000,
        tcp_syn: 1_000_000,
    };
    let (c, mut wires, _) = C::in_memory(&plan, &[US], &[], &punt).unwrap();
    (c, wires.remove(0))
}

fn seeds() -> Vec<Vec<u8>> {
    let arp = ArpRepr::request(THEM, Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 1));
    let ns = neighbor_solicit(
        THEM,
        link_local(THEM),
        "fd00::1".parse::<Ipv6Addr>().unwrap(),
        None,
    )
    .unwrap();
    vec![arp_frame(US, THEM, &arp), ns]
}

#[test]
fn valid_requests_are_answered_with_valid_replies() {
    let (mut c, wire) = control();
    for f in seeds() {
        c.input(0, &f, None);
    }
    let sent = wire.take();
    assert_eq!(sent.len(), 2, "{sent:?}");
    let arp = parse_arp(&sent[0]).unwrap();
    assert_eq!(arp.sender_hw, US);
    assert_eq!(arp.target_hw, THEM);
    let na = parse_nd(&sent[1]).unwrap();
    assert_eq!(na.src, "fd00::1".parse::<Ipv6Addr>().unwrap());
    assert_eq!(c.counters.arp_answered, 1);
    assert_eq!(c.counters.ns_answered, 1);
    assert_eq!(c.counters.neighbors_learned, 2);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_bytes_are_handled_or_counted(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let (mut c, wire) = control();
        c.input(0, &bytes, None);
        c.work();
        // Whatever went out is an ARP or ND message we can read back, or an echo reply.
        for f in wire.take() {
            prop_assert!(parse_arp(&f).is_some() || parse_nd(&f).is_some() || f.len() > 34);
        }
        prop_assert_eq!(c.counters.frames_in, 1);
    }

    #[test]
    fn mutated_control_frames_never_panic(
        which in 0usize..2,
        flips in proptest::collection::vec((0usize..120, any::<u8>()), 1..6),
        cut in 0usize..130,
    ) {
        let (mut c, _wire) = control();
        let mut f = seeds()[which].clone();
        for (i, v) in flips {
            if let Some(b) = f.get_mut(i) {
                *b ^= v;
            }
        }
        f.truncate(cut.max(1));
        c.input(0, &f, None);
        c.work();
        prop_assert_eq!(c.counters.frames_in, 1);
    }
}

/// Found by fuzzing (`fuzz/fuzz_targets/control_frames.rs`): an echo request sent to the
/// Ethernet broadcast address (or to another station's MAC) was answered with that address
/// as the reply's source MAC; the reply must leave from the port's own MAC.
#[test]
fn echo_reply_comes_from_the_port_mac_whatever_the_request_was_sent_to() {
    let (mut c, wire) = control();
    let mut ip = vec![
        0x45, 0, 0, 32, 0, 1, 0x40, 0, 64, 1, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1,
    ];
    let sum = vfsr_wire::checksum::checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1, 1, 2, 3, 4];
    let sum = vfsr_wire::checksum::checksum(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    for dst in [MacAddr::BROADCAST, MacAddr([2, 0, 0, 0, 0x80, 1]), US] {
        let mut f = Vec::new();
        f.extend_from_slice(&dst.0);
        f.extend_from_slice(&THEM.0);
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&icmp);
        c.input(0, &f, None);
        let sent = wire.take();
        assert_eq!(sent.len(), 1, "one echo reply to a request sent to {dst:?}");
        assert_eq!(&sent[0][0..6], &THEM.0, "to the requester");
        assert_eq!(&sent[0][6..12], &US.0, "from the port's MAC, not {dst:?}");
    }
}

/// A scan of a connected subnet: every address tried is a new neighbor to solicit. The port
/// sends at most its `[neighbor] solicit_rate` (here the burst of a fresh bucket), counts
/// the solicitations it held back, and a new rate (a reload) takes effect at once.
#[test]
fn solicitations_beyond_the_ports_rate_are_counted_not_sent() {
    let (mut c, wire) = control();
    c.set_solicit_rate(20); // a burst of 16 (dataplane::burst_of), then 20 a second
    let pkt = || vfsr_fwd::Packet::from_frame(&[0u8; 60], 1);
    for k in 0..40u8 {
        c.hold(1, Ipv4Addr::new(10, 0, 0, 100 + k).into(), pkt());
    }
    for k in 0..40u16 {
        let a = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0x100 + k);
        c.hold(1, a.into(), pkt());
    }
    let sent = wire.take();
    let arp = sent.iter().filter(|f| parse_arp(f).is_some()).count();
    let nd = sent.iter().filter(|f| parse_nd(f).is_some()).count();
    // IPv4 misses came first and took the whole burst; they share one bucket per port.
    assert_eq!((arp, nd), (16, 0), "{} frames", sent.len());
    assert_eq!(c.counters.solicits_sent, 16);
    assert_eq!(c.counters.solicits_limited, 64);
    assert_eq!(c.counters.held, 80, "every packet is still held");

    // A reload with a new `[neighbor] solicit_rate` replaces the buckets.
    let text = "[[interface]]\nname = \"p\"\naddresses = [\"10.0.0.1/24\", \"fd00::1/64\"]\n";
    let mut plan = parse(text, None).unwrap();
    let path = std::env::temp_dir().join(format!("vfsrd-solicit-{}.toml", std::process::id()));
    std::fs::write(&path, format!("{text}[neighbor]\nsolicit_rate = 1000000\n")).unwrap();
    let answer = vfsrd::reload::reload(&mut c, &mut plan, &path, &[], &[0, 1]).unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(
        answer
            .to_string()
            .contains("neighbor: 1000000 solicitations"),
        "{answer}"
    );
    assert_eq!(plan.neighbor.solicit_rate, 1_000_000);
    c.hold(1, Ipv4Addr::new(10, 0, 0, 200).into(), pkt());
    c.hold(
        1,
        Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0x200).into(),
        pkt(),
    );
    let sent = wire.take();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(parse_arp(&sent[0]).is_some_and(|a| a.target_ip == Ipv4Addr::new(10, 0, 0, 200)));
    assert!(parse_nd(&sent[1]).is_some());
    assert_eq!(c.counters.solicits_limited, 64);
}
