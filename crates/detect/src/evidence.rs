//! Evidence: turning the events a detector kept into [`Evidence`] entries.
//!
//! A detector keeps the few events that prove a finding as [`Kept`] copies (no call chain)
//! while it runs, and renders them only for findings it reports. `source` is `PATH:LINE`
//! for text inputs and `PATH:0xOFFSET` for binary ones; `text` is the normalized `dump`
//! line (the CLI replaces it with the original line for text inputs). The events a
//! detector replaces on every switch or wakeup are kept as plain data ([`KeptCopy`], in a
//! [`KeptCopySlot`]) and become [`Kept`] events only when a finding uses them.

use rustc_hash::FxHashMap;
use stallscope_model::{Cpu, Event, EventKind, Evidence, Span, SpanPos, Tid, Ts};

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

/// Makes `dst` a kept copy of `ev` in place ([`keep`] without a temporary: for a
/// scheduler kind of the same variant only the payload is copied).
#[inline(always)]
pub fn keep_into(dst: &mut Kept, ev: &Event) {
    dst.ts = ev.ts;
    dst.cpu = ev.cpu;
    dst.pid = ev.pid;
    dst.span = ev.span;
    match (&mut dst.kind, &ev.kind) {
        (EventKind::Switch(d), EventKind::Switch(s)) => *d = *s,
        (EventKind::Waking(d), EventKind::Waking(s)) => *d = *s,
        (EventKind::Wakeup(d), EventKind::Wakeup(s)) => *d = *s,
        (EventKind::WakeupNew(d), EventKind::WakeupNew(s)) => *d = *s,
        (EventKind::Migrate(d), EventKind::Migrate(s)) => *d = *s,
        (EventKind::StatRuntime(d), EventKind::StatRuntime(s)) => *d = *s,
        (EventKind::Switch(_), _)
        | (EventKind::Waking(_), _)
        | (EventKind::Wakeup(_), _)
        | (EventKind::WakeupNew(_), _)
        | (EventKind::Migrate(_), _)
        | (EventKind::StatRuntime(_), _)
        | (EventKind::Fork { .. }, _)
        | (EventKind::Exit(_), _)
        | (EventKind::Exec { .. }, _)
        | (EventKind::Lost { .. }, _)
        | (EventKind::TaskComm { .. }, _)
        | (EventKind::Mapping(_), _)
        | (EventKind::Block(_), _)
        | (EventKind::Generic(_), _) => replace_kind(dst, ev),
    }
    dst.callchain = None;
}

/// [`keep_into`] when `dst` holds another kind (out of line: the temporary kind it builds
/// would otherwise take room in every caller's frame).
#[cold]
#[inline(never)]
fn replace_kind(dst: &mut Kept, ev: &Event) {
    dst.kind = keep(ev).kind;
}

/// A kept event of a kind known where it is kept, as plain data: the event's fields and
/// its payload `T` (`Switch`, `Wakeup`…) with the variant that wraps it. Keeping one is a
/// few stores, with no dispatch on the kind and nothing to drop (for the events a detector
/// replaces on every switch or wakeup); [`KeptCopy::kept`] builds the [`Kept`] event, equal
/// to [`keep`] of the original.
#[derive(Clone, Copy, Debug)]
pub struct KeptCopy<T: Copy> {
    /// The event's time.
    pub ts: Ts,
    /// The event's CPU.
    pub cpu: Cpu,
    /// The event's context task.
    pub pid: Tid,
    /// The event's source.
    pub span: Span,
    /// The event's payload.
    pub payload: T,
    /// The [`EventKind`] variant holding `payload`.
    wrap: fn(T) -> EventKind,
}

impl<T: Copy> KeptCopy<T> {
    /// Keeps `ev`, whose kind is `wrap(payload)`.
    #[inline]
    pub fn new(ev: &Event, payload: T, wrap: fn(T) -> EventKind) -> Self {
        KeptCopy {
            ts: ev.ts,
            cpu: ev.cpu,
            pid: ev.pid,
            span: ev.span,
            payload,
            wrap,
        }
    }

