//! blktrace binary per-CPU files (`DEV.blktrace.N`, formats.md §8) → [`BlockEvent`]s.
//!
//! Each file is a concatenation of `struct blk_io_trace` records (layout in [`record`]);
//! [`stream`] reads one file's records, this module merges several files by time into one
//! stream (ties: file order, then file position) and turns records into events:
//!
//! * actions `Q G I D C M F R X A P U UT B` → [`BlockAction`]s; `ABORT`, `DRV_DATA` and
//!   `SLEEPRQ` are counted (`blktrace_unmodeled_action`), unknown codes too
//!   (`blktrace_unknown_action`);
//! * notes: `BLK_TN_PROCESS` names a pid (the `comm` of its later events, except `C`, `R`,
//!   `A` and `m`, where blkparse prints the error / nothing), `BLK_TN_TIMESTAMP` is the wall
//!   clock at the start (not an event), `BLK_TN_MESSAGE` → [`BlockAction::Message`];
//! * time stays the kernel's ns (blkparse prints it relative to the first record).
//!
//! One reader covers a recording's files: [`expand_path`] turns a directory (every
//! `*.blktrace.N` in it), a `DEV` prefix (`loop0`, `loop0.blktrace`, `loop0.blktrace.`) or
//! one per-CPU file (as `blkparse -i` does) into the list of per-CPU files, which
//! [`crate::open`] then reads as one input; [`one_per_recording`] keeps a recording named
//! several times from being read twice. Spans are byte offsets inside the file of the
//! record's CPU. When the file numbers leave a CPU out (`sda.blktrace.1` without `.0`) the
//! input records only some CPUs (`TraceMeta::cpus_recorded`).
//!
//! Errors: a truncated record is fatal ([`ReadError`] with the file and the record's
//! offset); garbage between records is skipped to the next magic and counted
//! (`blktrace_garbage`).

pub mod lean;
pub mod record;
pub mod stream;

use std::path::Path;

use rustc_hash::FxHashMap;
use stallscope_model::{
    BlockAction, Comm, CpuCoverage, DataQuality, Event, EventKind, InputFormat, Problem, Span,
    SpanPos, TraceMeta,
};

use crate::blktrace::record::{carries_comm, decode, Decoded, SkipReason};
use crate::blktrace::stream::{RawRecord, RecordStream};
use crate::{EventReader, Input, ReadError};

/// Reader of one or more blktrace per-CPU files, merged by time.
pub struct BlktraceReader {
    meta: TraceMeta,
    dq: DataQuality,
    streams: Vec<RecordStream>,
    pending: Vec<Option<RawRecord>>,
    primed: bool,
    names: FxHashMap<u32, Comm>,
    index: u16,
    total_bytes: Option<u64>,
    /// Garbage already reported per stream (resyncs, bytes).
    garbage_seen: Vec<(u64, u64)>,
    seen_actions: [bool; 14],
    failed: bool,
}

fn action_slot(a: BlockAction) -> usize {
    match a {
        BlockAction::Queue => 0,
        BlockAction::GetRq => 1,
        BlockAction::Insert => 2,
        BlockAction::Issue => 3,
        BlockAction::Complete => 4,
        BlockAction::BackMerge => 5,
        BlockAction::FrontMerge => 6,
        BlockAction::Requeue => 7,
        BlockAction::Split => 8,
        BlockAction::Remap => 9,
        BlockAction::Plug => 10,
        BlockAction::Unplug => 11,
        BlockAction::Bounce => 12,
        BlockAction::Message => 13,
    }
}

impl BlktraceReader {
    /// Reads one opened input (one per-CPU file) as input number `index`.
    pub fn open(input: Input, index: u16) -> Result<BlktraceReader, ReadError> {
        let total = if input.compression.is_none() && input.path != "-" {
            std::fs::metadata(&input.path).ok().map(|m| m.len())
        } else {
            None
        };
        let mut meta = TraceMeta {
            path: input.path.clone(),
            format: Some(InputFormat::Blktrace),
            compression: input.compression.map(str::to_string),
            clock_is_ns: true,
            cpus_recorded: coverage_of_files([input.path.as_str()]),
            ..TraceMeta::default()
        };
        meta.path.clone_from(&input.path);
        let stream = RecordStream::new(input.path.clone(), input.into_reader());
        Ok(Self::from_streams(meta, vec![stream], index, total))
    }

