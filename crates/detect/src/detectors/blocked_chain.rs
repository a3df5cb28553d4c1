//! `blocked-chain`: a task blocked (D) for long, followed back through who woke it to the
//! root of the wait — a block request slow in the I/O scheduler or the device, a work item,
//! an interrupt, a lock holder that ran instead of sleeping, or the edge of the trace.
//!
//! State while the trace runs: [`SleepTracker`] (every sleep that ends and its waker; only
//! sleeps of at least `hop_min_ns` kept), with a kept copy of each kept sleep's switch-out
//! and wakeup (the evidence), and a [`BlockTracker`] whose completed requests of at least
//! `hop_min_ns` from queue to completion are kept by (device, sector, completion time).
//!
//! At the end, for each victim (a `D` sleep of at least `threshold_ns`, not the idle `I`
//! state; `S` too when `include_s` is 1) the walk goes:
//!
//! ```text
//!   no wakeup recorded                        → root: wakeup not recorded (dropped switch)
//!   waker just completed a block request      → root: that request (I2D vs D2C)
//!   waker ran a work item                     → hop: the kworker and its function; the item
//!        queued right after a block completion  → root: that request
//!        else                                   → root: the work item (queue → execute)
//!   waker in an interrupt / softirq / idle    → root: interrupt on that CPU
//!   waker asleep since before the trace       → root: left the trace
//!   waker slept in D during the sleep         → hop: its longest such sleep, walked again
//!   otherwise                                 → root: the waker, runnable (starved of CPU) or
//!                                               running while it held it
//! ```
//!
//! Victims whose chains end at the same kind of root on the same device (or task, or work
//! function) are one finding: the count, and the worst (longest) chain hop by hop.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use stallscope_model::{
    Event, EventKind, Finding, FindingCause, FindingSeverity, FindingTask, PrevState, Tid, Ts,
    Window,
};
use stallscope_timeline::block::{BlockTracker, CompletedRequest};
use stallscope_timeline::sleeps::{Sleep, SleepTracker, WakeCause, WakeContext};
use stallscope_timeline::wakeups::WakeupSelector;
use stallscope_timeline::workers::WorkFn;
use stallscope_timeline::{TaskState, Transition};

use super::fmt::{dur, i};
use crate::evidence::{keep, render, Kept};
use crate::params::{ParamInfo, ParamUnit, Params};
use crate::{Context, Detector, DetectorInfo};

/// Thresholds.
pub static PARAMS: [ParamInfo; 5] = [
    ParamInfo {
        name: "threshold_ns",
        default: 500_000_000,
        unit: ParamUnit::Ns,
        doc: "an uninterruptible sleep this long is followed back to its root",
    },
    ParamInfo {
        name: "high_ns",
        default: 1_000_000_000,
        unit: ParamUnit::Ns,
        doc: "a blocked sleep this long with a root in the trace makes the finding high",
    },
    ParamInfo {
        name: "hop_min_ns",
        default: 1_000_000,
        unit: ParamUnit::Ns,
        doc: "sleeps and requests shorter than this are not kept as hops",
    },
    ParamInfo {
        name: "include_s",
        default: 0,
        unit: ParamUnit::Count,
        doc: "1: interruptible (S) sleeps are victims too",
    },
    ParamInfo {
        name: "max_hops",
        default: 8,
        unit: ParamUnit::Count,
        doc: "hops followed per chain",
    },
];

/// Description.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "blocked-chain",
    summary: "a task blocked for long, followed through its wakers to the request, work item or interrupt at the root",
    explanation: EXPLANATION,
    needs: &[&["sched_switch"], &["sched_waking", "sched_wakeup"]],
    optional: &[
        "block_rq_insert",
        "block_rq_issue",
        "block_rq_complete",
        "workqueue_queue_work",
        "workqueue_execute_start",
        "workqueue_execute_end",
        "irq_handler_entry",
        "softirq_entry",
    ],
    record_command: "stallscope record --stacks --events chain -o trace.dat -- COMMAND   (or: perf record -a -e 'sched:sched_switch/call-graph=fp/' -e sched:sched_waking -e 'block:block_rq_*' -e 'workqueue:workqueue_*' -e 'irq:*' -- COMMAND)",
    params: &PARAMS,
};

const EXPLANATION: &str = r#"# blocked-chain

## What it finds
A task that slept uninterruptibly (`D`, the state of `sched_switch`'s `prev_state`) for at
least `threshold_ns` (default 500 ms; interruptible `S` sleeps too when `include_s` is 1),
and why, followed back hop by hop (at most `max_hops`, default 8) from the wakeup
that ended the sleep (`sched_waking`, else `sched_wakeup`: the task whose context recorded
it is the waker):

- the waker had just completed a block request (`block_rq_complete` on its CPU at most
  1 ms before the wakeup): the root is that request, with its insert, dispatch and
  completion times and where its time went — the I/O scheduler (insert → dispatch, btt's
  I2D) or the driver and device (dispatch → complete, D2C);
- the waker was a kworker running a work item (`workqueue_execute_start` … `_end`): a hop
  naming the function; when the item was queued right after a block completion on the
  queuing CPU (an I/O completion deferred to a workqueue), the root is that request, else
  the work item itself (queued by whom, how long it waited for a worker: see `worker-flood`);
- the waker was an interrupt, a softirq or the idle task without a completion before it:
  the root is the interrupt on that CPU;
- the waker is a task that slept in `D` itself during the victim's sleep (it released what
  the victim waited for after its own wait): a hop to its longest such sleep, followed again;
