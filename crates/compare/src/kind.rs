//! What the inputs of a comparison are: metric files, profiles or traces.
//!
//! Each file is classified from its first 64 KiB (after transparent decompression):
//! fio JSON (`"fio version"`), `perf stat` text (`Performance counter stats for`),
//! `perf stat -x,` CSV (first data line `VALUE,UNIT,EVENT,…`), folded stacks (every sampled
//! line `frame;frame;… COUNT`, see [`crate::profile::folded`]); anything else is
//! handed to the trace readers (perf.data, trace.dat, ftrace / trace-cmd / perf script
//! text), which reject what they cannot read. A comparison needs one kind on both sides.

use std::io::Read;

use stallscope::read::{Input, ReadError};

/// The kind of one input file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// Metric file of the named format (`perf-stat`, `perf-stat-csv`, `fio-json`).
    Metrics(&'static str),
    /// A CPU profile (folded stacks).
    Profile,
    /// A scheduler trace.
    Trace,
}

impl InputKind {
    /// Name for messages and JSON: `metrics`, `profile`, `trace`.
    pub fn family(self) -> &'static str {
        match self {
            InputKind::Metrics(_) => "metrics",
            InputKind::Profile => "profile",
            InputKind::Trace => "trace",
        }
    }

    /// Name with the format for metrics (`metrics (fio-json)`).
    pub fn describe(self) -> String {
        match self {
            InputKind::Metrics(f) => format!("metrics ({f})"),
            other => other.family().to_string(),
        }
    }
}

/// Bytes read to classify a file.
const HEAD: u64 = 64 * 1024;

/// Reads the first [`HEAD`] bytes of `path` (decompressed).
pub fn head(path: &str) -> Result<Vec<u8>, ReadError> {
    let input = Input::open(path)?;
    let mut buf = Vec::new();
    input
        .into_reader()
        .take(HEAD)
        .read_to_end(&mut buf)
        .map_err(|e| ReadError::io(path, &e))?;
    Ok(buf)
}

/// Classifies `path`.
pub fn classify(path: &str) -> Result<InputKind, ReadError> {
    let bytes = head(path)?;
    Ok(classify_head(&bytes))
}

/// Classifies a file from its first bytes.
pub fn classify_head(bytes: &[u8]) -> InputKind {
    let text = String::from_utf8_lossy(bytes);
    if let Some(f) = crate::metrics::sniff(&text) {
        return InputKind::Metrics(f);
    }
    if crate::profile::folded::looks_folded(&text) {
        return InputKind::Profile;
    }
    InputKind::Trace
}

/// Reads a whole (decompressed) text file.
pub fn read_text(path: &str) -> Result<String, ReadError> {
    let input = Input::open(path)?;
    let mut buf = Vec::new();
    input
        .into_reader()
        .read_to_end(&mut buf)
        .map_err(|e| ReadError::io(path, &e))?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_heads() {
        assert_eq!(
            classify_head(b"{\n  \"fio version\" : \"fio-3.33\","),
            InputKind::Metrics("fio-json")
        );
        assert_eq!(
            classify_head(b"\n Performance counter stats for 'x':\n"),
            InputKind::Metrics("perf-stat")
        );
        assert_eq!(
            classify_head(b"12,,context-switches,100,100.00,1.0,K/sec\n"),
            InputKind::Metrics("perf-stat-csv")
        );
        assert_eq!(classify_head(b"main;f;g 12\nmain;h 3\n"), InputKind::Profile);
        assert_eq!(classify_head(b"PERFILE2"), InputKind::Trace);
        assert_eq!(
            classify_head(b"# tracer: nop\n  bash-1 [000] ...1 1.0: sched_switch: x\n"),
            InputKind::Trace
        );
    }
}
