//! Inputs as other machines and mailing-list posts produce them (issue #20), each against
//! the peer tool on the same file (`fixtures/real_world/`, see its README):
//!
//! - profiles whose binaries are gone (`--call-graph dwarf`, `-g`, no `-g`): every function's
//!   self share equals `perf report --no-children --sort dso,sym` run with an empty
//!   `--symfs` (so perf, like us, has no binary and no kallsyms on any machine): user frames
//!   keyed by DSO + offset, kernel frames by address;
//! - `perf script` text with the ip on the sample line, without a time column, with
//!   space-indented frames: the same samples as perf reports for the recording;
//! - a pipe stream followed by perf's own messages, and one with AUXTRACE data: the same
//!   samples as perf keeps, with a data-quality note saying what was skipped;
//! - a trace.dat with `ftrace:kernel_stack` / `user_stack` after each event and
//!   `trace_marker` lines: every frame and every marker text equal `trace-cmd report`'s, and
//!   each stack is also the callchain of the event it follows;
//! - `trace-cmd report -R` with hex `prev_state`: the same switches as the trace.dat;
//! - a last line without its newline: used, like the same text with the newline;
//! - pre-4.14 `prev_state` numbers (a copied LISA text): decoded with the 4.8–4.13 table
//!   (the kernel's own letters for them), and the note says which table was assumed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use stallscope_model::{DataQuality, Event, EventKind, FieldValue, Problem, Profile};
use stallscope_read::profile::{
    perf_script, read_profile, KernelSymbolSource, ProfileOptions, ProfileRead,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/real_world")
        .join(name)
}

