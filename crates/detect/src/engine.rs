//! [`Engine`]: runs the timeline and the selected detectors over one time-ordered event
//! stream.
//!
//! Per run of events ([`Engine::process_run`]; [`Engine::process`] is a run of one): the
//! timeline applies every event of the run, keeping the transitions each one produced, then
//! each detector gets the run ([`crate::Detector::on_run`]: per event, `on_event`, then
//! `on_transition` for each of that event's transitions). A detector keeps its own state and
//! never looks at the timeline per event, so how the stream is cut into runs changes nothing;
//! one call per detector and run (instead of per event and transition) is what makes runs
//! worth it. Quiet transitions ([`is_quiet`]) are not kept when no detector wants them.
//! Events outside the optional time range are not analyzed.
//! At the end, each detector whose needed events are absent from the inputs (neither declared
//! by a header nor seen) is reported as skipped instead of contributing findings.
//!
//! Parking ([`Engine::park_unmeetable`]): when every input declares all the events it holds
//! (file-mode perf.data: one attr per event), a detector whose needs the declared names do not
//! meet will be skipped, so it gets no events at all. Whether that held is checked at the end
//! ([`Engine::parking_failed`]): an event name outside the declared ones that meets a parked
//! detector's needs means the analysis must be run again without parking.

use std::collections::BTreeSet;

use rustc_hash::FxHashSet;
use stallscope_model::{
    Comm, DataQuality, Event, EventKind, Finding, InputFormat, Problem, SystemContext, TaskContext,
    Tid, TraceMeta, Ts,
};
use stallscope_timeline::{Timeline, Transition};

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
    /// The recording command lines the inputs carry (perf.data `cmdline`), one per input
    /// that has one.
    pub cmdlines: &'a [String],
    /// Stacks recorded with the events, by event source.
    pub stacks: &'a crate::stacks::StackTable,
    /// Kernel frame names for those stacks (empty until the engine finishes).
    pub symbolizer: &'a crate::stacks::Symbolizer,
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
    /// Which tasks are the recorder's (their findings are left out unless
    /// `include_recorder`).
    recorder: crate::recorder::RecorderTasks,
    include_recorder: bool,
    /// The detectors fed with events.
    detectors: Vec<Box<dyn Detector>>,
    /// The detectors' interests were asked (see [`Engine::interests`]).
    interests_known: bool,
    /// No detector wants quiet transitions ([`is_quiet`]): the timeline's are not kept.
    drop_quiet: bool,
    /// Test only: every detector gets every event and transition.
    everything: bool,
    /// The run being fed: each event's [`kind_bit`].
    bits: Vec<u32>,
    /// The run being fed: its transitions, with the index of the event that caused each.
    run_transitions: Vec<(u32, Transition)>,
    /// Selection position of each of `detectors` (outcomes keep the selection order).
    positions: Vec<usize>,
    /// Parked detectors (fed nothing), with their selection positions.
    parked: Vec<(usize, Box<dyn Detector>)>,
    /// Every input declares all the events it holds (see [`Engine::park_unmeetable`]).
    declared_complete: bool,
    paths: Vec<String>,
    system: Option<SystemContext>,
    kallsyms: Option<std::sync::Arc<str>>,
    /// Whose rule names an address several symbols of `kallsyms` share (its input's peer).
    kallsyms_aliases: stallscope_model::SymbolAliases,
    /// Stacks recorded with scheduler events (see [`crate::stacks`]).
    stacks: crate::stacks::StackTable,
    /// Names of their kernel frames, made at [`Engine::finish`].
    symbolizer: crate::stacks::Symbolizer,
    /// Where kernel symbols come from when the inputs carry none and stacks were recorded
    /// ([`Engine::set_stack_symbols`]).
    stack_symbols: Option<StackSymbols>,
    /// Names user frames of the stacks ([`Engine::set_user_frame_names`]).
    user_frame_names: Option<UserFrameNames>,
    /// See [`Context::cmdlines`].
    cmdlines: Vec<String>,
    declared: BTreeSet<String>,
    seen_native: BTreeSet<&'static str>,
    seen_mask: u32,
    seen_generic: FxHashSet<String>,
    time: Option<(Ts, Ts)>,
    events: u64,
    first: Option<Ts>,
    last: Option<Ts>,
    /// CPU numbers at or above this are corrupt input: their events are skipped
    /// ([`Engine::cpu_limit_of`]).
    cpu_limit: u32,
    /// The engine's own data-quality counters (events skipped for their CPU numbers).
    dq: DataQuality,
    /// No detector was given (another product reads the events, e.g. an export without
    /// findings): the timeline is not run, the events are only counted.
    no_detectors: bool,
}

/// CPU limit when an input does not say how many CPUs it had: the kernel's largest
/// `CONFIG_NR_CPUS`.
pub const NR_CPUS_MAX: u32 = 8192;

