#!/usr/bin/env bash
# latency_vs_perf.sh — time `stallscope latency` / `timehist` / `analyze` against perf on one
# large trace.
#
# Usage:  sudo benches/latency_vs_perf.sh            (run from anywhere; needs root for recording)
# Env:    DIR=/tmp/stallscope-bench   where big.perf.data lives (recorded once, reused after)
#         LOOPS=1000000               `perf bench sched pipe` round trips (~6 M events, ~660 MB)
#         RUNS=5                      timed runs per tool and command; median and minimum reported
#         SKIP_BUILD=1                do not run cargo build (use the existing binary)
#         CARGO_TARGET_DIR            honoured for the build and the binary path
#         STALLSCOPE=path             time this binary instead
#         RT=1                        run every timed command at real-time priority
#                                     (chrt -f 50, root): wall times then hold on a machine
#                                     busy with other work (builds), for both tools alike
#
# What it does:
#   1. unless $DIR/big.perf.data exists: perf sched record -o $DIR/big.perf.data --
#        perf bench sched pipe -l $LOOPS
#   2. cargo build --release -j2 -p stallscope-cli   (binary: ${CARGO_TARGET_DIR:-target}/release/stallscope)
#      and, the same way, $DIR/small.perf.data with LOOPS/10 (for the memory-growth check)
#   3. for latency and timehist: run perf and stallscope $RUNS times each under
#      /usr/bin/time -f '%U %S %M' (CPU seconds = user + sys, 10 ms steps; peak RSS KiB), wall
#      seconds in ms steps from bash's $EPOCHREALTIME around it,
#      output to /dev/null, and print the medians and minimums and the ratios perf time /
#      stallscope time (of the medians, and of the minimums: on a shared machine the minimum
#      is the least disturbed run) and stallscope RSS / perf RSS; the load average is printed
#      before and after (CPU time is less sensitive to load than wall time, but stallscope
#      spreads its work over several threads, so on an idle machine wall < CPU); then
#      `stallscope analyze` (all detectors) against
#      `perf sched latency` (issue 4's yardstick) the same way;
#   4. stallscope latency's peak RSS on small vs big (memory must not grow with trace length).
# A run that exits non-zero is reported as FAILED (its numbers are not used); the script goes on.
# The issue's target: stallscope latency >= 10x faster than perf and <= 1/4 of its peak RSS.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${DIR:-/tmp/stallscope-bench}
LOOPS=${LOOPS:-1000000}
RUNS=${RUNS:-5}
BIG=$DIR/big.perf.data
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
STALLSCOPE=${STALLSCOPE:-$TARGET_DIR/release/stallscope}
# shellcheck source=benches/lib.sh
source "$REPO/benches/lib.sh"

mkdir -p "$DIR"
record_trace "$BIG" "$LOOPS"
# a trace a tenth as long: stallscope's peak RSS on it vs on big shows whether memory grows
SMALL=$DIR/small.perf.data
record_trace "$SMALL" $((LOOPS / 10))

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    log "cargo build --release -j2 -p stallscope-cli"
    (cd "$REPO" && cargo build --release -j2 -p stallscope-cli) ||
        log "build failed: stallscope rows will show FAILED"
fi

# compare WHAT PERF_CMD — `perf sched PERF_CMD` against `stallscope WHAT` on the big trace
compare() {
    local what=$1 peer=${2:-$1}
    measure "perf sched $peer" perf sched "$peer" -i "$BIG"
    local perf_s=$MEDIAN_S perf_cpu=$MEDIAN_CPU perf_kib=$MEDIAN_KIB
    local perf_min_s=$MIN_S perf_min_cpu=$MIN_CPU
    measure "stallscope $what" "$STALLSCOPE" "$what" "$BIG"
    local ours_s=$MEDIAN_S ours_cpu=$MEDIAN_CPU ours_kib=$MEDIAN_KIB
    local ours_min_s=$MIN_S ours_min_cpu=$MIN_CPU
    printf '%-10s %-22s %8s %8s %12s\n' "$what" "perf sched $peer" "${perf_s:-FAILED}" \
        "${perf_cpu:-FAILED}" "${perf_kib:-FAILED}"
    printf '%-10s %-22s %8s %8s %12s\n' "$what" "stallscope $what" "${ours_s:-FAILED}" \
        "${ours_cpu:-FAILED}" "${ours_kib:-FAILED}"
    printf '%-10s speed-up (medians) wall: %s  CPU: %s   RSS ratio (stallscope / perf): %s\n' \
        "$what" "$(ratio "$perf_s" "$ours_s")" "$(ratio "$perf_cpu" "$ours_cpu")" \
        "$(ratio "$ours_kib" "$perf_kib")"
    printf '%-10s speed-up (minimums: perf %s s / %s s CPU, stallscope %s s / %s s CPU) wall: %s  CPU: %s\n' \
        "$what" "${perf_min_s:-FAILED}" "${perf_min_cpu:-FAILED}" "${ours_min_s:-FAILED}" \
        "${ours_min_cpu:-FAILED}" "$(ratio "$perf_min_s" "$ours_min_s")" \
        "$(ratio "$perf_min_cpu" "$ours_min_cpu")"
}

echo "trace: $BIG ($(stat -c %s "$BIG") bytes), $RUNS runs each, medians; $(nproc) CPUs${RUNNER[*]:+; timed under ${RUNNER[*]}}"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %-22s %8s %8s %12s\n' command tool "wall s" "CPU s" "peak KiB"
compare latency
compare timehist
# issue 4: analyze with every detector against perf sched latency alone
compare analyze latency

echo
echo "memory vs trace length (stallscope latency, peak KiB): $SMALL ($(stat -c %s "$SMALL") bytes)"
measure "stallscope latency small" "$STALLSCOPE" latency "$SMALL"
small_kib=$MEDIAN_KIB
measure "stallscope latency big" "$STALLSCOPE" latency "$BIG"
printf 'small %s KiB, big %s KiB, big / small: %s (1.00 = flat; 10 = grows with length)\n' \
    "${small_kib:-FAILED}" "${MEDIAN_KIB:-FAILED}" "$(ratio "$MEDIAN_KIB" "$small_kib")"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
