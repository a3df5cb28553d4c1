//! [`Walker`]: the lean reading loop over the mapped data section.
//!
//! ```text
//! record   u32 type, u16 misc, u16 size │ body          (walked by size, bounds-checked)
//! SAMPLE   decoded at once into an [`Entry`] (a SchedRecord + the name ids it carries)
//! COMM     an Entry (TaskComm); FORK / EXIT: a placeholder Entry (ordered, emits nothing)
//! other    skipped when the general reader ignores them (and EVENT_UPDATE), else a bail-out
//! ROUND    FINISHED_ROUND: the entries since the previous one are sorted by time
//!          (stable) and the position is noted (the ordering across rounds is done by
//!          [`super::emit::Orderer`] on the receiving thread)
//! ```
//!
//! Since every record is decoded when walked, the pages behind the walk are dropped from
//! memory (`MADV_DONTNEED`, every [`DROP_EVERY`] bytes and at the segment's end) and
//! resident memory stays at that much per walker plus the entries in flight. (Reading the segments with `pread` into a reused buffer instead was measured:
//! the kernel's copy costs more than mapping and dropping the pages.)
//!
//! **Event-building mode** (`full` set, for readers that hand out whole [`Event`]s): a
//! switch, wakeup or stat_runtime entry also keeps what the event needs beyond the latency
//! fields: the priorities, one byte each (`prio + 1`, so -1 .. 254) in the top 16 bits of
//! `pos` ([`Entry::pos`] masks them; offsets stay below 2^48), and the sample's tid (a
//! wakeup's waker: the top 32 bits of `value`; a switch's and a stat_runtime's must be
//! the previous / charged task, whose tid the entry has). Any other record, or one of
//! those three that does not fit (another tid, a priority out of range, a stat_runtime
//! with `vruntime`), is decoded whole by the general decoder into [`FullEvents`] under its
//! offset, and its entry is an `Other` with `n1` = [`FULL`].
//!
//! Anything the general reader would report (a data-quality note or an error: LOST records,
//! unknown types or sample ids, short records, impossible sizes, truncation, compressed
//! records) ends the walk with a [`LeanBail`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use stallscope_model::sched_record::fill_from_kind;
use std::collections::HashMap;
use std::sync::Mutex;

use stallscope_model::{
    Comm, Event, EventKind, PrevState, SchedRecord, SchedRecordKind, Span, Tid,
};

use super::super::attr::{parse_sample, parse_trailer, Layout};
use super::super::pipeline::rt;
use super::super::stream::{prefetch, DataMap, HUGE_PAGE};
use super::names::{NameIds, SharedNames, NO_NAME};
use super::plan::{Int, Payload, Plan, SampleAt, TaskAccess};
use crate::lean::LeanBail;
use crate::tracefs_format::{CommCache, Endian, LocKind, PrevStateTable, StrAccessor};

/// `n1` of an entry that emits nothing (FORK / EXIT side-band records).
pub const SKIP: u32 = u32::MAX - 1;
/// `n1` of an event-building mode entry whose event is in [`FullEvents`].
pub const FULL: u32 = u32::MAX - 2;
/// The bits of [`SchedRecord::pos`] that hold the offset (the priorities above them in
/// the event-building mode).
pub const POS_MASK: u64 = (1 << 48) - 1;

/// The events the event-building mode's walkers decoded whole, by record offset (rare
/// records: forks, migrations, other tracepoints), until the orderer emits them.
pub type FullEvents = Mutex<HashMap<u64, Event>>;
/// Bytes between two progress updates (and looks at the pages to drop).
const STEP: u64 = 1 << 20;
/// Bytes walked before the pages behind the walk are dropped: each drop unmaps pages
/// the other CPU may hold in its TLB, so it interrupts that CPU (a VM exit on a VM).
/// Measured on the bench trace (12 alternating runs): every 2 MiB 215.6 ms CPU, 0.124 s
/// wall, 32 MiB peak; every 4 MiB 207.0 ms; every 8 MiB (about once per segment) 201.6
/// ms, 0.117 s, 40 MiB.
const DROP_EVERY: u64 = 8 << 20;
/// How far ahead of the walk the CPU is asked to load record headers.
const PREFETCH_AHEAD: usize = 2048;
/// How many entries ahead of the next one the output buffer is prefetched (measured: 48
/// takes ~5 % off the walkers' CPU time on the bench trace; 0, 16 and 96 less).
const ENTRY_PREFETCH: usize = 48;

