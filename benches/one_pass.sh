#!/usr/bin/env bash
# one_pass.sh — issue #31's yardsticks in one run, beside the peers and a plain read:
#
#   on big.perf.data (`perf sched record` of `perf bench sched pipe`, ~750 MB) and on
#   sched_all.perf.data (`perf record -e 'sched:*'` of the same workload, ~640 MB, the way
#   many people record):
#     cat FILE (page cache)                  the floor: reading the bytes
#     perf sched latency                     the peer
#     stallscope analyze (all detectors)     target ≥ 5× perf (sched record), ≥ 4× (sched:*)
#     stallscope latency                     target ≥ 9× perf (sched record), ≥ 6× (sched:*)
#     stallscope analyze --html              target ≤ 1.5× analyze's time and peak RSS
#     stallscope tables / fleet (one trace)  target fleet ≤ 1.1× tables (same tables)
#     stallscope.table(FILE, "waits")        target ≤ 1.3× latency's time (Python package)
#   and analyze's peak RSS on a trace a tenth as long (flat with trace length).
#
# Usage:  sudo benches/one_pass.sh           (root to record the traces once)
# Env:    DIR=/tmp/stallscope-bench   where the traces live (recorded once, reused after)
#         LOOPS=1000000               `perf bench sched pipe` round trips
#         RUNS=5                      timed runs per command (medians; minimums logged)
#         SKIP_BUILD=1                use the existing release binary
#         PYTHON=…                    a python with the stallscope package (default
#                                     target/pyenv/bin/python, which scripts/test.sh builds)
#         RT=1                        time every command under chrt -f 50 (root)
# Prints one table per trace: wall s, CPU s, peak KiB per command and the ratios against the
# targets. A failed command shows FAILED and the script goes on.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${DIR:-/tmp/stallscope-bench}
LOOPS=${LOOPS:-1000000}
RUNS=${RUNS:-5}
BIN=${CARGO_TARGET_DIR:-$REPO/target}/release/stallscope
PYTHON=${PYTHON:-$REPO/target/pyenv/bin/python}
# shellcheck source=benches/lib.sh
source "$REPO/benches/lib.sh"

mkdir -p "$DIR"
record_trace "$DIR/big.perf.data" "$LOOPS"
record_trace "$DIR/sched_all.perf.data" "$LOOPS" -e 'sched:*'
record_trace "$DIR/small.perf.data" $((LOOPS / 10))
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    log "cargo build --release -j2 -p stallscope-cli"
    (cd "$REPO" && cargo build --release -j2 -p stallscope-cli >&2)
fi
OUT=$(mktemp -d /tmp/stallscope-one-pass.XXXXXX)
trap 'rm -rf "$OUT" "$TIME_OUT"' EXIT
HAVE_PYTHON=0
if [[ -x $PYTHON ]] && "$PYTHON" -c 'import stallscope' 2> /dev/null; then
    HAVE_PYTHON=1
else
    log "no stallscope package for $PYTHON: the Python row is skipped (scripts/test.sh builds target/pyenv)"
fi

declare -A S C K  # per command: median wall s, CPU s, peak KiB

# row KEY LABEL CMD… — measures and prints one row
row() {
    local key=$1 label=$2
    shift 2
    measure "$label" "$@"
    S[$key]=$MEDIAN_S C[$key]=$MEDIAN_CPU K[$key]=$MEDIAN_KIB
    printf '  %-40s %8s %8s %12s\n' "$label" "${MEDIAN_S:-FAILED}" "${MEDIAN_CPU:-FAILED}" \
        "${MEDIAN_KIB:-FAILED}"
}

# verdict TEXT VALUE OP TARGET — prints "TEXT: VALUE (target OP TARGET) ok|MISSED"
verdict() {
    local ok
    ok=$(awk -v v="$2" -v t="$4" -v op="$3" 'BEGIN {
        if (v == "n/a") { print "n/a"; exit }
        if ((op == ">=" && v >= t) || (op == "<=" && v <= t)) print "ok"; else print "MISSED" }')
    printf '  %-58s %6s  (target %s %s) %s\n' "$1" "$2" "$3" "$4" "$ok"
}

# bench FILE ANALYZE_TARGET LATENCY_TARGET
bench() {
    local file=$1 analyze_target=$2 latency_target=$3
    echo
    echo "$file ($(stat -c %s "$file") bytes), $RUNS runs each, medians; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
    printf '  %-40s %8s %8s %12s\n' command "wall s" "CPU s" "peak KiB"
    cat "$file" > /dev/null  # page cache, for every tool alike
    row cat "cat (page cache)" cat "$file"
    row perf "perf sched latency" perf sched latency -i "$file"
    row analyze "stallscope analyze" "$BIN" analyze "$file"
    row latency "stallscope latency" "$BIN" latency "$file"
    row html "stallscope analyze --html" "$BIN" analyze "$file" --html "$OUT/report.html"
    row tables "stallscope tables" "$BIN" tables "$file" --to "$OUT/tables"
    row fleet "stallscope fleet (this trace)" "$BIN" fleet "$file" --out "$OUT/fleet"
    if [[ $HAVE_PYTHON == 1 ]]; then
        row py_waits "python stallscope.table(f, \"waits\")" "$PYTHON" -c \
            'import sys, stallscope; assert stallscope.table(sys.argv[1], "waits").num_rows > 0' "$file"
        row py_start "python (interpreter + imports alone)" "$PYTHON" -c 'import stallscope, pyarrow'
    fi
    echo "  ratios:"
    verdict "perf sched latency / stallscope analyze" "$(ratio "${S[perf]}" "${S[analyze]}")" ">=" "$analyze_target"
    verdict "perf sched latency / stallscope latency" "$(ratio "${S[perf]}" "${S[latency]}")" ">=" "$latency_target"
    verdict "analyze --html / analyze, time" "$(ratio "${S[html]}" "${S[analyze]}")" "<=" 1.5
    verdict "analyze --html / analyze, peak RSS" "$(ratio "${K[html]}" "${K[analyze]}")" "<=" 1.5
    verdict "fleet / tables (the same tables, findings with them)" "$(ratio "${S[fleet]}" "${S[tables]}")" "<=" 1.1
    if [[ $HAVE_PYTHON == 1 ]]; then
        verdict "stallscope.table waits / latency" "$(ratio "${S[py_waits]}" "${S[latency]}")" "<=" 1.3
    fi
    echo "  the floor: analyze / cat $(ratio "${S[analyze]}" "${S[cat]}"), latency / cat $(ratio "${S[latency]}" "${S[cat]}")"
    rm -rf "$OUT/tables" "$OUT/fleet"
}

bench "$DIR/big.perf.data" 5 9
bench "$DIR/sched_all.perf.data" 4 6

echo
measure "analyze small" "$BIN" analyze "$DIR/small.perf.data"
small=$MEDIAN_KIB
measure "analyze big" "$BIN" analyze "$DIR/big.perf.data"
printf 'analyze peak RSS: small %s KiB, big (10x longer) %s KiB, big / small %s (1.00 = flat)\n' \
    "${small:-FAILED}" "${MEDIAN_KIB:-FAILED}" "$(ratio "$MEDIAN_KIB" "$small")"