- the waker never slept meanwhile: the root is the waker itself — it held what the victim
  waited for while waiting for a CPU (`holder_runnable`, with how long it was runnable during
  the victim's sleep: see `runqueue-starvation`) or while running (`holder_running`);
- the waker's first event is that wakeup (asleep since before the trace), or the sleep ended
  with no wakeup recorded (a dropped event): the chain leaves the trace, and the finding
  says so instead of guessing.

Victims whose chains end at the same kind of root on the same device (or the same task or
work function) are one finding with the count and the worst chain, hop by hop, with the time
of each hop, the stack each task slept in when the trace has stacks (`perf record -g` on
`sched_switch`, or `stallscope record --stacks`), and evidence lines for every hop.

## Why it matters
A long uninterruptible sleep is rarely the sleeper's own doing: `open()` waits for a
directory lock held by a task that waits for the log, whose write waits behind a saturated
device. Each layer's tool shows one link; the chain shows them joined, with the time each
link took, so the fix goes to the root (the device, the I/O scheduler, the work queue), not
to the first task that looked slow.

## How to confirm
`perf script` (or `trace-cmd report`) of the victim's `sched_switch` with `prev_state=D`
and its stack, then the `sched_waking` of it: the waker's pid and CPU; the waker's own
`sched_switch`es before that; for a request root, `stallscope iolat FILE` (or `btt`) for the
device's I2D and D2C, and `blkparse` lines of the request's sector. `stallscope sleeps FILE
--pid P` lists every sleep of a task with its waker.

## Limits
A wakeup names the task whose context recorded it; an interrupt that arrived while a task
ran is told apart only when irq/softirq entry/exit events were recorded (else the context is
`task_or_interrupt`). A block completion counts as the cause of a wakeup when it is on the
same CPU at most 1 ms before it. A waker that released several things is followed through
its longest `D` sleep inside the victim's sleep, not each of them. Locks held without
sleeping (spinning) are not seen. Sleeps and requests shorter than `hop_min_ns` are not
kept as hops. Without block events the request roots are device completions unnamed; without
workqueue events a kworker is followed like any task.

## Recording
What the chain needs: `sched_switch` (with a kernel stack, to see where each task slept),
`sched_waking`/`sched_wakeup`, the block request events, the workqueue events and irq /
softirq entry and exit.
- `stallscope record --stacks --events chain -o trace.dat -- COMMAND` (a private tracefs
  instance; `--stacks` sets its `options/stacktrace`);
- `perf record -a -g -e sched:sched_switch -e sched:sched_waking -e 'block:block_rq_*' -e block:block_bio_queue -e 'workqueue:workqueue_*' -e irq:irq_handler_entry -e irq:irq_handler_exit -e irq:softirq_entry -e irq:softirq_exit -- COMMAND`
  (`-e 'sched:sched_switch/call-graph=fp/'` instead of `-g` keeps the stacks to the switches);
- `trace-cmd record -e sched:sched_switch -T -e sched:sched_waking -e block -e workqueue -e irq:irq_handler_entry -e irq:irq_handler_exit -e irq:softirq_entry -e irq:softirq_exit -- COMMAND`
  (`-T`: a kernel stack after each event).

## Severity
- **high**: the worst blocked sleep is at least `high_ns` (default 1 s) and its chain
  reaches a root in the trace (a request, a work item, an interrupt or a running task).
- **medium**: otherwise at least `threshold_ns` with a root in the trace.
- **low**: the chain leaves the trace (no wakeup recorded, or a waker asleep since before).
"#;

/// Builds the detector.
pub fn make(p: &Params) -> Box<dyn Detector> {
    let hop_min = p.get("hop_min_ns");
    let include_s = p.get("include_s") != 0;
    // chains are made of D sleeps (victims and hops); S ones only as victims with include_s
    let states = PrevState::D | if include_s { PrevState::S } else { 0 };
    // the wakeup rule is the engine's (`use_wakeup_rule`), set before the first event
    let tracker = SleepTracker::new(WakeupSelector::preferring_waking(false))
        .keeping_at_least(hop_min)
        .keeping_states(states);
    Box::new(BlockedChain {
        threshold: p.get("threshold_ns"),
        high: p.get("high_ns"),
        hop_min,
        include_s,
        max_hops: usize::try_from(p.get("max_hops")).unwrap_or(8),
        tracker: Some(tracker),
        switched_out: FxHashMap::default(),
        kept: Vec::new(),
        blocks: BlockTracker::new(),
        requests: FxHashMap::default(),
        functions: Vec::new(),
        irq_names: std::collections::BTreeMap::new(),
        runnable: FxHashMap::default(),
        prune_at: PRUNE_MIN,
    })
}

/// The request map is pruned of sectors without a completion in the last
/// [`FLUSH_SEQUENCE_MAX_NS`] when it grows past twice its size after the last pruning (at
/// least this).
const PRUNE_MIN: usize = 4096;

/// Requests kept per (device, sector).
const REQUESTS_KEPT_PER_SECTOR: usize = 4;

/// A preflush/FUA write's sequence ends with a zero-length completion at its sector at most
/// this long after the data completion the request record was made at.
const FLUSH_SEQUENCE_MAX_NS: Ts = 2_000_000_000;

/// A kept sleep's events, and the request whose completion woke it (resolved at the
/// wakeup, while the request is still kept).
struct KeptSleep {
    out: Option<Kept>,
    wake: Option<Kept>,
    request: Option<CompletedRequest>,
}

struct BlockedChain {
    threshold: Ts,
    high: Ts,
    hop_min: Ts,
    include_s: bool,
    max_hops: usize,
    tracker: Option<SleepTracker>,
    /// The last sleeping switch-out of each task.
    switched_out: FxHashMap<Tid, Kept>,
    /// Evidence of the tracker's kept sleeps, by index.
    kept: Vec<KeptSleep>,
    blocks: BlockTracker,
    /// Size of `requests` that triggers the next pruning.
    prune_at: usize,
    /// Runnable waits of at least `hop_min` by task: (start, end).
    runnable: FxHashMap<Tid, Vec<(Ts, Ts)>>,
    /// Interrupt names by line (filled at the end).
    irq_names: std::collections::BTreeMap<u32, String>,
    /// The tracker's work functions (filled at the end).
    functions: Vec<WorkFn>,
    /// Completed requests at least `hop_min` long, by (device, sector): the latest few.
    requests: FxHashMap<(u64, u64), Vec<CompletedRequest>>,
}

/// Where a chain ends.
#[derive(Clone, Debug)]
enum Root {
    /// A block request (None when it was not kept: shorter than `hop_min`, or not in the
    /// block events).
    Request {
        dev: u64,
        sector: u64,
        complete_ns: Ts,
        request: Option<Box<CompletedRequest>>,
    },
    /// A work item not caused by a completion.
    WorkItem {
        function: u32,
        kworker: Tid,
        queued_ns: Option<Ts>,
        started_ns: Ts,
        queued_by: Option<Tid>,
    },
    /// An interrupt, softirq or the idle task with no completion before.
    Interrupt {
        cpu: u32,
        context: WakeContext,
        irq: Option<u32>,
    },
    /// The waker did not sleep in D meanwhile: it ran, or waited for a CPU
    /// (`runnable_ns` of the sleeper's wait).
    Running { pid: Tid, runnable_ns: Ts },
    /// The waker was asleep since before the trace.
    BeforeTrace { pid: Tid },
    /// The sleep ended with no wakeup recorded.
    NoWakeup,
    /// The walk stopped (hop limit or a cycle).
    HopLimit,
}

impl Root {
    /// Whether the chain reached a root inside the trace.
    fn in_trace(&self) -> bool {
        !matches!(
            self,
            Root::BeforeTrace { .. } | Root::NoWakeup | Root::HopLimit
        )
    }

    /// Grouping key: kind and device / task / function.
    fn key(&self) -> (u8, u64, u8) {
        match self {
            Root::Request {
                dev,
                request,
                complete_ns,
                ..
            } => {
                let _ = (request, complete_ns);
                (0, *dev, 0)
            }
            Root::WorkItem { function, .. } => (1, u64::from(*function), 0),
            Root::Interrupt { cpu, .. } => (2, u64::from(*cpu), 0),
            Root::Running { pid, .. } => (3, u64::try_from(*pid).unwrap_or(0), 0),
            Root::BeforeTrace { .. } => (4, 0, 0),
            Root::NoWakeup => (5, 0, 0),
            Root::HopLimit => (6, 0, 0),
        }
    }
}

/// Where a request's time went, from its first queueing to the completion that woke the
/// chain.
#[derive(Clone, Copy, Debug, Default)]
struct Phases {
    /// Queue → insert: before the I/O scheduler (request allocation, waiting for a tag, the
    /// flush machinery's preflush).
    before_insert: Option<Ts>,
    /// Insert → first dispatch: in the I/O scheduler (btt's I2D).
    in_scheduler: Option<Ts>,
    /// Last dispatch → data completion: driver and device (btt's D2C).
    in_device: Option<Ts>,
    /// Data completion → the flush sequence's final completion (the post-flush).
    post_flush: Option<Ts>,
}

/// Which of [`Phases`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    BeforeInsert,
    InScheduler,
    InDevice,
    PostFlush,
}

