//! Time ordering of perf records, as `perf script` does it (perf `ordered_events`).
//!
//! perf writes each pass over its per-CPU ring buffers as a *round* ended by a
//! `FINISHED_ROUND` record. A record of round N+1 can be older than the newest record of
//! round N (CPU A's buffer was read before CPU B's), but never older than anything of round
//! N−1. So at the end of round N every queued record with `time ≤ max time seen up to the
//! end of round N−1` is emitted in time order (stable: equal times keep file order), and the
//! rest waits. At the end of the input everything left is emitted. Memory is about two
//! rounds; a file without rounds is emitted in halves once [`MAX_PENDING`] records queue up.

use super::stream::{RecordRef, MAPPED};

/// Records queued before a forced partial flush.
pub const MAX_PENDING: usize = 500_000;

/// A queued record. The [`RecordRef`] is kept flattened so that an entry is 32 bytes (the
/// per-round sort and the hand-over to the decoding threads move every one of them).
#[derive(Clone, Copy, Debug)]
pub struct Pending {
    /// Sort key: the record's time (or, for a record without one, the time of the last
    /// emitted record).
    pub ts: u64,
    /// `RecordRef::file_off`.
    file_off: u64,
    /// `RecordRef::chunk`.
    chunk: u32,
    /// `RecordRef::off`.
    off: u32,
    /// `RecordRef::len`.
    len: u16,
    /// Index of the record's attr.
    pub attr: u16,
    /// False when `ts` was not in the record.
    pub has_time: bool,
}

const _: () = assert!(std::mem::size_of::<Pending>() <= 32);

impl Pending {
    /// Record `rec` of attr `attr`, sorted by `ts` (`has_time`: whether the record said).
    #[inline]
    pub fn new(ts: u64, has_time: bool, attr: u16, rec: RecordRef) -> Pending {
        let mut p = Pending {
            ts,
            file_off: 0,
            chunk: 0,
            off: 0,
            len: 0,
            attr,
            has_time,
        };
        p.set_rec(rec);
        p
    }

    /// Where the record is.
    #[inline]
    pub fn rec(&self) -> RecordRef {
        RecordRef {
            chunk: self.chunk,
            off: self.off,
            len: self.len,
            file_off: self.file_off,
        }
    }

    /// Moves the record (its bytes were copied elsewhere).
    #[inline]
    pub fn set_rec(&mut self, rec: RecordRef) {
        self.file_off = rec.file_off;
        self.chunk = rec.chunk;
        self.off = rec.off;
        self.len = rec.len;
    }
}

/// The queue: one vector of records, `[..ready_pos]` emitted (dropped at the next
/// compaction), `[ready_pos..ready_end]` released (sorted, waiting to be taken), and
/// `[ready_end..]` not yet released. Releasing a round's records moves none of them: it
/// moves `ready_end`. (Copying the records kept back for the next round at every round
/// end was measured: 1.2 % of `analyze`'s samples, since most rounds release a few records
/// and keep many.)
#[derive(Default)]
pub struct OrderQueue {
    queue: Vec<Pending>,
    ready_pos: usize,
    ready_end: usize,
    limit: u64,
    max_ts: u64,
    last_emitted: u64,
}

/// Emitted records are dropped from the front of the queue once there are at least this
/// many and at least as many as records after them (so each record is moved at most once
/// on average).
const COMPACT_MIN: usize = 4096;

impl OrderQueue {
    /// Time of the last emitted record (0 before any).
    pub fn last_emitted(&self) -> u64 {
        self.last_emitted
    }

    /// Queues a record.
    pub fn push(&mut self, p: Pending) {
        self.max_ts = self.max_ts.max(p.ts);
        self.queue.push(p);
    }

    /// Records waiting (not yet released).
    pub fn pending_len(&self) -> usize {
        self.queue.len() - self.ready_end
    }

    /// The smallest file offset of a mapped record still queued (released or not).
    pub fn min_mapped_off(&self) -> Option<u64> {
        self.queue[self.ready_pos..]
            .iter()
            .filter(|p| p.rec().chunk == MAPPED)
            .map(|p| p.rec().file_off)
            .min()
    }

    /// The records not yet released, sorted by time (stable).
    fn sort_waiting(&mut self) -> &[Pending] {
        let waiting = &mut self.queue[self.ready_end..];
        waiting.sort_by_key(|p| p.ts);
        waiting
    }

