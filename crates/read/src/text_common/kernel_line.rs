//! The part of the kernel dialect (ftrace text and `trace-cmd report`) shared by both
//! readers: turning a parsed context plus `NAME: PAYLOAD` into an event, lost-event
//! markers, stack-trace lines and header comments.
//!
//! ```text
//! REST := NAME ":" ␣+ PAYLOAD        sched_switch: prev_comm=…   (trace-cmd pads NAME: to 20)
//!       | "<stack trace>" | "<user stack trace>"      followed by lines " => SYMBOL"
//!       | FUNC " <-" PARENT                            function tracer
//! CPU:N [LOST M EVENTS]                                ftrace, before the first event after a gap
//! CPU:N [M EVENTS DROPPED] | CPU:N [EVENTS DROPPED]    trace-cmd
//! ```

use stallscope_model::{Event, Problem};

use super::context::{Context, TextTs};
use super::lines::Line;
use super::payload::{event_kind, generic, PayloadForm};
use super::state::TextState;
use stallscope_model::time::parse_u64;

/// Splits `NAME: PAYLOAD` (payload with leading padding removed). `None` when there is no
/// `: ` / final `:` or the name is not a single token.
pub(crate) fn split_name(rest: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon =
        memchr::memchr_iter(b':', rest).find(|&c| c + 1 == rest.len() || rest[c + 1] == b' ')?;
    let name = &rest[..colon];
    if name.is_empty() || name.contains(&b' ') {
        return None;
    }
    let payload = rest.get(colon + 1..).unwrap_or_default();
    let start = payload
        .iter()
        .position(|&b| b != b' ')
        .unwrap_or(payload.len());
    Some((name, &payload[start..]))
}

/// Records the notes a timestamp form implies.
pub(crate) fn note_timestamp(st: &mut TextState, ts: TextTs, line: &Line<'_>) {
    match ts {
        TextTs::Ns(_) => {}
        TextTs::Count(_) => {
            st.meta.clock_is_ns = false;
            st.note_deferred(Problem::TimestampsNotNs, line);
        }
        TextTs::RelativeNs(_) => st.note_deferred(Problem::LatencyFormat, line),
    }
}

/// Records the notes a payload form implies.
pub(crate) fn note_payload_form(st: &mut TextState, form: PayloadForm, line: &Line<'_>) {
    match form {
        PayloadForm::Native | PayloadForm::PluginWakeup | PayloadForm::Generic => {}
        PayloadForm::PluginSwitch => {
            st.note_deferred(Problem::PrevStatePreemptionUnavailable, line)
        }
        PayloadForm::SchedMismatch => st.note(Problem::UnrecognizedSchedPayload, 1, line),
    }
}

/// Handles `REST` of a kernel-dialect event line. Returns false when it is not an event.
pub(crate) fn push_kernel_event(
    st: &mut TextState,
    line: &Line<'_>,
    ctx: &Context<'_>,
    rest: &[u8],
) -> bool {
    let rest = rest.trim_ascii_start();
    if rest == b"<stack trace>" || rest == b"<user stack trace>" {
        skipped_stack_line(st, line);
        return true;
    }
    let (kind, form) = match split_name(rest) {
        Some((name, payload)) => event_kind(None, name, payload, &st.prev_states),
        // The kernel `blk` tracer prints `7,0  Q  WS 0 + 8 [dd]` without an event name.
        None => match super::block::blk_tracer_event(rest) {
            Some(ev) => (
                stallscope_model::EventKind::Block(Box::new(ev)),
                PayloadForm::Native,
            ),
            None if rest.windows(3).any(|w| w == b" <-")
                || (!rest.is_empty() && !rest.contains(&b' ')) =>
            {
                (generic(None, b"function", rest), PayloadForm::Generic)
            }
            None => return false,
        },
    };
    note_timestamp(st, ctx.ts, line);
    note_payload_form(st, form, line);
    st.note_tgid(ctx.pid, ctx.tgid);
    let ev = Event {
        ts: ctx.ts.value(),
        cpu: ctx.cpu.unwrap_or(0),
        pid: ctx.pid,
        span: st.span(line.number),
        kind,
        callchain: None,
    };
    st.push(ev);
    true
}

/// A ` => symbol` stack line or a `<stack trace>` header.
pub(crate) fn skipped_stack_line(st: &mut TextState, line: &Line<'_>) {
    st.note_deferred(Problem::StackTraceLinesSkipped, line);
}

