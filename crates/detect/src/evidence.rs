//! Evidence: turning the events a detector kept into [`Evidence`] entries.
//!
//! A detector keeps the few events that prove a finding as [`Kept`] copies (no call chain)
//! while it runs, and renders them only for findings it reports. `source` is `PATH:LINE`
//! for text inputs and `PATH:0xOFFSET` for binary ones; `text` is the normalized `dump`
//! line (the CLI replaces it with the original line for text inputs).

use stallscope_model::{Event, EventKind, Evidence, SpanPos};

/// An event kept as evidence (a copy without its call chain).
pub type Kept = Event;

/// A copy of `ev` worth keeping (call chain dropped).
///
/// Detectors keep a few events per scheduler event, so the scheduler kinds (plain data)
/// are copied here, inline, straight from `ev`: the derived `clone` is a call that writes
/// a temporary field by field, and copying that temporary on stalls on store forwarding.
#[inline]
pub fn keep(ev: &Event) -> Kept {
    let kind = match &ev.kind {
        EventKind::Switch(s) => EventKind::Switch(*s),
        EventKind::Waking(w) => EventKind::Waking(*w),
        EventKind::Wakeup(w) => EventKind::Wakeup(*w),
        EventKind::WakeupNew(w) => EventKind::WakeupNew(*w),
        EventKind::Migrate(m) => EventKind::Migrate(*m),
        EventKind::StatRuntime(r) => EventKind::StatRuntime(*r),
        other => other.clone(),
    };
    Event {
        ts: ev.ts,
        cpu: ev.cpu,
        pid: ev.pid,
        span: ev.span,
        kind,
        callchain: None,
    }
}

/// `PATH:LINE` or `PATH:0xOFFSET` for `ev`, naming the input by its path.
pub fn source(paths: &[String], ev: &Event) -> String {
    let path = paths
        .get(usize::from(ev.span.input()))
        .map_or("?", String::as_str);
    match ev.span.pos() {
        SpanPos::Line(l) => format!("{path}:{l}"),
        SpanPos::Byte(b) => format!("{path}:{b:#x}"),
    }
}

/// Evidence entries for `events`, sorted by time, duplicates (same time and source) removed.
pub fn render(paths: &[String], events: &[&Kept]) -> Vec<Evidence> {
    let mut v: Vec<&Kept> = events.to_vec();
    v.sort_by_key(|e| (e.ts, e.span.input(), span_key(e.span.pos())));
    v.dedup_by(|a, b| a.ts == b.ts && a.span == b.span);
    v.into_iter()
        .map(|e| Evidence {
            ts_ns: e.ts,
            source: source(paths, e),
            text: e.dump_line(),
        })
        .collect()
}

fn span_key(p: SpanPos) -> u64 {
    match p {
        SpanPos::Line(l) | SpanPos::Byte(l) => l,
    }
}
