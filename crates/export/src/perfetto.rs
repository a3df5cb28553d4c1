//! Streaming Perfetto protobuf trace writer.
//!
//! Output layout (a `Trace` message written incrementally: each packet is field 1 of
//! `Trace`, i.e. `0x0a <varint len> <TracePacket>`, so the file needs no outer length):
//!
//! ```text
//! packet  SystemInfo { utsname { sysname "Linux", release <input kernel release> }, num_cpus }
//!         (first packet on the sequence: sequence_flags = INCREMENTAL_STATE_CLEARED)
//! packet  FtraceEventBundle { cpu 1, event [...≤ BUNDLE_EVENTS], lost_events }   (per CPU, repeated)
//! ...
//! packet  ProcessTree { processes [...], threads [...] }  timestamp = first event
//!         (threads whose tgid is known, i.e. named by a perf COMM / task_comm record)
//! packet  TrackDescriptor "stallscope findings" (+ one child per overlapping lane)
//! packet  TrackEvent SLICE_BEGIN {name = finding title, debug_annotations = measures…}
//! packet  TrackEvent SLICE_END
//! ```
//!
//! Field numbers: Perfetto's trace protos (`protos/perfetto/trace/trace_packet.proto` and the track-event and ftrace-event protos they include). Every packet carries the same
//! `trusted_packet_sequence_id`; nothing is interned, so no incremental state is needed.
//!
//! Streaming: only one not-yet-written bundle per CPU is held (at most [`BUNDLE_EVENTS`]
//! events or [`BUNDLE_BYTES`] bytes); the task table (one entry per task) is the only thing
//! that grows with the trace, which is why the `ProcessTree` packet comes at the end, with
//! the timestamp of the first event so that the trace processor (which sorts packets by
//! time) applies it before the events.
//!
//! Events map to typed protos where Perfetto has one (`sched_switch` with the raw
//! `prev_state` re-encoded for the input's kernel, see [`crate::prev_state`];
//! `sched_waking`/`sched_wakeup`/`sched_wakeup_new`, `sched_migrate_task`,
//! `sched_process_fork/exit/exec`; `block_rq_issue/insert/complete` and `block_bio_queue`
//! when the generic event has the fields the proto needs), else to `GenericFtraceEvent`
//! with all fields. `lost_events` records set `lost_events` on the CPU's next bundle;
//! `task_comm` records only feed the `ProcessTree`.

use std::collections::BTreeMap;
use std::io::{self, Write};

use stallscope_model::{
    BlockEvent, Cpu, Event, EventKind, FieldRef, FieldValue, Finding, TaskRef, Ts,
};

use crate::lanes::assign_lanes;
use crate::prev_state::{EncodePrevState, StateEncoding};
use crate::protozero::{put_varint, ProtoBuf};
use crate::tasks::TaskTable;
use crate::ExportStats;

/// Flush a CPU's bundle after this many events.
pub const BUNDLE_EVENTS: u32 = 1024;
/// Flush a CPU's bundle once its encoded events reach this many bytes.
pub const BUNDLE_BYTES: usize = 96 * 1024;
/// Our `trusted_packet_sequence_id`.
pub const SEQUENCE_ID: u64 = 1;
/// `uuid` of the "stallscope findings" track; lanes are `FINDINGS_TRACK_UUID + lane`.
pub const FINDINGS_TRACK_UUID: u64 = 0x5741_4c4c_0000_0000;
/// Name of the findings track.
pub const FINDINGS_TRACK_NAME: &str = "stallscope findings";

