//! Text rendering of a [`Comparison`].
//!
//! ```text
//! stallscope compare: traces, base 1 run, new 1 run; α = 0.05 (Holm-adjusted p per table)
//!   base: fixtures/sched/equal.perf.data
//!   new:  fixtures/sched/starve.perf.data
//!
//! Wakeup latency per comm (Mann-Whitney U on every wakeup; * = significant)
//!   comm                 base n    p50      p99      max │  new n    p50      p99      max │ p50 %chg   p adj
//!   cyclictest              502  3.2 us   1.6 ms   1.6 ms │    503  5.4 us   3.9 ms   4.1 ms │  +68.8%   3e-40 * up
//! ```
//!
//! Metrics and profiles use lkp's layout: `base ±stddev%  %change  new ±stddev%  name`, with
//! the adjusted p-value and `*` when significant. Long tables show the first rows (tested
//! rows first, most significant first); `--format json` has every row.

use std::io::{self, Write};

use crate::findings::DetectorRow;
use crate::metrics::MetricsComparison;
use crate::profile::ProfileComparison;
use crate::stats::Verdict;
use crate::trace::{LatencyRow, TailRow, TraceComparison};
use crate::Comparison;

/// Rows shown per text table.
pub const TEXT_ROWS: usize = 20;

fn opt_ns(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), short_ns)
}

/// Three significant digits: `812ns`, `45.2us`, `3.94ms`, `1.20s`.
fn short_ns(ns: u64) -> String {
    let f = ns as f64;
    let (v, unit) = if ns < 1_000 {
        return format!("{ns}ns");
    } else if ns < 1_000_000 {
        (f / 1e3, "us")
    } else if ns < 1_000_000_000 {
        (f / 1e6, "ms")
    } else {
        (f / 1e9, "s")
    };
    if v >= 100.0 {
        format!("{v:.0}{unit}")
    } else if v >= 10.0 {
        format!("{v:.1}{unit}")
    } else {
        format!("{v:.2}{unit}")
    }
}

/// A metric value with about 4 significant digits (`333340`, `498.4`, `16.72`, `0.4000`,
/// `9.045e-5`).
pub fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else if a >= 0.001 {
        format!("{v:.4}")
    } else {
        format!("{v:.3e}")
    }
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |p| format!("{p:+.1}%"))
}

fn p_text(v: &Option<Verdict>, untested: Option<&str>) -> String {
    match v {
        Some(v) => format!(
            "{:>8}{}",
            format_p(v.p_adjusted),
            if v.significant { " *" } else { "  " }
        ),
        None => format!("{:>8}  ({})", "-", untested.unwrap_or("no test")),
    }
}

/// A p-value with 2 significant digits (`0.043`, `3.1e-12`).
pub fn format_p(p: f64) -> String {
    if p >= 0.001 {
        format!("{p:.3}")
    } else {
        format!("{p:.1e}")
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        "run"
    } else {
        "runs"
    }
}

/// Writes the text form.
pub fn write_text(out: &mut dyn Write, c: &Comparison) -> io::Result<()> {
    if let Some(l) = &c.lkp {
        writeln!(out, "stallscope compare: {}", c.base.files.join(" "))?;
        for (key, e) in &c.base.data_quality {
            writeln!(
                out,
                "  data quality: {} {key}: {} — {}",
                e.severity, e.count, e.description
            )?;
        }
        return write_lkp(out, l);
    }
    writeln!(
        out,
        "stallscope compare: {}, base {} {}, new {} {}; alpha = {} (Holm-adjusted p per table; * = significant)",
        c.kind,
        c.base.runs,
        plural(c.base.runs),
        c.new.runs,
        plural(c.new.runs),
        c.alpha
    )?;
    writeln!(out, "  base: {}", c.base.files.join(" "))?;
    writeln!(out, "  new:  {}", c.new.files.join(" "))?;
    for (side, info) in [("base", &c.base), ("new", &c.new)] {
        for (key, e) in &info.data_quality {
            writeln!(
                out,
                "  data quality ({side}): {} {key}: {} — {}",
                e.severity, e.count, e.description
            )?;
        }
    }
    if let Some(t) = &c.trace {
        write_trace(out, t)?;
    }
    if let Some(m) = &c.metrics {
        write_metrics(out, m)?;
    }
    if let Some(p) = &c.profile {
        write_profile(out, p)?;
    }
    Ok(())
}

