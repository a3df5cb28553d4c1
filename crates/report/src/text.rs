//! Text rendering.
//!
//! Full mode: a header (inputs, events, time range, detectors run and skipped with the
//! record command, data quality), then one block per finding, most severe first:
//!
//! ```text
//! [HIGH] runqueue-starvation: cyclictest (pid 12897) waited 98.766 ms runnable on CPU 1 while …
//!   window   595.127047000 .. 595.225813000 (98.766 ms)   CPUs 1
//!   victim   cyclictest (pid 12897)  nice=0 prio=120 weight=1024
//!   culprit  stress-ng-cpu (pid 12892)  nice=-20 prio=100 run_ns=98600000 slices=25 weight=88761
//!   measures worst_wait_ns=98766000 waits=1 …
//!   evidence
//!     595.127047000  starve.perf.data:0x5a3c8  595127047000 1 12897 sched_switch prev_comm=…
//!   cause    nice_weight
//!   hint     Nice weight: stress-ng-cpu (pid 12892) has load weight 88761 against … (the
//!            cause's sentence first, then how the worst wait ended and how to confirm)
//! ```
//!
//! One-line mode: `SEVERITY DETECTOR START_S CPUS: TITLE` per finding, nothing else.
//! Color (severity labels) only when asked for (the CLI asks on a tty without `NO_COLOR`).

use std::io::{self, Write};

use stallscope_model::{fmt_secs_nsecs, Finding, FindingSeverity, Report};

/// Rendering options.
#[derive(Clone, Copy, Debug, Default)]
pub struct TextOptions {
    /// One line per finding.
    pub oneline: bool,
    /// ANSI colors on severity labels.
    pub color: bool,
    /// Data quality only where it can change the conclusion: warnings and errors, without
    /// examples (`-q`); the info notes are counted in one line.
    pub quiet: bool,
}

