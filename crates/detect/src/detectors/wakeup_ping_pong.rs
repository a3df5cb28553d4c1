//! `wakeup-ping-pong`: two tasks handing one CPU back and forth at a high rate, and
//! per-CPU context-switch storms.
//!
//! State machine, per CPU:
//!
//! ```text
//!   sched_waking on CPU c (context task A wakes B)      → remembered as c's last wakeup
//!   sched_switch on c: prev P leaves (its run length: from the model's Running state
//!                      that the switch ends), next N enters
//!       N ≠ idle and the last non-idle task A ≠ N left at most max_gap_ns ago
//!           → one handoff A→N of the pair {A, N}: A's run length, whether A had just
//!             woken N, whether A left preempted (R/R+) right after waking N
//!   block_rq_complete on c → c's completed-I/O counter
//!   workqueue_execute_start → the context kworker's work function
//! ```
//!
//! Per CPU: the switch count and rate; per pair of that CPU: handoffs each way, run-length
//! histograms of each side, wake and preemption counts, I/O completions in the pair's window.
//! Pairs that alternate rarely are pruned when a CPU holds more than 4096 pairs.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use stallscope_model::{
    Cpu, Event, EventKind, FieldValue, Finding, FindingCause, FindingSeverity, FindingTask, Tid,
    Ts, Wakeup, Window,
};

use super::fmt::{dur, i, permille, ratio_permille};
use crate::evidence::{keep, render, Kept, KeptCopy, KeptCopySlot};
use crate::hist::LogHist;
use crate::params::{ParamInfo, ParamUnit, Params};
use crate::{Context, Detector, DetectorInfo};
use stallscope_timeline::{TaskState, Transition, WakeupSelector};

/// Thresholds.
pub static PARAMS: [ParamInfo; 12] = [
    ParamInfo {
        name: "min_handoffs",
        default: 1000,
        unit: ParamUnit::Count,
        doc: "handoffs a pair needs to be reported",
    },
    ParamInfo {
        name: "min_rate_per_s",
        default: 1000,
        unit: ParamUnit::PerSecond,
        doc: "handoffs per second (over the pair's active window) to be reported",
    },
    ParamInfo {
        name: "high_rate_per_s",
        default: 5000,
        unit: ParamUnit::PerSecond,
        doc: "handoffs per second that make a ping-pong high",
    },
    ParamInfo {
        name: "sustained_permille",
        default: 500,
        unit: ParamUnit::Count,
        doc: "a ping-pong lasting at least this share of the trace (‰) is sustained; a shorter burst is medium at most",
    },
    ParamInfo {
        name: "max_gap_ns",
        default: 2_000_000,
        unit: ParamUnit::Ns,
        doc: "longest idle gap between two runs still counted as a handoff",
    },
    ParamInfo {
        name: "storm_rate_per_s",
        default: 20000,
        unit: ParamUnit::PerSecond,
        doc: "context switches per second on one CPU that always make a storm",
    },
    ParamInfo {
        name: "storm_min_rate_per_s",
        default: 5000,
        unit: ParamUnit::PerSecond,
        doc: "lowest switch rate for a storm relative to the other CPUs",
    },
    ParamInfo {
        name: "storm_factor",
        default: 5,
        unit: ParamUnit::Count,
        doc: "a CPU switching this many times faster than the median of the other CPUs storms",
    },
    ParamInfo {
        name: "preempt_window_ns",
        default: 100_000,
        unit: ParamUnit::Ns,
        doc: "a waker switched out runnable at most this long after waking its partner was preempted by the wakeup",
    },
    ParamInfo {
        name: "costly_preempt_permille",
        default: 300,
        unit: ParamUnit::Count,
        doc: "share of handoffs that are wakeup preemptions (‰) that makes a ping-pong costly",
    },
    ParamInfo {
        name: "idle_permille",
        default: 100,
        unit: ParamUnit::Count,
        doc: "a CPU idle at least this share of the pair's window (‰) has capacity to spare",
    },
    ParamInfo {
        name: "excerpt_max_switches",
        default: 64,
        unit: ParamUnit::Count,
        doc: "an input with at most this many context switches is an excerpt: one wakeup preemption whose two stacks it shows is reported (low)",
    },
];

/// Description.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "wakeup-ping-pong",
    summary: "two tasks hand a CPU back and forth at a high rate; per-CPU context-switch storms",
    explanation: EXPLANATION,
    needs: &[&["sched_switch"], &["sched_waking", "sched_wakeup"]],
    optional: &["block_rq_complete", "workqueue_execute_start"],
    record_command: "perf record -e 'sched:*' -e block:block_rq_complete -e workqueue:workqueue_execute_start -a -- COMMAND",
    params: &PARAMS,
};

const EXPLANATION: &str = r#"# wakeup-ping-pong

