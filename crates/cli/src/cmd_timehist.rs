//! `stallscope timehist`: one row per context switch, like `perf sched timehist`, with the
//! switched-out task's state as an extra column; `--summary` gives perf's runtime summary.
//! Definitions: `stallscope::timeline::timehist`.
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

use std::fmt::Write as _;
use std::io::Write;

use clap::Args;
use serde::Serialize;
use stallscope::model::{DataQuality, Dur, Tid};
use stallscope::timehist::{timehist, TimehistRun};
use stallscope::timeline::{TimehistRow, TimehistSummary};

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

/// perf's `print_sched_time`: `msec.usec` truncated, msec right-aligned in `width`, then a
/// space.
fn sched_time_into(buf: &mut String, ns: Dur, width: usize) {
    let _ = write!(
        buf,
        "{:>width$}.{:03} ",
        ns / 1_000_000,
        ns % 1_000_000 / 1000
    );
}

fn sched_time(ns: Dur, width: usize) -> String {
    let mut s = String::new();
    sched_time_into(&mut s, ns, width);
    s
}

/// perf's `comm[tid]`, `comm[tid/pid]` or, for idle, the bare name.
fn task_name_into(buf: &mut String, comm: &str, tid: Tid, pid: Option<Tid>) {
    let _ = match pid {
        Some(0) => write!(buf, "{comm}"),
        Some(p) if p != tid => write!(buf, "{comm}[{tid}/{p}]"),
        _ => write!(buf, "{comm}[{tid}]"),
    };
}

fn task_name(comm: &str, tid: Tid, pid: Option<Tid>) -> String {
    let mut s = String::new();
    task_name_into(&mut s, comm, tid, pid);
    s
}

/// Number of decimal digits of `v` (1 for 0).
fn decimal_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 10 {
        v /= 10;
        n += 1;
    }
    n
}

/// `"00" … "99"`: two digits per table lookup.
const DIGIT_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Appends `v` in decimal, left-filled with `fill` to at least `min_width` bytes (printf's
/// `%*llu` / `%0*llu`).
fn push_decimal(buf: &mut Vec<u8>, mut v: u64, min_width: usize, fill: u8) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        start -= 2;
        digits[start] = DIGIT_PAIRS[pair];
        digits[start + 1] = DIGIT_PAIRS[pair + 1];
    }
    if v >= 10 {
        let pair = v as usize * 2;
        start -= 2;
        digits[start] = DIGIT_PAIRS[pair];
        digits[start + 1] = DIGIT_PAIRS[pair + 1];
    } else {
        start -= 1;
        digits[start] = b'0' + v as u8;
    }
    pad_with(buf, min_width.saturating_sub(digits.len() - start), fill);
    push_bytes(buf, &digits[start..]);
}

/// Appends a task id in decimal (`-1` for unknown).
fn push_signed(buf: &mut Vec<u8>, v: Tid) {
    if v < 0 {
        buf.push(b'-');
    }
    push_decimal(buf, u64::from(v.unsigned_abs()), 0, b' ');
}

/// Appends a short byte string.
fn push_bytes(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.extend_from_slice(bytes);
}

fn pad_with(buf: &mut Vec<u8>, n: usize, fill: u8) {
    buf.resize(buf.len() + n, fill);
}

fn pad_spaces(buf: &mut Vec<u8>, n: usize) {
    pad_with(buf, n, b' ');
}

/// Text rendering with perf's growing name column; each row is built in one reused buffer.
struct TextRows {
    width: usize,
    line: Vec<u8>,
    /// ` %5s \n` tails already rendered, by state (a handful of distinct values per trace).
    states: Vec<(stallscope::model::PrevState, String)>,
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

