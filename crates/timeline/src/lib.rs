//! stallscope's scheduler state machines and the analyses built on them.
//!
//! Events come in time order (from `stallscope::Inputs`); every type here is a push-model
//! consumer with a `process(&Event, …)` method, constant work per event and memory bounded
//! by the number of tasks and CPUs, never by trace length.
//!
//! * [`timeline::Timeline`]: the general per-CPU / per-task state machine (Unknown, Running,
//!   Runnable, Sleeping, Blocked, Dead) emitting [`timeline::Transition`]s to a sink, with
//!   data-quality counters for impossible sequences. Detectors build on it.
//! * [`intervals::Model`]: the timeline read back as closed intervals — runs, runnable
//!   waits, sleeps, idle — emitted as each one ends (the one model every product reads).
//! * [`latency::Latency`]: `perf sched latency`, reproduced definition for definition.
//! * [`timehist::Timehist`]: `perf sched timehist` rows (streamed) and its runtime summary.
//! * [`sleeps::SleepTracker`]: every sleep that ends and who ended it (the waker, its
//!   context, the block completion or work item just before).
//! * [`critical_path::critical_path`]: one task's time over a window as running, runnable
//!   (who ran instead), sleeping (woken by whom) and unknown intervals, from timehist's rows
//!   and the sleeps.
//!
//! Shared plumbing: [`tasks::TaskTable`] (tid → dense slot, task names) and
//! [`wakeups::WakeupSelector`] (which wakeup tracepoint starts a wait).
//!
//! perf changed its definitions over time; [`PerfFlavor`] selects which release the perf
//! analyses reproduce, so our numbers can be checked against the perf that is installed.

pub mod block;
pub mod critical_path;
pub mod intervals;
pub mod iolat;
pub mod latency;
pub mod sleeps;
pub mod tasks;
pub mod timehist;
pub mod timeline;
pub mod wakeups;
pub mod workers;

#[cfg(test)]
mod testutil;

pub use intervals::{Interval, Model, SleepKind};
pub use latency::{Latency, LatencyOptions, LatencyReport, LatencyRow, LatencyStats, SortKey};
pub use tasks::{TaskSlot, TaskTable};
pub use timehist::{Timehist, TimehistOptions, TimehistRow, TimehistSummary};
pub use timeline::{RunnableCause, TaskState, Timeline, Transition};
pub use wakeups::{WakeupKind, WakeupSelector};

/// Which perf release's definitions [`Latency`] and [`Timehist`] reproduce.
///
/// | | `Current` (perf ≥ 6.11) | `Perf6_1` (perf 6.1, e.g. Debian 12's `linux-perf`) |
/// |---|---|---|
/// | latency: wakeup events | `sched_waking` when the trace has it, else `sched_wakeup`; plus `sched_wakeup_new` | only `sched_wakeup` and `sched_wakeup_new` (`sched_waking`, which `perf sched record` records instead of `sched_wakeup`, is ignored; changed upstream in 2023) |
/// | latency: which switch-out starts a wait | `R` and `R+` (preempted) | only a raw `prev_state` of 0: perf 6.1 indexes the string `"RSDTtXZPI"` with the raw number, so the kernel's preempted marker (0x100 on 6.18) is not read as `R` |
/// | timehist: "sch delay" after a runnable switch-out | from the switch-out (commit "perf: Timehist account sch delay for scheduled out running", 2024) | only from a later wakeup, else 0 |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PerfFlavor {
    /// Today's perf (tools/perf in the kernel tree, ≥ 6.11).
    #[default]
    Current,
    /// perf 6.1.
    Perf6_1,
}

impl PerfFlavor {
    /// Parses `current` or `6.1`.
    pub fn from_name(s: &str) -> Option<PerfFlavor> {
        match s {
            "current" => Some(PerfFlavor::Current),
            "6.1" => Some(PerfFlavor::Perf6_1),
            _ => None,
        }
    }
}
