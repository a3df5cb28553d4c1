//! Profile comparison: per function, the share of samples it is the leaf of ("self") and the
//! share of samples it is on the stack of ("children", perf's `--children`), per run, from
//! [`Profile::self_weights`] and [`Profile::total_weights`] divided by the run's total.
//!
//! For each side the shares of its runs give mean ± stddev%; a row's change is the
//! difference of the mean shares (percentage points) and its `%change`. Tests, per column
//! (self and children), Holm-adjusted over the functions of the table:
//!
//! * both sides ≥ 2 runs: Welch's t on the per-run shares;
//! * one run per side whose stacks are single samples (weights that count samples, or one
//!   timestamped sample per stack, as perf.data and `perf script` give): the two-proportion
//!   z-test on the sample counts (each sample is one draw: is it in this function?);
//! * otherwise (e.g. one `perf report` text per side, which has only percentages): no test.
//!
//! Rows: functions whose self or children share reaches [`MIN_SHARE`] on either side.
//! [`ProfileComparison::rises`] and [`ProfileComparison::falls`] list the largest
//! significant changes of the self share in percentage points (where the time is spent);
//! `children_rises` / `children_falls` the same for the children share (which call paths).

use std::collections::HashMap;

use serde::Serialize;
use stallscope_model::profile::{Profile, WeightUnit};

use crate::stats::{self, change_pct, Summary, Verdict};

/// Smallest share (of either column, on either side) for a function to get a row.
pub const MIN_SHARE: f64 = 0.001;

/// Names listed in each of the rises / falls lists.
pub const LISTED: usize = 10;

/// One side of one function.
#[derive(Clone, Debug, Serialize)]
pub struct ShareSide {
    /// Mean self share over the runs (0..1).
    pub self_share: f64,
    /// Stddev of the self share over the runs.
    pub self_stddev: f64,
    /// Mean children share (0..1).
    pub children_share: f64,
    /// Stddev of the children share.
    pub children_stddev: f64,
    /// Self weight summed over the runs.
    pub self_weight: u64,
    /// Children weight summed over the runs.
    pub children_weight: u64,
}

/// One compared function.
#[derive(Clone, Debug, Serialize)]
pub struct FunctionRow {
    /// Symbol name.
    pub function: String,
    /// Base side.
    pub base: ShareSide,
    /// New side.
    pub new: ShareSide,
    /// New − base self share, percentage points.
    pub self_change_pp: f64,
    /// `%change` of the self share.
    pub self_change_pct: Option<f64>,
    /// New − base children share, percentage points.
    pub children_change_pp: f64,
    /// `%change` of the children share.
    pub children_change_pct: Option<f64>,
    /// Test of the self share.
    pub self_verdict: Option<Verdict>,
    /// Test of the children share.
    pub children_verdict: Option<Verdict>,
}

/// The profile comparison.
#[derive(Clone, Debug, Serialize)]
pub struct ProfileComparison {
    /// Runs (profiles) on the base side.
    pub base_runs: usize,
    /// Runs on the new side.
    pub new_runs: usize,
    /// Total weight per base run.
    pub base_totals: Vec<u64>,
    /// Total weight per new run.
    pub new_totals: Vec<u64>,
    /// Which test decides (`welch-t`, `two-proportion-z`, or `none`).
    pub test: &'static str,
    /// Functions, by largest absolute self change first.
    pub functions: Vec<FunctionRow>,
    /// Functions whose self share rose significantly, largest rise first (up to 10).
    pub rises: Vec<String>,
    /// Functions whose self share fell significantly, largest fall first (up to 10).
    pub falls: Vec<String>,
    /// Functions whose children (total) share rose significantly (up to 10).
    pub children_rises: Vec<String>,
    /// Functions whose children share fell significantly (up to 10).
    pub children_falls: Vec<String>,
    /// Findings per run of the detectors that read profiles (`lock-spinning`).
    pub detectors: Vec<crate::findings::DetectorRow>,
}

/// Per function name: per-run (self, children) weights, and per-run totals.
struct SideWeights {
    totals: Vec<u64>,
    by_name: HashMap<String, Vec<(u64, u64)>>,
}

/// The profile with every stack weighing one sample, when its stacks are single samples
/// (weights that count samples, or one timestamped sample per stack); `None` otherwise.
fn as_sample_counts(p: &Profile) -> Option<Profile> {
    if p.unit == WeightUnit::Samples {
        return Some(p.clone());
    }
    if p.stacks.iter().all(|s| s.ts.is_some()) {
        let mut c = p.clone();
        c.unit = WeightUnit::Samples;
        for s in &mut c.stacks {
            s.weight = 1;
        }
        return Some(c);
    }
    None
}

