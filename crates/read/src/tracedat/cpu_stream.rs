//! [`CpuStream`]: one CPU's trace data turned into batches of [`Event`]s.
//!
//! ```text
//! plain data        [offset, offset+size): sub-buffers back to back, read 1 MiB at a time
//! compressed data   u32 chunk count, then chunks (`size` counts the chunks only): u32 csize, u32 size, csize bytes → `size`
//!                   bytes of sub-buffers (one chunk decompressed at a time)
//! ```
//! Each sub-buffer goes through [`crate::ringbuf`]; each record through the event's
//! [`TracepointDecoder`] (scheduler events native, the rest generic), with the context pid
//! from `common_pid`. Timestamps get the file's TSC2NSEC conversion and OFFSET/DATE shift.
//!
//! Spans: plain data → the file offset of the record's ring-buffer item header; compressed
//! data → the file offset of the chunk header plus the item's offset inside the
//! decompressed chunk (unique within the chunk, not a file position).
//!
//! Problems inside pages (bad commit, item overrunning the commit, unknown event id, record
//! too short for its format) are counted and the page's or record's data skipped; missed-
//! events flags become [`EventKind::Lost`] events. A chunk or block that cannot be read
//! (truncated file, corrupt compressed data) is a fatal [`ReadError`].

use std::collections::VecDeque;
use std::sync::Arc;

use stallscope_model::{DataQuality, Event, EventKind, Problem, Span, SpanPos};

use crate::ringbuf::{MissedEvents, PageLayout, PageRecords};
use crate::tracefs_format::{CommCache, IntAccessor, TracepointDecoder};
use crate::ReadError;

use super::compress::Codec;
use super::options::CpuArea;
use super::source::Source;

/// Plain data is read in blocks of about this size (rounded to whole sub-buffers).
const BLOCK: usize = 1 << 20;

/// End offset of a CPU's data: for chunk-compressed data the recorded size counts the
/// chunks (8-byte header + data each) but not the leading u32 chunk count.
pub fn data_end(area: &CpuArea, compressed: bool) -> u64 {
    let start = if compressed {
        area.offset.saturating_add(4)
    } else {
        area.offset
    };
    start.saturating_add(area.size)
}

/// Timestamp conversion from the file's options (trace-cmd `timestamp_calc`).
#[derive(Clone, Copy, Debug, Default)]
pub struct TsAdjust {
    /// TSC2NSEC `(mult, shift)`: `ts = (ts · mult) >> shift`.
    pub tsc: Option<(u32, u32)>,
    /// OFFSET + DATE, ns, added last.
    pub offset: i64,
}

impl TsAdjust {
    /// The adjusted timestamp.
    #[inline]
    pub fn apply(&self, ts: u64) -> u64 {
        let ts = match self.tsc {
            Some((mult, shift)) => ((u128::from(ts) * u128::from(mult)) >> shift) as u64,
            None => ts,
        };
        ts.wrapping_add_signed(self.offset)
    }
}

/// Decoder of one event id.
pub struct EventDecoder {
    /// Kind decoder.
    pub decoder: TracepointDecoder,
    /// `common_pid`.
    pub pid: Option<IntAccessor>,
    /// `system:name`, declared on first sight.
    pub name: String,
}

/// What all CPU streams of one file share.
pub struct Tables {
    /// Path for messages.
    pub path: String,
    /// Input index for spans.
    pub index: u16,
    /// The data.
    pub src: Source,
    /// Sub-buffer layout.
    pub layout: PageLayout,
    /// Decoders by event id.
    pub decoders: Vec<Option<EventDecoder>>,
    /// `common_type`, or `None` = u16 at 0.
    pub type_field: Option<IntAccessor>,
    /// Timestamp conversion.
    pub adjust: TsAdjust,
    /// Codec of chunk-compressed CPU data, `None` when plain.
    pub codec: Option<Codec>,
}

/// A decoded run of one CPU's events.
#[derive(Default)]
pub struct Batch {
    /// Events in the CPU's order.
    pub events: VecDeque<Event>,
    /// Problems met while decoding them.
    pub dq: DataQuality,
    /// Event names seen for the first time on this CPU.
    pub declared: Vec<String>,
    /// The CPU has no more data.
    pub done: bool,
}

/// Decoding state of one CPU.
pub struct CpuStream {
    tables: Arc<Tables>,
    /// CPU number.
    pub cpu: u32,
    area: CpuArea,
    /// Next file offset to read (block or chunk header).
    next_off: u64,
    /// Chunks left (compressed data; `None` before the count is read).
    chunks_left: Option<u32>,
    buf: Vec<u8>,
    /// Span position of `buf[0]`.
    buf_span: u64,
    /// Offset of the next sub-buffer in `buf`.
    page_pos: usize,
    names: CommCache,
    seen: Vec<bool>,
    finished: bool,
    /// An emptied batch buffer handed back by the merge, reused for the next batch (keeps
    /// the allocation warm instead of faulting in fresh pages for every batch).
    pub spare: Option<VecDeque<Event>>,
}

