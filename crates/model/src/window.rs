//! [`FindingWindows`]: the scheduling activity around each finding, at full detail, for
//! renderers that draw timelines (the HTML report). Renderer-agnostic and bounded: each
//! window keeps at most a fixed number of items per kind and says how many it left out.
//!
//! JSON shape (embedded in the HTML report next to the `stallscope.report/1` document):
//!
//! ```text
//! {"margin_ns":50000000,"max_items":4000,
//!  "windows":[{"finding":0,"start_ns":595077047000,"end_ns":595275813000,"cpus":[0,1],
//!              "tasks":[{"pid":12897,"comm":"cyclictest"}],
//!              "slices":[{"cpu":1,"start_ns":595077047000,"end_ns":595080000000,"pid":12892}],
//!              "waits":[{"pid":12897,"cpu":1,"start_ns":595127047000,"end_ns":595225813000}],
//!              "wakeups":[{"ts_ns":595127047000,"cpu":1,"waker_pid":0,"wakee_pid":12897,"target_cpu":1}],
//!              "migrations":[{"ts_ns":595127047100,"pid":12897,"from_cpu":0,"to_cpu":1}],
//!              "requests":[{"dev":7340032,"sector":488,"nr_sector":8,"rwbs":"WS","cpu":1,
//!                           "start_ns":595127050000,"end_ns":595127090000}],
//!              "omitted":{"slices":0,"waits":0,"wakeups":0,"migrations":0,"requests":0}}],
//!  "histograms":[{"pid":12897,"comm":"cyclictest","waits":1200,"max_ns":98766000,"buckets":[0,0,3,…]}],
//!  "omitted_windows":0,"note":"…"}
//! ```
//!
//! Times are trace-clock nanoseconds. Slices and waits are clipped to their window. A wait
//! is the time a task spent runnable (woken, or preempted while running) until it was
//! switched in; `open` marks one still runnable when the window ends.

use serde::{Deserialize, Serialize};

use crate::{Cpu, Tid, Ts};

/// A task on a CPU from `start_ns` to `end_ns` (the idle task is not listed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSlice {
    /// CPU.
    pub cpu: Cpu,
    /// Start (clipped to the window).
    pub start_ns: Ts,
    /// End (clipped to the window).
    pub end_ns: Ts,
    /// Task id (name in [`FindingWindow::tasks`]).
    pub pid: Tid,
    /// The task was running when the CPU's first event was recorded: the slice starts at
    /// that event, not at a switch-in (timehist gives such a run no length).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub before_trace: bool,
}

/// How busy one CPU was across a window, in equal bins: drawn where the window holds more
/// run slices than the cap, so that what the cap left out still shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuDensity {
    /// CPU.
    pub cpu: Cpu,
    /// Width of a bin, ns (the window's length / the number of bins, rounded up).
    pub bin_ns: u64,
    /// Busy share of each bin (‰ of the bin a task other than idle ran), from the window's
    /// start.
    pub busy_permille: Vec<u16>,
}

/// What one of a finding's tasks was doing over a span of its window, from the scheduler
/// state machine (the one `timehist` and the detectors follow): `running`, `runnable`,
/// `sleeping` (S), `blocked` (D), `dead`, `unknown` (before its first event).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStateSpan {
    /// Task id.
    pub pid: Tid,
    /// The state's name.
    pub state: String,
    /// CPU it ran on (running only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    /// Start (clipped to the window).
    pub start_ns: Ts,
    /// End (clipped to the window).
    pub end_ns: Ts,
}

impl TaskStateSpan {
    /// The state of a span that stands for several, each shorter than the resolution it
    /// was drawn at: the task changed state faster than a track can show.
    pub const MIXED: &'static str = "mixed";

    /// Takes `next` (the same task's following span) into this one when both are shorter
    /// than `resolution_ns` and touch: the span then covers both, as [`Self::MIXED`] when
    /// their states differ. False (nothing changed) otherwise.
    pub fn absorb(&mut self, next: &TaskStateSpan, resolution_ns: u64) -> bool {
        let parts = (next.pid, next.state.as_str(), next.cpu);
        self.absorb_parts(parts, (next.start_ns, next.end_ns), resolution_ns)
    }

