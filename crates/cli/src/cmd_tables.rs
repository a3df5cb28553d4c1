//! `stallscope tables FILE… --to DIR`: the analyses of the inputs as Parquet files, one per
//! table (`switches`, `waits`, `latency`, `requests`, `work_items`, `samples`, `findings`, `events`; columns in
//! `stallscope_tables`), for pandas, polars and DuckDB:
//!
//! ```text
//! $ stallscope tables perf.data --to out/
//! table      rows  file
//! switches   7821  out/switches.parquet
//! waits      3907  out/waits.parquet
//! …
//! $ duckdb -c "select comm, max(wait_ns) from 'out/waits.parquet' group by comm order by 2 desc limit 5"
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;
use stallscope::analyze::{AnalyzeError, AnalyzeOptions};
use stallscope::tables::{
    parquet_writer, tables, BackgroundWriters, ParquetWriter, Table, WriteError,
};

use crate::cmd_analyze::parse_time_range;
use crate::common::{CliError, InputArgs, OutputFormat};

/// Arguments of `stallscope tables`.
#[derive(Args, Debug)]
#[command(
    after_help = "Tables (columns: `stallscope tables --help` lists them; times are integer ns):\n  \
switches  one row per context switch (perf sched timehist's rows)\n  \
waits     one row per runnable interval: task, CPU, start, end, started_by, ended_by\n  \
latency   perf sched latency's rows\n  \
requests  block requests with Q/G/I/D/C times and tasks\n  \
work_items  workqueue executions: function, workqueue, worker, queue/start/end, CPU time\n  \
samples   profile stacks (leaf first) with their weights, as `stallscope profile` reads them\n  \
findings  one row per finding of `analyze`\n  \
events    every normalized event (stallscope dump's line, split)\n\n\
Examples:\n  stallscope tables perf.data --to out/\n  \
stallscope tables --tables waits,latency --time 595.1..596 trace.dat --to out/\n  \
duckdb -c \"select comm, max(wait_ns) from 'out/waits.parquet' group by comm order by 2 desc\""
)]
pub struct TablesArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Output format of the summary (the tables are Parquet files).
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
    /// Directory to write `<table>.parquet` into (created when missing).
    #[arg(long, value_name = "DIR")]
    to: PathBuf,
    /// Which tables (comma-separated: switches, waits, latency, requests, work_items, samples,
    /// findings, events; default: all but `events`).
    #[arg(long, value_name = "NAMES")]
    tables: Option<String>,
    /// Only events in this time range, seconds in the trace clock: A..B, A.. or ..B.
    #[arg(long, value_name = "A..B")]
    time: Option<String>,
    /// The recording host's /proc/kallsyms: names work functions (`work_items`) and kernel
    /// frames (`samples`); default: the input's own table (trace.dat), then this host's
    /// when its kernel is the recording's; `none`: addresses.
    #[arg(long, value_name = "FILE")]
    kallsyms: Option<String>,
}

pub fn parse_tables(s: Option<&str>) -> Result<Vec<Table>, CliError> {
    let Some(s) = s else {
        return Ok(Table::ALL
            .into_iter()
            .filter(|t| *t != Table::Events)
            .collect());
    };
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|name| {
            Table::from_name(name).ok_or_else(|| {
                let names: Vec<&str> = Table::ALL.iter().map(|t| t.name()).collect();
                CliError::Usage(format!(
                    "unknown table {name:?}; expected one of {}",
                    names.join(", ")
                ))
            })
        })
        .collect()
}

/// The table files being written: each into a temporary file beside its final name, renamed
/// over it only when every table was written, so a run that fails leaves the previous output
/// as it was (and no temporary file: they are removed on drop unless committed).
struct PendingFiles {
    /// (temporary, final) paths.
    files: Vec<(PathBuf, PathBuf)>,
    committed: bool,
}

impl PendingFiles {
    /// A writer of table `t` into a temporary file in `dir`.
    fn writer(&mut self, dir: &Path, t: Table) -> Result<ParquetWriter, AnalyzeError> {
        let file = dir.join(format!("{}.parquet", t.name()));
        let tmp = dir.join(format!(".{}.parquet.{}.tmp", t.name(), std::process::id()));
        let w = parquet_writer(&tmp, t)
            .map_err(|e| AnalyzeError::Output(format!("{}: {e}", file.display())))?;
        self.files.push((tmp, file));
        Ok(w)
    }

    /// Puts every table file in place.
    fn commit(mut self) -> std::io::Result<()> {
        self.committed = true;
        for (tmp, file) in &self.files {
            std::fs::rename(tmp, file)
                .map_err(|e| std::io::Error::other(format!("{}: {e}", file.display())))?;
        }
        Ok(())
    }
}

impl Drop for PendingFiles {
    fn drop(&mut self) {
        if !self.committed {
            for (tmp, _) in &self.files {
                let _ = std::fs::remove_file(tmp);
            }
        }
    }
}

/// Runs the command.
pub fn run(args: &TablesArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let which = parse_tables(args.tables.as_deref())?;
    std::fs::create_dir_all(&args.to)
        .map_err(|e| CliError::Usage(format!("--to {}: {e}", args.to.display())))?;
    let mut options = AnalyzeOptions::new(args.input.files.clone());
    options.input_format = args.input.forced_format()?;
    options.merge_unrelated = args.input.merge_unrelated;
    options.merge_overlapping = args.input.merge_overlapping;
    options.time = args.time.as_deref().map(parse_time_range).transpose()?;
    options.kallsyms = args.kallsyms.clone();
    options.on_open = Some(crate::common::attach_progress);
    let mut pending = PendingFiles {
        files: Vec::new(),
        committed: false,
    };
    let mut writers = Vec::new();
    for &t in &which {
        writers.push((t, pending.writer(&args.to, t)?));
    }
    // encoded and compressed on a thread of their own, beside the reading and the model
    let mut files = BackgroundWriters::spawn(writers)?;
    let failed = |(t, e): WriteError| match t {
        Some(t) => format!("{}.parquet: {e}", t.name()),
        None => format!("writing the tables: {e}"),
    };
    tables(&options, &which, |t, batch| {
        files
            .write(t, batch)
            .map_err(|e| AnalyzeError::Output(failed(e)))
    })?;
    let summary: Vec<_> = files
        .finish()
        .map_err(|e| CliError::Io(std::io::Error::other(failed(e))))?
        .into_iter()
        .map(|(t, rows)| {
            (
                t.name(),
                rows,
                args.to.join(format!("{}.parquet", t.name())),
            )
        })
        .collect();
    pending.commit()?;
    match args.format {
        OutputFormat::Json => {
            let doc = json!({
                "tables": summary
                    .iter()
                    .map(|(name, rows, file)| json!({"table": name, "rows": rows, "file": file}))
                    .collect::<Vec<_>>(),
            });
            serde_json::to_writer(&mut *out, &doc)?;
            writeln!(out)?;
        }
        OutputFormat::Text => {
            writeln!(out, "{:<9} {:>10}  file", "table", "rows")?;
            for (name, rows, file) in &summary {
                writeln!(out, "{name:<9} {rows:>10}  {}", file.display())?;
            }
        }
    }
    Ok(())
}
