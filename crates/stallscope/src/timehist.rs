//! [`timehist`]: `perf sched timehist`'s rows of the inputs, handed to a sink as they are
//! made (a multi-gigabyte trace is never held), and its summary — what `stallscope
//! timehist` prints.
//!
//! ```
//! use stallscope::timehist::{timehist, TimehistRun};
//! use stallscope::InputOptions;
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/sched/starve.perf.data");
//! let mut rows = 0;
//! let done = timehist(&TimehistRun::new(InputOptions::new(vec![path.to_string()])), &mut |_| {
//!     rows += 1;
//!     true
//! })?;
//! assert_eq!(done.rows, rows);
//! # Ok::<(), stallscope::analyze::AnalyzeError>(())
//! ```

use stallscope_model::{Cpu, DataQuality, Tid};
use stallscope_timeline::{
    PerfFlavor, Timehist, TimehistOptions, TimehistRow, TimehistSummary, WakeupSelector,
};

use crate::analyze::AnalyzeError;
use crate::InputOptions;

/// What to show.
#[derive(Clone, Debug)]
pub struct TimehistRun {
    /// The inputs.
    pub input: InputOptions,
    /// Only this task's rows (perf's `--pid`).
    pub pid: Option<Tid>,
    /// Only this CPU's rows (perf's `--cpu`).
    pub cpu: Option<Cpu>,
    /// Which perf's column rules.
    pub flavor: PerfFlavor,
}

impl TimehistRun {
    /// Every row of `input`, the current perf's rules.
    pub fn new(input: InputOptions) -> TimehistRun {
        TimehistRun {
            input,
            pid: None,
            cpu: None,
            flavor: PerfFlavor::Current,
        }
    }
}

/// After the rows.
#[derive(Debug)]
pub struct TimehistDone {
    /// Rows made (all of them, even after the sink asked to stop seeing them).
    pub rows: u64,
    /// The per-task summary (`perf sched timehist --summary`).
    pub summary: TimehistSummary,
    /// The inputs' data quality.
    pub quality: DataQuality,
}

/// Reads `run`'s inputs and hands each row to `row`; once `row` returns `false` it gets
/// no more and reading stops at the end of the current run of events.
pub fn timehist(
    run: &TimehistRun,
    row: &mut dyn FnMut(&TimehistRow) -> bool,
) -> Result<TimehistDone, AnalyzeError> {
    let mut inputs = run.input.open()?;
    let metas = inputs.metas();
    let mut th = Timehist::new(TimehistOptions {
        pid: run.pid,
        cpu: run.cpu,
        flavor: run.flavor,
        waking_declared: WakeupSelector::declared_in(metas.iter().copied()),
        nr_cpus: metas.iter().filter_map(|m| m.nr_cpus).max(),
    });
    let mut rows = 0u64;
    let mut wanted = true;
    let mut buf = Vec::new();
    // Events come a run at a time (the lean perf.data reader builds them where they are
    // used).
    let mut more = true;
    while more && wanted {
        more = inputs.visit_batch(&mut buf, &mut |events| {
            for ev in events {
                if !wanted {
                    return;
                }
                th.process(ev, &mut |r| {
                    rows += 1;
                    if wanted {
                        wanted = row(r);
                    }
                });
            }
        })?;
    }
    Ok(TimehistDone {
        rows,
        summary: th.summary(),
        quality: inputs.quality(),
    })
}
