//! Finding the shared reference data, and the table every tool uses by default.
//!
//! The reference data lives beside the project's checkout (`../shared/data/` from the
//! workspace root) on developer machines and in CI, and is absent from a user's fresh clone.
//! It is looked for, in order:
//!
//! 1. the directory named by the environment variable `VFSR_SHARED_DATA` (when set and not
//!    empty it is the only place looked at, so a test can force the synthetic table by
//!    pointing it at an empty directory);
//! 2. `<workspace root>/../shared/data`, the workspace root being known at compile time
//!    (this crate's manifest directory, two levels down);
//! 3. `../shared/data` relative to the current directory at run time (a binary run from the
//!    root of a checkout that was built elsewhere).
//!
//! [`load_default_table`] reads the real table when it is there and otherwise generates the
//! synthetic one, and says which it did.

use std::env;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::synth::synth_table;
use crate::{ReadOptions, Table};

/// Environment variable naming the shared data directory.
pub const SHARED_DATA_ENV: &str = "VFSR_SHARED_DATA";

/// File name of the real 2024 table in the shared data directory.
pub const REAL_TABLE_FILE: &str = "tier1-2024-prefixes.txt.gz";

/// The shared data directory seen from the workspace root at compile time.
const COMPILE_TIME_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data");

/// The shared data directory, if one of the places above holds it.
pub fn shared_data_dir() -> Option<PathBuf> {
    if let Some(dir) = env::var_os(SHARED_DATA_ENV).filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        return dir.is_dir().then_some(dir);
    }
    let candidates = [
        PathBuf::from(COMPILE_TIME_DIR),
        Path::new("..").join("shared").join("data"),
    ];
    candidates
        .into_iter()
        .find(|d| d.is_dir())
        .map(|d| d.canonicalize().unwrap_or(d))
}

/// The real 2024 table, if the shared data directory holds it.
pub fn real_table_path() -> Option<PathBuf> {
    shared_data_dir()
        .map(|d| d.join(REAL_TABLE_FILE))
        .filter(|p| p.is_file())
}

/// Which table [`load_default_table`] returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableSource {
    /// The real table, read from this file (nh64 next hops).
    Real(PathBuf),
    /// The synthetic table of this seed (nh64 next hops).
    Synthetic { seed: u64 },
}

impl fmt::Display for TableSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableSource::Real(p) => write!(f, "real table {}", p.display()),
            TableSource::Synthetic { seed } => write!(f, "synthetic table (seed {seed})"),
        }
    }
}

/// The real 2024 table when the shared data holds it, else the synthetic table of `seed`
/// (see [`crate::synth::synth_table`]). A real table that is present but unreadable is an
/// error, not a silent fallback.
pub fn load_default_table(seed: u64) -> Result<(Table, TableSource), Error> {
    match real_table_path() {
        Some(path) => {
            let (table, _report) = crate::text::read_text_file(&path, &ReadOptions::default())?;
            Ok((table, TableSource::Real(path)))
        }
        None => Ok((synth_table(seed), TableSource::Synthetic { seed })),
    }
}
