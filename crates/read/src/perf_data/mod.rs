//! perf.data reader, file mode and pipe mode (perf's `tools/perf/Documentation/perf.data-file-format.txt`).
//!
//! ```text
//! file mode   header (104 B) │ attrs + ids │ data: records … │ feature sections
//! pipe mode   "PERFILE2" u64 16 │ HEADER_ATTR(64) … HEADER_FEATURE(80) … EVENT_UPDATE(78)
//!             HEADER_TRACING_DATA(66) {hdr, u32 size, u32 pad} + `size` bytes OUTSIDE the
//!             record │ records …
//! record      u32 type, u16 misc, u16 size (incl. header) │ body │ [sample_id trailer]
//! ```
//!
//! What becomes an [`Event`]:
//! * `SAMPLE` (9): `ts` = sample time, `cpu` = sample cpu (0 when not recorded), `pid` =
//!   sample tid, span = byte offset of the record. Tracepoint attrs decode their RAW payload
//!   through the file's own tracing data ([`crate::tracefs_format`]): the sched events as
//!   native kinds, everything else as [`EventKind::Generic`]. Other attrs (`cpu-clock`, …)
//!   become generic events named after the attr with `ip` and `period` fields. Call chains
//!   are kept.
//! * `COMM` (3) → [`EventKind::TaskComm`]; `FORK` (7) / `EXIT` (4) only maintain the
//!   reader's tid → comm map (FORK copies the parent's name, EXIT forgets the task).
//! * `LOST` (2) / `LOST_SAMPLES` (13) → [`EventKind::Lost`] and the `lost_events` counter.
//!
//! Records are ordered like `perf script` ([`order`]); `COMPRESSED` (81) / `COMPRESSED2`
//! (83) zstd records (`perf record -z`) are decompressed on the fly (a record inside one
//! reports the offset of the compressed record as its span). A file's data section is
//! memory-mapped and records are cut straight out of the mapping; other inputs are streamed
//! with large reads ([`stream`]); a non-seekable file-mode input (stdin, `.xz`) is spooled
//! first ([`spool`]) because its metadata comes after the data. The reading side
//! ([`pipeline`]: read, decompress, order) and the decoding side ([`decode`]) run in the
//! caller's thread for small inputs; for inputs of [`WORKER_MIN_BYTES`] or more (and pipes)
//! reading runs on a thread of its own and decoding on two more that take record batches
//! in turn ([`worker`]); decoded events are handed over in batches, in order, so the
//! caller's thread is free for the analysis. Over a mapped file the reading side queues
//! SAMPLE records and applies FINISHED_ROUNDs straight from the mapping (a fast path of
//! the per-record dispatch), and maps the pages a little ahead in one call. Unknown record
//! types are skipped by size and counted; truncation and impossible sizes are fatal errors
//! naming the byte offset.
//!
//! [`crate::open`] reads a plain perf.data file (not stdin, not compressed, file mode,
//! scheduler tracepoints without call chains: what `perf sched record` and `perf record -e
//! sched:*` write) with [`lean::events::LeanEventReader`] instead: the same events built
//! from the lean walkers' compact entries, about a sixth less CPU; anything else, and any
//! file on which its walkers stop, is read by this reader. `STALLSCOPE_GENERAL_READER=1`
//! forces this reader (for comparisons).

mod attr;
mod decode;
mod header;
mod host_formats;
pub mod lean;
mod open;
mod order;
mod pipeline;
mod spool;
mod stream;
mod worker;

use stallscope_model::{DataQuality, Event, TraceMeta};

use crate::{EventReader, Input, ReadError};
use decode::Decoder;
use pipeline::Pipeline;
use worker::Worker;

/// Inputs whose data section is at least this big are read on a worker thread.
pub const WORKER_MIN_BYTES: u64 = 4 << 20;

/// Reads perf.data files and pipes. See the module docs.
pub struct PerfDataReader {
    mode: Mode,
}

enum Mode {
    /// Reading and decoding in the caller's thread (small inputs).
    Inline(Box<Inline>),
    /// Reading and decoding on a worker thread, events handed over in batches.
    Worker(Box<Worker>),
}

impl PerfDataReader {
    /// Opens `input` (file or pipe mode, decided by the header size) as input number `index`.
    /// Big or unknown-size inputs are read on a second thread.
    pub fn open(input: Input, index: u16) -> Result<Self, ReadError> {
        let pipeline = Pipeline::open(input, index)?;
        let worker = pipeline
            .progress()
            .is_none_or(|(_, total)| total >= WORKER_MIN_BYTES);
        Ok(Self::from_pipeline(pipeline, worker))
    }

