//! [`Merger`]: decodes the per-CPU streams in parallel and hands out their events in time
//! order.
//!
//! Work is demand-driven so memory stays bounded whatever the file size: a CPU's
//! [`CpuStream`] (its whole decoding state) travels to a worker thread as a job, comes back
//! with one [`Batch`], and is sent again only while fewer than [`PREFETCH`] batches of that
//! CPU wait to be merged. At most one job per CPU is in flight, so a CPU's batches stay in
//! order. The merge is a binary heap keyed on `(timestamp, CPU slot)`: equal timestamps
//! come out lowest CPU first, like `trace-cmd report`. The slot at the top of the heap is
//! drained without heap operations for as long as its events sort before every other
//! slot's head (runs are long: a CPU's events cluster in time); [`Merger::next_batch`] moves
//! such a run into the caller's batch in one go. Small inputs (or one core) decode in
//! the caller's thread with the same code.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

use stallscope_model::{Event, EventKind};

use crate::ReadError;

use super::cpu_stream::{Batch, CpuStream};
use super::sink::Sink;

/// Batches of one CPU decoded ahead of the merge.
pub const PREFETCH: usize = 2;

type Done = (usize, Box<CpuStream>, Result<Batch, ReadError>);

enum Pool {
    Inline(VecDeque<Done>),
    Threads {
        jobs: Option<SyncSender<(usize, Box<CpuStream>)>>,
        results: Receiver<Done>,
        workers: Vec<JoinHandle<()>>,
    },
}

impl Pool {
    fn new(threads: usize, slots: usize, batch_size: usize) -> Pool {
        if threads < 1 {
            return Pool::Inline(VecDeque::new());
        }
        let (jobs, job_rx) = sync_channel::<(usize, Box<CpuStream>)>(slots.max(1));
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (done_tx, results) = channel::<Done>();
        let mut workers = Vec::new();
        for i in 0..threads {
            let rx = Arc::clone(&job_rx);
            let tx: Sender<Done> = done_tx.clone();
            let spawned =
                thread::Builder::new()
                    .name(format!("tracedat-{i}"))
                    .spawn(move || loop {
                        let job = match rx.lock() {
                            Ok(guard) => guard.recv(),
                            Err(_) => return,
                        };
                        let Ok((slot, mut stream)) = job else { return };
                        let batch = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            stream.next_batch(batch_size)
                        }))
                        .unwrap_or_else(|_| {
                            Err(stream.internal_error("decoding stopped by a bug (panic)"))
                        });
                        if tx.send((slot, stream, batch)).is_err() {
                            return;
                        }
                    });
            match spawned {
                Ok(h) => workers.push(h),
                Err(_) => break, // fewer threads; the ones started (or inline) do the work
            }
        }
        if workers.is_empty() {
            return Pool::Inline(VecDeque::new());
        }
        Pool::Threads {
            jobs: Some(jobs),
            results,
            workers,
        }
    }

    fn submit(&mut self, slot: usize, mut stream: Box<CpuStream>, batch_size: usize) {
        match self {
            Pool::Inline(q) => {
                let batch = stream.next_batch(batch_size);
                q.push_back((slot, stream, batch));
            }
            Pool::Threads { jobs, .. } => {
                if let Some(tx) = jobs {
                    // Cannot fail while the workers live (they exit only when `jobs` drops).
                    let _ = tx.send((slot, stream));
                }
            }
        }
    }

    fn wait(&mut self) -> Option<Done> {
        match self {
            Pool::Inline(q) => q.pop_front(),
            Pool::Threads { results, .. } => results.recv().ok(),
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Pool::Threads { jobs, workers, .. } = self {
            jobs.take();
            for w in workers.drain(..) {
                let _ = w.join();
            }
        }
    }
}

struct Slot {
    current: VecDeque<Event>,
    /// Decoded batches waiting to be merged, with their data-quality notes and newly seen
    /// event names (handed to the sink only when the merge reaches the batch).
    ready: VecDeque<Batch>,
    /// The last emptied batch buffer, given back to the stream with its next job.
    spare: Option<VecDeque<Event>>,
    stream: Option<Box<CpuStream>>,
    in_flight: bool,
    exhausted: bool,
}

