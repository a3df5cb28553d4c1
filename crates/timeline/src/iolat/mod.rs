//! `stallscope iolat`: btt's per-phase latency statistics, log2 latency histograms and
//! per-second IOPS / throughput, from the [`crate::block::BlockTracker`]'s output.
//!
//! [`Iolat`] is a [`BlockSink`]: it aggregates every [`PhaseSample`] (one per bio and phase,
//! exactly btt's samples) and every accepted `Q` (for Q2Q) into N / min / avg / max per
//! device, per process and per operation, plus an all-devices row, and every completed data
//! request into per-second rates per device. [`Iolat::finish`] gives an [`IolatReport`].
//!
//! Definitions (btt's; `docs/iolat.md` has the full list of btt's quirks we reproduce):
//!
//! | phase | from → to | counted |
//! |---|---|---|
//! | Q2Q | previous accepted `Q` → this `Q` (per group: device, process name, op, all) | per `Q` but the group's first |
//! | Q2G | `Q` → `G` at a sector inside the bio | per `G` |
//! | G2I | `G` → `I` | per `I` of a bio whose `G` was seen |
//! | Q2M | `Q` → the bio's own merge `M`/`F` | per merge |
//! | I2D | `I` → `D` covering the bio | per dispatch (requeued → again) |
//! | M2D | merge → `D` | per dispatch of a merged bio without `I` |
//! | Q2D | `Q` → `D` | per dispatch |
//! | D2C | last `D` → `C` covering the bio | per completed bio that was dispatched |
//! | Q2C | `Q` → `C` covering the bio | per completed bio |
//!
//! Per process means the *name* of the task that queued the bio (btt's attribution: a
//! writeback bio counts for the flusher kworker, a merged bio for its own queuer, not for
//! the request's); tasks without a name are `pid<9 digits>` as in btt. Zero or negative
//! intervals count as 1 ns (btt), except Q2D.

pub mod stats;

use rustc_hash::FxHashMap;
use serde::Serialize;
use stallscope_model::{BlockDev, BlockOp, Comm, Tid, Ts};

use crate::block::{BlockSink, BttPhase, CompletedRequest, PhaseSample, QueuedBio, RequestKind};
pub use stats::{HistBucket, Log2Hist, PhaseStats};

/// The phases iolat reports, in print order (btt's, with M2D and Q2D added at the end).
pub const PHASES: [&str; 9] = [
    "Q2Q", "Q2G", "G2I", "Q2M", "I2D", "D2C", "Q2C", "M2D", "Q2D",
];

const Q2Q: usize = 0;

/// Index into [`PHASES`] of each btt phase, by the phase's discriminant. A table rather
/// than a `match`: the match compiled to an indirect jump taken once per sample, which
/// mispredicted often enough to be a visible part of the per-sample cost.
const PHASE_SLOT: [u8; 8] = {
    let mut t = [0u8; 8];
    t[BttPhase::Q2G as usize] = 1;
    t[BttPhase::G2I as usize] = 2;
    t[BttPhase::Q2M as usize] = 3;
    t[BttPhase::I2D as usize] = 4;
    t[BttPhase::D2C as usize] = 5;
    t[BttPhase::Q2C as usize] = 6;
    t[BttPhase::M2D as usize] = 7;
    t[BttPhase::Q2D as usize] = 8;
    t
};

/// Index into [`PHASES`] of a btt phase.
#[inline]
fn phase_slot(p: BttPhase) -> usize {
    usize::from(PHASE_SLOT[p as usize])
}

/// Phases with a histogram: Q2C, D2C, Q2D.
pub const HIST_PHASES: [&str; 3] = ["Q2C", "D2C", "Q2D"];

/// No histogram for this phase (in [`HIST_SLOT`]).
const NO_HIST: u8 = u8::MAX;

/// Index into [`HIST_PHASES`] of each btt phase, by discriminant, or [`NO_HIST`].
const HIST_SLOT: [u8; 8] = {
    let mut t = [NO_HIST; 8];
    t[BttPhase::Q2C as usize] = 0;
    t[BttPhase::D2C as usize] = 1;
    t[BttPhase::Q2D as usize] = 2;
    t
};