    /// Reads the files `files` (each possibly compressed) as one input named `path`.
    pub fn open_files(
        path: &str,
        files: &[String],
        index: u16,
    ) -> Result<BlktraceReader, ReadError> {
        let mut streams = Vec::with_capacity(files.len());
        let mut total = Some(0u64);
        let mut compression = None;
        for f in files {
            let input = Input::open(f)?;
            if input.compression.is_some() {
                compression = input.compression.map(str::to_string);
                total = None;
            } else if let (Some(t), Ok(m)) = (total, std::fs::metadata(f)) {
                total = Some(t + m.len());
            }
            streams.push(RecordStream::new(f.clone(), input.into_reader()));
        }
        let meta = TraceMeta {
            path: path.to_string(),
            format: Some(InputFormat::Blktrace),
            compression,
            clock_is_ns: true,
            cpus_recorded: coverage_of_files(files.iter().map(String::as_str)),
            ..TraceMeta::default()
        };
        Ok(Self::from_streams(meta, streams, index, total))
    }

    fn from_streams(
        meta: TraceMeta,
        streams: Vec<RecordStream>,
        index: u16,
        total_bytes: Option<u64>,
    ) -> BlktraceReader {
        let n = streams.len();
        BlktraceReader {
            meta,
            dq: DataQuality::default(),
            streams,
            pending: (0..n).map(|_| None).collect(),
            primed: false,
            names: FxHashMap::default(),
            index,
            total_bytes,
            garbage_seen: vec![(0, 0); n],
            seen_actions: [false; 14],
            failed: false,
        }
    }

    /// Reads the next record of stream `i` into its pending slot.
    fn refill(&mut self, i: usize) -> Result<(), ReadError> {
        let rec = self.streams[i].next_record()?;
        let g = &self.streams[i].garbage;
        let (resyncs, bytes) = self.garbage_seen[i];
        if g.resyncs > resyncs {
            let path = &self.streams[i].path;
            let first = g.first_offset.unwrap_or(0);
            let skipped = g.bytes - bytes;
            self.dq
                .add(Problem::BlktraceGarbage, g.resyncs - resyncs, || {
                    format!("{path}: offset {first:#x}: {skipped} bytes skipped")
                });
            self.garbage_seen[i] = (g.resyncs, g.bytes);
        }
        self.pending[i] = rec;
        Ok(())
    }

    /// The stream whose pending record comes first (time, then stream order).
    fn earliest(&self) -> Option<usize> {
        let mut best: Option<(u64, usize)> = None;
        for (i, p) in self.pending.iter().enumerate() {
            if let Some(r) = p {
                if best.is_none_or(|(t, _)| r.header.time < t) {
                    best = Some((r.header.time, i));
                }
            }
        }
        best.map(|(_, i)| i)
    }

    fn skip(&mut self, reason: SkipReason, rec: &RawRecord, path: &str) {
        let problem = match reason {
            SkipReason::Unmodeled => Problem::BlktraceUnmodeledAction,
            SkipReason::UnknownAction => Problem::BlktraceUnknownAction,
            SkipReason::UnknownNotify => Problem::BlktraceUnknownNotify,
            SkipReason::ShortPayload => Problem::BlktraceShortPayload,
        };
        let (off, action, len) = (rec.offset, rec.header.action, rec.header.pdu_len);
        self.dq.add(problem, 1, || {
            format!("{path}: offset {off:#x}: action {action:#010x}, pdu_len {len}")
        });
    }

    /// Turns a record into an event (or bookkeeping), `None` when it is not an event.
    fn convert(&mut self, rec: RawRecord, stream: usize) -> Option<Event> {
        let endian = self.streams[stream]
            .endian()
            .unwrap_or(record::Endian::Little);
        let h = rec.header;
        match decode(&h, &rec.pdu, endian) {
            Decoded::Event(mut ev) => {
                if carries_comm(ev.action) {
                    ev.comm = self.names.get(&h.pid).copied();
                }
                let slot = action_slot(ev.action);
                if !self.seen_actions[slot] {
                    self.seen_actions[slot] = true;
                    self.meta
                        .declared_events
                        .push(format!("block:{}", ev.action.tracepoint()));
                }
                Some(Event {
                    ts: h.time,
                    cpu: h.cpu,
                    pid: i32::try_from(h.pid).unwrap_or(-1),
                    span: Span::new(self.index, SpanPos::Byte(rec.offset)),
                    kind: EventKind::Block(Box::new(ev)),
                    callchain: None,
                })
            }
            Decoded::Process(comm) => {
                self.names.insert(h.pid, comm);
                None
            }
            Decoded::Timestamp(..) => None,
            Decoded::Skip(reason) => {
                let path = self.streams[stream].path.clone();
                self.skip(reason, &rec, &path);
                None
            }
        }
    }
}

