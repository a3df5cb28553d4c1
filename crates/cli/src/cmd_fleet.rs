//! `stallscope fleet PATH|GLOB… -o DIR`: many traces analyzed in parallel into one Parquet
//! dataset (a directory per table, a `traces` and an `errors` table, `summary.json`; see
//! `stallscope::fleet`), and the fleet summary printed: findings by detector and cause,
//! the worst wait per kernel release and host, the culprits that recur across hosts.

use std::io::{self, Write};
use std::path::PathBuf;

use clap::Args;
use stallscope::fleet::{run_with_progress, FleetOptions, FleetSummary, WorstWaitRow};

use crate::cmd_tables::parse_tables;
use crate::common::{CliError, OutputFormat};

/// Arguments of `stallscope fleet`.
#[derive(Args, Debug)]
#[command(
    after_help = "The dataset (one Parquet file per trace and table; trace_id, host, kernel \
and file columns first):\n  \
DIR/<table>/part-NNNNN.parquet  switches, waits, latency, requests, work_items, samples, findings (events with --tables)\n  \
DIR/traces.parquet              one row per trace: format, status, events, findings, worst wait\n  \
DIR/errors.parquet              the traces that could not be read, with the reason\n  \
DIR/summary.json                what this command prints\n\n\
Examples:\n  stallscope fleet 'hosts/*/perf.data' -o fleet/\n  \
stallscope fleet --jobs 8 --format json traces/ -o fleet/ > summary.json\n  \
duckdb -c \"select kernel, quantile_cont(wait_ns, 0.99) from 'fleet/waits/*.parquet' group by kernel\"\n  (more queries: docs/fleet.md)\n\n\
Globs are expanded by stallscope (quote them); a directory stands for every file below it, \
except a directory of blktrace's per-CPU files, which is one trace. A file that cannot be read goes to errors.parquet and the run goes on; \
exit 2 when no trace could be analyzed."
)]
pub struct FleetArgs {
    /// Traces: files, directories (every file below; a blktrace directory is one trace), or
    /// quoted glob patterns (`'hosts/**/*.dat'`).
    #[arg(required = true, value_name = "PATH|GLOB")]
    inputs: Vec<String>,
    /// The dataset's directory (created; an earlier fleet dataset there is replaced).
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    out: PathBuf,
    /// Tables to write per trace (comma-separated; default: all but `events`).
    #[arg(long, value_name = "NAMES")]
    tables: Option<String>,
    /// Traces analyzed at once (default: the CPUs available).
    #[arg(long, short = 'j', value_name = "N")]
    jobs: Option<usize>,
    /// Output format of the summary.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
}

/// Runs the command.
pub fn run(args: &FleetArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let mut options = FleetOptions::new(args.inputs.clone(), args.out.clone());
    options.tables = parse_tables(args.tables.as_deref())?;
    if let Some(j) = args.jobs {
        if j == 0 {
            return Err(CliError::Usage("--jobs must be at least 1".to_string()));
        }
        options.jobs = j;
    }
    // called from the worker threads
    let progress = std::sync::Mutex::new(crate::common::ReadProgress::new("traces"));
    let summary = run_with_progress(&options, |outcome, done, total| {
        if let Ok(mut p) = progress.lock() {
            let message = format!(" ({})", outcome.file);
            p.update(done as u64, Some(total as u64), done as u64, &message);
        }
    })?;
    drop(progress);
    match args.format {
        OutputFormat::Json => {
            serde_json::to_writer(&mut *out, &summary)?;
            writeln!(out)?;
        }
        OutputFormat::Text => write_text(out, &summary, &args.out)?,
    }
    if summary.analyzed == 0 {
        return Err(CliError::Usage(format!(
            "no trace could be analyzed ({} failed; reasons in {})",
            summary.failed,
            args.out.join("errors.parquet").display()
        )));
    }
    Ok(())
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn waits(out: &mut dyn Write, title: &str, rows: &[WorstWaitRow]) -> io::Result<()> {
    writeln!(out, "\n{title}")?;
    if rows.is_empty() {
        return writeln!(out, "  (no trace with scheduler switches)");
    }
    let w = rows.iter().map(|r| r.group.len()).max().unwrap_or(0).max(5);
    writeln!(
        out,
        "  {:<w$} {:>6} {:>14} {:>14} {:>14}  worst (trace, task)",
        "", "traces", "p50", "p90", "max"
    )?;
    for r in rows {
        writeln!(
            out,
            "  {:<w$} {:>6} {:>14} {:>14} {:>14}  {}, {}",
            r.group,
            r.traces,
            ms(r.p50_ns),
            ms(r.p90_ns),
            ms(r.max_ns),
            r.max_trace_id,
            r.max_comm
        )?;
    }
    Ok(())
}

fn write_text(out: &mut dyn Write, s: &FleetSummary, dir: &std::path::Path) -> io::Result<()> {
    writeln!(
        out,
        "fleet: {} traces, {} analyzed ({} degraded, {} empty), {} failed; {} events, {} findings → {}",
        s.traces,
        s.analyzed,
        s.degraded,
        s.empty,
        s.failed,
        s.events,
        s.findings,
        dir.display()
    )?;
    writeln!(out, "\nfindings by detector and cause")?;
    if s.by_detector.is_empty() {
        writeln!(out, "  (none)")?;
    } else {
        writeln!(
            out,
            "  {:<22} {:<24} {:>8} {:>5} {:>6} {:>6} {:>5}",
            "detector", "cause", "findings", "high", "medium", "traces", "hosts"
        )?;
        for r in &s.by_detector {
            writeln!(
                out,
                "  {:<22} {:<24} {:>8} {:>5} {:>6} {:>6} {:>5}",
                r.detector,
                r.cause.as_deref().unwrap_or("-"),
                r.findings,
                r.high,
                r.medium,
                r.traces,
                r.hosts
            )?;
        }
    }
    waits(
        out,
        "worst wait for a CPU per trace (perf sched latency's maximum delay), by kernel release",
        &s.worst_wait_by_kernel,
    )?;
    waits(out, "the same, by host", &s.worst_wait_by_host)?;
    writeln!(
        out,
        "\nrecurring culprits (in findings of more than one trace)"
    )?;
    if s.recurring_culprits.is_empty() {
        writeln!(out, "  (none)")?;
    } else {
        writeln!(
            out,
            "  {:<24} {:>5} {:>6} {:>8}",
            "comm", "hosts", "traces", "findings"
        )?;
        for c in &s.recurring_culprits {
            writeln!(
                out,
                "  {:<24} {:>5} {:>6} {:>8}",
                c.comm, c.hosts, c.traces, c.findings
            )?;
        }
    }
    if !s.errors.is_empty() {
        writeln!(out, "\ntraces that could not be analyzed (errors.parquet)")?;
        for (id, _, e) in &s.errors {
            writeln!(out, "  {id:>5}  {e}")?;
        }
    }
    writeln!(out, "\ntables")?;
    for t in &s.tables {
        writeln!(
            out,
            "  {:<9} {:>12} rows  {}/",
            t.table,
            t.rows,
            dir.join(&t.dir).display()
        )?;
    }
    Ok(())
}
