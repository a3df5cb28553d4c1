//! A piece of one CPU's ring-buffer pages (a range of whole sub-buffers) decoded straight
//! into [`CpuRec`]s: a [`SchedRecord`] in 32 bytes with the piece's ids of the task names
//! it carries packed in (the merge turns those into the stream's `PayloadComm` records).
//!
//! ```text
//! sched_switch       Switch  a = prev_pid  b = next_pid  prev_state   names [prev_comm, next_comm]
//! sched_waking/…     Waking/Wakeup/WakeupNew  a = pid  b = target_cpu (-1 none)   names [comm]
//! sched_migrate_task Migrate a = pid  b = dest_cpu                               names [comm]
//! sched_stat_runtime StatRuntime a = pid  value = runtime                       names [comm]
//! anything else      the general decoder's EventKind, mapped like SchedRecordEncoder does
//!                    (fork: a = child, b = parent, names [child_comm]; the rest: Other)
//! ```
//! Field offsets come from the file's own format files (the same accessors the general
//! decoder resolves), and a record decodes here exactly when the general decoder accepts
//! it: every field it reads must be inside the record. A missed-events flag becomes a
//! `Lost` record (at the page's time, before its records) and a note, and discarded items
//! a note, with the general reader's wording (shared functions), kept per piece. A bad page
//! or item, an unknown event id or a short record (the general reader skips those) is a
//! [`LeanBail`].
//!
//! Names: raw `comm` bytes (≤ 16, zero-padded into a `u128`) go through a direct-mapped
//! cache to a per-piece id; a miss decodes the [`Comm`] and interns it, so equal ids mean
//! equal names. Ids are handed out in order; each run carries the names first used in it.

use std::collections::HashMap;
use std::sync::Arc;

use memmap2::Mmap;

use crate::prefetch::prefetch;

use stallscope_model::{
    Comm, Cpu, DataQuality, EventKind, PrevState, SchedRecord, SchedRecordKind, Tid, Ts,
};

use stallscope_model::sched_record::{fill_from_kind, LOST_UNKNOWN};

use crate::lean::LeanBail;
use crate::ringbuf::{MissedEvents, PageRecords};
use crate::tracefs_format::{CommCache, EventFormat, PrevStateTable, TracepointDecoder};

use super::fields::{key16, Int, Name, NameAt};

use super::super::cpu_stream::{note_discarded, note_missed, Tables};
use super::super::options::CpuArea;

/// "No name" (never a real id: ids are handed out from 0).
pub const NO_NAME: u32 = u32::MAX;

/// A record of one piece of a CPU's data (32 bytes): a [`SchedRecord`] without its CPU
/// (the piece's), its input offset relative to the piece's start, and the piece's ids of
/// the names it carries packed into a field its kind leaves zero ([`pack`]; the merge
/// unpacks them). Smaller than the [`SchedRecord`] it stands for, since every record
/// crosses from a decoding core to the merging one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuRec {
    /// Timestamp.
    pub ts: Ts,
    value: u64,
    a: Tid,
    b: Tid,
    /// Input offset minus the piece's start.
    off: u32,
    prev_state: PrevState,
    kind: SchedRecordKind,
}

const _: () = assert!(std::mem::size_of::<CpuRec>() == 32);

/// `r` (at input offset `base` + less than 4 GiB) as a [`CpuRec`], with name ids in it:
/// Switch `value` = prev << 32 | next; wakeups, migrate, fork `value` = the task's;
/// StatRuntime `b` = the task's.
#[inline(always)]
pub fn pack(mut r: SchedRecord, names: [u32; 2], base: u64) -> CpuRec {
    match r.kind {
        SchedRecordKind::Switch => r.value = (u64::from(names[0]) << 32) | u64::from(names[1]),
        SchedRecordKind::Waking
        | SchedRecordKind::Wakeup
        | SchedRecordKind::WakeupNew
        | SchedRecordKind::Migrate
        | SchedRecordKind::Fork => r.value = u64::from(names[0]),
        SchedRecordKind::StatRuntime => r.b = names[0] as Tid,
        _ => {}
    }
    CpuRec {
        ts: r.ts,
        value: r.value,
        a: r.a,
        b: r.b,
        off: r.pos.wrapping_sub(base) as u32,
        prev_state: r.prev_state,
        kind: r.kind,
    }
}

