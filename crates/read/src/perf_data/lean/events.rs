//! [`LeanEventReader`]: the general reader's events of a file-mode perf.data, built by the
//! lean walkers in their event-building mode (see `super::walk`).
//!
//! ```text
//! walkers   two threads, each decoding its segments into 40-byte entries that keep what
//!           an Event needs (rare records are decoded whole by the general decoder); on
//!           two CPUs or fewer, one walker, run by the orderer's thread (see
//!           `event_walkers`)
//! orderer   a thread of its own: perf's round ordering over the entries (`super::emit`) →
//!           batches of entries through a bounded channel (they come back for reuse)
//! caller    builds the events from the entries: `visit_batch` 64 at a time into slots
//!           that stay in its L1 cache, handed to the analysis right away (a 128-byte
//!           event written on one core and read on another cost more than building it
//!           where it is used: the entries that cross are 40 bytes); `next_batch` all of
//!           a batch into the caller's vector
//! ```
//!
//! The events, their order, the metadata and the data-quality notes (none) equal the
//! general reader's ([`super::super::PerfDataReader`]) on every file this reader takes
//! (tested on every fixture). Whatever the general reader would report (an error or a
//! data-quality note) is a [`LeanBail`] of the walkers; this reader then goes on with the
//! general reader: it opens the file again, skips as many events as it already handed out
//! (the same ones: the general reader produces them in the same order before the record
//! that stopped the walkers) and hands out the rest, with the general reader's notes and
//! errors. So a bail-out costs time, never a different result.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use stallscope_model::{
    Comm, DataQuality, Event, EventKind, SchedRecordKind, Span, TaskRef, Tid, TraceMeta,
};

use super::super::pipeline::Pipeline;
use super::super::PerfDataReader;
use super::emit::{comm_of, Entries};
use super::names::{copy_new, SharedNames};
use super::plan::Plan;
use super::walk::{Entry, FullEvents, FULL, POS_MASK, SKIP};
use super::{split, PerfLeanSource};
use crate::lean::LeanBail;
use crate::tracefs_format::{reset_kind, BLANK_STAT_RUNTIME, BLANK_SWITCH, BLANK_WAKEUPS};
use crate::{EventReader, Input, ReadError};

/// Batches in flight from the ordering thread.
const IN_FLIGHT: usize = 4;
/// Events built and handed to `visit_batch`'s visitor at a time (8 KiB: they stay in L1).
const VISIT_RUN: usize = 64;
/// How many entries ahead of the one built the batch is prefetched.
const ENTRY_PREFETCH: usize = 32;

/// Whether a file-mode perf.data header (`head`: the file's first bytes) declares
/// HEADER_COMPRESSED (feature bit 27 of the bitmap at offset 72): `perf record -z`, whose
/// data section holds zstd-compressed records.
fn has_compressed_records(head: &[u8]) -> bool {
    const FEATURES_AT: usize = 72;
    const HEADER_COMPRESSED: u32 = 27;
    head.get(FEATURES_AT..FEATURES_AT + 8)
        .and_then(|b| b.try_into().ok())
        .is_some_and(|b: [u8; 8]| u64::from_le_bytes(b) & (1 << HEADER_COMPRESSED) != 0)
}

/// Walkers in the event-building mode: one on a machine with two CPUs or fewer, two
/// otherwise. There the caller's thread, which builds the events and analyzes them, is
/// the slowest stage: one walker stays ahead of it on the other CPU, while a second one
/// takes CPU time from the caller and adds merging (`analyze` of a 6 M-event file on two
/// CPUs: 0.279 s against 0.294 s wall, 455 against 469 ms CPU, 36 against 48 MiB). The one
/// walker runs on the ordering thread (no thread of its own): walking and ordering then
/// share one CPU and the caller keeps the other (three threads on two CPUs made the caller
/// wait its turn, 10 to 40 ms a run: 0.249 against 0.241 s wall, median of 15). The
/// `latency` mode keeps two walker threads: its caller's thread does little, the walkers
/// are the slowest.
fn event_walkers() -> usize {
    match std::thread::available_parallelism() {
        Ok(n) if n.get() > 2 => 2,
        _ => 1,
    }
}

/// A slot for [`Builder::build_into`].
fn blank_event() -> Event {
    Event {
        ts: 0,
        cpu: 0,
        pid: 0,
        span: Span::default(),
        kind: EventKind::Lost { count: None },
        callchain: None,
    }
}

/// What the ordering thread sends.
enum Msg {
    Entries(Vec<Entry>),
    End,
    Bail(LeanBail),
}

