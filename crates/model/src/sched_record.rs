//! [`SchedRecord`]: a 40-byte scheduler event for the lean paths of analyses that need only
//! task ids, states, CPUs and times (`latency` today).
//!
//! A general reader turns every trace record into a 128-byte [`Event`](crate::Event) with
//! names, priorities and a source span. On a multi-million-event trace building those is most
//! of the work, while `perf sched latency`'s definitions read five fields. A lean reader
//! (perf.data, trace.dat) decodes straight into this record instead, in the order the
//! general reader would have produced the events, so an analysis fed these gives the same
//! numbers as one fed `Event`s. It bails out to the general reader on anything unusual.
//!
//! Names travel separately, so most records carry none. Every event that names a task
//! (switch: prev and next; wakeups, migrate, stat_runtime: the task) is, for names, part of
//! the record stream: a [`SchedRecordKind::PayloadComm`] record (tid in `a`, name in the
//! batch's comm table at index `value`) is placed right before such an event whenever the
//! name it gives that tid differs from the previous name the stream gave it (or the tid is
//! new to the stream; empty names included). So at any record, the name of a task is the
//! last `PayloadComm` for its tid, whether or not the analysis uses the event. `Fork`
//! carries the child's name itself (`value`; it is also the stream's new name for the tid,
//! as a fork may start a new task under a reused tid), and `TaskComm` (side-band names,
//! which are not payload names) carries its own. [`PayloadNames`] implements the rule and
//! [`SchedRecordEncoder`] turns general [`Event`]s into records with it: a lean reader must
//! produce exactly what the encoder makes of the general reader's events.
//!
//! The idle task is the exception. Every CPU's idle task has tid 0 and a name of its own
//! (`swapper/0`, `swapper/1`, …), so its name changes on nearly every switch to or from
//! idle: a million `PayloadComm` records on a busy two-CPU trace, for a name analyses
//! never show. Its names are not part of the stream: one `PayloadComm` record for tid 0
//! comes after the last record, giving the name the last event naming tid 0 gave it (with
//! that event's time, CPU and offset), when any event named it. An analysis that names tid 0
//! takes that record's name as soon as it comes. The kernel names tid 0 only in switches
//! (the idle task is never woken, migrated, forked nor charged runtime), so this is the
//! name it has after the general reader's events.
//!
//! Field use per kind (`a`, `b`, `value`; `cpu`, `ts`, `pos` always meaningful):
//!
//! | kind          | a            | b              | value                     | prev_state |
//! |---------------|--------------|----------------|---------------------------|------------|
//! | Switch        | prev tid     | next tid       | –                         | prev's     |
//! | Waking        | woken tid    | target CPU, -1 | –                         | –          |
//! | Wakeup        | woken tid    | target CPU, -1 | –                         | –          |
//! | WakeupNew     | new tid      | target CPU, -1 | –                         | –          |
//! | Migrate       | tid          | dest CPU       | –                         | –          |
//! | StatRuntime   | tid          | –              | runtime ns                | –          |
//! | Fork          | child tid    | parent tid     | comm index (child's name) | –          |
//! | TaskComm      | tid          | tgid (-1 none) | comm index                | –          |
//! | PayloadComm   | tid          | –              | comm index                | –          |
//! | Lost          | –            | –              | count ([`LOST_UNKNOWN`])  | –          |
//! | Other         | –            | –              | –                         | –          |
//!
//! `Other` stands for any event the analysis does not use (exit, exec, other tracepoints):
//! analyses still count events. `pos` is the record's byte offset in its input (the
//! general reader's `SpanPos::Byte`), for data-quality examples.

use std::collections::HashMap;

use crate::{Comm, Cpu, Event, EventKind, PrevState, Tid, Ts};

/// What a [`SchedRecord`] is (see the module table for its fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SchedRecordKind {
    /// `sched_switch`.
    Switch,
    /// `sched_waking`.
    Waking,
    /// `sched_wakeup`.
    Wakeup,
    /// `sched_wakeup_new`.
    WakeupNew,
    /// `sched_migrate_task`.
    Migrate,
    /// `sched_stat_runtime`.
    StatRuntime,
    /// `sched_process_fork`.
    Fork,
    /// A side-band name (perf `COMM` record): [`EventKind::TaskComm`](crate::EventKind::TaskComm).
    TaskComm,
    /// The name the next event's payload gives a task, when it changed.
    PayloadComm,
    /// Lost events.
    Lost,
    /// An event the lean analyses do not use (still counted).
    Other,
}

