//! `lock-spinning` on the real fixtures (fixtures/detectors/lock-spinning, README there):
//! 8 processes creating and unlinking files in ONE directory (XFS on a loop device, tmpfs)
//! versus one directory EACH, `perf record -a -g` on kernel 6.18.
//!
//! * one directory: a finding naming `down_write` from `do_unlinkat` and `path_openat` (the
//!   directory inode's rwsem), mostly spinning (`rwsem_spin_on_owner`), 8 waiting tasks;
//!   its `self_<fn>_bp` measures equal `perf report --no-children --sort sym` on the same
//!   file (the committed `<case>.report-sym.txt`, the peer's numbers).
//! * one directory each: no rwsem path at all, even with every threshold at 0.
//! * perf.data (symbolized with the committed kallsyms) and `perf script` text give the same
//!   numbers; `perf report` text (pruned by perf) names the same path.
//! * `--format json` validates against docs/report.schema.json; trace inputs list
//!   lock-spinning as skipped with `perf record -a -g`.

use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

use serde_json::Value;

mod common;
use common::{json, report_errors, root, run};

const DIR: &str = "fixtures/detectors/lock-spinning";

fn fixture(name: &str) -> String {
    root().join(DIR).join(name).to_string_lossy().into_owned()
}

/// The committed kallsyms, decompressed once into the target directory.
fn kallsyms() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        let mut text = Vec::new();
        stallscope::read::Input::open(&fixture("kallsyms.txt.xz"))
            .expect("open kallsyms")
            .into_reader()
            .read_to_end(&mut text)
            .expect("decompress kallsyms");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let path = dir.join(format!("lock-spinning-kallsyms-{}.txt", std::process::id()));
        std::fs::write(&path, text).expect("write kallsyms");
        path.to_string_lossy().into_owned()
    })
}

/// `analyze --format json` of `<case>.<kind>` (kind: perf.data.xz, perf-script.txt.xz,
/// report-graph.txt) with extra arguments.
fn analyze(case: &str, kind: &str, extra: &[&str]) -> Value {
    let file = fixture(&format!("{case}.{kind}"));
    let mut args = vec!["analyze", "--format", "json", "--select", "lock-spinning"];
    if kind.starts_with("perf.data") {
        args.extend(["--kallsyms", kallsyms()]);
    }
    args.extend(extra);
    args.push(&file);
    json(&args)
}

fn findings(v: &Value) -> Vec<&Value> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["detector"] == "lock-spinning")
        .collect()
}

fn measure(f: &Value, name: &str) -> i64 {
    f["measures"][name]
        .as_i64()
        .unwrap_or_else(|| panic!("no measure {name} in {}", f["measures"]))
}

/// `perf report --no-children --sort sym` rows of the committed peer file: symbol → basis
/// points (`8.67%` → 867).
fn perf_self_shares(case: &str) -> Vec<(String, i64)> {
    let text = std::fs::read_to_string(fixture(&format!("{case}.report-sym.txt"))).expect("peer");
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains('%'))
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let pct = it.next()?.strip_suffix('%')?;
            let (int, frac) = pct.split_once('.')?;
            let bp = int.parse::<i64>().ok()? * 100 + frac.parse::<i64>().ok()?;
            let _kind = it.next()?; // [k] or [.]
            Some((it.collect::<Vec<_>>().join(" "), bp))
        })
        .collect()
}

