//! [`Plan`]: how the lean walker decodes each attr's records, resolved once at open from the
//! general reader's own metadata (the [`Pipeline`] after it read the header, the attrs and
//! the feature sections), so both paths agree on every attr, id and field.
//!
//! Field offsets come from the file's tracepoint format files (looked up by name, as the
//! general decoder does), never from constants:
//!
//! | attr's general decoder      | lean decoding                                         |
//! |-----------------------------|-------------------------------------------------------|
//! | `sched_switch`              | prev/next comm, pid, [prio]; prev_state via its table |
//! | `sched_waking/wakeup(_new)` | comm, pid, [prio], [target_cpu]                       |
//! | `sched_stat_runtime`        | comm, pid, runtime, [vruntime]                        |
//! | any other tracepoint        | the general [`TracepointDecoder`] (rare events)       |
//! | not a tracepoint            | an `Other` record                                     |
//!
//! The fields in brackets are read although unused, so that a record too short for them is
//! rejected exactly when the general decoder rejects it.

use stallscope_model::{InputFormat, SchedRecordKind};

use super::super::attr::{AttrIds, Layout};
use super::super::decode::AttrDecoder;
use super::super::pipeline::Pipeline;
use crate::lean::LeanBail;
use crate::tracefs_format::{
    Endian, EventFormat, Field, FieldKind, LocKind, PrevStateTable, StrAccessor, TracepointDecoder,
};

/// A scalar field (1, 2, 4 or 8 bytes, little endian), read like the general decoder's
/// `IntAccessor`.
#[derive(Clone, Copy, Debug)]
pub struct Int {
    off: usize,
    size: u8,
    signed: bool,
}

impl Int {
    /// For a scalar field of 1, 2, 4 or 8 bytes (the general decoder's rule).
    fn of(f: &Field) -> Option<Int> {
        let size = u8::try_from(f.size).ok()?;
        (f.kind == FieldKind::Scalar && matches!(size, 1 | 2 | 4 | 8)).then_some(Int {
            off: f.offset as usize,
            size,
            signed: f.signed,
        })
    }

    /// Bytes of the record it needs.
    fn end(&self) -> usize {
        self.off + usize::from(self.size)
    }

    /// Sign-extended when signed.
    #[inline(always)]
    pub fn i64(&self, rec: &[u8]) -> Option<i64> {
        if self.signed {
            Endian::Little.int(rec, self.off, self.size)
        } else {
            Endian::Little
                .uint(rec, self.off, self.size)
                .map(|v| v as i64)
        }
    }

    /// As `i32`, truncating wider fields (pids).
    #[inline(always)]
    pub fn i32(&self, rec: &[u8]) -> Option<i32> {
        if self.size == 4 {
            let b: [u8; 4] = rec.get(self.off..self.off + 4)?.try_into().ok()?;
            return Some(i32::from_le_bytes(b));
        }
        self.i64(rec).map(|v| v as i32)
    }

    /// Zero-extended raw value.
    #[inline(always)]
    pub fn u64(&self, rec: &[u8]) -> Option<u64> {
        if self.size == 8 {
            let b: [u8; 8] = rec.get(self.off..self.off + 8)?.try_into().ok()?;
            return Some(u64::from_le_bytes(b));
        }
        Endian::Little.uint(rec, self.off, self.size)
    }
}

/// `comm` and `pid` of one task in a record.
#[derive(Clone, Copy, Debug)]
pub struct TaskAccess {
    /// Name.
    pub comm: StrAccessor,
    /// Task id.
    pub pid: Int,
    /// Priority, when the format has it (read by the event-building mode).
    pub prio: Option<Int>,
}

/// How the payload of one attr's samples is decoded.
#[derive(Clone, Debug)]
pub enum Payload {
    /// `sched_switch`.
    Switch {
        /// Bytes of payload every field read needs (`prio`s included: the general decoder
        /// reads them).
        need: usize,
        /// Previous task.
        prev: TaskAccess,
        /// Raw `prev_state`.
        prev_state: Int,
        /// Its letters (the general decoder's table).
        table: Box<PrevStateTable>,
        /// Next task.
        next: TaskAccess,
    },
    /// `sched_waking` / `sched_wakeup` / `sched_wakeup_new`.
    Wakeup {
        /// Bytes of payload needed.
        need: usize,
        /// Which of the three.
        kind: SchedRecordKind,
        /// The woken task.
        task: TaskAccess,
        /// Target CPU.
        target_cpu: Option<Int>,
    },
    /// `sched_stat_runtime`.
    StatRuntime {
        /// Bytes of payload needed (`vruntime` included).
        need: usize,
        /// The task.
        task: TaskAccess,
        /// Runtime.
        runtime: Int,
        /// Whether the format has `vruntime` (older kernels): the event-building mode
        /// then builds these events with the general decoder.
        vruntime: bool,
    },
    /// Any other tracepoint: decoded by the general decoder ([`Plan::general`]).
    General,
    /// Not a tracepoint: an `Other` record.
    NotTracepoint,
}

