#!/usr/bin/env bash
# iolat_vs_btt.sh — `stallscope iolat` against `btt` on the same block capture of >= 2 M requests.
#
# Usage:  sudo benches/iolat_vs_btt.sh [WORKDIR]
# Env:    STALLSCOPE=target-timeline/release/stallscope   (built with cargo build --release -p stallscope-cli)
#         REQUESTS=2200000   4 KiB random reads issued by fio (plus WRITES sequential 4 KiB writes)
#         WRITES=300000      sequential O_DIRECT writes (plugged, so some merge: Q/M traces)
#         READ_IOPS=18000 WRITE_IOPS=3000   fio rate limits (about 2 minutes of capture)
#         RUNS=3             timed runs per tool (best wall time is reported, all runs printed)
#         KEEP=0             1 keeps the capture in WORKDIR
#         REUSE=0            1 times an earlier KEEP=1 capture in WORKDIR again (no new capture)
#
# Capture (blktrace's own relay files are EPERM on this machine; the kernel's `blk` ftrace
# tracer gives the same actions, see Documentation/trace/ftrace.rst): a 2 GiB file in /dev/shm on a loop device with
# the mq-deadline scheduler (so Q G I D C and merges all appear); the kernel `blk` tracer on
# that device only (/sys/block/loopN/trace/enable) in binary mode (options/bin), streamed from
# trace_pipe while fio runs, so the ring buffer never has to hold the whole capture. trace_pipe
# in binary mode gives, per record, the ftrace context (u32 pid, u32 cpu, u64 ts) and the
# kernel's `struct blk_io_trace` + pdu; when the reader falls behind, the kernel writes a text
# line "CPU:N [LOST M EVENTS]" into the stream (skipped and counted). The Python step below writes what blktrace itself would
# have written: DEV.blktrace.<cpu> files (records of each CPU in time order, sequence numbers
# from 1 per CPU, a BLK_TN_PROCESS note naming each pid). Overruns of the ring buffer are
# reported (both tools read the same files either way).
#
# Timed on the same data:
#   blkparse -i DEV -D DIR -d dump.bin -O        (btt's input; timed separately)
#   btt -A -i dump.bin                            (the peer)
#   stallscope iolat DIR/DEV.blktrace.*           (per-CPU files, merged by stallscope; lean path)
#   stallscope iolat dump.bin                     (the same single file btt reads; lean path)
#   stallscope iolat --general-path DIR/DEV.blktrace.*   (the general reader: Event per record)
# with /usr/bin/time (wall, user+sys CPU, peak RSS). Agreement is checked on the way: btt's and
# stallscope's Per Device D2C and Q2C rows must be identical lines.
#
# The blk tracer cannot run in a tracefs instance (EINVAL), so it uses the top-level buffer: the
# script refuses to start unless the top level is idle (current_tracer nop, no events), waits
# up to 5 minutes for that, and restores it on exit.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
WORK=${1:-/tmp/iolat-bench-$$}
STALLSCOPE=${STALLSCOPE:-$ROOT/target-timeline/release/stallscope}
REQUESTS=${REQUESTS:-2200000}
WRITES=${WRITES:-300000}
READ_IOPS=${READ_IOPS:-18000}  # fio rate limits: unlimited, the loop device outruns the
WRITE_IOPS=${WRITE_IOPS:-3000} # trace_pipe reader and the kernel drops events
RUNS=${RUNS:-3}
KEEP=${KEEP:-0}
REUSE=${REUSE:-0}
[[ "$REUSE" == 1 ]] && KEEP=1 # before the exit trap: a failed check must not delete the capture
T=/sys/kernel/tracing
IMG=/dev/shm/iolat-bench-$$.img
LOOP=""
DEV=""
PIPE_PID=""
SAVED_BUF_KB=""
TOP_TAKEN=0

log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

