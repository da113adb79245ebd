//! `vfsrctl top` in a real terminal: tmux runs it in a 100×30 pane against a live vfsrd and
//! the test reads the pane as a user would see it.
//!
//! ```text
//!   h1 eth0 ── r1   rt: vfsrd, API on a socket in /tmp   r2 ── eth0 s1  10.9.0.2
//!  10.1.0.2                                                     lo 198.51.100.1
//! ```
//!
//! - `top_shows_live_rates_and_quits_on_q`: under a ping flood from h1 the pane shows the
//!   header with the hint, the worker table and the port table with a non-zero receive rate
//!   on r1, every line within 80 columns; `q` ends top within 2 s with status 0, the pane no
//!   longer shows the tables (the alternate screen was left) and `stty` run after it in the
//!   same terminal finds canonical mode and echo back on. With `--interval 5000`, a `q`,
//!   `Esc` or `Ctrl-C` sent 0.5 s after the start ends top within 1.5 s, long before the
//!   first redraw, with status 0 and the terminal restored. With `--count 2` top ends by
//!   itself, status 0, and its last screen stays on the normal screen.
//! - `top_restores_the_terminal_when_vfsrd_goes_away`: vfsrd stops under a running top: top
//!   exits with status 3 and its error is on the normal screen, the terminal restored.
//!
//! Each tmux session runs on a tmux server of its own (`tmux -L`), killed when the test
//! ends, passed or failed. Needs root, network namespaces and tmux; skips with a printed
//! reason otherwise; needs the vfsrd binary beside vfsrctl's (`cargo test --workspace`
//! builds both).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use vfsrd::daemons::{add_ns_without_dad, skip_reason, wait_for, wait_until};
use vfsrd::harness::Vfsrd;
use vfsrd::netlab::NetLab;

const VFSRCTL: &str = env!("CARGO_BIN_EXE_vfsrctl");

const CONFIG: &str = r#"
[router]
control_core = 0
workers = [1]
busy_poll_us = 50

[api]
socket = "@SOCKET@"

[[interface]]
name = "r1"
addresses = ["10.1.0.1/24"]
[[interface]]
name = "r2"
addresses = ["10.9.0.1/24"]

[[route]]
prefix = "198.51.100.0/24"
via = "10.9.0.2"
"#;

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The vfsrd binary, or `None` after printing why the test skips.
fn skipped() -> Option<PathBuf> {
    if let Some(why) = skip_reason(&["ip", "ping", "ethtool", "tmux", "stty"]) {
        vfsr_skip::skip(&why);
        return None;
    }
    let p = Path::new(VFSRCTL).parent()?.join("vfsrd");
    if p.exists() {
        Some(p)
    } else {
        vfsr_skip::skip(format!(
            "no vfsrd binary beside {VFSRCTL} (cargo test --workspace builds it)"
        ));
        None
    }
}

/// h1 — rt (vfsrd) — s1; vfsrd is stopped before the namespaces go.
struct Router {
    vfsrd: Vfsrd,
    lab: NetLab,
}

impl Router {
    fn start(vfsrd: &Path, tag: &str) -> Router {
        let mut lab = NetLab::new(tag);
        for ns in ["rt", "h1", "s1"] {
            add_ns_without_dad(&mut lab, ns).unwrap();
        }
        lab.veth("h1", "eth0", "rt", "r1").unwrap();
        lab.veth("rt", "r2", "s1", "eth0").unwrap();
        for (ns, addr, gw) in [
            ("h1", "10.1.0.2/24", "10.1.0.1"),
            ("s1", "10.9.0.2/24", "10.9.0.1"),
        ] {
            lab.ip(ns, &["addr", "add", addr, "dev", "eth0"]).unwrap();
            lab.ip(ns, &["route", "add", "default", "via", gw]).unwrap();
        }
        lab.ip("s1", &["addr", "add", "198.51.100.1/32", "dev", "lo"])
            .unwrap();
        let vfsrd = Vfsrd::start(&lab, "rt", vfsrd, tag, CONFIG).unwrap();
        Router { vfsrd, lab }
    }

