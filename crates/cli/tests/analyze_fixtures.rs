//! `stallscope analyze` on real captures: each detector's positive fixture must produce its
//! finding naming the right tasks, with numbers checked against perf's own decoding of the
//! same file (`perf sched timehist --state`, `perf script`), and each healthy control must
//! produce none of that detector's findings.
//!
//! perf is run at test time (never from saved text); the tests say so loudly and skip the
//! perf comparisons when perf is not installed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(rel: &str) -> PathBuf {
    root().join(rel)
}

fn perf_installed() -> bool {
    let ok = Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!(
            "\n!!!!!!!! SKIPPED: `perf` is not installed; perf comparisons did not run !!!!!!!!\n"
        );
    }
    ok
}

/// `stallscope ARGS…`'s standard output; the command must succeed.
fn stallscope<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(args)
        .output()
        .expect("run stallscope");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `stallscope analyze --format json FILE ARGS…`.
fn analyze(file: &Path, args: &[&str]) -> Value {
    let mut all: Vec<std::ffi::OsString> = vec!["analyze".into(), "--format".into(), "json".into()];
    all.extend(args.iter().map(Into::into));
    all.push(file.into());
    serde_json::from_slice(&stallscope(all)).expect("json")
}

/// The comms of a finding's tasks.
fn task_comms(f: &Value) -> Vec<&str> {
    f["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["comm"].as_str())
        .collect()
}

fn findings<'a>(r: &'a Value, detector: &str) -> Vec<&'a Value> {
    r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["detector"] == detector)
        .collect()
}

fn with_role<'a>(f: &'a Value, role: &str) -> Vec<&'a Value> {
    f["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter(|t| t["role"] == role)
        .collect()
}

fn perf_out(args: &[&str], file: &Path) -> String {
    let out = Command::new("perf")
        .args(args)
        .arg("-f")
        .arg("-i")
        .arg(file)
        .output()
        .expect("run perf");
    assert!(
        out.status.success(),
        "perf {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Parses `12.345` (ms with µs digits) or `595.123456` (s with µs digits) into ns.
fn dec_to_ns(s: &str, unit_ns: u64) -> u64 {
    let (i, f) = s.split_once('.').unwrap_or((s, ""));
    let mut frac: u64 = 0;
    let mut scale = unit_ns;
    for d in f.bytes() {
        scale /= 10;
        frac += u64::from(d - b'0') * scale;
    }
    i.parse::<u64>().unwrap() * unit_ns + frac
}

/// The longest runnable wait of every tid, from `perf sched timehist --state`: a row's wait
/// is its "wait time" when the task's previous row ended in state R (preempted), else its
/// "sch delay" (time from the wakeup to the switch-in).
fn timehist_worst_waits(file: &Path) -> HashMap<i64, u64> {
    let text = perf_out(&["sched", "timehist", "--state"], file);
    let mut last_state: HashMap<i64, String> = HashMap::new();
    let mut worst: HashMap<i64, u64> = HashMap::new();
    for line in text.lines() {
        if line.contains("<idle>") {
            continue; // idle rows have no tid column
        }
        let Some(open) = line.rfind('[') else {
            continue;
        };
        let Some(close) = line[open..].find(']') else {
            continue;
        };
        let ids = &line[open + 1..open + close];
        let Ok(tid) = ids.split('/').next().unwrap_or("").parse::<i64>() else {
            continue;
        };
        let cols: Vec<&str> = line[open + close + 1..].split_whitespace().collect();
        if cols.len() < 4 {
            continue;
        }
        let (wait, delay, state) = (
            dec_to_ns(cols[0], 1_000_000),
            dec_to_ns(cols[1], 1_000_000),
            cols[3],
        );
        let runnable_wait = if last_state.get(&tid).is_some_and(|s| s.starts_with('R')) {
            wait
        } else {
            delay
        };
        let w = worst.entry(tid).or_insert(0);
        *w = (*w).max(runnable_wait);
        last_state.insert(tid, state.to_string());
    }
    worst
}

fn measure(f: &Value, k: &str) -> i64 {
    f["measures"][k]
        .as_i64()
        .unwrap_or_else(|| panic!("no {k} in {f}"))
}

/// The severity of the starvation a positive fixture holds: high, but medium on the cgroup
/// case recorded without context — an equal-nice hog taking the CPU is explained by cgroup
/// weights or autogroup, which the perf.data does not record (issue #28: at most medium
/// until they are recorded; `cgroup-context.dat.zst` has them, and is high).
fn positive_severity(rel: &str) -> &'static str {
    match rel.ends_with("runqueue-starvation/cgroup.perf.data") {
        true => "medium",
        false => "high",
    }
}

#[test]
fn runqueue_starvation_positive_fixtures_name_victim_culprit_and_the_worst_wait() {
    let perf = perf_installed();
    for rel in [
        "fixtures/sched/starve.perf.data",
        "fixtures/detectors/runqueue-starvation/nice.perf.data",
        "fixtures/detectors/runqueue-starvation/cgroup.perf.data",
    ] {
        let file = fixture(rel);
        let r = analyze(&file, &["--select", "runqueue-starvation"]);
        let fs = findings(&r, "runqueue-starvation");
        let cyclic: Vec<&&Value> = fs
            .iter()
            .filter(|f| {
                f["severity"] == positive_severity(rel)
                    && with_role(f, "victim")[0]["comm"] == "cyclictest"
            })
            .collect();
        assert!(
            !cyclic.is_empty(),
            "{rel}: no {} finding for cyclictest: {fs:#?}",
            positive_severity(rel)
        );
        for f in &cyclic {
            assert_eq!(
                with_role(f, "culprit")[0]["comm"],
                "stress-ng-cpu",
                "{rel}: {f}"
            );
            assert_eq!(
                f["cpus"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|c| **c == 1)
                    .count(),
                1,
                "{rel}: CPU 1"
            );
        }
        if !perf {
            continue;
        }
        let oracle = timehist_worst_waits(&file);
        let mut ours: HashMap<i64, i64> = HashMap::new();
        for f in &fs {
            let pid = with_role(f, "victim")[0]["pid"].as_i64().unwrap();
            let w = ours.entry(pid).or_insert(0);
            *w = (*w).max(measure(f, "worst_wait_ns"));
        }
        for f in &cyclic {
            let pid = with_role(f, "victim")[0]["pid"].as_i64().unwrap();
            let (o, t) = (ours[&pid], oracle[&pid] as i64);
            // timehist prints µs digits, truncated: ours is within [theirs, theirs + 1 µs)
            assert!(
                (0..1000).contains(&(o - t)),
                "{rel} pid {pid}: ours {o} ns, timehist {t} ns"
            );
        }
    }
}

#[test]
fn runqueue_starvation_healthy_fixtures_are_silent() {
    for rel in [
        "fixtures/sched/equal.perf.data",
        "fixtures/sched/equal.ftrace.txt",
        "fixtures/detectors/runqueue-starvation/healthy.perf.data",
    ] {
        let r = analyze(&fixture(rel), &[]);
        let fs = findings(&r, "runqueue-starvation");
        assert!(fs.is_empty(), "{rel}: {fs:#?}");
    }
}

/// The cause kind of a finding (`""` when it has none).
fn cause_kind(f: &Value) -> &str {
    f["cause"]["kind"].as_str().unwrap_or("")
}

/// `stallscope timehist --format json ARGS… FILE`: its rows.
fn timehist_rows(file: &Path, args: &[&str]) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(["timehist", "--format", "json"])
        .args(args)
        .arg(file)
        .output()
        .expect("run stallscope timehist");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    v["rows"].as_array().expect("rows").clone()
}