fn tmp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("stallscope-rw-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `dwarf.perf.data.xz` decompressed into a temporary file (perf reads no xz).
fn dwarf_data() -> PathBuf {
    let dst = tmp_dir("dwarf").join("dwarf.perf.data");
    let out = Command::new("xz")
        .arg("-dc")
        .arg(fixture("dwarf.perf.data.xz"))
        .output()
        .expect("xz is installed");
    assert!(out.status.success());
    std::fs::write(&dst, out.stdout).unwrap();
    dst
}

/// perf with no binaries, no build-id cache and no kernel symbols on any machine: an
/// empty `--symfs` and `HOME`.
fn perf_without_symbols(args: &[&str], data: &Path) -> String {
    let empty = tmp_dir("symfs");
    let out = Command::new("perf")
        .args(args)
        .arg("--symfs")
        .arg(&empty)
        .arg("-f")
        .arg("-i")
        .arg(data)
        .env("HOME", &empty)
        .output()
        .expect("perf is installed (apt-get install linux-perf)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn perf_plain(args: &[&str], data: &Path) -> String {
    let out = Command::new("perf")
        .args(args)
        .arg("-f")
        .arg("-i")
        .arg(data)
        .output()
        .expect("perf is installed (apt-get install linux-perf)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn no_symbols() -> ProfileOptions {
    ProfileOptions {
        symbols: KernelSymbolSource::Off,
        event: None,
        no_user_symbols: true,
    }
}

/// Self weight per function name, in hundredths of a percent of the total.
fn self_bp(p: &Profile) -> HashMap<String, i64> {
    let w = p.self_weights();
    let total = u128::from(p.total_weight());
    (0..p.symbols.len())
        .filter(|&i| w[i] > 0)
        .map(|i| {
            let bp = (u128::from(w[i]) * 20_000 + total) / (2 * total);
            (p.symbols[i].to_string(), bp as i64)
        })
        .collect()
}

/// `perf report --stdio --no-children --sort dso,sym -g none` entries, named as we name
/// unresolved frames: `    47.74%  spin  [.] 0x000000000000118e` → `[spin+0x118e]`,
/// `[k] 0xffffffff821ef666` → `0xffffffff821ef666`.
fn perf_entries(report: &str) -> HashMap<String, i64> {
    let mut out = HashMap::new();
    for line in report.lines() {
        let t = line.trim();
        if t.starts_with('#') || !t.contains('%') {
            continue;
        }
        let mut words = t.split_whitespace();
        let (Some(pct), Some(dso), Some(kind), Some(sym)) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            continue;
        };
        let Some((int, frac)) = pct.trim_end_matches('%').split_once('.') else {
            continue;
        };
        let bp = int.parse::<i64>().unwrap() * 100 + frac.parse::<i64>().unwrap();
        let addr = u64::from_str_radix(sym.trim_start_matches("0x"), 16)
            .unwrap_or_else(|_| panic!("perf resolved {sym:?} although it had no symbols: {line}"));
        let name = if kind == "[k]" {
            format!("{addr:#x}")
        } else {
            format!("[{dso}+{addr:#x}]")
        };
        *out.entry(name).or_default() += bp;
    }
    out
}

/// `perf report` of every self share by DSO and symbol, no call graph, nothing cut.
const REPORT_DSO_SYM: &[&str] = &[
    "report",
    "--stdio",
    "--no-children",
    "--sort",
    "dso,sym",
    "-g",
    "none",
    "--percent-limit",
    "0",
];

/// Our self shares equal perf's, entry by entry (±1 bp for rounding).
fn assert_same_self_shares(ours: &ProfileRead, data: &Path) {
    let report = perf_without_symbols(REPORT_DSO_SYM, data);
    let theirs = perf_entries(&report);
    assert!(theirs.len() >= 3, "perf report entries: {report}");
    let mine = self_bp(&ours.profile);
    for (name, bp) in &theirs {
        let m = mine.get(name).copied().unwrap_or(0);
        assert!(
            (m - bp).abs() <= 1,
            "{name}: perf {bp} bp, ours {m} bp\n{report}"
        );
    }
    let sum: i64 = mine.values().sum();
    assert!(
        (sum - 10_000).abs() <= mine.len() as i64,
        "self shares sum to {sum} bp"
    );
    for (name, bp) in &mine {
        assert!(
            theirs.contains_key(name) || *bp == 0,
            "{name} ({bp} bp) is not in perf's report"
        );
    }
}

#[test]
fn dwarf_profile_user_samples_keep_their_leaf_like_perf_report() {
    if !stallscope_testkit::require_perf() {
        return;
    }
    let data = dwarf_data();
    let r = read_profile(data.to_str().unwrap(), None, &no_symbols()).unwrap();
    assert_same_self_shares(&r, &data);
    // user samples have no callchain in a dwarf recording: said, not silently empty
    assert!(r.quality.count(Problem::ProfileUserLeafOnly) > 0);
    assert_eq!(r.quality.count(Problem::ProfileEmptyCallchain), 0);
    let user_leaves = r
        .profile
        .stacks
        .iter()
        .filter(|s| r.profile.kernel[s.frames[0] as usize] == Some(false))
        .count();
    assert!(
        user_leaves > r.profile.stacks.len() / 2,
        "spin works in user space"
    );
}

#[test]
fn frame_pointer_and_ip_only_profiles_equal_perf_report() {
    if !stallscope_testkit::require_perf() {
        return;
    }
    for name in ["fp.perf.data", "nog.perf.data"] {
        let data = fixture(name);
        let r = read_profile(data.to_str().unwrap(), None, &no_symbols()).unwrap();
        assert_same_self_shares(&r, &data);
        assert!(
            r.profile.stacks.iter().all(|s| !s.frames.is_empty()),
            "{name}"
        );
    }
}

/// Samples perf reports for a perf.data (`# Samples: N`).
fn perf_sample_count(data: &Path) -> usize {
    let report = perf_plain(&["report", "--stdio", "--no-children"], data);
    report
        .lines()
        .find_map(|l| l.strip_prefix("# Samples: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no sample count in {report}"))
}

#[test]
fn perf_script_with_the_ip_on_the_sample_line_is_a_profile() {
    if !stallscope_testkit::require_perf() {
        return;
    }
    let text = std::fs::read_to_string(fixture("nog.script.txt")).unwrap();
    let r = perf_script::parse("nog.script.txt", &text, &no_symbols()).unwrap();
    assert_eq!(
        r.profile.stacks.len(),
        perf_sample_count(&fixture("nog.perf.data"))
    );
    assert_eq!(r.quality.count(Problem::ProfileNoCallchain), 0);
    // an independent count of the text: the symbol before the last `(DSO)`, offset cut
    let mut expected: HashMap<String, u64> = HashMap::new();
    for line in text.lines() {
        let Some(open) = line.rfind(" (") else {
            continue;
        };
        let sym = line[..open].rsplit(' ').next().unwrap();
        let sym = sym.split("+0x").next().unwrap();
        *expected.entry(sym.to_string()).or_default() += 1;
    }
    let w = r.profile.self_weights();
    let period = r.profile.stacks[0].weight;
    for (sym, n) in &expected {
        let id = r
            .profile
            .lookup(sym)
            .unwrap_or_else(|| panic!("{sym} missing"));
        assert_eq!(w[id as usize], n * period, "{sym}");
    }
    // the text carries kernel symbols: no "kernel symbols missing" note
    assert_eq!(
        (r.quality.count(Problem::KernelSymbols)
            + r.quality.count(Problem::KernelSymbolsReleaseUnknown)),
        0
    );
}

#[test]
fn untimed_and_space_indented_perf_script_read_like_perf_script() {
    if !stallscope_testkit::require_perf() {
        return;
    }
    // perf's own script of the recording, now: one block per sample, its frame lines
    let script = perf_plain(
        &["script", "-F", "comm,tid,event,ip,sym,dso"],
        &fixture("fp.perf.data"),
    );
    let perf_frames: Vec<usize> = script
        .split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|b| b.lines().filter(|l| l.starts_with('\t')).count())
        .collect();
    let mut profiles = Vec::new();
    for name in ["untimed.script.txt", "untimed_spaces.script.txt"] {
        let text = std::fs::read_to_string(fixture(name)).unwrap();
        let r = perf_script::parse(name, &text, &no_symbols()).unwrap();
        let frames: Vec<usize> = r.profile.stacks.iter().map(|s| s.frames.len()).collect();
        assert_eq!(frames, perf_frames, "{name}: frames per sample");
        assert!(
            r.profile.stacks.iter().all(|s| s.ts.is_none()),
            "{name}: no time column"
        );
        assert_eq!(r.quality.count(Problem::ProfileBadLine), 0, "{name}");
        assert_eq!(r.quality.count(Problem::ProfileBadFrame), 0, "{name}");
        assert!(r.profile.lookup("hot_inner").is_some(), "{name}");
        profiles.push(self_bp(&r.profile));
    }
    assert_eq!(profiles[0], profiles[1], "TABs or spaces: the same profile");
}

fn read_events(path: &Path) -> (Vec<Event>, DataQuality) {
    let mut r = stallscope_read::open(path.to_str().unwrap(), None, 0).unwrap();
    let mut events = Vec::new();
    while let Some(ev) = r.next_event().unwrap() {
        events.push(ev);
    }
    (events, r.quality().clone())
}

fn samples(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(&e.kind, EventKind::Generic(g) if g.name == "cpu-clock"))
        .count()
}

