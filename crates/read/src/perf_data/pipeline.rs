//! [`Pipeline`]: the reading side of a perf input, up to time-ordered records.
//!
//! Per record ([`Pipeline::handle`]): kernel records that can become events (SAMPLE, COMM,
//! FORK, EXIT, LOST, LOST_SAMPLES) are queued with their time for ordering
//! ([`super::order`]); FINISHED_ROUND releases queued records; COMPRESSED records are
//! decompressed and their records handled in turn; pipe-mode metadata records (HEADER_ATTR,
//! HEADER_TRACING_DATA and the payload after it, EVENT_UPDATE, HEADER_FEATURE) update the
//! attrs, names and formats; known bookkeeping records are dropped; unknown ones are counted.
//! Released records ([`Pipeline::pop_released`]) are decoded by a [`super::decode::Decoder`]
//! with the [`DecodeTables`] built here once per metadata change ([`Pipeline::rebuild`]).

use std::sync::Arc;

use rustc_hash::FxHashSet;
use stallscope_model::{DataQuality, InputFormat, Problem, SpanPos, TraceMeta};

use super::attr::{parse_trailer, Attr, AttrIds, Layout, TYPE_TRACEPOINT};
use super::decode::{AttrDecoder, DecodeTables};
use super::header::{self, feat};
use super::order::{OrderQueue, Pending, MAX_PENDING};
use super::stream::{prefetch, ChunkPool, DecompStream, RawStream, RecordRef, StreamError, MAPPED};
use crate::tracefs_format::{Endian, PrevStateTable, TracepointDecoder, TracingData};
use crate::ReadError;

/// Record types.
pub(super) mod rt {
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const FORK: u32 = 7;
    pub const SAMPLE: u32 = 9;
    pub const MMAP2: u32 = 10;
    pub const LOST_SAMPLES: u32 = 13;
    pub const HEADER_ATTR: u32 = 64;
    pub const HEADER_TRACING_DATA: u32 = 66;
    pub const FINISHED_ROUND: u32 = 68;
    pub const AUXTRACE: u32 = 71;
    pub const EVENT_UPDATE: u32 = 78;
    pub const HEADER_FEATURE: u32 = 80;
    pub const COMPRESSED: u32 = 81;
    pub const COMPRESSED2: u32 = 83;

    /// Types this reader knows and deliberately ignores (switches, ksymbols, perf
    /// bookkeeping such as ID_INDEX, THREAD_MAP, CPU_MAP, TIME_CONV, FINISHED_INIT; MMAP and
    /// MMAP2 unless a profile asks for them; AUXTRACE has a payload outside its size and is
    /// never ignored by size alone).
    pub fn is_ignored(t: u32) -> bool {
        matches!(t, 1 | 5 | 6 | 8 | 10 | 11 | 12 | 14..=21 | 65 | 67 | 69 | 70 | 72..=77 | 79 | 82)
    }

    /// perf-tool metadata records that precede the data in pipe mode.
    pub fn is_prelude(t: u32) -> bool {
        matches!(t, 64..=67 | 69..=80) && t != FINISHED_ROUND
    }
}