    /// End of a round: releases what is safe to emit.
    pub fn finished_round(&mut self) {
        let limit = self.limit;
        let n = self.sort_waiting().partition_point(|p| p.ts <= limit);
        self.ready_end += n;
        self.limit = self.max_ts;
    }

    /// Too much queued without a round end: releases the older half.
    pub fn release_half(&mut self) {
        let n = self.sort_waiting().len() / 2;
        self.ready_end += n;
    }

    /// End of input: releases everything.
    pub fn finish(&mut self) {
        self.sort_waiting();
        self.ready_end = self.queue.len();
    }

    /// True when a released record is waiting.
    pub fn has_ready(&self) -> bool {
        self.ready_pos < self.ready_end
    }

    /// Drops emitted records from the front when that is cheap enough (see
    /// [`COMPACT_MIN`]).
    fn compact(&mut self) {
        let rest = self.queue.len() - self.ready_pos;
        if rest == 0 {
            self.queue.clear();
        } else if self.ready_pos >= COMPACT_MIN && self.ready_pos >= rest {
            self.queue.drain(..self.ready_pos);
        } else {
            return;
        }
        self.ready_end -= self.ready_pos;
        self.ready_pos = 0;
    }

    /// Moves up to `max` released records to `out` (in order, like as many [`Self::pop`]s)
    /// and calls `late` for each one older than a record already emitted.
    pub fn pop_into(&mut self, out: &mut Vec<Pending>, max: usize, mut late: impl FnMut(&Pending)) {
        let avail = &self.queue[self.ready_pos..self.ready_end];
        let taken = &avail[..avail.len().min(max)];
        for p in taken {
            if p.has_time && p.ts < self.last_emitted {
                late(p);
            }
            self.last_emitted = self.last_emitted.max(p.ts);
        }
        out.extend_from_slice(taken);
        self.ready_pos += taken.len();
        self.compact();
    }

