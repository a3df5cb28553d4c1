//! [`Worker`]: runs the reading side ([`Pipeline`]: read, decompress, order) on one thread
//! and the decoding side ([`Decoder`]) on [`DECODERS`] others, so the caller's thread only
//! runs the analysis and the stages overlap on all cores. The reading thread puts up to
//! [`BATCH`] released records into a record batch (records of a memory-mapped data section
//! by reference, others copied out of their chunks) and deals the batches to the decoding
//! threads in turn (decoding a record needs no state from earlier records, only a cache of
//! task names); each turns a record batch into an event batch and then drops the mapped
//! pages no later batch needs, and the caller takes the event batches back in the same
//! turn order, so events keep the reading side's order;
//! [`Worker::next_batch`] hands a whole event batch to the caller by swapping vectors (no
//! per-event copy). At most [`IN_FLIGHT`] batches are queued between two stages (bounded
//! memory) and emptied batches go back upstream for reuse. Each batch carries the reading
//! side's metadata, progress and data-quality counters as of its last record, and the
//! counters its decoding added (merged by the caller in batch order). If the caller drops
//! the reader, the threads stop at their next send.

use std::collections::VecDeque;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread;

use stallscope_model::{DataQuality, Event, TraceMeta};

use super::decode::{DecodeTables, Decoder, BLANK};
use super::order::Pending;
use super::pipeline::Pipeline;
use super::stream::{DataMap, RecordRef, MAPPED};
use crate::ReadError;

/// Records per batch. Each hand-over between threads can block a thread and wake another
/// (a few µs on a VM, on the thread that is the bottleneck): 8192-record batches take a
/// quarter of the context switches of 2048-record ones (big.perf.data `analyze`: −5 % CPU,
/// −10 % wall; peak RSS +11 MiB, still bounded).
pub const BATCH: usize = 8192;
/// Batches queued between the threads (two 1-MiB event batches per decoding thread).
pub const IN_FLIGHT: usize = 2;
/// Decoding threads.
pub const DECODERS: usize = 2;
/// How many records ahead a decoding thread prefetches (their lines come from the reading
/// thread's CPU: 12 takes ~2-3 % off `analyze`'s CPU time against 4).
const PREFETCH_RECORDS: usize = 12;

/// How many event slots ahead of the one being written a decoding thread prefetches.
const SLOT_PREFETCH: usize = 16;

