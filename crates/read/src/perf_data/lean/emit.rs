//! [`Orderer`]: walked entries (file order, with the FINISHED_ROUND positions) → perf's
//! order → [`SchedBatch`] records, on the caller's thread.
//!
//! * Ordering, exactly as `super::super::order` does for the general reader: at a round
//!   end the queue is sorted by time (stable: file order on ties) and every entry with time
//!   ≤ the newest time seen up to the previous round end is released; at the end of the
//!   data everything is. A queue reaching `MAX_PENDING` (the general reader's forced
//!   flush, a data-quality note there) is a bail-out.
//! * No entry is copied to be ordered: the queue is a list of *runs*, stretches of the
//!   walkers' buffers each sorted by time (a walker sorts every piece of a round it hands
//!   over), in file order; see [`Orderer`].
//! * The name rule of [`stallscope_model::sched_record`]: before an event naming a task, a
//!   `PayloadComm` record when the name differs from the stream's current one for that tid
//!   ([`StreamNames`] on interned ids); a fork sets the child's name; Fork / TaskComm
//!   records get their name's index in the batch. The idle task's (tid 0) latest name is
//!   kept and given once, after the last record.
//! * What a released entry becomes is the [`Sink`]'s business: [`Records`] makes the
//!   `SchedBatch` records above; [`Entries`] hands the entries on as they are (the
//!   walkers' event-building mode: `super::events` builds the events).
//! * The general reader's out-of-order check: a released record older than one already
//!   emitted would be a data-quality note there, so it is a bail-out here.

use stallscope_model::sched_record::IDLE_TID;
use stallscope_model::{Comm, SchedBatch, SchedRecord, SchedRecordKind, Tid};

use super::super::order::MAX_PENDING;
use super::names::{copy_new, SharedNames, StreamNames};
use super::walk::{Entry, Walked, SKIP};
use crate::lean::LeanBail;

/// Runs queued at most: one more is first merged with the others into one (copied) run.
const MAX_RUNS: usize = 8;
/// How far ahead of the entry emitted the next ones are prefetched.
const PREFETCH_AHEAD: usize = 32;
/// [`Run::buf`] of the run held in [`Orderer::own`].
const OWN: u64 = u64::MAX;

/// A queued stretch `start..end` of a buffer's entries, sorted by time (stable).
#[derive(Clone, Copy, Debug)]
struct Run {
    /// Id of the [`Held`] buffer, or [`OWN`].
    buf: u64,
    start: usize,
    end: usize,
}

/// A walker's buffer kept until none of its entries is queued any more.
struct Held {
    id: u64,
    /// The caller's tag (which walker it came from), handed back by [`Orderer::recycle`].
    tag: usize,
    w: Walked,
}

/// The ordering queue as sorted runs in file order. The stable sort of the whole queue by
/// time is the merge of the runs with ties going to the earlier run (its entries come first
/// in the file), so a release merges the runs' prefixes of times ≤ the limit and leaves
/// their suffixes queued. Usually a round is one or two runs and the previous round's rest
/// one or two more. Past [`MAX_RUNS`] runs, all of them are merged into one owned run
/// (the same queue in the same order), which keeps the merge narrow and the number of
/// buffers held bounded.
pub struct Orderer<S: Sink> {
    /// The walkers' name table.
    names: SharedNames,
    /// Buffers with queued entries, oldest first.
    held: Vec<Held>,
    next_id: u64,
    /// Buffers no longer needed, for [`Orderer::recycle`].
    freed: Vec<(usize, Walked)>,
    runs: Vec<Run>,
    /// The entries of the merged run ([`OWN`]) and a spare buffer to merge into.
    own: Vec<Entry>,
    spare: Vec<Entry>,
    /// Entries queued.
    pending: usize,
    limit: u64,
    max_ts: u64,
    /// Time of the last entry released.
    last_emitted: u64,
    out: S,
}

/// What released entries become (module docs).
pub trait Sink {
    /// Where they go.
    type Batch;
    /// Takes the names the walkers interned since the last call (before each buffer).
    fn names_from(&mut self, names: &SharedNames);
    /// Appends what `e` stands for to `batch`.
    fn one(&mut self, e: &Entry, batch: &mut Self::Batch);
    /// [`Sink::one`] for each of `es`, consecutive released entries.
    #[inline(always)]
    fn run(&mut self, es: &[Entry], batch: &mut Self::Batch) {
        for (k, e) in es.iter().enumerate() {
            // The walkers wrote these entries: ask for them ahead of their turn.
            crate::prefetch::prefetch(es, k + PREFETCH_AHEAD);
            self.one(e, batch);
        }
    }
    /// Appends what comes after the last entry.
    fn end(&mut self, batch: &mut Self::Batch);
    /// Empties `batch`.
    fn clear(batch: &mut Self::Batch);
    /// Whether `batch` is empty.
    fn is_empty(batch: &Self::Batch) -> bool;
}

