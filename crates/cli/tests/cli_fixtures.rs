//! CLI contract tests on the real fixtures: truncated input, broken pipe, JSON output,
//! stdin and compressed input, `info` facts.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> PathBuf {
    let p = repo_root().join("fixtures/sched").join(name);
    assert!(p.exists(), "missing fixture {}", p.display());
    p
}

fn stallscope() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stallscope"))
}

/// `stallscope ARGS --format json FILES…`, which must succeed, as JSON.
fn json_of(args: &[&str], files: &[&Path]) -> serde_json::Value {
    let o = stallscope()
        .args(args)
        .args(["--format", "json"])
        .args(files)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("json")
}

fn tmp_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("stallscope-clifx-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn truncated_perf_data_is_read_to_its_cut_or_exits_2_naming_an_offset() {
    let src = std::fs::read(fixture("starve.perf.data")).unwrap();
    let cut = tmp_dir().join("truncated.perf.data");
    // Cut in the middle of the data section: the records up to the cut are read (as perf
    // keeps them) and data quality says why the data ends early.
    std::fs::write(&cut, &src[..src.len() * 3 / 5]).unwrap();
    let o = stallscope()
        .args(["info", "--format", "json"])
        .arg(&cut)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("perf_data_incomplete"), "{out}");
    assert!(out.contains("perf_data_cut_record"), "{out}");
    // Cut inside the header: nothing to read; exit 2 naming the file and the offset.
    std::fs::write(&cut, &src[..100]).unwrap();
    let o = stallscope().arg("latency").arg(&cut).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(
        err.contains("truncated.perf.data") && err.contains("offset 0x"),
        "{err}"
    );
}