/// True for a stack continuation line (` => symbol`).
pub(crate) fn is_stack_line(text: &[u8]) -> bool {
    text.trim_ascii_start().starts_with(b"=> ") || text.trim_ascii() == b"=>"
}

/// Parses `CPU:N [LOST M EVENTS]`, `CPU:N [M EVENTS DROPPED]`, `CPU:N [EVENTS DROPPED]`.
/// `Some((cpu, count))` on a match.
pub(crate) fn parse_lost_marker(text: &[u8]) -> Option<(u32, Option<u64>)> {
    let rest = text.trim_ascii().strip_prefix(b"CPU:")?;
    let sp = memchr::memchr(b' ', rest)?;
    let cpu = u32::try_from(parse_u64(&rest[..sp])?).ok()?;
    let inner = rest[sp + 1..]
        .trim_ascii()
        .strip_prefix(b"[")?
        .strip_suffix(b"]")?;
    if let Some(n) = inner
        .strip_prefix(b"LOST ")
        .and_then(|r| r.strip_suffix(b" EVENTS"))
    {
        return Some((cpu, Some(parse_u64(n)?)));
    }
    if inner == b"EVENTS DROPPED" {
        return Some((cpu, None));
    }
    let n = inner.strip_suffix(b" EVENTS DROPPED")?;
    Some((cpu, Some(parse_u64(n)?)))
}

/// Value after `marker` in `text` up to the next space (e.g. `#P:` → `2`).
pub(crate) fn token_after<'a>(text: &'a [u8], marker: &[u8]) -> Option<&'a [u8]> {
    let at = memchr::memmem::find(text, marker)? + marker.len();
    let v = text[at..].trim_ascii_start();
    let end = v
        .iter()
        .position(|&b| b == b' ' || b == b')' || b == b',')
        .unwrap_or(v.len());
    Some(&v[..end])
}

/// Facts in ftrace header comments: `#P:N`, `entries-in-buffer/entries-written: A/B`,
/// `… latency trace v1.1.5 on RELEASE`.
pub(crate) fn ftrace_header_comment(st: &mut TextState, line: &Line<'_>) {
    let t = line.text;
    if let Some(n) = token_after(t, b"#P:").and_then(parse_u64) {
        st.meta.nr_cpus = u32::try_from(n).ok();
    }
    if let Some(v) = token_after(t, b"entries-in-buffer/entries-written:") {
        if let Some(slash) = memchr::memchr(b'/', v) {
            if let (Some(kept), Some(written)) =
                (parse_u64(&v[..slash]), parse_u64(&v[slash + 1..]))
            {
                if kept < written {
                    st.note(Problem::LostEvents, written - kept, line);
                }
            }
        }
    }
    if memchr::memmem::find(t, b"latency trace v").is_some() {
        if let Some(rel) = token_after(t, b" on ") {
            st.set_kernel_release(String::from_utf8_lossy(rel).into_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_markers() {
        assert_eq!(
            split_name(b"sched_switch:         a:1 [1] R ==> b:2 [1]"),
            Some((&b"sched_switch"[..], &b"a:1 [1] R ==> b:2 [1]"[..]))
        );
        assert_eq!(
            split_name(b"tracing_mark_write: hello: world"),
            Some((&b"tracing_mark_write"[..], &b"hello: world"[..]))
        );
        assert_eq!(split_name(b"empty:"), Some((&b"empty"[..], &b""[..])));
        assert_eq!(split_name(b"do_foo <-bar"), None);
        assert_eq!(
            parse_lost_marker(b"CPU:1 [LOST 523 EVENTS]"),
            Some((1, Some(523)))
        );
        assert_eq!(
            parse_lost_marker(b"CPU:0 [12 EVENTS DROPPED]"),
            Some((0, Some(12)))
        );
        assert_eq!(
            parse_lost_marker(b"CPU:3 [EVENTS DROPPED]"),
            Some((3, None))
        );
        assert_eq!(
            parse_lost_marker(b"CPU:3 [SUBBUFFER START] [ts:0x10]"),
            None
        );
        assert!(is_stack_line(b" => __schedule"));
        assert!(is_stack_line(b" =>  <00007f6e805e9bd3>"));
        assert_eq!(
            token_after(
                b"# latency: 0 us, #871/871, CPU#0 | (M:PREEMPT(none) VP:0, KP:0, SP:0 HP:0 #P:2)",
                b"#P:"
            ),
            Some(&b"2"[..])
        );
    }
}
