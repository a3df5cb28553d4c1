//! Normalized trace events: what every reader produces, whatever the input format.
//!
//! One [`Event`] is one trace record: when (`ts`, integer ns), where (`cpu`), in which task's
//! context (`pid`, the task that was current when the record was written), where it came
//! from ([`Span`]: input file + line or byte offset), and what ([`EventKind`]). Scheduler
//! events the timeline needs are modeled natively; everything else stays a
//! [`GenericEvent`] with its name and fields.
//!
//! ## `dump` line format (stable; used by cross-format tests and bug reports)
//!
//! ```text
//! TS_NS CPU PID NAME FIELD=VALUE…
//! 481124203575 0 13978 sched_switch prev_comm=perf prev_pid=13978 prev_prio=120 prev_state=D next_comm=migration/0 next_pid=18 next_prio=0
//! 481124205975 0 18 sched_waking comm=perf pid=13978 prio=120 target_cpu=0
//! 392347253000 0 12664 sched_waking comm="CPU 0/KVM" pid=12664 prio=120 target_cpu=1
//! ```
//! `TS_NS` is the timestamp in integer nanoseconds, `CPU` and `PID` decimal (`PID` is the
//! context task, `-1` when the format does not say). Fields come in the fixed order of
//! [`EventKind::write_fields`]. A string value is written bare unless it is empty or
//! contains a space, `"`, `=` or `\`, in which case it is written as a JSON string.
//! Optional fields that the input does not carry are omitted. [`Event::dump_line`] appends
//! nothing else; the source span is printed separately by callers that want it.

use serde::{Deserialize, Serialize};
use std::fmt::{self, Write as _};

use crate::{BlockEvent, Comm, Cpu, PrevState, Tid, Ts};

/// Where in which input an event came from: the input's index and a [`SpanPos`], packed in
/// one `u64` so that an [`Event`] stays small (bits 63..48: input, bit 47: line (1) or byte
/// offset (0), bits 46..0: the position; positions past 2^47 − 1, 128 TiB or 140 T lines,
/// are kept as that maximum).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Span(u64);

impl Span {
    const POS_BITS: u32 = 47;
    const POS_MAX: u64 = (1 << Self::POS_BITS) - 1;
    const LINE_FLAG: u64 = 1 << Self::POS_BITS;

    /// Input `input` (0-based index in the list given on the command line), at `pos`.
    pub const fn new(input: u16, pos: SpanPos) -> Span {
        let (flag, at) = match pos {
            SpanPos::Line(l) => (Self::LINE_FLAG, l),
            SpanPos::Byte(b) => (0, b),
        };
        let at = if at > Self::POS_MAX {
            Self::POS_MAX
        } else {
            at
        };
        Span(((input as u64) << 48) | flag | at)
    }

    /// 1-based line `line` of text input `input`.
    pub const fn line(input: u16, line: u64) -> Span {
        Span::new(input, SpanPos::Line(line))
    }

    /// Byte offset `offset` of binary input `input`.
    pub const fn byte(input: u16, offset: u64) -> Span {
        Span::new(input, SpanPos::Byte(offset))
    }

    /// Index of the input in the list given on the command line (0-based).
    pub const fn input(self) -> u16 {
        (self.0 >> 48) as u16
    }

    /// Line or byte offset.
    pub const fn pos(self) -> SpanPos {
        let at = self.0 & Self::POS_MAX;
        if self.0 & Self::LINE_FLAG != 0 {
            SpanPos::Line(at)
        } else {
            SpanPos::Byte(at)
        }
    }

    /// The same position in input `input`.
    pub fn set_input(&mut self, input: u16) {
        *self = Span::new(input, self.pos());
    }
}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Span")
            .field("input", &self.input())
            .field("pos", &self.pos())
            .finish()
    }
}

/// Position inside one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SpanPos {
    /// 1-based line number of a text input.
    Line(u64),
    /// Byte offset of the record in a binary input (in the decompressed stream).
    Byte(u64),
}

