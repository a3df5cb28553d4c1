//! Gathers [`FindingWindows`]: the scheduling activity (run slices per CPU, runnable waits,
//! the tasks' state tracks, wakeups, migrations, block requests, `trace_marker` text) in a
//! margin around each finding, plus log2 histograms of the runnable waits of the tasks the
//! findings name — as a view of the analysis' one model, from its one reading.
//!
//! Findings are only known after the analysis, so while it reads its inputs [`WindowSpill`]
//! (a product of that reading, [`crate::analyze::SameReading`]) keeps on disk what the
//! model made of them: each state the model closed (a run, a runnable wait, a sleep, an
//! unknown stretch — the [`Transition`] that ended it), each wakeup that woke a task, each
//! migration, `trace_marker` text and each completed block request. They go to an unlinked
//! temporary file in chunks of [`CHUNK_ITEMS`] that name their time span; at the end of
//! the reading the spill keeps the states still open and the tasks' names. Once the
//! findings are known, [`WindowSpill::windows`] draws them: no state machine runs again,
//! a chunk no window overlaps is only scanned for the histograms, and memory stays bounded
//! by what is drawn.
//!
//! So every drawn run is one of the model's runs (`perf sched timehist`'s row of its
//! switch-out: `model_intervals` tests that on every fixture), clipped to the window; the
//! task still running when a window ends is drawn from its switch-in to the window's end.
//! A run whose start or end the trace does not show (a dropped switch record, which the
//! model repairs) is not drawn — its task's track shows that stretch as unknown — except a
//! run switched out by a CPU's first switch, running since before the trace: drawn from the
//! CPU's first event, marked `before_trace`. A wait from a task's wakeup or preemption to its switch-in is drawn on
//! the CPU it ran on (so it is timehist's sch delay of that run); a task the model holds
//! runnable at a window's end is drawn waiting on the CPU it waits for, with `open: true`;
//! a wait the model ends otherwise (a repair after a dropped record) is not drawn. A wakeup
//! is drawn when it woke its task (the model's one wakeup rule: a `sched_wakeup` record
//! after a counted `sched_waking`, or of a task already runnable, changes nothing and is
//! not drawn). Items of each kind stop at [`WindowOptions::max_items`] per window (the rest
//! is counted in `omitted`; the run density still counts every run).
//!
//! Block inputs: a request runs from `block_rq_issue` to the `block_rq_complete` of the same
//! device and sector (at most [`MAX_PENDING_REQUESTS`] pending; beyond, issues are counted in
//! [`FindingWindows::note`] and not drawn).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufWriter, Write};

use rustc_hash::{FxHashMap as HashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use stallscope_detect::engine::Run;
use stallscope_model::{
    BlockRequest, Comm, Cpu, Event, EventKind, Finding, FindingWindow, FindingWindows,
    MigrationMark, RunSlice, RunnableWait, TaskStateSpan, TextMark, Tid, Ts, WaitHistogram,
    WakeupMark, WindowTask,
};
use stallscope_timeline::{RunnableCause, TaskState, Timeline, Transition};

use crate::Inputs;

/// Block requests waiting for their completion that the spill remembers.
pub const MAX_PENDING_REQUESTS: usize = 65536;

/// Items in one chunk of the spill (the unit the drawing skips when no window overlaps it).
pub const CHUNK_ITEMS: usize = 4096;

/// Bounds of the windows.
#[derive(Clone, Copy, Debug)]
pub struct WindowOptions {
    /// Margin on each side of a finding's window.
    pub margin_ns: u64,
    /// Items of each kind kept per window.
    pub max_items: usize,
    /// Findings that get a window (the first ones: findings are sorted most severe first).
    pub max_windows: usize,
    /// Tasks that get a wait histogram.
    pub max_histograms: usize,
}

impl Default for WindowOptions {
    fn default() -> Self {
        WindowOptions {
            margin_ns: 50_000_000,
            max_items: 4000,
            max_windows: 100,
            max_histograms: 32,
        }
    }
}

/// A task state as a window draws it (the model's [`TaskState`] without its start).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Was {
    Unknown,
    Running(Cpu),
    /// Waiting for this CPU (when known).
    Runnable(Option<Cpu>),
    Sleeping,
    Blocked,
    Dead,
}

impl Was {
    /// The drawn state of `s` and its start (`None` for unknown).
    fn of(s: TaskState) -> (Was, Option<Ts>) {
        match s {
            TaskState::Unknown => (Was::Unknown, None),
            TaskState::Running { cpu, since, .. } => (Was::Running(cpu), Some(since)),
            TaskState::Runnable { since, cpu, .. } => (Was::Runnable(cpu), Some(since)),
            TaskState::Sleeping { since } => (Was::Sleeping, Some(since)),
            TaskState::Blocked { since } => (Was::Blocked, Some(since)),
            TaskState::Dead { since } => (Was::Dead, Some(since)),
        }
    }

    /// A track's name for the state, and its CPU when running.
    fn track(self) -> (&'static str, Option<Cpu>) {
        match self {
            Was::Unknown => ("unknown", None),
            Was::Running(cpu) => ("running", Some(cpu)),
            Was::Runnable(_) => ("runnable", None),
            Was::Sleeping => ("sleeping", None),
            Was::Blocked => ("blocked", None),
            Was::Dead => ("dead", None),
        }
    }
}

/// One kept item. It is written after its time as `dt`: the nanoseconds after the chunk's
/// previous item (the first one's: after the chunk's base), so that times take a byte or two.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum Item {
    /// The model ended `tid`'s state `was` at this time; it had lasted `len` ns (`None`:
    /// unknown since when); `ran_on`: the state it ended in was running there; `repaired`:
    /// a repair ended it (a record contradicted it — for a run: anything but its switch-out
    /// on its CPU —, so when it really ended is not known), or, for a run, began it (its
    /// switch-in is not in the trace: the model's repair rule placed its start) — and a wait
    /// that such a run ended.
    Closed {
        tid: Tid,
        was: Was,
        len: Option<u64>,
        ran_on: Option<Cpu>,
        repaired: bool,
    },
    /// `tid` was switched out on `cpu`, the CPU's first switch, without the trace showing
    /// its switch-in: it ran for at least `len` ns before.
    BeforeTrace { tid: Tid, cpu: Cpu, len: u64 },
    /// A wakeup that woke `wakee` (recorded on `cpu`, in `waker`'s context).
    Wakeup {
        cpu: Cpu,
        waker: Tid,
        wakee: Tid,
        target: Option<Cpu>,
    },
    /// `sched_migrate_task`.
    Migration { pid: Tid, from: Cpu, to: Cpu },
    /// `trace_marker` text (ftrace `print` / `bprint`; boxed, as the request: rare items
    /// keep the common ones small).
    Marker { mark: Box<TextMark> },
    /// A block request completed now, issued `len` ns before.
    Request {
        len: u64,
        request: Box<PendingRequest>,
    },
}

/// A `block_rq_issue` (waiting for its completion, or completed).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct PendingRequest {
    dev: u64,
    sector: u64,
    nr_sector: u64,
    rwbs: String,
    cpu: Cpu,
    /// Issue time.
    ts: Ts,
}