/// Field numbers (formats.md §11.1), grouped by message.
pub mod field {
    /// `TracePacket`.
    pub mod packet {
        pub const FTRACE_EVENTS: u32 = 1;
        pub const PROCESS_TREE: u32 = 2;
        pub const TIMESTAMP: u32 = 8;
        pub const TRUSTED_PACKET_SEQUENCE_ID: u32 = 10;
        pub const TRACK_EVENT: u32 = 11;
        pub const SEQUENCE_FLAGS: u32 = 13;
        pub const SYSTEM_INFO: u32 = 45;
        pub const TRACK_DESCRIPTOR: u32 = 60;
        pub const FIRST_PACKET_ON_SEQUENCE: u32 = 87;
    }
    /// `FtraceEventBundle`.
    pub mod bundle {
        pub const CPU: u32 = 1;
        pub const EVENT: u32 = 2;
        pub const LOST_EVENTS: u32 = 3;
    }
    /// `FtraceEvent` and its payload oneof.
    pub mod ftrace {
        pub const TIMESTAMP: u32 = 1;
        pub const PID: u32 = 2;
        pub const PRINT: u32 = 3;
        pub const SCHED_SWITCH: u32 = 4;
        pub const SCHED_WAKEUP: u32 = 17;
        pub const SCHED_WAKING: u32 = 20;
        pub const WORKQUEUE_EXECUTE_END: u32 = 57;
        pub const WORKQUEUE_EXECUTE_START: u32 = 58;
        pub const BLOCK_RQ_ISSUE: u32 = 45;
        pub const SCHED_WAKEUP_NEW: u32 = 114;
        pub const BLOCK_BIO_QUEUE: u32 = 119;
        pub const BLOCK_RQ_COMPLETE: u32 = 125;
        pub const BLOCK_RQ_INSERT: u32 = 126;
        pub const SCHED_PROCESS_EXEC: u32 = 237;
        pub const SCHED_PROCESS_EXIT: u32 = 238;
        pub const SCHED_PROCESS_FORK: u32 = 239;
        pub const GENERIC: u32 = 327;
        pub const SCHED_MIGRATE_TASK: u32 = 491;
    }
    /// `WorkqueueExecuteStartFtraceEvent` / `WorkqueueExecuteEndFtraceEvent`.
    pub mod workqueue {
        pub const WORK: u32 = 1;
        pub const FUNCTION: u32 = 2;
    }
    /// `PrintFtraceEvent` (trace_marker).
    pub mod print {
        pub const IP: u32 = 1;
        pub const BUF: u32 = 2;
    }
    /// `SystemInfo` / `Utsname`.
    pub mod system_info {
        pub const UTSNAME: u32 = 1;
        pub const NUM_CPUS: u32 = 8;
        pub const SYSNAME: u32 = 1;
        pub const RELEASE: u32 = 3;
    }
    /// `ProcessTree` / `Process` / `Thread`.
    pub mod process_tree {
        pub const PROCESSES: u32 = 1;
        pub const THREADS: u32 = 2;
        pub const PROCESS_PID: u32 = 1;
        pub const PROCESS_CMDLINE: u32 = 3;
        pub const THREAD_TID: u32 = 1;
        pub const THREAD_NAME: u32 = 2;
        pub const THREAD_TGID: u32 = 3;
    }
    /// `TrackDescriptor`.
    pub mod track {
        pub const UUID: u32 = 1;
        pub const NAME: u32 = 2;
        pub const PARENT_UUID: u32 = 5;
    }
    /// `TrackEvent` / `DebugAnnotation`.
    pub mod track_event {
        pub const DEBUG_ANNOTATIONS: u32 = 4;
        pub const TYPE: u32 = 9;
        pub const TRACK_UUID: u32 = 11;
        pub const CATEGORIES: u32 = 22;
        pub const NAME: u32 = 23;
        pub const TYPE_SLICE_BEGIN: u64 = 1;
        pub const TYPE_SLICE_END: u64 = 2;
        pub const ANNOTATION_INT: u32 = 4;
        pub const ANNOTATION_STRING: u32 = 6;
        pub const ANNOTATION_NAME: u32 = 10;
    }
    /// `GenericFtraceEvent` / `Field`.
    pub mod generic {
        pub const EVENT_NAME: u32 = 1;
        pub const FIELD: u32 = 2;
        pub const FIELD_NAME: u32 = 1;
        pub const STR_VALUE: u32 = 3;
        pub const INT_VALUE: u32 = 4;
        pub const UINT_VALUE: u32 = 5;
    }
}

