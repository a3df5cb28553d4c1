//! Helpers shared by the CLI test binaries (`mod common;` in each).
//!
//! [`report_errors`]: a report checked against docs/report.schema.json (the schema derived
//! from the report types, `stallscope schema report`) by the `jsonschema` crate.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The fixture at `rel` (from the repository root) opened as the analysis opens inputs.
pub fn open_fixture(rel: &str) -> stallscope::Inputs {
    let input = stallscope::InputOptions {
        files: vec![root().join(rel).to_string_lossy().into_owned()],
        input_format: None,
        merge_unrelated: false,
        merge_overlapping: false,
        on_open: None,
    };
    input.open().expect("open the fixture")
}

/// Runs the `stallscope` binary of this build with `NO_COLOR=1`.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run stallscope")
}

/// Column `name` of an Arrow batch as its array type (panics naming the column).
pub fn col<'a, T: 'static>(b: &'a arrow_array::RecordBatch, name: &str) -> &'a T {
    b.column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"))
        .as_any()
        .downcast_ref::<T>()
        .unwrap_or_else(|| panic!("{name}: other type"))
}

/// Runs `stallscope` and parses its standard output as JSON (the run must succeed).
pub fn json(args: &[&str]) -> Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// docs/report.schema.json, parsed.
pub fn report_schema() -> Value {
    let text = std::fs::read_to_string(root().join("docs/report.schema.json")).expect("schema");
    serde_json::from_str(&text).expect("schema json")
}

/// The schema violations of `v` against docs/report.schema.json (empty when valid), each as
/// `JSON pointer: message`, by a maintained validator (`jsonschema`, draft 2020-12).
pub fn report_errors(v: &Value) -> Vec<String> {
    let validator = jsonschema::validator_for(&report_schema()).expect("a valid JSON Schema");
    validator
        .iter_errors(v)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}
