//! Trace comparison: wakeup latency per comm and per task, context-switch and migration
//! rates, and per-detector finding counts. Each file on a side is one run ([`summary`]).
//!
//! * **Latency rows** (per comm, and per (comm, pid)): the wakeup latencies of all runs of a
//!   side are pooled for count, p50, p99 (nearest rank), max, mean, and a bootstrap 1 − α
//!   interval of the difference of the medians, in ns. The verdict depends on the runs:
//!   - one run on a side: each run's wakeups are cut into [`BATCHES`] consecutive batches in
//!     recording order and Welch's t compares the batch means (`welch-t-batch-means`; the
//!     method of batch means for autocorrelated series). Wakeups of one run are not
//!     independent — load comes and goes — so a test with each wakeup as an observation (the
//!     Mann-Whitney U, kept as `pooled_mann_whitney` for information) calls the small shifts
//!     between two runs of one configuration significant; batch means let each side's own
//!     spread over time set the noise level. It still cannot see run-to-run variation that
//!     is constant within a run: only repeated runs measure that;
//!   - at least 2 runs (files) on both sides: the run is the unit of replication —
//!     Welch's t on the per-run mean latencies (test `welch-t-run-means`), so a change must
//!     exceed the variation between runs of one configuration. (The mean, not the median:
//!     wakeup latencies under contention are bimodal — most wakeups run at once, some wait
//!     a whole slice — and the median of a run can sit in either mode; the mean moves with
//!     the share and length of the long waits.) A comm with wakeups in fewer than 2 runs of
//!     a side is not tested. The pooled Mann-Whitney
//!     result is still given (`pooled_mann_whitney`, raw p, for information).
//!
//!   Rows with fewer than [`MIN_TESTED`] wakeups on a side are listed untested. Holm's
//!   adjustment runs over the comm table and, separately, over the task table.
//! * **Tail rows** (per comm): every runnable wait — after a wakeup or a preemption, perf's
//!   sch delay; a CPU hog's whole story is waits after preemption — compared at the tail,
//!   p99 and max, each with its own test: Welch's t on the logarithms of the per-run p99s
//!   (maxima) when both sides have ≥ 2 runs (test `welch-t-run-log-p99`,
//!   `welch-t-run-log-max`), else of the p99s (maxima) of [`BATCHES`] consecutive batches
//!   of each side's one run (`welch-t-batch-log-p99`, `welch-t-batch-log-max`). The run
//!   stays the unit (the waits of one run are not independent); the log because tails
//!   change by factors and their spread grows with them. A test of the central tendency
//!   misses a regression that only lengthens the worst waits; these see it. Holm's
//!   adjustment runs over the table (both tests of every row): `--comm` narrows it.
//! * **Rate rows**: switches/s and migrations/s per comm and for all tasks (`(all)`), one value
//!   per run (count / trace duration), and each comm's CPU share (`cpu_share`, % of one CPU:
//!   its run time / the trace's duration); Welch's t over the runs when both sides have ≥ 2
//!   runs, otherwise no test (a single trace gives one rate, not a distribution).
//!
//! The recorder's own threads are not in any row (the comparison is of the workload).
//! * **Detector rows**: findings per run of each detector; Welch's t on the counts when both
//!   sides have ≥ 2 runs.
//!
//! Comparing runs of the same configuration is the check that calibrates all of this (see
//! docs/compare.md and `crates/cli/tests/compare_cli.rs`).

pub mod summary;

use std::collections::BTreeMap;

use serde::Serialize;
use stallscope_model::Tid;

use crate::findings::{self, DetectorRow};
use crate::stats::{self, change_pct, percentile_sorted, Statistic, Summary, Verdict};
pub use summary::{TraceRun, TraceTally};

/// Fewest wakeups per side for a latency row to be tested.
pub const MIN_TESTED: usize = 5;

/// One side of a latency row.
#[derive(Clone, Debug, Serialize, Default)]
pub struct LatencySide {
    /// Runs in which the comm/task had wakeups.
    pub runs: usize,
    /// Wakeups.
    pub count: usize,
    /// Median.
    pub p50_ns: Option<u64>,
    /// 99th percentile.
    pub p99_ns: Option<u64>,
    /// Maximum.
    pub max_ns: Option<u64>,
    /// Mean (integer ns).
    pub mean_ns: Option<u64>,
    /// Mean of each run that had wakeups (integer ns), in file order.
    pub run_means_ns: Vec<u64>,
}

