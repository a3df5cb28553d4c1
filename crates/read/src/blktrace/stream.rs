//! [`RecordStream`]: the records of one per-CPU file in file order, with their byte offsets.
//!
//! A file is a plain concatenation of `header (48 bytes) + pdu_len bytes` records with no
//! file header. The byte order comes from the first record's magic. A record whose magic
//! is wrong is garbage: the stream counts it and slides forward byte by byte to the next
//! valid magic (counted with the bytes skipped). A record cut short by the end of the
//! file is fatal: [`ReadError`] naming the file, the record's offset and how many bytes
//! were missing.

use std::io::{BufReader, Read};

use crate::blktrace::record::{Endian, Header, HEADER_LEN, VERSION};
use crate::error::show_bytes;
use crate::ReadError;

/// One record read from a file.
#[derive(Clone, Debug)]
pub struct RawRecord {
    /// Decoded header.
    pub header: Header,
    /// Payload (`pdu_len` bytes).
    pub pdu: Vec<u8>,
    /// Byte offset of the header in the file.
    pub offset: u64,
}

/// What was skipped as garbage while reading (for data quality).
#[derive(Clone, Debug, Default)]
pub struct Garbage {
    /// Resynchronizations (bad magic found where a record should start).
    pub resyncs: u64,
    /// Bytes skipped.
    pub bytes: u64,
    /// Offset of the first garbage, for the example.
    pub first_offset: Option<u64>,
}

/// Reads records from one file.
pub struct RecordStream {
    /// Path of the file (for errors and examples).
    pub path: String,
    reader: BufReader<Box<dyn Read + Send>>,
    /// Offset of the next unread byte.
    pub offset: u64,
    endian: Option<Endian>,
    /// Header bytes already read ahead (after a resync).
    window: [u8; HEADER_LEN],
    window_len: usize,
    /// Garbage skipped so far.
    pub garbage: Garbage,
}

/// Reads as many bytes as available into `buf`, returning how many (short only at EOF).
fn read_full(r: &mut dyn Read, buf: &mut [u8], path: &str) -> Result<usize, ReadError> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::io(path, &e)),
        }
    }
    Ok(n)
}

impl RecordStream {
    /// A stream over `reader` (positioned at byte 0 of the file named `path`).
    pub fn new(path: String, reader: Box<dyn Read + Send>) -> RecordStream {
        RecordStream {
            path,
            reader: BufReader::with_capacity(256 * 1024, reader),
            offset: 0,
            endian: None,
            window: [0; HEADER_LEN],
            window_len: 0,
            garbage: Garbage::default(),
        }
    }

    /// Byte order, once the first record was read.
    pub fn endian(&self) -> Option<Endian> {
        self.endian
    }

    /// Fills the header window; returns false at a clean end of file.
    fn fill_window(&mut self) -> Result<bool, ReadError> {
        let start = self.window_len;
        let n = read_full(&mut self.reader, &mut self.window[start..], &self.path)?;
        self.window_len += n;
        if self.window_len == 0 {
            return Ok(false);
        }
        if self.window_len < HEADER_LEN {
            return Err(ReadError::at_byte(
                &self.path,
                self.offset,
                format!("a {HEADER_LEN}-byte blk_io_trace header"),
                format!(
                    "end of file after {} bytes (truncated record)",
                    self.window_len
                ),
            ));
        }
        Ok(true)
    }

    /// True when the window starts with a valid magic (fixing the byte order on first use).
    fn window_magic_ok(&mut self) -> Result<bool, ReadError> {
        let word = [
            self.window[0],
            self.window[1],
            self.window[2],
            self.window[3],
        ];
        match (Endian::detect(word), self.endian) {
            (Some((e, v)), None) => {
                if v != VERSION {
                    return Err(ReadError::at_byte(
                        &self.path,
                        self.offset,
                        format!("blk_io_trace version {VERSION}"),
                        format!("version {v} (magic {})", show_bytes(&word, 4)),
                    ));
                }
                self.endian = Some(e);
                Ok(true)
            }
            (Some((e, v)), Some(known)) => Ok(e == known && v == VERSION),
            (None, _) => Ok(false),
        }
    }

