//! The export writers fed with synthetic events: Perfetto bundles stay bounded and are
//! written while events arrive, lost events flag the right bundle, pre-4.14 kernels get
//! their own raw `prev_state` numbers (formats.md §6), and overlapping findings get
//! separate lanes in both formats. Expected raw numbers come from the kernel tables in
//! formats.md §6, not from the writer.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::rc::Rc;

use stallscope_export::chrome_json::ChromeJsonWriter;
use stallscope_export::perfetto::{PerfettoWriter, BUNDLE_EVENTS};
use stallscope_model::{
    Comm, Event, EventKind, Finding, FindingSeverity, PrevState, Span, Switch, TaskRef, Window,
};

/// A writer whose bytes the test can look at before `finish`.
#[derive(Clone, Default)]
struct Shared(Rc<RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn task(comm: &str, pid: i32) -> TaskRef {
    TaskRef {
        comm: Comm::new(comm),
        pid,
        prio: 120,
    }
}

fn switch(ts: u64, cpu: u32, prev: i32, state: &str, next: i32) -> Event {
    Event {
        ts,
        cpu,
        pid: prev,
        span: Span::default(),
        callchain: None,
        kind: EventKind::Switch(Switch {
            prev: task("a", prev),
            prev_state: PrevState::parse(state).unwrap(),
            next: task("b", next),
        }),
    }
}

fn lost(ts: u64, cpu: u32) -> Event {
    Event {
        ts,
        cpu,
        pid: -1,
        span: Span::default(),
        callchain: None,
        kind: EventKind::Lost { count: Some(3) },
    }
}

fn finding(title: &str, start: u64, end: u64) -> Finding {
    Finding {
        cause: None,
        detector: "runqueue-starvation".into(),
        severity: FindingSeverity::High,
        title: title.into(),
        window: Window {
            start_ns: start,
            end_ns: end,
        },
        cpus: vec![1],
        tasks: vec![],
        measures: BTreeMap::from([("worst_wait_ns".to_string(), 5)]),
        evidence: vec![],
        hint: String::new(),
    }
}

// ---- minimal protobuf reading (wire format only)

fn varint(b: &[u8], p: &mut usize) -> u64 {
    let (mut v, mut s) = (0u64, 0);
    loop {
        let x = b[*p];
        *p += 1;
        v |= u64::from(x & 0x7f) << s;
        if x & 0x80 == 0 {
            return v;
        }
        s += 7;
    }
}

/// (field, varint value or 0, bytes or empty) for each field of a message.
fn fields(b: &[u8]) -> Vec<(u32, u64, &[u8])> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < b.len() {
        let tag = varint(b, &mut p);
        match tag & 7 {
            0 => out.push(((tag >> 3) as u32, varint(b, &mut p), &b[0..0])),
            2 => {
                let n = varint(b, &mut p) as usize;
                out.push(((tag >> 3) as u32, 0, &b[p..p + n]));
                p += n;
            }
            w => panic!("unexpected wire type {w}"),
        }
    }
    out
}

fn get(msg: &[u8], n: u32) -> Option<(u64, &[u8])> {
    fields(msg)
        .into_iter()
        .find(|f| f.0 == n)
        .map(|f| (f.1, f.2))
}

/// Bundles as (cpu, events, lost flag, raw prev_states).
fn bundles(trace: &[u8]) -> Vec<(u64, usize, bool, Vec<i64>)> {
    let mut out = Vec::new();
    for (_, _, packet) in fields(trace) {
        if let Some((_, b)) = get(packet, 1) {
            let fs = fields(b);
            let cpu = fs.iter().find(|f| f.0 == 1).map_or(u64::MAX, |f| f.1);
            let lost = fs.iter().any(|f| f.0 == 3 && f.1 == 1);
            let events: Vec<&[u8]> = fs.iter().filter(|f| f.0 == 2).map(|f| f.2).collect();
            let states = events
                .iter()
                .filter_map(|e| get(e, 4))
                .filter_map(|(_, sw)| get(sw, 4))
                .map(|(v, _)| v as i64)
                .collect();
            out.push((cpu, events.len(), lost, states));
        }
    }
    out
}

#[test]
fn bundles_are_bounded_and_written_while_events_arrive() {
    let sink = Shared::default();
    let mut w = PerfettoWriter::new(sink.clone(), Some("6.18.44"), Some(2)).unwrap();
    let n = 5 * BUNDLE_EVENTS as u64 + 7;
    for i in 0..n {
        w.event(&switch(1000 + i, 0, 10, "S", 11)).unwrap();
    }
    // before finish, all full bundles are already out
    let written = bundles(&sink.0.borrow());
    assert_eq!(written.len(), 5);
    assert!(written.iter().all(|b| b.1 == BUNDLE_EVENTS as usize));
    let (_, stats) = w.finish(&[]).unwrap();
    let all = bundles(&sink.0.borrow());
    assert_eq!(all.len(), 6);
    assert_eq!(all.iter().map(|b| b.1 as u64).sum::<u64>(), n);
    assert_eq!(stats.events.get("sched_switch"), Some(&n));
    assert_eq!(stats.bytes, sink.0.borrow().len() as u64);
}

