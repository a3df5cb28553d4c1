//! `cpu-saturation`: more runnable tasks than CPUs for a long stretch — fair sharing of too
//! little CPU. One verdict for the CPU set and window, instead of one finding per waiting task.
//!
//! The model's transitions are all it reads (no state of its own about who runs where):
//!
//! ```text
//!   transition → Running    → busy + 1            transition Running → …   → busy − 1,
//!                                                  the run (since its switch-in) credited
//!   transition → Runnable   → queued + 1          transition Runnable → …  → queued − 1
//!                                                  (→ Running: one wait, into the histogram)
//!   between two changes     → depth = busy + queued, integrated over time: per depth,
//!                              busy-CPU time, time with a waiter, per bucket (`bucket_ns`)
//! ```
//! (Busy CPUs are the tasks the model has running, so after a dropped switch record the
//! model's repair decides, as for every other product.) The CPU set is the CPUs `sched_switch`
//! records name.
//! A bucket is saturated when its CPUs were busy at least `min_busy_permille` of it and the
//! mean depth was at least `min_demand_permille` of the CPU count. The finding covers the
//! first to the last saturated bucket, and is raised when saturated buckets add up to at least
//! `min_saturated_ns`. Memory: one slot per CPU, per task (its run time), the depth and wait
//! histograms, and the buckets: one per bucket that an event falls in, and one run for the
//! whole buckets between two events (equal: the depth did not change) — bounded by the events,
//! not by how far apart their times are.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use stallscope_model::{
    Cpu, Event, EventKind, Finding, FindingCause, FindingSeverity, FindingTask, Tid, Ts, Window,
};
use stallscope_timeline::{TaskState, Transition};

use super::fmt::{dur, i, permille, ratio_permille};
use crate::engine::kind;
use crate::hist::LogHist;
use crate::params::{ParamInfo, ParamUnit, Params};
use crate::{Context, Detector, DetectorInfo};

/// Thresholds.
pub static PARAMS: [ParamInfo; 5] = [
    ParamInfo {
        name: "bucket_ns",
        default: 100_000_000,
        unit: ParamUnit::Ns,
        doc: "length of the time buckets saturation is judged in",
    },
    ParamInfo {
        name: "min_busy_permille",
        default: 950,
        unit: ParamUnit::Count,
        doc: "a saturated bucket keeps its CPUs busy at least this share of the time (‰)",
    },
    ParamInfo {
        name: "min_demand_permille",
        default: 1100,
        unit: ParamUnit::Count,
        doc: "a saturated bucket has a mean runnable depth of at least this share of its CPUs (‰)",
    },
    ParamInfo {
        name: "min_saturated_ns",
        default: 500_000_000,
        unit: ParamUnit::Ns,
        doc: "saturated buckets must add up to this long for a finding",
    },
    ParamInfo {
        name: "medium_wait_ns",
        default: 10_000_000,
        unit: ParamUnit::Ns,
        doc: "a 99th-percentile wait at least this long makes the finding medium",
    },
];

/// Description.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "cpu-saturation",
    summary: "more runnable tasks than CPUs for a long stretch: fair sharing of too little CPU",
    explanation: EXPLANATION,
    needs: &[&["sched_switch"], &["sched_waking", "sched_wakeup"]],
    optional: &["sched_wakeup_new", "sched_migrate_task"],
    record_command:
        "perf sched record -- COMMAND   (or: stallscope record -o trace.dat -- COMMAND)",
    params: &PARAMS,
};

const EXPLANATION: &str = r#"# cpu-saturation

## What it finds
Stretches where the CPUs are busy and more tasks want to run than there are CPUs, so every
runnable task waits its turn: **fair sharing of too little CPU**. The runnable depth (tasks
running plus tasks queued, across the CPU set) is followed through the trace. Time is cut into
buckets of `bucket_ns` (default 100 ms); a bucket is saturated when its CPUs were busy at
least `min_busy_permille` (default 950 ‰) of it and its mean depth was at least
`min_demand_permille` (default 1100 ‰) of the CPU count. When saturated buckets add up to
at least `min_saturated_ns` (default 500 ms), one finding covers the CPU set from the first to
the last saturated bucket with: the runnable depth (mean, 99th percentile by time, maximum),
demand against capacity, the time with at least one task waiting, the busiest consumers with
their share of the CPU set, and the distribution of every runnable wait in the trace (median,
99th percentile, maximum, how many reached 10 ms).

