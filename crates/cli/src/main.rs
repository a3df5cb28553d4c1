//! The `stallscope` command: finds and explains kernel scheduling pathologies in Linux traces.
//!
//! Subcommands live one per module (`cmd_*.rs`); shared flags and error handling in
//! [`common`]. Exit codes: 0 success, 2 error (unreadable input, unknown format, corrupt
//! header, bad usage); a closed stdout (`| head`) ends quietly with 0.

mod cmd_analyze;
mod cmd_compare;
mod cmd_completions;
mod cmd_critical_path;
mod cmd_detectors;
mod cmd_dump;
mod cmd_explain;
mod cmd_export;
mod cmd_fleet;
mod cmd_info;
mod cmd_iolat;
mod cmd_latency;
mod cmd_man;
mod cmd_profile;
mod cmd_record;
mod cmd_schema;
mod cmd_sleeps;
mod cmd_tables;
mod cmd_timehist;
mod common;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use common::CliError;

/// Find and explain kernel scheduling pathologies in Linux traces.
#[derive(Parser)]
#[command(
    name = "stallscope",
    version,
    about = "Find and explain kernel scheduling pathologies in Linux traces, with numbers that agree with perf",
    after_help = "Inputs (sniffed; --input-format NAME forces one): perf.data in file or pipe mode, -z compressed (perf-data, \
perf-pipe), trace-cmd trace.dat v6 and v7 (trace-dat), ftrace text: trace, trace_pipe (ftrace-text), `trace-cmd report` text \
(trace-cmd-text), `perf script` text (perf-script-text), blktrace per-CPU binary files (blktrace), `blkparse` text \
(blkparse-text); CPU profiles for `profile` and `analyze`: folded stacks (folded), `perf report --stdio` text \
(perf-report-text); each may be \
gzip/zstd/xz compressed; `-` reads stdin. Several files are merged in time order when they are one recording.\n\n\
Examples:\n  sudo perf sched record -- sleep 5\n  stallscope analyze perf.data\n  sudo stallscope record -o trace.dat --duration 5\n  stallscope info perf.data\n  stallscope latency perf.data --sort max\n  \
stallscope timehist perf.data --pid 1234 --summary\n  perf script --ns | stallscope dump -\n  stallscope latency trace.txt --format json"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Find scheduling pathologies and explain them with evidence (exit 1 with --fail-on).
    Analyze(cmd_analyze::AnalyzeArgs),
    /// List the detectors, their needed events and thresholds.
    Detectors(cmd_detectors::DetectorsArgs),
    /// Explain what a detector finds, how to confirm it, its limits and severity rules.
    Explain(cmd_explain::ExplainArgs),
    /// Describe inputs: format, kernel, CPUs, time range, event counts, tasks, data quality,
    /// and which analyses they support.
    Info(cmd_info::InfoArgs),
    /// Print normalized events, one per line (stable format; JSON lines with --format json).
    Dump(cmd_dump::DumpArgs),
    /// Per-task scheduling latency, defined exactly like `perf sched latency`.
    Latency(cmd_latency::LatencyArgs),
    /// Block I/O latency phases (Q2C, D2C, …) per device / process / op, defined like btt.
    Iolat(cmd_iolat::IolatArgs),
    /// One row per context switch, like `perf sched timehist`.
    Timehist(cmd_timehist::TimehistArgs),
    /// Every sleep that ended and who ended it: the waker, its context, what it had just done.
    Sleeps(cmd_sleeps::SleepsArgs),
    /// Write the analyses as Parquet tables (switches, waits, latency, requests, work items, samples, findings, events).
    Tables(cmd_tables::TablesArgs),
    /// One task's time over a window: running, runnable (who ran instead), sleeping (woken by whom), with shares.
    CriticalPath(cmd_critical_path::CriticalPathArgs),
    /// Analyze many traces in parallel into one Parquet dataset, with a fleet summary.
    Fleet(cmd_fleet::FleetArgs),
    /// Write the events (and findings) as a Perfetto trace or Chrome JSON for trace viewers.
    Export(cmd_export::ExportArgs),
    /// Record scheduler/block/workqueue events into a trace.dat (root; private tracefs instance).
    Record(cmd_record::RecordArgs),
    /// Per-function self and total (children) shares of a CPU profile (perf.data -g, perf script, folded, perf report).
    Profile(cmd_profile::ProfileArgs),
    /// Compare two sets of runs (traces, profiles, perf stat / fio metrics) with significance tests.
    Compare(cmd_compare::CompareArgs),
    /// Print the JSON Schema of the analyze report (derived from the library's types).
    Schema(cmd_schema::SchemaArgs),
    /// Print the shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd_completions::CompletionsArgs),
    /// Write the manual pages (stallscope.1, stallscope-analyze.1, …) into a directory.
    Man(cmd_man::ManArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let result = match &cli.command {
        Command::Analyze(a) => cmd_analyze::run(a, &mut out),
        Command::Detectors(a) => cmd_detectors::run(a, &mut out),
        Command::Explain(a) => cmd_explain::run(a, &mut out),
        Command::Info(a) => cmd_info::run(a, &mut out),
        Command::Dump(a) => cmd_dump::run(a, &mut out),
        Command::Latency(a) => cmd_latency::run(a, &mut out),
        Command::Iolat(a) => cmd_iolat::run(a, &mut out),
        Command::Timehist(a) => cmd_timehist::run(a, &mut out),
        Command::Sleeps(a) => cmd_sleeps::run(a, &mut out),
        Command::CriticalPath(a) => cmd_critical_path::run(a, &mut out),
        Command::Tables(a) => cmd_tables::run(a, &mut out),
        Command::Fleet(a) => cmd_fleet::run(a, &mut out),
        Command::Record(a) => cmd_record::run(a, &mut out),
        Command::Export(a) => cmd_export::run(a, &mut out),
        Command::Profile(a) => cmd_profile::run(a, &mut out),
        Command::Compare(a) => cmd_compare::run(a, &mut out),
        Command::Schema(a) => cmd_schema::run(a, &mut out),
        Command::Completions(a) => cmd_completions::run(a, Cli::command(), &mut out),
        Command::Man(a) => cmd_man::run(a, Cli::command(), &mut out),
    };
    let result = result.and_then(|()| out.flush().map_err(CliError::Io));
    match result {
        Ok(()) if cmd_analyze::gated_on_nothing() => ExitCode::from(2),
        Ok(()) if cmd_record::command_exit().is_some() => {
            ExitCode::from(cmd_record::command_exit().unwrap_or(1))
        }
        Ok(()) if cmd_analyze::failed() => ExitCode::from(1),
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            // Avoid writing more to a possibly broken stdout; errors go to stderr.
            let _ = writeln!(io::stderr(), "stallscope: error: {e}");
            ExitCode::from(2)
        }
    }
}
