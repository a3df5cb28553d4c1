//! ftrace ring-buffer sub-buffers: the raw pages read from `per_cpu/cpuN/trace_pipe_raw`
//! and stored per CPU in trace-cmd's trace.dat (formats.md §2).
//!
//! ```text
//! sub-buffer   off 0              u64  timestamp   absolute time of the first event
//!              off 8              long commit      (masked to 32 bits; long = 4 or 8 bytes)
//!                                                  bits 0..26  bytes of event data
//!                                                  bit 30      MISSED_STORED: a `long` count of
//!                                                              lost events follows the data
//!                                                  bit 31      MISSED_EVENTS: events were lost
//!                                                              before this page
//!              off 8+long         events, 4-byte aligned, up to `commit` bytes
//! event item   u32 header: little endian  type_len = w & 0x1f,  time_delta = w >> 5
//!                          big endian     type_len = w >> 27,   time_delta = w & 0x07ffffff
//!   type_len 1..28   payload of type_len*4 bytes at +4               ts += time_delta
//!   type_len 0       u32 array0 at +4 = payload length + 4, payload at +8 (rounded to 4)
//!   29 PADDING       time_delta 0: end of the page's data; else a discarded event
//!                    (array0 = item length - 4, set by the kernel's rb_event_discard):
//!                    skip 4 + array0 bytes, time_delta NOT applied
//!   30 TIME_EXTEND   ts += (array0 << 27) + time_delta   (8 bytes)
//!   31 TIME_STAMP    ts = (array0 << 27 | time_delta) with the top 5 bits of the current ts
//! ```
//!
//! Example (64-bit kernel, `commit = 0xffffffff80000ff0`): the commit word is the sign-extended
//! int `MISSED_EVENTS | 0xff0`, i.e. 4080 data bytes and an unknown number of lost events.
//!
//! Use: [`PageLayout`] from `header_page` (or the long size and sub-buffer size), then
//! [`PageRecords::new`] on one page gives its [`PageHeader`] and an iterator of [`Record`]s.
//! Nothing here panics on bad bytes: a malformed page header is a [`PageError`], and a
//! malformed item ends the page's iterator with one `Err` carrying the offset in the page.

use std::fmt;

use crate::tracefs_format::{Endian, HeaderPage};

/// Low 27 bits of the commit word: bytes of event data.
const COMMIT_MASK: u32 = (1 << 27) - 1;
/// Commit bit: events were lost between the previous page and this one.
const MISSED_EVENTS: u32 = 1 << 31;
/// Commit bit: the number of lost events is stored after the data.
const MISSED_STORED: u32 = 1 << 30;
/// Width of `time_delta` in the event header.
const TS_SHIFT: u32 = 27;
/// Bits of the current timestamp an absolute TIME_STAMP item keeps (the kernel's `TS_MSB`).
const TS_MSB: u64 = 0xf8 << 56;

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
/// Largest type_len that encodes the payload length itself.
const TYPE_DATA_MAX: u32 = 28;

/// How one kernel lays out its sub-buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageLayout {
    /// Byte order of the recording kernel.
    pub endian: Endian,
    /// Size of the commit word = the kernel's `sizeof(long)`: 4 or 8.
    pub long_size: u8,
    /// Offset of the event data (8 + long_size on every known kernel).
    pub data_offset: usize,
    /// Whole sub-buffer size in bytes (4096 unless `buffer_subbuf_size_kb` was raised).
    pub subbuf_size: usize,
}

impl PageLayout {
    /// The standard layout: u64 timestamp, `long` commit, then data.
    pub fn new(endian: Endian, long_size: u8, subbuf_size: usize) -> PageLayout {
        PageLayout {
            endian,
            long_size,
            data_offset: 8 + usize::from(long_size),
            subbuf_size,
        }
    }

    /// The layout `header_page` describes. `None` when its commit size is not 4 or 8.
    pub fn from_header_page(header: &HeaderPage, endian: Endian) -> Option<PageLayout> {
        let long_size = match header.commit_size {
            4 => 4,
            8 => 8,
            _ => return None,
        };
        Some(PageLayout {
            endian,
            long_size,
            data_offset: usize::try_from(header.data_offset).ok()?,
            subbuf_size: usize::try_from(header.subbuf_size()).ok()?,
        })
    }

    /// Commit word location (always right after the u64 timestamp).
    const COMMIT_OFFSET: usize = 8;
}

/// Events lost before a page, from the commit word's flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissedEvents {
    /// No loss.
    None,
    /// MISSED_EVENTS without a stored count (trace-cmd prints `[EVENTS DROPPED]`).
    Unknown,
    /// MISSED_EVENTS with the count stored after the data.
    Count(u64),
}