    /// The next record, `Ok(None)` at the end of the file.
    pub fn next_record(&mut self) -> Result<Option<RawRecord>, ReadError> {
        loop {
            if !self.fill_window()? {
                return Ok(None);
            }
            if self.window_magic_ok()? {
                break;
            }
            if self.endian.is_none() {
                // Nothing valid seen yet: this is not a blktrace file at all.
                return Err(ReadError::at_byte(
                    &self.path,
                    self.offset,
                    "a blk_io_trace magic (0x656174NN)",
                    show_bytes(&self.window, 16),
                ));
            }
            if self.garbage.first_offset.is_none() {
                self.garbage.first_offset = Some(self.offset);
            }
            self.garbage.resyncs += 1;
            // Slide forward one byte at a time until a magic lines up.
            loop {
                self.window.copy_within(1.., 0);
                self.window_len -= 1;
                self.offset += 1;
                self.garbage.bytes += 1;
                let n = read_full(
                    &mut self.reader,
                    &mut self.window[self.window_len..self.window_len + 1],
                    &self.path,
                )?;
                self.window_len += n;
                if self.window_len < 4 {
                    // Garbage up to the end of the file.
                    self.garbage.bytes += self.window_len as u64;
                    self.offset += self.window_len as u64;
                    self.window_len = 0;
                    return Ok(None);
                }
                let word = [
                    self.window[0],
                    self.window[1],
                    self.window[2],
                    self.window[3],
                ];
                if matches!(Endian::detect(word), Some((e, VERSION)) if Some(e) == self.endian) {
                    break;
                }
            }
        }
        // INVARIANT: window_magic_ok returned true, which sets the byte order.
        let endian = self.endian.unwrap_or(Endian::Little);
        let header = Header::parse(&self.window, endian);
        let offset = self.offset;
        self.window_len = 0;
        self.offset += HEADER_LEN as u64;
        let mut pdu = vec![0u8; usize::from(header.pdu_len)];
        let n = read_full(&mut self.reader, &mut pdu, &self.path)?;
        if n < pdu.len() {
            return Err(ReadError::at_byte(
                &self.path,
                offset,
                format!("a record with {} payload bytes", pdu.len()),
                format!("end of file after {n} payload bytes (truncated record)"),
            ));
        }
        self.offset += pdu.len() as u64;
        Ok(Some(RawRecord {
            header,
            pdu,
            offset,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u32, pdu: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0x6561_7407u32.to_le_bytes());
        b.extend_from_slice(&seq.to_le_bytes());
        b.extend_from_slice(&(1000u64 * u64::from(seq)).to_le_bytes());
        b.extend_from_slice(&8u64.to_le_bytes());
        b.extend_from_slice(&4096u32.to_le_bytes());
        b.extend_from_slice(&0x001a_0001u32.to_le_bytes());
        b.extend_from_slice(&5u32.to_le_bytes());
        b.extend_from_slice(&(7u32 << 20).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&(pdu.len() as u16).to_le_bytes());
        b.extend_from_slice(pdu);
        b
    }

    fn stream(bytes: Vec<u8>) -> RecordStream {
        RecordStream::new("t".into(), Box::new(std::io::Cursor::new(bytes)))
    }

    #[test]
    fn garbage_between_records_is_skipped_and_counted() {
        let mut b = record(1, b"ab");
        b.extend_from_slice(b"xyz");
        b.extend(record(2, &[]));
        let mut s = stream(b);
        assert_eq!(s.next_record().unwrap().unwrap().header.sequence, 1);
        let r = s.next_record().unwrap().unwrap();
        assert_eq!((r.header.sequence, r.offset), (2, 53));
        assert_eq!((s.garbage.resyncs, s.garbage.bytes), (1, 3));
        assert!(s.next_record().unwrap().is_none());
    }

    #[test]
    fn truncated_payload_names_the_record_offset() {
        let mut b = record(1, &[]);
        let mut second = record(2, b"hello");
        second.truncate(50);
        b.extend(second);
        let mut s = stream(b);
        assert!(s.next_record().unwrap().is_some());
        let e = s.next_record().unwrap_err();
        assert_eq!(e.pos, Some(stallscope_model::SpanPos::Byte(48)));
        assert!(e.found.contains("truncated"), "{e}");
    }

    #[test]
    fn a_file_not_starting_with_the_magic_is_an_error() {
        let mut s = stream(vec![0u8; 64]);
        assert!(s.next_record().is_err());
    }
}
