//! Every way a wait starts and ends, on hand-built event sequences whose expected numbers
//! follow from perf's definitions (see the module docs).

use super::*;
use crate::testutil::*;
use stallscope_model::{Problem, TaskRef};

/// Runs the analysis on `events` and, through [`SchedRecordEncoder`], on the lean records
/// they stand for; both must give the same report (rows, stats and data-quality examples).
fn run_with(opts: LatencyOptions, events: &[Event]) -> LatencyReport {
    let mut l = Latency::new(opts.clone());
    for e in events {
        l.process(e);
    }
    let general = l.finish();
    let mut batch = SchedBatch::default();
    let mut enc = stallscope_model::sched_record::SchedRecordEncoder::default();
    for e in events {
        enc.push(e, &mut batch);
    }
    enc.finish(&mut batch);
    let mut lean = Latency::new(opts);
    for r in &batch.records {
        lean.process_record(r, &batch);
    }
    let lean = lean.finish();
    assert_eq!(lean.tasks, general.tasks, "lean rows differ");
    assert_eq!(lean.stats, general.stats, "lean stats differ");
    assert_eq!(
        format!("{:?}", lean.quality),
        format!("{:?}", general.quality),
        "lean data quality differs"
    );
    general
}

fn run(events: &[Event]) -> LatencyReport {
    run_with(
        LatencyOptions {
            by_pid: true,
            waking_declared: true,
            ..LatencyOptions::default()
        },
        events,
    )
}

fn row(r: &LatencyReport, pid: Tid) -> &LatencyRow {
    r.tasks
        .iter()
        .find(|t| t.pids.contains(&pid))
        .unwrap_or_else(|| panic!("no row for pid {pid}: {:?}", r.tasks))
}

const IDLE: fn() -> TaskRef = || task(0);

#[test]
fn wakeup_of_a_sleeping_task_waits_until_switch_in() {
    let a = named("a", 10);
    let r = run(&[
        sw(100, 0, IDLE(), "R", a), // first switch-in of unknown a: a zero wait, counted
        sw(200, 0, a, "S", IDLE()), // a sleeps
        waking(300, a),             // wait starts
        sw(1300, 0, IDLE(), "R", a), // ends: 1000 ns
    ]);
    let t = row(&r, 10);
    assert_eq!(
        (
            t.switches,
            t.avg_delay_ns,
            t.max_delay_ns,
            t.max_delay_start_ns,
            t.max_delay_end_ns
        ),
        (2, 500, 1000, 300, 1300)
    );
    assert_eq!(r.stats.wakeup_timestamps, 1);
}

#[test]
fn duplicate_wakeup_does_not_move_the_start() {
    let a = named("a", 10);
    let r = run(&[
        sw(100, 0, IDLE(), "R", a),
        sw(200, 0, a, "D", IDLE()),
        waking(300, a),
        waking(700, a),
        sw(1300, 0, IDLE(), "R", a),
    ]);
    assert_eq!(row(&r, 10).max_delay_ns, 1000);
    // the second waking is ignored before it is counted as a timestamp
    assert_eq!(r.stats.wakeup_timestamps, 1);
}

#[test]
fn preempted_and_plain_runnable_switch_outs_start_a_wait() {
    let (a, b) = (named("a", 10), named("b", 11));
    let events = [
        sw(100, 0, IDLE(), "R", a),
        sw(200, 0, a, "R+", b), // a preempted by b: a waits from 200
        sw(500, 0, b, "R", a),  // b yields runnable: b waits from 500; a's wait ends (300)
        sw(900, 0, a, "S", b),  // b's wait ends (400)
    ];
    let r = run(&events);
    let (ta, tb) = (row(&r, 10), row(&r, 11));
    assert_eq!(
        (
            ta.switches,
            ta.max_delay_ns,
            ta.max_delay_start_ns,
            ta.max_delay_end_ns
        ),
        (2, 300, 200, 500)
    );
    assert_eq!(
        (tb.switches, tb.max_delay_ns, tb.max_delay_start_ns),
        (2, 400, 500)
    );
    // perf 6.1 does not read the preempted marker as R: a's 300 ns wait is not counted
    let r61 = run_with(
        LatencyOptions {
            by_pid: true,
            flavor: PerfFlavor::Perf6_1,
            ..LatencyOptions::default()
        },
        &events,
    );
    let (ta, tb) = (row(&r61, 10), row(&r61, 11));
    assert_eq!((ta.switches, ta.max_delay_ns), (1, 0));
    assert_eq!((tb.switches, tb.max_delay_ns), (2, 400));
}

