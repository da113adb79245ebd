//! # vfsr-table: route tables in and out
//!
//! Everything that turns outside data into the plain route lists the LPM engines are built
//! from (`vfsr_lpm::LpmBuild::build`), and the reference inputs benchmarks run on.
//!
//! ```text
//!   text file ──┐  (text)                      ┌─▶ Table { v4, v6, nexthops }
//!   MRT dump ───┤  (mrt)    plain or gzip ─────┤        │ Route<u32>, Route<u128>
//!   real table ─┘  (shared: found beside       │        │ gateways ⇄ TableGateways (65..)
//!                   the checkout, or absent)   │        │ no gateway → nh64 (1..=64)
//!   synth (seed) ──────────────────────────────┘        ▼
//!                                               traffic: uniform4, matched4, matched6
//! ```
//!
//! Start reading at [`Table`] and [`TableGateways`], then [`text`] (the simple format), then
//! [`mrt`]. [`read_table`] reads either format, telling them apart by their first bytes.
//!
//! **Outside input never panics.** The readers take arbitrary bytes; every failure is an
//! [`Error`] value naming the file and the place, or (with [`ReadOptions::skip_bad`]) a
//! counted skip in the report. The crate denies `unwrap`, `panic!` and unchecked indexing,
//! caps the decompressed size, the record and line lengths and the number of routes, and is
//! fuzzed (`fuzz/` at the workspace root) and property-tested (`tests/`).

#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::expect_used, clippy::unreachable, clippy::todo)]

pub mod error;
mod input;
pub mod mrt;
pub mod nexthop;
pub mod nh64;
pub mod rng;
pub mod shared;
pub mod synth;
pub mod text;
pub mod trace;
pub mod traffic;

use std::fmt;
use std::io::Read;
use std::path::Path;

use vfsr_lpm::{Prefix, Route};

pub use error::{Error, WriteError};
pub use input::{detect_format, Format};
pub use mrt::{read_mrt, read_mrt_file, write_mrt, MrtError, MrtReport};
pub use nexthop::{NextHopInfo, TableGateways, FIRST_GATEWAY_NEXTHOP};
pub use nh64::{nh64, nh64_v4, nh64_v6};
pub use shared::{load_default_table, real_table_path, shared_data_dir, TableSource};
pub use synth::{synth_table, synth_v4, synth_v6};
pub use text::{read_text, read_text_file, write_text, LineError, TextReport};
pub use traffic::{matched, matched4, matched6, uniform4};

/// A route table of both families, as read from a file or generated.
///
/// Routes are kept in input order and may repeat a prefix; `vfsr_lpm::canonicalize` (which
/// every engine build applies) lets the later route win. Next hops are `1..=64` for nh64
/// next hops and `65..` for gateways, whose addresses `nexthops` holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// IPv4 routes.
    pub v4: Vec<Route<u32>>,
    /// IPv6 routes.
    pub v6: Vec<Route<u128>>,
    /// The gateways behind next hops `65..`.
    pub nexthops: TableGateways,
}

impl Table {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Routes to every prefix given, each with its nh64 next hop.
    pub fn from_prefixes(v4: &[Prefix<u32>], v6: &[Prefix<u128>]) -> Self {
        Table {
            v4: v4.iter().map(|p| Route::new(*p, nh64(p))).collect(),
            v6: v6.iter().map(|p| Route::new(*p, nh64(p))).collect(),
            nexthops: TableGateways::new(),
        }
    }

    /// Routes of both families.
    pub fn len(&self) -> usize {
        self.v4.len().saturating_add(self.v6.len())
    }

    /// Whether the table has no route.
    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    /// What a next hop of this table stands for (for printing lookups).
    pub fn describe(&self, nexthop: vfsr_lpm::NextHop) -> NextHopInfo {
        self.nexthops.describe(nexthop)
    }
}

/// Options of the readers. The defaults are strict (the first bad line or record is an error)
/// with limits far above a full Internet table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// Skip bad lines / records and count them in the report instead of failing.
    pub skip_bad: bool,
    /// Most bytes read after decompression (default 8 GiB).
    pub max_bytes: u64,
    /// Most routes one input may add (default 16 million).
    pub max_routes: usize,
    /// Longest text line in bytes (default 4096).
    pub max_line_len: usize,
    /// Longest MRT record body in bytes (default 16 MiB); also bounds the RIB entries of a
    /// record, each at least 8 bytes long.
    pub max_record_len: u32,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            skip_bad: false,
            max_bytes: 8 << 30,
            max_routes: 16_000_000,
            max_line_len: 4096,
            max_record_len: 16 << 20,
        }
    }
}

/// What a read did, by format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    Text(TextReport),
    Mrt(MrtReport),
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Report::Text(r) => write!(f, "text: {r}"),
            Report::Mrt(r) => write!(f, "MRT: {r}"),
        }
    }
}

/// Reads a table in either format (plain or gzip; see [`detect_format`]) and adds its routes
/// to `table`. On error `table` may hold part of the input.
pub fn read_table_into<R: Read>(
    table: &mut Table,
    input: R,
    file: &str,
    opts: &ReadOptions,
) -> Result<Report, Error> {
    let opened = input::open_input(input, file, opts)?;
    let mut reader = opened.reader;
    match detect_format(&opened.head) {
        Format::Text => text::read_stream(table, &mut reader, file, opts).map(Report::Text),
        Format::Mrt => mrt::read_stream(table, &mut reader, file, opts).map(Report::Mrt),
    }
}

/// Reads a table in either format into a new [`Table`].
pub fn read_table<R: Read>(
    input: R,
    file: &str,
    opts: &ReadOptions,
) -> Result<(Table, Report), Error> {
    input::into_new_table(|t| read_table_into(t, input, file, opts))
}

/// Reads a table file in either format.
pub fn read_table_file(path: &Path, opts: &ReadOptions) -> Result<(Table, Report), Error> {
    let f = input::open_file(path)?;
    read_table(f, &path.display().to_string(), opts)
}
