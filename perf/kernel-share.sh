#!/usr/bin/env bash
# Needs the harness in ../shared/bench (rawload.c and gearload.c),
# beside this repository's root; BENCH=DIR points elsewhere.
#
# How much of each server's CPU goes to the kernel, scenario by scenario:
# Gearshift --store memory against tuned gearmand (-t 0, 200003 buckets),
# alternating, REPS times. For each scenario it prints both servers' user and
# system CPU (ms, from /proc/PID/stat) and Gearshift's system time as a
# fraction of gearmand's whole CPU. Where that fraction is above 0.2, the
# "server CPU <= 1/5 of gearmand's" target (perf/history.md) cannot be met
# by any change to Gearshift's own code: its kernel time alone is more.
#
#   perf/kernel-share.sh [GEARSHIFT_BINARY]      (idle machine, ~3 min)
#
# Environment: BENCH (the harness dir with rawload.c and gearload.c,
# default ../shared/bench), REPS (3).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-../shared/bench}
REPS=${REPS:-3}
GS=${1:-$PWD/target/release/gearshift}
[ -x "$GS" ] || { echo "no gearshift binary at $GS (cargo build --release -p gearshift)" >&2; exit 2; }
TOOLS=$(mktemp -d /tmp/kernel-share.XXXXXX)
trap 'rm -rf "$TOOLS"' EXIT
cc -O2 -w -o "$TOOLS/rawload" "$BENCH/rawload.c" -lm
cc -O2 -w -o "$TOOLS/gearload" "$BENCH/gearload.c" -lgearman -lpthread -lm
RAW=$TOOLS/rawload
GL=$TOOLS/gearload

ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }

# one server, every scenario; prints "server scenario user_ms sys_ms"
measure() { # name, command with {port}
  local name=$1 port cmd pid u0 s0 u1 s1 scen
  port=$("$RAW" freeport)
  cmd=${2//\{port\}/$port}
  $cmd &
  pid=$!
  for _ in $(seq 50); do "$RAW" ping -p "$port" >/dev/null 2>&1 && break; sleep 0.1; done
  for scen in R_echo R_submit R_drain R_fg A_submit_drain B_rt; do
    read -r u0 s0 < <(ticks "$pid")
    case $scen in
      R_echo) "$RAW" echo -p "$port" -n 500000 ;;
      R_submit) "$RAW" bg -p "$port" -n 200000 -f ks_r ;;
      R_drain) "$RAW" drain -p "$port" -n 200000 -f ks_r ;;
      R_fg) "$RAW" fg -p "$port" -n 200000 -D 32 -f ks_fg ;;
      A_submit_drain) "$GL" bg -p "$port" -n 100000 -f ks_a ;;
      B_rt) "$GL" rt -p "$port" -c 8 -w 4 -d 5 -f ks_b ;;
    esac >/dev/null 2>&1
    read -r u1 s1 < <(ticks "$pid")
    echo "$name $scen $(((u1 - u0) * 10)) $(((s1 - s0) * 10))"
  done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

{
  for _ in $(seq "$REPS"); do
    measure gearmand "/usr/sbin/gearmand -L 127.0.0.1 -p {port} -t 0 --hashtable-buckets 200003 --log-file=none"
    measure gearshift "$GS serve -L 127.0.0.1 -p {port} --log-file none --store memory"
  done
} | python3 -c '
import sys, statistics as st
rows = [l.split() for l in sys.stdin if l.strip()]
scens = list(dict.fromkeys(r[1] for r in rows))
def pick(srv, sc, col): return [int(r[col]) for r in rows if r[0] == srv and r[1] == sc]
print("| scenario | gearmand user / sys ms | Gearshift user / sys ms | Gearshift sys / gearmand total |")
print("|---|---:|---:|---:|")
for sc in scens:
    gu, gs_ = pick("gearmand", sc, 2), pick("gearmand", sc, 3)
    su, ss = pick("gearshift", sc, 2), pick("gearshift", sc, 3)
    fr = [s / (u + k) for s, u, k in zip(ss, gu, gs_) if u + k > 0]
    print(f"| {sc} | {st.median(gu):.0f} / {st.median(gs_):.0f} | {st.median(su):.0f} / {st.median(ss):.0f} "
          f"| **{st.median(fr):.2f}** ({min(fr):.2f}..{max(fr):.2f}) |")
'