/// The ordering thread and its channels.
struct Lean {
    rx: Receiver<Msg>,
    back: SyncSender<Vec<Entry>>,
    thread: Option<JoinHandle<()>>,
    walked: Arc<AtomicU64>,
    total: u64,
}

enum State {
    Lean(Lean),
    /// After a bail-out: the general reader, past the events already handed out.
    General(Box<PerfDataReader>),
    Done,
}

/// Builds events from entries (the caller's side).
struct Builder {
    /// Input index for the spans.
    input: u16,
    /// The walkers' name table, and its copy (names by id).
    names: SharedNames,
    comms: Vec<Comm>,
    /// The events the walkers decoded whole.
    full: Arc<FullEvents>,
    /// Offset of an entry whose event could not be built (never expected).
    broken: Option<u64>,
}

impl Builder {
    /// Writes the event of entry `e` into `slot` (any earlier event), field by field in
    /// place: building it apart and moving it in stalled on store forwarding at every
    /// event. `false` when the entry stands for no event (a FORK / EXIT side-band
    /// placeholder) or, with `broken` set, cannot be built.
    #[inline(always)]
    fn build_into(&mut self, e: &Entry, slot: &mut Event) -> bool {
        use SchedRecordKind as K;
        let r = &e.rec;
        let (n1, n2) = e.names();
        let pos = e.pos();
        let comms: &[Comm] = &self.comms;
        let set = |t: &mut TaskRef, id: u32, pid: Tid, prio: i32| {
            t.comm = comm_of(comms, id);
            t.pid = pid;
            t.prio = prio;
        };
        slot.ts = r.ts;
        slot.cpu = r.cpu;
        slot.span = Span::byte(self.input, pos);
        if slot.callchain.is_some() {
            slot.callchain = None;
        }
        match r.kind {
            K::Switch => {
                if !matches!(slot.kind, EventKind::Switch(_)) {
                    reset_kind(&mut slot.kind, &BLANK_SWITCH);
                }
                if let EventKind::Switch(sw) = &mut slot.kind {
                    set(&mut sw.prev, n1, r.a, e.prio(0));
                    sw.prev_state = r.prev_state;
                    set(&mut sw.next, n2, r.b, e.prio(1));
                }
                slot.pid = r.a;
            }
            K::Waking | K::Wakeup | K::WakeupNew => {
                let which = match r.kind {
                    K::Waking => 0,
                    K::Wakeup => 1,
                    _ => 2,
                };
                let same = matches!(
                    (which, &slot.kind),
                    (0, EventKind::Waking(_))
                        | (1, EventKind::Wakeup(_))
                        | (2, EventKind::WakeupNew(_))
                );
                if !same {
                    reset_kind(&mut slot.kind, &BLANK_WAKEUPS[which]);
                }
                if let EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) =
                    &mut slot.kind
                {
                    set(&mut w.task, n1, r.a, e.prio(0));
                    w.target_cpu = u32::try_from(r.b).ok();
                }
                // the waker's tid above the name id
                slot.pid = (r.value >> 32) as u32 as Tid;
            }
            K::StatRuntime => {
                if !matches!(slot.kind, EventKind::StatRuntime(_)) {
                    reset_kind(&mut slot.kind, &BLANK_STAT_RUNTIME);
                }
                if let EventKind::StatRuntime(st) = &mut slot.kind {
                    set(&mut st.task, n1, r.a, -1);
                    st.runtime = r.value;
                    st.vruntime = None;
                }
                slot.pid = r.a;
            }
            K::TaskComm => {
                slot.kind = EventKind::TaskComm {
                    tgid: r.b,
                    tid: r.a,
                    comm: comm_of(comms, n1),
                };
                slot.pid = r.a;
            }
            K::Other if n1 == FULL => match self.whole(pos) {
                Some(ev) => *slot = ev,
                None => return false,
            },
            // A FORK / EXIT side-band record: ordered, no event.
            K::Other if n1 == SKIP => return false,
            // The walkers make no other entries in this mode.
            _ => {
                self.broken = self.broken.or(Some(pos));
                return false;
            }
        }
        true
    }

    /// The event of a [`FULL`] entry at `pos`.
    #[cold]
    #[inline(never)]
    fn whole(&mut self, pos: u64) -> Option<Event> {
        let ev = self.full.lock().ok().and_then(|mut m| m.remove(&pos));
        match ev {
            Some(mut ev) => {
                ev.span = Span::byte(self.input, pos);
                Some(ev)
            }
            None => {
                self.broken = self.broken.or(Some(pos));
                None
            }
        }
    }
}

