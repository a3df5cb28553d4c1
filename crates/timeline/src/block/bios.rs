//! In-flight bios of one device, keyed by start sector: btt's view of the block layer.
//!
//! btt keeps every `Q` with a non-zero length in a tree ordered by start sector until a `C`
//! covers it, and finds bios by sector:
//!
//! * `G`, `I`, `M`/`F` belong to the bio whose range `[sector, sector + len)` contains the
//!   event's sector ([`BioMap::containing`]);
//! * `D` and `C` belong to every bio whose whole range lies inside the event's range
//!   ([`BioMap::covered`]), which is how merged bios follow their request without any merge
//!   bookkeeping.
//!
//! A second `Q` starting at the sector of a bio still in flight (a write queued while a read
//! of the same block is in flight) replaces the older bio, as btt 2.09 does (checked with
//! `btt -A` on a crafted trace: the older bio gets no Q2C or D2C, the newer one is counted
//! in Q2Q and completed by the next covering `C`).
//!
//! The index of start sectors is a sorted vector while it is small (a device rarely has
//! more than a few dozen bios in flight; binary search and short moves beat a tree there)
//! and a `BTreeMap` once it holds more than [`SMALL_MAX`] (bios whose completion was lost
//! pile up; a vector would then move too much per insertion).

use std::collections::BTreeMap;

use stallscope_model::{Comm, Rwbs, Span, Tid, Ts};

use super::record::BlockTask;

/// Marker for "not part of a tracked request".
pub(crate) const NO_REQUEST: u32 = u32::MAX;

/// One queued bio.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bio {
    /// End sector (exclusive).
    pub end: u64,
    pub rwbs: Rwbs,
    pub queue_ts: Ts,
    pub queue_span: Span,
    pub queuer: BlockTask,
    /// Times of the bio's `G`, `I`, `M`/`F` and last `D` ([`Stamp`]), valid where the bit
    /// `1 << stamp` of `stamped` is set. Four `Option<Ts>` made the slot 32 bytes larger,
    /// and the slot is copied into the slab on every `Q`.
    stamps: [Ts; 4],
    stamped: u8,
    /// Slot of the request the bio belongs to, or [`NO_REQUEST`].
    pub request: u32,
    /// The sink's tag for this bio ([`super::BlockSink::queued`]).
    pub tag: u32,
}

/// The events of a bio's life after its `Q` whose time it keeps.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stamp {
    GetRq = 0,
    Insert = 1,
    Merge = 2,
    Issue = 3,
}

impl Bio {
    /// A bio queued at `queue_ts`, with no later event yet.
    pub fn new(end: u64, rwbs: Rwbs, queue_ts: Ts, queue_span: Span, queuer: BlockTask) -> Bio {
        Bio {
            end,
            rwbs,
            queue_ts,
            queue_span,
            queuer,
            stamps: [0; 4],
            stamped: 0,
            request: NO_REQUEST,
            tag: 0,
        }
    }

    /// Makes the slot a bio queued at `queue_ts` by task `pid`/`comm` (tag 0), written
    /// field by field: building the bio on the stack and copying it into its slot stalled
    /// on store forwarding.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn set_queued(
        &mut self,
        end: u64,
        rwbs: Rwbs,
        queue_ts: Ts,
        queue_span: Span,
        pid: Tid,
        comm: &Option<Comm>,
    ) {
        self.end = end;
        self.rwbs = rwbs;
        self.queue_ts = queue_ts;
        self.queue_span = queue_span;
        self.queuer.pid = pid;
        match comm {
            Some(c) => self.queuer.comm = *c,
            None => self.queuer.comm = Comm::default(),
        }
        self.stamped = 0;
        self.request = NO_REQUEST;
        self.tag = 0;
    }

    /// When `what` happened to the bio, if it did.
    #[inline]
    pub fn at(&self, what: Stamp) -> Option<Ts> {
        let k = what as usize;
        (self.stamped & (1 << k) != 0).then_some(self.stamps[k])
    }

    /// Records that `what` happened at `ts`.
    #[inline]
    pub fn stamp(&mut self, what: Stamp, ts: Ts) {
        let k = what as usize;
        self.stamps[k] = ts;
        self.stamped |= 1 << k;
    }
}