/// The tid of the idle tasks, whose names travel at the end of the stream (module docs).
pub const IDLE_TID: Tid = 0;

/// `value` of a `Lost` record whose count is unknown.
pub const LOST_UNKNOWN: u64 = u64::MAX;

/// One lean scheduler record (40 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedRecord {
    /// Timestamp, ns in the trace clock.
    pub ts: Ts,
    /// Byte offset of the record in its input.
    pub pos: u64,
    /// Kind-specific value (see the module table).
    pub value: u64,
    /// First task id (see the module table).
    pub a: Tid,
    /// Second task id or a CPU (see the module table).
    pub b: Tid,
    /// CPU the event was recorded on.
    pub cpu: Cpu,
    /// `prev_state` of a switch (default otherwise).
    pub prev_state: PrevState,
    /// What the record is.
    pub kind: SchedRecordKind,
}

const _: () = assert!(std::mem::size_of::<SchedRecord>() == 40);

impl SchedRecord {
    /// A record of `kind` at `ts` on `cpu`, input offset `pos`, every other field zero.
    #[inline]
    pub fn new(kind: SchedRecordKind, ts: Ts, cpu: Cpu, pos: u64) -> SchedRecord {
        SchedRecord {
            ts,
            pos,
            value: 0,
            a: 0,
            b: 0,
            cpu,
            prev_state: PrevState::default(),
            kind,
        }
    }
}

/// A run of records in analysis order with the names they refer to.
#[derive(Clone, Debug, Default)]
pub struct SchedBatch {
    /// The records, in the order the general reader would produce the events.
    pub records: Vec<SchedRecord>,
    /// Names referred to by `value` of `PayloadComm`, `Fork` and `TaskComm` records.
    pub comms: Vec<Comm>,
}

impl SchedBatch {
    /// Empties the batch, keeping its allocations.
    pub fn clear(&mut self) {
        self.records.clear();
        self.comms.clear();
    }

    /// Stores `comm` and returns its index (for a record's `value`).
    #[inline]
    pub fn push_comm(&mut self, comm: Comm) -> u64 {
        self.comms.push(comm);
        (self.comms.len() - 1) as u64
    }

    /// The name a record's `value` refers to (empty when out of range).
    #[inline]
    pub fn comm(&self, value: u64) -> Comm {
        usize::try_from(value)
            .ok()
            .and_then(|i| self.comms.get(i))
            .copied()
            .unwrap_or(Comm::EMPTY)
    }
}

/// Tids below this are kept in a table indexed by tid (the kernel's largest `pid_max`).
const DIRECT_TIDS: usize = 1 << 22;

/// The stream's current name per tid: decides when a [`SchedRecordKind::PayloadComm`]
/// record is due (see the module docs).
#[derive(Debug, Default)]
pub struct PayloadNames {
    direct: Vec<Option<Comm>>,
    other: HashMap<Tid, Comm>,
    /// The idle task's latest name and where the event giving it is (time, CPU, offset).
    idle: Option<(Comm, (Ts, Cpu, u64))>,
}

impl PayloadNames {
    /// The stream's current name of `tid`, if the stream named it.
    #[inline]
    fn slot(&mut self, tid: Tid) -> Option<&mut Option<Comm>> {
        let t = usize::try_from(tid).ok().filter(|&t| t < DIRECT_TIDS)?;
        if t >= self.direct.len() {
            self.direct
                .resize((t + 1).next_power_of_two().min(DIRECT_TIDS), None);
        }
        self.direct.get_mut(t)
    }

    /// The event at `at` (time, CPU, offset) gives `tid` the name `comm`; true when it
    /// changed the stream's name (or the tid is new). The idle task's name is kept for
    /// [`PayloadNames::finish`] instead (false).
    #[inline]
    pub fn set(&mut self, tid: Tid, comm: &Comm, at: (Ts, Cpu, u64)) -> bool {
        if tid == IDLE_TID {
            self.idle = Some((*comm, at));
            return false;
        }
        match self.slot(tid) {
            Some(cur) => {
                if cur.as_ref() == Some(comm) {
                    return false;
                }
                *cur = Some(*comm);
                true
            }
            None => self.other.insert(tid, *comm).as_ref() != Some(comm),
        }
    }

