//! [`BlockTracker`]: the block request state machine, one slot per in-flight request.
//!
//! Per device it keeps three tables:
//!
//! * the in-flight bios by start sector ([`super::bios::BioMap`], btt's view; gives the
//!   per-bio [`PhaseSample`]s and tells which task queued what);
//! * the in-flight requests, start sector → slot in a slab shared by all devices;
//! * the open zero-length flush sequences ([`super::flush::FlushQueue`]).
//!
//! Request life: `Q` (bio) → `G` (request allocated at the bio's sector; the bio's task is
//! the request's *queuer*) → `M`/`F` (later bios merged at the back / front; a front merge
//! moves the request's key) → `I` (inserted; *inserter*) → `D` (dispatched; *dispatcher*;
//! its range is authoritative) → `R` (requeued: back to waiting, a later `D` dispatches it
//! again) → `C` (completed; a `C` shorter than the request is a partial completion: the
//! request's key moves past the completed part and it stays in flight) → record.
//!
//! Steps may be missing: no `I` without an I/O scheduler (normal), no `Q`/`G` for requests
//! allocated before the trace began. Anomalies are counted in [`DataQuality`], never fatal:
//!
//! | key | severity | when |
//! |---|---|---|
//! | `block_complete_without_dispatch` | warning | `C` of a known request that was never dispatched |
//! | `block_complete_unknown_request` | info | `C` of a request never seen (dispatched before the trace began) |
//! | `block_issue_without_request` | info | `D` of a request never seen allocated, inserted or queued |
//! | `block_duplicate_sector` | warning | a request allocated at the sector and direction of one still in flight (whose completion was missed) |
//! | `block_bio_sector_in_flight` | info | a `Q` at the start sector of a bio still in flight (the newer replaces the older, as in btt) |
//! | `block_merge_without_request` | info | `M`/`F` with no request next to it |
//! | `block_requeue_unknown_request` | info | `R` of a request never seen |
//! | `block_flush_unmatched` | warning | a zero-length flush step with no open sequence to belong to, or too many open |
//! | `block_event_without_device` | warning | a request event that names no device |
//! | `block_requests_in_flight_at_end` | info | requests still open at [`BlockTracker::finish`] |

use rustc_hash::FxHashMap;
use stallscope_model::{
    BlockAction, BlockDev, BlockEvent, BlockOp, DataQuality, Event, EventKind, Problem, Span, Tid,
    Ts,
};

use super::bios::{Bio, BioMap, Stamp, NO_REQUEST};
use super::flush::{FlushQueue, FlushSeq};
use super::record::{
    BlockSink, BlockTask, BttPhase, CompletedRequest, PhaseSample, QueuedBio, RequestKind,
};
use super::requests::RequestIndex;

/// Where and when a block event happened: the parts of an [`Event`] the tracker uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventAt {
    /// Timestamp, ns.
    pub ts: Ts,
    /// Context pid (-1 when unknown).
    pub pid: Tid,
    /// Source of the record.
    pub span: Span,
}

/// One in-flight request.
#[derive(Clone, Copy, Debug)]
struct Request {
    /// Current key (moves on front merges and partial completions).
    key: u64,
    /// Direction: see [`direction`].
    dir: u8,
    /// Start sector as dispatched.
    sector: u64,
    nr_sector: u32,
    completed_sectors: u32,
    rwbs: stallscope_model::Rwbs,
    queue_ts: Option<Ts>,
    getrq_ts: Option<Ts>,
    insert_ts: Option<Ts>,
    first_issue_ts: Option<Ts>,
    issue_ts: Option<Ts>,
    first_complete_ts: Option<Ts>,
    queuer: Option<BlockTask>,
    inserter: Option<BlockTask>,
    dispatcher: Option<BlockTask>,
    bios: u32,
    merges: u32,
    requeues: u32,
    partial_completions: u32,
    queue_span: Span,
    issue_span: Option<Span>,
    /// A bio or the allocation carried PREFLUSH or FUA (the dispatch's flags may not).
    flush_flags: bool,
}

