//! `stallscope profile`: output contracts and the perf oracle through the binary.
//!
//! - JSON self shares of `fixtures/profile/perf_cpu_fp/perf_cpu_fp.data` equal
//!   `perf report --stdio --no-children --sort sym -g none` (run now; perf required) for every
//!   kernel entry, and the children view's total shares of a symbol never fall below its self;
//! - `--kallsyms FILE` names kernel frames; a missing file is exit 2;
//! - garbage and empty inputs exit 2 with the place; `| head -1` exits 0; `--help` has examples;
//! - `dump` on a profile says to use `stallscope profile`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

mod common;
use common::{json, run};

fn fixture(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/profile")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

fn temp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stallscope-profile-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// `perf report` kernel entries: (basis points, address name).
fn perf_kernel_entries(data: &str) -> Vec<(u64, String)> {
    let out = Command::new("perf")
        .args([
            "report",
            "--stdio",
            "--no-children",
            "--sort",
            "sym",
            "-g",
            "none",
        ])
        .args(["--percent-limit", "0", "-f", "-i", data])
        .output()
        .expect("perf is installed (apt-get install linux-perf)");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (pct, sym) = l.trim_start().split_once("%  [k] ")?;
            let (i, f) = pct.split_once('.')?;
            Some((
                i.parse::<u64>().ok()? * 100 + f.parse::<u64>().ok()?,
                sym.trim().to_string(),
            ))
        })
        .collect()
}

#[test]
fn json_self_shares_equal_perf_report() {
    let data = fixture("perf_cpu_fp/perf_cpu_fp.data");
    let doc = json(&[
        "profile",
        &data,
        "--format",
        "json",
        "--top",
        "0",
        "--kallsyms",
        "none",
    ]);
    assert_eq!(doc["schema"], "stallscope.profile/1");
    assert_eq!(doc["format"], "perf-data");
    assert_eq!(doc["event"], "cpu-clock:pppH");
    assert_eq!(doc["stacks"], 781);
    assert_eq!(doc["total_weight"], 390_695_250u64);
    let functions = doc["functions"].as_array().unwrap();
    let entries = perf_kernel_entries(&data);
    assert!(entries.len() >= 4);
    for (bp, sym) in entries {
        let f = functions
            .iter()
            .find(|f| f["name"] == sym.as_str())
            .unwrap_or_else(|| panic!("{sym} missing"));
        assert_eq!(f["kernel"], true);
        assert_eq!(f["self_bp"].as_u64().unwrap(), bp, "{sym}");
    }
    for f in functions {
        assert!(f["total_weight"].as_u64() >= f["self_weight"].as_u64());
    }
}

