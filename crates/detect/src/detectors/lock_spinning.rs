//! `lock-spinning`: CPU samples spent waiting for kernel locks, attributed to the code path
//! that takes the lock. A profile detector: it reads a [`Profile`] (`on_profile`), not events.
//!
//! ```text
//!   per stack:  attribute() → None (not lock waiting) | (kind, family, wait fn, entry, caller)
//!   group key:  (lock family, the known lock of the caller)   e.g. (rwsem, "a directory
//!               inode's i_rwsem")  — or (family, caller) when the caller's lock is not known
//!   per group:  weight by kind (spin / slowpath / sleep / release), by entry, caller, task,
//!               CPU, time bucket; the heaviest stack per caller (evidence)
//!   finding:    a group with ≥ min_share_permille of all samples, or ≥ min_task_share_permille
//!               of its tasks' own samples (and ≥ min_samples samples)
//! ```
//!
//! Shares are of the profile's total weight (sample count or period sum), like `perf report`
//! percentages, in basis points (1/100 %) in measures. Memory: one record per distinct lock
//! path, task, CPU and time bucket.

mod attribute;
mod blocked;
pub mod classify;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};

use stallscope_model::{
    Comm, Cpu, Evidence, Finding, FindingSeverity, FindingTask, Profile, SpanPos, SymbolId, Tid,
    Ts, WeightUnit, Window,
};

use self::attribute::{attribute, known_lock, SymbolClasses, WaitKind};
use self::blocked::{blocked_by_path, path_name, Blocked, PathName};
use self::classify::Family;
use super::fmt::i;
use crate::params::{ParamInfo, ParamUnit, Params};
use crate::{Context, Detector, DetectorInfo, PROFILE_NEED};

/// The event name of the off-CPU profile the facade builds from `sched_switch` call stacks
/// (weights: nanoseconds off CPU); see [`blocked`].
pub const OFF_CPU_EVENT: &str = "off-cpu-ns";

/// Thresholds.
pub static PARAMS: [ParamInfo; 7] = [
    ParamInfo {
        name: "min_share_permille",
        default: 30,
        unit: ParamUnit::Permille,
        doc: "a lock path with at least this share of all samples is reported",
    },
    ParamInfo {
        name: "min_task_share_permille",
        default: 100,
        unit: ParamUnit::Permille,
        doc: "a lock path with at least this share of its waiting tasks' own samples is reported too (busy machines)",
    },
    ParamInfo {
        name: "medium_permille",
        default: 100,
        unit: ParamUnit::Permille,
        doc: "share of all samples that makes a finding medium",
    },
    ParamInfo {
        name: "high_permille",
        default: 250,
        unit: ParamUnit::Permille,
        doc: "share of all samples that makes a finding high (a time bucket this high makes it at least medium)",
    },
    ParamInfo {
        name: "min_samples",
        default: 20,
        unit: ParamUnit::Count,
        doc: "samples a lock path needs to be reported (profiles of percentages only are exempt)",
    },
    ParamInfo {
        name: "min_blocked_ns",
        default: 100_000_000,
        unit: ParamUnit::Ns,
        doc: "a lock path seen only in off-CPU stacks is reported when its waiters slept this long in total",
    },
    ParamInfo {
        name: "bucket_ns",
        default: 100_000_000,
        unit: ParamUnit::Ns,
        doc: "time bucket for the share over time (when samples have timestamps)",
    },
];

/// Description.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "lock-spinning",
    summary: "CPU samples spent spinning or waiting on kernel locks, by the code path taking the lock",
    explanation: EXPLANATION,
    needs: &[&[PROFILE_NEED]],
    optional: &[],
    record_command: "perf record -a -g -- COMMAND   (a CPU profile with call stacks; or give perf script / folded / perf report text of one)",
    params: &PARAMS,
};

const EXPLANATION: &str = r#"# lock-spinning

