//! `compare` through the facade: the comparison itself is [`stallscope_compare`]'s; a trace
//! on either side is read once, by the analysis ([`crate::analyze::analyze_with`], every
//! detector with its defaults, as `analyze` runs them), which feeds the trace's
//! [`TraceTally`] from its own reading and model. So a trace's findings in a comparison are
//! its `analyze` report's, and its wakeup latencies come from the same timeline.

pub use stallscope_compare::{
    findings, kind, metrics, profile, render, stats, trace, CompareError, Comparison, Options,
    COMPARE_SCHEMA,
};

use stallscope_compare::trace::{TraceRun, TraceTally};
use stallscope_detect::engine::Run;
use stallscope_model::Event;
use stallscope_timeline::Timeline;

use crate::analyze::{analyze_with, AnalyzeError, AnalyzeOptions, SameReading};
use crate::Inputs;

/// Reads both sides and compares them (see [`stallscope_compare::compare`]).
pub fn compare(
    base: &[String],
    new: &[String],
    opts: &Options,
) -> Result<Comparison, CompareError> {
    stallscope_compare::compare(base, new, opts, &mut summarize_trace)
}

/// A trace's tally as a product of the analysis' reading.
struct Tally(TraceTally);

impl SameReading for Tally {
    fn open(&mut self, inputs: &Inputs) {
        // the comparison is of the workload: the recorder's own threads are left out
        self.0.leave_out_recorder(&inputs.metas());
    }
    fn events(&mut self, _run: &[Event]) {}
    fn wants_model(&self) -> bool {
        true
    }
    fn model(&mut self, run: &Run<'_>) {
        self.0.run(run);
    }
    fn end(&mut self, timeline: &Timeline) {
        self.0.end(timeline);
    }
}

/// Analyzes the trace at `path` once, summarizing it from the same reading.
pub fn summarize_trace(path: &str) -> Result<TraceRun, CompareError> {
    let mut options = AnalyzeOptions::new(vec![path.to_string()]);
    options.original_lines = false; // the evidence text is not shown by a comparison
    let mut tally = Tally(TraceTally::default());
    let analysis = analyze_with(&options, Some(&mut tally)).map_err(|e| match e {
        AnalyzeError::Read(r) => CompareError::Read(r),
        AnalyzeError::Usage(m) | AnalyzeError::Output(m) => CompareError::Usage(m),
    })?;
    let detectors = findings::from_report(&analysis.report);
    Ok(tally.0.finish(path, detectors, analysis.quality))
}
