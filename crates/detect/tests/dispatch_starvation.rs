//! `dispatch-starvation` on small synthetic block event sequences: every way a wait can end
//! (dispatched, requeued then dispatched again, merged away, still waiting at the trace end),
//! the rules that keep a wait out (threshold, median factor, nothing dispatched past it),
//! zero-length flushes, front merges, the scheduler from system context or bfq messages,
//! and tasks blocked in D state during the wait.

use stallscope_detect::{registry, Engine, Params};
use stallscope_model::{
    BlockAction, BlockDev, BlockDeviceContext, BlockEvent, Comm, Event, EventKind, FieldValue,
    Finding, FindingSeverity, GenericEvent, PrevState, Rwbs, Span, SpanPos, Switch, SystemContext,
    TaskRef, Tid, TraceMeta, Ts, Wakeup,
};

const MS: Ts = 1_000_000;
const DEV: BlockDev = BlockDev(7 << 20);

/// Events numbered by line.
#[derive(Default)]
struct Trace {
    events: Vec<Event>,
}

impl Trace {
    fn push(&mut self, ts: Ts, pid: Tid, kind: EventKind) -> &mut Self {
        let line = self.events.len() as u64 + 1;
        self.events.push(Event {
            ts,
            cpu: 0,
            pid,
            span: Span::new(0, SpanPos::Line(line)),
            kind,
            callchain: None,
        });
        self
    }

    /// A block action on DEV by `pid`/`comm`.
    fn blk(
        &mut self,
        ts: Ts,
        (pid, comm): (Tid, &str),
        action: BlockAction,
        sector: u64,
        nr: u32,
        rwbs: &str,
    ) -> &mut Self {
        let mut b = BlockEvent::new(action);
        b.dev = Some(DEV);
        b.sector = sector;
        b.nr_sector = nr;
        b.rwbs = Rwbs::parse(rwbs).expect("rwbs");
        b.comm = Some(Comm::new(comm));
        self.push(ts, pid, EventKind::Block(Box::new(b)))
    }

    fn q(&mut self, ts: Ts, pid: Tid, comm: &str, sector: u64, nr: u32, rwbs: &str) -> &mut Self {
        self.blk(ts, (pid, comm), BlockAction::Queue, sector, nr, rwbs)
    }
    fn g(&mut self, ts: Ts, pid: Tid, comm: &str, sector: u64, nr: u32, rwbs: &str) -> &mut Self {
        self.blk(ts, (pid, comm), BlockAction::GetRq, sector, nr, rwbs)
    }
    fn i(&mut self, ts: Ts, pid: Tid, comm: &str, sector: u64, nr: u32, rwbs: &str) -> &mut Self {
        self.blk(ts, (pid, comm), BlockAction::Insert, sector, nr, rwbs)
    }
    fn d(&mut self, ts: Ts, sector: u64, nr: u32, rwbs: &str) -> &mut Self {
        self.blk(
            ts,
            (54, "kworker/1:1H"),
            BlockAction::Issue,
            sector,
            nr,
            rwbs,
        )
    }
    fn c(&mut self, ts: Ts, sector: u64, nr: u32, rwbs: &str) -> &mut Self {
        self.blk(ts, (0, ""), BlockAction::Complete, sector, nr, rwbs)
    }

    /// A request queued, inserted, dispatched and completed by `pid` within 1 ms.
    fn quick(&mut self, ts: Ts, pid: Tid, comm: &str, sector: u64, rwbs: &str) -> &mut Self {
        self.q(ts, pid, comm, sector, 8, rwbs)
            .g(ts + 1_000, pid, comm, sector, 8, rwbs)
            .i(ts + 2_000, pid, comm, sector, 8, rwbs)
            .d(ts + 3_000, sector, 8, rwbs)
            .c(ts + 500_000, sector, 8, rwbs)
    }

    /// `n` quick sync writes from fio (pid 900) every 10 ms starting at `from`.
    fn sync_writes(&mut self, from: Ts, n: u64) -> &mut Self {
        for k in 0..n {
            self.quick(from + k * 10 * MS, 900, "fio", 1_000_000 + k * 8, "WS");
        }
        self
    }
}

fn sort(t: &mut Trace) {
    t.events.sort_by_key(|e| e.ts);
}

