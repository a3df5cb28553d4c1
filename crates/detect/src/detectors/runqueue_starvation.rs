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
//!        │  the timeline's repair rule (a record shows a task running where no switch put
//!        │  it: docs/analyze.md, "Dropped switch records") → that task is the CPU's runner
//!        │  from the repaired run's start
//!        │  the CPU's idle time during the wait is summed (a queued task should not idle)
//!        ▼
//!   timeline: Runnable → Running (switched in, or a repaired run): the wait ends; how,
//!        from the ending sched_switch:
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
    Cpu, CpuCoverage, Event, EventKind, FieldValue, Finding, FindingCause, FindingSeverity,
    FindingTask, PrevState, Switch, SystemContext, Tid, Ts, Window,
};
use stallscope_timeline::timeline::MAX_CPUS;
use stallscope_timeline::{RunnableCause, TaskState, Transition};

use super::fmt::{dur, i, permille, ratio_permille};
use super::sched::{cpu_list_contains, describe_prio, nice_of_prio, weight_of_nice};
use crate::evidence::{keep, keep_into, render, Kept, KeptCopy, KeptCopySlot};
use crate::hist::LogHist;
use crate::params::{ParamInfo, ParamUnit, Params};
use crate::per_task::PerTask;
use crate::{Context, Detector, DetectorInfo};

mod fair;

use fair::{CauseKind, Class, FairClock, Reading, Trio, WaitFacts, EFFECTIVE, EQUAL, NICE};

/// Thresholds.
pub static PARAMS: [ParamInfo; 10] = [
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
    ParamInfo {
        name: "fair_lag_slices",
        default: 3,
        unit: ParamUnit::Count,
        doc: "a wait is unfair when the victim was owed more than this many effective slices of CPU",
    },
    ParamInfo {
        name: "unfair_factor",
        default: 2,
        unit: ParamUnit::Count,
        doc: "a wait no weight explains is starvation only when the victim was owed this many times the fair bound (fair_lag_slices effective slices): clearly less than its entitlement, not a hair over it; the rest is saturation",
    },
    ParamInfo {
        name: "weight_ratio",
        default: 2,
        unit: ParamUnit::Count,
        doc: "weights explain a wait when they cut the victim's entitlement at least this many times (equal → nice, nice → cgroup)",
    },
];

/// Description.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "runqueue-starvation",
    summary: "a runnable task waits long for its CPU, more than fair sharing explains, while other tasks run there",
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
get its CPU for a long time while other tasks run there, **more than fair sharing explains**.
A wait is a candidate when it lasts at least `threshold_ns` (default 10 ms), or is extreme for
the task (at least `relative_min_ns`, default 5 ms, and `relative_factor`, default 20, times
its median wait once `min_samples`, default 20, waits are known), or when the task is
**periodic** (at least `min_samples` wakeups, half of their intervals within 20 % of the
median interval, which is at least `min_period_ns`, default 0.5 ms) and the wait is longer
than its period.

Each candidate is then judged against a **fair-share model** of its CPU: the runnable set
(running task and queued tasks) and each member's weight, tracked through the wait. From it
comes what the victim was **entitled to** during the wait — the CPU time an ideal fair
scheduler would have given it (`worst_wait_entitled_ns`) — under three weightings: equal,
nice weights (`sched_prio_to_weight` of the event's priority), and effective weights (nice ×
recorded cgroup weight: v1 `cpu.shares` as is, v2 `cpu.weight` w as 1024·w/100; the task's
static hierarchical share as if it were the one runnable member of its group). A fair-class
scheduler (CFS, EEVDF) keeps a queued task's lag — entitled minus received — within about a
slice, so the fair bound on the entitlement is `fair_lag_slices` (default 3) × the effective
slice: the larger of the EEVDF base slice (recorded `base_slice_ns`, else the kernel's rule
0.75 ms × (1 + log2(min(CPUs, 8)))) and the tick (1 s / recorded `HZ`, else 4 ms), since a
running task's expired slice is noticed at a tick. A wait no weight explains is **unfair**
only when the entitlement reaches `unfair_factor` (default 2) × that bound — the victim got
clearly less than it was owed, not a few percent (a saturated CPU shares time in slices and
ticks, so a queued task's lag swings past the bound by a slice now and then); the rest is
sharing too little CPU, reported by `cpu-saturation`.

Every finding states its **cause** (JSON `cause.kind` and `cause.text`, the hint's first
sentence):
- `higher_class`: real-time or deadline tasks (kernel prio < 100) ran at least half of the
  wait; the text says what bounds such waits on the kernel (the fair deadline server on 6.12+,
  else RT throttling, `sched_rt_runtime_us`).
- `nice_weight`: the nice weights cut the victim's entitlement at least `weight_ratio`
  (default 2) times below what equal weights give.
- `cgroup_weight`: the recorded cgroup weights cut it at least `weight_ratio` times below what
  nice weights give (both groups and weights are named).
- `autogroup`: autogroup is on (`sched_autogroup_enabled=1` recorded) and each task's
  session group is recorded (`stallscope record` stores `/proc/PID/autogroup`): the groups
  share the CPU by their weights first, so a task of a session with many runnable tasks was
  owed far less than nice weights alone give it (or within fair sharing by group weights but
  over the bound by nice weights). What the kernel's group fairness gives it: at most
  medium, with how to give it more (`setsid`, the group's nice, turning autogroup off).
- `throttled`: the victim's cgroup has a recorded bandwidth limit (`cpu.cfs_quota_us`,
  `cpu.max`) and its CPU idled or others ran while it was queued; or a real-time victim waited
  behind fair tasks or an idle CPU (RT throttling, the fair server: by design, so low).
- `interrupt_time`: interrupt and softirq handlers (`irq:irq_handler_entry/exit`,
  `irq:softirq_entry/exit` recorded: `stallscope record --events sched,irq,softirq`) ran at
  least half of the wait on the victim's CPU; handler time shows as the running task's, so
  this is decided before any weight. At most medium.
- `affinity`: the victim's recorded affinity (`stallscope record` stores each task's allowed
  CPUs) leaves out CPUs that idled, summed, at least half of the wait
  (`worst_wait_disallowed_cpus_idle_ns`), and no weight explains the wait: the balancer
  could have moved it but for its affinity. Low when the wait was fair among the tasks of
  its own CPU (the pinning is the configuration), else at most medium.
- `not_explained_by_weights`: equal effective weights, and yet the victim was owed more than
  fair sharing allows (the EEVDF pick kept choosing another task; the vruntime gap when the
  trace carries vruntime).
- `context_not_recorded`: equal nice weights cannot explain it and the trace has no cgroup
  context; the text gives the `stallscope record` command that records it.
  When autogroup may be on and the tasks' groups are not recorded (no context, or a
  recorder that did not store them), this and `not_explained_by_weights` say autogroup may
  explain the wait and are at most medium.
- `missing_events`: the CPU idled for more than half of the wait, or other tasks ran for less
  than half of it, or the CPU switched to idle (a recorded `sched_switch` to pid 0) more than
  1 ms into the wait (`worst_wait_idle_picks`; the kernel picks a queued task before idle):
  events are missing — the task's migration or run — or the task was throttled. Low; a wait
  still open at the trace's end with this cause is not reported.
Waits that fair sharing explains (equal weights, entitlement under the bound) are **not**
reported here: they are saturation, reported once per CPU set by `cpu-saturation`.

The role `culprit` goes only to a task that ran at least half of the worst wait; otherwise the
finding says the wait was shared by N tasks and lists the top ones (`ran`) with their shares
(`share_of_wait_permille`). Flagged waits of one victim behind one culprit (or shared) merge
into one finding with counts and the worst instance. A wait still going on when the trace ends
is reported as a lower bound ("waited ≥ 80 ms … still waiting when the trace ended",
`worst_wait_censored`) when others were seen running in it.

Each finding also says how the worst wait ended: the culprit **blocked**, was **preempted**
(`R`/`R+`), **migrated away**, the **victim migrated**, or the **victim was picked** after
the CPU went idle.

## Why it matters
A runnable task that does not run is pure latency: a periodic thread misses deadlines, a
request handler stalls, a lock holder delays every waiter. The cause decides the fix: a class
or weight imbalance (an RT task, a nice −20 hog, a cgroup with a huge weight), a bandwidth
limit, or a scheduler pick that no recorded weight explains.

## How to confirm
`perf sched timehist -p PID --state` (or `stallscope timehist --pid PID`) around the
window shows the victim's long "wait time"/"sch delay" and who ran meanwhile;
`perf sched latency -p` shows its maximum delay. Check `chrt -p`, `ps -o ni`, the
cgroups' `cpu.weight`/`cpu.shares`/`cpu.max`, and `taskset -p` of both tasks — or record
them with `sudo stallscope record -o trace.dat -- COMMAND`, which stores all of them.

