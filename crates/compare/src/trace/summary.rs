//! One trace file, summarized for comparison: per-task wakeup latencies, context switches
//! and migrations, and the detectors' findings.
//!
//! The events go through the shared [`Timeline`] (the same state machine the detectors use)
//! and the detector [`Engine`] in one pass. A **wakeup latency** is the time from the wakeup
//! that made a task runnable (`Runnable { cause: Wakeup }`: `sched_waking` preferred, as in
//! `perf sched latency`) to its next switch-in (`Running`); waits after a preemption are not
//! wakeup latencies. A **context switch** of a task is a `sched_switch` that switches it in;
//! a **migration** is a `sched_migrate_task` of it. Tasks are named by their last name (as
//! perf does); the idle task (pid 0) is not counted.
//!
//! Latencies are kept (8 bytes each) because the rank test needs the samples: memory grows
//! with the number of wakeups in the trace.

use std::collections::BTreeMap;

use stallscope::detect::registry;
use stallscope::detect::{Engine, Params};
use stallscope::model::{DataQuality, EventKind, Tid, Ts};
use stallscope::read::ReadError;
use stallscope::timeline::{RunnableCause, TaskState, Timeline, Transition, WakeupSelector};
use stallscope::Inputs;

use crate::findings::{self, DetectorRuns};

/// Per-task numbers of one trace.
#[derive(Clone, Debug, Default)]
pub struct TaskRun {
    /// Wakeup→switch-in delays, ns, in trace order.
    pub latencies_ns: Vec<u64>,
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

/// Reads and summarizes one trace file.
pub fn summarize(path: &str) -> Result<TraceRun, ReadError> {
    let mut inputs = Inputs::open(&[path.to_string()], None)?;
    let metas: Vec<_> = inputs.metas().into_iter().cloned().collect();
    let meta_refs: Vec<_> = metas.iter().collect();
    let detectors = registry::DETECTORS
        .iter()
        .map(|e| (e.make)(&Params::defaults(e.info.params)))
        .collect();
    let mut engine = Engine::new(detectors, &meta_refs);
    let mut timeline = Timeline::new(WakeupSelector::for_inputs(meta_refs.iter().copied()));
    let mut per_tid: BTreeMap<Tid, TaskRun> = BTreeMap::new();
    let (mut first, mut last): (Option<Ts>, Ts) = (None, 0);
    let mut batch = Vec::new();
    while inputs.next_batch(&mut batch)? {
        for ev in &batch {
            engine.process(ev);
            if ev.kind.is_scheduling() {
                first.get_or_insert(ev.ts);
                last = last.max(ev.ts);
            }
            if let EventKind::Switch(s) = &ev.kind {
                if s.next.pid != 0 {
                    per_tid.entry(s.next.pid).or_default().switches += 1;
                }
            }
            timeline.process(ev, &mut |t| match t {
                Transition::State {
                    ts,
                    tid,
                    from:
                        TaskState::Runnable {
                            since,
                            cause: RunnableCause::Wakeup,
                            ..
                        },
                    to: TaskState::Running { .. },
                } => per_tid
                    .entry(tid)
                    .or_default()
                    .latencies_ns
                    .push(ts.saturating_sub(since)),
                Transition::Migrated { tid, .. } => per_tid.entry(tid).or_default().migrations += 1,
                _ => {}
            });
        }
    }
    let mut run = TraceRun {
        path: path.to_string(),
        duration_ns: first.map_or(0, |f| last.saturating_sub(f)),
        ..TraceRun::default()
    };
    let tasks = timeline.tasks();
    for (tid, t) in per_tid {
        let comm = tasks
            .find(tid)
            .map_or_else(|| format!("pid-{tid}"), |i| tasks.get(i).comm.to_string());
        run.tasks.insert((comm, tid), t);
    }
    let result = engine.finish();
    run.detectors = findings::from_outcomes(&result.outcomes);
    run.quality = inputs.quality();
    run.quality.merge(&result.quality);
    Ok(run)
}
