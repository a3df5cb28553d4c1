//! [`Inputs`]: several inputs merged into one stream ordered by timestamp.
//!
//! Each reader yields its own events in time order; a k-way merge (a binary heap keyed on
//! the next timestamp of every input, ties broken by input index so the result is
//! deterministic) interleaves them. Events that go backwards in time within one input are
//! passed through in input order and counted as data quality (`out_of_order_events`).
//! Events whose time is far from both neighbours in their input (a corrupted timestamp) are
//! left out before anything sees them ([`crate::time_outliers`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use stallscope_model::{DataQuality, Event, InputFormat, Problem, TraceMeta, Ts};
use stallscope_read::{EventReader, ReadError};

use crate::overlap::{Overlap, OverlapCheck};
use crate::time_outliers::TimeOutliers;

struct Source {
    reader: Box<dyn EventReader>,
    /// The input's path (for data-quality examples).
    path: String,
    pending: Option<Event>,
    last_ts: Option<Ts>,
    /// Leaves out events with a corrupted time.
    outliers: TimeOutliers,
    /// Events the outlier filter let through, not yet taken (event-by-event reading).
    ready: VecDeque<Event>,
    /// The reader returned its end (the filter was told).
    ended: bool,
    /// The reader's error, returned once the events held before it are taken.
    failed: Option<ReadError>,
}

impl Source {
    /// The input's next event that is no time outlier.
    fn next_filtered(&mut self, dq: &mut DataQuality) -> Result<Option<Event>, ReadError> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Ok(Some(e));
            }
            if self.ended {
                return self.failed.take().map_or(Ok(None), Err);
            }
            let Source {
                reader,
                path,
                outliers,
                ready,
                ended,
                ..
            } = self;
            match reader.next_event() {
                Ok(Some(ev)) => outliers.push(ev, dq, path, &mut |e| ready.push_back(e)),
                Ok(None) => {
                    *ended = true;
                    outliers.finish(dq, path, &mut |e| ready.push_back(e));
                }
                Err(err) => {
                    // the stream stops here: what was held goes out before the error
                    *ended = true;
                    outliers.finish(dq, path, &mut |e| ready.push_back(e));
                    if ready.is_empty() {
                        return Err(err);
                    }
                    self.failed = Some(err);
                }
            }
        }
    }
}

/// Opened inputs, read as one time-ordered stream.
pub struct Inputs {
    sources: Vec<Source>,
    heap: BinaryHeap<Reverse<(Ts, usize)>>,
    primed: bool,
    dq: DataQuality,
    events: u64,
    on_progress: Option<Box<dyn FnMut(Progress)>>,
    /// An error met after some events of a batch: returned by the next call.
    deferred: Option<ReadError>,
    /// Inputs that cannot be one recording (other kernel, host or clock, or first events
    /// far apart) are merged anyway ([`Inputs::allow_unrelated`]).
    unrelated_ok: bool,
    /// [`Inputs::check_related`] ran.
    related_checked: bool,
    /// Tells inputs that hold the same events from inputs that complete each other.
    overlap: OverlapCheck,
    /// Inputs that hold the same events are merged anyway, identical events once
    /// ([`Inputs::allow_overlapping`]).
    overlapping_ok: bool,
}

/// First events of merged inputs further apart than this cannot be one recording (files
/// recorded together start within seconds of each other).
pub const MAX_START_GAP_NS: Ts = 60_000_000_000;

/// Clock families whose times can be compared: the scheduler clock (perf's default `perf`
/// clock, ftrace's `local` and `global`) and then each other clock on its own.
fn clock_family(clock: &str) -> &str {
    match clock {
        "perf" | "local" | "global" | "sched_clock" => "sched_clock",
        other => other,
    }
}

/// Reading progress, reported every [`Inputs::PROGRESS_EVERY`] events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Events returned so far.
    pub events: u64,
    /// Bytes consumed and total, summed over inputs that know them.
    pub bytes: Option<(u64, u64)>,
}

