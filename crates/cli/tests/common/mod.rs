//! Helpers shared by the CLI test binaries (`mod common;` in each).
//!
//! [`validate`]: a small JSON Schema validator for docs/report.schema.json — type, const,
//! enum, required, properties, additionalProperties, items, minimum, local `$ref` (the keywords
//! the schema uses); an unknown keyword panics so the validator cannot silently ignore part of
//! the schema.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
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

/// The schema violations of `v` against docs/report.schema.json (empty when valid).
pub fn report_errors(v: &Value) -> Vec<String> {
    let s = report_schema();
    let mut errors = Vec::new();
    validate(v, &s, &s, "$", &mut errors);
    errors
}

/// Validates `v` against `schema`; errors name the JSON path.
pub fn validate(
    v: &Value,
    schema: &Value,
    root_schema: &Value,
    at: &str,
    errors: &mut Vec<String>,
) {
    let Some(obj) = schema.as_object() else {
        errors.push(format!("{at}: schema is not an object"));
        return;
    };
    for (k, s) in obj {
        match k.as_str() {
            "$schema" | "$id" | "title" | "description" | "$defs" => {}
            "$ref" => {
                let name = s
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .expect("local ref");
                validate(v, &root_schema["$defs"][name], root_schema, at, errors);
            }
            "type" => {
                let types: Vec<&str> = match s {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                    _ => panic!("bad type keyword"),
                };
                let ok = types.iter().any(|t| match *t {
                    "string" => v.is_string(),
                    "integer" => v.is_i64() || v.is_u64(),
                    "boolean" => v.is_boolean(),
                    "array" => v.is_array(),
                    "object" => v.is_object(),
                    "null" => v.is_null(),
                    other => panic!("type {other} unsupported"),
                });
                if !ok {
                    errors.push(format!("{at}: {v} is not {types:?}"));
                }
            }
            "const" => {
                if v != s {
                    errors.push(format!("{at}: {v} != {s}"));
                }
            }
            "enum" => {
                if !s.as_array().expect("enum list").contains(v) {
                    errors.push(format!("{at}: {v} not in {s}"));
                }
            }
            "minimum" => {
                if let Some(n) = v.as_f64() {
                    if n < s.as_f64().expect("number") {
                        errors.push(format!("{at}: {v} < {s}"));
                    }
                }
            }
            "required" => {
                if let Some(o) = v.as_object() {
                    for r in s.as_array().expect("list") {
                        let r = r.as_str().expect("name");
                        if !o.contains_key(r) {
                            errors.push(format!("{at}: missing {r}"));
                        }
                    }
                }
            }
            "properties" => {
                if let Some(o) = v.as_object() {
                    for (name, sub) in s.as_object().expect("map") {
                        if let Some(x) = o.get(name) {
                            validate(x, sub, root_schema, &format!("{at}.{name}"), errors);
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let Some(o) = v.as_object() {
                    let known = obj.get("properties").and_then(Value::as_object);
                    for (name, x) in o {
                        if known.is_some_and(|k| k.contains_key(name)) {
                            continue;
                        }
                        validate(x, s, root_schema, &format!("{at}.{name}"), errors);
                    }
                }
            }
            "items" => {
                if let Some(a) = v.as_array() {
                    for (i, x) in a.iter().enumerate() {
                        validate(x, s, root_schema, &format!("{at}[{i}]"), errors);
                    }
                }
            }
            other => panic!("schema keyword {other} is not supported by this validator"),
        }
    }
}
