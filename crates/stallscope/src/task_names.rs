//! [`TaskNames`]: the task names the events carry (switches, wakeups, comm records), for
//! labels such as `fio (4242)`.

use std::collections::HashMap;

use stallscope_model::{Comm, Event, EventKind, Tid};

/// Task names seen in the events, the last one per task.
#[derive(Clone, Debug, Default)]
pub struct TaskNames(HashMap<Tid, Comm>);

impl TaskNames {
    /// Notes the names `ev` carries.
    pub fn note(&mut self, ev: &Event) {
        match &ev.kind {
            EventKind::Switch(s) => {
                self.0.insert(s.prev.pid, s.prev.comm);
                self.0.insert(s.next.pid, s.next.comm);
            }
            EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => {
                self.0.insert(w.task.pid, w.task.comm);
            }
            EventKind::TaskComm { tid, comm, .. } => {
                self.0.insert(*tid, *comm);
            }
            _ => {}
        }
    }

    /// The task's name, when seen.
    pub fn comm(&self, pid: Tid) -> Option<Comm> {
        self.0.get(&pid).copied()
    }

    /// `comm (pid)`, or `pid N` for a task never named.
    pub fn label(&self, pid: Tid) -> String {
        match self.0.get(&pid) {
            Some(c) if !c.is_empty() => format!("{} ({pid})", c.as_str()),
            _ => format!("pid {pid}"),
        }
    }
}
