//! Logs through `tracing`: levels (`error`, `warn`, `info`, `debug`, `trace`) and
//! structured fields (`port`, `peer`, `routes`, ...). Under systemd (whose journal is
//! vfsrd's standard error, `JOURNAL_STREAM` set) events go to the journal natively, their
//! fields as journal fields (`journalctl -u vfsrd -o verbose`), priority by level; elsewhere
//! they are lines on standard error. The level is `--log-level` (default `info`), or any
//! `tracing` filter in `VFSR_LOG` (`VFSR_LOG=vfsrd::sources=debug`).

use tracing_subscriber::filter::ParseError;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::{SubscriberInitExt, TryInitError};
use tracing_subscriber::EnvFilter;

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The filter is not one `tracing` reads (`what`: `VFSR_LOG=…` or `--log-level …`).
    #[error("{what}: {err}")]
    Filter {
        /// Where the filter came from, and its text.
        what: String,
        /// The filter parser's error.
        #[source]
        err: ParseError,
    },
    /// A subscriber is already installed.
    #[error(transparent)]
    Init(#[from] TryInitError),
}

/// Installs the subscriber. `level`: the default filter when `VFSR_LOG` is unset.
pub fn init(level: &str) -> Result<(), Error> {
    let (what, text) = match std::env::var("VFSR_LOG") {
        Ok(f) if !f.is_empty() => (format!("VFSR_LOG={f}"), f),
        _ => (format!("--log-level {level}"), level.to_string()),
    };
    let filter = EnvFilter::try_new(&text).map_err(|err| Error::Filter { what, err })?;
    let journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let registry = tracing_subscriber::registry().with(filter);
    if journal {
        if let Ok(layer) = tracing_journald::layer() {
            registry
                .with(layer.with_syslog_identifier("vfsrd".into()))
                .try_init()?;
            return Ok(());
        }
    }
    registry
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_target(false)
                .with_ansi(false),
        )
        .try_init()?;
    Ok(())
}
