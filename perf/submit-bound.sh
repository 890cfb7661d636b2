#!/usr/bin/env bash
# Needs the harness in ../shared/bench (rawload.c), beside this
# repository's root; BENCH=DIR points elsewhere.
#
# How far Gearshift's R_submit is from what this machine allows any server.
# R_submit is the harness's pipelined raw submit: `rawload bg`, 4
# connections with 64 SUBMIT_JOB_BG in flight each. The yardstick is
# crates/gearshift-server/examples/submit_ceiling.rs: one epoll thread that
# answers each submission with JOB_CREATED and keeps only the bytes the
# jobs arrived in (no record, no index, no queue), so it does the least work
# any Gearman server must do for this load. The script runs it, Gearshift
# --store memory and tuned gearmand (-t 0 --hashtable-buckets 200003)
# alternating, REPS times at each queue depth in SIZES, and prints per run
# the rate, the server's user and system CPU per job (/proc/PID/stat) and
# its page faults per job, then the medians and the median ratios to
# gearmand.
#
#   perf/submit-bound.sh [GEARSHIFT_BINARY]      (idle machine, ~2 min)
#
# Environment: BENCH (the harness dir with rawload.c, default
# ../shared/bench), REPS (5), SIZES ("200000 1000000").
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-../shared/bench}
REPS=${REPS:-5}
SIZES=${SIZES:-200000 1000000}
GS=${1:-$PWD/target/release/gearshift}
[ -x "$GS" ] || { echo "no gearshift binary at $GS (cargo build --release -p gearshift)" >&2; exit 2; }
cargo build --quiet --release -p gearshift-server --example submit_ceiling
WORK=$(mktemp -d /tmp/submit-bound.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cp target/release/examples/submit_ceiling "$WORK/"
cc -O2 -w -o "$WORK/rawload" "$BENCH/rawload.c" -lm
RAW=$WORK/rawload
RESULTS=$WORK/results.txt

# one server, one R_submit run; appends "name n rate user_s sys_s faults ok"
run() { # name, n, command with {port}
  local name=$1 n=$2 port cmd pid u0 s0 f0 u1 s1 f1 out
  port=$("$RAW" freeport)
  cmd=${3//\{port\}/$port}
  $cmd >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 50); do "$RAW" ping -p "$port" >/dev/null 2>&1 && break; sleep 0.1; done
  read -r u0 s0 f0 < <(awk '{print $14, $15, $10}' "/proc/$pid/stat")
  out=$("$RAW" bg -p "$port" -P "$pid" -n "$n" -m 4 -D 64)
  read -r u1 s1 f1 < <(awk '{print $14, $15, $10}' "/proc/$pid/stat")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  python3 - "$name" "$n" "$out" "$((u1 - u0))" "$((s1 - s0))" "$((f1 - f0))" >>"$RESULTS" <<'EOF'
import json, os, sys
name, n, out, du, ds, df = sys.argv[1:]
d = json.loads(out)
hz = os.sysconf('SC_CLK_TCK')
print(name, n, d['rate'], int(du) / hz, int(ds) / hz, df, d['ok'])
EOF
  tail -1 "$RESULTS"
}

for n in $SIZES; do
  for rep in $(seq "$REPS"); do
    echo "# size $n, rep $rep"
    run yardstick "$n" "$WORK/submit_ceiling {port}"
    run gearshift "$n" "$GS serve -L 127.0.0.1 -p {port} --log-file none --store memory"
    run gearmand "$n" "/usr/sbin/gearmand -L 127.0.0.1 -p {port} -t 0 --hashtable-buckets 200003 --log-file=none"
  done
done

python3 - "$RESULTS" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
sizes = sorted({int(r[1]) for r in rows})
names = ['yardstick', 'gearshift', 'gearmand']
print()
print('| jobs | server | rate (median, min..max) | ratio to gearmand (median of reps) | user µs/job | sys µs/job | faults/job | ok |')
print('|---|---|---|---|---|---|---|---|')
for n in sizes:
    by = {s: [r for r in rows if r[0] == s and int(r[1]) == n] for s in names}
    gm = [float(r[2]) for r in by['gearmand']]
    for s in names:
        rs = by[s]
        rate = [float(r[2]) for r in rs]
        ratios = [a / b for a, b in zip(rate, gm)]
        user = statistics.median(float(r[3]) for r in rs) / n * 1e6
        sys_ = statistics.median(float(r[4]) for r in rs) / n * 1e6
        flt = statistics.median(int(r[5]) for r in rs) / n
        ok = sum(r[6] == 'True' for r in rs)
        print(f'| {n:,} | {s} | {statistics.median(rate):,.0f} ({min(rate):,.0f}..{max(rate):,.0f}) '
              f'| {statistics.median(ratios):.2f} ({min(ratios):.2f}..{max(ratios):.2f}) '
              f'| {user:.2f} | {sys_:.2f} | {flt:.3f} | {ok}/{len(rs)} |')
EOF
