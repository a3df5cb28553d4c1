//! Helpers shared by the text reader tests: read a file with a chosen reader, collect dump
//! lines, and count event lines independently of the readers.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use stallscope_model::{DataQuality, Event, InputFormat, TraceMeta};
use stallscope_read::{open_as, Input};

/// `fixtures/samples` (override with `STALLSCOPE_SAMPLES`).
pub fn samples() -> PathBuf {
    std::env::var_os("STALLSCOPE_SAMPLES").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/samples"),
        PathBuf::from,
    )
}

/// The repository's `fixtures/` directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Everything a test looks at after draining a reader.
pub struct Read {
    pub events: Vec<Event>,
    pub meta: TraceMeta,
    pub dq: DataQuality,
}

impl Read {
    pub fn dumps(&self) -> Vec<String> {
        self.events.iter().map(Event::dump_line).collect()
    }
}

/// Reads `path` as `format` to the end (panics on a fatal error).
pub fn read_as(path: &Path, format: InputFormat) -> Read {
    let input = Input::open(path.to_str().expect("utf-8 path")).expect("open");
    read_input(input, format)
}

/// Reads in-memory text as `format`.
pub fn read_bytes(name: &str, bytes: &[u8], format: InputFormat) -> Read {
    read_input(
        Input::from_bytes(name, bytes.to_vec()).expect("input"),
        format,
    )
}

fn read_input(input: Input, format: InputFormat) -> Read {
    let mut r = open_as(input, format, 0).expect("reader");
    let mut events = Vec::new();
    while let Some(e) = r.next_event().unwrap_or_else(|e| panic!("fatal: {e}")) {
        events.push(e);
    }
    Read {
        events,
        meta: r.meta().clone(),
        dq: r.quality().clone(),
    }
}

/// Number of lines of `text` that look like an event line, by a rule independent of the
/// readers: somewhere a `:` followed by spaces, an optional trace-cmd `(+N)` column and an
/// optional perf period, then an event name `[a-z][a-z0-9_:]*` ending in `: ` or `:` at the end
/// of the line (`PERF_RECORD_*` side-band lines do not match: upper case).
pub fn count_event_lines(text: &str) -> usize {
    text.lines()
        .filter(|l| !l.starts_with('#') && looks_like_event(l))
        .count()
}

fn looks_like_event(line: &str) -> bool {
    for (i, _) in line.match_indices(':') {
        let mut rest = &line[i + 1..];
        if !rest.starts_with(' ') {
            continue;
        }
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix("(+") {
            if let Some((_, t)) = r.split_once(')') {
                rest = t.trim_start();
            }
        }
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 && rest[digits..].starts_with(' ') {
            rest = rest[digits..].trim_start();
        }
        let name_len = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let name = &rest[..name_len];
        let after = &rest[name_len..];
        if name.len() > 1
            && name.as_bytes()[0].is_ascii_lowercase()
            && name.ends_with(':')
            && (after.is_empty() || after.starts_with(' '))
        {
            return true;
        }
    }
    false
}
