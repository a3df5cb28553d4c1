//! [`Latency`]: `perf sched latency`, reproduced definition for definition.
//!
//! perf keeps, per task, a list of "work atoms"; only the last one matters for what it
//! prints, so each task here holds the state of its last atom plus running totals:
//!
//! * **switch** (CPU c, prev P, next N, time t): P gets a new atom that starts `WaitCpu`
//!   with its wait starting at t when P left runnable (`R`, or `R+` = preempted), else
//!   `Sleeping`. If N was never seen, N gets an atom `WaitCpu` from t (a zero wait). Then,
//!   if N's atom is `WaitCpu`, the wait ends: `delay = t - wait_start` is added to N's total,
//!   counted (the "Switches" column) and compared with N's maximum (strictly greater
//!   replaces: start and end of the longest wait are kept). A wait "starting" after t is
//!   dropped (`Ignore`). "Context switch bugs": P is not the task the previous switch on c
//!   switched in.
//! * **wakeup** (see [`WakeupSelector`]: `sched_waking` preferred) of task W at t: an unseen
//!   W gets a `Sleeping` atom at t. Then, on a whole-system run (no `--cpu`), a wakeup of a
//!   task whose atom is not `Sleeping` is ignored. Otherwise it counts as a wakeup
//!   "timestamp"; if W's atom was switched out after t it is an "unordered timestamp" and
//!   ignored; else the atom becomes `WaitCpu` with the wait starting at t.
//! * **`sched_stat_runtime`** of task T: an unseen T gets a `WaitCpu` atom at t; the
//!   runtime is added to T's total.
//! * **`sched_migrate_task`**, only with `--cpu` (perf's `-C`): an unseen task gets a
//!   `WaitCpu` atom at t; the task's atom is restarted at t (its wait starts again).
//!   perf's `-C` changes only this and the wakeup rule above; it does not restrict the
//!   table to that CPU.
//! * A fork (`sched_process_fork`) of a tid that is already known starts a new task (perf
//!   keeps one entry per thread object); lost-event records are counted.
//!
//! Output: one row per task with at least one counted wait, the idle task (pid 0) excluded;
//! rows merged by name unless `--pids` (the name is the task's last name, see
//! [`TaskTable`]). `avg = total / count` (integer ns). Sorting: descending by each key in
//! turn (default `avg, max, switch, runtime`); ties keep perf's order, which is by name
//! descending (byte order) when merged and by tid descending with `--pids`. When merging,
//! tasks are visited by tid descending and a longer maximum replaces the current one only
//! when strictly longer, as perf does.

use std::cmp::Ordering;

use serde::Serialize;
use std::fmt;

use stallscope_model::sched_record::{IDLE_TID, LOST_UNKNOWN};
use stallscope_model::{
    Comm, Cpu, DataQuality, Event, EventKind, PrevState, Problem, SchedBatch, SchedRecord,
    SchedRecordKind, SpanPos, Tid, Ts,
};

use crate::tasks::TaskTable;
use crate::wakeups::{WakeupKind, WakeupSelector};
use crate::PerfFlavor;

/// A `--sort` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    /// Task id.
    Pid,
    /// Average delay.
    Avg,
    /// Maximum delay.
    Max,
    /// Number of waits counted ("Switches").
    Switch,
    /// Total runtime.
    Runtime,
}

impl SortKey {
    /// Parses a key as perf spells it.
    pub fn from_name(s: &str) -> Option<SortKey> {
        Some(match s {
            "pid" => SortKey::Pid,
            "avg" => SortKey::Avg,
            "max" => SortKey::Max,
            "switch" => SortKey::Switch,
            "runtime" => SortKey::Runtime,
            _ => return None,
        })
    }

    /// perf's default order: `avg, max, switch, runtime`.
    pub const DEFAULT: [SortKey; 4] = [
        SortKey::Avg,
        SortKey::Max,
        SortKey::Switch,
        SortKey::Runtime,
    ];

    /// Parses a comma- or space-separated list (perf accepts both); `Err` names the bad key.
    pub fn parse_list(s: &str) -> Result<Vec<SortKey>, String> {
        s.split([',', ' '])
            .filter(|k| !k.is_empty())
            .map(|k| SortKey::from_name(k).ok_or_else(|| k.to_string()))
            .collect()
    }
}

