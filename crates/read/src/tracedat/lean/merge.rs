//! [`Merge`]: the CPUs' data decoded in pieces and merged into one [`SchedBatch`] stream
//! in the general reader's order, with the stream's `PayloadComm` records.
//!
//! Pieces: each CPU's data is cut into pieces of whole sub-buffers (a sub-buffer carries
//! its own base time, so a piece decodes on its own), each decoded whole into one [`Run`]
//! by a fresh decoder on any worker (`pool`). A CPU's pieces are concatenated, in order,
//! into that CPU's stream: piece n+1 is merged only after piece n is exhausted. Pieces are
//! handed out lazily: one ahead of the merged one per CPU, and more (so that every worker
//! has one) while fewer than CPUs + workers + 1 are out over all CPUs, which bounds
//! memory. A piece's data-quality notes and missed-events losses go to the [`Sink`] when
//! the piece is merged, so they arrive per CPU in file order as the general reader's do.
//!
//! ```text
//! CPU 0  [piece 0 │ piece 1 │ piece 2 │ …]   pieces 1, 2 decoding while 0 is merged
//! CPU 1  [piece 0 │ …]
//! ```
//!
//! Order: the general reader's merge (`super::super::merge`) always emits the head of the
//! slot (CPU with data, by CPU number) whose `(timestamp, slot)` is smallest; a slot's own
//! records keep their order. This merge applies the same rule: it picks the smallest head,
//! then drains that slot while its head stays below every other slot's head (no per-record
//! comparison against more than one bound).
//!
//! Names: each piece's name ids map to global ids (one per distinct [`Comm`]), and the
//! stream keeps the current global id per tid, so the `PayloadComm` rule of
//! [`stallscope_model::sched_record`] is one integer compare per named task.
//!
//! A record earlier than the previous one (the general path counts `out_of_order_events`)
//! is a [`LeanBail`]; so is a piece that failed to decode, when the merge reaches it.

use std::collections::{HashMap, VecDeque};

use stallscope_model::sched_record::IDLE_TID;
use stallscope_model::{Comm, Cpu, DataQuality, SchedBatch, SchedRecord, SchedRecordKind, Tid, Ts};

use crate::lean::LeanBail;
use crate::prefetch::prefetch;

use super::super::options::CpuArea;
use super::super::sink::Sink;
use super::decode::{unpack, CpuDecoder, CpuRec, Run, NO_NAME};
use super::pool::{Done, Job, Pool};

/// Records ahead of the one merged whose cache lines are requested early (runs were
/// written by another core).
const PREFETCH_AHEAD: usize = 40;
/// Records of a stretch compared one by one before the rest is searched by bisection.
const LINEAR_SCAN: usize = 8;

/// Tids below this have their current name in a table indexed by tid.
const DIRECT_TIDS: usize = 1 << 22;

/// Makes the decoder of a piece (a range of one CPU's data).
pub type NewDecoder = Box<dyn Fn(&CpuArea) -> CpuDecoder + Send>;

struct Slot {
    cpu: u32,
    /// The run being merged (all the records of one piece).
    run: Run,
    /// Next record of `run`.
    next: usize,
    /// The piece's name ids → global ids.
    global: Vec<u32>,
    /// Where the piece's data starts.
    base: u64,
    /// The pieces handed out after the current one, in order: `None` while decoding.
    out: VecDeque<Option<Done>>,
    /// Number of the first piece in `out`.
    first: u64,
    /// The CPU's data not handed out yet: `(offset, end)`.
    rest: (u64, u64),
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
    new_decoder: NewDecoder,
    /// Bytes of CPU data per piece (whole sub-buffers).
    piece: u64,
    /// Pieces handed out and not yet merged, over all slots.
    outstanding: usize,
    /// `outstanding` above which a slot gets no more than one piece ahead.
    max_outstanding: usize,
    spare_runs: Vec<Run>,
    spare_decoders: Vec<CpuDecoder>,
    stream: Stream,
    started: bool,
    /// The general reader's bookkeeping: metadata notes, then the CPUs'.
    sink: Sink,
    /// Bytes of CPU data read so far.
    pub read: u64,
    /// Pieces handed out so far.
    pub pieces: u64,
}

