//! Cross-format request lifecycles: one capture read as block tracepoints (trace.dat,
//! `stallscope record`) and as blktrace data (binary per-CPU files and `blkparse` text, from
//! the kernel `blk` tracer recording the same loop device at the same time; see
//! fixtures/detectors/dispatch-starvation/capture.sh) gives the same completed requests.
//!
//! The two recordings come from different probes on the same tracepoints, so:
//! * only loop0 (7,0) is compared (the blk tracer was enabled for it alone), and only requests
//!   lying wholly inside both recordings, 50 ms away from either edge;
//! * timestamps are read by each probe separately: they must agree within 200 µs (in practice
//!   they differ by well under a microsecond or two; a loaded 2-CPU machine can preempt
//!   between the two probes);
//! * blkparse prints the flush machinery's request as `FN` where the tracepoint says `FF`, so
//!   flush records are compared on their timestamps and tasks only.
//!
//! Everything else must be equal: order, kind, sector, length, op and flags, the queuing,
//! inserting and dispatching tasks, bios, merges, requeues.

use std::path::{Path, PathBuf};

use stallscope::model::{BlockDev, Ts};
use stallscope::timeline::block::{BlockTracker, CollectRequests, CompletedRequest, RequestKind};
use stallscope::Inputs;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Completed requests of `dev` and the first and last event time of the input.
fn lifecycles(paths: &[PathBuf], dev: BlockDev) -> (Vec<CompletedRequest>, Ts, Ts) {
    let names: Vec<String> = paths
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let mut inputs = Inputs::open(&names, None).unwrap_or_else(|e| panic!("{names:?}: {e}"));
    let mut tracker = BlockTracker::new();
    let mut out = CollectRequests::default();
    let (mut first, mut last) = (Ts::MAX, 0);
    let mut batch = Vec::new();
    while inputs.next_batch(&mut batch).expect("read") {
        for ev in &batch {
            if let stallscope::model::EventKind::Block(b) = &ev.kind {
                if b.dev == Some(dev) {
                    first = first.min(ev.ts);
                    last = last.max(ev.ts);
                }
            }
            tracker.process(ev, &mut out);
        }
    }
    let recs = out.0.into_iter().filter(|r| r.dev == dev).collect();
    (recs, first, last)
}

/// The request's start, its `Q` left out: a bio queued before one recording began is seen
/// by the other only (so `Q`-derived fields are compared only when both saw the `Q`).
fn inside(r: &CompletedRequest, lo: Ts, hi: Ts) -> bool {
    let start = r
        .getrq_ts
        .or(r.insert_ts)
        .or(r.first_issue_ts)
        .unwrap_or(r.complete_ts);
    start >= lo && r.complete_ts <= hi
}

fn close(a: Option<Ts>, b: Option<Ts>, tol: Ts) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.abs_diff(b) <= tol,
        (None, None) => true,
        _ => false,
    }
}

/// Moves every timestamp of a record by `+shift` ns.
fn shifted(mut r: CompletedRequest, shift: Ts) -> CompletedRequest {
    let f = |t: Option<Ts>| t.map(|t| t + shift);
    r.queue_ts = f(r.queue_ts);
    r.getrq_ts = f(r.getrq_ts);
    r.insert_ts = f(r.insert_ts);
    r.first_issue_ts = f(r.first_issue_ts);
    r.issue_ts = f(r.issue_ts);
    r.first_complete_ts += shift;
    r.complete_ts += shift;
    r
}

