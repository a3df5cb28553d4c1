//! [`TracepointDecoder`]: turns one raw tracepoint record (the ftrace record, `common_type`
//! first) into an [`EventKind`], with every field offset resolved once from the event's
//! format.
//!
//! Natively modeled (system `sched`, matched by name; fields by name, never by offset):
//!
//! | event | fields used (optional in brackets) |
//! |---|---|
//! | `sched_switch` | prev_comm prev_pid [prev_prio] prev_state next_comm next_pid [next_prio] |
//! | `sched_waking`, `sched_wakeup`, `sched_wakeup_new` | comm pid [prio] [target_cpu] |
//! | `sched_migrate_task` | comm pid [prio] orig_cpu dest_cpu |
//! | `sched_process_fork` | parent_comm parent_pid child_comm child_pid |
//! | `sched_process_exit` | comm pid [prio] |
//! | `sched_process_exec` | filename pid old_pid |
//! | `sched_stat_runtime` | comm pid runtime [vruntime] |
//!
//! `comm` fields may be `char[16]` or (6.18) `__data_loc char[]`: [`StrAccessor`] handles
//! both. A modeled event whose format lacks a required field falls back to
//! [`EventKind::Generic`] (the reason is kept for a data-quality note). Every other event is
//! generic: all non-common fields decoded by [`decode_field`].

use stallscope_model::{
    EventKind, GenericEvent, Migrate, PrevState, StatRuntime, Switch, TaskRef, Wakeup,
};

use super::access::{decode_field, IntAccessor, StrAccessor};
use super::comm_cache::CommCache;
use super::endian::Endian;
use super::format_file::{EventFormat, Field};
use super::prev_state::PrevStateTable;

/// Why a record could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeFailure {
    /// The record is shorter than a field, or a `__data_loc` points outside it.
    Truncated,
}

/// `comm`, `pid`, `prio` accessors of one task.
#[derive(Clone, Copy, Debug)]
pub struct TaskFields {
    comm: StrAccessor,
    pid: IntAccessor,
    prio: Option<IntAccessor>,
}

impl TaskFields {
    fn new(r: &Resolver<'_>, comm: &str, pid: &str, prio: &str) -> Result<TaskFields, String> {
        Ok(TaskFields {
            comm: r.string(comm)?,
            pid: r.int(pid)?,
            prio: r.opt_int(prio),
        })
    }

    // Always inlined, like the decoders below: a returned `TaskRef` read back from the stack
    // with wider loads than it was stored with stalls on store forwarding.
    #[inline(always)]
    fn read(&self, rec: &[u8], names: &mut CommCache) -> Option<TaskRef> {
        Some(TaskRef {
            comm: names.get(self.comm.bytes(rec)?),
            pid: self.pid.get_i32(rec)?,
            prio: match self.prio {
                Some(p) => p.get_i32(rec)?,
                None => -1,
            },
        })
    }

    /// [`TaskFields::read`] into `out` in place (`None`, `out` partly written, when the
    /// record is too short).
    #[inline(always)]
    fn read_into(&self, rec: &[u8], names: &mut CommCache, out: &mut TaskRef) -> Option<()> {
        out.comm = names.get(self.comm.bytes(rec)?);
        out.pid = self.pid.get_i32(rec)?;
        out.prio = match self.prio {
            Some(p) => p.get_i32(rec)?,
            None => -1,
        };
        Some(())
    }
}

/// Looks fields up by name while building a decoder.
struct Resolver<'a> {
    format: &'a EventFormat,
    endian: Endian,
}

