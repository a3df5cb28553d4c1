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
mod order;
mod spool;
mod stream;

use std::io::{Read, Seek, SeekFrom};

use rustc_hash::{FxHashMap, FxHashSet};
use stallscope_model::{
    Comm, DataQuality, Event, EventKind, FieldValue, GenericEvent, InputFormat, Severity, Span,
    SpanPos, Tid, TraceMeta,
};

use crate::tracefs_format::{Endian, PrevStateTable, TracepointDecoder, TracingData};
use crate::{EventReader, Input, ReadError};
use attr::{parse_sample, parse_trailer, Attr, IdPos, Layout, TYPE_TRACEPOINT};
use header::{feat, FileHeader, Section};
use order::{OrderQueue, Pending, MAX_PENDING};
use spool::ReadSeek;
use stream::{ChunkPool, DecompStream, RawStream, RecordRef, StreamError};

/// Record types.
mod rt {
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const FORK: u32 = 7;
    pub const SAMPLE: u32 = 9;
    pub const LOST_SAMPLES: u32 = 13;
    pub const HEADER_ATTR: u32 = 64;
    pub const HEADER_TRACING_DATA: u32 = 66;
    pub const FINISHED_ROUND: u32 = 68;
    pub const EVENT_UPDATE: u32 = 78;
    pub const HEADER_FEATURE: u32 = 80;
    pub const COMPRESSED: u32 = 81;
    pub const COMPRESSED2: u32 = 83;

    /// Types this reader knows and deliberately ignores (mmaps, switches, ksymbols, perf
    /// bookkeeping such as ID_INDEX, THREAD_MAP, CPU_MAP, TIME_CONV, FINISHED_INIT).
    pub fn is_ignored(t: u32) -> bool {
        matches!(t, 1 | 5 | 6 | 8 | 10 | 11 | 12 | 14..=21 | 65 | 67 | 69..=77 | 79 | 82)
    }

    /// perf-tool metadata records that precede the data in pipe mode.
    pub fn is_prelude(t: u32) -> bool {
        matches!(t, 64..=67 | 69..=80) && t != FINISHED_ROUND
    }
}

/// Biggest attrs or feature section read into memory.
const MAX_SECTION: u64 = 256 << 20;

/// How samples of one attr are turned into events.
#[derive(Debug)]
enum AttrDecoder {
    Tracepoint(TracepointDecoder),
    MissingFormat {
        system: Option<String>,
        name: String,
    },
    Other {
        name: String,
    },
}

/// Reads perf.data files and pipes. See the module docs.
pub struct PerfDataReader {
    path: String,
    index: u16,
    meta: TraceMeta,
    dq: DataQuality,
    noted: FxHashSet<String>,
    endian: Endian,
    attrs: Vec<Attr>,
    layouts: Vec<Layout>,
    id_pos: IdPos,
    id_to_attr: FxHashMap<u64, u16>,
    decoders: Vec<AttrDecoder>,
    stale: bool,
    tracing: Option<TracingData>,
    pool: ChunkPool,
    raw: RawStream,
    decomp: Option<DecompStream>,
    scratch: Vec<u8>,
    queue: OrderQueue,
    comms: FxHashMap<Tid, Comm>,
    input_done: bool,
    failed: bool,
    total_len: Option<u64>,
}