/// Where a SAMPLE record's fields are when every field before RAW has a fixed size.
#[derive(Clone, Copy, Debug)]
pub struct SampleAt {
    /// TIME.
    pub time: usize,
    /// TID (the sample's pid, tid: the tid is the u32 at `tid + 4`).
    pub tid: Option<usize>,
    /// CPU (u32).
    pub cpu: Option<usize>,
    /// The u32 size in front of the RAW data.
    pub raw: Option<usize>,
    /// Bytes the record needs for every field the general parser reads before RAW's data.
    pub min_len: usize,
}

impl SampleAt {
    fn of(l: &Layout) -> Option<SampleAt> {
        let f = l.fixed?;
        let ends = [
            f.ip.map(|o| o + 8),
            f.tid.map(|o| o + 8),
            f.time.map(|o| o + 8),
            f.cpu.map(|o| o + 4),
            f.period.map(|o| o + 8),
            f.raw.map(|o| o + 4),
        ];
        Some(SampleAt {
            time: f.time?,
            tid: f.tid,
            cpu: f.cpu,
            raw: f.raw,
            min_len: ends.iter().flatten().copied().max().unwrap_or(8),
        })
    }
}

/// Per-attr layout and payload decoding, and the sample-id lookup.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Sample layouts (index = attr).
    pub layouts: Vec<Layout>,
    /// Payload decoding (index = attr).
    pub payloads: Vec<Payload>,
    /// Fixed sample offsets, when the layout has them (index = attr).
    pub samples: Vec<Option<SampleAt>>,
    /// Which attr a record belongs to (the general reader's maps).
    pub ids: AttrIds,
    /// Whether the trace declares `sched_waking`.
    pub waking_declared: bool,
    /// The general decoder of every tracepoint attr (index = attr): for the `General`
    /// payloads, and for the records the event-building mode does not build itself.
    pub general: Vec<Option<Box<TracepointDecoder>>>,
    /// Per attr: a software `dummy` event (perf's carrier of side-band records: no
    /// samples expected).
    pub dummy: Vec<bool>,
}

impl Plan {
    /// The plan for an opened file-mode pipeline; a bail-out when anything is outside what
    /// the lean path models.
    pub fn of(p: &Pipeline) -> Result<Plan, LeanBail> {
        if p.meta.format != Some(InputFormat::PerfData) {
            return Err(LeanBail::new("not a file-mode perf.data"));
        }
        if p.endian != Endian::Little {
            return Err(LeanBail::new("big-endian perf.data"));
        }
        if p.meta.compression.is_some() {
            return Err(LeanBail::new("compressed input"));
        }
        if !p.dq.is_empty() {
            return Err(LeanBail::new("metadata with data-quality notes"));
        }
        if p.attrs.is_empty() || p.attrs.len() >= usize::from(u16::MAX) {
            return Err(LeanBail::new("no attrs, or too many"));
        }
        let tables = p.tables();
        let mut payloads = Vec::with_capacity(p.attrs.len());
        for (i, d) in tables.decoders.iter().enumerate() {
            payloads.push(match d {
                AttrDecoder::Other { .. } => Payload::NotTracepoint,
                AttrDecoder::MissingFormat { .. } => {
                    return Err(LeanBail::new("tracepoint without format"))
                }
                AttrDecoder::Tracepoint(t) => {
                    let td = p
                        .tracing
                        .as_ref()
                        .ok_or_else(|| LeanBail::new("no tracing data"))?;
                    if td.endian != Endian::Little {
                        return Err(LeanBail::new("big-endian tracing data"));
                    }
                    let config = p.attrs.get(i).map_or(u64::MAX, |a| a.config);
                    let f = td
                        .event_by_id(config)
                        .ok_or_else(|| LeanBail::new("tracepoint format vanished"))?;
                    payload_of(t, f).ok_or_else(|| LeanBail::new("unexpected sched format"))?
                }
            });
        }
        if payloads.len() != p.attrs.len() || tables.layouts.len() != p.attrs.len() {
            return Err(LeanBail::new("decode tables out of step with the attrs"));
        }
        let general = tables
            .decoders
            .iter()
            .map(|d| match d {
                AttrDecoder::Tracepoint(t) => Some(Box::new(t.clone())),
                _ => None,
            })
            .collect();
        // PERF_TYPE_SOFTWARE (1), PERF_COUNT_SW_DUMMY (9)
        let dummy = p
            .attrs
            .iter()
            .map(|a| a.kind == 1 && a.config == 9)
            .collect();
        Ok(Plan {
            dummy,
            general,
            samples: tables.layouts.iter().map(SampleAt::of).collect(),
            layouts: tables.layouts.clone(),
            payloads,
            ids: p.ids.clone(),
            waking_declared: p
                .meta
                .declared_events
                .iter()
                .any(|e| e == "sched_waking" || e.ends_with(":sched_waking")),
        })
    }

