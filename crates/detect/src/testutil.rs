//! Synthetic event builders and a runner for the detectors' unit tests.

use stallscope_model::{
    BlockAction, BlockDev, BlockEvent, Comm, Cpu, Event, EventKind, Finding, GenericEvent, Migrate,
    PrevState, Span, SpanPos, StatRuntime, Switch, TaskRef, Tid, TraceMeta, Ts, Wakeup,
};

use crate::{registry, Engine, Params};

pub const MS: Ts = 1_000_000;

/// A task `name` with `pid` and kernel priority `prio`.
pub fn t(name: &str, pid: Tid, prio: i32) -> TaskRef {
    TaskRef {
        comm: Comm::new(name),
        pid,
        prio,
    }
}

pub fn idle() -> TaskRef {
    t("swapper", 0, 120)
}

/// Events numbered by line so evidence sources are checkable.
pub struct Trace {
    pub events: Vec<Event>,
}

impl Trace {
    pub fn new() -> Trace {
        Trace { events: Vec::new() }
    }
    fn push(&mut self, ts: Ts, cpu: Cpu, pid: Tid, kind: EventKind) -> &mut Self {
        let line = self.events.len() as u64 + 1;
        self.events.push(Event {
            ts,
            cpu,
            pid,
            span: Span::new(0, SpanPos::Line(line)),
            kind,
            callchain: None,
        });
        self
    }
    /// `prev` leaves `cpu` in `state`, `next` enters.
    pub fn sw(&mut self, ts: Ts, cpu: Cpu, prev: TaskRef, state: &str, next: TaskRef) -> &mut Self {
        let prev_state = PrevState::parse(state).unwrap_or_default();
        self.push(
            ts,
            cpu,
            prev.pid,
            EventKind::Switch(Switch {
                prev,
                prev_state,
                next,
            }),
        )
    }
    /// `waker` (running on `cpu`) wakes `task` towards `target`.
    pub fn wake(&mut self, ts: Ts, cpu: Cpu, waker: Tid, task: TaskRef, target: Cpu) -> &mut Self {
        self.push(
            ts,
            cpu,
            waker,
            EventKind::Waking(Wakeup {
                task,
                target_cpu: Some(target),
            }),
        )
    }
    pub fn migrate(&mut self, ts: Ts, cpu: Cpu, task: TaskRef, from: Cpu, to: Cpu) -> &mut Self {
        self.push(
            ts,
            cpu,
            -1,
            EventKind::Migrate(Migrate {
                task,
                orig_cpu: from,
                dest_cpu: to,
            }),
        )
    }
    pub fn generic(
        &mut self,
        ts: Ts,
        cpu: Cpu,
        pid: Tid,
        name: &str,
        fields: Vec<(String, stallscope_model::FieldValue)>,
    ) -> &mut Self {
        self.push(
            ts,
            cpu,
            pid,
            EventKind::Generic(Box::new(GenericEvent {
                system: None,
                name: name.into(),
                fields,
            })),
        )
    }

    /// `sched_stat_runtime` charging `task` 1 ms, with `vruntime`.
    pub fn stat(&mut self, ts: Ts, cpu: Cpu, task: TaskRef, vruntime: u64) -> &mut Self {
        self.push(
            ts,
            cpu,
            task.pid,
            EventKind::StatRuntime(StatRuntime {
                task,
                runtime: MS,
                vruntime: Some(vruntime),
            }),
        )
    }

    /// A block request event on device 7,0: `action` at `sector` + `nr_sector`.
    pub fn block_rq(
        &mut self,
        ts: Ts,
        cpu: Cpu,
        pid: Tid,
        action: BlockAction,
        sector: u64,
        nr_sector: u32,
    ) -> &mut Self {
        let mut b = BlockEvent::new(action);
        b.dev = Some(BlockDev::new(7, 0));
        b.sector = sector;
        b.nr_sector = nr_sector;
        b.rwbs = stallscope_model::Rwbs::parse("WS").unwrap_or_default();
        self.push(ts, cpu, pid, EventKind::Block(Box::new(b)))
    }

    /// A block event with only its action set (device 7,0).
    pub fn block(&mut self, ts: Ts, cpu: Cpu, pid: Tid, action: BlockAction) -> &mut Self {
        let mut b = BlockEvent::new(action);
        b.dev = Some(BlockDev::new(7, 0));
        self.push(ts, cpu, pid, EventKind::Block(Box::new(b)))
    }
}

/// Runs detector `id` with `sets` (`name=value`) over `trace`; its findings.
pub fn run(id: &str, sets: &[(&str, &str)], trace: &Trace) -> Vec<Finding> {
    run_with(id, sets, trace, None)
}

/// [`run`] with recorded system context.
pub fn run_with(
    id: &str,
    sets: &[(&str, &str)],
    trace: &Trace,
    system: Option<stallscope_model::SystemContext>,
) -> Vec<Finding> {
    run_meta(
        id,
        sets,
        trace,
        TraceMeta {
            system_context: system,
            ..TraceMeta::default()
        },
    )
}

/// [`run`] with the input described by `meta` (its path and declared events are set here).
pub fn run_meta(id: &str, sets: &[(&str, &str)], trace: &Trace, meta: TraceMeta) -> Vec<Finding> {
    let e = registry::find(id).expect("registered");
    let mut p = Params::defaults(e.info.params);
    for (k, v) in sets {
        p.set(e.info.params, k, v).expect("valid param");
    }
    let meta = TraceMeta {
        path: "synthetic.txt".into(),
        declared_events: vec!["sched_switch".into(), "sched_waking".into()],
        ..meta
    };
    let mut engine = Engine::new(vec![(e.make)(&p)], &[&meta]);
    for ev in &trace.events {
        engine.process(ev);
    }
    let out = engine.finish();
    out.outcomes
        .into_iter()
        .next()
        .expect("one")
        .result
        .expect("needs met")
}
