//! The lean blktrace path: per-CPU files (formats.md §8) parsed in place, merged by time, and
//! handed to a visitor one record at a time, with no `Event` and no allocation per record.
//!
//! Each file is a run of 48-byte `struct blk_io_trace` headers, each followed by `pdu_len`
//! payload bytes (layout in [`super::record`]):
//!
//! ```text
//! magic|version (u32) sequence (u32) time (u64) sector (u64) bytes (u32) action (u32)
//! pid (u32) device (u32) cpu (u32) error (u16) pdu_len (u16) | payload[pdu_len]
//! ```
//!
//! An uncompressed regular file is memory-mapped and read in place (pages mapped ahead and
//! dropped behind in [`WINDOW`] steps, so resident memory stays a few MiB); a compressed file,
//! a pipe or an in-memory input is read through a 1 MiB buffer. The files are merged by time
//! (ties: file order, as [`super::BlktraceReader`] does). What the visitor sees
//! ([`LeanRecord`]):
//!
//! * plugs and unplugs (`P`, `U`, `UT`): [`LeanRecord::Untracked`], not decoded;
//! * every other modeled action: [`LeanRecord::Block`], the event filled in place (request
//!   actions `Q M F G R D C I` into one reused event; the rest through
//!   [`super::record::decode`]), with the `comm` of the task's last `BLK_TN_PROCESS` note;
//! * process notes name tasks, timestamp notes are dropped.
//!
//! Anything else (garbage between records, a truncated record, a byte-order or version
//! change, an action stallscope does not model, an unreadable stream) stops the walk with
//! [`Unusual`]: the caller then reads the files again through the general reader, whose
//! errors and data-quality counts are the ones to report.
//!
//! [`LeanBlktrace::for_each`] walks on the calling thread; [`batch`]'s
//! `LeanBlktrace::for_each_threaded` walks on a second thread and hands the records over
//! in batches.

pub mod batch;

use rustc_hash::FxHashMap;
use std::io::Read;

use memmap2::Mmap;
use stallscope_model::{BlockAction, BlockDev, BlockEvent, Comm};

use crate::blktrace::record::{carries_comm, decode, Decoded, Endian, Header, HEADER_LEN, VERSION};
use crate::Input;

/// Why the lean path gives up (the general path then reads everything again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unusual;

/// Where a record came from and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordAt {
    /// Kernel time in ns.
    pub ts: u64,
    /// The header's pid.
    pub pid: u32,
    /// Input index given to [`LeanBlktrace::new`].
    pub input: u16,
    /// Byte offset of the record in its file.
    pub offset: u64,
}

/// One record, as the visitor of [`LeanBlktrace::for_each`] sees it.
#[derive(Debug)]
pub enum LeanRecord<'a> {
    /// A plug or unplug: changes no request.
    Untracked,
    /// A block event (`comm` already filled from process notes where blkparse prints it).
    Block(RecordAt, &'a BlockEvent),
}

/// Where a per-CPU file's bytes come from.
enum Source {
    /// A compressed file, a pipe or bytes in memory: read into `Stream::buf`.
    Reader(Box<dyn Read + Send>),
    /// An uncompressed regular file, memory-mapped: records are parsed straight out of the
    /// mapping (no `read()` copy).
    Mapped(Mmap),
}

/// [`Header::parse`], field by field straight into `dst`. `Header::parse` returns its
/// header through a stack temporary written with narrow stores, which the copy into the
/// stream then reloads with wide loads: a store-forwarding stall per record (~10% of the
/// lean path on the 17 M-record bench). The `lean_header_parse_matches_header_parse` test
/// keeps the two identical.
#[inline(always)]
fn parse_header_into(dst: &mut Header, b: &[u8; HEADER_LEN], e: Endian) {
    let u16_at = |at: usize| {
        let x = [b[at], b[at + 1]];
        match e {
            Endian::Little => u16::from_le_bytes(x),
            Endian::Big => u16::from_be_bytes(x),
        }
    };
    let u32_at = |at: usize| {
        let x = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        match e {
            Endian::Little => u32::from_le_bytes(x),
            Endian::Big => u32::from_be_bytes(x),
        }
    };
    let u64_at = |at: usize| {
        let x = [
            b[at],
            b[at + 1],
            b[at + 2],
            b[at + 3],
            b[at + 4],
            b[at + 5],
            b[at + 6],
            b[at + 7],
        ];
        match e {
            Endian::Little => u64::from_le_bytes(x),
            Endian::Big => u64::from_be_bytes(x),
        }
    };
    dst.magic = u32_at(0);
    dst.sequence = u32_at(4);
    dst.time = u64_at(8);
    dst.sector = u64_at(16);
    dst.bytes = u32_at(24);
    dst.action = u32_at(28);
    dst.pid = u32_at(32);
    dst.device = u32_at(36);
    dst.cpu = u32_at(40);
    dst.error = u16_at(44);
    dst.pdu_len = u16_at(46);
}

