//! `stallscope explain ID`: prints a detector's markdown explanation (what it finds, why it
//! matters, how to confirm, limits, severity rules) followed by its thresholds.

use std::io::Write;

use clap::Args;
use stallscope::detect::registry;

use crate::common::CliError;

/// Arguments of `stallscope explain`.
#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// Detector id (see `stallscope detectors`).
    id: String,
}

/// Runs the command.
pub fn run(args: &ExplainArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let e = registry::find(&args.id).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown detector {:?}; expected one of: {}",
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
