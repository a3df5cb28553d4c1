//! [`Orderer`]: walked entries (file order, with the FINISHED_ROUND positions) → perf's
//! order → [`SchedBatch`] records, on the caller's thread.
//!
//! * Ordering, exactly as `super::super::order` does for the general reader: at a round
//!   end the queue is sorted by time (stable: file order on ties) and every entry with time
//!   ≤ the newest time seen up to the previous round end is released; at the end of the
//!   data everything is (see [`Orderer`] for how the sort is kept to one round). A queue reaching `MAX_PENDING` (the general reader's forced
//!   flush, a data-quality note there) is a bail-out.
//! * The name rule of [`stallscope_model::sched_record`]: before an event naming a task, a
//!   `PayloadComm` record when the name differs from the stream's current one for that tid
//!   ([`StreamNames`] on interned ids); a fork sets the child's name; Fork / TaskComm
//!   records get their name's index in the batch.
//! * The general reader's out-of-order check: a released record older than one already
//!   emitted would be a data-quality note there, so it is a bail-out here.

use stallscope_model::{Comm, SchedBatch, SchedRecord, SchedRecordKind, Tid};

use super::super::order::MAX_PENDING;
use super::names::{copy_new, SharedNames, StreamNames};
use super::walk::{sort_by_time, Entry, Walked, SKIP};
use crate::lean::LeanBail;

/// The ordering queue, kept as two sorted parts: `tail` (entries of earlier rounds not yet
/// released) and `cur` (the current round, in file order until its end, then sorted).
/// Sorting only `cur` and merging it with `tail` (tail first on equal times: its records
/// come first in the file) gives exactly the stable sort of the whole queue. At a round
/// end all of `tail` is normally released (its times are all ≤ the limit), so the unreleased
/// part of `cur` simply becomes the new tail.
#[derive(Default)]
pub struct Orderer {
    /// The walkers' name table.
    names: SharedNames,
    tail: Vec<Entry>,
    tail_start: usize,
    cur: Vec<Entry>,
    limit: u64,
    max_ts: u64,
    out: Emit,
    scratch: Vec<Entry>,
}

impl Orderer {
    /// An orderer reading names from the walkers' table.
    pub fn new(names: SharedNames) -> Orderer {
        Orderer {
            names,
            ..Orderer::default()
        }
    }

    /// Queues the entries of `w`, applies its round ends (and, when `last`, the end of the
    /// data), and appends the records released to `batch`.
    pub fn take(&mut self, w: &Walked, last: bool, batch: &mut SchedBatch) -> Result<(), LeanBail> {
        // Every name id in `w` was interned before `w` was sent.
        copy_new(&self.names, &mut self.out.comms);
        let mut start = 0;
        for &end in &w.round_ends {
            self.queue(w.entries.get(start..end).unwrap_or(&[]))?;
            let limit = self.limit;
            self.release(limit, batch)?;
            self.limit = self.max_ts;
            start = end;
        }
        self.queue(w.entries.get(start..).unwrap_or(&[]))?;
        if last {
            self.release(u64::MAX, batch)?;
        }
        Ok(())
    }

    /// Appends entries to the queue (the general reader checks its size after each push;
    /// the queue only grows between round ends, so checking after the run is the same).
    fn queue(&mut self, entries: &[Entry]) -> Result<(), LeanBail> {
        // A piece arrives sorted: its last entry is its newest.
        if let Some(last) = entries.last() {
            self.max_ts = self.max_ts.max(last.rec.ts);
        }
        self.cur.extend_from_slice(entries);
        if self.tail.len() - self.tail_start + self.cur.len() >= MAX_PENDING {
            return Err(LeanBail::new("too many records queued without a round end"));
        }
        Ok(())
    }

