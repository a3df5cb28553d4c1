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
pub mod recorder;
pub mod registry;
pub mod stacks;

#[cfg(test)]
mod testutil;

pub use engine::{Context, Engine};
pub use params::{ParamInfo, ParamUnit, Params};

use stallscope_model::{Event, Finding, Profile, SystemContext};
use stallscope_timeline::{Transition, WakeupSelector};

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

/// [`Detector::on_run`]'s calls for the transitions of the event `ev` at index `k` of the
/// run: those of `transitions` from `next` on that name `k`.
#[inline(always)]
fn feed_transitions<D: Detector + ?Sized>(
    d: &mut D,
    (k, ev): (usize, &Event),
    transitions: &[(u32, Transition)],
    next: &mut usize,
    skip_quiet: bool,
) {
    while let Some((at, t)) = transitions.get(*next) {
        if *at as usize != k {
            break;
        }
        if !(skip_quiet && engine::is_quiet(t)) {
            d.on_transition(t, ev);
        }
        *next += 1;
    }
}

/// A pathology detector. The engine feeds it runs of events ([`Detector::on_run`]): per
/// event, in order, `on_event` (if its kind is one of [`Detector::event_kinds`]), then
/// `on_transition` for each transition the timeline made of that event. The timeline
/// applies a whole run before the detectors see it, so a detector keeps whatever state it
/// needs itself; the timeline is at hand (through [`Context`]) in `finish`, once at the end.
pub trait Detector {
    /// The detector's description.
    fn info(&self) -> &'static DetectorInfo;
    /// The event kinds `on_event` looks at ([`engine::kind_bit`] bits); it is not called
    /// for the others. Default: every kind.
    fn event_kinds(&self) -> u32 {
        u32::MAX
    }
    /// Whether `on_transition` looks at transitions (it is not called otherwise).
    /// Default: true.
    fn wants_transitions(&self) -> bool {
        true
    }
    /// Whether `on_transition` changes nothing for a *quiet* transition, so it need not be
    /// called with one: a [`Transition::State`] whose `from` and `to` are each running,
    /// sleeping, blocked or dead (neither is runnable nor unknown), such as a task that
    /// blocks at a switch-out. A task's first transition starts from unknown, so it is
    /// never quiet. Default: false.
    fn ignores_quiet_transitions(&self) -> bool {
        false
    }
    /// The system context recorded with the inputs (`stallscope record`: policies, nice,
    /// cgroup weights, affinity, scheduler knobs), before the first event; not called when
    /// no input carries one.
    fn on_system(&mut self, _system: &SystemContext) {}
    /// The wakeup rule the engine's timeline uses for these inputs (which of
    /// `sched_waking` / `sched_wakeup` counts), before the first event: a detector that
    /// follows wakeups itself must use this one, never its own.
    fn use_wakeup_rule(&mut self, _rule: WakeupSelector) {}
    /// A raw event.
    fn on_event(&mut self, _ev: &Event) {}
    /// A timeline transition caused by `ev`.
    fn on_transition(&mut self, _t: &Transition, _ev: &Event) {}
    /// A run of events and the transitions they caused: `on_event` and `on_transition`
    /// as described on the trait. The default is that loop, compiled for each detector
    /// (its calls are direct, and one call a run replaces one a detector and event).
    fn on_run(&mut self, run: &engine::Run<'_>) {
        let (kinds, wants, skip_quiet) = match run.everything {
            true => (u32::MAX, true, false),
            false => (
                self.event_kinds(),
                self.wants_transitions(),
                self.ignores_quiet_transitions() && !run.quiet_dropped,
            ),
        };
        let (events, bits, transitions) = (run.events, run.bits, run.transitions);
        if !wants {
            for (ev, &bit) in events.iter().zip(bits) {
                if kinds & bit != 0 {
                    self.on_event(ev);
                }
            }
            return;
        }
        let mut next = 0; // the next transition
        if kinds == u32::MAX {
            // every kind: the bits need not be read
            for (k, ev) in events.iter().enumerate() {
                self.on_event(ev);
                feed_transitions(self, (k, ev), transitions, &mut next, skip_quiet);
            }
            return;
        }
        for (k, (ev, &bit)) in events.iter().zip(bits).enumerate() {
            if kinds & bit != 0 {
                self.on_event(ev);
            }
            feed_transitions(self, (k, ev), transitions, &mut next, skip_quiet);
        }
    }
    /// A whole CPU profile (profile detectors, whose `needs` name [`PROFILE_NEED`]).
    fn on_profile(&mut self, _p: &Profile, _cx: &Context<'_>) {}
    /// The findings, after the last event.
    fn finish(self: Box<Self>, cx: &Context<'_>) -> Vec<Finding>;
}
