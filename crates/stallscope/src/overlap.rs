//! [`OverlapCheck`]: merged inputs that hold the same events — one recording twice (a
//! perf.data and its own `perf script` text, a copy under another name) or two recordings
//! of the same CPUs made together — are told apart from inputs that complete each other
//! (a scheduler trace and a block trace of the same time, recordings of other CPUs, one
//! recording after the other).
//!
//! Rule: for each CPU and event name, the input of the last event. Inputs that complete
//! each other never take turns on one CPU with one event name more than once (one
//! recording after the other: one turn); inputs that hold the same events take turns all
//! along. [`TURNS`] turns mean overlap. Side-band records (task names, mappings), lost-event
//! markers and events at time 0 are not looked at: every recording has its own.
//!
//! When overlapping inputs are merged anyway ([`crate::merge::Inputs::allow_overlapping`]),
//! events identical in time, CPU, task and kind that come from different inputs are
//! counted once (`duplicate_events`).

use rustc_hash::FxHashMap;
use stallscope_model::{Cpu, DataQuality, Event, EventKind, Problem, Ts};

/// Turns between two inputs on one CPU and event name that mean they overlap.
pub const TURNS: u32 = 4;

/// Where two inputs were seen holding the same events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    /// The two inputs (indexes).
    pub inputs: (u16, u16),
    /// The CPU and event name they took turns on.
    pub cpu: Cpu,
    /// The event name.
    pub event: String,
    /// Time of the first turn.
    pub since: Ts,
}

/// The check over one merge.
#[derive(Default)]
pub struct OverlapCheck {
    /// (CPU, event name hash) → (input of the last event, turns so far, time of the first).
    last: FxHashMap<(Cpu, u64), (u16, u32, Ts)>,
    /// Events emitted at the current time (for counting identical ones once).
    same_time: Vec<Event>,
    /// Pairs of inputs already found overlapping.
    found: Vec<(u16, u16)>,
}

impl OverlapCheck {
    /// Notes `ev` (from input `ev.span.input()`); `Some` the first time two inputs took
    /// [`TURNS`] turns (once per pair of inputs).
    pub fn note(&mut self, ev: &Event) -> Option<Overlap> {
        if ev.ts == 0 || ev.kind.is_side_band() || matches!(ev.kind, EventKind::Lost { .. }) {
            return None;
        }
        let name = ev.kind.name();
        let mut h = rustc_hash::FxHasher::default();
        std::hash::Hash::hash(name, &mut h);
        let key = (ev.cpu, std::hash::Hasher::finish(&h));
        let input = ev.span.input();
        match self.last.get_mut(&key) {
            None => {
                self.last.insert(key, (input, 0, 0));
                None
            }
            Some((last, _, _)) if *last == input => None,
            Some((last, turns, since)) => {
                let other = *last;
                *last = input;
                *turns += 1;
                if *turns == 1 {
                    *since = ev.ts;
                }
                let pair = (other.min(input), other.max(input));
                if *turns != TURNS || self.found.contains(&pair) {
                    return None;
                }
                self.found.push(pair);
                Some(Overlap {
                    inputs: pair,
                    cpu: ev.cpu,
                    event: name.to_string(),
                    since: *since,
                })
            }
        }
    }

    /// True when `ev` is identical (time, CPU, task, kind) to an event another input gave
    /// (then it is counted, and the caller leaves it out); remembers it otherwise.
    pub fn duplicate(&mut self, ev: &Event, dq: &mut DataQuality) -> bool {
        if self.same_time.first().is_some_and(|e| e.ts != ev.ts) {
            self.same_time.clear();
        }
        let input = ev.span.input();
        let twin = self.same_time.iter().any(|e| {
            e.span.input() != input && e.cpu == ev.cpu && e.pid == ev.pid && e.kind == ev.kind
        });
        if twin {
            dq.add(Problem::DuplicateEvents, 1, || {
                format!(
                    "input #{input} {}: {} on CPU {} at {} ns, also in another input",
                    ev.span.pos(),
                    ev.kind.name(),
                    ev.cpu,
                    ev.ts
                )
            });
            return true;
        }
        if ev.ts != 0 {
            self.same_time.push(ev.clone());
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{EventKind, Span};

    fn ev(input: u16, ts: Ts, cpu: Cpu) -> Event {
        Event {
            ts,
            cpu,
            pid: 7,
            span: Span::byte(input, ts),
            kind: EventKind::Exit(Default::default()),
            callchain: None,
        }
    }

    fn first_overlap(evs: &[Event]) -> Option<Overlap> {
        let mut c = OverlapCheck::default();
        evs.iter().find_map(|e| c.note(e))
    }

    #[test]
    fn inputs_taking_turns_overlap_and_completing_ones_do_not() {
        // the same events twice
        let twice: Vec<Event> = (1..10).flat_map(|t| [ev(0, t, 1), ev(1, t, 1)]).collect();
        let o = first_overlap(&twice).expect("overlap");
        assert_eq!((o.inputs, o.cpu, o.since), ((0, 1), 1, 1));
        // one after the other; other CPUs
        let after: Vec<Event> = (1..10)
            .map(|t| ev(0, t, 1))
            .chain((11..20).map(|t| ev(1, t, 1)))
            .collect();
        assert_eq!(first_overlap(&after), None);
        let cpus: Vec<Event> = (1..10).flat_map(|t| [ev(0, t, 0), ev(1, t, 1)]).collect();
        assert_eq!(first_overlap(&cpus), None);
    }

    #[test]
    fn identical_events_of_two_inputs_count_once() {
        let mut c = OverlapCheck::default();
        let mut dq = DataQuality::default();
        let kept: Vec<(u16, Ts)> = [
            ev(0, 5, 1),
            ev(1, 5, 1),
            ev(1, 5, 0),
            ev(0, 6, 1),
            ev(0, 6, 1),
            ev(1, 6, 1),
        ]
        .iter()
        .filter(|e| !c.duplicate(e, &mut dq))
        .map(|e| (e.span.input(), e.ts))
        .collect();
        // one input's own repeats stay (its data); the other's twin goes
        assert_eq!(kept, vec![(0, 5), (1, 5), (0, 6), (0, 6)]);
        assert_eq!(dq.count(Problem::DuplicateEvents), 2);
    }
}
