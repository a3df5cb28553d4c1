//! Inputs the fuzz targets found (fuzz/regressions/TARGET/, kept by scripts/fuzz.sh) and
//! hand-made hostile inputs: each goes through `stallscope info`, `analyze`, `latency`,
//! `timehist` and `dump`, which must end with exit 0 (read, with data-quality notes) or 2
//! (a clear error naming the file), never a panic (101), an abort or another signal.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every regular file under `dir`, recursively (README files excepted).
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.file_name().is_some_and(|n| n != "README.md") {
            out.push(p);
        }
    }
}

fn check(file: &Path) {
    for cmd in ["info", "analyze", "latency", "timehist", "dump"] {
        let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
            .arg(cmd)
            .arg(file)
            .output()
            .expect("run stallscope");
        let code = out.status.code();
        assert!(
            matches!(code, Some(0 | 2)),
            "{cmd} {}: {:?}\n{}",
            file.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        if code == Some(2) {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("error"), "{cmd} {}: {err}", file.display());
        }
    }
}

#[test]
fn every_kept_fuzz_input_ends_cleanly() {
    let dir = root().join("fuzz/regressions");
    assert!(
        dir.join("README.md").exists(),
        "fuzz/regressions is part of the repository"
    );
    let mut all = Vec::new();
    files(&dir, &mut all);
    for f in &all {
        check(f);
    }
}

#[test]
fn hostile_cpu_numbers_and_cut_files_end_cleanly() {
    // one flipped byte in a wakeup's target CPU grew analyze past 6.9 GB; cut copies of
    // every perf.data and trace.dat fixture must be read or refused, never crash
    let tmp = std::env::temp_dir().join(format!("ss-fuzzreg-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let src = std::fs::read(root().join("fixtures/sched/sched_all.perf.data")).unwrap();
    // every 4-byte word of the data section set to 0xFFFFFFFF in turn would be slow: set
    // the words at a stride, each in its own copy
    let data_off = u64::from_le_bytes(src[40..48].try_into().unwrap()) as usize;
    for (k, at) in (data_off..src.len().min(data_off + 4096))
        .step_by(331)
        .enumerate()
    {
        let mut b = src.clone();
        b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let f = tmp.join(format!("flip{k}.perf.data"));
        std::fs::write(&f, &b).unwrap();
        check(&f);
    }
    for (k, frac) in [3usize, 5, 7].iter().enumerate() {
        let f = tmp.join(format!("cut{k}.perf.data"));
        std::fs::write(&f, &src[..src.len() * frac / 8]).unwrap();
        check(&f);
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
