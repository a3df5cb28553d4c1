//! `perf stat` output: the default text, `-r N` (repeated runs), and `-x,` CSV.
//!
//! Text (one file = one `perf stat` invocation):
//!
//! ```text
//!  Performance counter stats for 'stress-ng --cpu 1 --timeout 1' (5 runs):
//!
//!            638.19 msec task-clock          #    0.596 CPUs utilized            ( +-  0.52% )
//!               751      context-switches    #    1.177 K/sec                    ( +- 16.67% )
//!     <not counted>      cycles
//!
//!            1.0707 +- 0.0012 seconds time elapsed  ( +-  0.11% )
//!        0.608421000 seconds user
//! ```
//!
//! A counter line is `VALUE [UNIT] EVENT [# metric …] [( +- X% )] [(P%)]`: the value (digits
//! with optional `,` grouping and `.` fraction, or `<not counted>` / `<not supported>`),
//! then one token for the event or two for unit and event, up to `#` or `(`. The elapsed line
//! is `SECS [+- SE] seconds time elapsed`, user/sys lines `SECS seconds user|sys`. The header's
//! `(N runs)` says how many runs the values average.
//!
//! With `-r N`, perf prints for each value the **standard error of the mean** relative to the
//! mean (`( +- X% )`; perf's `stddev_stats()` divides the sample variance by n), so the runs'
//! sample standard deviation is `mean · X/100 · √N`.
//!
//! CSV (`-x,`): `VALUE,UNIT,EVENT,[REL_SE%,]RUN_TIME,PCT_ENABLED,METRIC,METRIC_UNIT`; the
//! fourth field ends in `%` only with `-r`. CSV does not record N, so a `-r` CSV file counts
//! as one run (its ± is not used; a data-quality note says so).
//!
//! Lines starting with `#` (`# started on …`) and blank lines are skipped; other lines that
//! do not parse, and `<not counted>`/`<not supported>` values, are counted in the file's
//! data quality.

use stallscope_model::{DataQuality, Problem};
use stallscope_read::ReadError;

use super::{MetricFile, MetricValue};

/// True when `head` looks like `perf stat` text.
pub fn is_text(head: &str) -> bool {
    head.contains("Performance counter stats for")
}

/// True when the first data line looks like `perf stat -x,` CSV.
pub fn is_csv(head: &str) -> bool {
    let Some(line) = head
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
    else {
        return false;
    };
    let fields: Vec<&str> = line.split(',').collect();
    fields.len() >= 5
        && (parse_number(fields[0]).is_some() || fields[0].starts_with("<not "))
        && !fields[2].is_empty()
        && parse_number(fields[2]).is_none()
}

/// Parses a decimal with optional `,` thousands grouping.
fn parse_number(s: &str) -> Option<f64> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
        return None;
    }
    let cleaned: String = s.chars().filter(|&c| c != ',').collect();
    cleaned.parse::<f64>().ok().filter(|v| v.is_finite())
}

fn not_counted(dq: &mut DataQuality, path: &str, n: usize, line: &str) {
    dq.add(Problem::PerfStatNotCounted, 1, || {
        format!("{path}:{n}: {}", line.trim())
    });
}

fn bad_line(dq: &mut DataQuality, path: &str, n: usize, line: &str) {
    dq.add(Problem::PerfStatBadLine, 1, || {
        format!("{path}:{n}: {}", line.trim())
    });
}

/// Parses `perf stat` text.
pub fn parse_text(path: &str, text: &str) -> Result<MetricFile, ReadError> {
    let mut file = MetricFile::new(path, "perf-stat");
    let mut seen_header = false;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue; // blank or comment: nothing to count
        }
        if line.starts_with("Performance counter stats for") {
            seen_header = true;
            file.runs_in_file = runs_in_header(line);
            continue;
        }
        if !seen_header {
            bad_line(&mut file.quality, path, n, raw);
            continue;
        }
        if line.starts_with("<not ") {
            not_counted(&mut file.quality, path, n, raw);
            continue;
        }
        match parse_text_line(line) {
            Some(v) => file.values.push(v),
            None => bad_line(&mut file.quality, path, n, raw),
        }
    }
    if !seen_header {
        return Err(ReadError::new(
            path,
            None,
            "perf stat output with a \"Performance counter stats for\" header",
            "no such line",
        ));
    }
    finish(file)
}

/// `(N runs):` at the end of the header line.
fn runs_in_header(line: &str) -> Option<usize> {
    let head = line.strip_suffix(':')?.trim_end().strip_suffix("runs)")?;
    let open = head.rfind('(')?;
    head[open + 1..].trim().parse().ok()
}

/// The relative standard error `( +- X% )` in a line, as a fraction of the mean.
fn rel_se(line: &str) -> Option<f64> {
    let at = line.find("( +-")?;
    let rest = &line[at + 4..];
    let pct = rest.split('%').next()?.trim();
    parse_number(pct).map(|v| v / 100.0)
}

