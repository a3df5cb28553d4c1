//! The model's intervals (`stallscope_timeline::intervals::Model`) on every trace fixture,
//! read in one pass beside `perf sched timehist`'s definition (`Timehist`, itself tested
//! against perf in `oracle_perf_sched.rs`):
//!
//! * each task's runs, waits and sleeps never overlap; each CPU's runs and idle intervals
//!   never overlap (the model never has two tasks on one CPU, nor a task in two states);
//! * every run that a switch-out ended is timehist's row of that switch-out — same task,
//!   CPU, end, and run time (a run the model ended by a repair is not: the switch names
//!   another task, to which timehist gives the row);
//! * every wait that ends in a switch-in is that run's row's sch delay;
//! * timehist rows without a model run (a task whose switch-in the trace does not show:
//!   the first switch seen on a CPU, dropped switches this VM does not count as lost) are
//!   no more than the CPUs plus the switches the model had to repair, which data quality
//!   counts (`switch_prev_mismatch`, `impossible_transition`, `lost_chunks`,
//!   `switch_in_missing`);
//! * a run whose start the repair rule placed is never longer than timehist's row;
//! * the model's `switch_prev_mismatch` is `perf sched latency`'s "context switch bugs"
//!   (`Latency`, tested against perf) on every fixture.

use stallscope::model::Problem;
use std::collections::{BTreeMap, HashMap};

use stallscope::model::{Cpu, Tid, Ts};
use stallscope::timeline::{
    Interval, Latency, LatencyOptions, Model, PerfFlavor, TaskState, Timehist, TimehistOptions,
    TimehistRow, Timeline, WakeupSelector,
};
use stallscope::InputOptions;

/// CPU keys of the overlap check: above every task id.
const CPU_KEY: i64 = 1 << 32;

#[derive(Default)]
struct Checked {
    traces: usize,
    runs: u64,
    repaired_runs: u64,
    /// Runs whose start the repair rule placed, and how many of them equal timehist's row.
    repaired_start_runs: u64,
    repaired_start_equal: u64,
    waits_matched: u64,
}

