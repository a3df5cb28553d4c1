#!/bin/sh
# Decoding + `latency` on a trace.dat: stallscope vs `trace-cmd report > /dev/null`.
#
#   benches/tracedat_vs_tracecmd.sh FILE            time both on FILE, print the ratio
#   benches/tracedat_vs_tracecmd.sh --make FILE     first record FILE (root): a private tracefs
#                                                   instance around `perf bench sched pipe
#                                                   -l 1000000` (≈6.8 M events), then extract
#   benches/tracedat_vs_tracecmd.sh --record FILE   first record FILE (root) with stallscope's
#                                                   own recorder around the same benchmark
#                                                   (`stallscope record --events sched`:
#                                                   ≈8.1 M events, sched_wakeup included)
#
# Uses target/release/stallscope (build it with `cargo build --release -p stallscope-cli`)
# unless STALLSCOPE is set. Each command runs RUNS times (default 3), interleaved; the best
# wall time and the best CPU time (user + sys, from GNU time) count, and the largest RSS. Timed: stallscope latency and
# stallscope analyze against `trace-cmd report > /dev/null`. The load average is printed
# before and after: on a shared machine wall times are only comparable at equal load.
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

# best CMD... — prints "WALL_MS CPU_MS RSS_KB": the smallest of RUNS runs each (RSS: the
# largest)
best() {
    tf=$(mktemp)
    bw= bc= br=0
    i=0
    while [ "$i" -lt "${RUNS:-3}" ]; do
        i=$((i + 1))
        /usr/bin/time -o "$tf" -f '%e %U %S %M' "$@" >/dev/null 2>&1 || { echo "FAILED FAILED FAILED"; rm -f "$tf"; return; }
        w=$(awk '{ printf "%d", $1 * 1000 }' "$tf")
        c=$(awk '{ printf "%d", ($2 + $3) * 1000 }' "$tf")
        r=$(awk '{ printf "%d", $4 }' "$tf")
        if [ -z "$bw" ] || [ "$w" -lt "$bw" ]; then bw=$w; fi
        if [ -z "$bc" ] || [ "$c" -lt "$bc" ]; then bc=$c; fi
        if [ "$r" -gt "$br" ]; then br=$r; fi
    done
    rm -f "$tf"
    echo "$bw $bc $br"
}

if [ "${1:-}" = "--make" ]; then
    make_trace "$2"
    shift
elif [ "${1:-}" = "--record" ]; then
    "$BIN" record -o "$2" --events sched --buffer-kb "${BUFFER_KB:-65536}" -- \
        perf bench sched pipe -l "${LOOPS:-1000000}" >/dev/null
    shift
fi
FILE=${1:?usage: $0 [--make|--record] FILE}
[ -x "$BIN" ] || { echo "build stallscope first: cargo build --release -p stallscope-cli" >&2; exit 1; }

events=$("$BIN" info "$FILE" | awk '/^Events:/ {print $2}')
echo "file: $FILE ($(du -h "$FILE" | cut -f1), $events events)"
echo "trace-cmd: $(trace-cmd --version 2>&1 | grep -m1 'trace-cmd version')"
[ -x /usr/bin/time ] || { echo "GNU time missing (apt-get install time)" >&2; exit 1; }
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"
# Interleaved: round i times each command once, so a load change hits all of them alike.
lat_w= lat_c= lat_r=0 an_w= an_c= an_r=0 tc_w= tc_c= tc_r=0
min() { if [ -z "$1" ] || [ "$2" -lt "$1" ]; then echo "$2"; else echo "$1"; fi; }
max() { if [ "$2" -gt "$1" ]; then echo "$2"; else echo "$1"; fi; }
runs=${RUNS:-3}
round=0
while [ "$round" -lt "$runs" ]; do
    round=$((round + 1))
    set -- $(RUNS=1 best "$BIN" latency "$FILE")
    lat_w=$(min "$lat_w" "$1"); lat_c=$(min "$lat_c" "$2"); lat_r=$(max "$lat_r" "$3")
    set -- $(RUNS=1 best "$BIN" analyze "$FILE")
    an_w=$(min "$an_w" "$1"); an_c=$(min "$an_c" "$2"); an_r=$(max "$an_r" "$3")
    set -- $(RUNS=1 best sh -c "trace-cmd report '$FILE' > /dev/null")
    tc_w=$(min "$tc_w" "$1"); tc_c=$(min "$tc_c" "$2"); tc_r=$(max "$tc_r" "$3")
done
echo "                              wall ms   CPU ms   max RSS KiB   (best of $runs, interleaved)"
printf '%-30s %7s %8s %13s\n' "stallscope latency" "$lat_w" "$lat_c" "$lat_r"
printf '%-30s %7s %8s %13s\n' "stallscope analyze" "$an_w" "$an_c" "$an_r"
printf '%-30s %7s %8s %13s\n' "trace-cmd report > /dev/null" "$tc_w" "$tc_c" "$tc_r"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.1f", a / b; else printf "n/a" }'; }
echo "latency speed-up: wall $(ratio "$tc_w" "$lat_w")x, CPU $(ratio "$tc_c" "$lat_c")x (target >= 50x)"
echo "analyze speed-up: wall $(ratio "$tc_w" "$an_w")x, CPU $(ratio "$tc_c" "$an_c")x"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
