//! Cutting the data section into segments that two walker threads read at once.
//!
//! Records can only be found by walking from the start, so a cut is a guess: the byte
//! pattern of a `FINISHED_ROUND` record (`44 00 00 00 | 00 00 | 08 00`: type 68, misc 0,
//! size 8) followed by a chain of plausible record headers. The guess is checked when the
//! walker of the segment before reaches it: it must land on the cut exactly (a record
//! straddling it is a bail-out, so a wrong guess can only send the file to the general
//! reader, never change the output).
//!
//! [`Cuts`] places one candidate per grid cell of [`SEGMENT`] bytes (cell k: the first
//! plausible round end in `k·SEGMENT .. (k+1)·SEGMENT`) so that each cut is found on its
//! own, by whichever walker needs it first: the search (on average half the distance
//! between two round ends, over 1 MiB on the bench trace) runs on the walker threads
//! instead of delaying their start. Segment k runs from cut k to the next cut found (a
//! cell without a round end gives an empty segment):
//!
//! ```text
//! data   |0 ........ |S ....R.... |2S ......... |3S ..R...... |4S ...
//! cuts   0               ^ cut 1     (none: cell 2 empty)  ^ cut 3
//! segs   [ 0 .......... )[ 1 ...................... )[2)[ 3 ...... )
//! ```

use std::sync::{Arc, OnceLock};

use super::super::stream::DataMap;

/// Target segment length.
pub const SEGMENT: u64 = 16 << 20;
/// Little-endian header of a FINISHED_ROUND record.
const ROUND: [u8; 8] = [68, 0, 0, 0, 0, 0, 8, 0];
/// Record headers checked after a candidate cut.
const CHAIN: usize = 32;

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
            first_round_end(data, from, self.seg)
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
fn plausible(data: &[u8], mut at: usize) -> bool {
    for _ in 0..CHAIN {
        let (Some(t), Some(s)) = (data.get(at..at + 4), data.get(at + 6..at + 8)) else {
            return at == data.len();
        };
        let rtype = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
        let size = usize::from(u16::from_le_bytes([s[0], s[1]]));
        if size < 8 || !matches!(rtype, 1..=21 | 64..=83) {
            return false;
        }
        at += size;
    }
    at <= data.len()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn cuts_follow_round_ends_and_cover_the_data() {
        // Records: 8-byte rounds between 40-byte samples, ~100 MiB.
        let mut data = Vec::new();
        let mut sample = vec![0u8; 40];
        sample[0] = 9;
        sample[6] = 40;
        while data.len() < 100 << 20 {
            for _ in 0..1000 {
                data.extend_from_slice(&sample);
            }
            data.extend_from_slice(&ROUND);
        }
        let cuts = Cuts::new(mapped(&data, 1000, "rounds"), SEGMENT);
        let segs: Vec<(u64, u64)> = (0..cuts.count()).map(|i| cuts.segment(i)).collect();
        assert!(segs.len() >= 2, "{segs:?}");
        assert_eq!(segs[0].0, 1000);
        assert_eq!(segs.last().unwrap().1, 1000 + data.len() as u64);
        for (i, w) in segs.windows(2).enumerate() {
            assert_eq!(w[0].1, w[1].0);
            let cut = (w[1].0 - 1000) as usize;
            assert_eq!(&data[cut - 8..cut], &ROUND);
            // The first round end in its cell.
            let cell = (i + 1) * SEGMENT as usize;
            assert!(cut >= cell + 8 && cut - 8 < cell + 40_008, "{cut} {cell}");
        }
        // Asked in any order, from two threads: the same segments.
        let cuts = Arc::new(Cuts::new(mapped(&data, 1000, "rounds2"), SEGMENT));
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
        // No round pattern: every cell after the first is empty.
        let flat = vec![1u8; 80 << 20];
        let cuts = Cuts::new(mapped(&flat, 0, "flat"), SEGMENT);
        assert_eq!(cuts.count(), 5);
        assert_eq!(cuts.segment(0), (0, 80 << 20));
        for i in 1..cuts.count() {
            let (s, e) = cuts.segment(i);
            assert_eq!(s, e);
        }
        // A round pattern whose following headers are implausible is no cut.
        let mut fake = vec![1u8; 40 << 20];
        fake[(17 << 20)..(17 << 20) + 8].copy_from_slice(&ROUND);
        let cuts = Cuts::new(mapped(&fake, 0, "fake"), SEGMENT);
        assert_eq!(cuts.segment(0), (0, 40 << 20));
        assert_eq!(cuts.segment(1).0, cuts.segment(1).1);
    }
}