#[inline]
fn hist_slot(p: BttPhase) -> Option<usize> {
    let h = HIST_SLOT[p as usize];
    (h != NO_HIST).then_some(usize::from(h))
}

/// btt files Q2Q and Q2C of md (9) and device-mapper (253, 254) devices under `Q2Qdm` /
/// `Q2Cdm` ("remapper" devices).
pub fn is_remapper(dev: BlockDev) -> bool {
    matches!(dev.major(), 9 | 253 | 254)
}

/// How rows are grouped in the text output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    /// One row per device (btt's "Per Device").
    #[default]
    Device = 0,
    /// One row per queuing task name (btt's "Per Process").
    Process = 1,
    /// One row per operation (read, write, discard, flush, …).
    Op = 2,
}

impl GroupBy {
    /// Parses `device`, `process` or `op`.
    pub fn from_name(s: &str) -> Option<GroupBy> {
        Some(match s {
            "device" => GroupBy::Device,
            "process" => GroupBy::Process,
            "op" => GroupBy::Op,
            _ => return None,
        })
    }
}

/// Accumulators of one group.
#[derive(Clone, Debug, Default)]
struct Acc {
    phases: [PhaseStats; 9],
    hists: [Log2Hist; 3],
    last_q: Option<Ts>,
    bios: u64,
}

impl Acc {
    #[inline(always)]
    fn sample(&mut self, s: &PhaseSample) {
        self.phases[phase_slot(s.phase)].add(s.dur);
        if let Some(h) = hist_slot(s.phase) {
            self.hists[h].add(s.dur);
        }
    }
    #[inline(always)]
    fn queued(&mut self, ts: Ts) {
        self.bios += 1;
        if let Some(last) = self.last_q {
            self.phases[Q2Q].add(if ts > last { ts - last } else { 1 });
        }
        self.last_q = Some(ts);
    }
}

/// Completions of one second on one device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SecondRates {
    /// Second since the first block event of the trace.
    pub second: u64,
    /// Requests completed (reads + writes + others).
    pub ios: u64,
    /// Read requests completed.
    pub read_ios: u64,
    /// Write requests completed.
    pub write_ios: u64,
    /// Bytes completed.
    pub bytes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
}

/// Per-second rates of one device.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DeviceRates {
    /// Device, `major,minor`.
    pub device: String,
    /// One entry per second from the first to the last with a completion (empty seconds kept).
    pub seconds: Vec<SecondRates>,
}

/// One phase row of a group.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseRow {
    /// btt's phase label.
    pub phase: &'static str,
    /// Samples.
    pub n: u64,
    /// Minimum, ns.
    pub min_ns: u64,
    /// Average, ns (rounded to nearest).
    pub avg_ns: u64,
    /// Maximum, ns.
    pub max_ns: u64,
    /// Sum, ns.
    pub total_ns: u128,
}

/// A histogram of one phase.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseHist {
    /// Phase label.
    pub phase: &'static str,
    /// Non-empty range of buckets.
    pub buckets: Vec<HistBucket>,
}

/// The statistics of one group (device, process, op or all).
#[derive(Clone, Debug, Serialize)]
pub struct GroupReport {
    /// `7,0` for a device, the task name for a process, `read`/`write`/… for an op, `all`.
    pub key: String,
    /// Devices only: btt counts Q2Q and Q2C of this device as `Q2Qdm`/`Q2Cdm`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub remapper: bool,
    /// Bios queued (accepted `Q`s) in the group.
    pub bios: u64,
    /// Phases with at least one sample, in [`PHASES`] order.
    pub phases: Vec<PhaseRow>,
    /// Histograms of Q2C, D2C and Q2D (non-empty ones).
    pub histograms: Vec<PhaseHist>,
    #[serde(skip)]
    raw: Vec<PhaseStats>,
}

impl GroupReport {
    /// The raw accumulator of a phase (by label), for exact merging.
    pub fn stats(&self, phase: &str) -> Option<PhaseStats> {
        let i = PHASES.iter().position(|p| *p == phase)?;
        self.raw.get(i).copied()
    }

