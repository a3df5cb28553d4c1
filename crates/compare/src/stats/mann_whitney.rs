//! The Mann-Whitney U test (Wilcoxon rank-sum), two-sided.
//!
//! Both samples are ranked together (tied values get the mean of their ranks).
//! `U_base = R_base − n_base(n_base+1)/2`, `U_new = n_base·n_new − U_base`;
//! `U = max(U_base, U_new)`.
//!
//! * **Exact** when there are no ties and `n_base · n_new ≤ 400` ([`EXACT_MAX_PRODUCT`]):
//!   the null distribution of U is the coefficient list of the Gaussian binomial
//!   `[n_base+n_new choose n_base]_q = ∏_{i=1..m} (1 − q^{n+i}) / (1 − q^i)`, computed in
//!   exact integers; `p = min(1, 2·P(U' ≥ U))`.
//!   (scipy: `mannwhitneyu(base, new, method="exact")`.)
//! * **Asymptotic** otherwise: normal approximation with the tie correction
//!   `σ² = n_b n_n / 12 · ((N+1) − Σ(t³−t) / (N(N−1)))` (t = size of each tie group) and the
//!   continuity correction `z = (U − n_b n_n/2 − ½) / σ`, `p = min(1, 2·P(Z ≥ z))`.
//!   When every value is tied (σ = 0) `p = 1`.
//!   (scipy: `mannwhitneyu(base, new, method="asymptotic", use_continuity=True)`.)
//!
//! Ties with small samples use the asymptotic formula (scipy does the same in its `auto`
//! mode); it is conservative for very small samples.

use serde::Serialize;

use super::special::normal_sf;

/// Largest `n_base · n_new` for which the exact distribution is used (no ties).
pub const EXACT_MAX_PRODUCT: usize = 400;

/// Which null distribution gave the p-value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MwMethod {
    /// Exact distribution of U (no ties, small samples).
    Exact,
    /// Normal approximation with tie and continuity corrections.
    Asymptotic,
}

/// Result of [`mann_whitney`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MannWhitney {
    /// U statistic of the base sample (scipy's `statistic` for `mannwhitneyu(base, new)`).
    pub u_base: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Null distribution used.
    pub method: MwMethod,
    /// `U_new / (n_base · n_new)`: the probability that a new value exceeds a base value
    /// (ties count half). 0.5 = no shift.
    pub p_new_greater: f64,
}

/// Two-sided Mann-Whitney U test of `base` against `new`. `None` when a sample is empty.
pub fn mann_whitney(base: &[f64], new: &[f64]) -> Option<MannWhitney> {
    let (n1, n2) = (base.len(), new.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let mut all: Vec<(f64, bool)> = base
        .iter()
        .map(|&v| (v, false))
        .chain(new.iter().map(|&v| (v, true)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = all.len();
    let mut rank_sum_base = 0.0;
    let mut tie_term = 0.0; // Σ (t³ − t)
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && all[j].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i) as f64;
        // ranks i+1 ..= j, mean (i+1+j)/2
        let rank = (i + 1 + j) as f64 / 2.0;
        rank_sum_base += rank * all[i..j].iter().filter(|x| !x.1).count() as f64;
        tie_term += t * t * t - t;
        i = j;
    }
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let u_base = rank_sum_base - n1f * (n1f + 1.0) / 2.0;
    let u_new = n1f * n2f - u_base;
    let u = u_base.max(u_new);
    let p_new_greater = u_new / (n1f * n2f);
    let (p, method) = if tie_term == 0.0 && n1 * n2 <= EXACT_MAX_PRODUCT {
        // INVARIANT: without ties U is an integer.
        (exact_p(n1, n2, u.round() as usize), MwMethod::Exact)
    } else {
        let nf = n as f64;
        let var = n1f * n2f / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
        let p = if var <= 0.0 {
            1.0
        } else {
            let z = (u - n1f * n2f / 2.0 - 0.5) / var.sqrt();
            (2.0 * normal_sf(z)).min(1.0)
        };
        (p, MwMethod::Asymptotic)
    };
    Some(MannWhitney {
        u_base,
        p,
        method,
        p_new_greater,
    })
}

/// Number of arrangements giving each U (index = U) for sample sizes `m`, `n`.
pub fn u_distribution(m: usize, n: usize) -> Vec<u128> {
    let len = m * n + 1;
    let mut c: Vec<i128> = vec![0; len];
    c[0] = 1;
    for i in 1..=m {
        // multiply by (1 − q^{n+i})
        let shift = n + i;
        for k in (shift..len).rev() {
            c[k] -= c[k - shift];
        }
        // divide by (1 − q^i): running sum with stride i
        for k in i..len {
            c[k] += c[k - i];
        }
    }
    c.into_iter().map(|x| x.max(0) as u128).collect()
}

fn exact_p(m: usize, n: usize, u: usize) -> f64 {
    let dist = u_distribution(m, n);
    let total: u128 = dist.iter().sum();
    let tail: u128 = dist.iter().skip(u).sum();
    (2.0 * tail as f64 / total as f64).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distribution_counts_are_binomial_coefficients() {
        // Σ counts = C(m+n, m); symmetric; C(40,20) for the largest exact case. The (3,4)
        // list was enumerated by brute force in python (itertools.combinations).
        let d = u_distribution(3, 4);
        assert_eq!(d.iter().sum::<u128>(), 35);
        assert_eq!(d, vec![1, 1, 2, 3, 4, 4, 5, 4, 4, 3, 2, 1, 1]);
        let d = u_distribution(20, 20);
        assert_eq!(d.iter().sum::<u128>(), 137_846_528_820);
        assert_eq!(d[0], d[400]);
    }

    #[test]
    fn exact_against_scipy() {
        // scipy.stats.mannwhitneyu([1,2,3,4,5],[6,7,8,9,10],method="exact")
        //   -> statistic=0.0, pvalue=0.007936507936507936
        let r = mann_whitney(&[1., 2., 3., 4., 5.], &[6., 7., 8., 9., 10.]).unwrap();
        assert_eq!(r.method, MwMethod::Exact);
        assert_eq!(r.u_base, 0.0);
        assert!((r.p - 0.007_936_507_936_507_936).abs() < 1e-15);
        assert_eq!(r.p_new_greater, 1.0);
    }

    #[test]
    fn asymptotic_with_ties_against_scipy() {
        // scipy.stats.mannwhitneyu([1,2,2,3,3,3,4],[3,4,4,5,5,6],method="asymptotic")
        //   -> statistic=3.5, pvalue=0.012999854364387305
        let r = mann_whitney(&[1., 2., 2., 3., 3., 3., 4.], &[3., 4., 4., 5., 5., 6.]).unwrap();
        assert_eq!(r.method, MwMethod::Asymptotic);
        assert_eq!(r.u_base, 3.5);
        assert!((r.p - 0.012_999_854_364_387_305).abs() < 1e-12, "{}", r.p);
    }

    #[test]
    fn identical_samples_and_degenerate_cases() {
        let x = [5.0; 30];
        let r = mann_whitney(&x, &x).unwrap();
        assert_eq!(r.p, 1.0);
        assert!(mann_whitney(&[], &[1.0]).is_none());
        let r = mann_whitney(&[1.0], &[2.0]).unwrap();
        assert_eq!(r.p, 1.0);
    }
}
