//! [`Emitter`]: released entries (in perf's order) → [`SchedBatch`] records, on the
//! caller's thread.
//!
//! * The name rule of [`stallscope_model::sched_record`]: before an event naming a task, a
//!   `PayloadComm` record when the name differs from the stream's current one for that tid
//!   ([`StreamNames`] on interned ids); a fork sets the child's name; Fork / TaskComm
//!   records get their name's index in the batch.
//! * The general reader's out-of-order check: a released record older than one already
//!   emitted would be a data-quality note there, so it is a bail-out here.

use stallscope_model::{Comm, SchedBatch, SchedRecord, SchedRecordKind, Tid};

use super::names::StreamNames;
use super::walk::{Released, SKIP};
use crate::lean::LeanBail;

/// The emitting state: names by id (a mirror of the walker's interner) and per tid.
#[derive(Default)]
pub struct Emitter {
    comms: Vec<Comm>,
    stream: StreamNames,
    last_emitted: u64,
}

impl Emitter {
    /// Appends the records of `rel` to `batch`.
    pub fn emit(&mut self, rel: &Released, batch: &mut SchedBatch) -> Result<(), LeanBail> {
        self.comms.extend_from_slice(&rel.comms);
        let Emitter {
            comms,
            stream,
            last_emitted,
        } = self;
        let comm = |id: u32| comms.get(id as usize).copied().unwrap_or(Comm::EMPTY);
        for e in &rel.entries {
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
