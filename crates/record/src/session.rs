//! One recording from start to file: the sequence described in the crate docs, with the
//! guards ([`Tracefs`], [`Instance`], [`SignalGuard`]) declared so that every exit path —
//! `?` on an error, a panic unwinding, a signal ending the wait — removes the instance.

use std::collections::HashSet;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Instant;

use stallscope_model::Tid;
use stallscope_read::tracedat::OPTION_SYSTEM_CONTEXT;

use crate::context::{self, ContextCollector};
use crate::cpu_reader::{self, CpuCapture};
use crate::events;
use crate::guardian::{Guardian, Rescue};
use crate::instance::{self, Instance};
use crate::metadata::{self, Metadata};
use crate::signals::SignalGuard;
use crate::stats::{cpustat_option_text, CpuStats};
use crate::stop::{self, StopWhen};
use crate::tracedat_writer::{self as writer, TraceDatHeader};
use crate::tracefs::{read_bytes, read_text, Tracefs};
use crate::RecordError;

/// What to record.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// Output trace.dat path.
    pub output: PathBuf,
    /// End condition.
    pub stop: StopWhen,
    /// Comma-separated event groups ([`events::DEFAULT_GROUPS`] by default).
    pub events: String,
    /// Per-CPU ring buffer size in KiB.
    pub buffer_kb: u64,
    /// CPU list to record (`None` = all).
    pub cpus: Option<String>,
    /// Store `/proc/kallsyms` (≈5 MB) so kernel addresses (workqueue functions) get names.
    pub kallsyms: bool,
    /// Record the kernel stack of every event (the private instance's `options/stacktrace`:
    /// an `ftrace:kernel_stack` record after each event, read as that event's stack).
    pub stacks: bool,
    /// Print progress and warnings to stderr.
    pub verbose: bool,
}

/// Lost events of one CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuLost {
    /// CPU number.
    pub cpu: u32,
    /// `overrun` of per_cpu/cpuN/stats (events overwritten).
    pub overrun: u64,
    /// `dropped events` (events refused).
    pub dropped: u64,
    /// `commit overrun`.
    pub commit_overrun: u64,
    /// Pages with the MISSED_EVENTS flag.
    pub flagged_pages: u64,
    /// Sum of the counts stored in flagged pages.
    pub flagged_count: u64,
    /// Lost events: the larger of the stats total and the page-flag count.
    pub lost: u64,
}

/// What was recorded.
#[derive(Clone, Debug, Default)]
pub struct RecordSummary {
    /// Output path.
    pub output: PathBuf,
    /// Events enabled (`sys:name`).
    pub events: Vec<String>,
    /// Warnings printed (missing events, stale instances removed…).
    pub warnings: Vec<String>,
    /// Bytes of CPU data written (all CPUs).
    pub data_bytes: u64,
    /// Sub-buffers written.
    pub pages: u64,
    /// Per-CPU lost events (every recorded CPU).
    pub lost: Vec<CpuLost>,
    /// The signal that ended the recording, if one did.
    pub stopped_by_signal: Option<&'static str>,
    /// Exit status of the traced command.
    pub command_status: Option<std::process::ExitStatus>,
    /// Wall time between tracing_on=1 and tracing_on=0, in nanoseconds.
    pub duration_ns: u64,
    /// Tasks described in the system context.
    pub tasks_described: usize,
    /// Tasks named by the trace that exited before they could be described.
    pub tasks_missed: usize,
}

impl RecordSummary {
    /// Total lost events.
    pub fn total_lost(&self) -> u64 {
        self.lost.iter().map(|l| l.lost).sum()
    }
}

fn warn(summary: &mut RecordSummary, verbose: bool, msg: String) {
    if verbose {
        eprintln!("stallscope: warning: {msg}");
    }
    summary.warnings.push(msg);
}

/// CPU numbers under `per_cpu/` of the instance.
fn instance_cpus(inst: &Instance) -> Result<Vec<u32>, RecordError> {
    let dir = inst.path("per_cpu");
    let rd = fs::read_dir(&dir).map_err(|e| RecordError::io("listing per_cpu", &dir, e))?;
    let mut cpus: Vec<u32> = rd
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("cpu"))
                .and_then(|n| n.parse().ok())
        })
        .collect();
    cpus.sort_unstable();
    Ok(cpus)
}

