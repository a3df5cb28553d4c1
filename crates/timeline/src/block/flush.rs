//! Zero-length flush sequences of one device, matched first in, first out.
//!
//! A zero-length `REQ_PREFLUSH` bio (fsync on a device with a volatile cache) shows up as
//!
//! ```text
//! 7,0  0  37  0.170539745 17157  Q FWS [python3]        the bio (no sector, no length)
//! 7,0  0  38  0.170540694 17157  G FWS [python3]        its request
//! 7,0  0  39  0.170548289    58  D  FN [kworker/0:1H]   blk-flush's flush request
//! 7,0  0  40  0.171763924    14  C  FN 0 [0]            ... done
//! 7,0  0  41  0.171765063    14  C  WS 0 [0]            the bio's request completes
//! ```
//!
//! None of these carry a usable sector, so they cannot be keyed like data requests. Each
//! device keeps a short queue of open sequences: `Q`/`G`/`I` of a zero-length bio open or
//! fill the oldest sequence lacking that step, a zero-length `D` marks the oldest one not yet
//! dispatched (or opens a kernel-initiated one), `C` of a flush operation marks the flush
//! done, and the final zero-length `C` of the bio's own operation closes the oldest sequence
//! that has a `Q`. A kernel-initiated flush (no `Q`) closes at its `C FN`.

use std::collections::VecDeque;

use stallscope_model::{Rwbs, Span, Ts};

use super::record::BlockTask;

/// Open sequences kept per device; older ones are dropped (and counted) beyond this.
pub(crate) const MAX_OPEN_FLUSHES: usize = 4096;

/// One open flush sequence.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FlushSeq {
    pub rwbs: Rwbs,
    pub queue_ts: Option<Ts>,
    pub queue_span: Span,
    pub queuer: Option<BlockTask>,
    pub getrq_ts: Option<Ts>,
    pub insert_ts: Option<Ts>,
    pub inserter: Option<BlockTask>,
    pub first_issue_ts: Option<Ts>,
    pub issue_ts: Option<Ts>,
    pub issue_span: Option<Span>,
    pub dispatcher: Option<BlockTask>,
    pub flush_done_ts: Option<Ts>,
    pub requeues: u32,
}

/// The open flush sequences of one device, oldest first.
#[derive(Debug, Default)]
pub(crate) struct FlushQueue {
    open: VecDeque<FlushSeq>,
}

impl FlushQueue {
    /// Opens a sequence; returns true when the oldest had to be dropped to make room.
    pub fn open(&mut self, seq: FlushSeq) -> bool {
        let dropped = self.open.len() >= MAX_OPEN_FLUSHES;
        if dropped {
            self.open.pop_front();
        }
        self.open.push_back(seq);
        dropped
    }

    /// The oldest open sequence for which `pred` holds.
    pub fn oldest(&mut self, pred: impl Fn(&FlushSeq) -> bool) -> Option<&mut FlushSeq> {
        self.open.iter_mut().find(|s| pred(s))
    }

    /// Removes and returns the oldest open sequence for which `pred` holds.
    pub fn take_oldest(&mut self, pred: impl Fn(&FlushSeq) -> bool) -> Option<FlushSeq> {
        let i = self.open.iter().position(pred)?;
        self.open.remove(i)
    }

    /// Sequences still open.
    pub fn len(&self) -> usize {
        self.open.len()
    }
}
