//! Statistics for comparisons: descriptive summaries, the tests that decide whether a change
//! is significant, and the multiple-comparison correction.
//!
//! | question | test | module |
//! |---|---|---|
//! | did a latency distribution shift? (many samples per side) | Mann-Whitney U, two-sided | [`mann_whitney`] |
//! | how large is the shift? | percentile bootstrap CI of the median/mean difference | [`bootstrap`] |
//! | did the mean of a metric over repeated runs change? | Welch's t, two-sided | [`welch`] |
//! | did a function's share of profile samples change? (one profile per side) | two-proportion z | [`two_proportion`] |
//!
//! A comparison tests many rows at once (every comm, every metric, every function), so the
//! p-values of one table are adjusted with Holm's step-down method ([`holm`]) before they
//! are compared with α: a change is called significant only when its adjusted p < α.
//!
//! Metric values (perf stat counts, fio IOPS) arrive as decimals and are handled as `f64`;
//! trace times stay integer nanoseconds and are converted only to compute test statistics.

pub mod bootstrap;
pub mod mann_whitney;
pub mod rng;
pub mod special;
pub mod welch;

use serde::Serialize;

pub use bootstrap::{difference_interval, Interval, Statistic};
pub use mann_whitney::{mann_whitney, MannWhitney, MwMethod};
pub use welch::{welch, Welch};

/// Mean and sample standard deviation of repeated runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Number of runs.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1 denominator; 0 for a single run).
    pub stddev: f64,
}

impl Summary {
    /// Summary of raw values.
    pub fn of(values: &[f64]) -> Summary {
        let n = values.len();
        if n == 0 {
            return Summary {
                n,
                mean: f64::NAN,
                stddev: 0.0,
            };
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let stddev = if n < 2 {
            0.0
        } else {
            let ss: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
            (ss / (n - 1) as f64).sqrt()
        };
        Summary { n, mean, stddev }
    }

    /// `stddev / |mean| · 100` (lkp's `±stddev%`); 0 when the mean is 0.
    pub fn stddev_pct(&self) -> f64 {
        if self.mean == 0.0 || !self.mean.is_finite() {
            0.0
        } else {
            self.stddev / self.mean.abs() * 100.0
        }
    }
}

/// `(new − base) / |base| · 100`; `None` when base is 0 or not finite.
pub fn change_pct(base: f64, new: f64) -> Option<f64> {
    (base != 0.0 && base.is_finite() && new.is_finite()).then(|| (new - base) / base.abs() * 100.0)
}

/// Nearest-rank percentile of sorted values: the value at rank `⌈q·n⌉` (q in 0..=1; rank at
/// least 1). `None` when empty. p50 of `[1,2,3,4]` is 2, p99 of 100 values is the 99th.
pub fn percentile_sorted(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// Two-sided two-proportion z-test (pooled): are `x_base / n_base` and `x_new / n_new`
/// samples of the same proportion? `p = 2·P(Z ≥ |z|)`, z positive when the new share is
/// larger. `None` when a side has no samples or the pooled share is 0 or 1.
/// (statsmodels: `proportions_ztest([x_new, x_base], [n_new, n_base])`.)
pub fn two_proportion(x_base: u64, n_base: u64, x_new: u64, n_new: u64) -> Option<(f64, f64)> {
    if n_base == 0 || n_new == 0 {
        return None;
    }
    let (xb, nb, xn, nn) = (x_base as f64, n_base as f64, x_new as f64, n_new as f64);
    let pooled = (xb + xn) / (nb + nn);
    let var = pooled * (1.0 - pooled) * (1.0 / nb + 1.0 / nn);
    if var.is_nan() || var <= 0.0 {
        return None;
    }
    let z = (xn / nn - xb / nb) / var.sqrt();
    Some((z, (2.0 * special::normal_sf(z.abs())).min(1.0)))
}

/// Holm's step-down adjustment of a family of p-values (same order as given):
/// sort ascending, `p'_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j))`.
/// (statsmodels: `multipletests(p, method="holm")[1]`.)
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![1.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        let adj = ((m - rank) as f64 * p[i]).min(1.0);
        running = running.max(adj);
        out[i] = running;
    }
    out
}

/// Welch's t over per-run values as a [`Verdict`], or why it cannot be run (fewer than 2
/// runs on a side, no variance).
pub fn welch_runs(base: &[f64], new: &[f64]) -> (Option<Verdict>, Option<String>) {
    if base.len() < 2 || new.len() < 2 {
        return (None, Some("fewer than 2 runs on a side".to_string()));
    }
    match welch(&Summary::of(base), &Summary::of(new)) {
        Some(w) => {
            let mut v = Verdict::new("welch-t", w.t, w.p);
            v.df = Some(w.df);
            (Some(v), None)
        }
        None => (None, Some("no variance on either side".to_string())),
    }
}

/// The verdict on one compared row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// Test name: `mann-whitney-u`, `welch-t`, `two-proportion-z`.
    pub test: &'static str,
    /// Test statistic (U of the base sample, t, or z).
    pub statistic: f64,
    /// Degrees of freedom (Welch only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub df: Option<f64>,
    /// Null distribution (Mann-Whitney only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<MwMethod>,
    /// Raw two-sided p-value.
    pub p: f64,
    /// Holm-adjusted p-value within the row's table.
    pub p_adjusted: f64,
    /// `p_adjusted < alpha`.
    pub significant: bool,
}

