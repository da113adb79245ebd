//! Errors of the table readers. Every failure on outside input is one of these values; none
//! of the readers panics.

use std::fmt;
use std::io;

use crate::mrt::MrtError;
use crate::text::LineError;

/// Why a table could not be read.
#[derive(Debug)]
pub enum Error {
    /// The input could not be read (this includes a corrupt gzip stream).
    Io { file: String, error: io::Error },
    /// The (decompressed) input is larger than [`ReadOptions::max_bytes`](crate::ReadOptions).
    TooLarge { file: String, limit: u64 },
    /// The input holds more routes than [`ReadOptions::max_routes`](crate::ReadOptions).
    TooManyRoutes { file: String, limit: usize },
    /// A line of a text table is bad. `line` counts from 1; `text` is the start of the line.
    Line {
        file: String,
        line: u64,
        reason: LineError,
        text: String,
    },
    /// An MRT record is bad. `record` counts from 1; `offset` is the byte offset of the
    /// record's header in the decompressed stream.
    Mrt {
        file: String,
        record: u64,
        offset: u64,
        reason: MrtError,
    },
    /// More distinct gateways than next-hop indices.
    NextHopsExhausted { file: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { file, error } => write!(f, "{file}: {error}"),
            Error::TooLarge { file, limit } => {
                write!(f, "{file}: input is larger than the limit of {limit} bytes")
            }
            Error::TooManyRoutes { file, limit } => {
                write!(f, "{file}: more than the limit of {limit} routes")
            }
            Error::Line {
                file,
                line,
                reason,
                text,
            } => write!(f, "{file}:{line}: {reason}: `{text}`"),
            Error::Mrt {
                file,
                record,
                offset,
                reason,
            } => write!(f, "{file}: MRT record {record} at byte {offset}: {reason}"),
            Error::NextHopsExhausted { file } => {
                write!(
                    f,
                    "{file}: too many distinct gateways for 32-bit next-hop indices"
                )
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Why a table could not be written.
#[derive(Debug)]
pub enum WriteError {
    /// The writer failed.
    Io(io::Error),
    /// A route's next hop cannot be expressed in the output format: it is neither a gateway
    /// of the table's [`TableGateways`](crate::TableGateways) (of the route's family) nor the
    /// route's own nh64 value (text) — MRT needs a gateway for every route.
    Unrepresentable { route: String, nexthop: u32 },
    /// A record would be longer than the format allows.
    TooLong(&'static str),
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Io(e) => write!(f, "{e}"),
            WriteError::Unrepresentable { route, nexthop } => write!(
                f,
                "route {route}: next hop {nexthop} cannot be written in this format"
            ),
            WriteError::TooLong(what) => write!(f, "{what} is too long for the format"),
        }
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WriteError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for WriteError {
    fn from(e: io::Error) -> Self {
        WriteError::Io(e)
    }
}
