//! [`Timehist`]: `perf sched timehist` — one row per context switch, streamed — and its
//! runtime summary (`-s`).
//!
//! A row describes the task switched **out** at time `t` on CPU `c` (the idle task of `c`
//! when `prev_pid` is 0, named `<idle>`). With `tprev` the previous switch on `c` (0 for the
//! first switch seen there), which is when this task was switched in:
//!
//! ```text
//! -----|-------------|------------------------|-------------|-----
//!    last          ready                     tprev           t
//!    switch-out    to run                    (switch-in)     (switch-out)
//!      |-------------- wait time ------------|
//!                    |------ sch delay ------|-- run time --|
//! ```
//!
//! * `run time = t - tprev` (0 when `tprev` is unknown).
//! * `wait time = tprev - last switch-out of the task` (0 when unknown or out of order).
//! * `sch delay = tprev - ready to run`, where "ready to run" is set at the task's
//!   switch-out if it left runnable (`R`, `R+`), else by the **first** wakeup after the
//!   switch-out (later wakeups do not move it; see [`WakeupSelector`] for which wakeup
//!   events count). [`PerfFlavor::Perf6_1`]: only wakeups set it.
//! * Filters, as perf's: `pid` (perf `-p`) keeps the tasks whose process id (tgid, or the
//!   tid when the tgid is unknown) matches; a filtered task's row and state updates are
//!   skipped. `cpu` (perf `-C`) keeps the rows and the summary statistics of one CPU; task
//!   state is still tracked on every CPU.
//!
//! perf takes the row's task from the sample's context pid; for a task that has already
//! exited (its last switch-out, state `X`) perf records pid -1 and attributes the row to a
//! placeholder thread `:-1`. We use `prev_pid` from the payload, which names the real task.
//!
//! The summary: per task, the number of switch-ins ("sched-in" = rows, including a first
//! row with no known run time), total / min / average / max run time, the relative standard
//! deviation of the mean of run times (perf's `stddev`), migrations (perf counts these only
//! with `-M`); per CPU the idle time; and totals.

use serde::Serialize;
use stallscope_model::{Comm, Cpu, Event, EventKind, PrevState, Switch, Tid, Ts};

use crate::tasks::TaskTable;
use crate::wakeups::WakeupSelector;
use crate::PerfFlavor;

/// Options of the analysis.
#[derive(Clone, Debug, Default)]
pub struct TimehistOptions {
    /// Keep only tasks of this process (perf `-p`).
    pub pid: Option<Tid>,
    /// Keep only this CPU's rows and statistics (perf `-C`).
    pub cpu: Option<Cpu>,
    /// Which perf release to reproduce.
    pub flavor: PerfFlavor,
    /// Whether the inputs declare `sched_waking` (see [`WakeupSelector`]).
    pub waking_declared: bool,
    /// Online CPUs of the capture when known (perf's "x N" in the summary).
    pub nr_cpus: Option<u32>,
}

/// One row.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct TimehistRow {
    /// Switch-out time.
    pub ts_ns: Ts,
    /// CPU.
    pub cpu: Cpu,
    /// Task name (`<idle>` for the idle task).
    pub comm: Comm,
    /// Task id (0 for idle).
    pub tid: Tid,
    /// Process id when known (0 for idle).
    pub pid: Option<Tid>,
    /// Time off CPU before this run, ns.
    pub wait_ns: u64,
    /// Time runnable before this run, ns.
    pub sch_delay_ns: u64,
    /// This run, ns.
    pub run_ns: u64,
    /// State at this switch-out.
    pub prev_state: PrevState,
}

/// Per-task (or per-CPU idle) counters.
#[derive(Clone, Copy, Debug, Default)]
struct RunState {
    last_time: Ts,
    ready_to_run: Ts,
    ppid: Option<Tid>,
    migrations: u64,
    runs: u64,
    run_total: u64,
    run_min: u64,
    run_max: u64,
    run_sq_total: u128,
}

impl RunState {
    fn add_run(&mut self, run: u64) {
        if self.runs == 0 || run < self.run_min {
            self.run_min = run;
        }
        self.run_max = self.run_max.max(run);
        self.runs += 1;
        self.run_total += run;
        self.run_sq_total += u128::from(run) * u128::from(run);
    }