cleanup() {
    set +e
    if [[ -n "$PIPE_PID" ]]; then kill "$PIPE_PID" 2> /dev/null; wait "$PIPE_PID" 2> /dev/null; fi
    if [[ -n "$DEV" && -e /sys/block/$DEV/trace/enable ]]; then echo 0 > "/sys/block/$DEV/trace/enable"; fi
    if ((TOP_TAKEN)); then
        echo 0 > $T/options/bin
        echo nop > $T/current_tracer
        [[ -n "$SAVED_BUF_KB" ]] && echo "$SAVED_BUF_KB" > $T/buffer_size_kb
        echo 1 > $T/tracing_on
    fi
    [[ -n "$LOOP" ]] && losetup -d "$LOOP"
    rm -f "$IMG"
    if [[ "$KEEP" != 1 ]]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

[[ $(id -u) == 0 ]] || die "needs root (loop device, tracefs)"
for t in fio losetup blkparse btt python3 /usr/bin/time; do
    command -v "$t" > /dev/null || die "missing $t (Debian packages: fio, util-linux, blktrace, python3, time)"
done
[[ -x "$STALLSCOPE" ]] || die "no release binary at $STALLSCOPE: CARGO_TARGET_DIR=target-timeline cargo build --release -p stallscope-cli"
mkdir -p "$WORK"

if [[ "$REUSE" == 1 ]]; then
    [[ -f "$WORK/dump.bin" && -d "$WORK/bt" ]] || die "REUSE=1 but no earlier capture in $WORK"
    DEV=$(basename "$(ls "$WORK"/bt/*.blktrace.0)" .blktrace.0)
    KEEP=1
    SPLIT="(reused capture)"
    OVERRUNS="(reused capture)"
else
# --- wait for an idle top-level tracefs ---
for ((i = 0; ; i++)); do
    if [[ $(cat $T/current_tracer) == nop && -z $(cat $T/set_event) ]]; then break; fi
    ((i < 60)) || die "top-level tracefs busy for 5 minutes (current_tracer $(cat $T/current_tracer))"
    sleep 5
done

# --- device ---
truncate -s 2G "$IMG"
dd if=/dev/zero of="$IMG" bs=1M count=2048 conv=notrunc status=none # allocate the tmpfs pages
LOOP=$(losetup -f --show "$IMG")
DEV=${LOOP#/dev/}
echo mq-deadline > "/sys/block/$DEV/queue/scheduler"
grep -q '\[mq-deadline\]' "/sys/block/$DEV/queue/scheduler" || die "could not set mq-deadline on $DEV"

# --- capture ---
TOP_TAKEN=1
SAVED_BUF_KB=$(cat $T/buffer_size_kb)
echo 0 > $T/tracing_on
echo 65536 > $T/buffer_size_kb
echo blk > $T/current_tracer
echo 1 > $T/options/bin
echo > $T/trace
echo 1 > "/sys/block/$DEV/trace/enable"
echo 1 > $T/tracing_on
cat $T/trace_pipe > "$WORK/pipe.raw" &
PIPE_PID=$!
log "capturing $REQUESTS random reads + $WRITES sequential writes on $LOOP (load: $(cut -d' ' -f1-3 /proc/loadavg))"
fio --output="$WORK/fio.txt" \
    --name=randread --filename="$LOOP" --rw=randread --bs=4k --direct=1 --ioengine=libaio \
    --iodepth=16 --number_ios="$REQUESTS" --io_size=64G --rate_iops="$READ_IOPS" \
    --name=seqwrite --filename="$LOOP" --rw=write --bs=4k --direct=1 --ioengine=libaio \
    --iodepth=16 --iodepth_batch_submit=16 --number_ios="$WRITES" --io_size=64G --offset=1G \
    --rate_iops="$WRITE_IOPS"
echo 0 > "/sys/block/$DEV/trace/enable"
sleep 2 # let trace_pipe drain
kill "$PIPE_PID"
wait "$PIPE_PID" 2> /dev/null || true
PIPE_PID=""
OVERRUNS=$(grep -h '^overrun' $T/per_cpu/cpu*/stats | awk '{ s += $2 } END { print s + 0 }')
cp $T/saved_cmdlines "$WORK/cmdlines"
echo 0 > $T/options/bin
echo nop > $T/current_tracer
echo "$SAVED_BUF_KB" > $T/buffer_size_kb
echo 1 > $T/tracing_on
TOP_TAKEN=0
losetup -d "$LOOP"
LOOP=""
rm -f "$IMG"

# --- per-CPU blktrace files ---
mkdir -p "$WORK/bt"
SPLIT=$(python3 - "$WORK/pipe.raw" "$WORK/cmdlines" "$WORK/bt" "$DEV" << 'EOF'
import struct, sys
raw_path, cmdlines_path, outdir, dev = sys.argv[1:5]
MAGIC = 0x65617407
CTX = struct.Struct("<IIQ")            # ftrace context: pid, cpu, ts
TRACE = struct.Struct("<IIQQIIIIIHH")  # blk_io_trace: magic seq time sector bytes action pid device cpu error pdu_len
NOTE = 0x04000000                      # BLK_TN_PROCESS
data = memoryview(open(raw_path, "rb").read())
comms = {}
for line in open(cmdlines_path, encoding="utf-8", errors="replace"):
    pid, _, comm = line.rstrip("\n").partition(" ")
    if pid.isdigit():
        comms[int(pid)] = comm
def lost_line(pos):
    """Length of a "CPU:N [LOST M EVENTS]" line at pos (with its newline) and M, or (0, 0)."""
    if bytes(data[pos:pos + 4]) != b"CPU:":
        return 0, 0
    end = bytes(data[pos:pos + 64]).find(b"\n")
    if end < 0:
        sys.exit(f"{raw_path}: byte {pos}: unterminated text line")
    words = bytes(data[pos:pos + end]).split()
    return end + 1, int(words[2]) if len(words) > 2 and words[2].isdigit() else 0
# pass 1: pids and first time per CPU, and validation
pos, n, first, pids, devno, lost = 0, 0, {}, {}, 0, 0
while pos < len(data):
    skip, m = lost_line(pos)
    if skip:
        pos += skip
        lost += m
        continue
    if pos + 64 > len(data):
        sys.exit(f"{raw_path}: truncated record at byte {pos}")
    _, cpu, ts = CTX.unpack_from(data, pos)
    magic, = struct.unpack_from("<I", data, pos + 16)
    if magic != MAGIC:
        sys.exit(f"{raw_path}: byte {pos + 16}: expected magic {MAGIC:#x}, found {magic:#x}")
    pid, devno = struct.unpack_from("<II", data, pos + 16 + 32)
    pdu_len, = struct.unpack_from("<H", data, pos + 16 + 46)
    first.setdefault(cpu, ts)
    pids.setdefault(cpu, set()).add(pid)
    pos += 64 + pdu_len
    n += 1
# pass 2: notes first, then the records with per-CPU sequence numbers
outs, seqs = {}, {}
for cpu in sorted(first):
    f = open(f"{outdir}/{dev}.blktrace.{cpu}", "wb", buffering=1 << 20)
    seq = 0
    for pid in sorted(pids[cpu]):
        comm = comms.get(pid, "<...>").encode()[:15] + b"\0"
        seq += 1
        f.write(TRACE.pack(MAGIC, seq, first[cpu], 0, 0, NOTE, pid, devno, cpu, 0, len(comm)))
        f.write(comm)
    outs[cpu], seqs[cpu] = f, seq
pos = 0
seq_at = struct.Struct("<I")
while pos < len(data):
    skip, _ = lost_line(pos)
    if skip:
        pos += skip
        continue
    _, cpu, _ = CTX.unpack_from(data, pos)
    pdu_len, = struct.unpack_from("<H", data, pos + 16 + 46)
    rec = bytearray(data[pos + 16:pos + 64 + pdu_len])
    seqs[cpu] += 1
    seq_at.pack_into(rec, 4, seqs[cpu])
    outs[cpu].write(rec)
    pos += 64 + pdu_len
for f in outs.values():
    f.close()
print(f"{n} records on CPUs {sorted(first)}, {lost} lost (trace_pipe LOST lines)")
EOF
)
rm -f "$WORK/pipe.raw"
blkparse -q -i "$DEV" -D "$WORK/bt" -d "$WORK/dump.bin" -O > /dev/null
fi
FILES=("$WORK/bt/$DEV".blktrace.*)

timeit() { # timeit LABEL OUTFILE CMD… → "wall user+sys maxrss_kb" on stdout
    local label=$1 out=$2
    shift 2
    /usr/bin/time -f '%e %U %S %M' -o "$WORK/time.txt" "$@" > "$out" 2> "$WORK/stderr.txt" ||
        die "$label failed: $(tail -3 "$WORK/stderr.txt")"
    awk '{ printf "%s %.2f %s\n", $1, $2 + $3, $4 }' "$WORK/time.txt"
}

timeit blkparse /dev/null blkparse -q -i "$DEV" -D "$WORK/bt" -d "$WORK/dump2.bin" -O > "$WORK/blkparse.time"
rm -f "$WORK/dump2.bin"
BLKPARSE=$(cat "$WORK/blkparse.time")

best() { sort -n | head -1; }
declare -A RES
for tool in btt iolat_percpu iolat_dump iolat_general; do
    : > "$WORK/$tool.runs"
    for ((r = 1; r <= RUNS; r++)); do
        case $tool in
            btt) (cd "$WORK" && timeit btt "$WORK/btt.txt" btt -A -i "$WORK/dump.bin") >> "$WORK/$tool.runs" ;;
            iolat_percpu) timeit iolat "$WORK/iolat.txt" "$STALLSCOPE" iolat "${FILES[@]}" >> "$WORK/$tool.runs" ;;
            iolat_dump) timeit iolat "$WORK/iolat_dump.txt" "$STALLSCOPE" iolat "$WORK/dump.bin" >> "$WORK/$tool.runs" ;;
            iolat_general) timeit iolat "$WORK/iolat_general.txt" "$STALLSCOPE" iolat --general-path "${FILES[@]}" >> "$WORK/$tool.runs" ;;
        esac
    done
    RES[$tool]=$(best < "$WORK/$tool.runs")
