//! [`Engine`]: runs the timeline and the selected detectors over one time-ordered event
//! stream.
//!
//! Per event: every detector's `on_event` (timeline still in its state before the event),
//! then the timeline applies the event, then every detector's `on_transition` for each
//! transition it produced. Events outside the optional time range are not analyzed.
//! At the end, each detector whose needed events are absent from the inputs (neither declared
//! by a header nor seen) is reported as skipped instead of contributing findings.

use std::collections::BTreeSet;

use rustc_hash::FxHashSet;
use stallscope_model::{
    Comm, DataQuality, Event, EventKind, Finding, SystemContext, TaskContext, Tid, TraceMeta, Ts,
};
use stallscope_timeline::{Timeline, Transition, WakeupSelector};

use crate::Detector;

/// What detectors can look at besides the event.
pub struct Context<'a> {
    /// The scheduler state machine (task names, CPU currents, task states).
    pub timeline: &'a Timeline,
    /// Input paths, by input index (for evidence sources).
    pub paths: &'a [String],
    /// System context recorded with the trace, when any.
    pub system: Option<&'a SystemContext>,
    /// `/proc/kallsyms` text carried by an input (trace.dat KALLSYMS), when any.
    pub kallsyms: Option<&'a str>,
}

impl Context<'_> {
    /// The task's best known name (empty when never named).
    pub fn comm(&self, tid: Tid) -> Comm {
        let tasks = self.timeline.tasks();
        tasks.find(tid).map_or(Comm::EMPTY, |i| tasks.get(i).comm)
    }

    /// Recorded scheduling attributes of `pid`, when the trace carries system context.
    pub fn task_context(&self, pid: Tid) -> Option<&TaskContext> {
        self.system?.tasks.iter().find(|t| t.pid == pid)
    }
}

/// The outcome of one detector.
pub struct DetectorOutcome {
    /// Detector id.
    pub id: &'static str,
    /// Findings, or why the detector was skipped.
    pub result: Result<Vec<Finding>, String>,
    /// Record command that would satisfy it.
    pub record_command: &'static str,
}

/// Everything an analysis produced.
pub struct EngineOutput {
    /// Per detector, in selection order.
    pub outcomes: Vec<DetectorOutcome>,
    /// Timeline data-quality counters.
    pub quality: DataQuality,
    /// Event names available (declared or seen), sorted, without system prefix.
    pub events: Vec<String>,
    /// Events analyzed.
    pub events_read: u64,
    /// First analyzed timestamp.
    pub first_ts: Option<Ts>,
    /// Last analyzed timestamp.
    pub last_ts: Option<Ts>,
}

/// Runs detectors over events.
pub struct Engine {
    timeline: Timeline,
    detectors: Vec<Box<dyn Detector>>,
    buf: Vec<Transition>,
    paths: Vec<String>,
    system: Option<SystemContext>,
    kallsyms: Option<std::sync::Arc<str>>,
    declared: BTreeSet<String>,
    seen_native: BTreeSet<&'static str>,
    seen_mask: u32,
    seen_generic: FxHashSet<String>,
    time: Option<(Ts, Ts)>,
    events: u64,
    first: Option<Ts>,
    last: Option<Ts>,
}

/// The name of a scheduler event the detectors may need (side-band kinds excluded).
fn native_name(k: &EventKind) -> Option<&'static str> {
    match k {
        EventKind::Lost { .. } | EventKind::TaskComm { .. } => None,
        k => k.static_name(),
    }
}

/// The detectors' view of an engine's state: borrows only the fields it names, so the
/// detector list stays mutably borrowable beside it.
macro_rules! context {
    ($engine:expr) => {
        Context {
            timeline: &$engine.timeline,
            paths: &$engine.paths,
            system: $engine.system.as_ref(),
            kallsyms: $engine.kallsyms.as_deref(),
        }
    };
}

/// A small distinct number per native kind (for the seen-names bit mask).
fn native_index(k: &EventKind) -> u32 {
    match k {
        EventKind::Switch(_) => 0,
        EventKind::Waking(_) => 1,
        EventKind::Wakeup(_) => 2,
        EventKind::WakeupNew(_) => 3,
        EventKind::Migrate(_) => 4,
        EventKind::Fork { .. } => 5,
        EventKind::Exit(_) => 6,
        EventKind::Exec { .. } => 7,
        EventKind::StatRuntime(_) => 8,
        // one bit per block action: each has its own tracepoint name
        EventKind::Block(b) => 10 + b.action as u32,
        _ => 9,
    }
}