/// Every timehist row's scheduling delay (of the task `pid` only, when given).
fn timehist_sch_delays(file: &Path, pid: Option<i64>) -> Vec<i64> {
    let pid_arg = pid.map(|p| p.to_string());
    let args: Vec<&str> = match &pid_arg {
        Some(p) => vec!["--pid", p.as_str()],
        None => Vec::new(),
    };
    timehist_rows(file, &args)
        .iter()
        .filter(|r| pid.is_none_or(|p| r["tid"] == p))
        .map(|r| r["sch_delay_ns"].as_i64().unwrap_or(0))
        .collect()
}

#[test]
fn runqueue_starvation_names_the_cause_on_every_positive_fixture() {
    // (fixture, victim comm, cause, words the cause text must contain)
    let cases: [(&str, &str, &str, &[&str]); 6] = [
        (
            "fixtures/detectors/runqueue-starvation/nice.perf.data",
            "cyclictest",
            "nice_weight",
            &["load weight 88761", "nice 0"],
        ),
        (
            // cpu.shares 262144 hog, perf.data without system context
            "fixtures/detectors/runqueue-starvation/cgroup.perf.data",
            "cyclictest",
            "context_not_recorded",
            &["same nice weight (1024)", "sudo stallscope record"],
        ),
        (
            // the same with `stallscope record` context: both groups and weights named
            "fixtures/detectors/runqueue-starvation/cgroup-context.dat.zst",
            "periodic",
            "cgroup_weight",
            &[
                "(cpu.shares 262144)",
                "/ (cpu.shares 1024)",
                "262144 and 1024",
            ],
        ),
        (
            "fixtures/detectors/runqueue-starvation/fifo.dat.zst",
            "periodic",
            "higher_class",
            &["SCHED_FIFO", "kernel prio 49", "fair deadline server"],
        ),
        (
            "fixtures/detectors/runqueue-starvation/throttled.dat.zst",
            "periodic",
            "throttled",
            &["may run 10000 µs per 100000 µs"],
        ),
        (
            "fixtures/sched/starve.perf.data",
            "cyclictest",
            "nice_weight",
            &["load weight 88761"],
        ),
    ];
    for (rel, victim, cause, words) in cases {
        let file = fixture(rel);
        let r = analyze(&file, &["--select", "runqueue-starvation"]);
        let fs = findings(&r, "runqueue-starvation");
        let f = fs
            .iter()
            .find(|f| {
                with_role(f, "victim")[0]["comm"] == victim
                    && f["severity"] == positive_severity(rel)
            })
            .unwrap_or_else(|| panic!("{rel}: no finding of {victim}: {fs:#?}"));
        assert_eq!(cause_kind(f), cause, "{rel}: {f:#}");
        let text = f["cause"]["text"].as_str().expect("cause text");
        assert!(
            f["hint"].as_str().unwrap().starts_with(text),
            "{rel}: the hint starts with the cause: {f:#}"
        );
        for w in words {
            assert!(text.contains(w), "{rel}: cause text lacks {w:?}: {text}");
        }
        // the culprit role, when given, goes to a task that ran at least half of the wait
        for c in with_role(f, "culprit") {
            assert!(
                c["measures"]["share_of_wait_permille"].as_i64().unwrap() >= 500,
                "{rel}: {c}"
            );
        }
    }
    // the throttled victim's worst wait is `timehist`'s largest scheduling delay of that task,
    // ending at the same switch-in (one truth in two views)
    let file = fixture("fixtures/detectors/runqueue-starvation/throttled.dat.zst");
    let r = analyze(&file, &["--select", "runqueue-starvation"]);
    let f = findings(&r, "runqueue-starvation")[0];
    let pid = with_role(f, "victim")[0]["pid"].as_i64().unwrap();
    let delay = timehist_sch_delays(&file, Some(pid)).into_iter().max();
    assert_eq!(Some(measure(f, "worst_wait_ns")), delay, "{f:#}");
}