## What it finds
Pairs of tasks alternating on one CPU: A runs, wakes B, B preempts or replaces A, then
hands the CPU back — thousands of times per second. A *handoff* is a switch from A to B on
a CPU, allowing an idle gap of at most `max_gap_ns` (default 2 ms) between them. A pair is
reported when it made at least `min_handoffs` (default 1000) handoffs, at least
`min_rate_per_s` (default 1000) per second over its active window, and both directions
occur (the rarer direction at least 30 % of the other). Each finding gives the pair, the
CPU, handoffs per second, the pair's share of that CPU's context switches, the median run
length of each side, how often a side woke the other and how often it was switched out
preempted (`R`/`R+`) right after waking it, and — when `block_rq_complete` or
`workqueue_execute_start` events are present — handoffs per completed I/O on that CPU and
the work function the kworker side ran.

In an **excerpt** (an input of at most `excerpt_max_switches`, default 64, context switches:
a few events pasted into a mail or a bug report) no pair can show a rate; there one wakeup
preemption — a waker switched out `R`/`R+` within `preempt_window_ns` of waking its partner,
the partner running next — is reported as LOW when the input carries the stacks of both the
wakeup and the switch-out: it names the two sites and says that it is one cycle, and what a
longer capture would measure.

It also reports a **context-switch storm**: a CPU with at least `min_handoffs` switches
whose switch rate is at least
`storm_rate_per_s` (default 20000/s), or at least `storm_min_rate_per_s` (default 5000/s)
and `storm_factor` (default 5) times the median rate of the other CPUs, naming its top
pairs.

## Why it matters
Each handoff costs two context switches, cache and TLB disruption, and the wakeup latency
of the other side: I/O completions bounced through a kworker or ksoftirqd one request at a
time, a producer and consumer on a pipe with a tiny buffer, or a lock handed back and forth
turn a CPU into a switching machine that does little work. Short median run lengths on both
sides (microseconds) are the signature.

## How to confirm
`perf sched timehist -C CPU` (or `stallscope timehist`) over the window shows the
alternation; `perf sched map` shows it per CPU. For I/O: `perf record -e block:* -e
workqueue:*` and compare completions with switches. Batching (larger I/O, higher
`io_uring`/aio completion batching, `rq_affinity`, moving the interrupt or the submitter to
another CPU) usually reduces it.

## Limits
Handoffs are counted between consecutive non-idle tasks on a CPU; a pair that alternates
across CPUs is not a ping-pong here. Who woke whom comes from the context task of
`sched_waking`/`sched_wakeup`; wakeups from interrupt context name the interrupted task.
Rates are averages over the pair's first to last handoff. When a CPU holds more than 4096
pairs, the rarest are dropped and their counts lost.

## Cause and cost
Each pair finding states its cause (`cause.kind`):
- `wakeup_preemption`: in at least `costly_preempt_permille` (default 300 ‰) of the
  handoffs the waker was switched out runnable (`R`/`R+`) within `preempt_window_ns`
  (default 100 µs) of waking its partner — the woken task preempted it, every wakeup costs
  two switches and the waker's remaining work waits (the pattern that halves IOPS when an
  I/O completion worker and the application preempt each other).
- `handoff`: a producer/consumer alternation, each side blocking after waking the other.
It also gives the CPU's idle share over the pair's window (`cpu_idle_permille`; where the trace
lost the switch out of idle, the idle stretch ends where the timeline's repair rule starts the
task seen running — docs/analyze.md, "Dropped switch records") and, when block or workqueue
events are present, handoffs per completed I/O.

## Severity
- **high**: at least `high_rate_per_s` (default 5000) handoffs per second, costly (wakeup
  preemption), on a CPU idle less than `idle_permille` (default 100 ‰) of the window, and
  sustained: lasting at least `sustained_permille` (default 500 ‰) of the trace (a pipe
  between a command and its reader ping-pongs like this for the few hundred milliseconds
  the command prints: a burst, not a workload halved); a storm at twice `storm_rate_per_s`
  or more on such a CPU.
- **medium**: at least twice `min_rate_per_s` on a CPU without time to spare (a costly burst
  among them); any other storm.
- **low**: otherwise — in particular any pair on a CPU idle at least `idle_permille` of the
  window: the switching costs latency there, not throughput.
"#;

/// Builds the detector.
pub fn make(p: &Params) -> Box<dyn Detector> {
    Box::new(WakeupPingPong::new(p))
}

/// One pair on one CPU (`tids[0] < tids[1]`; index 0/1 = side).
struct Pair {
    tids: [Tid; 2],
    handoffs: [u64; 2],
    runs: [LogHist; 2],
    wakes: [u64; 2],
    preempted_after_waking: [u64; 2],
    first: Ts,
    last: Ts,
    completions_at_first: u64,
    completions_at_last: u64,
    /// The CPU's idle time when the pair's first and last handoffs happened.
    idle_at_first: u64,
    idle_at_last: u64,
    evidence: Vec<Kept>,
    /// The first wakeup preemption: (side of the waker, the wakeup, the switch-out).
    first_preemption: Option<(usize, KeptCopy<Wakeup>, Kept)>,
}

impl Pair {
    fn total(&self) -> u64 {
        self.handoffs[0] + self.handoffs[1]
    }

