//! `stallscope export` against real captures, checked with independent decoders and the
//! peer tool's view of the same files:
//!
//! * Perfetto: the output is decoded by a small protobuf reader written here (wire format +
//!   the field numbers of Perfetto's `protos/perfetto/trace/*.proto`, typed by hand, nothing
//!   generated from our writer), then compared with `perf script --ns` of the same
//!   perf.data (the committed `fixtures/sched/starve.perf-script.txt`, or perf run at test
//!   time for the block fixture): packets, SystemInfo release (the capture's `uname -r`),
//!   per-event-type counts, every `prev_state` decoded back to perf's letters with the
//!   ≥ 4.14 table, block request fields, lost-event bundles (perf's LOST + LOST_SAMPLES
//!   record counts), task names, and the findings track with `analyze`'s titles.
//! * Chrome JSON: parsed with serde_json; every event has ph/ts/pid/tid (and dur for X);
//!   run slices, instants and not-drawn counts equal perf's event counts (see
//!   [`expected_run_slices`] for the first/last slice per CPU).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(rel: &str) -> PathBuf {
    repo_root().join(rel)
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stallscope-export-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn stallscope(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stallscope {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn export(input: &Path, to: &str, name: &str) -> Vec<u8> {
    let out = tmp(name);
    stallscope(&[
        "export",
        input.to_str().unwrap(),
        "--to",
        to,
        "-o",
        out.to_str().unwrap(),
        "--findings",
    ]);
    std::fs::read(&out).unwrap()
}

fn finding_titles(input: &Path) -> Vec<String> {
    let json = stallscope(&["analyze", "--format", "json", input.to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&json).unwrap();
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["title"].as_str().unwrap().to_string())
        .collect()
}

/// perf is there (else the test fails naming the install command; see stallscope-testkit).
fn perf_installed() -> bool {
    stallscope_testkit::require_perf()
}

// ---------------------------------------------------------------- perf script text

/// One `perf script --ns` line.
#[derive(Debug, Clone)]
struct PerfLine {
    cpu: u32,
    ts: u64,
    /// Event name without the system (`sched_switch`).
    event: String,
    /// The payload text after `event:`.
    payload: String,
}

fn parse_perf_script(text: &str) -> Vec<PerfLine> {
    let mut out = Vec::new();
    for line in text.lines() {
        // `COMM PID [CPU] SECS.NSECS: SYSTEM:EVENT: PAYLOAD`; COMM may hold spaces
        let Some(open) = line.find(" [") else {
            continue;
        };
        let rest = &line[open + 2..];
        let Some(close) = rest.find(']') else {
            continue;
        };
        let Ok(cpu) = rest[..close].parse::<u32>() else {
            continue;
        };
        let rest = rest[close + 1..].trim_start();
        let (ts, rest) = rest.split_once(": ").unwrap();
        let (secs, nsecs) = ts.split_once('.').unwrap();
        assert_eq!(nsecs.len(), 9, "needs perf script --ns: {line}");
        let ts = secs.parse::<u64>().unwrap() * 1_000_000_000 + nsecs.parse::<u64>().unwrap();
        let rest = rest.trim_start();
        let (event, payload) = rest
            .split_once(": ")
            .unwrap_or((rest.trim_end_matches(':'), ""));
        let event = event.rsplit(':').next().unwrap().to_string();
        out.push(PerfLine {
            cpu,
            ts,
            event,
            payload: payload.to_string(),
        });
    }
    out
}

/// `key=VALUE` (VALUE up to the next space) from a payload.
fn field<'a>(payload: &'a str, key: &str) -> Option<&'a str> {
    let at = payload.find(&format!("{key}="))?;
    if at > 0 && !payload[..at].ends_with(' ') {
        return None;
    }
    let v = &payload[at + key.len() + 1..];
    Some(v.split(' ').next().unwrap_or(""))
}

fn counts(lines: &[PerfLine]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in lines {
        *m.entry(l.event.clone()).or_insert(0) += 1;
    }
    m
}

fn perf_script(path: &Path) -> Vec<PerfLine> {
    let out = Command::new("perf")
        .args(["script", "--ns", "-i"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success());
    parse_perf_script(&String::from_utf8_lossy(&out.stdout))
}

// ---------------------------------------------------------------- protobuf decoding

/// One decoded field value.
#[derive(Debug, Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Len(&'a [u8]),
    Fixed32(u32),
}

fn read_varint(buf: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = buf[*pos];
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return v;
        }
        shift += 7;
        assert!(shift < 70, "varint too long");
    }
}

