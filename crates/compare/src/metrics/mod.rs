//! Metric files from repeated runs: `perf stat` ([`perf_stat`]) and fio JSON ([`fio`]).
//!
//! Each file on a side is one run, and each metric's values over the runs give its mean ±
//! stddev%. The exception is a side made of **one** `perf stat -r N` text file: perf
//! printed only the mean and the relative standard error of each counter, so the side has
//! N runs with `stddev = mean · rel_se · √N` and no raw values; Welch's test works from
//! those summaries exactly as from raw runs (scipy's `ttest_ind_from_stats`). Several
//! `-r` files on a side count as one run each (their means), with a data-quality note.
//!
//! Rows: every metric seen on either side, in first-seen order; `%change` of the means;
//! Welch's t-test when both sides have at least 2 runs and some variance, Holm-adjusted
//! over the table; significant only when the adjusted p < α.

pub mod fio;
pub mod lkp;
pub mod perf_stat;

use serde::Serialize;
use stallscope_model::{DataQuality, Problem};
use stallscope_read::ReadError;

use crate::stats::{self, change_pct, Summary, Verdict};

/// One metric value of one file.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricValue {
    /// Metric name (`task-clock`, `w/write/iops`, `time elapsed`).
    pub name: String,
    /// Unit as the tool printed it (`msec`, `IO/s`; empty for plain counts).
    pub unit: String,
    /// The value (a mean for `perf stat -r`).
    pub value: f64,
    /// `perf stat -r`: standard error of the mean relative to the mean (0.0268 = 2.68 %).
    pub rel_se: Option<f64>,
}

/// One parsed metric file.
#[derive(Clone, Debug)]
pub struct MetricFile {
    /// Path as given.
    pub path: String,
    /// `perf-stat`, `perf-stat-csv` or `fio-json`.
    pub format: &'static str,
    /// `perf stat -r N`: N.
    pub runs_in_file: Option<usize>,
    /// Values in file order.
    pub values: Vec<MetricValue>,
    /// Lines or fields skipped.
    pub quality: DataQuality,
}

impl MetricFile {
    fn new(path: &str, format: &'static str) -> MetricFile {
        MetricFile {
            path: path.to_string(),
            format,
            runs_in_file: None,
            values: Vec::new(),
            quality: DataQuality::default(),
        }
    }
}

/// One side of one metric.
#[derive(Clone, Debug, Serialize)]
pub struct MetricSide {
    /// Runs behind the numbers.
    pub runs: usize,
    /// Mean over the runs.
    pub mean: f64,
    /// Sample standard deviation over the runs.
    pub stddev: f64,
    /// stddev / mean · 100.
    pub stddev_pct: f64,
    /// Per-run values (empty when only perf's summary of `-r N` runs is known).
    pub values: Vec<f64>,
}

impl MetricSide {
    fn summary(&self) -> Summary {
        Summary {
            n: self.runs,
            mean: self.mean,
            stddev: self.stddev,
        }
    }
}

/// One compared metric.
#[derive(Clone, Debug, Serialize)]
pub struct MetricRow {
    /// Metric name.
    pub name: String,
    /// Unit.
    pub unit: String,
    /// Base side (absent when the metric is only in the new files).
    pub base: Option<MetricSide>,
    /// New side.
    pub new: Option<MetricSide>,
    /// `(new − base) / base · 100` of the means.
    pub change_pct: Option<f64>,
    /// Welch's test, when it could be run.
    pub verdict: Option<Verdict>,
    /// Why there is no test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untested: Option<String>,
}

/// The metrics comparison.
#[derive(Clone, Debug, Serialize)]
pub struct MetricsComparison {
    /// Input format of the files.
    pub format: String,
    /// Runs on the base side.
    pub base_runs: usize,
    /// Runs on the new side.
    pub new_runs: usize,
    /// One row per metric.
    pub rows: Vec<MetricRow>,
}

/// Which metric format a file is, from its first bytes.
pub fn sniff(head: &str) -> Option<&'static str> {
    if fio::is_fio_json(head) {
        Some("fio-json")
    } else if lkp::is_lkp(head) {
        Some("lkp-compare")
    } else if perf_stat::is_text(head) {
        Some("perf-stat")
    } else if perf_stat::is_csv(head) {
        Some("perf-stat-csv")
    } else {
        None
    }
}

