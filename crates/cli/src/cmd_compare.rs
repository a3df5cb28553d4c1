//! `stallscope compare BASE… --vs NEW…`: compares two sets of runs — traces, CPU profiles,
//! or metric files (`perf stat`, fio JSON) — and says which changes are significant;
//! `stallscope compare LKP-TABLE` reads an lkp-tests compare table, which holds both sides.
//! The work is in the `stallscope-compare` crate; this module parses flags and prints.
//!
//! Exit status: 0; 2 when an input cannot be read or the two sides are not of one kind.

use std::io::Write;

use clap::Args;

use crate::common::{CliError, OutputFormat};

/// Arguments of `stallscope compare`.
#[derive(Args, Debug)]
#[command(
    after_help = "Several files on a side are repeated runs of that configuration. \
Both sides must hold one kind of input: traces (perf.data, trace.dat, text traces), \
profiles (folded stacks), or metric files (perf stat text / -r N / -x, CSV; fio \
--output-format=json). A change is called significant only when its Holm-adjusted p-value \
is below --alpha. An lkp-tests `compare` table (the kernel test robot's `%stddev %change \
%stddev` rows) holds both sides and is given alone: its changes are checked against their \
stddev and its perf-profile rows named with the lock-spinning vocabulary. Details: \
docs/compare.md.\n\n\
Examples:\n  stallscope compare equal.perf.data --vs starve.perf.data\n  \
stallscope compare base-1.perf.data base-2.perf.data --vs new-1.perf.data new-2.perf.data --comm cyclictest\n  \
stallscope compare base-*.perf-stat.csv --vs new-*.perf-stat.csv\n  \
stallscope compare base.fio.json --vs new.fio.json --alpha 0.01\n  \
stallscope compare before.folded --vs after.folded --format json | jq .profile.rises\n  \
stallscope compare lkp-report.txt"
)]
pub struct CompareArgs {
    /// Base runs (one file per run).
    #[arg(required = true, value_name = "BASE")]
    base: Vec<String>,
    /// New runs to compare against the base (not with an lkp-tests compare table, which
    /// holds both sides).
    #[arg(long = "vs", num_args = 1.., value_name = "NEW")]
    new: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
    /// Significance level: a change is significant when its adjusted p-value is below it.
    #[arg(long, default_value_t = 0.05, value_name = "ALPHA")]
    alpha: f64,
    /// Read the inputs as this kind instead of guessing (perf.data and perf script text are
    /// traces when they carry sched_switch, profiles otherwise).
    #[arg(long, value_name = "trace|profile")]
    kind: Option<String>,
    /// Traces: compare only these task names (repeatable, or comma-separated). Fewer rows
    /// tested means a smaller multiple-comparison correction.
    #[arg(long = "comm", value_name = "COMM", value_delimiter = ',')]
    comms: Vec<String>,
    /// Profiles: kernel symbol table (`/proc/kallsyms` of the recording host). Default: this
    /// host's /proc/kallsyms when the kernel release matches; `none` disables.
    #[arg(long, value_name = "FILE")]
    kallsyms: Option<String>,
}

/// Runs the command.
pub fn run(args: &CompareArgs, out: &mut dyn Write) -> Result<(), CliError> {
    use stallscope::read::profile::{KernelSymbolSource, ProfileOptions};
    let symbols = match args.kallsyms.as_deref() {
        None => KernelSymbolSource::Auto,
        Some("none") => KernelSymbolSource::Off,
        Some(f) => KernelSymbolSource::File(f.to_string()),
    };
    let opts = stallscope::compare::Options {
        alpha: args.alpha,
        kind: args.kind.clone(),
        comms: args.comms.clone(),
        profile: ProfileOptions {
            symbols,
            event: None,
            no_user_symbols: false,
        },
    };
    let c = stallscope::compare::compare(&args.base, &args.new, &opts).map_err(|e| match e {
        stallscope::compare::CompareError::Read(r) => CliError::Read(r),
        stallscope::compare::CompareError::Usage(m) => CliError::Usage(m),
    })?;
    match args.format {
        OutputFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &c)?;
            writeln!(out)?;
        }
        OutputFormat::Text => stallscope::compare::render::write_text(out, &c)?,
    }
    Ok(())
}
