//! `dispatch-starvation`: a block request waits in the I/O scheduler far longer than the
//! device's usual wait while other requests are dispatched past it.
//!
//! State machine (details in [`requests`]):
//!
//! ```text
//!   per device, by sector:  Q → (G) → I ──wait──→ D → C        wait = D − I
//!                                      ↑           │
//!                                      └── R ←─────┘           a requeue starts a new wait
//!   merged away (rq merge `M`) or still waiting at the trace end: the wait ends there
//!   every D is logged (time, issuer, class) while some wait is open → "dispatched past it"
//!   sched_switch prev_state=D … wakeup → tasks blocked during the wait ([`blocked`])
//! ```
//!
//! A wait is reported when it is at least `threshold_ns`, at least `median_factor` times the
//! device's median wait, and at least `min_passed` other requests were dispatched on the
//! device meanwhile. Waits of one device and issuer form one finding (the worst one
//! detailed). Memory: one slot per queued or in-flight request, the dispatches since the
//! oldest open wait, every wait length (for the median) and the long `D` sleeps.

mod blocked;
mod class;
mod iosched;
mod requests;

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap;
use stallscope_model::{
    BlockDev, CpuCoverage, Event, Finding, FindingCause, FindingSeverity, FindingTask,
    SystemContext, Tid, Ts, Window,
};

use self::blocked::{blocked_during, BlockedLog};
use self::class::{Class, CLASSES};
use self::requests::{DeviceSummary, Phase, StartKind, Tracker, Wait, WaitEnd};
use super::fmt::{dur, i};
use crate::evidence::{render, Kept};
use crate::params::{ParamInfo, ParamUnit, Params};
use crate::{Context, Detector, DetectorInfo};

/// Thresholds.
pub static PARAMS: [ParamInfo; 5] = [
    ParamInfo {
        name: "threshold_ns",
        default: 100_000_000,
        unit: ParamUnit::Ns,
        doc: "a wait between insert and dispatch this long is reported",
    },
    ParamInfo {
        name: "median_factor",
        default: 20,
        unit: ParamUnit::Count,
        doc: "the wait must also be at least this many times the device's median wait",
    },
    ParamInfo {
        name: "min_passed",
        default: 1,
        unit: ParamUnit::Count,
        doc: "requests that must have been dispatched on the device during the wait",
    },
    ParamInfo {
        name: "high_ns",
        default: 1_000_000_000,
        unit: ParamUnit::Ns,
        doc: "a wait this long makes the finding high",
    },
    ParamInfo {
        name: "blocked_min_ns",
        default: 10_000_000,
        unit: ParamUnit::Ns,
        doc: "uninterruptible sleeps overlapping the wait by this much are named",
    },
];

/// Description.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "dispatch-starvation",
    summary: "a block request waits in the I/O scheduler while others are dispatched past it",
    explanation: EXPLANATION,
    // Any block event: the engine records only the first block event name it sees (one
    // seen-bit for every kind it does not number), so every name must satisfy the need.
    needs: &[&["block_rq_issue"], &["block_rq_insert", "block_bio_queue"]],
    optional: &[
        "block_rq_complete",
        "block_rq_requeue",
        "block_bio_backmerge",
        "block_bio_frontmerge",
        "block_message",
        "sched_switch",
        "sched_waking",
    ],
    record_command: "stallscope record --events sched,block,block:block_getrq -o trace.dat -- COMMAND   (or: blktrace -d DEV; or perf record -e 'block:*' -e 'sched:*' -a -- COMMAND)",
    params: &PARAMS,
};

const EXPLANATION: &str = r#"# dispatch-starvation