impl Engine {
    /// An engine for inputs described by `metas` (paths, declared events, system context).
    pub fn new(detectors: Vec<Box<dyn Detector>>, metas: &[&TraceMeta]) -> Engine {
        let declared = metas
            .iter()
            .flat_map(|m| m.declared_events.iter())
            .map(|e| e.rsplit(':').next().unwrap_or(e).to_string())
            .collect();
        Engine {
            timeline: Timeline::new(WakeupSelector::preferring_waking(
                WakeupSelector::declared_in(metas.iter().copied()),
            )),
            detectors,
            buf: Vec::new(),
            paths: metas.iter().map(|m| m.path.clone()).collect(),
            system: metas.iter().find_map(|m| m.system_context.clone()),
            kallsyms: metas.iter().find_map(|m| m.kallsyms.clone()),
            declared,
            seen_native: BTreeSet::new(),
            seen_mask: 0,
            seen_generic: FxHashSet::default(),
            time: None,
            events: 0,
            first: None,
            last: None,
        }
    }

    /// Analyze only events with `start <= ts <= end`.
    pub fn set_time_range(&mut self, start: Ts, end: Ts) {
        self.time = Some((start, end));
    }

    /// Feeds one event.
    pub fn process(&mut self, ev: &Event) {
        if let Some((a, b)) = self.time {
            if ev.ts < a || ev.ts > b {
                return; // outside the requested range: not part of the analysis
            }
        }
        match native_name(&ev.kind) {
            Some(n) => {
                let bit = 1u32 << native_index(&ev.kind);
                if self.seen_mask & bit == 0 {
                    self.seen_mask |= bit;
                    self.seen_native.insert(n);
                }
            }
            None => {
                if let EventKind::Generic(g) = &ev.kind {
                    if !self.seen_generic.contains(&g.name) {
                        self.seen_generic.insert(g.name.clone());
                    }
                }
            }
        }
        if !matches!(ev.kind, EventKind::TaskComm { .. }) {
            self.events += 1;
            self.first.get_or_insert(ev.ts);
            self.last = Some(ev.ts);
        }
        {
            let cx = context!(self);
            for d in &mut self.detectors {
                d.on_event(ev, &cx);
            }
        }
        let buf = &mut self.buf;
        buf.clear();
        self.timeline.process(ev, &mut |t| buf.push(t));
        if self.buf.is_empty() {
            return;
        }
        let cx = context!(self);
        for d in &mut self.detectors {
            for t in &self.buf {
                d.on_transition(t, ev, &cx);
            }
        }
    }

    /// Feeds a whole CPU profile to every detector (`on_profile`); detectors that need
    /// [`crate::PROFILE_NEED`] are no longer skipped.
    pub fn process_profile(&mut self, p: &stallscope_model::Profile) {
        self.seen_generic.insert(crate::PROFILE_NEED.to_string());
        let cx = context!(self);
        for d in &mut self.detectors {
            d.on_profile(p, &cx);
        }
    }

    /// Event names available so far (declared or seen).
    pub fn available_events(&self) -> Vec<String> {
        let mut all: BTreeSet<String> = self.declared.clone();
        all.extend(self.seen_native.iter().map(|s| s.to_string()));
        all.extend(self.seen_generic.iter().cloned());
        all.into_iter().collect()
    }

    /// Ends the analysis.
    pub fn finish(self) -> EngineOutput {
        let events = self.available_events();
        let has = |n: &str| events.iter().any(|e| e == n);
        let cx = context!(self);
        let outcomes = self
            .detectors
            .into_iter()
            .map(|d| {
                let info = d.info();
                let result = match info.unmet(&has) {
                    Some(reason) => Err(reason),
                    None => Ok(d.finish(&cx)),
                };
                DetectorOutcome {
                    id: info.id,
                    result,
                    record_command: info.record_command,
                }
            })
            .collect();
        EngineOutput {
            outcomes,
            quality: self.timeline.quality().clone(),
            events,
            events_read: self.events,
            first_ts: self.first,
            last_ts: self.last,
        }
    }
}