/// The reading side of one perf input: metadata, record streams, ordering queue, and the
/// decode tables. [`super::PerfDataReader`] runs it inline or on a worker thread.
pub struct Pipeline {
    pub(super) path: String,
    pub(super) index: u16,
    pub(super) meta: TraceMeta,
    pub(super) dq: DataQuality,
    pub(super) noted: FxHashSet<String>,
    pub(super) endian: Endian,
    pub(super) attrs: Vec<Attr>,
    pub(super) layouts: Vec<Layout>,
    /// Which attr a record belongs to.
    pub(super) ids: AttrIds,
    tables: Arc<DecodeTables>,
    pub(super) stale: bool,
    pub(super) tracing: Option<TracingData>,
    pub(super) pool: ChunkPool,
    pub(super) raw: RawStream,
    pub(super) decomp: Option<DecompStream>,
    pub(super) scratch: Vec<u8>,
    pub(super) queue: OrderQueue,
    pub(super) input_done: bool,
    pub(super) failed: bool,
    /// The file is known to be incomplete (an unfinished recording or a cut copy): a record
    /// cut by the end of the file ends the data, with a data-quality error.
    pub(super) ends_early: bool,
    pub(super) total_len: Option<u64>,
    /// Input offset at which [`Pipeline::drop_mapped_pages`] next looks.
    next_drop_check: u64,
    /// Calls of [`Pipeline::drop_mapped_pages`] that reached a MiB step.
    drop_checks: u32,
    /// Input offset below which no mapped record is queued any more (as of the last look).
    pub(super) low_water: u64,
    /// Whether the pipeline drops mapped pages below `low_water` itself (false when a
    /// decoding thread does it after decoding the records).
    pub(super) drop_pages: bool,
    /// Whether MMAP / MMAP2 records become events ([`super::PerfDataReader::open_with_mappings`]).
    pub(super) mappings: bool,
}
impl Pipeline {
    pub(super) fn new(
        path: String,
        index: u16,
        mut meta: TraceMeta,
        endian: Endian,
        raw: RawStream,
        total_len: Option<u64>,
        format: InputFormat,
    ) -> Pipeline {
        meta.format = Some(format);
        Pipeline {
            path,
            index,
            meta,
            dq: DataQuality::default(),
            noted: FxHashSet::default(),
            endian,
            attrs: Vec::new(),
            layouts: Vec::new(),
            ids: AttrIds::default(),
            tables: Arc::default(),
            stale: true,
            tracing: None,
            pool: ChunkPool::default(),
            raw,
            decomp: None,
            scratch: Vec::new(),
            queue: OrderQueue::default(),
            input_done: false,
            failed: false,
            ends_early: false,
            total_len,
            next_drop_check: 0,
            drop_checks: 0,
            low_water: 0,
            drop_pages: true,
            mappings: false,
        }
    }

    /// Every [`LOW_WATER_EVERY`] MiB of mapped input: updates [`Pipeline::low_water`] and,
    /// when `drop_pages`, drops the mapped pages below it (every record there was emitted
    /// and, inline, already decoded).
    fn drop_mapped_pages(&mut self) {
        let pos = self.raw.offset();
        if pos < self.next_drop_check || self.pool.map.is_none() {
            return;
        }
        self.next_drop_check = pos + (1 << 20);
        // The search reads every queued record: every MiB it was 1.3 % of `analyze`'s
        // samples.
        self.drop_checks += 1;
        if !self.drop_checks.is_multiple_of(LOW_WATER_EVERY) {
            return;
        }
        self.low_water = self.queue.min_mapped_off().unwrap_or(pos).min(pos);
        if self.drop_pages {
            self.pool.drop_mapped_below(self.low_water);
        }
    }

    fn note(&mut self, problem: Problem, n: u64, example: String) {
        self.dq.add(problem, n, || example);
    }