#[test]
fn a_loss_flags_the_next_bundle_of_its_cpu_only() {
    let sink = Shared::default();
    let mut w = PerfettoWriter::new(sink.clone(), Some("6.18.44"), None).unwrap();
    w.event(&switch(1, 0, 1, "S", 2)).unwrap();
    w.event(&switch(2, 0, 2, "S", 1)).unwrap();
    w.event(&lost(3, 0)).unwrap();
    w.event(&lost(4, 0)).unwrap();
    w.event(&switch(5, 0, 1, "S", 2)).unwrap();
    w.event(&switch(6, 1, 3, "S", 4)).unwrap();
    w.finish(&[]).unwrap();
    let got: Vec<(u64, usize, bool)> = bundles(&sink.0.borrow())
        .into_iter()
        .map(|b| (b.0, b.1, b.2))
        .collect();
    // cpu 0: the events before the loss, an empty bundle for the first of two losses in a
    // row, then the event after them flagged; cpu 1 untouched
    assert_eq!(
        got,
        vec![(0, 2, false), (0, 0, true), (0, 1, true), (1, 1, false)]
    );
}

fn states_for(release: Option<&str>, letters: &[&str]) -> (Vec<i64>, Option<String>) {
    let sink = Shared::default();
    let mut w = PerfettoWriter::new(sink.clone(), release, None).unwrap();
    for (i, l) in letters.iter().enumerate() {
        w.event(&switch(i as u64, 0, 5, l, 6)).unwrap();
    }
    w.finish(&[]).unwrap();
    let trace = sink.0.borrow();
    let first = fields(&trace)[0].2;
    let si = get(first, 45).expect("SystemInfo first").1;
    let uts = get(si, 1).unwrap().1;
    let rel = get(uts, 3).map(|(_, b)| String::from_utf8(b.to_vec()).unwrap());
    let states = bundles(&trace).into_iter().flat_map(|b| b.3).collect();
    (states, rel)
}

#[test]
fn prev_state_uses_the_input_kernels_table() {
    let letters = ["R", "R+", "S", "D", "I", "Z", "X"];
    // ≥ 4.14: TASK_REPORT bits, + = 0x100
    let (s, rel) = states_for(Some("6.18.44-fc-v769"), &letters);
    assert_eq!(rel.as_deref(), Some("6.18.44-fc-v769"));
    assert_eq!(s, vec![0, 0x100, 1, 2, 0x80, 0x20, 0x10]);
    // 4.2–4.13: task state bits, Z 16, X 32, + = 2048, I = TASK_IDLE = D|N
    let (s, _) = states_for(Some("4.4.0-21-generic"), &letters);
    assert_eq!(s, vec![0, 2048, 1, 2, 2 | 1024, 16, 32]);
    // ≤ 4.1: + = 1024 (TASK_STATE_MAX), no N
    let (s, _) = states_for(Some("3.10.0-1160.el7.x86_64"), &letters);
    assert_eq!(s, vec![0, 1024, 1, 2, 2, 16, 32]);
    // unknown kernel: no release written, the 4.4 table Perfetto then assumes
    let (s, rel) = states_for(None, &letters);
    assert_eq!(rel, None);
    assert_eq!(s, vec![0, 2048, 1, 2, 2 | 1024, 16, 32]);
}

#[test]
fn overlapping_findings_get_their_own_lanes() {
    let findings = [
        finding("first", 100, 500),
        finding("overlaps first", 200, 300),
        finding("after both", 600, 700),
    ];
    // Perfetto: the root track plus one child per lane; slices on the children
    let sink = Shared::default();
    let mut w = PerfettoWriter::new(sink.clone(), Some("6.18"), None).unwrap();
    w.event(&switch(1, 0, 1, "S", 2)).unwrap();
    w.finish(&findings).unwrap();
    let trace = sink.0.borrow();
    let mut tracks = BTreeMap::new();
    let mut begins = Vec::new();
    for (_, _, p) in fields(&trace) {
        if let Some((_, d)) = get(p, 60) {
            let uuid = get(d, 1).unwrap().0;
            let parent = get(d, 5).map(|x| x.0);
            tracks.insert(uuid, parent);
        }
        if let Some((_, e)) = get(p, 11) {
            if get(e, 9).unwrap().0 == 1 {
                let name = String::from_utf8(get(e, 23).unwrap().1.to_vec()).unwrap();
                begins.push((name, get(e, 11).unwrap().0));
            }
        }
    }
    let root = tracks
        .iter()
        .find(|(_, p)| p.is_none())
        .map(|(u, _)| *u)
        .unwrap();
    assert_eq!(tracks.len(), 3);
    assert_eq!(begins.len(), 3);
    assert_ne!(begins[0].1, begins[1].1);
    assert_eq!(begins[0].1, begins[2].1);
    assert!(begins.iter().all(|b| tracks[&b.1] == Some(root)));

    // Chrome JSON: tids 1 and 2 of the findings process
    let sink = Shared::default();
    let mut w = ChromeJsonWriter::new(sink.clone(), None).unwrap();
    w.event(&switch(1, 0, 1, "S", 2)).unwrap();
    w.finish(&findings).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&sink.0.borrow()).unwrap();
    let tids: BTreeMap<String, i64> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "stallscope")
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["tid"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tids,
        BTreeMap::from([
            ("first".to_string(), 1),
            ("overlaps first".to_string(), 2),
            ("after both".to_string(), 1)
        ])
    );
}

#[test]
fn an_out_of_order_event_starts_a_new_bundle() {
    let sink = Shared::default();
    let mut w = PerfettoWriter::new(sink.clone(), Some("6.18"), None).unwrap();
    for ts in [10, 20, 15, 30] {
        w.event(&switch(ts, 0, 1, "S", 2)).unwrap();
    }
    let (_, stats) = w.finish(&[]).unwrap();
    let sizes: Vec<usize> = bundles(&sink.0.borrow()).iter().map(|b| b.1).collect();
    assert_eq!(sizes, vec![2, 2]);
    assert_eq!(stats.unsorted_splits, 1);
}
