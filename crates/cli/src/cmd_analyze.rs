//! `stallscope analyze`: runs the detectors over the inputs and prints the report — text
//! (one block per finding, most severe first, with evidence; `--oneline` for one line per
//! finding) or the `stallscope.report/1` JSON document (`docs/report.schema.json`).
//!
//! Evidence of text inputs shows the original trace lines: after the analysis, the lines
//! named by the findings are read again from the files (stdin cannot be re-read; its
//! evidence keeps the normalized `dump` line).
//!
//! Exit status: 0, or 1 when `--fail-on SEVERITY` is given and a finding of at least that
//! severity exists (see [`failed`]); errors exit 2 as for every command.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use stallscope::detect::registry::{self, Entry};
use stallscope::detect::{Engine, Params};
use stallscope::model::{
    time::parse_secs_frac, Capabilities, DataQuality, Finding, FindingSeverity, Report,
    ReportInput, Tid, TraceMeta, Ts,
};
use stallscope::profile_analysis::ProfileInputs;
use stallscope::read::profile::KernelSymbolSource;
use stallscope::report::text::TextOptions;

use crate::common::{CliError, InputArgs, OutputFormat};

/// Set when `--fail-on` matched a finding.
static FAIL_ON_MATCHED: AtomicBool = AtomicBool::new(false);

/// True when the last `analyze` run found a finding at or above its `--fail-on` severity.
pub fn failed() -> bool {
    FAIL_ON_MATCHED.load(Ordering::Relaxed)
}

/// Set when `--fail-on` was given and nothing could be analyzed (or the filters match
/// nothing): a gate must not pass on nothing.
static GATE_ON_NOTHING: AtomicBool = AtomicBool::new(false);

/// True when the last `analyze` run had `--fail-on` and analyzed nothing (exit 2).
pub fn gated_on_nothing() -> bool {
    GATE_ON_NOTHING.load(Ordering::Relaxed)
}

/// Arguments of `stallscope analyze`.
#[derive(Args, Debug)]
#[command(
    after_help = "Detectors: `stallscope detectors`; what each finds and its thresholds: \
`stallscope explain ID`.\n\n\
Examples:\n  stallscope analyze perf.data\n  stallscope analyze --oneline --fail-on high perf.data\n  \
stallscope analyze --select runqueue-starvation --set runqueue-starvation.threshold_ns=5ms trace.txt\n  \
stallscope analyze --time 595.1..595.3 --pid 12897 --format json perf.data | jq .findings"
)]
pub struct AnalyzeArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
    /// Run only these detectors (comma-separated ids).
    #[arg(long, value_name = "IDS")]
    select: Option<String>,
    /// Do not run these detectors (comma-separated ids).
    #[arg(long, value_name = "IDS")]
    ignore: Option<String>,
    /// Set a detector threshold: ID.PARAM=VALUE (durations accept ns/us/ms/s). Repeatable.
    #[arg(long = "set", value_name = "ID.PARAM=VALUE")]
    sets: Vec<String>,
    /// Analyze only events in this time range, seconds in the trace clock: A..B, A.. or ..B.
    #[arg(long, value_name = "A..B")]
    time: Option<String>,
    /// Report only findings involving these CPUs (list like 0-3,5).
    #[arg(long, value_name = "LIST")]
    cpu: Option<String>,
    /// Report only findings naming these task ids (comma-separated).
    #[arg(long, value_name = "LIST")]
    pid: Option<String>,
    /// Exit with status 1 when a finding of this severity or higher exists: high, medium, low.
    #[arg(long, value_name = "SEVERITY")]
    fail_on: Option<String>,
    /// One line per finding (text only).
    #[arg(long)]
    oneline: bool,
    /// Also write a self-contained HTML report (findings, per-CPU timelines around them,
    /// wait histograms; no network access) to FILE. Reads the inputs a second time.
    #[arg(long, value_name = "FILE")]
    html: Option<std::path::PathBuf>,
    /// Kernel symbol table for CPU-profile samples (`/proc/kallsyms` of the recording host;
    /// default: this host's when the kernel release matches; `none`: addresses).
    #[arg(long, value_name = "FILE")]
    kallsyms: Option<String>,
}

fn split_ids(s: &str) -> Result<Vec<&'static Entry>, CliError> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|id| {
            registry::find(id).ok_or_else(|| {
                CliError::Usage(format!(
                    "unknown detector {id:?}; expected one of: {}",
                    registry::ids()
                ))
            })
        })
        .collect()
}