/// The entries of `r`.
#[inline]
fn run_entries<'a>(held: &'a [Held], own: &'a [Entry], r: &Run) -> &'a [Entry] {
    let all: &[Entry] = if r.buf == OWN {
        own
    } else {
        held.iter()
            .find(|h| h.id == r.buf)
            .map_or(&[], |h| &h.w.entries)
    };
    all.get(r.start..r.end).unwrap_or(&[])
}

impl<S: Sink> Orderer<S> {
    /// An orderer reading names from the walkers' table, releasing into `out`.
    pub fn new(names: SharedNames, out: S) -> Orderer<S> {
        Orderer {
            names,
            held: Vec::new(),
            next_id: 0,
            freed: Vec::new(),
            runs: Vec::new(),
            own: Vec::new(),
            spare: Vec::new(),
            pending: 0,
            limit: 0,
            max_ts: 0,
            last_emitted: 0,
            out,
        }
    }

    /// The walkers' name table.
    pub fn names(&self) -> &SharedNames {
        &self.names
    }

    /// Queues the entries of `w` (a walker's buffer, kept until its entries are released;
    /// `tag` goes back with it from [`Orderer::recycle`]), applies its round ends (and, when
    /// `last`, the end of the data), and appends the records released to `batch`.
    pub fn take(
        &mut self,
        mut w: Walked,
        tag: usize,
        last: bool,
        batch: &mut S::Batch,
    ) -> Result<(), LeanBail> {
        // Every name id in `w` was interned before `w` was sent.
        self.out.names_from(&self.names);
        let id = self.next_id;
        self.next_id += 1;
        let round_ends = std::mem::take(&mut w.round_ends);
        let len = w.entries.len();
        self.held.push(Held { id, tag, w });
        let res = self.take_rounds(id, &round_ends, len, last, batch);
        if let Some(h) = self.held.iter_mut().find(|h| h.id == id) {
            h.w.round_ends = round_ends;
        }
        self.free_unused();
        res
    }

    /// A buffer [`Orderer::take`] was given and no longer needs, with its tag.
    pub fn recycle(&mut self) -> Option<(usize, Walked)> {
        self.freed.pop()
    }

    fn take_rounds(
        &mut self,
        id: u64,
        round_ends: &[usize],
        len: usize,
        last: bool,
        batch: &mut S::Batch,
    ) -> Result<(), LeanBail> {
        let mut start = 0;
        for &end in round_ends {
            self.queue(id, start, end)?;
            let limit = self.limit;
            self.release(limit, batch)?;
            self.limit = self.max_ts;
            start = end;
        }
        self.queue(id, start, len)?;
        if last {
            self.release(u64::MAX, batch)?;
            self.out.end(batch);
        }
        Ok(())
    }

    /// Queues entries `start..end` of buffer `id` (the general reader checks its size
    /// after each push; the queue only grows between round ends, so checking after the
    /// run is the same).
    fn queue(&mut self, id: u64, start: usize, end: usize) -> Result<(), LeanBail> {
        let run = Run {
            buf: id,
            start,
            end,
        };
        let entries = run_entries(&self.held, &self.own, &run);
        // A piece arrives sorted: its last entry is its newest.
        if let Some(last) = entries.last() {
            self.max_ts = self.max_ts.max(last.rec.ts);
            self.pending += entries.len();
            if self.runs.len() >= MAX_RUNS {
                self.merge_all();
            }
            self.runs.push(run);
        }
        if self.pending >= MAX_PENDING {
            return Err(LeanBail::new("too many records queued without a round end"));
        }
        Ok(())
    }