impl Request {
    fn new(key: u64, nr_sector: u32, rwbs: stallscope_model::Rwbs, span: Span) -> Request {
        Request {
            key,
            dir: direction(rwbs),
            sector: key,
            nr_sector,
            completed_sectors: 0,
            rwbs,
            queue_ts: None,
            getrq_ts: None,
            insert_ts: None,
            first_issue_ts: None,
            issue_ts: None,
            first_complete_ts: None,
            queuer: None,
            inserter: None,
            dispatcher: None,
            bios: 0,
            merges: 0,
            requeues: 0,
            partial_completions: 0,
            queue_span: span,
            issue_span: None,
            flush_flags: rwbs.preflush || rwbs.fua,
        }
    }

    /// [`Request::new`] written field by field into a slab slot (building the request on
    /// the stack and copying it in cost a 280-byte copy and a store-forwarding stall per
    /// request).
    fn init(&mut self, key: u64, nr_sector: u32, rwbs: stallscope_model::Rwbs, span: Span) {
        self.key = key;
        self.dir = direction(rwbs);
        self.sector = key;
        self.nr_sector = nr_sector;
        self.completed_sectors = 0;
        self.rwbs = rwbs;
        self.queue_ts = None;
        self.getrq_ts = None;
        self.insert_ts = None;
        self.first_issue_ts = None;
        self.issue_ts = None;
        self.first_complete_ts = None;
        self.queuer = None;
        self.inserter = None;
        self.dispatcher = None;
        self.bios = 0;
        self.merges = 0;
        self.requeues = 0;
        self.partial_completions = 0;
        self.queue_span = span;
        self.issue_span = None;
        self.flush_flags = rwbs.preflush || rwbs.fua;
    }

    /// Takes queue time, queuer and source from the bio that starts the request.
    fn adopt_bio(&mut self, bio: &Bio) {
        self.queue_ts = Some(self.queue_ts.map_or(bio.queue_ts, |t| t.min(bio.queue_ts)));
        if self.queuer.is_none() {
            self.queuer = Some(bio.queuer);
            self.queue_span = bio.queue_span;
        }
        self.bios = self.bios.max(1);
        self.flush_flags |= bio.rwbs.preflush || bio.rwbs.fua;
    }
}

/// State of one device.
#[derive(Debug)]
struct DeviceState {
    dev: BlockDev,
    bios: BioMap,
    /// (key sector, direction) → request slot. Direction keeps a read and a write of the
    /// same block apart when both are in flight.
    requests: RequestIndex,
    flushes: FlushQueue,
    /// Start sectors of recently completed preflush/FUA data requests, whose flush-machinery
    /// sequence ends with a zero-length `C` at that sector (see [`RECENT_FUA`]).
    recent_fua: std::collections::VecDeque<u64>,
}

/// Preflush/FUA data requests remembered per device for their final zero-length `C`.
///
/// When the flush machinery emulates preflush / FUA, a write shows as
/// `Q FWFSM s+n`, `G`, `D FN`/`C FN` (preflush), `I WSM s+n`, `D`, `C WSM s+n` (data),
/// `D FN`/`C FN` (post-flush), and finally `C WSM s` with no length. The record is emitted
/// at the data `C`; the final zero-length `C` is recognized by its sector and only counted.
const RECENT_FUA: usize = 64;

/// Counts of events the tracker saw but does not model (plugs, splits, remaps…), for
/// `info` and the report's capability block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockEventCounts {
    /// Block events processed.
    pub events: u64,
    /// Bios accepted (`Q` with a length).
    pub bios: u64,
    /// Zero-length flush bios.
    pub flush_bios: u64,
    /// Requests completed (records emitted), flushes included.
    pub requests: u64,
    /// `X` splits.
    pub splits: u64,
    /// `A` remaps.
    pub remaps: u64,
    /// `R` requeues.
    pub requeues: u64,
    /// `M`/`F` merges.
    pub merges: u64,
    /// Final zero-length completions of preflush/FUA data requests (see [`RECENT_FUA`]).
    pub fua_final_completions: u64,
    /// Other events (plug, unplug, bounce, message) that do not change request state.
    pub other: u64,
}