This is the aggregate verdict for waits that `runqueue-starvation` judges fair: each of those
was entitled to little CPU because many tasks of equal weight shared it. Waits that fair
sharing does not explain (weights, classes, bandwidth limits) remain `runqueue-starvation`
findings.

## Why it matters
On a saturated CPU set latency grows with the queue: a periodic task misses periods, request
latency follows the run-queue depth, and no single task is to blame. The fix is capacity
(more CPUs, fewer threads: `make -jN`, thread-pool sizes) or priority for the tasks that must
not wait (nice, `cpu.weight`, a separate cpuset).

## How to confirm
`vmstat 1` (the `r` column above the CPU count), `perf sched latency` (every task's average
and maximum delay grow together), `stallscope timehist` (every task's "sch delay" is a few
slices). `/proc/pressure/cpu` (PSI) `some` shares the same story on a live system.

## Limits
The CPU set is every CPU the trace shows; tasks pinned to some CPUs (affinity, cpusets) can
saturate those while others idle, which a set-wide depth understates (`idle-while-runnable`
reports runnable tasks beside idle CPUs). Busy time comes from `sched_switch`: a switch out of
idle that the trace lost counts as idle until the next switch. The wait distribution covers
the whole trace, not only the saturated window.

## Severity
- **medium**: saturated, and the 99th-percentile runnable wait is at least `medium_wait_ns`
  (default 10 ms): the queue costs every task real latency.
- **low**: saturated with short waits.
Never high: sharing is working as designed; the harm is in capacity, not in a culprit.
"#;

/// Builds the detector.
pub fn make(p: &Params) -> Box<dyn Detector> {
    Box::new(CpuSaturation::new(p))
}

/// Depths above this are counted at this value in the depth histogram.
const MAX_DEPTH: usize = 1023;

/// CPU numbers above this are not a machine's (the timeline counts them).
const MAX_CPUS: Cpu = 4096;

/// Tids below this are kept by index (the kernel's `PID_MAX_LIMIT`).
const INDEXED_TIDS: usize = 1 << 22;

/// One time bucket.
#[derive(Clone, Copy, Default)]
struct Bucket {
    /// ∫ depth dt.
    depth_ns: u64,
    /// ∫ busy CPUs dt.
    busy_ns: u64,
}

/// `count` consecutive buckets from bucket number `first`, each holding `each`.
#[derive(Clone, Copy)]
struct BucketRun {
    first: u64,
    count: u64,
    each: Bucket,
}

impl BucketRun {
    /// One past the last bucket number.
    fn end(&self) -> u64 {
        self.first.saturating_add(self.count)
    }
}

/// The detector.
pub struct CpuSaturation {
    bucket_ns: u64,
    min_busy: u64,
    min_demand: u64,
    min_saturated: u64,
    medium_wait: u64,
    /// CPUs named by switch records (1 + the largest number).
    n_cpus: u64,
    /// Tasks the model has running.
    busy: u64,
    queued: u64,
    first: Option<Ts>,
    last: Ts,
    /// Every bucket up to the current one (the last run, of one bucket), whole buckets
    /// between two events as one run.
    buckets: Vec<BucketRun>,
    /// End of the current bucket.
    bucket_end: Ts,
    /// Time at each depth (index = depth, capped at [`MAX_DEPTH`]).
    depth_time: Box<[u64; MAX_DEPTH + 1]>,
    /// Time with at least one task queued.
    waiter_ns: u64,
    waits: LogHist,
    /// Waits of at least 10 ms (exact).
    waits_over_10ms: u64,
    max_wait: (u64, Tid),
    /// Run time by tid (direct index), and for tids past the array.
    run_by_tid: Vec<u64>,
    run_others: FxHashMap<Tid, u64>,
}

