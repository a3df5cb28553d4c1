//! Folded stacks (Brendan Gregg's `stackcollapse-*.pl` output, `flamegraph.pl` input) →
//! [`Profile`].
//!
//! ```text
//! line   := stack WS+ COUNT [ WS+ COUNT2 ]         COUNT := DIGITS [ "." DIGITS* ]
//! stack  := frame { ";" frame }                     root first, leaf last
//!
//! swapper;secondary_startup_64;cpu_startup_entry;do_idle 120
//! burn;start_thread;worker;leaf_compute 91
//! fio;entry_SYSCALL_64_[k];do_syscall_64_[k];osq_lock_[k] 7
//! CPU_0/KVM;std::vector<int, std::allocator<int> >::push_back 3
//! make;main 40 52                                   (differential: before, after)
//! ```
//!
//! - The count is the last whitespace-separated token; a line without one may put it first
//!   (`385 start_thread;worker;leaf_compute`, perf report's `-g folded` form). When the text before it again ends
//!   in whitespace + a number, the line is *differential* (`difffolded.pl`): the first
//!   number is the weight, the second [`WeightedStack::weight_new`]. This is decided line by
//!   line, as flamegraph.pl does; a frame that itself ends in ` <digits>` is therefore read
//!   as a count (ambiguous input; stackcollapse never emits such frames).
//! - Fractional counts (`12.5`) are rounded to the nearest integer and counted
//!   (`folded_fractional_count`), since weights are integers.
//! - Frames may contain spaces, `::`, `<…>`, `(…)`. `;` separates frames, except inside a
//!   balanced `[...]` (`[foo;bar]` stays one frame); stackcollapse itself turns `;` inside
//!   names into `:`, so this only matters for other producers.
//! - Annotation suffixes: `_[k]` is removed and marks a kernel frame; `_[j]` (JIT) and
//!   `_[i]` (inlined) are removed and mark a user frame; `_[w]` (waker) and the `--`
//!   separator of chain graphs are kept as they are.
//! - The first frame is usually the process name (`comm`, `comm-PID`, `comm-PID/TID`); it
//!   stays a frame (the root), as flame graphs show it.
//! - Identical stacks are summed into one (first occurrence's line kept). Blank lines and
//!   `#` comments are skipped; other unparsable lines are counted (`folded_bad_line`). An
//!   input with no valid line is an error naming its first line.
//!
//! Weights are whatever the producer counted (samples, or period sums when perf script
//! printed periods): [`WeightUnit::Samples`] is reported.

use std::collections::HashMap;

use stallscope_model::{
    DataQuality, Problem, Profile, Span, SpanPos, SymbolId, WeightUnit, WeightedStack,
};

use super::{read_text, ProfileFormat, ProfileRead};
use crate::{Input, ReadError};

/// A count token: `123`, `12.`, `12.5` → rounded value and whether it was fractional.
fn parse_count(tok: &str) -> Option<(u64, bool)> {
    let (int, frac) = match tok.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (tok, None),
    };
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut v: u64 = int.parse().ok()?;
    let mut fractional = false;
    if let Some(f) = frac {
        if !f.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if f.bytes().any(|b| b != b'0') {
            fractional = true;
            if f.as_bytes()[0] >= b'5' {
                v = v.checked_add(1)?;
            }
        }
    }
    Some((v, fractional))
}

/// Splits `text` at its last whitespace run: (before, last token).
fn split_last(text: &str) -> Option<(&str, &str)> {
    let t = text.trim_end();
    let i = t.rfind(|c: char| c.is_ascii_whitespace())?;
    Some((t[..i].trim_end(), &t[i + 1..]))
}

/// A parsed folded line: frames root first, count, second count.
#[derive(Debug, PartialEq, Eq)]
pub struct FoldedLine<'a> {
    /// Frames as written, root first.
    pub frames: Vec<&'a str>,
    /// First count (rounded).
    pub count: u64,
    /// Second count of a differential line.
    pub count_new: Option<u64>,
    /// A count had a fractional part.
    pub fractional: bool,
}