/// All fields of a message, in order.
fn fields(buf: &[u8]) -> Vec<(u32, Wire<'_>)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let tag = read_varint(buf, &mut pos);
        let number = (tag >> 3) as u32;
        let value = match tag & 7 {
            0 => Wire::Varint(read_varint(buf, &mut pos)),
            1 => {
                let v = u64::from_le_bytes(buf[pos..pos + 8].try_into().unwrap());
                pos += 8;
                Wire::Fixed64(v)
            }
            2 => {
                let len = read_varint(buf, &mut pos) as usize;
                let v = &buf[pos..pos + len];
                pos += len;
                Wire::Len(v)
            }
            5 => {
                let v = u32::from_le_bytes(buf[pos..pos + 4].try_into().unwrap());
                pos += 4;
                Wire::Fixed32(v)
            }
            w => panic!("wire type {w} at {pos}"),
        };
        out.push((number, value));
    }
    assert_eq!(pos, buf.len(), "message overran its length");
    out
}

#[derive(Debug)]
struct Msg<'a>(Vec<(u32, Wire<'a>)>);

impl<'a> Msg<'a> {
    fn parse(buf: &'a [u8]) -> Msg<'a> {
        Msg(fields(buf))
    }
    fn has(&self, n: u32) -> bool {
        self.0.iter().any(|(f, _)| *f == n)
    }
    fn uint(&self, n: u32) -> Option<u64> {
        self.0.iter().rev().find_map(|(f, v)| match v {
            Wire::Varint(x) if *f == n => Some(*x),
            Wire::Fixed64(x) if *f == n => Some(*x),
            Wire::Fixed32(x) if *f == n => Some(u64::from(*x)),
            _ => None,
        })
    }
    fn int(&self, n: u32) -> Option<i64> {
        self.uint(n).map(|v| v as i64)
    }
    fn bytes(&self, n: u32) -> Option<&'a [u8]> {
        self.0.iter().rev().find_map(|(f, v)| match v {
            Wire::Len(b) if *f == n => Some(*b),
            _ => None,
        })
    }
    fn str(&self, n: u32) -> Option<&'a str> {
        self.bytes(n).map(|b| std::str::from_utf8(b).unwrap())
    }
    fn msg(&self, n: u32) -> Option<Msg<'a>> {
        self.bytes(n).map(Msg::parse)
    }
    fn all(&self, n: u32) -> Vec<Msg<'a>> {
        self.0
            .iter()
            .filter_map(|(f, v)| match v {
                Wire::Len(b) if *f == n => Some(Msg::parse(b)),
                _ => None,
            })
            .collect()
    }
}

/// `FtraceEvent` payload field numbers (formats.md §11.1) → event name.
const FTRACE_PAYLOADS: &[(u32, &str)] = &[
    (4, "sched_switch"),
    (17, "sched_wakeup"),
    (20, "sched_waking"),
    (45, "block_rq_issue"),
    (57, "workqueue_execute_end"),
    (58, "workqueue_execute_start"),
    (114, "sched_wakeup_new"),
    (119, "block_bio_queue"),
    (125, "block_rq_complete"),
    (126, "block_rq_insert"),
    (237, "sched_process_exec"),
    (238, "sched_process_exit"),
    (239, "sched_process_fork"),
    (491, "sched_migrate_task"),
];

/// A decoded ftrace event.
#[derive(Debug)]
struct FtraceEv<'a> {
    cpu: u32,
    ts: u64,
    name: String,
    payload: Msg<'a>,
}

/// Everything the tests look at in a decoded Perfetto trace.
struct Decoded<'a> {
    packets: usize,
    sequence_ids: BTreeSet<u64>,
    first_packet: Msg<'a>,
    events: Vec<FtraceEv<'a>>,
    bundles: usize,
    lost_bundles: usize,
    /// tid → (name, tgid).
    threads: BTreeMap<i64, (String, i64)>,
    /// uuid → (name, parent uuid).
    tracks: BTreeMap<u64, (String, Option<u64>)>,
    /// (type, track uuid, name, annotation names).
    track_events: Vec<(u64, u64, String, Vec<String>)>,
}