## What it finds
A block request that sat in the I/O scheduler — from its insert (`I`, `block_rq_insert`)
to its dispatch to the driver (`D`, `block_rq_issue`) — for at least `threshold_ns`
(default 100 ms) and at least `median_factor` (default 20) times the device's median wait,
while at least `min_passed` (default 1) other requests were dispatched on the same device.
A wait of at least `high_ns` is reported whatever the rest of the trace shows: a pasted
`blkparse` excerpt of one request has no device median and no other dispatch.
A dispatched request's wait is btt's phase for that dispatch, measured from the same
events exactly as `stallscope iolat` and `btt -A` measure it: the longest `I2D` of its
bios, else their `M2D` (bios merged into it without an insert), else `Q2D` (no I/O
scheduler insert at all); the finding names the phase and the device's maximum of it,
which `iolat` prints. btt measures requests through the `Q`s it accepts: a request whose
`Q` came before the trace began (or was refused because another bio at the same sector
was in flight) has no btt sample.
Its wait is still I2D by the same definition, `D − I` from its own lines, and the finding
says btt does not count it and that blkparse's lines confirm it; without an `I` it is not
measured (`unmeasured_dispatches`). A request merged
into another while waiting ends its wait there, and one still waiting at the end of the
trace is measured up to the last event (from its `I`, else `G`, else `Q`; after a requeue
from the `R`): btt has no phase for either, so blkparse's lines are the confirmation.