    /// The kept event.
    pub fn kept(&self) -> Kept {
        Event {
            ts: self.ts,
            cpu: self.cpu,
            pid: self.pid,
            span: self.span,
            kind: (self.wrap)(self.payload),
            callchain: None,
        }
    }
}

/// An optional [`KeptCopy`] whose storage stays: setting it writes the fields in place and
/// clearing it only marks it empty. (Building a new `Option<KeptCopy>` on every switch went
/// through a stack temporary that the compiler reads back with a load straddling two of its
/// stores: a store-forwarding stall per switch.)
#[derive(Clone, Copy, Debug)]
pub struct KeptCopySlot<T: Copy> {
    live: bool,
    kept: Option<KeptCopy<T>>,
}

impl<T: Copy> Default for KeptCopySlot<T> {
    fn default() -> Self {
        KeptCopySlot {
            live: false,
            kept: None,
        }
    }
}

impl<T: Copy> KeptCopySlot<T> {
    /// Keeps `ev`, whose kind is `wrap(*payload)`.
    #[inline]
    pub fn set(&mut self, ev: &Event, payload: &T, wrap: fn(T) -> EventKind) {
        match &mut self.kept {
            Some(k) => {
                k.ts = ev.ts;
                k.cpu = ev.cpu;
                k.pid = ev.pid;
                k.span = ev.span;
                k.payload = *payload;
                k.wrap = wrap;
            }
            None => self.kept = Some(KeptCopy::new(ev, *payload, wrap)),
        }
        self.live = true;
    }

    /// Empties the slot.
    #[inline]
    pub fn clear(&mut self) {
        self.live = false;
    }

    /// The kept event, if any.
    #[inline]
    pub fn get(&self) -> Option<&KeptCopy<T>> {
        self.kept.as_ref().filter(|_| self.live)
    }

