//! `trace-cmd report` text (formats.md §7.2; samples from trace-cmd 3.1.6).
//!
//! ```text
//! cpus=2                                                               first line → meta.nr_cpus
//! version = 7                                                          with --debug (ignored)
//!             bash-12615 [001]   392.162071: sched_process_fork:   comm=bash pid=12615 child_comm=bash child_pid=12622
//!             bash-12615 [001]   392.162131: sched_switch:         bash:12615 [120] S ==> bash:12622 [120]
//!           <idle>-0     [001]   392.164557: sched_wakeup:         python3:12623 [120] CPU:001
//!      a:b [x] 1.5-12666 [000]   392.349502: sched_switch:         a:b [x] 1.5:12666 [120] R ==> rcu_preempt:15 [120]
//!             bash-12615 [001]   392.162070812: …                  -t (ns)
//!             bash-12615 [001]   392.162131: sched_switch:         prev_comm=bash … prev_state=1 next_comm=…   -R (raw)
//!             bash-12615 [001]   392.162131: sched_switch:         prev_comm=bash … prev_state=S ==> …        -N (no plugins)
//!         bash-12615   1d..2.   392.162131: sched_switch:         …                              -l (latency: comm cut to 8)
//!             bash-12615 [001]   392.162131: (+60)    sched_switch: …                          --ts-diff
//! CPU:1 [523 EVENTS DROPPED]  /  CPU:1 [EVENTS DROPPED]                → EventKind::Lost
//! CPU:0 [SUBBUFFER START] [ts:0x…]                                     with --debug (ignored)
//! ```
//!
//! Context: `"%16s-%-5d [%03d]"` (pid 5 wide), optional latency flags (trace-cmd ≥ 3.4 prints
//! them), time `secs.usecs` (µs, rounded), `-t` ns, raw-count clocks as integers; the event
//! name is padded to 20 columns. Payloads are libtraceevent's: kernel-like, except the
//! `sched_switch` / `sched_wakeup(_new)` plugins, whose `COMM:PID` is split at the last `:`
//! and whose state letters come from a fixed pre-4.14 table without the `+` of `R+` — they
//! are mapped back (see the `prev_state` module of `text_common`) and a data-quality note
//! says preemption is unavailable. `-R` prints raw numbers, decoded with the 4.14+ table.

use stallscope_model::time::parse_u64;
use stallscope_model::InputFormat;

use crate::text_common::context::parse_kernel_context;
use crate::text_common::kernel_line::{
    is_stack_line, parse_lost_marker, push_kernel_event, skipped_stack_line,
};
use crate::text_common::line_reader::LineReader;
use crate::text_common::lines::Line;
use crate::text_common::state::TextState;
use crate::{Input, ReadError};

/// Reader of `trace-cmd report` text: the shared line loop driven by this module's line handler.
pub type TraceCmdTextReader = LineReader;

/// Opens `input` (already decompressed) as input number `index`.
pub fn open(input: Input, index: u16) -> Result<TraceCmdTextReader, ReadError> {
    Ok(LineReader::new(
        input,
        InputFormat::TraceCmdText,
        index,
        handle_line,
    ))
}

/// Strips the `--ts-diff` column `(+N)` (blank on the first event) and its padding.
fn strip_ts_diff(rest: &[u8]) -> &[u8] {
    let rest = rest.trim_ascii_start();
    if rest.starts_with(b"(+") {
        if let Some(close) = memchr::memchr(b')', rest) {
            return rest[close + 1..].trim_ascii_start();
        }
    }
    rest
}