/// The record [`pack`] made `c` from (on `cpu`, in a piece starting at `base`), as the
/// encoder makes it (the name fields zero again; a Fork's `value` is left for the merge to
/// set), and the name ids.
#[inline(always)]
pub fn unpack(c: CpuRec, base: u64, cpu: Cpu) -> (SchedRecord, [u32; 2]) {
    let mut r = SchedRecord {
        ts: c.ts,
        pos: base + u64::from(c.off),
        value: c.value,
        a: c.a,
        b: c.b,
        cpu,
        prev_state: c.prev_state,
        kind: c.kind,
    };
    let mut names = [NO_NAME; 2];
    match r.kind {
        SchedRecordKind::Switch => {
            names = [(r.value >> 32) as u32, r.value as u32];
            r.value = 0;
        }
        SchedRecordKind::Waking
        | SchedRecordKind::Wakeup
        | SchedRecordKind::WakeupNew
        | SchedRecordKind::Migrate
        | SchedRecordKind::Fork => {
            names[0] = r.value as u32;
            r.value = 0;
        }
        SchedRecordKind::StatRuntime => {
            names[0] = r.b as u32;
            r.b = 0;
        }
        _ => {}
    }
    (r, names)
}

/// `comm`, `pid` and optional `prio` of one task.
#[derive(Clone, Copy, Debug)]
struct Task {
    comm: Name,
    pid: Int,
    prio: Option<Int>,
}

impl Task {
    fn new(f: &EventFormat, t: &Tables, comm: &str, pid: &str, prio: &str) -> Option<Task> {
        let endian = t.layout.endian;
        Some(Task {
            comm: Name::of(f, comm, endian)?,
            pid: Int::of(f, pid, endian)?,
            prio: Int::of(f, prio, endian),
        })
    }

    /// `(pid, name id)`, or `None` when a field the general decoder reads is outside `rec`.
    #[inline(always)]
    fn read(&self, rec: &[u8], names: &mut Interner) -> Option<(Tid, u32)> {
        if let Some(p) = self.prio {
            p.i32(rec)?;
        }
        let pid = self.pid.i32(rec)?;
        Some((pid, names.intern(rec, self.comm.at(rec)?)))
    }
}

/// How records of one event id are decoded.
enum Decoder {
    Switch {
        prev: Task,
        next: Task,
        prev_state: Int,
        table: Box<PrevStateTable>,
    },
    Wake {
        kind: SchedRecordKind,
        task: Task,
        target_cpu: Option<Int>,
    },
    Migrate {
        task: Task,
        orig_cpu: Int,
        dest_cpu: Int,
    },
    StatRuntime {
        task: Task,
        runtime: Int,
        vruntime: Option<Int>,
    },
    /// Through the general decoder (events the lean analyses rarely see).
    Full,
}

/// Decoders by event id, built from the general reader's tables.
pub struct Decoders {
    by_id: Vec<Option<Decoder>>,
    /// `common_type`, as the general reader finds it (`None`: u16 at 0).
    type_field: Option<Int>,
}

impl Decoders {
    /// A lean decoder for every id the general reader decodes; the native scheduler
    /// events get fast field access, everything else goes through the general decoder.
    pub fn new(t: &Tables, formats: &[EventFormat]) -> Decoders {
        let mut by_id: Vec<Option<Decoder>> = Vec::new();
        by_id.resize_with(t.decoders.len(), || None);
        // The format each general decoder was built from (the last one with its id).
        let mut format_of: Vec<Option<&EventFormat>> = vec![None; t.decoders.len()];
        for f in formats {
            if let Some(slot) = format_of.get_mut(f.id as usize) {
                *slot = Some(f);
            }
        }
        for (id, d) in t.decoders.iter().enumerate() {
            let Some(d) = d else { continue };
            let f = format_of.get(id).copied().flatten();
            let fast = f.and_then(|f| fast_decoder(&d.decoder, f, t));
            by_id[id] = Some(fast.unwrap_or(Decoder::Full));
        }
        // The general reader's `common_type`: that of the first usable format.
        let e = t.layout.endian;
        let type_field = t.type_field.map(|general| {
            formats
                .iter()
                .filter(|f| f.id <= u32::from(u16::MAX))
                .find_map(|f| Int::of(f, "common_type", e))
                .unwrap_or(Int::Any(general))
        });
        Decoders { by_id, type_field }
    }
}