/// Issue #29: a task of a throttled group beside an equal-weight hog outside the group
/// (capture_fair_share.sh `throttled-neighbour`): the hog runs while the group's quota is
/// spent, so the cause is the quota — named with its numbers — and the hog is listed as having
/// run, not blamed; the remedy is the quota's, not weights or priorities (before: the hog was
/// the `culprit` and the hint advised "raising the victim's priority or weight, lowering the
/// culprit's"). The worst wait is `timehist`'s largest scheduling delay of the task.
#[test]
fn a_quota_is_the_culprit_of_a_throttled_wait_not_the_task_that_ran() {
    let file = fixture("fixtures/detectors/runqueue-starvation/throttled-neighbour.dat.zst");
    let r = analyze(&file, &["--select", "runqueue-starvation"]);
    let fs = findings(&r, "runqueue-starvation");
    let f = fs
        .iter()
        .find(|f| with_role(f, "victim")[0]["comm"] == "periodic")
        .unwrap_or_else(|| panic!("no finding of periodic: {fs:#?}"));
    assert_eq!(cause_kind(f), "throttled", "{f:#}");
    assert!(
        with_role(f, "culprit").is_empty(),
        "no task is the culprit: {f:#}"
    );
    let ran = with_role(f, "ran");
    assert!(
        ran.iter().any(|t| t["comm"] == "stress-ng-cpu"
            && t["measures"]["share_of_wait_permille"].as_i64().unwrap() >= 500),
        "the hog ran most of the wait: {f:#}"
    );
    assert_eq!(measure(f, "cgroup_quota_us"), 10_000);
    assert_eq!(measure(f, "cgroup_period_us"), 100_000);
    let title = f["title"].as_str().unwrap();
    assert!(
        title.contains("was throttled (CPU quota 10000 µs per 100000 µs)"),
        "{title}"
    );
    let hint = f["hint"].as_str().unwrap();
    assert!(
        hint.contains("cpu.max") && hint.contains("cpu.cfs_quota_us"),
        "{hint}"
    );
    for wrong in [
        "raising the victim's priority",
        "renice",
        "lowering the culprit",
    ] {
        assert!(!hint.contains(wrong), "{wrong:?} in {hint}");
    }
    let pid = with_role(f, "victim")[0]["pid"].as_i64().unwrap();
    let delay = timehist_sch_delays(&file, Some(pid)).into_iter().max();
    assert_eq!(Some(measure(f, "worst_wait_ns")), delay, "{f:#}");
}

#[test]
fn busy_healthy_fixtures_raise_no_high_finding() {
    // 6 equal CPU hogs and a periodic task on 2 CPUs: fair sharing of too little CPU
    let r = analyze(
        &fixture("fixtures/detectors/runqueue-starvation/healthy-oversubscribed.dat.zst"),
        &[],
    );
    let high: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "high")
        .collect();
    assert!(high.is_empty(), "{high:#?}");
    assert!(findings(&r, "runqueue-starvation").is_empty(), "{r:#}");
    // a compile on both CPUs with fio and the recorder (load about 4): no HIGH, few findings
    let r = analyze(
        &fixture("fixtures/detectors/dispatch-starvation/deadline.trace.dat.zst"),
        &[],
    );
    let all = r["findings"].as_array().unwrap();
    assert!(all.iter().all(|f| f["severity"] != "high"), "{r:#}");
    assert!(all.len() < 10, "{} findings: {r:#}", all.len());
    // what is reported there names the cause, and an unfair wait with no majority culprit
    // says it was shared
    for f in findings(&r, "runqueue-starvation") {
        assert_ne!(cause_kind(f), "", "{f:#}");
        if with_role(f, "culprit").is_empty() {
            assert!(f["title"].as_str().unwrap().contains("shared by"), "{f:#}");
        }
    }
}

/// Issue #28: `stallscope record --cpus 1` and `perf record -C 1` of 4 unpinned CPU hogs on 2
/// CPUs (fixtures/busy, capture_busy.sh). The tasks move between the CPUs all the time and
/// CPU 0 is not recorded: a task pulled there is in no known state, so no wait may be taken
/// for it (before CPU coverage was in the model, waits "still waiting when the trace ended"
/// of tasks running on CPU 0 were MEDIUM and HIGH findings, with entitlements of 2^58 ns).
#[test]
fn partial_cpu_recordings_take_no_wait_on_the_cpu_they_leave_out() {
    for name in ["fixtures/busy/cpu1.dat.zst", "fixtures/busy/cpu1.perf.data"] {
        let file = fixture(name);
        let r = analyze(&file, &[]);
        assert_eq!(
            r["data_quality"]["cpus_partly_recorded"]["examples"][0], "events of CPUs 1 only",
            "{name}: {:#}",
            r["data_quality"]
        );
        let first = r["capabilities"]["first_ts_ns"].as_i64().unwrap();
        let last = r["capabilities"]["last_ts_ns"].as_i64().unwrap();
        for f in r["findings"].as_array().unwrap() {
            assert_eq!(f["severity"], "low", "{name}: {f:#}");
            let cpus = f["window"]["cpus"].as_array().unwrap();
            assert!(!cpus.contains(&Value::from(0)), "{name}: {f:#}");
            // no duration longer than the trace, no time outside it
            for (k, v) in f["measures"].as_object().unwrap() {
                let v = v.as_i64().unwrap_or(0);
                if k.ends_with("_start_ns") || k.ends_with("_end_ns") {
                    assert!((first..=last).contains(&v), "{name}: {k} = {v}: {f:#}");
                } else if k.ends_with("_ns") {
                    assert!(v <= last - first, "{name}: {k} = {v}: {f:#}");
                }
            }
        }
        // the model's waits (the table every product reads) end on the recorded CPU alone
        let dir = std::env::temp_dir().join(format!("stallscope-cpu1-{}", std::process::id()));
        let to: [&std::ffi::OsStr; 5] = [
            "tables".as_ref(),
            "--tables".as_ref(),
            "waits".as_ref(),
            "--to".as_ref(),
            dir.as_os_str(),
        ];
        stallscope(to.iter().copied().chain([file.as_os_str()]));
        let cpus = wait_cpus(&dir.join("waits.parquet"));
        let _ = std::fs::remove_dir_all(&dir);
        // (`cpu` is where the wait ended running; none when it did not end so)
        assert!(cpus.contains(&Some(1)), "{name}: no wait ran on CPU 1");
        assert!(!cpus.contains(&Some(0)), "{name}: waits on {cpus:?}");
    }
    // the `perf script --header` text of the perf.data says the same: its header block
    // (perf's command line, `-C 1`) is read before the first event. Before, the text gave 17
    // findings, 3 of them MEDIUM waits of up to 1.75 s of tasks that ran on CPU 0.
    if perf_installed() {
        let file = fixture("fixtures/busy/cpu1.perf.data");
        let text = std::env::temp_dir().join(format!("cpu1-{}.txt", std::process::id()));
        std::fs::write(&text, perf_out(&["script", "--header"], &file)).unwrap();
        let (from_text, from_file) = (analyze(&text, &[]), analyze(&file, &[]));
        let _ = std::fs::remove_file(&text);
        assert_eq!(
            from_text["data_quality"]["cpus_partly_recorded"]["examples"][0],
            "events of CPUs 1 only"
        );
        assert_eq!(from_text["findings"], from_file["findings"]);
    }
}

