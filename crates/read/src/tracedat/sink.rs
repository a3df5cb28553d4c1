//! [`Sink`]: what the reader learns while events stream through the merge — data-quality
//! counters from the decoding threads, event names seen (`meta.declared_events`), losses
//! reported by missed-events markers, and, at the end, the CPUSTAT losses those markers
//! did not already report.
//!
//! Order of data-quality examples (deterministic, whatever the threads do): the metadata's
//! notes, then each CPU's notes in CPU order (within a CPU, in file order), then the
//! CPUSTAT losses. The CPUs' notes are kept apart while reading and join `dq` at the end
//! of the data (or when reading stops on an error).

use std::collections::HashSet;

use stallscope_model::{DataQuality, Problem, TraceMeta};

/// Reader-side state fed by the merge.
pub struct Sink {
    /// Metadata (declared events grow while reading).
    pub meta: TraceMeta,
    /// Problems met so far.
    pub dq: DataQuality,
    declared: HashSet<String>,
    /// Events lost per CPU according to the missed-events markers seen so far.
    inline_lost: Vec<(u32, u64)>,
    /// Notes of each CPU slot, joined to `dq` at the end.
    cpu_dq: Vec<DataQuality>,
    finished: bool,
}

impl Sink {
    /// A sink starting from what the file header said.
    pub fn new(meta: TraceMeta, dq: DataQuality) -> Sink {
        Sink {
            meta,
            dq,
            declared: HashSet::new(),
            inline_lost: Vec::new(),
            cpu_dq: Vec::new(),
            finished: false,
        }
    }

    /// An event name seen for the first time on some CPU.
    pub fn declare(&mut self, name: String) {
        if self.declared.insert(name.clone()) {
            self.meta.declared_events.push(name);
        }
    }

    /// A missed-events marker on `cpu` (0 when the count is unknown).
    pub fn note_inline_lost(&mut self, cpu: u32, n: u64) {
        match self.inline_lost.iter_mut().find(|(c, _)| *c == cpu) {
            Some((_, total)) => *total = total.saturating_add(n),
            None => self.inline_lost.push((cpu, n)),
        }
    }

    /// Notes met while decoding CPU slot `slot`'s data.
    pub fn note_cpu(&mut self, slot: usize, dq: &DataQuality) {
        if self.cpu_dq.len() <= slot {
            self.cpu_dq.resize_with(slot + 1, DataQuality::default);
        }
        self.cpu_dq[slot].merge(dq);
    }

    /// Joins the CPUs' notes to `dq`, in CPU order (at the end, or when reading stops).
    pub fn flush_cpu_notes(&mut self) {
        for d in std::mem::take(&mut self.cpu_dq) {
            self.dq.merge(&d);
        }
    }

    /// End of the data: the CPUs' notes join `dq`, and CPUSTAT losses beyond what the
    /// markers said go to `lost_events`.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.flush_cpu_notes();
        let path = &self.meta.path;
        for &(cpu, stat) in &self.meta.lost_per_cpu {
            let inline = self
                .inline_lost
                .iter()
                .find(|(c, _)| *c == cpu)
                .map_or(0, |(_, n)| *n);
            let extra = stat.saturating_sub(inline);
            if extra > 0 {
                self.dq.add(Problem::LostEvents, extra, || format!("{path}: CPU {cpu}: {stat} events overrun or dropped (CPUSTAT option), {inline} of them reported by missed-events markers"));
            }
        }
    }
}
