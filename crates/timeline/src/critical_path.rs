//! [`critical_path`]: one task's time over a window as intervals of running, runnable (who
//! ran instead on the CPU it then ran on), sleeping (in which state, woken by whom, after
//! what) and unknown (before its first switch, or a gap the trace does not explain), adding
//! up to the whole window — the critical flow of one task, from the same rows `timehist`
//! prints and the same sleeps `sleeps` lists.
//!
//! Per [`TimehistRow`] of the task (one per switch-out, perf's definitions):
//!
//! ```text
//!   ├─ wait − sch delay ─┼─ sch delay ─┼──── run ────┤
//!   previous switch-out   wakeup        switch-in     switch-out (row time)
//!        sleeping            runnable      running
//! ```
//!
//! A task that left runnable (`R`) has sch delay = wait: all runnable. The first row's wait
//! is unknown to timehist (0): the time before its run is unknown. After the last row the
//! task is sleeping (up to the wakeup, when [`Sleep`] has one) then runnable, or runnable
//! when it left runnable, up to the window's end. Running and runnable totals over a window
//! are therefore timehist's run time and sch delay of the runs inside it.

use std::collections::BTreeMap;

use serde::Serialize;
use stallscope_model::{Cpu, PrevState, Tid, Ts};

use crate::sleeps::{Sleep, Waker};
use crate::timehist::TimehistRow;

/// What the task was doing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Activity {
    /// On a CPU.
    Running {
        /// The CPU.
        cpu: Cpu,
    },
    /// Runnable, waiting for a CPU.
    Runnable {
        /// The CPU it then ran on (`None`: still waiting at the window's end).
        cpu: Option<Cpu>,
        /// Who ran on that CPU meanwhile: (task, ns), longest first, at most
        /// [`INSTEAD_SHOWN`].
        instead: Vec<(Tid, Ts)>,
    },
    /// Asleep.
    Sleeping {
        /// State at the switch-out (`S`, `D`, …).
        #[serde(serialize_with = "state_text")]
        state: PrevState,
        /// Who woke it, when a wakeup was recorded.
        waker: Option<Waker>,
    },
    /// Not known from the trace.
    Unknown,
}

fn state_text<S: serde::Serializer>(s: &PrevState, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(&s.to_string())
}

/// Tasks named per runnable interval.
pub const INSTEAD_SHOWN: usize = 3;

/// One interval of the task's time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Interval {
    /// Start (ns).
    pub start_ns: Ts,
    /// End (ns).
    pub end_ns: Ts,
    /// What it was doing.
    #[serde(flatten)]
    pub activity: Activity,
}

/// Time per activity over the window (ns); they add up to the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// On a CPU.
    pub running_ns: Ts,
    /// Runnable.
    pub runnable_ns: Ts,
    /// Asleep.
    pub sleeping_ns: Ts,
    /// Not known.
    pub unknown_ns: Ts,
}

/// One task's critical path over a window.
#[derive(Clone, Debug, Serialize)]
pub struct CriticalPath {
    /// The task.
    pub pid: Tid,
    /// Window start (ns).
    pub start_ns: Ts,
    /// Window end (ns).
    pub end_ns: Ts,
    /// The intervals, in time order, covering the window.
    pub intervals: Vec<Interval>,
    /// Time per activity.
    pub totals: Totals,
    /// Who ran instead while the task was runnable, over the window: (task, ns), longest
    /// first.
    pub runnable_behind: Vec<(Tid, Ts)>,
    /// Who woke it, over the window: (waker task, sleeps ended, ns asleep), most time first.
    pub woken_by: Vec<(Tid, u64, Ts)>,
}

