//! Streaming the data section: records are read with large `read()` calls into 1 MiB chunks
//! and stay where they were read until they are emitted (no per-record copy). A chunk is
//! recycled when no queued record points into it any more, so memory is bounded by what the
//! ordering queue holds (about two FINISHED_ROUND rounds), not by the trace length.
//!
//! Records:
//! ```text
//! struct perf_event_header { u32 type; u16 misc; u16 size; }   size includes the header (≥ 8)
//! ```
//! `COMPRESSED` (81) / `COMPRESSED2` (83, `u64 data_size` first) records hold a zstd stream
//! that decompresses to more records; those may straddle compressed-record boundaries, so the
//! decompressed bytes are a second record stream ([`DecompStream`]) with its own chunks.
//!
//! A seekable file's data section is instead memory-mapped ([`RawStream::mapped`]): records
//! are cut straight out of the mapping (chunk [`MAPPED`], located by their file offset), so
//! neither `read()` nor a later stage copies them. Pages behind the oldest record still
//! queued are dropped from the mapping ([`ChunkPool::drop_mapped_below`]), which keeps the
//! resident memory bounded like the chunks do.

use std::io::{self, Read};
use std::sync::Arc;

use memmap2::Mmap;

use crate::tracefs_format::Endian;

/// Bytes per chunk. A record is at most 64 KiB (`u16 size`).
pub const CHUNK_SIZE: usize = 1 << 20;

/// Bytes of a page, and of a huge page (x86-64, arm64 with 4 KiB pages): the units
/// [`DataMap::drop_pages_to_end`] and [`DataMap::drop_pages`] drop.
const PAGE: u64 = 4 << 10;
pub(crate) const HUGE_PAGE: u64 = 2 << 20;

/// `RecordRef::chunk` of a record inside the mapped data section (`file_off` locates it).
pub const MAPPED: u32 = u32::MAX;

/// The memory-mapped data section of a file.
pub struct DataMap {
    /// The mapping; byte 0 is at file offset `base`.
    pub map: Mmap,
    /// File offset of the mapping's first byte.
    pub base: u64,
}