impl Phases {
    fn of(r: &CompletedRequest, complete_ns: Ts) -> Phases {
        let span = |a: Option<Ts>, b: Option<Ts>| match (a, b) {
            (Some(a), Some(b)) if b >= a => Some(b - a),
            _ => None,
        };
        Phases {
            before_insert: span(r.queue_ts, r.insert_ts),
            in_scheduler: span(r.insert_ts, r.first_issue_ts),
            in_device: r.device_time(),
            post_flush: (complete_ns > r.complete_ts).then(|| complete_ns - r.complete_ts),
        }
    }

    /// The longest phase and its length (ties: the device).
    fn largest(&self) -> (Phase, Ts) {
        [
            (Phase::InDevice, self.in_device),
            (Phase::InScheduler, self.in_scheduler),
            (Phase::BeforeInsert, self.before_insert),
            (Phase::PostFlush, self.post_flush),
        ]
        .into_iter()
        .filter_map(|(p, v)| v.map(|v| (p, v)))
        .fold(
            (Phase::InDevice, 0),
            |best, x| if x.1 > best.1 { x } else { best },
        )
    }
}

/// `24627.753440739` (seconds, as perf prints them).
fn secs(ns: Ts) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

fn dev_text(dev: u64) -> String {
    format!("{},{}", dev >> 20, dev & 0xf_ffff)
}