/// The block request state machine. Feed it every event in time order with
/// [`BlockTracker::process`]; non-block events are ignored.
///
/// ```
/// use stallscope_timeline::block::{BlockTracker, CollectRequests};
/// let mut tracker = BlockTracker::new();
/// let mut out = CollectRequests::default();
/// # let events: Vec<stallscope_model::Event> = Vec::new();
/// for ev in &events {
///     tracker.process(ev, &mut out);
/// }
/// let quality = tracker.finish();
/// # assert!(out.0.is_empty() && quality.is_empty());
/// ```
#[derive(Debug, Default)]
pub struct BlockTracker {
    devices: Vec<DeviceState>,
    device_index: FxHashMap<BlockDev, usize>,
    last_device: Option<usize>,
    slab: Vec<Request>,
    free: Vec<u32>,
    live_requests: usize,
    scratch: Vec<u64>,
    quality: DataQuality,
    counts: BlockEventCounts,
}

/// btt's difference: a zero or negative interval counts as 1 ns.
fn btt_delta(from: Ts, to: Ts) -> Ts {
    if from < to {
        to - from
    } else {
        1
    }
}

/// The flush machinery's own request: `FF` from the tracepoints (REQ_OP_FLUSH | PREFLUSH),
/// `FN` from blkparse (FLUSH category, no data direction).
fn is_flush_request(b: &BlockEvent) -> bool {
    b.rwbs.op == BlockOp::Flush || (b.rwbs.preflush && b.rwbs.op == BlockOp::None)
}

/// 0 read, 1 write, 2 anything else (discard, flush, none).
fn direction(r: stallscope_model::Rwbs) -> u8 {
    match r.op {
        BlockOp::Read => 0,
        BlockOp::Write => 1,
        _ => 2,
    }
}

fn task_of(ev: &EventAt, b: &BlockEvent) -> BlockTask {
    BlockTask {
        pid: ev.pid,
        comm: b.comm.unwrap_or_default(),
    }
}

fn describe(ev: &EventAt, b: &BlockEvent) -> String {
    format!(
        "{} {} {} {} + {} ({})",
        ev.ts,
        b.dev.map_or_else(|| "?".to_string(), |d| d.to_string()),
        b.action.letter(),
        b.sector,
        b.nr_sector,
        ev.span.pos()
    )
}

impl BlockTracker {
    /// An empty tracker.
    pub fn new() -> BlockTracker {
        BlockTracker::default()
    }

    /// Data-quality counters so far.
    pub fn quality(&self) -> &DataQuality {
        &self.quality
    }

    /// Event counts so far.
    pub fn counts(&self) -> BlockEventCounts {
        self.counts
    }

    /// Requests currently in flight (all devices, flush sequences excluded).
    pub fn requests_in_flight(&self) -> usize {
        self.live_requests
    }

    /// Ends the run: counts what is still in flight and returns the data-quality counters.
    pub fn finish(mut self) -> DataQuality {
        let open: usize =
            self.live_requests + self.devices.iter().map(|d| d.flushes.len()).sum::<usize>();
        if open > 0 {
            let bios: usize = self.devices.iter().map(|d| d.bios.len()).sum();
            self.quality
                .add(Problem::BlockRequestsInFlightAtEnd, open as u64, || {
                    format!("{open} requests and {bios} bios open at the end")
                });
        }
        self.quality
    }

    /// Processes one event (non-block events are ignored).
    pub fn process(&mut self, ev: &Event, sink: &mut impl BlockSink) {
        if let EventKind::Block(b) = &ev.kind {
            let at = EventAt {
                ts: ev.ts,
                pid: ev.pid,
                span: ev.span,
            };
            self.process_block(&at, b, sink);
        }
    }

    /// Counts a plug, unplug, bounce or message event without building it (lean readers;
    /// the same as passing it to [`Self::process_block`]).
    pub fn count_untracked(&mut self) {
        self.counts.events += 1;
        self.counts.other += 1;
    }

