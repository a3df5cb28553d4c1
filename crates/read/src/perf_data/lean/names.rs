//! Task names on the lean path without building a [`Comm`] per record.
//!
//! * [`NameIds`] interns names: raw `comm` bytes → a small id, equal ids exactly when the
//!   [`Comm`]s the general decoder would build are equal (the cache is keyed by the raw bytes
//!   zero-padded to 16, which decode to the same `Comm`; a miss builds the `Comm` and looks
//!   it up by value in the [`NameTable`] all walkers share, so ids are the same in every
//!   walker and the receiver reads names from the table).
//! * [`StreamNames`] is [`PayloadNames`](stallscope_model::sched_record::PayloadNames)'s
//!   rule on ids: the stream's current name id per tid, to decide when a `PayloadComm`
//!   record is due.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rustc_hash::FxHashMap;
use stallscope_model::{Comm, Tid};

/// Every name interned so far, by id (shared by the walkers and the receiver).
#[derive(Debug, Default)]
pub struct NameTable {
    by_comm: FxHashMap<Comm, u32>,
    comms: Vec<Comm>,
}

/// The shared [`NameTable`].
pub type SharedNames = Arc<Mutex<NameTable>>;

/// Locks the table (a walker that panicked while holding it left it consistent: every
/// change is one insert and one push).
fn lock(t: &SharedNames) -> MutexGuard<'_, NameTable> {
    t.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Appends the names `out` does not hold yet (ids `out.len()..`) from the table.
pub fn copy_new(t: &SharedNames, out: &mut Vec<Comm>) {
    let t = lock(t);
    out.extend_from_slice(t.comms.get(out.len()..).unwrap_or(&[]));
}

/// Cache slots of [`NameIds`].
const SLOTS: usize = 1024;
/// "No id yet" in tables.
pub const NO_NAME: u32 = u32::MAX;

/// Name interner (see the module docs).
pub struct NameIds {
    keys: Box<[u128; SLOTS]>,
    ids: Box<[u32; SLOTS]>,
    table: SharedNames,
}

impl Default for NameIds {
    fn default() -> Self {
        NameIds::new(SharedNames::default())
    }
}

impl NameIds {
    /// An interner (with its own cache) on `table`.
    pub fn new(table: SharedNames) -> NameIds {
        NameIds {
            keys: Box::new([0; SLOTS]),
            ids: Box::new([NO_NAME; SLOTS]),
            table,
        }
    }

    /// The id of the name in `raw` (stops at the first NUL, like `Comm::from_bytes`).
    #[inline(always)]
    pub fn id(&mut self, raw: &[u8]) -> u32 {
        match padded_key(raw) {
            Some(key) => self.id_key(key),
            None => self.id_of(Comm::from_bytes(raw)),
        }
    }

    /// The id of the name in the 16 raw bytes `key` (little endian).
    #[inline(always)]
    pub fn id_key(&mut self, key: u128) -> u32 {
        let folded = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
        let slot = (folded.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54) as usize % SLOTS;
        if self.keys[slot] == key && self.ids[slot] != NO_NAME {
            return self.ids[slot];
        }
        self.miss(key, slot)
    }

    /// [`NameIds::id_key`] when `key` is not in its cache slot.
    #[cold]
    #[inline(never)]
    fn miss(&mut self, key: u128, slot: usize) -> u32 {
        let id = self.id_of(Comm::from_bytes(&key.to_le_bytes()));
        self.keys[slot] = key;
        self.ids[slot] = id;
        id
    }

    /// The id of `comm` (a cache miss: the shared table is locked).
    pub fn id_of(&mut self, comm: Comm) -> u32 {
        let mut t = lock(&self.table);
        if let Some(&id) = t.by_comm.get(&comm) {
            return id;
        }
        let id = t.comms.len() as u32;
        t.comms.push(comm);
        t.by_comm.insert(comm, id);
        id
    }

    /// The name of an id (empty for an unknown one).
    #[cfg(test)]
    pub fn comm(&self, id: u32) -> Comm {
        lock(&self.table)
            .comms
            .get(id as usize)
            .copied()
            .unwrap_or(Comm::EMPTY)
    }
}