## Limits
The model is static for cgroups: a cgroup's weight is taken as going to its task on this CPU
(siblings of one group on one CPU share it; ancestors' weights are not recorded); autogroups
are modelled as the two-level hierarchy they are (a task forked during the trace inherits its
parent's group), SCHED_IDLE and
SCHED_BATCH are weighted by their nice value, and per-task custom slices are not known. Waits
of real-time victims are judged by class only. A wait whose CPU is not known (no
`target_cpu`, no migration events) is attributed to the CPU it ended on. Missing switch
records leave tasks listed as runnable, which lowers entitlements (a missed finding, never a
false one). In a VM, time the vCPU was descheduled by the host (steal) looks like the running
task's: a single slice far longer than a tick with an equal-weight waiter points there or at
a non-preemptible kernel section. The median and the period are learned as the trace goes,
so waits before `min_samples` samples are judged by `threshold_ns` alone. A wait during which
a record shows the task itself running is dropped; a wait that starts right after the
timeline had to reset the task's state is reported as low. Lost events can hide switches
inside a wait; they are shown in the data-quality block.

## Severity
- **high**: a cause other than `missing_events` and a worst wait of at least `high_ns`
  (default 50 ms), or a periodic victim that waited longer than its period after at least
  10 % of its wakeups (at least `min_repeats` times behind this culprit) — except that an
  unfair wait with no task running most of it (contention, not a culprit), a victim that
  lowered its own weight (nice > 0), the causes `autogroup`, `affinity` and
  `interrupt_time`, and a wait no recorded weight explains while autogroup may be on but
  unrecorded are at most medium.
- **medium**: a worst wait of at least `threshold_ns`, or a periodic victim that waited
  longer than a period on at least 1 % of its wakeups.
- **low**: only waits that are extreme relative to the task's own median, `missing_events`,
  or a start right after contradicting switch records.
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
    /// The trace ended during the wait.
    TraceEnded,
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
            WaitEnd::TraceEnded => (5, "still_waiting_at_trace_end"),
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
    /// Recorded switches to idle on the waiter's CPU more than [`IDLE_PICK_GRACE_NS`] into
    /// the wait: the kernel picks a queued task before idle, so each says the task was not
    /// queued there (a record is missing) or could not be picked (throttled).
    idle_picks: u64,
    /// The task's state before the wait was unknown after the trace's start (the timeline
    /// reset it because switch records contradicted each other).
    uncertain_start: bool,
    /// A migration record showed the task on this CPU, not the one its wait was counted on:
    /// a move was not recorded (a recording of some CPUs only, a dropped record), so it may
    /// have run meanwhile.
    seen_elsewhere: Option<Cpu>,
    /// The victim's class and effective weight when the wait started.
    class: Class,
    /// The current CPU's fair-share clock when the wait arrived there (at `clock_since`).
    clock_from: Reading,
    clock_since: Ts,
    /// For a task of an autogroup: its group's id and clock value then (the effective
    /// weighting's clock, see [`fair::GroupClocks`]).
    group_from: Option<(u64, u64)>,
    /// CPU time the victim was owed on the CPUs it left during the wait, per weighting (the
    /// current CPU's share is added when the wait ends or moves).
    owed: Trio,
    /// The current CPU's interrupt time counter when the wait arrived there, and the
    /// interrupt time on the CPUs it left.
    irq_from: u64,
    irq_ns: u64,
    /// For a victim with recorded affinity: the idle time counters of the CPUs it may not
    /// use, summed, when the wait started.
    others_idle_from: Option<u64>,
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
            idle_picks: 0,
            uncertain_start,
            seen_elsewhere: None,
            class: Class::of(120, 1024),
            clock_from: Reading::default(),
            clock_since: 0,
            group_from: None,
            owed: [0; 3],
            irq_from: 0,
            irq_ns: 0,
            others_idle_from: None,
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
    /// The weights of `waiters`, at the same indices (their class when their wait started).
    waiter_w: Vec<Trio>,
    /// The sum of `waiter_w`.
    queued_w: Trio,
    /// The runner's kernel priority (from the switch that made it the runner; −1 unknown).
    runner_prio: i32,
    /// Fair-share clock of the CPU's runnable set (meaningful while it has waiters).
    clock: FairClock,
    /// The autogroups of the set with their clocks (autogroup on and recorded).
    groups: fair::GroupClocks,
    /// Idle time up to `since` (the idle interval in progress is not in it).
    idle_total: u64,
    /// Interrupt and softirq handler nesting, since when the outermost one runs, and the
    /// handler time up to then.
    irq_depth: u32,
    irq_since: Ts,
    irq_total: u64,
}

impl CpuRun {
    /// Idle time of the CPU up to `ts`.
    #[inline]
    fn idle_at(&self, ts: Ts) -> u64 {
        match self.runner {
            Some(0) => self.idle_total + ts.saturating_sub(self.since),
            _ => self.idle_total,
        }
    }

    /// Interrupt and softirq handler time of the CPU up to `ts`.
    #[inline]
    fn irq_at(&self, ts: Ts) -> u64 {
        match self.irq_depth {
            0 => self.irq_total,
            _ => self.irq_total + ts.saturating_sub(self.irq_since),
        }
    }
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
    /// See [`Wait::seen_elsewhere`].
    seen_elsewhere: Option<Cpu>,
    /// Why it happened, and the numbers the cause was decided from.
    cause: CauseKind,
    facts: WaitFacts,
    /// The wait was still going on when the trace ended (its length is a lower bound).
    censored: bool,
    evidence: Vec<Kept>,
}

/// Flagged waits of one victim behind one main culprit.
struct Group {
    count: u64,
    total: u64,
    over_threshold: u64,
    over_relative: u64,
    over_period: u64,
    ends: [u64; 6],
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
    /// Recorded cgroup factors (×1024) by task (empty without recorded cgroups).
    cgroup_factor: FxHashMap<Tid, u64>,
    /// Recorded system context (cgroup paths, quotas, knobs), when any.
    system: Option<SystemContext>,
    fair_lag_slices: u64,
    unfair_factor: u64,
    weight_ratio: u64,
    /// The latest switch time (the trace's end, for waits still going on).
    last_ts: Ts,
    /// Recorded affinity (CPU list) of the tasks it leaves CPUs out for.
    pinned: FxHashMap<Tid, String>,
    /// Autogroup (id, weight) of the tasks in one when autogroup is on and recorded (empty
    /// otherwise: the effective weighting is one level).
    autogroup: FxHashMap<Tid, (u64, u64)>,
    /// Whether autogroup is on and each task's group known (see [`AutogroupState`]).
    autogroup_state: AutogroupState,
    /// Per autogroup: the nice weights of its runnable tasks summed over all CPUs (as of each
    /// CPU's latest change), which split the group's weight between the CPUs.
    group_load: FxHashMap<u64, u64>,
}

/// What the inputs say of autogroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AutogroupState {
    /// Recorded off (`sched_autogroup_enabled=0`, or a kernel without it).
    Off,
    /// On, with each recorded task's group (`stallscope record` stores `/proc/PID/autogroup`).
    Known,
    /// Not recorded (no context), or on without the tasks' groups: it may explain a wait.
    Unknown,
}

/// How far into a wait a recorded switch to idle on the waiter's CPU counts as an idle pick
/// ([`Wait::idle_picks`]): a remote wakeup is queued on its CPU's wake list until that CPU
/// takes its interrupt, so the CPU may switch to idle just after the `sched_waking` record
/// and before the task is on its queue.
pub const IDLE_PICK_GRACE_NS: u64 = 1_000_000;

/// `n` as "once" or "N times".
fn times(n: u64) -> String {
    match n {
        1 => "once".to_string(),
        n => format!("{n} times"),
    }
}