fn run_with(t: &mut Trace, sets: &[(&str, &str)], system: Option<SystemContext>) -> Vec<Finding> {
    sort(t);
    let e = registry::find("dispatch-starvation").expect("registered");
    let mut p = Params::defaults(e.info.params);
    for (k, v) in sets {
        p.set(e.info.params, k, v).expect("param");
    }
    let meta = TraceMeta {
        path: "synthetic.txt".into(),
        system_context: system,
        ..TraceMeta::default()
    };
    let mut engine = Engine::new(vec![(e.make)(&p)], &[&meta]);
    for ev in &t.events {
        engine.process(ev);
    }
    engine
        .finish()
        .outcomes
        .into_iter()
        .next()
        .expect("one outcome")
        .result
        .expect("block events present")
}

fn run(t: &mut Trace) -> Vec<Finding> {
    run_with(t, &[], None)
}

fn measure(f: &Finding, k: &str) -> i64 {
    *f.measures
        .get(k)
        .unwrap_or_else(|| panic!("no {k} in {:?}", f.measures))
}

fn role<'a>(f: &'a Finding, role: &str) -> Vec<(Tid, &'a str)> {
    f.tasks
        .iter()
        .filter(|t| t.role == role)
        .map(|t| (t.pid, t.comm.as_str()))
        .collect()
}

/// An async writeback request at sector 5000 queued at 1 ms by the flusher (pid 300),
/// inserted at 2 ms; 20 sync writes from fio dispatched around it meanwhile.
fn starved_writeback() -> Trace {
    let mut t = Trace::default();
    t.q(MS, 300, "kworker/u8:4", 5000, 2560, "W")
        .g(MS + 10_000, 300, "kworker/u8:4", 5000, 2560, "W")
        .i(2 * MS, 300, "kworker/u8:4", 5000, 2560, "W");
    t.sync_writes(3 * MS, 20);
    t
}

#[test]
fn dispatched_after_a_long_wait_is_reported_with_what_passed_it() {
    let mut t = starved_writeback();
    t.d(250 * MS, 5000, 2560, "W").c(256 * MS, 5000, 2560, "W");
    let f = run(&mut t);
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(measure(f, "wait_ns"), 248_000_000);
    assert_eq!(measure(f, "insert_ts_ns"), 2_000_000);
    assert_eq!(measure(f, "queue_ts_ns"), 1_000_000);
    assert_eq!(measure(f, "dispatch_ts_ns"), 250_000_000);
    assert_eq!(measure(f, "complete_ts_ns"), 256_000_000);
    assert_eq!(measure(f, "sector"), 5000);
    assert_eq!(measure(f, "nr_sector"), 2560);
    assert_eq!(measure(f, "passed_requests"), 20);
    assert_eq!(measure(f, "passed_sync"), 20);
    assert_eq!(measure(f, "passed_async"), 0);
    assert_eq!(measure(f, "passed_write"), 20);
    assert_eq!(measure(f, "still_waiting_at_end"), 0);
    assert_eq!(role(f, "issuer"), vec![(300, "kworker/u8:4")]);
    assert_eq!(role(f, "culprit"), vec![(900, "fio")]);
    assert_eq!(f.severity, FindingSeverity::Medium);
    assert!(
        f.title.starts_with("async write (W) 1280 KiB at sector 5000 on 7,0 waited 248.000 ms (btt I2D) between insert and dispatch while 20 other requests were dispatched (20 sync write), issued by kworker/u8:4 (pid 300)"),
        "{}",
        f.title
    );
    assert_eq!((f.window.start_ns, f.window.end_ns), (2 * MS, 250 * MS));
    // Q G I of the request, its D and C, and the first dispatches past it
    let lines: Vec<&str> = f.evidence.iter().map(|e| e.source.as_str()).collect();
    assert_eq!(
        lines[..3],
        ["synthetic.txt:1", "synthetic.txt:2", "synthetic.txt:3"]
    );
    assert!(f
        .evidence
        .iter()
        .any(|e| e.text.contains("block_rq_issue dev=7,0 sector=5000")));
    assert!(f
        .evidence
        .iter()
        .any(|e| e.text.contains("block_rq_complete dev=7,0 sector=5000")));
    assert!(f
        .evidence
        .iter()
        .any(|e| e.text.contains("sector=1000000 ") && e.text.contains("block_rq_issue")));
}

