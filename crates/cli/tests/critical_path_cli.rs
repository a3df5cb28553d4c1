//! `stallscope critical-path` (issue #21): one task's time over a window accounts for 100 %
//! of it, and its running / runnable totals equal `timehist`'s run time and sch delay of the
//! task's runs in the window (our timehist equals perf's: oracle_perf_sched.rs), on the
//! sched fixtures.

mod common;

use common::{json, root, run};
use serde_json::Value;

fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// Every task with at least `min_rows` timehist rows (not idle).
fn busy_tasks(rows: &[Value], min_rows: usize) -> Vec<i64> {
    let mut count: std::collections::BTreeMap<i64, usize> = Default::default();
    for r in rows {
        *count.entry(r["tid"].as_i64().unwrap()).or_default() += 1;
    }
    count
        .into_iter()
        .filter(|&(t, n)| t != 0 && n >= min_rows)
        .map(|(t, _)| t)
        .collect()
}

#[test]
fn totals_cover_the_window_and_equal_timehist() {
    let mut checked = 0;
    for file in ["starve.perf.data", "equal.perf.data", "sched_all.perf.data"] {
        let path = root().join("fixtures/sched").join(file);
        let p = path.to_str().unwrap();
        let th: Value = json(&["timehist", "--format", "json", p]);
        let rows = th["rows"].as_array().unwrap();
        for tid in busy_tasks(rows, 20) {
            let mine: Vec<&Value> = rows.iter().filter(|r| r["tid"] == tid).collect();
            let u = |r: &Value, k: &str| r[k].as_u64().unwrap();
            // window: from its first switch-out to its last one, so that every run after the
            // first lies inside, with the time before it
            let (a, b) = (u(mine[0], "ts_ns"), u(mine[mine.len() - 1], "ts_ns"));
            if b <= a {
                continue;
            }
            let window = format!("{}..{}", secs(a), secs(b));
            let tid_s = tid.to_string();
            let cp: Value = json(&[
                "critical-path",
                "--format",
                "json",
                "--pid",
                &tid_s,
                "--time",
                &window,
                p,
            ]);
            let t = &cp["totals"];
            let total: u64 = ["running_ns", "runnable_ns", "sleeping_ns", "unknown_ns"]
                .iter()
                .map(|k| t[k].as_u64().unwrap())
                .sum();
            assert_eq!(
                total,
                b - a,
                "{file} {tid}: the shares add up to the window"
            );
            let intervals = cp["intervals"].as_array().unwrap();
            let covered: u64 = intervals
                .iter()
                .map(|i| u(i, "end_ns") - u(i, "start_ns"))
                .sum();
            assert_eq!(covered, b - a, "{file} {tid}: intervals cover the window");
            let run: u64 = mine[1..].iter().map(|r| u(r, "run_ns")).sum();
            let delay: u64 = mine[1..].iter().map(|r| u(r, "sch_delay_ns")).sum();
            let wait: u64 = mine[1..].iter().map(|r| u(r, "wait_ns")).sum();
            assert_eq!(t["running_ns"].as_u64(), Some(run), "{file} {tid} running");
            assert_eq!(
                t["runnable_ns"].as_u64(),
                Some(delay),
                "{file} {tid} runnable"
            );
            // sleeping is the rest of timehist's wait time; what timehist leaves out (a
            // switch-in with no matching switch-out: dropped events) is unknown
            assert_eq!(
                t["sleeping_ns"].as_u64().unwrap() + t["unknown_ns"].as_u64().unwrap(),
                (b - a) - run - delay,
                "{file} {tid}"
            );
            assert!(
                t["sleeping_ns"].as_u64().unwrap() <= wait - delay,
                "{file} {tid}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 4, "{checked} tasks checked");
}

#[test]
fn the_starved_task_is_runnable_behind_the_hog() {
    // starve: cyclictest at nice 0 shares CPU 1 with a stress-ng hog at nice −20
    let path = root().join("fixtures/sched/starve.perf.data");
    let p = path.to_str().unwrap();
    let th: Value = json(&["timehist", "--format", "json", p]);
    let rows = th["rows"].as_array().unwrap();
    let victim = rows
        .iter()
        .filter(|r| r["comm"].as_str().unwrap().starts_with("cyclictest"))
        .map(|r| r["tid"].as_i64().unwrap())
        .max_by_key(|t| rows.iter().filter(|r| r["tid"] == *t).count())
        .unwrap();
    let hog = rows
        .iter()
        .find(|r| r["comm"].as_str().unwrap().starts_with("stress-ng"))
        .map(|r| r["tid"].clone())
        .unwrap();
    let cp: Value = json(&[
        "critical-path",
        "--format",
        "json",
        "--pid",
        &victim.to_string(),
        p,
    ]);
    let behind = cp["runnable_behind"].as_array().unwrap();
    assert_eq!(behind[0][0], hog, "{behind:?}");
    let runnable = cp["totals"]["runnable_ns"].as_u64().unwrap();
    assert!(
        behind[0][1].as_u64().unwrap() * 10 >= runnable * 9,
        "{behind:?}"
    );
    // text: the summary lines and the table
    let out = run(&["critical-path", "--pid", &victim.to_string(), p]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("runnable") && text.contains("behind: stress-ng"),
        "{text}"
    );
}

#[test]
fn bad_windows_and_unknown_tasks_exit_2_saying_why() {
    let path = root().join("fixtures/sched/starve.perf.data");
    let p = path.to_str().unwrap();
    let th: Value = json(&["timehist", "--format", "json", p]);
    let tid = busy_tasks(th["rows"].as_array().unwrap(), 20)[0].to_string();
    for (args, want) in [
        (vec!["--pid", "999999"], "never ran"),
        (vec!["--pid", &tid, "--time", "5..4"], "expected A..B"),
        // a window before the trace's first event
        (vec!["--pid", &tid, "--time", "1..2"], "is empty"),
        (vec!["--pid", &tid, "--time", "abc"], "expected A..B"),
    ] {
        let mut a = vec!["critical-path"];
        a.extend(args.iter().copied());
        a.push(p);
        let out = run(&a);
        assert_eq!(out.status.code(), Some(2), "{a:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{a:?}: {err}");
    }
}