use field::ftrace as fe;

/// One CPU's bundle being filled.
#[derive(Default)]
struct CpuBundle {
    /// Encoded `FtraceEventBundle.event` fields.
    events: ProtoBuf,
    count: u32,
    /// Timestamp of the last event in `events`.
    last_ts: Ts,
    /// A `lost_events` record came since the last flush.
    lost_before: bool,
}

/// Writes a Perfetto trace to `W` as events arrive. Call [`PerfettoWriter::event`] for each
/// event in time order, then [`PerfettoWriter::finish`].
pub struct PerfettoWriter<W: Write> {
    out: W,
    packet: ProtoBuf,
    bundles: BTreeMap<Cpu, CpuBundle>,
    encoding: StateEncoding,
    tasks: TaskTable,
    first_ts: Option<Ts>,
    stats: ExportStats,
}

impl<W: Write> PerfettoWriter<W> {
    /// Starts the trace: writes the `SystemInfo` packet. `kernel_release` selects the raw
    /// `prev_state` encoding and is written as `utsname.release`; without it the 4.2–4.13
    /// encoding is used, which is what Perfetto assumes for traces that do not name their
    /// kernel. `num_cpus` is written when known.
    pub fn new(
        out: W,
        kernel_release: Option<&str>,
        num_cpus: Option<u32>,
    ) -> io::Result<PerfettoWriter<W>> {
        let encoding = kernel_release
            .and_then(StateEncoding::for_release)
            .unwrap_or(StateEncoding::State42);
        let mut w = PerfettoWriter {
            out,
            packet: ProtoBuf::new(),
            bundles: BTreeMap::new(),
            encoding,
            tasks: TaskTable::new(),
            first_ts: None,
            stats: ExportStats::default(),
        };
        w.packet.clear();
        let si = w.packet.begin(field::packet::SYSTEM_INFO);
        let uts = w.packet.begin(field::system_info::UTSNAME);
        w.packet.str(field::system_info::SYSNAME, "Linux");
        if let Some(r) = kernel_release {
            w.packet.str(field::system_info::RELEASE, r);
        }
        w.packet.end(uts);
        if let Some(n) = num_cpus {
            w.packet.uint(field::system_info::NUM_CPUS, u64::from(n));
        }
        w.packet.end(si);
        w.packet.uint(field::packet::SEQUENCE_FLAGS, 1);
        w.packet.bool(field::packet::FIRST_PACKET_ON_SEQUENCE, true);
        w.write_packet()?;
        Ok(w)
    }

    /// The encoding chosen for `prev_state`.
    pub fn state_encoding(&self) -> StateEncoding {
        self.encoding
    }

    /// Appends the sequence id to the packet being built and writes it out.
    fn write_packet(&mut self) -> io::Result<()> {
        self.packet
            .uint(field::packet::TRUSTED_PACKET_SEQUENCE_ID, SEQUENCE_ID);
        let mut head = Vec::with_capacity(6);
        head.push(0x0a); // Trace.packet, field 1, length-delimited
        put_varint(&mut head, self.packet.len() as u64);
        self.out.write_all(&head)?;
        self.out.write_all(self.packet.bytes())?;
        self.stats.bytes += (head.len() + self.packet.len()) as u64;
        self.stats.packets += 1;
        self.packet.clear();
        Ok(())
    }

    fn flush_cpu(&mut self, cpu: Cpu) -> io::Result<()> {
        let Some(b) = self.bundles.get_mut(&cpu) else {
            return Ok(());
        };
        if b.count == 0 && !b.lost_before {
            return Ok(());
        }
        self.packet.clear();
        let n = self.packet.begin(field::packet::FTRACE_EVENTS);
        self.packet.uint(field::bundle::CPU, u64::from(cpu));
        self.packet.raw(b.events.bytes());
        if b.lost_before {
            self.packet.bool(field::bundle::LOST_EVENTS, true);
            self.stats.lost_bundles += 1;
        }
        self.packet.end(n);
        b.events.clear();
        b.count = 0;
        b.lost_before = false;
        self.stats.bundles += 1;
        self.write_packet()
    }