/// Options of the analysis.
#[derive(Clone, Debug)]
pub struct LatencyOptions {
    /// One row per task instead of per name (`--pids`, perf `-p`).
    pub by_pid: bool,
    /// Sort keys, most significant first.
    pub sort: Vec<SortKey>,
    /// perf's `-C` ("profile CPU"): see the module docs for what it changes.
    pub profile_cpu: Option<Cpu>,
    /// Which perf release to reproduce.
    pub flavor: PerfFlavor,
    /// Whether the inputs declare `sched_waking` (see [`WakeupSelector`]).
    pub waking_declared: bool,
}

impl Default for LatencyOptions {
    fn default() -> Self {
        LatencyOptions {
            by_pid: false,
            sort: SortKey::DEFAULT.to_vec(),
            profile_cpu: None,
            flavor: PerfFlavor::Current,
            waking_declared: false,
        }
    }
}

/// perf's atom states (`THREAD_SLEEPING`, `THREAD_WAIT_CPU`, `THREAD_SCHED_IN`, `THREAD_IGNORE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum AtomState {
    #[default]
    Sleeping,
    WaitCpu,
    SchedIn,
    Ignore,
}

/// One task's last atom and totals.
#[derive(Clone, Copy, Debug, Default)]
struct TaskLatency {
    /// False until perf would have created the task's atom list.
    seen: bool,
    state: AtomState,
    sched_out: Ts,
    wake_up: Ts,
    total_delay: u64,
    waits: u64,
    max_delay: u64,
    max_start: Ts,
    max_end: Ts,
    runtime: u64,
}

impl TaskLatency {
    /// perf `add_sched_out_event`: a new atom, waiting for a CPU from `ts` when `runnable`.
    #[inline]
    fn sched_out(&mut self, runnable: bool, ts: Ts) {
        self.seen = true;
        self.sched_out = ts;
        if runnable {
            self.state = AtomState::WaitCpu;
            self.wake_up = ts;
        } else {
            self.state = AtomState::Sleeping;
            self.wake_up = 0;
        }
    }

    /// perf `add_sched_in_event`.
    #[inline]
    fn sched_in(&mut self, ts: Ts) {
        if self.state != AtomState::WaitCpu {
            return;
        }
        if ts < self.wake_up {
            self.state = AtomState::Ignore;
            return;
        }
        self.state = AtomState::SchedIn;
        let delay = ts - self.wake_up;
        self.total_delay += delay;
        if delay > self.max_delay {
            self.max_delay = delay;
            self.max_start = self.wake_up;
            self.max_end = ts;
        }
        self.waits += 1;
    }
}

/// perf's footer counters (`print_bad_events`) and totals.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct LatencyStats {
    /// Events fed to the analysis.
    pub events: u64,
    /// `sched_switch` events among them (a trace whose switches switch in no task counted
    /// has switches but no row).
    pub switches: u64,
    /// Wakeups considered (perf's `nr_timestamps`).
    pub wakeup_timestamps: u64,
    /// Wakeups earlier than the task's switch-out (perf's `nr_unordered_timestamps`).
    pub unordered_timestamps: u64,
    /// Events lost, summed over lost-event records that say how many.
    pub lost_events: u64,
    /// Lost-event records (perf's "chunks").
    pub lost_chunks: u64,
    /// Switches whose prev task is not the CPU's current one (perf's "context switch bugs").
    pub context_switch_bugs: u64,
    /// Sum of the rows' runtimes.
    pub total_runtime_ns: u64,
    /// Sum of the rows' counted waits.
    pub total_switches: u64,
}

/// One row of the table.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct LatencyRow {
    /// Task name.
    pub comm: Comm,
    /// The task id when the row is one task; `None` when several were merged.
    pub pid: Option<Tid>,
    /// Every task id in the row, ascending.
    pub pids: Vec<Tid>,
    /// Total runtime from `sched_stat_runtime`, ns.
    pub runtime_ns: u64,
    /// Waits counted ("Switches").
    pub switches: u64,
    /// Total delay / switches, ns.
    pub avg_delay_ns: u64,
    /// Longest wait, ns.
    pub max_delay_ns: u64,
    /// When the longest wait started (0 when none).
    pub max_delay_start_ns: Ts,
    /// When it ended (0 when none).
    pub max_delay_end_ns: Ts,
    #[serde(skip)]
    total_delay: u64,
    /// The task perf names the row after (the first merged: the highest tid).
    #[serde(skip)]
    representative: Tid,
}

