//! Lean trace.dat source (see `crate::lean`): the CPU data decoded straight into
//! [`SchedRecord`](stallscope_model::SchedRecord)s, merged in the general reader's order,
//! for `stallscope latency` on multi-million-event traces.
//!
//! ```text
//! file   mmapped; each piece's data in 1 MiB windows (MADV_POPULATE_READ ahead, DONTNEED
//!        behind)
//! pool   one worker thread per core, one shared queue of pieces: a piece = a range of
//!        whole sub-buffers of one CPU (64 KiB–2 MiB by CPU count), decoded whole into a
//!        run of CpuRecs (SchedRecords with the piece's name ids packed in) by a fresh
//!        decoder, so one busy CPU keeps every worker busy (`pool`, `merge`)
//! caller next_batch: each CPU's pieces concatenated in order, k-way merge by (ts, CPU
//!        slot) like the general reader, PayloadComm rule on global name ids → SchedBatch
//!        of 8 Ki records → Latency::process_record
//! ```
//! The file header, options, event formats and decoders are the general reader's
//! (`super::prepare`), so metadata handling cannot drift. Records are decoded with the same
//! field accessors the general decoder resolves (`decode`, `fields`), merged with its tie
//! rule (`merge`), and named with the `PayloadComm` rule of `SchedRecordEncoder`; the
//! result is exactly what the encoder makes of the general reader's events
//! ([`compare_with_general`]; tests run it on every fixture the lean path takes, on
//! mutated copies, and the `tracedat_lean` fuzz target on anything).
//!
//! Data quality: the general reader's exactly ([`SchedSource::quality`], complete at the
//! end): the metadata's notes, then each CPU's (lost-events markers, which also become
//! `Lost` records, and discarded items) in CPU order, then CPUSTAT losses the markers did
//! not report — the same `Sink` bookkeeping. Not modeled (the general path runs): at open
//! (`None`) unreadable or truncated metadata and chunk-compressed v7 CPU data; while
//! reading (a [`LeanBail`]) a bad sub-buffer or item, an event id without a format, a
//! record too short for its format, a timestamp going backwards in the merged stream (the
//! general path's `out_of_order_events`), a read error.
//!
//! Memory: per piece being decoded one mapped window (pages dropped behind); runs of the
//! pieces out (one being merged per CPU, at most CPUs + workers + 1 more: `merge`), at
//! 2 MiB of data per piece about 1.3 MB each for 2 CPUs, 8 MiB of data over all CPUs for
//! more; one batch. Peak RSS on the 297 MB benchmark file (2 CPUs): about 25 MiB.
//!
//! Speed (`benches/tracedat_vs_tracecmd.sh`, 6.27 M events, 2 cores shared with other
//! jobs): see docs/perf-speed.md, section trace.dat.
//!
//! `waking_declared` is what the general trace.dat reader's metadata says at open (it
//! learns event names while reading, so none are declared then).

mod decode;
mod fields;
mod merge;
mod pool;

use std::sync::Arc;

use memmap2::Mmap;

use stallscope_model::{DataQuality, SchedBatch};

use crate::lean::{LeanBail, SchedSource};
use crate::Input;

use decode::{CpuDecoder, Decoders};
use merge::Merge;

use super::sink::Sink;
use super::source::Source;

/// Records per batch handed to the caller.
pub const BATCH_RECORDS: usize = 8192;

/// The lean source for `path`; `None`: the general path (see the module docs).
pub fn open(path: &str) -> Option<Box<dyn SchedSource + Send>> {
    open_with(path, None).map(|s| Box::new(s) as Box<dyn SchedSource + Send>)
}

/// [`open`] with the decoding threads forced on (`Some(true)`) or off (`Some(false)`: the
/// caller's thread decodes); `None` decides by size and cores. Output is the same.
pub fn open_with(path: &str, threaded: Option<bool>) -> Option<LeanTraceDat> {
    open_sized(path, threaded, BATCH_RECORDS, 0)
}