## What it finds
CPU time spent waiting for kernel locks, from a CPU profile with call stacks (`perf record
-a -g`, its `perf script` text, folded stacks or `perf report` text). A sample is lock
waiting when, from the sampled function upward, the first lock frame is a spin function
(`osq_lock`, `rwsem_spin_on_owner`, `rwsem_optimistic_spin`, `mutex_spin_on_owner`, the
queued spinlock / rwlock slowpaths `native_queued_spin_lock_slowpath`,
`__pv_queued_spin_lock_slowpath`, `queued_spin_lock_slowpath`, `queued_read_lock_slowpath`,
`queued_write_lock_slowpath`), a sleeping lock's slowpath (`rwsem_down_*_slowpath`,
`__down*`, `__mutex_lock*`), a release that wakes waiters (`rwsem_wake`, `__up`), or when
the sampled function itself is `_raw_spin_lock*` (self time). The sample is attributed to
its lock path: the outermost lock function (`down_write`) and the nearest caller that is not
lock code (`do_unlinkat`). Paths taking the same well-known lock are merged ("`down_write`
from `do_unlinkat` and `path_openat`: a directory inode's i_rwsem"); other paths are keyed
by their caller. Each path with at least `min_share_permille` (default 30 = 3 %) of all
samples — or with at least `min_task_share_permille` (default 100 = 10 %) of the samples of
the tasks that wait on it, for machines where other work takes most of the CPU — and at
least `min_samples` (default 20) samples is a finding, with its share split
into spinning, slowpath code, going to sleep and waking waiters, the share per CPU and —
when samples have timestamps — the peak share over `bucket_ns` (default 100 ms) buckets,
and the tasks that waited.

When the input also has `sched_switch` events recorded with call stacks (`perf record -a -g
-e cpu-clock/freq=499/ -e 'sched:*' -c 1`), every blocked switch-out whose stack goes
through a lock slowpath counts as a sleep on that path until the task runs again: the
finding gains `blocked_ns`, `sleeps` and `max_blocked_ns` ("off CPU: 8 tasks blocked
812.345 ms in 1269 sleeps"). A path seen only in those off-CPU stacks is reported (low) when
its waiters slept at least `min_blocked_ns` (default 100 ms) in total, in at least
`min_samples` sleeps. `blocked_share_bp` is the blocked time over the waiters' time between
the first and last switch-out on the path (tasks × that span).

## Why it matters
A CPU spinning on a lock does no work; a task sleeping on one does not run. Many tasks
creating and unlinking files in one directory serialize on the directory inode's rwsem;
threads faulting in one address space serialize on its mmap_lock; a global spinlock caps
throughput at one CPU. Adding CPUs or threads makes these worse.

## How to confirm
`perf report --no-children --sort sym -i FILE` on the same file prints the self shares the
finding lists (`self_<function>_bp` measures, in hundredths of a percent: 867 = 8.67 %);
`perf report --no-children -S rwsem_spin_on_owner -G -i FILE` shows the callers.
`perf lock contention -ab -- sleep 5` (BPF) names the contended lock and its waiters.

## Limits
A CPU profile sees on-CPU time only: the time a waiter sleeps is not sampled (its cost
shows as idle CPUs or other tasks running, and as the `sleep` share: scheduler code under
the slowpath). Which lock a path takes is a guess from function names: the profile has no
lock addresses, so two locks taken by the same caller are one path. Spinning with
interrupts disabled is sampled late by timer-based events (`cpu-clock` in VMs): those
samples land on `_raw_spin_unlock_irqrestore` and are not counted. Inlined lock functions
have no frame (the kernel inlines `inode_lock` into its callers and, on some kernels,
`rwsem_optimistic_spin` into the slowpath, whose self time then counts as `slowpath`).
To record scheduler events in the same file, give the profile event its own frequency
(`perf record -a -g -e cpu-clock/freq=499/ -e 'sched:*' -c 1`): a plain `-F` also
samples the tracepoints (perf 6.1), which loses scheduler events.
`perf report` text is pruned below its threshold; its shares are percentages only. A lock
sample whose stack ends at the lock functions (no caller: perf report pruned it, or the
unwinder stopped) counts in `all_locks_share_bp` but forms no path.

## Severity
- **high**: the path has at least `high_permille` (default 250 = 25 %) of all samples.
- **medium**: at least `medium_permille` (default 100 = 10 %), or one `bucket_ns` bucket
  (with `min_samples` samples) at `high_permille` or more.
- **low**: otherwise (at least `min_share_permille`).
- With off-CPU stacks, the same thresholds apply to `blocked_share_bp` too; the higher
  severity wins.
"#;

/// Builds the detector.
pub fn make(p: &Params) -> Box<dyn Detector> {
    Box::new(LockSpinning {
        params: p.clone(),
        findings: Vec::new(),
        blocked: BTreeMap::new(),
    })
}

struct LockSpinning {
    params: Params,
    findings: Vec<(PathName, Finding)>,
    blocked: BTreeMap<PathName, Blocked>,
}

impl Detector for LockSpinning {
    fn info(&self) -> &'static DetectorInfo {
        &INFO
    }

    fn event_kinds(&self) -> u32 {
        0 // profiles only
    }

    fn wants_transitions(&self) -> bool {
        false
    }

    fn on_profile(&mut self, p: &Profile, cx: &Context<'_>) {
        if matches!(&p.unit, WeightUnit::Period(e) if e == OFF_CPU_EVENT) {
            for (k, b) in blocked_by_path(p, cx.paths) {
                let slot = self.blocked.entry(k).or_default();
                merge_blocked(slot, b);
            }
        } else {
            self.findings.extend(find_named(p, &self.params, cx.paths));
        }
    }

    fn finish(self: Box<Self>, _cx: &Context<'_>) -> Vec<Finding> {
        let LockSpinning {
            params,
            findings,
            mut blocked,
        } = *self;
        let mut out = Vec::new();
        for (name, mut f) in findings {
            if let Some(b) = blocked.remove(&name) {
                add_blocked(&mut f, &b, &params);
            }
            out.push(f);
        }
        let min_ns = params.get("min_blocked_ns");
        let min_sleeps = params.get("min_samples");
        for (name, b) in blocked {
            if b.ns >= min_ns && b.sleeps >= min_sleeps && !name.1.is_empty() {
                out.push(blocked_finding(&name, &b, &params));
            }
        }
        out
    }
}

/// Identity of a task in a profile (pid when known, and the name).
type TaskKey = (Option<Tid>, Comm);

/// What a group merges on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum GroupKey {
    Known(Family, &'static str),
    Caller(Family, Option<SymbolId>),
}

#[derive(Default)]
struct Group {
    weight: u64,
    stacks: u64,
    by_kind: [u64; 4],
    entries: BTreeMap<SymbolId, u64>,
    callers: BTreeMap<Option<SymbolId>, u64>,
    /// Lock functions that are the sampled leaf in this group's stacks.
    leaves: BTreeMap<SymbolId, u64>,
    spin_fns: BTreeMap<SymbolId, u64>,
    tasks: HashMap<TaskKey, u64>,
    cpus: BTreeMap<Cpu, u64>,
    buckets: BTreeMap<u64, u64>,
    first: Option<Ts>,
    last: Option<Ts>,
    /// Per caller: (weight, index) of its heaviest stack.
    example: BTreeMap<Option<SymbolId>, (u64, usize)>,
}

/// Whole-profile totals.
#[derive(Default)]
struct Totals {
    weight: u64,
    stacks: u64,
    lock_weight: u64,
    cpus: BTreeMap<Cpu, u64>,
    tasks: HashMap<TaskKey, u64>,
    buckets: BTreeMap<u64, (u64, u64)>,
    first_ts: Option<Ts>,
}

/// Weights from input files: saturating, so an absurd folded count cannot overflow.
fn add(slot: &mut u64, w: u64) {
    *slot = slot.saturating_add(w);
}

/// `part / whole` in basis points (1/100 %), rounded half up; 0 when `whole` is 0.
pub fn basis_points(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        return 0;
    }
    let v = (u128::from(part) * 10_000 + u128::from(whole) / 2) / u128::from(whole);
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// `12.34%` from basis points.
fn pct(bp: u64) -> String {
    format!("{}.{:02}%", bp / 100, bp % 100)
}

/// The findings of `p` with parameters `params`; `paths` name the inputs for evidence.
pub fn find(p: &Profile, params: &Params, paths: &[String]) -> Vec<Finding> {
    find_named(p, params, paths)
        .into_iter()
        .map(|(_, f)| f)
        .collect()
}

/// [`find`], each finding with the name of its path (to match the off-CPU profile's).
fn find_named(p: &Profile, params: &Params, paths: &[String]) -> Vec<(PathName, Finding)> {
    let classes = SymbolClasses::new(p);
    let bucket_ns = params.get("bucket_ns").max(1);
    let first_ts = p.stacks.iter().filter_map(|s| s.ts).min();
    let mut totals = Totals {
        first_ts,
        ..Totals::default()
    };
    let mut groups: BTreeMap<GroupKey, Group> = BTreeMap::new();
    // self weight per symbol, like `perf report --no-children --sort sym` (saturating)
    let mut self_weights = vec![0u64; p.symbols.len()];
    for (idx, s) in p.stacks.iter().enumerate() {
        if let Some(slot) = s
            .frames
            .first()
            .and_then(|&f| self_weights.get_mut(f as usize))
        {
            add(slot, s.weight);
        }
        add(&mut totals.weight, s.weight);
        totals.stacks += 1;
        if let Some(c) = s.cpu {
            add(totals.cpus.entry(c).or_default(), s.weight);
        }
        let task: TaskKey = (s.pid, s.comm.unwrap_or(Comm::EMPTY));
        add(totals.tasks.entry(task).or_default(), s.weight);
        let bucket = match (s.ts, first_ts) {
            (Some(t), Some(f)) => Some((t - f) / bucket_ns),
            _ => None,
        };
        if let Some(b) = bucket {
            add(&mut totals.buckets.entry(b).or_default().0, s.weight);
        }
        let Some(a) = attribute(&classes, p, &s.frames) else {
            continue; // not lock waiting: counted in the totals only
        };
        add(&mut totals.lock_weight, s.weight);
        if let Some(b) = bucket {
            add(&mut totals.buckets.entry(b).or_default().1, s.weight);
        }
        let key = match a.caller.and_then(|c| known_lock(a.family, p.symbol(c))) {
            Some(label) => GroupKey::Known(a.family, label),
            None => GroupKey::Caller(a.family, a.caller),
        };
        let g = groups.entry(key).or_default();
        add(&mut g.weight, s.weight);
        g.stacks += 1;
        add(&mut g.by_kind[a.kind as usize], s.weight);
        add(g.entries.entry(a.entry).or_default(), s.weight);
        add(g.callers.entry(a.caller).or_default(), s.weight);
        if let Some(&leaf) = s.frames.first() {
            if classes.is_lock(leaf) {
                add(g.leaves.entry(leaf).or_default(), s.weight);
            }
        }
        if a.kind == WaitKind::Spin {
            add(g.spin_fns.entry(a.wait_fn).or_default(), s.weight);
        }
        add(g.tasks.entry(task).or_default(), s.weight);
        if let Some(c) = s.cpu {
            add(g.cpus.entry(c).or_default(), s.weight);
        }
        if let Some(b) = bucket {
            add(g.buckets.entry(b).or_default(), s.weight);
        }
        if let Some(t) = s.ts {
            g.first = Some(g.first.map_or(t, |f| f.min(t)));
            g.last = Some(g.last.map_or(t, |l| l.max(t)));
        }
        let ex = g.example.entry(a.caller).or_insert((s.weight, idx));
        if s.weight > ex.0 {
            *ex = (s.weight, idx);
        }
    }
    if p.unit == WeightUnit::BasisPoints {
        // perf report percentages are of perf's whole profile (10 000 bp): an excerpt (one
        // entry, a `--comm` report) covers part of it, and its shares stay perf's
        totals.weight = totals.weight.max(10_000);
    }
    let mut out: Vec<(PathName, Finding)> = groups
        .iter()
        .filter_map(|(key, g)| {
            let name = match *key {
                GroupKey::Known(f, l) => (f, l.to_string()),
                GroupKey::Caller(f, c) => path_name(f, c.map(|c| p.symbol(c))),
            };
            finding(p, params, paths, &totals, &self_weights, *key, g, bucket_ns).map(|f| (name, f))
        })
        .collect();
    out.sort_by(|(_, a), (_, b)| {
        b.measures["share_bp"]
            .cmp(&a.measures["share_bp"])
            .then_with(|| a.title.cmp(&b.title))
    });
    out
}

fn merge_blocked(into: &mut Blocked, b: Blocked) {
    into.ns = into.ns.saturating_add(b.ns);
    into.sleeps += b.sleeps;
    if b.max_ns >= into.max_ns {
        into.example = b.example.or(into.example.take());
    }
    into.max_ns = into.max_ns.max(b.max_ns);
    for (pid, (c, ns)) in b.tasks {
        let t = into.tasks.entry(pid).or_insert((c, 0));
        t.1 = t.1.saturating_add(ns);
    }
    for e in b.entries {
        if !into.entries.contains(&e) {
            into.entries.push(e);
        }
    }
    into.first = match (into.first, b.first) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    };
    into.last = into.last.max(b.last);
}

