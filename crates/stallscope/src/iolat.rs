//! [`iolat`]: btt's block I/O phases of the inputs (`stallscope_timeline::iolat`), as
//! `stallscope iolat` prints them. Inputs that are all blktrace binary files take a lean
//! path (`stallscope_read::blktrace::lean`: records decoded straight into a reused
//! `BlockEvent`, no `Event` per record; the files read on a second thread when there is a
//! second CPU); anything unusual in them makes it start over on the general path, so errors
//! and data-quality counts are the reader's. The report is the same either way.
//!
//! ```
//! use stallscope::iolat::{iolat, IolatRun};
//! use stallscope::timeline::iolat::GroupBy;
//! use stallscope::InputOptions;
//!
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/detectors/dispatch-starvation/deadline");
//! let done = iolat(&IolatRun::new(InputOptions::new(vec![dir.to_string()]), GroupBy::Device))?;
//! assert!(done.report.counts.requests > 0);
//! assert!(done.lean_path);
//! # Ok::<(), stallscope::analyze::AnalyzeError>(())
//! ```

use crate::analyze::AnalyzeError;
use crate::InputOptions;
use stallscope_model::DataQuality;
use stallscope_model::{BlockEvent, Span, SpanPos};
use stallscope_read::blktrace::expand_path;
use stallscope_read::blktrace::lean::{LeanBlktrace, LeanRecord, RecordAt};
use stallscope_read::blktrace::record::Endian;
use stallscope_read::input::Input;
use stallscope_timeline::block::{BlockTracker, EventAt};
use stallscope_timeline::iolat::IolatReport;
use stallscope_timeline::iolat::{GroupBy, Iolat};

/// What to measure.
#[derive(Clone, Debug)]
pub struct IolatRun {
    /// The inputs.
    pub input: InputOptions,
    /// Per device, process or operation.
    pub by: GroupBy,
    /// Read blktrace files through the general reader even when the lean path could.
    pub general_path: bool,
}

impl IolatRun {
    /// `input` grouped `by`.
    pub fn new(input: InputOptions, by: GroupBy) -> IolatRun {
        IolatRun {
            input,
            by,
            general_path: false,
        }
    }
}

/// The phases and how they were read.
#[derive(Debug)]
pub struct IolatDone {
    /// The phases, histograms and rates.
    pub report: IolatReport,
    /// The reader's and the tracker's data quality.
    pub quality: DataQuality,
    /// Whether the lean blktrace path made it.
    pub lean_path: bool,
}

/// Measures `run`'s inputs (see the module docs).
pub fn iolat(run: &IolatRun) -> Result<IolatDone, AnalyzeError> {
    let lean_inputs = if run.general_path {
        None
    } else {
        blktrace_inputs(&run.input)
    };
    if let Some(files) = lean_inputs {
        if let Some((iolat, tracker)) = lean(&files, run.by)? {
            return Ok(IolatDone {
                report: iolat.finish(),
                quality: tracker.finish(),
                lean_path: true,
            });
        }
    }
    let mut inputs = run.input.open()?;
    let mut tracker = BlockTracker::new();
    let mut iolat = Iolat::only(run.by);
    let mut batch = Vec::new();
    while inputs.next_batch(&mut batch)? {
        for ev in &batch {
            tracker.process(ev, &mut iolat);
        }
    }
    let mut quality = inputs.quality();
    quality.merge(&tracker.finish());
    Ok(IolatDone {
        report: iolat.finish(),
        quality,
        lean_path: false,
    })
}

/// The per-CPU files of every input (input index, path), when all inputs are blktrace
/// binary; `None` sends the command down the general path.
fn blktrace_inputs(args: &InputOptions) -> Option<Vec<(u16, String)>> {
    if args
        .input_format
        .is_some_and(|f| f != stallscope_model::InputFormat::Blktrace)
    {
        return None;
    }
    let mut out = Vec::new();
    let paths = stallscope_read::blktrace::one_per_recording(&args.files).ok()?;
    for (i, path) in paths.iter().enumerate() {
        let index = u16::try_from(i).ok()?;
        match expand_path(path).ok()? {
            Some(files) => out.extend(files.into_iter().map(|f| (index, f))),
            None if !stallscope_read::is_stream(path) => {
                let input = Input::open(path).ok()?;
                let word: [u8; 4] = input.head.get(..4)?.try_into().ok()?;
                Endian::detect(word)?;
                out.push((index, path.clone()));
            }
            None => return None,
        }
    }
    (!out.is_empty()).then_some(out)
}

/// One block record into the tracker (inlined into the batch loop of the threaded walk:
/// ~3% less CPU there).
#[inline(always)]
fn feed(tracker: &mut BlockTracker, iolat: &mut Iolat, at: RecordAt, ev: &BlockEvent) {
    let at = EventAt {
        ts: at.ts,
        pid: i32::try_from(at.pid).unwrap_or(-1),
        span: Span::new(at.input, SpanPos::Byte(at.offset)),
    };
    tracker.process_block(&at, ev, iolat);
}

/// Reads every file, merged by time, into the tracker and the aggregator. `Ok(None)`:
/// something unusual, use the general path.
fn lean(
    files: &[(u16, String)],
    by: GroupBy,
) -> Result<Option<(Iolat, BlockTracker)>, AnalyzeError> {
    let mut inputs = Vec::with_capacity(files.len());
    for (index, path) in files {
        inputs.push((*index, Input::open(path).map_err(AnalyzeError::Read)?));
    }
    let mut tracker = BlockTracker::new();
    let mut iolat = Iolat::only(by);
    let walk = LeanBlktrace::new(inputs);
    let visit = |rec: LeanRecord<'_>| match rec {
        LeanRecord::Untracked => tracker.count_untracked(),
        LeanRecord::Block(at, ev) => feed(&mut tracker, &mut iolat, at, ev),
    };
    // Reading on a second thread pays off with a second CPU to run it.
    let walk = if std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) {
        walk.for_each_threaded(visit)
    } else {
        walk.for_each(visit)
    };
    Ok(walk.ok().map(|()| (iolat, tracker)))
}