    /// Processes one block event; `ev` gives time, context pid and source. Readers with a
    /// lean path (no [`Event`] per record) call this directly.
    pub fn process_block(&mut self, ev: &EventAt, b: &BlockEvent, sink: &mut impl BlockSink) {
        self.counts.events += 1;
        match b.action {
            BlockAction::Plug
            | BlockAction::Unplug
            | BlockAction::Bounce
            | BlockAction::Message => {
                self.counts.other += 1;
                return;
            }
            BlockAction::Split => {
                self.counts.splits += 1;
                return;
            }
            BlockAction::Remap => {
                self.counts.remaps += 1;
                return;
            }
            _ => {}
        }
        let Some(dev) = b.dev else {
            self.quality
                .add(Problem::BlockEventWithoutDevice, 1, || describe(ev, b));
            return;
        };
        let di = self.device(dev);
        let zero_length = b.nr_sector == 0 && b.bytes.unwrap_or(0) == 0;
        if zero_length {
            self.flush_step(di, ev, b, sink);
            return;
        }
        match b.action {
            BlockAction::Queue => self.on_queue(di, ev, b, sink),
            BlockAction::GetRq => self.on_getrq(di, ev, b, sink),
            BlockAction::Insert => self.on_insert(di, ev, b, sink),
            BlockAction::BackMerge | BlockAction::FrontMerge => self.on_merge(di, ev, b, sink),
            BlockAction::Issue => self.on_issue(di, ev, b, sink),
            BlockAction::Requeue => self.on_requeue(di, ev, b),
            BlockAction::Complete => self.on_complete(di, ev, b, sink),
            // INVARIANT: handled above.
            _ => {}
        }
    }

    #[inline(always)]
    fn device(&mut self, dev: BlockDev) -> usize {
        // Consecutive events are mostly of one device.
        if let Some(i) = self.last_device {
            if self.devices.get(i).is_some_and(|d| d.dev == dev) {
                return i;
            }
        }
        self.other_device(dev)
    }

    /// [`Self::device`] when the device is not the last one's (out of line: building a
    /// device's state gave the inlined lookup a large stack frame).
    #[cold]
    #[inline(never)]
    fn other_device(&mut self, dev: BlockDev) -> usize {
        if let Some(&i) = self.device_index.get(&dev) {
            self.last_device = Some(i);
            return i;
        }
        let i = self.devices.len();
        self.devices.push(DeviceState {
            dev,
            bios: BioMap::default(),
            requests: RequestIndex::default(),
            flushes: FlushQueue::default(),
            recent_fua: std::collections::VecDeque::new(),
        });
        self.device_index.insert(dev, i);
        i
    }

    /// A free request slot (its contents are stale: [`Request::init`] them).
    fn alloc(&mut self) -> u32 {
        self.live_requests += 1;
        if let Some(i) = self.free.pop() {
            i
        } else {
            self.slab.push(Request::new(
                0,
                0,
                stallscope_model::Rwbs::default(),
                Span::default(),
            ));
            (self.slab.len() - 1) as u32
        }
    }

    fn release(&mut self, slot: u32) {
        self.live_requests -= 1;
        self.free.push(slot);
    }

    /// Registers a new request at `b`'s sector and direction, taking over the bio in slot
    /// `bio` of the device's bios when given; an older request still at that key is dropped
    /// (counted).
    fn open_request(&mut self, di: usize, ev: &EventAt, b: &BlockEvent, bio: Option<u32>) -> u32 {
        let key = (b.sector, direction(b.rwbs));
        let slot = self.alloc();
        let r = &mut self.slab[slot as usize];
        r.init(b.sector, b.nr_sector, b.rwbs, ev.span);
        if let Some(bio) = bio {
            r.adopt_bio(self.devices[di].bios.slot_mut(bio));
        }
        if let Some(old) = self.devices[di].requests.insert(key, slot) {
            self.release(old);
            self.quality
                .add(Problem::BlockDuplicateSector, 1, || describe(ev, b));
        }
        slot
    }

    fn on_queue(&mut self, di: usize, ev: &EventAt, b: &BlockEvent, sink: &mut impl BlockSink) {
        let d = &mut self.devices[di];
        let tag = sink.queued(&QueuedBio {
            dev: d.dev,
            ts: ev.ts,
            queuer: task_of(ev, b),
            rwbs: b.rwbs,
            sector: b.sector,
            nr_sector: b.nr_sector,
        });
        let (bio, replaced) = d.bios.insert_slot(b.sector);
        bio.set_queued(b.end_sector(), b.rwbs, ev.ts, ev.span, ev.pid, &b.comm);
        bio.tag = tag;
        if replaced {
            self.quality
                .add(Problem::BlockBioSectorInFlight, 1, || describe(ev, b));
        }
        self.counts.bios += 1;
    }

