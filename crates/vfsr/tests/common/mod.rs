//! What the namespace tests of `vfsr` share: the reason to skip, a file removed on drop, one
//! run of `vfsr` with its JSON report, and the namespaces a run left behind.

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

/// Why a test that sends traffic with the veth benchmark's generator cannot run here, if it
/// cannot: [`netns_skip_reason`], or a kernel that refuses XDP test runs on live frames (the
/// generator's way of sending; see `vfsr_io::bpf::live_frames_refusal`).
pub fn generator_skip_reason(vfsrd_next_to: Option<&Path>) -> Option<String> {
    netns_skip_reason(vfsrd_next_to).or_else(vfsr_io::bpf::live_frames_refusal)
}

/// Removes a file when dropped, so a failing test leaves nothing behind.
pub struct TempFile(pub PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// One run of `vfsr`: whether it exited with success, its standard output, its process id and
/// its JSON report.
pub struct Report {
    pub ok: bool,
    pub stdout: String,
    pub pid: u32,
    pub doc: serde_json::Value,
}

/// Runs `vfsr` (`exe`) with `args` and `--json` to a file named after `tag` and this test's
/// process, prints what it wrote, and reads its report; a run that wrote no report fails the
/// test with its exit status.
pub fn run_with_report(exe: &Path, tag: &str, args: &[&str]) -> Report {
    let json =
        TempFile(std::env::temp_dir().join(format!("vfsr-{tag}-{}.json", std::process::id())));
    let child = Command::new(exe)
        .args(args)
        .arg("--json")
        .arg(&json.0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start vfsr");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait for vfsr");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&json.0).unwrap_or_else(|e| {
        panic!(
            "vfsr {tag} wrote no report ({e}); it exited with {}",
            out.status
        )
    });
    let doc = serde_json::from_str(&text).expect("the report is JSON");
    Report {
        ok: out.status.success(),
        stdout,
        pid,
        doc,
    }
}

/// The namespaces still present of the run of `vfsr` whose process id is `pid` (it names
/// them `fb<pid>-…`).
pub fn namespaces_left(pid: u32) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    let tag = format!("fb{pid}-");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(&tag))
        .map(str::to_string)
        .collect()
}
