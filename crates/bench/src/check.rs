//! A benchmark's targets checked against its run: each figure beside its bound, met or not,
//! printed under the run's table and written to its JSON as `targets` (`vfsr lpm bench`,
//! `vfsr fwd bench`).

use serde::Serialize;

/// One target checked against a run: the figure, its bound and whether it holds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    pub what: String,
    pub value: f64,
    pub target: f64,
    /// The bound is an upper one (memory, time) rather than a lower one (a rate ratio).
    pub at_most: bool,
    pub met: bool,
}

impl Check {
    /// A figure that must reach `target`.
    pub fn at_least(what: String, value: f64, target: f64) -> Self {
        Check {
            what,
            value,
            target,
            at_most: false,
            met: value >= target,
        }
    }

    /// A figure that must stay within `target`.
    pub fn at_most(what: String, value: f64, target: f64) -> Self {
        Check {
            what,
            value,
            target,
            at_most: true,
            met: value <= target,
        }
    }
}

/// Formats checks as lines: what, the figure, the target and whether it is met.
pub fn render(checks: &[Check]) -> String {
    let mut s = String::new();
    for c in checks {
        s.push_str(&format!(
            "  {:<58} {:>8.2}  target {} {:<5}  {}\n",
            c.what,
            c.value,
            if c.at_most { "<=" } else { ">=" },
            c.target,
            if c.met { "met" } else { "NOT met" }
        ));
    }
    s
}
