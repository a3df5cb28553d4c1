//! `stallscope sleeps`: every sleep that ended, with who ended it — the waker task, its CPU
//! and context (task, interrupt, softirq, idle), and what it had just done (a block request
//! completed on its CPU, a work item it was running). Definitions:
//! `stallscope::timeline::sleeps`.
//!
//! ```text
//!        start (s)    sleep    pid  task            state  woken by                     context    after
//!   608.011889353    2.101 ms  13092 cyclictest      S      swapper/1 (0) on CPU 1       idle
//!   608.113000000   15.820 ms  4431 fio             D      kworker/1:1H (54) on CPU 1   softirq    block 7,0 sector 2732112
//! ```
//!
//! JSON: `{"sleeps":[{"pid","state","cpu","start_ns","end_ns","waker":{"pid","cpu","context",
//! "irq"?,"after":{"kind":"block_complete"|"work_item"|"after_own_wait",…}|null}|null}…],
//! "work_functions":[…],"irq_names":{line:name},"counts":{…},"data_quality":{…}}`.

use std::io::Write;

use clap::Args;
use serde_json::json;
use stallscope::model::Tid;
use stallscope::sleeps::{sleeps, SleepsDone};
use stallscope::timeline::sleeps::WakeCause;

use crate::common::{write_quality_text, CliError, InputArgs, OutputFormat};

/// Arguments of `stallscope sleeps`.
#[derive(Args, Debug)]
#[command(
    after_help = "A sleep runs from the task's switch-out in a sleeping state (S, D, …) to its first \
wakeup (sched_waking, else sched_wakeup): timehist's wait time minus sch delay.\n\n\
Context of the wakeup: task (a task's own code), interrupt (irq N when named), softirq, idle (the \
idle task: an interrupt), task_or_interrupt (no irq/softirq events recorded to tell a task from an \
interrupt that arrived while it ran: record with `stallscope record --events chain`).\n\n\
Examples:\n  stallscope sleeps --pid 1234 trace.dat\n  stallscope sleeps --min-ms 100 --state D perf.data\n  \
stallscope sleeps --format json trace.dat | jq '.sleeps[] | select(.waker.context == \"interrupt\")'"
)]
pub struct SleepsArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
    /// Only sleeps of this task.
    #[arg(long, value_name = "TID")]
    pid: Option<Tid>,
    /// Only sleeps at least this long (milliseconds, decimals allowed).
    #[arg(long, value_name = "MS")]
    min_ms: Option<f64>,
    /// Only sleeps in this state (`D`, `S`).
    #[arg(long, value_name = "STATE")]
    state: Option<String>,
}

/// Runs the command.
pub fn run(args: &SleepsArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let SleepsDone {
        sleeps,
        counts,
        irq_names,
        work_functions: functions,
        names,
        quality: dq,
        events_read,
    } = sleeps(&args.input.options()?)?;
    if events_read == 0 {
        return Err(CliError::Missing(format!(
            "{}: sleeps has nothing to read: the inputs hold no events",
            args.input.files.join(", ")
        )));
    }
    let min_ns = args.min_ms.map(|m| (m * 1e6) as u64);
    let kept: Vec<_> = sleeps
        .iter()
        .filter(|s| args.pid.is_none_or(|p| s.pid == p))
        .filter(|s| min_ns.is_none_or(|m| s.end_ns - s.start_ns >= m))
        .filter(|s| {
            args.state
                .as_deref()
                .is_none_or(|st| s.state.to_string().contains(st))
        })
        .collect();
    let name = |pid: Tid| names.label(pid);
    match args.format {
        OutputFormat::Json => {
            let doc = json!({
                "sleeps": kept,
                "work_functions": functions,
                "irq_names": irq_names,
                "counts": counts,
                "data_quality": stallscope::report::quality_entries(&dq),
            });
            serde_json::to_writer(&mut *out, &doc)?;
            writeln!(out)?;
        }
        OutputFormat::Text => {
            writeln!(
                out,
                "{:>18} {:>12} {:>7} {:<16} {:<5} {:<30} {:<9} after",
                "start (s)", "sleep", "pid", "task", "state", "woken by", "context"
            )?;
            for s in &kept {
                let dur = s.end_ns - s.start_ns;
                let (by, ctx, after) = match s.waker {
                    Some(w) => (
                        format!("{} on CPU {}", name(w.pid), w.cpu),
                        match (w.context, w.irq) {
                            (_, Some(n)) => match irq_names.get(&n) {
                                Some(name) => format!("irq {n} ({name})"),
                                None => format!("irq {n}"),
                            },
                            // the JSON's name of the context (one name in both outputs)
                            (c, None) => serde_json::to_value(c)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_string))
                                .unwrap_or_default(),
                        },
                        match w.after {
                            Some(WakeCause::BlockComplete { dev, sector, .. }) => {
                                format!("block {},{} sector {sector}", dev >> 20, dev & 0xf_ffff)
                            }
                            Some(WakeCause::WorkItem { function, .. }) => format!(
                                "work item {}",
                                functions.get(function as usize).map_or("?", String::as_str)
                            ),
                            Some(WakeCause::AfterOwnWait {
                                start_ns,
                                end_ns,
                                state,
                            }) => format!(
                                "after its own {state} sleep of {:.3} ms",
                                (end_ns - start_ns) as f64 / 1e6
                            ),
                            None => String::new(),
                        },
                    ),
                    None => (
                        "(no wakeup recorded)".to_string(),
                        String::new(),
                        String::new(),
                    ),
                };
                let comm = names
                    .comm(s.pid)
                    .map_or(String::new(), |c| c.as_str().to_string());
                writeln!(
                    out,
                    "{:>8}.{:09} {:>9}.{:03} ms {:>6} {:<16} {:<5} {:<30} {:<9} {after}",
                    s.start_ns / 1_000_000_000,
                    s.start_ns % 1_000_000_000,
                    dur / 1_000_000,
                    dur % 1_000_000 / 1000,
                    s.pid,
                    comm,
                    s.state.to_string(),
                    by,
                    ctx
                )?;
            }
            writeln!(
                out,
                "{} sleeps ({} shown); {} ended with no wakeup recorded, {} wakeups of tasks not seen asleep, {} still sleeping at the end",
                sleeps.len(),
                kept.len(),
                counts.ended_without_wakeup,
                counts.wakeups_without_sleep,
                counts.unfinished
            )?;
            out.flush()?;
            write_quality_text(&mut std::io::stderr(), &dq)?;
        }
    }
    Ok(())
}