#[test]
fn short_waits_lone_waits_and_usual_waits_are_not_reported() {
    // below the threshold
    let mut t = starved_writeback();
    t.d(90 * MS, 5000, 2560, "W");
    assert!(run(&mut t).is_empty());
    // the same 248 ms wait with the threshold raised
    let mut t = starved_writeback();
    t.d(250 * MS, 5000, 2560, "W");
    assert!(run_with(&mut t, &[("threshold_ns", "300ms")], None).is_empty());
    // nothing dispatched past it
    let mut t = Trace::default();
    t.i(2 * MS, 300, "kworker/u8:4", 5000, 8, "W")
        .d(250 * MS, 5000, 8, "W");
    assert!(run(&mut t).is_empty());
    // every request on the device waits about as long: not extreme against the median
    let mut t = Trace::default();
    for k in 0..5u64 {
        let s = 100 + k * 8;
        t.q(k * 300 * MS, 300, "dd", s, 8, "W")
            .i(k * 300 * MS, 300, "dd", s, 8, "W")
            .d(k * 300 * MS + 200 * MS, s, 8, "W");
        t.quick(k * 300 * MS + 50 * MS, 900, "fio", 9000 + k * 8, "WS");
    }
    // median wait 3 µs × 20 is far below 200 ms, so with the 5 long and 5 quick waits...
    let long = run(&mut t);
    assert!(!long.is_empty());
    // ...but when the long waits are the majority, the median is long too
    let mut t2 = Trace::default();
    for k in 0..5u64 {
        let s = 100 + k * 8;
        t2.q(k * 300 * MS, 300, "dd", s, 8, "W")
            .i(k * 300 * MS, 300, "dd", s, 8, "W")
            .d(k * 300 * MS + 200 * MS, s, 8, "W");
    }
    t2.quick(50 * MS, 900, "fio", 9000, "WS");
    assert!(run(&mut t2).is_empty(), "median 200 ms × 20 > 200 ms");
    assert!(!run_with(&mut t2, &[("median_factor", "1")], None).is_empty());
}

#[test]
fn an_excerpt_of_one_long_wait_is_reported() {
    // a pasted blkparse excerpt: one request, inserted and dispatched 1.5 s later, nothing
    // else on the device (no median, nothing dispatched past it)
    let mut t = Trace::default();
    t.q(0, 300, "xfsaild/loop0", 5000, 8, "WM")
        .i(MS, 300, "xfsaild/loop0", 5000, 8, "WM")
        .d(1501 * MS, 5000, 8, "WM")
        .c(1502 * MS, 5000, 8, "WM");
    let f = run(&mut t);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(measure(&f[0], "wait_ns"), 1_500_000_000);
    assert_eq!(measure(&f[0], "passed_requests"), 0);
    assert_eq!(f[0].severity, FindingSeverity::High);
    assert!(
        f[0].title
            .contains("with no other dispatch on the device in the trace"),
        "{}",
        f[0].title
    );
    // below high_ns the usual rules hold: a lone 900 ms wait is not reported
    let mut t = Trace::default();
    t.q(0, 300, "xfsaild/loop0", 5000, 8, "WM")
        .i(MS, 300, "xfsaild/loop0", 5000, 8, "WM")
        .d(901 * MS, 5000, 8, "WM");
    assert!(run(&mut t).is_empty());
}

#[test]
fn a_requeued_request_is_measured_from_its_insert_again_as_btt_does() {
    let mut t = Trace::default();
    t.q(MS, 300, "kworker/u8:4", 5000, 8, "W")
        .i(MS + 1000, 300, "kworker/u8:4", 5000, 8, "W")
        .d(MS + 2000, 5000, 8, "W") // dispatched after 1 µs
        .blk(2 * MS, (0, ""), BlockAction::Requeue, 5000, 8, "W")
        .blk(
            2 * MS + 1000,
            (54, "kworker/1:1H"),
            BlockAction::Insert,
            5000,
            8,
            "W",
        );
    t.sync_writes(3 * MS, 20);
    t.d(200 * MS, 5000, 8, "W");
    let f = run(&mut t);
    assert_eq!(f.len(), 1, "{f:#?}");
    // btt's I2D of the second dispatch: from the insert after the requeue
    assert_eq!(
        measure(&f[0], "wait_ns"),
        197_999_000,
        "from the second insert"
    );
    assert_eq!(measure(&f[0], "requeues"), 1);
    assert!(
        f[0].title.contains("(btt I2D) between insert and dispatch"),
        "{}",
        f[0].title
    );
}

