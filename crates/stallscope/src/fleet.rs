//! [`run`]: many traces analyzed into one Parquet dataset — what `stallscope fleet` and the
//! Python package's `stallscope.fleet.analyze_many` do.
//!
//! The dataset in the output directory:
//!
//! ```text
//! OUT/<table>/part-<trace_id>.parquet   one file per trace and table (switches, waits,
//!                                       latency, requests, findings, …), the trace columns
//!                                       trace_id, host, kernel, file before the table's own
//! OUT/traces.parquet                    one row per trace: format, status, events, findings,
//!                                       worst wait (stallscope_tables::traces_schema)
//! OUT/errors.parquet                    one row per trace that could not be read, with the
//!                                       message `stallscope analyze` prints for it
//! OUT/summary.json                      the fleet summary (FleetSummary)
//! ```
//!
//! The work is split so that any scheduler can run it: [`plan`] numbers the traces,
//! [`prepare`] makes the directories, [`analyze_trace`] analyzes one trace and writes its
//! part files (one reading for `analyze`, one for the event tables; memory bounded by that
//! trace, not by the fleet), and [`finish`] writes `traces`, `errors` and the summary from
//! the [`TraceOutcome`]s. [`run`] is all four on this machine's threads; Dask workers call
//! [`analyze_trace`] through the Python package and the client calls [`finish`], so both
//! give the same files.
//!
//! ```
//! use stallscope::fleet::{run, FleetOptions};
//!
//! let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/sched");
//! let out = std::env::temp_dir().join(format!("stallscope-fleet-doc-{}", std::process::id()));
//! let options = FleetOptions::new(vec![format!("{fixtures}/starve*.perf.data")], out.clone());
//! let summary = run(&options)?;
//! assert_eq!(summary.traces, 2);
//! assert!(out.join("waits/part-00000.parquet").exists());
//! # std::fs::remove_dir_all(&out).ok();
//! # Ok::<(), stallscope::analyze::AnalyzeError>(())
//! ```

mod summary;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use stallscope_model::{FindingSeverity, Problem, Severity};
use stallscope_tables::{
    errors_batch, errors_schema, fleet_schema, parquet_writer_of, traces_batch, traces_schema,
    BackgroundWriters, RecordBatch, Table, TraceColumnArrays, TraceColumns, TraceRow, WriteError,
};

pub use summary::{CulpritRow, DetectorRow, FleetSummary, WorstWaitRow};

use crate::analyze::{analyze_with, AnalyzeError, AnalyzeOptions};
use crate::tables::{findings_batch, samples_of, EventTables};
use stallscope_model::TraceMeta;

/// One trace of a fleet: its number and path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetTrace {
    /// Rank in the sorted list of inputs (the `trace_id` column).
    pub trace_id: u32,
    /// Path of the trace (a file, or a blktrace directory).
    pub file: String,
}

/// What a fleet run does.
#[derive(Clone, Debug)]
pub struct FleetOptions {
    /// Paths and glob patterns (`traces/*.perf.data`, `hosts/**/trace.dat`).
    pub inputs: Vec<String>,
    /// The dataset's directory.
    pub out: PathBuf,
    /// Tables written per trace (default: all but `events`).
    pub tables: Vec<Table>,
    /// Traces analyzed at once (default: the CPUs available).
    pub jobs: usize,
}

