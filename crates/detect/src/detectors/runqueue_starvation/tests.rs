//! Each way a wait can end, merging, and the relative and periodic rules, on synthetic
//! traces whose expected numbers follow from the event times alone.

use crate::testutil::{idle, run, t, Trace, MS};
use stallscope_model::{Finding, FindingSeverity};

const ID: &str = "runqueue-starvation";

fn hog() -> stallscope_model::TaskRef {
    t("hog", 100, 100)
}
fn victim() -> stallscope_model::TaskRef {
    t("victim", 200, 120)
}
fn other() -> stallscope_model::TaskRef {
    t("other", 300, 120)
}

/// hog runs on CPU 1 from 0; the victim is woken towards CPU 1 at 1 ms.
fn base() -> Trace {
    let mut tr = Trace::new();
    tr.sw(0, 1, idle(), "R", hog());
    tr.wake(MS, 1, 100, victim(), 1);
    tr
}

fn only(f: &[Finding]) -> &Finding {
    assert_eq!(f.len(), 1, "{f:#?}");
    &f[0]
}

fn m(f: &Finding, k: &str) -> i64 {
    *f.measures
        .get(k)
        .unwrap_or_else(|| panic!("no measure {k}: {:?}", f.measures))
}

#[test]
fn ended_by_culprit_blocking() {
    let mut tr = base();
    tr.sw(21 * MS, 1, hog(), "S", victim());
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(m(f, "worst_wait_ns"), 20_000_000);
    assert_eq!(m(f, "ended_culprit_blocked"), 1);
    assert_eq!(m(f, "culprit_run_ns"), 20_000_000);
    assert_eq!(m(f, "culprit_slices"), 1);
    assert_eq!(f.severity, FindingSeverity::Medium);
    assert_eq!(f.tasks[0].pid, 200);
    assert_eq!(f.tasks[0].role, "victim");
    assert_eq!(f.tasks[1].pid, 100);
    assert_eq!(f.tasks[1].role, "culprit");
    assert_eq!(f.tasks[1].measures["nice"], -20);
    assert_eq!(f.cpus, vec![1]);
    assert!(
        f.title.contains(
            "victim (pid 200) waited 20.000 ms runnable on CPU 1 while hog (pid 100) ran 1 slice"
        ),
        "{}",
        f.title
    );
    assert!(f.hint.contains("88761"), "{}", f.hint);
    // evidence: the wakeup (line 2), the hog's switch-in (line 1), the ending switch (line 3)
    let src: Vec<&str> = f.evidence.iter().map(|e| e.source.as_str()).collect();
    assert_eq!(
        src,
        vec!["synthetic.txt:1", "synthetic.txt:2", "synthetic.txt:3"]
    );
}

#[test]
fn ended_by_culprit_preemption() {
    let mut tr = base();
    tr.sw(61 * MS, 1, hog(), "R+", victim());
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(m(f, "worst_wait_ns"), 60_000_000);
    assert_eq!(m(f, "ended_culprit_preempted"), 1);
    assert_eq!(f.severity, FindingSeverity::High);
}

#[test]
fn ended_by_culprit_migrating_away() {
    let mut tr = base();
    tr.sw(15 * MS, 1, hog(), "R", other());
    tr.migrate(15 * MS + 500_000, 1, hog(), 1, 0);
    tr.sw(21 * MS, 1, other(), "S", victim());
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(m(f, "ended_culprit_migrated_away"), 1);
    assert!(
        f.hint
            .contains("sched_migrate_task at 0.015500 s: pid 100 CPU 1 → 0"),
        "{}",
        f.hint
    );
    assert_eq!(m(f, "culprit_run_ns"), 14_000_000);
    // the culprit role goes only to the task that ran at least half of the wait
    let ran: Vec<(i32, &str, i64)> = f
        .tasks
        .iter()
        .skip(1)
        .map(|t| (t.pid, t.role.as_str(), t.measures["run_ns"]))
        .collect();
    assert_eq!(
        ran,
        vec![(100, "culprit", 14_000_000), (300, "ran", 6_000_000)]
    );
}

