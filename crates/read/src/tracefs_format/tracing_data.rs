//! The tracing-data blob: perf.data `HEADER_TRACING_DATA` (feature 1, or the payload after
//! a pipe-mode record 66) and the prefix of a trace-cmd `trace.dat` v6 file.
//!
//! ```text
//! 17 08 44 "tracing"              magic (10 bytes)
//! VERSION "\0"                    "0.6" (perf), "6" (trace-cmd)
//! u8 endian (0 = little), u8 sizeof(long) of the recorder, u32 page size
//! "header_page\0"  u64 size, text     → HeaderPage
//! "header_event\0" u64 size, text
//! u32 n, n × (u64 size, format)       ftrace's own events (system "ftrace"; 0 in perf)
//! u32 s, s × ("system\0", u32 n, n × (u64 size, format))
//! u32 size, kallsyms text             (0 in recent perf)
//! u32 size, printk formats text       `0xffffffff8290a1e0 : "fmt\n"`
//! u64 size, saved_cmdlines text       `PID COMM` lines; only when version ≥ 0.6 / 6
//! ```
//! All integers after the endian byte are in that byte order. Sizes are checked against the
//! bytes present before anything is sliced; a format that does not parse is kept in
//! [`TracingData::bad_formats`] rather than failing the whole blob.

use super::endian::Endian;
use super::format_batch::{self, RawFormat};
use super::format_file::EventFormat;
use super::header_page::HeaderPage;
use crate::sniff::TRACE_DAT_MAGIC;

/// Everything in a tracing-data blob.
#[derive(Clone, Debug, Default)]
pub struct TracingData {
    /// Version text (`0.6`, `6`).
    pub version: String,
    /// Byte order of the integers in the blob (and of the trace's raw records).
    pub endian: Endian,
    /// `sizeof(long)` of the recording user space.
    pub long_size: u8,
    /// Page size of the recording machine.
    pub page_size: u32,
    /// `events/header_page`.
    pub header_page: Option<HeaderPage>,
    /// `events/header_event` text.
    pub header_event: String,
    /// Formats of all events, ftrace's own ones first (system `ftrace`).
    pub events: Vec<EventFormat>,
    /// `(system, why)` for format files that did not parse.
    pub bad_formats: Vec<(String, String)>,
    /// `/proc/kallsyms` text (often empty).
    pub kallsyms: String,
    /// `printk_formats` text.
    pub printk_formats: String,
    /// `saved_cmdlines` text.
    pub saved_cmdlines: String,
    /// Bytes of the blob consumed (a trace.dat continues after it).
    pub consumed: usize,
}

/// A bounds-checked reader over a byte slice that reports offsets relative to `base`
/// (the blob's position in its file) in its errors.
pub struct BlobCursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    base: u64,
    endian: Endian,
}

/// A blob error: `(absolute offset, expected, found)`.
pub type BlobError = (u64, String, String);

