//! stallscope exporters: the normalized event stream (and findings) written as a Perfetto
//! protobuf trace ([`perfetto::PerfettoWriter`]) or as Chrome trace-event JSON
//! ([`chrome_json::ChromeJsonWriter`]), for viewing in ui.perfetto.dev, chrome://tracing
//! or any viewer of those formats.
//!
//! Both writers stream: feed events in time order with `event`, then `finish` with the
//! findings. Memory stays bounded by one bundle per CPU (Perfetto) or one open slice per
//! CPU (Chrome) plus a table of task names. User documentation: `docs/export.md`.

pub mod chrome_json;
pub mod lanes;
pub mod perfetto;
pub mod prev_state;
pub mod protozero;
pub mod tasks;

use std::collections::BTreeMap;

/// What an export wrote, for the command's summary and for tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Input events by name, as they were handled (including the ones that only fed
    /// metadata: `task_comm`, `lost_events`, and Chrome's events not drawn).
    pub events: BTreeMap<String, u64>,
    /// Bytes written.
    pub bytes: u64,
    /// Perfetto: packets written.
    pub packets: u64,
    /// Perfetto: `FtraceEventBundle`s written.
    pub bundles: u64,
    /// Perfetto: bundles flagged `lost_events`.
    pub lost_bundles: u64,
    /// Perfetto: bundles started early because an event was older than the bundle's last.
    pub unsorted_splits: u64,
    /// Perfetto: switch states with a letter the kernel's raw table cannot express.
    pub lossy_states: u64,
    /// Chrome JSON: trace events written (all phases).
    pub trace_events: u64,
    /// Findings written.
    pub findings: u64,
    /// Tasks seen.
    pub tasks: u64,
    /// Perfetto: tasks left out of the ProcessTree because their process (tgid) is unknown.
    pub tasks_without_tgid: u64,
}

impl ExportStats {
    fn count(&mut self, name: &str) {
        match self.events.get_mut(name) {
            Some(n) => *n += 1,
            None => {
                self.events.insert(name.to_string(), 1);
            }
        }
    }
}
