//! [`tables`]: the analyses of a trace as Arrow tables (`switches`, `waits`, `latency`,
//! `requests`, `work_items`, `samples`, `findings`, `events`; schemas in [`stallscope_tables`]), streamed to a sink
//! batch by batch — what `stallscope tables` writes as Parquet and the Python package hands
//! to pyarrow.
//!
//! ```
//! use stallscope::analyze::AnalyzeOptions;
//! use stallscope::tables::{tables, Table};
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/sched/starve.perf.data");
//! let options = AnalyzeOptions::new(vec![path.to_string()]);
//! let mut waits = 0;
//! tables(&options, &[Table::Waits], |_, batch| {
//!     waits += batch.num_rows();
//!     Ok(())
//! })?;
//! assert!(waits > 0);
//! # Ok::<(), stallscope::analyze::AnalyzeError>(())
//! ```

pub use stallscope_tables::{
    findings_batch, parquet_writer, samples_batches, BackgroundWriters, ParquetWriter, RecordBatch,
    Table, TableBuilder, TableOptions, WriteError,
};

use stallscope_model::TraceMeta;

use crate::analyze::{analyze_with, AnalyzeError, AnalyzeOptions, SameReading};
use crate::Inputs;

/// Builds the tables `which` from the inputs of `options` (its time range applies to the
/// events; its CPU and task filters to the findings), handing each batch to `sink` as soon
/// as it is full. The event tables and `findings` come from one reading of the inputs (the
/// event tables are a product of the analysis, [`analyze_with`]); `samples` reads each
/// input's profile apart (`stallscope profile`'s reader), only for the inputs that reading
/// saw samples in (a scheduler trace is read once).
pub fn tables(
    options: &AnalyzeOptions,
    which: &[Table],
    mut sink: impl FnMut(Table, RecordBatch) -> Result<(), AnalyzeError>,
) -> Result<(), AnalyzeError> {
    let event_tables: Vec<Table> = which
        .iter()
        .copied()
        .filter(|t| !matches!(t, Table::Findings | Table::Samples))
        .collect();
    let findings = which.contains(&Table::Findings);
    let samples = which.contains(&Table::Samples);
    let mut scan = SampleScan::default();
    if findings || samples || !event_tables.is_empty() {
        // the findings, the event tables and what the samples table needs to know from one
        // reading: the event tables are a product of the analysis (which runs no detector
        // when no findings are asked for)
        let mut analysis_options = options.clone();
        if !findings {
            analysis_options.detectors.clear();
        }
        let mut batches: Vec<(Table, RecordBatch)> = Vec::new();
        let report = {
            let mut product =
                EventTables::new(options, &event_tables, |_: &[&TraceMeta]| {}, &mut sink);
            if samples {
                product = product.scan_samples();
            }
            let run = match event_tables.is_empty() && !samples {
                true => analyze_with(&analysis_options, None),
                false => analyze_with(&analysis_options, Some(&mut product)),
            };
            let report = run?.report;
            scan = product.finish(options)?;
            report
        };
        if findings {
            batches.push((
                Table::Findings,
                findings_batch(&report.findings).map_err(arrow)?,
            ));
        }
        for (t, b) in batches {
            sink(t, b)?;
        }
    }
    if samples {
        for batch in samples_of(options, &scan)? {
            sink(Table::Samples, batch)?;
        }
    }
    Ok(())
}

/// The `samples` table of the inputs: each input's profile as `stallscope profile` reads
/// it (perf.data samples with their callchains, `perf script`, folded or `perf report`
/// text), stacks outside `options.time` dropped; no rows for inputs without samples.
/// `scan`: what the analysis' own reading saw of the perf.data inputs' samples; an input
/// it saw none in is not read again, and the event to profile is known without the
/// profile reader's own first pass.
pub(crate) fn samples_of(
    options: &AnalyzeOptions,
    scan: &SampleScan,
) -> Result<Vec<RecordBatch>, AnalyzeError> {
    let mut out = Vec::new();
    for (i, file) in options.files.iter().enumerate() {
        if stallscope_read::is_stream(file) || std::path::Path::new(file).is_dir() {
            continue; // stdin is read once, by the event tables; a directory is blktrace's
        }
        let event = match scan.inputs.get(i) {
            Some(seen) if seen.perf_data => match seen.profiled_event() {
                Some(e) => Some(e),
                None => continue, // a perf.data without samples: nothing to read again
            },
            _ => None,
        };
        let profile_options = stallscope_read::profile::ProfileOptions {
            symbols: crate::profile_analysis::symbol_source(options.kallsyms.as_deref()),
            event,
            ..Default::default()
        };
        let Some(mut read) = stallscope_read::profile::read_profile_if_any(file, &profile_options)?
        else {
            continue;
        };
        let mut quality = stallscope_model::DataQuality::default();
        crate::profile_analysis::restrict_time(&mut read.profile, options.time, &mut quality);
        out.extend(
            samples_batches(
                &read.profile,
                read.event.as_deref(),
                TableOptions::default().batch_rows,
            )
            .map_err(arrow)?,
        );
    }
    Ok(out)
}