/// Counts `ev` if it goes back in time within its input; returns the merge key (the input's
/// high-water mark, so a backwards event keeps its place in input order).
fn note_order(dq: &mut DataQuality, s: &mut Source, ev: &Event) -> Ts {
    note_order_at(dq, &mut s.last_ts, &s.path, ev)
}

/// [`note_order`] given the input's high-water mark `last_ts` and path.
fn note_order_at(dq: &mut DataQuality, last_ts: &mut Option<Ts>, path: &str, ev: &Event) -> Ts {
    if let Some(last) = *last_ts {
        if ev.ts < last {
            let (ts, back, span) = (ev.ts, last - ev.ts, ev.span.pos());
            dq.add(Problem::OutOfOrderEvents, 1, || {
                format!("{path}: {span}: ts {ts} is {back} ns before the previous event")
            });
        }
    }
    let hw = last_ts.map_or(ev.ts, |l| l.max(ev.ts));
    *last_ts = Some(hw);
    hw
}

/// Counts the events of `batch` that go back in time (one input's, high-water mark
/// `last_ts`).
fn check_run(dq: &mut DataQuality, last_ts: &mut Option<Ts>, path: &str, batch: &[Event]) {
    // fast check of the whole batch; the per-event bookkeeping only if one goes back
    let mut hw = last_ts.unwrap_or(0);
    let backwards = batch.iter().any(|e| {
        let back = e.ts < hw;
        hw = hw.max(e.ts);
        back
    });
    if backwards {
        for e in batch {
            note_order_at(dq, last_ts, path, e);
        }
    } else if let Some(last) = batch.last() {
        *last_ts = Some(last_ts.map_or(last.ts, |l| l.max(last.ts)));
    }
}

/// Events per order check in [`Inputs::visit_batch`]: 64 events of 128 bytes (8 KiB)
/// stay in L1 between the caller's pass and the check.
const CHECK_RUN: usize = 64;

impl Inputs {
    /// Opens every path (`-` = stdin), sniffing formats unless `forced`; a file named
    /// several times, or a blktrace recording named several times (by several of its
    /// per-CPU files, or by its directory and a file), is read once.
    pub fn open(paths: &[String], forced: Option<InputFormat>) -> Result<Inputs, ReadError> {
        let grouped;
        let paths = match forced {
            None | Some(InputFormat::Blktrace) => {
                grouped = stallscope_read::blktrace::one_per_recording(paths)?;
                &grouped[..]
            }
            Some(_) => paths,
        };
        // one file named twice (the same path, or another path to it) is read once
        let mut seen: Vec<std::path::PathBuf> = Vec::new();
        let mut twice: Vec<&str> = Vec::new();
        let mut distinct: Vec<&String> = Vec::with_capacity(paths.len());
        for p in paths {
            match std::fs::canonicalize(p) {
                Ok(c) if p != "-" && std::fs::metadata(&c).is_ok_and(|m| m.is_file()) => {
                    if seen.contains(&c) {
                        twice.push(p);
                        continue;
                    }
                    seen.push(c);
                }
                _ => {}
            }
            distinct.push(p);
        }
        let mut readers = Vec::with_capacity(distinct.len());
        for (i, p) in distinct.into_iter().enumerate() {
            let idx = u16::try_from(i).map_err(|_| {
                ReadError::new(p, None, "at most 65535 inputs", format!("input number {i}"))
            })?;
            readers.push(stallscope_read::open(p, forced, idx)?);
        }
        let mut inputs = Self::from_readers(readers);
        for p in twice {
            inputs
                .dq
                .add(Problem::InputNamedTwice, 1, || format!("{p}: read once"));
        }
        Ok(inputs)
    }

    /// Wraps already opened readers (input index = position).
    pub fn from_readers(readers: Vec<Box<dyn EventReader>>) -> Inputs {
        Inputs {
            sources: readers
                .into_iter()
                .map(|reader| Source {
                    path: reader.meta().path.clone(),
                    reader,
                    pending: None,
                    last_ts: None,
                    outliers: TimeOutliers::default(),
                    ready: VecDeque::new(),
                    ended: false,
                    failed: None,
                })
                .collect(),
            heap: BinaryHeap::new(),
            primed: false,
            dq: DataQuality::default(),
            events: 0,
            on_progress: None,
            deferred: None,
            unrelated_ok: false,
            related_checked: false,
            overlap: OverlapCheck::default(),
            overlapping_ok: false,
        }
    }