impl Merge {
    /// A merge of the CPU data `areas` (sorted by CPU number) cut into pieces of `piece`
    /// bytes (whole sub-buffers), decoded by `new_decoder`'s decoders on `threads` worker
    /// threads (0: in the caller's thread); `sink` holds the metadata's notes.
    pub fn new(
        areas: &[CpuArea],
        new_decoder: NewDecoder,
        threads: usize,
        piece: u64,
        sink: Sink,
    ) -> Merge {
        let pool = Pool::new(threads);
        // Threaded: besides one piece ahead per CPU, enough for every worker to decode
        // one while the merge waits for another; inline, decoding ahead gains nothing.
        let max_outstanding = match &pool {
            p if p.threaded() => areas.len() + threads + 1,
            _ => 0,
        };
        let mut merge = Merge {
            slots: areas
                .iter()
                .map(|a| Slot {
                    cpu: a.cpu,
                    run: Run::default(),
                    next: 0,
                    global: Vec::new(),
                    base: 0,
                    out: VecDeque::new(),
                    first: 0,
                    rest: (a.offset, a.offset.saturating_add(a.size)),
                })
                .collect(),
            pool,
            new_decoder,
            piece: piece.max(1),
            outstanding: 0,
            max_outstanding,
            spare_runs: Vec::new(),
            spare_decoders: Vec::new(),
            stream: Stream::default(),
            started: false,
            sink,
            read: 0,
            pieces: 0,
        };
        // Decoding starts at once, while the caller sets up its analysis.
        for s in 0..merge.slots.len() {
            merge.hand_out(s);
        }
        merge
    }

    /// Data-quality notes (complete once [`Merge::next_batch`] returned `Ok(false)`).
    pub fn quality(&self) -> &DataQuality {
        &self.sink.dq
    }

    /// Hands out slot `s`'s next pieces: always one ahead of the merged one, more while
    /// fewer than `max_outstanding` are out over all slots.
    fn hand_out(&mut self, s: usize) {
        loop {
            let slot = &mut self.slots[s];
            let (off, end) = slot.rest;
            if off >= end || (!slot.out.is_empty() && self.outstanding >= self.max_outstanding) {
                return;
            }
            let area = CpuArea {
                cpu: slot.cpu,
                offset: off,
                size: self.piece.min(end - off),
            };
            slot.rest.0 = off + area.size;
            let piece = slot.first + slot.out.len() as u64;
            slot.out.push_back(None);
            self.outstanding += 1;
            self.pieces += 1;
            let decoder = match self.spare_decoders.pop() {
                Some(mut d) => {
                    d.restart(&area);
                    d
                }
                None => (self.new_decoder)(&area),
            };
            let mut run = self.spare_runs.pop().unwrap_or_default();
            run.recs.clear();
            run.new_names.clear();
            self.pool.submit(Job {
                slot: s,
                piece,
                decoder,
                run,
            });
        }
    }

    /// Waits for one decoded piece and files it with its slot.
    fn wait_one(&mut self) -> Result<(), LeanBail> {
        let Some(done) = self.pool.wait() else {
            return Err(LeanBail::new("internal: the lean decoding threads stopped"));
        };
        self.read += done.decoder.read;
        let place = self.slots.get_mut(done.slot).and_then(|slot| {
            let i = usize::try_from(done.piece.checked_sub(slot.first)?).ok()?;
            slot.out.get_mut(i)
        });
        match place {
            Some(p @ None) => {
                *p = Some(done);
                Ok(())
            }
            _ => Err(LeanBail::new("internal: a decoded piece nobody waits for")),
        }
    }

