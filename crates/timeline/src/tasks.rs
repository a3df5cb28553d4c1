//! [`TaskTable`]: maps kernel task ids to dense slots holding the task's name and one
//! analysis's per-task data.
//!
//! Lookups go through a table indexed by tid (tids below 2^22, the kernel's largest
//! `pid_max`; it grows to the largest tid seen, 4 bytes per tid) and an `FxHashMap` for any
//! other value; the data lives in a `Vec`, so an analysis touches one small struct per event
//! and allocates only when a task is first seen.
//!
//! Naming follows perf: a name from a side-band record (perf `COMM`, i.e.
//! [`EventKind::TaskComm`](stallscope_model::EventKind::TaskComm), which perf also
//! synthesizes for every task alive at record start) wins; without one, the latest name seen
//! in an event payload (`prev_comm`, `next_comm`, `comm`) is used.
//!
//! Task ids are reused by the kernel. When a fork creates a task whose tid already has a
//! slot, [`TaskTable::retire`] detaches the old slot (it stays in [`TaskTable::slots`], as
//! perf keeps the old thread's numbers) and the next lookup creates a fresh one.

use rustc_hash::FxHashMap;
use stallscope_model::{Comm, Tid};

/// One task: identity, name, and an analysis's data.
#[derive(Clone, Debug)]
pub struct TaskSlot<T> {
    /// Kernel task id.
    pub tid: Tid,
    /// Thread-group id (process id), when a side-band record said.
    pub tgid: Option<Tid>,
    /// Current name.
    pub comm: Comm,
    /// True once a side-band record named the task (payload names are then ignored).
    named_by_sideband: bool,
    /// The name the lean record stream last gave this tid (see
    /// `stallscope_model::sched_record`): the payload name of a lean record's task.
    stream_comm: Comm,
    /// True when `stream_comm` changed since it was last applied as a payload name
    /// (applying an unchanged name again changes nothing, so it is skipped).
    stream_pending: bool,
    /// The analysis's per-task data.
    pub data: T,
}

/// Tids below this are looked up by direct indexing.
const DIRECT_TIDS: usize = 1 << 22;
/// "No slot" in the direct table.
const NO_SLOT: u32 = u32::MAX;

/// Dense per-task storage keyed by tid.
#[derive(Debug)]
pub struct TaskTable<T> {
    direct: Vec<u32>,
    other: FxHashMap<Tid, u32>,
    slots: Vec<TaskSlot<T>>,
}

impl<T: Default> Default for TaskTable<T> {
    fn default() -> Self {
        TaskTable {
            direct: Vec::new(),
            other: FxHashMap::default(),
            slots: Vec::new(),
        }
    }
}

/// `tid` as an index into the direct table, when it fits.
#[inline]
fn direct_index(tid: Tid) -> Option<usize> {
    usize::try_from(tid).ok().filter(|&t| t < DIRECT_TIDS)
}

impl<T: Default> TaskTable<T> {
    /// The slot of `tid` (created with `T::default()` when new) and whether it was created.
    #[inline(always)]
    pub fn slot(&mut self, tid: Tid) -> (usize, bool) {
        // A known tid below `DIRECT_TIDS`: one load (the table is never longer than that).
        if let Some(&i) = usize::try_from(tid).ok().and_then(|t| self.direct.get(t)) {
            if i != NO_SLOT {
                return (i as usize, false);
            }
        }
        self.slot_slow(tid)
    }

    /// [`TaskTable::slot`] for a tid not in the direct table.
    #[inline(never)]
    fn slot_slow(&mut self, tid: Tid) -> (usize, bool) {
        if let Some(i) = self.find(tid) {
            return (i, false);
        }
        let i = self.slots.len();
        // INVARIANT: u32::MAX - 1 distinct tasks cannot fit in memory anyway.
        let slot_no = u32::try_from(i).unwrap_or(NO_SLOT - 1);
        match direct_index(tid) {
            Some(t) => {
                if t >= self.direct.len() {
                    let len = (t + 1).next_power_of_two().min(DIRECT_TIDS);
                    self.direct.resize(len, NO_SLOT);
                }
                self.direct[t] = slot_no;
            }
            None => {
                self.other.insert(tid, slot_no);
            }
        }
        self.slots.push(TaskSlot {
            tid,
            tgid: None,
            comm: Comm::EMPTY,
            named_by_sideband: false,
            stream_comm: Comm::EMPTY,
            stream_pending: false,
            data: T::default(),
        });
        (i, true)
    }

    /// Records the name a payload gives `tid` (ignored once a side-band record named it).
    /// The name is stored without comparing it first: a store of the unchanged name is
    /// cheaper than the comparison, and the name usually is unchanged.
    #[inline]
    pub fn note_payload_comm(&mut self, i: usize, comm: &Comm) {
        let s = &mut self.slots[i];
        if !s.named_by_sideband && !comm.is_empty() {
            s.comm = *comm;
        }
    }

