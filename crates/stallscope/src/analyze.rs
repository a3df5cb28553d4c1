//! [`analyze`]: the analysis as a library call — input files and [`AnalyzeOptions`] in, the
//! [`Report`] out (findings with their causes, tasks, measures and evidence; data quality;
//! skipped detectors with the command that records what they need). `stallscope analyze`
//! is this call plus argument parsing and rendering; the Python package calls it too.
//!
//! ```
//! use stallscope::analyze::{analyze, AnalyzeOptions};
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/sched/starve.perf.data");
//! let mut options = AnalyzeOptions::new(vec![path.to_string()]);
//! options.select_detectors(Some("runqueue-starvation"), None, &[])?;
//! let report = analyze(&options)?;
//! assert_eq!(report.detectors_run, ["runqueue-starvation"]);
//! for f in &report.findings {
//!     println!("[{}] {}", f.severity.name(), f.title);
//! }
//! # Ok::<(), stallscope::analyze::AnalyzeError>(())
//! ```
//!
//! One analysis reads the inputs once through the detector engine; when detectors whose
//! needs the file does not declare were parked and turn out to be met, it reads them again
//! without parking (never for standard input; another product in the same reading is fed by
//! the first reading only). [`analyze_with`] feeds another product ([`SameReading`], e.g. an export's
//! writer) from that one reading, so its findings are the report's and the data is read
//! once. Evidence of text inputs is replaced by the original lines (the files are read again
//! up to the last line a finding names).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::{BufRead, BufReader};

use stallscope_detect::registry::{self, Entry};
use stallscope_detect::{Engine, Params};
use stallscope_model::InputFormat;
use stallscope_model::{
    time::parse_secs_frac, Capabilities, DataQuality, Finding, Problem, Report, ReportInput, Tid,
    TraceMeta, Ts,
};
use stallscope_read::profile::KernelSymbolSource;
use stallscope_read::ReadError;

use crate::profile_analysis::{self, ProfileInputs};
use crate::Inputs;

/// What to analyze and how.
#[derive(Clone)]
pub struct AnalyzeOptions {
    /// Trace or profile files (`-` = standard input), merged in time order.
    pub files: Vec<String>,
    /// Skip format detection.
    pub input_format: Option<InputFormat>,
    /// Merge files that cannot be one recording (another kernel, host or clock).
    pub merge_unrelated: bool,
    /// Merge files that hold the same events, identical events counted once.
    pub merge_overlapping: bool,
    /// The detectors to run with their parameters (default: all, default thresholds).
    pub detectors: Vec<(&'static Entry, Params)>,
    /// Only events in this time range (ns of the trace clock, inclusive).
    pub time: Option<(Ts, Ts)>,
    /// Only findings involving these CPUs.
    pub cpus: Option<BTreeSet<u32>>,
    /// Only findings naming these task ids.
    pub pids: Option<BTreeSet<Tid>>,
    /// Kernel symbol table for CPU-profile samples and stacks: a `/proc/kallsyms` file of
    /// the recording host, `none`, or `None` for this host's when the release matches.
    pub kallsyms: Option<String>,
    /// Replace the evidence text of text inputs by their original lines (default true).
    pub original_lines: bool,
    /// Keep findings about the recorder's own threads (default false: left out and
    /// counted; see `stallscope_detect::recorder`).
    pub include_recorder: bool,
    /// Called with the opened inputs before they are read (e.g. to attach a progress
    /// callback with [`Inputs::on_progress`]).
    pub on_open: Option<fn(&mut Inputs)>,
}

impl AnalyzeOptions {
    /// Every detector with its default thresholds over `files`.
    pub fn new(files: Vec<String>) -> AnalyzeOptions {
        AnalyzeOptions {
            files,
            input_format: None,
            merge_unrelated: false,
            merge_overlapping: false,
            detectors: registry::DETECTORS
                .iter()
                .map(|e| (e, Params::defaults(e.info.params)))
                .collect(),
            time: None,
            cpus: None,
            pids: None,
            kallsyms: None,
            original_lines: true,
            include_recorder: false,
            on_open: None,
        }
    }

