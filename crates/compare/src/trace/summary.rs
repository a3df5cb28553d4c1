//! One trace file, summarized for comparison: per-task wakeup latencies, context switches
//! and migrations, and the detectors' findings.
//!
//! The numbers come from the analysis' own reading ([`TraceTally`], fed by the facade's
//! `compare` beside the detectors): the events, and the transitions of the analysis'
//! [`Timeline`] (the one model; no second state machine). A **wakeup latency** is the time
//! from the wakeup that made a task runnable (`Runnable { cause: Wakeup }`, under the
//! analysis' wakeup rule: `sched_waking` when recorded, as in `perf sched latency`) to its
//! next switch-in (`Running`); waits after a preemption are not
//! wakeup latencies. A **runnable wait** is every stretch from runnable (woken or
//! preempted) to the next switch-in — `perf sched timehist`'s sch delay — and the tail
//! tables compare those; a task's **CPU time** is the sum of its runs (switch-in to
//! switch-out). A **context switch** of a task is a `sched_switch` that switches it in;
//! a **migration** is a `sched_migrate_task` of it. Tasks are named by their last name (as
//! perf does); the idle task (pid 0) is not counted.
//!
//! Latencies are kept (8 bytes each) because the rank test needs the samples: memory grows
//! with the number of wakeups in the trace.

use std::collections::BTreeMap;

use stallscope_detect::engine::Run;
use stallscope_detect::recorder::RecorderTasks;
use stallscope_model::{DataQuality, EventKind, SystemContext, Tid, TraceMeta, Ts};
use stallscope_timeline::{RunnableCause, TaskState, Timeline, Transition};

use crate::findings::DetectorRuns;

/// Per-task numbers of one trace.
#[derive(Clone, Debug, Default)]
pub struct TaskRun {
    /// Wakeup→switch-in delays, ns, in trace order.
    pub latencies_ns: Vec<u64>,
    /// Every runnable→switch-in delay (after a wakeup or a preemption), ns, in trace order.
    pub waits_ns: Vec<u64>,
    /// CPU time: the runs' lengths summed, ns.
    pub run_ns: u64,
    /// Times the task was switched in.
    pub switches: u64,
    /// `sched_migrate_task` events of the task.
    pub migrations: u64,
}

/// One trace, summarized.
#[derive(Clone, Debug, Default)]
pub struct TraceRun {
    /// Path as given.
    pub path: String,
    /// Time from the first to the last scheduler event (switch, wakeup, migration); side-band
    /// records (perf's synthesized `COMM`s) can carry much older timestamps.
    pub duration_ns: u64,
    /// Per (comm, tid).
    pub tasks: BTreeMap<(String, Tid), TaskRun>,
    /// Per detector id.
    pub detectors: DetectorRuns,
    /// Readers' and timeline's data quality.
    pub quality: DataQuality,
}

/// What one trace is summarized from, gathered from the analysis' own reading: its events
/// and the transitions its timeline made of them (the one model; no second state machine).
/// The caller (the facade's `compare`) feeds it and finishes it with the analysis' outcome.
#[derive(Default)]
pub struct TraceTally {
    per_tid: BTreeMap<Tid, TaskRun>,
    first: Option<Ts>,
    last: Ts,
    names: BTreeMap<Tid, String>,
    /// The recorder's tasks, left out of the summary (the comparison is of the workload).
    recorder: Option<(RecorderTasks, Option<SystemContext>)>,
}

impl TraceTally {
    /// Leaves the tasks of the recorder of the inputs described by `metas` out of the
    /// summary (see `stallscope_detect::recorder`).
    pub fn leave_out_recorder(&mut self, metas: &[&TraceMeta]) {
        let system = metas.iter().find_map(|m| m.system_context.clone());
        self.recorder = Some((RecorderTasks::for_inputs(metas, system.as_ref()), system));
    }

    /// The next analyzed events and their transitions, in time order.
    pub fn run(&mut self, run: &Run<'_>) {
        let per_tid = &mut self.per_tid;
        for ev in run.events {
            if ev.kind.is_scheduling() {
                self.first.get_or_insert(ev.ts);
                self.last = self.last.max(ev.ts);
            }
            if let EventKind::Switch(s) = &ev.kind {
                if s.next.pid != 0 {
                    per_tid.entry(s.next.pid).or_default().switches += 1;
                }
            }
        }
        for (_, t) in run.transitions {
            match *t {
                Transition::State {
                    ts,
                    tid,
                    from: TaskState::Runnable { since, cause, .. },
                    to: TaskState::Running { .. },
                } => {
                    let task = per_tid.entry(tid).or_default();
                    let wait = ts.saturating_sub(since);
                    task.waits_ns.push(wait);
                    if cause == RunnableCause::Wakeup {
                        task.latencies_ns.push(wait);
                    }
                }
                Transition::State {
                    ts,
                    tid,
                    from: TaskState::Running { since, .. },
                    ..
                } => per_tid.entry(tid).or_default().run_ns += ts.saturating_sub(since),
                Transition::Migrated { tid, .. } => per_tid.entry(tid).or_default().migrations += 1,
                _ => {}
            }
        }
    }

    /// The model after the last event: the tasks' last names (as perf names them).
    pub fn end(&mut self, timeline: &Timeline) {
        let tasks = timeline.tasks();
        for &tid in self.per_tid.keys() {
            if let Some(i) = tasks.find(tid) {
                self.names.insert(tid, tasks.get(i).comm.to_string());
            }
        }
    }

    /// The summary of the trace at `path`, with the analysis' detector outcomes and data
    /// quality (readers' and timeline's).
    pub fn finish(self, path: &str, detectors: DetectorRuns, quality: DataQuality) -> TraceRun {
        let mut run = TraceRun {
            path: path.to_string(),
            duration_ns: self.first.map_or(0, |f| self.last.saturating_sub(f)),
            detectors,
            quality,
            ..TraceRun::default()
        };
        for (tid, t) in self.per_tid {
            let comm = self
                .names
                .get(&tid)
                .cloned()
                .unwrap_or_else(|| format!("pid-{tid}"));
            if let Some((recorder, system)) = &self.recorder {
                let context = system
                    .as_ref()
                    .and_then(|s| s.tasks.iter().find(|c| c.pid == tid));
                if recorder.is_recorder(tid, &comm, context) {
                    continue;
                }
            }
            run.tasks.insert((comm, tid), t);
        }
        run
    }
}
