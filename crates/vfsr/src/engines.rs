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

/// Why an engine could not be had.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No engine of that name.
    #[error("unknown backend '{0}' (expected one of: {names})", names = NAMES.join(", "))]
    Unknown(String),
    /// The engine has no IPv6 form.
    #[error("{0} is an IPv4-only engine")]
    V4Only(&'static str),
    /// The engine refused the routes.
    #[error(transparent)]
    Build(#[from] vfsr_lpm::BuildError),
}

fn boxed<K: Key, E: Lpm<K> + 'static>(
    r: Result<E, vfsr_lpm::BuildError>,
) -> Result<Engine<K>, Error> {
    Ok(Box::new(r?))
}

/// Builds one of the engines every family has.
fn build_common<K: Key>(name: &str, routes: &[Route<K>]) -> Result<Engine<K>, Error> {
    match name {
        "poptrie" => boxed(Poptrie::build(routes, &PoptrieConfig::for_family::<K>())),
        "poptrie16" => boxed(Poptrie::build(routes, &PoptrieConfig::flat(16))),
        "lctrie" => boxed(LcTrie::build(routes, &LcConfig::default())),
        "radix" => boxed(Radix::build(routes, &())),
        other => Err(Error::Unknown(other.to_string())),
    }
}

/// Builds IPv4 engine `name`.
pub fn build_v4(name: &str, routes: &[Route<u32>]) -> Result<Engine<u32>, Error> {
    match name {
        "dir24" => boxed(Dir24::build(routes, &())),
        _ => build_common(name, routes),
    }
}

/// Builds IPv6 engine `name`; DIR-24-8 has no IPv6 form.
pub fn build_v6(name: &str, routes: &[Route<u128>]) -> Result<Engine<u128>, Error> {
    match name {
        "dir24" => Err(Error::V4Only("dir24")),
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
        assert!(matches!(
            build_v6("dir24", &r6),
            Err(Error::V4Only("dir24"))
        ));
        assert!(matches!(
            build_v4("nope", &r4),
            Err(e) if e.to_string().starts_with("unknown backend 'nope' (expected one of: poptrie,")
        ));
    }
}