/// The decoded header of one sub-buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageHeader {
    /// Absolute timestamp of the page (trace clock units).
    pub ts: u64,
    /// Bytes of event data (commit & 0x07ffffff).
    pub data_len: usize,
    /// Lost events before this page.
    pub missed: MissedEvents,
}

/// A page (or an item in it) that cannot be decoded. Offsets are from the page start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageError {
    /// The page is shorter than its header.
    HeaderTruncated {
        /// Bytes the header needs.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// The commit length points past the end of the page.
    CommitTooLarge {
        /// Data bytes the commit word claims.
        data_len: usize,
        /// Data bytes the page can hold.
        capacity: usize,
    },
    /// An item's header or payload runs past the committed data.
    ItemTruncated {
        /// Offset of the item header.
        offset: usize,
        /// Bytes the item needs.
        need: usize,
        /// Committed bytes left from `offset`.
        have: usize,
    },
    /// A `type_len 0` item whose length word is smaller than itself.
    BadLength {
        /// Offset of the item header.
        offset: usize,
        /// The `array[0]` value found.
        array0: u32,
    },
}

impl PageError {
    /// Offset in the page where the problem is.
    pub fn offset(&self) -> usize {
        match *self {
            PageError::HeaderTruncated { .. } => 0,
            PageError::CommitTooLarge { .. } => PageLayout::COMMIT_OFFSET,
            PageError::ItemTruncated { offset, .. } | PageError::BadLength { offset, .. } => offset,
        }
    }
}

impl fmt::Display for PageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PageError::HeaderTruncated { need, have } => write!(
                f,
                "sub-buffer of {have} bytes, shorter than its {need}-byte header"
            ),
            PageError::CommitTooLarge { data_len, capacity } => write!(
                f,
                "commit of {data_len} data bytes in a sub-buffer holding {capacity}"
            ),
            PageError::ItemTruncated { offset, need, have } => write!(
                f,
                "event item at page offset {offset} needs {need} bytes, only {have} committed"
            ),
            PageError::BadLength { offset, array0 } => write!(
                f,
                "event item at page offset {offset} has length word {array0} (< 4)"
            ),
        }
    }
}

impl std::error::Error for PageError {}

/// Decodes the header of `page` (which may be a trailing partial page).
pub fn parse_page_header(page: &[u8], layout: &PageLayout) -> Result<PageHeader, PageError> {
    let need = layout.data_offset;
    let truncated = PageError::HeaderTruncated {
        need,
        have: page.len(),
    };
    if page.len() < need || layout.data_offset < PageLayout::COMMIT_OFFSET + 4 {
        return Err(truncated);
    }
    let ts = layout.endian.u64(page, 0).ok_or(truncated)?;
    let commit_word = layout
        .endian
        .uint(page, PageLayout::COMMIT_OFFSET, layout.long_size)
        .ok_or(truncated)?;
    // The flags are an `int` sign-extended into a 64-bit long: only the low 32 bits count.
    let flags = commit_word as u32;
    let data_len = (flags & COMMIT_MASK) as usize;
    let capacity = page.len().min(layout.subbuf_size).saturating_sub(need);
    if data_len > capacity {
        return Err(PageError::CommitTooLarge { data_len, capacity });
    }
    let missed = if flags & MISSED_EVENTS == 0 {
        MissedEvents::None
    } else if flags & MISSED_STORED != 0 {
        match layout.endian.uint(page, need + data_len, layout.long_size) {
            Some(n) => MissedEvents::Count(n),
            None => MissedEvents::Unknown,
        }
    } else {
        MissedEvents::Unknown
    };
    Ok(PageHeader {
        ts,
        data_len,
        missed,
    })
}

/// One data event of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Absolute timestamp (trace clock units, before trace.dat offsets are applied).
    pub ts: u64,
    /// The tracepoint record (starts with `common_type`).
    pub payload: &'a [u8],
    /// Offset of the item header from the page start.
    pub offset: usize,
}

/// Iterator over the data events of one page; yields at most one `Err`, then ends.
#[derive(Clone, Debug)]
pub struct PageRecords<'a> {
    page: &'a [u8],
    endian: Endian,
    pos: usize,
    end: usize,
    ts: u64,
    /// Discarded events skipped so far (padding items with a non-zero delta).
    pub discarded: u64,
}

