//! `vfsr report`: one self-contained HTML page with the papers' figures as vfsr reproduces
//! them, drawn from the benchmarks' JSON.
//!
//! ```text
//!   --from docs/bench            newest KIND-YYYY-MM-DD.json of each kind
//!   (--run: vfsr lpm bench --json, fib, fwd, fwd --veth, fpm, cp bench, cp flood → temp dir)
//!        │ serde_json::Value per kind (a file that does not parse: named, no figure)
//!        ▼
//!   figures::SECTIONS: per figure, fields → svg::Canvas (an error names file and field)
//!        ▼
//!   report.html: sections in the papers' order, one <figure> per plot, inline SVG, a
//!   caption naming the run (file), the machine (the JSON's cpu field, else a `CPU:` line
//!   in the run's KIND-DATE.txt, else "not recorded in the run") and the date; a missing
//!   kind gets a box saying which command makes it
//! ```
//!
//! Kinds: `lpm` (lookup rate per engine, LC-trie fill-factor sweep), `fwd` (rate against
//! workers), `fib` (reader under updates), `veth` (pps per core, latency idle and under
//! flood), `fpm` (full-table intake), `cp` (BGP convergence), `cpflood` (control plane
//! under flood). [`figures`] lists which fields each figure reads.
//!
//! `--run` runs the benchmarks first, each as its own `vfsr` process exactly as a user
//! would (`vfsr lpm bench --json FILE`, ...), writing JSON and text output into a temporary
//! directory that is kept. All of them take about half an hour on two cores (`cp flood`
//! alone some six minutes, `lpm bench` with DPDK's `rte_lpm` five); `fwd bench --veth` and
//! `cp flood` need root, `cp bench` and `cp flood` FRR. A run that fails leaves that kind
//! to `--from`'s file, and the page says so.
//!
//! The SVG is written by hand ([`svg`]) rather than with `plotters`: every plotted mark
//! carries a class and a `<title>` with its exact value (shown on hover, and what the
//! rendering test counts), text is placed by the browser with `text-anchor` instead of
//! plotters' estimated font metrics (measuring real ones needs its `ttf` feature, font-kit
//! and the system's fonts), and the command line gains no dependency. The page has no
//! scripts, no external fonts, images or style sheets.

mod figures;
mod json;
mod svg;

use clap::Args;
use figures::{FigureSpec, Kind, Problem, SECTIONS};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};
use svg::esc;

/// `vfsr report` arguments.
#[derive(Args)]
pub struct ReportArgs {
    /// Directory of benchmark JSON named KIND-YYYY-MM-DD.json (KIND: lpm, fib, fwd, veth,
    /// fpm, cp, cpflood); the newest file of each kind is drawn.
    #[arg(long, default_value = "docs/bench")]
    from: PathBuf,
    /// Run the benchmarks first (all, or the kinds named) and draw their results; all of
    /// them take about half an hour, veth and cpflood need root, cp and cpflood FRR. Their
    /// JSON is kept in a temporary directory, printed at the end.
    #[arg(long, value_delimiter = ',', num_args = 0.., value_name = "KINDS")]
    run: Option<Vec<String>>,
    /// The HTML file to write.
    #[arg(short = 'o', long = "out", default_value = "report.html")]
    out: PathBuf,
}

/// A benchmark file found in the `--from` directory.
#[derive(Clone, Debug)]
struct Found {
    path: PathBuf,
    file: String,
    /// From the name (`lpm-2026-11-22.json`), else empty.
    date: String,
    modified: SystemTime,
}

/// The JSON a kind's figures are drawn from.
struct Source {
    /// The file's name, which names the run.
    file: String,
    /// Its path as errors show it.
    shown: String,
    date: String,
    machine: String,
    /// The parsed document, or why it could not be read.
    doc: Result<Value, String>,
    /// Where it came from when that is news (a run made now, a run that failed).
    note: String,
}

