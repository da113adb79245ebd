//! The text table reader on arbitrary bytes (plain or gzip), strict and lenient, with small
//! limits so the caps are reached too. It must return a value, never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use vfsr_table::{read_table, read_text, write_text, ReadOptions};

fuzz_target!(|data: &[u8]| {
    let lenient = ReadOptions {
        skip_bad: true,
        max_bytes: 1 << 20,
        max_routes: 1000,
        max_line_len: 256,
        ..ReadOptions::default()
    };
    for opts in [ReadOptions::default(), lenient] {
        if let Ok((table, report)) = read_text(data, "fuzz", &opts) {
            assert_eq!(table.v4.len() + table.v6.len(), report.v4 + report.v6);
            // What was read can be written back and reads back the same.
            let mut out = Vec::new();
            if write_text(&table, &mut out).is_ok() {
                if let Ok((again, _)) = read_text(&out[..], "rewritten", &ReadOptions::default()) {
                    assert_eq!(again.v4.len(), table.v4.len());
                    assert_eq!(again.v6.len(), table.v6.len());
                }
            }
        }
    }
    let _ = read_table(data, "fuzz", &ReadOptions::default());
});