fn decode_perfetto(file: &[u8]) -> Decoded<'_> {
    let trace = fields(file);
    let mut packets = Vec::new();
    for (n, v) in &trace {
        assert_eq!(*n, 1, "Trace holds only field 1 (packet)");
        let Wire::Len(b) = v else {
            panic!("packet not length-delimited")
        };
        packets.push(Msg::parse(b));
    }
    assert!(!packets.is_empty());
    let mut d = Decoded {
        packets: packets.len(),
        sequence_ids: BTreeSet::new(),
        first_packet: Msg::parse(match trace[0].1 {
            Wire::Len(b) => b,
            _ => unreachable!(),
        }),
        events: Vec::new(),
        bundles: 0,
        lost_bundles: 0,
        threads: BTreeMap::new(),
        tracks: BTreeMap::new(),
        track_events: Vec::new(),
    };
    for p in &packets {
        d.sequence_ids.insert(p.uint(10).unwrap_or(0));
        if let Some(bundle) = p.msg(1) {
            d.bundles += 1;
            if bundle.uint(3) == Some(1) {
                d.lost_bundles += 1;
            }
            let cpu = bundle.uint(1).expect("bundle cpu") as u32;
            let mut last_ts = 0;
            for ev in bundle.all(2) {
                let ts = ev.uint(1).expect("event timestamp");
                assert!(ts >= last_ts, "bundle of cpu {cpu} not time-sorted");
                last_ts = ts;
                let (name, payload) = if let Some(g) = ev.msg(327) {
                    (g.str(1).unwrap().to_string(), g)
                } else {
                    let (num, name) = FTRACE_PAYLOADS
                        .iter()
                        .find(|(num, _)| ev.has(*num))
                        .unwrap_or_else(|| panic!("unknown payload in {:?}", ev.0));
                    (name.to_string(), ev.msg(*num).unwrap())
                };
                d.events.push(FtraceEv {
                    cpu,
                    ts,
                    name,
                    payload,
                });
            }
        }
        if let Some(tree) = p.msg(2) {
            for t in tree.all(2) {
                let tid = t.int(1).unwrap();
                let tgid = t.int(3).expect("threads carry their tgid");
                d.threads
                    .insert(tid, (t.str(2).unwrap_or("").to_string(), tgid));
            }
        }
        if let Some(td) = p.msg(60) {
            d.tracks.insert(
                td.uint(1).unwrap(),
                (td.str(2).unwrap_or("").to_string(), td.uint(5)),
            );
        }
        if let Some(te) = p.msg(11) {
            let annotations = te
                .all(4)
                .iter()
                .map(|a| a.str(10).unwrap_or("").to_string())
                .collect();
            d.track_events.push((
                te.uint(9).unwrap(),
                te.uint(11).unwrap(),
                te.str(23).unwrap_or("").to_string(),
                annotations,
            ));
        }
    }
    d
}

/// Letters of a raw ≥ 4.14 `prev_state` (formats.md §6; the kernel's print fmt).
fn letters_414(raw: i64) -> String {
    const TABLE: [(i64, char); 8] = [
        (0x01, 'S'),
        (0x02, 'D'),
        (0x04, 'T'),
        (0x08, 't'),
        (0x10, 'X'),
        (0x20, 'Z'),
        (0x40, 'P'),
        (0x80, 'I'),
    ];
    let mut s: Vec<String> = Vec::new();
    for (bit, l) in TABLE {
        if raw & 0xff & bit != 0 {
            s.push(l.to_string());
        }
    }
    let mut out = if s.is_empty() {
        "R".to_string()
    } else {
        s.join("|")
    };
    if raw & 0x100 != 0 {
        out.push('+');
    }
    out
}

fn capture_release(info_md: &str) -> String {
    let text = std::fs::read_to_string(fixture(info_md)).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("- uname -r: "))
        .expect("uname -r line")
        .trim()
        .to_string()
}

fn decoded_counts(d: &Decoded<'_>) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for e in &d.events {
        *m.entry(e.name.clone()).or_insert(0) += 1;
    }
    m
}

fn check_findings_track(d: &Decoded<'_>, titles: &[String]) {
    assert!(!titles.is_empty(), "fixture should have findings");
    let (&root, _) = d
        .tracks
        .iter()
        .find(|(_, (name, parent))| name == "stallscope findings" && parent.is_none())
        .expect("a 'stallscope findings' track");
    let on_findings_track =
        |uuid: u64| uuid == root || d.tracks.get(&uuid).is_some_and(|(_, p)| *p == Some(root));
    let begins: Vec<_> = d.track_events.iter().filter(|e| e.0 == 1).collect();
    let ends: Vec<_> = d.track_events.iter().filter(|e| e.0 == 2).collect();
    assert_eq!(begins.len(), titles.len());
    assert_eq!(ends.len(), titles.len());
    for e in d.track_events.iter() {
        assert!(on_findings_track(e.1), "slice on an unknown track {e:?}");
    }
    let got: BTreeSet<&str> = begins.iter().map(|e| e.2.as_str()).collect();
    let want: BTreeSet<&str> = titles.iter().map(String::as_str).collect();
    assert_eq!(got, want);
    for b in begins {
        assert!(b.3.iter().any(|a| a == "detector"), "{b:?}");
        assert!(b.3.iter().any(|a| a == "severity"), "{b:?}");
    }
}

