//! Per-device request waits: from insert (or requeue) to dispatch, with everything that was
//! dispatched on the same device meanwhile.
//!
//! State machine per device, keyed by start sector (zero-length flushes have no wait and
//! are only counted as dispatches):
//!
//! ```text
//!  Q (bio)      ─┐ remembered by sector: queue time and the queuing task (the issuer)
//!  G / I        ─┴→ pending request (adopts the bio at its sector); the wait starts at the
//!                   I (else at the G, else at the Q: devices without an I/O scheduler)
//!  M bio at b   → the pending request ending at b grows (bio back merge); when a pending
//!                 *request* starts at b it was merged away (blktrace's rq merge `M`, the
//!                 `block_rq_merge` tracepoint): its wait ends without a dispatch, the
//!                 request next to it grows and keeps the older start
//!  F bio at b   → the pending request starting at b+len moves to b
//!  D            → the wait ends; pending → in flight. Its length is btt's phase for
//!                 that dispatch, as `iolat` measures it from the same events (one
//!                 [`BlockTracker`]): the longest I2D of its bios, else their M2D
//!                 (merged bios without an I), else Q2D. A request whose bios btt never
//!                 saw queued (their Q was before the trace) gets no btt sample: its wait
//!                 is still I2D by the same definition, D − its I (flagged: btt does not
//!                 count it); without an I it is not measured (counted per device)
//!  R            → in flight → pending again (btt measures the next D from the I again)
//!  C            → in flight request done (its C time is kept for reported waits)
//!  trace end    → waits still pending end at the last event of the trace
//! ```
//!
//! Every dispatch is appended to the device's dispatch log (time, issuer, class; a
//! zero-length flush counts as the task that queued the latest preflush bio), which is
//! trimmed to the oldest pending wait, so that a wait that turns out long can count the
//! requests dispatched past it. Waits at least `threshold` long are kept as [`Wait`]s;
//! the rest only feed the device's median. The I/O scheduler's decisions (bfq/cfq `m`
//! lines, [`super::iosched`]) are logged per device the same way and summarized per wait.

use std::collections::{BTreeMap, VecDeque};

use rustc_hash::FxHashMap;
use stallscope_model::{
    BlockAction, BlockDev, BlockEvent, BlockOp, Comm, Cpu, Event, EventKind, FieldValue, Rwbs,
    Span, Tid, Ts,
};

use stallscope_timeline::block::{BlockSink, BlockTracker, BttPhase, PhaseSample};

use super::class::{Class, CLASSES};
use super::iosched::{self, Decision, Decisions, QueueName};
use crate::evidence::{keep, Kept};

/// The btt phase a dispatched request's wait is (what `iolat` and `btt -A` report).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Insert → dispatch.
    I2D,
    /// Merge → dispatch (a merged bio without an insert).
    M2D,
    /// Queue → dispatch (no insert, no merge: a device without an I/O scheduler).
    Q2D,
}

impl Phase {
    /// btt's name.
    pub fn name(self) -> &'static str {
        match self {
            Phase::I2D => "I2D",
            Phase::M2D => "M2D",
            Phase::Q2D => "Q2D",
        }
    }

    /// Index in [`DeviceSummary::phase_max`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// What the phase starts with, in words.
    pub fn start_words(self) -> &'static str {
        match self {
            Phase::I2D => "insert",
            Phase::M2D => "merge",
            Phase::Q2D => "queueing",
        }
    }
}

/// btt's samples for the block event being processed, and each device's maximum per phase.
#[derive(Default)]
struct DispatchPhases {
    /// Longest I2D, M2D, Q2D of the current event's bios.
    current: [Option<Ts>; 3],
    /// Per device: the longest of each phase so far (iolat's max column).
    max: FxHashMap<BlockDev, [Ts; 3]>,
}

impl BlockSink for DispatchPhases {
    fn phase(&mut self, s: &PhaseSample) {
        let k = match s.phase {
            BttPhase::I2D => Phase::I2D,
            BttPhase::M2D => Phase::M2D,
            BttPhase::Q2D => Phase::Q2D,
            _ => return,
        }
        .index();
        let cur = &mut self.current[k];
        *cur = Some(cur.map_or(s.dur, |c| c.max(s.dur)));
        let m = &mut self.max.entry(s.dev).or_default()[k];
        *m = (*m).max(s.dur);
    }
}

