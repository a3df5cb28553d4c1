//! [`LogHist`]: a log-linear histogram of durations (8 sub-buckets per power of two, so a
//! bucket spans at most 12.5 % of its value) for medians without keeping samples.
//!
//! Bucket index of `v`: `v` itself below 8; else `(msb(v) - 2) * 8 + next three bits`.
//! Storage grows to the highest bucket used (about 250 `u32` for values up to a minute).

/// Sub-buckets per power of two (as a shift).
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;

/// A histogram of `u64` values.
#[derive(Clone, Debug, Default)]
pub struct LogHist {
    buckets: Vec<u32>,
    count: u64,
    /// Where [`LogHist::median_tracked`] last ended: a bucket index, and the number of
    /// values in the buckets below it.
    cursor: usize,
    below: u64,
}

fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let sub = (v >> (msb - SUB_BITS)) & (SUB - 1);
    ((msb - SUB_BITS + 1) as usize) * SUB as usize + sub as usize
}

/// Smallest value of bucket `i`.
fn lower(i: usize) -> u64 {
    let s = SUB as usize;
    if i < s {
        return i as u64;
    }
    let msb = (i / s) as u32 + SUB_BITS - 1;
    let sub = (i % s) as u64;
    (1u64 << msb) | (sub << (msb - SUB_BITS))
}

impl LogHist {
    /// Adds one value.
    #[inline]
    pub fn add(&mut self, v: u64) {
        let i = index(v);
        if i >= self.buckets.len() {
            self.buckets.resize(i + 1, 0);
        }
        let before = self.buckets[i];
        self.buckets[i] = before.saturating_add(1);
        if i < self.cursor && before != u32::MAX {
            self.below += 1;
        }
        self.count += 1;
    }

    /// Values added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The lower bound of the bucket holding the median (0 when empty).
    pub fn median(&self) -> u64 {
        self.quantile_permille(500)
    }

    /// [`LogHist::median`], walking from the bucket where the previous call ended instead of
    /// from the first one: a median asked for again and again as values come moves by a few
    /// buckets at most.
    pub fn median_tracked(&mut self) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = (self.count * 500 / 1000).min(self.count - 1);
        // the answer is the first bucket whose values and those below it outnumber `rank`
        while self.cursor > 0 && self.below > rank {
            self.cursor -= 1;
            self.below -= u64::from(self.buckets[self.cursor]);
        }
        while let Some(&n) = self.buckets.get(self.cursor) {
            if self.below + u64::from(n) > rank {
                return lower(self.cursor);
            }
            self.below += u64::from(n);
            self.cursor += 1;
        }
        lower(self.buckets.len().saturating_sub(1))
    }

    /// Lower bound of the bucket holding the `q`/1000 quantile.
    pub fn quantile_permille(&self, q: u64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = (self.count * q / 1000).min(self.count - 1);
        let mut seen = 0u64;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += u64::from(n);
            if seen > rank {
                return lower(i);
            }
        }
        lower(self.buckets.len().saturating_sub(1))
    }

    /// Values within ±`permille`/1000 of `center` (bucket-resolution).
    pub fn count_near(&self, center: u64, permille: u64) -> u64 {
        let lo = center - center * permille / 1000;
        let hi = center + center * permille / 1000;
        let (a, b) = (index(lo), index(hi));
        self.buckets
            .iter()
            .enumerate()
            .filter(|(i, _)| *i >= a && *i <= b)
            .map(|(_, &n)| u64::from(n))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in [
            0u64,
            1,
            7,
            8,
            9,
            15,
            16,
            17,
            1000,
            1_000_000,
            98_766_000,
            u64::MAX,
        ] {
            let i = index(v);
            assert!(i >= last, "{v}");
            last = i;
            assert!(lower(i) <= v, "{v}: lower {}", lower(i));
            assert!(v - lower(i) <= v / 8, "{v}: lower {}", lower(i));
        }
    }

    #[test]
    fn tracked_median_equals_the_scan() {
        // values spread over many buckets, drifting up and down, medians asked in between
        let mut h = LogHist::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for k in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let scale = if (k / 3000) % 2 == 0 {
                1 << 14
            } else {
                1 << 24
            };
            h.add(x % scale + (k % 7) * 1000);
            if k % 5 == 0 || k < 100 {
                assert_eq!(h.median_tracked(), h.median(), "after {} values", k + 1);
            }
        }
        assert_ne!(h.median(), 0);
        assert_eq!(LogHist::default().median_tracked(), 0);
    }

    #[test]
    fn median_of_known_samples() {
        let mut h = LogHist::default();
        for v in [10_000u64, 11_000, 12_000, 1_000_000, 50_000_000] {
            h.add(v);
        }
        let m = h.median();
        assert!((11_000 - 11_000 / 8..=12_000).contains(&m), "{m}");
        assert_eq!(h.count(), 5);
        assert_eq!(LogHist::default().median(), 0);
        assert_eq!(h.count_near(1_000_000, 100), 1);
    }
}
