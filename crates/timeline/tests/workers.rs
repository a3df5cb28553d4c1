//! WorkerPools on synthetic workqueue sequences: concurrency counting, overlapping and
//! unterminated executions, worker reuse, latency, CPU time and the text payload forms.

use stallscope_model::{
    Comm, Event, EventKind, FieldValue, GenericEvent, PrevState, Problem, Span, SpanPos, Switch,
    TaskRef, Tid, Ts, Wakeup,
};
use stallscope_timeline::workers::{WorkFn, WorkerPools};

const F: u64 = 0xffff_ffff_8150_0000;
const G: u64 = 0xffff_ffff_8160_0000;

fn ev(ts: Ts, cpu: u32, pid: Tid, kind: EventKind) -> Event {
    Event {
        ts,
        cpu,
        pid,
        span: Span::new(0, SpanPos::Line(1)),
        kind,
        callchain: None,
    }
}

fn wq(name: &str, fields: Vec<(&str, FieldValue)>) -> EventKind {
    EventKind::Generic(Box::new(GenericEvent {
        system: Some("workqueue".into()),
        name: name.into(),
        fields: fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    }))
}

fn queue(work: u64, f: u64, q: &str) -> EventKind {
    wq(
        "workqueue_queue_work",
        vec![
            ("work", FieldValue::UInt(work)),
            ("function", FieldValue::UInt(f)),
            ("workqueue", FieldValue::Str(q.into())),
            ("req_cpu", FieldValue::UInt(256)),
            ("cpu", FieldValue::UInt(0)),
        ],
    )
}

fn start(work: u64, f: u64) -> EventKind {
    wq(
        "workqueue_execute_start",
        vec![
            ("work", FieldValue::UInt(work)),
            ("function", FieldValue::UInt(f)),
        ],
    )
}

fn end(work: u64, f: u64) -> EventKind {
    wq(
        "workqueue_execute_end",
        vec![
            ("work", FieldValue::UInt(work)),
            ("function", FieldValue::UInt(f)),
        ],
    )
}

fn task(pid: Tid) -> TaskRef {
    TaskRef {
        comm: Comm::new(&format!("kworker/0:{pid}")),
        pid,
        prio: 120,
    }
}

fn sw(prev: Tid, state: &str, next: Tid) -> EventKind {
    EventKind::Switch(Switch {
        prev: task(prev),
        prev_state: PrevState::parse(state).expect("state"),
        next: task(next),
    })
}

fn waking(pid: Tid) -> EventKind {
    EventKind::Waking(Wakeup {
        task: task(pid),
        target_cpu: Some(0),
    })
}

fn run(events: Vec<Event>) -> WorkerPools {
    let mut p = WorkerPools::new();
    for e in &events {
        p.process(e);
    }
    p.finish();
    p
}

#[test]
fn overlapping_executions_count_concurrency_and_active() {
    // Three workers take three items; the first two sleep mid-item, one is woken again.
    let p = run(vec![
        ev(0, 0, 9, queue(0xa0, F, "dio/loop1")),
        ev(1, 0, 9, queue(0xb0, F, "dio/loop1")),
        ev(2, 0, 9, queue(0xc0, F, "dio/loop1")),
        ev(10, 0, 1, start(0xa0, F)),
        ev(20, 0, 1, sw(1, "D", 2)),
        ev(30, 0, 2, start(0xb0, F)),
        ev(40, 0, 2, sw(2, "D", 3)),
        ev(50, 0, 3, start(0xc0, F)), // 3 executing, 1 active
        ev(60, 0, 3, waking(1)),      // 3 executing, 2 active
        ev(70, 0, 3, sw(3, "R+", 1)), // preempted: still active
        ev(80, 0, 1, end(0xa0, F)),
        ev(90, 0, 1, sw(1, "I", 3)),
        ev(100, 0, 3, end(0xc0, F)),
        ev(110, 0, 3, waking(2)),
        ev(120, 0, 3, sw(3, "I", 2)),
        ev(130, 0, 2, end(0xb0, F)),
    ]);
    let st = p.function(&WorkFn::Addr(F)).expect("F seen");
    assert_eq!(st.workers.len(), 3);
    assert_eq!(st.executions, 3);
    assert_eq!(st.completed, 3);
    assert_eq!(st.peak_executing, 3);
    assert_eq!(st.peak_executing_ts, 50);
    assert_eq!(st.peak_active, 2);
    assert_eq!(st.peak_active_ts, 60);
    assert_eq!(st.executing, 0);
    assert_eq!(st.active, 0);
    // Switch-outs mid-item: 1 (D), 2 (D), 3 (R+); the "I" switch-outs come after the ends.
    assert_eq!(st.switches, 3);
    assert_eq!(st.sleeps, 2);
    // CPU: worker 1 10..20 + 70..80, worker 2 30..40 + 120..130, worker 3 50..70 + 90..100.
    assert_eq!(st.cpu_ns, 20 + 20 + 30);
    assert_eq!(st.workers[&1].cpu_ns, 20);
    assert_eq!(st.workers[&3].cpu_ns, 30);
    // In flight: 70 + 100 + 50.
    assert_eq!(st.busy_ns, 220);
    // Latencies 10, 29, 48.
    assert_eq!(st.latency.count, 3);
    assert_eq!(st.latency.min, 10);
    assert_eq!(st.latency.max, 48);
    assert_eq!(st.latency.sum, 87);
    assert_eq!(st.main_workqueue(), Some("dio/loop1"));
    assert!(p.quality().is_empty(), "{:?}", p.quality());
}

