//! `dispatch-starvation` on the real fixtures (fixtures/detectors/dispatch-starvation, README
//! there): XFS on a loop device, an O_DSYNC O_DIRECT writer against a buffered writer that
//! fsyncs, under bfq (positive) and mq-deadline (healthy), plus bfq without the sync writer
//! (healthy). Each capture exists as trace.dat (block + sched tracepoints), blktrace binary
//! per-CPU files (kernel `blk` tracer) and `blkparse` text.
//!
//! * `analyze --oneline --select dispatch-starvation`: the positive case prints in every
//!   format, the healthy controls print nothing (the lines are snapshots in
//!   analyze_snapshots.rs);
//! * the worst finding is the request with the longest insert→dispatch wait that the test
//!   itself finds in blkparse's text (the peer's rendering), with its I and D times equal to
//!   blkparse's (within 1 µs) and the requests blkparse shows dispatched in between counted by
//!   class; the same request and times from `trace-cmd report -t` for the trace.dat;
//! * the trace.dat finding names tasks blocked in D state (sched events present) and the
//!   recorded scheduler; the blktrace binary finding knows bfq from its messages;
//! * `--format json` validates against docs/report.schema.json.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod common;
use common::report_errors;

const DIR: &str = "fixtures/detectors/dispatch-starvation";
const ID: &str = "dispatch-starvation";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> String {
    root().join(DIR).join(name).to_string_lossy().into_owned()
}

/// The inputs of one case: trace.dat, blktrace per-CPU files, or blkparse text.
fn inputs(scenario: &str, format: &str) -> Vec<String> {
    match format {
        "tracedat" => vec![fixture(&format!("{scenario}.trace.dat.zst"))],
        "blkparse" => vec![fixture(&format!("{scenario}.blkparse.txt.zst"))],
        "blktrace" => {
            let mut v: Vec<String> = std::fs::read_dir(root().join(DIR).join(scenario))
                .expect("per-CPU directory")
                .filter_map(|e| e.ok().map(|e| e.path().to_string_lossy().into_owned()))
                .filter(|p| p.contains(".blktrace."))
                .collect();
            v.sort();
            assert!(v.len() >= 2, "{v:?}");
            v
        }
        other => panic!("format {other}"),
    }
}

fn run(args: &[&str], inputs: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(args)
        .args(inputs)
        .env("NO_COLOR", "1")
        .output()
        .expect("run stallscope")
}

fn ok_stdout(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn findings(inputs: &[String]) -> Vec<Value> {
    let text = ok_stdout(run(
        &["analyze", "--format", "json", "--select", ID],
        inputs,
    ));
    let v: Value = serde_json::from_str(&text).expect("json");
    v["findings"].as_array().expect("findings").clone()
}

fn measure(f: &Value, k: &str) -> i64 {
    f["measures"][k]
        .as_i64()
        .unwrap_or_else(|| panic!("no {k} in {}", f["measures"]))
}

fn decompressed(name: &str) -> String {
    let mut text = String::new();
    stallscope::read::Input::open(&fixture(name))
        .expect("open")
        .into_reader()
        .read_to_string(&mut text)
        .expect("read");
    text
}

#[test]
fn the_positive_case_prints_in_every_format_and_controls_stay_empty() {
    for scenario in ["bfq", "deadline", "bfq-nosync"] {
        for format in ["tracedat", "blktrace", "blkparse"] {
            let got = ok_stdout(run(
                &["analyze", "--oneline", "--select", ID],
                &inputs(scenario, format),
            ));
            if scenario != "bfq" {
                assert_eq!(got, "", "{scenario} ({format}) is a healthy control");
                continue;
            }
            assert!(!got.is_empty(), "bfq ({format}) is the positive case");
        }
    }
}

/// One blkparse event line: (time ns, pid, action, rwbs, sector, nr_sector) on device 7,0.
type BlkLine<'a> = (u64, i64, &'a str, &'a str, u64, u32);

fn blkparse_lines(text: &str) -> Vec<BlkLine<'_>> {
    text.lines()
        .take_while(|l| !l.starts_with("CPU") && !l.starts_with("Total"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // 7,0 CPU SEQ SECS.NSECS PID ACT RWBS SECTOR + NR [COMM]
            if f.len() < 10 || f[0] != "7,0" || f[8] != "+" {
                return None;
            }
            let (s, ns) = f[3].split_once('.')?;
            let ts = s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?;
            Some((
                ts,
                f[4].parse().ok()?,
                f[5],
                f[6],
                f[7].parse().ok()?,
                f[9].parse().ok()?,
            ))
        })
        .collect()
}