impl DispatchPhases {
    /// The current dispatch's wait: I2D, else M2D, else Q2D.
    fn measured(&self) -> Option<(Phase, Ts)> {
        [Phase::I2D, Phase::M2D, Phase::Q2D]
            .into_iter()
            .find_map(|p| self.current[p.index()].map(|d| (p, d)))
    }
}

/// A task as block events name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Task {
    /// Context pid (-1 unknown).
    pub pid: Tid,
    /// Name the event carries, else empty.
    pub comm: Comm,
}

impl Task {
    fn of(ev: &Event, b: &BlockEvent) -> Task {
        Task {
            pid: ev.pid,
            comm: b.comm.unwrap_or(Comm::EMPTY),
        }
    }
}

/// Where a wait started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartKind {
    /// `I`: inserted into the I/O scheduler.
    Insert,
    /// `R`: put back after a dispatch.
    Requeue,
    /// `G`: allocated (no `I` seen).
    GetRq,
    /// `Q`: queued (no `G` or `I` seen).
    Queue,
}

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitEnd {
    /// Dispatched to the driver.
    Dispatched,
    /// Merged into another request.
    MergedAway,
    /// Still waiting when the trace ended.
    TraceEnd,
}

/// A request waiting in the queue.
#[derive(Clone, Debug)]
pub struct Pending {
    /// Start sector.
    pub sector: u64,
    /// Length in sectors.
    pub nr_sector: u32,
    /// Flags.
    pub rwbs: Rwbs,
    /// `Q` time and task of the bio the request started with.
    pub queue: Option<(Ts, Task)>,
    /// `I` time and task.
    pub insert: Option<(Ts, Task)>,
    /// When the current wait started.
    pub start: Ts,
    /// What the start was.
    pub start_kind: StartKind,
    /// Requeues so far.
    pub requeues: u32,
    /// Bios and requests merged into it.
    pub merges: u32,
    /// Q, G, I, R events, for evidence.
    pub kept: Vec<Kept>,
    /// The btt phase the wait was measured as (dispatched requests).
    pub phase: Option<Phase>,
    /// Measured by btt's definition from its own I, but btt did not count it (no `Q`).
    pub outside_btt: bool,
    /// The scheduler queue that dispatched it: the queue its messages named last before
    /// the `D` (bfq/cfq log the queue they serve right before dispatching from it).
    pub queue_name: Option<QueueName>,
}

impl Pending {
    /// The task the request was issued by: the bio's queuer, else the inserter.
    pub fn issuer(&self) -> Option<Task> {
        self.queue.or(self.insert).map(|(_, t)| t)
    }
}

/// One dispatch on a device (no allocation: the evidence line is rebuilt on demand).
#[derive(Clone, Copy, Debug)]
pub struct Dispatch {
    /// Time.
    pub ts: Ts,
    /// CPU of the event.
    pub cpu: Cpu,
    /// Context pid of the `D`.
    pub pid: Tid,
    /// Source.
    pub span: Span,
    /// The issuer of the dispatched request (queuer, else inserter, else dispatcher).
    pub issuer: Task,
    /// Sector, length, flags and name on the `D` itself.
    pub sector: u64,
    /// Length.
    pub nr_sector: u32,
    /// Flags.
    pub rwbs: Rwbs,
    /// Name the `D` carries.
    pub comm: Option<Comm>,
    /// Class.
    pub class: Class,
}

impl Dispatch {
    /// The `D` event again, for evidence.
    pub fn event(&self, dev: BlockDev) -> Event {
        let mut b = BlockEvent::new(BlockAction::Issue);
        b.dev = Some(dev);
        b.sector = self.sector;
        b.nr_sector = self.nr_sector;
        b.rwbs = self.rwbs;
        b.comm = self.comm;
        Event {
            ts: self.ts,
            cpu: self.cpu,
            pid: self.pid,
            span: self.span,
            kind: EventKind::Block(Box::new(b)),
            callchain: None,
        }
    }
}

