#!/usr/bin/env bash
# Installs every prerequisite of the test suite (scripts/test.sh) on a Debian machine:
#   linux-perf, trace-cmd, blktrace (blkparse, btt)   peers the oracle tests compare against
#   rt-tests, stress-ng                               workloads of the live recorder tests
#   xz-utils, zstd                                    compressed fixtures
#   strace                                            counts the bytes each product reads
#   chromium, nodejs + tests/browser (npm ci)         the HTML report's browser test
#   python3-scipy                                     compare's statistics cross-check
#   perfetto (PyPI)                                   Perfetto's trace protos, for the export
#   python3-venv                                      the Python package's virtual environment
#                                                     (scripts/test.sh installs maturin, pyarrow,
#                                                     pytest, Dask and DuckDB into it from PyPI)
# scripts/test.sh runs it first (it returns at once when everything is installed).
# Run as root (or with sudo). A test whose prerequisite is missing fails and names what to
# install; STALLSCOPE_SKIP_MISSING=1 turns that into a printed skip instead.
set -euo pipefail
cd "$(dirname "$0")/.."
# scripts/test.sh runs this first: when everything is there already it returns at once
installed() {
  for c in perf trace-cmd blkparse btt cyclictest stress-ng xz zstd strace chromium npm; do
    command -v "$c" >/dev/null 2>&1 || return 1
  done
  python3 -c 'import scipy, ensurepip, perfetto.protos.perfetto.trace.perfetto_trace_pb2' \
    >/dev/null 2>&1 || return 1
  # npm ci's record of what it installed, newer than the lock file it installed from
  [ tests/browser/node_modules/.package-lock.json -nt tests/browser/package-lock.json ]
}
if installed; then
  echo "scripts/setup.sh: every prerequisite is installed"
  exit 0
fi
if command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq linux-perf trace-cmd blktrace rt-tests stress-ng xz-utils zstd strace chromium python3-scipy >/dev/null
  # Machine images may ship Node.js with npm (nodesource); Debian's npm conflicts with it.
  command -v npm >/dev/null 2>&1 || apt-get install -y -qq nodejs npm >/dev/null
else
  echo "scripts/setup.sh: no apt-get; install the packages listed at the top of this script by hand" >&2
  exit 1
fi
# pip_install PKG…: installs PyPI packages for the python3 on PATH (the tests run that one):
# Debian's own python3 needs python3-pip and refuses plain pip installs (PEP 668), a pyenv
# or venv python3 takes them as they are
pip_install() {
  python3 -m pip --version >/dev/null 2>&1 || apt-get install -y -qq python3-pip >/dev/null
  python3 -m pip install --quiet "$@" 2>/dev/null \
    || python3 -m pip install --quiet --break-system-packages "$@"
}
# compare's statistics cross-check: python3-scipy above, unless python3 is not Debian's
python3 -c 'import scipy' 2>/dev/null || pip_install scipy
# the Perfetto export is decoded with Perfetto's own trace protos (perfetto_trace_pb2)
python3 -c 'import perfetto.protos.perfetto.trace.perfetto_trace_pb2' 2>/dev/null \
  || pip_install perfetto protobuf
# the Python package (python/): scripts/test.sh builds it into a virtual environment
# (Debian's python3 has `venv` but cannot make one without ensurepip, from python3-venv)
python3 -c 'import ensurepip' >/dev/null 2>&1 || apt-get install -y -qq python3-venv >/dev/null
# the HTML report's browser test drives chromium with playwright-core
(cd tests/browser && npm ci --no-audit --no-fund)
perf --version
