//! perf.data reader, file mode and pipe mode (`shared/reference/formats.md` §5).
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
//!   tid → comm map ([`PerfDataReader::comm_of`]).
//! * `LOST` (2) / `LOST_SAMPLES` (13) → [`EventKind::Lost`] and the `lost_events` counter.
//!
//! Records are ordered like `perf script` ([`order`]); `COMPRESSED` (81) / `COMPRESSED2`
//! (83) zstd records (`perf record -z`) are decompressed on the fly (a record inside one
//! reports the offset of the compressed record as its span). The data section is streamed
//! with large reads ([`stream`]); a non-seekable file-mode input (stdin, `.xz`) is spooled
//! first ([`spool`]) because its metadata comes after the data. Unknown record types are
//! skipped by size and counted; truncation and impossible sizes are fatal errors naming the
//! byte offset.

mod attr;
mod header;
mod open;
mod order;
mod pipeline;
mod spool;
mod stream;

use stallscope_model::{Comm, DataQuality, Event, Tid, TraceMeta};

use crate::tracefs_format::TracingData;
use crate::{EventReader, Input, ReadError};
use pipeline::Pipeline;

/// Reads perf.data files and pipes. See the module docs.
pub struct PerfDataReader {
    pipeline: Box<Pipeline>,
}

impl PerfDataReader {
    /// Opens `input` (file or pipe mode, decided by the header size) as input number `index`.
    pub fn open(input: Input, index: u16) -> Result<Self, ReadError> {
        Ok(PerfDataReader {
            pipeline: Box::new(Pipeline::open(input, index)?),
        })
    }

    /// The name of task `tid` from COMM / FORK side-band records seen so far.
    pub fn comm_of(&self, tid: Tid) -> Option<Comm> {
        self.pipeline.comm_of(tid)
    }

    /// The tracing data (formats) of the file, once seen.
    pub fn tracing_data(&self) -> Option<&TracingData> {
        self.pipeline.tracing_data()
    }

    /// Chunks allocated by the streaming buffer so far (for tests of bounded memory).
    pub fn buffer_chunks(&self) -> usize {
        self.pipeline.buffer_chunks()
    }
}

impl EventReader for PerfDataReader {
    fn meta(&self) -> &TraceMeta {
        &self.pipeline.meta
    }

    fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        self.pipeline.next_event()
    }

    fn quality(&self) -> &DataQuality {
        &self.pipeline.dq
    }

    fn progress(&self) -> Option<(u64, u64)> {
        self.pipeline.progress()
    }
}