#[test]
fn closed_stdout_exits_0() {
    // like `| head -c 64`, text and JSON alike (JSON exited 2: serde's error lost the
    // broken pipe's kind)
    for args in [
        &["dump"][..],
        &["dump", "--format", "json"],
        &["timehist", "--format", "json"],
        &["timehist"],
    ] {
        let mut child = stallscope()
            .args(args)
            .arg(fixture("starve.perf.data"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 64];
        child
            .stdout
            .as_mut()
            .unwrap()
            .read_exact(&mut first)
            .unwrap();
        drop(child.stdout.take());
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{args:?} stderr: {err}");
        assert!(err.is_empty(), "{args:?} stderr: {err}");
    }
}

#[test]
fn info_json_parses_and_states_facts_of_the_capture() {
    let o = stallscope()
        .args(["info", "--format", "json"])
        .arg(fixture("starve.perf.data"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["inputs"][0]["format"], "perf-data");
    let release = v["inputs"][0]["kernel_release"].as_str().unwrap_or("");
    assert!(release.starts_with("6."), "kernel release {release:?}");
    assert!(v["event_counts"]["sched_switch"].as_u64().unwrap_or(0) > 100);
    let caps = v["capabilities"].as_array().unwrap();
    assert!(caps
        .iter()
        .any(|c| c["analysis"] == "latency" && c["supported"] == true));
    let comms: Vec<&str> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["comm"].as_str())
        .collect();
    assert!(
        comms.iter().any(|c| c.starts_with("cyclictest")),
        "tasks: {comms:?}"
    );
}

#[test]
fn stdin_and_compressed_input_dump_like_the_file() {
    let path = fixture("starve.perf-script.txt");
    let direct = stallscope().arg("dump").arg(&path).output().unwrap();
    assert!(direct.status.success());
    let raw = std::fs::read(&path).unwrap();
    let zst = tmp_dir().join("starve.txt.zst");
    std::fs::write(&zst, zstd_compress(&raw)).unwrap();
    let via_zst = stallscope().arg("dump").arg(&zst).output().unwrap();
    assert_eq!(
        via_zst.stdout,
        direct.stdout,
        "{}",
        String::from_utf8_lossy(&via_zst.stderr)
    );
    let mut child = stallscope()
        .args(["dump", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&raw));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert_eq!(out.stdout, direct.stdout);
}

fn zstd_compress(data: &[u8]) -> Vec<u8> {
    let mut child = Command::new("zstd")
        .args(["-q", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("zstd installed");
    let mut stdin = child.stdin.take().unwrap();
    let data = data.to_vec();
    let w = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().unwrap();
    w.join().unwrap().unwrap();
    out.stdout
}

#[test]
fn dump_json_lines_parse() {
    let o = stallscope()
        .args(["dump", "--format", "json"])
        .arg(fixture("starve.perf.data"))
        .output()
        .unwrap();
    assert!(o.status.success());
    let mut n = 0;
    for line in String::from_utf8(o.stdout).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["ts_ns"].is_u64() && v["event"].is_string() && v["fields"].is_object());
        n += 1;
    }
    assert!(n > 100);
}

#[test]
fn commands_without_their_events_say_what_is_missing_and_exit_2() {
    // latency / timehist on a block-only trace, iolat on a scheduler-only one: no empty
    // table with exit 0, but what is missing and how to record it (exit 2); a filter that
    // matches nothing says so.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let block = root.join("fixtures/block/tracepoints/block.dat");
    let sched = fixture("starve.perf.data");
    let cases: [(&[&str], &Path, &str); 4] = [
        (&["latency"], &block, "no sched_switch events"),
        (&["timehist"], &block, "no sched_switch events"),
        (&["iolat"], &sched, "no block request events"),
        (
            &["timehist", "--pid", "999999"],
            &sched,
            "no context switch of pid 999999",
        ),
    ];
    for (args, file, what) in cases {
        let o = stallscope().args(args).arg(file).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(what), "{args:?}: {err}");
        if !args.contains(&"--pid") && !args.contains(&"--cpu") {
            assert!(err.contains("record them with `"), "{args:?}: {err}");
        }
        // the reason alone: no empty table's head before it (issue #29)
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            !out.contains("task name") && !out.contains("-----"),
            "{args:?}: {out}"
        );
    }
    // an excerpt whose one sched_switch switches to idle (the first such line of a real
    // ftrace text, as pasted): latency counts no wait, and says so for what it is — not "no
    // sched_switch events" (issue #29, seen on trappy's trace_no_trailing_line.txt); perf
    // sched latency prints an empty table for such a file; timehist has its row
    let text =
        std::fs::read_to_string(root.join("fixtures/real_world/no_final_newline.ftrace.txt"))
            .unwrap();
    let to_idle = text
        .lines()
        .find(|l| l.contains("sched_switch:") && l.contains("next_pid=0 "))
        .expect("a switch to idle");
    let excerpt = tmp_dir().join("one-switch-to-idle.txt");
    std::fs::write(&excerpt, format!("{to_idle}\n")).unwrap();
    let o = stallscope().arg("latency").arg(&excerpt).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("its one sched_switch event switches in no task that latency counts"),
        "{err}"
    );
    assert!(!err.contains("no sched_switch events"), "{err}");
    let o = stallscope().arg("timehist").arg(&excerpt).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.contains('['))
            .count(),
        2, // the head's `[tid/pid]` and the row
    );
    // with its events, exit 0
    let o = stallscope().arg("latency").arg(&sched).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    // in JSON the reason is data too
    for (args, file) in [
        (&["latency", "--format", "json"][..], &block),
        (&["timehist", "--format", "json"], &block),
        (&["iolat", "--format", "json"], &sched),
    ] {
        let o = stallscope().args(args).arg(file).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let why = v["nothing_analyzed"].as_str().expect("nothing_analyzed");
        assert!(why.contains("has nothing to measure"), "{args:?}: {why}");
    }
    // dump and export of a file without a readable event
    let empty = tmp_dir().join("empty.txt");
    std::fs::write(&empty, "# tracer: nop\n#\n").unwrap();
    for args in [&["dump"][..], &["export", "--to", "perfetto", "-o", "-"]] {
        let o = stallscope().args(args).arg(&empty).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("nothing to"), "{args:?}: {err}");
    }
}