/// The fast decoder of a natively decoded scheduler event, with the general decoder's
/// field names (`None`: use the general decoder).
fn fast_decoder(general: &TracepointDecoder, f: &EventFormat, t: &Tables) -> Option<Decoder> {
    let e = t.layout.endian;
    let int = |name: &str| Int::of(f, name, e);
    Some(match general {
        TracepointDecoder::Switch { table, .. } => Decoder::Switch {
            prev: Task::new(f, t, "prev_comm", "prev_pid", "prev_prio")?,
            next: Task::new(f, t, "next_comm", "next_pid", "next_prio")?,
            prev_state: int("prev_state")?,
            table: table.clone(),
        },
        TracepointDecoder::Wakeup { which, .. } => Decoder::Wake {
            kind: match which {
                0 => SchedRecordKind::Waking,
                1 => SchedRecordKind::Wakeup,
                _ => SchedRecordKind::WakeupNew,
            },
            task: Task::new(f, t, "comm", "pid", "prio")?,
            target_cpu: int("target_cpu"),
        },
        TracepointDecoder::Migrate { .. } => Decoder::Migrate {
            task: Task::new(f, t, "comm", "pid", "prio")?,
            orig_cpu: int("orig_cpu")?,
            dest_cpu: int("dest_cpu")?,
        },
        TracepointDecoder::StatRuntime { .. } => Decoder::StatRuntime {
            task: Task {
                prio: None,
                ..Task::new(f, t, "comm", "pid", "prio")?
            },
            runtime: int("runtime")?,
            vruntime: int("vruntime"),
        },
        _ => return None,
    })
}

const CACHE_SLOTS: usize = 256;

/// Per-CPU name ids (see the module docs).
pub struct Interner {
    keys: Box<[u128; CACHE_SLOTS]>,
    ids: Box<[u32; CACHE_SLOTS]>,
    by_name: HashMap<Comm, u32>,
    /// Names first used since the last [`Interner::take_new`], in id order.
    fresh: Vec<Comm>,
    next_id: u32,
}

impl Default for Interner {
    fn default() -> Self {
        Interner {
            keys: Box::new([0; CACHE_SLOTS]),
            ids: Box::new([NO_NAME; CACHE_SLOTS]),
            by_name: HashMap::new(),
            fresh: Vec::new(),
            next_id: 0,
        }
    }
}

impl Interner {
    /// The id of the name in `rec` at `at` (the field's bytes; the name stops at the first
    /// NUL).
    #[inline(always)]
    pub fn intern(&mut self, rec: &[u8], at: NameAt) -> u32 {
        let raw = || rec.get(at.start..at.start + at.len).unwrap_or_default();
        if at.len > 16 {
            return self.intern_comm(Comm::from_bytes(raw()));
        }
        let key = key16(rec, at);
        let folded = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
        let slot = (folded.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize % CACHE_SLOTS;
        if self.keys[slot] == key && self.ids[slot] != NO_NAME {
            return self.ids[slot];
        }
        // Bytes equal up to zero padding give the same name, so the key stands for it.
        let id = self.intern_comm(Comm::from_bytes(raw()));
        self.keys[slot] = key;
        self.ids[slot] = id;
        id
    }

    /// The id of `comm`.
    pub fn intern_comm(&mut self, comm: Comm) -> u32 {
        if let Some(&id) = self.by_name.get(&comm) {
            return id;
        }
        let id = self.next_id;
        self.next_id = self.next_id.saturating_add(1);
        self.by_name.insert(comm, id);
        self.fresh.push(comm);
        id
    }

    /// Forgets every name (ids start again from 0).
    pub fn clear(&mut self) {
        self.ids.fill(NO_NAME);
        self.by_name.clear();
        self.fresh.clear();
        self.next_id = 0;
    }

    /// Moves the names first used since the last call into `out`.
    pub fn take_new(&mut self, out: &mut Vec<Comm>) {
        out.append(&mut self.fresh);
    }
}

/// A decoded stretch of one CPU's records.
#[derive(Default)]
pub struct Run {
    /// Records in the CPU's order.
    pub recs: Vec<CpuRec>,
    /// Names first used in these records, in per-piece id order.
    pub new_names: Vec<Comm>,
}

/// Plain data is decoded in windows of about this size (whole sub-buffers).
const BLOCK: usize = 1 << 20;

/// Decoding state of one CPU.
pub struct CpuDecoder {
    tables: Arc<Tables>,
    decoders: Arc<Decoders>,
    /// The whole file mapped (`None`: windows are read into `buf`).
    map: Option<Arc<Mmap>>,
    /// CPU number.
    pub cpu: u32,
    /// Where the decoded data starts (records keep their offset from it).
    pub start: u64,
    next_off: u64,
    end: u64,
    buf: Vec<u8>,
    /// File offset and length of the current window.
    window: (u64, usize),
    page_pos: usize,
    names: Interner,
    comm_cache: CommCache,
    /// Data-quality notes of this CPU (the general reader's, in file order).
    pub dq: DataQuality,
    /// Events the missed-events markers reported lost (unknown counts as 0).
    pub inline_lost: u64,
    /// Bytes of this CPU's data decoded so far.
    pub read: u64,
}

impl CpuDecoder {
    /// A decoder of `area` (plain, uncompressed data), reading from `map` when given.
    pub fn new(
        tables: Arc<Tables>,
        decoders: Arc<Decoders>,
        map: Option<Arc<Mmap>>,
        area: &CpuArea,
    ) -> CpuDecoder {
        CpuDecoder {
            tables,
            decoders,
            map,
            cpu: area.cpu,
            start: area.offset,
            next_off: area.offset,
            end: area.offset.saturating_add(area.size),
            buf: Vec::new(),
            window: (area.offset, 0),
            page_pos: 0,
            names: Interner::default(),
            comm_cache: CommCache::default(),
            dq: DataQuality::default(),
            inline_lost: 0,
            read: 0,
        }
    }

