//! Request lifecycle units: merges, requeues, flush sequences, partial completions,
//! completion without dispatch, duplicate sectors, issuer attribution, btt per-bio phases.
//!
//! Events are written as short blkparse-like lines (`ts pid ACT RWBS sector+nr [comm]`) on
//! device 7,0; the expected values are derived by hand from the block layer's semantics
//! (comments say how), never from the tracker's own output.

use stallscope_model::{
    BlockAction, BlockDev, BlockEvent, BlockOp, Comm, Event, EventKind, Problem, Rwbs, Span,
    SpanPos,
};
use stallscope_timeline::block::{
    BlockSink, BlockTracker, BttPhase, CompletedRequest, PhaseSample, QueuedBio, RequestKind,
};

/// `"<ts> <pid> <ACT> <RWBS> [<sector>+<nr>] [<comm>]"`.
fn line(n: u64, s: &str) -> Event {
    let f: Vec<&str> = s.split_whitespace().collect();
    let ts: u64 = f[0].parse().unwrap();
    let pid: i32 = f[1].parse().unwrap();
    let action = BlockAction::from_letter(f[2].chars().next().unwrap()).unwrap();
    let mut b = BlockEvent::new(action);
    b.dev = Some(BlockDev::new(7, 0));
    b.rwbs = Rwbs::parse(f[3]).unwrap();
    for tok in &f[4..] {
        if let Some((s, nr)) = tok.split_once('+') {
            b.sector = s.parse().unwrap();
            b.nr_sector = nr.parse().unwrap();
            b.bytes = Some(b.nr_sector * 512);
        } else if let Some(c) = tok.strip_prefix('[') {
            b.comm = Some(Comm::new(c.trim_end_matches(']')));
        }
    }
    if action == BlockAction::Complete {
        b.error = Some(0);
    }
    Event {
        ts,
        cpu: 0,
        pid,
        span: Span::new(0, SpanPos::Line(n)),
        kind: EventKind::Block(Box::new(b)),
        callchain: None,
    }
}

#[derive(Default)]
struct All {
    queued: Vec<QueuedBio>,
    phases: Vec<PhaseSample>,
    requests: Vec<CompletedRequest>,
}

impl BlockSink for All {
    fn queued(&mut self, bio: &QueuedBio) -> u32 {
        self.queued.push(*bio);
        // The tag comes back in every phase sample of this bio.
        bio.sector as u32
    }
    fn phase(&mut self, s: &PhaseSample) {
        self.phases.push(*s);
    }
    fn request(&mut self, r: &CompletedRequest) {
        self.requests.push(*r);
    }
}

impl All {
    fn durs(&self, p: BttPhase) -> Vec<u64> {
        self.phases
            .iter()
            .filter(|s| s.phase == p)
            .map(|s| s.dur)
            .collect()
    }
}

fn run(lines: &str) -> (All, stallscope_model::DataQuality) {
    let mut t = BlockTracker::new();
    let mut all = All::default();
    for (i, l) in lines
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        t.process(&line(i as u64 + 1, l), &mut all);
    }
    (all, t.finish())
}