impl PerfDataReader {
    /// Opens `input` (file or pipe mode, decided by the header size) as input number `index`.
    pub fn open(input: Input, index: u16) -> Result<Self, ReadError> {
        let path = input.path.clone();
        let head = &input.head;
        let endian = if head.starts_with(b"PERFILE2") {
            Endian::Little
        } else if head.starts_with(b"2ELIFREP") {
            Endian::Big
        } else {
            let found = if head.is_empty() {
                "an empty file".to_string()
            } else {
                crate::error::show_bytes(head, 16)
            };
            return Err(ReadError::at_byte(
                &path,
                0,
                "the perf.data magic PERFILE2",
                found,
            ));
        };
        let header_size = endian
            .u64(head, 8)
            .ok_or_else(|| ReadError::at_byte(&path, 8, "the 8-byte header size", "end of file"))?;
        let meta = TraceMeta {
            path: path.clone(),
            compression: input.compression.map(str::to_string),
            clock: Some("perf".to_string()),
            clock_is_ns: true,
            ..TraceMeta::default()
        };
        if header_size == 16 {
            let mut r = input.into_reader();
            let mut magic = [0u8; 16];
            r.read_exact(&mut magic)
                .map_err(|e| ReadError::io(&path, &e))?;
            let raw = RawStream::new(r, 16, None, endian);
            let mut rd =
                Self::with_stream(path, index, meta, endian, raw, None, InputFormat::PerfPipe);
            rd.read_pipe_prelude()?;
            return Ok(rd);
        }
        if header_size < FileHeader::LEN as u64 {
            return Err(ReadError::at_byte(
                &path,
                8,
                format!("a header size of at least {} bytes", FileHeader::LEN),
                format!("{header_size}"),
            ));
        }
        let (mut src, len): (Box<dyn ReadSeek>, u64) = match input.into_file() {
            Ok(f) => {
                let len = f.metadata().map_err(|e| ReadError::io(&path, &e))?.len();
                (Box::new(f), len)
            }
            Err(input) => {
                spool::spool(input.into_reader()).map_err(|e| ReadError::io(&path, &e))?
            }
        };
        let hbytes = read_section(
            &path,
            &mut src,
            len,
            Section {
                offset: 0,
                size: FileHeader::LEN as u64,
            },
            "the file header",
        )?;
        let fh = FileHeader::parse(&hbytes, endian).ok_or_else(|| {
            ReadError::at_byte(&path, 0, "a complete file header", "a short header")
        })?;
        if fh.data.end() > len {
            return Err(ReadError::at_byte(
                &path,
                len,
                format!(
                    "the data section ({} bytes at offset {:#x}) to end at offset {:#x}",
                    fh.data.size,
                    fh.data.offset,
                    fh.data.end()
                ),
                "end of file (truncated file?)",
            ));
        }
        let attrs = read_attrs(&path, &mut src, len, &fh, endian)?;
        let raw_placeholder =
            RawStream::new(Box::new(std::io::empty()), fh.data.offset, Some(0), endian);
        let mut rd = Self::with_stream(
            path,
            index,
            meta,
            endian,
            raw_placeholder,
            Some(fh.data.end()),
            InputFormat::PerfData,
        );
        rd.attrs = attrs;
        rd.read_features(&mut src, len, &fh)?;
        src.seek(SeekFrom::Start(fh.data.offset))
            .map_err(|e| ReadError::io(&rd.path, &e))?;
        rd.raw = RawStream::new(Box::new(src), fh.data.offset, Some(fh.data.size), endian);
        rd.rebuild();
        Ok(rd)
    }

    fn with_stream(
        path: String,
        index: u16,
        mut meta: TraceMeta,
        endian: Endian,
        raw: RawStream,
        total_len: Option<u64>,
        format: InputFormat,
    ) -> PerfDataReader {
        meta.format = Some(format);
        PerfDataReader {
            path,
            index,
            meta,
            dq: DataQuality::default(),
            noted: FxHashSet::default(),
            endian,
            attrs: Vec::new(),
            layouts: Vec::new(),
            id_pos: IdPos::default(),
            id_to_attr: FxHashMap::default(),
            decoders: Vec::new(),
            stale: true,
            tracing: None,
            pool: ChunkPool::default(),
            raw,
            decomp: None,
            scratch: Vec::new(),
            queue: OrderQueue::default(),
            comms: FxHashMap::default(),
            input_done: false,
            failed: false,
            total_len,
        }
    }

    /// The name of task `tid` from COMM / FORK side-band records seen so far.
    pub fn comm_of(&self, tid: Tid) -> Option<Comm> {
        self.comms.get(&tid).copied()
    }

    /// The tracing data (formats) of the file, once seen.
    pub fn tracing_data(&self) -> Option<&TracingData> {
        self.tracing.as_ref()
    }

    /// Chunks allocated by the streaming buffer so far (for tests of bounded memory).
    pub fn buffer_chunks(&self) -> usize {
        self.pool.allocated()
    }

    fn note(&mut self, key: &str, severity: Severity, description: &str, n: u64, example: String) {
        self.dq.add(key, severity, description, n, || example);
    }