/// The critical path of `pid` over `[start, end]` from every timehist row of the trace
/// (all tasks: the runs of the others say who ran instead) and the sleeps.
pub fn critical_path(
    rows: &[TimehistRow],
    sleeps: &[Sleep],
    pid: Tid,
    start: Ts,
    end: Ts,
) -> CriticalPath {
    let mine: Vec<&TimehistRow> = rows.iter().filter(|r| r.tid == pid).collect();
    let by_start: BTreeMap<Ts, &Sleep> = sleeps
        .iter()
        .filter(|s| s.pid == pid)
        .map(|s| (s.start_ns, s))
        .collect();
    // runs of every task by CPU: (start, end, tid)
    let mut runs: BTreeMap<Cpu, Vec<(Ts, Ts, Tid)>> = BTreeMap::new();
    for r in rows {
        runs.entry(r.cpu)
            .or_default()
            .push((r.ts_ns.saturating_sub(r.run_ns), r.ts_ns, r.tid));
    }
    for v in runs.values_mut() {
        v.sort_unstable();
    }
    let instead = |cpu: Cpu, a: Ts, b: Ts| -> Vec<(Tid, Ts)> {
        let mut by: BTreeMap<Tid, Ts> = BTreeMap::new();
        if let Some(v) = runs.get(&cpu) {
            // runs are sorted by start and do not overlap on one CPU: those ending after a
            // start at most one run-length before it
            let from = v.partition_point(|&(_, e, _)| e <= a);
            for &(s, e, tid) in &v[from.saturating_sub(1)..] {
                if s >= b {
                    break;
                }
                let o = e.min(b).saturating_sub(s.max(a));
                if o > 0 && tid != pid {
                    *by.entry(tid).or_default() += o;
                }
            }
        }
        let mut v: Vec<(Tid, Ts)> = by.into_iter().collect();
        v.sort_by_key(|&(t, n)| (std::cmp::Reverse(n), t));
        v
    };

    let mut raw: Vec<Interval> = Vec::new();
    let push = |raw: &mut Vec<Interval>, a: Ts, b: Ts, activity: Activity| {
        if b > a {
            raw.push(Interval {
                start_ns: a,
                end_ns: b,
                activity,
            });
        }
    };
    let mut prev: Option<&TimehistRow> = None;
    for r in &mine {
        let run_start = r.ts_ns.saturating_sub(r.run_ns);
        if let Some(p) = prev {
            // the off-CPU time between the previous switch-out and this switch-in
            let off_start = run_start.saturating_sub(r.wait_ns).max(p.ts_ns);
            let wake = run_start.saturating_sub(r.sch_delay_ns).max(off_start);
            if off_start > p.ts_ns {
                push(&mut raw, p.ts_ns, off_start, Activity::Unknown);
            }
            let waker = by_start.get(&p.ts_ns).and_then(|s| s.waker);
            push(
                &mut raw,
                off_start,
                wake,
                Activity::Sleeping {
                    state: p.prev_state,
                    waker,
                },
            );
            push(
                &mut raw,
                wake,
                run_start,
                Activity::Runnable {
                    cpu: Some(r.cpu),
                    instead: Vec::new(),
                },
            );
        }
        push(
            &mut raw,
            run_start,
            r.ts_ns,
            Activity::Running { cpu: r.cpu },
        );
        prev = Some(r);
    }
    // after the last switch-out
    if let Some(p) = prev {
        let tail_end = end.max(p.ts_ns);
        if p.prev_state.is_runnable() {
            push(
                &mut raw,
                p.ts_ns,
                tail_end,
                Activity::Runnable {
                    cpu: None,
                    instead: Vec::new(),
                },
            );
        } else {
            let sleep = by_start.get(&p.ts_ns);
            let wake = sleep.map_or(tail_end, |s| s.end_ns.min(tail_end));
            push(
                &mut raw,
                p.ts_ns,
                wake,
                Activity::Sleeping {
                    state: p.prev_state,
                    waker: sleep.and_then(|s| s.waker),
                },
            );
            push(
                &mut raw,
                wake,
                tail_end,
                Activity::Runnable {
                    cpu: None,
                    instead: Vec::new(),
                },
            );
        }
    }

    // clip to the window, fill the gaps with unknown
    let mut intervals: Vec<Interval> = Vec::new();
    let mut at = start;
    for mut iv in raw {
        if iv.end_ns <= start || iv.start_ns >= end {
            continue;
        }
        iv.start_ns = iv.start_ns.max(start);
        iv.end_ns = iv.end_ns.min(end);
        if iv.start_ns > at {
            intervals.push(Interval {
                start_ns: at,
                end_ns: iv.start_ns,
                activity: Activity::Unknown,
            });
        }
        at = at.max(iv.end_ns);
        intervals.push(iv);
    }
    if end > at {
        intervals.push(Interval {
            start_ns: at,
            end_ns: end,
            activity: Activity::Unknown,
        });
    }

    let mut totals = Totals::default();
    let mut behind: BTreeMap<Tid, Ts> = BTreeMap::new();
    let mut woken: BTreeMap<Tid, (u64, Ts)> = BTreeMap::new();
    for iv in &mut intervals {
        let len = iv.end_ns - iv.start_ns;
        match &mut iv.activity {
            Activity::Running { .. } => totals.running_ns += len,
            Activity::Runnable { cpu, instead: who } => {
                totals.runnable_ns += len;
                // who ran on the CPU it then ran on (or, still waiting, the last one)
                let c = cpu.or(prev.map(|p| p.cpu));
                if let Some(c) = c {
                    let all = instead(c, iv.start_ns, iv.end_ns);
                    for &(t, n) in &all {
                        *behind.entry(t).or_default() += n;
                    }
                    *who = all.into_iter().take(INSTEAD_SHOWN).collect();
                }
            }
            Activity::Sleeping { waker, .. } => {
                totals.sleeping_ns += len;
                if let Some(w) = waker {
                    let e = woken.entry(w.pid).or_default();
                    e.0 += 1;
                    e.1 += len;
                }
            }
            Activity::Unknown => totals.unknown_ns += len,
        }
    }
    let mut runnable_behind: Vec<(Tid, Ts)> = behind.into_iter().collect();
    runnable_behind.sort_by_key(|&(t, n)| (std::cmp::Reverse(n), t));
    let mut woken_by: Vec<(Tid, u64, Ts)> =
        woken.into_iter().map(|(t, (c, n))| (t, c, n)).collect();
    woken_by.sort_by_key(|&(t, _, n)| (std::cmp::Reverse(n), t));
    CriticalPath {
        pid,
        start_ns: start,
        end_ns: end,
        intervals,
        totals,
        runnable_behind,
        woken_by,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::Comm;

    fn row(ts: Ts, cpu: Cpu, tid: Tid, wait: Ts, delay: Ts, run: Ts, state: &str) -> TimehistRow {
        TimehistRow {
            ts_ns: ts,
            cpu,
            comm: Comm::new("t"),
            tid,
            pid: Some(tid),
            wait_ns: wait,
            sch_delay_ns: delay,
            run_ns: run,
            prev_state: PrevState::parse(state).unwrap_or_default(),
        }
    }

    #[test]
    fn runs_waits_and_sleeps_add_up_to_the_window() {
        // task 5 on CPU 0: runs 0..10, sleeps 10..40, runnable 40..50 behind task 6
        // (runs 30..50), runs 50..60 and is preempted (R), runnable 60..70, runs 70..80,
        // then sleeps past the window's end at 100
        let rows = vec![
            row(10, 0, 5, 0, 0, 10, "S"),
            row(50, 0, 6, 0, 0, 20, "R"),
            row(60, 0, 5, 40, 10, 10, "R"),
            row(80, 0, 5, 10, 10, 10, "S"),
        ];
        let p = critical_path(&rows, &[], 5, 0, 100);
        let kinds: Vec<(Ts, Ts, &str)> = p
            .intervals
            .iter()
            .map(|i| {
                (
                    i.start_ns,
                    i.end_ns,
                    match i.activity {
                        Activity::Running { .. } => "running",
                        Activity::Runnable { .. } => "runnable",
                        Activity::Sleeping { .. } => "sleeping",
                        Activity::Unknown => "unknown",
                    },
                )
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                (0, 10, "running"),
                (10, 40, "sleeping"),
                (40, 50, "runnable"),
                (50, 60, "running"),
                (60, 70, "runnable"),
                (70, 80, "running"),
                (80, 100, "sleeping"),
            ]
        );
        assert_eq!(
            p.totals,
            Totals {
                running_ns: 30,
                runnable_ns: 20,
                sleeping_ns: 50,
                unknown_ns: 0
            }
        );
        assert_eq!(p.runnable_behind, vec![(6, 10)]);
        // a window inside clips; before the first row is unknown
        let p = critical_path(&rows, &[], 5, 45, 65);
        assert_eq!(p.totals.running_ns + p.totals.runnable_ns, 20);
        let p = critical_path(&rows[1..], &[], 5, 0, 100);
        assert_eq!(p.totals.unknown_ns, 50);
    }
}
