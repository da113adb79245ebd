//! Arbitrary frames into a worker: it never panics, gives one verdict per frame, and its
//! counters balance: received = forwarded + punted + held + dropped (by reason).

mod common;

use common::*;
use proptest::prelude::*;
use vfsr_fwd::{Batch, Counters, Outcome, Verdict};

/// A valid frame of one of several kinds, to mutate.
fn template(kind: u8, x: u8) -> Vec<u8> {
    match kind % 8 {
        0 => udp4(HOST4, [10, 1, 2, x], 64, usize::from(x), x & 1 == 0),
        1 => udp4(HOST4, [10, 5, x, 1], 2, 0, false),
        2 => udp4(HOST4, [10, 3, 0, x], 64, 1300, x & 1 == 0),
        3 => udp4(HOST4, [10, 9, 0, x], 1, 4, false),
        4 => udp6(HOST6, "2001:db8:a::7", 64, usize::from(x)),
        5 => udp6(HOST6, "2001:db8:5::7", 1, 1300),
        6 => udp6_ext(
            HOST6,
            "2001:db8:c::1",
            64,
            1300,
            60,
            &[17, 0, 1, 4, 0, 0, 0, 0],
        ),
        _ => udp4(HOST4, [192, 0, 2, 254], 64, 0, false),
    }
}

fn frame() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        (
            any::<u8>(),
            any::<u8>(),
            proptest::collection::vec((any::<u16>(), any::<u8>()), 0..6),
            any::<u16>()
        )
            .prop_map(|(kind, x, edits, cut)| {
                let mut f = template(kind, x);
                for (at, v) in edits {
                    let i = usize::from(at) % f.len();
                    f[i] = v;
                }
                if cut % 5 == 0 {
                    f.truncate(usize::from(cut) % (f.len() + 1));
                }
                f
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_frames_balance(frames in proptest::collection::vec(frame(), 1..64), flow in any::<bool>(), iif in 0u32..5) {
        let fx = fixture();
        let mut w = if flow { with_flow(&fx) } else { split(&fx) };
        let mut b = Batch::from_frames(frames.iter().map(|f| f.as_slice()), iif);
        w.process(&mut b, 1_000_000_000);
        prop_assert_eq!(b.verdicts.len(), frames.len());
        let c: &Counters = w.counters();
        prop_assert!(c.balanced(), "{:?}", c.nonzero());
        prop_assert_eq!(c.rx(), frames.len() as u64);
        // The verdicts agree with the counters.
        let fwd = b.verdicts.iter().filter(|v| matches!(v, Verdict::Forward { .. } | Verdict::Consumed)).count() as u64;
        let held = b.verdicts.iter().filter(|v| matches!(v, Verdict::Resolve { .. })).count() as u64;
        let punted = b.verdicts.iter().filter(|v| matches!(v, Verdict::Punt(_))).count() as u64;
        prop_assert_eq!(fwd, c.outcome(Outcome::Forwarded));
        prop_assert_eq!(held, c.outcome(Outcome::Held));
        prop_assert_eq!(punted, c.outcome(Outcome::Punted));
        for v in &b.verdicts {
            if let Verdict::Drop(r) = v {
                prop_assert!(c.dropped(*r) > 0);
            }
        }
        // Every forwarded frame still carries a valid IPv4 header checksum.
        for (p, v) in b.results() {
            if matches!(v, Verdict::Forward { .. }) && p.frame().get(12..14) == Some(&[8, 0]) {
                let hl = usize::from(p.frame()[14] & 0xf) * 4;
                prop_assert!(vfsr_wire::checksum::verify(&p.frame()[14..14 + hl]));
            }
        }
        // The shared block equals the worker's own counters once flushed.
        w.flush_counters();
        prop_assert_eq!(&w.shared().read(), w.counters());
    }
}
