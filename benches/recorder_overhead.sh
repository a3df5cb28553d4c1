#!/bin/sh
# Recorder overhead: throughput of `perf bench sched pipe` alone, under `stallscope record`
# (sched events) and under `perf sched record`, and the ratios (1.00 = no slowdown).
#
#   sudo benches/recorder_overhead.sh                 # 200000 loops, 3 runs each (median)
#   LOOPS=1000000 RUNS=5 STALLSCOPE=target/release/stallscope sudo -E benches/recorder_overhead.sh
#
# Needs root, perf, and a release build of stallscope (cargo build --release -p stallscope-cli).
# Each mode runs twice: unpinned, and with both benchmark tasks pinned to CPU 0 (`taskset -c 0`),
# which removes cross-CPU wakeups and idle-exit effects: on a VM, tracing can make the
# unpinned benchmark *faster* (CPUs stay busier and leave idle less often), so the pinned
# figure is the cleaner overhead measure.
set -eu
LOOPS=${LOOPS:-200000}
RUNS=${RUNS:-3}
STALLSCOPE=${STALLSCOPE:-target/release/stallscope}
TMP=$(mktemp -d /tmp/stallscope-overhead.XXXXXX)
trap 'rm -rf "$TMP"' EXIT INT TERM

[ -x "$STALLSCOPE" ] || { echo "no $STALLSCOPE: cargo build --release -p stallscope-cli" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf not installed" >&2; exit 2; }

# ops/sec printed by `perf bench sched pipe` in the given output file.
ops() { awk '/ops\/sec/ { print $1 }' "$1"; }

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

run_mode() { # mode → median ops/sec
    mode=$1
    i=0
    while [ $i -lt "$RUNS" ]; do
        out=$TMP/$mode.$i.txt
        case $mode in
        alone) $PIN perf bench sched pipe -l "$LOOPS" >"$out" 2>&1 ;;
        stallscope)
            "$STALLSCOPE" record -o "$TMP/s.dat" --events sched -- \
                $PIN perf bench sched pipe -l "$LOOPS" >"$out" 2>"$TMP/s.err.$i"
            grep 'events lost' "$TMP/s.err.$i" | sed 's/^/    /' >&2
            ls -l "$TMP/s.dat" | awk '{ printf "    trace.dat %d bytes\n", $5 }' >&2
            ;;
        perf)
            perf sched record -o "$TMP/p.data" -- $PIN perf bench sched pipe -l "$LOOPS" \
                >"$out" 2>"$TMP/p.err.$i"
            grep -i 'lost' "$TMP/p.err.$i" | sed 's/^/    /' >&2 || true
            ls -l "$TMP/p.data" | awk '{ printf "    perf.data %d bytes\n", $5 }' >&2
            ;;
        esac
        ops "$out"
        i=$((i + 1))
    done | median
}

for PIN in "" "taskset -c 0"; do
echo "perf bench sched pipe -l $LOOPS ${PIN:-(unpinned)}, median of $RUNS runs"
alone=$(run_mode alone)
echo "  alone:                $alone ops/sec"
st=$(run_mode stallscope)
echo "  stallscope record:    $st ops/sec"
pf=$(run_mode perf)
echo "  perf sched record:    $pf ops/sec"
awk -v a="$alone" -v s="$st" -v p="$pf" 'BEGIN {
    printf "  throughput under stallscope record / alone: %.3f\n", s / a
    printf "  throughput under perf sched record / alone: %.3f\n", p / a
    printf "  stallscope record / perf sched record:      %.3f\n", s / p
}'
done
