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
        /// Its switch-in is not in the trace: `start` is the repair rule's (the CPU's
        /// previous switch, or the task's wakeup when later; see [`Timeline`]).
        repaired_start: bool,
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
            TaskState::Running {
                cpu,
                since,
                repaired,
            } => Some(Interval::Run {
                tid,
                cpu,
                start: since,
                end: ts,
                ended: to,
                repaired_start: repaired,
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
        match &ev.kind {
            // the switch out of idle: the idle time ends here
            EventKind::Switch(s) if s.prev.pid == 0 => {
                if let Some(start) = self.idle_since.get_mut(cpu).and_then(Option::take) {
                    sink(Interval::Idle {
                        cpu: ev.cpu,
                        start,
                        end: ev.ts,
                    });
                }
            }
            // whether the CPU idles is unknown after lost events: no interval
            EventKind::Lost { .. } => {
                if let Some(s) = self.idle_since.get_mut(cpu) {
                    *s = None;
                }
            }
            _ => {}
        }
        let idle_since = &mut self.idle_since;
        self.timeline.process(ev, &mut |t| {
            // a repaired run (its switch-in dropped, often the switch out of idle) ends the
            // CPU's idle time where it starts
            if let Transition::State {
                to:
                    TaskState::Running {
                        cpu: on,
                        since,
                        repaired: true,
                    },
                ..
            } = t
            {
                if let Some(start) = idle_since.get_mut(on as usize).and_then(Option::take) {
                    sink(Interval::Idle {
                        cpu: on,
                        start,
                        end: since.max(start),
                    });
                }
            }
            if let Some(i) = Interval::closed_by(&t) {
                sink(i);
            }
            transition(&t);
        });
        let touches_cpu = matches!(ev.kind, EventKind::Switch(_) | EventKind::Lost { .. });
        if let EventKind::Switch(_) = ev.kind {
            // a switch whose prev is a task while the model had the CPU idle, not repaired
            // (the task ran before it was known): the idle time ends at the switch
            if let Some(start) = self.idle_since.get_mut(cpu).and_then(Option::take) {
                sink(Interval::Idle {
                    cpu: ev.cpu,
                    start,
                    end: ev.ts,
                });
            }
        }
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

    /// The run `tid` made on `cpu` over `span`, left in `ended`.
    fn run(
        tid: Tid,
        cpu: Cpu,
        (start, end): (Ts, Ts),
        ended: TaskState,
        repaired: bool,
    ) -> Interval {
        Interval::Run {
            tid,
            cpu,
            start,
            end,
            ended,
            repaired_start: repaired,
        }
    }

    /// CPU `cpu`'s idle time over `span`.
    fn idle(cpu: Cpu, (start, end): (Ts, Ts)) -> Interval {
        Interval::Idle { cpu, start, end }
    }

    /// `tid`'s sleep over `span`.
    fn sleep(tid: Tid, (start, end): (Ts, Ts), kind: SleepKind, woken: bool) -> Interval {
        Interval::Sleep {
            tid,
            start,
            end,
            kind,
            woken,
        }
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
                run(5, 0, (10, 20), TaskState::Sleeping { since: 20 }, false),
                sleep(5, (20, 30), SleepKind::Interruptible, true),
                idle(0, (20, 40)),
                Interval::Wait {
                    tid: 5,
                    start: 30,
                    end: 40,
                    cause: RunnableCause::Wakeup,
                    cpu: Some(0),
                    ran_on: Some(0)
                },
                run(5, 0, (40, 50), TaskState::Blocked { since: 50 }, false),
                run(6, 0, (50, 60), TaskState::Dead { since: 60 }, false),
            ]
        );
    }

    #[test]
    fn a_switch_naming_another_prev_task_repairs_who_ran() {
        // CPU 0 switched to 3 at 1; a switch at 5 names 7 as prev (the switch 3 → 7 was
        // dropped): 7 ran there, but the trace shows nothing of it before this record (it
        // was never seen), so its run starts here; 3's run as the trace shows it ends here
        // too, unknown after
        let got = intervals(&[
            sw(1, 0, 0, "R", 3),
            sw(5, 0, 7, "S", 8),
            sw(9, 0, 8, "R", 3),
        ]);
        assert_eq!(
            got[..3],
            [
                run(3, 0, (1, 5), TaskState::Unknown, false),
                run(7, 0, (5, 5), TaskState::Sleeping { since: 5 }, true),
                run(
                    8,
                    0,
                    (5, 9),
                    TaskState::Runnable {
                        since: 9,
                        cause: RunnableCause::Preempted,
                        cpu: Some(0)
                    },
                    false
                )
            ]
        );
    }

    #[test]
    fn a_sleeping_task_seen_running_runs_from_the_record_and_the_idle_time_lasts_until_then() {
        // 5 sleeps at 20 (CPU 0 idle); its wakeup and the switch out of idle are dropped; at
        // 26 it records an event: the trace shows nothing of it between, so it runs from
        // there, and CPU 0 idled until then
        let got = intervals(&[
            sw(10, 0, 0, "R", 5),
            sw(20, 0, 5, "S", 0),
            in_context(26, 5),
            sw(40, 0, 5, "S", 0),
        ]);
        let after_sleep: Vec<_> = got.iter().filter(|i| i.span().0 >= 20).copied().collect();
        assert_eq!(
            after_sleep,
            [
                idle(0, (20, 26)),
                sleep(5, (20, 26), SleepKind::Interruptible, false),
                run(5, 0, (26, 40), TaskState::Sleeping { since: 40 }, true),
            ]
        );
    }

    /// A record in `pid`'s context on CPU 0 (a wakeup it makes of task 99).
    fn in_context(ts: Ts, pid: Tid) -> Event {
        Event {
            pid,
            ..waking(ts, task(99))
        }
    }

    #[test]
    fn a_record_in_a_woken_tasks_context_ends_its_wait_and_the_idle_time() {
        // 5 sleeps at 20 (CPU 0 idle), is woken at 30; the switch out of idle is dropped
        // (as this VM does); at 35 it wakes 99 itself, so it runs: from its wakeup (later
        // than the CPU's previous switch at 20), and CPU 0's idle time ends there
        let got = intervals(&[
            sw(10, 0, 0, "R", 5),
            sw(20, 0, 5, "S", 0),
            waking(30, task(5)),
            in_context(35, 5),
            sw(40, 0, 5, "S", 0),
        ]);
        let after_wakeup: Vec<_> = got.iter().filter(|i| i.span().1 >= 30).copied().collect();
        assert_eq!(
            after_wakeup,
            [
                sleep(5, (20, 30), SleepKind::Interruptible, true),
                idle(0, (20, 30)),
                Interval::Wait {
                    tid: 5,
                    start: 30,
                    end: 30,
                    cause: RunnableCause::Wakeup,
                    cpu: Some(0),
                    ran_on: Some(0)
                },
                run(5, 0, (30, 40), TaskState::Sleeping { since: 40 }, true),
            ]
        );
    }

    #[test]
    fn a_switch_out_of_a_runnable_task_is_its_run_not_an_impossible_transition() {
        // the switch 0 → 5 is dropped; 5, woken at 12, is switched out at 40: it ran from
        // the CPU's previous switch (20), after waiting 12..20 — timehist's row: run 20,
        // sch delay 8
        let mut m = Model::new(Timeline::new(WakeupSelector::preferring_waking(true)));
        let mut got = Vec::new();
        for e in [
            sw(10, 0, 0, "R", 4),
            waking(12, task(5)),
            sw(20, 0, 4, "S", 0),
            sw(40, 0, 5, "S", 0),
        ] {
            m.process(&e, &mut |i| got.push(i), &mut |_| {});
        }
        let of_5: Vec<_> = got.iter().filter(|i| i.tid() == Some(5)).copied().collect();
        assert_eq!(
            of_5,
            [
                Interval::Wait {
                    tid: 5,
                    start: 12,
                    end: 20,
                    cause: RunnableCause::Wakeup,
                    cpu: Some(0),
                    ran_on: Some(0)
                },
                run(5, 0, (20, 40), TaskState::Sleeping { since: 40 }, true),
            ]
        );
        let dq = m.timeline().quality();
        assert_eq!(dq.count(stallscope_model::Problem::ImpossibleTransition), 0);
        assert_eq!(dq.count(stallscope_model::Problem::SwitchInMissing), 1);
        // the switch still names a prev the CPU was not running (perf counts it too)
        assert_eq!(dq.count(stallscope_model::Problem::SwitchPrevMismatch), 1);
        assert!(got.contains(&idle(0, (20, 20))), "{got:?}");
    }

    #[test]
    fn a_record_before_any_switch_on_its_cpu_repairs_only_a_known_task() {
        // a task of unknown state ran from before the trace: no switch on CPU 0 yet, no
        // start to take
        let mut m = Model::new(Timeline::new(WakeupSelector::preferring_waking(true)));
        m.process(&in_context(5, 3), &mut |_| {}, &mut |_| {});
        assert_eq!(m.timeline().state(3), TaskState::Unknown);
        assert_eq!(m.current(0), None);
        // a task woken at 7 that records an event there at 9 runs from its wakeup
        let mut got = Vec::new();
        for e in [waking(7, task(4)), in_context(9, 4), sw(12, 0, 4, "S", 0)] {
            m.process(&e, &mut |i| got.push(i), &mut |_| {});
        }
        assert!(
            got.contains(&run(4, 0, (7, 12), TaskState::Sleeping { since: 12 }, true)),
            "{got:?}"
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
