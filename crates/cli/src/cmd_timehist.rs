//! `stallscope timehist`: one row per context switch, like `perf sched timehist`, with the
//! switched-out task's state as an extra column; `--summary` gives perf's runtime summary.
//! Definitions: `stallscope_timeline::timehist`.
//!
//! Text rows use perf's layout (`perf sched timehist --state` adds the same last column):
//!
//! ```text
//!            time    cpu  task name                       wait time  sch delay   run time  state
//!                         [tid/pid]                          (msec)     (msec)     (msec)
//! --------------- ------  ------------------------------  ---------  ---------  ---------  -----
//!      481.124212 [0000]  migration/0[18]                     0.000      0.002      0.008      S
//!      481.179434 [0000]  io worker-1[13983/13980]            1.655      0.000      0.554      S
//! ```
//!
//! Rows are written as they are computed (never buffered). JSON:
//! `{"rows":[{"ts_ns","cpu","comm","tid","pid","wait_ns","sch_delay_ns","run_ns","prev_state"}…],
//! "summary":{…}|null,"data_quality":{…}}`.

use std::io::Write;

use clap::Args;
use serde::Serialize;
use stallscope::model::{fmt_secs_usecs, DataQuality, Dur, Tid};
use stallscope::timeline::{
    Timehist, TimehistOptions, TimehistRow, TimehistSummary, WakeupSelector,
};

use crate::cmd_latency::parse_flavor;
use crate::common::{write_quality_text, CliError, InputArgs, OutputFormat};

/// Arguments of `stallscope timehist`.
#[derive(Args, Debug)]
#[command(
    after_help = "Per row: wait time = off-CPU time before this run; sch delay = time runnable before \
this run (from the wakeup, or from the switch-out if the task left runnable); run time = this run.\n\n\
Examples:\n  stallscope timehist perf.data | less\n  stallscope timehist --pid 1234 --cpu 3 perf.data\n  \
stallscope timehist --summary perf.data\n  stallscope timehist --format json trace.txt | jq -c '.rows[]'"
)]
pub struct TimehistArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
    /// Only tasks of this process (perf's -p).
    #[arg(long, value_name = "PID")]
    pid: Option<Tid>,
    /// Only the rows and statistics of this CPU (perf's -C).
    #[arg(long, value_name = "N")]
    cpu: Option<u32>,
    /// Only the runtime summary (perf's -s).
    #[arg(long)]
    summary: bool,
    /// The rows and the runtime summary (perf's -S).
    #[arg(long, conflicts_with = "summary")]
    with_summary: bool,
    /// Reproduce the definitions of this perf release: `current` or `6.1` (6.1 counts sch
    /// delay only from wakeups, not after a preemption).
    #[arg(long, value_name = "VERSION", default_value = "current")]
    perf_compat: String,
}

/// perf's `print_sched_time`: `msec.usec` truncated, msec right-aligned in `width`.
fn sched_time(ns: Dur, width: usize) -> String {
    format!("{:>width$}.{:03} ", ns / 1_000_000, ns % 1_000_000 / 1000)
}

/// perf's `comm[tid]`, `comm[tid/pid]` or, for idle, the bare name.
fn task_name(comm: &str, tid: Tid, pid: Option<Tid>) -> String {
    match pid {
        Some(0) => comm.to_string(),
        Some(p) if p != tid => format!("{comm}[{tid}/{p}]"),
        _ => format!("{comm}[{tid}]"),
    }
}

/// Text rendering with perf's growing name column.
struct TextRows {
    width: usize,
}

impl TextRows {
    fn header(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let (w, dots) = (self.width, "-".repeat(self.width.max(15)));
        writeln!(
            out,
            "{:>15} {:>6}  {:<w$}  {:>9}  {:>9}  {:>9}  state",
            "time", "cpu", "task name", "wait time", "sch delay", "run time"
        )?;
        writeln!(
            out,
            "{:>15} {:<6}  {:<w$}  {:>9}  {:>9}  {:>9}",
            "", "", "[tid/pid]", "(msec)", "(msec)", "(msec)"
        )?;
        writeln!(
            out,
            "{} {}  {}  {}  {}  {}  {}",
            &dots[..15],
            &dots[..6],
            &dots[..w],
            &dots[..9],
            &dots[..9],
            &dots[..9],
            &dots[..5]
        )
    }

    fn row(&mut self, out: &mut dyn Write, r: &TimehistRow) -> std::io::Result<()> {
        let name = task_name(r.comm.as_str(), r.tid, r.pid);
        self.width = self.width.max(name.len());
        writeln!(
            out,
            "{:>15} [{:04}]  {:<w$} {}{}{} {:>5} ",
            fmt_secs_usecs(r.ts_ns),
            r.cpu,
            name,
            sched_time(r.wait_ns, 6),
            sched_time(r.sch_delay_ns, 6),
            sched_time(r.run_ns, 6),
            r.prev_state.to_string(),
            w = self.width
        )
    }

