//! The lean perf.data scheduler source (see `crate::lean`): a file-mode, little-endian,
//! uncompressed perf.data decoded straight into [`SchedRecord`](stallscope_model::SchedRecord)s.
//!
//! ```text
//! open      the general reader's own open (header, attrs + ids, feature sections, tracing
//!           data, decoders) → a [`plan::Plan`] per attr; bail-out unless it is the common
//!           case (file mode, little endian, no data-quality note, every tracepoint with
//!           its format)
//! thread    [`walk::Walker`]: walks the mmapped data section and decodes each record
//!           into an entry (a SchedRecord + name ids) in file order, noting where rounds
//!           end (FINISHED_ROUND); hands them over in runs of 16 Ki entries through a
//!           bounded channel (buffers go back for reuse); drops the walked pages
//!           (MADV_DONTNEED), so memory does not grow with the file
//! caller    [`emit::Orderer`]: perf's round ordering, the name rule and the out-of-order
//!           check → SchedBatches (the analysis then runs on the same thread)
//! ```
//!
//! The output equals `SchedRecordEncoder` over the general reader's events of the same file
//! (tested on every fixture), and anything the general reader would report (an error or a
//! data-quality note) is a [`LeanBail`]: the caller then runs the general reader.

mod emit;
mod names;
mod plan;
mod walk;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use stallscope_model::SchedBatch;

use super::pipeline::Pipeline;
use crate::lean::{LeanBail, SchedSource};
use crate::Input;
use emit::Orderer;
use plan::Plan;
use walk::{Step, Walked, Walker};

/// Entries per hand-over from the walker to the caller.
const BATCH_ENTRIES: usize = 16 * 1024;
/// Batches in flight between the walker and the caller.
const IN_FLIGHT: usize = 4;

/// The lean source for `path`; `None`: the general path.
pub fn open(path: &str) -> Option<Box<dyn SchedSource + Send>> {
    open_lean(path)
        .ok()
        .map(|s| Box::new(s) as Box<dyn SchedSource + Send>)
}

/// [`open`] with the reason when the file is not taken.
pub fn open_lean(path: &str) -> Result<PerfLeanSource, LeanBail> {
    let input = Input::open(path).map_err(|e| LeanBail::new(e.to_string()))?;
    if input.compression.is_some() {
        return Err(LeanBail::new("compressed input"));
    }
    let pipeline = Pipeline::open(input, 0).map_err(|e| LeanBail::new(e.to_string()))?;
    let plan = Plan::of(&pipeline)?;
    let map = pipeline
        .pool
        .map
        .clone()
        .ok_or_else(|| LeanBail::new("data section not mapped"))?;
    drop(pipeline);
    Ok(PerfLeanSource::spawn(map, plan))
}

/// A running lean reader: the walker thread and the batch channels.
pub struct PerfLeanSource {
    waking_declared: bool,
    full: Option<Receiver<Result<Walked, LeanBail>>>,
    empty: Option<SyncSender<Walked>>,
    orderer: Orderer,
    thread: Option<JoinHandle<()>>,
    progress: Arc<AtomicU64>,
    range: (u64, u64),
    done: bool,
}

impl PerfLeanSource {
    fn spawn(map: Arc<super::stream::DataMap>, plan: Plan) -> PerfLeanSource {
        let progress = Arc::new(AtomicU64::new(map.base));
        let waking_declared = plan.waking_declared;
        let mut walker = Walker::new(map, plan, progress.clone());
        let range = walker.range();
        let (full_tx, full_rx) = sync_channel::<Result<Walked, LeanBail>>(IN_FLIGHT);
        let (empty_tx, empty_rx) = sync_channel::<Walked>(IN_FLIGHT + 2);
        let thread = std::thread::Builder::new()
            .name("stallscope-lean-perf".into())
            .spawn(move || {
                let mut out = Walked::default();
                loop {
                    match walker.step(&mut out, BATCH_ENTRIES) {
                        Ok(step) => {
                            // The last hand-over (maybe empty) flushes the ordering queue.
                            out.done = matches!(step, Step::Done);
                            let done = out.done;
                            let next = empty_rx.try_recv().unwrap_or_default();
                            let full = std::mem::replace(&mut out, next);
                            if full_tx.send(Ok(full)).is_err() || done {
                                return;
                            }
                            out.clear();
                        }
                        Err(bail) => {
                            let _ = full_tx.send(Err(bail));
                            return;
                        }
                    }
                }
            })
            .ok();
        PerfLeanSource {
            waking_declared,
            full: thread.as_ref().map(|_| full_rx),
            empty: Some(empty_tx),
            orderer: Orderer::default(),
            thread,
            progress,
            range,
            done: false,
        }
    }
}

impl SchedSource for PerfLeanSource {
    fn waking_declared(&self) -> bool {
        self.waking_declared
    }

    fn next_batch(&mut self, batch: &mut SchedBatch) -> Result<bool, LeanBail> {
        let Some(rx) = &self.full else {
            return Err(LeanBail::new("could not start the lean reader thread"));
        };
        if self.done {
            batch.clear();
            return Ok(false);
        }
        batch.clear();
        loop {
            let msg = rx.recv();
            match msg {
                Ok(Ok(rel)) => {
                    let res = self.orderer.take(&rel, batch);
                    if let Some(tx) = &self.empty {
                        let _ = tx.try_send(rel);
                    }
                    if let Err(bail) = res {
                        self.done = true;
                        return Err(bail);
                    }
                    if !batch.records.is_empty() {
                        return Ok(true);
                    }
                    // Only FORK / EXIT side-band records: nothing to hand over yet.
                    continue;
                }
                Ok(Err(bail)) => {
                    self.done = true;
                    return Err(bail);
                }
                Err(_) => {
                    // The walker ended: cleanly (Done) or by a panic, which join tells apart.
                    self.done = true;
                    batch.clear();
                    return match self.thread.take().map(JoinHandle::join) {
                        Some(Err(_)) => Err(LeanBail::new("the lean reader thread failed")),
                        _ => Ok(false),
                    };
                }
            }
        }
    }

    fn progress(&self) -> (u64, u64) {
        let (start, end) = self.range;
        (
            self.progress.load(Ordering::Relaxed).saturating_sub(start),
            end - start,
        )
    }
}

impl Drop for PerfLeanSource {
    fn drop(&mut self) {
        // Closing the channels stops the walker at its next send.
        self.full = None;
        self.empty = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