#[test]
fn perfetto_export_of_starve_matches_perf_script() {
    let input = fixture("fixtures/sched/starve.perf.data");
    let file = export(&input, "perfetto", "starve.pftrace");
    let d = decode_perfetto(&file);
    let perf = parse_perf_script(
        &std::fs::read_to_string(fixture("fixtures/sched/starve.perf-script.txt")).unwrap(),
    );
    assert!(perf.len() > 3000);

    // packet 1: SystemInfo with the capture's kernel release, Linux, num_cpus
    let si = d.first_packet.msg(45).expect("first packet is SystemInfo");
    let uts = si.msg(1).expect("utsname");
    assert_eq!(
        uts.str(3),
        Some(capture_release("fixtures/sched/capture-info.md").as_str())
    );
    assert_eq!(uts.str(1), Some("Linux"));
    assert_eq!(si.uint(8), Some(2));
    assert_eq!(d.sequence_ids, BTreeSet::from([1]));

    // every event perf script shows, by type
    assert_eq!(decoded_counts(&d), counts(&perf));
    assert!(d.packets > d.bundles && d.bundles >= 2);
    assert_eq!(d.lost_bundles, 0);

    // every prev_state decodes back to perf's letters (R+ and I included)
    let perf_states: BTreeMap<(u64, u32), String> = perf
        .iter()
        .filter(|l| l.event == "sched_switch")
        .map(|l| {
            (
                (l.ts, l.cpu),
                field(&l.payload, "prev_state").unwrap().to_string(),
            )
        })
        .collect();
    let mut seen_letters = BTreeSet::new();
    let mut compared = 0;
    for e in d.events.iter().filter(|e| e.name == "sched_switch") {
        let raw = e.payload.int(4).unwrap();
        let want = &perf_states[&(e.ts, e.cpu)];
        assert_eq!(&letters_414(raw), want, "switch at {} cpu {}", e.ts, e.cpu);
        seen_letters.insert(want.clone());
        compared += 1;
    }
    assert_eq!(compared, perf_states.len());
    assert!(
        seen_letters.contains("R+") && seen_letters.contains("S"),
        "{seen_letters:?}"
    );

    // the ProcessTree: every context task of `perf script -F pid,tid` is there under
    // perf's process id, named with one of the names perf shows for it (names with a space
    // are cut at it by the switch payload parsing; none in this capture)
    let pidtid =
        std::fs::read_to_string(fixture("fixtures/sched/starve.perf-script-pidtid.txt")).unwrap();
    let mut perf_tasks: BTreeMap<i64, (i64, BTreeSet<String>)> = BTreeMap::new();
    for line in pidtid.lines() {
        let Some(open) = line.find(" [") else {
            continue;
        };
        let mut head: Vec<&str> = line[..open].split_whitespace().collect();
        let Some((pid, tid)) = head.pop().and_then(|pt| pt.split_once('/')) else {
            continue;
        };
        let (pid, tid): (i64, i64) = (pid.parse().unwrap(), tid.parse().unwrap());
        if tid <= 0 {
            continue; // idle, or perf's -1 for a task gone at its last switch
        }
        let e = perf_tasks.entry(tid).or_insert((pid, BTreeSet::new()));
        assert_eq!(e.0, pid);
        e.1.insert(head.join(" "));
    }
    assert!(perf_tasks.len() > 10);
    // the kernel's own name in switch payloads counts too (perf's context column shows the
    // COMM record's `kworker/0:1-eve` where sched_switch says `kworker/0:1`)
    for l in perf.iter().filter(|l| l.event == "sched_switch") {
        for side in ["prev", "next"] {
            let pid: i64 = field(&l.payload, &format!("{side}_pid"))
                .unwrap()
                .parse()
                .unwrap();
            if let Some(e) = perf_tasks.get_mut(&pid) {
                e.1.insert(
                    field(&l.payload, &format!("{side}_comm"))
                        .unwrap()
                        .to_string(),
                );
            }
        }
    }
    // tasks forked during the trace have no COMM record in this capture (and our events
    // do not carry perf's sample pid), so their process is unknown: they must be absent
    let forked: BTreeSet<i64> = perf
        .iter()
        .filter(|l| l.event == "sched_process_fork")
        .map(|l| field(&l.payload, "child_pid").unwrap().parse().unwrap())
        .collect();
    assert!(!forked.is_empty());
    for (tid, (pid, names)) in &perf_tasks {
        if forked.contains(tid) {
            assert!(!d.threads.contains_key(tid), "{tid}");
            continue;
        }
        let (name, tgid) = d
            .threads
            .get(tid)
            .unwrap_or_else(|| panic!("thread {tid} missing"));
        assert_eq!(tgid, pid, "tgid of {tid}");
        assert!(names.contains(name), "{tid}: {name:?} not in {names:?}");
    }

    check_findings_track(&d, &finding_titles(&input));
}