impl DataMap {
    /// Maps `len` bytes of `file` from offset `base` (read-only), for sequential reading.
    pub fn new(file: &std::fs::File, base: u64, len: u64) -> io::Result<DataMap> {
        let len = usize::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: the mapping is read-only and private. If another process truncates the
        // file while it is read, touching the lost pages raises SIGBUS (as for perf); a
        // file changed in place only yields different (still bounds-checked) bytes.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(base)
                .len(len)
                .map(file)?
        };
        // Hints only: failure changes nothing. With `HugePage`, pages the kernel has to
        // read again from the file (evicted from the page cache) come back as 2 MiB folios,
        // which the mapping, populating and dropping handle as one entry instead of 512.
        let _ = map.advise(memmap2::Advice::Sequential);
        let _ = map.advise(memmap2::Advice::HugePage);
        Ok(DataMap { map, base })
    }

    /// Drops the mapped pages between file offsets `from` (where the previous call ended)
    /// and `to` from this process, in steps of at least a huge page (2 MiB) and up to a
    /// huge-page boundary; returns where the next call starts. Touching a dropped page
    /// later reads it again from the file, so this only lowers resident memory and never
    /// changes what is read.
    ///
    /// The kernel maps a large page-cache folio with one huge page-table entry; dropping
    /// part of one first splits it, with a TLB flush on every CPU running this process.
    /// With ends anywhere (1 MiB steps) those flushes were most of the cost of dropping.
    pub fn drop_pages(&self, from: u64, to: u64) -> u64 {
        self.drop_aligned(from, to, HUGE_PAGE)
    }

    /// [`DataMap::drop_pages`] up to the last whole page before `to`, for the end of a
    /// stretch read (one split at most).
    pub fn drop_pages_to_end(&self, from: u64, to: u64) -> u64 {
        self.drop_aligned(from, to, PAGE)
    }

    /// Drops from `from` up to `to` rounded down to `align` (a power of two), when that is
    /// at least `align` bytes.
    fn drop_aligned(&self, from: u64, to: u64, align: u64) -> u64 {
        let from = from.max(self.base);
        let to = to.min(self.base + self.map.len() as u64);
        if to < from + align {
            return from;
        }
        // memmap2 rounds the start down to a page; it is the previous end (aligned), or
        // the mapping's start (a page).
        let addr0 = self.map.as_ptr() as u64;
        let end_addr = (addr0 + (to - self.base)) & !(align - 1);
        let start_addr = addr0 + (from - self.base);
        if end_addr <= start_addr {
            return from;
        }
        // SAFETY: the mapping is private and never written, so dropping its pages loses
        // nothing: a later access reads them again from the file.
        let _ = unsafe {
            self.map.unchecked_advise_range(
                memmap2::UncheckedAdvice::DontNeed,
                (from - self.base) as usize,
                (end_addr - start_addr) as usize,
            )
        };
        end_addr - addr0 + self.base
    }

    /// Maps the pages between file offsets `from` and `to` in one call
    /// (`MADV_POPULATE_READ`, Linux 5.14+), so that reading them later takes no page
    /// faults. A hint only: failure (older kernel, other OS) changes nothing.
    pub fn populate(&self, from: u64, to: u64) {
        #[cfg(target_os = "linux")]
        {
            let len = self.map.len() as u64;
            let s = from.saturating_sub(self.base).min(len);
            let e = to.saturating_sub(self.base).min(len);
            if e > s {
                let _ = self.map.advise_range(
                    memmap2::Advice::PopulateRead,
                    s as usize,
                    (e - s) as usize,
                );
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (from, to);
    }

    /// Asks the CPU to start loading the first bytes of the record at `file_off` (a hint;
    /// nothing outside the mapping).
    #[inline(always)]
    pub fn prefetch(&self, file_off: u64) {
        let at = file_off.wrapping_sub(self.base) as usize;
        prefetch(&self.map, at);
        prefetch(&self.map, at + 64);
    }

    /// The bytes of a record at `file_off`.
    #[inline]
    pub fn bytes(&self, file_off: u64, len: u16) -> &[u8] {
        let s = (file_off - self.base) as usize;
        &self.map[s..s + len as usize]
    }
}

/// Where a record is: chunk, offset and length inside it, and its position in the input
/// (for a record inside a compressed one: the position of that compressed record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef {
    /// Chunk index in the pool.
    pub chunk: u32,
    /// Offset in the chunk.
    pub off: u32,
    /// Record length (header.size).
    pub len: u16,
    /// Byte offset in the input.
    pub file_off: u64,
}

struct Chunk {
    data: Vec<u8>,
    /// References held by queued or in-flight records.
    live: u32,
    /// A stream is still reading into it.
    current: bool,
}

/// Reusable chunks.
#[derive(Default)]
pub struct ChunkPool {
    chunks: Vec<Chunk>,
    free: Vec<u32>,
    /// The mapped data section, if any.
    pub map: Option<Arc<DataMap>>,
    /// File offset below which mapped pages were already dropped.
    dropped_below: u64,
}

impl ChunkPool {
    fn alloc(&mut self) -> u32 {
        if let Some(i) = self.free.pop() {
            let c = &mut self.chunks[i as usize];
            c.current = true;
            c.live = 0;
            return i;
        }
        self.chunks.push(Chunk {
            data: vec![0; CHUNK_SIZE],
            live: 0,
            current: true,
        });
        (self.chunks.len() - 1) as u32
    }

    fn retire(&mut self, i: u32) {
        let c = &mut self.chunks[i as usize];
        c.current = false;
        if c.live == 0 {
            self.free.push(i);
        }
    }

    /// Takes one reference on the chunk of `r`.
    pub fn add_ref(&mut self, r: &RecordRef) {
        if r.chunk == MAPPED {
            return;
        }
        self.chunks[r.chunk as usize].live += 1;
    }