/// The CPU numbers an event names (its own, a wakeup's target, a migration's two): the
/// largest, for the range check.
#[inline]
fn largest_cpu(ev: &Event) -> u32 {
    match &ev.kind {
        EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => {
            ev.cpu.max(w.target_cpu.unwrap_or(0))
        }
        EventKind::Migrate(m) => ev.cpu.max(m.orig_cpu).max(m.dest_cpu),
        _ => ev.cpu,
    }
}

/// The name of a scheduler event the detectors may need (side-band kinds excluded).
fn native_name(k: &EventKind) -> Option<&'static str> {
    match k {
        EventKind::Lost { .. } | EventKind::TaskComm { .. } | EventKind::Mapping(_) => None,
        k => k.static_name(),
    }
}

/// Loads a kernel symbol table (`/proc/kallsyms` text) for the stacks, or says why not.
pub type StackSymbols = Box<dyn FnOnce() -> Result<std::sync::Arc<str>, String> + Send>;

/// Names the `(task, user address)` frames of the stacks, with notes on those it cannot.
pub type UserFrameNames = Box<
    dyn FnOnce(&[(Tid, u64)]) -> (std::collections::HashMap<(Tid, u64), String>, DataQuality)
        + Send,
>;

/// The detectors' view of an engine's state: borrows only the fields it names, so the
/// detector list stays mutably borrowable beside it.
macro_rules! context {
    ($engine:expr) => {
        Context {
            timeline: &$engine.timeline,
            paths: &$engine.paths,
            system: $engine.system.as_ref(),
            kallsyms: $engine.kallsyms.as_deref(),
            cmdlines: &$engine.cmdlines,
            stacks: &$engine.stacks,
            symbolizer: &$engine.symbolizer,
        }
    };
}

/// One bit per event kind, for [`crate::Detector::event_kinds`] ([`kind`] names them).
pub fn kind_bit(k: &EventKind) -> u32 {
    match k {
        EventKind::Switch(_) => kind::SWITCH,
        EventKind::Waking(_) => kind::WAKING,
        EventKind::Wakeup(_) => kind::WAKEUP,
        EventKind::WakeupNew(_) => kind::WAKEUP_NEW,
        EventKind::Migrate(_) => kind::MIGRATE,
        EventKind::Fork { .. } => kind::FORK,
        EventKind::Exit(_) => kind::EXIT,
        EventKind::Exec { .. } => kind::EXEC,
        EventKind::StatRuntime(_) => kind::STAT_RUNTIME,
        EventKind::Lost { .. } => kind::LOST,
        EventKind::TaskComm { .. } | EventKind::Mapping(_) => kind::TASK_COMM,
        EventKind::Block(_) => kind::BLOCK,
        EventKind::Generic(_) => kind::GENERIC,
    }
}

/// The [`kind_bit`] of each [`EventKind`] variant.
pub mod kind {
    /// `Switch`.
    pub const SWITCH: u32 = 1 << 0;
    /// `Waking`.
    pub const WAKING: u32 = 1 << 1;
    /// `Wakeup`.
    pub const WAKEUP: u32 = 1 << 2;
    /// `WakeupNew`.
    pub const WAKEUP_NEW: u32 = 1 << 3;
    /// `Migrate`.
    pub const MIGRATE: u32 = 1 << 4;
    /// `Fork`.
    pub const FORK: u32 = 1 << 5;
    /// `Exit`.
    pub const EXIT: u32 = 1 << 6;
    /// `Exec`.
    pub const EXEC: u32 = 1 << 7;
    /// `StatRuntime`.
    pub const STAT_RUNTIME: u32 = 1 << 8;
    /// `Lost`.
    pub const LOST: u32 = 1 << 9;
    /// Side-band records: `TaskComm` and `Mapping` (not analyzed events).
    pub const TASK_COMM: u32 = 1 << 10;
    /// `Block`.
    pub const BLOCK: u32 = 1 << 11;
    /// `Generic`.
    pub const GENERIC: u32 = 1 << 12;
}

/// Sees each run of analyzed events with its transitions ([`Engine::process_run_observed`]).
pub type Observer<'o> = dyn FnMut(&Run<'_>) + 'o;

/// A run of events as detectors get it ([`crate::Detector::on_run`]).
pub struct Run<'a> {
    /// The events, in order.
    pub events: &'a [Event],
    /// Each event's [`kind_bit`].
    pub bits: &'a [u32],
    /// The transitions the timeline made of the events, in order, each with the index in
    /// `events` of the event that caused it. Quiet transitions ([`is_quiet`]) are left out
    /// when no detector wants them.
    pub transitions: &'a [(u32, Transition)],
    /// The model after the run (its tasks' states and names).
    pub timeline: &'a Timeline,
    /// Test only: every event and transition goes to every detector.
    pub everything: bool,
    /// `transitions` holds no quiet transition (no detector wants them): a detector that
    /// ignores them need not look.
    pub quiet_dropped: bool,
}

