//! The I/O scheduler's own trace messages (`m` lines: bfq's and cfq's `blk_add_trace_msg`),
//! read for what decides a dispatch wait: which queue the scheduler served, which queue's
//! slice expired and why, which queue preempted it.
//!
//! Formats (bfq: `bfq_log_bfqq`, cfq: `cfq_log_cfqq`; the queue is `<sched><pid><S|A>`,
//! S = sync, A = async, `bfqSHARED-S` for a queue shared by cooperating processes,
//! optionally followed by the queue's cgroup path):
//!
//! ```text
//!   bfq1234S expire (4, slow 0, num_disp 12, short_ttime 1)   reason: 0 too idle,
//!                                                              1 budget timeout, 2 budget
//!                                                              exhausted, 3 no more
//!                                                              requests, 4 preempted
//!   bfq1234A set_in_service_queue, cur-budget = 16384          the queue now served
//!   cfq1234S / slice expired t=0                               slice ended (t=1: timed out)
//!   cfq1234S / preempt                                         preempted by the next set_active
//!   cfq1234A / set_active wl_class:0 wl_type:1                 the queue now served
//! ```
//! Other messages are not decisions about which queue is served and are not kept.

use std::collections::BTreeMap;

use stallscope_model::{Tid, Ts};

/// A scheduler queue as its messages name it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueName {
    /// `bfq` or `cfq`.
    pub sched: &'static str,
    /// The owning process (0 for a shared queue).
    pub pid: Tid,
    /// Sync queue (`S`) or async (`A`).
    pub sync: bool,
    /// Shared by cooperating processes (`bfqSHARED-S`).
    pub shared: bool,
}

impl std::fmt::Display for QueueName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.sync { 'S' } else { 'A' };
        match self.shared {
            true => write!(f, "{}SHARED-{kind}", self.sched),
            false => write!(f, "{}{}{kind}", self.sched, self.pid),
        }
    }
}

/// What a kept message says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The queue's slice (cfq) or budget (bfq) ended; bfq gives a reason number.
    Expired(Option<u8>),
    /// The queue was preempted (cfq `preempt`; bfq expiry reason 4).
    Preempted,
    /// The queue was set in service.
    InService,
}

/// bfq's expiry reason number 4 (`BFQQE_PREEMPTED`).
const BFQ_PREEMPTED: u8 = 4;

/// bfq's expiry reasons (`enum bfqq_expiration`).
pub fn bfq_reason(n: u8) -> &'static str {
    match n {
        0 => "too idle",
        1 => "budget timeout",
        2 => "budget exhausted",
        3 => "no more requests",
        BFQ_PREEMPTED => "preempted",
        _ => "unknown reason",
    }
}

/// The queue a message is about and the rest of its text, else `None` (a message about
/// the scheduler as a whole, or another scheduler's).
pub fn queue_of(message: &str) -> Option<(QueueName, &str)> {
    let sched = if message.starts_with("bfq") {
        "bfq"
    } else if message.starts_with("cfq") {
        "cfq"
    } else {
        return None;
    };
    let rest = &message[3..];
    let (pid, shared, after) = match rest.strip_prefix("SHARED-") {
        Some(r) => (0, true, r),
        None => {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None; // a message about the scheduler, not one queue
            }
            (rest[..digits].parse().ok()?, false, &rest[digits..])
        }
    };
    let sync = match after.as_bytes().first() {
        Some(b'S') => true,
        Some(b'A') => false,
        _ => return None,
    };
    let mut text = after[1..].trim_start();
    if text.starts_with('/') {
        // the queue's cgroup path
        text = text.split_once(' ').map_or("", |(_, t)| t).trim_start();
    }
    Some((
        QueueName {
            sched,
            pid,
            sync,
            shared,
        },
        text,
    ))
}

/// A message that decides which queue is served: (queue, decision), else `None`.
pub fn parse(message: &str) -> Option<(QueueName, Decision)> {
    let (queue, text) = queue_of(message)?;
    let decision = if let Some(args) = text.strip_prefix("expire (") {
        let n = args.split(|c: char| !c.is_ascii_digit()).next()?;
        match n.parse::<u8>().ok() {
            Some(BFQ_PREEMPTED) => Decision::Preempted,
            r => Decision::Expired(r),
        }
    } else if text.starts_with("slice expired") {
        Decision::Expired(None)
    } else if text == "preempt" || text.starts_with("preempt ") {
        Decision::Preempted
    } else if text.starts_with("set_in_service_queue") || text.starts_with("set_active") {
        Decision::InService
    } else {
        return None;
    };
    Some((queue, decision))
}

/// What the scheduler decided during one wait.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decisions {
    /// Queues set in service, with how often.
    pub served: BTreeMap<QueueName, u64>,
    /// Slices or budgets that ended, by reason (`slice expired` for cfq).
    pub expired: BTreeMap<&'static str, u64>,
    /// Preemptions: (preempted queue, the queue served next), how often.
    pub preempted: BTreeMap<(QueueName, Option<QueueName>), u64>,
}

