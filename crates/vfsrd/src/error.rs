//! vfsrd's errors while it starts, reloads and opens its sources: what failed, on what, and
//! the error beneath, kept as values until `main` or the log shows them. Each variant's
//! text is what an operator reads; [`Error::context`] puts the port, worker or step in
//! front ("p0: AF_XDP: …").

use std::fmt;

use crate::config::ConfigError;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file, socket or system call on `what` failed.
    #[error("{what}: {source}{hint}")]
    Os {
        /// What was being done, naming the object (`/proc/sys/…`, `eventfd`, `TUNSETIFF`).
        what: String,
        /// The system's error.
        source: std::io::Error,
        /// What to do about it, when known (` (needs root or CAP_NET_ADMIN)`), else empty.
        hint: &'static str,
    },
    /// Packet I/O refused: AF_XDP, AF_PACKET or the XDP programs.
    #[error(transparent)]
    Io(#[from] vfsr_io::IoError),
    /// Something named or found cannot be used (a missing interface, an unreadable MAC, a
    /// refused netlink request).
    #[error("{what}: {why}")]
    Invalid {
        /// What it is.
        what: String,
        /// Why it cannot be used.
        why: String,
    },
    /// A configuration file was refused: every error found in it. The list is the error's
    /// text, one line each; none of them is singled out as its source.
    #[error("{file}: {} error(s){}", .errors.len(), ConfigLines(.errors))]
    Config {
        /// The file.
        file: String,
        /// What is wrong, key by key.
        errors: Vec<ConfigError>,
    },
    /// A step of building or loading the router failed (its table, a route, the FIBs).
    #[error("{step}: {source}")]
    Build {
        /// The step (`table.file: …`, `route[2] 10.0.0.0/8`, `publishing the FIBs`).
        step: String,
        /// The router's, table reader's or FIB's error.
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// An error within a port, worker or step.
    #[error("{context}: {inner}")]
    In {
        /// The port, worker or step.
        context: String,
        /// What went wrong there.
        #[source]
        inner: Box<Error>,
    },
}

/// An [`Error::Config`]'s list, each error on a line of its own after a two-space indent.
struct ConfigLines<'a>(&'a [ConfigError]);

impl fmt::Display for ConfigLines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|e| write!(f, "\n  {e}"))
    }
}

impl Error {
    /// An [`Error::Os`].
    pub fn os(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Os {
            what: what.into(),
            source,
            hint: "",
        }
    }

    /// This error with `hint` (an [`Error::Os`]'s advice; other errors are left as they are).
    pub fn hint(self, hint: &'static str) -> Error {
        match self {
            Error::Os { what, source, .. } => Error::Os { what, source, hint },
            e => e,
        }
    }

    /// An [`Error::Os`] from `errno` now.
    pub fn last_os(what: impl Into<String>) -> Error {
        Error::os(what, std::io::Error::last_os_error())
    }

    /// An [`Error::Invalid`].
    pub fn invalid(what: impl Into<String>, why: impl Into<String>) -> Error {
        Error::Invalid {
            what: what.into(),
            why: why.into(),
        }
    }

    /// An [`Error::Build`].
    pub fn build(
        step: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::Build {
            step: step.into(),
            source: Box::new(source),
        }
    }

    /// This error, within `context`.
    pub fn context(self, context: impl Into<String>) -> Error {
        Error::In {
            context: context.into(),
            inner: Box::new(self),
        }
    }
}

/// A result whose error is [`Error`] unless another is named.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn the_text_puts_the_context_first_and_the_chain_is_kept() {
        let e = Error::os("eventfd", std::io::Error::from_raw_os_error(libc::EMFILE))
            .context("worker 2");
        assert!(e.to_string().starts_with("worker 2: eventfd: "), "{e}");
        let inner = e.source().and_then(|s| s.source());
        assert!(inner.is_some_and(|s| s.to_string().contains("open files")));
        let i = Error::invalid("p0", "no such interface");
        assert_eq!(i.to_string(), "p0: no such interface");
        assert!(i.source().is_none());
        let c = Error::Config {
            file: "/etc/vfsr.toml".into(),
            errors: vec![
                crate::config::parse("[router]\nworkers = \"x\"\n", Some(&[0, 1]))
                    .err()
                    .and_then(|v| v.into_iter().next())
                    .unwrap(),
            ],
        };
        let text = c.to_string();
        assert!(text.starts_with("/etc/vfsr.toml: 1 error(s)\n  "), "{text}");
    }
}
