//! Gathers [`FindingWindows`]: the scheduling activity (run slices per CPU, runnable waits,
//! wakeups, migrations) in a margin around each finding, plus log2 histograms of the
//! runnable waits of the tasks the findings name, in one pass over the events.
//!
//! Findings are only known after the analysis, so the events of the analysis' own reading
//! are kept on disk as they stream by ([`WindowSpill`], a product of that reading: an
//! unlinked temporary file, a compact binary form without call chains) and played back
//! through the windows' pass once the findings are known: the inputs are read once, memory
//! stays bounded by what is drawn. ([`collect`] reads inputs anew, for callers without an
//! analysis.) The pass keeps only per-CPU "who runs since when", the set of runnable tasks
//! and task names; items go to the windows open at each event's time and stop at
//! [`WindowOptions::max_items`] per kind (the rest is counted in `omitted`).
//!
//! Run slices are `perf sched timehist`'s rows, from the same [`Timehist`] the `timehist`
//! command prints: a row's run (`run_ns` up to its switch-out) is a slice on its CPU, so the
//! picture and the table never disagree (a task whose switch-in record is missing gets the
//! run timehist gives it, never one from the start of the trace). The task still running
//! on a CPU when a window ends is drawn from its switch-in. A slice is clipped to its window
//! and never starts before the trace's first timed event (side-band task names carry time
//! 0). Waits are the model's ([`stallscope_timeline::intervals::Model`], the same wakeup
//! and repair rules as the analysis): a wait from the task's wakeup or preemption to its
//! switch-in is drawn on the CPU it ran on (so it is timehist's sch delay of that run); a
//! task the model holds runnable at the window's end is drawn waiting on the CPU it waits
//! for, with `open: true`. A wait the model ends otherwise (a repair after a dropped record)
//! is not drawn: the trace does not show it ending in a run.
//!
//! Block inputs: a request runs from `block_rq_issue` to the `block_rq_complete` of the same
//! device and sector (at most [`MAX_PENDING_REQUESTS`] pending; beyond, issues are counted in
//! [`FindingWindows::note`] and not drawn).

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::{FxHashMap as HashMap, FxHashSet};

use stallscope_model::{
    BlockRequest, Comm, Cpu, Event, EventKind, Finding, FindingWindow, FindingWindows,
    MigrationMark, RunSlice, RunnableWait, TaskStateSpan, TextMark, Tid, Ts, WaitHistogram,
    WakeupMark, WindowTask,
};
use stallscope_read::ReadError;
use stallscope_timeline::timehist::{Timehist, TimehistOptions, TimehistRow};
use stallscope_timeline::{Interval, Model, TaskState, Timeline, Transition, WakeupSelector};

use crate::Inputs;

/// Block requests waiting for their completion that the collector remembers.
pub const MAX_PENDING_REQUESTS: usize = 65536;

/// A `block_rq_issue` waiting for its completion.
struct PendingRequest {
    ts: Ts,
    cpu: Cpu,
    nr_sector: u64,
    rwbs: String,
}

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
    /// Only events in this range count (the `--time` of the analysis).
    pub time_range: (Ts, Ts),
}

impl Default for WindowOptions {
    fn default() -> Self {
        WindowOptions {
            margin_ns: 50_000_000,
            max_items: 4000,
            max_windows: 100,
            max_histograms: 32,
            time_range: (0, Ts::MAX),
        }
    }
}

/// Reads `inputs` to the end and gathers the windows of `findings`.
pub fn collect(
    inputs: &mut Inputs,
    findings: &[Finding],
    opts: WindowOptions,
) -> Result<FindingWindows, ReadError> {
    let mut c = WindowCollector::new(findings, opts);
    c.use_wakeup_rule(WakeupSelector::for_inputs(inputs.metas()));
    while let Some(ev) = inputs.next_event()? {
        c.on_event(&ev);
    }
    Ok(c.finish())
}

/// The events of an analysis' reading, kept for the windows ([`WindowSpill::windows`]):
/// each run of events the reading hands over is written as one frame (a little-endian `u32`
/// length, then the run in `postcard`'s form) to an unlinked temporary file.
pub struct WindowSpill {
    file: Option<std::io::BufWriter<std::fs::File>>,
    frame: Vec<u8>,
    /// The first write error (the windows then say so instead of being drawn).
    error: Option<String>,
    /// The inputs' descriptions at open (the windows' model takes its wakeup rule from them).
    metas: Vec<stallscope_model::TraceMeta>,
    opened: bool,
}