/// Time-ordered events of all CPU streams.
pub struct Merger {
    slots: Vec<Slot>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    pool: Pool,
    batch_size: usize,
    started: bool,
    path: String,
    /// Slot being emitted from without the heap (its head is not in the heap).
    running: Option<usize>,
    /// `(ts, slot)` of the smallest head among the other slots when the run started.
    limit: (u64, usize),
    /// An error was returned: the merge is over.
    failed: bool,
}

impl Merger {
    /// Merges `streams` (sorted by CPU), decoding on `threads` worker threads (0 = inline).
    pub fn new(path: &str, streams: Vec<CpuStream>, threads: usize) -> Merger {
        let n = streams.len().max(1);
        let batch_size = (65_536 / n).clamp(512, 8192);
        let slots = streams
            .into_iter()
            .map(|s| Slot {
                current: VecDeque::new(),
                spare: None,
                ready: VecDeque::new(),
                stream: Some(Box::new(s)),
                in_flight: false,
                exhausted: false,
            })
            .collect();
        Merger {
            slots,
            heap: BinaryHeap::new(),
            pool: Pool::new(threads, n, batch_size),
            batch_size,
            started: false,
            path: path.to_string(),
            running: None,
            limit: (u64::MAX, usize::MAX),
            failed: false,
        }
    }

    /// The next event in time order (`Ok(None)` at the end and after an error); problems,
    /// new event names and lost-event markers go to `sink`.
    #[inline]
    pub fn next(&mut self, sink: &mut Sink) -> Result<Option<Event>, ReadError> {
        if self.failed {
            return Ok(None);
        }
        // A tail call: the event goes straight to the caller (no copy through a local).
        self.next_inner(sink)
    }

    /// Starts decoding every CPU and fills the heap, once.
    fn start(&mut self, sink: &mut Sink) -> Result<(), ReadError> {
        if !self.started {
            self.started = true;
            for s in 0..self.slots.len() {
                self.resubmit(s);
            }
            for s in 0..self.slots.len() {
                self.refill(s, sink)?;
                self.push_head(s);
            }
        }
        Ok(())
    }

    /// Appends the next events in time order to `out` until it holds `max` (fewer at the
    /// end, none after an error); the same order and bookkeeping as [`Merger::next`], but a
    /// run of the current slot moves in one go. On an error, `out` keeps the events before
    /// it.
    pub fn next_batch(
        &mut self,
        sink: &mut Sink,
        out: &mut Vec<Event>,
        max: usize,
    ) -> Result<(), ReadError> {
        if self.failed {
            return Ok(());
        }
        self.start(sink)?;
        while out.len() < max {
            if let Some(s) = self.running {
                let (room, limit) = (max - out.len(), self.limit);
                let current = &mut self.slots[s].current;
                let run = current
                    .iter()
                    .take(room)
                    .take_while(|e| (e.ts, s) < limit)
                    .count();
                if run > 0 {
                    for e in current.range(..run) {
                        if let EventKind::Lost { count } = e.kind {
                            sink.note_inline_lost(e.cpu, count.unwrap_or(0));
                        }
                    }
                    out.extend(current.drain(..run));
                    if current.is_empty() {
                        self.refill(s, sink)?;
                    }
                    continue;
                }
                self.running = None;
                self.push_head(s);
            }
            let Some(Reverse((_, s))) = self.heap.pop() else {
                sink.finish();
                return Ok(());
            };
            self.running = Some(s);
            self.limit = self
                .heap
                .peek()
                .map_or((u64::MAX, usize::MAX), |Reverse(head)| *head);
        }
        Ok(())
    }