/// What was dispatched past a waiting request.
#[derive(Clone, Debug, Default)]
pub struct Passed {
    /// Requests dispatched on the device during the wait.
    pub total: u64,
    /// By class index.
    pub by_class: [u64; CLASSES],
    /// By issuer, most first.
    pub by_issuer: Vec<(Task, u64)>,
    /// The first few dispatches, for evidence.
    pub first: Vec<Dispatch>,
}

/// A wait at least `threshold` long.
#[derive(Clone, Debug)]
pub struct Wait {
    /// Device.
    pub dev: BlockDev,
    /// The request as it waited.
    pub req: Pending,
    /// How it ended.
    pub end: WaitEnd,
    /// When it ended (dispatch, merge, or the trace's last event).
    pub end_ts: Ts,
    /// The ending event (D or the merge), for evidence.
    pub end_event: Option<Kept>,
    /// Who dispatched it.
    pub dispatcher: Option<Task>,
    /// Dispatched past it.
    pub passed: Passed,
    /// Its completion, when seen.
    pub complete: Option<Kept>,
    /// Scheduler messages on the device just before and after the end.
    pub messages: Vec<Kept>,
    /// The scheduler's decisions during the wait (from its `m` lines).
    pub decisions: Decisions,
    /// Messages still to collect after the end.
    messages_due: u8,
}

impl Wait {
    /// Length of the wait.
    pub fn wait(&self) -> Ts {
        self.end_ts.saturating_sub(self.req.start)
    }
}

/// Scheduler messages kept before and after a reported wait's end.
const MESSAGES_AROUND: usize = 3;
/// Dispatches kept per wait for evidence.
const FIRST_PASSED: usize = 3;
/// Bios remembered per device before old ones are dropped.
const BIO_MARK: usize = 1 << 16;

struct InFlight {
    req: Pending,
    /// Index into `waits` when this request's wait was reported.
    wait: Option<usize>,
}

#[derive(Default)]
struct Device {
    bios: FxHashMap<u64, (Ts, Task, Kept)>,
    pending: BTreeMap<u64, Pending>,
    in_flight: FxHashMap<u64, InFlight>,
    log: VecDeque<Dispatch>,
    trim_mark: usize,
    /// Every finished wait (for the median).
    waits: Vec<Ts>,
    recent_messages: VecDeque<Kept>,
    /// Reported waits still collecting messages.
    watching: Vec<usize>,
    messages: u64,
    bfq_messages: u64,
    /// The task that queued the latest preflush / flush bio: zero-length flush requests
    /// (dispatched by the flush machinery's kworker) are counted as its.
    flush_issuer: Option<Task>,
    /// The scheduler's decisions (time order), trimmed like `log`.
    decisions: Vec<(Ts, QueueName, Decision)>,
    decisions_mark: usize,
    decisions_seen: u64,
    /// Dispatched requests btt has no phase for (their bios were never seen queued).
    unmeasured: u64,
    /// The queue the latest queue message named, when and on which CPU.
    last_queue: Option<(Ts, Cpu, QueueName)>,
}

/// What the tracker learned about a device.
#[derive(Clone, Debug, Default)]
pub struct DeviceSummary {
    /// Median of all finished waits (dispatched ones), 0 when none.
    pub median_wait: Ts,
    /// Number of finished waits.
    pub waits: usize,
    /// Scheduler messages seen (`m`).
    pub messages: u64,
    /// Of which start with `bfq`.
    pub bfq_messages: u64,
    /// Scheduler decisions among them (queue served, slice expired, preemption).
    pub decisions: u64,
    /// `iolat`'s maximum I2D, M2D, Q2D on the device (index: [`Phase::index`]).
    pub phase_max: [Ts; 3],
    /// Dispatched requests without a btt phase (never seen queued), not measured.
    pub unmeasured: u64,
}

/// The per-device state machines.
pub struct Tracker {
    threshold: Ts,
    devices: FxHashMap<BlockDev, Device>,
    waits: Vec<Wait>,
    last_ts: Ts,
    /// btt's request model, for the phase each dispatch is measured as.
    btt: BlockTracker,
    phases: DispatchPhases,
}

