//! `stallscope sleeps` (issue #21's wakeup causality): every sleep that ends and who ended
//! it. Its lengths are `perf sched timehist`'s `wait time − sch delay` of the run after the
//! sleep (our timehist equals perf's: oracle_perf_sched.rs), on the sched fixtures.

mod common;

use std::collections::HashMap;

use common::{json, root};
use serde_json::Value;

#[test]
fn sleeps_equal_timehist_wait_minus_sch_delay() {
    // A sleep runs from a switch-out in S/D to the first wakeup: perf sched timehist's
    // `wait time − sch delay` of the run that follows it.
    let path = root().join("fixtures/sched/starve.perf.data");
    let p = path.to_str().unwrap();
    let th: Value = json(&["timehist", "--format", "json", p]);
    let sl: Value = json(&["sleeps", "--format", "json", p]);
    let sleeps: HashMap<(i64, u64), u64> = sl["sleeps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let (a, b) = (
                s["start_ns"].as_u64().unwrap(),
                s["end_ns"].as_u64().unwrap(),
            );
            ((s["pid"].as_i64().unwrap(), a), b - a)
        })
        .collect();
    let mut last: HashMap<i64, (u64, String)> = HashMap::new();
    let mut checked = 0;
    for r in th["rows"].as_array().unwrap() {
        let tid = r["tid"].as_i64().unwrap();
        if tid == 0 {
            continue;
        }
        if let Some((out_ts, state)) = last.get(&tid) {
            let slept = !state.starts_with('R');
            let wait = r["wait_ns"].as_u64().unwrap();
            let delay = r["sch_delay_ns"].as_u64().unwrap();
            if slept && wait > 0 && delay > 0 {
                let ours = sleeps.get(&(tid, *out_ts)).copied();
                assert_eq!(ours, Some(wait - delay), "tid {tid} sleep from {out_ts}");
                checked += 1;
            }
        }
        last.insert(
            tid,
            (
                r["ts_ns"].as_u64().unwrap(),
                r["prev_state"].as_str().unwrap().to_string(),
            ),
        );
    }
    assert!(checked > 100, "{checked} sleeps checked");
    // no irq events in this capture: a task's wakeup may have been an interrupt's
    let contexts: Vec<&str> = sl["sleeps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["waker"]["context"].as_str())
        .collect();
    assert!(contexts.iter().all(|c| *c != "task"), "{contexts:?}");
    // the text table names each context as the JSON does (issue #28: it printed
    // `taskorinterrupt`, a name found nowhere else), and `--help` says what they mean
    let text = String::from_utf8(common::run(&["sleeps", p]).stdout).unwrap();
    let row = text.lines().nth(1).expect("a sleep row");
    assert!(row.contains(contexts[0]), "{row} vs {}", contexts[0]);
    assert!(!text.contains("taskorinterrupt"), "{text}");
    let help = String::from_utf8(common::run(&["sleeps", "--help"]).stdout).unwrap();
    for c in ["task", "interrupt", "softirq", "idle", "task_or_interrupt"] {
        assert!(help.contains(c), "--help lacks {c}: {help}");
    }
}
