//! `stallscope latency`: the `perf sched latency` table, computed with perf's definitions
//! (see `stallscope::timeline::latency` for them, line by line).
//!
//! Text output is perf's layout, so the two can be diffed:
//!
//! ```text
//!  -------------------------------------------------------------------------------------------------------------------------------------------
//!   Task                  |   Runtime ms  | Switches | Avg delay ms    | Max delay ms    | Max delay start           | Max delay end          |
//!  -------------------------------------------------------------------------------------------------------------------------------------------
//!   CPU 0/KVM:13982       |     15.873 ms |       22 | avg:   0.663 ms | max:   3.042 ms | max start:   481.161357 s | max end:   481.164400 s
//!   fio:(3)               |      7.798 ms |        6 | avg:   0.170 ms | max:   0.748 ms | max start:   481.128727 s | max end:   481.129475 s
//! ```
//!
//! followed by perf's TOTAL line and INFO footer, then stallscope's data-quality block.
//! JSON: `{"tasks":[{"comm","pid","pids","runtime_ns","switches","avg_delay_ns",
//! "max_delay_ns","max_delay_start_ns","max_delay_end_ns"}],"stats":{…},"data_quality":{…}}`
//! (`pid` is null when the row merges several tasks).

use std::io::Write;

use clap::Args;
use serde::Serialize;
use stallscope::model::{fmt_secs_usecs, DataQuality, Dur};
use stallscope::timeline::{LatencyOptions, LatencyReport, LatencyRow, PerfFlavor, SortKey};

use crate::common::{write_quality_text, CliError, InputArgs, OutputFormat, ReadProgress};
use stallscope::latency::{latency, LatencyDone, LatencyRun};

/// Arguments of `stallscope latency`.
#[derive(Args, Debug)]
#[command(
    after_help = "A wait starts when a sleeping task is woken (sched_waking when recorded, else \
sched_wakeup; sched_wakeup_new) or when a task is switched out still runnable (R, R+), and ends when it is \
switched in. Runtime comes from sched_stat_runtime.\n\n\
Examples:\n  stallscope latency perf.data\n  stallscope latency --pids --sort max perf.data\n  \
stallscope latency --format json trace.txt | jq '.tasks[0]'\n  \
stallscope latency --perf-compat 6.1 perf.data   # the numbers Debian 12's perf prints"
)]
pub struct LatencyArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
    /// One row per task instead of one per task name (perf's -p).
    #[arg(long)]
    pids: bool,
    /// Sort keys, most significant first: avg, max, switch, runtime, pid (perf's -s).
    #[arg(long, value_name = "KEYS", default_value = "avg,max,switch,runtime")]
    sort: String,
    /// perf's -C: wakeups of tasks that are not sleeping restart their wait, and migrations
    /// restart a waiting task's wait. Like perf, this does not restrict the table to CPU N.
    #[arg(long, value_name = "N")]
    cpu: Option<u32>,
    /// Reproduce the definitions of this perf release: `current` or `6.1` (6.1 ignores
    /// sched_waking and does not count waits after a preemption, R+).
    #[arg(long, value_name = "VERSION", default_value = "current")]
    perf_compat: String,
    /// Read through the general event reader even when the lean path could (for tests and
    /// bug reports: both must print the same).
    #[arg(long, hide = true)]
    general_path: bool,
    /// Fail (exit 2) when the lean path is not taken, naming why (for tests).
    #[arg(long, hide = true, conflicts_with = "general_path")]
    require_lean: bool,
}

#[derive(Serialize)]
struct LatencyJson<'a> {
    tasks: &'a [LatencyRow],
    stats: &'a stallscope::timeline::LatencyStats,
    data_quality: &'a DataQuality,
}