/// One hop: a sleep (index into the tracker's sleeps).
struct Chain {
    hops: Vec<usize>,
    /// The waker of the last hop ran a work item (function), shown on that hop.
    root: Root,
}

impl BlockedChain {
    fn is_victim(&self, s: &Sleep) -> bool {
        let b = s.state.bits();
        let blocked = b & PrevState::D != 0 || (self.include_s && b & PrevState::S != 0);
        blocked && b & PrevState::I == 0 && s.end_ns.saturating_sub(s.start_ns) >= self.threshold
    }

    /// Follows `first` back to its root.
    fn walk(
        &self,
        sleeps: &[Sleep],
        by_pid: &FxHashMap<Tid, Vec<usize>>,
        before: &FxHashMap<Tid, Ts>,
        first: usize,
    ) -> Chain {
        let mut hops = vec![first];
        let mut cur = first;
        loop {
            let s = &sleeps[cur];
            let Some(w) = s.waker else {
                return Chain {
                    hops,
                    root: Root::NoWakeup,
                };
            };
            match w.after {
                Some(WakeCause::BlockComplete {
                    dev, sector, ts_ns, ..
                }) => {
                    return Chain {
                        hops,
                        root: self.request_root(dev, sector, ts_ns, cur),
                    };
                }
                Some(WakeCause::WorkItem {
                    queued_after_complete: Some((dev, sector, _, ts)),
                    ..
                }) => {
                    return Chain {
                        hops,
                        root: self.request_root(dev, sector, ts, cur),
                    };
                }
                // a work item not queued by a completion: its worker is followed like a
                // task (it may have slept itself before waking this one)
                Some(WakeCause::WorkItem { .. } | WakeCause::AfterOwnWait { .. }) | None => {}
            }
            if matches!(
                w.context,
                WakeContext::Interrupt | WakeContext::Softirq | WakeContext::Idle
            ) || w.pid == 0
            {
                return Chain {
                    hops,
                    root: Root::Interrupt {
                        cpu: w.cpu,
                        context: w.context,
                        irq: w.irq,
                    },
                };
            }
            if before
                .get(&w.pid)
                .is_some_and(|&t| t >= s.start_ns && t <= s.end_ns)
            {
                return Chain {
                    hops,
                    root: Root::BeforeTrace { pid: w.pid },
                };
            }
            // the waker's longest D sleep that ended inside this one
            let next = by_pid.get(&w.pid).and_then(|v| {
                v.iter()
                    .copied()
                    .filter(|&k| {
                        let o = &sleeps[k];
                        o.end_ns >= s.start_ns
                            && o.end_ns <= s.end_ns
                            && o.state.is_uninterruptible()
                    })
                    .max_by_key(|&k| (sleeps[k].end_ns - sleeps[k].start_ns, k))
            });
            match next {
                Some(k) if hops.contains(&k) || hops.len() >= self.max_hops => {
                    return Chain {
                        hops,
                        root: Root::HopLimit,
                    };
                }
                Some(k) => {
                    hops.push(k);
                    cur = k;
                }
                None => {
                    let root = match w.after {
                        Some(WakeCause::WorkItem {
                            function,
                            queued_ns,
                            queued_by,
                            started_ns,
                            ..
                        }) => Root::WorkItem {
                            function,
                            kworker: w.pid,
                            queued_ns,
                            queued_by,
                            started_ns,
                        },
                        _ => Root::Running {
                            pid: w.pid,
                            runnable_ns: self.runnable_within(w.pid, s.start_ns, s.end_ns),
                        },
                    };
                    return Chain { hops, root };
                }
            }
        }
    }

    /// How long `pid` was runnable (waits of at least `hop_min`) inside `[a, b]`.
    fn runnable_within(&self, pid: Tid, a: Ts, b: Ts) -> Ts {
        self.runnable.get(&pid).map_or(0, |v| {
            v.iter()
                .map(|&(s, e)| e.min(b).saturating_sub(s.max(a)))
                .sum()
        })
    }

    fn request_root(&self, dev: u64, sector: u64, complete_ns: Ts, at: usize) -> Root {
        Root::Request {
            dev,
            sector,
            complete_ns,
            request: self.kept[at].request.map(Box::new),
        }
    }
}

/// The request whose completion at `complete_ns` woke a task: the one completed then, or a
/// preflush/FUA write whose data completed before and whose flush sequence ended then (its
/// final zero-length completion).
fn find_request(
    requests: &FxHashMap<(u64, u64), Vec<CompletedRequest>>,
    dev: u64,
    sector: u64,
    nr_sector: u32,
    complete_ns: Ts,
) -> Option<CompletedRequest> {
    requests.get(&(dev, sector)).and_then(|v| {
        v.iter()
            .rev()
            .find(|r| {
                r.complete_ts == complete_ns
                    || (nr_sector == 0
                        && r.nr_sector > 0
                        && r.complete_ts < complete_ns
                        && complete_ns - r.complete_ts <= FLUSH_SEQUENCE_MAX_NS)
            })
            .copied()
    })
}

