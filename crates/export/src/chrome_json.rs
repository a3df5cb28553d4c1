//! Streaming Chrome trace-event JSON writer (object form), for viewers without Perfetto
//! protobuf support (chrome://tracing, Speedscope, older tools; Perfetto reads it too).
//!
//! ```text
//! {"displayTimeUnit":"ns","traceEvents":[
//! {"ph":"M","name":"process_name","ts":0,"pid":1073741825,"tid":1073741825,"args":{"name":"CPU 1"}},
//! {"ph":"X","cat":"sched","name":"cyclictest","ts":595127047.000,"dur":98.766,"pid":1073741825,"tid":1073741825,"args":{"tid":12897,"prio":120,"end_state":"S"}},
//! {"ph":"i","s":"t","cat":"sched","name":"sched_waking","ts":595127046.120,"pid":1073741825,"tid":1073741825,"args":{"comm":"cyclictest","pid":12897,"prio":120,"target_cpu":1}},
//! ...],
//! "otherData":{"generator":"stallscope","kernel_release":"6.18.44-fc-v769","events_not_drawn":{"sched_stat_runtime":1669}}}
//! ```
//!
//! * CPUs have no place in this format, so each CPU is a fake process "CPU n" with pid
//!   [`CPU_PID_BASE`]` + n` (above the kernel's `PID_MAX_LIMIT` of 2^22, so it cannot clash
//!   with a real pid) and one thread of the same id.
//! * `X` run slices come from `sched_switch`: a switch closes the slice of the task that was
//!   running since the CPU's previous switch and opens one for `next`. The first switch on a
//!   CPU closes a slice that starts at the CPU's first event (the run began before the trace;
//!   `args.truncated = "start"`), and at the end the task still running gets a slice up to
//!   the CPU's last event (`truncated = "end"`). A slice is always named after the switch's
//!   `prev`; when the CPU's previous switch had switched in another task (records missing),
//!   it starts at that switch and is marked `truncated = "start"` too. The idle task (pid 0) gets no slices. So:
//!   `X` slices on a CPU = its switches with `prev_pid != 0` + 1 if its last switch's
//!   `next_pid != 0`.
//! * `i` instants (thread scope) for `sched_waking`/`sched_wakeup`/`sched_wakeup_new`,
//!   `sched_migrate_task`, `sched_process_fork/exit/exec` and lost-event markers, on the CPU
//!   that recorded them.
//! * Other events (`sched_stat_runtime`, block, workqueue, …) are not drawn; their counts
//!   are listed in `otherData.events_not_drawn`.
//! * Findings: process "stallscope findings" (pid [`FINDINGS_PID`]), one `X` slice per
//!   finding named by its title, on tid = lane + 1 so overlapping findings do not share a
//!   row; detector, severity, CPUs, tasks, measures and hint in `args`.
//! * `ts` and `dur` are µs with exactly 3 decimals, written from integer ns (no floating
//!   point): 595127047123 ns → `595127047.123`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use stallscope_model::{Cpu, Event, EventKind, Finding, PrevState, TaskRef, Ts};

use crate::lanes::assign_lanes;
use crate::ExportStats;

/// pid of the fake process of CPU 0 (CPU n is `CPU_PID_BASE + n`).
pub const CPU_PID_BASE: i64 = 1 << 30;
/// pid of the findings process.
pub const FINDINGS_PID: i64 = CPU_PID_BASE - 1;

/// The task running on a CPU since a switch.
#[derive(Clone, Copy)]
struct Running {
    task: TaskRef,
    since: Ts,
}

/// Per-CPU state: first/last event time and who runs.
struct CpuLane {
    first_ts: Ts,
    last_ts: Ts,
    running: Option<Running>,
    switches: u64,
}

/// Writes Chrome JSON as events arrive; see the module docs for the layout.
pub struct ChromeJsonWriter<W: Write> {
    out: W,
    cpus: BTreeMap<Cpu, CpuLane>,
    not_drawn: BTreeMap<String, u64>,
    kernel_release: Option<String>,
    line: String,
    stats: ExportStats,
}