/// A per-task recording — `perf record -e 'sched:*' -- COMMAND` without `-a`, the way many
/// record a command (fixtures/real_world/per_task.perf.data by
/// `fixtures/capture/capture_per_task.sh`: `perf bench sched pipe` beside an unrecorded
/// `stress-ng --cpu 1`) — holds only the records made while the command's tasks ran. Before:
/// a MEDIUM "rcu_preempt (pid 15) waited ≥ 191.200 ms runnable on CPU 0" (a kernel thread the
/// pipe tasks' timer interrupts woke, which then ran unrecorded) and 34 `switch_prev_mismatch`
/// (on the 643 MB `sched:*` benchmark file: 3 MEDIUM waits of 37–55 s and 98.5 % of switches
/// "inconsistent", an error). Now the recording is said to be per-task (`analyze`'s data
/// quality and `info`), no finding names a task outside it — perf's own view of which tasks
/// those are: the context tids `perf script` prints — and no switch is called inconsistent.
#[test]
fn a_per_task_recording_names_no_task_it_did_not_record() {
    let file = fixture("fixtures/real_world/per_task.perf.data");
    let r = analyze(&file, &[]);
    let dq = &r["data_quality"];
    assert_eq!(dq["tasks_partly_recorded"]["count"], 1, "{dq:#}");
    assert!(
        dq["task_not_recorded"]["count"].as_u64().unwrap_or(0) > 0,
        "{dq:#}"
    );
    for key in ["switch_prev_mismatch", "switch_records_inconsistent"] {
        assert!(dq.get(key).is_none(), "{key}: {dq:#}");
    }
    let info = String::from_utf8(stallscope(["info".as_ref(), file.as_os_str()])).unwrap();
    assert!(info.contains("a per-task recording"), "{info}");
    let named: Vec<i64> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["tasks"].as_array().unwrap().iter())
        .filter_map(|t| t["pid"].as_i64())
        .collect();
    assert!(
        !named.contains(&15),
        "rcu_preempt named: {:#}",
        r["findings"]
    );
    if perf_installed() {
        let contexts: Vec<i64> = perf_out(&["script", "-F", "tid"], &file)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        for pid in &named {
            assert!(contexts.contains(pid), "pid {pid} is not a recorded task");
        }
        // its `perf script --header` text says the same (the header block is read before
        // the first event, as a perf.data's header is)
        let text = std::env::temp_dir().join(format!("per_task-{}.txt", std::process::id()));
        std::fs::write(&text, perf_out(&["script", "--header"], &file)).unwrap();
        let from_text = analyze(&text, &[]);
        let _ = std::fs::remove_file(&text);
        assert_eq!(
            from_text["data_quality"]["tasks_partly_recorded"]["count"], 1,
            "{:#}",
            from_text["data_quality"]
        );
        assert!(from_text["data_quality"]
            .get("switch_prev_mismatch")
            .is_none());
        let titles = |r: &Value| -> Vec<String> {
            r["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["title"].as_str().unwrap_or("").to_string())
                .collect()
        };
        assert_eq!(titles(&from_text), titles(&r));
    }
}