#[test]
fn waking_is_preferred_over_wakeup_when_the_trace_has_it() {
    let a = named("a", 10);
    let events = [
        sw(100, 0, IDLE(), "R", a),
        sw(200, 0, a, "S", IDLE()),
        waking(300, a),
        wakeup(350, a),
        sw(1300, 0, IDLE(), "R", a),
    ];
    assert_eq!(row(&run(&events), 10).max_delay_start_ns, 300);
    // Without sched_waking declared: sched_wakeup counts until a sched_waking shows up.
    let only_wakeup = [
        sw(100, 0, IDLE(), "R", a),
        sw(200, 0, a, "S", IDLE()),
        wakeup(350, a),
        sw(1300, 0, IDLE(), "R", a),
    ];
    let r = run_with(
        LatencyOptions {
            by_pid: true,
            ..LatencyOptions::default()
        },
        &only_wakeup,
    );
    assert_eq!(row(&r, 10).max_delay_start_ns, 350);
    // perf 6.1 latency never used sched_waking: only the switch-in of unknown `a` counts.
    let r61 = run_with(
        LatencyOptions {
            by_pid: true,
            flavor: PerfFlavor::Perf6_1,
            ..LatencyOptions::default()
        },
        &events,
    );
    assert_eq!(
        (row(&r61, 10).switches, row(&r61, 10).max_delay_ns),
        (2, 950)
    );
}

#[test]
fn first_switch_in_of_an_unknown_task_is_a_zero_wait_and_wakeup_new_starts_one() {
    let (p, c) = (named("parent", 10), named("child", 11));
    let r = run(&[
        sw(100, 0, IDLE(), "R", p),
        fork(150, p, c),
        wakeup_new(160, c),
        sw(400, 0, p, "S", c),
    ]);
    assert_eq!((row(&r, 10).switches, row(&r, 10).max_delay_ns), (1, 0));
    let t = row(&r, 11);
    assert_eq!(
        (
            t.switches,
            t.max_delay_ns,
            t.max_delay_start_ns,
            t.max_delay_end_ns
        ),
        (1, 240, 160, 400)
    );
}

#[test]
fn runtime_accumulates_and_creates_a_waiting_atom_for_unknown_tasks() {
    let a = named("a", 10);
    // perf: a runtime event of an unknown task adds a runnable atom at its timestamp, so
    // the task's first switch-in counts a wait from the runtime event.
    let r = run(&[
        runtime(100, a, 40),
        runtime(150, a, 60),
        sw(300, 0, IDLE(), "R", a),
    ]);
    let t = row(&r, 10);
    assert_eq!(
        (
            t.runtime_ns,
            t.switches,
            t.max_delay_ns,
            t.max_delay_start_ns
        ),
        (100, 1, 200, 100)
    );
}

#[test]
fn migration_only_matters_with_a_profile_cpu() {
    let (a, b) = (named("a", 10), named("b", 11));
    let events = [
        sw(100, 0, IDLE(), "R", a),
        sw(200, 0, a, "R+", b),
        migrate(250, a, 0, 1),
        sw(700, 1, IDLE(), "R", a),
    ];
    assert_eq!(row(&run(&events), 10).max_delay_ns, 500);
    let r = run_with(
        LatencyOptions {
            by_pid: true,
            profile_cpu: Some(1),
            waking_declared: true,
            ..LatencyOptions::default()
        },
        &events,
    );
    // the wait restarts at the migration
    assert_eq!(
        (row(&r, 10).max_delay_ns, row(&r, 10).max_delay_start_ns),
        (450, 250)
    );
}

#[test]
fn profile_cpu_lets_a_wakeup_restart_a_runnable_wait() {
    let (a, b) = (named("a", 10), named("b", 11));
    let events = [
        sw(100, 0, IDLE(), "R", a),
        sw(200, 0, a, "R+", b),
        waking(300, a),
        sw(700, 0, b, "S", a),
    ];
    assert_eq!(row(&run(&events), 10).max_delay_ns, 500);
    let r = run_with(
        LatencyOptions {
            by_pid: true,
            profile_cpu: Some(0),
            waking_declared: true,
            ..LatencyOptions::default()
        },
        &events,
    );
    assert_eq!(row(&r, 10).max_delay_ns, 400);
}

#[test]
fn idle_is_excluded_and_counts_come_from_switch_ins() {
    let a = named("a", 10);
    let r = run(&[
        sw(100, 0, IDLE(), "R", a),
        sw(200, 0, a, "S", IDLE()),
        sw(300, 0, IDLE(), "R", a),
    ]);
    assert!(
        r.tasks.iter().all(|t| !t.pids.contains(&0)),
        "{:?}",
        r.tasks
    );
    // a slept with no wakeup recorded: its switch-in at 300 ends no wait
    assert_eq!(row(&r, 10).switches, 1);
    assert_eq!(
        (r.stats.total_switches, r.stats.context_switch_bugs),
        (1, 0)
    );
}