impl FleetOptions {
    /// The defaults for `inputs` into `out`.
    pub fn new(inputs: Vec<String>, out: PathBuf) -> FleetOptions {
        FleetOptions {
            inputs,
            out,
            tables: default_tables(),
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// The tables a fleet writes unless told: every table but `events`.
pub fn default_tables() -> Vec<Table> {
    Table::ALL
        .into_iter()
        .filter(|t| *t != Table::Events)
        .collect()
}

/// What the analysis of one trace gave: the row of `traces`, the figures the summary
/// needs, or the error. Serializable: it is what a Dask worker sends back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceOutcome {
    /// Which trace.
    pub trace_id: u32,
    /// Its path.
    pub file: String,
    /// Host name it recorded.
    pub host: Option<String>,
    /// Kernel release it recorded.
    pub kernel: Option<String>,
    /// Input format name.
    pub format: Option<String>,
    /// Events analyzed.
    pub events: u64,
    /// First event time.
    pub first_ns: Option<u64>,
    /// Last event time.
    pub last_ns: Option<u64>,
    /// Each finding's detector, severity and cause (`None`: the finding names none).
    pub findings: Vec<(String, String, Option<String>)>,
    /// Culprit commands (tasks in the role `culprit` or `holder`) and in how many findings.
    pub culprits: Vec<(String, u32)>,
    /// perf sched latency's maximum delay over the trace, and whose.
    pub worst_wait_ns: Option<u64>,
    /// The task of that wait.
    pub worst_wait_comm: Option<String>,
    /// Rows written per table.
    pub rows: BTreeMap<String, u64>,
    /// Why the trace could not be analyzed (its part files are then removed).
    pub error: Option<String>,
    /// Why nothing was analyzed although the trace was read (`analyze`'s
    /// `nothing_analyzed`: no detector could run).
    #[serde(default)]
    pub nothing_analyzed: Option<String>,
    /// Events lost in the recording (the `lost_events` data-quality count).
    #[serde(default)]
    pub lost_events: u64,
    /// The data-quality entries of `analyze`: key, severity, count.
    #[serde(default)]
    pub quality: Vec<(String, String, u64)>,
}

impl TraceOutcome {
    /// `error` (not read: `errors.parquet` says why), `empty` (read, but no event or nothing
    /// any detector uses), `degraded` (data quality of severity error: lost events, a cut
    /// file, …: results near the gaps are incomplete) or `ok`.
    pub fn status(&self) -> &'static str {
        if self.error.is_some() {
            "error"
        } else if self.events == 0 || self.nothing_analyzed.is_some() {
            "empty"
        } else if self.quality.iter().any(|q| q.1 == Severity::Error.name()) {
            "degraded"
        } else {
            "ok"
        }
    }

    fn columns(&self) -> TraceColumns {
        TraceColumns {
            trace_id: self.trace_id,
            host: self.host.clone(),
            kernel: self.kernel.clone(),
            file: self.file.clone(),
        }
    }
}

/// Expands `inputs` (paths, and glob patterns with `*`, `?`, `[…]`, `**`) into the fleet's
/// traces, sorted by path, each once; a pattern that matches nothing is an error (a path
/// without pattern characters is kept even when missing: its error goes to `errors`). A
/// directory stands for every file below it, except a directory of blktrace's per-CPU
/// files, which is one trace.
pub fn plan(inputs: &[String]) -> Result<Vec<FleetTrace>, AnalyzeError> {
    let mut files: Vec<String> = Vec::new();
    for input in inputs {
        if input == "-" {
            return Err(AnalyzeError::Usage(
                "fleet reads files, not standard input".to_string(),
            ));
        }
        if !input.contains(['*', '?', '[']) {
            match directory_traces(input)? {
                Some(found) if found.is_empty() => {
                    return Err(AnalyzeError::Usage(format!(
                        "directory {input:?} holds no file"
                    )))
                }
                Some(found) => files.extend(found),
                None => files.push(input.clone()),
            }
            continue;
        }
        let paths = glob::glob(input)
            .map_err(|e| AnalyzeError::Usage(format!("pattern {input:?}: {e}")))?;
        let before = files.len();
        for p in paths {
            let p = p.map_err(|e| AnalyzeError::Usage(format!("pattern {input:?}: {e}")))?;
            files.push(p.to_string_lossy().into_owned());
        }
        if files.len() == before {
            return Err(AnalyzeError::Usage(format!(
                "pattern {input:?} matches no file"
            )));
        }
    }
    files.sort();
    files.dedup();
    if files.is_empty() {
        return Err(AnalyzeError::Usage("no trace given".to_string()));
    }
    let n = u32::try_from(files.len())
        .map_err(|_| AnalyzeError::Usage(format!("{} traces: too many", files.len())))?;
    Ok((0..n)
        .zip(files)
        .map(|(trace_id, file)| FleetTrace { trace_id, file })
        .collect())
}

/// The traces of a directory that is not one blktrace recording: every file below it
/// (hidden ones left out), each a trace, except that the per-CPU files of one blktrace
/// recording (`DEV.blktrace.N` of one directory) are one trace, named by its first file (a
/// per-CPU file stands for its recording); `None` for a file, or a directory that holds one
/// blktrace recording and nothing else (one trace).
fn directory_traces(path: &str) -> Result<Option<Vec<String>>, AnalyzeError> {
    let dir = Path::new(path);
    if !dir.is_dir() || one_blktrace_recording(dir)? {
        return Ok(None);
    }
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut entries = visible_entries(&d)?;
        entries.sort();
        let mut devices: Vec<String> = Vec::new();
        for p in entries {
            if p.is_dir() {
                // a directory holding one blktrace recording is one trace
                match one_blktrace_recording(&p)? {
                    true => out.push(p.to_string_lossy().into_owned()),
                    false => stack.push(p),
                }
                continue;
            }
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            if let Some(dev) = name
                .as_deref()
                .and_then(stallscope_read::blktrace::device_of)
            {
                if devices.iter().any(|x| x == dev) {
                    continue; // its recording is a trace already
                }
                devices.push(dev.to_string());
            }
            out.push(p.to_string_lossy().into_owned());
        }
    }
    Ok(Some(out))
}