/// Records according to `opts` and writes the trace.dat.
pub fn record(opts: &RecordOptions) -> Result<RecordSummary, RecordError> {
    let mut summary = RecordSummary {
        output: opts.output.clone(),
        ..Default::default()
    };
    if opts.buffer_kb == 0 {
        return Err(RecordError::Usage("--buffer-kb must be at least 1".into()));
    }
    let selected = match &opts.cpus {
        Some(list) => Some(instance::parse_cpu_list(list).map_err(RecordError::Usage)?),
        None => None,
    };
    crate::privilege::check()?;
    let out_dir = match opts.output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let out_file = File::create(&opts.output)
        .map_err(|e| RecordError::io("creating the output file", &opts.output, e))?;
    let mut output_guard = PartialOutput {
        path: &opts.output,
        complete: false,
    };

    let tracefs = Tracefs::locate()?;
    for name in instance::remove_stale(&tracefs.root) {
        warn(
            &mut summary,
            opts.verbose,
            format!("removed stale tracefs instance {name} left by a recorder that no longer runs"),
        );
    }
    let mut sig = SignalGuard::install();
    let mut inst = Instance::create(&tracefs.root)?;

    inst.write("buffer_size_kb", &opts.buffer_kb.to_string())?;
    let (all_cpus, record_cpus) = select_cpus(&inst, selected.as_deref())?;
    let resolved =
        events::resolve(&opts.events, &inst.path("events")).map_err(RecordError::Usage)?;
    for w in &resolved.warnings {
        warn(&mut summary, opts.verbose, w.clone());
    }
    summary.events = resolved.names();

    // Metadata, read before tracing starts.
    let meta = Metadata::read(&tracefs.root, &inst, &resolved)?;
    let layout = meta.layout;

    let mut ctx = context::host_facts();
    let mut collector = ContextCollector::new();
    collector.scan();

    // The spools (named, so that the guardian finds them) and the guardian, forked while
    // this process has one thread, before anything is enabled.
    let kallsyms = if opts.kallsyms {
        read_bytes(Path::new("/proc/kallsyms"))?
    } else {
        Vec::new()
    };
    let spools = Spools(
        record_cpus
            .iter()
            .map(|&c| (c, cpu_reader::spool_path(&out_dir, c)))
            .collect(),
    );
    let guardian = match Guardian::start(
        &inst.dir,
        rescue(opts, &tracefs, &meta, &ctx, &spools, &all_cpus, &kallsyms)?,
    ) {
        Ok(g) => Some(g),
        Err(e) => {
            // recorded all the same; only a SIGKILL would then leave the instance behind
            // (the next record removes it)
            warn(
                &mut summary,
                opts.verbose,
                format!("no guardian for this recording: {e}"),
            );
            None
        }
    };

    for (sys, evs) in &resolved.by_system {
        for ev in evs {
            inst.write(&format!("events/{sys}/{ev}/enable"), "1")?;
        }
    }
    if opts.stacks {
        // per instance: gone with it, the top-level tracing setting is untouched
        inst.write("options/stacktrace", "1")?;
    }

    // Readers first, then tracing_on, so nothing waits in the buffer unread.
    let handles = start_readers(&inst, &spools, &meta)?;
    inst.write("tracing_on", "1")?;
    let started = Instant::now();
    // Test hook: proves that a panic while recording still removes the instance.
    if std::env::var_os("STALLSCOPE_RECORD_TEST_PANIC").is_some() {
        panic!("STALLSCOPE_RECORD_TEST_PANIC is set: panicking while recording");
    }
    if opts.verbose {
        eprintln!(
            "stallscope: recording {} events on CPUs {:?} into {}",
            summary.events.len(),
            record_cpus,
            opts.output.display()
        );
    }

    let waited = stop::wait_for_stop(&opts.stop, &mut sig, &mut collector, &inst.failed);
    inst.write("tracing_on", "0")?;
    summary.duration_ns = started.elapsed().as_nanos() as u64;
    inst.stop.store(true, Ordering::SeqCst);
    let joined = join_readers(handles);
    let (stopped_by, command_status) = waited?;
    summary.stopped_by_signal = stopped_by;
    summary.command_status = command_status;
    let captures = joined?;
    // a spool that could not be written (a full disk): the recording stopped there, and
    // what the spools hold is written, marked as cut
    let mut disk_full = captures.iter().find_map(|c| {
        c.write_error
            .as_ref()
            .map(|e| format!("CPU {}: {e}", c.cpu))
    });
    for c in &captures {
        if c.counts.bad_headers + c.counts.bad_records > 0 {
            warn(
                &mut summary,
                opts.verbose,
                format!(
                    "CPU {}: {} sub-buffers with an undecodable header and {} with undecodable \
                     events were stored as read",
                    c.cpu, c.counts.bad_headers, c.counts.bad_records
                ),
            );
        }
    }
    let seen_pids: HashSet<Tid> = captures
        .iter()
        .flat_map(|c| c.pids.iter().copied())
        .collect();

    // Statistics and names after the final drain.
    let mut options = vec![
        writer::text_option(writer::OPTION_TRACECLOCK, &meta.trace_clock),
        writer::text_option(
            writer::OPTION_UNAME,
            &context::kernel::uname()
                .map(|u| format!("{} {} {} {}", u.sysname, u.nodename, u.release, u.machine))
                .unwrap_or_default(),
        ),
        writer::text_option(
            writer::OPTION_VERSION,
            &format!("stallscope {}", env!("CARGO_PKG_VERSION")),
        ),
    ];
    let (cpustats, lost) = cpu_stats(&inst, &all_cpus, &captures);
    options.extend(cpustats);
    summary.lost = lost;
    options.push((
        writer::OPTION_CPUCOUNT,
        (all_cpus.len() as u32).to_ne_bytes().to_vec(),
    ));

    let kernel_cmdlines = read_text(&tracefs.root.join("saved_cmdlines")).unwrap_or_default();
    collector.scan();
    // Tasks the trace names but no scan saw: try once more (threads of live processes).
    collector.add(seen_pids.iter().copied());
    summary.tasks_missed = collector.finish(&mut ctx, &seen_pids);
    summary.tasks_described = ctx.tasks.len();
    let saved_cmdlines = metadata::merged_cmdlines(&kernel_cmdlines, &ctx);
    if let Some(why) = &disk_full {
        ctx.recording_cut = Some(format!(
            "the recording stopped when its disk filled ({why}): the file holds the first part of each CPU's data"
        ));
    }
    options.push((OPTION_SYSTEM_CONTEXT, metadata::context_json(&ctx)?));

    let mut header = TraceDatHeader {
        page_size: layout.subbuf_size as u32,
        header_page: meta.header_page,
        header_event: meta.header_event,
        ftrace_formats: meta.ftrace_formats,
        systems: meta.systems,
        kallsyms,
        printk_formats: meta.printk_formats,
        saved_cmdlines: saved_cmdlines.into_bytes(),
        nr_cpus: all_cpus.len() as u32,
        options,
    };
    drop(out_file);
    let written = write_trace(
        &opts.output,
        &mut header,
        &mut ctx,
        captures,
        &all_cpus,
        layout.subbuf_size as u64,
    )?;
    (summary.data_bytes, summary.pages) = (written.bytes, written.pages);
    output_guard.complete = true;
    drop(spools);
    inst.remove()?;
    drop(guardian);
    drop(sig);
    if let Some(short) = written.cut_for_space {
        disk_full.get_or_insert(short);
    }
    match disk_full {
        None => Ok(summary),
        Some(why) => Err(RecordError::Reader(format!(
            "{why}; the recording stopped there: {} holds {} bytes of CPU data, the first part of each CPU's recording ({} of the {} bytes recorded), marked as cut",
            opts.output.display(),
            written.bytes,
            written.kept_share,
            written.recorded
        ))),
    }
}