    fn note_once(&mut self, problem: Problem, example: String) {
        if self
            .noted
            .insert(format!("{}\u{0}{example}", problem.key()))
        {
            self.note(problem, 1, example);
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

    /// Applies one feature payload (file section or pipe-mode HEADER_FEATURE body).
    pub(super) fn apply_feature(
        &mut self,
        bit: u32,
        b: &[u8],
        offset: u64,
    ) -> Result<(), ReadError> {
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
            // nr_cpus_available, nr_cpus_online: a CPU number is below the first (CPUs can
            // be offline in the middle of the range)
            feat::NRCPUS => e
                .u32(b, 0)
                .zip(e.u32(b, 4))
                .map(|(avail, online)| self.meta.nr_cpus = Some(avail.max(online)))
                .is_some(),
            feat::BUILD_ID => {
                // records `{u32 type, u16 misc, u16 size; i32 pid; u8 build_id[24]; char
                // filename[]}`; with PERF_RECORD_MISC_BUILD_ID_SIZE (misc bit 15) byte 20
                // of the id says its length, else it is 20 bytes (SHA-1)
                let mut at = 0usize;
                while let (Some(misc), Some(size)) = (e.u16(b, at + 4), e.u16(b, at + 6)) {
                    let size = usize::from(size);
                    let Some(rec) = b.get(at..at + size).filter(|_| size >= 36) else {
                        break;
                    };
                    let len = if misc & (1 << 15) != 0 {
                        usize::from(rec[32]).min(20)
                    } else {
                        20
                    };
                    let id: String = rec[12..12 + len]
                        .iter()
                        .map(|x| format!("{x:02x}"))
                        .collect();
                    let name = crate::tracefs_format::c_string(&rec[36..]);
                    if !name.is_empty() && id.bytes().any(|c| c != b'0') {
                        self.meta.build_ids.push((name, id));
                    }
                    at += size;
                }
                true
            }
            feat::CMDLINE => header::cmdline(b, e)
                .map(|s| self.meta.set_perf_cmdline(s))
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
                Problem::PerfBadFeature,
                1,
                format!("feature {bit} at offset {offset:#x}"),
            );
        }
        Ok(())
    }

