//! [`Sink`]: what the reader learns while events stream through the merge — data-quality
//! counters from the decoding threads, event names seen (`meta.declared_events`), losses
//! reported by missed-events markers, and, at the end, the CPUSTAT losses those markers
//! did not already report.

use std::collections::HashSet;

use stallscope_model::{DataQuality, Severity, TraceMeta};

/// Reader-side state fed by the merge.
pub struct Sink {
    /// Metadata (declared events grow while reading).
    pub meta: TraceMeta,
    /// Problems met so far.
    pub dq: DataQuality,
    declared: HashSet<String>,
    /// Events lost per CPU according to the missed-events markers seen so far.
    inline_lost: Vec<(u32, u64)>,
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

    /// End of the data: CPUSTAT losses beyond what the markers said go to `lost_events`.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        let path = &self.meta.path;
        for &(cpu, stat) in &self.meta.lost_per_cpu {
            let inline = self
                .inline_lost
                .iter()
                .find(|(c, _)| *c == cpu)
                .map_or(0, |(_, n)| *n);
            let extra = stat.saturating_sub(inline);
            if extra > 0 {
                self.dq.add(
                    "lost_events",
                    Severity::Error,
                    "events lost (ring buffer overrun or dropped): results near them are incomplete",
                    extra,
                    || format!("{path}: CPU {cpu}: {stat} events overrun or dropped (CPUSTAT option), {inline} of them reported by missed-events markers"),
                );
            }
        }
    }
}
