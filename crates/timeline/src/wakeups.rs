//! [`WakeupSelector`]: which wakeup tracepoints count as "the task became runnable".
//!
//! The kernel emits, for one wakeup, `sched_waking` (in the waker's context, when the wakeup
//! is requested) and later `sched_wakeup` (when the task is on a runqueue); a new task gets
//! `sched_wakeup_new`. `perf sched record` records `sched_waking` when the kernel has it and
//! `sched_wakeup` otherwise, and perf's analyses "prefer sched_waking if it is captured": when
//! the trace declares `sched_waking`, every `sched_wakeup` is ignored. `sched_wakeup_new` is
//! always used.
//!
//! Inputs that do not declare their events up front (text) are handled the same way as soon
//! as a `sched_waking` has been seen: since `sched_waking` always precedes the `sched_wakeup`
//! of the same wakeup, both rules give the same answer except for a `sched_wakeup` whose
//! `sched_waking` happened before the trace started.
//!
//! perf 6.1's `latency` handled `sched_wakeup` and `sched_wakeup_new` only, ignoring
//! `sched_waking` ([`WakeupSelector::perf_6_1_latency`]).

use stallscope_model::{EventKind, TraceMeta, Wakeup};

/// Picks the wakeup events an analysis uses.
#[derive(Clone, Copy, Debug)]
pub struct WakeupSelector {
    prefer_waking: bool,
    waking_seen: bool,
    ignore_waking: bool,
}

impl WakeupSelector {
    /// perf's rule: `sched_waking` when the inputs declare it (or once one is seen), else
    /// `sched_wakeup`; `sched_wakeup_new` always.
    pub fn preferring_waking(waking_declared: bool) -> WakeupSelector {
        WakeupSelector {
            prefer_waking: waking_declared,
            waking_seen: false,
            ignore_waking: false,
        }
    }

    /// The one rule every analysis of these inputs uses (the detector engine's timeline,
    /// the sleeps, critical paths, HTML windows and compare summaries): perf's rule, with
    /// `sched_waking` preferred when any input declares it
    /// ([`WakeupSelector::preferring_waking`] of [`WakeupSelector::declared_in`]).
    pub fn for_inputs<'a>(metas: impl IntoIterator<Item = &'a TraceMeta>) -> WakeupSelector {
        WakeupSelector::preferring_waking(WakeupSelector::declared_in(metas))
    }

    /// perf 6.1 `latency`: `sched_wakeup` and `sched_wakeup_new`, never `sched_waking`.
    pub fn perf_6_1_latency() -> WakeupSelector {
        WakeupSelector {
            prefer_waking: false,
            waking_seen: false,
            ignore_waking: true,
        }
    }

    /// True when any input declares the `sched_waking` tracepoint.
    pub fn declared_in<'a>(metas: impl IntoIterator<Item = &'a TraceMeta>) -> bool {
        metas.into_iter().any(|m| {
            m.declared_events
                .iter()
                .any(|e| e == "sched_waking" || e.ends_with(":sched_waking"))
        })
    }

    /// The wakeup this event contributes, if it is one the analysis uses.
    #[inline]
    pub fn select<'a>(&mut self, kind: &'a EventKind) -> Option<&'a Wakeup> {
        let (which, w) = match kind {
            EventKind::Waking(w) => (WakeupKind::Waking, w),
            EventKind::Wakeup(w) => (WakeupKind::Wakeup, w),
            EventKind::WakeupNew(w) => (WakeupKind::WakeupNew, w),
            _ => return None,
        };
        self.select_kind(which).then_some(w)
    }

    /// Whether a wakeup of this kind is one the analysis uses (the rule of
    /// [`WakeupSelector::select`], for inputs that are not [`EventKind`]s).
    #[inline]
    pub fn select_kind(&mut self, which: WakeupKind) -> bool {
        match which {
            WakeupKind::Waking => {
                if self.ignore_waking {
                    return false;
                }
                self.waking_seen = true;
                true
            }
            WakeupKind::Wakeup => !(self.prefer_waking || self.waking_seen),
            WakeupKind::WakeupNew => true,
        }
    }
}

/// The three wakeup tracepoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeupKind {
    /// `sched_waking`.
    Waking,
    /// `sched_wakeup`.
    Wakeup,
    /// `sched_wakeup_new`.
    WakeupNew,
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{Comm, TaskRef};

    fn w(pid: i32) -> Wakeup {
        Wakeup {
            task: TaskRef {
                comm: Comm::new("t"),
                pid,
                prio: 120,
            },
            target_cpu: Some(0),
        }
    }

    #[test]
    fn waking_preferred_when_declared() {
        let mut s = WakeupSelector::preferring_waking(true);
        assert!(s.select(&EventKind::Wakeup(w(1))).is_none());
        assert!(s.select(&EventKind::Waking(w(1))).is_some());
        assert!(s.select(&EventKind::WakeupNew(w(2))).is_some());
    }

    #[test]
    fn undeclared_inputs_switch_to_waking_once_seen() {
        let mut s = WakeupSelector::preferring_waking(false);
        assert!(s.select(&EventKind::Wakeup(w(1))).is_some());
        assert!(s.select(&EventKind::Waking(w(1))).is_some());
        assert!(s.select(&EventKind::Wakeup(w(1))).is_none());
    }

    #[test]
    fn perf_6_1_latency_ignores_waking() {
        let mut s = WakeupSelector::perf_6_1_latency();
        assert!(s.select(&EventKind::Waking(w(1))).is_none());
        assert!(s.select(&EventKind::Wakeup(w(1))).is_some());
        assert!(s.select(&EventKind::WakeupNew(w(1))).is_some());
    }

    #[test]
    fn declared_names_with_or_without_system() {
        let m = TraceMeta {
            declared_events: vec!["sched:sched_switch".into(), "sched:sched_waking".into()],
            ..TraceMeta::default()
        };
        assert!(WakeupSelector::declared_in([&m]));
        let m2 = TraceMeta {
            declared_events: vec!["sched_wakeup".into()],
            ..TraceMeta::default()
        };
        assert!(!WakeupSelector::declared_in([&m2]));
    }
}
