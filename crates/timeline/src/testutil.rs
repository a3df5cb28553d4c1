//! Builders of synthetic events for the unit tests.

use stallscope_model::{
    Comm, Cpu, Event, EventKind, FieldValue, GenericEvent, Migrate, PrevState, Span, StatRuntime,
    Switch, TaskRef, Tid, Ts, Wakeup,
};

/// A task named `c<pid>` unless `named` is used.
pub fn task(pid: Tid) -> TaskRef {
    TaskRef {
        comm: Comm::new(if pid == 0 { "swapper/0" } else { "task" }),
        pid,
        prio: 120,
    }
}

pub fn named(comm: &str, pid: Tid) -> TaskRef {
    TaskRef {
        comm: Comm::new(comm),
        pid,
        prio: 120,
    }
}

pub fn ev(ts: Ts, cpu: Cpu, kind: EventKind) -> Event {
    Event {
        ts,
        cpu,
        pid: -1,
        span: Span::default(),
        kind,
        callchain: None,
    }
}

/// `sched_switch` on `cpu`: `prev` leaves in `state` (`R`, `R+`, `S`, `D`, `I`, …).
pub fn sw(ts: Ts, cpu: Cpu, prev: TaskRef, state: &str, next: TaskRef) -> Event {
    let prev_state = PrevState::parse(state).unwrap_or_default();
    ev(
        ts,
        cpu,
        EventKind::Switch(Switch {
            prev,
            prev_state,
            next,
        }),
    )
}

pub fn waking(ts: Ts, t: TaskRef) -> Event {
    ev(
        ts,
        0,
        EventKind::Waking(Wakeup {
            task: t,
            target_cpu: Some(0),
        }),
    )
}

pub fn wakeup(ts: Ts, t: TaskRef) -> Event {
    ev(
        ts,
        0,
        EventKind::Wakeup(Wakeup {
            task: t,
            target_cpu: Some(0),
        }),
    )
}

pub fn wakeup_new(ts: Ts, t: TaskRef) -> Event {
    ev(
        ts,
        0,
        EventKind::WakeupNew(Wakeup {
            task: t,
            target_cpu: Some(0),
        }),
    )
}

pub fn runtime(ts: Ts, t: TaskRef, ns: u64) -> Event {
    ev(
        ts,
        0,
        EventKind::StatRuntime(StatRuntime {
            task: t,
            runtime: ns,
            vruntime: None,
        }),
    )
}

pub fn migrate(ts: Ts, t: TaskRef, from: Cpu, to: Cpu) -> Event {
    ev(
        ts,
        from,
        EventKind::Migrate(Migrate {
            task: t,
            orig_cpu: from,
            dest_cpu: to,
        }),
    )
}

pub fn fork(ts: Ts, parent: TaskRef, child: TaskRef) -> Event {
    ev(
        ts,
        0,
        EventKind::Fork {
            parent_comm: parent.comm,
            parent_pid: parent.pid,
            child_comm: child.comm,
            child_pid: child.pid,
        },
    )
}

pub fn comm(ts: Ts, tgid: Tid, tid: Tid, name: &str) -> Event {
    ev(
        ts,
        0,
        EventKind::TaskComm {
            tgid,
            tid,
            comm: Comm::new(name),
        },
    )
}

/// `e` as recorded on `cpu` in the context of task `pid` (a wakeup: the waker).
pub fn by(pid: Tid, cpu: Cpu, e: Event) -> Event {
    Event { pid, cpu, ..e }
}

/// A tracepoint the model has no kind for (`irq_handler_entry`, `workqueue_execute_start`).
pub fn generic(ts: Ts, name: &str, fields: Vec<(String, FieldValue)>) -> Event {
    ev(
        ts,
        0,
        EventKind::Generic(Box::new(GenericEvent {
            system: None,
            name: name.into(),
            fields,
        })),
    )
}