#[test]
fn pipe_streams_end_at_perfs_messages_and_skip_auxtrace_data() {
    if !stallscope_testkit::require_perf() {
        return;
    }
    // perf keeps every sample before its appended messages
    let path = fixture("pipe_stderr.perf.data");
    let perf_samples = perf_plain(&["script"], &path).lines().count();
    let (events, dq) = read_events(&path);
    assert_eq!(samples(&events), perf_samples);
    let (_, e) = dq
        .entries()
        .find(|(k, _)| *k == "perf_pipe_trailing_garbage")
        .expect("the tail is reported");
    assert!(
        e.examples[0].contains("[ perf record: Woken up"),
        "{:?}",
        e.examples
    );
    // the same stream with AUXTRACE data after its first sample (perf 6.1 refuses the
    // record without an AUXTRACE_INFO, so the oracle is the stream without it)
    let (aux_events, aux_dq) = read_events(&fixture("auxtrace.pipe.data"));
    assert_eq!(samples(&aux_events), perf_samples);
    assert_eq!(aux_dq.count(Problem::PerfAuxtraceSkipped), 1);
    assert_eq!(aux_dq.count(Problem::PerfPipeTrailingGarbage), 0);
    assert_eq!(aux_dq.count(Problem::PerfUnknownRecordTypes), 0);
}