    /// Makes slot `s`'s run non-empty unless its CPU has no more records.
    fn refill(&mut self, s: usize) -> Result<(), LeanBail> {
        while self.slots[s].next >= self.slots[s].run.recs.len() {
            self.hand_out(s);
            match self.slots[s].out.front() {
                None => return Ok(()),
                Some(None) => self.wait_one()?,
                Some(Some(_)) => {
                    let slot = &mut self.slots[s];
                    let Some(Some(done)) = slot.out.pop_front() else {
                        return Err(LeanBail::new("internal: a piece went missing"));
                    };
                    slot.first += 1;
                    self.outstanding -= 1;
                    self.take(s, done)?;
                }
            }
        }
        Ok(())
    }

    /// Makes the decoded piece `done` slot `s`'s current run; its notes and losses go to
    /// the sink (a CPU's pieces come in order, so its notes keep file order).
    fn take(&mut self, s: usize, done: Done) -> Result<(), LeanBail> {
        let Done {
            mut run,
            mut decoder,
            result,
            ..
        } = done;
        result?;
        let slot = &mut self.slots[s];
        if !decoder.dq.is_empty() {
            self.sink.note_cpu(s, &decoder.dq);
        }
        self.sink.note_inline_lost(slot.cpu, decoder.inline_lost);
        slot.global.clear();
        for comm in run.new_names.drain(..) {
            slot.global.push(self.stream.global_id(comm));
        }
        std::mem::swap(&mut slot.run, &mut run);
        slot.next = 0;
        slot.base = decoder.start;
        decoder.dq = DataQuality::default();
        self.spare_runs.push(run);
        self.spare_decoders.push(decoder);
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
                self.sink.finish();
                self.stream.finish(batch);
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
            let slot = &mut self.slots[s];
            let start = slot.next;
            let len = slot.run.recs.len();
            let window = slot
                .run
                .recs
                .get(start..len.min(start.saturating_add(room)))
                .unwrap_or_default();
            // The records sorting before `limit`: a prefix when the CPU's records are in time
            // order. When they are not, the prefix may differ from a record-by-record scan,
            // but the stream then has a timestamp going backwards either way, and `emit`
            // bails out on it.
            // CPUs that take turns (a ping-pong across CPUs) give stretches of a record or
            // two: a few records are compared one by one before a binary search of the rest.
            let tie_first = s < limit.1;
            let before = |c: &CpuRec| c.ts < limit.0 || (tie_first && c.ts == limit.0);
            let mut n = 0;
            while n < LINEAR_SCAN && window.get(n).is_some_and(before) {
                n += 1;
            }
            if n == LINEAR_SCAN {
                n += window.get(n..).unwrap_or_default().partition_point(before);
            }
            let window = &window[..n];
            for (k, c) in window.iter().enumerate() {
                prefetch(window, k + PREFETCH_AHEAD);
                let (r, names) = unpack(*c, slot.base, slot.cpu);
                self.stream.emit(&slot.global, r, names, batch)?;
            }
            let i = start + n;
            slot.next = i;
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
}

/// The merged stream's names and time.
#[derive(Default)]
struct Stream {
    /// Global name id → name.
    comms: Vec<Comm>,
    comm_ids: HashMap<Comm, u32>,
    /// Current name of each tid.
    names: StreamNames,
    /// The idle task's latest name (global id) and where the event giving it is (time,
    /// CPU, offset): its `PayloadComm` comes at the end of the stream.
    idle: Option<(u32, (Ts, Cpu, u64))>,
    /// Timestamp of the last record emitted.
    last_ts: Ts,
}

impl Stream {
    /// The global id of `comm` (a new one the first time).
    fn global_id(&mut self, comm: Comm) -> u32 {
        let next = self.comms.len() as u32;
        let id = *self.comm_ids.entry(comm).or_insert(next);
        if id == next {
            self.comms.push(comm);
        }
        id
    }

