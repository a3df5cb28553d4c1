//! The context columns of a text event line: task name, pid, CPU and timestamp, found by
//! anchoring on the structured tokens to the *right* of the task name.
//!
//! A comm may contain spaces, `-`, `:`, digits and brackets (`CPU 0/KVM`, `a:b [x] 1.5`,
//! `kworker/u8:0-lo`), so no line is split on spaces from the left. Instead:
//!
//! 1. The timestamp anchor is the first `: ` (or `:` at the end of the line) whose
//!    preceding token is a timestamp: `SECS.FRAC` (µs or ns), a bare integer (raw-count
//!    clocks `counter` / `x86-tsc`), or the latency format's `NNNNus` plus its one-char
//!    delay mark (`$@*#!+` or a space).
//! 2. From there the columns are read right to left, with the grammar of the dialect:
//!
//! ```text
//! kernel (ftrace trace / trace_pipe, trace-cmd report):
//!   COMM-PID ␣+ [(TGID) ␣+] [CPU] ␣+ [FLAGS ␣+] TS: REST          bracket shape
//!   COMM-PID ␣+ CPU FLAGS ␣+ TS: REST                             latency shape (-l, latency-format)
//!       bash-8399    [001] d..2.   307.122569: sched_wakeup_new: comm=bash …
//!       bash-8786    (   8786) [000] d..2.   316.942899: sched_switch: …
//!     rcu_pree-15        0d..2. 23809us#: sched_switch: …
//!       bash-12615 [001]   392.162131: sched_switch:         bash:12615 [120] S ==> …
//! perf script:
//!   COMM ␣+ PID[/TID] ␣+ [[CPU] ␣+] TS: REST
//!       perf 13978/13978 [000]   481.124195: sched:sched_stat_runtime: …
//!   kworker/11:68+d 1234 [001]   1.000000:       sched:sched_switch: …
//! ```
//!
//! FLAGS is the 4- or 5-character irq-info column (`d..2.`, `dNs4.`, `....`); its letters
//! differ between kernels, so any 4–5 characters from `.`, ASCII letters and hex digits are
//! accepted. TGID is `(%7d)` or `(-------)`. If a comm happens to contain a complete
//! `-PID [CPU] TS: ` sequence the first (leftmost) valid anchor wins.

use memchr::{memchr_iter, memrchr};
use stallscope_model::time::{parse_secs_frac, parse_u64};

/// A timestamp as printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TextTs {
    /// `SECS.FRAC` (µs or ns text), converted to ns.
    Ns(u64),
    /// A bare integer: a raw clock count (`counter`, `x86-tsc`, …), not ns.
    Count(u64),
    /// Latency format `NNNNus`: µs relative to the start of the buffer, converted to ns.
    RelativeNs(u64),
}

impl TextTs {
    /// The value stored in `Event::ts`.
    pub fn value(self) -> u64 {
        match self {
            TextTs::Ns(v) | TextTs::Count(v) | TextTs::RelativeNs(v) => v,
        }
    }
}

/// Shape of the CPU column of a kernel-dialect line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CpuShape {
    /// `[001]`.
    Bracket,
    /// `  0d..2.`: CPU digits glued to the flags (latency format).
    Latency,
}

/// The context columns of one event line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Context<'a> {
    /// Context task id.
    pub pid: i32,
    /// CPU, when printed.
    pub cpu: Option<u32>,
    /// Timestamp.
    pub ts: TextTs,
    /// Everything after `TS: ` (event name and payload).
    pub rest: &'a [u8],
    /// Kernel dialect only: shape of the CPU column.
    pub cpu_shape: CpuShape,
    /// Kernel dialect only: a `(TGID)` column was present.
    pub has_tgid_column: bool,
    /// Width of the pid field including its padding and the separating space (8 for the
    /// kernel's `%-7d `, 6 for trace-cmd's `%-5d ` when the pid has at most 5 digits).
    pub pid_field_width: usize,
    /// Number of digits of the pid.
    pub pid_digits: usize,
    /// The context task's process id, when the line prints it (ftrace's `(TGID)` column
    /// with `record-tgid`, perf script's `PID/TID`).
    pub tgid: Option<i32>,
}