/// A `postcard` output that appends to a buffer byte by byte: postcard's own outputs copy
/// each varint with a call to `memmove`, which cost a tenth of `analyze --html`.
struct Bytewise<'a>(&'a mut Vec<u8>);

impl postcard::ser_flavors::Flavor for Bytewise<'_> {
    type Output = ();

    #[inline]
    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        for &b in data {
            self.0.push(b);
        }
        Ok(())
    }

    #[inline]
    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// A chunk's header: the time the items' `dt`s start from, the earliest start of anything
/// an item closes, and the latest item time.
#[derive(Clone, Copy, Debug)]
struct ChunkHead {
    base: Ts,
    min_start: Ts,
    max_ts: Ts,
}

/// Bytes of a chunk frame before its items: the items' length (u32), then the head.
const HEAD_BYTES: usize = 4 + 3 * 8;

/// What the spill knows once the reading ended.
#[derive(Default)]
struct AtEnd {
    /// Tasks' states still open (not unknown), by task.
    open: Vec<(Tid, Was, Ts)>,
    /// Tasks' names (the model's: side-band names first, else the payloads' latest).
    names: HashMap<Tid, Comm>,
    /// Block requests still waiting for their completion.
    requests: Vec<PendingRequest>,
}

/// What the model made of the analysis' reading, kept for the windows: see the module
/// documentation.
pub struct WindowSpill {
    file: Option<BufWriter<std::fs::File>>,
    /// The chunk being filled: its head, its latest item time, its frame (the items
    /// encoded after room for the head) and how many it holds.
    head: Option<ChunkHead>,
    last: Ts,
    frame: Vec<u8>,
    items: usize,
    /// The first write error (the windows then say so instead of being drawn).
    error: Option<String>,
    opened: bool,
    /// The trace's first analyzed event, and each CPU's.
    first_ts: Option<Ts>,
    cpu_first: Vec<Option<Ts>>,
    /// Per CPU: a switch was seen there.
    cpu_switched: Vec<bool>,
    /// Per task, the end of its latest before-the-trace run (a task runs on one CPU at a
    /// time: another CPU's before-the-trace run of it starts after that).
    before_trace_end: HashMap<Tid, Ts>,
    /// Issued block requests by (device, sector), and issues not remembered because
    /// [`MAX_PENDING_REQUESTS`] were pending.
    requests: HashMap<(u64, u64), PendingRequest>,
    requests_dropped: u64,
    end: AtEnd,
}

impl WindowSpill {
    /// A spill in a new temporary file (in `$TMPDIR`).
    pub fn new() -> std::io::Result<WindowSpill> {
        Ok(WindowSpill {
            file: Some(BufWriter::with_capacity(1 << 20, tempfile::tempfile()?)),
            head: None,
            last: 0,
            frame: Vec::new(),
            items: 0,
            error: None,
            opened: false,
            first_ts: None,
            cpu_first: Vec::new(),
            cpu_switched: Vec::new(),
            before_trace_end: HashMap::default(),
            requests: HashMap::default(),
            requests_dropped: 0,
            end: AtEnd::default(),
        })
    }

    /// Whether the analysis opened the inputs as traces (CPU-profile text alone is not).
    pub fn opened(&self) -> bool {
        self.opened
    }

    /// Keeps what the model made of `events` (analyzed events, in time order) as
    /// `transitions` (each with the index of the event that caused it, in order; quiet
    /// ones included).
    pub fn on_model(&mut self, events: &[Event], transitions: &[(u32, Transition)]) {
        let mut next = 0;
        for (k, ev) in events.iter().enumerate() {
            let c = ev.cpu as usize;
            if !ev.kind.is_side_band() {
                self.first_ts.get_or_insert(ev.ts);
                if c >= self.cpu_first.len() {
                    self.cpu_first.resize(c + 1, None);
                    self.cpu_switched.resize(c + 1, false);
                }
                self.cpu_first[c].get_or_insert(ev.ts);
            }
            while let Some(&(at, t)) = transitions.get(next) {
                if at as usize != k {
                    break;
                }
                next += 1;
                self.transition(ev, t);
            }
            match &ev.kind {
                EventKind::Switch(_) => {
                    if let Some(s) = self.cpu_switched.get_mut(c) {
                        *s = true;
                    }
                }
                EventKind::Generic(g)
                    if g.system.as_deref() == Some("ftrace")
                        && matches!(g.name.as_str(), "print" | "bprint") =>
                {
                    let text = g.fields.iter().find_map(|(k, v)| match (k.as_str(), v) {
                        ("buf", stallscope_model::FieldValue::Str(s)) => Some(s),
                        _ => None,
                    });
                    if let Some(text) = text {
                        let mark = TextMark {
                            ts_ns: 0, // the item's time
                            cpu: ev.cpu,
                            pid: ev.pid,
                            event: g.name.clone(),
                            text: text.chars().take(TextMark::MAX_CHARS).collect(),
                        };
                        let item = Item::Marker {
                            mark: Box::new(mark),
                        };
                        self.push(ev.ts, ev.ts, item);
                    }
                }
                EventKind::Block(b) => match (b.action, b.dev) {
                    (stallscope_model::BlockAction::Issue, Some(dev)) => {
                        let key = (u64::from(dev.0), b.sector);
                        if self.requests.len() < MAX_PENDING_REQUESTS
                            || self.requests.contains_key(&key)
                        {
                            let r = PendingRequest {
                                dev: key.0,
                                sector: key.1,
                                nr_sector: u64::from(b.nr_sector),
                                rwbs: b.rwbs.to_letters(),
                                cpu: ev.cpu,
                                ts: ev.ts,
                            };
                            self.requests.insert(key, r);
                        } else {
                            self.requests_dropped += 1;
                        }
                    }
                    (stallscope_model::BlockAction::Complete, Some(dev)) => {
                        if let Some(r) = self.requests.remove(&(u64::from(dev.0), b.sector)) {
                            let (start, len) = (r.ts, ev.ts.saturating_sub(r.ts));
                            let item = Item::Request {
                                len,
                                request: Box::new(r),
                            };
                            self.push(ev.ts, start, item);
                        }
                    }
                    _ => {}
                },
                _ => {}
            }
        }
    }

