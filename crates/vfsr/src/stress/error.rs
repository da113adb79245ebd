//! What can stop a stress run or a case, as values, each with the message it has always
//! printed. A case that fails this way is recorded with the message and the run goes on.

use std::path::PathBuf;

use vfsr_io::IoError;
use vfsrd::{harness, netlab};

use super::lab::{LEGIT_PPS, RR_PORT};
use super::CASES;

/// An error of `vfsr stress`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// `--seconds` out of range.
    #[error("--seconds must be between 1 and 120")]
    Seconds,
    /// `--backend` is neither `xdp` nor `packet`.
    #[error("--backend: {0:?} is not xdp or packet")]
    Backend(String),
    /// `--only` names a case there is not.
    #[error("--only: unknown case {0:?} (cases: {cases})", cases = CASES.join(", "))]
    UnknownCase(String),
    /// No network namespaces or no root (why).
    #[error("stress builds network namespaces and needs root: {0}")]
    NoNamespaces(#[source] netlab::Error),
    /// A tool the cases run is not on the PATH.
    #[error("stress needs {0} on the PATH")]
    MissingTool(&'static str),
    /// Fewer than the two cores vfsrd is pinned to.
    #[error("stress needs 2 cores (control plane on core 0, worker on core 1)")]
    TooFewCores,
    /// `--flood-core` names a core the run may not use (the core, those it may).
    #[error("--flood-core {0}: not one this run may use ({1:?})")]
    FloodCore(usize, Vec<usize>),
    /// SIGINT or SIGTERM.
    #[error("interrupted")]
    Interrupted,
    /// The benchmark lab the run builds on (`vethbench`).
    #[error(transparent)]
    Lab(#[from] crate::vethbench::Error),
    /// A namespace, link or command failed.
    #[error(transparent)]
    NetLab(#[from] netlab::Error),
    /// vfsrd's harness could not start vfsrd, or it did not say it was ready.
    #[error(transparent)]
    Harness(#[from] harness::Error),
    /// vfsrd's control API did not answer.
    #[error(transparent)]
    Api(#[from] vfsr_api::ClientError),
    /// vfsrd is not running, so its control API cannot be asked.
    #[error("vfsrd is not running")]
    NotRunning,
    /// A namespace has no interface but the loopback.
    #[error("no interface in {0}")]
    NoInterface(String),
    /// The request/response server could not listen.
    #[error("TCP server on port {RR_PORT}: {0}")]
    RrServer(#[source] std::io::Error),
    /// A thread could not be started.
    #[error(transparent)]
    Thread(std::io::Error),
    /// The TCP prober's thread panicked.
    #[error("the TCP prober panicked")]
    ProberPanicked,
    /// The flood's AF_PACKET port could not be opened or sent on.
    #[error(transparent)]
    Flood(IoError),
    /// The idle router delivered less than half the legitimate flow (what it delivered, pps).
    #[error(
        "the idle router delivered only {0:.0} of {LEGIT_PPS} legitimate frames per second: \
         something is wrong with the set-up"
    )]
    IdleRate(f64),
    /// No TCP transaction reached the idle router's host stack (the prober's error).
    #[error("no TCP transaction reached the idle router's host stack ({0})")]
    IdleNoTransactions(String),
    /// A case name the run does not know.
    #[error("no case {0}")]
    NoCase(String),
    /// The starve case's busy process could not be started.
    #[error("starting the busy process: {0}")]
    BusyProcess(#[source] std::io::Error),
    /// vfsrd could not be started, or waited for.
    #[error("starting vfsrd: {0}")]
    StartVfsrd(#[source] std::io::Error),
    #[error("waiting for vfsrd: {0}")]
    WaitVfsrd(#[source] std::io::Error),
    /// The report could not be written.
    #[error(transparent)]
    Report(#[from] crate::jsonfile::Error),
    /// A file or directory could not be made or written.
    #[error("{}: {err}", .path.display())]
    File {
        path: PathBuf,
        #[source]
        err: std::io::Error,
    },
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
        // The wrapper is the harness's error itself: its cause is not listed twice.
        assert!(std::error::Error::source(&e).is_none());
        assert_eq!(
            Error::IdleRate(1234.4).to_string(),
            format!(
                "the idle router delivered only 1234 of {LEGIT_PPS} legitimate frames per \
                 second: something is wrong with the set-up"
            )
        );
    }
}