impl Default for SpanPos {
    fn default() -> Self {
        SpanPos::Byte(0)
    }
}

impl fmt::Display for SpanPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpanPos::Line(l) => write!(f, "line {l}"),
            SpanPos::Byte(b) => write!(f, "offset {b:#x}"),
        }
    }
}

/// One normalized trace record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Timestamp, ns in the trace clock.
    pub ts: Ts,
    /// CPU the record was written on.
    pub cpu: Cpu,
    /// Context task (the task current on `cpu` when written); -1 when unknown.
    pub pid: Tid,
    /// Source of the record.
    pub span: Span,
    /// What happened.
    pub kind: EventKind,
    /// Call chain recorded with the event (perf `-g`), leaf first, as raw instruction
    /// addresses; perf context markers (values >= `PERF_CONTEXT_MAX` = -4095 as u64) are kept
    /// in place so kernel and user parts can be told apart. Symbolization comes later.
    /// Not serialized: an event's binary form (an analysis' spill for the HTML windows)
    /// leaves it out.
    #[serde(skip)]
    pub callchain: Option<Box<[u64]>>,
}

// Events are moved by value through every reader and batch: at 128 bytes a move is a few
// vector stores, above it a `memcpy` call.
const _: () = assert!(std::mem::size_of::<Event>() <= 128);

/// A task as named by an event payload: comm, pid and priority (kernel `prio`, 120 = nice 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TaskRef {
    /// Task name from the payload.
    pub comm: Comm,
    /// Task id.
    pub pid: Tid,
    /// Kernel priority (0..139; 120 is nice 0); -1 when not given.
    pub prio: i32,
}

/// `sched_switch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    /// The task switched out.
    pub prev: TaskRef,
    /// Its state at switch-out.
    pub prev_state: PrevState,
    /// The task switched in.
    pub next: TaskRef,
}

/// `sched_waking`, `sched_wakeup`, `sched_wakeup_new`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wakeup {
    /// The task woken.
    pub task: TaskRef,
    /// CPU it will run on, when the event says.
    pub target_cpu: Option<Cpu>,
}

/// `sched_migrate_task`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Migrate {
    /// The task moved.
    pub task: TaskRef,
    /// From.
    pub orig_cpu: Cpu,
    /// To.
    pub dest_cpu: Cpu,
}

/// `sched_stat_runtime`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatRuntime {
    /// The task charged (comm, pid; prio unknown = -1).
    pub task: TaskRef,
    /// CPU time charged since the last update, ns.
    pub runtime: u64,
    /// The task's vruntime, on kernels that still print it (< 6.8).
    pub vruntime: Option<u64>,
}

/// A value of a generic event field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FieldValue {
    /// Signed integer.
    Int(i64),
    /// Unsigned integer.
    UInt(u64),
    /// Text (strings, or the printed value from a text trace).
    Str(String),
    /// Raw bytes (arrays, binary blobs).
    Bytes(Vec<u8>),
}

/// Any event stallscope does not model natively.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenericEvent {
    /// Subsystem (`block`, `workqueue`, …) when the input says.
    pub system: Option<String>,
    /// Event name (`block_rq_issue`).
    pub name: String,
    /// Fields in format/print order.
    pub fields: Vec<(String, FieldValue)>,
}

/// An executable mapping of a process (perf `MMAP` / `MMAP2` side-band record): what user
/// addresses of that process belong to, so that an unsymbolized frame is named by file and
/// offset (`a.out+0xe72`) the way `perf report` keys it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    /// Process (thread-group) id whose address space this is; -1 for the kernel's maps.
    pub tgid: Tid,
    /// First mapped address.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
    /// File offset mapped at `start`.
    pub pgoff: u64,
    /// Mapped file as the recording host named it (`/usr/lib/libc.so.6`, `[vdso]`).
    pub filename: String,
    /// GNU build-id of the file, when the record carried it (MMAP2 with a build id).
    pub build_id: Option<Vec<u8>>,
    /// Set on the record that stands for a process created by fork (perf FORK of a new
    /// process): its address space starts as a copy of this process's (perf records no
    /// MMAP for it); the other fields are then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<Tid>,
}