/// The result.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyReport {
    /// Rows in display order.
    pub tasks: Vec<LatencyRow>,
    /// Footer counters and totals.
    pub stats: LatencyStats,
    /// The footer's anomalies with their first occurrences: `switch_prev_mismatch` (perf's
    /// context switch bugs) and `unordered_wakeup_timestamps`.
    pub quality: DataQuality,
}

/// The `perf sched latency` analysis.
#[derive(Debug)]
pub struct Latency {
    opts: LatencyOptions,
    tasks: TaskTable<TaskLatency>,
    cpu_current: Vec<Option<Tid>>,
    wakeups: WakeupSelector,
    stats: LatencyStats,
    dq: DataQuality,
}

impl Latency {
    /// A new analysis.
    pub fn new(opts: LatencyOptions) -> Latency {
        let wakeups = match opts.flavor {
            PerfFlavor::Current => WakeupSelector::preferring_waking(opts.waking_declared),
            PerfFlavor::Perf6_1 => WakeupSelector::perf_6_1_latency(),
        };
        Latency {
            opts,
            tasks: TaskTable::default(),
            cpu_current: Vec::new(),
            wakeups,
            stats: LatencyStats::default(),
            dq: DataQuality::default(),
        }
    }

    /// Whether a switch-out in `state` starts a wait (perf's `prev_state == 'R'`).
    #[inline]
    fn leaves_runnable(&self, state: PrevState) -> bool {
        match self.opts.flavor {
            PerfFlavor::Current => state.is_runnable(),
            // perf 6.1: "RSDTtXZPI"[raw] is 'R' only for a raw value of 0, i.e. plain `R`.
            PerfFlavor::Perf6_1 => state == PrevState::RUNNING,
        }
    }

    /// The task's slot, creating it (and, when perf would, its first atom) as needed.
    /// `comm` is the name the event's payload gives the task (`None`: a lean record, whose
    /// names arrive as `PayloadComm` records).
    #[inline(always)]
    fn task(
        &mut self,
        tid: Tid,
        comm: Option<&Comm>,
        first_atom_runnable: Option<bool>,
        ts: Ts,
    ) -> usize {
        let (i, _) = self.tasks.slot(tid);
        match comm {
            Some(c) => self.tasks.note_payload_comm(i, c),
            None => self.tasks.apply_stream_comm(i),
        }
        let t = &mut self.tasks.get_mut(i).data;
        if !t.seen {
            if let Some(runnable) = first_atom_runnable {
                t.sched_out(runnable, ts);
            }
        }
        i
    }

    /// Feeds one event.
    pub fn process(&mut self, ev: &Event) {
        self.stats.events += 1;
        let ts = ev.ts;
        let at = Where {
            input: ev.span.input(),
            pos: ev.span.pos(),
            ts,
            cpu: ev.cpu,
        };
        match &ev.kind {
            EventKind::Switch(s) => self.on_switch(
                at,
                (s.prev.pid, Some(&s.prev.comm)),
                (s.next.pid, Some(&s.next.comm)),
                s.prev_state,
            ),
            EventKind::StatRuntime(r) => {
                self.on_stat_runtime(ts, r.task.pid, Some(&r.task.comm), r.runtime)
            }
            EventKind::Waking(_) | EventKind::Wakeup(_) | EventKind::WakeupNew(_) => {
                if let Some(w) = self.wakeups.select(&ev.kind) {
                    self.on_wakeup(at, w.task.pid, Some(&w.task.comm));
                }
            }
            EventKind::Migrate(m) => self.on_migrate(ts, m.task.pid, Some(&m.task.comm)),
            EventKind::Fork {
                child_pid,
                child_comm,
                ..
            } => self.on_fork(*child_pid, child_comm),
            EventKind::Lost { count } => self.on_lost(*count),
            EventKind::TaskComm { tgid, tid, comm } => self.tasks.note_sideband(*tid, *tgid, comm),
            EventKind::Exit(_)
            | EventKind::Exec { .. }
            | EventKind::Generic(_)
            | EventKind::Mapping(_)
            | EventKind::Block(_) => {}
        }
    }