    /// Adds one event (events must come in time order per CPU, as readers deliver them).
    pub fn event(&mut self, ev: &Event) -> io::Result<()> {
        self.tasks.observe(ev);
        if self.first_ts.is_none() && !ev.kind.is_side_band() {
            self.first_ts = Some(ev.ts);
        }
        match &ev.kind {
            EventKind::TaskComm { .. } | EventKind::Mapping(_) => {
                self.stats.count(ev.kind.name());
                return Ok(());
            }
            EventKind::Lost { .. } => {
                // the bundle so far holds the events before the loss; a loss right after
                // another still gets its own (empty) bundle so each is visible
                let pending = self
                    .bundles
                    .get(&ev.cpu)
                    .is_some_and(|b| b.count > 0 || b.lost_before);
                if pending {
                    self.flush_cpu(ev.cpu)?;
                }
                self.bundles.entry(ev.cpu).or_default().lost_before = true;
                self.stats.count("lost_events");
                return Ok(());
            }
            _ => {}
        }
        // events within a bundle must be time-sorted: an event older than the bundle's
        // last one (out-of-order input, counted by the reader) starts a new bundle
        if self
            .bundles
            .get(&ev.cpu)
            .is_some_and(|b| b.count > 0 && ev.ts < b.last_ts)
        {
            self.stats.unsorted_splits += 1;
            self.flush_cpu(ev.cpu)?;
        }
        let encoding = self.encoding;
        let b = self.bundles.entry(ev.cpu).or_default();
        b.last_ts = ev.ts;
        let out = &mut b.events;
        let n = out.begin(field::bundle::EVENT);
        out.uint(fe::TIMESTAMP, ev.ts);
        if ev.pid >= 0 {
            out.uint(fe::PID, ev.pid as u64);
        }
        let kind = encode_payload(out, &ev.kind, encoding, &mut self.stats);
        out.end(n);
        b.count += 1;
        self.stats.count(kind);
        if b.count >= BUNDLE_EVENTS || b.events.len() >= BUNDLE_BYTES {
            self.flush_cpu(ev.cpu)?;
        }
        Ok(())
    }

    /// Flushes all bundles, writes the `ProcessTree`, the findings track and its slices,
    /// and returns the writer and what was written.
    pub fn finish(mut self, findings: &[Finding]) -> io::Result<(W, ExportStats)> {
        let cpus: Vec<Cpu> = self.bundles.keys().copied().collect();
        for cpu in cpus {
            self.flush_cpu(cpu)?;
        }
        self.write_process_tree()?;
        self.write_findings(findings)?;
        self.out.flush()?;
        self.stats.tasks = self.tasks.len() as u64;
        Ok((self.out, self.stats))
    }

    /// Thread-group ids an input named (`(tid, tgid)` pairs, see
    /// [`stallscope_model::TraceMeta::task_tgids`]).
    pub fn learn_tgids(&mut self, pairs: &[(stallscope_model::Tid, stallscope_model::Tid)]) {
        self.tasks.learn_tgids(pairs);
    }

    /// Thread-group ids from recorded context (see [`TaskTable::learn_context`]).
    pub fn learn_context(&mut self, ctx: &stallscope_model::SystemContext) {
        self.tasks.learn_context(ctx);
    }