/// Why the report could not find, run or write something.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// A directory or file could not be read, made or written.
    #[error("{}: {err}", .path.display())]
    File {
        path: PathBuf,
        #[source]
        err: std::io::Error,
    },
    /// `--run` names a kind there is not.
    #[error("--run: unknown kind {0:?} (kinds: {kinds})", kinds = kind_names())]
    UnknownKind(String),
    /// This program's own executable could not be found to run the benchmarks (shared by
    /// every kind's failed run).
    #[error("cannot find the vfsr executable: {0}")]
    NoExe(#[source] std::sync::Arc<std::io::Error>),
    /// A benchmark could not be started (its command line).
    #[error("{cmd}: {err}")]
    Start {
        cmd: String,
        #[source]
        err: std::io::Error,
    },
    /// A benchmark exited with a failure.
    #[error("{cmd}: {status}")]
    Failed {
        cmd: String,
        status: std::process::ExitStatus,
    },
    /// A benchmark succeeded but left no JSON file.
    #[error("{cmd}: wrote no JSON")]
    NoJson { cmd: String },
}

impl Error {
    fn file(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |err| Error::File {
            path: path.to_path_buf(),
            err,
        }
    }
}

/// Every kind's name, as `--run` takes them.
fn kind_names() -> String {
    let all: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    all.join(", ")
}

/// What the page has for one kind.
enum Input {
    Data(Source),
    /// No file; the reason and the command that makes one.
    Missing(String),
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn unix_secs(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// `t` as YYYY-MM-DD (UTC).
fn date_of(t: SystemTime) -> String {
    let (y, m, d) = civil(unix_secs(t).div_euclid(86_400));
    format!("{y:04}-{m:02}-{d:02}")
}

/// `t` as YYYY-MM-DD HH:MM UTC.
fn stamp_of(t: SystemTime) -> String {
    let s = unix_secs(t);
    let (h, mi) = (s.rem_euclid(86_400) / 3600, s.rem_euclid(3600) / 60);
    format!("{} {h:02}:{mi:02} UTC", date_of(t))
}

/// Whether `s` starts with YYYY-MM-DD followed by the end, `-` or `.`.
fn starts_with_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 10 {
        return false;
    }
    let digits = [0, 1, 2, 3, 5, 6, 8, 9]
        .iter()
        .all(|&i| b.get(i).is_some_and(u8::is_ascii_digit));
    let dashes = b.get(4) == Some(&b'-') && b.get(7) == Some(&b'-');
    digits && dashes && matches!(b.get(10), None | Some(b'-') | Some(b'.'))
}

/// A file name's kind and date: `cpflood-2026-11-25.json` → ("cpflood", "2026-11-25");
/// `fpm.json` → ("fpm", ""). `None` for a name that is not `*.json`.
fn split_name(file: &str) -> Option<(String, String)> {
    let stem = file.strip_suffix(".json")?;
    for (i, c) in stem.char_indices() {
        if c == '-' {
            if let Some(rest) = stem.get(i + 1..) {
                if starts_with_date(rest) {
                    let date = rest.get(..10).unwrap_or("").to_string();
                    return Some((stem.get(..i).unwrap_or("").to_string(), date));
                }
            }
        }
    }
    let kind = stem.split('-').next().unwrap_or(stem);
    Some((kind.to_string(), String::new()))
}

/// The newest file of each kind in `dir`, and the names of JSON files of other kinds.
fn discover(dir: &Path) -> Result<(BTreeMap<Kind, Found>, Vec<String>), Error> {
    let rd = std::fs::read_dir(dir).map_err(Error::file(dir))?;
    let mut best: BTreeMap<Kind, Found> = BTreeMap::new();
    let mut other = Vec::new();
    for entry in rd {
        let entry = entry.map_err(Error::file(dir))?;
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some((kind, date)) = split_name(&file) else {
            continue;
        };
        let Some(kind) = Kind::from_name(&kind) else {
            other.push(file);
            continue;
        };
        let modified = entry
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(UNIX_EPOCH);
        let f = Found {
            path: entry.path(),
            file,
            date,
            modified,
        };
        let order = |f: &Found| {
            let d = if f.date.is_empty() {
                date_of(f.modified)
            } else {
                f.date.clone()
            };
            (d, f.modified, f.file.clone())
        };
        match best.get(&kind) {
            Some(old) if order(old) >= order(&f) => {}
            _ => {
                best.insert(kind, f);
            }
        }
    }
    other.sort();
    Ok((best, other))
}

/// The machine a document names: a `cpu`, `cpu_model`, `machine` or `model` string at its
/// top level or in its `params`, `config`, `host` or `system` object.
fn machine_of(doc: &Value) -> Option<String> {
    let pick = |v: &Value| {
        ["cpu", "cpu_model", "machine", "model"]
            .iter()
            .find_map(|k| {
                v.get(*k)
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
            })
    };
    pick(doc).or_else(|| {
        ["params", "config", "host", "system"]
            .iter()
            .find_map(|o| doc.get(*o).and_then(pick))
    })
}

/// The machine a benchmark's text output names on a `CPU: MODEL (...)` line (the model up to
/// " (" or a semicolon; "Intel(R)" keeps its mark).
fn machine_in_text(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let rest = l.trim_start().strip_prefix("CPU:")?;
        let end = [rest.find(" ("), rest.find(';')]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(rest.len());
        let model = rest.get(..end).unwrap_or("").trim();
        (!model.is_empty()).then(|| model.to_string())
    })
}