/// #29: a trace.dat that carries its recording host's kallsyms (fixtures/real_world/
/// stacks_kallsyms.dat.xz, `stallscope record --stacks --kallsyms` by
/// `fixtures/capture/capture_kallsyms_stacks.sh`) read on a machine running another kernel —
/// made here by renaming the release in a copy (no other kernel boots here) — names its
/// frames from its own table. Before, `analyze` warned "kernel frames are shown as addresses
/// (no usable kernel symbol table): kernel release differs … pass --kallsyms" while `dump`
/// and `profile` named them (the same warning on a real trace-cmd v7 file of another machine
/// carrying 162 357 functions).
#[test]
fn a_trace_dat_with_its_own_kallsyms_needs_no_host_table() {
    use std::io::Read;
    let xz = std::fs::File::open(fixture("fixtures/real_world/stacks_kallsyms.dat.xz")).unwrap();
    let mut raw = Vec::new();
    xz2::read::XzDecoder::new(xz).read_to_end(&mut raw).unwrap();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let recorded = {
        let dir = std::env::temp_dir().join(format!("ks-{}.dat", std::process::id()));
        std::fs::write(&dir, &raw).unwrap();
        let r = analyze(&dir, &[]);
        let _ = std::fs::remove_file(&dir);
        r["inputs"][0]["kernel_release"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // a release of the same length that is not this machine's
    let other: String = recorded
        .chars()
        .map(|c| if c.is_ascii_digit() { '9' } else { c })
        .collect();
    assert_ne!(other, release.trim());
    let mut copy = Vec::with_capacity(raw.len());
    let mut rest = &raw[..];
    while let Some(at) = rest
        .windows(recorded.len())
        .position(|w| w == recorded.as_bytes())
    {
        copy.extend_from_slice(&rest[..at]);
        copy.extend_from_slice(other.as_bytes());
        rest = &rest[at + recorded.len()..];
    }
    copy.extend_from_slice(rest);
    let file = std::env::temp_dir().join(format!("ks-other-{}.dat", std::process::id()));
    std::fs::write(&file, &copy).unwrap();
    let r = analyze(&file, &[]);
    let dump = String::from_utf8(stallscope([
        "dump".as_ref(),
        "--source".as_ref(),
        file.as_os_str(),
    ]))
    .unwrap();
    let _ = std::fs::remove_file(&file);
    assert_eq!(r["inputs"][0]["kernel_release"], other.as_str());
    let dq = &r["data_quality"];
    for key in ["kernel_symbols", "kernel_symbols_embedded"] {
        assert!(dq.get(key).is_none(), "{key}: {dq:#}");
    }
    // the frames `dump` prints are named (the scheduler's own entry among them)
    assert!(dump.contains("__schedule"), "no named frame in dump");
}

/// Issue #28: the recorder is not a suspect. On a desktop-like busy machine recorded with
/// `stallscope record --events chain` (fixtures/busy/compile: a hog a CPU and a compile
/// loop) no finding is HIGH, none is about the recorder's own threads, and at most one
/// starvation finding stands beside the saturation verdict; on the bfq fixture (recorded
/// while other stallscope processes ran) the ping-pong pairs of `stallscope` and its
/// `perf-decode` thread are left out, counted once in the data quality, and come back with
/// `--include-recorder`.
#[test]
fn the_recorder_is_no_suspect_on_busy_recordings() {
    let is_recorder = |comm: &str| {
        comm == "stallscope"
            || comm == "perf"
            || comm.starts_with("stallscope-")
            || comm.starts_with("tracedat-")
    };
    let subjects = |r: &Value| -> Vec<String> {
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|f| f["tasks"].as_array().cloned().unwrap_or_default())
            .filter(|t| {
                ["victim", "partner", "blocked", "waiter"].contains(&t["role"].as_str().unwrap())
            })
            .map(|t| t["comm"].as_str().unwrap().to_string())
            .collect()
    };
    let r = analyze(&fixture("fixtures/busy/compile.dat.zst"), &[]);
    let all = r["findings"].as_array().unwrap();
    assert!(all.iter().all(|f| f["severity"] != "high"), "{r:#}");
    assert!(findings(&r, "runqueue-starvation").len() <= 1, "{r:#}");
    assert!(!subjects(&r).iter().any(|c| is_recorder(c)), "{r:#}");

    let bfq = fixture("fixtures/detectors/dispatch-starvation/bfq.trace.dat.zst");
    let r = analyze(&bfq, &[]);
    assert!(!subjects(&r).iter().any(|c| is_recorder(c)), "{r:#}");
    let left_out = r["data_quality"]["recorder_findings_left_out"]["count"]
        .as_u64()
        .unwrap_or(0);
    assert!(left_out >= 1, "{:#}", r["data_quality"]);
    let kept = analyze(&bfq, &["--include-recorder"]);
    assert_eq!(
        kept["findings"].as_array().unwrap().len() as u64,
        all_len(&r) + left_out,
        "{kept:#}"
    );
    assert!(subjects(&kept).iter().any(|c| is_recorder(c)), "{kept:#}");
    assert!(kept["data_quality"]["recorder_findings_left_out"].is_null());
}

/// Issue #28: a command printing into a pipe on a busy machine (fixtures/busy/pipe-burst:
/// `seq` line by line into `cat`, both on CPU 1, for 74 ms of a 4 s recording beside
/// `stress-ng --cpu 2`). Each line wakes `cat`, which preempts `seq`: a real wakeup-preemption
/// ping-pong, fast and costly, but a burst — MEDIUM, saying so, never HIGH (before: HIGH, as
/// the lab incidents whose ping-pong fills the capture).
#[test]
fn a_pipe_burst_on_a_busy_machine_is_no_high() {
    let r = analyze(&fixture("fixtures/busy/pipe-burst.dat.zst"), &[]);
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["severity"] != "high"),
        "{r:#}"
    );
    let pp = findings(&r, "wakeup-ping-pong");
    let pair = pp
        .iter()
        .find(|f| {
            let comms = task_comms(f);
            comms.contains(&"seq") && comms.contains(&"cat")
        })
        .unwrap_or_else(|| panic!("the seq | cat ping-pong: {r:#}"));
    let m = &pair["measures"];
    // all that makes a ping-pong high — but sustained
    assert!(m["handoffs_per_s"].as_u64().unwrap() >= 5000, "{m}");
    assert!(
        m["wakeup_preemption_permille"].as_u64().unwrap() >= 300,
        "{m}"
    );
    assert!(m["cpu_idle_permille"].as_u64().unwrap() < 100, "{m}");
    assert!(m["share_of_trace_permille"].as_u64().unwrap() < 500, "{m}");
    assert_eq!(pair["severity"], "medium");
    assert!(
        pair["title"].as_str().unwrap().contains("a burst"),
        "{}",
        pair["title"]
    );
}

fn all_len(r: &Value) -> u64 {
    r["findings"].as_array().unwrap().len() as u64
}

