//! [`Timeline`]: per-CPU current task and per-task scheduler state, driven by normalized
//! events, emitting [`Transition`]s.
//!
//! ```text
//!                 wakeup / wakeup_new                switch-in
//!   Sleeping ───────────────────────────► Runnable ───────────► Running{cpu}
//!   Blocked  ─┘  (Runnable{cause: Wakeup})    ▲                    │
//!   Unknown  ─┘                               │ switch-out R / R+  │
//!                                             └────────────────────┤ (cause: Preempted)
//!                        switch-out S, I, T, t, P …  ◄──────────────┤ → Sleeping
//!                        switch-out D                ◄──────────────┤ → Blocked
//!                        switch-out X, Z             ◄──────────────┘ → Dead
//! ```
//!
//! * A task first seen in any event starts `Unknown`; a first switch-in takes it straight to
//!   `Running`, a first switch-out to the state the switch says.
//! * A wakeup of a `Runnable` or `Running` task changes nothing (the kernel wakes tasks that
//!   are already on a runqueue; perf ignores those wakeups too).
//! * Which wakeup tracepoint counts is decided by [`WakeupSelector`] (perf's rule: prefer
//!   `sched_waking`).
//! * `sched_process_fork` of a tid that is already known starts a fresh task (tid reuse).
//! * The idle task (pid 0) is per-CPU and not tracked as a task; the CPU's current task is
//!   then `Some(0)`.
//!
//! Invariants, checked by [`Timeline::check_invariants`] and the randomized tests below:
//! a CPU's current task (other than idle) is `Running` on that CPU, and a `Running` task is
//! the current task of its CPU — so a CPU never runs two tasks and a task runs on at most
//! one CPU. Inputs that contradict them are repaired (the stale task becomes `Unknown`) and
//! counted as data quality:
//!
//! | key | meaning |
//! |---|---|
//! | `switch_prev_mismatch` | a switch's prev task is not the CPU's current task (perf: "context switch bugs") |
//! | `impossible_transition` | e.g. switch-in of a task running on another CPU, switch-out of a sleeping task |
//! | `switch_in_without_wakeup` | a sleeping task switched in with no wakeup recorded (info: the kernel does this when a signal arrives while it is going to sleep) |
//! | `lost_chunks` | a lost-events record; the CPU's current task is unknown until its next switch |
//! | `switch_in_missing` | a task recorded an event, or was switched out, on a CPU the trace had not switched it in on (info: the repair below) |
//!
//! The repair rule (one, for every consumer): a record in task `p`'s context on CPU `c` —
//! [`Event::shows_pid_running`], or a switch whose prev is `p` — means `p` runs on `c`.
//! When the timeline has not switched `p` in there (the VM and some kernels drop switch
//! records, typically switches out of idle), `p` becomes `Running { repaired: true }`: a woken `p` from `c`'s previous switch, or from its
//! wakeup when that is later (`perf sched timehist`'s reading, which takes a row's run time
//! from the CPU's previous switch: the wait is a lower bound), any other `p` (its wakeup is
//! missing too, or it was never seen) from the record — and `c`'s former current task stops
//! running there at that time (idle ends; a task becomes `Unknown`). A task of unknown
//! state on a CPU without any switch yet is left as it is (it ran from before the trace).
//!
//! Task coverage ([`Timeline::for_inputs`]): a per-task recording (`perf record -- COMMAND`
//! without `-a`, [`TaskCoverage::Targets`]) holds only the records made while one of its
//! tasks was current — the tasks seen as a record's context, and the children they fork. A
//! wakeup of any other task makes it `Unknown`, never runnable (`task_not_recorded`, info):
//! its switch in may show, but not what it did after. Said once as `tasks_partly_recorded`.
//!
//! CPU coverage ([`Timeline::for_inputs`]): when the inputs record only some CPUs (perf
//! `-C`, `stallscope record --cpus`, empty per-CPU buffers), a task woken onto or migrated
//! to a CPU outside them becomes `Unknown` — never runnable: the trace cannot show it wait,
//! run or idle there — counted as `task_on_unrecorded_cpu` (info). A task of unknown state
//! migrated from such a CPU to a recorded one is runnable there from the migration
//! (`sched_migrate_task` moves only queued or waking tasks): its wait is taken from then.

use stallscope_model::{
    Cpu, CpuCoverage, DataQuality, Event, EventKind, PrevState, Problem, Switch, TaskCoverage, Tid,
    TraceMeta, Ts,
};

use crate::tasks::TaskTable;
use crate::wakeups::WakeupSelector;

/// Why a task is runnable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunnableCause {
    /// It was woken (`sched_waking`, `sched_wakeup`, `sched_wakeup_new`).
    Wakeup,
    /// It was switched out while still runnable (`R` / `R+`).
    Preempted,
}

/// A task's scheduler state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TaskState {
    /// Nothing known yet.
    #[default]
    Unknown,
    /// On a CPU.
    Running {
        /// Which.
        cpu: Cpu,
        /// Switch-in time (for a repaired run, the time the repair takes it to start).
        since: Ts,
        /// The trace does not show its switch-in (a dropped record): a record in its
        /// context showed it running, and `since` is where the repair rule (module docs)
        /// takes the run to start.
        repaired: bool,
    },
    /// Waiting for a CPU.
    Runnable {
        /// Since when.
        since: Ts,
        /// Woken or preempted.
        cause: RunnableCause,
        /// The CPU it waits for: the one it was preempted on, its wakeup's target CPU
        /// (`None` when the wakeup names none), moved by `sched_migrate_task`.
        cpu: Option<Cpu>,
    },
    /// Switched out in an interruptible or idle sleep (`S`, `I`, also `T`, `t`, `P`).
    Sleeping {
        /// Switch-out time.
        since: Ts,
    },
    /// Switched out in uninterruptible sleep (`D`).
    Blocked {
        /// Switch-out time.
        since: Ts,
    },
    /// Switched out dead (`X`, `Z`).
    Dead {
        /// Switch-out time.
        since: Ts,
    },
}

