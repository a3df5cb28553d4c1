//! The lean perf.data scheduler source (see `crate::lean`): a file-mode, little-endian,
//! uncompressed perf.data decoded straight into [`SchedRecord`](stallscope_model::SchedRecord)s.
//!
//! ```text
//! open      the general reader's own open (header, attrs + ids, feature sections, tracing
//!           data, decoders) → a [`plan::Plan`] per attr; bail-out unless it is the common
//!           case (file mode, little endian, no data-quality note, every tracepoint with
//!           its format)
//! cut       [`split::Cuts`]: the mapped data section is cut at record boundaries
//!           (found by their headers; a round may span two segments) into segments of
//!           about 8 MiB, each cut searched by the walker that first needs it (a cut that
//!           is not a record boundary is caught by the walker before it and bails out)
//! threads   two [`walk::Walker`]s take the segments in turn (even / odd): each walks its
//!           segment and decodes each record into an entry (a SchedRecord + name ids),
//!           sorts each piece of a round by time, notes where rounds end; hands them over
//!           in runs of 16 Ki entries through its bounded channel (buffers go back for
//!           reuse; one segment of look-ahead at most); drops the walked pages
//!           (MADV_DONTNEED), so memory does not grow with the file; with a single
//!           walker in the event-building mode, no walker thread: the thread that orders
//!           runs the walker itself when it needs entries ([`InlineWalker`])
//! caller    [`emit::Orderer`]: receives the segments in file order, applies perf's round
//!           ordering (merging the sorted pieces where they lie: a buffer is kept until
//!           its entries are released, then goes back to its walker), the name rule and
//!           the out-of-order check → SchedBatches (the analysis then runs on the same
//!           thread)
//! ```
//!
//! The output equals `SchedRecordEncoder` over the general reader's events of the same file
//! (tested on every fixture), and anything the general reader would report (an error or a
//! data-quality note) is a [`LeanBail`]: the caller then runs the general reader.

mod emit;
pub mod events;
mod names;
mod plan;
mod split;
mod walk;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use stallscope_model::SchedBatch;

use super::pipeline::Pipeline;
use crate::lean::{LeanBail, SchedSource};
use crate::Input;
use emit::{Orderer, Records, Sink};
use plan::Plan;
use walk::{FullEvents, Step, Walked, Walker};

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
    open_lean_segmented(path, split::SEGMENT)
}

/// [`open_lean`] with data-section segments of about `segment` bytes read by two threads
/// (tests use small ones to exercise the cuts on small files).
#[doc(hidden)]
pub fn open_lean_segmented(path: &str, segment: u64) -> Result<PerfLeanSource, LeanBail> {
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
    Ok(PerfLeanSource::spawn(
        map,
        plan,
        (segment, 2),
        None,
        Records::default(),
    ))
}

/// Where the walked entries come from: a walker thread and its channels, or a walker run
/// on the receiving thread itself ([`InlineWalker`]).
enum Lane {
    Thread {
        full: Receiver<Result<Walked, LeanBail>>,
        empty: SyncSender<Walked>,
    },
    Inline(Box<InlineWalker>),
}

impl Lane {
    /// The next walked buffer.
    fn next(&mut self) -> Result<Walked, LeanBail> {
        match self {
            Lane::Thread { full, .. } => match full.recv() {
                Ok(w) => w,
                // A walker stopped without finishing its segments: it panicked.
                Err(_) => Err(LeanBail::new("a lean reader thread failed")),
            },
            Lane::Inline(w) => w.next(),
        }
    }

    /// Gives a buffer whose entries are all released back for reuse.
    fn recycle(&mut self, w: Walked) {
        match self {
            Lane::Thread { empty, .. } => {
                let _ = empty.try_send(w);
            }
            Lane::Inline(i) => {
                if i.spare.len() < IN_FLIGHT {
                    i.spare.push(w);
                }
            }
        }
    }
}

