//! `stallscope export`: writes the inputs' events (and, with `--findings`, what `analyze`
//! finds) as a Perfetto protobuf trace or as Chrome trace-event JSON, streaming: the output
//! is written while the inputs are read. Layouts: `stallscope_export::perfetto` and
//! `stallscope_export::chrome_json`; user documentation: docs/export.md.
//!
//! A one-line summary goes to stdout (`wrote OUT: …`), the data-quality block to stderr.
//! When an input turns out unreadable part-way, the partial output file is removed and the
//! command fails (exit 2) with the reader's error.

use std::fs::File;
use std::io::{self, BufWriter, Write};

use clap::{Args, ValueEnum};
use stallscope::detect::registry;
use stallscope::detect::{Engine, Params};
use stallscope::export::chrome_json::ChromeJsonWriter;
use stallscope::export::perfetto::PerfettoWriter;
use stallscope::export::ExportStats;
use stallscope::model::{Event, Finding};

use crate::common::{write_quality_text, CliError, InputArgs};

/// `--to`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Perfetto protobuf trace (ui.perfetto.dev, trace_processor_shell).
    Perfetto,
    /// Chrome trace-event JSON (object form).
    ChromeJson,
}

/// Arguments of `stallscope export`.
#[derive(Args, Debug)]
#[command(
    after_help = "Open a Perfetto export at https://ui.perfetto.dev (Open trace file).\n\n\
Examples:\n  stallscope export perf.data --to perfetto -o trace.pftrace --findings\n  \
stallscope export trace.dat --to chrome-json -o trace.json"
)]
pub struct ExportArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Output format.
    #[arg(long, value_enum)]
    to: ExportFormat,
    /// Output file (`-` = stdout).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: String,
    /// Run the analyze detectors (default thresholds) and add their findings as a track.
    #[arg(long)]
    findings: bool,
}

/// Either writer, behind one interface.
enum Sink<W: Write> {
    Perfetto(PerfettoWriter<W>),
    Chrome(ChromeJsonWriter<W>),
}

impl<W: Write> Sink<W> {
    fn event(&mut self, ev: &Event) -> io::Result<()> {
        match self {
            Sink::Perfetto(w) => w.event(ev),
            Sink::Chrome(w) => w.event(ev),
        }
    }

    fn finish(self, findings: &[Finding]) -> io::Result<ExportStats> {
        Ok(match self {
            Sink::Perfetto(w) => w.finish(findings)?.1,
            Sink::Chrome(w) => w.finish(findings)?.1,
        })
    }
}

/// Runs the command.
pub fn run(args: &ExportArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let mut inputs = args.input.open()?;
    let metas: Vec<_> = inputs.metas().into_iter().cloned().collect();
    let release = metas.iter().find_map(|m| m.kernel_release.clone());
    let nr_cpus = metas.iter().filter_map(|m| m.nr_cpus).max();
    let dest: Box<dyn Write> = if args.output == "-" {
        Box::new(io::stdout())
    } else {
        let f = File::create(&args.output)
            .map_err(|e| CliError::Usage(format!("cannot create output {:?}: {e}", args.output)))?;
        Box::new(f)
    };
    let dest = BufWriter::with_capacity(1 << 18, dest);
    let mut sink = match args.to {
        ExportFormat::Perfetto => {
            let mut w = PerfettoWriter::new(dest, release.as_deref(), nr_cpus)?;
            for ctx in metas.iter().filter_map(|m| m.system_context.as_ref()) {
                w.learn_context(ctx);
            }
            Sink::Perfetto(w)
        }
        ExportFormat::ChromeJson => Sink::Chrome(ChromeJsonWriter::new(dest, release.as_deref())?),
    };
    let meta_refs: Vec<_> = metas.iter().collect();
    let mut engine = args.findings.then(|| {
        Engine::new(
            registry::DETECTORS
                .iter()
                .map(|e| (e.make)(&Params::defaults(e.info.params)))
                .collect(),
            &meta_refs,
        )
    });
    let streamed = (|| -> Result<(), CliError> {
        while let Some(ev) = inputs.next_event()? {
            if let Some(engine) = engine.as_mut() {
                engine.process(&ev);
            }
            sink.event(&ev)?;
        }
        Ok(())
    })();
    if let Err(e) = streamed {
        // a half-written export would look valid to a viewer (Perfetto) or not parse at
        // all (JSON): remove it rather than leave it behind
        drop(sink);
        if args.output != "-" {
            let _ = std::fs::remove_file(&args.output);
        }
        return Err(e);
    }
    let mut dq = inputs.quality();
    let mut findings = Vec::new();
    if let Some(engine) = engine {
        let result = engine.finish();
        dq.merge(&result.quality);
        for o in result.outcomes {
            if let Ok(f) = o.result {
                findings.extend(f);
            }
        }
        findings.sort_by_key(|f| (f.window.start_ns, f.window.end_ns));
    }
    // processes the text formats named while reading (ftrace record-tgid, perf script PID/TID)
    if let Sink::Perfetto(w) = &mut sink {
        for m in inputs.metas() {
            w.learn_tgids(&m.task_tgids);
        }
    }
    let stats = sink.finish(&findings)?;
    let events: u64 = stats.events.values().sum();
    if inputs.events_read() == 0 {
        // an empty trace would open in a viewer as if nothing happened
        if args.output != "-" {
            let _ = std::fs::remove_file(&args.output);
        }
        return Err(CliError::Missing(format!(
            "{}: export has nothing to write: the inputs hold no event stallscope could read (`stallscope info` says what they contain)",
            args.input.files.join(", ")
        )));
    }
    // with `-o -` the export itself is on stdout: the summary goes to stderr
    let mut stderr = io::stderr();
    let summary: &mut dyn Write = if args.output == "-" { &mut stderr } else { out };
    writeln!(
        summary,
        "wrote {}: {}, {} events, {} findings, {} bytes",
        args.output,
        match args.to {
            ExportFormat::Perfetto => "perfetto",
            ExportFormat::ChromeJson => "chrome-json",
        },
        events,
        stats.findings,
        stats.bytes
    )?;
    write_quality_text(&mut io::stderr(), &dq)?;
    Ok(())
}
