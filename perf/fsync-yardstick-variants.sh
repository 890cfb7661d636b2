#!/usr/bin/env bash
# Needs the harness in ../shared/bench (rawload.c and gearload.c, compiled
# by perf/fsync-common.sh), beside this repository's root; BENCH=DIR points
# elsewhere.
#
# Every schedule of the durable yardstick
# (crates/gearshift-server/examples/fsync_ceiling.rs) on fsync A_submit,
# next to gearmand -t 0 in memory (default hash table) and Gearshift
# --durability fsync, interleaved, REPS times: is there a way to acknowledge
# only durable jobs that reaches half of gearmand's rate with libgearman's
# 4 synchronous clients on this machine? Prints jobs/s and each one's ratio
# to gearmand in the same repetition.
#
#   perf/fsync-yardstick-variants.sh [GEARSHIFT_BINARY]   (~1 min a rep)
#
# Environment: BENCH (default ../shared/bench), REPS (3), JOBS (100000, the harness's A_N),
# DIR (default /tmp), YARD (the yardstick binary, built when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-100000}
NAME=fsync-variants source perf/fsync-common.sh

# A_submit (4 libgearman clients, no drain) against one server; prints jobs/s.
rate() {
  local port cmd pid out
  port=$("$RAW" freeport)
  cmd=${1//\{port\}/$port}
  rm -rf "$WORK/data" "$WORK/fsync-ceiling.log"
  $cmd &
  pid=$!
  for _ in $(seq 50); do "$RAW" ping -p "$port" >/dev/null 2>&1 && break; sleep 0.1; done
  out=$("$GL" bg -p "$port" -P "$pid" -w 0 -c 4 -n "$JOBS" 2>/dev/null | head -1)
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  python3 -c 'import json,sys; print(int(json.loads(sys.argv[1])["rate"]))' "$out"
}

names=(gearmand yard yard-direct yard-hold150 yard-threaded yard-pipelined gearshift-fsync)
cmds=(
  "/usr/sbin/gearmand -L 127.0.0.1 -p {port} -t 0 --log-file=none"
  "$YARD {port} $WORK"
  "$YARD {port} $WORK --direct"
  "$YARD {port} $WORK --hold-us 150"
  "$YARD {port} $WORK --threaded --direct"
  "$YARD {port} $WORK --pipelined"
  "$GS serve -L 127.0.0.1 -p {port} --log-file none --data-dir $WORK/data --durability fsync"
)
printf '%-4s' rep
printf ' %15s' "${names[@]}"
echo
for rep in $(seq "$REPS"); do
  rates=()
  for i in "${!cmds[@]}"; do
    rates+=("$(rate "${cmds[$i]}")")
  done
  python3 -c '
import sys
rep, rates = sys.argv[1], [int(r) for r in sys.argv[2:]]
print("%-4s" % rep + "".join(" %15s" % ("%d" % r if i == 0 else "%d %.2f" % (r, r / rates[0])) for i, r in enumerate(rates)))
' "$rep" "${rates[@]}"
done
