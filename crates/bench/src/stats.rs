//! Order statistics of repeated timings.

/// Median, minimum and maximum of a sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    /// Statistics of `xs` (all zero for an empty sample). NaNs sort last.
    pub fn of(xs: &[f64]) -> Stats {
        if xs.is_empty() {
            return Stats {
                median: 0.0,
                min: 0.0,
                max: 0.0,
            };
        }
        let mut v = xs.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Stats {
            median,
            min: v[0],
            max: v[n - 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_even_and_empty() {
        assert_eq!(Stats::of(&[3.0, 1.0, 2.0]).median, 2.0);
        let s = Stats::of(&[4.0, 1.0, 2.0, 3.0]);
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
        assert_eq!(Stats::of(&[]).median, 0.0);
    }
}
