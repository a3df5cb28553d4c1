//! [`sleeps`]: every sleep of the inputs that ends, who ended it and what the waker had just
//! done (`stallscope_timeline::sleeps`), with the task names — what `stallscope sleeps`
//! prints and `critical_path` reads.
//!
//! ```
//! use stallscope::sleeps::sleeps;
//! use stallscope::InputOptions;
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/sched/starve.perf.data");
//! let done = sleeps(&InputOptions::new(vec![path.to_string()]))?;
//! assert!(!done.sleeps.is_empty());
//! # Ok::<(), stallscope::analyze::AnalyzeError>(())
//! ```

use std::collections::BTreeMap;

use stallscope_model::DataQuality;
use stallscope_timeline::sleeps::{Sleep, SleepCounts, SleepTracker};
use stallscope_timeline::WakeupSelector;

use crate::analyze::AnalyzeError;
use crate::task_names::TaskNames;
use crate::InputOptions;

/// The sleeps of a trace.
#[derive(Debug)]
pub struct SleepsDone {
    /// Every sleep that ended, in the order they ended.
    pub sleeps: Vec<Sleep>,
    /// Sleeps ended without a wakeup, and the like.
    pub counts: SleepCounts,
    /// Interrupt lines and their names (`irq_handler_entry`).
    pub irq_names: BTreeMap<u32, String>,
    /// The work functions the sleeps' wakers ran, by the index the sleeps use.
    pub work_functions: Vec<String>,
    /// Task names.
    pub names: TaskNames,
    /// The inputs' data quality.
    pub quality: DataQuality,
    /// Events read.
    pub events_read: u64,
}

/// The sleeps of `input`'s events.
pub fn sleeps(input: &InputOptions) -> Result<SleepsDone, AnalyzeError> {
    let mut inputs = input.open()?;
    let mut tracker = SleepTracker::new(WakeupSelector::for_inputs(inputs.metas()));
    let mut names = TaskNames::default();
    let mut buf = Vec::new();
    while inputs.next_batch(&mut buf)? {
        for ev in &buf {
            tracker.push(ev);
            names.note(ev);
        }
    }
    let irq_names = tracker.irq_names().clone();
    let work_functions = tracker
        .work_functions()
        .iter()
        .map(ToString::to_string)
        .collect();
    let (sleeps, counts) = tracker.finish();
    Ok(SleepsDone {
        sleeps,
        counts,
        irq_names,
        work_functions,
        names,
        quality: inputs.quality(),
        events_read: inputs.events_read(),
    })
}
