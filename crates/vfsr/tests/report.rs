//! `vfsr report` as a user runs it: the page from the committed `docs/bench` runs, every
//! figure present and every plot drawn (in the HTML, then rendered by headless Chromium),
//! and broken or missing benchmark files named in the page instead of failing the command.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn vfsr() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vfsr"))
}

fn bench_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bench")
}

/// A fresh directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vfsr-report-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    d
}

/// The figures each kind of benchmark file gives.
const FIGURES: &[(&str, &[&str])] = &[
    ("lpm", &["lpm-rate", "lctrie-sweep"]),
    ("fwd", &["fwd-workers"]),
    ("fib", &["fib-reader"]),
    ("veth", &["veth-pps", "veth-latency"]),
    ("cpflood", &["cpflood-latency"]),
    ("fpm", &["fpm-intake"]),
    ("cp", &["cp-convergence"]),
];

/// The newest `KIND-YYYY-MM-DD*.json` of each kind in `dir` (kind → file name).
fn newest_by_kind(dir: &Path) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let rd = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".json") else {
            continue;
        };
        let Some((kind, rest)) = stem.split_once('-') else {
            continue;
        };
        if !rest.starts_with("20") {
            continue;
        }
        let newer = out.get(kind).is_none_or(|old| old.as_str() < name.as_str());
        if newer {
            out.insert(kind.to_string(), name);
        }
    }
    out
}

fn report(from: &Path, out: &Path) -> Output {
    vfsr()
        .arg("report")
        .arg("--from")
        .arg(from)
        .arg("-o")
        .arg(out)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("vfsr report: {e}"))
}

/// One `<figure class="plot">` of the page.
#[derive(Debug)]
struct Figure {
    id: String,
    state: String,
    html: String,
}

fn attr(tag: &str, name: &str) -> String {
    let key = format!("{name}=\"");
    tag.find(&key)
        .and_then(|i| {
            let rest = &tag[i + key.len()..];
            rest.find('"').map(|j| rest[..j].to_string())
        })
        .unwrap_or_default()
}

fn figures(html: &str) -> Vec<Figure> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find("<figure class=\"plot\"") {
        let after = &rest[i..];
        let end = after.find("</figure>").expect("a figure is closed") + "</figure>".len();
        let body = &after[..end];
        let tag = &body[..body.find('>').expect("the tag ends")];
        out.push(Figure {
            id: attr(tag, "id"),
            state: attr(tag, "data-state"),
            html: body.to_string(),
        });
        rest = &after[end..];
    }
    out
}

fn marks(s: &str) -> usize {
    s.matches("class=\"mark ").count()
}