    /// Like [`PerfDataReader::open`], also handing out the MMAP / MMAP2 side-band records as
    /// [`stallscope_model::EventKind::Mapping`] events (profiles name user frames by them;
    /// the scheduler analyses have no use for them, and the lean readers skip them).
    pub fn open_with_mappings(input: Input, index: u16) -> Result<Self, ReadError> {
        let mut pipeline = Pipeline::open(input, index)?;
        pipeline.mappings = true;
        // the decode tables say so too (a new process's inherited mappings at FORK)
        pipeline.rebuild();
        let worker = pipeline
            .progress()
            .is_none_or(|(_, total)| total >= WORKER_MIN_BYTES);
        Ok(Self::from_pipeline(pipeline, worker))
    }

    /// Like [`PerfDataReader::open`], choosing explicitly whether to use a worker thread.
    pub fn open_with_worker(input: Input, index: u16, worker: bool) -> Result<Self, ReadError> {
        Ok(Self::from_pipeline(Pipeline::open(input, index)?, worker))
    }

    fn from_pipeline(pipeline: Pipeline, worker: bool) -> Self {
        let mode = if worker {
            Mode::Worker(Box::new(Worker::spawn(pipeline)))
        } else {
            Mode::Inline(Box::new(Inline::new(pipeline)))
        };
        PerfDataReader { mode }
    }

    /// True when the input is read on a worker thread.
    pub fn uses_worker(&self) -> bool {
        matches!(self.mode, Mode::Worker(_))
    }
}

impl EventReader for PerfDataReader {
    fn meta(&self) -> &TraceMeta {
        match &self.mode {
            Mode::Inline(i) => &i.pipeline().meta,
            Mode::Worker(w) => w.meta(),
        }
    }

    fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        match &mut self.mode {
            Mode::Inline(i) => i.next_event(),
            Mode::Worker(w) => w.next_event(),
        }
    }

    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool, ReadError> {
        match &mut self.mode {
            Mode::Inline(i) => i.next_batch(out),
            Mode::Worker(w) => w.next_batch(out),
        }
    }

    fn quality(&self) -> &DataQuality {
        match &self.mode {
            Mode::Inline(i) => &i.pipeline().dq,
            Mode::Worker(w) => w.quality(),
        }
    }

    fn progress(&self) -> Option<(u64, u64)> {
        match &self.mode {
            Mode::Inline(i) => i.pipeline().progress(),
            Mode::Worker(w) => w.progress(),
        }
    }
}

/// Both sides in one thread (the caller's, or the worker's).
pub(super) struct Inline {
    pipeline: Pipeline,
    decoder: Decoder,
}

impl Inline {
    pub(super) fn new(pipeline: Pipeline) -> Inline {
        let decoder = Decoder::new(pipeline.tables().clone());
        Inline { pipeline, decoder }
    }

    pub(super) fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        while let Some(p) = self.pipeline.pop_released()? {
            self.decoder.set_tables(self.pipeline.tables());
            let pl = &mut self.pipeline;
            let ev = self.decoder.decode(pl.pool.bytes(&p.rec()), &p, &mut pl.dq);
            pl.release(&p);
            if ev.is_some() {
                return Ok(ev);
            }
            // A side-band-only record, or a skip counted in `dq`.
        }
        Ok(None)
    }

    /// Up to [`crate::DEFAULT_BATCH`] events decoded straight into `out`.
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool, ReadError> {
        out.clear();
        self.fill(out, crate::DEFAULT_BATCH)?;
        Ok(!out.is_empty())
    }

    /// Appends the events of up to `records` released records to `out`; `Ok(true)` when
    /// the input is exhausted. On an error, `out` keeps the events before it.
    pub(super) fn fill(&mut self, out: &mut Vec<Event>, records: usize) -> Result<bool, ReadError> {
        for _ in 0..records {
            let Some(p) = self.pipeline.pop_released()? else {
                return Ok(true);
            };
            self.decoder.set_tables(self.pipeline.tables());
            let pl = &mut self.pipeline;
            // `None`: a side-band-only record, or a skip counted in `dq`.
            if let Some(ev) = self.decoder.decode(pl.pool.bytes(&p.rec()), &p, &mut pl.dq) {
                out.push(ev);
            }
            pl.release(&p);
        }
        Ok(false)
    }
}