fn label(s: FindingSeverity, color: bool) -> String {
    let (text, code) = match s {
        FindingSeverity::High => ("HIGH", "1;31"),
        FindingSeverity::Medium => ("MEDIUM", "1;33"),
        FindingSeverity::Low => ("LOW", "1;36"),
    };
    if color {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

fn cpus(f: &Finding) -> String {
    f.cpus
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Writes `report`.
pub fn write(out: &mut dyn Write, report: &Report, opt: TextOptions) -> io::Result<()> {
    if opt.oneline {
        for f in &report.findings {
            writeln!(
                out,
                "{} {} {} CPU {}: {}",
                f.severity,
                f.detector,
                fmt_secs_nsecs(f.window.start_ns),
                cpus(f),
                f.title
            )?;
        }
        return Ok(());
    }
    write_header(out, report, &opt)?;
    for f in &report.findings {
        writeln!(out)?;
        write_finding(out, f, opt.color)?;
    }
    Ok(())
}

fn write_header(out: &mut dyn Write, r: &Report, opts: &TextOptions) -> io::Result<()> {
    for i in &r.inputs {
        writeln!(
            out,
            "Input:    {}  [{}]{}",
            i.path,
            i.format.as_deref().unwrap_or("unknown"),
            i.kernel_release
                .as_deref()
                .map(|k| format!("  kernel {k}"))
                .unwrap_or_default()
        )?;
    }
    let c = &r.capabilities;
    match (c.first_ts_ns, c.last_ts_ns) {
        (Some(a), Some(b)) => writeln!(
            out,
            "Events:   {} analyzed, {} .. {}",
            c.events_read,
            fmt_secs_nsecs(a),
            fmt_secs_nsecs(b)
        )?,
        _ => writeln!(out, "Events:   none analyzed")?,
    }
    match r.detectors_run.is_empty() {
        true => writeln!(out, "Ran:      no detector (see Skipped)")?,
        false => writeln!(out, "Ran:      {}", r.detectors_run.join(", "))?,
    }
    for s in &r.skipped {
        writeln!(out, "Skipped:  {} — {}", s.id, s.reason)?;
        writeln!(out, "          to record: {}", s.record_command)?;
    }
    let shown = |e: &&stallscope_model::QualityEntry| !opts.quiet || e.severity != "info";
    let hidden = r.data_quality.values().filter(|e| !shown(e)).count();
    if r.data_quality.values().any(|e| shown(&e)) {
        writeln!(out, "Data quality:")?;
        for (k, e) in r.data_quality.iter().filter(|(_, e)| shown(e)) {
            writeln!(
                out,
                "  {:<8} {k}: {} — {}",
                e.severity, e.count, e.description
            )?;
            if !opts.quiet {
                for ex in &e.examples {
                    writeln!(out, "           e.g. {ex}")?;
                }
            }
        }
    }
    if hidden > 0 {
        writeln!(out, "Data quality: {hidden} info notes not shown (-q)")?;
    }
    if let Some(why) = &r.nothing_analyzed {
        writeln!(out, "Nothing analyzed: {why}")?;
    }
    let count = |s| r.findings.iter().filter(|f| f.severity == s).count();
    writeln!(
        out,
        "Findings: {} ({} high, {} medium, {} low)",
        r.findings.len(),
        count(FindingSeverity::High),
        count(FindingSeverity::Medium),
        count(FindingSeverity::Low)
    )
}

fn write_finding(out: &mut dyn Write, f: &Finding, color: bool) -> io::Result<()> {
    writeln!(
        out,
        "[{}] {}: {}",
        label(f.severity, color),
        f.detector,
        f.title
    )?;
    // a finding from an input without times and CPUs (a perf report text) has no window
    let timeless = f.window.start_ns == 0 && f.window.end_ns == 0 && f.cpus.is_empty();
    if !timeless {
        writeln!(
            out,
            "  window   {} .. {}   CPUs {}",
            fmt_secs_nsecs(f.window.start_ns),
            fmt_secs_nsecs(f.window.end_ns),
            cpus(f)
        )?;
    }
    for t in &f.tasks {
        let ms: Vec<String> = t.measures.iter().map(|(k, v)| format!("{k}={v}")).collect();
        // a task the input does not name (pid -1: a report text without comm or pid)
        let who = match (t.comm.is_empty(), t.pid < 0) {
            (true, true) => "(not recorded)".to_string(),
            (false, true) => t.comm.to_string(),
            (_, false) => format!("{} (pid {})", t.comm, t.pid),
        };
        writeln!(out, "  {:<8} {who}  {}", t.role, ms.join(" "))?;
    }
    let ms: Vec<String> = f.measures.iter().map(|(k, v)| format!("{k}={v}")).collect();
    writeln!(out, "  measures {}", ms.join(" "))?;
    if !f.evidence.is_empty() {
        writeln!(out, "  evidence")?;
        for e in &f.evidence {
            writeln!(
                out,
                "    {}  {}  {}",
                fmt_secs_nsecs(e.ts_ns),
                e.source,
                e.text
            )?;
            if let Some(site) = &e.site {
                writeln!(out, "      ↳ {site}")?;
            }
            if !e.stack.is_empty() {
                writeln!(out, "        stack: {}", e.stack.join(" ← "))?;
            }
        }
    }
    if let Some(c) = &f.cause {
        writeln!(out, "  cause    {}", c.kind)?;
    }
    writeln!(out, "  hint     {}", f.hint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{Evidence, FindingTask, Window};

    fn finding(sev: FindingSeverity) -> Finding {
        Finding {
            cause: None,
            detector: "runqueue-starvation".into(),
            severity: sev,
            title: "t waited".into(),
            window: Window {
                start_ns: 1_500_000_000,
                end_ns: 2_000_000_000,
            },
            cpus: vec![1],
            tasks: vec![FindingTask {
                pid: 5,
                comm: "t".into(),
                role: "victim".into(),
                measures: Default::default(),
            }],
            measures: [("worst_wait_ns".to_string(), 7i64)].into_iter().collect(),
            evidence: vec![Evidence {
                ts_ns: 1_500_000_000,
                source: "x.txt:3".into(),
                text: "original line".into(),
                stack: vec!["io_schedule".into(), "ext4_sync_file".into()],
                site: Some("fio (7) blocked (D) in io_schedule ← ext4_sync_file".into()),
            }],
            hint: "h".into(),
        }
    }

    #[test]
    fn blocks_and_oneline() {
        let mut r = Report::new();
        r.findings = vec![
            finding(FindingSeverity::Low),
            finding(FindingSeverity::High),
        ];
        r.sort_findings();
        let mut full = Vec::new();
        write(&mut full, &r, TextOptions::default()).unwrap();
        let full = String::from_utf8(full).unwrap();
        assert!(full.contains("Findings: 2 (1 high, 0 medium, 1 low)"));
        let high = full.find("[HIGH]").unwrap();
        let low = full.find("[LOW]").unwrap();
        assert!(high < low, "most severe first");
        assert!(full.contains("    1.500000000  x.txt:3  original line\n"));
        assert!(full.contains("      ↳ fio (7) blocked (D) in io_schedule ← ext4_sync_file\n"));
        assert!(full.contains("        stack: io_schedule ← ext4_sync_file\n"));
        let mut one = Vec::new();
        write(
            &mut one,
            &r,
            TextOptions {
                oneline: true,
                color: false,
                quiet: false,
            },
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(one).unwrap(),
            "high runqueue-starvation 1.500000000 CPU 1: t waited\nlow runqueue-starvation 1.500000000 CPU 1: t waited\n"
        );
    }

    /// A finding of a perf report text (no times, CPUs, comms or pids): no `window 0 .. 0`
    /// line and no `(pid -1)`.
    #[test]
    fn timeless_findings_print_no_window() {
        let mut f = finding(FindingSeverity::Medium);
        f.window = Window {
            start_ns: 0,
            end_ns: 0,
        };
        f.cpus.clear();
        f.tasks[0].pid = -1;
        f.tasks[0].comm = String::new();
        let mut r = Report::new();
        r.findings = vec![f];
        let mut full = Vec::new();
        write(&mut full, &r, TextOptions::default()).unwrap();
        let full = String::from_utf8(full).unwrap();
        assert!(!full.contains("window"), "{full}");
        assert!(
            !full.contains("pid -1") && full.contains("(not recorded)"),
            "{full}"
        );
    }

    #[test]
    fn json_round_trips() {
        let mut r = Report::new();
        r.findings = vec![finding(FindingSeverity::Medium)];
        let mut buf = Vec::new();
        crate::json::write(&mut buf, &r).unwrap();
        let back = crate::json::parse(std::str::from_utf8(&buf).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
