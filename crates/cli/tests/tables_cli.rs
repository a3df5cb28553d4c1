//! The Arrow tables (#22 item 2) against the commands that print the same facts: `latency`
//! row for row equals `stallscope latency --format json`, `switches` equals `timehist`,
//! `waits` holds the worst wait of every `runqueue-starvation` finding and is the model's
//! runnable waits row for row, `findings` equals
//! `analyze`'s, `work_items` pairs every `workqueue_execute_start` with its end as the
//! dumped events show, `samples` sums to `stallscope profile`'s self weights;
//! `stallscope tables --to DIR` writes Parquet files that read back with the
//! rows it reports.

mod common;

use std::collections::BTreeMap;

use arrow_array::{
    Array, Int32Array, ListArray, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use common::{col, json, root};
use serde_json::Value;
use stallscope::analyze::AnalyzeOptions;
use stallscope::tables::{tables, Table};

fn build(file: &str, table: Table) -> Vec<RecordBatch> {
    build_with(file, table, None)
}

const SCHED: [&str; 3] = [
    "fixtures/sched/starve.perf.data",
    "fixtures/sched/equal.perf.data",
    "fixtures/sched/sched_all.perf.data",
];

#[test]
fn latency_rows_equal_the_latency_command() {
    for file in SCHED {
        let p = root().join(file);
        let want: Value = json(&["latency", "--format", "json", p.to_str().unwrap()]);
        let want = want["tasks"].as_array().unwrap();
        let got = build(file, Table::Latency);
        assert_eq!(got.len(), 1);
        let b = &got[0];
        assert_eq!(b.num_rows(), want.len(), "{file}");
        for (i, w) in want.iter().enumerate() {
            assert_eq!(
                col::<StringArray>(b, "comm").value(i),
                w["comm"],
                "{file} row {i}"
            );
            let pid = col::<Int32Array>(b, "pid");
            assert_eq!(
                (!pid.is_null(i)).then(|| i64::from(pid.value(i))),
                w["pid"].as_i64(),
                "{file} row {i}"
            );
            let pids = col::<ListArray>(b, "pids").value(i);
            let pids = pids.as_any().downcast_ref::<Int32Array>().unwrap();
            let pids: Vec<i64> = pids.values().iter().map(|&p| i64::from(p)).collect();
            let want_pids: Vec<i64> = w["pids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_i64().unwrap())
                .collect();
            assert_eq!(pids, want_pids, "{file} row {i}");
            for c in [
                "runtime_ns",
                "switches",
                "avg_delay_ns",
                "max_delay_ns",
                "max_delay_start_ns",
                "max_delay_end_ns",
            ] {
                assert_eq!(
                    Some(col::<UInt64Array>(b, c).value(i)),
                    w[c].as_u64(),
                    "{file} row {i} {c}"
                );
            }
        }
    }
}

#[test]
fn switches_equal_timehist_rows() {
    for file in SCHED {
        let p = root().join(file);
        let th: Value = json(&["timehist", "--format", "json", p.to_str().unwrap()]);
        let want = th["rows"].as_array().unwrap();
        let got = build(file, Table::Switches);
        let mut i = 0;
        for b in &got {
            for r in 0..b.num_rows() {
                let w = &want[i];
                assert_eq!(
                    Some(col::<UInt64Array>(b, "ts_ns").value(r)),
                    w["ts_ns"].as_u64()
                );
                assert_eq!(
                    Some(u64::from(col::<UInt32Array>(b, "cpu").value(r))),
                    w["cpu"].as_u64()
                );
                assert_eq!(
                    Some(i64::from(col::<Int32Array>(b, "tid").value(r))),
                    w["tid"].as_i64()
                );
                assert_eq!(col::<StringArray>(b, "comm").value(r), w["comm"]);
                for c in ["wait_ns", "sch_delay_ns", "run_ns"] {
                    assert_eq!(
                        Some(col::<UInt64Array>(b, c).value(r)),
                        w[c].as_u64(),
                        "{file} row {i} {c}"
                    );
                }
                assert_eq!(
                    col::<StringArray>(b, "prev_state").value(r),
                    w["prev_state"]
                );
                i += 1;
            }
        }
        assert_eq!(i, want.len(), "{file}: every timehist row");
    }
}

#[test]
fn waits_hold_the_worst_wait_of_every_starvation_finding() {
    let mut checked = 0;
    for file in SCHED {
        let p = root().join(file);
        let report: Value = json(&[
            "analyze",
            "--select",
            "runqueue-starvation",
            "--format",
            "json",
            p.to_str().unwrap(),
        ]);
        let waits = build(file, Table::Waits);
        let mut by_task: BTreeMap<i32, Vec<(u64, u64)>> = BTreeMap::new();
        for b in &waits {
            for r in 0..b.num_rows() {
                by_task
                    .entry(col::<Int32Array>(b, "tid").value(r))
                    .or_default()
                    .push((
                        col::<UInt64Array>(b, "start_ns").value(r),
                        col::<UInt64Array>(b, "end_ns").value(r),
                    ));
                assert_eq!(
                    col::<UInt64Array>(b, "wait_ns").value(r),
                    col::<UInt64Array>(b, "end_ns").value(r)
                        - col::<UInt64Array>(b, "start_ns").value(r)
                );
            }
        }
        for f in report["findings"].as_array().unwrap() {
            let m = &f["measures"];
            if m["worst_wait_censored"].as_i64() != Some(0) {
                continue; // still waiting at the trace's end: no row ends it
            }
            let victim = f["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["role"] == "victim")
                .unwrap()["pid"]
                .as_i64()
                .unwrap() as i32;
            let want = (
                m["worst_wait_start_ns"].as_u64().unwrap(),
                m["worst_wait_end_ns"].as_u64().unwrap(),
            );
            assert!(
                by_task.get(&victim).is_some_and(|w| w.contains(&want)),
                "{file}: the wait {want:?} of {victim} is not a row"
            );
            checked += 1;
        }
    }
    assert!(checked >= 2, "{checked}");
}

#[test]
fn findings_rows_are_analyzes_findings() {
    let file = "fixtures/chain/chain.perf.data.xz";
    let p = root().join(file);
    let report: Value = json(&["analyze", "--format", "json", p.to_str().unwrap()]);
    let want = report["findings"].as_array().unwrap();
    let got = build(file, Table::Findings);
    let b = &got[0];
    assert_eq!(b.num_rows(), want.len());
    for (i, w) in want.iter().enumerate() {
        assert_eq!(col::<StringArray>(b, "detector").value(i), w["detector"]);
        assert_eq!(col::<StringArray>(b, "severity").value(i), w["severity"]);
        assert_eq!(col::<StringArray>(b, "title").value(i), w["title"]);
        let measures: Value =
            serde_json::from_str(col::<StringArray>(b, "measures_json").value(i)).unwrap();
        assert_eq!(measures, w["measures"]);
    }
}

#[test]
fn parquet_files_read_back_with_the_rows_reported() {
    let dir = std::env::temp_dir().join(format!("stallscope-tables-{}", std::process::id()));
    let p = root().join("fixtures/chain/chain.perf.data.xz");
    let summary: Value = json(&[
        "tables",
        "--format",
        "json",
        "--tables",
        "switches,waits,latency,requests,work_items,samples,findings,events",
        "--to",
        dir.to_str().unwrap(),
        p.to_str().unwrap(),
    ]);
    let tables = summary["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 8);
    for t in tables {
        let file = std::fs::File::open(t["file"].as_str().unwrap()).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(Some(rows as u64), t["rows"].as_u64(), "{t}");
        if t["table"] != "latency" && t["table"] != "findings" {
            assert!(rows > 0, "{t}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn requests_are_iolats_requests_and_flushes() {
    // one row per completed request or flush sequence, from the same BlockTracker iolat runs
    let file = "fixtures/chain/chain.perf.data.xz";
    let p = root().join(file);
    let iolat: Value = json(&["iolat", "--format", "json", p.to_str().unwrap()]);
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    for b in build(file, Table::Requests) {
        for r in 0..b.num_rows() {
            *kinds
                .entry(col::<StringArray>(&b, "kind").value(r).to_string())
                .or_default() += 1;
        }
    }
    assert_eq!(
        kinds.get("data").copied(),
        iolat["counts"]["requests"].as_u64()
    );
    assert_eq!(
        kinds.get("flush").copied(),
        iolat["counts"]["flushes"].as_u64()
    );
}

fn build_with(file: &str, table: Table, kallsyms: Option<&str>) -> Vec<RecordBatch> {
    let path = root().join(file);
    let mut options = AnalyzeOptions::new(vec![path.to_str().unwrap().to_string()]);
    options.kallsyms = kallsyms.map(|k| root().join(k).to_str().unwrap().to_string());
    let mut out = Vec::new();
    tables(&options, &[table], |_, b| {
        out.push(b);
        Ok(())
    })
    .unwrap();
    for b in &out {
        assert_eq!(b.schema(), table.schema(), "{}", table.name());
    }
    out
}

#[test]
fn work_items_pair_every_execute_start_with_its_end() {
    // the pairing done here from `stallscope dump` lines, independently: per worker, an
    // execute_start opens an item and the next execute_end of the same work struct ends it
    for (file, kallsyms) in [
        ("fixtures/chain/chain.perf.data.xz", None),
        (
            "fixtures/chain/tracedat.trace.dat.xz",
            Some("fixtures/chain/tracedat.kallsyms.txt"),
        ),
    ] {
        let p = root().join(file);
        let dump = common::run(&["dump", "--format", "json", p.to_str().unwrap()]);
        assert!(dump.status.success());
        let mut open: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
        let mut want: Vec<(i64, u64, u64, u64)> = Vec::new(); // worker, work, start, end
        let mut starts = 0;
        for line in String::from_utf8_lossy(&dump.stdout).lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            let ev = v["event"].as_str().unwrap_or("");
            let (pid, ts) = (v["pid"].as_i64().unwrap(), v["ts_ns"].as_u64().unwrap());
            let work = v["fields"]["work"].as_u64().unwrap_or(0);
            match ev {
                "workqueue_execute_start" => {
                    starts += 1;
                    open.insert(pid, (work, ts));
                }
                "workqueue_execute_end" => {
                    if let Some((w, start)) = open.get(&pid).copied() {
                        if w == work {
                            want.push((pid, work, start, ts));
                            open.remove(&pid);
                        }
                    }
                }
                _ => {}
            }
        }
        assert!(!want.is_empty(), "{file}");
        let got = build_with(file, Table::WorkItems, kallsyms);
        let mut rows = 0;
        let mut ended: Vec<(i64, u64, u64, u64)> = Vec::new();
        let mut named = 0;
        for b in &got {
            for r in 0..b.num_rows() {
                rows += 1;
                let row = (
                    i64::from(col::<Int32Array>(b, "worker_tid").value(r)),
                    col::<UInt64Array>(b, "work").value(r),
                    col::<UInt64Array>(b, "start_ns").value(r),
                    col::<UInt64Array>(b, "end_ns").value(r),
                );
                assert_eq!(col::<UInt64Array>(b, "duration_ns").value(r), row.3 - row.2);
                assert!(col::<UInt64Array>(b, "cpu_ns").value(r) <= row.3 - row.2);
                if col::<StringArray>(b, "ended").value(r) == "end" {
                    ended.push(row);
                }
                if !col::<StringArray>(b, "function").value(r).starts_with("0x") {
                    named += 1;
                }
            }
        }
        assert_eq!(rows, starts, "{file}: one row per execute_start");
        ended.sort();
        want.sort();
        assert_eq!(ended, want, "{file}: ended items as the events pair them");
        if kallsyms.is_some() {
            assert!(
                named * 2 > rows,
                "{file}: functions named from --kallsyms ({named}/{rows})"
            );
        }
    }
}

#[test]
fn samples_sum_to_the_profile_commands_self_weights() {
    for file in [
        "fixtures/profile/perf_cpu_fp/perf_cpu_fp.data",
        "fixtures/profile/perf_cpu_fp/script_cpu_fp.txt",
        "fixtures/sched/sched_callchain.perf.data",
    ] {
        let p = root().join(file);
        let want: Value = json(&[
            "profile",
            "--format",
            "json",
            "--top",
            "0",
            p.to_str().unwrap(),
        ]);
        let got = build(file, Table::Samples);
        let rows: usize = got.iter().map(|b| b.num_rows()).sum();
        assert_eq!(Some(rows as u64), want["stacks"].as_u64(), "{file}: stacks");
        let mut by_leaf: BTreeMap<String, u64> = BTreeMap::new();
        let mut total = 0;
        for b in &got {
            for r in 0..b.num_rows() {
                let w = col::<UInt64Array>(b, "weight").value(r);
                total += w;
                let leaf = col::<StringArray>(b, "leaf");
                let stack = col::<ListArray>(b, "stack").value(r);
                let stack = stack.as_any().downcast_ref::<StringArray>().unwrap();
                if leaf.is_null(r) {
                    assert_eq!(stack.len(), 0, "{file}: a null leaf is an empty stack");
                    continue;
                }
                *by_leaf.entry(leaf.value(r).to_string()).or_default() += w;
                assert_eq!(stack.value(0), leaf.value(r));
            }
        }
        assert_eq!(Some(total), want["total_weight"].as_u64(), "{file}: total");
        for f in want["functions"].as_array().unwrap() {
            let name = f["name"].as_str().unwrap();
            assert_eq!(
                by_leaf.get(name).copied().unwrap_or(0),
                f["self_weight"].as_u64().unwrap(),
                "{file}: self weight of {name}"
            );
        }
    }
    // a scheduler trace without samples: no rows, no error
    assert!(build("fixtures/sched/starve.perf.data", Table::Samples).is_empty());
}

#[test]
fn event_tables_of_a_profile_alone_are_refused_and_its_own_tables_written() {
    // A folded profile has no events: its event tables are an error naming what the file
    // is (exit 2), never empty files; its samples and findings are written as asked.
    let file = root().join("fixtures/detectors/lock-spinning/xfs-shared.folded.xz");
    let out_dir = std::env::temp_dir().join(format!("ss-tables-prof-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let run = |tables: &str| {
        common::run(&[
            "tables",
            "--tables",
            tables,
            file.to_str().unwrap(),
            "--to",
            out_dir.to_str().unwrap(),
        ])
    };
    let refused = run("switches");
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("found a CPU profile"), "{err}");
    let ok = run("samples,findings");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let mut rows = 0;
    tables(
        &AnalyzeOptions::new(vec![file.display().to_string()]),
        &[Table::Findings],
        |_, b| {
            rows += b.num_rows();
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(rows, 1, "the rwsem finding");
}

#[test]
fn waits_are_the_models_waits() {
    // the `waits` table is a view of the analysis' one model: row for row the runnable
    // waits its intervals hold (same task, start, end, and the CPU the task ran on), read
    // here through the library's model apart
    use stallscope::timeline::{Interval, Model, Timeline, WakeupSelector};
    for file in SCHED.iter().chain(&["fixtures/chain/chain.perf.data.xz"]) {
        let mut inputs = common::open_fixture(file);
        let rule = WakeupSelector::for_inputs(inputs.metas().iter().copied());
        let mut model = Model::new(Timeline::new(rule));
        let mut want: Vec<(i32, u64, u64, Option<u32>)> = Vec::new();
        while let Some(ev) = inputs.next_event().unwrap() {
            let mut keep = |i: Interval| {
                if let Interval::Wait {
                    tid,
                    start,
                    end,
                    ran_on,
                    ..
                } = i
                {
                    want.push((tid, start, end, ran_on));
                }
            };
            model.process(&ev, &mut keep, &mut |_| {});
        }
        let mut got = Vec::new();
        for b in build(file, Table::Waits) {
            let (tid, start) = (
                col::<Int32Array>(&b, "tid"),
                col::<UInt64Array>(&b, "start_ns"),
            );
            let (end, cpu) = (
                col::<UInt64Array>(&b, "end_ns"),
                col::<UInt32Array>(&b, "cpu"),
            );
            for i in 0..b.num_rows() {
                let cpu = (!cpu.is_null(i)).then(|| cpu.value(i));
                got.push((tid.value(i), start.value(i), end.value(i), cpu));
            }
        }
        assert!(want.len() > 100, "{file}: {} waits", want.len());
        assert_eq!(got, want, "{file}");
    }
}

/// Issue #30: `tables --to DIR` on an input that fails leaves the tables an earlier run
/// wrote there as they were, and no temporary file (before: each was cut to its 4-byte
/// Parquet magic).
#[test]
fn a_failing_run_keeps_the_previous_tables() {
    let dir = std::env::temp_dir().join(format!("stallscope-tables-keep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let good = root().join("fixtures/sched/starve.perf.data");
    let args = |input: &str| {
        vec![
            "tables".to_string(),
            "--tables".into(),
            "switches,waits".into(),
            "--to".into(),
            dir.to_str().unwrap().into(),
            input.into(),
        ]
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
        common::run(&a)
    };
    assert!(run(args(good.to_str().unwrap())).status.success());
    let listing = || {
        // name, size and a digest of the bytes (a short message when they differ)
        let mut v: Vec<(String, usize, u64)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| {
                use std::hash::{Hash, Hasher};
                let p = e.unwrap().path();
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                let bytes = std::fs::read(&p).unwrap();
                let mut h = std::collections::hash_map::DefaultHasher::new();
                bytes.hash(&mut h);
                (name, bytes.len(), h.finish())
            })
            .collect();
        v.sort();
        v
    };
    let before = listing();
    assert_eq!(before.len(), 2);
    assert!(before.iter().all(|(_, len, _)| *len > 100));
    let bad = dir.join("not-a-trace.txt");
    std::fs::write(&bad, "this is not a trace\nnor is this\n").unwrap();
    let o = run(args(bad.to_str().unwrap()));
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::remove_file(&bad).unwrap();
    assert_eq!(listing(), before);
    let _ = std::fs::remove_dir_all(&dir);
}