/// Issue #28: autogroup (on by default in most distributions) on a busy machine.
/// fixtures/busy/autogroup: `taskset -c 1 setsid stress-ng --cpu 1` beside `taskset -c 1
/// stress-ng --cpu 4` — the lone session's hog gets half of CPU 1, each of the four an
/// eighth (~40 ms waits). Recorded with context (each task's /proc/PID/autogroup), the
/// model owes each of the four what autogroup gives — about 5/8 of what nice weights alone
/// would (an eighth against a fifth) — so no wait is unfair and none is HIGH; what is
/// reported is the pinning (CPU 0 idles while they wait: cause `affinity`, LOW). From
/// `perf sched record` (no context) nothing is HIGH either, and a wait no recorded weight
/// explains says autogroup may explain it and how to record it. (Before autogroup was
/// modelled, entitlements were the nice weights' and such waits "not explained".)
#[test]
fn autogroup_fairness_is_no_starvation() {
    let r = analyze(&fixture("fixtures/busy/autogroup.dat.zst"), &[]);
    let all = r["findings"].as_array().unwrap();
    assert!(all.iter().all(|f| f["severity"] != "high"), "{r:#}");
    let peers: Vec<&Value> = findings(&r, "runqueue-starvation")
        .into_iter()
        .filter(|f| {
            with_role(f, "victim")
                .iter()
                .any(|v| v["comm"] == "stress-ng-cpu")
        })
        .collect();
    assert!(!peers.is_empty(), "{r:#}");
    for f in peers {
        assert!(
            !["not_explained_by_weights", "context_not_recorded"].contains(&cause_kind(f)),
            "{f:#}"
        );
        // owed by the sessions' group weights, well under what nice weights alone give
        let (group, nice) = (
            measure(f, "worst_wait_entitled_ns"),
            measure(f, "worst_wait_entitled_nice_ns"),
        );
        assert!(group * 10 <= nice * 8, "{group} vs {nice}: {f:#}");
    }
    let r = analyze(&fixture("fixtures/busy/autogroup.perf.data"), &[]);
    let all = r["findings"].as_array().unwrap();
    assert!(all.iter().all(|f| f["severity"] != "high"), "{r:#}");
    for f in findings(&r, "runqueue-starvation") {
        if ["not_explained_by_weights", "context_not_recorded"].contains(&cause_kind(f)) {
            let hint = f["hint"].as_str().unwrap();
            assert!(hint.to_lowercase().contains("autogroup"), "{f:#}");
            assert!(hint.contains("stallscope record"), "{f:#}");
        }
    }
}

/// Issue #28: autogroup as the cause. fixtures/busy/autogroup-spread: the same lone-session
/// hog and four peers on CPU 1, but the peers' session also runs 32 hogs on CPU 0 — its
/// group's weight is split over the CPUs by load, so on CPU 1 the four get about a tenth
/// together and wait ~150 ms each, which nice weights alone (a fifth each) would call
/// unfair. With the recorded context the cause is `autogroup` and the finding is never HIGH;
/// from `perf sched record` (no context) the same waits are at most MEDIUM and say autogroup
/// may explain them and how to record it. (Before autogroup was modelled: HIGH, "not
/// explained".)
#[test]
fn autogroup_is_the_cause_when_a_sessions_weight_is_spread() {
    let r = analyze(&fixture("fixtures/busy/autogroup-spread.dat.zst"), &[]);
    let all = r["findings"].as_array().unwrap();
    assert!(all.iter().all(|f| f["severity"] != "high"), "{r:#}");
    let causes: Vec<&str> = findings(&r, "runqueue-starvation")
        .into_iter()
        .filter(|f| {
            with_role(f, "victim")
                .iter()
                .any(|v| v["comm"] == "stress-ng-cpu")
        })
        .map(cause_kind)
        .collect();
    assert!(causes.contains(&"autogroup"), "{causes:?}: {r:#}");
    assert!(
        !causes.contains(&"not_explained_by_weights"),
        "{causes:?}: {r:#}"
    );
    let r = analyze(&fixture("fixtures/busy/autogroup-spread.perf.data"), &[]);
    let all = r["findings"].as_array().unwrap();
    assert!(all.iter().all(|f| f["severity"] != "high"), "{r:#}");
    let unexplained: Vec<&Value> = findings(&r, "runqueue-starvation")
        .into_iter()
        .filter(|f| ["not_explained_by_weights", "context_not_recorded"].contains(&cause_kind(f)))
        .collect();
    assert!(!unexplained.is_empty(), "{r:#}");
    for f in unexplained {
        let hint = f["hint"].as_str().unwrap();
        assert!(hint.to_lowercase().contains("autogroup"), "{f:#}");
        assert!(hint.contains("stallscope record"), "{f:#}");
    }
}