/// Asks the CPU to start loading the cache lines of slot `i` of `events` (an event or
/// spare capacity; a hint only, nothing past the allocation).
#[inline(always)]
fn prefetch_slot(events: &Vec<Event>, i: usize) {
    #[cfg(target_arch = "x86_64")]
    if i < events.capacity() {
        let at = events.as_ptr().wrapping_add(i).cast::<i8>();
        for line in (0..std::mem::size_of::<Event>()).step_by(64) {
            // SAFETY: a prefetch hint never faults and reads nothing architecturally; the
            // address is inside the vector's allocation, and SSE is part of the x86_64
            // baseline.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    at.wrapping_add(line),
                );
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (events, i);
}

/// Released records, their bytes, and the reading side's state after them.
#[derive(Default)]
struct RecordBatch {
    /// Records; `rec.off` / `rec.len` locate each in `bytes`, or, for `rec.chunk ==
    /// MAPPED`, `rec.file_off` / `rec.len` in `map`.
    records: Vec<Pending>,
    bytes: Vec<u8>,
    /// The mapped data section, for records with `rec.chunk == MAPPED` (not copied).
    map: Option<Arc<DataMap>>,
    /// Mapped pages below this input offset may be dropped after this batch: no record
    /// there is sent after it, nor in the batch before it (which another decoding thread
    /// may still be reading).
    low_water: u64,
    tables: Arc<DecodeTables>,
    meta: TraceMeta,
    dq: DataQuality,
    progress: Option<(u64, u64)>,
    /// Set on the last batch: how reading ended (after `records`).
    end: Option<Result<(), ReadError>>,
}

/// Decoded events and the state of both sides after them.
#[derive(Default)]
struct Batch {
    events: Vec<Event>,
    meta: TraceMeta,
    /// The reading side's counters (cumulative).
    dq: DataQuality,
    /// What decoding this batch added to the counters.
    decode_dq: DataQuality,
    progress: Option<(u64, u64)>,
    /// Set on the last batch: how reading ended (after `events`).
    end: Option<Result<(), ReadError>>,
}

/// The caller's side.
pub struct Worker {
    /// Event batches from each decoding thread, taken in turn.
    rx: Vec<Receiver<Batch>>,
    /// Emptied batches back to each decoding thread.
    recycle: Vec<Sender<Batch>>,
    /// The decoding thread the next batch comes from.
    turn: usize,
    /// The last batch received; its `events` are handed out by `next_batch` or moved to
    /// `queued` by `next_event`.
    current: Batch,
    /// `current.events` was handed out: it now holds the caller's previous events, which
    /// go back to the decoding thread with the batch (overwritten there, not dropped here).
    handed: bool,
    /// Which decoding thread `current` came from.
    current_from: usize,
    /// The decoding side's counters, merged over all batches received.
    decode_dq: DataQuality,
    /// Both sides' counters as of `current`.
    dq: DataQuality,
    /// Events not yet returned by [`Worker::next_event`].
    queued: VecDeque<Event>,
    finished: bool,
    path: String,
}

impl Worker {
    /// Starts reading `pipeline` on one new thread and decoding on [`DECODERS`] others.
    pub fn spawn(mut pipeline: Pipeline) -> Worker {
        let (rec_recycle, rec_reuse) = channel::<RecordBatch>();
        let mut sides = Vec::with_capacity(DECODERS);
        let (mut rxs, mut recycles, mut rec_txs) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..DECODERS {
            let (tx, rx) = sync_channel::<Batch>(IN_FLIGHT);
            let (recycle, reuse) = channel::<Batch>();
            let (rec_tx, rec_rx) = sync_channel::<RecordBatch>(IN_FLIGHT);
            sides.push(DecodeSide {
                rx: rec_rx,
                recycle: rec_recycle.clone(),
                tx,
                reuse,
                decoder: Decoder::new(pipeline.tables().clone()),
                dq: DataQuality::default(),
                path: pipeline.meta.path.clone(),
                dropped_below: 0,
            });
            rxs.push(rx);
            recycles.push(recycle);
            rec_txs.push(rec_tx);
        }
        drop(rec_recycle);
        // Mapped pages are dropped by the decoding threads, once they have decoded them.
        pipeline.drop_pages = false;
        let current = Batch {
            meta: pipeline.meta.clone(),
            dq: pipeline.dq.clone(),
            progress: pipeline.progress(),
            ..Batch::default()
        };
        let path = current.meta.path.clone();
        let mut w = Worker {
            rx: rxs,
            recycle: recycles,
            turn: 0,
            dq: current.dq.clone(),
            current,
            handed: false,
            current_from: 0,
            decode_dq: DataQuality::default(),
            queued: VecDeque::new(),
            finished: false,
            path,
        };
        let mut spawned = Ok(());
        for (i, side) in sides.into_iter().enumerate() {
            spawned = spawned.and_then(|()| {
                thread::Builder::new()
                    .name(format!("perf-decode{i}"))
                    .spawn(move || side.run())
                    .map(drop)
            });
        }
        let spawned = spawned.and_then(|()| {
            thread::Builder::new()
                .name("perf-read".into())
                .spawn(move || read_loop(&mut pipeline, &rec_txs, &rec_reuse))
        });
        if let Err(e) = spawned {
            let err = ReadError::new(
                &w.path,
                None,
                "a reader thread",
                format!("it could not be started: {e}"),
            );
            w.current.end = Some(Err(err));
        }
        w
    }

    /// Metadata as of the last batch received.
    pub fn meta(&self) -> &TraceMeta {
        &self.current.meta
    }

    /// Data quality as of the last batch received.
    pub fn quality(&self) -> &DataQuality {
        &self.dq
    }

    /// Progress as of the last batch received.
    pub fn progress(&self) -> Option<(u64, u64)> {
        self.current.progress
    }

    /// The next event.
    pub fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        loop {
            if let Some(ev) = self.queued.pop_front() {
                return Ok(Some(ev));
            }
            if !self.handed && !self.current.events.is_empty() {
                let events = std::mem::take(&mut self.current.events);
                let mut queued = VecDeque::from(events);
                std::mem::swap(&mut self.queued, &mut queued);
                // give the emptied buffer back with the batch (capacity reuse)
                self.current.events = Vec::from(queued);
                self.current.events.clear();
                continue;
            }
            if !self.advance()? {
                return Ok(None);
            }
        }
    }

    /// The next batch of events in `out` (cleared first); `Ok(false)` with `out` empty at
    /// the end. See [`crate::EventReader::next_batch`].
    pub fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool, ReadError> {
        loop {
            if !self.queued.is_empty() {
                out.clear();
                out.extend(self.queued.drain(..));
                return Ok(true);
            }
            if !self.handed && !self.current.events.is_empty() {
                // `out`'s old events go back to the decoding thread with this batch: it
                // writes new ones over them (the caller's thread does not drop them)
                std::mem::swap(out, &mut self.current.events);
                self.handed = true;
                return Ok(true);
            }
            match self.advance() {
                Ok(true) => {}
                // `out` must not keep the caller's old events
                Ok(false) => {
                    out.clear();
                    return Ok(false);
                }
                Err(e) => {
                    out.clear();
                    return Err(e);
                }
            }
        }
    }

    /// Moves on once `current`'s events are used: `Ok(false)` at the end, otherwise the
    /// next batch is in `current`.
    fn advance(&mut self) -> Result<bool, ReadError> {
        if self.finished {
            return Ok(false);
        }
        if let Some(end) = self.current.end.take() {
            self.finished = true;
            return end.map(|()| false);
        }
        let from = self.turn;
        match self.rx[from].recv() {
            Ok(b) => {
                self.turn = (from + 1) % self.rx.len();
                let done = std::mem::replace(&mut self.current, b);
                self.handed = false;
                let _ = self.recycle[self.current_from].send(done);
                self.current_from = from;
                self.decode_dq.merge(&self.current.decode_dq);
                self.dq.clone_from(&self.current.dq);
                self.dq.merge(&self.decode_dq);
                Ok(true)
            }
            Err(_) => {
                self.finished = true;
                Err(ReadError::new(
                    &self.path,
                    None,
                    "records from the reader thread",
                    "the thread stopped unexpectedly",
                ))
            }
        }
    }
}

