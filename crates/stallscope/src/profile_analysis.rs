//! CPU profiles inside `analyze`: profile detectors (`lock-spinning`) run over the
//! [`Profile`] of the inputs, next to the event detectors.
//!
//! Two ways a profile arrives:
//!
//! ```text
//! perf.data  ── event pass ──► Collector::push(ev) for every event: samples of a CPU-time
//!     event (cpu-clock, task-clock, cycles, instructions, …) and task names are kept, and
//!     become stacks at the end (the read crate's SampleProfiler; the kernel symbol table is
//!     loaded only then); sched events pass by at the cost of one comparison. No second read.
//! perf script text with call stacks ──► read_text_profiles() reads it as a profile (its
//!     symbol names are kept; the event pass only sees addresses), the Collector skips it.
//! folded stacks / perf report text ──► read_text_profiles(): these are profiles only, and
//!     the event pass is skipped (`ProfileInputs::profiles_only`).
//! ```
//!
//! [`Collector::finish`] hands each profile to [`Engine::process_profile`] (stacks outside
//! `--time` dropped); the engine then runs the profile detectors, and reports them skipped
//! when no profile came (their `needs` name [`PROFILE_NEED`]). [`explain_skipped`] rewrites
//! such a skip reason into what is missing and how to record it.

use stallscope_detect::{Engine, PROFILE_NEED};
use stallscope_model::{
    DataQuality, Event, EventKind, Profile, ReportInput, Severity, SkippedDetector, TraceMeta, Ts,
};
use stallscope_read::profile::perf_samples::SampleProfiler;
use stallscope_read::profile::{
    kernel_symbols_for, read_profile, sniff_profile, Kallsyms, KernelSymbolSource, ProfileFormat,
    ProfileOptions, ProfileRead,
};
use stallscope_read::{Input, ReadError};

/// `--kallsyms` as given on the command line: `none`, a file, or absent (automatic).
pub fn symbol_source(arg: Option<&str>) -> KernelSymbolSource {
    match arg {
        None => KernelSymbolSource::Auto,
        Some("none") => KernelSymbolSource::Off,
        Some(f) => KernelSymbolSource::File(f.to_string()),
    }
}

/// Whether samples of event `name` measure CPU time (a CPU profile), as opposed to counting
/// other things (page faults, context switches, tracepoints).
pub fn is_cpu_time_event(name: &str) -> bool {
    let base = name.split(':').next().unwrap_or(name);
    matches!(
        base,
        "cpu-clock" | "task-clock" | "cycles" | "cpu-cycles" | "ref-cycles" | "instructions"
    ) || base.starts_with("cpu/")
        || base.starts_with("cpu_core/")
        || base.starts_with("cpu_atom/")
}

/// Inputs read as profiles up front (text profiles: perf script text with call stacks,
/// folded stacks, perf report text).
pub struct ProfileInputs {
    /// The profiles read, by input index.
    pub profiles: Vec<(u16, ProfileRead)>,
    /// Every input is profile-only text: there is no event pass.
    pub profiles_only: bool,
}

/// Reads the text profiles among the inputs: perf script text with call stacks, folded
/// stacks, `perf report` text. When any input is folded or perf report text, every input must
/// be a profile (perf.data is then read as one too) and `profiles_only` is set. perf.data
/// otherwise, and standard input always, are left to the event pass.
pub fn read_text_profiles(
    files: &[String],
    symbols: &KernelSymbolSource,
) -> Result<ProfileInputs, ReadError> {
    let mut any_text = false;
    let mut wanted = Vec::new();
    for (i, f) in files.iter().enumerate() {
        if f == "-" {
            continue;
        }
        let input = Input::open(f)?;
        match sniff_profile(&input.head) {
            Some(ProfileFormat::Folded | ProfileFormat::PerfReport) => {
                any_text = true;
                wanted.push(i);
            }
            Some(ProfileFormat::PerfScript) => wanted.push(i),
            _ => {}
        }
    }
    if any_text {
        wanted = (0..files.len()).collect();
    }
    let opts = ProfileOptions {
        symbols: symbols.clone(),
        event: None,
    };
    let mut profiles = Vec::new();
    for i in wanted {
        let f = &files[i];
        let mut read = read_profile(f, None, &opts)?;
        let index = u16::try_from(i).unwrap_or(u16::MAX);
        for s in &mut read.profile.stacks {
            s.span.input = index;
        }
        profiles.push((index, read));
    }
    Ok(ProfileInputs {
        profiles,
        profiles_only: any_text,
    })
}

impl ProfileInputs {
    /// Metadata for the engine (paths name evidence sources) when there is no event pass.
    pub fn metas(&self, files: &[String]) -> Vec<TraceMeta> {
        files
            .iter()
            .enumerate()
            .map(|(i, f)| TraceMeta {
                path: f.clone(),
                kernel_release: self
                    .profiles
                    .iter()
                    .find(|(k, _)| usize::from(*k) == i)
                    .and_then(|(_, r)| r.kernel_release.clone()),
                ..TraceMeta::default()
            })
            .collect()
    }

    /// The report's input list when there is no event pass.
    pub fn report_inputs(&self, files: &[String]) -> Vec<ReportInput> {
        files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let read = self
                    .profiles
                    .iter()
                    .find(|(k, _)| usize::from(*k) == i)
                    .map(|(_, r)| r);
                ReportInput {
                    path: f.clone(),
                    format: read.map(|r| r.format.name().to_string()),
                    kernel_release: read.and_then(|r| r.kernel_release.clone()),
                    nr_cpus: None,
                }
            })
            .collect()
    }
}