    /// Keeps a handoff as evidence: the wakeup that preceded it, if it is one of the pair's,
    /// and the switch `ev` (out of line: only a pair's first handoffs are kept).
    #[cold]
    #[inline(never)]
    fn keep_evidence(&mut self, wake: Option<&KeptCopy<Wakeup>>, ev: &Event) {
        if let Some(k) = wake {
            self.evidence.push(k.kept());
        }
        self.evidence.push(keep(ev));
    }
}

/// One CPU's pairs: stored in a vector, found through a map by their tids, and the pair
/// found last is remembered (a ping-pong hands off within one pair again and again: its
/// next handoff is found without hashing).
#[derive(Default)]
struct Pairs {
    list: Vec<Pair>,
    /// `(tids[0], tids[1])` → position in `list`.
    index: FxHashMap<(Tid, Tid), u32>,
    /// The pair found last: its tids and position in `list`.
    last: Option<((Tid, Tid), u32)>,
}

impl Pairs {
    /// The pair of `key` (`key.0 < key.1`), made by `make` when new.
    #[inline]
    fn get_or_insert(&mut self, key: (Tid, Tid), make: impl FnOnce() -> Pair) -> &mut Pair {
        let i = match self.last {
            Some((k, i)) if k == key => i as usize,
            _ => self.find_or_insert(key, make),
        };
        &mut self.list[i]
    }

    /// [`Pairs::get_or_insert`] through the map: the position of the pair (out of line: a
    /// CPU's handoffs are mostly between the pair of the last one).
    #[inline(never)]
    fn find_or_insert(&mut self, key: (Tid, Tid), make: impl FnOnce() -> Pair) -> usize {
        let list = &mut self.list;
        let i = *self.index.entry(key).or_insert_with(|| {
            list.push(make());
            // INVARIANT: at most MAX_PAIRS + 1 pairs are held.
            (list.len() - 1) as u32
        });
        self.last = Some((key, i));
        i as usize
    }

    fn len(&self) -> usize {
        self.list.len()
    }

    fn values(&self) -> std::slice::Iter<'_, Pair> {
        self.list.iter()
    }

    /// Drops the rarest pairs (keeps those with at least the median handoff count, and at
    /// least 2).
    fn prune(&mut self) {
        let mut counts: Vec<u64> = self.list.iter().map(Pair::total).collect();
        counts.sort_unstable();
        let Some(&median) = counts.get(counts.len() / 2) else {
            return;
        };
        let cut = median.max(2);
        self.list.retain(|p| p.total() >= cut);
        self.index.clear();
        for (i, p) in self.list.iter().enumerate() {
            self.index.insert((p.tids[0], p.tids[1]), i as u32);
        }
        self.last = None;
    }
}

#[derive(Default)]
struct CpuPP {
    /// Last non-idle task, its switch-out time and run length.
    last_task: Option<(Tid, Ts, u64)>,
    /// The last wakeup on this CPU that counts under the analysis' wakeup rule: waker
    /// `pid`, wakee in the payload.
    last_wake: KeptCopySlot<Wakeup>,
    switches: u64,
    first: Option<Ts>,
    last: Ts,
    completions: u64,
    /// Idle time so far, and since when the CPU idles (switched to idle; when the switch
    /// out of idle is missing, the run the timeline's repair rule starts ends it).
    idle_ns: u64,
    idle_since: Option<Ts>,
    pairs: Pairs,
}

/// The detector.
pub struct WakeupPingPong {
    min_handoffs: u64,
    min_rate: u64,
    high_rate: u64,
    /// Share of the trace (‰) a high ping-pong lasts.
    sustained: u64,
    max_gap: u64,
    storm_rate: u64,
    storm_min_rate: u64,
    storm_factor: u64,
    preempt_window: u64,
    costly_preempt: u64,
    spare_idle: u64,
    excerpt_max_switches: u64,
    cpus: Vec<CpuPP>,
    /// kworker tid → (work function, count), a few per task.
    work: FxHashMap<Tid, Vec<(String, u64)>>,
    saw_block: bool,
    /// Which of `sched_waking` / `sched_wakeup` counts: the analysis' one rule.
    wakeups: WakeupSelector,
}

const MAX_PAIRS: usize = 4096;

/// `count * 1e9 / window`, per second.
fn per_s(count: u64, window: u64) -> u64 {
    if window == 0 {
        return 0;
    }
    (u128::from(count) * 1_000_000_000 / u128::from(window)) as u64
}

impl WakeupPingPong {
    fn new(p: &Params) -> WakeupPingPong {
        WakeupPingPong {
            min_handoffs: p.get("min_handoffs"),
            min_rate: p.get("min_rate_per_s"),
            high_rate: p.get("high_rate_per_s"),
            sustained: p.get("sustained_permille"),
            max_gap: p.get("max_gap_ns"),
            storm_rate: p.get("storm_rate_per_s"),
            storm_min_rate: p.get("storm_min_rate_per_s"),
            storm_factor: p.get("storm_factor"),
            preempt_window: p.get("preempt_window_ns"),
            costly_preempt: p.get("costly_preempt_permille"),
            spare_idle: p.get("idle_permille"),
            excerpt_max_switches: p.get("excerpt_max_switches"),
            cpus: Vec::new(),
            work: FxHashMap::default(),
            saw_block: false,
            wakeups: WakeupSelector::preferring_waking(false),
        }
    }

