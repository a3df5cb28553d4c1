#!/usr/bin/env bash
# Runs every check CI runs: formatting, clippy with warnings denied, and all tests
# (unit, reader golden, cross-format, oracle tests against perf, CLI tests).
# Oracle tests need Debian's linux-perf (perf) installed; .ci/run installs it.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
# A run starts from a clean tree: incremental caches would only add ~1.6 GB on disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
cargo fmt --all -- --check
# The fuzz crate is outside the workspace: its formatting is checked on its own.
cargo fmt --manifest-path fuzz/Cargo.toml --all -- --check
# So is the Python package's native module (python/, built by maturin below).
cargo fmt --manifest-path python/Cargo.toml --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
# The Python package: built from ./python (maturin, pyo3) into a virtual environment with
# pyarrow, Dask (the fleet on a LocalCluster) and DuckDB (docs/fleet.md's queries), then
# its tests against the command built above.
python3 -m venv target/pyenv
target/pyenv/bin/pip install --quiet --disable-pip-version-check './python[test,fleet]' duckdb
(cd target && STALLSCOPE_BIN="$PWD/debug/stallscope" pyenv/bin/python -m pytest -q ../python/tests)
# Fuzz targets are built (not run) in CI; run them for longer with `cargo +nightly fuzz run <target>`.
cargo check --manifest-path fuzz/Cargo.toml