#[test]
fn lost_events_equal_perfs_and_keep_the_time_range() {
    // fio-dio.perf.data: 3 LOST records of 581 events, and 10 per-event LOST_SAMPLES records
    // (time 0) of the same 581. They were summed (1162) and the LOST_SAMPLES' time 0
    // stretched `info`'s range to 0 .. 3032 s.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let f = root.join("fixtures/detectors/wakeup-ping-pong/fio-dio.perf.data");
    let o = stallscope()
        .args(["info", "--format", "json"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["lost_events"], 581);
    assert_eq!(v["lost_samples"], 581, "shown apart, not added");
    let v_info_lost_samples = v["lost_samples"].as_u64().unwrap();
    assert!(
        v["first_ts_ns"].as_u64().unwrap() > 3_000_000_000_000,
        "{}",
        v["first_ts_ns"]
    );
    let o = stallscope()
        .args(["latency", "--format", "json"])
        .arg(&f)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let (ours, chunks) = (
        v["stats"]["lost_events"].as_u64(),
        v["stats"]["lost_chunks"].as_u64(),
    );
    assert_eq!((ours, chunks), (Some(581), Some(3)));
    // perf sched latency's own footer on the same file
    if stallscope_testkit::require_perf() {
        let out = Command::new("perf")
            .args(["sched", "latency", "-i"])
            .arg(&f)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("lost events (581 out of") && text.contains("in 3 chunks)"),
            "{text}"
        );
        // perf report --stats: the LOST_SAMPLES record total first, then each event's lost
        // samples; their sum is what info shows apart as lost samples
        let out = Command::new("perf")
            .args(["report", "--stats", "-i"])
            .arg(&f)
            .output()
            .unwrap();
        let stats = String::from_utf8_lossy(&out.stdout);
        let per_event: u64 = stats
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("LOST_SAMPLES events:"))
            .filter_map(|r| r.split_whitespace().next()?.parse::<u64>().ok())
            .skip(1)
            .sum();
        assert_eq!(per_event, 581, "{stats}");
        assert_eq!(v_info_lost_samples, per_event);
    }
}

