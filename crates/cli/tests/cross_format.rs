//! Cross-format equivalence: one capture read as perf.data and as its `perf script --ns`
//! text must give identical `dump` lines for the events both contain.
//!
//! perf.data additionally carries side-band records (COMM → `task_comm`) that `perf script`
//! does not print by default, so those are dropped before comparing. Everything else —
//! timestamps to the nanosecond, CPUs, context pids, every payload field including
//! `prev_state` letters — must match line for line.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dump(path: &Path) -> Vec<String> {
    let o = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .arg("dump")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "dump {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Pairs `X.perf.data` with `X.perf-script.txt` under fixtures/sched.
fn pairs() -> Vec<(PathBuf, PathBuf)> {
    let dir = repo_root().join("fixtures/sched");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if let Some(stem) = name.strip_suffix(".perf.data") {
            let txt = dir.join(format!("{stem}.perf-script.txt"));
            if txt.exists() {
                out.push((p, txt));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn perf_data_and_its_perf_script_text_dump_identically() {
    let pairs = pairs();
    assert!(
        pairs.len() >= 2,
        "expected at least two perf.data + perf-script.txt fixture pairs, found {pairs:?}"
    );
    for (data, txt) in pairs {
        let mut a: Vec<String> = dump(&data)
            .into_iter()
            .filter(|l| !l.contains(" task_comm "))
            .collect();
        let mut b = dump(&txt);
        assert!(a.len() > 500, "{}: only {} events", data.display(), a.len());
        // perf script sorts records exactly like our FINISHED_ROUND merge; if equal
        // timestamps were ever emitted in a different order, compare as multisets.
        if a != b {
            a.sort();
            b.sort();
        }
        let first_diff = a.iter().zip(&b).position(|(x, y)| x != y);
        assert!(
            a == b,
            "{} vs {}: {} vs {} events; first difference at {:?}: {:?} vs {:?}",
            data.display(),
            txt.display(),
            a.len(),
            b.len(),
            first_diff,
            first_diff.map(|i| &a[i]),
            first_diff.map(|i| &b[i])
        );
    }
}