/// A decoded record waiting for its round, 40 bytes: the record with the name ids of its
/// tasks packed into a field its kind leaves unused (`n1` names `a`, `n2` names `b` of a
/// switch; `n1` is the name of a fork child / TaskComm, or [`SKIP`] on an `Other` entry
/// that emits nothing):
///
/// | kind                                   | n1                 | n2            |
/// |----------------------------------------|--------------------|---------------|
/// | Switch                                 | `value` low 32 bits| `value` high  |
/// | Waking, Wakeup, WakeupNew, Migrate     | `value`            | –             |
/// | Fork, TaskComm, Other                  | `value`            | –             |
/// | StatRuntime (`value` is the runtime)   | `b`                | –             |
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// The record, name ids packed in.
    pub rec: SchedRecord,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 40);

impl Entry {
    /// `rec` carrying the name ids `n1`, `n2`.
    #[inline]
    pub fn new(rec: SchedRecord, n1: u32, n2: u32) -> Entry {
        let mut e = Entry { rec };
        e.set_names(n1, n2);
        e
    }

    /// The name ids `(n1, n2)` ([`NO_NAME`] where the kind has none).
    #[inline]
    pub fn names(&self) -> (u32, u32) {
        let r = &self.rec;
        match r.kind {
            SchedRecordKind::Switch => (r.value as u32, (r.value >> 32) as u32),
            SchedRecordKind::StatRuntime => (r.b as u32, NO_NAME),
            SchedRecordKind::Lost | SchedRecordKind::PayloadComm => (NO_NAME, NO_NAME),
            _ => (r.value as u32, NO_NAME),
        }
    }

    /// The record's offset (without the priorities of the event-building mode).
    #[inline]
    pub fn pos(&self) -> u64 {
        self.rec.pos & POS_MASK
    }

    /// Priority `i` (0: the first task's, 1: a switch's next task) of an event-building
    /// mode entry.
    #[inline]
    pub fn prio(&self, i: u32) -> i32 {
        i32::from((self.rec.pos >> (48 + 8 * i)) as u8) - 1
    }

    /// Replaces the name ids.
    #[inline]
    pub fn set_names(&mut self, n1: u32, n2: u32) {
        let r = &mut self.rec;
        match r.kind {
            SchedRecordKind::Switch => r.value = u64::from(n1) | (u64::from(n2) << 32),
            SchedRecordKind::StatRuntime => r.b = n1 as i32,
            SchedRecordKind::Lost | SchedRecordKind::PayloadComm => {}
            _ => r.value = u64::from(n1),
        }
    }
}

/// An entry from its fields, the name ids packed as [`Entry::set_names`] does (computed
/// on values, so the entry is written once).
#[inline(always)]
fn entry(
    kind: SchedRecordKind,
    (ts, cpu, pos): (u64, u32, u64),
    (a, b, prev_state, value): (Tid, Tid, PrevState, u64),
    (n1, n2): (u32, u32),
) -> Entry {
    let (b, value) = match kind {
        SchedRecordKind::Switch => (b, u64::from(n1) | (u64::from(n2) << 32)),
        SchedRecordKind::StatRuntime => (n1 as i32, value),
        SchedRecordKind::Lost | SchedRecordKind::PayloadComm => (b, value),
        _ => (b, u64::from(n1)),
    };
    Entry {
        rec: SchedRecord {
            ts,
            pos,
            value,
            a,
            b,
            cpu,
            prev_state,
            kind,
        },
    }
}

/// Result of walking: more to come, or the end of the data.
pub enum Step {
    /// Call again.
    More,
    /// The data section is walked.
    Done,
}

/// The lean reading state of one file.
pub struct Walker {
    map: Arc<DataMap>,
    plan: Plan,
    pos: u64,
    end: u64,
    names: NameIds,
    cache: CommCache,
    next_step: u64,
    progress: Arc<AtomicU64>,
    /// Position up to which the walked bytes were added to `progress`.
    reported: u64,
    /// Merge buffer of [`merge_sorted_runs`].
    scratch: Vec<Entry>,
    /// Where the entries of the piece being walked go back in time (indices in the
    /// output): the starts of its sorted runs after the first.
    descents: Vec<usize>,
    dropped_to: u64,
    /// Event-building mode: where whole events go (module docs).
    full: Option<Arc<FullEvents>>,
}

/// What [`Walker::step`] decoded, in file order, for [`super::emit::Orderer`].
#[derive(Default)]
pub struct Walked {
    /// Entries in file order, except that each piece between round ends is sorted by
    /// time (stably).
    pub entries: Vec<Entry>,
    /// `entries.len()` at each FINISHED_ROUND.
    pub round_ends: Vec<usize>,
    /// True when the walker's segment (the data section, when it is not cut) ends after
    /// these entries.
    pub seg_end: bool,
}

