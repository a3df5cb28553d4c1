//! What the block request tracker hands to its consumers: completed-request records
//! ([`CompletedRequest`]), btt-style per-bio phase samples ([`PhaseSample`]) and accepted
//! queue events ([`QueuedBio`]).
//!
//! Two granularities, because the peers use both:
//!
//! * **Request** (what the device sees, what detectors reason about): one record per request
//!   from its allocation (`G`) or first sighting to its final completion (`C`), with every
//!   phase timestamp, the merged bios, requeues, partial completions and three tasks: the one
//!   that queued the first bio (`Q`), the one that inserted it (`I`) and the one that
//!   dispatched it (`D`).
//! * **Bio** (what btt counts): btt measures each queued bio (`Q` trace) separately, so a
//!   request made of 16 merged bios gives 16 `Q2C` and 16 `D2C` samples, each attributed to
//!   the task that queued that bio. [`PhaseSample`] is one such measurement.

use stallscope_model::{BlockDev, Comm, Dur, Rwbs, Span, Tid, Ts};

/// A task as the block events name it: the context pid and the name the event carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct BlockTask {
    /// Context pid of the event (-1 when unknown).
    pub pid: Tid,
    /// Task name carried by the event or the blktrace process notes (empty when unknown).
    pub comm: Comm,
}

/// Data request or zero-length flush sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestKind {
    /// A request that moves data (or discards): keyed by device and start sector.
    Data,
    /// A zero-length flush: the bio's `Q FWS`/`G FWS`, the flush machinery's `D FN`/`C FN`
    /// and the bio's final zero-length `C`. Matched first-in first-out per device, because
    /// zero-length requests carry no usable sector.
    Flush,
}

/// One request, from its first sighting to its final completion. Timestamps are ns in the
/// trace clock; `None` when the trace did not show that step (no I/O scheduler → no `I`;
/// request allocated before the trace started → no `Q`/`G`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedRequest {
    /// Device.
    pub dev: BlockDev,
    /// Data or flush.
    pub kind: RequestKind,
    /// Start sector as dispatched (before any partial completion moved it).
    pub sector: u64,
    /// Length in sectors as dispatched (0 for flushes).
    pub nr_sector: u32,
    /// Operation and flags (of the dispatch, else of the allocation).
    pub rwbs: Rwbs,
    /// Earliest `Q` among the bios that make up the request.
    pub queue_ts: Option<Ts>,
    /// `G`: request allocated.
    pub getrq_ts: Option<Ts>,
    /// `I`: inserted into the I/O scheduler.
    pub insert_ts: Option<Ts>,
    /// First `D`: first dispatch to the driver.
    pub first_issue_ts: Option<Ts>,
    /// Last `D` (differs from `first_issue_ts` after requeues).
    pub issue_ts: Option<Ts>,
    /// First `C` touching the request (differs from `complete_ts` after partial completions).
    pub first_complete_ts: Ts,
    /// Final `C`.
    pub complete_ts: Ts,
    /// Task that queued the request's first bio (`Q`); for flushes, the flush bio's.
    pub queuer: Option<BlockTask>,
    /// Task that inserted the request (`I`).
    pub inserter: Option<BlockTask>,
    /// Task that dispatched it (last `D`).
    pub dispatcher: Option<BlockTask>,
    /// Bios (`Q` traces) covered by the dispatch.
    pub bios: u32,
    /// Back and front merges into the request.
    pub merges: u32,
    /// Requeues (`R`).
    pub requeues: u32,
    /// Completions that covered only part of the request before the final one.
    pub partial_completions: u32,
    /// Error of the final completion (0 = success).
    pub error: i32,
    /// Source of the first `Q` (or of the first event seen for the request).
    pub queue_span: Span,
    /// Source of the last `D`.
    pub issue_span: Option<Span>,
    /// Source of the final `C`.
    pub complete_span: Span,
}

impl CompletedRequest {
    /// Bytes moved (`nr_sector × 512`).
    pub fn bytes(&self) -> u64 {
        u64::from(self.nr_sector) * 512
    }
    /// Wait before the (last) dispatch: from the first `Q` (else `I`, else `G`) to `D`.
    pub fn wait_before_issue(&self) -> Option<Dur> {
        let start = self.queue_ts.or(self.insert_ts).or(self.getrq_ts)?;
        Some(self.issue_ts?.saturating_sub(start))
    }
    /// Driver and device time: last `D` to final `C`.
    pub fn device_time(&self) -> Option<Dur> {
        Some(self.complete_ts.saturating_sub(self.issue_ts?))
    }
}

