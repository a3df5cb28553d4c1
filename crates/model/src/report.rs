//! [`Report`]: the result of `stallscope analyze` — inputs, what they can support, data
//! quality, detectors that could not run (and how to record what they need), findings.
//!
//! Schema id `stallscope.report/1` ([`REPORT_SCHEMA`]); documented field by field in
//! `docs/report.schema.json`. Adding a field keeps the id; renaming or removing one bumps it.
//! The report round-trips through JSON (`Deserialize`), so a saved report can be re-rendered.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Finding, Ts};

/// The `schema` value of this version of the report.
pub const REPORT_SCHEMA: &str = "stallscope.report/1";

/// One input file as analyzed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = every_property_required)]
pub struct ReportInput {
    /// Path as given (`-` = stdin).
    pub path: String,
    /// Detected or forced input format: a trace format (`perf-data`, `perf-pipe`,
    /// `trace-dat`, `trace-cmd-text`, `ftrace-text`, `perf-script-text`, `blktrace`,
    /// `blkparse-text`) or a CPU-profile format (`folded`, `perf-report-text`); null when
    /// unknown.
    pub format: Option<String>,
    /// Kernel release when recorded.
    pub kernel_release: Option<String>,
    /// CPUs when recorded.
    pub nr_cpus: Option<u32>,
}

/// What the inputs offer to the detectors.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = every_property_required)]
pub struct Capabilities {
    /// Event names declared by the inputs or seen while reading, sorted, without system prefix.
    pub events: Vec<String>,
    /// Events analyzed (side-band name records excluded).
    pub events_read: u64,
    /// First analyzed event time (null when no event).
    pub first_ts_ns: Option<Ts>,
    /// Last analyzed event time (null when no event).
    pub last_ts_ns: Option<Ts>,
    /// True when per-task system context (policy, nice, cgroups, affinity) was recorded
    /// with the trace.
    pub system_context: bool,
}

/// A data-quality counter as shown in the report: a recoverable input problem.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QualityEntry {
    /// How much it can distort results.
    #[schemars(with = "crate::Severity")]
    pub severity: String,
    /// Occurrences.
    pub count: u64,
    /// What it means.
    pub description: String,
    /// First occurrences.
    pub examples: Vec<String>,
}

/// A detector that did not run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SkippedDetector {
    /// Detector id.
    pub id: String,
    /// Which events are missing.
    pub reason: String,
    /// A command that records what it needs.
    pub record_command: String,
}

/// The JSON report of `stallscope analyze --format json`. Times are integer nanoseconds
/// in the trace clock. Adding a field keeps the schema id; renaming or removing one bumps
/// it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Report {
    /// Schema id of this document.
    #[schemars(extend("const" = "stallscope.report/1"))]
    pub schema: String,
    /// Inputs, in command-line order.
    pub inputs: Vec<ReportInput>,
    /// What the inputs support.
    pub capabilities: Capabilities,
    /// Recoverable input problems by key (e.g. `lost_chunks`, `switch_prev_mismatch`).
    pub data_quality: BTreeMap<String, QualityEntry>,
    /// Ids of the detectors that ran.
    pub detectors_run: Vec<String>,
    /// Detectors whose needed events are missing.
    pub skipped: Vec<SkippedDetector>,
    /// Findings, most severe first.
    pub findings: Vec<crate::Finding>,
    /// Why nothing could be analyzed (no readable event, none in the `--time` range) or why
    /// a `--cpu` / `--pid` filter matches nothing in the inputs; null when something was
    /// analyzed. With `--fail-on`, analyze exits 2 when this is set.
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

/// Schema transform of a struct that writes every field, `null` for an absent value: its
/// properties are all required (a derived `Option` field is only nullable, as serde would
/// read it when missing).
fn every_property_required(schema: &mut schemars::Schema) {
    let names: Vec<serde_json::Value> = schema
        .get("properties")
        .and_then(|p| p.as_object())
        .map(|p| p.keys().map(|k| k.as_str().into()).collect())
        .unwrap_or_default();
    schema.insert("required".into(), names.into());
}

/// The JSON Schema (draft 2020-12) of [`Report`], derived from these types and their
/// documentation: `docs/report.schema.json` is this, printed by `stallscope schema report`.
pub fn report_schema() -> serde_json::Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(Report)).unwrap_or_default();
    if let Some(o) = schema.as_object_mut() {
        o.insert(
            "$id".into(),
            "https://stallscope.dev/schema/report-1.json".into(),
        );
        o.insert("title".into(), REPORT_SCHEMA.into());
    }
    schema
}
