//! Every input format stallscope reads: open a path (or `-`), strip compression, sniff the
//! format, and pull normalized [`Event`]s out of it.
//!
//! One module per format, each opening with a `//!` description of its grammar or layout.
//! Readers are pull iterators ([`EventReader::next_event`], or a batch at a time with
//! [`EventReader::next_batch`]); recoverable problems go to the
//! reader's [`DataQuality`], fatal ones end reading with a [`ReadError`] that names the file,
//! the offset or line, and what was expected versus found.

pub mod blkparse_text;
pub mod blktrace;
pub mod error;
pub mod ftrace_text;
pub mod input;
pub mod lean;
pub mod perf_data;
pub mod perf_script_text;
pub mod prefetch;
pub mod profile;
pub mod ringbuf;
pub mod sniff;
#[doc(hidden)]
pub mod test_rng;
pub mod text_common;
pub mod tracecmd_text;
pub mod tracedat;
pub mod tracefs_format;

pub use error::ReadError;
pub use input::{is_stream, Input};

use stallscope_model::{DataQuality, Event, InputFormat, TraceMeta};

/// Events per [`EventReader::next_batch`] call in the default implementation.
pub const DEFAULT_BATCH: usize = 1024;

/// A source of normalized events in time order (per input; the facade merges inputs).
pub trait EventReader: Send {
    /// What is known about the input (header facts; text readers update it while reading).
    fn meta(&self) -> &TraceMeta;
    /// The next event, `Ok(None)` at the end. After an `Err` the reader is done.
    fn next_event(&mut self) -> Result<Option<Event>, ReadError>;
    /// Replaces the contents of `out` with the next events in order (at least one) and
    /// returns `Ok(true)`; at the end returns `Ok(false)` with `out` empty. Equivalent to
    /// calling [`EventReader::next_event`] repeatedly; readers that decode in batches
    /// override it to hand a whole batch over without moving events one by one. On an
    /// `Err`, `out` holds the events read before the error (they come first in the stream).
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool, ReadError> {
        out.clear();
        while out.len() < DEFAULT_BATCH {
            match self.next_event()? {
                Some(ev) => out.push(ev),
                None => break,
            }
        }
        Ok(!out.is_empty())
    }
    /// Hands the next events in order to `visit`, in one or more calls with consecutive
    /// slices, and returns `Ok(true)`; `Ok(false)` at the end. Equivalent to
    /// [`EventReader::next_batch`] into `buf` and one call; readers that build events
    /// from something smaller override it to build them a few at a time where they are
    /// used (`buf` is then scratch space). On an `Err`, the events read before the error
    /// were visited first.
    fn visit_batch(
        &mut self,
        buf: &mut Vec<Event>,
        visit: &mut dyn FnMut(&[Event]),
    ) -> Result<bool, ReadError> {
        let more = self.next_batch(buf);
        if !buf.is_empty() {
            visit(buf);
        }
        more
    }
    /// Recoverable problems met so far.
    fn quality(&self) -> &DataQuality;
    /// `(bytes consumed, total bytes)` of the input when known, for progress display.
    fn progress(&self) -> Option<(u64, u64)> {
        None
    }
}

/// Opens `path` (`-` = stdin) as input number `index` (used in source spans), sniffing the
/// format unless `forced`.
pub fn open(
    path: &str,
    forced: Option<InputFormat>,
    index: u16,
) -> Result<Box<dyn EventReader>, ReadError> {
    if matches!(forced, None | Some(InputFormat::Blktrace)) {
        if let Some(files) = blktrace::expand_path(path)? {
            return Ok(Box::new(blktrace::BlktraceReader::open_files(
                path, &files, index,
            )?));
        }
    }
    let input = Input::open(path)?;
    let format = match forced {
        Some(f) => f,
        None => sniff::sniff(&input)?,
    };
    open_as(input, format, index)
}

/// Whether a perf.data input is a plain regular file that the lean event reader may open
/// again by path (not stdin, not decompressed, not a FIFO), and the general reader is not
/// asked for (`STALLSCOPE_GENERAL_READER=1`, for comparisons).
fn lean_events_apply(input: &Input) -> bool {
    input.compression.is_none()
        && input.path != "-"
        && std::fs::metadata(&input.path).is_ok_and(|m| m.is_file())
        && std::env::var_os("STALLSCOPE_GENERAL_READER").is_none_or(|v| v != "1")
}

/// Opens an already opened input as `format`.
pub fn open_as(
    input: Input,
    format: InputFormat,
    index: u16,
) -> Result<Box<dyn EventReader>, ReadError> {
    Ok(match format {
        InputFormat::PerfData if lean_events_apply(&input) => {
            // The lean walkers build the same events faster; anything unusual sends the
            // file down the general reader (at open, or later without changing the result).
            match perf_data::lean::events::LeanEventReader::open(&input.path, index) {
                Ok(r) => Box::new(r),
                Err(_) => Box::new(perf_data::PerfDataReader::open(input, index)?),
            }
        }
        InputFormat::PerfData | InputFormat::PerfPipe => {
            Box::new(perf_data::PerfDataReader::open(input, index)?)
        }
        InputFormat::FtraceText => Box::new(ftrace_text::open(input, index)?),
        InputFormat::TraceCmdText => Box::new(tracecmd_text::open(input, index)?),
        InputFormat::PerfScriptText => {
            Box::new(perf_script_text::PerfScriptTextReader::open(input, index)?)
        }
        InputFormat::TraceDat => Box::new(tracedat::TraceDatReader::open(input, index)?),
        InputFormat::Blktrace => Box::new(blktrace::BlktraceReader::open(input, index)?),
        InputFormat::BlkparseText => Box::new(blkparse_text::open(input, index)?),
    })
}