/// Something that happened to a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// A state change.
    State {
        /// When.
        ts: Ts,
        /// Which task.
        tid: Tid,
        /// Previous state.
        from: TaskState,
        /// New state.
        to: TaskState,
    },
    /// `sched_migrate_task`.
    Migrated {
        /// When.
        ts: Ts,
        /// Which task.
        tid: Tid,
        /// From CPU.
        from_cpu: Cpu,
        /// To CPU.
        to_cpu: Cpu,
    },
    /// `sched_process_fork`.
    Forked {
        /// When.
        ts: Ts,
        /// Parent.
        parent: Tid,
        /// New task.
        child: Tid,
    },
    /// `sched_process_exit` (the task still runs until its last switch-out).
    Exited {
        /// When.
        ts: Ts,
        /// Which task.
        tid: Tid,
    },
}

/// Highest CPU number tracked (a larger one is corrupt input; counted, not tracked: the
/// timeline ignores the events of such a CPU).
pub const MAX_CPUS: usize = 1 << 16;

/// The scheduler state machine.
#[derive(Debug)]
pub struct Timeline {
    cpus: Vec<Option<Tid>>,
    tasks: TaskTable<TaskState>,
    wakeups: WakeupSelector,
    dq: DataQuality,
    /// Occurrences of the problems that can come by the million (a trace whose switches
    /// contradict each other: `switch_prev_mismatch`, `impossible_transition`), indexed by
    /// [`Flood`]: the first [`DataQuality::MAX_EXAMPLES`] go to `dq` with their examples,
    /// the rest are only counted here and added by [`Timeline::quality`].
    floods: [u64; 3],
    /// Switches seen (the base of the inconsistency share in [`Timeline::quality`]).
    switches: u64,
    /// Per CPU: when the timeline last changed its current task (a switch, a repair, lost
    /// events; 0: never) — a repaired run there starts no earlier.
    changed: Vec<Ts>,
    /// Per CPU: the task its latest switch switched in (kept across lost events) — what
    /// `switch_prev_mismatch` compares a switch's prev with, as perf's "context switch
    /// bugs" do (the repair rule may have put another task there since).
    switched_in: Vec<Option<Tid>>,
    /// The CPUs the inputs record (module docs: CPU coverage).
    coverage: CpuCoverage,
    /// `coverage` leaves some CPUs out (the per-event check is skipped otherwise).
    partial: bool,
    /// A per-task recording (module docs: task coverage): the tasks seen as a record's
    /// context so far — the recorded ones. `None` when every task is recorded.
    targets: Option<rustc_hash::FxHashSet<Tid>>,
}

/// A trace whose switch records contradict the CPU's running task this often (‰ of its
/// switches, with at least 100 switches) is unreliable: said as an error.
const INCONSISTENT_PERMILLE: u64 = 100;

/// Notes the tasks `ev` shows recorded in a per-task recording: its context task, and a
/// child its recorded parent forked or woke for the first time (perf's targets inherit to
/// children).
#[inline]
fn note_target(targets: &mut rustc_hash::FxHashSet<Tid>, ev: &Event) {
    if ev.pid <= 0 || ev.kind.is_side_band() {
        return;
    }
    targets.insert(ev.pid);
    match &ev.kind {
        EventKind::WakeupNew(w) => {
            targets.insert(w.task.pid);
        }
        EventKind::Fork { child_pid, .. } => {
            targets.insert(*child_pid);
        }
        _ => {}
    }
}

/// The frequent problems counted in [`Timeline::floods`].
#[derive(Clone, Copy)]
enum Flood {
    PrevMismatch = 0,
    Impossible = 1,
    SwitchInMissing = 2,
}

impl Flood {
    /// The registry's problem of each flood, by index.
    const PROBLEMS: [Problem; 3] = [
        Problem::SwitchPrevMismatch,
        Problem::ImpossibleTransition,
        Problem::SwitchInMissing,
    ];
}

/// The state a switch-out leaves the task in.
fn state_after_switch_out(state: PrevState, ts: Ts, cpu: Cpu) -> TaskState {
    if state.is_runnable() {
        TaskState::Runnable {
            since: ts,
            cause: RunnableCause::Preempted,
            cpu: Some(cpu),
        }
    } else if state.is_dead() {
        TaskState::Dead { since: ts }
    } else if state.is_uninterruptible() {
        TaskState::Blocked { since: ts }
    } else {
        TaskState::Sleeping { since: ts }
    }
}

/// Where an event is, for data-quality examples: input, position, time in seconds, CPU.
fn at(ev: &Event) -> String {
    format!(
        "input #{} {}: {} s CPU {}",
        ev.span.input(),
        ev.span.pos(),
        stallscope_model::fmt_secs_nsecs(ev.ts),
        ev.cpu
    )
}

impl std::fmt::Display for TaskState {
    /// In words, times in seconds: `runnable since 7144.269273074 s (preempted, for CPU 1)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = stallscope_model::fmt_secs_nsecs;
        match *self {
            TaskState::Unknown => write!(f, "in an unknown state"),
            TaskState::Running { cpu, since, .. } => {
                write!(f, "running on CPU {cpu} since {} s", secs(since))
            }
            TaskState::Runnable { since, cause, cpu } => {
                let why = match cause {
                    RunnableCause::Wakeup => "woken",
                    RunnableCause::Preempted => "preempted",
                };
                write!(f, "runnable since {} s ({why}", secs(since))?;
                match cpu {
                    Some(c) => write!(f, ", for CPU {c})"),
                    None => write!(f, ")"),
                }
            }
            TaskState::Sleeping { since } => write!(f, "sleeping since {} s", secs(since)),
            TaskState::Blocked { since } => write!(f, "blocked (D) since {} s", secs(since)),
            TaskState::Dead { since } => write!(f, "exited at {} s", secs(since)),
        }
    }
}

