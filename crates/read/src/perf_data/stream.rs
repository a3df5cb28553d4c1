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

use std::io::{self, Read};

use crate::tracefs_format::Endian;

/// Bytes per chunk. A record is at most 64 KiB (`u16 size`).
pub const CHUNK_SIZE: usize = 1 << 20;

/// Where a record is: chunk, offset and length inside it, and its position in the input
/// (for a record inside a compressed one: the position of that compressed record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef {
    /// Chunk index in the pool.
    pub chunk: u32,
    /// Offset in the chunk.
    pub off: u32,
    /// Record length (header.size).
    pub len: u32,
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
        self.chunks[r.chunk as usize].live += 1;
    }

    /// Drops one reference taken with [`ChunkPool::add_ref`].
    pub fn unref(&mut self, r: &RecordRef) {
        let c = &mut self.chunks[r.chunk as usize];
        c.live = c.live.saturating_sub(1);
        if c.live == 0 && !c.current {
            self.free.push(r.chunk);
        }
    }

    /// The bytes of `r`.
    #[inline]
    pub fn bytes(&self, r: &RecordRef) -> &[u8] {
        let s = r.off as usize;
        &self.chunks[r.chunk as usize].data[s..s + r.len as usize]
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
            len: u32::from(size),
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
        }
    }

    /// Input offset of the next unparsed byte.
    pub fn offset(&self) -> u64 {
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

    /// `(type, size)` of the next record without consuming it; `None` at a clean end.
    pub fn peek(&mut self, pool: &mut ChunkPool) -> Result<Option<(u32, u16)>, StreamError> {
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
        let off = self.offset();
        let mut out = Vec::new();
        let from_buf = (self.win.avail() as u64).min(n) as usize;
        if let Some(chunk) = self.win.chunk {
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
        let got = (&mut self.src)
            .take(rest)
            .read_to_end(&mut out)
            .map_err(StreamError::Io)?;
        if let Some(l) = &mut self.limit {
            *l -= got as u64;
        }
        // The window's base moves past the payload.
        self.win.base += got as u64;
        if (out.len() as u64) < n {
            return Err(StreamError::Truncated {
                off,
                rtype: None,
                need: usize::try_from(n).unwrap_or(usize::MAX),
                have: out.len(),
            });
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
}