impl WindowSpill {
    /// A spill in a new temporary file (in `$TMPDIR`).
    pub fn new() -> std::io::Result<WindowSpill> {
        Ok(WindowSpill {
            file: Some(std::io::BufWriter::with_capacity(
                1 << 20,
                tempfile::tempfile()?,
            )),
            frame: Vec::new(),
            error: None,
            metas: Vec::new(),
            opened: false,
        })
    }

    /// Whether the analysis opened the inputs as traces (CPU-profile text alone is not).
    pub fn opened(&self) -> bool {
        self.opened
    }

    /// Plays the kept events back through the windows of `findings`.
    pub fn windows(
        mut self,
        findings: &[Finding],
        opts: WindowOptions,
    ) -> Result<FindingWindows, String> {
        use std::io::{Read, Seek};
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let Some(file) = self.file.take() else {
            return Err("no spill file".to_string());
        };
        let mut file = file.into_inner().map_err(|e| e.error().to_string())?;
        file.rewind().map_err(|e| e.to_string())?;
        let mut file = std::io::BufReader::with_capacity(1 << 20, file);
        let mut c = WindowCollector::new(findings, opts);
        c.use_wakeup_rule(WakeupSelector::for_inputs(self.metas.iter()));
        let mut len = [0u8; 4];
        loop {
            match file.read_exact(&mut len) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(e.to_string()),
            }
            self.frame.resize(u32::from_le_bytes(len) as usize, 0);
            file.read_exact(&mut self.frame)
                .map_err(|e| e.to_string())?;
            let run: Vec<Event> = postcard::from_bytes(&self.frame).map_err(|e| e.to_string())?;
            for ev in &run {
                c.on_event(ev);
            }
        }
        Ok(c.finish())
    }

    /// Writes one run as a frame.
    fn write(&mut self, run: &[Event]) -> Result<(), String> {
        use std::io::Write;
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        self.frame.clear();
        self.frame.extend_from_slice(&[0; 4]);
        let frame = std::mem::take(&mut self.frame);
        let mut frame = postcard::to_extend(run, frame).map_err(|e| e.to_string())?;
        let len = u32::try_from(frame.len() - 4).map_err(|_| "a run over 4 GiB".to_string())?;
        frame[..4].copy_from_slice(&len.to_le_bytes());
        let written = file.write_all(&frame).map_err(|e| e.to_string());
        self.frame = frame;
        written
    }
}

impl crate::analyze::SameReading for WindowSpill {
    fn open(&mut self, inputs: &Inputs) {
        self.opened = true;
        self.metas = inputs.metas().into_iter().cloned().collect();
    }

    fn events(&mut self, run: &[Event]) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = self.write(run) {
            self.error = Some(format!("keeping the events for the windows: {e}"));
            self.file = None;
        }
    }
}

/// One window being filled.
struct Building {
    w: FindingWindow,
    /// Tasks and CPUs seen in the window (hashed: inserted per event; sorted at the end).
    pids: FxHashSet<Tid>,
    cpus: FxHashSet<Cpu>,
    /// The finding's own tasks (their states get a track).
    named: BTreeSet<Tid>,
    /// Busy ns per CPU per density bin (see [`DENSITY_BINS`]).
    busy: BTreeMap<Cpu, Vec<u64>>,
    /// Per named task, the index of its latest span in `w.task_states` (for merging).
    last_state: HashMap<Tid, usize>,
}

/// Spans of a named task's state track, at most about twice this, before the page's size
/// bound coarsens them further ([`Building::push_state`]).
pub const STATE_SPANS_PER_TASK: usize = 1000;

/// Bins of a window's per-CPU density ([`stallscope_model::CpuDensity`]).
pub const DENSITY_BINS: u64 = 200;