    /// Drops one reference taken with [`ChunkPool::add_ref`].
    pub fn unref(&mut self, r: &RecordRef) {
        if r.chunk == MAPPED {
            return;
        }
        let c = &mut self.chunks[r.chunk as usize];
        c.live = c.live.saturating_sub(1);
        if c.live == 0 && !c.current {
            self.free.push(r.chunk);
        }
    }

    /// The bytes of `r`.
    #[inline]
    pub fn bytes(&self, r: &RecordRef) -> &[u8] {
        if r.chunk == MAPPED {
            if let Some(m) = &self.map {
                return m.bytes(r.file_off, r.len);
            }
            // INVARIANT: MAPPED records are only made by a stream over `self.map`.
            return &[];
        }
        let s = r.off as usize;
        &self.chunks[r.chunk as usize].data[s..s + r.len as usize]
    }

    /// Drops the mapped pages below file offset `off` (see [`DataMap::drop_pages`]).
    pub fn drop_mapped_below(&mut self, off: u64) {
        if let Some(m) = &self.map {
            self.dropped_below = m.drop_pages(self.dropped_below, off);
        }
    }
}

/// A problem while cutting records out of a stream.
#[derive(Debug)]
pub enum StreamError {
    /// The underlying read failed.
    Io(io::Error),
    /// The stream ended inside a record.
    Truncated {
        /// Offset of the record.
        off: u64,
        /// Its type, when the header was complete.
        rtype: Option<u32>,
        /// Bytes it should have.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// A header with `size` < 8.
    BadSize {
        /// Offset of the record.
        off: u64,
        /// Its type.
        rtype: u32,
        /// The size field.
        size: u16,
    },
    /// zstd refused the data.
    Decompress {
        /// Offset of the compressed record.
        off: u64,
        /// zstd's message.
        message: String,
    },
}

/// Cursor state shared by the raw and decompressed streams.
struct Window {
    chunk: Option<u32>,
    start: usize,
    end: usize,
    /// Input offset of chunk byte 0 (raw stream only).
    base: u64,
}

impl Window {
    fn avail(&self) -> usize {
        self.end - self.start
    }

    /// Moves the unparsed tail into a fresh chunk when fewer than `need` bytes fit after
    /// `start` in the current one.
    fn make_room(&mut self, pool: &mut ChunkPool, need: usize) {
        let fits = self.chunk.is_some() && self.start + need <= CHUNK_SIZE;
        if fits {
            return;
        }
        let new = pool.alloc();
        if let Some(old) = self.chunk {
            let (start, end) = (self.start, self.end);
            let tail = end - start;
            if tail > 0 {
                let (a, b) = if old < new {
                    let (lo, hi) = pool.chunks.split_at_mut(new as usize);
                    (&lo[old as usize], &mut hi[0])
                } else {
                    let (lo, hi) = pool.chunks.split_at_mut(old as usize);
                    (&hi[0], &mut lo[new as usize])
                };
                b.data[..tail].copy_from_slice(&a.data[start..end]);
            }
            pool.retire(old);
        }
        self.base += self.start as u64;
        self.end -= self.start;
        self.start = 0;
        self.chunk = Some(new);
    }