    /// Keeps what one transition of `ev` closed or drew.
    fn transition(&mut self, ev: &Event, t: Transition) {
        match t {
            Transition::State { ts, tid, from, to } => {
                let (was, since) = Was::of(from);
                if let EventKind::Switch(sw) = &ev.kind {
                    let first_switch = !self
                        .cpu_switched
                        .get(ev.cpu as usize)
                        .copied()
                        .unwrap_or(false);
                    if tid == sw.prev.pid && tid != 0 && first_switch && was != Was::Running(ev.cpu)
                    {
                        self.before_trace(ev, tid);
                    }
                }
                let ran_on = match to {
                    TaskState::Running { cpu, .. } => Some(cpu),
                    _ => None,
                };
                let item = Item::Closed {
                    tid,
                    was,
                    len: since.map(|s| ts.saturating_sub(s)),
                    ran_on,
                    repaired: match (was, &ev.kind) {
                        // a run ends in its own switch-out on its CPU, nothing else, and
                        // starts in a switch-in the trace shows
                        _ if matches!(from, TaskState::Running { repaired: true, .. }) => true,
                        (Was::Running(cpu), EventKind::Switch(sw)) => {
                            cpu != ev.cpu || sw.prev.pid != tid
                        }
                        (Was::Running(_), _) => true,
                        // a wait the repair rule ended (the switch-in is not in the trace)
                        _ => matches!(
                            to,
                            TaskState::Unknown | TaskState::Running { repaired: true, .. }
                        ),
                    },
                };
                self.push(ts, since.unwrap_or(ts), item);
                let woke = matches!(
                    to,
                    TaskState::Runnable {
                        cause: RunnableCause::Wakeup,
                        ..
                    }
                );
                if let (
                    true,
                    EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w),
                ) = (woke, &ev.kind)
                {
                    if w.task.pid == tid {
                        let item = Item::Wakeup {
                            cpu: ev.cpu,
                            waker: ev.pid,
                            wakee: tid,
                            target: w.target_cpu,
                        };
                        self.push(ts, ts, item);
                    }
                }
            }
            Transition::Migrated {
                ts,
                tid,
                from_cpu,
                to_cpu,
            } => {
                let item = Item::Migration {
                    pid: tid,
                    from: from_cpu,
                    to: to_cpu,
                };
                self.push(ts, ts, item);
            }
            Transition::Forked { .. } | Transition::Exited { .. } => {}
        }
    }

    /// `tid`, switched out by `ev` on its CPU's first switch, ran there since before the
    /// trace showed it: from the CPU's first event (and after its before-the-trace run on
    /// another CPU).
    fn before_trace(&mut self, ev: &Event, tid: Tid) {
        let first = self.first_ts.unwrap_or(ev.ts);
        let since = self
            .cpu_first
            .get(ev.cpu as usize)
            .copied()
            .flatten()
            .unwrap_or(ev.ts)
            .max(first)
            .max(self.before_trace_end.get(&tid).copied().unwrap_or(0));
        if since < ev.ts {
            self.before_trace_end.insert(tid, ev.ts);
            let item = Item::BeforeTrace {
                tid,
                cpu: ev.cpu,
                len: ev.ts - since,
            };
            self.push(ev.ts, since, item);
        }
    }

    /// Adds `item` (after its `dt`) at `ts`, closing something that began at `start`:
    /// encoded into the chunk being filled at once.
    fn push(&mut self, ts: Ts, start: Ts, item: Item) {
        if self.file.is_none() {
            return;
        }
        let head = self.head.get_or_insert(ChunkHead {
            base: ts,
            min_start: start,
            max_ts: ts,
        });
        if self.items == 0 {
            self.last = head.base;
            self.frame.clear();
            self.frame.resize(HEAD_BYTES, 0);
        }
        head.min_start = head.min_start.min(start);
        head.max_ts = head.max_ts.max(ts);
        let dt = ts.wrapping_sub(self.last) as i64;
        self.last = ts;
        if let Err(e) = postcard::serialize_with_flavor(&(dt, &item), Bytewise(&mut self.frame)) {
            return self.fail(e.to_string());
        }
        self.items += 1;
        if self.items >= CHUNK_ITEMS {
            self.flush();
        }
    }

    /// Ends the spill on its first error (kept for [`WindowSpill::windows`]).
    fn fail(&mut self, e: String) {
        self.error = Some(format!("keeping the model for the windows: {e}"));
        self.file = None;
    }

    /// Writes the chunk being filled as one frame.
    fn flush(&mut self) {
        let (Some(head), Some(file)) = (self.head.take(), self.file.as_mut()) else {
            return;
        };
        self.items = 0;
        let frame = &mut self.frame;
        let Ok(len) = u32::try_from(frame.len() - HEAD_BYTES) else {
            return self.fail("a chunk over 4 GiB".to_string());
        };
        frame[..4].copy_from_slice(&len.to_le_bytes());
        frame[4..12].copy_from_slice(&head.base.to_le_bytes());
        frame[12..20].copy_from_slice(&head.min_start.to_le_bytes());
        frame[20..28].copy_from_slice(&head.max_ts.to_le_bytes());
        if let Err(e) = file.write_all(frame) {
            self.fail(e.to_string());
        }
    }

    /// The model after the last event: the states still open, the tasks' names.
    pub fn on_end(&mut self, timeline: &Timeline) {
        self.flush();
        let tasks = timeline.tasks();
        for s in tasks.slots() {
            // a slot whose tid was reused keeps the old task's record: the live one counts
            if tasks.find(s.tid).map(|i| tasks.get(i).tid) != Some(s.tid) {
                continue;
            }
            self.end.names.insert(s.tid, s.comm);
            if let (was, Some(since)) = Was::of(s.data) {
                self.end.open.push((s.tid, was, since));
            }
        }
        self.end
            .open
            .sort_unstable_by_key(|&(tid, _, since)| (since, tid));
        let mut open: Vec<PendingRequest> = self.requests.drain().map(|(_, r)| r).collect();
        open.sort_by_key(|r| (r.ts, r.dev, r.sector));
        self.end.requests = open;
    }

    /// Draws the windows of `findings` from what was kept.
    pub fn windows(
        self,
        findings: &[Finding],
        opts: WindowOptions,
    ) -> Result<FindingWindows, String> {
        self.drawn(findings, opts).map(|(w, _)| w)
    }

    /// [`WindowSpill::windows`], and how many chunks were read to draw them.
    fn drawn(
        mut self,
        findings: &[Finding],
        opts: WindowOptions,
    ) -> Result<(FindingWindows, usize), String> {
        self.flush(); // (done at the end of the reading; not when it stopped early)
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let Some(file) = self.file.take() else {
            return Err("no spill file".to_string());
        };
        let file = file.into_inner().map_err(|e| e.error().to_string())?;
        // the windows in two halves, drawn on two threads (the histograms with the first):
        // each reads the chunks its windows overlap
        let (first, second) = Drawing::new(findings, opts, self.first_ts.unwrap_or(0)).split();
        let (first, second) = std::thread::scope(|s| {
            let second = s.spawn(|| second.draw_from(&file));
            (first.draw_from(&file), second.join())
        });
        let (mut d, read) = first?;
        let (second, read_second) =
            second.map_err(|_| "the second drawing thread failed".to_string())??;
        d.windows.extend(second.windows);
        Ok((
            d.finish(self.end, self.requests_dropped),
            read.max(read_second),
        ))
    }
}

impl crate::analyze::SameReading for WindowSpill {
    fn open(&mut self, _inputs: &Inputs) {
        self.opened = true;
    }

    fn events(&mut self, _run: &[Event]) {}

    fn wants_model(&self) -> bool {
        true
    }

    fn model(&mut self, run: &Run<'_>) {
        self.on_model(run.events, run.transitions);
    }

    fn end(&mut self, timeline: &Timeline) {
        self.on_end(timeline);
    }
}

