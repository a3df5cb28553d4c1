//! `sched_switch.prev_state` as the text tools print it, decoded to [`PrevState`].
//!
//! Three printed forms exist (formats.md §6):
//!
//! * kernel letters (`R`, `R+`, `S`, `D|K`, `I`, …) from the kernel's own `print fmt`
//!   (ftrace text, `perf script`, `trace-cmd report -N`): [`PrevState::parse`].
//! * a raw decimal number (`trace-cmd report -R`: `prev_state=1`): decoded with the shared
//!   per-kernel table ([`PrevStateTable::for_kernel_release`]); text gives no `print fmt`,
//!   and `trace-cmd report` text no release either, so that is the ≥ 4.14 table
//!   (`S D T t X Z P I` = 0x01…0x80, `+` = 0x100) unless a header named an older kernel.
//! * trace-cmd's `sched_switch` plugin letters: libtraceevent writes bit *i* of the raw
//!   value as the *i*-th letter of the fixed string `SDTtZXxW` (a pre-4.14 table) and drops
//!   the preemption bit, so on a modern kernel it prints `Z` for dead (0x10), `X` for zombie
//!   (0x20), `x` for parked (0x40), `W` for an idle kthread (0x80), and `R` for `R+`. The
//!   letters are turned back into the raw value and decoded with the table like `-R`
//!   numbers; the preemption mark is lost for good.

use stallscope_model::time::parse_u64;
use stallscope_model::{KernelStateEncoding, PrevState};

use crate::tracefs_format::PrevStateTable;

/// libtraceevent `plugin_sched_switch.c` letter order (bit *i* → letter *i*).
const PLUGIN_LETTERS: &[u8; 8] = b"SDTtZXxW";

/// The raw value behind trace-cmd plugin letters (`S`, `D|W`, `R`); `None` if a letter is
/// not in the plugin's table.
pub(crate) fn plugin_letters_to_raw(text: &[u8]) -> Option<u64> {
    if text == b"R" {
        return Some(0);
    }
    let mut raw = 0u64;
    for part in text.split(|&b| b == b'|') {
        let [letter] = part else { return None };
        let i = PLUGIN_LETTERS.iter().position(|l| l == letter)?;
        raw |= 1 << i;
    }
    Some(raw)
}

/// Decodes trace-cmd plugin letters through `table`.
pub(crate) fn decode_plugin_letters(text: &[u8], table: &PrevStateTable) -> Option<PrevState> {
    plugin_letters_to_raw(text).map(|raw| table.decode(raw))
}

/// A raw `prev_state` number as the tools print it: decimal (`trace-cmd report -R` of most
/// traces) or `0x` hex (what trace-cmd 3.1 prints for a 32-bit kernel's `long`).
pub(crate) fn parse_raw(text: &[u8]) -> Option<u64> {
    if let Some(hex) = text.strip_prefix(b"0x") {
        if hex.is_empty() || hex.len() > 16 || !hex.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        return u64::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok();
    }
    if !text.is_empty() && text.iter().all(u8::is_ascii_digit) {
        return parse_u64(text);
    }
    None
}

/// Decodes a printed kernel-letter state (`R+`, `S`, `D|K`) or a raw number (via `table`).
pub(crate) fn decode_printed(text: &[u8], table: &PrevStateTable) -> Option<PrevState> {
    if let Some(raw) = parse_raw(text) {
        return Some(table.decode(raw));
    }
    PrevState::parse(std::str::from_utf8(text).ok()?)
}

/// The raw `prev_state=` numbers in `text` (at most `limit`).
pub(crate) fn raw_values_in(text: &[u8], limit: usize) -> Vec<u64> {
    memchr::memmem::find_iter(text, b"prev_state=")
        .filter_map(|at| {
            let v = &text[at + b"prev_state=".len()..];
            let end = v
                .iter()
                .position(|b| !(b.is_ascii_hexdigit() || *b == b'x'))
                .unwrap_or(v.len());
            parse_raw(&v[..end])
        })
        .take(limit)
        .collect()
}