impl CpuSaturation {
    fn new(p: &Params) -> CpuSaturation {
        CpuSaturation {
            bucket_ns: p.get("bucket_ns").max(1),
            min_busy: p.get("min_busy_permille"),
            min_demand: p.get("min_demand_permille"),
            min_saturated: p.get("min_saturated_ns"),
            medium_wait: p.get("medium_wait_ns"),
            n_cpus: 0,
            busy: 0,
            queued: 0,
            first: None,
            last: 0,
            buckets: Vec::new(),
            bucket_end: 0,
            depth_time: Box::new([0; MAX_DEPTH + 1]),
            waiter_ns: 0,
            waits: LogHist::default(),
            waits_over_10ms: 0,
            max_wait: (0, 0),
            run_by_tid: Vec::new(),
            run_others: FxHashMap::default(),
        }
    }

    /// Integrates the current depth up to `ts`.
    #[inline]
    fn advance(&mut self, ts: Ts) {
        if ts <= self.last {
            return; // no time passed (or an out-of-order event: counted by the timeline)
        }
        if self.first.is_none() {
            self.start(ts);
            return;
        }
        let (from, depth) = (self.last, self.busy + self.queued);
        self.last = ts;
        let dt = ts - from;
        let slot = &mut self.depth_time[(depth as usize).min(MAX_DEPTH)];
        *slot = slot.saturating_add(dt);
        if self.queued > 0 {
            self.waiter_ns = self.waiter_ns.saturating_add(dt);
        }
        if ts <= self.bucket_end {
            if let Some(r) = self.buckets.last_mut() {
                let b = &mut r.each;
                b.depth_ns = b.depth_ns.saturating_add(depth.saturating_mul(dt));
                b.busy_ns = b.busy_ns.saturating_add(self.busy.saturating_mul(dt));
            }
            return;
        }
        self.spread(from, ts, depth);
    }

    /// The first event: the first bucket starts (out of line: once).
    #[cold]
    #[inline(never)]
    fn start(&mut self, ts: Ts) {
        self.first = Some(ts);
        self.last = ts;
        self.buckets.push(BucketRun {
            first: 0,
            count: 1,
            each: Bucket::default(),
        });
        self.bucket_end = ts.saturating_add(self.bucket_ns);
    }

    /// Adds `depth` (and the busy CPUs) over `[a, b)`, which crosses the current bucket's
    /// end, to the buckets it covers: the rest of the current bucket, one run for the whole
    /// buckets in between, and the start of the bucket `b` falls in (out of line: at most
    /// once per event, whatever the time between `a` and `b`).
    #[cold]
    #[inline(never)]
    fn spread(&mut self, a: Ts, b: Ts, depth: u64) {
        let (busy, bucket_ns) = (self.busy, self.bucket_ns);
        let add = |bk: &mut Bucket, dt: u64| {
            bk.depth_ns = bk.depth_ns.saturating_add(depth.saturating_mul(dt));
            bk.busy_ns = bk.busy_ns.saturating_add(busy.saturating_mul(dt));
        };
        let end = self.bucket_end;
        let Some(current) = self.buckets.last_mut() else {
            return;
        };
        add(&mut current.each, end.saturating_sub(a));
        let next = current.end();
        let whole = b.saturating_sub(end) / bucket_ns;
        if whole > 0 {
            let mut each = Bucket::default();
            add(&mut each, bucket_ns);
            self.buckets.push(BucketRun {
                first: next,
                count: whole,
                each,
            });
        }
        // the bucket `b` falls in (or starts at)
        let start = end.saturating_add(whole.saturating_mul(bucket_ns));
        let mut each = Bucket::default();
        add(&mut each, b.saturating_sub(start));
        self.buckets.push(BucketRun {
            first: next.saturating_add(whole),
            count: 1,
            each,
        });
        self.bucket_end = start.saturating_add(bucket_ns);
    }

    /// Credits `tid` with `ns` of run time.
    #[inline]
    fn credit(&mut self, tid: Tid, ns: u64) {
        match usize::try_from(tid).ok().filter(|&t| t < INDEXED_TIDS) {
            Some(t) => {
                if t >= self.run_by_tid.len() {
                    self.run_by_tid.resize(t + 1, 0);
                }
                self.run_by_tid[t] += ns;
            }
            None => *self.run_others.entry(tid).or_default() += ns,
        }
    }