    #[inline]
    fn next_inner(&mut self, sink: &mut Sink) -> Result<Option<Event>, ReadError> {
        self.start(sink)?;
        // Fast path: keep emitting from the running slot while its head sorts before every
        // other slot's head (which cannot change meanwhile): no heap operation per event.
        if let Some(s) = self.running {
            let before_limit = self.slots[s]
                .current
                .front()
                .is_some_and(|e| (e.ts, s) < self.limit);
            if before_limit {
                return self.take(s, sink);
            }
            self.running = None;
            self.push_head(s);
        }
        let Some(Reverse((_, s))) = self.heap.pop() else {
            sink.finish();
            return Ok(None);
        };
        self.running = Some(s);
        self.limit = self
            .heap
            .peek()
            .map_or((u64::MAX, usize::MAX), |Reverse(head)| *head);
        self.take(s, sink)
    }

    /// The next event of slot `s`, refilling its current batch when it runs out.
    #[inline]
    fn take(&mut self, s: usize, sink: &mut Sink) -> Result<Option<Event>, ReadError> {
        let current = &mut self.slots[s].current;
        if let Some(Event {
            kind: EventKind::Lost { count },
            cpu,
            ..
        }) = current.front()
        {
            sink.note_inline_lost(*cpu, count.unwrap_or(0));
        }
        if current.len() > 1 {
            // Straight into the caller's slot: no intermediate copy of the event.
            return Ok(current.pop_front());
        }
        let ev = current.pop_front();
        self.refill(s, sink)?;
        Ok(ev)
    }

    fn push_head(&mut self, s: usize) {
        if let Some(e) = self.slots[s].current.front() {
            self.heap.push(Reverse((e.ts, s)));
        }
    }

    fn resubmit(&mut self, s: usize) {
        let slot = &mut self.slots[s];
        if slot.in_flight || slot.exhausted || slot.ready.len() >= PREFETCH {
            return;
        }
        if let Some(mut stream) = slot.stream.take() {
            if stream.spare.is_none() {
                stream.spare = slot.spare.take();
            }
            slot.in_flight = true;
            self.pool.submit(s, stream, self.batch_size);
        }
    }

    /// [`Merger::fill_current`], remembering a failure (the merge ends after an error).
    fn refill(&mut self, s: usize, sink: &mut Sink) -> Result<(), ReadError> {
        let r = self.fill_current(s, sink);
        if r.is_err() {
            self.failed = true;
            sink.flush_cpu_notes();
        }
        r
    }

    /// Makes slot `s`'s current batch non-empty, unless the CPU has no more events.
    ///
    /// A batch's data-quality notes and declared names go to `sink` here, when the merge
    /// takes the batch, never when a worker thread finishes it: declared names come in
    /// merge order, and the notes are kept per CPU (see `Sink`), so neither depends on
    /// thread timing.
    fn fill_current(&mut self, s: usize, sink: &mut Sink) -> Result<(), ReadError> {
        loop {
            if let Some(batch) = self.slots[s].ready.pop_front() {
                if !batch.dq.is_empty() {
                    sink.note_cpu(s, &batch.dq);
                }
                for name in batch.declared {
                    sink.declare(name);
                }
                if batch.events.is_empty() {
                    // Nothing to merge (e.g. pages of discarded records only): its notes
                    // are in; look at the next batch.
                    self.resubmit(s);
                    continue;
                }
                let empty = std::mem::replace(&mut self.slots[s].current, batch.events);
                if empty.capacity() > 0 {
                    self.slots[s].spare = Some(empty);
                }
                self.resubmit(s);
                return Ok(());
            }
            if self.slots[s].exhausted && !self.slots[s].in_flight {
                return Ok(());
            }
            self.resubmit(s);
            let Some((slot, stream, batch)) = self.pool.wait() else {
                // A job is in flight for `s`, so the pool can only be closed if its threads
                // are gone: fatal, never a silent end.
                return Err(ReadError::new(
                    &self.path,
                    None,
                    "running decoding threads",
                    "the decoding threads stopped",
                ));
            };
            let batch = batch?;
            let target = &mut self.slots[slot];
            target.stream = Some(stream);
            target.in_flight = false;
            if batch.done {
                target.exhausted = true;
            }
            if !batch.events.is_empty() || !batch.dq.is_empty() || !batch.declared.is_empty() {
                target.ready.push_back(batch);
            }
            self.resubmit(slot);
        }
    }
}