/// What a caption says when no file of the run names its machine.
const NO_MACHINE: &str = "not recorded in the run";

/// Reads and parses one file; a failure is kept as the source's error. The machine comes from
/// the JSON, else from the run's text output beside it (`KIND-DATE.txt`).
fn load(f: &Found, shown: String, note: String, this_machine: bool) -> Source {
    let doc = std::fs::read_to_string(&f.path)
        .map_err(|e| format!("{shown}: {e}"))
        .and_then(|text| {
            serde_json::from_str::<Value>(&text).map_err(|e| format!("{shown}: not JSON: {e}"))
        });
    let parsed = doc.as_ref().ok();
    let beside = || {
        std::fs::read_to_string(f.path.with_extension("txt"))
            .ok()
            .and_then(|t| machine_in_text(&t))
    };
    let machine = parsed
        .and_then(machine_of)
        .or_else(beside)
        .unwrap_or_else(|| {
            if this_machine {
                format!("{} (this machine)", crate::machine::cpu_model())
            } else {
                NO_MACHINE.to_string()
            }
        });
    let date = if !f.date.is_empty() {
        f.date.clone()
    } else {
        parsed
            .and_then(|d| d.get("date"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| date_of(f.modified))
    };
    Source {
        file: f.file.clone(),
        shown,
        date,
        machine,
        doc,
        note,
    }
}

/// Runs each kind's benchmark as `vfsr ... --json DIR/KIND-DATE.json` (its standard output
/// to `DIR/KIND-DATE.txt`, its messages to this process's standard error).
fn run_benchmarks(kinds: &[Kind], dir: &Path) -> BTreeMap<Kind, Result<PathBuf, Error>> {
    let mut out = BTreeMap::new();
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            let e = std::sync::Arc::new(e);
            for k in kinds {
                out.insert(*k, Err(Error::NoExe(std::sync::Arc::clone(&e))));
            }
            return out;
        }
    };
    for &k in kinds {
        let date = date_of(SystemTime::now());
        let json = dir.join(format!("{}-{date}.json", k.name()));
        let txt = dir.join(format!("{}-{date}.txt", k.name()));
        let cmd = format!("vfsr {} --json {}", k.args().join(" "), json.display());
        eprintln!("vfsr report: running {cmd}");
        let r = std::fs::File::create(&txt)
            .map_err(Error::file(&txt))
            .and_then(|stdout| {
                Command::new(&exe)
                    .args(k.args())
                    .arg("--json")
                    .arg(&json)
                    .stdout(stdout)
                    .stderr(Stdio::inherit())
                    .stdin(Stdio::null())
                    .status()
                    .map_err(|err| Error::Start {
                        cmd: cmd.clone(),
                        err,
                    })
            })
            .and_then(|status| {
                if !status.success() {
                    Err(Error::Failed {
                        cmd: cmd.clone(),
                        status,
                    })
                } else if !json.is_file() {
                    Err(Error::NoJson { cmd: cmd.clone() })
                } else {
                    Ok(json.clone())
                }
            });
        if let Err(e) = &r {
            eprintln!("vfsr report: {e}");
        }
        out.insert(k, r);
    }
    out
}

