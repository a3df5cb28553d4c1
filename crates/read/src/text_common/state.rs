//! [`TextState`]: what every text reader keeps besides its line source — metadata, data
//! quality, the small queue of events ready to hand out, and the bookkeeping shared by the
//! three dialects (lost-event markers, declared event names, per-line problems).
//!
//! Lost-event markers (`CPU:N [LOST M EVENTS]`, `CPU:N [M EVENTS DROPPED]`) carry no
//! timestamp. They are printed just before the first event after the gap, so the
//! [`EventKind::Lost`] event takes the timestamp of the next event line (or of the last one
//! seen, at the end of the input).

use std::collections::VecDeque;

use rustc_hash::FxHashSet;
use stallscope_model::{
    DataQuality, Event, EventKind, InputFormat, Problem, Span, SpanPos, TraceMeta, Ts,
};

use super::lines::Line;
use crate::tracefs_format::PrevStateTable;
use crate::Input;

/// Longest line text kept in an example.
const EXAMPLE_LEN: usize = 200;

/// Shared reader state (everything except the line source, so both can be borrowed at once).
pub(crate) struct TextState {
    /// Path as given.
    pub path: String,
    /// Input index for spans.
    pub index: u16,
    /// Metadata learned so far.
    pub meta: TraceMeta,
    /// Problems met so far.
    pub dq: DataQuality,
    /// Events ready to be returned, in order.
    pub out: VecDeque<Event>,
    /// Timestamp of the last event line.
    pub last_ts: Ts,
    /// Decodes numeric and trace-cmd plugin `prev_state`s (kernel-release fallback table).
    pub prev_states: PrevStateTable,
    /// How the `prev_state` table was chosen when no header named the kernel release and
    /// the text has numeric values (shown as a data-quality note at the end).
    prev_state_assumed: Option<String>,
    /// Number of the last line when it had no final newline.
    unterminated_line: Option<u64>,
    /// Lost-event markers waiting for the next event's timestamp: (cpu, count, line).
    pending_lost: Vec<(u32, Option<u64>, u64)>,
    /// Names already added to `meta.declared_events`.
    declared: FxHashSet<String>,
    /// Bitmask of natively modeled kinds already declared (avoids hashing per event).
    declared_native: u16,
    /// System prefix used when declaring native events (`sched` for perf, none otherwise).
    native_system: Option<&'static str>,
    /// Frequent per-event notes: added once with an example, the rest at the end.
    deferred: Vec<DeferredNote>,
    /// Tasks whose process id is already in `meta.task_tgids`.
    tgid_known: FxHashSet<i32>,
}

/// A per-event data-quality note whose count is kept here and flushed at the end (adding to
/// [`DataQuality`] per event would allocate its key each time).
struct DeferredNote {
    problem: Problem,
    /// Occurrences seen.
    seen: u64,
    /// Occurrences already added to the registry.
    added: u64,
}

impl TextState {
    /// State for `input` read as `format`.
    pub fn new(
        input: &Input,
        format: InputFormat,
        index: u16,
        native_system: Option<&'static str>,
    ) -> TextState {
        let meta = TraceMeta {
            path: input.path.clone(),
            format: Some(format),
            compression: input.compression.map(str::to_string),
            clock_is_ns: true,
            ..TraceMeta::default()
        };
        // Numeric prev_state values (`trace-cmd report -R`) need the kernel's encoding; a
        // header naming the release replaces this guess (set_kernel_release).
        let values = super::prev_state::raw_values_in(&input.head, 10_000);
        let (prev_states, prev_state_assumed) = if values.is_empty() {
            (PrevStateTable::for_kernel_release(None), None)
        } else {
            // the head fits the 4.14+ table: an older kernel may still tell itself later in
            // the file (the first preempted task thousands of lines in)
            let guess = super::prev_state::guess_old_encoding(&values)
                .or_else(|| super::prev_state::guess_old_encoding_in_file(&input.path));
            match guess {
                Some((enc, why)) => (
                    PrevStateTable::for_encoding(enc, why.clone()),
                    Some(why),
                ),
                None => (
                    PrevStateTable::for_kernel_release(None),
                    Some("the 4.14+ table (S D T t X Z P I = 0x1…0x80, + = 0x100 or 0x1000): every value fits it; on an older kernel 16/32/64/128 would be Z/X/x/K instead of X/Z/P/I".to_string()),
                ),
            }
        };
        TextState {
            path: input.path.clone(),
            index,
            meta,
            dq: DataQuality::default(),
            out: VecDeque::with_capacity(4),
            last_ts: 0,
            prev_states,
            prev_state_assumed,
            unterminated_line: None,
            pending_lost: Vec::new(),
            declared: FxHashSet::default(),
            declared_native: 0,
            native_system,
            deferred: Vec::new(),
            tgid_known: FxHashSet::default(),
        }
    }