/// An lkp-tests compare table: `!` marks a change larger than its stddev.
fn write_lkp(out: &mut dyn Write, l: &crate::metrics::lkp::LkpComparison) -> io::Result<()> {
    use crate::metrics::lkp::ChangeUnit;
    writeln!(out)?;
    if let [a, b] = l.commits.as_slice() {
        writeln!(out, "lkp-tests compare table: {a} → {b}")?;
    } else {
        writeln!(out, "lkp-tests compare table")?;
    }
    if let Some(p) = &l.parameters {
        writeln!(out, "  {p}")?;
    }
    writeln!(
        out,
        "  {} of {} changes exceed their stddev (!: |new − base| > the larger stddev; 2 % where lkp printed none)",
        l.exceeding,
        l.rows.len()
    )?;
    let sd = |v: Option<f64>| v.map_or(String::new(), |s| format!(" ±{s:.0}%"));
    for r in &l.rows {
        let change = match r.change_unit {
            ChangeUnit::Percent => format!("{:+.1}%", r.change),
            ChangeUnit::Points => format!("{:+.1} pt", r.change),
        };
        writeln!(
            out,
            "  {} {:>14} {:>9} {:>14}  {}",
            if r.exceeds_stddev { "!" } else { " " },
            format!("{}{}", fmt_num(r.base), sd(r.base_stddev_pct)),
            change,
            format!("{}{}", fmt_num(r.new), sd(r.new_stddev_pct)),
            r.metric
        )?;
        if let Some(m) = &r.meaning {
            writeln!(out, "  {:>41}  → {m}", "")?;
        }
    }
    Ok(())
}

