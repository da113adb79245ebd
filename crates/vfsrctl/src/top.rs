//! `vfsrctl top`: rates now, not averages since start. Each screen asks vfsrd for its
//! workers (`show-workers`) and interfaces (`show-interfaces`) and shows the change since
//! the previous answers divided by the time between them:
//!
//! ```text
//! vfsrd up 2h03m17s   every 1.0 s   q: quit
//!
//! worker  core  busy%   rx/s  fill  limited/s
//!      0     1   37.5  1.20M  28.4          0
//!
//! port  state  rx pps  tx pps  rx bps  tx bps  drops/s
//! r1    up      1.20M    1.2k   1.02G   9.8M         0
//! r2    up        1.1k  1.20M   9.1M    1.02G        0
//! ```
//!
//! - per worker: the share of its core it was busy (thread CPU time over wall time), frames
//!   received per second, the mean number of frames per received batch (`fill`), and punts
//!   to the control plane refused by the rate limits per second (`limited/s`);
//! - per port: frames received and sent per second by vfsr, bits per second each way (from
//!   the kernel's byte counters of the interface), and frames vfsr dropped per second
//!   (receive and transmit together).
//!
//! Counters that went back (a `clear counters` in between) count as no change, never as a
//! negative rate. Rows are matched by position: the ports and workers are fixed while vfsrd
//! runs.
//!
//! Two ways to show it, chosen by what standard output is:
//!
//! - a terminal: a live view on the alternate screen, in raw mode, redrawn every
//!   `--interval` (one second by default; the first rates come one interval after the start,
//!   a header alone until then). `q`, `Esc` or `Ctrl-C` quit at once: keys are waited for
//!   with a timeout of the time left until the next redraw, so no key waits for a redraw. The
//!   terminal is given back as it was on every way out: a key, `--count` screens shown (the
//!   last screen is then printed again on the normal screen, so it stays), an error such as
//!   vfsrd going away (the error is printed after the terminal is restored), or a panic. A
//!   resize redraws the last screen; lines longer than the terminal is wide are cut.
//! - anything else (a pipe, a file): screens one after another, separated by `---` lines,
//!   no terminal control at all, for logs, scripts and tests (`--count N` to stop).

use std::fmt;
use std::io::{self, IsTerminal, Stdout, Write};
use std::time::{Duration, Instant};

use crossterm::cursor::{Hide, MoveTo, Show};
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::style::Print;
use crossterm::terminal::{self, Clear, ClearType, EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::{execute, queue};
use serde_json::Value;
use vfsr_api::{Client, ClientError, Request};

use crate::text::table;

/// Why `top` stopped early.
#[derive(Debug)]
pub enum Error {
    /// vfsrd refused, went away or could not be read.
    Api(ClientError),
    /// The terminal could not be put in raw mode, read or drawn on.
    Terminal(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Api(e) => e.fmt(f),
            Error::Terminal(e) => write!(f, "the terminal: {e}"),
        }
    }
}

impl From<ClientError> for Error {
    fn from(e: ClientError) -> Error {
        Error::Api(e)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Terminal(e)
    }
}

struct Sample {
    at: Instant,
    workers: Value,
    interfaces: Value,
}

fn take(client: &mut Client) -> Result<Sample, ClientError> {
    let workers = client.call(&Request::ShowWorkers)?;
    let interfaces = client.call(&Request::ShowInterfaces)?;
    Ok(Sample {
        at: Instant::now(),
        workers,
        interfaces,
    })
}

fn rows(v: &Value, key: &str) -> Vec<Value> {
    v.get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut x = v;
    for k in path {
        match x.get(k) {
            Some(n) => x = n,
            None => return 0.0,
        }
    }
    x.as_f64().unwrap_or(0.0)
}

/// Change per second of `path` between the matching rows of two samples.
fn rate(now: &Value, before: Option<&Value>, path: &[&str], secs: f64) -> f64 {
    let b = before.map_or(0.0, |b| num(b, path));
    ((num(now, path) - b).max(0.0)) / secs
}

/// Human units: 1.2M, 350k.
fn human(x: f64) -> String {
    if x >= 1e12 {
        format!("{:.2}T", x / 1e12)
    } else if x >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// A duration in seconds as `45s`, `12m05s`, `3h02m07s`, `4d01h13m`.
fn uptime(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d{h:02}h{m:02}m")
    } else if h > 0 {
        format!("{h}h{m:02}m{s:02}s")
    } else if m > 0 {
        format!("{m}m{s:02}s")
    } else {
        format!("{s}s")
    }
}

