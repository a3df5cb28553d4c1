//! [`tables`]: the analyses of a trace as Arrow tables (`switches`, `waits`, `latency`,
//! `requests`, `findings`, `events`; schemas in [`stallscope_tables`]), streamed to a sink
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
    findings_batch, parquet_writer, ParquetWriter, RecordBatch, Table, TableBuilder, TableOptions,
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
    let event_tables: Vec<Table> = which
        .iter()
        .copied()
        .filter(|t| *t != Table::Findings)
        .collect();
    if event_tables.is_empty() {
        return Ok(());
    }
    event_tables_of(options, &event_tables, sink).map(|_| ())
}

/// The event tables `which` (not `findings`) of the inputs of `options`, batch by batch to
/// `sink`; the inputs' metadata as known after reading them (text inputs learn theirs
/// while being read).
pub(crate) fn event_tables_of(
    options: &AnalyzeOptions,
    which: &[Table],
    mut sink: impl FnMut(Table, RecordBatch) -> Result<(), AnalyzeError>,
) -> Result<Vec<TraceMeta>, AnalyzeError> {
    let arrow = |e: stallscope_tables::ArrowError| AnalyzeError::Output(e.to_string());
    let mut inputs = options.open()?;
    let waking_declared = stallscope_timeline::WakeupSelector::declared_in(inputs.metas());
    let opts = TableOptions {
        waking_declared,
        ..TableOptions::default()
    };
    let mut builders: Vec<(Table, TableBuilder)> = which
        .iter()
        .filter_map(|&t| TableBuilder::new(t, opts).map(|b| (t, b)))
        .collect();
    let (from, to) = options.time.unwrap_or((0, stallscope_model::Ts::MAX));
    let mut buf = Vec::new();
    let mut failed: Option<AnalyzeError> = None;
    while inputs.next_batch(&mut buf)? {
        for ev in &buf {
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