    fn build(key: String, remapper: bool, acc: &Acc) -> GroupReport {
        let phases = PHASES
            .iter()
            .zip(acc.phases.iter())
            .filter(|(_, s)| s.n > 0)
            .map(|(p, s)| PhaseRow {
                phase: p,
                n: s.n,
                min_ns: s.min,
                avg_ns: s.avg(),
                max_ns: s.max,
                total_ns: s.total,
            })
            .collect();
        let histograms = HIST_PHASES
            .iter()
            .zip(acc.hists.iter())
            .map(|(p, h)| PhaseHist {
                phase: p,
                buckets: h.buckets(),
            })
            .filter(|h| !h.buckets.is_empty())
            .collect();
        GroupReport {
            key,
            remapper,
            bios: acc.bios,
            phases,
            histograms,
            raw: acc.phases.to_vec(),
        }
    }
}

/// Request counts.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RequestCounts {
    /// Bios queued (accepted `Q`).
    pub bios: u64,
    /// Data requests completed.
    pub requests: u64,
    /// Flush sequences completed.
    pub flushes: u64,
    /// Requests that were requeued at least once.
    pub requeued: u64,
    /// Requests completed in several parts.
    pub partially_completed: u64,
    /// Requests left out of the per-second rates because they completed more than
    /// [`MAX_RATE_SECONDS`] after the first event (a corrupt timestamp, most likely).
    pub beyond_rate_window: u64,
}

/// Longest span of per-second rates kept (about 48 days).
pub const MAX_RATE_SECONDS: u64 = 1 << 22;

/// Everything `iolat` prints.
#[derive(Clone, Debug, Serialize)]
pub struct IolatReport {
    /// Per device, in order of first appearance (btt's order).
    pub devices: Vec<GroupReport>,
    /// Per queuing task name, sorted by name (btt's order).
    pub processes: Vec<GroupReport>,
    /// Per operation.
    pub ops: Vec<GroupReport>,
    /// All devices together.
    pub all: GroupReport,
    /// Per-second completions per device.
    pub rates: Vec<DeviceRates>,
    /// Counts.
    pub counts: RequestCounts,
}

/// Process key: the name, or (for nameless tasks) the pid.
type ProcKey = (Comm, Tid);

fn proc_key(comm: Comm, pid: Tid) -> ProcKey {
    if comm.is_empty() {
        (comm, pid)
    } else {
        (comm, -1)
    }
}

fn op_slot(op: BlockOp) -> usize {
    match op {
        BlockOp::Read => 0,
        BlockOp::Write => 1,
        BlockOp::Discard => 2,
        BlockOp::SecureErase => 3,
        BlockOp::Flush => 4,
        BlockOp::None => 5,
    }
}

const OP_NAMES: [&str; 6] = ["read", "write", "discard", "secure-erase", "flush", "none"];

/// The iolat aggregator (a [`BlockSink`]).
#[derive(Debug)]
pub struct Iolat {
    dev_index: FxHashMap<BlockDev, usize>,
    devs: Vec<(BlockDev, Acc, Vec<SecondRates>)>,
    proc_index: FxHashMap<ProcKey, usize>,
    procs: Vec<(ProcKey, Acc)>,
    ops: [Acc; 6],
    all: Acc,
    base_ts: Option<Ts>,
    counts: RequestCounts,
    /// The last device and process looked up (consecutive samples mostly share them).
    last_dev: Option<(BlockDev, usize)>,
    last_proc: Option<(ProcKey, usize)>,
    /// Which groupings are kept besides "all" (device, process, op).
    want: [bool; 3],
}

impl Default for Iolat {
    fn default() -> Iolat {
        Iolat::new()
    }
}

impl Iolat {
    /// An empty aggregator keeping every grouping.
    pub fn new() -> Iolat {
        Iolat::keeping([true; 3])
    }

