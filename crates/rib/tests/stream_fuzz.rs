//! The update-stream parser on arbitrary input: never a panic, and what it accepts prints back
//! to a line that parses to the same update.

use proptest::prelude::*;
use vfsr_rib::{parse_update, read_updates, Rib, Source, StreamOptions};

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_owned()),
        Just("w".to_owned()),
        Just("#".to_owned()),
        Just("#7".to_owned()),
        Just("blackhole".to_owned()),
        Just("local".to_owned()),
        Just("10.0.0.0/8".to_owned()),
        Just("2001:db8::/32".to_owned()),
        Just("192.0.2.1".to_owned()),
        Just("::1".to_owned()),
        Just("\t".to_owned()),
        Just("\r".to_owned()),
        "[0-9./:#a-fw ]{0,20}",
        any::<String>(),
    ]
}

fn line() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(), 0..6).prop_map(|v| v.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512), skip in any::<bool>()) {
        let opts = StreamOptions { skip_bad: skip, max_line_len: 64 };
        if let Ok((updates, report)) = read_updates(&bytes[..], opts) {
            prop_assert_eq!(updates.len() as u64, report.updates);
        }
    }

    #[test]
    fn accepted_lines_round_trip(l in line()) {
        if let Ok(Some(u)) = parse_update(&l) {
            prop_assert_eq!(parse_update(&u.to_string()), Ok(Some(u)));
            // Applying never panics either (unknown indices are errors).
            let mut rib = Rib::new();
            let _ = rib.apply(&u, Source::Api);
        }
    }

    #[test]
    fn streams_of_lines_never_panic(lines in prop::collection::vec(line(), 0..20)) {
        let text = lines.join("\n");
        let opts = StreamOptions { skip_bad: true, ..StreamOptions::default() };
        let (updates, report) = read_updates(text.as_bytes(), opts).unwrap();
        prop_assert_eq!(updates.len() as u64, report.updates);
        prop_assert!(report.lines <= lines.len().max(1) as u64);
        let mut rib = Rib::new();
        for u in &updates {
            let _ = rib.apply(u, Source::Fpm);
        }
    }
}
