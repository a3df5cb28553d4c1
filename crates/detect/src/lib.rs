//! stallscope detectors: each one watches the scheduler timeline for one pathology and
//! turns what it sees into [`Finding`](stallscope_model::Finding)s with evidence.
//!
//! * [`Detector`]: the trait every detector implements (`on_event`, `on_transition`,
//!   `finish`), described by a static [`DetectorInfo`] (id, summary, markdown
//!   explanation, needed events, thresholds with defaults).
//! * [`registry`]: the list of detectors; [`registry::build`] makes one with its settings.
//! * [`engine::Engine`]: drives the timeline and the selected detectors over one time-ordered
//!   event stream, then collects findings, data quality and capabilities.
//! * [`detectors`]: one module per detector (`runqueue-starvation`, `wakeup-ping-pong`,
//!   `idle-while-runnable`).
//!
//! Detectors never print, keep only per-CPU and per-live-task state (plus per-finding
//! aggregates), and use integer nanoseconds throughout.

pub mod detectors;
pub mod engine;
pub mod evidence;
pub mod hist;
pub mod params;
pub mod per_task;
pub mod registry;

#[cfg(test)]
mod testutil;

pub use engine::{Context, Engine};
pub use params::{ParamInfo, ParamUnit, Params};

use stallscope_model::{Event, Finding, Profile};
use stallscope_timeline::Transition;

/// The pseudo event name a profile detector lists in `needs`: a CPU profile with call stacks
/// (run through [`Detector::on_profile`], not the event stream).
pub const PROFILE_NEED: &str = "cpu-profile";

/// Static description of a detector.
#[derive(Debug)]
pub struct DetectorInfo {
    /// Stable kebab-case id (`runqueue-starvation`).
    pub id: &'static str,
    /// One line: what it finds.
    pub summary: &'static str,
    /// Markdown: what it finds, why it matters, how to confirm, limits, severity rules.
    pub explanation: &'static str,
    /// Events required: every inner list must have at least one of its names present.
    pub needs: &'static [&'static [&'static str]],
    /// Events that enrich findings when present (never required).
    pub optional: &'static [&'static str],
    /// A command recording everything the detector needs.
    pub record_command: &'static str,
    /// Thresholds, settable with `--set ID.NAME=VALUE`.
    pub params: &'static [ParamInfo],
}

impl DetectorInfo {
    /// The first unmet requirement, as a sentence, given the event names available.
    pub fn unmet(&self, has: &dyn Fn(&str) -> bool) -> Option<String> {
        let missing: Vec<String> = self
            .needs
            .iter()
            .filter(|alts| !alts.iter().any(|n| has(n)))
            .map(|alts| alts.join(" or "))
            .collect();
        (!missing.is_empty())
            .then(|| format!("the inputs have no {} events", missing.join(", no ")))
    }
}

/// A pathology detector. Call order per event (see [`engine::Engine::process`]):
/// `on_event` with the timeline in its state *before* the event, then `on_transition` for
/// each transition the event caused, with the timeline *after* it. `finish` once at the end.
pub trait Detector {
    /// The detector's description.
    fn info(&self) -> &'static DetectorInfo;
    /// The event kinds `on_event` looks at ([`engine::kind_bit`] bits); the engine does not
    /// call it for the others. Default: every kind.
    fn event_kinds(&self) -> u32 {
        u32::MAX
    }
    /// Whether `on_transition` looks at transitions (the engine does not call it otherwise).
    /// Default: true.
    fn wants_transitions(&self) -> bool {
        true
    }
    /// A raw event (before the timeline applied it).
    fn on_event(&mut self, _ev: &Event, _cx: &Context<'_>) {}
    /// A timeline transition caused by `ev`.
    fn on_transition(&mut self, _t: &Transition, _ev: &Event, _cx: &Context<'_>) {}
    /// A whole CPU profile (profile detectors, whose `needs` name [`PROFILE_NEED`]).
    fn on_profile(&mut self, _p: &Profile, _cx: &Context<'_>) {}
    /// The findings, after the last event.
    fn finish(self: Box<Self>, cx: &Context<'_>) -> Vec<Finding>;
}
