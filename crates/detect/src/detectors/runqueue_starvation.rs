//! `runqueue-starvation`: a task stays runnable (woken or preempted) on a CPU for a long
//! time while other tasks run there.
//!
//! State machine, per waiting task (a *wait*):
//!
//! ```text
//!   timeline: → Runnable (woken: CPU = wakeup target_cpu; preempted: CPU of the switch-out)
//!        │  every switch-out on that CPU credits the task that ran there (a *culprit*) with
//!        │  the overlap of its run and the wait, and one slice
//!        │  sched_migrate_task of the waiter → its CPU changes (remembered: "victim migrated")
//!        │  sched_migrate_task of a culprit away from the CPU → remembered
//!        │  a record on the CPU in another task's context than the one switched in
//!        │  (a switch record is missing) → that task is taken as the one running
//!        │  the CPU's idle time during the wait is summed (a queued task should not idle)
//!        │  a record in the waiter's own context (it is running: its switch-in record is
//!        │  missing) → the wait is dropped
//!        ▼
//!   timeline: Runnable → Running: the wait ends; how, from the ending sched_switch:
//!        victim migrated · culprit migrated away · culprit preempted (prev R/R+) ·
//!        culprit blocked (prev S/D/…) · victim picked (the CPU was idle)
//! ```
//!
//! A finished wait is *flagged* when it is at least `threshold_ns`, or extreme for the task
//! (≥ `relative_min_ns` and ≥ `relative_factor` × the task's median wait so far), or — for
//! a periodic task (regular wakeup intervals) — at least one period long. Flagged waits of
//! the same victim behind the same main culprit (who ran longest during the wait) merge into
//! one finding with counts and the worst instance. Memory: one record per CPU, per task
//! (two small histograms and the storage of its last wait), per (victim, culprit) group.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use stallscope_model::{
    Cpu, Event, EventKind, FieldValue, Finding, FindingSeverity, FindingTask, PrevState, Switch,
    Tid, Ts, Window,
};
use stallscope_timeline::timeline::MAX_CPUS;
use stallscope_timeline::{RunnableCause, TaskState, Transition};

use super::fmt::{dur, i, permille, ratio_permille};
use super::sched::{describe_prio, nice_of_prio, weight_of_nice};
use crate::evidence::{keep, keep_into, render, Kept, KeptCopy, KeptCopySlot};
use crate::hist::LogHist;
use crate::params::{ParamInfo, ParamUnit, Params};
use crate::per_task::PerTask;
use crate::{Context, Detector, DetectorInfo};

/// Thresholds.
pub static PARAMS: [ParamInfo; 7] = [
    ParamInfo {
        name: "threshold_ns",
        default: 10_000_000,
        unit: ParamUnit::Ns,
        doc: "a wait at least this long is flagged",
    },
    ParamInfo {
        name: "high_ns",
        default: 50_000_000,
        unit: ParamUnit::Ns,
        doc: "a worst wait at least this long makes the finding high",
    },
    ParamInfo {
        name: "relative_min_ns",
        default: 5_000_000,
        unit: ParamUnit::Ns,
        doc: "shortest wait flagged for being extreme relative to the task's median",
    },
    ParamInfo {
        name: "relative_factor",
        default: 20,
        unit: ParamUnit::Count,
        doc: "a wait this many times the task's median wait is extreme",
    },
    ParamInfo {
        name: "min_samples",
        default: 20,
        unit: ParamUnit::Count,
        doc: "waits (or wakeups) a task needs before its median (or period) is trusted",
    },
    ParamInfo {
        name: "min_period_ns",
        default: 500_000,
        unit: ParamUnit::Ns,
        doc: "shortest wakeup period considered a rhythm (faster wakers are not periodic tasks)",
    },
    ParamInfo {
        name: "min_repeats",
        default: 3,
        unit: ParamUnit::Count,
        doc: "a finding with no wait over threshold_ns needs this many flagged waits",
    },
];

/// Description.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "runqueue-starvation",
    summary: "a runnable task waits long for its CPU while other tasks run there",
    explanation: EXPLANATION,
    needs: &[&["sched_switch"], &["sched_waking", "sched_wakeup"]],
    optional: &[
        "sched_migrate_task",
        "sched_wakeup_new",
        "sched_stat_runtime",
    ],
    record_command: "perf sched record -- COMMAND   (or: perf record -e 'sched:*' -a -- COMMAND)",
    params: &PARAMS,
};

const EXPLANATION: &str = r#"# runqueue-starvation