/// The first line of a screen: uptime, the time the rates are over, and on a terminal the
/// keys.
fn header(workers: &Value, every: &str, live: bool) -> String {
    let mut h = format!("vfsrd up {}   {every}", uptime(num(workers, &["uptime_s"])));
    if live {
        h.push_str("   q: quit");
    }
    h.push('\n');
    h
}

/// One screen from two samples.
fn screen(before: &Sample, now: &Sample, live: bool) -> String {
    let secs = now.at.duration_since(before.at).as_secs_f64().max(1e-3);
    let mut out = header(&now.workers, &format!("every {secs:.1} s"), live);
    out.push('\n');
    let old_w = rows(&before.workers, "workers");
    let w_rows: Vec<Vec<String>> = rows(&now.workers, "workers")
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let b = old_w.get(i);
            let rx = rate(w, b, &["rx"], secs);
            let batches = rate(w, b, &["batches"], secs);
            vec![
                i.to_string(),
                w.get("core").map_or("-".into(), |c| c.to_string()),
                format!("{:.1}", 100.0 * rate(w, b, &["cpu_s"], secs)),
                human(rx),
                format!("{:.1}", if batches > 0.0 { rx / batches } else { 0.0 }),
                human(rate(w, b, &["punts_limited"], secs)),
            ]
        })
        .collect();
    out.push_str(&table(
        &["worker", "core", "busy%", "rx/s", "fill", "limited/s"],
        &w_rows,
    ));
    out.push('\n');
    let old_i = rows(&before.interfaces, "interfaces");
    let i_rows: Vec<Vec<String>> = rows(&now.interfaces, "interfaces")
        .iter()
        .enumerate()
        .map(|(k, itf)| {
            let b = old_i.get(k);
            let drops = rate(itf, b, &["rx_dropped"], secs) + rate(itf, b, &["tx_dropped"], secs);
            vec![
                itf.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("-")
                    .to_string(),
                itf.get("state")
                    .and_then(Value::as_str)
                    .unwrap_or("-")
                    .to_string(),
                human(rate(itf, b, &["rx_packets"], secs)),
                human(rate(itf, b, &["tx_packets"], secs)),
                human(8.0 * rate(itf, b, &["kernel", "rx_bytes"], secs)),
                human(8.0 * rate(itf, b, &["kernel", "tx_bytes"], secs)),
                human(drops),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "port", "state", "rx pps", "tx pps", "rx bps", "tx bps", "drops/s",
        ],
        &i_rows,
    ));
    out
}

/// The screen shown on a terminal until the second sample gives the first rates.
fn first_screen(first: &Sample, interval: Duration) -> String {
    let mut out = header(
        &first.workers,
        &format!("first rates in {:.1} s", interval.as_secs_f64()),
        true,
    );
    let ports: Vec<String> = rows(&first.interfaces, "interfaces")
        .iter()
        .filter_map(|i| i.get("name").and_then(Value::as_str).map(String::from))
        .collect();
    out.push_str(&format!(
        "\n{} worker(s); ports {}\n",
        rows(&first.workers, "workers").len(),
        ports.join(", ")
    ));
    out
}

/// Shows screens every `interval_ms` until `q` (on a terminal) or `count` of them.
pub fn run(client: &mut Client, interval_ms: u64, count: Option<u64>) -> Result<(), Error> {
    let interval = Duration::from_millis(interval_ms);
    if io::stdout().is_terminal() {
        if let Some(last) = live(client, interval, count)? {
            // The terminal is restored: leave the last screen where the shell continues.
            let mut o = io::stdout().lock();
            write!(o, "{last}")?;
            o.flush()?;
        }
        Ok(())
    } else {
        piped(client, interval, count)
    }
}

/// Screens one after another, `---` between them.
fn piped(client: &mut Client, interval: Duration, count: Option<u64>) -> Result<(), Error> {
    let mut before = take(client)?;
    let mut shown = 0u64;
    while count.is_none_or(|c| shown < c) {
        std::thread::sleep(interval);
        let now = take(client)?;
        let text = screen(&before, &now, false);
        let mut o = io::stdout().lock();
        if shown > 0 {
            writeln!(o, "---")?;
        }
        write!(o, "{text}")?;
        o.flush()?;
        before = now;
        shown += 1;
    }
    Ok(())
}

