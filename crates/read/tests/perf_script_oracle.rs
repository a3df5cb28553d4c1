//! The perf.data reader against `perf script` (Debian perf 6.1, `/usr/bin/perf`) on the same
//! files: every sample in the same order with the same tid, cpu and nanosecond time; every
//! scheduler event with the payload perf prints; generic events with the same name and the
//! same decimal `field=value` pairs; call chains with the same frames.
//!
//! perf is required (CI installs Debian's `linux-perf`); the samples are
//! `fixtures/samples/perf/*` plus `tests/data/perf_sched_zstd.data` (`perf record -z`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use stallscope_model::{Event, EventKind, FieldValue, Problem};
use stallscope_read::perf_data::PerfDataReader;
use stallscope_read::{EventReader, Input};

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/samples/perf")
        .join(name)
}

/// Runs `perf ARGS -i FILE` and returns its standard output. A `.xz` file is first
/// decompressed to a temp file of its own (perf cannot read .xz), removed afterwards.
fn run_perf(file: &Path, args: &[&str]) -> String {
    static COPIES: AtomicUsize = AtomicUsize::new(0);
    let copy = file.extension().is_some_and(|e| e == "xz").then(|| {
        let n = COPIES.fetch_add(1, Ordering::Relaxed);
        let out = std::env::temp_dir().join(format!(
            "stallscope-perf-oracle-{}-{n}.data",
            std::process::id()
        ));
        let mut bytes = Vec::new();
        Input::open(file.to_str().unwrap())
            .unwrap()
            .into_reader()
            .read_to_end(&mut bytes)
            .unwrap();
        std::fs::write(&out, bytes).unwrap();
        out
    });
    let out = Command::new("perf")
        .args(args)
        .arg("-i")
        .arg(copy.as_deref().unwrap_or(file))
        .output()
        .expect("perf must be installed (Debian linux-perf) to run the oracle tests");
    if let Some(c) = &copy {
        std::fs::remove_file(c).unwrap();
    }
    assert!(
        out.status.success(),
        "perf {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// One `perf script` sample: header fields, payload text, call-chain frames.
#[derive(Debug)]
struct PerfLine {
    tid: i32,
    cpu: Option<u32>,
    ts: u64,
    event: String,
    payload: String,
    frames: Vec<u64>,
}

fn token(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find(' ') {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, ""),
    }
}

fn parse_ns(t: &str) -> u64 {
    let (secs, frac) = t.trim_end_matches(':').split_once('.').expect("secs.nsecs");
    assert_eq!(frac.len(), 9, "perf --ns time {t}");
    secs.parse::<u64>().unwrap() * 1_000_000_000 + frac.parse::<u64>().unwrap()
}

/// Runs `perf script --ns -F FIELDS` and parses it. FIELDS start with `tid`, then `cpu`
/// when `with_cpu`, then `time`, then `period` when `with_period`, then `event`.
fn perf_script(file: &Path, fields: &str, with_cpu: bool, with_period: bool) -> Vec<PerfLine> {
    let text = run_perf(file, &["script", "--ns", "-F", fields]);
    let mut lines: Vec<PerfLine> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if let Some(frame) = line.strip_prefix('\t') {
            let addr = u64::from_str_radix(frame.trim(), 16).expect("frame address");
            lines
                .last_mut()
                .expect("frame after a header")
                .frames
                .push(addr);
            continue;
        }
        let (tid, rest) = token(line);
        let (cpu, rest) = if with_cpu {
            let (c, r) = token(rest);
            (Some(c.trim_matches(['[', ']']).parse().unwrap()), r)
        } else {
            (None, rest)
        };
        let (time, rest) = token(rest);
        let rest = if with_period { token(rest).1 } else { rest };
        let (event, payload) = token(rest);
        lines.push(PerfLine {
            tid: tid.parse().unwrap(),
            cpu,
            ts: parse_ns(time),
            event: event.trim_end_matches(':').to_string(),
            payload: payload.trim_end().to_string(),
            frames: Vec::new(),
        });
    }
    lines
}

/// Our events for `path`, without the side-band kinds perf script does not print.
fn our_samples(path: &Path) -> Vec<Event> {
    let input = Input::open(path.to_str().unwrap()).unwrap();
    let mut r = PerfDataReader::open(input, 0).unwrap();
    let mut out = Vec::new();
    while let Some(e) = r.next_event().unwrap() {
        if !matches!(e.kind, EventKind::TaskComm { .. } | EventKind::Lost { .. }) {
            out.push(e);
        }
    }
    assert_eq!(r.quality().count(Problem::PerfBadTracepointRecord), 0);
    assert_eq!(r.quality().count(Problem::PerfUnknownSampleId), 0);
    out
}