    /// Merges inputs even when they cannot be one recording (`--merge-unrelated`).
    pub fn allow_unrelated(&mut self) {
        self.unrelated_ok = true;
    }

    /// Merges inputs that hold the same events (`--merge-overlapping`): events identical in
    /// time, CPU, task and kind from different inputs are counted once.
    pub fn allow_overlapping(&mut self) {
        self.overlapping_ok = true;
    }

    /// Whether merged event `ev` goes out: refuses inputs that hold the same events (unless
    /// allowed; then an event another input gave identically is left out).
    fn admit(&mut self, ev: &Event) -> Result<bool, ReadError> {
        if let Some(o) = self.overlap.note(ev) {
            if !self.overlapping_ok {
                return Err(self.overlap_error(&o));
            }
            let (a, b) = (self.input_path(o.inputs.0), self.input_path(o.inputs.1));
            self.dq.add(Problem::OverlappingInputs, 1, || {
                format!(
                    "{a} and {b}: {} events of CPU {} from {} ns",
                    o.event, o.cpu, o.since
                )
            });
        }
        Ok(!(self.overlapping_ok && self.overlap.duplicate(ev, &mut self.dq)))
    }

    /// The path of input `index` (as events' spans number them).
    fn input_path(&self, index: u16) -> String {
        self.sources
            .get(usize::from(index))
            .map_or_else(|| format!("input #{index}"), |s| s.path.clone())
    }

    fn overlap_error(&self, o: &Overlap) -> ReadError {
        let (a, b) = (self.input_path(o.inputs.0), self.input_path(o.inputs.1));
        let secs = format!(
            "{}.{:06}",
            o.since / 1_000_000_000,
            o.since % 1_000_000_000 / 1000
        );
        ReadError::new(
            &b,
            None,
            format!("inputs that complete each other (to merge it with {a})"),
            format!(
                "both hold {} events of CPU {} over the same time (from {secs} s): the same recording twice (a perf.data and its own perf script text?) or two recordings made together — merged, every event would count twice; give one of them, or pass --merge-overlapping to merge them with identical events counted once",
                o.event, o.cpu
            ),
        )
    }

    /// Refuses to merge inputs that cannot belong together: recorded on another kernel
    /// release or host, in clocks that do not compare, or whose first events are more than
    /// [`MAX_START_GAP_NS`] apart (other boots, or recordings made at different times: a
    /// merged timeline would take the gap between them for waits). Called once the first
    /// event of every input is known.
    fn check_related(&mut self) -> Result<(), ReadError> {
        if self.related_checked {
            return Ok(());
        }
        // Side-band records at time 0 (perf's synthesized task names) come first in every
        // input: the check waits for the first timed event, when every input's pending
        // event is its first timed one.
        match self.heap.peek() {
            Some(Reverse((0, _))) => return Ok(()),
            _ => self.related_checked = true,
        }
        if self.unrelated_ok || self.sources.len() < 2 {
            return Ok(());
        }
        let refuse = |a: &TraceMeta, b: &TraceMeta, why: String| {
            Err(ReadError::new(
                &a.path,
                None,
                format!("inputs that are one recording (to merge them with {})", b.path),
                format!(
                    "{why}; pass --merge-unrelated to merge them anyway, or analyze them one at a time"
                ),
            ))
        };
        let first = &self.sources[0];
        let a = first.reader.meta();
        for s in &self.sources[1..] {
            let b = s.reader.meta();
            if let (Some(x), Some(y)) = (&a.kernel_release, &b.kernel_release) {
                if x != y {
                    return refuse(a, b, format!("kernel {x} in one and {y} in the other"));
                }
            }
            if let (Some(x), Some(y)) = (&a.hostname, &b.hostname) {
                if x != y {
                    return refuse(a, b, format!("host {x} in one and {y} in the other"));
                }
            }
            if let (Some(x), Some(y)) = (&a.clock, &b.clock) {
                if clock_family(x) != clock_family(y) {
                    return refuse(
                        a,
                        b,
                        format!("clock {x} in one and {y} in the other (times do not compare)"),
                    );
                }
            }
        }
        let firsts: Vec<(Ts, &TraceMeta)> = self
            .sources
            .iter()
            .filter_map(|s| s.pending.as_ref().map(|e| (e.ts, s.reader.meta())))
            .filter(|(ts, _)| *ts > 0)
            .collect();
        if let (Some(lo), Some(hi)) = (
            firsts.iter().min_by_key(|x| x.0),
            firsts.iter().max_by_key(|x| x.0),
        ) {
            if hi.0 - lo.0 > MAX_START_GAP_NS {
                return refuse(
                    lo.1,
                    hi.1,
                    format!(
                        "their first events are {} s apart ({} and {} s): other boots or recordings made at other times",
                        (hi.0 - lo.0) / 1_000_000_000,
                        lo.0 / 1_000_000_000,
                        hi.0 / 1_000_000_000
                    ),
                );
            }
        }
        Ok(())
    }

