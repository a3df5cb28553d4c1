//! [`SleepTracker`]: every sleep that ends, and who ended it (issue #21's wakeup causality).
//!
//! A sleep starts when a task is switched out in a sleeping state (`S`, `D`, …: anything but
//! runnable) and ends at its **first** wakeup after that (`sched_waking` when the inputs
//! have it, else `sched_wakeup`; the same rule as [`crate::timehist`], so a sleep's length
//! is timehist's `wait time − sch delay` of the run that follows). The wakeup names its
//! waker: the task whose context recorded it, on which CPU, and in which context:
//!
//! ```text
//! context   task        a task woke it (a lock release, a pipe write, a completion…)
//!           interrupt   inside an irq handler (irq_handler_entry … _exit on that CPU)
//!           softirq     inside a softirq (softirq_entry … _exit on that CPU)
//!           idle        recorded by the idle task: an interrupt when no irq events say more
//!           task_or_interrupt  a task's context in a trace without irq / softirq events
//! after     block_complete   a block request completed on that CPU just before (≤ 1 ms)
//!           work_item        the waker was running a work item (its function)
//! ```
//!
//! A sleep that ends without a wakeup — the task is switched in, or records an event of its
//! own, with no wakeup seen (the VM this project runs on drops some switches) — is kept with
//! `waker: None` and counted; a task whose first event is a wakeup slept since before the
//! trace (counted, no sleep: its start is unknown); sleeps still open at the end are
//! reported by [`SleepTracker::finish`] as unfinished.

use rustc_hash::FxHashMap;
use serde::Serialize;
use stallscope_model::{BlockAction, Cpu, Event, EventKind, FieldValue, PrevState, Tid, Ts};

use crate::wakeups::WakeupSelector;

/// A block completion this close before a wakeup on the same CPU is taken as its cause.
pub const COMPLETION_BEFORE_WAKEUP_NS: Ts = 1_000_000;

/// The context a wakeup was recorded in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WakeContext {
    /// A task's own code.
    Task,
    /// A hard interrupt handler.
    Interrupt,
    /// A softirq.
    Softirq,
    /// The idle task (an interrupt, when no irq events were recorded).
    Idle,
    /// A task, or an interrupt that arrived while it ran: the trace has no irq / softirq
    /// events to tell (record them: `stallscope record --events chain`).
    TaskOrInterrupt,
}

/// What the waker had just done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WakeCause {
    /// A block request completed on the waker's CPU just before.
    BlockComplete {
        /// Device (`major << 20 | minor`).
        dev: u64,
        /// First sector.
        sector: u64,
        /// Completion time.
        ts_ns: Ts,
    },
    /// The waker was running a work item.
    WorkItem {
        /// The work function's kernel address.
        function: u64,
    },
}

/// Who ended a sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Waker {
    /// The task whose context recorded the wakeup (0: idle).
    pub pid: Tid,
    /// Its CPU.
    pub cpu: Cpu,
    /// Where it ran.
    pub context: WakeContext,
    /// What it had just done, when the trace says.
    pub after: Option<WakeCause>,
}

/// One sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Sleep {
    /// The sleeper.
    pub pid: Tid,
    /// Its state at the switch-out (`S`, `D`, …).
    #[serde(serialize_with = "state_text")]
    pub state: PrevState,
    /// CPU it left.
    pub cpu: Cpu,
    /// Switch-out.
    pub start_ns: Ts,
    /// The wakeup (or the event that showed it awake).
    pub end_ns: Ts,
    /// Who woke it; `None` when no wakeup was recorded.
    pub waker: Option<Waker>,
}

fn state_text<S: serde::Serializer>(s: &PrevState, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(&s.to_string())
}

/// Counts of what the tracker could not see.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SleepCounts {
    /// Sleeps ended by the task's own event with no wakeup recorded.
    pub ended_without_wakeup: u64,
    /// Wakeups of tasks not seen sleeping (asleep since before the trace, or a wakeup of
    /// a running task).
    pub wakeups_without_sleep: u64,
    /// Sleeps still going at the end of the trace.
    pub unfinished: u64,
}

/// Builds [`Sleep`]s from time-ordered events.
#[derive(Debug)]
pub struct SleepTracker {
    wakeups: WakeupSelector,
    /// Sleeping tasks: (start, state, cpu).
    asleep: FxHashMap<Tid, (Ts, PrevState, Cpu)>,
    /// Per CPU: irq and softirq nesting, the last block completion.
    in_irq: FxHashMap<Cpu, u32>,
    in_softirq: FxHashMap<Cpu, u32>,
    last_complete: FxHashMap<Cpu, (Ts, u64, u64)>,
    /// The work function each kworker is running.
    working: FxHashMap<Tid, u64>,
    /// Whether any irq or softirq entry was seen (else a task's wakeup may be an
    /// interrupt's).
    irq_events: bool,
    sleeps: Vec<Sleep>,
    counts: SleepCounts,
}