/// perf's print-fmt rendering of the natively modeled events (6.18 formats).
fn perf_style(kind: &EventKind) -> Option<String> {
    Some(match kind {
        EventKind::Switch(s) => format!(
            "prev_comm={} prev_pid={} prev_prio={} prev_state={} ==> next_comm={} next_pid={} next_prio={}",
            s.prev.comm, s.prev.pid, s.prev.prio, s.prev_state, s.next.comm, s.next.pid, s.next.prio
        ),
        EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => format!(
            "comm={} pid={} prio={} target_cpu={:03}",
            w.task.comm,
            w.task.pid,
            w.task.prio,
            w.target_cpu.expect("6.18 wakeups have target_cpu")
        ),
        EventKind::Migrate(m) => format!(
            "comm={} pid={} prio={} orig_cpu={} dest_cpu={}",
            m.task.comm, m.task.pid, m.task.prio, m.orig_cpu, m.dest_cpu
        ),
        EventKind::Fork { parent_comm, parent_pid, child_comm, child_pid } => {
            format!("comm={parent_comm} pid={parent_pid} child_comm={child_comm} child_pid={child_pid}")
        }
        // perf also prints `group_dead=…`, which the model does not keep: compared as a prefix.
        EventKind::Exit(t) => format!("comm={} pid={} prio={} ", t.comm, t.pid, t.prio),
        EventKind::Exec { filename, pid, old_pid } => format!("filename={filename} pid={pid} old_pid={old_pid}"),
        EventKind::StatRuntime(r) => format!("comm={} pid={} runtime={} [ns]", r.task.comm, r.task.pid, r.runtime),
        _ => return None,
    })
}

fn event_name(e: &Event) -> String {
    match &e.kind {
        EventKind::Generic(g) => match &g.system {
            Some(s) => format!("{s}:{}", g.name),
            None => g.name.clone(),
        },
        EventKind::Block(b) => format!("block:{}", b.action.tracepoint()),
        k => format!("sched:{}", k.name()),
    }
}

/// Decimal `name=value` pairs perf prints must equal our generic field values.
fn check_generic_fields(e: &Event, payload: &str, ctx: &str) -> usize {
    let EventKind::Generic(g) = &e.kind else {
        return 0;
    };
    let mut checked = 0;
    for (name, value) in &g.fields {
        let want = match value {
            FieldValue::Int(i) => *i as i128,
            FieldValue::UInt(u) => *u as i128,
            _ => continue,
        };
        let key = format!("{name}=");
        let Some(pos) = payload.split(' ').position(|w| w.starts_with(&key)) else {
            continue;
        };
        let text = &payload.split(' ').nth(pos).unwrap()[key.len()..];
        if let Ok(printed) = text.parse::<i128>() {
            assert_eq!(printed, want, "{ctx}: field {name}");
            checked += 1;
        }
    }
    checked
}

struct Summary {
    events: usize,
    native: usize,
    generic_fields: usize,
}

fn compare_tracepoints(file: &Path) -> Summary {
    let perf = perf_script(file, "tid,cpu,time,event,trace", true, false);
    let ours = our_samples(file);
    assert_eq!(
        ours.len(),
        perf.len(),
        "{}: number of samples",
        file.display()
    );
    let mut s = Summary {
        events: ours.len(),
        native: 0,
        generic_fields: 0,
    };
    for (i, (o, p)) in ours.iter().zip(&perf).enumerate() {
        let ctx = format!(
            "{} sample #{i}: ours `{}` vs perf {:?}",
            file.display(),
            o.dump_line(),
            p
        );
        assert_eq!((o.pid, Some(o.cpu), o.ts), (p.tid, p.cpu, p.ts), "{ctx}");
        assert_eq!(event_name(o), p.event, "{ctx}");
        match perf_style(&o.kind) {
            Some(text) => {
                assert!(
                    p.payload.starts_with(&text) || p.payload == text.trim_end(),
                    "{ctx}: payload `{text}`"
                );
                s.native += 1;
            }
            None => s.generic_fields += check_generic_fields(o, &p.payload, &ctx),
        }
    }
    s
}

#[test]
fn perf_sched_record_file_matches_perf_script() {
    let s = compare_tracepoints(&sample("perf_sched.data.xz"));
    assert_eq!((s.events, s.native), (4129, 4129));
}

#[test]
fn all_sched_tracepoints_file_matches_perf_script() {
    let s = compare_tracepoints(&sample("perf_sched_tp_nocg.data.xz"));
    assert!(
        s.events > 800 && s.native > 400,
        "{} events, {} native",
        s.events,
        s.native
    );
    assert!(s.generic_fields > 0, "no generic field was compared");
}

#[test]
fn pipe_mode_file_matches_perf_script() {
    let s = compare_tracepoints(&sample("perf_pipe.data.xz"));
    assert_eq!(s.events, s.native);
    assert!(s.events > 2000);
}

#[test]
fn zstd_compressed_file_matches_perf_script() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/perf_sched_zstd.data");
    let s = compare_tracepoints(&path);
    assert!(
        s.events > 1000 && s.native > 500,
        "{} events, {} native",
        s.events,
        s.native
    );
}