    /// The next complete record in the window, with a reference taken; `None` when fewer
    /// bytes than the record needs are buffered (`Err` for a header size < 8).
    fn cut(
        &mut self,
        pool: &mut ChunkPool,
        e: Endian,
        file_off: Option<u64>,
    ) -> Result<Option<RecordRef>, StreamError> {
        let Some(chunk) = self.chunk else {
            return Ok(None);
        };
        if self.avail() < 8 {
            return Ok(None);
        }
        let data = &pool.chunks[chunk as usize].data;
        let size = e.u16(data, self.start + 6).unwrap_or(0);
        if size < 8 {
            let rtype = e.u32(data, self.start).unwrap_or(0);
            return Err(StreamError::BadSize {
                off: file_off.unwrap_or(self.base + self.start as u64),
                rtype,
                size,
            });
        }
        if self.avail() < size as usize {
            return Ok(None);
        }
        let r = RecordRef {
            chunk,
            off: self.start as u32,
            len: size,
            file_off: file_off.unwrap_or(self.base + self.start as u64),
        };
        self.start += size as usize;
        pool.add_ref(&r);
        Ok(Some(r))
    }
}

/// Records of the (uncompressed) input.
pub struct RawStream {
    src: Box<dyn Read + Send>,
    /// Bytes still to read from `src` (file mode: rest of the data section).
    limit: Option<u64>,
    win: Window,
    eof: bool,
    endian: Endian,
    /// Mapped mode: `(offset of the next record, end offset)` in the pool's [`DataMap`].
    mapped: Option<(u64, u64)>,
}

impl RawStream {
    /// A stream whose first byte is at input offset `start`, reading at most `limit` bytes.
    pub fn new(
        src: Box<dyn Read + Send>,
        start: u64,
        limit: Option<u64>,
        endian: Endian,
    ) -> RawStream {
        RawStream {
            src,
            limit,
            win: Window {
                chunk: None,
                start: 0,
                end: 0,
                base: start,
            },
            eof: false,
            endian,
            mapped: None,
        }
    }

    /// A stream over the whole of `map`, which becomes `pool`'s mapping.
    pub fn mapped(pool: &mut ChunkPool, map: DataMap, endian: Endian) -> RawStream {
        let range = (map.base, map.base + map.map.len() as u64);
        pool.map = Some(Arc::new(map));
        let mut s = RawStream::new(Box::new(io::empty()), range.0, Some(0), endian);
        s.mapped = Some(range);
        s
    }

    /// The next record of a mapped stream; `None` at its end.
    #[inline]
    fn next_mapped(
        &mut self,
        pool: &ChunkPool,
        pos: u64,
        end: u64,
    ) -> Result<Option<RecordRef>, StreamError> {
        let Some(m) = &pool.map else {
            return Ok(None);
        };
        let have = (end - pos) as usize;
        if have == 0 {
            return Ok(None);
        }
        let data = &m.map[(pos - m.base) as usize..];
        if have < 8 {
            return Err(StreamError::Truncated {
                off: pos,
                rtype: None,
                need: 8,
                have,
            });
        }
        let e = self.endian;
        let rtype = e.u32(data, 0).unwrap_or(0);
        let size = e.u16(data, 6).unwrap_or(0);
        if size < 8 {
            return Err(StreamError::BadSize {
                off: pos,
                rtype,
                size,
            });
        }
        if have < usize::from(size) {
            return Err(StreamError::Truncated {
                off: pos,
                rtype: Some(rtype),
                need: usize::from(size),
                have,
            });
        }
        self.mapped = Some((pos + u64::from(size), end));
        Ok(Some(RecordRef {
            chunk: MAPPED,
            off: 0,
            len: size,
            file_off: pos,
        }))
    }

    /// Mapped mode: `(offset of the next record, end offset)`.
    #[inline]
    pub fn mapped_range(&self) -> Option<(u64, u64)> {
        self.mapped
    }

    /// Mapped mode: the records before `pos` were consumed by the caller (see
    /// [`super::pipeline`]'s fast path); `pos` must be a record boundary found by walking
    /// the records' sizes.
    #[inline]
    pub fn advance_mapped(&mut self, pos: u64) {
        if let Some((_, end)) = self.mapped {
            self.mapped = Some((pos.min(end), end));
        }
    }

    /// Input offset of the next unparsed byte.
    pub fn offset(&self) -> u64 {
        if let Some((pos, _)) = self.mapped {
            return pos;
        }
        self.win.base + self.win.start as u64
    }