    /// perf's `rel_stddev_stats(stddev_stats(), mean)`: 100 × (standard deviation of the
    /// mean) / mean, from exact integer sums. A percentage, not a time.
    fn stddev_pct(&self) -> f64 {
        if self.runs < 2 || self.run_total == 0 {
            return 0.0;
        }
        let n = u128::from(self.runs);
        let sum = u128::from(self.run_total);
        let spread = (n * self.run_sq_total).saturating_sub(sum * sum); // n² × population variance
        let variance_of_mean = spread as f64 / (n * n * (n - 1)) as f64;
        100.0 * variance_of_mean.sqrt() / (self.run_total as f64 / self.runs as f64)
    }
}

/// One task in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct TaskRuntime {
    /// Name.
    pub comm: Comm,
    /// Task id.
    pub tid: Tid,
    /// Process id when known.
    pub pid: Option<Tid>,
    /// Parent process id when known (from a fork in the trace).
    pub ppid: Option<Tid>,
    /// Rows (switch-ins) counted.
    pub sched_in: u64,
    /// Total run time, ns.
    pub run_ns: u64,
    /// Shortest run, ns.
    pub min_run_ns: u64,
    /// Average run (integer division), ns.
    pub avg_run_ns: u64,
    /// Longest run, ns.
    pub max_run_ns: u64,
    /// Relative standard deviation of the mean run time, percent.
    pub stddev_pct: f64,
    /// `sched_migrate_task` events of the task.
    pub migrations: u64,
}

/// One CPU's idle time in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct CpuIdle {
    /// CPU.
    pub cpu: Cpu,
    /// Idle time; `None` when the idle task was never switched out ("idle entire time window").
    pub idle_ns: Option<u64>,
}

/// The summary (`perf sched timehist -s`).
#[derive(Clone, Debug, Serialize)]
pub struct TimehistSummary {
    /// Tasks with at least one row, by tid.
    pub tasks: Vec<TaskRuntime>,
    /// Per-CPU idle; empty when rows were filtered out (perf omits it then).
    pub idle: Vec<CpuIdle>,
    /// Tasks listed.
    pub unique_tasks: u64,
    /// Rows counted, idle rows included.
    pub context_switches: u64,
    /// Run time of the tasks (idle excluded), ns.
    pub total_run_ns: u64,
    /// From the first to the last switch, ns.
    pub scheduling_time_ns: u64,
    /// CPUs (perf's "x N").
    pub nr_cpus: u32,
}

/// The `perf sched timehist` analysis.
#[derive(Debug)]
pub struct Timehist {
    opts: TimehistOptions,
    tasks: TaskTable<RunState>,
    idle: Vec<RunState>,
    last_switch: Vec<Ts>,
    wakeups: WakeupSelector,
    first_switch: Option<Ts>,
    last_switch_seen: Ts,
    max_cpu: Option<Cpu>,
    skipped: u64,
}

const IDLE_COMM: &str = "<idle>";

impl Timehist {
    /// A new analysis.
    pub fn new(opts: TimehistOptions) -> Timehist {
        let wakeups = WakeupSelector::preferring_waking(opts.waking_declared);
        Timehist {
            opts,
            tasks: TaskTable::default(),
            idle: Vec::new(),
            last_switch: Vec::new(),
            wakeups,
            first_switch: None,
            last_switch_seen: 0,
            max_cpu: None,
            skipped: 0,
        }
    }

    /// Feeds one event; a switch produces at most one row, given to `on_row`.
    pub fn process<F: FnMut(&TimehistRow)>(&mut self, ev: &Event, on_row: &mut F) {
        match &ev.kind {
            EventKind::Switch(s) => self.switch(ev, s, on_row),
            EventKind::Waking(_) | EventKind::Wakeup(_) | EventKind::WakeupNew(_) => {
                let Some(w) = self.wakeups.select(&ev.kind) else {
                    return;
                };
                if w.task.pid == 0 {
                    return;
                }
                let (i, _) = self.tasks.slot(w.task.pid);
                self.tasks.note_payload_comm(i, &w.task.comm);
                let r = &mut self.tasks.get_mut(i).data;
                if r.ready_to_run == 0 {
                    r.ready_to_run = ev.ts;
                }
            }
            EventKind::Migrate(m) if m.task.pid != 0 => {
                let (i, _) = self.tasks.slot(m.task.pid);
                self.tasks.get_mut(i).data.migrations += 1;
            }
            EventKind::Fork {
                parent_pid,
                child_comm,
                child_pid,
                ..
            } => {
                let ppid = self
                    .tasks
                    .find(*parent_pid)
                    .and_then(|i| self.tasks.get(i).tgid)
                    .unwrap_or(*parent_pid);
                if self
                    .tasks
                    .find(*child_pid)
                    .is_some_and(|i| self.tasks.get(i).data.runs > 0)
                {
                    self.tasks.retire(*child_pid);
                }
                let (i, _) = self.tasks.slot(*child_pid);
                self.tasks.note_payload_comm(i, child_comm);
                self.tasks.get_mut(i).data.ppid = Some(ppid);
            }
            EventKind::TaskComm { tgid, tid, comm } => self.tasks.note_sideband(*tid, *tgid, comm),
            _ => {}
        }
    }

