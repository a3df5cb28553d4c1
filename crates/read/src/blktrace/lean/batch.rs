//! The lean walk on two threads: a reading thread maps, merges and parses the per-CPU files
//! ([`super::walk`]) into batches of compact records; the calling thread turns them back
//! into [`LeanRecord`]s for the visitor. Batches go over a bounded channel and come back
//! empty for reuse, so nothing is allocated per batch once [`BATCHES`] exist.
//!
//! A batch holds, in record order:
//!
//! ```text
//! records  [Compact; ≤ len]  request records (time, pid, file offset, device, sector,
//!                            sectors, rwbs, action, error, name id) and markers for
//! decoded  [BlockEvent]      the other block events, decoded by the reading thread
//! names    [Comm]            names first seen in this batch (ids follow the last batch's)
//! untracked u64              plugs and unplugs (counted, not ordered)
//! ```
//!
//! The visitor sees what [`LeanBlktrace::for_each`] shows it, in the same order, except
//! that the [`LeanRecord::Untracked`] of a batch come after its block records (they change
//! no request, so only their count matters). `Err(Unusual)` as for `for_each`; the
//! records of batches handed over before the problem was found stay visited.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use stallscope_model::{BlockAction, BlockDev, BlockEvent, Comm, Rwbs};

use super::{walk, Emit, LeanBlktrace, LeanRecord, Names, RecordAt, Unusual};
use crate::blktrace::record::{carries_comm, Header};

/// Records per batch: large enough that the hand-over (a futex wake, often a context
/// switch on a busy machine) is rare, small enough that two batches stay in the L2 cache.
pub const BATCH_RECORDS: usize = 8192;

/// Batches in circulation (one filling, one being visited, the rest queued).
const BATCHES: usize = 8;

/// How many records ahead of the one visited the visiting side asks for the batch's bytes.
const PREFETCH_RECORDS: usize = 8;

/// A request record, or the marker of the next decoded event (`decoded`).
#[derive(Clone, Copy, Debug)]
struct Compact {
    ts: u64,
    sector: u64,
    offset: u64,
    nr_sector: u32,
    pid: u32,
    device: u32,
    /// Name id ([`Names`]), 0 for none.
    name: u32,
    input: u16,
    /// The header's error field (meaningful for `C`).
    error: u16,
    rwbs: Rwbs,
    action: BlockAction,
    /// The record is the next of [`Batch::decoded`] (only the `RecordAt` fields are set).
    decoded: bool,
}

/// One hand-over unit (see the module docs).
#[derive(Debug, Default)]
struct Batch {
    records: Vec<Compact>,
    decoded: Vec<BlockEvent>,
    names: Vec<Comm>,
    untracked: u64,
}

impl Batch {
    fn with_capacity(len: usize) -> Batch {
        Batch {
            records: Vec::with_capacity(len),
            ..Batch::default()
        }
    }

    fn clear(&mut self) {
        self.records.clear();
        self.decoded.clear();
        self.names.clear();
        self.untracked = 0;
    }
}

/// The reading thread's end: fills the current batch and hands it over when full. A closed
/// channel (the visiting side is gone) stops the walk.
struct Sender {
    full: SyncSender<Batch>,
    free: Receiver<Batch>,
    batch: Batch,
    len: usize,
}

impl Sender {
    /// Sends the current batch and takes an empty one.
    #[cold]
    fn hand_over(&mut self) -> Result<(), Unusual> {
        let full = std::mem::take(&mut self.batch);
        self.full.send(full).map_err(|_| Unusual)?;
        self.batch = self.free.recv().map_err(|_| Unusual)?;
        Ok(())
    }

    #[inline]
    fn push(&mut self, c: Compact) -> Result<(), Unusual> {
        self.batch.records.push(c);
        if self.batch.records.len() >= self.len {
            self.hand_over()?;
        }
        Ok(())
    }

    /// Sends what is left.
    fn finish(self) -> Result<(), Unusual> {
        self.full.send(self.batch).map_err(|_| Unusual)
    }
}

impl Emit for Sender {
    #[inline]
    fn untracked(&mut self) -> Result<(), Unusual> {
        self.batch.untracked += 1;
        Ok(())
    }

    #[inline]
    fn request(
        &mut self,
        at: RecordAt,
        h: &Header,
        action: BlockAction,
        names: &mut Names,
    ) -> Result<(), Unusual> {
        let name = if carries_comm(action) {
            names.id((at.input, h.pid))
        } else {
            0
        };
        self.push(Compact {
            ts: at.ts,
            sector: h.sector,
            offset: at.offset,
            nr_sector: h.bytes >> 9,
            pid: at.pid,
            device: h.device,
            name,
            input: at.input,
            error: h.error,
            rwbs: h.rwbs(),
            action,
            decoded: false,
        })
    }

    fn decoded(&mut self, at: RecordAt, ev: BlockEvent) -> Result<(), Unusual> {
        self.batch.decoded.push(ev);
        self.push(Compact {
            ts: at.ts,
            sector: 0,
            offset: at.offset,
            nr_sector: 0,
            pid: at.pid,
            device: 0,
            name: 0,
            input: at.input,
            error: 0,
            rwbs: Rwbs::default(),
            action: BlockAction::Message,
            decoded: true,
        })
    }

    fn named(&mut self, comm: Comm) {
        self.batch.names.push(comm);
    }
}

/// The visiting side's view of the names: id `k` at index `k` (0 = none).
struct NameTable(Vec<Option<Comm>>);