/// The entries of `dir`, hidden ones (`.name`) left out.
fn visible_entries(dir: &Path) -> Result<Vec<std::path::PathBuf>, AnalyzeError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let p = entry.map_err(|e| io_err(dir, e))?.path();
        if !p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'))
        {
            out.push(p);
        }
    }
    Ok(out)
}

/// Whether `dir` holds the per-CPU files of one blktrace recording and nothing else.
fn one_blktrace_recording(dir: &Path) -> Result<bool, AnalyzeError> {
    let entries = visible_entries(dir)?;
    let mut device: Option<String> = None;
    for p in &entries {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        let dev = match name
            .as_deref()
            .and_then(stallscope_read::blktrace::device_of)
        {
            Some(d) if p.is_file() => d.to_string(),
            _ => return Ok(false),
        };
        match &device {
            Some(d) if *d != dev => return Ok(false),
            _ => device = Some(dev),
        }
    }
    Ok(device.is_some())
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> AnalyzeError {
    AnalyzeError::Output(format!("{}: {e}", path.display()))
}

/// Makes the dataset's directories under `out` and removes what an earlier run left there
/// (part files, `traces.parquet`, `errors.parquet`, `summary.json`), so that the dataset
/// holds this run only. Other files are left alone.
pub fn prepare(out: &Path, tables: &[Table]) -> Result<(), AnalyzeError> {
    std::fs::create_dir_all(out).map_err(|e| io_err(out, e))?;
    for t in Table::ALL {
        let dir = out.join(t.name());
        if dir.is_dir() {
            for entry in std::fs::read_dir(&dir).map_err(|e| io_err(&dir, e))? {
                let path = entry.map_err(|e| io_err(&dir, e))?.path();
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if name.starts_with("part-") && name.ends_with(".parquet") {
                    std::fs::remove_file(&path).map_err(|e| io_err(&path, e))?;
                }
            }
        }
    }
    for name in ["traces.parquet", "errors.parquet", "summary.json"] {
        let path = out.join(name);
        if path.exists() {
            std::fs::remove_file(&path).map_err(|e| io_err(&path, e))?;
        }
    }
    for t in tables {
        let dir = out.join(t.name());
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
    }
    Ok(())
}

/// The part file of `table` for trace `trace_id` under `out`.
pub fn part_path(out: &Path, table: Table, trace_id: u32) -> PathBuf {
    out.join(table.name())
        .join(format!("part-{trace_id:05}.parquet"))
}

/// Culprit command names across hosts: a kernel thread's per-CPU numbers (`kworker/3:1H`,
/// `ksoftirqd/0`) say nothing across machines, so the digits after its `/` become `*`.
pub fn culprit_name(comm: &str) -> String {
    let Some(slash) = comm.find('/') else {
        return comm.to_string();
    };
    let (head, tail) = comm.split_at(slash);
    let mut out = head.to_string();
    let mut in_digits = false;
    for c in tail.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('*');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// Analyzes trace `trace` and writes its part file of each table in `tables` under `out`
/// (made by [`prepare`]). Never fails: an error is the outcome's `error`, and the trace's
/// part files are then removed. A panic inside the analysis is caught and reported the
/// same way, so that one file cannot end a fleet run.
pub fn analyze_trace(trace: &FleetTrace, out: &Path, tables: &[Table]) -> TraceOutcome {
    bound_heap_growth();
    let mut outcome = TraceOutcome {
        trace_id: trace.trace_id,
        file: trace.file.clone(),
        ..TraceOutcome::default()
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        analyze_into(trace, out, tables, &mut outcome)
    }));
    let error = match result {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(panic) => Some(format!(
            "internal error while analyzing {}: {} (please report it with the file)",
            trace.file,
            panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default()
        )),
    };
    if let Some(e) = error {
        for t in Table::ALL {
            let _ = std::fs::remove_file(part_path(out, t, trace.trace_id));
        }
        let keep = TraceOutcome {
            trace_id: outcome.trace_id,
            file: outcome.file,
            host: outcome.host,
            kernel: outcome.kernel,
            format: outcome.format,
            error: Some(e),
            ..TraceOutcome::default()
        };
        return keep;
    }
    outcome
}

