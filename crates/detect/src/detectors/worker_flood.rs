//! `worker-flood`: one work function run by far more kernel workers, or by far more of them
//! at once, than there are CPUs.
//!
//! State machine: [`stallscope_timeline::workers::WorkerPools`] (per work function: distinct
//! workers, executing / running-or-runnable at once, queue→execute latency, CPU time,
//! switch-outs mid-work), fed every event. This module adds the evidence it keeps while the
//! trace runs (per function: the first queue event, the first execution of each of the first
//! few workers, the execution that reached the peak) and, at the end, names functions from
//! the input's kallsyms and turns the functions over the limit into findings.
//!
//! The CPU count comes from the recorded system context when present, else from the highest
//! CPU number seen plus one.

use rustc_hash::FxHashMap;
use stallscope_model::{
    Cpu, Event, EventKind, Finding, FindingSeverity, FindingTask, Problem, Profile, Tid, Window,
};
use stallscope_timeline::workers::{
    decode, FunctionStats, WorkEvent, WorkEventKind, WorkFn, WorkerPools,
};

use super::fmt::{dur, i, permille, ratio_permille};
use crate::evidence::{keep, render, Kept};
use crate::params::{ParamInfo, ParamUnit, Params};
use crate::{Context, Detector, DetectorInfo};

/// Thresholds.
pub static PARAMS: [ParamInfo; 4] = [
    ParamInfo {
        name: "workers_per_cpu",
        default: 4,
        unit: ParamUnit::Count,
        doc: "a function run by more than this many workers per CPU (distinct, or executing at once) floods",
    },
    ParamInfo {
        name: "high_workers_per_cpu",
        default: 16,
        unit: ParamUnit::Count,
        doc: "more than this many workers per CPU (distinct or at once) make the flood high",
    },
    ParamInfo {
        name: "min_executions",
        default: 100,
        unit: ParamUnit::Count,
        doc: "executions a function needs to be judged at all",
    },
    ParamInfo {
        name: "max_tasks",
        default: 8,
        unit: ParamUnit::Count,
        doc: "workers listed per finding (the busiest)",
    },
];

/// Description.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "worker-flood",
    summary: "one work function run by many more kworkers (or more at once) than there are CPUs",
    explanation: EXPLANATION,
    needs: &[&["workqueue_execute_start"]],
    optional: &[
        "workqueue_queue_work",
        "workqueue_activate_work",
        "workqueue_execute_end",
        "sched_switch",
        "sched_waking",
        "sched_wakeup",
        crate::PROFILE_NEED,
    ],
    record_command: "stallscope record --events sched,workqueue --kallsyms -o trace.dat -- COMMAND",
    params: &PARAMS,
};

const EXPLANATION: &str = r#"# worker-flood

## What it finds
Kernel work items (workqueue work functions) that the worker pools spread over far more
kworker threads than there are CPUs. For every work function it measures, from
`workqueue_queue_work` / `workqueue_activate_work` / `workqueue_execute_start` /
`workqueue_execute_end` and `sched_switch` / `sched_waking`:

- **workers**: distinct kworkers (pids) that executed it;
- **peak executing**: most workers between `execute_start` and `execute_end` at once
  (items in flight, sleeping or not), and **peak active**: most of those running or runnable
  at once (what competes for the CPUs);
- **queue → execute latency** (p50, p99, max; p-values are upper bounds of power-of-two
  buckets), measured per work struct from its queue (or activation) event;
- **cost**: on-CPU time of the workers inside the function, wall time in flight, switch-outs
  in the middle of an item and how many of them were sleeps.