    /// Reads until at least `need` bytes are buffered or the input ends.
    fn fill(&mut self, pool: &mut ChunkPool, need: usize) -> Result<(), StreamError> {
        if self.win.avail() >= need {
            return Ok(());
        }
        self.win.make_room(pool, need);
        let Some(chunk) = self.win.chunk else {
            return Ok(());
        };
        while self.win.avail() < need && !self.eof {
            let room = CHUNK_SIZE - self.win.end;
            let want = match self.limit {
                Some(l) => room.min(usize::try_from(l).unwrap_or(usize::MAX)),
                None => room,
            };
            if want == 0 {
                self.eof = true;
                break;
            }
            let buf = &mut pool.chunks[chunk as usize].data[self.win.end..self.win.end + want];
            let n = match self.src.read(buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(StreamError::Io(e)),
            };
            if n == 0 {
                self.eof = true;
            }
            self.win.end += n;
            if let Some(l) = &mut self.limit {
                *l -= n as u64;
            }
        }
        Ok(())
    }

    /// Up to `n` of the next bytes (fewer at the end of the input) without consuming them,
    /// for messages about what the input holds there. Streams only (empty when mapped).
    pub fn preview(&mut self, pool: &mut ChunkPool, n: usize) -> Vec<u8> {
        if self.mapped.is_some() || self.fill(pool, n).is_err() {
            return Vec::new();
        }
        match self.win.chunk {
            Some(chunk) => {
                let take = self.win.avail().min(n);
                pool.chunks[chunk as usize].data[self.win.start..self.win.start + take].to_vec()
            }
            None => Vec::new(),
        }
    }

    /// `(type, size)` of the next record without consuming it; `None` at a clean end.
    pub fn peek(&mut self, pool: &mut ChunkPool) -> Result<Option<(u32, u16)>, StreamError> {
        if let Some((pos, end)) = self.mapped {
            let r = self.next_mapped(pool, pos, end)?;
            self.mapped = Some((pos, end));
            let e = self.endian;
            return Ok(r.map(|r| {
                let b = pool.bytes(&r);
                (e.u32(b, 0).unwrap_or(0), e.u16(b, 6).unwrap_or(0))
            }));
        }
        self.fill(pool, 8)?;
        let Some(chunk) = self.win.chunk else {
            return Ok(None);
        };
        if self.win.avail() < 8 {
            return self.end_check().map(|()| None);
        }
        let data = &pool.chunks[chunk as usize].data;
        let e = self.endian;
        Ok(Some((
            e.u32(data, self.win.start).unwrap_or(0),
            e.u16(data, self.win.start + 6).unwrap_or(0),
        )))
    }

    /// Ok at a clean end, Err when bytes of a partial header remain.
    fn end_check(&self) -> Result<(), StreamError> {
        if self.win.avail() == 0 {
            Ok(())
        } else {
            Err(StreamError::Truncated {
                off: self.offset(),
                rtype: None,
                need: 8,
                have: self.win.avail(),
            })
        }
    }

    /// The next record (one reference taken on its chunk), `None` at the end.
    #[inline]
    pub fn next(&mut self, pool: &mut ChunkPool) -> Result<Option<RecordRef>, StreamError> {
        if let Some((pos, end)) = self.mapped {
            return self.next_mapped(pool, pos, end);
        }
        // Fast path: the whole record is already buffered.
        if self.win.avail() >= 8 {
            if let Some(r) = self.win.cut(pool, self.endian, None)? {
                return Ok(Some(r));
            }
        }
        let Some((rtype, size)) = self.peek(pool)? else {
            return Ok(None);
        };
        self.fill(pool, usize::from(size).max(8))?;
        match self.win.cut(pool, self.endian, None)? {
            Some(r) => Ok(Some(r)),
            None => Err(StreamError::Truncated {
                off: self.offset(),
                rtype: Some(rtype),
                need: usize::from(size),
                have: self.win.avail(),
            }),
        }
    }

    /// Reads `n` bytes that follow the last record outside any record (pipe-mode tracing
    /// data). Memory grows only with bytes actually present.
    pub fn read_payload(&mut self, pool: &mut ChunkPool, n: u64) -> Result<Vec<u8>, StreamError> {
        self.take_payload(pool, n, true)
    }

    /// Skips `n` bytes that follow the last record outside any record (AUXTRACE data)
    /// without keeping them.
    pub fn skip_payload(&mut self, pool: &mut ChunkPool, n: u64) -> Result<(), StreamError> {
        self.take_payload(pool, n, false).map(drop)
    }