impl Tracker {
    /// Keeps waits at least `threshold` long.
    pub fn new(threshold: Ts) -> Tracker {
        Tracker {
            threshold,
            devices: FxHashMap::default(),
            waits: Vec::new(),
            last_ts: 0,
            btt: BlockTracker::new(),
            phases: DispatchPhases::default(),
        }
    }

    /// Feeds one event (non-block events only advance the clock).
    pub fn process(&mut self, ev: &Event) {
        self.last_ts = self.last_ts.max(ev.ts);
        let b = match &ev.kind {
            EventKind::Block(b) => b,
            EventKind::Generic(g) if g.name == "block_rq_merge" => {
                // The tracepoint of a request merged into another (no model action yet).
                let field = |name: &str| {
                    g.fields
                        .iter()
                        .find(|(n, _)| n == name)
                        .and_then(|(_, v)| match v {
                            FieldValue::UInt(u) => Some(*u),
                            FieldValue::Int(i) => u64::try_from(*i).ok(),
                            _ => None,
                        })
                };
                if let (Some(dev), Some(sector), Some(nr)) =
                    (field("dev"), field("sector"), field("nr_sector"))
                {
                    let dev = BlockDev(u32::try_from(dev).unwrap_or(u32::MAX));
                    let nr = u32::try_from(nr).unwrap_or(u32::MAX);
                    self.merge_request(dev, ev, sector, nr);
                }
                return;
            }
            _ => return,
        };
        self.phases.current = [None; 3];
        self.btt.process(ev, &mut self.phases);
        let Some(dev) = b.dev else {
            return; // plug/unplug carry no device and do not affect waits
        };
        let d = self.devices.entry(dev).or_default();
        if matches!(b.action, BlockAction::Queue | BlockAction::GetRq)
            && (b.rwbs.preflush || b.rwbs.op == BlockOp::Flush)
        {
            d.flush_issuer = Some(Task::of(ev, b));
        }
        match b.action {
            BlockAction::Queue if b.nr_sector > 0 => {
                if d.bios.len() >= BIO_MARK {
                    // bios never allocated nor merged (lost events, remaps): forget the oldest half
                    let mut ts: Vec<Ts> = d.bios.values().map(|v| v.0).collect();
                    ts.sort_unstable();
                    let cut = ts[ts.len() / 2];
                    d.bios.retain(|_, v| v.0 > cut);
                }
                d.bios.insert(b.sector, (ev.ts, Task::of(ev, b), keep(ev)));
            }
            BlockAction::GetRq | BlockAction::Insert if b.nr_sector > 0 => {
                Self::allocate_or_insert(d, ev, b);
            }
            BlockAction::BackMerge if b.nr_sector > 0 => {
                self.back_merge(dev, ev, b);
            }
            BlockAction::FrontMerge if b.nr_sector > 0 => {
                d.bios.remove(&b.sector);
                let old_key = b.sector.saturating_add(u64::from(b.nr_sector));
                if let Some(mut p) = d.pending.remove(&old_key) {
                    p.sector = b.sector;
                    p.nr_sector = p.nr_sector.saturating_add(b.nr_sector);
                    p.merges += 1;
                    d.pending.insert(b.sector, p);
                }
            }
            BlockAction::Issue => self.dispatch(dev, ev, b),
            BlockAction::Requeue if b.nr_sector > 0 => {
                if let Some(f) = d.in_flight.remove(&b.sector) {
                    let mut p = f.req;
                    p.start = ev.ts;
                    p.start_kind = StartKind::Requeue;
                    p.requeues += 1;
                    p.kept.push(keep(ev));
                    d.pending.insert(b.sector, p);
                }
            }
            BlockAction::Complete if b.nr_sector > 0 => {
                if let Some(f) = d.in_flight.remove(&b.sector) {
                    if let Some(w) = f.wait.and_then(|i| self.waits.get_mut(i)) {
                        w.complete = Some(keep(ev));
                    }
                }
            }
            BlockAction::Message => {
                d.messages += 1;
                if b.message.as_deref().is_some_and(|m| m.starts_with("bfq")) {
                    d.bfq_messages += 1;
                }
                if let Some((q, _)) = b.message.as_deref().and_then(iosched::queue_of) {
                    d.last_queue = Some((ev.ts, ev.cpu, q));
                }
                if let Some((q, what)) = b.message.as_deref().and_then(iosched::parse) {
                    d.decisions.push((ev.ts, q, what));
                    trim_decisions(d);
                }
                let mut still = Vec::new();
                for &i in &d.watching {
                    if let Some(w) = self.waits.get_mut(i) {
                        w.messages.push(keep(ev));
                        w.messages_due = w.messages_due.saturating_sub(1);
                        if w.messages_due > 0 {
                            still.push(i);
                        }
                    }
                }
                d.watching = still;
                if d.recent_messages.len() == MESSAGES_AROUND {
                    d.recent_messages.pop_front();
                }
                d.recent_messages.push_back(keep(ev));
            }
            _ => {}
        }
    }

