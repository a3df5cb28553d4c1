//! `stallscope info`: what is in the inputs — format, kernel release, CPUs, time range,
//! event counts by name, tasks, lost events, data-quality counters — and which analyses the
//! recorded events support, with the record command that would enable the others.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;

use clap::Args;
use serde::Serialize;
use stallscope::model::{fmt_secs_nsecs, Comm, EventKind, Tid, TraceMeta, Ts};

use crate::common::{write_quality_text, CliError, InputArgs, OutputFormat};

/// Arguments of `stallscope info`.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  stallscope info perf.data\n  stallscope info --format json trace.txt.zst | jq .capabilities"
)]
pub struct InfoArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
    /// How many tasks to list in text output (all in JSON).
    #[arg(long, default_value_t = 10)]
    top: usize,
}

#[derive(Serialize, Default, Clone)]
struct TaskInfo {
    pid: Tid,
    comm: String,
    events: u64,
    switches_in: u64,
}

/// One analysis and whether the inputs support it.
#[derive(Serialize)]
struct Capability {
    analysis: &'static str,
    supported: bool,
    needs: &'static str,
    /// What to record when unsupported (or to improve it).
    record_hint: Option<&'static str>,
}

/// Block-layer capabilities: devices, actions, and which btt phases the actions allow.
#[derive(Serialize, Default)]
struct BlockInfo {
    /// Events per device (`major,minor`); plug/unplug tracepoints carry no device.
    devices: BTreeMap<String, u64>,
    /// Events per blktrace action letter (`Q`, `G`, `I`, `D`, `C`, `M`, `m`, …).
    actions: BTreeMap<String, u64>,
    /// btt phases computable from the actions present (`Q2C`, `D2C`, …).
    btt_phases: Vec<&'static str>,
}

impl BlockInfo {
    fn note(&mut self, b: &stallscope::model::BlockEvent) {
        if let Some(d) = b.dev {
            *self.devices.entry(d.to_string()).or_default() += 1;
        }
        *self
            .actions
            .entry(b.action.letter().to_string())
            .or_default() += 1;
    }

    /// The btt phases whose two ends are both present.
    fn finish(&mut self) {
        let has = |a: &str| self.actions.contains_key(a);
        let merge = has("M") || has("F");
        self.btt_phases = [
            ("Q2Q", has("Q")),
            ("Q2G", has("Q") && has("G")),
            ("G2I", has("G") && has("I")),
            ("Q2M", has("Q") && merge),
            ("I2D", has("I") && has("D")),
            ("D2C", has("D") && has("C")),
            ("Q2D", has("Q") && has("D")),
            ("Q2C", has("Q") && has("C")),
        ]
        .into_iter()
        .filter_map(|(p, ok)| ok.then_some(p))
        .collect();
    }
}

#[derive(Serialize)]
struct InfoReport<'a> {
    inputs: Vec<&'a TraceMeta>,
    events: u64,
    first_ts_ns: Option<Ts>,
    last_ts_ns: Option<Ts>,
    duration_ns: Option<Ts>,
    cpus_seen: Vec<u32>,
    event_counts: BTreeMap<String, u64>,
    lost_events: u64,
    lost_events_unknown_count: u64,
    /// perf's per-event LOST_SAMPLES totals: the same drops as `lost_events`, counted per
    /// event (`perf report --stats`), never added to them.
    lost_samples: u64,
    tasks: Vec<TaskInfo>,
    capabilities: Vec<Capability>,
    /// Block-layer summary, when the inputs hold block events.
    #[serde(skip_serializing_if = "Option::is_none")]
    block: Option<BlockInfo>,
    data_quality: stallscope::model::DataQuality,
}

fn capabilities(counts: &BTreeMap<String, u64>, declared: &BTreeSet<String>) -> Vec<Capability> {
    let has = |name: &str| {
        counts.contains_key(name)
            || declared
                .iter()
                .any(|d| d == name || d.ends_with(&format!(":{name}")))
    };
    let switch = has("sched_switch");
    let wake = has("sched_waking") || has("sched_wakeup");
    let runtime = has("sched_stat_runtime");
    const SCHED_RECORD: &str =
        "perf sched record -- COMMAND   (or: perf record -e 'sched:*' -a -- COMMAND)";
    vec![
        Capability {
            analysis: "latency",
            supported: switch && wake,
            needs: "sched_switch + sched_waking or sched_wakeup",
            record_hint: (!(switch && wake)).then_some(SCHED_RECORD),
        },
        Capability {
            analysis: "latency runtime column",
            supported: runtime,
            needs: "sched_stat_runtime",
            record_hint: (!runtime)
                .then_some("perf sched record -- COMMAND   (adds sched:sched_stat_runtime)"),
        },
        Capability {
            analysis: "timehist",
            supported: switch,
            needs: "sched_switch (sched_waking/sched_wakeup for sch delay)",
            record_hint: (!(switch && wake)).then_some(SCHED_RECORD),
        },
        Capability {
            analysis: "iolat",
            supported: has("block_rq_issue") && has("block_rq_complete"),
            needs: "block issue + complete (D, C); queue/insert (Q, G, I) for the earlier phases",
            record_hint: (!(has("block_rq_issue") && has("block_rq_complete"))).then_some(
                "perf record -e 'block:*' -a -- COMMAND   (or: stallscope record --events block)",
            ),
        },
        Capability {
            analysis: "dump",
            supported: true,
            needs: "any events",
            record_hint: None,
        },
    ]
}