    /// `%15s [%04d]  %-*s ` then the three times and ` %5s ` for the state. Numbers are
    /// written by hand (`push_decimal`), not through `core::fmt`: one row per switch makes
    /// this the hot loop of the command.
    fn row(&mut self, out: &mut dyn Write, r: &TimehistRow) -> std::io::Result<()> {
        let buf = &mut self.line;
        buf.clear();
        let (secs, usecs) = (r.ts_ns / 1_000_000_000, r.ts_ns % 1_000_000_000 / 1000);
        // `secs.usecs` (usecs always 6 digits) right-aligned in 15.
        pad_spaces(buf, 15usize.saturating_sub(decimal_len(secs) + 7));
        push_decimal(buf, secs, 0, b' ');
        buf.push(b'.');
        push_decimal(buf, usecs, 6, b'0');
        push_bytes(buf, b" [");
        push_decimal(buf, u64::from(r.cpu), 4, b'0');
        push_bytes(buf, b"]  ");
        let name_start = buf.len();
        push_bytes(buf, r.comm.as_str().as_bytes());
        match r.pid {
            Some(0) => {}
            Some(p) if p != r.tid => {
                buf.push(b'[');
                push_signed(buf, r.tid);
                buf.push(b'/');
                push_signed(buf, p);
                buf.push(b']');
            }
            _ => {
                buf.push(b'[');
                push_signed(buf, r.tid);
                buf.push(b']');
            }
        }
        let name_len = buf.len() - name_start;
        self.width = self.width.max(name_len);
        pad_spaces(buf, self.width - name_len);
        buf.push(b' ');
        for ns in [r.wait_ns, r.sch_delay_ns, r.run_ns] {
            push_decimal(buf, ns / 1_000_000, 6, b' ');
            buf.push(b'.');
            push_decimal(buf, ns % 1_000_000 / 1000, 3, b'0');
            buf.push(b' ');
        }
        let state = match self.states.iter().find(|(s, _)| *s == r.prev_state) {
            Some((_, text)) => text,
            None => {
                self.states
                    .push((r.prev_state, format!(" {:>5} \n", r.prev_state)));
                // INVARIANT: just pushed.
                &self.states[self.states.len() - 1].1
            }
        };
        push_bytes(buf, state.as_bytes());
        out.write_all(buf)
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
            let name = task_name(t.comm.as_str(), t.tid, t.pid);
            writeln!(
                out,
                "{}{name}   {:>5}  {:>9} {}{} {} {}  {:>5.2}   {:>5}",
                " ".repeat(w.saturating_sub(name.len())),
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
    /// Why there is no row (the command exits 2 saying the same on stderr).
    #[serde(skip_serializing_if = "Option::is_none")]
    nothing_analyzed: Option<String>,
}

/// Runs the command.
pub fn run(args: &TimehistArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let flavor = parse_flavor(&args.perf_compat)?;
    let mut run = TimehistRun::new(args.input.options()?);
    run.pid = args.pid;
    run.cpu = args.cpu;
    run.flavor = flavor;
    let show_rows = !args.summary;
    let mut text = TextRows {
        width: 30,
        line: Vec::with_capacity(128),
        states: Vec::new(),
    };
    let mut first = true;
    let mut io_err: Option<std::io::Error> = None;
    // the head is written with the first row (a file that cannot be read writes nothing)
    let mut started = false;
    let head = |text: &TextRows, out: &mut dyn Write| -> std::io::Result<()> {
        match args.format {
            OutputFormat::Text if show_rows => text.header(out),
            OutputFormat::Text => Ok(()),
            OutputFormat::Json => out.write_all(b"{\"rows\":["),
        }
    };
    let done = timehist(&run, &mut |r| {
        if !show_rows {
            return true; // the summary needs every row
        }
        let started_now = !std::mem::replace(&mut started, true);
        let res = if started_now {
            head(&text, out)
        } else {
            Ok(())
        };
        let res = res.and_then(|()| match args.format {
            OutputFormat::Text => text.row(out, r),
            OutputFormat::Json => {
                let sep: &[u8] = if first { b"\n" } else { b",\n" };
                first = false;
                out.write_all(sep).and_then(|()| {
                    serde_json::to_writer(&mut *out, r).map_err(|e| {
                        // keep a closed pipe's kind: it exits 0
                        let kind = e.io_error_kind().unwrap_or(std::io::ErrorKind::Other);
                        std::io::Error::new(kind, e)
                    })
                })
            }
        });
        match res {
            Ok(()) => true,
            Err(e) => {
                io_err = Some(e);
                false
            }
        }
    })?;
    if let Some(e) = io_err.take() {
        return Err(CliError::Io(e));
    }
    let rows = done.rows;
    let nothing = (rows == 0).then(|| {
        let files = &args.input.files;
        match (args.pid, args.cpu) {
            (Some(p), _) => CliError::filtered_out(
                "timehist",
                files,
                &format!("no context switch of pid {p} (--pid)"),
            ),
            (None, Some(c)) => CliError::filtered_out(
                "timehist",
                files,
                &format!("no context switch on CPU {c} (--cpu)"),
            ),
            (None, None) => CliError::missing(
                "timehist",
                files,
                "no sched_switch events (timehist needs sched_switch, and sched_waking or sched_wakeup for the scheduling delay)",
                "perf sched record -- COMMAND` or `stallscope record -o trace.dat -- COMMAND",
            ),
        }
    });
    // nothing measured: the text says so on stderr alone, without an empty table's head
    // (JSON keeps its document, which says it in `nothing_analyzed`)
    if !started && (nothing.is_none() || args.format == OutputFormat::Json) {
        head(&text, out)?;
    }
    let summary = (args.summary || args.with_summary).then_some(done.summary);
    let dq = done.quality;
    match args.format {
        OutputFormat::Text if nothing.is_some() => {}
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
                nothing_analyzed: nothing.as_ref().map(|e| e.to_string()),
            })?;
            out.write_all(&tail.as_bytes()[1..])?;
            out.write_all(b"\n")?;
        }
    }
    if let Some(e) = nothing {
        return Err(e);
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

    #[test]
    fn hand_written_numbers_match_printf_style_formatting() {
        for v in [
            0u64,
            7,
            9,
            10,
            99,
            100,
            999_999,
            1_000_000,
            123_456_789,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            push_decimal(&mut b, v, 6, b' ');
            assert_eq!(String::from_utf8(b).unwrap(), format!("{v:>6}"));
            let mut b = Vec::new();
            push_decimal(&mut b, v, 4, b'0');
            assert_eq!(String::from_utf8(b).unwrap(), format!("{v:04}"));
            assert_eq!(decimal_len(v), v.to_string().len());
        }
        for t in [-1, 0, 5, 13983, i32::MIN, i32::MAX] {
            let mut b = Vec::new();
            push_signed(&mut b, t);
            assert_eq!(String::from_utf8(b).unwrap(), t.to_string());
        }
    }

    #[test]
    fn rows_are_perfs_lines_plus_the_state() {
        // Lines as `perf sched timehist` (perf 6.1) prints them for a sched-record perf.data.
        let perf = [
            "     481.179434 [0000]  io worker-1[13983/13980]            1.655      0.000      0.554 ",
            "     481.180005 [0000]  <idle>                             31.174      0.000      0.112 ",
        ];
        let rows = [
            TimehistRow {
                ts_ns: 481_179_434_819,
                cpu: 0,
                comm: stallscope::model::Comm::new("io worker-1"),
                tid: 13983,
                pid: Some(13980),
                wait_ns: 1_655_401,
                sch_delay_ns: 0,
                run_ns: 554_999,
                prev_state: stallscope::model::PrevState::parse("S").unwrap_or_default(),
            },
            TimehistRow {
                ts_ns: 481_180_005_854,
                cpu: 0,
                comm: stallscope::model::Comm::new("<idle>"),
                tid: 0,
                pid: Some(0),
                wait_ns: 31_174_000,
                sch_delay_ns: 0,
                run_ns: 112_287,
                prev_state: stallscope::model::PrevState::RUNNING,
            },
        ];
        let mut text = TextRows {
            width: 30,
            line: Vec::new(),
            states: Vec::new(),
        };
        for (p, r) in perf.iter().zip(&rows) {
            let mut out = Vec::new();
            text.row(&mut out, r).unwrap();
            let line = String::from_utf8(out).unwrap();
            let state = r.prev_state.to_string();
            assert_eq!(line, format!("{p}{state:>6} \n"));
        }
    }
}