#[test]
fn ended_by_victim_migrating() {
    let mut tr = base();
    tr.sw(500_000, 0, idle(), "R", other());
    tr.migrate(15 * MS, 1, victim(), 1, 0);
    tr.sw(16 * MS, 0, other(), "S", victim());
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(m(f, "worst_wait_ns"), 15_000_000);
    assert_eq!(m(f, "ended_victim_migrated"), 1);
    assert!(
        f.hint
            .contains("sched_migrate_task at 0.015000 s: pid 200 CPU 1 → 0"),
        "{}",
        f.hint
    );
    assert_eq!(f.cpus, vec![0, 1]);
    assert!(f.title.contains("CPU 1 (ran on CPU 0)"), "{}", f.title);
}

#[test]
fn ended_by_victim_being_picked_after_idle() {
    let mut tr = base();
    tr.sw(5 * MS, 1, hog(), "S", idle());
    tr.sw(25 * MS, 1, idle(), "R", victim());
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(m(f, "worst_wait_ns"), 24_000_000);
    assert_eq!(m(f, "ended_victim_picked"), 1);
    // the hog ran 4 of the 24 ms: it is listed as having run, not as the culprit
    assert!(!f.measures.contains_key("culprit_run_ns"));
    assert_eq!((f.tasks[1].pid, f.tasks[1].role.as_str()), (100, "ran"));
    assert_eq!(f.tasks[1].measures["run_ns"], 4_000_000);
    assert_eq!(
        f.cause.as_ref().map(|c| c.kind.as_str()),
        Some("missing_events")
    );
    // the CPU idled 20 of the 24 ms: a queued task would have run; the trace is suspect
    assert_eq!(m(f, "worst_wait_cpu_idle_ns"), 20_000_000);
    // and it chose idle (the switch at 5 ms) with the victim queued for 4 ms
    assert_eq!(m(f, "worst_wait_idle_picks"), 1);
    assert_eq!(f.severity, FindingSeverity::Low);
    assert!(f.title.contains("events may be missing"), "{}", f.title);
    assert!(f.title.contains("switched to idle once"), "{}", f.title);
}

/// A CPU that switches to idle while a task waits on it contradicts the wait however much
/// others ran: the kernel picks a queued task before idle. Before, the wait below (others
/// ran 90 % of it, the CPU idled 10 %) was a MEDIUM `context_not_recorded` starvation.
#[test]
fn a_switch_to_idle_during_the_wait_makes_it_missing_events() {
    let mut tr = base();
    // the hog ran 1..5 ms already; it idles 5..10 ms (the victim "queued"), runs on to 50 ms
    tr.sw(5 * MS, 1, hog(), "S", idle());
    tr.sw(10 * MS, 1, idle(), "R", hog());
    tr.sw(50 * MS, 1, hog(), "R+", victim());
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(m(f, "worst_wait_idle_picks"), 1);
    assert_eq!(
        f.cause.as_ref().map(|c| c.kind.as_str()),
        Some("missing_events")
    );
    assert_eq!(f.severity, FindingSeverity::Low);
    // a switch to idle within the first millisecond of the wait (a remote wakeup not yet
    // on the CPU's queue) is no contradiction
    let mut tr = base();
    tr.sw(MS + MS / 2, 1, hog(), "S", idle());
    tr.sw(MS + MS / 2 + 10_000, 1, idle(), "R", hog());
    tr.sw(50 * MS, 1, hog(), "R+", victim());
    let f = run(ID, &[], &tr);
    assert!(
        f.iter().all(|f| m(f, "worst_wait_idle_picks") == 0),
        "{f:#?}"
    );
}

#[test]
fn preempted_wait_counts_from_the_switch_out() {
    let mut tr = Trace::new();
    tr.sw(0, 1, idle(), "R", victim());
    tr.sw(MS, 1, victim(), "R+", hog());
    tr.sw(13 * MS, 1, hog(), "R+", victim());
    let f = run(ID, &[], &tr);
    assert_eq!(m(only(&f), "worst_wait_ns"), 12_000_000);
}

#[test]
fn short_waits_are_not_findings() {
    let mut tr = base();
    tr.sw(6 * MS, 1, hog(), "R+", victim());
    assert!(run(ID, &[], &tr).is_empty());
    // …unless the threshold is lowered with --set
    let f = run(ID, &[("threshold_ns", "4ms")], &tr);
    assert_eq!(m(only(&f), "worst_wait_ns"), 5_000_000);
}

