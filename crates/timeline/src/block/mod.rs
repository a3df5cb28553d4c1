//! The block request lifecycle: [`BlockTracker`] turns block events (blktrace binary,
//! blkparse text, `block:*` tracepoints, all normalized to
//! [`stallscope_model::BlockEvent`]) into
//!
//! * [`CompletedRequest`] records, one per request (or zero-length flush sequence), with
//!   every phase timestamp (`Q` `G` `I` first/last `D` first/last `C`), op and flags, size,
//!   merges, requeues, partial completions and the three tasks involved: the *queuer* (task
//!   that queued the first bio — for writeback, the flusher kworker; for O_DIRECT, the
//!   application), the *inserter* (`I`) and the *dispatcher* (`D`, often a kworker running the
//!   hardware queue);
//! * btt's per-bio phase samples ([`PhaseSample`]: Q2G, G2I, Q2M, I2D, M2D, Q2D, D2C, Q2C),
//!   computed exactly as btt computes them (see [`tracker`] and `docs/iolat.md`), which is
//!   what `stallscope iolat` aggregates;
//! * every accepted `Q` ([`QueuedBio`], for Q2Q).
//!
//! Push model: call [`BlockTracker::process`] for each event in time order with a
//! [`BlockSink`] (implement only the methods you need; a closure
//! `|r: &CompletedRequest| …` is a sink of requests). Memory is one slot per in-flight
//! request and bio; nothing is allocated per event once the tables have grown.
//! Anomalies (completion without dispatch, duplicate sector in flight, …) are counted in
//! the tracker's [`stallscope_model::DataQuality`] (see the table in [`tracker`]).
//!
//! ```
//! use stallscope_timeline::block::{BlockTracker, CompletedRequest};
//! let mut tracker = BlockTracker::new();
//! let mut slow = 0;
//! let mut sink = |r: &CompletedRequest| {
//!     if r.wait_before_issue().unwrap_or(0) > 100_000_000 {
//!         slow += 1;
//!     }
//! };
//! # let events: Vec<stallscope_model::Event> = Vec::new();
//! for ev in &events {
//!     tracker.process(ev, &mut sink);
//! }
//! let quality = tracker.finish();
//! # let _ = quality;
//! ```

mod bios;
mod flush;
pub mod record;
mod requests;
pub mod tracker;

pub use record::{
    BlockSink, BlockTask, BttPhase, CollectRequests, CompletedRequest, PhaseSample, QueuedBio,
    RequestKind,
};
pub use tracker::{BlockEventCounts, BlockTracker, EventAt};
