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
    findings_batch, parquet_writer, samples_batches, ParquetWriter, RecordBatch, Table,
    TableBuilder, TableOptions,
};

use stallscope_model::TraceMeta;

use crate::analyze::{analyze, AnalyzeError, AnalyzeOptions};

/// Builds the tables `which` from the inputs of `options` (its time range applies to the
/// events; its CPU and task filters to the findings), handing each batch to `sink` as soon
/// as it is full. The event tables are built in one reading of the inputs; `findings`
/// runs [`analyze`] (a reading of its own).
pub fn tables(
    options: &AnalyzeOptions,
    which: &[Table],
    mut sink: impl FnMut(Table, RecordBatch) -> Result<(), AnalyzeError>,
) -> Result<(), AnalyzeError> {
    let arrow = |e: stallscope_tables::ArrowError| AnalyzeError::Output(e.to_string());
    if which.contains(&Table::Findings) {
        let report = analyze(options)?;
        sink(
            Table::Findings,
            findings_batch(&report.findings).map_err(arrow)?,
        )?;
    }
    if which.contains(&Table::Samples) {
        for batch in samples_of(options)? {
            sink(Table::Samples, batch)?;
        }
    }
    let event_tables: Vec<Table> = which
        .iter()
        .copied()
        .filter(|t| !matches!(t, Table::Findings | Table::Samples))
        .collect();
    if event_tables.is_empty() {
        return Ok(());
    }
    event_tables_of(options, &event_tables, |_| {}, sink).map(|_| ())
}

/// The `samples` table of the inputs: each input's profile as `stallscope profile` reads
/// it (perf.data samples with their callchains, `perf script`, folded or `perf report`
/// text), stacks outside `options.time` dropped; no rows for inputs without samples.
pub(crate) fn samples_of(options: &AnalyzeOptions) -> Result<Vec<RecordBatch>, AnalyzeError> {
    let arrow = |e: stallscope_tables::ArrowError| AnalyzeError::Output(e.to_string());
    let mut out = Vec::new();
    let profile_options = stallscope_read::profile::ProfileOptions {
        symbols: crate::profile_analysis::symbol_source(options.kallsyms.as_deref()),
        ..Default::default()
    };
    for file in &options.files {
        if file == "-" || std::path::Path::new(file).is_dir() {
            continue; // stdin is read once, by the event tables; a directory is blktrace's
        }
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

/// The event tables `which` (not `findings`) of the inputs of `options`, batch by batch to
/// `sink`; `on_open` sees the inputs' metadata once they are open, before any batch; the
/// metadata as known after reading them is returned (text inputs learn theirs while being
/// read).
pub(crate) fn event_tables_of(
    options: &AnalyzeOptions,
    which: &[Table],
    on_open: impl FnOnce(&[&TraceMeta]),
    mut sink: impl FnMut(Table, RecordBatch) -> Result<(), AnalyzeError>,
) -> Result<Vec<TraceMeta>, AnalyzeError> {
    let arrow = |e: stallscope_tables::ArrowError| AnalyzeError::Output(e.to_string());
    let mut inputs = options.open()?;
    on_open(&inputs.metas());
    let waking_declared = stallscope_timeline::WakeupSelector::declared_in(inputs.metas());
    let opts = TableOptions {
        waking_declared,
        kallsyms: match options.kallsyms.as_deref() {
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
    let mut builders: Vec<(Table, TableBuilder)> = which
        .iter()
        .filter_map(|&t| TableBuilder::new(t, &opts).map(|b| (t, b)))
        .collect();
    let (from, to) = options.time.unwrap_or((0, stallscope_model::Ts::MAX));
    let mut buf = Vec::new();
    let mut failed: Option<AnalyzeError> = None;
    // runs of events built where they are used (the lean perf.data reader), no copy
    let mut more = true;
    while more {
        more = inputs.visit_batch(&mut buf, &mut |run| {
            if failed.is_some() {
                return;
            }
            for ev in run {
                if ev.ts < from || ev.ts > to {
                    continue;
                }
                for (t, b) in &mut builders {
                    match b.push(ev) {
                        Ok(Some(batch)) => {
                            if let Err(e) = sink(*t, batch) {
                                failed.get_or_insert(e);
                            }
                        }
                        Ok(None) => {}
                        Err(e) => {
                            failed.get_or_insert(arrow(e));
                        }
                    }
                }
            }
        })?;
        if let Some(e) = failed.take() {
            return Err(e);
        }
    }
    for (t, b) in builders {
        for batch in b.finish().map_err(arrow)? {
            sink(t, batch)?;
        }
    }
    Ok(inputs.metas().into_iter().cloned().collect())
}