fn parse_text_line(line: &str) -> Option<MetricValue> {
    let mut tokens = line.split_whitespace();
    let value = parse_number(tokens.next()?)?;
    let rest: Vec<&str> = tokens.collect();
    // elapsed / user / sys: "[+- SE] seconds time elapsed", "seconds user", "seconds sys"
    let rest_no_se: &[&str] = if rest.first() == Some(&"+-") {
        rest.get(2..).unwrap_or(&[])
    } else {
        &rest
    };
    if rest_no_se.first() == Some(&"seconds") {
        let what: Vec<&str> = rest_no_se[1..]
            .iter()
            .take_while(|t| !t.starts_with('('))
            .copied()
            .collect();
        if what.is_empty() {
            return None;
        }
        return Some(MetricValue {
            name: what.join(" "),
            unit: "seconds".into(),
            value,
            rel_se: rel_se(line),
        });
    }
    let words: Vec<&str> = rest
        .iter()
        .take_while(|t| !t.starts_with('#') && !t.starts_with('('))
        .copied()
        .collect();
    let (unit, name) = match words.as_slice() {
        [event] => (String::new(), event.to_string()),
        [unit, event @ ..] if !event.is_empty() => (unit.to_string(), event.join(" ")),
        _ => return None,
    };
    Some(MetricValue {
        name,
        unit,
        value,
        rel_se: rel_se(line),
    })
}

/// Parses `perf stat -x,` CSV.
pub fn parse_csv(path: &str, text: &str) -> Result<MetricFile, ReadError> {
    let mut file = MetricFile::new(path, "perf-stat-csv");
    let mut rel_se_seen = false;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue; // blank or comment: nothing to count
        }
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() < 3 || fields[2].is_empty() {
            bad_line(&mut file.quality, path, n, raw);
            continue;
        }
        if fields[0].starts_with("<not ") {
            not_counted(&mut file.quality, path, n, raw);
            continue;
        }
        let Some(value) = parse_number(fields[0]) else {
            bad_line(&mut file.quality, path, n, raw);
            continue;
        };
        if fields.get(3).is_some_and(|f| f.ends_with('%')) {
            rel_se_seen = true;
        }
        file.values.push(MetricValue {
            name: fields[2].to_string(),
            unit: fields[1].to_string(),
            value,
            rel_se: None,
        });
    }
    if rel_se_seen {
        file.quality
            .add(Problem::PerfStatCsvRepeat, 1, || path.to_string());
    }
    finish(file)
}

fn finish(file: MetricFile) -> Result<MetricFile, ReadError> {
    if file.values.is_empty() {
        return Err(ReadError::new(
            &file.path,
            None,
            "at least one counter value",
            "none",
        ));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT_R: &str = "
 Performance counter stats for 'sleep 0.1' (3 runs):

              1.10 msec task-clock                       #    0.009 CPUs utilized            ( +-  2.68% )
                 2      context-switches                 #    1.904 K/sec                    ( +- 16.67% )
     <not supported>      cycles
     1,234,567      page-faults

            0.1203 +- 0.0145 seconds time elapsed  ( +- 12.03% )

";

    #[test]
    fn text_with_repeats() {
        let f = parse_text("x", TEXT_R).unwrap();
        assert_eq!(f.runs_in_file, Some(3));
        let names: Vec<&str> = f.values.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "task-clock",
                "context-switches",
                "page-faults",
                "time elapsed"
            ]
        );
        assert_eq!(f.values[0].unit, "msec");
        assert_eq!(f.values[0].value, 1.10);
        assert!((f.values[0].rel_se.unwrap() - 0.0268).abs() < 1e-12);
        assert_eq!(f.values[2].value, 1_234_567.0);
        assert_eq!(f.values[3].value, 0.1203);
        assert!((f.values[3].rel_se.unwrap() - 0.1203).abs() < 1e-12);
        assert_eq!(f.quality.count(Problem::PerfStatNotCounted), 1);
    }

    #[test]
    fn text_single_run() {
        let t = "\n Performance counter stats for 'stress-ng':\n\n            638.19 msec task-clock   #    0.596 CPUs utilized\n       1.070681387 seconds time elapsed\n\n       0.608421000 seconds user\n garbage here\n";
        let f = parse_text("x", t).unwrap();
        assert_eq!(f.runs_in_file, None);
        assert_eq!(f.values.len(), 3);
        assert_eq!(f.values[2].name, "user");
        assert_eq!(f.quality.count(Problem::PerfStatBadLine), 1);
    }

    #[test]
    fn csv_plain_and_repeat() {
        let plain = "396.02,msec,task-clock,396020215,100.00,0.386,CPUs utilized\n637,,context-switches,396020215,100.00,1.609,K/sec\n<not counted>,,cycles,0,0.00,,\n";
        assert!(is_csv(plain));
        let f = parse_csv("x", plain).unwrap();
        assert_eq!(f.values.len(), 2);
        assert_eq!(f.values[1].name, "context-switches");
        assert_eq!(f.values[1].value, 637.0);
        let rep = "1.22,msec,task-clock,7.87%,1219455,100.00,0.011,CPUs utilized\n";
        let f = parse_csv("x", rep).unwrap();
        assert_eq!(f.quality.count(Problem::PerfStatCsvRepeat), 1);
    }

    #[test]
    fn not_perf_stat() {
        assert!(parse_text("x", "hello\n").is_err());
        assert!(!is_csv("{\"fio version\": 1}"));
        assert!(parse_csv("x", "a,b\n").is_err());
    }
}