    /// An event at (`ts`, `cpu`, `pos`) names `tid` `comm`: pushes the `PayloadComm` record
    /// that must precede it, if one is due.
    #[inline]
    pub fn note(&mut self, tid: Tid, comm: &Comm, at: (Ts, Cpu, u64), batch: &mut SchedBatch) {
        if self.set(tid, comm, at) {
            push_payload_comm(tid, *comm, at, batch);
        }
    }

    /// The end of the stream: pushes the idle task's `PayloadComm` record, if any event
    /// named it.
    pub fn finish(&mut self, batch: &mut SchedBatch) {
        if let Some((comm, at)) = self.idle.take() {
            push_payload_comm(IDLE_TID, comm, at, batch);
        }
    }
}

/// Pushes a `PayloadComm` record naming `tid` `comm`, at `at` (time, CPU, offset).
fn push_payload_comm(tid: Tid, comm: Comm, (ts, cpu, pos): (Ts, Cpu, u64), batch: &mut SchedBatch) {
    let mut r = SchedRecord::new(SchedRecordKind::PayloadComm, ts, cpu, pos);
    r.a = tid;
    r.value = batch.push_comm(comm);
    batch.records.push(r);
}

/// Turns general [`Event`]s into [`SchedRecord`]s: the definition every lean reader is
/// tested against.
#[derive(Debug, Default)]
pub struct SchedRecordEncoder {
    names: PayloadNames,
}

impl SchedRecordEncoder {
    /// Appends the records `ev` stands for to `batch`.
    pub fn push(&mut self, ev: &Event, batch: &mut SchedBatch) {
        let pos = match ev.span.pos() {
            crate::SpanPos::Byte(b) => b,
            crate::SpanPos::Line(l) => l,
        };
        let at = (ev.ts, ev.cpu, pos);
        let mut r = SchedRecord::new(SchedRecordKind::Other, ev.ts, ev.cpu, pos);
        let [first, second] = fill_from_kind(&ev.kind, &mut r);
        match (r.kind, first) {
            (SchedRecordKind::Fork, Some(child)) => {
                self.names.set(r.a, child, at);
                r.value = batch.push_comm(*child);
            }
            (SchedRecordKind::TaskComm, Some(comm)) => r.value = batch.push_comm(*comm),
            (SchedRecordKind::Switch, Some(prev)) => {
                self.names.note(r.a, prev, at, batch);
                if let Some(next) = second {
                    self.names.note(r.b, next, at, batch);
                }
            }
            (_, Some(task)) => self.names.note(r.a, task, at, batch),
            (_, None) => {}
        }
        batch.records.push(r);
    }

    /// Appends the records due at the end of the stream (the idle task's name) to `batch`.
    pub fn finish(&mut self, batch: &mut SchedBatch) {
        self.names.finish(batch);
    }
}

