//! [`Finding`]: one verdict of a detector — what was measured, on which CPUs, which tasks
//! played which role, and the events that prove it.
//!
//! JSON shape (field by field in `docs/report.schema.json`):
//!
//! ```text
//! {"detector":"runqueue-starvation","severity":"high",
//!  "title":"cyclictest (pid 12897) waited 98.766 ms runnable on CPU 1 while stress-ng-cpu (pid 12892) ran 25 slices",
//!  "window":{"start_ns":595127047000,"end_ns":595225813000},"cpus":[1],
//!  "tasks":[{"pid":12897,"comm":"cyclictest","role":"victim"},
//!           {"pid":12892,"comm":"stress-ng-cpu","role":"culprit","measures":{"run_ns":98000000,"slices":25}}],
//!  "measures":{"worst_wait_ns":98766000,"waits":3},
//!  "evidence":[{"ts_ns":595127047000,"source":"starve.perf.data:0x1a2b0","text":"595127047000 1 12897 sched_switch …"}],
//!  "hint":"…"}
//! ```
//!
//! Measures are integers whose name ends in their unit (`_ns`, `_per_s`, `_permille`, or a
//! plain count); never floating point.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Cpu, Tid, Ts};

/// How urgent a finding is. Ordered: `Low < Medium < High`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum FindingSeverity {
    /// Worth knowing; rarely the cause of a user-visible stall.
    Low,
    /// Likely to cost latency or throughput.
    Medium,
    /// A stall a user would notice; fix first.
    High,
}

impl FindingSeverity {
    /// `high`, `medium`, `low`.
    pub fn name(self) -> &'static str {
        match self {
            FindingSeverity::Low => "low",
            FindingSeverity::Medium => "medium",
            FindingSeverity::High => "high",
        }
    }

    /// Inverse of [`FindingSeverity::name`].
    pub fn from_name(s: &str) -> Option<FindingSeverity> {
        match s {
            "low" => Some(FindingSeverity::Low),
            "medium" => Some(FindingSeverity::Medium),
            "high" => Some(FindingSeverity::High),
            _ => None,
        }
    }
}

impl fmt::Display for FindingSeverity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The time span a finding covers, trace clock ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Window {
    /// Start.
    pub start_ns: Ts,
    /// End (≥ start).
    pub end_ns: Ts,
}

/// A task named by a finding, with its role (`victim`, `culprit`, `waker`, `partner`, …).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FindingTask {
    /// Task id.
    pub pid: Tid,
    /// Name.
    pub comm: String,
    /// Role in the finding: `victim`, `culprit`, `partner`, `waker`, `issuer`, …
    pub role: String,
    /// Per-task measures (`run_ns`, `slices`, `prio`, …); omitted when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub measures: BTreeMap<String, i64>,
}

/// One supporting event.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Evidence {
    /// Event time.
    pub ts_ns: Ts,
    /// `path:LINE` (text inputs, 1-based) or `path:0xOFFSET` (binary inputs, byte offset).
    pub source: String,
    /// The original trace line (text inputs) or the normalized `dump` line of the event.
    pub text: String,
    /// The stack recorded with the event (perf `-g`, `ftrace:kernel_stack`), leaf first:
    /// function names where the kernel symbols are known, else `0x` addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<String>,
    /// What the stack says the event was: `bash (1234) switched out D in io_schedule ←
    /// …`, `kworker/0:1 (12) woke fio (77) from aio_complete_rw ← …`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
}

/// One verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    /// Detector id (kebab-case, stable: `runqueue-starvation`).
    pub detector: String,
    /// By the detector's documented rules (`stallscope explain ID`).
    pub severity: FindingSeverity,
    /// The measured fact with units and identities.
    pub title: String,
    /// When.
    pub window: Window,
    /// CPUs involved, ascending.
    pub cpus: Vec<Cpu>,
    /// Tasks involved with their roles.
    pub tasks: Vec<FindingTask>,
    /// Integer measures; the name ends in its unit (`_ns`, `_per_s`, `_permille`, `_x1000`)
    /// or is a count.
    pub measures: BTreeMap<String, i64>,
    /// Supporting events, in time order.
    pub evidence: Vec<Evidence>,
    /// How to confirm or what to try.
    pub hint: String,
    /// Why it happened, when the detector concludes a cause; its text is also the hint's
    /// first sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<FindingCause>,
}

/// The cause a detector concludes for a finding: a stable kind (snake_case, never renamed) and
/// a sentence with the numbers that support it (the first sentence of the hint, too).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FindingCause {
    /// Stable kind: `higher_class`, `nice_weight`, `cgroup_weight`, `throttled`, `affinity`,
    /// `interrupt_time`, `not_explained_by_weights`, `context_not_recorded`, `missing_events`,
    /// `saturation` (scheduler findings); `iosched_preemption`, `iosched_not_served`,
    /// `sync_over_async`, `context_not_recorded` (`dispatch-starvation`).
    pub kind: String,
    /// One sentence with the supporting numbers.
    pub text: String,
}