impl<'a> PageRecords<'a> {
    /// Parses `page`'s header and returns it with an iterator over its events.
    pub fn new(
        page: &'a [u8],
        layout: &PageLayout,
    ) -> Result<(PageHeader, PageRecords<'a>), PageError> {
        let header = parse_page_header(page, layout)?;
        let records = PageRecords {
            page,
            endian: layout.endian,
            pos: layout.data_offset,
            end: layout.data_offset + header.data_len,
            ts: header.ts,
            discarded: 0,
        };
        Ok((header, records))
    }

    /// Current timestamp (that of the last item read).
    pub fn ts(&self) -> u64 {
        self.ts
    }

    /// Splits an event header word into (type_len, time_delta).
    #[inline]
    fn split(&self, w: u32) -> (u32, u32) {
        match self.endian {
            Endian::Little => (w & 0x1f, w >> 5),
            Endian::Big => (w >> 27, w & 0x07ff_ffff),
        }
    }

    /// The u32 at `off` if it lies inside the committed data; else an ItemTruncated error
    /// for the item at `item`.
    #[inline]
    fn word(&self, item: usize, off: usize, need: usize) -> Result<u32, PageError> {
        if off + 4 <= self.end {
            if let Some(w) = self.endian.u32(self.page, off) {
                return Ok(w);
            }
        }
        Err(PageError::ItemTruncated {
            offset: item,
            need,
            have: self.end - item,
        })
    }

    fn step(&mut self) -> Result<Option<Record<'a>>, PageError> {
        while self.pos < self.end {
            let item = self.pos;
            let (type_len, delta) = self.split(self.word(item, item, 4)?);
            match type_len {
                TYPE_PADDING => {
                    if delta == 0 {
                        self.pos = self.end;
                        return Ok(None);
                    }
                    let len = self.word(item, item + 4, 8)? as usize;
                    let total = 4 + len;
                    self.check_fits(item, total)?;
                    self.discarded += 1;
                    self.pos = item + total;
                }
                TYPE_TIME_EXTEND => {
                    let hi = self.word(item, item + 4, 8)?;
                    self.ts = self
                        .ts
                        .wrapping_add((u64::from(hi) << TS_SHIFT) + u64::from(delta));
                    self.pos = item + 8;
                }
                TYPE_TIME_STAMP => {
                    let hi = self.word(item, item + 4, 8)?;
                    let abs = (u64::from(hi) << TS_SHIFT) | u64::from(delta);
                    self.ts = fix_absolute_ts(abs, self.ts);
                    self.pos = item + 8;
                }
                0 => {
                    let array0 = self.word(item, item + 4, 8)?;
                    let Some(len) = (array0 as usize).checked_sub(4) else {
                        return Err(PageError::BadLength {
                            offset: item,
                            array0,
                        });
                    };
                    let total = 8 + ((len + 3) & !3);
                    self.check_fits(item, total)?;
                    self.ts = self.ts.wrapping_add(u64::from(delta));
                    self.pos = item + total;
                    return Ok(Some(self.record(item, item + 8, len)));
                }
                _ => {
                    debug_assert!(type_len <= TYPE_DATA_MAX);
                    let len = type_len as usize * 4;
                    self.check_fits(item, 4 + len)?;
                    self.ts = self.ts.wrapping_add(u64::from(delta));
                    self.pos = item + 4 + len;
                    return Ok(Some(self.record(item, item + 4, len)));
                }
            }
        }
        Ok(None)
    }

    #[inline]
    fn check_fits(&self, item: usize, total: usize) -> Result<(), PageError> {
        if item.checked_add(total).is_some_and(|e| e <= self.end) {
            Ok(())
        } else {
            Err(PageError::ItemTruncated {
                offset: item,
                need: total,
                have: self.end - item,
            })
        }
    }

    #[inline]
    fn record(&self, item: usize, start: usize, len: usize) -> Record<'a> {
        Record {
            ts: self.ts,
            // INVARIANT: check_fits verified start + len <= end <= page.len().
            payload: &self.page[start..start + len],
            offset: item,
        }
    }
}

/// The kernel's `rb_fix_abs_ts`: an absolute TIME_STAMP holds 59 bits; the top 5 come from
/// the current time, with a carry when the low part wrapped.
fn fix_absolute_ts(abs: u64, current: u64) -> u64 {
    if current & TS_MSB == 0 {
        return abs;
    }
    let fixed = abs | (current & TS_MSB);
    if fixed < current {
        fixed.wrapping_add(1 << 59)
    } else {
        fixed
    }
}

impl<'a> Iterator for PageRecords<'a> {
    type Item = Result<Record<'a>, PageError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.step() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => None,
            Err(e) => {
                self.pos = self.end;
                Some(Err(e))
            }
        }
    }
}