/// Parses the context of a kernel-dialect line (ftrace text, trace-cmd report).
pub(crate) fn parse_kernel_context(line: &[u8]) -> Option<Context<'_>> {
    for_each_anchor(line, |ts_start, ts, rest| {
        kernel_columns(line, ts_start, ts, rest)
    })
}

/// Parses the context of a `perf script` line.
pub(crate) fn parse_perf_context(line: &[u8]) -> Option<Context<'_>> {
    for_each_anchor(line, |ts_start, ts, rest| match ts {
        TextTs::Ns(_) => perf_columns(line, ts_start, ts, rest),
        TextTs::Count(_) | TextTs::RelativeNs(_) => None,
    })
}

/// Calls `f(ts_start, ts, rest_start)` for each candidate timestamp anchor, left to right,
/// until it accepts one.
fn for_each_anchor<'a>(
    line: &'a [u8],
    mut f: impl FnMut(usize, TextTs, usize) -> Option<Context<'a>>,
) -> Option<Context<'a>> {
    for colon in memchr_iter(b':', line) {
        let after = colon + 1;
        if after < line.len() && line[after] != b' ' {
            continue;
        }
        let rest = (after + 1).min(line.len());
        if let Some((ts_start, ts)) = timestamp_before(line, colon) {
            if let Some(ctx) = f(ts_start, ts, rest) {
                return Some(ctx);
            }
        }
    }
    None
}

/// The timestamp token ending just before `colon`, with its start index.
fn timestamp_before(line: &[u8], colon: usize) -> Option<(usize, TextTs)> {
    let before = &line[..colon];
    // Latency format: digits, "us", one delay-mark character (possibly a space).
    if before.len() >= 4
        && matches!(
            before[before.len() - 1],
            b'$' | b'@' | b'*' | b'#' | b'!' | b'+' | b' '
        )
    {
        let body = &before[..before.len() - 1];
        if let Some(digits) = body.strip_suffix(b"us") {
            let start = digits
                .iter()
                .rposition(|b| !b.is_ascii_digit())
                .map_or(0, |p| p + 1);
            if start < digits.len() && start > 0 && digits[start - 1] == b' ' {
                let us = parse_u64(&digits[start..])?;
                return Some((start, TextTs::RelativeNs(us.checked_mul(1000)?)));
            }
        }
    }
    let start = before
        .iter()
        .rposition(|&b| !(b.is_ascii_digit() || b == b'.'))
        .map_or(0, |p| p + 1);
    if start == 0 || start == before.len() || before[start - 1] != b' ' {
        return None;
    }
    let token = &before[start..];
    let ts = if token.contains(&b'.') {
        TextTs::Ns(parse_secs_frac(token)?)
    } else {
        TextTs::Count(parse_u64(token)?)
    };
    Some((start, ts))
}

/// Index just after the last non-space byte before `end` (0 if none).
fn skip_spaces_back(line: &[u8], end: usize) -> usize {
    line[..end]
        .iter()
        .rposition(|&b| b != b' ')
        .map_or(0, |p| p + 1)
}

/// Start of the space-free token ending at `end`.
fn token_start_back(line: &[u8], end: usize) -> usize {
    line[..end]
        .iter()
        .rposition(|&b| b == b' ')
        .map_or(0, |p| p + 1)
}

/// `[digits]` → the number.
fn bracketed_cpu(token: &[u8]) -> Option<u32> {
    let inner = token.strip_prefix(b"[")?.strip_suffix(b"]")?;
    u32::try_from(parse_u64(inner)?).ok()
}

