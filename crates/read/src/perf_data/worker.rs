//! [`Worker`]: runs a [`Pipeline`] on its own thread and hands events to the caller in
//! batches of [`BATCH`] over a bounded channel (at most [`IN_FLIGHT`] batches queued, so
//! memory stays bounded). Emptied batch buffers go back to the worker for reuse. Each batch
//! carries the data-quality counters, metadata and progress as of its last event, so
//! [`Worker::quality`] and [`Worker::meta`] describe what the caller has consumed so far
//! (pipe-mode metadata can change while reading). If the caller drops the reader, the worker
//! stops at its next send.

use std::collections::VecDeque;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::thread;

use stallscope_model::{DataQuality, Event, TraceMeta};

use super::pipeline::Pipeline;
use crate::ReadError;

/// Events per batch.
pub const BATCH: usize = 2048;
/// Batches queued between the threads.
pub const IN_FLIGHT: usize = 2;

struct Batch {
    events: VecDeque<Event>,
    meta: TraceMeta,
    dq: DataQuality,
    progress: Option<(u64, u64)>,
    /// Set on the last batch: how reading ended.
    end: Option<Result<(), ReadError>>,
}

/// The caller's side.
pub struct Worker {
    rx: Receiver<Batch>,
    recycle: Sender<VecDeque<Event>>,
    current: VecDeque<Event>,
    end: Option<Result<(), ReadError>>,
    finished: bool,
    meta: TraceMeta,
    dq: DataQuality,
    progress: Option<(u64, u64)>,
    path: String,
}

impl Worker {
    /// Starts decoding `pipeline` on a new thread.
    pub fn spawn(mut pipeline: Pipeline) -> Worker {
        let (tx, rx) = sync_channel::<Batch>(IN_FLIGHT);
        let (recycle, reuse) = channel::<VecDeque<Event>>();
        let meta = pipeline.meta.clone();
        let dq = pipeline.dq.clone();
        let progress = pipeline.progress();
        let path = meta.path.clone();
        let spawned = thread::Builder::new()
            .name("perf-decode".into())
            .spawn(move || run(&mut pipeline, &tx, &reuse));
        if let Err(e) = spawned {
            let err = ReadError::new(
                &path,
                None,
                "a decoder thread",
                format!("it could not be started: {e}"),
            );
            return Worker::failed(err, meta, dq);
        }
        Worker {
            rx,
            recycle,
            current: VecDeque::new(),
            end: None,
            finished: false,
            meta,
            dq,
            progress,
            path,
        }
    }

    fn failed(err: ReadError, meta: TraceMeta, dq: DataQuality) -> Worker {
        let (_, rx) = sync_channel(0);
        let (recycle, _) = channel();
        Worker {
            rx,
            recycle,
            current: VecDeque::new(),
            end: Some(Err(err)),
            finished: false,
            path: meta.path.clone(),
            meta,
            dq,
            progress: None,
        }
    }

    /// Metadata as of the last batch received.
    pub fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    /// Data quality as of the last batch received.
    pub fn quality(&self) -> &DataQuality {
        &self.dq
    }

    /// Progress as of the last batch received.
    pub fn progress(&self) -> Option<(u64, u64)> {
        self.progress
    }

    /// The next event.
    pub fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        loop {
            if let Some(e) = self.current.pop_front() {
                return Ok(Some(e));
            }
            if self.finished {
                return Ok(None);
            }
            if let Some(end) = self.end.take() {
                self.finished = true;
                return end.map(|()| None);
            }
            let _ = self.recycle.send(std::mem::take(&mut self.current));
            match self.rx.recv() {
                Ok(b) => {
                    self.current = b.events;
                    self.meta = b.meta;
                    self.dq = b.dq;
                    self.progress = b.progress;
                    self.end = b.end;
                }
                Err(_) => {
                    self.finished = true;
                    return Err(ReadError::new(
                        &self.path,
                        None,
                        "events from the decoder thread",
                        "the thread stopped unexpectedly",
                    ));
                }
            }
        }
    }
}

/// The worker loop.
fn run(p: &mut Pipeline, tx: &SyncSender<Batch>, reuse: &Receiver<VecDeque<Event>>) {
    let fresh = || {
        reuse
            .try_recv()
            .unwrap_or_else(|_| VecDeque::with_capacity(BATCH))
    };
    let mut events = fresh();
    loop {
        let (end, full) = match p.next_event_into(&mut events) {
            Ok(true) => (None, events.len() >= BATCH),
            Ok(false) => (Some(Ok(())), true),
            Err(e) => (Some(Err(e)), true),
        };
        if !full {
            continue;
        }
        let last = end.is_some();
        let batch = Batch {
            events,
            meta: p.meta.clone(),
            dq: p.dq.clone(),
            progress: p.progress(),
            end,
        };
        if tx.send(batch).is_err() || last {
            return;
        }
        events = fresh();
    }
}