/// What one reading saw of each input's samples (events with a callchain or an `ip`), for
/// the `samples` table ([`samples_of`]).
#[derive(Default)]
pub(crate) struct SampleScan {
    inputs: Vec<SampledInput>,
}

/// One input's samples as seen in the analysis' reading.
#[derive(Default)]
struct SampledInput {
    /// The input is a perf.data (the profile reader then profiles one event).
    perf_data: bool,
    /// The events the file declares, in its order.
    declared: Vec<String>,
    /// Names of the events with samples, in the order first seen.
    sampled: Vec<String>,
}

impl SampledInput {
    /// The event `stallscope profile` profiles: of several declared events the first (in
    /// the file's order) with samples, as perf report's first section; of one, the first
    /// sampled in time.
    fn profiled_event(&self) -> Option<String> {
        if self.declared.len() > 1 {
            return stallscope_read::profile::perf_samples::first_declared_sampled(
                &self.declared,
                |d| {
                    self.sampled
                        .iter()
                        .any(|n| stallscope_read::profile::event_matches(d, n))
                },
            );
        }
        self.sampled.first().cloned()
    }
}

impl SampleScan {
    /// The inputs, as opened.
    fn open(&mut self, inputs: &Inputs) {
        self.inputs = inputs
            .metas()
            .iter()
            .map(|m| SampledInput {
                perf_data: m.format == Some(stallscope_model::InputFormat::PerfData),
                declared: m.declared_events.clone(),
                sampled: Vec::new(),
            })
            .collect();
    }

    /// Notes the samples among `run` (any time: the profile reader chooses its event over
    /// the whole input).
    fn events(&mut self, run: &[stallscope_model::Event]) {
        for ev in run {
            let Some(name) = stallscope_read::profile::perf_samples::sample_event_name(ev) else {
                continue;
            };
            if let Some(seen) = self.inputs.get_mut(usize::from(ev.span.input())) {
                if !seen.sampled.iter().any(|n| n == name) {
                    seen.sampled.push(name.to_string());
                }
            }
        }
    }
}

/// The event tables (not `findings` or `samples`) as a product of an analysis' reading
/// ([`crate::analyze::analyze_with`]): the builders are made when the inputs are open
/// (the input's kallsyms names work functions), every event in `options.time` goes to each,
/// and each full batch to `sink`. The first error stops the building; [`EventTables::finish`]
/// returns it, or writes the last batches.
pub(crate) struct EventTables<'a, S, O> {
    which: Vec<Table>,
    kallsyms: Option<&'a str>,
    time: (stallscope_model::Ts, stallscope_model::Ts),
    builders: Vec<(Table, TableBuilder)>,
    on_open: Option<O>,
    sink: S,
    failed: Option<AnalyzeError>,
    /// The inputs were opened as traces (not so for CPU-profile text alone).
    opened: bool,
    /// The samples seen, when the `samples` table is wanted.
    samples: Option<SampleScan>,
}

fn arrow(e: stallscope_tables::ArrowError) -> AnalyzeError {
    AnalyzeError::Output(e.to_string())
}

/// Hands what a builder gave to `sink`: a full batch goes on, the first error is kept in
/// `failed`; false when the building must stop.
fn hand_over<S>(
    sink: &mut S,
    failed: &mut Option<AnalyzeError>,
    table: Table,
    got: Result<Option<RecordBatch>, stallscope_tables::ArrowError>,
) -> bool
where
    S: FnMut(Table, RecordBatch) -> Result<(), AnalyzeError>,
{
    let sent = match got {
        Ok(Some(batch)) => sink(table, batch),
        Ok(None) => return true,
        Err(e) => Err(arrow(e)),
    };
    match sent {
        Ok(()) => true,
        Err(e) => {
            failed.get_or_insert(e);
            false
        }
    }
}