    /// `path:line: text` (text shortened) for examples.
    pub fn example(&self, line: &Line<'_>) -> String {
        let text = String::from_utf8_lossy(line.text);
        let mut cut = text.len().min(EXAMPLE_LEN);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}:{}: {}", self.path, line.number, &text[..cut])
    }

    /// Adds `n` occurrences of `problem` with this line as example.
    pub fn note(&mut self, problem: Problem, n: u64, line: &Line<'_>) {
        let ex = self.example(line);
        self.dq.add(problem, n, || ex);
    }

    /// Counts per-line byte problems. Returns false for a last line without its newline:
    /// tools always end their output with one, so such a line was cut off (a file copied
    /// while being written, a truncated download); it is counted and not used, because a cut
    /// `next_prio=12` would otherwise parse as a wrong value.
    pub fn check_line(&mut self, line: &Line<'_>) -> bool {
        if line.lossy {
            self.note(Problem::NonUtf8Lines, 1, line);
        }
        if line.unterminated {
            // The last line has no newline: a file cut mid-line, or an editor or tool that
            // wrote none. It is used when it parses ([`TextState::unparsed`] says when not);
            // `finish` notes it either way.
            self.unterminated_line = Some(line.number);
        }
        true
    }

    /// The note of a last line that was cut.
    pub(crate) fn note_truncated(&mut self, line: &Line<'_>) {
        self.note(Problem::TruncatedLastLine, 1, line);
    }

    /// The last line had no newline and gave the events from `from` on in `out`: an event
    /// of no known kind without any field, or a function-tracer line, shows the line was cut
    /// (the event name itself cut), and its events are dropped with the truncation note.
    pub fn drop_cut_events(&mut self, from: usize, line: &Line<'_>) {
        // (a cut event name also reads as a function-tracer line, `… 327.264290: sched_mig`)
        let cut = self.out.iter().skip(from).any(|e| {
            matches!(&e.kind, stallscope_model::EventKind::Generic(g)
                if g.fields.is_empty() || g.name == "function")
        });
        if cut {
            self.out.truncate(from);
            self.note(Problem::TruncatedLastLine, 1, line);
        }
    }

    /// A line that could not be parsed.
    pub fn unparsed(&mut self, line: &Line<'_>) {
        if line.unterminated {
            self.note(Problem::TruncatedLastLine, 1, line);
            return;
        }
        self.note(Problem::UnparsedLines, 1, line);
    }

    /// A frequent per-event note: the first occurrence is recorded with its example now,
    /// later ones are added up by [`TextState::finish`].
    pub fn note_deferred(&mut self, problem: Problem, line: &Line<'_>) {
        if let Some(d) = self.deferred.iter_mut().find(|d| d.problem == problem) {
            d.seen += 1;
            return;
        }
        self.note(problem, 1, line);
        self.deferred.push(DeferredNote {
            problem,
            seen: 1,
            added: 1,
        });
    }

    /// A lost-events marker for `cpu` (count when known).
    pub fn lost_marker(&mut self, cpu: u32, count: Option<u64>, line: &Line<'_>) {
        match count {
            Some(n) => self.note(Problem::LostEvents, n, line),
            None => self.note(Problem::LostEventsUnknownCount, 1, line),
        }
        self.pending_lost.push((cpu, count, line.number));
    }

    /// Span of line `number`.
    pub fn span(&self, number: u64) -> Span {
        Span::new(self.index, SpanPos::Line(number))
    }

    /// Notes that the text names `tgid` as the process of task `tid` (first time only).
    #[inline]
    pub fn note_tgid(&mut self, tid: i32, tgid: Option<i32>) {
        if let Some(g) = tgid {
            if tid > 0 && self.tgid_known.insert(tid) {
                self.meta.task_tgids.push((tid, g));
            }
        }
    }

    /// Queues `ev` (after any pending lost-event markers, which take its timestamp).
    pub fn push(&mut self, ev: Event) {
        self.flush_lost(ev.ts);
        self.last_ts = ev.ts;
        self.declare(&ev.kind);
        self.out.push_back(ev);
    }

    fn flush_lost(&mut self, ts: Ts) {
        for (cpu, count, number) in std::mem::take(&mut self.pending_lost) {
            let span = self.span(number);
            self.out.push_back(Event {
                ts,
                cpu,
                pid: -1,
                span,
                kind: EventKind::Lost { count },
                callchain: None,
            });
        }
    }

    fn declare(&mut self, kind: &EventKind) {
        let bit = match kind {
            EventKind::Switch(_) => 1,
            EventKind::Waking(_) => 2,
            EventKind::Wakeup(_) => 3,
            EventKind::WakeupNew(_) => 4,
            EventKind::Migrate(_) => 5,
            EventKind::Fork { .. } => 6,
            EventKind::Exit(_) => 7,
            EventKind::Exec { .. } => 8,
            EventKind::StatRuntime(_) => 9,
            EventKind::Lost { .. } | EventKind::TaskComm { .. } | EventKind::Mapping(_) => return,
            EventKind::Block(_) | EventKind::Generic(_) => {
                let full = match kind {
                    EventKind::Generic(g) => match &g.system {
                        Some(s) => format!("{s}:{}", g.name),
                        None => g.name.clone(),
                    },
                    other => format!("block:{}", other.name()),
                };
                if !self.declared.contains(&full) {
                    self.declared.insert(full.clone());
                    self.meta.declared_events.push(full);
                }
                return;
            }
        };
        if self.declared_native & (1 << bit) == 0 {
            self.declared_native |= 1 << bit;
            let name = match self.native_system {
                Some(s) => format!("{s}:{}", kind.name()),
                None => kind.name().to_string(),
            };
            self.declared.insert(name.clone());
            self.meta.declared_events.push(name);
        }
    }

    /// A header named the kernel release: record it and pick its `prev_state` table.
    pub fn set_kernel_release(&mut self, release: String) {
        self.prev_states = PrevStateTable::for_kernel_release(Some(&release));
        self.prev_state_assumed = None;
        self.meta.kernel_release = Some(release);
    }

    /// Adds a declared event name (from a header) unless already known.
    pub fn declare_name(&mut self, name: String) {
        if self.declared.insert(name.clone()) {
            self.meta.declared_events.push(name);
        }
    }

    /// End of input: flushes pending lost markers and deferred counts.
    pub fn finish(&mut self) {
        self.flush_lost(self.last_ts);
        if let Some(n) = self.unterminated_line.take() {
            if self.dq.count(Problem::TruncatedLastLine) == 0 {
                let path = &self.path;
                self.dq
                    .add(Problem::NoFinalNewline, 1, || format!("{path}:{n}"));
            }
        }
        if let Some(why) = self.prev_state_assumed.take() {
            self.dq.add(Problem::PrevStateTableAssumed, 1, || why);
        }
        for d in &mut self.deferred {
            if d.seen > d.added {
                let more = d.seen - d.added;
                let path = &self.path;
                self.dq.add(d.problem, more, || {
                    format!("{path}: {more} more like the first example")
                });
                d.added = d.seen;
            }
        }
    }
}
