//! The figures: which benchmark JSON each one reads, and how its fields become a chart.
//!
//! | figure | kind (file) | fields read |
//! | --- | --- | --- |
//! | `lpm-rate` | `lpm-*.json` | `results[]`: backend, variant, traffic, mlps {median, min, max} |
//! | `lctrie-sweep` | `lpm-*.json` | `lctrie_sweep[]`: threshold, root_threshold, mlps(_min/_max), bytes |
//! | `fwd-workers` | `fwd-*.json` | `results[]`: design, family, flows, workers, total_mpps |
//! | `fib-reader` | `fib-*.json` | `reader[]`: achieved_updates_per_s, lookups_per_s, idle_lookups_per_s, max_delay_us |
//! | `veth-pps` | `veth-*.json` | `results[]`: router, pps_per_core, forwarded_pps |
//! | `veth-latency` | `veth-*.json` | `results[].latency_us`: ping_idle, ping_flood, tcp_rr_idle, tcp_rr_flood |
//! | `cpflood-latency` | `cpflood-*.json` | `summary[]`: label (or mode), tcp_rr_us and ping_us {p50, p99}, announce_to_fib_ms {p50, max}, flood; config, targets; without `summary`, records (below): numbers in `_us` / `_ms`, and `_per_s` |
//! | `fpm-intake` | `fpm-*.json` | `results[]`: mode, routes_per_s and tail_s {median, min, max} |
//! | `cp-convergence` | `cp-*.json` | `results[]`: path, routes, load.stages and withdrawal.stages {NAME: {first_s, all_s}} (when no stage completed: converge_s, withdraw_s), routes_per_s, withdraw_routes_per_s, problems; intake {routes_per_s, bytes_per_route}, kernel_bytes_per_route, targets; without `path`s, records (below): numbers in `_s`, and `_per_s`; time series |
//!
//! `vfsr cp bench` and `vfsr cp flood` are read generically, by key suffix: their records are
//! the objects of the document's `results` array (else `runs`, `paths`, `cases`, `modes`, else
//! its first array of objects), each named by its `path`, `mode`, `setup`, `case`, `name`,
//! `router`, `separation` or `design` string; nested objects are walked (`latency_us.ping_idle`),
//! and `{median, min, max}` objects become a bar with whiskers. An array of `[t, n]` pairs, or
//! of objects with a time (`t`, `t_s`, `time_s`, `at_s`, `seconds`) and one other number, is
//! drawn as a line over time.

use super::json::{self, Node};
use super::svg::{
    Axis, Bar, Bars, Canvas, Chart, LegendItem, Lines, Point, RefLine, RightAxis, Scale, Series,
    XAxis,
};
use serde_json::Value;

/// A kind of benchmark JSON, named by the file's prefix (`lpm-2026-11-22.json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Lpm,
    Fib,
    Fwd,
    Veth,
    Fpm,
    Cp,
    Cpflood,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::Lpm,
        Kind::Fib,
        Kind::Fwd,
        Kind::Veth,
        Kind::Fpm,
        Kind::Cp,
        Kind::Cpflood,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Lpm => "lpm",
            Kind::Fib => "fib",
            Kind::Fwd => "fwd",
            Kind::Veth => "veth",
            Kind::Fpm => "fpm",
            Kind::Cp => "cp",
            Kind::Cpflood => "cpflood",
        }
    }

    pub fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The `vfsr` arguments that run this benchmark (before `--json FILE`).
    pub fn args(self) -> &'static [&'static str] {
        match self {
            Kind::Lpm => &["lpm", "bench"],
            Kind::Fib => &["fib", "bench"],
            Kind::Fwd => &["fwd", "bench"],
            Kind::Veth => &["fwd", "bench", "--veth"],
            Kind::Fpm => &["fpm", "bench"],
            Kind::Cp => &["cp", "bench"],
            Kind::Cpflood => &["cp", "flood"],
        }
    }

    /// The command line that writes this kind's JSON into `dir`.
    pub fn command(self, dir: &str) -> String {
        format!(
            "vfsr {} --json {dir}/{}-YYYY-MM-DD.json",
            self.args().join(" "),
            self.name()
        )
    }
}

/// How a figure is made from its kind's document.
pub type Build = fn(&Value) -> Result<Built, Problem>;

/// Why a figure could not be drawn.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The run has no data for it (not an error of the file).
    #[error("{0}")]
    Absent(String),
    /// The file lacks or garbles what the figure reads (the message names the field).
    #[error("{0}")]
    Malformed(String),
    /// A field the figure reads is missing or of another kind.
    #[error(transparent)]
    Shape(#[from] json::ShapeError),
}

impl From<String> for Problem {
    fn from(s: String) -> Problem {
        Problem::Malformed(s)
    }
}

impl From<&str> for Problem {
    fn from(s: &str) -> Problem {
        Problem::Malformed(s.to_string())
    }
}

/// A chart and what the caption adds about this run (table, settings).
pub struct Built {
    pub canvas: Canvas,
    pub detail: String,
}

/// One figure of the page.
pub struct FigureSpec {
    pub id: &'static str,
    pub kind: Kind,
    pub title: &'static str,
    /// What the plot shows (the caption's first sentence).
    pub about: &'static str,
    pub build: Build,
}

/// A group of figures reproducing one paper's experiment.
pub struct Section {
    pub id: &'static str,
    pub title: &'static str,
    pub seed: &'static str,
    pub figures: &'static [FigureSpec],
}

pub const SECTIONS: &[Section] = &[
    Section {
        id: "poptrie",
        title: "Lookup rate per engine and peer",
        seed: "Poptrie (Asai, “Networking Operating System from Scratch”, 2015): lookup rate of each algorithm on a tier-1 full table, random traffic, one core.",
        figures: &[FigureSpec {
            id: "lpm-rate",
            kind: Kind::Lpm,
            title: "Lookup rate per engine and peer, one core",
            about: "Median million lookups per second over the timed passes (whiskers: slowest and fastest pass), bulk lookups on one pinned core. uniform4: random IPv4 addresses; matched4 and matched6: addresses inside the table's prefixes. Every contender is built from the same table and its answers checked against the first contender's.",
            build: lpm_rate,
        }],
    },
    Section {
        id: "lctrie",
        title: "LC-trie fill-factor sweep",
        seed: "Linux's fib_trie (Asama, “Linux NAPI & MultiQueue + routing table”, Internet Week 2014): a level- and path-compressed trie whose nodes inflate while they are full enough.",
        figures: &[FigureSpec {
            id: "lctrie-sweep",
            kind: Kind::Lpm,
            title: "LC-trie: lookup rate and memory against the inflate threshold (IPv4)",
            about: "Lookup rate on uniform4 traffic (left axis, whiskers: slowest and fastest pass) and memory of the built trie (right axis, dashed) for each inflate threshold, from 0 (inflate as far as the guard allows) to never (a Patricia trie). 50 is the kernel's default, with 30 at the root.",
            build: lctrie_sweep,
        }],
    },
    Section {
        id: "split",
        title: "Forwarding rate against workers: legacy, split, split + flow table",
        seed: "FreeBSD's split L2/L3 routing and flowtable (Li & Macy, 2009), Figures 7 and 9: throughput against sending threads for the legacy unified design, the split design and split with the flow table.",
        figures: &[FigureSpec {
            id: "fwd-workers",
            kind: Kind::Fwd,
            title: "Forwarding rate against workers",
            about: "Total million 64-byte frames per second forwarded in memory by 1 and 2 pinned workers: legacy (the unified design, a radix tree under locks), split (Poptrie and per-port ARP/ND tables) and split + flow (with the per-worker flow table). One panel per family and number of flows, on one y scale.",
            build: fwd_workers,
        }],
    },
    Section {
        id: "livefib",
        title: "Route updates against the reader",
        seed: "Poptrie's incremental update while lookups go on, and the FreeBSD paper's point that forwarding must not wait for the control plane.",
        figures: &[FigureSpec {
            id: "fib-reader",
            kind: Kind::Fib,
            title: "Reader lookup rate while route updates stream",
            about: "A reader thread's lookup rate (matched IPv4 traffic, batches of 256) while the writer on another core streams next-hop changes at the rate on the x axis (as achieved); one line per publication bound. The dashed line is the reader's mean rate in the idle phases around them.",
            build: fib_reader,
        }],
    },
    Section {
        id: "veth",
        title: "Packets per second per core over veth",
        seed: "Asama's Linux measurement (Internet Week 2014): about 1 Mpps per core for the kernel's forwarding with a real router tester.",
        figures: &[FigureSpec {
            id: "veth-pps",
            kind: Kind::Veth,
            title: "Forwarding over veth, one router core",
            about: "Forwarded million 64-byte UDP frames per second (random table destinations), and the same per core the router kept busy: vfsrd with its XDP fast path (vfsr-fast) and without (vfsr), the Linux kernel's forwarding, and an XDP forwarder using bpf_fib_lookup, each on the same core.",
            build: veth_pps,
        }],
    },
    Section {
        id: "separation",
        title: "Control-plane latency, idle and under flood",
        seed: "Olsson & Hagsand, “Control and forwarding plane separation on an open-source router” (2010): control transactions' latency with and without bulk traffic, the control plane kept on core 0.",
        figures: &[
            FigureSpec {
                id: "veth-latency",
                kind: Kind::Veth,
                title: "Round-trip times, idle and under the forwarding flood",
                about: "Ping through the router to the sink and a TCP request/response to the router itself (for vfsrd through its control plane and TAP), with the path idle and under the flood of the figure above.",
                build: veth_latency,
            },
            FigureSpec {
                id: "cpflood-latency",
                kind: Kind::Cpflood,
                title: "The control plane under a forwarding flood",
                about: "From vfsr cp flood, in-line control traffic on the flooded port: latency to the router (TCP request/response through the host stack, ping answered by the control plane; p50 and p99) and the time from a BGP announcement to vfsr's FIB, per phase: idle, flood with the control plane separated, and flood with the separation undone as each label says. A phase with no answers has no bar. The caption gives the run's targets.",
                build: cpflood_latency,
            },
        ],
    },
    Section {
        id: "convergence",
        title: "BGP convergence",
        seed: "The routing daemons run beside the forwarding plane, on the control core (Olsson & Hagsand); how fast a full table reaches the FIB.",
        figures: &[
            FigureSpec {
                id: "fpm-intake",
                kind: Kind::Fpm,
                title: "Full-table intake from zebra over FPM",
                about: "Routes per second vfsrd takes in from a recorded zebra FPM stream of the whole table, and the time from zebra's last byte to the last route published; median of the passes, whiskers: min and max. routes: gateways in each route; nhg: next-hop objects first.",
                build: fpm_intake,
            },
            FigureSpec {
                id: "cp-convergence",
                kind: Kind::Cp,
                title: "Full-table BGP convergence",
                about: "From vfsr cp bench, a whole table from a BGP speaker through FRR: for each path (into vfsr over FPM, into the Linux kernel, the kernel's table mirrored into vfsr), the time from the session's Established until each stage holds the whole table, from the withdrawal until each is empty, and the routes per second of both. The caption gives memory per route, the intake replay and the run's targets.",
                build: cp_convergence,
            },
        ],
    },
];