/// The decoding thread's state.
struct DecodeSide {
    rx: Receiver<RecordBatch>,
    recycle: Sender<RecordBatch>,
    tx: SyncSender<Batch>,
    reuse: Receiver<Batch>,
    decoder: Decoder,
    /// Counters from decoding.
    dq: DataQuality,
    path: String,
    /// Mapped pages below this input offset were dropped.
    dropped_below: u64,
}

impl DecodeSide {
    /// Decodes record batches into event batches until the last one or a closed channel.
    fn run(mut self) {
        loop {
            // A reused batch still holds the caller's old events: decoding writes over them.
            let mut b = self.reuse.try_recv().unwrap_or_default();
            if b.events.capacity() == 0 {
                b.events.reserve(BATCH);
            }
            let Ok(mut recs) = self.rx.recv() else {
                b.events.clear();
                b.end = Some(Err(ReadError::new(
                    &self.path,
                    None,
                    "records from the reader thread",
                    "the thread stopped unexpectedly",
                )));
                let _ = self.tx.send(b);
                return;
            };
            self.decoder.set_tables(&recs.tables);
            let mut n = 0;
            for (i, p) in recs.records.iter().enumerate() {
                // The record a few ahead is asked for now (its bytes were last touched by
                // the reading thread, on another core).
                if let (Some(m), Some(ahead)) = (&recs.map, recs.records.get(i + PREFETCH_RECORDS))
                {
                    if ahead.rec().chunk == MAPPED {
                        m.prefetch(ahead.rec().file_off);
                    }
                }
                let rec = match (&recs.map, p.rec().chunk) {
                    (Some(m), MAPPED) => m.bytes(p.rec().file_off, p.rec().len),
                    _ => {
                        let start = p.rec().off as usize;
                        &recs.bytes[start..start + p.rec().len as usize]
                    }
                };
                // The slot written a few records later: its lines are fetched (from the
                // caller's CPU, which read the batch last) before the writes need them.
                prefetch_slot(&b.events, n + SLOT_PREFETCH);
                // Decoded in place over an old event (or a blank slot), which the next record
                // reuses after a side-band-only record or a skip counted in `dq`.
                if n == b.events.len() {
                    b.events.push(BLANK);
                }
                if let Some(slot) = b.events.get_mut(n) {
                    if self.decoder.decode_into(rec, p, &mut self.dq, slot) {
                        n += 1;
                    }
                }
            }
            b.events.truncate(n);
            if let Some(m) = &recs.map {
                self.dropped_below = m.drop_pages(self.dropped_below, recs.low_water);
            }
            b.meta.clone_from(&recs.meta);
            b.dq.clone_from(&recs.dq);
            b.decode_dq = std::mem::take(&mut self.dq);
            b.progress = recs.progress;
            b.end = recs.end.take();
            let last = b.end.is_some();
            let _ = self.recycle.send(recs);
            if self.tx.send(b).is_err() || last {
                return;
            }
        }
    }
}

/// The reading thread: fill a record batch with released records, send it to the next
/// decoding thread, repeat.
fn read_loop(p: &mut Pipeline, txs: &[SyncSender<RecordBatch>], reuse: &Receiver<RecordBatch>) {
    // `low_water` as of the batch before the last one sent.
    let (mut older_low, mut last_low) = (0, 0);
    for turn in (0..txs.len()).cycle() {
        let mut b = reuse.try_recv().unwrap_or_default();
        b.records.clear();
        b.bytes.clear();
        let end = match p.pop_released_into(&mut b.records, BATCH) {
            Ok(false) => None,
            Ok(true) => Some(Ok(())),
            Err(e) => Some(Err(e)),
        };
        // Records in the pool's chunks are copied into the batch (mapped ones are not).
        for r in &mut b.records {
            if r.rec().chunk != MAPPED {
                let off = b.bytes.len();
                b.bytes.extend_from_slice(p.record(r));
                p.release(r);
                r.set_rec(RecordRef {
                    chunk: 0,
                    off: off as u32,
                    ..r.rec()
                });
            }
        }
        let last = end.is_some();
        b.end = end;
        b.tables = p.tables().clone();
        b.map.clone_from(&p.pool.map);
        b.low_water = older_low;
        (older_low, last_low) = (last_low, p.low_water);
        b.meta.clone_from(&p.meta);
        b.dq.clone_from(&p.dq);
        b.progress = p.progress();
        if txs[turn].send(b).is_err() || last {
            return;
        }
    }
}
