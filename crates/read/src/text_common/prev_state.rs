//! `sched_switch.prev_state` as the text tools print it, decoded to [`PrevState`].
//!
//! Three printed forms exist (formats.md §6):
//!
//! * kernel letters (`R`, `R+`, `S`, `D|K`, `I`, …) from the kernel's own `print fmt`
//!   (ftrace text, `perf script`, `trace-cmd report -N`): [`PrevState::parse`].
//! * a raw decimal number (`trace-cmd report -R`: `prev_state=1`): decoded with the
//!   ≥ 4.14 `TASK_REPORT` table, the only one that applies to kernels of the last years; the
//!   text does not say which kernel wrote it:
//!
//!   | bit  | 0x01 | 0x02 | 0x04 | 0x08 | 0x10 | 0x20 | 0x40 | 0x80 | 0x100 |
//!   |------|------|------|------|------|------|------|------|------|-------|
//!   | text | S    | D    | T    | t    | X    | Z    | P    | I    | `+` (preempted) |
//!
//! * trace-cmd's `sched_switch` plugin letters: libtraceevent writes bit *i* of the raw
//!   value as the *i*-th letter of the fixed string `SDTtZXxW` (a pre-4.14 table) and drops
//!   bit 0x100, so on a modern kernel it prints `Z` for dead (0x10), `X` for zombie (0x20),
//!   `x` for parked (0x40), `W` for an idle kthread (0x80), and `R` for `R+`. The letters are
//!   mapped back to their bits and decoded with the table above; the preemption mark is
//!   lost for good.

use stallscope_model::PrevState;

/// Letters of the ≥ 4.14 table, bit *i* = `1 << i`.
const REPORT_BITS: [u16; 8] = [
    PrevState::S,
    PrevState::D,
    PrevState::T,
    PrevState::TRACED,
    PrevState::X,
    PrevState::Z,
    PrevState::P,
    PrevState::I,
];

/// `TASK_REPORT_MAX`: the "preempted" bit.
const PREEMPTED_BIT: u64 = 0x100;

/// libtraceevent `plugin_sched_switch.c` letter order (bit *i* → letter *i*).
const PLUGIN_LETTERS: &[u8; 8] = b"SDTtZXxW";

/// Decodes a raw `prev_state` number with the ≥ 4.14 table.
pub(crate) fn decode_raw(raw: u64) -> PrevState {
    let mut bits = 0u16;
    for (i, bit) in REPORT_BITS.iter().enumerate() {
        if raw & (1 << i) != 0 {
            bits |= bit;
        }
    }
    if raw & PREEMPTED_BIT != 0 {
        bits |= PrevState::PREEMPTED;
    }
    if raw & !(PREEMPTED_BIT | 0xff) != 0 {
        bits |= PrevState::UNKNOWN;
    }
    PrevState::from_bits(bits)
}

/// Decodes trace-cmd plugin letters (`S`, `D|W`, `R`); `None` if a letter is not in the
/// plugin's table.
pub(crate) fn decode_plugin_letters(text: &[u8]) -> Option<PrevState> {
    if text == b"R" {
        return Some(PrevState::RUNNING);
    }
    let mut raw = 0u64;
    for part in text.split(|&b| b == b'|') {
        let [letter] = part else { return None };
        let i = PLUGIN_LETTERS.iter().position(|l| l == letter)?;
        raw |= 1 << i;
    }
    Some(decode_raw(raw))
}

/// Decodes a printed kernel-letter state (`R+`, `S`, `D|K`) or a raw number.
pub(crate) fn decode_printed(text: &[u8]) -> Option<PrevState> {
    if !text.is_empty() && text.iter().all(u8::is_ascii_digit) {
        return stallscope_model::time::parse_u64(text).map(decode_raw);
    }
    PrevState::parse(std::str::from_utf8(text).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(p: PrevState) -> String {
        p.to_string()
    }

    #[test]
    fn raw_numbers_use_the_4_14_table() {
        let cases = [
            (0, "R"),
            (0x100, "R+"),
            (1, "S"),
            (2, "D"),
            (0x10, "X"),
            (0x20, "Z"),
            (0x40, "P"),
            (0x80, "I"),
        ];
        for (raw, text) in cases {
            assert_eq!(s(decode_raw(raw)), text, "{raw:#x}");
        }
        assert_eq!(s(decode_raw(0x101)), "S+");
        assert_eq!(s(decode_raw(0x400)), "?");
    }

    #[test]
    fn plugin_letters_map_back_to_their_bits() {
        // Pairs seen in samples/tracecmd: report_R_raw.txt value → report_default.txt letter.
        for (raw, letter) in [(0u64, "R"), (1, "S"), (2, "D"), (32, "X"), (128, "W")] {
            assert_eq!(
                decode_plugin_letters(letter.as_bytes()),
                Some(decode_raw(raw)),
                "{letter}"
            );
        }
        assert_eq!(s(decode_plugin_letters(b"W").unwrap_or_default()), "I");
        assert_eq!(s(decode_plugin_letters(b"Z").unwrap_or_default()), "X");
        assert_eq!(s(decode_plugin_letters(b"x").unwrap_or_default()), "P");
        assert_eq!(s(decode_plugin_letters(b"S|D").unwrap_or_default()), "S|D");
        assert_eq!(decode_plugin_letters(b"Q"), None);
        assert_eq!(decode_plugin_letters(b"R+"), None);
    }

    #[test]
    fn printed_forms() {
        assert_eq!(decode_printed(b"R+").map(s).as_deref(), Some("R+"));
        assert_eq!(decode_printed(b"32").map(s).as_deref(), Some("Z"));
        assert_eq!(decode_printed(b"==>"), None);
    }
}