    /// Echo replies of `n` pings from h1 to s1's 198.51.100.1.
    fn ping(&self, n: u32) -> bool {
        let c = n.to_string();
        self.lab
            .exec(
                "h1",
                &[
                    "ping",
                    "-n",
                    "-q",
                    "-c",
                    &c,
                    "-i",
                    "0.05",
                    "-W",
                    "1",
                    "198.51.100.1",
                ],
            )
            .is_ok_and(|o| o.status.success())
    }

    /// A ping flood from h1 through the router: `n` echoes 2 ms apart.
    fn flood(&self, n: u32) -> Child {
        let mut c = self.lab.command("h1", "ping");
        c.args([
            "-n",
            "-q",
            "-c",
            &n.to_string(),
            "-i",
            "0.002",
            "198.51.100.1",
        ])
        .stdout(Stdio::null());
        c.spawn().unwrap()
    }

    /// Stops vfsrd (SIGTERM) and waits for it.
    fn stop(&mut self) {
        self.vfsrd.stop();
    }
}

/// Single quotes for `sh`.
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `vfsrctl top` in a detached 100×30 tmux pane on a tmux server of its own. The pane runs
/// `sh -c 'vfsrctl … top ARGS; s=$?; stty -a > FILE; exit $s'`: the pane stays after the
/// command ends (`remain-on-exit`) with top's exit status, and FILE holds the terminal's
/// settings as top left them. The server is killed on drop.
struct Pane {
    server: String,
    stty: PathBuf,
    started: Instant,
}

impl Pane {
    fn start(socket: &Path, name: &str, args: &[&str]) -> Pane {
        let pid = std::process::id();
        let server = format!("vfsrtop-{name}-{pid}");
        let stty = std::env::temp_dir().join(format!("{server}.stty"));
        let _ = std::fs::remove_file(&stty);
        let mut cmd = format!(
            "{} --socket {} top",
            sq(VFSRCTL),
            sq(&socket.display().to_string())
        );
        for a in args {
            cmd.push(' ');
            cmd.push_str(&sq(a));
        }
        // The status goes into the file too: tmux does not always have it when it first
        // reports the pane dead.
        let script = format!(
            "{cmd}; s=$?; {{ stty -a; echo \"top-status=$s\"; }} > {}; exit $s",
            sq(&stty.display().to_string())
        );
        let p = Pane {
            server,
            stty,
            started: Instant::now(),
        };
        // One tmux command line: the option is set before the pane's process can end.
        let st = p
            .tmux()
            .args(["-f", "/dev/null", "start-server", ";"])
            .args(["set-option", "-g", "remain-on-exit", "on", ";"])
            .args(["new-session", "-d", "-s", "top", "-x", "100", "-y", "30"])
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "tmux new-session: {st}");
        p
    }

    fn tmux(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.server]);
        c
    }

    /// What the pane shows now.
    fn capture(&self) -> String {
        self.capture_from("0")
    }

    /// What the pane shows now with the lines scrolled off above it: when the pane's
    /// process ends tmux writes "Pane is dead" below the last row, scrolling the top row
    /// away.
    fn capture_all(&self) -> String {
        self.capture_from("-")
    }

    fn capture_from(&self, start: &str) -> String {
        let o = self
            .tmux()
            .args(["capture-pane", "-p", "-t", "top", "-S", start])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        let st = self
            .tmux()
            .args(["send-keys", "-t", "top", keys])
            .status()
            .unwrap();
        assert!(st.success());
    }

    /// `Some(exit status)` once the pane's process has ended: tmux says the pane is dead and
    /// the shell wrote top's status after it.
    fn dead(&self) -> Option<i32> {
        let o = self
            .tmux()
            .args(["list-panes", "-t", "top", "-F", "#{pane_dead}"])
            .output()
            .ok()?;
        if String::from_utf8_lossy(&o.stdout).trim() != "1" {
            return None;
        }
        let text = std::fs::read_to_string(&self.stty).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("top-status="))
            .and_then(|v| v.trim().parse().ok())
    }

    /// Waits for the pane to show something that `probe` accepts; the pane's text with it.
    fn wait_screen<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut probe: impl FnMut(&str) -> Option<T>,
    ) -> (String, T) {
        let mut last = String::new();
        let got = wait_for(what, timeout, || {
            last = self.capture();
            probe(&last).map(|v| (last.clone(), v))
        });
        got.unwrap_or_else(|e| panic!("{e}; the pane shows:\n{last}"))
    }

    /// The terminal settings the shell found after top: canonical mode and echo are on.
    fn assert_restored(&self) {
        let stty = std::fs::read_to_string(&self.stty).unwrap();
        let flags: Vec<&str> = stty.split_whitespace().collect();
        for f in ["icanon", "echo", "isig", "icrnl", "opost"] {
            assert!(flags.contains(&f), "{f} is off after top:\n{stty}");
        }
        let screen = self.capture_all();
        assert!(
            !screen.contains("worker") && !screen.contains("q: quit"),
            "the pane still shows top's screen:\n{screen}"
        );
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = self
            .tmux()
            .arg("kill-server")
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_file(&self.stty);
    }
}