    fn write_process_tree(&mut self) -> io::Result<()> {
        if self.tasks.is_empty() {
            return Ok(());
        }
        use field::process_tree as pt;
        self.packet.clear();
        if let Some(ts) = self.first_ts {
            self.packet.uint(field::packet::TIMESTAMP, ts);
        }
        let tree = self.packet.begin(field::packet::PROCESS_TREE);
        for (tid, info) in self.tasks.iter() {
            // thread-group leaders are processes (cmdline = their name; Perfetto skips
            // processes without a cmdline)
            if info.tgid == Some(tid) && !info.name.is_empty() {
                let p = self.packet.begin(pt::PROCESSES);
                self.packet.uint(pt::PROCESS_PID, tid as u64);
                self.packet.str(pt::PROCESS_CMDLINE, info.name.as_str());
                self.packet.end(p);
            }
        }
        // Perfetto reads a missing tgid as 0 (it would file the thread under the idle
        // task), so only threads whose process is known are listed; the others are named
        // by the trace processor from the comms in their sched events.
        for (tid, info) in self.tasks.iter() {
            let Some(tgid) = info.tgid else {
                self.stats.tasks_without_tgid += 1;
                continue;
            };
            let t = self.packet.begin(pt::THREADS);
            self.packet.uint(pt::THREAD_TID, tid as u64);
            if !info.name.is_empty() {
                self.packet.str(pt::THREAD_NAME, info.name.as_str());
            }
            self.packet.uint(pt::THREAD_TGID, tgid as u64);
            self.packet.end(t);
        }
        self.packet.end(tree);
        self.write_packet()
    }

    fn write_track(&mut self, uuid: u64, name: &str, parent: Option<u64>) -> io::Result<()> {
        use field::track;
        self.packet.clear();
        let d = self.packet.begin(field::packet::TRACK_DESCRIPTOR);
        self.packet.uint(track::UUID, uuid);
        self.packet.str(track::NAME, name);
        if let Some(p) = parent {
            self.packet.uint(track::PARENT_UUID, p);
        }
        self.packet.end(d);
        self.write_packet()
    }

    fn write_findings(&mut self, findings: &[Finding]) -> io::Result<()> {
        use field::track_event as te;
        if findings.is_empty() {
            return Ok(());
        }
        let lanes = assign_lanes(
            findings
                .iter()
                .map(|f| (f.window.start_ns, f.window.end_ns)),
        );
        let nr_lanes = lanes.iter().copied().max().map_or(0, |m| m + 1);
        self.write_track(FINDINGS_TRACK_UUID, FINDINGS_TRACK_NAME, None)?;
        // one lane: slices go on the track itself; overlapping findings: one child per lane
        let lane_uuid = |lane: usize| -> u64 {
            if nr_lanes <= 1 {
                FINDINGS_TRACK_UUID
            } else {
                FINDINGS_TRACK_UUID + 1 + lane as u64
            }
        };
        if nr_lanes > 1 {
            for lane in 0..nr_lanes {
                let name = format!("{FINDINGS_TRACK_NAME} {}", lane + 1);
                self.write_track(lane_uuid(lane), &name, Some(FINDINGS_TRACK_UUID))?;
            }
        }
        for (f, &lane) in findings.iter().zip(&lanes) {
            let uuid = lane_uuid(lane);
            self.packet.clear();
            self.packet
                .uint(field::packet::TIMESTAMP, f.window.start_ns);
            let e = self.packet.begin(field::packet::TRACK_EVENT);
            self.packet.uint(te::TYPE, te::TYPE_SLICE_BEGIN);
            self.packet.uint(te::TRACK_UUID, uuid);
            self.packet.str(te::CATEGORIES, "stallscope");
            self.packet.str(te::NAME, &f.title);
            let annotate_str = |p: &mut ProtoBuf, name: &str, value: &str| {
                let a = p.begin(te::DEBUG_ANNOTATIONS);
                p.str(te::ANNOTATION_NAME, name);
                p.str(te::ANNOTATION_STRING, value);
                p.end(a);
            };
            annotate_str(&mut self.packet, "detector", &f.detector);
            annotate_str(&mut self.packet, "severity", f.severity.name());
            let cpus: Vec<String> = f.cpus.iter().map(u32::to_string).collect();
            annotate_str(&mut self.packet, "cpus", &cpus.join(","));
            for t in &f.tasks {
                let value = format!("{} (pid {})", t.comm, t.pid);
                annotate_str(&mut self.packet, &t.role, &value);
            }
            if !f.hint.is_empty() {
                annotate_str(&mut self.packet, "hint", &f.hint);
            }
            for (name, value) in &f.measures {
                let a = self.packet.begin(te::DEBUG_ANNOTATIONS);
                self.packet.str(te::ANNOTATION_NAME, name);
                self.packet.int(te::ANNOTATION_INT, *value);
                self.packet.end(a);
            }
            self.packet.end(e);
            self.write_packet()?;
            self.packet.clear();
            self.packet.uint(field::packet::TIMESTAMP, f.window.end_ns);
            let e = self.packet.begin(field::packet::TRACK_EVENT);
            self.packet.uint(te::TYPE, te::TYPE_SLICE_END);
            self.packet.uint(te::TRACK_UUID, uuid);
            self.packet.end(e);
            self.write_packet()?;
            self.stats.findings += 1;
        }
        Ok(())
    }
}