    /// From the first to the last event any CPU saw.
    fn trace_span(&self) -> u64 {
        let first = self.cpus.iter().filter_map(|c| c.first).min();
        let last = self.cpus.iter().map(|c| c.last).max();
        match (first, last) {
            (Some(f), Some(l)) => l.saturating_sub(f),
            _ => 0,
        }
    }

    fn cpu(&mut self, c: Cpu) -> &mut CpuPP {
        crate::per_task::per_cpu(&mut self.cpus, c)
    }

    /// A generic event: the work function a kworker runs (out of line: rare).
    #[inline(never)]
    fn on_generic(&mut self, ev: &Event, g: &stallscope_model::GenericEvent) {
        if g.name != "workqueue_execute_start" || ev.pid <= 0 {
            return;
        }
        let f = g
            .fields
            .iter()
            .find(|(k, _)| k == "function")
            .map(|(_, v)| match v {
                FieldValue::Str(s) => s.clone(),
                FieldValue::UInt(u) => format!("{u:#x}"),
                FieldValue::Int(x) => format!("{x:#x}"),
                FieldValue::Bytes(_) => "?".to_string(),
            });
        if let Some(f) = f {
            let list = self.work.entry(ev.pid).or_default();
            if let Some(e) = list.iter_mut().find(|(n, _)| *n == f) {
                e.1 += 1;
            } else if list.len() < 4 {
                list.push((f, 1));
            } // else: a kworker running many functions keeps its first four
        }
    }

    /// CPU `c` stops idling at `ts` (a repaired run starts there; out of line: rare).
    #[cold]
    #[inline(never)]
    fn end_idle(&mut self, c: Cpu, ts: Ts) {
        if let Some(cpu) = self.cpus.get_mut(c as usize) {
            if let Some(since) = cpu.idle_since.take() {
                cpu.idle_ns += ts.saturating_sub(since);
            }
        }
    }

    /// A switch on `ev.cpu`: handoffs between the pair it ends and starts, run lengths
    /// and the CPU's switch count (out of line: the other kinds inline into the run loop).
    #[inline(never)]
    fn on_switch(&mut self, ev: &Event, prev: Tid, prev_runnable: bool, next: Tid, len: u64) {
        let ts = ev.ts;
        let (max_gap, preempt_window) = (self.max_gap, self.preempt_window);
        let cpu = self.cpu(ev.cpu);
        cpu.switches += 1;
        if let Some(since) = cpu.idle_since.take() {
            // (with prev ≠ idle the switch out of idle is missing: its time is unknown)
            if prev == 0 {
                cpu.idle_ns += ts.saturating_sub(since);
            }
        }
        if next == 0 {
            cpu.idle_since = Some(ts);
        }
        cpu.first.get_or_insert(ts);
        cpu.last = ts;
        if prev > 0 {
            cpu.last_task = Some((prev, ts, len));
        }
        if next > 0 {
            if let Some((a, out_ts, len)) = cpu.last_task {
                if a != next && ts.saturating_sub(out_ts) <= max_gap {
                    let key = if a < next { (a, next) } else { (next, a) };
                    let side = usize::from(a != key.0);
                    let (completions, idle) = (cpu.completions, cpu.idle_ns);
                    let wake = cpu
                        .last_wake
                        .get()
                        .map(|k| (k.pid, k.payload.task.pid, k.ts));
                    let woke = wake.is_some_and(|(w, t, _)| (w, t) == (a, next));
                    let woke_just_now = woke
                        && wake.is_some_and(|(_, _, at)| ts.saturating_sub(at) <= preempt_window);
                    let p = cpu.pairs.get_or_insert(key, || Pair {
                        tids: [key.0, key.1],
                        handoffs: [0; 2],
                        runs: [LogHist::default(), LogHist::default()],
                        wakes: [0; 2],
                        preempted_after_waking: [0; 2],
                        first: ts,
                        last: ts,
                        completions_at_first: completions,
                        completions_at_last: completions,
                        idle_at_first: idle,
                        idle_at_last: idle,
                        evidence: Vec::new(),
                        first_preemption: None,
                    });
                    p.handoffs[side] += 1;
                    p.runs[side].add(len);
                    p.last = ts;
                    p.completions_at_last = completions;
                    p.idle_at_last = idle;
                    if woke {
                        p.wakes[side] += 1;
                        // wakeup preemption: the waker leaves runnable right after the wakeup
                        if prev == a && prev_runnable && woke_just_now {
                            p.preempted_after_waking[side] += 1;
                            if p.first_preemption.is_none() {
                                p.first_preemption =
                                    cpu.last_wake.get().map(|w| (side, *w, keep(ev)));
                            }
                        }
                    }
                    if p.evidence.len() < 6 {
                        p.keep_evidence(cpu.last_wake.get().filter(|_| woke), ev);
                    }
                    if cpu.pairs.len() > MAX_PAIRS {
                        cpu.pairs.prune();
                    }
                }
            }
        }
    }