    /// Header facts of every input, in input order.
    pub fn metas(&self) -> Vec<&TraceMeta> {
        self.sources.iter().map(|s| s.reader.meta()).collect()
    }

    /// Events between two progress reports.
    pub const PROGRESS_EVERY: u64 = 1 << 18;

    /// Calls `f` every [`Self::PROGRESS_EVERY`] events (the CLI draws a progress line).
    pub fn on_progress(&mut self, f: impl FnMut(Progress) + 'static) {
        self.on_progress = Some(Box::new(f));
    }

    fn report_progress(&mut self) {
        if !self.events.is_multiple_of(Self::PROGRESS_EVERY) {
            return;
        }
        self.call_progress();
    }

    /// Reports progress if the last `n` events crossed a multiple of `PROGRESS_EVERY`.
    fn report_progress_after(&mut self, n: u64) {
        if self.events / Self::PROGRESS_EVERY != (self.events - n) / Self::PROGRESS_EVERY {
            self.call_progress();
        }
    }

    fn call_progress(&mut self) {
        if let Some(cb) = self.on_progress.as_mut() {
            let mut bytes: Option<(u64, u64)> = None;
            for s in &self.sources {
                if let Some((d, t)) = s.reader.progress() {
                    let (bd, bt) = bytes.unwrap_or((0, 0));
                    bytes = Some((bd + d, bt + t));
                }
            }
            cb(Progress {
                events: self.events,
                bytes,
            });
        }
    }

    /// Events returned so far.
    pub fn events_read(&self) -> u64 {
        self.events
    }

    /// Data-quality counters of all readers plus the merge's own.
    pub fn quality(&self) -> DataQuality {
        let mut dq = DataQuality::default();
        for s in &self.sources {
            dq.merge(s.reader.quality());
        }
        dq.merge(&self.dq);
        dq
    }

    fn pull(&mut self, i: usize) -> Result<(), ReadError> {
        let s = &mut self.sources[i];
        if let Some(ev) = s.next_filtered(&mut self.dq)? {
            let key = note_order(&mut self.dq, s, &ev);
            s.pending = Some(ev);
            self.heap.push(Reverse((key, i)));
        }
        Ok(())
    }

    /// Replaces the contents of `out` with the next events in time order (at least one) and
    /// returns `Ok(true)`; `Ok(false)` with `out` empty when every input is exhausted. A
    /// single input hands over its reader's batches; several are merged event by event.
    /// Mixing this with [`Inputs::next_event`] on the same `Inputs` keeps the order.
    pub fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool, ReadError> {
        let more = self.next_batch_unchecked(out);
        self.check_order(out);
        more
    }