    /// Chooses the detectors as `analyze --select IDS --ignore IDS --set ID.PARAM=VALUE`
    /// does: comma-separated ids, `sets` applied to the selected ones (and validated for
    /// the others).
    pub fn select_detectors(
        &mut self,
        select: Option<&str>,
        ignore: Option<&str>,
        sets: &[String],
    ) -> Result<(), AnalyzeError> {
        self.detectors = detector_selection(select, ignore, sets)?;
        Ok(())
    }

    /// The inputs these options read.
    pub fn input(&self) -> crate::InputOptions {
        crate::InputOptions {
            files: self.files.clone(),
            input_format: self.input_format,
            merge_unrelated: self.merge_unrelated,
            merge_overlapping: self.merge_overlapping,
            on_open: self.on_open,
        }
    }

    /// Opens the inputs as these options say.
    pub fn open(&self) -> Result<Inputs, AnalyzeError> {
        self.input().open()
    }
}

/// Why an analysis could not run.
#[derive(Debug)]
pub enum AnalyzeError {
    /// An input could not be read: file, offset or line, expected vs found.
    Read(ReadError),
    /// The options are wrong (an unknown detector, a bad threshold).
    Usage(String),
    /// A table or file could not be written.
    Output(String),
}

impl fmt::Display for AnalyzeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnalyzeError::Read(e) => write!(f, "{e}"),
            AnalyzeError::Usage(m) | AnalyzeError::Output(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for AnalyzeError {}

impl From<ReadError> for AnalyzeError {
    fn from(e: ReadError) -> AnalyzeError {
        AnalyzeError::Read(e)
    }
}

fn split_ids(s: &str) -> Result<Vec<&'static Entry>, AnalyzeError> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|id| {
            registry::find(id).ok_or_else(|| {
                AnalyzeError::Usage(format!(
                    "unknown detector {id:?}; expected one of: {}",
                    registry::ids()
                ))
            })
        })
        .collect()
}

/// The detectors `--select` / `--ignore` / `--set` choose, with their parameters.
pub fn detector_selection(
    select: Option<&str>,
    ignore: Option<&str>,
    sets: &[String],
) -> Result<Vec<(&'static Entry, Params)>, AnalyzeError> {
    let mut list: Vec<&'static Entry> = match select {
        Some(s) => split_ids(s)?,
        None => registry::DETECTORS.iter().collect(),
    };
    if let Some(s) = ignore {
        let ignored = split_ids(s)?;
        list.retain(|e| !ignored.iter().any(|i| i.info.id == e.info.id));
    }
    let mut out: Vec<(&'static Entry, Params)> = list
        .into_iter()
        .map(|e| (e, Params::defaults(e.info.params)))
        .collect();
    for s in sets {
        let bad = || AnalyzeError::Usage(format!("bad --set {s:?}; expected ID.PARAM=VALUE"));
        let (key, value) = s.split_once('=').ok_or_else(bad)?;
        let (id, param) = key.split_once('.').ok_or_else(bad)?;
        let entry = registry::find(id).ok_or_else(|| {
            AnalyzeError::Usage(format!(
                "--set {s:?}: unknown detector {id:?}; expected one of: {}",
                registry::ids()
            ))
        })?;
        let checked = match out.iter_mut().find(|(e, _)| e.info.id == id) {
            Some((_, p)) => p.set(entry.info.params, param, value),
            // not selected: still validate the name and value
            None => Params::defaults(entry.info.params).set(entry.info.params, param, value),
        };
        checked.map_err(|m| AnalyzeError::Usage(format!("--set {s:?}: {m}")))?;
    }
    Ok(out)
}