/// btt's phases (see `docs/iolat.md`). btt measures each of them per queued bio.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BttPhase {
    /// `Q` → `G` of the request allocated at a sector inside the bio.
    Q2G,
    /// `G` → `I` (only for bios whose `G` was seen).
    G2I,
    /// `Q` → the bio's own back/front merge `M`/`F`.
    Q2M,
    /// `I` → `D`, once per dispatch (a requeued request counts again).
    I2D,
    /// `M` → `D` for merged bios (btt prints it only in "All Devices").
    M2D,
    /// `Q` → `D`, once per dispatch.
    Q2D,
    /// `D` (last) → `C`, for bios that were dispatched.
    D2C,
    /// `Q` → `C`.
    Q2C,
}

impl BttPhase {
    /// Every phase, in btt's print order.
    pub const ALL: [BttPhase; 8] = [
        BttPhase::Q2G,
        BttPhase::G2I,
        BttPhase::Q2M,
        BttPhase::I2D,
        BttPhase::M2D,
        BttPhase::Q2D,
        BttPhase::D2C,
        BttPhase::Q2C,
    ];
    /// btt's label.
    pub fn name(self) -> &'static str {
        match self {
            BttPhase::Q2G => "Q2G",
            BttPhase::G2I => "G2I",
            BttPhase::Q2M => "Q2M",
            BttPhase::I2D => "I2D",
            BttPhase::M2D => "M2D",
            BttPhase::Q2D => "Q2D",
            BttPhase::D2C => "D2C",
            BttPhase::Q2C => "Q2C",
        }
    }
    /// Dense index (position in [`Self::ALL`]).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One btt phase measured for one bio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseSample {
    /// Which phase.
    pub phase: BttPhase,
    /// Device of the bio.
    pub dev: BlockDev,
    /// Task that queued the bio (btt's per-process attribution).
    pub queuer: BlockTask,
    /// Operation and flags of the bio's `Q`.
    pub rwbs: Rwbs,
    /// Duration. As in btt, a zero or negative difference counts as 1 ns.
    pub dur: Dur,
    /// The tag the sink returned from [`BlockSink::queued`] for this bio.
    pub tag: u32,
    /// When the phase ended.
    pub end_ts: Ts,
}

/// A `Q` the tracker accepted (non-zero length, no other bio starting at the same sector in
/// flight): btt's input for `Q2Q`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuedBio {
    /// Device.
    pub dev: BlockDev,
    /// Time of the `Q`.
    pub ts: Ts,
    /// Queuing task.
    pub queuer: BlockTask,
    /// Operation and flags.
    pub rwbs: Rwbs,
    /// Start sector.
    pub sector: u64,
    /// Length in sectors.
    pub nr_sector: u32,
}

/// Receives what [`super::BlockTracker`] derives. Every method has an empty default, so a
/// consumer implements only what it needs.
pub trait BlockSink {
    /// A bio was queued (accepted `Q`). The returned tag is kept with the bio and handed
    /// back in each of its [`PhaseSample`]s (e.g. the sink's own group indices, so it need
    /// not look the device and task up again per sample).
    fn queued(&mut self, _bio: &QueuedBio) -> u32 {
        0
    }
    /// A btt phase was measured for one bio.
    fn phase(&mut self, _sample: &PhaseSample) {}
    /// A request (or flush sequence) completed for good.
    fn request(&mut self, _request: &CompletedRequest) {}
}

/// A sink that only collects completed requests (tests, small inputs).
#[derive(Debug, Default)]
pub struct CollectRequests(pub Vec<CompletedRequest>);

impl BlockSink for CollectRequests {
    fn request(&mut self, request: &CompletedRequest) {
        self.0.push(*request);
    }
}

/// Any `FnMut(&CompletedRequest)` is a sink for completed requests.
impl<F: FnMut(&CompletedRequest)> BlockSink for F {
    fn request(&mut self, request: &CompletedRequest) {
        self(request)
    }
}
