//! trace-cmd `trace.dat` reader, versions 6 and 7 (formats.md §3, §4; ring buffer §2).
//!
//! ```text
//! 17 08 44 "tracing" "6\0"|"7\0" endian long_size page_size
//! v6: tracing-data blob (formats, printk, cmdlines) · u32 cpus · options · flyrecord table
//! v7: compression name/version · OPTIONS chain → metadata sections + BUFFER option
//! CPU data: per CPU, raw ring-buffer sub-buffers (v7: optionally zstd/zlib chunks)
//! ```
//! `header` reads the metadata into a `header::FileInfo`; `options` interprets the
//! options (clock, UNAME, VERSION, CPUCOUNT, OFFSET/DATE, TSC2NSEC, CPUSTAT, BUFFER, the
//! stallscope system context); `cpu_stream` decodes one CPU's sub-buffers through
//! [`crate::ringbuf`] and the shared [`crate::tracefs_format`] decoders (scheduler events
//! native, the rest generic, context pid = `common_pid`, span = byte offset of the record);
//! `merge` runs the CPUs on worker threads and merges them by timestamp, feeding
//! `sink` (data quality, event names seen, lost-event bookkeeping).
//!
//! What becomes metadata: TRACECLOCK → `clock` (`clock_is_ns` false for `counter`,
//! `x86-tsc`, `uptime` unless TSC2NSEC converts), UNAME → `kernel_release`/`hostname`,
//! VERSION → `tool_version`, CPUCOUNT → `nr_cpus`, CPUSTAT `overrun` + `commit overrun` +
//! `dropped events` → `lost_per_cpu` (and, at the end of the data, the `lost_events`
//! counter for what the missed-events markers did not already report),
//! option [`OPTION_SYSTEM_CONTEXT`] → `system_context`. saved_cmdlines are not turned into
//! events (the records carry their own names). Latency-format files (text data) are
//! refused with a clear error. The top instance is read, or, when it holds no data (files
//! made by `trace-cmd extract -B NAME`), the first instance that does; the others are
//! listed as skipped.

mod compress;
mod cpu_stream;
mod header;
pub mod lean;
mod merge;
mod options;
mod sink;
mod source;

use std::sync::Arc;

use stallscope_model::{DataQuality, Event, InputFormat, Problem, TraceMeta};

use crate::ringbuf::PageLayout;
use crate::tracefs_format::{IntAccessor, PrevStateTable, TracepointDecoder};
use crate::{EventReader, Input, ReadError};

use cpu_stream::{CpuStream, EventDecoder, Tables, TsAdjust};
use header::FileInfo;
use merge::Merger;
use sink::Sink;
use source::Source;

/// trace.dat option id under which `stallscope record` stores its
/// [`stallscope_model::SystemContext`] as JSON (trace-cmd skips unknown option ids).
pub const OPTION_SYSTEM_CONTEXT: u16 = 0x5353;

/// Inputs with less CPU data than this are decoded in the caller's thread.
pub const THREADED_MIN_BYTES: u64 = 2 << 20;

/// Largest event id accepted (ids are the u16 `common_type`).
const MAX_EVENT_ID: u32 = u16::MAX as u32;

/// Reads trace.dat files. See the module docs.
pub struct TraceDatReader {
    merger: Merger,
    sink: Sink,
}

/// What opening a trace.dat establishes before any CPU data is read: shared by the
/// general reader and the lean one ([`lean`]), so both see the same metadata, decoders and
/// data-quality notes.
pub(crate) struct Prepared {
    /// Metadata (no declared events yet).
    pub meta: TraceMeta,
    /// Data-quality notes from the metadata.
    pub dq: DataQuality,
    /// Decoding tables shared by the CPU streams.
    pub tables: Tables,
    /// CPUs with data, sorted by CPU number (the merge's slot order).
    pub areas: Vec<options::CpuArea>,
    /// Bytes of CPU data.
    pub total: u64,
    /// The event formats, in the file's order.
    pub formats: Vec<crate::tracefs_format::EventFormat>,
    /// The CPU data is chunk-compressed (v7).
    pub cpu_data_compressed: bool,
}

