//! `stallscope iolat`: btt's block I/O phases (Q2Q Q2G G2I Q2M I2D D2C Q2C, plus M2D and
//! Q2D) with N / min / avg / max per device, per process or per operation, log2 latency
//! histograms and per-second IOPS / throughput. Definitions: `stallscope_timeline::iolat`
//! and `docs/iolat.md`.
//!
//! Text output follows btt's `-A` layout (seconds with 9 decimals, devices as `(  7,  0)`),
//! so the tables can be compared line by line:
//!
//! ```text
//! ==================== Per Device ====================
//!
//!             Q2Q           MIN           AVG           MAX           N
//! --------------- ------------- ------------- ------------- -----------
//! (  7,  0)         0.000000544   0.005578401   0.160759294          33
//! ```
//!
//! Inputs that are all blktrace binary files take a lean path ([`lean`]): records are
//! decoded straight into a stack `BlockEvent` and fed to the tracker, with no `Event` (and no
//! allocation) per record. Anything unusual in them (garbage between records, a truncated
//! record, an action stallscope does not model) makes the command start over on the general
//! path, so errors and data-quality counts are the reader's.
//!
//! JSON (`--format json`), schema `stallscope.iolat/1`:
//! `{"schema", "by", "counts": {bios, requests, flushes, requeued, partially_completed,
//! beyond_rate_window}, "groups": [GROUP], "all": GROUP, "rates": [{"device", "seconds":
//! [{second, ios, read_ios, write_ios, bytes, read_bytes, write_bytes}]}], "data_quality"}`
//! where GROUP is `{"key", "remapper"?, "bios", "phases": [{phase, n, min_ns, avg_ns, max_ns,
//! total_ns}], "histograms": [{phase, buckets: [{low_us, high_us, count}]}]}` and `groups`
//! holds the rows selected by `--by`.

use std::io::Write;

use clap::Args;
use serde::Serialize;
use stallscope::model::DataQuality;
use stallscope::timeline::block::BlockTracker;
use stallscope::timeline::iolat::{
    DeviceRates, GroupBy, GroupReport, Iolat, IolatReport, RequestCounts, PHASES,
};

use crate::common::{write_quality_text, CliError, InputArgs, OutputFormat};

/// Arguments of `stallscope iolat`.
#[derive(Args, Debug)]
#[command(
    after_help = "Phases as btt defines them: Q = bio queued, G = request allocated, \
I = inserted into the I/O scheduler, M = merged into a request, D = dispatched to the driver, \
C = completed. btt measures every queued bio, so a request of 16 merged bios gives 16 D2C and \
Q2C samples, each counted for the task that queued that bio.\n\n\
Inputs: blktrace per-CPU files (DEV.blktrace.N, or the DEV prefix, or their directory), \
blkparse text, or block:* tracepoints in perf.data, trace.dat or ftrace text.\n\n\
Examples:\n  stallscope iolat sda.blktrace.0 sda.blktrace.1\n  stallscope iolat sda          \
# every sda.blktrace.N\n  stallscope iolat --by process trace.dat\n  \
blkparse -i sda | stallscope iolat -\n  stallscope iolat --format json perf.data | jq '.groups[0].phases'"
)]
pub struct IolatArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Rows per device, per process (the task that queued each bio) or per operation.
    #[arg(long, value_name = "device|process|op", default_value = "device")]
    by: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
    /// Read blktrace files through the general reader even when the lean path could (tests).
    #[arg(long, hide = true)]
    general_path: bool,
}

#[derive(Serialize)]
struct IolatJson<'a> {
    schema: &'static str,
    by: GroupBy,
    counts: &'a RequestCounts,
    groups: &'a [GroupReport],
    all: &'a GroupReport,
    rates: &'a [DeviceRates],
    data_quality: &'a DataQuality,
}