/// Makes allocations of 1 MiB and more come from their own mappings, returned to the
/// system when freed. By default glibc raises its mmap threshold after each large free (up
/// to 32 MiB), so a trace's big buffers end up in the heap and stay there, fragmented: over
/// 600 traces of the fixtures the fleet's resident size grew from 143 to 220 MiB on one
/// thread (not a leak: the same trace 600 times stays at 14 MiB). With the threshold fixed
/// it stays at what the largest trace needs (108 MiB for 68 traces and for 200 on one
/// thread, `benches/fleet_throughput.sh`), at no measurable cost in time (128 KiB cost
/// ~20 %). Process-wide; set by [`analyze_trace`] (cheap, so every time: Dask workers call
/// only it).
fn bound_heap_growth() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt sets a glibc tunable; no memory of ours is involved.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

fn analyze_into(
    trace: &FleetTrace,
    out: &Path,
    tables: &[Table],
    outcome: &mut TraceOutcome,
) -> Result<(), AnalyzeError> {
    let options = AnalyzeOptions::new(vec![trace.file.clone()]);
    // the event tables (latency always: the worst wait), from the analysis' own reading
    let mut event_tables: Vec<Table> = tables
        .iter()
        .copied()
        .filter(|t| !matches!(t, Table::Findings | Table::Samples))
        .collect();
    if !event_tables.contains(&Table::Latency) {
        event_tables.push(Table::Latency);
    }
    let mut writers = Vec::new();
    for &t in tables {
        let path = part_path(out, t, trace.trace_id);
        let w = parquet_writer_of(&path, fleet_schema(t)).map_err(|e| io_err(&path, e))?;
        writers.push((t, w));
    }
    // encoded and compressed on a thread of their own, beside the reading and the model
    let mut files = BackgroundWriters::spawn(writers)
        .map_err(|e| AnalyzeError::Output(format!("a Parquet writing thread: {e}")))?;
    let failed = |(t, e): WriteError| match t {
        Some(t) => io_err(&part_path(out, t, trace.trace_id), e),
        None => io_err(out, e),
    };
    // host and kernel are known once the input is open, before the first batch
    let columns: std::cell::OnceCell<TraceColumns> = std::cell::OnceCell::new();
    let mut arrays: Option<TraceColumnArrays> = None;
    let mut write = |t: Table, batch: &RecordBatch| -> Result<(), AnalyzeError> {
        let columns = columns
            .get()
            .ok_or_else(|| AnalyzeError::Output("a batch before the input was open".into()))?;
        if tables.contains(&t) {
            let batch = arrays
                .get_or_insert_with(|| TraceColumnArrays::new(columns.clone()))
                .prepend(t, batch)
                .map_err(|e| AnalyzeError::Output(e.to_string()))?;
            files.write(t, batch).map_err(failed)?;
        }
        Ok(())
    };
    let mut worst: Option<(u64, String)> = None;
    let (mut host, mut kernel) = (None, None);
    let (report, scan) = {
        let mut product = EventTables::new(
            &options,
            &event_tables,
            |metas: &[&TraceMeta]| {
                if let Some(m) = metas.first() {
                    host = m.hostname.clone();
                    kernel = m.kernel_release.clone();
                }
                let _ = columns.set(
                    TraceOutcome {
                        host: host.clone(),
                        kernel: kernel.clone(),
                        ..outcome.clone()
                    }
                    .columns(),
                );
            },
            |t, batch| {
                if t == Table::Latency {
                    worst = worst_wait(&batch).max(worst.take());
                }
                write(t, &batch)
            },
        );
        if tables.contains(&Table::Samples) {
            product = product.scan_samples();
        }
        let report = analyze_with(&options, Some(&mut product))?.report;
        let scan = product.finish(&options)?;
        (report, scan)
    };
    outcome.host = host;
    if let Some(input) = report.inputs.first() {
        outcome.format = input.format.clone();
        outcome.kernel = input.kernel_release.clone();
    }
    outcome.kernel = outcome.kernel.take().or(kernel);
    outcome.events = report.capabilities.events_read;
    outcome.nothing_analyzed = report.nothing_analyzed.clone();
    outcome.quality = report
        .data_quality
        .iter()
        .map(|(k, q)| (k.clone(), q.severity.clone(), q.count))
        .collect();
    outcome.lost_events = report
        .data_quality
        .get(Problem::LostEvents.key())
        .map_or(0, |q| q.count);
    outcome.first_ns = report.capabilities.first_ts_ns;
    outcome.last_ns = report.capabilities.last_ts_ns;
    let mut culprits: BTreeMap<String, u32> = BTreeMap::new();
    for f in &report.findings {
        outcome.findings.push((
            f.detector.clone(),
            f.severity.name().to_string(),
            f.cause.as_ref().map(|c| c.kind.clone()),
        ));
        let mut named: Vec<String> = f
            .tasks
            .iter()
            .filter(|t| t.role == "culprit" || t.role == "holder")
            .map(|t| culprit_name(&t.comm))
            .collect();
        named.sort();
        named.dedup();
        for c in named {
            *culprits.entry(c).or_default() += 1;
        }
    }
    outcome.culprits = culprits.into_iter().collect();
    if tables.contains(&Table::Findings) {
        let batch =
            findings_batch(&report.findings).map_err(|e| AnalyzeError::Output(e.to_string()))?;
        write(Table::Findings, &batch)?;
    }
    if tables.contains(&Table::Samples) {
        for batch in samples_of(&options, &scan)? {
            write(Table::Samples, &batch)?;
        }
    }
    if let Some((ns, comm)) = worst.filter(|w| w.0 > 0) {
        outcome.worst_wait_ns = Some(ns);
        outcome.worst_wait_comm = Some(comm);
    }
    for (t, rows) in files.finish().map_err(failed)? {
        outcome.rows.insert(t.name().to_string(), rows);
    }
    Ok(())
}

