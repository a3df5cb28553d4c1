#!/usr/bin/env bash
# Runs every check CI runs: formatting, clippy with warnings denied, and all tests
# (unit, reader golden, cross-format, oracle tests against perf, CLI tests).
# Their prerequisites (perf, trace-cmd, blktrace, …) are installed by scripts/setup.sh, which
# this script runs first (as root, on a fresh machine).
set -euo pipefail
cd "$(dirname "$0")/.."
# What the tests need (Debian packages, PyPI, npm): installed on the first run, a quick
# check after that.
scripts/setup.sh
# The tests leave the tree as they found it (no stale lock file, no stray output): the
# working tree's status is compared at the end.
tree_status() { git status --porcelain --untracked-files=all 2>/dev/null || true; }
status_before=$(tree_status)
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
# The package is built once as a wheel (target/wheels: `pip install` of it takes seconds,
# on any machine with this Python and architecture), then installed from it.
python3 -m venv target/pyenv
rm -rf target/wheels
echo "scripts/test.sh: building the Python wheel (compiles the native module: minutes)" >&2
target/pyenv/bin/pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir target/wheels ./python
wheel=$(ls target/wheels/stallscope-*.whl)
target/pyenv/bin/pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
target/pyenv/bin/pip install --quiet --disable-pip-version-check "$wheel[test,fleet]" duckdb
(cd target && STALLSCOPE_BIN="$PWD/debug/stallscope" pyenv/bin/python -m pytest -q ../python/tests)
# Fuzz targets are built (not run) in CI; run them for longer with `cargo +nightly fuzz run <target>`.
cargo check --manifest-path fuzz/Cargo.toml
status_after=$(tree_status)
if [ "$status_before" != "$status_after" ]; then
  echo "scripts/test.sh: the tests changed the tree:" >&2
  diff <(echo "$status_before") <(echo "$status_after") >&2 || true
  exit 1
fi
