//! The recorder's own threads: which tasks of a trace are the tool that recorded it, so that
//! findings about them are left out by default (`--include-recorder` keeps them).
//!
//! Recording costs CPU on the machine recorded: the recorder's readers wake every buffer
//! period, compete with the workload and hand work between their threads. A wait, a
//! ping-pong pair or a blocked chain whose subject is the recorder describes the recording,
//! not the machine. Which tasks are the recorder's:
//!
//! * the thread group `stallscope record` wrote as `recorder_pid` in the system context;
//! * in a trace written by stallscope, tasks named as stallscope names its threads:
//!   `stallscope`, `stallscope-…`, `tracedat-…`, and the perf.data readers' `perf-read` and
//!   `perf-decode` of earlier versions (older recorders did not store their pid; and a
//!   stallscope analysis running beside the recording is the tool too, not the workload);
//! * in a perf recording (perf.data or `perf script` text), tasks named `perf` — perf's own
//!   process (its workload runs as `perf-exec` and then under its own name).
//!
//! Only a finding's *subject* decides (its victim, ping-pong partner, blocked or waiting
//! task): the recorder may still be named among what ran meanwhile, since it did run.

use stallscope_model::{InputFormat, SystemContext, TaskContext, Tid, TraceMeta};

/// The names stallscope gives its threads (`Prefix`: any name starting so).
const STALLSCOPE_THREADS: &[ThreadName] = &[
    ThreadName::Exact("stallscope"),
    ThreadName::Prefix("stallscope-"),
    ThreadName::Prefix("tracedat-"),
    ThreadName::Exact("perf-read"),
    ThreadName::Exact("perf-decode"),
];

/// A thread name, whole or as a prefix.
enum ThreadName {
    Exact(&'static str),
    Prefix(&'static str),
}

impl ThreadName {
    fn matches(&self, comm: &str) -> bool {
        match self {
            ThreadName::Exact(n) => comm == *n,
            ThreadName::Prefix(p) => comm.starts_with(p),
        }
    }
}

/// Roles that make a task what a finding is about.
pub const SUBJECT_ROLES: &[&str] = &["victim", "partner", "blocked", "waiter"];

/// How the recorder's tasks are recognized in these inputs.
#[derive(Clone, Debug, Default)]
pub struct RecorderTasks {
    /// The recorder's process id from the system context.
    pid: Option<Tid>,
    /// Some input was written by stallscope (its thread names identify it).
    stallscope: bool,
    /// Some input was recorded by perf.
    perf: bool,
}

impl RecorderTasks {
    /// The recognizer for inputs described by `metas`, with the context they carry.
    pub fn for_inputs(metas: &[&TraceMeta], system: Option<&SystemContext>) -> RecorderTasks {
        let tool = |m: &&&TraceMeta, name: &str| {
            m.tool_version.as_deref().is_some_and(|v| v.contains(name))
        };
        RecorderTasks {
            pid: system.and_then(|s| s.recorder_pid),
            stallscope: metas.iter().any(|m| tool(&m, "stallscope")),
            perf: metas.iter().any(|m| {
                matches!(
                    m.format,
                    Some(InputFormat::PerfData) | Some(InputFormat::PerfScriptText)
                ) || m
                    .tool_version
                    .as_deref()
                    .is_some_and(|v| v.starts_with("perf "))
            }),
        }
    }

    /// Whether task `tid` named `comm` (with its recorded context, when any) is the
    /// recorder's.
    pub fn is_recorder(&self, tid: Tid, comm: &str, context: Option<&TaskContext>) -> bool {
        if let Some(pid) = self.pid {
            if tid == pid || context.is_some_and(|c| c.tgid == pid) {
                return true;
            }
        }
        (self.stallscope && STALLSCOPE_THREADS.iter().any(|n| n.matches(comm)))
            || (self.perf && comm == "perf")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorder_is_its_thread_group_or_its_thread_names() {
        let ctx = SystemContext {
            recorder_pid: Some(500),
            ..SystemContext::default()
        };
        let dat = TraceMeta {
            format: Some(InputFormat::TraceDat),
            tool_version: Some("trace-cmd stallscope 0.1.0 (trace.dat v6)".into()),
            ..TraceMeta::default()
        };
        let r = RecorderTasks::for_inputs(&[&dat], Some(&ctx));
        let thread = TaskContext {
            pid: 501,
            tgid: 500,
            ..TaskContext::default()
        };
        assert!(r.is_recorder(500, "anything", None));
        assert!(r.is_recorder(501, "renamed", Some(&thread)));
        assert!(r.is_recorder(77, "stallscope-cpu1", None));
        assert!(r.is_recorder(78, "tracedat-0", None));
        assert!(r.is_recorder(79, "perf-decode", None));
        assert!(!r.is_recorder(79, "perf", None)); // not a perf recording
        assert!(!r.is_recorder(79, "perf-exec", None));
        assert!(!r.is_recorder(80, "stress-ng-cpu", None));
        let perf = TraceMeta {
            format: Some(InputFormat::PerfData),
            tool_version: Some("perf 6.1.192".into()),
            ..TraceMeta::default()
        };
        let r = RecorderTasks::for_inputs(&[&perf], None);
        assert!(r.is_recorder(79, "perf", None));
        assert!(!r.is_recorder(81, "perf-exec", None));
        assert!(!r.is_recorder(77, "stallscope", None)); // not stallscope's recording
    }
}
