//! Rows and summary on hand-built sequences; expected values follow perf's definitions
//! (see the module docs).

use super::*;
use crate::testutil::*;
use stallscope_model::TaskRef;

fn rows_with(opts: TimehistOptions, events: &[Event]) -> (Vec<TimehistRow>, TimehistSummary) {
    let mut th = Timehist::new(opts);
    let mut rows = Vec::new();
    for e in events {
        th.process(e, &mut |r| rows.push(*r));
    }
    let s = th.summary();
    (rows, s)
}

fn rows(events: &[Event]) -> Vec<TimehistRow> {
    rows_with(
        TimehistOptions {
            waking_declared: true,
            ..TimehistOptions::default()
        },
        events,
    )
    .0
}

/// (tid, wait, sch delay, run) of each row.
fn nums(rows: &[TimehistRow]) -> Vec<(Tid, u64, u64, u64)> {
    rows.iter()
        .map(|r| (r.tid, r.wait_ns, r.sch_delay_ns, r.run_ns))
        .collect()
}

const IDLE: fn() -> TaskRef = || task(0);

#[test]
fn wait_delay_and_run_of_a_woken_task() {
    let a = named("a", 10);
    let r = rows(&[
        sw(100, 0, IDLE(), "R", a), // first switch on CPU 0: nothing known
        sw(200, 0, a, "S", IDLE()), // a ran 100
        waking(250, a),
        waking(260, a),             // later wakeups do not move "ready to run"
        sw(400, 0, IDLE(), "R", a), // idle: switched out (runnable) at 100, in at 200, ran 200
        sw(450, 0, a, "S", IDLE()), // a: wait 400-200, delay 400-250, run 50
    ]);
    assert_eq!(
        nums(&r),
        vec![
            (0, 0, 0, 0),
            (10, 0, 0, 100),
            (0, 100, 100, 200),
            (10, 200, 150, 50)
        ]
    );
    assert_eq!((r[0].comm.as_str(), r[0].pid), ("<idle>", Some(0)));
    assert_eq!(r[1].prev_state.to_string(), "S");
}

#[test]
fn preempted_task_delay_starts_at_its_switch_out() {
    let (a, b) = (named("a", 10), named("b", 11));
    let events = [
        sw(100, 0, IDLE(), "R", a),
        sw(200, 0, a, "R+", b),
        sw(500, 0, b, "S", a),
        sw(600, 0, a, "S", IDLE()),
    ];
    let r = rows(&events);
    assert_eq!(r[3].prev_state.to_string(), "S");
    assert_eq!(nums(&r)[3], (10, 300, 300, 100));
    // perf 6.1 predates "account sch delay for scheduled out running": no wakeup, no delay
    let (r61, _) = rows_with(
        TimehistOptions {
            flavor: PerfFlavor::Perf6_1,
            ..TimehistOptions::default()
        },
        &events,
    );
    assert_eq!(nums(&r61)[3], (10, 300, 0, 100));
}

#[test]
fn waking_is_preferred_over_wakeup() {
    let a = named("a", 10);
    let events = [
        sw(100, 0, IDLE(), "R", a),
        sw(200, 0, a, "S", IDLE()),
        wakeup(250, a),
        waking(300, a),
        wakeup(310, a),
        sw(400, 0, IDLE(), "R", a),
        sw(410, 0, a, "S", IDLE()),
    ];
    assert_eq!(rows(&events)[3].sch_delay_ns, 100);
    // Undeclared: the sched_wakeup at 250 counts (it came before any sched_waking).
    let (r, _) = rows_with(TimehistOptions::default(), &events);
    assert_eq!(r[3].sch_delay_ns, 150);
}