fn put_task(out: &mut ProtoBuf, t: &TaskRef) {
    out.str(1, t.comm.as_str());
    out.int(2, i64::from(t.pid));
    if t.prio >= 0 {
        out.int(3, i64::from(t.prio));
    }
}

/// Writes the payload oneof of one `FtraceEvent`; returns the name it was counted under.
fn encode_payload<'k>(
    out: &mut ProtoBuf,
    kind: &'k EventKind,
    encoding: StateEncoding,
    stats: &mut ExportStats,
) -> &'k str {
    match kind {
        EventKind::Switch(s) => {
            let m = out.begin(fe::SCHED_SWITCH);
            out.str(1, s.prev.comm.as_str());
            out.int(2, i64::from(s.prev.pid));
            if s.prev.prio >= 0 {
                out.int(3, i64::from(s.prev.prio));
            }
            let raw = encoding.encode(s.prev_state);
            if raw.lossy {
                stats.lossy_states += 1;
            }
            out.int(4, raw.raw);
            out.str(5, s.next.comm.as_str());
            out.int(6, i64::from(s.next.pid));
            if s.next.prio >= 0 {
                out.int(7, i64::from(s.next.prio));
            }
            out.end(m);
            "sched_switch"
        }
        EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => {
            let (number, name) = match kind {
                EventKind::Waking(_) => (fe::SCHED_WAKING, "sched_waking"),
                EventKind::Wakeup(_) => (fe::SCHED_WAKEUP, "sched_wakeup"),
                _ => (fe::SCHED_WAKEUP_NEW, "sched_wakeup_new"),
            };
            let m = out.begin(number);
            put_task(out, &w.task);
            if let Some(c) = w.target_cpu {
                out.int(5, i64::from(c));
            }
            out.end(m);
            name
        }
        EventKind::Migrate(mig) => {
            let m = out.begin(fe::SCHED_MIGRATE_TASK);
            put_task(out, &mig.task);
            out.int(4, i64::from(mig.orig_cpu));
            out.int(5, i64::from(mig.dest_cpu));
            out.end(m);
            "sched_migrate_task"
        }
        EventKind::Fork {
            parent_comm,
            parent_pid,
            child_comm,
            child_pid,
        } => {
            let m = out.begin(fe::SCHED_PROCESS_FORK);
            out.str(1, parent_comm.as_str());
            out.int(2, i64::from(*parent_pid));
            out.str(3, child_comm.as_str());
            out.int(4, i64::from(*child_pid));
            out.end(m);
            "sched_process_fork"
        }
        EventKind::Exit(t) => {
            let m = out.begin(fe::SCHED_PROCESS_EXIT);
            out.str(1, t.comm.as_str());
            out.int(2, i64::from(t.pid));
            if t.prio >= 0 {
                out.int(4, i64::from(t.prio));
            }
            out.end(m);
            "sched_process_exit"
        }
        EventKind::Exec {
            filename,
            pid,
            old_pid,
        } => {
            let m = out.begin(fe::SCHED_PROCESS_EXEC);
            out.str(1, filename);
            out.int(2, i64::from(*pid));
            out.int(3, i64::from(*old_pid));
            out.end(m);
            "sched_process_exec"
        }
        EventKind::StatRuntime(r) => {
            let m = out.begin(fe::GENERIC);
            out.str(field::generic::EVENT_NAME, "sched_stat_runtime");
            generic_str(out, "comm", r.task.comm.as_str());
            generic_int(out, "pid", i64::from(r.task.pid));
            generic_uint(out, "runtime", r.runtime);
            if let Some(v) = r.vruntime {
                generic_uint(out, "vruntime", v);
            }
            out.end(m);
            "sched_stat_runtime"
        }
        EventKind::Block(b) => {
            if let Some(name) = encode_block(out, b) {
                return name;
            }
            let m = out.begin(fe::GENERIC);
            out.str(field::generic::EVENT_NAME, b.action.tracepoint());
            kind.for_each_field(&mut |k, v| match v {
                FieldRef::Int(i) => generic_int(out, k, i),
                FieldRef::UInt(u) => generic_uint(out, k, u),
                FieldRef::Str(s) => generic_str(out, k, s),
                FieldRef::State(st) => generic_str(out, k, &st.to_string()),
                FieldRef::Bytes(_) => {}
            });
            out.end(m);
            b.action.tracepoint()
        }
        EventKind::Generic(g) if encode_workqueue(out, g).is_some() => &g.name,
        EventKind::Generic(g) if encode_print(out, g).is_some() => &g.name,
        EventKind::Generic(g) => {
            let m = out.begin(fe::GENERIC);
            out.str(field::generic::EVENT_NAME, &g.name);
            for (k, v) in &g.fields {
                match v {
                    FieldValue::Int(i) => generic_int(out, k, *i),
                    FieldValue::UInt(u) => generic_uint(out, k, *u),
                    FieldValue::Str(s) => generic_str(out, k, s),
                    FieldValue::Bytes(b) => {
                        let mut hex = String::with_capacity(2 + 2 * b.len());
                        hex.push_str("0x");
                        for x in b {
                            hex.push(char::from(b"0123456789abcdef"[usize::from(x >> 4)]));
                            hex.push(char::from(b"0123456789abcdef"[usize::from(x & 15)]));
                        }
                        generic_str(out, k, &hex)
                    }
                }
            }
            out.end(m);
            &g.name
        }
        // handled by the caller; never encoded
        EventKind::Lost { .. } | EventKind::TaskComm { .. } | EventKind::Mapping(_) => "none",
    }
}

