//! What can go wrong in the benchmark's lab, as values: each with the message it has always
//! printed. The commands built on the lab (`cp flood`, `soak`, `stress`) report these as
//! text (`From<Error> for String`).

use std::fmt;
use std::path::PathBuf;

use vfsr_io::IoError;
use vfsrd::{harness, netlab};

/// An error of `fwd bench --veth` or of the lab it shares.
#[derive(Debug)]
pub(crate) enum Error {
    /// `--veth` cannot run here: no network namespaces or no root (why).
    NoNamespaces(netlab::Error),
    /// Fewer than the two cores the generator and the router are pinned to.
    TooFewCores,
    /// `--routers` names a router the benchmark does not know.
    UnknownRouter(String),
    /// `--destinations` is not a power of two up to 2^20.
    Destinations(usize),
    /// The table could not be read (the reader's error names the file).
    Table(vfsr_table::Error),
    /// The table has fewer IPv4 routes than destinations are asked for.
    TooFewRoutes,
    /// A namespace, link, address or command of the lab failed.
    Lab(netlab::Error),
    /// A BPF object, map or program call failed.
    Bpf(IoError),
    /// An interface's MAC address could not be read, or is not six hex bytes.
    Mac { ifname: String, text: String },
    /// An interface's MAC address has a byte that is not hex.
    MacDigit { ifname: String, text: String },
    /// An interface's index could not be read.
    Ifindex(String),
    /// An XDP program could not be attached to an interface.
    Attach { ifname: String, err: IoError },
    /// The request/response server could not listen on the router's address.
    Listen(std::io::Error),
    /// A file could not be opened or written.
    File { path: PathBuf, err: std::io::Error },
    /// The generator's thread could not enter its namespace.
    Setns(std::io::Error),
    /// A test run of the generator's program failed.
    Generator(IoError),
    /// The generator's thread panicked.
    GeneratorPanicked,
    /// The thread that starts the generator at `SCHED_IDLE` panicked.
    GeneratorStart,
    /// The generator was given no destinations.
    NoDestinations,
    /// No vfsrd binary next to vfsr.
    NoVfsrd,
    /// `--vfsrd` names no file.
    NoSuchVfsrd(PathBuf),
    /// vfsrd could not be started, or did not say it was ready.
    Vfsrd(harness::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoNamespaces(why) => {
                write!(f, "--veth builds network namespaces and needs root: {why}")
            }
            Error::TooFewCores => {
                f.write_str("--veth needs 2 cores (generator on core 0, router on core 1)")
            }
            Error::UnknownRouter(r) => write!(
                f,
                "--routers: unknown router {r:?} (vfsr, vfsr-fast, linux, linux-xdp)"
            ),
            Error::Destinations(n) => {
                write!(f, "--destinations {n} must be a power of two up to 1048576")
            }
            Error::Table(e) => write!(f, "{e}"),
            Error::Lab(e) => write!(f, "{e}"),
            Error::TooFewRoutes => {
                f.write_str("the table has too few IPv4 routes to draw destinations from")
            }
            Error::Bpf(e) => write!(f, "{e}"),
            Error::Mac { ifname, text } => write!(f, "{ifname}: unreadable MAC {text:?}"),
            Error::MacDigit { ifname, text } => write!(f, "{ifname}: bad MAC {text:?}"),
            Error::Ifindex(ifname) => write!(f, "{ifname}: no ifindex"),
            Error::Attach { ifname, err } => write!(f, "{ifname}: {err}"),
            Error::Listen(e) => write!(f, "listen on {}:7000: {e}", super::ROUTER_A),
            Error::File { path, err } => write!(f, "{}: {err}", path.display()),
            Error::Setns(e) => write!(f, "setns: {e}"),
            Error::Generator(e) => write!(f, "generator: {e}"),
            Error::GeneratorPanicked => f.write_str("generator panicked"),
            Error::GeneratorStart => f.write_str("starting the generator failed"),
            Error::NoDestinations => f.write_str("the generator has no destinations"),
            Error::NoVfsrd => {
                f.write_str("the vfsrd binary is not built next to vfsr (cargo build -p vfsrd)")
            }
            Error::NoSuchVfsrd(p) => write!(f, "--vfsrd {}: no such file", p.display()),
            Error::Vfsrd(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::NoNamespaces(e) | Error::Lab(e) => Some(e),
            Error::Vfsrd(e) => Some(e),
            Error::Table(e) => Some(e),
            _ => None,
        }
    }
}

impl From<IoError> for Error {
    fn from(e: IoError) -> Error {
        Error::Bpf(e)
    }
}

impl From<netlab::Error> for Error {
    fn from(e: netlab::Error) -> Error {
        Error::Lab(e)
    }
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
