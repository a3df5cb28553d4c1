//! `stallscope detectors`: lists every detector with its summary, needed events and
//! thresholds (text table, or JSON: `[{"id","summary","needs","optional","record_command",
//! "params":[{"name","default","unit","doc"}]}]`).

use std::io::Write;

use clap::Args;
use serde::Serialize;
use stallscope::detect::registry;

use crate::common::{CliError, OutputFormat};

/// Arguments of `stallscope detectors`.
#[derive(Args, Debug)]
pub struct DetectorsArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
}

#[derive(Serialize)]
struct ParamJson {
    name: &'static str,
    default: u64,
    unit: &'static str,
    doc: &'static str,
}

#[derive(Serialize)]
struct DetectorJson {
    id: &'static str,
    summary: &'static str,
    needs: Vec<String>,
    optional: &'static [&'static str],
    record_command: &'static str,
    params: Vec<ParamJson>,
}

/// Runs the command.
pub fn run(args: &DetectorsArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let list: Vec<DetectorJson> = registry::DETECTORS
        .iter()
        .map(|e| DetectorJson {
            id: e.info.id,
            summary: e.info.summary,
            needs: e.info.needs.iter().map(|alts| alts.join(" | ")).collect(),
            optional: e.info.optional,
            record_command: e.info.record_command,
            params: e
                .info
                .params
                .iter()
                .map(|p| ParamJson {
                    name: p.name,
                    default: p.default,
                    unit: p.unit.name(),
                    doc: p.doc,
                })
                .collect(),
        })
        .collect();
    match args.format {
        OutputFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &list)?;
            writeln!(out)?;
        }
        OutputFormat::Text => {
            for d in &list {
                writeln!(out, "{:<22} {}", d.id, d.summary)?;
                writeln!(out, "{:<22} needs: {}", "", d.needs.join(", "))?;
                for p in &d.params {
                    writeln!(
                        out,
                        "{:<22}   {}.{}={} ({}) — {}",
                        "", d.id, p.name, p.default, p.unit, p.doc
                    )?;
                }
            }
            writeln!(out, "\nMore: stallscope explain ID")?;
        }
    }
    Ok(())
}