/// What a key asks for.
fn quits(k: &KeyEvent) -> bool {
    k.kind != KeyEventKind::Release
        && match k.code {
            KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc => true,
            KeyCode::Char('c') => k.modifiers.contains(KeyModifiers::CONTROL),
            _ => false,
        }
}

/// The live view; the last screen when it ended after `count` screens.
fn live(
    client: &mut Client,
    interval: Duration,
    count: Option<u64>,
) -> Result<Option<String>, Error> {
    // Errors before the terminal is touched print as from any other command.
    let mut before = take(client)?;
    let mut term = Terminal::enter()?;
    let mut last = first_screen(&before, interval);
    term.draw(&last)?;
    let mut next = before.at + interval;
    let mut shown = 0u64;
    loop {
        let left = next.saturating_duration_since(Instant::now());
        if event::poll(left)? {
            match event::read()? {
                Event::Key(k) if quits(&k) => return Ok(None),
                Event::Resize(..) => term.draw(&last)?,
                _ => {}
            }
            continue;
        }
        let now = take(client)?;
        last = screen(&before, &now, true);
        term.draw(&last)?;
        shown += 1;
        if count.is_some_and(|c| shown >= c) {
            return Ok(Some(last));
        }
        before = now;
        // Keep the beat; after a stall (a slow answer) start it again from now.
        next += interval;
        let t = Instant::now();
        if next < t {
            next = t + interval;
        }
    }
}

/// The terminal in raw mode on the alternate screen, cursor hidden, until dropped.
struct Terminal {
    out: Stdout,
}

/// Gives the terminal back: normal screen, cursor shown, cooked mode. Safe to repeat.
fn restore() {
    let _ = execute!(io::stdout(), Show, LeaveAlternateScreen);
    let _ = terminal::disable_raw_mode();
}