#[test]
fn inputs_that_cannot_be_one_recording_are_not_merged() {
    // A perf.data and a trace.dat recorded 2.5 hours apart: merged, the gap between them
    // became waits ("rcu_preempt waited 181.581 s" as a HIGH finding). Refused, naming both
    // files, unless --merge-unrelated; files recorded together still merge (the blktrace
    // per-CPU files of one capture).
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let a = fixture("starve.perf.data");
    let b = root.join("fixtures/detectors/dispatch-starvation/bfq.trace.dat.zst");
    for cmd in ["analyze", "latency", "dump"] {
        let o = stallscope().arg(cmd).arg(&a).arg(&b).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains("starve.perf.data")
                && err.contains("bfq.trace.dat.zst")
                && err.contains("--merge-unrelated"),
            "{cmd}: {err}"
        );
    }
    let dir = root.join("fixtures/detectors/dispatch-starvation/bfq");
    for (cmd, files) in [
        (["analyze", "--merge-unrelated"], [a.clone(), b.clone()]),
        (
            ["iolat", "--"],
            [
                dir.join("loop0.blktrace.0"),
                dir.join("loop0.blktrace.1.zst"),
            ],
        ),
    ] {
        let o = stallscope().args(cmd).args(files).output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn the_top_level_help_names_every_input_format() {
    let o = stallscope().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    for name in [
        "perf-data",
        "perf-pipe",
        "trace-dat",
        "trace-cmd-text",
        "ftrace-text",
        "perf-script-text",
        "blktrace",
        "blkparse-text",
        "folded",
        "perf-report-text",
    ] {
        assert!(
            help.contains(&format!("({name}")) || help.contains(&format!(" {name})")),
            "{name} missing from --help:\n{help}"
        );
    }
    // every name `--input-format` accepts is among them
    let o = stallscope()
        .args(["info", "--input-format", "nonsense", "x"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let list = err
        .split("expected one of ")
        .nth(1)
        .expect("the accepted names");
    for name in list.trim().split(", ") {
        assert!(
            help.contains(name.trim()),
            "{name} accepted but not in --help"
        );
    }
}

/// Issue #30: one file named twice — the same path, or another path to it — is read once
/// (before: every event doubled, 1899 ms of run time in a 0.96 s trace on one CPU), and the
/// data quality says so.
#[test]
fn a_file_named_twice_is_read_once() {
    let f = fixture("starve.perf.data");
    let link = tmp_dir().join("starve-again.perf.data");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&f, &link).unwrap();
    let latency = |files: &[&Path]| -> serde_json::Value {
        let o = stallscope()
            .args(["latency", "--format", "json"])
            .args(files)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).expect("json")
    };
    let once = latency(&[&f]);
    for files in [[&*f, &*f], [&*f, &*link]] {
        let twice = latency(&files);
        assert_eq!(twice["tasks"], once["tasks"], "{files:?}");
        assert!(
            twice["data_quality"]["input_named_twice"].is_object(),
            "{files:?}: {}",
            twice["data_quality"]
        );
    }
    let _ = std::fs::remove_file(&link);
}

/// Issue #30: a named pipe (bash's `<(cmd)`) is read once as a stream, like `-` (before:
/// "Illegal seek"): the same findings as the file, for text and for perf.data.
#[test]
fn a_named_pipe_is_read_like_stdin() {
    let dir = tmp_dir();
    for (n, name) in ["starve.perf-script.txt", "starve.perf.data"]
        .iter()
        .enumerate()
    {
        let file = fixture(name);
        let fifo = dir.join(format!("fifo-{n}"));
        let _ = std::fs::remove_file(&fifo);
        let made = Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo (coreutils)");
        assert!(made.success());
        let writer = {
            let (file, fifo) = (file.clone(), fifo.clone());
            std::thread::spawn(move || {
                let bytes = std::fs::read(&file).unwrap();
                // the reader may close early on an error: a broken pipe is no failure here
                let _ = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&fifo)
                    .and_then(|mut w| w.write_all(&bytes));
            })
        };
        let titles = |p: &Path| -> Vec<String> {
            let o = stallscope()
                .args(["analyze", "--format", "json"])
                .arg(p)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{}: {}",
                p.display(),
                String::from_utf8_lossy(&o.stderr)
            );
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            v["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["title"].to_string())
                .collect()
        };
        let piped = titles(&fifo);
        writer.join().unwrap();
        let direct = titles(&file);
        assert!(!direct.is_empty(), "{name}");
        assert_eq!(piped, direct, "{name}");
        let _ = std::fs::remove_file(&fifo);
    }
}