#[test]
fn worker_reuse_is_one_worker() {
    let mut evs = Vec::new();
    for k in 0..10u64 {
        let work = 0x100 + k * 8;
        let t = k * 100;
        evs.push(ev(t, 1, 22, queue(work, F, "dio/loop1")));
        evs.push(ev(t + 5, 1, 7, start(work, F)));
        evs.push(ev(t + 9, 1, 7, end(work, F)));
    }
    let p = run(evs);
    let st = p.function(&WorkFn::Addr(F)).expect("F");
    assert_eq!(st.workers.len(), 1);
    assert_eq!(st.workers[&7].executions, 10);
    assert_eq!(st.peak_executing, 1);
    assert_eq!(st.peak_active, 1);
    assert_eq!(st.latency.count, 10);
    assert_eq!(st.latency.max, 5);
    assert_eq!(st.cpu_ns, 40);
    assert_eq!(st.cpus.get(&1), Some(&10));
}

#[test]
fn missing_end_at_trace_end_and_unterminated_start() {
    let p = run(vec![
        ev(0, 0, 1, start(0xa0, F)),  // no queue event: no latency
        ev(10, 0, 1, start(0xb0, F)), // previous never ended: closed here
        ev(20, 0, 2, start(0xc0, G)), // other function, other worker, never ends
        ev(25, 0, 5, end(0xdd, F)),   // end without start
        ev(40, 0, 2, sw(2, "D", 0)),
        ev(100, 0, 0, sw(0, "R", 0)), // trace ends at 100
    ]);
    let f = p.function(&WorkFn::Addr(F)).expect("F");
    assert_eq!(f.executions, 2);
    assert_eq!(f.executions_without_queue, 2);
    assert_eq!(f.latency.count, 0);
    assert_eq!(
        f.peak_executing, 1,
        "one worker never runs two items at once"
    );
    assert_eq!(f.completed, 0);
    assert_eq!(f.open_at_end, 1);
    assert_eq!(f.busy_ns, 10 + 90);
    let g = p.function(&WorkFn::Addr(G)).expect("G");
    assert_eq!(g.open_at_end, 1);
    assert_eq!(g.cpu_ns, 20, "20..40 on CPU, then asleep until the end");
    assert_eq!(g.busy_ns, 80);
    assert_eq!(p.quality().count(Problem::WorkqueueExecuteWithoutEnd), 1);
    assert_eq!(p.quality().count(Problem::WorkqueueEndWithoutStart), 1);
    assert_eq!(p.quality().count(Problem::WorkqueueOpenAtEnd), 2);
}

#[test]
fn text_payloads_and_kallsyms_names() {
    let payload =
        |name: &str, text: &str| wq(name, vec![("payload", FieldValue::Str(text.to_string()))]);
    let mut p = WorkerPools::new();
    for e in [
        ev(0, 1, 22, payload("workqueue_queue_work", "work struct=0xffff88817a5e57c0 function=iomap_dio_complete_work workqueue=dio/loop1 req_cpu=256 cpu=1")),
        ev(1, 1, 22, payload("workqueue_activate_work", "work struct 0xffff88817a5e57c0")),
        ev(4, 1, 30, payload("workqueue_execute_start", "work struct 0xffff88817a5e57c0: function iomap_dio_complete_work")),
        ev(6, 1, 30, payload("workqueue_execute_end", "work struct 0xffff88817a5e57c0: function iomap_dio_complete_work")),
        ev(7, 1, 31, start(0x40, F)),
        ev(9, 1, 31, end(0x40, F)),
        ev(9, 1, 31, payload("workqueue_execute_start", "not a work struct")),
    ] {
        p.process(&e);
    }
    p.finish();
    let name = WorkFn::Name("iomap_dio_complete_work".into());
    assert_eq!(p.function(&name).expect("named").latency.max, 4);
    assert_eq!(p.quality().count(Problem::WorkqueueUnparsed), 1);
    // The address F is the same function: naming it merges the two.
    let kallsyms = "ffffffff81500000 t iomap_dio_complete_work\nffffffff81600000 T other\n";
    let found = p.name_functions_from_kallsyms(kallsyms);
    assert_eq!(found.len(), 1);
    let st = p.function(&name).expect("merged");
    assert_eq!(st.executions, 2);
    assert_eq!(st.workers.len(), 2);
    assert_eq!(p.functions().len(), 1);
    assert!(p.function(&WorkFn::Addr(F)).is_none());
}