impl Building {
    /// Adds a named task's state span. Spans shorter than the window's resolution (its
    /// length / [`STATE_SPANS_PER_TASK`]) that follow an equally short span of the task
    /// merge with it ([`TaskStateSpan::absorb`]: a `mixed` span, counted in
    /// `omitted.task_states`), so a task that switches a million times still tiles its
    /// track with a few thousand spans: summarized at this zoom, never dropped.
    fn push_state(&mut self, span: TaskStateSpan) {
        let resolution = (self.w.end_ns - self.w.start_ns) / STATE_SPANS_PER_TASK as u64;
        if let Some(last) = self
            .last_state
            .get(&span.pid)
            .and_then(|&i| self.w.task_states.get_mut(i))
        {
            if last.absorb(&span, resolution) {
                self.w.omitted.task_states += 1;
                return;
            }
        }
        self.last_state.insert(span.pid, self.w.task_states.len());
        self.w.task_states.push(span);
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
        let bins = self
            .busy
            .entry(cpu)
            .or_insert_with(|| vec![0; DENSITY_BINS as usize]);
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
}

/// The one-pass state machine behind [`collect`].
pub struct WindowCollector {
    opts: WindowOptions,
    /// Windows by start time; `next` is the first not yet opened.
    pending: Vec<Building>,
    next: usize,
    /// Indices into `pending` of windows open now.
    active: Vec<usize>,
    /// Per CPU: the task running and since when.
    current: HashMap<Cpu, (Tid, Ts)>,
    /// Tasks running now, with their CPU (the inverse of `current`).
    running: HashMap<Tid, Cpu>,
    names: HashMap<Tid, Comm>,
    histograms: BTreeMap<Tid, WaitHistogram>,
    /// Which wakeups are drawn: the analysis' one rule ([`WindowCollector::use_wakeup_rule`]).
    wakeups: WakeupSelector,
    /// Issued block requests by (device, sector).
    requests: HashMap<(u64, u64), PendingRequest>,
    /// Issues not remembered because [`MAX_PENDING_REQUESTS`] were pending.
    requests_dropped: u64,
    first_ts: Option<Ts>,
    omitted_windows: usize,
    /// Each CPU's first timed event (a task running then started before the trace).
    cpu_first: HashMap<Cpu, Ts>,
    /// Per task, the end of its latest before-the-trace slice (a task runs on one CPU at a
    /// time: another CPU's before-the-trace run of it starts after that).
    before_trace_end: HashMap<Tid, Ts>,
    /// The `timehist` rows the run slices come from.
    timehist: Timehist,
    rows: Vec<TimehistRow>,
    /// The model the waits and the tasks' state tracks come from, the findings' named
    /// tasks, and each one's current state (name, since, CPU).
    model: Model,
    named: BTreeSet<Tid>,
    states: HashMap<Tid, (&'static str, Ts, Option<Cpu>)>,
    transitions: Vec<Transition>,
    intervals: Vec<Interval>,
}

/// A track's name for a scheduler state, and its CPU when running.
fn state_name(s: TaskState) -> (&'static str, Option<Cpu>) {
    match s {
        TaskState::Unknown => ("unknown", None),
        TaskState::Running { cpu, .. } => ("running", Some(cpu)),
        TaskState::Runnable { .. } => ("runnable", None),
        TaskState::Sleeping { .. } => ("sleeping", None),
        TaskState::Blocked { .. } => ("blocked", None),
        TaskState::Dead { .. } => ("dead", None),
    }
}

fn push_capped<T>(v: &mut Vec<T>, omitted: &mut u64, max: usize, item: T) {
    if v.len() < max {
        v.push(item);
    } else {
        *omitted += 1;
    }
}

impl WindowCollector {
    /// A collector for these findings (in report order).
    pub fn new(findings: &[Finding], opts: WindowOptions) -> WindowCollector {
        let mut pending: Vec<Building> = findings
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
                named: f.tasks.iter().map(|t| t.pid).filter(|&p| p > 0).collect(),
                busy: BTreeMap::new(),
                last_state: HashMap::default(),
            })
            .collect();
        pending.sort_by_key(|b| b.w.start_ns);
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
        WindowCollector {
            opts,
            omitted_windows: findings.len().saturating_sub(opts.max_windows),
            pending,
            next: 0,
            active: Vec::new(),
            current: HashMap::default(),
            running: HashMap::default(),
            names: HashMap::default(),
            histograms,
            wakeups: WakeupSelector::preferring_waking(false),
            requests: HashMap::default(),
            requests_dropped: 0,
            first_ts: None,
            cpu_first: HashMap::default(),
            before_trace_end: HashMap::default(),
            timehist: Timehist::new(TimehistOptions::default()),
            rows: Vec::new(),
            model: Model::new(Timeline::new(WakeupSelector::preferring_waking(false))),
            named: findings
                .iter()
                .take(opts.max_windows)
                .flat_map(|f| f.tasks.iter().map(|t| t.pid))
                .filter(|&p| p > 0)
                .collect(),
            states: HashMap::default(),
            transitions: Vec::new(),
            intervals: Vec::new(),
        }
    }

