//! Cutting the data section into segments that two walker threads read at once.
//!
//! Records can only be found by walking from the start, so a cut is a guess, checked when
//! the walker of the segment before reaches it: it must land on the cut exactly (a record
//! straddling it is a bail-out, so a wrong guess can only send the file to the general
//! reader, never change the output).
//!
//! The guess is the first offset after the cell start, 8-byte aligned in the data section
//! (perf pads every record to 8 bytes), from which [`CHAIN`] record headers in a row have
//! known types and sizes that are multiples of 8: inside a record that is as good as
//! impossible, and it is found within a record or two, reading a few KiB. A cut may fall
//! inside a round: the segment's last piece and the next segment's first piece of that
//! round are each sorted by their walker and merged by the orderer at the round end, which
//! is the same stable order. Where no such offset turns up within [`ALIGNED_SEARCH`] bytes
//! (a file whose records are not padded), the cut falls back to the end of the first
//! plausible `FINISHED_ROUND` record (`44 00 00 00 | 00 00 | 08 00`: type 68, misc 0,
//! size 8), which can be megabytes away (rounds on the bench trace are up to 4 MiB).
//!
//! [`Cuts`] places one candidate per grid cell of [`SEGMENT`] bytes (cell k: the first
//! cut found in `k·SEGMENT .. (k+1)·SEGMENT`) so that each cut is found on its own, by
//! whichever walker needs it first. Segment k runs from cut k to the next cut found (a
//! cell without any gives an empty segment):
//!
//! ```text
//! data   |0 ........ |S R....... |2S ......... |3S R........ |4S ...
//! cuts   0            ^ cut 1     (none: cell 2 empty) ^ cut 3
//! segs   [ 0 ......... )[ 1 ........................ )[2)[ 3 ...... )
//! ```

use std::sync::{Arc, OnceLock};

use super::super::stream::DataMap;

/// Target segment length (measured on the bench trace, wall time with real-time priority
/// under load: 16 MiB 130.3 ms, 8 MiB 129.4, 6 MiB 130.7, 4 MiB 131.8; peak memory
/// 37, 31, 29, 28 MiB: smaller segments hold fewer pages and entries at once).
pub const SEGMENT: u64 = 8 << 20;
/// Little-endian header of a FINISHED_ROUND record.
const ROUND: [u8; 8] = [68, 0, 0, 0, 0, 0, 8, 0];
/// Record headers checked after a candidate cut.
const CHAIN: usize = 32;
/// How far into a cell aligned record boundaries are looked for before falling back to
/// round ends.
const ALIGNED_SEARCH: usize = 64 << 10;

/// The cuts of one data section, found lazily (see the module docs).
pub struct Cuts {
    map: Arc<DataMap>,
    seg: usize,
    /// Cut k + 1 (offset in the data section), once searched.
    cuts: Vec<OnceLock<Option<usize>>>,
}