/// `shift`: added to the second input's times (blkparse text starts at 0 at the first trace;
/// the binary files it was printed from give the absolute base).
fn compare(name: &str, tp: &[PathBuf], blk: &[PathBuf], shift: Ts) {
    let dev = BlockDev::new(7, 0);
    let (a, a_first, a_last) = lifecycles(tp, dev);
    let (b, b_first, b_last) = lifecycles(blk, dev);
    let b: Vec<_> = b.into_iter().map(|r| shifted(r, shift)).collect();
    let (b_first, b_last) = (b_first + shift, b_last + shift);
    let margin = 50_000_000;
    let lo = a_first.max(b_first) + margin;
    let hi = a_last.min(b_last).saturating_sub(margin);
    assert!(
        lo < hi,
        "{name}: the recordings do not overlap ({a_first}..{a_last} vs {b_first}..{b_last})"
    );
    let a: Vec<_> = a.iter().filter(|r| inside(r, lo, hi)).collect();
    let b: Vec<_> = b.iter().filter(|r| inside(r, lo, hi)).collect();
    assert!(
        a.len() > 100,
        "{name}: only {} requests to compare",
        a.len()
    );
    let tol = 200_000;
    let mut bad = Vec::new();
    for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
        let both_saw_q = x.queue_ts.is_some_and(|t| t >= lo) && y.queue_ts.is_some_and(|t| t >= lo);
        let neither_saw_q = x.queue_ts.is_none() && y.queue_ts.is_none();
        let q_fields = !(both_saw_q || neither_saw_q)
            || (close(x.queue_ts, y.queue_ts, tol)
                && x.queuer.map(|t| t.pid) == y.queuer.map(|t| t.pid)
                && (x.bios, x.merges) == (y.bios, y.merges));
        let same_shape = x.kind == y.kind
            && x.sector == y.sector
            && x.nr_sector == y.nr_sector
            && (x.kind == RequestKind::Flush || x.rwbs == y.rwbs)
            && q_fields
            && x.inserter.map(|t| t.pid) == y.inserter.map(|t| t.pid)
            && x.dispatcher.map(|t| t.pid) == y.dispatcher.map(|t| t.pid)
            && x.requeues == y.requeues;
        let same_times = close(x.getrq_ts, y.getrq_ts, tol)
            && close(x.insert_ts, y.insert_ts, tol)
            && close(x.issue_ts, y.issue_ts, tol)
            && close(Some(x.complete_ts), Some(y.complete_ts), tol);
        if !(same_shape && same_times) {
            bad.push(format!("#{i}:\n  tracepoints {x:?}\n  blktrace    {y:?}"));
            if bad.len() >= 3 {
                break;
            }
        }
    }
    assert_eq!(
        a.len(),
        b.len(),
        "{name}: {} requests from tracepoints, {} from blktrace; first differences:\n{}",
        a.len(),
        b.len(),
        bad.join("\n")
    );
    assert!(bad.is_empty(), "{name}: {}", bad.join("\n"));
}

fn scenario(name: &str) -> (Vec<PathBuf>, PathBuf, Vec<PathBuf>) {
    let dir = root().join("fixtures/detectors/dispatch-starvation");
    let per_cpu: Vec<PathBuf> = std::fs::read_dir(dir.join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().contains(".blktrace."))
        .collect();
    (
        vec![dir.join(format!("{name}.trace.dat.zst"))],
        dir.join(format!("{name}.blkparse.txt.zst")),
        per_cpu,
    )
}

#[test]
fn tracepoints_and_blkparse_text_give_the_same_lifecycles() {
    for name in ["bfq", "deadline"] {
        let (tp, text, per_cpu) = scenario(name);
        let (_, bin_first, _) = lifecycles(&per_cpu, BlockDev::new(7, 0));
        let (_, text_first, _) = lifecycles(std::slice::from_ref(&text), BlockDev::new(7, 0));
        // blkparse's time 0 is the first trace of the binary files.
        assert_eq!(text_first, 0, "{name}: blkparse text does not start at 0");
        compare(
            &format!("{name} trace.dat vs blkparse"),
            &tp,
            &[text],
            bin_first,
        );
    }
}

#[test]
fn tracepoints_and_blktrace_binary_give_the_same_lifecycles() {
    for name in ["bfq", "deadline"] {
        let (tp, _, per_cpu) = scenario(name);
        compare(&format!("{name} trace.dat vs blktrace"), &tp, &per_cpu, 0);
    }
}
