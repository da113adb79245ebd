//! Logs through `tracing`: levels (`error`, `warn`, `info`, `debug`, `trace`) and
//! structured fields (`port`, `peer`, `routes`, ...). Under systemd (whose journal is
//! vfsrd's standard error, `JOURNAL_STREAM` set) events go to the journal natively, their
//! fields as journal fields (`journalctl -u vfsrd -o verbose`), priority by level; elsewhere
//! they are lines on standard error. The level is `--log-level` (default `info`), or any
//! `tracing` filter in `VFSR_LOG` (`VFSR_LOG=vfsrd::sources=debug`).

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// Installs the subscriber. `level`: the default filter when `VFSR_LOG` is unset.
pub fn init(level: &str) -> Result<(), String> {
    let filter = match std::env::var("VFSR_LOG") {
        Ok(f) if !f.is_empty() => {
            EnvFilter::try_new(&f).map_err(|e| format!("VFSR_LOG={f}: {e}"))?
        }
        _ => EnvFilter::try_new(level).map_err(|e| format!("--log-level {level}: {e}"))?,
    };
    let journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let registry = tracing_subscriber::registry().with(filter);
    if journal {
        if let Ok(layer) = tracing_journald::layer() {
            return registry
                .with(layer.with_syslog_identifier("vfsrd".into()))
                .try_init()
                .map_err(|e| e.to_string());
        }
    }
    registry
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_target(false)
                .with_ansi(false),
        )
        .try_init()
        .map_err(|e| e.to_string())
}
