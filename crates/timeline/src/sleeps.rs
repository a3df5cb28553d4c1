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
//! after     block_complete   a block request completed on that CPU just before (≤ 1 ms),
//!                            and the wakeup is not in a task's context (an interrupt,
//!                            softirq or idle; or no irq events to tell)
//!           after_own_wait   the waker's own last sleep ended inside this one (it released
//!                            what the sleeper waited for after its own wait)
//!           work_item        the waker was running a work item (its function), with who
//!                            queued it and when, and the block completion on the
//!                            queuing CPU just before the queueing (≤ 1 ms), if any
//! ```
//!
//! A tracker made [`SleepTracker::keeping_at_least`] a length keeps only sleeps that long
//! (the counts still cover all of them), so that a long trace costs memory only for the
//! sleeps a chain can be made of. A task whose first event in the trace is a wakeup slept
//! since before the trace: [`SleepTracker::asleep_before_trace`] says when it woke.
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
use crate::workers::{decode, WorkFn};

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
        /// Sectors completed (0: the end of a flush sequence, e.g. a preflush/FUA write's
        /// final completion).
        nr_sector: u32,
        /// Completion time.
        ts_ns: Ts,
    },
    /// The waker was running a work item.
    WorkItem {
        /// The work function: an index into [`SleepTracker::work_functions`].
        function: u32,
        /// When the item was queued (`workqueue_queue_work`), when recorded.
        queued_ns: Option<Ts>,
        /// When the worker started it (`workqueue_execute_start`).
        started_ns: Ts,
        /// The task that queued it (0: idle / interrupt on an idle CPU).
        queued_by: Option<Tid>,
        /// The CPU it was queued on.
        queued_cpu: Option<Cpu>,
        /// A block request completed on the queuing CPU just before the queueing (≤ 1 ms):
        /// (device, sector, sectors, completion time).
        queued_after_complete: Option<(u64, u64, u32, Ts)>,
    },
    /// The waker (a task) had just ended a sleep of its own that ended inside this one: it
    /// released what the sleeper waited for after its own wait.
    AfterOwnWait {
        /// The waker's sleep: start.
        start_ns: Ts,
        /// Its end (the waker's wakeup).
        end_ns: Ts,
        /// Its state (`D`, `S`, …).
        #[serde(serialize_with = "state_text")]
        state: PrevState,
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
    /// The interrupt line when the wakeup came from a hard irq handler
    /// (`irq_handler_entry`'s `irq`; its name: [`SleepTracker::irq_names`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub irq: Option<u32>,
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
    cpus: Vec<CpuState>,
    /// The work item each kworker is running.
    working: FxHashMap<Tid, WakeCause>,
    /// Queued work items by work struct: (time, task, CPU, completion just before).
    queued: FxHashMap<u64, QueuedWork>,
    /// Work functions seen, interned.
    functions: Vec<WorkFn>,
    function_index: FxHashMap<WorkFn, u32>,
    /// Tasks seen in a switch (running, or going to sleep).
    seen: TidSet,
    /// Interrupt names by line (`irq_handler_entry`'s `name`).
    irq_names: std::collections::BTreeMap<u32, String>,
    /// Each task's last ended sleep (followed states only): start, end, state.
    last_sleep: FxHashMap<Tid, (Ts, Ts, PrevState)>,
    /// Tasks whose first event was a wakeup: when they woke.
    before_trace: FxHashMap<Tid, Ts>,
    /// Sleeps shorter than this are counted, not kept.
    min_len: Ts,
    /// Only sleeps in a state with one of these [`PrevState`] bits are kept (0: all).
    only_states: u16,
    /// Whether any irq or softirq entry was seen (else a task's wakeup may be an
    /// interrupt's).
    irq_events: bool,
    sleeps: Vec<Sleep>,
    counts: SleepCounts,
}

/// A queued work item: when, by whom, on which CPU, after which block completion.
/// Per CPU: irq and softirq nesting, the last block completion (time, device, sector,
/// sectors).
#[derive(Clone, Copy, Debug, Default)]
struct CpuState {
    in_irq: u32,
    /// The irq line of the innermost handler running.
    irq: Option<u32>,
    in_softirq: u32,
    last_complete: Option<(Ts, u64, u64, u32)>,
}

