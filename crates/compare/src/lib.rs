//! `stallscope compare`: A/B comparison of two sets of runs with significance tests.
//!
//! Inputs of one kind on each side ([`kind`]); several files on a side are repeated runs:
//!
//! * traces ([`trace`]): per-comm and per-task wakeup latency distributions tested with
//!   Mann-Whitney U, context-switch and migration rates, per-detector finding counts;
//! * profiles ([`profile`]): per-function self and children shares, largest rises and falls;
//! * metric files ([`metrics`]): `perf stat` (text, `-r N`, `-x,` CSV) and fio JSON, means
//!   ± stddev%, %change and Welch's t-test.
//!
//! Statistics live in [`stats`]. Every table's p-values are Holm-adjusted, and a change is
//! called significant only when its adjusted p-value is below α. [`render`] prints the
//! text form; the [`Comparison`] itself serializes to the `stallscope.compare/1` JSON
//! document (docs/compare.md describes it field by field).
//!
//! ```no_run
//! // traces are read by the facade's analysis: `stallscope::compare::compare`
//! let opts = stallscope_compare::Options::default();
//! let mut no_traces = |p: &str| -> Result<stallscope_compare::trace::TraceRun, _> {
//!     Err(stallscope_compare::CompareError::Usage(format!("{p}: no trace reader")))
//! };
//! let c = stallscope_compare::compare(&["a.txt".into()], &["b.txt".into()], &opts, &mut no_traces)
//!     .unwrap();
//! println!("{}", serde_json::to_string_pretty(&c).unwrap());
//! ```

pub mod findings;
pub mod kind;
pub mod metrics;
pub mod profile;
pub mod render;
pub mod stats;
pub mod trace;

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use stallscope_model::{DataQuality, QualityEntry};
use stallscope_read::profile::{read_profile, ProfileOptions};
use stallscope_read::ReadError;

use kind::InputKind;

/// JSON schema name of [`Comparison`].
pub const COMPARE_SCHEMA: &str = "stallscope.compare/1";

/// Settings of a comparison.
#[derive(Clone, Debug)]
pub struct Options {
    /// Significance level α (a change is significant when its adjusted p < α).
    pub alpha: f64,
    /// Treat the inputs as this family (`trace`, `profile`) instead of guessing.
    pub kind: Option<String>,
    /// How profiles name kernel frames (`--kallsyms`).
    pub profile: ProfileOptions,
    /// Traces: compare only these task names (`--comm`; empty = all).
    pub comms: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            alpha: 0.05,
            kind: None,
            profile: ProfileOptions::default(),
            comms: Vec::new(),
        }
    }
}

/// Why a comparison could not be made.
#[derive(Debug)]
pub enum CompareError {
    /// An input could not be read.
    Read(ReadError),
    /// The inputs do not fit together (mixed kinds, empty side, bad α).
    Usage(String),
}

impl fmt::Display for CompareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompareError::Read(e) => write!(f, "{e}"),
            CompareError::Usage(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for CompareError {}

impl From<ReadError> for CompareError {
    fn from(e: ReadError) -> Self {
        CompareError::Read(e)
    }
}

/// One side of a comparison.
#[derive(Clone, Debug, Serialize)]
pub struct SideInfo {
    /// Files as given.
    pub files: Vec<String>,
    /// Runs (files, or N of a single `perf stat -r N` file).
    pub runs: usize,
    /// Recoverable input problems of this side.
    pub data_quality: BTreeMap<String, QualityEntry>,
}

/// A comparison (`stallscope.compare/1`).
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// Always [`COMPARE_SCHEMA`].
    pub schema: &'static str,
    /// `trace`, `profile` or `metrics`.
    pub kind: &'static str,
    /// Significance level.
    pub alpha: f64,
    /// How p-values are adjusted: `holm` (per table).
    pub adjustment: &'static str,
    /// Base side.
    pub base: SideInfo,
    /// New side.
    pub new: SideInfo,
    /// Trace comparison (kind `trace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<trace::TraceComparison>,
    /// Profile comparison (kind `profile`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<profile::ProfileComparison>,
    /// Metrics comparison (kind `metrics`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<metrics::MetricsComparison>,
    /// An lkp-tests compare table (kind `metrics`, one file holding both sides).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lkp: Option<metrics::lkp::LkpComparison>,
}

/// The common kind of both sides, or a usage error naming every file's kind.
pub fn common_kind(base: &[String], new: &[String]) -> Result<InputKind, CompareError> {
    // an lkp-tests compare table holds both sides: it is compared alone
    if let ([one], []) = (base, new) {
        if one != "-" {
            if let InputKind::Metrics("lkp-compare") = kind::classify(one)? {
                return Ok(InputKind::Metrics("lkp-compare"));
            }
        }
    }
    if base.is_empty() || new.is_empty() {
        return Err(CompareError::Usage(
            "compare needs at least one file on each side: BASE… --vs NEW… (or one lkp-tests compare table, which holds both)".to_string(),
        ));
    }
    if base.iter().chain(new).any(|p| p == "-") {
        return Err(CompareError::Usage(
            "compare reads each input twice (to classify it, then to read it): standard input (`-`) cannot be used; save it to a file".to_string(),
        ));
    }
    let mut kinds = Vec::new();
    for (side, paths) in [("base", base), ("new", new)] {
        for p in paths {
            kinds.push((side, p.as_str(), kind::classify(p)?));
        }
    }
    let first = kinds[0].2;
    let same = kinds.iter().all(|(_, _, k)| match (k, first) {
        (InputKind::Metrics(a), InputKind::Metrics(b)) => {
            *a == b || (a.starts_with("perf-stat") && b.starts_with("perf-stat"))
        }
        _ => *k == first,
    });
    if !same {
        let list: Vec<String> = kinds
            .iter()
            .map(|(side, p, k)| format!("  {side}: {p}: {}", k.describe()))
            .collect();
        return Err(CompareError::Usage(format!(
            "the inputs are not all of one kind (traces, profiles, or one metric format); compare like with like:\n{}",
            list.join("\n")
        )));
    }
    Ok(first)
}

