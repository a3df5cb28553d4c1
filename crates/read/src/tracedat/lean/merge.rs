//! [`Merge`]: the CPUs' [`CpuRec`] runs merged into one [`SchedBatch`] stream in the
//! general reader's order, with the stream's `PayloadComm` records.
//!
//! Order: the general reader's merge (`super::super::merge`) always emits the head of the
//! slot (CPU with data, by CPU number) whose `(timestamp, slot)` is smallest; a slot's own
//! records keep their order. This merge applies the same rule: it picks the smallest head,
//! then drains that slot while its head stays below every other slot's head (no per-record
//! comparison against more than one bound).
//!
//! Names: each slot's per-CPU name ids map to global ids (one per distinct [`Comm`]), and
//! the stream keeps the current global id per tid, so the `PayloadComm` rule of
//! [`stallscope_model::sched_record`] is one integer compare per named task.
//!
//! A record earlier than the previous one (the general path counts `out_of_order_events`)
//! is a [`LeanBail`].

use std::collections::{HashMap, VecDeque};

use stallscope_model::{Comm, DataQuality, SchedBatch, SchedRecord, SchedRecordKind, Tid, Ts};

use crate::lean::LeanBail;
use crate::prefetch::prefetch;

use super::super::sink::Sink;
use super::decode::{unpack, CpuDecoder, CpuRec, Run, NO_NAME};
use super::pool::Pool;

/// Records ahead of the one merged whose cache lines are requested early (runs were
/// written by another core).
const PREFETCH_AHEAD: usize = 40;

/// Runs of one CPU decoded ahead of the merge.
const PREFETCH: usize = 2;

/// Tids below this have their current name in a table indexed by tid.
const DIRECT_TIDS: usize = 1 << 22;

struct Slot {
    /// The run being merged.
    run: Run,
    /// Next record of `run`.
    next: usize,
    /// Runs decoded ahead, in order.
    ready: VecDeque<Run>,
    /// An emptied run, handed to the next job.
    spare: Option<Run>,
    /// The decoder, when no job is in flight.
    decoder: Option<Box<CpuDecoder>>,
    in_flight: bool,
    /// The CPU's data is over (no more jobs).
    ended: bool,
    /// Per-CPU name id → global id.
    global: Vec<u32>,
    /// Bytes the decoder had read when it last came back.
    read: u64,
}

/// The stream's current name of each tid (global ids; [`NO_NAME`] = never named).
#[derive(Default)]
struct StreamNames {
    direct: Vec<u32>,
    other: HashMap<Tid, u32>,
}

impl StreamNames {
    /// Sets `tid`'s name to `id`; true when it changed (or the tid was new).
    #[inline(always)]
    fn set(&mut self, tid: Tid, id: u32) -> bool {
        if let Some(cur) = usize::try_from(tid).ok().and_then(|t| self.direct.get(t)) {
            if *cur == id {
                return false;
            }
        }
        self.set_slow(tid, id)
    }

    #[inline(never)]
    fn set_slow(&mut self, tid: Tid, id: u32) -> bool {
        match usize::try_from(tid).ok().filter(|&t| t < DIRECT_TIDS) {
            Some(t) => {
                if t >= self.direct.len() {
                    let n = (t + 1).next_power_of_two().min(DIRECT_TIDS);
                    self.direct.resize(n, NO_NAME);
                }
                let cur = &mut self.direct[t];
                if *cur == id {
                    return false;
                }
                *cur = id;
                true
            }
            None => self.other.insert(tid, id) != Some(id),
        }
    }
}

/// The k-way merge (see the module docs).
pub struct Merge {
    slots: Vec<Slot>,
    pool: Pool,
    /// Records per decoding job.
    run_min: usize,
    comms: Vec<Comm>,
    comm_ids: HashMap<Comm, u32>,
    names: StreamNames,
    last_ts: Ts,
    started: bool,
    /// The general reader's bookkeeping: metadata notes, then (at the end) the CPUs'.
    sink: Sink,
    /// Bytes of CPU data read so far.
    pub read: u64,
}