    /// Emits, in time order, every queued entry with time ≤ `limit` into `batch`.
    fn release(&mut self, limit: u64, batch: &mut SchedBatch) -> Result<(), LeanBail> {
        sort_by_time(&mut self.cur, &mut self.scratch);
        let tail = self.tail.get(self.tail_start..).unwrap_or(&[]);
        let kt = tail.partition_point(|e| e.rec.ts <= limit);
        let kc = self.cur.partition_point(|e| e.rec.ts <= limit);
        let out = &mut self.out;
        merge_by_time(&tail[..kt], &self.cur[..kc], |e| out.one(e, batch))?;
        if kt == tail.len() {
            // The usual case: what is left of the round is the new tail.
            std::mem::swap(&mut self.tail, &mut self.cur);
            self.tail_start = kc;
        } else {
            let mut rest = Vec::with_capacity(tail.len() - kt + self.cur.len() - kc);
            merge_by_time(&tail[kt..], &self.cur[kc..], |e| {
                rest.push(*e);
                Ok(())
            })?;
            self.tail = rest;
            self.tail_start = 0;
        }
        self.cur.clear();
        Ok(())
    }
}

/// Visits the entries of two time-sorted runs in time order, `a`'s first on equal times
/// (they come first in the file): the stable merge.
#[inline]
fn merge_by_time(
    a: &[Entry],
    b: &[Entry],
    mut visit: impl FnMut(&Entry) -> Result<(), LeanBail>,
) -> Result<(), LeanBail> {
    let (mut a, mut b) = (a.iter().peekable(), b.iter().peekable());
    loop {
        let e = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x.rec.ts <= y.rec.ts => a.next(),
            (Some(_), Some(_)) => b.next(),
            (Some(_), None) => a.next(),
            (None, _) => b.next(),
        };
        let Some(e) = e else { return Ok(()) };
        visit(e)?;
    }
}

/// The emitting state: names by id (a mirror of the walker's interner) and per tid, and
/// the time of the last record emitted.
#[derive(Default)]
struct Emit {
    comms: Vec<Comm>,
    stream: StreamNames,
    last_emitted: u64,
}

impl Emit {
    /// Appends the records of one released entry to `batch`.
    #[inline]
    fn one(&mut self, e: &Entry, batch: &mut SchedBatch) -> Result<(), LeanBail> {
        let Emit {
            comms,
            stream,
            last_emitted,
        } = self;
        let comm = |id: u32| comms.get(id as usize).copied().unwrap_or(Comm::EMPTY);
        let p = &e.rec;
        let (n1, n2) = e.names();
        if p.ts < *last_emitted {
            return Err(LeanBail::new(format!(
                "a record older than one already emitted at offset {:#x}",
                p.pos
            )));
        }
        *last_emitted = p.ts;
        let at = (p.ts, p.cpu, p.pos);
        use SchedRecordKind as K;
        // `b` and `value` without the packed name ids (back at the encoder's values), computed
        // as values so that the record is written once (see `walk::entry`).
        let (b, value) = match p.kind {
            K::Switch => {
                note(stream, comm, p.a, n1, at, batch);
                note(stream, comm, p.b, n2, at, batch);
                (p.b, 0)
            }
            K::Waking | K::Wakeup | K::WakeupNew | K::Migrate => {
                note(stream, comm, p.a, n1, at, batch);
                (p.b, 0)
            }
            K::StatRuntime => {
                note(stream, comm, p.a, n1, at, batch);
                (0, p.value)
            }
            K::Fork => {
                stream.set(p.a, n1);
                (p.b, batch.push_comm(comm(n1)))
            }
            K::TaskComm => (p.b, batch.push_comm(comm(n1))),
            // FORK / EXIT side-band records: ordered, no event.
            K::Other if n1 == SKIP => return Ok(()),
            K::Other => (p.b, 0),
            K::Lost | K::PayloadComm => (p.b, p.value),
        };
        batch.records.push(SchedRecord {
            ts: p.ts,
            pos: p.pos,
            value,
            a: p.a,
            b,
            cpu: p.cpu,
            prev_state: p.prev_state,
            kind: p.kind,
        });
        Ok(())
    }
}