    /// The work function `tid` ran most, named from the trace's kallsyms when the event
    /// gave an address.
    fn work_function(&self, tid: Tid, cx: &Context<'_>) -> Option<String> {
        let f = self
            .work
            .get(&tid)?
            .iter()
            .max_by_key(|(_, n)| *n)
            .map(|(f, _)| f.as_str())?;
        let addr = f
            .strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok());
        let named = addr
            .zip(cx.kallsyms)
            .and_then(|(a, k)| stallscope_timeline::workers::symbol_names(k, [a]).remove(&a));
        Some(named.unwrap_or_else(|| f.to_string()))
    }

    fn pair_finding(&self, c: usize, cpu: &CpuPP, p: &Pair, cx: &Context<'_>) -> Option<Finding> {
        let total = p.total();
        let window = p.last.saturating_sub(p.first);
        let rate = per_s(total, window);
        let (lo, hi) = (
            p.handoffs[0].min(p.handoffs[1]),
            p.handoffs[0].max(p.handoffs[1]),
        );
        if total < self.min_handoffs || rate < self.min_rate || lo * 1000 < hi * 300 {
            return None;
        }
        // the cost: wakeup preemptions (the waker switched out runnable right after waking
        // its partner), and whether the CPU had time to spare
        let preempts = p.preempted_after_waking[0] + p.preempted_after_waking[1];
        let preempt_share = ratio_permille(preempts, total);
        let idle_share = ratio_permille(p.idle_at_last - p.idle_at_first, window);
        let costly = preempt_share >= self.costly_preempt;
        let spare = idle_share >= self.spare_idle;
        let fast = rate >= self.high_rate;
        let trace_share = ratio_permille(window, self.trace_span());
        let sustained = trace_share >= self.sustained;
        // a CPU with time to spare pays the switching in latency, not in throughput; a
        // burst in a longer trace costs what it lasts
        let severity = if spare {
            FindingSeverity::Low
        } else if costly && fast && sustained {
            FindingSeverity::High
        } else if rate >= self.min_rate.saturating_mul(2) {
            FindingSeverity::Medium
        } else {
            FindingSeverity::Low
        };
        let share = ratio_permille(total, cpu.switches);
        let names = [cx.comm(p.tids[0]), cx.comm(p.tids[1])];
        let mut title = format!(
            "{} (pid {}) and {} (pid {}) handed CPU {c} back and forth {rate} times/s ({total} handoffs in {}, {} of the CPU's switches); median runs {} / {}",
            names[0],
            p.tids[0],
            names[1],
            p.tids[1],
            dur(window),
            permille(share),
            dur(p.runs[0].median()),
            dur(p.runs[1].median()),
        );
        let mut m = BTreeMap::new();
        m.insert("handoffs".into(), i(total));
        m.insert("handoffs_per_s".into(), i(rate));
        m.insert("cpu_switches".into(), i(cpu.switches));
        m.insert("share_of_cpu_switches_permille".into(), i(share));
        m.insert("window_ns".into(), i(window));
        m.insert("share_of_trace_permille".into(), i(trace_share));
        if !sustained {
            title.push_str(&format!(
                "; a burst: {} of the trace's {}",
                permille(trace_share),
                dur(self.trace_span())
            ));
        }
        m.insert("wakeup_preemptions".into(), i(preempts));
        m.insert("wakeup_preemption_permille".into(), i(preempt_share));
        m.insert("cpu_idle_permille".into(), i(idle_share));
        let ios = p.completions_at_last - p.completions_at_first;
        if self.saw_block {
            m.insert("io_completions".into(), i(ios));
            if let Some(per_io) = (total * 1000).checked_div(ios) {
                m.insert("handoffs_per_io_x1000".into(), i(per_io));
                title.push_str(&format!(
                    "; {}.{:03} handoffs per completed I/O",
                    total / ios,
                    (total % ios) * 1000 / ios
                ));
            }
        }
        let mut tasks = Vec::new();
        let mut funcs = Vec::new();
        for (s, name) in names.iter().enumerate() {
            let mut tm = BTreeMap::new();
            tm.insert("handoffs_to_other".into(), i(p.handoffs[s]));
            tm.insert("median_run_ns".into(), i(p.runs[s].median()));
            tm.insert("woke_other".into(), i(p.wakes[s]));
            tm.insert(
                "preempted_right_after_waking".into(),
                i(p.preempted_after_waking[s]),
            );
            if let Some(f) = self.work_function(p.tids[s], cx) {
                funcs.push(format!("{name} runs {f}"));
            }
            tasks.push(FindingTask {
                pid: p.tids[s],
                comm: name.as_str().to_string(),
                role: "partner".into(),
                measures: tm,
            });
        }
        if !funcs.is_empty() {
            title.push_str(&format!("; {}", funcs.join(", ")));
        }
        let kept: Vec<&Kept> = p.evidence.iter().collect();
        let per_io = match ios {
            0 => String::new(),
            n => format!(
                ", {}.{:03} handoffs per completed I/O",
                total / n,
                (total % n) * 1000 / n
            ),
        };
        let (kind, text) = if costly {
            (
                "wakeup_preemption",
                format!(
                    "Wakeup preemption: in {} of the handoffs ({preempts} of {total}) the waker was switched out runnable within {} of waking its partner, so each wakeup costs two context switches and the waker's remaining work waits{}; the CPU idled {} of the window.",
                    permille(preempt_share),
                    dur(self.preempt_window),
                    per_io,
                    permille(idle_share)
                ),
            )
        } else {
            (
                "handoff",
                format!(
                    "A producer/consumer handoff: the partners mostly wake each other and then block (wakeup preemptions in {} of the handoffs){}; the CPU idled {} of the window, so {}.",
                    permille(preempt_share),
                    per_io,
                    permille(idle_share),
                    if spare {
                        "the switching costs latency, not throughput"
                    } else {
                        "the switching competes with other work for the CPU"
                    }
                ),
            )
        };
        Some(Finding {
            detector: INFO.id.into(),
            severity,
            title,
            window: Window {
                start_ns: p.first,
                end_ns: p.last,
            },
            cpus: vec![c as Cpu],
            tasks,
            measures: m,
            evidence: render(cx, &kept),
            hint: format!(
                "{text} {} woke {} {} times ({} times then switched out preempted); {} woke {} {} times ({} preempted). Confirm with `perf sched timehist -C {c}` over the window; {}",
                names[0], names[1], p.wakes[0], p.preempted_after_waking[0],
                names[1], names[0], p.wakes[1], p.preempted_after_waking[1],
                match costly {
                    // the scheduler's choice is the cause: its knobs, or the wakee's policy
                    true => "a woken SCHED_BATCH task never preempts on wakeup (`chrt -b -p 0 PID` on the woken side), a longer base slice (debugfs sched/base_slice_ns) lets the waker finish its work first, and batching the handoff (larger or batched I/O completions, a bigger pipe buffer) or moving one side to another CPU makes fewer wakeups.",
                    false => "batching the handoff (larger or batched I/O completions, a bigger pipe buffer, moving one side or the interrupt to another CPU) makes fewer wakeups.",
                }
            ),
            cause: Some(FindingCause {
                kind: kind.into(),
                text,
            }),
        })
    }

    fn storms(&self, cx: &Context<'_>) -> Vec<Finding> {
        let rates: Vec<(usize, u64, u64)> = self
            .cpus
            .iter()
            .enumerate()
            .filter_map(|(c, s)| {
                let w = s.last.saturating_sub(s.first?);
                Some((c, per_s(s.switches, w), w))
            })
            .collect();
        let mut out = Vec::new();
        for &(c, rate, window) in &rates {
            let mut others: Vec<u64> = rates.iter().filter(|r| r.0 != c).map(|r| r.1).collect();
            others.sort_unstable();
            let median_other = others.get(others.len() / 2).copied();
            let relative = rate >= self.storm_min_rate
                && median_other.is_some_and(|m| rate >= self.storm_factor.saturating_mul(m.max(1)));
            if (rate < self.storm_rate && !relative) || self.cpus[c].switches < self.min_handoffs {
                continue;
            }
            let cpu = &self.cpus[c];
            let mut pairs: Vec<&Pair> = cpu.pairs.values().collect();
            pairs.sort_by(|a, b| b.total().cmp(&a.total()).then(a.tids.cmp(&b.tids)));
            let top: Vec<String> = pairs
                .iter()
                .take(3)
                .map(|p| {
                    format!(
                        "{}/{} ({} handoffs)",
                        cx.comm(p.tids[0]),
                        cx.comm(p.tids[1]),
                        p.total()
                    )
                })
                .collect();
            let mut tasks = Vec::new();
            for p in pairs.iter().take(3) {
                for t in p.tids {
                    if !tasks.iter().any(|x: &FindingTask| x.pid == t) {
                        tasks.push(FindingTask {
                            pid: t,
                            comm: cx.comm(t).as_str().to_string(),
                            role: "partner".into(),
                            measures: BTreeMap::new(),
                        });
                    }
                }
            }
            let idle_share = ratio_permille(cpu.idle_ns, window);
            let mut m = BTreeMap::new();
            m.insert("switches".into(), i(cpu.switches));
            m.insert("switches_per_s".into(), i(rate));
            m.insert("window_ns".into(), i(window));
            m.insert("cpu_idle_permille".into(), i(idle_share));
            if let Some(mo) = median_other {
                m.insert("median_other_cpus_switches_per_s".into(), i(mo));
            }
            let kept: Vec<&Kept> = pairs
                .iter()
                .take(1)
                .flat_map(|p| p.evidence.iter())
                .collect();
            out.push(Finding {
                cause: None,
                detector: INFO.id.into(),
                // a CPU with time to spare pays the switching in latency: at most medium
                severity: if rate >= self.storm_rate.saturating_mul(2)
                    && idle_share < self.spare_idle
                {
                    FindingSeverity::High
                } else {
                    FindingSeverity::Medium
                },
                title: format!(
                    "context-switch storm on CPU {c}: {rate} switches/s ({} switches in {}){}, the CPU idle {} of it; top pairs: {}",
                    cpu.switches,
                    dur(window),
                    median_other.map_or(String::new(), |mo| format!(", other CPUs' median {mo}/s")),
                    permille(idle_share),
                    if top.is_empty() { "none".to_string() } else { top.join(", ") }
                ),
                window: Window {
                    start_ns: cpu.first.unwrap_or(0),
                    end_ns: cpu.last,
                },
                cpus: vec![c as Cpu],
                tasks,
                measures: m,
                evidence: render(cx, &kept),
                hint: format!("Look at the top pairs' wakeup-ping-pong findings; `perf sched timehist -C {c}` shows who switches."),
            });
        }
        out
    }
}