/// A latency row.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyRow {
    /// Task name.
    pub comm: String,
    /// Task id (task rows only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<Tid>,
    /// Base side.
    pub base: LatencySide,
    /// New side.
    pub new: LatencySide,
    /// `%change` of p50.
    pub p50_change_pct: Option<f64>,
    /// `%change` of p99.
    pub p99_change_pct: Option<f64>,
    /// `up` (new latencies tend to be larger), `down`, or `none`.
    pub direction: &'static str,
    /// P(new latency > base latency), ties half (0.5 = no shift).
    pub p_new_greater: Option<f64>,
    /// Bootstrap interval of median(new) − median(base), ns.
    pub median_diff_ci_ns: Option<[i64; 2]>,
    /// The deciding test: Mann-Whitney U (one run on a side) or Welch's t on per-run means.
    pub verdict: Option<Verdict>,
    /// Mann-Whitney U over the pooled wakeups when the verdict is the per-run test (raw p).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pooled_mann_whitney: Option<Verdict>,
    /// Why there is no test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untested: Option<String>,
}

/// One side of a tail row.
#[derive(Clone, Debug, Serialize, Default)]
pub struct TailSide {
    /// Runs in which the comm had runnable waits.
    pub runs: usize,
    /// Runnable waits.
    pub count: usize,
    /// 99th percentile of the pooled waits (nearest rank).
    pub p99_ns: Option<u64>,
    /// Longest wait.
    pub max_ns: Option<u64>,
    /// Each run's p99 (2+ runs a side), or each batch's of the one run.
    pub unit_p99_ns: Vec<u64>,
    /// Each run's maximum (2+ runs a side), or each batch's of the one run.
    pub unit_max_ns: Vec<u64>,
}

/// A tail row: one comm's runnable waits at the tail.
#[derive(Clone, Debug, Serialize)]
pub struct TailRow {
    /// Task name.
    pub comm: String,
    /// Base side.
    pub base: TailSide,
    /// New side.
    pub new: TailSide,
    /// `%change` of the pooled p99.
    pub p99_change_pct: Option<f64>,
    /// `%change` of the maximum.
    pub max_change_pct: Option<f64>,
    /// Welch's t on the per-run (per-batch) p99s.
    pub p99_verdict: Option<Verdict>,
    /// Welch's t on the per-run (per-batch) maxima.
    pub max_verdict: Option<Verdict>,
    /// `up` (a significant test, new tail longer), `down`, or `none`.
    pub direction: &'static str,
    /// Why there is no test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untested: Option<String>,
}

/// One side of a rate row.
#[derive(Clone, Debug, Serialize)]
pub struct RateSide {
    /// Per-run rates, per second.
    pub per_run: Vec<f64>,
    /// Mean rate.
    pub mean: f64,
    /// stddev% over the runs.
    pub stddev_pct: f64,
    /// Events over all runs.
    pub total: u64,
}

/// A rate row.
#[derive(Clone, Debug, Serialize)]
pub struct RateRow {
    /// `switches` or `migrations` (per second), or `cpu_share` (% of one CPU).
    pub what: &'static str,
    /// Comm, or `(all)`.
    pub comm: String,
    /// Base side.
    pub base: RateSide,
    /// New side.
    pub new: RateSide,
    /// `%change` of the mean rates.
    pub change_pct: Option<f64>,
    /// Welch's t over the runs.
    pub verdict: Option<Verdict>,
    /// Why there is no test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untested: Option<String>,
}

/// The trace comparison.
#[derive(Clone, Debug, Serialize)]
pub struct TraceComparison {
    /// Runs on the base side.
    pub base_runs: usize,
    /// Runs on the new side.
    pub new_runs: usize,
    /// Duration of each base trace.
    pub base_durations_ns: Vec<u64>,
    /// Duration of each new trace.
    pub new_durations_ns: Vec<u64>,
    /// Wakeup latency per comm (tested rows by adjusted p, then untested by name).
    pub comms: Vec<LatencyRow>,
    /// Wakeup latency per task.
    pub tasks: Vec<LatencyRow>,
    /// Runnable waits per comm at the tail (tested rows by adjusted p, then by name).
    pub tails: Vec<TailRow>,
    /// Switch and migration rates, and CPU shares.
    pub rates: Vec<RateRow>,
    /// Findings per detector.
    pub detectors: Vec<DetectorRow>,
}