    /// Makes this decoder (pages already dropped) a fresh decoder of `area`, keeping its
    /// buffers: no names, notes or losses known, nothing read.
    pub fn restart(&mut self, area: &CpuArea) {
        self.cpu = area.cpu;
        self.start = area.offset;
        self.next_off = area.offset;
        self.end = area.offset.saturating_add(area.size);
        self.buf.clear();
        self.window = (area.offset, 0);
        self.page_pos = 0;
        self.names.clear();
        self.dq = DataQuality::default();
        self.inline_lost = 0;
        self.read = 0;
    }

    /// Appends whole pages' records to `run` until it holds at least `min` records;
    /// `Ok(false)` when the CPU's data ended (the run may still have received records).
    pub fn fill(&mut self, run: &mut Run, min: usize) -> Result<bool, LeanBail> {
        if self.end - self.start > u64::from(u32::MAX) {
            // Offsets in a CpuRec are 32 bits (pieces are at most a few MiB, or one
            // sub-buffer).
            return Err(LeanBail::new("a piece of CPU data of 4 GiB or more"));
        }
        let subbuf = self.tables.layout.subbuf_size.max(1);
        let map = self.map.clone();
        while run.recs.len() < min {
            if self.page_pos >= self.window.1 && !self.next_window()? {
                self.names.take_new(&mut run.new_names);
                return Ok(false);
            }
            let (w_off, w_len) = self.window;
            let end = (self.page_pos + subbuf).min(w_len);
            let at = w_off + self.page_pos as u64;
            let r = match &map {
                Some(m) => {
                    let base = w_off as usize;
                    // The next sub-buffer's first lines: the hardware prefetchers stop at
                    // 4 KiB boundaries, so its header would otherwise be a cache miss.
                    for line in [0, 64, 128, 192] {
                        prefetch(&m[..], base + end + line);
                    }
                    match m.get(base + self.page_pos..base + end) {
                        Some(page) => self.page(page, at, run),
                        None => Err(LeanBail::new("CPU data outside the mapped file")),
                    }
                }
                None => {
                    let buf = std::mem::take(&mut self.buf);
                    let r = match buf.get(self.page_pos..end) {
                        Some(page) => self.page(page, at, run),
                        None => Err(LeanBail::new("internal: page outside the read window")),
                    };
                    self.buf = buf;
                    r
                }
            };
            self.page_pos = end;
            r?;
        }
        self.names.take_new(&mut run.new_names);
        Ok(true)
    }

