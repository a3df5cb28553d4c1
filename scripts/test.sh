#!/usr/bin/env bash
# Runs every check CI runs: formatting, clippy with warnings denied, and all tests
# (unit, reader golden, cross-format, oracle tests against perf, CLI tests).
# Oracle tests need Debian's linux-perf (perf) installed; .ci/run installs it.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
cargo fmt --all -- --check
# The fuzz crate is outside the workspace: its formatting is checked on its own.
cargo fmt --manifest-path fuzz/Cargo.toml --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
# Fuzz targets are built (not run) in CI; run them for longer with `cargo +nightly fuzz run <target>`.
cargo check --manifest-path fuzz/Cargo.toml
