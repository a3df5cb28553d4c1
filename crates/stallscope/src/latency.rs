//! [`latency`]: `perf sched latency`'s table of the inputs, as `stallscope latency` prints
//! it. One uncompressed perf.data or trace.dat file the lean reader models goes the lean way
//! (`stallscope_read::lean`: 40-byte records, no names per event); anything else — or a
//! lean reader that bails out midway — goes through the general reader, which reports
//! input problems and data quality the usual way. Both give the same report (tests compare
//! them on every fixture).
//!
//! ```
//! use stallscope::latency::{latency, LatencyRun};
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/sched/starve.perf.data");
//! let run = LatencyRun::new(vec![path.to_string()]);
//! let done = latency(&run)?;
//! let worst = done.report.tasks.iter().map(|t| t.max_delay_ns).max();
//! assert!(worst > Some(1_000_000));
//! assert!(done.lean_path.is_ok());
//! # Ok::<(), stallscope::analyze::AnalyzeError>(())
//! ```

use stallscope_model::{DataQuality, SchedBatch, Ts};
use stallscope_read::lean::open_sched_source;
use stallscope_timeline::{Latency, LatencyOptions, LatencyReport, WakeupSelector};

use crate::analyze::AnalyzeError;
use crate::time_outliers::far_apart;
use crate::InputOptions;

/// What to measure, and how to read it.
#[derive(Clone, Debug)]
pub struct LatencyRun {
    /// The inputs (a forced format sends them to the general reader: the lean one sniffs
    /// for itself; `on_open` is the general path's progress hook).
    pub input: InputOptions,
    /// The table's options (`waking_declared` is set from the inputs).
    pub options: LatencyOptions,
    /// Read through the general reader even when the lean one could.
    pub general_path: bool,
    /// Progress on the lean path: `(bytes done, bytes in all, events read)`, every 64
    /// batches.
    pub on_lean_progress: Option<fn(u64, u64, u64)>,
}

impl LatencyRun {
    /// The defaults (perf's columns and sort) for `files`.
    pub fn new(files: Vec<String>) -> LatencyRun {
        LatencyRun {
            input: InputOptions::new(files),
            options: LatencyOptions::default(),
            general_path: false,
            on_lean_progress: None,
        }
    }
}

/// The table and how it was made.
#[derive(Debug)]
pub struct LatencyDone {
    /// The table (its own data-quality notes in `report.quality`).
    pub report: LatencyReport,
    /// The reader's notes, then the analysis's.
    pub quality: DataQuality,
    /// `Ok` when the lean reader made it, else why the general reader did.
    pub lean_path: Result<(), String>,
}

/// Measures `run`'s inputs (see the module docs).
pub fn latency(run: &LatencyRun) -> Result<LatencyDone, AnalyzeError> {
    let why_general = match lean(run) {
        Ok(report) => {
            let quality = report.quality.clone();
            return Ok(LatencyDone {
                report,
                quality,
                lean_path: Ok(()),
            });
        }
        Err(why) => why,
    };
    let mut inputs = run.input.open()?;
    let mut latency = Latency::new(LatencyOptions {
        waking_declared: WakeupSelector::declared_in(inputs.metas()),
        ..run.options.clone()
    });
    let mut batch = Vec::new();
    while inputs.next_batch(&mut batch)? {
        for ev in &batch {
            latency.process(ev);
        }
    }
    let report = latency.finish();
    let mut quality = inputs.quality();
    quality.merge(&report.quality);
    Ok(LatencyDone {
        report,
        quality,
        lean_path: Err(why_general),
    })
}

/// The lean path: one file the lean reader models. `Err` says why not (not eligible, or
/// the reader bailed out midway: what it computed is dropped).
fn lean(run: &LatencyRun) -> Result<LatencyReport, String> {
    if run.general_path {
        return Err("--general-path".into());
    }
    let [file] = run.input.files.as_slice() else {
        return Err("more than one input".into());
    };
    if let Some(f) = run.input.input_format {
        // the lean reader sniffs the file itself: a forced format goes the general way,
        // which reads the file as told
        return Err(format!("--input-format {}", f.name()));
    }
    let mut source = open_sched_source(file)
        .ok_or("not an uncompressed perf.data or trace.dat file the lean reader models")?;
    let mut latency = Latency::new(LatencyOptions {
        waking_declared: source.waking_declared(),
        ..run.options.clone()
    });
    let mut batch = SchedBatch::default();
    let mut batches = 0u32;
    let mut prev_ts: Option<Ts> = None;
    loop {
        match source.next_batch(&mut batch) {
            Ok(true) => {}
            Ok(false) => break,
            Err(bail) => return Err(bail.reason),
        }
        // a time far from the one before it may be a corrupted one: the general path's
        // outlier filter judges it (`time_outliers`)
        for r in batch.records.iter().filter(|r| r.ts != 0) {
            if prev_ts.is_some_and(|p| far_apart(r.ts, p)) {
                return Err("a time more than an hour from the one before it".into());
            }
            prev_ts = Some(r.ts);
        }
        latency.process_batch(&batch);
        batches = batches.wrapping_add(1);
        if let Some(show) = run.on_lean_progress {
            if batches.is_multiple_of(64) {
                let (done, total) = source.progress();
                show(done, total, latency.events());
            }
        }
    }
    // The reader's notes first, then the analysis's (as the general path merges them).
    let mut report = latency.finish();
    let mut dq = source.quality();
    dq.merge(&report.quality);
    report.quality = dq;
    Ok(report)
}
