//! The tasks an export names: every task id seen in an event (context pid, payload tasks,
//! `task_comm` side-band records), with its latest name and, when a `task_comm` record
//! said so, its thread-group id (process id).
//!
//! Used for Perfetto's `ProcessTree` packet and Chrome JSON `thread_name` metadata. The
//! idle task (tid 0, `swapper/N`) is not listed: viewers name it themselves.

use std::collections::BTreeMap;

use stallscope_model::{Comm, Event, EventKind, Tid};

/// What is known about one task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskInfo {
    /// Latest name seen (empty when only the id was seen).
    pub name: Comm,
    /// Thread-group id when a `task_comm` record gave it.
    pub tgid: Option<Tid>,
}

/// Task id → what is known, ascending by id.
#[derive(Clone, Debug, Default)]
pub struct TaskTable {
    tasks: BTreeMap<Tid, TaskInfo>,
}

impl TaskTable {
    /// Empty table.
    pub fn new() -> TaskTable {
        TaskTable::default()
    }

    fn name(&mut self, tid: Tid, comm: &Comm) {
        if tid <= 0 {
            return;
        }
        let t = self.tasks.entry(tid).or_default();
        if !comm.is_empty() {
            t.name = *comm;
        }
    }

    /// Learns from one event.
    pub fn observe(&mut self, ev: &Event) {
        if ev.pid > 0 {
            self.tasks.entry(ev.pid).or_default();
        }
        match &ev.kind {
            EventKind::Switch(s) => {
                self.name(s.prev.pid, &s.prev.comm);
                self.name(s.next.pid, &s.next.comm);
            }
            EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => {
                self.name(w.task.pid, &w.task.comm)
            }
            EventKind::Migrate(m) => self.name(m.task.pid, &m.task.comm),
            EventKind::Fork {
                parent_comm,
                parent_pid,
                child_comm,
                child_pid,
            } => {
                self.name(*parent_pid, parent_comm);
                self.name(*child_pid, child_comm);
            }
            EventKind::Exit(t) => self.name(t.pid, &t.comm),
            EventKind::StatRuntime(r) => self.name(r.task.pid, &r.task.comm),
            EventKind::TaskComm { tgid, tid, comm } => {
                self.name(*tid, comm);
                if *tid > 0 && *tgid > 0 {
                    if let Some(t) = self.tasks.get_mut(tid) {
                        t.tgid = Some(*tgid);
                    }
                }
            }
            EventKind::Exec { .. }
            | EventKind::Lost { .. }
            | EventKind::Generic(_)
            | EventKind::Mapping(_)
            | EventKind::Block(_) => {}
        }
    }

    /// Learns the thread-group ids of `(tid, tgid)` pairs (keeping one already known).
    pub fn learn_tgids(&mut self, pairs: &[(Tid, Tid)]) {
        for &(tid, tgid) in pairs {
            if tid > 0 && tgid > 0 {
                self.tasks.entry(tid).or_default().tgid.get_or_insert(tgid);
                self.tasks.entry(tgid).or_default().tgid.get_or_insert(tgid);
            }
        }
    }

    /// Learns thread-group ids (and names) from recorded per-task context (`stallscope
    /// record` stores every task's tgid): processes are grouped for trace formats whose
    /// events do not carry the tgid.
    pub fn learn_context(&mut self, ctx: &stallscope_model::SystemContext) {
        for t in &ctx.tasks {
            if t.pid <= 0 || t.tgid <= 0 {
                continue;
            }
            let e = self.tasks.entry(t.pid).or_default();
            e.tgid.get_or_insert(t.tgid);
            if e.name.is_empty() && !t.comm.is_empty() {
                e.name = Comm::new(&t.comm);
            }
            // the process itself, with its name, when the leader is not a listed task
            if t.tgid != t.pid {
                let leader = self.tasks.entry(t.tgid).or_default();
                leader.tgid.get_or_insert(t.tgid);
            }
        }
    }

    /// Known tasks, ascending by id.
    pub fn iter(&self) -> impl Iterator<Item = (Tid, &TaskInfo)> {
        self.tasks.iter().map(|(t, i)| (*t, i))
    }

    /// Number of tasks known.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// True when no task is known.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Name of a task, when known.
    pub fn get(&self, tid: Tid) -> Option<&TaskInfo> {
        self.tasks.get(&tid)
    }
}