/// A corrupt record header in the middle of a pipe stream (a record's size overwritten with
/// 3) is an error at its offset, not "trailing garbage": the records after it would be lost
/// without a word (before: a warning quoting binary bytes, 36 of 102 events, exit 0). The
/// same stream with perf's own messages after it, or zero fill, still ends there quietly.
#[test]
fn a_corrupt_record_inside_a_pipe_stream_is_an_error_at_its_offset() {
    let path = fixture("pipe_stderr.perf.data");
    let bytes = std::fs::read(&path).unwrap();
    // walk the records after the 16-byte pipe header to the middle one
    let mut offs = Vec::new();
    let mut off = 16usize;
    while off + 8 <= bytes.len() {
        let rtype = u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap());
        let size = u16::from_le_bytes(bytes[off + 6..off + 8].try_into().unwrap()) as usize;
        if size < 8 || rtype >= 256 {
            break; // perf's messages
        }
        offs.push(off);
        off += size;
    }
    assert!(offs.len() > 100, "{}", offs.len());
    let mid = offs[offs.len() / 2];
    let dir = std::env::temp_dir().join(format!("ss-pipe-corrupt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut bad = bytes.clone();
    bad[mid + 6..mid + 8].copy_from_slice(&3u16.to_le_bytes());
    let bad_path = dir.join("bad.perf.data");
    std::fs::write(&bad_path, &bad).unwrap();
    let mut r = stallscope_read::open(bad_path.to_str().unwrap(), None, 0).unwrap();
    let err = loop {
        match r.next_event() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("read to the end past a corrupt record"),
            Err(e) => break e.to_string(),
        }
    };
    assert!(err.contains(&format!("offset {mid:#x}")), "{err}");
    assert!(err.contains("size 3"), "{err}");
    // zero fill after the last record ends the stream like perf's messages do
    let mut zeros = bytes[..off].to_vec();
    zeros.extend(std::iter::repeat_n(0u8, 256));
    let zero_path = dir.join("zeros.perf.data");
    std::fs::write(&zero_path, &zeros).unwrap();
    let (events, dq) = read_events(&zero_path);
    assert_eq!(events.len(), read_events(&path).0.len());
    assert_eq!(dq.count(Problem::PerfPipeTrailingGarbage), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `trace-cmd report` of the stacks capture (no kallsyms in the file): per stack record its
/// kind and frame addresses — kernel stacks as `=> ffffffff813a23c5` lines after a
/// `<stack trace >` line, user stacks as `=> 0x7f03fdceabd3` on the record's line and
/// `\t=> 0x…` lines after it, trace-cmd printing the kernel's zero padding, which ends the
/// frames — and the trace_marker texts (`print: 0xffffffff8149ab1a: TEXT`).
fn trace_cmd_stacks(path: &Path) -> (Vec<(String, Vec<u64>)>, Vec<String>) {
    let out = Command::new("trace-cmd")
        .arg("report")
        .arg(path)
        .output()
        .expect("trace-cmd is installed (apt-get install trace-cmd)");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut stacks: Vec<(String, Vec<u64>, bool)> = Vec::new();
    let mut markers = Vec::new();
    let hex = |s: &str| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok();
    for line in text.lines() {
        let frame = line.trim_start_matches('\t').strip_prefix("=> ");
        if let (Some(f), Some((_, frames, ended))) = (frame, stacks.last_mut()) {
            match hex(f) {
                Some(0) => *ended = true,
                Some(a) if !*ended => frames.push(a),
                _ => {}
            }
        } else if line.contains(" kernel_stack: ") {
            stacks.push(("kernel_stack".into(), Vec::new(), false));
        } else if let Some((_, first)) = line.split_once(" user_stack: ") {
            let mut frames = Vec::new();
            let a = first.trim().trim_start_matches("=> ");
            let ended = match hex(a) {
                Some(0) | None => true,
                Some(a) => {
                    frames.push(a);
                    false
                }
            };
            stacks.push(("user_stack".into(), frames, ended));
        } else if let Some((_, rest)) = line.split_once(" print: ") {
            let text = rest.trim_start();
            markers.push(text.split_once(": ").map_or(text, |(_, t)| t).to_string());
        }
    }
    let stacks = stacks.into_iter().map(|(k, f, _)| (k, f)).collect();
    (stacks, markers)
}

#[test]
fn trace_dat_stacks_and_markers_equal_trace_cmd_report() {
    if !stallscope_testkit::require_trace_cmd() {
        return;
    }
    let path = fixture("stacks_markers.dat");
    let (events, dq) = read_events(&path);
    assert_eq!(
        dq.count(Problem::TracedatBadRecord),
        0,
        "every stack record is read"
    );
    let (theirs, their_markers) = trace_cmd_stacks(&path);
    let ours: Vec<(String, Vec<u64>)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Generic(g) if g.name.ends_with("_stack") => Some((
                g.name.clone(),
                e.callchain
                    .as_deref()
                    .and_then(|c| c.get(1..))
                    .unwrap_or(&[])
                    .to_vec(),
            )),
            _ => None,
        })
        .collect();
    assert!(ours.len() > 20, "stacks recorded: {}", ours.len());
    assert_eq!(ours, theirs, "every stack, frame by frame");
    // records hold as many frames as the stack had: not cut to the format's `caller[8]`
    assert!(
        ours.iter()
            .any(|(k, f)| k == "kernel_stack" && f.len() != 8),
        "stacks of other lengths than 8 kept"
    );
    // each stack is also the callchain of the event it follows
    let with_chain = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Switch(_) | EventKind::Waking(_)))
        .filter(|e| e.callchain.is_some())
        .count();
    assert_eq!(
        with_chain,
        ours.iter().filter(|(k, _)| k == "kernel_stack").count()
    );
    let markers: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Generic(g) if g.name == "print" => {
                g.fields.iter().find_map(|(k, v)| match (k.as_str(), v) {
                    ("buf", FieldValue::Str(s)) => Some(s.clone()),
                    _ => None,
                })
            }
            _ => None,
        })
        .collect();
    assert_eq!(markers.len(), 4);
    assert_eq!(markers, their_markers);
    assert!(markers[0].starts_with("stallscope marker 1"));
}