    fn note_once(&mut self, key: &str, severity: Severity, description: &str, example: String) {
        if self.noted.insert(format!("{key}\u{0}{example}")) {
            self.note(key, severity, description, 1, example);
        }
    }

    fn stream_error(&mut self, e: StreamError) -> ReadError {
        self.failed = true;
        match e {
            StreamError::Io(err) => ReadError::new(
                &self.path,
                Some(SpanPos::Byte(self.raw.offset())),
                "readable perf data",
                format!("I/O error: {err}"),
            ),
            StreamError::Truncated {
                off,
                rtype,
                need,
                have,
            } => {
                let expected = match rtype {
                    Some(t) => format!("a {need}-byte record (type {t})"),
                    None if need == 8 => "an 8-byte record header".to_string(),
                    None => format!("{need} bytes of tracing data"),
                };
                let found = if have == 0 {
                    "end of file".to_string()
                } else {
                    format!("end of file after {have} bytes")
                };
                ReadError::at_byte(&self.path, off, expected, found)
            }
            StreamError::BadSize { off, rtype, size } => ReadError::at_byte(
                &self.path,
                off,
                "a record header with a size of at least 8 bytes",
                format!("size {size} (record type {rtype})"),
            ),
            StreamError::Decompress { off, message } => ReadError::at_byte(
                &self.path,
                off,
                "a valid zstd-compressed record",
                format!("zstd error: {message}"),
            ),
        }
    }

    fn read_features(
        &mut self,
        src: &mut Box<dyn ReadSeek>,
        len: u64,
        fh: &FileHeader,
    ) -> Result<(), ReadError> {
        let bits = fh.feature_bits();
        let table = Section {
            offset: fh.data.end(),
            size: 16 * bits.len() as u64,
        };
        let tbytes = read_section(&self.path, src, len, table, "the feature section table")?;
        for (i, bit) in bits.iter().enumerate() {
            let Some(sec) = Section::at(&tbytes, 16 * i, self.endian) else {
                continue;
            };
            if !matches!(
                *bit,
                feat::TRACING_DATA
                    | feat::HOSTNAME
                    | feat::OSRELEASE
                    | feat::VERSION
                    | feat::NRCPUS
                    | feat::CMDLINE
                    | feat::EVENT_DESC
                    | feat::CLOCKID
            ) {
                continue; // a feature stallscope does not use
            }
            let bytes = read_section(&self.path, src, len, sec, &format!("feature section {bit}"))?;
            self.apply_feature(*bit, &bytes, sec.offset)?;
        }
        Ok(())
    }

    /// Applies one feature payload (file section or pipe-mode HEADER_FEATURE body).
    fn apply_feature(&mut self, bit: u32, b: &[u8], offset: u64) -> Result<(), ReadError> {
        let e = self.endian;
        let mut off = 0;
        let ok = match bit {
            feat::TRACING_DATA => {
                let td = TracingData::parse(b, offset).map_err(|(at, expected, found)| {
                    self.failed = true;
                    ReadError::at_byte(&self.path, at, expected, found)
                })?;
                self.tracing = Some(td);
                self.stale = true;
                true
            }
            feat::HOSTNAME => header::header_string(b, &mut off, e)
                .map(|s| self.meta.hostname = Some(s))
                .is_some(),
            feat::OSRELEASE => {
                self.stale = true;
                header::header_string(b, &mut off, e)
                    .map(|s| self.meta.kernel_release = Some(s))
                    .is_some()
            }
            feat::VERSION => header::header_string(b, &mut off, e)
                .map(|s| self.meta.tool_version = Some(format!("perf {s}")))
                .is_some(),
            feat::NRCPUS => e
                .u32(b, 4)
                .map(|online| self.meta.nr_cpus = Some(online))
                .is_some(),
            feat::CMDLINE => header::cmdline(b, e)
                .map(|s| self.meta.cmdline = Some(s))
                .is_some(),
            feat::EVENT_DESC => match header::event_desc(b, e) {
                Some(descs) => {
                    for (i, (name, ids)) in descs.into_iter().enumerate() {
                        let target = self
                            .attrs
                            .iter()
                            .position(|a| ids.iter().any(|id| a.ids.contains(id)))
                            .or(Some(i));
                        if let Some(a) = target.and_then(|t| self.attrs.get_mut(t)) {
                            a.name = Some(name);
                        }
                    }
                    self.stale = true;
                    true
                }
                None => false,
            },
            feat::CLOCKID => e
                .u64(b, 0)
                .map(|id| self.meta.clock = Some(clock_name(id as i64)))
                .is_some(),
            _ => true,
        };
        if !ok {
            self.note(
                "perf_bad_feature",
                Severity::Warning,
                "header feature sections that could not be parsed (their information is missing)",
                1,
                format!("feature {bit} at offset {offset:#x}"),
            );
        }
        Ok(())
    }

