//! Tasks blocked in `D` (uninterruptible sleep) — usually waiting for I/O — from
//! `sched_switch` events: a switch-out with `prev_state` containing `D` opens an interval,
//! the task's next wakeup (`sched_waking`/`sched_wakeup`) or switch-in closes it.
//!
//! ```text
//! 100 0 900 sched_switch prev_comm=fio prev_pid=900 prev_state=D …   → fio blocked since 100
//! 350 1 33  sched_waking comm=fio pid=900 …                          → interval 100..350
//! ```
//!
//! Only intervals at least `min` long are kept (a few per second per task), so the log
//! covers the whole trace; intervals still open at the end close at the last event.

use rustc_hash::FxHashMap;
use stallscope_model::{Comm, Event, EventKind, Tid, Ts};

use crate::evidence::{keep, Kept};

/// One stretch of uninterruptible sleep.
#[derive(Clone, Debug)]
pub struct Blocked {
    /// Task.
    pub pid: Tid,
    /// Its name at the switch-out.
    pub comm: Comm,
    /// Switch-out.
    pub start: Ts,
    /// Wakeup or switch-in (or the trace's last event).
    pub end: Ts,
    /// The switch-out event.
    pub event: Kept,
}

/// Collects [`Blocked`] intervals.
pub struct BlockedLog {
    min: Ts,
    open: FxHashMap<Tid, (Ts, Comm, Kept)>,
    done: Vec<Blocked>,
    last_ts: Ts,
    /// Saw any `sched_switch`.
    pub has_sched: bool,
}

impl BlockedLog {
    /// Keeps intervals at least `min` long.
    pub fn new(min: Ts) -> BlockedLog {
        BlockedLog {
            min,
            open: FxHashMap::default(),
            done: Vec::new(),
            last_ts: 0,
            has_sched: false,
        }
    }

    /// Feeds one event.
    pub fn process(&mut self, ev: &Event) {
        self.last_ts = self.last_ts.max(ev.ts);
        match &ev.kind {
            EventKind::Switch(s) => {
                self.has_sched = true;
                self.close(s.next.pid, ev.ts);
                if s.prev.pid > 0 && s.prev_state.is_uninterruptible() {
                    self.open.insert(s.prev.pid, (ev.ts, s.prev.comm, keep(ev)));
                }
            }
            EventKind::Waking(w) | EventKind::Wakeup(w) => self.close(w.task.pid, ev.ts),
            _ => {}
        }
    }

    fn close(&mut self, pid: Tid, ts: Ts) {
        if self.open.is_empty() {
            return; // the common case: nobody is blocked (no hashing)
        }
        if let Some((start, comm, event)) = self.open.remove(&pid) {
            if ts.saturating_sub(start) >= self.min {
                self.done.push(Blocked {
                    pid,
                    comm,
                    start,
                    end: ts,
                    event,
                });
            }
        }
    }

    /// Closes open intervals at the last event; every interval, by start.
    pub fn finish(mut self) -> Vec<Blocked> {
        let pids: Vec<Tid> = self.open.keys().copied().collect();
        for pid in pids {
            self.close(pid, self.last_ts);
        }
        self.done.sort_by_key(|b| (b.start, b.pid));
        self.done
    }
}

/// Per task, the time blocked within `[from, to]` (intervals overlapping it by at least
/// `min`), most first; with the switch-out of each task's longest overlap.
pub fn blocked_during<'a>(
    all: &'a [Blocked],
    from: Ts,
    to: Ts,
    min: Ts,
) -> Vec<(Tid, Comm, Ts, &'a Kept)> {
    let mut by: FxHashMap<Tid, (Comm, Ts, Ts, &'a Kept)> = FxHashMap::default();
    for b in all.iter().take_while(|b| b.start < to) {
        let overlap = b.end.min(to).saturating_sub(b.start.max(from));
        if overlap < min {
            continue; // outside the window, or too short to matter: not counted by design
        }
        let e = by.entry(b.pid).or_insert((b.comm, 0, 0, &b.event));
        e.1 += overlap;
        if overlap > e.2 {
            e.2 = overlap;
            e.3 = &b.event;
        }
    }
    let mut v: Vec<(Tid, Comm, Ts, &Kept)> = by
        .into_iter()
        .map(|(pid, (comm, total, _, ev))| (pid, comm, total, ev))
        .collect();
    v.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    v
}