/// Issue #29: a real recording that no detector can use (interrupt events only) is not a
/// clean bill of health: `nothing_analyzed` says no detector could run, and `--fail-on high`
/// exits 2 instead of passing.
#[test]
fn nothing_to_run_is_said_and_fails_the_gate() {
    let file = fixture("fixtures/nothing/irq-only.dat.zst");
    let r = analyze(&file, &[]);
    assert!(r["detectors_run"].as_array().unwrap().is_empty(), "{r:#}");
    let why = r["nothing_analyzed"].as_str().expect("nothing_analyzed");
    assert!(why.contains("no detector could run"), "{why}");
    let gate = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(["analyze", "--fail-on", "high"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(gate.status.code(), Some(2), "{gate:?}");
    // a trace a detector can use is analyzed as before
    let r = analyze(&fixture("fixtures/busy/compile.dat.zst"), &[]);
    assert!(r["nothing_analyzed"].is_null(), "{r:#}");
}

/// Issue #28: `-q` keeps the data quality that can change the conclusion (warnings, errors)
/// and counts the info notes in one line; examples are in seconds with task names, never
/// the model's internal representation.
#[test]
fn quiet_output_and_human_examples() {
    let file = fixture("fixtures/busy/cpu1.dat.zst");
    let run = |args: &[&str]| {
        let mut all: Vec<std::ffi::OsString> = vec!["analyze".into()];
        all.extend(args.iter().map(Into::into));
        all.push(file.clone().into());
        String::from_utf8(stallscope(all)).unwrap()
    };
    let full = run(&[]);
    assert!(full.contains("info     cpus_partly_recorded"), "{full}");
    assert!(full.contains("e.g. "), "{full}");
    assert!(
        !full.contains("Runnable {") && !full.contains("Some("),
        "{full}"
    );
    assert!(
        full.lines()
            .any(|l| l.contains("ran with no switch-in recorded (it was runnable since ")),
        "{full}"
    );
    let quiet = run(&["-q"]);
    assert!(!quiet.contains("cpus_partly_recorded"), "{quiet}");
    assert!(!quiet.contains("e.g. "), "{quiet}");
    assert!(quiet.contains("info notes not shown (-q)"), "{quiet}");
    assert!(quiet.contains("Findings: "), "{quiet}");
}

/// The `cpu` column of a `waits.parquet`.
fn wait_cpus(path: &Path) -> Vec<Option<u32>> {
    use arrow_array::{Array, UInt32Array};
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let col = batch.column_by_name("cpu").expect("cpu column");
        let cpu = col.as_any().downcast_ref::<UInt32Array>().expect("u32");
        out.extend((0..cpu.len()).map(|k| cpu.is_valid(k).then(|| cpu.value(k))));
    }
    out
}

#[test]
fn cpu_saturation_is_one_verdict_on_the_oversubscribed_fixture() {
    let file = fixture("fixtures/detectors/cpu-saturation/oversubscribed.dat.zst");
    let r = analyze(&file, &[]);
    let fs = findings(&r, "cpu-saturation");
    assert_eq!(fs.len(), 1, "{r:#}");
    let f = fs[0];
    assert_eq!(f["severity"], "medium");
    assert_eq!(cause_kind(f), "saturation");
    assert_eq!(f["cpus"], serde_json::json!([0, 1]));
    // six hogs and a periodic task on two CPUs: between 3 and 4 runnable tasks per CPU
    let demand = measure(f, "demand_permille");
    assert!((3000..=4000).contains(&demand), "{demand}");
    assert!(measure(f, "busy_permille") >= 990);
    // the six hogs are the consumers, each near a sixth of the CPU set
    let consumers = with_role(f, "consumer");
    assert_eq!(consumers.len(), 5);
    for c in consumers {
        assert_eq!(c["comm"], "stress-ng-cpu", "{c}");
        let share = c["measures"]["share_of_cpus_permille"].as_i64().unwrap();
        assert!((130..=190).contains(&share), "{c}");
    }
    // the waits are timehist's scheduling delays: the longest, and how many reach 10 ms
    let delays = timehist_sch_delays(&file, None);
    assert_eq!(measure(f, "wait_max_ns"), *delays.iter().max().unwrap());
    assert_eq!(
        measure(f, "waits_over_10ms"),
        delays.iter().filter(|&&d| d >= 10_000_000).count() as i64
    );
    // nobody is a culprit of fair sharing, and nothing is high
    assert!(findings(&r, "runqueue-starvation").is_empty(), "{r:#}");
    assert!(r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["severity"] != "high"));
    // busy CPUs without a queue are not saturated
    let r = analyze(
        &fixture("fixtures/detectors/cpu-saturation/healthy-busy.dat.zst"),
        &[],
    );
    assert!(findings(&r, "cpu-saturation").is_empty(), "{r:#}");
}

#[test]
fn wakeup_ping_pong_severity_follows_the_cost() {
    // the incident's pattern: fio preempted right after waking the loop worker, CPU 1 busy
    let r = analyze(
        &fixture("fixtures/detectors/wakeup-ping-pong/fio-dio.perf.data"),
        &["--select", "wakeup-ping-pong"],
    );
    let pair = findings(&r, "wakeup-ping-pong")
        .into_iter()
        .find(|f| f["title"].as_str().unwrap().contains("back and forth"))
        .expect("the pair");
    assert_eq!(pair["severity"], "high");
    assert_eq!(cause_kind(pair), "wakeup_preemption");
    assert!(measure(pair, "cpu_idle_permille") < 100, "{pair:#}");
    // the DIO completion path of the pre-written files: ksoftirqd ⇄ the completion kworker,
    // with CPU 1 idle a quarter of the window: low, and the work function named from the
    // file's kallsyms, never as an address
    let r = analyze(
        &fixture("fixtures/detectors/worker-flood/prewritten.dat.xz"),
        &["--select", "wakeup-ping-pong"],
    );
    let fs = findings(&r, "wakeup-ping-pong");
    assert!(fs.iter().all(|f| f["severity"] != "high"), "{r:#}");
    let pair = fs
        .iter()
        .find(|f| f["title"].as_str().unwrap().contains("back and forth"))
        .expect("the pair");
    assert_eq!(pair["severity"], "low");
    assert!(measure(pair, "cpu_idle_permille") >= 100, "{pair:#}");
    let title = pair["title"].as_str().unwrap();
    assert!(title.contains("runs iomap_dio_complete_work"), "{title}");
    assert!(!r.to_string().contains("0xffffffff"), "{r:#}");
}

/// Handoffs between `a` and `b` on `cpu` by the detector's definition (consecutive non-idle
/// tasks, idle gap ≤ 2 ms), counted from `perf script` text: (count, first ts, last ts).
fn perf_script_handoffs(file: &Path, cpu: i64, a: i64, b: i64) -> (u64, u64, u64) {
    let text = perf_out(&["script", "--ns", "-F", "cpu,time,event,trace"], file);
    let field = |line: &str, key: &str| -> Option<i64> {
        let at = line.find(key)? + key.len();
        line[at..].split_whitespace().next()?.parse().ok()
    };
    let (mut last, mut n, mut first_ts, mut last_ts): (Option<(i64, u64)>, u64, u64, u64) =
        (None, 0, 0, 0);
    for line in text.lines() {
        if !line.contains("sched:sched_switch:")
            || !line.trim_start().starts_with(&format!("[{cpu:03}]"))
        {
            continue;
        }
        let ts_text = line
            .split_whitespace()
            .nth(1)
            .unwrap()
            .trim_end_matches(':');
        let ts = dec_to_ns(ts_text, 1_000_000_000);
        let (Some(prev), Some(next)) = (field(line, " prev_pid="), field(line, " next_pid="))
        else {
            continue;
        };
        if prev > 0 {
            last = Some((prev, ts));
        }
        if next > 0 {
            if let Some((p, out)) = last {
                if p != next
                    && ts - out <= 2_000_000
                    && ((p == a && next == b) || (p == b && next == a))
                {
                    if n == 0 {
                        first_ts = ts;
                    }
                    n += 1;
                    last_ts = ts;
                }
            }
        }
    }
    (n, first_ts, last_ts)
}