    fn allocate_or_insert(d: &mut Device, ev: &Event, b: &BlockEvent) {
        let insert = b.action == BlockAction::Insert;
        if let Some(p) = d.pending.get_mut(&b.sector) {
            if insert && p.insert.is_none() {
                p.insert = Some((ev.ts, Task::of(ev, b)));
                if p.start_kind != StartKind::Requeue {
                    p.start = ev.ts;
                    p.start_kind = StartKind::Insert;
                }
                p.nr_sector = b.nr_sector;
                p.rwbs = b.rwbs;
                p.kept.push(keep(ev));
            }
            return;
        }
        let queue = d.bios.remove(&b.sector);
        let mut kept = Vec::with_capacity(4);
        // The wait counts from the I; a G starts it until an I shows up.
        let (start, start_kind) = if insert {
            (ev.ts, StartKind::Insert)
        } else {
            (ev.ts, StartKind::GetRq)
        };
        let queue = queue.map(|(ts, task, q)| {
            kept.push(q);
            (ts, task)
        });
        kept.push(keep(ev));
        d.pending.insert(
            b.sector,
            Pending {
                sector: b.sector,
                nr_sector: b.nr_sector,
                rwbs: b.rwbs,
                queue,
                insert: insert.then(|| (ev.ts, Task::of(ev, b))),
                start,
                start_kind,
                requeues: 0,
                merges: 0,
                kept,
                phase: None,
                outside_btt: false,
                queue_name: None,
            },
        );
    }

    fn back_merge(&mut self, dev: BlockDev, ev: &Event, b: &BlockEvent) {
        let Some(d) = self.devices.get_mut(&dev) else {
            return;
        };
        d.bios.remove(&b.sector);
        if d.pending.contains_key(&b.sector) {
            // blktrace logs a request merged into another as `M` with the merged request's
            // range (the tracepoint route has `block_rq_merge` for it)
            self.merge_request(dev, ev, b.sector, b.nr_sector);
        } else if let Some(s) = survivor_before(d, b.sector) {
            // a bio joined the request that ends where it starts
            s.nr_sector = s.nr_sector.saturating_add(b.nr_sector);
            s.merges += 1;
        }
    }

    /// The pending request at `sector` was merged into the request next to it: its wait
    /// ends here; the survivor grows and keeps the older start.
    fn merge_request(&mut self, dev: BlockDev, ev: &Event, sector: u64, nr_sector: u32) {
        let Some(d) = self.devices.get_mut(&dev) else {
            return;
        };
        let Some(m) = d.pending.remove(&sector) else {
            return;
        };
        let end = sector.saturating_add(u64::from(nr_sector));
        // back (the request ending at `sector`) first, else front (the request starting
        // where the merged one ends, which moves to `sector`)
        let survivor = if survivor_before(d, sector).is_some() {
            survivor_before(d, sector)
        } else {
            d.pending.remove(&end).map(|mut s| {
                s.sector = sector;
                d.pending.entry(sector).or_insert(s)
            })
        };
        if let Some(s) = survivor {
            s.nr_sector = s.nr_sector.saturating_add(nr_sector);
            s.merges += 1 + m.merges;
            if m.start < s.start {
                s.start = m.start;
                s.start_kind = m.start_kind;
            }
        }
        let wait = ev.ts.saturating_sub(m.start);
        if wait >= self.threshold {
            let passed = passed_since(d, m.start, ev.ts);
            let decisions = Decisions::between(&d.decisions, m.start, ev.ts);
            self.waits.push(Wait {
                dev,
                req: m,
                end: WaitEnd::MergedAway,
                end_ts: ev.ts,
                end_event: Some(keep(ev)),
                dispatcher: None,
                passed,
                complete: None,
                messages: Vec::new(),
                decisions,
                messages_due: 0,
            });
        }
    }

