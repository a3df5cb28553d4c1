//! [`Orderer`]: walked entries (file order, with the FINISHED_ROUND positions) → perf's
//! order → [`SchedBatch`] records, on the caller's thread.
//!
//! * Ordering, exactly as `super::super::order` does for the general reader: at a round
//!   end the queue is sorted by time (stable: file order on ties) and every entry with time
//!   ≤ the newest time seen up to the previous round end is released; at the end of the
//!   data everything is. A queue reaching `MAX_PENDING` (the general reader's forced
//!   flush, a data-quality note there) is a bail-out.
//! * The name rule of [`stallscope_model::sched_record`]: before an event naming a task, a
//!   `PayloadComm` record when the name differs from the stream's current one for that tid
//!   ([`StreamNames`] on interned ids); a fork sets the child's name; Fork / TaskComm
//!   records get their name's index in the batch.
//! * The general reader's out-of-order check: a released record older than one already
//!   emitted would be a data-quality note there, so it is a bail-out here.

use stallscope_model::{Comm, SchedBatch, SchedRecord, SchedRecordKind, Tid};

use super::super::order::MAX_PENDING;
use super::names::StreamNames;
use super::walk::{Entry, Walked, SKIP};
use crate::lean::LeanBail;

/// The ordering queue and the emitting state: names by id (a mirror of the walker's
/// interner) and per tid.
#[derive(Default)]
pub struct Orderer {
    pending: Vec<Entry>,
    limit: u64,
    max_ts: u64,
    comms: Vec<Comm>,
    stream: StreamNames,
    last_emitted: u64,
}

impl Orderer {
    /// Queues the entries of `w`, applies its round ends (and its end of data), and appends
    /// the records released to `batch`.
    pub fn take(&mut self, w: &Walked, batch: &mut SchedBatch) -> Result<(), LeanBail> {
        self.comms.extend_from_slice(&w.comms);
        let mut start = 0;
        for &end in &w.round_ends {
            self.queue(w.entries.get(start..end).unwrap_or(&[]))?;
            self.pending.sort_by_key(|e| e.rec.ts);
            let limit = self.limit;
            let n = self.pending.partition_point(|e| e.rec.ts <= limit);
            self.emit(n, batch)?;
            self.limit = self.max_ts;
            start = end;
        }
        self.queue(w.entries.get(start..).unwrap_or(&[]))?;
        if w.done {
            self.pending.sort_by_key(|e| e.rec.ts);
            self.emit(self.pending.len(), batch)?;
        }
        Ok(())
    }

    /// Appends entries to the queue (the general reader checks its size after each push;
    /// the queue only grows between round ends, so checking after the run is the same).
    fn queue(&mut self, entries: &[Entry]) -> Result<(), LeanBail> {
        for e in entries {
            self.max_ts = self.max_ts.max(e.rec.ts);
        }
        self.pending.extend_from_slice(entries);
        if self.pending.len() >= MAX_PENDING {
            return Err(LeanBail::new("too many records queued without a round end"));
        }
        Ok(())
    }

    /// Emits the first `n` queued (sorted) entries into `batch` and drops them.
    fn emit(&mut self, n: usize, batch: &mut SchedBatch) -> Result<(), LeanBail> {
        let Orderer {
            pending,
            comms,
            stream,
            last_emitted,
            ..
        } = self;
        let comm = |id: u32| comms.get(id as usize).copied().unwrap_or(Comm::EMPTY);
        let n = n.min(pending.len());
        for e in &pending[..n] {
            let r = e.rec;
            if r.ts < *last_emitted {
                return Err(LeanBail::new(format!(
                    "a record older than one already emitted at offset {:#x}",
                    r.pos
                )));
            }
            *last_emitted = r.ts;
            match r.kind {
                SchedRecordKind::Switch => {
                    note(stream, comm, r.a, e.n1, &r, batch);
                    note(stream, comm, r.b, e.n2, &r, batch);
                    batch.records.push(r);
                }
                SchedRecordKind::Waking
                | SchedRecordKind::Wakeup
                | SchedRecordKind::WakeupNew
                | SchedRecordKind::Migrate
                | SchedRecordKind::StatRuntime => {
                    note(stream, comm, r.a, e.n1, &r, batch);
                    batch.records.push(r);
                }
                SchedRecordKind::Fork => {
                    stream.set(r.a, e.n1);
                    let mut r = r;
                    r.value = batch.push_comm(comm(e.n1));
                    batch.records.push(r);
                }
                SchedRecordKind::TaskComm => {
                    let mut r = r;
                    r.value = batch.push_comm(comm(e.n1));
                    batch.records.push(r);
                }
                // FORK / EXIT side-band records: ordered, no event.
                _ if e.n1 == SKIP => {}
                _ => batch.records.push(r),
            }
        }
        pending.drain(..n);
        Ok(())
    }
}

/// The name rule: a `PayloadComm` record before `r` when `tid`'s name changed.
#[inline]
fn note(
    stream: &mut StreamNames,
    comm: impl Fn(u32) -> Comm,
    tid: Tid,
    id: u32,
    r: &SchedRecord,
    batch: &mut SchedBatch,
) {
    if stream.set(tid, id) {
        let mut p = SchedRecord::new(SchedRecordKind::PayloadComm, r.ts, r.cpu, r.pos);
        p.a = tid;
        p.value = batch.push_comm(comm(id));
        batch.records.push(p);
    }
}
