//! What can stop a stress run or a case, as values, each with the message it has always
//! printed. A case that fails this way is recorded with the message and the run goes on.

use std::fmt;
use std::path::PathBuf;

use vfsr_io::IoError;
use vfsrd::{harness, netlab};

use super::lab::{LEGIT_PPS, RR_PORT};
use super::CASES;

/// An error of `vfsr stress`.
#[derive(Debug)]
pub(crate) enum Error {
    /// `--seconds` out of range.
    Seconds,
    /// `--backend` is neither `xdp` nor `packet`.
    Backend(String),
    /// `--only` names a case there is not.
    UnknownCase(String),
    /// No network namespaces or no root (why).
    NoNamespaces(netlab::Error),
    /// A tool the cases run is not on the PATH.
    MissingTool(&'static str),
    /// Fewer than the two cores vfsrd is pinned to.
    TooFewCores,
    /// SIGINT or SIGTERM.
    Interrupted,
    /// The benchmark lab the run builds on (`vethbench`).
    Lab(crate::vethbench::Error),
    /// A namespace, link or command failed.
    NetLab(netlab::Error),
    /// vfsrd's harness could not start vfsrd, or it did not say it was ready.
    Harness(harness::Error),
    /// vfsrd's control API did not answer.
    Api(vfsr_api::ClientError),
    /// vfsrd is not running, so its control API cannot be asked.
    NotRunning,
    /// A namespace has no interface but the loopback.
    NoInterface(String),
    /// The request/response server could not listen.
    RrServer(std::io::Error),
    /// A thread could not be started.
    Thread(std::io::Error),
    /// The TCP prober's thread panicked.
    ProberPanicked,
    /// The flood's AF_PACKET port could not be opened or sent on.
    Flood(IoError),
    /// The idle router delivered less than half the legitimate flow (what it delivered, pps).
    IdleRate(f64),
    /// No TCP transaction reached the idle router's host stack (the prober's error).
    IdleNoTransactions(String),
    /// A case name the run does not know.
    NoCase(String),
    /// The starve case's busy process could not be started.
    BusyProcess(std::io::Error),
    /// vfsrd could not be started, or waited for.
    StartVfsrd(std::io::Error),
    WaitVfsrd(std::io::Error),
    /// A file or directory could not be made or written.
    File {
        path: PathBuf,
        err: std::io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Seconds => f.write_str("--seconds must be between 1 and 120"),
            Error::Backend(b) => write!(f, "--backend: {b:?} is not xdp or packet"),
            Error::UnknownCase(c) => {
                write!(
                    f,
                    "--only: unknown case {c:?} (cases: {})",
                    CASES.join(", ")
                )
            }
            Error::NoNamespaces(why) => {
                write!(f, "stress builds network namespaces and needs root: {why}")
            }
            Error::MissingTool(t) => write!(f, "stress needs {t} on the PATH"),
            Error::TooFewCores => {
                f.write_str("stress needs 2 cores (control plane on core 0, worker on core 1)")
            }
            Error::Interrupted => f.write_str("interrupted"),
            Error::Lab(e) => write!(f, "{e}"),
            Error::NoCase(c) => write!(f, "no case {c}"),
            Error::NetLab(e) => write!(f, "{e}"),
            Error::Harness(e) => write!(f, "{e}"),
            Error::Api(e) => write!(f, "{e}"),
            Error::NotRunning => f.write_str("vfsrd is not running"),
            Error::NoInterface(ns) => write!(f, "no interface in {ns}"),
            Error::RrServer(e) => write!(f, "TCP server on port {RR_PORT}: {e}"),
            Error::Thread(e) => write!(f, "{e}"),
            Error::ProberPanicked => f.write_str("the TCP prober panicked"),
            Error::Flood(e) => write!(f, "{e}"),
            Error::IdleRate(pps) => write!(
                f,
                "the idle router delivered only {pps:.0} of {LEGIT_PPS} legitimate frames per \
                 second: something is wrong with the set-up"
            ),
            Error::IdleNoTransactions(why) => write!(
                f,
                "no TCP transaction reached the idle router's host stack ({why})"
            ),
            Error::BusyProcess(e) => write!(f, "starting the busy process: {e}"),
            Error::StartVfsrd(e) => write!(f, "starting vfsrd: {e}"),
            Error::WaitVfsrd(e) => write!(f, "waiting for vfsrd: {e}"),
            Error::File { path, err } => write!(f, "{}: {err}", path.display()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::NoNamespaces(e) | Error::NetLab(e) => Some(e),
            Error::Harness(e) => Some(e),
            Error::Lab(e) => Some(e),
            _ => None,
        }
    }
}

impl From<crate::vethbench::Error> for Error {
    fn from(e: crate::vethbench::Error) -> Error {
        Error::Lab(e)
    }
}

impl From<netlab::Error> for Error {
    fn from(e: netlab::Error) -> Error {
        Error::NetLab(e)
    }
}

impl From<harness::Error> for Error {
    fn from(e: harness::Error) -> Error {
        Error::Harness(e)
    }
}

impl From<vfsr_api::ClientError> for Error {
    fn from(e: vfsr_api::ClientError) -> Error {
        Error::Api(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_to_change() {
        assert_eq!(
            Error::Backend("dpdk".into()).to_string(),
            "--backend: \"dpdk\" is not xdp or packet"
        );
        assert!(Error::UnknownCase("nope".into())
            .to_string()
            .starts_with("--only: unknown case \"nope\" (cases: arp, ns,"));
        assert_eq!(Error::NoCase("x".into()).to_string(), "no case x");
        assert_eq!(
            Error::NetLab(netlab::Error::NotRoot).to_string(),
            "not root"
        );
        let e = Error::Harness(harness::Error::NoCores);
        assert_eq!(e.to_string(), "vfsrd: an empty set of cores to run on");
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(
            Error::IdleRate(1234.4).to_string(),
            format!(
                "the idle router delivered only 1234 of {LEGIT_PPS} legitimate frames per \
                 second: something is wrong with the set-up"
            )
        );
    }
}