fn side_weights(runs: &[Profile]) -> SideWeights {
    let mut by_name: HashMap<String, Vec<(u64, u64)>> = HashMap::new();
    let mut totals = Vec::with_capacity(runs.len());
    for (r, p) in runs.iter().enumerate() {
        let total = p.total_weight();
        totals.push(total);
        let s = p.self_weights();
        let t = p.total_weights();
        for (id, name) in p.symbols.iter().enumerate() {
            let (sw, tw) = (
                s.get(id).copied().unwrap_or(0),
                t.get(id).copied().unwrap_or(0),
            );
            if sw == 0 && tw == 0 {
                continue; // interned but in no stack: not a function of this run
            }
            let slot = by_name
                .entry(name.to_string())
                .or_insert_with(|| vec![(0, 0); runs.len()]);
            // the same name can be interned once per profile only, but be safe
            slot[r].0 += sw;
            slot[r].1 += tw;
        }
    }
    SideWeights { totals, by_name }
}

fn share_side(
    totals: &[u64],
    per_run: Option<&Vec<(u64, u64)>>,
) -> (ShareSide, Vec<f64>, Vec<f64>) {
    let zeros = vec![(0, 0); totals.len()];
    let w = per_run.unwrap_or(&zeros);
    let share = |x: u64, t: u64| if t == 0 { 0.0 } else { x as f64 / t as f64 };
    let selfs: Vec<f64> = w.iter().zip(totals).map(|(x, &t)| share(x.0, t)).collect();
    let kids: Vec<f64> = w.iter().zip(totals).map(|(x, &t)| share(x.1, t)).collect();
    let (ss, cs) = (Summary::of(&selfs), Summary::of(&kids));
    (
        ShareSide {
            self_share: ss.mean,
            self_stddev: ss.stddev,
            children_share: cs.mean,
            children_stddev: cs.stddev,
            self_weight: w.iter().map(|x| x.0).sum(),
            children_weight: w.iter().map(|x| x.1).sum(),
        },
        selfs,
        kids,
    )
}

/// Compares two sides of profiles (each side ≥ 1 profile).
pub fn compare(base: &[Profile], new: &[Profile], alpha: f64) -> ProfileComparison {
    let b = side_weights(base);
    let n = side_weights(new);
    // sample counts for the two-proportion test (single profile per side)
    let counts = match (base, new) {
        ([pb], [pn]) => as_sample_counts(pb)
            .zip(as_sample_counts(pn))
            .map(|(cb, cn)| (side_weights(&[cb]), side_weights(&[cn]))),
        _ => None,
    };
    let test = if base.len() >= 2 && new.len() >= 2 {
        "welch-t"
    } else if counts.is_some() {
        "two-proportion-z"
    } else {
        "none"
    };
    let count_of = |side: Option<&SideWeights>, name: &str| -> (u64, u64) {
        side.and_then(|s| s.by_name.get(name))
            .and_then(|v| v.first().copied())
            .unwrap_or((0, 0))
    };
    let mut names: Vec<&String> = b.by_name.keys().chain(n.by_name.keys()).collect();
    names.sort();
    names.dedup();
    let (bt, nt): (u64, u64) = counts.as_ref().map_or((0, 0), |(cb, cn)| {
        (cb.totals.iter().sum(), cn.totals.iter().sum())
    });
    let mut rows = Vec::new();
    for name in names {
        let (bs, b_self, b_kids) = share_side(&b.totals, b.by_name.get(name));
        let (ns, n_self, n_kids) = share_side(&n.totals, n.by_name.get(name));
        let biggest = bs
            .self_share
            .max(bs.children_share)
            .max(ns.self_share)
            .max(ns.children_share);
        if biggest < MIN_SHARE {
            continue; // below the row threshold (documented above)
        }
        let bc = count_of(counts.as_ref().map(|c| &c.0), name);
        let nc = count_of(counts.as_ref().map(|c| &c.1), name);
        let verdict = |bv: &[f64], nv: &[f64], bw: u64, nw: u64| -> Option<Verdict> {
            match test {
                "welch-t" => stats::welch(&Summary::of(bv), &Summary::of(nv)).map(|w| {
                    let mut v = Verdict::new("welch-t", w.t, w.p);
                    v.df = Some(w.df);
                    v
                }),
                "two-proportion-z" => stats::two_proportion(bw, bt, nw, nt)
                    .map(|(z, p)| Verdict::new("two-proportion-z", z, p)),
                _ => None,
            }
        };
        rows.push(FunctionRow {
            function: name.clone(),
            self_change_pp: (ns.self_share - bs.self_share) * 100.0,
            self_change_pct: change_pct(bs.self_share, ns.self_share),
            children_change_pp: (ns.children_share - bs.children_share) * 100.0,
            children_change_pct: change_pct(bs.children_share, ns.children_share),
            self_verdict: verdict(&b_self, &n_self, bc.0, nc.0),
            children_verdict: verdict(&b_kids, &n_kids, bc.1, nc.1),
            base: bs,
            new: ns,
        });
    }
    stats::adjust(
        rows.iter_mut().filter_map(|r| r.self_verdict.as_mut()),
        alpha,
    );
    stats::adjust(
        rows.iter_mut().filter_map(|r| r.children_verdict.as_mut()),
        alpha,
    );
    rows.sort_by(|x, y| {
        y.self_change_pp
            .abs()
            .total_cmp(&x.self_change_pp.abs())
            .then(
                y.children_change_pp
                    .abs()
                    .total_cmp(&x.children_change_pp.abs()),
            )
            .then(x.function.cmp(&y.function))
    });
    let rises = ranked(&rows, |r| &r.self_verdict, |r| r.self_change_pp, true);
    let falls = ranked(&rows, |r| &r.self_verdict, |r| r.self_change_pp, false);
    let children_rises = ranked(
        &rows,
        |r| &r.children_verdict,
        |r| r.children_change_pp,
        true,
    );
    let children_falls = ranked(
        &rows,
        |r| &r.children_verdict,
        |r| r.children_change_pp,
        false,
    );
    ProfileComparison {
        base_runs: base.len(),
        new_runs: new.len(),
        base_totals: b.totals,
        new_totals: n.totals,
        test,
        functions: rows,
        rises,
        falls,
        children_rises,
        children_falls,
        detectors: Vec::new(),
    }
}