/// The selected detectors with their parameters.
fn selected(args: &AnalyzeArgs) -> Result<Vec<(&'static Entry, Params)>, CliError> {
    let mut list: Vec<&'static Entry> = match &args.select {
        Some(s) => split_ids(s)?,
        None => registry::DETECTORS.iter().collect(),
    };
    if let Some(s) = &args.ignore {
        let ignored = split_ids(s)?;
        list.retain(|e| !ignored.iter().any(|i| i.info.id == e.info.id));
    }
    let mut out: Vec<(&'static Entry, Params)> = list
        .into_iter()
        .map(|e| (e, Params::defaults(e.info.params)))
        .collect();
    for s in &args.sets {
        let bad = || CliError::Usage(format!("bad --set {s:?}; expected ID.PARAM=VALUE"));
        let (key, value) = s.split_once('=').ok_or_else(bad)?;
        let (id, param) = key.split_once('.').ok_or_else(bad)?;
        let entry = registry::find(id).ok_or_else(|| {
            CliError::Usage(format!(
                "--set {s:?}: unknown detector {id:?}; expected one of: {}",
                registry::ids()
            ))
        })?;
        if let Some((_, p)) = out.iter_mut().find(|(e, _)| e.info.id == id) {
            p.set(entry.info.params, param, value)
                .map_err(|m| CliError::Usage(format!("--set {s:?}: {m}")))?;
        } else {
            // not selected: still validate the name and value
            Params::defaults(entry.info.params)
                .set(entry.info.params, param, value)
                .map_err(|m| CliError::Usage(format!("--set {s:?}: {m}")))?;
        }
    }
    Ok(out)
}

/// Parses `A..B` (seconds with an optional fraction; either side may be empty).
pub fn parse_time_range(s: &str) -> Result<(Ts, Ts), CliError> {
    let bad = || {
        CliError::Usage(format!(
            "bad --time {s:?}; expected A..B in seconds, e.g. 595.1..595.3"
        ))
    };
    let (a, b) = s.split_once("..").ok_or_else(bad)?;
    let secs = |t: &str, open: Ts| -> Result<Ts, CliError> {
        let t = t.trim();
        if t.is_empty() {
            return Ok(open);
        }
        if t.bytes().all(|c| c.is_ascii_digit()) {
            return t
                .parse::<u64>()
                .ok()
                .and_then(|v| v.checked_mul(1_000_000_000))
                .ok_or_else(bad);
        }
        parse_secs_frac(t.as_bytes()).ok_or_else(bad)
    };
    let (a, b) = (secs(a, 0)?, secs(b, Ts::MAX)?);
    if a > b {
        return Err(bad());
    }
    Ok((a, b))
}

/// Parses a CPU list (`0-3,5`).
fn parse_cpu_list(s: &str) -> Result<BTreeSet<u32>, CliError> {
    let bad = || CliError::Usage(format!("bad --cpu {s:?}; expected a list like 0-3,5"));
    let mut set = BTreeSet::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (
                a.parse::<u32>().map_err(|_| bad())?,
                b.parse::<u32>().map_err(|_| bad())?,
            ),
            None => {
                let v = part.parse::<u32>().map_err(|_| bad())?;
                (v, v)
            }
        };
        if a > b || b - a > 65536 {
            return Err(bad());
        }
        set.extend(a..=b);
    }
    Ok(set)
}

fn parse_pid_list(s: &str) -> Result<BTreeSet<i32>, CliError> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse::<i32>()
                .map_err(|_| CliError::Usage(format!("bad --pid {s:?}; expected pids like 12,34")))
        })
        .collect()
}