impl Walked {
    /// Empties it, keeping the allocations.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.round_ends.clear();
        self.seg_end = false;
    }
}

fn bail<T>(why: &str, off: u64) -> Result<T, LeanBail> {
    Err(LeanBail::new(format!("{why} at offset {off:#x}")))
}

impl Walker {
    /// A walker over the whole of `map`, adding the bytes it walks to `progress`,
    /// interning names in `names`; in the event-building mode when `full` is given.
    pub fn new(
        map: Arc<DataMap>,
        plan: Plan,
        progress: Arc<AtomicU64>,
        names: SharedNames,
        full: Option<Arc<FullEvents>>,
    ) -> Walker {
        let pos = map.base;
        let end = map.base + map.map.len() as u64;
        Walker {
            map,
            plan,
            pos,
            end,
            names: NameIds::new(names),
            cache: CommCache::default(),
            next_step: pos,
            progress,
            reported: pos,
            scratch: Vec::new(),
            descents: Vec::new(),
            dropped_to: pos,
            full,
        }
    }

    /// Walks `start..end` next (a segment of the data section: `start` must be a record
    /// boundary, and a record crossing `end` is a bail-out).
    pub fn set_range(&mut self, start: u64, end: u64) {
        let lo = self.map.base;
        let hi = lo + self.map.map.len() as u64;
        self.end = end.clamp(lo, hi);
        self.pos = start.clamp(lo, self.end);
        self.next_step = self.pos;
        self.reported = self.pos;
        self.dropped_to = self.pos;
    }

    /// [`Walker::step`]'s loop (`EVENTS`: the event-building mode).
    #[inline(always)]
    fn walk<const EVENTS: bool>(
        &mut self,
        out: &mut Walked,
        want: usize,
    ) -> Result<Step, LeanBail> {
        let map = self.map.clone();
        let data = &map.map[..];
        let base = map.base;
        let mut pos = self.pos;
        let end = self.end;
        // Where the entries since the last round end go back in time (pieces usually do
        // not: then there is nothing to sort), and the newest time.
        let from = out.round_ends.last().copied().unwrap_or(0);
        let mut descents = std::mem::take(&mut self.descents);
        descents.clear();
        let carried = out.entries.get(from..).unwrap_or(&[]);
        descents.extend(run_starts(carried).map(|i| from + i));
        let mut prev_ts = carried.last().map_or(0, |e| e.rec.ts);
        let res = loop {
            if pos >= self.next_step {
                self.pos = pos;
                self.report();
                if self.pos - self.dropped_to >= DROP_EVERY {
                    self.dropped_to = self.map.drop_pages(self.dropped_to, self.pos);
                }
                // Only inside the segment: the pages after it are the other walker's.
                self.map
                    .populate(self.pos + STEP, (self.pos + 2 * STEP).min(self.end));
                self.next_step = pos + STEP;
            }
            if out.entries.len() >= want {
                self.pos = pos;
                break Ok(Step::More);
            }
            let left = end - pos;
            if left == 0 {
                self.pos = pos;
                self.report();
                // The segment's last pages too (drop_pages works in huge pages), through
                // the end of the huge page holding `end`: the next segment's walker, which
                // runs beside this one, has usually read and dropped its start already,
                // and the last records here mapped it again (a page it still needs is
                // read again).
                self.dropped_to = self
                    .map
                    .drop_pages(self.dropped_to, end.saturating_add(HUGE_PAGE - 1));
                self.dropped_to = self.map.drop_pages_to_end(self.dropped_to, end);
                break Ok(Step::Done);
            }
            let at = (pos - base) as usize;
            // Two lines: a record is about 100 bytes.
            prefetch(data, at + PREFETCH_AHEAD);
            prefetch(data, at + PREFETCH_AHEAD + 64);
            // The entry slot written a few dozen records later: its line is fetched (from
            // the receiving CPU, which read the buffer last) before the write needs it.
            prefetch(out.entries.spare_capacity_mut(), ENTRY_PREFETCH);
            let (Some(rtype), Some(size)) = (
                Endian::Little.u32(data, at),
                Endian::Little.u16(data, at + 6),
            ) else {
                return bail("truncated record header", pos);
            };
            if size < 8 || left < u64::from(size) {
                return bail("bad or truncated record size", pos);
            }
            let rec = &data[at..at + usize::from(size)];
            match rtype {
                rt::SAMPLE => {
                    let ts = if EVENTS {
                        self.sample_for_events(rec, pos, &mut out.entries)?
                    } else {
                        self.sample(rec, pos, &mut out.entries)?
                    };
                    if ts < prev_ts {
                        descents.push(out.entries.len() - 1);
                    }
                    prev_ts = ts;
                }
                rt::COMM | rt::FORK | rt::EXIT => {
                    let ts = self.side_band(rec, rtype, pos, &mut out.entries)?;
                    if ts < prev_ts {
                        descents.push(out.entries.len() - 1);
                    }
                    prev_ts = ts;
                }
                rt::FINISHED_ROUND => {
                    sort_piece(out, &descents, &mut self.scratch);
                    descents.clear();
                    out.round_ends.push(out.entries.len());
                    prev_ts = 0;
                }
                // EVENT_UPDATE renames attrs at most: no event changes (tracepoint names
                // come from their formats; other attrs become `Other` records).
                t if rt::is_ignored(t) || t == rt::EVENT_UPDATE => {}
                t => return bail(&format!("record type {t}"), pos),
            }
            pos += u64::from(size);
        };
        sort_piece(out, &descents, &mut self.scratch);
        self.descents = descents;
        res
    }