/// True for a 4- or 5-character irq-info flags column.
fn is_flags(token: &[u8]) -> bool {
    (4..=5).contains(&token.len())
        && token
            .iter()
            .all(|&b| b == b'.' || b.is_ascii_alphanumeric())
}

/// Signed decimal (`-1` is a valid prio).
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    match s.strip_prefix(b"-") {
        Some(d) => i64::try_from(parse_u64(d)?).ok().map(|v| -v),
        None => i64::try_from(parse_u64(s)?).ok(),
    }
}

/// A pid: a non-negative decimal that fits `i32`.
pub(crate) fn parse_pid(s: &[u8]) -> Option<i32> {
    i32::try_from(parse_u64(s)?).ok()
}

fn trim_start_spaces(s: &[u8]) -> &[u8] {
    let i = s.iter().position(|&b| b != b' ').unwrap_or(s.len());
    &s[i..]
}

fn kernel_columns(line: &[u8], ts_start: usize, ts: TextTs, rest: usize) -> Option<Context<'_>> {
    let end = skip_spaces_back(line, ts_start);
    if end == ts_start {
        return None;
    }
    let start = token_start_back(line, end);
    let token = &line[start..end];
    let (cpu, cpu_shape, col_start) = if let Some(cpu) = bracketed_cpu(token) {
        (cpu, CpuShape::Bracket, start)
    } else if token.first().is_some_and(u8::is_ascii_digit) {
        let nd = token
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(token.len());
        if !is_flags(&token[nd..]) {
            return None;
        }
        (
            u32::try_from(parse_u64(&token[..nd])?).ok()?,
            CpuShape::Latency,
            start,
        )
    } else if is_flags(token) {
        let e = skip_spaces_back(line, start);
        let s = token_start_back(line, e);
        (bracketed_cpu(&line[s..e])?, CpuShape::Bracket, s)
    } else {
        return None;
    };
    let mut end = skip_spaces_back(line, col_start);
    let mut pid_col_end = col_start;
    let mut has_tgid_column = false;
    let mut tgid = None;
    if cpu_shape == CpuShape::Bracket && end > 0 && line[end - 1] == b')' {
        let open = memrchr(b'(', &line[..end - 1])?;
        let inner = trim_start_spaces(&line[open + 1..end - 1]);
        if !inner.iter().all(|&b| b == b'-') {
            tgid = Some(parse_pid(inner)?);
        }
        has_tgid_column = true;
        pid_col_end = open;
        end = skip_spaces_back(line, open);
    }
    let digits_start = line[..end]
        .iter()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |p| p + 1);
    if digits_start == end || digits_start == 0 || line[digits_start - 1] != b'-' {
        return None;
    }
    let pid = parse_pid(&line[digits_start..end])?;
    Some(Context {
        pid,
        cpu: Some(cpu),
        ts,
        rest: &line[rest..],
        cpu_shape,
        has_tgid_column,
        pid_field_width: pid_col_end - digits_start,
        pid_digits: end - digits_start,
        tgid: tgid.filter(|&t| t > 0),
    })
}