/// Builds the CPU profile of the event pass. Samples are kept (with the task-name records)
/// and turned into a profile at the end, so the kernel symbol table is loaded only when the
/// inputs hold CPU-time samples: a scheduler trace costs one comparison per event.
pub struct Collector {
    symbols: KernelSymbolSource,
    skip_inputs: Vec<u16>,
    kept: Vec<Event>,
    samples: usize,
    other_events: Vec<String>,
}

impl Collector {
    /// A collector naming kernel frames from `symbols`, ignoring the inputs `read` holds.
    pub fn new(symbols: &KernelSymbolSource, read: &ProfileInputs) -> Collector {
        Collector {
            symbols: symbols.clone(),
            skip_inputs: read.profiles.iter().map(|(i, _)| *i).collect(),
            kept: Vec::new(),
            samples: 0,
            other_events: Vec::new(),
        }
    }

    /// Takes one event of the event pass: samples of CPU-time events and task names are
    /// kept; other events cost one comparison.
    pub fn push(&mut self, ev: &Event) {
        match &ev.kind {
            EventKind::TaskComm { .. } => {}
            EventKind::Generic(g) if g.system.is_none() => {
                let name = g.name.as_str();
                if !is_cpu_time_event(name) {
                    if self.other_events.len() < 4 && !self.other_events.iter().any(|e| e == name) {
                        self.other_events.push(name.to_string());
                    }
                    return;
                }
                self.samples += 1;
            }
            _ => return,
        }
        if !self.skip_inputs.is_empty() && self.skip_inputs.contains(&ev.span.input) {
            return; // read as a text profile already
        }
        self.kept.push(ev.clone());
    }

    /// Builds the profile of the kept samples (kernel frames named from the table chosen for
    /// the first input's kernel release, see [`kernel_symbols_for`]) and feeds it to `engine`
    /// (stacks with a time outside `time` dropped). Returns the notes for data quality.
    pub fn finish(
        self,
        engine: &mut Engine,
        metas: &[&TraceMeta],
        time: Option<(Ts, Ts)>,
    ) -> Result<DataQuality, ReadError> {
        let mut quality = DataQuality::default();
        if self.samples == 0 || self.kept.is_empty() {
            return Ok(quality); // no sample of a CPU-time event
        }
        let release = metas.iter().find_map(|m| m.kernel_release.as_deref());
        let table: Option<Kallsyms> = kernel_symbols_for(&self.symbols, release, &mut quality)?;
        let mut profiler = SampleProfiler::new(table.as_ref(), None);
        for ev in &self.kept {
            profiler.push(ev);
        }
        let (mut profile, q, _event) = profiler.finish();
        quality.merge(&q);
        if !self.other_events.is_empty() {
            let others = self.other_events.join(", ");
            quality.add(
                "profile-not-cpu-time",
                Severity::Info,
                "samples of events that do not measure CPU time (not in the CPU profile)",
                1,
                || others.clone(),
            );
        }
        restrict_time(&mut profile, time, &mut quality);
        engine.process_profile(&profile);
        Ok(quality)
    }
}

/// Drops stacks whose time is outside `time` (counted in `quality`).
pub fn restrict_time(profile: &mut Profile, time: Option<(Ts, Ts)>, quality: &mut DataQuality) {
    let Some((a, b)) = time else { return };
    let before = profile.stacks.len();
    profile
        .stacks
        .retain(|s| s.ts.is_none_or(|t| (a..=b).contains(&t)));
    let dropped = (before - profile.stacks.len()) as u64;
    if dropped > 0 {
        quality.add(
            "profile-outside-time",
            Severity::Info,
            "profile samples outside --time (not analyzed)",
            dropped,
            || format!("{dropped} samples"),
        );
    }
}

/// Feeds profile-only inputs to `engine`; their notes go to the returned quality.
pub fn feed_text_profiles(
    inputs: &ProfileInputs,
    engine: &mut Engine,
    time: Option<(Ts, Ts)>,
) -> DataQuality {
    let mut quality = DataQuality::default();
    for (_, read) in &inputs.profiles {
        quality.merge(&read.quality);
        if let Some(e) = read.event.as_deref().filter(|e| !is_cpu_time_event(e)) {
            quality.add(
                "profile-not-cpu-time",
                Severity::Info,
                "samples of events that do not measure CPU time (not in the CPU profile)",
                1,
                || e.to_string(),
            );
            continue;
        }
        let mut profile = read.profile.clone();
        restrict_time(&mut profile, time, &mut quality);
        engine.process_profile(&profile);
    }
    quality
}

/// Rewrites the reason of skipped profile detectors (whose `needs` name [`PROFILE_NEED`])
/// into what the inputs lack.
pub fn explain_skipped(skipped: &mut [SkippedDetector]) {
    for s in skipped {
        let Some(entry) = stallscope_detect::registry::find(&s.id) else {
            continue;
        };
        if entry
            .info
            .needs
            .iter()
            .any(|alts| alts.contains(&PROFILE_NEED))
        {
            s.reason = "the inputs hold no CPU profile with call stacks (samples of cpu-clock, \
                        cycles or another CPU-time event recorded with -g; or their perf script \
                        text, folded stacks or perf report text)"
                .to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_events() {
        assert!(is_cpu_time_event("cpu-clock:pppH"));
        assert!(is_cpu_time_event("cycles"));
        assert!(is_cpu_time_event("cpu/cycles/P"));
        assert!(!is_cpu_time_event("page-faults"));
        assert!(!is_cpu_time_event("context-switches"));
        assert!(!is_cpu_time_event("sched_switch"));
    }
}