/// Whether `t` is a *quiet* transition (see [`crate::Detector::ignores_quiet_transitions`]):
/// a state change between two states that are each running, sleeping, blocked or dead —
/// but not the start of a repaired run (consumers of the CPU's runner follow it).
#[inline]
pub fn is_quiet(t: &Transition) -> bool {
    use stallscope_timeline::TaskState::{Runnable, Running, Unknown};
    match t {
        Transition::State { from, to, .. } => {
            !matches!(from, Runnable { .. } | Unknown)
                && !matches!(
                    to,
                    Runnable { .. } | Unknown | Running { repaired: true, .. }
                )
        }
        _ => false,
    }
}

/// [`native_index`] of the kinds without a native name (side-band, lost, generic).
const NOT_NATIVE: u32 = 9;

/// The [`kind_bit`]s of the scheduler kinds: each one's [`native_index`] is its bit's
/// position, so its seen-names bit is its kind bit.
const SCHED_KINDS: u32 = kind::SWITCH
    | kind::WAKING
    | kind::WAKEUP
    | kind::WAKEUP_NEW
    | kind::MIGRATE
    | kind::FORK
    | kind::EXIT
    | kind::EXEC
    | kind::STAT_RUNTIME;

/// A small distinct number per native kind (for the seen-names bit mask); [`NOT_NATIVE`]
/// for the others.
#[inline]
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
        _ => NOT_NATIVE,
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
        let system: Option<SystemContext> = metas.iter().find_map(|m| m.system_context.clone());
        let mut detectors = detectors;
        // the model of these inputs: its wakeup rule and the CPUs they record
        let timeline = Timeline::for_inputs(metas.iter().copied());
        let wakeups = timeline.wakeup_rule();
        for d in &mut detectors {
            d.use_wakeup_rule(wakeups);
            if let Some(s) = &system {
                d.on_system(s);
            }
        }
        Engine {
            no_detectors: detectors.is_empty(),
            recorder: crate::recorder::RecorderTasks::for_inputs(metas, system.as_ref()),
            include_recorder: false,
            timeline,
            positions: (0..detectors.len()).collect(),
            interests_known: false,
            drop_quiet: false,
            everything: false,
            bits: Vec::new(),
            run_transitions: Vec::new(),
            detectors,
            parked: Vec::new(),
            declared_complete: !metas.is_empty()
                && metas
                    .iter()
                    .all(|m| m.format == Some(InputFormat::PerfData)),
            paths: metas.iter().map(|m| m.path.clone()).collect(),
            system,
            kallsyms: metas.iter().find_map(|m| m.kallsyms.clone()),
            kallsyms_aliases: metas
                .iter()
                .find(|m| m.kallsyms.is_some())
                .and_then(|m| m.format)
                .map(InputFormat::symbol_aliases)
                .unwrap_or_default(),
            stacks: crate::stacks::StackTable::default(),
            symbolizer: crate::stacks::Symbolizer::default(),
            stack_symbols: None,
            user_frame_names: None,
            cmdlines: metas.iter().filter_map(|m| m.cmdline.clone()).collect(),
            declared,
            seen_native: BTreeSet::new(),
            seen_mask: 0,
            seen_generic: FxHashSet::default(),
            time: None,
            events: 0,
            first: None,
            last: None,
            cpu_limit: Engine::cpu_limit_of(metas),
            dq: DataQuality::default(),
        }
    }

    /// The first CPU number no event of `metas` can name: the largest CPU count an input
    /// declares, or [`NR_CPUS_MAX`] when one does not declare it. Only binary formats
    /// declare the possible CPUs (perf.data `nr_cpus_available`, trace.dat's CPU count); the
    /// text formats' counts (`#P:`, `nrcpus online`) are of online CPUs, which can leave
    /// holes, so they bound nothing.
    fn cpu_limit_of(metas: &[&TraceMeta]) -> u32 {
        let binary = |m: &TraceMeta| {
            matches!(
                m.format,
                Some(InputFormat::PerfData | InputFormat::PerfPipe | InputFormat::TraceDat)
            )
        };
        let declared: Option<Vec<u32>> = metas
            .iter()
            .map(|m| m.nr_cpus.filter(|_| binary(m)))
            .collect();
        match declared {
            Some(v) if !v.is_empty() => v.into_iter().max().unwrap_or(NR_CPUS_MAX).max(1),
            _ => NR_CPUS_MAX,
        }
    }

    /// Where to get kernel symbols for the stacks recorded with events when no input
    /// carries a table: called once, at [`Engine::finish`], and only if stacks were seen
    /// (reading a 5 MB `/proc/kallsyms` costs nothing for the traces without stacks).
    pub fn set_stack_symbols(&mut self, load: StackSymbols) {
        self.stack_symbols = Some(load);
    }

    /// How to name the user frames of the stacks recorded with events: called once, at
    /// [`Engine::finish`], with every distinct `(task, address)`, and only if there are any.
    pub fn set_user_frame_names(&mut self, name: UserFrameNames) {
        self.user_frame_names = Some(name);
    }

    /// Keep the findings whose subject is the recorder's own thread (default: left out,
    /// counted as `recorder_findings_left_out`; see [`crate::recorder`]).
    pub fn include_recorder(&mut self, include: bool) {
        self.include_recorder = include;
    }

    /// Analyze only events with `start <= ts <= end`.
    pub fn set_time_range(&mut self, start: Ts, end: Ts) {
        self.time = Some((start, end));
    }

    /// Parks the detectors that will be skipped because the inputs lack their needed events,
    /// when every input declares all the events it holds (file-mode perf.data); no-op
    /// otherwise. Detectors needing a CPU profile stay (a profile is not a declared event).
    /// After the last event, [`Engine::parking_failed`] tells whether the inputs did hold
    /// events that meet a parked detector's needs (then analyze again without parking).
    pub fn park_unmeetable(&mut self) {
        if !self.declared_complete {
            return;
        }
        self.interests_known = false; // asked again for the detectors that stay
        let has = |n: &str| self.declared.contains(n);
        let mut i = 0;
        while i < self.detectors.len() {
            let info = self.detectors[i].info();
            let profile = info
                .needs
                .iter()
                .any(|alts| alts.contains(&crate::PROFILE_NEED));
            if !profile && info.unmet(&has).is_some() {
                let d = self.detectors.remove(i);
                self.parked.push((self.positions.remove(i), d));
            } else {
                i += 1;
            }
        }
    }

    /// Ids of the parked detectors, in selection order.
    pub fn parked_ids(&self) -> Vec<&'static str> {
        self.parked.iter().map(|(_, d)| d.info().id).collect()
    }

    /// True when a parked detector's needs are met by the events available (declared or
    /// seen) after all: its outcome would lack the events it was not given.
    pub fn parking_failed(&self) -> bool {
        if self.parked.is_empty() {
            return false;
        }
        let events = self.available_events();
        let has = |n: &str| events.iter().any(|e| e == n);
        self.parked
            .iter()
            .any(|(_, d)| d.info().unmet(&has).is_none())
    }

    /// Feeds one event (a run of one: see [`Engine::process_run`]).
    pub fn process(&mut self, ev: &Event) {
        self.process_run(std::slice::from_ref(ev));
    }

    /// Feeds a run of consecutive events: the timeline applies them all, then each
    /// detector gets the run with the transitions ([`crate::Detector::on_run`]). The result
    /// does not depend on how the stream is cut into runs. Events outside the optional time
    /// range are not analyzed.
    pub fn process_run(&mut self, evs: &[Event]) {
        self.process_run_observed(evs, None);
    }

    /// [`Engine::process_run`], showing `observer` each run of analyzed events with the
    /// transitions the timeline made of them (after the timeline, before the detectors):
    /// how another product reads the one model (every transition, quiet ones too: see
    /// [`is_quiet`]). The timeline runs for an observer even without detectors.
    pub fn process_run_observed(&mut self, evs: &[Event], mut observer: Option<&mut Observer>) {
        let limit = self.cpu_limit;
        if evs.iter().any(|ev| largest_cpu(ev) >= limit) {
            return self.process_run_skipping_cpus(evs, observer);
        }
        if let Some((a, b)) = self.time {
            if evs.iter().any(|ev| ev.ts < a || ev.ts > b) {
                // outside the requested range: not part of the analysis
                for ev in evs.iter().filter(|ev| ev.ts >= a && ev.ts <= b) {
                    self.apply_run(std::slice::from_ref(ev), observer.as_deref_mut());
                }
                return;
            }
        }
        self.apply_run(evs, observer);
    }

    /// The scheduler state machine the detectors are fed from (task names and states so
    /// far; at the end, the last ones).
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// [`Engine::process_run`] of a run holding events that name a CPU the inputs do not
    /// have: those are counted and skipped, the runs between them go on (out of line: only
    /// corrupt input).
    #[cold]
    #[inline(never)]
    fn process_run_skipping_cpus(&mut self, evs: &[Event], mut observer: Option<&mut Observer>) {
        let limit = self.cpu_limit;
        for part in evs.split(|ev| largest_cpu(ev) >= limit) {
            if !part.is_empty() {
                self.process_run_observed(part, observer.as_deref_mut());
            }
        }
        for ev in evs.iter().filter(|ev| largest_cpu(ev) >= limit) {
            self.dq.add(Problem::EventCpuOutOfRange, 1, || {
                format!(
                    "input #{} {}: {} names CPU {} (the trace has CPUs 0-{})",
                    ev.span.input(),
                    ev.span.pos(),
                    ev.kind.name(),
                    largest_cpu(ev),
                    limit - 1
                )
            });
        }
    }

    /// [`Engine::process_run`] of events in the time range.
    fn apply_run(&mut self, evs: &[Event], observer: Option<&mut Observer>) {
        if !self.interests_known {
            self.interests();
        }
        self.bits.clear();
        self.run_transitions.clear();
        let mut all_bits = 0;
        for (k, ev) in evs.iter().enumerate() {
            // One dispatch on the kind: its bit selects what detectors look at, and a
            // scheduler kind's name is noted the first time its bit is missing from the
            // seen mask.
            let bit = kind_bit(&ev.kind);
            self.stacks.record(ev);
            if bit & SCHED_KINDS != 0 {
                if self.seen_mask & bit == 0 {
                    self.note_native(&ev.kind, bit.trailing_zeros());
                }
            } else {
                self.note_other_kind(&ev.kind);
            }
            self.bits.push(bit);
            all_bits |= bit;
            if self.no_detectors && observer.is_none() {
                continue;
            }
            // an observer gets every transition
            let drop_quiet = self.drop_quiet && observer.is_none();
            let list = &mut self.run_transitions;
            let k = k as u32;
            self.timeline.process(ev, &mut |t| {
                if !(drop_quiet && is_quiet(&t)) {
                    list.push((k, t));
                }
            });
        }
        // side-band task names are not analyzed events (rare: counted apart)
        if all_bits & kind::TASK_COMM == 0 {
            if let (Some(first), Some(last)) = (evs.first(), evs.last()) {
                self.first.get_or_insert(first.ts);
                self.last = Some(last.ts);
            }
            self.events += evs.len() as u64;
        } else {
            self.count_with_names(evs);
        }
        let run = Run {
            events: evs,
            bits: &self.bits,
            transitions: &self.run_transitions,
            timeline: &self.timeline,
            everything: self.everything,
            quiet_dropped: self.drop_quiet && observer.is_none(),
        };
        if let Some(observe) = observer {
            observe(&run);
        }
        for d in &mut self.detectors {
            d.on_run(&run);
        }
    }

    /// The counts and times of [`Engine::apply_run`] for a run holding side-band task names,
    /// which are not analyzed events (out of line: rare).
    #[cold]
    #[inline(never)]
    fn count_with_names(&mut self, evs: &[Event]) {
        let analyzed = |(ev, &bit): (&Event, &u32)| (bit != kind::TASK_COMM).then_some(ev.ts);
        let mut ts = evs.iter().zip(&self.bits).filter_map(analyzed);
        if let Some(first) = ts.next() {
            self.first.get_or_insert(first);
            self.last = Some(ts.next_back().unwrap_or(first));
        }
        let comms = self.bits.iter().filter(|&&b| b == kind::TASK_COMM).count();
        self.events += (evs.len() - comms) as u64;
    }

    /// Notes the first event of a native kind ([`native_index`] `index`).
    #[cold]
    #[inline(never)]
    fn note_native(&mut self, k: &EventKind, index: u32) {
        if let Some(n) = native_name(k) {
            self.seen_mask |= 1u32 << index;
            self.seen_native.insert(n);
        }
    }

    /// Notes the name of an event that is not of a scheduler kind: a block action's
    /// (native) or a generic event's (out of line: scheduler kinds are the usual events).
    #[inline(never)]
    fn note_other_kind(&mut self, k: &EventKind) {
        let index = native_index(k);
        if index != NOT_NATIVE {
            if self.seen_mask & (1u32 << index) == 0 {
                self.note_native(k, index);
            }
        } else if let EventKind::Generic(g) = k {
            if !self.seen_generic.contains(&g.name) {
                self.seen_generic.insert(g.name.clone());
            }
        }
    }

    /// Calls every detector with every event and transition, whatever they say they look
    /// at (tests compare the outcomes).
    #[cfg(test)]
    fn call_everything(&mut self) {
        self.everything = true;
        self.interests_known = false;
    }

    /// Asks the fed detectors whether any wants quiet transitions (before the first event).
    fn interests(&mut self) {
        self.interests_known = true;
        self.drop_quiet = !self.everything
            && self
                .detectors
                .iter()
                .all(|d| !d.wants_transitions() || d.ignores_quiet_transitions());
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

    /// CPUs the analyzed scheduler events named (1 + the largest CPU number; 0 without
    /// scheduler events).
    pub fn cpus_seen(&self) -> u32 {
        u32::try_from(self.timeline.cpu_count()).unwrap_or(u32::MAX)
    }

    /// Whether the analyzed scheduler events named task `tid`, and whether they named any
    /// task at all (`(false, false)`: no scheduler events to tell).
    pub fn task_seen(&self, tid: Tid) -> (bool, bool) {
        let tasks = self.timeline.tasks();
        (tasks.find(tid).is_some(), !tasks.is_empty())
    }

    /// Ends the analysis.
    pub fn finish(mut self) -> EngineOutput {
        if !self.stacks.is_empty() {
            // a table the inputs carry names aliases as their peer does; one loaded for
            // perf.data stacks (the host's, --kallsyms) as perf does
            let loaded = match (&self.kallsyms, self.stack_symbols.take()) {
                (Some(k), _) => Some((k.clone(), self.kallsyms_aliases)),
                (None, Some(load)) => match load() {
                    Ok(k) => Some((k, stallscope_model::SymbolAliases::LastListed)),
                    Err(note) => {
                        self.dq.add(Problem::StackFramesUnnamed, 1, || note);
                        None
                    }
                },
                (None, None) => None,
            };
            if let Some((k, aliases)) = loaded {
                self.symbolizer = crate::stacks::Symbolizer::from_kallsyms(&k, aliases);
            }
            let frames = self.stacks.user_frames();
            match self.user_frame_names.take() {
                Some(name) if !frames.is_empty() => {
                    let (names, dq) = name(&frames);
                    self.symbolizer.set_user_names(names);
                    self.dq.merge(&dq);
                }
                None if !frames.is_empty() => {
                    let n = frames.len() as u64;
                    self.dq.add(Problem::UserFramesUnnamed, n, || {
                        format!("{n} distinct user addresses")
                    });
                }
                _ => {}
            }
        }
        let events = self.available_events();
        let has = |n: &str| events.iter().any(|e| e == n);
        let cx = context!(self);
        let mut all: Vec<(usize, Box<dyn Detector>)> =
            self.positions.into_iter().zip(self.detectors).collect();
        all.extend(self.parked);
        all.sort_by_key(|(i, _)| *i);
        let outcomes = all
            .into_iter()
            .map(|(_, d)| {
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
        let mut outcomes: Vec<DetectorOutcome> = outcomes;
        if !self.include_recorder {
            leave_out_recorder(
                &self.recorder,
                self.system.as_ref(),
                &mut self.dq,
                &mut outcomes,
            );
        }
        let mut quality = self.timeline.quality();
        quality.merge(&self.dq);
        EngineOutput {
            outcomes,
            quality,
            events,
            events_read: self.events,
            first_ts: self.first,
            last_ts: self.last,
        }
    }
}

/// Drops the findings whose subject is one of the recorder's tasks, counting each.
fn leave_out_recorder(
    recorder: &crate::recorder::RecorderTasks,
    system: Option<&SystemContext>,
    dq: &mut DataQuality,
    outcomes: &mut [DetectorOutcome],
) {
    let context = |pid: Tid| system.and_then(|s| s.tasks.iter().find(|t| t.pid == pid));
    for o in outcomes.iter_mut() {
        let Ok(findings) = &mut o.result else {
            continue;
        };
        findings.retain(|f| {
            let subject = f.tasks.iter().find(|t| {
                crate::recorder::SUBJECT_ROLES.contains(&t.role.as_str())
                    && recorder.is_recorder(t.pid, &t.comm, context(t.pid))
            });
            match subject {
                Some(t) => {
                    dq.add(Problem::RecorderFindingsLeftOut, 1, || {
                        format!("{}: {} (pid {}) — {}", o.id, t.comm, t.pid, f.title)
                    });
                    false
                }
                None => true,
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::DETECTORS;
    use crate::testutil::{idle, t, Trace, MS};
    use crate::Params;

    /// B waits 60 ms on CPU 0 behind A (owed 30 ms, clearly over the fair bound): a
    /// runqueue-starvation finding.
    fn starved() -> Trace {
        let (a, b) = (t("hog", 10, 120), t("victim", 20, 120));
        let mut tr = Trace::new();
        tr.sw(MS, 0, idle(), "R", a)
            .wake(2 * MS, 1, 0, b, 0)
            .sw(62 * MS, 0, a, "S", b)
            .sw(63 * MS, 0, b, "S", idle());
        tr
    }

    fn perf_data(events: &[&str]) -> TraceMeta {
        TraceMeta {
            path: "x.data".into(),
            format: Some(InputFormat::PerfData),
            declared_events: events.iter().map(|e| e.to_string()).collect(),
            ..TraceMeta::default()
        }
    }

    fn engine(meta: &TraceMeta, park: bool) -> Engine {
        let all = DETECTORS
            .iter()
            .map(|e| (e.make)(&Params::defaults(e.info.params)))
            .collect();
        let mut engine = Engine::new(all, &[meta]);
        if park {
            engine.park_unmeetable();
        }
        engine
    }

    fn outcomes(engine: Engine) -> Vec<(&'static str, Result<Vec<Finding>, String>)> {
        let out = engine.finish();
        out.outcomes.into_iter().map(|o| (o.id, o.result)).collect()
    }

    #[test]
    fn parked_detectors_end_as_without_parking() {
        let meta = perf_data(&["sched:sched_switch", "sched:sched_waking"]);
        let tr = starved();
        let (mut plain, mut parked) = (engine(&meta, false), engine(&meta, true));
        assert_eq!(
            parked.parked_ids(),
            ["worker-flood", "dispatch-starvation"],
            "lock-spinning (a profile) stays"
        );
        for ev in &tr.events {
            plain.process(ev);
            parked.process(ev);
        }
        assert!(!parked.parking_failed());
        let (a, b) = (outcomes(plain), outcomes(parked));
        assert_eq!(a, b);
        let ids: Vec<_> = b.iter().map(|(id, _)| *id).collect();
        let want: Vec<_> = DETECTORS.iter().map(|e| e.info.id).collect();
        assert_eq!(ids, want, "selection order kept");
        let found = b.iter().find(|(id, _)| *id == "runqueue-starvation");
        assert!(matches!(found, Some((_, Ok(f))) if f.len() == 1));
    }

    /// A and B alternate on CPU 0 every 100 µs (A wakes B, B runs a work item, an I/O
    /// completes, B wakes A), with runtime updates; then C starves behind A.
    fn alternating() -> Trace {
        use stallscope_model::{BlockAction, FieldValue};
        const US: Ts = 1000;
        let (a, b, c) = (
            t("fio", 10, 120),
            t("kworker/0:1", 20, 120),
            t("c", 30, 120),
        );
        let work = vec![("function".to_string(), FieldValue::UInt(0xffff_0010))];
        let mut tr = Trace::new();
        tr.sw(0, 0, idle(), "R", a);
        let rounds = 2000;
        for k in 0..rounds {
            let at = k * 100 * US;
            tr.wake(at + 10 * US, 0, 10, b, 0)
                .stat(at + 15 * US, 0, a, 1000 + k)
                .sw(at + 20 * US, 0, a, "R+", b)
                .generic(at + 30 * US, 0, 20, "workqueue_execute_start", work.clone())
                .block(at + 40 * US, 0, 20, BlockAction::Complete)
                .wake(at + 50 * US, 0, 20, a, 0)
                .sw(at + 60 * US, 0, b, "S", a);
        }
        let end = rounds * 100 * US;
        tr.wake(end, 1, 0, c, 0)
            .sw(end + 1, 1, idle(), "R", idle())
            .sw(end + 60 * MS, 0, a, "S", c);
        tr
    }

    #[test]
    fn skipped_calls_change_no_outcome() {
        let meta = perf_data(&["sched:sched_switch", "sched:sched_waking"]);
        let tr = alternating();
        let (mut all, mut told) = (engine(&meta, false), engine(&meta, false));
        all.call_everything();
        for ev in &tr.events {
            all.process(ev);
        }
        for run in tr.events.chunks(64) {
            told.process_run(run);
        }
        let (x, y) = (outcomes(all), outcomes(told));
        for id in [
            "runqueue-starvation",
            "wakeup-ping-pong",
            "idle-while-runnable",
        ] {
            assert!(
                x.iter()
                    .any(|(d, r)| *d == id && matches!(r, Ok(f) if !f.is_empty())),
                "the test needs {id} findings: {x:#?}"
            );
        }
        assert_eq!(x, y);
    }

    /// Data-quality counters and examples, by key.
    fn quality(o: &EngineOutput) -> Vec<(String, u64, Vec<String>)> {
        let mut v: Vec<_> = o
            .quality
            .entries()
            .map(|(k, e)| (k.to_string(), e.count, e.examples.clone()))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn events_naming_cpus_the_trace_lacks_are_counted_and_skipped() {
        // A corrupt CPU number (its own, a wakeup's target, a migration's) must not make
        // every detector's per-CPU table grow to it: the event is skipped and counted.
        let meta = TraceMeta {
            nr_cpus: Some(2),
            ..perf_data(&["sched:sched_switch", "sched:sched_waking"])
        };
        let clean = alternating();
        let mut bad = alternating();
        let at = bad.events[3].ts;
        bad.sw(at, u32::MAX, idle(), "R", t("x", 77, 120))
            .wake(at, 0, 0, t("y", 78, 120), 0xFFFF_FF00)
            .migrate(at, 1, t("z", 79, 120), 1, 3);
        bad.events.sort_by_key(|e| e.ts);
        let run = |tr: &Trace| {
            let mut en = engine(&meta, false);
            for chunk in tr.events.chunks(64) {
                en.process_run(chunk);
            }
            en.finish()
        };
        let (good, got) = (run(&clean), run(&bad));
        assert_eq!(got.quality.count(Problem::EventCpuOutOfRange), 3);
        assert_eq!(
            got.events_read, good.events_read,
            "skipped events are not analyzed"
        );
        let findings = |o: &EngineOutput| -> Vec<String> {
            o.outcomes
                .iter()
                .filter_map(|o| o.result.as_ref().ok())
                .flatten()
                .map(|f| f.title.clone())
                .collect()
        };
        assert_eq!(findings(&got), findings(&good));
        // without a declared CPU count the kernel's largest NR_CPUS bounds them
        assert_eq!(Engine::cpu_limit_of(&[&perf_data(&[])]), NR_CPUS_MAX);
        assert_eq!(Engine::cpu_limit_of(&[&meta]), 2);
    }

    #[test]
    fn runs_of_any_length_end_alike() {
        let meta = perf_data(&["sched:sched_switch", "sched:sched_waking"]);
        let mut tr = alternating();
        // a second CPU's events interleaved, so that runs mix CPUs
        let (d, e) = (t("d", 40, 120), t("e", 50, 139));
        let last = tr.events.last().map_or(0, |ev| ev.ts);
        for k in 0..300 {
            let at = last + 1 + k * 7 * MS;
            tr.wake(at, 1, 0, d, 1)
                .sw(at + MS, 1, idle(), "R", e)
                .sw(at + 3 * MS, 1, e, "R", d)
                .sw(at + 4 * MS, 1, d, "S", e)
                .sw(at + 6 * MS, 1, e, "S", idle());
        }
        let one_by_one = {
            let mut en = engine(&meta, false);
            for ev in &tr.events {
                en.process(ev);
            }
            en.finish()
        };
        for len in [2, 7, 64, 1000, tr.events.len()] {
            let mut en = engine(&meta, false);
            for run in tr.events.chunks(len) {
                en.process_run(run);
            }
            let by_runs = en.finish();
            assert_eq!(quality(&by_runs), quality(&one_by_one), "runs of {len}");
            assert_eq!(by_runs.events_read, one_by_one.events_read);
            assert_eq!(
                (by_runs.first_ts, by_runs.last_ts),
                (one_by_one.first_ts, one_by_one.last_ts)
            );
            let found = |o: &EngineOutput| -> Vec<(&'static str, Result<Vec<Finding>, String>)> {
                o.outcomes
                    .iter()
                    .map(|d| (d.id, d.result.clone()))
                    .collect()
            };
            assert_eq!(found(&by_runs), found(&one_by_one), "runs of {len}");
        }
        assert!(
            one_by_one
                .outcomes
                .iter()
                .filter(|d| matches!(&d.result, Ok(f) if !f.is_empty()))
                .count()
                >= 3
        );
    }

    #[test]
    fn a_time_range_cuts_runs_as_it_cuts_events() {
        let meta = perf_data(&["sched:sched_switch", "sched:sched_waking"]);
        let tr = alternating();
        let (a, b) = (50 * MS, 150 * MS);
        let mut whole = engine(&meta, false);
        whole.set_time_range(a, b);
        for run in tr.events.chunks(64) {
            whole.process_run(run);
        }
        let mut inside = engine(&meta, false);
        for ev in tr.events.iter().filter(|ev| ev.ts >= a && ev.ts <= b) {
            inside.process(ev);
        }
        let (x, y) = (whole.finish(), inside.finish());
        assert_eq!(x.events_read, y.events_read);
        assert!(x.events_read > 0 && x.events_read < tr.events.len() as u64);
        assert_eq!(quality(&x), quality(&y));
    }

    #[test]
    fn an_undeclared_needed_event_fails_parking() {
        let meta = perf_data(&["sched:sched_switch", "sched:sched_waking"]);
        let mut tr = starved();
        tr.generic(40 * MS, 1, 5, "workqueue_execute_start", Vec::new());
        let mut parked = engine(&meta, true);
        for ev in &tr.events {
            parked.process(ev);
        }
        assert!(parked.parking_failed());
    }

    #[test]
    fn a_scheduler_kinds_seen_bit_is_its_kind_bit() {
        use stallscope_model::{Migrate, PrevState, StatRuntime, Switch, Wakeup};
        let task = t("a", 10, 120);
        let wakeup = Wakeup {
            task,
            target_cpu: Some(1),
        };
        let sched = [
            EventKind::Switch(Switch {
                prev: task,
                prev_state: PrevState::default(),
                next: task,
            }),
            EventKind::Waking(wakeup),
            EventKind::Wakeup(wakeup),
            EventKind::WakeupNew(wakeup),
            EventKind::Migrate(Migrate {
                task,
                orig_cpu: 0,
                dest_cpu: 1,
            }),
            EventKind::Fork {
                parent_comm: task.comm,
                parent_pid: 10,
                child_comm: task.comm,
                child_pid: 11,
            },
            EventKind::Exit(task),
            EventKind::Exec {
                filename: "/bin/true".into(),
                pid: 10,
                old_pid: 10,
            },
            EventKind::StatRuntime(StatRuntime {
                task,
                runtime: 5,
                vruntime: None,
            }),
        ];
        let mut all = 0;
        for k in &sched {
            assert_eq!(1u32 << native_index(k), kind_bit(k), "{k:?}");
            all |= kind_bit(k);
        }
        assert_eq!(all, SCHED_KINDS);
        let others = [
            EventKind::Lost { count: None },
            EventKind::TaskComm {
                tgid: 1,
                tid: 1,
                comm: task.comm,
            },
        ];
        for k in &others {
            assert_eq!(kind_bit(k) & SCHED_KINDS, 0, "{k:?}");
        }
    }

    #[test]
    fn inputs_without_a_complete_event_list_park_nothing() {
        let mut meta = perf_data(&["sched_switch", "sched_waking"]);
        meta.format = Some(InputFormat::FtraceText);
        assert!(engine(&meta, true).parked_ids().is_empty());
        meta.format = Some(InputFormat::PerfPipe);
        assert!(engine(&meta, true).parked_ids().is_empty());
    }
}