impl CpuStream {
    /// A stream over `area`.
    pub fn new(tables: Arc<Tables>, area: CpuArea) -> CpuStream {
        let seen = vec![false; tables.decoders.len()];
        CpuStream {
            tables,
            cpu: area.cpu,
            area,
            next_off: area.offset,
            chunks_left: None,
            buf: Vec::new(),
            buf_span: 0,
            page_pos: 0,
            names: CommCache::default(),
            seen,
            finished: area.size == 0,
            spare: None,
        }
    }

    /// A fatal error about this CPU's data at the current read position.
    pub fn internal_error(&self, why: &str) -> ReadError {
        ReadError::at_byte(
            &self.tables.path,
            self.next_off,
            format!("decodable data for CPU {}", self.cpu),
            why,
        )
    }

    /// Decodes whole sub-buffers until at least `max_events` events (or the end).
    pub fn next_batch(&mut self, max_events: usize) -> Result<Batch, ReadError> {
        let mut batch = Batch {
            events: match self.spare.take() {
                Some(mut v) => {
                    v.clear();
                    v
                }
                None => VecDeque::with_capacity(max_events + 512),
            },
            ..Batch::default()
        };
        let subbuf = self.tables.layout.subbuf_size.max(1);
        while batch.events.len() < max_events {
            if self.page_pos >= self.buf.len() && !self.refill()? {
                batch.done = true;
                break;
            }
            let buf = std::mem::take(&mut self.buf);
            let end = (self.page_pos + subbuf).min(buf.len());
            let span = self.buf_span + self.page_pos as u64;
            self.decode_page(&buf[self.page_pos..end], span, &mut batch);
            self.page_pos = end;
            self.buf = buf;
        }
        Ok(batch)
    }

    /// Loads the next block or chunk; `false` at the end of the CPU's data.
    fn refill(&mut self) -> Result<bool, ReadError> {
        self.page_pos = 0;
        if self.finished {
            return Ok(false);
        }
        let t = Arc::clone(&self.tables);
        let end = data_end(&self.area, t.codec.is_some());
        let Some(codec) = t.codec else {
            if self.next_off >= end {
                self.buf.clear();
                self.finished = true;
                return Ok(false);
            }
            let subbuf = t.layout.subbuf_size.max(1);
            let block = (BLOCK / subbuf).max(1) * subbuf;
            let n = usize::try_from(end - self.next_off).map_or(block, |left| left.min(block));
            let mut buf = std::mem::take(&mut self.buf);
            let got = t.src.read_into(self.next_off, n, &mut buf);
            self.buf = buf;
            got.map_err(|e| ReadError::io(&t.path, &e))?;
            if self.buf.len() < n {
                return Err(self.truncated(self.next_off, n, "CPU data"));
            }
            self.buf_span = self.next_off;
            self.next_off += n as u64;
            return Ok(true);
        };
        let e = t.layout.endian;
        let left = match self.chunks_left {
            Some(n) => n,
            None => {
                let b = self.read(self.next_off, 4, "the chunk count of compressed CPU data")?;
                self.next_off += 4;
                e.u32(&b, 0).unwrap_or(0)
            }
        };
        if left == 0 {
            self.buf.clear();
            self.finished = true;
            return Ok(false);
        }
        self.chunks_left = Some(left - 1);
        let chunk_at = self.next_off;
        let h = self.read(chunk_at, 8, "a compressed chunk header")?;
        let (csize, usize_) = (e.u32(&h, 0).unwrap_or(0), e.u32(&h, 4).unwrap_or(0));
        let data_end = chunk_at + 8 + u64::from(csize);
        if data_end > end {
            return Err(ReadError::at_byte(
                &t.path,
                chunk_at,
                format!(
                    "a chunk inside CPU {}'s data (ending at {end:#x})",
                    self.cpu
                ),
                format!("a chunk of {csize} bytes ending at {data_end:#x}"),
            ));
        }
        let data = self.read(chunk_at + 8, csize as usize, "compressed chunk data")?;
        self.buf = codec.decompress(&data, usize_ as usize).map_err(|why| {
            ReadError::at_byte(&t.path, chunk_at, "a valid compressed chunk", why)
        })?;
        self.buf_span = chunk_at;
        self.next_off = data_end;
        Ok(true)
    }

    fn read(&self, off: u64, n: usize, what: &str) -> Result<Vec<u8>, ReadError> {
        let t = &self.tables;
        let b = t
            .src
            .read_at(off, n)
            .map_err(|e| ReadError::io(&t.path, &e))?;
        if b.len() < n {
            return Err(self.truncated(off, n, what));
        }
        Ok(b)
    }

    fn truncated(&self, off: u64, n: usize, what: &str) -> ReadError {
        let t = &self.tables;
        let have = t.src.len().saturating_sub(off).min(n as u64);
        ReadError::at_byte(
            &t.path,
            off + have,
            format!("{what} of CPU {} ({n} bytes at {off:#x})", self.cpu),
            format!("the end of the file (file size {})", t.src.len()),
        )
    }