    /// Feeds every record of `batch`, in order: [`Latency::process_record`] on each.
    pub fn process_batch(&mut self, batch: &SchedBatch) {
        for r in &batch.records {
            self.process_record(r, batch);
        }
    }

    /// Feeds one lean record of `batch` (see [`SchedRecord`]): the same analysis as
    /// [`Latency::process`] on the event the record stands for.
    #[inline]
    pub fn process_record(&mut self, r: &SchedRecord, batch: &SchedBatch) {
        // The common kinds first, inline; the rest out of line.
        match r.kind {
            SchedRecordKind::Switch => {
                self.stats.events += 1;
                self.on_switch(Where::of(r), (r.a, None), (r.b, None), r.prev_state);
            }
            SchedRecordKind::StatRuntime => {
                self.stats.events += 1;
                self.on_stat_runtime(r.ts, r.a, None, r.value);
            }
            SchedRecordKind::Waking => {
                self.stats.events += 1;
                if self.wakeups.select_kind(WakeupKind::Waking) {
                    self.on_wakeup(Where::of(r), r.a, None);
                }
            }
            SchedRecordKind::PayloadComm => {
                if r.a == IDLE_TID {
                    // The idle task's name comes once, at the end of the stream (see
                    // `stallscope_model::sched_record`): it is its name from then on.
                    let (i, _) = self.tasks.slot(r.a);
                    self.tasks.note_payload_comm(i, &batch.comm(r.value));
                } else {
                    self.tasks.note_stream_comm(r.a, &batch.comm(r.value));
                }
            }
            _ => self.process_other_record(r, batch),
        }
    }

    /// [`Latency::process_record`] for the less common kinds.
    #[inline(never)]
    fn process_other_record(&mut self, r: &SchedRecord, batch: &SchedBatch) {
        self.stats.events += 1;
        let at = Where::of(r);
        match r.kind {
            SchedRecordKind::Wakeup => {
                if self.wakeups.select_kind(WakeupKind::Wakeup) {
                    self.on_wakeup(at, r.a, None);
                }
            }
            SchedRecordKind::WakeupNew => {
                if self.wakeups.select_kind(WakeupKind::WakeupNew) {
                    self.on_wakeup(at, r.a, None);
                }
            }
            SchedRecordKind::Migrate => self.on_migrate(r.ts, r.a, None),
            SchedRecordKind::Fork => self.on_fork(r.a, &batch.comm(r.value)),
            SchedRecordKind::Lost => self.on_lost((r.value != LOST_UNKNOWN).then_some(r.value)),
            SchedRecordKind::TaskComm => self.tasks.note_sideband(r.a, r.b, &batch.comm(r.value)),
            // Handled by `process_record` itself; never sent here.
            SchedRecordKind::Switch
            | SchedRecordKind::StatRuntime
            | SchedRecordKind::Waking
            | SchedRecordKind::PayloadComm
            | SchedRecordKind::Other => {}
        }
    }

    #[inline(always)]
    fn on_switch(
        &mut self,
        at: Where,
        (prev, prev_comm): (Tid, Option<&Comm>),
        (next, next_comm): (Tid, Option<&Comm>),
        prev_state: PrevState,
    ) {
        self.stats.switches += 1;
        let c = at.cpu as usize;
        if c < (1 << 16) {
            if c >= self.cpu_current.len() {
                self.cpu_current.resize(c + 1, None);
            }
            if let Some(cur) = self.cpu_current[c] {
                if cur != prev {
                    self.stats.context_switch_bugs += 1;
                    if self.stats.context_switch_bugs <= EXAMPLES {
                        self.context_switch_bug(at, prev, cur);
                    }
                }
            }
            self.cpu_current[c] = Some(next);
        }
        let ts = at.ts;
        let runnable = self.leaves_runnable(prev_state);
        let p = self.task(prev, prev_comm, None, ts);
        self.tasks.get_mut(p).data.sched_out(runnable, ts);
        let n = self.task(next, next_comm, Some(true), ts);
        self.tasks.get_mut(n).data.sched_in(ts);
    }