#[test]
fn simple_request_has_every_phase_and_three_tasks() {
    let (all, q) = run("
        100 10 Q WS 0+8 [fio]
        150 10 G WS 0+8 [fio]
        170 10 I WS 0+8 [fio]
        400 33 D WS 0+8 [kworker/0:1H]
        900 0 C WS 0+8
    ");
    assert!(q.is_empty(), "{q:?}");
    assert_eq!(all.requests.len(), 1);
    let r = &all.requests[0];
    assert_eq!(r.kind, RequestKind::Data);
    assert_eq!((r.sector, r.nr_sector, r.bytes()), (0, 8, 4096));
    assert_eq!(r.queue_ts, Some(100));
    assert_eq!(r.getrq_ts, Some(150));
    assert_eq!(r.insert_ts, Some(170));
    assert_eq!((r.first_issue_ts, r.issue_ts), (Some(400), Some(400)));
    assert_eq!(r.complete_ts, 900);
    assert_eq!(r.queuer.map(|t| t.pid), Some(10));
    assert_eq!(
        r.dispatcher.map(|t| (t.pid, t.comm)),
        Some((33, Comm::new("kworker/0:1H")))
    );
    assert_eq!(r.wait_before_issue(), Some(300));
    assert_eq!(r.device_time(), Some(500));
    assert_eq!(r.complete_span.pos(), SpanPos::Line(5));
    assert_eq!(all.durs(BttPhase::Q2G), [50]);
    assert_eq!(all.durs(BttPhase::G2I), [20]);
    assert_eq!(all.durs(BttPhase::I2D), [230]);
    assert_eq!(all.durs(BttPhase::Q2D), [300]);
    assert_eq!(all.durs(BttPhase::D2C), [500]);
    assert_eq!(all.durs(BttPhase::Q2C), [800]);
}

#[test]
fn back_and_front_merges_join_the_request_and_count_per_bio() {
    // Request allocated for 100+8; 108+8 merges at the back, 92+8 at the front (the request
    // now starts at 92); the dispatch covers 92+24 = all three bios.
    let (all, q) = run("
        1000 10 Q W 100+8 [dd]
        1010 10 G W 100+8 [dd]
        1020 11 Q W 108+8 [cp]
        1025 11 M W 108+8 [cp]
        1030 12 Q W 92+8 [tar]
        1034 12 F W 92+8 [tar]
        1100 10 D W 92+24 [dd]
        1500 0 C W 92+24
    ");
    assert!(q.is_empty(), "{q:?}");
    assert_eq!(all.requests.len(), 1);
    let r = &all.requests[0];
    assert_eq!((r.sector, r.nr_sector, r.merges, r.bios), (92, 24, 2, 3));
    // Earliest Q among the bios; queuer = the task whose bio got the request allocated.
    assert_eq!(r.queue_ts, Some(1000));
    assert_eq!(r.queuer.map(|t| t.comm), Some(Comm::new("dd")));
    // btt: one Q2M per merged bio (its own Q to its M), Q2C and D2C for each of the 3 bios,
    // M2D for the merged ones (no I traced), Q2D for all.
    assert_eq!(all.durs(BttPhase::Q2M), [5, 4]);
    let mut q2c = all.durs(BttPhase::Q2C);
    q2c.sort();
    assert_eq!(q2c, [470, 480, 500]);
    assert_eq!(all.durs(BttPhase::D2C), [400, 400, 400]);
    assert_eq!(all.durs(BttPhase::M2D).len(), 2);
    // Each Q2C sample is attributed to the task that queued that bio.
    let mut who: Vec<_> = all
        .phases
        .iter()
        .filter(|s| s.phase == BttPhase::Q2C)
        .map(|s| s.queuer.pid)
        .collect();
    who.sort();
    assert_eq!(who, [10, 11, 12]);
    // Each sample carries the tag its bio got when queued (here: its start sector).
    let mut tags: Vec<_> = all
        .phases
        .iter()
        .filter(|s| s.phase == BttPhase::Q2C)
        .map(|s| s.tag)
        .collect();
    tags.sort();
    assert_eq!(tags, [92, 100, 108]);
}

#[test]
fn requeue_goes_back_and_dispatches_again() {
    let (all, q) = run("
        0 10 Q R 8+8 [fio]
        10 10 G R 8+8 [fio]
        20 10 I R 8+8 [fio]
        100 40 D R 8+8 [kworker]
        150 40 R R 8+8
        300 41 D R 8+8 [kworker2]
        700 0 C R 8+8
    ");
    assert!(q.is_empty(), "{q:?}");
    let r = &all.requests[0];
    assert_eq!(r.requeues, 1);
    assert_eq!((r.first_issue_ts, r.issue_ts), (Some(100), Some(300)));
    assert_eq!(r.dispatcher.map(|t| t.pid), Some(41));
    assert_eq!(r.device_time(), Some(400));
    // btt counts I2D and Q2D once per dispatch; D2C from the last dispatch.
    assert_eq!(all.durs(BttPhase::I2D), [80, 280]);
    assert_eq!(all.durs(BttPhase::Q2D), [100, 300]);
    assert_eq!(all.durs(BttPhase::D2C), [400]);
}

#[test]
fn zero_length_flush_sequence_is_one_flush_record() {
    // The sequence of fixtures/samples/blktrace/blkparse_default.txt lines 37-41.
    let (all, q) = run("
        170539745 17157 Q FWS [python3]
        170540694 17157 G FWS [python3]
        170548289 58 D FN [kworker/0:1H]
        171763924 14 C FN
        171765063 14 C WS
    ");
    assert!(q.is_empty(), "{q:?}");
    assert_eq!(all.requests.len(), 1);
    let r = &all.requests[0];
    assert_eq!(r.kind, RequestKind::Flush);
    assert!(r.rwbs.preflush && r.rwbs.sync && r.rwbs.op == BlockOp::Write);
    assert_eq!(r.queue_ts, Some(170539745));
    assert_eq!(r.issue_ts, Some(170548289));
    assert_eq!(r.first_complete_ts, 171763924);
    assert_eq!(r.complete_ts, 171765063);
    assert_eq!(r.queuer.map(|t| t.comm), Some(Comm::new("python3")));
    assert_eq!(r.dispatcher.map(|t| t.pid), Some(58));
    // btt ignores zero-length traces altogether.
    assert!(all.phases.is_empty() && all.queued.is_empty());
}

#[test]
fn kernel_initiated_flush_closes_at_its_completion() {
    let (all, q) = run("
        10 58 D FN [kworker/0:1H]
        90 14 C FN
    ");
    assert!(q.is_empty(), "{q:?}");
    assert_eq!(all.requests.len(), 1);
    assert_eq!(all.requests[0].queue_ts, None);
    assert_eq!(all.requests[0].device_time(), Some(80));
}

#[test]
fn partial_completions_keep_the_rest_in_flight() {
    // 0+16 dispatched, completed as 0+8 then 8+8 (blk_update_request advances the start).
    let (all, q) = run("
        0 10 Q R 0+16 [fio]
        5 10 G R 0+16 [fio]
        10 10 D R 0+16 [fio]
        50 0 C R 0+8
        80 0 C R 8+8
    ");
    assert!(q.is_empty(), "{q:?}");
    assert_eq!(all.requests.len(), 1);
    let r = &all.requests[0];
    assert_eq!((r.sector, r.nr_sector, r.partial_completions), (0, 16, 1));
    assert_eq!((r.first_complete_ts, r.complete_ts), (50, 80));
    // btt: the single 0+16 bio lies inside neither partial C, so it is never completed.
    assert!(all.durs(BttPhase::Q2C).is_empty());
}

#[test]
fn completion_without_dispatch_is_counted_not_fatal() {
    let (all, q) = run("
        0 10 Q W 64+8 [fio]
        5 10 G W 64+8 [fio]
        90 0 C W 64+8
        95 0 C W 4096+8
    ");
    assert_eq!(q.count(Problem::BlockCompleteWithoutDispatch), 1);
    assert_eq!(q.count(Problem::BlockCompleteUnknownRequest), 1);
    assert_eq!(all.requests.len(), 1);
    assert_eq!(all.requests[0].issue_ts, None);
    // btt: Q2C yes, D2C no (never dispatched).
    assert_eq!(all.durs(BttPhase::Q2C), [90]);
    assert!(all.durs(BttPhase::D2C).is_empty());
}

#[test]
fn bio_at_the_sector_of_one_in_flight_replaces_it_like_btt() {
    // A write queued (and merged) at the block of a read in flight. Expected values are
    // btt 2.09's on this very sequence (written as a blk_io_trace dump, `btt -A`):
    // Q2Q N 2 (all three Qs accepted), Q2M 100 ns (the write's own Q), D2C only for 500+8
    // (the read's D time is lost with the read), Q2C 1000 ns twice (the read's C completes
    // the write bio: 3000 - 2000).
    let (all, q) = run("
        1000 1 Q R 100+8 [rd]
        1100 1 G R 100+8 [rd]
        1200 1 I R 100+8 [rd]
        1300 1 D R 100+8 [rd]
        2000 2 Q W 100+8 [wr]
        2100 2 M W 100+8 [wr]
        3000 0 C R 100+8
        4000 1 Q R 500+8 [rd]
        4100 1 G R 500+8 [rd]
        4200 1 I R 500+8 [rd]
        4300 1 D R 500+8 [rd]
        5000 0 C R 500+8
    ");
    assert_eq!(q.count(Problem::BlockBioSectorInFlight), 1);
    assert_eq!(all.queued.len(), 3);
    assert_eq!(all.durs(BttPhase::Q2M), [100]);
    assert_eq!(all.durs(BttPhase::D2C), [700]);
    assert_eq!(all.durs(BttPhase::Q2C), [1000, 1000]);
    assert_eq!(all.durs(BttPhase::I2D), [100, 100]);
    // Requests: the read at 100 completes normally (its key includes the direction).
    let reads: Vec<_> = all
        .requests
        .iter()
        .map(|r| (r.sector, r.queuer.map(|t| t.pid)))
        .collect();
    assert_eq!(reads, [(100, Some(1)), (500, Some(1))]);
}

#[test]
fn request_at_the_sector_and_direction_of_one_in_flight_is_counted() {
    let (all, q) = run("
        0 10 Q W 64+8 [a]
        1 10 G W 64+8 [a]
        2 11 Q W 72+8 [b]
        3 11 G W 64+8 [b]
        4 10 D W 64+8 [a]
        9 0 C W 64+8
    ");
    assert_eq!(q.count(Problem::BlockDuplicateSector), 1);
    assert_eq!(all.requests.len(), 1);
}

#[test]
fn issue_of_an_unknown_request_and_open_requests_at_end() {
    let (all, q) = run("
        0 33 D W 512+8 [kworker]
        10 0 C W 512+8
        20 10 Q W 0+8 [fio]
        21 10 G W 0+8 [fio]
    ");
    assert_eq!(q.count(Problem::BlockIssueWithoutRequest), 1);
    assert_eq!(q.count(Problem::BlockRequestsInFlightAtEnd), 1);
    assert_eq!(all.requests.len(), 1);
    assert_eq!(all.requests[0].queue_ts, None);
    assert_eq!(all.requests[0].dispatcher.map(|t| t.pid), Some(33));
}

#[test]
fn zero_intervals_count_as_one_ns_like_btt() {
    let (all, _) = run("
        5 10 Q W 0+8 [fio]
        5 10 G W 0+8 [fio]
        5 10 D W 0+8 [fio]
        5 0 C W 0+8
    ");
    assert_eq!(all.durs(BttPhase::Q2G), [1]);
    assert_eq!(all.durs(BttPhase::D2C), [1]);
    assert_eq!(all.durs(BttPhase::Q2C), [1]);
    // Q2D is btt's plain difference.
    assert_eq!(all.durs(BttPhase::Q2D), [0]);
}

#[test]
fn emulated_preflush_fua_write_is_one_data_record_plus_kernel_flushes() {
    // fixtures/detectors/dispatch-starvation bfq.blkparse.txt lines 2-11 (loop0 has no FUA:
    // the flush machinery sends a preflush, the data without F flags, a post-flush, and
    // ends the original request with a zero-length C at its sector).
    let (all, q) = run("
        83554 19412 Q FWFSM 4195616+4 [fio]
        89351 19412 G FWFSM 4195616+4 [fio]
        96416 10 D FN [kworker/0:0H]
        512980 14 C FN
        519944 10 I WSM 4195616+4 [kworker/0:0H]
        520877 10 D WSM 4195616+4 [kworker/0:0H]
        2793081 22 C WSM 4195616+4
        4424612 54 D FN [kworker/1:1H]
        4703951 14 C FN
        4705928 14 C WSM 4195616+0
    ");
    assert!(q.is_empty(), "{q:?}");
    let data: Vec<_> = all
        .requests
        .iter()
        .filter(|r| r.kind == RequestKind::Data)
        .collect();
    let flushes = all
        .requests
        .iter()
        .filter(|r| r.kind == RequestKind::Flush)
        .count();
    assert_eq!((data.len(), flushes), (1, 2));
    let r = data[0];
    assert_eq!((r.sector, r.nr_sector), (4195616, 4));
    assert_eq!(r.queuer.map(|t| t.comm), Some(Comm::new("fio")));
    assert_eq!(r.inserter.map(|t| t.pid), Some(10));
    assert_eq!(
        (r.queue_ts, r.insert_ts, r.issue_ts),
        (Some(83554), Some(519944), Some(520877))
    );
    assert_eq!(r.complete_ts, 2793081);
}

#[test]
fn requests_merged_by_the_scheduler_are_absorbed_by_the_dispatch() {
    // Two requests allocated side by side; the I/O scheduler merges the second into the first
    // (block_rq_merge, which blktrace does not report) and dispatches one request covering
    // both. Nothing may stay in flight, and the same sector can be allocated again.
    let (all, q) = run("
        0 10 Q W 100+8 [a]
        1 10 G W 100+8 [a]
        2 10 I W 100+8 [a]
        3 11 Q W 108+8 [b]
        4 11 G W 108+8 [b]
        5 11 I W 108+8 [b]
        9 40 D W 100+16 [kworker]
        20 0 C W 100+16
        30 12 Q W 108+8 [c]
        31 12 G W 108+8 [c]
        32 12 D W 108+8 [c]
        40 0 C W 108+8
    ");
    assert!(q.is_empty(), "{q:?}");
    assert_eq!(all.requests.len(), 2);
    assert_eq!((all.requests[0].merges, all.requests[0].bios), (1, 2));
    assert_eq!(all.requests[1].queuer.map(|t| t.pid), Some(12));
}
