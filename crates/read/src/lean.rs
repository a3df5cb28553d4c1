//! Lean scheduler sources: readers that decode a trace straight into
//! [`SchedRecord`](stallscope_model::SchedRecord)s (40 bytes, no names per event) for
//! analyses that need only tids, states, CPUs and times, instead of one 128-byte
//! [`Event`](stallscope_model::Event) per record.
//!
//! A lean source produces exactly what
//! [`SchedRecordEncoder`](stallscope_model::sched_record::SchedRecordEncoder) makes of the
//! general reader's events for the same file, in the same order (tests check this on every
//! fixture). It models only the common case (an uncompressed regular file of one known
//! layout); anything else, at open or in the middle of the file, is a [`LeanBail`]: the
//! caller discards what it computed and runs the general reader, which reports errors and
//! data quality the usual way. So the lean path never reports an input problem itself.
//!
//! Formats: perf.data file mode (`stallscope_read::perf_data::lean`) and trace.dat
//! (`stallscope_read::tracedat::lean`).

use std::io::Read;

use stallscope_model::SchedBatch;

/// Why a lean source gave up (the general reader takes over).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeanBail {
    /// What the lean path does not model, for `--debug`-style diagnostics and tests.
    pub reason: String,
}

impl LeanBail {
    /// A bail-out for `reason`.
    pub fn new(reason: impl Into<String>) -> LeanBail {
        LeanBail {
            reason: reason.into(),
        }
    }
}

/// A trace decoded into [`SchedBatch`]es.
pub trait SchedSource {
    /// True when the trace declares `sched_waking` (see `WakeupSelector::declared_in`).
    fn waking_declared(&self) -> bool;
    /// Replaces `batch`'s contents with the next records (at least one) and returns
    /// `Ok(true)`; `Ok(false)` with `batch` empty at the end.
    fn next_batch(&mut self, batch: &mut SchedBatch) -> Result<bool, LeanBail>;
    /// `(bytes consumed, total bytes)`, for progress display.
    fn progress(&self) -> (u64, u64);
    /// The general reader's data-quality notes for the same file, once `next_batch`
    /// returned `Ok(false)` (sources that bail out on any note keep the default: none).
    fn quality(&self) -> stallscope_model::DataQuality {
        stallscope_model::DataQuality::default()
    }
}

/// perf.data's magic (`PERFILE2`, little-endian file).
const PERF_MAGIC: &[u8; 8] = b"PERFILE2";
/// trace.dat's magic: 0x17 0x08 0x44 then `tracing`.
const TRACEDAT_MAGIC: &[u8; 10] = b"\x17\x08\x44tracing";

/// A lean source for the file at `path`, when its format has one and it looks like the
/// common case; `None` sends the caller down the general path.
pub fn open_sched_source(path: &str) -> Option<Box<dyn SchedSource + Send>> {
    if crate::is_stream(path) {
        return None;
    }
    let mut head = [0u8; 10];
    std::fs::File::open(path).ok()?.read_exact(&mut head).ok()?;
    if head.starts_with(PERF_MAGIC) {
        crate::perf_data::lean::open(path)
    } else if &head == TRACEDAT_MAGIC {
        crate::tracedat::lean::open(path)
    } else {
        None
    }
}
