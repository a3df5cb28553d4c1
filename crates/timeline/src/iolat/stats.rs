//! Accumulators: N / min / total / max of a phase ([`PhaseStats`]) and a log2 histogram in
//! microseconds ([`Log2Hist`], biolatency's buckets). Integer nanoseconds throughout; the
//! average is rounded to the nearest nanosecond when read.

use serde::Serialize;
use stallscope_model::Dur;

/// N / min / total / max of one phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseStats {
    /// Samples.
    pub n: u64,
    /// Sum of the samples, ns.
    pub total: u128,
    /// Smallest sample, ns (0 when `n == 0`).
    pub min: Dur,
    /// Largest sample, ns.
    pub max: Dur,
}

impl PhaseStats {
    /// Adds one sample.
    #[inline]
    pub fn add(&mut self, d: Dur) {
        if self.n == 0 {
            self.min = d;
            self.max = d;
        } else {
            self.min = self.min.min(d);
            self.max = self.max.max(d);
        }
        self.n += 1;
        self.total += u128::from(d);
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &PhaseStats) {
        if other.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *other;
            return;
        }
        self.n += other.n;
        self.total += other.total;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Average, ns, rounded to the nearest (0 when empty).
    pub fn avg(&self) -> Dur {
        if self.n == 0 {
            return 0;
        }
        let n = u128::from(self.n);
        ((self.total + n / 2) / n) as Dur
    }
}

/// Buckets of [`Log2Hist`]: bucket 0 holds 0–1 µs, bucket k ≥ 1 holds `2^k ..= 2^(k+1)-1` µs.
pub const LOG2_BUCKETS: usize = 40;

/// A power-of-two latency histogram in microseconds (like bcc's biolatency).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Log2Hist {
    /// Counts per bucket.
    pub counts: [u64; LOG2_BUCKETS],
}

impl Default for Log2Hist {
    fn default() -> Self {
        Log2Hist {
            counts: [0; LOG2_BUCKETS],
        }
    }
}

/// One non-empty histogram bucket, for output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HistBucket {
    /// Lowest value, µs (inclusive).
    pub low_us: u64,
    /// Highest value, µs (inclusive).
    pub high_us: u64,
    /// Samples.
    pub count: u64,
}

impl Log2Hist {
    /// The bucket of a duration.
    #[inline]
    pub fn bucket(d: Dur) -> usize {
        let us = d / 1000;
        if us <= 1 {
            0
        } else {
            ((63 - us.leading_zeros()) as usize).min(LOG2_BUCKETS - 1)
        }
    }

    /// Adds one sample.
    #[inline]
    pub fn add(&mut self, d: Dur) {
        self.counts[Self::bucket(d)] += 1;
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Log2Hist) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
    }

    /// The buckets from the first to the last non-empty one (empty inside the range kept).
    pub fn buckets(&self) -> Vec<HistBucket> {
        let Some(first) = self.counts.iter().position(|&c| c > 0) else {
            return Vec::new();
        };
        let last = self.counts.iter().rposition(|&c| c > 0).unwrap_or(first);
        (first..=last)
            .map(|k| {
                let (low_us, high_us) = if k == 0 {
                    (0, 1)
                } else if k == LOG2_BUCKETS - 1 {
                    (1u64 << k, u64::MAX)
                } else {
                    (1u64 << k, (1u64 << (k + 1)) - 1)
                };
                HistBucket {
                    low_us,
                    high_us,
                    count: self.counts[k],
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_in_microseconds() {
        assert_eq!(Log2Hist::bucket(0), 0);
        assert_eq!(Log2Hist::bucket(1_999), 0); // 1 µs
        assert_eq!(Log2Hist::bucket(2_000), 1); // 2..3 µs
        assert_eq!(Log2Hist::bucket(3_999), 1);
        assert_eq!(Log2Hist::bucket(4_000), 2);
        assert_eq!(Log2Hist::bucket(1_000_000), 9); // 1000 µs in 512..1023
        let mut h = Log2Hist::default();
        h.add(5_000);
        h.add(70_000);
        let b = h.buckets();
        assert_eq!(b.first().map(|b| (b.low_us, b.high_us)), Some((4, 7)));
        assert_eq!(b.last().map(|b| (b.low_us, b.high_us)), Some((64, 127)));
        assert_eq!(b.len(), 5);
    }

    #[test]
    fn average_rounds_to_nearest_ns() {
        let mut s = PhaseStats::default();
        for d in [1, 2] {
            s.add(d);
        }
        assert_eq!((s.n, s.min, s.max, s.avg()), (2, 1, 2, 2));
        s.add(0);
        assert_eq!((s.min, s.avg()), (0, 1));
    }
}