    /// [`RawStream::read_payload`] (`keep`) or [`RawStream::skip_payload`].
    fn take_payload(
        &mut self,
        pool: &mut ChunkPool,
        n: u64,
        keep: bool,
    ) -> Result<Vec<u8>, StreamError> {
        let off = self.offset();
        let truncated = |have: u64| StreamError::Truncated {
            off,
            rtype: None,
            need: usize::try_from(n).unwrap_or(usize::MAX),
            have: usize::try_from(have).unwrap_or(usize::MAX),
        };
        let mut out = Vec::new();
        if let Some((pos, end)) = self.mapped {
            let take = (end - pos).min(n);
            if let (true, Some(m)) = (keep, &pool.map) {
                let s = (pos - m.base) as usize;
                out.extend_from_slice(&m.map[s..s + take as usize]);
            }
            self.mapped = Some((pos + take, end));
            return if take < n {
                Err(truncated(take))
            } else {
                Ok(out)
            };
        }
        let from_buf = (self.win.avail() as u64).min(n) as usize;
        if let (true, Some(chunk)) = (keep, self.win.chunk) {
            out.extend_from_slice(
                &pool.chunks[chunk as usize].data[self.win.start..self.win.start + from_buf],
            );
        }
        self.win.start += from_buf;
        let rest = n - from_buf as u64;
        let rest = match self.limit {
            Some(l) => rest.min(l),
            None => rest,
        };
        let mut src = (&mut self.src).take(rest);
        let got = if keep {
            src.read_to_end(&mut out).map(|g| g as u64)
        } else {
            io::copy(&mut src, &mut io::sink())
        }
        .map_err(StreamError::Io)?;
        if let Some(l) = &mut self.limit {
            *l -= got;
        }
        // The window's base moves past the payload.
        self.win.base += got;
        let have = from_buf as u64 + got;
        if have < n {
            return Err(truncated(have));
        }
        Ok(out)
    }
}

/// Records inside `COMPRESSED` records.
pub struct DecompStream {
    zstd: zstd::stream::raw::Decoder<'static>,
    win: Window,
}

impl DecompStream {
    /// A fresh decompressor. Frames needing a window above 32 MiB are refused (perf uses
    /// small levels), which bounds what a hostile frame header can make zstd allocate.
    pub fn new() -> io::Result<DecompStream> {
        let mut zstd = zstd::stream::raw::Decoder::new()?;
        zstd.set_parameter(zstd::stream::raw::DParameter::WindowLogMax(25))?;
        Ok(DecompStream {
            zstd,
            win: Window {
                chunk: None,
                start: 0,
                end: 0,
                base: 0,
            },
        })
    }

    /// Decompresses `input` (the payload of the compressed record at input offset `off`)
    /// and appends every record completed by it to `out` (each with a reference taken).
    pub fn feed(
        &mut self,
        pool: &mut ChunkPool,
        input: &[u8],
        off: u64,
        e: Endian,
        out: &mut Vec<RecordRef>,
    ) -> Result<(), StreamError> {
        use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
        let mut inbuf = InBuffer::around(input);
        loop {
            // Keep room for at least one maximal record after the buffered bytes.
            let need = self.win.avail() + (1 << 16);
            self.win.make_room(pool, need);
            let Some(chunk) = self.win.chunk else {
                return Ok(());
            };
            let data = &mut pool.chunks[chunk as usize].data[self.win.end..];
            let room = data.len();
            let mut outbuf = OutBuffer::around(data);
            let in_before = inbuf.pos();
            self.zstd
                .run(&mut inbuf, &mut outbuf)
                .map_err(|err| StreamError::Decompress {
                    off,
                    message: err.to_string(),
                })?;
            let produced = outbuf.pos();
            self.win.end += produced;
            while let Some(r) = self.win.cut(pool, e, Some(off))? {
                out.push(r);
            }
            let input_done = inbuf.pos() == input.len();
            if input_done && produced < room {
                return Ok(());
            }
            if produced == 0 && inbuf.pos() == in_before {
                // No progress possible: corrupt stream.
                return Err(StreamError::Decompress {
                    off,
                    message: "zstd made no progress".into(),
                });
            }
        }
    }