/// Blocked time as a share of the waiting tasks' time between the first and last
/// switch-out, in basis points (at most 10 000).
fn blocked_share(b: &Blocked) -> u64 {
    let span = b
        .last
        .unwrap_or(0)
        .saturating_sub(b.first.unwrap_or(0))
        .max(1);
    basis_points(b.ns, span.saturating_mul(b.tasks.len().max(1) as u64)).min(10_000)
}

/// Severity from a share in basis points and the `*_permille` thresholds.
fn severity_of(bp: u64, params: &Params) -> FindingSeverity {
    if bp >= params.get("high_permille").saturating_mul(10) {
        FindingSeverity::High
    } else if bp >= params.get("medium_permille").saturating_mul(10) {
        FindingSeverity::Medium
    } else {
        FindingSeverity::Low
    }
}

/// Adds the off-CPU sleeping of the same path to a CPU finding.
fn add_blocked(f: &mut Finding, b: &Blocked, params: &Params) {
    let share = blocked_share(b);
    f.severity = f.severity.max(severity_of(share, params));
    f.measures.insert("blocked_share_bp".into(), i(share));
    f.measures.insert("blocked_ns".into(), i(b.ns));
    f.measures.insert("sleeps".into(), i(b.sleeps));
    f.measures.insert("max_blocked_ns".into(), i(b.max_ns));
    f.title.push_str(&format!(
        "; off CPU: {} task{} blocked {} ({} of their time) in {} sleeps (longest {})",
        b.tasks.len(),
        if b.tasks.len() == 1 { "" } else { "s" },
        super::fmt::dur(b.ns),
        pct(share),
        b.sleeps,
        super::fmt::dur(b.max_ns)
    ));
    if let Some(e) = &b.example {
        f.evidence.push(e.clone());
        f.evidence.sort_by_key(|e| e.ts_ns);
    }
}