impl Decisions {
    /// The decisions of `log` (time order) strictly inside (`start`, `end`).
    pub fn between(log: &[(Ts, QueueName, Decision)], start: Ts, end: Ts) -> Decisions {
        let mut d = Decisions::default();
        let from = log.partition_point(|x| x.0 <= start);
        let inside = &log[from..];
        let inside = &inside[..inside.partition_point(|x| x.0 < end)];
        for (k, (_, q, what)) in inside.iter().enumerate() {
            match what {
                Decision::InService => *d.served.entry(q.clone()).or_default() += 1,
                Decision::Expired(r) => {
                    let why = match (q.sched, r) {
                        ("bfq", Some(n)) => bfq_reason(*n),
                        _ => "slice expired",
                    };
                    *d.expired.entry(why).or_default() += 1;
                }
                Decision::Preempted => {
                    *d.expired.entry("preempted").or_default() += 1;
                    let next = inside[k + 1..]
                        .iter()
                        .find(|x| x.2 == Decision::InService)
                        .map(|x| x.1.clone());
                    *d.preempted.entry((q.clone(), next)).or_default() += 1;
                }
            }
        }
        d
    }

    /// No decision was logged.
    pub fn is_empty(&self) -> bool {
        self.served.is_empty() && self.expired.is_empty()
    }

    /// How often `q` was set in service.
    pub fn served_queue(&self, q: &QueueName) -> u64 {
        self.served.get(q).copied().unwrap_or(0)
    }

    /// How often a queue of `pid` was set in service.
    pub fn served_pid(&self, pid: Tid) -> u64 {
        self.served
            .iter()
            .filter(|(q, _)| q.pid == pid)
            .map(|(_, n)| n)
            .sum()
    }

    /// The most served queues, most first: `bfq12S 30×, bfq7A 2×`.
    pub fn top_served(&self, n: usize) -> String {
        let mut v: Vec<(&QueueName, &u64)> = self.served.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        v.iter()
            .take(n)
            .map(|(q, k)| format!("{q} {k}×"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Ended slices by reason: `12 budget exhausted, 3 preempted`.
    pub fn expiries(&self) -> String {
        let mut v: Vec<(&&str, &u64)> = self.expired.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        v.iter()
            .map(|(r, k)| format!("{k} {r}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The most frequent preemption: (preempted, preemptor, count).
    pub fn main_preemption(&self) -> Option<(&QueueName, Option<&QueueName>, u64)> {
        self.preempted
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|((q, by), n)| (q, by.as_ref(), *n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bfq_and_cfq_decisions() {
        // lines as this kernel's bfq writes them (blk tracer), and cfq's formats
        let q = |pid, sync| QueueName {
            sched: "bfq",
            pid,
            sync,
            shared: false,
        };
        assert_eq!(
            parse("bfq14122S expire (2, slow 0, num_disp 8, short_ttime 1)"),
            Some((q(14122, true), Decision::Expired(Some(2))))
        );
        assert_eq!(
            parse("bfq77A expire (4, slow 0, num_disp 1, short_ttime 0)"),
            Some((q(77, false), Decision::Preempted))
        );
        assert_eq!(
            parse("bfq77A set_in_service_queue, cur-budget = 16384"),
            Some((q(77, false), Decision::InService))
        );
        assert_eq!(parse("bfq77A put_queue: 00000000442a042a 3"), None);
        assert_eq!(parse("bfq dispatch requests: 1 busy queues"), None);
        let c = |pid, sync| QueueName {
            sched: "cfq",
            pid,
            sync,
            shared: false,
        };
        assert_eq!(
            parse("cfq5824S / slice expired t=0"),
            Some((c(5824, true), Decision::Expired(None)))
        );
        assert_eq!(
            parse("cfq5824A /grp preempt"),
            Some((c(5824, false), Decision::Preempted))
        );
        assert_eq!(
            parse("cfq2077S set_active wl_class:0 wl_type:1"),
            Some((c(2077, true), Decision::InService))
        );
        let shared = parse("bfqSHARED-S set_in_service_queue, cur-budget = 256").expect("shared");
        assert_eq!(
            (shared.0.to_string(), shared.1),
            ("bfqSHARED-S".into(), Decision::InService)
        );
        assert_eq!(
            queue_of("bfq11780A bfqq_served 7680 secs").map(|(q, t)| (q.to_string(), t)),
            Some(("bfq11780A".into(), "bfqq_served 7680 secs"))
        );
        assert_eq!(parse("mq-deadline nothing"), None);
        assert_eq!(parse("bfqX expire (1"), None);
    }

    #[test]
    fn decisions_inside_a_wait_name_the_preemptor() {
        let log: Vec<(Ts, QueueName, Decision)> = [
            (5, "bfq9S set_in_service_queue, cur-budget = 1"),
            (10, "bfq1A set_in_service_queue, cur-budget = 1"),
            (20, "bfq1A expire (4, slow 0, num_disp 1, short_ttime 0)"),
            (21, "bfq2S set_in_service_queue, cur-budget = 1"),
            (30, "bfq2S expire (2, slow 0, num_disp 9, short_ttime 1)"),
            (31, "bfq2S set_in_service_queue, cur-budget = 1"),
            (40, "bfq3S set_in_service_queue, cur-budget = 1"),
        ]
        .iter()
        .filter_map(|(t, m)| parse(m).map(|(q, d)| (*t, q, d)))
        .collect();
        let d = Decisions::between(&log, 5, 40);
        assert_eq!(d.served_pid(1), 1);
        assert_eq!(d.served_pid(2), 2);
        assert_eq!(d.served_pid(9), 0, "at the start: outside");
        assert_eq!(d.served_pid(3), 0, "at the end: outside");
        let (victim, by, n) = d.main_preemption().expect("a preemption");
        assert_eq!(
            (victim.to_string(), by.map(|q| q.to_string()), n),
            ("bfq1A".into(), Some("bfq2S".into()), 1)
        );
        assert_eq!(d.expiries(), "1 budget exhausted, 1 preempted");
        assert_eq!(d.top_served(2), "bfq2S 2×, bfq1A 1×");
    }
}