#[test]
fn merge_by_name_versus_per_pid() {
    let (f1, f2, g) = (named("fio", 20), named("fio", 21), named("g", 5));
    let events = [
        sw(100, 0, IDLE(), "R", f1), // f1: zero wait
        sw(200, 0, f1, "R+", f2),    // f2: zero wait; f1 waits from 200
        sw(500, 0, f2, "R+", f1),    // f1: 300; f2 waits from 500
        sw(800, 0, f1, "S", f2),     // f2: 300 (tie with f1's 300: perf keeps the higher tid's)
        sw(900, 0, f2, "S", g),      // g: zero wait
        runtime(901, f1, 7),
        runtime(902, f2, 8),
    ];
    let merged = run_with(
        LatencyOptions {
            waking_declared: true,
            ..LatencyOptions::default()
        },
        &events,
    );
    let fio = merged
        .tasks
        .iter()
        .find(|t| t.comm.as_str() == "fio")
        .unwrap();
    assert_eq!((fio.pid, fio.pids.clone()), (None, vec![20, 21]));
    assert_eq!(
        (
            fio.switches,
            fio.runtime_ns,
            fio.avg_delay_ns,
            fio.max_delay_ns
        ),
        (4, 15, 150, 300)
    );
    assert_eq!(
        (fio.max_delay_start_ns, fio.max_delay_end_ns),
        (500, 800),
        "tie: the higher tid (21) keeps the max"
    );
    let g_row = merged
        .tasks
        .iter()
        .find(|t| t.comm.as_str() == "g")
        .unwrap();
    assert_eq!((g_row.pid, g_row.switches), (Some(5), 1));
    let per_pid = run(&events);
    assert_eq!(per_pid.tasks.len(), 3);
    assert_eq!(
        (row(&per_pid, 20).switches, row(&per_pid, 20).pid),
        (2, Some(20))
    );
}

#[test]
fn sort_order_and_ties_follow_perf() {
    // Three tasks with equal numbers: ties go by tid descending (--pids) or name
    // descending (merged); a larger average comes first.
    let (a, b, c, d) = (
        named("aa", 1),
        named("bb", 2),
        named("cc", 3),
        named("dd", 4),
    );
    let events = [
        sw(10, 0, IDLE(), "R", a),
        sw(20, 0, a, "S", b),
        sw(30, 0, b, "S", c),
        sw(40, 0, c, "S", IDLE()),
        sw(50, 0, IDLE(), "R", d),
        sw(60, 0, d, "R", IDLE()),
        sw(90, 0, IDLE(), "R", d), // d: waits 0 and 30 → avg 15
    ];
    let pids: Vec<Tid> = run(&events).tasks.iter().map(|t| t.pids[0]).collect();
    assert_eq!(pids, vec![4, 3, 2, 1]);
    let merged = run_with(
        LatencyOptions {
            waking_declared: true,
            ..LatencyOptions::default()
        },
        &events,
    );
    let names: Vec<&str> = merged.tasks.iter().map(|t| t.comm.as_str()).collect();
    assert_eq!(names, vec!["dd", "cc", "bb", "aa"]);
    let by_switch = run_with(
        LatencyOptions {
            by_pid: true,
            sort: vec![SortKey::Pid],
            ..LatencyOptions::default()
        },
        &events,
    );
    assert_eq!(
        by_switch
            .tasks
            .iter()
            .map(|t| t.pids[0])
            .collect::<Vec<_>>(),
        vec![4, 3, 2, 1]
    );
    assert_eq!(
        SortKey::parse_list("avg, max,switch runtime"),
        Ok(SortKey::DEFAULT.to_vec())
    );
    assert_eq!(SortKey::parse_list("avg,bogus"), Err("bogus".to_string()));
}

#[test]
fn unordered_wakeups_and_context_switch_bugs_are_counted() {
    let (a, b) = (named("a", 10), named("b", 11));
    let r = run(&[
        sw(100, 0, IDLE(), "R", a),
        sw(200, 0, a, "S", IDLE()),
        waking(150, a),             // before a's switch-out: unordered, ignored
        sw(300, 0, b, "S", IDLE()), // prev b is not CPU 0's current (idle): a context switch bug
        ev(310, 0, EventKind::Lost { count: Some(12) }),
        ev(320, 1, EventKind::Lost { count: None }),
    ]);
    assert_eq!(
        (r.stats.wakeup_timestamps, r.stats.unordered_timestamps),
        (1, 1)
    );
    assert_eq!(r.stats.context_switch_bugs, 1);
    assert_eq!(r.quality.count(Problem::SwitchPrevMismatch), 1);
    assert_eq!(r.quality.count(Problem::UnorderedWakeupTimestamps), 1);
    assert_eq!((r.stats.lost_events, r.stats.lost_chunks), (12, 2));
}

