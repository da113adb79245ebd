//! The readers take any bytes without panicking: arbitrary inputs and mutations of valid
//! text, MRT and gzip inputs. Results are errors or counted skips.

mod common;

use proptest::prelude::*;
use vfsr_table::mrt::read_mrt;
use vfsr_table::{read_table, read_text, Error, ReadOptions};

const TEXT: &str = "10.0.0.0/8 192.0.2.1\n# c\n2001:db8::/32 2001:db8::1 # x\n192.0.2.0/24\n\
                    ::/0\n0.0.0.0/0 192.0.2.9\n";

/// Small limits, so the caps are exercised too.
fn option_sets() -> [ReadOptions; 3] {
    [
        ReadOptions::default(),
        ReadOptions {
            skip_bad: true,
            ..ReadOptions::default()
        },
        ReadOptions {
            skip_bad: true,
            max_bytes: 300,
            max_routes: 3,
            max_line_len: 20,
            max_record_len: 64,
        },
    ]
}

/// Runs every reader on `data` with every option set; checks the invariants that hold for
/// any input.
fn read_everything(data: &[u8]) {
    for opts in option_sets() {
        if let Ok((t, r)) = read_text(data, "fuzz", &opts) {
            assert_eq!(t.v4.len() + t.v6.len(), r.v4 + r.v6);
            assert!(t.len() <= opts.max_routes);
        }
        match read_mrt(data, "fuzz", &opts) {
            Ok((t, r)) => {
                assert_eq!(t.v4.len(), r.v4);
                assert_eq!(t.v6.len(), r.v6);
                if !opts.skip_bad {
                    assert_eq!(r.bad_total(), 0);
                }
            }
            Err(Error::Mrt { .. }) => assert!(!opts.skip_bad),
            Err(_) => {}
        }
        let _ = read_table(data, "fuzz", &opts);
    }
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
        (any::<usize>(), 1usize..16).prop_map(|(i, n)| Mutation::Remove(i, n)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(mut data: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        let len = data.len().max(1);
        match m {
            Mutation::Flip(i, b) => {
                if let Some(x) = data.get_mut(i % len) {
                    *x ^= b;
                }
            }
            Mutation::Set(i, b) => {
                if let Some(x) = data.get_mut(i % len) {
                    *x = *b;
                }
            }
            Mutation::Insert(i, v) => {
                let at = i % (data.len() + 1);
                data.splice(at..at, v.iter().copied());
            }
            Mutation::Remove(i, n) => {
                let at = i % len;
                let end = (at + n).min(data.len());
                if at < end {
                    data.drain(at..end);
                }
            }
            Mutation::Truncate(i) => data.truncate(i % len),
        }
    }
    data
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..1024)) {
        read_everything(&data);
    }

    #[test]
    fn arbitrary_gzip(data in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut with_magic = vec![0x1f, 0x8b];
        with_magic.extend(data);
        read_everything(&with_magic);
    }

    #[test]
    fn text_like_lines(lines in prop::collection::vec("[0-9a-f:./# \t]{0,40}", 0..20)) {
        read_everything(lines.join("\n").as_bytes());
    }

    #[test]
    fn mutated_mrt(muts in prop::collection::vec(mutation(), 1..6)) {
        read_everything(&apply(common::mrt_of_gateway_routes(TEXT), &muts));
    }

    #[test]
    fn mutated_mrt_gzip(muts in prop::collection::vec(mutation(), 1..4)) {
        read_everything(&apply(common::gzip(&common::mrt_of_gateway_routes(TEXT)), &muts));
    }

    #[test]
    fn mutated_text(muts in prop::collection::vec(mutation(), 1..6)) {
        read_everything(&apply(TEXT.as_bytes().to_vec(), &muts));
    }
}