/// Issue #30: one corrupted timestamp (a flipped bit puts one `sched_switch` 146 years
/// after the rest) is left out and said (`timestamp_outlier`) by every command; `info` and
/// `analyze` report the recorded span (before: both said 4 611 686 018 s, and `analyze`
/// grew to 272 MB for a 270 KB file in cpu-saturation's time buckets).
#[test]
fn a_corrupted_timestamp_is_left_out_and_every_command_has_the_recorded_span() {
    let intact = fixture("sched_all.perf.data");
    // the record of one sched_switch in the middle, and its time field
    let dump = stallscope()
        .args(["dump", "--source"])
        .arg(&intact)
        .output()
        .unwrap();
    assert!(dump.status.success());
    let text = String::from_utf8_lossy(&dump.stdout);
    let switches: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" sched_switch "))
        .collect();
    let line = switches[switches.len() / 2];
    let ts: u64 = line.split(' ').next().unwrap().parse().unwrap();
    let off = usize::from_str_radix(line.rsplit("offset 0x").next().unwrap().trim(), 16).unwrap();
    let mut bytes = std::fs::read(&intact).unwrap();
    let at = (off..off + 64)
        .find(|&i| bytes[i..i + 8] == ts.to_le_bytes())
        .expect("the record holds its time");
    bytes[at + 7] ^= 0x40; // + 2^62 ns
    let bad = tmp_dir().join("outlier.perf.data");
    std::fs::write(&bad, &bytes).unwrap();
    let json = |args: &[&str], f: &Path| json_of(args, &[f]);
    let span = |v: &serde_json::Value| (v["first_ts_ns"].as_u64(), v["last_ts_ns"].as_u64());
    // the switch was in the middle: the span is the intact file's
    let want = span(&json(&["info"], &intact));
    assert!(want.0.is_some() && want.1.is_some(), "{want:?}");
    let info = json(&["info"], &bad);
    assert_eq!(span(&info), want);
    let analyze = json(&["analyze"], &bad);
    assert_eq!(span(&analyze["capabilities"]), want);
    for (args, v) in [
        (&["info"][..], info),
        (&["analyze"], analyze),
        (&["latency"], json(&["latency"], &bad)),
        (&["timehist"], json(&["timehist"], &bad)),
    ] {
        let n = v["data_quality"]["timestamp_outlier"]["count"].as_u64();
        assert_eq!(n, Some(1), "{args:?}: {}", v["data_quality"]);
    }
}

/// Issue #30: inputs that hold the same events — a perf.data and its own `perf script`
/// text — are refused, naming both and the overlap (before: merged with every event twice,
/// 1899 ms of run time in a 0.96 s trace); with `--merge-overlapping` each event counts once,
/// so `latency` equals the perf.data's alone. Inputs that complete each other still merge:
/// the same text split by event (switches in one file, the rest in the other) gives the
/// whole text's findings.
#[test]
fn inputs_holding_the_same_events_are_refused_or_merged_once() {
    let data = fixture("starve.perf.data");
    let text = fixture("starve.perf-script.txt");
    let o = stallscope()
        .arg("analyze")
        .arg(&data)
        .arg(&text)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("starve.perf.data")
            && err.contains("starve.perf-script.txt")
            && err.contains("CPU ")
            && err.contains("--merge-overlapping"),
        "{err}"
    );
    let json = json_of;
    let alone = json(&["latency"], &[&data]);
    let merged = json(&["latency", "--merge-overlapping"], &[&data, &text]);
    assert_eq!(merged["tasks"], alone["tasks"]);
    let events = json(&["info"], &[&data])["events"].as_u64().unwrap();
    let dq = &merged["data_quality"];
    // every timed event of the text is the perf.data's (the text has no synthesized names)
    let dup = dq["duplicate_events"]["count"].as_u64().unwrap_or(0);
    assert!(dup > events / 2 && dup <= events, "{dup} of {events}: {dq}");
    assert_eq!(dq["overlapping_inputs"]["count"].as_u64(), Some(1), "{dq}");
    // split by event: they complete each other
    let dir = tmp_dir();
    let whole = std::fs::read_to_string(&text).unwrap();
    let (switches, rest): (Vec<&str>, Vec<&str>) = whole
        .lines()
        .partition(|l| l.contains("sched:sched_switch:"));
    let (a, b) = (dir.join("switches.txt"), dir.join("rest.txt"));
    std::fs::write(&a, switches.join("\n") + "\n").unwrap();
    std::fs::write(&b, rest.join("\n") + "\n").unwrap();
    // the findings but for where their evidence lines are (other files, other line numbers)
    let findings = |v: serde_json::Value| -> Vec<serde_json::Value> {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| serde_json::json!([f["detector"], f["title"], f["measures"], f["tasks"]]))
            .collect()
    };
    assert_eq!(
        findings(json(&["analyze"], &[&a, &b])),
        findings(json(&["analyze"], &[&text]))
    );
}