## What it finds
A task that is **runnable** — woken, or preempted while still wanting the CPU — but does not
get its CPU for a long time, while other tasks run there. The waiting task is the
**victim**; every task that ran on that CPU during the wait is a **culprit**, with its run
time and number of slices (the one that ran longest is the main culprit). A wait is flagged
when it lasts at least `threshold_ns` (default 10 ms), or when it is extreme for that task
(at least `relative_min_ns`, default 5 ms, and at least `relative_factor`, default 20, times
the task's median wait once `min_samples`, default 20, waits are known), or when the task is
**periodic** (at least `min_samples` wakeups, half of their intervals within 20 % of the
median interval, which is at least `min_period_ns`, default 0.5 ms) and the wait is longer than its period: the task falls behind its own
rhythm. Repeated flagged waits of one victim behind one main culprit become one finding
with counts, the total, and the worst instance in detail.

Each finding says how the worst wait ended: the culprit **blocked** (it switched out
sleeping), the culprit was **preempted** (it switched out runnable, `R`/`R+`), the culprit
**migrated away** (`sched_migrate_task` moved it to another CPU), the **victim migrated**
to another CPU, or the **victim was picked** after the CPU went idle. It gives the
explanation the trace supports: kernel priorities (and so nice and CFS/EEVDF load weights)
from the event payloads, cgroup CPU weights and policies from recorded system context
(`stallscope record`), and the vruntime gap when events carry vruntime
(`sched_stat_runtime` on kernels before 6.8, or any custom event with `pid` and `vruntime`
fields).

## Why it matters
A runnable task that does not run is pure latency: a periodic thread misses deadlines, a
request handler stalls, a lock holder delays every waiter. Usually the cause is a
scheduling-class or weight imbalance (a nice −20 hog, a cgroup with a huge `cpu.weight`,
an RT task), pinning that keeps tasks on one CPU, or a hog that never sleeps.

## How to confirm
`perf sched timehist -p PID --state` (or `stallscope timehist --pid PID`) around the
window shows the victim's long "wait time"/"sch delay" and who ran meanwhile;
`perf sched latency -p` shows its maximum delay. Check `chrt -p`, `ps -o ni`, the
cgroups' `cpu.weight`/`cpu.shares`, and `taskset -p` of both tasks.

## Limits
A wait whose CPU is not known (no `target_cpu`, no migration events) is attributed to
the CPU it ended on. The median and the period are learned as the trace goes, so waits
before `min_samples` samples are judged by `threshold_ns` alone. Without system context
the trace does not say why the kernel preferred the culprit beyond priorities; vruntime is
only printed by older kernels. A wait during most of which its CPU was idle, or during less
than half of which other tasks are seen running, contradicts a queued task (events are
missing, or the task was throttled by CFS bandwidth control): it is reported as low, with
those times. A wait during which a record shows the task itself running (its switch-in
record is missing) is dropped; a wait that starts right after the timeline had to reset the
task's state (contradicting switch records) is reported as low. Lost events (ring-buffer overruns) can hide switches inside a
wait; they are shown in the data-quality block, and such waits are kept as measured.

## Severity
- **high**: the worst wait is at least `high_ns` (default 50 ms), or the victim is
  periodic and at least 10 % of its wakeups waited longer than a period (at least
  `min_repeats` times behind this culprit).
- **medium**: the worst wait is at least `threshold_ns`, or a periodic victim waited
  longer than a period on at least 1 % of its wakeups.
- **low**: only waits that are extreme relative to the task's own median, or a worst wait
  the trace does not explain (CPU idle for more than half of it, other tasks running for
  less than half of it, or a start right after contradicting switch records).
"#;

/// Builds the detector.
pub fn make(p: &Params) -> Box<dyn Detector> {
    Box::new(RunqueueStarvation::new(p))
}

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitEnd {
    /// The culprit switched out sleeping (state given).
    CulpritBlocked(PrevState),
    /// The culprit switched out runnable (`R` / `R+`).
    CulpritPreempted(PrevState),
    /// The main culprit was migrated away from the CPU.
    CulpritMigratedAway,
    /// The victim was migrated and ran elsewhere.
    VictimMigrated,
    /// The CPU went idle (or its task was unknown) and then picked the victim.
    VictimPicked,
}

impl WaitEnd {
    /// Index in the per-group counters and the measure name.
    fn slot(self) -> (usize, &'static str) {
        match self {
            WaitEnd::CulpritBlocked(_) => (0, "ended_culprit_blocked"),
            WaitEnd::CulpritPreempted(_) => (1, "ended_culprit_preempted"),
            WaitEnd::CulpritMigratedAway => (2, "ended_culprit_migrated_away"),
            WaitEnd::VictimMigrated => (3, "ended_victim_migrated"),
            WaitEnd::VictimPicked => (4, "ended_victim_picked"),
        }
    }
}

/// A task that ran on the waiter's CPU during a wait.
#[derive(Clone, Debug)]
struct Culprit {
    tid: Tid,
    run_ns: u64,
    slices: u64,
    prio: i32,
    vruntime: Option<u64>,
    /// Its switch-in before it first ran during the wait: an index into the wait's
    /// `first_ins` (meaningful only with that wait).
    first_in: Option<u32>,
}

/// A wait in progress.
#[derive(Clone, Debug)]
struct Wait {
    since: Ts,
    cause: RunnableCause,
    start_cpu: Cpu,
    cpu: Cpu,
    start: Kept,
    culprits: Vec<Culprit>,
    /// The culprits' switch-in events (see [`Culprit::first_in`]).
    first_ins: Vec<KeptCopy<Switch>>,
    victim_moves: Vec<Kept>,
    culprit_moves: Vec<(Tid, Kept)>,
    /// Time the waiter's CPU spent idle during the wait (should be ~0 for a queued task).
    idle_ns: u64,
    /// The task's state before the wait was unknown after the trace's start (the timeline
    /// reset it because switch records contradicted each other).
    uncertain_start: bool,
}

impl Wait {
    /// A new wait (out of line: a task's wait storage is reused by its next wait, so this
    /// runs once per task).
    #[cold]
    #[inline(never)]
    fn new_boxed(
        since: Ts,
        cause: RunnableCause,
        cpu: Cpu,
        uncertain_start: bool,
        ev: &Event,
    ) -> Box<Wait> {
        Box::new(Wait {
            since,
            cause,
            start_cpu: cpu,
            cpu,
            start: keep(ev),
            culprits: Vec::new(),
            first_ins: Vec::new(),
            victim_moves: Vec::new(),
            culprit_moves: Vec::new(),
            idle_ns: 0,
            uncertain_start,
        })
    }

    /// A task first seen running during this wait: `overlap` ns in one slice, its
    /// (prio, vruntime) and, when known, the switch-in that started its run.
    fn add_culprit(
        &mut self,
        tid: Tid,
        overlap: u64,
        (prio, vr): (i32, Option<u64>),
        switch_in: Option<KeptCopy<Switch>>,
    ) {
        let first_in = switch_in.map(|k| {
            self.first_ins.push(k);
            self.first_ins.len() as u32 - 1
        });
        self.culprits.push(Culprit {
            tid,
            run_ns: overlap,
            slices: 1,
            prio,
            vruntime: vr,
            first_in,
        });
    }
}

/// Per-task statistics.
#[derive(Default)]
struct TaskStat {
    vruntime: Option<u64>,
    waits: LogHist,
    median_wait: u64,
    intervals: LogHist,
    period: u64,
    first_wakeup: Option<Ts>,
    last_wakeup: Option<Ts>,
    wakeups: u64,
    waits_longer_than_period: u64,
    /// The task's wait: in progress while `waiting`. A finished wait stays (its allocation
    /// and vector capacities are reused in place by the task's next wait: a wait starts
    /// and ends on almost every wakeup).
    wait: Option<Box<Wait>>,
    /// `wait` is in progress.
    waiting: bool,
    /// A transition of this task was seen (so a later `Unknown` state is a reset).
    seen_before: bool,
}

impl TaskStat {
    /// The wait in progress, if any.
    #[inline]
    fn wait(&self) -> Option<&Wait> {
        match self.waiting {
            true => self.wait.as_deref(),
            false => None,
        }
    }

    /// The wait in progress, if any.
    #[inline]
    fn wait_mut(&mut self) -> Option<&mut Wait> {
        match self.waiting {
            true => self.wait.as_deref_mut(),
            false => None,
        }
    }

    /// Ends the wait in progress without judging it (its storage stays): its current and
    /// starting CPUs, when there was one.
    #[inline]
    fn drop_wait(&mut self) -> Option<(Cpu, Cpu)> {
        if !std::mem::take(&mut self.waiting) {
            return None;
        }
        self.wait.as_deref().map(|w| (w.cpu, w.start_cpu))
    }
}

/// Each task's last known priority (from the switch and wakeup events naming it): by tid in
/// a plain array for the tids Linux hands out (below `PID_MAX_LIMIT`, 2^22), in a map for
/// any other. Noted twice per switch, so one store instead of a task-table lookup.
#[derive(Default)]
struct Prios {
    by_tid: Vec<i32>,
    others: FxHashMap<Tid, i32>,
}

/// Tids below this are kept by index in [`Prios`] (the kernel's `PID_MAX_LIMIT`).
const PRIO_TIDS: usize = 1 << 22;

/// A [`Prios`] entry never set.
const NO_PRIO: i32 = -1;

impl Prios {
    /// Notes `tid`'s priority (`tid > 0`, `prio >= 0`).
    #[inline(always)]
    fn set(&mut self, tid: Tid, prio: i32) {
        let t = tid as usize;
        match self.by_tid.get_mut(t) {
            Some(p) => *p = prio,
            None => self.set_growing(tid, prio),
        }
    }

    /// [`Prios::set`] of a tid past the array (out of line: the array grows to the
    /// largest tid seen, once).
    #[cold]
    #[inline(never)]
    fn set_growing(&mut self, tid: Tid, prio: i32) {
        let t = tid as usize;
        if t < PRIO_TIDS {
            self.by_tid.resize(t + 1, NO_PRIO);
            self.by_tid[t] = prio;
        } else {
            self.others.insert(tid, prio);
        }
    }

    /// `tid`'s last known priority.
    #[inline]
    fn get(&self, tid: Tid) -> Option<i32> {
        let p = match usize::try_from(tid).ok().and_then(|t| self.by_tid.get(t)) {
            Some(&p) => p,
            None => self.others.get(&tid).copied().unwrap_or(NO_PRIO),
        };
        (p != NO_PRIO).then_some(p)
    }
}

/// Per CPU: who runs since when, and who waits there.
#[derive(Default)]
struct CpuRun {
    runner: Option<Tid>,
    since: Ts,
    switch_in: KeptCopySlot<Switch>,
    waiters: Vec<Tid>,
}

/// Why a wait was flagged (see the module docs).
#[derive(Clone, Copy)]
struct Flags {
    /// At least `threshold_ns`.
    abs: bool,
    /// Extreme relative to the task's median.
    rel: bool,
    /// Longer than the periodic task's period.
    over_period: bool,
}

/// The thresholds that flag a finished wait (see the module docs).
#[derive(Clone, Copy)]
struct Judge {
    threshold: u64,
    relative_min: u64,
    relative_factor: u64,
    min_samples: u64,
}

impl Judge {
    /// Why the wait `w` of the task `t` is flagged if it ends after `waited` ns, judged
    /// against what was known before this wait.
    #[inline]
    fn flags(self, t: &TaskStat, w: &Wait, waited: u64) -> Flags {
        let rel = waited >= self.relative_min
            && t.waits.count() >= self.min_samples
            && t.median_wait > 0
            && waited >= self.relative_factor.saturating_mul(t.median_wait);
        let periodic = w.cause == RunnableCause::Wakeup && t.period > 0;
        Flags {
            abs: waited >= self.threshold,
            rel,
            over_period: periodic && waited >= t.period,
        }
    }
}

impl Flags {
    /// The wait is flagged at all.
    #[inline]
    fn any(self) -> bool {
        self.abs || self.rel || self.over_period
    }
}

/// The worst wait of a group.
struct Worst {
    wait: u64,
    since: Ts,
    end: Ts,
    start_cpu: Cpu,
    end_cpu: Cpu,
    how: WaitEnd,
    culprits: Vec<Culprit>,
    victim_prio: Option<i32>,
    victim_vruntime: Option<u64>,
    /// The migration that ended the wait (`sched_migrate_task`), when one did.
    migration: Option<Kept>,
    /// Idle time of the waiter's CPU during the wait.
    idle_ns: u64,
    /// See [`Wait::uncertain_start`].
    uncertain_start: bool,
    evidence: Vec<Kept>,
}

/// Flagged waits of one victim behind one main culprit.
struct Group {
    count: u64,
    total: u64,
    over_threshold: u64,
    over_relative: u64,
    over_period: u64,
    ends: [u64; 5],
    first: Ts,
    last: Ts,
    cpus: Vec<Cpu>,
    worst: Worst,
}

/// The detector.
pub struct RunqueueStarvation {
    high: u64,
    /// What flags a wait.
    judge: Judge,
    min_period: u64,
    min_repeats: u64,
    tasks: PerTask<TaskStat>,
    prios: Prios,
    cpus: Vec<CpuRun>,
    groups: FxHashMap<(Tid, Tid), Group>,
}

/// Recompute cached medians when the sample count is a power of two or a multiple of 32.
/// (`n & (n - 1) == 0`: a power of two, or 0, which is a multiple of 32 too; without the
/// `popcnt` instruction of newer CPUs `is_power_of_two` is a dozen instructions.)
#[inline]
fn refresh_due(n: u64) -> bool {
    n & n.wrapping_sub(1) == 0 || n.is_multiple_of(32)
}

impl RunqueueStarvation {
    fn new(p: &Params) -> RunqueueStarvation {
        RunqueueStarvation {
            judge: Judge {
                threshold: p.get("threshold_ns"),
                relative_min: p.get("relative_min_ns"),
                relative_factor: p.get("relative_factor"),
                min_samples: p.get("min_samples"),
            },
            high: p.get("high_ns"),
            min_period: p.get("min_period_ns"),
            min_repeats: p.get("min_repeats"),
            tasks: PerTask::default(),
            prios: Prios::default(),
            cpus: Vec::new(),
            groups: FxHashMap::default(),
        }
    }

    fn cpu(&mut self, c: Cpu) -> &mut CpuRun {
        crate::per_task::per_cpu(&mut self.cpus, c)
    }

    #[inline(always)]
    fn note_prio(&mut self, tid: Tid, prio: i32) {
        if tid > 0 && prio >= 0 {
            self.prios.set(tid, prio);
        }
    }

    /// Custom events (bpftrace, kprobes) carrying `pid` and `vruntime` fields (out of line:
    /// rare, and kept out of the per-event code).
    #[inline(never)]
    fn note_custom_vruntime(&mut self, g: &stallscope_model::GenericEvent) {
        let field = |name: &str| {
            g.fields
                .iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| match v {
                    FieldValue::Int(x) => u64::try_from(*x).ok(),
                    FieldValue::UInt(x) => Some(*x),
                    FieldValue::Str(t) => t.trim().parse().ok(),
                    FieldValue::Bytes(_) => None,
                })
        };
        if let (Some(pid), Some(v)) = (field("pid"), field("vruntime")) {
            if let Ok(pid) = Tid::try_from(pid) {
                if pid > 0 {
                    self.tasks.entry(pid).vruntime = Some(v);
                }
            }
        }
    }

    /// A switch event: the priorities it names, then [`RunqueueStarvation::on_switch`].
    #[inline(never)]
    fn switch_event(&mut self, ev: &Event, s: &Switch) {
        self.note_prio(s.prev.pid, s.prev.prio);
        self.note_prio(s.next.pid, s.next.prio);
        self.on_switch(ev, s);
    }

    /// A switch on `ev.cpu`: credits the outgoing task to every waiter of that CPU.
    #[inline(always)]
    fn on_switch(&mut self, ev: &Event, s: &Switch) {
        let (prev, next) = (s.prev.pid, s.next.pid);
        let ts = ev.ts;
        let c = ev.cpu;
        self.cpu(c);
        let RunqueueStarvation {
            cpus, tasks, judge, ..
        } = self;
        let run = &cpus[c as usize];
        let (runner, since) = (run.runner, run.since);
        if prev == 0 && runner == Some(0) {
            for &w in &run.waiters {
                if let Some(wait) = tasks.get_mut(w).and_then(TaskStat::wait_mut) {
                    wait.idle_ns += ts.saturating_sub(since.max(wait.since));
                }
            }
        } else if prev > 0 && !run.waiters.is_empty() {
            // When the switch's prev is not the task we saw switched in (a switch record is
            // missing; the timeline counts it as data quality), the interval is credited to
            // prev: the kernel says it was running when the CPU switched.
            let prio = self.prios.get(prev).unwrap_or(-1);
            let vr = tasks.get(prev).and_then(|t| t.vruntime);
            // The waiter this switch picks ends its wait at this event (the timeline makes it
            // running: a transition from runnable, `end_wait`); what it is credited now is
            // only read if that wait is flagged, so it is credited only then.
            let picked = if next > 0 && (c as usize) < MAX_CPUS {
                next
            } else {
                0
            };
            for &w in &run.waiters {
                if w == prev {
                    continue; // the waiter itself never culprits its own wait
                }
                let Some(t) = tasks.get_mut(w) else {
                    continue; // waiter list and wait are updated together; nothing to credit
                };
                if w == picked {
                    let flagged = match t.wait() {
                        Some(wait) => judge.flags(t, wait, ts.saturating_sub(wait.since)).any(),
                        None => true,
                    };
                    if !flagged {
                        continue;
                    }
                }
                let Some(wait) = t.wait_mut() else {
                    continue; // waiter list and wait are updated together; nothing to credit
                };
                let start = since.max(wait.since);
                let overlap = ts.saturating_sub(start);
                match wait.culprits.iter_mut().find(|k| k.tid == prev) {
                    Some(k) => {
                        k.run_ns += overlap;
                        k.slices += 1;
                        k.prio = prio;
                        k.vruntime = vr;
                    }
                    None => {
                        wait.add_culprit(prev, overlap, (prio, vr), run.switch_in.get().copied())
                    }
                }
            }
        }
        let run = self.cpu(c);
        run.runner = Some(next);
        run.since = ts;
        if next > 0 {
            run.switch_in.set(ev, s, EventKind::Switch);
        } else {
            run.switch_in.clear();
        }
    }

    /// `at`: the index of `tid`'s record in `tasks`.
    fn start_wait(
        &mut self,
        (tid, at): (Tid, usize),
        since: Ts,
        cause: RunnableCause,
        uncertain_start: bool,
        ev: &Event,
    ) {
        let cpu = match (&ev.kind, cause) {
            (EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w), _) => {
                w.target_cpu.unwrap_or(ev.cpu)
            }
            _ => ev.cpu,
        };
        let (min_samples, min_period) = (self.judge.min_samples, self.min_period);
        let t = self.tasks.at_mut(at);
        match &mut t.wait {
            Some(w) => {
                w.since = since;
                w.cause = cause;
                w.start_cpu = cpu;
                w.cpu = cpu;
                keep_into(&mut w.start, ev);
                w.culprits.clear();
                w.first_ins.clear();
                w.victim_moves.clear();
                w.culprit_moves.clear();
                w.idle_ns = 0;
                w.uncertain_start = uncertain_start;
            }
            None => t.wait = Some(Wait::new_boxed(since, cause, cpu, uncertain_start, ev)),
        }
        t.waiting = true;
        if cause == RunnableCause::Wakeup && !matches!(ev.kind, EventKind::WakeupNew(_)) {
            if let Some(last) = t.last_wakeup {
                t.intervals.add(since.saturating_sub(last));
                let n = t.intervals.count();
                if n >= min_samples && refresh_due(n) {
                    let m = t.intervals.median_tracked();
                    // periodic: at least half of the intervals within 20 % of the median
                    t.period = if m >= min_period && t.intervals.count_near(m, 200) * 2 >= n {
                        m
                    } else {
                        0
                    };
                }
            }
            t.first_wakeup.get_or_insert(since);
            t.last_wakeup = Some(since);
            t.wakeups += 1;
        }
        let run = self.cpu(cpu);
        if !run.waiters.contains(&tid) {
            run.waiters.push(tid);
        }
    }

    /// Removes `tid` from `cpu`'s waiters (a task is listed at most once per CPU; the
    /// list's order does not matter: each waiter's wait is credited on its own).
    fn remove_waiter(&mut self, cpu: Cpu, tid: Tid) {
        if let Some(run) = self.cpus.get_mut(cpu as usize) {
            if let Some(k) = run.waiters.iter().position(|&w| w == tid) {
                run.waiters.swap_remove(k);
            }
        }
    }

    /// A migration (out of line: rare, and kept out of the per-transition code).
    #[inline(never)]
    fn on_migrate(&mut self, tid: Tid, from: Cpu, to: Cpu, ev: &Event) {
        // what ran on the old CPU while the waiter was queued there, up to the migration
        let (runner, since, switch_in) = match self.cpus.get(from as usize) {
            Some(r) => (r.runner, r.since, r.switch_in.get().copied()),
            None => (None, 0, None),
        };
        let (prio, vr) = match runner {
            Some(r) if r > 0 => (
                self.prios.get(r).unwrap_or(-1),
                self.tasks.get(r).and_then(|t| t.vruntime),
            ),
            _ => (-1, None),
        };
        let moved_waiter = match self.tasks.get_mut(tid).and_then(TaskStat::wait_mut) {
            Some(w) => {
                if let Some(r) = runner.filter(|&r| r > 0 && r != tid && w.cpu == from) {
                    let overlap = ev.ts.saturating_sub(since.max(w.since));
                    match w.culprits.iter_mut().find(|k| k.tid == r) {
                        Some(k) => {
                            k.run_ns += overlap;
                            k.slices += 1;
                        }
                        None => w.add_culprit(r, overlap, (prio, vr), switch_in),
                    }
                }
                w.cpu = to;
                if w.victim_moves.len() < 4 {
                    w.victim_moves.push(keep(ev));
                }
                true
            }
            None => false,
        };
        if moved_waiter {
            self.remove_waiter(from, tid);
            let run = self.cpu(to);
            if !run.waiters.contains(&tid) {
                run.waiters.push(tid);
            }
        }
        // a preempted culprit is itself a waiter: it may also be leaving other waiters' CPU
        let Some(run) = self.cpus.get(from as usize) else {
            return;
        };
        for w in run.waiters.clone() {
            if w == tid {
                continue;
            }
            if let Some(wait) = self.tasks.get_mut(w).and_then(TaskStat::wait_mut) {
                if wait.culprits.iter().any(|k| k.tid == tid) && wait.culprit_moves.len() < 4 {
                    wait.culprit_moves.push((tid, keep(ev)));
                }
            }
        }
    }

    /// `at`: the index of `tid`'s record in `tasks`.
    fn end_wait(&mut self, (tid, at): (Tid, usize), ts: Ts, end_cpu: Cpu, ev: &Event) {
        let t = self.tasks.at_mut(at);
        if !std::mem::take(&mut t.waiting) {
            return;
        }
        let Some(wait) = t.wait.as_deref() else {
            return;
        };
        let waited = ts.saturating_sub(wait.since);
        let (cpu_of_wait, start_cpu) = (wait.cpu, wait.start_cpu);
        let flags = self.judge.flags(t, wait, waited);
        if flags.over_period {
            t.waits_longer_than_period += 1;
        }
        t.waits.add(waited);
        let n = t.waits.count();
        if refresh_due(n) {
            t.median_wait = t.waits.median_tracked();
        }
        let (victim_prio, victim_vr) = (self.prios.get(tid), t.vruntime);
        self.remove_waiter(cpu_of_wait, tid);
        if cpu_of_wait != start_cpu {
            self.remove_waiter(start_cpu, tid);
        }
        if !flags.any() {
            return;
        }
        // the wait's storage goes back to the task afterwards
        let Some(wait) = self.tasks.at_mut(at).wait.take() else {
            return;
        };
        self.group_flagged(
            tid,
            &wait,
            waited,
            flags,
            (victim_prio, victim_vr),
            (ts, end_cpu, ev),
        );
        self.tasks.at_mut(at).wait = Some(wait);
    }

    /// A flagged wait of `tid` that ended at `ts` on `end_cpu` with `ev`: merged into its
    /// (victim, main culprit) group. Out of line and cold: most waits are not flagged, and
    /// keeping this out of [`RunqueueStarvation::end_wait`] keeps the per-transition code small.
    #[cold]
    #[inline(never)]
    fn group_flagged(
        &mut self,
        tid: Tid,
        wait: &Wait,
        waited: u64,
        Flags {
            abs,
            rel,
            over_period,
        }: Flags,
        (victim_prio, victim_vr): (Option<i32>, Option<u64>),
        (ts, end_cpu, ev): (Ts, Cpu, &Event),
    ) {
        let mut culprits = wait.culprits.clone();
        culprits.sort_by(|a, b| b.run_ns.cmp(&a.run_ns).then(a.tid.cmp(&b.tid)));
        let main = culprits.first().map_or(-1, |k| k.tid);
        let (prev, prev_state) = match &ev.kind {
            EventKind::Switch(s) => (s.prev.pid, s.prev_state),
            _ => (-1, PrevState::default()),
        };
        let how = if !wait.victim_moves.is_empty() && end_cpu != wait.start_cpu {
            WaitEnd::VictimMigrated
        } else if main > 0 && wait.culprit_moves.iter().any(|(k, _)| *k == main) {
            WaitEnd::CulpritMigratedAway
        } else if prev <= 0 {
            WaitEnd::VictimPicked
        } else if prev_state.is_runnable() {
            WaitEnd::CulpritPreempted(prev_state)
        } else {
            WaitEnd::CulpritBlocked(prev_state)
        };
        let g = self.groups.entry((tid, main)).or_insert_with(|| Group {
            count: 0,
            total: 0,
            over_threshold: 0,
            over_relative: 0,
            over_period: 0,
            ends: [0; 5],
            first: wait.since,
            last: ts,
            cpus: Vec::new(),
            worst: Worst {
                wait: 0,
                since: 0,
                end: 0,
                start_cpu: 0,
                end_cpu: 0,
                how,
                culprits: Vec::new(),
                victim_prio: None,
                victim_vruntime: None,
                migration: None,
                idle_ns: 0,
                uncertain_start: false,
                evidence: Vec::new(),
            },
        });
        g.count += 1;
        g.total += waited;
        g.over_threshold += u64::from(abs);
        g.over_relative += u64::from(rel);
        g.over_period += u64::from(over_period);
        g.ends[how.slot().0] += 1;
        g.first = g.first.min(wait.since);
        g.last = g.last.max(ts);
        for c in [wait.start_cpu, end_cpu] {
            if !g.cpus.contains(&c) {
                g.cpus.push(c);
            }
        }
        if waited > g.worst.wait || g.worst.evidence.is_empty() {
            let mut evidence = vec![wait.start.clone()];
            evidence.extend(wait.victim_moves.iter().cloned());
            evidence.extend(
                culprits
                    .iter()
                    .take(3)
                    .filter_map(|k| wait.first_ins.get(k.first_in? as usize).map(KeptCopy::kept)),
            );
            evidence.extend(wait.culprit_moves.iter().map(|(_, e)| e.clone()));
            evidence.push(keep(ev));
            g.worst = Worst {
                wait: waited,
                since: wait.since,
                end: ts,
                start_cpu: wait.start_cpu,
                end_cpu,
                how,
                culprits,
                victim_prio,
                victim_vruntime: victim_vr,
                idle_ns: wait.idle_ns,
                uncertain_start: wait.uncertain_start,
                migration: match how {
                    WaitEnd::VictimMigrated => wait.victim_moves.last().cloned(),
                    WaitEnd::CulpritMigratedAway => wait
                        .culprit_moves
                        .iter()
                        .rev()
                        .find(|(k, _)| *k == main)
                        .map(|(_, e)| e.clone()),
                    _ => None,
                },
                evidence,
            };
        }
    }

    fn finding(&self, (victim, main): (Tid, Tid), g: &Group, cx: &Context<'_>) -> Option<Finding> {
        if g.over_threshold == 0 && g.count < self.min_repeats {
            return None;
        }
        let t = self.tasks.get(victim)?;
        let w = &g.worst;
        let periodic = t.period > 0 && t.wakeups >= self.judge.min_samples;
        let missed_permille = ratio_permille(t.waits_longer_than_period, t.wakeups);
        let rhythm_repeats = periodic && g.over_period >= self.min_repeats;
        // A queued task is picked before its CPU idles; a CPU idle for most of the wait means
        // missing events (or throttling): report it, but only as low.
        let ran: u64 = w.culprits.iter().map(|k| k.run_ns).sum();
        let unexplained = w.idle_ns.saturating_mul(2) > w.wait || ran.saturating_mul(2) < w.wait;
        let suspect = unexplained || w.uncertain_start;
        let severity = if suspect {
            FindingSeverity::Low
        } else if w.wait >= self.high || (rhythm_repeats && missed_permille >= 100) {
            FindingSeverity::High
        } else if w.wait >= self.judge.threshold || (rhythm_repeats && missed_permille >= 10) {
            FindingSeverity::Medium
        } else {
            FindingSeverity::Low
        };
        let vcomm = cx.comm(victim);
        let main_k = w.culprits.iter().find(|k| k.tid == main);
        let on = if w.start_cpu == w.end_cpu {
            format!("CPU {}", w.start_cpu)
        } else {
            format!("CPU {} (ran on CPU {})", w.start_cpu, w.end_cpu)
        };
        let mut title = match main_k {
            Some(k) => format!(
                "{vcomm} (pid {victim}) waited {} runnable on {on} while {} (pid {main}) ran {} slice{} ({})",
                dur(w.wait),
                cx.comm(main),
                k.slices,
                if k.slices == 1 { "" } else { "s" },
                dur(k.run_ns)
            ),
            None => format!(
                "{vcomm} (pid {victim}) waited {} runnable on {on} with no other task recorded running there",
                dur(w.wait)
            ),
        };
        if unexplained {
            title.push_str(&format!(
                " — but other tasks ran for only {} of it and the CPU idled for {}: events may be missing (see data quality) or the task was throttled",
                dur(ran),
                dur(w.idle_ns)
            ));
        } else if w.uncertain_start {
            title.push_str(
                " — but the task's switch records contradict each other before the wait (see data quality): it may have been running",
            );
        }
        if g.count > 1 {
            title.push_str(&format!(
                "; worst of {} flagged waits ({} in total)",
                g.count,
                dur(g.total)
            ));
        }
        if rhythm_repeats {
            title.push_str(&format!(
                "; periodic task (every {}) waited longer than its period after {} of {} wakeups ({})",
                dur(t.period),
                t.waits_longer_than_period,
                t.wakeups,
                permille(missed_permille)
            ));
        }
        let mut m = BTreeMap::new();
        m.insert("worst_wait_ns".into(), i(w.wait));
        m.insert("worst_wait_start_ns".into(), i(w.since));
        m.insert("worst_wait_end_ns".into(), i(w.end));
        m.insert("worst_wait_cpu_idle_ns".into(), i(w.idle_ns));
        m.insert("worst_wait_others_ran_ns".into(), i(ran));
        m.insert("waits".into(), i(g.count));
        m.insert("total_wait_ns".into(), i(g.total));
        m.insert("waits_over_threshold".into(), i(g.over_threshold));
        m.insert("waits_over_relative".into(), i(g.over_relative));
        m.insert("waits_over_period".into(), i(g.over_period));
        m.insert("victim_median_wait_ns".into(), i(t.waits.median()));
        for (k, n) in g.ends.iter().enumerate() {
            let name = [
                "ended_culprit_blocked",
                "ended_culprit_preempted",
                "ended_culprit_migrated_away",
                "ended_victim_migrated",
                "ended_victim_picked",
            ][k];
            m.insert(name.into(), i(*n));
        }
        if periodic {
            m.insert("period_ns".into(), i(t.period));
            m.insert("wakeups".into(), i(t.wakeups));
            m.insert(
                "waits_longer_than_period".into(),
                i(t.waits_longer_than_period),
            );
            if let (Some(a), Some(b)) = (t.first_wakeup, t.last_wakeup) {
                m.insert("expected_wakeups".into(), i((b - a) / t.period + 1));
            }
        }
        let mut tasks = vec![FindingTask {
            pid: victim,
            comm: vcomm.as_str().to_string(),
            role: "victim".into(),
            measures: prio_measures(w.victim_prio),
        }];
        for k in w.culprits.iter().take(5) {
            let mut tm = prio_measures(Some(k.prio).filter(|p| *p >= 0));
            tm.insert("run_ns".into(), i(k.run_ns));
            tm.insert("slices".into(), i(k.slices));
            tasks.push(FindingTask {
                pid: k.tid,
                comm: cx.comm(k.tid).as_str().to_string(),
                role: "culprit".into(),
                measures: tm,
            });
        }
        if let Some(k) = main_k {
            m.insert("culprit_run_ns".into(), i(k.run_ns));
            m.insert("culprit_slices".into(), i(k.slices));
            if let (Some(a), Some(b)) = (w.victim_vruntime, k.vruntime) {
                m.insert("vruntime_gap_ns".into(), a as i64 - b as i64);
            }
        }
        let hint = self.hint(victim, main, main_k, w, cx);
        let mut cpus = g.cpus.clone();
        cpus.sort_unstable();
        let kept: Vec<&Kept> = w.evidence.iter().collect();
        Some(Finding {
            detector: INFO.id.into(),
            severity,
            title,
            window: Window {
                start_ns: g.first,
                end_ns: g.last,
            },
            cpus,
            tasks,
            measures: m,
            evidence: render(cx.paths, &kept),
            hint,
        })
    }

    fn hint(
        &self,
        victim: Tid,
        main: Tid,
        main_k: Option<&Culprit>,
        w: &Worst,
        cx: &Context<'_>,
    ) -> String {
        let mut why = Vec::new();
        let how = match w.how {
            WaitEnd::CulpritBlocked(s) => format!("the culprit switched out sleeping ({s})"),
            WaitEnd::CulpritPreempted(s) => {
                format!("the running task was preempted ({s}) and the victim picked")
            }
            WaitEnd::CulpritMigratedAway => format!(
                "the main culprit was migrated to another CPU ({})",
                migration_text(w.migration.as_ref())
            ),
            WaitEnd::VictimMigrated => format!(
                "the victim was migrated ({}) and ran on CPU {}",
                migration_text(w.migration.as_ref()),
                w.end_cpu
            ),
            WaitEnd::VictimPicked => "the CPU went idle and then picked the victim".into(),
        };
        why.push(format!("The worst wait ended because {how}."));
        if let Some(k) = main_k {
            let (vp, cp) = (w.victim_prio.unwrap_or(-1), k.prio);
            let mut s = format!(
                "Victim {}, culprit {}",
                describe_prio(vp),
                describe_prio(cp)
            );
            if let (Some(a), Some(b)) = (
                nice_of_prio(vp).and_then(weight_of_nice),
                nice_of_prio(cp).and_then(weight_of_nice),
            ) {
                if b > a {
                    s.push_str(&format!(
                        ": the culprit is entitled to {}× the victim's CPU share",
                        b / a.max(1)
                    ));
                }
            }
            s.push('.');
            why.push(s);
            if let (Some(a), Some(b)) = (w.victim_vruntime, k.vruntime) {
                why.push(format!(
                    "vruntime: victim {a}, culprit {b} (gap {} ns).",
                    a as i64 - b as i64
                ));
            }
        }
        for (pid, role) in [(victim, "victim"), (main, "culprit")] {
            if let Some(tc) = cx.task_context(pid) {
                let mut parts = Vec::new();
                if let Some(p) = &tc.policy {
                    parts.push(p.clone());
                }
                if let Some(n) = tc.nice {
                    parts.push(format!("nice {n}"));
                }
                for cg in &tc.cgroups {
                    if let Some(wt) = cg.cpu_weight {
                        parts.push(format!("cgroup {} cpu.weight {wt}", cg.path));
                    }
                    if let Some(sh) = cg.cpu_shares {
                        parts.push(format!("cgroup {} cpu.shares {sh}", cg.path));
                    }
                }
                if let Some(a) = &tc.cpus_allowed {
                    parts.push(format!("CPUs {a}"));
                }
                if !parts.is_empty() {
                    why.push(format!("Recorded {role} context: {}.", parts.join(", ")));
                }
            }
        }
        why.push(format!(
            "Confirm with `perf sched timehist -p {victim} --state` around {} s; consider raising the victim's priority or weight, lowering the culprit's, or separating them on different CPUs.",
            stallscope_model::fmt_secs_usecs(w.since)
        ));
        why.join(" ")
    }
}

