//! [`Decoder`]: turns released perf records into [`Event`]s, using [`DecodeTables`] (one
//! sample layout and one decoder per attr, built by the pipeline whenever metadata changes
//! and shared read-only). It keeps the per-reader state of decoding: the task-name cache and
//! the tid → comm map fed by COMM / FORK / EXIT records.
//!
//! * SAMPLE of a tracepoint attr → the [`TracepointDecoder`]'s kind (sched events native,
//!   others generic); of another attr → a generic event named after the attr with `ip` and
//!   `period`; `ts` = sample time, `cpu` = sample cpu (0 when absent), `pid` = sample tid.
//! * COMM → [`EventKind::TaskComm`]; FORK copies the parent's name to the child; EXIT
//!   forgets the task; LOST / LOST_SAMPLES → [`EventKind::Lost`] and `lost_events`.
//!
//! Problems are counted in the [`DataQuality`] passed in (the caller owns it: the
//! pipeline's in inline mode, the caller thread's own in worker mode).

use rustc_hash::FxHashMap;
use stallscope_model::{
    Comm, DataQuality, Event, EventKind, FieldValue, GenericEvent, Mapping, Problem, Span, SpanPos,
    Tid,
};

use super::attr::{parse_sample, parse_trailer, Layout};
use super::order::Pending;
use super::pipeline::rt;
use crate::tracefs_format::{CommCache, Endian, TracepointDecoder};

/// How samples of one attr are turned into events.
#[derive(Debug)]
pub enum AttrDecoder {
    /// A tracepoint with its format.
    Tracepoint(TracepointDecoder),
    /// A tracepoint whose format is not in the tracing data.
    MissingFormat {
        /// `sched` of `sched:sched_switch`, when the name says.
        system: Option<String>,
        /// Event name.
        name: String,
    },
    /// Any other event (`cpu-clock`, …).
    Other {
        /// perf's name for it.
        name: String,
    },
}

/// Everything needed to decode records, per attr (index = attr index).
#[derive(Debug, Default)]
pub struct DecodeTables {
    /// Byte order of the records.
    pub endian: Endian,
    /// Input number for spans.
    pub index: u16,
    /// Sample layouts.
    pub layouts: Vec<Layout>,
    /// Decoders.
    pub decoders: Vec<AttrDecoder>,
    /// Mappings are read (MMAP records, and a new process's inherited ones at FORK).
    pub mappings: bool,
}

/// The decoding state of one reader.
pub struct Decoder {
    tables: std::sync::Arc<DecodeTables>,
    names: CommCache,
    comms: FxHashMap<Tid, Comm>,
}

/// An empty event, the slot [`Decoder::decode_into`] fills.
pub(super) const BLANK: Event = Event {
    ts: 0,
    cpu: 0,
    pid: -1,
    span: Span::new(0, SpanPos::Byte(0)),
    kind: EventKind::Lost { count: None },
    callchain: None,
};

impl Decoder {
    /// A decoder using `tables`.
    pub fn new(tables: std::sync::Arc<DecodeTables>) -> Decoder {
        Decoder {
            tables,
            names: CommCache::default(),
            comms: FxHashMap::default(),
        }
    }

    /// Switches to newer tables (after pipe-mode metadata changed).
    pub fn set_tables(&mut self, tables: &std::sync::Arc<DecodeTables>) {
        if !std::sync::Arc::ptr_eq(&self.tables, tables) {
            self.tables = tables.clone();
        }
    }

    /// The event of record `rec` released as `p`, or `None` (side-band-only record, or a
    /// skip counted in `dq`).
    pub fn decode(&mut self, rec: &[u8], p: &Pending, dq: &mut DataQuality) -> Option<Event> {
        let mut ev = BLANK;
        self.decode_into(rec, p, dq, &mut ev).then_some(ev)
    }