/// A finding for a path seen only in off-CPU stacks.
fn blocked_finding(name: &PathName, b: &Blocked, params: &Params) -> Finding {
    let share = blocked_share(b);
    let mut tasks: Vec<(&Tid, &(Comm, u64))> = b.tasks.iter().collect();
    tasks.sort_by(|a, c| c.1 .1.cmp(&a.1 .1).then(a.0.cmp(c.0)));
    let comms: Vec<String> = {
        let mut v: Vec<String> = Vec::new();
        for (_, (c, _)) in &tasks {
            let n = if c.is_empty() { "?" } else { c.as_str() };
            if !v.iter().any(|x| x == n) && v.len() < 3 {
                v.push(n.to_string());
            }
        }
        v
    };
    // a known lock's description has spaces; otherwise the path is named by its caller
    let what = if name.1.contains(' ') {
        format!("on {}", name.1)
    } else {
        format!("from {}", name.1)
    };
    let mut m = BTreeMap::new();
    m.insert("blocked_ns".to_string(), i(b.ns));
    m.insert("blocked_share_bp".to_string(), i(share));
    m.insert("sleeps".to_string(), i(b.sleeps));
    m.insert("max_blocked_ns".to_string(), i(b.max_ns));
    m.insert("tasks".to_string(), i(b.tasks.len() as u64));
    Finding {
        cause: None,
        detector: INFO.id.into(),
        severity: severity_of(share, params),
        title: format!(
            "{} {what}: {} task{} ({}) blocked {} ({} of their time) in {} sleeps waiting for this {} (off-CPU stacks; longest {})",
            b.entries.join(" and "),
            b.tasks.len(),
            if b.tasks.len() == 1 { "" } else { "s" },
            comms.join(", "),
            super::fmt::dur(b.ns),
            pct(share),
            b.sleeps,
            name.0.name(),
            super::fmt::dur(b.max_ns)
        ),
        window: Window {
            start_ns: b.first.unwrap_or(0),
            end_ns: b.last.unwrap_or(0),
        },
        cpus: Vec::new(),
        tasks: tasks
            .iter()
            .take(8)
            .map(|(pid, (c, ns))| {
                let mut tm = BTreeMap::new();
                tm.insert("blocked_ns".to_string(), i(*ns));
                FindingTask {
                    pid: **pid,
                    comm: c.as_str().to_string(),
                    role: "waiter".into(),
                    measures: tm,
                }
            })
            .collect(),
        measures: m,
        evidence: b.example.iter().cloned().collect(),
        hint: "Off-CPU time from sched_switch call stacks: the tasks slept in this lock's slowpath. `perf sched timehist -g` shows the switch-outs; `perf lock contention -ab -- sleep 5` names the lock.".to_string(),
    }
}