/// Up to [`LISTED`] functions whose column changed significantly in one direction, largest
/// change first.
fn ranked(
    rows: &[FunctionRow],
    verdict: impl Fn(&FunctionRow) -> &Option<Verdict>,
    change: impl Fn(&FunctionRow) -> f64,
    up: bool,
) -> Vec<String> {
    let mut list: Vec<&FunctionRow> = rows
        .iter()
        .filter(|r| verdict(r).as_ref().is_some_and(|v| v.significant))
        .filter(|r| if up { change(r) > 0.0 } else { change(r) < 0.0 })
        .collect();
    list.sort_by(|a, b| {
        change(b)
            .abs()
            .total_cmp(&change(a).abs())
            .then(a.function.cmp(&b.function))
    });
    list.into_iter()
        .take(LISTED)
        .map(|r| r.function.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::profile::WeightedStack;

    fn profile(stacks: &[(&[&str], u64)]) -> Profile {
        let mut p = Profile::new(WeightUnit::Samples);
        for (frames, w) in stacks {
            let frames = frames.iter().map(|f| p.intern(f, None)).collect();
            p.stacks.push(WeightedStack {
                frames,
                weight: *w,
                ..WeightedStack::default()
            });
        }
        p
    }

    #[test]
    fn single_runs_two_proportion() {
        let base = profile(&[
            (&["osq_lock", "down_write", "do_unlinkat"], 30),
            (&["memcpy", "main"], 70),
        ]);
        let new = profile(&[
            (&["osq_lock", "down_write", "do_unlinkat"], 50),
            (&["memcpy", "main"], 50),
        ]);
        let c = compare(&[base], &[new], 0.05);
        assert_eq!(c.test, "two-proportion-z");
        let osq = c
            .functions
            .iter()
            .find(|r| r.function == "osq_lock")
            .unwrap();
        assert!((osq.self_change_pp - 20.0).abs() < 1e-9);
        let v = osq.self_verdict.as_ref().unwrap();
        // same counts as the two_proportion unit test: p = 0.003892417122778628 (scipy),
        // Holm over 2 self tests (osq_lock, memcpy: both p equal) → 0.0078
        assert!((v.p - 0.003_892_417_122_778_628).abs() < 1e-12);
        assert!(v.significant);
        let dw = c
            .functions
            .iter()
            .find(|r| r.function == "down_write")
            .unwrap();
        assert_eq!(dw.base.self_share, 0.0);
        assert!(dw.self_verdict.is_none(), "no self samples on either side");
        assert!(dw.children_verdict.as_ref().unwrap().significant);
        assert_eq!(c.rises[0], "osq_lock");
        assert_eq!(c.falls, ["memcpy"]);
        assert!(c.children_rises.contains(&"down_write".to_string()));
        assert!(c.children_falls.contains(&"main".to_string()));
    }

    #[test]
    fn repeated_runs_welch_and_no_change() {
        let mk = |a: u64| profile(&[(&["spin", "lock"], a), (&["work", "main"], 100 - a)]);
        let base: Vec<Profile> = [10, 12, 11, 9].iter().map(|&a| mk(a)).collect();
        let same: Vec<Profile> = [11, 10, 12, 10].iter().map(|&a| mk(a)).collect();
        let c = compare(&base, &same, 0.05);
        assert_eq!(c.test, "welch-t");
        assert!(c.rises.is_empty() && c.falls.is_empty(), "{c:?}");
        let up: Vec<Profile> = [30, 33, 29, 31].iter().map(|&a| mk(a)).collect();
        let c = compare(&base, &up, 0.05);
        assert!(c.rises.contains(&"spin".to_string()), "{:?}", c.rises);
        let spin = c.functions.iter().find(|r| r.function == "spin").unwrap();
        assert!(spin.base.self_stddev > 0.0);
    }
}
