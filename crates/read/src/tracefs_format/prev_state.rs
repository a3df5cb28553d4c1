//! [`PrevStateTable`]: how a kernel encodes `sched_switch.prev_state`, read from the trace's
//! own `print fmt` or, when the format has no table, chosen by kernel release
//! (the kernel's `sched_switch` `print fmt`, `include/trace/events/sched.h`).
//!
//! The 6.18 print fmt (masks are macro expansions, evaluated with [`eval_const_expr`]):
//!
//! ```text
//! (REC->prev_state & ((((0x0|0x1|0x2|0x4|0x8|0x10|0x20|0x40) + 1) << 1) - 1))
//!     ? __print_flags(REC->prev_state & (…same mask…), "|", { 0x00000001, "S" }, { 0x00000002, "D" },
//!                     …, { 0x00000080, "I" }) : "R",
//! REC->prev_state & (((0x0|…|0x40) + 1) << 1) ? "+" : ""
//! ```
//!
//! Decoding follows `__print_flags`: with `v = raw & state_mask`, each listed value fully
//! contained in `v` sets its letter and is cleared; bits left over set
//! [`PrevState::UNKNOWN`]; `v == 0` is `R`. `raw & preempt_mask` adds `+`.
//!
//! Fallback tables: ≥ 4.14 (and unknown releases): `S D T t X Z P I` = 0x01…0x80, `+` = 0x100;
//! (4.14.0 also 0x1000); 4.8–4.13: `S D T t Z X x K W P N` = 1…1024, `+` = 4096; 4.2–4.7:
//! the same with `+` = 2048; older: the same without `N`,
//! `+` = 1024.

use stallscope_model::{KernelStateEncoding, PrevState};

use super::const_expr::eval_const_expr;

/// Raw values below this are decoded through a precomputed table.
const CACHED: usize = 1024;

/// A `prev_state` decoding table.
#[derive(Clone, Debug)]
pub struct PrevStateTable {
    state_mask: u64,
    entries: Vec<(u64, u16)>,
    preempt_mask: u64,
    source: String,
    cache: Vec<u16>,
}

impl PartialEq for PrevStateTable {
    fn eq(&self, other: &Self) -> bool {
        self.state_mask == other.state_mask
            && self.entries == other.entries
            && self.preempt_mask == other.preempt_mask
    }
}

impl PrevStateTable {
    fn build(
        state_mask: u64,
        entries: Vec<(u64, u16)>,
        preempt_mask: u64,
        source: String,
    ) -> PrevStateTable {
        let mut t = PrevStateTable {
            state_mask,
            entries,
            preempt_mask,
            source,
            cache: Vec::new(),
        };
        t.cache = (0..CACHED as u64).map(|raw| t.compute(raw)).collect();
        t
    }

    /// The table in a `sched_switch` print fmt; `None` when it has no `__print_flags` over
    /// `prev_state` whose masks and values all evaluate to numbers.
    pub fn from_print_fmt(print_fmt: &str) -> Option<PrevStateTable> {
        let args = split_top_level(print_fmt, ',');
        let mut state = None;
        let mut preempt_mask = 0;
        for arg in &args {
            if let Some(pos) = arg.find("__print_flags") {
                let inner = call_args(&arg[pos + "__print_flags".len()..])?;
                let fargs = split_top_level(inner, ',');
                if fargs.first().is_some_and(|a| a.contains("prev_state")) && state.is_none() {
                    let mask = mask_after_prev_state(fargs[0])?;
                    let mut entries = Vec::new();
                    for e in fargs.iter().skip(2) {
                        let body = e.trim().strip_prefix('{')?.strip_suffix('}')?;
                        let parts = split_top_level(body, ',');
                        let [value, letters] = parts.as_slice() else {
                            return None;
                        };
                        let value = eval_const_expr(value)?;
                        let letters = string_literal(letters)?;
                        entries.push((value, letter_bits(&letters)));
                    }
                    state = Some((mask, entries));
                }
            } else if let Some((cond, rest)) = arg.split_once('?') {
                if cond.contains("prev_state")
                    && string_literal(rest.split(':').next()?) == Some("+".into())
                {
                    preempt_mask = mask_after_prev_state(cond)?;
                }
            }
        }
        let (mask, entries) = state?;
        Some(Self::build(
            mask,
            entries,
            preempt_mask,
            "the trace's sched_switch print fmt".into(),
        ))
    }