/// Seconds with 9 decimals from integer ns (btt's `%13.9f`).
fn secs9(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// btt's device label `(  7,  0)`; other keys as they are.
fn label(by: GroupBy, key: &str) -> String {
    if by == GroupBy::Device {
        if let Some((ma, mi)) = key.split_once(',') {
            return format!("({ma:>3},{mi:>3})");
        }
    }
    key.to_string()
}

fn groups_of(report: &IolatReport, by: GroupBy) -> &[GroupReport] {
    match by {
        GroupBy::Device => &report.devices,
        GroupBy::Process => &report.processes,
        GroupBy::Op => &report.ops,
    }
}

fn write_table_header(out: &mut dyn Write, title: &str) -> std::io::Result<()> {
    writeln!(
        out,
        "{title:>15} {:>13} {:>13} {:>13} {:>11}",
        "MIN", "AVG", "MAX", "N"
    )?;
    writeln!(
        out,
        "--------------- ------------- ------------- ------------- -----------"
    )
}

fn write_row(out: &mut dyn Write, name: &str, g: &GroupReport, phase: &str) -> std::io::Result<()> {
    if let Some(r) = g.phases.iter().find(|r| r.phase == phase) {
        writeln!(
            out,
            "{name:<15} {:>13} {:>13} {:>13} {:>11}",
            secs9(r.min_ns),
            secs9(r.avg_ns),
            secs9(r.max_ns),
            r.n
        )?;
    }
    Ok(())
}

fn write_text(
    out: &mut dyn Write,
    report: &IolatReport,
    by: GroupBy,
    dq: &DataQuality,
) -> std::io::Result<()> {
    let c = &report.counts;
    writeln!(
        out,
        "stallscope iolat: {} bios queued, {} requests and {} flushes completed ({} requeued, {} completed in parts)\n",
        c.bios, c.requests, c.flushes, c.requeued, c.partially_completed
    )?;
    let groups = groups_of(report, by);
    let title = match by {
        GroupBy::Device => "Per Device",
        GroupBy::Process => "Per Process",
        GroupBy::Op => "Per Operation",
    };
    writeln!(out, "==================== {title} ====================\n")?;
    for phase in PHASES {
        write_table_header(out, phase)?;
        for g in groups {
            write_row(out, &label(by, &g.key), g, phase)?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "==================== All Devices ====================\n"
    )?;
    write_table_header(out, "ALL")?;
    for phase in PHASES {
        write_row(out, phase, &report.all, phase)?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "==================== Latency Histograms (log2 usecs) ====================\n"
    )?;
    for g in groups {
        for h in &g.histograms {
            let max = h.buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1);
            writeln!(out, "{} {}", label(by, &g.key), h.phase)?;
            writeln!(out, "{:>19} : {:<9} distribution", "usecs", "count")?;
            for b in &h.buckets {
                let stars = (b.count * 40).div_ceil(max) as usize;
                let high = if b.high_us == u64::MAX {
                    "inf".to_string()
                } else {
                    b.high_us.to_string()
                };
                writeln!(
                    out,
                    "{:>8} -> {:<8}: {:<9}|{:<40}|",
                    b.low_us,
                    high,
                    b.count,
                    "*".repeat(stars)
                )?;
            }
            writeln!(out)?;
        }
    }
    writeln!(
        out,
        "==================== Per Second ====================\n"
    )?;
    writeln!(
        out,
        "{:>10} | {:>8} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "DEV", "SECOND", "IOPS", "READ/s", "WRITE/s", "READ MB/s", "WRITE MB/s"
    )?;
    for d in &report.rates {
        for s in &d.seconds {
            writeln!(
                out,
                "{:>10} | {:>8} {:>9} {:>9} {:>9} {:>10} {:>10}",
                label(GroupBy::Device, &d.device),
                s.second,
                s.ios,
                s.read_ios,
                s.write_ios,
                mb(s.read_bytes),
                mb(s.write_bytes)
            )?;
        }
    }
    writeln!(out)?;
    write_quality_text(out, dq)
}

/// Bytes as MB (10^6) with 2 decimals, in integer arithmetic.
fn mb(bytes: u64) -> String {
    let centi = (bytes + 5_000) / 10_000;
    format!("{}.{:02}", centi / 100, centi % 100)
}

/// Runs the command.
pub fn run(args: &IolatArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let by = GroupBy::from_name(&args.by).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown --by {:?}; expected device, process or op",
            args.by
        ))
    })?;
    let lean_inputs = if args.general_path {
        None
    } else {
        lean::blktrace_inputs(&args.input)
    };
    let lean_result = match lean_inputs {
        Some(files) => lean::run(&files, by)?,
        None => None,
    };
    let (report, dq) = match lean_result {
        Some((iolat, tracker)) => (iolat.finish(), tracker.finish()),
        None => {
            let mut inputs = args.input.open()?;
            let mut tracker = BlockTracker::new();
            let mut iolat = Iolat::only(by);
            let mut batch = Vec::new();
            while inputs.next_batch(&mut batch)? {
                for ev in &batch {
                    tracker.process(ev, &mut iolat);
                }
            }
            let mut dq = inputs.quality();
            dq.merge(&tracker.finish());
            (iolat.finish(), dq)
        }
    };
    match args.format {
        OutputFormat::Text => write_text(out, &report, by, &dq)?,
        OutputFormat::Json => {
            serde_json::to_writer(
                &mut *out,
                &IolatJson {
                    schema: "stallscope.iolat/1",
                    by,
                    counts: &report.counts,
                    groups: groups_of(&report, by),
                    all: &report.all,
                    rates: &report.rates,
                    data_quality: &dq,
                },
            )?;
            out.write_all(b"\n")?;
        }
    }
    Ok(())
}