impl Mapping {
    /// Whether `addr` is inside the mapping.
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr - self.start < self.len
    }

    /// `addr` as an offset into the mapped file (`addr - start + pgoff`, perf's
    /// `map__map_ip`).
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.start).wrapping_add(self.pgoff)
    }

    /// The file's last path component (`libc.so.6`; `[vdso]` stays whole).
    pub fn short_name(&self) -> &str {
        self.filename.rsplit('/').next().unwrap_or(&self.filename)
    }
}

/// What an event is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum EventKind {
    /// `sched_switch`.
    Switch(Switch),
    /// `sched_waking` (wakeup requested; perf's preferred wakeup event).
    Waking(Wakeup),
    /// `sched_wakeup` (task placed on a runqueue).
    Wakeup(Wakeup),
    /// `sched_wakeup_new` (first wakeup of a forked task).
    WakeupNew(Wakeup),
    /// `sched_migrate_task`.
    Migrate(Migrate),
    /// `sched_process_fork`.
    Fork {
        /// Parent.
        parent_comm: Comm,
        /// Parent pid.
        parent_pid: Tid,
        /// Child name.
        child_comm: Comm,
        /// Child pid.
        child_pid: Tid,
    },
    /// `sched_process_exit`.
    Exit(TaskRef),
    /// `sched_process_exec`.
    Exec {
        /// Path executed.
        filename: String,
        /// Task after exec.
        pid: Tid,
        /// Task before exec.
        old_pid: Tid,
    },
    /// `sched_stat_runtime`.
    StatRuntime(StatRuntime),
    /// Events were lost on this CPU just before this point (ring-buffer overrun, perf LOST
    /// record). `count` when the input says how many.
    Lost {
        /// Number of events lost, when known.
        count: Option<u64>,
    },
    /// A task's name became known or changed (perf `COMM` side-band record, exec renames).
    TaskComm {
        /// Thread-group id (process id).
        tgid: Tid,
        /// Task id.
        tid: Tid,
        /// New name.
        comm: Comm,
    },
    /// An executable mapping of a process became known (perf `MMAP` / `MMAP2` side-band
    /// record; side-band like [`EventKind::TaskComm`]: no scheduling meaning).
    Mapping(Box<Mapping>),
    /// A block-layer event (blktrace action or `block:*` tracepoint); see [`crate::block`].
    Block(Box<BlockEvent>),
    /// Everything else.
    Generic(Box<GenericEvent>),
}

impl EventKind {
    /// Scheduler events proper (switch, wakeups, migration): what bounds the time a
    /// scheduling analysis covers.
    pub fn is_scheduling(&self) -> bool {
        matches!(
            self,
            EventKind::Switch(_)
                | EventKind::Waking(_)
                | EventKind::Wakeup(_)
                | EventKind::WakeupNew(_)
                | EventKind::Migrate(_)
        )
    }

    /// Side-band records that describe tasks or address spaces rather than something that
    /// happened on a CPU at a time ([`EventKind::TaskComm`], [`EventKind::Mapping`]): perf
    /// synthesizes them with time 0 for what existed before the recording.
    pub fn is_side_band(&self) -> bool {
        matches!(self, EventKind::TaskComm { .. } | EventKind::Mapping(_))
    }

    /// The kernel event name (`sched_switch`, …; generic events keep theirs; `lost_events`
    /// for [`EventKind::Lost`]).
    pub fn name(&self) -> &str {
        match self {
            EventKind::Generic(g) => &g.name,
            EventKind::Block(b) => b.action.tracepoint(),
            k => k.static_name().unwrap_or(""),
        }
    }