/// `comm (pid)`.
fn who(cx: &Context<'_>, pid: Tid) -> String {
    if pid == 0 {
        return "the idle task".into();
    }
    let c = cx.comm(pid);
    if c.is_empty() {
        format!("pid {pid}")
    } else {
        format!("{} ({pid})", c.as_str())
    }
}

/// A work function's name.
fn function_name(cx: &Context<'_>, functions: &[WorkFn], index: u32) -> String {
    let addr = match functions.get(index as usize) {
        Some(WorkFn::Addr(a)) => *a,
        Some(WorkFn::Name(n)) => return n.clone(),
        None => return "?".into(),
    };
    if let Some(n) = cx.symbolizer.name(addr) {
        return n.to_string();
    }
    if let Some(n) = cx
        .kallsyms
        .and_then(|k| stallscope_timeline::workers::symbol_at(k, addr))
    {
        return n.to_string();
    }
    format!("{addr:#x}")
}

/// Where a sleep was, from its switch-out's stack: the first frames that are not scheduler
/// mechanics.
fn sleep_site(cx: &Context<'_>, out: Option<&Kept>) -> Option<String> {
    let out = out?;
    let (chain, pid) = cx.stacks.get(out.span)?;
    let frames = cx.symbolizer.frames(chain, pid);
    let place: Vec<&str> = frames
        .iter()
        .map(String::as_str)
        .filter(|f| !crate::stacks::is_mechanism(f) && !is_sleep_mechanism(f))
        .take(3)
        .collect();
    (!place.is_empty()).then(|| place.join(" ← "))
}

/// Wait primitives skipped when naming where a task slept.
fn is_sleep_mechanism(name: &str) -> bool {
    let n = name.split('.').next().unwrap_or(name);
    matches!(
        n,
        "schedule_preempt_disabled"
            | "schedule_timeout"
            | "io_schedule"
            | "io_schedule_timeout"
            | "__wait_for_common"
            | "wait_for_completion"
            | "rwsem_down_write_slowpath"
            | "rwsem_down_read_slowpath"
            | "__down_common"
            | "__mutex_lock"
            | "__mutex_lock_slowpath"
    )
}

impl BlockedChain {
    fn root_text(&self, cx: &Context<'_>, root: &Root) -> (String, &'static str) {
        match root {
            Root::Request {
                dev,
                sector,
                complete_ns,
                request: Some(r),
            } => {
                let ph = Phases::of(r, *complete_ns);
                let issuer = r
                    .queuer
                    .or(r.inserter)
                    .map(|t| {
                        let c = t.comm.as_str().to_string();
                        let c = if c.is_empty() { cx.comm(t.pid).as_str().to_string() } else { c };
                        format!(" issued by {c} ({})", t.pid)
                    })
                    .unwrap_or_default();
                let mut s = format!(
                    "request {sector}+{} {} on {}{issuer}",
                    r.nr_sector,
                    r.rwbs.to_letters(),
                    dev_text(*dev)
                );
                if r.queue_ts.is_none() {
                    s.push_str(" (queued before the trace began)");
                }
                let mut parts: Vec<String> = Vec::new();
                if let Some(v) = ph.before_insert {
                    parts.push(format!("{} from queueing to insert", dur(v)));
                }
                match ph.in_scheduler {
                    Some(v) => parts.push(format!("{} between insert and dispatch", dur(v))),
                    None => parts.push("no insert recorded (no I/O scheduler, or before the trace)".into()),
                }
                if let Some(v) = ph.in_device {
                    parts.push(format!("{} between dispatch and completion", dur(v)));
                }
                if let Some(v) = ph.post_flush {
                    parts.push(format!("{} more until its flush sequence completed (post-flush)", dur(v)));
                }
                s.push_str(&format!(": {}", parts.join(", ")));
                let (phase, _) = ph.largest();
                let kind = match phase {
                    Phase::InScheduler => {
                        s.push_str("; its time went to the I/O scheduler's queue");
                        "request_in_scheduler"
                    }
                    Phase::InDevice => {
                        s.push_str("; its time went to the driver and device (saturated or slow), not the I/O scheduler");
                        "request_in_device"
                    }
                    Phase::BeforeInsert => {
                        s.push_str("; its time went before the I/O scheduler (the flush machinery's preflush, or waiting for a request tag), not the I/O scheduler's queue");
                        "request_before_scheduler"
                    }
                    Phase::PostFlush => {
                        s.push_str("; its time went to the cache flush after the data (post-flush), not the I/O scheduler's queue");
                        "request_flush"
                    }
                };
                (s, kind)
            }
            Root::Request {
                dev,
                sector,
                complete_ns,
                request: None,
            } => (
                format!(
                    "the completion of request at sector {sector} on {} at {}: less than {} from queue to completion, or its earlier events are not in the trace",
                    dev_text(*dev),
                    secs(*complete_ns),
                    dur(self.hop_min)
                ),
                "request_completion",
            ),
            Root::WorkItem {
                function,
                kworker,
                queued_ns,
                queued_by,
                started_ns,
            } => {
                let mut s = format!(
                    "work item {} run by {}",
                    function_name(cx, &self.functions, *function),
                    who(cx, *kworker)
                );
                if let (Some(q), Some(by)) = (queued_ns, queued_by) {
                    let waited = started_ns.saturating_sub(*q);
                    s.push_str(&format!(
                        ", queued by {} at {}, started {} later{}",
                        who(cx, *by),
                        secs(*q),
                        dur(waited),
                        if waited >= self.hop_min {
                            " (waiting for a kworker: see worker-flood)"
                        } else {
                            ""
                        }
                    ));
                } else {
                    s.push_str(" (its queueing is not in the trace)");
                }
                (s, "work_item")
            }
            Root::Interrupt { cpu, context, irq } => (
                format!(
                    "an interrupt on CPU {cpu} ({}) with no block completion just before it",
                    match (context, irq) {
                        (WakeContext::Softirq, _) => "softirq".to_string(),
                        (WakeContext::Idle, _) => "recorded by the idle task".to_string(),
                        (_, Some(n)) => match self.irq_names.get(n) {
                            Some(name) => format!("hard irq {n}, {name}"),
                            None => format!("hard irq {n}"),
                        },
                        _ => "hard irq".to_string(),
                    }
                ),
                "interrupt",
            ),
            Root::Running { pid, runnable_ns } if *runnable_ns > 0 => (
                format!(
                    "{} woke it without sleeping in D during the wait, and was runnable (waiting for a CPU) for {} of it: the holder of what the sleeper waited for was starved of CPU (see runqueue-starvation)",
                    who(cx, *pid),
                    dur(*runnable_ns)
                ),
                "holder_runnable",
            ),
            Root::Running { pid, .. } => (
                format!(
                    "{} woke it without sleeping in D or waiting for a CPU (≥ {}) during the wait: it held what the sleeper waited for while running",
                    who(cx, *pid),
                    dur(self.hop_min)
                ),
                "holder_running",
            ),
            Root::BeforeTrace { pid } => (
                format!(
                    "{} was asleep since before the trace began: the chain leaves the trace (record longer, starting earlier)",
                    who(cx, *pid)
                ),
                "left_trace",
            ),
            Root::NoWakeup => (
                "the sleep ended with no wakeup recorded (the sched_waking / sched_wakeup was dropped or not recorded): the chain cannot be followed".into(),
                "wakeup_not_recorded",
            ),
            Root::HopLimit => (
                format!("the walk stopped after {} hops (or at a cycle)", self.max_hops),
                "hop_limit",
            ),
        }
    }