/// Handles one line of `trace-cmd report` text.
fn handle_line(st: &mut TextState, line: &Line<'_>) {
    let t = line.text;
    let trimmed = t.trim_ascii();
    if trimmed.is_empty() || t[0] == b'#' {
        return;
    }
    if let Some(n) = trimmed.strip_prefix(b"cpus=") {
        match parse_u64(n).and_then(|n| u32::try_from(n).ok()) {
            Some(n) => st.meta.nr_cpus = Some(n),
            None => st.unparsed(line),
        }
        return;
    }
    // `version = 6` (--debug), `--version`'s answer when the file has none
    if trimmed.starts_with(b"version = ") || trimmed == b"version was not recorded in this file" {
        return;
    }
    // `trace-cmd report --uname`: `Linux HOST RELEASE ARCH` before the events
    if st.meta.kernel_release.is_none() && t.starts_with(b"Linux ") {
        let words: Vec<&[u8]> = trimmed
            .split(|&b| b == b' ')
            .filter(|w| !w.is_empty())
            .collect();
        if let [_, _, release, _] = words.as_slice() {
            if release.first().is_some_and(u8::is_ascii_digit) {
                st.set_kernel_release(String::from_utf8_lossy(release).into_owned());
                return;
            }
        }
    }
    if let Some(ctx) = parse_kernel_context(t) {
        if !push_kernel_event(st, line, &ctx, strip_ts_diff(ctx.rest)) {
            st.unparsed(line);
        }
    } else if let Some((cpu, count)) =
        parse_lost_marker(t).or_else(|| without_instance_prefix(t).and_then(parse_lost_marker))
    {
        st.lost_marker(cpu, count, line);
    } else if trimmed.starts_with(b"CPU:")
        && memchr::memmem::find(t, b"[SUBBUFFER START]").is_some()
    {
        // --debug sub-buffer boundary: layout information only.
    } else if is_stack_line(t) {
        skipped_stack_line(st, line);
    } else {
        st.unparsed(line);
    }
}

/// For a buffer instance `trace-cmd report` prefixes every line with `NAME: `; this returns the
/// line after such a prefix when it is followed by `CPU:` (a drop marker), e.g.
/// `mine: CPU:1 [5231 EVENTS DROPPED]` → `CPU:1 [5231 EVENTS DROPPED]`.
fn without_instance_prefix(t: &[u8]) -> Option<&[u8]> {
    memchr::memmem::find(t, b": CPU:").map(|i| &t[i + 2..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventReader;
    use stallscope_model::Problem;

    fn read(text: &str) -> (Vec<String>, TraceCmdTextReader) {
        let input = Input::from_bytes("t.txt", text.as_bytes().to_vec()).expect("input");
        let mut r = open(input, 0).expect("open");
        let mut out = Vec::new();
        while let Some(e) = r.next_event().expect("event") {
            out.push(e.dump_line());
        }
        (out, r)
    }

    #[test]
    fn drop_marker_of_a_buffer_instance() {
        let (ev, r) = read("cpus=2\nmine: CPU:1 [5231 EVENTS DROPPED]\n");
        assert_eq!(
            ev,
            vec!["0 1 -1 lost_events count=5231".to_string()],
            "{ev:?}"
        );
        assert_eq!(r.quality().count(Problem::UnparsedLines), 0);
    }

    #[test]
    fn header_drops_and_ts_diff() {
        let (ev, r) = read(
            "cpus=4\nCPU:2 [EVENTS DROPPED]\n            bash-12615 [002]   392.162131: (+60)    sched_switch:         bash:12615 [120] S ==> bash:12622 [120]\n",
        );
        assert_eq!(r.meta().nr_cpus, Some(4));
        assert_eq!(
            ev,
            vec![
                "392162131000 2 -1 lost_events count=?".to_string(),
                "392162131000 2 12615 sched_switch prev_comm=bash prev_pid=12615 prev_prio=120 prev_state=S next_comm=bash next_pid=12622 next_prio=120".to_string(),
            ]
        );
        assert_eq!(r.quality().count(Problem::LostEventsUnknownCount), 1);
        assert_eq!(
            r.quality().count(Problem::PrevStatePreemptionUnavailable),
            1
        );
    }
}