/// Start sectors indexed as a sorted vector up to this many bios, as a tree beyond.
const SMALL_MAX: usize = 256;

/// Start sector → slot, ordered by sector.
#[derive(Debug)]
enum StartIndex {
    /// Sorted by start sector, unique starts.
    Small(Vec<(u64, u32)>),
    Large(BTreeMap<u64, u32>),
}

impl Default for StartIndex {
    fn default() -> StartIndex {
        StartIndex::Small(Vec::new())
    }
}

impl StartIndex {
    #[inline]
    fn get(&self, start: u64) -> Option<u32> {
        match self {
            StartIndex::Small(v) => v.binary_search_by_key(&start, |e| e.0).ok().map(|k| v[k].1),
            StartIndex::Large(m) => m.get(&start).copied(),
        }
    }

    /// Adds a start known to be absent.
    #[inline]
    fn insert_new(&mut self, start: u64, slot: u32) {
        match self {
            StartIndex::Small(v) => {
                if v.len() < SMALL_MAX {
                    let k = v.partition_point(|e| e.0 < start);
                    v.insert(k, (start, slot));
                } else {
                    let mut m: BTreeMap<u64, u32> = v.drain(..).collect();
                    m.insert(start, slot);
                    *self = StartIndex::Large(m);
                }
            }
            StartIndex::Large(m) => {
                m.insert(start, slot);
            }
        }
    }

    /// The last entry with a start `< below` (`<=` when `inclusive`).
    #[inline]
    fn last_before(&self, below: u64, inclusive: bool) -> Option<(u64, u32)> {
        match self {
            StartIndex::Small(v) => {
                let k = if inclusive {
                    v.partition_point(|e| e.0 <= below)
                } else {
                    v.partition_point(|e| e.0 < below)
                };
                k.checked_sub(1).map(|k| v[k])
            }
            StartIndex::Large(m) => {
                let e = if inclusive {
                    m.range(..=below).next_back()
                } else {
                    m.range(..below).next_back()
                };
                e.map(|(&s, &i)| (s, i))
            }
        }
    }

    #[inline]
    fn remove(&mut self, start: u64) -> Option<u32> {
        match self {
            StartIndex::Small(v) => {
                let k = v.binary_search_by_key(&start, |e| e.0).ok()?;
                Some(v.remove(k).1)
            }
            StartIndex::Large(m) => {
                let i = m.remove(&start)?;
                if m.is_empty() {
                    *self = StartIndex::default();
                }
                Some(i)
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            StartIndex::Small(v) => v.len(),
            StartIndex::Large(m) => m.len(),
        }
    }
}

/// The in-flight bios of one device: an ordered index of start sectors over a slab of bios
/// (so the index moves 12-byte entries, not bios).
#[derive(Debug, Default)]
pub(crate) struct BioMap {
    by_start: StartIndex,
    slab: Vec<Bio>,
    free: Vec<u32>,
    /// Result of [`BioMap::collect_covered`]: (start, slot) in sector order.
    pub hits: Vec<(u64, u32)>,
}

impl BioMap {
    /// The slot of a bio starting at `start`, to fill with [`Bio::set_queued`], and whether
    /// it replaces a bio that started there.
    pub fn insert_slot(&mut self, start: u64) -> (&mut Bio, bool) {
        if let Some(i) = self.by_start.get(start) {
            return (&mut self.slab[i as usize], true);
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slab.push(Bio::new(
                    0,
                    Rwbs::default(),
                    0,
                    Span::default(),
                    BlockTask::default(),
                ));
                (self.slab.len() - 1) as u32
            }
        };
        self.by_start.insert_new(start, i);
        (&mut self.slab[i as usize], false)
    }

    /// The bio whose range contains `sector`.
    pub fn containing(&mut self, sector: u64) -> Option<(u64, &mut Bio)> {
        let (start, i) = self.containing_slot(sector)?;
        Some((start, &mut self.slab[i as usize]))
    }

    /// Start and slot of the bio whose range contains `sector`.
    #[inline]
    pub fn containing_slot(&self, sector: u64) -> Option<(u64, u32)> {
        let (start, i) = self.by_start.last_before(sector, true)?;
        (sector < self.slab[i as usize].end).then_some((start, i))
    }