/// The largest `max_delay_ns` of a `latency` batch and its `comm`.
fn worst_wait(batch: &RecordBatch) -> Option<(u64, String)> {
    use stallscope_tables::arrow::{StringArray, UInt64Array};
    let delays = batch
        .column_by_name("max_delay_ns")?
        .as_any()
        .downcast_ref::<UInt64Array>()?;
    let comms = batch
        .column_by_name("comm")?
        .as_any()
        .downcast_ref::<StringArray>()?;
    (0..batch.num_rows())
        .map(|i| (delays.value(i), comms.value(i).to_string()))
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(&a.1)))
}

/// Writes `traces.parquet`, `errors.parquet` and `summary.json` under `out` from the
/// outcomes of every trace (any order) and returns the summary.
pub fn finish(
    out: &Path,
    tables: &[Table],
    mut outcomes: Vec<TraceOutcome>,
) -> Result<FleetSummary, AnalyzeError> {
    outcomes.sort_by_key(|o| o.trace_id);
    let rows: Vec<TraceRow> = outcomes
        .iter()
        .map(|o| {
            let count =
                |s: FindingSeverity| o.findings.iter().filter(|f| f.1 == s.name()).count() as u32;
            let of_severity = |sev: Severity| -> BTreeMap<&str, u64> {
                o.quality
                    .iter()
                    .filter(|q| q.1 == sev.name())
                    .map(|q| (q.0.as_str(), q.2))
                    .collect()
            };
            let (errors, warnings) = (of_severity(Severity::Error), of_severity(Severity::Warning));
            TraceRow {
                trace: o.columns(),
                format: o.format.clone(),
                status: o.status(),
                lost_events: o.lost_events,
                quality_errors: serde_json::to_string(&errors).unwrap_or_default(),
                quality_warnings: serde_json::to_string(&warnings).unwrap_or_default(),
                events: o.events,
                first_ns: o.first_ns,
                last_ns: o.last_ns,
                findings: o.findings.len() as u32,
                high: count(FindingSeverity::High),
                medium: count(FindingSeverity::Medium),
                worst_wait_ns: o.worst_wait_ns,
                worst_wait_comm: o.worst_wait_comm.clone(),
            }
        })
        .collect();
    let errors: Vec<(TraceColumns, String)> = outcomes
        .iter()
        .filter_map(|o| o.error.clone().map(|e| (o.columns(), e)))
        .collect();
    let write_one = |name: &str,
                     schema,
                     batch: Result<RecordBatch, stallscope_tables::ArrowError>|
     -> Result<(), AnalyzeError> {
        let path = out.join(name);
        let batch = batch.map_err(|e| io_err(&path, e))?;
        let mut w = parquet_writer_of(&path, schema).map_err(|e| io_err(&path, e))?;
        w.write(&batch).map_err(|e| io_err(&path, e))?;
        w.close().map_err(|e| io_err(&path, e))?;
        Ok(())
    };
    write_one("traces.parquet", traces_schema(), traces_batch(&rows))?;
    write_one("errors.parquet", errors_schema(), errors_batch(&errors))?;
    let summary = FleetSummary::of(&outcomes, tables);
    let path = out.join("summary.json");
    let text = serde_json::to_string_pretty(&summary).map_err(|e| io_err(&path, e))?;
    std::fs::write(&path, text + "\n").map_err(|e| io_err(&path, e))?;
    Ok(summary)
}

