//! [`TimeOutliers`]: events whose timestamp is far from both of its neighbours in one input
//! (a corrupted time: one flipped bit puts an event years away) are left out, counted as
//! `timestamp_outlier`.
//!
//! An event is an outlier when its time differs by more than [`OUTLIER_GAP_NS`] from the
//! event before it *and* from the event after it (for the first and the last timed event of
//! an input, from its only neighbour). A real gap — a quiet hour, then events again — is
//! kept: the event after the gap is close to the one after it. Events at time 0 (perf's
//! task names synthesized before recording) are neither judged nor neighbours. Without this
//! one bad record stretches the trace's span to centuries, and every per-time structure
//! with it.
//!
//! The filter holds back at most one event (the one whose judgement waits for its
//! successor); a batch with no jump passes through untouched after one comparison per
//! event.

use stallscope_model::{DataQuality, Event, Problem, Ts};

/// Events further than this from both neighbours are outliers: one hour. A flipped bit at
/// or above bit 42 of a nanosecond time moves it by more; smaller corruption is not told
/// from real timing here (it is bounded, and the order check counts it when it goes back).
pub const OUTLIER_GAP_NS: Ts = 3_600_000_000_000;

/// Whether two neighbouring times are further apart than [`OUTLIER_GAP_NS`].
#[inline]
pub fn far_apart(a: Ts, b: Ts) -> bool {
    a.abs_diff(b) > OUTLIER_GAP_NS
}

/// One input's outlier filter.
#[derive(Default)]
pub struct TimeOutliers {
    /// Time of the last event let through (time 0 excepted).
    prev: Option<Ts>,
    /// An event far from `prev` (or the first timed one), waiting for its successor.
    held: Option<Event>,
}

impl TimeOutliers {
    /// True when `events` need no judgement: nothing held and no event far from the one
    /// before it. Notes their last time when so (then the caller uses them as they are).
    #[inline]
    pub fn pass(&mut self, events: &[Event]) -> bool {
        if self.held.is_some() {
            return false;
        }
        let Some(mut p) = self.prev else {
            // the first timed event waits for its successor
            return events.iter().all(|e| e.ts == 0);
        };
        for e in events {
            if e.ts != 0 {
                if far_apart(e.ts, p) {
                    return false;
                }
                p = e.ts;
            }
        }
        self.prev = Some(p);
        true
    }

    /// Judges `ev`: hands every event that is let through to `emit`, in order.
    pub fn push(
        &mut self,
        ev: Event,
        dq: &mut DataQuality,
        path: &str,
        emit: &mut dyn FnMut(Event),
    ) {
        if ev.ts == 0 {
            emit(ev);
            return;
        }
        if let Some(h) = self.held.take() {
            if far_apart(ev.ts, h.ts) {
                // far from what came before it (or first) and from what comes after it
                note(dq, path, &h, self.prev, Some(ev.ts));
            } else {
                self.prev = Some(h.ts);
                emit(h);
            }
        }
        match self.prev {
            Some(p) if !far_apart(ev.ts, p) => {
                self.prev = Some(ev.ts);
                emit(ev);
            }
            _ => self.held = Some(ev),
        }
    }

    /// The input ended: a held event after a jump is an outlier (nothing follows it); a
    /// lone timed event is let through (nothing to judge it by).
    pub fn finish(&mut self, dq: &mut DataQuality, path: &str, emit: &mut dyn FnMut(Event)) {
        if let Some(h) = self.held.take() {
            match self.prev {
                Some(_) => note(dq, path, &h, self.prev, None),
                None => {
                    self.prev = Some(h.ts);
                    emit(h);
                }
            }
        }
    }

