//! vfsrd itself, started by the integration tests in a namespace of a [`NetLab`].
//!
//! One handle for what every test of a running router needs: write its config, start it, wait
//! until it says `ready`, send it signals, read its FIB dump, its stats file and its log, stop
//! it (SIGTERM, SIGKILL after a grace) and start it again. The files it uses (config, FIB dump,
//! stats, control socket) live in the temporary directory under names made of the tag and
//! this process's id, and are removed on drop.
//!
//! ```text
//!   test ──Vfsrd::start(lab, ns, binary, tag, config)──▶ ip netns exec <ns> vfsrd
//!          --config <tag>.toml --fib-dump <tag>.fib --stats <tag>.json
//!            │ stdout/stderr: printed as "[vfsrd <ns>] …" and kept for `logged`
//!            ▼ "ready" on stdout (90 s at most)
//!   fib()     SIGUSR1, then reads the dump         stats()  reads the stats file
//!   signal()  any signal                           stop()   SIGTERM, 10 s, SIGKILL
//! ```
//!
//! The config text may name the control socket as `@SOCKET@`; it is replaced by the socket
//! path of this instance ([`Vfsrd::socket`]).
//!
//! The tests print every line vfsrd writes ([`Echo::All`]); a benchmark that keeps its own
//! transcript prints only the `ready` line ([`Echo::Ready`]) or nothing ([`Echo::Quiet`]) and
//! still has the rest through [`Vfsrd::logged`].
//!
//! A benchmark that pins itself to one core before it starts vfsrd names the cores vfsrd may
//! use in [`Launch::cpus`] (vfsrd counts the cores it may run on and pins its threads itself).
//!
//! Failures are [`Error`]s: the config file that could not be written, a vfsrd that could
//! not start or did not say `ready` in time (with what it said last), a FIB dump that did not
//! come, a set of cores that cannot be a mask.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::daemons::{stop_child, wait_for, Timeout};
use crate::netlab::NetLab;

/// What failed while vfsrd was started in its namespace or asked for its FIB.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The config file could not be written.
    #[error("{}: {source}", .path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The process could not be started.
    #[error("cannot start {} in {ns}: {source}", .binary.display())]
    Start {
        /// The binary.
        binary: PathBuf,
        /// The namespace.
        ns: String,
        /// Why.
        source: std::io::Error,
    },
    /// vfsrd did not say `ready` within its time (or exited first).
    #[error(
        "vfsrd in {ns} did not say ready within {after:?} ({status:?}){}{}",
        if .said.is_empty() { "" } else { ": " },
        .said.join(" | ")
    )]
    NotReady {
        /// The namespace.
        ns: String,
        /// How long it was given.
        after: Duration,
        /// How it ended when stopped (`None`: it was not running any more).
        status: Option<ExitStatus>,
        /// The last lines it wrote (its error, when it exited).
        said: Vec<String>,
    },
    /// vfsrd is not running (its FIB cannot be asked for).
    #[error("vfsrd in {ns} is not running")]
    NotRunning {
        /// The namespace.
        ns: String,
    },
    /// The FIB dump did not appear in time.
    #[error(transparent)]
    Timeout(#[from] Timeout),
    /// [`Launch::cpus`] is empty.
    #[error("vfsrd: an empty set of cores to run on")]
    NoCores,
    /// A core of [`Launch::cpus`] is beyond what an affinity mask holds.
    #[error("vfsrd: core {core} is beyond the {size} an affinity mask holds")]
    CoreBeyondMask {
        /// The core.
        core: usize,
        /// How many cores a mask holds.
        size: usize,
    },
}

/// How long vfsrd may take to say `ready` (a debug build loading a full table takes tens of
/// seconds; a vfsrd that exits ends the wait at once).
pub const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// How long `stop` waits after SIGTERM before it kills.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// Which of vfsrd's output lines are printed (all are kept for [`Vfsrd::logged`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Echo {
    /// Every line, prefixed `[vfsrd <ns>]` (standard error: `[vfsrd <ns>!]`).
    #[default]
    All,
    /// Only the line that says `ready`.
    Ready,
    /// None: the caller reads what it wants through [`Vfsrd::logged`].
    Quiet,
}

