//! `stallscope analyze`: runs the detectors over the inputs and prints the report — text
//! (one block per finding, most severe first, with evidence; `--oneline` for one line per
//! finding) or the `stallscope.report/1` JSON document (`docs/report.schema.json`).
//!
//! Evidence of text inputs shows the original trace lines: after the analysis, the lines
//! named by the findings are read again from the files (stdin cannot be re-read; its
//! evidence keeps the normalized `dump` line).
//!
//! Exit status: 0, or 1 when `--fail-on SEVERITY` is given and a finding of at least that
//! severity exists (see [`failed`]); errors exit 2 as for every command.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
pub use stallscope::analyze::parse_time_range;
use stallscope::analyze::AnalyzeOptions;
use stallscope::model::{FindingSeverity, Report};
use stallscope::report::text::TextOptions;

use crate::common::{CliError, InputArgs, OutputFormat};

/// Set when `--fail-on` matched a finding.
static FAIL_ON_MATCHED: AtomicBool = AtomicBool::new(false);

/// True when the last `analyze` run found a finding at or above its `--fail-on` severity.
pub fn failed() -> bool {
    FAIL_ON_MATCHED.load(Ordering::Relaxed)
}

/// Set when `--fail-on` was given and nothing could be analyzed (or the filters match
/// nothing): a gate must not pass on nothing.
static GATE_ON_NOTHING: AtomicBool = AtomicBool::new(false);

/// True when the last `analyze` run had `--fail-on` and analyzed nothing (exit 2).
pub fn gated_on_nothing() -> bool {
    GATE_ON_NOTHING.load(Ordering::Relaxed)
}

/// Arguments of `stallscope analyze`.
#[derive(Args, Debug)]
#[command(
    after_help = "Detectors: `stallscope detectors`; what each finds and its thresholds: \
`stallscope explain ID`.\n\n\
Examples:\n  stallscope analyze perf.data\n  stallscope analyze --oneline --fail-on high perf.data\n  \
stallscope analyze --select runqueue-starvation --set runqueue-starvation.threshold_ns=5ms trace.txt\n  \
stallscope analyze --time 595.1..595.3 --pid 12897 --format json perf.data | jq .findings"
)]
pub struct AnalyzeArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
    /// Run only these detectors (comma-separated ids).
    #[arg(long, value_name = "IDS")]
    select: Option<String>,
    /// Do not run these detectors (comma-separated ids).
    #[arg(long, value_name = "IDS")]
    ignore: Option<String>,
    /// Set a detector threshold: ID.PARAM=VALUE (durations accept ns/us/ms/s). Repeatable.
    #[arg(long = "set", value_name = "ID.PARAM=VALUE")]
    sets: Vec<String>,
    /// Analyze only events in this time range, seconds in the trace clock: A..B, A.. or ..B.
    #[arg(long, value_name = "A..B")]
    time: Option<String>,
    /// Report only findings involving these CPUs (list like 0-3,5).
    #[arg(long, value_name = "LIST")]
    cpu: Option<String>,
    /// Report only findings naming these task ids (comma-separated).
    #[arg(long, value_name = "LIST")]
    pid: Option<String>,
    /// Keep findings about the recorder's own threads (`stallscope record`'s, perf's);
    /// by default they are left out and counted as `recorder_findings_left_out`.
    #[arg(long)]
    include_recorder: bool,
    /// Exit with status 1 when a finding of this severity or higher exists: high, medium, low.
    #[arg(long, value_name = "SEVERITY")]
    fail_on: Option<String>,
    /// One line per finding (text only).
    #[arg(long)]
    oneline: bool,
    /// Data quality only where it can change the conclusion: warnings and errors, without
    /// examples; info notes are counted in one line (text only).
    #[arg(short, long)]
    quiet: bool,
    /// Also write a self-contained HTML report (findings, per-CPU timelines around them,
    /// wait histograms; no network access) to FILE. Drawn from the analysis' own model as it
    /// reads the inputs (once), kept in a temporary file.
    #[arg(long, value_name = "FILE")]
    html: Option<std::path::PathBuf>,
    /// Kernel symbol table for CPU-profile samples (`/proc/kallsyms` of the recording host;
    /// default: this host's when the kernel release matches; `none`: addresses).
    #[arg(long, value_name = "FILE")]
    kallsyms: Option<String>,
}