    fn on_getrq(&mut self, di: usize, ev: &EventAt, b: &BlockEvent, sink: &mut impl BlockSink) {
        let dev = self.devices[di].dev;
        let bios = &mut self.devices[di].bios;
        let bio = bios.containing_slot(b.sector).map(|(_, k)| {
            let bio = bios.slot_mut(k);
            bio.stamp(Stamp::GetRq, ev.ts);
            sink.phase(&PhaseSample {
                phase: BttPhase::Q2G,
                dev,
                queuer: bio.queuer,
                rwbs: bio.rwbs,
                dur: btt_delta(bio.queue_ts, ev.ts),
                end_ts: ev.ts,
                tag: bio.tag,
            });
            k
        });
        let slot = self.open_request(di, ev, b, bio);
        let r = &mut self.slab[slot as usize];
        r.getrq_ts = Some(ev.ts);
        match bio {
            Some(k) => self.devices[di].bios.slot_mut(k).request = slot,
            None => r.queuer = Some(task_of(ev, b)),
        }
    }

    fn on_insert(&mut self, di: usize, ev: &EventAt, b: &BlockEvent, sink: &mut impl BlockSink) {
        let dev = self.devices[di].dev;
        let bios = &mut self.devices[di].bios;
        let bio = bios.containing_slot(b.sector).map(|(_, k)| {
            let bio = bios.slot_mut(k);
            bio.stamp(Stamp::Insert, ev.ts);
            if let Some(g) = bio.at(Stamp::GetRq) {
                sink.phase(&PhaseSample {
                    phase: BttPhase::G2I,
                    dev,
                    queuer: bio.queuer,
                    rwbs: bio.rwbs,
                    dur: btt_delta(g, ev.ts),
                    end_ts: ev.ts,
                    tag: bio.tag,
                });
            }
            k
        });
        let slot = match self.devices[di]
            .requests
            .get(&(b.sector, direction(b.rwbs)))
        {
            Some(&slot) => slot,
            // Requests allocated before the trace, or inserted by the flush machinery.
            None => self.open_request(di, ev, b, bio),
        };
        let r = &mut self.slab[slot as usize];
        r.insert_ts = Some(ev.ts);
        r.inserter = Some(task_of(ev, b));
    }

    fn on_merge(&mut self, di: usize, ev: &EventAt, b: &BlockEvent, sink: &mut impl BlockSink) {
        self.counts.merges += 1;
        let dev = self.devices[di].dev;
        let d = &mut self.devices[di];
        // btt: Q2M for the bio that contains the merge's sector (the merged bio itself).
        let merged = d.bios.containing(b.sector).map(|(start, bio)| {
            bio.stamp(Stamp::Merge, ev.ts);
            sink.phase(&PhaseSample {
                phase: BttPhase::Q2M,
                dev,
                queuer: bio.queuer,
                rwbs: bio.rwbs,
                dur: btt_delta(bio.queue_ts, ev.ts),
                end_ts: ev.ts,
                tag: bio.tag,
            });
            (start, bio.queue_ts)
        });
        // The request it joins: the one ending at the bio (back) or starting after it (front).
        let neighbour = if b.action == BlockAction::BackMerge {
            d.bios.ending_at(b.sector).map(|n| n.request)
        } else {
            d.bios.starting_at(b.end_sector()).map(|n| n.request)
        };
        let slot = match neighbour {
            Some(slot) if slot != NO_REQUEST => slot,
            _ => {
                self.quality
                    .add(Problem::BlockMergeWithoutRequest, 1, || describe(ev, b));
                return;
            }
        };
        if let Some((start, _)) = merged {
            if let Some(bio) = d.bios.starting_at(start) {
                bio.request = slot;
            }
        }
        let r = &mut self.slab[slot as usize];
        r.nr_sector = r.nr_sector.saturating_add(b.nr_sector);
        r.merges += 1;
        r.bios += 1;
        if let Some((_, queue_ts)) = merged {
            r.queue_ts = Some(r.queue_ts.map_or(queue_ts, |t| t.min(queue_ts)));
        }
        if b.action == BlockAction::FrontMerge && r.key == b.end_sector() {
            d.requests.remove(&(r.key, r.dir));
            r.key = b.sector;
            r.sector = b.sector;
            if let Some(old) = d.requests.insert((b.sector, r.dir), slot) {
                if old != slot {
                    self.live_requests -= 1;
                    self.free.push(old);
                }
            }
        }
    }

