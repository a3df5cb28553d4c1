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

use std::collections::BTreeMap;

use stallscope_model::{Rwbs, Span, Ts};

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
    pub getrq_ts: Option<Ts>,
    pub insert_ts: Option<Ts>,
    pub merge_ts: Option<Ts>,
    pub issue_ts: Option<Ts>,
    /// Slot of the request the bio belongs to, or [`NO_REQUEST`].
    pub request: u32,
    /// The sink's tag for this bio ([`super::BlockSink::queued`]).
    pub tag: u32,
}

/// The in-flight bios of one device: an ordered index of start sectors over a slab of bios
/// (so the tree moves 4-byte slots, not bios, when it rebalances).
#[derive(Debug, Default)]
pub(crate) struct BioMap {
    by_start: BTreeMap<u64, u32>,
    slab: Vec<Bio>,
    free: Vec<u32>,
    /// Result of [`BioMap::collect_covered`]: (start, slot) in sector order.
    pub hits: Vec<(u64, u32)>,
}

impl BioMap {
    /// Adds a bio starting at `start`, returning the one it replaces.
    pub fn insert(&mut self, start: u64, bio: Bio) -> Option<Bio> {
        if let Some(&i) = self.by_start.get(&start) {
            return Some(std::mem::replace(&mut self.slab[i as usize], bio));
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = bio;
                i
            }
            None => {
                self.slab.push(bio);
                (self.slab.len() - 1) as u32
            }
        };
        self.by_start.insert(start, i);
        None
    }

    /// The bio whose range contains `sector`.
    pub fn containing(&mut self, sector: u64) -> Option<(u64, &mut Bio)> {
        let (&start, &i) = self.by_start.range(..=sector).next_back()?;
        let bio = &mut self.slab[i as usize];
        (sector < bio.end).then_some((start, bio))
    }

    /// The bio that ends exactly at `sector` (a back merge's neighbour).
    pub fn ending_at(&mut self, sector: u64) -> Option<&mut Bio> {
        let (_, &i) = self.by_start.range(..sector).next_back()?;
        let bio = &mut self.slab[i as usize];
        (bio.end == sector).then_some(bio)
    }

    /// The bio starting at `sector`.
    pub fn starting_at(&mut self, sector: u64) -> Option<&mut Bio> {
        let &i = self.by_start.get(&sector)?;
        Some(&mut self.slab[i as usize])
    }

    /// Fills [`Self::hits`] with every bio lying wholly inside `[start, end)`, in sector
    /// order; returns how many.
    pub fn collect_covered(&mut self, start: u64, end: u64) -> usize {
        self.hits.clear();
        for (&s, &i) in self.by_start.range(start..end) {
            if self.slab[i as usize].end <= end {
                self.hits.push((s, i));
            }
        }
        self.hits.len()
    }

    /// The bio in slot `i` (from [`Self::hits`]).
    pub fn slot_mut(&mut self, i: u32) -> &mut Bio {
        &mut self.slab[i as usize]
    }

    /// Removes the bio starting at `start`.
    pub fn remove(&mut self, start: u64) -> Option<Bio> {
        let i = self.by_start.remove(&start)?;
        self.free.push(i);
        Some(self.slab[i as usize])
    }

    /// Bios still in flight.
    pub fn len(&self) -> usize {
        self.by_start.len()
    }
}