#[test]
fn repeated_waits_merge_with_the_worst_instance() {
    let mut tr = Trace::new();
    tr.sw(0, 1, idle(), "R", hog());
    let mut ts = 0;
    for wait in [12, 30, 11] {
        tr.wake(ts + MS, 1, 100, victim(), 1);
        tr.sw(ts + MS + wait * MS, 1, hog(), "R+", victim());
        tr.sw(ts + MS + wait * MS + 100_000, 1, victim(), "S", hog());
        ts += 100 * MS;
    }
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(m(f, "waits"), 3);
    assert_eq!(m(f, "total_wait_ns"), 53_000_000);
    assert_eq!(m(f, "worst_wait_ns"), 30_000_000);
    assert_eq!(m(f, "worst_wait_start_ns"), 101_000_000);
    assert_eq!(f.window.start_ns, 1_000_000);
    assert_eq!(f.window.end_ns, 212_000_000);
}

#[test]
fn extreme_relative_to_the_median() {
    let mut tr = Trace::new();
    tr.sw(0, 1, idle(), "R", hog());
    let mut ts = 0;
    for k in 0..40u64 {
        let wait = if k == 39 { 6 * MS } else { 100_000 };
        tr.wake(ts + MS, 1, 100, victim(), 1);
        tr.sw(ts + MS + wait, 1, hog(), "R+", victim());
        tr.sw(ts + MS + wait + 50_000, 1, victim(), "S", hog());
        ts += 17 * MS + k * 3 * MS; // irregular: not periodic
    }
    assert!(
        run(ID, &[], &tr).is_empty(),
        "one relative outlier is below min_repeats"
    );
    let f = run(ID, &[("min_repeats", "1")], &tr);
    let f = only(&f);
    assert_eq!(m(f, "waits_over_relative"), 1);
    assert_eq!(m(f, "worst_wait_ns"), 6_000_000);
    assert_eq!(f.severity, FindingSeverity::Low);
}

#[test]
fn periodic_task_falling_behind_its_period() {
    let mut tr = Trace::new();
    tr.sw(0, 1, idle(), "R", hog());
    let mut wake_at: Vec<(u64, u64)> = (1..=40).map(|k| (k * MS, 10_000)).collect();
    wake_at.extend((0..5).map(|k| ((44 + 4 * k) * MS, 3 * MS)));
    for (w, wait) in wake_at {
        tr.wake(w, 1, 100, victim(), 1);
        tr.sw(w + wait, 1, hog(), "R+", victim());
        tr.sw(w + wait + 40_000, 1, victim(), "S", hog());
    }
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(m(f, "waits_over_period"), 5);
    assert_eq!(m(f, "wakeups"), 45);
    assert!(
        (875_000..=1_000_000).contains(&m(f, "period_ns")),
        "{}",
        m(f, "period_ns")
    );
    assert_eq!(f.severity, FindingSeverity::High);
    assert!(f.title.contains("periodic task"), "{}", f.title);
}

