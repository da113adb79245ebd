//! What can go wrong in the benchmark's lab, as values: each with the message it has always
//! printed. The commands built on the lab (`cp flood`, `soak`, `stress`) report these as
//! text (`From<Error> for String`).

use std::path::PathBuf;

use vfsr_io::IoError;
use vfsrd::{harness, netlab};

/// An error of `fwd bench --veth` or of the lab it shares.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// `--veth` cannot run here: no network namespaces or no root (why).
    #[error("--veth builds network namespaces and needs root: {0}")]
    NoNamespaces(#[source] netlab::Error),
    /// Fewer than the two cores the generator and the router are pinned to.
    #[error("--veth needs 2 cores (generator on core 0, router on core 1)")]
    TooFewCores,
    /// `--routers` names a router the benchmark does not know.
    #[error("--routers: unknown router {0:?} (vfsr, vfsr-fast, linux, linux-xdp)")]
    UnknownRouter(String),
    /// `--destinations` is not a power of two up to 2^20.
    #[error("--destinations {0} must be a power of two up to 1048576")]
    Destinations(usize),
    /// The table could not be read (the reader's error names the file).
    #[error(transparent)]
    Table(vfsr_table::Error),
    /// The table has fewer IPv4 routes than destinations are asked for.
    #[error("the table has too few IPv4 routes to draw destinations from")]
    TooFewRoutes,
    /// A namespace, link, address or command of the lab failed.
    #[error(transparent)]
    Lab(#[from] netlab::Error),
    /// A BPF object, map or program call failed.
    #[error(transparent)]
    Bpf(#[from] IoError),
    /// An interface's MAC address could not be read, or is not six hex bytes.
    #[error("{ifname}: unreadable MAC {text:?}")]
    Mac { ifname: String, text: String },
    /// An interface's MAC address has a byte that is not hex.
    #[error("{ifname}: bad MAC {text:?}")]
    MacDigit { ifname: String, text: String },
    /// An interface's index could not be read.
    #[error("{0}: no ifindex")]
    Ifindex(String),
    /// An XDP program could not be attached to an interface.
    #[error("{ifname}: {err}")]
    Attach {
        ifname: String,
        #[source]
        err: IoError,
    },
    /// The request/response server could not listen on the router's address.
    #[error("listen on {router}:7000: {0}", router = super::ROUTER_A)]
    Listen(#[source] std::io::Error),
    /// The report could not be written.
    #[error(transparent)]
    Report(#[from] crate::jsonfile::Error),
    /// A file could not be opened or written.
    #[error("{}: {err}", .path.display())]
    File {
        path: PathBuf,
        #[source]
        err: std::io::Error,
    },
    /// The generator's thread could not enter its namespace.
    #[error("setns: {0}")]
    Setns(#[source] std::io::Error),
    /// A test run of the generator's program failed.
    #[error("generator: {0}")]
    Generator(#[source] IoError),
    /// The generator's thread panicked.
    #[error("generator panicked")]
    GeneratorPanicked,
    /// The thread that starts the generator at `SCHED_IDLE` panicked.
    #[error("starting the generator failed")]
    GeneratorStart,
    /// The kernel refuses XDP test runs on live frames, the generator's way of sending.
    #[error("the traffic generator cannot send here: {0}")]
    LiveFrames(String),
    /// The generator was given no destinations.
    #[error("the generator has no destinations")]
    NoDestinations,
    /// No vfsrd binary next to vfsr.
    #[error("the vfsrd binary is not built next to vfsr (cargo build -p vfsrd)")]
    NoVfsrd,
    /// `--vfsrd` names no file.
    #[error("--vfsrd {}: no such file", .0.display())]
    NoSuchVfsrd(PathBuf),
    /// vfsrd could not be started, or did not say it was ready.
    #[error(transparent)]
    Vfsrd(harness::Error),
}

impl From<Error> for String {
    fn from(e: Error) -> String {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_what_and_where() {
        assert_eq!(
            Error::Destinations(3).to_string(),
            "--destinations 3 must be a power of two up to 1048576"
        );
        assert_eq!(
            Error::Mac {
                ifname: "vb1a".into(),
                text: "zz".into()
            }
            .to_string(),
            "vb1a: unreadable MAC \"zz\""
        );
        assert_eq!(
            Error::NoSuchVfsrd(PathBuf::from("/x/vfsrd")).to_string(),
            "--vfsrd /x/vfsrd: no such file"
        );
        let s: String = Error::Lab(netlab::Error::NotRoot).into();
        assert_eq!(s, "not root");
        let e = Error::NoNamespaces(netlab::Error::NoNamespaces);
        assert!(
            e.to_string().ends_with(
                "needs root: ip netns add failed (no network \
             namespace support?)"
            ),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some());
    }
}
