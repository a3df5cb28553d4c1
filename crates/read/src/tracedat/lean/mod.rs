//! Lean trace.dat source (see `crate::lean`): the CPU data decoded straight into
//! [`SchedRecord`](stallscope_model::SchedRecord)s, merged in the general reader's order,
//! for `stallscope latency` on multi-million-event traces.
//!
//! ```text
//! producer thread:  per CPU  pread 1 MiB of sub-buffers → decode pages → CpuRec run
//!                   k-way merge by (ts, CPU slot) + PayloadComm rule → SchedBatch (8 Ki records)
//!                   ── bounded channel (4 batches) ──▶  caller: Latency::process_record
//!                   ◀── emptied batches come back for reuse ──
//! ```
//! The file header, options, event formats and decoders are the general reader's
//! (`super::prepare`), so metadata handling cannot drift. Records are decoded with the same
//! field accessors the general decoder resolves (`decode`), merged with its tie rule
//! (`merge`), and named with the `PayloadComm` rule of `SchedRecordEncoder`; the result is
//! exactly what the encoder makes of the general reader's events (tests check every
//! fixture the lean path takes).
//!
//! Data quality: the general reader's exactly ([`SchedSource::quality`], complete at the
//! end): the metadata's notes, then each CPU's (lost-events markers, which also become
//! `Lost` records, and discarded items) in CPU order, then CPUSTAT losses the markers did
//! not report — the same `Sink` bookkeeping. Not modeled (the general path runs): at open
//! (`None`) unreadable or truncated metadata and chunk-compressed v7 CPU data; while
//! reading (a [`LeanBail`]) a bad sub-buffer or item, an event id without a format, a
//! record too short for its format, a timestamp going backwards in the merged stream (the
//! general path's `out_of_order_events`), a read error.
//! Memory: one 1 MiB read buffer and one run per CPU, at most 6 batches in flight.
//!
//! `waking_declared` is what the general trace.dat reader's metadata says at open (it
//! learns event names while reading, so none are declared then).

mod decode;
mod merge;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use stallscope_model::{DataQuality, SchedBatch};

use crate::lean::{LeanBail, SchedSource};
use crate::Input;

use decode::{CpuDecoder, Decoders};
use merge::Merge;

use super::sink::Sink;

/// Records per batch handed to the caller.
pub const BATCH_RECORDS: usize = 8192;
/// Batches decoded ahead of the caller.
const AHEAD: usize = 4;

/// The lean source for `path`; `None`: the general path (see the module docs).
pub fn open(path: &str) -> Option<Box<dyn SchedSource + Send>> {
    open_with(path, None).map(|s| Box::new(s) as Box<dyn SchedSource + Send>)
}

/// [`open`] with the decoding thread forced on (`Some(true)`) or off (`Some(false)`; the
/// caller's thread decodes); `None` decides by size and cores. Output is the same.
pub fn open_with(path: &str, threaded: Option<bool>) -> Option<LeanTraceDat> {
    let input = Input::open(path).ok()?;
    if input.compression.is_some() || !input.is_seekable_file() {
        return None;
    }
    let p = super::prepare(input, 0).ok()?;
    if p.cpu_data_compressed {
        return None;
    }
    let waking_declared = p
        .meta
        .declared_events
        .iter()
        .any(|e| e == "sched_waking" || e.ends_with(":sched_waking"));
    let tables = Arc::new(p.tables);
    let decoders = Arc::new(Decoders::new(&tables, &p.formats));
    let cpus = p
        .areas
        .iter()
        .map(|a| CpuDecoder::new(Arc::clone(&tables), Arc::clone(&decoders), a))
        .collect();
    let merge = Merge::new(cpus, Sink::new(p.meta, p.dq));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threaded = threaded.unwrap_or(p.total >= super::THREADED_MIN_BYTES && cores >= 2);
    Some(LeanTraceDat::start(
        merge,
        p.total,
        waking_declared,
        threaded,
    ))
}

/// What the decoding thread sends.
enum Msg {
    Batch(SchedBatch),
    Bail(LeanBail),
    End(DataQuality),
}

enum Mode {
    Inline(Box<Merge>),
    Threaded {
        rx: Receiver<Msg>,
        recycle: Sender<SchedBatch>,
        read: Arc<AtomicU64>,
        worker: Option<JoinHandle<()>>,
    },
    Over,
}

/// A lean trace.dat source (see the module docs).
pub struct LeanTraceDat {
    mode: Mode,
    total: u64,
    waking_declared: bool,
    quality: DataQuality,
}