impl Terminal {
    fn enter() -> io::Result<Terminal> {
        // A panic message printed on the alternate screen would vanish with it: restore
        // first, then report as usual.
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            report(info);
        }));
        terminal::enable_raw_mode()?;
        // From here on the guard restores whatever fails next.
        let mut t = Terminal { out: io::stdout() };
        execute!(t.out, EnterAlternateScreen, Hide, Clear(ClearType::All))?;
        Ok(t)
    }

    /// Draws `text` from the top left, each line cut to the width, rows past the height
    /// left out, the rest of the screen blank.
    fn draw(&mut self, text: &str) -> io::Result<()> {
        let (width, height) = terminal::size().unwrap_or((80, 24));
        let mut row = 0u16;
        for line in text.lines().take(usize::from(height)) {
            let cut: String = line.chars().take(usize::from(width)).collect();
            queue!(
                self.out,
                MoveTo(0, row),
                Clear(ClearType::CurrentLine),
                Print(cut)
            )?;
            row += 1;
        }
        if row < height {
            queue!(self.out, MoveTo(0, row), Clear(ClearType::FromCursorDown))?;
        }
        self.out.flush()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample;

    #[test]
    fn rates_are_differences_over_time() {
        let t0 = Instant::now();
        let a = Sample {
            at: t0,
            workers: sample(
                r#"{"uptime_s":10,"workers":[{"core":1,"rx":1000,"batches":10,"cpu_s":1.0}]}"#,
            ),
            interfaces: sample(
                r#"{"interfaces":[{"name":"eth1","state":"up","rx_packets":0,"tx_packets":0,"rx_dropped":5,"kernel":{"rx_bytes":0}}]}"#,
            ),
        };
        let b = Sample {
            at: t0 + Duration::from_secs(2),
            workers: sample(
                r#"{"uptime_s":3725,"workers":[{"core":1,"rx":3001000,"batches":100010,"cpu_s":2.0,"punts_limited":40}]}"#,
            ),
            interfaces: sample(
                r#"{"interfaces":[{"name":"eth1","state":"up","rx_packets":2000000,"tx_packets":4000,"rx_dropped":3005,"tx_dropped":1000,"kernel":{"rx_bytes":250000000}}]}"#,
            ),
        };
        for live in [false, true] {
            let s = screen(&a, &b, live);
            let lines: Vec<&str> = s.lines().collect();
            let head = if live {
                "vfsrd up 1h02m05s   every 2.0 s   q: quit"
            } else {
                "vfsrd up 1h02m05s   every 2.0 s"
            };
            assert_eq!(lines.first(), Some(&head), "{s}");
            let w = lines
                .iter()
                .find(|l| l.trim_start().starts_with("0 "))
                .unwrap();
            let cells: Vec<&str> = w.split_whitespace().collect();
            assert_eq!(cells, ["0", "1", "50.0", "1.50M", "30.0", "20"], "{s}");
            let p = lines.iter().find(|l| l.starts_with("eth1")).unwrap();
            let cells: Vec<&str> = p.split_whitespace().collect();
            // 3000 rx + 1000 tx drops over 2 s.
            assert_eq!(
                cells,
                ["eth1", "up", "1.00M", "2.0k", "1.00G", "0", "2.0k"],
                "{s}"
            );
            assert!(lines.iter().all(|l| l.len() <= 80), "{s}");
        }
    }

    #[test]
    fn screens_fit_in_80_columns_with_long_names_and_big_rates() {
        let t0 = Instant::now();
        let port = |rx: u64| {
            format!(
                r#"{{"name":"enp129s0f1np1v7","state":"down","rx_packets":{rx},"tx_packets":{rx},
                "rx_dropped":{rx},"tx_dropped":{rx},"kernel":{{"rx_bytes":{b},"tx_bytes":{b}}}}}"#,
                b = rx * 10
            )
        };
        let a = Sample {
            at: t0,
            workers: sample(r#"{"workers":[{"core":63,"rx":0}]}"#),
            interfaces: sample(&format!(r#"{{"interfaces":[{}]}}"#, port(0))),
        };
        let b = Sample {
            at: t0 + Duration::from_secs(1),
            workers: sample(
                r#"{"uptime_s":9000000,"workers":[{"core":63,"rx":999000000000,"batches":1,"cpu_s":1.0,"punts_limited":999000000000}]}"#,
            ),
            interfaces: sample(&format!(r#"{{"interfaces":[{}]}}"#, port(99_900_000_000))),
        };
        let s = screen(&a, &b, true);
        assert!(s.starts_with("vfsrd up 104d04h00m "), "{s}");
        assert!(s.contains("999.00G") && s.contains("7.99T"), "{s}");
        for l in s.lines() {
            assert!(l.len() <= 80, "{} columns: {l}", l.len());
        }
    }

    #[test]
    fn counters_going_back_do_not_give_negative_rates() {
        let v = sample(r#"{"rx":5}"#);
        let old = sample(r#"{"rx":50}"#);
        assert_eq!(rate(&v, Some(&old), &["rx"], 1.0), 0.0);
    }

    #[test]
    fn uptimes_read_at_a_glance() {
        assert_eq!(uptime(0.4), "0s");
        assert_eq!(uptime(59.9), "59s");
        assert_eq!(uptime(725.0), "12m05s");
        assert_eq!(uptime(3.0 * 3600.0 + 127.0), "3h02m07s");
        assert_eq!(uptime(4.0 * 86_400.0 + 3600.0 + 13.0 * 60.0), "4d01h13m");
    }

    #[test]
    fn q_esc_and_ctrl_c_quit_other_keys_do_not() {
        let key = |code, modifiers| KeyEvent::new(code, modifiers);
        assert!(quits(&key(KeyCode::Char('q'), KeyModifiers::NONE)));
        assert!(quits(&key(KeyCode::Esc, KeyModifiers::NONE)));
        assert!(quits(&key(KeyCode::Char('c'), KeyModifiers::CONTROL)));
        assert!(!quits(&key(KeyCode::Char('c'), KeyModifiers::NONE)));
        assert!(!quits(&key(KeyCode::Char(' '), KeyModifiers::NONE)));
        assert!(!quits(&key(KeyCode::Enter, KeyModifiers::NONE)));
    }

    #[test]
    fn the_first_screen_names_the_wait_and_the_parts() {
        let s = Sample {
            at: Instant::now(),
            workers: sample(r#"{"uptime_s":75,"workers":[{"core":1},{"core":2}]}"#),
            interfaces: sample(r#"{"interfaces":[{"name":"r1"},{"name":"r2"}]}"#),
        };
        let t = first_screen(&s, Duration::from_millis(5000));
        assert_eq!(
            t,
            "vfsrd up 1m15s   first rates in 5.0 s   q: quit\n\n2 worker(s); ports r1, r2\n"
        );
    }
}
