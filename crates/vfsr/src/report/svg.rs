//! Charts as SVG text: horizontal grouped bars and lines, on linear or logarithmic axes,
//! laid out as panels on one canvas.
//!
//! ```text
//!   Canvas ─ title, legend, footer (run · machine · date)
//!     └─ panels in a grid of `cols` columns, each a Chart:
//!          Bars:  categories down the side, one bar per series, min–max whiskers
//!          Lines: x numeric (linear/log) or categories, y linear/log, optional second
//!                 y axis on the right, dashed reference lines
//! ```
//!
//! Every plotted mark (bar, whisker, line, point) carries `class="mark"` and a `<title>`
//! with its exact value, so a browser shows the figure on hover and a test can tell data
//! from axes. Colours, fonts and sizes are attributes on the elements themselves: an SVG cut
//! out of the page still draws the same.

use std::fmt::Write as _;

/// Series colours, in order (distinguishable in colour and in greyscale by position).
pub const PALETTE: [&str; 8] = [
    "#1b6ca8", "#e07b24", "#3a9b48", "#c8413b", "#7e57b5", "#8c6239", "#d660a6", "#6b6b6b",
];

/// The colour of series `i`.
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Escapes text for SVG and HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// `v` with `digits` significant digits, trailing zeros dropped (integers keep all their
/// digits).
pub fn sig(v: f64, digits: i32) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let mag = v.abs().log10().floor() as i32;
    let decimals = (digits - 1 - mag).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// How an axis maps values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    Linear,
    Log,
}

/// The range of an axis, widened to round tick values.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    pub axis: Axis,
    pub lo: f64,
    pub hi: f64,
    /// Distance between linear ticks.
    step: f64,
}

/// 1, 2 or 5 times a power of ten, the smallest such at least `x`.
fn nice_step(x: f64) -> f64 {
    let p = 10f64.powf(x.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * p >= x * 0.999_999 {
            return m * p;
        }
    }
    10.0 * p
}

impl Scale {
    /// A scale covering `values` (non-finite ones ignored; non-positive ones too on a log
    /// axis). A linear scale starts at zero when `zero` is set and the values are positive.
    pub fn fit(axis: Axis, values: impl IntoIterator<Item = f64>, zero: bool) -> Scale {
        let vals: Vec<f64> = values
            .into_iter()
            .filter(|v| v.is_finite() && (axis == Axis::Linear || *v > 0.0))
            .collect();
        let mut lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let mut hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if vals.is_empty() {
            (lo, hi) = (1.0, 10.0);
        }
        match axis {
            Axis::Linear => {
                if zero {
                    lo = lo.min(0.0);
                    hi = hi.max(0.0);
                }
                if hi - lo < 1e-12 {
                    let pad = if hi.abs() > 0.0 { hi.abs() * 0.5 } else { 1.0 };
                    lo -= if zero && lo >= 0.0 { 0.0 } else { pad };
                    hi += pad;
                }
                let step = nice_step((hi - lo) / 5.0);
                Scale {
                    axis,
                    lo: (lo / step).floor() * step,
                    hi: (hi / step).ceil() * step,
                    step,
                }
            }
            Axis::Log => {
                let mut l = 10f64.powf(lo.log10().floor());
                let mut h = 10f64.powf(hi.log10().ceil());
                if h <= l {
                    h = l * 10.0;
                }
                // A value right on a decade boundary still gets room for its whisker.
                if (hi / h) > 0.999 {
                    h *= 10.0;
                }
                if (l / lo) > 0.999 && lo > 0.0 && vals.len() > 1 {
                    l /= 10.0;
                }
                Scale {
                    axis,
                    lo: l,
                    hi: h,
                    step: 0.0,
                }
            }
        }
    }

    /// Where `v` falls between `lo` (0) and `hi` (1); `None` for a value a log axis cannot
    /// show.
    pub fn frac(&self, v: f64) -> Option<f64> {
        if !v.is_finite() {
            return None;
        }
        match self.axis {
            Axis::Linear => Some((v - self.lo) / (self.hi - self.lo)),
            Axis::Log => {
                if v <= 0.0 {
                    return None;
                }
                Some((v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10()))
            }
        }
    }