    /// One of the first [`EXAMPLES`] of perf's "context switch bugs" (counted by the
    /// caller): noted with an example (the count of the rest is added to the data-quality
    /// note by [`Latency::finish`]).
    #[cold]
    #[inline(never)]
    fn context_switch_bug(&mut self, at: Where, prev: Tid, cur: Tid) {
        self.dq.add(Problem::SwitchPrevMismatch, 1, || {
            format!("{at}: prev_pid={prev} but the CPU was running pid {cur}")
        });
    }

    #[inline]
    fn on_stat_runtime(&mut self, ts: Ts, tid: Tid, comm: Option<&Comm>, runtime: u64) {
        let i = self.task(tid, comm, Some(true), ts);
        self.tasks.get_mut(i).data.runtime += runtime;
    }

    /// A wakeup the [`WakeupSelector`] picked.
    #[inline(always)]
    fn on_wakeup(&mut self, at: Where, tid: Tid, comm: Option<&Comm>) {
        let ts = at.ts;
        let i = self.task(tid, comm, Some(false), ts);
        let t = &mut self.tasks.get_mut(i).data;
        if self.opts.profile_cpu.is_none() && t.state != AtomState::Sleeping {
            return;
        }
        self.stats.wakeup_timestamps += 1;
        if t.sched_out > ts {
            let out = t.sched_out;
            self.stats.unordered_timestamps += 1;
            if self.stats.unordered_timestamps <= EXAMPLES {
                self.unordered_wakeup(at, tid, out);
            }
            return;
        }
        t.state = AtomState::WaitCpu;
        t.wake_up = ts;
    }

    /// One of the first [`EXAMPLES`] wakeups before the task's switch-out (counted by the
    /// caller; see [`Latency::context_switch_bug`]).
    #[cold]
    #[inline(never)]
    fn unordered_wakeup(&mut self, at: Where, tid: Tid, out: Ts) {
        self.dq.add(Problem::UnorderedWakeupTimestamps, 1, || {
            format!("{at}: wakeup of pid {tid}, switched out at {out}")
        });
    }

    fn on_migrate(&mut self, ts: Ts, tid: Tid, comm: Option<&Comm>) {
        if self.opts.profile_cpu.is_none() {
            return;
        }
        let i = self.task(tid, comm, Some(true), ts);
        let t = &mut self.tasks.get_mut(i).data;
        t.sched_out = ts;
        t.wake_up = ts;
        self.stats.wakeup_timestamps += 1;
    }

    fn on_fork(&mut self, child: Tid, child_comm: &Comm) {
        if self
            .tasks
            .find(child)
            .is_some_and(|i| self.tasks.get(i).data.seen)
        {
            self.tasks.retire(child);
        }
        let (i, _) = self.tasks.slot(child);
        self.tasks.note_payload_comm(i, child_comm);
        self.tasks.set_applied_stream_comm(i, child_comm);
    }

    fn on_lost(&mut self, count: Option<u64>) {
        self.stats.lost_chunks += 1;
        self.stats.lost_events = self.stats.lost_events.saturating_add(count.unwrap_or(0));
    }

    /// Events fed so far.
    pub fn events(&self) -> u64 {
        self.stats.events
    }