impl Resolver<'_> {
    fn field(&self, name: &str) -> Result<&Field, String> {
        self.format
            .field(name)
            .ok_or_else(|| format!("{} has no field `{name}`", self.format.full_name()))
    }
    fn int(&self, name: &str) -> Result<IntAccessor, String> {
        let f = self.field(name)?;
        IntAccessor::new(f, self.endian).ok_or_else(|| {
            format!(
                "field `{name}` of {} is not an integer",
                self.format.full_name()
            )
        })
    }
    fn opt_int(&self, name: &str) -> Option<IntAccessor> {
        self.format
            .field(name)
            .and_then(|f| IntAccessor::new(f, self.endian))
    }
    fn string(&self, name: &str) -> Result<StrAccessor, String> {
        let f = self.field(name)?;
        StrAccessor::new(f, self.endian).ok_or_else(|| {
            format!(
                "field `{name}` of {} is not a string",
                self.format.full_name()
            )
        })
    }
}

/// A per-event-id decoder. Build once, apply to every record of that id.
#[derive(Clone, Debug)]
pub enum TracepointDecoder {
    /// `sched_switch`.
    Switch {
        /// Previous task.
        prev: TaskFields,
        /// Raw `prev_state`.
        prev_state: IntAccessor,
        /// Letter table.
        table: Box<PrevStateTable>,
        /// Next task.
        next: TaskFields,
    },
    /// `sched_waking` / `sched_wakeup` / `sched_wakeup_new` (which one is `which`).
    Wakeup {
        /// 0 waking, 1 wakeup, 2 wakeup_new.
        which: u8,
        /// The woken task.
        task: TaskFields,
        /// Target CPU.
        target_cpu: Option<IntAccessor>,
    },
    /// `sched_migrate_task`.
    Migrate {
        /// The task.
        task: TaskFields,
        /// From.
        orig_cpu: IntAccessor,
        /// To.
        dest_cpu: IntAccessor,
    },
    /// `sched_process_fork`.
    Fork {
        /// Parent comm.
        parent_comm: StrAccessor,
        /// Parent pid.
        parent_pid: IntAccessor,
        /// Child comm.
        child_comm: StrAccessor,
        /// Child pid.
        child_pid: IntAccessor,
    },
    /// `sched_process_exit`.
    Exit {
        /// The task.
        task: TaskFields,
    },
    /// `sched_process_exec`.
    Exec {
        /// Path.
        filename: StrAccessor,
        /// Pid after.
        pid: IntAccessor,
        /// Pid before.
        old_pid: IntAccessor,
    },
    /// `sched_stat_runtime`.
    StatRuntime {
        /// comm + pid.
        task: TaskFields,
        /// Runtime.
        runtime: IntAccessor,
        /// vruntime (old kernels).
        vruntime: Option<IntAccessor>,
    },
    /// A block-layer tracepoint ([`super::block`]).
    Block(Box<super::block::BlockDecoder>),
    /// An `ftrace` system event whose record does not follow its format
    /// ([`super::ftrace`]: stacks, trace_marker and trace_printk text).
    Ftrace {
        /// Event name.
        name: String,
        /// The decoder.
        decoder: Box<super::ftrace::FtraceDecoder>,
    },
    /// Everything else.
    Generic {
        /// System.
        system: String,
        /// Name.
        name: String,
        /// Non-common fields.
        fields: Vec<Field>,
        /// Byte order.
        endian: Endian,
    },
}

impl TracepointDecoder {
    /// Builds the decoder for `format`. The second value is why a modeled event fell back to
    /// generic decoding, if it did.
    pub fn new(
        format: &EventFormat,
        endian: Endian,
        table: &PrevStateTable,
    ) -> (TracepointDecoder, Option<String>) {
        if let Some(d) = super::ftrace::FtraceDecoder::new(format, endian) {
            return (
                TracepointDecoder::Ftrace {
                    name: format.name.clone(),
                    decoder: Box::new(d),
                },
                None,
            );
        }
        match super::block::BlockDecoder::new(format, endian) {
            Some(Ok(d)) => return (TracepointDecoder::Block(Box::new(d)), None),
            Some(Err(why)) => return (Self::generic(format, endian), Some(why)),
            None => {}
        }
        let is_sched = format.system == "sched" || format.system.is_empty();
        let built = if is_sched {
            Self::native(format, endian, table)
        } else {
            Ok(None)
        };
        match built {
            Ok(Some(d)) => (d, None),
            Ok(None) => (Self::generic(format, endian), None),
            Err(why) => (Self::generic(format, endian), Some(why)),
        }
    }