/// A value as lkp prints it: integers whole, others with two decimals.
fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn latency_table(out: &mut dyn Write, title: &str, rows: &[LatencyRow]) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "{title}")?;
    writeln!(
        out,
        "  {:<20} {:>7} {:>7} {:>7} {:>7} | {:>7} {:>7} {:>7} {:>7} | {:>8} {:>8}",
        "comm", "base n", "p50", "p99", "max", "new n", "p50", "p99", "max", "p50 chg", "p adj"
    )?;
    for r in rows.iter().take(TEXT_ROWS) {
        let name = match r.pid {
            Some(pid) => format!("{}/{pid}", r.comm),
            None => r.comm.clone(),
        };
        let mut line = format!(
            "  {:<20} {:>7} {:>7} {:>7} {:>7} | {:>7} {:>7} {:>7} {:>7} | {:>8} {}",
            name,
            r.base.count,
            opt_ns(r.base.p50_ns),
            opt_ns(r.base.p99_ns),
            opt_ns(r.base.max_ns),
            r.new.count,
            opt_ns(r.new.p50_ns),
            opt_ns(r.new.p99_ns),
            opt_ns(r.new.max_ns),
            pct(r.p50_change_pct),
            p_text(&r.verdict, r.untested.as_deref()),
        );
        if r.direction != "none" {
            line.push_str(&format!(" {}", r.direction));
            if let Some([lo, hi]) = r.median_diff_ci_ns {
                let s = |v: i64| {
                    let sign = if v < 0 { "-" } else { "+" };
                    format!("{sign}{}", short_ns(v.unsigned_abs()))
                };
                line.push_str(&format!(" (median {}..{})", s(lo), s(hi)));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    if rows.len() > TEXT_ROWS {
        writeln!(
            out,
            "  … {} more rows (--format json)",
            rows.len() - TEXT_ROWS
        )?;
    }
    Ok(())
}

fn write_trace(out: &mut dyn Write, t: &TraceComparison) -> io::Result<()> {
    let secs = |d: &[u64]| {
        d.iter()
            .map(|&ns| format!("{:.2}s", ns as f64 / 1e9))
            .collect::<Vec<_>>()
            .join(" ")
    };
    writeln!(
        out,
        "  durations: base {}; new {}",
        secs(&t.base_durations_ns),
        secs(&t.new_durations_ns)
    )?;
    if t.base_runs < 2 || t.new_runs < 2 {
        writeln!(
            out,
            "  note: one run on a side — a significant change says these two runs differ beyond their own ups and downs, not that the configurations do (runs of one configuration differ too); give ≥ 2 files a side (3+ better) to test across runs"
        )?;
    }
    latency_table(
        out,
        "Wakeup latency per comm (1 run a side: Welch t on 8 batch means per run; 2+ runs: Welch t on per-run means; interval: bootstrap CI of the median difference)",
        &t.comms,
    )?;
    let tested_tasks: Vec<LatencyRow> = t
        .tasks
        .iter()
        .filter(|r| r.verdict.is_some())
        .cloned()
        .collect();
    if !tested_tasks.is_empty() {
        latency_table(
            out,
            "Wakeup latency per task (same pid on both sides)",
            &tested_tasks,
        )?;
    }
    tail_table(out, &t.tails, t.base_runs >= 2 && t.new_runs >= 2)?;
    writeln!(out)?;
    writeln!(
        out,
        "Rates per second and CPU shares in % of a CPU (Welch t over runs; all tasks, and significant comms)"
    )?;
    for r in t
        .rates
        .iter()
        .filter(|r| r.comm == "(all)" || r.verdict.as_ref().is_some_and(|v| v.significant))
    {
        writeln!(
            out,
            "  {:<10} {:<20} {:>10.1} ±{:>5.1}%  {:>8}  {:>10.1} ±{:>5.1}%  {}",
            r.what,
            r.comm,
            r.base.mean,
            r.base.stddev_pct,
            pct(r.change_pct),
            r.new.mean,
            r.new.stddev_pct,
            p_text(&r.verdict, r.untested.as_deref())
        )?;
    }
    // what runs on one side only: a load that came or went (no test needed to say so)
    let one_sided: Vec<&crate::trace::RateRow> = t
        .rates
        .iter()
        .filter(|r| r.what == "cpu_share" && r.comm != "(all)")
        .filter(|r| (r.base.total == 0) != (r.new.total == 0))
        .filter(|r| r.base.mean.max(r.new.mean) >= ONE_SIDED_SHARE_PCT)
        .collect();
    if !one_sided.is_empty() {
        writeln!(
            out,
            "On one side only (≥ {ONE_SIDED_SHARE_PCT}% of a CPU on average):"
        )?;
        for r in one_sided {
            let (side, share) = match r.base.total == 0 {
                true => ("new", r.new.mean),
                false => ("base", r.base.mean),
            };
            writeln!(
                out,
                "  {:<20} {share:.1}% of a CPU, {side} side only",
                r.comm
            )?;
        }
    }
    writeln!(out)?;
    write_detectors(out, &t.detectors)?;
    Ok(())
}

/// CPU share (% of one CPU) from which a comm running on one side only is named.
const ONE_SIDED_SHARE_PCT: f64 = 5.0;

/// The tail table: tested rows with a significant test, else the three with the lowest
/// adjusted p (the whole table in JSON).
fn tail_table(out: &mut dyn Write, rows: &[TailRow], run_level: bool) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "Runnable waits at the tail per comm (every wait, after wakeup or preemption; Welch t on per-{} p99 and max)",
        if run_level { "run" } else { "batch" }
    )?;
    writeln!(
        out,
        "  {:<20} {:>7} {:>8} {:>8} | {:>7} {:>8} {:>8} | {:>8} {:>8}  p adj (p99, max)",
        "comm", "base n", "p99", "max", "new n", "p99", "max", "p99 chg", "max chg",
    )?;
    let shown: Vec<&TailRow> = rows
        .iter()
        .filter(|r| r.direction != "none")
        .chain(rows.iter().filter(|r| r.direction == "none").take(3))
        .take(TEXT_ROWS)
        .collect();
    for r in &shown {
        let mut line = format!(
            "  {:<20} {:>7} {:>8} {:>8} | {:>7} {:>8} {:>8} | {:>8} {:>8}  {}, {}",
            r.comm,
            r.base.count,
            opt_ns(r.base.p99_ns),
            opt_ns(r.base.max_ns),
            r.new.count,
            opt_ns(r.new.p99_ns),
            opt_ns(r.new.max_ns),
            pct(r.p99_change_pct),
            pct(r.max_change_pct),
            p_text(&r.p99_verdict, r.untested.as_deref()),
            p_text(&r.max_verdict, r.untested.as_deref()),
        );
        if r.direction != "none" {
            line.push_str(&format!(" {}", r.direction));
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    if rows.len() > shown.len() {
        writeln!(
            out,
            "  … {} more rows (--format json)",
            rows.len() - shown.len()
        )?;
    }
    Ok(())
}

fn write_detectors(out: &mut dyn Write, rows: &[DetectorRow]) -> io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "Findings per detector (per run; Welch t over runs)")?;
    for d in rows {
        let list = |v: &[Option<usize>]| {
            v.iter()
                .map(|c| c.map_or_else(|| "skipped".to_string(), |c| c.to_string()))
                .collect::<Vec<_>>()
                .join(",")
        };
        let sev = |s: Option<stallscope_model::FindingSeverity>| s.map_or("", |s| s.name());
        writeln!(
            out,
            "  {:<22} base {:<12} {:<6}  new {:<12} {:<6} {}",
            d.detector,
            format!("[{}]", list(&d.base_findings)),
            sev(d.base_max_severity),
            format!("[{}]", list(&d.new_findings)),
            sev(d.new_max_severity),
            p_text(&d.verdict, d.untested.as_deref())
        )?;
        for title in d.new_titles.iter().take(1) {
            writeln!(out, "      new: {title}")?;
        }
    }
    Ok(())
}