    fn decode_page(&mut self, page: &[u8], span: u64, batch: &mut Batch) {
        let t = Arc::clone(&self.tables);
        let cpu = self.cpu;
        let (header, mut records) = match PageRecords::new(page, &t.layout) {
            Ok(x) => x,
            Err(e) => {
                batch.dq.add(Problem::TracedatBadSubbuffer, 1, || {
                    format!("{}: CPU {cpu} sub-buffer at {span:#x}: {e}", t.path)
                });
                return;
            }
        };
        let page_ts = t.adjust.apply(header.ts);
        match header.missed {
            MissedEvents::None => {}
            missed => {
                let count = match missed {
                    MissedEvents::Count(n) => Some(n),
                    _ => None,
                };
                note_missed(&mut batch.dq, &t.path, cpu, span, page_ts, count);
                batch.events.push_back(Event {
                    ts: page_ts,
                    cpu,
                    pid: -1,
                    span: Span::new(t.index, SpanPos::Byte(span)),
                    kind: EventKind::Lost { count },
                    callchain: None,
                });
            }
        }
        for rec in records.by_ref() {
            let rec = match rec {
                Ok(r) => r,
                Err(e) => {
                    batch.dq.add(Problem::TracedatBadSubbuffer, 1, || {
                        format!("{}: CPU {cpu} sub-buffer at {span:#x}: {e}", t.path)
                    });
                    break;
                }
            };
            let payload = rec.payload;
            let pos = span + rec.offset as u64;
            let id = match t.type_field {
                Some(a) => a.get_u64(payload),
                None => t.layout.endian.u16(payload, 0).map(u64::from),
            };
            let decoder = id
                .and_then(|id| t.decoders.get(id as usize))
                .and_then(Option::as_ref);
            let Some(d) = decoder else {
                batch.dq.add(Problem::TracedatUnknownEventId, 1, || {
                    format!("{}: offset {pos:#x}: event id {id:?}", t.path)
                });
                continue;
            };
            let kind = match d.decoder.decode_cached(payload, &mut self.names) {
                Ok(k) => k,
                Err(_) => {
                    batch.dq.add(Problem::TracedatBadRecord, 1, || {
                        format!("{}: offset {pos:#x}: {}", t.path, d.name)
                    });
                    continue;
                }
            };
            // INVARIANT: `decoder` came from t.decoders.get(id), and `seen` has its length.
            let idx = id.unwrap_or(0) as usize;
            if !self.seen[idx] {
                self.seen[idx] = true;
                batch.declared.push(d.name.clone());
            }
            let callchain = d.decoder.callchain(payload);
            if let Some(chain) = &callchain {
                attach_stack(&mut batch.events, cpu, chain);
            }
            batch.events.push_back(Event {
                ts: t.adjust.apply(rec.ts),
                cpu,
                pid: d.pid.and_then(|p| p.get_i32(payload)).unwrap_or(-1),
                span: Span::new(t.index, SpanPos::Byte(pos)),
                kind,
                callchain,
            });
        }
        if records.discarded > 0 {
            note_discarded(&mut batch.dq, &t.path, cpu, span, records.discarded);
        }
    }
}

/// An `ftrace:kernel_stack` / `user_stack` record is written on the CPU of the event it
/// belongs to, right after it (the `stacktrace` option or trigger): its frames become that
/// event's callchain too, as perf's `-g` gives each sample its own (a user stack after a
/// kernel stack is appended to it). The stack events themselves stay, with their frames.
fn attach_stack(events: &mut VecDeque<Event>, cpu: u32, chain: &[u64]) {
    let is_stack = |e: &Event| {
        matches!(&e.kind, EventKind::Generic(g)
            if g.system.as_deref() == Some("ftrace") && g.name.ends_with("_stack"))
    };
    // the event before the stack records just written for it
    let Some(owner) = events
        .iter_mut()
        .rev()
        .take_while(|e| e.cpu == cpu)
        .find(|e| !is_stack(e))
    else {
        return;
    };
    let marker = chain.first().copied();
    match owner.callchain.take() {
        // one stack of each kind (kernel, user) per event
        Some(old) if old.contains(&marker.unwrap_or(0)) => owner.callchain = Some(old),
        Some(old) => owner.callchain = Some(old.iter().chain(chain).copied().collect()),
        None => owner.callchain = Some(chain.into()),
    }
}

/// The data-quality note of a sub-buffer whose missed-events flag is set (`count`: the
/// stored number of lost events, if any). Shared with the lean reader.
pub fn note_missed(
    dq: &mut DataQuality,
    path: &str,
    cpu: u32,
    span: u64,
    page_ts: u64,
    count: Option<u64>,
) {
    let ex = || format!("{path}: CPU {cpu} sub-buffer at {span:#x}, {page_ts} ns");
    match count {
        Some(n) => dq.add(Problem::LostEvents, n, ex),
        None => dq.add(Problem::LostEventsUnknownCount, 1, ex),
    }
}

/// The data-quality note of a sub-buffer holding `n` discarded items. Shared with the
/// lean reader.
pub fn note_discarded(dq: &mut DataQuality, path: &str, cpu: u32, span: u64, n: u64) {
    dq.add(Problem::TracedatDiscardedRecords, n, || {
        format!("{path}: CPU {cpu} sub-buffer at {span:#x}: {n}")
    });
}