/// Runs the command.
pub fn run(args: &InfoArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let mut inputs = args.input.open()?;
    let mut counts: HashMap<&'static str, u64> = HashMap::new();
    let mut generic_counts: HashMap<String, u64> = HashMap::new();
    let mut tasks: HashMap<Tid, (Comm, u64, u64)> = HashMap::new();
    let (mut first, mut last): (Option<Ts>, Option<Ts>) = (None, None);
    let mut cpus = BTreeSet::new();
    let (mut lost, mut lost_unknown) = (0u64, 0u64);
    let mut n = 0u64;
    let mut block = BlockInfo::default();
    let mut batch = Vec::new();
    while inputs.next_batch(&mut batch)? {
        for ev in &batch {
            n += 1;
            // Side-band name records (perf synthesizes them at time 0 for tasks that existed
            // before recording) say nothing about the traced time range.
            if !ev.kind.is_side_band() {
                first = Some(first.map_or(ev.ts, |f| f.min(ev.ts)));
                last = Some(last.map_or(ev.ts, |l| l.max(ev.ts)));
            }
            cpus.insert(ev.cpu);
            let mut name_task = |pid: Tid, comm: Comm| {
                let t = tasks.entry(pid).or_insert((comm, 0, 0));
                if !comm.is_empty() {
                    t.0 = comm;
                }
            };
            match &ev.kind {
                EventKind::Switch(s) => {
                    name_task(s.prev.pid, s.prev.comm);
                    name_task(s.next.pid, s.next.comm);
                    if let Some(t) = tasks.get_mut(&s.next.pid) {
                        t.2 += 1;
                    }
                }
                EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => {
                    name_task(w.task.pid, w.task.comm)
                }
                EventKind::TaskComm { tid, comm, .. } => name_task(*tid, *comm),
                EventKind::Block(b) => block.note(b),
                EventKind::Lost { count } => match count {
                    Some(c) => lost = lost.saturating_add(*c),
                    None => lost_unknown += 1,
                },
                _ => {}
            }
            if ev.pid >= 0 {
                tasks.entry(ev.pid).or_insert((Comm::EMPTY, 0, 0)).1 += 1;
            }
            match ev.kind.static_name() {
                Some(name) => *counts.entry(name).or_default() += 1,
                None => {
                    *generic_counts
                        .entry(ev.kind.name().to_string())
                        .or_default() += 1
                }
            }
        }
    }
    let mut event_counts: BTreeMap<String, u64> = counts
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    event_counts.extend(generic_counts);
    let declared: BTreeSet<String> = inputs
        .metas()
        .iter()
        .flat_map(|m| m.declared_events.iter().cloned())
        .collect();
    let mut task_list: Vec<TaskInfo> = tasks
        .into_iter()
        .filter(|(pid, _)| *pid != 0)
        .map(|(pid, (comm, events, sw))| TaskInfo {
            pid,
            comm: comm.as_str().to_string(),
            events,
            switches_in: sw,
        })
        .collect();
    task_list.sort_by(|a, b| {
        b.switches_in
            .cmp(&a.switches_in)
            .then(b.events.cmp(&a.events))
            .then(a.pid.cmp(&b.pid))
    });
    let dq = inputs.quality();
    block.finish();
    let block = (!block.actions.is_empty()).then_some(block);
    let report = InfoReport {
        inputs: inputs.metas(),
        events: n,
        first_ts_ns: first,
        last_ts_ns: last,
        duration_ns: first.zip(last).map(|(f, l)| l - f),
        cpus_seen: cpus.into_iter().collect(),
        capabilities: capabilities(&event_counts, &declared),
        event_counts,
        lost_events: lost,
        lost_events_unknown_count: lost_unknown,
        lost_samples: dq.count(stallscope::model::Problem::LostSamples),
        tasks: task_list,
        block,
        data_quality: dq,
    };
    match args.format {
        OutputFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &report)?;
            writeln!(out)?;
        }
        OutputFormat::Text => write_text(out, &report, args.top)?,
    }
    Ok(())
}