    /// Replaces the queued runs by their merge, in [`Orderer::own`].
    fn merge_all(&mut self) {
        let Orderer {
            held,
            own,
            spare,
            runs,
            ..
        } = self;
        let mut parts = [&[][..]; MAX_RUNS];
        for (p, r) in parts.iter_mut().zip(runs.iter()) {
            *p = run_entries(held, own, r);
        }
        spare.clear();
        merge(&mut parts[..runs.len().min(MAX_RUNS)], |es| {
            spare.extend_from_slice(es)
        });
        std::mem::swap(own, spare);
        runs.clear();
        runs.push(Run {
            buf: OWN,
            start: 0,
            end: own.len(),
        });
    }

    /// Emits, in time order, every queued entry with time ≤ `limit` into `batch`.
    fn release(&mut self, limit: u64, batch: &mut S::Batch) -> Result<(), LeanBail> {
        let Orderer {
            held,
            own,
            runs,
            pending,
            out,
            last_emitted,
            ..
        } = self;
        let mut parts = [&[][..]; MAX_RUNS];
        let n = runs.len().min(MAX_RUNS);
        let mut first: Option<&Entry> = None;
        let mut newest = *last_emitted;
        for (p, r) in parts.iter_mut().zip(runs.iter_mut()) {
            let all = run_entries(held, own, r);
            let k = match all.last() {
                Some(e) if e.rec.ts <= limit => all.len(),
                _ => all.partition_point(|e| e.rec.ts <= limit),
            };
            *p = &all[..k];
            r.start += k;
            *pending -= k;
            if let (Some(h), Some(t)) = (p.first(), p.last()) {
                newest = newest.max(t.rec.ts);
                if first.is_none_or(|f| h.rec.ts < f.rec.ts) {
                    first = Some(h);
                }
            }
        }
        // The merge is in time order: only its first entry can be older than the last
        // one emitted before.
        if let Some(f) = first {
            if f.rec.ts < *last_emitted {
                return Err(LeanBail::new(format!(
                    "a record older than one already emitted at offset {:#x}",
                    f.pos()
                )));
            }
        }
        merge(&mut parts[..n], |es| out.run(es, batch));
        *last_emitted = newest;
        runs.retain(|r| r.start < r.end);
        Ok(())
    }

    /// Moves the buffers no run refers to any more to `freed`.
    fn free_unused(&mut self) {
        let mut i = 0;
        while i < self.held.len() {
            let id = self.held[i].id;
            if self.runs.iter().any(|r| r.buf == id) {
                i += 1;
            } else {
                let h = self.held.remove(i);
                self.freed.push((h.tag, h.w));
            }
        }
    }
}

/// Visits the entries of time-sorted runs (in file order) in time order, an earlier run's
/// first on equal times (the stable merge), as stretches of consecutive entries of one run.
/// `parts` is used up.
#[inline]
fn merge(parts: &mut [&[Entry]], mut visit: impl FnMut(&[Entry])) {
    loop {
        // The run whose head comes first (the earliest run among equal times), and the
        // head that comes next: (time, run) ordering.
        let mut best: Option<(u64, usize)> = None;
        let mut next: Option<(u64, usize)> = None;
        for (i, p) in parts.iter().enumerate() {
            let Some(h) = p.first() else { continue };
            let key = (h.rec.ts, i);
            if best.is_none_or(|b| key < b) {
                next = best;
                best = Some(key);
            } else if next.is_none_or(|n| key < n) {
                next = Some(key);
            }
        }
        let Some((_, i)) = best else { return };
        let run = std::mem::take(&mut parts[i]);
        let taken = match next {
            // One run left: all of it.
            None => run.len(),
            // Entries of run `i` come before the other head while (time, i) < (nt, j).
            Some((nt, j)) => {
                let before = |e: &Entry| e.rec.ts < nt || (e.rec.ts == nt && i < j);
                let mut k = 0;
                while let Some(e) = run.get(k) {
                    if !before(e) {
                        break;
                    }
                    // This reads the walkers' entries first: ask for them ahead.
                    crate::prefetch::prefetch(run, k + PREFETCH_AHEAD);
                    k += 1;
                }
                // The head of run `i` is always before the other head (it is the least
                // (time, run) key), so k >= 1; `max(1)` keeps the loop finite even if that
                // rule were broken (a wrong order the tests catch, rather than a hang).
                k.max(1)
            }
        };
        let (now, rest) = run.split_at(taken);
        visit(now);
        parts[i] = rest;
    }
}

/// The [`Sink`] of the latency path: `SchedBatch` records, with the names per tid of the
/// name rule.
#[derive(Default)]
pub struct Records {
    /// Names by id (a mirror of the walkers' interner).
    comms: Vec<Comm>,
    stream: StreamNames,
    /// The idle task's latest name id and where the event giving it is (time, CPU,
    /// offset): its `PayloadComm` comes at the end of the stream.
    idle: Option<(u32, (u64, u32, u64))>,
}