impl Timeline {
    /// A timeline choosing wakeups with `wakeups`.
    pub fn new(wakeups: WakeupSelector) -> Timeline {
        Timeline {
            cpus: Vec::new(),
            tasks: TaskTable::default(),
            wakeups,
            dq: DataQuality::default(),
            floods: [0; 3],
            switches: 0,
            changed: Vec::new(),
            switched_in: Vec::new(),
            coverage: CpuCoverage::All,
            partial: false,
            targets: None,
        }
    }

    /// The timeline of the inputs described by `metas`: their wakeup rule
    /// ([`WakeupSelector::for_inputs`]) and the CPUs they record (module docs: CPU
    /// coverage; said once as `cpus_partly_recorded` when some are left out).
    pub fn for_inputs<'a>(metas: impl IntoIterator<Item = &'a TraceMeta> + Clone) -> Timeline {
        let mut t = Timeline::new(WakeupSelector::for_inputs(metas.clone()));
        t.coverage = CpuCoverage::union(metas.clone().into_iter().map(|m| &m.cpus_recorded));
        t.partial = t.coverage != CpuCoverage::All;
        if let Some(list) = t.coverage.list_text() {
            t.dq.add(Problem::CpusPartlyRecorded, 1, || {
                format!("events of CPUs {list} only")
            });
        }
        // a merge with a recording of every task records every task
        let mut metas = metas.into_iter().peekable();
        if metas.peek().is_some() && metas.all(|m| m.tasks_recorded == TaskCoverage::Targets) {
            t.targets = Some(Default::default());
            t.dq.add(Problem::TasksPartlyRecorded, 1, || {
                "perf record of a command's tasks (no -a): other tasks are not recorded".into()
            });
        }
        t
    }

    /// Which wakeup tracepoint the timeline follows.
    pub fn wakeup_rule(&self) -> WakeupSelector {
        self.wakeups
    }

    /// The CPUs the inputs record.
    pub fn coverage(&self) -> &CpuCoverage {
        &self.coverage
    }

    /// Whether `cpu` is outside the recorded CPUs (never with full coverage).
    #[inline(always)]
    fn unrecorded(&self, cpu: Option<Cpu>) -> bool {
        self.partial && cpu.is_some_and(|c| !self.coverage.covers(c))
    }

    /// Whether `tid` is a task a per-task recording leaves out (idle included: what it does
    /// is not recorded either). Never with every task recorded.
    #[inline(always)]
    fn untargeted(&self, tid: Option<Tid>) -> bool {
        match (&self.targets, tid) {
            (Some(targets), Some(t)) => !targets.contains(&t),
            _ => false,
        }
    }

    /// Counts a wakeup of a task a per-task recording does not record (it is `Unknown`).
    #[cold]
    fn woke_unrecorded_task(&mut self, ev: &Event, tid: Tid) {
        self.dq.add(Problem::TaskNotRecorded, 1, || {
            format!("{}: pid {tid} woken", at(ev))
        });
    }

    /// Counts a task sent to an unrecorded CPU (it becomes `Unknown`).
    #[cold]
    fn sent_to_unrecorded(&mut self, ev: &Event, tid: Tid, cpu: Cpu) {
        self.dq.add(Problem::TaskOnUnrecordedCpu, 1, || {
            format!("{}: pid {tid} to CPU {cpu}", at(ev))
        });
    }

    /// Data-quality counters so far.
    pub fn quality(&self) -> DataQuality {
        let mut dq = self.dq.clone();
        for (&problem, n) in Flood::PROBLEMS.iter().zip(self.floods) {
            let past_examples = n.saturating_sub(DataQuality::MAX_EXAMPLES as u64);
            if past_examples > 0 {
                // the counter exists (its first occurrences were added): no new example
                dq.add_count(problem, past_examples);
            }
        }
        let bad = self.floods[Flood::PrevMismatch as usize];
        if self.switches >= 100 && bad * 1000 >= INCONSISTENT_PERMILLE * self.switches {
            dq.add(Problem::SwitchRecordsInconsistent, 1, || {
                format!(
                    "{bad} of {} switches ({}.{}%) name a previous task the CPU was not running",
                    self.switches,
                    bad * 100 / self.switches,
                    bad * 1000 / self.switches % 10
                )
            });
        }
        dq
    }

    /// Counts one occurrence of `flood`: into `dq` with `add` while examples are kept,
    /// else only in `floods` (no map lookup, no example text).
    #[inline]
    fn flood(&mut self, flood: Flood, add: impl FnOnce(&mut DataQuality)) {
        let n = &mut self.floods[flood as usize];
        *n += 1;
        if *n <= DataQuality::MAX_EXAMPLES as u64 {
            add(&mut self.dq);
        }
    }

    /// CPUs the events named so far (1 + the largest CPU number).
    pub fn cpu_count(&self) -> usize {
        self.cpus.len()
    }

    /// Per-task states and names.
    pub fn tasks(&self) -> &TaskTable<TaskState> {
        &self.tasks
    }

    /// The state of `tid` (`Unknown` if never seen).
    pub fn state(&self, tid: Tid) -> TaskState {
        self.tasks
            .find(tid)
            .map_or(TaskState::Unknown, |i| self.tasks.get(i).data)
    }

    /// The task running on `cpu` (`Some(0)` = idle), `None` when unknown.
    pub fn current(&self, cpu: Cpu) -> Option<Tid> {
        self.cpus.get(cpu as usize).copied().flatten()
    }

    fn cpu_index(&mut self, ev: &Event) -> Option<usize> {
        let c = ev.cpu as usize;
        if c >= MAX_CPUS {
            self.dq.add(Problem::CpuOutOfRange, 1, || at(ev));
            return None;
        }
        if c >= self.cpus.len() {
            self.cpus.resize(c + 1, None);
            self.changed.resize(c + 1, 0);
            self.switched_in.resize(c + 1, None);
        }
        Some(c)
    }

    fn set<F: FnMut(Transition)>(&mut self, i: usize, ts: Ts, to: TaskState, sink: &mut F) {
        let slot = self.tasks.get_mut(i);
        let from = slot.data;
        slot.data = to;
        sink(Transition::State {
            ts,
            tid: slot.tid,
            from,
            to,
        });
    }

    /// Counts an impossible transition; `what` builds the example text only when it is kept.
    fn impossible(&mut self, ev: &Event, what: impl FnOnce() -> String) {
        self.flood(Flood::Impossible, |dq| {
            dq.add(Problem::ImpossibleTransition, 1, || {
                format!("{}: {}", at(ev), what())
            })
        });
    }

    /// Sets CPU `c`'s current task (`Some(0)`: idle; `None`: unknown) as of `ts`.
    #[inline(always)]
    fn set_current(&mut self, c: usize, cur: Option<Tid>, ts: Ts) {
        self.cpus[c] = cur;
        self.changed[c] = self.changed[c].max(ts);
    }

    /// Makes the task recorded as running on `cpu` (if any) `Unknown`: the trace says
    /// otherwise.
    fn forget_current<F: FnMut(Transition)>(&mut self, c: usize, ts: Ts, sink: &mut F) {
        if let Some(cur) = self.cpus[c] {
            if cur != 0 {
                if let Some(i) = self.tasks.find(cur) {
                    if matches!(self.tasks.get(i).data, TaskState::Running { cpu, .. } if cpu as usize == c)
                    {
                        self.set(i, ts, TaskState::Unknown, sink);
                    }
                }
            }
        }
        self.set_current(c, None, ts);
    }

    /// The repair rule (module docs): `ev` is a record in `p`'s context on its CPU, which
    /// the timeline does not have `p` running on. Out of line: rare in a complete trace.
    #[cold]
    #[inline(never)]
    fn seen_running<F: FnMut(Transition)>(&mut self, ev: &Event, p: Tid, sink: &mut F) {
        let Some(c) = self.cpu_index(ev) else { return };
        let changed = self.changed[c];
        let (i, _) = self.tasks.slot(p);
        let state = self.tasks.get(i).data;
        if changed == 0 && state == TaskState::Unknown {
            // nothing known of the CPU nor of the task: it ran from before the trace (no
            // start to take)
            return;
        }
        // A woken task ran from its wakeup at the earliest (its wait is then a lower bound,
        // timehist's sch delay); of any other, the trace shows nothing before this record
        // (its wakeup is missing too, or it is seen for the first time): it runs from here.
        let from = match state {
            TaskState::Running { cpu, .. } if cpu as usize == c => return, // (invariant)
            TaskState::Dead { .. } => return, // a recycled tid's first records: fork decides
            TaskState::Runnable { since, .. } => since,
            TaskState::Running { .. }
            | TaskState::Sleeping { .. }
            | TaskState::Blocked { .. }
            | TaskState::Unknown => ev.ts,
        };
        // never before what the timeline last knew of the CPU: its previous switch, or a
        // later change
        let start = from.min(ev.ts).max(changed);
        let comm = self.tasks.get(i).comm;
        // (a per-task recording does not record a switch made while another task runs)
        if !self.untargeted(self.switched_in[c]) {
            self.flood(Flood::SwitchInMissing, |dq| {
                dq.add(Problem::SwitchInMissing, 1, || {
                    format!(
                        "{}: {comm} (pid {p}) ran with no switch-in recorded (it was {state})",
                        at(ev)
                    )
                })
            });
        }
        if let TaskState::Running { cpu, .. } = state {
            // its switch-out there was dropped too
            if self.cpus.get(cpu as usize) == Some(&Some(p)) {
                self.set_current(cpu as usize, None, start);
            }
        }
        if let Some(cur) = self.cpus[c] {
            if cur != 0 {
                if let Some(k) = self.tasks.find(cur) {
                    if matches!(self.tasks.get(k).data, TaskState::Running { cpu, .. } if cpu as usize == c)
                    {
                        self.set(k, start, TaskState::Unknown, sink);
                    }
                }
            }
        }
        self.set(
            i,
            start,
            TaskState::Running {
                cpu: ev.cpu,
                since: start,
                repaired: true,
            },
            sink,
        );
        self.set_current(c, Some(p), start);
    }

    /// Feeds one event; transitions go to `sink`.
    #[inline(always)]
    pub fn process<F: FnMut(Transition)>(&mut self, ev: &Event, sink: &mut F) {
        if let Some(targets) = &mut self.targets {
            note_target(targets, ev);
        }
        if self.cpus.get(ev.cpu as usize) != Some(&Some(ev.pid)) && ev.shows_pid_running() {
            self.seen_running(ev, ev.pid, sink);
        }
        match &ev.kind {
            EventKind::Switch(s) => self.switch(ev, s, sink),
            EventKind::Waking(_) | EventKind::Wakeup(_) | EventKind::WakeupNew(_) => {
                let Some(w) = self.wakeups.select(&ev.kind) else {
                    return;
                };
                if w.task.pid == 0 {
                    return;
                }
                let (i, _) = self.tasks.slot(w.task.pid);
                self.tasks.note_payload_comm(i, &w.task.comm);
                let state = self.tasks.get(i).data;
                if self
                    .targets
                    .as_ref()
                    .is_some_and(|t| !t.contains(&w.task.pid))
                {
                    // not a recorded task: nothing shows it wait, run or sleep
                    self.woke_unrecorded_task(ev, w.task.pid);
                    if state != TaskState::Unknown {
                        self.set(i, ev.ts, TaskState::Unknown, sink);
                    }
                    return;
                }
                if self.unrecorded(w.target_cpu)
                    && !matches!(
                        state,
                        TaskState::Running { .. } | TaskState::Runnable { .. }
                    )
                {
                    // woken onto a CPU the trace does not record: nothing shows it there
                    self.sent_to_unrecorded(ev, w.task.pid, w.target_cpu.unwrap_or(0));
                    if state != TaskState::Unknown {
                        self.set(i, ev.ts, TaskState::Unknown, sink);
                    }
                    return;
                }
                match state {
                    TaskState::Running { .. } | TaskState::Runnable { .. } => {}
                    TaskState::Dead { .. } => {
                        self.impossible(ev, || {
                            format!("wakeup of pid {} which had exited", w.task.pid)
                        });
                        self.set(
                            i,
                            ev.ts,
                            TaskState::Runnable {
                                since: ev.ts,
                                cause: RunnableCause::Wakeup,
                                cpu: w.target_cpu,
                            },
                            sink,
                        );
                    }
                    _ => self.set(
                        i,
                        ev.ts,
                        TaskState::Runnable {
                            since: ev.ts,
                            cause: RunnableCause::Wakeup,
                            cpu: w.target_cpu,
                        },
                        sink,
                    ),
                }
            }
            EventKind::Migrate(m) => {
                if m.task.pid != 0 {
                    let (i, _) = self.tasks.slot(m.task.pid);
                    self.tasks.note_payload_comm(i, &m.task.comm);
                    let prior = self.tasks.get(i).data;
                    // a runnable task moved to another runqueue waits for that CPU now
                    if let TaskState::Runnable { cpu, .. } = &mut self.tasks.get_mut(i).data {
                        *cpu = Some(m.dest_cpu);
                    }
                    sink(Transition::Migrated {
                        ts: ev.ts,
                        tid: m.task.pid,
                        from_cpu: m.orig_cpu,
                        to_cpu: m.dest_cpu,
                    });
                    if self.partial {
                        self.migrate_across_coverage(ev, (i, prior), m.orig_cpu, m.dest_cpu, sink);
                    }
                }
            }
            EventKind::Fork {
                parent_comm,
                parent_pid,
                child_comm,
                child_pid,
            } => {
                let (p, _) = self.tasks.slot(*parent_pid);
                self.tasks.note_payload_comm(p, parent_comm);
                if let Some(old) = self.tasks.find(*child_pid) {
                    if let TaskState::Running { cpu, .. } = self.tasks.get(old).data {
                        if self.cpus.get(cpu as usize) == Some(&Some(*child_pid)) {
                            self.set_current(cpu as usize, None, ev.ts);
                        }
                    }
                }
                self.tasks.retire(*child_pid);
                let (c, _) = self.tasks.slot(*child_pid);
                self.tasks.note_payload_comm(c, child_comm);
                sink(Transition::Forked {
                    ts: ev.ts,
                    parent: *parent_pid,
                    child: *child_pid,
                });
            }
            EventKind::Exit(t) => {
                if t.pid != 0 {
                    let (i, _) = self.tasks.slot(t.pid);
                    self.tasks.note_payload_comm(i, &t.comm);
                    sink(Transition::Exited {
                        ts: ev.ts,
                        tid: t.pid,
                    });
                }
            }
            EventKind::StatRuntime(r) => {
                if r.task.pid != 0 {
                    let (i, _) = self.tasks.slot(r.task.pid);
                    self.tasks.note_payload_comm(i, &r.task.comm);
                }
            }
            EventKind::Lost { count } => {
                let n = count.unwrap_or(0);
                self.dq.add(Problem::LostChunks, 1, || {
                    format!("{}: {n} events lost", at(ev))
                });
                if let Some(c) = self.cpu_index(ev) {
                    // (`switched_in` stays: perf's context switch bugs do not forget the
                    // CPU's task at lost events either)
                    self.forget_current(c, ev.ts, sink);
                }
            }
            EventKind::TaskComm { tgid, tid, comm } => self.tasks.note_sideband(*tid, *tgid, comm),
            EventKind::Exec { .. }
            | EventKind::Generic(_)
            | EventKind::Mapping(_)
            | EventKind::Block(_) => {}
        }
    }

    /// A migration with part of the CPUs recorded (module docs: CPU coverage): a runnable
    /// task moved to an unrecorded CPU becomes `Unknown`, and so does one the timeline has
    /// waiting on a recorded CPU that the record moves *from* an unrecorded one (that CPU
    /// pulled it unrecorded: it may have run there); an unknown task moved from an
    /// unrecorded CPU to a recorded one is runnable there from now.
    #[cold]
    #[inline(never)]
    fn migrate_across_coverage<F: FnMut(Transition)>(
        &mut self,
        ev: &Event,
        (i, prior): (usize, TaskState),
        from: Cpu,
        to: Cpu,
        sink: &mut F,
    ) {
        let slot = self.tasks.get(i);
        let (tid, mut state) = (slot.tid, slot.data);
        if let TaskState::Runnable { cpu: Some(c), .. } = prior {
            if c != from && self.unrecorded(Some(from)) {
                self.set(i, ev.ts, TaskState::Unknown, sink);
                state = TaskState::Unknown;
            }
        }
        match state {
            TaskState::Runnable { .. } if self.unrecorded(Some(to)) => {
                self.sent_to_unrecorded(ev, tid, to);
                self.set(i, ev.ts, TaskState::Unknown, sink);
            }
            TaskState::Unknown if self.unrecorded(Some(from)) && !self.unrecorded(Some(to)) => {
                let runnable = TaskState::Runnable {
                    since: ev.ts,
                    cause: RunnableCause::Preempted,
                    cpu: Some(to),
                };
                self.set(i, ev.ts, runnable, sink);
            }
            _ => {}
        }
    }

    #[inline(always)]
    fn switch<F: FnMut(Transition)>(&mut self, ev: &Event, s: &Switch, sink: &mut F) {
        let Some(c) = self.cpu_index(ev) else { return };
        self.switches += 1;
        let (prev, next, ts) = (s.prev.pid, s.next.pid, ev.ts);
        let cur = self.cpus[c];
        if let Some(cur) = self.switched_in[c] {
            // (a per-task recording does not record the switch out of a task outside it)
            if cur != prev && !self.untargeted(Some(cur)) {
                self.flood(Flood::PrevMismatch, |dq| {
                    dq.add(Problem::SwitchPrevMismatch, 1, || {
                        format!(
                            "{}: prev_pid={prev} but the CPU was running pid {cur}",
                            at(ev)
                        )
                    })
                });
            }
        }
        if prev != 0 && cur != Some(prev) {
            // the switch is a record in prev's context: prev ran here (the repair rule)
            self.seen_running(ev, prev, sink);
        }
        if self.cpus[c].is_some_and(|cur| cur != prev) {
            self.forget_current(c, ts, sink);
        }
        if prev != 0 {
            let (i, _) = self.tasks.slot(prev);
            self.tasks.note_payload_comm(i, &s.prev.comm);
            match self.tasks.get(i).data {
                TaskState::Unknown => {}
                TaskState::Running { cpu, .. } if cpu as usize == c => {}
                TaskState::Running { cpu, .. } => {
                    self.impossible(ev, || {
                        format!("pid {prev} switched out on CPU {c} while running on CPU {cpu}")
                    });
                    if self.cpus.get(cpu as usize) == Some(&Some(prev)) {
                        self.set_current(cpu as usize, None, ev.ts);
                    }
                }
                other => self.impossible(ev, || format!("pid {prev} switched out while {other}")),
            }
            self.set(
                i,
                ts,
                state_after_switch_out(s.prev_state, ts, ev.cpu),
                sink,
            );
        }
        if next != 0 {
            let (i, _) = self.tasks.slot(next);
            self.tasks.note_payload_comm(i, &s.next.comm);
            match self.tasks.get(i).data {
                TaskState::Running { cpu, .. } => {
                    self.impossible(ev, || {
                        format!("pid {next} switched in on CPU {c} while running on CPU {cpu}")
                    });
                    if self.cpus.get(cpu as usize) == Some(&Some(next)) {
                        self.set_current(cpu as usize, None, ev.ts);
                    }
                }
                TaskState::Sleeping { .. } | TaskState::Blocked { .. } => {
                    self.dq.add(Problem::SwitchInWithoutWakeup, 1, || {
                        format!("{}: pid {next}", at(ev))
                    });
                }
                TaskState::Dead { .. } => {
                    self.impossible(ev, || format!("pid {next} switched in after it exited"))
                }
                TaskState::Unknown | TaskState::Runnable { .. } => {}
            }
            self.set(
                i,
                ts,
                TaskState::Running {
                    cpu: ev.cpu,
                    since: ts,
                    repaired: false,
                },
                sink,
            );
        }
        self.set_current(c, Some(next), ts);
        self.switched_in[c] = Some(next);
    }

    /// Checks the invariants in the module docs; `Err` describes the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (c, cur) in self.cpus.iter().enumerate() {
            if let Some(t) = *cur {
                if t != 0 {
                    match self.state(t) {
                        TaskState::Running { cpu, .. } if cpu as usize == c => {}
                        other => {
                            return Err(format!("CPU {c} runs pid {t} whose state is {other:?}"))
                        }
                    }
                }
            }
        }
        for slot in self.tasks.slots() {
            if self.tasks.find(slot.tid).map(|i| self.tasks.get(i).tid) != Some(slot.tid) {
                continue; // retired slot
            }
            if let TaskState::Running { cpu, .. } = self.state(slot.tid) {
                if self.current(cpu) != Some(slot.tid) {
                    return Err(format!(
                        "pid {} is Running on CPU {cpu} but that CPU runs {:?}",
                        slot.tid,
                        self.current(cpu)
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{Comm, Span, TaskRef, Wakeup};

    fn task(pid: Tid) -> TaskRef {
        TaskRef {
            comm: Comm::new(&format!("t{pid}")),
            pid,
            prio: 120,
        }
    }
    fn ev(ts: Ts, cpu: Cpu, kind: EventKind) -> Event {
        Event {
            ts,
            cpu,
            pid: -1,
            span: Span::default(),
            kind,
            callchain: None,
        }
    }
    fn sw(ts: Ts, cpu: Cpu, prev: Tid, state: &str, next: Tid) -> Event {
        let prev_state = PrevState::parse(state).unwrap_or_default();
        ev(
            ts,
            cpu,
            EventKind::Switch(Switch {
                prev: task(prev),
                prev_state,
                next: task(next),
            }),
        )
    }
    fn waking(ts: Ts, pid: Tid) -> Event {
        ev(
            ts,
            0,
            EventKind::Waking(Wakeup {
                task: task(pid),
                target_cpu: Some(0),
            }),
        )
    }

    fn run(events: &[Event]) -> (Timeline, Vec<Transition>) {
        let mut tl = Timeline::new(WakeupSelector::preferring_waking(true));
        let mut out = Vec::new();
        for e in events {
            tl.process(e, &mut |t| out.push(t));
            tl.check_invariants().unwrap();
        }
        (tl, out)
    }

    #[test]
    fn sleep_wake_run_cycle() {
        let (tl, tr) = run(&[
            sw(10, 0, 0, "R", 5),
            sw(20, 0, 5, "S", 0),
            waking(30, 5),
            waking(31, 5),
            sw(40, 1, 0, "R", 5),
            sw(50, 1, 5, "R+", 0),
        ]);
        let states: Vec<TaskState> = tr
            .iter()
            .filter_map(|t| {
                if let Transition::State { to, .. } = t {
                    Some(*to)
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(
            states,
            vec![
                TaskState::Running {
                    cpu: 0,
                    since: 10,
                    repaired: false
                },
                TaskState::Sleeping { since: 20 },
                TaskState::Runnable {
                    since: 30,
                    cause: RunnableCause::Wakeup,
                    cpu: Some(0)
                }, // the duplicate waking at 31 changes nothing
                TaskState::Running {
                    cpu: 1,
                    since: 40,
                    repaired: false
                },
                TaskState::Runnable {
                    since: 50,
                    cause: RunnableCause::Preempted,
                    cpu: Some(1)
                },
            ]
        );
        assert!(tl.quality().is_empty());
    }

    #[test]
    fn blocked_and_dead() {
        let (tl, _) = run(&[
            sw(1, 0, 0, "R", 3),
            sw(2, 0, 3, "D", 4),
            sw(3, 0, 4, "X", 0),
        ]);
        assert_eq!(tl.state(3), TaskState::Blocked { since: 2 });
        assert_eq!(tl.state(4), TaskState::Dead { since: 3 });
    }

    #[test]
    fn prev_mismatch_is_counted_and_repaired() {
        let (tl, _) = run(&[sw(1, 0, 0, "R", 3), sw(2, 0, 7, "S", 8)]);
        assert_eq!(tl.quality().count(Problem::SwitchPrevMismatch), 1);
        assert_eq!(tl.state(3), TaskState::Unknown);
        assert_eq!(tl.current(0), Some(8));
    }

    #[test]
    fn a_trace_whose_switches_mostly_contradict_each_other_is_an_error() {
        // 200 switches on one CPU, `bad` of them naming a prev the CPU was not running
        let trace = |bad: u64| -> Vec<Event> {
            let mut cur: Tid = 1;
            let mut evs = vec![sw(1, 0, 0, "R", cur)];
            for k in 1..200u64 {
                let next = 300 + k as Tid;
                let prev = if k <= bad { 9999 } else { cur };
                evs.push(sw(k + 1, 0, prev, "S", next));
                cur = next;
            }
            evs
        };
        // 98 of 200 (49 %): not merely a warning
        let (tl, _) = run(&trace(98));
        let dq = tl.quality();
        assert_eq!(dq.count(Problem::SwitchPrevMismatch), 98);
        let e = dq
            .entries()
            .find(|(k, _)| *k == "switch_records_inconsistent")
            .map(|(_, e)| e.clone())
            .expect("an error entry");
        assert_eq!(e.severity, stallscope_model::Severity::Error);
        assert_eq!(
            e.examples,
            ["98 of 200 switches (49.0%) name a previous task the CPU was not running"]
        );
        // a few contradictions (a lost event here and there) stay a warning only
        let (tl, _) = run(&trace(3));
        assert_eq!(tl.quality().count(Problem::SwitchPrevMismatch), 3);
        assert_eq!(tl.quality().count(Problem::SwitchRecordsInconsistent), 0);
    }

    #[test]
    fn floods_keep_the_first_examples_and_every_count() {
        // every switch after the first names a prev the CPU was not running
        let evs: Vec<Event> = (1..=12u64)
            .map(|k| sw(k, 0, 100 + k as Tid, "S", 200 + k as Tid))
            .collect();
        let (tl, _) = run(&evs);
        let dq = tl.quality();
        assert_eq!(dq.count(Problem::SwitchPrevMismatch), 11);
        let (_, e) = dq
            .entries()
            .find(|(k, _)| *k == "switch_prev_mismatch")
            .expect("counted");
        assert_eq!(e.examples.len(), DataQuality::MAX_EXAMPLES);
        assert!(
            e.examples[0].contains("prev_pid=102 but the CPU was running pid 201"),
            "{:?}",
            e.examples
        );
        assert!(e.examples[4].contains("prev_pid=106 "), "{:?}", e.examples);
        assert_eq!(
            tl.quality().count(Problem::SwitchPrevMismatch),
            11,
            "asking twice adds nothing"
        );
    }

    #[test]
    fn running_on_two_cpus_is_impossible() {
        let (tl, _) = run(&[sw(1, 0, 0, "R", 3), sw(2, 1, 0, "R", 3)]);
        assert_eq!(tl.quality().count(Problem::ImpossibleTransition), 1);
        assert_eq!(tl.current(0), None);
        assert_eq!(tl.current(1), Some(3));
    }

    /// A timeline of a recording of CPU 1 alone (perf `-C 1`).
    fn cpu1_only() -> Timeline {
        let meta = TraceMeta {
            cpus_recorded: CpuCoverage::Only(vec![1]),
            ..TraceMeta::default()
        };
        Timeline::for_inputs([&meta])
    }

    fn migrate(ts: Ts, cpu: Cpu, pid: Tid, from: Cpu, to: Cpu) -> Event {
        ev(
            ts,
            cpu,
            EventKind::Migrate(stallscope_model::Migrate {
                task: task(pid),
                orig_cpu: from,
                dest_cpu: to,
            }),
        )
    }

    fn wake_to(ts: Ts, pid: Tid, target: Cpu) -> Event {
        ev(
            ts,
            1,
            EventKind::Waking(Wakeup {
                task: task(pid),
                target_cpu: Some(target),
            }),
        )
    }

    #[test]
    fn a_per_task_recording_takes_no_state_for_tasks_outside_it() {
        let per_task = TraceMeta {
            tasks_recorded: TaskCoverage::Targets,
            ..TraceMeta::default()
        };
        let in_context = |pid: Tid, e: Event| Event { pid, ..e };
        let events = [
            in_context(5, sw(10, 1, 5, "S", 0)), // 5, recorded, sleeps
            in_context(7, wake_to(15, 9, 1)),    // 7 wakes 9: 9 was never a context
            in_context(7, wake_to(20, 5, 1)),    // 7 wakes 5, a recorded task
            in_context(
                7,
                ev(
                    25,
                    1,
                    EventKind::WakeupNew(Wakeup {
                        task: task(11),
                        target_cpu: Some(0),
                    }),
                ),
            ), // 7's new child: perf's targets inherit to children
            in_context(7, sw(40, 1, 7, "R", 9)), // 9 preempts 7
            // 9's switch out to 7 is 9's record, not in the trace: no contradiction
            in_context(7, sw(50, 1, 7, "S", 0)),
        ];
        let mut tl = Timeline::for_inputs([&per_task]);
        for e in &events {
            tl.process(e, &mut |_| {});
            tl.check_invariants().unwrap();
        }
        assert_eq!(tl.state(9), TaskState::Unknown);
        assert!(matches!(tl.state(5), TaskState::Runnable { since: 20, .. }));
        assert!(matches!(
            tl.state(11),
            TaskState::Runnable { since: 25, .. }
        ));
        let dq = tl.quality();
        assert_eq!(dq.count(Problem::TaskNotRecorded), 1);
        assert_eq!(dq.count(Problem::TasksPartlyRecorded), 1);
        assert_eq!(dq.count(Problem::SwitchPrevMismatch), 0);
        assert_eq!(dq.count(Problem::SwitchInMissing), 0, "{dq:?}");
        // a recording of every task (or a merge with one) keeps 9 runnable
        let all = TraceMeta::default();
        for metas in [vec![&all], vec![&per_task, &all]] {
            let mut tl = Timeline::for_inputs(metas);
            for e in &events {
                tl.process(e, &mut |_| {});
            }
            assert_eq!(tl.quality().count(Problem::TasksPartlyRecorded), 0);
            // there, idle's switch out to 7 and 9's are missing
            assert_eq!(tl.quality().count(Problem::SwitchPrevMismatch), 2);
        }
    }

    #[test]
    fn a_task_sent_to_an_unrecorded_cpu_is_unknown_never_runnable() {
        let mut tl = cpu1_only();
        let mut seen = Vec::new();
        for e in [
            sw(10, 1, 0, "R", 5),
            sw(20, 1, 5, "S", 7),    // 5 sleeps
            wake_to(30, 5, 0),       // woken onto CPU 0, not recorded: unknown
            sw(40, 1, 7, "R", 0),    // 7 preempted on CPU 1: runnable there
            migrate(45, 1, 7, 1, 0), // moved to CPU 0: unknown
            migrate(50, 1, 5, 0, 1), // 5 moved to CPU 1: runnable there from now
            sw(60, 1, 0, "R", 9),
            sw(70, 1, 9, "R", 0),    // 9 preempted: runnable on CPU 1 from 70
            migrate(90, 1, 9, 0, 1), // CPU 0 had pulled it unrecorded: runnable from 90
        ] {
            tl.process(&e, &mut |t| seen.push(t));
            tl.check_invariants().unwrap();
        }
        assert_eq!(tl.state(7), TaskState::Unknown);
        assert!(matches!(
            tl.state(9),
            TaskState::Runnable {
                since: 90,
                cpu: Some(1),
                ..
            }
        ));
        assert_eq!(
            tl.state(5),
            TaskState::Runnable {
                since: 50,
                cause: RunnableCause::Preempted,
                cpu: Some(1)
            }
        );
        // no transition ever made a task runnable for CPU 0
        assert!(seen.iter().all(|t| !matches!(
            t,
            Transition::State {
                to: TaskState::Runnable { cpu: Some(0), .. },
                ..
            }
        )));
        let dq = tl.quality();
        assert_eq!(dq.count(Problem::TaskOnUnrecordedCpu), 2);
        assert_eq!(dq.count(Problem::CpusPartlyRecorded), 1);
        // with every CPU recorded the same events keep 5 runnable for CPU 0
        let (full, _) = run(&[
            sw(10, 1, 0, "R", 5),
            sw(20, 1, 5, "S", 7),
            wake_to(30, 5, 0),
        ]);
        assert!(matches!(
            full.state(5),
            TaskState::Runnable { cpu: Some(0), .. }
        ));
        assert_eq!(full.quality().count(Problem::CpusPartlyRecorded), 0);
    }

    #[test]
    fn lost_events_forget_the_current_task() {
        let (tl, _) = run(&[
            sw(1, 0, 0, "R", 3),
            ev(2, 0, EventKind::Lost { count: Some(9) }),
        ]);
        assert_eq!(tl.quality().count(Problem::LostChunks), 1);
        assert_eq!(tl.current(0), None);
        assert_eq!(tl.state(3), TaskState::Unknown);
    }

    /// xorshift64*: a tiny deterministic generator for the randomized invariant test.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Random event streams (consistent and inconsistent): after every event a CPU runs at
    /// most one task, a task runs on at most one CPU, and every transition starts from the
    /// state the previous transition of that task ended in.
    #[test]
    fn invariants_hold_on_random_streams() {
        const STATES: [&str; 8] = ["R", "R+", "S", "D", "I", "X", "Z", "T"];
        for seed in 1..=300u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let mut tl = Timeline::new(WakeupSelector::preferring_waking(false));
            let mut last: std::collections::HashMap<Tid, TaskState> =
                std::collections::HashMap::new();
            for step in 0..400u64 {
                let cpu = rng.below(3) as Cpu;
                let tid = rng.below(7) as Tid;
                let e = match rng.below(10) {
                    0..=4 => {
                        // usually the real current task, sometimes a wrong one
                        let prev = match (rng.below(6), tl.current(cpu)) {
                            (0, _) | (_, None) => rng.below(7) as Tid,
                            (_, Some(c)) => c,
                        };
                        sw(step, cpu, prev, STATES[rng.below(8) as usize], tid)
                    }
                    5 | 6 => waking(step, tid),
                    7 => ev(
                        step,
                        cpu,
                        EventKind::Wakeup(Wakeup {
                            task: task(tid),
                            target_cpu: None,
                        }),
                    ),
                    8 => ev(
                        step,
                        cpu,
                        EventKind::Fork {
                            parent_comm: Comm::new("p"),
                            parent_pid: 1,
                            child_comm: Comm::new("c"),
                            child_pid: tid,
                        },
                    ),
                    _ => ev(step, cpu, EventKind::Lost { count: None }),
                };
                let mut chain_err = None;
                tl.process(&e, &mut |t| match t {
                    Transition::State { tid, from, to, .. } => {
                        let expect = last.get(&tid).copied().unwrap_or_default();
                        if expect != from && chain_err.is_none() {
                            chain_err =
                                Some(format!("pid {tid}: from {from:?}, last to {expect:?}"));
                        }
                        last.insert(tid, to);
                    }
                    Transition::Forked { child, .. } => {
                        last.insert(child, TaskState::Unknown);
                    }
                    _ => {}
                });
                if let Some(err) = chain_err {
                    panic!("seed {seed} step {step}: {err}");
                }
                if let Err(err) = tl.check_invariants() {
                    panic!("seed {seed} step {step} after {e:?}: {err}");
                }
            }
        }
    }
}