/// perf's `%.3f` of `ns / 1e6`, in integer arithmetic except on an exact half
/// microsecond: there printf rounds the double nearest to the quotient (e.g. 3.0425 is
/// stored as 3.04249999…), so the same double, formatted with Rust's exact rounding, decides.
pub fn fmt_ms_like_printf(ns: Dur) -> String {
    let (us, rem) = (ns / 1000, ns % 1000);
    if rem == 500 {
        return format!("{:.3}", ns as f64 / 1e6);
    }
    let us = if rem > 500 { us + 1 } else { us };
    format!("{}.{:03}", us / 1000, us % 1000)
}

/// Parses `--perf-compat`.
pub fn parse_flavor(s: &str) -> Result<PerfFlavor, CliError> {
    PerfFlavor::from_name(s).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown --perf-compat {s:?}; expected current or 6.1"
        ))
    })
}

fn write_text(
    out: &mut dyn Write,
    report: &LatencyReport,
    dq: &DataQuality,
) -> std::io::Result<()> {
    let wide = "-".repeat(139);
    writeln!(out, "\n {wide}")?;
    writeln!(out, "  Task                  |   Runtime ms  | Switches | Avg delay ms    | Max delay ms    | Max delay start           | Max delay end          |")?;
    writeln!(out, " {wide}")?;
    for r in &report.tasks {
        let name = if r.pids.len() > 1 {
            format!("  {}:({}) ", r.comm, r.pids.len())
        } else {
            format!("  {}:{} ", r.comm, r.pids[0])
        };
        let pad = 24usize.saturating_sub(name.len());
        writeln!(
            out,
            "{name}{:pad$}|{:>11} ms |{:>9} | avg:{:>8} ms | max:{:>8} ms | max start: {:>12} s | max end: {:>12} s",
            "",
            fmt_ms_like_printf(r.runtime_ns),
            r.switches,
            fmt_ms_like_printf(r.avg_delay_ns),
            fmt_ms_like_printf(r.max_delay_ns),
            fmt_secs_usecs(r.max_delay_start_ns),
            fmt_secs_usecs(r.max_delay_end_ns),
        )?;
    }
    let s = &report.stats;
    writeln!(out, " {}", "-".repeat(113))?;
    writeln!(
        out,
        "  TOTAL:                |{:>11} ms |{:>9} |",
        fmt_ms_like_printf(s.total_runtime_ns),
        s.total_switches
    )?;
    writeln!(out, " {}", "-".repeat(51))?;
    let pct = |a: u64, b: u64| a as f64 / b as f64 * 100.0;
    if s.unordered_timestamps > 0 && s.wakeup_timestamps > 0 {
        writeln!(
            out,
            "  INFO: {:.3}% unordered timestamps ({} out of {})",
            pct(s.unordered_timestamps, s.wakeup_timestamps),
            s.unordered_timestamps,
            s.wakeup_timestamps
        )?;
    }
    if s.lost_events > 0 && s.events > 0 {
        writeln!(
            out,
            "  INFO: {:.3}% lost events ({} out of {}, in {} chunks)",
            pct(s.lost_events, s.events),
            s.lost_events,
            s.events,
            s.lost_chunks
        )?;
    }
    if s.context_switch_bugs > 0 && s.wakeup_timestamps > 0 {
        let hint = if s.lost_events > 0 {
            " (due to lost events?)"
        } else {
            ""
        };
        writeln!(
            out,
            "  INFO: {:.3}% context switch bugs ({} out of {}){hint}",
            pct(s.context_switch_bugs, s.wakeup_timestamps),
            s.context_switch_bugs,
            s.wakeup_timestamps
        )?;
    }
    writeln!(out)?;
    write_quality_text(out, dq)
}

