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

/// Like [`alternation`], but after B's turn the CPU idles until `idle_us` µs later and A is
/// switched in 10 µs after that (none of it when `idle_us` is 0), and the waker blocks (`S`)
/// instead of being preempted when `preempt` is false.
fn alternation_with(n: u64, idle_us: u64, preempt: bool) -> Trace {
    let (a, b) = (t("app", 10, 120), t("worker", 20, 120));
    let mut tr = Trace::new();
    tr.sw(0, 0, idle(), "R", a);
    let round = 100 * US + idle_us * US;
    for k in 0..n {
        let base = k * round;
        tr.wake(base + 10 * US, 0, 10, b, 0);
        tr.sw(base + 20 * US, 0, a, if preempt { "R+" } else { "S" }, b);
        if idle_us == 0 {
            tr.wake(base + 50 * US, 0, 20, a, 0);
            tr.sw(base + 60 * US, 0, b, "S", a);
            continue;
        }
        tr.sw(base + 60 * US, 0, b, "S", idle());
        // the partner is woken from the idle CPU's interrupt after the idle stretch
        tr.wake(base + 60 * US + idle_us * US, 0, 0, a, 0);
        tr.sw(base + 70 * US + idle_us * US, 0, idle(), "R", a);
    }
    tr
}

fn pair_finding(f: &[stallscope_model::Finding]) -> &stallscope_model::Finding {
    f.iter()
        .find(|f| f.title.contains("back and forth"))
        .unwrap_or_else(|| panic!("no pair finding: {f:#?}"))
}

#[test]
fn severity_follows_the_cost_wakeup_preemption_and_spare_cpu() {
    // wakeup preemption on a CPU that never idles: high, cause wakeup_preemption
    let f = run(ID, &[], &alternation(2000));
    let p = pair_finding(&f);
    assert_eq!(p.severity, FindingSeverity::High);
    let cause = p.cause.as_ref().unwrap();
    assert_eq!(cause.kind, "wakeup_preemption");
    assert_eq!(p.measures["wakeup_preemption_permille"], 500);
    assert_eq!(p.measures["cpu_idle_permille"], 0);
    assert!(p.hint.starts_with(&cause.text), "{}", p.hint);
    // the same with the CPU idle from 60 to 110 µs of every 140 µs round (50/140 = 357 ‰):
    // the CPU has time to spare → low
    let f = run(ID, &[], &alternation_with(2000, 40, true));
    let p = pair_finding(&f);
    assert_eq!(p.measures["cpu_idle_permille"], 357, "{:?}", p.measures);
    assert_eq!(p.severity, FindingSeverity::Low);
    // a producer/consumer handoff (the waker blocks) on a busy CPU: medium at most
    let f = run(ID, &[], &alternation_with(2000, 0, false));
    let p = pair_finding(&f);
    assert_eq!(p.cause.as_ref().unwrap().kind, "handoff");
    assert_eq!(p.measures["wakeup_preemptions"], 0);
    assert_eq!(p.severity, FindingSeverity::Medium);
}

/// A costly, fast ping-pong that lasts 200 ms of a 2.2 s trace is a burst (a command
/// printing into a pipe its reader empties): medium, and its title says so; the same
/// ping-pong filling its trace stays high.
#[test]
fn a_short_burst_in_a_long_trace_is_not_high() {
    let mut tr = alternation(2000);
    // two seconds more of the CPU running A alone
    let a = t("fio", 10, 120);
    tr.wake(2_200_000 * US, 0, 0, t("other", 30, 120), 0);
    tr.sw(2_200_000 * US + 1, 0, a, "R", t("other", 30, 120));
    let f = run(ID, &[], &tr);
    let p = pair_finding(&f);
    assert_eq!(p.severity, FindingSeverity::Medium, "{}", p.title);
    assert_eq!(
        p.measures["share_of_trace_permille"], 90,
        "{:?}",
        p.measures
    );
    assert!(
        p.title.contains("a burst: 9.0% of the trace's 2.200 s"),
        "{}",
        p.title
    );
    let f = run(ID, &[], &alternation(2000));
    assert_eq!(pair_finding(&f).severity, FindingSeverity::High);
}