fn latency_side(samples: &mut [u64], run_means: &[f64]) -> LatencySide {
    samples.sort_unstable();
    let count = samples.len();
    LatencySide {
        runs: run_means.len(),
        run_means_ns: run_means.iter().map(|&m| m.round() as u64).collect(),
        count,
        p50_ns: percentile_sorted(samples, 0.5),
        p99_ns: percentile_sorted(samples, 0.99),
        max_ns: samples.last().copied(),
        mean_ns: (count > 0)
            .then(|| (samples.iter().map(|&v| u128::from(v)).sum::<u128>() / count as u128) as u64),
    }
}

/// A side's pooled samples, the mean of each run that had any, and (for a side of one run)
/// the means of [`BATCHES`] consecutive batches of that run's wakeups.
#[derive(Default)]
struct Pooled {
    samples: Vec<u64>,
    run_means: Vec<f64>,
    batch_means: Vec<f64>,
}

/// Batches a single run's wakeups are cut into for the batch-means test.
pub const BATCHES: usize = 8;

/// Means of `BATCHES` consecutive, equally sized batches of `samples` (in recording order;
/// a remainder joins the last batch); empty when there are fewer than 2 samples a batch.
fn batch_means(samples: &[u64]) -> Vec<f64> {
    let per = samples.len() / BATCHES;
    if per < 2 {
        return Vec::new();
    }
    (0..BATCHES)
        .map(|i| {
            let end = if i + 1 == BATCHES {
                samples.len()
            } else {
                (i + 1) * per
            };
            let b = &samples[i * per..end];
            b.iter().map(|&v| v as f64).sum::<f64>() / b.len() as f64
        })
        .collect()
}

/// `runs`: the number of runs (files) on each side.
fn latency_row(
    comm: String,
    pid: Option<Tid>,
    (base, new): (Pooled, Pooled),
    runs: [usize; 2],
    alpha: f64,
) -> LatencyRow {
    let (b_batches, n_batches) = (base.batch_means, new.batch_means);
    let (mut b, b_means) = (base.samples, base.run_means);
    let (mut n, n_means) = (new.samples, new.run_means);
    let bs = latency_side(&mut b, &b_means);
    let ns = latency_side(&mut n, &n_means);
    let pct = |x: Option<u64>, y: Option<u64>| match (x, y) {
        (Some(x), Some(y)) => change_pct(x as f64, y as f64),
        _ => None,
    };
    let mut row = LatencyRow {
        comm,
        pid,
        p50_change_pct: pct(bs.p50_ns, ns.p50_ns),
        p99_change_pct: pct(bs.p99_ns, ns.p99_ns),
        base: bs,
        new: ns,
        direction: "none",
        p_new_greater: None,
        median_diff_ci_ns: None,
        verdict: None,
        pooled_mann_whitney: None,
        untested: None,
    };
    if b.len() < MIN_TESTED || n.len() < MIN_TESTED {
        row.untested = Some(format!("fewer than {MIN_TESTED} wakeups on a side"));
        return row;
    }
    let run_level = runs[0] >= 2 && runs[1] >= 2;
    if run_level && (b_means.len() < 2 || n_means.len() < 2) {
        row.untested = Some("wakeups in fewer than 2 runs of a side".to_string());
        return row;
    }
    let bf: Vec<f64> = b.iter().map(|&v| v as f64).collect();
    let nf: Vec<f64> = n.iter().map(|&v| v as f64).collect();
    if let Some(mw) = stats::mann_whitney(&bf, &nf) {
        row.p_new_greater = Some(mw.p_new_greater);
        let mut v = Verdict::new("mann-whitney-u", mw.u_base, mw.p);
        v.method = Some(mw.method);
        row.verdict = Some(v);
    }
    // One run on a side: the wakeups of one run are not independent (load comes and goes),
    // so the run is cut into batches and the batch means are compared instead of the wakeups
    // (batch means; each side's own spread over time sets the noise level).
    let batched = !run_level && b_batches.len() >= 2 && n_batches.len() >= 2;
    if run_level || batched {
        row.pooled_mann_whitney = row.verdict.take();
        let (bm, nm, test) = if run_level {
            (&b_means, &n_means, "welch-t-run-means")
        } else {
            (&b_batches, &n_batches, "welch-t-batch-means")
        };
        match stats::welch(&Summary::of(bm), &Summary::of(nm)) {
            Some(w) => {
                let mut v = Verdict::new(test, w.t, w.p);
                v.df = Some(w.df);
                row.verdict = Some(v);
                // direction from the run-level test: t > 0 means new means are larger
                row.p_new_greater = Some(if w.t > 0.0 {
                    1.0
                } else if w.t < 0.0 {
                    0.0
                } else {
                    0.5
                });
            }
            None => row.untested = Some("the per-run (or per-batch) means do not vary".to_string()),
        }
    }
    row.median_diff_ci_ns = stats::difference_interval(&bf, &nf, Statistic::Median, alpha)
        .map(|ci| [ci.low.round() as i64, ci.high.round() as i64]);
    row
}