impl EventReader for BlktraceReader {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        if self.failed {
            return Ok(None);
        }
        if !self.primed {
            self.primed = true;
            for i in 0..self.streams.len() {
                if let Err(e) = self.refill(i) {
                    self.failed = true;
                    return Err(e);
                }
            }
        }
        while let Some(i) = self.earliest() {
            let Some(rec) = self.pending[i].take() else {
                break;
            };
            if let Err(e) = self.refill(i) {
                self.failed = true;
                return Err(e);
            }
            if let Some(ev) = self.convert(rec, i) {
                return Ok(Some(ev));
            }
        }
        Ok(None)
    }

    fn quality(&self) -> &DataQuality {
        &self.dq
    }

    fn progress(&self) -> Option<(u64, u64)> {
        let done = self.streams.iter().map(|s| s.offset).sum();
        self.total_bytes.map(|t| (done, t))
    }
}

/// `name` without a compression suffix (`.gz`, `.zst`, `.xz`).
fn strip_compression(name: &str) -> &str {
    [".gz", ".zst", ".xz"]
        .iter()
        .find_map(|ext| name.strip_suffix(ext))
        .unwrap_or(name)
}

/// True when `name` looks like a per-CPU blktrace file (`DEV.blktrace.N`, optionally
/// compressed: `DEV.blktrace.N.zst`).
pub fn is_per_cpu_name(name: &str) -> bool {
    let name = strip_compression(name);
    match name.rfind(".blktrace.") {
        Some(i) => {
            let cpu = &name[i + ".blktrace.".len()..];
            !cpu.is_empty() && cpu.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

fn cpu_of(name: &str) -> u64 {
    strip_compression(name)
        .rsplit('.')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(u64::MAX)
}

/// The device of a per-CPU file name (`loop0` of `loop0.blktrace.1.zst`); `None` for any
/// other name. Files of one directory with the same device are one recording.
pub fn device_of(name: &str) -> Option<&str> {
    is_per_cpu_name(name).then(|| dev_of(name))
}

/// The device part of a per-CPU file name (`loop0` of `loop0.blktrace.1.zst`).
fn dev_of(name: &str) -> &str {
    let name = strip_compression(name);
    name.rfind(".blktrace.").map_or(name, |i| &name[..i])
}

/// Expands a directory, a `DEV` prefix or one per-CPU file to the per-CPU files of the
/// recording it stands for, sorted by name then CPU number; `Ok(None)` when `path` is
/// none of these (an ordinary file, `-`, or a name with no matching files).
///
/// * directory: every `*.blktrace.N` in it (compressed ones too: `*.blktrace.N.zst`);
/// * `DIR/loop0`, `DIR/loop0.blktrace`, `DIR/loop0.blktrace.` (when no such file exists):
///   every `DIR/loop0.blktrace.N`;
/// * `DIR/loop0.blktrace.N`: every `DIR/loop0.blktrace.M` — as `blkparse -i` reads every
///   CPU's file of the device it is given one of (a request queued on one CPU is often
///   dispatched and completed on another: one CPU's file alone loses those events).
pub fn expand_path(path: &str) -> Result<Option<Vec<String>>, ReadError> {
    if crate::is_stream(path) {
        return Ok(None);
    }
    let p = Path::new(path);
    let list = |dir: &Path| -> Result<Vec<(String, String)>, ReadError> {
        let rd = std::fs::read_dir(dir).map_err(|e| ReadError::io(path, &e))?;
        let mut out = Vec::new();
        for entry in rd.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_per_cpu_name(&name) {
                out.push((name, entry.path().to_string_lossy().into_owned()));
            }
        }
        Ok(out)
    };
    let parent_of = |p: &Path| match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => Path::new(".").to_path_buf(),
    };
    let mut found = if p.is_dir() {
        list(p)?
    } else if p.exists() {
        let name = p
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !p.is_file() || !is_per_cpu_name(&name) {
            return Ok(None);
        }
        let dev = dev_of(&name).to_string();
        list(&parent_of(p))?
            .into_iter()
            .filter(|(n, _)| dev_of(n) == dev)
            .collect()
    } else {
        let base = p
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if base.is_empty() {
            return Ok(None);
        }
        let dir = parent_of(p);
        if !dir.is_dir() {
            return Ok(None);
        }
        let stem = base
            .trim_end_matches('.')
            .trim_end_matches(".blktrace")
            .to_string();
        list(&dir)?
            .into_iter()
            .filter(|(name, _)| dev_of(name) == stem)
            .collect()
    };
    if found.is_empty() {
        return Ok(None);
    }
    found.sort_by(|a, b| {
        dev_of(&a.0)
            .cmp(dev_of(&b.0))
            .then(cpu_of(&a.0).cmp(&cpu_of(&b.0)))
    });
    Ok(Some(found.into_iter().map(|(_, p)| p).collect()))
}

/// `paths` with each blktrace recording once: a path whose per-CPU files
/// ([`expand_path`]) are those of an earlier path (`sda.blktrace.0 sda.blktrace.1`, or a
/// directory and one of its files) is left out — read twice, every request would be
/// doubled. Other paths are kept as given.
pub fn one_per_recording(paths: &[String]) -> Result<Vec<String>, ReadError> {
    let mut seen: Vec<Vec<String>> = Vec::new();
    let mut out = Vec::with_capacity(paths.len());
    for p in paths {
        if let Some(mut files) = expand_path(p)? {
            for f in &mut files {
                *f = std::fs::canonicalize(&*f)
                    .map_or_else(|_| f.clone(), |c| c.to_string_lossy().into_owned());
            }
            if seen.contains(&files) {
                continue;
            }
            seen.push(files);
        }
        out.push(p.clone());
    }
    Ok(out)
}

/// The CPUs that per-CPU files named `names` record: [`CpuCoverage::Only`] when their
/// numbers leave a CPU out below the highest (`sda.blktrace.1` without `.0`: the
/// requests issued or completed on CPU 0 are missing), otherwise every CPU (nothing says
/// the machine had more).
fn coverage_of_files<'a>(names: impl IntoIterator<Item = &'a str>) -> CpuCoverage {
    let mut cpus = Vec::new();
    for name in names {
        let base = Path::new(name)
            .file_name()
            .map_or_else(|| name.into(), |s| s.to_string_lossy());
        if !is_per_cpu_name(&base) {
            return CpuCoverage::All;
        }
        match u32::try_from(cpu_of(&base)) {
            Ok(c) => cpus.push(c),
            Err(_) => return CpuCoverage::All,
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    let complete = cpus.iter().enumerate().all(|(i, &c)| c as usize == i);
    match complete || cpus.is_empty() {
        true => CpuCoverage::All,
        false => CpuCoverage::Only(cpus),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_cpu_names() {
        assert!(is_per_cpu_name("loop0.blktrace.0"));
        assert!(is_per_cpu_name("sda.blktrace.12"));
        assert!(!is_per_cpu_name("sda.blktrace."));
        assert!(is_per_cpu_name("sda.blktrace.1.gz"));
        assert!(is_per_cpu_name("sda.blktrace.1.zst"));
        assert!(!is_per_cpu_name("sda.blktrace.1.txt"));
        assert_eq!(dev_of("my.dev.blktrace.3.xz"), "my.dev");
        assert_eq!(cpu_of("my.dev.blktrace.3.xz"), 3);
        assert!(!is_per_cpu_name("trace.dat"));
    }

    #[test]
    fn coverage_from_file_numbers() {
        assert_eq!(
            coverage_of_files(["d/sda.blktrace.0", "d/sda.blktrace.1.zst"]),
            CpuCoverage::All
        );
        assert_eq!(coverage_of_files(["sda.blktrace.0"]), CpuCoverage::All);
        assert_eq!(
            coverage_of_files(["x/sda.blktrace.1"]),
            CpuCoverage::Only(vec![1])
        );
        assert_eq!(
            coverage_of_files(["sda.blktrace.0", "sda.blktrace.2"]),
            CpuCoverage::Only(vec![0, 2])
        );
        assert_eq!(coverage_of_files(["-"]), CpuCoverage::All);
    }

    /// One per-CPU file stands for its recording; named again (by another file, the
    /// directory or the prefix) the recording is read once.
    #[test]
    fn a_per_cpu_file_stands_for_its_recording() {
        let dir = format!("{}/../../fixtures/block/loop0", env!("CARGO_MANIFEST_DIR"));
        let one = format!("{dir}/loop0.blktrace.1");
        let files = expand_path(&one).expect("expand").expect("per-CPU file");
        assert_eq!(files.len(), 2, "{files:?}");
        assert!(files[0].ends_with("loop0.blktrace.0"), "{files:?}");
        let zero = format!("{dir}/loop0.blktrace.0");
        let kept = one_per_recording(&[zero.clone(), one, dir.clone(), format!("{dir}/loop0")])
            .expect("paths");
        assert_eq!(kept, vec![zero], "read once");
    }
}
