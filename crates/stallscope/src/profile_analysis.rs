//! CPU profiles inside `analyze`: profile detectors (`lock-spinning`) run over the
//! [`Profile`] of the inputs, next to the event detectors.
//!
//! Two ways a profile arrives:
//!
//! ```text
//! sched_switch with call stacks (`-g`) ── event pass ──► Collector::push(ev): each blocked
//!     switch-out (prev_state not R) opens an off-CPU interval closed by the task's next
//!     switch-in; the interval becomes a stack of the switch-out's call chain weighing its
//!     nanoseconds, in a second profile (unit `Period(OFF_CPU_EVENT)`), handed to the
//!     engine after the CPU profile: lock-spinning adds the time waiters slept.
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

use std::collections::HashMap;

use stallscope_detect::detectors::lock_spinning::OFF_CPU_EVENT;
use stallscope_detect::{Engine, PROFILE_NEED};
use stallscope_model::{
    DataQuality, Event, EventKind, FieldValue, GenericEvent, Problem, Profile, ReportInput,
    SkippedDetector, Tid, TraceMeta, Ts,
};
use stallscope_read::profile::perf_samples::SampleProfiler;
use stallscope_read::profile::{
    kernel_symbols_with_embedded, read_profile, sniff_profile, Kallsyms, KernelSymbolSource,
    ProfileFormat, ProfileOptions, ProfileRead,
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

/// Gives every input that recorded workqueue events but carries no kernel symbol table of its
/// own (perf.data, ftrace without `--kallsyms`) the text of one, so work functions recorded
/// as kernel addresses get names: the `--kallsyms` file, or `/proc/kallsyms` when the input
/// was recorded on the running kernel release. Returns a note per input left without names.
pub fn attach_kallsyms_text(
    metas: &mut [stallscope_model::TraceMeta],
    source: &KernelSymbolSource,
) -> Vec<String> {
    let mut notes = Vec::new();
    let mut loaded: Option<std::sync::Arc<str>> = None;
    for m in metas.iter_mut() {
        let wants = m.kallsyms.is_none()
            && m.declared_events
                .iter()
                .any(|e| e.ends_with("workqueue_execute_start"));
        if !wants {
            continue;
        }
        let path = match source {
            KernelSymbolSource::Off => continue,
            KernelSymbolSource::File(p) => p.clone(),
            KernelSymbolSource::Auto => {
                let host = stallscope_read::profile::host_release();
                if m.kernel_release.is_some() && m.kernel_release == host {
                    stallscope_read::profile::kallsyms::DEFAULT_PATH.to_string()
                } else {
                    notes.push(format!(
                        "{}: workqueue functions stay kernel addresses (recorded on {}, \
                         running {}); pass --kallsyms FILE of the recording host",
                        m.path,
                        m.kernel_release.as_deref().unwrap_or("an unnamed kernel"),
                        host.as_deref().unwrap_or("unknown")
                    ));
                    continue;
                }
            }
        };
        if loaded.is_none() {
            match stallscope_read::profile::kallsyms::load_text(&path) {
                Ok(t) => loaded = Some(t.into()),
                Err(e) => {
                    notes.push(format!("workqueue functions stay kernel addresses: {e}"));
                    continue;
                }
            }
        }
        m.kallsyms = loaded.clone();
    }
    notes
}

/// Where the stacks recorded with scheduler events get kernel frame names when the inputs
/// carry no symbol table (see `Engine::set_stack_symbols`): the `--kallsyms` file, or
/// `/proc/kallsyms` when the inputs were recorded on the running kernel release.
pub fn stack_symbols(
    source: &KernelSymbolSource,
    metas: &[stallscope_model::TraceMeta],
) -> Option<stallscope_detect::engine::StackSymbols> {
    let path = match source {
        KernelSymbolSource::Off => return None,
        KernelSymbolSource::File(p) => p.clone(),
        KernelSymbolSource::Auto => {
            let host = stallscope_read::profile::host_release();
            let release = metas.iter().find_map(|m| m.kernel_release.clone());
            if release.is_none() || release != host {
                let why = format!(
                    "recorded on {}, running {}; pass --kallsyms FILE of the recording host",
                    release.as_deref().unwrap_or("an unnamed kernel"),
                    host.as_deref().unwrap_or("an unknown kernel")
                );
                return Some(Box::new(move || Err(why)));
            }
            stallscope_read::profile::kallsyms::DEFAULT_PATH.to_string()
        }
    };
    Some(Box::new(move || {
        stallscope_read::profile::kallsyms::load_text(&path)
            .map(std::sync::Arc::from)
            .map_err(|e| e.to_string())
    }))
}

/// Names for the user frames of stacks recorded with the events of perf.data inputs
/// (`perf record -e 'sched:*' -g`; see `Engine::set_user_frame_names`): the recording's
/// binaries found on this host, else the file and offset from the MMAP records. `None`
/// without a perf.data input that can be read again (stdin).
pub fn user_frame_names(
    metas: &[stallscope_model::TraceMeta],
) -> Option<stallscope_detect::engine::UserFrameNames> {
    use stallscope_model::InputFormat;
    let paths: Vec<String> = metas
        .iter()
        .filter(|m| {
            matches!(
                m.format,
                Some(InputFormat::PerfData | InputFormat::PerfPipe)
            )
        })
        .map(|m| m.path.clone())
        .filter(|p| !stallscope_read::is_stream(p))
        .collect();
    if paths.is_empty() {
        return None;
    }
    Some(Box::new(move |frames| {
        let mut names = std::collections::HashMap::new();
        let mut dq = stallscope_model::DataQuality::default();
        for path in &paths {
            match stallscope_read::profile::user_symbols::perf_user_frame_names(path, frames) {
                Ok((n, q)) => {
                    for (k, v) in n {
                        names.entry(k).or_insert(v);
                    }
                    dq.merge(&q);
                }
                Err(e) => dq.add(Problem::UserSymbolsUnreadable, 1, || e.to_string()),
            }
        }
        (names, dq)
    }))
}

/// Whether samples of event `name` measure CPU time (a CPU profile), as opposed to counting
/// other things (page faults, context switches, tracepoints).
pub fn is_cpu_time_event(name: &str) -> bool {
    // `cpu-clock:pppH` (modifiers), `cpu-clock/freq=499/` (terms)
    let base = name.split([':', '/']).next().unwrap_or(name);
    matches!(
        base,
        "cpu-clock" | "task-clock" | "cycles" | "cpu-cycles" | "ref-cycles" | "instructions"
    ) || name.starts_with("cpu/")
        || name.starts_with("cpu_core/")
        || name.starts_with("cpu_atom/")
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
/// otherwise, and standard input always, are left to the event pass. `perf_script`: read
/// perf script text as a profile too (false when nothing would use it: no detector runs).
pub fn read_text_profiles(
    files: &[String],
    symbols: &KernelSymbolSource,
    perf_script: bool,
) -> Result<ProfileInputs, ReadError> {
    let mut any_text = false;
    let mut wanted = Vec::new();
    for (i, f) in files.iter().enumerate() {
        if stallscope_read::is_stream(f) {
            continue;
        }
        // a blktrace directory or `DEV` prefix stands for per-CPU trace files: no profile
        if stallscope_read::blktrace::expand_path(f)?.is_some() {
            continue;
        }
        let input = Input::open(f)?;
        match sniff_profile(&input.head) {
            Some(ProfileFormat::Folded | ProfileFormat::PerfReport) => {
                any_text = true;
                wanted.push(i);
            }
            Some(ProfileFormat::PerfScript) if perf_script => wanted.push(i),
            _ => {}
        }
    }
    if any_text {
        wanted = (0..files.len()).collect();
    }
    let opts = ProfileOptions {
        symbols: symbols.clone(),
        event: None,
        no_user_symbols: false,
    };
    let mut profiles = Vec::new();
    for i in wanted {
        let f = &files[i];
        let mut read = read_profile(f, None, &opts)?;
        // perf script text of several events: profile the CPU-time one
        if read.format == ProfileFormat::PerfScript
            && read.event.as_deref().is_some_and(|e| !is_cpu_time_event(e))
        {
            if let Some(event) = first_cpu_time_event(f)? {
                let opts = ProfileOptions {
                    symbols: symbols.clone(),
                    event: Some(event),
                    no_user_symbols: false,
                };
                read = read_profile(f, None, &opts)?;
            }
        }
        let index = u16::try_from(i).unwrap_or(u16::MAX);
        for s in &mut read.profile.stacks {
            s.span.set_input(index);
        }
        profiles.push((index, read));
    }
    Ok(ProfileInputs {
        profiles,
        profiles_only: any_text,
    })
}

/// The first CPU-time event named in a `perf script` text's sample headers
/// (`comm pid [cpu] ts: [period] EVENT: …`).
fn first_cpu_time_event(path: &str) -> Result<Option<String>, ReadError> {
    use std::io::BufRead;
    let input = Input::open(path)?;
    let reader = std::io::BufReader::new(input.into_reader());
    for line in reader.split(b'\n') {
        let line = line.map_err(|e| ReadError::io(path, &e))?;
        if line.first() == Some(&b'\t') {
            continue; // a frame
        }
        let line = String::from_utf8_lossy(&line);
        for token in line.split_whitespace() {
            if let Some(name) = token.strip_suffix(':') {
                if is_cpu_time_event(name) {
                    return Ok(Some(name.to_string()));
                }
            }
        }
    }
    Ok(None)
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
    /// Blocked switch-outs with a call chain, by task, until the task's next switch-in.
    blocked: HashMap<Tid, Event>,
    /// Closed off-CPU intervals: synthetic `OFF_CPU_EVENT` samples (period = nanoseconds).
    off_cpu: Vec<Event>,
    /// Names seen in sched_switch payloads (a perf.data has no COMM record for forked tasks).
    switch_comms: HashMap<Tid, stallscope_model::Comm>,
    /// Blocked switch-outs replaced by the task's next one before its switch-in was seen.
    unpaired: u64,
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
            blocked: HashMap::new(),
            off_cpu: Vec::new(),
            switch_comms: HashMap::new(),
            unpaired: 0,
        }
    }

    /// Off-CPU intervals from `sched_switch` events recorded with call stacks.
    fn switch(&mut self, ev: &Event, sw: &stallscope_model::Switch) {
        // names only matter once there are stacks to name: a plain scheduler trace skips this
        if self.samples > 0 || ev.callchain.is_some() {
            for t in [&sw.prev, &sw.next] {
                if t.pid != 0
                    && !t.comm.is_empty()
                    && self.switch_comms.get(&t.pid) != Some(&t.comm)
                {
                    self.switch_comms.insert(t.pid, t.comm);
                    self.kept.push(Event {
                        ts: ev.ts,
                        cpu: ev.cpu,
                        pid: t.pid,
                        span: ev.span,
                        kind: EventKind::TaskComm {
                            tgid: t.pid,
                            tid: t.pid,
                            comm: t.comm,
                        },
                        callchain: None,
                    });
                }
            }
        }
        if !self.blocked.is_empty() {
            if let Some(out) = self.blocked.remove(&sw.next.pid) {
                let slept = ev.ts.saturating_sub(out.ts);
                self.off_cpu.push(Event {
                    kind: EventKind::Generic(Box::new(GenericEvent {
                        system: None,
                        name: OFF_CPU_EVENT.to_string(),
                        fields: vec![("period".to_string(), FieldValue::UInt(slept.max(1)))],
                    })),
                    ..out
                });
            }
        }
        if ev.callchain.is_some() && !sw.prev_state.is_runnable() && sw.prev.pid != 0 {
            let mut out = ev.clone();
            out.pid = sw.prev.pid;
            if self.blocked.insert(sw.prev.pid, out).is_some() {
                self.unpaired += 1; // its switch-in was not seen in time order
            }
        }
    }

    /// Takes one event of the event pass: samples of CPU-time events and task names are
    /// kept; other events cost one comparison (inlined into the event loop: the switches of
    /// a trace without samples, call chains or blocked switch-outs stop here too).
    #[inline]
    pub fn push(&mut self, ev: &Event) {
        match &ev.kind {
            EventKind::Switch(_)
                if self.samples == 0 && ev.callchain.is_none() && self.blocked.is_empty() => {}
            EventKind::Switch(_) | EventKind::TaskComm { .. } | EventKind::Generic(_) => {
                self.push_kept_kinds(ev)
            }
            _ => {}
        }
    }

    /// [`Collector::push`] of the kinds it may keep or use.
    #[inline(never)]
    fn push_kept_kinds(&mut self, ev: &Event) {
        match &ev.kind {
            EventKind::TaskComm { .. } => {}
            EventKind::Switch(sw) => {
                if !self.skip_inputs.contains(&ev.span.input()) {
                    self.switch(ev, sw);
                }
                return;
            }
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
        if !self.skip_inputs.is_empty() && self.skip_inputs.contains(&ev.span.input()) {
            return; // read as a text profile already
        }
        self.kept.push(ev.clone());
    }

    /// Builds the profile of the kept samples (kernel frames named from the inputs' own
    /// kallsyms, else the table chosen for the first input's kernel release, see
    /// [`kernel_symbols_with_embedded`]) and feeds it to `engine`
    /// (stacks with a time outside `time` dropped). Returns the notes for data quality.
    pub fn finish(
        self,
        engine: &mut Engine,
        metas: &[&TraceMeta],
        time: Option<(Ts, Ts)>,
    ) -> Result<DataQuality, ReadError> {
        let mut quality = DataQuality::default();
        if self.unpaired > 0 {
            let n = self.unpaired;
            quality.add(Problem::OffCpuUnpaired, n, || format!("{n} switch-outs"));
        }
        let has_samples = self.samples > 0 && !self.kept.is_empty();
        if !has_samples && self.off_cpu.is_empty() {
            return Ok(quality); // no sample of a CPU-time event, no off-CPU stack
        }
        let release = metas.iter().find_map(|m| m.kernel_release.as_deref());
        // the inputs' own kallsyms first (a trace.dat's KALLSYMS section), as `profile` and
        // `dump` name frames: not a warning that no table fits when the input carries one
        let embedded = metas.iter().find_map(|m| m.embedded_kallsyms());
        let table: Option<Kallsyms> =
            kernel_symbols_with_embedded(&self.symbols, release, embedded, &mut quality)?;
        // task names for the off-CPU stacks too
        let comms: Vec<&Event> = self
            .kept
            .iter()
            .filter(|e| matches!(e.kind, EventKind::TaskComm { .. }))
            .collect();
        if !self.off_cpu.is_empty() {
            let mut profiler = SampleProfiler::new(table.as_ref(), Some(OFF_CPU_EVENT.into()));
            let mut events: Vec<&Event> = comms.clone();
            events.extend(self.off_cpu.iter());
            events.sort_by_key(|e| e.ts);
            for ev in events {
                profiler.push(ev);
            }
            let (mut off, q, _) = profiler.finish();
            quality.merge(&q);
            restrict_time(&mut off, time, &mut quality);
            // the CPU profile first: the detector adds the sleeping to its CPU findings
            if has_samples {
                let cpu = self.cpu_profile(table.as_ref(), time, &mut quality);
                engine.process_profile(&cpu);
            }
            engine.process_profile(&off);
            return Ok(quality);
        }
        let profile = self.cpu_profile(table.as_ref(), time, &mut quality);
        engine.process_profile(&profile);
        Ok(quality)
    }

    /// The CPU profile of the kept samples.
    fn cpu_profile(
        &self,
        table: Option<&Kallsyms>,
        time: Option<(Ts, Ts)>,
        quality: &mut DataQuality,
    ) -> Profile {
        let mut profiler = SampleProfiler::new(table, None);
        for ev in &self.kept {
            profiler.push(ev);
        }
        let (mut profile, q, _event) = profiler.finish();
        quality.merge(&q);
        if !self.other_events.is_empty() {
            let others = self.other_events.join(", ");
            quality.add(Problem::ProfileNotCpuTime, 1, || others.clone());
        }
        restrict_time(&mut profile, time, quality);
        profile
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
        quality.add(Problem::ProfileOutsideTime, dropped, || {
            format!("{dropped} samples")
        });
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
            quality.add(Problem::ProfileNotCpuTime, 1, || e.to_string());
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
    use stallscope_detect::detectors::lock_spinning;
    use stallscope_detect::Params;
    use stallscope_model::{FieldValue, GenericEvent, Span};

    const KERNEL: u64 = -128i64 as u64;

    fn wq_meta(path: &str, release: Option<&str>, events: &[&str]) -> stallscope_model::TraceMeta {
        stallscope_model::TraceMeta {
            path: path.to_string(),
            kernel_release: release.map(str::to_string),
            declared_events: events.iter().map(|e| e.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn workqueue_inputs_get_the_kallsyms_text_and_others_do_not() {
        let dir = std::env::temp_dir().join(format!("stallscope-wq-ksyms-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("kallsyms");
        std::fs::write(&file, "ffffffff81729140 T wb_workfn\n").unwrap();
        let source = KernelSymbolSource::File(file.to_string_lossy().into_owned());
        let mut metas = vec![
            wq_meta(
                "a.data",
                Some("6.1"),
                &["workqueue:workqueue_execute_start"],
            ),
            wq_meta("b.data", Some("6.1"), &["sched:sched_switch"]),
        ];
        let notes = attach_kallsyms_text(&mut metas, &source);
        assert!(notes.is_empty(), "{notes:?}");
        assert!(metas[0].kallsyms.as_deref().unwrap().contains("wb_workfn"));
        assert!(
            metas[1].kallsyms.is_none(),
            "no workqueue events: nothing to name"
        );
        // automatic choice: another kernel release is never given this host's table
        let mut other = vec![wq_meta(
            "c.data",
            Some("0.0.0-not-this-host"),
            &["workqueue:workqueue_execute_start"],
        )];
        let notes = attach_kallsyms_text(&mut other, &KernelSymbolSource::Auto);
        assert!(other[0].kallsyms.is_none());
        assert!(notes[0].contains("pass --kallsyms FILE"), "{notes:?}");
        // an input with its own table keeps it
        let mut own = vec![wq_meta(
            "d.dat",
            None,
            &["workqueue:workqueue_execute_start"],
        )];
        own[0].kallsyms = Some("ffffffff81000000 T own\n".into());
        attach_kallsyms_text(&mut own, &source);
        assert!(own[0].kallsyms.as_deref().unwrap().contains("own"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn sample(name: &str, ts: u64, chain: &[u64]) -> Event {
        Event {
            ts,
            cpu: 0,
            pid: 42,
            span: Span::default(),
            kind: EventKind::Generic(Box::new(GenericEvent {
                system: None,
                name: name.to_string(),
                fields: vec![
                    ("ip".to_string(), FieldValue::UInt(chain[1])),
                    ("period".to_string(), FieldValue::UInt(1000)),
                ],
            })),
            callchain: Some(chain.to_vec().into_boxed_slice()),
        }
    }

    fn engine(meta: &TraceMeta) -> Engine {
        let d = lock_spinning::make(&Params::defaults(&lock_spinning::PARAMS));
        Engine::new(vec![d], &[meta])
    }

    #[test]
    fn cpu_samples_of_the_event_pass_reach_the_profile_detectors() {
        let dir = std::env::temp_dir().join(format!("ls-collector-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ksyms = dir.join("kallsyms");
        std::fs::write(
            &ksyms,
            "ffffffff81000000 T rwsem_spin_on_owner\n\
             ffffffff81001000 T rwsem_down_write_slowpath\n\
             ffffffff81002000 T down_write\n\
             ffffffff81003000 T do_unlinkat\n\
             ffffffff81004000 T memcpy\n\
             ffffffff81005000 T _etext\n",
        )
        .unwrap();
        let meta = TraceMeta {
            path: "p.data".into(),
            ..TraceMeta::default()
        };
        let symbols = KernelSymbolSource::File(ksyms.to_string_lossy().into_owned());
        let none = ProfileInputs {
            profiles: Vec::new(),
            profiles_only: false,
        };
        let mut c = Collector::new(&symbols, &none);
        let spin = [
            KERNEL,
            0xffffffff81000010,
            0xffffffff81001010,
            0xffffffff81002010,
            0xffffffff81003010,
        ];
        let work = [KERNEL, 0xffffffff81004010];
        for i in 0..100 {
            let chain: &[u64] = if i < 30 { &spin } else { &work };
            c.push(&sample("cpu-clock:pppH", 1000 + i, chain));
        }
        c.push(&sample("page-faults", 5000, &work));
        let mut e = engine(&meta);
        let q = c.finish(&mut e, &[&meta], None).unwrap();
        assert_eq!(q.count(Problem::ProfileNotCpuTime), 1);
        let out = e.finish();
        assert!(
            out.events.iter().any(|n| n == PROFILE_NEED),
            "{:?}",
            out.events
        );
        let findings = out.outcomes[0].result.as_ref().expect("ran");
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert_eq!(findings[0].measures["share_bp"], 3000);
        assert!(findings[0].title.starts_with("down_write from do_unlinkat"));
        assert_eq!(findings[0].evidence[0].source, "p.data:0x0");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn without_cpu_samples_profile_detectors_are_skipped() {
        let meta = TraceMeta::default();
        let none = ProfileInputs {
            profiles: Vec::new(),
            profiles_only: false,
        };
        let mut c = Collector::new(&KernelSymbolSource::Off, &none);
        c.push(&sample("page-faults", 1, &[KERNEL, 0xffffffff81004010]));
        let mut e = engine(&meta);
        c.finish(&mut e, &[&meta], None).unwrap();
        let out = e.finish();
        let reason = out.outcomes[0].result.as_ref().expect_err("skipped");
        assert!(reason.contains(PROFILE_NEED), "{reason}");
        let mut skipped = vec![SkippedDetector {
            id: "lock-spinning".into(),
            reason: reason.clone(),
            record_command: String::new(),
        }];
        explain_skipped(&mut skipped);
        assert!(
            skipped[0].reason.contains("CPU profile"),
            "{}",
            skipped[0].reason
        );
    }

    #[test]
    fn cpu_time_events() {
        assert!(is_cpu_time_event("cpu-clock:pppH"));
        assert!(is_cpu_time_event("cycles"));
        assert!(is_cpu_time_event("cpu-clock/freq=499/"));
        assert!(is_cpu_time_event("cpu/cycles/P"));
        assert!(!is_cpu_time_event("page-faults"));
        assert!(!is_cpu_time_event("context-switches"));
        assert!(!is_cpu_time_event("sched_switch"));
    }
}