/// Parses a CPU list (`0-3,5`).
fn parse_cpu_list(s: &str) -> Result<BTreeSet<u32>, CliError> {
    match stallscope::model::parse_cpu_list(s) {
        Ok(cpus) => Ok(cpus.into_iter().collect()),
        Err(why) => Err(CliError::Usage(format!(
            "bad --cpu {s:?} ({why}); expected a list like 0-3,5"
        ))),
    }
}

fn parse_pid_list(s: &str) -> Result<BTreeSet<i32>, CliError> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse::<i32>()
                .map_err(|_| CliError::Usage(format!("bad --pid {s:?}; expected pids like 12,34")))
        })
        .collect()
}

/// Runs the command.
pub fn run(args: &AnalyzeArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let fail_on = match &args.fail_on {
        None => None,
        Some(s) => Some(FindingSeverity::from_name(s).ok_or_else(|| {
            CliError::Usage(format!(
                "unknown --fail-on {s:?}; expected high, medium or low"
            ))
        })?),
    };
    let time = args.time.as_deref().map(parse_time_range).transpose()?;
    let mut options = AnalyzeOptions::new(args.input.files.clone());
    options.input_format = args.input.forced_format()?;
    options.merge_unrelated = args.input.merge_unrelated;
    options.merge_overlapping = args.input.merge_overlapping;
    options.select_detectors(args.select.as_deref(), args.ignore.as_deref(), &args.sets)?;
    options.time = time;
    options.cpus = args.cpu.as_deref().map(parse_cpu_list).transpose()?;
    options.pids = args.pid.as_deref().map(parse_pid_list).transpose()?;
    options.include_recorder = args.include_recorder;
    options.kallsyms = args.kallsyms.clone();
    options.on_open = Some(crate::common::attach_progress);
    // with --html, the events are kept as they stream by for the windows around the
    // findings (the inputs are read once)
    let mut spill = match &args.html {
        Some(path) => Some(stallscope::windows::WindowSpill::new().map_err(|e| {
            CliError::Usage(format!("--html {}: a temporary file: {e}", path.display()))
        })?),
        None => None,
    };
    let report = match spill.as_mut() {
        Some(spill) => stallscope::analyze::analyze_with(&options, Some(spill))?.report,
        None => stallscope::analyze::analyze(&options)?,
    };
    if let Some(min) = fail_on {
        if report.findings.iter().any(|f| f.severity >= min) {
            FAIL_ON_MATCHED.store(true, Ordering::Relaxed);
        }
        if report.nothing_analyzed.is_some() {
            GATE_ON_NOTHING.store(true, Ordering::Relaxed);
        }
    }
    if let Some(why) = &report.nothing_analyzed {
        eprintln!("stallscope analyze: nothing analyzed: {why}");
    }
    if let (Some(path), Some(spill)) = (&args.html, spill) {
        write_html(&report, spill, path)?;
    }
    match args.format {
        OutputFormat::Json => stallscope::report::json::write(out, &report)?,
        OutputFormat::Text => {
            use std::io::IsTerminal;
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            stallscope::report::text::write(
                out,
                &report,
                TextOptions {
                    oneline: args.oneline,
                    color,
                    quiet: args.quiet,
                },
            )?
        }
    }
    Ok(())
}

/// Writes the `--html` page: the windows around the findings come from what the analysis'
/// model made of the inputs as it read them (`spill`).
fn write_html(
    report: &Report,
    spill: stallscope::windows::WindowSpill,
    path: &std::path::Path,
) -> Result<(), CliError> {
    use stallscope::model::FindingWindows;
    use stallscope::windows::WindowOptions;
    let opts = WindowOptions::default();
    let none = |note: String| FindingWindows {
        margin_ns: opts.margin_ns,
        max_items: opts.max_items,
        omitted_windows: report.findings.len(),
        note,
        ..FindingWindows::default()
    };
    let windows = if !spill.opened() {
        none("CPU-profile text inputs (folded, perf report) have no timelines.".to_string())
    } else if report.findings.is_empty() {
        FindingWindows {
            margin_ns: opts.margin_ns,
            max_items: opts.max_items,
            ..FindingWindows::default()
        }
    } else {
        spill
            .windows(&report.findings, opts)
            .unwrap_or_else(|e| none(format!("No timelines: {e}.")))
    };
    let bad = |e: std::io::Error| CliError::Usage(format!("--html {}: {e}", path.display()));
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).map_err(bad)?);
    stallscope::report::html::write(&mut file, report, windows, Default::default()).map_err(bad)?;
    file.flush().map_err(bad)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-2,5")
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>(),
            vec![0, 1, 2, 5]
        );
        assert!(parse_cpu_list("2-1").is_err());
    }
}