/// The bytes of a stream's source (a free function so that a borrow of them leaves the
/// stream's other fields writable).
#[inline]
fn bytes_of<'a>(source: &'a Source, buf: &'a [u8]) -> &'a [u8] {
    match source {
        Source::Mapped(map) => map,
        Source::Reader(_) => buf,
    }
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
    /// Length in bytes (header + payload) of the next record, whose header is `header`.
    next: Option<usize>,
    /// The next record's header (meaningful while `next` is `Some`). Kept outside the
    /// `Option` so that `Header::parse` writes it in place: parsing into a temporary and
    /// moving that into `Some((header, len))` stalled on store forwarding (~7%).
    header: Header,
    /// Mapped source: bytes before this offset were dropped; bytes up to `mapped_to` were
    /// mapped ahead.
    dropped_to: usize,
    mapped_to: usize,
}

/// Read buffer per file (reader source).
const BUF_LEN: usize = 1 << 20;

/// Mapped source: pages are populated and dropped in steps of this many bytes.
pub const WINDOW: usize = 4 << 20;

/// How far ahead of the record being parsed the CPU is asked to load the file's bytes (a few
/// records: the mapped pages are not in the cache yet).
const PREFETCH_AHEAD: usize = 2048;

/// Maps a regular file read-only; `None` when mapping fails (then it is read instead).
fn map_file(file: &std::fs::File) -> Option<Mmap> {
    // SAFETY: the mapping is read-only and private. If another process truncates the file
    // while it is read, touching the lost pages raises SIGBUS (as for perf); a file changed
    // in place only yields different (still bounds-checked) bytes.
    let map = unsafe { Mmap::map(file) }.ok()?;
    // A hint only: failure changes nothing.
    let _ = map.advise(memmap2::Advice::Sequential);
    Some(map)
}

use crate::prefetch::prefetch;