    /// [`Decoder::decode`] into `out` in place (a slot of the event batch: the event is
    /// not built in a temporary and copied, see [`TracepointDecoder::decode_into`]).
    /// `false` when the record gives no event; `out` is then partly written, to be dropped.
    #[inline(always)]
    pub fn decode_into(
        &mut self,
        rec: &[u8],
        p: &Pending,
        dq: &mut DataQuality,
        out: &mut Event,
    ) -> bool {
        let rtype = self.tables.endian.u32(rec, 0).unwrap_or(0);
        if rtype == rt::SAMPLE {
            self.sample_event_into(rec, p, dq, out)
        } else {
            match self.side_band_event(rec, p, rtype, dq) {
                Some(ev) => {
                    *out = ev;
                    true
                }
                None => false,
            }
        }
    }

    #[inline(always)]
    fn sample_event_into(
        &mut self,
        rec: &[u8],
        p: &Pending,
        dq: &mut DataQuality,
        out: &mut Event,
    ) -> bool {
        let e = self.tables.endian;
        let Some(s) = parse_sample(rec, &self.tables.layouts[p.attr as usize], e) else {
            dq.add(Problem::PerfBadSample, 1, || {
                format!("offset {:#x}", p.rec().file_off)
            });
            return false;
        };
        let kind = match &self.tables.decoders[p.attr as usize] {
            AttrDecoder::Tracepoint(d) => {
                let decoded = match s.raw {
                    Some(raw) => d.decode_into(raw, &mut self.names, &mut out.kind),
                    None => false,
                };
                if !decoded {
                    dq.add(Problem::PerfBadTracepointRecord, 1, || {
                        format!("offset {:#x}", p.rec().file_off)
                    });
                    return false;
                }
                None
            }
            AttrDecoder::MissingFormat { system, name } => {
                Some(EventKind::Generic(Box::new(GenericEvent {
                    system: system.clone(),
                    name: name.clone(),
                    fields: Vec::new(),
                })))
            }
            AttrDecoder::Other { name } => {
                let mut fields = Vec::new();
                if let Some(ip) = s.ip {
                    fields.push(("ip".to_string(), FieldValue::UInt(ip)));
                }
                // PERF_RECORD_MISC_CPUMODE_MASK of the header: where the ip was (1 kernel,
                // 2 user, 3 hypervisor, 4 guest kernel, 5 guest user), which decides kernel
                // and user frames on kernels whose address ranges do not (32-bit)
                if let Some(misc) = e.u16(rec, 4) {
                    fields.push(("cpumode".to_string(), FieldValue::UInt(u64::from(misc & 7))));
                }
                if let Some(tgid) = s.pid {
                    fields.push(("tgid".to_string(), FieldValue::Int(i64::from(tgid))));
                }
                if let Some(period) = s.period {
                    fields.push(("period".to_string(), FieldValue::UInt(period)));
                }
                Some(EventKind::Generic(Box::new(GenericEvent {
                    system: None,
                    name: name.clone(),
                    fields,
                })))
            }
        };
        if let Some(kind) = kind {
            out.kind = kind;
        }
        out.ts = p.ts;
        out.cpu = s.cpu.unwrap_or(0);
        out.pid = s.tid.unwrap_or(-1);
        out.span = Span::new(self.tables.index, SpanPos::Byte(p.rec().file_off));
        out.callchain = s
            .callchain
            .map(|cc| cc.chunks_exact(8).filter_map(|c| e.u64(c, 0)).collect());
        true
    }

