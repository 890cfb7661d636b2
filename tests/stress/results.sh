#!/usr/bin/env bash
# Long stress check that every foreground result reaches its own client.
# It uses the independent load tools of ../shared/bench (gearload.c, built on
# libgearman, and rawload.c, raw sockets), compiled from there into a temp
# directory; nothing of that harness is copied into this repository.
#
#   tests/stress/results.sh                    # 3 runs per store, ~4 min
#   RUNS=10 STORE=memory tests/stress/results.sh
#
# Each run starts a fresh release server, queues DEEP background jobs on each
# of three functions of their own (rawload bg), then, with that queue
# standing, runs CLIENTS libgearman client threads doing gearman_client_do
# back to back against WORKERS echo workers (gearload rt, N jobs, every
# result compared with its own payload), then rawload fg (pipelined raw
# clients, a distinct named unique per job, every result checked exactly
# once), and finally checks that the deep queue is still whole. Any
# mismatch, error, missing or duplicate result fails the run.
#
# Uniques: by default gearload runs with -U (no unique). libgearman 1.1.20
# otherwise gives every job a time-based UUID from uuid_generate_time_safe,
# and without uuidd or a writable /var/lib/libuuid, libuuid keeps its clock
# state per thread: two client threads can draw the same clock sequence and
# then hand out the same UUID in the same microsecond. A Gearman server
# (gearmand as well as Gearshift) coalesces two foreground jobs with the same
# unique, so one client then gets the other's result: a "mismatch" that is
# the client library's doing. UNIQUES=libgearman keeps those UUIDs anyway,
# with the shim tests/stress/uuid_repeats.c preloaded into gearload: it
# counts repeated uniques, and a run whose mismatches are no more than the
# uniques that repeated is reported as such instead of failing.
# (UUID_REPEAT_EVERY=K, passed through to the shim, forces a repeat every K
# jobs: against gearmand and Gearshift alike each one costs a mismatch.)
#
# Environment: BENCH (harness dir, default ../shared/bench), GEARSHIFT
# (binary, default target/release/gearshift, built if missing), RUNS (3),
# STORE (memory | durable | both; default both), IO_THREADS (0: the machine's default), DEEP
# (200000), CLIENTS (64), WORKERS (16), N (100000), FG_N (200000), UNIQUES
# (none | libgearman). Everything runs on 127.0.0.1; every load phase has a
# job cap and a wall-clock cap; a server is stopped only by the PID this
# script started (TERM, then KILL after 5 s).
set -uo pipefail
cd "$(dirname "$0")/../.."
BENCH=${BENCH:-../shared/bench}
GEARSHIFT=${GEARSHIFT:-$PWD/target/release/gearshift}
RUNS=${RUNS:-3}
STORE=${STORE:-both}
IO_THREADS=${IO_THREADS:-0}
DEEP=${DEEP:-200000}
CLIENTS=${CLIENTS:-64}
WORKERS=${WORKERS:-16}
N=${N:-100000}
FG_N=${FG_N:-200000}
UNIQUES=${UNIQUES:-none}

[ -f "$BENCH/gearload.c" ] && [ -f "$BENCH/rawload.c" ] ||
  { echo "no load tools at $BENCH (set BENCH=...)" >&2; exit 2; }
[ -x "$GEARSHIFT" ] || cargo build --release -p gearshift || exit 2

WORK=$(mktemp -d /tmp/gs-stress.XXXXXX)
PID=""
stop_server() {
  [ -n "$PID" ] || return 0
  if [ -d "/proc/$PID" ]; then
    kill -TERM "$PID" 2>/dev/null
    for _ in $(seq 1 50); do [ -d "/proc/$PID" ] || break; sleep 0.1; done
    if [ -d "/proc/$PID" ] && ! grep -q '^State:.*Z' "/proc/$PID/status" 2>/dev/null; then
      kill -KILL "$PID" 2>/dev/null
    fi
  fi
  wait "$PID" 2>/dev/null
  PID=""
}
trap 'stop_server; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

