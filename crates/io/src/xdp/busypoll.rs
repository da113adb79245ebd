//! Preferred busy polling: the socket options and the interface's interrupt deferral, put
//! back as they were when dropped.

use super::BusyPoll;
use crate::IoError;

/// Socket options of preferred busy polling (`asm-generic/socket.h`).
pub(super) const SO_PREFER_BUSY_POLL: libc::c_int = 69;
pub(super) const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// An interface's `napi_defer_hard_irqs` and `gro_flush_timeout`, set for busy polling and
/// put back as they were when dropped.
pub(super) struct NapiDefer {
    dir: String,
    old: Vec<(&'static str, String)>,
}

impl NapiDefer {
    pub(super) fn set(name: &str, bp: &BusyPoll) -> Result<NapiDefer, IoError> {
        let dir = format!("/sys/class/net/{name}");
        let mut d = NapiDefer {
            dir,
            old: Vec::new(),
        };
        for (file, value) in [
            ("napi_defer_hard_irqs", bp.defer_irqs.to_string()),
            ("gro_flush_timeout", bp.hold_ns.to_string()),
        ] {
            let path = format!("{}/{file}", d.dir);
            let old = std::fs::read_to_string(&path).map_err(|e| {
                IoError::Unsupported(format!(
                    "{name}: busy polling: reading {path}: {e} (set busy_poll = false)"
                ))
            })?;
            std::fs::write(&path, &value).map_err(|e| {
                IoError::Unsupported(format!(
                    "{name}: busy polling: writing {value} to {path}: {e} (needs root; or set \
                     busy_poll = false)"
                ))
            })?;
            d.old.push((file, old.trim().to_string()));
        }
        Ok(d)
    }
}

impl Drop for NapiDefer {
    fn drop(&mut self) {
        for (file, value) in self.old.drain(..).rev() {
            let _ = std::fs::write(format!("{}/{file}", self.dir), value);
        }
    }
}