fn switch_states(events: &[Event]) -> Vec<(i32, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Switch(s) => Some((s.prev.pid, s.prev_state.to_string())),
            _ => None,
        })
        .collect()
}

#[test]
fn hex_prev_state_text_gives_the_trace_dats_switches() {
    let (dat, _) = read_events(&fixture("stacks_markers.dat"));
    let (text, dq) = read_events(&fixture("stacks_markers.report_R_hex.txt"));
    let a = switch_states(&dat);
    assert!(a.len() > 10);
    assert_eq!(switch_states(&text), a);
    assert!(a.iter().any(|(_, s)| s != "R"), "sleeping switches too");
    // no release in the text: the note names the table assumed
    assert_eq!(dq.count(Problem::PrevStateTableAssumed), 1);
}

#[test]
fn a_complete_last_line_without_newline_is_used() {
    let path = fixture("no_final_newline.ftrace.txt");
    let (cut, dq) = read_events(&path);
    let mut whole = std::fs::read(&path).unwrap();
    whole.push(b'\n');
    let tmp = tmp_dir("newline").join("with_newline.txt");
    std::fs::write(&tmp, whole).unwrap();
    let (full, full_dq) = read_events(&tmp);
    assert_eq!(cut.len(), full.len());
    assert_eq!(cut.last().map(|e| e.ts), full.last().map(|e| e.ts));
    assert_eq!(dq.count(Problem::NoFinalNewline), 1);
    assert_eq!(dq.count(Problem::TruncatedLastLine), 0);
    assert_eq!(full_dq.count(Problem::NoFinalNewline), 0);
}

#[test]
fn pre_4_14_prev_state_numbers_use_the_old_table() {
    // LISA's trace-cmd -R text of a 4.8–4.13 kernel. That kernel's sched_switch print fmt
    // (TASK_STATE_MAX = 4096) names its numbers: 64 = x (TASK_DEAD), 130 = D|K, 4096 = R+.
    let (events, dq) = read_events(&fixture("external/lisa_trace_txt.trace.txt.xz"));
    let text = {
        let out = Command::new("xz")
            .arg("-dc")
            .arg(fixture("external/lisa_trace_txt.trace.txt.xz"))
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let raw: Vec<u64> = text
        .lines()
        .filter(|l| l.contains("sched_switch:"))
        .filter_map(|l| l.split("prev_state=").nth(1))
        .map(|v| v.split(' ').next().unwrap().parse().unwrap())
        .collect();
    let letters = |v: u64| -> String {
        let mut parts: Vec<&str> = Vec::new();
        for (bit, l) in [
            (1, "S"),
            (2, "D"),
            (4, "T"),
            (8, "t"),
            (16, "Z"),
            (32, "X"),
            (64, "x"),
            (128, "K"),
            (256, "W"),
            (512, "P"),
            (1024, "N"),
        ] {
            if v & 4095 & bit != 0 {
                parts.push(l);
            }
        }
        let base = if parts.is_empty() {
            "R".to_string()
        } else {
            parts.join("|")
        };
        if v & 4096 != 0 {
            format!("{base}+")
        } else {
            base
        }
    };
    let ours: Vec<String> = switch_states(&events).into_iter().map(|(_, s)| s).collect();
    let expected: Vec<String> = raw.iter().map(|&v| letters(v)).collect();
    assert_eq!(ours, expected);
    assert!(ours.iter().any(|s| s == "x") && ours.iter().any(|s| s == "D|K"));
    let (_, e) = dq
        .entries()
        .find(|(k, _)| *k == "prev_state_table_assumed")
        .unwrap();
    assert!(e.examples[0].contains("4.8–4.13"), "{:?}", e.examples);
}

/// Self and total shares per function of a `perf report` text.
fn report_shares(name: &str, text: &str) -> (HashMap<String, u64>, HashMap<String, u64>) {
    let r = stallscope_read::profile::perf_report::parse(name, text).unwrap();
    let p = &r.profile;
    let (s, t) = (p.self_weights(), p.total_weights());
    let pick = |w: &[u64]| {
        (0..p.symbols.len())
            .filter(|&i| w[i] > 0)
            .map(|i| (p.symbols[i].to_string(), w[i]))
            .collect::<HashMap<_, _>>()
    };
    (pick(&s), pick(&t))
}

#[test]
fn perf_report_tui_saved_form_equals_the_stdio_report() {
    // the same report (perf 6.1, recording host), saved from the TUI (`-`/`+` fold signs,
    // indentation) and printed with --stdio (`|`/`---` graph, header, ruler)
    let tui = std::fs::read_to_string(fixture("report_tui_saved.txt")).unwrap();
    let stdio = std::fs::read_to_string(fixture("report_stdio_children.txt")).unwrap();
    let (tui_self, tui_total) = report_shares("tui", &tui);
    let (stdio_self, stdio_total) = report_shares("stdio", &stdio);
    assert!(tui_self.len() > 5, "{tui_self:?}");
    assert_eq!(tui_self, stdio_self, "self shares");
    assert_eq!(tui_total, stdio_total, "totals");
    let r = stallscope_read::profile::perf_report::parse("tui", &tui).unwrap();
    assert_eq!(
        r.quality.count(Problem::PerfReportBadLine),
        0,
        "{:?}",
        r.quality
    );
    // a sniffable profile on its own (no `#` header in a TUI save)
    assert_eq!(
        stallscope_read::profile::read_profile(
            fixture("report_tui_saved.txt").to_str().unwrap(),
            None,
            &no_symbols()
        )
        .unwrap()
        .format,
        stallscope_read::profile::ProfileFormat::PerfReport
    );
}

#[test]
fn perf_report_pasted_without_header_or_one_entry_alone() {
    for name in ["report_stdio_children.txt", "report_stdio_no_children.txt"] {
        let text = std::fs::read_to_string(fixture(name)).unwrap();
        let pasted: String = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            report_shares(name, &pasted),
            report_shares(name, &text),
            "{name}"
        );
    }
    // the first entry of the no-children report and its graph, pasted alone
    let text = std::fs::read_to_string(fixture("report_stdio_no_children.txt")).unwrap();
    let body: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    let is_entry = |l: &str| {
        l.trim_start()
            .split(' ')
            .next()
            .is_some_and(|p| p.ends_with('%'))
            && l.contains("] ")
    };
    let end = body[1..]
        .iter()
        .position(|l| is_entry(l))
        .map_or(body.len(), |i| i + 1);
    let one: String = body[..end].iter().map(|l| format!("{l}\n")).collect();
    let pct: u64 = {
        let p = body[0].trim_start().split('%').next().unwrap();
        let (i, f) = p.split_once('.').unwrap();
        i.parse::<u64>().unwrap() * 100 + f.parse::<u64>().unwrap()
    };
    let r = stallscope_read::profile::perf_report::parse("one", &one).unwrap();
    assert_eq!(r.profile.total_weight(), pct, "{one}");
    let sym = body[0].rsplit("] ").next().unwrap().trim();
    let id = r.profile.lookup(sym).unwrap();
    assert_eq!(r.profile.self_weights()[id as usize], pct);
}

