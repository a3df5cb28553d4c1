//! What the inputs of a comparison are: metric files, profiles or traces.
//!
//! Each file is classified from its first 64 KiB (after transparent decompression), in order:
//!
//! 1. fio JSON (`"fio version"`), `perf stat` text (`Performance counter stats for`),
//!    `perf stat -x,` CSV (first data line `VALUE,UNIT,EVENT,…`): metrics;
//! 2. what the profile readers recognize (`stallscope_read::profile::sniff_profile`):
//!    folded stacks and `perf report` text are profiles; perf.data and `perf script` text
//!    can be either, so they are **traces when they carry `sched_switch`** (perf.data: a
//!    declared event; `perf script` text: the first 64 KiB mention it) and profiles
//!    otherwise (`perf record -g` samples);
//! 3. anything else goes to the trace readers (trace.dat, ftrace / trace-cmd text), which
//!    reject what they cannot read.
//!
//! A comparison needs one kind on both sides; `--kind` overrides the guess.

use std::io::Read;

use stallscope_read::profile::{sniff_profile, ProfileFormat};
use stallscope_read::{Input, ReadError};

/// The kind of one input file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// Metric file of the named format (`perf-stat`, `perf-stat-csv`, `fio-json`).
    Metrics(&'static str),
    /// A CPU profile.
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
    match classify_head(&bytes) {
        Guess::Known(k) => Ok(k),
        Guess::PerfData => {
            let reader = stallscope_read::open(path, None, 0)?;
            let sched = reader
                .meta()
                .declared_events
                .iter()
                .any(|e| e.rsplit(':').next() == Some("sched_switch"));
            Ok(if sched {
                InputKind::Trace
            } else {
                InputKind::Profile
            })
        }
    }
}

/// A guess from the first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guess {
    /// Decided.
    Known(InputKind),
    /// perf.data: the declared events decide.
    PerfData,
}

/// Classifies a file from its first bytes.
pub fn classify_head(bytes: &[u8]) -> Guess {
    let text = String::from_utf8_lossy(bytes);
    if let Some(f) = crate::metrics::sniff(&text) {
        return Guess::Known(InputKind::Metrics(f));
    }
    match sniff_profile(bytes) {
        Some(ProfileFormat::Folded | ProfileFormat::PerfReport) => Guess::Known(InputKind::Profile),
        Some(ProfileFormat::PerfData) => Guess::PerfData,
        Some(ProfileFormat::PerfScript) if !text.contains("sched_switch") => {
            Guess::Known(InputKind::Profile)
        }
        _ => Guess::Known(InputKind::Trace),
    }
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

    fn known(b: &[u8]) -> InputKind {
        match classify_head(b) {
            Guess::Known(k) => k,
            Guess::PerfData => panic!("perf.data"),
        }
    }

    #[test]
    fn kinds_from_heads() {
        assert_eq!(
            known(b"{\n  \"fio version\" : \"fio-3.33\","),
            InputKind::Metrics("fio-json")
        );
        assert_eq!(
            known(b"\n Performance counter stats for 'x':\n"),
            InputKind::Metrics("perf-stat")
        );
        assert_eq!(
            known(b"12,,context-switches,100,100.00,1.0,K/sec\n"),
            InputKind::Metrics("perf-stat-csv")
        );
        assert_eq!(known(b"main;f;g 12\nmain;h 3\n"), InputKind::Profile);
        assert_eq!(classify_head(b"PERFILE2\0\0\0\0"), Guess::PerfData);
        assert_eq!(
            known(b"# tracer: nop\n#\n          <idle>-0       [000] d..2.   100.000001: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=a next_pid=1 next_prio=120\n"),
            InputKind::Trace
        );
    }
}