/// Counts a recorded switch to idle at `ts` against each of `waiters` that had been waiting
/// for more than [`IDLE_PICK_GRACE_NS`].
#[cold]
#[inline(never)]
fn count_idle_picks(waiters: &[Tid], tasks: &mut PerTask<TaskStat>, ts: Ts) {
    for &w in waiters {
        if let Some(wait) = tasks.get_mut(w).and_then(TaskStat::wait_mut) {
            if ts >= wait.since.saturating_add(IDLE_PICK_GRACE_NS) {
                wait.idle_picks += 1;
            }
        }
    }
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
            cgroup_factor: FxHashMap::default(),
            system: None,
            fair_lag_slices: p.get("fair_lag_slices"),
            unfair_factor: p.get("unfair_factor"),
            weight_ratio: p.get("weight_ratio"),
            last_ts: 0,
            pinned: FxHashMap::default(),
            autogroup: FxHashMap::default(),
            autogroup_state: AutogroupState::Unknown,
            group_load: FxHashMap::default(),
        }
    }

    /// `tid`'s weights in the root level of its CPU's set: its class's, but nothing in the
    /// effective weighting for a task of an autogroup (its group counts there, see
    /// [`fair::GroupClocks`]).
    #[inline]
    fn set_weights(&self, tid: Tid, class: Class) -> Trio {
        let mut w = class.weights();
        if !self.autogroup.is_empty() && self.autogroup.contains_key(&tid) {
            w[fair::EFFECTIVE] = 0;
        }
        w
    }

    /// The autogroup clock of `tid` on `cpu` at `ts` (its group id and value), when the
    /// task is in an autogroup.
    fn group_reading(&mut self, tid: Tid, cpu: Cpu, ts: Ts) -> Option<(u64, u64)> {
        let &(id, _) = self.autogroup.get(&tid)?;
        let run = self.cpus.get_mut(cpu as usize)?;
        let root = run.clock.reading(ts).value_at(ts)[fair::EFFECTIVE];
        Some((id, run.groups.value(id, root)))
    }

    fn cpu(&mut self, c: Cpu) -> &mut CpuRun {
        crate::per_task::per_cpu(&mut self.cpus, c)
    }

    /// Idle time up to `ts`, summed over the CPUs seen that the CPU list `allowed` leaves
    /// out (out of line: only for tasks with recorded affinity).
    #[inline(never)]
    fn others_idle(&self, allowed: &str, ts: Ts) -> u64 {
        self.cpus
            .iter()
            .enumerate()
            .filter(|(c, _)| cpu_list_contains(allowed, *c as u32) == Some(false))
            .map(|(_, run)| run.idle_at(ts))
            .sum()
    }

    /// An interrupt or softirq handler entry or exit, or a custom event with a vruntime
    /// (out of line: rare, and kept out of the per-event code).
    #[inline(never)]
    fn on_generic(&mut self, ev: &Event, g: &stallscope_model::GenericEvent) {
        let entry = match g.name.as_str() {
            "irq_handler_entry" | "softirq_entry" => true,
            "irq_handler_exit" | "softirq_exit" => false,
            _ => return self.note_custom_vruntime(g),
        };
        let run = self.cpu(ev.cpu);
        if entry {
            if run.irq_depth == 0 {
                run.irq_since = ev.ts;
            }
            run.irq_depth = run.irq_depth.saturating_add(1).min(16);
        } else if run.irq_depth > 0 {
            run.irq_depth -= 1;
            if run.irq_depth == 0 {
                run.irq_total += ev.ts.saturating_sub(run.irq_since);
            }
        }
    }

    #[inline(always)]
    fn note_prio(&mut self, tid: Tid, prio: i32) {
        if tid > 0 && prio >= 0 {
            self.prios.set(tid, prio);
        }
    }

    /// `tid`'s class in the fair-share model: priority from the events, cgroup factor from
    /// the recorded context.
    #[inline]
    fn class_of(&self, tid: Tid) -> Class {
        self.class_with_prio(tid, self.prios.get(tid).unwrap_or(-1))
    }

    /// [`RunqueueStarvation::class_of`] with the priority known.
    #[inline(always)]
    fn class_with_prio(&self, tid: Tid, prio: i32) -> Class {
        let factor = match self.cgroup_factor.is_empty() {
            true => 1024,
            false => self.cgroup_factor.get(&tid).copied().unwrap_or(1024),
        };
        Class::of(prio, factor)
    }

    /// Sets CPU `c`'s clock to the weight of its runnable set after a change (its clock was
    /// advanced to the change's time): the queued tasks' weights plus the runner's; nothing
    /// to do while it has no waiter. (A task switched in is still listed as a waiter until
    /// its transition removes it at the same time: counting it twice for no time is
    /// harmless.)
    #[inline]
    fn reset_set(&mut self, c: Cpu, ts: Ts) {
        let Some(run) = self.cpus.get(c as usize) else {
            return;
        };
        if run.waiters.is_empty() {
            return;
        }
        let mut total = run.queued_w;
        let mut rt = false;
        let mut runner_nice_w = None;
        if let Some(r) = run.runner.filter(|&r| r > 0) {
            match self.class_with_prio(r, run.runner_prio) {
                c @ Class::Fair { .. } => {
                    total = fair::add(total, self.set_weights(r, c));
                    runner_nice_w = Some((r, c.weights()[fair::NICE]));
                }
                Class::Rt(_) => rt = true,
            }
        }
        if !self.autogroup.is_empty() {
            total[fair::EFFECTIVE] += self.regroup(c, ts, runner_nice_w);
        }
        self.cpus[c as usize].clock.set(ts, total, rt);
    }

    /// The autogroups of CPU `c`'s set after a change at `ts` (its waiters and the runner
    /// `runner` with its nice weight): their clocks advanced, and the sum of their weights
    /// (their part of the root level) returned. Out of line: autogroup recorded only.
    #[inline(never)]
    fn regroup(&mut self, c: Cpu, ts: Ts, runner: Option<(Tid, u64)>) -> u64 {
        let Some(run) = self.cpus.get_mut(c as usize) else {
            return 0;
        };
        let mut members: Vec<(u64, u64, u64)> = Vec::new();
        for (k, w) in run.waiters.iter().enumerate() {
            if let (Some(&(id, gw)), Some(ww)) = (self.autogroup.get(w), run.waiter_w.get(k)) {
                members.push((id, gw, ww[fair::NICE]));
            }
        }
        if let Some((r, nice_w)) = runner {
            // (a task switched in is still listed as a waiter until its transition: once)
            if let Some(&(id, gw)) = self.autogroup.get(&r).filter(|_| !run.waiters.contains(&r)) {
                members.push((id, gw, nice_w));
            }
        }
        // each group's weight here: its share by the runnable weight it has here against
        // all CPUs (calc_group_shares)
        members.sort_unstable();
        let mut k = 0;
        while k < members.len() {
            let id = members[k].0;
            let end = k + members[k..].iter().take_while(|m| m.0 == id).count();
            let here: u64 = members[k..end].iter().map(|m| m.2).sum();
            let total = self.group_load.entry(id).or_insert(0);
            *total = total
                .saturating_sub(run.groups.members_of(id))
                .saturating_add(here);
            let share = (u128::from(members[k].1) * u128::from(here)
                / u128::from((*total).max(here).max(1))) as u64;
            for m in &mut members[k..end] {
                m.1 = share.max(1);
            }
            k = end;
        }
        // groups that left this CPU's set no longer load it
        for (id, load) in run.groups.loads() {
            if load > 0 && !members.iter().any(|m| m.0 == id) {
                if let Some(total) = self.group_load.get_mut(&id) {
                    *total = total.saturating_sub(load);
                }
            }
        }
        let root = run.clock.reading(ts).value_at(ts)[fair::EFFECTIVE];
        run.groups.update(root, &members)
    }

    /// The CPU's runner changed outside a switch (a lost-events record, or a run the
    /// timeline's repair rule started): the clock is advanced, the runner set, the set
    /// recomputed (out of line: rare).
    #[cold]
    #[inline(never)]
    /// `ts`: when the new runner started (the idle time before it goes to the waiters).
    fn set_runner(&mut self, c: Cpu, runner: Option<Tid>, ts: Ts) {
        let Some(run) = self.cpus.get_mut(c as usize) else {
            return;
        };
        if run.runner == Some(0) {
            // the CPU idled until now (its switch out of idle is missing): that is idle time
            // of its waiters, and the new runner runs from now on
            for &w in &run.waiters {
                if let Some(wait) = self.tasks.get_mut(w).and_then(TaskStat::wait_mut) {
                    wait.idle_ns += ts.saturating_sub(run.since.max(wait.since));
                }
            }
            run.idle_total += ts.saturating_sub(run.since);
            run.since = ts;
            run.switch_in.clear();
        }
        run.runner = runner;
        run.runner_prio = match runner {
            Some(r) if r > 0 => self.prios.get(r).unwrap_or(-1),
            _ => -1,
        };
        self.reset_set(c, ts);
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
        self.last_ts = self.last_ts.max(ts);
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
        } else if next == 0 && prev > 0 && !run.waiters.is_empty() {
            // the CPU chose idle over its queued waiters (out of line: rare when the model
            // is right)
            count_idle_picks(&run.waiters, tasks, ts);
        }
        if prev > 0 && !run.waiters.is_empty() {
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
        let no_cgroups = self.cgroup_factor.is_empty() && self.autogroup.is_empty();
        let run = self.cpu(c);
        if prev == 0 && runner == Some(0) {
            run.idle_total += ts.saturating_sub(since);
        }
        // the set's weight changes with the runner unless both are fair tasks of one priority
        // (without recorded cgroups, the priority decides the weight)
        let same_weight = no_cgroups
            && run.runner.is_some_and(|r| r > 0)
            && next > 0
            && run.runner_prio == s.next.prio;
        run.runner = Some(next);
        run.runner_prio = s.next.prio;
        run.since = ts;
        if next > 0 {
            run.switch_in.set(ev, s, EventKind::Switch);
        } else {
            run.switch_in.clear();
        }
        if !same_weight {
            self.reset_set(c, ts);
        }
    }

    /// `at`: the index of `tid`'s record in `tasks`; `cpu`: the CPU the timeline has it
    /// wait for (a wakeup's target, the CPU it was preempted on or migrated to).
    fn start_wait(
        &mut self,
        (tid, at): (Tid, usize),
        (since, cpu): (Ts, Cpu),
        cause: RunnableCause,
        uncertain_start: bool,
        ev: &Event,
    ) {
        let (min_samples, min_period) = (self.judge.min_samples, self.min_period);
        let class = self.class_of(tid);
        self.cpu(cpu);
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
                w.idle_picks = 0;
                w.uncertain_start = uncertain_start;
                w.seen_elsewhere = None;
                w.owed = [0; 3];
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
        let set_w = self.set_weights(tid, class);
        let run = self.cpu(cpu);
        if !run.waiters.contains(&tid) {
            run.waiters.push(tid);
            run.waiter_w.push(set_w);
            run.queued_w = fair::add(run.queued_w, set_w);
        }
        self.reset_set(cpu, ev.ts);
        let group_from = match self.autogroup.is_empty() {
            true => None,
            false => self.group_reading(tid, cpu, ev.ts),
        };
        let run = &mut self.cpus[cpu as usize];
        let now = run.clock.reading(ev.ts);
        let irq_from = run.irq_at(ev.ts);
        let others_idle_from = match self.pinned.is_empty() {
            true => None,
            false => self.pinned.get(&tid).map(|l| self.others_idle(l, ev.ts)),
        };
        if let Some(w) = self.tasks.at_mut(at).wait.as_deref_mut() {
            w.class = class;
            w.clock_from = now;
            w.clock_since = ev.ts;
            w.group_from = group_from;
            w.irq_from = irq_from;
            w.irq_ns = 0;
            w.others_idle_from = others_idle_from;
        }
    }

    /// Removes `tid` from `cpu`'s waiters (a task is listed at most once per CPU; the
    /// list's order does not matter: each waiter's wait is credited on its own).
    /// The CPU's set changes at `ts`.
    fn remove_waiter(&mut self, cpu: Cpu, tid: Tid, ts: Ts) {
        if let Some(run) = self.cpus.get_mut(cpu as usize) {
            if let Some(k) = run.waiters.iter().position(|&w| w == tid) {
                run.waiters.swap_remove(k);
                let w = run.waiter_w.swap_remove(k);
                run.queued_w = match run.waiters.is_empty() {
                    true => [0; 3],
                    false => fair::sub(run.queued_w, w),
                };
            }
        }
        self.reset_set(cpu, ts);
    }

    /// The CPU time owed to the wait `w` on `cpu` from its arrival there to `ts`, read
    /// from the CPU's clock.
    fn owed_here(&mut self, w: &Wait, cpu: Cpu, ts: Ts) -> Trio {
        let Some(run) = self.cpus.get_mut(cpu as usize) else {
            return [0; 3];
        };
        let now = run.clock.reading(ts).value_at(ts);
        let mut owed = fair::owed(w.class.weights(), w.clock_from.value_at(w.clock_since), now);
        if let Some((id, from)) = w.group_from {
            // a task of an autogroup: its group's clock
            let to = run.groups.value(id, now[fair::EFFECTIVE]);
            owed[fair::EFFECTIVE] = fair::owed_one(w.class.weights()[fair::NICE], from, to);
        }
        owed
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
        // the CPU the wait was counted on: the record's source, unless a move there was not
        // recorded (a recording of some CPUs only, a dropped record)
        let moved_waiter = match self.tasks.get_mut(tid).and_then(TaskStat::wait_mut) {
            Some(w) => {
                let counted_on = w.cpu;
                if counted_on != from {
                    w.seen_elsewhere.get_or_insert(from);
                }
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
                Some(counted_on)
            }
            None => None,
        };
        if let Some(counted_on) = moved_waiter {
            // what it was owed on the CPU it was counted on, read on that CPU's clock (the
            // reading it started from is of that clock); the new CPU's clock counts from here
            self.remove_waiter(counted_on, tid, ev.ts);
            if counted_on != from {
                self.remove_waiter(from, tid, ev.ts);
            }
            self.cpu(to);
            let class = match self.tasks.get(tid).and_then(TaskStat::wait) {
                Some(w) => w.class,
                None => self.class_of(tid),
            };
            let weights = self.set_weights(tid, class);
            let run = self.cpu(to);
            if !run.waiters.contains(&tid) {
                run.waiters.push(tid);
                run.waiter_w.push(weights);
                run.queued_w = fair::add(run.queued_w, weights);
            }
            self.reset_set(to, ev.ts);
            let now_to = self.cpus[to as usize].clock.reading(ev.ts);
            let (class, from_reading, since, group_from) =
                match self.tasks.get(tid).and_then(TaskStat::wait) {
                    Some(w) => (w.class, w.clock_from, w.clock_since, w.group_from),
                    None => (Class::of(120, 1024), now_to, ev.ts, None),
                };
            let here = match self.cpus.get_mut(counted_on as usize) {
                Some(run) => run.clock.reading(ev.ts).value_at(ev.ts),
                None => from_reading.value_at(since),
            };
            let mut owed_from = fair::owed(class.weights(), from_reading.value_at(since), here);
            if let Some((id, from)) = group_from {
                let to_value = self
                    .cpus
                    .get(counted_on as usize)
                    .map_or(from, |run| run.groups.value(id, here[fair::EFFECTIVE]));
                owed_from[fair::EFFECTIVE] =
                    fair::owed_one(class.weights()[fair::NICE], from, to_value);
            }
            let group_to = match self.autogroup.is_empty() {
                true => None,
                false => self.group_reading(tid, to, ev.ts),
            };
            let irq_old = self
                .cpus
                .get(counted_on as usize)
                .map_or(0, |r| r.irq_at(ev.ts));
            let irq_new = self.cpus.get(to as usize).map_or(0, |r| r.irq_at(ev.ts));
            if let Some(w) = self.tasks.get_mut(tid).and_then(TaskStat::wait_mut) {
                w.owed = fair::add(w.owed, owed_from);
                w.clock_from = now_to;
                w.clock_since = ev.ts;
                w.group_from = group_to;
                w.irq_ns += irq_old.saturating_sub(w.irq_from);
                w.irq_from = irq_new;
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
        self.remove_waiter(cpu_of_wait, tid, ts);
        if cpu_of_wait != start_cpu {
            self.remove_waiter(start_cpu, tid, ts);
        }
        if !flags.any() {
            return;
        }
        // the wait's storage goes back to the task afterwards
        let Some(mut wait) = self.tasks.at_mut(at).wait.take() else {
            return;
        };
        let owed = self.owed_here(&wait, cpu_of_wait, ts);
        wait.owed = fair::add(wait.owed, owed);
        self.group_flagged(
            tid,
            &wait,
            waited,
            flags,
            (victim_prio, victim_vr),
            (ts, end_cpu, Some(ev)),
        );
        self.tasks.at_mut(at).wait = Some(wait);
    }

    /// The facts the cause of the flagged wait `wait` (of the task of priority
    /// `victim_prio`, `waited` ns) is decided from, with its culprits sorted by run time.
    fn wait_facts(
        &self,
        victim: Tid,
        wait: &Wait,
        waited: u64,
        victim_prio: Option<i32>,
        culprits: &[Culprit],
    ) -> WaitFacts {
        let nr_cpus = self
            .system
            .as_ref()
            .and_then(|s| s.nr_cpus)
            .unwrap_or(self.cpus.len() as u32);
        let (slice, _) = fair::effective_slice(self.system.as_ref(), nr_cpus);
        let victim_rt = match wait.class {
            Class::Rt(p) => Some(p),
            Class::Fair { .. } => None,
        };
        let victim_w = wait.class.weights();
        let mut f = WaitFacts {
            waited,
            // a share of the wait is at most all of it, whatever the readings say
            owed: wait.owed.map(|o| o.min(waited)),
            bound: self.fair_lag_slices.saturating_mul(slice),
            unfair: self
                .fair_lag_slices
                .saturating_mul(slice)
                .saturating_mul(self.unfair_factor.max(1)),
            victim_nice_w: Class::of(victim_prio.unwrap_or(-1), 1024).weights()[NICE],
            victim_eff_w: victim_w[EFFECTIVE],
            victim_rt,
            idle_ns: wait.idle_ns,
            idle_picks: wait.idle_picks,
            weight_ratio: self.weight_ratio,
            majority: culprits
                .first()
                .is_some_and(|k| k.run_ns.saturating_mul(2) >= waited),
            ..WaitFacts::default()
        };
        for k in culprits {
            f.ran_ns = f.ran_ns.saturating_add(k.run_ns);
            if let Class::Rt(p) = Class::of(k.prio, 1024) {
                if victim_rt.is_none_or(|v| p < v) {
                    f.higher_class_ns = f.higher_class_ns.saturating_add(k.run_ns);
                }
            }
        }
        let end = wait.since.saturating_add(waited);
        if let Some(run) = self.cpus.get(wait.cpu as usize) {
            f.irq_ns = wait.irq_ns + run.irq_at(end).saturating_sub(wait.irq_from);
        }
        if let (Some(from), Some(list)) = (wait.others_idle_from, self.pinned.get(&victim)) {
            f.pinned = true;
            f.other_idle_ns = self.others_idle(list, end).saturating_sub(from);
        }
        f.autogroup = !self.autogroup.is_empty()
            && (self.autogroup.contains_key(&victim)
                || culprits.iter().any(|k| self.autogroup.contains_key(&k.tid)));
        if let Some(sys) = &self.system {
            f.context = sys.tasks.iter().any(|t| !t.cgroups.is_empty());
            f.quota = sys
                .tasks
                .iter()
                .find(|t| t.pid == victim)
                .is_some_and(|t| fair::quota_of(&t.cgroups).is_some());
        }
        f
    }

    /// A flagged wait of `tid` that ended at `ts` on `end_cpu` with `end` (`None`: still
    /// going on when the trace ended): its cause decided, and merged into its (victim, main
    /// culprit) group — unless fair sharing of a saturated CPU explains it (`cpu-saturation`
    /// reports those). Out of line and cold: most waits are not flagged, and keeping this
    /// out of [`RunqueueStarvation::end_wait`] keeps the per-transition code small.
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
        (ts, end_cpu, end): (Ts, Cpu, Option<&Event>),
    ) {
        let mut culprits = wait.culprits.clone();
        culprits.sort_by(|a, b| b.run_ns.cmp(&a.run_ns).then(a.tid.cmp(&b.tid)));
        let facts = self.wait_facts(tid, wait, waited, victim_prio, &culprits);
        let cause = fair::decide(&facts);
        if cause == CauseKind::FairShare {
            return;
        }
        if end.is_none() && cause == CauseKind::MissingEvents {
            return; // an unfinished wait with nobody seen running in it proves nothing
        }
        // the culprit role goes only to a task that ran at least half of the wait, and to
        // none when bandwidth control held the victim back: what ran meanwhile only used a
        // CPU the victim was not allowed (its group's quota spent, or RT throttling)
        let main = culprits
            .first()
            .filter(|k| k.run_ns.saturating_mul(2) >= waited && cause != CauseKind::Throttled)
            .map_or(0, |k| k.tid);
        let (prev, prev_state) = match end.map(|e| &e.kind) {
            Some(EventKind::Switch(s)) => (s.prev.pid, s.prev_state),
            _ => (-1, PrevState::default()),
        };
        let how = if end.is_none() {
            WaitEnd::TraceEnded
        } else if !wait.victim_moves.is_empty() && end_cpu != wait.start_cpu {
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
            ends: [0; 6],
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
                seen_elsewhere: None,
                cause,
                facts,
                censored: false,
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
            evidence.extend(end.map(keep));
            evidence.sort_by_key(|e| e.ts);
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
                seen_elsewhere: wait.seen_elsewhere,
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
                cause,
                facts,
                censored: end.is_none(),
                evidence,
            };
        }
    }

    /// Waits still going on when the trace ended: each is judged as if it ended then, its
    /// length a lower bound ("≥ 614 ms, still waiting when the trace ended").
    /// `coverage`: the CPUs the inputs record. When some are left out, a wait still open at
    /// the end is no evidence — an unrecorded CPU may have pulled the task and run it (its
    /// migration is recorded on the pulling CPU) — unless the task's recorded affinity keeps
    /// it on recorded CPUs.
    fn flush_censored(&mut self, coverage: &CpuCoverage) {
        let end = self.last_ts;
        let confined = |tid: Tid| match coverage {
            CpuCoverage::All => true,
            CpuCoverage::Only(recorded) => self
                .pinned
                .get(&tid)
                .and_then(|l| stallscope_model::parse_cpu_list(l).ok())
                .is_some_and(|allowed| allowed.iter().all(|c| recorded.contains(c))),
        };
        let waiting: Vec<(Tid, bool)> = self
            .cpus
            .iter()
            .flat_map(|r| r.waiters.iter().map(|&tid| (tid, confined(tid))))
            .collect();
        for (tid, confined) in waiting {
            if self.tasks.get(tid).is_none() {
                continue; // listed waiters have records; nothing to judge otherwise
            }
            let at = self.tasks.index(tid);
            let t = self.tasks.at_mut(at);
            let Some(wait) = t.wait() else {
                continue; // already judged (listed on two CPUs)
            };
            if !confined {
                t.waiting = false;
                continue; // it may have run on a CPU the trace does not record
            }
            let waited = end.saturating_sub(wait.since);
            let flags = self.judge.flags(t, wait, waited);
            let cpu = wait.cpu;
            t.waiting = false;
            if !flags.abs {
                continue; // only a long wait is worth a lower bound
            }
            // the task running on the wait's CPU at the end ran until then
            let (runner, since, switch_in) = match self.cpus.get(cpu as usize) {
                Some(r) => (r.runner, r.since, r.switch_in.get().copied()),
                None => (None, 0, None),
            };
            let runner_prio_vr = runner.map(|r| (self.prios.get(r).unwrap_or(-1), None));
            let Some(mut wait) = self.tasks.at_mut(at).wait.take() else {
                continue;
            };
            if let (Some(r), Some(pv)) = (runner.filter(|&r| r > 0 && r != tid), runner_prio_vr) {
                let overlap = end.saturating_sub(since.max(wait.since));
                match wait.culprits.iter_mut().find(|k| k.tid == r) {
                    Some(k) => {
                        k.run_ns += overlap;
                        k.slices += 1;
                    }
                    None => wait.add_culprit(r, overlap, pv, switch_in),
                }
            }
            let owed = self.owed_here(&wait, cpu, end);
            wait.owed = fair::add(wait.owed, owed);
            let vr = self.tasks.at(at).vruntime;
            self.group_flagged(
                tid,
                &wait,
                waited,
                flags,
                (self.prios.get(tid), vr),
                (end, cpu, None),
            );
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
        // a real-time task held back so that fair tasks run is the kernel's design
        let unexplained = w.cause == CauseKind::MissingEvents
            || (w.cause == CauseKind::Throttled && w.facts.victim_rt.is_some());
        let suspect = unexplained || w.uncertain_start || w.seen_elsewhere.is_some();
        // a victim that lowered its own weight (nice > 0) is not harmed beyond its choice
        let self_lowered = w.cause == CauseKind::NiceWeight && w.facts.victim_nice_w < fair::NICE_0;
        // an unfair wait shared by many tasks, none of which ran most of it, is contention on a
        // busy CPU more than one culprit's doing: at most medium
        let unexplained_by_weights = matches!(
            w.cause,
            CauseKind::NotExplainedByWeights | CauseKind::ContextNotRecorded
        );
        let shared = unexplained_by_weights && !w.facts.majority;
        // with autogroup possibly on and the tasks' groups not recorded, the sessions'
        // group fairness may explain what no recorded weight does: at most medium
        let autogroup_may =
            unexplained_by_weights && self.autogroup_state == AutogroupState::Unknown;
        // a pinned victim whose wait was fair among the tasks of its CPUs waited by its
        // configuration: reported low; interrupt time and affinity are at most medium (no
        // task took what the victim was owed)
        let pinned_fair = w.cause == CauseKind::Affinity && w.facts.owed[EFFECTIVE] < w.facts.bound;
        let not_a_task = matches!(
            w.cause,
            CauseKind::Affinity | CauseKind::InterruptTime | CauseKind::Autogroup
        );
        let severity = if suspect || pinned_fair {
            FindingSeverity::Low
        } else if not_a_task
            && (w.wait >= self.judge.threshold || (rhythm_repeats && missed_permille >= 10))
        {
            FindingSeverity::Medium
        } else if (w.wait >= self.high || (rhythm_repeats && missed_permille >= 100))
            && !self_lowered
            && !shared
            && !autogroup_may
            && !not_a_task
        {
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
        let waited = match w.censored {
            true => format!("≥ {}", dur(w.wait)),
            false => dur(w.wait),
        };
        let mut m_quota: Option<(u64, u64)> = None;
        let quota = match (w.cause, w.facts.victim_rt) {
            (CauseKind::Throttled, None) => cx
                .task_context(victim)
                .and_then(|t| fair::quota_of(&t.cgroups)),
            _ => None,
        };
        let mut title = match main_k {
            None if quota.is_some() => {
                let (path, q, p) = quota.clone().unwrap_or_default();
                format!(
                    "{vcomm} (pid {victim}) waited {waited} runnable on {on}: its cgroup {path} was throttled (CPU quota {q} µs per {p} µs); meanwhile the CPU idled {} and other tasks ran {}",
                    dur(w.idle_ns),
                    dur(ran)
                )
            }
            Some(k) => format!(
                "{vcomm} (pid {victim}) waited {waited} runnable on {on} while {} (pid {main}) ran {} slice{} ({})",
                cx.comm(main),
                k.slices,
                if k.slices == 1 { "" } else { "s" },
                dur(k.run_ns)
            ),
            None if ran.saturating_mul(2) < w.wait && w.idle_ns > 0 => format!(
                "{vcomm} (pid {victim}) waited {waited} runnable on {on} while the CPU idled {} of it (other tasks ran {})",
                dur(w.idle_ns),
                dur(ran)
            ),
            None if !w.culprits.is_empty() => format!(
                "{vcomm} (pid {victim}) waited {waited} runnable on {on}, shared by {} task{}: {}",
                w.culprits.len(),
                if w.culprits.len() == 1 { "" } else { "s" },
                w.culprits
                    .iter()
                    .take(3)
                    .map(|k| format!(
                        "{} (pid {}) {}",
                        cx.comm(k.tid),
                        k.tid,
                        permille(ratio_permille(k.run_ns, w.wait))
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => format!(
                "{vcomm} (pid {victim}) waited {waited} runnable on {on} with no other task recorded running there"
            ),
        };
        if w.censored {
            title.push_str(" (still waiting when the trace ended)");
        }
        let idle_form = main_k.is_none() && ran.saturating_mul(2) < w.wait && w.idle_ns > 0;
        if let Some((_, q, p)) = &quota {
            m_quota = Some((*q, *p));
        }
        if w.cause == CauseKind::MissingEvents && w.facts.idle_picks > 0 {
            title.push_str(&format!(
                " — but the CPU switched to idle {} meanwhile, and the kernel picks a queued task before idle: events may be missing (its migration or its run, see data quality) or it was throttled",
                times(w.facts.idle_picks)
            ));
        } else if w.cause == CauseKind::MissingEvents && idle_form {
            title.push_str(" — events may be missing (see data quality) or the task was throttled");
        } else if w.cause == CauseKind::MissingEvents {
            title.push_str(&format!(
                " — but other tasks ran for only {} of it and the CPU idled for {}: events may be missing (see data quality) or the task was throttled",
                dur(ran),
                dur(w.idle_ns)
            ));
        } else if w.uncertain_start {
            title.push_str(
                " — but the task's switch records contradict each other before the wait (see data quality): it may have been running",
            );
        } else if let Some(c) = w.seen_elsewhere {
            title.push_str(&format!(
                " — but a migration record shows it on CPU {c} meanwhile, a move the trace does not hold (was every CPU recorded?): it may have run there"
            ));
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
        if let Some((q, p)) = m_quota {
            m.insert("cgroup_quota_us".into(), i(q));
            m.insert("cgroup_period_us".into(), i(p));
        }
        m.insert("worst_wait_ns".into(), i(w.wait));
        m.insert("worst_wait_start_ns".into(), i(w.since));
        m.insert("worst_wait_end_ns".into(), i(w.end));
        m.insert("worst_wait_cpu_idle_ns".into(), i(w.idle_ns));
        m.insert("worst_wait_idle_picks".into(), i(w.facts.idle_picks));
        m.insert("worst_wait_others_ran_ns".into(), i(ran));
        m.insert("waits".into(), i(g.count));
        m.insert("total_wait_ns".into(), i(g.total));
        m.insert("waits_over_threshold".into(), i(g.over_threshold));
        m.insert("waits_over_relative".into(), i(g.over_relative));
        m.insert("waits_over_period".into(), i(g.over_period));
        m.insert("victim_median_wait_ns".into(), i(t.waits.median()));
        m.insert("worst_wait_entitled_ns".into(), i(w.facts.owed[EFFECTIVE]));
        m.insert("worst_wait_entitled_nice_ns".into(), i(w.facts.owed[NICE]));
        m.insert(
            "worst_wait_entitled_equal_ns".into(),
            i(w.facts.owed[EQUAL]),
        );
        m.insert("fair_lag_bound_ns".into(), i(w.facts.bound));
        m.insert("worst_wait_censored".into(), i(u64::from(w.censored)));
        m.insert("worst_wait_irq_ns".into(), i(w.facts.irq_ns));
        if w.facts.pinned {
            m.insert(
                "worst_wait_disallowed_cpus_idle_ns".into(),
                i(w.facts.other_idle_ns),
            );
        }
        for (k, n) in g.ends.iter().enumerate() {
            let name = [
                "ended_culprit_blocked",
                "ended_culprit_preempted",
                "ended_culprit_migrated_away",
                "ended_victim_migrated",
                "ended_victim_picked",
                "still_waiting_at_trace_end",
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
                m.insert(
                    "expected_wakeups".into(),
                    i(b.saturating_sub(a) / t.period + 1),
                );
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
            tm.insert(
                "share_of_wait_permille".into(),
                i(ratio_permille(k.run_ns, w.wait)),
            );
            // `culprit` only for the task that ran at least half of the wait
            let role = if k.tid == main { "culprit" } else { "ran" };
            tasks.push(FindingTask {
                pid: k.tid,
                comm: cx.comm(k.tid).as_str().to_string(),
                role: role.into(),
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
        let cause = self.cause_text(victim, main_k, w, cx);
        let hint = format!("{cause} {}", self.hint(victim, main, main_k, w, cx));
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
            evidence: render(cx, &kept),
            hint,
            cause: Some(FindingCause {
                kind: w.cause.id().into(),
                text: cause,
            }),
        })
    }

    /// The cause sentence of a finding (the JSON `cause.text` and the hint's first sentence).
    fn cause_text(
        &self,
        victim: Tid,
        main_k: Option<&Culprit>,
        w: &Worst,
        cx: &Context<'_>,
    ) -> String {
        let f = &w.facts;
        let nr_cpus = cx
            .system
            .and_then(|s| s.nr_cpus)
            .unwrap_or(self.cpus.len() as u32);
        let (_, slice_from) = fair::effective_slice(cx.system, nr_cpus);
        let owed = format!(
            "entitled to {} of CPU during the {} wait (fair sharing keeps that under {}: {} × the effective slice, {slice_from}; unfair from {}, {} × that)",
            dur(f.owed[EFFECTIVE]),
            dur(f.waited),
            dur(f.bound),
            self.fair_lag_slices,
            dur(f.unfair),
            self.unfair_factor.max(1)
        );
        let top = main_k.or(w.culprits.first());
        let name = |k: &Culprit| format!("{} (pid {})", cx.comm(k.tid), k.tid);
        let cgroup_of = |pid: Tid| {
            cx.task_context(pid)
                .and_then(|t| fair::cgroup_text(&t.cgroups))
                .unwrap_or_else(|| "the root group".into())
        };
        let weights_of = |k: &Culprit| {
            Class::of(
                k.prio,
                self.cgroup_factor.get(&k.tid).copied().unwrap_or(1024),
            )
            .weights()
        };
        match w.cause {
            CauseKind::HigherClass => {
                let rt = w
                    .culprits
                    .iter()
                    .find(|k| (0..100).contains(&k.prio))
                    .or(top);
                let (who, prio, policy) = match rt {
                    Some(k) => (
                        name(k),
                        k.prio,
                        cx.task_context(k.tid)
                            .and_then(|t| t.policy.clone())
                            .map(|p| format!("{p}, "))
                            .unwrap_or_default(),
                    ),
                    None => ("a real-time task".into(), -1, String::new()),
                };
                format!(
                    "Higher scheduling class: {who} is real-time or deadline ({policy}kernel prio {prio}) and real-time tasks ran {} of the {} wait; a fair-class task runs only when no such task is runnable. {}",
                    dur(f.higher_class_ns),
                    dur(f.waited),
                    rt_limit_text(cx.system)
                )
            }
            CauseKind::NiceWeight => format!(
                "Nice weight: {} has load weight {} against the victim's {} (nice {}); with equal weights the victim would have been owed {} of the {} wait, with these nice weights only {}.",
                top.map_or_else(|| "the culprit".into(), name),
                top.map_or(0, |k| weights_of(k)[NICE]),
                f.victim_nice_w,
                nice_of_prio(w.victim_prio.unwrap_or(120)).unwrap_or(0),
                dur(f.owed[EQUAL]),
                dur(f.waited),
                dur(f.owed[NICE])
            ),
            CauseKind::CgroupWeight => format!(
                "cgroup weight: {} runs in {} and the victim in {}; their effective weights (nice × cgroup) are {} and {}, so with nice weights alone the victim would have been owed {} of the {} wait, with the cgroup weights only {}.",
                top.map_or_else(|| "the culprit".into(), name),
                top.map_or_else(|| "its group".into(), |k| cgroup_of(k.tid)),
                cgroup_of(victim),
                top.map_or(0, |k| weights_of(k)[EFFECTIVE]),
                f.victim_eff_w,
                dur(f.owed[NICE]),
                dur(f.waited),
                dur(f.owed[EFFECTIVE])
            ),
            CauseKind::Autogroup => {
                let group = |pid: Tid| match self.autogroup.get(&pid) {
                    Some((id, weight)) => format!("autogroup {id} (weight {weight})"),
                    None => "the root group".into(),
                };
                format!(
                    "Autogroup: sched_autogroup_enabled=1 makes each session a task group, and the groups share the CPU by their weights before their tasks share their group's part. The victim is in {}{}; with nice weights alone it would have been owed {} of the {} wait, with its session's share only {} — what the kernel's group fairness gives it. To give it more: start it in a session of its own (`setsid`), raise its group's weight (`echo -5 > /proc/{victim}/autogroup`), or turn autogroup off (`sysctl kernel.sched_autogroup_enabled=0`).",
                    group(victim),
                    top.map_or_else(String::new, |k| format!(", {} in {}", name(k), group(k.tid))),
                    dur(f.owed[NICE]),
                    dur(f.waited),
                    dur(f.owed[EFFECTIVE])
                )
            }
            CauseKind::Throttled if f.victim_rt.is_some() => format!(
                "Real-time bandwidth control: this real-time task (kernel prio {}) waited {} while fair-class tasks ran {} and the CPU idled {}; that is the kernel holding real-time tasks back so that fair tasks run, by design. {}",
                f.victim_rt.unwrap_or(-1),
                dur(f.waited),
                dur(f.ran_ns),
                dur(f.idle_ns),
                rt_limit_text(cx.system)
            ),
            CauseKind::Throttled => {
                let q = cx
                    .task_context(victim)
                    .and_then(|t| fair::quota_of(&t.cgroups));
                match q {
                    Some((path, quota, period)) => format!(
                        "CFS bandwidth throttling: the victim's cgroup {path} may run {quota} µs per {period} µs (cpu.cfs_quota_us / cpu.max); its CPU idled {} and other tasks ran {} of the {} wait while it was runnable.",
                        dur(f.idle_ns),
                        dur(f.ran_ns),
                        dur(f.waited)
                    ),
                    None => "CFS bandwidth throttling of the victim's cgroup.".into(),
                }
            }
            CauseKind::NotExplainedByWeights => {
                let mut s = format!(
                    "Not explained by the recorded weights: the victim (effective weight {}) was {owed}",
                    f.victim_eff_w
                );
                match (main_k, top) {
                    (Some(k), _) => {
                        s.push_str(&format!(
                            "; {} (effective weight {}) ran {} slice{} of it — the fair-class pick (EEVDF eligibility and virtual deadline) kept choosing it",
                            name(k),
                            weights_of(k)[EFFECTIVE],
                            k.slices,
                            if k.slices == 1 { "" } else { "s" }
                        ));
                        if let (Some(a), Some(b)) = (w.victim_vruntime, k.vruntime) {
                            s.push_str(&format!(" (vruntime gap {} ns)", a as i64 - b as i64));
                        } else {
                            s.push_str(" (the trace carries no vruntime: `sched_stat_runtime` on kernels before 6.8 shows it)");
                        }
                    }
                    (None, Some(_)) => s.push_str(&format!(
                        "; no task ran most of it: {} tasks shared it, so it is contention on a busy CPU more than one culprit",
                        w.culprits.len()
                    )),
                    (None, None) => {}
                }
                s.push('.');
                if self.autogroup_state == AutogroupState::Unknown {
                    s.push_str(AUTOGROUP_UNKNOWN);
                }
                s
            }
            CauseKind::ContextNotRecorded => format!(
                "Not explained by nice: {}the victim was {owed}. cgroup CPU weights, autogroup (sessions sharing the CPU as groups, on by default in most distributions) or a bandwidth limit would decide, and this trace does not record them: record with `sudo stallscope record -o trace.dat -- COMMAND` (stores cgroup cpu.weight / cpu.shares and quotas, each task's autogroup, nice, policy and affinity).",
                match top {
                    Some(k) if weights_of(k)[NICE] == f.victim_nice_w => format!(
                        "{} and the victim have the same nice weight ({}), yet ",
                        name(k),
                        f.victim_nice_w
                    ),
                    _ => String::new(),
                }
            ),
            CauseKind::MissingEvents if f.idle_picks > 0 => format!(
                "Not decided: the CPU switched to idle {} during the {} wait (it idled {}), and the kernel picks a queued task before idle: the task was not queued there — a migration or its run is missing from the trace (see data quality) — or a CPU quota throttled it; `sudo stallscope record` records every switch, migration and cgroup bandwidth limit, which would decide.",
                times(f.idle_picks),
                dur(f.waited),
                dur(f.idle_ns)
            ),
            CauseKind::MissingEvents => format!(
                "Not decided: other tasks ran for only {} of the {} wait and the CPU idled {}: events are missing (see data quality) or the task was throttled; `sudo stallscope record` stores cgroup bandwidth limits, which would decide.",
                dur(f.ran_ns),
                dur(f.waited),
                dur(f.idle_ns)
            ),
            CauseKind::FairShare => format!("Fair sharing of a saturated CPU: the victim was {owed}."),
            CauseKind::InterruptTime => format!(
                "Interrupt time: interrupt and softirq handlers ran {} of the {} wait on CPU {} (irq/softirq events); a handler runs in whatever task's context is current, so its time shows as that task's run time. Find the source with `perf record -e irq:irq_handler_entry -e irq:softirq_entry -a` or /proc/interrupts and steer it off this CPU (/proc/irq/N/smp_affinity, RPS/RFS for network softirqs).",
                dur(f.irq_ns),
                dur(f.waited),
                w.end_cpu
            ),
            CauseKind::Affinity => {
                let list = self.pinned.get(&victim).cloned().unwrap_or_default();
                format!(
                    "Affinity: the victim may run only on CPUs {list} (its recorded affinity); the CPUs it may not use idled {} (summed over them) during its {} wait on CPU {}, where it was {owed}. The load balancer could have moved it there but for its affinity: widen it (`taskset -pc LIST {victim}`, the cpuset's cpuset.cpus) or move the other load off CPU {}.",
                    dur(f.other_idle_ns),
                    dur(f.waited),
                    w.end_cpu,
                    w.end_cpu
                )
            }
        }
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
            WaitEnd::TraceEnded => "the trace ended (the victim was still waiting)".into(),
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
            "Confirm with `perf sched timehist -p {victim} --state` around {} s.",
            stallscope_model::fmt_secs_usecs(w.since)
        ));
        why.push(remedy(
            w.cause,
            w.facts.victim_rt.is_some(),
            victim,
            main_k.map(|k| k.tid),
        ));
        why.join(" ")
    }
}

/// What to change for a wait of cause `cause` — each cause its own remedy, none that the
/// cause makes pointless (a quota is not helped by weights, nor a real-time culprit by nice).
/// `rt_victim`: the victim is a real-time task; `culprit`: the task that ran most of the wait.
fn remedy(cause: CauseKind, rt_victim: bool, victim: Tid, culprit: Option<Tid>) -> String {
    let culprit = culprit.map_or_else(|| "PID".to_string(), |c| c.to_string());
    match cause {
        CauseKind::HigherClass => format!(
            "To let the victim run: give the real-time task a lower priority or the normal policy (`chrt -o -p 0 {culprit}`), move it to other CPUs (taskset, cpuset), or make the victim real-time above it (`chrt -f -p PRIO {victim}`); RT throttling (`sched_rt_runtime_us`) only bounds how long it can hold the CPU."
        ),
        CauseKind::NiceWeight => format!(
            "Renice: lower the culprit's weight (`renice -n 0 -p {culprit}`) or raise the victim's (`renice -n -5 -p {victim}`)."
        ),
        CauseKind::CgroupWeight => "Change the groups' CPU weights (cpu.weight on cgroup v2, cpu.shares on v1), or move the victim into a group with a larger share.".into(),
        CauseKind::Autogroup => format!(
            "Start the victim in a session of its own (`setsid`), raise its session group's weight (`echo -5 > /proc/{victim}/autogroup`), or turn autogroup off (`sysctl kernel.sched_autogroup_enabled=0`)."
        ),
        CauseKind::Throttled if rt_victim => "Nothing is wrong with the tasks that ran: the kernel holds real-time tasks back so that fair tasks run. If the real-time task must not wait, raise `sched_rt_runtime_us` (or the fair server's runtime in debugfs) — knowing that a runaway real-time task can then starve the rest.".into(),
        CauseKind::Throttled => "Raise or remove the group's quota (`cpu.max` on cgroup v2, `cpu.cfs_quota_us` on v1) or shorten its period so the quota comes back sooner; priority, nice and weights do not help a task whose group has spent its quota, and the tasks that ran meanwhile are not the cause.".into(),
        CauseKind::InterruptTime => "Steer the interrupts off this CPU (/proc/irq/N/smp_affinity, irqbalance), use threaded interrupts so their work is scheduled like tasks, or spread network softirqs with RPS/RFS.".into(),
        CauseKind::Affinity => format!(
            "Widen the victim's affinity (`taskset -pc LIST {victim}`, the cpuset's cpuset.cpus) so the load balancer can move it to an idle CPU."
        ),
        CauseKind::NotExplainedByWeights | CauseKind::FairShare => "Separate them on different CPUs (taskset, cpuset), or reduce the CPU load; weights do not explain this wait, so changing them is no sure fix.".into(),
        CauseKind::ContextNotRecorded => "Record the context first (`sudo stallscope record -o trace.dat -- COMMAND`): the remedy depends on which of cgroup weight, autogroup or a quota it is.".into(),
        CauseKind::MissingEvents => "Record again with every CPU and without lost events (`sudo stallscope record`, which also stores cgroup quotas) before changing anything.".into(),
    }
}

/// What bounds a fair task's wait behind real-time tasks on this kernel: the fair deadline
/// server (Linux 6.12 and later: 50 ms of every second by default, `fair_server` in debugfs)
/// or RT throttling (`sched_rt_runtime_us` of `sched_rt_period_us`), from recorded context
/// Said of a wait no recorded weight explains when autogroup may be on but the tasks'
/// groups are not recorded.
const AUTOGROUP_UNKNOWN: &str = " Autogroup may explain it (sessions share a CPU as groups, so a task of a busy session gets less than one alone in its session): the trace does not record each task's autogroup; `sudo stallscope record -o trace.dat -- COMMAND` stores it.";

/// when there is some.
fn rt_limit_text(system: Option<&SystemContext>) -> String {
    let knob = |name: &str| {
        system.and_then(|s| {
            s.sched_knobs
                .iter()
                .find(|(k, _)| k.ends_with(name))
                .map(|(_, v)| v.trim().to_string())
        })
    };
    let release = system.and_then(|s| s.kernel_release.as_deref());
    let fair_server = release
        .and_then(|r| {
            let mut it = r.split(['.', '-']);
            Some((
                it.next()?.parse::<u32>().ok()?,
                it.next()?.parse::<u32>().ok()?,
            ))
        })
        .map(|v| v >= (6, 12));
    let throttling = match (knob("sched_rt_runtime_us"), knob("sched_rt_period_us")) {
        (Some(r), Some(p)) => format!("{r} µs of every {p} µs, recorded"),
        _ => "950 ms of every second by default".into(),
    };
    match (fair_server, knob("sched_rt_runtime_us"), knob("sched_rt_period_us")) {
        (Some(true), _, _) => format!(
            "On this kernel ({}) the fair deadline server bounds such waits: it runs fair tasks for 50 ms of every second by default (debugfs sched/fair_server), so a fair task can wait up to about 950 ms behind a real-time hog; RT throttling (real-time tasks run {throttling}) also holds real-time tasks back.",
            release.unwrap_or("")
        ),
        (Some(false), Some(r), Some(p)) => format!(
            "On this kernel RT throttling bounds such waits: real-time tasks may run {r} µs of every {p} µs (sched_rt_runtime_us / sched_rt_period_us)."
        ),
        _ => "The fair deadline server (Linux 6.12 and later: fair tasks run 50 ms of every second) or RT throttling (sched_rt_runtime_us, real-time tasks run 950 ms of every second by default) bounds such waits; the kernel release decides which.".into(),
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
            EventKind::Generic(g) => self.on_generic(ev, g),
            EventKind::Lost { .. } => {
                // the CPU's runner is unknown until its next switch, and so is whether a
                // handler runs
                self.cpu(ev.cpu).irq_depth = 0;
                self.set_runner(ev.cpu, None, ev.ts);
            }
            _ => {}
        }
        // A record that shows a task running where no switch put it (a dropped switch
        // record) is the timeline's repair rule: its transition to a repaired run ends the
        // task's wait and makes it the CPU's runner (`on_transition`).
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
                                self.remove_waiter(cpu, tid, ts);
                            }
                        }
                    }
                }
                if let TaskState::Runnable { since, cause, cpu } = to {
                    // Unknown after the task was first seen: the timeline reset it
                    let uncertain = from == TaskState::Unknown && self.tasks.at(at).seen_before;
                    let cpu = cpu.unwrap_or(ev.cpu);
                    self.start_wait((tid, at), (since, cpu), cause, uncertain, ev);
                }
                self.tasks.at_mut(at).seen_before = true;
                if let TaskState::Running {
                    cpu,
                    since,
                    repaired: true,
                } = to
                {
                    // the timeline's repair rule: a record showed the task running on `cpu`
                    // from `since` (its switch-in is not in the trace); within a switch (the
                    // task leaving) the switch itself sets the CPU's runner
                    if !matches!(ev.kind, EventKind::Switch(_)) {
                        self.set_runner(cpu, Some(tid), since);
                    }
                }
            }
            Transition::Migrated {
                tid,
                from_cpu,
                to_cpu,
                ..
            } => self.on_migrate(tid, from_cpu, to_cpu, ev),
            Transition::Forked { parent, child, .. } => {
                // a child stays in its parent's session (setsid comes after the fork)
                if let Some(&g) = self.autogroup.get(&parent) {
                    self.autogroup.entry(child).or_insert(g);
                }
            }
            Transition::Exited { .. } => {}
        }
    }

    fn on_system(&mut self, system: &SystemContext) {
        let enabled = system
            .sched_knobs
            .iter()
            .find(|(k, _)| k.ends_with("sched_autogroup_enabled"))
            .map(|(_, v)| v.trim() == "1");
        let known = system.tasks.iter().any(|t| t.autogroup_id.is_some());
        self.autogroup_state = match (enabled, known) {
            // (a recorded context without the knob: a kernel without autogroup)
            (Some(false) | None, _) => AutogroupState::Off,
            (Some(true), true) => AutogroupState::Known,
            _ => AutogroupState::Unknown,
        };
        if self.autogroup_state == AutogroupState::Known {
            for t in system
                .tasks
                .iter()
                .filter(|t| fair::in_root_cpu_group(&t.cgroups))
            {
                if let Some(id) = t.autogroup_id.filter(|&id| id > 0) {
                    let weight = weight_of_nice(t.autogroup_nice.unwrap_or(0)).unwrap_or(1024);
                    self.autogroup.insert(t.pid, (id, weight));
                }
            }
        }
        for t in &system.tasks {
            if let Some(f) = fair::cgroup_factor(&t.cgroups) {
                self.cgroup_factor.insert(t.pid, f);
            }
            // affinity that leaves out some of the machine's CPUs
            let leaves_out = |l: &str| match system.nr_cpus {
                Some(n) => (0..n).any(|c| cpu_list_contains(l, c) == Some(false)),
                None => false,
            };
            if let Some(l) = t.cpus_allowed.as_deref().filter(|l| leaves_out(l)) {
                self.pinned.insert(t.pid, l.to_string());
            }
        }
        self.system = Some(system.clone());
    }

    fn finish(mut self: Box<Self>, cx: &Context<'_>) -> Vec<Finding> {
        self.flush_censored(cx.timeline.coverage());
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
