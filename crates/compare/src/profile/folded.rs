//! Folded stacks (Brendan Gregg's `stackcollapse` output), the profile format `compare`
//! reads itself until the shared profile readers (`stallscope_read::profile`) land.
//!
//! ```text
//! # comment
//! swapper;secondary_startup_64;cpu_startup_entry;do_idle 120
//! fio;entry_SYSCALL_64;do_unlinkat;down_write;rwsem_down_write_slowpath;osq_lock 31
//! fio;operator new(unsigned long) 2
//! main;f 10 14          (differential: base count, new count)
//! ```
//!
//! A line is `STACK WEIGHT` or `STACK WEIGHT_A WEIGHT_B`: the weights are the last
//! whitespace-separated integers, the stack is everything before them (frames may contain
//! spaces), root first, `;`-separated; it is stored leaf first ([`Profile`]). Blank lines and
//! `#` comments are skipped; a line without a weight or with an empty frame is counted in
//! the data quality (`folded_bad_line`).

use stallscope::model::profile::{Profile, WeightUnit, WeightedStack};
use stallscope::model::{DataQuality, Severity, Span, SpanPos};
use stallscope::read::ReadError;

/// A parsed line: frames root first, weight, second weight.
fn parse_line(line: &str) -> Option<(Vec<&str>, u64, Option<u64>)> {
    let (rest, last) = line.rsplit_once(char::is_whitespace)?;
    let last: u64 = last.parse().ok()?;
    let rest = rest.trim_end();
    let (stack, first, second) = match rest.rsplit_once(char::is_whitespace) {
        Some((s, w)) if w.bytes().all(|b| b.is_ascii_digit()) && !w.is_empty() => {
            (s.trim_end(), w.parse().ok()?, Some(last))
        }
        _ => (rest, last, None),
    };
    if stack.is_empty() {
        return None;
    }
    let frames: Vec<&str> = stack.split(';').collect();
    if frames.iter().any(|f| f.is_empty()) {
        return None;
    }
    Some((frames, first, second))
}

/// True when the first lines of `head` are all folded lines and one has a `;`.
pub fn looks_folded(head: &str) -> bool {
    let mut lines = head
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .take(20)
        .peekable();
    if lines.peek().is_none() {
        return false;
    }
    let mut semicolon = false;
    for l in lines {
        if parse_line(l).is_none() {
            return false;
        }
        semicolon |= l.contains(';');
    }
    semicolon
}

/// Parses folded text.
pub fn parse(path: &str, input_index: u16, text: &str) -> Result<(Profile, DataQuality), ReadError> {
    let mut p = Profile::new(WeightUnit::Samples);
    let mut dq = DataQuality::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue; // blank or comment: nothing to count
        }
        let Some((frames, weight, weight_new)) = parse_line(line) else {
            dq.add(
                "folded_bad_line",
                Severity::Warning,
                "a line of folded stacks had no weight or an empty frame and was skipped",
                1,
                || format!("{path}:{}: {line}", i + 1),
            );
            continue;
        };
        let ids = frames.iter().rev().map(|f| p.intern(f, None)).collect();
        p.stacks.push(WeightedStack {
            frames: ids,
            weight,
            weight_new,
            span: Span {
                input: input_index,
                pos: SpanPos::Line(i as u64 + 1),
            },
            ..WeightedStack::default()
        });
    }
    if p.stacks.is_empty() {
        return Err(ReadError::new(
            path,
            None,
            "folded stacks (`frame;frame;… COUNT` lines)",
            "no such line",
        ));
    }
    Ok((p, dq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_weights_and_odd_symbols() {
        let text = "# c\nmain;f 10\nmain;operator new(unsigned long) 2\nmain;g 3 5\nbad line\n;x 3\n";
        let (p, dq) = parse("x", 0, text).unwrap();
        assert_eq!(p.stacks.len(), 3);
        assert_eq!(p.symbol(p.stacks[0].frames[0]), "f");
        assert_eq!(p.symbol(p.stacks[0].frames[1]), "main");
        assert_eq!(p.symbol(p.stacks[1].frames[0]), "operator new(unsigned long)");
        assert_eq!(p.stacks[2].weight, 3);
        assert_eq!(p.stacks[2].weight_new, Some(5));
        assert_eq!(dq.count("folded_bad_line"), 2);
        assert!(!looks_folded(text), "a bad line among the first lines");
        assert!(looks_folded("# c\nmain;f 10\nmain;g 3 5\n"));
        assert!(!looks_folded("Performance counter stats\n"));
        assert!(parse("x", 0, "\n").is_err());
    }
}