/// Reads the metadata of `input` (already decompressed) and builds the decoding tables.
pub(crate) fn prepare(input: Input, index: u16) -> Result<Prepared, ReadError> {
    let path = input.path.clone();
    let wrapper = input.compression;
    let src = Source::from_input(input)?;
    let info = header::read_file_info(&src, &path)?;
    let mut dq = DataQuality::default();
    let meta = build_meta(&path, wrapper, &info, &mut dq);
    check_cpu_areas(&path, &src, &info)?;

    let endian = info.tracing.endian;
    let Some(hp) = info.tracing.header_page else {
        return Err(ReadError::at_byte(
            &path,
            0,
            "a header_page in the metadata",
            "none",
        ));
    };
    let layout = PageLayout {
        subbuf_size: info.subbuf_size as usize,
        ..PageLayout::from_header_page(&hp, endian).ok_or_else(|| {
            ReadError::at_byte(
                &path,
                0,
                "a header_page whose commit field is 4 or 8 bytes",
                format!("{} bytes", hp.commit_size),
            )
        })?
    };
    if layout.subbuf_size <= layout.data_offset {
        return Err(ReadError::at_byte(
            &path,
            0,
            "a sub-buffer size larger than its header",
            format!("{} bytes", layout.subbuf_size),
        ));
    }
    let (decoders, type_field) = build_decoders(&info, &meta, &mut dq);
    let adjust = TsAdjust {
        tsc: info.options.tsc2nsec.map(|(m, s, _)| (m, s)),
        offset: info.options.ts_offset,
    };
    let total: u64 = info.cpus.iter().map(|c| c.size).sum();
    let mut areas = info.cpus.clone();
    areas.sort_by_key(|a| a.cpu);
    areas.retain(|a| a.size > 0);
    let tables = Tables {
        path: path.clone(),
        index,
        src,
        layout,
        decoders,
        type_field,
        adjust,
        codec: if info.cpu_data_compressed {
            info.codec
        } else {
            None
        },
    };
    Ok(Prepared {
        meta,
        dq,
        tables,
        areas,
        total,
        formats: info.tracing.events,
        cpu_data_compressed: info.cpu_data_compressed,
    })
}

impl TraceDatReader {
    /// Opens `input` (already decompressed) as input number `index`.
    pub fn open(input: Input, index: u16) -> Result<Self, ReadError> {
        Self::open_with_threads(input, index, None)
    }

    /// [`TraceDatReader::open`] decoding on `threads` worker threads (0: in the caller's
    /// thread); `None` picks by input size and cores. The events and data quality are the
    /// same whatever the choice (tests compare them).
    pub fn open_with_threads(
        input: Input,
        index: u16,
        threads: Option<usize>,
    ) -> Result<Self, ReadError> {
        let p = prepare(input, index)?;
        let path = p.tables.path.clone();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = match threads {
            Some(t) => t.min(p.areas.len()),
            None if p.total < THREADED_MIN_BYTES || cores < 2 => 0,
            None => cores.min(p.areas.len()),
        };
        let tables = Arc::new(p.tables);
        let streams = p
            .areas
            .into_iter()
            .map(|a| CpuStream::new(Arc::clone(&tables), a))
            .collect();
        Ok(TraceDatReader {
            merger: Merger::new(&path, streams, threads),
            sink: Sink::new(p.meta, p.dq),
        })
    }
}

/// Every CPU's plain data must lie inside the file (trace-cmd refuses truncated files too).
fn check_cpu_areas(path: &str, src: &Source, info: &FileInfo) -> Result<(), ReadError> {
    for a in &info.cpus {
        let end = cpu_stream::data_end(a, info.cpu_data_compressed);
        if a.size > 0 && end > src.len() {
            return Err(ReadError::at_byte(
                path,
                src.len(),
                format!(
                    "CPU {}'s data at offset {:#x}..{:#x} (the file looks truncated)",
                    a.cpu, a.offset, end
                ),
                format!("the end of the file at offset {:#x}", src.len()),
            ));
        }
    }
    Ok(())
}