/// The spool file of each recorded CPU; removed on drop (every exit path but SIGKILL, where
/// the guardian removes them).
struct Spools(Vec<(u32, PathBuf)>);

impl Drop for Spools {
    fn drop(&mut self) {
        for (_, p) in &self.0 {
            let _ = fs::remove_file(p);
        }
    }
}

/// What the guardian writes if this process dies: the header as far as it is known before
/// tracing starts, its system context saying the recording was cut.
fn rescue(
    opts: &RecordOptions,
    tracefs: &Tracefs,
    meta: &Metadata,
    ctx: &stallscope_model::SystemContext,
    spools: &Spools,
    all_cpus: &[u32],
    kallsyms: &[u8],
) -> Result<Rescue, RecordError> {
    let mut ctx = ctx.clone();
    ctx.recording_cut = Some(format!(
        "the recorder (pid {}) died before it finished: the file was written from its spool by its guardian; the sub-buffers read after each CPU's reader last caught up, the per-CPU lost-event counts and the tasks' context are missing",
        std::process::id()
    ));
    let options = vec![
        writer::text_option(writer::OPTION_TRACECLOCK, &meta.trace_clock),
        writer::text_option(
            writer::OPTION_VERSION,
            &format!("stallscope {} (cut)", env!("CARGO_PKG_VERSION")),
        ),
        (
            writer::OPTION_CPUCOUNT,
            (all_cpus.len() as u32).to_ne_bytes().to_vec(),
        ),
        (OPTION_SYSTEM_CONTEXT, metadata::context_json(&ctx)?),
    ];
    Ok(Rescue {
        output: opts.output.clone(),
        spools: spools.0.clone(),
        all_cpus: all_cpus.to_vec(),
        subbuf_size: meta.layout.subbuf_size as u64,
        header: TraceDatHeader {
            page_size: meta.layout.subbuf_size as u32,
            header_page: meta.header_page.clone(),
            header_event: meta.header_event.clone(),
            ftrace_formats: meta.ftrace_formats.clone(),
            systems: meta.systems.clone(),
            kallsyms: kallsyms.to_vec(),
            printk_formats: meta.printk_formats.clone(),
            saved_cmdlines: Vec::new(),
            nr_cpus: all_cpus.len() as u32,
            options,
        },
        tracefs_root: tracefs.root.clone(),
    })
}

