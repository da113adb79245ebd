//! The control plane (`vfsrd::control::Control`) on arbitrary frames, with a small fixed
//! router: two ports (IPv4 and IPv6 subnets each, the second with a TAP), links in memory.
//! The input is a sequence of records `op | len | bytes`: a frame received on a port (read
//! from the port's socket, or punted by a worker with the class the op names, as
//! `Control::input` takes either), or a packet a worker holds for a next hop to resolve
//! (`Control::hold`, the next hop taken from the op and the first bytes). Every frame also
//! goes through `control::classify` and the `control::frames` readers on its own.
//!
//! Nothing may panic. Every frame is counted in; every frame sent out of a port is one the
//! control plane answered, solicited or released,
//! every frame sent to a TAP is one it passed to the host; and, as long as no packet was
//! held, what leaves a port carries the port's MAC as source and is a well-formed ARP
//! message, NS/NA or echo reply.

#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use vfsr_fwd::{Packet, PuntClass};
use vfsr_lpm::radix::Radix;
use vfsr_wire::ethernet::ethertype;
use vfsr_wire::{checksum, ip_proto, EthernetFrame, Ipv4Packet, Ipv6Packet, MacAddr};
use vfsrd::config::{self, PuntSection};
use vfsrd::control::{classify, frames, Control};
use vfsrd::link::MemLink;

type C = Control<Radix<u32>, Radix<u128>>;

const MACS: [MacAddr; 2] = [MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2])];

const CONFIG: &str = r#"
[[interface]]
name = "p0"
addresses = ["10.0.0.1/24", "fd00::1/64"]

[[interface]]
name = "p1"
addresses = ["192.0.2.1/24", "2001:db8::1/64", "fe80::1/64"]

[[route]]
prefix = "198.51.100.0/24"
via = "10.0.0.2"

[[route]]
prefix = "2001:db8:100::/48"
via = "fd00::2"
"#;

/// The control plane, the far ends of the ports' wires and of the TAPs (port 1 has one).
fn control() -> (C, Vec<MemLink>, Vec<MemLink>) {
    let plan = config::parse(CONFIG, None).expect("the fixed configuration checks");
    // Limits no input of this size reaches: every frame is handled, none rate-limited.
    let punt = PuntSection {
        arp_nd: 10_000_000,
        routing: 10_000_000,
        icmp: 10_000_000,
        local: 10_000_000,
        slow_path: 10_000_000,
        tcp_syn: 10_000_000,
    };
    C::in_memory(&plan, &MACS, &[1], &punt).expect("the fixed router builds")
}

/// An echo reply the control plane wrote: addresses and checksums right.
fn is_echo_reply(f: &[u8]) -> bool {
    let Ok(eth) = EthernetFrame::new_checked(f) else {
        return false;
    };
    match eth.ethertype() {
        ethertype::IPV4 => {
            let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
                return false;
            };
            ip.protocol() == ip_proto::ICMP
                && ip.verify_checksum()
                && ip.payload().first() == Some(&0)
                && checksum::verify(ip.payload())
        }
        ethertype::IPV6 => {
            let Ok(ip) = Ipv6Packet::new_checked(eth.payload()) else {
                return false;
            };
            ip.next_header() == ip_proto::ICMPV6
                && ip.payload().first() == Some(&frames::ICMP6_ECHO_REPLY)
                && vfsr_wire::icmpv6::Icmpv6Packet::new_checked(ip.payload())
                    .is_ok_and(|p| p.verify_checksum(&ip.src_addr(), &ip.dst_addr()))
        }
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let (mut c, wires, taps) = control();
    let mut rest = data;
    let mut frames_in = 0u64;
    let mut held = false;
    while let [op, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (bytes, next) = tail.split_at(n);
        rest = next;
        let port = usize::from(op & 1);
        // Readers of frames on their own (the control plane calls them too).
        if let Ok(eth) = EthernetFrame::new_checked(bytes) {
            let _ = classify(eth.ethertype(), bytes);
        }
        let _ = frames::parse_arp(bytes);
        let _ = frames::parse_nd(bytes);
        let _ = frames::dst4(bytes);
        let _ = frames::dst6(bytes);
        let mut copy = bytes.to_vec();
        if frames::echo_reply_in_place(&mut copy) {
            assert!(is_echo_reply(&copy));
        }
        match op >> 1 {
            // A next hop to resolve: from the subnet of the port (or anywhere), IPv4 or IPv6.
            0..=15 => {
                held = true;
                let ifindex = u32::from(op >> 1 & 3); // 0 and 3 are no port
                let last = bytes.first().copied().unwrap_or(2);
                let nexthop = if op & 0x10 == 0 {
                    let net = if port == 0 { [10, 0, 0] } else { [192, 0, 2] };
                    IpAddr::V4(Ipv4Addr::new(net[0], net[1], net[2], last))
                } else {
                    let net = if port == 0 { 0xfd00 } else { 0x2001 };
                    IpAddr::V6(Ipv6Addr::new(net, 0xdb8, 0, 0, 0, 0, 0, u16::from(last)))
                };
                c.hold(ifindex, nexthop, Packet::from_frame(bytes, 0));
            }
            // Read from the port's socket: the control plane classifies it.
            16..=47 => {
                frames_in += 1;
                c.input(port, bytes, None);
            }
            // Punted by a worker, in the class it decided.
            k => {
                frames_in += 1;
                let class = PuntClass::ALL[usize::from(k) % PuntClass::COUNT];
                c.input(port, bytes, Some(class));
            }
        }
    }
    let k = c.counters;
    assert_eq!(k.frames_in, frames_in);
    assert_eq!(k.rate_limited, [0; PuntClass::COUNT]);
    assert_eq!(k.tx_failed, 0);
    let sent: Vec<Vec<Vec<u8>>> = wires.iter().map(|w| w.take()).collect();
    let out: u64 = sent.iter().map(|s| s.len() as u64).sum();
    assert_eq!(
        out,
        k.arp_answered + k.ns_answered + k.echo_replies + k.solicits_sent + k.released,
        "{k:?}"
    );
    let to_host: u64 = taps.iter().map(|t| t.take().len() as u64).sum();
    assert_eq!(to_host, k.to_host);
    // A released packet is the worker's frame as it was (only its MACs rewritten).
    if held {
        return;
    }
    for (i, frames_out) in sent.iter().enumerate() {
        for f in frames_out {
            assert_eq!(f.get(6..12), Some(&MACS[i].0[..]));
            let ok =
                frames::parse_arp(f).is_some() || frames::parse_nd(f).is_some() || is_echo_reply(f);
            assert!(
                ok,
                "port {i} sent a frame the control plane does not write: {f:02x?}"
            );
        }
    }
});