    /// Tick positions and labels.
    pub fn ticks(&self) -> Vec<(f64, String)> {
        match self.axis {
            Axis::Linear => {
                let decimals = (-self.step.log10().floor()).max(0.0) as usize;
                let n = ((self.hi - self.lo) / self.step).round() as i64;
                (0..=n)
                    .map(|k| {
                        let v = self.lo + k as f64 * self.step;
                        (v, tick_label(v, decimals))
                    })
                    .collect()
            }
            Axis::Log => {
                let d0 = self.lo.log10().round() as i32;
                let d1 = self.hi.log10().round() as i32;
                let mids: &[f64] = if d1 - d0 <= 2 {
                    &[1.0, 2.0, 5.0]
                } else {
                    &[1.0]
                };
                let mut t = Vec::new();
                for d in d0..=d1 {
                    for m in mids {
                        let v = m * 10f64.powi(d);
                        if v <= self.hi * 1.000_001 {
                            t.push((v, tick_label(v, (-d).max(0) as usize)));
                        }
                    }
                }
                t
            }
        }
    }
}

/// A tick value: thousands and millions shortened when round.
fn tick_label(v: f64, decimals: usize) -> String {
    let a = v.abs();
    if a >= 1e6 && (v / 1e6).fract().abs() < 1e-9 {
        format!("{}M", (v / 1e6).round())
    } else if a >= 1e4 && (v / 1e3).fract().abs() < 1e-9 {
        format!("{}k", (v / 1e3).round())
    } else {
        format!("{v:.decimals$}")
    }
}

/// A bar's value, its spread (min–max, drawn as a whisker) and extra tooltip text.
#[derive(Clone, Debug, Default)]
pub struct Bar {
    pub v: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub note: String,
}

impl Bar {
    pub fn new(v: f64) -> Bar {
        Bar {
            v,
            ..Bar::default()
        }
    }
    pub fn spread(mut self, lo: f64, hi: f64) -> Bar {
        self.lo = Some(lo);
        self.hi = Some(hi);
        self
    }
    pub fn note(mut self, note: impl Into<String>) -> Bar {
        self.note = note.into();
        self
    }
}

/// Horizontal grouped bars: one group per category, one bar per series.
#[derive(Clone, Debug)]
pub struct Bars {
    pub subtitle: String,
    pub unit: String,
    pub axis: Axis,
    pub categories: Vec<String>,
    pub series: Vec<String>,
    /// `values[category][series]`.
    pub values: Vec<Vec<Option<Bar>>>,
    /// Palette index of the first series (the others follow).
    pub first_color: usize,
}

/// One point of a line.
#[derive(Clone, Debug, Default)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub note: String,
}

impl Point {
    pub fn new(x: f64, y: f64) -> Point {
        Point {
            x,
            y,
            ..Point::default()
        }
    }
    pub fn spread(mut self, lo: f64, hi: f64) -> Point {
        self.lo = Some(lo);
        self.hi = Some(hi);
        self
    }
    pub fn note(mut self, note: impl Into<String>) -> Point {
        self.note = note.into();
        self
    }
}

/// A named line with its colour (palette index).
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub color: usize,
    pub dashed: bool,
    pub points: Vec<Point>,
}

/// The horizontal axis of a line chart.
#[derive(Clone, Debug)]
pub enum XAxis {
    /// Values on a linear or log scale.
    Numeric { label: String, axis: Axis },
    /// Evenly spaced named positions; a point's `x` is the index.
    Categories { label: String, names: Vec<String> },
}

/// A second y axis on the right for series of another unit.
#[derive(Clone, Debug)]
pub struct RightAxis {
    pub label: String,
    pub axis: Axis,
    pub series: Vec<Series>,
}

