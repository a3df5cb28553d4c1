//! One CPU's ring-buffer pages decoded straight into [`CpuRec`]s: a [`SchedRecord`] plus
//! the per-CPU ids of the task names it carries (the merge turns those into the stream's
//! `PayloadComm` records).
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
//! a note, with the general reader's wording (shared functions), kept per CPU. A bad page
//! or item, an unknown event id or a short record (the general reader skips those) is a
//! [`LeanBail`].
//!
//! Names: raw `comm` bytes (≤ 16, zero-padded into a `u128`) go through a direct-mapped
//! cache to a per-CPU id; a miss decodes the [`Comm`] and interns it, so equal ids mean
//! equal names. Ids are handed out in order; each run carries the names first used in it.

use std::collections::HashMap;
use std::sync::Arc;

use stallscope_model::{Comm, DataQuality, EventKind, SchedRecord, SchedRecordKind, Tid};

use stallscope_model::sched_record::LOST_UNKNOWN;

use crate::lean::LeanBail;
use crate::ringbuf::{MissedEvents, PageRecords};
use crate::tracefs_format::{
    CommCache, EventFormat, IntAccessor, PrevStateTable, StrAccessor, TracepointDecoder,
};

use super::super::cpu_stream::{note_discarded, note_missed, Tables};
use super::super::options::CpuArea;

/// "No name" in [`CpuRec::names`].
pub const NO_NAME: u32 = u32::MAX;

/// A record of one CPU with the per-CPU ids of the names it carries.
#[derive(Clone, Copy, Debug)]
pub struct CpuRec {
    /// The record (`value` of a `Fork` is filled by the merge).
    pub rec: SchedRecord,
    /// Name ids: Switch [prev, next]; wakeups, migrate, stat_runtime, fork [task, –].
    pub names: [u32; 2],
}

/// `comm`, `pid` and optional `prio` of one task.
#[derive(Clone, Copy, Debug)]
struct Task {
    comm: StrAccessor,
    pid: IntAccessor,
    prio: Option<IntAccessor>,
}

impl Task {
    fn new(f: &EventFormat, t: &Tables, comm: &str, pid: &str, prio: &str) -> Option<Task> {
        let endian = t.layout.endian;
        Some(Task {
            comm: StrAccessor::new(f.field(comm)?, endian)?,
            pid: IntAccessor::new(f.field(pid)?, endian)?,
            prio: f.field(prio).and_then(|p| IntAccessor::new(p, endian)),
        })
    }

    /// `(pid, name id)`, or `None` when a field the general decoder reads is outside `rec`.
    #[inline]
    fn read(&self, rec: &[u8], names: &mut Interner) -> Option<(Tid, u32)> {
        if let Some(p) = self.prio {
            p.get_i32(rec)?;
        }
        let pid = self.pid.get_i32(rec)?;
        Some((pid, names.intern(self.comm.bytes(rec)?)))
    }
}

/// How records of one event id are decoded.
enum Decoder {
    Switch {
        prev: Task,
        next: Task,
        prev_state: IntAccessor,
        table: Box<PrevStateTable>,
    },
    Wake {
        kind: SchedRecordKind,
        task: Task,
        target_cpu: Option<IntAccessor>,
    },
    Migrate {
        task: Task,
        orig_cpu: IntAccessor,
        dest_cpu: IntAccessor,
    },
    StatRuntime {
        task: Task,
        runtime: IntAccessor,
        vruntime: Option<IntAccessor>,
    },
    /// Through the general decoder (events the lean analyses rarely see).
    Full,
}

/// Decoders by event id, built from the general reader's tables.
pub struct Decoders {
    by_id: Vec<Option<Decoder>>,
}

impl Decoders {
    /// A lean decoder for every id the general reader decodes; the native scheduler
    /// events get fast field access, everything else goes through the general decoder.
    pub fn new(t: &Tables, formats: &[EventFormat]) -> Decoders {
        let mut by_id: Vec<Option<Decoder>> = Vec::new();
        by_id.resize_with(t.decoders.len(), || None);
        for (id, d) in t.decoders.iter().enumerate() {
            let Some(d) = d else { continue };
            // The format the general decoder was built from (the last one with this id).
            let f = formats.iter().rev().find(|f| f.id as usize == id);
            let fast = f.and_then(|f| fast_decoder(&d.decoder, f, t));
            by_id[id] = Some(fast.unwrap_or(Decoder::Full));
        }
        Decoders { by_id }
    }
}

