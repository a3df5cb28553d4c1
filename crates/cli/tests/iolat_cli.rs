//! `stallscope iolat` output contracts: JSON fields (docs/iolat.md), `--by`, exit codes,
//! per-second rates against blkparse's own totals, text layout against btt's.

use std::path::PathBuf;
use std::process::{Command, Stdio};

mod common;
use common::{json, root, run};

fn sample(name: &str) -> String {
    root()
        .join("fixtures/block/loop0")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn json_has_the_documented_fields() {
    let v = json(&[
        "iolat",
        "--format",
        "json",
        &sample("loop0.blktrace.0"),
        &sample("loop0.blktrace.1"),
    ]);
    assert_eq!(v["schema"], "stallscope.iolat/1");
    assert_eq!(v["by"], "device");
    for k in [
        "bios",
        "requests",
        "flushes",
        "requeued",
        "partially_completed",
        "beyond_rate_window",
    ] {
        assert!(v["counts"][k].is_u64(), "counts.{k}");
    }
    let g = &v["groups"][0];
    assert_eq!(g["key"], "7,0");
    assert!(g["bios"].is_u64());
    let p = &g["phases"][0];
    for k in ["n", "min_ns", "avg_ns", "max_ns", "total_ns"] {
        assert!(p[k].is_u64(), "phases[0].{k}");
    }
    assert!(g["histograms"][0]["buckets"][0]["low_us"].is_u64());
    assert_eq!(v["all"]["key"], "all");
    assert!(v["data_quality"].is_object());
}

#[test]
fn counts_agree_with_blkparse_totals() {
    // blkparse_default.txt's trailer (blkparse 1.2.0 on the same files): Reads Queued 10,
    // Writes Queued 29 (= 39 Q traces, of which 5 are zero-length flush bios: 34 bios);
    // Read Dispatches 15 / Write Dispatches 9 count the 5 flush D's as reads (FN has no
    // direction), so data requests = 10 reads + 9 writes = 19, throughput over the run:
    // 416 KiB read, 336 KiB written.
    let v = json(&[
        "iolat",
        "--format",
        "json",
        &sample("loop0.blktrace.0"),
        &sample("loop0.blktrace.1"),
    ]);
    assert_eq!(v["counts"]["bios"], 34);
    assert_eq!(v["counts"]["requests"], 19);
    assert_eq!(v["counts"]["flushes"], 5);
    let secs = v["rates"][0]["seconds"].as_array().expect("seconds");
    let sum = |k: &str| secs.iter().map(|s| s[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!((sum("read_ios"), sum("write_ios")), (10, 9));
    assert_eq!(
        (sum("read_bytes"), sum("write_bytes")),
        (416 * 1024, 336 * 1024)
    );
}

#[test]
fn one_per_cpu_file_is_read_as_blkparse_reads_it() {
    // `blkparse -i loop0.blktrace.0` reads every CPU's file of loop0 (the totals above):
    // so does one per-CPU file given alone, and naming both files, or the directory and a
    // file, reads the recording once (not every request twice).
    let dir = root()
        .join("fixtures/block/loop0")
        .to_string_lossy()
        .into_owned();
    for files in [
        vec![sample("loop0.blktrace.0")],
        vec![sample("loop0.blktrace.1")],
        vec![sample("loop0.blktrace.0"), sample("loop0.blktrace.1")],
        vec![dir.clone(), sample("loop0.blktrace.1")],
    ] {
        let mut args = vec!["iolat", "--format", "json"];
        args.extend(files.iter().map(String::as_str));
        let v = json(&args);
        assert_eq!(
            (
                &v["counts"]["bios"],
                &v["counts"]["requests"],
                &v["counts"]["flushes"]
            ),
            (&34.into(), &19.into(), &5.into()),
            "{files:?}"
        );
        let mut args = vec!["info", "--format", "json"];
        args.extend(files.iter().map(String::as_str));
        let info = json(&args);
        assert!(
            info["data_quality"]["cpus_partly_recorded"].is_null(),
            "{files:?}"
        );
    }
}

#[test]
fn by_process_and_op_select_the_rows() {
    let files = [sample("loop0.blktrace.0"), sample("loop0.blktrace.1")];
    let keys = |by: &str| -> Vec<String> {
        let v = json(&[
            "iolat", "--format", "json", "--by", by, &files[0], &files[1],
        ]);
        v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["key"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(keys("process"), ["dd", "python3"]);
    assert_eq!(keys("op"), ["read", "write"]);
}

#[test]
fn bad_by_is_a_usage_error_and_missing_file_exits_2() {
    let out = run(&["iolat", "--by", "cpu", &sample("loop0.blktrace.0")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--by"));
    let out = run(&["iolat", "/nonexistent/sda.blktrace.0"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn text_rows_are_btt_rows() {
    // btt -A on these files prints (btt 2.09 on this machine):
    //   (  7,  0)         0.000003624   0.000135865   0.002772141          34   (D2C)
    let out = run(&[
        "iolat",
        &sample("loop0.blktrace.0"),
        &sample("loop0.blktrace.1"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("(  7,  0)         0.000003624   0.000135865   0.002772141          34\n"),
        "{text}"
    );
    assert!(text.contains("==================== Per Device ====================\n"));
}

#[test]
fn closed_stdout_exits_0() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args([
            "iolat",
            &sample("loop0.blktrace.0"),
            &sample("loop0.blktrace.1"),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn lean_blktrace_path_equals_the_general_reader() {
    // The lean path (blktrace files decoded without Event values) must give byte-identical
    // JSON to the general reader path, on every blktrace capture in fixtures/.
    let mut sets = vec![root().join("fixtures/block/loop0")];
    if let Ok(rd) = std::fs::read_dir(root().join("fixtures/detectors/dispatch-starvation")) {
        let mut dirs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        sets.extend(dirs);
    }
    for dir in sets {
        let d = dir.to_string_lossy().into_owned();
        for by in ["device", "process"] {
            let lean = run(&["iolat", "--format", "json", "--by", by, &d]);
            let general = run(&[
                "iolat",
                "--format",
                "json",
                "--by",
                by,
                "--general-path",
                &d,
            ]);
            assert!(lean.status.success() && general.status.success(), "{d}");
            assert!(
                lean.stdout == general.stdout,
                "{d} --by {by}: lean and general paths differ:\n{}\n{}",
                String::from_utf8_lossy(&lean.stdout),
                String::from_utf8_lossy(&general.stdout)
            );
        }
    }
}

#[test]
fn one_cpu_and_two_threads_print_the_same() {
    // With one usable CPU the lean path reads on the calling thread, with more on a second
    // thread (docs/iolat.md, Speed): both must print the same bytes. `taskset` (util-linux)
    // pins one run to CPU 0; the other may use every CPU of the machine.
    let d = root()
        .join("fixtures/block/loop0")
        .to_string_lossy()
        .into_owned();
    for by in ["device", "process"] {
        let args = ["iolat", "--format", "json", "--by", by, &d];
        let pinned = Command::new("taskset")
            .args(["-c", "0", env!("CARGO_BIN_EXE_stallscope")])
            .args(args)
            .output()
            .expect("taskset (util-linux)");
        let free = run(&args);
        assert!(
            pinned.status.success() && free.status.success(),
            "--by {by}"
        );
        assert!(
            pinned.stdout == free.stdout,
            "--by {by}: one CPU and two threads differ:\n{}\n{}",
            String::from_utf8_lossy(&pinned.stdout),
            String::from_utf8_lossy(&free.stdout)
        );
    }
}

#[test]
fn truncated_blktrace_file_is_an_error_naming_the_offset() {
    // The lean path gives up on a record cut short; the general reader then reports it.
    let data = std::fs::read(sample("loop0.blktrace.0")).expect("sample");
    let dir = std::env::temp_dir().join(format!("stallscope-iolat-trunc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cut = dir.join("loop0.blktrace.0");
    std::fs::write(&cut, &data[..data.len() - 10]).unwrap();
    let out = run(&["iolat", &cut.to_string_lossy()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("loop0.blktrace.0") && err.contains("truncated"),
        "{err}"
    );
}