    /// Walks until `out` holds at least `want` entries or the data ends, appending the
    /// decoded entries in file order and the round ends.
    pub fn step(&mut self, out: &mut Walked, want: usize) -> Result<Step, LeanBail> {
        out.entries.reserve(want.saturating_sub(out.entries.len()));
        if self.full.is_some() {
            self.walk_for_events(out, want)
        } else {
            self.walk_records(out, want)
        }
    }

    /// The loop of the latency mode, a function of its own: compiled as it was before the
    /// event-building mode existed, whatever that mode's loop needs.
    #[inline(never)]
    fn walk_records(&mut self, out: &mut Walked, want: usize) -> Result<Step, LeanBail> {
        self.walk::<false>(out, want)
    }

    /// The loop of the event-building mode.
    #[inline(never)]
    fn walk_for_events(&mut self, out: &mut Walked, want: usize) -> Result<Step, LeanBail> {
        self.walk::<true>(out, want)
    }

    /// Adds the bytes walked since the last report to `progress`.
    fn report(&mut self) {
        let walked = self.pos.saturating_sub(self.reported);
        self.progress.fetch_add(walked, Ordering::Relaxed);
        self.reported = self.pos;
    }

    /// A SAMPLE record decoded (returns its time).
    ///
    /// (Pushed here rather than returned: moving a returned entry through the stack cost
    /// store-forwarding stalls, ~10 % of all CPU.)
    #[inline(always)]
    fn sample(&mut self, rec: &[u8], pos: u64, out: &mut Vec<Entry>) -> Result<u64, LeanBail> {
        let Some(attr) = self.plan.attr_of(rec, true) else {
            return bail("a sample of unknown id", pos);
        };
        let ai = usize::from(attr);
        let (Some(layout), Some(payload), Some(fixed)) = (
            self.plan.layouts.get(ai),
            self.plan.payloads.get(ai),
            self.plan.samples.get(ai),
        ) else {
            return bail("attr out of range", pos);
        };
        // (time, cpu, raw) as the general parser finds them.
        let parsed = match fixed {
            Some(f) if rec.len() >= f.min_len => fixed_fields(rec, f),
            Some(_) => None,
            None => general_fields(rec, layout),
        };
        let Some((ts, cpu, raw)) = parsed else {
            return bail(
                "a sample too short for its sample_type, or without time",
                pos,
            );
        };
        // The record's fields are computed as values and the entry is written in one go:
        // filling a record field by field in memory and then moving it stalls on store
        // forwarding.
        use SchedRecordKind as K;
        let none = PrevState::default();
        let raw = match (payload, raw) {
            (Payload::NotTracepoint, _) => {
                out.push(entry(
                    K::Other,
                    (ts, cpu, pos),
                    (0, 0, none, 0),
                    (NO_NAME, NO_NAME),
                ));
                return Ok(ts);
            }
            (_, Some(raw)) => raw,
            (_, None) => return bail("a tracepoint sample without payload", pos),
        };
        let names = &mut self.names;
        // Every fixed field is inside `raw` once its length is checked against `need`;
        // strings behind a locator are still checked one by one.
        let decoded: Option<Fields> = match payload {
            Payload::Switch {
                need,
                prev,
                prev_state,
                table,
                next,
            } if raw.len() >= *need => switch(raw, prev, prev_state, table, next, names),
            Payload::Wakeup {
                need,
                kind,
                task: t,
                target_cpu,
            } if raw.len() >= *need => wakeup(raw, *kind, t, target_cpu.as_ref(), names),
            Payload::StatRuntime {
                need,
                task: t,
                runtime,
                ..
            } if raw.len() >= *need => stat_runtime(raw, t, runtime, names),
            Payload::General => match self.plan.general.get(ai).and_then(|d| d.as_ref()) {
                Some(d) => match d.decode_cached(raw, &mut self.cache) {
                    Ok(kind) => {
                        let mut r = SchedRecord::new(K::Other, ts, cpu, pos);
                        let n = from_kind(&kind, &mut r, &mut self.names);
                        Some((r.kind, (r.a, r.b, r.prev_state, r.value), n))
                    }
                    Err(_) => None,
                },
                None => None,
            },
            Payload::NotTracepoint => Some((K::Other, (0, 0, none, 0), (NO_NAME, NO_NAME))),
            _ => None,
        };
        match decoded {
            Some((kind, fields, names)) => {
                out.push(entry(kind, (ts, cpu, pos), fields, names));
                Ok(ts)
            }
            None => bail("a tracepoint payload too short for its format", pos),
        }
    }

