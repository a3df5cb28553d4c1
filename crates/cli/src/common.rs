//! Flags and plumbing shared by every subcommand: input selection, output format, errors,
//! data-quality rendering.

use std::fmt;
use std::io::{self, Write};

use clap::{Args, ValueEnum};
use stallscope::model::{DataQuality, InputFormat};
use stallscope::read::ReadError;
use stallscope::Inputs;

/// Inputs to read.
#[derive(Args, Debug, Clone)]
pub struct InputArgs {
    /// Trace files (`-` = stdin). Several files are merged in time order.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// Skip format detection: perf-data, perf-pipe, trace-dat, trace-cmd-text, ftrace-text,
    /// perf-script-text, blktrace, blkparse-text.
    #[arg(long, value_name = "FORMAT")]
    pub input_format: Option<String>,
    /// Merge several files even when they cannot be one recording (another kernel, host or
    /// clock, or first events more than 60 s apart); refused otherwise.
    #[arg(long)]
    pub merge_unrelated: bool,
    /// Merge files that hold the same events (one recording twice, e.g. a perf.data and its
    /// own perf script text, or two recordings of the same CPUs made together), events
    /// identical in time, CPU, task and kind counted once; refused otherwise.
    #[arg(long)]
    pub merge_overlapping: bool,
}

impl InputArgs {
    /// `--input-format`, checked.
    pub fn forced_format(&self) -> Result<Option<InputFormat>, CliError> {
        match &self.input_format {
            None => Ok(None),
            Some(name) => InputFormat::from_name(name).map(Some).ok_or_else(|| {
                let names: Vec<&str> = InputFormat::ALL.iter().map(|f| f.name()).collect();
                CliError::Usage(format!(
                    "unknown --input-format {name:?}; expected one of {}",
                    names.join(", ")
                ))
            }),
        }
    }

    /// The facade's input options (progress on a terminal attached).
    pub fn options(&self) -> Result<stallscope::InputOptions, CliError> {
        Ok(stallscope::InputOptions {
            files: self.files.clone(),
            input_format: self.forced_format()?,
            merge_unrelated: self.merge_unrelated,
            merge_overlapping: self.merge_overlapping,
            on_open: Some(attach_progress),
        })
    }

    /// Opens the inputs.
    pub fn open(&self) -> Result<Inputs, CliError> {
        Ok(self.options()?.open()?)
    }
}

/// `--format`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// Human-readable text.
    #[default]
    Text,
    /// JSON (one document; `dump` writes JSON lines).
    Json,
}

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// An input could not be read (exit 2).
    Read(ReadError),
    /// Bad flags (exit 2).
    Usage(String),
    /// Writing output failed (a broken pipe exits 0).
    Io(io::Error),
    /// The inputs lack the events the command measures (exit 2): what is missing and the
    /// command that records it.
    Missing(String),
}

impl CliError {
    /// [`CliError::Missing`] for `command` on `files`: `what` is missing; `record` records it.
    pub fn missing(command: &str, files: &[String], what: &str, record: &str) -> CliError {
        CliError::Missing(format!(
            "{}: {command} has nothing to measure: {what}; record them with `{record}`",
            files.join(", ")
        ))
    }

    /// Writes `{"nothing_analyzed": MESSAGE}` on `out` in JSON mode (a JSON reader learns
    /// why there is no table), then returns the error itself (exit 2, message on stderr).
    pub fn json_too(self, format: OutputFormat, out: &mut dyn Write) -> CliError {
        if format == OutputFormat::Json {
            let msg = self.to_string();
            let _ =
                serde_json::to_writer(&mut *out, &serde_json::json!({ "nothing_analyzed": msg }))
                    .map_err(io::Error::other)
                    .and_then(|()| out.write_all(b"\n"));
        }
        self
    }

    /// [`CliError::Missing`] for a filter of `command` that matches nothing in `files`.
    pub fn filtered_out(command: &str, files: &[String], what: &str) -> CliError {
        CliError::Missing(format!(
            "{}: {command} has nothing to show: {what}",
            files.join(", ")
        ))
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Read(e) => write!(f, "{e}"),
            CliError::Usage(m) => write!(f, "{m}"),
            CliError::Io(e) => write!(f, "writing output: {e}"),
            CliError::Missing(m) => write!(f, "{m}"),
        }
    }
}

