//! Kernel ftrace text: the tracefs `trace` and `trace_pipe` files (formats.md §7.1).
//!
//! ```text
//! # tracer: nop                                                     header (`trace` only)
//! # entries-in-buffer/entries-written: 25499/27378   #P:2           kept < written ⇒ lost
//! #           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
//!             bash-8399    [001] d..2.   307.122622: sched_switch: prev_comm=bash … ==> next_comm=bash …
//!        CPU 0/KVM-8455    [001] d..2.   307.316366: sched_waking: comm=python3 pid=8414 prio=120 target_cpu=000
//!             bash-8786    (   8786) [000] d..2.   316.942899: sched_switch: …   record-tgid
//!             bash-8786    [000]    317.266205: sched_switch: …                  noirq-info
//!             bash-8786    [000] d..2   317.266205: sched_switch: …              older kernels: 4-char flags
//!      kworker/0:2-369     [000] d..4.            4: sched_wakeup: …             counter / x86-tsc clock
//!         rcu_pree-15        0d..2. 23809us#: sched_switch: …                    latency-format
//! CPU:1 [LOST 523 EVENTS]                                           → EventKind::Lost
//! ##### CPU 1 buffer started ####                                   annotate option
//!     kworker/0:41-9113    [000] d..2.   319.730986: <stack trace>  then lines " => symbol"
//! ```
//!
//! Context columns are found as described in [`crate::text_common`]'s `context` module;
//! the payload (`print fmt` output) is decoded by its `payload` module. Times: `secs.usecs`
//! (µs, the kernel rounds ns to the nearest µs) becomes ns ×1000; a bare integer is a raw
//! clock count kept as is (`meta.clock_is_ns = false`, data-quality note); latency format
//! `NNNNus` is relative to the buffer start (data-quality note). The `raw`/`hex` trace
//! options print event type numbers instead of names (`8786 1 318686125345 type: 372`):
//! such lines are counted under `ftrace_raw_or_hex_lines` and skipped. Stack traces are
//! counted and skipped. Blank lines and `#` comments are part of the grammar.

use stallscope_model::{InputFormat, Problem};

use crate::text_common::context::parse_kernel_context;
use crate::text_common::kernel_line::{
    ftrace_header_comment, is_stack_line, parse_lost_marker, push_kernel_event, skipped_stack_line,
    token_after,
};
use crate::text_common::line_reader::LineReader;
use crate::text_common::lines::Line;
use crate::text_common::state::TextState;
use crate::{Input, ReadError};

/// Reader of kernel ftrace text: the shared line loop driven by this module's line handler.
pub type FtraceTextReader = LineReader;

/// Opens `input` (already decompressed) as input number `index`.
pub fn open(input: Input, index: u16) -> Result<FtraceTextReader, ReadError> {
    Ok(LineReader::new(
        input,
        InputFormat::FtraceText,
        index,
        handle_line,
    ))
}

/// Handles one line of ftrace text.
fn handle_line(st: &mut TextState, line: &Line<'_>) {
    let t = line.text;
    if t.trim_ascii().is_empty() {
        return;
    }
    if t[0] == b'#' {
        if t.starts_with(b"#####") {
            cpu_buffer_started(st, line);
        } else {
            ftrace_header_comment(st, line);
        }
        return;
    }
    if let Some(ctx) = parse_kernel_context(t) {
        if !push_kernel_event(st, line, &ctx, ctx.rest) {
            st.unparsed(line);
        }
    } else if let Some((cpu, count)) = parse_lost_marker(t) {
        st.lost_marker(cpu, count, line);
    } else if is_stack_line(t) {
        skipped_stack_line(st, line);
    } else if is_raw_option_line(t) {
        st.note_deferred(Problem::FtraceRawOrHexLines, line);
    } else {
        st.unparsed(line);
    }
}

/// `##### CPU N buffer started ####`: that CPU has no events before this point.
fn cpu_buffer_started(st: &mut TextState, line: &Line<'_>) {
    if token_after(line.text, b"CPU").is_some()
        && memchr::memmem::find(line.text, b"buffer started").is_some()
    {
        st.note(Problem::CpuBufferStartedLate, 1, line);
    } else {
        st.unparsed(line);
    }
}

/// `PID CPU TS type: ID …` (raw option, decimal) or the same in hex words (hex option).
fn is_raw_option_line(t: &[u8]) -> bool {
    let Some(at) = memchr::memmem::find(t, b" type: ") else {
        return false;
    };
    let words: Vec<&[u8]> = t[..at]
        .split(|&b| b == b' ')
        .filter(|w| !w.is_empty())
        .collect();
    words.len() == 3 && words.iter().all(|w| w.iter().all(u8::is_ascii_hexdigit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventReader;
    use stallscope_model::Event;

    fn read(text: &str) -> (Vec<Event>, FtraceTextReader) {
        let input = Input::from_bytes("t.txt", text.as_bytes().to_vec()).expect("input");
        let mut r = open(input, 0).expect("open");
        let mut out = Vec::new();
        while let Some(e) = r.next_event().expect("event") {
            out.push(e);
        }
        (out, r)
    }

    #[test]
    fn lost_marker_takes_the_next_timestamp() {
        let (ev, r) = read(
            "CPU:1 [LOST 523 EVENTS]\n            bash-1    [001] d..2.     1.000002: sched_waking: comm=a pid=2 prio=120 target_cpu=001\n",
        );
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].dump_line(), "1000002000 1 -1 lost_events count=523");
        assert_eq!(ev[1].pid, 1);
        assert_eq!(r.quality().count(Problem::LostEvents), 523);
    }

    #[test]
    fn raw_option_and_garbage_are_counted() {
        let (ev, r) = read("8786 1 318686125345 type: 372\n0000230e 00000001 0000004a426d3ca8 type: 371\n\nnonsense line\n");
        assert!(ev.is_empty());
        assert_eq!(r.quality().count(Problem::FtraceRawOrHexLines), 2);
        assert_eq!(r.quality().count(Problem::UnparsedLines), 1);
    }

    #[test]
    fn truncated_last_line_is_counted_not_fatal() {
        let (ev, r) = read("            bash-1    [001] d..2.     1.000002: sched_waking: comm=a pid=2 prio=120 target_cpu=001\n            bash-1    [001] d..2.     1.0000");
        assert_eq!(ev.len(), 1);
        assert_eq!(r.quality().count(Problem::TruncatedLastLine), 1);
        assert_eq!(r.quality().count(Problem::UnparsedLines), 0);
    }
}