    /// Moves to the next window of the CPU's data; `false` at its end.
    fn next_window(&mut self) -> Result<bool, LeanBail> {
        self.page_pos = 0;
        if let Some(m) = &self.map {
            drop_pages(m, self.window.0, self.window.1);
        }
        if self.next_off >= self.end {
            self.window.1 = 0;
            self.buf.clear();
            return Ok(false);
        }
        let t = &self.tables;
        let subbuf = t.layout.subbuf_size.max(1);
        let block = (BLOCK / subbuf).max(1) * subbuf;
        let n = usize::try_from(self.end - self.next_off).map_or(block, |left| left.min(block));
        match &self.map {
            Some(m) => {
                if (self.next_off as usize).saturating_add(n) > m.len() {
                    return Err(LeanBail::new("CPU data ends past the file"));
                }
                populate(m, self.next_off, n);
            }
            None => {
                if let Err(e) = t.src.read_into(self.next_off, n, &mut self.buf) {
                    return Err(LeanBail::new(format!("read error: {e}")));
                }
                if self.buf.len() < n {
                    return Err(LeanBail::new("CPU data ends early"));
                }
            }
        }
        self.window = (self.next_off, n);
        self.next_off += n as u64;
        self.read += n as u64;
        Ok(true)
    }

    /// Decodes one sub-buffer at file offset `at`.
    fn page(&mut self, page: &[u8], at: u64, run: &mut Run) -> Result<(), LeanBail> {
        let t = Arc::clone(&self.tables);
        let decoders = Arc::clone(&self.decoders);
        let cpu = self.cpu;
        let (header, mut items) = PageRecords::new(page, &t.layout)
            .map_err(|e| LeanBail::new(format!("CPU {cpu} sub-buffer at {at:#x}: {e}")))?;
        if header.missed != MissedEvents::None {
            // Like the general reader: a Lost record at the page's time, and a note.
            let count = match header.missed {
                MissedEvents::Count(n) => Some(n),
                _ => None,
            };
            let page_ts = t.adjust.apply(header.ts);
            note_missed(&mut self.dq, &t.path, cpu, at, page_ts, count);
            self.inline_lost = self.inline_lost.saturating_add(count.unwrap_or(0));
            let mut r = SchedRecord::new(SchedRecordKind::Lost, page_ts, cpu, at);
            r.value = count.unwrap_or(LOST_UNKNOWN);
            run.recs.push(pack(r, [NO_NAME; 2], self.start));
        }
        for item in items.by_ref() {
            let item =
                item.map_err(|e| LeanBail::new(format!("CPU {cpu} sub-buffer at {at:#x}: {e}")))?;
            let payload = item.payload;
            let pos = at + item.offset as u64;
            let id = match decoders.type_field {
                Some(a) => a.u64(payload),
                None => t.layout.endian.u16(payload, 0).map(u64::from),
            };
            let Some(d) = id
                .and_then(|id| decoders.by_id.get(usize::try_from(id).ok()?))
                .and_then(Option::as_ref)
            else {
                return Err(LeanBail::new(format!(
                    "offset {pos:#x}: event id {id:?} without a format"
                )));
            };
            let ts = t.adjust.apply(item.ts);
            // Each record built whole (`pack` folds to its kind's layout).
            let rec = |kind, a, b, value, prev_state| SchedRecord {
                ts,
                pos,
                value,
                a,
                b,
                cpu,
                prev_state,
                kind,
            };
            let no_state = PrevState::default();
            let base = self.start;
            let names = &mut self.names;
            let packed = match d {
                Decoder::Switch {
                    prev,
                    next,
                    prev_state,
                    table,
                } => (|| {
                    let (a, na) = prev.read(payload, names)?;
                    let state = table.decode(prev_state.u64(payload)?);
                    let (b, nb) = next.read(payload, names)?;
                    Some(pack(
                        rec(SchedRecordKind::Switch, a, b, 0, state),
                        [na, nb],
                        base,
                    ))
                })(),
                Decoder::Wake {
                    kind,
                    task,
                    target_cpu,
                } => (|| {
                    let (a, na) = task.read(payload, names)?;
                    let b = match target_cpu {
                        Some(c) => u32::try_from(c.i64(payload)?).map_or(-1, |c| c as Tid),
                        None => -1,
                    };
                    Some(pack(rec(*kind, a, b, 0, no_state), [na, NO_NAME], base))
                })(),
                Decoder::Migrate {
                    task,
                    orig_cpu,
                    dest_cpu,
                } => (|| {
                    let (a, na) = task.read(payload, names)?;
                    orig_cpu.i64(payload)?;
                    let b = dest_cpu.i64(payload)? as u32 as Tid;
                    let r = rec(SchedRecordKind::Migrate, a, b, 0, no_state);
                    Some(pack(r, [na, NO_NAME], base))
                })(),
                Decoder::StatRuntime {
                    task,
                    runtime,
                    vruntime,
                } => (|| {
                    let (a, na) = task.read(payload, names)?;
                    let value = runtime.u64(payload)?;
                    if let Some(v) = vruntime {
                        v.u64(payload)?;
                    }
                    let r = rec(SchedRecordKind::StatRuntime, a, 0, value, no_state);
                    Some(pack(r, [na, NO_NAME], base))
                })(),
                Decoder::Full => {
                    let mut r = rec(SchedRecordKind::Other, 0, 0, 0, no_state);
                    let mut names = [NO_NAME; 2];
                    self.full(id, payload, &mut r, &mut names)
                        .map(|()| pack(r, names, base))
                }
            };
            let Some(packed) = packed else {
                return Err(LeanBail::new(format!(
                    "offset {pos:#x}: record too short for its format"
                )));
            };
            run.recs.push(packed);
        }
        if items.discarded > 0 {
            note_discarded(&mut self.dq, &t.path, cpu, at, items.discarded);
        }
        Ok(())
    }