/// How vfsrd is started, beyond its namespace, binary and config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Launch {
    /// Which output lines are printed.
    pub echo: Echo,
    /// The cores vfsrd may run on, set in the child between fork and exec (the start fails
    /// when the kernel refuses the set); `None` keeps the affinity it inherits from the
    /// thread that starts it.
    pub cpus: Option<Vec<usize>>,
}

/// A vfsrd process in one namespace (or none between [`Vfsrd::stop`] and [`Vfsrd::spawn`]).
pub struct Vfsrd {
    ns: String,
    launch: Launch,
    binary: PathBuf,
    child: Option<Child>,
    config: PathBuf,
    dump: PathBuf,
    stats: PathBuf,
    socket: PathBuf,
    log: mpsc::Receiver<String>,
    log_tx: mpsc::Sender<String>,
    /// The line with which the last start said `ready`.
    ready: Option<String>,
}

impl Vfsrd {
    /// Writes `config` (with `@SOCKET@` replaced) and starts `binary` in namespace `ns` of
    /// `lab`; returns once it has said `ready`. Prints every line vfsrd writes.
    pub fn start(
        lab: &NetLab,
        ns: &str,
        binary: &Path,
        tag: &str,
        config: &str,
    ) -> Result<Vfsrd, Error> {
        Vfsrd::start_echo(lab, ns, binary, tag, config, Echo::All)
    }

    /// [`Vfsrd::start`], printing what `echo` says.
    pub fn start_echo(
        lab: &NetLab,
        ns: &str,
        binary: &Path,
        tag: &str,
        config: &str,
        echo: Echo,
    ) -> Result<Vfsrd, Error> {
        let launch = Launch { echo, cpus: None };
        Vfsrd::start_with(lab, ns, binary, tag, config, launch)
    }

    /// [`Vfsrd::start`], started as `launch` says (also when [`Vfsrd::spawn`] starts it
    /// again).
    pub fn start_with(
        lab: &NetLab,
        ns: &str,
        binary: &Path,
        tag: &str,
        config: &str,
        launch: Launch,
    ) -> Result<Vfsrd, Error> {
        let path = |ext: &str| {
            std::env::temp_dir().join(format!("vfsrd-{tag}-{ns}-{}.{ext}", std::process::id()))
        };
        let (log_tx, log) = mpsc::channel();
        let mut v = Vfsrd {
            ns: ns.to_string(),
            launch,
            binary: binary.to_path_buf(),
            child: None,
            config: path("toml"),
            dump: path("fib"),
            stats: path("json"),
            socket: path("sock"),
            log,
            log_tx,
            ready: None,
        };
        let text = config.replace("@SOCKET@", &v.socket.display().to_string());
        if let Err(source) = std::fs::write(&v.config, text) {
            return Err(Error::Config {
                path: v.config.clone(),
                source,
            });
        }
        v.spawn(lab)?;
        Ok(v)
    }