    /// Closes windows ending before `ts` and opens those starting at or before it.
    fn advance(&mut self, ts: Ts) {
        let mut i = 0;
        while i < self.active.len() {
            let idx = self.active[i];
            if self.pending[idx].w.end_ns < ts {
                self.close(idx);
                self.active.swap_remove(i);
            } else {
                i += 1;
            }
        }
        while self.next < self.pending.len() && self.pending[self.next].w.start_ns <= ts {
            if self.pending[self.next].w.end_ns >= ts {
                self.active.push(self.next);
            } else {
                self.close(self.next); // window fully between two events
            }
            self.next += 1;
        }
    }

    /// Ends a window: slices still running and waits still open are clipped to its end.
    fn close(&mut self, idx: usize) {
        let max = self.opts.max_items;
        let b = &mut self.pending[idx];
        let (start, end) = (b.w.start_ns, b.w.end_ns);
        let mut cpus: Vec<_> = self.current.iter().collect();
        cpus.sort();
        for (&cpu, &(pid, since)) in cpus {
            // a CPU whose switch-out record of `pid` was lost still names it: the task runs
            // where it was switched in last, and is drawn there only
            if pid != 0 && since < end && self.running.get(&pid) == Some(&cpu) {
                let s = RunSlice {
                    cpu,
                    start_ns: since.max(start),
                    end_ns: end,
                    pid,
                    before_trace: false,
                };
                b.add_busy(cpu, since, end);
                b.pids.insert(pid);
                b.cpus.insert(cpu);
                push_capped(&mut b.w.slices, &mut b.w.omitted.slices, max, s);
            }
        }
        if b.w.omitted.slices > 0 {
            // the cap left slices out: the density shows how busy each CPU was anyway
            let width = b.bin_ns();
            b.w.density = b
                .busy
                .iter()
                .map(|(&cpu, bins)| stallscope_model::CpuDensity {
                    cpu,
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
        let tasks = self.model.timeline().tasks();
        let mut waits: Vec<(Tid, Ts, Option<Cpu>)> = tasks
            .slots()
            .iter()
            .filter(|s| tasks.find(s.tid).map(|i| tasks.get(i).tid) == Some(s.tid))
            .filter_map(|s| match s.data {
                TaskState::Runnable { since, cpu, .. } => Some((s.tid, since, cpu)),
                _ => None,
            })
            .collect();
        waits.sort();
        for (pid, since, cpu) in waits {
            if since < end {
                let Some(cpu) = cpu else {
                    b.w.omitted.waits += 1; // waiting for an unknown CPU: cannot be drawn
                    continue;
                };
                let wt = RunnableWait {
                    pid,
                    cpu,
                    start_ns: since.max(start),
                    end_ns: end,
                    open: true,
                };
                b.pids.insert(pid);
                b.cpus.insert(cpu);
                push_capped(&mut b.w.waits, &mut b.w.omitted.waits, max, wt);
            }
        }
        let mut open: Vec<_> = self.requests.iter().collect();
        open.sort_by_key(|(k, r)| (r.ts, **k));
        for (&(dev, sector), r) in open {
            if r.ts < end {
                let req = BlockRequest {
                    dev,
                    sector,
                    nr_sector: r.nr_sector,
                    rwbs: r.rwbs.clone(),
                    cpu: r.cpu,
                    start_ns: r.ts.max(start),
                    end_ns: end,
                    open: true,
                };
                push_capped(&mut b.w.requests, &mut b.w.omitted.requests, max, req);
            }
        }
        let mut open: Vec<_> = self
            .states
            .iter()
            .filter(|(pid, _)| b.named.contains(pid))
            .collect();
        open.sort_by_key(|(pid, _)| **pid);
        for (&pid, &(state, since, cpu)) in open {
            if since < end {
                let span = TaskStateSpan {
                    pid,
                    state: state.to_string(),
                    cpu,
                    start_ns: since.max(start),
                    end_ns: end,
                };
                b.push_state(span);
            }
        }
        for &pid in &b.named {
            if !self.states.contains_key(&pid) {
                // not seen yet: unknown over the whole window
                b.w.task_states.push(TaskStateSpan {
                    pid,
                    state: "unknown".into(),
                    cpu: None,
                    start_ns: start,
                    end_ns: end,
                });
            }
        }
        b.w.task_states
            .sort_by_key(|s| (s.pid, s.start_ns, s.end_ns));
        b.w.cpus = b.cpus.iter().copied().collect();
        b.w.cpus.sort_unstable();
        let mut pids: Vec<Tid> = b.pids.iter().copied().collect();
        pids.sort_unstable();
        b.w.tasks = pids
            .iter()
            .map(|&pid| WindowTask {
                pid,
                comm: match self.names.get(&pid) {
                    Some(c) => c.as_str().to_string(),
                    None if pid == 0 => "swapper".to_string(),
                    None => String::new(),
                },
            })
            .collect();
    }

    fn each_active(&mut self, mut f: impl FnMut(&mut Building, usize)) {
        let max = self.opts.max_items;
        for &idx in &self.active {
            f(&mut self.pending[idx], max);
        }
    }

    /// The analysis' wakeup rule for these inputs (which of `sched_waking` /
    /// `sched_wakeup` counts): the model's waits and the wakeups drawn follow it.
    pub fn use_wakeup_rule(&mut self, rule: WakeupSelector) {
        self.model = Model::new(Timeline::new(rule));
        self.wakeups = rule;
    }

    /// Feeds one event (in time order).
    pub fn on_event(&mut self, ev: &Event) {
        let (lo, hi) = self.opts.time_range;
        if ev.ts < lo || ev.ts > hi {
            return; // outside the analyzed range, like the analysis itself
        }
        let ts = ev.ts;
        let side_band = ev.kind.is_side_band();
        if side_band && ts == 0 {
            return; // a side-band name without a time (perf's synthesized records)
        }
        // the trace's (and each CPU's) first event is its first analyzed one, as the
        // analysis counts it: side-band task names are not events of a CPU
        let first = match (side_band, self.first_ts) {
            (_, Some(f)) => f,
            (true, None) => ts,
            (false, None) => *self.first_ts.insert(ts),
        };
        if !side_band {
            self.cpu_first.entry(ev.cpu).or_insert(ts);
        }
        self.advance(ts);
        // every event goes to timehist (wakeups and migrations shape its rows too)
        let mut rows = std::mem::take(&mut self.rows);
        rows.clear();
        self.timehist.process(ev, &mut |r| rows.push(*r));
        self.rows = rows;
        self.track_states(ev);
        match &ev.kind {
            EventKind::Switch(sw) => {
                let cpu = ev.cpu;
                self.names.insert(sw.prev.pid, sw.prev.comm);
                self.names.insert(sw.next.pid, sw.next.comm);
                let prev = sw.prev.pid;
                let rows = std::mem::take(&mut self.rows);
                for r in rows.iter().filter(|r| r.tid != 0 && r.run_ns > 0) {
                    let (start, end) = (r.ts_ns.saturating_sub(r.run_ns).max(first), r.ts_ns);
                    let (pid, rcpu) = (r.tid, r.cpu);
                    self.each_active(|b, max| {
                        if end <= b.w.start_ns {
                            return;
                        }
                        let s = RunSlice {
                            cpu: rcpu,
                            start_ns: start.max(b.w.start_ns),
                            end_ns: end,
                            pid,
                            before_trace: false,
                        };
                        b.add_busy(rcpu, start, end);
                        b.pids.insert(pid);
                        b.cpus.insert(rcpu);
                        push_capped(&mut b.w.slices, &mut b.w.omitted.slices, max, s);
                    });
                }
                // The CPU's first switch-out of a task never seen switched in: timehist gives
                // its run no length; it ran at least from the CPU's first event (marked).
                let first_switch_here = !self.current.contains_key(&cpu);
                if prev != 0
                    && first_switch_here
                    && !rows.iter().any(|r| r.tid == prev && r.run_ns > 0)
                {
                    let since = self.cpu_first.get(&cpu).copied().unwrap_or(ts).max(first);
                    let since = since.max(self.before_trace_end.get(&prev).copied().unwrap_or(0));
                    if since < ts {
                        self.before_trace_end.insert(prev, ts);
                        self.each_active(|b, max| {
                            if ts <= b.w.start_ns {
                                return;
                            }
                            let s = RunSlice {
                                cpu,
                                start_ns: since.max(b.w.start_ns),
                                end_ns: ts,
                                pid: prev,
                                before_trace: true,
                            };
                            b.add_busy(cpu, since, ts);
                            b.pids.insert(prev);
                            b.cpus.insert(cpu);
                            push_capped(&mut b.w.slices, &mut b.w.omitted.slices, max, s);
                        });
                    }
                }
                self.rows = rows;
                let next = sw.next.pid;
                if self.running.get(&prev) == Some(&cpu) {
                    self.running.remove(&prev);
                }
                if next != 0 {
                    self.running.insert(next, cpu);
                }
                self.current.insert(cpu, (next, ts));
            }
            EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => {
                self.names.insert(w.task.pid, w.task.comm);
                if self.wakeups.select(&ev.kind).is_some() {
                    let mark = WakeupMark {
                        ts_ns: ts,
                        cpu: ev.cpu,
                        waker_pid: ev.pid,
                        wakee_pid: w.task.pid,
                        target_cpu: w.target_cpu,
                    };
                    self.each_active(|b, max| {
                        b.pids.insert(mark.wakee_pid);
                        b.pids.insert(mark.waker_pid);
                        b.cpus.insert(mark.cpu);
                        b.cpus.extend(mark.target_cpu);
                        push_capped(
                            &mut b.w.wakeups,
                            &mut b.w.omitted.wakeups,
                            max,
                            mark.clone(),
                        );
                    });
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
                        ts_ns: ts,
                        cpu: ev.cpu,
                        pid: ev.pid,
                        event: g.name.clone(),
                        text: text.chars().take(TextMark::MAX_CHARS).collect(),
                    };
                    self.each_active(|b, max| {
                        push_capped(
                            &mut b.w.markers,
                            &mut b.w.omitted.markers,
                            max,
                            mark.clone(),
                        );
                    });
                }
            }
            EventKind::Migrate(m) => {
                self.names.insert(m.task.pid, m.task.comm);
                let mark = MigrationMark {
                    ts_ns: ts,
                    pid: m.task.pid,
                    from_cpu: m.orig_cpu,
                    to_cpu: m.dest_cpu,
                };
                self.each_active(|b, max| {
                    b.pids.insert(mark.pid);
                    b.cpus.insert(mark.from_cpu);
                    b.cpus.insert(mark.to_cpu);
                    push_capped(
                        &mut b.w.migrations,
                        &mut b.w.omitted.migrations,
                        max,
                        mark.clone(),
                    );
                });
            }
            // Block tracepoints decoded natively by the readers.
            EventKind::Block(b) => match (b.action, b.dev) {
                (stallscope_model::BlockAction::Issue, Some(dev)) => {
                    let (nr, rwbs) = (u64::from(b.nr_sector), b.rwbs.to_letters());
                    self.request_issued(ts, ev.cpu, u64::from(dev.0), b.sector, nr, rwbs);
                }
                (stallscope_model::BlockAction::Complete, Some(dev)) => {
                    self.request_completed(ts, u64::from(dev.0), b.sector);
                }
                _ => {}
            },
            _ => {}
        }
    }

    /// Follows the scheduler state machine for the findings' tasks: each state change ends
    /// the task's current span (drawn in the windows open now that name the task).
    fn track_states(&mut self, ev: &Event) {
        let mut ts_list = std::mem::take(&mut self.transitions);
        let mut intervals = std::mem::take(&mut self.intervals);
        ts_list.clear();
        intervals.clear();
        self.model
            .process(ev, &mut |i| intervals.push(i), &mut |t| ts_list.push(*t));
        for i in &intervals {
            if let Interval::Wait {
                tid,
                start,
                end,
                ran_on: Some(cpu),
                ..
            } = *i
            {
                self.wait_ended(tid, (start, end), cpu);
            }
        }
        self.intervals = intervals;
        for t in &ts_list {
            let Transition::State { ts, tid, from, to } = *t else {
                continue;
            };
            if !self.named.contains(&tid) {
                continue;
            }
            let (since, state, cpu) = match self.states.get(&tid) {
                Some(&(name, since, cpu)) => (since, name, cpu),
                None => (
                    self.first_ts.unwrap_or(ts),
                    state_name(from).0,
                    state_name(from).1,
                ),
            };
            if since < ts {
                self.each_active(|b, _| {
                    if b.named.contains(&tid) && ts > b.w.start_ns {
                        let span = TaskStateSpan {
                            pid: tid,
                            state: state.to_string(),
                            cpu,
                            start_ns: since.max(b.w.start_ns),
                            end_ns: ts,
                        };
                        b.push_state(span);
                    }
                });
            }
            let (name, cpu) = state_name(to);
            self.states.insert(tid, (name, ts, cpu));
        }
        self.transitions = ts_list;
    }

    /// A wait of the model that ended in a switch-in on `cpu`: drawn in the open windows,
    /// counted in the task's histogram.
    fn wait_ended(&mut self, tid: Tid, (start, end): (Ts, Ts), cpu: Cpu) {
        if let Some(h) = self.histograms.get_mut(&tid) {
            h.add(end.saturating_sub(start));
        }
        self.each_active(|b, max| {
            let wt = RunnableWait {
                pid: tid,
                cpu,
                start_ns: start.max(b.w.start_ns),
                end_ns: end,
                open: false,
            };
            b.pids.insert(tid);
            b.cpus.insert(cpu);
            push_capped(&mut b.w.waits, &mut b.w.omitted.waits, max, wt);
        });
    }

    /// A request issued to the driver: remembered until its completion.
    fn request_issued(
        &mut self,
        ts: Ts,
        cpu: Cpu,
        dev: u64,
        sector: u64,
        nr_sector: u64,
        rwbs: String,
    ) {
        if self.requests.len() < MAX_PENDING_REQUESTS || self.requests.contains_key(&(dev, sector))
        {
            let r = PendingRequest {
                ts,
                cpu,
                nr_sector,
                rwbs,
            };
            self.requests.insert((dev, sector), r);
        } else {
            self.requests_dropped += 1;
        }
    }

    /// A completion: the matching issued request becomes a lane in the active windows.
    fn request_completed(&mut self, ts: Ts, dev: u64, sector: u64) {
        if let Some(r) = self.requests.remove(&(dev, sector)) {
            self.each_active(|b, max| {
                let req = BlockRequest {
                    dev,
                    sector,
                    nr_sector: r.nr_sector,
                    rwbs: r.rwbs.clone(),
                    cpu: r.cpu,
                    start_ns: r.ts.max(b.w.start_ns),
                    end_ns: ts,
                    open: false,
                };
                push_capped(&mut b.w.requests, &mut b.w.omitted.requests, max, req);
            });
        }
    }

    /// Closes the remaining windows and returns them in finding order.
    pub fn finish(mut self) -> FindingWindows {
        for idx in std::mem::take(&mut self.active) {
            self.close(idx);
        }
        for idx in self.next..self.pending.len() {
            self.close(idx); // starts after the last event
        }
        let mut windows: Vec<FindingWindow> = self.pending.into_iter().map(|b| b.w).collect();
        windows.sort_by_key(|w| w.finding);
        FindingWindows {
            margin_ns: self.opts.margin_ns,
            max_items: self.opts.max_items,
            windows,
            histograms: self.histograms.into_values().collect(),
            omitted_windows: self.omitted_windows,
            note: if self.requests_dropped > 0 {
                format!(
                    "{} block requests were issued while {MAX_PENDING_REQUESTS} were pending and are not drawn.",
                    self.requests_dropped
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
        let mut c = WindowCollector::new(&[finding(1000, 2000, 7)], opts);
        c.on_event(&switch(1, 0, 0, "R", 5));
        c.on_event(&marker(500, "before the window"));
        c.on_event(&marker(1500, "B|9|commit transaction"));
        c.on_event(&switch(2000, 0, 5, "R", 7));
        c.on_event(&marker(3000, "after it"));
        let w = c.finish();
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

    /// The wakeups drawn follow the analysis' rule: with `sched_waking` declared a
    /// `sched_wakeup` record is not drawn (and the wait runs from the waking), as the model
    /// and the detectors count them.
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
            let mut c = WindowCollector::new(&[finding(1000, 2000, 7)], WindowOptions::default());
            c.use_wakeup_rule(rule);
            c.on_event(&switch(1, 0, 0, "R", 5));
            c.on_event(&switch(2, 0, 5, "S", 7));
            c.on_event(&switch(3, 0, 7, "S", 5));
            c.on_event(&wake(EventKind::Wakeup, 1000)); // before any sched_waking
            c.on_event(&wake(EventKind::Waking, 1100));
            c.on_event(&wake(EventKind::Wakeup, 1200));
            c.on_event(&switch(2000, 0, 5, "S", 7));
            let w = c.finish();
            let marks: Vec<Ts> = w.windows[0].wakeups.iter().map(|m| m.ts_ns).collect();
            let waits: Vec<Ts> = w.windows[0].waits.iter().map(|m| m.start_ns).collect();
            (marks, waits)
        };
        // sched_waking declared: only the waking counts
        assert_eq!(
            drawn(WakeupSelector::preferring_waking(true)),
            (vec![1100], vec![1100])
        );
        // not declared: sched_wakeup counts until a sched_waking is seen
        assert_eq!(
            drawn(WakeupSelector::preferring_waking(false)),
            (vec![1000, 1100], vec![1000])
        );
    }

    #[test]
    fn slices_waits_and_histogram_around_a_finding() {
        let opts = WindowOptions {
            margin_ns: 100,
            ..Default::default()
        };
        let mut c = WindowCollector::new(&[finding(1000, 2000, 7)], opts);
        // (timehist takes a switch-in at time 0 for "never switched in": the trace starts at 1)
        c.on_event(&switch(1, 0, 0, "R", 5)); // 5 runs on cpu 0 from 1
        c.on_event(&ev(
            1000,
            0,
            5,
            EventKind::Waking(Wakeup {
                task: task(7, "v"),
                target_cpu: Some(0),
            }),
        ));
        c.on_event(&switch(2000, 0, 5, "R", 7)); // 7 waited 1000 ns; 5 preempted
        c.on_event(&switch(2500, 0, 7, "S", 5)); // 5 waited 500 ns
        c.on_event(&switch(5000, 0, 5, "S", 0));
        let w = c.finish();
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
                    open: false
                },
                RunnableWait {
                    pid: 5,
                    cpu: 0,
                    start_ns: 2000,
                    end_ns: 2100,
                    open: true
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
        let mut c = WindowCollector::new(&[finding(0, 1_000_000, 1)], opts);
        for i in 0..10u64 {
            c.on_event(&switch(
                1 + i * 10,
                0,
                (i % 2 + 1) as Tid,
                "R",
                (2 - i % 2) as Tid,
            ));
        }
        let w = c.finish();
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
        let mut c = WindowCollector::new(&[finding(100, 1000, 1)], opts);
        c.on_event(&block(50, "block_rq_issue", 8));
        c.on_event(&block(200, "block_rq_issue", 16));
        c.on_event(&block(300, "block_rq_complete", 8));
        c.on_event(&block(2000, "block_rq_complete", 16));
        let w = c.finish();
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
        let mut c = WindowCollector::new(&[finding(1000, 2_001_000, 7)], opts);
        c.on_event(&switch(1, 0, 0, "R", 5));
        let mut ts = 1000;
        for k in 0..200_000u64 {
            let (prev, next) = if k % 2 == 0 { (5, 7) } else { (7, 5) };
            c.on_event(&switch(ts, 0, prev, "R", next));
            ts += 10;
        }
        let w = c.finish();
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
}