    fn generic(format: &EventFormat, endian: Endian) -> TracepointDecoder {
        TracepointDecoder::Generic {
            system: format.system.clone(),
            name: format.name.clone(),
            fields: format.fields.clone(),
            endian,
        }
    }

    fn native(
        format: &EventFormat,
        endian: Endian,
        table: &PrevStateTable,
    ) -> Result<Option<TracepointDecoder>, String> {
        let r = Resolver { format, endian };
        let task = |c: &str, p: &str, pr: &str| TaskFields::new(&r, c, p, pr);
        let wakeup = |which: u8| -> Result<TracepointDecoder, String> {
            Ok(TracepointDecoder::Wakeup {
                which,
                task: task("comm", "pid", "prio")?,
                target_cpu: r.opt_int("target_cpu"),
            })
        };
        Ok(Some(match format.name.as_str() {
            "sched_switch" => TracepointDecoder::Switch {
                prev: task("prev_comm", "prev_pid", "prev_prio")?,
                prev_state: r.int("prev_state")?,
                table: Box::new(
                    PrevStateTable::from_print_fmt(&format.print_fmt)
                        .unwrap_or_else(|| table.clone()),
                ),
                next: task("next_comm", "next_pid", "next_prio")?,
            },
            "sched_waking" => wakeup(0)?,
            "sched_wakeup" => wakeup(1)?,
            "sched_wakeup_new" => wakeup(2)?,
            "sched_migrate_task" => TracepointDecoder::Migrate {
                task: task("comm", "pid", "prio")?,
                orig_cpu: r.int("orig_cpu")?,
                dest_cpu: r.int("dest_cpu")?,
            },
            "sched_process_fork" => TracepointDecoder::Fork {
                parent_comm: r.string("parent_comm")?,
                parent_pid: r.int("parent_pid")?,
                child_comm: r.string("child_comm")?,
                child_pid: r.int("child_pid")?,
            },
            "sched_process_exit" => TracepointDecoder::Exit {
                task: task("comm", "pid", "prio")?,
            },
            "sched_process_exec" => TracepointDecoder::Exec {
                filename: r.string("filename")?,
                pid: r.int("pid")?,
                old_pid: r.int("old_pid")?,
            },
            "sched_stat_runtime" => TracepointDecoder::StatRuntime {
                task: task("comm", "pid", "no prio: stat_runtime has none")?,
                runtime: r.int("runtime")?,
                vruntime: r.opt_int("vruntime"),
            },
            _ => return Ok(None),
        }))
    }

    /// Sets what the trace says about its kernel that some decoders need: the size of
    /// `long` and the printk formats (the `ftrace` stack and `bprint` events).
    pub fn set_trace_context(
        &mut self,
        long_size: u8,
        printk: &std::sync::Arc<super::PrintkFormats>,
    ) {
        if let TracepointDecoder::Ftrace { decoder, .. } = self {
            decoder.set_context(long_size, printk);
        }
    }

    /// The stack a record carries as a callchain in perf's shape (`ftrace:kernel_stack`,
    /// `ftrace:user_stack`); `None` for every other event.
    #[inline]
    pub fn callchain(&self, rec: &[u8]) -> Option<Box<[u64]>> {
        match self {
            TracepointDecoder::Ftrace { decoder, .. } => decoder.callchain(rec),
            _ => None,
        }
    }

    /// True when the `prev_state` table came from the format's own print fmt (sched_switch
    /// only; `None` for other events).
    pub fn prev_state_source(&self) -> Option<&str> {
        match self {
            TracepointDecoder::Switch { table, .. } => Some(table.source()),
            _ => None,
        }
    }

