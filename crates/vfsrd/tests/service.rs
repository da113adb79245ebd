//! vfsrd as a systemd service: the unit file, and the notifications vfsrd sends.
//!
//! - `the_unit_file_verifies`: `systemd-analyze verify` finds nothing to say about
//!   `packaging/systemd/vfsrd.service` (paths pointed at the built binary), and does about a
//!   broken copy (so the check can fail).
//! - `vfsrd_tells_systemd_what_it_does`: vfsrd runs in a namespace with `NOTIFY_SOCKET` set to
//!   a datagram socket of the test and `WATCHDOG_USEC=300000`, as systemd starts it: the test
//!   receives `READY=1` with a status once vfsrd says ready, `WATCHDOG=1` about every 150 ms,
//!   `RELOADING=1` then `READY=1` around a SIGHUP, `STOPPING=1` on SIGTERM; its log lines
//!   carry their level and fields.
//!
//! Needs root and network namespaces (and systemd-analyze for the first); skips with a printed
//! reason otherwise.

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use vfsrd::daemons::{add_ns_without_dad, program_exists, skip_reason};
use vfsrd::netlab::NetLab;

const VFSRD: &str = env!("CARGO_BIN_EXE_vfsrd");

fn unit() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/systemd/vfsrd.service");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `systemd-analyze verify` on `text`: what it printed about the unit.
fn verify(text: &str, config: &Path) -> String {
    let dir = std::env::temp_dir().join(format!("vfsrd-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("vfsrd.service");
    let text = text
        .replace("/usr/local/bin/vfsrd", VFSRD)
        .replace("/etc/vfsr/vfsrd.toml", &config.display().to_string());
    std::fs::write(&file, text).unwrap();
    let o = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
    .lines()
    .filter(|l| l.contains("vfsrd.service"))
    .collect::<Vec<_>>()
    .join("\n")
}

#[test]
fn the_unit_file_verifies() {
    if !program_exists("systemd-analyze") {
        vfsr_skip::skip("systemd-analyze is not installed (Debian's systemd package)");
        return;
    }
    let config = std::env::temp_dir().join(format!("vfsrd-unit-{}.toml", std::process::id()));
    std::fs::write(&config, "").unwrap();
    let u = unit();
    for want in [
        "Type=notify",
        "WatchdogSec=",
        "Restart=on-failure",
        "ExecReload=/bin/kill -HUP $MAINPID",
    ] {
        assert!(u.contains(want), "the unit lacks {want}");
    }
    assert_eq!(verify(&u, &config), "", "systemd-analyze verify complains");
    let broken = u.replace("Restart=on-failure", "Restart=on-failur");
    assert!(verify(&broken, &config).contains("on-failur"));
    let _ = std::fs::remove_file(&config);
}

const CONFIG: &str = r#"
[router]
control_core = 0
workers = [1]

[api]
socket = "@SOCKET@"
metrics = "off"

[[interface]]
name = "r1"
addresses = ["10.1.0.1/24"]

[[route]]
prefix = "198.51.100.0/24"
via = "10.1.0.2"
"#;

#[test]
fn vfsrd_tells_systemd_what_it_does() {
    if let Some(why) = skip_reason(&["ip"]) {
        vfsr_skip::skip(&why);
        return;
    }
    let mut lab = NetLab::new("svc");
    for ns in ["rt", "h1"] {
        add_ns_without_dad(&mut lab, ns).unwrap();
    }
    lab.veth("h1", "eth0", "rt", "r1").unwrap();
    lab.ip("h1", &["addr", "add", "10.1.0.2/24", "dev", "eth0"])
        .unwrap();

    let pid = std::process::id();
    let dir = std::env::temp_dir();
    let notify = dir.join(format!("vfsrd-notify-{pid}.sock"));
    let _ = std::fs::remove_file(&notify);
    let sock = UnixDatagram::bind(&notify).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let cfg = dir.join(format!("vfsrd-svc-{pid}.toml"));
    let api = dir.join(format!("vfsrd-svc-{pid}.sock"));
    std::fs::write(&cfg, CONFIG.replace("@SOCKET@", &api.display().to_string())).unwrap();

    let mut child = lab
        .command("rt", VFSRD)
        .arg("--config")
        .arg(&cfg)
        .env("NOTIFY_SOCKET", &notify)
        .env("WATCHDOG_USEC", "300000")
        .env_remove("WATCHDOG_PID")
        .env_remove("VFSR_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            println!("[vfsrd] {l}");
            let _ = tx2.send(l);
        }
    });
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            println!("[vfsrd!] {l}");
            let _ = tx.send(l);
        }
    });
    let pidof = child.id() as i32;
    let signal = |sig: i32| {
        // SAFETY: kill(2) on a child we started (ip netns exec execs vfsrd).
        unsafe {
            libc::kill(pidof, sig);
        }
    };

    // Every datagram received until `until` holds or `limit` passes.
    let mut seen: Vec<String> = Vec::new();
    let mut collect = |limit: Duration, until: &dyn Fn(&[String]) -> bool| -> Vec<String> {
        let start = Instant::now();
        let mut buf = [0u8; 4096];
        while start.elapsed() < limit && !until(&seen) {
            if let Ok(n) = sock.recv(&mut buf) {
                let msg = String::from_utf8_lossy(buf.get(..n).unwrap_or_default()).into_owned();
                seen.extend(msg.lines().map(String::from));
            }
        }
        seen.clone()
    };

    let got = collect(Duration::from_secs(30), &|s| {
        s.iter().any(|l| l == "READY=1")
    });
    assert!(got.iter().any(|l| l == "READY=1"), "no READY=1: {got:?}");
    assert!(
        got.iter()
            .any(|l| l.starts_with("STATUS=forwarding on 1 port(s) with 1 worker(s)")),
        "{got:?}"
    );
    let ready_at = got.len();
    let got = collect(Duration::from_secs(2), &|s| {
        s.iter()
            .skip(ready_at)
            .filter(|l| *l == "WATCHDOG=1")
            .count()
            >= 5
    });
    let feeds = got
        .iter()
        .skip(ready_at)
        .filter(|l| *l == "WATCHDOG=1")
        .count();
    assert!(
        feeds >= 5,
        "the watchdog was fed {feeds} times in 2 s: {got:?}"
    );

    let before = got.len();
    signal(libc::SIGHUP);
    let got = collect(Duration::from_secs(5), &|s| {
        s.iter().skip(before).any(|l| l == "READY=1")
    });
    let after: Vec<&String> = got.iter().skip(before).collect();
    let reloading = after.iter().position(|l| *l == "RELOADING=1");
    let ready = after.iter().position(|l| *l == "READY=1");
    assert!(
        matches!((reloading, ready), (Some(a), Some(b)) if a < b),
        "{after:?}"
    );
    assert!(
        after.iter().any(|l| l.starts_with("MONOTONIC_USEC=")),
        "{after:?}"
    );

    let before = got.len();
    signal(libc::SIGTERM);
    let got = collect(Duration::from_secs(10), &|s| {
        s.iter().skip(before).any(|l| l == "STOPPING=1")
    });
    assert!(
        got.iter().skip(before).any(|l| l == "STOPPING=1"),
        "{got:?}"
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");

    // Log lines: level and fields.
    let logs: Vec<String> = rx.try_iter().collect();
    assert!(
        logs.iter().any(|l| l.contains(" INFO ")
            && l.contains("systemd watchdog on")
            && l.contains("interval_ms=300")),
        "{logs:?}"
    );
    assert!(
        logs.iter()
            .any(|l| l.contains(" INFO ") && l.contains("reloaded")),
        "{logs:?}"
    );
    let _ = std::fs::remove_file(&notify);
    let _ = std::fs::remove_file(&cfg);
}
