//! `stallscope analyze`, `detectors`, `explain`: output contracts.
//!
//! * `--format json` validates against docs/report.schema.json (checked by the small
//!   validator below: type, const, enum, required, properties, additionalProperties, items,
//!   minimum, local `$ref` — the keywords the schema uses; an unknown keyword fails the test
//!   so the validator cannot silently ignore part of the schema).
//! * `--fail-on` exits 1 exactly when a finding of that severity or higher exists.
//! * text output carries the original trace lines of text inputs as evidence.
//! * detectors whose events are missing are listed as skipped with a record command.

use serde_json::Value;

mod common;
use common::{json, report_errors, root, run};

fn path(rel: &str) -> String {
    root().join(rel).to_string_lossy().into_owned()
}

fn assert_valid(v: &Value) {
    let errors = report_errors(v);
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn json_reports_validate_against_the_schema() {
    let mut total = 0;
    for rel in [
        "fixtures/sched/starve.perf.data",
        "fixtures/sched/starve.ftrace.txt",
        "fixtures/sched/equal.perf.data",
        "fixtures/detectors/wakeup-ping-pong/fio-dio.perf.data",
        "fixtures/detectors/idle-while-runnable/pinned.perf.data",
    ] {
        let v = json(&["analyze", "--format", "json", &path(rel)]);
        assert_valid(&v);
        assert_eq!(v["schema"], "stallscope.report/1");
        total += v["findings"].as_array().unwrap().len();
    }
    assert!(total > 0, "the schema was checked against real findings");
}

/// docs/report.schema.json is the schema derived from the report types (`stallscope schema
/// report`), so the documented schema, the Rust types and the Python package's types (which
/// read the same derived schema) cannot drift apart.
#[test]
fn the_documented_schema_is_the_derived_one() {
    let out = run(&["schema", "report"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let derived: Value = serde_json::from_slice(&out.stdout).expect("schema json");
    assert_eq!(
        common::report_schema(),
        derived,
        "docs/report.schema.json is stale: run `stallscope schema report > docs/report.schema.json`"
    );
    // the draft the validator applies
    assert_eq!(
        derived["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
}

#[test]
fn the_validator_rejects_a_broken_report() {
    let mut v = json(&[
        "analyze",
        "--format",
        "json",
        &path("fixtures/sched/starve.perf.data"),
    ]);
    v["findings"][0]["severity"] = Value::from("urgent");
    v["findings"][0]["measures"]["worst_wait_ns"] = Value::from(1.5);
    v["findings"][0].as_object_mut().unwrap().remove("hint");
    let errors = report_errors(&v);
    for at in [
        "/findings/0/severity:",
        "/findings/0/measures/worst_wait_ns:",
        "/findings/0:",
    ] {
        assert!(
            errors.iter().any(|e| e.starts_with(at)),
            "no error at {at}: {errors:#?}"
        );
    }
    assert_eq!(errors.len(), 3, "{errors:#?}");
}

#[test]
fn fail_on_exits_1_exactly_when_such_a_finding_exists() {
    let starve = path("fixtures/sched/starve.perf.data");
    let equal = path("fixtures/sched/equal.perf.data");
    // six equal hogs on two CPUs: one medium cpu-saturation finding, nothing high
    let pinned = path("fixtures/detectors/runqueue-starvation/healthy-oversubscribed.dat.zst");
    let code = |args: &[&str]| run(args).status.code();
    assert_eq!(
        code(&["analyze", "--oneline", "--fail-on", "high", &starve]),
        Some(1)
    );
    assert_eq!(code(&["analyze", "--oneline", &starve]), Some(0));
    assert_eq!(
        code(&["analyze", "--oneline", "--fail-on", "low", &equal]),
        Some(0)
    );
    let v = json(&["analyze", "--format", "json", &pinned]);
    let sev: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["severity"].as_str().unwrap())
        .collect();
    assert!(sev.contains(&"medium") && !sev.contains(&"high"), "{sev:?}");
    assert_eq!(
        code(&["analyze", "--oneline", "--fail-on", "high", &pinned]),
        Some(0)
    );
    assert_eq!(
        code(&["analyze", "--oneline", "--fail-on", "medium", &pinned]),
        Some(1)
    );
    // filtered away: no finding left, no failure
    assert_eq!(
        code(&[
            "analyze",
            "--oneline",
            "--fail-on",
            "high",
            "--pid",
            "1",
            &starve
        ]),
        Some(0)
    );
    assert_eq!(code(&["analyze", "--fail-on", "urgent", &starve]), Some(2));
}

#[test]
fn text_output_carries_the_original_trace_lines() {
    let file = path("fixtures/sched/starve.ftrace.txt");
    let v = json(&["analyze", "--format", "json", &file]);
    let out = run(&["analyze", &file]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<String> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let mut checked = 0;
    for f in v["findings"].as_array().unwrap() {
        for e in f["evidence"].as_array().unwrap() {
            let src = e["source"].as_str().unwrap();
            let n: usize = src
                .rsplit(':')
                .next()
                .unwrap()
                .parse()
                .expect("line number");
            let original = &lines[n - 1];
            assert_eq!(e["text"].as_str().unwrap(), original);
            assert!(
                text.contains(original.as_str()),
                "text output lacks {src}: {original}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 2, "{checked}");
    assert!(text.contains("[HIGH] runqueue-starvation: cyclictest"));
    // one line per finding
    let one = run(&["analyze", "--oneline", &file]);
    let one = String::from_utf8(one.stdout).unwrap();
    assert_eq!(one.lines().count(), v["findings"].as_array().unwrap().len());
    assert!(one
        .lines()
        .all(|l| l.starts_with("high ") || l.starts_with("medium ") || l.starts_with("low ")));
}

#[test]
fn binary_evidence_names_byte_offsets_and_dump_lines() {
    let v = json(&[
        "analyze",
        "--format",
        "json",
        "--select",
        "runqueue-starvation",
        &path("fixtures/sched/starve.perf.data"),
    ]);
    let e = &v["findings"][0]["evidence"][0];
    assert!(
        e["source"]
            .as_str()
            .unwrap()
            .contains("starve.perf.data:0x"),
        "{e}"
    );
    let ts = e["ts_ns"].as_u64().unwrap();
    assert!(
        e["text"].as_str().unwrap().starts_with(&format!("{ts} ")),
        "{e}"
    );
}

#[test]
fn missing_events_skip_detectors_with_a_record_command() {
    // only sched_switch lines of a real ftrace capture: no wakeups
    let full = std::fs::read_to_string(root().join("fixtures/sched/starve.ftrace.txt")).unwrap();
    let only_switch: String = full
        .lines()
        .filter(|l| l.starts_with('#') || l.contains("sched_switch:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let dir = std::env::temp_dir().join(format!("stallscope-analyze-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("switch-only.txt");
    std::fs::write(&file, only_switch).unwrap();
    let v = json(&["analyze", "--format", "json", file.to_str().unwrap()]);
    let skipped = v["skipped"].as_array().unwrap();
    // every detector is skipped: the four scheduler ones and blocked-chain for the missing
    // wakeups, the block / workqueue / profile ones for their own missing inputs
    assert_eq!(skipped.len(), 8, "{v}");
    let sched: Vec<_> = skipped
        .iter()
        .filter(|s| {
            [
                "runqueue-starvation",
                "cpu-saturation",
                "wakeup-ping-pong",
                "idle-while-runnable",
                "blocked-chain",
            ]
            .contains(&s["id"].as_str().unwrap())
        })
        .collect();
    assert_eq!(sched.len(), 5, "{v}");
    for s in skipped {
        assert!(!s["record_command"].as_str().unwrap().is_empty(), "{s}");
    }
    for s in sched {
        assert!(
            s["reason"]
                .as_str()
                .unwrap()
                .contains("sched_waking or sched_wakeup"),
            "{s}"
        );
        assert!(
            s["record_command"].as_str().unwrap().contains("perf"),
            "{s}"
        );
    }
    assert!(v["findings"].as_array().unwrap().is_empty());
    let text = String::from_utf8(run(&["analyze", file.to_str().unwrap()]).stdout).unwrap();
    assert!(text.contains("Skipped:  runqueue-starvation"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn select_ignore_set_and_filters() {
    let starve = path("fixtures/sched/starve.perf.data");
    let v = json(&[
        "analyze",
        "--format",
        "json",
        "--select",
        "idle-while-runnable",
        &starve,
    ]);
    assert_eq!(
        v["detectors_run"],
        serde_json::json!(["idle-while-runnable"])
    );
    let v = json(&[
        "analyze",
        "--format",
        "json",
        "--ignore",
        "idle-while-runnable,wakeup-ping-pong,cpu-saturation,blocked-chain",
        &starve,
    ]);
    assert_eq!(
        v["detectors_run"],
        serde_json::json!(["runqueue-starvation"])
    );
    // a 200 ms threshold leaves only the periodic finding (its worst wait is 15.7 ms)
    let v = json(&[
        "analyze",
        "--format",
        "json",
        "--select",
        "runqueue-starvation",
        "--set",
        "runqueue-starvation.threshold_ns=200ms",
        "--set",
        "runqueue-starvation.high_ns=300ms",
        &starve,
    ]);
    let titles: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["title"].as_str().unwrap())
        .collect();
    assert!(
        titles.iter().all(|t| t.contains("periodic task")),
        "{titles:#?}"
    );
    // --time before the 98.8 ms wait of pid 12897 ends: that wait is seen as a lower bound
    // (still waiting when the analyzed range ended), the only finding
    let v = json(&[
        "analyze",
        "--format",
        "json",
        "--select",
        "runqueue-starvation",
        "--time",
        "..595.2",
        &starve,
    ]);
    let found = v["findings"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{v}");
    assert_eq!(found[0]["measures"]["worst_wait_censored"], 1, "{v}");
    assert_eq!(found[0]["tasks"][0]["pid"], 12897, "{v}");
    assert!(
        found[0]["title"]
            .as_str()
            .unwrap()
            .contains("waited ≥ 47.026 ms"),
        "{v}"
    );
    let v = json(&["analyze", "--format", "json", "--pid", "12899", &starve]);
    for f in v["findings"].as_array().unwrap() {
        assert!(f["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["pid"] == 12899));
    }
    let v = json(&[
        "analyze",
        "--format",
        "json",
        "--cpu",
        "0",
        "--select",
        "runqueue-starvation",
        &starve,
    ]);
    assert!(v["findings"].as_array().unwrap().is_empty());
    for bad in [
        vec!["analyze", "--select", "nope", &starve],
        vec!["analyze", "--set", "runqueue-starvation.nope=1", &starve],
        vec![
            "analyze",
            "--set",
            "runqueue-starvation.threshold_ns=ten",
            &starve,
        ],
        vec!["analyze", "--time", "3..2", &starve],
        vec!["analyze", "--cpu", "x", &starve],
    ] {
        let out = run(&bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn detectors_and_explain() {
    let v = json(&["detectors", "--format", "json"]);
    let ids: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        vec![
            "runqueue-starvation",
            "wakeup-ping-pong",
            "cpu-saturation",
            "idle-while-runnable",
            "worker-flood",
            "lock-spinning",
            "dispatch-starvation",
            "blocked-chain"
        ]
    );
    for d in v.as_array().unwrap() {
        assert!(!d["params"].as_array().unwrap().is_empty());
        let out = run(&["explain", d["id"].as_str().unwrap()]);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        for section in [
            "## What it finds",
            "## How to confirm",
            "## Limits",
            "## Severity",
            "## Thresholds",
        ] {
            assert!(text.contains(section), "{}: {section}", d["id"]);
        }
    }
    let text = String::from_utf8(run(&["detectors"]).stdout).unwrap();
    assert!(text.contains("runqueue-starvation.threshold_ns=10000000"));
    assert_eq!(run(&["explain", "nope"]).status.code(), Some(2));
}

/// One blktrace record (`struct blk_io_trace`, 48 bytes, little-endian) on `cpu`: `action`
/// of 8 sectors at sector 100 of device 7,0.
fn blk_record(cpu: u32, seq: u32, ts: u64, action: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(48);
    b.extend_from_slice(&0x6561_7407u32.to_le_bytes()); // magic | version 7
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(&ts.to_le_bytes());
    b.extend_from_slice(&100u64.to_le_bytes()); // sector
    b.extend_from_slice(&4096u32.to_le_bytes()); // bytes
    b.extend_from_slice(&action.to_le_bytes());
    b.extend_from_slice(&42u32.to_le_bytes()); // pid
    b.extend_from_slice(&(7u32 << 20).to_le_bytes()); // device 7,0
    b.extend_from_slice(&cpu.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes()); // error
    b.extend_from_slice(&0u16.to_le_bytes()); // pdu_len
    b
}

#[test]
fn an_event_naming_an_impossible_cpu_is_counted_not_allocated_for() {
    // A 48-byte blktrace file whose one record names CPU 0xFFFFFFFF made `analyze` try to
    // allocate up to 1 TiB (every detector's per-CPU table grew to it) and abort. It is now
    // skipped and counted as data quality; the same file's other commands were fine.
    let dir = std::env::temp_dir().join(format!("ss-badcpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("dev.blktrace.0");
    // a queue on CPU 0, then a completion (what made the old build abort) on CPU 2^32 − 1
    let mut bytes = blk_record(0, 1, 1_000, 0x0012_0001);
    bytes.extend(blk_record(u32::MAX, 2, 2_000, 0x0081_0008));
    std::fs::write(&file, &bytes).unwrap();
    let out = run(&["analyze", "--format", "json", file.to_str().unwrap()]);
    assert!(
        out.status.code().is_some_and(|c| c == 0 || c == 2),
        "no abort: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json report");
    let dq = v["data_quality"].to_string();
    assert!(dq.contains("event_cpu_out_of_range"), "{dq}");
    assert!(dq.contains("names CPU 4294967295"), "{dq}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_gate_never_passes_on_nothing() {
    // A --time range outside the trace, a --cpu or --pid the trace does not have, or inputs
    // with no readable event: the report says so (JSON `nothing_analyzed`, text, stderr)
    // and --fail-on exits 2 instead of passing with "Findings: 0".
    let starve = path("fixtures/sched/starve.perf.data");
    let cases: [(&[&str], &str); 3] = [
        (&["--time", "1..2"], "--time range 1..2"),
        (
            &["--cpu", "7"],
            "--cpu names no CPU of the inputs (they have CPUs 0-1)",
        ),
        (
            &["--pid", "99999"],
            "--pid names no task of the inputs (99999",
        ),
    ];
    for (filter, why) in cases {
        let mut args = vec!["analyze", "--format", "json"];
        args.extend_from_slice(filter);
        args.push(&starve);
        let out = run(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "without --fail-on it is a report"
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_valid(&v);
        let said = v["nothing_analyzed"]
            .as_str()
            .expect("nothing_analyzed set");
        assert!(said.contains(why), "{said}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("nothing analyzed"));
        let mut gated = vec!["analyze", "--fail-on", "low"];
        gated.extend_from_slice(filter);
        gated.push(&starve);
        let out = run(&gated);
        assert_eq!(out.status.code(), Some(2), "{filter:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Nothing analyzed:"));
    }
    // a filter that matches the trace is not "nothing", even when it leaves no finding
    let v = json(&[
        "analyze", "--format", "json", "--cpu", "0", "--pid", "12897", &starve,
    ]);
    assert!(v["nothing_analyzed"].is_null(), "{}", v["nothing_analyzed"]);
    // a perf.data without readable events (its records cut away)
    let full = std::fs::read(&starve).unwrap();
    let data_off = u64::from_le_bytes(full[40..48].try_into().unwrap()) as usize;
    let mut empty = full[..data_off].to_vec();
    empty[48..56].copy_from_slice(&0u64.to_le_bytes());
    let file = std::env::temp_dir().join(format!("ss-empty-{}.data", std::process::id()));
    std::fs::write(&file, &empty).unwrap();
    let out = run(&["analyze", "--fail-on", "high", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the inputs hold no event"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_file(&file);
}

/// The data-quality registry (`explain data-quality`) is what reports carry: every key a
/// report holds on damaged and partial fixtures is listed there with the same severity and
/// meaning, and every key is snake_case.
#[test]
fn report_data_quality_is_the_registrys() {
    let out = run(&["explain", "data-quality"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: std::collections::BTreeMap<String, (String, String)> = text
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            let key = cells.first()?.strip_prefix("| `")?.strip_suffix('`')?;
            let meaning = cells.get(2)?.strip_suffix(" |")?;
            Some((key.to_string(), (cells[1].to_string(), meaning.to_string())))
        })
        .collect();
    assert!(rows.len() > 100, "{text}");
    let mut seen = 0;
    for rel in [
        "fixtures/sched/starve.ftrace.txt",
        "fixtures/sched/starve.perf-script.txt",
        "fixtures/chain/chain.perf.data.xz",
        "fixtures/detectors/dispatch-starvation/bfq.blkparse.txt.zst",
        "fixtures/detectors/lock-spinning/xfs-shared.folded.xz",
    ] {
        let v = json(&["analyze", "--format", "json", &path(rel)]);
        for (key, e) in v["data_quality"].as_object().expect("data_quality") {
            let (severity, meaning) = rows
                .get(key)
                .unwrap_or_else(|| panic!("{rel}: {key} is not in the registry"));
            assert_eq!(e["severity"], severity.as_str(), "{key}");
            assert_eq!(e["description"], meaning.as_str(), "{key}");
            seen += 1;
        }
    }
    assert!(
        seen >= 3,
        "the fixtures carry data-quality entries to compare ({seen})"
    );
    let one = run(&["explain", "lost_events"]);
    assert!(String::from_utf8_lossy(&one.stdout).contains("| `lost_events` | error |"));
}