    /// Decodes one record (starting at `common_type`).
    pub fn decode(&self, rec: &[u8]) -> Result<EventKind, DecodeFailure> {
        self.decode_cached(rec, &mut CommCache::default())
    }

    /// Like [`TracepointDecoder::decode`], with task names looked up in `names` (keep one
    /// cache per reader).
    /// Like [`TracepointDecoder::decode_cached`], writing the kind into `out`: the
    /// scheduler switch, wakeups and runtime field by field in place (built in a temporary
    /// and copied, they are read back with wider loads than they were stored with: a
    /// store-forwarding stall per event), the rest by assignment. A slot that already holds
    /// the same kind (an event batch is reused, and most events are one of three kinds) is
    /// written over without being reset first. `false` (and `out` partly written) when the
    /// record is too short; the same records fail as in `decode_cached`.
    #[inline(always)]
    pub fn decode_into(&self, rec: &[u8], names: &mut CommCache, out: &mut EventKind) -> bool {
        match self {
            TracepointDecoder::Switch {
                prev,
                prev_state,
                table,
                next,
            } => {
                if !matches!(out, EventKind::Switch(_)) {
                    reset(out, &BLANK_SWITCH);
                }
                let EventKind::Switch(sw) = out else {
                    return false; // not reached: a switch, as made sure just above
                };
                (|| {
                    prev.read_into(rec, names, &mut sw.prev)?;
                    sw.prev_state = table.decode(prev_state.get_u64(rec)?);
                    next.read_into(rec, names, &mut sw.next)
                })()
                .is_some()
            }
            TracepointDecoder::Wakeup {
                which,
                task,
                target_cpu,
            } => {
                let same = matches!(
                    (which, &*out),
                    (0, EventKind::Waking(_))
                        | (1, EventKind::Wakeup(_))
                        | (2.., EventKind::WakeupNew(_))
                );
                if !same {
                    reset(out, &BLANK_WAKEUPS[usize::from(*which).min(2)]);
                }
                let (EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w)) = out
                else {
                    return false; // not reached: a wakeup, as made sure just above
                };
                (|| {
                    task.read_into(rec, names, &mut w.task)?;
                    w.target_cpu = match target_cpu {
                        Some(t) => u32::try_from(t.get_i64(rec)?).ok(),
                        None => None,
                    };
                    Some(())
                })()
                .is_some()
            }
            TracepointDecoder::StatRuntime {
                task,
                runtime,
                vruntime,
            } => {
                if !matches!(out, EventKind::StatRuntime(_)) {
                    reset(out, &BLANK_STAT_RUNTIME);
                }
                let EventKind::StatRuntime(st) = out else {
                    return false; // not reached: a runtime event, as made sure just above
                };
                (|| {
                    task.read_into(rec, names, &mut st.task)?;
                    st.runtime = runtime.get_u64(rec)?;
                    st.vruntime = match vruntime {
                        Some(v) => Some(v.get_u64(rec)?),
                        None => None,
                    };
                    Some(())
                })()
                .is_some()
            }
            _ => match self.try_decode(rec, names) {
                Some(kind) => {
                    *out = kind;
                    true
                }
                None => false,
            },
        }
    }

    #[inline(always)]
    pub fn decode_cached(
        &self,
        rec: &[u8],
        names: &mut CommCache,
    ) -> Result<EventKind, DecodeFailure> {
        self.try_decode(rec, names).ok_or(DecodeFailure::Truncated)
    }

    #[inline(always)]
    fn try_decode(&self, rec: &[u8], names: &mut CommCache) -> Option<EventKind> {
        Some(match self {
            TracepointDecoder::Switch {
                prev,
                prev_state,
                table,
                next,
            } => EventKind::Switch(Switch {
                prev: prev.read(rec, names)?,
                prev_state: table.decode(prev_state.get_u64(rec)?),
                next: next.read(rec, names)?,
            }),
            TracepointDecoder::Wakeup {
                which,
                task,
                target_cpu,
            } => {
                let w = Wakeup {
                    task: task.read(rec, names)?,
                    target_cpu: match target_cpu {
                        Some(t) => u32::try_from(t.get_i64(rec)?).ok(),
                        None => None,
                    },
                };
                match which {
                    0 => EventKind::Waking(w),
                    1 => EventKind::Wakeup(w),
                    _ => EventKind::WakeupNew(w),
                }
            }
            TracepointDecoder::Migrate {
                task,
                orig_cpu,
                dest_cpu,
            } => EventKind::Migrate(Migrate {
                task: task.read(rec, names)?,
                orig_cpu: orig_cpu.get_i64(rec)? as u32,
                dest_cpu: dest_cpu.get_i64(rec)? as u32,
            }),
            TracepointDecoder::Fork {
                parent_comm,
                parent_pid,
                child_comm,
                child_pid,
            } => EventKind::Fork {
                parent_comm: names.get(parent_comm.bytes(rec)?),
                parent_pid: parent_pid.get_i32(rec)?,
                child_comm: names.get(child_comm.bytes(rec)?),
                child_pid: child_pid.get_i32(rec)?,
            },
            TracepointDecoder::Exit { task } => EventKind::Exit(task.read(rec, names)?),
            TracepointDecoder::Exec {
                filename,
                pid,
                old_pid,
            } => EventKind::Exec {
                filename: filename.string(rec)?,
                pid: pid.get_i32(rec)?,
                old_pid: old_pid.get_i32(rec)?,
            },
            TracepointDecoder::StatRuntime {
                task,
                runtime,
                vruntime,
            } => EventKind::StatRuntime(StatRuntime {
                task: task.read(rec, names)?,
                runtime: runtime.get_u64(rec)?,
                vruntime: match vruntime {
                    Some(v) => Some(v.get_u64(rec)?),
                    None => None,
                },
            }),
            TracepointDecoder::Block(d) => d.decode(rec)?,
            TracepointDecoder::Ftrace { name, decoder } => decoder.decode(name, rec)?,
            TracepointDecoder::Generic {
                system,
                name,
                fields,
                endian,
            } => generic_kind(system, name, fields, *endian, rec)?,
        })
    }
}