impl Sink for Records {
    type Batch = SchedBatch;

    fn names_from(&mut self, names: &SharedNames) {
        copy_new(names, &mut self.comms);
    }

    /// Appends the records of one released entry to `batch`.
    #[inline(always)]
    fn one(&mut self, e: &Entry, batch: &mut SchedBatch) {
        let Records {
            comms,
            stream,
            idle,
        } = self;
        let comms: &[Comm] = comms;
        let (n1, n2) = e.names();
        use SchedRecordKind as K;
        // `b` and `value` without the packed name ids (back at the encoder's values).
        let r = &e.rec;
        let (b, value) = match r.kind {
            K::Switch => {
                note(stream, idle, comms, r.a, n1, r, batch);
                note(stream, idle, comms, r.b, n2, r, batch);
                (r.b, 0)
            }
            K::Waking | K::Wakeup | K::WakeupNew | K::Migrate => {
                note(stream, idle, comms, r.a, n1, r, batch);
                (r.b, 0)
            }
            K::StatRuntime => {
                note(stream, idle, comms, r.a, n1, r, batch);
                (0, r.value)
            }
            K::Fork => {
                if r.a == IDLE_TID {
                    *idle = Some((n1, (r.ts, r.cpu, r.pos)));
                } else {
                    stream.set(r.a, n1);
                }
                (r.b, batch.push_comm(comm_of(comms, n1)))
            }
            K::TaskComm => (r.b, batch.push_comm(comm_of(comms, n1))),
            // FORK / EXIT side-band records: ordered, no event.
            K::Other if n1 == SKIP => return,
            K::Other => (r.b, 0),
            K::Lost | K::PayloadComm => (r.b, r.value),
        };
        // Copied whole from the entry, then the two fields set (building the record on the
        // stack first would make the copy wait for those two narrower stores).
        batch.records.push(*r);
        if let Some(out) = batch.records.last_mut() {
            out.b = b;
            out.value = value;
        }
    }

    fn clear(batch: &mut SchedBatch) {
        batch.clear();
    }

    fn is_empty(batch: &SchedBatch) -> bool {
        batch.records.is_empty()
    }

    fn end(&mut self, batch: &mut SchedBatch) {
        // The end of the stream: the idle task's name (see `sched_record`).
        if let Some((id, at)) = self.idle.take() {
            payload_comm(&self.comms, IDLE_TID, id, at, batch);
        }
    }
}

/// The [`Sink`] of the event-building mode: the released entries themselves, copied a
/// stretch at a time (the FORK / EXIT placeholders too: they build no event), for
/// `super::events` to build the events from on the caller's thread.
#[derive(Default)]
pub struct Entries;

impl Sink for Entries {
    type Batch = Vec<Entry>;

    #[inline(always)]
    fn names_from(&mut self, _: &SharedNames) {}

    #[inline(always)]
    fn one(&mut self, e: &Entry, out: &mut Vec<Entry>) {
        out.push(*e);
    }

    #[inline(always)]
    fn run(&mut self, es: &[Entry], out: &mut Vec<Entry>) {
        out.extend_from_slice(es);
    }

    fn end(&mut self, _: &mut Vec<Entry>) {}

    fn clear(batch: &mut Vec<Entry>) {
        batch.clear();
    }

    fn is_empty(batch: &Vec<Entry>) -> bool {
        batch.is_empty()
    }
}

/// The name of id `id` (empty for an unknown one).
#[inline]
pub fn comm_of(comms: &[Comm], id: u32) -> Comm {
    comms.get(id as usize).copied().unwrap_or(Comm::EMPTY)
}

/// The name rule: a `PayloadComm` record (at `r`'s time, CPU and position) when `tid`'s
/// name changed to `id`; the idle task's name is kept in `idle` for the end of the stream.
#[inline(always)]
fn note(
    stream: &mut StreamNames,
    idle: &mut Option<(u32, (u64, u32, u64))>,
    comms: &[Comm],
    tid: Tid,
    id: u32,
    r: &SchedRecord,
    batch: &mut SchedBatch,
) {
    if tid == IDLE_TID {
        *idle = Some((id, (r.ts, r.cpu, r.pos)));
    } else if stream.set(tid, id) {
        payload_comm(comms, tid, id, (r.ts, r.cpu, r.pos), batch);
    }
}

