//! `stallscope record`: capture scheduler / block / workqueue tracepoints into a trace.dat
//! through a private tracefs instance (see `stallscope_record`). Needs root or
//! CAP_SYS_ADMIN; any failure exits 2 with the reason, and the instance is always removed.
//! Lost events are printed per CPU at the end (stderr) and stored in the file.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use stallscope::record::events::DEFAULT_GROUPS;
use stallscope::record::{parse_seconds, record, RecordOptions, StopWhen};

use crate::common::CliError;

/// Arguments of `stallscope record`.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sudo stallscope record -o trace.dat --duration 5\n  \
sudo stallscope record -o trace.dat -- make -j4\n  \
sudo stallscope record -o trace.dat --events sched,irq --buffer-kb 16384 --cpus 0-1 --duration 10\n\n\
Without --duration or COMMAND, records until Ctrl-C. Read the file with `stallscope info trace.dat` \
or `trace-cmd report -i trace.dat`."
)]
pub struct RecordArgs {
    /// Output trace.dat file.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// Record for this many seconds (decimals allowed: 0.5).
    #[arg(long, value_name = "SECONDS", conflicts_with = "command")]
    duration: Option<String>,
    /// Event groups: sched, block, workqueue (default), irq, softirq, chain (all five), or
    /// SYSTEM:EVENT, comma separated.
    #[arg(long, value_name = "GROUPS", default_value = DEFAULT_GROUPS)]
    events: String,
    /// Ring-buffer size per CPU in KiB.
    #[arg(long, value_name = "N", default_value_t = 8192)]
    buffer_kb: u64,
    /// Record only these CPUs (`0-3,6`).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Store /proc/kallsyms in the file (about 5 MB) so kernel function addresses, e.g. of
    /// workqueue work items, print as names.
    #[arg(long)]
    kallsyms: bool,
    /// Record the kernel stack of every event (the private instance's `options/stacktrace`):
    /// where each task slept, blocked or was preempted, and where its waker was. With
    /// `--kallsyms` the frames get names on any machine.
    #[arg(long)]
    stacks: bool,
    /// Command to run and record until it exits (after `--`).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Runs the command.
pub fn run(args: &RecordArgs, _out: &mut dyn Write) -> Result<(), CliError> {
    let stop = match (&args.duration, args.command.is_empty()) {
        (Some(s), _) => StopWhen::Duration(Duration::from_nanos(
            parse_seconds(s).map_err(|e| CliError::Usage(format!("--duration: {e}")))?,
        )),
        (None, false) => StopWhen::Command(args.command.clone()),
        (None, true) => StopWhen::Signal,
    };
    if stop == StopWhen::Signal {
        eprintln!("stallscope: recording until Ctrl-C (SIGINT) or SIGTERM");
    }
    let opts = RecordOptions {
        output: args.output.clone(),
        stop,
        events: args.events.clone(),
        buffer_kb: args.buffer_kb,
        cpus: args.cpus.clone(),
        kallsyms: args.kallsyms,
        stacks: args.stacks,
        verbose: true,
    };
    let summary = record(&opts).map_err(|e| CliError::Usage(format!("record: {e}")))?;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "stallscope: wrote {} ({} events enabled, {} sub-buffers, {} bytes of event data, {}.{:03} s{}; {} tasks described, {} exited before they could be read)",
        summary.output.display(),
        summary.events.len(),
        summary.pages,
        summary.data_bytes,
        summary.duration_ns / 1_000_000_000,
        summary.duration_ns / 1_000_000 % 1000,
        summary
            .stopped_by_signal
            .map(|s| format!(", stopped by {s}"))
            .unwrap_or_default(),
        summary.tasks_described,
        summary.tasks_missed,
    );
    for l in &summary.lost {
        let _ = writeln!(
            err,
            "stallscope: cpu{}: {} events lost (overrun {}, dropped {}, commit overrun {}, {} pages flagged MISSED_EVENTS with {} counted)",
            l.cpu, l.lost, l.overrun, l.dropped, l.commit_overrun, l.flagged_pages, l.flagged_count
        );
    }
    let total = summary.total_lost();
    if total > 0 {
        let _ = writeln!(
            err,
            "stallscope: warning: {total} events lost in total; increase --buffer-kb or record fewer events"
        );
    }
    if let Some(st) = summary.command_status {
        if !st.success() {
            let _ = writeln!(err, "stallscope: note: the command exited with {st}");
        }
        // a command the recorder stopped on a signal (Ctrl-C, SIGTERM) ended as asked
        if !st.success() && summary.stopped_by_signal.is_none() {
            // passed on as `perf record -- CMD` does (a signal as a shell reports it)
            use std::os::unix::process::ExitStatusExt;
            let code = st
                .code()
                .or_else(|| st.signal().map(|s| 128 + s))
                .unwrap_or(1);
            COMMAND_EXIT.store(code.clamp(1, 255), std::sync::atomic::Ordering::Relaxed);
        }
    }
    Ok(())
}

/// The recorded command's non-zero exit code (0: none, or it succeeded).
static COMMAND_EXIT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The exit code `record -- CMD` passes on: the command's, when it failed.
pub fn command_exit() -> Option<u8> {
    match COMMAND_EXIT.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        c => u8::try_from(c).ok(),
    }
}
