//! The crates' layering, read from `cargo metadata`: every workspace crate depends (for its
//! build, not its tests) only on crates below it in [`LAYERS`], and the command-line tool
//! and the Python package depend on the facade (`stallscope`) alone, so everything they do
//! goes through the library others can call.

mod common;

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

/// The workspace crates, lowest first: a crate may use only crates before it.
const LAYERS: &[&str] = &[
    "stallscope-testkit",
    "stallscope-model",
    "stallscope-read",
    "stallscope-timeline",
    "stallscope-detect",
    "stallscope-report",
    "stallscope-export",
    "stallscope-tables",
    "stallscope-record",
    "stallscope-compare",
    "stallscope",
    "stallscope-cli",
];

/// Package name → the `stallscope*` packages it depends on for its build (normal and
/// build dependencies), from `cargo metadata` of the manifest `manifest`.
fn build_deps(manifest: &std::path::Path) -> BTreeMap<String, Vec<String>> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .arg("--manifest-path")
        .arg(manifest)
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata {}: {}",
        manifest.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("metadata json");
    let mut map = BTreeMap::new();
    for p in v["packages"].as_array().expect("packages") {
        let deps = p["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|d| d["kind"].as_str() != Some("dev"))
            .filter_map(|d| d["name"].as_str())
            .filter(|n| n.starts_with("stallscope"))
            .map(str::to_string)
            .collect();
        map.insert(p["name"].as_str().expect("name").to_string(), deps);
    }
    map
}

#[test]
fn no_crate_uses_one_above_it() {
    let root = common::root();
    let deps = build_deps(&root.join("Cargo.toml"));
    let layer = |n: &str| LAYERS.iter().position(|&l| l == n);
    for name in deps.keys() {
        assert!(
            layer(name).is_some(),
            "{name} is a workspace crate missing from LAYERS: give it its place"
        );
    }
    let mut wrong = Vec::new();
    for (name, list) in &deps {
        let mine = layer(name).unwrap_or(0);
        for d in list {
            if layer(d).is_none_or(|l| l >= mine) {
                wrong.push(format!("{name} uses {d}, which is not below it"));
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
}

#[test]
fn the_command_and_the_python_package_use_the_facade_alone() {
    let root = common::root();
    let workspace = build_deps(&root.join("Cargo.toml"));
    assert_eq!(workspace["stallscope-cli"], vec!["stallscope".to_string()]);
    let python = build_deps(&root.join("python/Cargo.toml"));
    assert_eq!(python.len(), 1, "one package in python/: {python:?}");
    let deps = python.values().next().expect("the python package");
    assert_eq!(deps, &vec!["stallscope".to_string()]);
}
