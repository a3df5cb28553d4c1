#!/usr/bin/env bash
# memory_vs_length.sh — peak RSS of stallscope's commands on a multi-GB `perf record -e
# 'sched:*'` file and on one ten times shorter, beside `perf sched latency` (issue #30: memory
# bounded by what a command keeps, not by how long the trace is).
#
# Usage:  sudo benches/memory_vs_length.sh       (root: records the traces once, reused after)
# Env:    DIR=/tmp/stallscope-bench   where the traces live
#         LOOPS=5000000               `perf bench sched pipe` round trips of the big trace
#                                     (about 3.3 GB with sched:*); the small one has LOOPS/10
#         RUNS=1                      runs per command (peak RSS varies little between runs)
#         SKIP_BUILD=1                do not run cargo build
#         CARGO_TARGET_DIR, STALLSCOPE as in latency_vs_perf.sh
#
# Prints, per command: peak RSS on the small and on the big trace, big / small, and the
# verdict of the issue's bounds — every stallscope command within 2x of its small-file RSS
# and under 300 MB on the big one — plus perf's figures for scale (perf sched latency keeps
# every task's every wakeup, so its RSS grows with the trace).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${DIR:-/tmp/stallscope-bench}
LOOPS=${LOOPS:-5000000}
export RUNS=${RUNS:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
STALLSCOPE=${STALLSCOPE:-$TARGET_DIR/release/stallscope}
# shellcheck source=benches/lib.sh
source "$REPO/benches/lib.sh"

mkdir -p "$DIR"
BIG=$DIR/sched_all_big.perf.data
SMALL=$DIR/sched_all_small.perf.data
record_trace "$BIG" "$LOOPS" -e 'sched:*' -a
record_trace "$SMALL" $((LOOPS / 10)) -e 'sched:*' -a

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    log "cargo build --release -j2 -p stallscope-cli"
    (cd "$REPO" && cargo build --release -j2 -p stallscope-cli) ||
        log "build failed: stallscope rows will show FAILED"
fi

TABLES_OUT=$(mktemp -d)
trap 'rm -rf "$TABLES_OUT"; rm -f "$TIME_OUT"' EXIT

# rss NAME FILE CMD… — peak RSS in KiB of CMD with FILE appended (median of RUNS)
rss() {
    local name=$1 file=$2
    shift 2
    measure "$name" "$@" "$file"
    echo "${MEDIAN_KIB:-}"
}

printf '%-28s %12s %12s %8s  %s\n' "command" "small KiB" "big KiB" "big/small" "bounds (<= 2x small, < 300 MB)"
verdicts=0
row() {
    local label=$1 bounded=$2
    shift 2
    local small big
    small=$(rss "$label (small)" "$SMALL" "$@")
    big=$(rss "$label (big)" "$BIG" "$@")
    local growth verdict=""
    growth=$(ratio "$big" "$small")
    if [[ "$bounded" == 1 ]]; then
        if [[ -n "$big" && -n "$small" ]] && awk -v b="$big" -v s="$small" 'BEGIN { exit !(b <= 2 * s && b < 300 * 1024) }'; then
            verdict="ok"
        else
            verdict="EXCEEDED"
            verdicts=$((verdicts + 1))
        fi
    else
        verdict="(peer, for scale)"
    fi
    printf '%-28s %12s %12s %8s  %s\n' "$label" "${small:-FAILED}" "${big:-FAILED}" "$growth" "$verdict"
}

row "stallscope analyze" 1 "$STALLSCOPE" analyze
row "stallscope tables" 1 "$STALLSCOPE" tables --to "$TABLES_OUT"
row "stallscope timehist" 1 "$STALLSCOPE" timehist
row "stallscope latency" 1 "$STALLSCOPE" latency
row "perf sched latency" 0 perf sched latency -i
log "big: $(stat -c %s "$BIG") bytes, small: $(stat -c %s "$SMALL") bytes"
exit "$verdicts"
