//! [`Worker`]: runs the reading side ([`Pipeline`]: read, decompress, order) on its own
//! thread and decodes on the caller's thread, so the two cores share the work. The worker
//! copies each released record into a batch buffer (at most [`BATCH`] records, at most
//! [`IN_FLIGHT`] batches queued: bounded memory); the caller decodes them with its
//! [`Decoder`]. Emptied batches go back to the worker for reuse. Each batch carries the
//! reading side's data-quality counters, metadata, progress and decode tables as of its last
//! record; [`Worker::quality`] merges them with the caller-side counters. If the caller
//! drops the reader, the worker stops at its next send.

use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread;

use stallscope_model::{DataQuality, Event, TraceMeta};

use super::decode::{DecodeTables, Decoder};
use super::order::Pending;
use super::pipeline::Pipeline;
use crate::ReadError;

/// Records per batch.
pub const BATCH: usize = 4096;
/// Batches queued between the threads.
pub const IN_FLIGHT: usize = 2;

/// Released records, their bytes, and the reading side's state.
#[derive(Default)]
struct Batch {
    /// Records; `rec.off` / `rec.len` locate each in `bytes`.
    records: Vec<Pending>,
    bytes: Vec<u8>,
    tables: Arc<DecodeTables>,
    meta: TraceMeta,
    dq: DataQuality,
    progress: Option<(u64, u64)>,
    /// Set on the last batch: how reading ended.
    end: Option<Result<(), ReadError>>,
}

/// The caller's side.
pub struct Worker {
    rx: Receiver<Batch>,
    recycle: Sender<Batch>,
    current: Batch,
    pos: usize,
    decoder: Decoder,
    /// Counters from the decoding (caller) side.
    decode_dq: DataQuality,
    /// Reading-side counters merged with `decode_dq`.
    merged: DataQuality,
    finished: bool,
    path: String,
}

impl Worker {
    /// Starts reading `pipeline` on a new thread.
    pub fn spawn(mut pipeline: Pipeline) -> Worker {
        let (tx, rx) = sync_channel::<Batch>(IN_FLIGHT);
        let (recycle, reuse) = channel::<Batch>();
        let current = Batch {
            tables: pipeline.tables().clone(),
            meta: pipeline.meta.clone(),
            dq: pipeline.dq.clone(),
            progress: pipeline.progress(),
            ..Batch::default()
        };
        let path = current.meta.path.clone();
        let decoder = Decoder::new(current.tables.clone());
        let merged = current.dq.clone();
        let mut w = Worker {
            rx,
            recycle,
            current,
            pos: 0,
            decoder,
            decode_dq: DataQuality::default(),
            merged,
            finished: false,
            path,
        };
        let spawned = thread::Builder::new()
            .name("perf-read".into())
            .spawn(move || run(&mut pipeline, &tx, &reuse));
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

    /// Data quality as of the last record decoded.
    pub fn quality(&self) -> &DataQuality {
        &self.merged
    }

    /// Progress as of the last batch received.
    pub fn progress(&self) -> Option<(u64, u64)> {
        self.current.progress
    }

    fn remerge(&mut self) {
        self.merged = self.current.dq.clone();
        self.merged.merge(&self.decode_dq);
    }

    /// The next event.
    pub fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        loop {
            if let Some(p) = self.current.records.get(self.pos) {
                self.pos += 1;
                let start = p.rec.off as usize;
                let rec = &self.current.bytes[start..start + p.rec.len as usize];
                let ev = self.decoder.decode(rec, p, &mut self.decode_dq);
                if self.decoder.take_noted() {
                    self.remerge();
                }
                match ev {
                    Some(e) => return Ok(Some(e)),
                    // A side-band-only record, or a skip counted in `decode_dq`.
                    None => continue,
                }
            }
            if self.finished {
                return Ok(None);
            }
            if let Some(end) = self.current.end.take() {
                self.finished = true;
                return end.map(|()| None);
            }
            match self.rx.recv() {
                Ok(b) => {
                    let done = std::mem::replace(&mut self.current, b);
                    let _ = self.recycle.send(done);
                    self.pos = 0;
                    self.decoder.set_tables(&self.current.tables);
                    self.remerge();
                }
                Err(_) => {
                    self.finished = true;
                    return Err(ReadError::new(
                        &self.path,
                        None,
                        "records from the reader thread",
                        "the thread stopped unexpectedly",
                    ));
                }
            }
        }
    }
}

/// The worker loop: fill a batch with released records, send it, repeat.
fn run(p: &mut Pipeline, tx: &SyncSender<Batch>, reuse: &Receiver<Batch>) {
    loop {
        let mut b = reuse.try_recv().unwrap_or_default();
        b.records.clear();
        b.bytes.clear();
        let end = loop {
            match p.pop_released() {
                Ok(Some(mut r)) => {
                    let off = b.bytes.len();
                    b.bytes.extend_from_slice(p.record(&r));
                    p.release(&r);
                    r.rec.chunk = 0;
                    r.rec.off = off as u32;
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
        b.meta.clone_from(&p.meta);
        b.dq.clone_from(&p.dq);
        b.progress = p.progress();
        if tx.send(b).is_err() || last {
            return;
        }
    }
}
