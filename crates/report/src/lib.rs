//! stallscope renderers: a [`Report`](stallscope_model::Report) as text ([`text`]: one block
//! per finding, most severe first, or one line per finding) or JSON ([`json`]: the
//! `stallscope.report/1` document) or one self-contained HTML page ([`html`]: findings as
//! static HTML plus per-CPU timelines of the windows around them). Depends on the model only, so a saved JSON report can be
//! re-rendered.

pub mod html;
pub mod json;
pub mod text;

use std::collections::BTreeMap;

use stallscope_model::{DataQuality, QualityEntry};

/// Data-quality counters as report entries.
pub fn quality_entries(dq: &DataQuality) -> BTreeMap<String, QualityEntry> {
    dq.entries()
        .map(|(k, e)| {
            let severity = e.severity.name();
            (
                k.to_string(),
                QualityEntry {
                    severity: severity.to_string(),
                    count: e.count,
                    description: e.description.clone(),
                    examples: e.examples.clone(),
                },
            )
        })
        .collect()
}