fn table_source(doc: &Value) -> Option<String> {
    let t = doc.get("table")?;
    let s = t
        .as_str()
        .or_else(|| t.get("source").and_then(Value::as_str))?;
    Some(format!("table: {s}"))
}

fn family_name(f: &str) -> String {
    match f {
        "v4" => "IPv4".into(),
        "v6" => "IPv6".into(),
        o => o.into(),
    }
}

/// 1000000 → "1,000,000".
fn thousands(n: f64) -> String {
    let s = format!("{}", n.round() as i64);
    let (sign, digits) = s.strip_prefix('-').map_or(("", s.as_str()), |d| ("-", d));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

/// Index of `name` in `v`, appended when new.
fn slot(v: &mut Vec<String>, name: &str) -> usize {
    match v.iter().position(|x| x == name) {
        Some(i) => i,
        None => {
            v.push(name.to_string());
            v.len() - 1
        }
    }
}

fn set(values: &mut Vec<Vec<Option<Bar>>>, c: usize, s: usize, bar: Bar) {
    if values.len() <= c {
        values.resize_with(c + 1, Vec::new);
    }
    if let Some(row) = values.get_mut(c) {
        if row.len() <= s {
            row.resize(s + 1, None);
        }
        if let Some(cell) = row.get_mut(s) {
            *cell = Some(bar);
        }
    }
}

fn legend(names: &[String]) -> Vec<LegendItem> {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| LegendItem {
            name: n.clone(),
            color: i,
            dashed: false,
        })
        .collect()
}

fn canvas(title: &str, legend: Vec<LegendItem>, cols: usize, panels: Vec<Chart>) -> Canvas {
    Canvas {
        title: title.to_string(),
        legend,
        cols,
        panels,
        footer: String::new(),
    }
}

fn median_min_max(n: &Node<'_>) -> Result<(f64, f64, f64), json::ShapeError> {
    Ok((
        json::num(n, "median")?,
        json::num(n, "min")?,
        json::num(n, "max")?,
    ))
}

fn lpm_rate(doc: &Value) -> Result<Built, Problem> {
    let root = json::root(doc);
    let rows = json::items(&root, "results")?;
    if rows.is_empty() {
        return Err("results: empty".into());
    }
    let mut cats: Vec<String> = Vec::new();
    let mut series: Vec<String> = Vec::new();
    let mut values = Vec::new();
    let mut wrong: Vec<(usize, f64)> = Vec::new();
    for r in &rows {
        let backend = json::str(r, "backend")?;
        let variant = match r.opt("variant")? {
            Some(v) => v.str()?.to_string(),
            None => String::new(),
        };
        let label = if variant.is_empty() {
            backend.to_string()
        } else {
            format!("{backend} ({variant})")
        };
        let c = slot(&mut cats, &label);
        let s = slot(&mut series, json::str(r, "traffic")?);
        let (med, lo, hi) = median_min_max(&r.get("mlps")?)?;
        let mut note = family_name(json::str(r, "family")?);
        if let Ok(b) = json::num(r, "bytes") {
            note.push_str(&format!(", {:.2} MiB", b / 1048576.0));
        }
        if let Ok(b) = json::num(r, "bytes_per_route") {
            note.push_str(&format!(", {b:.1} bytes per route"));
        }
        if let Ok(m) = json::num(r, "mismatches") {
            if m > 0.0 {
                wrong.push((c, m));
                note.push_str(&format!(", {} wrong answers", thousands(m)));
            }
        }
        set(&mut values, c, s, Bar::new(med).spread(lo, hi).note(note));
    }
    for (c, m) in wrong {
        if let Some(l) = cats.get_mut(c) {
            l.push_str(&format!(" ✗ {} wrong", thousands(m)));
        }
    }
    let mut detail = table_source(doc).unwrap_or_default();
    if let Some(p) = doc.get("params") {
        if let (Some(n), Some(runs)) = (
            p.get("lookups").and_then(Value::as_f64),
            p.get("runs").and_then(Value::as_f64),
        ) {
            detail.push_str(&format!(
                "; {} addresses per pattern, {} passes",
                thousands(n),
                runs
            ));
        }
    }
    if let Some(Value::Array(sk)) = doc.get("skipped") {
        let names: Vec<String> = sk
            .iter()
            .filter_map(|s| {
                Some(format!(
                    "{} ({})",
                    s.get("backend")?.as_str()?,
                    s.get("family")?.as_str()?
                ))
            })
            .collect();
        if !names.is_empty() {
            detail.push_str(&format!("; not measured: {}", names.join(", ")));
        }
    }
    let bars = Bars {
        subtitle: String::new(),
        unit: "million lookups per second".into(),
        axis: Axis::Log,
        categories: cats,
        series: series.clone(),
        values,
        first_color: 0,
    };
    Ok(Built {
        canvas: canvas(
            "Lookup rate per engine and peer, one core",
            legend(&series),
            1,
            vec![Chart::Bars(bars)],
        ),
        detail,
    })
}

fn lctrie_sweep(doc: &Value) -> Result<Built, Problem> {
    let root = json::root(doc);
    let rows = match root.opt("lctrie_sweep")? {
        Some(n) => n.items()?,
        None => Vec::new(),
    };
    if rows.is_empty() {
        return Err(Problem::Absent(
            "this lpm run has no LC-trie sweep (made with --no-sweep)".into(),
        ));
    }
    let mut names = Vec::new();
    let mut rate = Vec::new();
    let mut mem = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let t = r.get("threshold")?.text()?;
        let root_t = match r.opt("root_threshold")? {
            Some(v) => v.text()?,
            None => t.clone(),
        };
        names.push(if root_t == t {
            t.clone()
        } else {
            format!("{t} (root {root_t})")
        });
        let x = i as f64;
        let mut note = String::new();
        if let Ok(n) = json::num(r, "nodes") {
            note.push_str(&format!("{} nodes", thousands(n)));
        }
        if let Ok(b) = json::num(r, "build_s") {
            note.push_str(&format!(", built in {b:.3} s"));
        }
        rate.push(
            Point::new(x, json::num(r, "mlps")?)
                .spread(json::num(r, "mlps_min")?, json::num(r, "mlps_max")?)
                .note(note.clone()),
        );
        mem.push(Point::new(x, json::num(r, "bytes")? / 1048576.0).note(note));
    }
    let lines = Lines {
        subtitle: String::new(),
        x: XAxis::Categories {
            label: "inflate threshold (%)".into(),
            names,
        },
        y_label: "million lookups per second".into(),
        y_axis: Axis::Linear,
        y_zero: true,
        series: vec![Series {
            name: "lookup rate".into(),
            color: 0,
            dashed: false,
            points: rate,
        }],
        right: Some(RightAxis {
            label: "MiB".into(),
            axis: Axis::Linear,
            series: vec![Series {
                name: "memory".into(),
                color: 1,
                dashed: true,
                points: mem,
            }],
        }),
        refs: Vec::new(),
        y_scale: None,
    };
    let legend = vec![
        LegendItem {
            name: "lookup rate, Mlps (left)".into(),
            color: 0,
            dashed: false,
        },
        LegendItem {
            name: "memory, MiB (right)".into(),
            color: 1,
            dashed: true,
        },
    ];
    Ok(Built {
        canvas: canvas(
            "LC-trie: lookup rate and memory against the inflate threshold (IPv4, uniform4)",
            legend,
            1,
            vec![Chart::Lines(lines)],
        ),
        detail: table_source(doc).unwrap_or_default(),
    })
}