    /// [`TaskStateSpan::absorb`] of the span `(pid, state, cpu)` over `[start, end)`, given
    /// by its parts (no span need be built for one that merges).
    pub fn absorb_parts(
        &mut self,
        (pid, state, cpu): (Tid, &str, Option<Cpu>),
        (start, end): (Ts, Ts),
        resolution_ns: u64,
    ) -> bool {
        let short = |a: Ts, b: Ts| b.saturating_sub(a) < resolution_ns;
        if self.pid != pid
            || self.end_ns != start
            || !short(self.start_ns, self.end_ns)
            || !short(start, end)
        {
            return false;
        }
        self.end_ns = end;
        if (self.state != state || self.cpu != cpu) && self.state != Self::MIXED {
            self.state = Self::MIXED.to_string();
            self.cpu = None;
        }
        true
    }

    /// Merges the spans (sorted by task, then time) of a window `window_ns` long so that a
    /// task's track has about `2 × per_task` spans at most ([`TaskStateSpan::absorb`] at a
    /// resolution of `window_ns / per_task`); returns how many spans were merged away.
    pub fn coarsen(spans: &mut Vec<TaskStateSpan>, window_ns: u64, per_task: usize) -> u64 {
        let resolution = window_ns / per_task.max(1) as u64;
        let before = spans.len();
        let mut out: Vec<TaskStateSpan> = Vec::with_capacity(before);
        for s in spans.drain(..) {
            let absorbed = out.last_mut().is_some_and(|l| l.absorb(&s, resolution));
            if !absorbed {
                out.push(s);
            }
        }
        *spans = out;
        (before - spans.len()) as u64
    }
}

/// A task runnable but not running, from its wakeup (or preemption) until it ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnableWait {
    /// Task id.
    pub pid: Tid,
    /// CPU it waited for (where it was switched in, or its wakeup target when still waiting).
    pub cpu: Cpu,
    /// Start (clipped to the window).
    pub start_ns: Ts,
    /// End (clipped to the window).
    pub end_ns: Ts,
    /// True when the task was still waiting at the window's end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open: bool,
    /// The longest wait in the window of one of the finding's own tasks: always drawn,
    /// past the item cap and the page's size bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub subject: bool,
}

/// A wakeup: `waker_pid` (running on `cpu`) woke `wakee_pid` towards `target_cpu`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeupMark {
    /// Event time.
    pub ts_ns: Ts,
    /// CPU the wakeup was issued on.
    pub cpu: Cpu,
    /// Task running when the wakeup was issued (0: idle / interrupt).
    pub waker_pid: Tid,
    /// Task woken.
    pub wakee_pid: Tid,
    /// CPU the task was queued on, when recorded.
    pub target_cpu: Option<Cpu>,
}

/// A text the traced system wrote into the trace: a `trace_marker` line (`ftrace:print`)
/// or a kernel `trace_printk` (`ftrace:bprint`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextMark {
    /// Event time.
    pub ts_ns: Ts,
    /// CPU it was written on.
    pub cpu: Cpu,
    /// Task that wrote it.
    pub pid: Tid,
    /// `print` or `bprint`.
    pub event: String,
    /// The text (cut to [`TextMark::MAX_CHARS`] characters).
    pub text: String,
}

impl TextMark {
    /// Longest text kept.
    pub const MAX_CHARS: usize = 200;
}

/// A task moved from one CPU's runqueue to another's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrationMark {
    /// Event time.
    pub ts_ns: Ts,
    /// Task id.
    pub pid: Tid,
    /// Source CPU.
    pub from_cpu: Cpu,
    /// Destination CPU.
    pub to_cpu: Cpu,
}

/// A block request from `block_rq_issue` to `block_rq_complete` (matched by device and
/// sector), clipped to its window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockRequest {
    /// Device number as the kernel encodes it (`major << 20 | minor`).
    pub dev: u64,
    /// First sector.
    pub sector: u64,
    /// Sectors (512 bytes).
    pub nr_sector: u64,
    /// Operation flags (`R`, `WS`, …).
    pub rwbs: String,
    /// CPU that issued it.
    pub cpu: Cpu,
    /// Issue time (clipped to the window).
    pub start_ns: Ts,
    /// Completion time (clipped to the window).
    pub end_ns: Ts,
    /// True when not completed by the window's end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open: bool,
}

/// A task's name as seen in a window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowTask {
    /// Task id.
    pub pid: Tid,
    /// Last name seen.
    pub comm: String,
}