#[test]
fn perfetto_export_of_block_fixture_matches_perf_script() {
    if !perf_installed() {
        return;
    }
    let input = fixture("fixtures/detectors/wakeup-ping-pong/fio-dio.perf.data");
    let file = export(&input, "perfetto", "fio-dio.pftrace");
    let d = decode_perfetto(&file);
    let perf = perf_script(&input);
    assert_eq!(decoded_counts(&d), counts(&perf));

    // typed block events carry perf's device, sector, size and rwbs
    // perf: `7,0 WS 4096 () 488 + 8 ...` (issue), `7,0 WS () 1023008 + 8 ...` (complete)
    for name in ["block_rq_issue", "block_rq_complete"] {
        let from_perf: BTreeSet<(u64, String, String, u64, u64)> = perf
            .iter()
            .filter(|l| l.event == name)
            .map(|l| {
                let t: Vec<&str> = l.payload.split_whitespace().collect();
                let plus = t.iter().position(|x| *x == "+").unwrap();
                (
                    l.ts,
                    t[0].to_string(),
                    t[1].to_string(),
                    t[plus - 1].parse().unwrap(),
                    t[plus + 1].parse().unwrap(),
                )
            })
            .collect();
        let ours: BTreeSet<(u64, String, String, u64, u64)> = d
            .events
            .iter()
            .filter(|e| e.name == name)
            .map(|e| {
                let dev = e.payload.uint(1).unwrap();
                let rwbs = e.payload.str(5).unwrap().to_string();
                (
                    e.ts,
                    format!("{},{}", dev >> 20, dev & 0xf_ffff),
                    rwbs,
                    e.payload.uint(2).unwrap(),
                    e.payload.uint(3).unwrap(),
                )
            })
            .collect();
        assert!(from_perf.len() > 10_000, "{name}");
        assert_eq!(ours, from_perf, "{name}");
    }

    // one lost-events bundle per LOST record perf counts (LOST_SAMPLES records repeat the
    // same drops per event, without a time: data quality, not events)
    let stats = Command::new("perf")
        .args(["report", "--stats", "-i"])
        .arg(&input)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&stats.stdout);
    // the totals come first; later blocks repeat LOST_SAMPLES per CPU
    let total = |label: &str| -> u64 {
        text.lines()
            .find_map(|l| l.trim_start().strip_prefix(label))
            .and_then(|rest| rest.split_whitespace().next())
            .map_or(0, |n| n.parse().unwrap())
    };
    let lost_records = total("LOST events:");
    assert!(lost_records > 0);
    assert_eq!(d.lost_bundles as u64, lost_records);
    check_findings_track(&d, &finding_titles(&input));
}

// ---------------------------------------------------------------- Chrome JSON

/// X run slices the Chrome export must hold: per CPU, one per switch whose `prev_pid` is
/// not the idle task (each switch closes the run of its `prev`; the first switch on a CPU
/// closes a run that began before the trace, drawn from the CPU's first event), plus one
/// for the task still running after the CPU's last switch (drawn to the CPU's last event)
/// unless that is the idle task. Hence "switches + 1 per CPU" minus the idle task's runs.
fn expected_run_slices(perf: &[PerfLine]) -> BTreeMap<u32, u64> {
    let mut per_cpu: BTreeMap<u32, (u64, i64)> = BTreeMap::new();
    for l in perf.iter().filter(|l| l.event == "sched_switch") {
        let prev: i64 = field(&l.payload, "prev_pid").unwrap().parse().unwrap();
        let next: i64 = field(&l.payload, "next_pid").unwrap().parse().unwrap();
        let e = per_cpu.entry(l.cpu).or_insert((0, 0));
        if prev != 0 {
            e.0 += 1;
        }
        e.1 = next;
    }
    per_cpu
        .into_iter()
        .map(|(cpu, (n, last_next))| (cpu, n + u64::from(last_next != 0)))
        .collect()
}

const CPU_PID_BASE: i64 = 1 << 30;

