//! `idle-while-runnable` (work conservation): a CPU stays idle while a task waits runnable
//! on another CPU.
//!
//! State machine:
//!
//! ```text
//!   per CPU:   switch to idle (next pid 0) → idle since ts;  switch from idle → busy
//!   per task:  timeline → Runnable: waiting on CPU a (wakeup target_cpu / switch CPU),
//!              sched_migrate_task moves it;  Runnable → anything: the wait ends
//!   overlap:   when CPU b ≠ a leaves idle, or when the wait ends while b is idle,
//!              overlap = now − max(idle since, wait start); ≥ threshold_ns → an incident
//! ```
//!
//! Incidents of one task, waiting CPU and idle CPU merge into one finding with counts and
//! the worst overlap. Memory: one record per CPU and per waiting task, plus the findings.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use stallscope_model::{
    Cpu, Event, EventKind, Finding, FindingSeverity, FindingTask, Switch, Tid, Ts, Window,
};
use stallscope_timeline::{TaskState, Transition};

use super::fmt::{dur, i};
use super::sched::cpu_list_contains;
use crate::evidence::{keep, keep_into, render, Kept, KeptCopy, KeptCopySlot};
use crate::params::{ParamInfo, ParamUnit, Params};
use crate::per_task::PerTask;
use crate::{Context, Detector, DetectorInfo};

/// Thresholds.
pub static PARAMS: [ParamInfo; 5] = [
    ParamInfo {
        name: "threshold_ns",
        default: 5_000_000,
        unit: ParamUnit::Ns,
        doc: "an overlap of a wait with another CPU's idle time this long is reported",
    },
    ParamInfo {
        name: "min_overlap_ns",
        default: 1_000_000,
        unit: ParamUnit::Ns,
        doc: "shorter overlaps count only when repeated: at least `repeats` of them totalling `threshold_ns` × `repeats`",
    },
    ParamInfo {
        name: "high_ns",
        default: 20_000_000,
        unit: ParamUnit::Ns,
        doc: "worst overlap that makes a finding medium (high when affinity is known to allow the idle CPU)",
    },
    ParamInfo {
        name: "repeats",
        default: 10,
        unit: ParamUnit::Count,
        doc: "incidents that make a finding medium (high when affinity is known to allow the idle CPU)",
    },
    ParamInfo {
        name: "pinned_min_runs",
        default: 20,
        unit: ParamUnit::Count,
        doc: "a task that ran only on its one CPU over at least this many waits is probably pinned",
    },
];

/// Description.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "idle-while-runnable",
    summary: "a CPU stays idle while a task waits runnable on another CPU",
    explanation: EXPLANATION,
    needs: &[&["sched_switch"], &["sched_waking", "sched_wakeup"]],
    optional: &["sched_migrate_task"],
    record_command: "perf sched record -- COMMAND   (or: perf record -e 'sched:*' -a -- COMMAND)",
    params: &PARAMS,
};

const EXPLANATION: &str = r#"# idle-while-runnable

## What it finds
Work-conservation failures: CPU *b* stays idle while a task waits runnable on CPU *a* for
at least `threshold_ns` (default 5 ms) of overlap — or, repeatedly, for shorter overlaps:
at least `repeats` (default 10) incidents of at least `min_overlap_ns` (default 1 ms) that
add up to `threshold_ns` × `repeats` (e.g. two hogs sharing one CPU by 4 ms slices while
the other CPU idles). Each finding names the task, the CPU it waited on, the idle CPU, the
window, the number of incidents, their total and the worst overlap.

## Why it matters
An idle CPU next to a queue of runnable work is lost capacity and added latency. Causes:
CPU affinity (`taskset`, cpusets, IRQ-bound kthreads) that forbids the idle CPU, load
balancing that is too slow or blocked (idle CPUs in deep C-states, `SD_BALANCE` domains,
`isolcpus`/`nohz_full`), or wake-affine placement stacking tasks on one CPU.

## How to confirm
`perf sched timehist` over the window shows CPU *b* in `<idle>` while the task's wait
grows on CPU *a*; check the task's affinity with `taskset -p PID` and the cpuset of its
cgroup. If it may run on *b*, look at the scheduler domains and idle states.