/// A set of task ids (a bitmap: one bit per id up to the highest seen).
#[derive(Debug, Default)]
struct TidSet(Vec<u64>);

impl TidSet {
    /// Adds `t`; true when it was not there (negative ids are never added).
    #[inline]
    fn insert(&mut self, t: Tid) -> bool {
        let Ok(t) = usize::try_from(t) else {
            return false;
        };
        let (word, bit) = (t / 64, 1u64 << (t % 64));
        if word >= self.0.len() {
            self.0.resize(word + 1, 0);
        }
        let fresh = self.0[word] & bit == 0;
        self.0[word] |= bit;
        fresh
    }
}

type QueuedWork = (Ts, Tid, Cpu, Option<(u64, u64, u32, Ts)>);

impl SleepTracker {
    /// A tracker choosing wakeup events with `wakeups` (as timehist does).
    pub fn new(wakeups: WakeupSelector) -> SleepTracker {
        SleepTracker {
            wakeups,
            asleep: FxHashMap::default(),
            cpus: Vec::new(),
            working: FxHashMap::default(),
            queued: FxHashMap::default(),
            functions: Vec::new(),
            function_index: FxHashMap::default(),
            seen: TidSet::default(),
            before_trace: FxHashMap::default(),
            last_sleep: FxHashMap::default(),
            irq_names: std::collections::BTreeMap::new(),
            min_len: 0,
            only_states: 0,
            irq_events: false,
            sleeps: Vec::new(),
            counts: SleepCounts::default(),
        }
    }

    /// The same tracker choosing wakeups with `wakeups` instead (before its first event:
    /// the rule of the inputs it will read, [`WakeupSelector::for_inputs`]).
    pub fn choosing_wakeups(mut self, wakeups: WakeupSelector) -> SleepTracker {
        self.wakeups = wakeups;
        self
    }

    /// The same tracker keeping only sleeps at least `min_len_ns` long.
    pub fn keeping_at_least(mut self, min_len_ns: Ts) -> SleepTracker {
        self.min_len = min_len_ns;
        self
    }

    /// Interrupt names by line, from `irq_handler_entry` (`virtio2-req.0`, `nvme0q3`).
    pub fn irq_names(&self) -> &std::collections::BTreeMap<u32, String> {
        &self.irq_names
    }

    /// The work functions [`WakeCause::WorkItem`] indexes.
    pub fn work_functions(&self) -> &[WorkFn] {
        &self.functions
    }

    fn intern(&mut self, f: WorkFn) -> u32 {
        if let Some(&i) = self.function_index.get(&f) {
            return i;
        }
        let i = u32::try_from(self.functions.len()).unwrap_or(u32::MAX);
        self.functions.push(f.clone());
        self.function_index.insert(f, i);
        i
    }

    /// The same tracker keeping only sleeps in a state with one of the [`PrevState`] bits
    /// `states` ([`PrevState::D`] for chains of uninterruptible sleeps). Sleeps in other
    /// states are not followed at all (their wakeups count as wakeups without a sleep).
    pub fn keeping_states(mut self, states: u16) -> SleepTracker {
        self.only_states = states;
        self
    }

    /// Whether a sleep in `state` is kept.
    #[inline]
    pub fn keeps_state(&self, state: PrevState) -> bool {
        self.only_states == 0 || state.bits() & self.only_states != 0
    }

    /// The sleeps kept so far, in the order they ended.
    pub fn sleeps(&self) -> &[Sleep] {
        &self.sleeps
    }

    /// Tasks whose first event in the trace was a wakeup (asleep since before the trace),
    /// with the time of that wakeup.
    pub fn asleep_before_trace(&self) -> &FxHashMap<Tid, Ts> {
        &self.before_trace
    }