#[test]
fn a_request_merged_away_ends_its_wait_and_the_survivor_keeps_the_older_start() {
    // B (sector 5000, 8 sectors) waits from 2 ms; A (4992+8) is inserted at 150 ms by
    // another task; B is merged into A at 151 ms (blktrace's rq-merge M), A dispatched at
    // 152 ms with both.
    let mut t = Trace::default();
    t.q(2 * MS, 300, "kworker/u8:4", 5000, 8, "W")
        .i(2 * MS, 300, "kworker/u8:4", 5000, 8, "W");
    t.sync_writes(3 * MS, 14);
    t.q(150 * MS, 301, "kworker/u8:1", 4992, 8, "W")
        .i(150 * MS, 301, "kworker/u8:1", 4992, 8, "W")
        .blk(
            151 * MS,
            (301, "kworker/u8:1"),
            BlockAction::BackMerge,
            5000,
            8,
            "W",
        )
        .d(152 * MS, 4992, 16, "W");
    let f = run(&mut t);
    assert_eq!(f.len(), 2, "{f:#?}");
    let survivor = f.iter().find(|f| measure(f, "sector") == 4992).expect("A");
    assert_eq!(
        measure(survivor, "wait_ns"),
        150_000_000,
        "A's dispatch carries B's bio: btt's longest I2D is B's"
    );
    assert_eq!(measure(survivor, "nr_sector"), 16);
    assert_eq!(measure(survivor, "merges"), 1);
    let merged = f.iter().find(|f| measure(f, "sector") == 5000).expect("B");
    assert_eq!(measure(merged, "wait_ns"), 149_000_000);
    assert_eq!(merged.severity, FindingSeverity::Low);
    assert!(
        merged
            .title
            .contains("between insert and its merge into another request"),
        "{}",
        merged.title
    );
    assert!(!merged.measures.contains_key("dispatch_ts_ns"));

    // the same with the block_rq_merge tracepoint (a generic event for now)
    let mut t = Trace::default();
    t.q(2 * MS, 300, "kworker/u8:4", 5000, 8, "W")
        .i(2 * MS, 300, "kworker/u8:4", 5000, 8, "W");
    t.sync_writes(3 * MS, 14);
    t.q(150 * MS, 301, "kworker/u8:1", 4992, 8, "W")
        .i(150 * MS, 301, "kworker/u8:1", 4992, 8, "W");
    t.push(
        151 * MS,
        301,
        EventKind::Generic(Box::new(GenericEvent {
            system: Some("block".into()),
            name: "block_rq_merge".into(),
            fields: vec![
                ("dev".into(), FieldValue::UInt(u64::from(DEV.0))),
                ("sector".into(), FieldValue::UInt(5000)),
                ("nr_sector".into(), FieldValue::UInt(8)),
            ],
        })),
    );
    t.d(152 * MS, 4992, 16, "W");
    let f = run(&mut t);
    assert_eq!(f.len(), 2, "{f:#?}");
    assert!(f
        .iter()
        .any(|f| measure(f, "sector") == 4992 && measure(f, "wait_ns") == 150_000_000));
}

#[test]
fn a_request_still_waiting_at_the_trace_end_is_measured_to_the_last_event() {
    let mut t = starved_writeback();
    t.quick(400 * MS, 900, "fio", 7_000_000, "WS");
    let f = run(&mut t);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(measure(&f[0], "still_waiting_at_end"), 1);
    assert_eq!(
        measure(&f[0], "wait_ns"),
        (400 * MS + 500_000 - 2 * MS) as i64
    );
    assert_eq!(measure(&f[0], "passed_requests"), 21);
    assert!(!f[0].measures.contains_key("dispatch_ts_ns"));
    assert!(
        f[0].title
            .contains("the end of the trace (never dispatched)"),
        "{}",
        f[0].title
    );
}

