//! [`Report`]: the result of `stallscope analyze` — inputs, what they can support, data
//! quality, detectors that could not run (and how to record what they need), findings.
//!
//! Schema id `stallscope.report/1` ([`REPORT_SCHEMA`]); documented field by field in
//! `docs/report.schema.json`. Adding a field keeps the id; renaming or removing one bumps it.
//! The report round-trips through JSON (`Deserialize`), so a saved report can be re-rendered.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Finding, Ts};

/// The `schema` value of this version of the report.
pub const REPORT_SCHEMA: &str = "stallscope.report/1";

/// One input file as analyzed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportInput {
    /// Path as given.
    pub path: String,
    /// Format name (`perf-data`, `ftrace-text`, …); null when unknown.
    pub format: Option<String>,
    /// Kernel release when recorded.
    pub kernel_release: Option<String>,
    /// CPUs when recorded.
    pub nr_cpus: Option<u32>,
}

/// Events available to the detectors.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Event names declared by the inputs or seen while reading, sorted, without system prefix.
    pub events: Vec<String>,
    /// Events analyzed.
    pub events_read: u64,
    /// First and last event time analyzed (null when no event).
    pub first_ts_ns: Option<Ts>,
    /// Last event time analyzed.
    pub last_ts_ns: Option<Ts>,
    /// True when per-task system context (policy, nice, cgroups, affinity) was recorded.
    pub system_context: bool,
}

/// A data-quality counter as shown in the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QualityEntry {
    /// `info`, `warning` or `error`.
    pub severity: String,
    /// Occurrences.
    pub count: u64,
    /// What it means.
    pub description: String,
    /// First occurrences.
    pub examples: Vec<String>,
}

/// A detector that did not run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedDetector {
    /// Detector id.
    pub id: String,
    /// Why (which events are missing).
    pub reason: String,
    /// A command that records what it needs.
    pub record_command: String,
}

/// The whole result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`REPORT_SCHEMA`].
    pub schema: String,
    /// Inputs, in command-line order.
    pub inputs: Vec<ReportInput>,
    /// What the inputs support.
    pub capabilities: Capabilities,
    /// Data-quality counters by key.
    pub data_quality: BTreeMap<String, QualityEntry>,
    /// Detectors that ran.
    pub detectors_run: Vec<String>,
    /// Detectors that could not run.
    pub skipped: Vec<SkippedDetector>,
    /// Findings, most severe first.
    pub findings: Vec<crate::Finding>,
    /// Why nothing could be analyzed, or why the filters match nothing in the inputs
    /// (`None` when something was analyzed). A CI gate (`--fail-on`) fails on it.
    #[serde(default)]
    pub nothing_analyzed: Option<String>,
}

impl Report {
    /// An empty report of the current schema.
    pub fn new() -> Report {
        Report {
            schema: REPORT_SCHEMA.to_string(),
            inputs: Vec::new(),
            capabilities: Capabilities::default(),
            data_quality: BTreeMap::new(),
            detectors_run: Vec::new(),
            skipped: Vec::new(),
            findings: Vec::new(),
            nothing_analyzed: None,
        }
    }

    /// Sorts findings most severe first, then by detector, start time and title.
    pub fn sort_findings(&mut self) {
        self.findings.sort_by(|a: &Finding, b: &Finding| {
            b.severity
                .cmp(&a.severity)
                .then_with(|| a.detector.cmp(&b.detector))
                .then_with(|| a.window.start_ns.cmp(&b.window.start_ns))
                .then_with(|| a.title.cmp(&b.title))
        });
    }
}

impl Default for Report {
    fn default() -> Self {
        Report::new()
    }
}