flags=(-O2 -Wall -Wno-format-truncation -Wno-unused-function)
cc "${flags[@]}" -o "$WORK/gearload" "$BENCH/gearload.c" -lgearman -lpthread -lm || exit 2
cc "${flags[@]}" -o "$WORK/rawload" "$BENCH/rawload.c" -lm || exit 2
G=$WORK/gearload
R=$WORK/rawload
unique_flag=(-U)
preload=""
if [ "$UNIQUES" = libgearman ]; then
  unique_flag=()
  cc -O2 -Wall -shared -fPIC -o "$WORK/uuid_repeats.so" tests/stress/uuid_repeats.c -ldl -lpthread ||
    exit 2
  preload=$WORK/uuid_repeats.so
fi

case $STORE in
  both) stores="memory durable" ;;
  memory | durable) stores=$STORE ;;
  *) echo "STORE is memory, durable or both" >&2; exit 2 ;;
esac

# field NAME from a JSON line ("" if absent)
field() { grep -oE "\"$1\":[^,}]*" <<<"$2" | head -1 | cut -d: -f2; }

failed=0
for store in $stores; do
  for run in $(seq 1 "$RUNS"); do
    port=$("$R" freeport)
    data=$WORK/data-$store-$run
    args=(serve -L 127.0.0.1 -p "$port" --log-file none --io-threads "$IO_THREADS")
    if [ "$store" = memory ]; then args+=(--store memory); else args+=(--data-dir "$data"); fi
    "$GEARSHIFT" "${args[@]}" >"$WORK/server.log" 2>&1 &
    PID=$!
    if ! "$R" ping -p "$port" -T 20; then
      echo "$store run $run: server did not answer" >&2; failed=1; stop_server; continue
    fi
    problems=""
    tag=$$-$run
    for f in a b c; do
      line=$("$R" bg -p "$port" -P "$PID" -f "deep_${f}_$tag" -n "$DEEP" -T 120 -L deep_$f)
      [ "$(field ok "$line")" = true ] || problems+=" deep_$f:$line"
    done
    line=$(LD_PRELOAD=$preload "$G" rt -p "$port" -P "$PID" -f "rt_$tag" -c "$CLIENTS" \
      -w "$WORKERS" -n "$N" -d 60 -T 90 "${unique_flag[@]}" 2>"$WORK/gearload.err")
    rt_jobs=$(field ops "$line")
    mismatches=$(field mismatches "$line")
    repeats=$(grep -oE 'repeated=[0-9]+' "$WORK/gearload.err" | cut -d= -f2)
    note=""
    if [ -n "$repeats" ] && [ "${mismatches:-x}" != 0 ] && [ "${mismatches:-x}" -le "$repeats" ] &&
      [ "$(field errors "$line")" = 0 ]; then
      note=", $mismatches mismatched results from $repeats repeated libgearman uniques"
    elif [ "$(field ok "$line")" != true ] || [ "$mismatches" != 0 ] ||
      [ "$(field errors "$line")" != 0 ]; then
      problems+=" rt:$line $(head -3 "$WORK/gearload.err")"
    fi
    line=$("$R" fg -p "$port" -P "$PID" -f "fg_$tag" -n "$FG_N" -m 8 -k 8 -D 16 -u -T 90 -L fg)
    [ "$(field ok "$line")" = true ] || problems+=" fg:$line"
    status=$("$R" status -p "$port")
    for f in a b c; do
      total=$(awk -v f="deep_${f}_$tag" '$1 == f { print $2 }' <<<"$status")
      [ "$total" = "$DEEP" ] || problems+=" deep_$f total ${total:-none} (want $DEEP)"
    done
    [ -d "/proc/$PID" ] || problems+=" server died: $(tail -3 "$WORK/server.log")"
    stop_server
    rm -rf "$data"
    if [ -z "$problems" ]; then
      echo "$store run $run: ok (rt $rt_jobs jobs, fg $FG_N jobs, $((3 * DEEP)) queued on other functions$note)"
    else
      echo "$store run $run: FAILED:$problems"
      failed=1
    fi
  done
done
exit $failed