/// The whole fleet on this machine: [`plan`], [`prepare`], [`analyze_trace`] on
/// `options.jobs` threads (each takes the next trace when done with one), [`finish`].
pub fn run(options: &FleetOptions) -> Result<FleetSummary, AnalyzeError> {
    run_with_progress(options, |_, _, _| {})
}

/// [`run`], calling `progress(outcome, done, total)` as each trace ends (from the thread
/// that analyzed it).
pub fn run_with_progress(
    options: &FleetOptions,
    progress: impl Fn(&TraceOutcome, usize, usize) + Sync,
) -> Result<FleetSummary, AnalyzeError> {
    let traces = plan(&options.inputs)?;
    prepare(&options.out, &options.tables)?;
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let outcomes = Mutex::new(Vec::with_capacity(traces.len()));
    let jobs = options.jobs.clamp(1, traces.len());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(trace) = traces.get(i) else { break };
                let outcome = analyze_trace(trace, &options.out, &options.tables);
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                progress(&outcome, n, traces.len());
                if let Ok(mut v) = outcomes.lock() {
                    v.push(outcome);
                }
            });
        }
    });
    let outcomes = outcomes
        .into_inner()
        .map_err(|_| AnalyzeError::Output("a fleet worker failed".to_string()))?;
    finish(&options.out, &options.tables, outcomes)
}