    /// Records the name a lean record stream gives `tid` from now on (a `PayloadComm`
    /// record); it becomes a payload name when an analysis uses one of the tid's events.
    #[inline]
    pub fn note_stream_comm(&mut self, tid: Tid, comm: &Comm) {
        let (i, _) = self.slot(tid);
        let s = &mut self.slots[i];
        s.stream_comm = *comm;
        s.stream_pending = true;
    }

    /// A lean record of slot `i`'s task is used: its stream name becomes a payload name
    /// ([`TaskTable::note_payload_comm`]), unless it was applied already.
    #[inline(always)]
    pub fn apply_stream_comm(&mut self, i: usize) {
        if self.slots.get(i).is_some_and(|s| s.stream_pending) {
            self.apply_pending_stream_comm(i);
        }
    }

    /// [`TaskTable::apply_stream_comm`] when there is a name to apply (out of line: the
    /// common case is no pending name).
    #[inline(never)]
    fn apply_pending_stream_comm(&mut self, i: usize) {
        if let Some(s) = self.slots.get_mut(i) {
            s.stream_pending = false;
            let comm = s.stream_comm;
            self.note_payload_comm(i, &comm);
        }
    }

    /// Slot `i` was given `comm` as a payload name by an event that also sets the stream's
    /// name (a fork's child name).
    pub fn set_applied_stream_comm(&mut self, i: usize, comm: &Comm) {
        let s = &mut self.slots[i];
        s.stream_comm = *comm;
        s.stream_pending = false;
    }

    /// Records a side-band name (perf `COMM` record): tgid and comm.
    pub fn note_sideband(&mut self, tid: Tid, tgid: Tid, comm: &Comm) {
        let (i, _) = self.slot(tid);
        let s = &mut self.slots[i];
        s.named_by_sideband = true;
        s.comm = *comm;
        if tgid >= 0 {
            s.tgid = Some(tgid);
        }
    }

    /// Detaches `tid`'s current slot (its tid is being reused by a new task).
    pub fn retire(&mut self, tid: Tid) {
        match direct_index(tid) {
            Some(t) => {
                if let Some(e) = self.direct.get_mut(t) {
                    *e = NO_SLOT;
                }
            }
            None => {
                self.other.remove(&tid);
            }
        }
    }
}

impl<T> TaskTable<T> {
    /// The slot index of `tid`, if it has one.
    #[inline]
    pub fn find(&self, tid: Tid) -> Option<usize> {
        match direct_index(tid) {
            Some(t) => self
                .direct
                .get(t)
                .copied()
                .filter(|&i| i != NO_SLOT)
                .map(|i| i as usize),
            None => self.other.get(&tid).map(|&i| i as usize),
        }
    }

    /// Slot by index.
    #[inline]
    pub fn get(&self, i: usize) -> &TaskSlot<T> {
        &self.slots[i]
    }

    /// Slot by index, mutable.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> &mut TaskSlot<T> {
        &mut self.slots[i]
    }

    /// Every slot ever created, retired ones included, in creation order.
    pub fn slots(&self) -> &[TaskSlot<T>] {
        &self.slots
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when no task was seen.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sideband_name_wins_over_payload_names() {
        let mut t: TaskTable<u8> = TaskTable::default();
        let (i, new) = t.slot(12);
        assert!(new);
        t.note_payload_comm(i, &Comm::new("kworker/u8:0"));
        assert_eq!(t.get(i).comm.as_str(), "kworker/u8:0");
        t.note_sideband(12, 12, &Comm::new("kworker/u8:0-lo"));
        t.note_payload_comm(i, &Comm::new("kworker/u8:0"));
        assert_eq!(t.get(i).comm.as_str(), "kworker/u8:0-lo");
        assert_eq!(t.get(i).tgid, Some(12));
        assert_eq!(t.slot(12), (i, false));
    }

    #[test]
    fn retired_tid_gets_a_fresh_slot_and_the_old_one_is_kept() {
        let mut t: TaskTable<u32> = TaskTable::default();
        let (a, _) = t.slot(7);
        t.get_mut(a).data = 5;
        t.retire(7);
        let (b, new) = t.slot(7);
        assert!(new);
        assert_ne!(a, b);
        assert_eq!(t.get(b).data, 0);
        assert_eq!(t.slots().len(), 2);
        assert_eq!(t.get(a).data, 5);
    }

    #[test]
    fn odd_tids_use_the_map() {
        let mut t: TaskTable<u8> = TaskTable::default();
        let ids: Vec<usize> = [-1, 0, 5, 1 << 22, i32::MAX, 4_194_303]
            .iter()
            .map(|&tid| t.slot(tid).0)
            .collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 4, 5]);
        for (k, &tid) in [-1, 0, 5, 1 << 22, i32::MAX, 4_194_303].iter().enumerate() {
            assert_eq!(t.find(tid), Some(k));
            assert_eq!(t.get(k).tid, tid);
        }
        assert_eq!(t.find(6), None);
        t.retire(-1);
        t.retire(5);
        assert_eq!((t.find(-1), t.find(5)), (None, None));
    }
}