#[test]
fn chrome_json_export_of_starve_matches_perf_script() {
    let input = fixture("fixtures/sched/starve.perf.data");
    let file = export(&input, "chrome-json", "starve.json");
    let text = String::from_utf8(file).unwrap();
    let doc: Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(doc["displayTimeUnit"], "ns");
    let events = doc["traceEvents"].as_array().unwrap();
    let perf = parse_perf_script(
        &std::fs::read_to_string(fixture("fixtures/sched/starve.perf-script.txt")).unwrap(),
    );

    let mut x_per_cpu: BTreeMap<u32, u64> = BTreeMap::new();
    let mut instants: BTreeMap<String, u64> = BTreeMap::new();
    let mut finding_slices = BTreeSet::new();
    let switch_ts: BTreeSet<(u32, u64)> = perf
        .iter()
        .filter(|l| l.event == "sched_switch")
        .map(|l| (l.cpu, l.ts))
        .collect();
    for e in events {
        let ph = e["ph"].as_str().expect("ph");
        assert!(e["ts"].is_number(), "ts: {e}");
        let pid = e["pid"].as_i64().expect("integer pid");
        assert!(e["tid"].is_i64(), "integer tid: {e}");
        match ph {
            "X" => {
                let dur = e["dur"].as_f64().expect("dur on X");
                assert!(dur >= 0.0);
                if pid >= CPU_PID_BASE {
                    let cpu = (pid - CPU_PID_BASE) as u32;
                    *x_per_cpu.entry(cpu).or_insert(0) += 1;
                    // a slice not cut by the trace end ends at one of perf's switches
                    if e["args"]["truncated"] != "end" {
                        let end_ns = ((e["ts"].as_f64().unwrap() + dur) * 1000.0).round() as u64;
                        assert!(switch_ts.contains(&(cpu, end_ns)), "{e}");
                    }
                } else {
                    finding_slices.insert(e["name"].as_str().unwrap().to_string());
                }
            }
            "i" => {
                *instants
                    .entry(e["name"].as_str().unwrap().to_string())
                    .or_insert(0) += 1
            }
            "M" => assert!(e["args"]["name"].is_string() || e["args"]["sort_index"].is_i64()),
            other => panic!("unexpected phase {other}"),
        }
    }
    assert_eq!(x_per_cpu, expected_run_slices(&perf));
    let perf_counts = counts(&perf);
    for name in [
        "sched_waking",
        "sched_wakeup_new",
        "sched_migrate_task",
        "sched_process_fork",
    ] {
        assert_eq!(instants.get(name), perf_counts.get(name), "{name}");
    }
    assert_eq!(
        doc["otherData"]["events_not_drawn"]["sched_stat_runtime"].as_u64(),
        perf_counts.get("sched_stat_runtime").copied()
    );
    let titles: BTreeSet<String> = finding_titles(&input).into_iter().collect();
    assert!(!titles.is_empty());
    assert_eq!(finding_slices, titles);

    // every ts / dur is written with exactly 3 decimals (µs from integer ns)
    for key in ["\"ts\":", "\"dur\":"] {
        for (at, _) in text.match_indices(key) {
            let num: String = text[at + key.len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let (_, frac) = num.split_once('.').unwrap_or_else(|| panic!("{key}{num}"));
            assert_eq!(frac.len(), 3, "{key}{num}");
        }
    }
}

/// Letters of a raw 4.2–4.13 `prev_state` (formats.md §6), the table Perfetto assumes for a
/// trace without a kernel release.
fn letters_44(raw: i64) -> String {
    const TABLE: [(i64, char); 11] = [
        (1, 'S'),
        (2, 'D'),
        (4, 'T'),
        (8, 't'),
        (16, 'Z'),
        (32, 'X'),
        (64, 'x'),
        (128, 'K'),
        (256, 'W'),
        (512, 'P'),
        (1024, 'N'),
    ];
    let s: Vec<String> = TABLE
        .iter()
        .filter(|(bit, _)| raw & 2047 & bit != 0)
        .map(|(_, l)| l.to_string())
        .collect();
    let mut out = if s.is_empty() {
        "R".to_string()
    } else {
        s.join("|")
    };
    if raw & 2048 != 0 {
        out.push('+');
    }
    out
}

#[test]
fn perfetto_export_of_text_without_release_uses_perfettos_default_table() {
    let input = fixture("fixtures/sched/starve.ftrace.txt");
    let file = export(&input, "perfetto", "starve-text.pftrace");
    let d = decode_perfetto(&file);
    let uts = d.first_packet.msg(45).unwrap().msg(1).unwrap();
    assert_eq!(uts.str(3), None, "ftrace text names no kernel release");
    // the kernel's own text: `... [001] d..2.   600.138361: sched_switch: ... prev_state=R ==> ...`
    let text = std::fs::read_to_string(&input).unwrap();
    let mut want: BTreeMap<(u64, u32), String> = BTreeMap::new();
    for line in text.lines().filter(|l| l.contains(" sched_switch: ")) {
        let open = line.find(" [").unwrap();
        let cpu: u32 = line[open + 2..open + 5].parse().unwrap();
        let (head, payload) = line.split_once(" sched_switch: ").unwrap();
        let ts = head
            .trim_end()
            .trim_end_matches(':')
            .rsplit(' ')
            .next()
            .unwrap();
        let (secs, usecs) = ts.split_once('.').unwrap();
        let ns =
            secs.parse::<u64>().unwrap() * 1_000_000_000 + usecs.parse::<u64>().unwrap() * 1000;
        want.insert((ns, cpu), field(payload, "prev_state").unwrap().to_string());
    }
    let switches: Vec<_> = d
        .events
        .iter()
        .filter(|e| e.name == "sched_switch")
        .collect();
    assert_eq!(switches.len(), want.len());
    assert!(want.values().any(|s| s == "R+") || want.values().any(|s| s == "S"));
    for e in switches {
        let raw = e.payload.int(4).unwrap();
        // `I` (≥ 4.14 idle kthread) has no bit of its own before 4.14: those kernels
        // reported TASK_IDLE as TASK_UNINTERRUPTIBLE|TASK_NOLOAD, i.e. `D|N`
        let want = match want[&(e.ts, e.cpu)].as_str() {
            "I" => "D|N",
            w => w,
        };
        assert_eq!(letters_44(raw), want, "at {}", e.ts);
    }
}

#[test]
fn export_errors_exit_2_and_leave_no_file() {
    let out = tmp("missing.pftrace");
    let r = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(["export", "/nonexistent/trace.dat", "--to", "perfetto", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(2));
    assert!(!out.exists());
    // a perf.data cut in the middle of its data section: the reader fails part-way
    let data = std::fs::read(fixture("fixtures/sched/starve.perf.data")).unwrap();
    let cut = tmp("cut.perf.data");
    std::fs::write(&cut, &data[..data.len() / 2]).unwrap();
    let r = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .arg("export")
        .arg(&cut)
        .args(["--to", "chrome-json", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    if r.status.code() == Some(2) {
        assert!(!out.exists(), "partial output removed");
    } else {
        // the reader may treat a truncated file as recoverable (counted, not fatal): then
        // the JSON must still be complete
        assert_eq!(r.status.code(), Some(0));
        let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert!(v["traceEvents"].is_array());
    }
    let r = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(["export", "x", "--to", "svg", "-o", "y"])
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(2));
}

// ---------------------------------------------------------------- official protos

/// `tests/perfetto/validate.py`'s summary of a Perfetto export (decoded with Perfetto's own
/// perfetto_trace_pb2), or `None` when the package is missing and skipping was asked for.
fn official_decode(file: &Path) -> Option<Value> {
    let have = Command::new("python3")
        .args([
            "-c",
            "import perfetto.protos.perfetto.trace.perfetto_trace_pb2",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !stallscope_testkit::require(
        "the perfetto Python package (Perfetto's trace protos)",
        have,
        "python3 -m pip install perfetto protobuf",
    ) {
        return None;
    }
    let out = Command::new("python3")
        .arg(repo_root().join("tests/perfetto/validate.py"))
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn perfetto_exports_decode_with_perfettos_own_protos() {
    // The self-test decoder shares the writer's field table, so it could not catch a wrong
    // field number: Perfetto's compiled protos decode the exports here, and no field may be
    // unknown to them. Work items are typed workqueue events (Perfetto draws them as slices
    // on the worker thread) and the threads of a `stallscope record` trace are grouped into
    // processes from its recorded task context.
    let dir = std::env::temp_dir().join(format!("ss-pf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (rel, with_findings) in [
        ("fixtures/sched/starve.perf.data", true),
        ("fixtures/detectors/worker-flood/sparse.dat.xz", false),
        (
            "fixtures/detectors/runqueue-starvation/cgroup-context.dat.zst",
            true,
        ),
        (
            "fixtures/detectors/dispatch-starvation/deadline.trace.dat.zst",
            false,
        ),
        // trace_marker lines: typed print events whose text is the marker's
        ("fixtures/real_world/stacks_markers.dat", false),
        // text that names each task's process: ftrace's record-tgid column, perf script
        // -F pid,tid
        ("fixtures/samples/ftrace/trace_record_tgid.txt", false),
        ("fixtures/samples/perf/script_sched_F_pid_tid.txt", false),
    ] {
        let out = dir.join("t.pftrace");
        let (o, input) = (out.to_str().unwrap(), fixture(rel));
        let mut args = vec![
            "export",
            "--to",
            "perfetto",
            "-o",
            o,
            input.to_str().unwrap(),
        ];
        if with_findings {
            args.push("--findings");
        }
        stallscope(&args);
        let Some(v) = official_decode(&out) else {
            return;
        };
        assert_eq!(v["unknown_fields"], serde_json::json!([]), "{rel}: {v}");
        assert!(
            v["packets"]["ftrace_events"].as_u64().unwrap() > 0,
            "{rel}: {v}"
        );
        if with_findings {
            assert!(
                v["packets"]["track_event"].as_u64().unwrap_or(0) > 0,
                "{rel}: {v}"
            );
        }
        if rel.contains("worker-flood") {
            // every workqueue_execute_start of the trace is a typed event
            let dump = stallscope(&["dump", fixture(rel).to_str().unwrap()]);
            let starts = String::from_utf8_lossy(&dump)
                .lines()
                .filter(|l| l.contains(" workqueue_execute_start "))
                .count() as u64;
            assert!(starts > 0);
            assert_eq!(v["ftrace_events"]["workqueue_execute_start"], starts, "{v}");
        }
        if rel.contains("stacks_markers") {
            let dump = stallscope(&["dump", fixture(rel).to_str().unwrap()]);
            let markers: Vec<String> = String::from_utf8_lossy(&dump)
                .lines()
                .filter(|l| l.contains(" print "))
                .filter_map(|l| {
                    l.split_once(" buf=")
                        .map(|(_, b)| b.trim_matches('"').to_string())
                })
                .map(|b| format!("{b}\n"))
                .collect();
            assert_eq!(markers.len(), 4, "{v}");
            // bundles are per CPU: the markers as a set
            let mut got: Vec<String> = v["print_bufs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_str().unwrap().to_string())
                .collect();
            let mut want = markers;
            got.sort();
            want.sort();
            assert_eq!(got, want, "{v}");
        }
        if rel.contains("record_tgid") || rel.contains("pid_tid") {
            let (threads, grouped) = (
                v["threads"].as_u64().unwrap(),
                v["threads_in_processes"].as_u64().unwrap(),
            );
            assert!(threads > 0 && grouped == threads, "{rel}: {v}");
        }
        if rel.contains("cgroup-context") {
            let (threads, grouped) = (
                v["threads"].as_u64().unwrap(),
                v["threads_in_processes"].as_u64().unwrap(),
            );
            assert!(grouped > 0 && grouped * 10 >= threads * 8, "{rel}: {v}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// (detector, severity, title, start_ns, end_ns) of each finding, sorted.
type FindingKey = (String, String, String, u64, u64);

fn analyzed_findings(report: &Value) -> Vec<FindingKey> {
    let mut v: Vec<FindingKey> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["detector"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
                f["title"].as_str().unwrap().to_string(),
                f["window"]["start_ns"].as_u64().unwrap(),
                f["window"]["end_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// The findings track of a Chrome JSON export: `X` slices of category `stallscope`, whose
/// `ts`/`dur` are microseconds with three decimals (whole nanoseconds).
fn exported_findings(export: &Value) -> Vec<FindingKey> {
    let ns = |v: &Value| (v.as_f64().unwrap() * 1000.0).round() as u64;
    let mut v: Vec<FindingKey> = export["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "stallscope" && e["ph"] == "X")
        .map(|e| {
            let start = ns(&e["ts"]);
            (
                e["args"]["detector"].as_str().unwrap().to_string(),
                e["args"]["severity"].as_str().unwrap().to_string(),
                e["name"].as_str().unwrap().to_string(),
                start,
                start + ns(&e["dur"]),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn export_findings_are_analyzes_on_every_fixture() {
    // `export --findings` once ran its own engine apart from `analyze` and found nothing
    // on the lock-spinning fixtures where analyze found the rwsem (it did not read the
    // profile): now the export is a product of analyze's own reading. On every trace
    // fixture, its findings track is analyze's findings — detector, severity, title and
    // window — on two threads (the machine's cores) to keep the test short.
    let files = stallscope_testkit::fixture_files();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let compared = std::sync::atomic::AtomicUsize::new(0);
    let with_findings = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for worker in 0..2 {
            let (files, next, compared, with_findings) = (&files, &next, &compared, &with_findings);
            s.spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(path) = files.get(i) else { break };
                let p = path.to_str().unwrap();
                let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
                    .args(["analyze", "--format", "json", p])
                    .output()
                    .unwrap();
                if !out.status.success() {
                    continue; // not a trace (analyze says why; exit 2)
                }
                let report: Value = serde_json::from_slice(&out.stdout).unwrap();
                if report["capabilities"]["events_read"].as_u64() == Some(0) {
                    continue; // a profile alone: nothing to export
                }
                let dest = tmp(&format!("every-{worker}.json"));
                stallscope(&[
                    "export",
                    "--to",
                    "chrome-json",
                    "--findings",
                    "-o",
                    dest.to_str().unwrap(),
                    p,
                ]);
                let export: Value = serde_json::from_slice(&std::fs::read(&dest).unwrap()).unwrap();
                let (ours, theirs) = (exported_findings(&export), analyzed_findings(&report));
                assert_eq!(ours, theirs, "{p}: export --findings ≠ analyze");
                compared.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if !theirs.is_empty() {
                    with_findings.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    let (compared, with_findings) = (compared.into_inner(), with_findings.into_inner());
    eprintln!("{compared} trace fixtures compared, {with_findings} with findings");
    assert!(compared >= 100, "{compared} trace fixtures");
    assert!(
        with_findings >= 20,
        "{with_findings} fixtures with findings"
    );
}
