//! Event groups of `--events` and their resolution against the running kernel.
//!
//! ```text
//! sched      sched_switch sched_waking sched_wakeup sched_wakeup_new sched_migrate_task
//!            sched_process_fork sched_process_exit sched_process_exec sched_stat_runtime
//! block      block_bio_queue block_rq_insert block_rq_issue block_rq_complete
//!            block_rq_merge block_rq_requeue
//! workqueue  every event of events/workqueue/
//! irq        irq:irq_handler_entry irq:irq_handler_exit          (on request)
//! softirq    irq:softirq_raise irq:softirq_entry irq:softirq_exit  (on request)
//! chain      sched, block, workqueue, irq and softirq: what a blocked chain needs (who woke a
//!            sleeper, from an interrupt or a work item, after which request)
//! SYS:EVENT  one event by name, e.g. `sched:sched_wakeup` (also SYS:* for a whole system)
//! ```
//! Events this kernel lacks are skipped with a warning; an empty result is an error.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// Groups recorded when `--events` is not given.
pub const DEFAULT_GROUPS: &str = "sched,block,workqueue";

const SCHED: &[&str] = &[
    "sched_switch",
    "sched_waking",
    "sched_wakeup",
    "sched_wakeup_new",
    "sched_migrate_task",
    "sched_process_fork",
    "sched_process_exit",
    "sched_process_exec",
    "sched_stat_runtime",
];
const BLOCK: &[&str] = &[
    "block_bio_queue",
    "block_rq_insert",
    "block_rq_issue",
    "block_rq_complete",
    "block_rq_merge",
    "block_rq_requeue",
];
const IRQ: &[&str] = &["irq_handler_entry", "irq_handler_exit"];
const SOFTIRQ: &[&str] = &["softirq_raise", "softirq_entry", "softirq_exit"];

/// One tracepoint to enable.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct EventId {
    /// System (directory under `events/`).
    pub system: String,
    /// Event name.
    pub name: String,
}

/// Resolved events, grouped by system (sorted), plus warnings about missing ones.
#[derive(Debug, Default)]
pub struct ResolvedEvents {
    /// system → events, in a stable order.
    pub by_system: BTreeMap<String, Vec<String>>,
    /// Human-readable warnings (`sched:sched_foo does not exist on this kernel`).
    pub warnings: Vec<String>,
}

impl ResolvedEvents {
    /// All events as `system:name`.
    pub fn names(&self) -> Vec<String> {
        self.by_system
            .iter()
            .flat_map(|(s, evs)| evs.iter().map(move |e| format!("{s}:{e}")))
            .collect()
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.by_system.values().map(Vec::len).sum()
    }

    /// True when nothing resolved.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a group name asks for, before checking the kernel.
fn wanted(group: &str, events_dir: &Path) -> Result<Vec<EventId>, String> {
    let fixed = |system: &str, names: &[&str]| {
        names
            .iter()
            .map(|n| EventId {
                system: system.to_string(),
                name: n.to_string(),
            })
            .collect::<Vec<_>>()
    };
    let whole_system = |system: &str| -> Vec<EventId> {
        let mut names: Vec<String> = fs::read_dir(events_dir.join(system))
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.path().join("format").is_file())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
            .into_iter()
            .map(|name| EventId {
                system: system.to_string(),
                name,
            })
            .collect()
    };
    Ok(match group {
        "sched" => fixed("sched", SCHED),
        "block" => fixed("block", BLOCK),
        "irq" => fixed("irq", IRQ),
        "softirq" => fixed("irq", SOFTIRQ),
        "workqueue" => {
            let all = whole_system("workqueue");
            if all.is_empty() {
                // Report it as missing below rather than silently recording nothing.
                fixed("workqueue", &["workqueue_queue_work"])
            } else {
                all
            }
        }
        g => match g.split_once(':') {
            Some((sys, "*")) if !sys.is_empty() => whole_system(sys),
            Some((sys, ev)) if !sys.is_empty() && !ev.is_empty() => fixed(sys, &[ev]),
            _ => {
                return Err(format!(
                    "unknown event group {g:?}; expected sched, block, workqueue, irq, softirq, \
                     chain or SYSTEM:EVENT"
                ))
            }
        },
    })
}

/// Resolves a comma-separated group list against `events_dir` (`…/instances/X/events`).
pub fn resolve(groups: &str, events_dir: &Path) -> Result<ResolvedEvents, String> {
    let mut out = ResolvedEvents::default();
    let expanded = groups
        .split(',')
        .map(str::trim)
        .flat_map(|g| match g {
            "chain" => vec!["sched", "block", "workqueue", "irq", "softirq"],
            g => vec![g],
        })
        .collect::<Vec<_>>();
    for group in expanded.into_iter().filter(|g| !g.is_empty()) {
        let ids = wanted(group, events_dir)?;
        if ids.is_empty() {
            out.warnings.push(format!(
                "event group {group:?} has no events on this kernel"
            ));
        }
        for id in ids {
            let dir = events_dir.join(&id.system).join(&id.name);
            if !dir.join("enable").is_file() || !dir.join("format").is_file() {
                out.warnings.push(format!(
                    "{}:{} does not exist on this kernel; skipped",
                    id.system, id.name
                ));
                continue;
            }
            let list = out.by_system.entry(id.system).or_default();
            if !list.contains(&id.name) {
                list.push(id.name);
            }
        }
    }
    if out.is_empty() {
        return Err(format!(
            "no event of {groups:?} exists on this kernel: {}",
            out.warnings.join("; ")
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_against_a_fake_events_dir() {
        let dir = std::env::temp_dir().join(format!("stallscope-ev-{}", std::process::id()));
        for ev in ["sched/sched_switch", "sched/sched_waking", "workqueue/wq_a"] {
            let d = dir.join(ev);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("enable"), "0").unwrap();
            fs::write(d.join("format"), "name: x").unwrap();
        }
        let r = resolve("sched,workqueue", &dir).unwrap();
        assert_eq!(
            r.names(),
            vec!["sched:sched_switch", "sched:sched_waking", "workqueue:wq_a"]
        );
        // 7 sched events of the default group are absent from the fake kernel.
        assert_eq!(r.warnings.len(), 7, "{:?}", r.warnings);
        assert!(resolve("bogus", &dir).is_err());
        assert!(resolve("block", &dir).is_err());
        let one = resolve("sched:sched_waking", &dir).unwrap();
        assert_eq!(one.names(), vec!["sched:sched_waking"]);
        // `chain` is the five groups: here only sched and workqueue exist
        let chain = resolve("chain", &dir).unwrap();
        assert_eq!(chain.names(), r.names());
        fs::remove_dir_all(&dir).unwrap();
    }
}
