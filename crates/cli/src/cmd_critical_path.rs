//! `stallscope critical-path FILE --pid P [--time A..B]`: one task's time over a window as
//! intervals of running, runnable (who ran instead), sleeping (in which state, woken by
//! whom, after what) and unknown, with the share each took — adding up to the whole window.
//! Definitions: `stallscope::timeline::critical_path` (timehist's rows and the sleeps).
//!
//! ```text
//! critical path of cyclictest (13092), 608.000000000 .. 609.000000000 (1.000 s)
//!   running     12.301 ms   1.2%
//!   runnable   410.100 ms  41.0%   behind: stress-ng (13090) 409.9 ms
//!   sleeping   577.599 ms  57.8%   woken by: swapper/1 (0) ×480
//!   unknown      0 ns       0.0%
//!
//!         start (s)       length  activity   detail
//!    608.000000000    1.002 ms    running    CPU 1
//!    608.001002000   40.100 ms    runnable   on CPU 1 behind stress-ng (13090) 40.1 ms
//! ```
//!
//! JSON: `{"pid","start_ns","end_ns","totals":{…},"intervals":[{"start_ns","end_ns","kind",
//! …}],"runnable_behind":[[tid,ns]…],"woken_by":[[tid,sleeps,ns]…],"names":{tid:comm},
//! "data_quality":{…}}`.

use std::collections::BTreeMap;
use std::io::Write;

use clap::Args;
use serde_json::json;
use stallscope::critical_path::{critical_path, PathDone, PathError};
use stallscope::model::{Tid, Ts};
use stallscope::timeline::critical_path::Activity;
use stallscope::timeline::sleeps::WakeContext;

use crate::cmd_analyze::parse_time_range;
use crate::common::{write_quality_text, CliError, InputArgs, OutputFormat};
use stallscope::detect::detectors::fmt::dur;

/// Arguments of `stallscope critical-path`.
#[derive(Args, Debug)]
#[command(
    after_help = "Running and runnable are timehist's run time and sch delay of the runs in the \
window; sleeping is timehist's wait time minus sch delay (the sleeps `stallscope sleeps` lists); \
unknown is the time before the task's first switch in the trace or a gap the trace does not \
explain. The shares add up to the window.\n\n\
Examples:\n  stallscope critical-path --pid 1234 trace.dat\n  \
stallscope critical-path --pid 1234 --time 608.5..609.5 perf.data\n  \
stallscope critical-path --pid 1234 --format json perf.data | jq .totals"
)]
pub struct CriticalPathArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
    /// The task (thread id).
    #[arg(long, value_name = "TID")]
    pid: Tid,
    /// The window, in seconds of the trace clock: `A..B`, `A..` or `..B` (as `analyze
    /// --time`; default: the whole trace).
    #[arg(long, value_name = "A..B")]
    time: Option<String>,
    /// Intervals listed at most (the totals always cover the window; 0 lists none).
    #[arg(long, value_name = "N", default_value_t = 200)]
    max_intervals: usize,
}

fn secs(ns: Ts) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// `12.3%` of `total`.
fn share(part: Ts, total: Ts) -> String {
    let pm = (u128::from(part) * 1000)
        .checked_div(u128::from(total))
        .unwrap_or(0);
    format!("{}.{}%", pm / 10, pm % 10)
}