## Cause
With bfq or cfq the scheduler's own messages (`m` lines: bfq's and cfq's trace messages,
recorded by the `blk` tracer or blktrace) say what it did during the wait: which queues it
set in service, how their slices or budgets ended (bfq's reasons: too idle, budget timeout,
budget exhausted, no more requests, preempted) and which queue preempted which. The cause
is `iosched_preemption` when the waiting request's queue or the queues served were
preempted during the wait (the preempting queue named), `iosched_not_served` when the
messages show the scheduler serving other queues and never the waiting one,
`sync_over_async` when no messages were recorded and an async request waited while mostly
sync requests were dispatched (the scheduler's preference for sync I/O), and
`context_not_recorded` otherwise: the cause then needs the scheduler's messages, recorded
with `echo blk > /sys/kernel/tracing/current_tracer; echo 1 >
/sys/block/DEV/trace/enable` (or `blktrace -d /dev/DEV`).

Each finding names the device (and its name and I/O scheduler when the trace carries
system context, or `bfq` when the scheduler's own trace messages say so), the request
(sector, length, operation and flags), the task that issued it (role `issuer`: the task
that queued the bio — a flusher kworker for writeback — and the inserter when another
task inserted it), the Q/I/D/C times, the wait, how many requests were dispatched past it
by class (sync/async, read/write, meta, flush) and by issuer (role `culprit`), the tasks
blocked in uninterruptible sleep (`D` state, role `blocked`) for at least `blocked_min_ns`
(default 10 ms) during the wait when scheduler events are present, and the evidence lines
including the I/O scheduler's messages (`m` lines) around the dispatch. Waits of the same
device and issuer are one finding; the worst is detailed, the count is a measure.

## Why it matters
A request held back in the scheduler holds back everything waiting for it: an fsync,
a journal commit, a page-cache writeback that throttles writers, or a read an
application is blocked on. Schedulers that serve queues in turns (bfq's budgets and
idling on sync queues, its low share for async writeback) or that favour reads or sync
I/O (mq-deadline's `writes_starved`, kyber's domain tokens) can leave one class waiting
for hundreds of milliseconds while the device is busy with another.

## How to confirm
`stallscope iolat` or `btt -A` on the same file: the finding's wait is one of their I2D
(M2D, Q2D) samples, and the finding quotes their maximum on the device. For a request btt
has no sample of, find the sector in `blkparse` output (`grep ' SECTOR + '`) and look at
the lines between its `I` and `D`. Try the workload with another
scheduler (`echo mq-deadline > /sys/block/DEV/queue/scheduler`) or, for bfq, with
`iosched/slice_idle` = 0 or `low_latency` = 0, and compare.

## Limits
Requests are matched by device and start sector, as btt does; two requests at the same
sector in flight, lost events or a trace that starts mid-request can mis-pair them (such
requests are simply not reported). Zero-length flushes are counted as dispatches but never
measured; they are attributed to the task that queued the latest preflush bio on the device
(the flush machinery's kworker dispatches them). Who a kworker writes back for is not in block events: the issuer is the task
that queued the bio. The device's median includes every measured wait of the trace. The
scheduler is known only from recorded system context or its trace messages (bfq prints
them to blktrace; mq-deadline prints none).

## Severity
- **high**: the worst wait is at least `high_ns` (default 1 s), or a task was blocked in
  `D` state during the wait for at least `threshold_ns`.
- **medium**: otherwise, when a request was dispatched or is still waiting.
- **low**: the only long waits ended in a merge (the data went on in another request).
"#;

/// Builds the detector.
pub fn make(p: &Params) -> Box<dyn Detector> {
    Box::new(DispatchStarvation {
        threshold: p.get("threshold_ns"),
        median_factor: p.get("median_factor"),
        min_passed: p.get("min_passed"),
        high: p.get("high_ns"),
        blocked_min: p.get("blocked_min_ns"),
        tracker: Tracker::new(p.get("threshold_ns")),
        blocked: BlockedLog::new(p.get("blocked_min_ns")),
    })
}

struct DispatchStarvation {
    threshold: Ts,
    median_factor: u64,
    min_passed: u64,
    high: Ts,
    blocked_min: Ts,
    tracker: Tracker,
    blocked: BlockedLog,
}

impl Detector for DispatchStarvation {
    fn info(&self) -> &'static DetectorInfo {
        &INFO
    }

    fn wants_transitions(&self) -> bool {
        false
    }

    fn on_event(&mut self, ev: &Event) {
        self.tracker.process(ev);
        self.blocked.process(ev);
    }

    fn finish(self: Box<Self>, cx: &Context<'_>) -> Vec<Finding> {
        let this = *self;
        let (waits, devices) = this.tracker.finish();
        let has_sched = this.blocked.has_sched;
        let blocked = this.blocked.finish();
        let rules = Rules {
            threshold: this.threshold,
            median_factor: this.median_factor,
            min_passed: this.min_passed,
            high: this.high,
            blocked_min: this.blocked_min,
        };
        // On a recording of some CPUs only (one CPU's blktrace file of several) a request
        // still waiting at the end may have been dispatched on a CPU left out: no evidence.
        let partial = *cx.timeline.coverage() != CpuCoverage::All;
        // Group the qualifying waits by device and issuer.
        let mut groups: BTreeMap<(BlockDev, Tid), Vec<Wait>> = BTreeMap::new();
        for w in waits {
            if partial && w.end == WaitEnd::TraceEnd {
                continue;
            }
            let median = devices.get(&w.dev).map_or(0, |d| d.median_wait);
            // a wait of high_ns is reported whatever else the trace shows: an excerpt of one
            // request (a pasted blkparse snippet) has no median and no other dispatch
            let long = w.wait() >= rules.high;
            if !long
                && (w.wait() < rules.threshold
                    || w.wait() < median.saturating_mul(rules.median_factor)
                    || w.passed.total < rules.min_passed)
            {
                continue; // not extreme enough: by the documented rule, not reported
            }
            let issuer = w.req.issuer().map_or(-1, |t| t.pid);
            groups.entry((w.dev, issuer)).or_default().push(w);
        }
        let mut findings: Vec<(Ts, Finding)> = groups
            .into_values()
            .filter_map(|mut g| {
                // worst first; dispatched or still waiting before merged-away
                g.sort_by_key(|w| (w.end == WaitEnd::MergedAway, std::cmp::Reverse(w.wait())));
                let worst = g.first()?;
                let dev = devices.get(&worst.dev).cloned().unwrap_or_default();
                let f = finding(&g, &dev, &blocked, has_sched, &rules, cx);
                Some((worst.wait(), f))
            })
            .collect();
        findings.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then(a.1.window.start_ns.cmp(&b.1.window.start_ns))
        });
        findings.into_iter().map(|(_, f)| f).collect()
    }
}