fn perf_columns(line: &[u8], ts_start: usize, ts: TextTs, rest: usize) -> Option<Context<'_>> {
    let mut end = skip_spaces_back(line, ts_start);
    if end == ts_start {
        return None;
    }
    let mut start = token_start_back(line, end);
    let mut cpu = None;
    if let Some(c) = bracketed_cpu(&line[start..end]) {
        cpu = Some(c);
        end = skip_spaces_back(line, start);
        start = token_start_back(line, end);
    }
    let token = &line[start..end];
    if start == 0 || token.is_empty() {
        return None;
    }
    // `PID/TID`: the context task is the TID. perf prints -1 (and comm `:-1`) for samples
    // whose task was already gone (`12897/-1`, `   -1`).
    let signed = |s: &[u8]| i32::try_from(parse_i64(s)?).ok();
    let (pid, tgid) = match memchr::memchr(b'/', token) {
        Some(slash) => {
            let process = signed(&token[..slash])?;
            (
                signed(&token[slash + 1..])?,
                Some(process).filter(|&p| p > 0),
            )
        }
        None => (signed(token)?, None),
    };
    if skip_spaces_back(line, start) == 0 {
        return None; // no comm column
    }
    Some(Context {
        pid,
        cpu,
        ts,
        rest: &line[rest..],
        cpu_shape: CpuShape::Bracket,
        has_tgid_column: false,
        pid_field_width: 0,
        pid_digits: token.len(),
        tgid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(line: &str) -> Context<'_> {
        parse_kernel_context(line.as_bytes()).unwrap_or_else(|| panic!("no context in {line:?}"))
    }

    fn p(line: &str) -> Context<'_> {
        parse_perf_context(line.as_bytes()).unwrap_or_else(|| panic!("no context in {line:?}"))
    }

    #[test]
    fn kernel_default_with_odd_comms() {
        let c = k("       CPU 0/KVM-8455    [001] d..2.   307.316366: sched_waking: comm=python3 pid=8414");
        assert_eq!(
            (c.pid, c.cpu, c.ts),
            (8455, Some(1), TextTs::Ns(307_316_366_000))
        );
        assert!(!c.has_tgid_column);
        assert_eq!(c.rest, b"sched_waking: comm=python3 pid=8414");
        assert_eq!((c.pid_field_width, c.pid_digits), (8, 4));
        let c = k("     a:b [x] 1.5-8457    [000] dN.3.   307.318831: sched_wakeup: comm=python3");
        assert_eq!((c.pid, c.cpu), (8457, Some(0)));
        let c = k(" memfd:sealed-91-2695    [000] d.h5.   327.268453: sched_wakeup: comm=cat");
        assert_eq!(c.pid, 2695);
        let c = k("           <...>-12     [000] ....  1.000001: x: y");
        assert_eq!(
            (c.pid, c.ts, c.rest),
            (12, TextTs::Ns(1_000_001_000), &b"x: y"[..])
        );
        let c = k("  a-1 [2] 3.5: b-4 [005] d..2.   9.000001: ev: p");
        assert_eq!((c.pid, c.cpu), (1, Some(2)), "leftmost valid anchor wins");
    }

    #[test]
    fn kernel_four_char_flags_no_flags_and_tgid() {
        let c = k("            bash-8786    [000] d..2   317.266205: sched_switch: x=1");
        assert_eq!((c.pid, c.ts), (8786, TextTs::Ns(317_266_205_000)));
        let c = k("            bash-8786    [000]    317.266205: sched_switch: x=1");
        assert_eq!((c.pid, c.cpu), (8786, Some(0)));
        let c = k("            bash-8786    (   8786) [000] d..2.   316.942899: sched_switch: x=1");
        assert_eq!(
            (c.pid, c.has_tgid_column, c.pid_field_width),
            (8786, true, 8)
        );
        let c = k("            bash-8786    (-------) [000] d..2.   316.942899: sched_switch: x=1");
        assert_eq!((c.pid, c.has_tgid_column), (8786, true));
        assert!(parse_kernel_context(
            b"            bash-8786    (  87x6) [000] d..2.   316.942899: e: x=1"
        )
        .is_none());
    }

    #[test]
    fn kernel_raw_clocks_latency_and_tracecmd_shapes() {
        let c = k("     kworker/0:2-369     [000] d..4.            4: sched_wakeup: comm=fio");
        assert_eq!((c.pid, c.ts), (369, TextTs::Count(4)));
        let c = k("rcu_pree-15        0d..2. 23809us#: sched_switch: prev_comm=rcu_preempt");
        assert_eq!(
            (c.pid, c.cpu, c.ts),
            (15, Some(0), TextTs::RelativeNs(23_809_000))
        );
        assert_eq!(c.cpu_shape, CpuShape::Latency);
        let c = k(" python3-8930      0d..2. 23801us : sched_switch: prev_comm=bash");
        assert_eq!(c.ts, TextTs::RelativeNs(23_801_000));
        assert_eq!(c.rest, b"sched_switch: prev_comm=bash");
        let c = k("    bash-12615   1d..2.   392.162131: sched_switch:         bash:12615 [120] S ==> bash:12622 [120]");
        assert_eq!(
            (c.pid, c.cpu, c.cpu_shape),
            (12615, Some(1), CpuShape::Latency)
        );
        let c = k("            bash-12615 [001]   392.162070812: sched_process_fork:   comm=bash");
        assert_eq!((c.ts, c.pid_field_width), (TextTs::Ns(392_162_070_812), 6));
        let c =
            k("     a:b [x] 1.5-12666 [000]   392.348759: (+9)     sched_waking:  comm=python3");
        assert_eq!(
            (c.pid, c.rest),
            (12666, &b"(+9)     sched_waking:  comm=python3"[..])
        );
    }

    #[test]
    fn perf_pid_widths_tid_cpu_and_unpadded_comm() {
        let c = p("            perf 13978 [000]   481.124195: sched:sched_stat_runtime: comm=perf");
        assert_eq!((c.pid, c.cpu, c.pid_digits), (13978, Some(0), 5));
        let c = p("            perf   13978 [000]   481.124195282: sched:sched_switch: x=1");
        assert_eq!((c.pid, c.ts), (13978, TextTs::Ns(481_124_195_282)));
        let c = p(
            "     migration/0    18/19    [000]   481.124205:       sched:sched_waking: comm=perf",
        );
        assert_eq!(c.pid, 19, "PID/TID: the context task is the TID");
        let c =
            p("CPU 0/KVM 13695 [000]   456.891021:       sched:sched_switch: prev_comm=CPU 0/KVM");
        assert_eq!(
            (c.pid, c.rest),
            (13695, &b"      sched:sched_switch: prev_comm=CPU 0/KVM"[..])
        );
        let c = p(" kworker/11:68+d 1234 [011]     1.000000: sched:sched_switch: x=1");
        assert_eq!((c.pid, c.cpu), (1234, Some(11)));
        let c = p("a:b [x] 1.5 12666 [000]   392.348759: sched:sched_waking: comm=python3");
        assert_eq!((c.pid, c.cpu), (12666, Some(0)));
        let c = p("              :-1 12897/-1    [001]   595.997968263: sched:sched_stat_runtime: comm=x pid=1");
        assert_eq!((c.pid, c.cpu), (-1, Some(1)));
        let c = p(
            "              :-1    -1 [001]   595.997968: sched:sched_stat_runtime: comm=x pid=1",
        );
        assert_eq!(c.pid, -1);
        let c = p("burn 17651   725.496088:     500250 cpu-clock:pppH: ");
        assert_eq!(
            (c.pid, c.cpu, c.rest),
            (17651, None, &b"    500250 cpu-clock:pppH: "[..])
        );
    }

    #[test]
    fn dialects_do_not_accept_each_other() {
        assert!(parse_perf_context(
            b"            bash-8399    [001] d..2.   307.122569: sched_wakeup_new: x"
        )
        .is_none());
        assert!(parse_perf_context(
            b"            bash-8786    [000]    317.266205: sched_switch: x"
        )
        .is_none());
        assert!(parse_kernel_context(
            b" kworker/u8:0-lo    12 [000]   481.124322: sched:sched_waking: x"
        )
        .is_none());
        assert!(parse_kernel_context(b"not a trace line: at all").is_none());
        assert!(parse_kernel_context(b"8786 1 318686125345 type: 372").is_none());
        assert!(
            parse_perf_context(b"12 481.124322: x: y").is_none(),
            "a pid needs a comm column before it"
        );
    }
}