    /// The fallback table for kernel `release` (`6.18.44-…`, `4.9.0`); unknown or unparsable
    /// releases get the modern (≥ 4.14) table.
    pub fn for_kernel_release(release: Option<&str>) -> PrevStateTable {
        let encoding = release
            .and_then(KernelStateEncoding::for_release)
            .unwrap_or(KernelStateEncoding::Report414);
        let entries = encoding
            .letters()
            .iter()
            .map(|&(bit, raw)| (raw, bit))
            .collect();
        let source = format!(
            "the built-in table for kernel {}",
            release.unwrap_or("(unknown release)")
        );
        // 4.14 marked a preemption with TASK_STATE_MAX (0x1000), 4.15+ with 0x100; neither
        // value means anything else in this encoding, so both when the release is 4.14 or
        // unknown
        let is_414 =
            release.is_none_or(|r| r == "4.14" || r.starts_with("4.14.") || r.starts_with("4.14-"));
        let preempt = match encoding {
            KernelStateEncoding::Report414 if is_414 => 0x100 | 0x1000,
            e => e.preempted_bit(),
        };
        Self::build(encoding.state_mask(), entries, preempt, source)
    }

    /// The table for a kernel encoding named in data-quality notes as `source`.
    pub fn for_encoding(encoding: KernelStateEncoding, source: String) -> PrevStateTable {
        let mut t = Self::for_kernel_release(None);
        if encoding != KernelStateEncoding::Report414 {
            let entries = encoding
                .letters()
                .iter()
                .map(|&(bit, raw)| (raw, bit))
                .collect();
            t = Self::build(
                encoding.state_mask(),
                entries,
                encoding.preempted_bit(),
                String::new(),
            );
        }
        t.source = source;
        t
    }

    /// Where the table came from (for data-quality notes).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The normalized state of raw value `raw`.
    #[inline]
    pub fn decode(&self, raw: u64) -> PrevState {
        match self.cache.get(raw as usize) {
            Some(&bits) if raw < CACHED as u64 => PrevState::from_bits(bits),
            _ => PrevState::from_bits(self.compute(raw)),
        }
    }

    fn compute(&self, raw: u64) -> u16 {
        let mut bits = 0;
        let mut v = raw & self.state_mask;
        if v != 0 {
            for &(value, letter) in &self.entries {
                if value != 0 && v & value == value {
                    bits |= letter;
                    v &= !value;
                }
            }
            if v != 0 {
                bits |= PrevState::UNKNOWN;
            }
        }
        if raw & self.preempt_mask != 0 {
            bits |= PrevState::PREEMPTED;
        }
        bits
    }
}

/// Normalized bits for a letter string (`"S"`; several letters or unknown ones → UNKNOWN).
fn letter_bits(letters: &str) -> u16 {
    let mut chars = letters.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => PrevState::letter_bit(c).unwrap_or(PrevState::UNKNOWN),
        _ => PrevState::UNKNOWN,
    }
}

/// The mask in `REC->prev_state & MASK` (all bits when there is no `&`).
fn mask_after_prev_state(expr: &str) -> Option<u64> {
    let after = &expr[expr.find("prev_state")? + "prev_state".len()..];
    let after = after.trim_start();
    match after.strip_prefix('&') {
        Some(mask) => eval_const_expr(strip_unbalanced_parens(mask)),
        None if after
            .trim_matches(|c: char| c == ')' || c.is_whitespace())
            .is_empty() =>
        {
            Some(u64::MAX)
        }
        None => None,
    }
}

/// Drops trailing `)` that close parentheses opened before the text (`… & 0xff)` → `… & 0xff`).
fn strip_unbalanced_parens(s: &str) -> &str {
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return &s[..i];
                }
            }
            _ => {}
        }
    }
    s
}

