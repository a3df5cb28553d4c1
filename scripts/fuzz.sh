#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/fuzz_targets/) for a given time each, seeded from the
# repository's fixtures, and keeps every input that crashed, hung or ran out of memory as a
# regression input under fuzz/regressions/TARGET/ (crates/cli/tests/fuzz_regressions.rs
# runs them through `stallscope` on every test run).
#
# Usage:  scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET…]      (default 600 s, every target)
# Needs:  the nightly toolchain (`rustup toolchain install nightly`) and cargo-fuzz
#         (installed here from crates.io when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-600}
shift || true
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz.sh: the nightly toolchain is missing: rustup toolchain install nightly" >&2
  exit 2
fi
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
TARGETS=("$@")
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  mapfile -t TARGETS < <(cargo +nightly fuzz list --fuzz-dir fuzz)
fi
WORK=${FUZZ_WORK:-target/fuzz-work}
mkdir -p "$WORK"

# seed FILE…: copy (decompressed) fixture files of at most 2 MB into the corpus directory
seed() {
  local dir=$1; shift
  mkdir -p "$dir"
  local f
  for f in "$@"; do
    [[ -f $f ]] || continue
    local out=$dir/$(echo "$f" | tr '/' '_')
    case $f in
      *.xz) xz -dc "$f" > "${out%.xz}" ;;
      *.zst) zstd -qdc "$f" > "${out%.zst}" ;;
      *) cp "$f" "$out" ;;
    esac
  done
  find "$dir" -type f -size +2M -delete
}

for t in "${TARGETS[@]}"; do
  corpus=$WORK/corpus/$t
  case $t in
    perf_data*) seed "$corpus" $(find fixtures crates/read/tests/data -name '*.perf.data*' -o -name '*.data.xz') ;;
    tracedat*) seed "$corpus" $(find fixtures -name '*.dat' -o -name '*.dat.zst' -o -name '*.dat.xz') ;;
    blktrace*) seed "$corpus" $(find fixtures -name '*.blktrace.*') ;;
    profile) seed "$corpus" $(find fixtures -name '*.folded' -o -name '*report*.txt' -o -name 'perf_cpu_fp.data') ;;
    *) seed "$corpus" $(find fixtures -name '*.perf.data' -o -name '*.dat.zst' -o -name '*.blktrace.0' -o -name '*.blkparse.txt.zst' -o -name '*.txt' | head -200) ;;
  esac
  echo "fuzz.sh: $t for ${SECS}s ($(ls "$corpus" | wc -l) seeds)" >&2
  status=0
  mkdir -p "$WORK/artifacts/$t"
  cargo +nightly fuzz run --fuzz-dir fuzz "$t" "$corpus" -- \
    -max_total_time="$SECS" -rss_limit_mb=4096 -timeout=60 -print_final_stats=1 \
    -artifact_prefix="$WORK/artifacts/$t/" > "$WORK/$t.log" 2>&1 || status=$?
  grep -E "panicked at|ERROR: |SUMMARY|stat::number_of_executed_units|stat::peak_rss_mb|^attempt|^called" "$WORK/$t.log" | head -20 >&2 || true
  mkdir -p "$WORK/artifacts/$t"
  for a in "$WORK/artifacts/$t"/*; do
    [[ -f $a ]] || continue
    mkdir -p "fuzz/regressions/$t"
    zstd -q -19 -f "$a" -o "fuzz/regressions/$t/$(basename "$a").zst"
    echo "fuzz.sh: $t found $(basename "$a"): kept as fuzz/regressions/$t/$(basename "$a").zst" >&2
  done
  if [[ $status -ne 0 ]]; then
    echo "fuzz.sh: $t stopped with status $status" >&2
    failed=1
  fi
done
exit "${failed:-0}"