    /// [`TimeOutliers::pass`], else rebuilds `batch` from what is let through.
    pub fn filter(&mut self, batch: &mut Vec<Event>, dq: &mut DataQuality, path: &str) {
        if self.pass(batch) {
            return;
        }
        let mut kept = Vec::with_capacity(batch.len() + 1);
        for ev in batch.drain(..) {
            self.push(ev, dq, path, &mut |e| kept.push(e));
        }
        *batch = kept;
    }
}

fn note(dq: &mut DataQuality, path: &str, ev: &Event, before: Option<Ts>, after: Option<Ts>) {
    let side = |t: Option<Ts>, which: &str| match t {
        Some(t) => format!("{} s from the event {which} it", secs(ev.ts.abs_diff(t))),
        None => format!("nothing {which} it"),
    };
    dq.add(Problem::TimestampOutlier, 1, || {
        format!(
            "{path}: {}: CPU {} at {} s, {} and {}: left out",
            ev.span.pos(),
            ev.cpu,
            secs(ev.ts),
            side(before, "before"),
            side(after, "after")
        )
    });
}

fn secs(ns: Ts) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{EventKind, Span};

    fn ev(ts: Ts) -> Event {
        Event {
            ts,
            cpu: 0,
            pid: 1,
            span: Span::byte(0, ts),
            kind: EventKind::Lost { count: None },
            callchain: None,
        }
    }

    fn run(ts: &[Ts]) -> (Vec<Ts>, u64) {
        let mut f = TimeOutliers::default();
        let mut dq = DataQuality::default();
        let mut out = Vec::new();
        // one event per batch and whole batches must agree
        for chunk in [1usize, 3, 1000] {
            let mut f2 = TimeOutliers::default();
            let mut dq2 = DataQuality::default();
            let mut got = Vec::new();
            for c in ts.chunks(chunk) {
                let mut b: Vec<Event> = c.iter().map(|&t| ev(t)).collect();
                f2.filter(&mut b, &mut dq2, "x");
                got.extend(b.iter().map(|e| e.ts));
            }
            f2.finish(&mut dq2, "x", &mut |e| got.push(e.ts));
            if chunk == 1 {
                out = got;
                dq = dq2;
            } else {
                assert_eq!(got, out, "batches of {chunk}");
            }
        }
        f.finish(&mut dq, "x", &mut |_| {});
        (out, dq.count(Problem::TimestampOutlier))
    }

    const H: Ts = OUTLIER_GAP_NS;
    const S: Ts = 1_000_000_000;

    #[test]
    fn an_event_far_from_both_neighbours_is_left_out() {
        let big = 1 << 62;
        assert_eq!(
            run(&[5 * S, 6 * S, big, 7 * S, 8 * S]),
            (vec![5 * S, 6 * S, 7 * S, 8 * S], 1)
        );
        // the last, the first, and one far before its neighbours
        assert_eq!(run(&[5 * S, 6 * S, big]), (vec![5 * S, 6 * S], 1));
        assert_eq!(run(&[big, 5 * S, 6 * S]), (vec![5 * S, 6 * S], 1));
        assert_eq!(run(&[1, 2 * H, 2 * H + S]), (vec![2 * H, 2 * H + S], 1));
        assert_eq!(
            run(&[2 * H, 2 * H + S, 7, 2 * H + 2 * S]),
            (vec![2 * H, 2 * H + S, 2 * H + 2 * S], 1)
        );
    }

    #[test]
    fn a_real_gap_and_time_zero_are_kept() {
        let t = [
            0,
            0,
            5 * S,
            6 * S,
            6 * S + 2 * H,
            6 * S + 2 * H + 1,
            6 * S + 2 * H + 2,
        ];
        assert_eq!(run(&t), (t.to_vec(), 0));
        // an hour exactly is no outlier; a lone event is kept
        assert_eq!(run(&[S, S + H, S + 2 * H]), (vec![S, S + H, S + 2 * H], 0));
        assert_eq!(run(&[7 * H]), (vec![7 * H], 0));
        assert_eq!(run(&[]), (vec![], 0));
    }
}
