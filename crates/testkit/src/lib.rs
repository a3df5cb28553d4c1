//! Test prerequisites. A test that needs an external tool (perf, trace-cmd, blkparse,
//! chromium, scipy, root for tracefs) calls [`require`]: when the prerequisite is there the
//! test runs; when it is missing the test **fails** and names the install command
//! (`scripts/setup.sh` installs every one), unless `STALLSCOPE_SKIP_MISSING=1` is set, in
//! which case the skip is printed and the test returns early. A missing prerequisite never
//! passes silently.

use std::process::{Command, Stdio};

/// The environment variable that turns a missing prerequisite into a printed skip.
pub const SKIP_VAR: &str = "STALLSCOPE_SKIP_MISSING";

/// Whether `program args…` runs and exits 0 (its output discarded).
pub fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `program args…` can be started at all (some tools exit non-zero on `--help`).
pub fn starts(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// `true`: `what` is available, run the test. Missing: panics with `install` (the command
/// that provides it), or — when [`SKIP_VAR`] is set — prints the skip and returns `false`.
pub fn require(what: &str, available: bool, install: &str) -> bool {
    if available {
        return true;
    }
    if std::env::var_os(SKIP_VAR).is_some_and(|v| !v.is_empty() && v != "0") {
        println!("SKIPPED ({SKIP_VAR} is set): {what} is missing; install: {install}");
        eprintln!("SKIPPED ({SKIP_VAR} is set): {what} is missing; install: {install}");
        return false;
    }
    panic!(
        "{what} is missing: install it with `scripts/setup.sh` ({install}), or set {SKIP_VAR}=1 to skip the tests that need it"
    );
}

/// [`require`] for perf (Debian package linux-perf).
pub fn require_perf() -> bool {
    require(
        "perf",
        runs("perf", &["--version"]),
        "apt-get install linux-perf",
    )
}

/// [`require`] for trace-cmd.
pub fn require_trace_cmd() -> bool {
    require(
        "trace-cmd",
        starts("trace-cmd", &["--help"]),
        "apt-get install trace-cmd",
    )
}

/// [`require`] for blkparse and btt (Debian package blktrace).
pub fn require_blkparse() -> bool {
    require(
        "blkparse",
        starts("blkparse", &["--version"]),
        "apt-get install blktrace",
    )
}

/// Every file under the repository's `fixtures/` that may be a trace or profile (sorted;
/// READMEs, scripts, sources, expected outputs and tracefs format files left out): the
/// inputs of the tests that hold "on every fixture". Which of them are traces is for the
/// test to ask stallscope (`analyze` exits 2 on the others).
pub fn fixture_files() -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            panic!("cannot list {}", dir.display());
        };
        let mut entries: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
                continue;
            }
            let name = p.file_name().map(|n| n.to_string_lossy().to_string());
            let not_input = [
                ".md", ".sh", ".py", ".c", ".awk", ".csv", ".json", ".format",
            ];
            if name.is_some_and(|n| !not_input.iter().any(|s| n.ends_with(s))) {
                out.push(p);
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut out = Vec::new();
    walk(&root, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_present_prerequisite_runs_and_a_missing_one_fails() {
        assert!(require("sh", runs("sh", &["-c", "exit 0"]), "-"));
        assert!(!runs("stallscope-no-such-program", &[]));
        // without the skip variable a missing tool fails the test
        if std::env::var_os(SKIP_VAR).is_none() {
            let r = std::panic::catch_unwind(|| require("x", false, "apt-get install x"));
            let msg = r
                .expect_err("a missing prerequisite must fail")
                .downcast::<String>()
                .expect("message");
            assert!(msg.contains("apt-get install x"), "{msg}");
            assert!(msg.contains("scripts/setup.sh"), "{msg}");
        }
    }
}
