//! Welch's t-test (unequal variances), two-sided, for the means of repeated runs.
//!
//! `t = (m_new − m_base) / √(s_b²/n_b + s_n²/n_n)`, degrees of freedom by
//! Welch–Satterthwaite `ν = (s_b²/n_b + s_n²/n_n)² / ((s_b²/n_b)²/(n_b−1) + (s_n²/n_n)²/(n_n−1))`,
//! `p = P(|T_ν| ≥ |t|)` (see [`super::special::t_two_sided`]).
//! (scipy: `ttest_ind(base, new, equal_var=False)`, or `ttest_ind_from_stats` when only the
//! means and standard deviations are known, as with `perf stat -r N`.)
//!
//! Not defined (returns `None`) with fewer than 2 runs on a side, or when both sides have
//! zero variance (every run printed the same number: nothing to test against).

use serde::Serialize;

use super::special::t_two_sided;
use super::Summary;

/// Result of [`welch`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Welch {
    /// t statistic (positive when new > base).
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Welch's test from two summaries (mean, sample standard deviation, n).
pub fn welch(base: &Summary, new: &Summary) -> Option<Welch> {
    if base.n < 2 || new.n < 2 {
        return None;
    }
    let (nb, nn) = (base.n as f64, new.n as f64);
    let vb = base.stddev * base.stddev / nb;
    let vn = new.stddev * new.stddev / nn;
    let se2 = vb + vn;
    if se2.is_nan() || se2 <= 0.0 {
        return None;
    }
    let t = (new.mean - base.mean) / se2.sqrt();
    let df = se2 * se2 / (vb * vb / (nb - 1.0) + vn * vn / (nn - 1.0));
    Some(Welch {
        t,
        df,
        p: t_two_sided(t, df).min(1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn against_scipy() {
        // scipy.stats.ttest_ind([10.1,10.3,9.9,10.0,10.2],[10.9,11.2,10.8,11.5,11.0],
        //                       equal_var=False)
        //   -> statistic=-6.861372411737269 (scipy: base − new), pvalue=0.00036932309791554336,
        //      df=6.349710100701865
        let b = Summary::of(&[10.1, 10.3, 9.9, 10.0, 10.2]);
        let n = Summary::of(&[10.9, 11.2, 10.8, 11.5, 11.0]);
        let w = welch(&b, &n).unwrap();
        assert!((w.t - 6.861_372_411_737_269).abs() < 1e-9, "{w:?}");
        assert!((w.df - 6.349_710_100_701_865).abs() < 1e-9, "{w:?}");
        assert!((w.p - 0.000_369_323_097_915_543_36).abs() < 1e-12, "{w:?}");
    }

    #[test]
    fn undefined_cases() {
        let one = Summary::of(&[1.0]);
        let two = Summary::of(&[1.0, 2.0]);
        assert!(welch(&one, &two).is_none());
        let flat = Summary::of(&[3.0, 3.0, 3.0]);
        assert!(welch(&flat, &flat).is_none());
    }
}