    fn on_issue(&mut self, di: usize, ev: &EventAt, b: &BlockEvent, sink: &mut impl BlockSink) {
        let dev = self.devices[di].dev;
        let d = &mut self.devices[di];
        let mut n_bios = 0u32;
        let mut first_bio: Option<u32> = None;
        self.scratch.clear();
        let n = d.bios.collect_covered(b.sector, b.end_sector());
        for k in 0..n {
            let (start, slot) = d.bios.hits[k];
            let bio = d.bios.slot_mut(slot);
            n_bios += 1;
            if let Some(i) = bio.at(Stamp::Insert) {
                sink.phase(&PhaseSample {
                    phase: BttPhase::I2D,
                    dev,
                    queuer: bio.queuer,
                    rwbs: bio.rwbs,
                    dur: btt_delta(i, ev.ts),
                    end_ts: ev.ts,
                    tag: bio.tag,
                });
            } else if let Some(m) = bio.at(Stamp::Merge) {
                sink.phase(&PhaseSample {
                    phase: BttPhase::M2D,
                    dev,
                    queuer: bio.queuer,
                    rwbs: bio.rwbs,
                    dur: btt_delta(m, ev.ts),
                    end_ts: ev.ts,
                    tag: bio.tag,
                });
            }
            // btt's Q2D is the plain difference (no 1 ns floor).
            sink.phase(&PhaseSample {
                phase: BttPhase::Q2D,
                dev,
                queuer: bio.queuer,
                rwbs: bio.rwbs,
                dur: ev.ts.saturating_sub(bio.queue_ts),
                end_ts: ev.ts,
                tag: bio.tag,
            });
            bio.stamp(Stamp::Issue, ev.ts);
            if start == b.sector {
                first_bio = Some(slot);
            }
            if bio.request != NO_REQUEST {
                self.scratch.push(u64::from(bio.request));
            }
        }
        let slot = match d.requests.get(&(b.sector, direction(b.rwbs))) {
            Some(&slot) => slot,
            None => {
                if first_bio.is_none() {
                    self.quality
                        .add(Problem::BlockIssueWithoutRequest, 1, || describe(ev, b));
                }
                self.open_request(di, ev, b, first_bio)
            }
        };
        self.absorb_merged_requests(di, slot, b);
        let r = &mut self.slab[slot as usize];
        r.first_issue_ts.get_or_insert(ev.ts);
        r.issue_ts = Some(ev.ts);
        r.issue_span = Some(ev.span);
        r.dispatcher = Some(task_of(ev, b));
        r.sector = b.sector;
        r.nr_sector = b.nr_sector;
        r.rwbs = b.rwbs;
        r.bios = r.bios.max(n_bios);
    }

    /// Requests allocated inside the range of a dispatch that starts elsewhere were merged
    /// into the dispatched request by the I/O scheduler (`block_rq_merge`, which blktrace does
    /// not report): they will never be dispatched or completed on their own.
    fn absorb_merged_requests(&mut self, di: usize, slot: u32, b: &BlockEvent) {
        let (start, end) = (b.sector, b.end_sector());
        let mut absorbed = (0u32, 0u32);
        for &other in &self.scratch {
            let other = other as u32;
            if other == slot {
                continue;
            }
            let o = &self.slab[other as usize];
            let d = &mut self.devices[di];
            let live = d.requests.get(&(o.key, o.dir)) == Some(&other);
            if !live || o.key == start || o.key < start || o.key >= end || o.issue_ts.is_some() {
                continue;
            }
            absorbed.0 += 1 + o.merges;
            absorbed.1 += o.bios;
            d.requests.remove(&(o.key, o.dir));
            self.live_requests -= 1;
            self.free.push(other);
        }
        let r = &mut self.slab[slot as usize];
        r.merges += absorbed.0;
        r.bios += absorbed.1;
    }

    fn on_requeue(&mut self, di: usize, ev: &EventAt, b: &BlockEvent) {
        self.counts.requeues += 1;
        match self.devices[di]
            .requests
            .get(&(b.sector, direction(b.rwbs)))
        {
            Some(&slot) => self.slab[slot as usize].requeues += 1,
            None => self
                .quality
                .add(Problem::BlockRequeueUnknownRequest, 1, || describe(ev, b)),
        }
    }