fn fwd_workers(doc: &Value) -> Result<Built, Problem> {
    let root = json::root(doc);
    let rows = json::items(&root, "results")?;
    if rows.is_empty() {
        return Err("results: empty".into());
    }
    struct R {
        design: String,
        family: String,
        flows: f64,
        workers: f64,
        total: f64,
        per_worker: Option<f64>,
    }
    let mut rs = Vec::new();
    for r in &rows {
        rs.push(R {
            design: json::str(r, "design")?.to_string(),
            family: json::str(r, "family")?.to_string(),
            flows: json::num(r, "flows")?,
            workers: json::num(r, "workers")?,
            total: json::num(r, "total_mpps")?,
            per_worker: json::num(r, "mpps_per_worker").ok(),
        });
    }
    let mut designs: Vec<String> = Vec::new();
    let mut families: Vec<String> = Vec::new();
    for r in &rs {
        slot(&mut designs, &r.design);
        slot(&mut families, &r.family);
    }
    let mut flows: Vec<f64> = rs.iter().map(|r| r.flows).collect();
    flows.sort_by(f64::total_cmp);
    flows.dedup();
    let mut workers: Vec<f64> = rs.iter().map(|r| r.workers).collect();
    workers.sort_by(f64::total_cmp);
    workers.dedup();
    let shared = Scale::fit(Axis::Linear, rs.iter().map(|r| r.total), true);
    let mut panels = Vec::new();
    for fam in &families {
        for &fl in &flows {
            let series: Vec<Series> = designs
                .iter()
                .enumerate()
                .map(|(di, d)| {
                    let points = rs
                        .iter()
                        .filter(|r| &r.design == d && &r.family == fam && r.flows == fl)
                        .filter_map(|r| {
                            let wi = workers.iter().position(|w| *w == r.workers)?;
                            let note = r
                                .per_worker
                                .map(|p| format!("{p:.2} Mpps per worker"))
                                .unwrap_or_default();
                            Some(Point::new(wi as f64, r.total).note(note))
                        })
                        .collect();
                    Series {
                        name: d.clone(),
                        color: di,
                        dashed: false,
                        points,
                    }
                })
                .collect();
            if series.iter().all(|s| s.points.is_empty()) {
                continue;
            }
            let flows_label = if fl == 1.0 {
                "1 flow".to_string()
            } else {
                format!("{} flows", thousands(fl))
            };
            panels.push(Chart::Lines(Lines {
                subtitle: format!("{}, {flows_label}", family_name(fam)),
                x: XAxis::Categories {
                    label: "workers".into(),
                    names: workers.iter().map(|w| format!("{w}")).collect(),
                },
                y_label: "total Mpps".into(),
                y_axis: Axis::Linear,
                y_zero: true,
                series,
                right: None,
                refs: Vec::new(),
                y_scale: Some(shared),
            }));
        }
    }
    let mut detail = table_source(doc).unwrap_or_default();
    if let Some(p) = doc.get("params") {
        if let (Some(b), Some(s)) = (
            p.get("batch").and_then(Value::as_f64),
            p.get("seconds").and_then(Value::as_f64),
        ) {
            detail.push_str(&format!("; batches of {b}, {s} s per point"));
        }
    }
    Ok(Built {
        canvas: canvas(
            "Forwarding rate against workers: legacy, split, split + flow table",
            legend(&designs),
            flows.len().clamp(1, 3),
            panels,
        ),
        detail,
    })
}

fn fib_reader(doc: &Value) -> Result<Built, Problem> {
    let root = json::root(doc);
    let rows = json::items(&root, "reader")?;
    if rows.is_empty() {
        return Err("reader: empty".into());
    }
    let mut bounds: Vec<f64> = Vec::new();
    let mut pts: Vec<(f64, Point)> = Vec::new();
    let mut idle = Vec::new();
    for r in &rows {
        let bound = json::num(r, "max_delay_us")?;
        if !bounds.contains(&bound) {
            bounds.push(bound);
        }
        let x = json::num(r, "achieved_updates_per_s")?;
        let y = json::num(r, "lookups_per_s")? / 1e6;
        let base = json::num(r, "idle_lookups_per_s")? / 1e6;
        idle.push(base);
        let mut note = format!("{:.2} of idle ({base:.1} Mlps)", y / base.max(1e-9));
        if let Ok(p) = json::num(r, "publications_per_s") {
            note.push_str(&format!(", {p:.0} publications/s"));
        }
        if r.v.get("target").and_then(Value::as_str) == Some("max") {
            note.push_str(", writer flat out");
        }
        pts.push((bound, Point::new(x, y).note(note)));
    }
    bounds.sort_by(f64::total_cmp);
    let series: Vec<Series> = bounds
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let mut points: Vec<Point> = pts
                .iter()
                .filter(|(pb, _)| pb == b)
                .map(|(_, p)| p.clone())
                .collect();
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            Series {
                name: format!("publication bound {}", fmt_us(*b)),
                color: i,
                dashed: false,
                points,
            }
        })
        .collect();
    let names: Vec<String> = series.iter().map(|s| s.name.clone()).collect();
    let mean_idle = idle.iter().sum::<f64>() / idle.len().max(1) as f64;
    let lines = Lines {
        subtitle: String::new(),
        x: XAxis::Numeric {
            label: "route updates per second (achieved)".into(),
            axis: Axis::Log,
        },
        y_label: "reader, million lookups per second".into(),
        y_axis: Axis::Linear,
        y_zero: true,
        series,
        right: None,
        refs: vec![RefLine {
            label: format!("reader idle (mean {mean_idle:.0} Mlps)"),
            y: mean_idle,
        }],
        y_scale: None,
    };
    let mut detail = table_source(doc).unwrap_or_default();
    if let Some(p) = doc.get("params") {
        if let (Some(w), Some(r)) = (
            p.get("writer_core").and_then(Value::as_f64),
            p.get("reader_core").and_then(Value::as_f64),
        ) {
            detail.push_str(&format!("; writer on core {w}, reader on core {r}"));
        }
        if let Some(b) = p.get("backend").and_then(Value::as_str) {
            detail.push_str(&format!("; engine {b}"));
        }
    }
    Ok(Built {
        canvas: canvas(
            "Reader lookup rate while route updates stream",
            legend(&names),
            1,
            vec![Chart::Lines(lines)],
        ),
        detail,
    })
}

fn fmt_us(us: f64) -> String {
    if us >= 1000.0 && (us / 1000.0).fract() == 0.0 {
        format!("{} ms", us / 1000.0)
    } else {
        format!("{us} µs")
    }
}

fn veth_config(doc: &Value) -> String {
    let mut d = Vec::new();
    if let Some(c) = doc.get("config") {
        if let Some(f) = c.get("frame_bytes").and_then(Value::as_f64) {
            d.push(format!("{f}-byte frames"));
        }
        if let Some(n) = c.get("destinations").and_then(Value::as_f64) {
            d.push(format!("{} destinations", thousands(n)));
        }
        if let Some(s) = c.get("seconds").and_then(Value::as_f64) {
            d.push(format!("{s} s per router"));
        }
        if let Some(core) = c.get("router_core").and_then(Value::as_f64) {
            d.push(format!("router on core {core}"));
        }
    }
    d.join(", ")
}

fn veth_pps(doc: &Value) -> Result<Built, Problem> {
    let root = json::root(doc);
    let rows = json::items(&root, "results")?;
    if rows.is_empty() {
        return Err("results: empty".into());
    }
    let series = vec![
        "Mpps per core used".to_string(),
        "forwarded Mpps".to_string(),
    ];
    let mut cats = Vec::new();
    let mut values = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        cats.push(json::str(r, "router")?.to_string());
        let per_core = json::num(r, "pps_per_core")? / 1e6;
        let fwd = json::num(r, "forwarded_pps")? / 1e6;
        let mut note = String::new();
        if let Ok(c) = json::num(r, "cpu_cores_used") {
            note.push_str(&format!("core {:.0} % busy", c * 100.0));
        }
        if let Ok(o) = json::num(r, "offered_pps") {
            note.push_str(&format!(", offered {:.2} Mpps", o / 1e6));
        }
        set(&mut values, i, 0, Bar::new(per_core).note(note.clone()));
        set(&mut values, i, 1, Bar::new(fwd).note(note));
    }
    let bars = Bars {
        subtitle: String::new(),
        unit: "million packets per second".into(),
        axis: Axis::Linear,
        categories: cats,
        series: series.clone(),
        values,
        first_color: 0,
    };
    Ok(Built {
        canvas: canvas(
            "Forwarding over veth, one router core",
            legend(&series),
            1,
            vec![Chart::Bars(bars)],
        ),
        detail: veth_config(doc),
    })
}