/// Fills `r`'s kind, `a`, `b`, `value` and `prev_state` from a general event kind (the
/// module table; `ts`, `cpu` and `pos` are the caller's) and returns the names the event
/// carries: a switch's prev and next names; the task's name for wakeups, migrate and
/// stat_runtime; the child's name for a fork and the name of a side-band `TaskComm`
/// (whose index in the batch a lean reader stores in `value` itself).
pub fn fill_from_kind<'a>(kind: &'a EventKind, r: &mut SchedRecord) -> [Option<&'a Comm>; 2] {
    match kind {
        EventKind::Switch(s) => {
            r.kind = SchedRecordKind::Switch;
            (r.a, r.b, r.prev_state) = (s.prev.pid, s.next.pid, s.prev_state);
            [Some(&s.prev.comm), Some(&s.next.comm)]
        }
        EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => {
            r.kind = match kind {
                EventKind::Waking(_) => SchedRecordKind::Waking,
                EventKind::Wakeup(_) => SchedRecordKind::Wakeup,
                _ => SchedRecordKind::WakeupNew,
            };
            r.a = w.task.pid;
            r.b = w.target_cpu.map_or(-1, |c| c as Tid);
            [Some(&w.task.comm), None]
        }
        EventKind::Migrate(m) => {
            r.kind = SchedRecordKind::Migrate;
            (r.a, r.b) = (m.task.pid, m.dest_cpu as Tid);
            [Some(&m.task.comm), None]
        }
        EventKind::StatRuntime(s) => {
            r.kind = SchedRecordKind::StatRuntime;
            (r.a, r.value) = (s.task.pid, s.runtime);
            [Some(&s.task.comm), None]
        }
        EventKind::Fork {
            parent_pid,
            child_pid,
            child_comm,
            ..
        } => {
            r.kind = SchedRecordKind::Fork;
            (r.a, r.b) = (*child_pid, *parent_pid);
            [Some(child_comm), None]
        }
        EventKind::TaskComm { tgid, tid, comm } => {
            r.kind = SchedRecordKind::TaskComm;
            (r.a, r.b) = (*tid, *tgid);
            [Some(comm), None]
        }
        EventKind::Lost { count } => {
            r.kind = SchedRecordKind::Lost;
            r.value = count.unwrap_or(LOST_UNKNOWN);
            [None, None]
        }
        EventKind::Exit(_)
        | EventKind::Exec { .. }
        | EventKind::Generic(_)
        | EventKind::Mapping(_)
        | EventKind::Block(_) => {
            r.kind = SchedRecordKind::Other;
            [None, None]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A switch at `ts` on `cpu` from (`prev`, `prev_comm`) to (`next`, `next_comm`).
    fn switch(ts: Ts, cpu: Cpu, (prev, pc): (Tid, &str), (next, nc): (Tid, &str)) -> Event {
        let task = |pid, comm| crate::TaskRef {
            comm: Comm::new(comm),
            pid,
            prio: 120,
        };
        Event {
            ts,
            cpu,
            pid: prev,
            span: crate::Span::new(0, crate::SpanPos::Byte(ts * 8)),
            kind: EventKind::Switch(crate::Switch {
                prev: task(prev, pc),
                prev_state: PrevState::parse("S").unwrap_or_default(),
                next: task(next, nc),
            }),
            callchain: None,
        }
    }

    /// Names of tid 0 never come as they change, but once after the last record, with the
    /// last one and its event's place; other tids get theirs before the event as usual.
    #[test]
    fn the_idle_tasks_name_comes_once_at_the_end() {
        let mut enc = SchedRecordEncoder::default();
        let mut b = SchedBatch::default();
        enc.push(&switch(10, 0, (0, "swapper/0"), (5, "a")), &mut b);
        enc.push(&switch(20, 1, (0, "swapper/1"), (6, "b")), &mut b);
        enc.push(&switch(30, 0, (5, "a"), (0, "swapper/0")), &mut b);
        let names = |b: &SchedBatch| -> Vec<(Tid, String)> {
            b.records
                .iter()
                .filter(|r| r.kind == SchedRecordKind::PayloadComm)
                .map(|r| (r.a, b.comm(r.value).as_str().to_string()))
                .collect()
        };
        assert_eq!(names(&b), [(5, "a".into()), (6, "b".into())]);
        let before = b.records.len();
        enc.finish(&mut b);
        assert_eq!(b.records.len(), before + 1);
        let last = b.records[before];
        assert_eq!(
            (last.kind, last.a, last.ts, last.cpu, last.pos),
            (SchedRecordKind::PayloadComm, IDLE_TID, 30, 0, 240)
        );
        assert_eq!(b.comm(last.value).as_str(), "swapper/0");
        // Once only.
        enc.finish(&mut b);
        assert_eq!(b.records.len(), before + 1);
    }

    #[test]
    fn comm_indices_round_trip_and_out_of_range_is_empty() {
        let mut b = SchedBatch::default();
        let i = b.push_comm(Comm::new("kworker/0:1"));
        let j = b.push_comm(Comm::new("fio"));
        assert_eq!((i, j), (0, 1));
        assert_eq!(b.comm(j).as_str(), "fio");
        assert_eq!(b.comm(7), Comm::EMPTY);
        assert_eq!(b.comm(u64::MAX), Comm::EMPTY);
        b.clear();
        assert!(b.records.is_empty() && b.comms.is_empty());
    }
}
