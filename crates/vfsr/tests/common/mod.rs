//! What the namespace tests of `vfsr` share: the reason to skip, and a file removed on drop.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Why a test that builds network namespaces cannot run here, if it cannot: not root, or
/// `ip netns add` fails; with `vfsrd_next_to`, also when vfsrd is not built beside that
/// binary.
pub fn netns_skip_reason(vfsrd_next_to: Option<&Path>) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root".into());
    }
    let probe = format!("vtprobe{}", std::process::id());
    let ok = Command::new("ip")
        .args(["netns", "add", &probe])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return Some("`ip netns add` does not work here".into());
    }
    let _ = Command::new("ip").args(["netns", "del", &probe]).status();
    if let Some(exe) = vfsrd_next_to {
        if !exe.with_file_name("vfsrd").exists() {
            return Some("vfsrd is not built next to vfsr (cargo build -p vfsrd)".into());
        }
    }
    None
}

/// Removes a file when dropped, so a failing test leaves nothing behind.
pub struct TempFile(pub PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
