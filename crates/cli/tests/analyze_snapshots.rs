//! Snapshot tests of every registered detector, iterated from the registry (a detector
//! added to `registry.rs` without fixtures fails here): `stallscope analyze --oneline
//! --select ID` on every capture in the detector's fixture directory
//! (`fixtures/detectors/ID/`, blocked-chain's `fixtures/chain/`) must print its `insta`
//! snapshot (`tests/snapshots/analyze_snapshots__ID__FILE.snap`), and every healthy control
//! must print nothing — at least one control and one positive case per detector.
//!
//! The snapshots are regression guards (the facts in them are checked against perf, btt
//! and trace-cmd by the detectors' own tests). After an intended change, review the diff
//! with `cargo insta review` (or `INSTA_UPDATE=always cargo test --test analyze_snapshots`
//! and `git diff`).
//!
//! Kernel symbols: a capture's own `CASE.kallsyms.txt` or the directory's
//! `kallsyms.txt.xz` names its stacks; without one, `--kallsyms none` keeps the output
//! independent of the machine running the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use stallscope::detect::registry;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A detector's fixture directory.
fn fixture_dir(id: &str) -> PathBuf {
    match id {
        "blocked-chain" => root().join("fixtures/chain"),
        id => root().join("fixtures/detectors").join(id),
    }
}

/// The healthy controls' cases: `healthy*` everywhere, and these per detector (the
/// scenario names of their READMEs; lock-spinning's `xfs-private-sched` is not one: its
/// README records its xfs_buf_lock finding).
const CONTROLS: &[(&str, &[&str])] = &[
    ("dispatch-starvation", &["deadline", "bfq-nosync"]),
    ("lock-spinning", &["xfs-private", "tmpfs-private"]),
    ("worker-flood", &["prewritten"]),
    ("blocked-chain", &["nowriters"]),
];

fn is_control(id: &str, case: &str) -> bool {
    case.starts_with("healthy")
        || CONTROLS
            .iter()
            .any(|(d, cases)| *d == id && cases.contains(&case))
}

/// The captures of a fixture directory: its trace and profile files and blktrace
/// per-CPU directories (not READMEs, scripts, sources, ground truths, symbol tables).
fn captures(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        panic!("missing fixture directory {}", dir.display());
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            let not_capture = [".md", ".sh", ".py", ".c", ".awk", ".txt", ".json"];
            !n.contains("kallsyms") && !not_capture.iter().any(|s| n.ends_with(s))
        })
        .collect();
    out.sort();
    out
}

/// The case name: the file name up to its first dot.
fn case_of(file: &Path) -> String {
    let name = file.file_name().unwrap().to_string_lossy().to_string();
    name.split('.').next().unwrap_or(&name).to_string()
}

fn kallsyms_for(dir: &Path, case: &str) -> String {
    let own = dir.join(format!("{case}.kallsyms.txt"));
    let shared = dir.join("kallsyms.txt.xz");
    match (own.exists(), shared.exists()) {
        (true, _) => own.display().to_string(),
        (false, true) => shared.display().to_string(),
        (false, false) => "none".to_string(),
    }
}

fn oneline(id: &str, file: &Path, kallsyms: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args([
            "analyze",
            "--oneline",
            "--select",
            id,
            "--kallsyms",
            kallsyms,
        ])
        .arg(file)
        .env("NO_COLOR", "1")
        .output()
        .expect("run stallscope");
    assert!(
        out.status.success(),
        "{id} {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn every_registered_detector_matches_its_snapshots_and_controls_stay_empty() {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(true);
    settings.set_omit_expression(true);
    let _guard = settings.bind_to_scope();
    let mut total = 0;
    for entry in registry::DETECTORS {
        let id = entry.info.id;
        let dir = fixture_dir(id);
        let (mut positive, mut controls) = (0, 0);
        for file in captures(&dir) {
            let case = case_of(&file);
            let got = oneline(id, &file, &kallsyms_for(&dir, &case));
            let name = file.file_name().unwrap().to_string_lossy().to_string();
            if is_control(id, &case) {
                assert_eq!(got, "", "{id}/{name} is a healthy control");
                controls += 1;
                continue;
            }
            positive += usize::from(!got.is_empty());
            insta::assert_snapshot!(format!("{id}__{name}"), got);
            total += 1;
        }
        assert!(
            positive >= 1 && controls >= 1,
            "{id}: {positive} positive cases, {controls} healthy controls in {}",
            dir.display()
        );
    }
    assert!(total >= 20, "{total} snapshots");
}