    fn keeping(want: [bool; 3]) -> Iolat {
        Iolat {
            dev_index: FxHashMap::default(),
            devs: Vec::new(),
            proc_index: FxHashMap::default(),
            procs: Vec::new(),
            ops: Default::default(),
            all: Acc::default(),
            base_ts: None,
            counts: RequestCounts::default(),
            last_dev: None,
            last_proc: None,
            want,
        }
    }

    /// An empty aggregator keeping only `by` (and "all"): less work per sample. The other
    /// groupings of the report stay empty; per-second rates are always kept.
    pub fn only(by: GroupBy) -> Iolat {
        let mut want = [false; 3];
        want[by as usize] = true;
        Iolat::keeping(want)
    }

    #[inline(always)]
    fn dev(&mut self, dev: BlockDev) -> usize {
        if let Some((d, i)) = self.last_dev {
            if d == dev {
                return i;
            }
        }
        self.other_dev(dev)
    }

    /// [`Self::dev`] when the device is not the last one's (out of line: a new row's
    /// accumulators gave the inlined lookup a large stack frame).
    #[cold]
    #[inline(never)]
    fn other_dev(&mut self, dev: BlockDev) -> usize {
        let i = match self.dev_index.get(&dev) {
            Some(&i) => i,
            None => {
                self.devs.push((dev, Acc::default(), Vec::new()));
                self.dev_index.insert(dev, self.devs.len() - 1);
                self.devs.len() - 1
            }
        };
        self.last_dev = Some((dev, i));
        i
    }

    #[inline]
    fn proc(&mut self, key: ProcKey) -> usize {
        if let Some((k, i)) = self.last_proc {
            if k == key {
                return i;
            }
        }
        let i = match self.proc_index.get(&key) {
            Some(&i) => i,
            None => {
                self.procs.push((key, Acc::default()));
                self.proc_index.insert(key, self.procs.len() - 1);
                self.procs.len() - 1
            }
        };
        self.last_proc = Some((key, i));
        i
    }

    /// Device and process rows of a sample whose bio had no tag.
    #[cold]
    #[inline(never)]
    fn groups_of(&mut self, s: &PhaseSample) -> (usize, usize) {
        let d = self.dev(s.dev);
        let p = if self.want[1] {
            self.proc(proc_key(s.queuer.comm, s.queuer.pid))
        } else {
            0
        };
        (d, p)
    }

    #[inline]
    fn see(&mut self, ts: Ts) -> Ts {
        *self.base_ts.get_or_insert(ts)
    }

    /// All devices together: every phase but Q2Q (kept as it comes, btt's global "last Q")
    /// summed over the first kept grouping, which partitions the bios.
    fn all_devices(&self) -> Acc {
        let mut all = self.all.clone();
        let parts: Vec<&Acc> = if self.want[0] {
            self.devs.iter().map(|(_, a, _)| a).collect()
        } else if self.want[1] {
            self.procs.iter().map(|(_, a)| a).collect()
        } else {
            self.ops.iter().collect()
        };
        for acc in parts {
            for (a, p) in all.phases.iter_mut().zip(acc.phases.iter()).skip(Q2Q + 1) {
                a.merge(p);
            }
            for (a, h) in all.hists.iter_mut().zip(acc.hists.iter()) {
                a.merge(h);
            }
        }
        all
    }

    /// The report.
    pub fn finish(self) -> IolatReport {
        let all = self.all_devices();
        let devices = self
            .devs
            .iter()
            .filter(|_| self.want[0])
            .map(|(d, acc, _)| GroupReport::build(d.to_string(), is_remapper(*d), acc))
            .collect();
        let mut procs: Vec<(String, &Acc)> = self
            .procs
            .iter()
            .map(|((comm, pid), acc)| {
                let name = if comm.is_empty() {
                    format!("pid{:09}", pid)
                } else {
                    comm.as_str().to_string()
                };
                (name, acc)
            })
            .collect();
        procs.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let processes = procs
            .into_iter()
            .map(|(name, acc)| GroupReport::build(name, false, acc))
            .collect();
        let ops = OP_NAMES
            .iter()
            .zip(self.ops.iter())
            .filter(|(_, acc)| acc.bios > 0 || acc.phases.iter().any(|s| s.n > 0))
            .map(|(name, acc)| GroupReport::build(name.to_string(), false, acc))
            .collect();
        let rates = self
            .devs
            .iter()
            .filter(|(_, _, secs)| !secs.is_empty())
            .map(|(d, _, secs)| {
                let first = secs.iter().position(|s| s.ios > 0).unwrap_or(0);
                DeviceRates {
                    device: d.to_string(),
                    seconds: secs[first..].to_vec(),
                }
            })
            .collect();
        IolatReport {
            devices,
            processes,
            ops,
            all: GroupReport::build("all".to_string(), false, &all),
            rates,
            counts: self.counts,
        }
    }
}