/// Names of the heaviest keys of `m` (at least 10 % of `total`, at most 3), heaviest first,
/// and how many more there are.
fn top_names<'a>(
    m: &BTreeMap<Option<SymbolId>, u64>,
    total: u64,
    name: impl Fn(Option<SymbolId>) -> &'a str,
) -> (Vec<&'a str>, usize) {
    let mut v: Vec<(Option<SymbolId>, u64)> = m.iter().map(|(k, w)| (*k, *w)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let shown: Vec<&str> = v
        .iter()
        .enumerate()
        .filter(|(n, (_, w))| *n == 0 || (*n < 3 && w.saturating_mul(10) >= total))
        .map(|(_, (k, _))| name(*k))
        .collect();
    let more = v.len() - shown.len();
    (shown, more)
}

fn join_and(names: &[&str], more: usize) -> String {
    let mut s = match names {
        [] => String::new(),
        [a] => (*a).to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    };
    if more > 0 {
        s.push_str(&format!(" (+{more} more)"));
    }
    s
}

#[allow(clippy::too_many_arguments)]
fn finding(
    p: &Profile,
    params: &Params,
    paths: &[String],
    totals: &Totals,
    self_weights: &[u64],
    key: GroupKey,
    g: &Group,
    bucket_ns: u64,
) -> Option<Finding> {
    if matches!(key, GroupKey::Caller(_, None)) {
        return None; // no caller: not a path (counted in all_locks_share_bp)
    }
    let share = basis_points(g.weight, totals.weight);
    let task_weight: u64 = g
        .tasks
        .keys()
        .map(|k| totals.tasks.get(k).copied().unwrap_or(0))
        .fold(0u64, u64::saturating_add);
    let tasks_share = basis_points(g.weight, task_weight);
    if share.saturating_mul(10) < params.get("min_share_permille").saturating_mul(100)
        && tasks_share.saturating_mul(10)
            < params.get("min_task_share_permille").saturating_mul(100)
    {
        return None;
    }
    let samples = match p.unit {
        WeightUnit::Samples => Some(g.weight),
        WeightUnit::Period(_) => Some(g.stacks),
        WeightUnit::BasisPoints => None,
    };
    if samples.is_some_and(|n| n < params.get("min_samples")) {
        return None;
    }
    let sym = |id: Option<SymbolId>| id.map_or("[no caller]", |i| p.symbol(i));
    let (family, label) = match key {
        GroupKey::Known(f, l) => (f, Some(l)),
        GroupKey::Caller(f, _) => (f, None),
    };
    let entries: BTreeMap<Option<SymbolId>, u64> =
        g.entries.iter().map(|(k, w)| (Some(*k), *w)).collect();
    let (mut entry_names, more_entries) = top_names(&entries, g.weight, sym);
    // acquiring entries first (`down_write and up_write`), releasing ones after
    entry_names.sort_by_key(|n| {
        let b = classify::base_name(n);
        b == "up" || b.starts_with("up_") || b.contains("unlock") || b.starts_with("percpu_up")
    });
    let (caller_names, more_callers) = top_names(&g.callers, g.weight, sym);
    let kind_bp: Vec<(WaitKind, u64)> = WaitKind::ALL
        .iter()
        .map(|k| (*k, basis_points(g.by_kind[*k as usize], totals.weight)))
        .collect();
    let top_spin = g
        .spin_fns
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(id, _)| p.symbol(*id));

    // tasks, heaviest first
    let mut tasks: Vec<(TaskKey, u64)> = g.tasks.iter().map(|(k, w)| (*k, *w)).collect();
    tasks.sort_by(|a, b| b.1.cmp(&a.1).then(a.0 .0.cmp(&b.0 .0)));
    let mut comms: Vec<(String, u64)> = Vec::new();
    for ((_, c), w) in &tasks {
        match comms.iter_mut().find(|(n, _)| n == c.as_str()) {
            Some(e) => add(&mut e.1, *w),
            None => comms.push((c.as_str().to_string(), *w)),
        }
    }
    comms.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));

    // over time
    let min_samples = params.get("min_samples");
    let peak = if totals.buckets.len() >= 2 {
        g.buckets
            .iter()
            .filter_map(|(b, w)| {
                let all = totals.buckets.get(b).map_or(0, |x| x.0);
                let enough = match p.unit {
                    WeightUnit::Samples => all >= min_samples,
                    _ => true,
                };
                enough.then(|| (basis_points(*w, all), *b))
            })
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
    } else {
        None
    };

    // severity
    let permille = |name: &str| params.get(name).saturating_mul(10);
    let mut severity = if share >= permille("high_permille") {
        FindingSeverity::High
    } else if share >= permille("medium_permille") {
        FindingSeverity::Medium
    } else {
        FindingSeverity::Low
    };
    if severity == FindingSeverity::Low
        && peak.is_some_and(|(bp, _)| bp >= permille("high_permille"))
    {
        severity = FindingSeverity::Medium;
    }

    // measures
    let mut m = BTreeMap::new();
    m.insert("share_bp".to_string(), i(share));
    for (k, bp) in &kind_bp {
        m.insert(format!("{}_bp", k.name()), i(*bp));
    }
    m.insert(
        "all_locks_share_bp".to_string(),
        i(basis_points(totals.lock_weight, totals.weight)),
    );
    if let Some(n) = samples {
        m.insert("samples".to_string(), i(n));
        let total = match p.unit {
            WeightUnit::Samples => totals.weight,
            _ => totals.stacks,
        };
        m.insert("total_samples".to_string(), i(total));
    }
    m.insert("tasks".to_string(), i(tasks.len() as u64));
    m.insert("tasks_share_bp".to_string(), i(tasks_share));
    for (c, w) in &g.callers {
        m.insert(
            format!("caller_{}_bp", sym(*c)),
            i(basis_points(*w, totals.weight)),
        );
    }
    let mut self_rows = Vec::new();
    for leaf in g.leaves.keys() {
        let whole = self_weights.get(*leaf as usize).copied().unwrap_or(0);
        let bp = basis_points(whole, totals.weight);
        m.insert(format!("self_{}_bp", p.symbol(*leaf)), i(bp));
        self_rows.push((bp, p.symbol(*leaf)));
    }
    self_rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    for (c, w) in &g.cpus {
        let all = totals.cpus.get(c).copied().unwrap_or(0);
        m.insert(format!("cpu{c}_share_bp"), i(basis_points(*w, all)));
    }
    if let Some((bp, b)) = peak {
        m.insert("peak_share_bp".to_string(), i(bp));
        m.insert(
            "peak_start_ns".to_string(),
            i(totals.first_ts.unwrap_or(0) + b * bucket_ns),
        );
        m.insert("bucket_ns".to_string(), i(bucket_ns));
    }

    // title
    let what = match label {
        Some(l) => format!(", {l}"),
        None => String::new(),
    };
    let mut parts = Vec::new();
    for (k, bp) in &kind_bp {
        if *bp == 0 {
            continue;
        }
        let words = match k {
            WaitKind::Spin => match top_spin {
                Some(f) => format!("{} spinning ({f})", pct(*bp)),
                None => format!("{} spinning", pct(*bp)),
            },
            WaitKind::Slowpath => format!("{} in the slowpath", pct(*bp)),
            WaitKind::Sleep => format!("{} going to sleep", pct(*bp)),
            WaitKind::Release => format!("{} waking waiters", pct(*bp)),
        };
        parts.push(words);
    }
    // named tasks by name; unnamed ones (perf.data without their COMM record) by pid
    let mut comm_names: Vec<String> = comms
        .iter()
        .filter(|(c, _)| !c.is_empty())
        .take(3)
        .map(|(c, _)| c.clone())
        .collect();
    if comm_names.is_empty() {
        comm_names = tasks
            .iter()
            .filter_map(|((pid, _), _)| pid.map(|p| format!("pid {p}")))
            .take(3)
            .collect();
        if tasks.len() > 3 {
            comm_names.push("…".to_string());
        }
    }
    let who = if tasks
        .iter()
        .all(|((pid, c), _)| pid.is_none() && c.is_empty())
    {
        "tasks not recorded".to_string()
    } else {
        format!(
            "{} task{} ({}), {} of their samples",
            tasks.len(),
            if tasks.len() == 1 { "" } else { "s" },
            comm_names.join(", "),
            pct(tasks_share)
        )
    };
    let title = format!(
        "{} from {}{what}: {} of all CPU samples wait for this {} — {}; {who}",
        join_and(&entry_names, more_entries),
        join_and(&caller_names, more_callers),
        pct(share),
        family.name(),
        parts.join(", "),
    );

    // tasks named
    let finding_tasks: Vec<FindingTask> = tasks
        .iter()
        .take(8)
        .map(|((pid, comm), w)| {
            let own = totals.tasks.get(&(*pid, *comm)).copied().unwrap_or(0);
            let mut tm = BTreeMap::new();
            tm.insert("share_bp".to_string(), i(basis_points(*w, totals.weight)));
            tm.insert("own_samples_share_bp".to_string(), i(basis_points(*w, own)));
            FindingTask {
                pid: pid.unwrap_or(-1),
                comm: comm.as_str().to_string(),
                role: "waiter".into(),
                measures: tm,
            }
        })
        .collect();

    // evidence: the heaviest stack of each caller, heaviest callers first
    let mut examples: Vec<(u64, Option<SymbolId>, usize)> = g
        .example
        .iter()
        .map(|(c, (_, idx))| (g.callers.get(c).copied().unwrap_or(0), *c, *idx))
        .collect();
    examples.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.cmp(&b.2)));
    let mut evidence: Vec<Evidence> = examples
        .iter()
        .take(4)
        .filter_map(|(_, _, idx)| p.stacks.get(*idx).map(|s| stack_evidence(p, s, paths)))
        .collect();
    evidence.sort_by_key(|e| e.ts_ns);

    let file = paths.first().map_or("FILE", String::as_str);
    let checks: Vec<String> = self_rows
        .iter()
        .take(4)
        .map(|(bp, n)| format!("{n} {}", pct(*bp)))
        .collect();
    let spin_fn = top_spin
        .or(self_rows.first().map(|r| r.1))
        .unwrap_or("osq_lock");
    let advice = match (family, label) {
        (_, Some(l)) if l.contains("directory") => {
            "Many tasks create, unlink or rename entries of one directory: spread them over several directories (one per worker, or hashed subdirectories)."
        }
        (_, Some(l)) if l.contains("mmap_lock") => {
            "Threads of one process fault or map memory concurrently: reduce mmap/munmap churn, prefault, or use per-thread arenas."
        }
        (Family::Spinlock | Family::Rwlock, _) => {
            "Find the lock the caller takes (`perf annotate` the caller, or `perf lock contention -ab -- sleep 5`)."
        }
        _ => "`perf lock contention -ab -- sleep 5` (BPF) names the contended lock and its waiters.",
    };
    // a perf report text is no input of perf report: point at the perf.data it came from
    let (on, input) = match p.unit {
        WeightUnit::BasisPoints => (
            "On the perf.data this report was made from, ",
            String::new(),
        ),
        _ => ("", format!(" -i {file}")),
    };
    let hint = format!(
        "{on}`perf report --no-children --sort sym{input}` shows the lock functions' self shares ({}); `perf report --no-children -S {spin_fn} -G{input}` shows the callers. {advice}",
        checks.join(", ")
    );

    let cpus: Vec<Cpu> = g.cpus.keys().copied().collect();
    Some(Finding {
        cause: None,
        detector: INFO.id.into(),
        severity,
        title,
        window: Window {
            start_ns: g.first.unwrap_or(0),
            end_ns: g.last.unwrap_or(0),
        },
        cpus,
        tasks: finding_tasks,
        measures: m,
        evidence,
        hint,
    })
}

/// One stack as evidence: `comm pid [cpu] leaf ← … ← caller ← its caller (weight N)`.
fn stack_evidence(p: &Profile, s: &stallscope_model::WeightedStack, paths: &[String]) -> Evidence {
    let path = paths
        .get(usize::from(s.span.input()))
        .map_or("?", String::as_str);
    let source = match s.span.pos() {
        SpanPos::Line(l) => format!("{path}:{l}"),
        SpanPos::Byte(b) => format!("{path}:{b:#x}"),
    };
    let mut head = String::new();
    if let Some(c) = s.comm {
        head.push_str(c.as_str());
        head.push(' ');
    }
    if let Some(pid) = s.pid {
        head.push_str(&format!("{pid} "));
    }
    if let Some(cpu) = s.cpu {
        head.push_str(&format!("[{cpu:03}] "));
    }
    let frames: Vec<&str> = s.frames.iter().take(10).map(|f| p.symbol(*f)).collect();
    Evidence {
        ts_ns: s.ts.unwrap_or(0),
        source,
        text: format!("{head}{} (weight {})", frames.join(" ← "), s.weight),
        ..Evidence::default()
    }
}
