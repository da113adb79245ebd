//! Compares a table's shape with the synthetic generator's: prefixes and nesting per length,
//! and how the addresses spread over /8s (IPv4) and /12s (IPv6).
//!
//! ```text
//! cargo run --release -p vfsr-table --example table_stats [-- FILE] [SEED]
//! ```
//!
//! Without FILE the real table of the shared data is used when present.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use vfsr_lpm::Prefix;
use vfsr_table::synth::{length_histogram, nested_histogram, synth_v4, synth_v6};
use vfsr_table::{read_table_file, real_table_path, ReadOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let file = args.next().map(PathBuf::from).or_else(real_table_path);
    let seed: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1);

    let t0 = Instant::now();
    let s4 = synth_v4(seed, vfsr_table::synth::DEFAULT_V4);
    let t4 = t0.elapsed();
    let s6 = synth_v6(seed, vfsr_table::synth::DEFAULT_V6);
    println!("synthetic: v4 in {t4:?}, v6 in {:?}", t0.elapsed() - t4);

    let (r4, r6): (Vec<Prefix<u32>>, Vec<Prefix<u128>>) = match &file {
        Some(path) => {
            let t0 = Instant::now();
            let (t, report) = read_table_file(path, &ReadOptions::default())?;
            println!("{}: {report} in {:?}", path.display(), t0.elapsed());
            (
                t.v4.iter().map(|r| r.prefix).collect(),
                t.v6.iter().map(|r| r.prefix).collect(),
            )
        }
        None => {
            println!("no table file given and no shared data: synthetic only");
            (Vec::new(), Vec::new())
        }
    };

    compare("IPv4", &r4, &s4);
    compare("IPv6", &r6, &s6);
    let spread4 = |v: &[Prefix<u32>]| {
        v.iter()
            .map(|p| p.addr() >> 24)
            .collect::<HashSet<_>>()
            .len()
    };
    let spread6 = |v: &[Prefix<u128>]| {
        v.iter()
            .map(|p| p.addr() >> 116)
            .collect::<HashSet<_>>()
            .len()
    };
    println!(
        "distinct /8s:  file {:>4}  synthetic {:>4}",
        spread4(&r4),
        spread4(&s4)
    );
    println!(
        "distinct /12s: file {:>4}  synthetic {:>4}",
        spread6(&r6),
        spread6(&s6)
    );
    Ok(())
}

fn compare<K: vfsr_lpm::Key>(name: &str, file: &[Prefix<K>], synth: &[Prefix<K>]) {
    let (fc, fnest) = (length_histogram(file), nested_histogram(file));
    let (sc, snest) = (length_histogram(synth), nested_histogram(synth));
    println!("{name}: len  file(nested)  synthetic(nested)");
    for len in 0..fc.len() {
        if fc[len] + sc[len] > 0 {
            println!(
                "  /{len:<3} {:>8} ({:>6})  {:>8} ({:>6})",
                fc[len], fnest[len], sc[len], snest[len]
            );
        }
    }
}
