//! vfsrd under systemd (`packaging/systemd/vfsrd.service`, `Type=notify`): readiness, the
//! watchdog, reloads and stopping are told to the service manager through `sd-notify`.
//!
//! - `READY=1` once every port is open, every worker runs and the configured routes are in
//!   the FIBs (the moment vfsrd prints "ready"); `STATUS=` says what it forwards.
//! - `WATCHDOG=1` from the control plane's loop, every half of `WatchdogSec`: a control plane
//!   stuck anywhere (a deadlock, an endless loop) stops feeding it and systemd restarts vfsrd.
//! - `RELOADING=1` ... `READY=1` around a reload, `STOPPING=1` when a stop is asked for.
//!
//! Without `NOTIFY_SOCKET` (not started by systemd) every call does nothing.

use std::time::{Duration, Instant};

use sd_notify::NotifyState;

/// The service manager's view of vfsrd.
pub struct Service {
    watchdog: Option<Duration>,
    fed: Instant,
}

impl Default for Service {
    fn default() -> Self {
        Service::new()
    }
}

impl Service {
    /// Reads the watchdog interval systemd gave (`WATCHDOG_USEC`), if any.
    pub fn new() -> Service {
        Service {
            watchdog: sd_notify::watchdog_enabled(),
            fed: Instant::now(),
        }
    }

    /// The watchdog interval, when systemd runs one.
    pub fn watchdog(&self) -> Option<Duration> {
        self.watchdog
    }

    fn send(states: &[NotifyState]) {
        if let Err(e) = sd_notify::notify(states) {
            tracing::warn!(error = %e, "telling systemd");
        }
    }

    /// The router forwards: `status` says how.
    pub fn ready(&mut self, status: &str) {
        Service::send(&[NotifyState::Ready, NotifyState::Status(status)]);
        self.fed = Instant::now();
    }

    /// Feeds the watchdog if half its interval has passed (call from the control loop).
    pub fn tick(&mut self) {
        if let Some(w) = self.watchdog {
            if self.fed.elapsed() >= w / 2 {
                Service::send(&[NotifyState::Watchdog]);
                self.fed = Instant::now();
            }
        }
    }

    /// A reload starts.
    pub fn reloading(&self) {
        // Type=notify-reload (systemd 253+) wants the monotonic time with it.
        match NotifyState::monotonic_usec_now() {
            Ok(t) => Service::send(&[NotifyState::Reloading, t]),
            Err(_) => Service::send(&[NotifyState::Reloading]),
        }
    }

    /// vfsrd is stopping.
    pub fn stopping(&self) {
        Service::send(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
    }
}