    /// Builds the table.
    pub fn finish(self) -> LatencyReport {
        let Latency {
            opts,
            tasks,
            mut stats,
            mut dq,
            ..
        } = self;
        // The occurrences past the examples, counted only (see `context_switch_bug`).
        for (n, problem) in [
            (stats.context_switch_bugs, Problem::SwitchPrevMismatch),
            (
                stats.unordered_timestamps,
                Problem::UnorderedWakeupTimestamps,
            ),
        ] {
            if n > EXAMPLES {
                // The examples are all kept already: no new one is asked for.
                dq.add_count(problem, n - EXAMPLES);
            }
        }
        // Every task perf has atoms for, by tid descending (perf's tree order); ties (a
        // reused tid) newest first.
        let mut order: Vec<usize> = (0..tasks.len())
            .filter(|&i| tasks.get(i).data.seen)
            .collect();
        order.sort_by(|&a, &b| tasks.get(b).tid.cmp(&tasks.get(a).tid).then(b.cmp(&a)));
        let mut rows: Vec<LatencyRow> = Vec::new();
        if opts.by_pid {
            for &i in &order {
                let s = tasks.get(i);
                rows.push(row_of(s.comm, s.tid, &s.data));
            }
        } else {
            // Merge by name; visiting order as perf's merge (tid descending).
            let mut by_name: rustc_hash::FxHashMap<Comm, usize> = rustc_hash::FxHashMap::default();
            for &i in &order {
                let s = tasks.get(i);
                match by_name.get(&s.comm) {
                    None => {
                        by_name.insert(s.comm, rows.len());
                        rows.push(row_of(s.comm, s.tid, &s.data));
                    }
                    Some(&r) => {
                        let row = &mut rows[r];
                        row.pid = None;
                        row.pids.push(s.tid);
                        row.runtime_ns += s.data.runtime;
                        row.switches += s.data.waits;
                        row.total_delay += s.data.total_delay;
                        if row.max_delay_ns < s.data.max_delay {
                            row.max_delay_ns = s.data.max_delay;
                            row.max_delay_start_ns = s.data.max_start;
                            row.max_delay_end_ns = s.data.max_end;
                        }
                    }
                }
            }
            // perf's merged tree is iterated by name descending.
            rows.sort_by(|a, b| b.comm.as_str().as_bytes().cmp(a.comm.as_str().as_bytes()));
        }
        rows.retain(|r| r.switches > 0 && !r.pids.contains(&0));
        for r in &mut rows {
            r.pids.sort_unstable();
            r.avg_delay_ns = r.total_delay / r.switches;
            stats.total_runtime_ns += r.runtime_ns;
            stats.total_switches += r.switches;
        }
        // Stable sort: equal rows keep the tree order above, as perf's rbtree insert does.
        rows.sort_by(|a, b| compare(&opts.sort, b, a));
        LatencyReport {
            tasks: rows,
            stats,
            quality: dq,
        }
    }
}

/// Data-quality occurrences reported with an example each (the examples kept per key).
const EXAMPLES: u64 = DataQuality::MAX_EXAMPLES as u64;

/// Where an event is, for data-quality examples.
#[derive(Clone, Copy)]
struct Where {
    input: u16,
    pos: SpanPos,
    ts: Ts,
    cpu: Cpu,
}

impl Where {
    /// Where a lean record is.
    #[inline]
    fn of(r: &SchedRecord) -> Where {
        Where {
            input: 0,
            pos: SpanPos::Byte(r.pos),
            ts: r.ts,
            cpu: r.cpu,
        }
    }
}

impl fmt::Display for Where {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "input #{} {}: ts {} cpu {}",
            self.input, self.pos, self.ts, self.cpu
        )
    }
}

fn row_of(comm: Comm, tid: Tid, t: &TaskLatency) -> LatencyRow {
    LatencyRow {
        comm,
        pid: Some(tid),
        pids: vec![tid],
        runtime_ns: t.runtime,
        switches: t.waits,
        avg_delay_ns: 0,
        max_delay_ns: t.max_delay,
        max_delay_start_ns: t.max_start,
        max_delay_end_ns: t.max_end,
        total_delay: t.total_delay,
        representative: tid,
    }
}

/// perf's `thread_lat_cmp`: the first key that differs decides (ascending; callers reverse).
fn compare(keys: &[SortKey], a: &LatencyRow, b: &LatencyRow) -> Ordering {
    for k in keys {
        let o = match k {
            SortKey::Pid => a.representative.cmp(&b.representative),
            SortKey::Avg => a.avg_delay_ns.cmp(&b.avg_delay_ns),
            SortKey::Max => a.max_delay_ns.cmp(&b.max_delay_ns),
            SortKey::Switch => a.switches.cmp(&b.switches),
            SortKey::Runtime => a.runtime_ns.cmp(&b.runtime_ns),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests;