impl Detector for WakeupPingPong {
    fn info(&self) -> &'static DetectorInfo {
        &INFO
    }

    fn event_kinds(&self) -> u32 {
        use crate::engine::kind;
        kind::SWITCH | kind::WAKING | kind::WAKEUP | kind::BLOCK | kind::GENERIC
    }

    /// Each event, then for a switch the handoff it makes, with the outgoing task's run
    /// length read from the model: the `Running` state the switch ends (its transition is
    /// among the run's, tagged with the switch's index). No transition is fed otherwise.
    fn on_run(&mut self, run: &crate::engine::Run<'_>) {
        let kinds = match run.everything {
            true => u32::MAX,
            false => self.event_kinds(),
        };
        let mut next = 0; // the first transition of the event at hand or after it
        for (k, (ev, &bit)) in run.events.iter().zip(run.bits).enumerate() {
            let k = k as u32;
            while run.transitions.get(next).is_some_and(|(at, _)| *at < k) {
                next += 1;
            }
            // the timeline's repair rule: a task runs where no recorded switch put it (the
            // switch out of idle was dropped), so the CPU's idle time ends where that run
            // starts
            for (_, t) in run.transitions[next..]
                .iter()
                .take_while(|(at, _)| *at == k)
            {
                if let Transition::State {
                    to:
                        TaskState::Running {
                            cpu,
                            since,
                            repaired: true,
                        },
                    ..
                } = *t
                {
                    self.end_idle(cpu, since);
                }
            }
            if kinds & bit == 0 {
                continue;
            }
            self.on_event(ev);
            if let EventKind::Switch(s) = &ev.kind {
                let prev = s.prev.pid;
                let len = run.transitions[next..]
                    .iter()
                    .take_while(|(at, _)| *at == k)
                    .find_map(|(_, t)| match *t {
                        Transition::State {
                            tid,
                            from: TaskState::Running { cpu, since, .. },
                            ..
                        } if tid == prev && cpu == ev.cpu => Some(ev.ts.saturating_sub(since)),
                        _ => None,
                    })
                    .unwrap_or(0);
                self.on_switch(ev, prev, s.prev_state.is_runnable(), s.next.pid, len);
            }
        }
    }

    fn use_wakeup_rule(&mut self, rule: WakeupSelector) {
        self.wakeups = rule;
    }

    #[inline(always)]
    fn on_event(&mut self, ev: &Event) {
        // the small cases inline into the run loop, the switch and work items out of line
        match &ev.kind {
            EventKind::Switch(_) => {} // with the model's transitions, in `on_run`
            EventKind::Waking(w) | EventKind::Wakeup(w)
                if ev.pid > 0 && self.wakeups.select(&ev.kind).is_some() =>
            {
                let wrap: fn(Wakeup) -> EventKind = match ev.kind {
                    EventKind::Waking(_) => EventKind::Waking,
                    _ => EventKind::Wakeup,
                };
                self.cpu(ev.cpu).last_wake.set(ev, w, wrap);
            }
            // Block tracepoints are native events (readers decode them into BlockEvent).
            EventKind::Block(b) if b.action == stallscope_model::BlockAction::Complete => {
                self.saw_block = true;
                self.cpu(ev.cpu).completions += 1;
            }
            EventKind::Generic(g) => self.on_generic(ev, g),
            _ => {}
        }
    }

    fn finish(self: Box<Self>, cx: &Context<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        for (c, cpu) in self.cpus.iter().enumerate() {
            let mut pairs: Vec<&Pair> = cpu.pairs.values().collect();
            pairs.sort_by(|a, b| b.total().cmp(&a.total()).then(a.tids.cmp(&b.tids)));
            out.extend(
                pairs
                    .into_iter()
                    .filter_map(|p| self.pair_finding(c, cpu, p, cx)),
            );
        }
        out.extend(self.storms(cx));
        let switches: u64 = self.cpus.iter().map(|c| c.switches).sum();
        if out.is_empty() && switches <= self.excerpt_max_switches {
            out.extend(self.excerpt_preemption(cx));
        }
        out
    }
}

