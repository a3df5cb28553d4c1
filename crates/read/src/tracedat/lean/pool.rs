//! [`Pool`]: pieces of the CPUs' data decoded on worker threads, demand-driven.
//!
//! A job is one piece (a range of whole sub-buffers of one CPU, see `merge`): a fresh
//! [`CpuDecoder`] over that range and an empty [`Run`] to fill with all its records; it
//! comes back filled ([`Done`]). The workers share one queue, so the pieces of one CPU
//! (the benchmark file has nearly all its events on one CPU) are decoded side by side;
//! the merge puts them back in order. When the merge would wait while jobs are queued, the
//! caller's thread decodes the oldest one itself. With no threads (small input, one core, or no
//! thread could be started) a job runs at once in the caller's thread.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

use crate::lean::LeanBail;

use super::decode::{CpuDecoder, Run};

/// Bytes of CPU data per piece, by CPU count: about [`PIECE_BYTES_ALL_CPUS`] over all
/// CPUs, between [`PIECE_MIN`] and [`PIECE_MAX`], in whole sub-buffers of `subbuf` bytes
/// (at least one). A piece of the benchmark file's 2 MiB holds about 42 Ki records (1.3 MB
/// of runs); long pieces keep the workers busy between hand-overs, the total bounds memory
/// (see `merge` for how many pieces are out at once).
pub fn piece_bytes(cpus: usize, subbuf: usize) -> u64 {
    let subbuf = subbuf.max(1);
    let bytes = (PIECE_BYTES_ALL_CPUS / cpus.max(1)).clamp(PIECE_MIN, PIECE_MAX);
    ((bytes / subbuf).max(1) * subbuf) as u64
}

/// See [`piece_bytes`].
pub const PIECE_BYTES_ALL_CPUS: usize = 8 << 20;
/// See [`piece_bytes`].
pub const PIECE_MIN: usize = 64 << 10;
/// See [`piece_bytes`].
pub const PIECE_MAX: usize = 2 << 20;

/// A job: where the piece goes back to, its decoder and the run to fill.
pub struct Job {
    /// Merge slot of the CPU.
    pub slot: usize,
    /// The piece's number within its CPU (0, 1, …).
    pub piece: u64,
    /// A decoder over the piece's sub-buffers.
    pub decoder: CpuDecoder,
    /// The run to fill (empty).
    pub run: Run,
}

/// A decoded piece.
pub struct Done {
    /// Merge slot of the CPU.
    pub slot: usize,
    /// The piece's number within its CPU.
    pub piece: u64,
    /// The piece's decoding state (its data-quality notes, losses, bytes read).
    pub decoder: CpuDecoder,
    /// The piece's records.
    pub run: Run,
    /// `Err`: the lean path bails out at this piece.
    pub result: Result<(), LeanBail>,
}

/// Worker threads, or the caller's thread.
pub enum Pool {
    Inline(VecDeque<Done>),
    /// Workers taking jobs from one queue.
    Threads {
        jobs: Option<Sender<Job>>,
        /// The queue the workers take jobs from (the caller takes one too, see
        /// [`Pool::wait`]).
        queue: Arc<Mutex<Receiver<Job>>>,
        results: Receiver<Done>,
        workers: Vec<JoinHandle<()>>,
        /// Set when the pool is dropped: queued jobs are then skipped.
        stop: Arc<AtomicBool>,
    },
}

fn work(job: Job) -> Done {
    let Job {
        slot,
        piece,
        mut decoder,
        mut run,
    } = job;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        decoder.fill(&mut run, usize::MAX).map(|_| ())
    }))
    .unwrap_or_else(|_| Err(LeanBail::new("internal: the lean decoder panicked")));
    Done {
        slot,
        piece,
        decoder,
        run,
        result,
    }
}

impl Pool {
    /// A pool of `threads` workers (0: inline).
    pub fn new(threads: usize) -> Pool {
        if threads == 0 {
            return Pool::Inline(VecDeque::new());
        }
        let (done_tx, results) = channel::<Done>();
        let (jobs, job_rx) = channel::<Job>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        for i in 0..threads {
            let (rx, tx, stop) = (Arc::clone(&job_rx), done_tx.clone(), Arc::clone(&stop));
            let spawned = thread::Builder::new()
                .name(format!("tracedat-lean-{i}"))
                .spawn(move || loop {
                    // The lock is held only while taking a job (a job decodes ~1 ms or more).
                    let job = match rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(job) = job else { return };
                    if stop.load(Ordering::Relaxed) || tx.send(work(job)).is_err() {
                        return;
                    }
                });
            match spawned {
                Ok(h) => workers.push(h),
                Err(_) => break, // fewer threads
            }
        }
        if workers.is_empty() {
            return Pool::Inline(VecDeque::new());
        }
        Pool::Threads {
            jobs: Some(jobs),
            queue: job_rx,
            results,
            workers,
            stop,
        }
    }

    /// Whether jobs run on worker threads.
    pub fn threaded(&self) -> bool {
        matches!(self, Pool::Threads { .. })
    }

    /// Starts decoding a piece.
    pub fn submit(&mut self, job: Job) {
        match self {
            Pool::Inline(q) => q.push_back(work(job)),
            Pool::Threads { jobs, .. } => {
                if let Some(tx) = jobs {
                    // Cannot fail while the workers live (they exit only when `jobs` drops);
                    // if it did, `wait` reports the lost job.
                    let _ = tx.send(job);
                }
            }
        }
    }

    /// A finished job; `None` when none can come (threads gone). Rather than wait while a
    /// job is still queued (every worker busy, or descheduled on a loaded machine), the
    /// caller's thread runs the oldest queued job itself.
    pub fn wait(&mut self) -> Option<Done> {
        match self {
            Pool::Inline(q) => q.pop_front(),
            Pool::Threads { queue, results, .. } => {
                if let Ok(done) = results.try_recv() {
                    return Some(done);
                }
                // A worker waiting for a job holds the lock: then the queue is empty.
                let queued = queue.try_lock().ok().and_then(|q| q.try_recv().ok());
                match queued {
                    Some(job) => Some(work(job)),
                    None => results.recv().ok(),
                }
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Pool::Threads {
            jobs,
            workers,
            stop,
            ..
        } = self
        {
            stop.store(true, Ordering::Relaxed);
            *jobs = None;
            for w in workers.drain(..) {
                let _ = w.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_whole_sub_buffers_within_bounds() {
        assert_eq!(piece_bytes(1, 4096), PIECE_MAX as u64);
        assert_eq!(piece_bytes(2, 4096), PIECE_MAX as u64);
        assert_eq!(piece_bytes(8, 4096), (1 << 20) as u64);
        assert_eq!(piece_bytes(1024, 4096), PIECE_MIN as u64);
        // Not a divisor of the bounds: rounded down to whole sub-buffers.
        assert_eq!(piece_bytes(2, 3000), (PIECE_MAX / 3000 * 3000) as u64);
        // Sub-buffers larger than a piece: one per piece.
        assert_eq!(piece_bytes(1024, 1 << 20), (1 << 20) as u64);
        assert_eq!(piece_bytes(0, 0), PIECE_MAX as u64);
    }
}
