//! Idle CPU next to a waiting task, ended by the wait ending or by the idle CPU waking.

use crate::testutil::{idle, run, t, Trace, MS};
use stallscope_model::FindingSeverity;

const ID: &str = "idle-while-runnable";

#[test]
fn idle_cpu_during_a_wait_is_found() {
    let (h, v) = (t("hog", 100, 120), t("victim", 200, 120));
    let mut tr = Trace::new();
    tr.sw(0, 0, idle(), "R", h);
    tr.sw(0, 1, v, "S", idle());
    tr.wake(MS, 0, 100, v, 0);
    tr.sw(11 * MS, 0, h, "S", v);
    let f = run(ID, &[], &tr);
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(f.measures["worst_overlap_ns"], 10_000_000);
    assert_eq!(f.measures["idle_cpu"], 1);
    assert_eq!(f.measures["waiting_cpu"], 0);
    assert_eq!(f.cpus, vec![0, 1]);
    assert_eq!(f.tasks[0].pid, 200);
    assert_eq!(f.severity, FindingSeverity::Low);
    assert!(f.title.contains("affinity unknown"), "{}", f.title);
}

#[test]
fn idle_cpu_waking_up_ends_the_overlap() {
    let (h, v, x) = (t("hog", 100, 120), t("victim", 200, 120), t("x", 300, 120));
    let mut tr = Trace::new();
    tr.sw(0, 0, idle(), "R", h);
    tr.sw(0, 1, v, "S", idle());
    tr.wake(MS, 0, 100, v, 0);
    tr.sw(8 * MS, 1, idle(), "R", x);
    tr.sw(11 * MS, 0, h, "S", v);
    let f = run(ID, &[], &tr);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].measures["worst_overlap_ns"], 7_000_000);
    // a shorter overlap than the threshold is nothing
    assert!(run(ID, &[("threshold_ns", "8ms")], &tr).is_empty());
}

#[test]
fn wait_on_the_idle_cpu_itself_is_not_an_incident() {
    let (h, v) = (t("hog", 100, 120), t("victim", 200, 120));
    let mut tr = Trace::new();
    tr.sw(0, 0, idle(), "R", h);
    tr.wake(MS, 0, 100, v, 1);
    tr.sw(11 * MS, 1, idle(), "R", v);
    assert!(run(ID, &[], &tr).is_empty());
}