fn generic_field(out: &mut ProtoBuf, name: &str, write: impl FnOnce(&mut ProtoBuf)) {
    let f = out.begin(field::generic::FIELD);
    out.str(field::generic::FIELD_NAME, name);
    write(out);
    out.end(f);
}

fn generic_int(out: &mut ProtoBuf, name: &str, v: i64) {
    generic_field(out, name, |o| o.int(field::generic::INT_VALUE, v));
}

fn generic_uint(out: &mut ProtoBuf, name: &str, v: u64) {
    generic_field(out, name, |o| o.uint(field::generic::UINT_VALUE, v));
}

fn generic_str(out: &mut ProtoBuf, name: &str, v: &str) {
    generic_field(out, name, |o| o.str(field::generic::STR_VALUE, v));
}

/// Typed block events: `(message field, name, field numbers of dev sector nr_sector bytes
/// rwbs comm errors error)`; 0 = the proto has no such field.
struct BlockLayout {
    number: u32,
    name: &'static str,
    dev: u32,
    sector: u32,
    nr_sector: u32,
    bytes: u32,
    rwbs: u32,
    comm: u32,
    errors: u32,
    error: u32,
}

const BLOCK_LAYOUTS: [BlockLayout; 4] = [
    BlockLayout {
        number: fe::BLOCK_RQ_ISSUE,
        name: "block_rq_issue",
        dev: 1,
        sector: 2,
        nr_sector: 3,
        bytes: 4,
        rwbs: 5,
        comm: 6,
        errors: 0,
        error: 0,
    },
    BlockLayout {
        number: fe::BLOCK_RQ_INSERT,
        name: "block_rq_insert",
        dev: 1,
        sector: 2,
        nr_sector: 3,
        bytes: 4,
        rwbs: 5,
        comm: 6,
        errors: 0,
        error: 0,
    },
    BlockLayout {
        number: fe::BLOCK_RQ_COMPLETE,
        name: "block_rq_complete",
        dev: 1,
        sector: 2,
        nr_sector: 3,
        bytes: 0,
        rwbs: 5,
        comm: 0,
        errors: 4,
        error: 7,
    },
    BlockLayout {
        number: fe::BLOCK_BIO_QUEUE,
        name: "block_bio_queue",
        dev: 1,
        sector: 2,
        nr_sector: 3,
        bytes: 0,
        rwbs: 4,
        comm: 5,
        errors: 0,
        error: 0,
    },
];