/// [`open_with`] with `batch` records per batch and CPU data decoded in pieces of
/// `piece_subbufs` sub-buffers (0: by CPU count, `pool::piece_bytes`; tests use tiny sizes
/// to exercise every boundary).
pub fn open_sized(
    path: &str,
    threaded: Option<bool>,
    batch: usize,
    piece_subbufs: usize,
) -> Option<LeanTraceDat> {
    let input = Input::open(path).ok()?;
    if !input.is_seekable_file() {
        return None;
    }
    open_input(input, threaded, batch, piece_subbufs)
}

/// A lean source over `bytes` (a whole trace.dat in memory; decoded in the caller's
/// thread, in pieces of `piece_subbufs` sub-buffers as for [`open_sized`]), for tests and
/// fuzzing.
pub fn open_bytes(name: &str, bytes: Vec<u8>, piece_subbufs: usize) -> Option<LeanTraceDat> {
    open_input(
        Input::from_bytes(name, bytes).ok()?,
        Some(false),
        BATCH_RECORDS,
        piece_subbufs,
    )
}

fn open_input(
    input: Input,
    threaded: Option<bool>,
    batch: usize,
    piece_subbufs: usize,
) -> Option<LeanTraceDat> {
    if input.compression.is_some() {
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
    let map = match &p.tables.src {
        Source::File(f, _) => map_file(f).map(Arc::new),
        Source::Memory(_) => None,
    };
    let tables = Arc::new(p.tables);
    let decoders = Arc::new(Decoders::new(&tables, &p.formats));
    let subbuf = tables.layout.subbuf_size.max(1);
    let piece = match piece_subbufs {
        0 => pool::piece_bytes(p.areas.len(), subbuf),
        n => n.saturating_mul(subbuf) as u64,
    };
    let pieces: u64 = p.areas.iter().map(|a| a.size.div_ceil(piece)).sum();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threaded = threaded.unwrap_or(p.total >= super::THREADED_MIN_BYTES && cores >= 2);
    let threads = if threaded {
        cores
            .max(2)
            .min(usize::try_from(pieces).unwrap_or(usize::MAX).max(1))
    } else {
        0
    };
    let new_decoder: merge::NewDecoder = Box::new(move |area| {
        CpuDecoder::new(
            Arc::clone(&tables),
            Arc::clone(&decoders),
            map.clone(),
            area,
        )
    });
    let merge = Merge::new(
        &p.areas,
        new_decoder,
        threads,
        piece,
        Sink::new(p.meta, p.dq),
    );
    Some(LeanTraceDat {
        merge,
        total: p.total,
        waking_declared,
        quality: None,
        batch: batch.max(1),
    })
}

/// Maps a regular file read-only; `None` when mapping fails (then windows are read).
fn map_file(file: &std::fs::File) -> Option<Mmap> {
    // SAFETY: the mapping is read-only and private. If another process truncates the file
    // while it is read, touching the lost pages raises SIGBUS (as for perf); a file changed
    // in place only yields different (still bounds-checked) bytes.
    let map = unsafe { Mmap::map(file) }.ok()?;
    // A hint only: failure changes nothing.
    let _ = map.advise(memmap2::Advice::Sequential);
    Some(map)
}

impl LeanTraceDat {
    /// Pieces of CPU data handed out for decoding so far (for tests of the piece
    /// boundaries).
    #[doc(hidden)]
    pub fn pieces(&self) -> u64 {
        self.merge.pieces
    }
}

/// A lean trace.dat source (see the module docs).
pub struct LeanTraceDat {
    merge: Merge,
    total: u64,
    waking_declared: bool,
    /// Set at the end of the data.
    quality: Option<DataQuality>,
    /// Records per batch.
    batch: usize,
}

impl SchedSource for LeanTraceDat {
    fn waking_declared(&self) -> bool {
        self.waking_declared
    }

    fn next_batch(&mut self, batch: &mut SchedBatch) -> Result<bool, LeanBail> {
        if self.quality.is_some() {
            batch.clear();
            return Ok(false);
        }
        let more = self.merge.next_batch(batch, self.batch)?;
        if !more {
            self.quality = Some(self.merge.quality().clone());
        }
        Ok(more)
    }

    fn quality(&self) -> DataQuality {
        self.quality.clone().unwrap_or_default()
    }

    fn progress(&self) -> (u64, u64) {
        (self.merge.read, self.total)
    }
}

/// Runs the lean source and the general reader (through `SchedRecordEncoder`) over `bytes`
/// and compares records (names resolved) and data quality: `Ok(true)` equal, `Ok(false)`
/// the lean source refused or bailed out, `Err` a difference (a bug). For tests and
/// fuzzing; both decode in the caller's thread.
pub fn compare_with_general(name: &str, bytes: Vec<u8>) -> Result<bool, String> {
    use stallscope_model::sched_record::SchedRecordEncoder;
    use stallscope_model::{Comm, SchedRecord, SchedRecordKind};

    use crate::EventReader;

    fn resolve(batch: &SchedBatch, out: &mut Vec<(SchedRecord, Option<Comm>)>) {
        for r in &batch.records {
            let mut r = *r;
            let name = matches!(
                r.kind,
                SchedRecordKind::PayloadComm | SchedRecordKind::Fork | SchedRecordKind::TaskComm
            )
            .then(|| batch.comm(r.value));
            if name.is_some() {
                r.value = 0;
            }
            out.push((r, name));
        }
    }
    let json = |dq: &DataQuality| serde_json::to_string(dq).unwrap_or_default();
    let mut batch = SchedBatch::default();
    // Whole CPUs (the default piece size is larger than any fuzz input) and one piece per
    // sub-buffer: both bail out or neither does, and both must equal the general reader.
    let mut lean_runs = Vec::new();
    for piece_subbufs in [0, 1] {
        let Some(mut lean) = open_bytes(name, bytes.clone(), piece_subbufs) else {
            return Ok(false);
        };
        let mut got = Vec::new();
        let finished = loop {
            match lean.next_batch(&mut batch) {
                Ok(true) => resolve(&batch, &mut got),
                Ok(false) => break true,
                Err(_) => break false,
            }
        };
        lean_runs.push(finished.then(|| (got, json(&lean.quality()))));
    }
    let lean_runs = match lean_runs.as_slice() {
        [Some(a), Some(b)] => [a, b],
        [None, None] => return Ok(false),
        _ => return Err("the lean source bails out with one piece size only".into()),
    };
    let input = Input::from_bytes(name, bytes).map_err(|e| format!("general: {e}"))?;
    let mut general = super::TraceDatReader::open_with_threads(input, 0, Some(0))
        .map_err(|e| format!("lean took a file the general reader refuses: {e}"))?;
    let mut enc = SchedRecordEncoder::default();
    let mut want = Vec::new();
    loop {
        match general.next_event() {
            Ok(Some(ev)) => {
                batch.clear();
                enc.push(&ev, &mut batch);
                resolve(&batch, &mut want);
            }
            Ok(None) => break,
            Err(e) => return Err(format!("lean took a file the general reader fails on: {e}")),
        }
    }
    batch.clear();
    enc.finish(&mut batch);
    resolve(&batch, &mut want);
    let gq = json(general.quality());
    for (piece, (got, lq)) in ["whole CPUs", "1-sub-buffer pieces"].iter().zip(lean_runs) {
        if let Some(i) = (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
            return Err(format!(
                "{piece}: record {i}: lean {:?}, general {:?}",
                got[i], want[i]
            ));
        }
        if got.len() != want.len() {
            return Err(format!(
                "{piece}: {} lean records, {} general",
                got.len(),
                want.len()
            ));
        }
        if *lq != gq {
            return Err(format!("{piece}: data quality: lean {lq}, general {gq}"));
        }
    }
    Ok(true)
}
