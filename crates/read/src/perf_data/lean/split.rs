//! Cutting the data section into segments that two walker threads read at once.
//!
//! Records can only be found by walking from the start, so a cut is a guess: the byte
//! pattern of a `FINISHED_ROUND` record (`44 00 00 00 | 00 00 | 08 00`: type 68, misc 0,
//! size 8) about every [`SEGMENT`] bytes, followed by a chain of plausible record headers.
//! The guess is checked when the walker of the segment before reaches it: it must land on
//! the cut exactly (a record straddling it is a bail-out, so a wrong guess can only send
//! the file to the general reader, never change the output).

/// Target segment length.
pub const SEGMENT: u64 = 16 << 20;
/// Little-endian header of a FINISHED_ROUND record.
const ROUND: [u8; 8] = [68, 0, 0, 0, 0, 0, 8, 0];
/// Record headers checked after a candidate cut.
const CHAIN: usize = 32;

/// `(start, end)` file offsets of the segments of about `seg` bytes of the data section
/// `data` (mapped at file offset `base`): one segment when no cut is found. `unmap(from,
/// to)` is called on each stretch searched (file offsets), to unmap what the search mapped.
pub fn segments(
    data: &[u8],
    base: u64,
    seg: u64,
    mut unmap: impl FnMut(u64, u64),
) -> Vec<(u64, u64)> {
    let len = data.len();
    let seg = usize::try_from(seg).unwrap_or(usize::MAX).max(64);
    let mut cuts = vec![0usize];
    let mut from = seg;
    while from.saturating_add(seg / 2) < len {
        let window = &data[from..len.min(from.saturating_add(seg))];
        let mut at = 0;
        let mut found = None;
        while let Some(i) = memchr::memmem::find(&window[at..], &ROUND) {
            let cut = from + at + i + ROUND.len();
            if plausible(data, cut) {
                found = Some(cut);
                break;
            }
            at += i + 1;
        }
        let searched = found.unwrap_or(from + window.len()) + 4096;
        unmap(base + from as u64, base + searched.min(len) as u64);
        match found {
            Some(cut) if cut + seg / 2 < len => {
                cuts.push(cut);
                from = cut.saturating_add(seg);
            }
            Some(_) => break,
            None => from = from.saturating_add(seg),
        }
    }
    let mut out = Vec::with_capacity(cuts.len());
    for (i, &c) in cuts.iter().enumerate() {
        let end = cuts.get(i + 1).copied().unwrap_or(len);
        out.push((base + c as u64, base + end as u64));
    }
    out
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
        let segs = segments(&data, 1000, SEGMENT, |_, _| {});
        assert!(segs.len() >= 2, "{segs:?}");
        assert_eq!(segs[0].0, 1000);
        assert_eq!(segs.last().unwrap().1, 1000 + data.len() as u64);
        for w in segs.windows(2) {
            assert_eq!(w[0].1, w[1].0);
            let cut = (w[1].0 - 1000) as usize;
            assert_eq!(&data[cut - 8..cut], &ROUND);
        }
        // No round pattern: one segment.
        assert_eq!(
            segments(&vec![1u8; 80 << 20], 0, SEGMENT, |_, _| {}),
            vec![(0, 80 << 20)]
        );
    }
}