/// The fast decoder of a natively decoded scheduler event, with the general decoder's
/// field names (`None`: use the general decoder).
fn fast_decoder(general: &TracepointDecoder, f: &EventFormat, t: &Tables) -> Option<Decoder> {
    let e = t.layout.endian;
    let int = |name: &str| f.field(name).and_then(|x| IntAccessor::new(x, e));
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
    /// The id of the name in `raw` (the field's bytes; the name stops at the first NUL).
    #[inline]
    pub fn intern(&mut self, raw: &[u8]) -> u32 {
        if raw.len() > 16 {
            return self.intern_comm(Comm::from_bytes(raw));
        }
        let mut k = [0u8; 16];
        k[..raw.len()].copy_from_slice(raw);
        let key = u128::from_le_bytes(k);
        let folded = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
        let slot = (folded.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize % CACHE_SLOTS;
        if self.keys[slot] == key && self.ids[slot] != NO_NAME {
            return self.ids[slot];
        }
        // Bytes equal up to zero padding give the same name, so the key stands for it.
        let id = self.intern_comm(Comm::from_bytes(raw));
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
    /// Names first used in these records, in per-CPU id order.
    pub new_names: Vec<Comm>,
}

/// Plain data is read in blocks of about this size (whole sub-buffers).
const BLOCK: usize = 1 << 20;

/// Decoding state of one CPU.
pub struct CpuDecoder {
    tables: Arc<Tables>,
    decoders: Arc<Decoders>,
    /// CPU number.
    pub cpu: u32,
    next_off: u64,
    end: u64,
    buf: Vec<u8>,
    buf_off: u64,
    page_pos: usize,
    names: Interner,
    comm_cache: CommCache,
    /// Data-quality notes of this CPU (the general reader's, in file order).
    pub dq: DataQuality,
    /// Events the missed-events markers reported lost (unknown counts as 0).
    pub inline_lost: u64,
}

impl CpuDecoder {
    /// A decoder of `area` (plain, uncompressed data).
    pub fn new(tables: Arc<Tables>, decoders: Arc<Decoders>, area: &CpuArea) -> CpuDecoder {
        CpuDecoder {
            tables,
            decoders,
            cpu: area.cpu,
            next_off: area.offset,
            end: area.offset.saturating_add(area.size),
            buf: Vec::new(),
            buf_off: 0,
            page_pos: 0,
            names: Interner::default(),
            comm_cache: CommCache::default(),
            dq: DataQuality::default(),
            inline_lost: 0,
        }
    }

    /// Appends whole pages' records to `run` until it holds at least `min` records;
    /// `Ok(false)` when the CPU's data ended (the run may still have received records).
    /// `read` counts the bytes read from the file.
    pub fn fill(&mut self, run: &mut Run, min: usize, read: &mut u64) -> Result<bool, LeanBail> {
        let subbuf = self.tables.layout.subbuf_size.max(1);
        while run.recs.len() < min {
            if self.page_pos >= self.buf.len() && !self.refill(read)? {
                self.names.take_new(&mut run.new_names);
                return Ok(false);
            }
            let buf = std::mem::take(&mut self.buf);
            let end = (self.page_pos + subbuf).min(buf.len());
            let at = self.buf_off + self.page_pos as u64;
            let r = self.page(&buf[self.page_pos..end], at, run);
            self.page_pos = end;
            self.buf = buf;
            r?;
        }
        self.names.take_new(&mut run.new_names);
        Ok(true)
    }

    fn refill(&mut self, read: &mut u64) -> Result<bool, LeanBail> {
        self.page_pos = 0;
        if self.next_off >= self.end {
            self.buf.clear();
            return Ok(false);
        }
        let t = &self.tables;
        let subbuf = t.layout.subbuf_size.max(1);
        let block = (BLOCK / subbuf).max(1) * subbuf;
        let n = usize::try_from(self.end - self.next_off).map_or(block, |left| left.min(block));
        if let Err(e) = t.src.read_into(self.next_off, n, &mut self.buf) {
            return Err(LeanBail::new(format!("read error: {e}")));
        }
        if self.buf.len() < n {
            return Err(LeanBail::new("CPU data ends early"));
        }
        self.buf_off = self.next_off;
        self.next_off += n as u64;
        *read += n as u64;
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
            run.recs.push(CpuRec {
                rec: r,
                names: [NO_NAME; 2],
            });
        }
        for item in items.by_ref() {
            let item =
                item.map_err(|e| LeanBail::new(format!("CPU {cpu} sub-buffer at {at:#x}: {e}")))?;
            let payload = item.payload;
            let pos = at + item.offset as u64;
            let id = match t.type_field {
                Some(a) => a.get_u64(payload),
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
            let mut r = SchedRecord::new(SchedRecordKind::Other, t.adjust.apply(item.ts), cpu, pos);
            let mut names = [NO_NAME; 2];
            let ok = match d {
                Decoder::Switch {
                    prev,
                    next,
                    prev_state,
                    table,
                } => (|| {
                    let (a, na) = prev.read(payload, &mut self.names)?;
                    let state = prev_state.get_u64(payload)?;
                    let (b, nb) = next.read(payload, &mut self.names)?;
                    r.kind = SchedRecordKind::Switch;
                    (r.a, r.b, r.prev_state) = (a, b, table.decode(state));
                    names = [na, nb];
                    Some(())
                })(),
                Decoder::Wake {
                    kind,
                    task,
                    target_cpu,
                } => (|| {
                    let (a, na) = task.read(payload, &mut self.names)?;
                    r.b = match target_cpu {
                        Some(c) => u32::try_from(c.get_i64(payload)?).map_or(-1, |c| c as Tid),
                        None => -1,
                    };
                    r.kind = *kind;
                    r.a = a;
                    names[0] = na;
                    Some(())
                })(),
                Decoder::Migrate {
                    task,
                    orig_cpu,
                    dest_cpu,
                } => (|| {
                    let (a, na) = task.read(payload, &mut self.names)?;
                    orig_cpu.get_i64(payload)?;
                    r.b = dest_cpu.get_i64(payload)? as u32 as Tid;
                    r.kind = SchedRecordKind::Migrate;
                    r.a = a;
                    names[0] = na;
                    Some(())
                })(),
                Decoder::StatRuntime {
                    task,
                    runtime,
                    vruntime,
                } => (|| {
                    let (a, na) = task.read(payload, &mut self.names)?;
                    r.value = runtime.get_u64(payload)?;
                    if let Some(v) = vruntime {
                        v.get_u64(payload)?;
                    }
                    r.kind = SchedRecordKind::StatRuntime;
                    r.a = a;
                    names[0] = na;
                    Some(())
                })(),
                Decoder::Full => self.full(id, payload, &mut r, &mut names),
            };
            if ok.is_none() {
                return Err(LeanBail::new(format!(
                    "offset {pos:#x}: record too short for its format"
                )));
            }
            run.recs.push(CpuRec { rec: r, names });
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
        let n = &mut self.names;
        match kind {
            EventKind::Switch(s) => {
                r.kind = SchedRecordKind::Switch;
                (r.a, r.b, r.prev_state) = (s.prev.pid, s.next.pid, s.prev_state);
                *names = [n.intern_comm(s.prev.comm), n.intern_comm(s.next.comm)];
            }
            EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => {
                r.kind = match kind {
                    EventKind::Waking(_) => SchedRecordKind::Waking,
                    EventKind::Wakeup(_) => SchedRecordKind::Wakeup,
                    _ => SchedRecordKind::WakeupNew,
                };
                r.a = w.task.pid;
                r.b = w.target_cpu.map_or(-1, |c| c as Tid);
                names[0] = n.intern_comm(w.task.comm);
            }
            EventKind::Migrate(m) => {
                r.kind = SchedRecordKind::Migrate;
                (r.a, r.b) = (m.task.pid, m.dest_cpu as Tid);
                names[0] = n.intern_comm(m.task.comm);
            }
            EventKind::StatRuntime(s) => {
                r.kind = SchedRecordKind::StatRuntime;
                (r.a, r.value) = (s.task.pid, s.runtime);
                names[0] = n.intern_comm(s.task.comm);
            }
            EventKind::Fork {
                parent_pid,
                child_pid,
                child_comm,
                ..
            } => {
                r.kind = SchedRecordKind::Fork;
                (r.a, r.b) = (child_pid, parent_pid);
                names[0] = n.intern_comm(child_comm);
            }
            // Not produced by a trace.dat decoder; the general path would hand them on
            // with meanings this lean path does not model.
            EventKind::TaskComm { .. } | EventKind::Lost { .. } => return None,
            EventKind::Exit(_)
            | EventKind::Exec { .. }
            | EventKind::Generic(_)
            | EventKind::Block(_) => {}
        }
        Some(())
    }
}