/// A task before its fields are read.
const BLANK_TASK: TaskRef = TaskRef {
    comm: stallscope_model::Comm::EMPTY,
    pid: 0,
    prio: -1,
};
/// The kinds [`TracepointDecoder::decode_into`] writes field by field, before any field is
/// written (in memory, copied from there by [`reset`]).
pub(crate) static BLANK_SWITCH: EventKind = EventKind::Switch(Switch {
    prev: BLANK_TASK,
    prev_state: PrevState::RUNNING,
    next: BLANK_TASK,
});
/// Waking, wakeup, wakeup_new (the decoder's `which`).
pub(crate) static BLANK_WAKEUPS: [EventKind; 3] = {
    let w = Wakeup {
        task: BLANK_TASK,
        target_cpu: None,
    };
    [
        EventKind::Waking(w),
        EventKind::Wakeup(w),
        EventKind::WakeupNew(w),
    ]
};
pub(crate) static BLANK_STAT_RUNTIME: EventKind = EventKind::StatRuntime(StatRuntime {
    task: BLANK_TASK,
    runtime: 0,
    vruntime: None,
});

/// `*out = blank.clone()` for a `blank` without heap data, copied from memory straight
/// into `out`. (A plain assignment of a new value builds it on the stack with overlapping
/// stores, drops the old value and copies: a store-forwarding stall per event, since most
/// slots held another kind.)
#[inline(always)]
pub(crate) fn reset(out: &mut EventKind, blank: &'static EventKind) {
    // Exhaustive, so that a new kind must be sorted into one arm or the other.
    let owns_heap = |k: &EventKind| match k {
        EventKind::Switch(_)
        | EventKind::Waking(_)
        | EventKind::Wakeup(_)
        | EventKind::WakeupNew(_)
        | EventKind::Migrate(_)
        | EventKind::Fork { .. }
        | EventKind::Exit(_)
        | EventKind::StatRuntime(_)
        | EventKind::Lost { .. }
        | EventKind::TaskComm { .. } => false,
        EventKind::Exec { .. }
        | EventKind::Block(_)
        | EventKind::Generic(_)
        | EventKind::Mapping(_) => true,
    };
    debug_assert!(!owns_heap(blank));
    if owns_heap(out) {
        // Dropped here, out of the usual path.
        *out = EventKind::Lost { count: None };
    }
    // SAFETY: `out` is a valid, aligned, exclusive reference and `blank` a valid value
    // that does not overlap it. Neither owns heap data (checked above; the blanks are
    // built without any), so the bitwise copy is a plain copy of `blank`, and not dropping
    // the old value of `out` leaks nothing.
    unsafe { std::ptr::copy_nonoverlapping(blank, out, 1) };
}