    /// Starts vfsrd again (after [`Vfsrd::stop`] or a kill) with the same files; returns once
    /// it has said `ready`. Does nothing while it runs.
    pub fn spawn(&mut self, lab: &NetLab) -> Result<(), Error> {
        if self.running() {
            return Ok(());
        }
        let _ = std::fs::remove_file(&self.dump);
        let mut cmd = lab.command(&self.ns, &self.binary.display().to_string());
        if let Some(cpus) = &self.launch.cpus {
            let set = cpu_set(cpus)?;
            // SAFETY: the closure runs in the child between fork and exec; it makes one
            // async-signal-safe system call on a set built before the fork, and allocates
            // nothing.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd
            .arg("--config")
            .arg(&self.config)
            .arg("--fib-dump")
            .arg(&self.dump)
            .arg("--stats")
            .arg(&self.stats)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| Error::Start {
                binary: self.binary.clone(),
                ns: self.ns.clone(),
                source,
            })?;
        let (ready_tx, ready_rx) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            let (tx, ns, echo) = (self.log_tx.clone(), self.ns.clone(), self.launch.echo);
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    let ready = line.contains("ready");
                    if echo == Echo::All || (ready && echo == Echo::Ready) {
                        println!("[vfsrd {ns}] {line}");
                    }
                    if ready {
                        let _ = ready_tx.send(line.clone());
                    }
                    let _ = tx.send(line);
                }
            });
        }
        if let Some(err) = child.stderr.take() {
            let (tx, ns, echo) = (self.log_tx.clone(), self.ns.clone(), self.launch.echo);
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    if echo == Echo::All {
                        println!("[vfsrd {ns}!] {line}");
                    }
                    let _ = tx.send(line);
                }
            });
        }
        self.child = Some(child);
        let Ok(line) = ready_rx.recv_timeout(READY_TIMEOUT) else {
            let status = self.stop();
            // What it said last (its error, when it exited), whether or not it was printed.
            let said: Vec<String> = self.log.try_iter().collect();
            let tail = said.get(said.len().saturating_sub(5)..).unwrap_or_default();
            return Err(Error::NotReady {
                ns: self.ns.clone(),
                after: READY_TIMEOUT,
                status,
                said: tail.to_vec(),
            });
        };
        self.ready = Some(line);
        Ok(())
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The line with which vfsrd said `ready` when it last started (printed or not).
    pub fn ready_line(&self) -> Option<&str> {
        self.ready.as_deref()
    }

    /// The process id (`ip netns exec` execs, so it is vfsrd's own).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The namespace it runs in.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// The control socket's path (what `@SOCKET@` in the config became).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The config file's path.
    pub fn config_path(&self) -> &Path {
        &self.config
    }

    /// The stats file's path (vfsrd rewrites it every second).
    pub fn stats_path(&self) -> &Path {
        &self.stats
    }

    /// Sends `sig` to vfsrd if it runs.
    pub fn signal(&self, sig: i32) {
        if let Some(c) = &self.child {
            // SAFETY: kill(2) on a child we started and have not reaped, so the pid is still
            // vfsrd's.
            unsafe {
                libc::kill(c.id() as i32, sig);
            }
        }
    }

    /// SIGTERM, then SIGKILL after [`STOP_GRACE`]; the exit status (`None` if it was not
    /// running).
    pub fn stop(&mut self) -> Option<ExitStatus> {
        let mut c = self.child.take()?;
        stop_child(&mut c, libc::SIGTERM, STOP_GRACE).ok()
    }

    /// SIGKILL, as a crash would end it.
    pub fn kill9(&mut self) -> Option<ExitStatus> {
        let mut c = self.child.take()?;
        stop_child(&mut c, libc::SIGKILL, STOP_GRACE).ok()
    }

    /// vfsr's FIB, prefix → how it forwards (`via 10.9.0.2 dev r2`, `connected dev r1`,
    /// `group …`), from the dump vfsrd writes on SIGUSR1; empty when it does not run or does not
    /// answer within `timeout`.
    pub fn fib(&self, timeout: Duration) -> BTreeMap<String, String> {
        self.fib_dump(timeout)
            .map(|text| fib_entries(&text))
            .unwrap_or_default()
    }

    /// The FIB dump vfsrd writes on SIGUSR1, as it wrote it (its `#` header line first); an
    /// error when it does not run or the dump does not appear within `timeout`.
    pub fn fib_dump(&self, timeout: Duration) -> Result<String, Error> {
        if self.child.is_none() {
            return Err(Error::NotRunning {
                ns: self.ns.clone(),
            });
        }
        let _ = std::fs::remove_file(&self.dump);
        self.signal(libc::SIGUSR1);
        Ok(wait_for("vfsrd's FIB dump", timeout, || {
            std::fs::read_to_string(&self.dump).ok()
        })?)
    }

    /// The stats file as it is now (vfsrd rewrites it every second); `Null` before the first.
    pub fn stats(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(&self.stats).unwrap_or_default();
        serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
    }

    /// Waits up to `timeout` for a log line (standard output or error) containing `what` that
    /// was not read by an earlier call.
    pub fn logged(&self, what: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.log.recv_timeout(left) {
                Ok(l) if l.contains(what) => return Some(l),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        None
    }
}

