//! `stallscope export`: writes the inputs' events (and, with `--findings`, what `analyze`
//! finds) as a Perfetto protobuf trace or as Chrome trace-event JSON, streaming: the output
//! is written while the inputs are read. Layouts: `stallscope_export::perfetto` and
//! `stallscope_export::chrome_json`; user documentation: docs/export.md.
//!
//! The events and the findings come from one reading of the inputs: the writer is a
//! product of `stallscope::analyze::analyze_with`, so the findings track is exactly
//! `analyze`'s report (default thresholds).
//!
//! A one-line summary goes to stdout (`wrote OUT: …`), the data-quality block to stderr.
//! When an input turns out unreadable part-way, the partial output file is removed and the
//! command fails (exit 2) with the reader's error.

use std::fs::File;
use std::io::{self, BufWriter, Write};

use clap::{Args, ValueEnum};
use stallscope::analyze::{analyze_with, AnalyzeOptions, SameReading};
use stallscope::export::chrome_json::ChromeJsonWriter;
use stallscope::export::perfetto::PerfettoWriter;
use stallscope::export::ExportStats;
use stallscope::model::{Event, Finding};
use stallscope::Inputs;

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

/// The export's writer as a product of the analysis' reading: made when the inputs are
/// open (it needs their kernel release, CPUs and recorded context), then fed every event.
/// The first write error stops the writing; it is returned after the reading.
struct ExportProduct<'a> {
    args: &'a ExportArgs,
    sink: Option<Sink<BufWriter<Box<dyn Write>>>>,
    error: Option<CliError>,
}

impl ExportProduct<'_> {
    fn make_sink(&self, inputs: &Inputs) -> Result<Sink<BufWriter<Box<dyn Write>>>, CliError> {
        let metas = inputs.metas();
        let release = metas.iter().find_map(|m| m.kernel_release.clone());
        let nr_cpus = metas.iter().filter_map(|m| m.nr_cpus).max();
        let dest: Box<dyn Write> = if self.args.output == "-" {
            Box::new(io::stdout())
        } else {
            let f = File::create(&self.args.output).map_err(|e| {
                CliError::Usage(format!("cannot create output {:?}: {e}", self.args.output))
            })?;
            Box::new(f)
        };
        let dest = BufWriter::with_capacity(1 << 18, dest);
        Ok(match self.args.to {
            ExportFormat::Perfetto => {
                let mut w = PerfettoWriter::new(dest, release.as_deref(), nr_cpus)?;
                for ctx in metas.iter().filter_map(|m| m.system_context.as_ref()) {
                    w.learn_context(ctx);
                }
                Sink::Perfetto(w)
            }
            ExportFormat::ChromeJson => {
                Sink::Chrome(ChromeJsonWriter::new(dest, release.as_deref())?)
            }
        })
    }

    /// Removes a half-written output: it would look valid to a viewer (Perfetto) or not
    /// parse at all (JSON).
    fn discard(&mut self) {
        self.sink = None;
        if self.args.output != "-" {
            let _ = std::fs::remove_file(&self.args.output);
        }
    }
}

impl SameReading for ExportProduct<'_> {
    fn open(&mut self, inputs: &Inputs) {
        match self.make_sink(inputs) {
            Ok(sink) => self.sink = Some(sink),
            Err(e) => self.error = Some(e),
        }
    }

    fn events(&mut self, run: &[Event]) {
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        for ev in run {
            if let Err(e) = sink.event(ev) {
                self.error = Some(CliError::Io(e));
                self.discard();
                return;
            }
        }
    }
}

/// Runs the command: one reading of the inputs feeds the writer and (with `--findings`)
/// the same analysis `stallscope analyze` runs, so the findings track is analyze's report.
pub fn run(args: &ExportArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let mut options = AnalyzeOptions::new(args.input.files.clone());
    options.input_format = args.input.forced_format()?;
    options.merge_unrelated = args.input.merge_unrelated;
    options.merge_overlapping = args.input.merge_overlapping;
    options.on_open = Some(crate::common::attach_progress);
    if !args.findings {
        options.detectors.clear();
    }
    let mut product = ExportProduct {
        args,
        sink: None,
        error: None,
    };
    let analysis = match analyze_with(&options, Some(&mut product)) {
        Ok(a) => a,
        Err(e) => {
            product.discard();
            return Err(e.into());
        }
    };
    if let Some(e) = product.error.take() {
        product.discard();
        return Err(e);
    }
    let Some(mut sink) = product.sink.take() else {
        return Err(CliError::Missing(format!(
            "{}: export has nothing to write: the inputs hold no trace events (a CPU profile? `stallscope info` says what they contain)",
            args.input.files.join(", ")
        )));
    };
    let mut findings = analysis.report.findings;
    findings.sort_by_key(|f| (f.window.start_ns, f.window.end_ns));
    // processes the text formats named while reading (ftrace record-tgid, perf script PID/TID)
    if let Sink::Perfetto(w) = &mut sink {
        for m in &analysis.metas {
            w.learn_tgids(&m.task_tgids);
        }
    }
    let stats = sink.finish(&findings)?;
    let events: u64 = stats.events.values().sum();
    if analysis.events_read == 0 {
        // an empty trace would open in a viewer as if nothing happened
        if args.output != "-" {
            let _ = std::fs::remove_file(&args.output);
        }
        return Err(CliError::Missing(format!(
            "{}: export has nothing to write: the inputs hold no event stallscope could read (`stallscope info` says what they contain)",
            args.input.files.join(", ")
        )));
    }
    let dq = analysis.quality;
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