fn veth_latency(doc: &Value) -> Result<Built, Problem> {
    let root = json::root(doc);
    let rows = json::items(&root, "results")?;
    if rows.is_empty() {
        return Err("results: empty".into());
    }
    let fields = [
        ("ping_idle", "ping through, idle"),
        ("ping_flood", "ping through, flood"),
        ("tcp_rr_idle", "TCP to the router, idle"),
        ("tcp_rr_flood", "TCP to the router, flood"),
    ];
    let series: Vec<String> = fields.iter().map(|f| f.1.to_string()).collect();
    let mut cats = Vec::new();
    let mut values = Vec::new();
    let mut any = false;
    for (i, r) in rows.iter().enumerate() {
        cats.push(json::str(r, "router")?.to_string());
        let lat = r.get("latency_us")?;
        for (s, (key, _)) in fields.iter().enumerate() {
            let v = json::num(&lat, key)?;
            // The benchmark writes 0 for a measurement it could not make.
            if v <= 0.0 {
                continue;
            }
            let mut note = String::new();
            if *key == "ping_flood" {
                if let Ok(l) = json::num(&lat, "ping_flood_loss_percent") {
                    note = format!("{l} % lost");
                }
            }
            if *key == "tcp_rr_flood" {
                if let Ok(t) = json::num(&lat, "tcp_rr_flood_timeouts") {
                    note = format!("{t} requests unanswered");
                }
            }
            any = true;
            set(&mut values, i, s, Bar::new(v).note(note));
        }
    }
    if !any {
        return Err("results[].latency_us: no latency was measured".into());
    }
    let bars = Bars {
        subtitle: String::new(),
        unit: "round-trip time, µs".into(),
        axis: Axis::Linear,
        categories: cats,
        series: series.clone(),
        values,
        first_color: 0,
    };
    Ok(Built {
        canvas: canvas(
            "Round-trip times, idle and under the forwarding flood",
            legend(&series),
            1,
            vec![Chart::Bars(bars)],
        ),
        detail: veth_config(doc),
    })
}

fn fpm_intake(doc: &Value) -> Result<Built, Problem> {
    let root = json::root(doc);
    let rows = json::items(&root, "results")?;
    if rows.is_empty() {
        return Err("results: empty".into());
    }
    let mut cats = Vec::new();
    let mut rate = Vec::new();
    let mut tail = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let mut label = json::str(r, "mode")?.to_string();
        if let Some(e) = r.v.get("eager_limit").and_then(Value::as_f64) {
            label.push_str(&format!(", eager {e}"));
        }
        cats.push(label);
        let mut note = String::new();
        if let Ok(n) = json::num(r, "routes") {
            note.push_str(&format!("{} routes", thousands(n)));
        }
        if let Ok(b) = json::num(r, "bytes_per_route") {
            note.push_str(&format!(", {b:.0} bytes per route resident"));
        }
        let (m, lo, hi) = median_min_max(&r.get("routes_per_s")?)?;
        set(
            &mut rate,
            i,
            0,
            Bar::new(m / 1e6)
                .spread(lo / 1e6, hi / 1e6)
                .note(note.clone()),
        );
        let (m, lo, hi) = median_min_max(&r.get("tail_s")?)?;
        set(&mut tail, i, 0, Bar::new(m).spread(lo, hi).note(note));
    }
    let panel = |subtitle: &str, unit: &str, values| {
        Chart::Bars(Bars {
            subtitle: subtitle.into(),
            unit: unit.into(),
            axis: Axis::Linear,
            categories: cats.clone(),
            series: vec!["median".into()],
            values,
            first_color: 0,
        })
    };
    let mut detail = table_source(doc).unwrap_or_default();
    if let Some(p) = doc.get("passes").and_then(Value::as_f64) {
        detail.push_str(&format!("; {p} passes per mode"));
    }
    Ok(Built {
        canvas: canvas(
            "Full-table intake from zebra over FPM",
            Vec::new(),
            2,
            vec![
                panel("Intake rate", "million routes per second", rate),
                panel(
                    "Last route published after zebra's last byte",
                    "seconds",
                    tail,
                ),
            ],
        ),
        detail,
    })
}

/// The records of a document whose shape is known only by convention (see the module doc).
fn records(doc: &Value) -> Result<Vec<(String, Node<'_>)>, Problem> {
    let root = json::root(doc);
    let mut arr = None;
    for key in ["results", "runs", "paths", "cases", "modes"] {
        if let Some(n) = root.opt(key)? {
            if n.v.is_array() {
                arr = Some(n);
                break;
            }
        }
    }
    if arr.is_none() {
        if let Value::Object(m) = doc {
            arr = m
                .iter()
                .find(|(_, v)| v.as_array().is_some_and(|a| a.iter().any(Value::is_object)))
                .map(|(k, v)| Node { v, path: k.clone() });
        }
    }
    let arr = arr.ok_or("no array of records (results, runs, paths, cases or modes)")?;
    let mut out = Vec::new();
    for (i, r) in arr.items()?.into_iter().enumerate() {
        if !r.v.is_object() {
            continue;
        }
        let names: Vec<&str> = [
            "path",
            "mode",
            "setup",
            "case",
            "name",
            "router",
            "separation",
            "design",
        ]
        .iter()
        .filter_map(|k| r.v.get(*k).and_then(Value::as_str))
        .take(2)
        .collect();
        let label = if names.is_empty() {
            format!("#{i}")
        } else {
            names.join(" / ")
        };
        out.push((label, r));
    }
    if out.is_empty() {
        return Err(format!("{}: no records", arr.path).into());
    }
    Ok(out)
}

/// A metric found in a record: its key path and value.
struct Metric {
    name: String,
    bar: Bar,
}

/// Whether `key` ends in `suffix`; `_per_s` (a rate) never counts as `_s` (seconds).
fn has_suffix(key: &str, suffix: &str) -> bool {
    key.ends_with(suffix) && (suffix == "_per_s" || !key.ends_with("_per_s"))
}

/// Leaf names that count things (or give shares) rather than measure in their parent's unit.
const COUNTS: [&str; 15] = [
    "transactions",
    "sent",
    "answered",
    "unanswered",
    "count",
    "samples",
    "n",
    "lost",
    "announced",
    "in_fib",
    "in_fib_within_phase",
    "per_second",
    "timeouts",
    "resets",
    "errors",
];

/// Numbers of a record measured in a unit that one of `suffixes` names: a key whose last part
/// ends in the suffix (`tcp_rr_idle_us`), or a measurement inside an object whose key does
/// (`latency_us.ping_idle`, `tcp_rr_us.p99`; counts such as `transactions` are not). A
/// `{median, min, max}` object becomes one bar with whiskers. Each value is multiplied by the
/// factor of its suffix.
fn metrics(v: &Value, suffixes: &[(&str, f64)]) -> Vec<Metric> {
    let leaves = json::numeric_leaves(v);
    let factor_of = |part: &str| {
        suffixes
            .iter()
            .find(|(s, _)| has_suffix(part, s))
            .map(|(_, f)| *f)
    };
    let factor = |key: &str| {
        let (stem, last) = key.rsplit_once('.').unwrap_or(("", key));
        if let Some(f) = factor_of(last) {
            return Some(f);
        }
        let parent = stem.rsplit('.').next().unwrap_or("");
        let count = COUNTS.contains(&last)
            || last.contains("percent")
            || last.contains("loss")
            || last.ends_with("_per_s");
        if parent.is_empty() || count {
            None
        } else {
            factor_of(parent)
        }
    };
    let has = |k: String| leaves.iter().find(|(l, _)| *l == k).map(|(_, v)| *v);
    let mut out: Vec<Metric> = Vec::new();
    for (key, x) in &leaves {
        let Some(f) = factor(key) else { continue };
        let (stem, last) = key.rsplit_once('.').unwrap_or(("", key.as_str()));
        let in_stats = !stem.is_empty() && has(format!("{stem}.median")).is_some();
        if in_stats && matches!(last, "min" | "max") {
            continue;
        }
        if in_stats && last == "median" {
            let mut bar = Bar::new(x * f);
            if let (Some(lo), Some(hi)) = (has(format!("{stem}.min")), has(format!("{stem}.max"))) {
                bar = bar.spread(lo * f, hi * f);
            }
            out.push(Metric {
                name: stem.to_string(),
                bar,
            });
            continue;
        }
        out.push(Metric {
            name: key.clone(),
            bar: Bar::new(x * f),
        });
    }
    out
}