done

# --- agreement: Per Device D2C / Q2C rows ---
rows() { awk -v ph="$2" '$1 == ph && $2 == "MIN" { on = 1; next } on && /^\(/ { print; next } on && NF == 0 { on = 0 }' "$1"; }
AGREE=ok
for ph in Q2Q Q2G G2I Q2M I2D D2C Q2C; do
    b=$(sed -n '/Per Device/,/All Devices/p' "$WORK/btt.txt" | rows /dev/stdin "$ph")
    s=$(sed -n '/Per Device/,/All Devices/p' "$WORK/iolat.txt" | rows /dev/stdin "$ph")
    if [[ "$b" != "$s" ]]; then
        AGREE="DIFFER on $ph: btt [$b] stallscope [$s]"
        break
    fi
done
COUNTS=$(head -1 "$WORK/iolat.txt")
REQS=$(sed -n 's/.* \([0-9]*\) requests and.*/\1/p' <<< "$COUNTS")

read -r bw bc br <<< "${RES[btt]}"
read -r sw sc sr <<< "${RES[iolat_percpu]}"
read -r dw dc dr <<< "${RES[iolat_dump]}"
read -r gw gc gr <<< "${RES[iolat_general]}"
read -r pw pc pr <<< "$BLKPARSE"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "inf" }'; }
echo "iolat_vs_btt: $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), best of $RUNS runs"
echo "capture: $(du -sh "$WORK/bt" | cut -f1) in ${#FILES[@]} per-CPU files; $SPLIT; ring-buffer overruns: $OVERRUNS"
echo "fio: $(grep -h 'IOPS=' "$WORK/fio.txt" | sed 's/^ *//' | tr '\n' ';')"
echo "stallscope: $COUNTS"
((REQS >= 2000000)) || echo "WARNING: only $REQS requests (< 2 M); raise REQUESTS"
printf '%-34s %9s %9s %11s\n' tool "wall s" "cpu s" "peak RSS"
printf '%-34s %9s %9s %9s MB\n' "blkparse -d (btt's input)" "$pw" "$pc" $((pr / 1024))
printf '%-34s %9s %9s %9s MB\n' "btt -A dump.bin" "$bw" "$bc" $((br / 1024))
printf '%-34s %9s %9s %9s MB\n' "stallscope iolat per-CPU files" "$sw" "$sc" $((sr / 1024))
printf '%-34s %9s %9s %9s MB\n' "stallscope iolat dump.bin" "$dw" "$dc" $((dr / 1024))
printf '%-34s %9s %9s %9s MB\n' "stallscope iolat --general-path" "$gw" "$gc" $((gr / 1024))
echo "speedup vs btt (wall): per-CPU files $(ratio "$bw" "$sw")x, dump.bin $(ratio "$bw" "$dw")x; incl. blkparse -d: $(ratio "$(awk -v a="$bw" -v b="$pw" 'BEGIN{print a+b}')" "$sw")x"
echo "speedup vs btt (cpu):  per-CPU files $(ratio "$bc" "$sc")x, dump.bin $(ratio "$bc" "$dc")x, general path $(ratio "$bc" "$gc")x"
echo "all runs (wall cpu rss_kb): btt [$(tr '\n' ';' < "$WORK/btt.runs")] iolat [$(tr '\n' ';' < "$WORK/iolat_percpu.runs")] iolat dump [$(tr '\n' ';' < "$WORK/iolat_dump.runs")] general [$(tr '\n' ';' < "$WORK/iolat_general.runs")]"
echo "agreement with btt (Per Device Q2Q Q2G G2I Q2M I2D D2C Q2C rows): $AGREE"
[[ "$AGREE" == ok ]]
