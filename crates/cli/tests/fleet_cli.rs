//! `stallscope fleet` (#22 item 4) against the single-trace commands on the same files: the
//! `findings` dataset holds one row per finding per trace (`stallscope analyze --format
//! json` on that file), `latency` equals `stallscope latency --format json` row for row,
//! `traces` holds every input with its status and worst wait (the latency command's
//! largest maximum delay), a file that is no trace lands in `errors` with `analyze`'s own
//! message while the run goes on, the summary's counts are the dataset's, and a second run
//! replaces the first one's dataset.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arrow_array::{Array, RecordBatch, StringArray, UInt32Array, UInt64Array};
use common::{col, json, root, run};
use serde_json::Value;

fn read_parquet(path: &Path) -> Vec<RecordBatch> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

fn rows(path: &Path) -> usize {
    read_parquet(path).iter().map(|b| b.num_rows()).sum()
}

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stallscope-fleet-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The inputs: sched perf.data captures, two trace.dat captures, a blktrace directory, and
/// a README that is no trace.
fn inputs() -> Vec<String> {
    let r = root();
    vec![
        r.join("fixtures/sched/*.perf.data").display().to_string(),
        r.join("fixtures/detectors/cpu-saturation/*.dat.zst")
            .display()
            .to_string(),
        r.join("fixtures/detectors/dispatch-starvation/deadline")
            .display()
            .to_string(),
        r.join("fixtures/sched/README.md").display().to_string(),
    ]
}