    fn finding(&self, cx: &Context<'_>) -> Option<Finding> {
        let first = self.first?;
        let n_cpus = self.n_cpus;
        if n_cpus == 0 {
            return None;
        }
        let b = self.bucket_ns;
        // a bucket's length: whole, but the last one ends at the last event
        let len = |k: u64| {
            b.min(
                self.last
                    .saturating_sub(first.saturating_add(k.saturating_mul(b))),
            )
        };
        let saturated = |k: u64, bk: &Bucket| {
            let len = len(k);
            len > 0
                && bk.busy_ns.saturating_mul(1000) >= self.min_busy * n_cpus * len
                && bk.depth_ns.saturating_mul(1000) >= self.min_demand * n_cpus * len
        };
        // saturated runs (a run of whole buckets is saturated all through or not at all;
        // only its last bucket can be the trace's cut last one, and runs of several are
        // never last)
        let saturated_runs: Vec<&BucketRun> = self
            .buckets
            .iter()
            .filter(|r| saturated(r.first, &r.each))
            .collect();
        let (r0, r1) = (saturated_runs.first()?, saturated_runs.last()?);
        let (k0, k1) = (r0.first, r1.end() - 1);
        let saturated_ns: u64 = saturated_runs
            .iter()
            .map(|r| match r.count {
                1 => len(r.first),
                n => n.saturating_mul(b),
            })
            .fold(0u64, u64::saturating_add);
        if saturated_ns < self.min_saturated {
            return None;
        }
        let start = first.saturating_add(k0.saturating_mul(b));
        let end = first
            .saturating_add((k1 + 1).saturating_mul(b))
            .min(self.last);
        let span = end.saturating_sub(start).max(1);
        let (depth_ns, busy_ns) = self
            .buckets
            .iter()
            .filter(|r| r.end() > k0 && r.first <= k1)
            .fold((0u64, 0u64), |(d, u), r| {
                (
                    d.saturating_add(r.each.depth_ns.saturating_mul(r.count)),
                    u.saturating_add(r.each.busy_ns.saturating_mul(r.count)),
                )
            });
        let demand = ratio_permille(depth_ns, n_cpus * span);
        let mean_depth_x1000 = depth_ns.saturating_mul(1000) / span;
        let total: u64 = self.depth_time.iter().sum();
        let depth_p99 = quantile_index(&self.depth_time[..], total, 990);
        let depth_max = self.depth_time.iter().rposition(|&t| t > 0).unwrap_or(0);
        let (p50, p99) = (
            self.waits.quantile_permille(500),
            self.waits.quantile_permille(990),
        );
        let severity = match p99 >= self.medium_wait {
            true => FindingSeverity::Medium,
            false => FindingSeverity::Low,
        };
        let cpus: Vec<Cpu> = (0..n_cpus as Cpu).collect();
        let set = cpu_set_text(n_cpus);
        let title = format!(
            "CPUs {set} saturated for {} of {}: on average {}.{:03} runnable tasks for {n_cpus} CPUs (demand {} of capacity), depth p99 {depth_p99}, max {depth_max}; runnable waits p99 {} (max {})",
            dur(saturated_ns),
            dur(span),
            mean_depth_x1000 / 1000,
            mean_depth_x1000 % 1000,
            permille(demand),
            dur(p99),
            dur(self.max_wait.0)
        );
        // the busiest tasks, by run time in the trace
        let mut runs: Vec<(Tid, u64)> = self
            .run_by_tid
            .iter()
            .enumerate()
            .filter(|(_, &r)| r > 0)
            .map(|(t, &r)| (t as Tid, r))
            .chain(self.run_others.iter().map(|(&t, &r)| (t, r)))
            .collect();
        runs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let trace_span = self.last.saturating_sub(first).max(1);
        let mut tasks: Vec<FindingTask> = runs
            .iter()
            .take(5)
            .map(|&(tid, run)| {
                let mut m = BTreeMap::new();
                m.insert("run_ns".into(), i(run));
                m.insert(
                    "share_of_cpus_permille".into(),
                    i(ratio_permille(run, n_cpus * trace_span)),
                );
                FindingTask {
                    pid: tid,
                    comm: cx.comm(tid).as_str().to_string(),
                    role: "consumer".into(),
                    measures: m,
                }
            })
            .collect();
        if self.max_wait.1 > 0 {
            let mut m = BTreeMap::new();
            m.insert("max_wait_ns".into(), i(self.max_wait.0));
            tasks.push(FindingTask {
                pid: self.max_wait.1,
                comm: cx.comm(self.max_wait.1).as_str().to_string(),
                role: "longest-waiter".into(),
                measures: m,
            });
        }
        let top = runs
            .iter()
            .take(3)
            .map(|&(t, r)| {
                format!(
                    "{} (pid {t}) {}",
                    cx.comm(t),
                    permille(ratio_permille(r, n_cpus * trace_span))
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let cause_text = format!(
            "Fair sharing of too little CPU: {}.{:03} runnable tasks on average for {n_cpus} CPUs over {}, the CPUs busy {} of it; the busiest tasks took {top} of the CPU set.",
            mean_depth_x1000 / 1000,
            mean_depth_x1000 % 1000,
            dur(span),
            permille(ratio_permille(busy_ns, n_cpus * span)),
        );
        let hint = format!(
            "{cause_text} Every waiting task waits its turn (median runnable wait {}, p99 {}); no weight or class makes one task the culprit. Add CPUs or cut parallelism (make -jN, pool sizes), or give the tasks that must not wait more weight (nice, cpu.weight) or their own CPUs (cpuset). Confirm with `vmstat 1` (r above {n_cpus}) or `perf sched latency` (every task's delay grows together).",
            dur(p50),
            dur(p99)
        );
        let mut m = BTreeMap::new();
        m.insert("saturated_ns".into(), i(saturated_ns));
        m.insert("window_ns".into(), i(span));
        m.insert("cpus".into(), i(n_cpus));
        m.insert("demand_permille".into(), i(demand));
        m.insert(
            "busy_permille".into(),
            i(ratio_permille(busy_ns, n_cpus * span)),
        );
        m.insert("depth_mean_x1000".into(), i(mean_depth_x1000));
        m.insert("depth_p99".into(), depth_p99 as i64);
        m.insert("depth_max".into(), depth_max as i64);
        m.insert("waiter_time_ns".into(), i(self.waiter_ns));
        m.insert("waits".into(), i(self.waits.count()));
        m.insert("wait_p50_ns".into(), i(p50));
        m.insert("wait_p99_ns".into(), i(p99));
        m.insert("wait_max_ns".into(), i(self.max_wait.0));
        m.insert("waits_over_10ms".into(), i(self.waits_over_10ms));
        Some(Finding {
            detector: INFO.id.into(),
            severity,
            title,
            window: Window {
                start_ns: start,
                end_ns: end,
            },
            cpus,
            tasks,
            measures: m,
            evidence: Vec::new(),
            hint,
            cause: Some(FindingCause {
                kind: "saturation".into(),
                text: cause_text,
            }),
        })
    }
}

/// The smallest depth with at least `q` ‰ of the time at or below it.
fn quantile_index(time: &[u64], total: u64, q: u64) -> usize {
    let want = (u128::from(total) * u128::from(q)).div_ceil(1000);
    let mut acc = 0u128;
    for (d, &t) in time.iter().enumerate() {
        acc += u128::from(t);
        if acc >= want && t > 0 {
            return d;
        }
    }
    time.len().saturating_sub(1)
}

/// `0-1`, or `0` for one CPU.
fn cpu_set_text(n: u64) -> String {
    match n {
        0 | 1 => "0".into(),
        _ => format!("0-{}", n - 1),
    }
}

impl Detector for CpuSaturation {
    fn info(&self) -> &'static DetectorInfo {
        &INFO
    }

    fn event_kinds(&self) -> u32 {
        kind::SWITCH
    }

    #[inline]
    fn on_event(&mut self, ev: &Event) {
        if matches!(ev.kind, EventKind::Switch(_)) && ev.cpu < MAX_CPUS {
            self.n_cpus = self.n_cpus.max(u64::from(ev.cpu) + 1);
        }
    }

    fn on_transition(&mut self, t: &Transition, _ev: &Event) {
        let Transition::State { ts, tid, from, to } = *t else {
            return;
        };
        let ran_since = match from {
            TaskState::Running { since, .. } => Some(since),
            _ => None,
        };
        let (ran, runs) = (ran_since.is_some(), matches!(to, TaskState::Running { .. }));
        let was = matches!(from, TaskState::Runnable { .. });
        let is = matches!(to, TaskState::Runnable { .. });
        if was == is && ran == runs {
            return; // neither the queue nor the busy CPUs change
        }
        self.advance(ts);
        if let Some(since) = ran_since {
            self.credit(tid, ts.saturating_sub(since));
            self.busy = self.busy.saturating_sub(1);
        }
        if runs {
            self.busy += 1;
        }
        if is {
            self.queued += 1;
            return;
        }
        if !was {
            return;
        }
        self.queued = self.queued.saturating_sub(1);
        if let (TaskState::Runnable { since, .. }, TaskState::Running { .. }) = (from, to) {
            let w = ts.saturating_sub(since);
            self.waits.add(w);
            self.waits_over_10ms += u64::from(w >= 10_000_000);
            if w > self.max_wait.0 {
                self.max_wait = (w, tid);
            }
        }
    }

    fn finish(self: Box<Self>, cx: &Context<'_>) -> Vec<Finding> {
        self.finding(cx).into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{idle, run, t, Trace, MS};
    use stallscope_model::FindingSeverity;

    const ID: &str = "cpu-saturation";

    /// `n` equal tasks share CPUs 0 and 1 in 4 ms slices for `ms` ms: CPU `c` runs the
    /// tasks `c`, `c + 2`, `c + 4`, … in turn.
    fn shared(n: i32, ms: u64) -> Trace {
        let mut tr = Trace::new();
        let task = |k: i32| t("eq", 100 + k, 120);
        tr.sw(0, 0, idle(), "R", task(0));
        tr.sw(0, 1, idle(), "R", task(1));
        for k in 2..n {
            tr.wake(1000 + k as u64, 0, 100, task(k), (k % 2) as u32);
        }
        let mut cur = [0, 1];
        let mut ts = 4 * MS;
        while ts <= ms * MS {
            for (c, cur) in cur.iter_mut().enumerate() {
                let next = match *cur + 2 < n {
                    true => *cur + 2,
                    false => c as i32,
                };
                if next != *cur {
                    tr.sw(ts, c as u32, task(*cur), "R", task(next));
                    *cur = next;
                }
            }
            ts += 4 * MS;
        }
        tr
    }

    #[test]
    fn more_tasks_than_cpus_for_long_is_one_finding() {
        let f = run(ID, &[], &shared(8, 2000));
        assert_eq!(f.len(), 1, "{f:#?}");
        let f = &f[0];
        assert_eq!(f.cpus, vec![0, 1]);
        // 8 runnable tasks on 2 CPUs: depth 8, demand 400 %
        assert_eq!(f.measures["depth_max"], 8);
        assert_eq!(f.measures["depth_p99"], 8);
        assert!(
            (3900..=4000).contains(&f.measures["demand_permille"]),
            "{:?}",
            f.measures
        );
        // each task waits 3 slices of 4 ms: p99 about 12 ms → medium
        assert!(f.measures["wait_p99_ns"] >= 10_000_000, "{:?}", f.measures);
        assert_eq!(f.severity, FindingSeverity::Medium);
        assert_eq!(
            f.cause.as_ref().map(|c| c.kind.as_str()),
            Some("saturation")
        );
        assert!(f.title.starts_with("CPUs 0-1 saturated for"), "{}", f.title);
        assert_eq!(f.tasks.iter().filter(|t| t.role == "consumer").count(), 5);
    }

    #[test]
    fn buckets_are_bounded_by_events_not_by_time() {
        // the same saturation, then one event 2^60 ns (36 years) later: the whole buckets in
        // between are one run (before: one bucket each, 405 MB at most and cut at 2^24
        // buckets — the finding then stopped 19 days in)
        let mut tr = shared(8, 2000);
        let gap: u64 = 1 << 60;
        tr.wake(2000 * MS + gap, 0, 100, t("late", 999, 120), 0);
        let f = run(ID, &[], &tr);
        assert_eq!(f.len(), 1, "{f:#?}");
        let saturated = f[0].measures["saturated_ns"] as u64;
        assert!(saturated > gap, "{saturated} of {gap}");
        // the late wakeup ends the trace: no time at depth 9
        assert_eq!(f[0].measures["depth_max"], 8);
    }

    #[test]
    fn busy_cpus_without_waiters_are_not_saturated() {
        // two tasks on two CPUs: busy all the time, nobody waits
        assert!(run(ID, &[], &shared(2, 2000)).is_empty());
        // saturated, but shorter than min_saturated_ns
        assert!(run(ID, &[], &shared(8, 300)).is_empty());
    }
}