/// Splits a stack at `;` outside balanced brackets.
fn split_frames(stack: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let bytes = stack.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'[' => depth += 1,
            b']' => depth = depth.saturating_sub(1),
            b';' if depth == 0 => {
                out.push(&stack[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&stack[start..]);
    if depth > 0 {
        // Unbalanced '[': bracket grouping would swallow the rest; split plainly.
        return stack.split(';').collect();
    }
    out
}

/// Parses one non-blank, non-comment line.
pub fn parse_line(line: &str) -> Option<FoldedLine<'_>> {
    let (before, last) = split_last(line)?;
    let Some((count, frac1)) = parse_count(last) else {
        return parse_count_first(line);
    };
    let (stack, count, count_new, fractional) =
        match split_last(before).and_then(|(b, tok)| parse_count(tok).map(|c| (b, c))) {
            Some((b, (first, frac0))) if !b.is_empty() => (b, first, Some(count), frac0 || frac1),
            _ => (before, count, None, frac1),
        };
    if stack.is_empty() {
        return None;
    }
    Some(FoldedLine {
        frames: split_frames(stack),
        count,
        count_new,
        fractional,
    })
}

/// `COUNT stack` (`perf report -g folded,0,caller,count` lines, also `perf script report
/// stackcollapse`-like tools that put the count first).
fn parse_count_first(line: &str) -> Option<FoldedLine<'_>> {
    let t = line.trim();
    let (first, stack) = t.split_once(|c: char| c.is_ascii_whitespace())?;
    let (count, fractional) = parse_count(first)?;
    let stack = stack.trim();
    if stack.is_empty() {
        return None;
    }
    Some(FoldedLine {
        frames: split_frames(stack),
        count,
        count_new: None,
        fractional,
    })
}

/// A frame's name without its annotation suffix, and whether it is a kernel frame.
pub fn frame_annotation(frame: &str) -> (&str, Option<bool>) {
    if let Some(f) = frame.strip_suffix("_[k]") {
        (f, Some(true))
    } else if let Some(f) = frame
        .strip_suffix("_[j]")
        .or_else(|| frame.strip_suffix("_[i]"))
    {
        (f, Some(false))
    } else {
        (frame, None)
    }
}

/// Parses folded text read from `path`.
pub fn parse(path: &str, text: &str) -> Result<ProfileRead, ReadError> {
    let mut profile = Profile::new(WeightUnit::Samples);
    let mut quality = DataQuality::default();
    let mut seen: HashMap<Vec<SymbolId>, usize> = HashMap::new();
    let mut first_bad: Option<(u64, String)> = None;
    let mut any_diff = false;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.trim().is_empty() || line.starts_with('#') {
            continue; // blank lines and comments carry nothing
        }
        let Some(parsed) = parse_line(line) else {
            if first_bad.is_none() {
                first_bad = Some((line_no, line.chars().take(80).collect()));
            }
            quality.add(Problem::FoldedBadLine, 1, || {
                format!(
                    "{path}:{line_no}: {}",
                    line.chars().take(100).collect::<String>()
                )
            });
            continue;
        };
        if parsed.fractional {
            quality.add(Problem::FoldedFractionalCount, 1, || {
                format!("{path}:{line_no}")
            });
        }
        any_diff |= parsed.count_new.is_some();
        // Leaf first.
        let frames: Vec<SymbolId> = parsed
            .frames
            .iter()
            .rev()
            .map(|f| {
                let (name, kernel) = frame_annotation(f);
                profile.intern(name, kernel)
            })
            .collect();
        match seen.get(&frames) {
            Some(&idx) => {
                if let Some(s) = profile.stacks.get_mut(idx) {
                    s.weight = s.weight.saturating_add(parsed.count);
                    s.weight_new = match (s.weight_new, parsed.count_new) {
                        (Some(a), Some(b)) => Some(a.saturating_add(b)),
                        (a, b) => a.or(b),
                    };
                }
            }
            None => {
                seen.insert(frames.clone(), profile.stacks.len());
                profile.stacks.push(WeightedStack {
                    frames,
                    weight: parsed.count,
                    weight_new: parsed.count_new,
                    span: Span::new(0, SpanPos::Line(line_no)),
                    ..WeightedStack::default()
                });
            }
        }
    }
    if profile.stacks.is_empty() {
        let (line_no, found) = first_bad.unwrap_or((1, "no stack line".to_string()));
        return Err(ReadError::at_line(
            path,
            line_no,
            "folded stacks (`frame;frame;… COUNT`)",
            format!("{found:?}"),
        ));
    }
    if any_diff {
        quality.add(Problem::FoldedDifferential, 1, || path.to_string());
    }
    Ok(ProfileRead {
        profile,
        quality,
        format: ProfileFormat::Folded,
        event: None,
        kernel_release: None,
        reported_totals: None,
    })
}

