//! `stallscope latency`'s lean path (perf.data / trace.dat decoded straight into
//! `SchedRecord`s) must print exactly what the general reader path prints, on every
//! scheduler-bearing fixture, in text and JSON, with the options that change the analysis.
//! Compressed fixtures are decompressed to a temporary file first (the lean path reads
//! regular files only). `--require-lean` makes a run fail when the lean path was not taken,
//! so a silent bail-out cannot make these comparisons vacuous.

mod common;
#[path = "../../read/tests/lean_support/mod.rs"]
mod lean_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{root, run};

/// The fixture as a regular uncompressed file (decompressed into `dir` when needed).
fn plain(fixture: &str, dir: &Path) -> PathBuf {
    let src = root().join(fixture);
    let (tool, stem) = if let Some(s) = fixture.strip_suffix(".xz") {
        ("xz", s)
    } else if let Some(s) = fixture.strip_suffix(".zst") {
        ("zstd", s)
    } else {
        return src;
    };
    let name = Path::new(stem).file_name().expect("fixture file name");
    let dst = dir.join(name);
    let out = Command::new(tool)
        .args(["-dc"])
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("{tool} -dc {}: {e}", src.display()));
    assert!(out.status.success(), "{tool} -dc {} failed", src.display());
    std::fs::write(&dst, out.stdout).expect("write decompressed fixture");
    dst
}

/// Exit code, standard output and standard error (a fixture without scheduler events
/// exits 2 saying so: both paths must say the same).
fn stdout_of(args: &[&str]) -> (Option<i32>, String, String) {
    let out = run(args);
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 2)),
        "stallscope {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        code,
        String::from_utf8(out.stdout).expect("utf-8 output"),
        String::from_utf8(out.stderr).expect("utf-8 errors"),
    )
}

/// The option sets compared: default, per-pid sorted by max, perf 6.1, perf's -C.
const OPTION_SETS: &[&[&str]] = &[
    &[],
    &["--pids", "--sort", "max,pid"],
    &["--perf-compat", "6.1"],
    &["--cpu", "0", "--pids"],
];

#[test]
fn lean_and_general_paths_print_the_same() {
    let dir = std::env::temp_dir().join(format!("stallscope-lean-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for (fixture, must_be_lean) in lean_support::lean_paths(&root()) {
        let fixture = fixture.as_str();
        let path = plain(fixture, &dir);
        let path = path.to_str().expect("utf-8 path");
        for opts in OPTION_SETS {
            for format in ["text", "json"] {
                let mut args = vec!["latency", "--format", format];
                args.extend_from_slice(opts);
                args.push(path);
                let default = stdout_of(&args);
                let mut general = args.clone();
                general.insert(1, "--general-path");
                let general = stdout_of(&general);
                assert_eq!(
                    default, general,
                    "{fixture} {opts:?} {format}: lean and general paths differ"
                );
                if must_be_lean {
                    let mut lean = args.clone();
                    lean.insert(1, "--require-lean");
                    assert_eq!(stdout_of(&lean), general, "{fixture} {opts:?} {format}");
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn require_lean_names_why_the_lean_path_was_not_taken() {
    // A perf script text file has no lean reader: --require-lean must fail and say so, and
    // without it the general path answers.
    let text = root().join("fixtures/sched/sched_pipe.perf.data");
    let text = text.to_str().expect("utf-8 path");
    let out = run(&[
        "latency",
        "--require-lean",
        "--input-format",
        "perf-pipe",
        text,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("lean path not taken") && err.contains("--input-format perf-pipe"),
        "{err}"
    );
}
