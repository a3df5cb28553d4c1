//! JSON rendering: the report as one pretty-printed `stallscope.report/1` document
//! (schema: `docs/report.schema.json`), and parsing one back.

use std::io::{self, Write};

use stallscope_model::Report;

/// Writes `report` as pretty JSON followed by a newline.
pub fn write(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report).map_err(|e| {
        // keep the I/O error's kind (a closed pipe is not a failure of the command)
        io::Error::new(e.io_error_kind().unwrap_or(io::ErrorKind::Other), e)
    })?;
    out.write_all(b"\n")
}

/// Parses a saved report.
pub fn parse(text: &str) -> Result<Report, serde_json::Error> {
    serde_json::from_str(text)
}