/// The lean path over blktrace binary files (see the module docs).
mod lean {
    use std::io::Read;

    use memmap2::Mmap;
    use stallscope::model::{BlockAction, BlockDev, BlockEvent, Comm, Span, SpanPos};
    use stallscope::read::blktrace::expand_path;
    use stallscope::read::blktrace::record::{
        carries_comm, decode, Decoded, Endian, Header, HEADER_LEN, VERSION,
    };
    use stallscope::read::input::Input;
    use stallscope::timeline::block::{BlockTracker, EventAt};
    use stallscope::timeline::iolat::{GroupBy, Iolat};
    use std::collections::HashMap;

    use crate::common::{CliError, InputArgs};

    /// The per-CPU files of every input (input index, path), when all inputs are blktrace
    /// binary; `None` sends the command down the general path.
    pub fn blktrace_inputs(args: &InputArgs) -> Option<Vec<(u16, String)>> {
        if args
            .input_format
            .as_deref()
            .is_some_and(|f| f != "blktrace")
        {
            return None;
        }
        let mut out = Vec::new();
        for (i, path) in args.files.iter().enumerate() {
            let index = u16::try_from(i).ok()?;
            match expand_path(path).ok()? {
                Some(files) => out.extend(files.into_iter().map(|f| (index, f))),
                None if path != "-" => {
                    let input = Input::open(path).ok()?;
                    let word: [u8; 4] = input.head.get(..4)?.try_into().ok()?;
                    Endian::detect(word)?;
                    out.push((index, path.clone()));
                }
                None => return None,
            }
        }
        (!out.is_empty()).then_some(out)
    }

    /// Where a per-CPU file's bytes come from.
    enum Source {
        /// A compressed file or a pipe: read into `Stream::buf`.
        Reader(Box<dyn Read + Send>),
        /// An uncompressed regular file, memory-mapped: records are parsed straight out of
        /// the mapping (no `read()` copy); pages are mapped ahead and dropped behind in
        /// [`WINDOW`] steps, so resident memory stays a few MiB.
        Mapped(Mmap),
    }