    /// A SAMPLE record in the event-building mode (module docs; returns its time).
    #[inline(always)]
    fn sample_for_events(
        &mut self,
        rec: &[u8],
        pos: u64,
        out: &mut Vec<Entry>,
    ) -> Result<u64, LeanBail> {
        let Some(attr) = self.plan.attr_of(rec, true) else {
            return bail("a sample of unknown id", pos);
        };
        let ai = usize::from(attr);
        // `Plan::check_events_mode`: every attr a tracepoint with fixed offsets and TID, or
        // a dummy (whose samples are not expected).
        let (Some(payload), Some(Some(fixed))) =
            (self.plan.payloads.get(ai), self.plan.samples.get(ai))
        else {
            return bail("a sample of an attr without fixed offsets", pos);
        };
        if matches!(payload, Payload::NotTracepoint) {
            return bail("a sample of an attr that is not a tracepoint", pos);
        }
        let parsed = match fixed.tid {
            Some(t) if rec.len() >= fixed.min_len => {
                fixed_fields(rec, fixed).zip(Endian::Little.u32(rec, t + 4).map(|v| v as Tid))
            }
            _ => None,
        };
        let Some(((ts, cpu, raw), tid)) = parsed else {
            return bail(
                "a sample too short for its sample_type, or without time",
                pos,
            );
        };
        let Some(raw) = raw else {
            return bail("a tracepoint sample without payload", pos);
        };
        use SchedRecordKind as K;
        let names = &mut self.names;
        // (kind, a, b, prev_state, value, priorities, names), or `None`: built whole
        let compact = match payload {
            Payload::Switch {
                need,
                prev,
                prev_state,
                table,
                next,
            } if raw.len() >= *need => {
                let Some((_, (a, b, st, _), (n1, n2))) =
                    switch(raw, prev, prev_state, table, next, names)
                else {
                    return bail("a tracepoint payload too short for its format", pos);
                };
                let prios = prio_byte(raw, prev).zip(prio_byte(raw, next));
                match prios {
                    Some((p, q)) if tid == a => Some((K::Switch, a, b, st, 0, [p, q], (n1, n2))),
                    _ => None,
                }
            }
            Payload::Wakeup {
                need,
                kind,
                task: t,
                target_cpu,
            } if raw.len() >= *need => {
                let Some((a, n)) = task(raw, t, names) else {
                    return bail("a tracepoint payload too short for its format", pos);
                };
                // The general decoder's `u32::try_from(target_cpu)`: none when negative;
                // above i32::MAX it is a CPU number an entry cannot hold.
                let target = match target_cpu {
                    Some(c) => match c.i64(raw) {
                        Some(v) if v < 0 || v > i64::from(u32::MAX) => Some(-1),
                        Some(v) => Tid::try_from(v).ok(),
                        None => return bail("a tracepoint payload too short for its format", pos),
                    },
                    None => Some(-1),
                };
                match (target, prio_byte(raw, t)) {
                    (Some(b), Some(p)) => Some((
                        *kind,
                        a,
                        b,
                        PrevState::default(),
                        u64::from(tid as u32) << 32,
                        [p, 0],
                        (n, NO_NAME),
                    )),
                    _ => None,
                }
            }
            Payload::StatRuntime {
                need,
                task: t,
                runtime,
                vruntime,
            } if raw.len() >= *need => {
                let Some((_, (a, _, _, v), (n, _))) = stat_runtime(raw, t, runtime, names) else {
                    return bail("a tracepoint payload too short for its format", pos);
                };
                (tid == a && !*vruntime).then_some((
                    K::StatRuntime,
                    a,
                    0,
                    PrevState::default(),
                    v,
                    [0, 0],
                    (n, NO_NAME),
                ))
            }
            Payload::General => None,
            _ => return bail("a tracepoint payload too short for its format", pos),
        };
        match compact {
            Some((kind, a, b, st, value, [p, q], (n1, n2))) => {
                let packed = pos | (u64::from(p) << 48) | (u64::from(q) << 56);
                let mut e = entry(kind, (ts, cpu, packed), (a, b, st, value), (n1, n2));
                if kind != K::Switch && kind != K::StatRuntime {
                    // a wakeup: the waker's tid above the name id
                    e.rec.value |= value;
                }
                out.push(e);
            }
            None => self.whole(ai, raw, (ts, cpu, pos), tid, out)?,
        }
        Ok(ts)
    }