    /// Pipe mode: handles the metadata records that precede the data.
    fn read_pipe_prelude(&mut self) -> Result<(), ReadError> {
        loop {
            match self.raw.peek(&mut self.pool) {
                Ok(Some((t, _))) if rt::is_prelude(t) => {}
                Ok(_) => break,
                Err(e) => return Err(self.stream_error(e)),
            }
            match self.raw.next(&mut self.pool) {
                Ok(Some(r)) => self.handle(r, false)?,
                Ok(None) => break,
                Err(e) => return Err(self.stream_error(e)),
            }
        }
        self.rebuild();
        Ok(())
    }

    /// Recomputes layouts, id map and decoders after metadata changed.
    fn rebuild(&mut self) {
        self.stale = false;
        self.layouts = self.attrs.iter().map(Layout::of).collect();
        self.id_pos = self.attrs.first().map(IdPos::of).unwrap_or_default();
        if self.attrs.iter().any(|a| IdPos::of(a) != self.id_pos) {
            self.note_once(
                "perf_ambiguous_sample_id",
                Severity::Warning,
                "event attributes disagree on where the sample id is; records were matched with the first attribute's layout",
                format!("{} attrs", self.attrs.len()),
            );
        }
        self.id_to_attr.clear();
        for (i, a) in self.attrs.iter().enumerate() {
            for &id in &a.ids {
                self.id_to_attr.insert(id, i as u16);
            }
        }
        let fallback = PrevStateTable::for_kernel_release(self.meta.kernel_release.as_deref());
        let mut decoders = Vec::with_capacity(self.attrs.len());
        let mut notes = Vec::new();
        if let Some(td) = &self.tracing {
            for (system, why) in &td.bad_formats {
                notes.push(("tracefs_bad_format", Severity::Warning, "event format files in the tracing data that could not be parsed (their events are kept without fields)", format!("{system}: {why}")));
            }
        }
        for a in &mut self.attrs {
            if a.kind != TYPE_TRACEPOINT {
                decoders.push(AttrDecoder::Other {
                    name: a.name.clone().unwrap_or_else(|| a.default_name()),
                });
                continue;
            }
            match self
                .tracing
                .as_ref()
                .and_then(|td| td.event_by_id(a.config).map(|f| (td, f)))
            {
                Some((td, f)) => {
                    let (d, why) = TracepointDecoder::new(f, td.endian, &fallback);
                    if let Some(why) = why {
                        notes.push(("tracefs_format_fallback", Severity::Info, "scheduler events whose format lacks an expected field; decoded as generic events", why));
                    }
                    if let Some(src) = d.prev_state_source().filter(|s| !s.contains("print fmt")) {
                        notes.push(("prev_state_table_fallback", Severity::Info, "sched_switch print fmt without a usable prev_state table; states decoded with a built-in table", src.to_string()));
                    }
                    a.name = Some(f.full_name());
                    decoders.push(AttrDecoder::Tracepoint(d));
                }
                None => {
                    let name = a
                        .name
                        .clone()
                        .unwrap_or_else(|| format!("tracepoint-{}", a.config));
                    let (system, short) = match name.split_once(':') {
                        Some((s, n)) => (Some(s.to_string()), n.to_string()),
                        None => (None, name.clone()),
                    };
                    notes.push(("perf_tracepoint_without_format", Severity::Warning, "tracepoint events whose format is not in the file's tracing data; kept as events without fields", name));
                    decoders.push(AttrDecoder::MissingFormat {
                        system,
                        name: short,
                    });
                }
            }
        }
        for (k, s, d, ex) in notes {
            self.note_once(k, s, d, ex);
        }
        self.decoders = decoders;
        self.meta.declared_events = self
            .attrs
            .iter()
            .filter(|a| !a.is_dummy())
            .map(|a| a.name.clone().unwrap_or_else(|| a.default_name()))
            .collect();
        if let Some(id) = self.attrs.iter().find_map(|a| a.clockid) {
            self.meta.clock = Some(clock_name(i64::from(id)));
        }
    }