    fn on_complete(&mut self, di: usize, ev: &EventAt, b: &BlockEvent, sink: &mut impl BlockSink) {
        let dev = self.devices[di].dev;
        let d = &mut self.devices[di];
        self.scratch.clear();
        let n = d.bios.collect_covered(b.sector, b.end_sector());
        for k in 0..n {
            let (start, slot) = d.bios.hits[k];
            let bio = d.bios.slot_mut(slot);
            sink.phase(&PhaseSample {
                phase: BttPhase::Q2C,
                dev,
                queuer: bio.queuer,
                rwbs: bio.rwbs,
                dur: btt_delta(bio.queue_ts, ev.ts),
                end_ts: ev.ts,
                tag: bio.tag,
            });
            if let Some(dt) = bio.at(Stamp::Issue) {
                sink.phase(&PhaseSample {
                    phase: BttPhase::D2C,
                    dev,
                    queuer: bio.queuer,
                    rwbs: bio.rwbs,
                    dur: btt_delta(dt, ev.ts),
                    end_ts: ev.ts,
                    tag: bio.tag,
                });
            }
            self.scratch.push(start);
        }
        for &start in &self.scratch {
            d.bios.remove(start);
        }
        let Some(slot) = d.requests.remove(&(b.sector, direction(b.rwbs))) else {
            self.complete_unknown(ev, b);
            return;
        };
        let r = &mut self.slab[slot as usize];
        if r.issue_ts.is_none() {
            self.quality
                .add(Problem::BlockCompleteWithoutDispatch, 1, || describe(ev, b));
        }
        r.first_complete_ts.get_or_insert(ev.ts);
        r.completed_sectors = r.completed_sectors.saturating_add(b.nr_sector);
        if r.completed_sectors < r.nr_sector {
            // Partial completion: the rest stays in flight, keyed past the completed part.
            r.partial_completions += 1;
            r.key = b.end_sector();
            let key = (r.key, r.dir);
            if let Some(old) = d.requests.insert(key, slot) {
                self.live_requests -= 1;
                self.free.push(old);
            }
            return;
        }
        let r_flush_flags = r.flush_flags;
        let rec = CompletedRequest {
            dev,
            kind: RequestKind::Data,
            sector: r.sector,
            nr_sector: r.nr_sector,
            rwbs: r.rwbs,
            queue_ts: r.queue_ts,
            getrq_ts: r.getrq_ts,
            insert_ts: r.insert_ts,
            first_issue_ts: r.first_issue_ts,
            issue_ts: r.issue_ts,
            first_complete_ts: r.first_complete_ts.unwrap_or(ev.ts),
            complete_ts: ev.ts,
            queuer: r.queuer,
            inserter: r.inserter,
            dispatcher: r.dispatcher,
            bios: r.bios,
            merges: r.merges,
            requeues: r.requeues,
            partial_completions: r.partial_completions,
            error: b.error.unwrap_or(0),
            queue_span: r.queue_span,
            issue_span: r.issue_span,
            complete_span: ev.span,
        };
        if rec.rwbs.preflush || rec.rwbs.fua || r_flush_flags {
            if d.recent_fua.len() >= RECENT_FUA {
                d.recent_fua.pop_front();
            }
            d.recent_fua.push_back(rec.sector);
        }
        self.release(slot);
        self.counts.requests += 1;
        sink.request(&rec);
    }

    fn complete_unknown(&mut self, ev: &EventAt, b: &BlockEvent) {
        self.quality
            .add(Problem::BlockCompleteUnknownRequest, 1, || describe(ev, b));
    }

    fn flush_unmatched(&mut self, ev: &EventAt, b: &BlockEvent) {
        self.quality
            .add(Problem::BlockFlushUnmatched, 1, || describe(ev, b));
    }

