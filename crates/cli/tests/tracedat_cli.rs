//! trace.dat through the CLI: the same capture in v6, v7 and v7-zstd gives identical
//! `dump` output; a trace.dat and its `trace-cmd report -t -N` text give identical `dump`
//! output; truncated files exit 2 naming the offset.
//!
//! Documented differences in the cross-format comparison:
//! * trace-cmd prefixes every line of a non-top buffer instance with `NAME: ` (our fixtures
//!   come from `trace-cmd extract -B`); the prefix is removed before the text is read.
//! * Events that are not modeled natively (e.g. `block_rq_issue`) keep their print-fmt text
//!   as one `payload=` field in the text reader, while the binary reader has their fields:
//!   only natively modeled events are compared for the reference sample that has them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn shared() -> PathBuf {
    repo().join("fixtures/samples/tracecmd")
}

fn run(args: &[&str], file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(args)
        .arg(file)
        .output()
        .unwrap()
}

fn dump(file: &Path) -> Vec<String> {
    let o = run(&["dump"], file);
    assert!(
        o.status.success(),
        "dump {} failed: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("stallscope-tracedat-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn xz_decompress(src: &Path, dst: &Path) {
    let raw = Command::new("xz").arg("-dc").arg(src).output().unwrap();
    assert!(raw.status.success());
    std::fs::write(dst, raw.stdout).unwrap();
}

#[test]
fn v6_and_v7_of_the_same_data_dump_identically() {
    let sets = [
        vec![
            shared().join("trace_v7_zstd.dat"),
            shared().join("trace_v6.dat.xz"),
            shared().join("trace_v7_nocompress.dat.xz"),
        ],
        vec![
            repo().join("fixtures/tracedat/sched_v7_zstd.dat"),
            repo().join("fixtures/tracedat/sched_v6.dat.xz"),
            repo().join("fixtures/tracedat/sched_v7_none.dat.xz"),
        ],
    ];
    for set in sets {
        let first = dump(&set[0]);
        assert!(first.len() > 1000, "{:?}: {} lines", set[0], first.len());
        for other in &set[1..] {
            let d = dump(other);
            assert_eq!(d.len(), first.len(), "{other:?}");
            for (a, b) in first.iter().zip(&d) {
                assert_eq!(a, b, "{other:?} vs {:?}", set[0]);
            }
        }
    }
}

/// `trace-cmd report -t -N FILE` with instance prefixes removed, written to `out`.
fn report_text(file: &Path, out: &Path) {
    let o = Command::new("trace-cmd")
        .args(["report", "-t", "-N"])
        .arg(file)
        .output()
        .expect("trace-cmd must be installed (apt-get install trace-cmd)");
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    let mut cleaned = String::new();
    for line in text.lines() {
        let l = match line.split_once(": ") {
            Some((prefix, rest)) if prefix.starts_with("stallscope-fixture-") => rest,
            _ => line,
        };
        cleaned.push_str(l);
        cleaned.push('\n');
    }
    std::fs::write(out, cleaned).unwrap();
}

#[test]
fn trace_dat_and_its_report_text_dump_identically() {
    let tmp = temp_dir("cross");
    // Our capture: scheduler events only, plus missed-events markers → every line equal.
    let dat = repo().join("fixtures/tracedat/sched_v7_zstd.dat");
    let txt = tmp.join("sched.txt");
    report_text(&dat, &txt);
    let (binary, text) = (dump(&dat), dump(&txt));
    assert!(binary.iter().any(|l| l.contains("lost_events")));
    assert_eq!(binary.len(), text.len());
    for (b, t) in binary.iter().zip(&text) {
        assert_eq!(b, t);
    }
    // The reference sample also has block events (kept as print-fmt payloads in text).
    let dat = shared().join("trace_v7_zstd.dat");
    let txt = tmp.join("sample.txt");
    report_text(&dat, &txt);
    let native = |lines: Vec<String>| -> Vec<String> {
        lines
            .into_iter()
            .filter(|l| l.split(' ').nth(3).is_some_and(|n| n.starts_with("sched_")))
            .collect()
    };
    let (binary, text) = (native(dump(&dat)), native(dump(&txt)));
    assert!(binary.len() > 1400, "{}", binary.len());
    assert_eq!(binary, text);
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn truncated_files_exit_2_naming_the_offset() {
    let tmp = temp_dir("trunc");
    let v6 = tmp.join("v6.dat");
    xz_decompress(&repo().join("fixtures/tracedat/sched_v6.dat.xz"), &v6);
    let full = std::fs::read(&v6).unwrap();
    let v7 = std::fs::read(repo().join("fixtures/tracedat/sched_v7_zstd.dat")).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("v6 cut in the CPU data", full[..full.len() - 5000].to_vec()),
        ("v6 cut in the event formats", full[..20_000].to_vec()),
        ("v6 cut in the header", full[..11].to_vec()),
        ("v7 cut in the CPU data", v7[..v7.len() - 10_000].to_vec()),
        ("v7 cut in a section", v7[..v7.len() / 3].to_vec()),
    ];
    for (what, bytes) in cases {
        let f = tmp.join("cut.dat");
        std::fs::write(&f, &bytes).unwrap();
        let o = run(&["dump"], &f);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{what}: {err}");
        assert!(
            err.contains("cut.dat") && err.contains("offset 0x"),
            "{what}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn info_and_latency_work_on_trace_dat() {
    let dat = repo().join("fixtures/tracedat/sched_v7_zstd.dat");
    let info = run(&["info"], &dat);
    assert!(info.status.success());
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(text.contains("trace-dat"), "{text}");
    assert!(text.contains("6.18.44"), "{text}");
    let lat = run(&["latency"], &dat);
    assert!(
        lat.status.success(),
        "{}",
        String::from_utf8_lossy(&lat.stderr)
    );
    assert!(String::from_utf8_lossy(&lat.stdout).contains("Switches"));
}
