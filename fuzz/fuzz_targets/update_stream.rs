//! The update-stream reader on arbitrary bytes, strict and lenient, and every update it
//! accepts applied to a RIB with live Poptrie FIBs. Nothing may panic, and after publication
//! the FIB answers every touched prefix as the RIB says.

#![no_main]

use libfuzzer_sys::fuzz_target;
use vfsr_lpm::poptrie::{Poptrie, PoptrieConfig};
use vfsr_lpm::Lpm;
use vfsr_rib::{Rib, RouteTable, Source, StreamOptions, UpdateReader};

fuzz_target!(|data: &[u8]| {
    let strict = StreamOptions::default();
    let lenient = StreamOptions {
        skip_bad: true,
        max_line_len: 64,
    };
    let _ = UpdateReader::new(data, strict).count();
    let Ok(mut rt) = RouteTable::<Poptrie<u32>, Poptrie<u128>>::new(
        Rib::new(),
        PoptrieConfig::default(),
        PoptrieConfig::default(),
    ) else {
        return;
    };
    let mut reader = UpdateReader::new(data, lenient);
    for item in reader.by_ref() {
        let Ok((_, u)) = item else { break };
        let _ = rt.apply(&u, Source::Api);
    }
    let report = reader.into_report();
    assert!(report.updates + report.skipped_total() <= report.lines);
    if rt.publish().is_err() {
        return;
    }
    let (r4, r6, _) = rt.readers();
    let (f4, f6) = (r4.load(), r6.load());
    for r in rt.rib().fib_routes_v4() {
        let want = vfsr_lpm::RouteMap::from_routes(&rt.rib().fib_routes_v4())
            .lookup(r.prefix.addr())
            .map_or(0, |w| w.nexthop);
        assert_eq!(f4.engine.lookup(r.prefix.addr()), want);
    }
    for r in rt.rib().fib_routes_v6() {
        assert_ne!(f6.engine.lookup(r.prefix.addr()), 0);
    }
});
