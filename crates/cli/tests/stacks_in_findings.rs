//! Stacks recorded with scheduler events reach the findings (issue #20): on a trace.dat with
//! `options/stacktrace` (`fixtures/real_world/stacks_starve.dat`: cyclictest starved by a
//! nice −20 hog), every evidence event that had a stack carries it, its frames are the
//! addresses `trace-cmd report` prints after that event named with the capture's own
//! kernel symbols (`stacks_starve.kallsyms.txt`, looked up here independently), and its
//! `site` says where the task slept, blocked or was preempted, or where its waker was.

mod common;

use std::collections::HashMap;
use std::process::Command;

use common::{json, root};
use serde_json::Value;

fn fixture(name: &str) -> String {
    root()
        .join("fixtures/real_world")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// `trace-cmd report` of the capture: event timestamp (µs, as printed) → the frame
/// addresses of the stack after it.
fn trace_cmd_stacks() -> HashMap<String, Vec<u64>> {
    let out = Command::new("trace-cmd")
        .arg("report")
        .arg(fixture("stacks_starve.dat"))
        .output()
        .expect("trace-cmd is installed (apt-get install trace-cmd)");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut stacks: HashMap<String, Vec<u64>> = HashMap::new();
    let mut last_event: Option<String> = None;
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(addr) = line.strip_prefix("=> ") {
            if let Some(ts) = &current {
                stacks
                    .entry(ts.clone())
                    .or_default()
                    .push(u64::from_str_radix(addr.trim(), 16).unwrap());
            }
        } else if line.contains(" kernel_stack: ") {
            current = last_event.clone();
        } else if let Some(ts) = line.split("] ").nth(1).and_then(|r| r.split(':').next()) {
            last_event = Some(ts.trim().to_string());
            current = None;
        }
    }
    stacks
}

/// `analyze --format json` of the capture's runqueue-starvation findings with `--kallsyms`.
fn analyze(kallsyms: &str) -> Value {
    json(&[
        "analyze",
        "--format",
        "json",
        "--select",
        "runqueue-starvation",
        "--kallsyms",
        kallsyms,
        &fixture("stacks_starve.dat"),
    ])
}

/// The capture's kernel symbols: the function an address is in.
fn symbolize(addr: u64, table: &[(u64, String)]) -> Option<String> {
    let i = table.partition_point(|(a, _)| *a <= addr);
    table.get(i.checked_sub(1)?).map(|(_, n)| n.clone())
}

#[test]
fn evidence_carries_the_stack_recorded_with_each_event() {
    if !stallscope_testkit::require_trace_cmd() {
        return;
    }
    let kallsyms = fixture("stacks_starve.kallsyms.txt");
    let v = analyze(&kallsyms);
    let mut table: Vec<(u64, String)> = std::fs::read_to_string(&kallsyms)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut p = l.split_whitespace();
            let a = u64::from_str_radix(p.next()?, 16).ok()?;
            Some((a, p.nth(1)?.to_string()))
        })
        .collect();
    table.sort();
    let theirs = trace_cmd_stacks();
    let findings = v["findings"].as_array().expect("findings");
    assert!(!findings.is_empty(), "the starved cyclictest is found");
    let mut checked = 0;
    let mut sites = Vec::new();
    for f in findings {
        let victim = f["tasks"][0]["comm"].as_str().unwrap().to_string();
        for e in f["evidence"].as_array().unwrap() {
            let Some(stack) = e["stack"].as_array() else {
                continue;
            };
            // the event's time as trace-cmd prints it (µs, rounded)
            let us = (e["ts_ns"].as_u64().unwrap() + 500) / 1000;
            let key = format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
            let frames = theirs
                .get(&key)
                .unwrap_or_else(|| panic!("no trace-cmd stack at {key}"));
            let named: Vec<String> = frames
                .iter()
                .map(|&a| symbolize(a, &table).unwrap_or_else(|| format!("{a:#x}")))
                .skip_while(|n| {
                    n.starts_with("trace_event_raw_event_") || n.starts_with("__traceiter_")
                })
                .take(8)
                .collect();
            let ours: Vec<String> = stack
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect();
            assert_eq!(ours, named, "stack of the event at {key}");
            checked += 1;
            let site = e["site"].as_str().expect("a site with every stack");
            sites.push((
                victim.clone(),
                e["text"].as_str().unwrap().to_string(),
                site.to_string(),
            ));
        }
    }
    assert!(checked >= 2, "evidence with stacks: {checked}");
    // the victim's sleep and the hog's preemption, said in words
    assert!(
        sites
            .iter()
            .any(|(v, _, s)| s.starts_with(&format!("{v} ("))
                && s.contains("went to sleep (S) in do_nanosleep")),
        "{sites:#?}"
    );
    assert!(
        sites.iter().any(|(_, t, s)| t.contains("sched_waking")
            && s.contains(" woke ")
            && s.contains(" from ")),
        "{sites:#?}"
    );
}

