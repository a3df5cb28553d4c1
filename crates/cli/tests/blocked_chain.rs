//! `blocked-chain` (issue #21) on fixtures/chain/: an `open(O_CREAT)` blocked over a second
//! behind XFS log I/O on a throttled, saturated device, captured here by
//! fixtures/chain/capture.sh. The ground truth (`chain.ground-truth.json`) was walked by
//! fixtures/chain/ground_truth.py from `perf script`'s text of the same recording, not by
//! stallscope: every D sleep of at least 500 ms, who woke it, the waker's longest D sleep
//! inside it, … down to the block request whose completion started the wakeups. The same
//! load recorded by `stallscope record --stacks --events chain` (`tracedat.trace.dat.xz`) has
//! its ground truth walked from `trace-cmd report` text by the same script. And once more by
//! perf without `sched_waking` (`wakeup.perf.data.xz`, sched_wakeup only): the ground truth
//! then takes sched_wakeup's recording task as the waker (perf's rule), and so must every
//! product — the wakeup rule is the detector engine's, chosen from the recorded events.

mod common;

use std::collections::BTreeMap;

use common::{json, root};
use serde_json::Value;

/// The recordings of the chain and their ground truths.
const CAPTURES: [(&str, &str); 3] = [
    ("chain.perf.data.xz", "chain.ground-truth.json"),
    ("tracedat.trace.dat.xz", "tracedat.ground-truth.json"),
    ("wakeup.perf.data.xz", "wakeup.ground-truth.json"),
];

fn chain_findings(file: &str) -> Vec<Value> {
    let path = root().join("fixtures/chain").join(file);
    let p = path.to_str().unwrap();
    // the trace.dat's stack addresses are named by the kallsyms lines saved with it
    let kallsyms = root().join("fixtures/chain/tracedat.kallsyms.txt");
    let mut args = vec!["analyze", "--select", "blocked-chain", "--format", "json"];
    if file.ends_with(".trace.dat.xz") {
        args.extend(["--kallsyms", kallsyms.to_str().unwrap()]);
    }
    args.push(p);
    let report = json(&args);
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["detector"] == "blocked-chain")
        .cloned()
        .collect()
}

fn ground_truth() -> Value {
    ground_truth_of("chain.ground-truth.json")
}

