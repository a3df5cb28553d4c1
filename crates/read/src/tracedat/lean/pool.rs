//! [`Pool`]: the CPUs' [`CpuDecoder`]s run on worker threads, demand-driven.
//!
//! A job is one CPU's whole decoding state plus an empty [`Run`] to fill; it comes back
//! filled ([`Done`]). The merge submits a CPU's next job only while fewer than its
//! prefetch limit of runs wait, and at most one job per CPU is in flight, so a CPU's runs
//! arrive in order and memory stays bounded. With no threads (small input, one core, or
//! no thread could be started) a job runs at once in the caller's thread.

use std::collections::VecDeque;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::{self, JoinHandle};

use crate::lean::LeanBail;

use super::decode::{CpuDecoder, Run};

/// Records a job decodes at least (whole pages, so a few more), per CPU count: about
/// [`RUN_RECORDS_ALL_CPUS`] over all CPUs, between [`RUN_MIN`] and [`RUN_MAX`]. Long runs
/// keep the workers busy between hand-overs (on the benchmark file 64 Ki records per run
/// took the wall time from ~0.31 s to ~0.20 s against 4 Ki, at 10 MiB more RSS); the total
/// bounds memory (up to 5 runs of 40-byte records per CPU: about 52 MiB up to 64 CPUs).
pub fn run_records(cpus: usize) -> usize {
    (RUN_RECORDS_ALL_CPUS / cpus.max(1)).clamp(RUN_MIN, RUN_MAX)
}

/// See [`run_records`].
pub const RUN_RECORDS_ALL_CPUS: usize = 1 << 18;
/// See [`run_records`].
pub const RUN_MIN: usize = 4096;
/// See [`run_records`].
pub const RUN_MAX: usize = 1 << 16;

/// A job: the slot, its decoder, the run to fill and the records to decode at least.
type Job = (usize, Box<CpuDecoder>, Run, usize);

/// A filled run and the decoder that made it.
pub struct Done {
    /// Merge slot of the CPU.
    pub slot: usize,
    /// The CPU's decoding state, back from the worker.
    pub decoder: Box<CpuDecoder>,
    /// The records.
    pub run: Run,
    /// `Ok(false)`: the CPU's data ended with this run.
    pub result: Result<bool, LeanBail>,
}

/// Worker threads, or the caller's thread.
pub enum Pool {
    Inline(VecDeque<Done>),
    /// Worker `w` takes the jobs of slots `s` with `s % workers == w` (its own queue: no
    /// lock shared between workers).
    Threads {
        jobs: Vec<Sender<Job>>,
        results: Receiver<Done>,
        workers: Vec<JoinHandle<()>>,
    },
}

fn work((slot, mut decoder, mut run, min): Job) -> Done {
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decoder.fill(&mut run, min)))
            .unwrap_or_else(|_| Err(LeanBail::new("internal: the lean decoder panicked")));
    Done {
        slot,
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
        let mut jobs = Vec::new();
        let mut workers = Vec::new();
        for i in 0..threads {
            let (tx_job, rx_job) = channel::<Job>();
            let tx = done_tx.clone();
            let spawned = thread::Builder::new()
                .name(format!("tracedat-lean-{i}"))
                .spawn(move || {
                    while let Ok(job) = rx_job.recv() {
                        if tx.send(work(job)).is_err() {
                            return;
                        }
                    }
                });
            match spawned {
                Ok(h) => {
                    workers.push(h);
                    jobs.push(tx_job);
                }
                Err(_) => break, // fewer threads
            }
        }
        if workers.is_empty() {
            return Pool::Inline(VecDeque::new());
        }
        Pool::Threads {
            jobs,
            results,
            workers,
        }
    }

    /// Starts filling `run` with at least `min` records from `decoder` for `slot`.
    pub fn submit(&mut self, slot: usize, decoder: Box<CpuDecoder>, run: Run, min: usize) {
        match self {
            Pool::Inline(q) => q.push_back(work((slot, decoder, run, min))),
            Pool::Threads { jobs, .. } => {
                if let Some(tx) = jobs.get(slot % jobs.len().max(1)) {
                    // Cannot fail while the workers live (they exit only when `jobs` drops);
                    // if it did, `wait` reports the lost job.
                    let _ = tx.send((slot, decoder, run, min));
                }
            }
        }
    }

    /// The next finished job; `None` when none can come (threads gone).
    pub fn wait(&mut self) -> Option<Done> {
        match self {
            Pool::Inline(q) => q.pop_front(),
            Pool::Threads { results, .. } => results.recv().ok(),
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Pool::Threads { jobs, workers, .. } = self {
            jobs.clear();
            for w in workers.drain(..) {
                let _ = w.join();
            }
        }
    }
}
