//! The API's answers as text: `ip`-like lines for routes and neighbors, aligned tables for
//! the per-worker views, indented `key: value` for the rest. Fields an answer lacks print as
//! `-`, so an older or newer vfsrd still gives readable output.

use std::fmt::Write;

use serde_json::Value;
use vfsr_api::Request;

/// A field as text (`-` when absent or null).
fn s(v: &Value, key: &str) -> String {
    match v.get(key) {
        None | Some(Value::Null) => "-".into(),
        Some(Value::String(x)) => x.clone(),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(f) if n.is_f64() => format!("{f:.2}"),
            _ => n.to_string(),
        },
        Some(other) => other.to_string(),
    }
}

fn u(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn f(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Columns aligned to their widest cell; numbers right-aligned.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let is_number = |c: &str| c.parse::<f64>().is_ok();
    // A column is numeric when every cell that says something is a number.
    let numeric: Vec<bool> = (0..headers.len())
        .map(|k| {
            let mut cells = rows
                .iter()
                .filter_map(|r| r.get(k))
                .filter(|c| !c.is_empty() && c.as_str() != "-")
                .peekable();
            cells.peek().is_some() && cells.all(|c| is_number(c))
        })
        .collect();
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &String>| {
        let mut l = String::new();
        for (k, c) in cells.enumerate() {
            let w = width.get(k).copied().unwrap_or(0);
            let pad = " ".repeat(w.saturating_sub(c.chars().count()));
            if numeric.get(k).copied().unwrap_or(false) {
                let _ = write!(l, "{pad}{c}  ");
            } else {
                let _ = write!(l, "{c}{pad}  ");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    let heads: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    line(&mut heads.iter());
    for r in rows {
        line(&mut r.iter());
    }
    out
}

/// Any JSON as indented `key: value` lines.
pub fn tree(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match x {
                    Value::Object(_) => {
                        let _ = writeln!(out, "{pad}{k}:");
                        tree(x, indent + 2, out);
                    }
                    Value::Array(a) if a.iter().any(|e| e.is_object()) => {
                        let _ = writeln!(out, "{pad}{k}:");
                        for e in a {
                            let _ = writeln!(out, "{pad}  -");
                            tree(e, indent + 4, out);
                        }
                    }
                    _ => {
                        let _ = writeln!(out, "{pad}{k}: {}", scalar(x));
                    }
                }
            }
        }
        other => {
            let _ = writeln!(out, "{pad}{}", scalar(other));
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(x) => x.clone(),
        Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

fn truncation(v: &Value, out: &mut String) {
    if v.get("truncated").and_then(Value::as_bool) == Some(true) {
        let _ = writeln!(
            out,
            "# {} of {} listed (narrow with a prefix, or use --json with a prefix)",
            list(v, "routes").len(),
            u(v, "total")
        );
    }
}

fn interfaces(v: &Value, out: &mut String) {
    for i in list(v, "interfaces") {
        let _ = writeln!(
            out,
            "{}: {}: <{}> mtu {} backend {} queues {}{}",
            s(i, "index"),
            s(i, "name"),
            s(i, "state").to_uppercase(),
            s(i, "mtu"),
            s(i, "backend"),
            list(i, "queues").len(),
            match i.get("tap").and_then(Value::as_str) {
                Some(t) => format!(" tap {t}"),
                None => String::new(),
            }
        );
        let _ = writeln!(out, "    link/ether {}", s(i, "mac"));
        for a in list(i, "addresses") {
            let a = a.as_str().unwrap_or("-");
            let fam = if a.contains(':') { "inet6" } else { "inet" };
            let _ = writeln!(out, "    {fam} {a}");
        }
        let _ = writeln!(
            out,
            "    vfsr    RX: packets {} dropped {}   TX: packets {} dropped {}",
            u(i, "rx_packets"),
            u(i, "rx_dropped"),
            u(i, "tx_packets"),
            u(i, "tx_dropped")
        );
        if let Some(k) = i.get("kernel") {
            let _ = writeln!(
                out,
                "    kernel  RX: packets {} bytes {} dropped {}   TX: packets {} bytes {} dropped {}",
                u(k, "rx_packets"),
                u(k, "rx_bytes"),
                u(k, "rx_dropped"),
                u(k, "tx_packets"),
                u(k, "tx_bytes"),
                u(k, "tx_dropped")
            );
        }
    }
}

fn routes(v: &Value, out: &mut String) {
    for r in list(v, "routes") {
        let _ = writeln!(
            out,
            "{} {} proto {}",
            s(r, "prefix"),
            s(r, "forward"),
            s(r, "source")
        );
    }
    truncation(v, out);
}

fn route_get(v: &Value, out: &mut String) {
    if v.get("prefix").is_none() {
        let _ = writeln!(out, "{}: {}", s(v, "address"), s(v, "reason"));
        return;
    }
    let _ = writeln!(
        out,
        "{} {} proto {} prefix {}",
        s(v, "address"),
        s(v, "forward"),
        s(v, "source"),
        s(v, "prefix")
    );
    for h in list(v, "nexthops") {
        let n = h.get("neighbor").cloned().unwrap_or(Value::Null);
        let neigh = if n.is_null() {
            String::new()
        } else {
            format!(
                " neighbor {} lladdr {} {}",
                s(&n, "address"),
                s(&n, "mac"),
                s(&n, "state")
            )
        };
        let _ = writeln!(
            out,
            "    nexthop {} weight {}{neigh}",
            s(h, "forward"),
            s(h, "weight")
        );
    }
}

fn rib(v: &Value, out: &mut String) {
    let mut last = String::new();
    for r in list(v, "routes") {
        let p = s(r, "prefix");
        if p != last {
            let _ = writeln!(out, "{p}");
            last = p;
        }
        let mark = if r.get("best").and_then(Value::as_bool) == Some(true) {
            '*'
        } else {
            ' '
        };
        let mut flags = String::new();
        if r.get("unresolved").and_then(Value::as_bool) == Some(true) {
            flags.push_str(" unresolved");
        }
        if r.get("stale").and_then(Value::as_bool) == Some(true) {
            flags.push_str(" stale");
        }
        let resolved = match r.get("resolved").and_then(Value::as_str) {
            Some(x) if x != s(r, "nexthop") => format!(" ({x})"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  {mark} {:<9} [{}/{}] weight {} {}{resolved}{flags}",
            s(r, "source"),
            s(r, "distance"),
            s(r, "metric"),
            s(r, "weight"),
            s(r, "nexthop")
        );
    }
    truncation(v, out);
    if let Some(by) = v.get("by_source") {
        let mut parts = Vec::new();
        for fam in ["v4", "v6"] {
            if let Some(m) = by.get(fam).and_then(Value::as_object) {
                let counts: Vec<String> = m
                    .iter()
                    .filter(|(_, n)| n.as_u64().unwrap_or(0) > 0)
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                parts.push(format!(
                    "{fam}: {}",
                    if counts.is_empty() {
                        "none".into()
                    } else {
                        counts.join(", ")
                    }
                ));
            }
        }
        let _ = writeln!(
            out,
            "# routes by source: {}; {} unresolved",
            parts.join("; "),
            u(v, "unresolved")
        );
    }
}

fn neighbors(v: &Value, out: &mut String) {
    for n in list(v, "neighbors") {
        let mac = match n.get("mac").and_then(Value::as_str) {
            Some(m) => format!(" lladdr {m}"),
            None => String::new(),
        };
        let held = u(n, "held");
        let _ = writeln!(
            out,
            "{} dev {}{mac} {}{}",
            s(n, "address"),
            s(n, "port"),
            s(n, "state"),
            if held > 0 {
                format!(" ({held} held)")
            } else {
                String::new()
            }
        );
    }
}

fn nexthops(v: &Value, out: &mut String) {
    let rows: Vec<Vec<String>> = list(v, "nexthops")
        .iter()
        .map(|n| {
            vec![
                s(n, "index"),
                s(n, "generation"),
                s(n, "version"),
                s(n, "references"),
                if n.get("active").and_then(Value::as_bool) == Some(true) {
                    "yes".into()
                } else {
                    "no".into()
                },
                s(n, "forward"),
            ]
        })
        .collect();
    out.push_str(&table(
        &["index", "gen", "version", "refs", "active", "forwards"],
        &rows,
    ));
    let _ = writeln!(
        out,
        "# {} live, {} quarantined, at most {}",
        u(v, "live"),
        u(v, "quarantined"),
        u(v, "max")
    );
}

fn flows(v: &Value, out: &mut String) {
    let rows: Vec<Vec<String>> = list(v, "workers")
        .iter()
        .map(|w| {
            vec![
                s(w, "worker"),
                s(w, "entries"),
                s(w, "capacity"),
                format!("{:.1}", 100.0 * f(w, "hit_rate")),
                s(w, "hits"),
                s(w, "misses"),
                s(w, "inserts"),
                s(w, "evictions"),
                s(w, "refusals"),
                s(w, "expirations"),
                s(w, "ecmp_kept"),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "worker",
            "entries",
            "capacity",
            "hit%",
            "hits",
            "misses",
            "inserts",
            "evicted",
            "refused",
            "expired",
            "ecmp_kept",
        ],
        &rows,
    ));
    let _ = writeln!(
        out,
        "# idle timeout {} ms; entries used within {} ms are not evicted",
        s(v, "idle_timeout_ms"),
        s(v, "protect_ms")
    );
}

fn workers(v: &Value, out: &mut String) {
    let rows: Vec<Vec<String>> = list(v, "workers")
        .iter()
        .map(|w| {
            vec![
                s(w, "worker"),
                s(w, "core"),
                format!("{:.1}", 100.0 * f(w, "busy")),
                s(w, "rx"),
                format!("{:.0}", f(w, "pps")),
                s(w, "batches"),
                format!("{:.1}", f(w, "batch_fill")),
                s(w, "batch_size"),
                s(w, "sleeps"),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "worker", "core", "busy%", "rx", "pps", "batches", "fill", "batch", "sleeps",
        ],
        &rows,
    ));
    let _ = writeln!(
        out,
        "# averages over {:.0} s of uptime (vfsrctl top shows rates now)",
        f(v, "uptime_s")
    );
}

fn counters(v: &Value, out: &mut String) {
    for w in list(v, "workers") {
        let _ = writeln!(out, "worker {}:", s(w, "worker"));
        if let Some(c) = w.get("counters") {
            tree(c, 2, out);
        }
    }
    for p in list(v, "ports") {
        let _ = writeln!(out, "port {}:", s(p, "port"));
        if let Some(c) = p.get("counters") {
            tree(c, 2, out);
        }
    }
    if let Some(c) = v.get("control") {
        let _ = writeln!(out, "control:");
        tree(c, 2, out);
    }
}

fn reload(v: &Value, out: &mut String) {
    let applied = list(v, "applied");
    if applied.is_empty() {
        let _ = writeln!(out, "{}: nothing to apply", s(v, "file"));
    } else {
        let _ = writeln!(out, "{}: applied:", s(v, "file"));
        for a in applied {
            let _ = writeln!(out, "  {}", scalar(a));
        }
    }
    let restart = list(v, "restart_needed");
    if !restart.is_empty() {
        let names: Vec<String> = restart.iter().map(scalar).collect();
        let _ = writeln!(
            out,
            "changed, kept until vfsrd restarts: {}",
            names.join(", ")
        );
    }
}

/// The text for `req`'s answer `v`.
pub fn render(req: &Request, v: &Value) -> String {
    let mut out = String::new();
    match req {
        Request::ShowInterfaces => interfaces(v, &mut out),
        Request::ShowRoute { .. } => routes(v, &mut out),
        Request::RouteGet { .. } => route_get(v, &mut out),
        Request::ShowRib { .. } => rib(v, &mut out),
        Request::ShowNeighbors { .. } => neighbors(v, &mut out),
        Request::ShowNexthops => nexthops(v, &mut out),
        Request::ShowFlows => flows(v, &mut out),
        Request::ShowWorkers => workers(v, &mut out),
        Request::ShowCounters { .. } => counters(v, &mut out),
        Request::ShowSources | Request::ShowFastPath => tree(v, 0, &mut out),
        Request::ClearCounters => out.push_str("counters cleared\n"),
        Request::RouteAdd { .. } => {
            let _ = writeln!(
                out,
                "{}: {} route(s) added{}",
                s(v, "prefix"),
                u(v, "routes"),
                match u(v, "unresolved") {
                    0 => String::new(),
                    n => format!(", {n} unresolved (no connected subnet holds the gateway)"),
                }
            );
        }
        Request::RouteDel { .. } => {
            let _ = writeln!(
                out,
                "{}: {} route(s) withdrawn",
                s(v, "prefix"),
                u(v, "withdrawn")
            );
        }
        Request::NeighborFlush { .. } => {
            let _ = writeln!(out, "{} neighbor(s) flushed", u(v, "flushed"));
        }
        Request::Reload => reload(v, &mut out),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample;

    #[test]
    fn tables_align_and_numbers_go_right() {
        let t = table(
            &["name", "n"],
            &[
                vec!["a".into(), "5".into()],
                vec!["long".into(), "123".into()],
            ],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines, ["name    n", "a       5", "long  123"]);
    }

    #[test]
    fn flows_show_refusals_and_the_protection_window() {
        let v = sample(
            r#"{"workers":[{"worker":0,"entries":7,"capacity":8,"hit_rate":0.5,"hits":4,
              "misses":4,"inserts":7,"evictions":1,"refusals":3,"expirations":2,"ecmp_kept":0}],
              "idle_timeout_ms":30000,"protect_ms":1000}"#,
        );
        let t = render(&Request::ShowFlows, &v);
        let lines: Vec<&str> = t.lines().collect();
        let head: Vec<&str> = lines[0].split_whitespace().collect();
        let row: Vec<&str> = lines[1].split_whitespace().collect();
        let col = |name: &str| row[head.iter().position(|h| *h == name).unwrap()];
        assert_eq!(
            (col("evicted"), col("refused"), col("expired")),
            ("1", "3", "2")
        );
        assert!(
            t.contains("idle timeout 30000 ms; entries used within 1000 ms are not evicted"),
            "{t}"
        );
    }

    #[test]
    fn routes_print_like_ip() {
        let v = sample(
            r#"{"routes":[{"prefix":"10.0.0.0/8","forward":"via 10.1.0.2 dev eth1","source":"fpm","index":3}],"total":5,"truncated":true}"#,
        );
        let t = render(
            &Request::ShowRoute {
                prefix: None,
                source: None,
            },
            &v,
        );
        assert!(
            t.starts_with("10.0.0.0/8 via 10.1.0.2 dev eth1 proto fpm\n"),
            "{t}"
        );
        assert!(t.contains("# 1 of 5 listed"), "{t}");
    }

    #[test]
    fn rib_marks_the_best_and_groups_by_prefix() {
        let v = sample(
            r#"{"routes":[
              {"prefix":"10.0.0.0/8","source":"static","distance":1,"metric":0,"weight":1,"nexthop":"via 10.1.0.2","resolved":"via 10.1.0.2 dev eth1","best":true,"unresolved":false,"stale":false},
              {"prefix":"10.0.0.0/8","source":"fpm","distance":20,"metric":0,"weight":1,"nexthop":"via 10.9.0.9","resolved":null,"best":false,"unresolved":true,"stale":true}],
              "total":2,"truncated":false,"by_source":{"v4":{"static":1,"fpm":1},"v6":{}},"unresolved":1}"#,
        );
        let t = render(&Request::ShowRib { prefix: None }, &v);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.first(), Some(&"10.0.0.0/8"));
        assert!(lines[1].starts_with("  * static"), "{t}");
        assert!(lines[1].contains("(via 10.1.0.2 dev eth1)"), "{t}");
        assert!(lines[2].starts_with("    fpm"), "{t}");
        assert!(lines[2].ends_with("unresolved stale"), "{t}");
        assert!(
            t.contains("v4: fpm 1, static 1; v6: none; 1 unresolved"),
            "{t}"
        );
    }

    #[test]
    fn missing_fields_print_as_dashes() {
        let t = render(
            &Request::ShowNeighbors { port: None },
            &sample(r#"{"neighbors":[{}]}"#),
        );
        assert_eq!(t, "- dev - -\n");
        let t = render(&Request::ShowWorkers, &sample("{}"));
        assert!(t.starts_with("worker"), "{t}");
    }

    #[test]
    fn reload_names_what_waits_for_a_restart() {
        let v = sample(
            r#"{"file":"/etc/vfsr.toml","applied":["route: 1 added, 0 changed, 0 withdrawn"],"restart_needed":["router.batch"]}"#,
        );
        let t = render(&Request::Reload, &v);
        assert!(t.contains("applied:\n  route: 1 added"), "{t}");
        assert!(t.contains("kept until vfsrd restarts: router.batch"), "{t}");
    }
}