    /// [`Inputs::next_batch`] without the check of a single input's events for going back
    /// in time: the caller passes every batch, in order, to [`Inputs::check_order`] once it
    /// has used the events (and before [`Inputs::quality`]). The events were written on
    /// another core: the caller's own pass touches them first, and the check then reads
    /// them from its cache instead of paying the misses in a separate pass.
    pub fn next_batch_unchecked(&mut self, out: &mut Vec<Event>) -> Result<bool, ReadError> {
        if let Some(e) = self.deferred.take() {
            out.clear();
            return Err(e);
        }
        let result = if self.sources.len() == 1 {
            Self::single_batch(&mut self.sources[0], &mut self.dq, out)
        } else {
            out.clear();
            self.merge_batch(out)
        };
        let n = out.len() as u64;
        self.events += n;
        self.report_progress_after(n);
        match result {
            Ok(()) => Ok(!out.is_empty()),
            Err(e) if out.is_empty() => Err(e),
            Err(e) => {
                // the events before the error go out first
                self.deferred = Some(e);
                Ok(true)
            }
        }
    }

    /// The next batch of a single input, without time outliers.
    fn single_batch(
        s: &mut Source,
        dq: &mut DataQuality,
        out: &mut Vec<Event>,
    ) -> Result<(), ReadError> {
        if !s.ready.is_empty() || s.ended {
            // events left by event-by-event reading (or the input's end) come first
            out.clear();
            out.extend(s.ready.drain(..));
            return match (out.is_empty(), s.failed.take()) {
                (true, Some(e)) => Err(e),
                (_, failed) => {
                    s.failed = failed;
                    Ok(())
                }
            };
        }
        loop {
            // the reader replaces `out`'s contents (and may reuse its old events' storage)
            match s.reader.next_batch(out) {
                Ok(true) => {
                    s.outliers.filter(out, dq, &s.path);
                    if !out.is_empty() {
                        return Ok(());
                    }
                }
                Ok(false) => {
                    s.ended = true;
                    out.clear();
                    s.outliers.finish(dq, &s.path, &mut |e| out.push(e));
                    return Ok(());
                }
                Err(e) => {
                    s.ended = true;
                    s.outliers.filter(out, dq, &s.path);
                    s.outliers.finish(dq, &s.path, &mut |e| out.push(e));
                    return Err(e);
                }
            }
        }
    }

    /// Counts the events of a batch from [`Inputs::next_batch_unchecked`] that go back in
    /// time (a single input's; merged inputs are checked while merging).
    pub fn check_order(&mut self, batch: &[Event]) {
        if self.sources.len() != 1 {
            return;
        }
        let s = &mut self.sources[0];
        let path = &s.reader.meta().path;
        check_run(&mut self.dq, &mut s.last_ts, path, batch);
    }

    /// Hands the next events in time order to `visit` in runs of up to 64 (each checked
    /// for going back in time right after the visit, while it is in L1) and returns
    /// `Ok(true)`; `Ok(false)` when every input is exhausted. A single input's reader may
    /// build its events a few at a time where they are used
    /// ([`EventReader::visit_batch`]); `buf` is scratch space.
    pub fn visit_batch(
        &mut self,
        buf: &mut Vec<Event>,
        visit: &mut dyn FnMut(&[Event]),
    ) -> Result<bool, ReadError> {
        if self.sources.len() != 1 {
            // merged inputs: checked while merging
            let more = self.next_batch_unchecked(buf)?;
            for run in buf.chunks(CHECK_RUN) {
                visit(run);
            }
            return Ok(more);
        }
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        let Inputs { sources, dq, .. } = self;
        let s = &mut sources[0];
        if !s.ready.is_empty() || s.ended {
            // left by event-by-event reading, or the input's end: the batch path hands it
            let more = Self::single_batch(s, dq, buf);
            let n = buf.len() as u64;
            check_run(dq, &mut s.last_ts, &s.path, buf);
            visit(buf);
            self.events += n;
            return more.map(|()| n > 0);
        }
        let Source {
            reader,
            path,
            last_ts,
            outliers,
            ended,
            ..
        } = s;
        let mut n = 0u64;
        let mut kept: Vec<Event> = Vec::new();
        let mut result = reader.visit_batch(buf, &mut |evs| {
            for run in evs.chunks(CHECK_RUN) {
                if outliers.pass(run) {
                    n += run.len() as u64;
                    visit(run);
                    check_run(dq, last_ts, path, run);
                } else {
                    kept.clear();
                    for e in run {
                        outliers.push(e.clone(), dq, path, &mut |e| kept.push(e));
                    }
                    n += kept.len() as u64;
                    visit(&kept);
                    check_run(dq, last_ts, path, &kept);
                }
            }
        });
        if !matches!(result, Ok(true)) {
            // the end (or an error): a held event is judged now
            *ended = true;
            kept.clear();
            outliers.finish(dq, path, &mut |e| kept.push(e));
            if !kept.is_empty() {
                n += kept.len() as u64;
                visit(&kept);
                check_run(dq, last_ts, path, &kept);
                if matches!(result, Ok(false)) {
                    result = Ok(true);
                }
            }
        }
        self.events += n;
        self.report_progress_after(n);
        match result {
            Ok(more) => Ok(more),
            Err(e) if n == 0 => Err(e),
            Err(e) => {
                // the events before the error went out first
                self.deferred = Some(e);
                Ok(true)
            }
        }
    }