#[test]
fn without_symbols_the_frames_are_addresses() {
    let v = analyze("none");
    let stacks: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["evidence"].as_array().unwrap())
        .filter_map(|e| e.get("stack"))
        .collect();
    assert!(!stacks.is_empty());
    assert!(stacks
        .iter()
        .flat_map(|s| s.as_array().unwrap())
        .all(|f| f.as_str().unwrap().starts_with("0x")));
}

#[test]
fn pasted_perf_script_stacks_keep_the_names_perf_printed() {
    // `perf record -e sched:sched_switch -e sched:sched_waking -g` as `perf script --ns`
    // text, from a kernel this host does not run: the frame names come from the text
    let path = root().join("fixtures/sched/sched_callchain.perf-script.txt");
    let text = std::fs::read_to_string(&path).unwrap();
    let v: Value = json(&["analyze", "--format", "json", path.to_str().unwrap()]);
    // the text's frames after each event line, by the event's time in ns: kernel frames
    // by the name perf printed (user frames are named from the binaries, not here)
    let mut frames: HashMap<u64, Vec<String>> = HashMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(f) = line.strip_prefix('\t') {
            if let Some(ts) = current {
                let (addr, rest) = f.trim().split_once(' ').unwrap();
                let sym = rest.rsplit_once(" (").unwrap().0;
                let kernel = rest.ends_with("([kernel.kallsyms])");
                let name = match sym.rsplit_once("+0x") {
                    Some((n, _)) if kernel => n.to_string(),
                    _ => format!("{:#x}", u64::from_str_radix(addr, 16).unwrap()),
                };
                frames.entry(ts).or_default().push(name);
            }
        } else if let Some((head, _)) = line.split_once(": ") {
            current = head
                .rsplit(' ')
                .next()
                .and_then(|t| t.replace('.', "").parse::<u64>().ok());
        }
    }
    let mut checked = 0;
    for f in v["findings"].as_array().unwrap() {
        for e in f["evidence"].as_array().unwrap() {
            let Some(stack) = e["stack"].as_array() else {
                continue;
            };
            let theirs: Vec<&String> = frames[&e["ts_ns"].as_u64().unwrap()]
                .iter()
                .skip_while(|n| {
                    n.starts_with("trace_event_raw_event_") || n.starts_with("__traceiter_")
                })
                .take(8)
                .collect();
            let ours: Vec<&str> = stack.iter().map(|s| s.as_str().unwrap()).collect();
            assert_eq!(ours, theirs, "{}", e["text"]);
            checked += 1;
        }
    }
    assert!(checked > 0);
}

#[test]
fn user_frames_of_perf_data_stacks_are_named_by_their_mappings() {
    // `perf record -e sched:sched_switch -e sched:sched_waking -g -a`: the user part of a
    // stack is named from the binaries when this host has the recorded build, else by
    // file and offset from the file's MMAP records (stress-ng is stripped: file+offset)
    let path = root().join("fixtures/sched/sched_callchain.perf.data");
    let v: Value = json(&["analyze", "--format", "json", path.to_str().unwrap()]);
    let frames: Vec<String> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["evidence"].as_array().unwrap())
        .filter_map(|e| e.get("stack"))
        .flat_map(|s| s.as_array().unwrap())
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    assert!(
        frames.iter().any(|f| f.starts_with("[stress-ng+0x")),
        "{frames:?}"
    );
    let notes = v["data_quality"].to_string();
    assert!(notes.contains("user_symbols"), "{notes}");
}

#[test]
fn user_frames_of_a_trace_dat_are_said_to_be_unnamed() {
    // options/userstacktrace records user addresses without the processes' mappings
    let path = root().join("fixtures/real_world/stacks_markers.dat");
    let v: Value = json(&["analyze", "--format", "json", path.to_str().unwrap()]);
    assert!(
        v["data_quality"]["user_frames_unnamed"]["count"]
            .as_u64()
            .unwrap()
            > 0,
        "{}",
        v["data_quality"]
    );
}