fn finish_latency_rows(rows: &mut [LatencyRow], alpha: f64) {
    stats::adjust(rows.iter_mut().filter_map(|r| r.verdict.as_mut()), alpha);
    for r in rows.iter_mut() {
        if let (Some(v), Some(g)) = (&r.verdict, r.p_new_greater) {
            if v.significant {
                r.direction = if g > 0.5 { "up" } else { "down" };
            }
        }
    }
    rows.sort_by(|x, y| {
        let key = |r: &LatencyRow| r.verdict.as_ref().map_or(2.0, |v| v.p_adjusted);
        key(x)
            .total_cmp(&key(y))
            .then_with(|| {
                y.base
                    .count
                    .max(y.new.count)
                    .cmp(&x.base.count.max(x.new.count))
            })
            .then_with(|| x.comm.cmp(&y.comm))
            .then_with(|| x.pid.cmp(&y.pid))
    });
}

/// Pools the latencies of each key over the runs, keeping each run's mean.
fn pool<K: Ord + Clone>(
    runs: &[TraceRun],
    key: impl Fn(&(String, Tid)) -> K,
) -> BTreeMap<K, Pooled> {
    let mut out: BTreeMap<K, Pooled> = BTreeMap::new();
    for run in runs {
        let mut this_run: BTreeMap<K, Vec<u64>> = BTreeMap::new();
        for (k, t) in &run.tasks {
            this_run
                .entry(key(k))
                .or_default()
                .extend_from_slice(&t.latencies_ns);
        }
        for (k, samples) in this_run {
            if samples.is_empty() {
                continue; // tasks without wakeups have no latency sample
            }
            let mean = samples.iter().map(|&v| v as f64).sum::<f64>() / samples.len() as f64;
            let slot = out.entry(k).or_default();
            if runs.len() == 1 {
                slot.batch_means = batch_means(&samples);
            }
            slot.run_means.push(mean);
            slot.samples.extend_from_slice(&samples);
        }
    }
    out
}

fn latency_rows<K: Ord + Clone>(
    base: &[TraceRun],
    new: &[TraceRun],
    key: impl Fn(&(String, Tid)) -> K + Copy,
    label: impl Fn(&K) -> (String, Option<Tid>),
    alpha: f64,
) -> Vec<LatencyRow> {
    let mut b = pool(base, key);
    let mut n = pool(new, key);
    let keys: Vec<K> = {
        let mut k: Vec<K> = b.keys().chain(n.keys()).cloned().collect();
        k.sort();
        k.dedup();
        k
    };
    let mut rows: Vec<LatencyRow> = keys
        .into_iter()
        .map(|k| {
            let (comm, pid) = label(&k);
            latency_row(
                comm,
                pid,
                (
                    b.remove(&k).unwrap_or_default(),
                    n.remove(&k).unwrap_or_default(),
                ),
                [base.len(), new.len()],
                alpha,
            )
        })
        .collect();
    finish_latency_rows(&mut rows, alpha);
    rows
}