    /// A sample decoded whole by the general decoder into [`FullEvents`] (event-building
    /// mode), and its `Other` entry.
    #[cold]
    #[inline(never)]
    fn whole(
        &mut self,
        attr: usize,
        raw: &[u8],
        (ts, cpu, pos): (u64, u32, u64),
        tid: Tid,
        out: &mut Vec<Entry>,
    ) -> Result<(), LeanBail> {
        let (Some(Some(d)), Some(full)) = (self.plan.general.get(attr), self.full.as_ref()) else {
            return bail("a tracepoint without its general decoder", pos);
        };
        let Ok(kind) = d.decode_cached(raw, &mut self.cache) else {
            return bail("a tracepoint payload too short for its format", pos);
        };
        let ev = Event {
            ts,
            cpu,
            pid: tid,
            span: Span::byte(0, pos),
            kind,
            callchain: None,
        };
        match full.lock() {
            Ok(mut m) => m.insert(pos, ev),
            Err(_) => return bail("another walker failed", pos),
        };
        let mut r = SchedRecord::new(SchedRecordKind::Other, ts, cpu, pos);
        r.value = u64::from(FULL);
        out.push(Entry { rec: r });
        Ok(())
    }

    /// A COMM / FORK / EXIT record: its time and attr as the general reader finds them
    /// (returns the time).
    fn side_band(
        &mut self,
        rec: &[u8],
        rtype: u32,
        pos: u64,
        out: &mut Vec<Entry>,
    ) -> Result<u64, LeanBail> {
        let Some(attr) = self.plan.attr_of(rec, false) else {
            return bail("a side-band record of unknown id", pos);
        };
        let Some(l) = self.plan.layouts.get(usize::from(attr)) else {
            return bail("attr out of range", pos);
        };
        let (_, time, cpu) = parse_trailer(rec, l, Endian::Little);
        let Some(ts) = time else {
            return bail("a side-band record without time", pos);
        };
        let mut r = SchedRecord::new(SchedRecordKind::Other, ts, cpu.unwrap_or(0), pos);
        let body_end = rec.len().saturating_sub(l.trailer_len).max(8);
        let u32_at = |o: usize| Endian::Little.u32(rec, o).map(|v| v as i32);
        if rtype == rt::COMM {
            if let (Some(tgid), Some(tid), Some(name)) =
                (u32_at(8), u32_at(12), rec.get(16..body_end))
            {
                r.kind = SchedRecordKind::TaskComm;
                (r.a, r.b) = (tid, tgid);
                let n1 = self.names.id_of(Comm::from_bytes(name));
                out.push(Entry::new(r, n1, NO_NAME));
                return Ok(ts);
            }
        }
        out.push(Entry::new(r, SKIP, NO_NAME));
        Ok(ts)
    }
}

/// `(kind, (a, b, prev_state, value), (n1, n2))` of a decoded payload.
type Fields = (SchedRecordKind, (Tid, Tid, PrevState, u64), (u32, u32));

/// TIME, CPU and RAW of a sample whose fields before RAW have fixed offsets (`rec` holds
/// `f.min_len` bytes at least).
#[inline(always)]
fn fixed_fields<'a>(rec: &'a [u8], f: &SampleAt) -> Option<(u64, u32, Option<&'a [u8]>)> {
    let le = Endian::Little;
    let ts = le.u64(rec, f.time)?;
    let cpu = match f.cpu {
        Some(o) => le.u32(rec, o)?,
        None => 0,
    };
    let raw = match f.raw {
        Some(o) => {
            let size = le.u32(rec, o)? as usize;
            Some(rec.get(o + 4..(o + 4).checked_add(size)?)?)
        }
        None => None,
    };
    Some((ts, cpu, raw))
}

