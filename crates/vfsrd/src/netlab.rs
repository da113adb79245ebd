//! Test networks of namespaces joined by veth pairs, for the integration tests and the
//! demo: a [`NetLab`] makes namespaces with a unique prefix, links them, runs commands in
//! them, and deletes every namespace it made when it is dropped, also when a test fails
//! half-way (the veths go with their namespaces).
//!
//! Its failures are [`Error`]s: a command that could not start or that failed (its command
//! line and the end of its output), a namespace that could not be entered.

use std::fmt;
use std::os::fd::AsRawFd;
use std::process::{Command, Output, Stdio};

/// What failed while a [`NetLab`] probed, built or used its namespaces.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The process is not root, so it cannot make namespaces.
    #[error("not root")]
    NotRoot,
    /// `ip netns add` ran but refused (the kernel has no network namespaces, or they are
    /// not allowed here).
    #[error("ip netns add failed (no network namespace support?)")]
    NoNamespaces,
    /// A command could not be started at all (`ip` or the program given is not there).
    #[error("cannot run {command}: {source}")]
    Start {
        /// The command line.
        command: String,
        /// Why it could not be started.
        source: std::io::Error,
    },
    /// A command ran and exited with a failure status.
    #[error("{command}{} failed: {output}", InNs(.ns.as_deref()))]
    Failed {
        /// The command line.
        command: String,
        /// The namespace it ran in (short name), when run through [`NetLab::sh`].
        ns: Option<String>,
        /// The end of what it wrote on standard error (then standard output), trimmed.
        output: String,
    },
    /// A namespace's file under `/var/run/netns` could not be opened, or a thread could not
    /// enter the namespace (`setns`).
    #[error("{}{path}: {source}", Call(.call))]
    Enter {
        /// The namespace's file.
        path: String,
        /// `open` or `setns`.
        call: &'static str,
        /// The system's error.
        source: std::io::Error,
    },
    /// The thread that ran a function in a namespace panicked.
    #[error("thread in namespace {ns} panicked")]
    Panicked {
        /// The namespace (short name).
        ns: String,
    },
}

/// ` (in ns)` after an [`Error::Failed`]'s command when it ran in a namespace, else nothing.
struct InNs<'a>(Option<&'a str>);

impl fmt::Display for InNs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(ns) => write!(f, " (in {ns})"),
            None => Ok(()),
        }
    }
}

/// An [`Error::Enter`]'s call before its path (`setns `); `open` goes without saying.
struct Call(&'static str);

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            "open" => Ok(()),
            call => write!(f, "{call} "),
        }
    }
}

/// How many lines of a failed command's output an [`Error::Failed`] keeps (its end).
pub const OUTPUT_LINES: usize = 20;

/// The last [`OUTPUT_LINES`] lines of `text`, trimmed.
pub fn output_tail(text: &str) -> String {
    last_lines(text.trim(), OUTPUT_LINES)
}

/// The last `n` lines of `text` (all of them when it has fewer).
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .get(lines.len().saturating_sub(n)..)
        .unwrap_or_default()
        .join("\n")
}

/// `c`'s command line: the program and its arguments, separated by spaces.
pub fn command_line(c: &Command) -> String {
    std::iter::once(c.get_program())
        .chain(c.get_args())
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether this process can build namespaces (root, `ip` present, `ip netns add` works).
pub fn available() -> Result<(), Error> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::NotRoot);
    }
    // Unique per call: tests of one process probe at the same time.
    static PROBES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = format!("vfsr-probe-{}-{n}", std::process::id());
    let mut add = Command::new("ip");
    add.args(["netns", "add", &probe]).stderr(Stdio::null());
    let ok = add
        .status()
        .map_err(|source| Error::Start {
            command: command_line(&add),
            source,
        })?
        .success();
    if !ok {
        return Err(Error::NoNamespaces);
    }
    let _ = Command::new("ip").args(["netns", "del", &probe]).status();
    Ok(())
}

/// Namespaces and links, removed on drop.
pub struct NetLab {
    prefix: String,
    made: Vec<String>,
}

impl NetLab {
    /// A lab whose namespaces are named `<tag><pid>-<name>` (kept short: interface names
    /// live inside the namespaces, so only namespace names carry the prefix).
    pub fn new(tag: &str) -> NetLab {
        NetLab {
            prefix: format!("{tag}{}", std::process::id()),
            made: Vec::new(),
        }
    }