fn build_meta(
    path: &str,
    wrapper: Option<&str>,
    info: &FileInfo,
    dq: &mut DataQuality,
) -> TraceMeta {
    let o = &info.options;
    let mut meta = TraceMeta {
        path: path.to_string(),
        format: Some(InputFormat::TraceDat),
        compression: wrapper
            .map(str::to_string)
            .or_else(|| info.compression.clone()),
        clock: o.clock.clone(),
        clock_is_ns: true,
        ..TraceMeta::default()
    };
    if let Some(u) = &o.uname {
        let mut words = u.split_whitespace();
        let _sysname = words.next();
        meta.hostname = words.next().map(str::to_string);
        meta.kernel_release = words.next().map(str::to_string);
    }
    meta.tool_version = Some(match &o.version {
        Some(v) => format!("trace-cmd {v} (trace.dat v{})", info.version),
        None => format!("trace-cmd (trace.dat v{})", info.version),
    });
    meta.nr_cpus = o.cpu_count.or(u32::try_from(info.cpus.len()).ok());
    // A CPU whose buffer holds nothing was not recorded (`stallscope record --cpus`,
    // `trace-cmd record -M`) or did nothing at all: either way no event shows a task there
    // (a task woken onto a recorded CPU is switched in there, a record in its buffer), so
    // a task sent there is in no known state.
    let recorded: Vec<u32> = info
        .cpus
        .iter()
        .filter(|a| a.size > 0)
        .map(|a| a.cpu)
        .collect();
    if !recorded.is_empty() && recorded.len() < info.cpus.len() {
        let mut recorded = recorded;
        recorded.sort_unstable();
        recorded.dedup();
        meta.cpus_recorded = stallscope_model::CpuCoverage::Only(recorded);
    }
    if !info.tracing.kallsyms.is_empty() {
        meta.kallsyms = Some(Arc::from(info.tracing.kallsyms.as_str()));
    }
    if o.tsc2nsec.is_none() {
        if let Some(c) = &o.clock {
            // The kernel's raw-count clocks (trace_clocks[].in_ns == 0).
            meta.clock_is_ns = !matches!(c.as_str(), "counter" | "x86-tsc" | "uptime");
        }
    }
    if !meta.clock_is_ns {
        dq.add(Problem::TimestampsNotNs, 1, || {
            format!("{path}: trace clock {}", o.clock.as_deref().unwrap_or("?"))
        });
    }
    // Only the statistics of the buffer whose data is read.
    let own_stats = o.cpustats.iter().filter(|(inst, _)| *inst == info.instance);
    for (_, text) in own_stats {
        // Counted in `lost_events` at the end of the data, minus what the sub-buffers'
        // missed-events markers already reported for that CPU (the same losses).
        if let Some((cpu, lost)) = options::cpustat_lost(text) {
            meta.lost_per_cpu.push((cpu, lost));
        }
    }
    if let Some(json) = &o.system_context {
        match serde_json::from_slice(json) {
            Ok(ctx) => {
                let ctx: stallscope_model::SystemContext = ctx;
                if let Some(why) = &ctx.recording_cut {
                    dq.add(Problem::RecordingCut, 1, || format!("{path}: {why}"));
                }
                meta.system_context = Some(ctx)
            }
            Err(e) => dq.add(Problem::TracedatBadSystemContext, 1, || {
                format!("{path}: {e}")
            }),
        }
    }
    for (id, at, why) in &o.malformed {
        dq.add(Problem::TracedatBadOption, 1, || {
            format!("{path}: option {id} at offset {at:#x}: {why}")
        });
    }
    if !info.instance.is_empty() {
        let name = &info.instance;
        dq.add(Problem::TracedatInstanceRead, 1, || {
            format!("{path}: instance `{name}`")
        });
    }
    for name in &info.other_instances {
        dq.add(Problem::TracedatInstancesSkipped, 1, || {
            format!("{path}: instance `{name}`")
        });
    }
    for (system, why) in &info.tracing.bad_formats {
        dq.add(Problem::TracefsBadFormat, 1, || format!("{system}: {why}"));
    }
    meta
}

/// What building the decoder of one format gives: the decoder (`None`: id out of range)
/// and the data-quality notes it raises, in the order they are recorded.
struct BuiltDecoder {
    decoder: Option<EventDecoder>,
    notes: Vec<DecoderNote>,
}

/// A data-quality note raised while building one decoder.
enum DecoderNote {
    /// `tracefs_bad_format`: the id does not fit `common_type`.
    IdTooLarge(String),
    /// `tracefs_format_fallback`: a scheduler event decoded as generic, and why.
    Fallback(String),
    /// `prev_state_table_fallback`: where the built-in prev_state table came from.
    PrevStateTable(String),
}

