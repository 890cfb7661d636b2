#!/usr/bin/env bash
# Needs the harness in ../shared/bench (rawload.c), beside this
# repository's root; BENCH=DIR points elsewhere.
#
# Instructions a Gearshift server executes per job of R_submit (the
# harness's pipelined raw submit: `rawload bg`, 4 connections x 64
# SUBMIT_JOB_BG in flight), counted by valgrind's callgrind. Unlike rates
# and CPU times on this shared VM, the count barely moves from run to run,
# so it tells apart changes of a few percent to the submit path that timed
# runs cannot. It counts user-space instructions only: page faults, system
# calls and cache misses are not in it, so a rate still needs
# perf/submit-bound.sh or the harness.
#
#   perf/submit-instructions.sh [GEARSHIFT_BINARY ...]
#
# Prints, per binary, the instructions of the whole process (start-up
# included, ~1 % at the default) divided by the jobs, and the top functions
# by their own instructions per job. Environment: BENCH (the harness dir
# with rawload.c, default ../shared/bench), N (jobs, default 200000), TOP
# (functions listed, default 15), MODE (`submit`, default; `drain`: the
# jobs are then drained by 8 raw workers, and the count covers both; `fg`:
# the harness's R_fg instead, 4 client connections x 32 SUBMIT_JOB in
# flight and 8 echo workers, so a job's count covers its submission,
# assignment, completion and the forwarded WORK_COMPLETE).
# KEEP=DIR keeps each run's callgrind.out.<n> there, for
# `callgrind_annotate` (the binaries are numbered in the order given).
# Needs valgrind (Debian package `valgrind`).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-../shared/bench}
N=${N:-200000}
TOP=${TOP:-15}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
[ $# -gt 0 ] || set -- "$PWD/target/release/gearshift"
WORK=$(mktemp -d /tmp/submit-instructions.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -w -o "$WORK/rawload" "$BENCH/rawload.c" -lm
RAW=$WORK/rawload

i=0
for gs in "$@"; do
  i=$((i + 1))
  [ -x "$gs" ] || { echo "no binary at $gs" >&2; exit 2; }
  port=$("$RAW" freeport)
  out=$WORK/callgrind.out
  valgrind --tool=callgrind --callgrind-out-file="$out" \
    "$gs" serve -L 127.0.0.1 -p "$port" --log-file none --store memory \
    2>"$WORK/valgrind.log" &
  pid=$!
  up=
  for _ in $(seq 100); do
    sleep 0.2
    if "$RAW" ping -p "$port" >/dev/null 2>&1; then up=1; break; fi
  done
  [ -n "$up" ] || { echo "server under valgrind did not come up" >&2; kill "$pid"; exit 1; }
  if [ "${MODE:-submit}" = fg ]; then
    "$RAW" fg -p "$port" -f cg_fg -n "$N" -m 4 -k 8 -D 32 -T 600 >"$WORK/load.json"
  else
    "$RAW" bg -p "$port" -f cg -n "$N" -D 64 >"$WORK/load.json"
  fi
  grep -q '"ok":true' "$WORK/load.json" || { echo "load run failed: $(cat "$WORK/load.json")" >&2; kill "$pid"; exit 1; }
  if [ "${MODE:-submit}" = drain ]; then
    "$RAW" drain -p "$port" -f cg -n "$N" -k 8 >"$WORK/drain.json"
    grep -q '"ok":true' "$WORK/drain.json" || { echo "drain failed: $(cat "$WORK/drain.json")" >&2; kill "$pid"; exit 1; }
  fi
  kill -INT "$pid"
  wait "$pid" || true
  total=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$WORK/valgrind.log")
  echo "$gs: $((total / N)) instructions per job ($total for $N jobs)"
  # A function's own count summed over the source files inlined into it.
  callgrind_annotate --inclusive=no --auto=no --threshold=100 "$out" 2>/dev/null |
    grep -E '^ *[0-9,]+ \( *[0-9.]+%\) ' | grep -v 'PROGRAM TOTALS' | sed 's/,//g; s/ \[[^]]*\]$//' |
    awk -v n="$N" '{ ir = $1; sub(/^ *[0-9]+ \( *[0-9.]+%\) +/, ""); sub(/^[^ ]*\.(rs|S|c|h):/, "")
      own[$0] += ir } END { for (f in own) printf "  %7.1f  %s\n", own[f] / n, substr(f, 1, 110) }' |
    sort -rn | awk -v top="$TOP" 'NR <= top'
  if [ -n "${KEEP:-}" ]; then mv "$out" "$KEEP/callgrind.out.$i"; else rm -f "$out"; fi
done
