//! lkp-tests `compare` output (what the kernel test robot pastes into its regression
//! reports): both sides in one table, each row a metric's base mean, its relative standard
//! deviation, the change, and the new mean.
//!
//! ```text
//! commit:
//!   1a2b3c4d5e
//!   9f8e7d6c5b
//!
//! 1a2b3c4d5e 9f8e7d6c5b
//! ---------------- ---------------------------
//!          %stddev     %change         %stddev
//!              \          |                \
//!     484374            -28.2%     347756        aim7.jobs-per-min
//!      12.40 ±  2%      +39.5%      17.30 ±  3%  aim7.time.elapsed_time
//!       0.91 ± 15%      +30.2       31.10 ±  3%  perf-profile.self.cycles-pp.osq_lock
//! ```
//!
//! A row is `BASE [± SD%] CHANGE NEW [± SD%] METRIC`: CHANGE is a relative change (`-28.2%`)
//! or, for `perf-profile.*` shares (already percentages), a difference in points
//! (`+30.2`). A change **exceeds its stddev** when the difference of the means is larger
//! than the larger of the two standard deviations (`mean × SD% / 100`). lkp leaves small
//! stddevs out; a missing one is taken as [`UNPRINTED_STDDEV_PCT`] (so a 0.4 % change
//! of a row without `±` is not called a change).
//!
//! `perf-profile.{self,children,calltrace}.cycles-pp.F[.CALLER…]` rows are read with the
//! lock vocabulary of the `lock-spinning` detector ([`meaning`]): `osq_lock` +30 points
//! among rising `rwsem_*` rows is rwsem optimistic spinning.

use serde::Serialize;
use stallscope_detect::detectors::lock_spinning::classify::{classify, family, Family, LockClass};
use stallscope_model::{DataQuality, Problem};
use stallscope_read::ReadError;

/// The relative stddev assumed where lkp printed none (it leaves small ones out).
pub const UNPRINTED_STDDEV_PCT: f64 = 2.0;

/// Whether `text` is lkp-tests compare output: the `%stddev  %change  %stddev` title.
pub fn is_lkp(text: &str) -> bool {
    text.lines().take(400).any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w == ["%stddev", "%change", "%stddev"]
    })
}

/// How a change is expressed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeUnit {
    /// Relative change of the mean, in percent.
    Percent,
    /// Difference of two percentages, in points (perf-profile rows).
    Points,
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LkpRow {
    /// Metric name (`aim7.jobs-per-min`, `perf-profile.self.cycles-pp.osq_lock`).
    pub metric: String,
    /// Base mean.
    pub base: f64,
    /// Base relative standard deviation (percent), when printed.
    pub base_stddev_pct: Option<f64>,
    /// New mean.
    pub new: f64,
    /// New relative standard deviation (percent), when printed.
    pub new_stddev_pct: Option<f64>,
    /// The change as printed.
    pub change: f64,
    /// Its unit.
    pub change_unit: ChangeUnit,
    /// `|new − base|` is larger than the larger standard deviation.
    pub exceeds_stddev: bool,
    /// What the row means, for perf-profile rows of lock functions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meaning: Option<String>,
}

/// A parsed table.
#[derive(Clone, Debug, Serialize)]
pub struct LkpComparison {
    /// The two commits (base, new), when the table names them.
    pub commits: Vec<String>,
    /// The test parameters line (`gcc-12/performance/…/aim7`), when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<String>,
    /// Every row, in table order.
    pub rows: Vec<LkpRow>,
    /// Rows whose change exceeds their stddev.
    pub exceeding: usize,
}

/// A number as lkp prints it (`484374`, `12.40`, `1.2e+06`, `-28.2%`).
fn number(w: &str) -> Option<f64> {
    w.trim_end_matches('%')
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
}

/// `[± SD%]` after a value: the words `±`, `15%` or the word `±15%` (`±100%`).
fn stddev(words: &[&str], i: &mut usize) -> Option<f64> {
    let w = *words.get(*i)?;
    if w == "±" {
        let v = number(words.get(*i + 1)?)?;
        *i += 2;
        Some(v)
    } else if let Some(rest) = w.strip_prefix('±') {
        let v = number(rest)?;
        *i += 1;
        Some(v)
    } else {
        None
    }
}