/// Parses `--run`'s list: empty means every kind.
fn run_kinds(names: &[String]) -> Result<Vec<Kind>, Error> {
    if names.is_empty() {
        return Ok(Kind::ALL.to_vec());
    }
    names
        .iter()
        .map(|n| Kind::from_name(n.trim()).ok_or_else(|| Error::UnknownKind(n.clone())))
        .collect()
}

/// How a figure came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Drawn,
    Missing,
    Error,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Drawn => "drawn",
            State::Missing => "missing",
            State::Error => "error",
        }
    }
}

/// One `<figure>`, and how it came out (an error also goes to standard error).
fn figure(spec: &FigureSpec, input: &Input) -> (String, State) {
    let mut o = String::new();
    let (body, state, prov) = match input {
        Input::Missing(why) => (
            format!(r##"<div class="nodata">No data: {why}</div>"##),
            State::Missing,
            String::new(),
        ),
        Input::Data(src) => {
            let mut prov = format!(
                "Run <code>{}</code> · machine: {} · date: {}",
                esc(&src.file),
                esc(&src.machine),
                esc(&src.date)
            );
            let built = match &src.doc {
                Ok(d) => (spec.build)(d),
                Err(e) => Err(Problem::Malformed(e.clone())),
            };
            match built {
                Ok(mut b) => {
                    if !b.detail.is_empty() {
                        let _ = write!(prov, " · {}", esc(&b.detail));
                    }
                    if !src.note.is_empty() {
                        let _ = write!(prov, " · {}", esc(&src.note));
                    }
                    b.canvas.footer = format!(
                        "run: {} · machine: {} · date: {}",
                        src.file, src.machine, src.date
                    );
                    (b.canvas.render(), State::Drawn, prov)
                }
                Err(Problem::Absent(why)) => (
                    format!(
                        r#"<div class="nodata">No data: {}: {}</div>"#,
                        esc(&src.shown),
                        esc(&why)
                    ),
                    State::Missing,
                    prov,
                ),
                Err(p) => {
                    // Malformed, or a field missing or of another kind. A document that
                    // does not parse already names its file.
                    let e = p.to_string();
                    let e = if src.doc.is_ok() {
                        format!("{}: {e}", src.shown)
                    } else {
                        e
                    };
                    eprintln!("vfsr report: figure {}: {e}", spec.id);
                    (
                        format!(
                            r#"<div class="error">Cannot draw this figure: {}</div>"#,
                            esc(&e)
                        ),
                        State::Error,
                        prov,
                    )
                }
            }
        }
    };
    let _ = write!(
        o,
        r##"<figure class="plot" id="{}" data-kind="{}" data-state="{}">{body}<figcaption><b>{}.</b> {}"##,
        spec.id,
        spec.kind.name(),
        state.name(),
        esc(spec.title),
        esc(spec.about)
    );
    if !prov.is_empty() {
        let _ = write!(o, r##"<span class="prov">{prov}</span>"##);
    }
    o.push_str("</figcaption></figure>\n");
    (o, state)
}

const STYLE: &str = "body{font-family:'DejaVu Sans',Verdana,sans-serif;max-width:920px;margin:24px auto;padding:0 16px;color:#1a1a1a;line-height:1.45;background:#fff}\
h1{font-size:1.45em;margin-bottom:.3em}h2{font-size:1.15em;margin-top:2.2em;border-bottom:1px solid #ddd;padding-bottom:3px}\
p.seed{color:#555;font-size:.9em;margin:.3em 0 .8em}p.lead{color:#333;font-size:.95em}\
figure.plot{margin:1em 0 1.6em;padding:8px;border:1px solid #e4e4e4;border-radius:4px}\
figure.plot svg{display:block;width:100%;height:auto}\
figcaption{font-size:.88em;color:#333;margin-top:6px}.prov{display:block;color:#666;margin-top:3px}\
.nodata,.error{padding:20px 16px;border:2px dashed #bbb;color:#555;background:#fafafa;font-size:.95em}\
.error{border-color:#c8413b;color:#8a1f1a;background:#fff6f5}\
table.sources{border-collapse:collapse;font-size:.85em;margin:.6em 0}table.sources td,table.sources th{padding:3px 9px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}\
code{font-family:'DejaVu Sans Mono',monospace;font-size:.92em}";

/// Counts of figures drawn, missing and in error.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    drawn: usize,
    missing: usize,
    errors: usize,
}

/// The whole page.
fn page(from: &str, inputs: &BTreeMap<Kind, Input>, other: &[String]) -> (String, Tally) {
    let mut tally = Tally::default();
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>vfsr: the papers' figures</title><style>{STYLE}</style></head><body>\n<header><h1>vfsr: the papers' figures as vfsr reproduces them</h1><p class=\"lead\">Each figure is drawn from the newest benchmark JSON of its kind in <code>{}</code>; its caption names that run, the machine and the date. Hover over a bar or a point for its exact value. Generated {} by <code>vfsr report</code>.</p>\n",
        esc(from),
        stamp_of(SystemTime::now())
    );
    o.push_str("<table class=\"sources\"><tr><th>kind</th><th>run</th><th>machine</th><th>date</th><th>note</th></tr>");
    for k in Kind::ALL {
        match inputs.get(&k) {
            Some(Input::Data(s)) => {
                let state = if s.doc.is_err() { "does not parse" } else { "" };
                let note = [state, s.note.as_str()]
                    .iter()
                    .filter(|x| !x.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join("; ");
                let _ = write!(
                    o,
                    "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    k.name(),
                    esc(&s.file),
                    esc(&s.machine),
                    esc(&s.date),
                    esc(&note)
                );
            }
            _ => {
                let _ = write!(
                    o,
                    "<tr><td>{}</td><td>none</td><td></td><td></td><td></td></tr>",
                    k.name()
                );
            }
        }
    }
    o.push_str("</table>");
    if !other.is_empty() {
        let names: Vec<String> = other
            .iter()
            .map(|n| format!("<code>{}</code>", esc(n)))
            .collect();
        let _ = write!(
            o,
            "<p class=\"seed\">Not drawn (no figure reads them): {}.</p>",
            names.join(", ")
        );
    }
    o.push_str("</header>\n");
    for sec in SECTIONS {
        let _ = writeln!(
            o,
            "<section id=\"{}\"><h2>{}</h2><p class=\"seed\">After: {}</p>",
            sec.id,
            esc(sec.title),
            esc(sec.seed)
        );
        for spec in sec.figures {
            let none = Input::Missing(format!("no {} run", spec.kind.name()));
            let input = inputs.get(&spec.kind).unwrap_or(&none);
            let (html, state) = figure(spec, input);
            match state {
                State::Drawn => tally.drawn += 1,
                State::Missing => tally.missing += 1,
                State::Error => tally.errors += 1,
            }
            o.push_str(&html);
        }
        o.push_str("</section>\n");
    }
    o.push_str("</body></html>\n");
    (o, tally)
}

pub(crate) fn run(a: &ReportArgs) -> Result<(), Error> {
    let from = a.from.display().to_string();
    let (found, other) = match discover(&a.from) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("vfsr report: {e}: no benchmark JSON to read there");
            (BTreeMap::new(), Vec::new())
        }
    };
    let mut runs = BTreeMap::new();
    if let Some(names) = &a.run {
        let kinds = run_kinds(names)?;
        let dir = std::env::temp_dir().join(format!("vfsr-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(Error::file(&dir))?;
        runs = run_benchmarks(&kinds, &dir);
        eprintln!(
            "vfsr report: the runs' JSON and output are in {}",
            dir.display()
        );
    }
    let mut inputs = BTreeMap::new();
    for k in Kind::ALL {
        let ran = runs.get(&k);
        let input = match (ran, found.get(&k)) {
            (Some(Ok(path)), _) => {
                let file = path
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let f = Found {
                    path: path.clone(),
                    date: split_name(&file).map(|s| s.1).unwrap_or_default(),
                    file,
                    modified: SystemTime::now(),
                };
                let shown = path.display().to_string();
                Input::Data(load(&f, shown, "run by vfsr report --run".into(), true))
            }
            (failed, Some(f)) => {
                let note = match failed {
                    Some(Err(e)) => format!("the run failed ({e}); this is the file from {from}"),
                    _ => String::new(),
                };
                let shown = f.path.display().to_string();
                Input::Data(load(f, shown, note, false))
            }
            (failed, None) => {
                let mut why = format!(
                    "no <code>{}-*.json</code> in <code>{}</code>; run <code>{}</code> (or <code>vfsr report --run {}</code>)",
                    k.name(),
                    esc(&from),
                    esc(&k.command(&from)),
                    k.name()
                );
                if let Some(Err(e)) = failed {
                    let _ = write!(why, " (the run failed: {})", esc(&e.to_string()));
                }
                Input::Missing(why)
            }
        };
        if let Input::Data(Source { doc: Err(e), .. }) = &input {
            eprintln!("vfsr report: {e}");
        }
        inputs.insert(k, input);
    }
    let (html, tally) = page(&from, &inputs, &other);
    std::fs::write(&a.out, html).map_err(Error::file(&a.out))?;
    eprintln!(
        "vfsr report: wrote {}: {} figures drawn, {} without data, {} that could not be drawn",
        a.out.display(),
        tally.drawn,
        tally.missing,
        tally.errors
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(11_016), (2000, 2, 29));
        assert_eq!(civil(20_782), (2026, 11, 25));
        assert_eq!(civil(-1), (1969, 12, 31));
        let t = UNIX_EPOCH + Duration::from_secs(20_782 * 86_400 + 13 * 3600 + 5 * 60 + 9);
        assert_eq!(stamp_of(t), "2026-11-25 13:05 UTC");
    }

    #[test]
    fn names_give_kind_and_date() {
        let s = |n: &str| split_name(n).map(|(k, d)| format!("{k} {d}"));
        assert_eq!(s("lpm-2026-11-22.json").as_deref(), Some("lpm 2026-11-22"));
        assert_eq!(
            s("cpflood-2026-11-25.json").as_deref(),
            Some("cpflood 2026-11-25")
        );
        assert_eq!(s("cp-2026-11-25-b.json").as_deref(), Some("cp 2026-11-25"));
        assert_eq!(s("fpm.json").as_deref(), Some("fpm "));
        assert_eq!(s("veth-latest.json").as_deref(), Some("veth "));
        assert_eq!(s("fib-2026-1-22.json").as_deref(), Some("fib "));
        assert_eq!(s("lpm-2026-11-22.txt"), None);
    }

    #[test]
    fn the_newest_file_of_each_kind_is_found() {
        let dir = std::env::temp_dir().join(format!("vfsr-report-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        for f in [
            "lpm-2026-11-20.json",
            "lpm-2026-11-22.json",
            "lpm-2026-11-21.json",
            "fib-2026-11-22.json",
            "ecmp-2026-11-22.json",
            "lpm-2026-11-23.txt",
        ] {
            std::fs::write(dir.join(f), "{}").unwrap_or_else(|e| panic!("{e}"));
        }
        let (best, other) = discover(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            best.get(&Kind::Lpm).map(|f| f.file.as_str()),
            Some("lpm-2026-11-22.json")
        );
        assert_eq!(
            best.get(&Kind::Fib).map(|f| f.file.as_str()),
            Some("fib-2026-11-22.json")
        );
        assert!(!best.contains_key(&Kind::Fwd));
        assert_eq!(other, vec!["ecmp-2026-11-22.json".to_string()]);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(discover(&dir).is_err());
    }

    #[test]
    fn machine_fields() {
        let m = |v: Value| machine_of(&v);
        assert_eq!(
            m(serde_json::json!({"cpu": "Intel(R) Xeon(R)"})).as_deref(),
            Some("Intel(R) Xeon(R)")
        );
        assert_eq!(
            m(serde_json::json!({"params": {"cpu_model": "EPYC"}})).as_deref(),
            Some("EPYC")
        );
        assert_eq!(m(serde_json::json!({"cpu": " "})), None);
        assert_eq!(m(serde_json::json!([1, 2])), None);
        assert_eq!(
            machine_in_text("vfsr fpm bench\nCPU: Intel(R) Xeon(R) Processor (2 cores); x\n")
                .as_deref(),
            Some("Intel(R) Xeon(R) Processor")
        );
        assert_eq!(
            machine_in_text("  CPU: EPYC 9654; pinned").as_deref(),
            Some("EPYC 9654")
        );
        assert_eq!(machine_in_text("Idle CPU: 3 %\nCPU: \n"), None);
    }

    #[test]
    fn the_machine_comes_from_the_json_then_the_text_beside_it() {
        let dir = std::env::temp_dir().join(format!("vfsr-report-mach-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let put = |name: &str, text: &str| {
            std::fs::write(dir.join(name), text).unwrap_or_else(|e| panic!("{e}"));
            Found {
                path: dir.join(name),
                file: name.to_string(),
                date: "2026-11-22".into(),
                modified: UNIX_EPOCH,
            }
        };
        let a = put("lpm-2026-11-22.json", r#"{"cpu": "EPYC"}"#);
        put("lpm-2026-11-22.txt", "CPU: Xeon (2 cores)\n");
        let b = put("fib-2026-11-22.json", "{}");
        put("fib-2026-11-22.txt", "CPU: Xeon (2 cores)\n");
        let c = put("fwd-2026-11-22.json", "{}");
        let machine = |f: &Found| load(f, f.file.clone(), String::new(), false).machine;
        assert_eq!(machine(&a), "EPYC");
        assert_eq!(machine(&b), "Xeon");
        assert_eq!(machine(&c), NO_MACHINE);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn run_kinds_parse() {
        assert_eq!(run_kinds(&[]).map(|k| k.len()).ok(), Some(7));
        assert_eq!(
            run_kinds(&["lpm".into(), " cp".into()]).ok(),
            Some(vec![Kind::Lpm, Kind::Cp])
        );
        assert!(run_kinds(&["lmp".into()]).is_err_and(|e| e
            .to_string()
            .starts_with("--run: unknown kind \"lmp\" (kinds: lpm, ")));
    }

    #[test]
    fn missing_and_broken_inputs_become_boxes() {
        let mut inputs = BTreeMap::new();
        inputs.insert(
            Kind::Lpm,
            Input::Data(Source {
                file: "lpm-2026-11-22.json".into(),
                shown: "d/lpm-2026-11-22.json".into(),
                date: "2026-11-22".into(),
                machine: "unknown".into(),
                doc: Err("d/lpm-2026-11-22.json: not JSON: EOF".into()),
                note: String::new(),
            }),
        );
        inputs.insert(
            Kind::Fib,
            Input::Data(Source {
                file: "fib-2026-11-22.json".into(),
                shown: "d/fib-2026-11-22.json".into(),
                date: "2026-11-22".into(),
                machine: "unknown".into(),
                doc: Ok(serde_json::json!({"reader": "x"})),
                note: String::new(),
            }),
        );
        let (html, tally) = page("d", &inputs, &[]);
        let total = figures::figure_ids().len();
        assert_eq!(
            tally,
            Tally {
                drawn: 0,
                missing: total - 3,
                errors: 3
            }
        );
        assert!(html.contains("d/lpm-2026-11-22.json: not JSON: EOF"));
        assert!(html.contains("d/fib-2026-11-22.json: reader: expected an array, found a string"));
        assert_eq!(html.matches("data-state=\"error\"").count(), 3);
        assert!(!html.contains("<svg"));
    }

    #[test]
    fn a_run_without_the_sweep_has_no_sweep_figure_but_no_error() {
        let doc = serde_json::json!({"results": [{"backend": "poptrie", "variant": "s=18",
            "family": "v4", "traffic": "uniform4",
            "mlps": {"median": 200.0, "min": 100.0, "max": 230.0}}], "lctrie_sweep": []});
        let mut inputs = BTreeMap::new();
        inputs.insert(
            Kind::Lpm,
            Input::Data(Source {
                file: "lpm-2026-11-22.json".into(),
                shown: "d/lpm-2026-11-22.json".into(),
                date: "2026-11-22".into(),
                machine: "EPYC".into(),
                doc: Ok(doc),
                note: String::new(),
            }),
        );
        let (html, tally) = page("d", &inputs, &["ecmp-2026-11-22.json".into()]);
        assert_eq!((tally.drawn, tally.errors), (1, 0));
        assert!(html.contains(
            "No data: d/lpm-2026-11-22.json: this lpm run has no LC-trie sweep (made with --no-sweep)"
        ));
        assert!(html.contains("run: lpm-2026-11-22.json · machine: EPYC · date: 2026-11-22"));
        assert!(
            html.contains("Not drawn (no figure reads them): <code>ecmp-2026-11-22.json</code>")
        );
    }
}