fn ground_truth_of(file: &str) -> Value {
    let text = std::fs::read_to_string(root().join("fixtures/chain").join(file)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The ground truth's chain of the worst sleep of finding `f`.
fn ground_truth_chain<'a>(gt: &'a Value, f: &Value) -> &'a Value {
    let start = u(&f["measures"]["worst_start_ns"]);
    gt["chains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| u(&c["hops"][0]["start_ns"]) == start)
        .unwrap_or_else(|| panic!("no ground-truth chain from {start}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn every_long_d_sleep_is_a_victim_with_its_length() {
    for (file, truth) in CAPTURES {
        victims_match(file, &ground_truth_of(truth));
    }
}

fn victims_match(file: &str, gt: &Value) {
    let chains = gt["chains"].as_array().unwrap();
    assert!(chains.len() >= 5, "the capture has long D sleeps");
    // the longest D sleep (≥ 500 ms) of each task, from perf's text
    let mut want: BTreeMap<i64, u64> = BTreeMap::new();
    for c in chains {
        let h = &c["hops"][0];
        let len = u(&h["end_ns"]) - u(&h["start_ns"]);
        let e = want.entry(h["pid"].as_i64().unwrap()).or_default();
        *e = (*e).max(len);
    }
    let findings = chain_findings(file);
    assert!(!findings.is_empty());
    let victims: u64 = findings.iter().map(|f| u(&f["measures"]["victims"])).sum();
    assert_eq!(
        victims as usize,
        chains.len(),
        "{file}: one victim per D sleep ≥ 500 ms"
    );
    let mut got: BTreeMap<i64, u64> = BTreeMap::new();
    for f in &findings {
        for t in f["tasks"].as_array().unwrap() {
            if let Some(b) = t["measures"]["blocked_ns"].as_u64() {
                let e = got.entry(t["pid"].as_i64().unwrap()).or_default();
                *e = (*e).max(b);
            }
        }
    }
    assert_eq!(got, want, "{file}");
}

#[test]
fn the_probe_open_is_blocked_as_long_as_it_measured_itself() {
    // chain.probe.txt: the probe's own CLOCK_MONOTONIC timing of its slow open() calls (perf
    // recorded with -k mono, the same clock)
    let probe = std::fs::read_to_string(root().join("fixtures/chain/chain.probe.txt")).unwrap();
    let gt = ground_truth();
    let (first, last) = (u(&gt["recording"][0]), u(&gt["recording"][1]));
    let findings = chain_findings("chain.perf.data.xz");
    let mut checked = 0;
    for line in probe.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (tid, begin, end): (i64, u64, u64) = (
            f[1].parse().unwrap(),
            f[2].parse().unwrap(),
            f[3].parse().unwrap(),
        );
        if end - begin < 500_000_000 || begin < first || end > last {
            continue; // short, or not wholly inside the recording
        }
        let blocked = findings
            .iter()
            .flat_map(|f| f["tasks"].as_array().unwrap())
            .filter(|t| t["pid"].as_i64() == Some(tid))
            .filter_map(|t| t["measures"]["blocked_ns"].as_u64())
            .max()
            .unwrap_or_else(|| panic!("the probe {tid} is not among the blocked tasks"));
        // its D sleep is inside the call and most of it
        assert!(blocked <= end - begin, "{blocked} > call {}", end - begin);
        assert!(
            blocked * 10 >= (end - begin) * 9,
            "{blocked} of {}",
            end - begin
        );
        checked += 1;
    }
    assert!(
        checked >= 1,
        "a probe call of ≥ 500 ms inside the recording"
    );
}

#[test]
fn the_worst_chain_is_the_ground_truths_hop_by_hop() {
    for (file, truth) in CAPTURES {
        worst_chain_matches(file, &ground_truth_of(truth));
    }
}

fn worst_chain_matches(file: &str, gt: &Value) {
    for f in chain_findings(file) {
        let m = &f["measures"];
        let want = ground_truth_chain(gt, &f);
        let hops = want["hops"].as_array().unwrap();
        assert_eq!(u(&m["hops"]) as usize, hops.len(), "{}", f["title"]);
        for (n, h) in hops.iter().enumerate() {
            assert_eq!(m[format!("hop{n}_pid")], h["pid"], "hop {n}");
            assert_eq!(m[format!("hop{n}_start_ns")], h["start_ns"], "hop {n}");
            assert_eq!(m[format!("hop{n}_end_ns")], h["end_ns"], "hop {n}");
        }
        let r = &want["root"]["request"];
        assert_eq!(want["root"]["kind"], "request");
        assert_eq!(m["root_sector"], r["sector"]);
        if r["insert_ns"].is_null() {
            // a flush without an insert (no I/O scheduler on its path): only its completion
            assert_eq!(m["root_complete_ns"], r["complete_ns"]);
            continue;
        }
        for (ours, theirs) in [
            ("root_queue_ns", "queue_ns"),
            ("root_insert_ns", "insert_ns"),
            ("root_issue_ns", "issue_ns"),
            ("root_data_complete_ns", "data_complete_ns"),
            ("root_complete_ns", "complete_ns"),
        ] {
            assert_eq!(m[ours], r[theirs], "{ours}");
        }
        // where the request's time went: never the I/O scheduler when insert → dispatch
        // took microseconds (here it took 2–4 µs: the device and the flush machinery did)
        let i2d = u(&r["issue_ns"]) - u(&r["insert_ns"]);
        assert_eq!(u(&m["root_i2d_ns"]), i2d);
        let kind = f["cause"]["kind"].as_str().unwrap();
        if i2d < 1_000_000 {
            assert_ne!(kind, "request_in_scheduler", "{}", f["title"]);
            assert!(f["title"]
                .as_str()
                .unwrap()
                .contains("not the I/O scheduler"));
        }
        // the chain is stated hop by hop, with where each task slept (perf -g stacks)
        let title = f["title"].as_str().unwrap();
        assert_eq!(title.matches("blocked").count(), hops.len(), "{title}");
        let first_site = f["evidence"][0]["site"].as_str().unwrap_or_default();
        assert!(first_site.contains("blocked (D)"), "{first_site}");
        if file.ends_with(".trace.dat.xz") {
            // stacks from the stacktrace option, named by the saved kallsyms lines
            assert!(!title.contains("0xffff"), "{title}");
        }
        if u(&m["worst_blocked_ns"]) >= 1_000_000_000 {
            assert_eq!(f["severity"], "high");
        }
    }
}

#[test]
fn sleeps_say_the_waker_released_after_its_own_wait() {
    // the data behind the chain: `stallscope sleeps` of each ground-truth victim whose waker
    // slept in D inside its sleep names the waker's last such sleep
    let gt = ground_truth();
    let path = root().join("fixtures/chain/chain.perf.data.xz");
    let p = path.to_str().unwrap();
    let sl = json(&[
        "sleeps", "--format", "json", "--min-ms", "500", "--state", "D", p,
    ]);
    let sleeps = sl["sleeps"].as_array().unwrap();
    let mut checked = 0;
    for c in gt["chains"].as_array().unwrap() {
        let hops = c["hops"].as_array().unwrap();
        if hops.len() < 2 {
            continue;
        }
        let (victim, waker_sleep) = (&hops[0], &hops[1]);
        let ours = sleeps
            .iter()
            .find(|s| s["pid"] == victim["pid"] && s["start_ns"] == victim["start_ns"])
            .unwrap_or_else(|| panic!("no sleep {victim}"));
        assert_eq!(ours["end_ns"], victim["end_ns"]);
        assert_eq!(ours["waker"]["pid"], waker_sleep["pid"]);
        let after = &ours["waker"]["after"];
        if after["kind"] == "after_own_wait" {
            // the waker's last sleep inside the victim's: the ground truth's hop is its
            // longest, often the same one
            assert!(u(&after["end_ns"]) <= u(&victim["end_ns"]));
            assert!(u(&after["end_ns"]) >= u(&victim["start_ns"]));
            assert!(u(&after["end_ns"]) >= u(&waker_sleep["end_ns"]));
            checked += 1;
        }
    }
    assert!(checked >= 3, "{checked}");
}

#[test]
fn without_sched_waking_every_product_names_the_same_wakers() {
    // sched_wakeup only: blocked-chain once hard-coded sched_waking and found "no wakeup
    // recorded" here where sleeps and critical-path named the waker. Every D sleep ≥ 500 ms
    // of the ground truth: the waker sleeps names, the one critical-path names for that
    // interval of the sleeper, and the next hop blocked-chain follows, are its waker.
    let file = "wakeup.perf.data.xz";
    let gt = ground_truth_of("wakeup.ground-truth.json");
    let path = root().join("fixtures/chain").join(file);
    let p = path.to_str().unwrap();
    let sl = json(&[
        "sleeps", "--format", "json", "--min-ms", "500", "--state", "D", p,
    ]);
    let sleeps = sl["sleeps"].as_array().unwrap();
    let findings = chain_findings(file);
    assert!(
        findings
            .iter()
            .all(|f| f["cause"]["kind"] != "wakeup_not_recorded"),
        "every chain finds its wakers"
    );
    let mut checked = 0;
    for c in gt["chains"].as_array().unwrap() {
        let victim = &c["hops"][0];
        let (pid, start, end) = (&victim["pid"], u(&victim["start_ns"]), u(&victim["end_ns"]));
        let ours = sleeps
            .iter()
            .find(|s| &s["pid"] == pid && u(&s["start_ns"]) == start)
            .unwrap_or_else(|| panic!("sleeps has no sleep {victim}"));
        assert_eq!(u(&ours["end_ns"]), end);
        assert_eq!(ours["waker"]["pid"], victim["waker"], "sleeps: {victim}");
        // critical-path over the sleep itself: one sleeping interval, woken by the waker
        let window = format!(
            "{}..{}",
            stallscope::model::fmt_secs_nsecs(start),
            stallscope::model::fmt_secs_nsecs(end)
        );
        let pid_text = pid.to_string();
        let cp = json(&[
            "critical-path",
            "--format",
            "json",
            "--pid",
            &pid_text,
            "--time",
            &window,
            p,
        ]);
        let woken: Vec<&Value> = cp["woken_by"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| &w[0])
            .collect();
        assert_eq!(woken, [&victim["waker"]], "critical-path: {victim} {cp}");
        checked += 1;
    }
    assert!(checked >= 5, "{checked}");
    // blocked-chain: the worst chain's second hop is its first hop's waker
    for f in &findings {
        let m = &f["measures"];
        let want = ground_truth_chain(&gt, f);
        if u(&m["hops"]) >= 2 {
            assert_eq!(m["hop1_pid"], want["hops"][0]["waker"], "{}", f["title"]);
        }
    }
}

#[test]
fn wakeups_in_hard_irqs_name_the_interrupt() {
    // perf recorded irq:irq_handler_entry (irq, name): a wakeup inside a handler names it
    let path = root().join("fixtures/chain/chain.perf.data.xz");
    let sl = json(&["sleeps", "--format", "json", path.to_str().unwrap()]);
    let names = sl["irq_names"].as_object().unwrap();
    let mut checked = 0;
    for s in sl["sleeps"].as_array().unwrap() {
        if let Some(irq) = s["waker"]["irq"].as_u64() {
            assert_eq!(s["waker"]["context"], "interrupt", "{s}");
            assert!(names.contains_key(&irq.to_string()), "{irq} unnamed");
            checked += 1;
        }
    }
    assert!(checked > 0);
}

#[test]
fn without_the_sync_writers_nothing_is_blocked_for_long() {
    // the same setup, metadata churn and probe, no O_DIRECT writers: the device keeps up
    let gt: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("fixtures/chain/nowriters.ground-truth.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(gt["chains"].as_array().map(Vec::len), Some(0));
    let findings = chain_findings("nowriters.perf.data.xz");
    assert!(findings.is_empty(), "{findings:#?}");
}

#[test]
fn explain_names_the_recording_commands() {
    let out = common::run(&["explain", "blocked-chain"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for want in [
        "stallscope record --stacks --events chain",
        "perf record -a -g -e sched:sched_switch",
        "trace-cmd record -e sched:sched_switch -T",
    ] {
        assert!(text.contains(want), "{want}");
    }
}