/// Runs the command.
pub fn run(args: &CriticalPathArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let window = args.time.as_deref().map(parse_time_range).transpose()?;
    let done = match critical_path(&args.input.options()?, args.pid, window) {
        Ok(done) => done,
        Err(PathError::Read(e)) => return Err(e.into()),
        Err(PathError::NoSchedulerEvents) => {
            return Err(CliError::Missing(format!(
                "{}: critical-path has nothing to read: the inputs hold no scheduler events; record them with `stallscope record -o trace.dat -- COMMAND` or `perf sched record -- COMMAND`",
                args.input.files.join(", ")
            ))
            .json_too(args.format, out))
        }
        Err(PathError::NeverRan { pid }) => {
            return Err(CliError::Missing(format!(
                "{}: task {pid} never ran in a recorded sched_switch (is it a thread id of this trace? \
                 `stallscope timehist FILE` lists the tasks); record sched_switch and sched_waking: \
                 `stallscope record -o trace.dat -- COMMAND` or `perf sched record -- COMMAND`",
                args.input.files.join(", "),
            ))
            .json_too(args.format, out))
        }
        Err(PathError::EmptyWindow {
            window: (start, end),
            trace: (first, last),
        }) => {
            return Err(CliError::Usage(format!(
                "--time: the window {}..{} is empty; the trace runs {}..{}",
                secs(start),
                secs(end),
                secs(first),
                secs(last)
            )))
        }
    };
    let PathDone {
        path,
        names,
        quality: dq,
        ..
    } = done;
    let (start, end) = (path.start_ns, path.end_ns);
    let name = |pid: Tid| {
        if pid == 0 {
            "swapper (0)".to_string()
        } else {
            names.label(pid)
        }
    };
    match args.format {
        OutputFormat::Json => {
            let mut involved: BTreeMap<Tid, String> = BTreeMap::new();
            involved.insert(args.pid, name(args.pid));
            for &(t, _) in &path.runnable_behind {
                involved.insert(t, name(t));
            }
            for &(t, _, _) in &path.woken_by {
                involved.insert(t, name(t));
            }
            let doc = json!({
                "pid": path.pid,
                "start_ns": path.start_ns,
                "end_ns": path.end_ns,
                "totals": path.totals,
                "intervals": path.intervals,
                "runnable_behind": path.runnable_behind,
                "woken_by": path.woken_by,
                "names": involved,
                "data_quality": stallscope::report::quality_entries(&dq),
            });
            serde_json::to_writer(&mut *out, &doc)?;
            writeln!(out)?;
        }
        OutputFormat::Text => {
            let total = end - start;
            let t = path.totals;
            writeln!(
                out,
                "critical path of {}, {} .. {} ({})",
                name(args.pid),
                secs(start),
                secs(end),
                dur(total)
            )?;
            let behind: Vec<String> = path
                .runnable_behind
                .iter()
                .take(3)
                .map(|&(p, n)| format!("{} {}", name(p), dur(n)))
                .collect();
            let woken: Vec<String> = path
                .woken_by
                .iter()
                .take(3)
                .map(|&(p, c, n)| format!("{} ×{c} ({})", name(p), dur(n)))
                .collect();
            for (what, ns, note) in [
                ("running", t.running_ns, String::new()),
                (
                    "runnable",
                    t.runnable_ns,
                    if behind.is_empty() {
                        String::new()
                    } else {
                        format!("behind: {}", behind.join(", "))
                    },
                ),
                (
                    "sleeping",
                    t.sleeping_ns,
                    if woken.is_empty() {
                        String::new()
                    } else {
                        format!("woken by: {}", woken.join(", "))
                    },
                ),
                ("unknown", t.unknown_ns, String::new()),
            ] {
                writeln!(
                    out,
                    "  {what:<9} {:>12} {:>6}   {note}",
                    dur(ns),
                    share(ns, total)
                )?;
            }
            if args.max_intervals > 0 {
                writeln!(
                    out,
                    "\n{:>20} {:>12}  {:<9}  detail",
                    "start (s)", "length", "activity"
                )?;
                for iv in path.intervals.iter().take(args.max_intervals) {
                    let (what, detail) = match &iv.activity {
                        Activity::Running { cpu } => ("running", format!("CPU {cpu}")),
                        Activity::Runnable { cpu, instead } => {
                            let who: Vec<String> = instead
                                .iter()
                                .map(|&(p, n)| format!("{} {}", name(p), dur(n)))
                                .collect();
                            let on =
                                cpu.map_or("still waiting".to_string(), |c| format!("on CPU {c}"));
                            if who.is_empty() {
                                ("runnable", on)
                            } else {
                                ("runnable", format!("{on} behind {}", who.join(", ")))
                            }
                        }
                        Activity::Sleeping { state, waker } => (
                            "sleeping",
                            match waker {
                                Some(w) => format!(
                                    "{state}, woken by {} on CPU {}{}",
                                    name(w.pid),
                                    w.cpu,
                                    match w.context {
                                        WakeContext::Interrupt => " in an interrupt",
                                        WakeContext::Softirq => " in a softirq",
                                        WakeContext::TaskOrInterrupt => {
                                            " (or an interrupt there: no irq events recorded)"
                                        }
                                        _ => "",
                                    }
                                ),
                                None => format!("{state}, no wakeup recorded"),
                            },
                        ),
                        Activity::Unknown => ("unknown", String::new()),
                    };
                    writeln!(
                        out,
                        "{:>20} {:>12}  {what:<9}  {detail}",
                        secs(iv.start_ns),
                        dur(iv.end_ns - iv.start_ns)
                    )?;
                }
                if path.intervals.len() > args.max_intervals {
                    writeln!(
                        out,
                        "… {} more intervals (--max-intervals N, or --format json)",
                        path.intervals.len() - args.max_intervals
                    )?;
                }
            }
            write_quality_text(out, &dq)?;
        }
    }
    Ok(())
}