/// A dashed horizontal line at `y` with a label.
#[derive(Clone, Debug)]
pub struct RefLine {
    pub label: String,
    pub y: f64,
}

/// Lines with markers.
#[derive(Clone, Debug)]
pub struct Lines {
    pub subtitle: String,
    pub x: XAxis,
    pub y_label: String,
    pub y_axis: Axis,
    /// Start a linear y axis at zero.
    pub y_zero: bool,
    pub series: Vec<Series>,
    pub right: Option<RightAxis>,
    pub refs: Vec<RefLine>,
    /// Shared y range (small multiples); `None`: fitted to this panel.
    pub y_scale: Option<Scale>,
}

/// One panel of a canvas.
#[derive(Clone, Debug)]
pub enum Chart {
    Bars(Bars),
    Lines(Lines),
}

/// A legend entry.
#[derive(Clone, Debug)]
pub struct LegendItem {
    pub name: String,
    pub color: usize,
    pub dashed: bool,
}

/// A whole figure: title, legend, panels, footer.
#[derive(Clone, Debug)]
pub struct Canvas {
    pub title: String,
    pub legend: Vec<LegendItem>,
    pub cols: usize,
    pub panels: Vec<Chart>,
    pub footer: String,
}

/// Canvas width in SVG units (the page scales it to fit).
pub const WIDTH: f64 = 880.0;
const CHAR_W: f64 = 6.3;
const AXIS_STROKE: &str = "#444";
const GRID_STROKE: &str = "#e3e3e3";

impl Chart {
    fn natural_height(&self) -> f64 {
        match self {
            Chart::Bars(b) => {
                let ns = b.series.len().max(1) as f64;
                let head = if b.subtitle.is_empty() { 8.0 } else { 24.0 };
                head + b.categories.len().max(1) as f64 * (ns * 11.0 + 9.0) + 40.0
            }
            Chart::Lines(_) => 290.0,
        }
    }

    fn draw(&self, o: &mut String, x: f64, y: f64, w: f64, h: f64) {
        match self {
            Chart::Bars(b) => draw_bars(b, o, x, y, w, h),
            Chart::Lines(l) => draw_lines(l, o, x, y, w, h),
        }
    }
}

fn subtitle(o: &mut String, s: &str, x: f64, y: f64) -> f64 {
    if s.is_empty() {
        return 8.0;
    }
    let _ = write!(
        o,
        r##"<text x="{x:.1}" y="{:.1}" font-size="12" font-weight="bold" fill="#222">{}</text>"##,
        y + 14.0,
        esc(s)
    );
    24.0
}

fn mark_title(label: &str) -> String {
    format!("<title>{}</title>", esc(label))
}