/// The encoding of raw `prev_state` numbers written by a kernel whose release the text does
/// not name, judged from the values themselves, with the reason; `None` when they fit the
/// ≥ 4.14 encoding (then assumed).
///
/// ≥ 4.15 writes one state bit ≤ 0x80 and 0x100 for a preemption; 4.14.0 the state's index
/// (1…8) and 0x1000. So a value with bits between 0x200 and 0x800, two or more bits above 8,
/// or any value above 8 in a text that also has 0x1000, comes from an older kernel: 4.8–4.13
/// when 0x1000 (their preemption) appears, 4.2–4.7 when 0x800 does (theirs), ≤ 4.1 when
/// 0x400 appears without 0x2 (its preemption; later kernels' 0x400, TASK_NOLOAD, comes only
/// with TASK_UNINTERRUPTIBLE), else 4.8–4.13 (whose letters up to 0x400 are those of 4.2–4.7).
pub(crate) fn guess_old_encoding(values: &[u64]) -> Option<(KernelStateEncoding, String)> {
    let has_4096 = values.iter().any(|&v| v & 0x1000 != 0);
    let tell = values.iter().copied().find(|&v| {
        let p = v & !(0x100 | 0x1000);
        p & 0xe00 != 0 || (p > 8 && p.count_ones() >= 2) || (has_4096 && p > 8)
    })?;
    // 0x400 is TASK_NOLOAD from 4.2 on, which a switched-out task has only inside TASK_IDLE
    // (with TASK_UNINTERRUPTIBLE, 0x2); without 0x2 it is ≤ 4.1's preemption
    // (TASK_STATE_MAX = 1024)
    let preempted_1024 = values.iter().any(|&v| v & 0x400 != 0 && v & 0x2 == 0);
    let (enc, table) = if has_4096 {
        (KernelStateEncoding::State48, "4.8–4.13")
    } else if values.iter().any(|&v| v & 0x800 != 0) {
        (KernelStateEncoding::State42, "4.2–4.7")
    } else if preempted_1024 {
        (KernelStateEncoding::State31, "≤ 4.1")
    } else {
        (KernelStateEncoding::State48, "4.8–4.13")
    };
    Some((
        enc,
        format!(
            "the {table} table: prev_state={tell}{} cannot come from a 4.14+ kernel",
            if has_4096 && tell & 0x1000 == 0 {
                " beside 4096"
            } else {
                ""
            }
        ),
    ))
}

/// Bytes of a text file scanned for the values that tell an old kernel when its head had
/// none.
const WHOLE_FILE_SCAN: u64 = 256 << 20;

