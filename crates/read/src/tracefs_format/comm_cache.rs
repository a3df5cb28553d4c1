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
        // `char comm[16]` (the usual case) is one 16-byte load.
        let key = match <[u8; 16]>::try_from(raw) {
            Ok(k) => u128::from_le_bytes(k),
            Err(_) => {
                let mut k = [0u8; 16];
                k[..raw.len()].copy_from_slice(raw);
                u128::from_le_bytes(k)
            }
        };
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

#[cfg(test)]
mod tests {
    use super::*;

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
