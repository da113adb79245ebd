//! The MRT TABLE_DUMP_V2 reader on arbitrary bytes (plain or gzip), strict and lenient, with
//! small limits so the caps are reached too. It must return a value, never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use vfsr_table::mrt::read_mrt;
use vfsr_table::{Error, ReadOptions};

fuzz_target!(|data: &[u8]| {
    let lenient = ReadOptions {
        skip_bad: true,
        max_bytes: 1 << 20,
        max_routes: 1000,
        max_record_len: 4096,
        ..ReadOptions::default()
    };
    for opts in [ReadOptions::default(), lenient] {
        match read_mrt(data, "fuzz", &opts) {
            Ok((table, report)) => {
                assert_eq!(table.v4.len(), report.v4);
                assert_eq!(table.v6.len(), report.v6);
                if !opts.skip_bad {
                    assert_eq!(report.bad_total(), 0);
                }
            }
            // Bad records are counted, not errors, when skipping.
            Err(Error::Mrt { .. }) => assert!(!opts.skip_bad),
            Err(_) => {}
        }
    }
});