    /// Whether the event-building mode (walkers that keep what a whole [`Event`] needs:
    /// see `super::walk`) can read this file: every attr a tracepoint whose samples have
    /// TID and fixed offsets (so no call chain, which entries do not carry), or perf's
    /// `dummy` side-band carrier (a sample of it is a bail-out).
    ///
    /// [`Event`]: stallscope_model::Event
    pub fn check_events_mode(&self) -> Result<(), LeanBail> {
        for (i, p) in self.payloads.iter().enumerate() {
            if matches!(p, Payload::NotTracepoint) {
                if self.dummy.get(i) == Some(&true) {
                    continue;
                }
                return Err(LeanBail::new("an attr that is not a tracepoint"));
            }
            match self.samples.get(i) {
                Some(Some(s)) if s.tid.is_some() => {}
                _ => return Err(LeanBail::new("samples without TID or with a call chain")),
            }
            if self.general.get(i).is_none_or(|g| g.is_none()) {
                return Err(LeanBail::new("a tracepoint without its general decoder"));
            }
        }
        Ok(())
    }

    /// The attr of a record (the general reader's rule: [`AttrIds::attr_of`]).
    #[inline]
    pub fn attr_of(&self, rec: &[u8], is_sample: bool) -> Option<u16> {
        self.ids.attr_of(rec, is_sample, Endian::Little)
    }
}

/// Bytes of a record a string field needs before its data (the locator, or the array).
fn str_end(f: &Field) -> usize {
    let off = f.offset as usize;
    match f.kind {
        FieldKind::FixedArray { .. } => off + f.size as usize,
        FieldKind::Dynamic { loc, .. } => match loc {
            LocKind::DataLoc4 | LocKind::RelLoc4 => off + 4,
            LocKind::DataLoc2 | LocKind::RelLoc2 => off + 2,
        },
        FieldKind::RestOfRecord { .. } | FieldKind::Scalar => off,
    }
}

/// The lean decoding of a tracepoint whose general decoder is `t` and format `f` (fields
/// resolved by the names the general decoder uses); `None` when a field it resolved cannot
/// be resolved here (never expected).
fn payload_of(t: &TracepointDecoder, f: &EventFormat) -> Option<Payload> {
    let e = Endian::Little;
    let mut need = 0usize;
    let mut int = |n: &str| {
        let i = f.field(n).and_then(Int::of)?;
        need = need.max(i.end());
        Some(i)
    };
    let task = |c: &str, p: &str, pr: Option<&str>, int: &mut dyn FnMut(&str) -> Option<Int>| {
        let cf = f.field(c)?;
        let comm = StrAccessor::new(cf, e)?;
        let pid = int(p)?;
        // Optional: read (bounds) only when the format has it.
        let prio = pr.and_then(&mut *int);
        Some((TaskAccess { comm, pid, prio }, str_end(cf)))
    };
    let payload = match t {
        TracepointDecoder::Switch { table, .. } => {
            let (prev, a) = task("prev_comm", "prev_pid", Some("prev_prio"), &mut int)?;
            let prev_state = int("prev_state")?;
            let (next, b) = task("next_comm", "next_pid", Some("next_prio"), &mut int)?;
            Payload::Switch {
                need: a.max(b),
                prev,
                prev_state,
                table: table.clone(),
                next,
            }
        }
        TracepointDecoder::Wakeup { which, .. } => {
            let (task, a) = task("comm", "pid", Some("prio"), &mut int)?;
            let target_cpu = int("target_cpu");
            Payload::Wakeup {
                need: a,
                kind: match which {
                    0 => SchedRecordKind::Waking,
                    1 => SchedRecordKind::Wakeup,
                    _ => SchedRecordKind::WakeupNew,
                },
                task,
                target_cpu,
            }
        }
        TracepointDecoder::StatRuntime { .. } => {
            let (task, a) = task("comm", "pid", None, &mut int)?;
            let runtime = int("runtime")?;
            let vruntime = int("vruntime").is_some();
            Payload::StatRuntime {
                need: a,
                task,
                runtime,
                vruntime,
            }
        }
        _ => return Some(Payload::General),
    };
    // The int fields' ends were collected in `need`.
    Some(match payload {
        Payload::Switch {
            need: n,
            prev,
            prev_state,
            table,
            next,
        } => Payload::Switch {
            need: n.max(need),
            prev,
            prev_state,
            table,
            next,
        },
        Payload::Wakeup {
            need: n,
            kind,
            task,
            target_cpu,
        } => Payload::Wakeup {
            need: n.max(need),
            kind,
            task,
            target_cpu,
        },
        Payload::StatRuntime {
            need: n,
            task,
            runtime,
            vruntime,
        } => Payload::StatRuntime {
            need: n.max(need),
            task,
            runtime,
            vruntime,
        },
        other => other,
    })
}