/// Orders metric names so that an `idle` measurement comes before its `flood` twin.
fn metric_order(names: &mut [String]) {
    let key = |n: &String| {
        let phase = if n.contains("idle") {
            0
        } else if n.contains("flood") {
            1
        } else {
            2
        };
        (n.replace("idle", "").replace("flood", ""), phase)
    };
    names.sort_by_key(key);
}

/// Most series one generic panel shows.
const PANEL_SERIES: usize = 8;

/// Grouped bars of the records' metrics with the given suffixes, colours from
/// `first_color` on; `None` if there are none.
fn metric_panel(
    recs: &[(String, Node<'_>)],
    suffixes: &[(&str, f64)],
    subtitle: &str,
    unit: &str,
    first_color: usize,
) -> Option<(Chart, Vec<String>)> {
    let per: Vec<Vec<Metric>> = recs.iter().map(|(_, r)| metrics(r.v, suffixes)).collect();
    let mut names: Vec<String> = Vec::new();
    for m in per.iter().flatten() {
        slot(&mut names, &m.name);
    }
    if names.is_empty() {
        return None;
    }
    metric_order(&mut names);
    names.truncate(PANEL_SERIES);
    let mut values = Vec::new();
    for (c, ms) in per.iter().enumerate() {
        for m in ms {
            if let Some(s) = names.iter().position(|n| n == &m.name) {
                set(&mut values, c, s, m.bar.clone());
            }
        }
    }
    values.resize_with(recs.len(), Vec::new);
    let all: Vec<f64> = per
        .iter()
        .flatten()
        .map(|m| m.bar.v)
        .filter(|v| *v > 0.0)
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(0.0, f64::max);
    let axis = if lo.is_finite() && hi / lo > 100.0 {
        Axis::Log
    } else {
        Axis::Linear
    };
    let chart = Chart::Bars(Bars {
        subtitle: subtitle.into(),
        unit: unit.into(),
        axis,
        categories: recs.iter().map(|(l, _)| l.clone()).collect(),
        series: names.clone(),
        values,
        first_color,
    });
    Some((chart, names))
}

/// Time series in the records: arrays of `[t, n]` pairs or of objects with a time field
/// and one other number; colours from `first_color` on.
fn time_series(recs: &[(String, Node<'_>)], first_color: usize) -> Option<(Chart, Vec<String>)> {
    const TIME: [&str; 5] = ["t", "t_s", "time_s", "at_s", "seconds"];
    let mut series = Vec::new();
    let mut y_name = String::new();
    for (label, r) in recs {
        let Value::Object(m) = r.v else { continue };
        for (key, v) in m {
            let Some(items) = v.as_array().filter(|a| a.len() >= 2) else {
                continue;
            };
            let mut pts = Vec::new();
            let mut y_key = None;
            for it in items {
                match it {
                    Value::Array(p) if p.len() == 2 => {
                        if let (Some(x), Some(y)) = (
                            p.first().and_then(Value::as_f64),
                            p.get(1).and_then(Value::as_f64),
                        ) {
                            pts.push(Point::new(x, y));
                            y_key.get_or_insert_with(|| key.clone());
                        }
                    }
                    Value::Object(o) => {
                        let t = TIME.iter().find_map(|k| o.get(*k).and_then(Value::as_f64));
                        let other = o
                            .iter()
                            .find(|(k, x)| !TIME.contains(&k.as_str()) && x.is_number());
                        if let (Some(t), Some((k, y))) = (t, other) {
                            if let Some(y) = y.as_f64() {
                                pts.push(Point::new(t, y));
                                y_key.get_or_insert_with(|| k.clone());
                            }
                        }
                    }
                    _ => {}
                }
            }
            if pts.len() >= 2 {
                if y_name.is_empty() {
                    y_name = y_key.unwrap_or_default();
                }
                series.push(Series {
                    name: format!("{label}: {key}"),
                    color: first_color + series.len(),
                    dashed: false,
                    points: pts,
                });
            }
        }
    }
    if series.is_empty() {
        return None;
    }
    series.truncate(PANEL_SERIES);
    let names = series.iter().map(|s| s.name.clone()).collect();
    Some((
        Chart::Lines(Lines {
            subtitle: "Over time".into(),
            x: XAxis::Numeric {
                label: "seconds".into(),
                axis: Axis::Linear,
            },
            y_label: y_name,
            y_axis: Axis::Linear,
            y_zero: true,
            series,
            right: None,
            refs: Vec::new(),
            y_scale: None,
        }),
        names,
    ))
}

/// A figure from generic records: the primary panel (required), a rate panel and time
/// series when present, each with colours of its own.
fn generic(
    doc: &Value,
    title: &str,
    primary: (&[(&str, f64)], &str, &str),
    missing: &str,
) -> Result<Built, Problem> {
    let recs = records(doc)?;
    let (suffixes, subtitle, unit) = primary;
    let (first, names) = metric_panel(&recs, suffixes, subtitle, unit, 0)
        .ok_or_else(|| Problem::Malformed(missing.to_string()))?;
    let mut panels = vec![first];
    let mut legend_items = legend(&names);
    let mut notes = Vec::new();
    let push = |names: Vec<String>, items: &mut Vec<LegendItem>| {
        let base = items.len();
        items.extend(names.into_iter().enumerate().map(|(i, n)| LegendItem {
            name: n,
            color: base + i,
            dashed: false,
        }));
    };
    if let Some((p, n)) = metric_panel(
        &recs,
        &[("_per_s", 1.0)],
        "Rates",
        "per second",
        legend_items.len(),
    ) {
        panels.push(p);
        notes.push(format!("rates: {}", n.join(", ")));
        push(n, &mut legend_items);
    }
    if let Some((p, n)) = time_series(&recs, legend_items.len()) {
        panels.push(p);
        notes.push(format!("over time: {}", n.join(", ")));
        push(n, &mut legend_items);
    }
    let mut detail = table_source(doc).unwrap_or_default();
    if !notes.is_empty() {
        if !detail.is_empty() {
            detail.push_str("; ");
        }
        detail.push_str(&notes.join("; "));
    }
    Ok(Built {
        canvas: canvas(title, legend_items, 1, panels),
        detail,
    })
}

/// `vfsr cp flood`'s `summary[]`: per phase (idle, separated, shared-core, ...), the TCP
/// request/response and ping latency percentiles and the announcement-to-FIB times.
fn cpflood_summary(doc: &Value, rows: &[Node<'_>]) -> Result<Built, Problem> {
    let lat_series = [
        ("tcp_rr_us", "p50", "TCP to the router, p50"),
        ("tcp_rr_us", "p99", "TCP to the router, p99"),
        ("ping_us", "p50", "ping the router, p50"),
        ("ping_us", "p99", "ping the router, p99"),
    ];
    let ann_series = [
        ("announce_to_fib_ms", "p50", "announcement to FIB, p50"),
        ("announce_to_fib_ms", "max", "announcement to FIB, max"),
    ];
    let mut cats = Vec::new();
    let mut lat = Vec::new();
    let mut ann = Vec::new();
    for (c, r) in rows.iter().enumerate() {
        let label = match r.opt("label")? {
            Some(l) => l.str()?.to_string(),
            None => json::str(r, "mode")?.to_string(),
        };
        cats.push(label);
        let mut note = String::new();
        if let Some(f) = r.opt("flood")? {
            if let (Ok(o), Ok(w)) = (json::num(&f, "offered_pps"), json::num(&f, "forwarded_pps")) {
                if o > 0.0 {
                    note = format!(
                        "flood offered {:.2} Mpps, forwarded {:.2} Mpps",
                        o / 1e6,
                        w / 1e6
                    );
                }
            }
        }
        for (table, series) in [(&mut lat, &lat_series[..]), (&mut ann, &ann_series[..])] {
            for (s, (obj, field, _)) in series.iter().enumerate() {
                let o = r.get(obj)?;
                // A percentile of no samples is null: nothing to draw.
                let Some(v) = o.opt(field)? else { continue };
                if v.v.is_null() {
                    continue;
                }
                set(table, c, s, Bar::new(v.num()?).note(note.clone()));
            }
        }
    }
    let axis_for = |t: &Vec<Vec<Option<Bar>>>| {
        let vals: Vec<f64> = t
            .iter()
            .flatten()
            .flatten()
            .map(|b| b.v)
            .filter(|v| *v > 0.0)
            .collect();
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(0.0, f64::max);
        if lo.is_finite() && hi / lo > 50.0 {
            Axis::Log
        } else {
            Axis::Linear
        }
    };
    if !lat.iter().chain(&ann).flatten().any(Option::is_some) {
        return Err("summary[]: no phase has a latency or announcement time".into());
    }
    let names = |s: &[(&str, &str, &str)]| s.iter().map(|x| x.2.to_string()).collect::<Vec<_>>();
    let lat_names = names(&lat_series);
    let ann_names = names(&ann_series);
    lat.resize_with(cats.len(), Vec::new);
    ann.resize_with(cats.len(), Vec::new);
    let mut panels = vec![Chart::Bars(Bars {
        subtitle: "Latency to the router".into(),
        unit: "µs".into(),
        axis: axis_for(&lat),
        categories: cats.clone(),
        series: lat_names.clone(),
        values: lat,
        first_color: 0,
    })];
    let mut items = legend(&lat_names);
    if ann.iter().flatten().any(Option::is_some) {
        panels.push(Chart::Bars(Bars {
            subtitle: "BGP announcement to vfsr's FIB".into(),
            unit: "ms".into(),
            axis: axis_for(&ann),
            categories: cats,
            series: ann_names.clone(),
            values: ann,
            first_color: lat_names.len(),
        }));
        items.extend(ann_names.iter().enumerate().map(|(i, n)| LegendItem {
            name: n.clone(),
            color: lat_names.len() + i,
            dashed: false,
        }));
    }
    let mut detail = Vec::new();
    if let Some(c) = doc.get("config") {
        if let Some(t) = c.get("table").and_then(Value::as_str) {
            detail.push(format!("table: {t}"));
        }
        if let Some(n) = c.get("routes").and_then(Value::as_f64) {
            detail.push(format!("{} routes", thousands(n)));
        }
        if let Some(s) = c.get("seconds").and_then(Value::as_f64) {
            detail.push(format!("{s} s per phase"));
        }
        if let Some(r) = c.get("rounds").and_then(Value::as_f64) {
            let plural = if r == 1.0 { "" } else { "s" };
            detail.push(format!("{r} round{plural}"));
        }
    }
    if let Some(t) = targets_text(doc) {
        detail.push(t);
    }
    Ok(Built {
        canvas: canvas(
            "The control plane under a forwarding flood",
            items,
            1,
            panels,
        ),
        detail: detail.join("; "),
    })
}

fn cpflood_latency(doc: &Value) -> Result<Built, Problem> {
    let root = json::root(doc);
    if let Some(summary) = root.opt("summary")? {
        let rows = summary.items()?;
        if rows.is_empty() {
            return Err("summary: empty".into());
        }
        return cpflood_summary(doc, &rows);
    }
    generic(
        doc,
        "The control plane under a forwarding flood",
        (&[("_us", 1.0), ("_ms", 1000.0)], "Latency", "µs"),
        "no latencies (numbers whose key ends in _us or _ms) in its records",
    )
}

/// A number that may be null (a measurement the run could not make): `None` then, or when
/// the field is absent.
fn opt_num(n: &Node<'_>, key: &str) -> Result<Option<f64>, json::ShapeError> {
    match n.opt(key)? {
        Some(v) if !v.v.is_null() => Ok(Some(v.num()?)),
        _ => Ok(None),
    }
}

/// How a caption names a target of `vfsr cp flood` or `vfsr cp bench`.
fn target_name(key: &str) -> String {
    match key {
        "session_never_drops" => "the BGP session never drops".into(),
        "rr_p99_within_1_5x_idle" => "TCP request/response p99 under flood ≤ 1.5× idle".into(),
        "announcement_within_1s" => "an announcement reaches the FIB within 1 s".into(),
        k => k.replace('_', " "),
    }
}

/// The document's `targets` object as caption text: each target met or not, with what the
/// run measured (`detail`, else `ratio` or `max_ms`).
fn targets_text(doc: &Value) -> Option<String> {
    let Value::Object(m) = doc.get("targets")? else {
        return None;
    };
    let parts: Vec<String> = m
        .iter()
        .map(|(k, t)| {
            let name = target_name(k);
            if let Some(d) = t.get("detail").and_then(Value::as_str) {
                return format!("{name}: {d}");
            }
            let verdict = match t.get("met").and_then(Value::as_bool) {
                Some(true) => "met",
                Some(false) => "not met",
                None => "not measured",
            };
            let how = if let Some(r) = t.get("ratio").and_then(Value::as_f64) {
                format!(" ({r:.1}×)")
            } else if let Some(ms) = t.get("max_ms").and_then(Value::as_f64) {
                format!(" (max {ms:.0} ms)")
            } else {
                String::new()
            };
            format!("{name}: {verdict}{how}")
        })
        .collect();
    (!parts.is_empty()).then(|| format!("targets: {}", parts.join("; ")))
}

/// Pipeline order of `vfsr cp bench`'s stage names (its JSON keeps them in key order).
fn stage_rank(name: &str) -> usize {
    let order = ["bgpd", "zebra has", "kernel", "zebra's fpm", "vfsr"];
    let n = name.to_ascii_lowercase();
    order
        .iter()
        .position(|p| n.starts_with(p))
        .unwrap_or(order.len())
}

/// The stage panels (load, withdrawal) and the stages' names, in pipeline order.
type StagePanels = (Vec<Chart>, Vec<String>);

/// `vfsr cp bench`'s stages per path: the time from the session's `Established` until each
/// stage holds the whole table, and from the withdrawal until each is empty. `None` when no
/// stage completed (then the totals are drawn instead).
fn cp_stage_panels(rows: &[Node<'_>], cats: &[String]) -> Result<Option<StagePanels>, Problem> {
    let mut stages: Vec<String> = Vec::new();
    // (phase, path, stage, all_s, first_s)
    let mut cells: Vec<(usize, usize, String, f64, Option<f64>)> = Vec::new();
    for (c, r) in rows.iter().enumerate() {
        for (ph, key) in [(0, "load"), (1, "withdrawal")] {
            let Some(phase) = r.opt(key)? else { continue };
            if phase.v.is_null() {
                continue;
            }
            let Some(st) = phase.opt("stages")? else {
                continue;
            };
            let Value::Object(m) = st.v else {
                return Err(format!("{}: expected an object", st.path).into());
            };
            for name in m.keys() {
                let one = st.get(name)?;
                let Some(all) = opt_num(&one, "all_s")? else {
                    continue;
                };
                let first = opt_num(&one, "first_s")?;
                slot(&mut stages, name);
                cells.push((ph, c, name.clone(), all, first));
            }
        }
    }
    if stages.is_empty() {
        return Ok(None);
    }
    stages.sort_by_key(|s| (stage_rank(s), s.clone()));
    let mut load = Vec::new();
    let mut withdrawal = Vec::new();
    for (ph, c, name, all, first) in &cells {
        let Some(s) = stages.iter().position(|x| x == name) else {
            continue;
        };
        let note = first.map_or(String::new(), |f| format!("first change at {f:.2} s"));
        let t = if *ph == 0 { &mut load } else { &mut withdrawal };
        set(t, *c, s, Bar::new(*all).note(note));
    }
    load.resize_with(cats.len(), Vec::new);
    withdrawal.resize_with(cats.len(), Vec::new);
    let panel = |subtitle: &str, values: Vec<Vec<Option<Bar>>>| {
        Chart::Bars(Bars {
            subtitle: subtitle.into(),
            unit: "seconds".into(),
            axis: Axis::Linear,
            categories: cats.to_vec(),
            series: stages.clone(),
            values,
            first_color: 0,
        })
    };
    let mut panels = Vec::new();
    if load.iter().flatten().any(Option::is_some) {
        panels.push(panel(
            "Whole table in each stage, from the session's Established",
            load,
        ));
    }
    if withdrawal.iter().flatten().any(Option::is_some) {
        panels.push(panel(
            "Every route gone from each stage, from the withdrawal",
            withdrawal,
        ));
    }
    Ok(Some((panels, stages)))
}

/// Grouped bars of two numbers per path (load and withdrawal), nulls left out; `None` when
/// no path has either.
fn cp_pair(
    rows: &[Node<'_>],
    cats: &[String],
    keys: [&str; 2],
    scale: f64,
    (subtitle, unit, first_color): (&str, &str, usize),
) -> Result<Option<Chart>, Problem> {
    let mut values = Vec::new();
    for (c, r) in rows.iter().enumerate() {
        for (s, key) in keys.iter().enumerate() {
            if let Some(v) = opt_num(r, key)? {
                set(&mut values, c, s, Bar::new(v * scale));
            }
        }
    }
    if !values.iter().flatten().any(Option::is_some) {
        return Ok(None);
    }
    values.resize_with(cats.len(), Vec::new);
    Ok(Some(Chart::Bars(Bars {
        subtitle: subtitle.into(),
        unit: unit.into(),
        axis: Axis::Linear,
        categories: cats.to_vec(),
        series: vec!["load".into(), "withdrawal".into()],
        values,
        first_color,
    })))
}

/// `vfsr cp bench`'s `results[]` (per path: fpm, kernel, kernel-mirror): the stages' times
/// (else the totals `converge_s`, `withdraw_s`) and the routes per second, with memory per
/// route, the intake replay and the targets in the caption.
fn cp_paths(doc: &Value, rows: &[Node<'_>]) -> Result<Built, Problem> {
    let mut cats = Vec::new();
    for r in rows {
        let mut label = json::str(r, "path")?.to_string();
        if let Some(n) = opt_num(r, "routes")? {
            label.push_str(&format!(" ({} routes)", thousands(n)));
        }
        cats.push(label);
    }
    let mut panels = Vec::new();
    let load_withdrawal = || legend(&["load".into(), "withdrawal".into()]);
    // With the stages drawn, the rates get colours of their own; with the totals, the same
    // two as the totals (load, withdrawal).
    let (mut items, rate_color) = match cp_stage_panels(rows, &cats)? {
        Some((p, stages)) if !p.is_empty() => {
            panels.extend(p);
            (legend(&stages), stages.len())
        }
        _ => {
            let totals = cp_pair(
                rows,
                &cats,
                ["converge_s", "withdraw_s"],
                1.0,
                ("Whole table loaded and withdrawn", "seconds", 0),
            )?;
            panels.extend(totals);
            (load_withdrawal(), 0)
        }
    };
    if panels.is_empty() {
        return Err("results[]: no stage completed and no converge_s or withdraw_s".into());
    }
    if let Some(rates) = cp_pair(
        rows,
        &cats,
        ["routes_per_s", "withdraw_routes_per_s"],
        1e-3,
        (
            "Routes per second, load and withdrawal",
            "thousand routes per second",
            rate_color,
        ),
    )? {
        panels.push(rates);
        if rate_color > 0 {
            for (i, n) in ["load, routes/s", "withdrawal, routes/s"]
                .iter()
                .enumerate()
            {
                items.push(LegendItem {
                    name: n.to_string(),
                    color: rate_color + i,
                    dashed: false,
                });
            }
        }
    }
    let mut detail = Vec::new();
    if let Some(t) = table_source(doc) {
        detail.push(t);
    }
    if let Some(sp) = doc.get("speaker").and_then(Value::as_str) {
        detail.push(format!("speaker {sp}"));
    }
    let intake = doc.get("intake");
    let vfsr_bpr = intake
        .and_then(|i| i.get("bytes_per_route"))
        .and_then(Value::as_f64);
    let kernel_bpr = doc.get("kernel_bytes_per_route").and_then(Value::as_f64);
    if vfsr_bpr.is_some() || kernel_bpr.is_some() {
        let f = |b: Option<f64>| b.map_or("-".to_string(), |b| format!("{b:.0}"));
        detail.push(format!(
            "memory per route: vfsrd {} bytes, kernel {} bytes",
            f(vfsr_bpr),
            f(kernel_bpr)
        ));
    }
    if let Some(r) = intake
        .and_then(|i| i.get("routes_per_s"))
        .and_then(Value::as_f64)
    {
        detail.push(format!(
            "zebra's recorded FPM stream replayed into vfsrd: {:.2} M routes/s",
            r / 1e6
        ));
    }
    for r in rows {
        if let Some(Value::Array(p)) = r.v.get("problems") {
            let path = r.v.get("path").and_then(Value::as_str).unwrap_or("?");
            for x in p.iter().filter_map(Value::as_str) {
                detail.push(format!("problem in {path}: {x}"));
            }
        }
    }
    if let Some(t) = targets_text(doc) {
        detail.push(t);
    }
    Ok(Built {
        canvas: canvas("Full-table BGP convergence", items, 1, panels),
        detail: detail.join("; "),
    })
}

fn cp_convergence(doc: &Value) -> Result<Built, Problem> {
    let root = json::root(doc);
    if let Some(results) = root.opt("results")? {
        let rows = results.items()?;
        if rows.is_empty() {
            return Err("results: empty".into());
        }
        if rows
            .iter()
            .all(|r| r.v.get("path").is_some_and(Value::is_string))
        {
            return cp_paths(doc, &rows);
        }
    }
    generic(
        doc,
        "Full-table BGP convergence",
        (&[("_s", 1.0), ("seconds", 1.0)], "Convergence", "seconds"),
        "no convergence times (numbers whose key ends in _s) in its records",
    )
}

/// All figure ids, in page order.
#[cfg(test)]
pub fn figure_ids() -> Vec<&'static str> {
    SECTIONS
        .iter()
        .flat_map(|s| s.figures.iter().map(|f| f.id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn marks(b: &Built) -> usize {
        b.canvas.render().matches("class=\"mark ").count()
    }

    #[test]
    fn lpm_figures_read_results_and_sweep() {
        let doc = json!({
            "table": {"source": "synthetic"},
            "results": [
                {"backend": "poptrie", "variant": "s=18", "family": "v4", "traffic": "uniform4",
                 "mlps": {"median": 200.0, "min": 100.0, "max": 230.0}, "mismatches": 0},
                {"backend": "radix", "variant": "", "family": "v4", "traffic": "uniform4",
                 "mlps": {"median": 2.5, "min": 2.0, "max": 3.0}, "mismatches": 3},
                {"backend": "poptrie", "variant": "s=18", "family": "v6", "traffic": "matched6",
                 "mlps": {"median": 60.0, "min": 50.0, "max": 70.0}}
            ],
            "skipped": [{"backend": "rte_lpm", "family": "v6", "reason": "no"}],
            "lctrie_sweep": [
                {"threshold": "0", "root_threshold": "0", "mlps": 20.0, "mlps_min": 18.0, "mlps_max": 22.0, "bytes": 1048576, "nodes": 10},
                {"threshold": "50", "root_threshold": "30", "mlps": 24.0, "mlps_min": 20.0, "mlps_max": 26.0, "bytes": 2097152, "nodes": 12}
            ]
        });
        let b = lpm_rate(&doc).unwrap_or_else(|e| panic!("{e}"));
        // 3 bars, 3 whiskers.
        assert_eq!(marks(&b), 6);
        let svg = b.canvas.render();
        assert!(svg.contains("radix ✗ 3 wrong"));
        assert!(svg.contains("poptrie (s=18)"));
        assert!(b.detail.contains("table: synthetic") && b.detail.contains("rte_lpm (v6)"));
        let s = lctrie_sweep(&doc).unwrap_or_else(|e| panic!("{e}"));
        // Two lines, four points, two whiskers.
        assert_eq!(marks(&s), 8);
        assert!(s.canvas.render().contains("50 (root 30)"));
        let mut no_sweep = doc.clone();
        no_sweep["lctrie_sweep"] = json!([]);
        assert!(
            matches!(lctrie_sweep(&no_sweep), Err(Problem::Absent(e)) if e.contains("--no-sweep"))
        );
        if let Some(m) = no_sweep.as_object_mut() {
            m.remove("lctrie_sweep");
        }
        assert!(matches!(lctrie_sweep(&no_sweep), Err(Problem::Absent(_))));
    }

    #[test]
    fn a_wrong_field_is_named() {
        let doc = json!({"results": [{"design": "split", "family": "v4", "flows": 1,
            "workers": "two", "total_mpps": 3.0}]});
        assert_eq!(
            fwd_workers(&doc).err(),
            Some(Problem::Shape(json::ShapeError::Kind {
                path: "results[0].workers".into(),
                expected: "a number",
                found: "a string"
            }))
        );
        assert_eq!(
            fib_reader(&json!({}))
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("reader: missing")
        );
    }

    #[test]
    fn fwd_panels_per_family_and_flows() {
        let mut rows = Vec::new();
        for fam in ["v4", "v6"] {
            for flows in [1, 1000] {
                for d in ["legacy", "split"] {
                    for w in [1, 2] {
                        rows.push(json!({"design": d, "family": fam, "flows": flows,
                            "workers": w, "total_mpps": w as f64 * 2.0, "mpps_per_worker": 2.0}));
                    }
                }
            }
        }
        let b = fwd_workers(&json!({ "results": rows })).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.canvas.panels.len(), 4);
        assert_eq!(b.canvas.cols, 2);
        // 4 panels × 2 designs × (1 line + 2 points).
        assert_eq!(marks(&b), 24);
    }

    #[test]
    fn generic_records_find_latencies_rates_and_series() {
        let doc = json!({
            "results": [
                {"setup": "separated", "latency_us": {"bgp_idle": 100.0, "bgp_flood": 120.0},
                 "tcp_rr_flood_ms": {"median": 0.5, "min": 0.4, "max": 0.9},
                 "updates_per_s": 5000.0},
                {"setup": "shared", "latency_us": {"bgp_idle": 110.0, "bgp_flood": 9000.0},
                 "tcp_rr_flood_ms": {"median": 30.0, "min": 20.0, "max": 40.0},
                 "routes": [[0.0, 0], [1.0, 500000], [2.0, 1000000]]}
            ]
        });
        let b = cpflood_latency(&doc).unwrap_or_else(|e| panic!("{e}"));
        let svg = b.canvas.render();
        // Idle before flood in the legend; ms converted to µs; log axis for a wide spread.
        let idle = svg.find("latency_us.bgp_idle").unwrap_or(usize::MAX);
        let flood = svg.find("latency_us.bgp_flood").unwrap_or(0);
        assert!(idle < flood);
        assert!(svg.contains("shared — tcp_rr_flood_ms: 30000 µs (min 20000, max 40000)"));
        assert!(svg.contains("(log scale)"));
        assert_eq!(b.canvas.panels.len(), 3);
        assert!(b.detail.contains("rates: updates_per_s"));
        assert!(b.detail.contains("over time: shared"));
        let e = cp_convergence(&json!({"results": [{"path": "fpm", "routes": 5}]}));
        assert!(e.is_err_and(|e| e.to_string().contains("_s")));
        let ok = cp_convergence(&json!({"paths": [
            {"path": "fpm", "convergence_s": 12.0, "progress": [{"t_s": 0.0, "routes": 0}, {"t_s": 12.0, "routes": 900000}]},
            {"path": "kernel", "convergence_s": 40.0}
        ]}))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok.canvas.panels.len(), 2);
        assert!(records(&json!({"x": 1})).is_err());
    }

    #[test]
    fn cpflood_summary_per_phase() {
        let phase = |mode: &str, label: &str, rr99: f64, ann: Value| {
            json!({"mode": mode, "label": label,
                "flood": {"offered_pps": 2.0e6, "forwarded_pps": 1.0e6, "core1_busy": 0.9},
                "tcp_rr_us": {"transactions": 100, "per_second": 50.0, "p50": 80.0, "p90": 90.0,
                              "p99": rr99, "max": 500.0, "unanswered": 0},
                "ping_us": {"sent": 10, "answered": 10, "p50": 60.0, "p99": 70.0, "max": 90.0},
                "announce_to_fib_ms": ann})
        };
        let doc = json!({
            "cpu": "x", "config": {"table": "synthetic", "seconds": 60, "rounds": 1},
            "summary": [
                phase("idle", "(a) idle", 100.0, json!({"announced": 5, "p50": 3.0, "max": 9.0})),
                phase("separated", "(b) flood, separated", 120.0,
                      json!({"announced": 5, "p50": 4.0, "max": 12.0})),
                phase("shared-core", "(c) flood, on the worker's core", 9000.0,
                      json!({"announced": 5, "p50": null, "max": null})),
            ],
            "phases": [{"mode": "idle", "tcp_rr_us": {"p50": 1.0}}],
            "targets": {"session_never_drops": {"met": true, "resets": 0},
                        "rr_p99_within_1_5x_idle": {"met": false, "ratio": 90.0,
                                                    "idle_p99_us": 100.0, "flood_p99_us": 120.0},
                        "announcement_within_1s": {"met": true, "max_ms": 12.0}}
        });
        let b = cpflood_latency(&doc).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.canvas.panels.len(), 2);
        // 3 phases × 4 latencies + 2 phases × 2 announcement times.
        assert_eq!(marks(&b), 16);
        let svg = b.canvas.render();
        assert!(
            svg.contains("(c) flood, on the worker&#39;s core — TCP to the router, p99: 9000 µs")
        );
        assert!(svg.contains("(log scale)"));
        assert_eq!(
            b.detail,
            "table: synthetic; 60 s per phase; 1 round; targets: an announcement reaches the \
             FIB within 1 s: met (max 12 ms); TCP request/response p99 under flood ≤ 1.5× \
             idle: not met (90.0×); the BGP session never drops: met"
        );
        let mut silent = doc.clone();
        for ph in 0..3 {
            for (o, f) in [
                ("tcp_rr_us", "p50"),
                ("tcp_rr_us", "p99"),
                ("ping_us", "p50"),
            ] {
                silent["summary"][ph][o][f] = Value::Null;
            }
            silent["summary"][ph]["ping_us"]["p99"] = Value::Null;
            silent["summary"][ph]["announce_to_fib_ms"] = json!({"p50": null, "max": null});
        }
        assert!(cpflood_latency(&silent).is_err_and(|e| e.to_string().contains("no phase")));
        let mut bad = doc.clone();
        bad["summary"][1]["ping_us"]["p99"] = json!("slow");
        assert_eq!(
            cpflood_latency(&bad)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("summary[1].ping_us.p99: expected a number, found a string")
        );
    }

    #[test]
    fn cp_stages_in_pipeline_order() {
        let phase = |bgpd: f64, vfsr: Value| {
            json!({"stages": {
                "bgpd has the routes (pfxRcd)": {"first_s": 0.1, "all_s": bgpd},
                "kernel FIB (proto bgp)": {"first_s": 0.5, "all_s": bgpd + 4.0},
                "vfsr RIB/FIB (stats file)": {"first_s": 0.6, "all_s": vfsr},
                "zebra has them from bgpd": {"first_s": 0.2, "all_s": bgpd + 1.0},
            }, "vfsr": null, "cpu_s": {"bgpd": 3.0}})
        };
        let doc = json!({"table": "synthetic", "speaker": "bird", "results": [
            {"path": "fpm", "routes": 1000, "converge_s": 9.0, "withdraw_s": 5.0,
             "routes_per_s": 111.0, "load": phase(3.0, json!(9.0)),
             "withdrawal": phase(1.0, json!(null))},
            {"path": "kernel", "routes": 1000, "converge_s": 7.0, "withdraw_s": 4.0,
             "load": phase(3.5, json!(null)), "withdrawal": phase(1.5, json!(null))},
        ]});
        let b = cp_convergence(&doc).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.canvas.panels.len(), 3);
        // Load: 4 + 3 stages; withdrawal: 3 + 3; one rate (fpm's load).
        assert_eq!(marks(&b), 14);
        let names: Vec<&str> = b.canvas.legend.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "bgpd has the routes (pfxRcd)",
                "zebra has them from bgpd",
                "kernel FIB (proto bgp)",
                "vfsr RIB/FIB (stats file)",
                "load, routes/s",
                "withdrawal, routes/s"
            ]
        );
        let svg = b.canvas.render();
        assert!(svg.contains(
            "fpm (1,000 routes) — vfsr RIB/FIB (stats file): 9 seconds; first change at 0.60 s"
        ));
        assert!(svg.contains("fpm (1,000 routes) — load: 0.111 thousand routes per second"));
        assert_eq!(b.detail, "table: synthetic; speaker bird");
    }

    #[test]
    fn cp_without_stages_draws_the_totals_and_names_problems_and_targets() {
        let doc = json!({"cpu": "x", "table": "synthetic", "speaker": "gobgp",
            "results": [
                {"path": "fpm", "routes": 2000, "converge_s": 4.0, "withdraw_s": 2.0,
                 "routes_per_s": 500.0, "withdraw_routes_per_s": 1000.0,
                 "load": {"stages": {"bgpd": {"first_s": null, "all_s": null}}},
                 "withdrawal": null, "problems": ["vfsr's FIB lacks 3 routes"]},
                {"path": "kernel", "routes": 2000, "converge_s": 5.0, "withdraw_s": null,
                 "routes_per_s": 400.0, "withdraw_routes_per_s": null, "problems": []}
            ],
            "intake": {"routes_per_s": 1.25e6, "bytes_per_route": 210.4},
            "kernel_bytes_per_route": 330.0,
            "targets": {"intake >= 1M routes/s": {"met": true, "detail": "1.25 M routes/s: met"}}
        });
        let b = cp_convergence(&doc).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.canvas.panels.len(), 2);
        // Totals: 2 + 1; rates: 2 + 1.
        assert_eq!(marks(&b), 6);
        let names: Vec<&str> = b.canvas.legend.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["load", "withdrawal"]);
        assert!(b
            .canvas
            .render()
            .contains("kernel (2,000 routes) — load: 5 seconds"));
        assert_eq!(
            b.detail,
            "table: synthetic; speaker gobgp; memory per route: vfsrd 210 bytes, kernel 330 \
             bytes; zebra's recorded FPM stream replayed into vfsrd: 1.25 M routes/s; problem \
             in fpm: vfsr's FIB lacks 3 routes; targets: intake >= 1M routes/s: 1.25 M \
             routes/s: met"
        );
        let none = json!({"results": [{"path": "fpm", "converge_s": null}]});
        assert!(cp_convergence(&none).is_err_and(|e| e.to_string().contains("no stage")));
        let bad = json!({"results": [{"path": "fpm", "converge_s": "soon"}]});
        assert_eq!(
            cp_convergence(&bad).err().map(|e| e.to_string()).as_deref(),
            Some("results[0].converge_s: expected a number, found a string")
        );
    }

    #[test]
    fn kinds_and_ids() {
        for k in Kind::ALL {
            assert_eq!(Kind::from_name(k.name()), Some(k));
        }
        assert_eq!(
            Kind::Cpflood.command("docs/bench"),
            "vfsr cp flood --json docs/bench/cpflood-YYYY-MM-DD.json"
        );
        let ids = figure_ids();
        let mut dedup = ids.clone();
        dedup.sort_unstable();
        dedup.dedup();
        assert_eq!(ids.len(), dedup.len());
        assert_eq!(thousands(1_000_000.0), "1,000,000");
        assert_eq!(thousands(999.0), "999");
    }
}
