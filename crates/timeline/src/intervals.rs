//! [`Model`]: the machine as closed, self-contained [`Interval`]s — a task's run on a CPU,
//! a runnable wait, a sleep, a CPU's idle time — emitted as each one ends.
//!
//! The intervals are the [`Timeline`]'s own states read back: every
//! [`Transition::State`] ends the state it leaves (its `from` carries when that state began),
//! so the interval is `[from.since, ts)`; a CPU's idle time runs from the switch that made
//! the idle task current to the next switch there. One wakeup rule (the timeline's
//! [`crate::WakeupSelector`]) and one set of repair rules (the timeline's: a contradicted
//! task becomes `Unknown`, lost events forget the CPU's current task) decide them all, so a
//! consumer never needs a private copy of "who runs on CPU c".
//!
//! What the intervals promise (tested on every fixture by the facade's
//! `model_intervals` test):
//! * a task's intervals never overlap, and follow each other without a gap except where its
//!   state was unknown (before its first event, after a repair or lost events);
//! * a CPU's runs and idle intervals never overlap;
//! * a run is `perf sched timehist`'s row of that switch-out (start = switch-in, end =
//!   switch-out, same CPU), and a wait that ends in a switch-in is that row's sch delay.
//!
//! Unknown stretches are no intervals: the model says only what the trace shows.

use stallscope_model::{Cpu, Event, EventKind, Tid, Ts};

use crate::timeline::{RunnableCause, TaskState, Timeline, Transition};

/// How a task's sleep began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SleepKind {
    /// Interruptible or idle sleep (`S`, `I`, also `T`, `t`, `P`).
    Interruptible,
    /// Uninterruptible sleep (`D`).
    Uninterruptible,
}

/// One closed stretch of time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interval {
    /// `tid` ran on `cpu` from its switch-in to its switch-out (or until a repair ended what
    /// the trace showed of it: then `ended` is `Unknown`).
    Run {
        /// The task.
        tid: Tid,
        /// Its CPU.
        cpu: Cpu,
        /// Switch-in.
        start: Ts,
        /// Switch-out.
        end: Ts,
        /// The state it left in.
        ended: TaskState,
    },
    /// `tid` waited runnable (woken, or preempted) until it ran (`ran_on`) or its state
    /// changed otherwise.
    Wait {
        /// The task.
        tid: Tid,
        /// Since its wakeup or preemption.
        start: Ts,
        /// Until its switch-in (or the repair that ended what the trace showed).
        end: Ts,
        /// Woken or preempted.
        cause: RunnableCause,
        /// The CPU it waited for at the end (its wakeup's target or the CPU it was
        /// preempted on, moved by migrations), when known.
        cpu: Option<Cpu>,
        /// The CPU it was switched in on, when the wait ended that way.
        ran_on: Option<Cpu>,
    },
    /// `tid` slept from its switch-out until its wakeup.
    Sleep {
        /// The task.
        tid: Tid,
        /// Switch-out.
        start: Ts,
        /// Its wakeup (or, with no wakeup recorded, its next switch-in or the repair that
        /// ended what the trace showed).
        end: Ts,
        /// `S`-like or `D`.
        kind: SleepKind,
        /// True when a wakeup ended it (false: switched in, exited or repaired without one).
        woken: bool,
    },
    /// `cpu` ran its idle task.
    Idle {
        /// The CPU.
        cpu: Cpu,
        /// The switch to idle.
        start: Ts,
        /// The switch away from idle.
        end: Ts,
    },
}

impl Interval {
    /// `[start, end)`.
    pub fn span(&self) -> (Ts, Ts) {
        match *self {
            Interval::Run { start, end, .. }
            | Interval::Wait { start, end, .. }
            | Interval::Sleep { start, end, .. }
            | Interval::Idle { start, end, .. } => (start, end),
        }
    }

    /// The task the interval is of (`None` for idle).
    pub fn tid(&self) -> Option<Tid> {
        match *self {
            Interval::Run { tid, .. }
            | Interval::Wait { tid, .. }
            | Interval::Sleep { tid, .. } => Some(tid),
            Interval::Idle { .. } => None,
        }
    }

    /// The interval a transition closes: the state it leaves, from that state's start to the
    /// transition (none when the state was unknown or dead, or for migrations, forks and
    /// exits, which end nothing).
    pub fn closed_by(t: &Transition) -> Option<Interval> {
        let Transition::State { ts, tid, from, to } = *t else {
            return None;
        };
        match from {
            TaskState::Running { cpu, since } => Some(Interval::Run {
                tid,
                cpu,
                start: since,
                end: ts,
                ended: to,
            }),
            TaskState::Runnable { since, cause, cpu } => Some(Interval::Wait {
                tid,
                start: since,
                end: ts,
                cause,
                cpu,
                ran_on: match to {
                    TaskState::Running { cpu, .. } => Some(cpu),
                    _ => None,
                },
            }),
            TaskState::Sleeping { since } | TaskState::Blocked { since } => Some(Interval::Sleep {
                tid,
                start: since,
                end: ts,
                kind: match from {
                    TaskState::Blocked { .. } => SleepKind::Uninterruptible,
                    _ => SleepKind::Interruptible,
                },
                woken: matches!(
                    to,
                    TaskState::Runnable {
                        cause: RunnableCause::Wakeup,
                        ..
                    }
                ),
            }),
            TaskState::Unknown | TaskState::Dead { .. } => None,
        }
    }
}

/// The model: the [`Timeline`] plus each CPU's idle time, emitting [`Interval`]s.
#[derive(Debug)]
pub struct Model {
    timeline: Timeline,
    /// Per CPU: since when its idle task runs (`None`: not idle, or not known).
    idle_since: Vec<Option<Ts>>,
}

