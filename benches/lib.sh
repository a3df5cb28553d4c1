# lib.sh — shared by the benchmark scripts (sourced): logging, timing with peak RSS, medians,
# ratios and recording the benchmark traces. Needs GNU time (/usr/bin/time) and bash ≥ 5.
# The caller may set RUNS (timed runs per command, default 5) and RT=1 (every timed command
# under `chrt -f 50`, root: wall times then hold on a machine busy with other work).

RUNS=${RUNS:-5}
RUNNER=()
if [[ "${RT:-0}" == 1 ]]; then
    RUNNER=(chrt -f 50)
fi
TIME_OUT=$(mktemp)
trap 'rm -f "$TIME_OUT"' EXIT

log() { printf '[bench] %s\n' "$*" >&2; }

if [[ ! -x /usr/bin/time ]]; then
    log "installing GNU time"
    apt-get install -y time > /dev/null || { apt-get update > /dev/null && apt-get install -y time > /dev/null; }
fi

# median — the median of the numbers on stdin
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# minimum — the smallest of the numbers on stdin
minimum() { sort -g | head -1; }

# measure NAME CMD... — run RUNS times; sets MEDIAN_S (wall), MEDIAN_CPU (user + sys),
# MEDIAN_KIB (peak RSS), MIN_S and MIN_CPU, all empty if any run failed
measure() {
    local name=$1
    shift
    local secs=() cpus=() kibs=() i
    MEDIAN_S="" MEDIAN_CPU="" MEDIAN_KIB="" MIN_S="" MIN_CPU=""
    for ((i = 1; i <= RUNS; i++)); do
        local t0 t1
        t0=$EPOCHREALTIME
        if ! "${RUNNER[@]}" /usr/bin/time -o "$TIME_OUT" -f '%e %U %S %M' "$@" > /dev/null 2> /dev/null; then
            log "$name: run $i FAILED ($(tail -1 "$TIME_OUT"))"
            return 0
        fi
        t1=$EPOCHREALTIME
        local s u y k c
        read -r s u y k < <(tail -1 "$TIME_OUT")
        # Wall time in ms steps from the shell's clock (time's %e has 10 ms steps, too
        # coarse at 0.13 s); it includes starting the tool under /usr/bin/time, the same
        # for every tool.
        s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
        c=$(awk -v u="$u" -v y="$y" 'BEGIN { printf "%.2f", u + y }')
        secs+=("$s")
        cpus+=("$c")
        kibs+=("$k")
        log "$name: run $i: ${s} s wall, ${c} s CPU, ${k} KiB"
    done
    MEDIAN_S=$(printf '%s\n' "${secs[@]}" | median)
    MEDIAN_CPU=$(printf '%s\n' "${cpus[@]}" | median)
    MEDIAN_KIB=$(printf '%s\n' "${kibs[@]}" | median)
    MIN_S=$(printf '%s\n' "${secs[@]}" | minimum)
    MIN_CPU=$(printf '%s\n' "${cpus[@]}" | minimum)
}

# ratio A B — A / B with 2 decimals, or "n/a"
ratio() {
    if [[ -n "$1" && -n "$2" ]]; then
        awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "inf" }'
    else
        echo "n/a"
    fi
}

# record_trace FILE LOOPS [PERF RECORD ARGS…] — records `perf bench sched pipe -l LOOPS`
# into FILE unless it exists: `perf sched record` by default, else `perf record ARGS…`
record_trace() {
    local file=$1 loops=$2
    shift 2
    if [[ -s "$file" ]]; then
        log "reusing $file ($(stat -c %s "$file") bytes)"
        return 0
    fi
    command -v perf > /dev/null || { log "perf missing (apt-get install linux-perf)"; exit 1; }
    local how=(perf sched record)
    if [[ $# -gt 0 ]]; then
        how=(perf record "$@")
    fi
    log "recording $file: ${how[*]} -- perf bench sched pipe -l $loops"
    local start end
    start=$(date +%s%N)
    "${how[@]}" -o "$file.tmp" -- perf bench sched pipe -l "$loops" > /dev/null 2>&1
    mv "$file.tmp" "$file"
    chmod 0644 "$file"
    end=$(date +%s%N)
    log "recorded $(stat -c %s "$file") bytes in $(( (end - start) / 1000000 )) ms"
}
