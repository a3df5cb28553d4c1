//! Synthetic chains: what a kernel will not make on demand (a request held in the I/O
//! scheduler for exactly this long, a waker asleep since before the trace, a lost wakeup).
//! The real chain is tested on fixtures/chain/ (crates/cli/tests/blocked_chain.rs).

use stallscope_model::{BlockAction, FieldValue, Finding};

use crate::testutil::{idle, run, t, Trace, MS};

/// Softirq on `cpu` completing the request at `sector` and waking `task`.
fn completion_wakes(tr: &mut Trace, ts: u64, cpu: u32, sector: u64, nr: u32, task: i32) {
    let ksoftirqd = 22;
    tr.generic(ts, cpu, ksoftirqd, "softirq_entry", vec![]);
    tr.block_rq(
        ts + 1_000,
        cpu,
        ksoftirqd,
        BlockAction::Complete,
        sector,
        nr,
    );
    tr.wake(ts + 2_000, cpu, ksoftirqd, t("victim", task, 120), cpu);
    tr.generic(ts + 3_000, cpu, ksoftirqd, "softirq_exit", vec![]);
}

fn only(findings: &[Finding]) -> &Finding {
    assert_eq!(findings.len(), 1, "{findings:#?}");
    &findings[0]
}

#[test]
fn a_request_held_in_the_io_scheduler_is_the_root() {
    let mut tr = Trace::new();
    let app = t("app", 10, 120);
    tr.sw(0, 0, app, "D", idle());
    tr.block_rq(1_000, 0, 10, BlockAction::Queue, 800, 8);
    tr.block_rq(2_000, 0, 10, BlockAction::Insert, 800, 8);
    tr.block_rq(700 * MS, 1, 0, BlockAction::Issue, 800, 8);
    completion_wakes(&mut tr, 710 * MS, 1, 800, 8, 10);
    let f = run("blocked-chain", &[], &tr);
    let f = only(&f);
    assert_eq!(
        f.cause.as_ref().map(|c| c.kind.as_str()),
        Some("request_in_scheduler")
    );
    assert_eq!(f.measures["root_i2d_ns"], (700 * MS - 2_000) as i64);
    assert_eq!(f.measures["root_d2c_ns"], (10 * MS + 1_000) as i64);
    assert_eq!(f.measures["hops"], 1);
    assert_eq!(f.severity, stallscope_model::FindingSeverity::Medium); // < 1 s
    assert!(
        f.title
            .contains("its time went to the I/O scheduler's queue"),
        "{}",
        f.title
    );
}

#[test]
fn a_lock_holder_that_waited_for_the_device_is_a_hop() {
    // the victim waits for a lock (D) held by 11, which itself waits for its write
    let mut tr = Trace::new();
    let (victim, holder) = (t("victim", 10, 120), t("holder", 11, 120));
    tr.sw(0, 0, victim, "D", holder);
    tr.sw(300 * MS, 0, holder, "D", idle());
    tr.block_rq(300 * MS + 1_000, 0, 11, BlockAction::Queue, 64, 8);
    tr.block_rq(300 * MS + 2_000, 0, 11, BlockAction::Insert, 64, 8);
    tr.block_rq(300 * MS + 4_000, 0, 11, BlockAction::Issue, 64, 8);
    completion_wakes(&mut tr, 1_180 * MS, 1, 64, 8, 11);
    tr.sw(1_181 * MS, 0, idle(), "R", holder);
    tr.wake(1_200 * MS, 0, 11, victim, 0);
    let f = run("blocked-chain", &[], &tr);
    // the holder's own 880 ms sleep is a victim too, with the same kind of root
    let f = only(&f);
    assert_eq!(f.measures["victims"], 2);
    assert_eq!(f.measures["hops"], 2);
    assert_eq!(f.measures["hop0_pid"], 10);
    assert_eq!(f.measures["hop1_pid"], 11);
    assert_eq!(f.measures["hop1_start_ns"], (300 * MS) as i64);
    assert_eq!(f.measures["root_i2d_ns"], 2_000);
    assert_eq!(
        f.cause.as_ref().map(|c| c.kind.as_str()),
        Some("request_in_device")
    );
    assert_eq!(f.severity, stallscope_model::FindingSeverity::High); // 1.2 s
    assert!(f.title.contains("not the I/O scheduler"), "{}", f.title);
    assert!(
        f.title
            .starts_with("victim (10) blocked 1.200 s in D ← woken by holder (11)"),
        "{}",
        f.title
    );
}

#[test]
fn a_waker_asleep_since_before_the_trace_leaves_it() {
    let mut tr = Trace::new();
    let (victim, other) = (t("victim", 10, 120), t("other", 12, 120));
    tr.sw(0, 0, victim, "D", idle());
    // 12's first event: woken (it slept since before the trace), then it wakes the victim
    tr.wake(100 * MS, 1, 0, other, 1);
    tr.sw(100 * MS + 10_000, 1, idle(), "R", other);
    tr.wake(600 * MS, 1, 12, victim, 0);
    let f = run("blocked-chain", &[], &tr);
    let f = only(&f);
    assert_eq!(
        f.cause.as_ref().map(|c| c.kind.as_str()),
        Some("left_trace")
    );
    assert_eq!(f.severity, stallscope_model::FindingSeverity::Low);
    assert!(
        f.title.contains("asleep since before the trace"),
        "{}",
        f.title
    );
}