impl Drop for Vfsrd {
    fn drop(&mut self) {
        self.stop();
        for p in [&self.config, &self.dump, &self.stats, &self.socket] {
            let _ = std::fs::remove_file(p);
        }
        // What a vfsrd stopped half-way through writing the stats or the dump leaves behind
        // (it writes a `.tmp` beside the file and renames it).
        for p in [&self.dump, &self.stats] {
            let _ = std::fs::remove_file(p.with_extension("tmp"));
        }
    }
}

/// A FIB dump's entries, prefix → how it forwards (the `#` header and any line without a
/// space left out).
pub fn fib_entries(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .map(|(p, f)| (p.to_string(), f.to_string()))
        .collect()
}

/// The affinity mask of `cpus`; an error for an empty list or a core the mask cannot hold.
fn cpu_set(cpus: &[usize]) -> Result<libc::cpu_set_t, Error> {
    let size = libc::CPU_SETSIZE as usize;
    if cpus.is_empty() {
        return Err(Error::NoCores);
    }
    if let Some(&core) = cpus.iter().find(|&&c| c >= size) {
        return Err(Error::CoreBeyondMask { core, size });
    }
    // SAFETY: cpu_set_t is a plain bit array, for which all zeros is the empty set; every
    // core set is below CPU_SETSIZE (checked above), so CPU_SET stays within it.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        set
    };
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_gives_its_entries_without_the_header() {
        let text = "# vfsr FIB: 2 routes\n10.0.0.0/8 via 10.9.0.2 dev r2\n\
                    10.9.0.0/24 connected dev r2\n";
        let fib = fib_entries(text);
        assert_eq!(fib.len(), 2);
        assert_eq!(
            fib.get("10.0.0.0/8").map(String::as_str),
            Some("via 10.9.0.2 dev r2")
        );
        assert!(fib.keys().all(|k| !k.starts_with('#')));
    }

    #[test]
    fn the_cpu_set_holds_the_cores_named_and_refuses_the_impossible() {
        let set = cpu_set(&[0, 3]).unwrap();
        // SAFETY: the cores asked about are below CPU_SETSIZE.
        let has = |c: usize| unsafe { libc::CPU_ISSET(c, &set) };
        assert!(has(0));
        assert!(!has(1));
        assert!(has(3));
        assert!(matches!(cpu_set(&[]), Err(Error::NoCores)));
        let size = libc::CPU_SETSIZE as usize;
        let e = cpu_set(&[size]).err().unwrap();
        assert_eq!(
            e.to_string(),
            format!("vfsrd: core {size} is beyond the {size} an affinity mask holds")
        );
    }

    #[test]
    fn a_vfsrd_that_is_not_ready_shows_what_it_said_last() {
        let e = Error::NotReady {
            ns: "t1-rtr".into(),
            after: Duration::from_secs(90),
            status: None,
            said: vec!["config: bad".into(), "exiting".into()],
        };
        assert_eq!(
            e.to_string(),
            "vfsrd in t1-rtr did not say ready within 90s (None): config: bad | exiting"
        );
        let t = Timeout {
            what: "vfsrd's FIB dump".into(),
            after: Duration::from_millis(1500),
        };
        let e = Error::from(t);
        assert_eq!(
            e.to_string(),
            "timed out after 1.5 s waiting for vfsrd's FIB dump"
        );
        assert!(std::error::Error::source(&e).is_none());
    }
}