fn draw_bars(b: &Bars, o: &mut String, x: f64, y: f64, w: f64, h: f64) {
    let head = subtitle(o, &b.subtitle, x + 4.0, y);
    let longest = b
        .categories
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(0) as f64;
    let lw = (longest * CHAR_W + 12.0).clamp(50.0, w * 0.42);
    let (px0, px1) = (x + lw, x + w - 52.0);
    let (py0, py1) = (y + head, y + h - 38.0);
    let all = b.values.iter().flatten().flatten();
    let scale = Scale::fit(
        b.axis,
        all.flat_map(|v| [Some(v.v), v.lo, v.hi]).flatten(),
        true,
    );
    let sx = |v: f64| scale.frac(v).map(|f| px0 + f.clamp(0.0, 1.0) * (px1 - px0));
    o.push_str(r##"<g class="axes">"##);
    for (t, label) in scale.ticks() {
        if let Some(tx) = sx(t) {
            let _ = write!(
                o,
                r##"<line x1="{tx:.1}" y1="{py0:.1}" x2="{tx:.1}" y2="{py1:.1}" stroke="{GRID_STROKE}"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="#444">{}</text>"##,
                py1 + 13.0,
                esc(&label)
            );
        }
    }
    let _ = write!(
        o,
        r##"<line x1="{px0:.1}" y1="{py1:.1}" x2="{px1:.1}" y2="{py1:.1}" stroke="{AXIS_STROKE}"/><line x1="{px0:.1}" y1="{py0:.1}" x2="{px0:.1}" y2="{py1:.1}" stroke="{AXIS_STROKE}"/><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11" fill="#222">{}{}</text>"##,
        (px0 + px1) / 2.0,
        py1 + 30.0,
        esc(&b.unit),
        if b.axis == Axis::Log {
            " (log scale)"
        } else {
            ""
        }
    );
    let ncat = b.categories.len().max(1) as f64;
    let band = (py1 - py0) / ncat;
    let ns = b.series.len().max(1) as f64;
    let t = ((band - 8.0) / ns).clamp(2.0, 14.0);
    for (i, c) in b.categories.iter().enumerate() {
        let cy = py0 + (i as f64 + 0.5) * band;
        let _ = write!(
            o,
            r##"<text x="{:.1}" y="{cy:.1}" dy="0.35em" text-anchor="end" font-size="11" fill="#222">{}</text>"##,
            px0 - 6.0,
            esc(c)
        );
    }
    o.push_str("</g><g class=\"marks\">");
    for (i, (c, row)) in b.categories.iter().zip(&b.values).enumerate() {
        let top = py0 + i as f64 * band + (band - ns * t) / 2.0;
        for (s, v) in row.iter().enumerate() {
            let Some(v) = v else { continue };
            let Some(end) = sx(v.v) else { continue };
            let by = top + s as f64 * t;
            let name = b.series.get(s).map(String::as_str).unwrap_or("");
            let mut tip = format!("{c} — {name}: {} {}", sig(v.v, 3), b.unit);
            if let (Some(lo), Some(hi)) = (v.lo, v.hi) {
                let _ = write!(tip, " (min {}, max {})", sig(lo, 3), sig(hi, 3));
            }
            if !v.note.is_empty() {
                let _ = write!(tip, "; {}", v.note);
            }
            let bw = (end - px0).max(1.0);
            let _ = write!(
                o,
                r##"<rect class="mark bar" x="{px0:.1}" y="{by:.1}" width="{bw:.1}" height="{:.1}" fill="{}">{}</rect>"##,
                (t - 1.0).max(1.0),
                color(b.first_color + s),
                mark_title(&tip)
            );
            let mut label_x = px0 + bw;
            if let (Some(lo), Some(hi)) = (v.lo.and_then(sx), v.hi.and_then(sx)) {
                let wy = by + (t - 1.0) / 2.0;
                let cap = ((t - 1.0) / 2.0).min(3.5);
                let _ = write!(
                    o,
                    r##"<path class="mark whisker" d="M{lo:.1},{wy:.1}H{hi:.1}M{lo:.1},{:.1}V{:.1}M{hi:.1},{:.1}V{:.1}" stroke="#222" stroke-width="1" fill="none">{}</path>"##,
                    wy - cap,
                    wy + cap,
                    wy - cap,
                    wy + cap,
                    mark_title(&tip)
                );
                label_x = label_x.max(hi);
            }
            if t >= 7.0 {
                let _ = write!(
                    o,
                    r##"<text x="{:.1}" y="{:.1}" dy="0.35em" font-size="{:.1}" fill="#333">{}</text>"##,
                    label_x + 3.0,
                    by + (t - 1.0) / 2.0,
                    (t - 1.0).min(10.0),
                    sig(v.v, 3)
                );
            }
        }
    }
    o.push_str("</g>");
}

fn draw_lines(l: &Lines, o: &mut String, x: f64, y: f64, w: f64, h: f64) {
    let head = subtitle(o, &l.subtitle, x + 4.0, y);
    let right_margin = if l.right.is_some() { 60.0 } else { 18.0 };
    let (px0, px1) = (x + 62.0, x + w - right_margin);
    let (py0, py1) = (y + head + 4.0, y + h - 40.0);
    let ys = l
        .series
        .iter()
        .flat_map(|s| &s.points)
        .flat_map(|p| [Some(p.y), p.lo, p.hi])
        .flatten()
        .chain(l.refs.iter().map(|r| r.y));
    let yscale = l
        .y_scale
        .unwrap_or_else(|| Scale::fit(l.y_axis, ys, l.y_zero));
    let xfrac: Box<dyn Fn(f64) -> Option<f64>> = match &l.x {
        XAxis::Numeric { axis, .. } => {
            let all = l
                .series
                .iter()
                .chain(l.right.iter().flat_map(|r| &r.series))
                .flat_map(|s| &s.points)
                .map(|p| p.x);
            let xs = Scale::fit(*axis, all, false);
            Box::new(move |v| xs.frac(v))
        }
        XAxis::Categories { names, .. } => {
            let n = names.len().max(1) as f64;
            Box::new(move |v| Some((v + 0.5) / n))
        }
    };
    let sx = |v: f64| xfrac(v).map(|f| px0 + f * (px1 - px0));
    let sy = |s: &Scale, v: f64| s.frac(v).map(|f| py1 - f.clamp(-0.02, 1.02) * (py1 - py0));
    o.push_str(r##"<g class="axes">"##);
    for (t, label) in yscale.ticks() {
        if let Some(ty) = sy(&yscale, t) {
            let _ = write!(
                o,
                r##"<line x1="{px0:.1}" y1="{ty:.1}" x2="{px1:.1}" y2="{ty:.1}" stroke="{GRID_STROKE}"/><text x="{:.1}" y="{ty:.1}" dy="0.35em" text-anchor="end" font-size="10" fill="#444">{}</text>"##,
                px0 - 5.0,
                esc(&label)
            );
        }
    }
    let (x_label, x_ticks): (String, Vec<(f64, String)>) = match &l.x {
        XAxis::Numeric { label, axis } => {
            let all = l
                .series
                .iter()
                .chain(l.right.iter().flat_map(|r| &r.series))
                .flat_map(|s| &s.points)
                .map(|p| p.x);
            let xs = Scale::fit(*axis, all, false);
            let suffix = if *axis == Axis::Log {
                " (log scale)"
            } else {
                ""
            };
            (format!("{label}{suffix}"), xs.ticks())
        }
        XAxis::Categories { label, names } => (
            label.clone(),
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (i as f64, n.clone()))
                .collect(),
        ),
    };
    for (t, label) in &x_ticks {
        if let Some(tx) = sx(*t) {
            let _ = write!(
                o,
                r##"<line x1="{tx:.1}" y1="{py1:.1}" x2="{tx:.1}" y2="{:.1}" stroke="{AXIS_STROKE}"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="#444">{}</text>"##,
                py1 + 4.0,
                py1 + 15.0,
                esc(label)
            );
        }
    }
    let ylab = format!(
        "{}{}",
        l.y_label,
        if l.y_axis == Axis::Log { " (log)" } else { "" }
    );
    let (lx, ly) = (x + 14.0, (py0 + py1) / 2.0);
    let _ = write!(
        o,
        r##"<line x1="{px0:.1}" y1="{py1:.1}" x2="{px1:.1}" y2="{py1:.1}" stroke="{AXIS_STROKE}"/><line x1="{px0:.1}" y1="{py0:.1}" x2="{px0:.1}" y2="{py1:.1}" stroke="{AXIS_STROKE}"/><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11" fill="#222">{}</text><text transform="rotate(-90 {lx:.1} {ly:.1})" x="{lx:.1}" y="{ly:.1}" text-anchor="middle" font-size="11" fill="#222">{}</text>"##,
        (px0 + px1) / 2.0,
        py1 + 31.0,
        esc(&x_label),
        esc(&ylab)
    );
    let right_scale = l.right.as_ref().map(|r| {
        let vals = r
            .series
            .iter()
            .flat_map(|s| &s.points)
            .flat_map(|p| [Some(p.y), p.lo, p.hi])
            .flatten();
        let s = Scale::fit(r.axis, vals, true);
        for (t, label) in s.ticks() {
            if let Some(ty) = sy(&s, t) {
                let _ = write!(
                    o,
                    r##"<line x1="{px1:.1}" y1="{ty:.1}" x2="{:.1}" y2="{ty:.1}" stroke="{AXIS_STROKE}"/><text x="{:.1}" y="{ty:.1}" dy="0.35em" font-size="10" fill="#444">{}</text>"##,
                    px1 + 4.0,
                    px1 + 6.0,
                    esc(&label)
                );
            }
        }
        let (rx, ry) = (x + w - 10.0, (py0 + py1) / 2.0);
        let _ = write!(
            o,
            r##"<line x1="{px1:.1}" y1="{py0:.1}" x2="{px1:.1}" y2="{py1:.1}" stroke="{AXIS_STROKE}"/><text transform="rotate(90 {rx:.1} {ry:.1})" x="{rx:.1}" y="{ry:.1}" text-anchor="middle" font-size="11" fill="#222">{}</text>"##,
            esc(&r.label)
        );
        s
    });
    for r in &l.refs {
        if let Some(ry) = sy(&yscale, r.y) {
            let _ = write!(
                o,
                r##"<line x1="{px0:.1}" y1="{ry:.1}" x2="{px1:.1}" y2="{ry:.1}" stroke="#777" stroke-dasharray="2 3"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="10" fill="#555">{}</text>"##,
                px1 - 4.0,
                ry - 4.0,
                esc(&r.label)
            );
        }
    }
    o.push_str("</g><g class=\"marks\">");
    let x_name = |v: f64| match &l.x {
        XAxis::Categories { names, .. } => names
            .get(v.max(0.0) as usize)
            .cloned()
            .unwrap_or_else(|| sig(v, 3)),
        XAxis::Numeric { .. } => sig(v, 3),
    };
    let mut draw_series = |s: &Series, scale: &Scale, unit: &str| {
        let pts: Vec<(f64, f64, &Point)> = s
            .points
            .iter()
            .filter_map(|p| Some((sx(p.x)?, sy(scale, p.y)?, p)))
            .collect();
        let stroke = color(s.color);
        let dash = if s.dashed {
            r##" stroke-dasharray="6 4""##
        } else {
            ""
        };
        if pts.len() >= 2 {
            let path: Vec<String> = pts
                .iter()
                .map(|(a, b, _)| format!("{a:.1},{b:.1}"))
                .collect();
            let _ = write!(
                o,
                r##"<polyline class="mark line" points="{}" fill="none" stroke="{stroke}" stroke-width="2"{dash}>{}</polyline>"##,
                path.join(" "),
                mark_title(&s.name)
            );
        }
        for (px, py, p) in &pts {
            let mut tip = format!("{} at {}: {} {unit}", s.name, x_name(p.x), sig(p.y, 3));
            if let (Some(lo), Some(hi)) = (p.lo, p.hi) {
                let _ = write!(tip, " (min {}, max {})", sig(lo, 3), sig(hi, 3));
                if let (Some(a), Some(b)) = (sy(scale, lo), sy(scale, hi)) {
                    let _ = write!(
                        o,
                        r##"<path class="mark whisker" d="M{px:.1},{a:.1}V{b:.1}M{:.1},{a:.1}H{:.1}M{:.1},{b:.1}H{:.1}" stroke="{stroke}" stroke-width="1" fill="none">{}</path>"##,
                        px - 3.0,
                        px + 3.0,
                        px - 3.0,
                        px + 3.0,
                        mark_title(&tip)
                    );
                }
            }
            if !p.note.is_empty() {
                let _ = write!(tip, "; {}", p.note);
            }
            let fill = if s.dashed { "#fff" } else { stroke };
            let _ = write!(
                o,
                r##"<circle class="mark point" cx="{px:.1}" cy="{py:.1}" r="3.5" fill="{fill}" stroke="{stroke}" stroke-width="1.5">{}</circle>"##,
                mark_title(&tip)
            );
        }
    };
    for s in &l.series {
        draw_series(s, &yscale, &l.y_label);
    }
    if let (Some(r), Some(rs)) = (&l.right, right_scale) {
        for s in &r.series {
            draw_series(s, &rs, &r.label);
        }
    }
    o.push_str("</g>");
}

impl Canvas {
    /// The figure as one `<svg>` element.
    pub fn render(&self) -> String {
        let cols = self.cols.max(1);
        let pw = WIDTH / cols as f64;
        let mut legend = String::new();
        // Line charts show a line and its marker; bars (or a mix) a filled box.
        let lines_only = self.panels.iter().all(|p| matches!(p, Chart::Lines(_)));
        let mut lx = 12.0;
        let mut ly = 44.0;
        for it in &self.legend {
            let tw = it.name.chars().count() as f64 * CHAR_W + 34.0;
            if lx + tw > WIDTH - 8.0 && lx > 12.0 {
                lx = 12.0;
                ly += 17.0;
            }
            let c = color(it.color);
            if it.dashed || lines_only {
                let (dash, fill) = if it.dashed {
                    (r#" stroke-dasharray="5 3""#, "#fff")
                } else {
                    ("", c)
                };
                let _ = write!(
                    legend,
                    r##"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{c}" stroke-width="2"{dash}/><circle cx="{:.1}" cy="{:.1}" r="3" fill="{fill}" stroke="{c}" stroke-width="1.5"/>"##,
                    ly - 4.0,
                    lx + 18.0,
                    ly - 4.0,
                    lx + 9.0,
                    ly - 4.0
                );
            } else {
                let _ = write!(
                    legend,
                    r##"<rect x="{lx:.1}" y="{:.1}" width="18" height="9" fill="{c}"/>"##,
                    ly - 9.0
                );
            }
            let _ = write!(
                legend,
                r##"<text x="{:.1}" y="{ly:.1}" font-size="11" fill="#222">{}</text>"##,
                lx + 23.0,
                esc(&it.name)
            );
            lx += tw;
        }
        let top = if self.legend.is_empty() {
            34.0
        } else {
            ly + 10.0
        };
        let rows: Vec<&[Chart]> = self.panels.chunks(cols).collect();
        let heights: Vec<f64> = rows
            .iter()
            .map(|r| r.iter().map(Chart::natural_height).fold(0.0, f64::max))
            .collect();
        let total = top + heights.iter().sum::<f64>() + 26.0;
        let mut o = String::new();
        let _ = write!(
            o,
            r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {total:.0}" width="{WIDTH}" height="{total:.0}" font-family="DejaVu Sans, Verdana, sans-serif" role="img" aria-label="{}"><rect x="0" y="0" width="{WIDTH}" height="{total:.0}" fill="#fff"/><text x="12" y="22" font-size="14" font-weight="bold" fill="#111">{}</text>"##,
            esc(&self.title),
            esc(&self.title)
        );
        o.push_str(&legend);
        let mut y = top;
        for (r, h) in rows.iter().zip(&heights) {
            for (c, chart) in r.iter().enumerate() {
                let _ = write!(o, r##"<g class="panel">"##);
                chart.draw(&mut o, c as f64 * pw, y, pw, *h);
                o.push_str("</g>");
            }
            y += h;
        }
        let _ = write!(
            o,
            r##"<text class="footer" x="12" y="{:.1}" font-size="10" fill="#555">{}</text></svg>"##,
            total - 9.0,
            esc(&self.footer)
        );
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_are_round_and_cover_the_values() {
        let s = Scale::fit(Axis::Linear, [3.2, 17.9], true);
        assert_eq!(s.lo, 0.0);
        assert!(s.hi >= 17.9);
        let t: Vec<String> = s.ticks().into_iter().map(|t| t.1).collect();
        assert_eq!(t, ["0", "5", "10", "15", "20"]);
        let s = Scale::fit(Axis::Linear, [0.11, 0.34], true);
        let t: Vec<String> = s.ticks().into_iter().map(|t| t.1).collect();
        assert_eq!(t, ["0.0", "0.1", "0.2", "0.3", "0.4"]);
    }

    #[test]
    fn log_scale_spans_decades_and_rejects_non_positive_values() {
        let s = Scale::fit(Axis::Log, [0.3, 212.0, 0.0, -1.0, f64::NAN], true);
        assert_eq!((s.lo, s.hi), (0.1, 1000.0));
        let t: Vec<String> = s.ticks().into_iter().map(|t| t.1).collect();
        assert_eq!(t, ["0.1", "1", "10", "100", "1000"]);
        assert_eq!(s.frac(0.0), None);
        assert!((s.frac(10.0).unwrap_or(0.0) - 0.5).abs() < 1e-9);
        let s = Scale::fit(Axis::Log, [9_999.0, 630_670.0], false);
        let t: Vec<String> = s.ticks().into_iter().map(|t| t.1).collect();
        assert_eq!(t.first().map(String::as_str), Some("1000"));
        assert!(t.contains(&"100k".to_string()) && t.contains(&"1M".to_string()));
    }

    #[test]
    fn numbers_and_text() {
        assert_eq!(sig(201.266, 3), "201");
        assert_eq!(sig(21.09, 3), "21.1");
        assert_eq!(sig(0.5178, 3), "0.518");
        assert_eq!(sig(0.0, 3), "0");
        assert_eq!(sig(2.0, 3), "2");
        assert_eq!(sig(2.70, 3), "2.7");
        assert_eq!(sig(1500.0, 3), "1500");
        assert_eq!(
            esc(r##"<a href="x">&'"##),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn every_value_becomes_a_titled_mark() {
        let c = Canvas {
            title: "t".into(),
            legend: vec![LegendItem {
                name: "a".into(),
                color: 0,
                dashed: false,
            }],
            cols: 2,
            panels: vec![
                Chart::Bars(Bars {
                    subtitle: "bars".into(),
                    unit: "Mlps".into(),
                    axis: Axis::Log,
                    categories: vec!["x".into(), "y".into()],
                    series: vec!["a".into(), "b".into()],
                    values: vec![
                        vec![Some(Bar::new(2.0).spread(1.0, 3.0)), None],
                        vec![Some(Bar::new(200.0)), Some(Bar::new(0.0))],
                    ],
                    first_color: 0,
                }),
                Chart::Lines(Lines {
                    subtitle: String::new(),
                    x: XAxis::Categories {
                        label: "workers".into(),
                        names: vec!["1".into(), "2".into()],
                    },
                    y_label: "Mpps".into(),
                    y_axis: Axis::Linear,
                    y_zero: true,
                    series: vec![Series {
                        name: "a<b".into(),
                        color: 1,
                        dashed: false,
                        points: vec![Point::new(0.0, 1.0), Point::new(1.0, 2.0).spread(1.5, 2.5)],
                    }],
                    right: None,
                    refs: vec![RefLine {
                        label: "idle".into(),
                        y: 3.0,
                    }],
                    y_scale: None,
                }),
            ],
            footer: "run · machine · date".into(),
        };
        let svg = c.render();
        // Bars: 2 bars + 1 whisker drawn (the 0 on a log axis is not); lines: 1 polyline,
        // 2 points, 1 whisker.
        assert_eq!(svg.matches("class=\"mark bar\"").count(), 2);
        assert_eq!(svg.matches("class=\"mark whisker\"").count(), 2);
        assert_eq!(svg.matches("class=\"mark line\"").count(), 1);
        assert_eq!(svg.matches("class=\"mark point\"").count(), 2);
        assert!(svg.contains("<title>a&lt;b at 2: 2 Mpps (min 1.5, max 2.5)</title>"));
        assert!(svg.contains("run · machine · date"));
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>"));
    }
}