impl Cuts {
    /// The grid of `map`'s data section in cells of `seg` bytes (a last cell shorter than
    /// half a segment is not cut off).
    pub fn new(map: Arc<DataMap>, seg: u64) -> Cuts {
        let len = map.map.len();
        let seg = usize::try_from(seg).unwrap_or(usize::MAX).max(64);
        let mut n = 0usize;
        while (n + 1)
            .checked_mul(seg)
            .and_then(|o| o.checked_add(seg / 2))
            .is_some_and(|o| o < len)
        {
            n += 1;
        }
        Cuts {
            map,
            seg,
            cuts: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Segments (some may be empty).
    pub fn count(&self) -> usize {
        self.cuts.len() + 1
    }

    /// Cut `k` (offset in the data section; 0 for k = 0), searched on first use.
    fn cut(&self, k: usize) -> Option<usize> {
        let Some(k1) = k.checked_sub(1) else {
            return Some(0);
        };
        *self.cuts.get(k1)?.get_or_init(|| {
            let data = &self.map.map[..];
            let from = k.saturating_mul(self.seg).min(data.len());
            // The pages the search maps are the tail of the segment before the cut (and
            // the first page after it): they stay mapped for its walker, which drops them
            // as it passes (at most about a segment's worth per cut in flight).
            first_aligned_boundary(data, from, self.seg)
                .or_else(|| first_round_end(data, from, self.seg))
        })
    }

    /// `(start, end)` file offsets of segment `i` (`start == end`: empty).
    pub fn segment(&self, i: usize) -> (u64, u64) {
        let base = self.map.base;
        let len = self.map.map.len();
        let Some(start) = self.cut(i) else {
            return (base + len as u64, base + len as u64);
        };
        let end = (i + 1..self.count())
            .find_map(|k| self.cut(k))
            .unwrap_or(len);
        (base + start as u64, base + end as u64)
    }
}

/// The first offset in `data[from..from + min(seg, ALIGNED_SEARCH)]`, a multiple of 8,
/// from which [`CHAIN`] headers look like padded records ([`plausible_padded`]).
fn first_aligned_boundary(data: &[u8], from: usize, seg: usize) -> Option<usize> {
    let start = from.checked_next_multiple_of(8)?;
    let stop = data.len().min(from.saturating_add(seg.min(ALIGNED_SEARCH)));
    (start..stop)
        .step_by(8)
        .find(|&at| plausible_padded(data, at))
}

/// True when [`CHAIN`] record headers from `at` have known types and sizes that are
/// non-zero multiples of 8.
fn plausible_padded(data: &[u8], at: usize) -> bool {
    chain_ok(data, at, |size| size >= 8 && size % 8 == 0)
}

/// The end of the first plausible FINISHED_ROUND record starting in `data[from..from +
/// seg]`.
fn first_round_end(data: &[u8], from: usize, seg: usize) -> Option<usize> {
    let window = data.get(from..data.len().min(from.saturating_add(seg)))?;
    let mut at = 0;
    while let Some(i) = window
        .get(at..)
        .and_then(|w| memchr::memmem::find(w, &ROUND))
    {
        let cut = from + at + i + ROUND.len();
        if plausible(data, cut) {
            return Some(cut);
        }
        at += i + 1;
    }
    None
}

/// True when [`CHAIN`] record headers from `at` have sane sizes and known types.
fn plausible(data: &[u8], at: usize) -> bool {
    chain_ok(data, at, |size| size >= 8)
}

/// True when [`CHAIN`] record headers from `at` (or those up to the end of `data`) have
/// known types and sizes that `size_ok` accepts.
fn chain_ok(data: &[u8], mut at: usize, size_ok: impl Fn(usize) -> bool) -> bool {
    for _ in 0..CHAIN {
        let (Some(t), Some(s)) = (data.get(at..at + 4), data.get(at + 6..at + 8)) else {
            return at == data.len();
        };
        let rtype = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
        let size = usize::from(u16::from_le_bytes([s[0], s[1]]));
        if !size_ok(size) || !matches!(rtype, 1..=21 | 64..=83) {
            return false;
        }
        at += size;
    }
    at <= data.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cell size of these tests (independent of [`SEGMENT`]).
    const CELL: u64 = 16 << 20;

    /// `data` behind `pad` bytes in a temporary file, mapped from `pad`.
    fn mapped(data: &[u8], pad: usize, name: &str) -> Arc<DataMap> {
        let dir = std::env::temp_dir().join(format!("stallscope-split-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        let mut bytes = vec![0xAAu8; pad];
        bytes.extend_from_slice(data);
        std::fs::write(&path, &bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let map = DataMap::new(&file, pad as u64, data.len() as u64).unwrap();
        std::fs::remove_file(&path).unwrap();
        Arc::new(map)
    }

    /// Records of about 100 MiB: `sample_len`-byte samples, 1000 between two rounds, and
    /// the offsets where records start.
    fn records(sample_len: u16) -> (Vec<u8>, Vec<usize>) {
        let mut data = Vec::new();
        let mut starts = Vec::new();
        let mut sample = vec![0u8; usize::from(sample_len)];
        sample[0] = 9;
        sample[6..8].copy_from_slice(&sample_len.to_le_bytes());
        while data.len() < 100 << 20 {
            for _ in 0..1000 {
                starts.push(data.len());
                data.extend_from_slice(&sample);
            }
            starts.push(data.len());
            data.extend_from_slice(&ROUND);
        }
        (data, starts)
    }

    /// The segments of `data` (mapped behind 1000 bytes), checked to cover it end to end.
    fn segments(data: &[u8], name: &str) -> Vec<(u64, u64)> {
        let cuts = Cuts::new(mapped(data, 1000, name), CELL);
        let segs: Vec<(u64, u64)> = (0..cuts.count()).map(|i| cuts.segment(i)).collect();
        assert!(segs.len() >= 2, "{segs:?}");
        assert_eq!(segs[0].0, 1000);
        assert_eq!(segs.last().unwrap().1, 1000 + data.len() as u64);
        for w in segs.windows(2) {
            assert_eq!(w[0].1, w[1].0);
        }
        segs
    }

    #[test]
    fn cuts_of_padded_records_are_the_first_record_start_in_their_cell() {
        let (data, starts) = records(40);
        let segs = segments(&data, "padded");
        for (i, s) in segs.iter().enumerate().skip(1) {
            let cut = (s.0 - 1000) as usize;
            let cell = i * CELL as usize;
            let first = starts[starts.partition_point(|&o| o < cell)];
            // Not a round end (those are 40 KB apart): a cut inside a round.
            assert_eq!(cut, first, "segment {i}");
        }
        // Asked in any order, from two threads: the same segments.
        let cuts = Arc::new(Cuts::new(mapped(&data, 1000, "padded2"), CELL));
        let other = cuts.clone();
        let t = std::thread::spawn(move || {
            (0..other.count())
                .rev()
                .map(|i| other.segment(i))
                .collect::<Vec<_>>()
        });
        let mut back = t.join().unwrap();
        back.reverse();
        assert_eq!(back, segs);
    }

    #[test]
    fn cuts_of_unpadded_records_follow_round_ends() {
        // 36-byte samples: no chain of sizes that are multiples of 8.
        let (data, starts) = records(36);
        let segs = segments(&data, "unpadded");
        for (i, s) in segs.iter().enumerate().skip(1) {
            let cut = (s.0 - 1000) as usize;
            assert_eq!(&data[cut - 8..cut], &ROUND);
            assert!(starts.binary_search(&cut).is_ok());
            // The first round end in its cell.
            let cell = i * CELL as usize;
            assert!(cut >= cell + 8 && cut - 8 < cell + 36_008, "{cut} {cell}");
        }
    }

    #[test]
    fn data_without_records_is_not_cut() {
        // No plausible header anywhere: every cell after the first is empty.
        let flat = vec![1u8; 80 << 20];
        let cuts = Cuts::new(mapped(&flat, 0, "flat"), CELL);
        assert_eq!(cuts.count(), 5);
        assert_eq!(cuts.segment(0), (0, 80 << 20));
        for i in 1..cuts.count() {
            let (s, e) = cuts.segment(i);
            assert_eq!(s, e);
        }
        // A round pattern whose following headers are implausible is no cut.
        let mut fake = vec![1u8; 40 << 20];
        fake[(17 << 20)..(17 << 20) + 8].copy_from_slice(&ROUND);
        let cuts = Cuts::new(mapped(&fake, 0, "fake"), CELL);
        assert_eq!(cuts.segment(0), (0, 40 << 20));
        assert_eq!(cuts.segment(1).0, cuts.segment(1).1);
    }
}