/// TIME, CPU and RAW of any other sample, by the general parser.
#[cold]
fn general_fields<'a>(rec: &'a [u8], layout: &Layout) -> Option<(u64, u32, Option<&'a [u8]>)> {
    let le = Endian::Little;
    let ts = layout.sample_time_off.and_then(|o| le.u64(rec, o))?;
    let s = parse_sample(rec, layout, le)?;
    Some((ts, s.cpu.unwrap_or(0), s.raw))
}

/// Tid and name id of a task in a payload.
#[inline(always)]
fn task(raw: &[u8], t: &TaskAccess, names: &mut NameIds) -> Option<(Tid, u32)> {
    let pid = t.pid.i32(raw)?;
    let id = match t.comm {
        StrAccessor::Fixed { off, len: 16 } => {
            let b: [u8; 16] = raw.get(off..off + 16)?.try_into().ok()?;
            names.id_key(u128::from_le_bytes(b))
        }
        // `__data_loc char[]` (`sched_stat_runtime`'s comm): as `StrAccessor::bytes`.
        StrAccessor::Loc {
            off,
            loc: LocKind::DataLoc4,
            endian: Endian::Little,
        } => {
            let w: [u8; 4] = raw.get(off..off + 4)?.try_into().ok()?;
            let word = u32::from_le_bytes(w);
            let start = (word & 0xffff) as usize;
            names.id(raw.get(start..start + (word >> 16) as usize)?)
        }
        ref c => names.id(c.bytes(raw)?),
    };
    Some((pid, id))
}

/// A task's priority as an entry byte (`prio + 1`; -1 when the format has none, as the
/// general decoder says), `None` outside -1 ..= 254.
#[inline(always)]
fn prio_byte(raw: &[u8], t: &TaskAccess) -> Option<u8> {
    let p = match &t.prio {
        Some(p) => p.i32(raw)?,
        None => -1,
    };
    u8::try_from(p.checked_add(1)?).ok()
}

/// A `sched_switch` payload.
#[inline(always)]
fn switch(
    raw: &[u8],
    prev: &TaskAccess,
    prev_state: &Int,
    table: &PrevStateTable,
    next: &TaskAccess,
    names: &mut NameIds,
) -> Option<Fields> {
    let (pa, pn) = task(raw, prev, names)?;
    let st = prev_state.u64(raw)?;
    let (na, nn) = task(raw, next, names)?;
    Some((
        SchedRecordKind::Switch,
        (pa, na, table.decode(st), 0),
        (pn, nn),
    ))
}

/// A `sched_waking` / `sched_wakeup(_new)` payload.
#[inline(always)]
fn wakeup(
    raw: &[u8],
    kind: SchedRecordKind,
    t: &TaskAccess,
    target_cpu: Option<&Int>,
    names: &mut NameIds,
) -> Option<Fields> {
    let (a, n) = task(raw, t, names)?;
    let b = match target_cpu {
        Some(c) => u32::try_from(c.i64(raw)?).map_or(-1, |c| c as Tid),
        None => -1,
    };
    Some((kind, (a, b, PrevState::default(), 0), (n, NO_NAME)))
}

/// A `sched_stat_runtime` payload.
#[inline(always)]
fn stat_runtime(raw: &[u8], t: &TaskAccess, runtime: &Int, names: &mut NameIds) -> Option<Fields> {
    let (a, n) = task(raw, t, names)?;
    let v = runtime.u64(raw)?;
    Some((
        SchedRecordKind::StatRuntime,
        (a, 0, PrevState::default(), v),
        (n, NO_NAME),
    ))
}

/// Sorts the entries after the last round end by time, stably (file order on ties), given
/// where they go back in time (`descents`, indices in `out.entries`, increasing): each
/// piece of a round between two hand-overs or round ends arrives sorted, so the receiver's
/// stable sort of a round is a merge of a few runs, with the same result.
pub(super) fn sort_piece(out: &mut Walked, descents: &[usize], scratch: &mut Vec<Entry>) {
    let from = out.round_ends.last().copied().unwrap_or(0);
    if let Some(piece) = out.entries.get_mut(from..) {
        merge_sorted_runs(piece, descents.iter().map(|d| d - from), scratch);
    }
}

