//! `vfsrctl top`: rates now, not averages since start. Each screen asks vfsrd for its
//! workers and interfaces and shows the change since the previous screen divided by the time
//! between them: per worker the busy share of its core, packets per second and batch fill;
//! per port packets per second each way, bits per second (from the kernel's byte counters)
//! and drops per second. On a terminal each screen replaces the last; otherwise screens are
//! printed one after another (for logs and tests).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use serde_json::Value;
use vfsr_api::{Client, ClientError, Request};

use crate::text::table;

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
    if x >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// One screen from two samples.
fn screen(before: &Sample, now: &Sample) -> String {
    let secs = now.at.duration_since(before.at).as_secs_f64().max(1e-3);
    let mut out = String::new();
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
    out.push_str(&format!(
        "vfsrd: up {:.0} s, every {:.1} s\n\n",
        num(&now.workers, &["uptime_s"]),
        secs
    ));
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

/// Shows screens every `interval_ms` until interrupted, or `count` of them.
pub fn run(client: &mut Client, interval_ms: u64, count: Option<u64>) -> Result<(), ClientError> {
    let tty = std::io::stdout().is_terminal();
    let mut before = take(client)?;
    let mut shown = 0u64;
    while count.is_none_or(|c| shown < c) {
        std::thread::sleep(Duration::from_millis(interval_ms));
        let now = take(client)?;
        let text = screen(&before, &now);
        let mut o = std::io::stdout().lock();
        if tty {
            let _ = write!(o, "\x1b[H\x1b[2J");
        } else if shown > 0 {
            let _ = writeln!(o, "---");
        }
        let _ = write!(o, "{text}");
        let _ = o.flush();
        before = now;
        shown += 1;
    }
    Ok(())
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
                r#"{"interfaces":[{"name":"eth1","state":"up","rx_packets":0,"tx_packets":0,"kernel":{"rx_bytes":0}}]}"#,
            ),
        };
        let b = Sample {
            at: t0 + Duration::from_secs(2),
            workers: sample(
                r#"{"uptime_s":12,"workers":[{"core":1,"rx":3001000,"batches":100010,"cpu_s":2.0}]}"#,
            ),
            interfaces: sample(
                r#"{"interfaces":[{"name":"eth1","state":"up","rx_packets":2000000,"tx_packets":4000,"kernel":{"rx_bytes":250000000}}]}"#,
            ),
        };
        let s = screen(&a, &b);
        let lines: Vec<&str> = s.lines().collect();
        let w = lines
            .iter()
            .find(|l| l.trim_start().starts_with("0 "))
            .unwrap();
        let cells: Vec<&str> = w.split_whitespace().collect();
        assert_eq!(cells, ["0", "1", "50.0", "1.50M", "30.0", "0"], "{s}");
        let p = lines.iter().find(|l| l.starts_with("eth1")).unwrap();
        let cells: Vec<&str> = p.split_whitespace().collect();
        assert_eq!(
            cells,
            ["eth1", "up", "1.00M", "2.0k", "1.00G", "0", "0"],
            "{s}"
        );
    }

    #[test]
    fn counters_going_back_do_not_give_negative_rates() {
        let v = sample(r#"{"rx":5}"#);
        let old = sample(r#"{"rx":50}"#);
        assert_eq!(rate(&v, Some(&old), &["rx"], 1.0), 0.0);
    }
}