#[test]
fn wait_starting_after_the_switch_in_is_ignored() {
    let (a, b) = (named("a", 10), named("b", 11));
    // A wakeup time-stamped after the switch-in (out-of-order input): perf drops the atom.
    let r = run_with(
        LatencyOptions {
            by_pid: true,
            profile_cpu: Some(0),
            waking_declared: true,
            ..LatencyOptions::default()
        },
        &[
            sw(100, 0, IDLE(), "R", a),
            sw(200, 0, a, "S", b),
            waking(900, a),
            sw(500, 0, b, "S", a),
        ],
    );
    assert_eq!(row(&r, 10).switches, 1);
}

#[test]
fn names_come_from_side_band_records_and_tid_reuse_starts_a_new_task() {
    let (p, a) = (named("sh", 1), named("a", 10));
    let r = run_with(
        LatencyOptions {
            waking_declared: true,
            ..LatencyOptions::default()
        },
        &[
            comm(0, 10, 10, "worker-name"),
            sw(100, 0, IDLE(), "R", a),
            sw(200, 0, a, "X", p),
            fork(300, p, named("b", 10)), // tid 10 reused
            wakeup_new(310, named("b", 10)),
            sw(400, 0, p, "S", named("b", 10)),
        ],
    );
    let names: Vec<(&str, Vec<Tid>, u64)> = r
        .tasks
        .iter()
        .map(|t| (t.comm.as_str(), t.pids.clone(), t.switches))
        .collect();
    assert!(names.contains(&("worker-name", vec![10], 1)), "{names:?}");
    assert!(names.contains(&("b", vec![10], 1)), "{names:?}");
}

#[test]
fn a_name_seen_only_in_an_unused_event_does_not_rename_the_task() {
    // sched_wakeup is not used when sched_waking is declared, and migrations only with
    // --cpu: the names they carry must not become the row's name (in either path; the lean
    // one carries them as PayloadComm records and applies them only with a used event).
    let (old, new) = (named("old", 7), named("new", 7));
    let events = [
        sw(100, 0, IDLE(), "R", old),
        sw(200, 0, old, "S", IDLE()),
        wakeup(300, new),
        migrate(350, named("newer", 7), 0, 1),
        waking(400, old),
        sw(500, 0, IDLE(), "R", old),
        wakeup(600, new),
    ];
    assert_eq!(row(&run(&events), 7).comm.as_str(), "old");
    let with_cpu = run_with(
        LatencyOptions {
            by_pid: true,
            waking_declared: true,
            profile_cpu: Some(0),
            ..LatencyOptions::default()
        },
        &events,
    );
    // With --cpu the migration is used, but the later waking renames the task back.
    assert_eq!(row(&with_cpu, 7).comm.as_str(), "old");
    // A fork with an empty child name keeps a fresh task nameless until an event names it.
    let forked = [
        sw(100, 0, IDLE(), "R", named("p", 9)),
        fork(150, named("p", 9), named("", 20)),
        wakeup_new(160, named("", 20)),
        sw(200, 0, named("p", 9), "R", named("child", 20)),
    ];
    assert_eq!(row(&run(&forked), 20).comm.as_str(), "child");
}

/// The idle tasks' names (one per CPU, all tid 0) travel once at the end of the lean
/// stream; merged by name, a task named like tid 0's last name joins the idle row and is
/// left out with it, while a task named like an earlier idle name is not — on both paths.
#[test]
fn the_idle_tasks_last_name_decides_which_merged_row_is_left_out() {
    let (idle0, idle1) = (named("swapper/0", 0), named("swapper/1", 0));
    let (a, b) = (named("swapper/1", 10), named("swapper/0", 11));
    let events = [
        sw(100, 0, idle0, "R", a),
        sw(150, 1, idle1, "R", b),
        sw(200, 0, a, "S", idle0),
        waking(250, a),
        sw(300, 0, idle0, "R", a),
        sw(400, 1, b, "S", idle1),
        // The last event naming tid 0: swapper/0, b's name.
        sw(500, 0, a, "S", idle0),
    ];
    let r = run_with(
        LatencyOptions {
            by_pid: false,
            waking_declared: true,
            ..LatencyOptions::default()
        },
        &events,
    );
    let rows: Vec<(&str, &[Tid])> = r
        .tasks
        .iter()
        .map(|t| (t.comm.as_str(), t.pids.as_slice()))
        .collect();
    assert_eq!(rows, [("swapper/1", &[10][..])], "{:?}", r.tasks);
}