    /// Reads records until some are ready to emit or the input ends.
    fn pump(&mut self) -> Result<(), ReadError> {
        while !self.queue.has_ready() {
            match self.raw.next(&mut self.pool) {
                Ok(Some(r)) => self.handle(r, false)?,
                Ok(None) => {
                    if self.decomp.as_ref().is_some_and(|d| d.leftover() > 0) {
                        self.failed = true;
                        return Err(ReadError::at_byte(
                            &self.path,
                            self.raw.offset(),
                            "compressed data that ends on a record boundary",
                            "end of file inside a decompressed record",
                        ));
                    }
                    self.queue.finish();
                    self.input_done = true;
                    return Ok(());
                }
                Err(e) => return Err(self.stream_error(e)),
            }
        }
        Ok(())
    }

    /// Dispatches one record (a reference on its chunk is held and released here or when
    /// the queued record is emitted).
    fn handle(&mut self, r: RecordRef, nested: bool) -> Result<(), ReadError> {
        let e = self.endian;
        let rtype = e.u32(self.pool.bytes(&r), 0).unwrap_or(0);
        match rtype {
            rt::SAMPLE | rt::COMM | rt::FORK | rt::EXIT | rt::LOST | rt::LOST_SAMPLES => {
                self.enqueue(r, rtype);
                return Ok(());
            }
            rt::FINISHED_ROUND => self.queue.finished_round(),
            rt::COMPRESSED | rt::COMPRESSED2 if !nested => {
                let b = self.pool.bytes(&r);
                let payload = if rtype == rt::COMPRESSED {
                    b.get(8..)
                } else {
                    e.u64(b, 8)
                        .and_then(|n| b.get(16..16usize.checked_add(usize::try_from(n).ok()?)?))
                };
                let Some(payload) = payload else {
                    self.pool.unref(&r);
                    self.failed = true;
                    return Err(ReadError::at_byte(
                        &self.path,
                        r.file_off,
                        "a COMPRESSED2 record whose data size fits in it",
                        "a larger data size",
                    ));
                };
                self.scratch.clear();
                self.scratch.extend_from_slice(payload);
                self.pool.unref(&r);
                return self.decompress(r.file_off);
            }
            rt::HEADER_ATTR => {
                let b = self.pool.bytes(&r);
                let size = match e.u32(b, 12) {
                    Some(0) => 64,
                    Some(s) => s as usize,
                    None => usize::MAX,
                };
                match b.get(8..).filter(|body| body.len() >= size) {
                    Some(body) => {
                        let mut a = Attr::parse(&body[..size], e);
                        a.ids = body[size..].chunks_exact(8).filter_map(|c| e.u64(c, 0)).collect();
                        self.attrs.push(a);
                        self.stale = true;
                    }
                    None => self.note("perf_bad_feature", Severity::Warning, "header feature sections that could not be parsed (their information is missing)", 1, format!("HEADER_ATTR record at offset {:#x}", r.file_off)),
                }
            }
            rt::HEADER_TRACING_DATA => {
                let size = e.u32(self.pool.bytes(&r), 8).unwrap_or(0);
                self.pool.unref(&r);
                if nested {
                    self.failed = true;
                    return Err(ReadError::at_byte(
                        &self.path,
                        r.file_off,
                        "ordinary records inside compressed data",
                        "a tracing-data record",
                    ));
                }
                let at = self.raw.offset();
                let payload = self
                    .raw
                    .read_payload(&mut self.pool, u64::from(size))
                    .map_err(|err| self.stream_error(err))?;
                self.apply_feature(feat::TRACING_DATA, &payload, at)?;
                return Ok(());
            }
            rt::EVENT_UPDATE => {
                let b = self.pool.bytes(&r);
                // u64 type (2 = NAME), u64 id, char name[].
                if e.u64(b, 8) == Some(2) {
                    if let (Some(id), Some(name)) = (e.u64(b, 16), b.get(24..)) {
                        let name = crate::tracefs_format::c_string(name);
                        if let Some(a) = self.attrs.iter_mut().find(|a| a.ids.contains(&id)) {
                            a.name = Some(name);
                            self.stale = true;
                        }
                    }
                }
            }
            rt::HEADER_FEATURE => {
                let b = self.pool.bytes(&r);
                let bit = e.u64(b, 8).unwrap_or(u64::MAX);
                let body = b.get(16..).unwrap_or(&[]).to_vec();
                self.pool.unref(&r);
                if let Ok(bit) = u32::try_from(bit) {
                    self.apply_feature(bit, &body, r.file_off + 16)?;
                }
                return Ok(());
            }
            t if rt::is_ignored(t) => {}
            t => {
                let off = r.file_off;
                let what = if nested { "inside compressed data" } else { "" };
                self.note(
                    "perf_unknown_record_types",
                    Severity::Warning,
                    "records of types this reader does not know, skipped by their size",
                    1,
                    format!("type {t} at offset {off:#x} {what}")
                        .trim_end()
                        .to_string(),
                );
            }
        }
        self.pool.unref(&r);
        Ok(())
    }