/// Replaces the evidence text of text inputs by the original lines.
fn original_lines(report: &mut Report, paths: &[(String, bool)]) {
    for (path, is_text) in paths {
        if !is_text || path == "-" {
            continue;
        }
        let prefix = format!("{path}:");
        let mut wanted: BTreeMap<u64, String> = BTreeMap::new();
        for f in &report.findings {
            for e in &f.evidence {
                if let Some(line) = e
                    .source
                    .strip_prefix(&prefix)
                    .and_then(|l| l.parse::<u64>().ok())
                {
                    wanted.insert(line, String::new());
                }
            }
        }
        let Some(&last) = wanted.keys().next_back() else {
            continue;
        };
        let Ok(input) = stallscope::read::Input::open(path) else {
            continue; // unreadable now: the dump lines stay (the analysis itself read it)
        };
        let reader = BufReader::new(input.into_reader());
        for (i, line) in reader.split(b'\n').enumerate() {
            let n = i as u64 + 1;
            let Ok(line) = line else { break };
            if let Some(slot) = wanted.get_mut(&n) {
                *slot = String::from_utf8_lossy(&line)
                    .trim_end_matches('\r')
                    .to_string();
            }
            if n >= last {
                break;
            }
        }
        for f in &mut report.findings {
            for e in &mut f.evidence {
                if let Some(line) = e
                    .source
                    .strip_prefix(&prefix)
                    .and_then(|l| l.parse::<u64>().ok())
                {
                    if let Some(text) = wanted.get(&line).filter(|t| !t.is_empty()) {
                        e.text = text.clone();
                    }
                }
            }
        }
    }
}

/// One reading of the inputs through the detectors, up to the engine's end.
struct Pass {
    engine: Engine,
    inputs: Option<stallscope::Inputs>,
    metas: Vec<TraceMeta>,
    symbol_notes: Vec<String>,
    profile_dq: DataQuality,
}