    /// The next released record, and whether it is older than one already emitted.
    pub fn pop(&mut self) -> Option<(Pending, bool)> {
        if self.ready_pos >= self.ready_end {
            self.compact();
            return None;
        }
        let p = self.queue[self.ready_pos];
        self.ready_pos += 1;
        let out_of_order = p.has_time && p.ts < self.last_emitted;
        self.last_emitted = self.last_emitted.max(p.ts);
        Some((p, out_of_order))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(ts: u64, tag: u32) -> Pending {
        Pending::new(
            ts,
            true,
            0,
            RecordRef {
                chunk: 0,
                off: tag,
                len: 8,
                file_off: 0,
            },
        )
    }

    fn drain(q: &mut OrderQueue) -> Vec<(u64, u32, bool)> {
        std::iter::from_fn(|| q.pop())
            .map(|(x, ooo)| (x.ts, x.rec().off, ooo))
            .collect()
    }

    #[test]
    fn rounds_release_up_to_the_previous_rounds_maximum() {
        let mut q = OrderQueue::default();
        // Round 1: CPU0 read first (10, 20), then CPU1 (15, 30).
        for (ts, tag) in [(10, 0), (20, 1), (15, 2), (30, 3)] {
            q.push(p(ts, tag));
        }
        q.finished_round();
        assert_eq!(drain(&mut q), vec![]);
        // Round 2 has a record (25) older than round 1's newest (30), and a tie at 30.
        for (ts, tag) in [(25, 4), (30, 5), (40, 6)] {
            q.push(p(ts, tag));
        }
        q.finished_round();
        assert_eq!(
            drain(&mut q),
            vec![
                (10, 0, false),
                (15, 2, false),
                (20, 1, false),
                (25, 4, false),
                (30, 3, false),
                (30, 5, false)
            ]
        );
        q.push(p(35, 7));
        q.finish();
        assert_eq!(drain(&mut q), vec![(35, 7, false), (40, 6, false)]);
    }

    #[test]
    fn late_records_are_flagged_out_of_order() {
        let mut q = OrderQueue::default();
        q.push(p(50, 0));
        q.finish();
        assert_eq!(drain(&mut q), vec![(50, 0, false)]);
        q.push(p(40, 1));
        q.finish();
        assert_eq!(drain(&mut q), vec![(40, 1, true)]);
    }

    #[test]
    fn pop_into_equals_single_pops() {
        let fill = |q: &mut OrderQueue| {
            for (ts, tag) in [(50, 0), (10, 1), (30, 2)] {
                q.push(p(ts, tag));
            }
            q.finished_round();
            q.finished_round();
            q.push(p(20, 3));
            q.push(p(60, 4));
        };
        let (mut a, mut b) = (OrderQueue::default(), OrderQueue::default());
        fill(&mut a);
        fill(&mut b);
        let mut singles = drain(&mut a);
        a.finish();
        singles.extend(drain(&mut a));
        let mut batched = Vec::new();
        let mut out = Vec::new();
        for finish in [false, true] {
            if finish {
                b.finish();
            }
            loop {
                let before = out.len();
                let mut late = Vec::new();
                b.pop_into(&mut out, 2, |x| late.push(x.rec().off));
                if out.len() == before {
                    break;
                }
                for x in &out[before..] {
                    batched.push((x.ts, x.rec().off, late.contains(&x.rec().off)));
                }
            }
        }
        assert_eq!(batched, singles);
        assert!(singles.iter().any(|x| x.2), "the test needs a late record");
    }

    /// perf's rule written out plainly: at a round end sort everything waiting, release
    /// what is at most the previous round's newest time.
    #[derive(Default)]
    struct Reference {
        waiting: Vec<(u64, u32)>,
        released: std::collections::VecDeque<(u64, u32)>,
        limit: u64,
        max_ts: u64,
        last: u64,
    }

    impl Reference {
        fn push(&mut self, ts: u64, tag: u32) {
            self.max_ts = self.max_ts.max(ts);
            self.waiting.push((ts, tag));
        }
        fn release(&mut self, n: usize) {
            self.waiting.sort_by_key(|x| x.0);
            self.released.extend(self.waiting.drain(..n));
        }
        fn finished_round(&mut self) {
            self.waiting.sort_by_key(|x| x.0);
            let limit = self.limit;
            let n = self.waiting.partition_point(|x| x.0 <= limit);
            self.release(n);
            self.limit = self.max_ts;
        }
        fn pop(&mut self) -> Option<(u64, u32, bool)> {
            let (ts, tag) = self.released.pop_front()?;
            let late = ts < self.last;
            self.last = self.last.max(ts);
            Some((ts, tag, late))
        }
    }

    #[test]
    fn many_rounds_and_front_drops_equal_the_plain_rule() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let (mut q, mut r) = (OrderQueue::default(), Reference::default());
        let (mut got, mut want) = (Vec::new(), Vec::new());
        let mut clock = [0u64; 3];
        for tag in 0..60_000u32 {
            // Three CPUs' streams, each in time order, read in turns; a rare late record.
            let cpu = (tag / 7 % 3) as usize;
            clock[cpu] += 1 + next(50);
            let ts = if next(500) == 0 {
                clock[cpu] / 2
            } else {
                clock[cpu]
            };
            q.push(p(ts, tag));
            r.push(ts, tag);
            match next(100) {
                // Rounds of about 50 records: some are still waiting when thousands were
                // emitted, which are then dropped from the front of the queue.
                0..=1 => {
                    q.finished_round();
                    r.finished_round();
                }
                10 if q.pending_len() > 3000 => {
                    q.release_half();
                    let n = r.waiting.len() / 2;
                    r.release(n);
                }
                _ => {}
            }
            // Take some of what is released, one by one or in batches.
            if next(3) == 0 {
                let mut out = Vec::new();
                let mut late = Vec::new();
                q.pop_into(&mut out, next(5000) as usize, |x| late.push(x.rec().off));
                for x in out {
                    got.push((x.ts, x.rec().off, late.contains(&x.rec().off)));
                    want.push(r.pop().unwrap());
                }
            } else if let Some((x, late)) = q.pop() {
                got.push((x.ts, x.rec().off, late));
                want.push(r.pop().unwrap());
            }
        }
        q.finish();
        let n = r.waiting.len();
        r.release(n);
        got.extend(drain(&mut q));
        want.extend(std::iter::from_fn(|| r.pop()));
        assert_eq!(got.len(), 60_000);
        assert_eq!(got, want);
        assert!(got.iter().any(|x| x.2), "the test needs late records");
    }

    #[test]
    fn release_half_bounds_the_queue() {
        let mut q = OrderQueue::default();
        for i in (0..10).rev() {
            q.push(p(i, i as u32));
        }
        q.release_half();
        assert_eq!(drain(&mut q).len(), 5);
        assert_eq!(q.pending_len(), 5);
    }
}
