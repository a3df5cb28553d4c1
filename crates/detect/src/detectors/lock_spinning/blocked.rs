//! Off-CPU stacks: how long waiters slept on each lock path.
//!
//! The facade turns `sched_switch` events recorded with call stacks (`perf record -g -e
//! sched:sched_switch -c 1`) into a second profile: one stack per blocked switch-out (the
//! switch-out's call chain, leaf first), weighing the nanoseconds until the task's next
//! switch-in, with unit `Period(OFF_CPU_EVENT)`. Each stack is attributed like a CPU sample
//! ([`super::attribute`]: scheduler frames under `rwsem_down_write_slowpath` make it a
//! sleep) and summed per lock path. Paths are keyed by names, not symbol ids, so they match
//! the CPU profile's paths.
//!
//! ```text
//! [__schedule, schedule, schedule_preempt_disabled, rwsem_down_write_slowpath, down_write,
//!  path_openat, …]  weight 1_204_331 ns   →  (rwsem, "a directory inode's i_rwsem …") += 1.2 ms
//! ```

use std::collections::BTreeMap;

use stallscope_model::{Comm, Evidence, Profile, SpanPos, Tid, Ts};

use super::attribute::{attribute, known_lock, SymbolClasses};
use super::classify::Family;

/// A lock path, by names: the lock family and the known lock's description or the caller.
pub type PathName = (Family, String);

/// The sleeping on one lock path.
#[derive(Clone, Debug, Default)]
pub struct Blocked {
    /// Total nanoseconds off CPU.
    pub ns: u64,
    /// Number of sleeps.
    pub sleeps: u64,
    /// Longest single sleep.
    pub max_ns: u64,
    /// Per task: name and nanoseconds.
    pub tasks: BTreeMap<Tid, (Comm, u64)>,
    /// Lock entry functions seen.
    pub entries: Vec<String>,
    /// First switch-out.
    pub first: Option<Ts>,
    /// Last switch-out.
    pub last: Option<Ts>,
    /// The longest sleep's switch-out, as evidence.
    pub example: Option<Evidence>,
}

/// The name of a path for matching across profiles.
pub fn path_name(fam: Family, caller: Option<&str>) -> PathName {
    match caller {
        Some(c) => match known_lock(fam, c) {
            Some(label) => (fam, label.to_string()),
            None => (fam, c.to_string()),
        },
        None => (fam, String::new()),
    }
}

/// Sums the off-CPU profile `p` per lock path (stacks without a lock path are ignored).
pub fn blocked_by_path(p: &Profile, paths: &[String]) -> BTreeMap<PathName, Blocked> {
    let classes = SymbolClasses::new(p);
    let mut out: BTreeMap<PathName, Blocked> = BTreeMap::new();
    for s in &p.stacks {
        let Some(a) = attribute(&classes, p, &s.frames) else {
            continue; // blocked on something else (I/O, futex, poll): not a lock
        };
        let Some(caller) = a.caller else {
            continue; // no caller: not a path
        };
        let b = out
            .entry(path_name(a.family, Some(p.symbol(caller))))
            .or_default();
        b.ns = b.ns.saturating_add(s.weight);
        b.sleeps += 1;
        let entry = p.symbol(a.entry);
        if !b.entries.iter().any(|e| e == entry) {
            b.entries.push(entry.to_string());
        }
        if let Some(pid) = s.pid {
            let t = b.tasks.entry(pid).or_insert((Comm::EMPTY, 0));
            if let Some(c) = s.comm {
                t.0 = c;
            }
            t.1 = t.1.saturating_add(s.weight);
        }
        if let Some(t) = s.ts {
            b.first = Some(b.first.map_or(t, |f| f.min(t)));
            b.last = Some(b.last.map_or(t, |l| l.max(t)));
        }
        if s.weight > b.max_ns || b.example.is_none() {
            b.max_ns = b.max_ns.max(s.weight);
            let path = paths
                .get(usize::from(s.span.input()))
                .map_or("?", String::as_str);
            let source = match s.span.pos() {
                SpanPos::Line(l) => format!("{path}:{l}"),
                SpanPos::Byte(o) => format!("{path}:{o:#x}"),
            };
            let frames: Vec<&str> = s.frames.iter().take(10).map(|f| p.symbol(*f)).collect();
            let comm = s.comm.unwrap_or(Comm::EMPTY);
            b.example = Some(Evidence {
                ts_ns: s.ts.unwrap_or(0),
                source,
                text: format!(
                    "{} {} switched out for {} ns: {}",
                    if comm.is_empty() { "?" } else { comm.as_str() },
                    s.pid.unwrap_or(-1),
                    s.weight,
                    frames.join(" ← ")
                ),
                ..Evidence::default()
            });
        }
    }
    out
}