impl WakeupPingPong {
    /// In an excerpt, the first wakeup preemption whose wakeup and switch-out both carry a
    /// stack: one cycle, LOW, with both sites (module docs).
    fn excerpt_preemption(&self, cx: &Context<'_>) -> Option<Finding> {
        let (c, p, (side, wake, out)) = self.cpus.iter().enumerate().find_map(|(c, cpu)| {
            cpu.pairs.values().find_map(|p| {
                let f = p.first_preemption.as_ref()?;
                let stacked = |span| cx.stacks.get(span).is_some();
                (stacked(f.1.span) && stacked(f.2.span)).then_some((c, p, f))
            })
        })?;
        let (waker, wakee) = (p.tids[*side], p.tids[1 - side]);
        let site = |span| -> String {
            let Some((chain, pid)) = cx.stacks.get(span) else {
                return String::new();
            };
            let frames: Vec<String> = cx
                .symbolizer
                .frames(chain, pid)
                .into_iter()
                .filter(|f| !crate::stacks::is_mechanism(f))
                .take(3)
                .collect();
            frames.join(" ← ")
        };
        let (wake_site, preempt_site) = (site(wake.span), site(out.span));
        let name = |t: Tid| format!("{} (pid {t})", cx.comm(t));
        let after = out.ts.saturating_sub(wake.ts);
        let title = format!(
            "{} woke {} in {wake_site} and was switched out runnable {} later in {preempt_site}, {} running next on CPU {c}: one wakeup preemption in this excerpt",
            name(waker),
            name(wakee),
            dur(after),
            cx.comm(wakee)
        );
        let text = format!(
            "Wakeup preemption, one cycle: the wakeup made {} preempt its waker within {} (the waker left runnable, not sleeping), so the waker's remaining work waited. One cycle in an excerpt says that it happens, not how often: a capture of a few seconds (`perf record -e 'sched:*' -g -a -- sleep 5`, or `stallscope record`) measures the handoff rate, the share of wakeups that preempt, both sides' run lengths and the CPU's idle time, which decide whether it costs throughput.",
            cx.comm(wakee),
            dur(after)
        );
        let mut m = BTreeMap::new();
        m.insert("preempted_after_ns".to_string(), i(after));
        m.insert("cycles".to_string(), i(1));
        let task = |pid: Tid, role: &str| FindingTask {
            pid,
            comm: cx.comm(pid).as_str().to_string(),
            role: role.into(),
            measures: BTreeMap::new(),
        };
        let kept = [wake.kept(), out.clone()];
        let kept: Vec<&Kept> = kept.iter().collect();
        Some(Finding {
            detector: INFO.id.into(),
            severity: FindingSeverity::Low,
            title,
            window: Window {
                start_ns: wake.ts,
                end_ns: out.ts,
            },
            cpus: vec![c as Cpu],
            tasks: vec![task(waker, "waker"), task(wakee, "woken")],
            measures: m,
            evidence: render(cx, &kept),
            hint: format!(
                "{text} Confirm on a longer capture with `perf sched timehist -C {c} -w`; a woken SCHED_BATCH task never preempts on wakeup (`chrt -b -p 0 {wakee}`), and a longer base slice (debugfs sched/base_slice_ns) lets the waker finish first."
            ),
            cause: Some(FindingCause {
                kind: "wakeup_preemption".into(),
                text,
            }),
        })
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod pairs_tests {
    use super::*;

    fn pair(key: (Tid, Tid)) -> Pair {
        Pair {
            tids: [key.0, key.1],
            handoffs: [0; 2],
            runs: [LogHist::default(), LogHist::default()],
            wakes: [0; 2],
            preempted_after_waking: [0; 2],
            first: 0,
            last: 0,
            completions_at_first: 0,
            completions_at_last: 0,
            idle_at_first: 0,
            idle_at_last: 0,
            evidence: Vec::new(),
            first_preemption: None,
        }
    }

    #[test]
    fn pairs_are_found_again_after_other_pairs_and_after_pruning() {
        let mut pairs = Pairs::default();
        // pair (1, k) gets k handoffs, for k in 2..=9; then (1, 2) again
        for k in 2..=9 {
            for _ in 0..k {
                pairs.get_or_insert((1, k), || pair((1, k))).handoffs[0] += 1;
            }
        }
        pairs.get_or_insert((1, 2), || pair((1, 2))).handoffs[1] += 1;
        assert_eq!(pairs.len(), 8);
        let total =
            |pairs: &mut Pairs, k: Tid| pairs.get_or_insert((1, k), || pair((1, k))).total();
        assert_eq!(total(&mut pairs, 2), 3);
        assert_eq!(total(&mut pairs, 7), 7);
        // totals 3, 3..9: the median (of 8, the 5th smallest) is 6; pairs below it go
        pairs.prune();
        let mut kept: Vec<Tid> = pairs.values().map(|p| p.tids[1]).collect();
        kept.sort_unstable();
        assert_eq!(kept, vec![6, 7, 8, 9]);
        assert_eq!(total(&mut pairs, 8), 8, "a kept pair keeps its counts");
        assert_eq!(total(&mut pairs, 2), 0, "a dropped pair starts again");
        assert_eq!(pairs.len(), 5);
        assert_eq!(total(&mut pairs, 9), 9);
    }
}
