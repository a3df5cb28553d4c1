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

use super::super::attr::{IdPos, Layout};
use super::super::decode::AttrDecoder;
use super::super::pipeline::Pipeline;
use crate::lean::LeanBail;
use crate::tracefs_format::{
    Endian, EventFormat, IntAccessor, PrevStateTable, StrAccessor, TracepointDecoder,
};

/// `comm`, `pid`, optional `prio` of one task in a record.
#[derive(Clone, Copy, Debug)]
pub struct TaskAccess {
    /// Name.
    pub comm: StrAccessor,
    /// Task id.
    pub pid: IntAccessor,
    /// Priority (read for the bounds check only).
    pub prio: Option<IntAccessor>,
}

/// How the payload of one attr's samples is decoded.
#[derive(Clone, Debug)]
pub enum Payload {
    /// `sched_switch`.
    Switch {
        /// Previous task.
        prev: TaskAccess,
        /// Raw `prev_state`.
        prev_state: IntAccessor,
        /// Its letters (the general decoder's table).
        table: Box<PrevStateTable>,
        /// Next task.
        next: TaskAccess,
    },
    /// `sched_waking` / `sched_wakeup` / `sched_wakeup_new`.
    Wakeup {
        /// Which of the three.
        kind: SchedRecordKind,
        /// The woken task.
        task: TaskAccess,
        /// Target CPU.
        target_cpu: Option<IntAccessor>,
    },
    /// `sched_stat_runtime`.
    StatRuntime {
        /// The task.
        task: TaskAccess,
        /// Runtime.
        runtime: IntAccessor,
        /// vruntime (read for the bounds check only).
        vruntime: Option<IntAccessor>,
    },
    /// Any other tracepoint: decoded by the general decoder.
    General(Box<TracepointDecoder>),
    /// Not a tracepoint: an `Other` record.
    NotTracepoint,
}

/// Per-attr layout and payload decoding, and the sample-id lookup.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Sample layouts (index = attr).
    pub layouts: Vec<Layout>,
    /// Payload decoding (index = attr).
    pub payloads: Vec<Payload>,
    /// Where the sample id is.
    pub id_pos: IdPos,
    /// `id_dense[id - id_base]` = attr (u16::MAX: none).
    pub id_dense: Vec<u16>,
    /// Smallest id.
    pub id_base: u64,
    /// Every id → attr.
    pub id_to_attr: rustc_hash::FxHashMap<u64, u16>,
    /// Whether the trace declares `sched_waking`.
    pub waking_declared: bool,
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
        Ok(Plan {
            layouts: tables.layouts.clone(),
            payloads,
            id_pos: p.id_pos,
            id_dense: p.id_dense.clone(),
            id_base: p.id_base,
            id_to_attr: p.id_to_attr.clone(),
            waking_declared: p
                .meta
                .declared_events
                .iter()
                .any(|e| e == "sched_waking" || e.ends_with(":sched_waking")),
        })
    }

    /// The attr of a record (the general reader's rule, see `Pipeline::attr_of`).
    #[inline]
    pub fn attr_of(&self, rec: &[u8], is_sample: bool) -> Option<u16> {
        match self.layouts.len() {
            0 => None,
            1 => Some(0),
            _ => {
                let pos = if is_sample {
                    self.id_pos.in_sample
                } else {
                    self.id_pos.from_end.and_then(|d| rec.len().checked_sub(d))
                };
                match pos {
                    Some(p) => match Endian::Little.u64(rec, p)? {
                        0 => Some(0),
                        id => match id
                            .checked_sub(self.id_base)
                            .and_then(|i| self.id_dense.get(usize::try_from(i).ok()?))
                        {
                            Some(&a) if a != u16::MAX => Some(a),
                            _ => self.id_to_attr.get(&id).copied(),
                        },
                    },
                    None => Some(0),
                }
            }
        }
    }
}

/// The lean decoding of a tracepoint whose general decoder is `t` and format `f`; `None`
/// when a field the general decoder resolved cannot be resolved here (never expected).
fn payload_of(t: &TracepointDecoder, f: &EventFormat) -> Option<Payload> {
    let e = Endian::Little;
    let int = |n: &str| f.field(n).and_then(|x| IntAccessor::new(x, e));
    let string = |n: &str| f.field(n).and_then(|x| StrAccessor::new(x, e));
    let task = |c: &str, p: &str, pr: Option<&str>| {
        Some(TaskAccess {
            comm: string(c)?,
            pid: int(p)?,
            prio: pr.and_then(int),
        })
    };
    Some(match t {
        TracepointDecoder::Switch {
            prev_state, table, ..
        } => Payload::Switch {
            prev: task("prev_comm", "prev_pid", Some("prev_prio"))?,
            prev_state: *prev_state,
            table: table.clone(),
            next: task("next_comm", "next_pid", Some("next_prio"))?,
        },
        TracepointDecoder::Wakeup {
            which, target_cpu, ..
        } => Payload::Wakeup {
            kind: match which {
                0 => SchedRecordKind::Waking,
                1 => SchedRecordKind::Wakeup,
                _ => SchedRecordKind::WakeupNew,
            },
            task: task("comm", "pid", Some("prio"))?,
            target_cpu: *target_cpu,
        },
        TracepointDecoder::StatRuntime {
            runtime, vruntime, ..
        } => Payload::StatRuntime {
            task: task("comm", "pid", None)?,
            runtime: *runtime,
            vruntime: *vruntime,
        },
        other => Payload::General(Box::new(other.clone())),
    })
}
