//! Telling the three text dialects apart from the first lines of an input.
//!
//! Certain signs decide at once: a first line `cpus=N` or `version = N` (trace-cmd
//! report), a `# tracer:` / `entries-in-buffer` / `latency trace` header (kernel ftrace),
//! a `# ========` / `# captured on` / `# perf version` header (`perf script --header`).
//! Otherwise (trace_pipe, headerless `perf script`, cut files) every event line of the first
//! [`MAX_LINES`] votes:
//!
//! * `COMM PID [CPU] TS:` (pid after a space) → perf script;
//! * `COMM-PID … TS:` → ftrace or trace-cmd, told apart by the pid field width (kernel
//!   `%-7d ` = 8 columns, trace-cmd `%-5d ` = 6 for pids of up to 5 digits), a `(TGID)`
//!   column or `NNNNus` latency times (kernel only), and trace-cmd's plugin payloads
//!   (`a:1 [120] S ==> b:2 [120]`, `a:1 [120] CPU:001`), `(+delta)` column and
//!   secs.usecs latency-shape lines (`-l`).
//!
//! Input holding NUL bytes or many control characters is not text: `None`.

use stallscope_model::InputFormat;

use super::context::{parse_kernel_context, parse_perf_context, CpuShape, TextTs};
use super::kernel_line::{parse_lost_marker, split_name};

/// Lines examined at most.
const MAX_LINES: usize = 400;

/// Detects a text format from its first bytes.
pub fn sniff_text(head: &[u8]) -> Option<InputFormat> {
    if head.is_empty() || memchr::memchr(0, head).is_some() {
        return None;
    }
    let control = head
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t'))
        .count();
    if control * 100 > head.len() {
        return None;
    }
    let mut votes = [0usize; 3]; // ftrace, trace-cmd, perf
    let mut first = true;
    for raw in head.split(|&b| b == b'\n').take(MAX_LINES) {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.trim_ascii().is_empty() {
            continue;
        }
        if first {
            first = false;
            if is_tracecmd_first_line(line) {
                return Some(InputFormat::TraceCmdText);
            }
        }
        if let Some(f) = header_sign(line) {
            return Some(f);
        }
        if line.starts_with(b"#") || line.starts_with(b"\t") {
            continue;
        }
        if let Some(vote) = vote(line) {
            votes[vote as usize] += 1;
        }
    }
    let best = (0..3).max_by_key(|&i| (votes[i], usize::from(i == 0)))?;
    if votes[best] == 0 {
        return None;
    }
    Some(
        [
            InputFormat::FtraceText,
            InputFormat::TraceCmdText,
            InputFormat::PerfScriptText,
        ][best],
    )
}

fn is_tracecmd_first_line(line: &[u8]) -> bool {
    let t = line.trim_ascii();
    t.strip_prefix(b"cpus=")
        .is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
        || t.starts_with(b"version = ")
}

fn header_sign(line: &[u8]) -> Option<InputFormat> {
    let has = |s: &[u8]| memchr::memmem::find(line, s).is_some();
    if line.starts_with(b"# tracer:")
        || has(b"entries-in-buffer/entries-written")
        || has(b"latency trace v")
    {
        return Some(InputFormat::FtraceText);
    }
    if line.starts_with(b"# ========")
        || line.starts_with(b"# captured on")
        || line.starts_with(b"# perf version")
    {
        return Some(InputFormat::PerfScriptText);
    }
    None
}

#[derive(Clone, Copy)]
enum Vote {
    Ftrace = 0,
    TraceCmd = 1,
    Perf = 2,
}

fn vote(line: &[u8]) -> Option<Vote> {
    if let Some((_, count)) = parse_lost_marker(line) {
        let lost_form = memchr::memmem::find(line, b"[LOST ").is_some();
        return Some(if lost_form && count.is_some() {
            Vote::Ftrace
        } else {
            Vote::TraceCmd
        });
    }
    if let Some(ctx) = parse_kernel_context(line) {
        if ctx.has_tgid_column || matches!(ctx.ts, TextTs::RelativeNs(_)) {
            return Some(Vote::Ftrace);
        }
        if ctx.rest.starts_with(b"(+") || ctx.cpu_shape == CpuShape::Latency {
            return Some(Vote::TraceCmd);
        }
        if let Some((name, payload)) = split_name(ctx.rest) {
            let plugin = match name {
                b"sched_switch" => !payload.starts_with(b"prev_comm="),
                b"sched_wakeup" | b"sched_wakeup_new" => !payload.starts_with(b"comm="),
                _ => false,
            };
            if plugin {
                return Some(Vote::TraceCmd);
            }
        }
        if ctx.pid_digits < 7 {
            return Some(if ctx.pid_field_width >= 8 {
                Vote::Ftrace
            } else {
                Vote::TraceCmd
            });
        }
        return Some(Vote::Ftrace);
    }
    if parse_perf_context(line).is_some() {
        return Some(Vote::Perf);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decides_from_lines_without_headers() {
        let ftrace = b"            bash-9808    [000] d..2.   327.263089: sched_switch: prev_comm=bash prev_pid=9808 prev_prio=120 prev_state=R ==> next_comm=bash next_pid=9811 next_prio=120\n";
        assert_eq!(sniff_text(ftrace), Some(InputFormat::FtraceText));
        let tc = b"            bash-12615 [001]   392.162071: sched_process_fork:   comm=bash pid=12615 child_comm=bash child_pid=12622\n";
        assert_eq!(sniff_text(tc), Some(InputFormat::TraceCmdText));
        let perf = b"     migration/0    18 [000]   481.124205:       sched:sched_waking: comm=perf pid=13978 prio=120 target_cpu=000\n";
        assert_eq!(sniff_text(perf), Some(InputFormat::PerfScriptText));
        let perf7 = b"  migration/0      18 [000]   481.124205:       sched:sched_waking: comm=perf pid=13978 prio=120 target_cpu=000\n";
        assert_eq!(sniff_text(perf7), Some(InputFormat::PerfScriptText));
        assert_eq!(sniff_text(b"cpus=2\n"), Some(InputFormat::TraceCmdText));
        assert_eq!(
            sniff_text(b"# tracer: nop\n#\n"),
            Some(InputFormat::FtraceText)
        );
    }

    #[test]
    fn rejects_binary_and_prose() {
        assert_eq!(sniff_text(b"\x7fELF\x02\x01\x01\0\0\0\0"), None);
        let noise: Vec<u8> = (0u32..4096)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 1)
            .collect();
        assert_eq!(sniff_text(&noise), None);
        assert_eq!(sniff_text(b"hello world\nthis is: not a trace\n"), None);
        assert_eq!(sniff_text(b""), None);
    }
}
