//! What the namespace benchmarks do on SIGINT or SIGTERM: run their clean-up (stop their
//! daemons, delete their namespaces) and exit with 128 + the signal.
//!
//! A signal handler may do almost nothing, so the one installed here only writes the
//! signal's number to a pipe; a watcher thread reads it and runs the clean-up as ordinary
//! code. Programs the benchmarks start get the default handlers back at exec.

use std::sync::atomic::{AtomicI32, Ordering};

/// The write end of the pipe the handler writes to (-1: not installed).
static PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let b = sig as u8;
    // SAFETY: write(2) is async-signal-safe; the descriptor stays open for the process's
    // life.
    unsafe {
        libc::write(PIPE.load(Ordering::Relaxed), (&b as *const u8).cast(), 1);
    }
}

/// Deletes every namespace whose name starts with `prefix` (their veths, routes and XDP
/// programs go with them).
pub fn delete_namespaces(prefix: &str) {
    let Ok(o) = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
    else {
        return;
    };
    for name in String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
    {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", name])
            .status();
    }
}

/// On SIGINT or SIGTERM, prints `what`, runs `clean_up` on a watcher thread and exits with
/// 128 + the signal. Installed once per process (a second call does nothing).
pub fn on_interrupt(what: &'static str, clean_up: impl FnOnce() + Send + 'static) {
    if PIPE.load(Ordering::Relaxed) >= 0 {
        return;
    }
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    PIPE.store(fds[1], Ordering::Relaxed);
    let read_end = fds[0];
    std::thread::spawn(move || {
        let mut b = [0u8; 1];
        // SAFETY: reads one byte into `b` from the pipe this thread owns.
        if unsafe { libc::read(read_end, b.as_mut_ptr().cast(), 1) } != 1 {
            return;
        }
        eprintln!("vfsr: signal {}: {what}", b[0]);
        clean_up();
        std::process::exit(128 + i32::from(b[0]));
    });
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a plain handler and an empty mask is valid; the
        // handler only calls write(2).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}