/// `sched_migrate_task at 595.127047 s: pid 12 CPU 1 → 0`.
fn migration_text(ev: Option<&Kept>) -> String {
    match ev.map(|e| (e.ts, &e.kind)) {
        Some((ts, EventKind::Migrate(m))) => format!(
            "sched_migrate_task at {} s: pid {} CPU {} → {}",
            stallscope_model::fmt_secs_usecs(ts),
            m.task.pid,
            m.orig_cpu,
            m.dest_cpu
        ),
        _ => "sched_migrate_task".to_string(),
    }
}

fn prio_measures(prio: Option<i32>) -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    if let Some(p) = prio {
        m.insert("prio".into(), i64::from(p));
        if let Some(n) = nice_of_prio(p) {
            m.insert("nice".into(), i64::from(n));
            if let Some(w) = weight_of_nice(n) {
                m.insert("weight".into(), i(w));
            }
        }
    }
    m
}

impl Detector for RunqueueStarvation {
    fn info(&self) -> &'static DetectorInfo {
        &INFO
    }

    fn ignores_quiet_transitions(&self) -> bool {
        // Waits start at a transition to runnable and end at one from runnable. A task's
        // first transition (from unknown) is never quiet, so `seen_before` is the same; a
        // record a quiet transition would have created holds no priority or vruntime, which
        // reads as no record.
        true
    }

    #[inline(always)]
    fn on_event(&mut self, ev: &Event) {
        // the small cases inline into the run loop, the switch out of line
        match &ev.kind {
            EventKind::Switch(s) => self.switch_event(ev, s),
            EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => {
                self.note_prio(w.task.pid, w.task.prio)
            }
            EventKind::StatRuntime(r) => {
                if let Some(v) = r.vruntime {
                    if r.task.pid > 0 {
                        self.tasks.entry(r.task.pid).vruntime = Some(v);
                    }
                }
            }
            EventKind::Generic(g) => self.note_custom_vruntime(g),
            EventKind::Lost { .. } => {
                // the CPU's runner is unknown until its next switch
                let run = self.cpu(ev.cpu);
                run.runner = None;
            }
            _ => {}
        }
        // Every record names the task current on its CPU: when that contradicts the runner
        // we saw switched in, a switch record is missing; the interval since the last switch
        // is then credited to the task the records show running.
        if ev.pid > 0 && !matches!(ev.kind, EventKind::Switch(_) | EventKind::TaskComm { .. }) {
            if let Some(run) = self.cpus.get_mut(ev.cpu as usize) {
                if run.runner.is_some_and(|r| r > 0 && r != ev.pid) {
                    run.runner = Some(ev.pid);
                }
            }
            // …and a task seen running cannot be waiting: its switch-in record is missing,
            // so its "wait" is not one; it is dropped.
            if let Some((cpu, start_cpu)) = self.tasks.get_mut(ev.pid).and_then(TaskStat::drop_wait)
            {
                self.remove_waiter(cpu, ev.pid);
                self.remove_waiter(start_cpu, ev.pid);
            }
        }
    }

    fn on_transition(&mut self, t: &Transition, ev: &Event) {
        match *t {
            Transition::State { ts, tid, from, to } => {
                // The task's record, created now (it is by the end anyway; a new record has
                // no wait and was not seen before, as a missing one).
                let at = self.tasks.index(tid);
                if let TaskState::Runnable { .. } = from {
                    match to {
                        TaskState::Running { cpu, .. } => self.end_wait((tid, at), ts, cpu, ev),
                        _ => {
                            // the timeline reset the task (counted there as data quality)
                            if let Some((cpu, _)) = self.tasks.at_mut(at).drop_wait() {
                                self.remove_waiter(cpu, tid);
                            }
                        }
                    }
                }
                if let TaskState::Runnable { since, cause } = to {
                    // Unknown after the task was first seen: the timeline reset it
                    let uncertain = from == TaskState::Unknown && self.tasks.at(at).seen_before;
                    self.start_wait((tid, at), since, cause, uncertain, ev);
                }
                self.tasks.at_mut(at).seen_before = true;
            }
            Transition::Migrated {
                tid,
                from_cpu,
                to_cpu,
                ..
            } => self.on_migrate(tid, from_cpu, to_cpu, ev),
            Transition::Forked { .. } | Transition::Exited { .. } => {}
        }
    }

    fn finish(self: Box<Self>, cx: &Context<'_>) -> Vec<Finding> {
        // INVARIANT: the keys come from the map they index.
        let mut keys: Vec<&(Tid, Tid)> = self.groups.keys().collect();
        keys.sort_unstable();
        keys.into_iter()
            .filter_map(|k| self.finding(*k, &self.groups[k], cx))
            .collect()
    }
}

#[cfg(test)]
mod tests;