#[test]
fn a_preemption_long_after_the_wakeup_is_not_a_wakeup_preemption() {
    // A wakes B, runs on for 500 µs, then is preempted: not the wakeup's doing
    let (a, b) = (t("app", 10, 120), t("worker", 20, 120));
    let mut tr = Trace::new();
    tr.sw(0, 0, idle(), "R", a);
    for k in 0..2000u64 {
        let base = k * 600 * US;
        tr.wake(base + 10 * US, 0, 10, b, 0);
        tr.sw(base + 510 * US, 0, a, "R", b);
        tr.wake(base + 550 * US, 0, 20, a, 0);
        tr.sw(base + 560 * US, 0, b, "S", a);
    }
    let f = run(ID, &[], &tr);
    let p = pair_finding(&f);
    assert_eq!(p.measures["wakeup_preemptions"], 0);
    assert_eq!(p.cause.as_ref().unwrap().kind, "handoff");
}

/// Which wakeups count is the analysis' one rule (the engine's `use_wakeup_rule`, as the
/// timeline's): with `sched_waking` declared by the input, a `sched_wakeup` record is the
/// same wakeup seen later and never counts — before this detector kept its own rule and
/// counted `sched_wakeup` records until the first `sched_waking` appeared.
#[test]
fn wakeups_follow_the_analysis_rule() {
    let woke = |f: &[stallscope_model::Finding]| -> i64 {
        pair_finding(f)
            .tasks
            .iter()
            .filter_map(|t| t.measures.get("woke_other"))
            .sum()
    };
    let with_waking = alternation(3000);
    let counted = woke(&run(ID, &[], &with_waking));
    assert_eq!(counted, 6000, "every sched_waking counts");
    // the same trace with its wakeups recorded as sched_wakeup (the harness declares
    // sched_waking): the handoffs stay, no wakeup counts
    let mut wakeup_only = alternation(3000);
    for ev in &mut wakeup_only.events {
        if let stallscope_model::EventKind::Waking(w) = ev.kind {
            ev.kind = stallscope_model::EventKind::Wakeup(w);
        }
    }
    let f = run(ID, &[], &wakeup_only);
    assert_eq!(pair_finding(&f).measures["handoffs"], 6000);
    assert_eq!(woke(&f), 0);
}

#[test]
fn idle_time_ends_where_the_timelines_repair_starts_the_woken_task() {
    // Per round of 100 µs on CPU 0: A wakes B and sleeps at 20, B sleeps at 40 (the CPU
    // idles), an interrupt wakes A at 60 — and the switch out of idle is dropped (as this
    // VM does): the trace next shows A running at its next wakeup of B (110). The
    // timeline's repair rule runs A from its wakeup, so the CPU idled 40..60 of each round,
    // not until A's first record.
    let (a, b) = (t("fio", 10, 120), t("kworker/0:1", 20, 120));
    let n: u64 = 2000;
    let mut tr = Trace::new();
    tr.sw(0, 0, idle(), "R", a);
    for k in 0..n {
        let base = k * 100 * US;
        tr.wake(base + 10 * US, 0, 10, b, 0);
        tr.sw(base + 20 * US, 0, a, "S", b);
        tr.sw(base + 40 * US, 0, b, "S", idle());
        tr.wake(base + 60 * US, 0, 0, a, 0);
    }
    let f = run(ID, &[], &tr);
    let storm = f
        .iter()
        .find(|f| f.title.contains("storm"))
        .unwrap_or_else(|| panic!("{f:#?}"));
    // idle 20 µs in each round but the last (whose idle time the trace does not end),
    // over the switches' span: from the first (20 µs) to the last ((n - 1) × 100 + 40 µs)
    let idle = (n - 1) * 20 * US;
    let window = (n - 1) * 100 * US + 20 * US;
    assert_eq!(
        storm.measures["cpu_idle_permille"],
        (idle * 1000 / window) as i64
    );
}