## Affinity
Affinity is not in scheduler events. It is taken, in this order, from: the recorded system
context (`stallscope record` stores each task's allowed CPUs); the recording command line a
perf.data carries (`perf record … -- taskset -c 1 cyclictest …` pins the tasks named
`cyclictest`, as `taskset` with a CPU list or a mask would); else it is inferred: a task that
ran only on its one CPU over at least `pinned_min_runs` (default 20) waits while another CPU
idled is **probably pinned** — reported as low, and said so. A task whose known affinity
forbids the idle CPU is not reported: that is not a balancing failure.

## Limits
Without any of those, a task pinned to its CPU looks the same as a balancing failure — such
findings are never above medium. A wait's CPU comes from the wakeup's
`target_cpu` and later migrations; a CPU whose current task is unknown (start of trace,
after lost events) is not considered idle, nor is a CPU the model's repair rule finds running
a task (a record in its context where the switch-in is missing; see docs/analyze.md, "Dropped
switch records"); such a task is not waiting, and its wait is no incident. A wait during which the task's own CPU went idle
contradicts a queued task (missing events, or CFS bandwidth throttling) and yields no incident.

## Severity
- **high**: recorded affinity allows the idle CPU, and the worst overlap is at least
  `high_ns` (default 20 ms) or there were at least `repeats` (default 10) incidents.
- **medium**: the same without known affinity, or affinity allows the idle CPU
  with smaller numbers.
- **low**: otherwise (affinity unknown, short and rare), and any task inferred to be
  probably pinned.
"#;

/// Builds the detector.
pub fn make(p: &Params) -> Box<dyn Detector> {
    Box::new(IdleWhileRunnable::new(p))
}

struct Waiter {
    tid: Tid,
    since: Ts,
    cpu: Cpu,
    /// Its own CPU went idle during the wait: a queued task would have run, so the trace
    /// is missing events (or the task is throttled); no incident is taken from this wait.
    own_cpu_idled: bool,
}

/// A wait since `wait_since` and an idle period since `idle_since` overlap by at least `min`
/// ns at `now`.
#[inline]
fn overlap_reaches(wait_since: Ts, idle_since: Ts, now: Ts, min: u64) -> bool {
    now.saturating_sub(idle_since.max(wait_since)) >= min
}

impl Waiter {
    /// It waits on another CPU than `c`, idle from `since` to `now`, and overlaps that idle
    /// time by at least `min` ns.
    #[inline]
    fn overlaps_idle(&self, c: Cpu, (since, now): (Ts, Ts), min: u64) -> bool {
        self.cpu != c && overlap_reaches(self.since, since, now, min)
    }
}

/// The waiting tasks: a dense list (iterated on every switch to or from idle), indexed by
/// tid through a [`PerTask`] slot (`0` = not waiting, else list index + 1) while it holds
/// more than [`SHORT_LIST`] tasks (a short list is scanned; its slots are all 0). The list's order
/// does not matter: every use either looks at one task or at each task once. The event that
/// started each wait is in `starts`, at the same index (the scans stay on the small records);
/// `starts` may be longer than `list`, its spare entries reused in place ([`keep_into`]).
#[derive(Default)]
struct Waiting {
    list: Vec<Waiter>,
    starts: Vec<Kept>,
    slot: PerTask<u32>,
}

/// Up to this many waiting tasks, [`Waiting::index`] scans the list.
const SHORT_LIST: usize = 8;

impl Waiting {
    /// Inlined: it runs for every wait that ends, and the usual answer is a short scan.
    #[inline(always)]
    fn index(&self, tid: Tid) -> Option<usize> {
        // A few waiting tasks (the usual case): scanning them is cheaper than the lookup,
        // and gives the same index (`slot` is kept for longer lists).
        if self.list.len() <= SHORT_LIST {
            return self.list.iter().position(|w| w.tid == tid);
        }
        self.index_in_long_list(tid)
    }

    /// [`Waiting::index`] when the list is long (out of line: rare).
    #[inline(never)]
    fn index_in_long_list(&self, tid: Tid) -> Option<usize> {
        match self.slot.get(tid) {
            Some(&i) if i > 0 => Some(i as usize - 1),
            _ => None,
        }
    }

    #[inline]
    fn get(&self, tid: Tid) -> Option<&Waiter> {
        self.index(tid).map(|i| &self.list[i])
    }

    fn get_mut(&mut self, tid: Tid) -> Option<&mut Waiter> {
        self.index(tid).map(|i| &mut self.list[i])
    }

    /// The event that started the wait of `tid`.
    fn start(&self, tid: Tid) -> Option<&Kept> {
        self.starts.get(self.index(tid)?)
    }

    /// Adds or replaces the wait of `w.tid`, started by `start`.
    fn insert(&mut self, w: Waiter, start: &Event) {
        match self.index(w.tid) {
            Some(i) => {
                self.list[i] = w;
                if let Some(k) = self.starts.get_mut(i) {
                    keep_into(k, start);
                }
            }
            None => {
                let i = self.list.len();
                self.list.push(w);
                if self.list.len() == SHORT_LIST + 1 {
                    // the list becomes long: every waiter gets its slot
                    for (k, w) in self.list.iter().enumerate() {
                        *self.slot.entry(w.tid) = k as u32 + 1;
                    }
                } else if self.list.len() > SHORT_LIST {
                    *self.slot.entry(self.list[i].tid) = i as u32 + 1;
                }
                match self.starts.get_mut(i) {
                    Some(k) => keep_into(k, start),
                    None => self.starts.push(keep(start)),
                }
            }
        }
    }

    #[inline]
    fn remove(&mut self, tid: Tid) {
        if let Some(i) = self.index(tid) {
            self.remove_at(i, tid);
        }
    }

    /// [`Waiting::remove`] of `tid`, found at `i`.
    fn remove_at(&mut self, i: usize, tid: Tid) {
        let was_long = self.list.len() > SHORT_LIST;
        self.list.swap_remove(i);
        // the last wait's start moves to `i`, the removed one becomes spare storage (no swap
        // when the removed wait was the last: swapping a 128-byte event with itself still
        // copies it, and with one waiter that is every removal)
        let last = self.list.len();
        if i != last {
            self.starts.swap(i, last);
        }
        if !was_long {
            return; // a short list has no slots
        }
        *self.slot.entry(tid) = 0;
        if self.list.len() > SHORT_LIST {
            if let Some(moved) = self.list.get(i) {
                *self.slot.entry(moved.tid) = i as u32 + 1;
            }
        } else {
            // the list becomes short: its slots are cleared (they would go stale)
            for w in &self.list {
                *self.slot.entry(w.tid) = 0;
            }
        }
    }
}

#[derive(Default)]
struct CpuIdle {
    /// The switch to idle (its time is the start of the idle period).
    idle_since: KeptCopySlot<Switch>,
}

struct Incident {
    overlap: u64,
    from: Ts,
    to: Ts,
    evidence: Vec<Kept>,
}

struct Group {
    count: u64,
    total: u64,
    first: Ts,
    last: Ts,
    worst: Incident,
}

/// The detector.
pub struct IdleWhileRunnable {
    threshold: u64,
    min_overlap: u64,
    high: u64,
    repeats: u64,
    pinned_min_runs: u64,
    /// Per task: the CPUs its waits ended on (bit per CPU below 64; bit 63 for the others),
    /// and how many waits ended.
    placements: PerTask<(u64, u64)>,
    cpus: Vec<CpuIdle>,
    waiting: Waiting,
    groups: FxHashMap<(Tid, Cpu, Cpu), Group>,
}

impl IdleWhileRunnable {
    fn new(p: &Params) -> IdleWhileRunnable {
        IdleWhileRunnable {
            threshold: p.get("threshold_ns"),
            min_overlap: p.get("min_overlap_ns").min(p.get("threshold_ns")),
            high: p.get("high_ns"),
            repeats: p.get("repeats"),
            pinned_min_runs: p.get("pinned_min_runs"),
            placements: PerTask::default(),
            cpus: Vec::new(),
            waiting: Waiting::default(),
            groups: FxHashMap::default(),
        }
    }

    fn cpu(&mut self, c: Cpu) -> &mut CpuIdle {
        crate::per_task::per_cpu(&mut self.cpus, c)
    }

    fn incident(&mut self, tid: Tid, idle_cpu: Cpu, idle: (Ts, &Kept), now: Ts, end: &Event) {
        let (Some(w), Some(start)) = (self.waiting.get(tid), self.waiting.start(tid)) else {
            return;
        };
        if w.cpu == idle_cpu || w.own_cpu_idled {
            return;
        }
        let from = idle.0.max(w.since);
        let overlap = now.saturating_sub(from);
        if overlap < self.min_overlap {
            return;
        }
        let key = (tid, w.cpu, idle_cpu);
        let evidence = vec![start.clone(), idle.1.clone(), keep(end)];
        let g = self.groups.entry(key).or_insert_with(|| Group {
            count: 0,
            total: 0,
            first: from,
            last: now,
            worst: Incident {
                overlap: 0,
                from,
                to: now,
                evidence: Vec::new(),
            },
        });
        g.count += 1;
        g.total += overlap;
        g.first = g.first.min(from);
        g.last = g.last.max(now);
        if overlap > g.worst.overlap {
            g.worst = Incident {
                overlap,
                from,
                to: now,
                evidence,
            };
        }
    }

    fn finding(
        &self,
        (tid, wait_cpu, idle_cpu): (Tid, Cpu, Cpu),
        g: &Group,
        cx: &Context<'_>,
    ) -> Option<Finding> {
        let comm = cx.comm(tid);
        let recorded = cx
            .task_context(tid)
            .and_then(|t| t.cpus_allowed.as_deref())
            .map(|l| (l.to_string(), "its recorded affinity".to_string()));
        let from_cmdline = || {
            cx.cmdlines.iter().find_map(|c| {
                let (program, list) = taskset_pin(c)?;
                (program == comm.as_str()).then(|| {
                    (
                        list,
                        format!("the recorded command line pins {program} (`{c}`)"),
                    )
                })
            })
        };
        let known = recorded.or_else(from_cmdline);
        let allowed = known
            .as_ref()
            .and_then(|(l, _)| cpu_list_contains(l, idle_cpu));
        if allowed == Some(false) {
            return None; // the task may not run on the idle CPU: not a balancing failure
        }
        // never placed elsewhere over many waits while another CPU idled: probably pinned
        let probably_pinned = allowed.is_none()
            && self.placements.get(tid).is_some_and(|&(mask, runs)| {
                mask.count_ones() == 1
                    && mask == 1u64 << wait_cpu.min(63)
                    && runs >= self.pinned_min_runs
            });
        let repeated =
            g.count >= self.repeats && g.total >= self.threshold.saturating_mul(self.repeats);
        if g.worst.overlap < self.threshold && !repeated {
            return None;
        }
        let big = g.worst.overlap >= self.high || g.count >= self.repeats;
        let severity = match (allowed, big) {
            _ if probably_pinned => FindingSeverity::Low,
            (Some(true), true) => FindingSeverity::High,
            (Some(true), false) | (None, true) => FindingSeverity::Medium,
            _ => FindingSeverity::Low,
        };
        let runs = self.placements.get(tid).map_or(0, |p| p.1);
        let affinity = match (&known, probably_pinned) {
            (Some((list, from)), _) => format!("{from} allows CPUs {list}, that CPU among them"),
            (None, true) => format!(
                "it ran only on CPU {wait_cpu} in all its {runs} runs: probably pinned (affinity not recorded)"
            ),
            (None, false) => "affinity unknown (not recorded): the task may be pinned".to_string(),
        };
        let mut title = format!(
            "CPU {idle_cpu} stayed idle for {} while {comm} (pid {tid}) waited runnable on CPU {wait_cpu}",
            dur(g.worst.overlap)
        );
        if g.count > 1 {
            title.push_str(&format!(
                "; worst of {} incidents ({} in total)",
                g.count,
                dur(g.total)
            ));
        }
        title.push_str(&format!("; {affinity}"));
        let mut m = BTreeMap::new();
        m.insert("worst_overlap_ns".into(), i(g.worst.overlap));
        m.insert("worst_start_ns".into(), i(g.worst.from));
        m.insert("worst_end_ns".into(), i(g.worst.to));
        m.insert("incidents".into(), i(g.count));
        m.insert("total_overlap_ns".into(), i(g.total));
        m.insert("waiting_cpu".into(), i64::from(wait_cpu));
        m.insert("idle_cpu".into(), i64::from(idle_cpu));
        let mut cpus = vec![wait_cpu, idle_cpu];
        cpus.sort_unstable();
        let kept: Vec<&Kept> = g.worst.evidence.iter().collect();
        let (kind, text) = match (allowed, probably_pinned) {
            (Some(true), _) => (
                "balancing",
                format!("Load balancing left CPU {idle_cpu} idle although {affinity}."),
            ),
            (_, true) => (
                "affinity",
                format!("Probably affinity: {comm} (pid {tid}) {affinity}; record its allowed CPUs with `sudo stallscope record -o trace.dat -- COMMAND` to decide."),
            ),
            _ => (
                "context_not_recorded",
                format!("Not decided: the task's affinity is not in the trace; `sudo stallscope record -o trace.dat -- COMMAND` stores each task's allowed CPUs, `taskset -p {tid}` shows them live."),
            ),
        };
        Some(Finding {
            cause: Some(stallscope_model::FindingCause {
                kind: kind.into(),
                text: text.clone(),
            }),
            detector: INFO.id.into(),
            severity,
            title,
            window: Window {
                start_ns: g.first,
                end_ns: g.last,
            },
            cpus,
            tasks: vec![FindingTask {
                pid: tid,
                comm: comm.as_str().to_string(),
                role: "victim".into(),
                measures: BTreeMap::new(),
            }],
            measures: m,
            evidence: render(cx, &kept),
            hint: format!(
                "{text} Check `taskset -p {tid}` and the task's cpuset: if it may run on CPU {idle_cpu}, look at load balancing (scheduler domains, idle states, isolcpus/nohz_full). `perf sched timehist` around {} s shows CPU {idle_cpu} in <idle>.",
                stallscope_model::fmt_secs_usecs(g.worst.from)
            ),
        })
    }
}

impl IdleWhileRunnable {
    /// The incidents of the wait of `tid` (since `since`) ending at `ts` with `ev`: the CPUs
    /// idle long enough meanwhile (out of line: most waits overlap no idle CPU).
    #[cold]
    #[inline(never)]
    fn idle_cpus_incidents(&mut self, (tid, since): (Tid, Ts), ts: Ts, ev: &Event) {
        let min = self.min_overlap;
        let idle: Vec<(Cpu, Ts, Kept)> = self
            .cpus
            .iter()
            .enumerate()
            .filter_map(|(c, s)| s.idle_since.get().map(|k| (c as Cpu, k.ts, k)))
            .filter(|&(_, t0, _)| overlap_reaches(since, t0, ts, min))
            .map(|(c, t0, k)| (c, t0, k.kept()))
            .collect();
        for (c, t0, k) in idle {
            self.incident(tid, c, (t0, &k), ts, ev);
        }
    }

    /// The incidents of the tasks that waited on other CPUs while the CPU of `ev`, which
    /// leaves idle with it, was idle since `was_idle` (out of line: most idle periods
    /// overlap no long wait).
    #[cold]
    #[inline(never)]
    fn idle_end_incidents(&mut self, was_idle: &KeptCopy<Switch>, ev: &Event) {
        let (c, since, min) = (ev.cpu, was_idle.ts, self.min_overlap);
        let hits: Vec<Tid> = self
            .waiting
            .list
            .iter()
            .filter(|w| w.overlaps_idle(c, (since, ev.ts), min))
            .map(|w| w.tid)
            .collect();
        let k = was_idle.kept();
        for t in hits {
            self.incident(t, c, (since, &k), ev.ts, ev);
        }
    }

    /// A switch on `ev.cpu`: the CPU leaves idle (incidents of tasks waiting elsewhere)
    /// or enters it (out of line: the other kinds inline into the run loop).
    #[inline(never)]
    fn on_switch(&mut self, ev: &Event, s: &Switch) {
        let c = ev.cpu;
        if s.prev.pid == 0 {
            if let Some(was_idle) = self.cpu(c).idle_since.take() {
                let (since, min) = (was_idle.ts, self.min_overlap);
                let waits = &self.waiting.list;
                if waits
                    .iter()
                    .any(|w| w.overlaps_idle(c, (since, ev.ts), min))
                {
                    self.idle_end_incidents(&was_idle, ev);
                }
            }
        } else {
            self.cpu(c).idle_since.clear();
        }
        if s.next.pid == 0 {
            self.cpu(c).idle_since.set(ev, s, EventKind::Switch);
            for w in &mut self.waiting.list {
                w.own_cpu_idled |= w.cpu == c;
            }
        }
    }
}

impl Detector for IdleWhileRunnable {
    fn info(&self) -> &'static DetectorInfo {
        &INFO
    }

    fn ignores_quiet_transitions(&self) -> bool {
        // Waits start at a transition to runnable and end at one from runnable.
        true
    }

    #[inline(always)]
    fn on_event(&mut self, ev: &Event) {
        // the small cases inline into the run loop, the switch out of line
        match &ev.kind {
            EventKind::Switch(s) => self.on_switch(ev, s),
            EventKind::Lost { .. } => {
                self.cpu(ev.cpu).idle_since.clear();
            }
            // A record showing a task running where no switch put it (a dropped switch
            // record, often the switch out of idle) is the timeline's repair rule: its
            // transition to a repaired run ends the idle time and the wait
            // (`on_transition`).
            _ => {}
        }
    }

    fn on_transition(&mut self, t: &Transition, ev: &Event) {
        match *t {
            Transition::State {
                tid,
                to:
                    TaskState::Running {
                        cpu,
                        repaired: true,
                        ..
                    },
                ..
            } => {
                // the timeline's repair rule: the task runs on `cpu` (its switch-in is not
                // in the trace), so that CPU is not idle, and the task is not waiting — a
                // wait whose end the trace does not show is no incident
                if let Some(c) = self.cpus.get_mut(cpu as usize) {
                    c.idle_since.clear();
                }
                self.waiting.remove(tid);
            }
            Transition::State { ts, tid, from, to } => {
                let waiting_at = match from {
                    TaskState::Runnable { .. } => self.waiting.index(tid),
                    _ => None,
                };
                if let (TaskState::Runnable { .. }, TaskState::Running { cpu, .. }) = (from, to) {
                    let p = self.placements.entry(tid);
                    p.0 |= 1u64 << cpu.min(63);
                    p.1 += 1;
                }
                if let Some(at) = waiting_at {
                    let since = self.waiting.list[at].since;
                    let min = self.min_overlap;
                    let overlapped = self.cpus.iter().any(|s| {
                        s.idle_since
                            .get()
                            .is_some_and(|k| overlap_reaches(since, k.ts, ts, min))
                    });
                    if overlapped {
                        self.idle_cpus_incidents((tid, since), ts, ev);
                    }
                    // incidents leave the waiting list as it was: the wait is still at `at`
                    self.waiting.remove_at(at, tid);
                }
                if let TaskState::Runnable { since, cpu, .. } = to {
                    // the CPU the timeline has it wait for (wakeup target, preempted on,
                    // migrated to)
                    let cpu = cpu.unwrap_or(ev.cpu);
                    self.waiting.insert(
                        Waiter {
                            tid,
                            since,
                            cpu,
                            own_cpu_idled: false,
                        },
                        ev,
                    );
                }
            }
            Transition::Migrated { tid, to_cpu, .. } => {
                if let Some(w) = self.waiting.get_mut(tid) {
                    w.cpu = to_cpu;
                }
            }
            Transition::Forked { .. } | Transition::Exited { .. } => {}
        }
    }

    fn finish(self: Box<Self>, cx: &Context<'_>) -> Vec<Finding> {
        // INVARIANT: the keys come from the map they index.
        let mut keys: Vec<&(Tid, Cpu, Cpu)> = self.groups.keys().collect();
        keys.sort_unstable();
        keys.into_iter()
            .filter_map(|k| self.finding(*k, &self.groups[k], cx))
            .collect()
    }
}

/// The program a recording command line runs under `taskset` and the CPU list it pins it
/// to: `… -- taskset -c 1 cyclictest …` → (`cyclictest`, `1`); `taskset 0x3 prog` →
/// (`prog`, `0-1`). The program is its file name cut to 15 bytes, as the kernel's `comm`.
/// `None` without `taskset`, for `taskset -p` (an existing pid) or an unreadable mask.
pub fn taskset_pin(cmdline: &str) -> Option<(String, String)> {
    let words: Vec<&str> = cmdline.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| w.rsplit('/').next() == Some("taskset"))?;
    let mut rest = words[at + 1..].iter();
    let mut list = None;
    while let Some(&w) = rest.next() {
        match w {
            "-p" | "--pid" => return None,
            "-a" | "--all-tasks" => {}
            "-c" | "--cpu-list" => list = Some(rest.next()?.to_string()),
            _ if w.starts_with("--cpu-list=") => list = Some(w["--cpu-list=".len()..].into()),
            _ if w.starts_with('-') => {}
            _ if list.is_none() => list = Some(mask_to_list(w)?),
            _ => {
                let name = w.rsplit('/').next().unwrap_or(w);
                let comm: String = name.chars().take(15).collect();
                return Some((comm, list?));
            }
        }
    }
    None
}

/// A `taskset` hex mask (`3`, `0x3`) as a CPU list (`0-1` → `0,1`).
fn mask_to_list(mask: &str) -> Option<String> {
    let v = u128::from_str_radix(mask.trim_start_matches("0x"), 16).ok()?;
    let cpus: Vec<String> = (0..128)
        .filter(|b| v >> b & 1 == 1)
        .map(|b| b.to_string())
        .collect();
    (!cpus.is_empty()).then(|| cpus.join(","))
}

#[cfg(test)]
mod tests;