    /// Decompresses `self.scratch` (the payload of the compressed record at `off`) and
    /// handles the records it completes.
    fn decompress(&mut self, off: u64) -> Result<(), ReadError> {
        if self.decomp.is_none() {
            self.decomp = Some(DecompStream::new().map_err(|e| ReadError::io(&self.path, &e))?);
        }
        let mut batch = Vec::new();
        let scratch = std::mem::take(&mut self.scratch);
        let res = match self.decomp.as_mut() {
            Some(d) => d.feed(&mut self.pool, &scratch, off, self.endian, &mut batch),
            None => Ok(()),
        };
        self.scratch = scratch;
        if let Err(err) = res {
            for r in &batch {
                self.pool.unref(r);
            }
            return Err(self.stream_error(err));
        }
        let mut it = batch.into_iter();
        while let Some(r) = it.next() {
            if let Err(err) = self.handle(r, true) {
                for rest in it {
                    self.pool.unref(&rest);
                }
                return Err(err);
            }
        }
        Ok(())
    }

    /// Which attr a record belongs to.
    fn attr_of(&self, rec: &[u8], is_sample: bool) -> Option<u16> {
        match self.attrs.len() {
            0 => None,
            1 => Some(0),
            _ => {
                let pos = if is_sample {
                    self.id_pos.in_sample
                } else {
                    self.id_pos.from_end.and_then(|d| rec.len().checked_sub(d))
                };
                match pos {
                    // perf-synthesized records (COMM/FORK/MMAP of existing tasks) have id 0.
                    Some(p) => match self.endian.u64(rec, p)? {
                        0 => Some(0),
                        id => self.id_to_attr.get(&id).copied(),
                    },
                    // No id in the records: perf then uses the first attr.
                    None => Some(0),
                }
            }
        }
    }

    fn enqueue(&mut self, r: RecordRef, rtype: u32) {
        if self.stale {
            self.rebuild();
        }
        let is_sample = rtype == rt::SAMPLE;
        let rec = self.pool.bytes(&r);
        let Some(attr) = self.attr_of(rec, is_sample) else {
            self.pool.unref(&r);
            self.note(
                "perf_unknown_sample_id",
                Severity::Warning,
                "records whose sample id matches no event attribute, skipped",
                1,
                format!("type {rtype} at offset {:#x}", r.file_off),
            );
            return;
        };
        let l = &self.layouts[attr as usize];
        let time = if is_sample {
            l.sample_time_off.and_then(|o| self.endian.u64(rec, o))
        } else {
            parse_trailer(rec, l, self.endian).1
        };
        let (ts, has_time) = match time {
            Some(t) => (t, true),
            None => (self.queue.last_emitted(), false),
        };
        self.queue.push(Pending {
            ts,
            has_time,
            attr,
            rec: r,
        });
        if self.queue.pending_len() >= MAX_PENDING {
            self.queue.release_half();
            self.note("perf_forced_flush", Severity::Info, "records released before their round ended because too many were queued (no FINISHED_ROUND records); order may differ from perf", 1, format!("at offset {:#x}", r.file_off));
        }
    }