    /// The block completion on `cpu` at most [`COMPLETION_BEFORE_WAKEUP_NS`] before `ts`.
    fn completion_before(&self, cpu: Cpu, ts: Ts) -> Option<(u64, u64, u32, Ts)> {
        match self
            .cpus
            .get(cpu as usize)
            .and_then(|c| c.last_complete.as_ref())
        {
            Some(&(t, dev, sector, nr)) if ts.saturating_sub(t) <= COMPLETION_BEFORE_WAKEUP_NS => {
                Some((dev, sector, nr, t))
            }
            _ => None,
        }
    }

    /// `cpu`'s state (grown on demand).
    fn cpu(&mut self, cpu: Cpu) -> &mut CpuState {
        let i = cpu as usize;
        if i >= self.cpus.len() {
            self.cpus.resize(i + 1, CpuState::default());
        }
        &mut self.cpus[i]
    }

    /// The context of a wakeup recorded by `pid` on `cpu`.
    fn context(&self, pid: Tid, cpu: Cpu) -> WakeContext {
        let c = self.cpus.get(cpu as usize).copied().unwrap_or_default();
        if c.in_irq > 0 {
            WakeContext::Interrupt
        } else if c.in_softirq > 0 {
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
        if let Some(sleep) = self.asleep.remove(&pid) {
            self.ended(pid, sleep, ts, waker);
        } else if waker.is_some() {
            self.counts.wakeups_without_sleep += 1;
        }
    }

    /// Records the end of `pid`'s sleep `(start, state, cpu)` at `ts`.
    fn ended(
        &mut self,
        pid: Tid,
        (start, state, cpu): (Ts, PrevState, Cpu),
        ts: Ts,
        waker: Option<Waker>,
    ) {
        if waker.is_none() {
            self.counts.ended_without_wakeup += 1;
        }
        self.last_sleep.insert(pid, (start, ts, state));
        if ts.saturating_sub(start) < self.min_len || !self.keeps_state(state) {
            return;
        }
        self.sleeps.push(Sleep {
            pid,
            state,
            cpu,
            start_ns: start,
            end_ns: ts,
            waker,
        });
    }

    /// Takes one event.
    pub fn push(&mut self, ev: &Event) {
        match &ev.kind {
            EventKind::Switch(s) => {
                // the next task runs: if it was asleep, no wakeup was seen for it
                if s.next.pid != 0 {
                    self.end(s.next.pid, ev.ts, None);
                    self.seen.insert(s.next.pid);
                }
                if s.prev.pid != 0 && !s.prev_state.is_runnable() {
                    self.seen.insert(s.prev.pid);
                    let old = if self.keeps_state(s.prev_state) {
                        self.asleep
                            .insert(s.prev.pid, (ev.ts, s.prev_state, ev.cpu))
                    } else {
                        // a sleep this tracker does not keep is not followed either
                        self.asleep.remove(&s.prev.pid)
                    };
                    if let Some(old) = old {
                        // its own event while "asleep": that sleep ended unseen
                        self.ended(s.prev.pid, old, ev.ts, None);
                    }
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
                        if self.seen.insert(pid) {
                            self.before_trace.insert(pid, ev.ts);
                        }
                    }
                    return;
                }
                let context = self.context(ev.pid, ev.cpu);
                // a completion causes a wakeup in its own (interrupt) context; a task's
                // wakeup after one on its CPU only when irq events cannot tell
                let after = match self
                    .completion_before(ev.cpu, ev.ts)
                    .filter(|_| context != WakeContext::Task)
                {
                    Some((dev, sector, nr_sector, t)) => Some(WakeCause::BlockComplete {
                        dev,
                        sector,
                        nr_sector,
                        ts_ns: t,
                    }),
                    None => self.working.get(&ev.pid).copied().or_else(|| {
                        // the waker's own sleep that ended inside this one
                        let since = self.asleep.get(&pid).map_or(ev.ts, |a| a.0);
                        self.last_sleep
                            .get(&ev.pid)
                            .filter(|&&(_, end, _)| end >= since && end <= ev.ts)
                            .filter(|_| {
                                context != WakeContext::Interrupt && context != WakeContext::Softirq
                            })
                            .map(|&(start_ns, end_ns, state)| WakeCause::AfterOwnWait {
                                start_ns,
                                end_ns,
                                state,
                            })
                    }),
                };
                let irq = match context {
                    WakeContext::Interrupt => self.cpus.get(ev.cpu as usize).and_then(|c| c.irq),
                    _ => None,
                };
                let waker = Waker {
                    pid: ev.pid,
                    cpu: ev.cpu,
                    context,
                    irq,
                    after,
                };
                self.end(pid, ev.ts, Some(waker));
            }
            EventKind::Block(b) if b.action == BlockAction::Complete => {
                let dev = b.dev.map_or(0, |d| u64::from(d.0));
                self.cpu(ev.cpu).last_complete = Some((ev.ts, dev, b.sector, b.nr_sector));
            }
            EventKind::Generic(g) => match g.name.as_str() {
                "irq_handler_entry" => {
                    self.irq_events = true;
                    let irq =
                        g.fields
                            .iter()
                            .find(|(n, _)| n == "irq")
                            .and_then(|(_, v)| match v {
                                FieldValue::UInt(u) => u32::try_from(*u).ok(),
                                FieldValue::Int(i) => u32::try_from(*i).ok(),
                                FieldValue::Str(t) => t.trim().parse().ok(),
                                _ => None,
                            });
                    if let (Some(irq), Some((_, FieldValue::Str(name)))) =
                        (irq, g.fields.iter().find(|(n, _)| n == "name"))
                    {
                        self.irq_names.entry(irq).or_insert_with(|| name.clone());
                    }
                    let c = self.cpu(ev.cpu);
                    c.in_irq += 1;
                    c.irq = irq;
                }
                "irq_handler_exit" => {
                    let c = self.cpu(ev.cpu);
                    c.in_irq = c.in_irq.saturating_sub(1);
                    if c.in_irq == 0 {
                        c.irq = None;
                    }
                }
                "softirq_entry" => {
                    self.irq_events = true;
                    self.cpu(ev.cpu).in_softirq += 1;
                }
                "softirq_exit" => {
                    let c = self.cpu(ev.cpu);
                    c.in_softirq = c.in_softirq.saturating_sub(1);
                }
                "workqueue_queue_work" => {
                    if let Some(w) = decode(g) {
                        let after = self
                            .completion_before(ev.cpu, ev.ts)
                            .filter(|_| self.context(ev.pid, ev.cpu) != WakeContext::Task);
                        self.queued.insert(w.work, (ev.ts, ev.pid, ev.cpu, after));
                    }
                }
                "workqueue_execute_start" => {
                    if let Some(w) = decode(g) {
                        let q = self.queued.remove(&w.work);
                        let function = self.intern(w.function.unwrap_or(WorkFn::Addr(0)));
                        self.working.insert(
                            ev.pid,
                            WakeCause::WorkItem {
                                function,
                                queued_ns: q.map(|q| q.0),
                                started_ns: ev.ts,
                                queued_by: q.map(|q| q.1),
                                queued_cpu: q.map(|q| q.2),
                                queued_after_complete: q.and_then(|q| q.3),
                            },
                        );
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
    use crate::testutil::{self, by};
    use stallscope_model::{BlockDev, BlockEvent, TaskRef};

    fn t(pid: Tid) -> TaskRef {
        testutil::named("t", pid)
    }

    fn ev(ts: Ts, cpu: Cpu, pid: Tid, kind: EventKind) -> Event {
        by(pid, cpu, testutil::ev(ts, cpu, kind))
    }

    fn sw(ts: Ts, cpu: Cpu, prev: Tid, state: &str, next: Tid) -> Event {
        by(prev, cpu, testutil::sw(ts, cpu, t(prev), state, t(next)))
    }

    /// `waker` (on `cpu`) wakes `task`.
    fn waking(ts: Ts, cpu: Cpu, waker: Tid, task: Tid) -> Event {
        by(waker, cpu, testutil::waking(ts, t(task)))
    }

    fn generic(ts: Ts, cpu: Cpu, pid: Tid, name: &str, fields: Vec<(String, FieldValue)>) -> Event {
        by(pid, cpu, testutil::generic(ts, name, fields))
    }

    #[test]
    fn a_waker_that_just_ended_its_own_wait_says_so() {
        let mut s = SleepTracker::new(WakeupSelector::preferring_waking(true));
        s.push(&sw(1_000, 0, 20, "D", 21)); // 20 waits (for a lock 21 holds)
        s.push(&sw(2_000, 0, 21, "D", 0)); // 21 waits for its own I/O
        s.push(&waking(9_000, 1, 0, 21)); // the idle CPU (an interrupt) wakes 21
        s.push(&sw(9_500, 0, 0, "R", 21));
        s.push(&waking(9_800, 0, 21, 20)); // 21 releases: wakes 20
                                           // a wakeup by a task whose last sleep ended before the sleeper's began says nothing
        s.push(&sw(10_000, 0, 22, "S", 21));
        s.push(&waking(12_000, 0, 21, 22));
        let (sleeps, _) = s.finish();
        let of = |pid| sleeps.iter().find(|x| x.pid == pid).and_then(|x| x.waker);
        assert_eq!(
            of(20).and_then(|w| w.after),
            Some(WakeCause::AfterOwnWait {
                start_ns: 2_000,
                end_ns: 9_000,
                state: PrevState::parse("D").unwrap()
            })
        );
        assert_eq!(of(22).map(|w| w.after), Some(None));
    }

    #[test]
    fn who_ended_each_sleep() {
        let mut s = SleepTracker::new(WakeupSelector::preferring_waking(true));
        // 10 blocks (D); a request completes in an irq on CPU 1, which wakes it
        s.push(&sw(100, 0, 10, "D", 0));
        s.push(&generic(
            150,
            1,
            0,
            "irq_handler_entry",
            vec![
                ("irq".into(), FieldValue::Int(25)),
                ("name".into(), FieldValue::Str("virtio2-req.0".into())),
            ],
        ));
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
            vec![
                ("work".into(), FieldValue::UInt(0xffff_8888)),
                ("function".into(), FieldValue::UInt(0xffff_1234)),
            ],
        ));
        s.push(&waking(2_000_000, 0, 12, 11));
        // 13 sleeps and is switched in with no wakeup recorded (a dropped event)
        s.push(&sw(300, 1, 13, "S", 0));
        s.push(&sw(2_100_000, 1, 0, "R", 13));
        // 14 is woken without having been seen asleep; 15 never wakes
        s.push(&waking(2_200_000, 0, 12, 14));
        s.push(&sw(2_300_000, 1, 15, "S", 0));
        let s_functions = s.work_functions().to_vec();
        let irq_names = s.irq_names().clone();
        let (sleeps, counts) = s.finish();
        assert_eq!(sleeps.len(), 3);
        let w = sleeps[0].waker.unwrap();
        assert_eq!(
            (sleeps[0].pid, sleeps[0].start_ns, sleeps[0].end_ns),
            (10, 100, 170)
        );
        assert_eq!(sleeps[0].state.to_string(), "D");
        assert_eq!(w.context, WakeContext::Interrupt);
        assert_eq!(w.irq, Some(25));
        assert_eq!(
            irq_names.get(&25).map(String::as_str),
            Some("virtio2-req.0")
        );
        assert_eq!(
            w.after,
            Some(WakeCause::BlockComplete {
                dev: 7 << 20,
                sector: 4096,
                nr_sector: 0,
                ts_ns: 160
            })
        );
        let w = sleeps[1].waker.unwrap();
        assert_eq!((w.pid, w.context), (12, WakeContext::Task));
        assert_eq!(
            w.after,
            Some(WakeCause::WorkItem {
                function: 0,
                queued_ns: None,
                started_ns: 210,
                queued_by: None,
                queued_cpu: None,
                queued_after_complete: None,
            })
        );
        assert_eq!(s_functions, vec![WorkFn::Addr(0xffff_1234)]);
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