/// Frames of our call chain as perf prints them: context markers dropped; perf prints user
/// addresses relative to their DSO, so those are compared by page offset only.
fn check_frames(ours: &[u64], perf: &[u64], ctx: &str) {
    const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
    let frames: Vec<u64> = ours
        .iter()
        .copied()
        .filter(|&a| a < PERF_CONTEXT_MAX)
        .collect();
    assert_eq!(
        frames.len(),
        perf.len(),
        "{ctx}: frames {frames:x?} vs {perf:x?}"
    );
    for (a, b) in frames.iter().zip(perf) {
        if *a >= 0xffff_8000_0000_0000 {
            assert_eq!(a, b, "{ctx}: kernel frame");
        } else {
            assert_eq!(a & 0xfff, b & 0xfff, "{ctx}: user frame {a:#x} vs {b:#x}");
        }
    }
}

#[test]
fn tracepoints_with_callchains_match_perf_script() {
    let file = sample("perf_tp_callchain.data.xz");
    let s = compare_tracepoints(&file);
    assert!(s.events > 7000);
    let perf = perf_script(&file, "tid,cpu,time,event,ip", true, false);
    let ours = our_samples(&file);
    assert_eq!(ours.len(), perf.len());
    let mut frames = 0;
    for (i, (o, p)) in ours.iter().zip(&perf).enumerate() {
        let cc = o
            .callchain
            .as_deref()
            .unwrap_or_else(|| panic!("sample #{i} has no call chain"));
        check_frames(cc, &p.frames, &format!("sample #{i} at {}", o.ts));
        frames += p.frames.len();
    }
    assert!(frames > 50_000, "{frames}");
}

#[test]
fn cpu_clock_profile_matches_perf_script() {
    let file = sample("perf_cpu_fp.data");
    let perf = perf_script(&file, "tid,time,period,event,ip", false, true);
    let ours = our_samples(&file);
    assert_eq!(ours.len(), perf.len());
    assert!(ours.len() > 700);
    for (i, (o, p)) in ours.iter().zip(&perf).enumerate() {
        let ctx = format!("sample #{i}: `{}`", o.dump_line());
        assert_eq!((o.pid, o.ts), (p.tid, p.ts), "{ctx}");
        assert_eq!(event_name(o), p.event, "{ctx}");
        check_frames(o.callchain.as_deref().unwrap_or(&[]), &p.frames, &ctx);
    }
}

/// Without running perf: the committed `script_sched_ns.txt` (the first 40 lines `perf script
/// --ns` printed for `perf_sched.data`).
#[test]
fn committed_script_sched_ns_prefix_matches() {
    let text = std::fs::read_to_string(sample("script_sched_ns.txt")).unwrap();
    let ours = our_samples(&sample("perf_sched.data.xz"));
    let mut n = 0;
    for (line, o) in text.lines().zip(&ours) {
        let (head, rest) = line.split_once(": ").unwrap();
        let payload = rest.trim_start().split_once(": ").unwrap().1;
        let time = head.rsplit(' ').next().unwrap();
        assert_eq!(o.ts, parse_ns(time), "{line}");
        assert!(
            head.contains(&format!(" {} [{:03}] ", o.pid, o.cpu)),
            "{line}"
        );
        let text = perf_style(&o.kind).unwrap();
        assert!(payload.starts_with(&text), "{line} vs {text}");
        n += 1;
    }
    assert_eq!(n, 40);
}

/// COMM side-band records against `perf script --show-task-events` (synthesized ones at
/// time 0 included): same order, time, cpu, pid/tid and name.
#[test]
fn comm_records_match_perf_task_events() {
    let file = sample("perf_sched.data.xz");
    let text = run_perf(&file, &["script", "--ns", "--show-task-events"]);
    let mut perf = Vec::new();
    for line in text.lines().filter(|l| l.contains(": PERF_RECORD_COMM")) {
        let (head, rest) = line.split_once(": PERF_RECORD_COMM").unwrap();
        let time = parse_ns(head.rsplit(' ').next().unwrap());
        let cpu: u32 = head
            .rsplit_once('[')
            .unwrap()
            .1
            .split(']')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let body = rest.trim_start_matches(" exec").trim_start_matches(": ");
        let (name, ids) = body.rsplit_once(':').unwrap();
        let (pid, tid) = ids.split_once('/').unwrap();
        perf.push((
            time,
            cpu,
            pid.parse::<i32>().unwrap(),
            tid.parse::<i32>().unwrap(),
            name.to_string(),
        ));
    }
    let input = Input::open(file.to_str().unwrap()).unwrap();
    let mut r = PerfDataReader::open(input, 0).unwrap();
    let mut ours = Vec::new();
    while let Some(e) = r.next_event().unwrap() {
        if let EventKind::TaskComm { tgid, tid, comm } = e.kind {
            assert_eq!(e.pid, tid);
            ours.push((e.ts, e.cpu, tgid, tid, comm.to_string()));
        }
    }
    assert_eq!(ours.len(), 323);
    assert_eq!(ours, perf);
}
