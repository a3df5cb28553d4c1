//! [`Worker`]: runs the reading side ([`Pipeline`]: read, decompress, order) on one thread
//! and the decoding side ([`Decoder`]) on another, so the caller's thread only runs the
//! analysis and the three stages overlap on the two cores. The reading thread puts up to
//! [`BATCH`] released records into a record batch (records of a memory-mapped data section
//! by reference, others copied out of their chunks); the decoding thread turns each into an
//! event batch and then drops the mapped pages no later batch needs;
//! [`Worker::next_batch`] hands a whole event batch to the caller by swapping vectors (no
//! per-event copy). At most [`IN_FLIGHT`] batches are queued between two stages (bounded
//! memory) and emptied batches go back upstream for reuse. Each batch carries the reading
//! side's metadata and progress and the data-quality counters of both sides as of its last
//! record. If the caller drops the reader, both threads stop at their next send.

use std::collections::VecDeque;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread;

use stallscope_model::{DataQuality, Event, TraceMeta};

use super::decode::{DecodeTables, Decoder};
use super::order::Pending;
use super::pipeline::Pipeline;
use super::stream::{DataMap, MAPPED};
use crate::ReadError;

/// Records per batch.
pub const BATCH: usize = 2048;
/// Batches queued between the threads.
pub const IN_FLIGHT: usize = 4;

/// Released records, their bytes, and the reading side's state after them.
#[derive(Default)]
struct RecordBatch {
    /// Records; `rec.off` / `rec.len` locate each in `bytes`, or, for `rec.chunk ==
    /// MAPPED`, `rec.file_off` / `rec.len` in `map`.
    records: Vec<Pending>,
    bytes: Vec<u8>,
    /// The mapped data section, for records with `rec.chunk == MAPPED` (not copied).
    map: Option<Arc<DataMap>>,
    /// No mapped record below this input offset is sent after this batch.
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
    dq: DataQuality,
    progress: Option<(u64, u64)>,
    /// Set on the last batch: how reading ended (after `events`).
    end: Option<Result<(), ReadError>>,
}

/// The caller's side.
pub struct Worker {
    rx: Receiver<Batch>,
    recycle: Sender<Batch>,
    /// The last batch received; its `events` are handed out by `next_batch` or moved to
    /// `queued` by `next_event`.
    current: Batch,
    /// Events not yet returned by [`Worker::next_event`].
    queued: VecDeque<Event>,
    finished: bool,
    path: String,
}

impl Worker {
    /// Starts reading `pipeline` on one new thread and decoding on another.
    pub fn spawn(mut pipeline: Pipeline) -> Worker {
        let (tx, rx) = sync_channel::<Batch>(IN_FLIGHT);
        let (recycle, reuse) = channel::<Batch>();
        let (rec_tx, rec_rx) = sync_channel::<RecordBatch>(IN_FLIGHT);
        let (rec_recycle, rec_reuse) = channel::<RecordBatch>();
        let decoder = Decoder::new(pipeline.tables().clone());
        let decode_side = DecodeSide {
            rx: rec_rx,
            recycle: rec_recycle,
            tx,
            reuse,
            decoder,
            dq: DataQuality::default(),
            path: pipeline.meta.path.clone(),
            dropped_below: 0,
        };
        // Mapped pages are dropped by the decoding thread, once it has decoded them.
        pipeline.drop_pages = false;
        let current = Batch {
            meta: pipeline.meta.clone(),
            dq: pipeline.dq.clone(),
            progress: pipeline.progress(),
            ..Batch::default()
        };
        let path = current.meta.path.clone();
        let mut w = Worker {
            rx,
            recycle,
            current,
            queued: VecDeque::new(),
            finished: false,
            path,
        };
        let spawned = thread::Builder::new()
            .name("perf-decode".into())
            .spawn(move || decode_side.run())
            .and_then(|_| {
                thread::Builder::new()
                    .name("perf-read".into())
                    .spawn(move || read_loop(&mut pipeline, &rec_tx, &rec_reuse))
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
        &self.current.dq
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
            if !self.current.events.is_empty() {
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
        out.clear();
        loop {
            if !self.queued.is_empty() {
                out.extend(self.queued.drain(..));
                return Ok(true);
            }
            if !self.current.events.is_empty() {
                // `out`'s old (empty) buffer goes back to the worker with this batch
                std::mem::swap(out, &mut self.current.events);
                return Ok(true);
            }
            if !self.advance()? {
                return Ok(false);
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
        match self.rx.recv() {
            Ok(b) => {
                let done = std::mem::replace(&mut self.current, b);
                let _ = self.recycle.send(done);
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
            let mut b = self.reuse.try_recv().unwrap_or_default();
            b.events.clear();
            if b.events.capacity() == 0 {
                b.events.reserve(BATCH);
            }
            let Ok(mut recs) = self.rx.recv() else {
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
            for p in &recs.records {
                let rec = match (&recs.map, p.rec.chunk) {
                    (Some(m), MAPPED) => m.bytes(p.rec.file_off, p.rec.len),
                    _ => {
                        let start = p.rec.off as usize;
                        &recs.bytes[start..start + p.rec.len as usize]
                    }
                };
                // `None`: a side-band-only record, or a skip counted in `dq`.
                if let Some(ev) = self.decoder.decode(rec, p, &mut self.dq) {
                    b.events.push(ev);
                }
            }
            if let Some(m) = &recs.map {
                self.dropped_below = m.drop_pages(self.dropped_below, recs.low_water);
            }
            b.meta.clone_from(&recs.meta);
            b.dq.clone_from(&recs.dq);
            b.dq.merge(&self.dq);
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

/// The reading thread: fill a record batch with released records, send it, repeat.
fn read_loop(p: &mut Pipeline, tx: &SyncSender<RecordBatch>, reuse: &Receiver<RecordBatch>) {
    loop {
        let mut b = reuse.try_recv().unwrap_or_default();
        b.records.clear();
        b.bytes.clear();
        let end = loop {
            match p.pop_released() {
                Ok(Some(mut r)) => {
                    if r.rec.chunk != MAPPED {
                        let off = b.bytes.len();
                        b.bytes.extend_from_slice(p.record(&r));
                        p.release(&r);
                        r.rec.chunk = 0;
                        r.rec.off = off as u32;
                    }
                    b.records.push(r);
                    if b.records.len() >= BATCH {
                        break None;
                    }
                }
                Ok(None) => break Some(Ok(())),
                Err(e) => break Some(Err(e)),
            }
        };
        let last = end.is_some();
        b.end = end;
        b.tables = p.tables().clone();
        b.map.clone_from(&p.pool.map);
        b.low_water = p.low_water;
        b.meta.clone_from(&p.meta);
        b.dq.clone_from(&p.dq);
        b.progress = p.progress();
        if tx.send(b).is_err() || last {
            return;
        }
    }
}