impl From<stallscope::analyze::AnalyzeError> for CliError {
    fn from(e: stallscope::analyze::AnalyzeError) -> CliError {
        match e {
            stallscope::analyze::AnalyzeError::Read(e) => CliError::Read(e),
            stallscope::analyze::AnalyzeError::Usage(m) => CliError::Usage(m),
            stallscope::analyze::AnalyzeError::Output(m) => CliError::Io(io::Error::other(m)),
        }
    }
}

impl From<ReadError> for CliError {
    fn from(e: ReadError) -> Self {
        CliError::Read(e)
    }
}

impl From<io::Error> for CliError {
    fn from(e: io::Error) -> Self {
        CliError::Io(e)
    }
}

impl From<serde_json::Error> for CliError {
    fn from(e: serde_json::Error) -> Self {
        // keep the I/O error's kind (a closed pipe exits 0 for JSON as for text)
        match e.io_error_kind() {
            Some(kind) => CliError::Io(io::Error::new(kind, e)),
            None => CliError::Io(io::Error::other(e)),
        }
    }
}

/// Writes the data-quality block (text) if anything was counted.
pub fn write_quality_text(out: &mut dyn Write, dq: &DataQuality) -> io::Result<()> {
    if dq.is_empty() {
        return Ok(());
    }
    writeln!(out, "Data quality:")?;
    for (key, e) in dq.entries() {
        writeln!(
            out,
            "  {:<8} {key}: {} — {}",
            format!("{:?}", e.severity).to_lowercase(),
            e.count,
            e.description
        )?;
        for ex in &e.examples {
            writeln!(out, "           e.g. {ex}")?;
        }
    }
    Ok(())
}

/// A progress bar on stderr (`indicatif`): drawn only when stderr is a terminal (hidden on
/// pipes and files, so never mixed into JSON or redirected output), from the first update
/// a second after `start` on, and erased when dropped. `total` bytes when the inputs know
/// their size (a bar with the events read), else a counter.
pub struct ReadProgress {
    bar: Option<indicatif::ProgressBar>,
    start: std::time::Instant,
    what: &'static str,
}

impl ReadProgress {
    /// Progress of reading `what` (`events`, `traces`).
    pub fn new(what: &'static str) -> ReadProgress {
        ReadProgress {
            bar: None,
            start: std::time::Instant::now(),
            what,
        }
    }

    /// `done` of `total` (bytes or traces, when known), with `count` items so far and a
    /// message (the trace being read).
    pub fn update(&mut self, done: u64, total: Option<u64>, count: u64, message: &str) {
        if self.bar.is_none() {
            if self.start.elapsed() < std::time::Duration::from_secs(1) {
                return;
            }
            let target = indicatif::ProgressDrawTarget::stderr();
            if target.is_hidden() {
                return; // not a terminal: never drawn, never checked again cheaply
            }
            let bar = match total {
                Some(t) if t > 0 => indicatif::ProgressBar::with_draw_target(Some(t), target)
                    .with_style(
                        indicatif::ProgressStyle::with_template(
                            "stallscope: {bar:30} {percent:>3}% {elapsed} {msg}",
                        )
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                    ),
                _ => indicatif::ProgressBar::with_draw_target(None, target),
            };
            let bar = bar
                .with_elapsed(self.start.elapsed())
                .with_finish(indicatif::ProgressFinish::AndClear);
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            bar.set_message(format!("{count} {}{message}", self.what));
        }
    }
}

impl Drop for ReadProgress {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// Attaches a [`ReadProgress`] to the inputs (bytes read of their total, events read); it
/// goes away with them.
pub fn attach_progress(inputs: &mut Inputs) {
    let mut progress = ReadProgress::new("events");
    inputs.on_progress(move |p| {
        let (done, total) = p.bytes.unzip();
        progress.update(done.unwrap_or(p.events), total, p.events, "");
    });
}