#[test]
fn fleet_dataset_equals_the_single_trace_commands() {
    let out = out_dir("equal");
    let mut args: Vec<String> = vec!["fleet".into(), "--format".into(), "json".into()];
    args.extend(inputs());
    args.extend(["-o".into(), out.display().to_string()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let summary = json(&argv);

    // traces: every input once, sorted by path, the README an error
    let traces = read_parquet(&out.join("traces.parquet"));
    assert_eq!(traces.len(), 1);
    let t = &traces[0];
    let files: Vec<String> = (0..t.num_rows())
        .map(|i| col::<StringArray>(t, "file").value(i).to_string())
        .collect();
    let mut sorted = files.clone();
    sorted.sort();
    assert_eq!(files, sorted);
    assert!(files.len() >= 6, "{files:?}");
    assert_eq!(summary["traces"], files.len());
    let errors = read_parquet(&out.join("errors.parquet"));
    let e = &errors[0];
    assert_eq!(e.num_rows(), 1);
    assert!(col::<StringArray>(e, "file")
        .value(0)
        .ends_with("README.md"));
    let readme = root().join("fixtures/sched/README.md");
    let analyze_err = run(&["analyze", readme.to_str().unwrap()]);
    assert_eq!(analyze_err.status.code(), Some(2));
    let analyze_msg = String::from_utf8_lossy(&analyze_err.stderr);
    assert!(
        analyze_msg.contains(col::<StringArray>(e, "error").value(0)),
        "errors.parquet has analyze's message: {analyze_msg}"
    );
    assert_eq!(summary["failed"], 1);

    let mut findings_total = 0;
    let mut latency_compared = 0;
    for (i, file) in files.iter().enumerate() {
        let id = col::<UInt32Array>(t, "trace_id").value(i);
        assert_eq!(id as usize, i, "trace ids are ranks");
        let status = col::<StringArray>(t, "status").value(i);
        if file.ends_with("README.md") {
            assert_eq!(status, "error");
            assert!(!out.join(format!("findings/part-{id:05}.parquet")).exists());
            continue;
        }
        assert_eq!(status, "ok", "{file}");

        // one row per finding, as analyze reports them
        let report: Value = json(&["analyze", "--format", "json", file]);
        let want = report["findings"].as_array().unwrap();
        let part = out.join(format!("findings/part-{id:05}.parquet"));
        let got = read_parquet(&part);
        let n: usize = got.iter().map(|b| b.num_rows()).sum();
        assert_eq!(n, want.len(), "{file}: findings");
        findings_total += n;
        let mut j = 0;
        for b in &got {
            for r in 0..b.num_rows() {
                assert_eq!(col::<UInt32Array>(b, "trace_id").value(r), id);
                assert_eq!(col::<StringArray>(b, "file").value(r), file);
                assert_eq!(
                    col::<StringArray>(b, "detector").value(r),
                    want[j]["detector"]
                );
                assert_eq!(col::<StringArray>(b, "title").value(r), want[j]["title"]);
                j += 1;
            }
        }
        assert_eq!(
            u64::from(col::<UInt32Array>(t, "findings").value(i)),
            want.len() as u64
        );
        let kernel = report["inputs"][0]["kernel_release"].as_str();
        let kcol = col::<StringArray>(t, "kernel");
        assert_eq!((!kcol.is_null(i)).then(|| kcol.value(i)), kernel, "{file}");

        // latency row for row; the worst wait is its largest maximum delay
        let lat_out = run(&["latency", "--format", "json", file]);
        let part = out.join(format!("latency/part-{id:05}.parquet"));
        let got = read_parquet(&part);
        let worst = col::<UInt64Array>(t, "worst_wait_ns");
        if !lat_out.status.success() {
            // no switches in this trace: no latency rows, no worst wait
            assert_eq!(got.iter().map(|b| b.num_rows()).sum::<usize>(), 0, "{file}");
            assert!(worst.is_null(i), "{file}");
            continue;
        }
        let lat: Value = serde_json::from_slice(&lat_out.stdout).unwrap();
        let want = lat["tasks"].as_array().unwrap();
        let b = &got[0];
        assert_eq!(b.num_rows(), want.len(), "{file}: latency rows");
        for (r, w) in want.iter().enumerate() {
            assert_eq!(col::<StringArray>(b, "comm").value(r), w["comm"]);
            assert_eq!(
                col::<UInt64Array>(b, "max_delay_ns").value(r),
                w["max_delay_ns"].as_u64().unwrap(),
                "{file} row {r}"
            );
        }
        let max = want
            .iter()
            .map(|w| w["max_delay_ns"].as_u64().unwrap())
            .max()
            .unwrap();
        assert_eq!(worst.value(i), max, "{file}: worst wait");
        latency_compared += 1;
    }
    assert!(findings_total > 0);
    assert!(latency_compared >= 6, "{latency_compared} traces compared");
    assert_eq!(summary["findings"], findings_total);
    let mut by_table: BTreeMap<String, u64> = BTreeMap::new();
    for t in summary["tables"].as_array().unwrap() {
        by_table.insert(
            t["table"].as_str().unwrap().into(),
            t["rows"].as_u64().unwrap(),
        );
    }
    for (table, n) in &by_table {
        let mut total = 0;
        for entry in std::fs::read_dir(out.join(table)).unwrap() {
            total += rows(&entry.unwrap().path()) as u64;
        }
        assert_eq!(total, *n, "{table}: the summary counts the dataset's rows");
    }
    assert_eq!(by_table["findings"], findings_total as u64);
    let by_detector: u64 = summary["by_detector"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["findings"].as_u64().unwrap())
        .sum();
    assert_eq!(by_detector, findings_total as u64);
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(saved, summary, "summary.json is what the command printed");

    // a second run over fewer traces replaces the dataset
    let starve = root().join("fixtures/sched/starve.perf.data");
    let again = json(&[
        "fleet",
        "--format",
        "json",
        starve.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--tables",
        "findings",
    ]);
    assert_eq!(again["traces"], 1);
    assert_eq!(std::fs::read_dir(out.join("findings")).unwrap().count(), 1);
    assert!(!out.join("latency/part-00000.parquet").exists());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn fleet_refuses_what_it_cannot_run() {
    let out = out_dir("refuse");
    let r = run(&[
        "fleet",
        "/nonexistent/*.perf.data",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(2));
    let msg = String::from_utf8_lossy(&r.stderr);
    assert!(msg.contains("matches no file"), "{msg}");

    // every trace bad: the dataset says why, and the exit status says nothing was analyzed
    let readme = root().join("fixtures/sched/README.md");
    let r = run(&[
        "fleet",
        readme.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(2));
    let msg = String::from_utf8_lossy(&r.stderr);
    assert!(msg.contains("no trace could be analyzed"), "{msg}");
    assert_eq!(rows(&out.join("errors.parquet")), 1);

    let r = run(&[
        "fleet",
        readme.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--jobs",
        "0",
    ]);
    assert_eq!(r.status.code(), Some(2));
    let r = run(&[
        "fleet",
        readme.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--tables",
        "nope",
    ]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("unknown table"));
    let _ = std::fs::remove_dir_all(&out);
}

/// Runs `fleet DIR -o OUT`, checks that it ran `traces` traces with none failed, and returns
/// the traces' files in id order.
fn fleet_of_directory(dir: &Path, out: &Path, traces: u64) -> Vec<String> {
    let s = json(&[
        "fleet",
        "--format",
        "json",
        dir.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        (s["traces"].as_u64(), s["failed"].as_u64()),
        (Some(traces), Some(0)),
        "{s}"
    );
    let batches = read_parquet(&out.join("traces.parquet"));
    (0..batches[0].num_rows())
        .map(|i| col::<StringArray>(&batches[0], "file").value(i).to_string())
        .collect()
}

#[test]
fn a_directory_stands_for_the_traces_below_it() {
    // files below it (hidden ones left out), a blktrace recording inside it as one trace
    let dir = out_dir("dir-in");
    std::fs::create_dir_all(dir.join("host-a/.cache")).unwrap();
    std::fs::copy(
        root().join("fixtures/sched/starve.perf.data"),
        dir.join("host-a/perf.data"),
    )
    .unwrap();
    std::fs::write(dir.join("host-a/.cache/junk"), b"not a trace").unwrap();
    std::fs::create_dir_all(dir.join("host-b/blk")).unwrap();
    let blk = root().join("fixtures/detectors/dispatch-starvation/deadline");
    for e in std::fs::read_dir(&blk).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join("host-b/blk").join(e.file_name())).unwrap();
    }
    let out = out_dir("dir-out");
    let files = fleet_of_directory(&dir, &out, 2);
    assert!(files[0].ends_with("host-a/perf.data"), "{files:?}");
    assert!(files[1].ends_with("host-b/blk"), "{files:?}");
    // an empty directory is refused before anything runs
    let empty = out_dir("dir-empty");
    std::fs::create_dir_all(&empty).unwrap();
    let r = run(&[
        "fleet",
        empty.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("holds no file"));
    for d in [dir, out, empty] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Issue #30: a blktrace recording's per-CPU files among other traces in one directory are one
/// trace, and the other files stay traces (before: the whole directory was taken for one
/// blktrace recording — every other trace silently left out, "1 traces").
#[test]
fn per_cpu_blktrace_files_among_other_traces_are_one_trace() {
    let dir = out_dir("mixed-in");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (from, to) in [
        ("fixtures/sched/starve.perf.data", "starve.perf.data"),
        (
            "fixtures/detectors/runqueue-starvation/throttled.dat.zst",
            "throttled.dat.zst",
        ),
        ("fixtures/block/loop0/loop0.blktrace.0", "loop0.blktrace.0"),
        ("fixtures/block/loop0/loop0.blktrace.1", "loop0.blktrace.1"),
    ] {
        std::fs::copy(root().join(from), dir.join(to)).unwrap();
    }
    let out = out_dir("mixed-out");
    let files = fleet_of_directory(&dir, &out, 3);
    assert!(files[0].ends_with("loop0.blktrace.0"), "{files:?}");
    assert!(files[1].ends_with("starve.perf.data"), "{files:?}");
    assert!(files[2].ends_with("throttled.dat.zst"), "{files:?}");
    // the blktrace trace (id 0) is the whole recording: blkparse's 19 data requests and 5
    // flushes (iolat_cli.rs), not one CPU's part
    let requests = rows(&out.join("requests/part-00000.parquet"));
    assert_eq!(requests, 24, "{requests} request rows");
    for d in [dir, out] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Issue #30: `traces.parquet` tells a healthy trace from one with lost events and from
/// one with nothing to analyze (before: all three `ok`, `lost_events` nowhere): status
/// `ok` / `degraded` / `empty`, the lost events and the data-quality problems by key as
/// `analyze` counts them, and the summary counts them.
#[test]
fn traces_carry_their_data_quality_and_status() {
    let out = out_dir("quality");
    let files = [
        root().join("fixtures/sched/starve.perf.data"),
        root().join("fixtures/detectors/wakeup-ping-pong/fio-dio.perf.data"),
        root().join("fixtures/nothing/irq-only.dat.zst"),
    ];
    let mut args = vec!["fleet", "--format", "json", "-o", out.to_str().unwrap()];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let summary = json(&args);
    assert_eq!(
        (summary["degraded"].as_u64(), summary["empty"].as_u64()),
        (Some(1), Some(1)),
        "{summary}"
    );
    let t = &read_parquet(&out.join("traces.parquet"))[0];
    // the row of each file (the fleet numbers traces in its own order)
    let row = |f: &Path| -> usize {
        (0..t.num_rows())
            .find(|&i| Path::new(col::<StringArray>(t, "file").value(i)) == f)
            .unwrap_or_else(|| panic!("{f:?} not in traces.parquet"))
    };
    let statuses: Vec<&str> = files
        .iter()
        .map(|f| col::<StringArray>(t, "status").value(row(f)))
        .collect();
    assert_eq!(statuses, ["ok", "degraded", "empty"]);
    for f in &files {
        let i = row(f);
        let report: Value = json(&["analyze", "--format", "json", f.to_str().unwrap()]);
        let dq = report["data_quality"].as_object().unwrap();
        let by_severity = |sev: &str| -> Value {
            dq.iter()
                .filter(|(_, e)| e["severity"] == sev)
                .map(|(k, e)| (k.clone(), e["count"].clone()))
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        let parsed = |column: &str| -> Value {
            serde_json::from_str(col::<StringArray>(t, column).value(i)).unwrap()
        };
        assert_eq!(parsed("quality_errors"), by_severity("error"), "{f:?}");
        assert_eq!(parsed("quality_warnings"), by_severity("warning"), "{f:?}");
        let lost = col::<UInt64Array>(t, "lost_events").value(i);
        assert_eq!(
            Some(lost),
            Some(
                dq.get("lost_events")
                    .map_or(0, |e| e["count"].as_u64().unwrap())
            )
        );
    }
    // perf sched latency's count of the same file: 581 lost events
    assert_eq!(
        col::<UInt64Array>(t, "lost_events").value(row(&files[1])),
        581
    );
}