/// Parses `text` (from `path`) as `format` (a [`sniff`] answer).
pub fn parse(path: &str, format: &str, text: &str) -> Result<MetricFile, ReadError> {
    match format {
        "fio-json" => fio::parse(path, text),
        "perf-stat" => perf_stat::parse_text(path, text),
        "perf-stat-csv" => perf_stat::parse_csv(path, text),
        other => Err(ReadError::new(
            path,
            None,
            "perf stat text, perf stat -x, CSV or fio JSON",
            other.to_string(),
        )),
    }
}

/// Metric name → side, in first-seen order, and the side's run count.
fn side(files: &[MetricFile], dq: &mut DataQuality) -> (Vec<(String, String, MetricSide)>, usize) {
    let mut out: Vec<(String, String, MetricSide)> = Vec::new();
    if let [only] = files {
        if let Some(n) = only.runs_in_file.filter(|&n| n >= 2) {
            for v in &only.values {
                let stddev = v.value.abs() * v.rel_se.unwrap_or(0.0) * (n as f64).sqrt();
                let s = Summary {
                    n,
                    mean: v.value,
                    stddev,
                };
                out.push((
                    v.name.clone(),
                    v.unit.clone(),
                    MetricSide {
                        runs: n,
                        mean: v.value,
                        stddev,
                        stddev_pct: s.stddev_pct(),
                        values: Vec::new(),
                    },
                ));
            }
            return (out, n);
        }
    }
    let mut raw: Vec<(String, String, Vec<f64>)> = Vec::new();
    for f in files {
        if let Some(n) = f.runs_in_file.filter(|&n| n >= 2) {
            dq.add(Problem::RepeatFileAsOneRun, 1, || {
                format!("{}: mean of {n} runs", f.path)
            });
        }
        for v in &f.values {
            match raw
                .iter_mut()
                .find(|(n, u, _)| *n == v.name && *u == v.unit)
            {
                Some((_, _, list)) => list.push(v.value),
                None => raw.push((v.name.clone(), v.unit.clone(), vec![v.value])),
            }
        }
    }
    for (name, unit, values) in raw {
        if values.len() != files.len() {
            dq.add(Problem::MetricMissingInSomeRuns, 1, || {
                format!("{name}: {} of {} files", values.len(), files.len())
            });
        }
        let s = Summary::of(&values);
        out.push((
            name,
            unit,
            MetricSide {
                runs: values.len(),
                mean: s.mean,
                stddev: s.stddev,
                stddev_pct: s.stddev_pct(),
                values,
            },
        ));
    }
    (out, files.len())
}

/// Compares the metric files of two sides; `dq` (base, new) get the notes about how each
/// side's runs were counted.
pub fn compare(
    base: &[MetricFile],
    new: &[MetricFile],
    alpha: f64,
    dq: [&mut DataQuality; 2],
) -> MetricsComparison {
    let [bdq, ndq] = dq;
    let (b, base_runs) = side(base, bdq);
    let (mut n, new_runs) = side(new, ndq);
    let mut rows = Vec::new();
    for (name, unit, bs) in b {
        let ns = n
            .iter()
            .position(|(nn, nu, _)| *nn == name && *nu == unit)
            .map(|i| n.remove(i).2);
        rows.push(row(name, unit, Some(bs), ns));
    }
    for (name, unit, ns) in n {
        rows.push(row(name, unit, None, Some(ns)));
    }
    stats::adjust(rows.iter_mut().filter_map(|r| r.verdict.as_mut()), alpha);
    let format = base
        .iter()
        .chain(new)
        .map(|f| f.format)
        .next()
        .unwrap_or("")
        .to_string();
    MetricsComparison {
        format,
        base_runs,
        new_runs,
        rows,
    }
}