/// Runs the command.
pub fn run(args: &LatencyArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let sort = SortKey::parse_list(&args.sort).map_err(|k| {
        CliError::Usage(format!(
            "unknown --sort key {k:?}; expected avg, max, switch, runtime or pid"
        ))
    })?;
    if sort.is_empty() {
        return Err(CliError::Usage("--sort needs at least one key".into()));
    }
    let flavor = parse_flavor(&args.perf_compat)?;
    let opts = LatencyOptions {
        by_pid: args.pids,
        sort,
        profile_cpu: args.cpu,
        flavor,
        waking_declared: false, // the facade sets it from the inputs
    };
    let mut run = LatencyRun::new(args.input.files.clone());
    run.input = args.input.options()?;
    run.options = opts;
    run.general_path = args.general_path;
    run.on_lean_progress = Some(lean_progress);
    let done = latency(&run);
    if let Ok(mut p) = LEAN_PROGRESS.lock() {
        p.take(); // erased
    }
    let LatencyDone {
        report,
        quality: dq,
        lean_path,
    } = done?;
    if let (Err(why), true) = (&lean_path, args.require_lean) {
        return Err(CliError::Usage(format!("lean path not taken: {why}")));
    }
    if report.tasks.is_empty() {
        return Err(match args.cpu {
            Some(c) if report.stats.events > 0 => CliError::filtered_out(
                "latency",
                &args.input.files,
                &format!("no task was switched in on CPU {c} (--cpu)"),
            ),
            // (perf sched latency prints an empty table then)
            _ if report.stats.switches > 0 => CliError::missing(
                "latency",
                &args.input.files,
                &format!(
                    "{} switch{} in no task that latency counts (only idle, or tasks switched in without a recorded wakeup): latency measures waits that end in a switch-in",
                    match report.stats.switches {
                        1 => "its one sched_switch event".to_string(),
                        n => format!("its {n} sched_switch events"),
                    },
                    if report.stats.switches == 1 { "es" } else { "" }
                ),
                "perf sched record -- COMMAND` or `stallscope record -o trace.dat -- COMMAND",
            ),
            _ => CliError::missing(
                "latency",
                &args.input.files,
                "no sched_switch events (latency needs sched_switch, and sched_waking or sched_wakeup for the delays)",
                "perf sched record -- COMMAND` or `stallscope record -o trace.dat -- COMMAND",
            ),
        }
        .json_too(args.format, out));
    }
    match args.format {
        OutputFormat::Text => write_text(out, &report, &dq)?,
        OutputFormat::Json => {
            serde_json::to_writer(
                &mut *out,
                &LatencyJson {
                    tasks: &report.tasks,
                    stats: &report.stats,
                    data_quality: &dq,
                },
            )?;
            out.write_all(b"\n")?;
        }
    }
    Ok(())
}

/// The lean path's progress (the general path's is attached to its inputs): its callback
/// is a plain function, so the bar lives here for the command's run.
static LEAN_PROGRESS: std::sync::Mutex<Option<ReadProgress>> = std::sync::Mutex::new(None);

/// [`ReadProgress`] for the lean path.
fn lean_progress(done: u64, total: u64, events: u64) {
    if let Ok(mut p) = LEAN_PROGRESS.lock() {
        p.get_or_insert_with(|| ReadProgress::new("events"))
            .update(done, Some(total), events, "");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ms_formatting_matches_printf() {
        // Expected values are printf("%.3f", ns / 1e6) (checked with Python's %-formatting,
        // which rounds the same double the same way).
        assert_eq!(fmt_ms_like_printf(0), "0.000");
        assert_eq!(fmt_ms_like_printf(3_042_499), "3.042");
        assert_eq!(fmt_ms_like_printf(3_042_501), "3.043");
        assert_eq!(fmt_ms_like_printf(3_042_500), "3.042"); // 3.0425 is 3.04249999… as a double
        assert_eq!(fmt_ms_like_printf(1_500), "0.002"); // 0.0015 is 0.00150000000000000003…
        assert_eq!(fmt_ms_like_printf(2_500), "0.003");
        assert_eq!(fmt_ms_like_printf(123_456_500), "123.457");
        assert_eq!(fmt_ms_like_printf(15_873_000), "15.873");
    }
}