/// `scale`: what a count per ns of trace becomes (1e9: per second; 100 for ns of CPU: %).
fn rate_side(runs: &[TraceRun], count: impl Fn(&TraceRun) -> u64, scale: f64) -> RateSide {
    let per_run: Vec<f64> = runs
        .iter()
        .map(|r| {
            if r.duration_ns == 0 {
                0.0
            } else {
                count(r) as f64 * scale / r.duration_ns as f64
            }
        })
        .collect();
    let s = Summary::of(&per_run);
    RateSide {
        mean: s.mean,
        stddev_pct: s.stddev_pct(),
        total: runs.iter().map(&count).sum(),
        per_run,
    }
}

/// Each comm's runnable waits per run, in recording order (runs without any are left out).
fn waits_per_run(runs: &[TraceRun]) -> BTreeMap<String, Vec<Vec<u64>>> {
    let mut out: BTreeMap<String, Vec<Vec<u64>>> = BTreeMap::new();
    for run in runs {
        let mut this_run: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        for ((comm, _), t) in &run.tasks {
            this_run
                .entry(comm)
                .or_default()
                .extend_from_slice(&t.waits_ns);
        }
        for (comm, waits) in this_run.into_iter().filter(|(_, w)| !w.is_empty()) {
            out.entry(comm.to_string()).or_default().push(waits);
        }
    }
    out
}

/// A side of a tail row from its runs' waits: the units are the runs (2+ runs a side, as
/// `run_level` says) or [`BATCHES`] consecutive batches of the one run.
fn tail_side(runs: &[Vec<u64>], run_level: bool) -> TailSide {
    let mut pooled: Vec<u64> = runs.iter().flatten().copied().collect();
    pooled.sort_unstable();
    let units: Vec<Vec<u64>> = match (run_level, runs) {
        (true, _) => runs.to_vec(),
        (false, [one]) if one.len() / BATCHES >= 2 => {
            let per = one.len() / BATCHES;
            (0..BATCHES)
                .map(|i| {
                    let end = if i + 1 == BATCHES {
                        one.len()
                    } else {
                        (i + 1) * per
                    };
                    one[i * per..end].to_vec()
                })
                .collect()
        }
        _ => Vec::new(),
    };
    let (mut unit_p99_ns, mut unit_max_ns) = (Vec::new(), Vec::new());
    for mut u in units {
        u.sort_unstable();
        unit_p99_ns.extend(percentile_sorted(&u, 0.99));
        unit_max_ns.extend(u.last().copied());
    }
    TailSide {
        runs: runs.len(),
        count: pooled.len(),
        p99_ns: percentile_sorted(&pooled, 0.99),
        max_ns: pooled.last().copied(),
        unit_p99_ns,
        unit_max_ns,
    }
}