#[test]
fn a_sleep_ended_without_a_wakeup_is_said_and_counted() {
    // the VM drops some switches and wakeups: the victim just runs again
    let mut tr = Trace::new();
    let victim = t("victim", 10, 120);
    tr.sw(0, 0, victim, "D", idle());
    tr.sw(900 * MS, 0, idle(), "R", victim);
    let f = run("blocked-chain", &[], &tr);
    let f = only(&f);
    assert_eq!(
        f.cause.as_ref().map(|c| c.kind.as_str()),
        Some("wakeup_not_recorded")
    );
    assert_eq!(f.severity, stallscope_model::FindingSeverity::Low);
    assert_eq!(f.measures["trace_sleeps_ended_without_wakeup"], 1);
}

#[test]
fn short_or_interruptible_sleeps_are_not_victims() {
    let mut tr = Trace::new();
    let (a, b) = (t("a", 10, 120), t("b", 11, 120));
    tr.sw(0, 0, a, "D", idle());
    tr.wake(400 * MS, 1, 0, a, 0); // 400 ms: under the threshold
    tr.sw(500 * MS, 1, b, "S", idle());
    tr.wake(2_000 * MS, 0, 10, b, 1); // 1.5 s in S: not a victim by default
    assert!(run("blocked-chain", &[], &tr).is_empty());
    let f = run("blocked-chain", &[("include_s", "1")], &tr);
    assert_eq!(only(&f).measures["hop0_pid"], 11);
}

#[test]
fn an_interrupt_root_names_the_line() {
    let mut tr = Trace::new();
    let victim = t("victim", 10, 120);
    tr.sw(0, 0, victim, "D", idle());
    tr.generic(
        600 * MS,
        1,
        0,
        "irq_handler_entry",
        vec![
            ("irq".into(), FieldValue::Int(36)),
            ("name".into(), FieldValue::Str("virtio1-req.0".into())),
        ],
    );
    tr.wake(600 * MS + 1_000, 1, 0, victim, 0);
    tr.generic(600 * MS + 2_000, 1, 0, "irq_handler_exit", vec![]);
    let f = run("blocked-chain", &[], &tr);
    let f = only(&f);
    assert_eq!(f.cause.as_ref().map(|c| c.kind.as_str()), Some("interrupt"));
    assert!(
        f.title.contains("hard irq 36, virtio1-req.0"),
        "{}",
        f.title
    );
}

#[test]
fn a_holder_waiting_for_a_cpu_is_the_root() {
    // 11 holds what 10 waits for, is preempted and waits 600 ms for its CPU behind a hog
    let mut tr = Trace::new();
    let (victim, holder, hog) = (
        t("victim", 10, 120),
        t("holder", 11, 120),
        t("hog", 12, 100),
    );
    tr.sw(0, 0, victim, "D", holder);
    tr.sw(100 * MS, 0, holder, "R+", hog);
    tr.sw(700 * MS, 0, hog, "R+", holder);
    tr.wake(800 * MS, 0, 11, victim, 0);
    let f = run("blocked-chain", &[], &tr);
    let f = only(&f);
    assert_eq!(
        f.cause.as_ref().map(|c| c.kind.as_str()),
        Some("holder_runnable")
    );
    assert!(
        f.title
            .contains("runnable (waiting for a CPU) for 600.000 ms"),
        "{}",
        f.title
    );
}

#[test]
fn a_work_item_that_waited_for_a_worker_is_the_root() {
    let mut tr = Trace::new();
    let victim = t("victim", 10, 120);
    let work = |name: &str| {
        vec![
            ("work".to_string(), FieldValue::UInt(0xffff_8881_0000_1000)),
            ("function".to_string(), FieldValue::Str(name.to_string())),
        ]
    };
    tr.sw(0, 0, victim, "D", idle());
    tr.generic(100 * MS, 1, 5, "workqueue_queue_work", work("xfs_end_io"));
    tr.generic(
        650 * MS,
        1,
        30,
        "workqueue_execute_start",
        work("xfs_end_io"),
    );
    tr.wake(690 * MS, 1, 30, victim, 0);
    tr.generic(691 * MS, 1, 30, "workqueue_execute_end", work("xfs_end_io"));
    let f = run("blocked-chain", &[], &tr);
    let f = only(&f);
    assert_eq!(f.cause.as_ref().map(|c| c.kind.as_str()), Some("work_item"));
    assert!(
        f.title.contains("work item xfs_end_io")
            && f.title
                .contains("started 550.000 ms later (waiting for a kworker: see worker-flood)"),
        "{}",
        f.title
    );
}