/// One window being drawn.
struct Building {
    w: FindingWindow,
    /// Tasks and CPUs of the items drawn and the finding's own (hashed: inserted per item;
    /// sorted at the end).
    pids: FxHashSet<Tid>,
    cpus: FxHashSet<Cpu>,
    /// The finding's own tasks (their states get a track; a handful: scanned), each with
    /// the index of its latest span in `w.task_states` (for merging and for where an
    /// unknown stretch starts).
    tracks: Vec<(Tid, Option<usize>)>,
    /// Per task of `tracks` (same index), its longest wait in the window: drawn whatever
    /// the cap ([`RunnableWait::subject`]).
    longest: Vec<Option<RunnableWait>>,
    /// Busy ns per CPU per density bin (see [`DENSITY_BINS`]).
    /// (By CPU number; empty for a CPU without runs.)
    busy: Vec<Vec<u64>>,
    /// Where tracks start: the window's start, or the trace's first event when the margin
    /// reaches before it.
    track_start: Ts,
}

/// Spans of a named task's state track, at most about twice this, before the page's size
/// bound coarsens them further ([`Building::push_state`]).
pub const STATE_SPANS_PER_TASK: usize = 1000;

/// Bins of a window's per-CPU density ([`stallscope_model::CpuDensity`]).
pub const DENSITY_BINS: u64 = 200;

/// Pushes `item` unless `v` holds `max` (then counts it in `omitted`); true when pushed.
fn push_capped<T>(v: &mut Vec<T>, omitted: &mut u64, max: usize, item: T) -> bool {
    if v.len() < max {
        v.push(item);
        true
    } else {
        *omitted += 1;
        false
    }
}

impl Building {
    /// Adds a named task's state span. Spans shorter than the window's resolution (its
    /// length / [`STATE_SPANS_PER_TASK`]) that follow an equally short span of the task
    /// merge with it ([`TaskStateSpan::absorb`]: a `mixed` span, counted in
    /// `omitted.task_states`), so a task that switches a million times still tiles its
    /// track with a few thousand spans: summarized at this zoom, never dropped.
    fn push_state(
        &mut self,
        k: usize,
        (state, cpu): (&'static str, Option<Cpu>),
        (start, end): (Ts, Ts),
    ) {
        let resolution = (self.w.end_ns - self.w.start_ns) / STATE_SPANS_PER_TASK as u64;
        let (pid, last) = self.tracks[k];
        if let Some(last) = last.and_then(|i| self.w.task_states.get_mut(i)) {
            if last.absorb_parts((pid, state, cpu), (start, end), resolution) {
                self.w.omitted.task_states += 1;
                return;
            }
        }
        self.tracks[k].1 = Some(self.w.task_states.len());
        self.w.task_states.push(TaskStateSpan {
            pid,
            state: state.to_string(),
            cpu,
            start_ns: start,
            end_ns: end,
        });
    }

    /// Draws the named task `tid` in state `was` over `[start, end)` (clipped to the
    /// window; `None`: since the end of its track, or `track_start`).
    fn track(&mut self, tid: Tid, was: Was, start: Option<Ts>, end: Ts) {
        let Some(k) = self.tracks.iter().position(|t| t.0 == tid) else {
            return;
        };
        let end = end.min(self.w.end_ns);
        let start = match start {
            Some(s) => s.max(self.track_start),
            None => self.tracks[k]
                .1
                .and_then(|i| self.w.task_states.get(i))
                .map_or(self.track_start, |s| s.end_ns),
        };
        if start >= end {
            return;
        }
        self.push_state(k, was.track(), (start, end));
    }

    /// Width of a density bin.
    fn bin_ns(&self) -> u64 {
        (self.w.end_ns - self.w.start_ns)
            .div_ceil(DENSITY_BINS)
            .max(1)
    }

    /// Adds the run `[a, b)` on `cpu` (clipped to the window) to the density bins.
    fn add_busy(&mut self, cpu: Cpu, a: Ts, b: Ts) {
        let (a, b) = (a.max(self.w.start_ns), b.min(self.w.end_ns));
        if a >= b {
            return;
        }
        let width = self.bin_ns();
        let bins = stallscope_detect::per_task::per_cpu(&mut self.busy, cpu);
        if bins.is_empty() {
            bins.resize(DENSITY_BINS as usize, 0);
        }
        let mut t = a;
        while t < b {
            let k = ((t - self.w.start_ns) / width) as usize;
            let bin_end = self.w.start_ns + (k as u64 + 1) * width;
            let end = bin_end.min(b);
            if let Some(v) = bins.get_mut(k) {
                *v += end - t;
            }
            t = end;
        }
    }

    /// Draws `pid`'s run on `cpu` over `[start, end)`, clipped to the window.
    fn slice(&mut self, max: usize, (pid, cpu): (Tid, Cpu), (start, end): (Ts, Ts), before: bool) {
        let (a, b) = (self.w.start_ns, self.w.end_ns);
        if end <= a || start >= b {
            return;
        }
        let s = RunSlice {
            cpu,
            start_ns: start.max(a),
            end_ns: end.min(b),
            pid,
            before_trace: before,
        };
        self.add_busy(cpu, start, end);
        if push_capped(&mut self.w.slices, &mut self.w.omitted.slices, max, s) {
            self.pids.insert(pid);
            self.cpus.insert(cpu);
        }
    }

    /// Draws `pid`'s wait over `[start, end)` on `cpu` (`open`: still waiting at the
    /// window's end; a wait for an unknown CPU cannot be drawn and is counted).
    fn wait(&mut self, max: usize, pid: Tid, cpu: Option<Cpu>, (start, end): (Ts, Ts), open: bool) {
        let Some(cpu) = cpu else {
            self.w.omitted.waits += 1;
            return;
        };
        let wt = RunnableWait {
            pid,
            cpu,
            start_ns: start.max(self.w.start_ns),
            end_ns: end.min(self.w.end_ns),
            open,
            subject: false,
        };
        if let Some(k) = self.tracks.iter().position(|t| t.0 == pid) {
            let len = |w: &RunnableWait| w.end_ns.saturating_sub(w.start_ns);
            let longest = &mut self.longest[k];
            if longest.as_ref().is_none_or(|l| len(&wt) > len(l)) {
                *longest = Some(wt.clone());
            }
        }
        if push_capped(&mut self.w.waits, &mut self.w.omitted.waits, max, wt) {
            self.pids.insert(pid);
            self.cpus.insert(cpu);
        }
    }

    /// Draws a request over `[start, end)` (`open`: not completed by the window's end).
    fn request(&mut self, max: usize, r: &PendingRequest, end: Ts, open: bool) {
        let req = BlockRequest {
            dev: r.dev,
            sector: r.sector,
            nr_sector: r.nr_sector,
            rwbs: r.rwbs.clone(),
            cpu: r.cpu,
            start_ns: r.ts.max(self.w.start_ns),
            end_ns: end.min(self.w.end_ns),
            open,
        };
        push_capped(&mut self.w.requests, &mut self.w.omitted.requests, max, req);
    }

    /// Whether `ts` is inside the window (ends included).
    fn holds(&self, ts: Ts) -> bool {
        self.w.start_ns <= ts && ts <= self.w.end_ns
    }
}

/// The windows of the findings, drawn from the kept items ([`WindowSpill::windows`]).
struct Drawing {
    opts: WindowOptions,
    /// Windows by start time.
    windows: Vec<Building>,
    histograms: BTreeMap<Tid, WaitHistogram>,
    omitted_windows: usize,
    /// The trace's first analyzed event (nothing is drawn before it).
    first_ts: Ts,
}

impl Drawing {
    fn new(findings: &[Finding], opts: WindowOptions, first_ts: Ts) -> Drawing {
        let mut windows: Vec<Building> = findings
            .iter()
            .enumerate()
            .take(opts.max_windows)
            .map(|(i, f)| Building {
                w: FindingWindow {
                    finding: i,
                    start_ns: f.window.start_ns.saturating_sub(opts.margin_ns),
                    end_ns: f.window.end_ns.saturating_add(opts.margin_ns),
                    cpus: Vec::new(),
                    tasks: Vec::new(),
                    slices: Vec::new(),
                    waits: Vec::new(),
                    wakeups: Vec::new(),
                    migrations: Vec::new(),
                    requests: Vec::new(),
                    markers: Vec::new(),
                    task_states: Vec::new(),
                    density: Vec::new(),
                    omitted: Default::default(),
                },
                pids: f.tasks.iter().map(|t| t.pid).collect(),
                cpus: f.cpus.iter().copied().collect(),
                tracks: f
                    .tasks
                    .iter()
                    .map(|t| t.pid)
                    .filter(|&p| p > 0)
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .map(|p| (p, None))
                    .collect(),
                longest: Vec::new(),
                busy: Vec::new(),
                track_start: f
                    .window
                    .start_ns
                    .saturating_sub(opts.margin_ns)
                    .max(first_ts),
            })
            .collect();
        windows.sort_by_key(|b| b.w.start_ns);
        for b in &mut windows {
            b.longest = vec![None; b.tracks.len()];
        }
        let mut histograms = BTreeMap::new();
        for t in findings.iter().flat_map(|f| f.tasks.iter()) {
            if t.pid != 0 && histograms.len() < opts.max_histograms {
                histograms.entry(t.pid).or_insert_with(|| WaitHistogram {
                    pid: t.pid,
                    comm: t.comm.clone(),
                    waits: 0,
                    max_ns: 0,
                    buckets: Vec::new(),
                });
            }
        }
        Drawing {
            opts,
            windows,
            histograms,
            omitted_windows: findings.len().saturating_sub(opts.max_windows),
            first_ts,
        }
    }

