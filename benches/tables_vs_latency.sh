#!/usr/bin/env bash
# tables_vs_latency.sh — issue 22's yardsticks for the tables: the time to build the `waits`
# table (Parquet) of one large perf.data against `stallscope latency` on the same file, and
# the bytes per event of the Parquet `events` table against JSON lines (`dump --format json`).
#
# Usage:  benches/tables_vs_latency.sh [PERF.DATA]   (default: /tmp/stallscope-bench/big.perf.data,
#         recorded by benches/latency_vs_perf.sh)
# Env:    RUNS=3        timed runs per command (minimum and median printed)
#         SKIP_BUILD=1  use the existing release binary
#         PYTHON=…      a python with the stallscope package (default: target/pyenv/bin/python,
#                       which scripts/test.sh builds in release mode)
# The issue's target: the waits table into pyarrow within 2× of `stallscope latency`.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FILE=${1:-/tmp/stallscope-bench/big.perf.data}
RUNS=${RUNS:-3}
BIN=${CARGO_TARGET_DIR:-$REPO/target}/release/stallscope
[[ -f $FILE ]] || { echo "no $FILE (run benches/latency_vs_perf.sh once, or give a perf.data)" >&2; exit 2; }
if [[ -z ${SKIP_BUILD:-} ]]; then
    (cd "$REPO" && cargo build --release -j2 -p stallscope-cli >&2)
fi
OUT=$(mktemp -d /tmp/stallscope-tables-bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

# times CMD… — RUNS wall times in ms, sorted
times() {
    local i t0 t1 out=()
    for ((i = 0; i < RUNS; i++)); do
        t0=$EPOCHREALTIME
        "$@" > /dev/null 2>&1 || { echo FAILED; return; }
        t1=$EPOCHREALTIME
        out+=("$(( (${t1/./} - ${t0/./}) / 1000 ))")
    done
    printf '%s\n' "${out[@]}" | sort -n | tr '\n' ' '
}
lat=$(times "$BIN" latency "$FILE")
waits=$(times "$BIN" tables --tables waits --to "$OUT" "$FILE")
min() { echo "$1" | awk '{print $1}'; }
med() { echo "$1" | awk '{print $(int((NF + 1) / 2))}'; }
echo "file: $FILE ($(stat -c %s "$FILE") bytes)"
echo "stallscope latency            ms: $lat"
echo "stallscope tables --tables waits ms: $waits"
awk -v a="$(min "$waits")" -v b="$(min "$lat")" -v c="$(med "$waits")" -v d="$(med "$lat")" \
    'BEGIN { printf "waits (Parquet) / latency: %.2f× (minimums), %.2f× (medians)\n", a / b, c / d }'
PYTHON=${PYTHON:-$REPO/target/pyenv/bin/python}
if [[ -x $PYTHON ]] && "$PYTHON" -c 'import stallscope' 2> /dev/null; then
    py=$(times "$PYTHON" -c 'import sys, stallscope; t = stallscope.table(sys.argv[1], "waits"); assert t.num_rows > 0' "$FILE")
    start=$(times "$PYTHON" -c 'import stallscope, pyarrow')
    echo "stallscope.table(…, 'waits') into pyarrow ms: $py (interpreter + imports alone: $start)"
    # the call itself, timed inside the interpreter (RUNS calls, each in a fresh process)
    call=$(for ((i = 0; i < RUNS; i++)); do
        "$PYTHON" -c 'import sys, time, stallscope, pyarrow
t0 = time.perf_counter(); t = stallscope.table(sys.argv[1], "waits"); t1 = time.perf_counter()
assert t.num_rows > 0; print(int((t1 - t0) * 1000))' "$FILE"
    done | sort -n | tr '\n' ' ')
    echo "stallscope.table(…, 'waits') call alone ms: $call"
    awk -v a="$(min "$call")" -v b="$(min "$lat")" -v c="$(med "$call")" -v d="$(med "$lat")" \
        'BEGIN { printf "waits into pyarrow (the call) / latency (the command): %.2f× (minimums), %.2f× (medians); target ≤ 2×\n", a / b, c / d }'
    awk -v a="$(min "$py")" -v s="$(min "$start")" -v b="$(min "$lat")" -v c="$(med "$py")" -v d="$(med "$lat")" \
        'BEGIN { printf "waits into pyarrow / latency: %.2f× (minimums; %.2f× without the interpreter start), %.2f× (medians); target ≤ 2×\n", a / b, (a - s) / b, c / d }'
else
    echo "no stallscope package for $PYTHON (scripts/test.sh builds target/pyenv; or set PYTHON=)"
fi

# bytes per event: Parquet events table vs JSON lines
"$BIN" tables --tables events --to "$OUT" "$FILE" > /dev/null
events=$("$BIN" info --format json "$FILE" | python3 -c 'import json,sys; print(json.load(sys.stdin)["events"])' 2> /dev/null || echo 0)
pq=$(stat -c %s "$OUT/events.parquet")
js=$("$BIN" dump --format json "$FILE" | wc -c)
if [[ $events -gt 0 ]]; then
    awk -v p="$pq" -v j="$js" -v n="$events" \
        'BEGIN { printf "bytes per event: Parquet %.1f, JSON lines %.1f (%.1f× smaller)\n", p / n, j / n, j / p }'
else
    echo "bytes: Parquet events $pq, JSON lines $js"
fi