    fn flush_step(&mut self, di: usize, ev: &EventAt, b: &BlockEvent, sink: &mut impl BlockSink) {
        let task = task_of(ev, b);
        let fua_end = b.action == BlockAction::Complete
            && !is_flush_request(b)
            && self.devices[di].recent_fua.contains(&b.sector);
        let flushes = &mut self.devices[di].flushes;
        match b.action {
            BlockAction::Queue => {
                self.counts.flush_bios += 1;
                let dropped = flushes.open(FlushSeq {
                    rwbs: b.rwbs,
                    queue_ts: Some(ev.ts),
                    queue_span: ev.span,
                    queuer: Some(task),
                    ..FlushSeq::default()
                });
                if dropped {
                    self.flush_unmatched(ev, b);
                }
            }
            BlockAction::GetRq => {
                match flushes.oldest(|s| s.getrq_ts.is_none() && s.issue_ts.is_none()) {
                    Some(s) => s.getrq_ts = Some(ev.ts),
                    None => self.flush_unmatched(ev, b),
                }
            }
            BlockAction::Insert => {
                match flushes.oldest(|s| s.insert_ts.is_none() && s.issue_ts.is_none()) {
                    Some(s) => {
                        s.insert_ts = Some(ev.ts);
                        s.inserter = Some(task);
                    }
                    None => self.flush_unmatched(ev, b),
                }
            }
            BlockAction::Issue => {
                if flushes.oldest(|s| s.issue_ts.is_none()).is_none() {
                    // A flush the kernel started on its own (no bio asked for it).
                    let dropped = flushes.open(FlushSeq {
                        rwbs: b.rwbs,
                        queue_span: ev.span,
                        ..FlushSeq::default()
                    });
                    if dropped {
                        self.flush_unmatched(ev, b);
                    }
                }
                let flushes = &mut self.devices[di].flushes;
                // INVARIANT: one without an issue time exists (found or just opened).
                let Some(seq) = flushes.oldest(|s| s.issue_ts.is_none()) else {
                    return;
                };
                seq.first_issue_ts.get_or_insert(ev.ts);
                seq.issue_ts = Some(ev.ts);
                seq.issue_span = Some(ev.span);
                seq.dispatcher = Some(task);
                seq.rwbs = if seq.queue_ts.is_some() {
                    seq.rwbs
                } else {
                    b.rwbs
                };
            }
            BlockAction::Requeue => match flushes.oldest(|s| s.issue_ts.is_some()) {
                Some(s) => s.requeues += 1,
                None => self.flush_unmatched(ev, b),
            },
            BlockAction::Complete if is_flush_request(b) => {
                let Some(s) = flushes.oldest(|s| s.issue_ts.is_some() && s.flush_done_ts.is_none())
                else {
                    self.complete_unknown(ev, b);
                    return;
                };
                s.flush_done_ts = Some(ev.ts);
                if s.queue_ts.is_none() {
                    // Kernel-initiated: nothing else will close it.
                    if let Some(seq) =
                        flushes.take_oldest(|s| s.queue_ts.is_none() && s.flush_done_ts.is_some())
                    {
                        self.emit_flush(di, seq, ev, b, sink);
                    }
                }
            }
            BlockAction::Complete if fua_end => {
                self.devices[di].recent_fua.retain(|&s| s != b.sector);
                self.counts.fua_final_completions += 1;
            }
            BlockAction::Complete => match flushes.take_oldest(|s| s.queue_ts.is_some()) {
                Some(seq) => self.emit_flush(di, seq, ev, b, sink),
                None => self.complete_unknown(ev, b),
            },
            // A zero-length merge carries nothing to merge.
            _ => {}
        }
    }

    fn emit_flush(
        &mut self,
        di: usize,
        s: FlushSeq,
        ev: &EventAt,
        b: &BlockEvent,
        sink: &mut impl BlockSink,
    ) {
        let rec = CompletedRequest {
            dev: self.devices[di].dev,
            kind: RequestKind::Flush,
            sector: 0,
            nr_sector: 0,
            rwbs: s.rwbs,
            queue_ts: s.queue_ts,
            getrq_ts: s.getrq_ts,
            insert_ts: s.insert_ts,
            first_issue_ts: s.first_issue_ts,
            issue_ts: s.issue_ts,
            first_complete_ts: s.flush_done_ts.unwrap_or(ev.ts),
            complete_ts: ev.ts,
            queuer: s.queuer,
            inserter: s.inserter,
            dispatcher: s.dispatcher,
            bios: u32::from(s.queue_ts.is_some()),
            merges: 0,
            requeues: s.requeues,
            partial_completions: 0,
            error: b.error.unwrap_or(0),
            queue_span: s.queue_span,
            issue_span: s.issue_span,
            complete_span: ev.span,
        };
        self.counts.requests += 1;
        sink.request(&rec);
    }
}