    fn switch<F: FnMut(&TimehistRow)>(&mut self, ev: &Event, s: &Switch, on_row: &mut F) {
        let c = ev.cpu as usize;
        if c >= 1 << 16 {
            return;
        }
        if c >= self.last_switch.len() {
            self.last_switch.resize(c + 1, 0);
            self.idle.resize(c + 1, RunState::default());
        }
        self.max_cpu = Some(self.max_cpu.map_or(ev.cpu, |m| m.max(ev.cpu)));
        let (t, tprev) = (ev.ts, self.last_switch[c]);
        let prev = s.prev.pid;
        let (state, comm, pid) = if prev == 0 {
            (&mut self.idle[c], Comm::new(IDLE_COMM), Some(0))
        } else {
            let (i, _) = self.tasks.slot(prev);
            self.tasks.note_payload_comm(i, &s.prev.comm);
            let slot = self.tasks.get_mut(i);
            (&mut slot.data, slot.comm, slot.tgid)
        };
        let filtered = self.opts.pid.is_some_and(|p| pid.unwrap_or(prev) != p);
        if filtered {
            self.skipped += 1;
        } else {
            if self.opts.cpu.is_none_or(|only| only == ev.cpu) {
                let mut row = TimehistRow {
                    ts_ns: t,
                    cpu: ev.cpu,
                    comm,
                    tid: prev,
                    pid,
                    wait_ns: 0,
                    sch_delay_ns: 0,
                    run_ns: 0,
                    prev_state: s.prev_state,
                };
                if tprev != 0 {
                    row.run_ns = t.saturating_sub(tprev);
                    if state.ready_to_run != 0 && state.ready_to_run <= tprev {
                        row.sch_delay_ns = tprev - state.ready_to_run;
                    }
                    if state.last_time != 0 && state.last_time <= tprev {
                        row.wait_ns = tprev - state.last_time;
                    }
                }
                state.add_run(row.run_ns);
                on_row(&row);
            }
            state.last_time = t;
            state.ready_to_run = match self.opts.flavor {
                PerfFlavor::Current if s.prev_state.is_runnable() => t,
                _ => 0,
            };
        }
        self.first_switch.get_or_insert(t);
        self.last_switch_seen = t;
        self.last_switch[c] = t;
    }

    /// The summary of everything processed.
    pub fn summary(&self) -> TimehistSummary {
        let mut tasks: Vec<TaskRuntime> = self
            .tasks
            .slots()
            .iter()
            .filter(|s| s.data.runs > 0)
            .map(|s| {
                let d = &s.data;
                TaskRuntime {
                    comm: s.comm,
                    tid: s.tid,
                    pid: s.tgid,
                    ppid: d.ppid,
                    sched_in: d.runs,
                    run_ns: d.run_total,
                    min_run_ns: d.run_min,
                    avg_run_ns: d.run_total / d.runs,
                    max_run_ns: d.run_max,
                    stddev_pct: d.stddev_pct(),
                    migrations: d.migrations,
                }
            })
            .collect();
        tasks.sort_by_key(|t| t.tid);
        let nr_cpus = self
            .opts
            .nr_cpus
            .unwrap_or(0)
            .max(self.max_cpu.map_or(0, |m| m + 1));
        let mut context_switches: u64 = tasks.iter().map(|t| t.sched_in).sum();
        let mut idle = Vec::new();
        if self.skipped == 0 {
            for cpu in 0..nr_cpus {
                if self.opts.cpu.is_some_and(|only| only != cpu) {
                    continue;
                }
                let r = self.idle.get(cpu as usize).copied().unwrap_or_default();
                context_switches += r.runs;
                idle.push(CpuIdle {
                    cpu,
                    idle_ns: (r.runs > 0).then_some(r.run_total),
                });
            }
        }
        TimehistSummary {
            unique_tasks: tasks.len() as u64,
            total_run_ns: tasks.iter().map(|t| t.run_ns).sum(),
            context_switches,
            scheduling_time_ns: self
                .first_switch
                .map_or(0, |f| self.last_switch_seen.saturating_sub(f)),
            nr_cpus,
            idle,
            tasks,
        }
    }
}

#[cfg(test)]
mod tests;