    /// Bytes of an unfinished record left when the input ended (0 = clean).
    pub fn leftover(&self) -> usize {
        self.win.avail()
    }
}

pub use crate::prefetch::prefetch;

#[cfg(test)]
mod tests {
    use super::*;

    /// Synthetic records: header {type 9, misc 0, size} + a recognizable body.
    fn records(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                let size = 8 + 8 * (1 + i % 37) + if i % 5 == 0 { 4000 } else { 0 };
                let mut r = Vec::with_capacity(size);
                r.extend_from_slice(&9u32.to_le_bytes());
                r.extend_from_slice(&0u16.to_le_bytes());
                r.extend_from_slice(&(size as u16).to_le_bytes());
                r.extend((8..size).map(|j| (i * 7 + j) as u8));
                r
            })
            .collect()
    }

    /// Page drops end on huge-page boundaries (segment ends on page boundaries), never
    /// pass the position asked for, and lose nothing: dropped bytes read back the same.
    #[test]
    fn page_drops_end_on_huge_pages_and_keep_the_bytes() {
        let dir = std::env::temp_dir().join(format!("stallscope-drop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("data");
        let bytes: Vec<u8> = (0..9 << 20).map(|i: u32| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let base = 8192u64;
        let map = DataMap::new(&file, base, bytes.len() as u64 - base).unwrap();
        std::fs::remove_file(&path).unwrap();
        let addr = |off: u64| map.map.as_ptr() as u64 + (off - base);
        // Less than a huge page: nothing dropped.
        assert_eq!(map.drop_pages(base, base + (1 << 20)), base);
        let mut at = base;
        for to in [
            base + (3 << 20) + 5,
            base + (5 << 20) + 4097,
            base + (8 << 20),
        ] {
            let next = map.drop_pages(at, to);
            assert!(next > at && next <= to, "{at} {next} {to}");
            assert_eq!(addr(next) % HUGE_PAGE, 0, "ends on a huge page");
            assert!(to - next < HUGE_PAGE, "whole huge pages up to {to}");
            at = next;
        }
        let end = base + (8 << 20) + 12345;
        let next = map.drop_pages_to_end(at, end);
        assert_eq!(addr(next) % PAGE, 0);
        assert!(next <= end && end - next < PAGE, "{next} {end}");
        assert_eq!(
            &map.map[..],
            &bytes[base as usize..],
            "dropped pages read again"
        );
    }

    #[test]
    fn decompressed_records_may_straddle_compressed_records_and_chunks() {
        let recs = records(4000);
        let all: Vec<u8> = recs.concat();
        assert!(all.len() > 2 * CHUNK_SIZE, "crosses chunk boundaries");
        // Split the stream at odd places (mid-header, mid-body), one zstd frame per piece,
        // and also split one frame across two feeds.
        let cuts = [0, 3, 1000, 77_777, 500_001, 1_234_567, 2_000_003, all.len()];
        let mut pool = ChunkPool::default();
        let mut d = DecompStream::new().unwrap();
        let mut out = Vec::new();
        for w in cuts.windows(2) {
            let frame = zstd::encode_all(&all[w[0]..w[1]], 1).unwrap();
            let (a, b) = frame.split_at(frame.len() / 2);
            d.feed(&mut pool, a, w[0] as u64, Endian::Little, &mut out)
                .unwrap();
            d.feed(&mut pool, b, w[0] as u64, Endian::Little, &mut out)
                .unwrap();
        }
        assert_eq!(d.leftover(), 0);
        assert_eq!(out.len(), recs.len());
        for (r, want) in out.iter().zip(&recs) {
            assert_eq!(pool.bytes(r), &want[..]);
        }
        // Every record holds a reference: nothing was recycled under them.
        for r in &out {
            pool.unref(r);
        }
        assert!(pool.chunks.len() <= 4, "{} chunks", pool.chunks.len());
    }

    #[test]
    fn raw_stream_reports_truncation_and_bad_sizes_with_offsets() {
        let recs = records(50);
        let mut all: Vec<u8> = recs.concat();
        let total = all.len();
        all.truncate(total - 3);
        let mut pool = ChunkPool::default();
        let mut s = RawStream::new(Box::new(io::Cursor::new(all)), 1000, None, Endian::Little);
        let mut n = 0;
        let err = loop {
            match s.next(&mut pool) {
                Ok(Some(r)) => {
                    pool.unref(&r);
                    n += 1;
                }
                Ok(None) => panic!("truncation not noticed"),
                Err(e) => break e,
            }
        };
        assert_eq!(n, 49);
        let last_off = 1000 + (total - recs[49].len()) as u64;
        assert!(
            matches!(err, StreamError::Truncated { off, rtype: Some(9), .. } if off == last_off),
            "{err:?}"
        );
        let bad = vec![9, 0, 0, 0, 0, 0, 4, 0];
        let mut s = RawStream::new(Box::new(io::Cursor::new(bad)), 0, None, Endian::Little);
        assert!(matches!(
            s.next(&mut pool),
            Err(StreamError::BadSize {
                off: 0,
                size: 4,
                ..
            })
        ));
        let mut d = DecompStream::new().unwrap();
        let mut out = Vec::new();
        assert!(d
            .feed(&mut pool, b"not zstd at all", 77, Endian::Little, &mut out)
            .is_err());
    }

    /// All records (or the error) of `s`, as bytes.
    fn drain(s: &mut RawStream, pool: &mut ChunkPool) -> (Vec<Vec<u8>>, Option<StreamError>) {
        let mut out = Vec::new();
        loop {
            match s.next(pool) {
                Ok(Some(r)) => {
                    out.push(pool.bytes(&r).to_vec());
                    pool.unref(&r);
                }
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    #[test]
    fn mapped_stream_cuts_the_same_records_and_errors_as_reading() {
        let recs = records(3000);
        let mut all = vec![0xAAu8; 100];
        all.extend(recs.concat());
        let base = 100u64;
        let dir = std::env::temp_dir().join(format!("stallscope-map-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Whole, cut inside the last record, and cut inside a header.
        let last = recs[recs.len() - 1].len();
        for cut in [0, 3, last + 5] {
            let bytes = &all[..all.len() - cut];
            let path = dir.join("data");
            std::fs::write(&path, bytes).unwrap();
            let file = std::fs::File::open(&path).unwrap();
            let len = bytes.len() as u64 - base;
            let mut pool = ChunkPool::default();
            let map = DataMap::new(&file, base, len).unwrap();
            let mut mapped = RawStream::mapped(&mut pool, map, Endian::Little);
            let (got, err) = drain(&mut mapped, &mut pool);
            let src = io::Cursor::new(bytes[base as usize..].to_vec());
            let mut read = RawStream::new(Box::new(src), base, Some(len), Endian::Little);
            let mut pool2 = ChunkPool::default();
            let (want, want_err) = drain(&mut read, &mut pool2);
            assert_eq!(got, want, "cut {cut}");
            assert_eq!(format!("{err:?}"), format!("{want_err:?}"), "cut {cut}");
            assert_eq!(err.is_some(), cut != 0);
            assert_eq!(
                got.len(),
                if cut == 0 {
                    3000
                } else if cut == 3 {
                    2999
                } else {
                    2998
                }
            );
            // Dropping pages only lowers memory: the records read the same afterwards.
            pool.drop_mapped_below(base + len);
            let again = DataMap::new(&file, base, len).unwrap();
            let mut pool3 = ChunkPool::default();
            let mut s = RawStream::mapped(&mut pool3, again, Endian::Little);
            let first = s.next(&mut pool3).unwrap().unwrap();
            pool3.drop_mapped_below(base + len);
            assert_eq!(pool3.bytes(&first), &recs[0][..]);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