fn row(name: String, unit: String, base: Option<MetricSide>, new: Option<MetricSide>) -> MetricRow {
    let (verdict, untested) = match (&base, &new) {
        (Some(b), Some(n)) => {
            if b.runs < 2 || n.runs < 2 {
                (None, Some("fewer than 2 runs on a side".to_string()))
            } else {
                match stats::welch(&b.summary(), &n.summary()) {
                    Some(w) => {
                        let mut v = Verdict::new("welch-t", w.t, w.p);
                        v.df = Some(w.df);
                        (Some(v), None)
                    }
                    None => (None, Some("no variance on either side".to_string())),
                }
            }
        }
        _ => (None, Some("present on one side only".to_string())),
    };
    let change = match (&base, &new) {
        (Some(b), Some(n)) => change_pct(b.mean, n.mean),
        _ => None,
    };
    MetricRow {
        name,
        unit,
        base,
        new,
        change_pct: change,
        verdict,
        untested,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(values: &[(&str, f64)]) -> MetricFile {
        let mut f = MetricFile::new("f", "perf-stat");
        for (n, v) in values {
            f.values.push(MetricValue {
                name: n.to_string(),
                unit: String::new(),
                value: *v,
                rel_se: None,
            });
        }
        f
    }

    #[test]
    fn raw_runs_welch_and_holm() {
        let base: Vec<MetricFile> = [10.1, 10.3, 9.9, 10.0, 10.2]
            .iter()
            .map(|&v| file(&[("a", v), ("b", 5.0 + v / 100.0)]))
            .collect();
        let new: Vec<MetricFile> = [10.9, 11.2, 10.8, 11.5, 11.0]
            .iter()
            .map(|&v| file(&[("a", v), ("b", 5.0 + (v - 1.0) / 100.0)]))
            .collect();
        let mut dq = DataQuality::default();
        let c = compare(&base, &new, 0.05, [&mut dq, &mut DataQuality::default()]);
        assert_eq!((c.base_runs, c.new_runs), (5, 5));
        let a = &c.rows[0];
        let v = a.verdict.as_ref().unwrap();
        // scipy.stats.ttest_ind(base, new, equal_var=False).pvalue = 0.00036932309791554336
        assert!((v.p - 0.000_369_323_097_915_543_36).abs() < 1e-12);
        assert!(v.significant);
        assert!(a.change_pct.unwrap() > 8.0);
        let b = c.rows[1].verdict.as_ref().unwrap();
        assert!(!b.significant, "{b:?}");
        assert!(dq.is_empty());
    }

    #[test]
    fn perf_stat_repeat_summary() {
        // 1.0 ± 1% (SE) over 5 runs vs 1.1 ± 1% over 5 runs:
        // scipy.stats.ttest_ind_from_stats(1.0, 0.01*sqrt(5), 5, 1.1, 0.011*sqrt(5), 5,
        //                                  equal_var=False).pvalue
        let mut b = file(&[("x", 1.0)]);
        b.runs_in_file = Some(5);
        b.values[0].rel_se = Some(0.01);
        let mut n = file(&[("x", 1.1)]);
        n.runs_in_file = Some(5);
        n.values[0].rel_se = Some(0.01);
        let mut dq = DataQuality::default();
        let c = compare(&[b], &[n], 0.05, [&mut dq, &mut DataQuality::default()]);
        assert_eq!(c.base_runs, 5);
        let r = &c.rows[0];
        assert!(r.base.as_ref().unwrap().values.is_empty());
        let v = r.verdict.as_ref().unwrap();
        assert!((v.p - SCIPY_FROM_STATS_P).abs() < 1e-10, "{v:?}");
    }

    const SCIPY_FROM_STATS_P: f64 = 0.000_154_797_430_580_976_12;

    #[test]
    fn one_run_or_one_side() {
        let mut dq = DataQuality::default();
        let c = compare(
            &[file(&[("a", 1.0)])],
            &[file(&[("b", 1.0)])],
            0.05,
            [&mut dq, &mut DataQuality::default()],
        );
        assert_eq!(c.rows.len(), 2);
        assert!(c.rows.iter().all(|r| r.verdict.is_none()));
        let c = compare(
            &[file(&[("a", 1.0)])],
            &[file(&[("a", 2.0)])],
            0.05,
            [&mut dq, &mut DataQuality::default()],
        );
        assert_eq!(
            c.rows[0].untested.as_deref(),
            Some("fewer than 2 runs on a side")
        );
        assert_eq!(c.rows[0].change_pct, Some(100.0));
    }
}