/// [`guess_old_encoding`] over the raw `prev_state` values of the whole file at `path` (up to
/// [`WHOLE_FILE_SCAN`] bytes, decompressed), for a text whose head fits the ≥ 4.14 table: the
/// value that tells an older kernel (its preemption bit) may first come thousands of lines
/// in. `None` for a stream (it cannot be read twice) or when every value fits.
pub(crate) fn guess_old_encoding_in_file(path: &str) -> Option<(KernelStateEncoding, String)> {
    use std::io::Read;
    if crate::is_stream(path) {
        return None;
    }
    let mut reader = crate::Input::open(path).ok()?.into_reader();
    let mut seen: std::collections::BTreeSet<u64> = std::collections::BTreeSet::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut carry: Vec<u8> = Vec::new();
    let mut scanned = 0u64;
    while scanned < WHOLE_FILE_SCAN {
        let n = match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        scanned += n as u64;
        // whole lines only: the part after the last newline waits for the next read
        carry.extend_from_slice(&buf[..n]);
        let cut = carry.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let rest = carry.split_off(cut);
        let before = seen.len();
        seen.extend(raw_values_in(&carry, usize::MAX));
        carry = rest;
        if seen.len() > before {
            let values: Vec<u64> = seen.iter().copied().collect();
            if let Some(g) = guess_old_encoding(&values) {
                return Some(g);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modern() -> PrevStateTable {
        PrevStateTable::for_kernel_release(None)
    }

    fn s(p: Option<PrevState>) -> String {
        p.map_or_else(|| "none".into(), |p| p.to_string())
    }

    #[test]
    fn raw_numbers_use_the_4_14_table() {
        let t = modern();
        let cases = [
            ("0", "R"),
            ("256", "R+"),
            ("1", "S"),
            ("2", "D"),
            ("16", "X"),
            ("32", "Z"),
            ("64", "P"),
            ("128", "I"),
            ("257", "S+"),
        ];
        for (raw, text) in cases {
            assert_eq!(s(decode_printed(raw.as_bytes(), &t)), text, "{raw}");
        }
    }

    #[test]
    fn plugin_letters_map_back_to_their_bits() {
        // Pairs seen in samples/tracecmd: report_R_raw.txt value → report_default.txt letter.
        for (raw, letter) in [(0u64, "R"), (1, "S"), (2, "D"), (32, "X"), (128, "W")] {
            assert_eq!(
                plugin_letters_to_raw(letter.as_bytes()),
                Some(raw),
                "{letter}"
            );
        }
        let t = modern();
        assert_eq!(s(decode_plugin_letters(b"W", &t)), "I");
        assert_eq!(s(decode_plugin_letters(b"Z", &t)), "X");
        assert_eq!(s(decode_plugin_letters(b"X", &t)), "Z");
        assert_eq!(s(decode_plugin_letters(b"x", &t)), "P");
        assert_eq!(s(decode_plugin_letters(b"S|D", &t)), "S|D");
        assert_eq!(decode_plugin_letters(b"Q", &t), None);
        assert_eq!(decode_plugin_letters(b"R+", &t), None);
        // On a 4.13 kernel the same letters mean what they say (W is then bit 0x80 = K).
        let old = PrevStateTable::for_kernel_release(Some("4.9.0"));
        assert_eq!(s(decode_plugin_letters(b"Z", &old)), "Z");
        assert_eq!(s(decode_plugin_letters(b"W", &old)), "K");
    }

    #[test]
    fn hex_numbers_and_the_4_14_0_preemption() {
        let t = modern();
        // trace-cmd 3.1 -R of a 32-bit 4.14 kernel: hex, preemption = TASK_STATE_MAX
        assert_eq!(s(decode_printed(b"0x1000", &t)), "R+");
        assert_eq!(s(decode_printed(b"0x1", &t)), "S");
        assert_eq!(s(decode_printed(b"0x8", &t)), "t");
        assert_eq!(decode_printed(b"0x", &t), None);
        assert_eq!(decode_printed(b"0xZ", &t), None);
    }

    #[test]
    fn old_encodings_are_told_by_values_a_4_14_kernel_cannot_write() {
        use KernelStateEncoding::*;
        let guess = |v: &[u64]| guess_old_encoding(v).map(|(e, _)| e);
        // fits 4.15+ (single bits, 0x100) and 4.14.0 (indexes, 0x1000): assumed modern
        assert_eq!(guess(&[0, 1, 2, 64, 128, 256]), None);
        assert_eq!(guess(&[0, 1, 5, 6, 8, 0x1000]), None);
        // a lisa-like 4.8–4.13 text: TASK_DEAD (64) beside a 4096 preemption
        assert_eq!(guess(&[0, 1, 4096, 64]), Some(State48));
        // D|K = 130: two bits above 8
        assert_eq!(guess(&[0, 1, 130]), Some(State48));
        // 4.2–4.7 preemption 2048
        assert_eq!(guess(&[1, 2048, 512]), Some(State42));
        // ≤ 4.1 (3.x) preemption 1024, which the 4.8 table read as N (issue #29); TASK_IDLE
        // (1026 = D|N) of 4.2+ is no preemption
        assert_eq!(guess(&[0, 1, 1024, 64]), Some(State31));
        assert_eq!(guess(&[0, 1, 1026]), Some(State48));
        let v31 = PrevStateTable::for_encoding(State31, "t".into());
        assert_eq!(s(decode_printed(b"1024", &v31)), "R+");
        assert_eq!(s(decode_printed(b"1", &v31)), "S");
        let (_, why) = guess_old_encoding(&[0, 4096, 64]).unwrap();
        assert!(why.contains("prev_state=64 beside 4096"), "{why}");
        // decoded with the guessed table: exits are x, D|K stays D|K, 4096 is +
        let old = PrevStateTable::for_encoding(State48, "t".into());
        assert_eq!(s(decode_printed(b"64", &old)), "x");
        assert_eq!(s(decode_printed(b"130", &old)), "D|K");
        assert_eq!(s(decode_printed(b"4096", &old)), "R+");
        assert_eq!(
            raw_values_in(b"a prev_state=0x1000 b prev_state=12 prev_state=S", 10),
            [0x1000, 12]
        );
    }

    #[test]
    fn printed_forms() {
        let t = modern();
        assert_eq!(s(decode_printed(b"R+", &t)), "R+");
        assert_eq!(s(decode_printed(b"D|K", &t)), "D|K");
        assert_eq!(decode_printed(b"==>", &t), None);
    }
}
