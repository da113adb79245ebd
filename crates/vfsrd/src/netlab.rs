//! Test networks of namespaces joined by veth pairs, for the integration tests and the
//! demo: a [`NetLab`] makes namespaces with a unique prefix, links them, runs commands in
//! them, and deletes every namespace it made when it is dropped, also when a test fails
//! half-way (the veths go with their namespaces).

use std::os::fd::AsRawFd;
use std::process::{Command, Output, Stdio};

/// Whether this process can build namespaces (root, `ip` present, `ip netns add` works).
pub fn available() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root".into());
    }
    // Unique per call: tests of one process probe at the same time.
    static PROBES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = format!("vfsr-probe-{}-{n}", std::process::id());
    let ok = Command::new("ip")
        .args(["netns", "add", &probe])
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run ip: {e}"))?
        .success();
    if !ok {
        return Err("ip netns add failed (no network namespace support?)".into());
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
    pub fn add_ns(&mut self, name: &str) -> Result<String, String> {
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
    pub fn veth(&mut self, a: &str, if_a: &str, b: &str, if_b: &str) -> Result<(), String> {
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
    pub fn ip(&self, ns: &str, args: &[&str]) -> Result<String, String> {
        let full = self.name(ns);
        let mut c = Command::new("ip");
        c.args(["-n", &full]).args(args);
        run(&mut c)
    }

    /// Runs a command in namespace `ns`; its output whatever the exit status.
    pub fn exec(&self, ns: &str, argv: &[&str]) -> Result<Output, String> {
        let full = self.name(ns);
        Command::new("ip")
            .args(["netns", "exec", &full])
            .args(argv)
            .output()
            .map_err(|e| format!("{}: {e}", argv.join(" ")))
    }

    /// Runs a command in namespace `ns` and returns its standard output; an error with its
    /// standard error if it fails.
    pub fn sh(&self, ns: &str, argv: &[&str]) -> Result<String, String> {
        let o = self.exec(ns, argv)?;
        if o.status.success() {
            Ok(String::from_utf8_lossy(&o.stdout).into_owned())
        } else {
            Err(format!(
                "{} (in {ns}) failed: {}{}",
                argv.join(" "),
                String::from_utf8_lossy(&o.stderr),
                String::from_utf8_lossy(&o.stdout)
            ))
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
    ) -> Result<T, String> {
        let path = format!("/var/run/netns/{}", self.name(ns));
        let h = std::thread::spawn(move || -> Result<T, String> {
            let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
            // SAFETY: setns on a descriptor we hold open, for this thread only.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(format!("setns {path}: {}", std::io::Error::last_os_error()));
            }
            Ok(f())
        });
        h.join()
            .map_err(|_| "thread in namespace panicked".to_string())?
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

fn run(c: &mut Command) -> Result<String, String> {
    let o = c.output().map_err(|e| format!("{c:?}: {e}"))?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        Err(format!(
            "{c:?} failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ))
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
