#!/usr/bin/env bash
# Fleet throughput and memory (#22): `stallscope fleet` over every trace file of fixtures/,
# then over COPIES traces made by copying them (default 200), and prints
#   - the rate of one trace at a time (--jobs 1) and of all cores (--jobs CPUS), and the
#     efficiency: parallel rate / (one-at-a-time rate × cores); the goal is ≥ 80 %;
#   - the peak RSS of a run over each fixture once and over the COPIES traces (goal:
#     independent of the number of traces; the bound is about --jobs × the largest trace's
#     analysis, since each worker holds one trace at a time).
# Usage: benches/fleet_throughput.sh [COPIES]
set -euo pipefail
cd "$(dirname "$0")/.."
copies="${1:-200}"
cargo build --release -q -p stallscope-cli
bin="$PWD/target/release/stallscope"
cores="$(nproc)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

mapfile -t fixtures < <(find fixtures -type f \( -name '*.perf.data*' -o -name '*.dat' \
  -o -name '*.dat.*' -o -name '*.data' -o -name '*.data.*' \) | sort)
echo "fixtures: ${#fixtures[@]} trace files, $(du -ch "${fixtures[@]}" | tail -1 | cut -f1)"

copy() { # copy N DIR: N traces, the fixtures round-robin
  mkdir -p "$2"
  for ((i = 0; i < $1; i++)); do
    f="${fixtures[$((i % ${#fixtures[@]}))]}"
    cp "$f" "$2/$(printf %04d "$i")-$(basename "$f")"
  done
}

# peak_and_time OUT ARGS…: runs the command, prints "SECONDS PEAK_KIB"
peak_and_time() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.perf_counter()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(f"{time.perf_counter() - t:.3f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}")
PY
}

echo "all fixtures, jobs=$cores:"
read -r t kib < <(peak_and_time "$bin" fleet "${fixtures[@]}" -o "$work/fx")
echo "  ${#fixtures[@]} traces in $t s, peak RSS $((kib / 1024)) MiB"

copy "$copies" "$work/many"
copy "${#fixtures[@]}" "$work/few"
read -r t1 _ < <(peak_and_time "$bin" fleet --jobs 1 "$work/many/*" -o "$work/o1")
read -r tn kib_many < <(peak_and_time "$bin" fleet --jobs "$cores" "$work/many/*" -o "$work/on")
read -r _ kib_few < <(peak_and_time "$bin" fleet --jobs "$cores" "$work/few/*" -o "$work/of")
python3 - "$copies" "$cores" "$t1" "$tn" "$kib_few" "$kib_many" "${#fixtures[@]}" <<'PY'
import sys
n, cores, t1, tn, few, many, nfx = int(sys.argv[1]), int(sys.argv[2]), *map(float, sys.argv[3:5]), *map(int, sys.argv[5:])
r1, rn = n / t1, n / tn
print(f"{n} traces: one at a time {t1:.2f} s ({r1:.1f} traces/s); {cores} jobs {tn:.2f} s ({rn:.1f} traces/s)")
print(f"efficiency: {rn / (r1 * cores) * 100:.0f} % of one-at-a-time rate x {cores} cores (goal >= 80 %)")
print(f"peak RSS: {nfx} traces {few / 1024:.0f} MiB, {n} traces {many / 1024:.0f} MiB (ratio {many / few:.2f})")
PY