fn quality(dq: &DataQuality) -> BTreeMap<String, QualityEntry> {
    stallscope_report::quality_entries(dq)
}

/// How a trace is read and summarized: the facade's analysis feeding a
/// [`trace::TraceTally`] from its own reading (`stallscope::compare::compare`).
pub type TraceSummarizer<'a> = dyn FnMut(&str) -> Result<trace::TraceRun, CompareError> + 'a;

/// Reads both sides and compares them; traces are read by `summarize_trace`.
pub fn compare(
    base: &[String],
    new: &[String],
    opts: &Options,
    summarize_trace: &mut TraceSummarizer<'_>,
) -> Result<Comparison, CompareError> {
    if !(opts.alpha > 0.0 && opts.alpha < 1.0) {
        return Err(CompareError::Usage(format!(
            "alpha must be between 0 and 1, got {}",
            opts.alpha
        )));
    }
    let kind = match opts.kind.as_deref() {
        None => common_kind(base, new)?,
        Some("trace") => InputKind::Trace,
        Some("profile") => InputKind::Profile,
        Some(other) => {
            return Err(CompareError::Usage(format!(
                "unknown kind {other:?}; expected trace or profile (metric files are always recognized)"
            )))
        }
    };
    let mut out = Comparison {
        schema: COMPARE_SCHEMA,
        kind: kind.family(),
        alpha: opts.alpha,
        adjustment: "holm",
        base: SideInfo {
            files: base.to_vec(),
            runs: base.len(),
            data_quality: BTreeMap::new(),
        },
        new: SideInfo {
            files: new.to_vec(),
            runs: new.len(),
            data_quality: BTreeMap::new(),
        },
        trace: None,
        profile: None,
        metrics: None,
        lkp: None,
    };
    match kind {
        InputKind::Metrics("lkp-compare") => {
            let ([path], []) = (base, new) else {
                return Err(CompareError::Usage(
                    "an lkp-tests compare table holds both sides: give it alone, without --vs"
                        .to_string(),
                ));
            };
            let text = kind::read_text(path)?;
            let (table, dq) = metrics::lkp::parse(path, &text)?;
            out.base.data_quality = quality(&dq);
            out.new.files = vec![path.clone()];
            out.lkp = Some(table);
        }
        InputKind::Metrics(_) => {
            let read = |paths: &[String]| -> Result<(Vec<metrics::MetricFile>, DataQuality), CompareError> {
                let mut files = Vec::new();
                let mut dq = DataQuality::default();
                for p in paths {
                    let text = kind::read_text(p)?;
                    let format = metrics::sniff(&text).unwrap_or("unknown");
                    let f = metrics::parse(p, format, &text)?;
                    dq.merge(&f.quality);
                    files.push(f);
                }
                Ok((files, dq))
            };
            let (bf, mut bdq) = read(base)?;
            let (nf, mut ndq) = read(new)?;
            let m = metrics::compare(&bf, &nf, opts.alpha, [&mut bdq, &mut ndq]);
            out.base.runs = m.base_runs;
            out.new.runs = m.new_runs;
            out.base.data_quality = quality(&bdq);
            out.new.data_quality = quality(&ndq);
            out.metrics = Some(m);
        }
        InputKind::Profile => {
            let read = |paths: &[String]| -> Result<(Vec<stallscope_model::Profile>, DataQuality), CompareError> {
                let mut list = Vec::new();
                let mut dq = DataQuality::default();
                for p in paths {
                    let r = read_profile(p, None, &opts.profile)?;
                    dq.merge(&r.quality);
                    list.push(r.profile);
                }
                Ok((list, dq))
            };
            let (bp, bdq) = read(base)?;
            let (np, ndq) = read(new)?;
            out.base.data_quality = quality(&bdq);
            out.new.data_quality = quality(&ndq);
            let mut pc = profile::compare(&bp, &np, opts.alpha);
            let bd: Vec<findings::DetectorRuns> = bp.iter().map(findings::on_profile).collect();
            let nd: Vec<findings::DetectorRuns> = np.iter().map(findings::on_profile).collect();
            pc.detectors = findings::detector_rows(
                &bd.iter().collect::<Vec<_>>(),
                &nd.iter().collect::<Vec<_>>(),
                opts.alpha,
            );
            // event detectors cannot run on a profile: keep the rows of those that did
            pc.detectors
                .retain(|r| r.untested.as_deref() != Some(findings::SKIPPED_EVERYWHERE));
            out.profile = Some(pc);
        }
        InputKind::Trace => {
            let mut read =
                |paths: &[String]| -> Result<(Vec<trace::TraceRun>, DataQuality), CompareError> {
                    let mut runs = Vec::new();
                    let mut dq = DataQuality::default();
                    for p in paths {
                        let r = summarize_trace(p)?;
                        dq.merge(&r.quality);
                        runs.push(r);
                    }
                    Ok((runs, dq))
                };
            let (bt, bdq) = read(base)?;
            let (nt, ndq) = read(new)?;
            out.base.data_quality = quality(&bdq);
            out.new.data_quality = quality(&ndq);
            out.trace = Some(trace::compare(&bt, &nt, opts.alpha, &opts.comms));
        }
    }
    Ok(out)
}