impl LeanBlktrace {
    /// [`Self::for_each`] with the reading on another thread (see the module docs): `visit`
    /// runs on the calling thread while the next records are read. `Err(Unusual)` also when
    /// the thread could not be started.
    pub fn for_each_threaded(self, visit: impl FnMut(LeanRecord<'_>)) -> Result<(), Unusual> {
        self.for_each_threaded_in(BATCH_RECORDS, visit)
    }

    /// [`Self::for_each_threaded`] with batches of `len` records.
    fn for_each_threaded_in(
        self,
        len: usize,
        mut visit: impl FnMut(LeanRecord<'_>),
    ) -> Result<(), Unusual> {
        let len = len.max(1);
        let streams = self.streams;
        std::thread::scope(|scope| {
            let (full_tx, full_rx) = sync_channel::<Batch>(BATCHES);
            let (free_tx, free_rx) = sync_channel::<Batch>(BATCHES);
            for _ in 1..BATCHES {
                // INVARIANT: the channel holds BATCHES and its receiver is alive.
                let _ = free_tx.send(Batch::with_capacity(len));
            }
            let reader = std::thread::Builder::new()
                .name("blktrace-read".into())
                .spawn_scoped(scope, move || {
                    let mut sender = Sender {
                        full: full_tx,
                        free: free_rx,
                        batch: Batch::with_capacity(len),
                        len,
                    };
                    walk(streams, &mut sender)?;
                    sender.finish()
                })
                .map_err(|_| Unusual)?;
            let mut names = NameTable(vec![None]);
            let mut fast = BlockEvent::new(BlockAction::Queue);
            for mut batch in full_rx.iter() {
                visit_batch(&batch, &mut names, &mut fast, &mut visit);
                batch.clear();
                // The reading thread may be done and gone: the batch is then dropped.
                let _ = free_tx.send(batch);
            }
            match reader.join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }
}

/// Hands one batch's records to `visit`, request records through the reused `fast` event.
#[inline]
fn visit_batch(
    batch: &Batch,
    names: &mut NameTable,
    fast: &mut BlockEvent,
    visit: &mut impl FnMut(LeanRecord<'_>),
) {
    names.0.extend(batch.names.iter().map(|&c| Some(c)));
    let mut decoded = batch.decoded.iter();
    for (k, r) in batch.records.iter().enumerate() {
        // The batch was written on the other CPU: ask for its lines a few records ahead.
        crate::prefetch::prefetch(&batch.records, k + PREFETCH_RECORDS);
        let at = RecordAt {
            ts: r.ts,
            pid: r.pid,
            input: r.input,
            offset: r.offset,
        };
        if r.decoded {
            // INVARIANT: one decoded event per marker, pushed together.
            if let Some(ev) = decoded.next() {
                visit(LeanRecord::Block(at, ev));
            }
            continue;
        }
        fast.action = r.action;
        fast.dev = Some(BlockDev(r.device));
        fast.sector = r.sector;
        fast.nr_sector = r.nr_sector;
        fast.rwbs = r.rwbs;
        fast.error = (r.action == BlockAction::Complete).then(|| i32::from(r.error as i16));
        // Copied in place: `.copied().flatten()` built the name in a stack temporary with
        // overlapping stores and reloaded it, a store-forwarding stall per record.
        match names.0.get(r.name as usize) {
            Some(comm) => fast.comm = *comm,
            None => fast.comm = None,
        }
        visit(LeanRecord::Block(at, fast));
    }
    for _ in 0..batch.untracked {
        visit(LeanRecord::Untracked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Input;

    fn fixture_path(name: &str) -> String {
        format!(
            "{}/../../fixtures/block/loop0/{name}",
            env!("CARGO_MANIFEST_DIR")
        )
    }

    fn inputs() -> Vec<(u16, Input)> {
        ["loop0.blktrace.0", "loop0.blktrace.1"]
            .iter()
            .enumerate()
            .map(|(i, f)| (i as u16, Input::open(&fixture_path(f)).expect("input")))
            .collect()
    }

    /// (time, input, offset, event) of every block record, and the number of plugs.
    type Walked = (Vec<(u64, u16, u64, BlockEvent)>, usize);

    fn collect(run: impl FnOnce(&mut dyn FnMut(LeanRecord<'_>)) -> Result<(), Unusual>) -> Walked {
        let mut got = Vec::new();
        let mut untracked = 0;
        run(&mut |rec| match rec {
            LeanRecord::Untracked => untracked += 1,
            LeanRecord::Block(at, ev) => got.push((at.ts, at.input, at.offset, ev.clone())),
        })
        .expect("walk");
        (got, untracked)
    }

    /// The threaded walk shows the visitor what the single-threaded one does, for batch
    /// sizes from 1 record (a hand-over per record) to more than the files hold.
    #[test]
    fn threaded_walk_matches_the_single_threaded_walk() {
        let expected = collect(|v| LeanBlktrace::new(inputs()).for_each(v));
        assert!(expected.0.len() > 100, "{} records", expected.0.len());
        assert!(expected.1 > 0);
        assert!(
            expected.0.iter().any(|r| r.3.comm.is_some()),
            "the fixture names tasks"
        );
        for len in [1, 7, 64, BATCH_RECORDS] {
            let got = collect(|v| LeanBlktrace::new(inputs()).for_each_threaded_in(len, v));
            assert_eq!(got, expected, "batches of {len}");
        }
    }

    /// Garbage makes the threaded walk `Unusual` too.
    #[test]
    fn threaded_walk_reports_garbage() {
        let mut bytes = std::fs::read(fixture_path("loop0.blktrace.0")).expect("fixture");
        let at = bytes.len() / 2;
        bytes[at..at + 64].fill(0x5a);
        let input = Input::from_bytes("x.blktrace.0", bytes).expect("input");
        assert_eq!(
            LeanBlktrace::new(vec![(0, input)]).for_each_threaded_in(16, |_| {}),
            Err(Unusual)
        );
    }
}
