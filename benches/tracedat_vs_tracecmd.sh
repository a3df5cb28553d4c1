#!/bin/sh
# Decoding + `latency` on a trace.dat: stallscope vs `trace-cmd report > /dev/null`.
#
#   benches/tracedat_vs_tracecmd.sh FILE            time both on FILE, print the ratio
#   benches/tracedat_vs_tracecmd.sh --make FILE     first record FILE (root): a private tracefs
#                                                   instance around `perf bench sched pipe
#                                                   -l 1000000` (≈6.8 M events), then extract
#
# Uses target/release/stallscope (build it with `cargo build --release -p stallscope-cli`)
# unless STALLSCOPE is set. Each tool runs 3 times; the best wall time counts.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${STALLSCOPE:-$ROOT/target/release/stallscope}

make_trace() {
    out=$1
    T=/sys/kernel/tracing
    name=stallscope-bench-$$
    I=$T/instances/$name
    tmp=$(mktemp -d)
    trap 'if [ -d "$I" ]; then echo 0 > "$I/tracing_on"; rmdir "$I"; fi; rm -rf "$tmp"' EXIT INT TERM
    mkdir "$I"
    echo "${BUFFER_KB:-300000}" > "$I/buffer_size_kb"
    for e in sched_switch sched_waking sched_wakeup sched_wakeup_new sched_migrate_task \
             sched_process_fork sched_process_exit sched_process_exec sched_stat_runtime; do
        echo 1 > "$I/events/sched/$e/enable"
    done
    echo 1 > "$I/tracing_on"
    perf bench sched pipe -l "${LOOPS:-1000000}" >/dev/null
    echo 0 > "$I/tracing_on"
    # Hide /proc/kallsyms (5 MB of symbols nobody needs here) in a private mount namespace.
    unshare -m sh -c "mount --bind /dev/null /proc/kallsyms && trace-cmd extract -B '$name' -o '$tmp/raw.dat'" >/dev/null
    # (trace-cmd extract -B removes the instance itself; the trap covers the other cases.)
    if [ -d "$I" ]; then rmdir "$I"; fi
    # Uncompressed v6: the layout a recorder writes and the fastest for trace-cmd to read.
    trace-cmd convert -i "$tmp/raw.dat" --file-version 6 -o "$out" >/dev/null 2>&1
}

best_of_3() {
    best=
    for _ in 1 2 3; do
        s=$(date +%s%N)
        "$@" >/dev/null 2>&1
        e=$(date +%s%N)
        t=$(( (e - s) / 1000000 ))
        if [ -z "$best" ] || [ "$t" -lt "$best" ]; then best=$t; fi
    done
    echo "$best"
}

if [ "${1:-}" = "--make" ]; then
    make_trace "$2"
    shift
fi
FILE=${1:?usage: $0 [--make] FILE}
[ -x "$BIN" ] || { echo "build stallscope first: cargo build --release -p stallscope-cli" >&2; exit 1; }

events=$("$BIN" info "$FILE" | awk '/^Events:/ {print $2}')
echo "file: $FILE ($(du -h "$FILE" | cut -f1), $events events)"
echo "trace-cmd: $(trace-cmd --version 2>&1 | grep -m1 'trace-cmd version')"
ours=$(best_of_3 "$BIN" latency "$FILE")
theirs=$(best_of_3 sh -c "trace-cmd report '$FILE' > /dev/null")
echo "stallscope latency:            ${ours} ms"
echo "trace-cmd report > /dev/null:  ${theirs} ms"
awk -v a="$theirs" -v b="$ours" 'BEGIN { printf "speed-up: %.1fx (target >= 50x)\n", a / (b > 0 ? b : 1) }'
