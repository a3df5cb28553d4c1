//! `stallscope analyze --html FILE`: the self-contained HTML report.
//!
//! * `starvation_report_in_headless_chromium`: opens the report of a real starvation capture
//!   (fixtures/detectors/runqueue-starvation/nice.perf.data) in the system Chromium through
//!   `tests/browser/check_report.mjs` (playwright-core) and checks the finding list (with and
//!   without JavaScript), the CPU lanes, the victim's longest wait against `perf sched
//!   latency`'s max wait of the same task, zoom/pan/hover, that no request leaves the page,
//!   and saves a screenshot under `$CARGO_TARGET_TMPDIR/html-report/`. Needs `node`,
//!   `/usr/bin/chromium` (or `$CHROMIUM`) and `npm ci` in tests/browser (scripts/setup.sh):
//!   when one is missing the test fails naming them (`STALLSCOPE_SKIP_MISSING=1` skips it).
//! * `drawn_run_slices_are_timehists_rows`: the run slices of every window equal
//!   `stallscope timehist`'s rows there; no task is drawn on two CPUs at once.
//! * `every_fixture_report_stays_under_the_size_bound`: every perf.data fixture's page is
//!   under 5 MB, names no external URL and has one section per finding of the JSON report.
//! * `stdin_report_says_it_has_no_timelines`, `html_combines_with_text_output`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

mod common;

const BOUND: u64 = 5_000_000;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn out_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-report");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `analyze FILE --format json --html OUT` and returns (report JSON, page).
fn analyze(rel: &str, html: &Path) -> (Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(["analyze", "--format", "json", "--html"])
        .arg(html)
        .arg(root().join(rel))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{rel}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    (report, std::fs::read_to_string(html).unwrap())
}

/// `HIGH detector: title` lines as the page's finding list shows them.
fn finding_lines(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{} {}: {}",
                f["severity"].as_str().unwrap(),
                f["detector"].as_str().unwrap(),
                f["title"].as_str().unwrap()
            )
        })
        .collect()
}

/// Static checks every page must pass.
fn check_page(rel: &str, report: &Value, page: &str) {
    assert!(
        (page.len() as u64) < BOUND,
        "{rel}: {} bytes ≥ {BOUND}",
        page.len()
    );
    assert!(page.contains(
        "content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\""
    ));
    for bad in [
        "http:", "https:", "//cdn", "src=\"", "<link", "@import", "url(",
    ] {
        assert!(!page.contains(bad), "{rel}: page contains {bad:?}");
    }
    let n = report["findings"].as_array().unwrap().len();
    assert_eq!(
        page.matches("<section class=\"finding ").count(),
        n,
        "{rel}"
    );
    // the embedded report is the JSON report
    let start = page
        .find("<script type=\"application/json\" id=\"stallscope-report\">")
        .unwrap();
    let body = &page[start..];
    let body = &body[body.find('>').unwrap() + 1..body.find("</script>").unwrap()];
    let embedded: Value = serde_json::from_str(body).unwrap();
    assert_eq!(&embedded, report, "{rel}: embedded report differs");
}

/// `perf sched latency`'s max wait of a task: (start_ns, end_ns), microsecond precision.
fn peer_max_wait(latency_txt: &str, task: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(root().join(latency_txt)).unwrap();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(task))
        .unwrap_or_else(|| panic!("{task} not in {latency_txt}"));
    let secs = |key: &str| -> u64 {
        let v = line.split(key).nth(1).unwrap().trim_start();
        let v = v.split_whitespace().next().unwrap();
        let (s, us) = v.split_once('.').unwrap();
        s.parse::<u64>().unwrap() * 1_000_000_000 + us.parse::<u64>().unwrap() * 1_000
    };
    (secs("max start:"), secs("max end:"))
}

/// node, chromium and playwright-core, or why not.
fn browser_missing() -> Option<String> {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !Path::new(&chromium).exists() {
        return Some(format!("{chromium} not found (Debian package chromium)"));
    }
    let node = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .status();
    if !node.is_ok_and(|s| s.success()) {
        return Some("node not found (Debian package nodejs)".into());
    }
    if !root()
        .join("tests/browser/node_modules/playwright-core")
        .exists()
    {
        return Some("tests/browser/node_modules missing (run npm ci in tests/browser)".into());
    }
    None
}