/// A bio's tag: its process group in the high 20 bits and its device in the low 12, so
/// samples need no lookups; [`NO_TAG`] when an index does not fit.
const DEV_BITS: u32 = 12;
const NO_TAG: u32 = u32::MAX;

impl BlockSink for Iolat {
    // Inlined like `phase`: the queuer's name is read only for per-process rows.
    #[inline(always)]
    fn queued(&mut self, bio: &QueuedBio) -> u32 {
        self.see(bio.ts);
        self.counts.bios += 1;
        let d = self.dev(bio.dev);
        if self.want[0] {
            self.devs[d].1.queued(bio.ts);
        }
        let p = if self.want[1] {
            let p = self.proc(proc_key(bio.queuer.comm, bio.queuer.pid));
            self.procs[p].1.queued(bio.ts);
            p
        } else {
            0
        };
        if self.want[2] {
            self.ops[op_slot(bio.rwbs.op)].queued(bio.ts);
        }
        self.all.queued(bio.ts);
        if d < (1 << DEV_BITS) && p < (1 << (32 - DEV_BITS)) - 1 {
            ((p as u32) << DEV_BITS) | d as u32
        } else {
            NO_TAG
        }
    }

    // Inlined into the tracker, so that a sample's fields this does not read (the queuer's
    // name: 36 bytes per sample) are never written.
    #[inline(always)]
    fn phase(&mut self, s: &PhaseSample) {
        let (d, p) = if s.tag != NO_TAG {
            (
                (s.tag & ((1 << DEV_BITS) - 1)) as usize,
                (s.tag >> DEV_BITS) as usize,
            )
        } else {
            self.groups_of(s)
        };
        if self.want[0] {
            self.devs[d].1.sample(s);
        }
        if self.want[1] {
            self.procs[p].1.sample(s);
        }
        if self.want[2] {
            self.ops[op_slot(s.rwbs.op)].sample(s);
        }
        // "all" is the sum of any one grouping: built in `finish`.
    }

    // Inlined for the same reason as `phase`: a completed request's tasks and sources go
    // unread here.
    #[inline(always)]
    fn request(&mut self, r: &CompletedRequest) {
        let base = self.see(r.queue_ts.unwrap_or(r.complete_ts));
        if r.kind == RequestKind::Flush {
            self.counts.flushes += 1;
            return;
        }
        self.counts.requests += 1;
        self.counts.requeued += u64::from(r.requeues > 0);
        self.counts.partially_completed += u64::from(r.partial_completions > 0);
        let second = r.complete_ts.saturating_sub(base) / 1_000_000_000;
        if second >= MAX_RATE_SECONDS {
            self.counts.beyond_rate_window += 1;
            return;
        }
        let d = self.dev(r.dev);
        let secs = &mut self.devs[d].2;
        let i = second as usize;
        if secs.len() <= i {
            let from = secs.len() as u64;
            secs.extend((from..=second).map(|s| SecondRates {
                second: s,
                ..SecondRates::default()
            }));
        }
        let row = &mut secs[i];
        let bytes = r.bytes();
        row.ios += 1;
        row.bytes += bytes;
        match r.rwbs.op {
            BlockOp::Read => {
                row.read_ios += 1;
                row.read_bytes += bytes;
            }
            BlockOp::Write => {
                row.write_ios += 1;
                row.write_bytes += bytes;
            }
            _ => {}
        }
    }
}