fn tail_rows(base: &[TraceRun], new: &[TraceRun], alpha: f64) -> Vec<TailRow> {
    let run_level = base.len() >= 2 && new.len() >= 2;
    let (mut b, mut n) = (waits_per_run(base), waits_per_run(new));
    let mut comms: Vec<String> = b.keys().chain(n.keys()).cloned().collect();
    comms.sort();
    comms.dedup();
    let mut rows: Vec<TailRow> = comms
        .into_iter()
        .map(|comm| {
            let bs = tail_side(&b.remove(&comm).unwrap_or_default(), run_level);
            let ns = tail_side(&n.remove(&comm).unwrap_or_default(), run_level);
            let pct = |x: Option<u64>, y: Option<u64>| match (x, y) {
                (Some(x), Some(y)) => change_pct(x as f64, y as f64),
                _ => None,
            };
            let mut row = TailRow {
                p99_change_pct: pct(bs.p99_ns, ns.p99_ns),
                max_change_pct: pct(bs.max_ns, ns.max_ns),
                comm,
                p99_verdict: None,
                max_verdict: None,
                direction: "none",
                untested: None,
                base: bs,
                new: ns,
            };
            if row.base.count < MIN_TESTED || row.new.count < MIN_TESTED {
                row.untested = Some(format!("fewer than {MIN_TESTED} waits on a side"));
                return row;
            }
            // tails change by factors, and their spread grows with them: on a log scale the
            // runs' spread is comparable across sides
            let f = |v: &[u64]| {
                v.iter()
                    .map(|&x| (x.max(1) as f64).ln())
                    .collect::<Vec<f64>>()
            };
            let (tests, unit) = match run_level {
                true => (["welch-t-run-log-p99", "welch-t-run-log-max"], "runs"),
                false => (
                    ["welch-t-batch-log-p99", "welch-t-batch-log-max"],
                    "batches",
                ),
            };
            let test = |b: &[u64], n: &[u64], name: &'static str| {
                let (v, why) = stats::welch_runs(&f(b), &f(n));
                (
                    v.map(|mut v| {
                        v.test = name;
                        v
                    }),
                    why,
                )
            };
            let (p99, why99) = test(&row.base.unit_p99_ns, &row.new.unit_p99_ns, tests[0]);
            let (max, why_max) = test(&row.base.unit_max_ns, &row.new.unit_max_ns, tests[1]);
            row.p99_verdict = p99;
            row.max_verdict = max;
            if row.p99_verdict.is_none() && row.max_verdict.is_none() {
                row.untested = Some(format!(
                    "per-{} tails: {}",
                    unit.trim_end_matches('s'),
                    why99.or(why_max).unwrap_or_default()
                ));
            }
            row
        })
        .collect();
    stats::adjust(
        rows.iter_mut()
            .flat_map(|r| [r.p99_verdict.as_mut(), r.max_verdict.as_mut()])
            .flatten(),
        alpha,
    );
    for r in &mut rows {
        let significant = [&r.p99_verdict, &r.max_verdict]
            .into_iter()
            .flatten()
            .find(|v| v.significant);
        if let Some(v) = significant {
            r.direction = if v.statistic > 0.0 { "up" } else { "down" };
        }
    }
    let key = |r: &TailRow| {
        [&r.p99_verdict, &r.max_verdict]
            .into_iter()
            .flatten()
            .map(|v| v.p_adjusted)
            .fold(2.0, f64::min)
    };
    rows.sort_by(|x, y| key(x).total_cmp(&key(y)).then_with(|| x.comm.cmp(&y.comm)));
    rows
}

/// `all`: every task (for the `(all)` rows); `picked`: the runs whose comms get rows.
fn rate_rows(
    all: (&[TraceRun], &[TraceRun]),
    picked: (&[TraceRun], &[TraceRun]),
    alpha: f64,
) -> Vec<RateRow> {
    let (base, new) = picked;
    let mut comms: Vec<String> = base
        .iter()
        .chain(new)
        .flat_map(|r| r.tasks.keys().map(|(c, _)| c.clone()))
        .collect();
    comms.sort();
    comms.dedup();
    let mut rows = Vec::new();
    for what in ["switches", "migrations", "cpu_share"] {
        let pick = |t: &summary::TaskRun| match what {
            "switches" => t.switches,
            "migrations" => t.migrations,
            _ => t.run_ns,
        };
        let scale = match what {
            "cpu_share" => 100.0,
            _ => 1e9,
        };
        let mut push = |comm: String,
                        (rb, rn): (&[TraceRun], &[TraceRun]),
                        count: &dyn Fn(&TraceRun) -> u64| {
            let b = rate_side(rb, count, scale);
            let n = rate_side(rn, count, scale);
            if b.total == 0 && n.total == 0 {
                return; // nothing of this kind for this comm on either side: no row
            }
            let (verdict, untested) = stats::welch_runs(&b.per_run, &n.per_run);
            rows.push(RateRow {
                what,
                comm,
                change_pct: change_pct(b.mean, n.mean),
                base: b,
                new: n,
                verdict,
                untested,
            });
        };
        push("(all)".to_string(), all, &|r: &TraceRun| {
            r.tasks.values().map(pick).sum()
        });
        for c in &comms {
            push(c.clone(), picked, &|r: &TraceRun| {
                r.tasks
                    .iter()
                    .filter(|((name, _), _)| name == c)
                    .map(|(_, t)| pick(t))
                    .sum()
            });
        }
    }
    stats::adjust(rows.iter_mut().filter_map(|r| r.verdict.as_mut()), alpha);
    rows
}