    /// One hop in words.
    fn hop_text(&self, cx: &Context<'_>, s: &Sleep, k: &KeptSleep) -> String {
        let mut t = format!(
            "{} blocked {} in {}",
            who(cx, s.pid),
            dur(s.end_ns.saturating_sub(s.start_ns)),
            s.state
        );
        if let Some(site) = sleep_site(cx, k.out.as_ref()) {
            t.push_str(&format!(" in {site}"));
        }
        match s.waker {
            Some(w) => {
                t.push_str(&format!(" ← woken by {}", who(cx, w.pid)));
                match w.context {
                    WakeContext::Interrupt => t.push_str(" in an interrupt"),
                    WakeContext::Softirq => t.push_str(" in a softirq"),
                    _ => {}
                }
                t.push_str(&format!(" on CPU {}", w.cpu));
                if let Some(WakeCause::WorkItem { function, .. }) = w.after {
                    t.push_str(&format!(
                        " running {}",
                        function_name(cx, &self.functions, function)
                    ));
                }
            }
            None => t.push_str(" ← no wakeup recorded"),
        }
        t
    }
}

impl Detector for BlockedChain {
    fn info(&self) -> &'static DetectorInfo {
        &INFO
    }

    fn ignores_quiet_transitions(&self) -> bool {
        true
    }

    fn use_wakeup_rule(&mut self, rule: WakeupSelector) {
        self.tracker = self.tracker.take().map(|t| t.choosing_wakeups(rule));
    }

    /// Runnable waits (a woken or preempted task waiting for a CPU) of at least
    /// `hop_min`: a waker that did not sleep may have waited for a CPU instead.
    fn on_transition(&mut self, t: &Transition, _ev: &Event) {
        if let Transition::State {
            ts,
            tid,
            from: TaskState::Runnable { since, .. },
            to: TaskState::Running { .. },
        } = *t
        {
            if ts.saturating_sub(since) >= self.hop_min {
                self.runnable.entry(tid).or_default().push((since, ts));
            }
        }
    }

    fn event_kinds(&self) -> u32 {
        use crate::engine::kind;
        kind::SWITCH | kind::WAKING | kind::WAKEUP | kind::WAKEUP_NEW | kind::BLOCK | kind::GENERIC
    }

    fn on_event(&mut self, ev: &Event) {
        let Some(tracker) = self.tracker.as_mut() else {
            return;
        };
        let before = tracker.sleeps().len();
        tracker.push(ev);
        let after = tracker.sleeps().len();
        for k in before..after {
            let s = tracker.sleeps()[k];
            let completion = match s.waker.and_then(|w| w.after) {
                Some(WakeCause::BlockComplete {
                    dev,
                    sector,
                    nr_sector,
                    ts_ns,
                }) => Some((dev, sector, nr_sector, ts_ns)),
                Some(WakeCause::WorkItem {
                    queued_after_complete,
                    ..
                }) => queued_after_complete,
                Some(WakeCause::AfterOwnWait { .. }) | None => None,
            };
            let request = completion.and_then(|(dev, sector, nr, ts)| {
                find_request(&self.requests, dev, sector, nr, ts)
            });
            self.kept.push(KeptSleep {
                out: self.switched_out.remove(&s.pid),
                wake: s.waker.is_some().then(|| keep(ev)),
                request,
            });
        }
        match &ev.kind {
            EventKind::Switch(s)
                if s.prev.pid != 0
                    && !s.prev_state.is_runnable()
                    && tracker.keeps_state(s.prev_state) =>
            {
                self.switched_out.insert(s.prev.pid, keep(ev));
            }
            EventKind::Block(_) => {
                let (requests, hop_min) = (&mut self.requests, self.hop_min);
                self.blocks.process(ev, &mut |r: &CompletedRequest| {
                    let start = r.queue_ts.or(r.insert_ts).or(r.first_issue_ts);
                    if start.is_none_or(|s| r.complete_ts.saturating_sub(s) >= hop_min) {
                        let dev = (u64::from(r.dev.major()) << 20) | u64::from(r.dev.minor());
                        let v = requests.entry((dev, r.sector)).or_default();
                        if v.len() == REQUESTS_KEPT_PER_SECTOR {
                            v.remove(0);
                        }
                        v.push(*r);
                    }
                });
                if self.requests.len() > self.prune_at {
                    let now = ev.ts;
                    self.requests.retain(|_, v| {
                        v.last().is_some_and(|r| {
                            now.saturating_sub(r.complete_ts) <= FLUSH_SEQUENCE_MAX_NS
                        })
                    });
                    self.prune_at = (self.requests.len() * 2).max(PRUNE_MIN);
                }
            }
            _ => {}
        }
    }

    fn finish(mut self: Box<Self>, cx: &Context<'_>) -> Vec<Finding> {
        let Some(tracker) = self.tracker.take() else {
            return Vec::new();
        };
        let before = tracker.asleep_before_trace().clone();
        self.functions = tracker.work_functions().to_vec();
        self.irq_names = tracker.irq_names().clone();
        let (sleeps, counts) = tracker.finish();
        let mut by_pid: FxHashMap<Tid, Vec<usize>> = FxHashMap::default();
        for (k, s) in sleeps.iter().enumerate() {
            by_pid.entry(s.pid).or_default().push(k);
        }
        // chains of every victim, grouped by root
        let mut groups: BTreeMap<(u8, u64, u8), Vec<Chain>> = BTreeMap::new();
        for (k, s) in sleeps.iter().enumerate() {
            if !self.is_victim(s) {
                continue;
            }
            let chain = self.walk(&sleeps, &by_pid, &before, k);
            groups.entry(chain.root.key()).or_default().push(chain);
        }
        let mut out = Vec::new();
        for chains in groups.values() {
            let len = |c: &Chain| sleeps[c.hops[0]].end_ns - sleeps[c.hops[0]].start_ns;
            let Some(worst) = chains
                .iter()
                .max_by_key(|c| (len(c), std::cmp::Reverse(c.hops[0])))
            else {
                continue;
            };
            let victim = &sleeps[worst.hops[0]];
            let worst_len = len(worst);
            let (root_text, root_kind) = self.root_text(cx, &worst.root);
            let severity = if !worst.root.in_trace() {
                FindingSeverity::Low
            } else if worst_len >= self.high {
                FindingSeverity::High
            } else {
                FindingSeverity::Medium
            };
            let mut victims: Vec<Tid> = chains.iter().map(|c| sleeps[c.hops[0]].pid).collect();
            victims.sort_unstable();
            victims.dedup();
            let hops: Vec<String> = worst
                .hops
                .iter()
                .map(|&k| self.hop_text(cx, &sleeps[k], &self.kept[k]))
                .collect();
            let title = format!(
                "{} ← root: {}{}",
                hops.join(" ← "),
                root_text,
                if chains.len() > 1 {
                    format!(
                        " — the worst of {} sleeps ≥ {} of {} task{} with this kind of root",
                        chains.len(),
                        dur(self.threshold),
                        victims.len(),
                        if victims.len() == 1 { "" } else { "s" }
                    )
                } else {
                    String::new()
                }
            );
            // each victim's longest blocked sleep with this root
            let mut worst_of: BTreeMap<Tid, Ts> = BTreeMap::new();
            for c in chains {
                let e = worst_of.entry(sleeps[c.hops[0]].pid).or_default();
                *e = (*e).max(len(c));
            }
            let chain_text = hops.join(" ← ");
            let mut measures = BTreeMap::new();
            measures.insert("victims".to_string(), i(chains.len() as u64));
            measures.insert("victim_tasks".to_string(), i(victims.len() as u64));
            measures.insert("worst_blocked_ns".to_string(), i(worst_len));
            measures.insert("worst_start_ns".to_string(), i(victim.start_ns));
            measures.insert("hops".to_string(), i(worst.hops.len() as u64));
            for (n, &k) in worst.hops.iter().enumerate() {
                let s = &sleeps[k];
                measures.insert(format!("hop{n}_pid"), i64::from(s.pid));
                measures.insert(format!("hop{n}_blocked_ns"), i(s.end_ns - s.start_ns));
                measures.insert(format!("hop{n}_start_ns"), i(s.start_ns));
                measures.insert(format!("hop{n}_end_ns"), i(s.end_ns));
            }
            if let Root::Request {
                dev,
                sector,
                complete_ns,
                request,
            } = &worst.root
            {
                measures.insert("root_dev".to_string(), i(*dev));
                measures.insert("root_sector".to_string(), i(*sector));
                measures.insert("root_complete_ns".to_string(), i(*complete_ns));
                if let Some(r) = request {
                    let ph = Phases::of(r, *complete_ns);
                    for (k, v) in [
                        ("root_queue_ns", r.queue_ts),
                        ("root_insert_ns", r.insert_ts),
                        ("root_issue_ns", r.first_issue_ts),
                        ("root_data_complete_ns", Some(r.complete_ts)),
                        ("root_q2i_ns", ph.before_insert),
                        ("root_i2d_ns", ph.in_scheduler),
                        ("root_d2c_ns", ph.in_device),
                        ("root_post_flush_ns", ph.post_flush),
                    ] {
                        if let Some(v) = v {
                            measures.insert(k.to_string(), i(v));
                        }
                    }
                }
            }
            for (k, v) in [
                (
                    "trace_sleeps_ended_without_wakeup",
                    counts.ended_without_wakeup,
                ),
                ("trace_tasks_asleep_before_trace", before.len() as u64),
            ] {
                if v > 0 {
                    measures.insert(k.to_string(), i(v));
                }
            }
            let mut tasks: Vec<FindingTask> = Vec::new();
            for (n, &k) in worst.hops.iter().enumerate() {
                let s = &sleeps[k];
                if tasks.iter().any(|t| t.pid == s.pid) {
                    continue;
                }
                // hop_blocked_ns: this hop's sleep; blocked_ns: the task's longest sleep
                // with this kind of root as a victim (when it was one)
                let mut m: BTreeMap<String, i64> =
                    [("hop_blocked_ns".to_string(), i(s.end_ns - s.start_ns))]
                        .into_iter()
                        .collect();
                if let Some(&w) = worst_of.get(&s.pid) {
                    m.insert("blocked_ns".to_string(), i(w));
                }
                tasks.push(FindingTask {
                    pid: s.pid,
                    comm: cx.comm(s.pid).as_str().to_string(),
                    role: if n == 0 { "blocked" } else { "waker" }.into(),
                    measures: m,
                });
            }
            for (&pid, &worst) in &worst_of {
                if !tasks.iter().any(|t| t.pid == pid) {
                    tasks.push(FindingTask {
                        pid,
                        comm: cx.comm(pid).as_str().to_string(),
                        role: "blocked".into(),
                        measures: [("blocked_ns".to_string(), i(worst))].into_iter().collect(),
                    });
                }
            }
            let mut ev: Vec<&Kept> = Vec::new();
            for &k in &worst.hops {
                ev.extend(self.kept[k].out.iter());
                ev.extend(self.kept[k].wake.iter());
            }
            let mut cpus: Vec<u32> = worst.hops.iter().map(|&k| sleeps[k].cpu).collect();
            cpus.extend(
                worst
                    .hops
                    .iter()
                    .filter_map(|&k| sleeps[k].waker.map(|w| w.cpu)),
            );
            cpus.sort_unstable();
            cpus.dedup();
            let cause_text = format!("{chain_text} ← root: {root_text}.");
            let mut hint = format!(
                "{cause_text} Check each hop with `perf script` / `trace-cmd report`: the sched_switch with prev_state=D of the task and the sched_waking of it (its recording task is the waker); `stallscope sleeps FILE --pid PID` lists them."
            );
            if matches!(worst.root, Root::Request { .. }) {
                hint.push_str(" For the request: `stallscope iolat FILE` (btt's I2D and D2C of the device) and blkparse lines of its sector; dispatch-starvation reports it when it waited long in the I/O scheduler.");
            }
            if counts.ended_without_wakeup > 0 {
                hint.push_str(&format!(
                    " {} sleep{} of the trace ended with the task's own next event and no wakeup recorded (dropped sched_switch or sched_waking events; switch_prev_mismatch in the data quality counts the dropped switches): such a sleep ends at that event, and a chain through it stops there (wakeup_not_recorded).",
                    counts.ended_without_wakeup,
                    if counts.ended_without_wakeup == 1 { "" } else { "s" }
                ));
            }
            if cx.stacks.is_empty() {
                hint.push_str(" No stacks were recorded: record `perf record -g` on sched:sched_switch or `stallscope record --stacks` to see where each task slept.");
            }
            out.push(Finding {
                detector: INFO.id.into(),
                severity,
                title,
                window: Window {
                    start_ns: victim.start_ns,
                    end_ns: victim.end_ns,
                },
                cpus,
                tasks,
                measures,
                evidence: render(cx, &ev),
                hint,
                cause: Some(FindingCause {
                    kind: root_kind.into(),
                    text: cause_text,
                }),
            });
        }
        out.sort_by_key(|f| {
            (
                std::cmp::Reverse(f.severity),
                std::cmp::Reverse(f.measures.get("worst_blocked_ns").copied().unwrap_or(0)),
            )
        });
        out
    }
}

#[cfg(test)]
mod tests;