fn assert_directory_rwsem(f: &Value, with_comms: bool) {
    let title = f["title"].as_str().expect("title");
    assert!(title.starts_with("down_write"), "{title}");
    assert!(title.contains("do_unlinkat"), "{title}");
    assert!(title.contains("path_openat"), "{title}");
    assert!(title.contains("i_rwsem"), "{title}");
    assert!(
        measure(f, "caller_do_unlinkat_bp") >= 300,
        "{}",
        f["measures"]
    );
    assert!(
        measure(f, "caller_path_openat_bp") >= 300,
        "{}",
        f["measures"]
    );
    // the waiters spin on the owner far more than they are seen going to sleep
    assert!(
        measure(f, "spin_bp") > 5 * measure(f, "sleep_bp"),
        "{}",
        f["measures"]
    );
    assert!(measure(f, "spin_bp") >= 800, "{}", f["measures"]);
    let tasks = f["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 8, "the 8 dirstorm processes: {tasks:#?}");
    assert_eq!(measure(f, "tasks"), 8);
    if with_comms {
        assert!(tasks.iter().all(|t| t["comm"] == "dirstorm"), "{tasks:#?}");
    }
    assert!(tasks.iter().all(|t| t["role"] == "waiter"));
    assert_eq!(f["cpus"], serde_json::json!([0, 1]));
    assert!(!f["evidence"].as_array().expect("evidence").is_empty());
}

#[test]
fn one_directory_blames_the_directory_rwsem() {
    for case in ["xfs-shared", "tmpfs-shared"] {
        for kind in ["perf.data.xz", "perf-script.txt.xz"] {
            let v = analyze(case, kind, &[]);
            let f = findings(&v);
            assert!(!f.is_empty(), "{case}.{kind}: no finding");
            // the heaviest path is the directory rwsem
            let top = f
                .iter()
                .max_by_key(|f| measure(f, "share_bp"))
                .expect("a finding");
            assert_directory_rwsem(top, kind.starts_with("perf-script"));
            assert_ne!(top["severity"], "low", "{case}.{kind}: {}", top["title"]);
            // every lock-function self share the finding lists is perf report's number
            let peer = perf_self_shares(case);
            let mut checked = 0;
            for (name, value) in top["measures"].as_object().expect("measures") {
                let Some(sym) = name
                    .strip_prefix("self_")
                    .and_then(|n| n.strip_suffix("_bp"))
                else {
                    continue;
                };
                let ours = value.as_i64().expect("int");
                let theirs = peer
                    .iter()
                    .find(|(s, _)| s == sym)
                    .map(|(_, bp)| *bp)
                    .unwrap_or_else(|| panic!("{case}: {sym} not in perf report"));
                assert!(
                    (ours - theirs).abs() <= 1,
                    "{case}.{kind}: {sym} ours {ours} bp, perf report {theirs} bp"
                );
                checked += 1;
            }
            assert!(checked >= 3, "{case}.{kind}: {}", top["measures"]);
        }
    }
}

/// `analyze --oneline --select lock-spinning` of every case's perf script text: one line
/// for a shared case, nothing for a private one (the lines themselves are snapshots in
/// analyze_snapshots.rs; the facts are checked by the tests above).
#[test]
fn oneline_per_case() {
    for case in ["xfs-shared", "xfs-private", "tmpfs-shared", "tmpfs-private"] {
        let out = run(&[
            "analyze",
            "--oneline",
            "--select",
            "lock-spinning",
            &fixture(&format!("{case}.perf-script.txt.xz")),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = String::from_utf8(out.stdout).expect("utf-8");
        if case.ends_with("-private") {
            assert_eq!(got, "", "{case} is a healthy control");
        } else {
            assert_eq!(got.lines().count(), 1, "{case}: {got}");
        }
    }
}

#[test]
fn xfs_one_directory_numbers() {
    // perf report --no-children --sort sym -i xfs-shared.perf.data: rwsem_spin_on_owner 8.67 %
    let v = analyze("xfs-shared", "perf.data.xz", &[]);
    let f = findings(&v);
    let top = f
        .iter()
        .max_by_key(|f| measure(f, "share_bp"))
        .expect("a finding");
    assert_eq!(measure(top, "self_rwsem_spin_on_owner_bp"), 867);
    assert_eq!(measure(top, "total_samples"), 2100);
    assert_eq!(top["severity"], "medium");
}

#[test]
fn one_directory_each_blames_no_rwsem() {
    for case in ["xfs-private", "tmpfs-private"] {
        for kind in [
            "perf.data.xz",
            "perf-script.txt.xz",
            "report-graph.txt",
            "folded.xz",
        ] {
            let v = analyze(case, kind, &[]);
            assert!(
                v["detectors_run"]
                    .as_array()
                    .expect("run")
                    .contains(&"lock-spinning".into()),
                "{v}"
            );
            let f = findings(&v);
            assert!(
                f.iter().all(|f| !f["title"]
                    .as_str()
                    .is_some_and(|t| t.contains("rwsem") || t.contains("down_write"))),
                "{case}.{kind}: {f:#?}"
            );
            if kind != "report-graph.txt" {
                assert!(f.is_empty(), "{case}.{kind}: {f:#?}");
            }
        }
        // with every threshold at zero, all lock paths show: still none on an rwsem
        let v = analyze(
            case,
            "perf-script.txt.xz",
            &[
                "--set",
                "lock-spinning.min_share_permille=0",
                "--set",
                "lock-spinning.min_samples=0",
            ],
        );
        let f = findings(&v);
        assert!(
            f.len() >= 10,
            "{case}: the spinlock paths show: {}",
            f.len()
        );
        for x in &f {
            let t = x["title"].as_str().expect("title");
            assert!(!t.contains("rwsem"), "{case}: {t}");
            assert!(measure(x, "share_bp") < 300, "{case}: {t}");
        }
    }
}

#[test]
fn perf_data_and_perf_script_text_agree() {
    for case in ["xfs-shared", "tmpfs-shared"] {
        let a = analyze(case, "perf.data.xz", &[]);
        let b = analyze(case, "perf-script.txt.xz", &[]);
        let (fa, fb) = (findings(&a), findings(&b));
        assert_eq!(fa.len(), fb.len(), "{case}");
        for (x, y) in fa.iter().zip(&fb) {
            // perf script prints microseconds: times agree to 1 µs, the rest exactly
            let (mut mx, mut my) = (x["measures"].clone(), y["measures"].clone());
            let (tx, ty) = (measure(x, "peak_start_ns"), measure(y, "peak_start_ns"));
            assert!((tx - ty).abs() < 1000, "{case}: {tx} vs {ty}");
            mx["peak_start_ns"] = 0.into();
            my["peak_start_ns"] = 0.into();
            assert_eq!(mx, my, "{case}");
            assert_eq!(x["severity"], y["severity"], "{case}");
        }
    }
}

#[test]
fn folded_stacks_give_the_same_shares() {
    for case in ["xfs-shared", "tmpfs-shared"] {
        let a = analyze(case, "perf-script.txt.xz", &[]);
        let b = analyze(case, "folded.xz", &[]);
        let (fa, fb) = (findings(&a), findings(&b));
        assert_eq!(fa.len(), fb.len(), "{case}");
        assert_eq!(b["inputs"][0]["format"], "folded");
        for (x, y) in fa.iter().zip(&fb) {
            assert_eq!(
                x["title"].as_str().map(|t| t.split(';').next()),
                y["title"].as_str().map(|t| t.split(';').next()),
                "{case}"
            );
            for m in [
                "share_bp",
                "spin_bp",
                "sleep_bp",
                "slowpath_bp",
                "release_bp",
                "caller_do_unlinkat_bp",
                "caller_path_openat_bp",
                "samples",
                "total_samples",
            ] {
                assert!(
                    (measure(x, m) - measure(y, m)).abs() <= 2,
                    "{case} {m}: {} vs {}",
                    measure(x, m),
                    measure(y, m)
                );
            }
        }
    }
}

#[test]
fn perf_report_text_names_the_same_path() {
    for case in ["xfs-shared", "tmpfs-shared"] {
        let v = analyze(case, "report-graph.txt", &[]);
        let f = findings(&v);
        let top = f
            .iter()
            .max_by_key(|f| measure(f, "share_bp"))
            .unwrap_or_else(|| panic!("{case}: no finding"));
        let title = top["title"].as_str().expect("title");
        assert!(title.starts_with("down_write"), "{title}");
        assert!(
            title.contains("do_unlinkat") && title.contains("path_openat"),
            "{title}"
        );
        assert!(measure(top, "spin_bp") >= 800, "{}", top["measures"]);
    }
}

#[test]
fn perf_report_text_pasted_without_its_header_names_the_same_path() {
    // a mailing-list excerpt: the entries and graphs, without the `#` header and ruler
    let dir = std::env::temp_dir().join(format!("ss-lockspin-paste-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for case in ["xfs-shared", "tmpfs-shared"] {
        let whole = analyze(case, "report-graph.txt", &[]);
        let text = std::fs::read_to_string(fixture(&format!("{case}.report-graph.txt"))).unwrap();
        let pasted: String = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        let path = dir.join(format!("{case}.pasted.txt"));
        std::fs::write(&path, pasted).unwrap();
        let v = json(&[
            "analyze",
            "--format",
            "json",
            "--select",
            "lock-spinning",
            path.to_str().unwrap(),
        ]);
        assert_eq!(v["inputs"][0]["format"], "perf-report-text", "{case}");
        let key = |v: &Value| -> Vec<(String, i64)> {
            findings(v)
                .iter()
                .map(|f| {
                    (
                        f["title"].as_str().unwrap().to_string(),
                        measure(f, "share_bp"),
                    )
                })
                .collect()
        };
        assert!(!key(&whole).is_empty(), "{case}");
        assert_eq!(key(&v), key(&whole), "{case}: pasted = whole");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn thresholds_are_parameters() {
    // 14.9 % of all samples, 31.8 % of the dirstorm tasks' own samples
    let v = analyze(
        "xfs-shared",
        "perf-script.txt.xz",
        &["--set", "lock-spinning.min_share_permille=200"],
    );
    assert_eq!(findings(&v).len(), 1, "31.8 % of its tasks' samples ≥ 10 %");
    let v = analyze(
        "xfs-shared",
        "perf-script.txt.xz",
        &[
            "--set",
            "lock-spinning.min_share_permille=200",
            "--set",
            "lock-spinning.min_task_share_permille=400",
        ],
    );
    assert!(findings(&v).is_empty(), "14.9 % < 20 % and 31.8 % < 40 %");
    let v = analyze(
        "xfs-shared",
        "perf-script.txt.xz",
        &["--set", "lock-spinning.high_permille=140"],
    );
    assert_eq!(findings(&v)[0]["severity"], "high");
}

#[test]
fn time_ranges_restrict_the_profile() {
    // samples span 9685.94 .. 9688.97 s; one second of them
    let v = analyze(
        "xfs-shared",
        "perf-script.txt.xz",
        &["--time", "9686..9687"],
    );
    let f = findings(&v);
    assert!(!f.is_empty());
    let n = measure(f[0], "total_samples");
    assert!((600..=800).contains(&n), "{n}");
    assert!(
        v["data_quality"]["profile_outside_time"].is_object(),
        "{}",
        v["data_quality"]
    );
    for x in &f {
        let w = &x["window"];
        assert!(w["start_ns"]
            .as_u64()
            .is_some_and(|t| t >= 9_686_000_000_000));
        assert!(w["end_ns"].as_u64().is_some_and(|t| t <= 9_687_000_000_000));
    }
}

#[test]
fn trace_inputs_skip_lock_spinning_with_the_record_command() {
    let file = root()
        .join("fixtures/detectors/idle-while-runnable/healthy.perf.data")
        .to_string_lossy()
        .into_owned();
    let v = json(&["analyze", "--format", "json", &file]);
    let skipped = v["skipped"].as_array().expect("skipped");
    let s = skipped
        .iter()
        .find(|s| s["id"] == "lock-spinning")
        .unwrap_or_else(|| panic!("{skipped:#?}"));
    assert!(
        s["record_command"]
            .as_str()
            .is_some_and(|c| c.starts_with("perf record -a -g")),
        "{s}"
    );
    assert!(
        s["reason"]
            .as_str()
            .is_some_and(|r| r.contains("CPU profile")),
        "{s}"
    );
}

#[test]
fn profile_inputs_skip_the_scheduler_detectors() {
    let v = analyze("tmpfs-shared", "report-graph.txt", &[]);
    assert_eq!(v["inputs"][0]["format"], "perf-report-text");
    let v = json(&[
        "analyze",
        "--format",
        "json",
        &fixture("tmpfs-shared.report-graph.txt"),
    ]);
    let skipped: Vec<&str> = v["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert!(skipped.contains(&"runqueue-starvation"), "{skipped:?}");
    assert!(!skipped.contains(&"lock-spinning"), "{skipped:?}");
}

/// perf script's own rendering of the sched set: for every blocked `sched_switch` of
/// dirstorm whose call chain goes `rwsem_down_write_slowpath ← down_write ← do_unlinkat |
/// path_openat`, the time to the task's next switch-in (µs resolution). Returns (ns, count).
fn perf_script_blocked_on_the_directory(case: &str) -> (u64, u64) {
    let mut text = String::new();
    stallscope::read::Input::open(&fixture(&format!("{case}.perf-script.txt.xz")))
        .expect("open")
        .into_reader()
        .read_to_string(&mut text)
        .expect("read");
    let field = |line: &str, key: &str| -> Option<String> {
        line.split_whitespace()
            .find_map(|t| t.strip_prefix(key).map(str::to_string))
    };
    let ts_ns = |line: &str| -> u64 {
        let t = line
            .split_whitespace()
            .find(|t| {
                t.ends_with(':') && t.contains('.') && t[..1].bytes().all(|b| b.is_ascii_digit())
            })
            .expect("timestamp");
        let (s, us) = t.trim_end_matches(':').split_once('.').expect("secs.usecs");
        s.parse::<u64>().unwrap() * 1_000_000_000 + us.parse::<u64>().unwrap() * 1000
    };
    // every blocked switch-out opens an interval (a later one of the same task replaces it:
    // its switch-in was not recorded in order); the interval counts when its stack is the
    // directory rwsem's
    let mut open: std::collections::HashMap<String, (u64, bool)> = Default::default();
    let (mut total, mut count) = (0u64, 0u64);
    let blocks: Vec<&str> = text.split("\n\n").collect();
    for b in blocks {
        let mut lines = b.lines();
        let Some(head) = lines.next() else { continue };
        if !head.contains(" sched:sched_switch: ") {
            continue;
        }
        let ts = ts_ns(head);
        if let Some(next) = field(head, "next_pid=") {
            if let Some((t0, dir)) = open.remove(&next) {
                if dir {
                    total += ts - t0;
                    count += 1;
                }
            }
        }
        let frames: Vec<&str> = lines
            .filter_map(|l| l.split_whitespace().nth(1))
            .map(|f| f.split("+0x").next().unwrap_or(f))
            .collect();
        let through_dir = frames.windows(3).any(|w| {
            w[0] == "rwsem_down_write_slowpath"
                && w[1] == "down_write"
                && (w[2] == "do_unlinkat" || w[2] == "path_openat")
        });
        let blocked = field(head, "prev_state=").is_some_and(|s| !s.starts_with('R'));
        let prev = field(head, "prev_pid=").expect("prev_pid");
        if blocked && prev != "0" && !frames.is_empty() {
            open.insert(prev, (ts, through_dir));
        }
    }
    (total, count)
}

#[test]
fn off_cpu_stacks_add_the_time_waiters_slept() {
    let v = analyze("xfs-shared-sched", "perf.data.xz", &[]);
    let f = findings(&v);
    let top = f
        .iter()
        .find(|f| f["title"].as_str().is_some_and(|t| t.contains("i_rwsem")))
        .unwrap_or_else(|| panic!("{f:#?}"));
    let title = top["title"].as_str().expect("title");
    assert!(title.starts_with("down_write"), "{title}");
    assert!(
        title.contains("do_unlinkat") && title.contains("path_openat"),
        "{title}"
    );
    assert_eq!(measure(top, "tasks"), 8);
    let (want_ns, want_n) = perf_script_blocked_on_the_directory("xfs-shared-sched");
    assert!(want_n > 1000, "{want_n} sleeps");
    let (ns, n) = (measure(top, "blocked_ns"), measure(top, "sleeps"));
    assert_eq!(n as u64, want_n, "sleeps: ours vs perf script");
    // perf script prints microseconds: each interval may differ by < 1 µs
    let diff = (ns - want_ns as i64).unsigned_abs();
    assert!(
        diff <= want_n * 1000,
        "blocked {ns} ns, perf script {want_ns} ns"
    );
    assert!(top["title"]
        .as_str()
        .unwrap()
        .contains("off CPU: 8 tasks blocked"));
    assert!(
        measure(top, "blocked_share_bp") >= 5000,
        "{}",
        top["measures"]
    );
    assert_eq!(top["severity"], "high", "blocked most of their time");
    // one directory each: no rwsem path, on CPU or off it
    let v = analyze("xfs-private-sched", "perf.data.xz", &[]);
    for x in findings(&v) {
        let t = x["title"].as_str().unwrap();
        assert!(!t.contains("rwsem") && !t.contains("down_write"), "{t}");
    }
    assert_eq!(
        perf_script_blocked_on_the_directory("xfs-private-sched").1,
        0
    );
}

// ---- JSON Schema (the keywords docs/report.schema.json uses) ----

#[test]
fn json_reports_validate_against_the_schema() {
    for case in ["xfs-shared", "xfs-private", "tmpfs-shared", "tmpfs-private"] {
        for kind in [
            "perf.data.xz",
            "perf-script.txt.xz",
            "report-graph.txt",
            "folded.xz",
        ] {
            let v = analyze(case, kind, &[]);
            let errors = report_errors(&v);
            assert!(errors.is_empty(), "{case}.{kind}: {errors:#?}");
        }
    }
    for case in ["xfs-shared-sched", "xfs-private-sched"] {
        for kind in ["perf.data.xz", "perf-script.txt.xz"] {
            let v = json(&[
                "analyze",
                "--format",
                "json",
                "--kallsyms",
                kallsyms(),
                &fixture(&format!("{case}.{kind}")),
            ]);
            let errors = report_errors(&v);
            assert!(errors.is_empty(), "{case}.{kind}: {errors:#?}");
        }
    }
}