    /// Turns one released record into an event (`None` for side-band-only or skipped ones).
    fn emit(&mut self, p: Pending, out_of_order: bool) -> Option<Event> {
        if self.stale {
            self.rebuild();
        }
        let e = self.endian;
        let span = Span {
            input: self.index,
            pos: SpanPos::Byte(p.rec.file_off),
        };
        if out_of_order {
            self.dq.add(
                "perf_out_of_order_events",
                Severity::Warning,
                "records older than one already emitted (outside perf's round ordering)",
                1,
                || format!("offset {:#x} at {} ns", p.rec.file_off, p.ts),
            );
        }
        let rec = self.pool.bytes(&p.rec);
        let rtype = e.u32(rec, 0).unwrap_or(0);
        let l = &self.layouts[p.attr as usize];
        let mut event = Event {
            ts: p.ts,
            cpu: 0,
            pid: -1,
            span,
            kind: EventKind::Lost { count: None },
            callchain: None,
        };
        if rtype == rt::SAMPLE {
            let Some(s) = parse_sample(rec, l, e) else {
                self.pool.unref(&p.rec);
                self.note(
                    "perf_bad_sample",
                    Severity::Warning,
                    "SAMPLE records too short for their sample_type, skipped",
                    1,
                    format!("offset {:#x}", p.rec.file_off),
                );
                return None;
            };
            event.cpu = s.cpu.unwrap_or(0);
            event.pid = s.tid.unwrap_or(-1);
            event.callchain = s
                .callchain
                .map(|cc| cc.chunks_exact(8).filter_map(|c| e.u64(c, 0)).collect());
            let kind = match &self.decoders[p.attr as usize] {
                AttrDecoder::Tracepoint(d) => match s.raw.map(|raw| d.decode(raw)) {
                    Some(Ok(kind)) => Ok(kind),
                    _ => Err(()),
                },
                AttrDecoder::MissingFormat { system, name } => {
                    Ok(EventKind::Generic(Box::new(GenericEvent {
                        system: system.clone(),
                        name: name.clone(),
                        fields: Vec::new(),
                    })))
                }
                AttrDecoder::Other { name } => {
                    let mut fields = Vec::new();
                    if let Some(ip) = s.ip {
                        fields.push(("ip".to_string(), FieldValue::UInt(ip)));
                    }
                    if let Some(period) = s.period {
                        fields.push(("period".to_string(), FieldValue::UInt(period)));
                    }
                    Ok(EventKind::Generic(Box::new(GenericEvent {
                        system: None,
                        name: name.clone(),
                        fields,
                    })))
                }
            };
            self.pool.unref(&p.rec);
            match kind {
                Ok(k) => event.kind = k,
                Err(()) => {
                    self.note("perf_bad_tracepoint_record", Severity::Warning, "tracepoint payloads missing or too short for their format (or with a __data_loc outside the record), skipped", 1, format!("offset {:#x}", p.rec.file_off));
                    return None;
                }
            }
            return Some(event);
        }
        let (tid, _, cpu) = parse_trailer(rec, l, e);
        event.cpu = cpu.unwrap_or(0);
        event.pid = tid.unwrap_or(-1);
        let body_end = rec.len().saturating_sub(l.trailer_len).max(8);
        let u32_at = |o: usize| e.u32(rec, o).map(|v| v as i32);
        let result = match rtype {
            rt::COMM => match (u32_at(8), u32_at(12), rec.get(16..body_end)) {
                (Some(tgid), Some(tid), Some(name)) => {
                    let comm = Comm::from_bytes(name);
                    self.comms.insert(tid, comm);
                    event.pid = tid;
                    event.kind = EventKind::TaskComm { tgid, tid, comm };
                    Some(event)
                }
                _ => None,
            },
            rt::FORK | rt::EXIT => {
                // u32 pid, ppid, tid, ptid; u64 time.
                if let (Some(tid), Some(ptid)) = (u32_at(16), u32_at(20)) {
                    if rtype == rt::FORK {
                        if let Some(c) = self.comms.get(&ptid).copied() {
                            self.comms.insert(tid, c);
                        }
                    } else {
                        self.comms.remove(&tid);
                    }
                }
                None
            }
            rt::LOST | rt::LOST_SAMPLES => {
                let count = e.u64(rec, if rtype == rt::LOST { 16 } else { 8 });
                self.dq.add("lost_events", Severity::Error, "events the kernel dropped (perf LOST / LOST_SAMPLES records): results around them are incomplete", count.unwrap_or(1), || {
                    format!("offset {:#x}: {} lost at {} ns", p.rec.file_off, count.map_or("?".to_string(), |c| c.to_string()), p.ts)
                });
                event.kind = EventKind::Lost { count };
                Some(event)
            }
            _ => None,
        };
        self.pool.unref(&p.rec);
        result
    }
}

