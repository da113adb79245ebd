//! The engines by name, for `--backend` and the benchmark.

use vfsr_lpm::dir24::Dir24;
use vfsr_lpm::lctrie::{LcConfig, LcTrie};
use vfsr_lpm::poptrie::{Poptrie, PoptrieConfig};
use vfsr_lpm::radix::Radix;
use vfsr_lpm::{Key, Lpm, LpmBuild, Route};

/// Engine names accepted by `--backend`.
pub const NAMES: &[&str] = &["poptrie", "poptrie16", "lctrie", "radix", "dir24"];

/// A built engine behind the common trait.
pub type Engine<K> = Box<dyn Lpm<K>>;

fn boxed<K: Key, E: Lpm<K> + 'static>(
    r: Result<E, vfsr_lpm::BuildError>,
) -> Result<Engine<K>, String> {
    r.map(|e| Box::new(e) as Engine<K>)
        .map_err(|e| e.to_string())
}

/// Builds one of the engines every family has.
fn build_common<K: Key>(name: &str, routes: &[Route<K>]) -> Result<Engine<K>, String> {
    match name {
        "poptrie" => boxed(Poptrie::build(routes, &PoptrieConfig::for_family::<K>())),
        "poptrie16" => boxed(Poptrie::build(routes, &PoptrieConfig::flat(16))),
        "lctrie" => boxed(LcTrie::build(routes, &LcConfig::default())),
        "radix" => boxed(Radix::build(routes, &())),
        other => Err(format!(
            "unknown backend '{other}' (expected one of: {})",
            NAMES.join(", ")
        )),
    }
}

/// Builds IPv4 engine `name`.
pub fn build_v4(name: &str, routes: &[Route<u32>]) -> Result<Engine<u32>, String> {
    match name {
        "dir24" => boxed(Dir24::build(routes, &())),
        _ => build_common(name, routes),
    }
}

/// Builds IPv6 engine `name`; DIR-24-8 has no IPv6 form.
pub fn build_v6(name: &str, routes: &[Route<u128>]) -> Result<Engine<u128>, String> {
    match name {
        "dir24" => Err("dir24 is an IPv4-only engine".into()),
        _ => build_common(name, routes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfsr_lpm::Prefix;

    #[test]
    fn every_name_builds_and_answers() {
        let r4 = [Route::new(Prefix::<u32>::new_masked(0x0a00_0000, 8), 5)];
        let r6 = [Route::new(
            Prefix::<u128>::new_masked(0x2001u128 << 112, 16),
            6,
        )];
        for n in NAMES {
            assert_eq!(build_v4(n, &r4).unwrap().lookup(0x0a01_0101), 5, "{n}");
            if *n != "dir24" {
                let e = build_v6(n, &r6).unwrap();
                assert_eq!(e.lookup((0x2001u128 << 112) | 9), 6, "{n}");
            }
        }
        assert!(build_v6("dir24", &r6).is_err());
        assert!(matches!(build_v4("nope", &r4), Err(e) if e.contains("unknown backend")));
    }
}