///
/// `only_comms`, when not empty, restricts the latency rows and the per-comm rate rows to
/// those task names (the `(all)` rates still count every task): fewer rows, a smaller Holm
/// family, so a change of the tasks one cares about needs less evidence to be significant.
pub fn compare(
    base: &[TraceRun],
    new: &[TraceRun],
    alpha: f64,
    only_comms: &[String],
) -> TraceComparison {
    let keep = |runs: &[TraceRun]| -> Vec<TraceRun> {
        runs.iter()
            .map(|r| {
                let mut r = r.clone();
                if !only_comms.is_empty() {
                    r.tasks.retain(|(c, _), _| only_comms.contains(c));
                }
                r
            })
            .collect()
    };
    let (fb, fnew) = (keep(base), keep(new));
    TraceComparison {
        base_runs: base.len(),
        new_runs: new.len(),
        base_durations_ns: base.iter().map(|r| r.duration_ns).collect(),
        new_durations_ns: new.iter().map(|r| r.duration_ns).collect(),
        comms: latency_rows(&fb, &fnew, |(c, _)| c.clone(), |c| (c.clone(), None), alpha),
        tasks: latency_rows(
            &fb,
            &fnew,
            |(c, t)| (c.clone(), *t),
            |(c, t)| (c.clone(), Some(*t)),
            alpha,
        ),
        tails: tail_rows(&fb, &fnew, alpha),
        rates: rate_rows((base, new), (&fb, &fnew), alpha),
        detectors: findings::detector_rows(
            &base.iter().map(|r| &r.detectors).collect::<Vec<_>>(),
            &new.iter().map(|r| &r.detectors).collect::<Vec<_>>(),
            alpha,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use summary::TaskRun;

    fn run(tasks: &[(&str, Tid, Vec<u64>, u64)]) -> TraceRun {
        let mut r = TraceRun {
            duration_ns: 1_000_000_000,
            ..TraceRun::default()
        };
        for (c, t, lat, sw) in tasks {
            r.tasks.insert(
                (c.to_string(), *t),
                TaskRun {
                    latencies_ns: lat.clone(),
                    waits_ns: lat.clone(),
                    switches: *sw,
                    ..TaskRun::default()
                },
            );
        }
        r
    }

    #[test]
    fn batch_means_cut_in_recording_order() {
        let v: Vec<u64> = (0..17).collect();
        let m = batch_means(&v);
        assert_eq!(m.len(), BATCHES);
        assert_eq!(m[0], 0.5);
        // the remainder (16) joins the last batch: 14, 15, 16
        assert_eq!(m[BATCHES - 1], 15.0);
        assert!(batch_means(&v[..15]).is_empty(), "fewer than 2 a batch");
    }

    #[test]
    fn shifted_comm_is_up_and_same_is_not() {
        let slow: Vec<u64> = (0..200)
            .map(|i| 1_000_000 + (i * 7919 % 500) * 1000)
            .collect();
        let fast: Vec<u64> = (0..200).map(|i| 10_000 + (i * 7919 % 500) * 10).collect();
        let base = [run(&[
            ("victim", 10, fast.clone(), 200),
            ("other", 11, fast.clone(), 5),
        ])];
        let new = [run(&[
            ("victim", 12, slow, 200),
            ("other", 13, fast.clone(), 5),
        ])];
        let c = compare(&base, &new, 0.05, &[]);
        let v = &c.comms[0];
        assert_eq!(v.comm, "victim");
        assert_eq!(v.direction, "up");
        assert!(v.verdict.as_ref().unwrap().p < 1e-10);
        let ci = v.median_diff_ci_ns.unwrap();
        assert!(ci[0] > 0, "{ci:?}");
        let o = c.comms.iter().find(|r| r.comm == "other").unwrap();
        assert_eq!(o.direction, "none");
        assert!(!o.verdict.as_ref().unwrap().significant);
        // task rows: different pids on the two sides, so untested
        assert!(c.tasks.iter().all(|r| r.verdict.is_none()));
        // one run per side: rates are untested
        assert!(c.rates.iter().all(|r| r.verdict.is_none()));
        assert_eq!(c.rates[0].comm, "(all)");
        assert_eq!(c.rates[0].base.total, 205);
        // restricted to the victim: one comm row, the (all) rate still counts every task
        let only = compare(&base, &new, 0.05, &["victim".to_string()]);
        assert_eq!(only.comms.len(), 1);
        assert_eq!(only.rates[0].base.total, 205);
        assert!(only.rates.iter().all(|r| r.comm != "other"));
    }
}