/// Reads `input` as folded stacks.
pub fn read(input: Input) -> Result<ProfileRead, ReadError> {
    let (path, text) = read_text(input)?;
    parse(&path, &text)
}

/// Whether `head` looks like folded stacks: the first non-comment line parses and has a
/// `;` in its stack, or every one of the first lines parses.
pub fn sniff(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let mut lines = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .take(20)
        .peekable();
    // The last line of the head may be cut short.
    let mut n = 0;
    let mut with_semicolon = false;
    while let Some(l) = lines.next() {
        let last = lines.peek().is_none();
        match parse_line(l) {
            Some(p) => {
                n += 1;
                with_semicolon |= p.frames.len() > 1;
            }
            None if last && n > 0 => break,
            None => return false,
        }
    }
    n > 0 && (with_semicolon || n >= 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(r: &ProfileRead, i: usize) -> Vec<&str> {
        r.profile.stacks[i]
            .frames
            .iter()
            .map(|&f| r.profile.symbol(f))
            .collect()
    }

    #[test]
    fn odd_symbols() {
        let text = "\
# comment
CPU_0/KVM;std::vector<int, std::allocator<int> >::push_back 3
fio;entry_SYSCALL_64_[k];osq_lock_[k] 7
x;[foo;bar];operator() (int) const 2
x;[unbalanced;leaf 1
";
        let r = parse("t", text).unwrap();
        assert_eq!(
            names(&r, 0),
            [
                "std::vector<int, std::allocator<int> >::push_back",
                "CPU_0/KVM"
            ]
        );
        assert_eq!(names(&r, 1), ["osq_lock", "entry_SYSCALL_64", "fio"]);
        let p = &r.profile;
        assert_eq!(p.kernel[p.lookup("osq_lock").unwrap() as usize], Some(true));
        assert_eq!(names(&r, 2), ["operator() (int) const", "[foo;bar]", "x"]);
        assert_eq!(names(&r, 3), ["leaf", "[unbalanced", "x"]);
        assert_eq!(r.profile.total_weight(), 13);
    }

    #[test]
    fn differential_fractional_and_duplicates() {
        let r = parse("t", "a;b 40 52\na;b 1 2\nc;d 2.5\nc;d 1.\n").unwrap();
        assert_eq!(r.profile.stacks.len(), 2);
        let first = parse("t", "385 start_thread;worker;leaf_compute\n2 a b;c\n").unwrap();
        assert_eq!(first.profile.stacks[0].weight, 385);
        assert_eq!(
            first.profile.symbol(first.profile.stacks[1].frames[1]),
            "a b"
        );
        assert_eq!(
            (r.profile.stacks[0].weight, r.profile.stacks[0].weight_new),
            (41, Some(54))
        );
        assert_eq!(r.profile.stacks[1].weight, 4);
        assert_eq!(r.quality.count(Problem::FoldedFractionalCount), 1);
    }

    #[test]
    fn errors_and_bad_lines() {
        let e = parse("t", "# x\nnot folded\n").unwrap_err();
        assert_eq!(e.pos, Some(SpanPos::Line(2)));
        assert!(parse("t", "").is_err());
        let r = parse("t", "a;b 1\nbroken;\n").unwrap();
        assert_eq!(r.quality.count(Problem::FoldedBadLine), 1);
        assert!(sniff(b"a;b 1\nc;d 2\n"));
        assert!(!sniff(b"hello world\n"));
    }
}