/// Reads `path` once through the model and timehist; `None` when it is no trace.
fn check(path: &std::path::Path, checked: &mut Checked) -> Option<()> {
    let input = InputOptions {
        files: vec![path.to_str()?.to_string()],
        input_format: None,
        merge_unrelated: false,
        merge_overlapping: false,
        on_open: None,
    };
    let mut inputs = input.open().ok()?;
    let metas = inputs.metas();
    // the model as the products build it: the inputs' wakeup rule and CPU coverage
    let mut model = Model::new(Timeline::for_inputs(metas.iter().copied()));
    let mut th = Timehist::new(TimehistOptions {
        pid: None,
        cpu: None,
        flavor: PerfFlavor::Current,
        waking_declared: WakeupSelector::declared_in(metas.iter().copied()),
        nr_cpus: None,
    });
    // perf sched latency's definition (tested against perf in oracle_perf_sched.rs): its
    // context switch bugs are the model's switch_prev_mismatch
    let mut latency = Latency::new(LatencyOptions {
        waking_declared: WakeupSelector::declared_in(metas.iter().copied()),
        ..LatencyOptions::default()
    });
    let mut intervals: Vec<Interval> = Vec::new();
    // by (CPU, switch-out, task): text traces of µs resolution have several switches of
    // one CPU at one timestamp, some text traces the same switch line twice
    let mut rows: HashMap<(Cpu, Ts, Tid), Vec<TimehistRow>> = HashMap::new();
    let mut buf = Vec::new();
    loop {
        let more = inputs.visit_batch(&mut buf, &mut |run| {
            for ev in run {
                model.process(ev, &mut |i| intervals.push(i), &mut |_| {});
                latency.process(ev);
                th.process(ev, &mut |r| {
                    if r.tid != 0 {
                        rows.entry((r.cpu, r.ts_ns, r.tid)).or_default().push(*r);
                    }
                });
            }
        });
        match more {
            Ok(true) => {}
            Ok(false) => break,
            Err(_) => return None, // a fixture of a reader error (tested elsewhere)
        }
    }
    let name = path.display().to_string();
    if rows.is_empty() && intervals.is_empty() {
        return None; // no scheduler events
    }
    checked.traces += 1;

    // no overlap per task and per CPU
    // keyed by task id, or by CPU number + 2^32 (one map for both)
    let mut spans: BTreeMap<i64, Vec<(Ts, Ts)>> = BTreeMap::new();
    for i in &intervals {
        let (a, b) = i.span();
        assert!(a <= b, "{name}: {i:?} ends before it starts");
        if let Some(t) = i.tid() {
            spans.entry(i64::from(t)).or_default().push((a, b));
        }
        match *i {
            Interval::Run { cpu, .. } | Interval::Idle { cpu, .. } => spans
                .entry(CPU_KEY + i64::from(cpu))
                .or_default()
                .push((a, b)),
            _ => {}
        }
    }
    for (k, list) in spans.iter_mut() {
        list.sort();
        let what = match *k >= CPU_KEY {
            true => format!("CPU {}", k - CPU_KEY),
            false => format!("task {k}"),
        };
        for w in list.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "{name}: {what}: {:?} overlaps {:?}",
                w[0],
                w[1]
            );
        }
    }

    // runs are timehist's rows; waits ending in a switch-in are their sch delays when the
    // task's switch-out before them is in the trace (timehist keeps a stale "ready to run"
    // across a dropped switch-out; the model starts the wait at the wakeup it saw)
    let switched_out = |i: &Interval| {
        matches!(i, Interval::Run { ended, .. }
            if !matches!(ended, TaskState::Unknown | TaskState::Running { .. }))
    };
    let mut per_task: BTreeMap<Tid, Vec<&Interval>> = BTreeMap::new();
    for i in &intervals {
        if let Some(t) = i.tid() {
            per_task.entry(t).or_default().push(i);
        }
    }
    let mut waits: HashMap<(Tid, Ts), Ts> = HashMap::new();
    for list in per_task.values_mut() {
        list.sort_by_key(|i| i.span());
        for (k, i) in list.iter().enumerate() {
            let Interval::Wait {
                tid,
                start,
                end,
                ran_on: Some(_),
                ..
            } = **i
            else {
                continue;
            };
            let before = |n: usize| k.checked_sub(n).map(|j| list[j]);
            let anchored = match (before(1), before(2)) {
                (Some(p), _) if p.span().1 == start && switched_out(p) => true,
                (Some(s @ Interval::Sleep { .. }), Some(r)) => {
                    s.span().1 == start && r.span().1 == s.span().0 && switched_out(r)
                }
                _ => false,
            };
            if anchored {
                waits.insert((tid, end), end - start);
            }
        }
    }
    let mut matched_rows = 0u64;
    for i in &intervals {
        let Interval::Run {
            tid,
            cpu,
            start,
            end,
            ended,
            repaired_start,
        } = *i
        else {
            continue;
        };
        if repaired_start && !matches!(ended, TaskState::Unknown | TaskState::Running { .. }) {
            // a run whose switch-in the trace does not show, switched out here: timehist's
            // row of that switch-out runs from the CPU's previous switch, which the repair
            // rule takes as the start unless the task woke later (or lost events came
            // after it) — never a shorter run; timehist's first row on a CPU has no run
            // time (0), where the model may know more (a lost-events record before it)
            let same_switch = rows
                .get(&(cpu, end, tid))
                .unwrap_or_else(|| panic!("{name}: repaired run {i:?} has no timehist row"));
            assert!(
                same_switch
                    .iter()
                    .any(|r| r.run_ns >= end - start || r.run_ns == 0),
                "{name}: repaired run {i:?} is longer than timehist's {same_switch:?}"
            );
            checked.repaired_start_runs += 1;
            if same_switch.iter().any(|r| r.run_ns == end - start) {
                checked.repaired_start_equal += 1;
            }
            continue;
        }
        if matches!(ended, TaskState::Unknown | TaskState::Running { .. }) {
            // a run the model ended by a repair (a switch naming another prev task, lost
            // events, the task switched in on another CPU without a switch-out here):
            // timehist gives that switch's row, if any, to the task the switch names
            checked.repaired_runs += 1;
            continue;
        }
        let same_switch = rows
            .get(&(cpu, end, tid))
            .unwrap_or_else(|| panic!("{name}: run {i:?} has no timehist row"));
        let row = same_switch
            .iter()
            .find(|r| r.run_ns == end - start)
            .unwrap_or_else(|| panic!("{name}: {i:?} vs {same_switch:?}"));
        matched_rows += 1;
        checked.runs += 1;
        if let Some(&wait) = waits.get(&(tid, start)) {
            assert_eq!(
                row.sch_delay_ns, wait,
                "{name}: wait before {i:?} vs {row:?}"
            );
            checked.waits_matched += 1;
        }
    }
    let dq = model.timeline().quality();
    let perf_bugs = latency.finish().stats.context_switch_bugs;
    let per_task = dq.count(Problem::TasksPartlyRecorded) > 0;
    if per_task {
        // a per-task recording (perf record -- COMMAND, no -a: fixtures/real_world/per_task)
        // does not record the switch out of a task outside it, so a switch after one to such
        // a task is no contradiction to the model; perf, which does not know the recording
        // is per-task, counts each as a context switch bug: ours are a part of perf's
        assert!(
            dq.count(Problem::SwitchPrevMismatch) <= perf_bugs,
            "{name}: switch_prev_mismatch above perf's context switch bugs"
        );
    } else {
        // the repair rule changes who the model has running, not what the switch records
        // say: a switch naming a prev other than the CPU's last switched-in task is counted
        // as perf counts it
        assert_eq!(
            dq.count(Problem::SwitchPrevMismatch),
            perf_bugs,
            "{name}: switch_prev_mismatch vs perf's context switch bugs"
        );
    }
    // (what the model repairs silently on a per-task recording, perf counts as bugs)
    let repairs = dq
        .count(Problem::SwitchPrevMismatch)
        .max(perf_bugs * u64::from(per_task))
        + dq.count(Problem::ImpossibleTransition)
        + dq.count(Problem::LostChunks)
        + dq.count(Problem::SwitchInMissing);
    let cpus = rows.keys().map(|k| k.0).max().map_or(0, |c| c as u64 + 1);
    // runs of unknown length (run_ns 0: timehist's first row on a CPU) are no runs
    let unmatched = rows.values().flatten().filter(|r| r.run_ns > 0).count() as u64 - matched_rows;
    assert!(
        unmatched <= cpus + 2 * repairs,
        "{name}: {unmatched} timehist rows without a model run ({cpus} CPUs, {repairs} repaired switches)"
    );
    Some(())
}

#[test]
fn the_models_intervals_tile_the_trace_and_equal_timehist() {
    let mut checked = Checked::default();
    for path in stallscope_testkit::fixture_files() {
        check(&path, &mut checked);
    }
    eprintln!(
        "{} traces, {} runs equal to timehist rows ({} ended by a repair; {} started by one, {} of them equal), {} waits equal to their sch delay",
        checked.traces,
        checked.runs,
        checked.repaired_runs,
        checked.repaired_start_runs,
        checked.repaired_start_equal,
        checked.waits_matched
    );
    assert!(checked.traces >= 60, "{} traces", checked.traces);
    assert!(checked.runs >= 100_000, "{} runs", checked.runs);
    assert!(checked.waits_matched >= 10_000, "{}", checked.waits_matched);
}