#[test]
fn pid_filter_keeps_the_process_and_drops_idle_stats() {
    let (a, b) = (named("a", 10), named("b", 20));
    let events = [
        comm(0, 10, 10, "a"),
        comm(0, 10, 12, "a2"),
        sw(100, 0, IDLE(), "R", a),
        sw(200, 0, a, "R", b),
        sw(300, 0, b, "S", named("a2", 12)),
        sw(400, 0, named("a2", 12), "S", IDLE()),
    ];
    let (r, s) = rows_with(
        TimehistOptions {
            pid: Some(10),
            ..TimehistOptions::default()
        },
        &events,
    );
    assert_eq!(
        r.iter().map(|r| (r.tid, r.pid)).collect::<Vec<_>>(),
        vec![(10, Some(10)), (12, Some(10))]
    );
    assert!(s.idle.is_empty());
}

#[test]
fn cpu_filter_keeps_rows_of_one_cpu_but_tracks_all() {
    let a = named("a", 10);
    let events = [
        sw(100, 0, IDLE(), "R", a),
        sw(200, 0, a, "S", IDLE()),
        waking(300, a),
        sw(400, 1, IDLE(), "R", a),
        sw(500, 1, a, "S", IDLE()),
    ];
    let (r, s) = rows_with(
        TimehistOptions {
            cpu: Some(1),
            waking_declared: true,
            ..TimehistOptions::default()
        },
        &events,
    );
    assert!(r.iter().all(|r| r.cpu == 1));
    // a's wait is known from its switch-out on CPU 0
    assert_eq!(nums(&r), vec![(0, 0, 0, 0), (10, 200, 100, 100)]);
    assert_eq!(s.idle.iter().map(|i| i.cpu).collect::<Vec<_>>(), vec![1]);
}

#[test]
fn summary_counts_runs_like_perf() {
    let a = named("a", 10);
    // a's runs: 0 (first switch on CPU 0, no tprev), 10, 20, 30
    let events = [
        sw(100, 0, a, "R", IDLE()),
        sw(110, 0, IDLE(), "R", a),
        sw(120, 0, a, "R", IDLE()),
        sw(130, 0, IDLE(), "R", a),
        sw(150, 0, a, "R", IDLE()),
        sw(160, 0, IDLE(), "R", a),
        sw(190, 0, a, "R", IDLE()),
        migrate(195, a, 0, 1),
    ];
    let (_, s) = rows_with(
        TimehistOptions {
            nr_cpus: Some(2),
            ..TimehistOptions::default()
        },
        &events,
    );
    let t = &s.tasks[0];
    assert_eq!(
        (
            t.sched_in,
            t.run_ns,
            t.min_run_ns,
            t.avg_run_ns,
            t.max_run_ns,
            t.migrations
        ),
        (4, 60, 0, 15, 30, 1)
    );
    // sample variance of 0,10,20,30 = 500/3; of the mean /4; sqrt = 6.4550; / 15 = 43.03 %
    assert!((t.stddev_pct - 43.033).abs() < 0.001, "{}", t.stddev_pct);
    assert_eq!(
        (
            s.unique_tasks,
            s.context_switches,
            s.total_run_ns,
            s.scheduling_time_ns,
            s.nr_cpus
        ),
        (1, 7, 60, 90, 2)
    );
    assert_eq!(
        s.idle.iter().map(|i| i.idle_ns).collect::<Vec<_>>(),
        vec![Some(30), None]
    );
}

/// perf computes the stddev with Welford's update in doubles; our integer sums agree.
#[test]
fn stddev_matches_welford() {
    let runs: Vec<u64> = (0..500u64)
        .map(|i| (i * 7919 + 13) % 100_003 * 1000 + i)
        .collect();
    let mut r = RunState::default();
    let (mut n, mut mean, mut m2) = (0f64, 0f64, 0f64);
    for &x in &runs {
        r.add_run(x);
        n += 1.0;
        let delta = x as f64 - mean;
        mean += delta / n;
        m2 += delta * (x as f64 - mean);
    }
    let welford = 100.0 * (m2 / (n - 1.0) / n).sqrt() / mean;
    assert!(
        (r.stddev_pct() - welford).abs() < 1e-9 * welford,
        "{} vs {welford}",
        r.stddev_pct()
    );
}