    /// Appends `r` (and the `PayloadComm` records due before it) to `batch`; `names` are
    /// the ids of its piece's names it carries, `global` maps them to global ids.
    #[inline]
    fn emit(
        &mut self,
        global: &[u32],
        mut r: SchedRecord,
        names: [u32; 2],
        batch: &mut SchedBatch,
    ) -> Result<(), LeanBail> {
        if r.ts < self.last_ts {
            return Err(LeanBail::new(format!(
                "offset {:#x}: timestamp earlier than the previous event",
                r.pos
            )));
        }
        self.last_ts = r.ts;
        // Where the record is, as values: handing `note` a reference to `r` would keep `r`
        // in memory, written field by field and then read back whole by the push below (a
        // store-forwarding stall on every record, about half of the merge's time).
        let at = (r.ts, r.cpu, r.pos);
        let gid = |n: u32| -> Result<u32, LeanBail> {
            global
                .get(n as usize)
                .copied()
                .ok_or_else(|| LeanBail::new("internal: name id without a name"))
        };
        match r.kind {
            SchedRecordKind::Switch => {
                let (ga, gb) = (gid(names[0])?, gid(names[1])?);
                self.note(r.a, ga, at, batch);
                self.note(r.b, gb, at, batch);
            }
            SchedRecordKind::Waking
            | SchedRecordKind::Wakeup
            | SchedRecordKind::WakeupNew
            | SchedRecordKind::Migrate
            | SchedRecordKind::StatRuntime => {
                let g = gid(names[0])?;
                self.note(r.a, g, at, batch);
            }
            SchedRecordKind::Fork => {
                let g = gid(names[0])?;
                if r.a == IDLE_TID {
                    self.idle = Some((g, at));
                } else {
                    self.names.set(r.a, g);
                }
                r.value =
                    batch.push_comm(self.comms.get(g as usize).copied().unwrap_or(Comm::EMPTY));
            }
            SchedRecordKind::TaskComm
            | SchedRecordKind::PayloadComm
            | SchedRecordKind::Lost
            | SchedRecordKind::Other => {}
        }
        // Field by field: a whole-struct copy of `r` would read its last 8 bytes (cpu,
        // prev_state, kind) at once from where they were just written one by one, and stall.
        batch.records.push(SchedRecord {
            ts: r.ts,
            pos: r.pos,
            value: r.value,
            a: r.a,
            b: r.b,
            cpu: r.cpu,
            prev_state: r.prev_state,
            kind: r.kind,
        });
        Ok(())
    }

    /// The `PayloadComm` record for `tid` named `id` by the event at `at` (time, CPU, offset),
    /// when due.
    #[inline(always)]
    fn note(&mut self, tid: Tid, id: u32, at: (Ts, Cpu, u64), batch: &mut SchedBatch) {
        if tid == IDLE_TID {
            self.idle = Some((id, at));
        } else if self.names.set(tid, id) {
            self.push_name(tid, id, at, batch);
        }
    }

    /// The end of the stream: the idle task's `PayloadComm` record, if any event named it.
    fn finish(&mut self, batch: &mut SchedBatch) {
        if let Some((id, at)) = self.idle.take() {
            self.push_name(IDLE_TID, id, at, batch);
        }
    }

    #[inline(never)]
    fn push_name(&mut self, tid: Tid, id: u32, at: (Ts, Cpu, u64), batch: &mut SchedBatch) {
        let (ts, cpu, pos) = at;
        let mut p = SchedRecord::new(SchedRecordKind::PayloadComm, ts, cpu, pos);
        p.a = tid;
        // Global ids always index `comms` (both grow together in `global_id`).
        p.value = batch.push_comm(self.comms.get(id as usize).copied().unwrap_or(Comm::EMPTY));
        batch.records.push(p);
    }
}