A function with at least `min_executions` (default 100) executions floods when its workers
or its peak executing exceed `workers_per_cpu` (default 4) × the CPU count. The finding names
the function (symbolized from the trace's kallsyms: `stallscope record --kallsyms`, or as
text inputs print it), its workqueue, CPUs, the worker count, the peaks, the latency and the
cost, and lists the busiest workers (at most `max_tasks`, default 8; role `worker`).
When the analysis also has a CPU profile with task ids (perf.data samples with `-g`, or
`perf script` text), the hint names the functions the flagged workers were sampled in
(their leaf functions, top three with shares; measures `profile_worker_weight` and
`profile_top_leaf_permille`), so a flood of workers spinning on one lock points to the
`lock-spinning` finding that names the lock path.

## Why it matters
A per-CPU worker pool runs one work item at a time per CPU; when the item sleeps (a lock, a
transaction reservation, I/O), concurrency management wakes or creates another worker for
the next item. Work that always sleeps therefore turns into dozens or hundreds of kworkers,
each holding an item, contending for the same lock and costing a context switch per item:
for example `iomap_dio_complete_work` converting unwritten extents after direct writes into
sparse XFS files (each completion takes a transaction and the inode's ILOCK). Memory for the
threads, scheduler load, and lock convoys (see `lock-spinning` when a CPU profile of the same
window exists) follow.

## How to confirm
`trace-cmd report` (or `perf script`) of `workqueue:workqueue_execute_start`: count distinct
`kworker/N:M` pids per function. `ps -eLo comm | grep -c kworker` during the load; `cat
/proc/PID/stack` of a few of them shows where they sleep. For the XFS case, pre-allocating
(fallocate, or writing files once) removes the unwritten-extent conversion; fewer parallel
submitters or larger I/O reduce the number of items.

## Limits
Workers are told apart by pid. Items that started before the trace (no `execute_start`) are
not counted; items still running at the end are counted up to the last event
(`open_at_end`); items executed without a queue event in the trace have no latency
(`executions_without_queue`). Without `workqueue_queue_work` there is no latency and no
workqueue name; without `sched_switch` a worker counts as on the CPU for the whole item
(CPU time equals time in flight) and the active peak equals the executing one. Binary traces
name the function only when they carry kallsyms (`stallscope record --kallsyms`); perf.data
does not, so the function is shown as its address (`perf script` names it from the host).
The CPU count comes from the recorded system context, else from the highest CPU seen.
Input problems of the workqueue events over the whole trace (unparsed events, ends without
a start, starts without an end) appear as `trace_*` measures when non-zero.
Evidence: the function's first queue event, the first execution of its first three workers,
the execution that reached the executing peak, and the first sleep in the middle of an item.

## Severity
- **high**: workers or peak executing above `high_workers_per_cpu` (default 16) × CPUs.
- **medium**: otherwise (above `workers_per_cpu` × CPUs).
"#;

/// Builds the detector.
pub fn make(p: &Params) -> Box<dyn Detector> {
    Box::new(WorkerFlood {
        workers_per_cpu: p.get("workers_per_cpu"),
        high_workers_per_cpu: p.get("high_workers_per_cpu"),
        min_executions: p.get("min_executions"),
        max_tasks: usize::try_from(p.get("max_tasks")).unwrap_or(usize::MAX),
        pools: WorkerPools::new(),
        kept: FxHashMap::default(),
        max_cpu: None,
        samples: FxHashMap::default(),
    })
}

/// Evidence kept per work function while the trace runs.
#[derive(Default)]
struct KeptEvents {
    queue: Option<Kept>,
    first_of_worker: Vec<Kept>,
    first_sleep: Option<Kept>,
    peak: Option<Kept>,
}

/// Workers whose first execution is kept as evidence.
const FIRST_WORKERS_KEPT: usize = 3;

struct WorkerFlood {
    workers_per_cpu: u64,
    high_workers_per_cpu: u64,
    min_executions: u64,
    max_tasks: usize,
    pools: WorkerPools,
    kept: FxHashMap<WorkFn, KeptEvents>,
    max_cpu: Option<Cpu>,
    samples: FxHashMap<Tid, WorkerSamples>,
}

/// A kworker's CPU-profile weight (all profiles fed), by sampled (leaf) function.
#[derive(Default)]
struct WorkerSamples {
    total: u64,
    by_leaf: FxHashMap<Box<str>, u64>,
}

/// Leaf functions named in the profile note of a finding.
const TOP_LEAVES: usize = 3;

impl WorkerFlood {
    fn keep_evidence(&mut self, ev: &Event, w: &WorkEvent, before: Option<(usize, u32)>) {
        let Some(f) = &w.function else {
            return; // activate/end without a function: nothing new to keep
        };
        let Some(st) = self.pools.function(f) else {
            return;
        };
        let (workers, peak) = (st.workers.len(), st.peak_executing);
        let k = match self.kept.get_mut(f) {
            Some(k) => k,
            None => self.kept.entry(f.clone()).or_default(),
        };
        match w.kind {
            WorkEventKind::Queue if k.queue.is_none() => k.queue = Some(keep(ev)),
            WorkEventKind::ExecuteStart => {
                let (workers_before, peak_before) = before.unwrap_or((0, 0));
                if workers > workers_before && k.first_of_worker.len() < FIRST_WORKERS_KEPT {
                    k.first_of_worker.push(keep(ev));
                }
                if peak > peak_before {
                    k.peak = Some(keep(ev));
                }
            }
            _ => {}
        }
    }

    /// The CPU profile of `st`'s workers, when one was fed: (their total weight, the top
    /// leaf's share in permille, a sentence naming the top leaves).
    fn profile_note(&self, st: &FunctionStats) -> Option<(u64, u64, String)> {
        let mut total = 0u64;
        let mut by_leaf: FxHashMap<&str, u64> = FxHashMap::default();
        for pid in st.workers.keys() {
            let Some(w) = self.samples.get(pid) else {
                continue; // a worker without samples adds nothing
            };
            total += w.total;
            for (leaf, n) in &w.by_leaf {
                *by_leaf.entry(leaf).or_insert(0) += n;
            }
        }
        if total == 0 {
            return None;
        }
        let mut leaves: Vec<(&str, u64)> = by_leaf.into_iter().collect();
        leaves.sort_by_key(|&(name, n)| (std::cmp::Reverse(n), name));
        let top: Vec<String> = leaves
            .iter()
            .take(TOP_LEAVES)
            .map(|(name, n)| format!("{name} {}", permille(ratio_permille(*n, total))))
            .collect();
        let top_permille = leaves.first().map_or(0, |(_, n)| ratio_permille(*n, total));
        let note = format!(
            "CPU profile: the workers' samples (weight {total}) are mostly in {}; when these are lock functions \
             (osq_lock, *_spin_lock_slowpath, rwsem_spin_on_owner, …) the lock-spinning finding names the lock path.",
            top.join(", ")
        );
        Some((total, top_permille, note))
    }

    fn finding(&self, st: &FunctionStats, ncpu: u64, cx: &Context<'_>) -> Option<Finding> {
        let workers = st.workers.len() as u64;
        let peak = u64::from(st.peak_executing);
        let limit = self.workers_per_cpu.saturating_mul(ncpu);
        if st.executions < self.min_executions || (workers <= limit && peak <= limit) {
            return None;
        }
        let high = self.high_workers_per_cpu.saturating_mul(ncpu);
        let severity = if workers > high || peak > high {
            FindingSeverity::High
        } else {
            FindingSeverity::Medium
        };
        let wq = st.main_workqueue();
        let lat = &st.latency;
        let mut title = format!(
            "{workers} kworker{} ran {}{} on {} CPU{} ({ncpu} online, limit {limit}): up to {peak} executing at once, {} running or runnable; {} items",
            if workers == 1 { "" } else { "s" },
            st.function,
            wq.map(|q| format!(" (workqueue {q})")).unwrap_or_default(),
            st.cpus.len(),
            if st.cpus.len() == 1 { "" } else { "s" },
            st.peak_active,
            st.executions,
        );
        if lat.count > 0 {
            title.push_str(&format!(
                ", queue→execute p99 ≤ {} (max {})",
                dur(lat.quantile_upper_permille(990)),
                dur(lat.max)
            ));
        }
        title.push_str(&format!(
            ", {} CPU, {} switch-outs mid-item ({} sleeps)",
            dur(st.cpu_ns),
            st.switches,
            st.sleeps
        ));

        let mut busiest: Vec<_> = st.workers.iter().collect();
        busiest.sort_by_key(|(pid, u)| (std::cmp::Reverse(u.executions), **pid));
        let tasks = busiest
            .into_iter()
            .take(self.max_tasks)
            .map(|(&pid, u)| FindingTask {
                pid,
                comm: cx.comm(pid).as_str().to_string(),
                role: "worker".into(),
                measures: [
                    ("executions".to_string(), i(u.executions)),
                    ("cpu_ns".to_string(), i(u.cpu_ns)),
                ]
                .into_iter()
                .collect(),
            })
            .collect();

        let mut measures = std::collections::BTreeMap::new();
        for (k, v) in [
            ("workers", workers),
            ("peak_executing", peak),
            ("peak_active", u64::from(st.peak_active)),
            ("limit", limit),
            ("cpus_online", ncpu),
            ("queued", st.queued),
            ("executions", st.executions),
            ("executions_without_queue", st.executions_without_queue),
            ("open_at_end", st.open_at_end),
            ("cpu_ns", st.cpu_ns),
            ("busy_ns", st.busy_ns),
            ("switches", st.switches),
            ("sleeps", st.sleeps),
            ("peak_executing_ts_ns", st.peak_executing_ts),
        ] {
            measures.insert(k.to_string(), i(v));
        }
        // Whole-trace input problems of the workqueue events, when there were any.
        for (problem, measure) in [
            (
                Problem::WorkqueueUnparsed,
                "trace_unparsed_workqueue_events",
            ),
            (
                Problem::WorkqueueEndWithoutStart,
                "trace_ends_without_start",
            ),
            (
                Problem::WorkqueueExecuteWithoutEnd,
                "trace_starts_without_end",
            ),
        ] {
            let n = self.pools.quality().count(problem);
            if n > 0 {
                measures.insert(measure.to_string(), i(n));
            }
        }
        if lat.count > 0 {
            for (k, v) in [
                ("latency_p50_ns", lat.quantile_upper_permille(500)),
                ("latency_p99_ns", lat.quantile_upper_permille(990)),
                ("latency_max_ns", lat.max),
                ("latency_mean_ns", lat.mean()),
            ] {
                measures.insert(k.to_string(), i(v));
            }
        }

        let kept = self.kept.get(&st.function);
        let mut ev: Vec<&Kept> = Vec::new();
        if let Some(k) = kept {
            ev.extend(k.queue.iter());
            ev.extend(k.first_of_worker.iter());
            ev.extend(k.peak.iter());
            ev.extend(k.first_sleep.iter());
        }
        let profile = self.profile_note(st);
        if let Some((weight, top_permille, _)) = &profile {
            measures.insert("profile_worker_weight".into(), i(*weight));
            measures.insert("profile_top_leaf_permille".into(), i(*top_permille));
        }
        let mut hint = format!(
            "Count the workers yourself: `trace-cmd report -F workqueue_execute_start | grep -w {}` and the distinct kworker pids. \
             Look at where they sleep (`cat /proc/<pid>/stack` of a few kworkers during the load, or sched_switch prev_state=D \
             with -g). Work that sleeps in every item makes the per-CPU pool wake another worker each time; remove the reason it \
             sleeps (for direct writes into sparse or unwritten XFS extents: preallocate or write the files once) or issue fewer \
             items in parallel. With a CPU profile of the same window, run lock-spinning too.",
            st.function
        );
        if let WorkFn::Addr(a) = st.function {
            hint.push_str(&format!(
                " The trace carries no kernel symbols: `grep -i {a:x} /proc/kallsyms` on the recording host names the function \
                 (`stallscope record --kallsyms` stores them in the file)."
            ));
        }
        if let Some((_, _, note)) = profile {
            hint.push(' ');
            hint.push_str(&note);
        }
        Some(Finding {
            cause: None,
            detector: INFO.id.into(),
            severity,
            title,
            window: Window {
                start_ns: st.first_ts,
                end_ns: st.last_ts.max(st.first_ts),
            },
            cpus: st.cpus.keys().copied().collect(),
            tasks,
            measures,
            evidence: render(cx, &ev),
            hint,
        })
    }
}

impl Detector for WorkerFlood {
    fn info(&self) -> &'static DetectorInfo {
        &INFO
    }

    fn wants_transitions(&self) -> bool {
        false
    }

    fn on_event(&mut self, ev: &Event) {
        self.max_cpu = Some(self.max_cpu.map_or(ev.cpu, |c| c.max(ev.cpu)));
        match &ev.kind {
            EventKind::Generic(g) if WorkEventKind::from_name(&g.name).is_some() => {
                let w = decode(g);
                // The function's worker count and peak before this event, to see what it
                // changed.
                let before = w.as_ref().and_then(|w| w.function.as_ref()).and_then(|f| {
                    self.pools
                        .function(f)
                        .map(|st| (st.workers.len(), st.peak_executing))
                });
                self.pools.process_work(ev, w.as_ref());
                if let Some(w) = &w {
                    self.keep_evidence(ev, w, before);
                }
            }
            EventKind::Switch(s) => {
                // The first time a worker of a function goes to sleep in the middle of an item.
                if !s.prev_state.is_runnable() {
                    if let Some(st) = self.pools.executing(s.prev.pid) {
                        let k = match self.kept.get_mut(&st.function) {
                            Some(k) => k,
                            None => self.kept.entry(st.function.clone()).or_default(),
                        };
                        if k.first_sleep.is_none() {
                            k.first_sleep = Some(keep(ev));
                        }
                    }
                }
                self.pools.process(ev);
            }
            _ => self.pools.process(ev),
        }
    }

    fn on_profile(&mut self, p: &Profile, _cx: &Context<'_>) {
        for s in &p.stacks {
            let (Some(pid), Some(comm), Some(&leaf)) = (s.pid, s.comm, s.frames.first()) else {
                continue; // a stack without task or frames cannot belong to a known worker
            };
            if !comm.as_str().starts_with("kworker") {
                continue; // only kworkers run work items
            }
            let w = self.samples.entry(pid).or_default();
            w.total += s.weight;
            let name = p.symbol(leaf);
            match w.by_leaf.get_mut(name) {
                Some(n) => *n += s.weight,
                None => {
                    w.by_leaf.insert(name.into(), s.weight);
                }
            }
        }
    }

    fn finish(mut self: Box<Self>, cx: &Context<'_>) -> Vec<Finding> {
        self.pools.finish();
        if let Some(k) = cx.kallsyms {
            // Name the evidence keys the same way the pools name their functions.
            let names = self.pools.name_functions_from_kallsyms(k);
            for (a, name) in names {
                if let Some(v) = self.kept.remove(&WorkFn::Addr(a)) {
                    self.kept.insert(WorkFn::Name(name), v);
                }
            }
        }
        let ncpu = cx
            .system
            .and_then(|s| s.nr_cpus)
            .map(u64::from)
            .or(self.max_cpu.map(|c| u64::from(c) + 1))
            .unwrap_or(1)
            .max(1);
        let mut out: Vec<Finding> = self
            .pools
            .functions()
            .iter()
            .filter_map(|st| self.finding(st, ncpu, cx))
            .collect();
        out.sort_by_key(|f| {
            (
                std::cmp::Reverse(f.severity),
                std::cmp::Reverse(f.measures.get("workers").copied().unwrap_or(0)),
                f.window.start_ns,
            )
        });
        out
    }
}

#[cfg(test)]
mod tests;