/// The only walker, run by the thread that orders its entries when it needs more (the
/// event-building mode with one walker): walking and ordering then take one CPU between
/// them, and the thread that analyzes the events keeps the other to itself (with a walker
/// thread of its own, the three threads shared two CPUs and the analysis waited its turn),
/// and the entries are ordered on the core that wrote them.
struct InlineWalker {
    walker: Walker,
    cuts: Arc<split::Cuts>,
    /// The segment being walked (`segs`: all walked).
    seg: usize,
    segs: usize,
    /// `walker` has the range of `seg`.
    in_range: bool,
    /// Buffers back from the orderer.
    spare: Vec<Walked>,
}

impl InlineWalker {
    /// The next walked buffer of the current segment (`seg_end` on its last).
    fn next(&mut self) -> Result<Walked, LeanBail> {
        if self.seg >= self.segs {
            return Err(LeanBail::new("read past the last segment"));
        }
        if !self.in_range {
            let (start, end) = self.cuts.segment(self.seg);
            self.walker.set_range(start, end);
            self.in_range = true;
        }
        let mut out = self.spare.pop().unwrap_or_default();
        out.clear();
        let step = self.walker.step(&mut out, BATCH_ENTRIES)?;
        out.seg_end = matches!(step, Step::Done);
        if out.seg_end {
            self.seg += 1;
            self.in_range = false;
        }
        Ok(out)
    }
}

/// A running lean reader: the walker threads and their channels; what it hands out is
/// its [`Sink`]'s (`SchedBatch`es by default).
pub struct PerfLeanSource<S: Sink = Records> {
    waking_declared: bool,
    lanes: Vec<Lane>,
    threads: Vec<JoinHandle<()>>,
    orderer: Orderer<S>,
    /// Segment being received (walker `seg % lanes`), and how many there are.
    seg: usize,
    segs: usize,
    progress: Arc<AtomicU64>,
    total: u64,
    done: bool,
}

impl<S: Sink> PerfLeanSource<S> {
    /// Starts up to `walkers` walkers over `map`, cut into segments of about `segment`
    /// bytes (in the event-building mode when `full` is given), and an orderer releasing
    /// into `sink`.
    fn spawn(
        map: Arc<super::stream::DataMap>,
        plan: Plan,
        (segment, walkers): (u64, usize),
        full: Option<Arc<FullEvents>>,
        sink: S,
    ) -> PerfLeanSource<S> {
        let progress = Arc::new(AtomicU64::new(0));
        let waking_declared = plan.waking_declared;
        let total = map.map.len() as u64;
        // The cuts are searched by the walkers, each when first needed.
        let cuts = Arc::new(split::Cuts::new(map.clone(), segment));
        let segs = cuts.count();
        let n_lanes = segs.min(walkers).max(1);
        // A lane may run a whole segment ahead of the one being received (records are
        // about 100 bytes), and no further: memory stays bounded whatever the file length.
        let in_flight = if n_lanes > 1 {
            (usize::try_from(segment).unwrap_or(usize::MAX) / 100 / BATCH_ENTRIES + 1)
                .clamp(IN_FLIGHT, 64)
        } else {
            IN_FLIGHT
        };
        let names = names::SharedNames::default();
        let mut lanes = Vec::new();
        let mut threads = Vec::new();
        if n_lanes == 1 && full.is_some() {
            let walker = Walker::new(
                map.clone(),
                plan.clone(),
                progress.clone(),
                names.clone(),
                full.clone(),
            );
            lanes.push(Lane::Inline(Box::new(InlineWalker {
                walker,
                cuts: cuts.clone(),
                seg: 0,
                segs,
                in_range: false,
                spare: Vec::new(),
            })));
        }
        let threaded = if lanes.is_empty() { n_lanes } else { 0 };
        for lane in 0..threaded {
            let cuts = cuts.clone();
            let mut walker = Walker::new(
                map.clone(),
                plan.clone(),
                progress.clone(),
                names.clone(),
                full.clone(),
            );
            let (full_tx, full_rx) = sync_channel::<Result<Walked, LeanBail>>(in_flight);
            // Room for every buffer a lane can have out (in flight, plus those the orderer
            // holds): a buffer dropped for want of room would be allocated again, and each
            // new one costs a page fault per 4 KiB (about 4% of all CPU when they were).
            let (empty_tx, empty_rx) = sync_channel::<Walked>(in_flight + IN_FLIGHT);
            let spawned = std::thread::Builder::new()
                .name(format!("stallscope-lean-perf-{lane}"))
                .spawn(move || {
                    for seg in (lane..segs).step_by(n_lanes) {
                        let (start, end) = cuts.segment(seg);
                        walker.set_range(start, end);
                        loop {
                            let mut out = empty_rx.try_recv().unwrap_or_default();
                            out.clear();
                            let msg = walker.step(&mut out, BATCH_ENTRIES).map(|step| {
                                out.seg_end = matches!(step, Step::Done);
                                out
                            });
                            let stop = match &msg {
                                Ok(out) => out.seg_end,
                                Err(_) => true,
                            };
                            let failed = msg.is_err();
                            if full_tx.send(msg).is_err() || failed {
                                return;
                            }
                            if stop {
                                break;
                            }
                        }
                    }
                });
            match spawned {
                Ok(t) => {
                    threads.push(t);
                    lanes.push(Lane::Thread {
                        full: full_rx,
                        empty: empty_tx,
                    });
                }
                Err(_) => {
                    lanes.clear();
                    break;
                }
            }
        }
        PerfLeanSource {
            waking_declared,
            lanes,
            threads,
            orderer: Orderer::new(names, sink),
            seg: 0,
            segs,
            progress,
            total,
            done: false,
        }
    }
}