#[test]
fn untimed_perf_script_text_read_as_a_trace_says_it_is_a_profile() {
    // with a `--header` block the text looks like a trace's: reading it as one must not
    // give 0 events silently
    let text = std::fs::read_to_string(fixture("untimed.script.txt")).unwrap();
    let with_header = format!("# ========\n# os release : 6.18.44\n# ========\n#\n{text}");
    let input =
        stallscope_read::Input::from_bytes("untimed.txt", with_header.into_bytes()).unwrap();
    let mut r =
        stallscope_read::open_as(input, stallscope_model::InputFormat::PerfScriptText, 0).unwrap();
    let err = match r.next_event() {
        Ok(Some(_)) => panic!("an event from a text without times"),
        Ok(None) => panic!("no error"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("without one") && err.contains("stallscope profile"),
        "{err}"
    );
    assert!(err.contains("line 5"), "{err}");
}

#[test]
fn user_frames_are_named_from_the_binaries_on_this_host_like_perf_report() {
    // fp.perf.data was recorded here: libc.so.6 is the recorded build (perf.data's build-id
    // list says which), spin was built in a directory deleted after the capture. perf
    // report, reading the same host files, and we give libc's functions the same shares
    // (the alias each picks for a function may differ: `__GI___getppid` / `__GI_getppid`).
    if !stallscope_testkit::require_perf() {
        return;
    }
    let data = fixture("fp.perf.data");
    let named = read_profile(
        data.to_str().unwrap(),
        None,
        &ProfileOptions {
            symbols: KernelSymbolSource::Off,
            event: None,
            no_user_symbols: false,
        },
    )
    .unwrap();
    if named.quality.count(Problem::UserSymbolsOtherVersion) > 0
        || named.quality.count(Problem::UserSymbolsMissing) > 0
            && named.quality.count(Problem::UserSymbols) == 0
    {
        println!(
            "SKIP: libc.so.6 of this host is not the recorded build: {:?}",
            named.quality
        );
        return;
    }
    let report = perf_plain(REPORT_DSO_SYM, &data);
    let mut theirs: Vec<i64> = report
        .lines()
        .filter(|l| l.contains(" libc.so.6 ") && !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let pct = l.trim_start().split('%').next()?;
            let (i, f) = pct.split_once('.')?;
            Some(i.parse::<i64>().ok()? * 100 + f.parse::<i64>().ok()?)
        })
        .collect();
    // our libc functions: the leaves that were libc file+offset frames before naming
    let plain = read_profile(data.to_str().unwrap(), None, &no_symbols()).unwrap();
    assert_eq!(plain.profile.stacks.len(), named.profile.stacks.len());
    let total = u128::from(named.profile.total_weight());
    let mut by_fn: HashMap<String, u64> = HashMap::new();
    for (a, b) in plain.profile.stacks.iter().zip(&named.profile.stacks) {
        let before = plain.profile.symbol(a.frames[0]);
        if before.starts_with("[libc.so.6+") {
            let after = named.profile.symbol(b.frames[0]);
            assert!(!after.starts_with('['), "{before} stayed unnamed: {after}");
            *by_fn.entry(after.to_string()).or_default() += b.weight;
        }
    }
    assert!(!by_fn.is_empty(), "the capture has libc samples");
    let mut ours: Vec<i64> = by_fn
        .values()
        .map(|&w| ((u128::from(w) * 20_000 + total) / (2 * total)) as i64)
        .collect();
    theirs.sort_unstable();
    ours.sort_unstable();
    assert_eq!(ours, theirs, "libc self shares, by function");
}