/// Appends ns as µs with 3 decimals.
pub fn push_us(out: &mut String, ns: Ts) {
    let _ = write!(out, "{}.{:03}", ns / 1000, ns % 1000);
}

/// Appends a JSON string literal.
pub fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn cpu_pid(cpu: Cpu) -> i64 {
    CPU_PID_BASE + i64::from(cpu)
}

impl<W: Write> ChromeJsonWriter<W> {
    /// Starts the document.
    pub fn new(mut out: W, kernel_release: Option<&str>) -> io::Result<ChromeJsonWriter<W>> {
        let head = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
        out.write_all(head.as_bytes())?;
        let stats = ExportStats {
            bytes: head.len() as u64,
            ..ExportStats::default()
        };
        Ok(ChromeJsonWriter {
            out,
            cpus: BTreeMap::new(),
            not_drawn: BTreeMap::new(),
            kernel_release: kernel_release.map(str::to_string),
            line: String::with_capacity(256),
            stats,
        })
    }

    /// Writes the event in `self.line` (a JSON object) with its separator.
    fn emit(&mut self) -> io::Result<()> {
        if self.stats.trace_events > 0 {
            self.out.write_all(b",\n")?;
            self.stats.bytes += 2;
        }
        self.out.write_all(self.line.as_bytes())?;
        self.stats.bytes += self.line.len() as u64;
        self.stats.trace_events += 1;
        self.line.clear();
        Ok(())
    }

    /// Starts an event object: `{"ph":PH,"name":NAME,"ts":TS,"pid":PID,"tid":TID`.
    fn begin(&mut self, ph: &str, name: &str, ts: Ts, pid: i64, tid: i64) {
        self.line.clear();
        let _ = write!(self.line, "{{\"ph\":\"{ph}\",\"name\":");
        push_json_str(&mut self.line, name);
        self.line.push_str(",\"ts\":");
        push_us(&mut self.line, ts);
        let _ = write!(self.line, ",\"pid\":{pid},\"tid\":{tid}");
    }

    fn metadata(&mut self, what: &str, pid: i64, tid: i64, name: &str) -> io::Result<()> {
        self.begin("M", what, 0, pid, tid);
        self.line.push_str(",\"args\":{\"name\":");
        push_json_str(&mut self.line, name);
        self.line.push_str("}}");
        self.emit()
    }

    fn slice(
        &mut self,
        cpu: Cpu,
        task: &TaskRef,
        start: Ts,
        end: Ts,
        end_state: Option<PrevState>,
        truncated: Option<&str>,
    ) -> io::Result<()> {
        let pid = cpu_pid(cpu);
        let name = if task.comm.is_empty() {
            format!("pid {}", task.pid)
        } else {
            task.comm.as_str().to_string()
        };
        self.begin("X", &name, start, pid, pid);
        self.line.push_str(",\"cat\":\"sched\",\"dur\":");
        push_us(&mut self.line, end.saturating_sub(start));
        let _ = write!(
            self.line,
            ",\"args\":{{\"tid\":{},\"prio\":{}",
            task.pid, task.prio
        );
        if let Some(s) = end_state {
            let _ = write!(self.line, ",\"end_state\":\"{s}\"");
        }
        if let Some(t) = truncated {
            let _ = write!(self.line, ",\"truncated\":\"{t}\"");
        }
        self.line.push_str("}}");
        self.emit()
    }

    fn instant(
        &mut self,
        ev: &Event,
        name: &str,
        task: &TaskRef,
        extra: &[(&str, i64)],
    ) -> io::Result<()> {
        let pid = cpu_pid(ev.cpu);
        self.begin("i", name, ev.ts, pid, pid);
        self.line
            .push_str(",\"s\":\"t\",\"cat\":\"sched\",\"args\":{\"comm\":");
        push_json_str(&mut self.line, task.comm.as_str());
        let _ = write!(self.line, ",\"pid\":{}", task.pid);
        if task.prio >= 0 {
            let _ = write!(self.line, ",\"prio\":{}", task.prio);
        }
        for (k, v) in extra {
            let _ = write!(self.line, ",\"{k}\":{v}");
        }
        self.line.push_str("}}");
        self.emit()
    }

