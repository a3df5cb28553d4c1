//! The facade is the library (#22 item 1): `stallscope::analyze::analyze` gives the report
//! `stallscope analyze --format json` prints, byte for byte, on fixtures of each kind of
//! input (the CLI is that call plus argument parsing and rendering).

mod common;

use common::{root, run};
use stallscope::analyze::{analyze, AnalyzeOptions};

#[test]
fn the_library_report_is_the_cli_report() {
    for (file, select) in [
        ("fixtures/sched/starve.perf.data", None),
        ("fixtures/sched/equal.ftrace.txt", None),
        (
            "fixtures/chain/chain.perf.data.xz",
            Some("blocked-chain,dispatch-starvation"),
        ),
        ("fixtures/real_world/fp.perf.data", None),
    ] {
        let path = root().join(file);
        let p = path.to_str().unwrap().to_string();
        let mut args = vec!["analyze", "--format", "json"];
        if let Some(s) = select {
            args.extend(["--select", s]);
        }
        args.push(&p);
        let out = run(&args);
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut options = AnalyzeOptions::new(vec![p.clone()]);
        options.select_detectors(select, None, &[]).unwrap();
        let report = analyze(&options).unwrap();
        let mut ours = Vec::new();
        stallscope::report::json::write(&mut ours, &report).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&out.stdout),
            "{file}"
        );
    }
}

#[test]
fn errors_are_values_with_the_file_and_what_was_expected() {
    let bad = std::env::temp_dir().join(format!("stallscope-lib-{}.dat", std::process::id()));
    std::fs::write(&bad, b"\x17\x08\x44tracing6\0\0\0\0garbage").unwrap();
    let err = analyze(&AnalyzeOptions::new(vec![bad
        .to_str()
        .unwrap()
        .to_string()]))
    .expect_err("a broken trace.dat is an error");
    let text = err.to_string();
    let _ = std::fs::remove_file(&bad);
    assert!(text.contains(bad.to_str().unwrap()), "{text}");
    let mut options = AnalyzeOptions::new(vec![]);
    assert!(options
        .select_detectors(Some("no-such"), None, &[])
        .is_err());
}