fn context(allowed: &str) -> stallscope_model::SystemContext {
    stallscope_model::SystemContext {
        tasks: vec![stallscope_model::TaskContext {
            pid: 200,
            tgid: 200,
            comm: "victim".into(),
            cpus_allowed: Some(allowed.into()),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn recorded_affinity_suppresses_or_raises_the_finding() {
    let (h, v) = (t("hog", 100, 120), t("victim", 200, 120));
    let mut tr = Trace::new();
    tr.sw(0, 0, idle(), "R", h);
    tr.sw(0, 1, v, "S", idle());
    tr.wake(MS, 0, 100, v, 0);
    tr.sw(31 * MS, 0, h, "S", v);
    assert_eq!(run(ID, &[], &tr)[0].severity, FindingSeverity::Medium);
    assert!(crate::testutil::run_with(ID, &[], &tr, Some(context("0"))).is_empty());
    let f = crate::testutil::run_with(ID, &[], &tr, Some(context("0-1")));
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].severity, FindingSeverity::High);
    assert!(
        f[0].title.contains("recorded affinity allows"),
        "{}",
        f[0].title
    );
}

#[test]
fn a_wait_whose_own_cpu_idles_is_suspect_and_ignored() {
    let (h, v) = (t("hog", 100, 120), t("victim", 200, 120));
    let mut tr = Trace::new();
    tr.sw(0, 0, idle(), "R", h);
    tr.sw(0, 1, v, "S", idle());
    tr.wake(MS, 0, 100, v, 0);
    tr.sw(2 * MS, 0, h, "S", idle()); // CPU 0 idles although the victim is queued there
    tr.sw(11 * MS, 0, idle(), "R", v);
    assert!(run(ID, &[], &tr).is_empty());
}

#[test]
fn a_record_in_a_task_context_means_the_cpu_is_not_idle() {
    let (h, v, x) = (t("hog", 100, 120), t("victim", 200, 120), t("x", 300, 120));
    let mut tr = Trace::new();
    tr.sw(0, 0, idle(), "R", h);
    tr.sw(0, 1, x, "S", idle());
    tr.wake(MS, 0, 100, v, 0);
    // CPU 1 runs x again although its switch-in was not recorded
    tr.wake(2 * MS, 1, 300, t("z", 400, 120), 1);
    tr.sw(11 * MS, 0, h, "S", v);
    assert!(run(ID, &[], &tr).is_empty());
}

#[test]
fn waiting_lookups_agree_across_the_short_list_limit() {
    use super::{Waiter, Waiting, SHORT_LIST};
    let mut tr = Trace::new();
    for pid in 1..=40 {
        tr.wake(pid as u64, 0, 0, t("w", pid, 120), 0);
    }
    let mut w = Waiting::default();
    let mut model: Vec<i32> = Vec::new();
    let check = |w: &Waiting, model: &[i32]| {
        for pid in 1..=40 {
            let i = w.index(pid);
            assert_eq!(i.is_some(), model.contains(&pid), "pid {pid}");
            if let Some(i) = i {
                assert_eq!(w.list[i].tid, pid);
                assert_eq!(w.start(pid).map(|k| k.ts), Some(pid as u64));
            }
            match i {
                Some(i) if w.list.len() > SHORT_LIST => {
                    assert_eq!(w.slot.get(pid), Some(&(i as u32 + 1)), "slot kept")
                }
                _ => assert!(
                    w.slot.get(pid).is_none_or(|&s| s == 0),
                    "pid {pid}: no slot when not waiting or in a short list"
                ),
            }
        }
    };
    // grow past the limit, shrink below it, grow past it again
    let waiter = |pid, ev: &stallscope_model::Event| Waiter {
        tid: pid,
        since: ev.ts,
        cpu: 0,
        own_cpu_idled: false,
    };
    for (pid, ev) in (1..=30).zip(&tr.events) {
        w.insert(waiter(pid, ev), ev);
        model.push(pid);
        check(&w, &model);
    }
    assert!(w.list.len() > SHORT_LIST);
    for pid in (1..=30).filter(|p| p % 5 != 0) {
        w.remove(pid);
        model.retain(|&p| p != pid);
        check(&w, &model);
    }
    assert!(w.list.len() < SHORT_LIST, "shrunk below the limit");
    for (pid, ev) in (31..=40).zip(&tr.events[30..]) {
        w.insert(waiter(pid, ev), ev);
        model.push(pid);
        check(&w, &model);
    }
}

/// The victim (pid 200) runs on CPU 0 only, `n` times, each time waiting 10 ms behind the hog
/// while CPU 1 idles.
fn always_on_cpu0(n: u64) -> Trace {
    let (h, v) = (t("hog", 100, 120), t("victim", 200, 120));
    let mut tr = Trace::new();
    tr.sw(0, 0, idle(), "R", h);
    tr.sw(0, 1, t("x", 300, 120), "S", idle());
    for k in 0..n {
        let base = k * 20 * MS;
        tr.wake(base + MS, 0, 100, v, 0);
        tr.sw(base + 11 * MS, 0, h, "R", v);
        tr.sw(base + 12 * MS, 0, v, "S", h);
    }
    tr
}

#[test]
fn a_task_that_never_leaves_its_cpu_is_probably_pinned() {
    let f = run(ID, &[], &always_on_cpu0(30));
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(f.measures["incidents"], 30);
    assert_eq!(f.severity, FindingSeverity::Low);
    assert!(
        f.title
            .contains("it ran only on CPU 0 in all its 30 runs: probably pinned"),
        "{}",
        f.title
    );
    assert_eq!(f.cause.as_ref().map(|c| c.kind.as_str()), Some("affinity"));
    // with fewer runs than pinned_min_runs nothing is inferred: medium, affinity unknown
    let f = run(ID, &[("pinned_min_runs", "31")], &always_on_cpu0(30));
    assert_eq!(f[0].severity, FindingSeverity::Medium);
    assert!(f[0].title.contains("affinity unknown"), "{}", f[0].title);
}

#[test]
fn a_taskset_in_the_recorded_command_line_is_known_affinity() {
    let meta = |cmd: &str| stallscope_model::TraceMeta {
        cmdline: Some(cmd.into()),
        ..Default::default()
    };
    // the victim is the program pinned to CPU 0: the idle CPU 1 is not allowed to it
    let tr = always_on_cpu0(30);
    let f = crate::testutil::run_meta(
        ID,
        &[],
        &tr,
        meta("/usr/bin/perf sched record -o x.data -- taskset -c 0 victim -i 1000"),
    );
    assert!(f.is_empty(), "{f:#?}");
    // a command line pinning another program says nothing about the victim
    let f = crate::testutil::run_meta(ID, &[], &tr, meta("perf record -- taskset -c 0 other"));
    assert_eq!(f.len(), 1);
    // a pin that allows the idle CPU makes it a balancing failure
    let f = crate::testutil::run_meta(ID, &[], &tr, meta("perf record -- taskset 0x3 victim"));
    assert_eq!(f[0].severity, FindingSeverity::High);
    assert_eq!(
        f[0].cause.as_ref().map(|c| c.kind.as_str()),
        Some("balancing")
    );
}

#[test]
fn taskset_command_lines() {
    use super::taskset_pin;
    let pin = |c: &str| taskset_pin(c);
    assert_eq!(
        pin("/usr/bin/perf sched record -o a -- taskset -c 1 cyclictest --policy=other -t1"),
        Some(("cyclictest".into(), "1".into()))
    );
    assert_eq!(
        pin("perf record -- /usr/bin/taskset --cpu-list 0-2,5 /opt/x/bin/a_very_long_program_name"),
        Some(("a_very_long_pro".into(), "0-2,5".into()))
    );
    assert_eq!(
        pin("perf record -- taskset 6 prog"),
        Some(("prog".into(), "1,2".into()))
    );
    assert_eq!(
        pin("perf record -- taskset -a -c 3 prog"),
        Some(("prog".into(), "3".into()))
    );
    assert_eq!(pin("perf record -- taskset -p 1 1234"), None);
    assert_eq!(pin("perf record -- sleep 1"), None);
    assert_eq!(pin("perf record -- taskset zz prog"), None);
}