impl LeanTraceDat {
    fn start(merge: Merge, total: u64, waking_declared: bool, threaded: bool) -> LeanTraceDat {
        let mut src = LeanTraceDat {
            mode: Mode::Inline(Box::new(merge)),
            total,
            waking_declared,
            quality: DataQuality::default(),
        };
        if !threaded {
            return src;
        }
        let Mode::Inline(merge) = std::mem::replace(&mut src.mode, Mode::Over) else {
            return src;
        };
        let (tx, rx) = sync_channel::<Msg>(AHEAD);
        let (recycle, spares) = channel::<SchedBatch>();
        let read = Arc::new(AtomicU64::new(0));
        let read2 = Arc::clone(&read);
        // The merge moves into the thread; if spawning fails it is gone, so rebuild is not
        // possible: keep it in a slot the closure takes from.
        let cell = Arc::new(std::sync::Mutex::new(Some(merge)));
        let cell2 = Arc::clone(&cell);
        let spawned = std::thread::Builder::new()
            .name("tracedat-lean".into())
            .spawn(move || {
                let merge = cell2.lock().ok().and_then(|mut m| m.take());
                if let Some(merge) = merge {
                    produce(merge, &tx, &spares, &read2);
                }
            });
        src.mode = match spawned {
            Ok(worker) => Mode::Threaded {
                rx,
                recycle,
                read,
                worker: Some(worker),
            },
            Err(_) => match cell.lock().ok().and_then(|mut m| m.take()) {
                Some(merge) => Mode::Inline(merge),
                None => Mode::Over,
            },
        };
        src
    }
}

/// The decoding thread: batches until the end, a bail-out, or the caller hanging up.
fn produce(
    mut merge: Box<Merge>,
    tx: &std::sync::mpsc::SyncSender<Msg>,
    spares: &Receiver<SchedBatch>,
    read: &AtomicU64,
) {
    loop {
        let mut batch = spares.try_recv().unwrap_or_default();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            merge.next_batch(&mut batch, BATCH_RECORDS)
        }))
        .unwrap_or_else(|_| Err(LeanBail::new("internal: the lean decoder panicked")));
        read.store(merge.read, Ordering::Relaxed);
        let (msg, last) = match r {
            Ok(true) => (Msg::Batch(batch), false),
            Ok(false) => (Msg::End(merge.quality().clone()), true),
            Err(bail) => (Msg::Bail(bail), true),
        };
        if tx.send(msg).is_err() || last {
            return;
        }
    }
}

impl SchedSource for LeanTraceDat {
    fn waking_declared(&self) -> bool {
        self.waking_declared
    }

    fn next_batch(&mut self, batch: &mut SchedBatch) -> Result<bool, LeanBail> {
        let r = match &mut self.mode {
            Mode::Over => {
                batch.clear();
                return Ok(false);
            }
            Mode::Inline(merge) => {
                let r = merge.next_batch(batch, BATCH_RECORDS);
                if r == Ok(false) {
                    self.quality = merge.quality().clone();
                }
                r
            }
            Mode::Threaded { rx, recycle, .. } => match rx.recv() {
                Ok(Msg::Batch(mut b)) => {
                    std::mem::swap(batch, &mut b);
                    b.clear();
                    let _ = recycle.send(b);
                    Ok(true)
                }
                Ok(Msg::End(dq)) => {
                    self.quality = dq;
                    Ok(false)
                }
                Ok(Msg::Bail(bail)) => Err(bail),
                Err(_) => Err(LeanBail::new("internal: the lean decoding thread stopped")),
            },
        };
        match r {
            Ok(true) => Ok(true),
            other => {
                batch.clear();
                self.stop();
                other
            }
        }
    }

    fn quality(&self) -> DataQuality {
        self.quality.clone()
    }

    fn progress(&self) -> (u64, u64) {
        let done = match &self.mode {
            Mode::Inline(m) => m.read,
            Mode::Threaded { read, .. } => read.load(Ordering::Relaxed),
            Mode::Over => self.total,
        };
        (done, self.total)
    }
}

impl LeanTraceDat {
    /// Ends decoding (joins the thread after hanging up).
    fn stop(&mut self) {
        if let Mode::Threaded { rx, worker, .. } = std::mem::replace(&mut self.mode, Mode::Over) {
            drop(rx);
            if let Some(w) = worker {
                let _ = w.join();
            }
        }
    }
}

impl Drop for LeanTraceDat {
    fn drop(&mut self) {
        self.stop();
    }
}