fn field(fields: &[(String, FieldValue)], name: &str) -> Option<u64> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| match v {
            FieldValue::UInt(u) => Some(*u),
            FieldValue::Int(i) => u64::try_from(*i).ok(),
            _ => None,
        })
}

impl SleepTracker {
    /// A tracker choosing wakeup events with `wakeups` (as timehist does).
    pub fn new(wakeups: WakeupSelector) -> SleepTracker {
        SleepTracker {
            wakeups,
            asleep: FxHashMap::default(),
            in_irq: FxHashMap::default(),
            in_softirq: FxHashMap::default(),
            last_complete: FxHashMap::default(),
            working: FxHashMap::default(),
            irq_events: false,
            sleeps: Vec::new(),
            counts: SleepCounts::default(),
        }
    }

    /// The context of a wakeup recorded by `pid` on `cpu`.
    fn context(&self, pid: Tid, cpu: Cpu) -> WakeContext {
        if self.in_irq.get(&cpu).is_some_and(|&n| n > 0) {
            WakeContext::Interrupt
        } else if self.in_softirq.get(&cpu).is_some_and(|&n| n > 0) {
            WakeContext::Softirq
        } else if pid == 0 {
            WakeContext::Idle
        } else if self.irq_events {
            WakeContext::Task
        } else {
            WakeContext::TaskOrInterrupt
        }
    }

    /// Ends `pid`'s sleep at `ts`, woken by `waker`.
    fn end(&mut self, pid: Tid, ts: Ts, waker: Option<Waker>) {
        if let Some((start, state, cpu)) = self.asleep.remove(&pid) {
            if waker.is_none() {
                self.counts.ended_without_wakeup += 1;
            }
            self.sleeps.push(Sleep {
                pid,
                state,
                cpu,
                start_ns: start,
                end_ns: ts,
                waker,
            });
        } else if waker.is_some() {
            self.counts.wakeups_without_sleep += 1;
        }
    }

    /// Takes one event.
    pub fn push(&mut self, ev: &Event) {
        match &ev.kind {
            EventKind::Switch(s) => {
                // the next task runs: if it was asleep, no wakeup was seen for it
                if s.next.pid != 0 {
                    self.end(s.next.pid, ev.ts, None);
                }
                if s.prev.pid != 0 && !s.prev_state.is_runnable() {
                    self.end(s.prev.pid, ev.ts, None); // its own event while "asleep"
                    self.asleep
                        .insert(s.prev.pid, (ev.ts, s.prev_state, ev.cpu));
                }
            }
            EventKind::Waking(_) | EventKind::Wakeup(_) | EventKind::WakeupNew(_) => {
                let Some(w) = self.wakeups.select(&ev.kind) else {
                    return;
                };
                let pid = w.task.pid;
                if !self.asleep.contains_key(&pid) {
                    if pid != 0 {
                        self.counts.wakeups_without_sleep += 1;
                    }
                    return;
                }
                let after = match self.last_complete.get(&ev.cpu) {
                    Some(&(t, dev, sector))
                        if ev.ts.saturating_sub(t) <= COMPLETION_BEFORE_WAKEUP_NS =>
                    {
                        Some(WakeCause::BlockComplete {
                            dev,
                            sector,
                            ts_ns: t,
                        })
                    }
                    _ => self
                        .working
                        .get(&ev.pid)
                        .map(|&function| WakeCause::WorkItem { function }),
                };
                let waker = Waker {
                    pid: ev.pid,
                    cpu: ev.cpu,
                    context: self.context(ev.pid, ev.cpu),
                    after,
                };
                self.end(pid, ev.ts, Some(waker));
            }
            EventKind::Block(b) if b.action == BlockAction::Complete => {
                let dev = b.dev.map_or(0, |d| u64::from(d.0));
                self.last_complete.insert(ev.cpu, (ev.ts, dev, b.sector));
            }
            EventKind::Generic(g) => match g.name.as_str() {
                "irq_handler_entry" => {
                    self.irq_events = true;
                    *self.in_irq.entry(ev.cpu).or_default() += 1;
                }
                "irq_handler_exit" => {
                    let n = self.in_irq.entry(ev.cpu).or_default();
                    *n = n.saturating_sub(1);
                }
                "softirq_entry" => {
                    self.irq_events = true;
                    *self.in_softirq.entry(ev.cpu).or_default() += 1;
                }
                "softirq_exit" => {
                    let n = self.in_softirq.entry(ev.cpu).or_default();
                    *n = n.saturating_sub(1);
                }
                "workqueue_execute_start" => {
                    if let Some(f) = field(&g.fields, "function") {
                        self.working.insert(ev.pid, f);
                    }
                }
                "workqueue_execute_end" => {
                    self.working.remove(&ev.pid);
                }
                _ => {}
            },
            _ => {}
        }
    }