impl Model {
    /// A model over `timeline` (new, or as the caller configured it).
    pub fn new(timeline: Timeline) -> Model {
        Model {
            timeline,
            idle_since: Vec::new(),
        }
    }

    /// The scheduler state machine underneath (its current states and data quality).
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// Feeds one event: every interval it ends goes to `sink`, then `transition` gets each
    /// of the timeline's transitions (for consumers that still read transitions).
    pub fn process(
        &mut self,
        ev: &Event,
        sink: &mut impl FnMut(Interval),
        transition: &mut impl FnMut(&Transition),
    ) {
        let cpu = ev.cpu as usize;
        let touches_cpu = matches!(ev.kind, EventKind::Switch(_) | EventKind::Lost { .. });
        if touches_cpu {
            if let Some(start) = self.idle_since.get_mut(cpu).and_then(Option::take) {
                if matches!(ev.kind, EventKind::Switch(_)) {
                    sink(Interval::Idle {
                        cpu: ev.cpu,
                        start,
                        end: ev.ts,
                    });
                }
            }
        }
        self.timeline.process(ev, &mut |t| {
            if let Some(i) = Interval::closed_by(&t) {
                sink(i);
            }
            transition(&t);
        });
        if touches_cpu && self.timeline.current(ev.cpu) == Some(0) {
            if cpu >= self.idle_since.len() {
                self.idle_since.resize(cpu + 1, None);
            }
            self.idle_since[cpu] = Some(ev.ts);
        }
    }

    /// The state of `cpu` the timeline knows now: `Some(0)` idle, `Some(tid)`, or `None`.
    pub fn current(&self, cpu: Cpu) -> Option<Tid> {
        self.timeline.current(cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ev, task, waking};
    use crate::wakeups::WakeupSelector;

    /// `sched_switch` on `cpu` from `prev` (leaving in `state`) to `next`.
    fn sw(ts: Ts, cpu: Cpu, prev: Tid, state: &str, next: Tid) -> Event {
        crate::testutil::sw(ts, cpu, task(prev), state, task(next))
    }

    fn intervals(events: &[Event]) -> Vec<Interval> {
        let mut m = Model::new(Timeline::new(WakeupSelector::preferring_waking(true)));
        let mut out = Vec::new();
        for e in events {
            m.process(e, &mut |i| out.push(i), &mut |_| {});
        }
        out
    }

    #[test]
    fn a_sleep_wake_run_cycle_is_four_closed_intervals_and_idle() {
        let got = intervals(&[
            sw(10, 0, 0, "R", 5), // idle → 5
            sw(20, 0, 5, "S", 0), // 5 ran 10..20, sleeps; CPU 0 idle from 20
            waking(30, task(5)),  // slept 20..30
            sw(40, 0, 0, "R", 5), // idle 20..40; waited 30..40
            sw(50, 0, 5, "D", 6), // ran 40..50
            sw(60, 0, 6, "X", 0), // 6 ran 50..60 (first switch-in seen at 50)
        ]);
        assert_eq!(
            got,
            [
                Interval::Run {
                    tid: 5,
                    cpu: 0,
                    start: 10,
                    end: 20,
                    ended: TaskState::Sleeping { since: 20 }
                },
                Interval::Sleep {
                    tid: 5,
                    start: 20,
                    end: 30,
                    kind: SleepKind::Interruptible,
                    woken: true
                },
                Interval::Idle {
                    cpu: 0,
                    start: 20,
                    end: 40
                },
                Interval::Wait {
                    tid: 5,
                    start: 30,
                    end: 40,
                    cause: RunnableCause::Wakeup,
                    cpu: Some(0),
                    ran_on: Some(0)
                },
                Interval::Run {
                    tid: 5,
                    cpu: 0,
                    start: 40,
                    end: 50,
                    ended: TaskState::Blocked { since: 50 }
                },
                Interval::Run {
                    tid: 6,
                    cpu: 0,
                    start: 50,
                    end: 60,
                    ended: TaskState::Dead { since: 60 }
                },
            ]
        );
    }

    #[test]
    fn a_repaired_switch_ends_the_run_the_trace_showed() {
        // CPU 0 runs 3; a switch names 7 as prev (a dropped switch): 3's run ends there as
        // far as the trace shows, and 3 is unknown until its next event
        let got = intervals(&[
            sw(1, 0, 0, "R", 3),
            sw(5, 0, 7, "S", 8),
            sw(9, 0, 8, "R", 3),
        ]);
        assert_eq!(
            got[0],
            Interval::Run {
                tid: 3,
                cpu: 0,
                start: 1,
                end: 5,
                ended: TaskState::Unknown
            }
        );
        // 8 ran 5..9 then waits (no interval until it ends); 3's unknown stretch is none
        assert_eq!(
            got[1..],
            [Interval::Run {
                tid: 8,
                cpu: 0,
                start: 5,
                end: 9,
                ended: TaskState::Runnable {
                    since: 9,
                    cause: RunnableCause::Preempted,
                    cpu: Some(0)
                }
            }]
        );
    }

    #[test]
    fn lost_events_end_the_idle_time_without_an_interval() {
        let got = intervals(&[
            sw(1, 0, 3, "S", 0),
            ev(4, 0, EventKind::Lost { count: Some(2) }),
            sw(9, 0, 0, "R", 5),
        ]);
        assert!(
            got.iter().all(|i| !matches!(i, Interval::Idle { .. })),
            "{got:?}"
        );
    }
}