    /// The name of a natively modeled kind as a `'static` string (`None` for generic events),
    /// for counting by name without allocating.
    pub fn static_name(&self) -> Option<&'static str> {
        Some(match self {
            EventKind::Switch(_) => "sched_switch",
            EventKind::Waking(_) => "sched_waking",
            EventKind::Wakeup(_) => "sched_wakeup",
            EventKind::WakeupNew(_) => "sched_wakeup_new",
            EventKind::Migrate(_) => "sched_migrate_task",
            EventKind::Fork { .. } => "sched_process_fork",
            EventKind::Exit(_) => "sched_process_exit",
            EventKind::Exec { .. } => "sched_process_exec",
            EventKind::StatRuntime(_) => "sched_stat_runtime",
            EventKind::Lost { .. } => "lost_events",
            EventKind::TaskComm { .. } => "task_comm",
            EventKind::Mapping(_) => "mmap",
            EventKind::Block(b) => b.action.tracepoint(),
            EventKind::Generic(_) => return None,
        })
    }

    /// Calls `f(key, value)` for every field, in the documented fixed order (see module
    /// docs). Optional fields the input did not carry are skipped.
    pub fn for_each_field(&self, f: &mut dyn FnMut(&str, FieldRef<'_>)) {
        fn task(
            f: &mut dyn FnMut(&str, FieldRef<'_>),
            keys: [&str; 3],
            t: &TaskRef,
            with_prio: bool,
        ) {
            f(keys[0], FieldRef::Str(t.comm.as_str()));
            f(keys[1], FieldRef::Int(i64::from(t.pid)));
            if with_prio {
                f(keys[2], FieldRef::Int(i64::from(t.prio)));
            }
        }
        const PLAIN: [&str; 3] = ["comm", "pid", "prio"];
        match self {
            EventKind::Switch(s) => {
                task(f, ["prev_comm", "prev_pid", "prev_prio"], &s.prev, true);
                f("prev_state", FieldRef::State(s.prev_state));
                task(f, ["next_comm", "next_pid", "next_prio"], &s.next, true);
            }
            EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => {
                task(f, PLAIN, &w.task, true);
                if let Some(c) = w.target_cpu {
                    f("target_cpu", FieldRef::UInt(u64::from(c)));
                }
            }
            EventKind::Migrate(m) => {
                task(f, PLAIN, &m.task, true);
                f("orig_cpu", FieldRef::UInt(u64::from(m.orig_cpu)));
                f("dest_cpu", FieldRef::UInt(u64::from(m.dest_cpu)));
            }
            EventKind::Fork {
                parent_comm,
                parent_pid,
                child_comm,
                child_pid,
            } => {
                f("parent_comm", FieldRef::Str(parent_comm.as_str()));
                f("parent_pid", FieldRef::Int(i64::from(*parent_pid)));
                f("child_comm", FieldRef::Str(child_comm.as_str()));
                f("child_pid", FieldRef::Int(i64::from(*child_pid)));
            }
            EventKind::Exit(t) => task(f, PLAIN, t, true),
            EventKind::Exec {
                filename,
                pid,
                old_pid,
            } => {
                f("filename", FieldRef::Str(filename));
                f("pid", FieldRef::Int(i64::from(*pid)));
                f("old_pid", FieldRef::Int(i64::from(*old_pid)));
            }
            EventKind::StatRuntime(r) => {
                task(f, PLAIN, &r.task, false);
                f("runtime", FieldRef::UInt(r.runtime));
                if let Some(v) = r.vruntime {
                    f("vruntime", FieldRef::UInt(v));
                }
            }
            EventKind::Lost { count } => match count {
                Some(c) => f("count", FieldRef::UInt(*c)),
                None => f("count", FieldRef::Str("?")),
            },
            EventKind::TaskComm { tgid, tid, comm } => {
                f("tgid", FieldRef::Int(i64::from(*tgid)));
                f("tid", FieldRef::Int(i64::from(*tid)));
                f("comm", FieldRef::Str(comm.as_str()));
            }
            EventKind::Mapping(m) if m.forked_from.is_some() => {
                f("tgid", FieldRef::Int(i64::from(m.tgid)));
                let parent = m.forked_from.unwrap_or(-1);
                f("forked_from", FieldRef::Int(i64::from(parent)));
            }
            EventKind::Mapping(m) => {
                f("tgid", FieldRef::Int(i64::from(m.tgid)));
                f("start", FieldRef::UInt(m.start));
                f("len", FieldRef::UInt(m.len));
                f("pgoff", FieldRef::UInt(m.pgoff));
                f("filename", FieldRef::Str(&m.filename));
            }
            EventKind::Block(b) => {
                if let Some(d) = b.dev {
                    let dev = d.to_string();
                    f("dev", FieldRef::Str(&dev));
                }
                if !matches!(
                    b.action,
                    crate::BlockAction::Plug
                        | crate::BlockAction::Unplug
                        | crate::BlockAction::Message
                ) {
                    f("sector", FieldRef::UInt(b.sector));
                    f("nr_sector", FieldRef::UInt(u64::from(b.nr_sector)));
                    if let Some(n) = b.bytes {
                        f("bytes", FieldRef::UInt(u64::from(n)));
                    }
                    f("rwbs", FieldRef::Str(&b.rwbs.to_letters()));
                }
                if let Some(e) = b.error {
                    f("error", FieldRef::Int(i64::from(e)));
                }
                if let Some(d) = b.related_dev {
                    f("related_dev", FieldRef::Str(&d.to_string()));
                }
                if let Some(s) = b.related_sector {
                    let key = if b.action == crate::BlockAction::Split {
                        "new_sector"
                    } else {
                        "old_sector"
                    };
                    f(key, FieldRef::UInt(s));
                }
                if let Some(n) = b.nr_rq {
                    f("nr_rq", FieldRef::UInt(u64::from(n)));
                }
                if let Some(c) = &b.comm {
                    f("comm", FieldRef::Str(c.as_str()));
                }
                if let Some(m) = &b.message {
                    f("message", FieldRef::Str(m));
                }
            }
            EventKind::Generic(g) => {
                for (k, v) in &g.fields {
                    let r = match v {
                        FieldValue::Int(i) => FieldRef::Int(*i),
                        FieldValue::UInt(u) => FieldRef::UInt(*u),
                        FieldValue::Str(s) => FieldRef::Str(s),
                        FieldValue::Bytes(b) => FieldRef::Bytes(b),
                    };
                    f(k, r);
                }
            }
        }
    }

    /// Writes ` key=value` pairs in the documented fixed order (see module docs).
    pub fn write_fields(&self, out: &mut String) {
        self.for_each_field(&mut |k, v| match v {
            FieldRef::Int(i) => {
                let _ = write!(out, " {k}={i}");
            }
            FieldRef::UInt(u) => {
                let _ = write!(out, " {k}={u}");
            }
            FieldRef::State(s) => {
                let _ = write!(out, " {k}={s}");
            }
            FieldRef::Str(s) => kv_str(out, k, s),
            FieldRef::Bytes(b) => {
                let _ = write!(out, " {k}=0x");
                for x in b {
                    let _ = write!(out, "{x:02x}");
                }
            }
        });
    }
}

/// A borrowed field value, as passed by [`EventKind::for_each_field`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldRef<'a> {
    /// Signed integer.
    Int(i64),
    /// Unsigned integer.
    UInt(u64),
    /// Text.
    Str(&'a str),
    /// Raw bytes.
    Bytes(&'a [u8]),
    /// A switch-out state.
    State(PrevState),
}

/// Writes ` key=value`, quoting the value as a JSON string when it is empty or holds a
/// space, `"`, `=`, `\` or a control character.
pub fn kv_str(out: &mut String, key: &str, value: &str) {
    let _ = write!(out, " {key}=");
    let needs_quotes = value.is_empty()
        || value
            .bytes()
            .any(|b| b == b' ' || b == b'"' || b == b'=' || b == b'\\' || b < 0x20);
    if !needs_quotes {
        out.push_str(value);
        return;
    }
    out.push('"');
    for ch in value.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

impl Event {
    /// Whether the record shows its `pid` running on its CPU at its time — the premise of
    /// the timeline's repair rule. Not: switches (their `pid` is the task leaving), side-band
    /// records about a task (`task_comm`, mappings), lost-events records, and ftrace's
    /// `kernel_stack` / `user_stack` records, written after the event they belong to in that
    /// event's context (after a switch: the task that left).
    #[inline]
    pub fn shows_pid_running(&self) -> bool {
        self.pid > 0
            && match &self.kind {
                EventKind::Switch(_)
                | EventKind::TaskComm { .. }
                | EventKind::Mapping(_)
                | EventKind::Lost { .. } => false,
                // (text reports name no system for them)
                EventKind::Generic(g) => {
                    !(matches!(g.system.as_deref(), None | Some("ftrace"))
                        && matches!(g.name.as_str(), "kernel_stack" | "user_stack"))
                }
                _ => true,
            }
    }

    /// The stable `dump` line (no trailing newline, no source span). See module docs.
    pub fn dump_line(&self) -> String {
        let mut out = String::with_capacity(160);
        let _ = write!(
            out,
            "{} {} {} {}",
            self.ts,
            self.cpu,
            self.pid,
            self.kind.name()
        );
        self.kind.write_fields(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_keeps_input_and_position() {
        for (input, pos) in [
            (0, SpanPos::Byte(0)),
            (3, SpanPos::Line(1)),
            (u16::MAX, SpanPos::Byte(0x6934)),
            (7, SpanPos::Line((1 << 47) - 1)),
        ] {
            let s = Span::new(input, pos);
            assert_eq!((s.input(), s.pos()), (input, pos));
        }
        assert_eq!(Span::byte(2, u64::MAX).pos(), SpanPos::Byte((1 << 47) - 1));
        assert_eq!(Span::default().pos(), SpanPos::default());
        let mut s = Span::line(1, 42);
        s.set_input(9);
        assert_eq!((s.input(), s.pos()), (9, SpanPos::Line(42)));
        assert_eq!(s.pos().to_string(), "line 42");
    }

    fn t(comm: &str, pid: Tid, prio: i32) -> TaskRef {
        TaskRef {
            comm: Comm::new(comm),
            pid,
            prio,
        }
    }

    #[test]
    fn dump_line_is_stable() {
        let e = Event {
            ts: 481_124_203_575,
            cpu: 0,
            pid: 13978,
            span: Span::default(),
            callchain: None,
            kind: EventKind::Switch(Switch {
                prev: t("perf", 13978, 120),
                prev_state: PrevState::parse("D").unwrap_or_default(),
                next: t("migration/0", 18, 0),
            }),
        };
        assert_eq!(
            e.dump_line(),
            "481124203575 0 13978 sched_switch prev_comm=perf prev_pid=13978 prev_prio=120 prev_state=D next_comm=migration/0 next_pid=18 next_prio=0"
        );
        let w = Event {
            ts: 5,
            cpu: 1,
            pid: -1,
            span: Span::default(),
            callchain: None,
            kind: EventKind::Waking(Wakeup {
                task: t("CPU 0/KVM", 7, 120),
                target_cpu: Some(1),
            }),
        };
        assert_eq!(
            w.dump_line(),
            "5 1 -1 sched_waking comm=\"CPU 0/KVM\" pid=7 prio=120 target_cpu=1"
        );
    }

    #[test]
    fn quoting() {
        let mut s = String::new();
        kv_str(&mut s, "k", "");
        kv_str(&mut s, "k", "a\"b");
        kv_str(&mut s, "k", "a:b");
        assert_eq!(s, " k=\"\" k=\"a\\\"b\" k=a:b");
    }
}