/// blkparse's RWBS → the detector's class words.
fn class_of(rwbs: &str, nr: u32) -> &'static str {
    if nr == 0 {
        return "flush";
    }
    let op = rwbs.trim_start_matches('F');
    match (op.starts_with('W'), op.contains('S'), op.contains('M')) {
        (true, true, true) => "sync write meta",
        (true, true, false) => "sync write",
        (true, false, _) => "async write",
        _ => "other",
    }
}

#[test]
fn worst_wait_is_the_longest_insert_to_dispatch_in_blkparse_with_its_times_and_culprits() {
    let text = decompressed("bfq.blkparse.txt.zst");
    let lines = blkparse_lines(&text);
    // the oracle: every I→D pair by sector, from blkparse's own text
    let mut inserted: BTreeMap<u64, (u64, i64)> = BTreeMap::new();
    let mut worst: Option<(u64, u64, u64, u32, i64)> = None; // wait, I, D, nr, I pid
    for &(ts, pid, act, _, sector, nr) in &lines {
        match act {
            "I" => {
                inserted.insert(sector, (ts, pid));
            }
            "D" => {
                if let Some((its, ipid)) = inserted.remove(&sector) {
                    if worst.is_none_or(|w| ts - its > w.0) {
                        worst = Some((ts - its, its, ts, nr, ipid));
                    }
                }
            }
            _ => {}
        }
    }
    let (wait, i_ts, d_ts, nr, i_pid) = worst.expect("I→D pairs");
    assert!(wait > 100_000_000, "the capture starved a request: {wait}");
    // dispatches strictly between, by class (zero-length flushes print without "+ NR" in
    // blkparse, so count them separately)
    let mut classes: BTreeMap<&str, i64> = BTreeMap::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 7 || f[0] != "7,0" || f[5] != "D" {
            continue;
        }
        let Some(ts) = f[3].split_once('.').and_then(|(s, ns)| {
            Some(s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?)
        }) else {
            continue;
        };
        if ts <= i_ts || ts >= d_ts {
            continue;
        }
        let nr: u32 = if f.get(8) == Some(&"+") {
            f[9].parse().expect("nr")
        } else {
            0
        };
        *classes.entry(class_of(f[6], nr)).or_default() += 1;
    }

    for (format, base) in [("blkparse", 0u64), ("blktrace", u64::MAX)] {
        let all = findings(&inputs("bfq", format));
        let f = &all[0];
        assert_eq!(measure(f, "nr_sector"), i64::from(nr), "{format}");
        let sector = measure(f, "sector");
        assert!(
            lines
                .iter()
                .any(|l| l.2 == "I" && l.4 == sector as u64 && l.0 == i_ts),
            "{format}: the worst finding is the request blkparse shows waiting longest"
        );
        // blkparse text is relative to the first event; the binary carries kernel times
        let offset = if base == 0 {
            0
        } else {
            measure(f, "insert_ts_ns") as u64 - i_ts
        };
        assert!((measure(f, "insert_ts_ns") as u64).abs_diff(i_ts + offset) <= 1_000);
        assert!((measure(f, "dispatch_ts_ns") as u64).abs_diff(d_ts + offset) <= 1_000);
        assert!(
            (measure(f, "wait_ns") as u64).abs_diff(wait) <= 1_000,
            "{format}"
        );
        assert_eq!(
            measure(f, "passed_flush"),
            classes.get("flush").copied().unwrap_or(0)
        );
        assert_eq!(
            measure(f, "passed_meta"),
            classes.get("sync write meta").copied().unwrap_or(0)
        );
        assert_eq!(
            measure(f, "passed_sync"),
            classes.get("sync write").copied().unwrap_or(0)
                + classes.get("sync write meta").copied().unwrap_or(0)
        );
        assert_eq!(
            measure(f, "passed_async"),
            classes.get("async write").copied().unwrap_or(0)
        );
        assert_eq!(
            measure(f, "passed_requests"),
            classes.values().sum::<i64>(),
            "{format}"
        );
        let issuer = f["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .find(|t| t["role"] == "issuer")
            .expect("issuer");
        assert_eq!(
            issuer["pid"].as_i64(),
            Some(i_pid),
            "{format}: no Q: the inserter"
        );
        assert_eq!(f["severity"], "medium", "{format}: no sched events, < 1 s");
    }
    // the binary files carry bfq's messages (blkparse 1.2.0 drops them: README)
    let bin = findings(&inputs("bfq", "blktrace"));
    assert!(bin[0]["title"]
        .as_str()
        .expect("title")
        .contains("(bfq (from its trace messages))"));
    assert!(measure(&bin[0], "device_scheduler_messages") > 1000);
    assert!(bin[0]["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .any(|e| e["text"].as_str().expect("text").contains("block_message")));
}

#[test]
fn tracedat_names_the_same_request_with_trace_cmd_times_blocked_tasks_and_the_scheduler() {
    let all = findings(&inputs("bfq", "tracedat"));
    let f = &all[0];
    let sector = measure(f, "sector");
    let nr = measure(f, "nr_sector");
    let blk = findings(&inputs("bfq", "blkparse"));
    assert_eq!(
        (sector, nr),
        (measure(&blk[0], "sector"), measure(&blk[0], "nr_sector"))
    );
    assert!(f["title"]
        .as_str()
        .expect("title")
        .contains("on 7,0 (loop0, bfq)"));
    let blocked: Vec<&Value> = f["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter(|t| t["role"] == "blocked")
        .collect();
    assert!(
        !blocked.is_empty(),
        "sched events present: D-state tasks named"
    );
    assert!(blocked
        .iter()
        .all(|t| t["measures"]["blocked_ns"].as_i64().expect("ns") >= 10_000_000));
    assert_eq!(measure(f, "blocked_tasks") as usize, blocked.len());

    // trace-cmd's own timestamps of the insert and the dispatch
    if !stallscope_testkit::require_trace_cmd() {
        return;
    }
    let tmp = std::env::temp_dir().join(format!("ds-{}.dat", std::process::id()));
    let mut raw = Vec::new();
    stallscope::read::Input::open(&fixture("bfq.trace.dat.zst"))
        .expect("open")
        .into_reader()
        .read_to_end(&mut raw)
        .expect("read");
    std::fs::write(&tmp, raw).expect("write temp");
    let out = Command::new("trace-cmd")
        .args(["report", "-t", "-i"])
        .arg(&tmp)
        .output()
        .expect("trace-cmd report");
    let _ = std::fs::remove_file(&tmp);
    let text = String::from_utf8_lossy(&out.stdout);
    let needle = format!(" {sector} + {nr} ");
    let when = |event: &str| -> u64 {
        let line = text
            .lines()
            .find(|l| l.contains(event) && l.contains(" 7,0 ") && l.contains(&needle))
            .unwrap_or_else(|| panic!("{event} of {needle} in trace-cmd report"));
        let ts = line
            .split_whitespace()
            .find_map(|w| {
                let w = w.strip_suffix(':')?;
                let (s, ns) = w.split_once('.')?;
                Some(s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?)
            })
            .expect("timestamp");
        ts
    };
    let (i, d) = (when("block_rq_insert:"), when("block_rq_issue:"));
    assert!((measure(f, "insert_ts_ns") as u64).abs_diff(i) <= 1_000);
    assert!((measure(f, "dispatch_ts_ns") as u64).abs_diff(d) <= 1_000);
    assert!((measure(f, "wait_ns") as u64).abs_diff(d - i) <= 1_000);
}

/// The request tracker of `stallscope_timeline::block` (a separate state machine, the one
/// `iolat` uses) agrees on the longest insert→dispatch wait of loop0 in every format.
#[test]
fn the_block_request_tracker_agrees_on_the_worst_wait() {
    use stallscope::timeline::block::{BlockTracker, CompletedRequest};
    for format in ["tracedat", "blktrace", "blkparse"] {
        let files = inputs("bfq", format);
        let mut events = Vec::new();
        for (ix, path) in files.iter().enumerate() {
            let mut r = stallscope::read::open(path, None, ix as u16).expect("open");
            while let Some(ev) = r.next_event().expect("event") {
                events.push(ev);
            }
        }
        events.sort_by_key(|e| e.ts);
        let mut tracker = BlockTracker::new();
        let mut worst: Option<(u64, u64, u32)> = None;
        let mut sink = |r: &CompletedRequest| {
            if r.dev.to_string() != "7,0" {
                return;
            }
            if let (Some(i), Some(d)) = (r.insert_ts, r.first_issue_ts) {
                if worst.is_none_or(|w| d - i > w.0) {
                    worst = Some((d - i, r.sector, r.nr_sector));
                }
            }
        };
        for ev in &events {
            tracker.process(ev, &mut sink);
        }
        let (wait, sector, nr) = worst.expect("requests on loop0");
        let f = &findings(&files)[0];
        assert_eq!(
            (
                measure(f, "wait_ns"),
                measure(f, "sector"),
                measure(f, "nr_sector")
            ),
            (wait as i64, sector as i64, i64::from(nr)),
            "{format}"
        );
    }
}

#[test]
fn json_reports_validate_against_the_schema() {
    for format in ["tracedat", "blktrace", "blkparse"] {
        let out = ok_stdout(run(
            &["analyze", "--format", "json", "--select", ID],
            &inputs("bfq", format),
        ));
        let v: Value = serde_json::from_str(&out).expect("json");
        let errors = report_errors(&v);
        assert!(errors.is_empty(), "{format}: {errors:#?}");
        assert_eq!(v["schema"], "stallscope.report/1");
        let f = &v["findings"][0];
        assert_eq!(f["detector"], ID);
        assert!(
            f["evidence"].as_array().is_some_and(|e| e.len() >= 4),
            "{format}"
        );
    }
}

/// `iolat --format json`'s maximum of `phase` on device `dev` ("7,0").
fn iolat_max(files: &[String], dev: &str, phase: &str) -> i64 {
    let text = ok_stdout(run(&["iolat", "--format", "json"], files));
    let v: Value = serde_json::from_str(&text).expect("iolat json");
    v["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter(|g| g["key"] == dev)
        .flat_map(|g| g["phases"].as_array().cloned().unwrap_or_default())
        .find(|p| p["phase"] == phase)
        .and_then(|p| p["max_ns"].as_i64())
        .unwrap_or(0)
}

#[test]
fn every_finding_measures_its_wait_as_iolat_defines_the_phase() {
    // One definition for both views: a dispatched request's wait is btt's I2D (else M2D,
    // else Q2D) as `iolat` measures it on the same file. A wait btt counted cannot exceed
    // iolat's maximum of that phase on the device; a wait btt could not count (no Q it
    // accepted) is the same I → D difference, says so, and points at blkparse instead.
    // Either way the finding states iolat's maximum, and it must be iolat's.
    let mut checked = 0;
    for scenario in ["bfq", "deadline", "bfq-nosync"] {
        for format in ["tracedat", "blktrace", "blkparse"] {
            let files = inputs(scenario, format);
            for f in findings(&files) {
                let title = f["title"].as_str().expect("title");
                let dev = title
                    .split(" on ")
                    .nth(1)
                    .and_then(|s| s.split_whitespace().next())
                    .expect("a device in the title");
                let phase = ["I2D", "M2D", "Q2D"]
                    .into_iter()
                    .find(|p| {
                        title.contains(&format!("(btt {p})")) || title.contains(&format!("({p};"))
                    })
                    .unwrap_or_else(|| panic!("no phase in {title}"));
                let max = iolat_max(&files, dev, phase);
                assert_eq!(
                    measure(&f, "iolat_phase_max_ns"),
                    max,
                    "{scenario} {format}: {title}"
                );
                let hint = f["hint"].as_str().expect("hint");
                match measure(&f, "counted_by_btt") {
                    1 => {
                        assert!(measure(&f, "wait_ns") <= max, "{title}");
                        assert!(hint.contains("`stallscope iolat` (or `btt -A`)"), "{hint}");
                    }
                    _ => {
                        assert!(title.contains("not in btt's sample"), "{title}");
                        assert!(hint.contains("Confirm in blkparse"), "{hint}");
                        assert!(!hint.contains("btt -A's I2D maximum"), "{hint}");
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 3,
        "the bfq capture has findings in every format ({checked})"
    );
}

#[test]
fn the_blktrace_capture_takes_its_cause_from_bfqs_own_messages() {
    // The kernel `blk` tracer records bfq's `m` lines (the tracepoint capture cannot): the
    // cause names the queues bfq served during the wait and the queue that dispatched the
    // request; the trace.dat of the same run has no messages and says how to record them.
    let f = &findings(&inputs("bfq", "blktrace"))[0];
    let kind = f["cause"]["kind"].as_str().expect("cause");
    assert!(
        matches!(kind, "iosched_preemption" | "iosched_not_served"),
        "{kind}"
    );
    let text = f["cause"]["text"].as_str().expect("text");
    assert!(
        text.contains("Queues set in service during the wait: bfq"),
        "{text}"
    );
    assert!(text.contains("(which dispatched it)"), "{text}");
    assert!(measure(f, "scheduler_decisions") > 0);
    assert!(f["hint"].as_str().expect("hint").starts_with(text));
    let t = &findings(&inputs("bfq", "tracedat"))[0];
    let text = t["cause"]["text"].as_str().expect("text");
    assert!(
        text.contains("echo blk > /sys/kernel/tracing/current_tracer"),
        "{text}"
    );
}

#[test]
fn analyze_takes_a_blktrace_directory_or_dev_prefix_like_every_other_command() {
    // `iolat DIR` and `iolat DIR/loop0` read the per-CPU files; analyze refused a
    // directory ("expected a trace file, found a directory") and a DEV prefix (no such file).
    let files = inputs("bfq", "blktrace");
    let want = ok_stdout(run(&["analyze", "--oneline", "--select", ID], &files));
    assert!(!want.is_empty());
    let dir = root().join(DIR).join("bfq");
    for path in [dir.clone(), dir.join("loop0")] {
        let got = ok_stdout(run(
            &["analyze", "--oneline", "--select", ID],
            &[path.to_string_lossy().into_owned()],
        ));
        assert_eq!(got, want, "{}", path.display());
    }
}

#[test]
fn a_blkparse_excerpt_out_of_time_order_gives_the_same_findings() {
    // How a request is pasted to a mailing list: its own lines grepped first, then the
    // rest of the trace (the scheduler's lines, other requests) below them.
    let text = decompressed("bfq.blkparse.txt.zst");
    let whole = findings(&inputs("bfq", "blkparse"));
    let first = whole.first().expect("a finding in the bfq capture");
    let key = format!(
        " {} + {} ",
        measure(first, "sector"),
        measure(first, "nr_sector")
    );
    let (grepped, rest): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| l.contains(&key));
    assert!(grepped.len() >= 3, "{key}: {grepped:?}");
    let excerpt: String = grepped
        .iter()
        .chain(rest.iter())
        .map(|l| format!("{l}\n"))
        .collect();
    let path = std::env::temp_dir().join(format!("ss-blkparse-excerpt-{}.txt", std::process::id()));
    std::fs::write(&path, excerpt).unwrap();
    let p = path.to_string_lossy().into_owned();
    let pasted = findings(std::slice::from_ref(&p));
    let summary = |fs: &[Value]| -> Vec<(String, String)> {
        fs.iter()
            .map(|f| (f["title"].to_string(), f["measures"].to_string()))
            .collect()
    };
    assert_eq!(summary(&pasted), summary(&whole));
    // and the reader says it put the lines in order
    let info = ok_stdout(run(&["info", "--format", "json"], std::slice::from_ref(&p)));
    assert!(info.contains("blkparse_lines_out_of_order"), "{info}");
    let _ = std::fs::remove_file(&path);
}

/// One CPU's blktrace file named alone stands for its recording, as `blkparse -i
/// loop0.blktrace.0` reads every CPU's file of the device: the findings are those of the
/// whole recording (before: only CPU 0's 32 of the requests were read, and requests whose
/// dispatch is in the CPU-1 file were reported HIGH "never dispatched"). A file whose
/// sibling is really missing (CPU 1's copied alone: CPU 0 is left out, which its number
/// says) is a recording of some CPUs: `cpus_partly_recorded`, and a request still waiting at
/// its end is no evidence (it may have been dispatched on CPU 0) — no HIGH finding.
#[test]
fn one_per_cpu_blktrace_file_reads_its_recording_and_a_lone_one_is_partial() {
    let whole = findings(&inputs("bfq", "blktrace"));
    assert!(!whole.is_empty());
    let titles =
        |fs: &[Value]| -> Vec<String> { fs.iter().map(|f| f["title"].to_string()).collect() };
    for one in inputs("bfq", "blktrace") {
        assert_eq!(
            titles(&findings(std::slice::from_ref(&one))),
            titles(&whole),
            "{one}"
        );
    }
    for scenario in ["bfq", "deadline"] {
        let dir =
            std::env::temp_dir().join(format!("ss-lone-cpu-{scenario}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let cpu1 = inputs(scenario, "blktrace")
            .into_iter()
            .find(|p| p.contains(".blktrace.1"))
            .expect("CPU 1's file");
        let lone = dir.join(Path::new(&cpu1).file_name().unwrap());
        std::fs::copy(&cpu1, &lone).unwrap();
        let lone = lone.to_string_lossy().into_owned();
        let out = ok_stdout(run(
            &["analyze", "--format", "json"],
            std::slice::from_ref(&lone),
        ));
        let v: Value = serde_json::from_str(&out).expect("json");
        assert!(
            v["data_quality"]["cpus_partly_recorded"].is_object(),
            "{scenario}: {}",
            v["data_quality"]
        );
        for f in v["findings"].as_array().expect("findings") {
            assert_ne!(f["severity"], "high", "{scenario}: {}", f["title"]);
            assert!(
                !f["title"].to_string().contains("never dispatched"),
                "{scenario}: {}",
                f["title"]
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