    /// One per-CPU file: its bytes and its next record, parsed in place.
    struct Stream {
        input: u16,
        source: Source,
        buf: Vec<u8>,
        /// Unconsumed bytes are `data()[start..end]`; the pending record starts at `start`.
        start: usize,
        end: usize,
        endian: Option<Endian>,
        /// File offset of `data()[start]`.
        offset: u64,
        /// Next record: header and its length in bytes (header + payload).
        next: Option<(Header, usize)>,
        /// Mapped source: bytes before this offset were dropped; bytes up to `mapped_to`
        /// were mapped ahead.
        dropped_to: usize,
        mapped_to: usize,
    }

    /// Why the lean path gives up (the general path then reads everything again).
    struct Unusual;

    /// Read buffer per file (reader source).
    const BUF_LEN: usize = 1 << 20;

    /// Mapped source: pages are populated and dropped in steps of this many bytes.
    const WINDOW: usize = 4 << 20;

    /// Maps a regular file read-only; `None` when mapping fails (then it is read instead).
    fn map_file(file: &std::fs::File) -> Option<Mmap> {
        // SAFETY: the mapping is read-only and private. If another process truncates the
        // file while it is read, touching the lost pages raises SIGBUS (as for perf); a
        // file changed in place only yields different (still bounds-checked) bytes.
        let map = unsafe { Mmap::map(file) }.ok()?;
        // A hint only: failure changes nothing.
        let _ = map.advise(memmap2::Advice::Sequential);
        Some(map)
    }

    /// How far ahead of the record being parsed the CPU is asked to load the file's bytes
    /// (a few records: the mapped pages are not in the cache yet).
    const PREFETCH_AHEAD: usize = 512;

    /// Asks the CPU to start loading `data[at]`'s cache line (a hint; nothing past the end).
    #[inline(always)]
    fn prefetch(data: &[u8], at: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(b) = data.get(at) {
            // SAFETY: a prefetch hint never faults and reads nothing architecturally; the
            // address is inside `data`, and SSE is part of the x86_64 baseline.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    (b as *const u8).cast::<i8>(),
                );
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (data, at);
    }

    impl Stream {
        fn open(input: u16, path: &str) -> Result<Stream, CliError> {
            let (source, buf, end) = match Input::open(path)?.into_file() {
                Ok(file) => match map_file(&file) {
                    Some(map) => {
                        let len = map.len();
                        (Source::Mapped(map), Vec::new(), len)
                    }
                    // `into_file` leaves the file at offset 0; mapping does not move it.
                    None => (Source::Reader(Box::new(file)), vec![0; BUF_LEN], 0),
                },
                Err(stream) => (Source::Reader(stream.into_reader()), vec![0; BUF_LEN], 0),
            };
            Ok(Stream {
                input,
                source,
                buf,
                start: 0,
                end,
                endian: None,
                offset: 0,
                next: None,
                dropped_to: 0,
                mapped_to: 0,
            })
        }

        /// The bytes `start..end` index into.
        #[inline]
        fn data(&self) -> &[u8] {
            match &self.source {
                Source::Mapped(map) => map,
                Source::Reader(_) => &self.buf,
            }
        }

        /// Makes at least `n` bytes available from `start`; false at a clean end of file.
        fn ensure(&mut self, n: usize) -> Result<bool, Unusual> {
            if self.end - self.start >= n {
                return Ok(true);
            }
            let reader = match &mut self.source {
                // The whole file is in view: what is not there is not in the file.
                Source::Mapped(_) => {
                    return if self.start == self.end {
                        Ok(false)
                    } else {
                        Err(Unusual)
                    };
                }
                Source::Reader(r) => r,
            };
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            while self.end < n {
                match reader.read(&mut self.buf[self.end..]) {
                    Ok(0) => break,
                    Ok(k) => self.end += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return Err(Unusual),
                }
            }
            match self.end {
                0 => Ok(false),
                e if e < n => Err(Unusual),
                _ => Ok(true),
            }
        }

