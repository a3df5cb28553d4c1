//! [`RequestIndex`]: the in-flight requests of one device, (key sector, direction) → slot of
//! the tracker's request slab.
//!
//! An open-addressing table with linear probing and no tombstones (a removal shifts the
//! entries after it back into the hole), kept at most half full. The position comes from
//! the high bits of the key times a 64-bit odd constant (Fibonacci hashing), which spreads
//! sectors that are all multiples of 8 (4 KiB I/O). A device has at most a few hundred
//! requests in flight, so the table stays in the L1/L2 cache; one probe is usually enough.
//! It replaced an `FxHashMap<(u64, u8), u32>` whose lookups, inserts and removals were
//! ~7% of the tracker's time on the 17 M-record bench.
//!
//! ```text
//! entries: [ (sector, dir, slot) | empty ]  × 2^k,   position = hash(sector, dir) >> (64 - k)
//! ```

/// Direction byte of an empty entry (directions are 0, 1, 2).
const EMPTY: u8 = u8::MAX;

/// Smallest table (entries).
const MIN_CAPACITY: usize = 16;

#[derive(Clone, Copy, Debug)]
struct Entry {
    sector: u64,
    slot: u32,
    dir: u8,
}

const VACANT: Entry = Entry {
    sector: 0,
    slot: 0,
    dir: EMPTY,
};

/// (key sector, direction) → request slot (see the module docs).
#[derive(Debug)]
pub(crate) struct RequestIndex {
    entries: Vec<Entry>,
    len: usize,
    /// 64 − log2(capacity).
    shift: u32,
}

impl Default for RequestIndex {
    fn default() -> RequestIndex {
        RequestIndex {
            entries: vec![VACANT; MIN_CAPACITY],
            len: 0,
            shift: 64 - MIN_CAPACITY.trailing_zeros(),
        }
    }
}

impl RequestIndex {
    #[inline]
    fn home(&self, sector: u64, dir: u8) -> usize {
        let h = (sector ^ (u64::from(dir) << 61)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> self.shift) as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        self.entries.len() - 1
    }

    /// Position of the key, or of the empty entry where it would go.
    #[inline]
    fn find(&self, sector: u64, dir: u8) -> (usize, bool) {
        let mask = self.mask();
        let mut i = self.home(sector, dir);
        loop {
            let e = &self.entries[i];
            if e.dir == EMPTY {
                return (i, false);
            }
            if e.sector == sector && e.dir == dir {
                return (i, true);
            }
            i = (i + 1) & mask;
        }
    }

    /// The slot of the request at `key`.
    #[inline]
    pub fn get(&self, key: &(u64, u8)) -> Option<&u32> {
        let (i, found) = self.find(key.0, key.1);
        found.then(|| &self.entries[i].slot)
    }

    /// Maps `key` to `slot`, returning the slot it replaces.
    #[inline]
    pub fn insert(&mut self, key: (u64, u8), slot: u32) -> Option<u32> {
        let (i, found) = self.find(key.0, key.1);
        if found {
            return Some(std::mem::replace(&mut self.entries[i].slot, slot));
        }
        self.entries[i] = Entry {
            sector: key.0,
            slot,
            dir: key.1,
        };
        self.len += 1;
        if 2 * self.len > self.entries.len() {
            self.grow();
        }
        None
    }

    /// Removes `key`, returning its slot.
    #[inline]
    pub fn remove(&mut self, key: &(u64, u8)) -> Option<u32> {
        let (mut hole, found) = self.find(key.0, key.1);
        if !found {
            return None;
        }
        let slot = self.entries[hole].slot;
        self.len -= 1;
        // Shift back every later entry of the run that may move into the hole (one whose
        // home is not cyclically in (hole, i]).
        let mask = self.mask();
        let mut i = hole;
        loop {
            i = (i + 1) & mask;
            let e = self.entries[i];
            if e.dir == EMPTY {
                break;
            }
            let home = self.home(e.sector, e.dir);
            if (i.wrapping_sub(home) & mask) >= (i.wrapping_sub(hole) & mask) {
                self.entries[hole] = e;
                hole = i;
            }
        }
        self.entries[hole] = VACANT;
        Some(slot)
    }

    /// Requests indexed.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[cold]
    fn grow(&mut self) {
        let doubled = vec![VACANT; 2 * self.entries.len()];
        let old = std::mem::replace(&mut self.entries, doubled);
        self.shift -= 1;
        let mask = self.mask();
        for e in old.into_iter().filter(|e| e.dir != EMPTY) {
            let mut i = self.home(e.sector, e.dir);
            while self.entries[i].dir != EMPTY {
                i = (i + 1) & mask;
            }
            self.entries[i] = e;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The same operations on the index and on a `HashMap` give the same answers, through
    /// growth, collisions (sectors that are multiples of large powers of two) and removals
    /// in the middle of probe runs.
    #[test]
    fn agrees_with_a_hash_map() {
        let mut index = RequestIndex::default();
        let mut model: HashMap<(u64, u8), u32> = HashMap::new();
        let mut x = 0x1234_5678_9abc_def0u64;
        for step in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let sector = match x % 4 {
                0 => (x >> 8) % 64 * 8,
                1 => ((x >> 8) % 32) << 40,
                2 => x >> 3,
                _ => (x >> 8) % 512,
            };
            let key = (sector, ((x >> 5) % 3) as u8);
            match (x >> 2) % 5 {
                0 | 1 => assert_eq!(index.insert(key, step), model.insert(key, step)),
                2 | 3 => assert_eq!(index.remove(&key), model.remove(&key)),
                _ => assert_eq!(index.get(&key), model.get(&key)),
            }
            assert_eq!(index.len(), model.len());
        }
        for (key, slot) in &model {
            assert_eq!(index.get(key), Some(slot));
        }
    }
}
