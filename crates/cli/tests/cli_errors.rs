//! CLI contract tests that need no trace: exit codes and error messages for bad input.

use std::io::Write;
use std::process::Command;

fn stallscope() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stallscope"))
}

fn tmp_file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("stallscope-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
    p
}

fn run(args: &[&str]) -> (i32, String, String) {
    let o = stallscope().args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

#[test]
fn empty_file_exits_2_and_says_empty() {
    let p = tmp_file("empty.data", b"");
    for cmd in ["info", "dump", "latency", "timehist"] {
        let (code, out, err) = run(&[cmd, p.to_str().unwrap()]);
        assert_eq!(code, 2, "{cmd}: {err}");
        assert!(out.is_empty(), "{cmd} printed to stdout: {out}");
        assert!(
            err.contains("empty.data") && err.contains("empty file"),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn binary_garbage_exits_2_listing_formats_and_first_bytes() {
    let p = tmp_file(
        "garbage.bin",
        &[0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 0xff, 0xfe],
    );
    let (code, _, err) = run(&["info", p.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("garbage.bin: offset 0x0"), "{err}");
    assert!(
        err.contains("perf-data")
            && err.contains("ftrace-text")
            && err.contains("perf-script-text"),
        "{err}"
    );
    assert!(err.contains("de ad be ef"), "{err}");
}

#[test]
fn missing_file_and_unknown_input_format_exit_2() {
    let (code, _, err) = run(&["info", "/nonexistent/trace.data"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/trace.data"), "{err}");
    let p = tmp_file("x.txt", b"hello\n");
    let (code, _, err) = run(&["info", "--input-format", "pcap", p.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("pcap") && err.contains("perf-script-text"),
        "{err}"
    );
}

#[test]
fn help_has_examples_for_every_command() {
    for cmd in ["info", "dump", "latency", "timehist"] {
        let (code, out, _) = run(&[cmd, "--help"]);
        assert_eq!(code, 0);
        assert!(
            out.contains("Examples:"),
            "{cmd} --help lacks examples:\n{out}"
        );
    }
}