/// One row, or `None` for any other line.
fn row(line: &str) -> Option<LkpRow> {
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.len() < 4 {
        return None;
    }
    let metric = *words.last()?;
    if number(metric).is_some() || !metric.chars().any(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    let mut i = 0;
    let base = number(words[i])?;
    i += 1;
    let base_stddev_pct = stddev(&words, &mut i);
    let change_word = *words.get(i)?;
    let change = number(change_word)?;
    if !(change_word.starts_with('+') || change_word.starts_with('-')) {
        return None;
    }
    let change_unit = if change_word.ends_with('%') {
        ChangeUnit::Percent
    } else {
        ChangeUnit::Points
    };
    i += 1;
    let new = number(words.get(i)?)?;
    i += 1;
    let new_stddev_pct = stddev(&words, &mut i);
    if i + 1 != words.len() {
        return None;
    }
    let sd = |mean: f64, pct: Option<f64>| mean.abs() * pct.unwrap_or(UNPRINTED_STDDEV_PCT) / 100.0;
    let exceeds_stddev =
        (new - base).abs() > sd(base, base_stddev_pct).max(sd(new, new_stddev_pct));
    Some(LkpRow {
        metric: metric.to_string(),
        base,
        base_stddev_pct,
        new,
        new_stddev_pct,
        change,
        change_unit,
        exceeds_stddev,
        meaning: None,
    })
}

/// Parses lkp-tests compare output read from `path`.
pub fn parse(path: &str, text: &str) -> Result<(LkpComparison, DataQuality), ReadError> {
    let mut rows = Vec::new();
    let mut commits = Vec::new();
    let mut parameters = None;
    let mut dq = DataQuality::default();
    let mut in_commits = false;
    let mut after_title = false;
    let lines: Vec<&str> = text.lines().collect();
    for (n, raw) in lines.iter().enumerate() {
        let line = raw.trim_end();
        let t = line.trim();
        if t == "commit:" {
            in_commits = true;
            continue;
        }
        if in_commits {
            if t.is_empty() {
                in_commits = commits.is_empty();
            } else if t.chars().all(|c| c.is_ascii_hexdigit()) {
                commits.push(t.to_string());
            } else {
                in_commits = false;
            }
            continue;
        }
        if parameters.is_none() && t.ends_with(':') && t.contains('/') {
            // `compiler/cpufreq_governor/…/testcase:` then the values on the next line
            parameters = lines.get(n + 1).map(|v| v.trim().to_string());
            continue;
        }
        if t.split_whitespace().collect::<Vec<_>>() == ["%stddev", "%change", "%stddev"] {
            after_title = true;
            continue;
        }
        if !after_title || t.is_empty() || t.starts_with('\\') || t.starts_with("---") {
            continue;
        }
        match row(line) {
            Some(r) => rows.push(r),
            None => dq.add(Problem::LkpUnparsedLines, 1, || {
                format!(
                    "{path}:{}: {}",
                    n + 1,
                    t.chars().take(100).collect::<String>()
                )
            }),
        }
    }
    if rows.is_empty() {
        return Err(ReadError::at_line(
            path,
            1,
            "lkp-tests compare rows after a `%stddev  %change  %stddev` title",
            "none",
        ));
    }
    let context = LockContext::of(&rows);
    for r in &mut rows {
        r.meaning = meaning(&r.metric, r.change, r.change_unit, &context);
    }
    let exceeding = rows.iter().filter(|r| r.exceeds_stddev).count();
    Ok((
        LkpComparison {
            commits,
            parameters,
            rows,
            exceeding,
        },
        dq,
    ))
}

/// The functions of a perf-profile row: `perf-profile.self.cycles-pp.osq_lock` →
/// (`self`, [`osq_lock`]); calltrace rows list the chain (`…cycles-pp.osq_lock.
/// rwsem_optimistic_spin.…`).
fn profile_functions(metric: &str) -> Option<(&str, Vec<&str>)> {
    let rest = metric.strip_prefix("perf-profile.")?;
    let (view, rest) = rest.split_once('.')?;
    // the event name (`cycles-pp`) ends at the first '.'
    let (_, funcs) = rest.split_once('.')?;
    let names: Vec<&str> = funcs.split('.').filter(|f| !f.is_empty()).collect();
    // compiler suffixes (`.isra.0`, `.constprop.0`) split into words: keep real names
    let names: Vec<&str> = names
        .into_iter()
        .filter(|n| {
            !matches!(*n, "isra" | "constprop" | "part" | "cold" | "llvm")
                && !n.chars().all(|c| c.is_ascii_digit())
        })
        .collect();
    (!names.is_empty()).then_some((view, names))
}

/// Which sleeping-lock family the table's rising rows point at (for `osq_lock`, shared by
/// rwsem and mutex optimistic spinning).
struct LockContext {
    rwsem: bool,
    mutex: bool,
}

impl LockContext {
    fn of(rows: &[LkpRow]) -> LockContext {
        let mut c = LockContext {
            rwsem: false,
            mutex: false,
        };
        for r in rows.iter().filter(|r| r.new > r.base) {
            if let Some((_, names)) = profile_functions(&r.metric) {
                for n in names {
                    match family(n) {
                        Family::Rwsem => {
                            c.rwsem |= classify(n).is_some() || n.starts_with("rwsem_")
                        }
                        Family::Mutex => c.mutex |= classify(n).is_some(),
                        _ => {}
                    }
                }
            }
        }
        c
    }
}

/// What a perf-profile row of a lock function means (`None` for other rows).
fn meaning(metric: &str, change: f64, unit: ChangeUnit, ctx: &LockContext) -> Option<String> {
    let (view, names) = profile_functions(metric)?;
    // the lock function of the row: the first one (calltraces are leaf first)
    let (f, class) = names.iter().find_map(|n| classify(n).map(|c| (*n, c)))?;
    let chain_family = names
        .iter()
        .map(|n| family(n))
        .find(|f| !matches!(f, Family::Other));
    let amount = match unit {
        ChangeUnit::Points => format!("{change:+.1} points"),
        ChangeUnit::Percent => format!("{change:+.1}%"),
    };
    let where_ = match view {
        "self" => "its own cycles",
        "children" => "cycles under it",
        _ => "this call path",
    };
    let what = match class {
        LockClass::Spin => {
            let base = f.split('.').next().unwrap_or(f);
            if base.contains("queued_spin_lock") {
                "spinlock contention (the queued spinlock slow path)".to_string()
            } else if base.starts_with("queued_read_lock") || base.starts_with("queued_write_lock")
            {
                "rwlock contention".to_string()
            } else {
                let fam = match chain_family {
                    Some(Family::Rwsem) => Some("rwsem"),
                    Some(Family::Mutex) => Some("mutex"),
                    _ if base.starts_with("rwsem") => Some("rwsem"),
                    _ if base.starts_with("mutex") => Some("mutex"),
                    _ if ctx.rwsem && !ctx.mutex => Some("rwsem"),
                    _ if ctx.mutex && !ctx.rwsem => Some("mutex"),
                    _ => None,
                };
                match fam {
                    Some(fam) => format!("{fam} optimistic spinning (waiters busy-wait for the owner instead of sleeping)"),
                    None => "optimistic spinning on a sleeping lock (rwsem or mutex: the table does not say which)".to_string(),
                }
            }
        }
        LockClass::SpinSelf => {
            "spinlock acquisition (its test-and-set and cache-line transfers)".to_string()
        }
        LockClass::Slowpath => format!(
            "waiting for a {} (the blocking slow path)",
            family(f).name()
        ),
        LockClass::Release => format!("waking {} waiters on release", family(f).name()),
        LockClass::Entry => format!("taking or releasing a {}", family(f).name()),
    };
    Some(format!("{f} {amount} of {where_}: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_both_change_kinds_and_stddev_spellings() {
        let r = row("    484374            -28.2%     347756        aim7.jobs-per-min").unwrap();
        assert_eq!((r.base, r.new, r.change), (484374.0, 347756.0, -28.2));
        assert_eq!(r.change_unit, ChangeUnit::Percent);
        assert!(r.exceeds_stddev);
        // no stddev printed: taken as 2 %, so -0.4 % is not a change
        let r = row("     63.12            -0.4%      62.87        iostat.cpu.system").unwrap();
        assert!(!r.exceeds_stddev);
        let r = row(
            "      0.91 ± 15%      +30.2       31.10 ±  3%  perf-profile.self.cycles-pp.osq_lock",
        )
        .unwrap();
        assert_eq!(
            (r.base_stddev_pct, r.new_stddev_pct),
            (Some(15.0), Some(3.0))
        );
        assert_eq!(r.change_unit, ChangeUnit::Points);
        let r = row("      2.00 ±100%      +10.0%       2.20 ±  2%  some.metric").unwrap();
        assert_eq!(r.base_stddev_pct, Some(100.0));
        assert!(!r.exceeds_stddev, "0.2 is within the base's stddev of 2.0");
        assert!(row("         %stddev     %change         %stddev").is_none());
        assert!(row("             \\          |                \\").is_none());
        assert!(row("commit: 1a2b3c").is_none());
    }

    #[test]
    fn lock_rows_are_named_with_the_lock_spinning_vocabulary() {
        let text = "\
%stddev %change %stddev
  0.91 ± 15%  +30.2  31.10 ±  3%  perf-profile.self.cycles-pp.osq_lock
  0.10        +8.0    8.10 ±  4%  perf-profile.children.cycles-pp.rwsem_down_write_slowpath
  1.00        +0.1    1.10        perf-profile.self.cycles-pp._raw_spin_lock
  5.00        -4.0    1.00        perf-profile.calltrace.cycles-pp.native_queued_spin_lock_slowpath._raw_spin_lock_irqsave.try_to_wake_up
 100.0       -28.2%  71.80        aim7.jobs-per-min
";
        let (c, _) = parse("t", text).unwrap();
        assert_eq!(c.rows.len(), 5);
        let m = |i: usize| c.rows[i].meaning.clone().unwrap_or_default();
        assert!(
            m(0).starts_with("osq_lock +30.2 points of its own cycles: rwsem optimistic spinning"),
            "{}",
            m(0)
        );
        assert!(m(1).contains("waiting for a rwsem"), "{}", m(1));
        assert!(m(2).contains("spinlock acquisition"), "{}", m(2));
        assert!(m(3).contains("spinlock contention"), "{}", m(3));
        assert!(c.rows[4].meaning.is_none());
    }
}