/// See the module docs.
pub struct LeanEventReader {
    path: String,
    meta: TraceMeta,
    /// The general reader's notes after a bail-out (none before: the walkers bail out on
    /// any).
    dq: DataQuality,
    state: State,
    builder: Builder,
    /// `visit_batch`'s events in the making.
    run: Vec<Event>,
    /// Events handed out so far.
    handed: u64,
    /// Why the walkers stopped, when they did.
    bail: Option<String>,
    /// [`EventReader::next_event`]'s batch, in reverse order.
    single: Vec<Event>,
}

impl LeanEventReader {
    /// Opens the perf.data file at `path` as input number `index`; a bail-out when it is
    /// not the common case the walkers model (the caller then opens the general reader).
    pub fn open(path: &str, index: u16) -> Result<LeanEventReader, LeanBail> {
        Self::open_segmented(path, index, split::SEGMENT, event_walkers())
    }

    /// [`LeanEventReader::open`] with data-section segments of about `segment` bytes and
    /// up to `walkers` walker threads (tests use small segments to exercise the cuts on
    /// small files, and both walker counts).
    #[doc(hidden)]
    pub fn open_segmented(
        path: &str,
        index: u16,
        segment: u64,
        walkers: usize,
    ) -> Result<LeanEventReader, LeanBail> {
        let input = Input::open(path).map_err(|e| LeanBail::new(e.to_string()))?;
        if input.compression.is_some() {
            return Err(LeanBail::new("compressed input"));
        }
        if has_compressed_records(&input.head) {
            // The walkers would stop at the first one: the general reader from the start.
            return Err(LeanBail::new("zstd-compressed records (perf record -z)"));
        }
        let pipeline = Pipeline::open(input, index).map_err(|e| LeanBail::new(e.to_string()))?;
        let plan = Plan::of(&pipeline)?;
        plan.check_events_mode()?;
        let map = pipeline
            .pool
            .map
            .clone()
            .ok_or_else(|| LeanBail::new("data section not mapped"))?;
        if (map.base + map.map.len() as u64) > POS_MASK {
            return Err(LeanBail::new("a data section past 2^48 bytes"));
        }
        let meta = pipeline.meta.clone();
        drop(pipeline);
        let full: Arc<FullEvents> = Arc::new(Mutex::new(Default::default()));
        let mut source =
            PerfLeanSource::spawn(map, plan, (segment, walkers), Some(full.clone()), Entries);
        let names = source.orderer.names().clone();
        let (walked, total) = (source.progress.clone(), source.total);
        let (tx, rx) = sync_channel::<Msg>(IN_FLIGHT);
        let (back, back_rx) = sync_channel::<Vec<Entry>>(IN_FLIGHT + 2);
        let thread = std::thread::Builder::new()
            .name("stallscope-lean-order".to_string())
            .spawn(move || loop {
                let mut batch = back_rx.try_recv().unwrap_or_default();
                let msg = match source.next_into(&mut batch) {
                    Ok(true) => Msg::Entries(batch),
                    Ok(false) => Msg::End,
                    Err(bail) => Msg::Bail(bail),
                };
                let last = !matches!(msg, Msg::Entries(_));
                if tx.send(msg).is_err() || last {
                    return;
                }
            })
            .map_err(|e| LeanBail::new(format!("could not start the ordering thread: {e}")))?;
        Ok(LeanEventReader {
            path: path.to_string(),
            meta,
            dq: DataQuality::default(),
            state: State::Lean(Lean {
                rx,
                back,
                thread: Some(thread),
                walked,
                total,
            }),
            builder: Builder {
                input: index,
                names,
                comms: Vec::new(),
                full,
                broken: None,
            },
            run: Vec::new(),
            handed: 0,
            bail: None,
            single: Vec::new(),
        })
    }

    /// Why the walkers stopped and the general reader took over, when they did.
    pub fn bailed_out(&self) -> Option<&str> {
        self.bail.as_deref()
    }

    /// The next batch of entries from the ordering thread: `Ok(Some)`; `Ok(None)` at the
    /// end; `Err` on a bail-out (the state is then `Done`, for [`Self::fall_back`]).
    fn next_entries(&mut self) -> Result<Option<Vec<Entry>>, LeanBail> {
        let State::Lean(lean) = &mut self.state else {
            return Ok(None);
        };
        let msg = lean.rx.recv();
        let res = match msg {
            Ok(Msg::Entries(batch)) => {
                // Every name id in the batch was interned before it was sent.
                copy_new(&self.builder.names, &mut self.builder.comms);
                return Ok(Some(batch));
            }
            Ok(Msg::End) => Ok(None),
            Ok(Msg::Bail(why)) => Err(why),
            Err(_) => Err(LeanBail::new("the ordering thread failed")),
        };
        self.state = State::Done;
        res
    }