    /// Pipe mode: handles the metadata records that precede the data.
    pub(super) fn read_pipe_prelude(&mut self) -> Result<(), ReadError> {
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
    pub(super) fn rebuild(&mut self) {
        self.stale = false;
        self.layouts = self.attrs.iter().map(Layout::of).collect();
        let (ids, ambiguous) = AttrIds::of(&self.attrs);
        self.ids = ids;
        if ambiguous {
            self.note_once(
                Problem::PerfAmbiguousSampleId,
                format!("{} attrs", self.attrs.len()),
            );
        }
        let fallback = PrevStateTable::for_kernel_release(self.meta.kernel_release.as_deref());
        let mut decoders = Vec::with_capacity(self.attrs.len());
        let mut notes = Vec::new();
        if let Some(td) = &self.tracing {
            for (system, why) in &td.bad_formats {
                notes.push((Problem::TracefsBadFormat, format!("{system}: {why}")));
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
                    let (mut d, why) = TracepointDecoder::new(f, td.endian, &fallback);
                    d.set_trace_context(
                        td.long_size,
                        &std::sync::Arc::new(crate::tracefs_format::PrintkFormats::parse(
                            &td.printk_formats,
                        )),
                    );
                    if let Some(why) = why {
                        notes.push((Problem::TracefsFormatFallback, why));
                    }
                    if let Some(src) = d.prev_state_source().filter(|s| !s.contains("print fmt")) {
                        notes.push((Problem::PrevStateTableFallback, src.to_string()));
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
                    notes.push((Problem::PerfTracepointWithoutFormat, name));
                    decoders.push(AttrDecoder::MissingFormat {
                        system,
                        name: short,
                    });
                }
            }
        }
        for (problem, ex) in notes {
            self.note_once(problem, ex);
        }
        self.tables = Arc::new(DecodeTables {
            mappings: self.mappings,
            endian: self.endian,
            index: self.index,
            layouts: self.layouts.clone(),
            decoders,
        });
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

    /// Pipe mode: whether the input at the next record is not perf data (perf's own
    /// messages appended by `perf record -o - … > file 2>&1`, or other bytes after the
    /// stream). A record type at or above 256 is none perf defines (kernel types are below
    /// 64, perf's own below 128); a header cut by the end is checked by [`Pipeline::pump`].
    /// The stream then ends there with a data-quality warning quoting the bytes, as perf
    /// keeps the events before them — when they are text or zeros; other bytes are a corrupt
    /// record, a fatal error at its offset.
    fn pipe_garbage_ahead(&mut self) -> Result<bool, ReadError> {
        if self.meta.format != Some(InputFormat::PerfPipe) {
            return Ok(false);
        }
        let peeked = self.raw.peek(&mut self.pool);
        let Ok(Some((rtype, size))) = peeked else {
            return Ok(false);
        };
        if rtype < 256 && size >= 8 {
            return Ok(false);
        }
        // perf's own messages (`2>&1`) or zero fill end the stream; binary bytes that are no
        // record header inside it are a corrupt record — the events after it would be lost
        // without a word
        let ahead = self.raw.preview(&mut self.pool, 64);
        if !self.text_ahead() && ahead.iter().any(|&b| b != 0) {
            let off = self.raw.offset();
            return Err(ReadError::at_byte(
                &self.path,
                off,
                "a perf record header (type below 256, size at least 8) inside the pipe stream",
                format!("type {rtype}, size {size} (a corrupt record, not perf's messages after the stream)"),
            ));
        }
        self.end_at_garbage();
        Ok(true)
    }

    /// Whether the bytes at the read position are text (printable ASCII and whitespace):
    /// what `2>&1` appends, as opposed to a binary record cut by the end.
    fn text_ahead(&mut self) -> bool {
        let bytes = self.raw.preview(&mut self.pool, 64);
        !bytes.is_empty()
            && bytes
                .iter()
                .all(|&b| b.is_ascii_graphic() || b.is_ascii_whitespace())
    }

    /// Ends a pipe-mode stream at bytes that are not records (see
    /// [`Pipeline::pipe_garbage_ahead`]).
    fn end_at_garbage(&mut self) {
        let off = self.raw.offset();
        let bytes = self.raw.preview(&mut self.pool, 160);
        let text: String = String::from_utf8_lossy(&bytes)
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        self.note(
            Problem::PerfPipeTrailingGarbage,
            1,
            format!("offset {off:#x}: {:?}", text.trim()),
        );
        self.queue.finish();
        self.input_done = true;
    }

    /// Reads records until some are ready to emit or the input ends.
    fn pump(&mut self) -> Result<(), ReadError> {
        while !self.queue.has_ready() {
            self.pump_mapped();
            if self.queue.has_ready() {
                break;
            }
            if self.pipe_garbage_ahead()? {
                return Ok(());
            }
            match self.raw.next(&mut self.pool) {
                Ok(Some(r)) => {
                    self.handle(r, false)?;
                    self.drop_mapped_pages();
                }
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
                Err(StreamError::Truncated {
                    off,
                    rtype,
                    need,
                    have,
                }) if self.ends_early => {
                    // the record cut by the end of an incomplete file: the data ends here
                    self.note(
                        Problem::PerfDataCutRecord,
                        1,
                        format!(
                            "offset {off:#x}: {} of {need} bytes of a record{} present",
                            have,
                            rtype.map_or(String::new(), |t| format!(" of type {t}"))
                        ),
                    );
                    self.queue.finish();
                    self.input_done = true;
                    return Ok(());
                }
                Err(StreamError::Truncated {
                    off,
                    rtype,
                    need,
                    have,
                }) if self.meta.format == Some(InputFormat::PerfPipe) => {
                    // a pipe has no size to check against: a last "record" cut by the end
                    // is text appended after the stream, or a recording killed mid-write
                    if self.text_ahead() {
                        self.end_at_garbage();
                    } else {
                        self.note(
                            Problem::PerfDataCutRecord,
                            1,
                            format!(
                                "offset {off:#x}: {have} of {need} bytes of a record{} present",
                                rtype.map_or(String::new(), |t| format!(" of type {t}"))
                            ),
                        );
                        self.queue.finish();
                        self.input_done = true;
                    }
                    return Ok(());
                }
                Err(e) => return Err(self.stream_error(e)),
            }
        }
        Ok(())
    }

    /// The fast path of [`Pipeline::pump`] over a mapped data section: queues SAMPLE records
    /// and applies FINISHED_ROUNDs straight from the mapping until records are ready, and
    /// stops at the first record that needs anything else (another type, a size problem, an
    /// unknown id, no time, a full queue), which the general path ([`Pipeline::handle`])
    /// then takes. What it does per record is what `handle` + `enqueue` do for these two
    /// types.
    fn pump_mapped(&mut self) {
        let (Some((start, end)), Some(map)) = (self.raw.mapped_range(), self.pool.map.clone())
        else {
            return;
        };
        if self.stale {
            self.rebuild();
        }
        let e = self.endian;
        let (data, base) = (&map.map[..], map.base);
        let mut pos = start;
        while end - pos >= 8 && !self.queue.has_ready() {
            let at = (pos - base) as usize;
            // Two lines: a record is about 100 bytes.
            prefetch(data, at + PREFETCH_AHEAD);
            prefetch(data, at + PREFETCH_AHEAD + 64);
            let (Some(rtype), Some(size)) = (e.u32(data, at), e.u16(data, at + 6)) else {
                break;
            };
            if size < 8 || end - pos < u64::from(size) {
                break;
            }
            if rtype == rt::SAMPLE {
                if self.queue.pending_len() + 1 >= MAX_PENDING {
                    break;
                }
                let rec = &data[at..at + usize::from(size)];
                let Some(attr) = self.attr_of(rec, true) else {
                    break;
                };
                let time = self.layouts[attr as usize]
                    .sample_time_off
                    .and_then(|o| e.u64(rec, o));
                let Some(ts) = time else {
                    break;
                };
                self.queue.push(Pending::new(
                    ts,
                    true,
                    attr,
                    RecordRef {
                        chunk: MAPPED,
                        off: 0,
                        len: size,
                        file_off: pos,
                    },
                ));
            } else if rtype == rt::FINISHED_ROUND {
                self.queue.finished_round();
            } else {
                break;
            }
            pos += u64::from(size);
            if pos >= self.next_drop_check {
                self.raw.advance_mapped(pos);
                self.drop_mapped_pages();
                // The next MiB but one is mapped in one call instead of page faults.
                map.populate(pos + (1 << 20), pos + (2 << 20));
            }
        }
        self.raw.advance_mapped(pos);
    }

    /// Dispatches one record (a reference on its chunk is held and released here or when
    /// the queued record is emitted).
    fn handle(&mut self, r: RecordRef, nested: bool) -> Result<(), ReadError> {
        let e = self.endian;
        let rtype = e.u32(self.pool.bytes(&r), 0).unwrap_or(0);
        match rtype {
            rt::MMAP | rt::MMAP2 if self.mappings => {
                self.enqueue(r, rtype);
                return Ok(());
            }
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
                        a.ids = body[size..]
                            .chunks_exact(8)
                            .filter_map(|c| e.u64(c, 0))
                            .collect();
                        self.attrs.push(a);
                        self.stale = true;
                    }
                    None => self.note(
                        Problem::PerfBadFeature,
                        1,
                        format!("HEADER_ATTR record at offset {:#x}", r.file_off),
                    ),
                }
            }
            rt::AUXTRACE => {
                // u64 size, offset, reference; u32 idx, tid, cpu, reserved: `size` bytes of
                // AUX data (Intel PT, CoreSight, SPE packets) follow the record, outside
                // its header.size. They are skipped: this reader does not decode them.
                let size = e.u64(self.pool.bytes(&r), 8).unwrap_or(0);
                self.payload_record(
                    &r,
                    nested,
                    "an AUXTRACE record (its data cannot follow it there)",
                )?;
                self.raw
                    .skip_payload(&mut self.pool, size)
                    .map_err(|err| self.stream_error(err))?;
                self.note(
                    Problem::PerfAuxtraceSkipped,
                    1,
                    format!("{size} bytes at offset {:#x}", r.file_off + 48),
                );
                return Ok(());
            }
            rt::HEADER_TRACING_DATA => {
                let size = e.u32(self.pool.bytes(&r), 8).unwrap_or(0);
                self.payload_record(&r, nested, "a tracing-data record")?;
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
                    Problem::PerfUnknownRecordTypes,
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

    /// Releases record `r`, whose payload follows it in the stream (tracing data, AUXTRACE);
    /// inside compressed data (`nested`) no payload can follow: an error naming `what`.
    fn payload_record(&mut self, r: &RecordRef, nested: bool, what: &str) -> Result<(), ReadError> {
        self.pool.unref(r);
        if nested {
            self.failed = true;
            return Err(ReadError::at_byte(
                &self.path,
                r.file_off,
                "ordinary records inside compressed data",
                what,
            ));
        }
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
    #[inline]
    fn attr_of(&self, rec: &[u8], is_sample: bool) -> Option<u16> {
        self.ids.attr_of(rec, is_sample, self.endian)
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
                Problem::PerfUnknownSampleId,
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
        self.queue.push(Pending::new(ts, has_time, attr, r));
        if self.queue.pending_len() >= MAX_PENDING {
            self.queue.release_half();
            self.note(
                Problem::PerfForcedFlush,
                1,
                format!("at offset {:#x}", r.file_off),
            );
        }
    }

    /// The next record released by the ordering queue (reading more input when none is),
    /// `None` at the end. The caller decodes it from [`Pipeline::record`] and then calls
    /// [`Pipeline::release`].
    #[inline]
    pub(super) fn pop_released(&mut self) -> Result<Option<Pending>, ReadError> {
        if self.failed {
            return Ok(None);
        }
        loop {
            if let Some((p, out_of_order)) = self.queue.pop() {
                if self.stale {
                    self.rebuild();
                }
                if out_of_order {
                    self.dq.add(Problem::PerfOutOfOrderEvents, 1, || {
                        format!("offset {:#x} at {} ns", p.rec().file_off, p.ts)
                    });
                }
                return Ok(Some(p));
            }
            if self.input_done {
                return Ok(None);
            }
            self.pump()?;
        }
    }

    /// Appends released records to `out` until it holds `max` (reading more input as
    /// needed); `Ok(true)` when the input is exhausted. Like repeated
    /// [`Pipeline::pop_released`] calls; on an error `out` keeps the records before it.
    pub(super) fn pop_released_into(
        &mut self,
        out: &mut Vec<Pending>,
        max: usize,
    ) -> Result<bool, ReadError> {
        while out.len() < max {
            if self.failed {
                return Ok(true);
            }
            if self.queue.has_ready() {
                if self.stale {
                    self.rebuild();
                }
                let dq = &mut self.dq;
                self.queue.pop_into(out, max - out.len(), |p| {
                    dq.add(Problem::PerfOutOfOrderEvents, 1, || {
                        format!("offset {:#x} at {} ns", p.rec().file_off, p.ts)
                    });
                });
                continue;
            }
            if self.input_done {
                return Ok(true);
            }
            self.pump()?;
        }
        Ok(false)
    }

    /// The bytes of a released record.
    #[inline]
    pub(super) fn record(&self, p: &Pending) -> &[u8] {
        self.pool.bytes(&p.rec())
    }

    /// Done with a released record: its buffer space may be reused.
    #[inline]
    pub(super) fn release(&mut self, p: &Pending) {
        self.pool.unref(&p.rec());
    }

    /// The current decode tables.
    pub(super) fn tables(&self) -> &Arc<DecodeTables> {
        &self.tables
    }

    /// `(bytes consumed, total)` when the total is known.
    pub(super) fn progress(&self) -> Option<(u64, u64)> {
        self.total_len.map(|t| (self.raw.offset().min(t), t))
    }
}

/// [`Pipeline::low_water`] is updated every this many MiB of input (peak RSS of
/// `analyze` on the bench trace: +2-3 MiB against every MiB).
const LOW_WATER_EVERY: u32 = 4;

/// How far ahead of the record being queued [`prefetch`] asks for the mapped bytes.
const PREFETCH_AHEAD: usize = 2048;

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