/// Removes the output file on drop unless the recording completed (no empty or half-written
/// trace.dat is left behind by an error or a panic).
struct PartialOutput<'a> {
    path: &'a Path,
    complete: bool,
}

impl Drop for PartialOutput<'_> {
    fn drop(&mut self) {
        if !self.complete {
            let _ = fs::remove_file(self.path);
        }
    }
}

/// All CPUs of the instance and those to record (`--cpus`, applied as `tracing_cpumask`).
fn select_cpus(
    inst: &Instance,
    selected: Option<&[u32]>,
) -> Result<(Vec<u32>, Vec<u32>), RecordError> {
    let all_cpus = instance_cpus(inst)?;
    let Some(sel) = selected else {
        return Ok((all_cpus.clone(), all_cpus));
    };
    if let Some(bad) = sel.iter().find(|c| !all_cpus.contains(c)) {
        return Err(RecordError::Usage(format!(
            "--cpus: CPU {bad} does not exist (CPUs {all_cpus:?})"
        )));
    }
    inst.write("tracing_cpumask", &instance::cpumask_text(sel))?;
    Ok((all_cpus, sel.to_vec()))
}

/// A running reader thread.
type Reader = (u32, JoinHandle<std::io::Result<CpuCapture>>);

/// Starts one reader thread per CPU, each writing its spool.
fn start_readers(
    inst: &Instance,
    spools: &Spools,
    meta: &Metadata,
) -> Result<Vec<Reader>, RecordError> {
    let mut handles = Vec::new();
    for (cpu, path) in &spools.0 {
        let cpu = *cpu;
        let spool = cpu_reader::create_spool(path)
            .map_err(|e| RecordError::io("creating a spool file", path, e))?;
        let pipe = inst.path(&format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
        let (stop, failed) = (inst.stop.clone(), inst.failed.clone());
        let (layout, pid_at) = (meta.layout, meta.common_pid_offset);
        let path = path.clone();
        let h = std::thread::Builder::new()
            .name(format!("stallscope-cpu{cpu}"))
            .spawn(move || {
                cpu_reader::run(cpu, &pipe, layout, pid_at, (spool, &path), &stop, &failed)
            })
            .map_err(|e| RecordError::Reader(format!("cannot start reader thread: {e}")))?;
        handles.push((cpu, h));
    }
    Ok(handles)
}

/// Waits for every reader (the stop flag must be raised); the first failure is the error.
fn join_readers(handles: Vec<Reader>) -> Result<Vec<CpuCapture>, RecordError> {
    let mut captures = Vec::new();
    let mut error = None;
    for (cpu, h) in handles {
        match h.join() {
            Ok(Ok(c)) => captures.push(c),
            Ok(Err(e)) => {
                error.get_or_insert(format!("CPU {cpu}: {e}"));
            }
            Err(_) => {
                error.get_or_insert(format!("CPU {cpu}: reader thread panicked"));
            }
        }
    }
    match error {
        Some(e) => Err(RecordError::Reader(e)),
        None => Ok(captures),
    }
}

/// CPUSTAT options for every CPU and the lost counts of the recorded ones.
fn cpu_stats(
    inst: &Instance,
    all_cpus: &[u32],
    captures: &[CpuCapture],
) -> (Vec<(u16, Vec<u8>)>, Vec<CpuLost>) {
    let mut options = Vec::new();
    let mut lost = Vec::new();
    for &cpu in all_cpus {
        let text = inst
            .read(&format!("per_cpu/cpu{cpu}/stats"))
            .unwrap_or_default();
        let stats = CpuStats::parse(&text);
        if let Some(c) = captures.iter().find(|c| c.cpu == cpu) {
            let flagged = c.counts.missed_counted;
            lost.push(CpuLost {
                cpu,
                overrun: stats.overrun,
                dropped: stats.dropped,
                commit_overrun: stats.commit_overrun,
                flagged_pages: c.counts.missed_pages,
                flagged_count: flagged,
                lost: stats.lost().max(flagged),
            });
        }
        options.push(writer::text_option(
            writer::OPTION_CPUSTAT,
            &cpustat_option_text(cpu, &text),
        ));
    }
    (options, lost)
}

/// What [`write_trace`] wrote.
struct Written {
    /// Bytes of CPU data.
    bytes: u64,
    /// Sub-buffers.
    pages: u64,
    /// Bytes of CPU data recorded (in the spools).
    recorded: u64,
    /// `bytes` of `recorded`, as text (`100%`, `50%`, …).
    kept_share: String,
    /// Why the data was cut to fit (the disk had no room for all of it).
    cut_for_space: Option<String>,
}

/// Writes the trace.dat at `path`; CPUs not recorded (`--cpus`) get an empty stream. When
/// the disk has no room for it all, the spools are cut to their first half (freeing the
/// space) and the file written again, until it fits: the file then holds the first part of
/// each CPU's recording and its system context says so.
fn write_trace(
    path: &Path,
    header: &mut TraceDatHeader,
    ctx: &mut stallscope_model::SystemContext,
    captures: Vec<CpuCapture>,
    all_cpus: &[u32],
    subbuf_size: u64,
) -> Result<Written, RecordError> {
    let page = subbuf_size.max(1);
    let mut spools: Vec<(u32, File, u64)> = captures
        .into_iter()
        .map(|c| {
            // whole sub-buffers the file holds (after a write error, fewer than counted)
            let on_disk = c.spool.metadata().map_or(0, |m| m.len());
            let len = (c.counts.pages * page).min(on_disk - on_disk % page);
            (c.cpu, c.spool, len)
        })
        .collect();
    let recorded: u64 = spools.iter().map(|s| s.2).sum();
    let mut cut_for_space = None;
    loop {
        let out =
            File::create(path).map_err(|e| RecordError::io("creating the output file", path, e))?;
        match writer::write_from_spools(out, header, &mut spools, all_cpus) {
            Ok(bytes) => {
                let kept_share = match recorded {
                    0 => "100%".to_string(),
                    r => format!("{}%", bytes * 100 / r),
                };
                return Ok(Written {
                    bytes,
                    pages: bytes / page,
                    recorded,
                    kept_share,
                    cut_for_space,
                });
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && spools.iter().any(|s| s.2 > 0) => {
                let _ = File::create(path);
                // room: each spool cut to its first half (whole sub-buffers)
                for s in &mut spools {
                    s.2 = (s.2 / 2) - (s.2 / 2) % page;
                    let _ = s.1.set_len(s.2);
                }
                if cut_for_space.is_none() {
                    let why = format!("writing {}: {e}", path.display());
                    if ctx.recording_cut.is_none() {
                        ctx.recording_cut = Some(format!(
                            "the disk had no room for the whole recording ({why}): the file holds the first part of each CPU's data"
                        ));
                        let json = metadata::context_json(ctx)?;
                        for o in &mut header.options {
                            if o.0 == OPTION_SYSTEM_CONTEXT {
                                o.1 = json.clone();
                            }
                        }
                    }
                    cut_for_space = Some(why);
                }
            }
            Err(e) => return Err(RecordError::io("writing the trace.dat", path, e)),
        }
    }
}