/// Parses `A..B` (seconds with an optional fraction; either side may be empty: 0 and
/// `Ts::MAX`).
pub fn parse_time_range(s: &str) -> Result<(Ts, Ts), AnalyzeError> {
    let bad = || {
        AnalyzeError::Usage(format!(
            "bad --time {s:?}; expected A..B in seconds, e.g. 595.1..595.3"
        ))
    };
    let (a, b) = s.split_once("..").ok_or_else(bad)?;
    let secs = |t: &str, open: Ts| -> Result<Ts, AnalyzeError> {
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

/// Another product made from the analysis' own reading of the inputs (an export's
/// writer): it sees the inputs once they are open, then every event in time order, in runs,
/// before the detectors do.
pub trait SameReading {
    /// The inputs, opened, before their first event.
    fn open(&mut self, inputs: &Inputs);
    /// The next events, in time order.
    fn events(&mut self, run: &[stallscope_model::Event]);
    /// Whether [`SameReading::model`] is wanted (the product reads the one model, not
    /// only the events). Default: false.
    fn wants_model(&self) -> bool {
        false
    }
    /// The next analyzed events (those in the `time` range) with the transitions the
    /// analysis' timeline made of them, after the timeline applied them
    /// ([`stallscope_detect::engine::Engine::process_run_observed`]); only when
    /// [`SameReading::wants_model`].
    fn model(&mut self, _run: &stallscope_detect::engine::Run<'_>) {}
    /// The model after the last event (task names and last states), before the detectors
    /// finish; only when [`SameReading::wants_model`].
    fn end(&mut self, _timeline: &stallscope_timeline::Timeline) {}
}

/// What [`analyze_with`] gives besides the report: the inputs as read (text formats learn
/// their metadata while they are read) and their own data-quality counters.
pub struct Analysis {
    /// The report, as [`analyze`] returns it.
    pub report: Report,
    /// The inputs' descriptions after reading (empty for profile-only text inputs).
    pub metas: Vec<TraceMeta>,
    /// Events read from the inputs (all of them, also outside a `time` range).
    pub events_read: u64,
    /// The readers' and the detector engine's data-quality counters, merged.
    pub quality: DataQuality,
}

/// Runs the analysis: reads the inputs through the selected detectors and returns the
/// report, findings filtered by `cpus` / `pids` and sorted most severe first;
/// `report.nothing_analyzed` says why when nothing could be analyzed.
pub fn analyze(options: &AnalyzeOptions) -> Result<Report, AnalyzeError> {
    analyze_with(options, None).map(|a| a.report)
}

/// [`analyze`], feeding `product` from the same reading of the inputs (once: when parked
/// detectors turn out to be needed, only the analysis reads the inputs again).
pub fn analyze_with(
    options: &AnalyzeOptions,
    product: Option<&mut dyn SameReading>,
) -> Result<Analysis, AnalyzeError> {
    let symbols = profile_analysis::symbol_source(options.kallsyms.as_deref());
    // with no detector selected (a product alone, e.g. `export` without `--findings`) no
    // profile is read: nothing would use it
    let analyzing = !options.detectors.is_empty();
    let text_profiles = profile_analysis::read_text_profiles(&options.files, &symbols, analyzing)?;
    // Parked detectors (see `Engine::park_unmeetable`) need inputs that can be read again.
    // A product is fed by the first reading only: when parking fails (rare: a perf.data
    // event outside its declared ones), the analysis alone reads the inputs again.
    let rereadable = !options.files.iter().any(|f| stallscope_read::is_stream(f));
    let mut pass = analysis_pass(options, &symbols, &text_profiles, rereadable, product)?;
    if pass.engine.parking_failed() {
        pass = analysis_pass::<dyn SameReading>(options, &symbols, &text_profiles, false, None)?;
    }
    let Pass {
        mut engine,
        inputs,
        metas,
        symbol_notes,
        profile_dq,
    } = pass;
    let cpus_seen = engine.cpus_seen();
    let pids_unseen: Vec<Tid> = options
        .pids
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
        dq.add(Problem::WorkqueueFunctionsUnnamed, 1, || note.clone());
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
        report.inputs = text_profiles.report_inputs(&options.files);
    }
    report.capabilities = Capabilities {
        events: result.events,
        events_read: result.events_read,
        first_ts_ns: result.first_ts,
        last_ts_ns: result.last_ts,
        system_context: metas_after.iter().any(|m| m.system_context.is_some()),
    };
    report.data_quality = stallscope_report::quality_entries(&dq);
    for o in result.outcomes {
        match o.result {
            Ok(findings) => {
                report.detectors_run.push(o.id.to_string());
                report.findings.extend(findings);
            }
            Err(reason) => report.skipped.push(stallscope_model::SkippedDetector {
                id: o.id.to_string(),
                reason,
                record_command: o.record_command.to_string(),
            }),
        }
    }
    let keep = |f: &Finding| {
        options
            .cpus
            .as_ref()
            .is_none_or(|set| f.cpus.iter().any(|c| set.contains(c)))
            && options
                .pids
                .as_ref()
                .is_none_or(|set| f.tasks.iter().any(|t| set.contains(&t.pid)))
    };
    profile_analysis::explain_skipped(&mut report.skipped);
    let nr_cpus = metas_after
        .iter()
        .filter_map(|m| m.nr_cpus)
        .max()
        .unwrap_or(0)
        .max(cpus_seen);
    report.nothing_analyzed = nothing_analyzed(
        &report,
        options,
        nr_cpus,
        &pids_unseen,
        text_profiles.profiles_only,
    );
    report.findings.retain(keep);
    report.sort_findings();
    if options.original_lines {
        let text_inputs: Vec<(String, bool)> = metas_after
            .iter()
            .map(|m| (m.path.clone(), m.format.is_some_and(|f| f.is_text())))
            .collect();
        original_lines(&mut report, &text_inputs);
    }
    Ok(Analysis {
        report,
        events_read: inputs.as_ref().map_or(0, |i| i.events_read()),
        metas: match &inputs {
            Some(_) => metas_after,
            None => Vec::new(),
        },
        quality: dq,
    })
}

/// One reading of the inputs through the detectors, up to the engine's end.
struct Pass {
    engine: Engine,
    inputs: Option<Inputs>,
    metas: Vec<TraceMeta>,
    symbol_notes: Vec<String>,
    profile_dq: DataQuality,
}

/// Reads the inputs once through a new engine; `park`: detectors the inputs cannot satisfy
/// get no events (`Engine::park_unmeetable`; the caller checks `Engine::parking_failed`).
fn analysis_pass<P: SameReading + ?Sized>(
    options: &AnalyzeOptions,
    symbols: &KernelSymbolSource,
    text_profiles: &ProfileInputs,
    park: bool,
    mut product: Option<&mut P>,
) -> Result<Pass, AnalyzeError> {
    let mut inputs = match text_profiles.profiles_only {
        true => None,
        false => Some(options.open()?),
    };
    let mut metas: Vec<_> = match &inputs {
        Some(inputs) => inputs.metas().into_iter().cloned().collect(),
        None => text_profiles.metas(&options.files),
    };
    let symbol_notes = profile_analysis::attach_kallsyms_text(&mut metas, symbols);
    let meta_refs: Vec<_> = metas.iter().collect();
    let mut engine = Engine::new(
        options.detectors.iter().map(|(e, p)| (e.make)(p)).collect(),
        &meta_refs,
    );
    engine.include_recorder(options.include_recorder);
    if let Some((a, b)) = options.time {
        engine.set_time_range(a, b);
    }
    if let Some(load) = profile_analysis::stack_symbols(symbols, &metas) {
        engine.set_stack_symbols(load);
    }
    if let Some(name) = profile_analysis::user_frame_names(&metas) {
        engine.set_user_frame_names(name);
    }
    if park {
        engine.park_unmeetable();
    }
    let mut profile = profile_analysis::Collector::new(symbols, text_profiles);
    let analyzing = !options.detectors.is_empty(); // else no profile is collected
    let mut buf = Vec::new();
    if let Some(inputs) = inputs.as_mut() {
        if let Some(p) = product.as_deref_mut() {
            p.open(inputs);
        }
        // Runs of up to 64 events, each checked for order by `Inputs` right after this
        // pass, while they are still in L1 (a whole batch, up to 1 MiB, is not).
        let mut visit = |run: &[stallscope_model::Event]| {
            match product.as_deref_mut() {
                Some(p) if p.wants_model() => {
                    p.events(run);
                    engine.process_run_observed(run, Some(&mut |r| p.model(r)));
                }
                Some(p) => {
                    p.events(run);
                    engine.process_run(run);
                }
                None => engine.process_run(run),
            }
            if analyzing {
                for ev in run {
                    profile.push(ev);
                }
            }
        };
        while inputs.visit_batch(&mut buf, &mut visit)? {}
        if let Some(p) = product.filter(|p| p.wants_model()) {
            p.end(engine.timeline());
        }
    }
    let mut profile_dq = profile.finish(&mut engine, &meta_refs, options.time)?;
    profile_dq.merge(&profile_analysis::feed_text_profiles(
        text_profiles,
        &mut engine,
        options.time,
    ));
    Ok(Pass {
        engine,
        inputs,
        metas,
        symbol_notes,
        profile_dq,
    })
}

/// Replaces the evidence text of text inputs by the original lines.
fn original_lines(report: &mut Report, paths: &[(String, bool)]) {
    for (path, is_text) in paths {
        if !is_text || stallscope_read::is_stream(path) {
            continue;
        }
        let prefix = format!("{path}:");
        let line_of = |source: &str| {
            source
                .strip_prefix(&prefix)
                .and_then(|l| l.parse::<u64>().ok())
        };
        let mut wanted: BTreeMap<u64, String> = BTreeMap::new();
        for f in &report.findings {
            for e in &f.evidence {
                if let Some(line) = line_of(&e.source) {
                    wanted.insert(line, String::new());
                }
            }
        }
        let Some(&last) = wanted.keys().next_back() else {
            continue;
        };
        let Ok(input) = stallscope_read::Input::open(path) else {
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
                if let Some(text) = line_of(&e.source)
                    .and_then(|l| wanted.get(&l))
                    .filter(|t| !t.is_empty())
                {
                    e.text = text.clone();
                }
            }
        }
    }
}

/// Why nothing was analyzed (no event read, none in the time range, no detector could
/// run on what was read) or why a filter (CPUs, task ids) matches nothing in the inputs;
/// `None` when something was analyzed.
fn nothing_analyzed(
    report: &Report,
    options: &AnalyzeOptions,
    nr_cpus: u32,
    pids_unseen: &[Tid],
    profiles_only: bool,
) -> Option<String> {
    let caps = &report.capabilities;
    if caps.events_read == 0 && !profiles_only {
        return Some(match options.time {
            Some((a, b)) => format!(
                "no event of the inputs lies in the --time range {} (see `stallscope info` for the trace's time range)",
                range_text(a, b)
            ),
            None => "the inputs hold no event stallscope could read (see data quality; `stallscope info` lists what the files contain)".to_string(),
        });
    }
    if report.detectors_run.is_empty() && !options.detectors.is_empty() {
        // events were read, but none a detector uses: no verdict, not a clean bill
        return Some(
            "no detector could run: the inputs lack the events each one needs (`Skipped` says what to record for each)"
                .to_string(),
        );
    }
    if let Some(set) = options.cpus.as_ref().filter(|_| nr_cpus > 0) {
        if set.iter().all(|&c| c >= nr_cpus) {
            return Some(format!(
                "--cpu names no CPU of the inputs (they have CPUs 0-{})",
                nr_cpus - 1
            ));
        }
    }
    if let Some(set) = &options.pids {
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

/// `A..B` in seconds as given on the command line (open sides empty).
fn range_text(a: Ts, b: Ts) -> String {
    let side = |t: Ts, open: Ts| {
        if t == open {
            String::new()
        } else {
            let frac = format!("{:09}", t % 1_000_000_000);
            let frac = frac.trim_end_matches('0');
            if frac.is_empty() {
                (t / 1_000_000_000).to_string()
            } else {
                format!("{}.{frac}", t / 1_000_000_000)
            }
        }
    };
    format!("{}..{}", side(a, 0), side(b, Ts::MAX))
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
        assert_eq!(range_text(595_100_000_000, Ts::MAX), "595.1..");
        assert_eq!(range_text(0, 2_000_000_000), "..2");
    }

    #[test]
    fn selections_validate_ids_and_thresholds() {
        let d = detector_selection(
            Some("blocked-chain"),
            None,
            &["blocked-chain.threshold_ns=1s".into()],
        )
        .unwrap();
        assert_eq!(d.len(), 1);
        assert!(detector_selection(Some("nope"), None, &[]).is_err());
        assert!(detector_selection(None, None, &["cpu-saturation.nope=1".into()]).is_err());
        let all = detector_selection(None, Some("blocked-chain"), &[]).unwrap();
        assert_eq!(all.len(), registry::DETECTORS.len() - 1);
    }
}