    fn summary(&self, out: &mut dyn Write, s: &TimehistSummary) -> std::io::Result<()> {
        let w = self.width;
        writeln!(out, "\nRuntime summary")?;
        writeln!(out, "{:>w$}  parent   sched-in     run-time    min-run     avg-run     max-run  stddev  migrations", "comm")?;
        writeln!(
            out,
            "{:>w$}            (count)       (msec)     (msec)      (msec)      (msec)       %",
            ""
        )?;
        writeln!(out, "{}", "-".repeat(117))?;
        for t in &s.tasks {
            writeln!(
                out,
                "{:>w$}   {:>5}  {:>9} {}{} {} {}  {:>5.2}   {:>5}",
                task_name(t.comm.as_str(), t.tid, t.pid),
                t.ppid.unwrap_or(-1),
                t.sched_in,
                sched_time(t.run_ns, 8),
                sched_time(t.min_run_ns, 6),
                sched_time(t.avg_run_ns, 6),
                sched_time(t.max_run_ns, 6),
                t.stddev_pct,
                t.migrations
            )?;
        }
        if s.tasks.is_empty() {
            writeln!(out, "<no still running tasks>")?;
        }
        if !s.idle.is_empty() {
            writeln!(out, "\nIdle stats:")?;
            for i in &s.idle {
                match i.idle_ns {
                    Some(ns) => {
                        let pct = if s.scheduling_time_ns > 0 {
                            100.0 * ns as f64 / s.scheduling_time_ns as f64
                        } else {
                            0.0
                        };
                        writeln!(
                            out,
                            "    CPU {:>2} idle for {} msec  ({:>6.2}%)",
                            i.cpu,
                            sched_time(ns, 6),
                            pct
                        )?
                    }
                    None => writeln!(out, "    CPU {:>2} idle entire time window", i.cpu)?,
                }
            }
        }
        writeln!(
            out,
            "\n    Total number of unique tasks: {}\nTotal number of context switches: {}",
            s.unique_tasks, s.context_switches
        )?;
        writeln!(
            out,
            "           Total run time (msec): {}",
            sched_time(s.total_run_ns, 2)
        )?;
        writeln!(
            out,
            "    Total scheduling time (msec): {} (x {})",
            sched_time(s.scheduling_time_ns, 2),
            s.nr_cpus
        )
    }
}

#[derive(Serialize)]
struct Tail<'a> {
    summary: Option<&'a TimehistSummary>,
    data_quality: &'a DataQuality,
}

/// Runs the command.
pub fn run(args: &TimehistArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let flavor = parse_flavor(&args.perf_compat)?;
    let mut inputs = args.input.open()?;
    let metas = inputs.metas();
    let opts = TimehistOptions {
        pid: args.pid,
        cpu: args.cpu,
        flavor,
        waking_declared: WakeupSelector::declared_in(metas.iter().copied()),
        nr_cpus: metas.iter().filter_map(|m| m.nr_cpus).max(),
    };
    let mut th = Timehist::new(opts);
    let show_rows = !args.summary;
    let mut text = TextRows { width: 30 };
    let mut first = true;
    let mut io_err: Option<std::io::Error> = None;
    match args.format {
        OutputFormat::Text if show_rows => text.header(out)?,
        OutputFormat::Text => {}
        OutputFormat::Json => out.write_all(b"{\"rows\":[")?,
    }
    while let Some(ev) = inputs.next_event()? {
        th.process(&ev, &mut |r| {
            if !show_rows || io_err.is_some() {
                return;
            }
            let res = match args.format {
                OutputFormat::Text => text.row(out, r),
                OutputFormat::Json => {
                    let sep: &[u8] = if first { b"\n" } else { b",\n" };
                    first = false;
                    out.write_all(sep).and_then(|()| {
                        serde_json::to_writer(&mut *out, r).map_err(std::io::Error::other)
                    })
                }
            };
            if let Err(e) = res {
                io_err = Some(e);
            }
        });
        if let Some(e) = io_err.take() {
            return Err(CliError::Io(e));
        }
    }
    let summary = (args.summary || args.with_summary).then(|| th.summary());
    let dq = inputs.quality();
    match args.format {
        OutputFormat::Text => {
            if let Some(s) = &summary {
                text.summary(out, s)?;
            }
            writeln!(out)?;
            write_quality_text(out, &dq)?;
        }
        OutputFormat::Json => {
            out.write_all(b"\n],")?;
            // The tail object's fields, spliced after "rows" in the same JSON object.
            let tail = serde_json::to_string(&Tail {
                summary: summary.as_ref(),
                data_quality: &dq,
            })?;
            out.write_all(&tail.as_bytes()[1..])?;
            out.write_all(b"\n")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_formats() {
        assert_eq!(sched_time(1_655_999, 6), "     1.655 ");
        assert_eq!(sched_time(47_213_000, 8), "      47.213 ");
        assert_eq!(task_name("<idle>", 0, Some(0)), "<idle>");
        assert_eq!(
            task_name("io worker-1", 13983, Some(13980)),
            "io worker-1[13983/13980]"
        );
        assert_eq!(task_name("perf", 13978, Some(13978)), "perf[13978]");
        assert_eq!(task_name("kworker/0:1", 11, None), "kworker/0:1[11]");
    }
}