/// [`sort_piece`] finding the descents itself (tests build pieces without a walker).
#[cfg(test)]
pub(super) fn sort_last_piece(out: &mut Walked) {
    let from = out.round_ends.last().copied().unwrap_or(0);
    let descents: Vec<usize> = run_starts(out.entries.get(from..).unwrap_or(&[]))
        .map(|i| from + i)
        .collect();
    sort_piece(out, &descents, &mut Vec::new());
}

/// Where `v` goes back in time: the starts of its sorted runs after the first.
fn run_starts(v: &[Entry]) -> impl Iterator<Item = usize> + '_ {
    (1..v.len()).filter(|&i| v[i].rec.ts < v[i - 1].rec.ts)
}

/// Sorts entries made of runs, each sorted by time and in file order among equal times
/// (a walker's piece: one run per CPU buffer read; a receiver's round: sorted pieces), by
/// time, stably (the walker knows the runs: [`sort_piece`]; tests do not).
#[cfg(test)]
pub(super) fn sort_by_time(v: &mut [Entry], scratch: &mut Vec<Entry>) {
    let starts: Vec<usize> = run_starts(v).collect();
    merge_sorted_runs(v, starts, scratch);
}

/// [`sort_by_time`] given the starts of the runs after the first (`starts`, increasing,
/// inside `v`): adjacent runs are merged pairwise through `scratch` until one is left (a
/// natural merge sort; the standard stable sort would allocate a buffer per call).
fn merge_sorted_runs(
    v: &mut [Entry],
    starts: impl IntoIterator<Item = usize>,
    scratch: &mut Vec<Entry>,
) {
    let mut starts = starts.into_iter().peekable();
    // One run (sorted already): no work, no allocation.
    if starts.peek().is_none() {
        return;
    }
    let mut bounds: Vec<usize> = std::iter::once(0)
        .chain(starts)
        .chain(std::iter::once(v.len()))
        .collect();
    while bounds.len() > 2 {
        let mut next = Vec::with_capacity(bounds.len() / 2 + 2);
        let mut i = 0;
        while i + 2 < bounds.len() {
            let (lo, mid, hi) = (bounds[i], bounds[i + 1], bounds[i + 2]);
            merge_runs(&mut v[lo..hi], mid - lo, scratch);
            next.push(lo);
            i += 2;
        }
        // An odd run out stays as it is.
        next.extend_from_slice(&bounds[i..]);
        if next.last() != Some(&v.len()) {
            next.push(v.len());
        }
        bounds = next;
    }
}

/// Merges the sorted runs `v[..mid]` and `v[mid..]` stably (the left run first on ties).
/// Entries already in place are skipped (the left run's head older than the right run,
/// the right run's tail not older than the left run); the loop picks each entry without a
/// branch on the comparison (the runs of two CPUs interleave unpredictably).
fn merge_runs(v: &mut [Entry], mid: usize, scratch: &mut Vec<Entry>) {
    let (Some(first_right), Some(last_left)) =
        (v.get(mid), mid.checked_sub(1).and_then(|i| v.get(i)))
    else {
        return;
    };
    let (first_right, last_left) = (first_right.rec.ts, last_left.rec.ts);
    let lo = v[..mid].partition_point(|e| e.rec.ts <= first_right);
    let hi = mid + v[mid..].partition_point(|e| e.rec.ts < last_left);
    let v = &mut v[lo..hi];
    let mid = mid - lo;
    scratch.clear();
    scratch.extend_from_slice(&v[..mid]);
    let (mut a, mut b, mut k) = (0, mid, 0);
    // `k < b` while the left run is not used up, so no unread entry is overwritten.
    while a < scratch.len() && b < v.len() {
        let take_right = v[b].rec.ts < scratch[a].rec.ts;
        let e = *if take_right { &v[b] } else { &scratch[a] };
        v[k] = e;
        b += usize::from(take_right);
        a += usize::from(!take_right);
        k += 1;
    }
    while a < scratch.len() {
        v[k] = scratch[a];
        a += 1;
        k += 1;
    }
}

/// Fills `r` from a generally decoded event kind (the encoder's rule) and returns the name
/// ids `(n1, n2)` it carries.
fn from_kind(kind: &EventKind, r: &mut SchedRecord, names: &mut NameIds) -> (u32, u32) {
    let [n1, n2] = fill_from_kind(kind, r);
    let mut id = |c: Option<&Comm>| c.map_or(NO_NAME, |c| names.id_of(*c));
    (id(n1), id(n2))
}
