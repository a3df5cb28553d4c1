//! [`CommCache`]: a small direct-mapped cache from the raw bytes of a `comm` field (at most
//! 16 bytes, as stored in the record) to the decoded [`Comm`], so the scheduler decoders do
//! not re-validate and re-copy the same few task names millions of times.

use stallscope_model::Comm;

const SLOTS: usize = 256;

/// Raw comm bytes → [`Comm`]. Longer strings bypass the cache.
#[derive(Clone, Debug)]
pub struct CommCache {
    keys: Box<[u128; SLOTS]>,
    values: Box<[Comm; SLOTS]>,
}

impl Default for CommCache {
    fn default() -> Self {
        // All-zero key = an empty name, which is what an all-EMPTY value table says.
        CommCache {
            keys: Box::new([0; SLOTS]),
            values: Box::new([Comm::EMPTY; SLOTS]),
        }
    }
}

impl CommCache {
    /// The name in `raw` (stops at the first NUL), cached.
    #[inline]
    pub fn get(&mut self, raw: &[u8]) -> Comm {
        if raw.len() > 16 {
            return Comm::from_bytes(raw);
        }
        let key = padded_key(raw);
        let folded = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
        let slot = (folded.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize % SLOTS;
        if self.keys[slot] == key {
            return self.values[slot];
        }
        let c = Comm::from_bytes(raw);
        self.keys[slot] = key;
        self.values[slot] = c;
        c
    }
}

/// `raw` (at most 16 bytes) zero-padded to 16, as a little-endian `u128`. Built from
/// whole-word loads (two overlapping ones for a length between two word sizes): copying
/// a short name into a zeroed array and reading it back as one word stalls on store
/// forwarding, and a 6.18 `__data_loc` comm (`"perf\0"`, 5 bytes) is never 16 bytes long.
#[inline(always)]
fn padded_key(raw: &[u8]) -> u128 {
    let n = raw.len();
    // Bytes `n - W .. n` as a word of `W` bytes shifted down so that byte `W` of `raw`
    // is its lowest (0 when `n == W`: nothing above the first word).
    let (lo, hi) = if let Ok(k) = <[u8; 16]>::try_from(raw) {
        return u128::from_le_bytes(k);
    } else if n >= 8 {
        let first = u64::from_le_bytes(word(raw, 0));
        let last = u64::from_le_bytes(word(raw, n - 8));
        (first, last.checked_shr(8 * (16 - n as u32)).unwrap_or(0))
    } else if n >= 4 {
        let first = u32::from_le_bytes(word(raw, 0));
        let last = u32::from_le_bytes(word(raw, n - 4));
        let above = last.checked_shr(8 * (8 - n as u32)).unwrap_or(0);
        (u64::from(first) | u64::from(above) << 32, 0)
    } else {
        let lo = raw
            .iter()
            .rev()
            .fold(0u64, |acc, &b| acc << 8 | u64::from(b));
        (lo, 0)
    };
    u128::from(hi) << 64 | u128::from(lo)
}

/// The `W` bytes of `raw` at `at` (the caller checked `at + W <= raw.len()`).
#[inline(always)]
fn word<const W: usize>(raw: &[u8], at: usize) -> [u8; W] {
    let mut w = [0u8; W];
    if let Some(b) = raw.get(at..at + W) {
        w.copy_from_slice(b);
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_the_names_bytes_zero_padded() {
        let bytes: Vec<u8> = (1..=16).map(|i| i * 13 + 7).collect();
        for n in 0..=16 {
            let mut padded = [0u8; 16];
            padded[..n].copy_from_slice(&bytes[..n]);
            assert_eq!(padded_key(&bytes[..n]), u128::from_le_bytes(padded), "{n}");
        }
    }

    #[test]
    fn cached_names_equal_uncached_ones() {
        let mut c = CommCache::default();
        for raw in [
            &b"perf\0\0\0\0\0\0\0\0\0\0\0\0"[..],
            b"",
            b"\0",
            b"migration/0",
            b"perf\0garbage",
            b"perf",
            b"a very long name beyond 16",
        ] {
            for _ in 0..2 {
                assert_eq!(c.get(raw), Comm::from_bytes(raw), "{raw:?}");
            }
        }
        // Many distinct names: collisions replace, never confuse.
        for i in 0..2000 {
            let n = format!("task-{i}");
            assert_eq!(c.get(n.as_bytes()).as_str(), n);
        }
    }
}