/// Reads the inputs once through a new engine; `park`: detectors the inputs cannot satisfy
/// get no events (`Engine::park_unmeetable`; the caller checks `Engine::parking_failed`).
fn analysis_pass(
    args: &AnalyzeArgs,
    detectors: &[(&'static Entry, Params)],
    symbols: &KernelSymbolSource,
    text_profiles: &ProfileInputs,
    time: Option<(Ts, Ts)>,
    park: bool,
) -> Result<Pass, CliError> {
    let mut inputs = match text_profiles.profiles_only {
        true => None,
        false => Some(args.input.open()?),
    };
    let mut metas: Vec<_> = match &inputs {
        Some(inputs) => inputs.metas().into_iter().cloned().collect(),
        None => text_profiles.metas(&args.input.files),
    };
    let symbol_notes = stallscope::profile_analysis::attach_kallsyms_text(&mut metas, symbols);
    let meta_refs: Vec<_> = metas.iter().collect();
    let mut engine = Engine::new(
        detectors.iter().map(|(e, p)| (e.make)(p)).collect(),
        &meta_refs,
    );
    if let Some((a, b)) = time {
        engine.set_time_range(a, b);
    }
    if let Some(load) = stallscope::profile_analysis::stack_symbols(symbols, &metas) {
        engine.set_stack_symbols(load);
    }
    if let Some(name) = stallscope::profile_analysis::user_frame_names(&metas) {
        engine.set_user_frame_names(name);
    }
    if park {
        engine.park_unmeetable();
    }
    let mut profile = stallscope::profile_analysis::Collector::new(symbols, text_profiles);
    let mut buf = Vec::new();
    if let Some(inputs) = inputs.as_mut() {
        // Runs of up to 64 events, each checked for order by `Inputs` right after this
        // pass, while they are still in L1 (a whole batch, up to 1 MiB, is not).
        let mut visit = |run: &[stallscope::model::Event]| {
            engine.process_run(run);
            for ev in run {
                profile.push(ev);
            }
        };
        while inputs.visit_batch(&mut buf, &mut visit)? {}
    }
    let mut profile_dq = profile.finish(&mut engine, &meta_refs, time)?;
    profile_dq.merge(&stallscope::profile_analysis::feed_text_profiles(
        text_profiles,
        &mut engine,
        time,
    ));
    Ok(Pass {
        engine,
        inputs,
        metas,
        symbol_notes,
        profile_dq,
    })
}

/// Runs the command.
pub fn run(args: &AnalyzeArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let fail_on = match &args.fail_on {
        None => None,
        Some(s) => Some(FindingSeverity::from_name(s).ok_or_else(|| {
            CliError::Usage(format!(
                "unknown --fail-on {s:?}; expected high, medium or low"
            ))
        })?),
    };
    let time = args.time.as_deref().map(parse_time_range).transpose()?;
    let cpus = args.cpu.as_deref().map(parse_cpu_list).transpose()?;
    let pids = args.pid.as_deref().map(parse_pid_list).transpose()?;
    let detectors = selected(args)?;
    let symbols = stallscope::profile_analysis::symbol_source(args.kallsyms.as_deref());
    let text_profiles =
        stallscope::profile_analysis::read_text_profiles(&args.input.files, &symbols)?;
    // Parked detectors (see `Engine::park_unmeetable`) need inputs that can be read again.
    let rereadable = !args.input.files.iter().any(|f| f == "-");
    let mut pass = analysis_pass(args, &detectors, &symbols, &text_profiles, time, rereadable)?;
    if pass.engine.parking_failed() {
        pass = analysis_pass(args, &detectors, &symbols, &text_profiles, time, false)?;
    }
    let Pass {
        mut engine,
        inputs,
        metas,
        symbol_notes,
        profile_dq,
    } = pass;
    let cpus_seen = engine.cpus_seen();
    let pids_unseen: Vec<Tid> = pids
        .iter()
        .flatten()
        .copied()
        .filter(|&p| engine.task_seen(p) == (false, true))
        .collect();
    // text inputs learn kernel function names while they are read (the frames of `perf
    // script` callchains): the recording host's names, preferred for the stacks
    if let Some(k) = inputs
        .as_ref()
        .and_then(|i| i.metas().into_iter().find_map(|m| m.kallsyms.clone()))
        .filter(|_| metas.iter().all(|m| m.kallsyms.is_none()))
    {
        engine.set_stack_symbols(Box::new(move || Ok(k)));
    }
    let result = engine.finish();
    let mut dq = inputs.as_ref().map(|i| i.quality()).unwrap_or_default();
    dq.merge(&profile_dq);
    for note in &symbol_notes {
        dq.add(
            "workqueue-functions-unnamed",
            stallscope::model::Severity::Info,
            "workqueue work functions are shown as kernel addresses (no kernel symbol table)",
            1,
            || note.clone(),
        );
    }
    dq.merge(&result.quality);
    let mut report = Report::new();
    // text formats are known after reading (perf script text is sniffed too)
    let metas_after: Vec<_> = match &inputs {
        Some(inputs) => inputs.metas().into_iter().cloned().collect(),
        None => metas.clone(),
    };
    report.inputs = metas_after
        .iter()
        .map(|m| ReportInput {
            path: m.path.clone(),
            format: m.format.map(|f| f.name().to_string()),
            kernel_release: m.kernel_release.clone(),
            nr_cpus: m.nr_cpus,
        })
        .collect();
    if text_profiles.profiles_only {
        report.inputs = text_profiles.report_inputs(&args.input.files);
    }
    report.capabilities = Capabilities {
        events: result.events,
        events_read: result.events_read,
        first_ts_ns: result.first_ts,
        last_ts_ns: result.last_ts,
        system_context: metas_after.iter().any(|m| m.system_context.is_some()),
    };
    report.data_quality = stallscope::report::quality_entries(&dq);
    for o in result.outcomes {
        match o.result {
            Ok(findings) => {
                report.detectors_run.push(o.id.to_string());
                report.findings.extend(findings);
            }
            Err(reason) => report.skipped.push(stallscope::model::SkippedDetector {
                id: o.id.to_string(),
                reason,
                record_command: o.record_command.to_string(),
            }),
        }
    }
    let keep = |f: &Finding| {
        cpus.as_ref()
            .is_none_or(|set| f.cpus.iter().any(|c| set.contains(c)))
            && pids
                .as_ref()
                .is_none_or(|set| f.tasks.iter().any(|t| set.contains(&t.pid)))
    };
    stallscope::profile_analysis::explain_skipped(&mut report.skipped);
    let nr_cpus = metas_after
        .iter()
        .filter_map(|m| m.nr_cpus)
        .max()
        .unwrap_or(0)
        .max(cpus_seen);
    report.nothing_analyzed = nothing_analyzed(
        &report,
        (args.time.as_deref(), cpus.as_ref(), nr_cpus),
        (pids.as_ref(), &pids_unseen),
        text_profiles.profiles_only,
    );
    report.findings.retain(keep);
    report.sort_findings();
    let text_inputs: Vec<(String, bool)> = metas_after
        .iter()
        .map(|m| (m.path.clone(), m.format.is_some_and(|f| f.is_text())))
        .collect();
    original_lines(&mut report, &text_inputs);
    if let Some(min) = fail_on {
        if report.findings.iter().any(|f| f.severity >= min) {
            FAIL_ON_MATCHED.store(true, Ordering::Relaxed);
        }
        if report.nothing_analyzed.is_some() {
            GATE_ON_NOTHING.store(true, Ordering::Relaxed);
        }
    }
    if let Some(why) = &report.nothing_analyzed {
        eprintln!("stallscope analyze: nothing analyzed: {why}");
    }
    if let Some(path) = &args.html {
        write_html(args, &report, time, path)?;
    }
    match args.format {
        OutputFormat::Json => stallscope::report::json::write(out, &report)?,
        OutputFormat::Text => {
            use std::io::IsTerminal;
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            stallscope::report::text::write(
                out,
                &report,
                TextOptions {
                    oneline: args.oneline,
                    color,
                },
            )?
        }
    }
    Ok(())
}

/// Why nothing was analyzed (no event read, none in the `--time` range) or why a filter
/// (`--cpu`, `--pid`) matches nothing in the inputs; `None` when something was analyzed.
fn nothing_analyzed(
    report: &Report,
    (time, cpus, nr_cpus): (Option<&str>, Option<&BTreeSet<u32>>, u32),
    (pids, pids_unseen): (Option<&BTreeSet<Tid>>, &[Tid]),
    profiles_only: bool,
) -> Option<String> {
    let caps = &report.capabilities;
    if caps.events_read == 0 && !profiles_only {
        return Some(match time {
            Some(t) => format!(
                "no event of the inputs lies in the --time range {t} (see `stallscope info` for the trace's time range)"
            ),
            None => "the inputs hold no event stallscope could read (see data quality; `stallscope info` lists what the files contain)".to_string(),
        });
    }
    if let Some(set) = cpus.filter(|_| nr_cpus > 0) {
        if set.iter().all(|&c| c >= nr_cpus) {
            return Some(format!(
                "--cpu names no CPU of the inputs (they have CPUs 0-{})",
                nr_cpus - 1
            ));
        }
    }
    if let Some(set) = pids {
        if !set.is_empty() && set.iter().all(|p| pids_unseen.contains(p)) {
            return Some(format!(
                "--pid names no task of the inputs ({} never appears in their scheduler events)",
                set.iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    None
}

/// Writes the `--html` page: the windows around the findings come from a second pass over
/// the inputs (stdin cannot be re-read: its page has no timelines and says so).
fn write_html(
    args: &AnalyzeArgs,
    report: &Report,
    time: Option<(Ts, Ts)>,
    path: &std::path::Path,
) -> Result<(), CliError> {
    use stallscope::model::FindingWindows;
    use stallscope::windows::{collect, WindowOptions};
    let opts = WindowOptions {
        time_range: time.unwrap_or((0, Ts::MAX)),
        ..WindowOptions::default()
    };
    let windows = if args.input.files.iter().any(|f| f == "-") {
        FindingWindows {
            margin_ns: opts.margin_ns,
            max_items: opts.max_items,
            omitted_windows: report.findings.len(),
            note: "Standard input cannot be read a second time: no timelines.".to_string(),
            ..FindingWindows::default()
        }
    } else if report
        .inputs
        .iter()
        .any(|i| matches!(i.format.as_deref(), Some("folded" | "perf-report-text")))
    {
        FindingWindows {
            margin_ns: opts.margin_ns,
            max_items: opts.max_items,
            omitted_windows: report.findings.len(),
            note: "CPU-profile text inputs (folded, perf report) have no timelines.".to_string(),
            ..FindingWindows::default()
        }
    } else if report.findings.is_empty() {
        FindingWindows {
            margin_ns: opts.margin_ns,
            max_items: opts.max_items,
            ..FindingWindows::default()
        }
    } else {
        collect(&mut args.input.open()?, &report.findings, opts)?
    };
    let bad = |e: std::io::Error| CliError::Usage(format!("--html {}: {e}", path.display()));
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).map_err(bad)?);
    stallscope::report::html::write(&mut file, report, &windows, Default::default())
        .map_err(bad)?;
    file.flush().map_err(bad)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_ranges() {
        assert_eq!(
            parse_time_range("595.1..595.3").unwrap(),
            (595_100_000_000, 595_300_000_000)
        );
        assert_eq!(parse_time_range("..2").unwrap(), (0, 2_000_000_000));
        assert_eq!(parse_time_range("1..").unwrap(), (1_000_000_000, Ts::MAX));
        assert!(parse_time_range("3..2").is_err());
        assert!(parse_time_range("x").is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-2,5")
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>(),
            vec![0, 1, 2, 5]
        );
        assert!(parse_cpu_list("2-1").is_err());
    }
}