#[test]
fn with_several_events_the_profile_is_perf_reports_first_section() {
    if !stallscope_testkit::require_perf() {
        return;
    }
    let data = fixture("two_events.perf.data");
    let report = perf_plain(&["report", "--stdio", "--no-children"], &data);
    let first = report
        .lines()
        .find_map(|l| l.strip_prefix("# Samples: "))
        .expect("a section");
    let event = first.split('\'').nth(1).unwrap();
    let count: u64 = report
        .lines()
        .find_map(|l| l.strip_prefix("# Event count (approx.): "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let r = read_profile(data.to_str().unwrap(), None, &no_symbols()).unwrap();
    assert_eq!(r.event.as_deref(), Some(event));
    assert_eq!(r.profile.total_weight(), count);
    assert_eq!(r.profile.stacks.len(), perf_sample_count(&data));
    // issue #29: its `perf script --header` text declares the events in the same order and
    // profiles the same one (before: the first sampled in time, cpu-clock)
    let text = perf_plain(&["script", "--header"], &data);
    assert!(
        text.contains("# event : name = "),
        "perf printed its header"
    );
    let path = std::env::temp_dir().join(format!("two-events-{}.txt", std::process::id()));
    std::fs::write(&path, &text).unwrap();
    let t = read_profile(path.to_str().unwrap(), None, &no_symbols()).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(t.event.as_deref(), Some(event));
    assert_eq!(t.profile.total_weight(), count);
    assert_eq!(t.profile.stacks.len(), r.profile.stacks.len());
    assert!(
        t.quality
            .count(stallscope_model::Problem::ProfileOtherEvent)
            > 0
    );
    assert_eq!(
        t.quality
            .count(stallscope_model::Problem::ProfileEventFirstSeen),
        0,
        "the header declares the order"
    );
    // without the header nothing in the text says perf record's order: the profile is of
    // the first event sampled, and the data quality says so, names the other event and how
    // to choose (before: silently the other section than perf report's)
    let bare = perf_plain(&["script"], &data);
    let path = std::env::temp_dir().join(format!("two-events-bare-{}.txt", std::process::id()));
    std::fs::write(&path, &bare).unwrap();
    let b = read_profile(path.to_str().unwrap(), None, &no_symbols()).unwrap();
    let _ = std::fs::remove_file(&path);
    let chosen = b.event.clone().expect("an event");
    let first_sampled = bare
        .lines()
        .find_map(|l| {
            l.split_whitespace()
                .find(|w| w.ends_with(':') && w.contains("clock"))
        })
        .map(|w| w.trim_end_matches(':').to_string())
        .expect("a sample line");
    assert_eq!(chosen, first_sampled);
    let note = b
        .quality
        .entries()
        .find(|(k, _)| *k == "profile_event_first_seen")
        .map(|(_, e)| e.examples.join(" "))
        .expect("profile_event_first_seen");
    let other = if chosen == "task-clock" {
        "cpu-clock"
    } else {
        "task-clock"
    };
    assert!(note.contains(&format!("also sampled: {other}")), "{note}");
    assert!(note.contains("--event NAME"), "{note}");
}

/// Issue #29: a process forked during the recording inherits its parent's mappings (perf
/// records no MMAP for it), so its user frames are named by file and offset like its
/// parent's, as perf does: every frame perf's `perf script -F pid,ip,dso` attributes to the
/// binary (fork.script.txt, made when the binary existed) is `[fork_spin+0xOFFSET]` here,
/// sample by sample, for the child (pid 3257) as for the parent (before: the child's were
/// raw addresses, `0x4016a4`).
#[test]
fn a_forked_process_inherits_its_parents_mappings() {
    let data = fixture("fork.perf.data");
    let opts = ProfileOptions {
        symbols: KernelSymbolSource::Off,
        event: None,
        no_user_symbols: false,
    };
    let r = read_profile(data.to_str().unwrap(), None, &opts).unwrap();
    // perf's samples: (pid, frames of the binary as `[fork_spin+0xIP]`), leaf first
    let script = std::fs::read_to_string(fixture("fork.script.txt")).unwrap();
    let mut theirs: Vec<(i32, Vec<String>)> = Vec::new();
    for block in script.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut lines = block.lines();
        let pid: i32 = lines.next().unwrap().trim().parse().unwrap();
        let frames = lines
            .filter_map(|l| {
                let (ip, dso) = l.trim().split_once(' ')?;
                dso.ends_with("/fork_spin)")
                    .then(|| format!("[fork_spin+0x{ip}]"))
            })
            .collect();
        theirs.push((pid, frames));
    }
    let mut ours: Vec<(i32, Vec<String>)> = r
        .profile
        .stacks
        .iter()
        .map(|s| {
            let frames = s
                .frames
                .iter()
                .map(|&f| r.profile.symbols[f as usize].to_string())
                .filter(|n| n.starts_with("[fork_spin+"))
                .collect();
            (s.pid.unwrap(), frames)
        })
        .collect();
    theirs.sort();
    ours.sort();
    let pids: std::collections::BTreeSet<i32> = theirs.iter().map(|t| t.0).collect();
    assert_eq!(pids.len(), 2, "parent and child sampled (test premise)");
    assert_eq!(ours, theirs);
}

/// Issue #29: `trace-cmd report -R` text of a 4.2–4.7 kernel (synthetic: no such kernel here;
/// the lines are shaped as trace-cmd 3.1 prints a 4.x trace.dat) whose first 64 KiB hold only
/// values every kernel shares or that fit the 4.14+ table (1, and 64: dead on 4.2–4.7,
/// parked on 4.14+): the first preempted task, 2048 (4.2–4.7's TASK_STATE_MAX), comes later.
/// The whole file tells the table: 64 is `x`, 130 `D|K`, 2048 `R+` — as the kernel's own
/// print fmt decodes them in that trace.dat (before: `P`, `D|I` and `R`, judged from the head
/// alone).
#[test]
fn an_old_kernels_raw_prev_state_is_told_by_the_whole_text() {
    let line = |n: usize, state: u64| {
        format!(
            "            sh-{pid}  [001] {s}.{us:06}: sched_switch:          prev_comm=sh prev_pid={pid} prev_prio=120 prev_state={state} next_comm=swapper/1 next_pid=0 next_prio=120\n",
            pid = 1000 + n % 7,
            s = 259445 + n / 1_000_000,
            us = n % 1_000_000,
        )
    };
    let mut text = String::from("cpus=2\n");
    let mut n = 0;
    while text.len() < 80 * 1024 {
        text.push_str(&line(n, if n % 50 == 49 { 64 } else { 1 }));
        n += 1;
    }
    let late = [2048u64, 130, 2048, 0, 64];
    for &v in &late {
        text.push_str(&line(n, v));
        n += 1;
    }
    let dir = std::env::temp_dir().join(format!("ss-old-raw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("report_R_4x.txt");
    std::fs::write(&path, &text).unwrap();
    let (events, dq) = read_events(&path);
    let states: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Switch(s) => Some(s.prev_state.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(states.len(), n);
    assert_eq!(&states[n - late.len()..], ["R+", "D|K", "R+", "R", "x"]);
    assert_eq!(states[49], "x", "an early 64 too");
    let why = dq
        .entries()
        .find(|(k, _)| *k == "prev_state_table_assumed")
        .map(|(_, e)| e.examples.join(" "))
        .unwrap_or_default();
    assert!(why.contains("4.2–4.7"), "{why}");
    let _ = std::fs::remove_dir_all(&dir);
}