#[test]
fn starvation_report_in_headless_chromium() {
    if let Some(why) = browser_missing() {
        stallscope_testkit::require(
            &format!("the browser test's prerequisites ({why})"),
            false,
            "apt-get install chromium nodejs; cd tests/browser && npm ci",
        );
        return;
    }
    let rel = "fixtures/detectors/runqueue-starvation/nice.perf.data";
    let dir = out_dir();
    let html = dir.join("nice.html");
    let png = dir.join("nice.png");
    let _ = std::fs::remove_file(&png);
    let (report, page) = analyze(rel, &html);
    check_page(rel, &report, &page);
    let out = Command::new("node")
        .arg(root().join("tests/browser/check_report.mjs"))
        .arg(&html)
        .arg(&png)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "check_report.mjs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (js, nojs) = (&got["js"], &got["nojs"]);
    let expected = finding_lines(&report);
    assert!(expected.len() >= 3, "{expected:?}");
    assert!(expected[0].starts_with("high runqueue-starvation: cyclictest (pid 23113)"));

    // the finding list and sections, with and without JavaScript
    let list = |v: &Value| -> Vec<String> {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(list(js), expected);
    assert_eq!(list(nojs), expected);
    assert_eq!(nojs["sections"], expected.len());
    assert_eq!(nojs["visibleTitles"], expected.len());
    assert_eq!(nojs["canvases"], 0);
    assert_eq!(nojs["noscriptShown"], true);
    for (i, n) in nojs["evidenceLines"].as_array().unwrap().iter().enumerate() {
        let want = report["findings"][i]["evidence"].as_array().unwrap().len();
        assert_eq!(
            n.as_u64().unwrap() as usize,
            want,
            "evidence of finding {i}"
        );
    }

    // one timeline per finding, a lane per recorded CPU, lane labels drawn
    let nr_cpus = report["inputs"][0]["nr_cpus"].as_u64().unwrap();
    let timelines = js["timelines"].as_array().unwrap();
    assert_eq!(timelines.len(), expected.len());
    assert_eq!(js["canvases"], expected.len());
    for (i, t) in timelines.iter().enumerate() {
        let lanes: Vec<u64> = t["lanes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(lanes, (0..nr_cpus).collect::<Vec<_>>(), "{t}");
        assert!(t["laneHasLabel"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b == true));
        assert!(t["slices"].as_u64().unwrap() > 0);
        // the slices the page paints (its embedded data, which
        // drawn_run_slices_are_timehists_rows compares with timehist's rows) are on the
        // canvas: every one wide enough to sample is painted in its CPU's run band
        let (checked, painted) = (
            t["slicesChecked"].as_u64().unwrap(),
            t["slicesPainted"].as_u64().unwrap(),
        );
        assert!(
            checked > 0 && painted == checked,
            "{checked} sampled, {painted} painted: {t}"
        );
        // and each task of the finding has its state track
        let named = named_pids(&report["findings"][i]);
        let tracks: Vec<i64> = t["tracks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        for p in &named {
            assert!(tracks.contains(p), "no track for {p}: {tracks:?}");
        }
        // a finding with a victim shows its waits (cpu-saturation has none: it is the CPU set's)
        let has_victim = report["findings"][i]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["role"] == "victim");
        if has_victim {
            assert!(t["victimWaits"].as_u64().unwrap() > 0, "{t}");
        }
    }

    // the victim's longest wait in the first timeline is perf sched latency's max wait of
    // cyclictest:23113, and it is drawn red on the canvas
    let t0 = &timelines[0];
    let (peer_start, peer_end) = peer_max_wait(
        "fixtures/detectors/runqueue-starvation/nice.sched-latency.txt",
        "cyclictest:23113",
    );
    let w = &t0["victimWait"];
    assert_eq!(w["pid"], 23113);
    let (start, end) = (
        w["start_ns"].as_u64().unwrap(),
        w["end_ns"].as_u64().unwrap(),
    );
    assert_eq!(start / 1000 * 1000, peer_start, "victim wait start");
    assert_eq!(end / 1000 * 1000, peer_end, "victim wait end");
    assert!(t0["victimWaitRedShare"].as_f64().unwrap() >= 0.8, "{t0}");

    // hover, zoom, pan, reset
    let it = &js["interaction"];
    let tip = it["tooltip"].as_str().unwrap_or_default();
    assert!(
        tip.contains("runnable wait") && tip.contains("cyclictest (pid 23113) [victim]"),
        "{tip:?}"
    );
    assert!(tip.contains("102.710 ms"), "{tip:?}");
    assert!(it["spanZoomed"].as_f64().unwrap() < it["spanBefore"].as_f64().unwrap() * 0.8);
    assert_eq!(it["panned"], true);
    assert_eq!(it["resetSpan"], it["spanBefore"]);

    // nothing left the page; no script errors (a CSP violation is a console error)
    assert_eq!(got["requests"].as_array().unwrap().len(), 0, "{got}");
    assert_eq!(js["pageErrors"].as_array().unwrap().len(), 0, "{js}");
    assert_eq!(js["consoleErrors"].as_array().unwrap().len(), 0, "{js}");

    let shot = std::fs::read(&png).unwrap();
    assert!(shot.starts_with(b"\x89PNG") && shot.len() > 10_000);
    eprintln!("screenshot: {}", png.display());
}

#[test]
fn every_fixture_report_stays_under_the_size_bound() {
    let mut files = Vec::new();
    for dir in ["fixtures/detectors", "fixtures/sched"] {
        for entry in walk(&root().join(dir)) {
            if entry.to_string_lossy().ends_with(".perf.data") {
                files.push(entry);
            }
        }
    }
    assert!(files.len() >= 5);
    let dir = out_dir();
    let mut with_windows = 0;
    for f in files {
        let rel = f
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let html = dir.join(format!("size-{}.html", rel.replace('/', "_")));
        let (report, page) = analyze(&rel, &html);
        check_page(&rel, &report, &page);
        with_windows += page.matches("<div class=\"timeline\"").count();
        eprintln!("{rel}: {} bytes", page.len());
    }
    assert!(with_windows > 0);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Standard input is read once like any input: the events kept while the analysis read it
/// draw the same windows as the file does.
#[test]
fn stdin_report_draws_the_windows_of_the_file() {
    let rel = "fixtures/detectors/runqueue-starvation/nice.perf.data";
    let html = out_dir().join("stdin.html");
    let input = std::fs::File::open(root().join(rel)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(["analyze", "--oneline", "--html"])
        .arg(&html)
        .arg("-")
        .stdin(input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("cyclictest (pid 23113) waited 102.710 ms"));
    let from_stdin = page_windows(&page);
    let (_, file_page) = analyze(rel, &out_dir().join("stdin-file.html"));
    let from_file = page_windows(&file_page);
    assert!(
        !from_file["windows"].as_array().unwrap().is_empty(),
        "the file's page draws windows"
    );
    assert_eq!(from_stdin, from_file);
}

/// The windows drawn from the events the analysis kept ([`WindowSpill`], the inputs read
/// once) are the windows a second reading of the inputs draws ([`collect`]), on traces of
/// every kind of window: scheduler waits, block requests, a blocked chain, stacks.
#[test]
fn html_combines_with_text_output() {
    let html = out_dir().join("text.html");
    let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(["analyze", "--html"])
        .arg(&html)
        .arg(root().join("fixtures/detectors/runqueue-starvation/nice.perf.data"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[HIGH] runqueue-starvation"), "{text}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("cyclictest (pid 23113) waited 102.710 ms"));
}

#[test]
fn histogram_max_wait_matches_perf_sched_latency() {
    let rel = "fixtures/detectors/runqueue-starvation/nice.perf.data";
    let html = out_dir().join("hist.html");
    let (_, page) = analyze(rel, &html);
    let start = page
        .find("<script type=\"application/json\" id=\"stallscope-windows\">")
        .unwrap();
    let body = &page[start..];
    let body = &body[body.find('>').unwrap() + 1..body.find("</script>").unwrap()];
    let windows: Value = serde_json::from_str(body).unwrap();
    let h = windows["histograms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["pid"] == 23113)
        .expect("histogram of the victim");
    let (peer_start, peer_end) = peer_max_wait(
        "fixtures/detectors/runqueue-starvation/nice.sched-latency.txt",
        "cyclictest:23113",
    );
    let max = h["max_ns"].as_u64().unwrap();
    // the peer's start and end are truncated to the microsecond
    assert!(
        max.abs_diff(peer_end - peer_start) < 1_000,
        "max {max} vs perf {}",
        peer_end - peer_start
    );
    let buckets: Vec<u64> = h["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(buckets.iter().sum::<u64>(), h["waits"].as_u64().unwrap());
    // 102.7 ms lies in [2^26, 2^27) ns
    assert_eq!(buckets.len(), 27);
    assert!(buckets[26] >= 1);
    assert!(page.contains("<div class=\"hist\" data-pid=\"23113\">"));
}

#[test]
fn block_capture_windows_carry_requests() {
    let rel = "fixtures/detectors/wakeup-ping-pong/fio-dio.perf.data";
    let html = out_dir().join("fio.html");
    let (report, page) = analyze(rel, &html);
    check_page(rel, &report, &page);
    let start = page
        .find("<script type=\"application/json\" id=\"stallscope-windows\">")
        .unwrap();
    let body = &page[start..];
    let body = &body[body.find('>').unwrap() + 1..body.find("</script>").unwrap()];
    let windows: Value = serde_json::from_str(body).unwrap();
    let w = &windows["windows"][0];
    let requests = w["requests"].as_array().unwrap();
    assert!(!requests.is_empty());
    for r in requests {
        let (s, e) = (
            r["start_ns"].as_u64().unwrap(),
            r["end_ns"].as_u64().unwrap(),
        );
        assert!(
            s <= e && s >= w["start_ns"].as_u64().unwrap() && e <= w["end_ns"].as_u64().unwrap()
        );
        assert!(r["rwbs"].as_str().unwrap().contains('W'), "fio writes: {r}");
        assert!(r["nr_sector"].as_u64().unwrap() > 0, "{r}");
    }
    // fio wrote 4 KiB blocks (fio-dio.fio.txt: bs=4096B): most requests are 8 sectors
    let four_k = requests.iter().filter(|r| r["nr_sector"] == 8).count();
    assert!(
        four_k * 2 > requests.len(),
        "{four_k} of {}",
        requests.len()
    );
}

/// The task ids a finding names (idle excepted).
fn named_pids(finding: &Value) -> Vec<i64> {
    finding["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["pid"].as_i64().unwrap())
        .filter(|&p| p > 0)
        .collect()
}

/// The `stallscope-windows` JSON a page embeds.
fn page_windows(page: &str) -> Value {
    let start = page
        .find("<script type=\"application/json\" id=\"stallscope-windows\">")
        .expect("windows script");
    let body = &page[start..];
    let body = &body[body.find('>').unwrap() + 1..body.find("</script>").unwrap()];
    serde_json::from_str(body).expect("windows json")
}

#[test]
fn drawn_run_slices_are_timehists_rows() {
    // On starve.perf.data the page drew memfd:sealed-91 running on CPU 0 for 550–656 ms
    // where timehist shows the CPU idle: a switch whose prev was not the task seen switched
    // in (a dropped record) was drawn from the start of the trace, and perf's time-0 task
    // names made that 0. The slices are now timehist's rows: every slice that ends inside
    // a window (the ones ending at the window's end are the tasks still running there) is
    // one of `stallscope timehist`'s rows, and every such row is drawn.
    for rel in [
        "fixtures/sched/starve.perf.data",
        "fixtures/detectors/idle-while-runnable/pinned.perf.data",
        // perf 23112 was drawn on both CPUs at once from the trace's start (README screenshot)
        "fixtures/detectors/runqueue-starvation/nice.perf.data",
    ] {
        let html = out_dir().join("slices.html");
        let (report, page) = analyze(rel, &html);
        let trace_first = report["capabilities"]["first_ts_ns"].as_u64().unwrap();
        let windows = page_windows(&page);
        let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
            .args(["timehist", "--format", "json"])
            .arg(root().join(rel))
            .output()
            .unwrap();
        assert!(out.status.success());
        let th: Value = serde_json::from_slice(&out.stdout).unwrap();
        let rows: Vec<(u64, u64, i64, u64)> = th["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["ts_ns"].as_u64().unwrap(),
                    r["cpu"].as_u64().unwrap(),
                    r["tid"].as_i64().unwrap(),
                    r["run_ns"].as_u64().unwrap(),
                )
            })
            .filter(|r| r.2 != 0 && r.3 > 0)
            .collect();
        let first_event = rows.iter().map(|r| r.0 - r.3).min().unwrap_or(0);
        let (runs, repairs) = model_runs(rel);
        let mut unknown_rows = 0;
        let mut checked = 0;
        for w in windows["windows"].as_array().unwrap() {
            let (ws, we) = (
                w["start_ns"].as_u64().unwrap(),
                w["end_ns"].as_u64().unwrap(),
            );
            if w["omitted"]["slices"].as_u64().unwrap_or(0) > 0 {
                continue; // capped: not every slice is drawn
            }
            // a task already running at its CPU's first event is drawn from that event,
            // marked; timehist gives that run no length (a row of run 0 ends it)
            for s in w["slices"].as_array().unwrap() {
                if s["before_trace"] == true {
                    let (end, cpu, pid) = (
                        s["end_ns"].as_u64().unwrap(),
                        s["cpu"].as_u64().unwrap(),
                        s["pid"].as_i64().unwrap(),
                    );
                    assert!(
                        th["rows"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|r| r["ts_ns"] == end
                                && r["cpu"] == cpu
                                && r["tid"] == pid
                                && r["run_ns"] == 0),
                        "{rel}: {s}"
                    );
                }
            }
            let mut drawn: Vec<(u64, u64, i64, u64)> = w["slices"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["before_trace"] != true)
                .filter(|s| s["end_ns"].as_u64().unwrap() < we)
                .map(|s| {
                    (
                        s["end_ns"].as_u64().unwrap(),
                        s["cpu"].as_u64().unwrap(),
                        s["pid"].as_i64().unwrap(),
                        s["start_ns"].as_u64().unwrap(),
                    )
                })
                .collect();
            let mut want: Vec<(u64, u64, i64, u64)> = rows
                .iter()
                .filter(|r| r.0 > ws && r.0 < we)
                .map(|r| (r.0, r.1, r.2, (r.0 - r.3).max(ws).max(first_event)))
                .collect();
            // a row whose run the model does not know (the trace dropped its switch-in or
            // its switch-out: timehist starts it at the CPU's previous switch, the model
            // repairs) is not drawn: at most one per repair
            let unknown = want.len();
            want.retain(|r| runs.contains(&(r.0, r.1, r.2)));
            unknown_rows += unknown - want.len();
            drawn.sort_unstable();
            want.sort_unstable();
            assert_eq!(drawn, want, "{rel}: window {ws}..{we}");
            // no task on two CPUs at once, nothing before the trace
            for s in w["slices"].as_array().unwrap() {
                assert!(s["start_ns"].as_u64().unwrap() >= trace_first, "{rel}: {s}");
            }
            let mut by_task: std::collections::BTreeMap<i64, Vec<(u64, u64)>> = Default::default();
            for s in w["slices"].as_array().unwrap() {
                by_task
                    .entry(s["pid"].as_i64().unwrap())
                    .or_default()
                    .push((
                        s["start_ns"].as_u64().unwrap(),
                        s["end_ns"].as_u64().unwrap(),
                    ));
            }
            for (pid, mut v) in by_task {
                v.sort_unstable();
                for p in v.windows(2) {
                    assert!(
                        p[0].1 <= p[1].0,
                        "{rel}: pid {pid} drawn twice at once: {p:?}"
                    );
                }
            }
            checked += 1;
        }
        assert!(checked > 0, "{rel}: no window compared");
        assert!(
            unknown_rows as u64 <= checked as u64 * repairs,
            "{rel}: {unknown_rows} rows without a model run, {repairs} repairs"
        );
    }
}

/// The model's runs in the trace at `rel` that their switch-out ended (`(switch-out, CPU,
/// task)`; not those a repair ended), and the repairs: records that contradicted the
/// model.
fn model_runs(rel: &str) -> (HashSet<(u64, u64, i64)>, u64) {
    use stallscope::timeline::{Interval, Model, TaskState, Timeline, WakeupSelector};
    let mut inputs = common::open_fixture(rel);
    let rule = WakeupSelector::for_inputs(inputs.metas().iter().copied());
    let mut model = Model::new(Timeline::new(rule));
    let mut runs = HashSet::new();
    while let Some(ev) = inputs.next_event().expect("read") {
        // a run its own switch-out on its CPU ended (not a repair, nor the task seen
        // elsewhere)
        let switched_out = match &ev.kind {
            stallscope::model::EventKind::Switch(sw) => Some((ev.cpu, sw.prev.pid)),
            _ => None,
        };
        let mut keep = |i: Interval| {
            if let Interval::Run {
                tid,
                cpu,
                end,
                ended,
                repaired_start,
                ..
            } = i
            {
                // (a run whose start the repair rule placed is not drawn either)
                if ended != TaskState::Unknown
                    && !repaired_start
                    && switched_out == Some((cpu, tid))
                {
                    runs.insert((end, u64::from(cpu), i64::from(tid)));
                }
            }
        };
        model.process(&ev, &mut keep, &mut |_| {});
    }
    let q = model.timeline().quality();
    let repairs = [
        stallscope::model::Problem::SwitchPrevMismatch,
        stallscope::model::Problem::ImpossibleTransition,
        stallscope::model::Problem::SwitchInMissing,
    ]
    .iter()
    .map(|&p| q.count(p))
    .sum();
    (runs, repairs)
}

#[test]
fn each_named_task_gets_a_state_track_that_tiles_its_window() {
    // Under the CPU lanes, one track per task of the finding: its scheduler state (running
    // on which CPU, runnable, sleeping, blocked) from the state machine timehist and the
    // detectors follow. The spans of a task tile the window; its running spans are where
    // the CPU lanes draw it.
    let rel = "fixtures/sched/starve.perf.data";
    let html = out_dir().join("tracks.html");
    let (report, page) = analyze(rel, &html);
    assert!(page.contains("data-tracks") || page.contains("task_states"));
    let windows = page_windows(&page);
    let mut checked = 0;
    for w in windows["windows"].as_array().unwrap() {
        let (ws, we) = (
            w["start_ns"].as_u64().unwrap(),
            w["end_ns"].as_u64().unwrap(),
        );
        let f = &report["findings"][w["finding"].as_u64().unwrap() as usize];
        let named = named_pids(f);
        let states = w["task_states"].as_array().expect("task_states");
        for pid in &named {
            let mut spans: Vec<(u64, u64, String, Option<u64>)> = states
                .iter()
                .filter(|s| s["pid"].as_i64() == Some(*pid))
                .map(|s| {
                    (
                        s["start_ns"].as_u64().unwrap(),
                        s["end_ns"].as_u64().unwrap(),
                        s["state"].as_str().unwrap().to_string(),
                        s["cpu"].as_u64(),
                    )
                })
                .collect();
            spans.sort();
            assert!(!spans.is_empty(), "pid {pid}: no track");
            // (or with the trace, when the window's margin reaches before it)
            let first = report["capabilities"]["first_ts_ns"].as_u64().unwrap();
            assert_eq!(
                spans[0].0,
                ws.max(first),
                "pid {pid}: the track starts with the window"
            );
            assert_eq!(
                spans.last().unwrap().1,
                we,
                "pid {pid}: the track ends with it"
            );
            for p in spans.windows(2) {
                assert_eq!(p[0].1, p[1].0, "pid {pid}: gap or overlap {p:?}");
            }
            // a running span inside the window is a run slice of the same task and CPU
            for (s, e, state, cpu) in &spans {
                if state == "running" && *s > ws && *e < we {
                    let drawn = w["slices"].as_array().unwrap().iter().any(|sl| {
                        sl["pid"].as_i64() == Some(*pid)
                            && sl["cpu"].as_u64() == *cpu
                            && sl["start_ns"].as_u64() == Some(*s)
                            && sl["end_ns"].as_u64() == Some(*e)
                    });
                    assert!(
                        drawn,
                        "pid {pid} running {s}..{e} on {cpu:?} not in the CPU lanes"
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 0);
}

#[test]
fn drawn_waits_are_timehists_sch_delays_and_open_ones_still_wait() {
    // The page once kept its own runnable set: on starve.perf.data it drew perf (12896)
    // waiting 186 ms and 870 ms "still waiting at window end" while timehist and
    // critical-path have it asleep (its switch-out came on a CPU that a dropped record
    // left running another task). The waits are now the model's: every wait that ends in
    // the window is the sch delay of timehist's row for the run it ended in (same task, CPU,
    // switch-in; the length where the window did not clip it), and every open wait is a
    // task critical-path calls runnable at the window's end.
    for rel in [
        "fixtures/sched/starve.perf.data",
        "fixtures/detectors/wakeup-ping-pong/fio-dio.perf.data",
        "fixtures/chain/chain.perf.data.xz",
    ] {
        let html = out_dir().join("waits.html");
        let (_, page) = analyze(rel, &html);
        let windows = page_windows(&page);
        let path = root().join(rel);
        let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
            .args(["timehist", "--format", "json"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success());
        let th: Value = serde_json::from_slice(&out.stdout).unwrap();
        // (task, CPU, switch-in) → sch delay
        let sch: std::collections::HashMap<(i64, u64, u64), u64> = th["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let u = |k: &str| r[k].as_u64().unwrap();
                (
                    (
                        r["tid"].as_i64().unwrap(),
                        u("cpu"),
                        u("ts_ns") - u("run_ns"),
                    ),
                    u("sch_delay_ns"),
                )
            })
            .collect();
        // per CPU, timehist's rows in time order: (switch-out, task switched out)
        let mut per_cpu: std::collections::BTreeMap<u64, Vec<(u64, i64)>> = Default::default();
        for r in th["rows"].as_array().unwrap() {
            per_cpu
                .entry(r["cpu"].as_u64().unwrap())
                .or_default()
                .push((r["ts_ns"].as_u64().unwrap(), r["tid"].as_i64().unwrap()));
        }
        let (mut closed, mut open, mut unclosed_runs, mut stale) = (0, 0, 0, 0);
        for w in windows["windows"].as_array().unwrap() {
            let (ws, we) = (
                w["start_ns"].as_u64().unwrap(),
                w["end_ns"].as_u64().unwrap(),
            );
            for wt in w["waits"].as_array().unwrap() {
                let (pid, cpu) = (wt["pid"].as_i64().unwrap(), wt["cpu"].as_u64().unwrap());
                let (start, end) = (
                    wt["start_ns"].as_u64().unwrap(),
                    wt["end_ns"].as_u64().unwrap(),
                );
                if wt["open"] == true {
                    assert_eq!(end, we, "{rel}: {wt}");
                    let window = format!(
                        "{}..{}",
                        stallscope::model::fmt_secs_nsecs(start),
                        stallscope::model::fmt_secs_nsecs(end)
                    );
                    let pid_text = pid.to_string();
                    let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
                        .args(["critical-path", "--format", "json", "--pid", &pid_text])
                        .args(["--time", &window])
                        .arg(&path)
                        .output()
                        .unwrap();
                    assert!(out.status.success(), "{rel}: {wt}");
                    let cp: Value = serde_json::from_slice(&out.stdout).unwrap();
                    let last = cp["intervals"].as_array().unwrap().last().cloned();
                    let kind = last.as_ref().map(|l| l["kind"].clone());
                    assert_eq!(
                        kind,
                        Some(Value::from("runnable")),
                        "{rel}: open wait {wt} but critical-path ends {last:?}"
                    );
                    open += 1;
                    continue;
                }
                let Some(delay) = sch.get(&(pid, cpu, end)) else {
                    // the run it ended in has no row: its switch-out was dropped (this VM
                    // drops some without counting them), so the CPU's next switch names
                    // another task as the one leaving
                    let rows = &per_cpu[&cpu];
                    let next = rows.iter().find(|r| r.0 > end);
                    assert!(
                        next.is_none_or(|r| r.1 != pid),
                        "{rel}: wait {wt} ends in no timehist run, yet {pid} leaves CPU {cpu} next ({next:?})"
                    );
                    unclosed_runs += 1;
                    continue;
                };
                // timehist's sch delay starts at the first wakeup after the task's last
                // recorded switch-out; across a dropped switch-out it is that stale wakeup
                // (fio-dio: 1.503 ms where the wakeup before this run was 0.269 ms before
                // it), never later than the model's: equal, or longer, and rarely so
                // (model_intervals.rs shows equality wherever the switch-out is recorded)
                assert!(*delay >= end - start, "{rel}: {wt}: sch delay {delay}");
                if start > ws && *delay != end - start {
                    stale += 1;
                }
                closed += 1;
            }
        }
        assert!(closed > 0, "{rel}: no wait drawn");
        assert!(
            unclosed_runs * 20 <= closed,
            "{rel}: {unclosed_runs} of {closed}"
        );
        assert!(stale * 20 <= closed, "{rel}: {stale} of {closed} differ");
        eprintln!(
            "{rel}: {closed} closed waits = sch delays ({stale} shorter: a stale wakeup in timehist), {open} open ones runnable, {unclosed_runs} before a run whose switch-out was dropped"
        );
    }
}
