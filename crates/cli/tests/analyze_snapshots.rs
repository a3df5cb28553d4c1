//! Snapshot tests: `stallscope analyze --oneline --select ID` on every capture under
//! fixtures/detectors/ID/ (`CASE.perf.data`, `CASE.dat.zst`) must print exactly
//! fixtures/detectors/ID/expected-CASE.txt.
//!
//! The snapshots are regression guards (the facts in them are checked against perf by
//! analyze_fixtures.rs); healthy controls (`healthy*` captures) must stay empty whatever the
//! snapshot says. Regenerate after an intended change with
//! `STALLSCOPE_UPDATE_SNAPSHOTS=1 cargo test --test analyze_snapshots` and review the diff.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn oneline(id: &str, file: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(["analyze", "--oneline", "--select", id])
        .arg(file)
        .env("NO_COLOR", "1")
        .output()
        .expect("run stallscope");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn detector_fixtures_match_their_snapshots() {
    let update = std::env::var_os("STALLSCOPE_UPDATE_SNAPSHOTS").is_some();
    let mut checked = 0;
    let mut healthy = 0;
    for id in [
        "runqueue-starvation",
        "cpu-saturation",
        "wakeup-ping-pong",
        "idle-while-runnable",
    ] {
        let dir = root().join("fixtures/detectors").join(id);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            panic!("missing fixture directory {}", dir.display());
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let n = p.to_string_lossy();
                n.ends_with(".perf.data") || n.ends_with(".dat.zst")
            })
            .collect();
        files.sort();
        for file in files {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let case = name
                .trim_end_matches(".perf.data")
                .trim_end_matches(".dat.zst");
            let got = oneline(id, &file);
            if case.starts_with("healthy") {
                assert_eq!(got, "", "{id}/{case} is a healthy control");
                healthy += 1;
            } else {
                assert!(!got.is_empty(), "{id}/{case} is a positive case");
            }
            let snap = dir.join(format!("expected-{case}.txt"));
            if update {
                std::fs::write(&snap, &got).expect("write snapshot");
            }
            let want = std::fs::read_to_string(&snap).unwrap_or_else(|_| {
                panic!(
                    "missing {}; run with STALLSCOPE_UPDATE_SNAPSHOTS=1",
                    snap.display()
                )
            });
            assert_eq!(got, want, "{id}/{case} differs from {}", snap.display());
            checked += 1;
        }
    }
    assert!(
        checked >= 6 && healthy >= 3,
        "{checked} cases, {healthy} healthy"
    );
}