    /// The bio that ends exactly at `sector` (a back merge's neighbour).
    pub fn ending_at(&mut self, sector: u64) -> Option<&mut Bio> {
        let (_, i) = self.by_start.last_before(sector, false)?;
        let bio = &mut self.slab[i as usize];
        (bio.end == sector).then_some(bio)
    }

    /// The bio starting at `sector`.
    pub fn starting_at(&mut self, sector: u64) -> Option<&mut Bio> {
        let i = self.by_start.get(sector)?;
        Some(&mut self.slab[i as usize])
    }

    /// Fills [`Self::hits`] with every bio lying wholly inside `[start, end)`, in sector
    /// order; returns how many.
    pub fn collect_covered(&mut self, start: u64, end: u64) -> usize {
        self.hits.clear();
        let slab = &self.slab;
        let hits = &mut self.hits;
        let mut take = |s: u64, i: u32| {
            if slab[i as usize].end <= end {
                hits.push((s, i));
            }
        };
        match &self.by_start {
            StartIndex::Small(v) => {
                let from = v.partition_point(|e| e.0 < start);
                for &(s, i) in v[from..].iter().take_while(|e| e.0 < end) {
                    take(s, i);
                }
            }
            StartIndex::Large(m) => {
                for (&s, &i) in m.range(start..end) {
                    take(s, i);
                }
            }
        }
        self.hits.len()
    }

    /// The bio in slot `i` (from [`Self::hits`]).
    pub fn slot_mut(&mut self, i: u32) -> &mut Bio {
        &mut self.slab[i as usize]
    }

    /// Removes the bio starting at `start`; false when there is none (returning the bio
    /// itself copied 112 bytes per completed bio that no caller reads).
    pub fn remove(&mut self, start: u64) -> bool {
        match self.by_start.remove(start) {
            Some(i) => {
                self.free.push(i);
                true
            }
            None => false,
        }
    }

    /// Bios still in flight.
    pub fn len(&self) -> usize {
        self.by_start.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adds a bio `[start, end)`; true when it replaced one.
    fn insert(map: &mut BioMap, start: u64, end: u64) -> bool {
        let (bio, replaced) = map.insert_slot(start);
        bio.set_queued(end, Rwbs::default(), 0, Span::default(), 0, &None);
        replaced
    }

    /// The vector and the tree answer alike: the same operations on more bios than
    /// `SMALL_MAX` (forcing the tree) and on few, against a plain `BTreeMap` model.
    #[test]
    fn small_and_large_indexes_agree_with_a_tree() {
        for n in [40u64, 3 * SMALL_MAX as u64] {
            let mut map = BioMap::default();
            let mut model: BTreeMap<u64, u64> = BTreeMap::new();
            // Bios of 8 sectors at every 16th sector, inserted out of order.
            for k in 0..n {
                let start = ((k * 7919) % n) * 16;
                assert!(!insert(&mut map, start, start + 8));
                model.insert(start, start + 8);
            }
            assert_eq!(map.len(), model.len());
            for sector in [0, 5, 8, 15, 16, 17, 16 * (n - 1) + 7, 16 * n + 3] {
                let want = model
                    .range(..=sector)
                    .next_back()
                    .filter(|(_, &e)| sector < e)
                    .map(|(&s, _)| s);
                assert_eq!(map.containing(sector).map(|(s, _)| s), want, "{sector}");
                let ends = model
                    .range(..sector)
                    .next_back()
                    .filter(|(_, &e)| e == sector);
                assert_eq!(map.ending_at(sector).is_some(), ends.is_some(), "{sector}");
                assert_eq!(
                    map.starting_at(sector).is_some(),
                    model.contains_key(&sector)
                );
            }
            // A range covering bios 2..5 wholly and bio 5 partly.
            assert_eq!(map.collect_covered(32, 16 * 5 + 4), 3);
            assert_eq!(
                map.hits.iter().map(|h| h.0).collect::<Vec<_>>(),
                [32, 48, 64]
            );
            for k in 0..n {
                assert!(map.remove(k * 16));
            }
            assert_eq!(map.len(), 0);
            assert!(!map.remove(0));
        }
    }
}
