#!/usr/bin/env bash
# Needs the harness in ../shared/bench (rawload.c, gearload.c), beside this
# repository's root; BENCH=DIR points elsewhere. The load tools are built
# into $TOOLS (default /tmp/gearshift-threadcpu), since the harness folder
# may be read-only.
#
# Per-thread CPU per job of each server while a load runs (issue 16): the
# thread that must run serially bounds what more cores can give. Each thread's
# CPU is read by perf/threadsplit.py (the same /proc fields as the harness's
# threadcpu.py, with user and system time apart). Servers are run
# interleaved, a fresh one per scenario and rep:
#
#   perf/threadcpu.sh [REPS]        # default 3 reps
#
# Scenarios (as in ../shared/bench/lib.sh, R group, and a libgearman round trip):
#   R_fg     rawload fg, 4 client conns x 32 in flight, 8 raw echo workers, N jobs
#   R_drain  N jobs queued by rawload bg, then 8 raw workers drain them
#   B_rt     gearload rt, 16 libgearman clients, 8 echo workers, N/2 jobs
# Servers (override with SERVERS="name=cmd;name=cmd", {port} for the port):
#   gearmand-t4   gearmand 1.1.20 -t 4 --hashtable-buckets 200003
#   gearshift-io2 Gearshift --store memory --io-threads 2 (two I/O threads
#                 sharing the hub: the layout a many-core machine gets), with
#                 --http on {hport} so the time its hub was held is read
#                 from /metrics
#   gearshift     Gearshift --store memory with the machine's default
#
# Prints one line per run and, at the end, the medians per server and
# scenario: the busiest thread's us/job, the time Gearshift's shared hub was
# held per job (its serial part: wall-clock time, so an upper bound), the
# helper thread's CPU (gearshift-core: timers, commits, calls; with its user
# and system parts) and the whole process's. Raw output goes to $OUT
# (default /tmp/threadcpu.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-../shared/bench}
TOOLS=${TOOLS:-/tmp/gearshift-threadcpu}
REPS=${1:-3}
N=${N:-200000}
OUT=${OUT:-/tmp/threadcpu.txt}
GEARSHIFT=${GEARSHIFT:-$PWD/target/release/gearshift}
[ -f "$BENCH/rawload.c" ] || { echo "no harness at $BENCH (set BENCH=...)" >&2; exit 2; }
[ -x "$GEARSHIFT" ] || cargo build --release -p gearshift
mkdir -p "$TOOLS"
[ -x "$TOOLS/rawload" ] || cc -O2 -o "$TOOLS/rawload" "$BENCH/rawload.c" -lm
[ -x "$TOOLS/gearload" ] || cc -O2 -o "$TOOLS/gearload" "$BENCH/gearload.c" -lgearman -lpthread -lm
RAW=$TOOLS/rawload
GL=$TOOLS/gearload

default_servers="gearmand-t4=/usr/sbin/gearmand -L 127.0.0.1 -p {port} -t 4 --hashtable-buckets 200003 --log-file=none"
default_servers+=";gearshift-io2=$GEARSHIFT serve -L 127.0.0.1 -p {port} --store memory --log-file none --io-threads 2 --http 127.0.0.1:{hport}"
default_servers+=";gearshift=$GEARSHIFT serve -L 127.0.0.1 -p {port} --store memory --log-file none"
IFS=';' read -r -a servers <<< "${SERVERS:-$default_servers}"

: > "$OUT"
run_one() { # name cmd scenario rep
  local name=$1 cmd=$2 sc=$3 rep=$4 port hport pid jobs fn metrics=()
  port=$("$RAW" freeport)
  hport=$("$RAW" freeport)
  [[ $cmd == *"{hport}"* ]] && metrics=(--metrics "http://127.0.0.1:$hport/metrics")
  cmd=${cmd//\{hport\}/$hport}
  bash -c "exec ${cmd//\{port\}/$port}" > /dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do "$RAW" ping -p "$port" > /dev/null 2>&1 && break; sleep 0.05; done
  fn="tc_${sc}_$$_$RANDOM"
  case $sc in
    R_fg) jobs=$N
      set -- "$RAW" fg -p "$port" -P "$pid" -f "$fn" -n "$N" -m 4 -k 8 -D 32 -L R_fg ;;
    R_drain) jobs=$N
      "$RAW" bg -p "$port" -P "$pid" -f "$fn" -n "$N" -m 4 -D 64 -L R_submit > /dev/null
      set -- "$RAW" drain -p "$port" -P "$pid" -f "$fn" -n "$N" -k 8 -L R_drain ;;
    B_rt) jobs=$((N / 2))
      set -- "$GL" rt -p "$port" -P "$pid" -c 16 -w 8 -n "$jobs" -s 100 -d 60 -U ;;
  esac
  local res
  res=$(python3 perf/threadsplit.py "${metrics[@]}" "$pid" "$jobs" -- "$@" 2>&1 | grep -v '^{' || true)
  kill "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  # one line per thread, busiest first: "name tid us/job T user U sys S"
  local proc busiest core held
  proc=$(awk '/ us\/job/ && $1 != "hub-held" {s += $4} END {printf "%.2f", s}' <<< "$res")
  busiest=$(awk '/ us\/job/ && $1 != "hub-held" {print $4; exit}' <<< "$res")
  core=$(awk '$1 == "gearshift-core" {printf "%s/%s/%s", $4, $6, $8}' <<< "$res")
  held=$(awk '$1 == "hub-held" {print $3}' <<< "$res")
  echo "$name $sc rep=$rep busiest=$busiest held=${held:--} core=${core:--} process=$proc" | tee -a "$OUT"
  echo "$res" | sed 's/^/    /' >> "$OUT"
}

for rep in $(seq "$REPS"); do
  for sc in R_fg R_drain B_rt; do
    for s in "${servers[@]}"; do
      run_one "${s%%=*}" "${s#*=}" "$sc" "$rep"
    done
  done
done

echo
echo "medians over $REPS reps (us of CPU per job):"
python3 - "$OUT" <<'EOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) (\S+) rep=\d+ busiest=(\S+) held=(\S+) core=(\S+) process=(\S+)", line)
    if m:
        rows.setdefault((m[1], m[2]), []).append((m[3], m[5], m[6], m[4]))
med = lambda xs: "%.2f" % statistics.median(float(x) for x in xs) if xs and "-" not in xs else "-"
def core(xs):
    if "-" in xs:
        return "-"
    parts = [x.split("/") for x in xs]
    return "%s (user %s, sys %s)" % tuple(med([p[i] for p in parts]) for i in range(3))
print("| server | scenario | busiest thread | hub held | helper thread (gearshift-core) | whole process |")
print("|---|---|---:|---:|---:|---:|")
for (name, sc), v in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print("| %s | %s | %s | %s | %s | %s |" % (name, sc, med([x[0] for x in v]), med([x[3] for x in v]), core([x[1] for x in v]), med([x[2] for x in v])))
EOF