/// `workqueue_execute_start` / `_end` as Perfetto's typed protos (`work`, `function`: the
/// trace processor draws each execution as a slice on the worker thread, named by the
/// function); `None` (nothing written) for other events or without both fields.
fn encode_workqueue(out: &mut ProtoBuf, g: &stallscope_model::GenericEvent) -> Option<()> {
    let number = match g.name.as_str() {
        "workqueue_execute_start" => field::ftrace::WORKQUEUE_EXECUTE_START,
        "workqueue_execute_end" => field::ftrace::WORKQUEUE_EXECUTE_END,
        _ => return None,
    };
    let get = |name: &str| {
        g.fields
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| match v {
                FieldValue::UInt(u) => Some(*u),
                FieldValue::Int(i) => Some(*i as u64),
                _ => None,
            })
    };
    let (work, function) = (get("work")?, get("function")?);
    let m = out.begin(number);
    out.uint(field::workqueue::WORK, work);
    out.uint(field::workqueue::FUNCTION, function);
    out.end(m);
    Some(())
}

/// A trace_marker line (`ftrace:print`) as Perfetto's typed `PrintFtraceEvent`, with the
/// newline the reader took off put back (the trace processor reads atrace `B|pid|name`
/// lines from it); `None` (nothing written) for other events.
fn encode_print(out: &mut ProtoBuf, g: &stallscope_model::GenericEvent) -> Option<()> {
    if g.name != "print" || g.system.as_deref() != Some("ftrace") {
        return None;
    }
    let mut ip = None;
    let mut buf = None;
    for (k, v) in &g.fields {
        match (k.as_str(), v) {
            ("ip", FieldValue::UInt(u)) => ip = Some(*u),
            ("buf", FieldValue::Str(s)) => buf = Some(s),
            _ => {}
        }
    }
    let buf = buf?;
    let m = out.begin(field::ftrace::PRINT);
    if let Some(ip) = ip {
        out.uint(field::print::IP, ip);
    }
    out.str(field::print::BUF, &format!("{buf}\n"));
    out.end(m);
    Some(())
}

/// Encodes a block event as its typed proto when Perfetto has one for its action and it
/// names a device; `None` (nothing written) otherwise.
fn encode_block(out: &mut ProtoBuf, b: &BlockEvent) -> Option<&'static str> {
    let name = b.action.tracepoint();
    let layout = BLOCK_LAYOUTS.iter().find(|l| l.name == name)?;
    let dev = b.dev?;
    let m = out.begin(layout.number);
    out.uint(layout.dev, u64::from(dev.0));
    out.uint(layout.sector, b.sector);
    out.uint(layout.nr_sector, u64::from(b.nr_sector));
    out.str(layout.rwbs, &b.rwbs.to_letters());
    if layout.bytes != 0 {
        if let Some(n) = b.bytes {
            out.uint(layout.bytes, u64::from(n));
        }
    }
    for number in [layout.errors, layout.error] {
        if number != 0 {
            if let Some(e) = b.error {
                out.int(number, i64::from(e));
            }
        }
    }
    if layout.comm != 0 {
        if let Some(c) = &b.comm {
            out.str(layout.comm, c.as_str());
        }
    }
    out.end(m);
    Some(layout.name)
}