/// One decoder per event id, and the `common_type` accessor. The decoders are built on
/// several threads when there are many formats (the notes are recorded in the formats'
/// order all the same).
fn build_decoders(
    info: &FileInfo,
    meta: &TraceMeta,
    dq: &mut DataQuality,
) -> (Vec<Option<EventDecoder>>, Option<IntAccessor>) {
    let td = &info.tracing;
    let fallback = PrevStateTable::for_kernel_release(meta.kernel_release.as_deref());
    let max_id = td
        .events
        .iter()
        .map(|f| f.id)
        .filter(|&id| id <= MAX_EVENT_ID)
        .max()
        .unwrap_or(0);
    let mut decoders: Vec<Option<EventDecoder>> = Vec::new();
    decoders.resize_with(max_id as usize + 1, || None);
    // The first format (with a usable id) whose `common_type` is readable.
    let type_field = td
        .events
        .iter()
        .filter(|f| f.id <= MAX_EVENT_ID)
        .find_map(|f| {
            f.field("common_type")
                .and_then(|c| IntAccessor::new(c, td.endian))
        });
    let threads = crate::tracefs_format::threads_for_formats(td.events.len());
    let printk = std::sync::Arc::new(crate::tracefs_format::PrintkFormats::parse(
        &td.printk_formats,
    ));
    let built = crate::tracefs_format::map_in_parts(
        &td.events,
        threads,
        |f| f.fields.len() + f.common_fields.len() + 1,
        |part| {
            part.iter()
                .map(|f| {
                    let mut b = build_decoder(f, td.endian, &fallback);
                    if let Some(d) = &mut b.decoder {
                        d.decoder.set_trace_context(td.long_size, &printk);
                    }
                    b
                })
                .collect()
        },
    );
    for (f, b) in td.events.iter().zip(built) {
        for note in b.notes {
            match note {
                DecoderNote::IdTooLarge(why) => dq.add(Problem::TracefsBadFormat, 1, || why),
                DecoderNote::Fallback(why) => dq.add(Problem::TracefsFormatFallback, 1, || why),
                DecoderNote::PrevStateTable(src) => {
                    dq.add(Problem::PrevStateTableFallback, 1, || src)
                }
            }
        }
        if let Some(d) = b.decoder {
            decoders[f.id as usize] = Some(d);
        }
    }
    (decoders, type_field)
}

/// The decoder of one format and its notes (see [`build_decoders`]).
fn build_decoder(
    f: &crate::tracefs_format::EventFormat,
    endian: crate::tracefs_format::Endian,
    fallback: &PrevStateTable,
) -> BuiltDecoder {
    if f.id > MAX_EVENT_ID {
        return BuiltDecoder {
            decoder: None,
            notes: vec![DecoderNote::IdTooLarge(format!(
                "{}: id {} does not fit common_type",
                f.full_name(),
                f.id
            ))],
        };
    }
    let mut notes = Vec::new();
    let (d, why) = TracepointDecoder::new(f, endian, fallback);
    if let Some(why) = why {
        notes.push(DecoderNote::Fallback(why));
    }
    if let Some(src) = d.prev_state_source().filter(|s| !s.contains("print fmt")) {
        notes.push(DecoderNote::PrevStateTable(src.to_string()));
    }
    BuiltDecoder {
        decoder: Some(EventDecoder {
            decoder: d,
            pid: f
                .field("common_pid")
                .and_then(|p| IntAccessor::new(p, endian)),
            name: f.full_name(),
        }),
        notes,
    }
}

impl EventReader for TraceDatReader {
    fn meta(&self) -> &TraceMeta {
        &self.sink.meta
    }

    #[inline]
    fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        self.merger.next(&mut self.sink)
    }

    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool, ReadError> {
        out.clear();
        self.merger
            .next_batch(&mut self.sink, out, crate::DEFAULT_BATCH)?;
        Ok(!out.is_empty())
    }

    fn quality(&self) -> &DataQuality {
        &self.sink.dq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Open-time measurement on the file named by `STALLSCOPE_OPEN_BENCH` (a big trace.dat):
    /// `cargo test --release -p stallscope-read --lib open_time -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn open_time() {
        let Ok(path) = std::env::var("STALLSCOPE_OPEN_BENCH") else {
            return;
        };
        let mut times = Vec::new();
        let mut info_times = Vec::new();
        for _ in 0..30 {
            let t0 = std::time::Instant::now();
            let src = Source::from_input(Input::open(&path).unwrap()).unwrap();
            let info = header::read_file_info(&src, &path).unwrap();
            info_times.push(t0.elapsed());
            drop(info);
            let t0 = std::time::Instant::now();
            let p = prepare(Input::open(&path).unwrap(), 0).unwrap();
            times.push(t0.elapsed());
            assert!(!p.formats.is_empty());
        }
        times.sort();
        info_times.sort();
        eprintln!(
            "read_file_info min {:?} median {:?}; prepare min {:?} median {:?}",
            info_times[0], info_times[15], times[0], times[15]
        );
    }
}