#[test]
fn flushes_are_counted_not_measured_and_front_merges_move_the_request() {
    let mut t = Trace::default();
    // request at 5008 waits from 2 ms; a bio front-merges at 5000 (request now 5000+16)
    t.q(2 * MS, 300, "kworker/u8:4", 5008, 8, "W")
        .i(2 * MS, 300, "kworker/u8:4", 5008, 8, "W")
        .q(3 * MS, 300, "kworker/u8:4", 5000, 8, "W")
        .blk(
            3 * MS + 1,
            (300, "kworker/u8:4"),
            BlockAction::FrontMerge,
            5000,
            8,
            "W",
        );
    // fio queues a preflush write; the flush machinery's kworker dispatches the flushes
    t.q(5 * MS, 900, "fio", 9_000_000, 8, "FWS");
    for k in 0..10u64 {
        t.d(10 * MS + k * MS, 0, 0, "FN")
            .c(10 * MS + k * MS + 100, 0, 0, "FN");
    }
    t.d(300 * MS, 5000, 16, "W");
    // the only measured wait is its own median: factor 1 lets it through
    let f = run_with(&mut t, &[("median_factor", "1")], None);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(measure(&f[0], "sector"), 5000);
    assert_eq!(measure(&f[0], "wait_ns"), 298_000_000);
    assert_eq!(measure(&f[0], "passed_flush"), 10);
    assert_eq!(measure(&f[0], "passed_sync"), 0);
    assert_eq!(measure(&f[0], "device_waits"), 1, "flushes are not waits");
    assert_eq!(
        role(&f[0], "culprit"),
        vec![(900, "fio")],
        "flushes count as fio's"
    );
}

#[test]
fn the_scheduler_comes_from_system_context_or_bfq_messages() {
    let mut t = starved_writeback();
    t.d(250 * MS, 5000, 2560, "W");
    let system = SystemContext {
        block_devices: vec![BlockDeviceContext {
            name: "loop0".into(),
            dev: Some("7:0".into()),
            scheduler: Some("bfq".into()),
            ..BlockDeviceContext::default()
        }],
        ..SystemContext::default()
    };
    let f = run_with(&mut t, &[], Some(system));
    assert!(
        f[0].title.contains("on 7,0 (loop0, bfq) waited"),
        "{}",
        f[0].title
    );
    assert!(
        f[0].hint
            .contains("/sys/block/loop0/queue/iosched/slice_idle"),
        "{}",
        f[0].hint
    );

    let mut t = starved_writeback();
    let mut m = BlockEvent::new(BlockAction::Message);
    m.dev = Some(DEV);
    m.message = Some("bfq300A select_queue: returned this queue".into());
    t.push(250 * MS - 1000, 54, EventKind::Block(Box::new(m)));
    t.d(250 * MS, 5000, 2560, "W");
    let f = run(&mut t);
    assert!(
        f[0].title
            .contains("on 7,0 (bfq (from its trace messages)) waited"),
        "{}",
        f[0].title
    );
    assert_eq!(measure(&f[0], "device_scheduler_messages"), 1);
    assert!(f[0]
        .evidence
        .iter()
        .any(|e| e.text.contains("bfq300A select_queue")));
}

#[test]
fn tasks_blocked_in_d_state_during_the_wait_are_named() {
    let task = |name: &str, pid| TaskRef {
        comm: Comm::new(name),
        pid,
        prio: 120,
    };
    let mut t = starved_writeback();
    t.d(250 * MS, 5000, 2560, "W");
    // an application blocked in D from 20 ms to 260 ms (overlap with the wait: 230 ms),
    // another for 5 ms only (below blocked_min_ns)
    t.push(
        20 * MS,
        700,
        EventKind::Switch(Switch {
            prev: task("app", 700),
            prev_state: PrevState::parse("D").expect("D"),
            next: task("swapper/0", 0),
        }),
    )
    .push(
        260 * MS,
        0,
        EventKind::Waking(Wakeup {
            task: task("app", 700),
            target_cpu: Some(0),
        }),
    )
    .push(
        30 * MS,
        701,
        EventKind::Switch(Switch {
            prev: task("brief", 701),
            prev_state: PrevState::parse("D").expect("D"),
            next: task("swapper/0", 0),
        }),
    )
    .push(
        35 * MS,
        0,
        EventKind::Waking(Wakeup {
            task: task("brief", 701),
            target_cpu: Some(0),
        }),
    );
    let f = run(&mut t);
    assert_eq!(role(&f[0], "blocked"), vec![(700, "app")]);
    let app = f[0]
        .tasks
        .iter()
        .find(|t| t.role == "blocked")
        .expect("app");
    assert_eq!(app.measures["blocked_ns"], 230_000_000);
    assert_eq!(
        f[0].severity,
        FindingSeverity::High,
        "blocked 230 ms ≥ threshold"
    );
    assert!(f[0]
        .evidence
        .iter()
        .any(|e| e.text.contains("prev_pid=700")));
}