    /// The sleeps in the order they ended, and the counts (sleeps still going count as
    /// unfinished).
    pub fn finish(mut self) -> (Vec<Sleep>, SleepCounts) {
        self.counts.unfinished = self.asleep.len() as u64;
        (self.sleeps, self.counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{
        BlockDev, BlockEvent, Comm, GenericEvent, Span, Switch, TaskRef, Wakeup,
    };

    fn t(pid: Tid) -> TaskRef {
        TaskRef {
            comm: Comm::new("t"),
            pid,
            prio: 120,
        }
    }

    fn ev(ts: Ts, cpu: Cpu, pid: Tid, kind: EventKind) -> Event {
        Event {
            ts,
            cpu,
            pid,
            span: Span::default(),
            kind,
            callchain: None,
        }
    }

    fn sw(ts: Ts, cpu: Cpu, prev: Tid, state: &str, next: Tid) -> Event {
        ev(
            ts,
            cpu,
            prev,
            EventKind::Switch(Switch {
                prev: t(prev),
                prev_state: PrevState::parse(state).unwrap(),
                next: t(next),
            }),
        )
    }

    fn waking(ts: Ts, cpu: Cpu, waker: Tid, task: Tid) -> Event {
        ev(
            ts,
            cpu,
            waker,
            EventKind::Waking(Wakeup {
                task: t(task),
                target_cpu: Some(cpu),
            }),
        )
    }

    fn generic(ts: Ts, cpu: Cpu, pid: Tid, name: &str, fields: Vec<(String, FieldValue)>) -> Event {
        ev(
            ts,
            cpu,
            pid,
            EventKind::Generic(Box::new(GenericEvent {
                system: None,
                name: name.into(),
                fields,
            })),
        )
    }

    #[test]
    fn who_ended_each_sleep() {
        let mut s = SleepTracker::new(WakeupSelector::preferring_waking(true));
        // 10 blocks (D); a request completes in an irq on CPU 1, which wakes it
        s.push(&sw(100, 0, 10, "D", 0));
        s.push(&generic(150, 1, 0, "irq_handler_entry", vec![]));
        let mut b = BlockEvent::new(BlockAction::Complete);
        b.dev = Some(BlockDev::new(7, 0));
        b.sector = 4096;
        s.push(&ev(160, 1, 0, EventKind::Block(Box::new(b))));
        s.push(&waking(170, 1, 0, 10));
        s.push(&generic(180, 1, 0, "irq_handler_exit", vec![]));
        // 11 sleeps (S); kworker 12 running a work item wakes it
        s.push(&sw(200, 0, 11, "S", 12));
        s.push(&generic(
            210,
            0,
            12,
            "workqueue_execute_start",
            vec![("function".into(), FieldValue::UInt(0xffff_1234))],
        ));
        s.push(&waking(2_000_000, 0, 12, 11));
        // 13 sleeps and is switched in with no wakeup recorded (a dropped event)
        s.push(&sw(300, 1, 13, "S", 0));
        s.push(&sw(2_100_000, 1, 0, "R", 13));
        // 14 is woken without having been seen asleep; 15 never wakes
        s.push(&waking(2_200_000, 0, 12, 14));
        s.push(&sw(2_300_000, 1, 15, "S", 0));
        let (sleeps, counts) = s.finish();
        assert_eq!(sleeps.len(), 3);
        let w = sleeps[0].waker.unwrap();
        assert_eq!(
            (sleeps[0].pid, sleeps[0].start_ns, sleeps[0].end_ns),
            (10, 100, 170)
        );
        assert_eq!(sleeps[0].state.to_string(), "D");
        assert_eq!(w.context, WakeContext::Interrupt);
        assert_eq!(
            w.after,
            Some(WakeCause::BlockComplete {
                dev: 7 << 20,
                sector: 4096,
                ts_ns: 160
            })
        );
        let w = sleeps[1].waker.unwrap();
        assert_eq!((w.pid, w.context), (12, WakeContext::Task));
        assert_eq!(
            w.after,
            Some(WakeCause::WorkItem {
                function: 0xffff_1234
            })
        );
        assert_eq!((sleeps[2].pid, sleeps[2].waker), (13, None));
        assert_eq!(
            counts,
            SleepCounts {
                ended_without_wakeup: 1,
                wakeups_without_sleep: 1,
                unfinished: 1
            }
        );
    }
}