/// `raw` (at most 16 bytes) zero-padded to 16, as a little-endian `u128`; `None` when it
/// is longer. Built from two overlapping loads rather than a copy into a zeroed buffer (a
/// variable-length copy followed by a 16-byte load stalls on store forwarding).
#[inline(always)]
fn padded_key(raw: &[u8]) -> Option<u128> {
    let n = raw.len();
    let u64_at = |o: usize| -> u64 {
        raw.get(o..o + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_le_bytes)
    };
    let u32_at = |o: usize| -> u64 {
        raw.get(o..o + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0, |b| u64::from(u32::from_le_bytes(b)))
    };
    let (lo, hi) = match n {
        // Bytes 8..n are the top n - 8 bytes of the word ending at n.
        8..=16 => (
            u64_at(0),
            u64_at(n - 8).checked_shr(8 * (16 - n) as u32).unwrap_or(0),
        ),
        // Bytes 4..n likewise from the word ending at n.
        4..=7 => (u32_at(0) | (u32_at(n - 4) >> (8 * (8 - n))) << 32, 0),
        0..=3 => (
            raw.iter()
                .rev()
                .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)),
            0,
        ),
        _ => return None,
    };
    Some(u128::from(lo) | (u128::from(hi) << 64))
}

/// Tids below this are kept in a table indexed by tid (the kernel's largest `pid_max`).
const DIRECT_TIDS: usize = 1 << 22;

/// The stream's current name id per tid.
#[derive(Default)]
pub struct StreamNames {
    direct: Vec<u32>,
    other: FxHashMap<Tid, u32>,
}

impl StreamNames {
    /// Sets the name id of `tid`; true when it changed (or the tid is new).
    #[inline]
    pub fn set(&mut self, tid: Tid, id: u32) -> bool {
        match usize::try_from(tid).ok().filter(|&t| t < DIRECT_TIDS) {
            Some(t) => {
                if t >= self.direct.len() {
                    self.direct
                        .resize((t + 1).next_power_of_two().min(DIRECT_TIDS), NO_NAME);
                }
                match self.direct.get_mut(t) {
                    Some(cur) if *cur == id => false,
                    Some(cur) => {
                        *cur = id;
                        true
                    }
                    None => true,
                }
            }
            None => self.other.insert(tid, id) != Some(id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_equal_exactly_when_comms_are() {
        let mut n = NameIds::default();
        let a = n.id(b"perf\0\0\0\0\0\0\0\0\0\0\0\0");
        assert_eq!(n.id(b"perf"), a);
        assert_eq!(n.id(b"perf\0garbage"), a);
        assert_eq!(n.id_of(Comm::new("perf")), a);
        let b = n.id(b"");
        assert_ne!(a, b);
        assert_eq!(n.comm(b), Comm::EMPTY);
        let long = n.id(b"a name longer than sixteen bytes");
        assert_eq!(
            n.comm(long),
            Comm::from_bytes(b"a name longer than sixteen bytes")
        );
        for i in 0..3000 {
            let s = format!("task-{i}");
            let id = n.id(s.as_bytes());
            assert_eq!(n.comm(id).as_str(), s);
        }
    }

    #[test]
    fn padded_keys_equal_a_zero_padded_copy() {
        let bytes: Vec<u8> = (1..=20).collect();
        for n in 0..=16 {
            let mut k = [0u8; 16];
            k[..n].copy_from_slice(&bytes[..n]);
            assert_eq!(padded_key(&bytes[..n]), Some(u128::from_le_bytes(k)), "{n}");
        }
        assert_eq!(padded_key(&bytes[..17]), None);
    }

    #[test]
    fn stream_names_follow_the_payload_rule() {
        let mut s = StreamNames::default();
        assert!(s.set(5, 0));
        assert!(!s.set(5, 0));
        assert!(s.set(5, 1));
        assert!(s.set(-1, 0));
        assert!(!s.set(-1, 0));
        assert!(s.set(1 << 23, 2));
        assert!(!s.set(1 << 23, 2));
    }
}
