#!/usr/bin/env bash
# Needs the harness in ../shared/bench (rawload.c), beside this repository's
# root; BENCH=DIR points elsewhere. rawload is built into $TOOLS (default
# /tmp/gearshift-threadcpu), as perf/threadcpu.sh does.
#
# R_drain (the harness's R group: N jobs queued by `rawload bg`, then 8 raw
# workers drain them) against several servers, interleaved a rep at a time,
# each run on a fresh server. Prints every run, then per server the median
# server and load-generator CPU per job and rate, and each server's rate and
# CPU as a ratio to the first one's in the same rep (paired medians): a
# difference of 1-2 % between two builds shows there, where the harness's
# 3-rep ratios move by ±10 %.
#
#   perf/drain-pairs.sh REPS NAME=CMD [NAME=CMD ...]   # {port} in CMD
#   perf/drain-pairs.sh 12 gearmand="/usr/sbin/gearmand -L 127.0.0.1 -p {port} \
#       -t 0 --hashtable-buckets 200003 --log-file=none" \
#       old="/tmp/gs-old serve -L 127.0.0.1 -p {port} --store memory --log-file none" \
#       new="target/release/gearshift serve -L 127.0.0.1 -p {port} --store memory --log-file none"
#
# Environment: N (jobs, 200000), OUT (raw lines, /tmp/drain-pairs.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-../shared/bench}
TOOLS=${TOOLS:-/tmp/gearshift-threadcpu}
N=${N:-200000}
OUT=${OUT:-/tmp/drain-pairs.txt}
REPS=${1:?usage: perf/drain-pairs.sh REPS NAME=CMD ...}
shift
[ $# -ge 1 ] || { echo "name at least one server" >&2; exit 2; }
[ -f "$BENCH/rawload.c" ] || { echo "no harness at $BENCH (set BENCH=...)" >&2; exit 2; }
mkdir -p "$TOOLS"
[ -x "$TOOLS/rawload" ] || cc -O2 -o "$TOOLS/rawload" "$BENCH/rawload.c" -lm
RAW=$TOOLS/rawload

: > "$OUT"
for rep in $(seq 1 "$REPS"); do
  for spec in "$@"; do
    name=${spec%%=*}
    port=$("$RAW" freeport)
    cmd=${spec#*=}
    cmd=${cmd//\{port\}/$port}
    $cmd &
    pid=$!
    for _ in $(seq 50); do "$RAW" ping -p "$port" >/dev/null 2>&1 && break; sleep 0.1; done
    "$RAW" bg -p "$port" -P "$pid" -T 60 -f drain -n "$N" -m 4 -D 64 -L queue >/dev/null
    line=$("$RAW" drain -p "$port" -P "$pid" -T 60 -f drain -n "$N" -k 8 -L R_drain)
    kill -TERM "$pid"
    wait "$pid" || true
    echo "$line" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sys.argv[1], sys.argv[2], d["server_cpu_s_per_mop"], round(d["rate"]),
      round(d["client_cpu_s"] / d["ops"] * 1e6, 2), d["ok"])' "$rep" "$name" | tee -a "$OUT"
  done
done

python3 - "$OUT" <<'EOF'
import collections, statistics as st, sys
runs = collections.defaultdict(dict)
names = []
for line in open(sys.argv[1]):
    rep, name, cpu, rate, client, ok = line.split()
    runs[name][rep] = (float(cpu), float(rate), float(client), ok == "True")
    if name not in names:
        names.append(name)
first = names[0]
print(f"\n{'server':<16}{'cpu us/job':>11}{'rate/s':>10}{'load us/job':>12}"
      f"{'rate/' + first:>16}{' (min..max)':>14}{'cpu/' + first:>14}  ok")
for n in names:
    r = runs[n]
    reps = [k for k in r if k in runs[first]]
    rate = [r[k][1] / runs[first][k][1] for k in reps]
    cpu = [r[k][0] / runs[first][k][0] for k in reps]
    print(f"{n:<16}{st.median(v[0] for v in r.values()):>11.2f}"
          f"{st.median(v[1] for v in r.values()):>10.0f}"
          f"{st.median(v[2] for v in r.values()):>12.2f}"
          f"{st.median(rate):>16.3f}  ({min(rate):.2f}..{max(rate):.2f})"
          f"{st.median(cpu):>12.3f}  {all(v[3] for v in r.values())}")
EOF