    fn dispatch(&mut self, dev: BlockDev, ev: &Event, b: &BlockEvent) {
        let Some(d) = self.devices.get_mut(&dev) else {
            return;
        };
        let me = Task::of(ev, b);
        let measured = self.phases.measured();
        let mut pending = if b.nr_sector == 0 {
            None
        } else if let Some(p) = d.pending.remove(&b.sector) {
            Some(p)
        } else {
            // no G or I seen (no I/O scheduler, or a reader without them): from the Q
            d.bios.remove(&b.sector).map(|(ts, task, q)| Pending {
                sector: b.sector,
                nr_sector: b.nr_sector,
                rwbs: b.rwbs,
                queue: Some((ts, task)),
                insert: None,
                start: ts,
                start_kind: StartKind::Queue,
                requeues: 0,
                merges: 0,
                kept: vec![q],
                phase: None,
                outside_btt: false,
                queue_name: None,
            })
        };
        let issuer = match &pending {
            Some(p) => p.issuer().unwrap_or(me),
            None if b.nr_sector == 0 => d.flush_issuer.unwrap_or(me),
            None => me,
        };
        let mut wait_index = None;
        if let Some(p) = pending.as_mut() {
            // the queue served right before this dispatch (on its CPU, within 1 ms)
            p.queue_name = d
                .last_queue
                .as_ref()
                .filter(|(at, cpu, _)| *cpu == ev.cpu && ev.ts.saturating_sub(*at) <= 1_000_000)
                .map(|(_, _, q)| q.clone());
        }
        let measured_pending = match (pending.as_mut(), measured) {
            (Some(p), Some((phase, wait))) => {
                // btt's phase for this dispatch: the wait starts where the phase does
                p.start = ev.ts.saturating_sub(wait);
                p.phase = Some(phase);
                Some(&*p)
            }
            (Some(p), None) => match p.insert {
                // btt never saw its bios queued: the same I2D, from its own I
                Some((at, _)) => {
                    p.start = at;
                    p.phase = Some(Phase::I2D);
                    p.outside_btt = true;
                    Some(&*p)
                }
                None => {
                    d.unmeasured += 1;
                    None
                }
            },
            (None, _) => None,
        };
        if let Some(p) = measured_pending {
            let wait = ev.ts.saturating_sub(p.start);
            d.waits.push(wait);
            if wait >= self.threshold {
                let passed = passed_since(d, p.start, ev.ts);
                let decisions = Decisions::between(&d.decisions, p.start, ev.ts);
                let mut messages: Vec<Kept> = d.recent_messages.iter().cloned().collect();
                messages.retain(|m| m.ts >= p.start);
                wait_index = Some(self.waits.len());
                d.watching.push(self.waits.len());
                self.waits.push(Wait {
                    dev,
                    req: p.clone(),
                    end: WaitEnd::Dispatched,
                    end_ts: ev.ts,
                    end_event: Some(keep(ev)),
                    dispatcher: Some(me),
                    passed,
                    complete: None,
                    messages,
                    decisions,
                    messages_due: u8::try_from(MESSAGES_AROUND).unwrap_or(u8::MAX),
                });
            }
        }
        if let Some(p) = pending {
            d.in_flight.insert(
                b.sector,
                InFlight {
                    req: p,
                    wait: wait_index,
                },
            );
        }
        d.log.push_back(Dispatch {
            ts: ev.ts,
            cpu: ev.cpu,
            pid: ev.pid,
            span: ev.span,
            issuer,
            sector: b.sector,
            nr_sector: b.nr_sector,
            rwbs: b.rwbs,
            comm: b.comm,
            class: Class::of(b.rwbs, b.nr_sector),
        });
        trim_log(d);
    }

