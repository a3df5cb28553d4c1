//! [`LineSource`]: the line reader under every text format.
//!
//! One large buffered reader, one reused line buffer, 1-based line numbers, one line of
//! push-back (perf callchain blocks end at the next header line), and the two byte-level
//! problems a text trace can have, reported to the caller rather than hidden:
//!
//! * a line that is not valid UTF-8 is returned lossily converted (`U+FFFD`) and flagged,
//!   so the reader can count it;
//! * a last line without its `\n` is flagged as possibly truncated.
//!
//! Line terminators (`\n`, `\r\n`) are removed. I/O and decompression errors are fatal and
//! name the line where they happened.

use std::io::{BufRead, BufReader, Read};

use crate::error::ReadError;

/// Read buffer size: large enough that a read syscall is amortized over thousands of lines.
const READ_BUF: usize = 1 << 20;

/// One line as handed to a reader.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Line<'a> {
    /// 1-based line number.
    pub number: u64,
    /// The text without its terminator (lossily converted when `lossy`).
    pub text: &'a [u8],
    /// The raw bytes were not valid UTF-8.
    pub lossy: bool,
    /// This is the last line and it had no `\n`: it may have been cut off.
    pub unterminated: bool,
}

/// Buffered line-by-line access to a text input.
pub(crate) struct LineSource {
    path: String,
    reader: BufReader<Box<dyn Read + Send>>,
    buf: Vec<u8>,
    lossy_buf: Vec<u8>,
    number: u64,
    lossy: bool,
    unterminated: bool,
    /// `buf` holds a line that was pushed back and must be returned again.
    held: bool,
}

impl LineSource {
    /// Wraps a forward stream positioned at the first byte of the text.
    pub fn new(path: String, stream: Box<dyn Read + Send>) -> LineSource {
        LineSource {
            path,
            reader: BufReader::with_capacity(READ_BUF, stream),
            buf: Vec::with_capacity(512),
            lossy_buf: Vec::new(),
            number: 0,
            lossy: false,
            unterminated: false,
            held: false,
        }
    }

    /// The next line, `Ok(None)` at the end of the input.
    pub fn next_line(&mut self) -> Result<Option<Line<'_>>, ReadError> {
        if self.held {
            self.held = false;
            return Ok(Some(self.current()));
        }
        self.buf.clear();
        let n = self.reader.read_until(b'\n', &mut self.buf).map_err(|e| {
            ReadError::at_line(
                &self.path,
                self.number + 1,
                "readable text",
                format!("I/O error: {e}"),
            )
        })?;
        if n == 0 {
            return Ok(None);
        }
        self.number += 1;
        self.unterminated = self.buf.last() != Some(&b'\n');
        if !self.unterminated {
            self.buf.pop();
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        self.lossy = !self.buf.is_ascii() && std::str::from_utf8(&self.buf).is_err();
        if self.lossy {
            self.lossy_buf.clear();
            self.lossy_buf
                .extend_from_slice(String::from_utf8_lossy(&self.buf).as_bytes());
        }
        Ok(Some(self.current()))
    }

    /// Makes the next [`LineSource::next_line`] return the line just returned again.
    pub fn push_back(&mut self) {
        self.held = true;
    }

    fn current(&self) -> Line<'_> {
        Line {
            number: self.number,
            text: if self.lossy {
                &self.lossy_buf
            } else {
                &self.buf
            },
            lossy: self.lossy,
            unterminated: self.unterminated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn source(bytes: &[u8]) -> LineSource {
        LineSource::new("t.txt".into(), Box::new(Cursor::new(bytes.to_vec())))
    }

    #[test]
    fn numbers_lines_strips_terminators_and_flags_the_cut_last_line() {
        let mut s = source(b"a\r\nb\n\nlast");
        let mut seen = Vec::new();
        while let Some(l) = s.next_line().unwrap() {
            seen.push((
                l.number,
                String::from_utf8(l.text.to_vec()).unwrap(),
                l.unterminated,
            ));
        }
        assert_eq!(
            seen,
            vec![
                (1, "a".into(), false),
                (2, "b".into(), false),
                (3, "".into(), false),
                (4, "last".into(), true)
            ]
        );
    }

    #[test]
    fn push_back_returns_the_same_line_again() {
        let mut s = source(b"one\ntwo\n");
        assert_eq!(s.next_line().unwrap().unwrap().text, b"one");
        s.push_back();
        let again = s.next_line().unwrap().unwrap();
        assert_eq!((again.number, again.text), (1, &b"one"[..]));
        assert_eq!(s.next_line().unwrap().unwrap().text, b"two");
        assert!(s.next_line().unwrap().is_none());
    }

    #[test]
    fn invalid_utf8_is_converted_and_flagged() {
        let mut s = source(b"ok\nbad \xff\xfe end\n");
        assert!(!s.next_line().unwrap().unwrap().lossy);
        let l = s.next_line().unwrap().unwrap();
        assert!(l.lossy);
        assert_eq!(
            std::str::from_utf8(l.text).unwrap(),
            "bad \u{fffd}\u{fffd} end"
        );
    }
}