/// How many items of each kind a window left out once it reached its cap.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Omitted {
    /// Run slices.
    pub slices: u64,
    /// Runnable waits.
    pub waits: u64,
    /// Wakeups.
    pub wakeups: u64,
    /// Migrations.
    pub migrations: u64,
    /// Block requests.
    #[serde(default)]
    pub requests: u64,
    /// Text marks.
    #[serde(default)]
    pub markers: u64,
    /// Task-state spans merged into `mixed` ones (each shorter than the window's
    /// resolution): summarized, not dropped.
    #[serde(default)]
    pub task_states: u64,
}

impl Omitted {
    /// True when nothing was left out.
    pub fn is_empty(&self) -> bool {
        self.slices == 0
            && self.waits == 0
            && self.wakeups == 0
            && self.migrations == 0
            && self.requests == 0
            && self.markers == 0
            && self.task_states == 0
    }
}

/// The activity around one finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingWindow {
    /// Index of the finding in `Report::findings`.
    pub finding: usize,
    /// Window start (the finding's start minus the margin).
    pub start_ns: Ts,
    /// Window end (the finding's end plus the margin).
    pub end_ns: Ts,
    /// CPUs with activity in the window or named by the finding, ascending.
    pub cpus: Vec<Cpu>,
    /// Names of the tasks appearing in the window.
    pub tasks: Vec<WindowTask>,
    /// Run slices, by end time.
    pub slices: Vec<RunSlice>,
    /// Runnable waits, by end time.
    pub waits: Vec<RunnableWait>,
    /// Wakeups, by time.
    pub wakeups: Vec<WakeupMark>,
    /// Migrations, by time.
    pub migrations: Vec<MigrationMark>,
    /// Block requests (block inputs only), by completion time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<BlockRequest>,
    /// Texts the system wrote into the trace (trace_marker, trace_printk), by time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub markers: Vec<TextMark>,
    /// The states of the finding's own tasks over the window, per task in time order
    /// (they tile the window: one track per task under the CPU lanes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_states: Vec<TaskStateSpan>,
    /// Per CPU, how busy it was across the window (only when run slices were capped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub density: Vec<CpuDensity>,
    /// Items left out after the cap.
    pub omitted: Omitted,
}

/// Runnable-wait durations of one task over the whole analyzed trace, in log2 buckets:
/// `buckets[i]` counts waits `d` with `2^i ≤ d < 2^(i+1)` ns (`buckets[0]` also holds 0 ns).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitHistogram {
    /// Task id.
    pub pid: Tid,
    /// Name.
    pub comm: String,
    /// Waits counted.
    pub waits: u64,
    /// Longest wait.
    pub max_ns: u64,
    /// Counts per log2 bucket (trailing empty buckets trimmed).
    pub buckets: Vec<u64>,
}

impl WaitHistogram {
    /// Bucket index of a duration: `floor(log2(d))`, 0 for 0 and 1 ns.
    pub fn bucket_of(d: u64) -> usize {
        if d <= 1 {
            0
        } else {
            (63 - d.leading_zeros()) as usize
        }
    }

    /// Counts one wait.
    pub fn add(&mut self, d: u64) {
        let b = Self::bucket_of(d);
        if self.buckets.len() <= b {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] += 1;
        self.waits += 1;
        self.max_ns = self.max_ns.max(d);
    }
}

/// All windows of a report, with what was left out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingWindows {
    /// Margin added on each side of a finding's window.
    pub margin_ns: u64,
    /// Cap on items of each kind per window.
    pub max_items: usize,
    /// Windows, in finding order.
    pub windows: Vec<FindingWindow>,
    /// Wait histograms of the tasks named by findings.
    pub histograms: Vec<WaitHistogram>,
    /// Findings without a window (size budget, or window count cap).
    pub omitted_windows: usize,
    /// Why windows are missing, when they are (e.g. stdin cannot be re-read).
    pub note: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_buckets() {
        assert_eq!(WaitHistogram::bucket_of(0), 0);
        assert_eq!(WaitHistogram::bucket_of(1), 0);
        assert_eq!(WaitHistogram::bucket_of(2), 1);
        assert_eq!(WaitHistogram::bucket_of(3), 1);
        assert_eq!(WaitHistogram::bucket_of(1024), 10);
        assert_eq!(WaitHistogram::bucket_of(2047), 10);
        let mut h = WaitHistogram {
            pid: 1,
            comm: "a".into(),
            waits: 0,
            max_ns: 0,
            buckets: vec![],
        };
        h.add(1_000_000); // 2^19 = 524288 ≤ 1e6 < 2^20
        assert_eq!(h.buckets.len(), 20);
        assert_eq!(h.buckets[19], 1);
        assert_eq!(h.max_ns, 1_000_000);
    }
}
