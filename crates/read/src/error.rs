//! [`ReadError`]: a fatal input problem. Its message always names the file, the place
//! (byte offset or line) when there is one, and what was expected versus found.

use std::fmt;

use stallscope_model::SpanPos;

/// A fatal problem with one input (exit code 2 in the CLI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    /// Path as given.
    pub path: String,
    /// Where, when known.
    pub pos: Option<SpanPos>,
    /// What the reader expected there.
    pub expected: String,
    /// What it found instead.
    pub found: String,
}

/// What a profile reader found when an input holds no sample (see
/// [`ReadError::is_no_samples`]).
pub(crate) const NO_SAMPLES: &str = "no sample records";

impl ReadError {
    /// Whether this is a profile reader's "the input holds no samples" (of any event, or
    /// of the profiled one), as opposed to a damaged input.
    pub fn is_no_samples(&self) -> bool {
        self.expected.starts_with("samples")
            && (self.found == NO_SAMPLES || self.found.starts_with("only samples of other events"))
    }

    /// A problem at `pos` in `path`.
    pub fn new(
        path: &str,
        pos: Option<SpanPos>,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> ReadError {
        ReadError {
            path: path.to_string(),
            pos,
            expected: expected.into(),
            found: found.into(),
        }
    }

    /// At byte offset `off`.
    pub fn at_byte(
        path: &str,
        off: u64,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> ReadError {
        Self::new(path, Some(SpanPos::Byte(off)), expected, found)
    }

    /// At 1-based line `line`.
    pub fn at_line(
        path: &str,
        line: u64,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> ReadError {
        Self::new(path, Some(SpanPos::Line(line)), expected, found)
    }

    /// An I/O error on `path`.
    pub fn io(path: &str, err: &std::io::Error) -> ReadError {
        Self::new(path, None, "a readable file", format!("I/O error: {err}"))
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path)?;
        if let Some(p) = self.pos {
            write!(f, ": {p}")?;
        }
        write!(f, ": expected {}, found {}", self.expected, self.found)
    }
}

impl std::error::Error for ReadError {}

/// Renders up to `n` bytes as hex plus printable ASCII, for "found" texts.
pub fn show_bytes(bytes: &[u8], n: usize) -> String {
    let b = &bytes[..bytes.len().min(n)];
    let hex: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    let ascii: String = b
        .iter()
        .map(|&x| {
            if (0x20..0x7f).contains(&x) {
                x as char
            } else {
                '.'
            }
        })
        .collect();
    format!("{} \"{}\"", hex.join(" "), ascii)
}
