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
use stallscope_model::PrevState;

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

/// Decodes a printed kernel-letter state (`R+`, `S`, `D|K`) or a raw number (via `table`).
pub(crate) fn decode_printed(text: &[u8], table: &PrevStateTable) -> Option<PrevState> {
    if !text.is_empty() && text.iter().all(u8::is_ascii_digit) {
        return parse_u64(text).map(|raw| table.decode(raw));
    }
    PrevState::parse(std::str::from_utf8(text).ok()?)
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
    fn printed_forms() {
        let t = modern();
        assert_eq!(s(decode_printed(b"R+", &t)), "R+");
        assert_eq!(s(decode_printed(b"D|K", &t)), "D|K");
        assert_eq!(decode_printed(b"==>", &t), None);
    }
}