fn write_text(out: &mut dyn Write, r: &InfoReport<'_>, top: usize) -> std::io::Result<()> {
    for m in &r.inputs {
        let fmt = m.format.map_or("unknown", |f| f.name());
        let comp = m
            .compression
            .as_deref()
            .map(|c| format!(" ({c}-compressed)"))
            .unwrap_or_default();
        writeln!(out, "Input:    {}  [{fmt}{comp}]", m.path)?;
        let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
        writeln!(out, "  kernel:   {}", opt(&m.kernel_release))?;
        if m.hostname.is_some() || m.tool_version.is_some() {
            writeln!(
                out,
                "  host:     {}   recorded by: {}",
                opt(&m.hostname),
                opt(&m.tool_version)
            )?;
        }
        if let Some(c) = &m.cmdline {
            writeln!(out, "  command:  {c}")?;
        }
        let clock = opt(&m.clock);
        let unit = if m.clock_is_ns {
            "ns"
        } else {
            "raw counts, not ns"
        };
        let recorded = match m.cpus_recorded.list_text() {
            Some(list) => format!(" (events of CPUs {list} only)"),
            None => String::new(),
        };
        writeln!(
            out,
            "  cpus:     {}{recorded}   clock: {clock} ({unit})",
            m.nr_cpus.map_or("unknown".into(), |n| n.to_string())
        )?;
        if m.tasks_recorded == stallscope::model::TaskCoverage::Targets {
            writeln!(
                out,
                "  tasks:    the recorded command's only (a per-task recording, no -a): other tasks' runs and waits are not in it"
            )?;
        }
        if !m.lost_per_cpu.is_empty() {
            let parts: Vec<String> = m
                .lost_per_cpu
                .iter()
                .map(|(cpu, n)| format!("cpu{cpu}: {n}"))
                .collect();
            writeln!(out, "  lost (recorder stats): {}", parts.join(", "))?;
        }
        if let Some(ctx) = &m.system_context {
            writeln!(out, "  system context (recorded):")?;
            for line in stallscope::record::summarize(ctx) {
                writeln!(out, "    {line}")?;
            }
        }
    }
    let span = match (r.first_ts_ns, r.last_ts_ns, r.duration_ns) {
        (Some(f), Some(l), Some(d)) => {
            format!(
                "{} .. {}  ({}.{:06} s)",
                fmt_secs_nsecs(f),
                fmt_secs_nsecs(l),
                d / 1_000_000_000,
                (d % 1_000_000_000) / 1000
            )
        }
        _ => "no events".into(),
    };
    writeln!(out, "Time:     {span}")?;
    writeln!(out, "CPUs seen: {:?}", r.cpus_seen)?;
    writeln!(out, "Events:   {}", r.events)?;
    let mut counts: Vec<(&String, &u64)> = r.event_counts.iter().collect();
    counts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (name, c) in counts {
        writeln!(out, "  {c:>12}  {name}")?;
    }
    if r.lost_events > 0 || r.lost_events_unknown_count > 0 {
        writeln!(
            out,
            "Lost events: {} (+{} drops of unknown size)",
            r.lost_events, r.lost_events_unknown_count
        )?;
    } else {
        writeln!(out, "Lost events: none reported")?;
    }
    if r.lost_samples > 0 {
        writeln!(
            out,
            "Lost samples: {} (perf's LOST_SAMPLES records: the same drops, counted per event)",
            r.lost_samples
        )?;
    }
    writeln!(
        out,
        "Tasks:    {} (top {} by switches in)",
        r.tasks.len(),
        top.min(r.tasks.len())
    )?;
    for t in r.tasks.iter().take(top) {
        writeln!(
            out,
            "  {:>8}  {:<20} {:>8} switches in  {:>8} events",
            t.pid, t.comm, t.switches_in, t.events
        )?;
    }
    if let Some(b) = &r.block {
        write_block_text(out, b)?;
    }
    writeln!(out, "Analyses:")?;
    for c in &r.capabilities {
        let mark = if c.supported { "yes" } else { "no " };
        writeln!(out, "  [{mark}] {:<24} needs {}", c.analysis, c.needs)?;
        if let Some(h) = c.record_hint {
            writeln!(out, "        to record: {h}")?;
        }
    }
    write_quality_text(out, &r.data_quality)
}

fn write_block_text(out: &mut dyn Write, b: &BlockInfo) -> std::io::Result<()> {
    let join = |m: &BTreeMap<String, u64>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    writeln!(out, "Block I/O:")?;
    writeln!(out, "  devices:  {}", join(&b.devices))?;
    writeln!(out, "  actions:  {}", join(&b.actions))?;
    let phases = if b.btt_phases.is_empty() {
        "none (needs at least Q)".to_string()
    } else {
        b.btt_phases.join(" ")
    };
    writeln!(out, "  btt phases computable: {phases}")
}