    /// Two drawings of half the windows each (alternately, by start); the histograms go
    /// with the first.
    fn split(mut self) -> (Drawing, Drawing) {
        let (first, second): (Vec<_>, Vec<_>) = std::mem::take(&mut self.windows)
            .into_iter()
            .enumerate()
            .partition(|(i, _)| i % 2 == 0);
        let second = Drawing {
            opts: self.opts,
            windows: second.into_iter().map(|(_, b)| b).collect(),
            histograms: BTreeMap::new(),
            omitted_windows: 0,
            first_ts: self.first_ts,
        };
        self.windows = first.into_iter().map(|(_, b)| b).collect();
        (self, second)
    }

    /// Draws the chunks of the spill `file` that this drawing needs (those its windows
    /// overlap; all when it fills histograms); returns it with how many it read.
    fn draw_from(mut self, file: &std::fs::File) -> Result<(Drawing, usize), String> {
        use std::os::unix::fs::FileExt;
        if self.windows.is_empty() && self.histograms.is_empty() {
            return Ok((self, 0));
        }
        let mut head = [0u8; HEAD_BYTES];
        let mut items: Vec<u8> = Vec::new();
        let (mut at, mut chunks_read) = (0u64, 0);
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
        loop {
            match file.read_exact_at(&mut head, at) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(e.to_string()),
            }
            let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
            let chunk = ChunkHead {
                base: word(&head[4..12]),
                min_start: word(&head[12..20]),
                max_ts: word(&head[20..28]),
            };
            let items_at = at + HEAD_BYTES as u64;
            at = items_at + len as u64;
            let windows = self.overlapping(chunk.min_start, chunk.max_ts);
            if windows.is_empty() && self.histograms.is_empty() {
                continue;
            }
            chunks_read += 1;
            items.resize(len, 0);
            file.read_exact_at(&mut items, items_at)
                .map_err(|e| e.to_string())?;
            let (mut ts, mut rest) = (chunk.base, &items[..]);
            while !rest.is_empty() {
                let ((dt, item), more) =
                    postcard::take_from_bytes::<(i64, Item)>(rest).map_err(|e| e.to_string())?;
                rest = more;
                ts = ts.wrapping_add(dt as u64);
                self.item(ts, &item, &windows);
            }
        }
        Ok((self, chunks_read))
    }

    /// Indices of the windows that overlap `[a, b]`.
    fn overlapping(&self, a: Ts, b: Ts) -> Vec<usize> {
        (0..self.windows.len())
            .filter(|&i| self.windows[i].w.start_ns <= b && self.windows[i].w.end_ns >= a)
            .collect()
    }

    /// Draws one kept item at `ts` in the `windows` (indices) it may touch.
    fn item(&mut self, ts: Ts, item: &Item, windows: &[usize]) {
        let max = self.opts.max_items;
        match item {
            &Item::Closed {
                tid,
                mut was,
                len,
                ran_on,
                repaired,
                ..
            } => {
                if repaired && matches!(was, Was::Running(_)) {
                    // a run whose end the trace does not show (its switch-out was dropped):
                    // not drawn, its stretch is unknown
                    was = Was::Unknown;
                }
                // a wait whose end the repair rule placed ended in no switch-in the trace
                // shows: drawn as a wait that ended otherwise (the task's track only)
                let ran_on = ran_on.filter(|_| !repaired);
                let start = len.map(|l| ts.saturating_sub(l));
                if let (Was::Runnable(_), Some(_), Some(l)) = (was, ran_on, len) {
                    if let Some(h) = self.histograms.get_mut(&tid) {
                        h.add(l);
                    }
                }
                for &i in windows {
                    let b = &mut self.windows[i];
                    let end = b.w.end_ns;
                    let closed_inside = ts <= end; // else: still in `was` at the end
                    match (was, start) {
                        (Was::Running(cpu), Some(s)) if tid != 0 => {
                            b.slice(max, (tid, cpu), (s.max(self.first_ts), ts), false)
                        }
                        (Was::Runnable(cpu), Some(s)) if s < end && ts >= b.w.start_ns => {
                            match (closed_inside, ran_on) {
                                (true, Some(rc)) => b.wait(max, tid, Some(rc), (s, ts), false),
                                (true, None) => {} // ended otherwise: not drawn
                                (false, _) => b.wait(max, tid, cpu, (s, end), true),
                            }
                        }
                        _ => {}
                    }
                    if ts > b.w.start_ns && start.is_none_or(|s| s < end) {
                        b.track(tid, was, start, ts);
                    }
                }
            }
            &Item::BeforeTrace { tid, cpu, len, .. } => {
                for &i in windows {
                    let b = &mut self.windows[i];
                    if b.holds(ts) {
                        b.slice(max, (tid, cpu), (ts.saturating_sub(len), ts), true);
                    }
                }
            }
            &Item::Wakeup {
                cpu,
                waker,
                wakee,
                target,
                ..
            } => {
                for &i in windows {
                    let b = &mut self.windows[i];
                    if b.holds(ts) {
                        let mark = WakeupMark {
                            ts_ns: ts,
                            cpu,
                            waker_pid: waker,
                            wakee_pid: wakee,
                            target_cpu: target,
                        };
                        if push_capped(&mut b.w.wakeups, &mut b.w.omitted.wakeups, max, mark) {
                            b.pids.insert(wakee);
                            b.pids.insert(waker);
                            b.cpus.insert(cpu);
                            b.cpus.extend(target);
                        }
                    }
                }
            }
            &Item::Migration { pid, from, to, .. } => {
                for &i in windows {
                    let b = &mut self.windows[i];
                    if b.holds(ts) {
                        let mark = MigrationMark {
                            ts_ns: ts,
                            pid,
                            from_cpu: from,
                            to_cpu: to,
                        };
                        let omitted = &mut b.w.omitted.migrations;
                        if push_capped(&mut b.w.migrations, omitted, max, mark) {
                            b.pids.insert(pid);
                            b.cpus.insert(from);
                            b.cpus.insert(to);
                        }
                    }
                }
            }
            Item::Marker { mark, .. } => {
                for &i in windows {
                    let b = &mut self.windows[i];
                    if b.holds(ts) {
                        let mark = TextMark {
                            ts_ns: ts,
                            ..(**mark).clone()
                        };
                        push_capped(&mut b.w.markers, &mut b.w.omitted.markers, max, mark);
                    }
                }
            }
            Item::Request { request, .. } => {
                for &i in windows {
                    let b = &mut self.windows[i];
                    if b.holds(ts) {
                        b.request(max, request, ts, false);
                    } else if ts > b.w.end_ns && request.ts < b.w.end_ns {
                        b.request(max, request, b.w.end_ns, true);
                    }
                }
            }
        }
    }

