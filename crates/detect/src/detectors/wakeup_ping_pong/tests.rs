//! Ping-pong and storm detection on synthetic alternations with known rates.

use crate::testutil::{idle, run, t, Trace};
use stallscope_model::{FieldValue, FindingSeverity};

const ID: &str = "wakeup-ping-pong";
const US: u64 = 1000;

/// A (pid 10) and B (pid 20) alternate on CPU 0 every 100 µs, `n` times: A wakes B and is
/// preempted; B wakes A and sleeps; one I/O completes per round; B runs a work item.
fn alternation(n: u64) -> Trace {
    let (a, b) = (t("fio", 10, 120), t("kworker/0:1", 20, 120));
    let mut tr = Trace::new();
    tr.sw(0, 0, idle(), "R", a);
    for k in 0..n {
        let base = k * 100 * US;
        tr.wake(base + 10 * US, 0, 10, b, 0);
        tr.sw(base + 20 * US, 0, a, "R+", b);
        tr.generic(
            base + 30 * US,
            0,
            20,
            "workqueue_execute_start",
            vec![(
                "function".into(),
                FieldValue::Str("iomap_dio_complete_work".into()),
            )],
        );
        tr.block(
            base + 40 * US,
            0,
            20,
            stallscope_model::BlockAction::Complete,
        );
        tr.wake(base + 50 * US, 0, 20, a, 0);
        tr.sw(base + 60 * US, 0, b, "S", a);
    }
    tr
}

#[test]
fn fast_alternation_is_a_ping_pong_and_a_storm() {
    let f = run(ID, &[], &alternation(2000));
    let pp: Vec<_> = f
        .iter()
        .filter(|f| f.title.contains("back and forth"))
        .collect();
    assert_eq!(pp.len(), 1, "{f:#?}");
    let p = pp[0];
    assert_eq!(p.measures["handoffs"], 4000);
    // 4000 handoffs from 20 µs to 199 960 µs
    assert_eq!(
        p.measures["handoffs_per_s"],
        4000 * 1_000_000_000 / 199_940_000
    );
    assert_eq!(
        p.measures["share_of_cpu_switches_permille"],
        4000 * 1000 / 4001
    );
    assert_eq!(p.measures["io_completions"], 2000);
    assert_eq!(p.measures["handoffs_per_io_x1000"], 2000);
    assert_eq!(p.severity, FindingSeverity::High);
    let fio = p.tasks.iter().find(|t| t.pid == 10).unwrap();
    let kw = p.tasks.iter().find(|t| t.pid == 20).unwrap();
    assert_eq!(fio.measures["preempted_right_after_waking"], 2000);
    assert_eq!(kw.measures["preempted_right_after_waking"], 0);
    assert_eq!(fio.measures["woke_other"], 2000);
    assert_eq!(kw.measures["woke_other"], 2000);
    assert_eq!(kw.measures["median_run_ns"], 40_000 - 40_000 % 4096); // bucket lower bound
    assert!(p.title.contains("iomap_dio_complete_work"), "{}", p.title);
    let storm: Vec<_> = f.iter().filter(|f| f.title.contains("storm")).collect();
    assert_eq!(storm.len(), 1);
    assert_eq!(storm[0].measures["switches"], 4001);
}

#[test]
fn rare_alternation_is_not_reported() {
    assert!(run(ID, &[], &alternation(100)).is_empty());
}

#[test]
fn thresholds_are_settable() {
    let f = run(
        ID,
        &[("min_handoffs", "100"), ("storm_rate_per_s", "1000000")],
        &alternation(100),
    );
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].measures["handoffs"], 200);
}
