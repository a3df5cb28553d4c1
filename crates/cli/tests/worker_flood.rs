//! worker-flood on the real captures in fixtures/detectors/worker-flood/ (see its README):
//!
//! * `analyze --oneline --select worker-flood` on `sparse.dat.xz` names the DIO completion
//!   work; the prewritten control prints nothing (the lines are snapshots in
//!   analyze_snapshots.rs);
//! * oracle: the JSON measures (workers, executions, queued) equal trace-cmd report's counts
//!   of the same files (`*.trace-cmd-counts.txt`, written by the capture script); when
//!   `trace-cmd` and `xz` are installed, those counts are recomputed here from the files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/detectors/worker-flood")
}

fn stallscope(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run stallscope");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn fixture(case: &str) -> String {
    dir()
        .join(format!("{case}.dat.xz"))
        .to_string_lossy()
        .into_owned()
}

/// `execute_start iomap_dio_complete_work 26174` → {("execute_start", "iomap_dio_complete_work"): 26174}
fn peer_counts(case: &str) -> BTreeMap<(String, String), u64> {
    let text = std::fs::read_to_string(dir().join(format!("{case}.trace-cmd-counts.txt")))
        .expect("counts file");
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                [k, f, n] => Some(((k.to_string(), f.to_string()), n.parse().ok()?)),
                _ => None,
            }
        })
        .collect()
}

/// Findings of `analyze --format json` with extra `--set`s: (title, measures).
fn findings(case: &str, sets: &[&str]) -> Vec<(String, BTreeMap<String, i64>)> {
    let mut args = vec!["analyze", "--format", "json", "--select", "worker-flood"];
    for s in sets {
        args.extend(["--set", s]);
    }
    let file = fixture(case);
    args.push(&file);
    let report: serde_json::Value = serde_json::from_str(&stallscope(&args)).expect("json report");
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            let measures = f["measures"]
                .as_object()
                .expect("measures")
                .iter()
                .map(|(k, v)| (k.clone(), v.as_i64().expect("integer")))
                .collect();
            (f["title"].as_str().expect("title").to_string(), measures)
        })
        .collect()
}

#[test]
fn positive_and_healthy() {
    let got = stallscope(&[
        "analyze",
        "--oneline",
        "--select",
        "worker-flood",
        &fixture("sparse"),
    ]);
    assert!(got.contains("iomap_dio_complete_work"), "{got}");
    let healthy = stallscope(&[
        "analyze",
        "--oneline",
        "--select",
        "worker-flood",
        &fixture("prewritten"),
    ]);
    assert_eq!(healthy, "", "the prewritten control must stay quiet");
}