    /// Up to [`stallscope_read::DEFAULT_BATCH`] merged events into `out`.
    fn merge_batch(&mut self, out: &mut Vec<Event>) -> Result<(), ReadError> {
        if !self.primed {
            self.primed = true;
            for i in 0..self.sources.len() {
                self.pull(i)?;
            }
        }
        while out.len() < stallscope_read::DEFAULT_BATCH {
            if !self.related_checked {
                self.check_related()?;
            }
            let Some(Reverse((_, i))) = self.heap.pop() else {
                break;
            };
            if let Some(ev) = self.sources[i].pending.take() {
                if self.admit(&ev)? {
                    out.push(ev);
                }
            }
            self.pull(i)?;
        }
        Ok(())
    }

    /// The next event in time order, `Ok(None)` when every input is exhausted.
    pub fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        if self.sources.len() == 1 {
            let s = &mut self.sources[0];
            let ev = s.next_filtered(&mut self.dq)?;
            if let Some(e) = &ev {
                self.events += 1;
                note_order(&mut self.dq, s, e);
                self.report_progress();
            }
            return Ok(ev);
        }
        if !self.primed {
            self.primed = true;
            for i in 0..self.sources.len() {
                self.pull(i)?;
            }
        }
        if !self.related_checked {
            self.check_related()?;
        }
        loop {
            let Some(Reverse((_, i))) = self.heap.pop() else {
                return Ok(None);
            };
            let ev = self.sources[i].pending.take();
            self.pull(i)?;
            if let Some(e) = &ev {
                if !self.admit(e)? {
                    continue;
                }
                self.events += 1;
                self.report_progress();
            }
            return Ok(ev);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{EventKind, Span};

    struct VecReader {
        meta: TraceMeta,
        evs: std::vec::IntoIter<Event>,
        dq: DataQuality,
    }
    impl EventReader for VecReader {
        fn meta(&self) -> &TraceMeta {
            &self.meta
        }
        fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
            Ok(self.evs.next())
        }
        fn quality(&self) -> &DataQuality {
            &self.dq
        }
    }
    fn reader(input: u16, ts: &[Ts]) -> Box<dyn EventReader> {
        Box::new(vec_reader(input, ts))
    }

    fn drain(mut i: Inputs) -> (Vec<(Ts, u16)>, DataQuality) {
        let mut out = Vec::new();
        while let Some(e) = i.next_event().unwrap() {
            out.push((e.ts, e.span.input()));
        }
        (out, i.quality())
    }

    #[test]
    fn merges_in_time_order_with_stable_ties() {
        let (out, dq) = drain(Inputs::from_readers(vec![
            reader(0, &[1, 5, 5, 9]),
            reader(1, &[2, 5, 10]),
            reader(2, &[]),
        ]));
        assert_eq!(
            out,
            vec![(1, 0), (2, 1), (5, 0), (5, 0), (5, 1), (9, 0), (10, 1)]
        );
        assert!(dq.is_empty());
    }