    /// Ends every open wait at the last event; returns the waits and per-device summaries.
    pub fn finish(mut self) -> (Vec<Wait>, BTreeMap<BlockDev, DeviceSummary>) {
        let end = self.last_ts;
        let mut summaries = BTreeMap::new();
        let mut devs: Vec<BlockDev> = self.devices.keys().copied().collect();
        devs.sort_unstable();
        for dev in devs {
            let Some(d) = self.devices.get_mut(&dev) else {
                continue; // INVARIANT: the key was just listed
            };
            for p in std::mem::take(&mut d.pending).into_values() {
                if end.saturating_sub(p.start) >= self.threshold {
                    let passed = passed_since(d, p.start, end);
                    let decisions =
                        Decisions::between(&d.decisions, p.start, end.saturating_add(1));
                    self.waits.push(Wait {
                        dev,
                        req: p,
                        end: WaitEnd::TraceEnd,
                        end_ts: end,
                        end_event: None,
                        dispatcher: None,
                        passed,
                        complete: None,
                        messages: d.recent_messages.iter().cloned().collect(),
                        decisions,
                        messages_due: 0,
                    });
                }
            }
            d.waits.sort_unstable();
            let median = d.waits.get(d.waits.len().saturating_sub(1) / 2);
            summaries.insert(
                dev,
                DeviceSummary {
                    median_wait: median.copied().unwrap_or(0),
                    waits: d.waits.len(),
                    messages: d.messages,
                    bfq_messages: d.bfq_messages,
                    decisions: d.decisions_seen,
                    phase_max: self.phases.max.get(&dev).copied().unwrap_or_default(),
                    unmeasured: d.unmeasured,
                },
            );
        }
        (self.waits, summaries)
    }
}

/// The pending request that ends exactly at `sector`.
fn survivor_before(d: &mut Device, sector: u64) -> Option<&mut Pending> {
    d.pending
        .range_mut(..sector)
        .next_back()
        .map(|(_, p)| p)
        .filter(|p| p.sector.saturating_add(u64::from(p.nr_sector)) == sector)
}

/// Dispatches on `d` strictly after `start` and before `end`.
fn passed_since(d: &Device, start: Ts, end: Ts) -> Passed {
    let mut p = Passed::default();
    let mut by: FxHashMap<Tid, (Task, u64)> = FxHashMap::default();
    let from = d.log.partition_point(|x| x.ts <= start);
    for x in d.log.range(from..).take_while(|x| x.ts < end) {
        p.total += 1;
        p.by_class[x.class.index()] += 1;
        by.entry(x.issuer.pid).or_insert((x.issuer, 0)).1 += 1;
        if p.first.len() < FIRST_PASSED {
            p.first.push(*x);
        }
    }
    p.by_issuer = by.into_values().collect();
    p.by_issuer
        .sort_by(|a, b| b.1.cmp(&a.1).then(a.0.pid.cmp(&b.0.pid)));
    p
}

/// Drops scheduler decisions older than every pending wait (amortized, as [`trim_log`]).
fn trim_decisions(d: &mut Device) {
    d.decisions_seen += 1;
    if d.decisions.len() < d.decisions_mark.max(4096) {
        return;
    }
    let oldest = d.pending.values().map(|p| p.start).min();
    match oldest {
        Some(t) => {
            let keep_from = d.decisions.partition_point(|x| x.0 < t);
            d.decisions.drain(..keep_from);
        }
        None => d.decisions.clear(),
    }
    d.decisions_mark = d.decisions.len() * 2;
}

/// Drops dispatches older than every pending wait (amortized: only when the log doubled).
fn trim_log(d: &mut Device) {
    if d.log.len() < d.trim_mark.max(4096) {
        return;
    }
    let oldest = d.pending.values().map(|p| p.start).min();
    match oldest {
        Some(t) => {
            let keep_from = d.log.partition_point(|x| x.ts < t);
            d.log.drain(..keep_from);
        }
        None => d.log.clear(),
    }
    d.trim_mark = d.log.len() * 2;
}