/// The name rule: a `PayloadComm` record (at `ts`, `cpu`, `pos`) when `tid`'s name changed.
#[inline]
fn note(
    stream: &mut StreamNames,
    comm: impl Fn(u32) -> Comm,
    tid: Tid,
    id: u32,
    (ts, cpu, pos): (u64, u32, u64),
    batch: &mut SchedBatch,
) {
    if stream.set(tid, id) {
        let mut p = SchedRecord::new(SchedRecordKind::PayloadComm, ts, cpu, pos);
        p.a = tid;
        p.value = batch.push_comm(comm(id));
        batch.records.push(p);
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::order::{OrderQueue, Pending};
    use super::super::super::stream::RecordRef;
    use super::super::names::NO_NAME;
    use super::*;

    /// Random rounds through the general reader's queue and through the Orderer: same
    /// order, and a bail-out exactly when the queue reports a late record.
    #[test]
    fn orderer_equals_the_general_ordering_queue() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let (mut late_runs, mut carried) = (0, 0);
        for run in 0..300 {
            let mut q = OrderQueue::default();
            let mut walked = Walked::default();
            let mut want = Vec::new();
            let mut late = false;
            let mut base = 0u64;
            let rounds = 1 + rnd(6);
            let mut pos = 0u64;
            for round in 0..rounds {
                // Two "CPUs", each in time order, overlapping the previous round a little;
                // some runs also jump back in time.
                for _cpu in 0..2 {
                    let mut ts = base.saturating_sub(rnd(30)) + rnd(5);
                    if run % 7 == 0 && rnd(4) == 0 {
                        ts = ts.saturating_sub(200);
                    }
                    for _ in 0..rnd(20) {
                        ts += rnd(10);
                        q.push(Pending::new(
                            ts,
                            true,
                            0,
                            RecordRef {
                                chunk: 0,
                                off: pos as u32,
                                len: 8,
                                file_off: pos,
                            },
                        ));
                        let mut rec = SchedRecord::new(SchedRecordKind::Other, ts, 0, pos);
                        rec.a = 1;
                        walked.entries.push(Entry::new(rec, NO_NAME, NO_NAME));
                        pos += 1;
                    }
                }
                base += 100;
                // As the walker hands them over: each piece of a round sorted.
                super::super::walk::sort_piece(&mut walked, &mut Vec::new());
                if round + 1 < rounds {
                    q.finished_round();
                    walked.round_ends.push(walked.entries.len());
                } else {
                    q.finish();
                }
                while let Some((p, ooo)) = q.pop() {
                    late |= ooo;
                    want.push(p.rec().file_off);
                }
                carried += usize::from(q.pending_len() > 0);
            }
            walked.seg_end = true;
            let mut o = Orderer::default();
            let mut batch = SchedBatch::default();
            match o.take(&walked, true, &mut batch) {
                Ok(()) => {
                    assert!(!late, "run {run}: the general queue saw a late record");
                    let got: Vec<u64> = batch.records.iter().map(|r| r.pos).collect();
                    assert_eq!(got, want, "run {run}");
                }
                Err(_) => {
                    assert!(late, "run {run}: bail-out without a late record");
                    late_runs += 1;
                }
            }
        }
        assert!(late_runs > 0 && carried > 0, "{late_runs} {carried}");
    }

    /// The run-aware sort equals the standard stable sort by time, for one, two and many
    /// runs, with ties.
    #[test]
    fn sort_by_time_is_the_stable_sort() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut scratch = Vec::new();
        for case in 0..500 {
            let runs = 1 + case % 4;
            let mut v = Vec::new();
            for _ in 0..runs {
                let mut ts = rnd(50);
                for _ in 0..rnd(40) {
                    ts += rnd(3);
                    let pos = v.len() as u64;
                    let rec = SchedRecord::new(SchedRecordKind::Other, ts, 0, pos);
                    v.push(Entry::new(rec, NO_NAME, NO_NAME));
                }
            }
            let mut want = v.clone();
            want.sort_by_key(|e| e.rec.ts);
            sort_by_time(&mut v, &mut scratch);
            let pos = |x: &[Entry]| x.iter().map(|e| e.rec.pos).collect::<Vec<_>>();
            assert_eq!(pos(&v), pos(&want), "case {case}");
        }
    }
}