#[test]
fn arbitrary_event_sequences_never_panic() {
    // a deterministic pseudo-random mix of every action with extreme sectors, lengths and
    // times out of order: the detector must finish without panicking
    let actions = [
        BlockAction::Queue,
        BlockAction::GetRq,
        BlockAction::Insert,
        BlockAction::Issue,
        BlockAction::Complete,
        BlockAction::BackMerge,
        BlockAction::FrontMerge,
        BlockAction::Requeue,
        BlockAction::Message,
        BlockAction::Split,
        BlockAction::Plug,
    ];
    let sectors = [0, 8, 16, u64::MAX, u64::MAX - 4];
    let lens = [0, 8, u32::MAX];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut t = Trace::default();
    for k in 0..20_000u64 {
        let r = next();
        let a = actions[(r % actions.len() as u64) as usize];
        let s = sectors[((r >> 8) % sectors.len() as u64) as usize];
        let n = lens[((r >> 16) % lens.len() as u64) as usize];
        let ts = if r & (1 << 30) != 0 {
            k * MS
        } else {
            u64::MAX - k
        };
        t.blk(ts, ((r >> 32) as i32 % 5, "x"), a, s, n, "WS");
    }
    // keep the order as generated (not sorted): out-of-order times too
    let e = registry::find("dispatch-starvation").expect("registered");
    let p = Params::defaults(e.info.params);
    let meta = TraceMeta::default();
    let mut engine = Engine::new(vec![(e.make)(&p)], &[&meta]);
    for ev in &t.events {
        engine.process(ev);
    }
    let out = engine.finish();
    assert!(out.outcomes[0].result.is_ok());
}

#[test]
fn runs_whatever_block_event_comes_first() {
    // a plug (no device) first: the detector's needs must still be met
    let mut t = Trace::default();
    t.push(
        0,
        300,
        EventKind::Block(Box::new(BlockEvent::new(BlockAction::Plug))),
    );
    let mut rest = starved_writeback();
    rest.d(250 * MS, 5000, 2560, "W");
    for mut ev in rest.events {
        ev.ts += 1;
        t.events.push(ev);
    }
    assert_eq!(run(&mut t).len(), 1);
}

/// A bfq message on DEV at `ts`.
fn bfq_msg(t: &mut Trace, ts: Ts, text: &str) {
    let mut m = BlockEvent::new(BlockAction::Message);
    m.dev = Some(DEV);
    m.message = Some(text.into());
    t.push(ts, 0, EventKind::Block(Box::new(m)));
}