#[test]
fn kallsyms_file_names_kernel_frames() {
    let data = fixture("perf_cpu_fp/perf_cpu_fp.data");
    let perf = perf_kernel_entries(&data);
    let (bp, addr) = perf
        .iter()
        .find(|(_, s)| s == "0xffffffff821f39e5")
        .unwrap()
        .clone();
    let table = temp(
        "kallsyms",
        b"ffffffff821f3900 T fake_function\nffffffff821f3a00 t next_one\n",
    );
    let doc = json(&[
        "profile",
        &data,
        "--format",
        "json",
        "--top",
        "0",
        "--kallsyms",
        table.to_str().unwrap(),
    ]);
    let functions = doc["functions"].as_array().unwrap();
    let f = functions
        .iter()
        .find(|f| f["name"] == "fake_function")
        .unwrap();
    assert_eq!(
        f["self_bp"].as_u64().unwrap(),
        bp,
        "{addr} is inside fake_function"
    );
    assert!(functions.iter().all(|f| f["name"] != addr.as_str()));
    let out = run(&["profile", &data, "--kallsyms", "/nonexistent/kallsyms"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn default_kallsyms_notes_the_release_difference() {
    // Recorded on 6.18.44-fc-v657: unless this host runs that exact build, the host's
    // /proc/kallsyms is not used and the output says why.
    let host = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let out = run(&[
        "profile",
        &fixture("perf_cpu_fp/perf_cpu_fp.data"),
        "--top",
        "3",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    if host.trim() != "6.18.44-fc-v657" {
        assert!(text.contains("kernel release differs"), "{text}");
    }
    assert!(text.contains("Self") && text.contains("Total"), "{text}");
}

#[test]
fn text_views_of_the_same_capture_agree() {
    // perf's --no-children report text and its -g folded text, both from the recording host.
    let a = json(&[
        "profile",
        &fixture("perf_cpu_fp/report_stdio_no_children.txt"),
        "--format",
        "json",
    ]);
    let b = json(&[
        "profile",
        &fixture("perf_cpu_fp/report_stdio_folded.txt"),
        "--format",
        "json",
    ]);
    assert_eq!(a["format"], "perf-report-text");
    assert_eq!(a["functions"][0]["name"], "leaf_compute");
    assert_eq!(b["functions"][0]["name"], "leaf_compute");
    // perf: 49.30% + 48.66%; folded: (385 + 380) / 781.
    assert_eq!(a["functions"][0]["self_weight"], 9796);
    assert_eq!(b["functions"][0]["self_weight"], 765);
}

#[test]
fn errors_exit_2_with_the_place() {
    let garbage = temp("garbage.folded", b"# a comment\nnot a stack at all\n");
    let out = run(&[
        "profile",
        garbage.to_str().unwrap(),
        "--input-format",
        "folded",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 2") && err.contains("folded stacks"),
        "{err}"
    );
    let empty = temp("empty", b"");
    let out = run(&["profile", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("empty"));
    let out = run(&["profile", empty.to_str().unwrap(), "--input-format", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    // A profile given to an event command: the error names the right command.
    let out = run(&["dump", &fixture("odd_symbols.folded")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stallscope profile"));
}

#[test]
fn head_and_help() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args([
            "profile",
            &fixture("perf_cpu_fp/perf_cpu_fp.data"),
            "--top",
            "0",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 8];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap(); // then the pipe closes
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let out = run(&["profile", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("Examples:") && help.contains("--kallsyms"),
        "{help}"
    );
}

#[test]
fn perf_script_text_from_stdin_streams() {
    // The recording host's `perf script` head (75 samples, the last cut before its frames).
    let text = std::fs::read(fixture("perf_cpu_fp/script_cpu_fp.txt")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(["profile", "-", "--format", "json", "--top", "0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&text).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["format"], "perf-script-text");
    assert_eq!(doc["stacks"], 75);
    assert_eq!(doc["total_weight"], 75 * 500_250u64);
    assert_eq!(doc["quality"]["profile_no_callchain"]["count"], 1);
    let leaf = doc["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "leaf_compute")
        .unwrap();
    assert_eq!(leaf["kernel"], false);
}

#[test]
fn folded_output_reads_back_to_the_same_shares() {
    // perf.data → `--format folded` → read back as folded: same self weight per function
    // (the comm root frames only add totals).
    let data = fixture("perf_cpu_fp/perf_cpu_fp.data");
    let out = run(&["profile", &data, "--format", "folded", "--kallsyms", "none"]);
    assert!(out.status.success());
    let folded = temp("cpu_fp.folded", &out.stdout);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().all(|l| l.starts_with("burn;")
        || l.starts_with("CPU_0/KVM;")
        || l.starts_with("io_worker-1;")));
    let a = json(&[
        "profile",
        &data,
        "--format",
        "json",
        "--top",
        "0",
        "--kallsyms",
        "none",
    ]);
    let b = json(&[
        "profile",
        folded.to_str().unwrap(),
        "--format",
        "json",
        "--top",
        "0",
    ]);
    assert_eq!(b["format"], "folded");
    assert_eq!(a["total_weight"], b["total_weight"]);
    let selfs = |d: &Value| -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = d["functions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["self_weight"].as_u64() > Some(0))
            .map(|f| {
                (
                    f["name"].as_str().unwrap().to_string(),
                    f["self_weight"].as_u64().unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(selfs(&a), selfs(&b));
}

#[test]
fn unindented_frames_fold_as_the_indented_text() {
    // fixtures/profile/unindented (make.sh): the real perf script text with frames at
    // column 0 and headers without time and period, as old perf printed them. FlameGraph's
    // stackcollapse-perf.pl folds that shape (a column-0 line that is no header and reads
    // `ADDR SYMBOL (DSO)` is a frame; one count per sample): the same stacks as the
    // indented original, each weighing its sample count where the original prints periods
    // (500250 ns each). Before: "unrecognized content", and forced, 0 frames.
    let folded = |rel: &str| -> Vec<(String, u64)> {
        let out = run(&["profile", &fixture(rel), "--format", "folded"]);
        assert!(
            out.status.success(),
            "{rel}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let (stack, w) = l.rsplit_once(' ').expect("folded line");
                (stack.to_string(), w.parse().expect("weight"))
            })
            .collect()
    };
    let indented = folded("perf_cpu_fp/script_cpu_fp.txt");
    let unindented = folded("unindented/script_unindented.txt");
    assert!(indented.len() >= 8, "{indented:?}");
    let per_sample: Vec<(String, u64)> = indented
        .into_iter()
        .map(|(s, w)| {
            assert_eq!(w % 500_250, 0, "{s}");
            (s, w / 500_250)
        })
        .collect();
    assert_eq!(unindented, per_sample);
    let v = json(&[
        "profile",
        &fixture("unindented/script_unindented.txt"),
        "--format",
        "json",
    ]);
    assert_eq!(v["format"], "perf-script-text");
    assert!(
        v["data_quality"]["profile_bad_line"].is_null(),
        "{}",
        v["data_quality"]
    );
}

/// perf's Children column per symbol in a `perf report --children --stdio` text (first
/// entry of each symbol), in basis points.
fn perf_children_bp(text: &str) -> std::collections::HashMap<String, u64> {
    let mut out = std::collections::HashMap::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (Some(c), Some(s), Some(sym)) = (words.first(), words.get(1), words.last()) else {
            continue;
        };
        let pct = |w: &str| -> Option<u64> {
            let v: f64 = w.strip_suffix('%')?.parse().ok()?;
            Some((v * 100.0).round() as u64)
        };
        if let (Some(c), Some(_)) = (pct(c), pct(s)) {
            out.entry(sym.to_string()).or_insert(c);
        }
    }
    out
}

#[test]
fn one_children_entry_pasted_alone_is_its_call_graph() {
    // fixtures/profile/children_entry (make.sh): perf report --children of the lock-spinning
    // capture (eight processes creating and unlinking in one XFS directory), the entry
    // `entry_SYSCALL_64_after_hwframe` (self 0 %) cut out in --stdio form with and without the
    // header and in the TUI's saved form. Before: "0 stacks, total weight 0", no finding.
    let full = std::fs::read_to_string(fixture("children_entry/full_children.txt")).unwrap();
    let perf = perf_children_bp(&full);
    let totals = |rel: &str| -> std::collections::HashMap<String, u64> {
        let v = json(&["profile", &fixture(rel), "--top", "0", "--format", "json"]);
        assert_eq!(v["format"], "perf-report-text", "{rel}");
        assert!(
            v["quality"]["perf_report_one_entry"].is_object(),
            "{rel}: {}",
            v["quality"]
        );
        v["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["name"].as_str().unwrap().to_string(),
                    f["total_bp"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let stdio = totals("children_entry/entry_stdio.txt");
    assert_eq!(totals("children_entry/entry_stdio_header.txt"), stdio);
    let tui = totals("children_entry/entry_tui.txt");
    // The excerpt holds the samples through the syscall entry: a function's total is at most
    // perf's Children (other paths reach it too, e.g. kworkers' _raw_spin_unlock_irqrestore,
    // and perf prunes branches below 0.5 %), and equal for the functions every sample of
    // which is under a syscall.
    for (name, bp) in &stdio {
        let p = perf
            .get(name)
            .copied()
            .unwrap_or_else(|| panic!("{name} not in perf's report"));
        assert!(*bp <= p, "{name}: {bp} bp > perf's {p}");
    }
    for name in [
        "entry_SYSCALL_64_after_hwframe",
        "do_syscall_64",
        "path_openat",
        "do_unlinkat",
        "xfs_create",
        "rwsem_down_write_slowpath",
        "rwsem_spin_on_owner",
    ] {
        assert_eq!(
            stdio.get(name),
            perf.get(name),
            "{name}: stdio excerpt vs perf"
        );
        // the TUI prints the same graph (it hides a percentage where one callee takes all
        // of a node's callee weight, which moves self weight, never a total)
        assert_eq!(tui.get(name), perf.get(name), "{name}: TUI excerpt vs perf");
    }
    // lock-spinning reads the path as from the whole report: the rwsem's spin, both callers,
    // shares of perf's whole profile (spin = perf's Children of rwsem_spin_on_owner)
    for rel in [
        "children_entry/entry_stdio.txt",
        "children_entry/entry_tui.txt",
    ] {
        let r = json(&[
            "analyze",
            "--select",
            "lock-spinning",
            "--format",
            "json",
            &fixture(rel),
        ]);
        let f = &r["findings"][0];
        assert_eq!(f["detector"], "lock-spinning", "{rel}: {r}");
        let title = f["title"].as_str().unwrap();
        assert!(title.contains("rwsem_spin_on_owner"), "{title}");
        assert!(
            title.contains("path_openat") && title.contains("do_unlinkat"),
            "{title}"
        );
        assert_eq!(
            f["measures"]["spin_bp"], perf["rwsem_spin_on_owner"],
            "{rel}"
        );
        assert_ne!(
            f["severity"], "high",
            "{rel}: a medium finding in the whole report"
        );
        assert!(
            !f["hint"].as_str().unwrap().contains(" -i "),
            "no perf report -i on text"
        );
    }
}