    /// The full name of namespace `name`.
    pub fn name(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    /// Makes namespace `name` with its loopback up.
    pub fn add_ns(&mut self, name: &str) -> Result<String, Error> {
        let full = self.name(name);
        let _ = Command::new("ip")
            .args(["netns", "del", &full])
            .stderr(Stdio::null())
            .status();
        run(Command::new("ip").args(["netns", "add", &full]))?;
        self.made.push(full.clone());
        self.ip(name, &["link", "set", "lo", "up"])?;
        Ok(full)
    }

    /// Joins `a`'s interface `if_a` and `b`'s `if_b` with a veth pair, both up, transmit
    /// checksum offload off on both ends (frames leave with complete checksums, as from a
    /// real NIC).
    pub fn veth(&mut self, a: &str, if_a: &str, b: &str, if_b: &str) -> Result<(), Error> {
        let (na, nb) = (self.name(a), self.name(b));
        run(Command::new("ip").args([
            "link", "add", if_a, "netns", &na, "type", "veth", "peer", "name", if_b, "netns", &nb,
        ]))?;
        for (ns, i) in [(a, if_a), (b, if_b)] {
            self.ip(ns, &["link", "set", i, "up"])?;
            let _ = self.exec(ns, &["ethtool", "-K", i, "tx", "off"]);
        }
        Ok(())
    }

    /// Runs `ip ARGS` in namespace `ns`.
    pub fn ip(&self, ns: &str, args: &[&str]) -> Result<String, Error> {
        let full = self.name(ns);
        let mut c = Command::new("ip");
        c.args(["-n", &full]).args(args);
        run(&mut c)
    }

    /// Runs a command in namespace `ns`; its output whatever the exit status.
    pub fn exec(&self, ns: &str, argv: &[&str]) -> Result<Output, Error> {
        let full = self.name(ns);
        Command::new("ip")
            .args(["netns", "exec", &full])
            .args(argv)
            .output()
            .map_err(|source| Error::Start {
                command: argv.join(" "),
                source,
            })
    }

    /// Runs a command in namespace `ns` and returns its standard output; an error with its
    /// standard error if it fails.
    pub fn sh(&self, ns: &str, argv: &[&str]) -> Result<String, Error> {
        let o = self.exec(ns, argv)?;
        if o.status.success() {
            Ok(String::from_utf8_lossy(&o.stdout).into_owned())
        } else {
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stderr),
                String::from_utf8_lossy(&o.stdout)
            );
            Err(Error::Failed {
                command: argv.join(" "),
                ns: Some(ns.to_string()),
                output: output_tail(&said),
            })
        }
    }

    /// A command to start in namespace `ns` (for daemons the caller waits on or kills).
    pub fn command(&self, ns: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name(ns), program]);
        die_with_parent(&mut c);
        c
    }

    /// Runs `f` on a new thread that has entered namespace `ns` (sockets it opens live
    /// there).
    pub fn in_ns<T: Send + 'static>(
        &self,
        ns: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Error> {
        let path = format!("/var/run/netns/{}", self.name(ns));
        let h = std::thread::spawn(move || -> Result<T, Error> {
            let file = match std::fs::File::open(&path) {
                Ok(file) => file,
                Err(source) => {
                    return Err(Error::Enter {
                        path,
                        call: "open",
                        source,
                    })
                }
            };
            // SAFETY: setns on a descriptor we hold open, for this thread only.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(Error::Enter {
                    path,
                    call: "setns",
                    source: std::io::Error::last_os_error(),
                });
            }
            Ok(f())
        });
        h.join()
            .map_err(|_| Error::Panicked { ns: ns.to_string() })?
    }
}

impl Drop for NetLab {
    fn drop(&mut self) {
        for ns in self.made.drain(..).rev() {
            let _ = Command::new("ip")
                .args(["netns", "del", &ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn run(c: &mut Command) -> Result<String, Error> {
    let o = c.output().map_err(|source| Error::Start {
        command: command_line(c),
        source,
    })?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        Err(Error::Failed {
            command: command_line(c),
            ns: None,
            output: output_tail(&String::from_utf8_lossy(&o.stderr)),
        })
    }
}

/// Makes `cmd`'s process get SIGTERM when the thread that starts it exits, so that a test
/// killed half-way leaves no router or daemon running behind it (`ip netns exec` keeps the
/// setting across its exec; a daemon that changes its user loses it, and is stopped on drop).
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches only the child being started.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_failed_command_shows_its_line_its_namespace_and_the_end_of_its_output() {
        let mut c = Command::new("ip");
        c.args(["-n", "x1-rtr", "link", "set", "r0", "up"]);
        assert_eq!(command_line(&c), "ip -n x1-rtr link set r0 up");
        let long: String = (0..50).map(|i| format!("line {i}\n")).collect();
        let tail = output_tail(&long);
        assert_eq!(tail.lines().count(), OUTPUT_LINES);
        assert!(
            tail.starts_with("line 30\n") && tail.ends_with("line 49"),
            "{tail}"
        );
        let e = Error::Failed {
            command: command_line(&c),
            ns: None,
            output: "Cannot find device \"r0\"".into(),
        };
        assert_eq!(
            e.to_string(),
            "ip -n x1-rtr link set r0 up failed: Cannot find device \"r0\""
        );
        let e = Error::Failed {
            command: "sysctl -qw x=1".into(),
            ns: Some("rtr".into()),
            output: "denied".into(),
        };
        assert_eq!(e.to_string(), "sysctl -qw x=1 (in rtr) failed: denied");
        assert!(e.source().is_none());
    }

    #[test]
    fn system_errors_are_kept_as_the_source() {
        let e = Error::Start {
            command: "ip netns add p".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(
            e.to_string().starts_with("cannot run ip netns add p: "),
            "{e}"
        );
        assert!(e.source().is_some());
        let e = Error::Enter {
            path: "/var/run/netns/x".into(),
            call: "setns",
            source: std::io::Error::from_raw_os_error(libc::EPERM),
        };
        assert!(e.to_string().starts_with("setns /var/run/netns/x: "), "{e}");
        let e = Error::Enter {
            path: "/var/run/netns/x".into(),
            call: "open",
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        };
        assert!(e.to_string().starts_with("/var/run/netns/x: "), "{e}");
        assert_eq!(Error::NotRoot.to_string(), "not root");
    }
}