#[test]
fn wakeup_ping_pong_positive_fixture_names_fio_and_its_kworker() {
    let file = fixture("fixtures/detectors/wakeup-ping-pong/fio-dio.perf.data");
    let r = analyze(&file, &["--select", "wakeup-ping-pong"]);
    let pairs: Vec<&Value> = findings(&r, "wakeup-ping-pong")
        .into_iter()
        .filter(|f| f["measures"].get("handoffs").is_some())
        .collect();
    let fio = pairs
        .iter()
        .find(|f| {
            let comms = task_comms(f);
            comms.iter().any(|c| c.starts_with("fio"))
                && comms
                    .iter()
                    .any(|c| c.starts_with("kworker") || c.starts_with("ksoftirqd"))
        })
        .unwrap_or_else(|| panic!("no fio/kworker pair: {pairs:#?}"));
    assert_eq!(fio["severity"], "high");
    assert!(measure(fio, "handoffs_per_s") >= 10_000, "{fio}");
    assert!(
        measure(fio, "io_completions") > 0,
        "block_rq_complete events are counted"
    );
    let storm = findings(&r, "wakeup-ping-pong")
        .into_iter()
        .any(|f| f["title"].as_str().unwrap().contains("storm on CPU 1"));
    assert!(storm, "CPU 1 switches ~50x more than CPU 0");
    if !perf_installed() {
        return;
    }
    let pids: Vec<i64> = fio["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["pid"].as_i64().unwrap())
        .collect();
    let cpu = fio["cpus"][0].as_i64().unwrap();
    let (n, first, last) = perf_script_handoffs(&file, cpu, pids[0], pids[1]);
    assert_eq!(measure(fio, "handoffs"), n as i64);
    assert_eq!(fio["window"]["start_ns"].as_u64().unwrap(), first);
    assert_eq!(fio["window"]["end_ns"].as_u64().unwrap(), last);
    assert_eq!(
        measure(fio, "handoffs_per_s") as u64,
        n * 1_000_000_000 / (last - first)
    );
}

#[test]
fn wakeup_ping_pong_healthy_fixture_is_silent() {
    let r = analyze(
        &fixture("fixtures/detectors/wakeup-ping-pong/healthy-nodio.perf.data"),
        &[],
    );
    let fs = findings(&r, "wakeup-ping-pong");
    assert!(fs.is_empty(), "{fs:#?}");
}

#[test]
fn idle_while_runnable_pinned_hogs_are_found_and_healthy_is_silent() {
    let r = analyze(
        &fixture("fixtures/detectors/idle-while-runnable/pinned.perf.data"),
        &[],
    );
    let fs = findings(&r, "idle-while-runnable");
    assert!(!fs.is_empty(), "two hogs pinned to CPU 1 while CPU 0 idles");
    for f in &fs {
        assert_eq!(with_role(f, "victim")[0]["comm"], "stress-ng-cpu", "{f}");
        assert_eq!(measure(f, "waiting_cpu"), 1);
        assert_eq!(measure(f, "idle_cpu"), 0);
        // never placed elsewhere in many runs while CPU 0 idled: inferred, and said so
        assert!(
            f["title"].as_str().unwrap().contains("probably pinned"),
            "{f}"
        );
        assert_eq!(cause_kind(f), "affinity", "{f}");
        assert_eq!(f["severity"], "low", "affinity is only inferred");
    }
    // recorded with `stallscope record`: two hogs and a periodic task pinned to CPU 1 wait
    // their turns while CPU 0 idles (timehist shows it), but their recorded affinity forbids
    // CPU 0: nothing to report
    let file = fixture("fixtures/detectors/idle-while-runnable/healthy-pinned-recorded.dat.zst");
    let waits = timehist_sch_delays(&file, None)
        .into_iter()
        .filter(|&d| d >= 3_000_000)
        .count();
    assert!(waits >= 50, "{waits} waits of 3 ms or more");
    let r = analyze(&file, &[]);
    assert!(findings(&r, "idle-while-runnable").is_empty(), "{r:#}");
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["severity"] == "low"),
        "{r:#}"
    );
    // runqueue-starvation names the cause of the periodic task's waits: its recorded
    // affinity kept it on the busy CPU 1 while CPU 0 (forbidden to it) idled through them;
    // fair among the pinned tasks, so low
    let rs = findings(&r, "runqueue-starvation");
    assert!(!rs.is_empty(), "{r:#}");
    for f in &rs {
        assert_eq!(cause_kind(f), "affinity", "{f}");
        assert!(
            measure(f, "worst_wait_disallowed_cpus_idle_ns") * 2 >= measure(f, "worst_wait_ns"),
            "{f}"
        );
        assert!(
            f["cause"]["text"]
                .as_str()
                .unwrap()
                .starts_with("Affinity: the victim may run only on CPUs 1"),
            "{f}"
        );
    }
    // the recording's own command line pins cyclictest (`-- taskset -c 1 cyclictest …`):
    // CPU 0 idling beside it is no balancing failure
    let r = analyze(&fixture("fixtures/sched/starve.perf.data"), &[]);
    let fs = findings(&r, "idle-while-runnable");
    assert!(fs.is_empty(), "{fs:#?}");
    let r = analyze(
        &fixture("fixtures/detectors/idle-while-runnable/healthy.perf.data"),
        &[],
    );
    let fs = findings(&r, "idle-while-runnable");
    assert!(fs.is_empty(), "{fs:#?}");
}