#[test]
fn sparse_finding_agrees_with_trace_cmd() {
    let peer = peer_counts("sparse");
    let key = |k: &str| (k.to_string(), "iomap_dio_complete_work".to_string());
    let f = findings("sparse", &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    let (title, m) = &f[0];
    assert!(
        title.contains("ran iomap_dio_complete_work (workqueue dio/loop1)"),
        "{title}"
    );
    assert_eq!(m["workers"] as u64, peer[&key("workers")]);
    assert_eq!(m["executions"] as u64, peer[&key("execute_start")]);
    assert_eq!(m["queued"] as u64, peer[&key("queue_work")]);
    assert_eq!(m["cpus_online"], 2);
    assert!(m["workers"] > 4 * m["cpus_online"]);
    assert!(m["peak_executing"] > m["cpus_online"] && m["peak_executing"] <= m["workers"]);
    assert!(m["peak_active"] <= m["peak_executing"]);
    assert!(m["sleeps"] > 0, "the conversion work sleeps");
    assert!(m["cpu_ns"] > 0 && m["cpu_ns"] <= m["busy_ns"]);
    assert!(m["latency_p50_ns"] <= m["latency_p99_ns"]);
    assert!(m["latency_p99_ns"] <= m["latency_max_ns"]);
}

#[test]
fn prewritten_counts_agree_with_trace_cmd() {
    // With the limit at 0 every function with ≥ 1000 executions becomes a finding, so its
    // numbers can be compared with the peer's.
    let peer = peer_counts("prewritten");
    let f = findings(
        "prewritten",
        &[
            "worker-flood.workers_per_cpu=0",
            "worker-flood.min_executions=1000",
        ],
    );
    let by_fn: BTreeMap<&str, &BTreeMap<String, i64>> = f
        .iter()
        .filter_map(|(t, m)| Some((t.split(" ran ").nth(1)?.split(' ').next()?, m)))
        .collect();
    let expected: BTreeSet<&str> = peer
        .iter()
        .filter(|((k, _), n)| k == "execute_start" && **n >= 1000)
        .map(|((_, f), _)| f.as_str())
        .collect();
    assert_eq!(by_fn.keys().copied().collect::<BTreeSet<_>>(), expected);
    for (func, m) in &by_fn {
        let n = |k: &str| peer[&(k.to_string(), func.to_string())];
        assert_eq!(m["executions"] as u64, n("execute_start"), "{func}");
        assert_eq!(m["queued"] as u64, n("queue_work"), "{func}");
    }
    let m = by_fn["iomap_dio_complete_work"];
    assert_eq!(m["workers"], 1);
    assert_eq!(
        m["workers"] as u64,
        peer[&("workers".into(), "iomap_dio_complete_work".into())]
    );
    assert_eq!(m["peak_executing"], 1);
    assert_eq!(m["sleeps"], 0);
}

/// Cross-format: the `trace-cmd report` text of sparse.dat gives the same counts (text
/// payloads name the function; timestamps are µs, so CPU time may differ slightly).
fn same_finding_from_text(text: &str) {
    let tmp = std::env::temp_dir().join(format!("stallscope-wf-{}.txt", std::process::id()));
    std::fs::write(&tmp, text).expect("write temp text");
    let path = tmp.to_string_lossy().into_owned();
    let out = stallscope(&[
        "analyze",
        "--format",
        "json",
        "--select",
        "worker-flood",
        &path,
    ]);
    let _ = std::fs::remove_file(&tmp);
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    let from_text = &report["findings"][0]["measures"];
    let (_, from_dat) = &findings("sparse", &[])[0];
    for k in [
        "workers",
        "executions",
        "queued",
        "peak_executing",
        "peak_active",
        "switches",
        "sleeps",
    ] {
        assert_eq!(from_text[k].as_i64(), Some(from_dat[k]), "{k}");
    }
}

/// Recomputes the committed counts with trace-cmd itself (skipped without trace-cmd or xz).
#[test]
fn committed_counts_are_trace_cmds() {
    let have = |tool: &str| {
        Command::new(tool)
            .arg("--help")
            .output()
            .map(|_| true)
            .unwrap_or(false)
    };
    if !have("trace-cmd") || !have("xz") {
        eprintln!("trace-cmd or xz not installed: committed counts not re-checked");
        return;
    }
    for case in ["sparse", "prewritten"] {
        let tmp =
            std::env::temp_dir().join(format!("stallscope-wf-{}-{case}.dat", std::process::id()));
        let raw = Command::new("xz")
            .args(["-dc", &fixture(case)])
            .output()
            .expect("xz");
        assert!(raw.status.success());
        std::fs::write(&tmp, &raw.stdout).expect("write temp trace.dat");
        let out = Command::new("trace-cmd")
            .args(["report", "-i"])
            .arg(&tmp)
            .output()
            .expect("trace-cmd report");
        let _ = std::fs::remove_file(&tmp);
        let text = String::from_utf8_lossy(&out.stdout);
        if case == "sparse" {
            same_finding_from_text(&text);
        }
        let mut starts = 0u64;
        let mut workers = BTreeSet::new();
        for line in text.lines() {
            if line.contains(" workqueue_execute_start: ")
                && line.ends_with("function iomap_dio_complete_work")
            {
                starts += 1;
                workers.insert(line.split_whitespace().next().unwrap_or("").to_string());
            }
        }
        let peer = peer_counts(case);
        let key = |k: &str| (k.to_string(), "iomap_dio_complete_work".to_string());
        assert_eq!(starts, peer[&key("execute_start")], "{case}");
        assert_eq!(workers.len() as u64, peer[&key("workers")], "{case}");
    }
}