    fn side_band_event(
        &mut self,
        rec: &[u8],
        p: &Pending,
        rtype: u32,
        dq: &mut DataQuality,
    ) -> Option<Event> {
        let e = self.tables.endian;
        let l = &self.tables.layouts[p.attr as usize];
        let (tid, _, cpu) = parse_trailer(rec, l, e);
        let body_end = rec.len().saturating_sub(l.trailer_len).max(8);
        let u32_at = |o: usize| e.u32(rec, o).map(|v| v as i32);
        let kind = match rtype {
            rt::COMM => {
                let (Some(tgid), Some(tid), Some(name)) =
                    (u32_at(8), u32_at(12), rec.get(16..body_end))
                else {
                    return None;
                };
                let comm = Comm::from_bytes(name);
                self.comms.insert(tid, comm);
                EventKind::TaskComm { tgid, tid, comm }
            }
            rt::FORK | rt::EXIT => {
                // u32 pid, ppid, tid, ptid; u64 time.
                if let (Some(tid), Some(ptid)) = (u32_at(16), u32_at(20)) {
                    if rtype == rt::FORK {
                        if let Some(c) = self.comms.get(&ptid).copied() {
                            self.comms.insert(tid, c);
                        }
                    } else {
                        self.comms.remove(&tid);
                    }
                }
                // a new process (not a thread) inherits its parent's mappings: perf
                // records none for it
                match (rtype, u32_at(8), u32_at(12)) {
                    (rt::FORK, Some(pid), Some(ppid)) if self.tables.mappings && pid != ppid => {
                        EventKind::Mapping(Box::new(Mapping {
                            tgid: pid,
                            start: 0,
                            len: 0,
                            pgoff: 0,
                            filename: String::new(),
                            build_id: None,
                            forked_from: Some(ppid),
                        }))
                    }
                    _ => return None,
                }
            }
            rt::MMAP | rt::MMAP2 => {
                // u32 pid, tid; u64 addr, len, pgoff; MMAP2 then has 24 bytes of device,
                // inode and generation (or, with PERF_RECORD_MISC_MMAP_BUILD_ID, u8 size,
                // 3 reserved bytes and a 20-byte build id) and u32 prot, flags; then the
                // file name, NUL-padded.
                let (Some(tgid), Some(start), Some(len), Some(pgoff)) =
                    (u32_at(8), e.u64(rec, 16), e.u64(rec, 24), e.u64(rec, 32))
                else {
                    return None;
                };
                let name_at = if rtype == rt::MMAP { 40 } else { 72 };
                let misc = e.u16(rec, 4).unwrap_or(0);
                let build_id = (rtype == rt::MMAP2 && misc & (1 << 14) != 0)
                    .then(|| {
                        let n = usize::from(*rec.get(40)?).min(20);
                        rec.get(44..44 + n).map(<[u8]>::to_vec)
                    })
                    .flatten();
                let filename = crate::tracefs_format::c_string(rec.get(name_at..body_end)?);
                EventKind::Mapping(Box::new(Mapping {
                    tgid,
                    start,
                    len,
                    pgoff,
                    filename,
                    build_id,
                    forked_from: None,
                }))
            }
            rt::LOST => {
                let count = e.u64(rec, 16);
                dq.add(Problem::LostEvents, count.unwrap_or(1), || {
                    let n = count.map_or("?".to_string(), |c| c.to_string());
                    format!("offset {:#x}: {n} lost at {} ns", p.rec().file_off, p.ts)
                });
                EventKind::Lost { count }
            }
            rt::LOST_SAMPLES => {
                // perf's per-event count of the same drops (written at the end of the
                // recording, with no time): shown apart, never added to lost_events, and no
                // event (its time 0 would stretch the trace's range)
                let count = e.u64(rec, 8);
                dq.add(Problem::LostSamples, count.unwrap_or(1), || {
                    let n = count.map_or("?".to_string(), |c| c.to_string());
                    format!("offset {:#x}: {n} samples lost", p.rec().file_off)
                });
                return None;
            }
            _ => return None,
        };
        let pid = match kind {
            EventKind::TaskComm { tid, .. } => tid,
            _ => tid.unwrap_or(-1),
        };
        Some(Event {
            ts: p.ts,
            cpu: cpu.unwrap_or(0),
            pid,
            span: Span::new(self.tables.index, SpanPos::Byte(p.rec().file_off)),
            kind,
            callchain: None,
        })
    }
}
