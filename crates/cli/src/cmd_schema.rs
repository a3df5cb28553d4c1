//! `stallscope schema`: prints the JSON Schema of a document stallscope writes, derived from
//! the library's types (docs/report.schema.json is this output).

use std::io::Write;

use clap::{Args, ValueEnum};

use crate::common::CliError;

/// The documents with a schema.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Document {
    /// The report of `analyze --format json` (`stallscope.report/1`).
    Report,
}

/// Arguments of `stallscope schema`.
#[derive(Args)]
#[command(
    after_help = "Examples:\n  stallscope schema report > report.schema.json\n  \
stallscope analyze perf.data --format json | check-jsonschema --schemafile <(stallscope schema report) -"
)]
pub struct SchemaArgs {
    /// Which document.
    #[arg(value_enum, default_value = "report")]
    pub document: Document,
}

/// Prints the schema, pretty, with a final newline.
pub fn run(args: &SchemaArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let schema = match args.document {
        Document::Report => stallscope::model::report::report_schema(),
    };
    let text = serde_json::to_string_pretty(&schema)
        .map_err(|e| CliError::Usage(format!("schema: {e}")))?;
    writeln!(out, "{text}").map_err(CliError::Io)
}