/// A rate as top prints it (`950`, `1.2k`, `3.40M`).
fn unhuman(s: &str) -> Option<f64> {
    let (n, m) = match s.char_indices().last()? {
        (i, 'k') => (&s[..i], 1e3),
        (i, 'M') => (&s[..i], 1e6),
        (i, 'G') => (&s[..i], 1e9),
        (i, 'T') => (&s[..i], 1e12),
        _ => (s, 1.0),
    };
    n.parse::<f64>().ok().map(|x| x * m)
}

/// The number in column `header` of the row starting with `first` in a table on `screen`.
/// Numeric columns are right-aligned, headers too: the cell ends where its header ends.
fn cell(screen: &str, first: &str, header: &str) -> Option<f64> {
    let lines: Vec<&str> = screen.lines().collect();
    let row = lines
        .iter()
        .position(|l| l.split_whitespace().next() == Some(first))?;
    // The table's header is the nearest line above that names the column.
    let head = lines[..row].iter().rev().find(|l| l.contains(header))?;
    let end = head.find(header)? + header.len();
    let line = lines[row];
    let start = line.get(..end)?.rfind(' ').map_or(0, |i| i + 1);
    if line
        .get(end..)
        .is_some_and(|rest| !rest.is_empty() && !rest.starts_with(' '))
    {
        return None;
    }
    unhuman(line.get(start..end)?)
}