    /// Draws what was still open when the reading ended, then closes every window.
    fn finish(mut self, end: AtEnd, requests_dropped: u64) -> FindingWindows {
        let max = self.opts.max_items;
        for b in &mut self.windows {
            let stop = b.w.end_ns;
            for &(tid, was, since) in &end.open {
                if since >= stop {
                    continue;
                }
                match was {
                    Was::Running(cpu) if tid != 0 => b.slice(max, (tid, cpu), (since, stop), false),
                    Was::Runnable(cpu) => b.wait(max, tid, cpu, (since, stop), true),
                    _ => {}
                }
                b.track(tid, was, Some(since), stop);
            }
            for r in end.requests.iter().filter(|r| r.ts < stop) {
                b.request(max, r, stop, true);
            }
            // a named task never seen, or unknown since its last state: unknown up to the end
            for pid in b.tracks.iter().map(|t| t.0).collect::<Vec<_>>() {
                b.track(pid, Was::Unknown, None, stop);
            }
            // each of the finding's tasks: its longest wait is drawn, past the cap
            for longest in std::mem::take(&mut b.longest).into_iter().flatten() {
                match b.w.waits.iter_mut().find(|w| **w == longest) {
                    Some(drawn) => drawn.subject = true,
                    None => {
                        b.pids.insert(longest.pid);
                        b.cpus.insert(longest.cpu);
                        b.w.omitted.waits = b.w.omitted.waits.saturating_sub(1);
                        b.w.waits.push(RunnableWait {
                            subject: true,
                            ..longest
                        });
                    }
                }
            }
            if b.w.omitted.slices > 0 {
                // the cap left slices out: the density shows how busy each CPU was anyway
                let width = b.bin_ns();
                b.w.density = b
                    .busy
                    .iter()
                    .enumerate()
                    .filter(|(_, bins)| !bins.is_empty())
                    .map(|(cpu, bins)| stallscope_model::CpuDensity {
                        cpu: cpu as Cpu,
                        bin_ns: width,
                        busy_permille: bins
                            .iter()
                            .map(|&ns| {
                                u16::try_from(ns.saturating_mul(1000) / width)
                                    .unwrap_or(1000)
                                    .min(1000)
                            })
                            .collect(),
                    })
                    .collect();
            }
            b.w.task_states
                .sort_by_key(|s| (s.pid, s.start_ns, s.end_ns));
            // the CPUs of the density too: their lanes show it
            let dense = b.w.density.iter().map(|d| d.cpu);
            b.w.cpus = b
                .cpus
                .iter()
                .copied()
                .chain(dense)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let mut pids: Vec<Tid> = b.pids.iter().copied().collect();
            pids.sort_unstable();
            b.w.tasks = pids
                .iter()
                .map(|&pid| WindowTask {
                    pid,
                    comm: match end.names.get(&pid) {
                        Some(c) if !c.as_str().is_empty() => c.as_str().to_string(),
                        _ if pid == 0 => "swapper".to_string(),
                        _ => String::new(),
                    },
                })
                .collect();
        }
        let mut windows: Vec<FindingWindow> = self.windows.into_iter().map(|b| b.w).collect();
        windows.sort_by_key(|w| w.finding);
        FindingWindows {
            margin_ns: self.opts.margin_ns,
            max_items: self.opts.max_items,
            windows,
            histograms: self.histograms.into_values().collect(),
            omitted_windows: self.omitted_windows,
            note: if requests_dropped > 0 {
                format!(
                    "{requests_dropped} block requests were issued while {MAX_PENDING_REQUESTS} were pending and are not drawn."
                )
            } else {
                String::new()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{
        FindingSeverity, FindingTask, PrevState, Span, Switch, TaskRef, Wakeup, Window,
    };
    use stallscope_timeline::WakeupSelector;

    fn task(pid: Tid, name: &str) -> TaskRef {
        TaskRef {
            comm: Comm::new(name),
            pid,
            prio: 120,
        }
    }

    fn ev(ts: Ts, cpu: Cpu, pid: Tid, kind: EventKind) -> Event {
        Event {
            ts,
            cpu,
            pid,
            span: Span::default(),
            kind,
            callchain: None,
        }
    }

    fn switch(ts: Ts, cpu: Cpu, prev: Tid, state: &str, next: Tid) -> Event {
        ev(
            ts,
            cpu,
            prev,
            EventKind::Switch(Switch {
                prev: task(prev, "p"),
                prev_state: PrevState::parse(state).unwrap(),
                next: task(next, "n"),
            }),
        )
    }

    fn finding(start: Ts, end: Ts, victim: Tid) -> Finding {
        Finding {
            cause: None,
            detector: "runqueue-starvation".into(),
            severity: FindingSeverity::High,
            title: "t".into(),
            window: Window {
                start_ns: start,
                end_ns: end,
            },
            cpus: vec![0],
            tasks: vec![FindingTask {
                pid: victim,
                comm: "v".into(),
                role: "victim".into(),
                measures: Default::default(),
            }],
            measures: Default::default(),
            evidence: vec![],
            hint: String::new(),
        }
    }

    /// The windows of `findings` drawn from `events` as the analysis keeps them: the
    /// model's transitions under `rule`, one event at a time.
    fn draw(
        findings: &[Finding],
        opts: WindowOptions,
        rule: WakeupSelector,
        events: &[Event],
    ) -> (FindingWindows, usize) {
        let mut timeline = Timeline::new(rule);
        let mut spill = WindowSpill::new().unwrap();
        let mut transitions = Vec::new();
        for ev in events {
            transitions.clear();
            timeline.process(ev, &mut |t| transitions.push((0u32, t)));
            spill.on_model(std::slice::from_ref(ev), &transitions);
        }
        spill.on_end(&timeline);
        spill.drawn(findings, opts).unwrap()
    }

    fn draw_one(finding: Finding, opts: WindowOptions, events: &[Event]) -> FindingWindows {
        let rule = WakeupSelector::preferring_waking(false);
        draw(&[finding], opts, rule, events).0
    }

    #[test]
    fn trace_marker_text_inside_a_window_is_kept() {
        let marker = |ts: Ts, text: &str| {
            ev(
                ts,
                1,
                9,
                EventKind::Generic(Box::new(stallscope_model::GenericEvent {
                    system: Some("ftrace".into()),
                    name: "print".into(),
                    fields: vec![
                        ("ip".into(), stallscope_model::FieldValue::UInt(1)),
                        ("buf".into(), stallscope_model::FieldValue::Str(text.into())),
                    ],
                })),
            )
        };
        let opts = WindowOptions {
            margin_ns: 100,
            ..Default::default()
        };
        let events = [
            switch(1, 0, 0, "R", 5),
            marker(500, "before the window"),
            marker(1500, "B|9|commit transaction"),
            switch(2000, 0, 5, "R", 7),
            marker(3000, "after it"),
        ];
        let w = draw_one(finding(1000, 2000, 7), opts, &events);
        let win = &w.windows[0];
        assert_eq!(
            win.markers,
            vec![TextMark {
                ts_ns: 1500,
                cpu: 1,
                pid: 9,
                event: "print".into(),
                text: "B|9|commit transaction".into(),
            }]
        );
    }

    /// The wakeups drawn are those that woke their task under the analysis' one rule: with
    /// `sched_waking` declared a `sched_wakeup` record is not drawn (and the wait runs from
    /// the waking), as the model and the detectors count them.
    #[test]
    fn drawn_wakeups_follow_the_analysis_rule() {
        let wake = |kind: fn(Wakeup) -> EventKind, ts| {
            ev(
                ts,
                0,
                5,
                kind(Wakeup {
                    task: task(7, "v"),
                    target_cpu: Some(0),
                }),
            )
        };
        let drawn = |rule: WakeupSelector| {
            let events = [
                switch(1, 0, 0, "R", 5),
                switch(2, 0, 5, "S", 7),
                switch(3, 0, 7, "S", 5),
                wake(EventKind::Wakeup, 1000), // before any sched_waking
                wake(EventKind::Waking, 1100),
                wake(EventKind::Wakeup, 1200),
                switch(2000, 0, 5, "S", 7),
            ];
            let findings = [finding(1000, 2000, 7)];
            let w = draw(&findings, WindowOptions::default(), rule, &events).0;
            let marks: Vec<Ts> = w.windows[0].wakeups.iter().map(|m| m.ts_ns).collect();
            let waits: Vec<Ts> = w.windows[0].waits.iter().map(|m| m.start_ns).collect();
            (marks, waits)
        };
        // sched_waking declared: only the waking counts
        assert_eq!(
            drawn(WakeupSelector::preferring_waking(true)),
            (vec![1100], vec![1100])
        );
        // not declared: sched_wakeup counts until a sched_waking is seen; that waking finds
        // the task already runnable (it woke nothing: not drawn, as the model has it)
        assert_eq!(
            drawn(WakeupSelector::preferring_waking(false)),
            (vec![1000], vec![1000])
        );
    }

    #[test]
    fn slices_waits_and_histogram_around_a_finding() {
        let opts = WindowOptions {
            margin_ns: 100,
            ..Default::default()
        };
        let events = [
            switch(1, 0, 0, "R", 5), // 5 runs on cpu 0 from 1
            ev(
                1000,
                0,
                5,
                EventKind::Waking(Wakeup {
                    task: task(7, "v"),
                    target_cpu: Some(0),
                }),
            ),
            switch(2000, 0, 5, "R", 7), // 7 waited 1000 ns; 5 preempted
            switch(2500, 0, 7, "S", 5), // 5 waited 500 ns
            switch(5000, 0, 5, "S", 0),
        ];
        let w = draw_one(finding(1000, 2000, 7), opts, &events);
        assert_eq!(w.windows.len(), 1);
        let win = &w.windows[0];
        assert_eq!((win.start_ns, win.end_ns), (900, 2100));
        assert!(win.density.is_empty(), "nothing capped: no density");
        assert_eq!(
            win.slices,
            vec![
                RunSlice {
                    cpu: 0,
                    start_ns: 900,
                    end_ns: 2000,
                    pid: 5,
                    before_trace: false,
                },
                RunSlice {
                    cpu: 0,
                    start_ns: 2000,
                    end_ns: 2100,
                    pid: 7,
                    before_trace: false,
                },
            ]
        );
        assert_eq!(
            win.waits,
            vec![
                RunnableWait {
                    pid: 7,
                    cpu: 0,
                    start_ns: 1000,
                    end_ns: 2000,
                    open: false,
                    subject: true, // the victim's longest wait
                },
                RunnableWait {
                    pid: 5,
                    cpu: 0,
                    start_ns: 2000,
                    end_ns: 2100,
                    open: true,
                    subject: false,
                },
            ]
        );
        assert_eq!(win.wakeups.len(), 1);
        assert_eq!(win.wakeups[0].waker_pid, 5);
        assert_eq!(w.histograms.len(), 1);
        assert_eq!(w.histograms[0].waits, 1);
        assert_eq!(w.histograms[0].buckets[9], 1); // 512 ≤ 1000 < 1024
    }

    #[test]
    fn caps_count_what_they_leave_out() {
        let opts = WindowOptions {
            margin_ns: 0,
            max_items: 2,
            ..Default::default()
        };
        let events: Vec<Event> = (0..10u64)
            .map(|i| switch(1 + i * 10, 0, (i % 2 + 1) as Tid, "R", (2 - i % 2) as Tid))
            .collect();
        let w = draw_one(finding(0, 1_000_000, 1), opts, &events);
        assert_eq!(w.windows[0].slices.len(), 2);
        assert!(w.windows[0].omitted.slices >= 8);
        // the density still counts every run: CPU 0 busy from the first switch on
        let d = &w.windows[0].density;
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].cpu, 0);
        let busy: u64 = d[0]
            .busy_permille
            .iter()
            .map(|&p| u64::from(p) * d[0].bin_ns / 1000)
            .sum();
        // runs from 1 (first switch) to the window's end at 1 000 000, minus rounding
        let want = 1_000_000 - 1;
        assert!(busy.abs_diff(want) <= d[0].bin_ns, "{busy} vs {want}");
        assert!(d[0].busy_permille.iter().all(|&p| p <= 1000));
    }

    #[test]
    fn the_findings_tasks_longest_wait_is_drawn_past_the_cap() {
        // 5 and 7 take turns on CPU 0; 7 (the finding's task) waits 10 ns each time, but
        // 500 ns once, late: with 2 waits a window, that one is still drawn, marked
        let mut events = vec![switch(1, 0, 0, "R", 5)];
        let mut ts = 100;
        for k in 0..40u64 {
            let run5 = if k == 30 { 500 } else { 10 };
            events.push(switch(ts, 0, 7, "R", 5)); // 7 preempted: waits while 5 runs
            ts += run5;
            events.push(switch(ts, 0, 5, "R", 7));
            ts += 10;
        }
        let opts = WindowOptions {
            margin_ns: 0,
            max_items: 2,
            ..Default::default()
        };
        let w = draw_one(finding(0, 10_000, 7), opts, &events);
        let win = &w.windows[0];
        let subject: Vec<&RunnableWait> = win.waits.iter().filter(|w| w.subject).collect();
        assert_eq!(subject.len(), 1, "{:?}", win.waits);
        assert_eq!(
            (subject[0].pid, subject[0].end_ns - subject[0].start_ns),
            (7, 500)
        );
        assert_eq!(win.waits.len(), 3, "2 by the cap, the subject past it");
        // every wait of either task is drawn or counted
        assert_eq!(win.waits.len() as u64 + win.omitted.waits, 80);
    }

    fn block(ts: Ts, name: &str, sector: u64) -> Event {
        let action = stallscope_model::BlockAction::from_tracepoint(name).expect("block name");
        let mut b = stallscope_model::BlockEvent::new(action);
        b.dev = Some(stallscope_model::BlockDev(7340032));
        b.sector = sector;
        b.nr_sector = 8;
        b.rwbs = stallscope_model::Rwbs::parse("WS").expect("rwbs");
        ev(ts, 1, 9, EventKind::Block(Box::new(b)))
    }

    #[test]
    fn block_requests_match_issue_and_completion() {
        let opts = WindowOptions {
            margin_ns: 0,
            ..Default::default()
        };
        let events = [
            block(50, "block_rq_issue", 8),
            block(200, "block_rq_issue", 16),
            block(300, "block_rq_complete", 8),
            block(2000, "block_rq_complete", 16),
        ];
        let w = draw_one(finding(100, 1000, 1), opts, &events);
        let r = &w.windows[0].requests;
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].sector, r[0].start_ns, r[0].end_ns, r[0].open),
            (8, 100, 300, false)
        );
        assert_eq!(
            (r[1].sector, r[1].start_ns, r[1].end_ns, r[1].open),
            (16, 200, 1000, true)
        );
        assert_eq!(r[0].rwbs, "WS");
        assert_eq!(r[0].nr_sector, 8);
    }

    #[test]
    fn a_task_switching_a_million_times_keeps_a_bounded_track_that_tiles_its_window() {
        // 7 (the finding's task) and 5 hand CPU 0 back and forth every 10 ns for 2 ms: its
        // state track is merged into mixed spans (at most ~2 × STATE_SPANS_PER_TASK), still
        // covering the whole window without gap or overlap
        let opts = WindowOptions {
            margin_ns: 0,
            ..Default::default()
        };
        let mut events = vec![switch(1, 0, 0, "R", 5)];
        let mut ts = 1000;
        for k in 0..200_000u64 {
            let (prev, next) = if k % 2 == 0 { (5, 7) } else { (7, 5) };
            events.push(switch(ts, 0, prev, "R", next));
            ts += 10;
        }
        let w = draw_one(finding(1000, 2_001_000, 7), opts, &events);
        let win = &w.windows[0];
        let track: Vec<&TaskStateSpan> = win.task_states.iter().filter(|s| s.pid == 7).collect();
        assert!(
            track.len() <= 2 * STATE_SPANS_PER_TASK + 2,
            "{} spans",
            track.len()
        );
        assert!(win.omitted.task_states > 190_000, "{:?}", win.omitted);
        assert_eq!(track[0].start_ns, win.start_ns);
        assert_eq!(track.last().map(|s| s.end_ns), Some(win.end_ns));
        for p in track.windows(2) {
            assert_eq!(p[0].end_ns, p[1].start_ns, "{:?}", p);
        }
        assert!(track.iter().any(|s| s.state == TaskStateSpan::MIXED));
    }

    #[test]
    fn chunks_no_window_overlaps_are_skipped() {
        // 5 and 6 hand CPU 0 back and forth 40 000 times (about twenty chunks of kept
        // states); a finding naming no task (no histogram to fill) near the end is drawn
        // from the chunks that overlap its window only
        let mut events = vec![switch(1, 0, 0, "R", 5)];
        for k in 0..40_000u64 {
            let (prev, next) = if k % 2 == 0 { (5, 6) } else { (6, 5) };
            events.push(switch(1000 + k * 100, 0, prev, "R", next));
        }
        let mut f = finding(3_990_000, 3_995_000, 5);
        f.tasks.clear();
        let opts = WindowOptions {
            margin_ns: 0,
            ..Default::default()
        };
        let rule = WakeupSelector::preferring_waking(false);
        let (w, drawn_from) = draw(&[f.clone()], opts, rule, &events);
        assert!((1..=2).contains(&drawn_from), "{drawn_from} chunks read");
        let slices = &w.windows[0].slices;
        assert_eq!(slices.len(), 50, "{slices:?}");
        assert_eq!(slices[0].start_ns, 3_990_000);
        assert_eq!(slices.last().map(|s| s.end_ns), Some(3_995_000));
        // with a named task the histogram needs every chunk
        let (_, drawn_from) = draw(&[finding(3_990_000, 3_995_000, 5)], opts, rule, &events);
        assert!(drawn_from >= 19, "{drawn_from} chunks read");
    }

    #[test]
    fn a_task_running_before_the_trace_is_drawn_from_its_cpus_first_event() {
        // CPU 1's first event is at 100 (a wakeup there); 8 is switched out at 300 without
        // a switch-in: it ran from 100, marked; its next run (switched in at 300 on CPU 0)
        // is the model's
        let wake = ev(
            100,
            1,
            8,
            EventKind::Waking(Wakeup {
                task: task(9, "w"),
                target_cpu: Some(0),
            }),
        );
        let events = [
            wake,
            switch(300, 1, 8, "R", 0),
            switch(400, 0, 0, "R", 8),
            switch(600, 0, 8, "S", 0),
        ];
        let opts = WindowOptions {
            margin_ns: 0,
            ..Default::default()
        };
        let w = draw_one(finding(0, 1000, 8), opts, &events);
        let slices: Vec<(Cpu, Ts, Ts, bool)> = w.windows[0]
            .slices
            .iter()
            .map(|s| (s.cpu, s.start_ns, s.end_ns, s.before_trace))
            .collect();
        assert_eq!(slices, [(1, 100, 300, true), (0, 400, 600, false)]);
        let waits: Vec<(Cpu, Ts, Ts)> = w.windows[0]
            .waits
            .iter()
            .filter(|s| s.pid == 8)
            .map(|s| (s.cpu, s.start_ns, s.end_ns))
            .collect();
        assert_eq!(waits, [(0, 300, 400)], "preempted on 1, ran on 0");
    }
}