#[test]
fn the_page_from_the_committed_runs_has_every_figure_drawn() {
    let dir = temp_dir("committed");
    let out = dir.join("report.html");
    let o = report(&bench_dir(), &out);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("wrote"), "{stderr}");
    let html = std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("{e}"));
    let newest = newest_by_kind(&bench_dir());
    let figs = figures(&html);
    let expected: usize = FIGURES.iter().map(|f| f.1.len()).sum();
    assert_eq!(figs.len(), expected, "one figure per entry");
    let mut drawn = 0;
    for (kind, ids) in FIGURES {
        for id in *ids {
            let found: Vec<&Figure> = figs.iter().filter(|f| f.id == *id).collect();
            assert_eq!(found.len(), 1, "{id}");
            let f = found[0];
            match newest.get(*kind) {
                Some(file) => {
                    assert_eq!(f.state, "drawn", "{id} from {file}: {}", f.html);
                    assert_eq!(f.html.matches("<svg").count(), 1, "{id}");
                    assert!(marks(&f.html) >= 2, "{id}: {} marks", marks(&f.html));
                    // The caption and the plot name the run, the machine and the date.
                    let date = &file[kind.len() + 1..kind.len() + 11];
                    let caption = &f.html[f.html.find("<figcaption>").unwrap_or(0)..];
                    assert!(caption.contains(file.as_str()), "{id}: {caption}");
                    assert!(caption.contains("machine: "), "{id}");
                    assert!(caption.contains(date), "{id}");
                    assert!(f.html.contains(&format!("run: {file} · machine: ")), "{id}");
                    drawn += 1;
                }
                None => {
                    assert_eq!(f.state, "missing", "{id}");
                    assert!(!f.html.contains("<svg"), "{id}");
                    assert!(f.html.contains("No data"), "{id}");
                    assert!(f.html.contains("--json"), "{id}");
                }
            }
        }
    }
    assert!(
        drawn >= 7,
        "the committed runs draw at least 7 figures, got {drawn}"
    );
    // Every SVG on the page has plotted marks, not only axes.
    let svgs: Vec<&str> = html.split("<svg").skip(1).collect();
    assert_eq!(svgs.len(), drawn);
    for s in &svgs {
        let body = &s[..s.find("</svg>").expect("svg closed")];
        assert!(marks(body) >= 2, "an svg without marks");
        assert!(body.contains("<title>"), "marks carry their values");
    }
    // Self-contained: nothing to fetch, nothing to run (the SVG namespace is a name).
    let html = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for bad in [
        "<script", " src=", "<link", "@import", "url(", "http://", "https://",
    ] {
        assert!(!html.contains(bad), "the page contains {bad}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn broken_and_missing_files_are_named_in_the_page() {
    let dir = temp_dir("broken");
    let from = dir.join("bench");
    std::fs::create_dir_all(&from).unwrap_or_else(|e| panic!("{e}"));
    let fib = newest_by_kind(&bench_dir())
        .get("fib")
        .cloned()
        .expect("docs/bench has a fib run");
    std::fs::copy(bench_dir().join(&fib), from.join("fib-2026-12-01.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    // An older good lpm file and a newer truncated one: the newer is used and named.
    std::fs::write(from.join("lpm-2026-11-01.json"), r#"{"results": []}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(from.join("lpm-2026-12-01.json"), r#"{"results": ["#)
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        from.join("fwd-2026-12-01.json"),
        r#"{"results": [{"design": "split", "workers": 1}]}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(from.join("notes.txt"), "not a run").unwrap_or_else(|e| panic!("{e}"));
    let out = dir.join("report.html");
    let o = report(&from, &out);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("lpm-2026-12-01.json: not JSON"), "{stderr}");
    assert!(
        stderr.contains("fwd-2026-12-01.json: results[0].family: missing"),
        "{stderr}"
    );
    assert!(stderr.contains("1 figures drawn"), "{stderr}");
    let html = std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("{e}"));
    let figs = figures(&html);
    let state = |id: &str| {
        figs.iter()
            .find(|f| f.id == id)
            .map(|f| (f.state.as_str(), f.html.as_str()))
            .unwrap_or_else(|| panic!("{id} missing from the page"))
    };
    for id in ["lpm-rate", "lctrie-sweep"] {
        let (s, h) = state(id);
        assert_eq!(s, "error", "{id}");
        assert!(h.contains("lpm-2026-12-01.json: not JSON"), "{h}");
    }
    let (s, h) = state("fwd-workers");
    assert_eq!(s, "error");
    assert!(h.contains("results[0].family: missing"), "{h}");
    let (s, h) = state("fib-reader");
    assert_eq!(s, "drawn");
    assert!(h.contains("fib-2026-12-01.json") && marks(h) >= 2, "{h}");
    let (s, h) = state("veth-pps");
    assert_eq!(s, "missing");
    assert!(h.contains("vfsr fwd bench --veth --json"), "{h}");
    let (s, h) = state("cp-convergence");
    assert_eq!(s, "missing");
    assert!(h.contains("vfsr cp bench --json"), "{h}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_arguments_fail_with_a_reason() {
    let dir = temp_dir("args");
    let o = vfsr()
        .args(["report", "--run", "lmp", "-o"])
        .arg(dir.join("r.html"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("unknown kind \"lmp\""), "{stderr}");
    // An unwritable output is an error, not a panic.
    let o = report(&bench_dir(), Path::new("/nonexistent-dir/r.html"));
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("/nonexistent-dir/r.html"),
        "{o:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Counts, in the rendered page, each figure's marks, the marks drawn with a non-zero box
/// inside their SVG, the SVG's size, its text drawn with a non-zero width, and for a figure
/// without data the height of its box and whether the box's text names a `vfsr ... --json`
/// command; writes them into the DOM for `--dump-dom`.
const CHECK: &str = r#"<script>
(function () {
  var lines = [];
  document.querySelectorAll('figure.plot').forEach(function (f) {
    var svg = f.querySelector('svg');
    var box = svg ? svg.getBoundingClientRect() : null;
    var marks = f.querySelectorAll('svg .mark');
    var drawn = 0;
    marks.forEach(function (m) {
      var r = m.getBoundingClientRect();
      if ((r.width > 0 || r.height > 0) && box &&
          r.left >= box.left - 1 && r.right <= box.right + 1 &&
          r.top >= box.top - 1 && r.bottom <= box.bottom + 1) {
        drawn++;
      }
    });
    var texts = 0;
    if (svg) {
      svg.querySelectorAll('text').forEach(function (t) {
        if (t.getBBox().width > 0) { texts++; }
      });
    }
    var nodata = f.querySelector('.nodata');
    var nodataH = nodata ? Math.round(nodata.getBoundingClientRect().height) : 0;
    var names = nodata && /vfsr [a-z -]+--json/.test(nodata.innerText) ? 1 : 0;
    lines.push([f.id, f.getAttribute('data-state'), marks.length, drawn,
      box ? Math.round(box.width) : 0, box ? Math.round(box.height) : 0, texts,
      nodataH, names].join(' '));
  });
  var p = document.createElement('pre');
  p.id = 'render-check';
  p.textContent = lines.join('\n');
  document.body.appendChild(p);
})();
</script>"#;

/// The browser, if installed (Debian's `chromium` package).
fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Runs `chromium --dump-dom` on `page`, killed after `limit`.
fn dump_dom(browser: &Path, page: &Path, profile: &Path, limit: Duration) -> String {
    let stdout = profile.with_extension("dom");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1000,800",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap_or_else(|e| panic!("{e}")))
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", browser.display()));
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                assert!(status.success(), "chromium: {status}");
                break;
            }
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(100)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium did not finish within {limit:?}");
            }
            Err(e) => panic!("chromium: {e}"),
        }
    }
    std::fs::read_to_string(&stdout).unwrap_or_else(|e| panic!("{e}"))
}

/// Writes the page for `from` into `dir`, renders it in Chromium and checks that every
/// figure with data is drawn whole (every mark inside its plot, with text) and that every
/// figure without data shows a box naming the command that makes its run. Returns the
/// figures drawn.
fn check_in_chromium(browser: &Path, from: &Path, dir: &Path) -> Vec<String> {
    let out = dir.join("report.html");
    let o = report(from, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("{e}"));
    let figs = figures(&html);
    let page = dir.join("render.html");
    let probed = html.replacen("</body>", &format!("{CHECK}</body>"), 1);
    std::fs::write(&page, probed).unwrap_or_else(|e| panic!("{e}"));
    let dom = dump_dom(
        browser,
        &page,
        &dir.join("profile"),
        Duration::from_secs(120),
    );
    let start = dom
        .find("<pre id=\"render-check\">")
        .unwrap_or_else(|| panic!("the check did not run; dom: {}", &dom[..dom.len().min(400)]))
        + "<pre id=\"render-check\">".len();
    let text = &dom[start..start + dom[start..].find("</pre>").expect("pre closed")];
    let rows: BTreeMap<&str, Vec<&str>> = text
        .lines()
        .filter_map(|l| {
            let mut it = l.split(' ');
            Some((it.next()?, it.collect()))
        })
        .collect();
    assert_eq!(rows.len(), figs.len(), "{text}");
    let mut drawn = Vec::new();
    for f in &figs {
        let r = rows
            .get(f.id.as_str())
            .unwrap_or_else(|| panic!("{} not rendered: {text}", f.id));
        let num = |i: usize| -> usize { r.get(i).and_then(|x| x.parse().ok()).unwrap_or(0) };
        let id = &f.id;
        assert_eq!(r.first().copied(), Some(f.state.as_str()), "{id}");
        match f.state.as_str() {
            "drawn" => {
                let n = marks(&f.html);
                assert!(n >= 2, "{id}: {n} marks");
                assert_eq!(num(1), n, "{id}: marks in the DOM");
                assert_eq!(num(2), n, "{id}: every mark drawn inside its plot: {r:?}");
                assert!(num(3) > 300 && num(4) > 100, "{id}: plot size {r:?}");
                assert!(num(5) >= 5, "{id}: text drawn: {r:?}");
                drawn.push(id.clone());
            }
            "missing" => {
                assert_eq!(num(1), 0, "{id}: no plot without data");
                assert!(num(6) > 20, "{id}: the box is shown: {r:?}");
                assert_eq!(num(7), 1, "{id}: the box names the command: {r:?}");
            }
            other => panic!("{id}: {other}: {}", f.html),
        }
    }
    eprintln!(
        "rendered by chromium (id state marks drawn width height texts box names-command):\n{text}"
    );
    drawn
}

#[test]
fn chromium_draws_every_plot() {
    let Some(browser) = chromium() else {
        vfsr_skip::skip("no /usr/bin/chromium (Debian's chromium package; test.sh installs it)");
        return;
    };
    let dir = temp_dir("chromium");
    let drawn = check_in_chromium(&browser, &bench_dir(), &dir);
    // Every kind with a file in docs/bench is drawn.
    let newest = newest_by_kind(&bench_dir());
    for (kind, ids) in FIGURES {
        if newest.contains_key(*kind) {
            for id in *ids {
                assert!(drawn.iter().any(|d| d == id), "{id} from {kind}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `vfsr cp bench --json` document as its writer lays it out (stages per path, nulls for
/// what a path lacks).
const CP: &str = r#"{"cpu": "Test CPU", "table": "synthetic", "prefixes": {"v4": 9000, "v6": 1000},
 "speaker": "gobgpd", "speaker_load_s": 1.5,
 "results": [
  {"path": "fpm", "routes": 10000, "converge_s": 3.2, "withdraw_s": 1.9,
   "routes_per_s": 3125.0, "withdraw_routes_per_s": 5263.2, "session_gap_s": 0.4,
   "load": {"stages": {"bgpd has the routes (pfxRcd)": {"first_s": 0.1, "all_s": 1.0},
     "zebra has them from bgpd": {"first_s": 0.2, "all_s": 1.8},
     "kernel FIB (proto bgp)": {"first_s": 0.3, "all_s": 3.2},
     "zebra's FPM stream": {"first_s": 0.3, "all_s": 2.0},
     "vfsr RIB/FIB (stats file)": {"first_s": 0.5, "all_s": 2.1}},
    "vfsr": {"at_s": 2.1, "stats_file_s": 3.0, "after_source_s": 0.1}, "cpu_s": {"bgpd": 0.8}},
   "withdrawal": {"stages": {"bgpd has the routes (pfxRcd)": {"first_s": 0.1, "all_s": 0.5},
     "zebra has them from bgpd": {"first_s": 0.2, "all_s": 0.9},
     "kernel FIB (proto bgp)": {"first_s": 0.3, "all_s": 1.9},
     "zebra's FPM stream": {"first_s": 0.3, "all_s": 1.0},
     "vfsr RIB/FIB (stats file)": {"first_s": 0.5, "all_s": null}},
    "vfsr": null, "cpu_s": {}},
   "problems": [], "left_behind": {"kernel": 0, "vfsr": 0}},
  {"path": "kernel", "routes": 10000, "converge_s": 2.9, "withdraw_s": 1.7,
   "routes_per_s": 3448.3, "withdraw_routes_per_s": 5882.4, "session_gap_s": 0.4,
   "load": {"stages": {"bgpd has the routes (pfxRcd)": {"first_s": 0.1, "all_s": 1.0},
     "zebra has them from bgpd": {"first_s": 0.2, "all_s": 1.7},
     "kernel FIB (proto bgp)": {"first_s": 0.3, "all_s": 2.9}}, "vfsr": null, "cpu_s": {}},
   "withdrawal": {"stages": {"bgpd has the routes (pfxRcd)": {"first_s": 0.1, "all_s": 0.5},
     "zebra has them from bgpd": {"first_s": 0.2, "all_s": 0.8},
     "kernel FIB (proto bgp)": {"first_s": 0.3, "all_s": 1.7}}, "vfsr": null, "cpu_s": {}},
   "problems": [], "left_behind": {"kernel": 0, "vfsr": null}}],
 "intake": {"routes_per_s": 1200000.0, "bytes_per_route": 180.0, "tail_s": 0.02, "passes": 3},
 "kernel_bytes_per_route": 300.0,
 "targets": {"intake >= 1M routes/s": {"met": true, "detail": "1.20 M routes/s: met"}}}"#;

/// A `vfsr cp flood --json` document's parts the figure reads, as its writer lays them out.
const CPFLOOD: &str = r#"{"cpu": "Test CPU", "cores": 2,
 "config": {"seconds": 6.0, "rounds": 1, "table": "synthetic", "routes": 512},
 "summary": [
  {"mode": "idle", "label": "(a) idle",
   "flood": {"offered_pps": 0.0, "forwarded_pps": 0.0, "core1_busy": 0.2},
   "tcp_rr_us": {"transactions": 2833, "per_second": 472.2, "p50": 122.7, "p90": 182.9,
                 "p99": 1145.0, "max": 2974.0, "unanswered": 0},
   "ping_us": {"sent": 600, "answered": 563, "p50": 99.0, "p99": 453.0, "max": 709.0},
   "bgp": {"resets": 0, "bgpd_connections_dropped": 0, "gobgp_flops": 0,
           "established_after_every_phase": true},
   "announce_to_fib_ms": {"announced": 5, "in_fib_within_phase": 5, "in_fib": 5,
                          "p50": 60.3, "p90": 61.3, "max": 61.3, "resolution_ms": 1.0}},
  {"mode": "separated", "label": "(b) flood, separated",
   "flood": {"offered_pps": 1324430.6, "forwarded_pps": 764745.9, "core1_busy": 0.98},
   "tcp_rr_us": {"transactions": 1312, "per_second": 218.7, "p50": 279.1, "p90": 572.7,
                 "p99": 203347.8, "max": 210140.6, "unanswered": 0},
   "ping_us": {"sent": 600, "answered": 571, "p50": 161.0, "p99": 827.0, "max": 22300.0},
   "bgp": {"resets": 0, "bgpd_connections_dropped": 0, "gobgp_flops": 0,
           "established_after_every_phase": true},
   "announce_to_fib_ms": {"announced": 5, "in_fib_within_phase": 5, "in_fib": 5,
                          "p50": 58.9, "p90": 64.6, "max": 64.6, "resolution_ms": 1.0}},
  {"mode": "shared-core", "label": "(c) flood, on the worker's core",
   "flood": {"offered_pps": 1300000.0, "forwarded_pps": 700000.0, "core1_busy": 1.0},
   "tcp_rr_us": {"transactions": 10, "per_second": 1.7, "p50": 2598.0, "p90": 9000.0,
                 "p99": 235010.0, "max": 240000.0, "unanswered": 3},
   "ping_us": {"sent": 600, "answered": 0, "p50": null, "p99": null, "max": null},
   "bgp": {"resets": 1, "bgpd_connections_dropped": 1, "gobgp_flops": 0,
           "established_after_every_phase": false},
   "announce_to_fib_ms": {"announced": 5, "in_fib_within_phase": 0, "in_fib": 0,
                          "p50": null, "p90": null, "max": null, "resolution_ms": 1.0}}],
 "targets": {"session_never_drops": {"met": true, "resets": 0},
             "rr_p99_within_1_5x_idle": {"met": false, "ratio": 177.6,
                                         "idle_p99_us": 1145.0, "flood_p99_us": 203347.8},
             "announcement_within_1s": {"met": true, "max_ms": 64.6, "in_fib": 5,
                                        "announced": 5}},
 "phases": []}"#;

#[test]
fn chromium_draws_the_convergence_and_flood_figures_too() {
    let Some(browser) = chromium() else {
        vfsr_skip::skip("no /usr/bin/chromium (Debian's chromium package; test.sh installs it)");
        return;
    };
    let dir = temp_dir("chromium-all");
    let from = dir.join("bench");
    std::fs::create_dir_all(&from).unwrap_or_else(|e| panic!("{e}"));
    for (kind, file) in newest_by_kind(&bench_dir()) {
        if kind != "cp" && kind != "cpflood" {
            std::fs::copy(bench_dir().join(&file), from.join(&file))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
        }
    }
    std::fs::write(from.join("cp-2026-11-25.json"), CP).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(from.join("cpflood-2026-11-25.json"), CPFLOOD).unwrap_or_else(|e| panic!("{e}"));
    let drawn = check_in_chromium(&browser, &from, &dir);
    for id in ["cp-convergence", "cpflood-latency"] {
        assert!(drawn.iter().any(|d| d == id), "{id} drawn");
    }
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap_or_else(|e| panic!("{e}"));
    let figs = figures(&html);
    let fig = |id: &str| {
        figs.iter()
            .find(|f| f.id == id)
            .map(|f| f.html.clone())
            .unwrap_or_default()
    };
    // Stages, totals per second and the caption's targets; the phase whose pings all went
    // unanswered draws no ping bars.
    let cp = fig("cp-convergence");
    assert!(
        cp.contains("fpm (10,000 routes) — vfsr RIB/FIB (stats file): 2.1 seconds"),
        "{cp}"
    );
    assert!(cp.contains("memory per route: vfsrd 180 bytes, kernel 300 bytes"));
    assert!(cp.contains("machine: Test CPU"));
    let fl = fig("cpflood-latency");
    assert!(fl.contains("TCP to the router, p99: 203348 µs"), "{fl}");
    assert!(
        !fl.contains("on the worker&#39;s core — ping the router"),
        "{fl}"
    );
    assert!(fl.contains("TCP request/response p99 under flood ≤ 1.5× idle: not met (177.6×)"));
    let _ = std::fs::remove_dir_all(&dir);
}