    /// Adds one event (time order per CPU).
    pub fn event(&mut self, ev: &Event) -> io::Result<()> {
        self.stats.count(ev.kind.name());
        if ev.kind.is_side_band() {
            // side-band naming record, no time or CPU of its own
            *self
                .not_drawn
                .entry(ev.kind.name().to_string())
                .or_default() += 1;
            return Ok(());
        }
        if !self.cpus.contains_key(&ev.cpu) {
            let pid = cpu_pid(ev.cpu);
            let name = format!("CPU {}", ev.cpu);
            self.metadata("process_name", pid, pid, &name)?;
            self.metadata("thread_name", pid, pid, &name)?;
            self.begin("M", "process_sort_index", 0, pid, pid);
            let _ = write!(self.line, ",\"args\":{{\"sort_index\":{}}}}}", ev.cpu);
            self.emit()?;
            self.cpus.insert(
                ev.cpu,
                CpuLane {
                    first_ts: ev.ts,
                    last_ts: ev.ts,
                    running: None,
                    switches: 0,
                },
            );
        }
        let (first_ts, previous) = match self.cpus.get_mut(&ev.cpu) {
            Some(lane) => {
                lane.last_ts = lane.last_ts.max(ev.ts);
                if let EventKind::Switch(s) = &ev.kind {
                    lane.switches += 1;
                    let prev = lane.running.replace(Running {
                        task: s.next,
                        since: ev.ts,
                    });
                    (lane.first_ts, Some(prev))
                } else {
                    (lane.first_ts, None)
                }
            }
            // INVARIANT: inserted just above
            None => (ev.ts, None),
        };
        match &ev.kind {
            EventKind::Switch(s) => {
                // the slice is the switch's `prev`; when the CPU's previous switch named
                // another task as `next` (records missing), its start is uncertain
                let (since, note) = match previous.flatten() {
                    Some(r) if r.task.pid == s.prev.pid => (r.since, None),
                    Some(r) => (r.since, Some("start")),
                    None => (first_ts, Some("start")),
                };
                if s.prev.pid != 0 {
                    self.slice(ev.cpu, &s.prev, since, ev.ts, Some(s.prev_state), note)?;
                }
            }
            EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => {
                let extra: Vec<(&str, i64)> = w
                    .target_cpu
                    .map(|c| ("target_cpu", i64::from(c)))
                    .into_iter()
                    .collect();
                self.instant(ev, ev.kind.name(), &w.task, &extra)?;
            }
            EventKind::Migrate(m) => {
                self.instant(
                    ev,
                    "sched_migrate_task",
                    &m.task,
                    &[
                        ("orig_cpu", i64::from(m.orig_cpu)),
                        ("dest_cpu", i64::from(m.dest_cpu)),
                    ],
                )?;
            }
            EventKind::Fork {
                parent_comm,
                parent_pid,
                child_pid,
                ..
            } => {
                let parent = TaskRef {
                    comm: *parent_comm,
                    pid: *parent_pid,
                    prio: -1,
                };
                self.instant(
                    ev,
                    "sched_process_fork",
                    &parent,
                    &[("child_pid", i64::from(*child_pid))],
                )?;
            }
            EventKind::Exit(t) => self.instant(ev, "sched_process_exit", t, &[])?,
            EventKind::Exec { pid, old_pid, .. } => {
                let task = TaskRef {
                    comm: Default::default(),
                    pid: *pid,
                    prio: -1,
                };
                self.instant(
                    ev,
                    "sched_process_exec",
                    &task,
                    &[("old_pid", i64::from(*old_pid))],
                )?;
            }
            EventKind::Lost { count } => {
                let pid = cpu_pid(ev.cpu);
                self.begin("i", "lost events", ev.ts, pid, pid);
                self.line
                    .push_str(",\"s\":\"t\",\"cat\":\"sched\",\"args\":{");
                if let Some(c) = count {
                    let _ = write!(self.line, "\"count\":{c}");
                }
                self.line.push_str("}}");
                self.emit()?;
            }
            EventKind::StatRuntime(_) | EventKind::Generic(_) | EventKind::Block(_) => {
                let name = ev.kind.name();
                match self.not_drawn.get_mut(name) {
                    Some(n) => *n += 1,
                    None => {
                        self.not_drawn.insert(name.to_string(), 1);
                    }
                }
            }
            EventKind::TaskComm { .. } | EventKind::Mapping(_) => {}
        }
        Ok(())
    }