#[test]
fn top_shows_live_rates_and_quits_on_q() {
    let _g = serial();
    let Some(vfsrd) = skipped() else { return };
    let r = Router::start(&vfsrd, "ttq");
    // Neighbors resolved first: the flood is forwarded from its first echo.
    assert!(r.ping(2), "h1 reaches s1 through vfsrd");

    let mut flood = r.flood(4000);
    let pane = Pane::start(r.vfsrd.socket(), "q", &[]);
    let (screen, rx) = pane.wait_screen("a non-zero rx rate on r1", Duration::from_secs(10), |s| {
        cell(s, "r1", "rx pps").filter(|&x| x > 0.0)
    });
    println!("{screen}");
    let head = screen.lines().next().unwrap_or("");
    assert!(
        head.starts_with("vfsrd up ") && head.contains("every 1.0 s") && head.ends_with("q: quit"),
        "header: {head}"
    );
    // The flood sends 500 echoes a second; r1 receives them, r2 sends them on.
    assert!(rx >= 100.0, "r1 rx pps {rx}:\n{screen}");
    let tx = cell(&screen, "r2", "tx pps").unwrap();
    assert!(tx >= 100.0, "r2 tx pps {tx}:\n{screen}");
    let w0 = cell(&screen, "0", "rx/s").unwrap();
    assert!(w0 >= 100.0, "worker 0 rx/s {w0}:\n{screen}");
    let bps = cell(&screen, "r1", "rx bps").unwrap();
    assert!(bps >= 100.0 * 98.0 * 8.0, "r1 rx bps {bps}:\n{screen}");
    for (first, col) in [("0", "busy%"), ("0", "fill"), ("r1", "drops/s")] {
        assert!(
            cell(&screen, first, col).is_some(),
            "{first} {col}:\n{screen}"
        );
    }
    for l in screen.lines() {
        assert!(l.trim_end().len() <= 80, "wider than 80 columns: {l}");
    }

    // q quits at once, with status 0, the terminal given back.
    pane.keys("q");
    let took = wait_until("top to end after q", Duration::from_secs(2), || {
        pane.dead().is_some()
    })
    .unwrap_or_else(|e| panic!("{e}; the pane shows:\n{}", pane.capture()));
    println!("top ended {} ms after q", took.as_millis());
    assert_eq!(pane.dead(), Some(0));
    pane.assert_restored();
    drop(pane);
    let _ = flood.kill();
    let _ = flood.wait();

    // A long interval: q (and Esc, Ctrl-C) does not wait for the first redraw.
    for (n, key) in ["q", "Escape", "C-c"].into_iter().enumerate() {
        let pane = Pane::start(
            r.vfsrd.socket(),
            &format!("slow{n}"),
            &["--interval", "5000"],
        );
        let (screen, ()) = pane.wait_screen("top's first screen", Duration::from_secs(5), |s| {
            s.contains("q: quit").then_some(())
        });
        assert!(screen.contains("first rates in 5.0 s"), "{screen}");
        let half = Duration::from_millis(500);
        std::thread::sleep(half.saturating_sub(pane.started.elapsed()));
        pane.keys(key);
        let took = wait_until(
            &format!("top to end after {key} with a 5 s interval"),
            Duration::from_millis(1500),
            || pane.dead().is_some(),
        )
        .unwrap_or_else(|e| panic!("{e}; the pane shows:\n{}", pane.capture()));
        println!(
            "top --interval 5000 ended {} ms after {key}",
            took.as_millis()
        );
        assert_eq!(pane.dead(), Some(0), "{key}");
        assert!(pane.started.elapsed() < Duration::from_secs(5));
        pane.assert_restored();
    }

    // --count on a terminal: top ends by itself and leaves its last screen on the normal
    // screen.
    let pane = Pane::start(
        r.vfsrd.socket(),
        "count",
        &["--interval", "300", "--count", "2"],
    );
    let (_, status) =
        pane.wait_screen("top to end after 2 screens", Duration::from_secs(5), |_| {
            pane.dead()
        });
    let screen = pane.capture_all();
    assert_eq!(status, 0, "{screen}");
    assert!(
        screen.contains("every 0.3 s") && cell(&screen, "r1", "rx pps").is_some(),
        "the last screen is not left on the terminal:\n{screen}"
    );
    let stty = std::fs::read_to_string(&pane.stty).unwrap();
    assert!(stty.split_whitespace().any(|f| f == "icanon"), "{stty}");
}

#[test]
fn top_restores_the_terminal_when_vfsrd_goes_away() {
    let _g = serial();
    let Some(vfsrd) = skipped() else { return };
    let mut r = Router::start(&vfsrd, "ttx");
    let pane = Pane::start(r.vfsrd.socket(), "gone", &["--interval", "300"]);
    pane.wait_screen("the tables", Duration::from_secs(5), |s| {
        (s.contains("worker") && s.contains("drops/s")).then_some(())
    });
    r.stop();
    let (_, status) = pane.wait_screen("top to end", Duration::from_secs(5), |_| pane.dead());
    let screen = pane.capture_all();
    println!("{screen}");
    assert_eq!(status, 3, "{screen}");
    assert!(screen.contains("vfsrctl: "), "no error shown:\n{screen}");
    assert!(
        screen.contains("vfsrd closed the connection") || screen.contains("talking to vfsrd"),
        "{screen}"
    );
    pane.assert_restored();
}