/// The `PayloadComm` record of [`note`], naming `tid` by name id `id` at `at` (time, CPU,
/// offset).
#[cold]
#[inline(never)]
fn payload_comm(comms: &[Comm], tid: Tid, id: u32, at: (u64, u32, u64), batch: &mut SchedBatch) {
    let (ts, cpu, pos) = at;
    let mut p = SchedRecord::new(SchedRecordKind::PayloadComm, ts, cpu, pos);
    p.a = tid;
    p.value = batch.push_comm(comm_of(comms, id));
    batch.records.push(p);
}

#[cfg(test)]
mod tests {
    use super::super::super::order::{OrderQueue, Pending};
    use super::super::super::stream::RecordRef;
    use super::super::names::NO_NAME;
    use super::super::walk::sort_by_time;
    use super::*;

    /// Random rounds through the general reader's queue and through the Orderer: same
    /// order, and a bail-out exactly when the queue reports a late record. The Orderer gets
    /// the entries in one buffer and also cut into buffers of 1 to 12 entries (rounds split
    /// across buffers, more runs than `MAX_RUNS`), each piece sorted as a walker does.
    #[test]
    fn orderer_equals_the_general_ordering_queue() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let (mut late_runs, mut carried, mut merged_all) = (0, 0, 0);
        for run in 0..600 {
            let mut q = OrderQueue::default();
            // File order: Some(entry) or None for a round end.
            let mut items: Vec<Option<Entry>> = Vec::new();
            let mut want = Vec::new();
            let mut late = false;
            let mut base = 0u64;
            let rounds = 1 + rnd(if run % 3 == 0 { 20 } else { 6 });
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
                        items.push(Some(Entry::new(rec, NO_NAME, NO_NAME)));
                        pos += 1;
                    }
                }
                base += 100;
                if round + 1 < rounds {
                    q.finished_round();
                    items.push(None);
                } else {
                    q.finish();
                }
                while let Some((p, ooo)) = q.pop() {
                    late |= ooo;
                    want.push(p.rec().file_off);
                }
                carried += usize::from(q.pending_len() > 0);
            }
            for cut in [false, true] {
                // The buffers as a walker hands them over.
                let mut bufs = vec![Walked::default()];
                for item in &items {
                    let w = bufs.last_mut().unwrap();
                    match item {
                        Some(e) => w.entries.push(*e),
                        None => {
                            super::super::walk::sort_last_piece(w);
                            w.round_ends.push(w.entries.len());
                        }
                    }
                    if cut && rnd(12) == 0 {
                        super::super::walk::sort_last_piece(w);
                        bufs.push(Walked::default());
                    }
                }
                super::super::walk::sort_last_piece(bufs.last_mut().unwrap());
                let n = bufs.len();
                let mut o = Orderer::new(SharedNames::default(), Records::default());
                let mut batch = SchedBatch::default();
                let mut res = Ok(());
                let mut back = 0;
                for (k, w) in bufs.into_iter().enumerate() {
                    res = o.take(w, k, k + 1 == n, &mut batch);
                    if o.runs.first().is_some_and(|r| r.buf == OWN) {
                        merged_all += 1;
                    }
                    while let Some((tag, _)) = o.recycle() {
                        assert!(tag <= k);
                        back += 1;
                    }
                    if res.is_err() {
                        break;
                    }
                }
                match res {
                    Ok(()) => {
                        assert!(!late, "run {run}: the general queue saw a late record");
                        let got: Vec<u64> = batch.records.iter().map(|r| r.pos).collect();
                        assert_eq!(got, want, "run {run} cut {cut}");
                        assert_eq!(back, n, "run {run}: every buffer handed back");
                        assert_eq!(o.pending, 0);
                    }
                    Err(_) => {
                        assert!(late, "run {run}: bail-out without a late record");
                        late_runs += 1;
                    }
                }
            }
        }
        assert!(
            late_runs > 0 && carried > 0 && merged_all > 0,
            "{late_runs} {carried} {merged_all}"
        );
    }

    /// The run-aware sort equals the standard stable sort by time, for one, two and many
    /// runs, with ties.
    #[test]
    fn sort_by_time_is_the_stable_sort() {
        let mut rng = crate::test_rng::XorShift::default();
        let mut rnd = |n: u64| rng.next_u64() % n;
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