    /// Closes the running slices, writes the findings and ends the document.
    pub fn finish(mut self, findings: &[Finding]) -> io::Result<(W, ExportStats)> {
        let open: Vec<(Cpu, Running, Ts)> = self
            .cpus
            .iter()
            .filter_map(|(cpu, l)| l.running.map(|r| (*cpu, r, l.last_ts)))
            .collect();
        for (cpu, r, last) in open {
            if r.task.pid != 0 {
                self.slice(cpu, &r.task, r.since, last, None, Some("end"))?;
            }
        }
        self.write_findings(findings)?;
        let mut tail = String::from("\n],\"otherData\":{\"generator\":\"stallscope\"");
        if let Some(r) = &self.kernel_release {
            tail.push_str(",\"kernel_release\":");
            push_json_str(&mut tail, r);
        }
        tail.push_str(",\"events_not_drawn\":{");
        for (i, (name, n)) in self.not_drawn.iter().enumerate() {
            if i > 0 {
                tail.push(',');
            }
            push_json_str(&mut tail, name);
            let _ = write!(tail, ":{n}");
        }
        tail.push_str("}}}\n");
        self.out.write_all(tail.as_bytes())?;
        self.out.flush()?;
        self.stats.bytes += tail.len() as u64;
        Ok((self.out, self.stats))
    }

    fn write_findings(&mut self, findings: &[Finding]) -> io::Result<()> {
        if findings.is_empty() {
            return Ok(());
        }
        self.metadata("process_name", FINDINGS_PID, 0, "stallscope findings")?;
        let lanes = assign_lanes(
            findings
                .iter()
                .map(|f| (f.window.start_ns, f.window.end_ns)),
        );
        let nr_lanes = lanes.iter().copied().max().map_or(0, |m| m + 1);
        for lane in 0..nr_lanes {
            let name = format!("findings {}", lane + 1);
            self.metadata("thread_name", FINDINGS_PID, lane as i64 + 1, &name)?;
        }
        for (f, lane) in findings.iter().zip(lanes) {
            self.begin(
                "X",
                &f.title,
                f.window.start_ns,
                FINDINGS_PID,
                lane as i64 + 1,
            );
            self.line.push_str(",\"cat\":\"stallscope\",\"dur\":");
            push_us(
                &mut self.line,
                f.window.end_ns.saturating_sub(f.window.start_ns),
            );
            self.line.push_str(",\"args\":{\"detector\":");
            push_json_str(&mut self.line, &f.detector);
            let _ = write!(
                self.line,
                ",\"severity\":\"{}\",\"cpus\":",
                f.severity.name()
            );
            let cpus: Vec<String> = f.cpus.iter().map(u32::to_string).collect();
            let _ = write!(self.line, "[{}]", cpus.join(","));
            for t in &f.tasks {
                self.line.push(',');
                push_json_str(&mut self.line, &t.role);
                self.line.push(':');
                push_json_str(&mut self.line, &format!("{} (pid {})", t.comm, t.pid));
            }
            for (k, v) in &f.measures {
                self.line.push(',');
                push_json_str(&mut self.line, k);
                let _ = write!(self.line, ":{v}");
            }
            if !f.hint.is_empty() {
                self.line.push_str(",\"hint\":");
                push_json_str(&mut self.line, &f.hint);
            }
            self.line.push_str("}}");
            self.emit()?;
            self.stats.findings += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_with_three_decimals_from_integer_ns() {
        let mut s = String::new();
        push_us(&mut s, 595_127_047_123);
        s.push(' ');
        push_us(&mut s, 5);
        assert_eq!(s, "595127047.123 0.005");
    }

    #[test]
    fn json_strings_are_escaped() {
        let mut s = String::new();
        push_json_str(&mut s, "a\"b\\c\u{1}");
        assert_eq!(s, "\"a\\\"b\\\\c\\u0001\"");
    }
}