impl<S: Sink> PerfLeanSource<S> {
    /// Segments the data section was cut into (1: read by one thread).
    #[doc(hidden)]
    pub fn segment_count(&self) -> usize {
        self.segs
    }

    /// `(bytes walked, data bytes)`.
    fn walked(&self) -> (u64, u64) {
        (
            self.progress.load(Ordering::Relaxed).min(self.total),
            self.total,
        )
    }

    /// Replaces `batch`'s contents with the next released entries' output (at least one
    /// item) and returns `Ok(true)`; `Ok(false)` with `batch` empty at the end.
    fn next_into(&mut self, batch: &mut S::Batch) -> Result<bool, LeanBail> {
        S::clear(batch);
        if self.lanes.is_empty() {
            return Err(LeanBail::new("could not start the lean reader threads"));
        }
        while !self.done {
            let lane = self.seg % self.lanes.len();
            let Some(l) = self.lanes.get_mut(lane) else {
                return Err(LeanBail::new("no lane"));
            };
            let w = match l.next() {
                Ok(w) => w,
                Err(bail) => {
                    self.done = true;
                    return Err(bail);
                }
            };
            let seg_end = w.seg_end;
            let last = seg_end && self.seg + 1 >= self.segs;
            let res = self.orderer.take(w, lane, last, batch);
            if seg_end {
                self.seg += 1;
            }
            self.done = last;
            // Buffers whose entries are all released go back to their walker for reuse.
            while let Some((lane, w)) = self.orderer.recycle() {
                if let Some(l) = self.lanes.get_mut(lane) {
                    l.recycle(w);
                }
            }
            if let Err(bail) = res {
                self.done = true;
                return Err(bail);
            }
            if !S::is_empty(batch) {
                return Ok(true);
            }
            // Only FORK / EXIT side-band records, or a segment end: nothing to hand over yet.
        }
        Ok(false)
    }
}

impl SchedSource for PerfLeanSource<Records> {
    fn waking_declared(&self) -> bool {
        self.waking_declared
    }

    fn next_batch(&mut self, batch: &mut SchedBatch) -> Result<bool, LeanBail> {
        self.next_into(batch)
    }

    fn progress(&self) -> (u64, u64) {
        self.walked()
    }
}

impl<S: Sink> Drop for PerfLeanSource<S> {
    fn drop(&mut self) {
        // Closing the channels stops the walkers at their next send.
        self.lanes.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