    /// Gives a used batch of entries back to the ordering thread.
    fn recycle(&mut self, mut batch: Vec<Entry>) {
        if let State::Lean(lean) = &self.state {
            batch.clear();
            let _ = lean.back.try_send(batch);
        }
    }

    /// A bail-out when an entry could not be built.
    fn check_built(&mut self) -> Result<(), LeanBail> {
        match self.builder.broken {
            Some(pos) => {
                self.state = State::Done;
                Err(LeanBail::new(format!(
                    "an event the walkers did not build at offset {pos:#x}"
                )))
            }
            None => Ok(()),
        }
    }

    /// Goes on with the general reader past the events already handed out, giving the
    /// next ones to `visit` (`Ok(false)`: none left).
    fn fall_back(
        &mut self,
        why: LeanBail,
        buf: &mut Vec<Event>,
        visit: &mut dyn FnMut(&[Event]),
    ) -> Result<bool, ReadError> {
        self.bail = Some(why.reason);
        self.state = State::Done;
        let input = self.builder.input;
        let mut general = Box::new(PerfDataReader::open(Input::open(&self.path)?, input)?);
        let mut skip = self.handed;
        loop {
            let more = general.next_batch(buf);
            self.dq = general.quality().clone();
            let n = buf.len() as u64;
            if n > skip {
                visit(&buf[skip as usize..]);
                self.handed += n - skip;
                more?;
                self.state = State::General(general);
                return Ok(true);
            }
            skip -= n;
            if !more? {
                return Ok(false);
            }
        }
    }
}

impl EventReader for LeanEventReader {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        if self.single.is_empty() {
            let mut batch = Vec::new();
            if !self.next_batch(&mut batch)? {
                return Ok(None);
            }
            batch.reverse();
            self.single = batch;
        }
        Ok(self.single.pop())
    }

    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool, ReadError> {
        out.clear();
        // Events taken one by one first (a caller mixing both keeps the order).
        if !self.single.is_empty() {
            out.extend(self.single.drain(..).rev());
            return Ok(true);
        }
        let mut scratch = Vec::new();
        loop {
            let more = self.visit_batch(&mut scratch, &mut |evs| out.extend_from_slice(evs))?;
            // (a batch of FORK / EXIT placeholders alone builds no event: go on)
            if !more || !out.is_empty() {
                return Ok(more);
            }
        }
    }

    fn visit_batch(
        &mut self,
        buf: &mut Vec<Event>,
        visit: &mut dyn FnMut(&[Event]),
    ) -> Result<bool, ReadError> {
        if !self.single.is_empty() {
            let single: Vec<Event> = self.single.drain(..).rev().collect();
            visit(&single);
            return Ok(true);
        }
        if let State::General(g) = &mut self.state {
            let more = g.visit_batch(buf, visit);
            self.dq = g.quality().clone();
            return more;
        }
        let batch = match self.next_entries() {
            Ok(Some(b)) => b,
            Ok(None) => return Ok(false),
            Err(why) => return self.fall_back(why, buf, visit),
        };
        let mut run = std::mem::take(&mut self.run);
        if run.len() < VISIT_RUN {
            run.resize_with(VISIT_RUN, blank_event);
        }
        for (k, entries) in batch.chunks(VISIT_RUN).enumerate() {
            // The slots are overwritten in place: they stay in this core's L1.
            let mut n = 0;
            for (i, e) in entries.iter().enumerate() {
                // The ordering thread wrote the entries: ask for them ahead of their turn.
                crate::prefetch::prefetch(&batch, k * VISIT_RUN + i + ENTRY_PREFETCH);
                if let Some(slot) = run.get_mut(n) {
                    n += usize::from(self.builder.build_into(e, slot));
                }
            }
            if self.builder.broken.is_none() {
                visit(&run[..n]);
                self.handed += n as u64;
            }
        }
        self.run = run;
        self.recycle(batch);
        match self.check_built() {
            Ok(()) => Ok(true),
            Err(why) => self.fall_back(why, buf, visit).map(|_| true),
        }
    }

    fn quality(&self) -> &DataQuality {
        &self.dq
    }

    fn progress(&self) -> Option<(u64, u64)> {
        match &self.state {
            State::Lean(l) => Some((l.walked.load(Ordering::Relaxed).min(l.total), l.total)),
            State::General(g) => g.progress(),
            State::Done => None,
        }
    }
}

impl Drop for Lean {
    fn drop(&mut self) {
        // Unblock the ordering thread (its sends fail once the receiver is gone), then
        // wait for it: it stops its walkers when its source is dropped.
        let (tx, rx) = sync_channel(0);
        drop(tx);
        self.rx = rx;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
