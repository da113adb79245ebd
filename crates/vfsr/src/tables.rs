//! Where the command line gets its route tables: a file, the reference table, or the generator.

use std::io::Write;
use std::path::{Path, PathBuf};
use vfsr_lpm::Route;
use vfsr_table::{ReadOptions, Table, TableGateways};

/// A table ready for the engines, with a description of where it came from.
pub struct Loaded {
    pub v4: Vec<Route<u32>>,
    pub v6: Vec<Route<u128>>,
    pub nexthops: TableGateways,
    pub source: String,
}

impl Loaded {
    fn new(t: Table, source: String) -> Self {
        Loaded {
            v4: t.v4,
            v6: t.v6,
            nexthops: t.nexthops,
            source,
        }
    }
}

/// Reads a table file (text or MRT, gzip or not). With `skip_bad`, bad lines are counted and
/// the counts reported on standard error instead of stopping the read.
pub fn load(path: &Path, skip_bad: bool) -> Result<Loaded, vfsr_table::Error> {
    let opts = ReadOptions {
        skip_bad,
        ..ReadOptions::default()
    };
    let (t, report) = vfsr_table::read_table_file(path, &opts)?;
    eprintln!("vfsr: {}: {report}", path.display());
    Ok(Loaded::new(t, path.display().to_string()))
}

/// The reference table beside the checkout when present, else the synthetic one.
pub fn default_table(seed: u64) -> Result<Loaded, vfsr_table::Error> {
    let (t, src) = vfsr_table::load_default_table(seed)?;
    Ok(Loaded::new(t, src.to_string()))
}

/// The synthetic full table of `seed`: the embedded default.
pub fn synthetic(seed: u64) -> Loaded {
    Loaded::new(
        vfsr_table::synth_table(seed),
        format!("synthetic full table (seed {seed})"),
    )
}

/// Why `vfsr table gen` could not write its table.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// The output file could not be made.
    #[error("{}: {err}", .path.display())]
    Create {
        /// The file.
        path: PathBuf,
        /// The system's error.
        #[source]
        err: std::io::Error,
    },
    /// The table could not be written.
    #[error(transparent)]
    Write(#[from] vfsr_table::WriteError),
    /// The last of it could not be written.
    #[error(transparent)]
    Flush(std::io::Error),
}

/// `vfsr table gen`: writes the synthetic table as text.
pub fn generate(
    seed: u64,
    v4: Option<usize>,
    v6: Option<usize>,
    out: Option<PathBuf>,
) -> Result<(), GenError> {
    let t = match (v4, v6) {
        (None, None) => vfsr_table::synth_table(seed),
        _ => {
            let p4 = vfsr_table::synth_v4(seed, v4.unwrap_or(vfsr_table::synth::DEFAULT_V4));
            let p6 = vfsr_table::synth_v6(seed, v6.unwrap_or(vfsr_table::synth::DEFAULT_V6));
            Table::from_prefixes(&p4, &p6)
        }
    };
    let sink: Box<dyn Write> = match out {
        Some(path) => match std::fs::File::create(&path) {
            Ok(f) => Box::new(f),
            Err(err) => return Err(GenError::Create { path, err }),
        },
        None => Box::new(std::io::stdout().lock()),
    };
    let mut w = std::io::BufWriter::new(sink);
    vfsr_table::write_text(&t, &mut w)?;
    w.flush().map_err(GenError::Flush)?;
    Ok(())
}
