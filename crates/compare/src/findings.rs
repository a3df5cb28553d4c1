//! Detector findings per run, for comparisons: which detectors ran, how many findings each
//! produced, the highest severity and a few titles; and the comparison table of the per-run
//! counts (Welch's t over the runs, Holm-adjusted over the detectors).
//!
//! Traces are analyzed with every registered detector by the facade while they are
//! summarized ([`crate::trace::summary`], [`from_report`]); profiles are handed to the engine whole
//! ([`Engine::process_profile`], see [`on_profile`]), which runs the profile detectors
//! (`lock-spinning`).

use std::collections::BTreeMap;

use serde::Serialize;
use stallscope_detect::engine::DetectorOutcome;
use stallscope_detect::registry;
use stallscope_detect::{Engine, Params};
use stallscope_model::{Finding, FindingSeverity, Profile, Report};

use crate::stats::{self, Verdict};

/// `untested` reason of a detector that ran on no run of either side.
pub const SKIPPED_EVERYWHERE: &str = "skipped on every run (the inputs lack what it needs)";

/// Finding titles kept per detector and run.
const TITLES_KEPT: usize = 3;

/// One detector's result on one run.
#[derive(Clone, Debug, Default)]
pub struct DetectorRun {
    /// Whether it ran (false = skipped: the input lacks what it needs).
    pub ran: bool,
    /// Number of findings.
    pub findings: usize,
    /// Highest severity among them.
    pub max_severity: Option<FindingSeverity>,
    /// The first few finding titles.
    pub titles: Vec<String>,
}

/// Detector id → result, for one run.
pub type DetectorRuns = BTreeMap<String, DetectorRun>;

/// Every registered detector with its default parameters.
pub fn all_detectors() -> Vec<Box<dyn stallscope_detect::Detector>> {
    registry::DETECTORS
        .iter()
        .map(|e| (e.make)(&Params::defaults(e.info.params)))
        .collect()
}

/// Summarizes an engine's outcomes.
pub fn from_outcomes(outcomes: &[DetectorOutcome]) -> DetectorRuns {
    let mut out = DetectorRuns::new();
    for o in outcomes {
        let entry = out.entry(o.id.to_string()).or_default();
        if let Ok(findings) = &o.result {
            entry.ran = true;
            entry.findings = findings.len();
            entry.max_severity = findings.iter().map(|f| f.severity).max();
            entry.titles = findings
                .iter()
                .take(TITLES_KEPT)
                .map(|f| f.title.clone())
                .collect();
        }
    }
    out
}

/// Summarizes an analysis' report (as [`from_outcomes`] an engine's outcomes): the
/// detectors that ran with their findings, the skipped ones as not run.
pub fn from_report(report: &Report) -> DetectorRuns {
    let mut out = DetectorRuns::new();
    for id in &report.detectors_run {
        let mine: Vec<&Finding> = report
            .findings
            .iter()
            .filter(|f| &f.detector == id)
            .collect();
        out.insert(
            id.clone(),
            DetectorRun {
                ran: true,
                findings: mine.len(),
                max_severity: mine.iter().map(|f| f.severity).max(),
                titles: mine
                    .iter()
                    .take(TITLES_KEPT)
                    .map(|f| f.title.clone())
                    .collect(),
            },
        );
    }
    for s in &report.skipped {
        out.entry(s.id.clone()).or_default();
    }
    out
}

/// Runs the detectors on one profile (only the profile detectors can run).
pub fn on_profile(profile: &Profile) -> DetectorRuns {
    let mut engine = Engine::new(all_detectors(), &[]);
    engine.process_profile(profile);
    from_outcomes(&engine.finish().outcomes)
}

/// A detector row.
#[derive(Clone, Debug, Serialize)]
pub struct DetectorRow {
    /// Detector id.
    pub detector: String,
    /// Findings per base run (`null` where it was skipped).
    pub base_findings: Vec<Option<usize>>,
    /// Findings per new run.
    pub new_findings: Vec<Option<usize>>,
    /// Highest severity on the base side.
    pub base_max_severity: Option<FindingSeverity>,
    /// Highest severity on the new side.
    pub new_max_severity: Option<FindingSeverity>,
    /// A few base finding titles.
    pub base_titles: Vec<String>,
    /// A few new finding titles.
    pub new_titles: Vec<String>,
    /// Welch's t on the per-run counts.
    pub verdict: Option<Verdict>,
    /// Why there is no test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untested: Option<String>,
}

/// The comparison table of per-run finding counts.
pub fn detector_rows(
    base: &[&DetectorRuns],
    new: &[&DetectorRuns],
    alpha: f64,
) -> Vec<DetectorRow> {
    let mut ids: Vec<&String> = base.iter().chain(new).flat_map(|r| r.keys()).collect();
    ids.sort();
    ids.dedup();
    let mut rows: Vec<DetectorRow> = ids
        .into_iter()
        .map(|id| {
            let counts = |runs: &[&DetectorRuns]| -> Vec<Option<usize>> {
                runs.iter()
                    .map(|r| r.get(id).filter(|d| d.ran).map(|d| d.findings))
                    .collect()
            };
            let sev =
                |runs: &[&DetectorRuns]| runs.iter().filter_map(|r| r.get(id)?.max_severity).max();
            let titles = |runs: &[&DetectorRuns]| -> Vec<String> {
                runs.iter()
                    .flat_map(|r| r.get(id).map(|d| d.titles.clone()).unwrap_or_default())
                    .take(TITLES_KEPT)
                    .collect()
            };
            let (bc, nc) = (counts(base), counts(new));
            let as_f = |v: &[Option<usize>]| -> Vec<f64> {
                v.iter().flatten().map(|&c| c as f64).collect()
            };
            let (verdict, untested) = if bc.iter().chain(&nc).all(Option::is_none) {
                (
                    None,
                    Some("skipped on every run (the inputs lack what it needs)".to_string()),
                )
            } else {
                stats::welch_runs(&as_f(&bc), &as_f(&nc))
            };
            DetectorRow {
                detector: id.clone(),
                base_findings: bc,
                new_findings: nc,
                base_max_severity: sev(base),
                new_max_severity: sev(new),
                base_titles: titles(base),
                new_titles: titles(new),
                verdict,
                untested,
            }
        })
        .collect();
    stats::adjust(rows.iter_mut().filter_map(|r| r.verdict.as_mut()), alpha);
    rows
}