fn write_metrics(out: &mut dyn Write, m: &MetricsComparison) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "Metrics ({}; mean ±stddev% over runs; Welch t)",
        m.format
    )?;
    writeln!(
        out,
        "  {:>14} {:>8} {:>9} {:>14} {:>8} {:>10}    metric",
        "base", "±stddev", "%change", "new", "±stddev", "p adj"
    )?;
    for r in &m.rows {
        let side = |s: &Option<crate::metrics::MetricSide>| match s {
            Some(s) if s.runs >= 2 => (fmt_value(s.mean), format!("±{:.1}%", s.stddev_pct)),
            Some(s) => (fmt_value(s.mean), String::new()),
            None => ("-".to_string(), String::new()),
        };
        let (bm, bs) = side(&r.base);
        let (nm, ns) = side(&r.new);
        let unit = if r.unit.is_empty() {
            String::new()
        } else {
            format!(" ({})", r.unit)
        };
        writeln!(
            out,
            "  {:>14} {:>8} {:>9} {:>14} {:>8} {}  {}{}",
            bm,
            bs,
            pct(r.change_pct),
            nm,
            ns,
            p_text(&r.verdict, None),
            r.name,
            unit
        )?;
        if let Some(u) = &r.untested {
            writeln!(out, "  {:>14} (no test: {u})", "")?;
        }
    }
    Ok(())
}

fn write_profile(out: &mut dyn Write, p: &ProfileComparison) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "Profile: self share of samples per function (test: {}; totals base {:?}, new {:?})",
        p.test, p.base_totals, p.new_totals
    )?;
    writeln!(
        out,
        "  {:>8} {:>8} {:>9} {:>8} {:>8} {:>10}    {:>8} {:>8}  function",
        "base", "±stddev", "%change", "new", "±stddev", "p adj", "children", "new"
    )?;
    let repeated = p.base_runs >= 2 && p.new_runs >= 2;
    for r in p.functions.iter().take(TEXT_ROWS) {
        let sd = |sd: f64, mean: f64| {
            if repeated && mean > 0.0 {
                format!("±{:.1}%", sd / mean * 100.0)
            } else {
                String::new()
            }
        };
        writeln!(
            out,
            "  {:>7.2}% {:>8} {:>9} {:>7.2}% {:>8} {}    {:>7.2}% {:>7.2}%  {}",
            r.base.self_share * 100.0,
            sd(r.base.self_stddev, r.base.self_share),
            pct(r.self_change_pct),
            r.new.self_share * 100.0,
            sd(r.new.self_stddev, r.new.self_share),
            p_text(&r.self_verdict, None),
            r.base.children_share * 100.0,
            r.new.children_share * 100.0,
            r.function
        )?;
    }
    if p.functions.len() > TEXT_ROWS {
        writeln!(
            out,
            "  … {} more rows (--format json)",
            p.functions.len() - TEXT_ROWS
        )?;
    }
    writeln!(
        out,
        "  self share, significant rises: {}",
        list_or_none(&p.rises)
    )?;
    writeln!(
        out,
        "  self share, significant falls: {}",
        list_or_none(&p.falls)
    )?;
    writeln!(
        out,
        "  children share, significant rises: {}",
        list_or_none(&p.children_rises)
    )?;
    writeln!(
        out,
        "  children share, significant falls: {}",
        list_or_none(&p.children_falls)
    )?;
    write_detectors(out, &p.detectors)
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_p_values() {
        assert_eq!(short_ns(812), "812ns");
        assert_eq!(short_ns(45_230), "45.2us");
        assert_eq!(short_ns(3_940_000), "3.94ms");
        assert_eq!(short_ns(1_200_000_000), "1.20s");
        assert_eq!(format_p(0.0432), "0.043");
        assert_eq!(format_p(3.1e-12), "3.1e-12");
        assert_eq!(fmt_value(333_339.76), "333340");
        assert_eq!(fmt_value(498.42), "498.4");
        assert_eq!(fmt_value(1.128947), "1.129");
        assert_eq!(fmt_value(0.0), "0");
        assert_eq!(fmt_value(0.4), "0.4000");
        assert_eq!(fmt_value(0.000_090_45), "9.045e-5");
    }
}