impl EventReader for PerfDataReader {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        if self.failed {
            return Ok(None);
        }
        loop {
            if let Some((p, ooo)) = self.queue.pop() {
                match self.emit(p, ooo) {
                    Some(ev) => return Ok(Some(ev)),
                    None => continue,
                }
            }
            if self.input_done {
                return Ok(None);
            }
            self.pump()?;
        }
    }

    fn quality(&self) -> &DataQuality {
        &self.dq
    }

    fn progress(&self) -> Option<(u64, u64)> {
        self.total_len.map(|t| (self.raw.offset().min(t), t))
    }
}

/// perf's name for a `clockid_t`.
fn clock_name(id: i64) -> String {
    match id {
        0 => "realtime".into(),
        1 => "mono".into(),
        4 => "mono_raw".into(),
        7 => "boot".into(),
        11 => "tai".into(),
        other => format!("clockid-{other}"),
    }
}

/// Reads a file section after checking it lies inside the file and is of sane size.
fn read_section(
    path: &str,
    src: &mut Box<dyn ReadSeek>,
    len: u64,
    sec: Section,
    what: &str,
) -> Result<Vec<u8>, ReadError> {
    if sec.size > MAX_SECTION {
        return Err(ReadError::at_byte(
            path,
            sec.offset,
            format!("{what} of at most {MAX_SECTION} bytes"),
            format!("a size of {} bytes", sec.size),
        ));
    }
    if sec.offset > len || sec.size > len - sec.offset {
        return Err(ReadError::at_byte(
            path,
            sec.offset,
            format!("{what} ({} bytes)", sec.size),
            format!("end of file at offset {len:#x}"),
        ));
    }
    let mut buf = vec![0u8; sec.size as usize];
    src.seek(SeekFrom::Start(sec.offset))
        .and_then(|_| src.read_exact(&mut buf))
        .map_err(|e| {
            ReadError::at_byte(
                path,
                sec.offset,
                what.to_string(),
                format!("I/O error: {e}"),
            )
        })?;
    Ok(buf)
}

/// The attrs section with each attr's ids.
fn read_attrs(
    path: &str,
    src: &mut Box<dyn ReadSeek>,
    len: u64,
    fh: &FileHeader,
    e: Endian,
) -> Result<Vec<Attr>, ReadError> {
    if fh.attr_size < 16 + 64 || fh.attr_size > 4096 {
        return Err(ReadError::at_byte(
            path,
            16,
            "an attr entry size between 80 and 4096 bytes",
            format!("{}", fh.attr_size),
        ));
    }
    let bytes = read_section(path, src, len, fh.attrs, "the attrs section")?;
    let stride = fh.attr_size as usize;
    let mut attrs = Vec::new();
    for (i, entry) in bytes.chunks_exact(stride).enumerate() {
        let mut a = Attr::parse(&entry[..stride - 16], e);
        if let Some(ids) = Section::at(entry, stride - 16, e) {
            let what = format!("the ids of attr {i}");
            let b = read_section(path, src, len, ids, &what)?;
            a.ids = b.chunks_exact(8).filter_map(|c| e.u64(c, 0)).collect();
        }
        attrs.push(a);
    }
    Ok(attrs)
}
