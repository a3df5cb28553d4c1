//! [`critical_path`]: one task's time over a window — running, runnable (behind whom),
//! sleeping (woken by whom), unknown — from timehist's rows and the sleeps of one reading
//! of the inputs (`stallscope_timeline::critical_path`), as `stallscope critical-path`
//! prints it.
//!
//! ```
//! use stallscope::critical_path::critical_path;
//! use stallscope::InputOptions;
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/sched/starve.perf.data");
//! let input = InputOptions::new(vec![path.to_string()]);
//! let done = critical_path(&input, 12897, None).map_err(|e| format!("{e:?}"))?; // cyclictest
//! let t = done.path.totals;
//! let window = done.path.end_ns - done.path.start_ns;
//! assert_eq!(t.running_ns + t.runnable_ns + t.sleeping_ns + t.unknown_ns, window);
//! // starved: runnable behind the CPU hog most of the time it was not asleep
//! assert_eq!(done.names.label(done.path.runnable_behind[0].0), "stress-ng-cpu (12892)");
//! # Ok::<(), String>(())
//! ```

use stallscope_model::{DataQuality, Ts};
use stallscope_timeline::critical_path::{self as cp, CriticalPath};
use stallscope_timeline::sleeps::SleepTracker;
use stallscope_timeline::{PerfFlavor, Timehist, TimehistOptions, WakeupSelector};

use crate::analyze::AnalyzeError;
use crate::task_names::TaskNames;
use crate::InputOptions;

/// The path and what labels it.
#[derive(Debug)]
pub struct PathDone {
    /// The task's intervals, totals, and who ran or woke it.
    pub path: CriticalPath,
    /// The scheduler events' first and last time (the window's edges when open).
    pub trace_span: (Ts, Ts),
    /// Task names.
    pub names: TaskNames,
    /// The inputs' data quality.
    pub quality: DataQuality,
}

/// Why there is no path.
#[derive(Debug)]
pub enum PathError {
    /// The inputs could not be read.
    Read(AnalyzeError),
    /// The inputs hold no scheduler events.
    NoSchedulerEvents,
    /// The task never ran in a recorded switch.
    NeverRan {
        /// The task.
        pid: stallscope_model::Tid,
    },
    /// The window holds no time of the trace: `(window, trace)`.
    EmptyWindow {
        /// The window clipped to the trace.
        window: (Ts, Ts),
        /// The scheduler events' span.
        trace: (Ts, Ts),
    },
}

impl From<AnalyzeError> for PathError {
    fn from(e: AnalyzeError) -> PathError {
        PathError::Read(e)
    }
}

impl From<stallscope_read::ReadError> for PathError {
    fn from(e: stallscope_read::ReadError) -> PathError {
        PathError::Read(AnalyzeError::Read(e))
    }
}

/// Task `pid`'s critical path over `window` (an open side, 0 or `Ts::MAX`, is the trace's
/// edge; `None`: the whole trace).
pub fn critical_path(
    input: &InputOptions,
    pid: stallscope_model::Tid,
    window: Option<(Ts, Ts)>,
) -> Result<PathDone, PathError> {
    let mut inputs = input.open()?;
    let metas = inputs.metas();
    let waking = WakeupSelector::declared_in(metas.iter().copied());
    let mut th = Timehist::new(TimehistOptions {
        pid: None,
        cpu: None,
        flavor: PerfFlavor::Current,
        waking_declared: waking,
        nr_cpus: metas.iter().filter_map(|m| m.nr_cpus).max(),
    });
    let mut tracker = SleepTracker::new(WakeupSelector::for_inputs(metas.iter().copied()));
    let mut rows = Vec::new();
    let mut names = TaskNames::default();
    let (mut first, mut last): (Option<Ts>, Ts) = (None, 0);
    let mut buf = Vec::new();
    while inputs.next_batch(&mut buf)? {
        for ev in &buf {
            if ev.kind.is_scheduling() {
                // the window defaults to the scheduler events' span (perf.data's setup
                // records carry time 0)
                first.get_or_insert(ev.ts);
                last = last.max(ev.ts);
            }
            th.process(ev, &mut |r| rows.push(*r));
            tracker.push(ev);
            names.note(ev);
        }
    }
    let Some(first) = first else {
        return Err(PathError::NoSchedulerEvents);
    };
    if !rows.iter().any(|r| r.tid == pid) {
        return Err(PathError::NeverRan { pid });
    }
    let (start, end) = match window {
        Some((a, b)) => (a.max(first), b.min(last)),
        None => (first, last),
    };
    if end <= start {
        return Err(PathError::EmptyWindow {
            window: (start, end),
            trace: (first, last),
        });
    }
    let (sleeps, _) = tracker.finish();
    Ok(PathDone {
        path: cp::critical_path(&rows, &sleeps, pid, start, end),
        trace_span: (first, last),
        names,
        quality: inputs.quality(),
    })
}