impl Merge {
    /// A merge of `decoders` (sorted by CPU number) decoding on `threads` worker threads
    /// (0: in the caller's thread) at least `run_min` records per job; `sink` holds the
    /// metadata's notes.
    pub fn new(decoders: Vec<CpuDecoder>, threads: usize, run_min: usize, sink: Sink) -> Merge {
        Merge {
            slots: decoders
                .into_iter()
                .map(|decoder| Slot {
                    run: Run::default(),
                    next: 0,
                    ready: VecDeque::new(),
                    spare: None,
                    decoder: Some(Box::new(decoder)),
                    in_flight: false,
                    ended: false,
                    global: Vec::new(),
                    read: 0,
                })
                .collect(),
            pool: Pool::new(threads),
            run_min: run_min.max(1),
            comms: Vec::new(),
            comm_ids: HashMap::new(),
            names: StreamNames::default(),
            last_ts: 0,
            started: false,
            sink,
            read: 0,
        }
    }

    /// The end of the data: the CPUs' notes and the CPUSTAT losses, as the general
    /// reader's sink records them.
    fn finish(&mut self) {
        for (s, slot) in self.slots.iter().enumerate() {
            // INVARIANT: at the end no job is in flight, so every decoder is back.
            let Some(d) = &slot.decoder else { continue };
            if !d.dq.is_empty() {
                self.sink.note_cpu(s, &d.dq);
            }
            self.sink.note_inline_lost(d.cpu, d.inline_lost);
        }
        self.sink.finish();
    }

    /// Data-quality notes (complete once [`Merge::next_batch`] returned `Ok(false)`).
    pub fn quality(&self) -> &DataQuality {
        &self.sink.dq
    }

    /// Sends slot `s`'s decoder for its next run, if it may (see `pool`).
    fn resubmit(&mut self, s: usize) {
        let slot = &mut self.slots[s];
        if slot.in_flight || slot.ended || slot.ready.len() >= PREFETCH {
            return;
        }
        if let Some(decoder) = slot.decoder.take() {
            let mut run = slot.spare.take().unwrap_or_default();
            run.recs.clear();
            run.new_names.clear();
            slot.in_flight = true;
            self.pool.submit(s, decoder, run, self.run_min);
        }
    }

    /// Makes slot `s`'s run non-empty unless its CPU has no more records.
    fn refill(&mut self, s: usize) -> Result<(), LeanBail> {
        while self.slots[s].next >= self.slots[s].run.recs.len() {
            if let Some(mut run) = self.slots[s].ready.pop_front() {
                let slot = &mut self.slots[s];
                for comm in run.new_names.drain(..) {
                    let next = self.comms.len() as u32;
                    let id = *self.comm_ids.entry(comm).or_insert(next);
                    if id == next {
                        self.comms.push(comm);
                    }
                    slot.global.push(id);
                }
                std::mem::swap(&mut slot.run, &mut run);
                slot.spare = Some(run);
                slot.next = 0;
                self.resubmit(s);
                continue;
            }
            if self.slots[s].ended && !self.slots[s].in_flight {
                return Ok(());
            }
            self.resubmit(s);
            let Some(done) = self.pool.wait() else {
                return Err(LeanBail::new("internal: the lean decoding threads stopped"));
            };
            let more = done.result?;
            let slot = &mut self.slots[done.slot];
            self.read += done.decoder.read - slot.read;
            slot.read = done.decoder.read;
            slot.decoder = Some(done.decoder);
            slot.in_flight = false;
            slot.ended = !more;
            slot.ready.push_back(done.run);
            self.resubmit(done.slot);
        }
        Ok(())
    }

    /// The head key `(ts, slot)` of slot `s`, if it has records left.
    #[inline]
    fn head(&self, s: usize) -> Option<(Ts, usize)> {
        let slot = &self.slots[s];
        slot.run.recs.get(slot.next).map(|r| (r.ts, s))
    }