impl Verdict {
    /// A verdict with its raw p-value; [`adjust`] fills in the adjusted one.
    pub fn new(test: &'static str, statistic: f64, p: f64) -> Verdict {
        Verdict {
            test,
            statistic,
            df: None,
            method: None,
            p,
            p_adjusted: p,
            significant: false,
        }
    }
}

/// Applies [`holm`] to every present verdict of a table and decides significance.
pub fn adjust<'a>(verdicts: impl Iterator<Item = &'a mut Verdict>, alpha: f64) {
    let mut list: Vec<&mut Verdict> = verdicts.collect();
    let raw: Vec<f64> = list.iter().map(|v| v.p).collect();
    for (v, adj) in list.iter_mut().zip(holm(&raw)) {
        v.p_adjusted = adj;
        v.significant = adj < alpha;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_and_change() {
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.mean, 5.0);
        // sample stddev: sqrt(32/7)
        assert!((s.stddev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert!((s.stddev_pct() - 42.761_798_705_987_9).abs() < 1e-9);
        assert_eq!(change_pct(200.0, 150.0), Some(-25.0));
        assert_eq!(change_pct(0.0, 1.0), None);
    }

    #[test]
    fn percentiles_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile_sorted(&v, 0.5), Some(50));
        assert_eq!(percentile_sorted(&v, 0.99), Some(99));
        assert_eq!(percentile_sorted(&v, 1.0), Some(100));
        assert_eq!(percentile_sorted(&[1, 2, 3, 4], 0.5), Some(2));
        assert_eq!(percentile_sorted(&[7], 0.0), Some(7));
        assert_eq!(percentile_sorted(&[], 0.5), None);
    }

    #[test]
    fn holm_matches_hand_computation() {
        // p = [0.01, 0.04, 0.03, 0.5], m = 4: sorted 0.01·4=0.04, 0.03·3=0.09,
        // 0.04·2=0.08→max 0.09, 0.5·1=0.5
        let adj = holm(&[0.01, 0.04, 0.03, 0.5]);
        let want = [0.04, 0.09, 0.09, 0.5];
        for (a, w) in adj.iter().zip(want) {
            assert!((a - w).abs() < 1e-12, "{adj:?}");
        }
    }

    #[test]
    fn two_proportion_against_hand_value() {
        // 30/100 vs 50/100: pooled 0.4, se = sqrt(0.4·0.6·0.02) = 0.069282, z = 2.88675
        let (z, p) = two_proportion(30, 100, 50, 100).unwrap();
        assert!((z - 2.886_751_345_948_129).abs() < 1e-9);
        // 2·scipy.stats.norm.sf(2.886751345948129) = 0.003892417122778628
        assert!((p - 0.003_892_417_122_778_628).abs() < 1e-12, "{p}");
        assert!(two_proportion(0, 10, 0, 10).is_none());
    }
}