#[test]
fn recorded_cgroup_weights_explain_the_culprit() {
    let mut tr = base();
    tr.sw(21 * MS, 1, hog(), "S", victim());
    let cg = |w| stallscope_model::CgroupContext {
        hierarchy: "0::".into(),
        path: format!("/w{w}"),
        cpu_weight: Some(w),
        ..Default::default()
    };
    let sys = stallscope_model::SystemContext {
        tasks: vec![
            stallscope_model::TaskContext {
                pid: 100,
                cgroups: vec![cg(10000)],
                ..Default::default()
            },
            stallscope_model::TaskContext {
                pid: 200,
                cgroups: vec![cg(100)],
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let f = crate::testutil::run_with(ID, &[], &tr, Some(sys));
    let h = &only(&f).hint;
    assert!(
        h.contains("Recorded victim context: cgroup /w100 cpu.weight 100"),
        "{h}"
    );
    assert!(
        h.contains("Recorded culprit context: cgroup /w10000 cpu.weight 10000"),
        "{h}"
    );
}

#[test]
fn a_missing_switch_out_is_repaired_from_the_records_context() {
    // the switch hog → other is recorded, other's switch back to hog is not (seen in real
    // captures); a later record on CPU 1 in hog's context shows hog running again
    let mut tr = base();
    tr.sw(3 * MS, 1, hog(), "R", other());
    tr.wake(4 * MS, 1, 100, t("z", 400, 120), 0);
    tr.sw(21 * MS, 1, hog(), "R+", victim());
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(m(f, "culprit_run_ns"), 20_000_000);
    assert_eq!(m(f, "culprit_slices"), 2);
    assert_eq!(m(f, "worst_wait_others_ran_ns"), 20_000_000);
}

#[test]
fn a_waiter_seen_running_is_not_waiting() {
    // the victim's switch-in is missing: a record in its own context shows it running
    let mut tr = base();
    tr.wake(2 * MS, 0, 200, t("z", 400, 120), 0);
    tr.sw(21 * MS, 1, hog(), "R+", victim());
    assert!(run(ID, &[], &tr).is_empty());
}

#[test]
fn a_wait_after_contradicting_switch_records_is_low() {
    let mut tr = Trace::new();
    tr.sw(0, 1, idle(), "R", hog());
    tr.sw(0, 0, idle(), "R", victim());
    // CPU 0 switches from `other` although the victim was running there: the timeline
    // resets the victim to Unknown; its switch-out is missing
    tr.sw(MS / 2, 0, other(), "S", idle());
    tr.wake(MS, 1, 100, victim(), 1);
    tr.sw(61 * MS, 1, hog(), "R+", victim());
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(m(f, "worst_wait_ns"), 60_000_000);
    assert_eq!(f.severity, FindingSeverity::Low);
    assert!(f.title.contains("contradict"), "{}", f.title);
}

#[test]
fn vruntime_from_custom_events_gives_the_gap() {
    use stallscope_model::FieldValue;
    let mut tr = base();
    let vr = |pid: i64, v: u64| {
        vec![
            ("pid".to_string(), FieldValue::Int(pid)),
            ("vruntime".to_string(), FieldValue::UInt(v)),
        ]
    };
    tr.generic(2 * MS, 0, 0, "probe_vruntime", vr(200, 5_000_000));
    tr.generic(3 * MS, 0, 0, "probe_vruntime", vr(100, 1_000_000));
    tr.sw(21 * MS, 1, hog(), "S", victim());
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(m(f, "vruntime_gap_ns"), 4_000_000);
    assert!(
        f.hint.contains("vruntime: victim 5000000, culprit 1000000"),
        "{}",
        f.hint
    );
}

#[test]
fn medians_refresh_at_powers_of_two_and_multiples_of_32() {
    // the bit trick against the definition
    for n in 0..5000u64 {
        let want = n.is_power_of_two() || n % 32 == 0;
        assert_eq!(super::refresh_due(n), want, "{n}");
    }
    assert!(super::refresh_due(1 << 40) && !super::refresh_due((1 << 40) + 1));
}

/// `f`'s cause kind.
fn cause(f: &Finding) -> &str {
    f.cause.as_ref().map_or("", |c| c.kind.as_str())
}

/// `n` equal-weight hogs take turns on CPU 1 in 4 ms slices for `ms` ms, the victim among
/// them (pid 200): the victim waits (n − 1) slices each round, fairly.
fn round_robin(n: i32, ms: u64) -> Trace {
    let mut tr = Trace::new();
    let task = |k: i32| match k {
        0 => victim(),
        _ => t("eq", 300 + k, 120),
    };
    tr.sw(0, 1, idle(), "R", task(0));
    for k in 1..n {
        tr.wake(10_000 + k as u64, 1, 200, task(k), 1);
    }
    let mut cur = 0;
    let mut ts = 4 * MS;
    while ts <= ms * MS {
        let next = (cur + 1) % n;
        tr.sw(ts, 1, task(cur), "R", task(next));
        cur = next;
        ts += 4 * MS;
    }
    tr
}

#[test]
fn fair_sharing_of_a_saturated_cpu_is_no_starvation() {
    // 6 equal tasks on one CPU: each waits 20 ms a round, owed 20/6 ms: fair
    let f = run(ID, &[], &round_robin(6, 400));
    assert!(f.is_empty(), "{f:#?}");
    // with 6 rounds the same waits are flagged when the fair bound is set below them
    let f = run(ID, &[("fair_lag_slices", "0")], &round_robin(6, 400));
    assert!(!f.is_empty());
    assert!(
        f.iter().all(|f| cause(f) == "context_not_recorded"),
        "{f:#?}"
    );
}

#[test]
fn an_equal_weight_hog_that_keeps_the_cpu_is_not_explained_by_nice() {
    // victim and hog at nice 0; the hog keeps the CPU for 60 ms
    let mut tr = Trace::new();
    let hog0 = t("hog", 100, 120);
    tr.sw(0, 1, idle(), "R", hog0);
    tr.wake(MS, 1, 100, victim(), 1);
    tr.sw(61 * MS, 1, hog0, "R+", victim());
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(cause(f), "context_not_recorded");
    // owed half of the 60 ms with one equal task
    assert_eq!(m(f, "worst_wait_entitled_ns"), 30_000_000);
    // no context: cgroup weights or autogroup may explain it, so at most medium (issue #28)
    assert_eq!(f.severity, FindingSeverity::Medium);
    assert!(f.hint.starts_with("Not explained by nice"), "{}", f.hint);
    assert!(f.hint.contains("autogroup"), "{}", f.hint);
    assert!(f.hint.contains("stallscope record"), "{}", f.hint);
    // with recorded context (no weights): not explained by the recorded weights
    let sys = stallscope_model::SystemContext {
        tasks: vec![stallscope_model::TaskContext {
            pid: 100,
            cgroups: vec![stallscope_model::CgroupContext {
                hierarchy: "4:cpu".into(),
                path: "/".into(),
                cpu_shares: Some(1024),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let f = crate::testutil::run_with(ID, &[], &tr, Some(sys));
    assert_eq!(cause(only(&f)), "not_explained_by_weights");
}

#[test]
fn a_real_time_hog_is_a_higher_class() {
    let mut tr = Trace::new();
    let rt = t("fifo", 100, 49);
    tr.sw(0, 1, idle(), "R", rt);
    tr.wake(MS, 1, 100, victim(), 1);
    tr.sw(81 * MS, 1, rt, "R", victim());
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(cause(f), "higher_class");
    assert_eq!(f.severity, FindingSeverity::High);
    // a real-time runner stops the fair clock: nothing was owed
    assert_eq!(m(f, "worst_wait_entitled_ns"), 0);
    assert!(f.hint.starts_with("Higher scheduling class"), "{}", f.hint);
}

#[test]
fn cgroup_weight_and_bandwidth_causes_from_recorded_context() {
    let mut tr = Trace::new();
    let hog0 = t("hog", 100, 120);
    tr.sw(0, 1, idle(), "R", hog0);
    tr.wake(MS, 1, 100, victim(), 1);
    tr.sw(61 * MS, 1, hog0, "R+", victim());
    let v1 = |path: &str, shares: u64, max: Option<&str>| stallscope_model::CgroupContext {
        hierarchy: "4:cpu,cpuacct".into(),
        path: path.into(),
        cpu_shares: Some(shares),
        cpu_max: max.map(str::to_string),
        ..Default::default()
    };
    let task = |pid, cg| stallscope_model::TaskContext {
        pid,
        cgroups: vec![cg],
        ..Default::default()
    };
    let sys = stallscope_model::SystemContext {
        tasks: vec![
            task(100, v1("/bigw", 262144, None)),
            task(200, v1("/", 1024, None)),
        ],
        ..Default::default()
    };
    let f = crate::testutil::run_with(ID, &[], &tr, Some(sys));
    let f = only(&f);
    assert_eq!(cause(f), "cgroup_weight");
    assert!(f.hint.contains("/bigw (cpu.shares 262144)"), "{}", f.hint);
    assert!(f.hint.contains("262144 and 1024"), "{}", f.hint);
    let sys = stallscope_model::SystemContext {
        tasks: vec![
            task(100, v1("/", 1024, None)),
            task(200, v1("/q", 1024, Some("20000 100000"))),
        ],
        ..Default::default()
    };
    let f = crate::testutil::run_with(ID, &[], &tr, Some(sys));
    let f = only(&f);
    assert_eq!(cause(f), "throttled");
    assert!(
        f.hint.contains("/q may run 20000 µs per 100000 µs"),
        "{}",
        f.hint
    );
}

#[test]
fn a_wait_still_going_on_at_the_end_is_a_lower_bound() {
    let mut tr = Trace::new();
    let hog0 = t("hog", 100, 120);
    tr.sw(0, 1, idle(), "R", hog0);
    tr.wake(MS, 1, 100, victim(), 1);
    tr.sw(70 * MS, 0, idle(), "R", other());
    tr.sw(71 * MS, 0, other(), "S", idle());
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(m(f, "worst_wait_censored"), 1);
    assert_eq!(m(f, "worst_wait_ns"), 70_000_000);
    assert!(f.title.contains("waited ≥ 70.000 ms"), "{}", f.title);
    assert!(
        f.title.contains("still waiting when the trace ended"),
        "{}",
        f.title
    );
}

#[test]
fn interrupt_handlers_that_take_most_of_the_wait_are_interrupt_time() {
    // an equal-weight task runs on CPU 1 while softirq handlers take 38 of the 60 ms wait
    let mut tr = Trace::new();
    let hog0 = t("hog", 100, 120);
    tr.sw(0, 1, idle(), "R", hog0);
    tr.wake(MS, 1, 100, victim(), 1);
    tr.generic(2 * MS, 1, 100, "softirq_entry", vec![]);
    tr.generic(3 * MS, 1, 100, "irq_handler_entry", vec![]); // nested: counted once
    tr.generic(4 * MS, 1, 100, "irq_handler_exit", vec![]);
    tr.generic(40 * MS, 1, 100, "softirq_exit", vec![]);
    tr.generic(50 * MS, 0, 0, "softirq_entry", vec![]); // another CPU: not the victim's
    tr.generic(55 * MS, 0, 0, "softirq_exit", vec![]);
    tr.sw(61 * MS, 1, hog0, "R+", victim());
    let f = run(ID, &[], &tr);
    let f = only(&f);
    assert_eq!(cause(f), "interrupt_time");
    assert_eq!(m(f, "worst_wait_irq_ns"), 38_000_000);
    assert_eq!(
        f.severity,
        FindingSeverity::Medium,
        "no task took it: at most medium"
    );
    assert!(f.hint.starts_with("Interrupt time: interrupt and softirq handlers ran 38.000 ms of the 60.000 ms wait on CPU 1"), "{}", f.hint);
    // handlers for less than half of the wait do not decide it
    let mut tr = Trace::new();
    tr.sw(0, 1, idle(), "R", hog0);
    tr.wake(MS, 1, 100, victim(), 1);
    tr.generic(2 * MS, 1, 100, "softirq_entry", vec![]);
    tr.generic(20 * MS, 1, 100, "softirq_exit", vec![]);
    tr.sw(61 * MS, 1, hog0, "R+", victim());
    let f = run(ID, &[], &tr);
    assert_eq!(cause(only(&f)), "context_not_recorded");
    assert_eq!(m(only(&f), "worst_wait_irq_ns"), 18_000_000);
}

#[test]
fn a_pinned_victim_beside_an_idle_cpu_is_affinity() {
    // CPU 0 idles from 0; the victim may only run on CPU 1 (recorded), where an equal
    // task keeps the CPU for 60 ms
    let sys = |allowed: &str| stallscope_model::SystemContext {
        nr_cpus: Some(2),
        tasks: vec![stallscope_model::TaskContext {
            pid: 200,
            cpus_allowed: Some(allowed.into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let hog0 = t("hog", 100, 120);
    let mut tr = Trace::new();
    tr.sw(0, 0, other(), "S", idle());
    tr.sw(0, 1, idle(), "R", hog0);
    tr.wake(MS, 1, 100, victim(), 1);
    tr.sw(61 * MS, 1, hog0, "R+", victim());
    let f = crate::testutil::run_with(ID, &[], &tr, Some(sys("1")));
    let f = only(&f);
    assert_eq!(cause(f), "affinity");
    assert_eq!(m(f, "worst_wait_disallowed_cpus_idle_ns"), 60_000_000);
    assert_eq!(
        f.severity,
        FindingSeverity::Medium,
        "owed more than fair: at most medium"
    );
    assert!(
        f.hint
            .starts_with("Affinity: the victim may run only on CPUs 1"),
        "{}",
        f.hint
    );
    // allowed everywhere: not affinity (and not pinned)
    let f = crate::testutil::run_with(ID, &[], &tr, Some(sys("0-1")));
    let f = only(&f);
    assert_ne!(cause(f), "affinity");
    assert!(!f
        .measures
        .contains_key("worst_wait_disallowed_cpus_idle_ns"));
    // fair sharing among the tasks pinned to CPU 1 beside the idle CPU 0: reported, low
    let mut tr = round_robin(6, 400);
    tr.sw(0, 0, other(), "S", idle());
    let f = crate::testutil::run_with(ID, &[], &tr, Some(sys("1")));
    assert!(!f.is_empty());
    assert!(
        f.iter()
            .all(|f| cause(f) == "affinity" && f.severity == FindingSeverity::Low),
        "{f:#?}"
    );
}

/// A migration record whose source CPU is not the one the wait was counted on (the move
/// that took the task there was not recorded: a recording of some CPUs only, a dropped
/// record): what the wait was owed is read on the clock it started on, never across two
/// CPUs' clocks, and the wait is reported low with the reason (the task may have run on the
/// CPU it was seen on). Before, the two clocks' difference wrapped and the victim was
/// "entitled to 288230375.912 s of CPU" during its wait, a false high "not explained by
/// weights" (found on a `stallscope record --cpus 1` of a busy machine).
#[test]
fn a_migration_from_another_cpu_than_the_waits_reads_one_clock() {
    let third = t("third", 400, 120);
    let mut tr = Trace::new();
    tr.sw(0, 0, idle(), "R", other());
    tr.sw(0, 1, idle(), "R", hog());
    // CPU 0's fair clock runs for 40 ms (a task waits there); CPU 1's has not started
    tr.wake(MS, 0, 300, third, 0);
    tr.sw(41 * MS, 0, other(), "S", third);
    tr.wake(41 * MS, 0, 400, victim(), 0);
    // recorded as a move from CPU 1 (the victim's move 0 → 1 itself was not recorded)
    tr.migrate(42 * MS, 1, victim(), 1, 1);
    tr.sw(102 * MS, 1, hog(), "S", victim());
    let f = run(ID, &[], &tr);
    let f = f
        .iter()
        .find(|f| f.tasks.iter().any(|t| t.pid == 200 && t.role == "victim"))
        .expect("the victim's finding");
    assert_eq!(m(f, "worst_wait_ns"), 61_000_000);
    let entitled = m(f, "worst_wait_entitled_ns");
    assert!(
        entitled <= 61_000_000,
        "entitled to {entitled} ns of a 61 ms wait: {}",
        f.title
    );
    // and the wait itself is not certain: the task was on CPU 1 by then, unrecorded
    assert_eq!(f.severity, FindingSeverity::Low, "{}", f.title);
    assert!(
        f.title
            .contains("a migration record shows it on CPU 1 meanwhile"),
        "{}",
        f.title
    );
}

/// Autogroup on and recorded: a lone hog of one session (autogroup 5) beside four tasks of
/// another (autogroup 7) on CPU 1. The victim (of the four) waits 0..160 ms while the hog
/// runs 0..120 and a peer 120..160, the two other peers queued all along: by nice weights
/// it was owed 160 / 5 = 32 ms (clearly unfair: over 2 × the 12 ms bound), by autogroup
/// weights 160 × ½ × ¼ = 20 ms (not): the kernel's group fairness, said as cause
/// `autogroup`, never high. Without the tasks' groups (an older recorder, or no
/// context) the same wait is at most medium and says autogroup may explain it.
#[test]
fn autogroup_fairness_explains_a_lone_sessions_hog() {
    let lone = t("hog", 100, 120);
    let (a, b, c) = (
        t("peer", 301, 120),
        t("peer", 302, 120),
        t("peer", 303, 120),
    );
    let mut tr = Trace::new();
    tr.sw(0, 1, idle(), "R", a);
    tr.sw(0, 1, a, "R", b);
    tr.sw(0, 1, b, "R", c);
    tr.sw(0, 1, c, "R", victim());
    tr.sw(0, 1, victim(), "R", lone); // all four peers queued, the hog runs
    tr.sw(120 * MS, 1, lone, "R", a);
    tr.sw(160 * MS, 1, a, "R", victim());
    let task = |pid, group| stallscope_model::TaskContext {
        pid,
        cgroups: vec![stallscope_model::CgroupContext {
            hierarchy: "1:cpu".into(),
            path: "/".into(),
            cpu_shares: Some(1024),
            ..Default::default()
        }],
        autogroup_id: Some(group),
        autogroup_nice: Some(0),
        ..Default::default()
    };
    let mut knobs = std::collections::BTreeMap::new();
    knobs.insert("sched_autogroup_enabled".to_string(), "1".to_string());
    let sys = stallscope_model::SystemContext {
        tasks: vec![
            task(100, 5),
            task(200, 7),
            task(301, 7),
            task(302, 7),
            task(303, 7),
        ],
        sched_knobs: knobs,
        ..Default::default()
    };
    // unfair by nice weights alone (32 ms), not by group weights (20 ms): cause autogroup
    let f = crate::testutil::run_with(ID, &[], &tr, Some(sys.clone()));
    let v = f
        .iter()
        .find(|f| f.tasks.iter().any(|t| t.pid == 200 && t.role == "victim"))
        .expect("the victim's finding");
    assert_eq!(m(v, "worst_wait_entitled_nice_ns"), 32_000_000);
    assert_eq!(m(v, "worst_wait_entitled_ns"), 20_000_000);
    assert_eq!(v.cause.as_ref().map(|c| c.kind.as_str()), Some("autogroup"));
    assert_eq!(v.severity, FindingSeverity::Medium, "{v:#?}");
    assert!(v.hint.starts_with("Autogroup"), "{}", v.hint);
    // the groups not recorded: at most medium, autogroup named
    let mut unknown = sys;
    for t in &mut unknown.tasks {
        t.autogroup_id = None;
    }
    let f = crate::testutil::run_with(ID, &[], &tr, Some(unknown));
    let v = f
        .iter()
        .find(|f| f.tasks.iter().any(|t| t.pid == 200 && t.role == "victim"))
        .expect("the victim's finding");
    assert_eq!(
        v.cause.as_ref().map(|c| c.kind.as_str()),
        Some("not_explained_by_weights")
    );
    assert!(v.severity <= FindingSeverity::Medium, "{v:#?}");
    assert!(v.hint.contains("Autogroup may explain it"), "{}", v.hint);
}

/// Each cause has its own remedy, and none advises what the cause makes pointless: weights
/// and priorities do not help a task whose group spent its quota, nor nice a real-time culprit.
#[test]
fn every_cause_has_its_own_remedy() {
    use super::fair::CauseKind as C;
    use super::remedy;
    let causes = [
        C::HigherClass,
        C::NiceWeight,
        C::CgroupWeight,
        C::Autogroup,
        C::Throttled,
        C::InterruptTime,
        C::Affinity,
        C::NotExplainedByWeights,
        C::ContextNotRecorded,
        C::MissingEvents,
    ];
    let texts: Vec<String> = causes
        .iter()
        .map(|&c| remedy(c, false, 200, Some(100)))
        .collect();
    for (i, a) in texts.iter().enumerate() {
        for b in &texts[i + 1..] {
            assert_ne!(a, b, "two causes share a remedy");
        }
    }
    let quota = remedy(C::Throttled, false, 200, Some(100));
    assert!(
        quota.contains("cpu.max") && quota.contains("cpu.cfs_quota_us"),
        "{quota}"
    );
    assert!(
        !quota.contains("renice") && !quota.contains("chrt"),
        "{quota}"
    );
    assert!(remedy(C::NiceWeight, false, 200, Some(100)).contains("renice -n 0 -p 100"));
    assert!(remedy(C::HigherClass, false, 200, Some(100)).contains("chrt"));
    assert!(remedy(C::CgroupWeight, false, 200, None).contains("cpu.weight"));
    assert!(remedy(C::Affinity, false, 200, None).contains("taskset -pc LIST 200"));
    assert!(remedy(C::InterruptTime, false, 200, None).contains("smp_affinity"));
    let rt = remedy(C::Throttled, true, 200, None);
    assert!(
        rt.contains("sched_rt_runtime_us") && !rt.contains("cpu.max"),
        "{rt}"
    );
}
