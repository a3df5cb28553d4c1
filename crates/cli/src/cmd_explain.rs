//! `stallscope explain ID`: prints a detector's markdown explanation (what it finds, why it
//! matters, how to confirm, limits, severity rules) followed by its thresholds;
//! `stallscope explain data-quality` lists the data-quality registry (every problem the
//! readers and the model count: key, severity, meaning) and `stallscope explain KEY` one of
//! them.

use std::io::Write;

use clap::Args;
use stallscope::detect::registry;
use stallscope::model::Problem;

use crate::common::CliError;

/// Arguments of `stallscope explain`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  stallscope explain runqueue-starvation\n  \
stallscope explain data-quality\n  stallscope explain switch_prev_mismatch")]
pub struct ExplainArgs {
    /// Detector id (see `stallscope detectors`), `data-quality` for the data-quality
    /// registry, or one data-quality key (as in a report's `data_quality`).
    id: String,
}

/// The argument that lists the data-quality registry.
const DATA_QUALITY: &str = "data-quality";

/// Prints `problems` as markdown rows: key, severity, meaning.
fn problems(problems: &[Problem], out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(out, "| key | severity | meaning |\n|---|---|---|")?;
    for p in problems {
        let severity = p.severity().name();
        writeln!(out, "| `{}` | {severity} | {} |", p.key(), p.help())?;
    }
    Ok(())
}

/// Runs the command.
pub fn run(args: &ExplainArgs, out: &mut dyn Write) -> Result<(), CliError> {
    if args.id == DATA_QUALITY {
        writeln!(
            out,
            "# Data quality\n\nRecoverable input problems are counted, never skipped silently; a report lists \
             those met under `data_quality` (key, severity, count, first examples).\n"
        )?;
        return problems(Problem::ALL, out);
    }
    if let Some(p) = Problem::from_key(&args.id) {
        return problems(&[p], out);
    }
    let e = registry::find(&args.id).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown detector or data-quality key {:?}; expected `{DATA_QUALITY}`, a data-quality key \
             (`stallscope explain {DATA_QUALITY}` lists them) or a detector: {}",
            args.id,
            registry::ids()
        ))
    })?;
    out.write_all(e.info.explanation.as_bytes())?;
    writeln!(out, "\n## Thresholds (`--set {}.NAME=VALUE`)", e.info.id)?;
    for p in e.info.params {
        writeln!(
            out,
            "- `{}` = {} ({}): {}",
            p.name,
            p.default,
            p.unit.name(),
            p.doc
        )?;
    }
    writeln!(
        out,
        "\n## Needs\n{}",
        e.info
            .needs
            .iter()
            .map(|a| a.join(" or "))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    writeln!(out, "\nTo record: `{}`", e.info.record_command)?;
    Ok(())
}