struct Rules {
    threshold: Ts,
    median_factor: u64,
    min_passed: u64,
    high: Ts,
    blocked_min: Ts,
}

/// `loop0` and `bfq` for a device, from recorded system context or scheduler messages.
fn device_names(
    dev: BlockDev,
    summary: &DeviceSummary,
    system: Option<&SystemContext>,
) -> (Option<String>, Option<String>) {
    let key = format!("{}:{}", dev.major(), dev.minor());
    let ctx = system.and_then(|s| {
        s.block_devices
            .iter()
            .find(|d| d.dev.as_deref() == Some(key.as_str()))
    });
    let name = ctx.map(|c| c.name.clone());
    let scheduler = ctx.and_then(|c| c.scheduler.clone()).or_else(|| {
        (summary.bfq_messages > 0).then(|| "bfq (from its trace messages)".to_string())
    });
    (name, scheduler)
}

/// `52 sync write, 5 flush` — the classes dispatched past, most first.
fn class_counts(by_class: &[u64; CLASSES]) -> String {
    let mut v: Vec<(u64, Class)> = by_class
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(ix, n)| (*n, Class::from_index(ix)))
        .collect();
    v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    v.iter()
        .map(|(n, c)| format!("{n} {}", c.label()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn size(nr_sector: u32) -> String {
    let bytes = u64::from(nr_sector) * 512;
    if bytes % 1024 == 0 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

fn finding(
    group: &[Wait],
    summary: &DeviceSummary,
    blocked: &[blocked::Blocked],
    has_sched: bool,
    rules: &Rules,
    cx: &Context<'_>,
) -> Finding {
    let w = &group[0]; // INVARIANT: groups are never empty (built by push)
    let r = &w.req;
    let wait = w.wait();
    let phase = r.phase.filter(|_| w.end == WaitEnd::Dispatched);
    let class = Class::of(r.rwbs, r.nr_sector);
    let (dev_name, scheduler) = device_names(w.dev, summary, cx.system);
    let issuer = r.issuer();
    let issuer_name = |t: requests::Task| {
        let comm = if t.comm.is_empty() {
            cx.comm(t.pid)
        } else {
            t.comm
        };
        comm.as_str().to_string()
    };
    let mut tasks = Vec::new();
    if let Some(t) = issuer {
        tasks.push(FindingTask {
            pid: t.pid,
            comm: issuer_name(t),
            role: "issuer".into(),
            measures: BTreeMap::from([("starved_requests".to_string(), i(group.len() as u64))]),
        });
    }
    if let Some((_, t)) = r.insert {
        if issuer.is_some_and(|q| q.pid != t.pid) {
            tasks.push(FindingTask {
                pid: t.pid,
                comm: issuer_name(t),
                role: "inserter".into(),
                measures: BTreeMap::new(),
            });
        }
    }
    if let Some(t) = w.dispatcher {
        if issuer.is_some_and(|q| q.pid != t.pid) {
            tasks.push(FindingTask {
                pid: t.pid,
                comm: issuer_name(t),
                role: "dispatcher".into(),
                measures: BTreeMap::new(),
            });
        }
    }
    for (t, n) in w.passed.by_issuer.iter().take(3) {
        tasks.push(FindingTask {
            pid: t.pid,
            comm: issuer_name(*t),
            role: "culprit".into(),
            measures: BTreeMap::from([("passed_requests".to_string(), i(*n))]),
        });
    }
    let blocked_tasks = if has_sched {
        blocked_during(blocked, r.start, w.end_ts, rules.blocked_min)
    } else {
        Vec::new()
    };
    for (pid, comm, ns, _) in blocked_tasks.iter().take(5) {
        tasks.push(FindingTask {
            pid: *pid,
            comm: comm.as_str().to_string(),
            role: "blocked".into(),
            measures: BTreeMap::from([("blocked_ns".to_string(), i(*ns))]),
        });
    }

    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: u64| {
        m.insert(k.to_string(), i(v));
    };
    put("wait_ns", wait);
    put("start_ts_ns", r.start);
    if let Some((ts, _)) = r.queue {
        put("queue_ts_ns", ts);
    }
    if let Some((ts, _)) = r.insert {
        put("insert_ts_ns", ts);
    }
    if w.end == WaitEnd::Dispatched {
        put("dispatch_ts_ns", w.end_ts);
    }
    if let Some(c) = &w.complete {
        put("complete_ts_ns", c.ts);
    }
    put("sector", r.sector);
    put("nr_sector", u64::from(r.nr_sector));
    put("requeues", u64::from(r.requeues));
    put("merges", u64::from(r.merges));
    put(
        "still_waiting_at_end",
        u64::from(w.end == WaitEnd::TraceEnd),
    );
    put("starved_requests", group.len() as u64);
    put("device_median_wait_ns", summary.median_wait);
    put("device_waits", summary.waits as u64);
    put("device_scheduler_messages", summary.messages);
    put("passed_requests", w.passed.total);
    let sum = |f: fn(Class) -> bool| -> u64 {
        (0..CLASSES)
            .filter(|ix| f(Class::from_index(*ix)))
            .map(|ix| w.passed.by_class[ix])
            .sum()
    };
    put("passed_sync", sum(|c| c.sync() && !c.flush()));
    put("passed_async", sum(|c| !c.sync() && !c.flush()));
    put("passed_read", sum(Class::read));
    put("passed_write", sum(Class::write));
    put("passed_meta", sum(|c| c.meta() && !c.flush()));
    put("passed_flush", sum(Class::flush));
    put("blocked_tasks", blocked_tasks.len() as u64);
    if let Some(p) = phase {
        put("iolat_phase_max_ns", summary.phase_max[p.index()]);
        put("counted_by_btt", u64::from(!r.outside_btt));
    }
    put("unmeasured_dispatches", summary.unmeasured);
    put("scheduler_decisions", summary.decisions);
    let d = &w.decisions;
    put("queues_served_during_wait", d.served.values().sum());
    put("preemptions_during_wait", d.preempted.values().sum());
    match (&r.queue_name, issuer) {
        (Some(q), _) => put("issuer_queue_served", d.served_queue(q)),
        (None, Some(t)) => put("issuer_queue_served", d.served_pid(t.pid)),
        (None, None) => {}
    }

    let worst_blocked = blocked_tasks.first().map_or(0, |b| b.2);
    let severity = if wait >= rules.high || worst_blocked >= rules.threshold {
        FindingSeverity::High
    } else if group.iter().all(|w| w.end == WaitEnd::MergedAway) {
        FindingSeverity::Low
    } else {
        FindingSeverity::Medium
    };

    let dev_desc = match (&dev_name, &scheduler) {
        (Some(n), Some(s)) => format!("{} ({n}, {s})", w.dev),
        (Some(n), None) => format!("{} ({n})", w.dev),
        (None, Some(s)) => format!("{} ({s})", w.dev),
        (None, None) => w.dev.to_string(),
    };
    let from = match (phase, r.start_kind) {
        (Some(p), _) => p.start_words(),
        (None, StartKind::Insert) => "insert",
        (None, StartKind::Requeue) => "requeue",
        (None, StartKind::GetRq) => "allocation",
        (None, StartKind::Queue) => "queueing",
    };
    let to = match w.end {
        WaitEnd::Dispatched => "dispatch".to_string(),
        WaitEnd::MergedAway => "its merge into another request".to_string(),
        WaitEnd::TraceEnd => "the end of the trace (never dispatched)".to_string(),
    };
    let by = issuer.map_or(String::new(), |t| {
        format!(", issued by {} (pid {})", issuer_name(t), t.pid)
    });
    let more = if group.len() > 1 {
        format!("; {} such waits", group.len())
    } else {
        String::new()
    };
    let passed = match w.passed.total {
        0 => "with no other dispatch on the device in the trace (an excerpt, or an idle device)"
            .to_string(),
        n => format!(
            "while {n} other requests were dispatched ({})",
            class_counts(&w.passed.by_class)
        ),
    };
    let phase_text = match phase {
        Some(p) if r.outside_btt => format!(
            " ({}; not in btt's sample: btt tracked no Q of it)",
            p.name()
        ),
        Some(p) => format!(" (btt {})", p.name()),
        None => String::new(),
    };
    let title = format!(
        "{} ({}) {} at sector {} on {dev_desc} waited {}{phase_text} between {from} and {to} {passed}{by}{more}",
        class.label(),
        r.rwbs.to_letters(),
        size(r.nr_sector),
        r.sector,
        dur(wait),
    );

    let name = dev_name.as_deref().unwrap_or("DEV");
    let cause = cause_of(w, issuer.map(|t| t.pid), class, name);
    let confirm = match phase {
        Some(p) if r.outside_btt => format!(
            "Confirm in blkparse: the lines of ' {} + {} ' on {} (its I and its D, {} apart); `btt -A` and `stallscope iolat` cannot, as they measure a request only through a Q they accepted, and none was (the Q came before the trace, or another bio at the same sector was in flight; their {} max on {} is {}). ",
            r.sector,
            r.nr_sector,
            w.dev,
            dur(wait),
            p.name(),
            w.dev,
            dur(summary.phase_max[p.index()]),
        ),
        Some(p) => format!(
            "Confirm: `stallscope iolat` (or `btt -A`) on this file shows {} max {} on {} (this wait: {}); in blkparse, the lines of ' {} + {} ' from its {} to its D. ",
            p.name(),
            dur(summary.phase_max[p.index()]),
            w.dev,
            dur(wait),
            r.sector,
            r.nr_sector,
            match p {
                Phase::I2D => "I",
                Phase::M2D => "M",
                Phase::Q2D => "Q",
            },
        ),
        None => format!(
            "btt has no phase for a request that was {}: confirm in blkparse, the lines of ' {} + {} ' on {} from its {from} on. ",
            match w.end {
                WaitEnd::MergedAway => "merged away",
                _ => "never dispatched",
            },
            r.sector,
            r.nr_sector,
            w.dev
        ),
    };
    let mut hint = format!("{} {confirm}", cause.text);
    if scheduler.as_deref().is_some_and(|s| s.starts_with("bfq")) {
        hint.push_str(&format!(
            "bfq serves one queue at a time (budgets, idling on sync queues, a small share for async writeback): compare with `echo mq-deadline > /sys/block/{name}/queue/scheduler`, or try /sys/block/{name}/queue/iosched/slice_idle = 0 or low_latency = 0."
        ));
    } else {
        hint.push_str(&format!(
            "Check the device's I/O scheduler (/sys/block/{name}/queue/scheduler) and compare the workload under another one."
        ));
    }
    if !blocked_tasks.is_empty() {
        hint.push_str(" Tasks in D state during the wait are likely waiting for this request or for what queued behind it.");
    }

    // Evidence: the request's own events, the first dispatches past it, scheduler
    // messages, and the longest D sleeps.
    let passed_events: Vec<Event> = w.passed.first.iter().map(|d| d.event(w.dev)).collect();
    let mut refs: Vec<&Kept> = r.kept.iter().collect();
    refs.extend(w.end_event.iter());
    refs.extend(w.complete.iter());
    refs.extend(passed_events.iter());
    refs.extend(w.messages.iter());
    refs.extend(blocked_tasks.iter().take(2).map(|b| b.3));
    let cpus: BTreeSet<_> = r
        .kept
        .iter()
        .chain(w.end_event.iter())
        .map(|e| e.cpu)
        .collect();
    Finding {
        cause: Some(cause),
        detector: INFO.id.to_string(),
        severity,
        title,
        window: Window {
            start_ns: r.start,
            end_ns: w.end_ts,
        },
        cpus: cpus.into_iter().collect(),
        tasks: dedup_tasks(tasks),
        measures: m,
        evidence: render(cx, &refs),
        hint,
    }
}

/// Why the request `w` (issued by `issuer`, of `class`) waited: the scheduler's decisions
/// during the wait when its messages were recorded, else what was dispatched past it.
fn cause_of(w: &Wait, issuer: Option<Tid>, class: Class, dev_name: &str) -> FindingCause {
    let own_queue = w.req.queue_name.as_ref();
    let d = &w.decisions;
    let cause = |kind: &str, text: String| FindingCause {
        kind: kind.into(),
        text,
    };
    let served = || match d.top_served(3) {
        s if s.is_empty() => String::new(),
        s => format!(" Queues set in service during the wait: {s}."),
    };
    let expiries = || match d.expiries() {
        e if e.is_empty() => String::new(),
        e => format!(" Slices/budgets ended: {e}."),
    };
    let own = match own_queue {
        Some(q) => d.served_queue(q),
        None => issuer.map_or(0, |p| d.served_pid(p)),
    };
    let own_text = || match (own_queue, issuer) {
        (Some(q), _) if own == 0 => {
            format!(" Its queue {q} (which dispatched it) was not set in service before.")
        }
        (Some(q), _) => format!(" Its queue {q} (which dispatched it) was set in service {own}×."),
        (None, Some(p)) if own == 0 => {
            format!(" No queue of the issuer (pid {p}) was set in service.")
        }
        (None, Some(p)) => format!(" The issuer's queue (pid {p}) was set in service {own}×."),
        (None, None) => String::new(),
    };
    if let Some((victim, by, n)) = d.main_preemption() {
        let by = by.map_or("the next queue".to_string(), |q| q.to_string());
        return cause(
            "iosched_preemption",
            format!(
                "The I/O scheduler preempted {victim} in favour of {by} ({n}× during the wait, {} preemptions in all).{}{}{}",
                d.preempted.values().sum::<u64>(),
                own_text(),
                served(),
                expiries()
            ),
        );
    }
    if !d.is_empty() {
        return cause(
            "iosched_not_served",
            format!(
                "The I/O scheduler served other queues for most of the wait.{}{}{}",
                own_text(),
                served(),
                expiries()
            ),
        );
    }
    let sync_passed: u64 = (0..CLASSES)
        .filter(|ix| {
            let c = Class::from_index(*ix);
            c.sync() && !c.flush()
        })
        .map(|ix| w.passed.by_class[ix])
        .sum();
    if !class.sync() && w.passed.total > 0 && sync_passed * 2 > w.passed.total {
        return cause(
            "sync_over_async",
            format!(
                "An async request waited while {sync_passed} of the {} requests dispatched past it were sync: the I/O scheduler favours sync I/O. Its own trace messages (which queue it served, why slices ended) were not recorded: `echo blk > /sys/kernel/tracing/current_tracer; echo 1 > /sys/block/{dev_name}/trace/enable` (or blktrace) records them.",
                w.passed.total
            ),
        );
    }
    cause(
        "context_not_recorded",
        format!(
            "The I/O scheduler's decisions during the wait were not recorded (no bfq/cfq `m` messages on the device; mq-deadline and kyber print none): record them with `echo blk > /sys/kernel/tracing/current_tracer; echo 1 > /sys/block/{dev_name}/trace/enable` (or blktrace) to see which queue it served instead."
        ),
    )
}

/// Drops repeated (pid, role) entries, keeping the first.
fn dedup_tasks(tasks: Vec<FindingTask>) -> Vec<FindingTask> {
    let mut seen: FxHashMap<(Tid, String), ()> = FxHashMap::default();
    tasks
        .into_iter()
        .filter(|t| seen.insert((t.pid, t.role.clone()), ()).is_none())
        .collect()
}