    /// The kept event, if any, leaving the slot empty.
    #[inline]
    pub fn take(&mut self) -> Option<KeptCopy<T>> {
        let k = self.get().copied();
        self.live = false;
        k
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

/// Evidence entries for `events`, sorted by time, duplicates (same time and source)
/// removed; an event recorded with a stack gets it ([`Evidence::stack`]) and what it says
/// the event was ([`Evidence::site`]).
pub fn render(cx: &crate::Context<'_>, events: &[&Kept]) -> Vec<Evidence> {
    let mut v: Vec<&Kept> = events.to_vec();
    v.sort_by_key(|e| (e.ts, e.span.input(), span_key(e.span.pos())));
    v.dedup_by(|a, b| a.ts == b.ts && a.span == b.span);
    // the last wakeup each task issued, with where it issued it: a preemption of that task
    // right after it says so (the wakeup-preemption pattern)
    let mut last_waking: FxHashMap<Tid, (Ts, Tid, String)> = FxHashMap::default();
    v.into_iter()
        .map(|e| {
            let stack = cx
                .stacks
                .get(e.span)
                .map(|(c, pid)| cx.symbolizer.frames(c, pid))
                .unwrap_or_default();
            let mut site = (!stack.is_empty()).then(|| site(cx, e, &stack));
            match &e.kind {
                EventKind::Waking(w) | EventKind::Wakeup(w) if !stack.is_empty() => {
                    last_waking.insert(e.pid, (e.ts, w.task.pid, place(&stack)));
                }
                EventKind::Switch(s) if s.prev_state.is_runnable() => {
                    if let (Some(site), Some((ts, wakee, from))) =
                        (site.as_mut(), last_waking.get(&s.prev.pid))
                    {
                        let after = e.ts.saturating_sub(*ts);
                        if after <= WAKE_THEN_PREEMPT_NS {
                            site.push_str(&format!(
                                " {} after waking {} from {from}",
                                fmt_after(after),
                                who(cx, *wakee)
                            ));
                        }
                    }
                }
                _ => {}
            }
            Evidence {
                ts_ns: e.ts,
                source: source(cx.paths, e),
                text: e.dump_line(),
                stack,
                site,
            }
        })
        .collect()
}

/// A preemption this soon after the task woke another is said to follow that wakeup.
const WAKE_THEN_PREEMPT_NS: Ts = 1_000_000;

/// `3 µs`, `250 ns`, `1.2 ms`.
fn fmt_after(ns: Ts) -> String {
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{} µs", ns / 1_000)
    } else {
        format!("{}.{} ms", ns / 1_000_000, ns % 1_000_000 / 100_000)
    }
}

/// The first frames of a stack that are not tracing or scheduler mechanics, `a ← b ← c`.
fn place(stack: &[String]) -> String {
    let place: Vec<&str> = stack
        .iter()
        .map(String::as_str)
        .filter(|f| !crate::stacks::is_mechanism(f))
        .take(3)
        .collect();
    if place.is_empty() {
        stack.first().map_or("?".to_string(), Clone::clone)
    } else {
        place.join(" ← ")
    }
}

/// `comm (pid)`, or `pid N` for an unnamed task.
fn who(cx: &crate::Context<'_>, pid: Tid) -> String {
    let c = cx.comm(pid);
    if c.is_empty() {
        format!("pid {pid}")
    } else {
        format!("{} ({pid})", c.as_str())
    }
}

/// What an event's stack says it was: where a task switched out (blocked, slept or was
/// preempted), or where a waker woke its wakee, in the first frames that are not tracing
/// or scheduler mechanics.
fn site(cx: &crate::Context<'_>, e: &Kept, stack: &[String]) -> String {
    let place = place(stack);
    let who = |pid: Tid| who(cx, pid);
    match &e.kind {
        EventKind::Switch(s) => {
            let state = s.prev_state.to_string();
            let how = if s.prev_state.is_runnable() {
                "was preempted"
            } else if state.contains('D') {
                "blocked"
            } else {
                "went to sleep"
            };
            format!("{} {how} ({state}) in {place}", who(s.prev.pid))
        }
        EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => {
            format!("{} woke {} from {place}", who(e.pid), who(w.task.pid))
        }
        other => format!("{} {} in {place}", who(e.pid), other.name()),
    }
}

fn span_key(p: SpanPos) -> u64 {
    match p {
        SpanPos::Line(l) | SpanPos::Byte(l) => l,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{idle, t, Trace, MS};
    use stallscope_model::{BlockAction, FieldValue};

    #[test]
    fn a_preemption_right_after_a_wakeup_says_where_both_happened() {
        use crate::stacks::{StackTable, Symbolizer};
        const KERNEL: u64 = -128i64 as u64;
        let kallsyms = "ffff000000001000 T __cond_resched\nffff000000002000 T process_one_work\n\
ffff000000003000 T aio_complete_rw\nffff000000004000 T try_to_wake_up\nffff000000005000 T __schedule\n";
        let (kw, fio) = (t("kworker/0:1", 12, 120), t("fio", 77, 120));
        let mut tr = Trace::new();
        tr.sw(MS, 0, idle(), "R", kw)
            .wake(MS + 10_000, 0, 12, fio, 0)
            .sw(MS + 13_000, 0, kw, "R+", fio);
        let mut evs = tr.events.clone();
        evs[1].callchain = Some(
            vec![
                KERNEL,
                0xffff_0000_0000_4010,
                0xffff_0000_0000_3020,
                0xffff_0000_0000_2030,
            ]
            .into(),
        );
        evs[2].callchain = Some(
            vec![
                KERNEL,
                0xffff_0000_0000_5010,
                0xffff_0000_0000_1010,
                0xffff_0000_0000_2040,
            ]
            .into(),
        );
        let mut stacks = StackTable::default();
        let mut timeline = stallscope_timeline::Timeline::new(
            stallscope_timeline::WakeupSelector::preferring_waking(true),
        );
        for ev in &evs {
            stacks.record(ev);
            timeline.process(ev, &mut |_| {});
        }
        let symbolizer =
            Symbolizer::from_kallsyms(kallsyms, stallscope_model::SymbolAliases::LastListed);
        let paths = vec!["t.dat".to_string()];
        let cx = crate::Context {
            timeline: &timeline,
            paths: &paths,
            system: None,
            kallsyms: None,
            cmdlines: &[],
            stacks: &stacks,
            symbolizer: &symbolizer,
        };
        let kept: Vec<Kept> = evs.iter().map(keep).collect();
        let refs: Vec<&Kept> = kept.iter().collect();
        let ev = render(&cx, &refs);
        assert_eq!(
            ev[1].site.as_deref(),
            Some("kworker/0:1 (12) woke fio (77) from aio_complete_rw ← process_one_work")
        );
        assert_eq!(
            ev[2].site.as_deref(),
            Some("kworker/0:1 (12) was preempted (R+) in __cond_resched ← process_one_work 3 µs after waking fio (77) from aio_complete_rw ← process_one_work")
        );
        assert_eq!(
            ev[2].stack,
            ["__schedule", "__cond_resched", "process_one_work"]
        );
        assert!(ev[0].site.is_none() && ev[0].stack.is_empty());
    }

    #[test]
    fn kept_in_place_equals_a_fresh_copy() {
        let mut tr = Trace::new();
        let (a, b) = (t("a", 10, 120), t("b", 20, 100));
        let field = vec![("function".to_string(), FieldValue::UInt(7))];
        tr.sw(MS, 0, idle(), "R", a)
            .sw(2 * MS, 1, b, "D", a)
            .wake(3 * MS, 0, 10, b, 1)
            .generic(4 * MS, 1, 20, "workqueue_execute_start", field)
            .stat(5 * MS, 0, a, 99)
            .block(6 * MS, 1, 20, BlockAction::Complete)
            .migrate(7 * MS, 0, b, 1, 0)
            .sw(8 * MS, 0, a, "S", b);
        let mut evs = tr.events.clone();
        evs[1].callchain = Some(vec![1, 2, 3].into_boxed_slice());
        // every event kept over every other (same variant and variant changes)
        for first in &evs {
            for ev in &evs {
                let mut k = keep(first);
                keep_into(&mut k, ev);
                assert_eq!(k, keep(ev));
                assert!(k.callchain.is_none());
            }
        }
        // plain-data copies of the scheduler kinds
        for ev in &evs {
            let copy = match &ev.kind {
                EventKind::Switch(s) => KeptCopy::new(ev, *s, EventKind::Switch).kept(),
                EventKind::Waking(w) => KeptCopy::new(ev, *w, EventKind::Waking).kept(),
                EventKind::Wakeup(w) => KeptCopy::new(ev, *w, EventKind::Wakeup).kept(),
                EventKind::Migrate(m) => KeptCopy::new(ev, *m, EventKind::Migrate).kept(),
                _ => continue,
            };
            assert_eq!(copy, keep(ev));
        }
        let mut slot = KeptCopySlot::default();
        assert!(slot.get().is_none());
        for ev in &evs {
            if let EventKind::Switch(s) = &ev.kind {
                slot.set(ev, s, EventKind::Switch);
                assert_eq!(slot.get().map(KeptCopy::kept), Some(keep(ev)));
            }
        }
        slot.clear();
        assert!(slot.get().is_none());
        if let EventKind::Switch(s) = &evs[1].kind {
            slot.set(&evs[1], s, EventKind::Switch);
        }
        assert_eq!(slot.take().map(|k| k.kept()), Some(keep(&evs[1])));
        assert!(slot.get().is_none());
    }
}
