//! Percentile bootstrap confidence interval of a difference `stat(new) − stat(base)`.
//!
//! Each of [`RESAMPLES`] rounds draws `n_base` values from `base` and `n_new` values from
//! `new` with replacement, computes the statistic (median or mean) of each and keeps the
//! difference; the interval is the `α/2` and `1 − α/2` quantiles of the differences
//! (nearest rank). The generator is [`SplitMix64`] with the fixed seed [`SEED`], so the same
//! inputs always print the same interval.
//!
//! The interval complements the rank test: it says how large the shift is, in the data's own
//! units. The significance verdict comes from the test, not from the interval.

use serde::Serialize;

use super::rng::SplitMix64;

/// Bootstrap rounds.
pub const RESAMPLES: usize = 1000;
/// Seed of the resampling generator.
pub const SEED: u64 = 0x5EED_57A1_15C0_9E00;

/// Which statistic is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Statistic {
    /// Median (lower median for even counts).
    Median,
    /// Arithmetic mean.
    Mean,
}

/// A confidence interval `[low, high]` of `stat(new) − stat(base)`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// What was compared.
    pub statistic: Statistic,
    /// Confidence level (e.g. 0.95).
    pub level: f64,
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
}

fn stat(values: &mut [f64], which: Statistic) -> f64 {
    match which {
        Statistic::Mean => values.iter().sum::<f64>() / values.len() as f64,
        Statistic::Median => {
            let mid = (values.len() - 1) / 2;
            let (_, m, _) = values.select_nth_unstable_by(mid, |a, b| a.total_cmp(b));
            *m
        }
    }
}

/// The `1 − alpha` bootstrap interval; `None` when a sample is empty.
pub fn difference_interval(
    base: &[f64],
    new: &[f64],
    which: Statistic,
    alpha: f64,
) -> Option<Interval> {
    if base.is_empty() || new.is_empty() {
        return None;
    }
    let mut rng = SplitMix64::new(SEED);
    let mut scratch_b = vec![0.0; base.len()];
    let mut scratch_n = vec![0.0; new.len()];
    let mut diffs = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        for slot in scratch_b.iter_mut() {
            *slot = base[rng.below(base.len())];
        }
        for slot in scratch_n.iter_mut() {
            *slot = new[rng.below(new.len())];
        }
        diffs.push(stat(&mut scratch_n, which) - stat(&mut scratch_b, which));
    }
    diffs.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| {
        let k = ((p * RESAMPLES as f64).ceil() as usize).clamp(1, RESAMPLES) - 1;
        diffs[k]
    };
    Some(Interval {
        statistic: which,
        level: 1.0 - alpha,
        low: q(alpha / 2.0),
        high: q(1.0 - alpha / 2.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifted_samples_exclude_zero() {
        let base: Vec<f64> = (0..200).map(|i| (i % 17) as f64).collect();
        let new: Vec<f64> = base.iter().map(|v| v + 10.0).collect();
        let ci = difference_interval(&base, &new, Statistic::Median, 0.05).unwrap();
        assert!(ci.low > 5.0 && ci.high < 15.0, "{ci:?}");
        let same = difference_interval(&base, &base, Statistic::Mean, 0.05).unwrap();
        assert!(same.low < 0.0 && same.high > 0.0, "{same:?}");
        // deterministic
        assert_eq!(
            same,
            difference_interval(&base, &base, Statistic::Mean, 0.05).unwrap()
        );
    }

    #[test]
    fn empty_is_none() {
        assert!(difference_interval(&[], &[1.0], Statistic::Mean, 0.05).is_none());
    }
}