impl<'a, S, O> EventTables<'a, S, O>
where
    S: FnMut(Table, RecordBatch) -> Result<(), AnalyzeError>,
    O: FnOnce(&[&TraceMeta]),
{
    /// The tables `which` of the inputs of `options`; `on_open` sees the inputs' metadata
    /// once they are open, before any batch.
    pub(crate) fn new(options: &'a AnalyzeOptions, which: &[Table], on_open: O, sink: S) -> Self {
        EventTables {
            which: which.to_vec(),
            kallsyms: options.kallsyms.as_deref(),
            time: options.time.unwrap_or((0, stallscope_model::Ts::MAX)),
            builders: Vec::new(),
            on_open: Some(on_open),
            sink,
            failed: None,
            opened: false,
            samples: None,
        }
    }

    /// Also notes the inputs' samples, for the `samples` table ([`EventTables::finish`]
    /// returns them).
    pub(crate) fn scan_samples(mut self) -> Self {
        self.samples = Some(SampleScan::default());
        self
    }

    fn builders(&self, inputs: &Inputs) -> Result<Vec<(Table, TableBuilder)>, AnalyzeError> {
        let opts = TableOptions {
            waking_declared: stallscope_timeline::WakeupSelector::declared_in(inputs.metas()),
            kallsyms: match self.kallsyms {
                // the recording host's table given by the user names work functions first
                Some(path) if path != "none" => Some(
                    std::fs::read_to_string(path)
                        .map_err(|e| AnalyzeError::Usage(format!("--kallsyms {path}: {e}")))?
                        .into(),
                ),
                Some(_) => None,
                None => inputs.metas().into_iter().find_map(|m| m.kallsyms.clone()),
            },
            ..TableOptions::default()
        };
        Ok(self
            .which
            .iter()
            .filter_map(|&t| TableBuilder::new(t, &opts).map(|b| (t, b)))
            .collect())
    }

    /// The last batches, or the first error met while building. Inputs that are no trace
    /// (CPU-profile text alone: the analysis reads them as profiles) have no event tables:
    /// the error opening them as traces says so (`options`: what they were read with).
    /// Returns the samples seen ([`EventTables::scan_samples`]; empty otherwise).
    pub(crate) fn finish(mut self, options: &AnalyzeOptions) -> Result<SampleScan, AnalyzeError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if !self.opened && !self.which.is_empty() {
            options.open()?;
        }
        for (t, b) in self.builders {
            for batch in b.finish(None).map_err(arrow)? {
                (self.sink)(t, batch)?;
            }
        }
        Ok(self.samples.unwrap_or_default())
    }
}

impl<S, O> SameReading for EventTables<'_, S, O>
where
    S: FnMut(Table, RecordBatch) -> Result<(), AnalyzeError>,
    O: FnOnce(&[&TraceMeta]),
{
    fn open(&mut self, inputs: &Inputs) {
        self.opened = true;
        if let Some(scan) = self.samples.as_mut() {
            scan.open(inputs);
        }
        if let Some(on_open) = self.on_open.take() {
            on_open(&inputs.metas());
        }
        match self.builders(inputs) {
            Ok(b) => self.builders = b,
            Err(e) => self.failed = Some(e),
        }
    }

    fn wants_model(&self) -> bool {
        self.builders.iter().any(|(_, b)| b.reads_model())
    }

    fn model(&mut self, run: &stallscope_detect::engine::Run<'_>) {
        if self.failed.is_some() {
            return;
        }
        let (sink, failed) = (&mut self.sink, &mut self.failed);
        for (t, b) in self.builders.iter_mut().filter(|(_, b)| b.reads_model()) {
            let got = b.push_transitions(run.transitions, run.timeline);
            if !hand_over(sink, failed, *t, got) {
                return;
            }
        }
    }

    /// The tables made from the model end with it (it names their tasks).
    fn end(&mut self, timeline: &stallscope_timeline::Timeline) {
        let (from_model, rest) = std::mem::take(&mut self.builders)
            .into_iter()
            .partition::<Vec<_>, _>(|(_, b)| b.reads_model());
        self.builders = rest;
        if self.failed.is_some() {
            return;
        }
        let (sink, failed) = (&mut self.sink, &mut self.failed);
        for (t, b) in from_model {
            let batches = match b.finish(Some(timeline)) {
                Ok(batches) => batches,
                Err(e) => {
                    failed.get_or_insert(arrow(e));
                    return;
                }
            };
            for batch in batches {
                if !hand_over(sink, failed, t, Ok(Some(batch))) {
                    return;
                }
            }
        }
    }

    fn events(&mut self, run: &[stallscope_model::Event]) {
        if let Some(scan) = self.samples.as_mut() {
            scan.events(run);
        }
        if self.failed.is_some() {
            return;
        }
        let (from, to) = self.time;
        let (sink, failed) = (&mut self.sink, &mut self.failed);
        for ev in run {
            if ev.ts < from || ev.ts > to {
                continue;
            }
            for (t, b) in &mut self.builders {
                if !hand_over(sink, failed, *t, b.push(ev)) {
                    return;
                }
            }
        }
    }
}