#[test]
fn the_cause_comes_from_the_schedulers_messages_or_says_how_to_record_them() {
    // bfq's messages (formats as this kernel's bfq writes them): the flusher's async queue
    // is set in service, then preempted by fio's sync queue, twice, during the wait
    let mut t = starved_writeback();
    for (k, at) in [(0u64, 20 * MS), (1, 120 * MS)] {
        bfq_msg(
            &mut t,
            at,
            "bfq300A set_in_service_queue, cur-budget = 16384",
        );
        bfq_msg(
            &mut t,
            at + MS,
            "bfq300A expire (4, slow 0, num_disp 0, short_ttime 0)",
        );
        bfq_msg(
            &mut t,
            at + MS + 1,
            "bfq900S set_in_service_queue, cur-budget = 256",
        );
        bfq_msg(
            &mut t,
            at + 2 * MS + k,
            "bfq900S expire (2, slow 0, num_disp 8, short_ttime 1)",
        );
    }
    bfq_msg(&mut t, 130 * MS, "bfq300A put_queue: 00000000442a042a 3");
    t.d(250 * MS, 5000, 2560, "W");
    let f = run(&mut t);
    assert_eq!(f.len(), 1, "{f:#?}");
    let cause = f[0].cause.as_ref().expect("a cause");
    assert_eq!(cause.kind, "iosched_preemption");
    assert!(
        cause.text.starts_with(
            "The I/O scheduler preempted bfq300A in favour of bfq900S (2× during the wait"
        ),
        "{}",
        cause.text
    );
    assert!(
        cause.text.contains("2 budget exhausted, 2 preempted"),
        "{}",
        cause.text
    );
    assert!(
        f[0].hint.starts_with(&cause.text),
        "the hint opens with the cause"
    );
    assert_eq!(measure(&f[0], "preemptions_during_wait"), 2);
    assert_eq!(measure(&f[0], "issuer_queue_served"), 2);
    assert_eq!(measure(&f[0], "queues_served_during_wait"), 4);
    assert_eq!(
        measure(&f[0], "scheduler_decisions"),
        8,
        "put_queue is not a decision"
    );

    // served other queues only: not served
    let mut t = starved_writeback();
    bfq_msg(
        &mut t,
        20 * MS,
        "bfq900S set_in_service_queue, cur-budget = 256",
    );
    bfq_msg(
        &mut t,
        30 * MS,
        "bfq900S expire (3, slow 0, num_disp 8, short_ttime 1)",
    );
    t.d(250 * MS, 5000, 2560, "W");
    let f = run(&mut t);
    let cause = f[0].cause.as_ref().expect("a cause");
    assert_eq!(cause.kind, "iosched_not_served");
    assert!(
        cause
            .text
            .contains("No queue of the issuer (pid 300) was set in service."),
        "{}",
        cause.text
    );
    assert!(
        cause
            .text
            .starts_with("The I/O scheduler served other queues for most of the wait."),
        "{}",
        cause.text
    );
    assert!(cause.text.contains("bfq900S 1×"), "{}", cause.text);

    // no messages: async behind sync says so, and how to record the scheduler's decisions
    let mut t = starved_writeback();
    t.d(250 * MS, 5000, 2560, "W");
    let f = run(&mut t);
    let cause = f[0].cause.as_ref().expect("a cause");
    assert_eq!(cause.kind, "sync_over_async");
    assert!(
        cause
            .text
            .contains("20 of the 20 requests dispatched past it were sync"),
        "{}",
        cause.text
    );
    assert!(
        cause
            .text
            .contains("echo blk > /sys/kernel/tracing/current_tracer"),
        "{}",
        cause.text
    );
    // the confirm hint names the iolat number that equals this wait
    assert!(
        f[0].hint.contains("`stallscope iolat` (or `btt -A`) on this file shows I2D max 248.000 ms on 7,0 (this wait: 248.000 ms)"),
        "{}",
        f[0].hint
    );
    assert_eq!(measure(&f[0], "iolat_phase_max_ns"), 248_000_000);
}

#[test]
fn a_request_btt_never_saw_queued_is_measured_by_the_same_definition_and_says_so() {
    // G, I and D without the Q (queued before the trace began): btt has no sample for it;
    // the wait is still its I2D, D − I, and the finding says btt cannot confirm it
    let mut t = Trace::default();
    t.g(MS, 300, "kworker/u8:4", 5000, 8, "W")
        .i(2 * MS, 300, "kworker/u8:4", 5000, 8, "W");
    t.sync_writes(3 * MS, 20);
    t.d(1802 * MS, 5000, 8, "W");
    let f = run(&mut t);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(measure(&f[0], "wait_ns"), 1_800_000_000);
    assert_eq!(measure(&f[0], "counted_by_btt"), 0);
    assert!(
        f[0].title.contains("(I2D; not in btt's sample"),
        "{}",
        f[0].title
    );
    assert!(f[0].hint.contains("Confirm in blkparse"), "{}", f[0].hint);
    // without an I there is no phase to measure: not reported, counted
    let mut t = Trace::default();
    t.g(MS, 300, "kworker/u8:4", 5000, 8, "W");
    t.sync_writes(3 * MS, 20);
    t.d(1802 * MS, 5000, 8, "W");
    assert!(run(&mut t).is_empty());
}