    /// A record of an event without a fast decoder: the general decoder's result, mapped
    /// the way `SchedRecordEncoder` maps it.
    fn full(
        &mut self,
        id: Option<u64>,
        payload: &[u8],
        r: &mut SchedRecord,
        names: &mut [u32; 2],
    ) -> Option<()> {
        let d = self
            .tables
            .decoders
            .get(usize::try_from(id?).ok()?)?
            .as_ref()?;
        let kind = d
            .decoder
            .decode_cached(payload, &mut self.comm_cache)
            .ok()?;
        // Not produced by a trace.dat decoder; the general path would hand them on with
        // meanings this lean path does not model.
        if matches!(kind, EventKind::TaskComm { .. } | EventKind::Lost { .. }) {
            return None;
        }
        for (slot, comm) in names.iter_mut().zip(fill_from_kind(&kind, r)) {
            if let Some(c) = comm {
                *slot = self.names.intern_comm(*c);
            }
        }
        Some(())
    }
}

/// Maps `len` bytes at file offset `off` ahead of decoding (`MADV_POPULATE_READ`: no page
/// faults while decoding). A hint only: failure changes nothing.
fn populate(map: &Mmap, off: u64, len: usize) {
    #[cfg(target_os = "linux")]
    {
        let _ = map.advise_range(memmap2::Advice::PopulateRead, off as usize, len);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (map, off, len);
}

/// Drops the mapped pages of a decoded window from this process (keeps resident memory
/// bounded; a later access would read them again from the file). Whole pages only.
fn drop_pages(map: &Mmap, off: u64, len: usize) {
    const PAGE: usize = 4096;
    let start = (off as usize).div_ceil(PAGE) * PAGE;
    let end = ((off as usize).saturating_add(len) / PAGE * PAGE).min(map.len());
    if end > start {
        // SAFETY: the mapping is private and never written, so dropping its pages loses
        // nothing: a later access reads them again from the file. Both ends are page
        // multiples (the mapping starts on a page).
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind's record comes back from the 32-byte form with its CPU, offset and name
    /// ids, and the name fields zero as the encoder leaves them.
    #[test]
    fn pack_and_unpack_keep_every_field() {
        let base = 0x1_0000_3000u64;
        for kind in [
            SchedRecordKind::Switch,
            SchedRecordKind::Waking,
            SchedRecordKind::Wakeup,
            SchedRecordKind::WakeupNew,
            SchedRecordKind::Migrate,
            SchedRecordKind::StatRuntime,
            SchedRecordKind::Fork,
            SchedRecordKind::Lost,
            SchedRecordKind::Other,
        ] {
            let mut r = SchedRecord::new(kind, 123_456_789, 3, base + 0xff_fff8);
            r.a = 4242;
            let names = match kind {
                SchedRecordKind::Switch => {
                    r.b = 77;
                    r.prev_state = PrevState::parse("D").unwrap();
                    [5, 9]
                }
                SchedRecordKind::StatRuntime => {
                    r.value = 1_000_000;
                    [6, NO_NAME]
                }
                SchedRecordKind::Lost | SchedRecordKind::Other => {
                    r.value = LOST_UNKNOWN;
                    [NO_NAME; 2]
                }
                _ => {
                    r.b = -1;
                    [7, NO_NAME]
                }
            };
            let c = pack(r, names, base);
            assert_eq!(unpack(c, base, 3), (r, names), "{kind:?}");
        }
    }
}