impl<'a> BlobCursor<'a> {
    /// A cursor at the start of `bytes`, which sit at file offset `base`.
    pub fn new(bytes: &'a [u8], base: u64, endian: Endian) -> BlobCursor<'a> {
        BlobCursor {
            bytes,
            pos: 0,
            base,
            endian,
        }
    }

    /// Absolute offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Bytes consumed so far.
    pub fn consumed(&self) -> usize {
        self.pos
    }

    fn err(&self, expected: impl Into<String>) -> BlobError {
        let left = self.bytes.len() - self.pos;
        let found = if left == 0 {
            "end of data".to_string()
        } else {
            format!("only {left} bytes left")
        };
        (self.offset(), expected.into(), found)
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], BlobError> {
        let left = (self.bytes.len() - self.pos) as u64;
        if n > left {
            return Err(self.err(format!("{what} ({n} bytes)")));
        }
        let s = &self.bytes[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    /// A u32 in the blob's byte order.
    pub fn u32(&mut self, what: &str) -> Result<u32, BlobError> {
        let b = self.take(4, what)?;
        self.endian
            .u32(b, 0)
            .ok_or_else(|| self.err(what.to_string()))
    }

    /// A u64 in the blob's byte order.
    pub fn u64(&mut self, what: &str) -> Result<u64, BlobError> {
        let b = self.take(8, what)?;
        self.endian
            .u64(b, 0)
            .ok_or_else(|| self.err(what.to_string()))
    }

    /// A NUL-terminated string (NUL consumed).
    pub fn cstr(&mut self, what: &str) -> Result<String, BlobError> {
        let rest = &self.bytes[self.pos..];
        let n =
            memchr::memchr(0, rest).ok_or_else(|| self.err(format!("{what} (NUL-terminated)")))?;
        let s = String::from_utf8_lossy(&rest[..n]).into_owned();
        self.pos += n + 1;
        Ok(s)
    }

    /// Exactly the bytes `lit` (a section tag such as `header_page\0`).
    pub fn expect(&mut self, lit: &[u8], what: &str) -> Result<(), BlobError> {
        let at = self.offset();
        let b = self.take(lit.len() as u64, what)?;
        if b != lit {
            return Err((at, what.to_string(), crate::error::show_bytes(b, 16)));
        }
        Ok(())
    }

    /// A `u64 size` + text block.
    pub fn sized_text_u64(&mut self, what: &str) -> Result<String, BlobError> {
        let n = self.u64(&format!("{what} size"))?;
        Ok(String::from_utf8_lossy(self.take(n, what)?).into_owned())
    }

    /// A `u64 size` + bytes block.
    pub fn sized_bytes_u64(&mut self, what: &str) -> Result<&'a [u8], BlobError> {
        if self.bytes.len() - self.pos < 8 {
            // The error `self.u64(&format!("{what} size"))` gives, without formatting
            // `what` for every block.
            return Err(self.err(format!("{what} size (8 bytes)")));
        }
        let n = self.u64(what)?;
        self.take(n, what)
    }

    /// A `u32 size` + text block.
    pub fn sized_text_u32(&mut self, what: &str) -> Result<String, BlobError> {
        let n = self.u32(&format!("{what} size"))?;
        Ok(String::from_utf8_lossy(self.take(u64::from(n), what)?).into_owned())
    }
}

impl TracingData {
    /// Parses a blob that sits at file offset `base`. Errors carry absolute offsets.
    pub fn parse(bytes: &[u8], base: u64) -> Result<TracingData, BlobError> {
        let mut td = TracingData::default();
        let mut c = BlobCursor::new(bytes, base, Endian::Little);
        c.expect(
            TRACE_DAT_MAGIC,
            "the tracing-data magic 17 08 44 \"tracing\"",
        )?;
        td.version = c.cstr("the tracing-data version")?;
        let header = c.take(6, "endian, long size and page size")?;
        td.endian = if header[0] == 0 {
            Endian::Little
        } else {
            Endian::Big
        };
        td.long_size = header[1];
        td.page_size = td.endian.u32(header, 2).unwrap_or(0);
        c.endian = td.endian;
        td.read_header_info(&mut c)?;
        td.read_ftrace_formats(&mut c)?;
        td.read_event_systems(&mut c)?;
        td.kallsyms = c.sized_text_u32("kallsyms")?;
        td.printk_formats = c.sized_text_u32("printk formats")?;
        if has_saved_cmdlines(&td.version) {
            td.saved_cmdlines = c.sized_text_u64("saved cmdlines")?;
        }
        td.consumed = c.consumed();
        Ok(td)
    }

    /// `"header_page\0" u64 text "header_event\0" u64 text` (trace.dat v7 HEADER_INFO section).
    pub fn read_header_info(&mut self, c: &mut BlobCursor<'_>) -> Result<(), BlobError> {
        c.expect(b"header_page\0", "the tag \"header_page\"")?;
        let at = c.offset();
        let text = c.sized_text_u64("header_page")?;
        self.header_page =
            Some(HeaderPage::parse(&text).map_err(|e| (at, "a valid header_page".to_string(), e))?);
        c.expect(b"header_event\0", "the tag \"header_event\"")?;
        self.header_event = c.sized_text_u64("header_event")?;
        Ok(())
    }

    /// `u32 n, n × (u64 size, format)` with system `ftrace` (v7 FTRACE_EVENTS section).
    pub fn read_ftrace_formats(&mut self, c: &mut BlobCursor<'_>) -> Result<(), BlobError> {
        let n = c.u32("the number of ftrace formats")?;
        let mut raw = Vec::new();
        for _ in 0..n {
            let text = c.sized_bytes_u64("an ftrace format")?;
            raw.push(RawFormat {
                system: "ftrace",
                text,
            });
        }
        self.add_formats(&raw);
        Ok(())
    }

    /// `u32 systems, each "name\0" u32 n, n × (u64 size, format)` (v7 EVENT_FORMATS section).
    /// The whole list is walked (sizes checked) before any format is parsed.
    pub fn read_event_systems(&mut self, c: &mut BlobCursor<'_>) -> Result<(), BlobError> {
        let systems = c.u32("the number of event systems")?;
        // (system name, formats' bytes) per system, then flattened for the parse.
        let mut walked: Vec<(String, Vec<&[u8]>)> = Vec::new();
        for _ in 0..systems {
            let system = c.cstr("an event system name")?;
            let n = c.u32("the number of formats in a system")?;
            let mut texts = Vec::new();
            for _ in 0..n {
                texts.push(c.sized_bytes_u64("an event format")?);
            }
            walked.push((system, texts));
        }
        let raw: Vec<RawFormat<'_>> = walked
            .iter()
            .flat_map(|(system, texts)| {
                texts.iter().map(move |&text| RawFormat {
                    system: system.as_str(),
                    text,
                })
            })
            .collect();
        self.add_formats(&raw);
        Ok(())
    }

    /// Parses `raw` (in parallel when there are many) and keeps the formats, in order, and
    /// the failures in [`TracingData::bad_formats`].
    fn add_formats(&mut self, raw: &[RawFormat<'_>]) {
        self.events.reserve(raw.len());
        for parsed in format_batch::parse_all(raw) {
            match parsed {
                Ok(f) => self.events.push(f),
                Err(bad) => self.bad_formats.push(bad),
            }
        }
    }

    /// The format with event id `id`.
    pub fn event_by_id(&self, id: u64) -> Option<&EventFormat> {
        self.events.iter().find(|e| u64::from(e.id) == id)
    }

    /// `(pid, comm)` pairs from `saved_cmdlines`.
    pub fn cmdlines(&self) -> Vec<(i32, String)> {
        parse_saved_cmdlines(&self.saved_cmdlines)
    }
}

/// perf writes "0.5" (no saved_cmdlines) or "0.6"; trace-cmd writes "6" or "7".
fn has_saved_cmdlines(version: &str) -> bool {
    match version.strip_prefix("0.") {
        Some(minor) => minor.parse::<u32>().is_ok_and(|m| m >= 6),
        None => version.parse::<u32>().is_ok_and(|v| v >= 6),
    }
}

/// Parses `saved_cmdlines` lines `PID COMM` (the comm may contain spaces: split at the first
/// space only). Malformed lines are skipped (the file is advisory: names only).
pub fn parse_saved_cmdlines(text: &str) -> Vec<(i32, String)> {
    text.lines()
        .filter_map(|l| {
            let (pid, comm) = l.split_once(' ')?;
            Some((pid.trim().parse().ok()?, comm.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(version: &str, with_cmdlines: bool) -> Vec<u8> {
        let fmt_dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/samples/formats"
        );
        let read = |n: &str| std::fs::read(format!("{fmt_dir}/{n}")).unwrap();
        let mut b = TRACE_DAT_MAGIC.to_vec();
        b.extend_from_slice(version.as_bytes());
        b.push(0);
        b.extend_from_slice(&[0, 8]);
        b.extend_from_slice(&4096u32.to_le_bytes());
        for (tag, file) in [
            ("header_page", "header_page"),
            ("header_event", "header_event"),
        ] {
            b.extend_from_slice(tag.as_bytes());
            b.push(0);
            let t = read(file);
            b.extend_from_slice(&(t.len() as u64).to_le_bytes());
            b.extend_from_slice(&t);
        }
        let p = read("ftrace_print.format");
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&(p.len() as u64).to_le_bytes());
        b.extend_from_slice(&p);
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(b"sched\0");
        b.extend_from_slice(&3u32.to_le_bytes());
        for f in [
            "sched_sched_switch.format",
            "sched_sched_migrate_task.format",
        ] {
            let t = read(f);
            b.extend_from_slice(&(t.len() as u64).to_le_bytes());
            b.extend_from_slice(&t);
        }
        let bad = b"name: broken\n";
        b.extend_from_slice(&(bad.len() as u64).to_le_bytes());
        b.extend_from_slice(bad);
        b.extend_from_slice(&0u32.to_le_bytes());
        let printk = b"0xffffffff8290a1e0 : \"hello\\n\"\n";
        b.extend_from_slice(&(printk.len() as u32).to_le_bytes());
        b.extend_from_slice(printk);
        if with_cmdlines {
            let cl = b"1 systemd\n8457 a:b [x] 1.5\n";
            b.extend_from_slice(&(cl.len() as u64).to_le_bytes());
            b.extend_from_slice(cl);
        }
        b
    }

    #[test]
    fn parses_a_v0_6_blob_built_from_the_real_format_files() {
        let b = blob("0.6", true);
        let td = TracingData::parse(&b, 100).unwrap();
        assert_eq!(td.consumed, b.len());
        assert_eq!(td.header_page.unwrap().commit_size, 8);
        let names: Vec<String> = td.events.iter().map(EventFormat::full_name).collect();
        assert_eq!(
            names,
            [
                "ftrace:print",
                "sched:sched_switch",
                "sched:sched_migrate_task"
            ]
        );
        assert_eq!(td.bad_formats.len(), 1);
        assert_eq!(
            td.event_by_id(371).map(|e| e.name.as_str()),
            Some("sched_migrate_task")
        );
        assert_eq!(
            td.cmdlines(),
            vec![
                (1, "systemd".to_string()),
                (8457, "a:b [x] 1.5".to_string())
            ]
        );
        assert!(td.printk_formats.contains("hello"));
        let old = blob("0.5", false);
        assert_eq!(TracingData::parse(&old, 0).unwrap().consumed, old.len());
    }

    #[test]
    fn truncation_anywhere_is_an_error_with_an_offset() {
        let b = blob("0.6", true);
        for cut in [0, 5, 12, 20, 40, 300, b.len() - 1] {
            let (off, expected, found) = TracingData::parse(&b[..cut], 1000).unwrap_err();
            assert!(
                off >= 1000 && off <= 1000 + cut as u64,
                "{off} {expected} {found}"
            );
        }
        let mut huge = b.clone();
        // header_page size → u64::MAX: rejected before any slicing or allocation.
        let at = TRACE_DAT_MAGIC.len() + 4 + 6 + 12;
        huge[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(TracingData::parse(&huge, 0).is_err());
    }
}