        /// Mapped source: maps the next window ahead and drops the pages behind.
        #[cold]
        fn slide_window(&mut self) {
            let Source::Mapped(map) = &self.source else {
                return;
            };
            let len = map.len();
            let ahead = (self.start + 2 * WINDOW).min(len);
            if ahead > self.mapped_to {
                // Hints only: failure (older kernel) changes nothing.
                #[cfg(target_os = "linux")]
                let _ = map.advise_range(
                    memmap2::Advice::PopulateRead,
                    self.mapped_to,
                    ahead - self.mapped_to,
                );
                // At the end of the file there is nothing left to map ahead.
                self.mapped_to = if ahead == len { usize::MAX } else { ahead };
            }
            let behind = self.start & !(WINDOW - 1);
            if behind > self.dropped_to {
                // SAFETY: the mapping is private and never written, so dropping its pages
                // loses nothing: a later access reads them again from the file. Both ends
                // are multiples of WINDOW, hence page-aligned.
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        self.dropped_to,
                        behind - self.dropped_to,
                    )
                };
                self.dropped_to = behind;
            }
        }

        /// The pending record's payload.
        fn pdu(&self) -> &[u8] {
            match self.next {
                Some((_, len)) => &self.data()[self.start + HEADER_LEN..self.start + len],
                None => &[],
            }
        }

        /// Moves past the pending record and parses the next; `Err` on anything but a clean
        /// record or a clean end of file.
        #[inline]
        fn advance(&mut self) -> Result<(), Unusual> {
            if let Some((_, len)) = self.next.take() {
                self.start += len;
                self.offset += len as u64;
            }
            if self.start + WINDOW > self.mapped_to && matches!(self.source, Source::Mapped(_)) {
                self.slide_window();
            }
            if !self.ensure(HEADER_LEN)? {
                return Ok(());
            }
            prefetch(self.data(), self.start + PREFETCH_AHEAD);
            let h: &[u8; HEADER_LEN] = self.data()[self.start..self.start + HEADER_LEN]
                .try_into()
                .map_err(|_| Unusual)?;
            let (endian, version) = Endian::detect([h[0], h[1], h[2], h[3]]).ok_or(Unusual)?;
            if version != VERSION || self.endian.is_some_and(|e| e != endian) {
                return Err(Unusual);
            }
            let header = Header::parse(h, endian);
            self.endian = Some(endian);
            let len = HEADER_LEN + usize::from(header.pdu_len);
            if !self.ensure(len)? {
                return Err(Unusual);
            }
            self.next = Some((header, len));
            Ok(())
        }
    }

    /// `BLK_TC_PC` (SCSI passthrough) in the action word: `1 << 9` categories, shifted by
    /// `BLK_TC_SHIFT` (16), as in the kernel's blktrace_api.h.
    const TC_PC: u32 = 1 << 25;

    /// The action of a plain request record (Q M F G R D C I, not PC, not a notify), whose
    /// event carries no payload-derived field.
    fn request_action(h: &Header) -> Option<BlockAction> {
        if h.is_notify() || h.action & TC_PC != 0 {
            return None;
        }
        Some(match h.code() {
            1 => BlockAction::Queue,
            2 => BlockAction::BackMerge,
            3 => BlockAction::FrontMerge,
            4 => BlockAction::GetRq,
            6 => BlockAction::Requeue,
            7 => BlockAction::Issue,
            8 => BlockAction::Complete,
            12 => BlockAction::Insert,
            _ => return None,
        })
    }

    /// Reads every file, merged by time (ties: file order, as the reader does), into the
    /// tracker and the aggregator. `Ok(None)`: something unusual, use the general path.
    pub fn run(
        files: &[(u16, String)],
        by: GroupBy,
    ) -> Result<Option<(Iolat, BlockTracker)>, CliError> {
        let mut streams = Vec::with_capacity(files.len());
        for (input, path) in files {
            let mut s = Stream::open(*input, path)?;
            if s.advance().is_err() {
                return Ok(None);
            }
            streams.push(s);
        }
        let mut names: HashMap<(u16, u32), Comm> = HashMap::new();
        // The last name looked up: consecutive records mostly come from one task.
        let mut last_name: Option<((u16, u32), Option<Comm>)> = None;
        let mut tracker = BlockTracker::new();
        let mut iolat = Iolat::only(by);
        let mut fast = BlockEvent::new(BlockAction::Queue);
        loop {
            let mut best: Option<(u64, usize)> = None;
            for (i, s) in streams.iter().enumerate() {
                if let Some((h, _)) = &s.next {
                    if best.is_none_or(|(t, _)| h.time < t) {
                        best = Some((h.time, i));
                    }
                }
            }
            let Some((_, i)) = best else { break };
            let s = &mut streams[i];
            let Some((h, _)) = s.next else { break };
            let offset = s.offset;
            // INVARIANT: `next` is only set after `endian` was.
            let endian = s.endian.unwrap_or(Endian::Little);
            // Plugs and unplugs (a third of a typical trace) change no request: count them
            // without decoding (an unplug must carry its depth, else decode's verdict counts).
            if !h.is_notify()
                && (h.code() == 9 || (matches!(h.code(), 10 | 11) && h.payload(s.pdu()).len() >= 8))
            {
                tracker.count_untracked();
                if s.advance().is_err() {
                    return Ok(None);
                }
                continue;
            }
            // The request actions (no payload): fill one reused event in place instead of
            // building a new one (what `decode` does for them, minus PC requests).
            if let Some(action) = request_action(&h) {
                fast.action = action;
                fast.dev = Some(BlockDev(h.device));
                fast.sector = h.sector;
                fast.nr_sector = h.bytes >> 9;
                fast.rwbs = h.rwbs();
                fast.error = (action == BlockAction::Complete).then(|| i32::from(h.error as i16));
                fast.comm = None;
                if carries_comm(action) {
                    let key = (s.input, h.pid);
                    fast.comm = match last_name {
                        Some((k, c)) if k == key => c,
                        _ => {
                            let c = names.get(&key).copied();
                            last_name = Some((key, c));
                            c
                        }
                    };
                }
                let at = EventAt {
                    ts: h.time,
                    pid: i32::try_from(h.pid).unwrap_or(-1),
                    span: Span::new(s.input, SpanPos::Byte(offset)),
                };
                tracker.process_block(&at, &fast, &mut iolat);
                if s.advance().is_err() {
                    return Ok(None);
                }
                continue;
            }
            match decode(&h, s.pdu(), endian) {
                Decoded::Event(mut ev) => {
                    if carries_comm(ev.action) {
                        let key = (s.input, h.pid);
                        ev.comm = match last_name {
                            Some((k, c)) if k == key => c,
                            _ => {
                                let c = names.get(&key).copied();
                                last_name = Some((key, c));
                                c
                            }
                        };
                    }
                    let at = EventAt {
                        ts: h.time,
                        pid: i32::try_from(h.pid).unwrap_or(-1),
                        span: Span::new(s.input, SpanPos::Byte(offset)),
                    };
                    tracker.process_block(&at, &ev, &mut iolat);
                }
                Decoded::Process(comm) => {
                    names.insert((s.input, h.pid), comm);
                    last_name = None;
                }
                Decoded::Timestamp(..) => {}
                Decoded::Skip(_) => return Ok(None),
            }
            if s.advance().is_err() {
                return Ok(None);
            }
        }
        Ok(Some((iolat, tracker)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_labels_print_like_btt() {
        // btt prints "%13.9f" of seconds and "(%3d,%3d)" devices.
        assert_eq!(secs9(544), "0.000000544");
        assert_eq!(secs9(160_759_294), "0.160759294");
        assert_eq!(secs9(12_000_000_001), "12.000000001");
        assert_eq!(label(GroupBy::Device, "7,0"), "(  7,  0)");
        assert_eq!(label(GroupBy::Device, "259,12"), "(259, 12)");
        assert_eq!(label(GroupBy::Process, "dd"), "dd");
        assert_eq!(mb(1_234_567), "1.23");
        assert_eq!(mb(0), "0.00");
    }
}