    /// Fails with a ReadError after its events.
    struct FailingReader {
        inner: VecReader,
        failed: bool,
    }
    impl EventReader for FailingReader {
        fn meta(&self) -> &TraceMeta {
            &self.inner.meta
        }
        fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
            match self.inner.next_event()? {
                Some(e) => Ok(Some(e)),
                None if !self.failed => {
                    self.failed = true;
                    Err(ReadError::new("bad", None, "more", "a broken record"))
                }
                None => Ok(None),
            }
        }
        fn quality(&self) -> &DataQuality {
            &self.inner.dq
        }
    }

    fn drain_batches(mut i: Inputs) -> (Vec<(Ts, u16)>, Option<String>) {
        let (mut out, mut buf) = (Vec::new(), Vec::new());
        loop {
            match i.next_batch(&mut buf) {
                Ok(true) => out.extend(buf.iter().map(|e| (e.ts, e.span.input()))),
                Ok(false) => return (out, None),
                Err(e) => {
                    assert!(buf.is_empty(), "an error comes alone");
                    return (out, Some(e.to_string()));
                }
            }
        }
    }

    #[test]
    fn batches_equal_single_events() {
        let inputs = || {
            Inputs::from_readers(vec![
                reader(0, &[1, 5, 5, 9]),
                reader(1, &[2, 5, 10]),
                reader(2, &[]),
            ])
        };
        let (one, _) = drain(inputs());
        let (batched, err) = drain_batches(inputs());
        assert_eq!(one, batched);
        assert_eq!(err, None);
        let many: Vec<Ts> = (0..5000).collect();
        let (one, dq1) = drain(Inputs::from_readers(vec![reader(0, &many)]));
        let mut i = Inputs::from_readers(vec![reader(0, &many)]);
        let (batched, err) = drain_batches(Inputs::from_readers(vec![reader(0, &many)]));
        assert_eq!(one.len(), 5000);
        assert_eq!(one, batched);
        assert_eq!(err, None);
        let mut buf = Vec::new();
        while i.next_batch(&mut buf).unwrap() {}
        assert_eq!(i.events_read(), 5000);
        assert_eq!(
            i.quality().count(Problem::OutOfOrderEvents),
            dq1.count(Problem::OutOfOrderEvents)
        );
    }

    #[test]
    fn an_error_comes_after_the_events_before_it() {
        for n in [1usize, 2] {
            let mut readers = vec![];
            for input in 0..n {
                readers.push(Box::new(FailingReader {
                    inner: vec_reader(input as u16, &[3, 4]),
                    failed: false,
                }) as Box<dyn EventReader>);
            }
            let (out, err) = drain_batches(Inputs::from_readers(readers));
            assert!(!out.is_empty(), "events before the error are kept");
            assert_eq!(out[0].0, 3);
            assert!(err.is_some_and(|e| e.contains("a broken record")));
        }
    }

    fn vec_reader(input: u16, ts: &[Ts]) -> VecReader {
        let evs: Vec<Event> = ts
            .iter()
            .map(|&t| Event {
                ts: t,
                cpu: 0,
                pid: 1,
                span: Span::byte(input, 0),
                kind: EventKind::Lost { count: None },
                callchain: None,
            })
            .collect();
        VecReader {
            meta: TraceMeta::default(),
            evs: evs.into_iter(),
            dq: DataQuality::default(),
        }
    }

    #[test]
    fn counts_backwards_events_and_keeps_them() {
        let (out, dq) = drain(Inputs::from_readers(vec![
            reader(0, &[1, 8, 3, 9]),
            reader(1, &[4]),
        ]));
        assert_eq!(out.len(), 5);
        assert_eq!(dq.count(Problem::OutOfOrderEvents), 1);
        let (out1, dq1) = drain(Inputs::from_readers(vec![reader(0, &[1, 8, 3, 9])]));
        assert_eq!(
            out1.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![1, 8, 3, 9]
        );
        assert_eq!(dq1.count(Problem::OutOfOrderEvents), 1);
    }
}