    /// Fills `batch` (cleared first) with about `max` records; `Ok(false)` at the end.
    pub fn next_batch(&mut self, batch: &mut SchedBatch, max: usize) -> Result<bool, LeanBail> {
        batch.clear();
        if !self.started {
            self.started = true;
            for s in 0..self.slots.len() {
                self.resubmit(s);
            }
            for s in 0..self.slots.len() {
                self.refill(s)?;
            }
        }
        while batch.records.len() < max {
            // The smallest head, and the smallest among the others (the bound of the run).
            let mut best: Option<(Ts, usize)> = None;
            let mut second: Option<(Ts, usize)> = None;
            for s in 0..self.slots.len() {
                let Some(h) = self.head(s) else { continue };
                if best.is_none_or(|b| h < b) {
                    second = best;
                    best = Some(h);
                } else if second.is_none_or(|b| h < b) {
                    second = Some(h);
                }
            }
            let Some((_, s)) = best else {
                self.finish();
                break;
            };
            let limit = second.unwrap_or((Ts::MAX, usize::MAX));
            self.drain(s, limit, batch, max)?;
        }
        Ok(!batch.records.is_empty())
    }

    /// Emits slot `s`'s records while they sort before `limit` (and the batch has room).
    fn drain(
        &mut self,
        s: usize,
        limit: (Ts, usize),
        batch: &mut SchedBatch,
        max: usize,
    ) -> Result<(), LeanBail> {
        loop {
            let room = max.saturating_sub(batch.records.len());
            let start = self.slots[s].next;
            let len = self.slots[s].run.recs.len();
            let mut i = start;
            while i < len && i - start < room {
                let recs = &self.slots[s].run.recs;
                prefetch(recs, i + PREFETCH_AHEAD);
                let c = recs[i];
                if (c.ts, s) >= limit {
                    break;
                }
                self.emit(s, c, batch)?;
                i += 1;
            }
            self.slots[s].next = i;
            // A consumed run is replaced at once (even when the batch is full): a slot's run
            // is empty only when its CPU has no more records, which the head scan relies on.
            let consumed = i == len;
            if consumed {
                self.refill(s)?;
            }
            if !consumed || i == start || batch.records.len() >= max {
                return Ok(());
            }
        }
    }

    /// Appends `c` (and the `PayloadComm` records due before it) to `batch`.
    #[inline]
    fn emit(&mut self, s: usize, c: CpuRec, batch: &mut SchedBatch) -> Result<(), LeanBail> {
        let (mut r, names) = unpack(c);
        if r.ts < self.last_ts {
            return Err(LeanBail::new(format!(
                "offset {:#x}: timestamp earlier than the previous event",
                r.pos
            )));
        }
        self.last_ts = r.ts;
        let global = &self.slots[s].global;
        let gid = |n: u32| -> Result<u32, LeanBail> {
            global
                .get(n as usize)
                .copied()
                .ok_or_else(|| LeanBail::new("internal: name id without a name"))
        };
        match r.kind {
            SchedRecordKind::Switch => {
                let (ga, gb) = (gid(names[0])?, gid(names[1])?);
                self.note(r.a, ga, &r, batch);
                self.note(r.b, gb, &r, batch);
            }
            SchedRecordKind::Waking
            | SchedRecordKind::Wakeup
            | SchedRecordKind::WakeupNew
            | SchedRecordKind::Migrate
            | SchedRecordKind::StatRuntime => {
                let g = gid(names[0])?;
                self.note(r.a, g, &r, batch);
            }
            SchedRecordKind::Fork => {
                let g = gid(names[0])?;
                self.names.set(r.a, g);
                r.value =
                    batch.push_comm(self.comms.get(g as usize).copied().unwrap_or(Comm::EMPTY));
            }
            SchedRecordKind::TaskComm
            | SchedRecordKind::PayloadComm
            | SchedRecordKind::Lost
            | SchedRecordKind::Other => {}
        }
        batch.records.push(r);
        Ok(())
    }

    /// The `PayloadComm` record for `tid` named `id` by the event `ev`, when due.
    #[inline(always)]
    fn note(&mut self, tid: Tid, id: u32, ev: &SchedRecord, batch: &mut SchedBatch) {
        if self.names.set(tid, id) {
            self.push_name(tid, id, ev, batch);
        }
    }

    #[inline(never)]
    fn push_name(&mut self, tid: Tid, id: u32, ev: &SchedRecord, batch: &mut SchedBatch) {
        let mut p = SchedRecord::new(SchedRecordKind::PayloadComm, ev.ts, ev.cpu, ev.pos);
        p.a = tid;
        // Global ids always index `comms` (both grow together in `refill`).
        p.value = batch.push_comm(self.comms.get(id as usize).copied().unwrap_or(Comm::EMPTY));
        batch.records.push(p);
    }
}