/// The text between the parentheses of a call, `(a, b)` → `a, b`.
fn call_args(s: &str) -> Option<&str> {
    let s = s.trim_start();
    let body = s.strip_prefix('(')?;
    let mut depth = 1i32;
    let mut in_str = false;
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&body[..i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// Splits at `sep` outside parentheses, braces and string literals.
fn split_top_level(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut in_str = false;
    let mut escaped = false;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth -= 1,
            c if c == sep && depth == 0 => {
                out.push(s[start..i].trim());
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out
}

/// The content of a C string literal `"S"` (no escapes needed for state letters).
fn string_literal(s: &str) -> Option<String> {
    let s = s.trim();
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('"')).then(|| inner.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH_FORMAT: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/samples/formats/sched_sched_switch.format"
    );

    fn ps(s: &str) -> PrevState {
        PrevState::parse(s).unwrap()
    }

    #[test]
    fn table_from_the_real_6_18_sched_switch_format() {
        let text = std::fs::read_to_string(SWITCH_FORMAT).unwrap();
        let fmt = crate::tracefs_format::EventFormat::parse("sched", &text).unwrap();
        let t = PrevStateTable::from_print_fmt(&fmt.print_fmt).expect("a table");
        assert_eq!(t.state_mask, 0xff);
        assert_eq!(t.preempt_mask, 0x100);
        let expect = [
            (0, "R"),
            (0x100, "R+"),
            (1, "S"),
            (2, "D"),
            (4, "T"),
            (8, "t"),
            (0x10, "X"),
            (0x20, "Z"),
            (0x40, "P"),
            (0x80, "I"),
            (0x101, "S+"),
        ];
        for (raw, letters) in expect {
            assert_eq!(t.decode(raw), ps(letters), "raw {raw:#x}");
        }
        assert_eq!(
            t,
            PrevStateTable::for_kernel_release(Some("6.18.44-fc-v657"))
        );
        assert!(t.decode(1 << 40).is_runnable());
    }

    #[test]
    fn old_kernel_numeric_forms() {
        let fmt = r#""prev_state=%s%s", REC->prev_state & (2048-1) ? __print_flags(REC->prev_state & (2048-1), "|", { 1, "S"} , { 2, "D" }, { 4, "T" }, { 8, "t" }, { 16, "Z" }, { 32, "X" }, { 64, "x" }, { 128, "K" }, { 256, "W" }, { 512, "P" }, { 1024, "N" }) : "R", REC->prev_state & 2048 ? "+" : """#;
        let t = PrevStateTable::from_print_fmt(fmt).unwrap();
        assert_eq!(t.decode(2048), ps("R+"));
        assert_eq!(t.decode(2 | 128), ps("D|K"));
        assert_eq!(
            t,
            PrevStateTable::for_kernel_release(Some("4.4.0-21-generic"))
        );
        // 4.8–4.13: TASK_NEW took 2048, TASK_STATE_MAX (the preemption) became 4096
        let fmt48 = fmt.replace("2048", "4096");
        let t48 = PrevStateTable::from_print_fmt(&fmt48).unwrap();
        assert_eq!(t48.decode(4096), ps("R+"));
        assert_eq!(
            t48,
            PrevStateTable::for_kernel_release(Some("4.9.0-13-amd64"))
        );
        assert_eq!(
            PrevStateTable::for_kernel_release(Some("3.10.0")).decode(1024),
            ps("R+")
        );
    }

    #[test]
    fn unresolvable_or_missing_tables_fall_back() {
        assert!(PrevStateTable::from_print_fmt(r#""a=%d", REC->a"#).is_none());
        let sym = r#""%s", REC->prev_state & (TASK_STATE_MAX-1) ? __print_flags(REC->prev_state & (TASK_STATE_MAX-1), "|", { 1, "S"}) : "R""#;
        assert!(PrevStateTable::from_print_fmt(sym).is_none());
        let t = PrevStateTable::for_kernel_release(None);
        assert_eq!(t.decode(0x80), ps("I"));
        assert!(t.source().contains("unknown"));
    }

    #[test]
    fn vendor_letters_are_unknown_not_lost() {
        let fmt = r#""%s", REC->prev_state ? __print_flags(REC->prev_state, "|", { 1, "S" }, { 4096, "rm" }) : "R""#;
        let t = PrevStateTable::from_print_fmt(fmt).unwrap();
        assert_eq!(t.decode(4096).bits(), PrevState::UNKNOWN);
        assert_eq!(t.decode(1 | 8).bits(), PrevState::S | PrevState::UNKNOWN);
    }
}