/// A generic event with every field of `rec` decoded (kept out of line: the inlined
/// scheduler decoders stay small).
#[inline(never)]
fn generic_kind(
    system: &str,
    name: &str,
    fields: &[Field],
    endian: Endian,
    rec: &[u8],
) -> Option<EventKind> {
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        out.push((f.name.clone(), decode_field(f, rec, endian)?));
    }
    Some(EventKind::Generic(Box::new(GenericEvent {
        system: Some(system.to_string()).filter(|s| !s.is_empty()),
        name: name.to_string(),
        fields: out,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{Comm, FieldValue, PrevState};

    fn format(file: &str) -> EventFormat {
        let p = format!(
            "{}/../../fixtures/samples/formats/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        EventFormat::parse("sched", &std::fs::read_to_string(p).unwrap()).unwrap()
    }

    fn modern() -> PrevStateTable {
        PrevStateTable::for_kernel_release(None)
    }

    #[test]
    fn switch_record_with_preempted_state() {
        let f = format("sched_sched_switch.format");
        let (d, why) = TracepointDecoder::new(&f, Endian::Little, &modern());
        assert!(why.is_none());
        assert_eq!(
            d.prev_state_source(),
            Some("the trace's sched_switch print fmt")
        );
        let mut rec = vec![0u8; 68];
        rec[8..12].copy_from_slice(b"perf");
        rec[24..28].copy_from_slice(&13978i32.to_le_bytes());
        rec[28..32].copy_from_slice(&120i32.to_le_bytes());
        rec[32..40].copy_from_slice(&0x100i64.to_le_bytes());
        rec[40..51].copy_from_slice(b"migration/0");
        rec[56..60].copy_from_slice(&18i32.to_le_bytes());
        let EventKind::Switch(s) = d.decode(&rec).unwrap() else {
            panic!("not a switch")
        };
        assert_eq!(
            s.prev,
            TaskRef {
                comm: Comm::new("perf"),
                pid: 13978,
                prio: 120
            }
        );
        assert_eq!(s.prev_state, PrevState::RUNNING_PREEMPTED);
        assert_eq!(
            (s.next.comm.as_str(), s.next.pid, s.next.prio),
            ("migration/0", 18, 0)
        );
        assert_eq!(d.decode(&rec[..50]), Err(DecodeFailure::Truncated));
    }

    #[test]
    fn migrate_task_with_6_18_data_loc_comm() {
        let f = format("sched_sched_migrate_task.format");
        let (d, _) = TracepointDecoder::new(&f, Endian::Little, &modern());
        let mut rec = vec![0u8; 36];
        rec[8..12].copy_from_slice(&0x0005_001cu32.to_le_bytes());
        rec[12..16].copy_from_slice(&14000i32.to_le_bytes());
        rec[16..20].copy_from_slice(&120i32.to_le_bytes());
        rec[20..24].copy_from_slice(&0i32.to_le_bytes());
        rec[24..28].copy_from_slice(&1i32.to_le_bytes());
        rec[28..33].copy_from_slice(b"perf\0");
        let EventKind::Migrate(m) = d.decode(&rec).unwrap() else {
            panic!("not a migrate")
        };
        assert_eq!(
            (
                m.task.comm.as_str(),
                m.task.pid,
                m.task.prio,
                m.orig_cpu,
                m.dest_cpu
            ),
            ("perf", 14000, 120, 0, 1)
        );
    }

    /// A `sched_stat_runtime` format of a kernel that still had `vruntime` (< 6.8).
    const STAT_RUNTIME_WITH_VRUNTIME: &str = "name: sched_stat_runtime
ID: 363
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:u64 runtime;\toffset:32;\tsize:8;\tsigned:0;
\tfield:u64 vruntime;\toffset:40;\tsize:8;\tsigned:0;

print fmt: \"comm=%s pid=%d runtime=%Lu [ns] vruntime=%Lu [ns]\", REC->comm, REC->pid, (unsigned long long)REC->runtime, (unsigned long long)REC->vruntime
";

    #[test]
    fn decoding_in_place_over_any_earlier_kind_equals_decoding_afresh() {
        let mut no_target = format("sched_sched_waking.format");
        no_target.fields.retain(|x| x.name != "target_cpu");
        let formats = [
            format("sched_sched_switch.format"),
            format("sched_sched_waking.format"),
            format("sched_sched_wakeup.format"),
            no_target,
            format("sched_sched_stat_runtime.format"),
            EventFormat::parse("sched", STAT_RUNTIME_WITH_VRUNTIME).unwrap(),
            format("sched_sched_migrate_task.format"),
        ];
        let decoders: Vec<_> = formats
            .iter()
            .map(|f| {
                let (d, why) = TracepointDecoder::new(f, Endian::Little, &modern());
                assert!(why.is_none(), "{why:?}");
                d
            })
            .collect();
        let mut rng = crate::test_rng::XorShift::default();
        let mut next = move || rng.next_u64();
        let (mut names, mut afresh) = (CommCache::default(), CommCache::default());
        let mut slot = EventKind::Lost { count: None };
        let mut kinds_seen = std::collections::HashSet::new();
        for i in 0..2000 {
            let which = (next() % decoders.len() as u64) as usize;
            let mut rec: Vec<u8> = (0..64).map(|_| next() as u8).collect();
            // A 6.18 `__data_loc` comm (stat_runtime, migrate): 5 bytes at 44.
            rec[8..12].copy_from_slice(&0x0005_002cu32.to_le_bytes());
            rec[48] = 0;
            // Some records are too short for their format.
            let len = if i % 17 == 0 { 30 } else { 64 };
            let rec = &rec[..len];
            let ok = decoders[which].decode_into(rec, &mut names, &mut slot);
            let expected = decoders[which].decode_cached(rec, &mut afresh);
            assert_eq!(ok, expected.is_ok(), "record {i}");
            if let Ok(kind) = expected {
                assert_eq!(slot, kind, "record {i}");
                kinds_seen.insert(std::mem::discriminant(&kind));
            }
        }
        assert_eq!(
            kinds_seen.len(),
            5,
            "switch, waking, wakeup, runtime, migrate"
        );
    }

    #[test]
    fn missing_required_field_falls_back_to_generic() {
        let mut f = format("sched_sched_waking.format");
        f.fields.retain(|x| x.name != "pid");
        let (d, why) = TracepointDecoder::new(&f, Endian::Little, &modern());
        assert!(why.unwrap().contains("`pid`"));
        let mut rec = vec![0u8; 36];
        rec[8..10].copy_from_slice(b"ab");
        let EventKind::Generic(g) = d.decode(&rec).unwrap() else {
            panic!("not generic")
        };
        assert_eq!(
            g.fields[0],
            ("comm".to_string(), FieldValue::Str("ab".into()))
        );
        assert_eq!(g.system.as_deref(), Some("sched"));
    }
}
