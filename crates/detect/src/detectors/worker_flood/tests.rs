//! Synthetic workqueue sequences through the whole engine.

use stallscope_model::FieldValue;

use crate::testutil::{run, t, Trace, MS};

const F: u64 = 0xffff_ffff_8150_0000;

fn fields(work: u64, wq: Option<&str>) -> Vec<(String, FieldValue)> {
    let mut v = vec![
        ("work".to_string(), FieldValue::UInt(work)),
        ("function".to_string(), FieldValue::UInt(F)),
    ];
    if let Some(q) = wq {
        v.push(("workqueue".to_string(), FieldValue::Str(q.into())));
    }
    v
}

/// `n` workers on CPU 0, each executing one item that sleeps: all in flight at once.
fn flood(n: i32, items_per_worker: u64) -> Trace {
    let mut tr = Trace::new();
    let mut ts = 1000;
    for round in 0..items_per_worker {
        for k in 0..n {
            let work = 0x1000 + (round * 1000 + k as u64) * 64;
            tr.generic(
                ts,
                0,
                22,
                "workqueue_queue_work",
                fields(work, Some("dio/loop1")),
            );
            ts += 10;
        }
        for k in 0..n {
            let pid = 100 + k;
            let work = 0x1000 + (round * 1000 + k as u64) * 64;
            tr.generic(ts, 0, pid, "workqueue_execute_start", fields(work, None));
            ts += 10;
            tr.sw(
                ts,
                0,
                t("kworker/0:1", pid, 120),
                "D",
                t("kworker/0:2", pid + 1, 120),
            );
            ts += 10;
        }
        for k in 0..n {
            let pid = 100 + k;
            let work = 0x1000 + (round * 1000 + k as u64) * 64;
            tr.generic(ts, 0, pid, "workqueue_execute_end", fields(work, None));
            ts += 10;
        }
        ts += MS;
    }
    tr
}

#[test]
fn fires_above_four_per_cpu() {
    // One CPU seen: limit 4. 5 workers, 30 items (min_executions 10).
    let f = run("worker-flood", &[("min_executions", "10")], &flood(5, 6));
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(f.measures["workers"], 5);
    assert_eq!(f.measures["peak_executing"], 5);
    assert_eq!(f.measures["executions"], 30);
    assert_eq!(f.measures["queued"], 30);
    assert_eq!(f.measures["sleeps"], 30);
    assert_eq!(f.measures["limit"], 4);
    assert!(f.title.contains("workqueue dio/loop1"), "{}", f.title);
    assert!(
        f.title.starts_with("5 kworkers ran 0xffffffff81500000"),
        "{}",
        f.title
    );
    assert_eq!(f.tasks.len(), 5);
    assert!(f.tasks.iter().all(|t| t.role == "worker"));
    assert!(!f.evidence.is_empty());
}

#[test]
fn quiet_at_the_limit_and_below_min_executions() {
    assert!(run("worker-flood", &[("min_executions", "10")], &flood(4, 6)).is_empty());
    assert!(run("worker-flood", &[], &flood(5, 6)).is_empty()); // 30 < 100 executions
}

#[test]
fn evidence_shows_queue_first_workers_peak_and_a_sleep() {
    let f = run("worker-flood", &[("min_executions", "10")], &flood(5, 6));
    let texts: Vec<&str> = f[0].evidence.iter().map(|e| e.text.as_str()).collect();
    assert!(
        texts.iter().any(|t| t.contains("workqueue_queue_work")),
        "{texts:#?}"
    );
    assert_eq!(
        texts
            .iter()
            .filter(|t| t.contains("workqueue_execute_start"))
            .count(),
        // First execution of workers 100, 101, 102; the peak (5th worker) is another one.
        4,
        "{texts:#?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("sched_switch") && t.contains("prev_state=D")),
        "{texts:#?}"
    );
}

#[test]
fn severity_and_cpu_count_from_system_context() {
    // 5 workers, 1 CPU seen: above 4 × 1 → medium (high needs > 16 × 1).
    let f = run("worker-flood", &[("min_executions", "10")], &flood(5, 6));
    assert_eq!(f[0].severity, stallscope_model::FindingSeverity::Medium);
    let f = run(
        "worker-flood",
        &[("min_executions", "10"), ("high_workers_per_cpu", "4")],
        &flood(5, 6),
    );
    assert_eq!(f[0].severity, stallscope_model::FindingSeverity::High);
    // A recorded CPU count of 2 raises the limit to 8: no finding.
    let system = stallscope_model::SystemContext {
        nr_cpus: Some(2),
        ..Default::default()
    };
    let f = crate::testutil::run_with(
        "worker-flood",
        &[("min_executions", "10")],
        &flood(5, 6),
        Some(system),
    );
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn profile_of_the_workers_is_named_in_the_hint() {
    use stallscope_model::{Comm, Profile, TraceMeta, WeightUnit, WeightedStack};

    let mut p = Profile::new(WeightUnit::Samples);
    let osq = p.intern("osq_lock", Some(true));
    let down = p.intern("down_write", Some(true));
    let fio = p.intern("io_submit_one", Some(true));
    for (pid, comm, frames, weight) in [
        (100, "kworker/0:1", vec![osq, down], 30),
        (101, "kworker/0:2", vec![down], 10),
        (999, "kworker/9:9", vec![fio], 500), // not a worker of the function
        (100, "fio", vec![fio], 500),         // not a kworker name: ignored
    ] {
        p.stacks.push(WeightedStack {
            frames,
            weight,
            comm: Some(Comm::new(comm)),
            pid: Some(pid),
            ..WeightedStack::default()
        });
    }
    let e = crate::registry::find("worker-flood").expect("registered");
    let mut params = crate::Params::defaults(e.info.params);
    params
        .set(e.info.params, "min_executions", "10")
        .expect("param");
    let meta = TraceMeta {
        path: "synthetic.txt".into(),
        ..TraceMeta::default()
    };
    let mut engine = crate::Engine::new(vec![(e.make)(&params)], &[&meta]);
    engine.process_profile(&p);
    for ev in &flood(5, 6).events {
        engine.process(ev);
    }
    let out = engine.finish();
    let f = out
        .outcomes
        .into_iter()
        .next()
        .expect("one")
        .result
        .expect("ran");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].measures["profile_worker_weight"], 40);
    assert_eq!(f[0].measures["profile_top_leaf_permille"], 750);
    assert!(
        f[0].hint
            .contains("mostly in osq_lock 75.0%, down_write 25.0%"),
        "{}",
        f[0].hint
    );
}

#[test]
fn unsymbolized_function_hint_says_how_to_name_it() {
    let f = run("worker-flood", &[("min_executions", "10")], &flood(5, 6));
    assert!(
        f[0].hint
            .contains("grep -i ffffffff81500000 /proc/kallsyms"),
        "{}",
        f[0].hint
    );
}