impl Stream {
    fn new(input_index: u16, input: Input) -> Stream {
        let (source, buf, end) = match input.into_file() {
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
        Stream {
            input: input_index,
            source,
            buf,
            start: 0,
            end,
            endian: None,
            offset: 0,
            next: None,
            header: Header::parse(&[0; HEADER_LEN], Endian::Little),
            dropped_to: 0,
            mapped_to: 0,
        }
    }

    /// The bytes `start..end` index into.
    #[inline]
    fn data(&self) -> &[u8] {
        bytes_of(&self.source, &self.buf)
    }

    /// The pending record's header, if any.
    #[inline]
    fn pending(&self) -> Option<&Header> {
        self.next.map(|_| &self.header)
    }

    /// Makes at least `n` bytes available from `start`; false at a clean end of file.
    #[inline(always)]
    fn ensure(&mut self, n: usize) -> Result<bool, Unusual> {
        if self.end - self.start >= n {
            return Ok(true);
        }
        self.refill(n)
    }

    /// [`Self::ensure`] when the bytes in view are too few: reads more, or tells the end of
    /// the file (clean or truncated) apart.
    #[inline(never)]
    fn refill(&mut self, n: usize) -> Result<bool, Unusual> {
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
            // SAFETY: the mapping is private and never written, so dropping its pages loses
            // nothing: a later access reads them again from the file. Both ends are multiples
            // of WINDOW, hence page-aligned.
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
    #[inline]
    fn pdu(&self) -> &[u8] {
        match self.next {
            Some(len) => &self.data()[self.start + HEADER_LEN..self.start + len],
            None => &[],
        }
    }

    /// Moves past the pending record and parses the next; `Err` on anything but a clean
    /// record or a clean end of file.
    #[inline]
    fn advance(&mut self) -> Result<(), Unusual> {
        if let Some(len) = self.next.take() {
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
        // Borrows `source`/`buf` only, so the header parses straight into `self.header`.
        let h: &[u8; HEADER_LEN] = bytes_of(&self.source, &self.buf)
            [self.start..self.start + HEADER_LEN]
            .try_into()
            .map_err(|_| Unusual)?;
        let (endian, version) = Endian::detect([h[0], h[1], h[2], h[3]]).ok_or(Unusual)?;
        if version != VERSION || self.endian.is_some_and(|e| e != endian) {
            return Err(Unusual);
        }
        parse_header_into(&mut self.header, h, endian);
        self.endian = Some(endian);
        let len = HEADER_LEN + usize::from(self.header.pdu_len);
        if !self.ensure(len)? {
            return Err(Unusual);
        }
        self.next = Some(len);
        Ok(())
    }
}

/// `BLK_TC_PC` (SCSI passthrough) in the action word: `1 << 9` categories, shifted by
/// `BLK_TC_SHIFT` (16), as in the kernel's blktrace_api.h.
const TC_PC: u32 = 1 << 25;

/// The request action of each blktrace action code (`__BLK_TA_*`, the low byte of the
/// action word). A table rather than a `match`: the match compiled to an indirect jump per
/// record, often mispredicted.
const REQUEST_ACTIONS: [Option<BlockAction>; 16] = {
    let mut t = [None; 16];
    t[1] = Some(BlockAction::Queue);
    t[2] = Some(BlockAction::BackMerge);
    t[3] = Some(BlockAction::FrontMerge);
    t[4] = Some(BlockAction::GetRq);
    t[6] = Some(BlockAction::Requeue);
    t[7] = Some(BlockAction::Issue);
    t[8] = Some(BlockAction::Complete);
    t[12] = Some(BlockAction::Insert);
    t
};

/// The action of a plain request record (Q M F G R D C I, not PC, not a notify), whose event
/// carries no payload-derived field.
#[inline]
fn request_action(h: &Header) -> Option<BlockAction> {
    if h.is_notify() || h.action & TC_PC != 0 {
        return None;
    }
    REQUEST_ACTIONS.get(h.code() as usize).copied().flatten()
}

/// Task names from process notes, keyed by (input, pid), with the last lookup cached:
/// consecutive records mostly come from one task. Each distinct name gets an id (1, 2, …;
/// 0 is "no name") in the order of the notes, which the threaded walk hands over instead of
/// the name ([`batch`]). The cached name is copied straight into the caller's event
/// ([`Names::fill`]): returning it by value went through a stack temporary whose
/// overlapping stores stalled the reload (~5% of the lean path).
#[derive(Default)]
struct Names {
    ids: FxHashMap<(u16, u32), u32>,
    /// Name of id `k` at `comms[k - 1]`.
    comms: Vec<Comm>,
    /// Last key asked for by [`Names::fill`], and its name.
    comm_key: Option<(u16, u32)>,
    last_comm: Option<Comm>,
    /// Ids of recently asked keys, direct-mapped by pid ([`Names::id`]): the tasks of a
    /// trace take turns (the application queues, a kworker dispatches), so one cached key
    /// missed often and each miss hashed.
    recent_ids: Vec<Option<((u16, u32), u32)>>,
}

/// Entries of [`Names::recent_ids`] (a power of two).
const RECENT_IDS: usize = 256;

impl Names {
    /// Sets `out` to the name of `key` (`None` when no note named it).
    #[inline]
    fn fill(&mut self, key: (u16, u32), out: &mut Option<Comm>) {
        if self.comm_key != Some(key) {
            self.last_comm = match self.ids.get(&key) {
                Some(&id) => self.comms.get(id as usize - 1).copied(),
                None => None,
            };
            self.comm_key = Some(key);
        }
        *out = self.last_comm;
    }

    /// The id of `key`'s name (0 when no note named it).
    #[inline]
    fn id(&mut self, key: (u16, u32)) -> u32 {
        if self.recent_ids.is_empty() {
            self.recent_ids = vec![None; RECENT_IDS];
        }
        let at = (key.1 as usize ^ (usize::from(key.0) << 4)) & (RECENT_IDS - 1);
        match self.recent_ids.get(at) {
            Some(&Some((k, id))) if k == key => id,
            _ => {
                let id = self.ids.get(&key).copied().unwrap_or(0);
                if let Some(e) = self.recent_ids.get_mut(at) {
                    *e = Some((key, id));
                }
                id
            }
        }
    }

    /// Names `key`; returns the name when it is new (given the next id), `None` when `key`
    /// already had that name.
    fn insert(&mut self, key: (u16, u32), comm: Comm) -> Option<Comm> {
        let known = self.ids.get(&key).copied().unwrap_or(0);
        if known != 0 && self.comms.get(known as usize - 1) == Some(&comm) {
            return None;
        }
        self.comms.push(comm);
        self.ids.insert(key, self.comms.len() as u32);
        self.comm_key = None;
        self.recent_ids.fill(None);
        Some(comm)
    }
}

/// Where the merge loop ([`walk`]) sends each record: straight to a visitor
/// ([`LeanBlktrace::for_each`]) or into batches for another thread ([`batch`]).
trait Emit {
    /// A plug or unplug.
    fn untracked(&mut self) -> Result<(), Unusual>;
    /// A plain request record (no payload) whose action is `action`.
    fn request(
        &mut self,
        at: RecordAt,
        h: &Header,
        action: BlockAction,
        names: &mut Names,
    ) -> Result<(), Unusual>;
    /// Any other block event, decoded and named.
    fn decoded(&mut self, at: RecordAt, ev: BlockEvent) -> Result<(), Unusual>;
    /// A process note gave a new name (the next id of [`Names`]).
    fn named(&mut self, comm: Comm);
}

/// Hands records to a visitor on the calling thread, the request records through one
/// reused event.
struct Visit<F> {
    visit: F,
    fast: BlockEvent,
}

impl<F: FnMut(LeanRecord<'_>)> Emit for Visit<F> {
    #[inline]
    fn untracked(&mut self) -> Result<(), Unusual> {
        (self.visit)(LeanRecord::Untracked);
        Ok(())
    }

    #[inline]
    fn request(
        &mut self,
        at: RecordAt,
        h: &Header,
        action: BlockAction,
        names: &mut Names,
    ) -> Result<(), Unusual> {
        // Fill one reused event in place instead of building a new one (what `decode` does
        // for these actions, minus PC requests).
        let fast = &mut self.fast;
        fast.action = action;
        fast.dev = Some(BlockDev(h.device));
        fast.sector = h.sector;
        fast.nr_sector = h.bytes >> 9;
        fast.rwbs = h.rwbs();
        fast.error = (action == BlockAction::Complete).then(|| i32::from(h.error as i16));
        fast.comm = None;
        if carries_comm(action) {
            names.fill((at.input, h.pid), &mut fast.comm);
        }
        (self.visit)(LeanRecord::Block(at, fast));
        Ok(())
    }

    #[inline]
    fn decoded(&mut self, at: RecordAt, ev: BlockEvent) -> Result<(), Unusual> {
        (self.visit)(LeanRecord::Block(at, &ev));
        Ok(())
    }

    fn named(&mut self, _comm: Comm) {}
}

/// The merge loop: every record of `streams`, merged by time, to `emit`.
#[inline(always)]
fn walk(mut streams: Vec<Stream>, emit: &mut impl Emit) -> Result<(), Unusual> {
    for s in &mut streams {
        s.advance()?;
    }
    let mut names = Names::default();
    loop {
        let mut best: Option<(u64, usize)> = None;
        for (i, s) in streams.iter().enumerate() {
            if let Some(h) = s.pending() {
                if best.is_none_or(|(t, _)| h.time < t) {
                    best = Some((h.time, i));
                }
            }
        }
        let Some((_, i)) = best else { break };
        // The record is read where it lies (a shared borrow of its stream), not copied
        // out: copying the header just written by `advance` stalls on store forwarding.
        let s = &streams[i];
        let Some(h) = s.pending() else { break };
        let at = RecordAt {
            ts: h.time,
            pid: h.pid,
            input: s.input,
            offset: s.offset,
        };
        if !h.is_notify()
            && (h.code() == 9 || (matches!(h.code(), 10 | 11) && h.payload(s.pdu()).len() >= 8))
        {
            // Plugs and unplugs (a third of a typical trace) change no request: report
            // them without decoding (an unplug must carry its depth, else decode's
            // verdict counts).
            emit.untracked()?;
        } else if let Some(action) = request_action(h) {
            emit.request(at, h, action, &mut names)?;
        } else {
            // INVARIANT: `next` is only set after `endian` was.
            let endian = s.endian.unwrap_or(Endian::Little);
            match decode(h, s.pdu(), endian) {
                Decoded::Event(mut ev) => {
                    if carries_comm(ev.action) {
                        names.fill((s.input, h.pid), &mut ev.comm);
                    }
                    emit.decoded(at, ev)?;
                }
                Decoded::Process(comm) => {
                    if let Some(new) = names.insert((s.input, h.pid), comm) {
                        emit.named(new);
                    }
                }
                Decoded::Timestamp(..) => {}
                Decoded::Skip(_) => return Err(Unusual),
            }
        }
        streams[i].advance()?;
    }
    Ok(())
}

/// Several per-CPU blktrace files, read together by [`LeanBlktrace::for_each`].
pub struct LeanBlktrace {
    streams: Vec<Stream>,
}

impl LeanBlktrace {
    /// The files to merge, each with the input index its records report.
    pub fn new(inputs: Vec<(u16, Input)>) -> LeanBlktrace {
        let streams = inputs
            .into_iter()
            .map(|(index, input)| Stream::new(index, input))
            .collect();
        LeanBlktrace { streams }
    }

    /// Hands every record, merged by time, to `visit`. `Err(Unusual)`: something the lean
    /// path does not handle (see the module docs); records already visited stay visited.
    pub fn for_each(self, visit: impl FnMut(LeanRecord<'_>)) -> Result<(), Unusual> {
        walk(
            self.streams,
            &mut Visit {
                visit,
                fast: BlockEvent::new(BlockAction::Queue),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blktrace::BlktraceReader;
    use crate::EventReader;
    use stallscope_model::EventKind;

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/../../fixtures/block/loop0/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(path).expect("fixture")
    }

    /// The lean walk yields the general reader's block events (minus plugs and unplugs),
    /// in the same order, for one per-CPU file read from memory and from a mapped file.
    #[test]
    fn lean_header_parse_matches_header_parse() {
        // Distinct bytes everywhere, so a field read at the wrong offset or width differs.
        let mut b = [0u8; HEADER_LEN];
        for (k, x) in b.iter_mut().enumerate() {
            *x = (k as u8).wrapping_mul(37).wrapping_add(11);
        }
        for e in [Endian::Little, Endian::Big] {
            let mut dst = Header::parse(&[0; HEADER_LEN], Endian::Little);
            parse_header_into(&mut dst, &b, e);
            assert_eq!(dst, Header::parse(&b, e));
        }
    }

    #[test]
    fn lean_walk_matches_the_general_reader() {
        let bytes = fixture("loop0.blktrace.0");
        let mut expected = Vec::new();
        let mut reader = BlktraceReader::open(
            Input::from_bytes("loop0.blktrace.0", bytes.clone()).expect("input"),
            0,
        )
        .expect("reader");
        while let Some(ev) = reader.next_event().expect("event") {
            if let EventKind::Block(b) = &ev.kind {
                if !matches!(b.action, BlockAction::Plug | BlockAction::Unplug) {
                    expected.push((ev.ts, (**b).clone()));
                }
            }
        }
        assert!(expected.len() > 50, "fixture has {} events", expected.len());
        let in_memory = Input::from_bytes("loop0.blktrace.0", bytes).expect("input");
        let mapped = Input::open(&format!(
            "{}/../../fixtures/block/loop0/loop0.blktrace.0",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("input");
        for input in [in_memory, mapped] {
            let mut got = Vec::new();
            let mut untracked = 0;
            LeanBlktrace::new(vec![(0, input)])
                .for_each(|rec| match rec {
                    LeanRecord::Untracked => untracked += 1,
                    LeanRecord::Block(at, ev) => got.push((at.ts, ev.clone())),
                })
                .expect("lean walk");
            assert_eq!(got, expected);
            assert!(untracked > 0);
        }
    }

    /// A truncated record and garbage are `Unusual`, not a panic or a silent stop.
    #[test]
    fn truncation_and_garbage_are_unusual() {
        let bytes = fixture("loop0.blktrace.0");
        let truncated = bytes[..bytes.len() - 5].to_vec();
        let mut garbage = b"not a record at all, not even close to one....!!".to_vec();
        garbage.extend_from_slice(&bytes);
        for data in [truncated, garbage] {
            let input = Input::from_bytes("x.blktrace.0", data).expect("input");
            assert_eq!(
                LeanBlktrace::new(vec![(0, input)]).for_each(|_| {}),
                Err(Unusual)
            );
        }
    }
}
