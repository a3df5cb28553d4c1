//! CLI behaviour on block inputs: the ways to name blktrace per-CPU files (directory,
//! `DEV` prefix, the files themselves) give the same events; a truncated file exits 2 naming
//! the file and the record offset; `info` reports block capabilities (devices, actions,
//! computable btt phases) in text and JSON, next to the existing sections.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn loop0() -> PathBuf {
    repo().join("fixtures/block/loop0")
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run stallscope")
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn directory_prefix_and_separate_files_give_the_same_events() {
    let dir = loop0();
    let d = dir.to_string_lossy();
    let by_dir = stdout(&run(&["dump", &d]));
    assert_eq!(by_dir.lines().count(), 169);
    for prefix in ["loop0", "loop0.blktrace", "loop0.blktrace."] {
        let p = dir.join(prefix);
        assert_eq!(
            stdout(&run(&["dump", &p.to_string_lossy()])),
            by_dir,
            "{prefix}"
        );
    }
    let f0 = dir.join("loop0.blktrace.0");
    let f1 = dir.join("loop0.blktrace.1");
    let separate = stdout(&run(&[
        "dump",
        &f0.to_string_lossy(),
        &f1.to_string_lossy(),
    ]));
    assert_eq!(separate, by_dir);
}

#[test]
fn truncated_binary_exits_2_naming_file_and_offset() {
    let tmp = std::env::temp_dir().join(format!("stallscope-block-cli-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let bytes = std::fs::read(loop0().join("loop0.blktrace.0")).unwrap();
    // The first record is 56 bytes (48 + an 8-byte process name); cut the second one.
    let cut = tmp.join("cut.blktrace.0");
    std::fs::write(&cut, &bytes[..56 + 20]).unwrap();
    let o = run(&["dump", &cut.to_string_lossy()]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cut.blktrace.0"), "{err}");
    assert!(err.contains("offset 0x38"), "{err}");
    assert!(err.contains("truncated"), "{err}");
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn info_reports_block_capabilities() {
    let text = stdout(&run(&["info", &loop0().to_string_lossy()]));
    assert!(text.contains("Input:"), "{text}");
    assert!(text.contains("Block I/O:"), "{text}");
    assert!(text.contains("devices:  7,0 169"), "{text}");
    assert!(
        text.contains("btt phases computable: Q2Q Q2G Q2M D2C Q2D Q2C"),
        "{text}"
    );
    assert!(text.contains("[yes] iolat"), "{text}");
    let json = stdout(&run(&[
        "info",
        "--format",
        "json",
        &loop0().join("blkparse_default.txt").to_string_lossy(),
    ]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["block"]["actions"]["C"], 29);
    assert_eq!(v["block"]["devices"]["7,0"], 169);
    assert_eq!(v["inputs"][0]["format"], "blkparse-text");
    // A scheduler-only input has no block section.
    let sched = repo().join("crates/read/tests/data/perf_sched_zstd.data");
    let v: serde_json::Value = serde_json::from_str(&stdout(&run(&[
        "info",
        "--format",
        "json",
        &sched.to_string_lossy(),
    ])))
    .unwrap();
    assert!(v.get("block").is_none());
}
